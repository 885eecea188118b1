/*
 * test_store_dir.c - unit tests of the object-store layer: store.c (URL
 * parsing, key checks, counters, failpoints, the multipart wrapper) over
 * the directory backend (engine/store/dir/).
 *
 * Not for: the S3 backend, or engine behaviour on store faults (those use
 * tests/unit/fake_store.c).
 *
 * Every case runs in its own mkdtemp() root, removed by the teardown.
 * Threads never call cmocka asserts (they are not thread-safe); they
 * record results that the main thread checks.
 *
 * NOVAFS_STORE_BENCH=1 enables test_store_dir_put_latency, which prints
 * the mean time of durable 4 KiB and 1 MiB puts.
 *
 * Longer than ~900 lines on purpose: one cmocka program per module
 * (Makefile.am), and every case of the wrapper and of the directory
 * backend shares the one mkdtemp() fixture and listing helpers above
 * them; each case stays short.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/store/dir.h"
#include "engine/store/store.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

struct fx {
	char root[64];
	struct store *s;
};

static int rm_one(const char *path, const struct stat *sb, int type,
		  struct FTW *ftw)
{
	return remove(path);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->root, sizeof(f->root), "/tmp/novafs-store-XXXXXX");
	if (!mkdtemp(f->root) || store_open(f->root, &f->s) < 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	store_close(f->s);
	nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* Silence expected error lines; restore with loud(). */
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

static int put_str(struct store *s, const char *key, const char *str,
		   unsigned flags)
{
	struct iovec v = { (void *)str, strlen(str) };

	return store_put(s, key, &v, 1, flags);
}

/* Whole object as a NUL-terminated string in buf (cap bytes). */
static int get_str(struct store *s, const char *key, char *buf, size_t cap)
{
	size_t got = 0;
	int rc = store_get_range(s, key, 0, cap - 1, buf, &got);

	buf[rc == 0 ? got : 0] = '\0';
	return rc;
}

