/*
 * test_store_conformance.c - one conformance suite of store.h, run
 * against every backend at hand:
 *
 *   dir      always (a mkdtemp() root)
 *   s3rver   when NOVAFS_S3RVER_URL is set (tests/s3/s3rver.sh prints it)
 *   rgw      when NOVAFS_RGW_URL is set    (tests/s3/rgw.sh prints it)
 *
 * tests/s3/t_store_conformance.sh starts both servers, sets the URLs and
 * runs this program.  Each S3 group works under a fresh prefix
 * (conf-<pid>-<random>) so runs never see each other, and every case
 * deletes what it made.
 *
 * What differs by backend is declared, not guessed (struct target):
 *  - lax_create_once: the server ignores If-None-Match (s3rver), so a
 *    create-once put overwrites; the engine never relies on it (store.h 3).
 *  - copy_optional: UploadPartCopy may be -ENOTSUP (s3rver); the suite
 *    then does what the engine does, read the range and upload it.
 *  - RGW enforces the 5 MiB minimum for all but the last part, so every
 *    multipart case uses PART bytes per non-last part everywhere.
 *
 * Threads never call cmocka asserts (not thread-safe): they record
 * results that the main thread checks.
 */
#include "config.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/store/store.h"
#include "src/base/log.h"

#define PART (5u << 20) /* S3's minimum for a non-last part */
#define THREADS 8

struct target {
	const char *name;
	char url[2048];
	char root[64];        /* dir: the temp root */
	bool s3;
	bool lax_create_once;
	bool copy_optional;
	size_t key_max;       /* longest key this store takes */
	struct store *s;
};

/* ------------------------------------------------------------ helpers */

static int saved_level;
static void quiet(void)
{
	saved_level = nv_log_level;
	nv_log_level = -1;
}
static void loud(void)
{
	nv_log_level = saved_level;
}

static void pattern(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed) ^ (i >> 8) ^ (i >> 16));
}

static int put_str(struct store *s, const char *key, const char *str, unsigned flags)
{
	struct iovec v = { (void *)str, strlen(str) };

	return store_put(s, key, &v, 1, flags);
}

static void assert_content(struct store *s, const char *key, const void *want,
			   size_t n)
{
	uint8_t *buf = malloc(n + 16);
	size_t got = 0;

	assert_non_null(buf);
	assert_int_equal(store_get_range(s, key, 0, n + 16, buf, &got), 0);
	assert_int_equal(got, n);
	assert_memory_equal(buf, want, n);
	free(buf);
}

#define LIST_MAX 4096

struct listing {
	char **keys;
	uint64_t *sizes;
	int n;
	int stop_after; /* return 1 once n reaches it */
	int fail_after; /* return -EIO once n reaches it */
};

static int collect(void *arg, const char *key, uint64_t size)
{
	struct listing *l = arg;

	if (!l->keys) {
		l->keys = calloc(LIST_MAX, sizeof(char *));
		l->sizes = calloc(LIST_MAX, sizeof(uint64_t));
		if (!l->keys || !l->sizes)
			return -ENOMEM;
	}
	if (l->n >= LIST_MAX)
		return -E2BIG;
	l->keys[l->n] = strdup(key);
	l->sizes[l->n] = size;
	l->n++;
	if (l->fail_after && l->n >= l->fail_after)
		return -EIO;
	if (l->stop_after && l->n >= l->stop_after)
		return 1;
	return 0;
}

static void listing_free(struct listing *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->keys[i]);
	free(l->keys);
	free(l->sizes);
	memset(l, 0, sizeof(*l));
}

static void assert_list(struct store *s, const char *prefix, const char *after,
			const char *const *want)
{
	struct listing l = { 0 };
	int i;

	assert_int_equal(store_list(s, prefix, after, collect, &l), 0);
	for (i = 0; want[i]; i++) {
		if (i >= l.n)
			fail_msg("list(%s, %s): %d keys, want more ('%s')", prefix,
				 after, l.n, want[i]);
		if (strcmp(l.keys[i], want[i]))
			fail_msg("list(%s, %s)[%d] = '%s', want '%s'", prefix, after,
				 i, l.keys[i], want[i]);
	}
	if (l.n != i)
		fail_msg("list(%s, %s): %d keys, want %d", prefix, after, l.n, i);
	listing_free(&l);
}

