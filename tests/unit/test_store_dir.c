/*
 * test_store_dir.c - unit tests of the object-store layer: store.c (URL
 * parsing, key checks, counters, failpoints) over the directory backend
 * (engine/store/dir/): objects, listings, deletes and their races.
 *
 * Not for: multipart uploads (test_store_dir_mpu.c), the S3 backend, or
 * engine behaviour on store faults (those use tests/unit/fake_store.c).
 *
 * Every case runs in its own mkdtemp() root, removed by the teardown
 * (tests/unit/store_dir_fixture.h).  Threads never call cmocka asserts
 * (they are not thread-safe); they record results that the main thread
 * checks.
 *
 * NOVAFS_STORE_BENCH=1 enables test_store_dir_put_latency, which prints
 * the mean time of durable 4 KiB and 1 MiB puts.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/store/dir.h"
#include "engine/store/store.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"
#include "tests/unit/store_dir_fixture.h"

/* ----------------------------------------------------------- cases */

static void test_store_dir_open_urls(void **state)
{
	struct sdfx *f = *state;
	struct store *s = NULL;
	char url[128], file[128], under[160];
	int fd;

	snprintf(url, sizeof(url), "dir:%s/sub/deeper", f->root);
	assert_int_equal(store_open(url, &s), 0);
	assert_string_equal(store_name(s), url);
	store_close(s);
	assert_true(sdfx_path_exists(f, "sub/deeper"));

	snprintf(url, sizeof(url), "%s/sub/", f->root);
	assert_int_equal(store_open(url, &s), 0);
	snprintf(url, sizeof(url), "dir:%s/sub", f->root);
	assert_string_equal(store_name(s), url); /* trailing '/' dropped */
	store_close(s);
	store_close(NULL);

	sdfx_quiet();
	assert_int_equal(store_open("s3://bucket/x", &s), -EINVAL);
	assert_int_equal(store_open("dir:relative/path", &s), -EINVAL);
	assert_int_equal(store_open("relative", &s), -EINVAL);
	assert_int_equal(store_open("", &s), -EINVAL);
	assert_int_equal(store_open(NULL, &s), -EINVAL);
	/* A root below a regular file cannot be made. */
	snprintf(file, sizeof(file), "%s/plainfile", f->root);
	fd = open(file, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	snprintf(under, sizeof(under), "%s/x", file);
	assert_int_equal(store_open(under, &s), -ENOTDIR);
	sdfx_loud();
}

/* The scheme table (schemes.c): NULL-terminated, and no prefix is a
 * prefix of another, so a URL selects at most one backend; exactly one
 * takes bare absolute paths. */
static void test_store_schemes_table(void **state)
{
	size_t n, paths = 0;

	(void)state;
	for (n = 0; store_schemes[n]; n++) {
		const struct store_scheme *a = store_schemes[n];

		assert_non_null(a->url.prefix);
		assert_non_null(a->url.usage);
		assert_non_null(a->open);
		paths += a->url.path;
		for (size_t j = 0; store_schemes[j]; j++) {
			const char *b = store_schemes[j]->url.prefix;

			if (j != n)
				assert_int_not_equal(strncmp(a->url.prefix, b, strlen(b)), 0);
		}
	}
	assert_true(n >= 2); /* dir and s3 */
	assert_int_equal(paths, 1);
}

/* The rule of store.h's error list. */
static void test_store_err_transient(void **state)
{
	static const int yes[] = { EIO, EAGAIN, ETIMEDOUT, EBUSY, ENOSPC, EDQUOT,
				   ECONNRESET, ECONNREFUSED, EHOSTUNREACH, ENETUNREACH };
	static const int no[] = { 0, ENOENT, EEXIST, ERANGE, ENOTSUP, EINVAL,
				  EBADMSG, ENOMEM, ECANCELED };

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		assert_true(store_err_transient(-yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		assert_false(store_err_transient(-no[i]));
	assert_false(store_err_transient(EIO)); /* errors are negative */
}

static void test_store_dir_put_get_round_trip(void **state)
{
	struct sdfx *f = *state;
	struct iovec v[3] = { { "hello", 5 }, { "", 0 }, { ", world", 7 } };
	struct iovec many[200];
	char expect[201], buf[256];
	uint64_t size = 99;
	size_t got = 99;
	const char *k = "rt/one";

	assert_int_equal(store_put(f->s, k, v, 3, 0), 0);
	assert_int_equal(store_head(f->s, k, &size), 0);
	assert_int_equal(size, 12);
	sdfx_assert_content(f->s, k, "hello, world");

	/* More segments than one pwritev window. */
	for (int i = 0; i < 200; i++) {
		expect[i] = (char)('a' + i % 26);
		many[i].iov_base = &expect[i];
		many[i].iov_len = 1;
	}
	expect[200] = '\0';
	assert_int_equal(store_put(f->s, "rt/many", many, 200, 0), 0);
	sdfx_assert_content(f->s, "rt/many", expect);

	/* Zero-length objects exist and read as nothing. */
	assert_int_equal(store_put(f->s, "rt/empty", NULL, 0, 0), 0);
	assert_int_equal(store_head(f->s, "rt/empty", &size), 0);
	assert_int_equal(size, 0);
	assert_int_equal(store_get_range(f->s, "rt/empty", 0, sizeof(buf), buf, &got), 0);
	assert_int_equal(got, 0);
	assert_int_equal(store_put(f->s, "top-level-empty", v, 0,
				   STORE_CREATE_ONCE), 0);
	assert_int_equal(store_head(f->s, "top-level-empty", &size), 0);
	assert_int_equal(size, 0);

	const char *dels[] = { k, "rt/empty" };
	assert_int_equal(store_delete(f->s, dels, 2), 0);
	assert_int_equal(store_head(f->s, k, &size), -ENOENT);
	assert_int_equal(store_get_range(f->s, k, 0, 4, buf, &got), -ENOENT);
	assert_int_equal(got, 0);
	assert_int_equal(store_head(f->s, "rt/empty", &size), -ENOENT);
	sdfx_assert_content(f->s, "rt/many", expect);
	/* A directory is not an object. */
	assert_int_equal(store_head(f->s, "rt", &size), -ENOENT);
	assert_int_equal(store_get_range(f->s, "rt", 0, 4, buf, &got), -ENOENT);
}

static void test_store_dir_get_range(void **state)
{
	struct sdfx *f = *state;
	uint8_t data[1000], buf[300];
	struct iovec v = { data, sizeof(data) };
	size_t got;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	assert_int_equal(store_put(f->s, "r/obj", &v, 1, 0), 0);

	assert_int_equal(store_get_range(f->s, "r/obj", 100, 200, buf, &got), 0);
	assert_int_equal(got, 200);
	assert_memory_equal(buf, data + 100, 200);

	assert_int_equal(store_get_range(f->s, "r/obj", 900, 300, buf, &got), 0);
	assert_int_equal(got, 100);
	assert_memory_equal(buf, data + 900, 100);

	assert_int_equal(store_get_range(f->s, "r/obj", 1000, 300, buf, &got), 0);
	assert_int_equal(got, 0);
	assert_int_equal(store_get_range(f->s, "r/obj", 0, 0, NULL, &got), 0);
	assert_int_equal(got, 0);

	got = 7;
	assert_int_equal(store_get_range(f->s, "r/obj", 1001, 1, buf, &got), -ERANGE);
	assert_int_equal(got, 0);
	assert_int_equal(store_get_range(f->s, "r/obj", UINT64_MAX, 1, buf, &got),
			 -ERANGE);
	assert_int_equal(store_get_range(f->s, "r/missing", 0, 1, buf, &got), -ENOENT);
	assert_int_equal(store_get_range(f->s, "nodir/missing", 0, 1, buf, &got),
			 -ENOENT);
}

static void test_store_dir_create_once(void **state)
{
	struct sdfx *f = *state;

	assert_int_equal(sdfx_put_str(f->s, "co/k", "first", STORE_CREATE_ONCE), 0);
	assert_int_equal(sdfx_put_str(f->s, "co/k", "second!", STORE_CREATE_ONCE), -EEXIST);
	sdfx_assert_content(f->s, "co/k", "first");
	/* No temp file is left behind by the refused put. */
	assert_int_equal(sdfx_tree_entries(f->root), 2);
}

static void test_store_dir_overwrite(void **state)
{
	struct sdfx *f = *state;

	assert_int_equal(sdfx_put_str(f->s, "ow/k", "a longer first version", 0), 0);
	assert_int_equal(sdfx_put_str(f->s, "ow/k", "short", 0), 0);
	sdfx_assert_content(f->s, "ow/k", "short");
	assert_int_equal(sdfx_put_str(f->s, "ow/k", "third", STORE_CREATE_ONCE), -EEXIST);
	sdfx_assert_content(f->s, "ow/k", "short");
	assert_int_equal(sdfx_tree_entries(f->root), 2);
}

#define RACERS 8
#define RACE_ROUNDS 25
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
		/* Each racer writes its own length and byte value. */
		struct iovec v = { buf, RACE_LEN - (size_t)r->id };

		if (buf)
			memset(buf, 'A' + r->id, RACE_LEN);
		snprintf(key, sizeof(key), "race/r%02d", round);
		pthread_barrier_wait(r->bar); /* every round, even without buf */
		r->rc[round] = buf ? store_put(r->s, key, &v, 1, STORE_CREATE_ONCE)
				   : -ENOMEM;
	}
	free(buf);
	return NULL;
}

static void test_store_dir_create_once_race(void **state)
{
	struct sdfx *f = *state;
	pthread_barrier_t bar;
	pthread_t th[RACERS];
	struct race r[RACERS];
	uint8_t *buf = malloc(RACE_LEN + 1);

	assert_non_null(buf);
	pthread_barrier_init(&bar, NULL, RACERS);
	for (int i = 0; i < RACERS; i++) {
		r[i] = (struct race){ .s = f->s, .bar = &bar, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, race_main, &r[i]), 0);
	}
	for (int i = 0; i < RACERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);

	for (int round = 0; round < RACE_ROUNDS; round++) {
		char key[64];
		int winner = -1;
		size_t got;

		for (int i = 0; i < RACERS; i++) {
			if (r[i].rc[round] == 0) {
				assert_int_equal(winner, -1);
				winner = i;
			} else {
				assert_int_equal(r[i].rc[round], -EEXIST);
			}
		}
		assert_true(winner >= 0);
		snprintf(key, sizeof(key), "race/r%02d", round);
		assert_int_equal(store_get_range(f->s, key, 0, RACE_LEN + 1, buf, &got), 0);
		assert_int_equal(got, RACE_LEN - (size_t)winner);
		for (size_t j = 0; j < got; j++)
			if (buf[j] != 'A' + winner)
				fail_msg("round %d byte %zu is %c, winner %d", round, j,
					 buf[j], winner);
	}
	/* Only the objects remain: no temp files. */
	assert_int_equal(sdfx_tree_entries(f->root), 1 + RACE_ROUNDS);
	free(buf);
}