static void assert_content(struct store *s, const char *key, const char *want)
{
	char buf[4096];

	assert_int_equal(get_str(s, key, buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
}

/* Number of entries below root (root itself not counted). */
static int tree_count;
static int count_one(const char *path, const struct stat *sb, int type,
		     struct FTW *ftw)
{
	if (ftw->level > 0)
		tree_count++;
	return 0;
}
static int tree_entries(const char *root)
{
	tree_count = 0;
	nftw(root, count_one, 16, FTW_PHYS);
	return tree_count;
}

static bool path_exists(const struct fx *f, const char *rel)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", f->root, rel);
	return lstat(p, &st) == 0;
}

/*
 * copy_file_range, interposed: the executable's definition wins over
 * libc's, so engine/store/dir/files.c calls this one.  With cfr_errno set
 * it fails the way it does on file systems without support, and
 * dir_copy_range() must fall back to read/write; otherwise it is the
 * system call.
 */
static int cfr_errno;
static int cfr_calls;

ssize_t copy_file_range(int in, off64_t *in_off, int out, off64_t *out_off,
			size_t len, unsigned flags)
{
	__atomic_add_fetch(&cfr_calls, 1, __ATOMIC_RELAXED);
	if (cfr_errno) {
		errno = cfr_errno;
		return -1;
	}
	return syscall(SYS_copy_file_range, in, in_off, out, out_off, len, flags);
}

/* ------------------------------------------------------------ list */

#define LIST_MAX 64

struct listing {
	char *keys[LIST_MAX];
	uint64_t sizes[LIST_MAX];
	int n;
	int stop_after; /* return 1 once n reaches it (0: never) */
	int fail_after; /* return -EIO once n reaches it (0: never) */
};

static int collect(void *arg, const char *key, uint64_t size)
{
	struct listing *l = arg;

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
	l->n = 0;
}

/* List and compare with want[] (NULL-terminated). */
static void assert_list(struct store *s, const char *prefix, const char *after,
			const char *const *want)
{
	struct listing l = { .n = 0 };
	int i;

	assert_int_equal(store_list(s, prefix, after, collect, &l), 0);
	for (i = 0; want[i]; i++) {
		assert_true(i < l.n);
		assert_string_equal(l.keys[i], want[i]);
	}
	assert_int_equal(l.n, i);
	listing_free(&l);
}

/* ----------------------------------------------------------- cases */

static void test_store_dir_open_urls(void **state)
{
	struct fx *f = *state;
	struct store *s = NULL;
	char url[128], file[128], under[160];
	int fd;

	snprintf(url, sizeof(url), "dir:%s/sub/deeper", f->root);
	assert_int_equal(store_open(url, &s), 0);
	assert_string_equal(store_name(s), url);
	store_close(s);
	assert_true(path_exists(f, "sub/deeper"));

	snprintf(url, sizeof(url), "%s/sub/", f->root);
	assert_int_equal(store_open(url, &s), 0);
	snprintf(url, sizeof(url), "dir:%s/sub", f->root);
	assert_string_equal(store_name(s), url); /* trailing '/' dropped */
	store_close(s);
	store_close(NULL);

	quiet();
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
	loud();
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
	struct fx *f = *state;
	struct iovec v[3] = { { "hello", 5 }, { "", 0 }, { ", world", 7 } };
	struct iovec many[200];
	char expect[201], buf[256];
	uint64_t size = 99;
	size_t got = 99;
	const char *k = "rt/one";

	assert_int_equal(store_put(f->s, k, v, 3, 0), 0);
	assert_int_equal(store_head(f->s, k, &size), 0);
	assert_int_equal(size, 12);
	assert_content(f->s, k, "hello, world");

	/* More segments than one pwritev window. */
	for (int i = 0; i < 200; i++) {
		expect[i] = (char)('a' + i % 26);
		many[i].iov_base = &expect[i];
		many[i].iov_len = 1;
	}
	expect[200] = '\0';
	assert_int_equal(store_put(f->s, "rt/many", many, 200, 0), 0);
	assert_content(f->s, "rt/many", expect);

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
	assert_content(f->s, "rt/many", expect);
	/* A directory is not an object. */
	assert_int_equal(store_head(f->s, "rt", &size), -ENOENT);
	assert_int_equal(store_get_range(f->s, "rt", 0, 4, buf, &got), -ENOENT);
}

static void test_store_dir_get_range(void **state)
{
	struct fx *f = *state;
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
	struct fx *f = *state;

	assert_int_equal(put_str(f->s, "co/k", "first", STORE_CREATE_ONCE), 0);
	assert_int_equal(put_str(f->s, "co/k", "second!", STORE_CREATE_ONCE), -EEXIST);
	assert_content(f->s, "co/k", "first");
	/* No temp file is left behind by the refused put. */
	assert_int_equal(tree_entries(f->root), 2);
}

static void test_store_dir_overwrite(void **state)
{
	struct fx *f = *state;

	assert_int_equal(put_str(f->s, "ow/k", "a longer first version", 0), 0);
	assert_int_equal(put_str(f->s, "ow/k", "short", 0), 0);
	assert_content(f->s, "ow/k", "short");
	assert_int_equal(put_str(f->s, "ow/k", "third", STORE_CREATE_ONCE), -EEXIST);
	assert_content(f->s, "ow/k", "short");
	assert_int_equal(tree_entries(f->root), 2);
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
	struct fx *f = *state;
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
	assert_int_equal(tree_entries(f->root), 1 + RACE_ROUNDS);
	free(buf);
}

static void test_store_dir_invalid_keys(void **state)
{
	struct fx *f = *state;
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

	quiet();
	for (int i = 0; bad[i]; i++) {
		const char *k = bad[i];

		assert_int_equal(store_key_check(k), -EINVAL);
		assert_int_equal(put_str(f->s, k, "x", 0), -EINVAL);
		assert_int_equal(store_get_range(f->s, k, 0, 1, buf, &got), -EINVAL);
		assert_int_equal(store_head(f->s, k, &size), -EINVAL);
		assert_int_equal(store_delete(f->s, &k, 1), -EINVAL);
		assert_int_equal(store_mpu_create(f->s, k, &m), -EINVAL);
	}
	assert_int_equal(store_list(f->s, "a b", NULL, collect, NULL), -EINVAL);
	loud();
	assert_int_equal(tree_entries(f->root), 0);

	assert_int_equal(put_str(f->s, longest, "long", 0), 0);
	assert_content(f->s, longest, "long");
	assert_list(f->s, "bbb", NULL, (const char *const[]){ longest, NULL });
}

static void test_store_dir_path_conflict(void **state)
{
	struct fx *f = *state;
	char name[300], buf[8];
	uint64_t size;
	size_t got;

	assert_int_equal(put_str(f->s, "pc/a", "file", 0), 0);
	assert_int_equal(put_str(f->s, "pc/b/c", "nested", 0), 0);
	quiet();
	assert_int_equal(put_str(f->s, "pc/a/x", "x", 0), -EINVAL);
	assert_int_equal(put_str(f->s, "pc/b", "x", 0), -EINVAL);
	assert_int_equal(put_str(f->s, "pc/b", "x", STORE_CREATE_ONCE), -EINVAL);
	/* A component longer than NAME_MAX cannot be stored. */
	memset(name, 'n', 299);
	name[299] = '\0';
	assert_int_equal(put_str(f->s, name, "x", 0), -EINVAL);
	loud();
	assert_int_equal(store_head(f->s, name, &size), -ENOENT);
	assert_int_equal(store_head(f->s, "pc/a/x", &size), -ENOENT);
	assert_int_equal(store_get_range(f->s, "pc/a/x", 0, 1, buf, &got), -ENOENT);
	assert_int_equal(store_head(f->s, "pc/b", &size), -ENOENT);
	assert_content(f->s, "pc/a", "file");
	assert_content(f->s, "pc/b/c", "nested");
	/* Deleting the "wrong kind" of key is deleting a missing key. */
	const char *dels[] = { "pc/a/x", "pc/b", name };
	assert_int_equal(store_delete(f->s, dels, 3), 0);
	assert_content(f->s, "pc/b/c", "nested");
	assert_int_equal(tree_entries(f->root), 4);
}

static void test_store_dir_list_order(void **state)
{
	struct fx *f = *state;
	/* In byte order: '-' 0x2D < '.' 0x2E < '/' 0x2F < '0' 0x30 < 'A' <
	 * '_' < 'a' < '~'. */
	static const char *const all[] = {
		"a-c", "a.d", "a/b", "a/c-e", "a/c/d", "a/c/d0", "a/c~", "a0",
		"aA", "a_", "a~", "b", "c/x/y/z", NULL,
	};
	/* Put in a scrambled order. */
	static const int order[] = { 12, 3, 0, 7, 5, 10, 1, 9, 4, 11, 2, 8, 6 };
	struct listing l = { .n = 0 };
	int fd;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		assert_int_equal(put_str(f->s, all[order[i]], all[order[i]], 0), 0);

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

	assert_list(f->s, NULL, NULL, all);
	assert_list(f->s, "", "", all);

	/* Sizes come along. */
	assert_int_equal(store_list(f->s, "a/c/", NULL, collect, &l), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.keys[1], "a/c/d0");
	assert_int_equal(l.sizes[1], strlen("a/c/d0"));
	listing_free(&l);

	/* Prefixes that end mid-component, at a '/', or match nothing. */
	assert_list(f->s, "a/c", NULL,
		    (const char *const[]){ "a/c-e", "a/c/d", "a/c/d0", "a/c~", NULL });
	assert_list(f->s, "a/", NULL,
		    (const char *const[]){ "a/b", "a/c-e", "a/c/d", "a/c/d0", "a/c~",
					   NULL });
	assert_list(f->s, "a/c/d", NULL, (const char *const[]){ "a/c/d", "a/c/d0", NULL });
	assert_list(f->s, "a/c/d/", NULL, (const char *const[]){ NULL });
	assert_list(f->s, "c/x/y/", NULL, (const char *const[]){ "c/x/y/z", NULL });
	assert_list(f->s, "zz", NULL, (const char *const[]){ NULL });
	assert_list(f->s, "q/r/", NULL, (const char *const[]){ NULL });
	assert_list(f->s, "a//", NULL, (const char *const[]){ NULL });
	assert_list(f->s, "a", NULL,
		    (const char *const[]){ "a-c", "a.d", "a/b", "a/c-e", "a/c/d",
					   "a/c/d0", "a/c~", "a0", "aA", "a_", "a~",
					   NULL });

	/* start_after: keys <= it are skipped, it need not exist. */
	assert_list(f->s, NULL, "a/b", all + 3);
	assert_list(f->s, NULL, "a/c", all + 3);
	assert_list(f->s, NULL, "a/c/d", all + 5);
	assert_list(f->s, NULL, "a/c/c", all + 4);
	assert_list(f->s, NULL, "a/", all + 2);
	assert_list(f->s, NULL, "a-c", all + 1);
	assert_list(f->s, NULL, "b", all + 12);
	assert_list(f->s, NULL, "c/x/y/z", all + 13);
	assert_list(f->s, NULL, "c/x/y", all + 12);
	assert_list(f->s, NULL, "c/x/y/", all + 12);
	assert_list(f->s, NULL, "~", all + 13);
	assert_list(f->s, "a/", "a/c-e",
		    (const char *const[]){ "a/c/d", "a/c/d0", "a/c~", NULL });

	/* fn stops the walk with 1 (no error) or fails it with -errno. */
	l = (struct listing){ .stop_after = 4 };
	assert_int_equal(store_list(f->s, NULL, NULL, collect, &l), 0);
	assert_int_equal(l.n, 4);
	assert_string_equal(l.keys[3], "a/c-e");
	listing_free(&l);
	l = (struct listing){ .fail_after = 5 };
	assert_int_equal(store_list(f->s, NULL, NULL, collect, &l), -EIO);
	assert_int_equal(l.n, 5);
	listing_free(&l);
}

/* A prefix that is itself a key, and keys that extend it. */
static void test_store_dir_list_prefix_a(void **state)
{
	struct fx *f = *state;

	assert_int_equal(put_str(f->s, "a", "1", 0), 0);
	assert_int_equal(put_str(f->s, "ab/c", "2", 0), 0);
	assert_int_equal(put_str(f->s, "b", "3", 0), 0);
	assert_int_equal(put_str(f->s, "aa", "4", 0), 0);
	assert_list(f->s, "a", NULL, (const char *const[]){ "a", "aa", "ab/c", NULL });
	assert_list(f->s, "a", "a", (const char *const[]){ "aa", "ab/c", NULL });
	assert_list(f->s, "ab", NULL, (const char *const[]){ "ab/c", NULL });
	assert_list(f->s, "ab/c", NULL, (const char *const[]){ "ab/c", NULL });
	assert_list(f->s, "ab/cd", NULL, (const char *const[]){ NULL });
}

static void test_store_dir_delete(void **state)
{
	struct fx *f = *state;
	const char *missing[] = { "nope", "no/such/key" };
	const char *deep = "d1/d2/d3/k";
	const char *one = "e1/a";

	assert_int_equal(store_delete(f->s, missing, 2), 0);
	assert_int_equal(store_delete(f->s, missing, 0), 0);

	assert_int_equal(put_str(f->s, deep, "x", 0), 0);
	assert_int_equal(put_str(f->s, "e1/a", "x", 0), 0);
	assert_int_equal(put_str(f->s, "e1/b", "x", 0), 0);
	assert_int_equal(store_delete(f->s, &deep, 1), 0);
	assert_false(path_exists(f, "d1")); /* every emptied level is gone */
	assert_int_equal(store_delete(f->s, &one, 1), 0);
	assert_true(path_exists(f, "e1")); /* still holds e1/b */
	assert_true(path_exists(f, "e1/b"));
	/* Deleting twice is fine; and a put goes on working afterwards. */
	assert_int_equal(store_delete(f->s, &deep, 1), 0);
	assert_int_equal(put_str(f->s, deep, "again", 0), 0);
	assert_content(f->s, deep, "again");
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
		rc = put_str(c->s, key, want,
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

static void test_store_dir_put_delete_race(void **state)
{
	struct fx *f = *state;
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
	assert_false(path_exists(f, "churn"));
}

/* Bytes 0..n-1 of a deterministic pattern. */
static void pattern(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed) ^ (i >> 8));
}

static void test_store_dir_mpu(void **state)
{
	struct fx *f = *state;
	enum { SRC = 100000, P1 = 7000, P3 = 3333, COFF = 12345, CLEN = 54321 };
	uint8_t *src = malloc(SRC), *p1 = malloc(P1), *p3 = malloc(P3);
	uint8_t *want = malloc(P1 + CLEN + P3), *got_buf = malloc(P1 + CLEN + P3 + 1);
	struct iovec v = { src, SRC };
	struct iovec v1[2] = { { p1, 1000 }, { p1 + 1000, P1 - 1000 } };
	struct iovec v3 = { p3, P3 };
	struct store_mpu *m = NULL;
	size_t got;

	assert_non_null(src);
	assert_non_null(p1);
	assert_non_null(p3);
	assert_non_null(want);
	assert_non_null(got_buf);
	pattern(src, SRC, 1);
	pattern(p1, P1, 2);
	pattern(p3, P3, 3);
	memcpy(want, p1, P1);
	memcpy(want + P1, src + COFF, CLEN);
	memcpy(want + P1 + CLEN, p3, P3);
	assert_int_equal(store_put(f->s, "objs/src", &v, 1, 0), 0);

	assert_int_equal(store_mpu_create(f->s, "settled/out", &m), 0);
	/* Out of order: 3, then a first try of 1, then 2, then 1 again. */
	assert_int_equal(store_mpu_put_part(m, 3, &v3, 1), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v3, 1), 0);
	assert_int_equal(store_mpu_copy_part(m, 2, "objs/src", COFF, CLEN), 0);
	assert_int_equal(store_mpu_put_part(m, 1, v1, 2), 0); /* replaces */
	quiet();
	assert_int_equal(store_mpu_put_part(m, 0, v1, 2), -EINVAL);
	assert_int_equal(store_mpu_put_part(m, 10001, v1, 2), -EINVAL);
	loud();
	assert_int_equal(store_mpu_copy_part(m, 4, "objs/none", 0, 1), -ENOENT);
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), 0);

	assert_int_equal(store_get_range(f->s, "settled/out", 0, P1 + CLEN + P3 + 1,
					 got_buf, &got), 0);
	assert_int_equal(got, P1 + CLEN + P3);
	assert_memory_equal(got_buf, want, got);
	assert_false(path_exists(f, "#mpu"));
	free(src);
	free(p1);
	free(p3);
	free(want);
	free(got_buf);
}

