/*
 * fuzz_store_names.c - object key validation and the store URL parsers
 * (engine/store/store.h: store_key_check, store_open with its s3://
 * parser in engine/store/s3/url.c; engine/store/set.h: store_set_open, the
 * ';'-separated bucket set of -o express=).
 *
 * Input: the string (cut at its first NUL), used as a key, as a store
 * URL and as a bucket set.
 *
 * Checks:
 *  - store_key_check() agrees with an independent reading of store.h
 *    invariant 5: 1..1024 bytes of [A-Za-z0-9._~/-], '/'-separated
 *    components none of which is empty, "." or "..".
 *  - store_open() answers 0, -EINVAL, -ENOMEM or -EIO and leaves *out
 *    alone on failure; only an s3:// URL can open (s3.h: opening does
 *    not contact the server), and then closes cleanly.
 *  - store_set_open() answers the same way, and an opened set closes.
 * URLs that name the directory backend (an absolute path, or dir:/...,
 * also as a member of a set) are skipped: opening them creates
 * directories.  The AWS_* credential variables are cleared first, so
 * only credentials in the URL count.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "engine/store/set.h"
#include "engine/store/store.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	return 0;
}

static bool key_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '~' || c == '/' || c == '-';
}

static int key_oracle(const char *k)
{
	size_t n = strlen(k);

	if (n < 1 || n > STORE_KEY_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!key_char((unsigned char)k[i]))
			return -EINVAL;
	for (const char *c = k;;) {
		size_t l = strcspn(c, "/");

		if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
			return -EINVAL;
		if (!c[l])
			return 0;
		c += l + 1;
	}
}

/* Would store_open(u) reach the directory backend? */
static bool names_dir(const char *u, size_t n)
{
	return (n >= 1 && u[0] == '/') || (n >= 5 && !strncmp(u, "dir:/", 5));
}

/* ... for any member of a ';'-separated set (empty members are skipped
 * by the parser, as by strtok). */
static bool set_names_dir(const char *s)
{
	for (;;) {
		size_t n = strcspn(s, ";");

		if (names_dir(s, n))
			return true;
		if (!s[n])
			return false;
		s += n + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store *sentinel = (struct store *)&sentinel; /* never a store */
	struct store *s = sentinel;
	char *str;
	int rc;

	fuzz_quiet();
	str = fuzz_strndup(data, size);
	FUZZ_ASSERT(store_key_check(str) == key_oracle(str));
	if (!names_dir(str, strlen(str))) {
		rc = store_open(str, &s);
		FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOMEM || rc == -EIO);
		if (rc == 0) {
			FUZZ_ASSERT(!strncmp(str, "s3://", 5) && s != sentinel);
			store_close(s);
		} else {
			FUZZ_ASSERT(s == sentinel);
		}
	}
	if (!set_names_dir(str)) {
		s = sentinel;
		rc = store_set_open(str, "z1", &s);
		FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOMEM || rc == -EIO);
		if (rc == 0) {
			FUZZ_ASSERT(s != sentinel);
			store_close(s);
		}
	}
	free(str);
	return 0;
}