static void test_store_dir_invalid_keys(void **state)
{
	struct sdfx *f = *state;
	static char too_long[STORE_KEY_MAX + 2], longest[STORE_KEY_MAX + 1];
	const char *bad[] = { "", "/a", "a/", "a//b", "a/./b", "a/../b", "../x",
			      "./x", "..", ".", "a b", "a#b", "a\nb", "k\xc3\xa9",
			      "a\\b", "a:b", too_long, NULL };
	struct store_mpu *m = NULL;
	uint64_t size;
	size_t got;
	char buf[8];

	memset(too_long, 'a', STORE_KEY_MAX + 1);
	/* 1024 bytes in components of 100 (NAME_MAX is 255). */
	for (int i = 0; i < STORE_KEY_MAX; i++)
		longest[i] = i % 101 == 100 ? '/' : 'b';
	assert_int_equal(store_key_check(longest), 0);
	assert_int_equal(store_key_check("a"), 0);
	assert_int_equal(store_key_check("A-Z_a.z~0/9/..x/x../.y"), 0);
	assert_int_equal(store_key_check(NULL), -EINVAL);

	sdfx_quiet();
	for (int i = 0; bad[i]; i++) {
		const char *k = bad[i];

		assert_int_equal(store_key_check(k), -EINVAL);
		assert_int_equal(sdfx_put_str(f->s, k, "x", 0), -EINVAL);
		assert_int_equal(store_get_range(f->s, k, 0, 1, buf, &got), -EINVAL);
		assert_int_equal(store_head(f->s, k, &size), -EINVAL);
		assert_int_equal(store_delete(f->s, &k, 1), -EINVAL);
		assert_int_equal(store_mpu_create(f->s, k, &m), -EINVAL);
	}
	assert_int_equal(store_list(f->s, "a b", NULL, sdfx_collect, NULL), -EINVAL);
	sdfx_loud();
	assert_int_equal(sdfx_tree_entries(f->root), 0);

	assert_int_equal(sdfx_put_str(f->s, longest, "long", 0), 0);
	sdfx_assert_content(f->s, longest, "long");
	sdfx_assert_list(f->s, "bbb", NULL, (const char *const[]){ longest, NULL });
}