/* Delete every object of the store (what a case made). */
static void wipe(struct store *s)
{
	struct listing l = { 0 };

	assert_int_equal(store_list(s, NULL, NULL, collect, &l), 0);
	if (l.n)
		assert_int_equal(store_delete(s, (const char *const *)l.keys,
					      (size_t)l.n), 0);
	listing_free(&l);
}

/* ------------------------------------------------------ setup/teardown */

static int rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	return remove(path);
}

static int target_open(struct target *t)
{
	if (!t->s3) {
		snprintf(t->root, sizeof(t->root), "/tmp/novafs-conf-XXXXXX");
		if (!mkdtemp(t->root))
			return -1;
		snprintf(t->url, sizeof(t->url), "dir:%s", t->root);
		t->key_max = STORE_KEY_MAX;
	}
	if (store_open(t->url, &t->s) < 0) {
		fprintf(stderr, "cannot open the %s store\n", t->name);
		return -1;
	}
	return 0;
}

static void target_close(struct target *t)
{
	store_close(t->s);
	t->s = NULL;
	if (!t->s3)
		nftw(t->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int case_teardown(void **state)
{
	struct target *t = *state;

	wipe(t->s);
	return 0;
}

/* -------------------------------------------------------------- cases */

static void conf_put_get_head(void **state)
{
	struct target *t = *state;
	struct iovec v[3] = { { "hello", 5 }, { "", 0 }, { ", world", 7 } };
	uint64_t size = 99;
	size_t got = 99;
	char buf[32];

	assert_int_equal(store_put(t->s, "rt/one", v, 3, 0), 0);
	assert_int_equal(store_head(t->s, "rt/one", &size), 0);
	assert_int_equal(size, 12);
	assert_content(t->s, "rt/one", "hello, world", 12);
	/* Overwrite replaces the whole object. */
	assert_int_equal(put_str(t->s, "rt/one", "short", 0), 0);
	assert_content(t->s, "rt/one", "short", 5);
	/* Empty objects exist and read as nothing. */
	assert_int_equal(store_put(t->s, "rt/empty", NULL, 0, 0), 0);
	assert_int_equal(store_head(t->s, "rt/empty", &size), 0);
	assert_int_equal(size, 0);
	assert_int_equal(store_get_range(t->s, "rt/empty", 0, sizeof(buf), buf, &got), 0);
	assert_int_equal(got, 0);
	/* Missing objects. */
	assert_int_equal(store_head(t->s, "rt/none", &size), -ENOENT);
	assert_int_equal(store_get_range(t->s, "rt/none", 0, 4, buf, &got), -ENOENT);
	assert_int_equal(got, 0);
	const char *dels[] = { "rt/one", "rt/empty" };
	assert_int_equal(store_delete(t->s, dels, 2), 0);
	assert_int_equal(store_head(t->s, "rt/one", &size), -ENOENT);
	assert_int_equal(store_head(t->s, "rt/empty", &size), -ENOENT);
	/* A "directory" is not an object. */
	assert_int_equal(put_str(t->s, "rt/d/x", "x", 0), 0);
	assert_int_equal(store_head(t->s, "rt/d", &size), -ENOENT);
}

static void conf_get_range(void **state)
{
	struct target *t = *state;
	uint8_t data[1000], buf[300];
	struct iovec v = { data, sizeof(data) };
	size_t got;

	pattern(data, sizeof(data), 7);
	assert_int_equal(store_put(t->s, "r/obj", &v, 1, 0), 0);
	assert_int_equal(store_get_range(t->s, "r/obj", 100, 200, buf, &got), 0);
	assert_int_equal(got, 200);
	assert_memory_equal(buf, data + 100, 200);
	/* Short at the end. */
	assert_int_equal(store_get_range(t->s, "r/obj", 900, 300, buf, &got), 0);
	assert_int_equal(got, 100);
	assert_memory_equal(buf, data + 900, 100);
	/* One byte at 0 and at the end (s3rver answers bytes=0-0 wrongly). */
	assert_int_equal(store_get_range(t->s, "r/obj", 0, 1, buf, &got), 0);
	assert_int_equal(got, 1);
	assert_int_equal(buf[0], data[0]);
	assert_int_equal(store_get_range(t->s, "r/obj", 999, 1, buf, &got), 0);
	assert_int_equal(got, 1);
	assert_int_equal(buf[0], data[999]);
	/* off == size: 0 bytes; len 0: 0 bytes. */
	got = 7;
	assert_int_equal(store_get_range(t->s, "r/obj", 1000, 300, buf, &got), 0);
	assert_int_equal(got, 0);
	assert_int_equal(store_get_range(t->s, "r/obj", 0, 0, NULL, &got), 0);
	assert_int_equal(got, 0);
	assert_int_equal(store_get_range(t->s, "r/obj", 1000, 0, NULL, &got), 0);
	/* off > size: -ERANGE. */
	got = 7;
	assert_int_equal(store_get_range(t->s, "r/obj", 1001, 1, buf, &got), -ERANGE);
	assert_int_equal(got, 0);
	assert_int_equal(store_get_range(t->s, "r/obj", 1001, 0, NULL, &got), -ERANGE);
	assert_int_equal(store_get_range(t->s, "r/obj", UINT64_MAX, 1, buf, &got),
			 -ERANGE);
	assert_int_equal(store_get_range(t->s, "r/obj", UINT64_MAX - 5, 100, buf, &got),
			 -ERANGE);
	/* Missing. */
	assert_int_equal(store_get_range(t->s, "r/missing", 0, 1, buf, &got), -ENOENT);
	assert_int_equal(store_get_range(t->s, "r/missing", 5, 0, NULL, &got), -ENOENT);
	/* A large read into a larger buffer. */
	{
		size_t n = 3u << 20;
		uint8_t *big = malloc(n), *back = malloc(n + 100);
		struct iovec bv = { big, n };

		assert_non_null(big);
		assert_non_null(back);
		pattern(big, n, 3);
		assert_int_equal(store_put(t->s, "r/big", &bv, 1, 0), 0);
		assert_int_equal(store_get_range(t->s, "r/big", 12345, n + 100, back, &got), 0);
		assert_int_equal(got, n - 12345);
		assert_memory_equal(back, big + 12345, got);
		free(big);
		free(back);
	}
}

static void conf_create_once(void **state)
{
	struct target *t = *state;
	int rc;

	assert_int_equal(put_str(t->s, "co/k", "first", STORE_CREATE_ONCE), 0);
	rc = put_str(t->s, "co/k", "second!", STORE_CREATE_ONCE);
	if (t->lax_create_once) {
		assert_true(rc == 0 || rc == -EEXIST);
		return;
	}
	assert_int_equal(rc, -EEXIST);
	assert_content(t->s, "co/k", "first", 5);
	/* A plain put still overwrites. */
	assert_int_equal(put_str(t->s, "co/k", "third", 0), 0);
	assert_content(t->s, "co/k", "third", 5);
}

#define RACE_ROUNDS 5
#define RACE_LEN 65536

struct race {
	struct store *s;
	pthread_barrier_t *bar;
	int id;
	int rc[RACE_ROUNDS];
};

static void *race_main(void *arg)
{
	struct race *r = arg;
	uint8_t *buf = malloc(RACE_LEN);

	for (int round = 0; round < RACE_ROUNDS; round++) {
		char key[64];
		struct iovec v = { buf, RACE_LEN - (size_t)r->id };

		if (buf)
			memset(buf, 'A' + r->id, RACE_LEN);
		snprintf(key, sizeof(key), "race/r%02d", round);
		pthread_barrier_wait(r->bar);
		r->rc[round] = buf ? store_put(r->s, key, &v, 1, STORE_CREATE_ONCE)
				   : -ENOMEM;
	}
	free(buf);
	return NULL;
}

static void conf_create_once_race(void **state)
{
	struct target *t = *state;
	pthread_barrier_t bar;
	pthread_t th[THREADS];
	struct race r[THREADS];
	uint8_t *buf;

	if (t->lax_create_once)
		skip();
	buf = malloc(RACE_LEN + 1);
	assert_non_null(buf);
	pthread_barrier_init(&bar, NULL, THREADS);
	for (int i = 0; i < THREADS; i++) {
		r[i] = (struct race){ .s = t->s, .bar = &bar, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, race_main, &r[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		char key[64];
		int winner = -1;
		size_t got;

		for (int i = 0; i < THREADS; i++) {
			if (r[i].rc[round] == 0) {
				if (winner >= 0)
					fail_msg("round %d: two winners %d and %d", round,
						 winner, i);
				winner = i;
			} else if (r[i].rc[round] != -EEXIST) {
				fail_msg("round %d thread %d: %d", round, i, r[i].rc[round]);
			}
		}
		assert_true(winner >= 0);
		snprintf(key, sizeof(key), "race/r%02d", round);
		assert_int_equal(store_get_range(t->s, key, 0, RACE_LEN + 1, buf, &got), 0);
		assert_int_equal(got, RACE_LEN - (size_t)winner);
		for (size_t j = 0; j < got; j++)
			if (buf[j] != 'A' + winner)
				fail_msg("round %d byte %zu is %c, winner %d", round, j,
					 buf[j], winner);
	}
	free(buf);
}

static void conf_list_order(void **state)
{
	struct target *t = *state;
	/* Byte order: '-' < '.' < '/' < '0' < 'A' < '_' < 'a' < '~'. */
	static const char *const all[] = {
		"a-c", "a.d", "a/b", "a/c-e", "a/c/d", "a/c/d0", "a/c~", "a0",
		"aA", "a_", "a~", "b", "c/x/y/z", NULL,
	};
	static const int order[] = { 12, 3, 0, 7, 5, 10, 1, 9, 4, 11, 2, 8, 6 };
	struct listing l = { 0 };

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		assert_int_equal(put_str(t->s, all[order[i]], all[order[i]], 0), 0);
	assert_list(t->s, NULL, NULL, all);
	assert_list(t->s, "", "", all);
	/* Sizes come along. */
	assert_int_equal(store_list(t->s, "a/c/", NULL, collect, &l), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.keys[1], "a/c/d0");
	assert_int_equal(l.sizes[1], strlen("a/c/d0"));
	listing_free(&l);
	/* Prefixes. */
	assert_list(t->s, "a/c", NULL,
		    (const char *const[]){ "a/c-e", "a/c/d", "a/c/d0", "a/c~", NULL });
	assert_list(t->s, "a/c/d", NULL, (const char *const[]){ "a/c/d", "a/c/d0", NULL });
	assert_list(t->s, "a/c/d/", NULL, (const char *const[]){ NULL });
	assert_list(t->s, "zz", NULL, (const char *const[]){ NULL });
	/* start_after: keys <= it are skipped; it need not exist. */
	assert_list(t->s, NULL, "a/b", all + 3);
	assert_list(t->s, NULL, "a/c", all + 3);
	assert_list(t->s, NULL, "a/c/d", all + 5);
	assert_list(t->s, NULL, "a/", all + 2);
	assert_list(t->s, NULL, "b", all + 12);
	assert_list(t->s, NULL, "~", all + 13);
	assert_list(t->s, "a/", "a/c-e",
		    (const char *const[]){ "a/c/d", "a/c/d0", "a/c~", NULL });
	/* fn stops with 1 (no error) or fails with -errno. */
	l = (struct listing){ .stop_after = 4 };
	assert_int_equal(store_list(t->s, NULL, NULL, collect, &l), 0);
	assert_int_equal(l.n, 4);
	assert_string_equal(l.keys[3], "a/c-e");
	listing_free(&l);
	l = (struct listing){ .fail_after = 5 };
	assert_int_equal(store_list(t->s, NULL, NULL, collect, &l), -EIO);
	assert_int_equal(l.n, 5);
	listing_free(&l);
}

#define PAGING_KEYS 1234

struct putter {
	struct store *s;
	int first, step, n;
	int rc;
};

static void *putter_main(void *arg)
{
	struct putter *p = arg;

	for (int i = p->first; i < p->n && p->rc == 0; i += p->step) {
		char key[64], body[32];

		snprintf(key, sizeof(key), "page/%05d", i);
		snprintf(body, sizeof(body), "%d", i);
		p->rc = put_str(p->s, key, body, 0);
	}
	return NULL;
}

static void conf_list_paging(void **state)
{
	struct target *t = *state;
	struct putter p[THREADS];
	pthread_t th[THREADS];
	struct listing l = { 0 };
	char **keys;

	for (int i = 0; i < THREADS; i++) {
		p[i] = (struct putter){ t->s, i, THREADS, PAGING_KEYS, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, putter_main, &p[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(p[i].rc, 0);
	}
	assert_int_equal(put_str(t->s, "pagf", "outside", 0), 0);
	/* All of them, in order, across pages. */
	assert_int_equal(store_list(t->s, "page/", NULL, collect, &l), 0);
	assert_int_equal(l.n, PAGING_KEYS);
	for (int i = 0; i < l.n; i++) {
		char want[64];

		snprintf(want, sizeof(want), "page/%05d", i);
		if (strcmp(l.keys[i], want))
			fail_msg("paging: key %d is %s", i, l.keys[i]);
		assert_int_equal(l.sizes[i], strlen(want) - 5 - (i < 10 ? 4 : i < 100 ? 3
							       : i < 1000 ? 2 : 1));
	}
	listing_free(&l);
	/* start_after in the middle, then continuation pages. */
	assert_int_equal(store_list(t->s, "pag", "page/00099", collect, &l), 0);
	assert_int_equal(l.n, PAGING_KEYS - 100 + 1);
	assert_string_equal(l.keys[0], "page/00100");
	assert_string_equal(l.keys[l.n - 1], "pagf");
	listing_free(&l);
	/* Stop past the first page. */
	l = (struct listing){ .stop_after = 1001 };
	assert_int_equal(store_list(t->s, NULL, NULL, collect, &l), 0);
	assert_int_equal(l.n, 1001);
	assert_string_equal(l.keys[1000], "page/01000");
	listing_free(&l);
	/* One delete of more than one DeleteObjects batch. */
	assert_int_equal(store_list(t->s, "page/", NULL, collect, &l), 0);
	keys = l.keys;
	assert_int_equal(store_delete(t->s, (const char *const *)keys, (size_t)l.n), 0);
	listing_free(&l);
	assert_list(t->s, NULL, NULL, (const char *const[]){ "pagf", NULL });
}

static void conf_delete(void **state)
{
	struct target *t = *state;
	const char *missing[] = { "nope", "no/such/key" };
	const char *mixed[] = { "d/a", "d/none", "d/b" };
	uint64_t size;

	assert_int_equal(store_delete(t->s, missing, 2), 0);
	assert_int_equal(store_delete(t->s, missing, 0), 0);
	assert_int_equal(put_str(t->s, "d/a", "a", 0), 0);
	assert_int_equal(put_str(t->s, "d/b", "b", 0), 0);
	assert_int_equal(put_str(t->s, "d/c", "c", 0), 0);
	assert_int_equal(store_delete(t->s, mixed, 3), 0);
	assert_int_equal(store_head(t->s, "d/a", &size), -ENOENT);
	assert_int_equal(store_head(t->s, "d/b", &size), -ENOENT);
	assert_int_equal(store_head(t->s, "d/c", &size), 0);
	assert_int_equal(store_delete(t->s, mixed, 3), 0); /* twice is fine */
}

/* Copy a part, or -- where the server cannot (-ENOTSUP) -- read the range
 * and upload it, as engine/settle/publish.c does. */
static int copy_or_fallback(struct target *t, struct store_mpu *m, int no,
			    const char *src, uint64_t off, uint64_t len)
{
	int rc = store_mpu_copy_part(m, no, src, off, len);
	uint8_t *buf;
	size_t got;
	struct iovec v;

	if (rc != -ENOTSUP)
		return rc;
	if (!t->copy_optional)
		return -EPROTO; /* this backend must copy */
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	rc = store_get_range(t->s, src, off, len, buf, &got);
	if (rc == 0 && got != len)
		rc = -ERANGE;
	v = (struct iovec){ buf, got };
	if (rc == 0)
		rc = store_mpu_put_part(m, no, &v, 1);
	free(buf);
	return rc;
}

static void conf_mpu(void **state)
{
	struct target *t = *state;
	enum { SRC = PART + 300000, COFF = 12345, TAIL = 3333 };
	uint8_t *src = malloc(SRC), *p1 = malloc(PART), *p3 = malloc(TAIL);
	uint8_t *want = malloc(2 * PART + TAIL);
	struct iovec v = { src, SRC }, v3 = { p3, TAIL };
	struct iovec v1[2] = { { p1, 1000 }, { p1 + 1000, PART - 1000 } };
	struct store_mpu *m = NULL;
	uint8_t buf[64];
	size_t got;

	assert_non_null(src);
	assert_non_null(p1);
	assert_non_null(p3);
	assert_non_null(want);
	pattern(src, SRC, 1);
	pattern(p1, PART, 2);
	pattern(p3, TAIL, 3);
	memcpy(want, p1, PART);
	memcpy(want + PART, src + COFF, PART);
	memcpy(want + 2 * PART, p3, TAIL);
	assert_int_equal(store_put(t->s, "objs/src", &v, 1, 0), 0);

	assert_int_equal(store_mpu_create(t->s, "settled/out", &m), 0);
	/* Out of order: 3, a first try of 1, 2 (a copy), then 1 again. */
	assert_int_equal(store_mpu_put_part(m, 3, &v3, 1), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v3, 1), 0);
	assert_int_equal(copy_or_fallback(t, m, 2, "objs/src", COFF, PART), 0);
	assert_int_equal(store_mpu_put_part(m, 1, v1, 2), 0); /* replaces */
	quiet();
	assert_int_equal(store_mpu_put_part(m, 0, v1, 2), -EINVAL);
	assert_int_equal(store_mpu_put_part(m, 10001, v1, 2), -EINVAL);
	loud();
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), 0);
	assert_content(t->s, "settled/out", want, 2 * PART + TAIL);
	/* Ranged reads across the part boundaries. */
	assert_int_equal(store_get_range(t->s, "settled/out", PART - 32, 64, buf, &got), 0);
	assert_int_equal(got, 64);
	assert_memory_equal(buf, want + PART - 32, 64);
	assert_int_equal(store_get_range(t->s, "settled/out", 2 * PART - 10, 64, buf,
					 &got), 0);
	assert_memory_equal(buf, want + 2 * PART - 10, 64);
	free(src);
	free(p1);
	free(p3);
	free(want);
}

static void conf_mpu_copy_errors(void **state)
{
	struct target *t = *state;
	uint8_t data[10000] = { 1 };
	struct iovec v = { data, sizeof(data) };
	struct store_mpu *m = NULL;
	int rc;

	assert_int_equal(store_put(t->s, "cp/src", &v, 1, 0), 0);
	assert_int_equal(store_mpu_create(t->s, "cp/dst", &m), 0);
	quiet();
	rc = store_mpu_copy_part(m, 1, "cp/none", 0, 1);
	assert_true(rc == -ENOENT || (t->copy_optional && rc == -ENOTSUP));
	rc = store_mpu_copy_part(m, 1, "cp/src", 9000, 2000);
	assert_true(rc == -ERANGE || (t->copy_optional && rc == -ENOTSUP));
	rc = store_mpu_copy_part(m, 1, "cp/src", 10001, 1);
	assert_true(rc == -ERANGE || (t->copy_optional && rc == -ENOTSUP));
	assert_int_equal(store_mpu_copy_part(m, 1, "cp/src", 5, 0), -EINVAL);
	loud();
	rc = store_mpu_copy_part(m, 1, "cp/src", 9000, 1000);
	assert_true(rc == 0 || (t->copy_optional && rc == -ENOTSUP));
	store_mpu_abort(m);
	uint64_t size;
	assert_int_equal(store_head(t->s, "cp/dst", &size), -ENOENT);
}

static void conf_mpu_create_once_exists(void **state)
{
	struct target *t = *state;
	struct iovec v = { "new", 3 };
	struct store_mpu *m = NULL;
	uint64_t size;

	assert_int_equal(put_str(t->s, "x/existing", "old content", 0), 0);
	assert_int_equal(store_mpu_create(t->s, "x/existing", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), -EEXIST);
	assert_content(t->s, "x/existing", "old content", 11);
	/* Without the flag, complete replaces. */
	assert_int_equal(store_mpu_create(t->s, "x/existing", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	assert_int_equal(store_mpu_complete(m, 0), 0);
	assert_content(t->s, "x/existing", "new", 3);
	/* No parts: refused, and nothing appears. */
	assert_int_equal(store_mpu_create(t->s, "x/empty", &m), 0);
	quiet();
	assert_int_equal(store_mpu_complete(m, 0), -EINVAL);
	loud();
	assert_int_equal(store_head(t->s, "x/empty", &size), -ENOENT);
}

static void conf_mpu_abort(void **state)
{
	struct target *t = *state;
	struct iovec v = { "part", 4 };
	struct store_mpu *m1 = NULL, *m2 = NULL;
	uint64_t size;

	assert_int_equal(store_mpu_create(t->s, "ab/k", &m1), 0);
	assert_int_equal(store_mpu_create(t->s, "ab/k", &m2), 0);
	assert_int_equal(store_mpu_put_part(m1, 1, &v, 1), 0);
	assert_int_equal(store_mpu_put_part(m2, 2, &v, 1), 0);
	store_mpu_abort(m1);
	store_mpu_abort(m2);
	store_mpu_abort(NULL);
	assert_int_equal(store_head(t->s, "ab/k", &size), -ENOENT);
	assert_list(t->s, "ab/", NULL, (const char *const[]){ NULL });
}

struct part_job {
	struct store_mpu *m;
	const uint8_t *data;
	int no;
	int rc;
};

static void *part_main(void *arg)
{
	struct part_job *j = arg;
	struct iovec v = { (void *)(j->data + (size_t)(j->no - 1) * PART), PART };

	j->rc = store_mpu_put_part(j->m, j->no, &v, 1);
	return NULL;
}

static void conf_mpu_concurrent_parts(void **state)
{
	struct target *t = *state;
	size_t n = (size_t)THREADS * PART + 17;
	uint8_t *data = malloc(n);
	struct part_job j[THREADS];
	pthread_t th[THREADS];
	struct store_mpu *m = NULL;
	struct iovec tail;

	assert_non_null(data);
	pattern(data, n, 11);
	assert_int_equal(store_mpu_create(t->s, "conc/out", &m), 0);
	for (int i = 0; i < THREADS; i++) {
		j[i] = (struct part_job){ m, data, THREADS - i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, part_main, &j[i]), 0);
	}
	tail = (struct iovec){ data + (size_t)THREADS * PART, 17 };
	assert_int_equal(store_mpu_put_part(m, THREADS + 1, &tail, 1), 0);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(j[i].rc, 0);
	}
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), 0);
	assert_content(t->s, "conc/out", data, n);
	free(data);
}

static void conf_invalid_keys(void **state)
{
	struct target *t = *state;
	static char too_long[STORE_KEY_MAX + 2], longest[STORE_KEY_MAX + 1];
	const char *bad[] = { "", "/a", "a/", "a//b", "a/./b", "a/../b", "..", ".",
			      "a b", "a#b", "a\nb", "k\xc3\xa9", "a\\b", "a:b", "a?b",
			      "a%2Fb", too_long, NULL };
	struct store_mpu *m = NULL;
	uint64_t size;
	size_t got;
	char buf[8];

	memset(too_long, 'a', STORE_KEY_MAX + 1);
	memset(longest, 0, sizeof(longest));
	for (size_t i = 0; i < t->key_max; i++)
		longest[i] = i % 101 == 100 ? '/' : 'b';
	if (longest[t->key_max - 1] == '/')
		longest[t->key_max - 1] = 'b';
	quiet();
	for (int i = 0; bad[i]; i++) {
		const char *k = bad[i];

		assert_int_equal(put_str(t->s, k, "x", 0), -EINVAL);
		assert_int_equal(store_get_range(t->s, k, 0, 1, buf, &got), -EINVAL);
		assert_int_equal(store_head(t->s, k, &size), -EINVAL);
		assert_int_equal(store_delete(t->s, &k, 1), -EINVAL);
		assert_int_equal(store_mpu_create(t->s, k, &m), -EINVAL);
	}
	assert_int_equal(store_list(t->s, "a b", NULL, collect, NULL), -EINVAL);
	loud();
	assert_int_equal(put_str(t->s, longest, "long", 0), 0);
	assert_content(t->s, longest, "long", 4);
	assert_list(t->s, "bbb", NULL, (const char *const[]){ longest, NULL });
}

#define CHURN_ROUNDS 40

struct churn {
	struct store *s;
	int id;
	int errors, first_rc;
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	char key[64], want[64], buf[64];

	for (int i = 0; i < CHURN_ROUNDS; i++) {
		const char *k = key;
		uint64_t size;
		size_t got;
		int rc;

		snprintf(key, sizeof(key), "churn/t%d/k%d", c->id, i % 4);
		snprintf(want, sizeof(want), "t%d round %d", c->id, i);
		rc = put_str(c->s, key, want, 0);
		if (rc == 0)
			rc = store_get_range(c->s, key, 0, sizeof(buf), buf, &got);
		if (rc == 0 && (got != strlen(want) || memcmp(buf, want, got)))
			rc = -EBADMSG;
		if (rc == 0)
			rc = store_head(c->s, key, &size);
		if (rc == 0 && size != strlen(want))
			rc = -EBADMSG;
		if (rc == 0 && i % 3 == 0)
			rc = store_delete(c->s, &k, 1);
		if (rc == 0 && i % 10 == 0) {
			struct listing l = { 0 };

			rc = store_list(c->s, "churn/", NULL, collect, &l);
			listing_free(&l);
		}
		if (rc != 0 && c->errors++ == 0)
			c->first_rc = rc;
	}
	return NULL;
}

static void conf_concurrency(void **state)
{
	struct target *t = *state;
	struct churn c[THREADS];
	pthread_t th[THREADS];

	for (int i = 0; i < THREADS; i++) {
		c[i] = (struct churn){ t->s, i, 0, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < THREADS; i++)
		if (c[i].errors)
			fail_msg("thread %d: %d errors, first %d", i, c[i].errors,
				 c[i].first_rc);
}

static void conf_stats(void **state)
{
	struct target *t = *state;
	struct store_stats a, b;
	uint64_t size;
	size_t got;
	char buf[8];

	store_get_stats(t->s, &a);
	assert_int_equal(put_str(t->s, "st/k", "12345", 0), 0);
	assert_int_equal(store_get_range(t->s, "st/k", 1, sizeof(buf), buf, &got), 0);
	assert_int_equal(store_head(t->s, "st/none", &size), -ENOENT);
	store_get_stats(t->s, &b);
	assert_int_equal(b.puts - a.puts, 1);
	assert_int_equal(b.gets - a.gets, 1);
	assert_int_equal(b.heads - a.heads, 1);
	assert_int_equal(b.bytes_put - a.bytes_put, 5);
	assert_int_equal(b.bytes_got - a.bytes_got, 4);
	assert_int_equal(b.errors - a.errors, 0);
}

/* -------------------------------------------------------------- main */

#define CASES(T)                                                             \
	T(conf_put_get_head), T(conf_get_range), T(conf_create_once),        \
	T(conf_create_once_race), T(conf_list_order), T(conf_list_paging),   \
	T(conf_delete), T(conf_mpu), T(conf_mpu_copy_errors),                \
	T(conf_mpu_create_once_exists), T(conf_mpu_abort),                   \
	T(conf_mpu_concurrent_parts), T(conf_invalid_keys),                  \
	T(conf_concurrency), T(conf_stats)

static int run_target(struct target *t)
{
#define T(f) cmocka_unit_test_prestate_setup_teardown(f, NULL, case_teardown, t)
	const struct CMUnitTest tests[] = { CASES(T) };
#undef T
	char group[64];
	int failed;

	if (target_open(t) < 0)
		return 1;
	snprintf(group, sizeof(group), "store conformance: %s", t->name);
	failed = _cmocka_run_group_tests(group, tests, sizeof(tests) / sizeof(tests[0]),
					 NULL, NULL);
	target_close(t);
	return failed;
}

/* An S3 target from URL env var, under a fresh prefix. */
static bool s3_target(struct target *t, const char *name, const char *env,
		      bool lax)
{
	const char *url = getenv(env);
	char prefix[64];

	if (!url || !url[0])
		return false;
	snprintf(prefix, sizeof(prefix), "conf-%d-%ld", (int)getpid(),
		 (long)(time(NULL) % 100000));
	*t = (struct target){ .name = name, .s3 = true, .lax_create_once = lax,
			      .copy_optional = lax };
	snprintf(t->url, sizeof(t->url), "%s%sprefix=%s", url,
		 strchr(url, '?') ? "&" : "?", prefix);
	t->key_max = STORE_KEY_MAX - strlen(prefix) - 1;
	return true;
}

int main(void)
{
	struct target dir = { .name = "dir" }, s3rver, rgw;
	const char *only = getenv("NOVAFS_CONFORMANCE_ONLY"); /* dir|s3rver|rgw */
	int failed = 0;

	if (!only || !strcmp(only, "dir"))
		failed += run_target(&dir);
	if ((!only || !strcmp(only, "s3rver")) &&
	    s3_target(&s3rver, "s3rver", "NOVAFS_S3RVER_URL", true))
		failed += run_target(&s3rver);
	if ((!only || !strcmp(only, "rgw")) &&
	    s3_target(&rgw, "rgw", "NOVAFS_RGW_URL", false))
		failed += run_target(&rgw);
	return failed ? 1 : 0;
}
