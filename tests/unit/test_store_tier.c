/*
 * test_store_tier.c - unit tests of the cache tier's proxy set
 * (engine/store/tier.c), which the S3 backend's ranged gets and the plan
 * consumer's signed fetches share: the proxy list and the token file,
 * the knobs' defaults and ranges, the ring (the same page always asks the
 * same proxy; pages spread over the proxies), the bounded loads (no proxy
 * above ceil((1 + eps) * average)), proxies marked down skipped, every
 * proxy down = go direct.
 *
 * Not for: the S3 URL's cache_* options (test_s3_cache.c), requests
 * through real proxies and the fallback on a dead one
 * (tests/s3/t_cache_tier.sh).
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

#include "engine/store/tier.h"
#include "src/base/log.h"

static char tok_path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	nv_log_level = -1;
	snprintf(tok_path, sizeof(tok_path), "/tmp/test_store_tier.%d", (int)getpid());
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

static const struct store_tier_opts base = { .ctx = "test", .list_name = "cache",
					     .auth_name = "cache-auth-file" };

/* A tier of n proxies (http://127.0.0.1:9000+i) with eps_pct eps. */
static struct store_tier *tier(int n, long eps)
{
	struct store_tier_opts o = base;
	struct store_tier *t = NULL;
	char list[1024] = "";

	for (int i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%shttp://127.0.0.1:%d",
			 i ? "+" : "", 9000 + i);
	o.list = list;
	o.auth_file = tok_path;
	o.eps_pct = eps;
	assert_int_equal(store_tier_new(&o, &t), 0);
	assert_non_null(t);
	return t;
}

static int make(const char *list, long slice_kib, long hedge_ms, const char *auth)
{
	struct store_tier_opts o = base;
	struct store_tier *t = NULL;
	int rc;

	o.list = list;
	o.slice_kib = slice_kib;
	o.hedge_ms = hedge_ms;
	o.auth_file = auth;
	rc = store_tier_new(&o, &t);
	assert_true(rc == 0 ? t != NULL : t == NULL);
	store_tier_free(t);
	return rc;
}

static void test_new(void **state)
{
	struct store_tier *t;
	char bad[80];
	int fd;

	(void)state;
	t = tier(2, 0);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->nring, 2 * STORE_TIER_VNODES);
	assert_int_equal(t->slice, (uint64_t)STORE_TIER_SLICE_KIB_DEFAULT << 10); /* defaults */
	assert_int_equal(t->hedge_ms, STORE_TIER_HEDGE_MS_DEFAULT);
	assert_int_equal(t->eps_pct, STORE_TIER_EPS_PCT_DEFAULT);
	assert_string_equal(t->auth, "0123456789abcdef0123"); /* the newline dropped */
	assert_string_equal(t->px[1].base_url, "http://127.0.0.1:9001");
	store_tier_free(t);
	assert_int_equal(make(NULL, 0, 0, tok_path), -EINVAL);
	assert_int_equal(make("http://a:1", 0, 0, NULL), -EINVAL); /* token needed */
	assert_int_equal(make("http://a:1+http://b:2", 64, 1, tok_path), 0);
	assert_int_equal(make("https://a:1", 65536, 60000, tok_path), 0);
	assert_int_equal(make("ftp://a:1", 0, 0, tok_path), -EINVAL);
	assert_int_equal(make("http://a:1/path", 0, 0, tok_path), -EINVAL);
	assert_int_equal(make("http://a:1?x=1", 0, 0, tok_path), -EINVAL);
	assert_int_equal(make("http://a:1++http://b:2", 0, 0, tok_path), -EINVAL);
	assert_int_equal(make("", 0, 0, tok_path), -EINVAL);
	assert_int_equal(make("http://a:1", 32, 0, tok_path), -EINVAL); /* slice too small */
	assert_int_equal(make("http://a:1", 0, 60001, tok_path), -EINVAL);
	assert_int_equal(make("http://a:1", 0, 0, "/nonexistent/token"), -EINVAL);

	/* A token others may read, a short one, one with a space. */
	snprintf(bad, sizeof(bad), "%s.bad", tok_path);
	fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef0123", 20), 20);
	fchmod(fd, 0644);
	close(fd);
	assert_int_equal(make("http://a:1", 0, 0, bad), -EINVAL);
	fd = open(bad, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "short", 5), 5);
	fchmod(fd, 0600);
	close(fd);
	assert_int_equal(make("http://a:1", 0, 0, bad), -EINVAL);
	fd = open(bad, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "0123456789 abcdef0123", 21), 21);
	close(fd);
	assert_int_equal(make("http://a:1", 0, 0, bad), -EINVAL);
	unlink(bad);

	/* At most 64 proxies. */
	{
		char list[65 * 24] = "";

		for (int i = 0; i < 65; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list),
				 "%shttp://h%d:1", i ? "+" : "", i);
		assert_int_equal(make(list, 0, 0, tok_path), -EINVAL);
	}
}