static void test_store_dir_path_conflict(void **state)
{
	struct sdfx *f = *state;
	char name[300], buf[8];
	uint64_t size;
	size_t got;

	assert_int_equal(sdfx_put_str(f->s, "pc/a", "file", 0), 0);
	assert_int_equal(sdfx_put_str(f->s, "pc/b/c", "nested", 0), 0);
	sdfx_quiet();
	assert_int_equal(sdfx_put_str(f->s, "pc/a/x", "x", 0), -EINVAL);
	assert_int_equal(sdfx_put_str(f->s, "pc/b", "x", 0), -EINVAL);
	assert_int_equal(sdfx_put_str(f->s, "pc/b", "x", STORE_CREATE_ONCE), -EINVAL);
	/* A component longer than NAME_MAX cannot be stored. */
	memset(name, 'n', 299);
	name[299] = '\0';
	assert_int_equal(sdfx_put_str(f->s, name, "x", 0), -EINVAL);
	sdfx_loud();
	assert_int_equal(store_head(f->s, name, &size), -ENOENT);
	assert_int_equal(store_head(f->s, "pc/a/x", &size), -ENOENT);
	assert_int_equal(store_get_range(f->s, "pc/a/x", 0, 1, buf, &got), -ENOENT);
	assert_int_equal(store_head(f->s, "pc/b", &size), -ENOENT);
	sdfx_assert_content(f->s, "pc/a", "file");
	sdfx_assert_content(f->s, "pc/b/c", "nested");
	/* Deleting the "wrong kind" of key is deleting a missing key. */
	const char *dels[] = { "pc/a/x", "pc/b", name };
	assert_int_equal(store_delete(f->s, dels, 3), 0);
	sdfx_assert_content(f->s, "pc/b/c", "nested");
	assert_int_equal(sdfx_tree_entries(f->root), 4);
}

