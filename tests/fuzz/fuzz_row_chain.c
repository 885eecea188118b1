/*
 * fuzz_row_chain.c - the chain row codec (meta/chains.h:
 * meta_chain_decode).
 *
 * Input: the value.
 *
 * Checks: meta_chain_decode answers 0 or -EBADMSG; a decoded row keeps
 * chains.h's rules (known class, valid star name, state LIVE, FENCED or
 * SETTLED, clean 0/1, checkpoint <= cut once not LIVE) and re-encodes to
 * exactly the input.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "meta/chains.h"
#include "meta/streams.h"
#include "src/base/buf.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta_chain c;
	struct nv_buf b;
	int rc;

	fuzz_quiet();
	rc = meta_chain_decode(data, size, &c);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	if (rc)
		return 0;
	FUZZ_ASSERT(c.cls < NV_CLASS_COUNT && meta_star_check(c.star) == 0);
	FUZZ_ASSERT(c.state >= CHAIN_LIVE && c.state <= CHAIN_SETTLED && c.clean <= 1);
	FUZZ_ASSERT(c.state == CHAIN_LIVE || c.checkpoint <= c.cut);
	FUZZ_ASSERT(strcmp(meta_chain_state_name(c.state), "?"));

	nv_buf_init(&b, SIZE_MAX);
	FUZZ_ASSERT(meta_chain_encode(&c, &b) == 0);
	FUZZ_ASSERT(b.len == size && !memcmp(b.ptr, data, size));
	nv_buf_free(&b);
	return 0;
}
