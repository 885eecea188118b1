/*
 * test_s3_cache.c - unit tests of the S3 backend's cache_* URL options
 * (engine/store/s3/cache.c s3_cache_parse()): no tier without cache=,
 * cache_* without cache= refused, the numbers' ranges, the tier they
 * make.
 *
 * Not for: the ring, bounded loads and down-marking (test_store_tier.c:
 * engine/store/tier.c), requests through real proxies and the fallback
 * on a dead one (tests/s3/t_cache_tier.sh runs nginx in front of s3rver).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/store/s3/internal.h"
#include "src/base/log.h"

static char tok_path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	nv_log_level = -1;
	snprintf(tok_path, sizeof(tok_path), "/tmp/test_s3_cache.%d", (int)getpid());
	fd = open(tok_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef0123\n", 21), 21);
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(tok_path);
	return 0;
}

static int parse(const char *list, const char *slice, const char *auth)
{
	struct s3_store s = { 0 };
	struct s3_cache_opts o = { list, slice, NULL, NULL, auth };
	int rc = s3_cache_parse(&s, "s3://b", &o);

	if (rc == 0)
		s3_cache_free(s.cache);
	return rc;
}

static void test_options(void **state)
{
	struct s3_store s = { 0 };
	struct s3_cache_opts none = { 0 }, stray = { NULL, "64", NULL, NULL, NULL };
	char bad[80];
	int fd;

	(void)state;
	assert_int_equal(s3_cache_parse(&s, "s3://b", &none), 0);
	assert_null(s.cache); /* no tier without cache= */
	assert_int_equal(s3_cache_parse(&s, "s3://b", &stray), -EINVAL);
	assert_int_equal(parse("http://a:1", NULL, NULL), -EINVAL); /* token needed */
	assert_int_equal(parse("http://a:1+http://b:2", "1024", tok_path), 0);
	assert_int_equal(parse("ftp://a:1", NULL, tok_path), -EINVAL);
	assert_int_equal(parse("http://a:1/path", NULL, tok_path), -EINVAL);
	assert_int_equal(parse("http://a:1?x=1", NULL, tok_path), -EINVAL);
	assert_int_equal(parse("http://a:1++http://b:2", NULL, tok_path), -EINVAL);
	assert_int_equal(parse("", NULL, tok_path), -EINVAL);
	assert_int_equal(parse("http://a:1", "32", tok_path), -EINVAL); /* slice too small */
	assert_int_equal(parse("http://a:1", "x", tok_path), -EINVAL);
	assert_int_equal(parse("http://a:1", NULL, "/nonexistent/token"), -EINVAL);
	assert_int_equal(parse("http://a:1", "65537", tok_path), -EINVAL);

	/* What the options make: the knobs given and the defaults. */
	{
		struct s3_cache_opts o = { "http://a:1+http://b:2", "64", "20", NULL, tok_path };

		assert_int_equal(s3_cache_parse(&s, "s3://b", &o), 0);
		assert_non_null(s.cache);
		assert_int_equal(s.cache->n, 2);
		assert_int_equal(s.cache->slice, 64u << 10);
		assert_int_equal(s.cache->hedge_ms, 20);
		assert_int_equal(s.cache->eps_pct, STORE_TIER_EPS_PCT_DEFAULT);
		s3_cache_free(s.cache);
		s.cache = NULL;
	}

	/* A token others may read, a short one, one with a space. */
	snprintf(bad, sizeof(bad), "%s.bad", tok_path);
	fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef0123", 20), 20);
	fchmod(fd, 0644);
	close(fd);
	assert_int_equal(parse("http://a:1", NULL, bad), -EINVAL);
	fd = open(bad, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "short", 5), 5);
	fchmod(fd, 0600);
	close(fd);
	assert_int_equal(parse("http://a:1", NULL, bad), -EINVAL);
	fd = open(bad, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "0123456789 abcdef0123", 21), 21);
	close(fd);
	assert_int_equal(parse("http://a:1", NULL, bad), -EINVAL);
	unlink(bad);

	/* At most 64 proxies. */
	{
		char list[65 * 24] = "";

		for (int i = 0; i < 65; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list),
				 "%shttp://h%d:1", i ? "+" : "", i);
		assert_int_equal(parse(list, NULL, tok_path), -EINVAL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
