/*
 * fuzz_failpoint.c - the failpoint spec parser (src/base/failpoint.h:
 * nv_fp_arm), which reads NOVAFS_FAILPOINTS from the environment.
 *
 * Input: the spec (cut at its first NUL, as getenv() would give it).
 *
 * Checks:
 *  - nv_fp_arm answers 0 or -EINVAL;
 *  - a point whose name does not occur in the spec is not armed: hitting
 *    it changes nothing (failpoint.h invariant 1);
 *  - when the spec holds no "crash" and no "delay", hitting a point it
 *    names is harmless to try, and answers 0 or a negative errno no
 *    larger than the parser's bound (3600000);
 *  - nv_fp_reset() disarms everything.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "src/base/failpoint.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *spec;
	bool harmless;
	int rc;

	fuzz_quiet();
	spec = fuzz_strndup(data, size);
	harmless = !strstr(spec, "crash") && !strstr(spec, "delay");
	rc = nv_fp_arm(spec);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL);
	for (int i = 0; nv_fp_names[i]; i++) {
		if (!strstr(spec, nv_fp_names[i])) {
			FUZZ_ASSERT(nv_fp_hit(nv_fp_names[i]) == 0);
		} else if (harmless) {
			for (int k = 0; k < 3; k++) {
				int r = nv_fp_hit(nv_fp_names[i]);

				FUZZ_ASSERT(r <= 0 && r >= -3600000);
			}
		}
	}
	nv_fp_reset();
	FUZZ_ASSERT(atomic_load(&nv_fp_armed) == 0);
	for (int i = 0; nv_fp_names[i]; i++)
		FUZZ_ASSERT(NV_FP(nv_fp_names[i]) == 0);
	free(spec);
	return 0;
}