static void test_ring_stable_and_spread(void **state)
{
	struct store_tier *c = tier(3, 0);
	int count[3] = { 0 };
	char key[64];

	(void)state;
	for (int k = 0; k < 300; k++) {
		snprintf(key, sizeof(key), "settled/%d", k);
		for (uint64_t p = 0; p < 100; p++) {
			int a = store_tier_pick(c, key, p);

			assert_in_range(a, 0, 2);
			assert_int_equal(store_tier_pick(c, key, p), a); /* stable */
			count[a]++;
		}
	}
	for (int i = 0; i < 3; i++)
		assert_in_range(count[i], 30000 / 4, 30000 / 2); /* 25%..50% each */
	store_tier_free(c);
}

/* Bounded loads: pages taken and never given back; after every pick the
 * busiest proxy holds at most ceil((1 + eps) * total / n). */
static void test_bounded_loads(void **state)
{
	struct store_tier *c = tier(3, 25);
	long total = 0;

	(void)state;
	for (int k = 0; k < 200; k++) {
		/* every page of one hot object: one owner without the bound */
		int a = store_tier_pick(c, "settled/hot", 7);
		long max = 0;

		assert_in_range(a, 0, 2);
		store_tier_enter(c, a);
		total++;
		for (int i = 0; i < 3; i++)
			if (atomic_load(&c->px[i].inflight) > max)
				max = atomic_load(&c->px[i].inflight);
		assert_true(max <= (total * 125 + 299) / 300);
	}
	for (int i = 0; i < 3; i++)
		assert_true(atomic_load(&c->px[i].inflight) > 20); /* all three took some */
	for (int i = 0; i < 3; i++)
		while (atomic_load(&c->px[i].inflight) > 0)
			store_tier_leave(c, i);
	assert_int_equal(atomic_load(&c->inflight), 0);
	store_tier_free(c);
}

static void test_down_skipped(void **state)
{
	struct store_tier *c = tier(3, 0);
	int owner = store_tier_pick(c, "settled/x", 0), other;

	(void)state;
	assert_false(store_tier_is_down(c, owner));
	store_tier_down(c, owner, "test");
	assert_true(store_tier_is_down(c, owner));
	other = store_tier_pick(c, "settled/x", 0);
	assert_true(other >= 0 && other != owner);
	for (uint64_t p = 0; p < 500; p++)
		assert_int_not_equal(store_tier_pick(c, "settled/x", p), owner);
	for (int i = 0; i < 3; i++)
		store_tier_down(c, i, "test");
	assert_int_equal(store_tier_pick(c, "settled/x", 0), -1); /* go direct */
	{
		unsigned long long gets, fails;

		store_tier_counts(c, &gets, &fails);
		assert_int_equal(gets, 0);
		assert_int_equal(fails, 4); /* every down-marking counted */
	}
	store_tier_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new),
		cmocka_unit_test(test_ring_stable_and_spread),
		cmocka_unit_test(test_bounded_loads),
		cmocka_unit_test(test_down_skipped),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