static void test_store_dir_list_order(void **state)
{
	struct sdfx *f = *state;
	/* In byte order: '-' 0x2D < '.' 0x2E < '/' 0x2F < '0' 0x30 < 'A' <
	 * '_' < 'a' < '~'. */
	static const char *const all[] = {
		"a-c", "a.d", "a/b", "a/c-e", "a/c/d", "a/c/d0", "a/c~", "a0",
		"aA", "a_", "a~", "b", "c/x/y/z", NULL,
	};
	/* Put in a scrambled order. */
	static const int order[] = { 12, 3, 0, 7, 5, 10, 1, 9, 4, 11, 2, 8, 6 };
	struct sdfx_listing l = { .n = 0 };
	int fd;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		assert_int_equal(sdfx_put_str(f->s, all[order[i]], all[order[i]], 0), 0);

	/* Litter that is not an object: temp files, #mpu, a bad name. */
	const char *litter[] = { "a/c/d#tmp.1.2", "#tmp.3.4", "a/has space" };
	for (size_t i = 0; i < 3; i++) {
		char p[256];

		snprintf(p, sizeof(p), "%s/%s", f->root, litter[i]);
		fd = open(p, O_CREAT | O_WRONLY, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
	char p[256];
	snprintf(p, sizeof(p), "%s/#mpu", f->root);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/#mpu/k", f->root);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);

	sdfx_assert_list(f->s, NULL, NULL, all);
	sdfx_assert_list(f->s, "", "", all);

	/* Sizes come along. */
	assert_int_equal(store_list(f->s, "a/c/", NULL, sdfx_collect, &l), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.keys[1], "a/c/d0");
	assert_int_equal(l.sizes[1], strlen("a/c/d0"));
	sdfx_listing_free(&l);

	/* Prefixes that end mid-component, at a '/', or match nothing. */
	sdfx_assert_list(f->s, "a/c", NULL,
		    (const char *const[]){ "a/c-e", "a/c/d", "a/c/d0", "a/c~", NULL });
	sdfx_assert_list(f->s, "a/", NULL,
		    (const char *const[]){ "a/b", "a/c-e", "a/c/d", "a/c/d0", "a/c~",
					   NULL });
	sdfx_assert_list(f->s, "a/c/d", NULL, (const char *const[]){ "a/c/d", "a/c/d0", NULL });
	sdfx_assert_list(f->s, "a/c/d/", NULL, (const char *const[]){ NULL });
	sdfx_assert_list(f->s, "c/x/y/", NULL, (const char *const[]){ "c/x/y/z", NULL });
	sdfx_assert_list(f->s, "zz", NULL, (const char *const[]){ NULL });
	sdfx_assert_list(f->s, "q/r/", NULL, (const char *const[]){ NULL });
	sdfx_assert_list(f->s, "a//", NULL, (const char *const[]){ NULL });
	sdfx_assert_list(f->s, "a", NULL,
		    (const char *const[]){ "a-c", "a.d", "a/b", "a/c-e", "a/c/d",
					   "a/c/d0", "a/c~", "a0", "aA", "a_", "a~",
					   NULL });

	/* start_after: keys <= it are skipped, it need not exist. */
	sdfx_assert_list(f->s, NULL, "a/b", all + 3);
	sdfx_assert_list(f->s, NULL, "a/c", all + 3);
	sdfx_assert_list(f->s, NULL, "a/c/d", all + 5);
	sdfx_assert_list(f->s, NULL, "a/c/c", all + 4);
	sdfx_assert_list(f->s, NULL, "a/", all + 2);
	sdfx_assert_list(f->s, NULL, "a-c", all + 1);
	sdfx_assert_list(f->s, NULL, "b", all + 12);
	sdfx_assert_list(f->s, NULL, "c/x/y/z", all + 13);
	sdfx_assert_list(f->s, NULL, "c/x/y", all + 12);
	sdfx_assert_list(f->s, NULL, "c/x/y/", all + 12);
	sdfx_assert_list(f->s, NULL, "~", all + 13);
	sdfx_assert_list(f->s, "a/", "a/c-e",
		    (const char *const[]){ "a/c/d", "a/c/d0", "a/c~", NULL });

	/* fn stops the walk with 1 (no error) or fails it with -errno. */
	l = (struct sdfx_listing){ .stop_after = 4 };
	assert_int_equal(store_list(f->s, NULL, NULL, sdfx_collect, &l), 0);
	assert_int_equal(l.n, 4);
	assert_string_equal(l.keys[3], "a/c-e");
	sdfx_listing_free(&l);
	l = (struct sdfx_listing){ .fail_after = 5 };
	assert_int_equal(store_list(f->s, NULL, NULL, sdfx_collect, &l), -EIO);
	assert_int_equal(l.n, 5);
	sdfx_listing_free(&l);
}

/* A prefix that is itself a key, and keys that extend it. */
static void test_store_dir_list_prefix_a(void **state)
{
	struct sdfx *f = *state;

	assert_int_equal(sdfx_put_str(f->s, "a", "1", 0), 0);
	assert_int_equal(sdfx_put_str(f->s, "ab/c", "2", 0), 0);
	assert_int_equal(sdfx_put_str(f->s, "b", "3", 0), 0);
	assert_int_equal(sdfx_put_str(f->s, "aa", "4", 0), 0);
	sdfx_assert_list(f->s, "a", NULL, (const char *const[]){ "a", "aa", "ab/c", NULL });
	sdfx_assert_list(f->s, "a", "a", (const char *const[]){ "aa", "ab/c", NULL });
	sdfx_assert_list(f->s, "ab", NULL, (const char *const[]){ "ab/c", NULL });
	sdfx_assert_list(f->s, "ab/c", NULL, (const char *const[]){ "ab/c", NULL });
	sdfx_assert_list(f->s, "ab/cd", NULL, (const char *const[]){ NULL });
}

static void test_store_dir_delete(void **state)
{
	struct sdfx *f = *state;
	const char *missing[] = { "nope", "no/such/key" };
	const char *deep = "d1/d2/d3/k";
	const char *one = "e1/a";

	assert_int_equal(store_delete(f->s, missing, 2), 0);
	assert_int_equal(store_delete(f->s, missing, 0), 0);

	assert_int_equal(sdfx_put_str(f->s, deep, "x", 0), 0);
	assert_int_equal(sdfx_put_str(f->s, "e1/a", "x", 0), 0);
	assert_int_equal(sdfx_put_str(f->s, "e1/b", "x", 0), 0);
	assert_int_equal(store_delete(f->s, &deep, 1), 0);
	assert_false(sdfx_path_exists(f, "d1")); /* every emptied level is gone */
	assert_int_equal(store_delete(f->s, &one, 1), 0);
	assert_true(sdfx_path_exists(f, "e1")); /* still holds e1/b */
	assert_true(sdfx_path_exists(f, "e1/b"));
	/* Deleting twice is fine; and a put goes on working afterwards. */
	assert_int_equal(store_delete(f->s, &deep, 1), 0);
	assert_int_equal(sdfx_put_str(f->s, deep, "again", 0), 0);
	sdfx_assert_content(f->s, deep, "again");
}

#define CHURN_ROUNDS 1000

struct churn {
	struct store *s;
	int id;
	int errors;
	int first_rc;
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	char key[64], want[64], buf[64];

	snprintf(key, sizeof(key), "churn/shared/t%d", c->id);
	for (int i = 0; i < CHURN_ROUNDS; i++) {
		const char *k = key;
		size_t got;
		int rc;

		snprintf(want, sizeof(want), "t%d round %d", c->id, i);
		rc = sdfx_put_str(c->s, key, want,
			     i % 2 ? STORE_CREATE_ONCE : 0);
		if (rc == 0)
			rc = store_get_range(c->s, key, 0, sizeof(buf), buf, &got);
		if (rc == 0 && (got != strlen(want) || memcmp(buf, want, got)))
			rc = -EBADMSG;
		if (rc == 0)
			rc = store_delete(c->s, &k, 1);
		if (rc != 0) {
			if (!c->errors)
				c->first_rc = rc;
			c->errors++;
		}
	}
	return NULL;
}

struct pruner {
	struct store *s;
	atomic_bool stop;
	atomic_long deletes;
};

/* Deletes of a key that is not there, as fast as it can: each one
 * prunes its directory when it is empty. */
static void *pruner_main(void *arg)
{
	struct pruner *p = arg;
	const char *k = "race/d/other";

	while (!atomic_load(&p->stop)) {
		if (store_delete(p->s, &k, 1) == 0)
			atomic_fetch_add(&p->deletes, 1);
	}
	return NULL;
}

/* internal.h invariant 3: a put whose walk is done and whose temp file
 * is not made yet (dir.before_temp, held there 20 ms every time) is not
 * pulled out from under by this process's deletes in that directory,
 * which run without a pause meanwhile (the old code met ENOENT at every
 * walk and gave up after DIR_RETRIES + 1: -EIO). */
static void test_store_dir_put_not_pruned_under(void **state)
{
	struct sdfx *f = *state;
	struct pruner p = { .s = f->s };
	pthread_t th;

	assert_int_equal(nv_fp_arm("dir.before_temp=delay:20"), 0);
	assert_int_equal(pthread_create(&th, NULL, pruner_main, &p), 0);
	while (atomic_load(&p.deletes) == 0) /* the pruner runs */
		sched_yield();
	assert_int_equal(sdfx_put_str(f->s, "race/d/a", "kept", 0), 0);
	atomic_store(&p.stop, true);
	pthread_join(th, NULL);
	nv_fp_reset();
	sdfx_assert_content(f->s, "race/d/a", "kept");
}

static void test_store_dir_put_delete_race(void **state)
{
	struct sdfx *f = *state;
	struct churn c[2] = { { f->s, 0, 0, 0 }, { f->s, 1, 0, 0 } };
	pthread_t th[2];

	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++) {
		if (c[i].errors)
			fail_msg("thread %d: %d errors, first %d", i, c[i].errors,
				 c[i].first_rc);
	}
	assert_false(sdfx_path_exists(f, "churn"));
}


static void test_store_dir_stats(void **state)
{
	struct sdfx *f = *state;
	struct store_stats a, b;
	struct store_mpu *m = NULL;
	struct iovec v = { "12345", 5 };
	struct sdfx_listing l = { .n = 0 };
	const char *k = "st/k";
	char buf[16];
	uint64_t size;
	size_t got;

	store_get_stats(f->s, &a);
	assert_int_equal(store_put(f->s, k, &v, 1, 0), 0);
	assert_int_equal(store_put(f->s, k, &v, 1, STORE_CREATE_ONCE), -EEXIST);
	assert_int_equal(store_get_range(f->s, k, 1, sizeof(buf), buf, &got), 0);
	assert_int_equal(store_get_range(f->s, "st/none", 0, 1, buf, &got), -ENOENT);
	assert_int_equal(store_head(f->s, k, &size), 0);
	assert_int_equal(store_list(f->s, "st/", NULL, sdfx_collect, &l), 0);
	assert_int_equal(l.n, 1);
	sdfx_listing_free(&l);
	assert_int_equal(store_get_range(f->s, k, 6, 1, buf, &got), -ERANGE);
	assert_int_equal(store_mpu_create(f->s, "st/m", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	assert_int_equal(store_mpu_copy_part(m, 2, k, 0, 5), 0);
	assert_int_equal(store_mpu_complete(m, 0), 0);
	assert_int_equal(store_mpu_create(f->s, "st/m2", &m), 0);
	store_mpu_abort(m);
	sdfx_quiet();
	assert_int_equal(store_head(f->s, "bad key", &size), -EINVAL);
	sdfx_loud();
	assert_int_equal(store_delete(f->s, &k, 1), 0);
	store_get_stats(f->s, &b);

	assert_int_equal(b.puts - a.puts, 2);
	assert_int_equal(b.gets - a.gets, 3);
	assert_int_equal(b.heads - a.heads, 2);
	assert_int_equal(b.deletes - a.deletes, 1);
	assert_int_equal(b.lists - a.lists, 1);
	assert_int_equal(b.mpu_creates - a.mpu_creates, 2);
	assert_int_equal(b.mpu_parts - a.mpu_parts, 1);
	assert_int_equal(b.mpu_copies - a.mpu_copies, 1);
	assert_int_equal(b.mpu_completes - a.mpu_completes, 1);
	assert_int_equal(b.mpu_aborts - a.mpu_aborts, 1);
	assert_int_equal(b.bytes_put - a.bytes_put, 10); /* put + part */
	assert_int_equal(b.bytes_got - a.bytes_got, 4);
	/* -EEXIST and -ENOENT are answers; -ERANGE and -EINVAL are errors. */
	assert_int_equal(b.errors - a.errors, 2);
}

/* Invariant 1: a put syncs the entry of every directory on its path that
 * the store has not seen durable, also one it finds already made (by a
 * thread or a process that may have crashed before syncing it), once. */
static void test_store_dir_syncs_found_directories(void **state)
{
	struct sdfx *f = *state;
	char path[128];
	struct iovec iov = { (void *)"v", 1 };

	/* Made behind the store's back, never synced by it. */
	snprintf(path, sizeof(path), "%s/a", f->root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/a/b", f->root);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(nv_fp_arm("dir.sync_parent=error"), 0);
	assert_int_equal(store_put(f->s, "a/b/x", &iov, 1, 0), -EIO);
	nv_fp_reset();
	assert_int_equal(store_put(f->s, "a/b/x", &iov, 1, 0), 0);
	/* Both now known durable: no second sync. */
	assert_int_equal(nv_fp_arm("dir.sync_parent=error"), 0);
	assert_int_equal(store_put(f->s, "a/b/y", &iov, 1, 0), 0);
	/* Directories the store made itself are synced when made. */
	assert_int_equal(store_put(f->s, "c/d/z", &iov, 1, 0), 0);
	assert_int_equal(store_put(f->s, "c/d/w", &iov, 1, 0), 0);
	nv_fp_reset();
}

static void test_store_dir_failpoint(void **state)
{
	struct sdfx *f = *state;
	struct store_mpu *m = NULL;
	struct store_stats a, b;
	struct iovec v = { "data", 4 };
	uint64_t size;
	size_t got;
	char buf[8];

	assert_int_equal(sdfx_put_str(f->s, "fp/have", "have", 0), 0);
	store_get_stats(f->s, &a);

	assert_int_equal(nv_fp_arm("store.put=error"), 0);
	assert_int_equal(sdfx_put_str(f->s, "fp/new", "never", 0), -EIO);
	assert_int_equal(sdfx_put_str(f->s, "fp/have", "never", 0), -EIO);
	/* A failed complete still ends (aborts) the upload. */
	assert_int_equal(store_mpu_create(f->s, "fp/mpu", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	assert_int_equal(store_mpu_complete(m, 0), -EIO);
	nv_fp_reset();
	assert_int_equal(store_head(f->s, "fp/new", &size), -ENOENT);
	assert_int_equal(store_head(f->s, "fp/mpu", &size), -ENOENT);
	sdfx_assert_content(f->s, "fp/have", "have");
	assert_int_equal(sdfx_tree_entries(f->root), 2); /* fp/ and fp/have only */

	assert_int_equal(nv_fp_arm("store.get=error:28"), 0);
	assert_int_equal(store_get_range(f->s, "fp/have", 0, sizeof(buf), buf, &got),
			 -ENOSPC);
	nv_fp_reset();
	sdfx_assert_content(f->s, "fp/have", "have");

	store_get_stats(f->s, &b);
	assert_int_equal(b.errors - a.errors, 4);
	assert_int_equal(b.bytes_put - a.bytes_put, 4); /* the part only */
}

/* Not a test: NOVAFS_STORE_BENCH=1 prints durable put latencies. */
static void test_store_dir_put_latency(void **state)
{
	struct sdfx *f = *state;
	static const size_t sizes[] = { 4096, 1u << 20 };
	enum { ROUNDS = 300 };
	uint8_t *buf;

	if (!getenv("NOVAFS_STORE_BENCH"))
		skip();
	buf = malloc(1u << 20);
	assert_non_null(buf);
	sdfx_pattern(buf, 1u << 20, 9);
	for (size_t z = 0; z < 2; z++) {
		struct iovec v = { buf, sizes[z] };
		uint64_t t0, total = 0, worst = 0;

		for (int i = 0; i < ROUNDS; i++) {
			char key[64];
			uint64_t dt;

			snprintf(key, sizeof(key), "bench/%zu/%016x", sizes[z], (unsigned)i);
			t0 = nv_now_mono_ns();
			assert_int_equal(store_put(f->s, key, &v, 1, STORE_CREATE_ONCE), 0);
			dt = nv_now_mono_ns() - t0;
			total += dt;
			if (dt > worst)
				worst = dt;
		}
		printf("put %7zu bytes: mean %.1f us, max %.1f us over %d puts\n",
		       sizes[z], total / 1e3 / ROUNDS, worst / 1e3, ROUNDS);
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, sdfx_setup, sdfx_teardown)
		T(test_store_dir_open_urls),
		cmocka_unit_test(test_store_schemes_table),
		cmocka_unit_test(test_store_err_transient),
		T(test_store_dir_put_get_round_trip),
		T(test_store_dir_get_range),
		T(test_store_dir_create_once),
		T(test_store_dir_overwrite),
		T(test_store_dir_create_once_race),
		T(test_store_dir_invalid_keys),
		T(test_store_dir_path_conflict),
		T(test_store_dir_list_order),
		T(test_store_dir_list_prefix_a),
		T(test_store_dir_delete),
		T(test_store_dir_put_delete_race),
		T(test_store_dir_put_not_pruned_under),
		T(test_store_dir_stats),
		T(test_store_dir_failpoint),
		T(test_store_dir_syncs_found_directories),
		T(test_store_dir_put_latency),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