static void test_store_dir_mpu_single_part_copy(void **state)
{
	struct fx *f = *state;
	struct store_mpu *m = NULL;

	assert_int_equal(put_str(f->s, "s", "0123456789", 0), 0);
	assert_int_equal(store_mpu_create(f->s, "t", &m), 0);
	assert_int_equal(store_mpu_copy_part(m, 1, "s", 0, 10), 0);
	assert_int_equal(store_mpu_copy_part(m, 2, "s", 9, 1), 0);
	assert_int_equal(store_mpu_copy_part(m, 3, "s", 2, 3), 0);
	assert_int_equal(store_mpu_complete(m, 0), 0);
	assert_content(f->s, "t", "01234567899234");
}

/* Without kernel copies: bigger than the fallback's bounce buffer, and
 * each of the errno values that mean "not supported here". */
static void test_store_dir_mpu_copy_fallback(void **state)
{
	struct fx *f = *state;
	static const int errs[] = { EXDEV, ENOSYS, EINVAL, EOPNOTSUPP };
	enum { SRC = 700000, OFF = 777, LEN = 600001 };
	uint8_t *src = malloc(SRC), *buf = malloc(LEN + 2);
	struct iovec v = { src, SRC }, tail = { "!", 1 };

	assert_non_null(src);
	assert_non_null(buf);
	pattern(src, SRC, 5);
	assert_int_equal(store_put(f->s, "fb/src", &v, 1, 0), 0);
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		struct store_mpu *m = NULL;
		char key[32];
		size_t got;

		snprintf(key, sizeof(key), "fb/out%zu", i);
		cfr_errno = errs[i];
		cfr_calls = 0;
		assert_int_equal(store_mpu_create(f->s, key, &m), 0);
		assert_int_equal(store_mpu_copy_part(m, 1, "fb/src", OFF, LEN), 0);
		assert_int_equal(store_mpu_put_part(m, 2, &tail, 1), 0);
		assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), 0);
		cfr_errno = 0;
		assert_true(cfr_calls >= 1); /* copy_part (in order: no concatenation) */
		assert_int_equal(store_get_range(f->s, key, 0, LEN + 2, buf, &got), 0);
		assert_int_equal(got, LEN + 1);
		assert_memory_equal(buf, src + OFF, LEN);
		assert_int_equal(buf[LEN], '!');
	}
	free(src);
	free(buf);
}

