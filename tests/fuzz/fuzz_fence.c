/*
 * fuzz_fence.c - the fence object decoder (engine/chain.h:
 * chain_fence_decode), which recovery applies to whatever object it
 * finds in a slot.
 *
 * Input: u8 fix | the object.  fix & 1 rewrites bytes 24..27 with the
 * CRC of bytes 0..23 (when the object has them), so the fuzzer gets past
 * the checksum to the other checks.
 *
 * Checks: the answer is 1 or 0; 1 only for a 32-byte object, and then
 * chain_fence_encode() of the decoded epoch and cut gives back exactly
 * the object (one encoding per fence).
 */
#include "config.h"

#include <string.h>

#include "engine/chain.h"
#include "src/base/crc32c.h"
#include "src/base/endian.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in;
	uint8_t re[CHAIN_FENCE_SIZE];
	uint64_t epoch = 0, cut = 0;
	const uint8_t *rest;
	uint8_t *obj;
	size_t n;
	unsigned fix;
	int rc;

	fuzz_quiet();
	fuzz_in_init(&in, data, size);
	fix = fuzz_u8(&in);
	rest = fuzz_rest(&in, &n);
	obj = fuzz_memdup(rest, n);
	if ((fix & 1) && n >= 28)
		nv_put_le32(obj + 24, nv_crc32c(0, obj, 24));

	rc = chain_fence_decode(obj ? obj : (const uint8_t *)"", n, &epoch, &cut);
	FUZZ_ASSERT(rc == 0 || rc == 1);
	if (rc == 1) {
		FUZZ_ASSERT(n == CHAIN_FENCE_SIZE);
		chain_fence_encode(re, epoch, cut);
		FUZZ_ASSERT(!memcmp(re, obj, CHAIN_FENCE_SIZE));
	}
	free(obj);
	return 0;
}
