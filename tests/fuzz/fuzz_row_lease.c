/*
 * fuzz_row_lease.c - the writer lease row codec (meta/leases.h:
 * meta_lease_decode).
 *
 * Input: the value.
 *
 * Checks: meta_lease_decode answers 0 or -EBADMSG; a decoded row has a
 * valid star id, an address that fits its array, an epoch above 0, and
 * re-encodes to exactly the input.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "meta/chains.h"
#include "meta/leases.h"
#include "src/base/buf.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta_lease l;
	struct nv_buf b;
	int rc;

	fuzz_quiet();
	rc = meta_lease_decode(data, size, &l);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	if (rc == 0) {
		FUZZ_ASSERT(meta_star_check(l.star) == 0 && l.epoch > 0);
		FUZZ_ASSERT(strnlen(l.addr, sizeof(l.addr)) < sizeof(l.addr));
		nv_buf_init(&b, SIZE_MAX);
		FUZZ_ASSERT(meta_lease_encode(&l, &b) == 0);
		FUZZ_ASSERT(b.len == size && !memcmp(b.ptr, data, size));
		nv_buf_free(&b);
	}
	return 0;
}