/* The one upload directory under #mpu, into buf. */
static void upload_dir(const struct fx *f, char *buf, size_t cap)
{
	char p[PATH_MAX];
	struct dirent *de;
	DIR *dp;
	int n = 0;

	snprintf(p, sizeof(p), "%s/#mpu", f->root);
	dp = opendir(p);
	assert_non_null(dp);
	while ((de = readdir(dp)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			int w = snprintf(buf, cap, "%s/%s", p, de->d_name);

			assert_true(w > 0 && (size_t)w < cap);
			n++;
		}
	closedir(dp);
	assert_int_equal(n, 1);
}

/* Parts sent in order are written once: into the upload's data file,
 * which complete links into place (the object is that file: same inode,
 * no part files, no concatenation); a part out of order then spills
 * them into part files and the result is the same bytes. */
static void test_store_dir_mpu_in_order_written_once(void **state)
{
	struct fx *f = *state;
	struct iovec a = { "abc", 3 }, b = { "defg", 4 }, z = { "Z", 1 };
	struct store_mpu *m = NULL;
	char dir[PATH_MAX], p[PATH_MAX + 300];
	struct stat data, obj;

	assert_int_equal(put_str(f->s, "src", "0123456789", 0), 0);
	assert_int_equal(store_mpu_create(f->s, "o/once", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &a, 1), 0);
	assert_int_equal(store_mpu_copy_part(m, 2, "src", 2, 5), 0);
	assert_int_equal(store_mpu_put_part(m, 3, &b, 1), 0);
	upload_dir(f, dir, sizeof(dir));
	assert_int_equal(tree_entries(dir), 1); /* data, no part files */
	snprintf(p, sizeof(p), "%s/data", dir);
	assert_int_equal(stat(p, &data), 0);
	assert_int_equal(data.st_size, 12);
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), 0);
	snprintf(p, sizeof(p), "%s/o/once", f->root);
	assert_int_equal(stat(p, &obj), 0);
	assert_int_equal(obj.st_ino, data.st_ino);
	assert_content(f->s, "o/once", "abc23456defg");
	assert_false(path_exists(f, "#mpu"));

	/* 1, 2, then 2 again and 4 before 3: spilled, last copy kept. */
	assert_int_equal(store_mpu_create(f->s, "o/spill", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &a, 1), 0);
	assert_int_equal(store_mpu_put_part(m, 2, &z, 1), 0);
	assert_int_equal(store_mpu_put_part(m, 2, &b, 1), 0);
	assert_int_equal(store_mpu_put_part(m, 4, &z, 1), 0);
	assert_int_equal(store_mpu_copy_part(m, 3, "src", 0, 2), 0);
	assert_int_equal(store_mpu_complete(m, 0), 0);
	assert_content(f->s, "o/spill", "abcdefg01Z");
	assert_false(path_exists(f, "#mpu"));

	/* Create-once onto a standing object: -EEXIST, the object kept. */
	assert_int_equal(store_mpu_create(f->s, "o/once", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &z, 1), 0);
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), -EEXIST);
	assert_content(f->s, "o/once", "abc23456defg");
	assert_false(path_exists(f, "#mpu"));
}

