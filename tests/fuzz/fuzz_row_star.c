/*
 * fuzz_row_star.c - the star registry row codec (meta/stars.h:
 * meta_star_decode).
 *
 * Input: u8 id length L | L bytes of star id (the row's key part; cut at
 *        a NUL, as a C string would be) | the value.
 *
 * Checks: meta_star_decode answers 0 or -EBADMSG; a decoded row has a
 * valid id equal to the key's, state running or closed, a host that fits
 * its array, and re-encodes to exactly the input (the host must be the
 * bytes that were stored).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "meta/chains.h"
#include "meta/stars.h"
#include "src/base/buf.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in;
	struct meta_star s;
	struct nv_buf b;
	const uint8_t *val;
	unsigned l;
	size_t n;
	char *id;
	int rc;

	fuzz_quiet();
	fuzz_in_init(&in, data, size);
	l = fuzz_u8(&in);
	if (l > in.len - in.off)
		l = (unsigned)(in.len - in.off);
	id = fuzz_strndup(in.p + in.off, l);
	in.off += l;
	val = fuzz_rest(&in, &n);

	rc = meta_star_decode(val, n, id, &s);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	if (rc == 0) {
		FUZZ_ASSERT(meta_star_check(id) == 0 && !strcmp(s.id, id));
		FUZZ_ASSERT(s.state == STAR_RUNNING || s.state == STAR_CLOSED ||
			    s.state == STAR_DRAINING);
		FUZZ_ASSERT(strnlen(s.host, sizeof(s.host)) < sizeof(s.host));
		nv_buf_init(&b, SIZE_MAX);
		FUZZ_ASSERT(meta_star_encode(&s, &b) == 0);
		FUZZ_ASSERT(b.len == n && !memcmp(b.ptr, val, n));
		nv_buf_free(&b);
	}
	free(id);
	return 0;
}
