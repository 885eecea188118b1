/*
 * fuzz_row_cursors.c - the chain cursor row codec (meta/cursors.h:
 * meta_cursors_decode).
 *
 * Input: the value.
 *
 * Checks: meta_cursors_decode answers 0 or -EBADMSG; a decoded row keeps
 * cursors.h's rules (known class, valid star name, trimmed <=
 * grace_target <= rewritten: invariant 1) and re-encodes to exactly the
 * input.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "meta/chains.h"
#include "meta/cursors.h"
#include "meta/streams.h"
#include "src/base/buf.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta_cursors c;
	struct nv_buf b;
	int rc;

	fuzz_quiet();
	rc = meta_cursors_decode(data, size, &c);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	if (rc)
		return 0;
	FUZZ_ASSERT(c.cls < NV_CLASS_COUNT && meta_star_check(c.star) == 0);
	FUZZ_ASSERT(c.trimmed <= c.grace_target && c.grace_target <= c.rewritten);

	nv_buf_init(&b, SIZE_MAX);
	FUZZ_ASSERT(meta_cursors_encode(&c, &b) == 0);
	FUZZ_ASSERT(b.len == size && !memcmp(b.ptr, data, size));
	nv_buf_free(&b);
	return 0;
}