static void test_store_dir_mpu_create_once_exists(void **state)
{
	struct fx *f = *state;
	struct iovec v = { "new", 3 };
	struct store_mpu *m = NULL;

	assert_int_equal(put_str(f->s, "x/existing", "old content", 0), 0);
	assert_int_equal(store_mpu_create(f->s, "x/existing", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), -EEXIST);
	assert_content(f->s, "x/existing", "old content");
	assert_false(path_exists(f, "#mpu"));
	assert_int_equal(tree_entries(f->root), 2);

	/* Without the flag, complete replaces. */
	assert_int_equal(store_mpu_create(f->s, "x/existing", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	assert_int_equal(store_mpu_complete(m, 0), 0);
	assert_content(f->s, "x/existing", "new");

	/* No parts: refused (as S3 does), and the upload is gone. */
	assert_int_equal(store_mpu_create(f->s, "x/empty", &m), 0);
	quiet();
	assert_int_equal(store_mpu_complete(m, 0), -EINVAL);
	loud();
	assert_false(path_exists(f, "#mpu"));
	assert_false(path_exists(f, "x/empty"));
}

static void test_store_dir_mpu_abort(void **state)
{
	struct fx *f = *state;
	struct iovec v = { "part", 4 };
	struct store_mpu *m1 = NULL, *m2 = NULL;

	assert_int_equal(store_mpu_create(f->s, "ab/k", &m1), 0);
	assert_int_equal(store_mpu_create(f->s, "ab/k", &m2), 0);
	assert_int_equal(store_mpu_put_part(m1, 1, &v, 1), 0);
	assert_int_equal(store_mpu_put_part(m2, 2, &v, 1), 0);
	assert_true(path_exists(f, "#mpu"));
	store_mpu_abort(m1);
	assert_true(path_exists(f, "#mpu")); /* m2 still lives there */
	store_mpu_abort(m2);
	store_mpu_abort(NULL);
	assert_false(path_exists(f, "#mpu"));
	assert_false(path_exists(f, "ab/k"));
	assert_int_equal(tree_entries(f->root), 0);
}

static void test_store_dir_mpu_copy_out_of_range(void **state)
{
	struct fx *f = *state;
	uint8_t data[10000] = { 0 };
	struct iovec v = { data, sizeof(data) };
	struct store_mpu *m = NULL;

	assert_int_equal(store_put(f->s, "src", &v, 1, 0), 0);
	assert_int_equal(store_mpu_create(f->s, "dst", &m), 0);
	quiet();
	assert_int_equal(store_mpu_copy_part(m, 1, "src", 9000, 2000), -ERANGE);
	assert_int_equal(store_mpu_copy_part(m, 1, "src", 10001, 1), -ERANGE);
	assert_int_equal(store_mpu_copy_part(m, 1, "src", UINT64_MAX, 2), -ERANGE);
	assert_int_equal(store_mpu_copy_part(m, 1, "src", 5, 0), -EINVAL);
	loud();
	assert_int_equal(store_mpu_copy_part(m, 1, "src", 9000, 1000), 0);
	store_mpu_abort(m);
	assert_false(path_exists(f, "#mpu"));
	assert_false(path_exists(f, "dst"));
}

/* Parts from several threads at once into one upload. */
#define PART_THREADS 4
#define PARTS_EACH 8

struct part_job {
	struct store_mpu *m;
	int first;
	int rc;
};

static void *part_main(void *arg)
{
	struct part_job *j = arg;

	for (int i = 0; i < PARTS_EACH && j->rc == 0; i++) {
		char body[32];
		int no = j->first + i * PART_THREADS;
		struct iovec v = { body, 0 };

		v.iov_len = (size_t)snprintf(body, sizeof(body), "[%03d]", no);
		j->rc = store_mpu_put_part(j->m, no, &v, 1);
	}
	return NULL;
}

static void test_store_dir_mpu_concurrent_parts(void **state)
{
	struct fx *f = *state;
	struct part_job j[PART_THREADS];
	pthread_t th[PART_THREADS];
	struct store_mpu *m = NULL;
	char want[PART_THREADS * PARTS_EACH * 5 + 1], buf[512];

	assert_int_equal(store_mpu_create(f->s, "conc/out", &m), 0);
	for (int i = 0; i < PART_THREADS; i++) {
		j[i] = (struct part_job){ m, i + 1, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, part_main, &j[i]), 0);
	}
	for (int i = 0; i < PART_THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(j[i].rc, 0);
	}
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), 0);
	for (unsigned no = 1; no <= PART_THREADS * PARTS_EACH; no++)
		snprintf(want + (no - 1) * 5, 6, "[%03u]", no % 1000);
	assert_int_equal(get_str(f->s, "conc/out", buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
}

static void test_store_dir_stats(void **state)
{
	struct fx *f = *state;
	struct store_stats a, b;
	struct store_mpu *m = NULL;
	struct iovec v = { "12345", 5 };
	struct listing l = { .n = 0 };
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
	assert_int_equal(store_list(f->s, "st/", NULL, collect, &l), 0);
	assert_int_equal(l.n, 1);
	listing_free(&l);
	assert_int_equal(store_get_range(f->s, k, 6, 1, buf, &got), -ERANGE);
	assert_int_equal(store_mpu_create(f->s, "st/m", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	assert_int_equal(store_mpu_copy_part(m, 2, k, 0, 5), 0);
	assert_int_equal(store_mpu_complete(m, 0), 0);
	assert_int_equal(store_mpu_create(f->s, "st/m2", &m), 0);
	store_mpu_abort(m);
	quiet();
	assert_int_equal(store_head(f->s, "bad key", &size), -EINVAL);
	loud();
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
	struct fx *f = *state;
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
	struct fx *f = *state;
	struct store_mpu *m = NULL;
	struct store_stats a, b;
	struct iovec v = { "data", 4 };
	uint64_t size;
	size_t got;
	char buf[8];

	assert_int_equal(put_str(f->s, "fp/have", "have", 0), 0);
	store_get_stats(f->s, &a);

	assert_int_equal(nv_fp_arm("store.put=error"), 0);
	assert_int_equal(put_str(f->s, "fp/new", "never", 0), -EIO);
	assert_int_equal(put_str(f->s, "fp/have", "never", 0), -EIO);
	/* A failed complete still ends (aborts) the upload. */
	assert_int_equal(store_mpu_create(f->s, "fp/mpu", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	assert_int_equal(store_mpu_complete(m, 0), -EIO);
	nv_fp_reset();
	assert_int_equal(store_head(f->s, "fp/new", &size), -ENOENT);
	assert_int_equal(store_head(f->s, "fp/mpu", &size), -ENOENT);
	assert_content(f->s, "fp/have", "have");
	assert_int_equal(tree_entries(f->root), 2); /* fp/ and fp/have only */

	assert_int_equal(nv_fp_arm("store.get=error:28"), 0);
	assert_int_equal(store_get_range(f->s, "fp/have", 0, sizeof(buf), buf, &got),
			 -ENOSPC);
	nv_fp_reset();
	assert_content(f->s, "fp/have", "have");

	store_get_stats(f->s, &b);
	assert_int_equal(b.errors - a.errors, 4);
	assert_int_equal(b.bytes_put - a.bytes_put, 4); /* the part only */
}

static void test_store_dir_open_sweeps_stale_uploads(void **state)
{
	struct fx *f = *state;
	struct store_mpu *m = NULL;
	struct iovec v = { "p", 1 };
	struct timespec old[2];
	struct store *s2 = NULL;
	char p[256];
	int fd;

	/* A live upload of this store, and a stale one from "a crash". */
	assert_int_equal(store_mpu_create(f->s, "live", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	snprintf(p, sizeof(p), "%s/#mpu/deadbeef", f->root);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/#mpu/deadbeef/part-00001", f->root);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/#mpu/deadbeef", f->root);
	old[0].tv_sec = old[1].tv_sec = time(NULL) - 25 * 3600;
	old[0].tv_nsec = old[1].tv_nsec = 0;
	assert_int_equal(utimensat(AT_FDCWD, p, old, 0), 0);

	quiet();
	assert_int_equal(store_open(f->root, &s2), 0);
	loud();
	store_close(s2);
	assert_false(path_exists(f, "#mpu/deadbeef"));
	assert_int_equal(store_mpu_complete(m, 0), 0); /* the live one is intact */
	assert_content(f->s, "live", "p");
	assert_false(path_exists(f, "#mpu"));
}

/* Not a test: NOVAFS_STORE_BENCH=1 prints durable put latencies. */
static void test_store_dir_put_latency(void **state)
{
	struct fx *f = *state;
	static const size_t sizes[] = { 4096, 1u << 20 };
	enum { ROUNDS = 300 };
	uint8_t *buf;

	if (!getenv("NOVAFS_STORE_BENCH"))
		skip();
	buf = malloc(1u << 20);
	assert_non_null(buf);
	pattern(buf, 1u << 20, 9);
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
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
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
		T(test_store_dir_mpu),
		T(test_store_dir_mpu_single_part_copy),
		T(test_store_dir_mpu_copy_fallback),
		T(test_store_dir_mpu_in_order_written_once),
		T(test_store_dir_mpu_create_once_exists),
		T(test_store_dir_mpu_abort),
		T(test_store_dir_mpu_copy_out_of_range),
		T(test_store_dir_mpu_concurrent_parts),
		T(test_store_dir_stats),
		T(test_store_dir_failpoint),
		T(test_store_dir_syncs_found_directories),
		T(test_store_dir_open_sweeps_stale_uploads),
		T(test_store_dir_put_latency),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
