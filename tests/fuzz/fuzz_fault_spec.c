/*
 * fuzz_fault_spec.c - the fault-injection spec parser
 * (engine/store/fault.h: fault_store_wrap), read from -o store_faults
 * and NOVAFS_STORE_FAULTS.
 *
 * Input: the spec (cut at its first NUL).
 *
 * The inner store is a do-nothing backend wrapped with store_wrap(), so
 * no directory is touched; its close counts calls.  The wrapped store is
 * only closed, never used: a spec may ask for latency.
 *
 * Checks: fault_store_wrap answers 0 or -EINVAL (or -ENOMEM); the inner
 * store is closed exactly once whatever the answer (ownership passes
 * "also on failure"); on 0 the store is named after the inner one.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "engine/store/fault.h"
#include "engine/store/store.h"
#include "tests/fuzz/fuzz.h"

static int closes;

static void null_close(void *be)
{
	(void)be;
	closes++;
}

static const struct store_backend_ops null_ops = {
	.scheme = "null",
	.close = null_close,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store *inner, *out = NULL;
	char *spec;
	int rc;

	fuzz_quiet();
	spec = fuzz_strndup(data, size);
	closes = 0;
	FUZZ_ASSERT(store_wrap(&null_ops, NULL, "null", &inner) == 0);
	rc = fault_store_wrap(inner, spec, &out);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	if (rc == 0) {
		FUZZ_ASSERT(out && !strcmp(store_name(out), "fault(null)"));
		FUZZ_ASSERT(closes == 0);
		store_close(out);
	}
	FUZZ_ASSERT(closes == 1);
	free(spec);
	return 0;
}
