/*
 * test_api_auth.c - unit tests for api/auth.c: the cluster secret file
 * and the credential check.
 *
 * Pins auth.h invariant 1 (a secret file group or others may access, a
 * directory, a symbolic link, an empty, short, long or multi-line file
 * are refused with a reason) and the check itself: only
 * "Bearer <secret>" exactly passes (not a prefix, not an extension, not
 * another scheme).  Constant time is a property of the code (SHA-256
 * then CRYPTO_memcmp), not something a timed unit test could pin on a
 * shared machine.
 */
#include "config.h"
#include "api/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define GOOD "s3cr3t-of-enough-bytes"

static char dir[64];
static char path[128];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_api_auth.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/secret", dir);
	return 0;
}

static int teardown(void **state)
{
	char link[160];

	(void)state;
	snprintf(link, sizeof(link), "%s/link", dir);
	unlink(link);
	unlink(path);
	rmdir(dir);
	return 0;
}

static void write_secret(const void *text, size_t len, mode_t mode)
{
	int fd;

	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

static int load(const char *p, struct api_secret **s)
{
	const char *why = NULL;
	int rc = api_secret_load(p, s, &why);

	if (rc)
		assert_non_null(why);
	else
		assert_non_null(*s);
	return rc;
}

static void test_api_auth_load(void **state)
{
	struct api_secret *s = NULL;

	(void)state;
	write_secret(GOOD "\n", strlen(GOOD) + 1, 0600);
	assert_int_equal(load(path, &s), 0);
	assert_string_equal(api_secret_text(s), GOOD); /* the newline is dropped */
	api_secret_free(s);
	write_secret(GOOD, strlen(GOOD), 0400);
	assert_int_equal(load(path, &s), 0);
	api_secret_free(s);
	api_secret_free(NULL);
}

static void test_api_auth_load_refused(void **state)
{
	struct api_secret *s = (struct api_secret *)1;
	char big[API_SECRET_MAX + 2], link[160];

	(void)state;
	write_secret(GOOD, strlen(GOOD), 0640);
	assert_int_equal(load(path, &s), -EPERM);
	assert_null(s);
	write_secret(GOOD, strlen(GOOD), 0604);
	assert_int_equal(load(path, &s), -EPERM);
	write_secret(GOOD, strlen(GOOD), 0620);
	assert_int_equal(load(path, &s), -EPERM);
	write_secret("", 0, 0600);
	assert_int_equal(load(path, &s), -EINVAL);
	write_secret("short\n", 6, 0600);
	assert_int_equal(load(path, &s), -EINVAL);
	write_secret(GOOD "\n" GOOD "\n", 2 * strlen(GOOD) + 2, 0600);
	assert_int_equal(load(path, &s), -EINVAL);
	write_secret(GOOD "\0x", strlen(GOOD) + 2, 0600);
	assert_int_equal(load(path, &s), -EINVAL);
	memset(big, 'a', sizeof(big));
	write_secret(big, sizeof(big), 0600);
	assert_int_equal(load(path, &s), -EINVAL);
	assert_int_equal(load(dir, &s), -EINVAL); /* a directory */
	snprintf(link, sizeof(link), "%s/link", dir);
	write_secret(GOOD, strlen(GOOD), 0600);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(load(link, &s), -ELOOP);
	assert_int_equal(load("/nonexistent/secret", &s), -ENOENT);
}

static void test_api_auth_check(void **state)
{
	struct api_secret *s = NULL;

	(void)state;
	write_secret(GOOD, strlen(GOOD), 0600);
	assert_int_equal(load(path, &s), 0);
	assert_true(api_auth_ok(s, "Bearer " GOOD));
	assert_false(api_auth_ok(s, NULL));
	assert_false(api_auth_ok(s, ""));
	assert_false(api_auth_ok(s, GOOD));
	assert_false(api_auth_ok(s, "bearer " GOOD));
	assert_false(api_auth_ok(s, "Basic " GOOD));
	assert_false(api_auth_ok(s, "Bearer  " GOOD));
	assert_false(api_auth_ok(s, "Bearer " GOOD "x"));
	assert_false(api_auth_ok(s, "Bearer s3cr3t-of-enough-byte"));
	assert_false(api_auth_ok(s, "Bearer "));
	api_secret_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_api_auth_load),
		cmocka_unit_test(test_api_auth_load_refused),
		cmocka_unit_test(test_api_auth_check),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
