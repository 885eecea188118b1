/*
 * fuzz_log_debug.c - the debug option parser (src/base/log.h:
 * nv_log_set_debug), which reads `-o debug=...`.
 *
 * Input: the spec (cut at its first NUL).
 *
 * Checks, against an independent reading of log.h: words are separated
 * by ',', '+' or ':'; empty words are skipped; each other word must be
 * "all" or a subsystem name.  Then nv_log_set_debug answers 0 and sets
 * exactly the mask of the named subsystems (all bits for "all"), or
 * -EINVAL with *bad and *badlen naming the first unknown word inside the
 * spec.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "src/base/log.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *bad = NULL, *p, *want_bad = NULL;
	unsigned want_mask = 0;
	int badlen = -1, want_badlen = 0, rc;
	char *spec;

	fuzz_quiet();
	spec = fuzz_strndup(data, size);
	for (p = spec; *p;) {
		size_t n = strcspn(p, ",+:");
		bool found = n == 0;

		if (n == 3 && !strncmp(p, "all", 3)) {
			want_mask = ~0u;
			found = true;
		}
		for (int i = 0; !found && i < NV_SUB_COUNT; i++) {
			const char *name = nv_log_subsys_name((enum nv_subsys)i);

			if (strlen(name) == n && !strncmp(p, name, n)) {
				want_mask |= 1u << i;
				found = true;
			}
		}
		if (!found) {
			want_bad = p;
			want_badlen = (int)n;
			break;
		}
		p += n;
		if (*p)
			p++;
	}

	rc = nv_log_set_debug(spec, &bad, &badlen);
	if (want_bad) {
		FUZZ_ASSERT(rc == -EINVAL);
		FUZZ_ASSERT(bad == want_bad && badlen == want_badlen);
	} else {
		FUZZ_ASSERT(rc == 0);
		FUZZ_ASSERT(nv_log_debug_mask == want_mask);
	}
	nv_log_debug_mask = 0;
	free(spec);
	return 0;
}
