/*
 * test_store_dir_mpu.c - unit tests of the multipart wrapper of store.c
 * over the directory backend (engine/store/dir/): parts, range copies and
 * their read/write fallback, create-once, abort, concurrent parts, and
 * the sweep of stale uploads at open.
 *
 * Not for: single objects and listings (test_store_dir.c), the S3
 * backend.
 *
 * Every case runs in its own mkdtemp() root, removed by the teardown
 * (tests/unit/store_dir_fixture.h).  Threads never call cmocka asserts;
 * they record results that the main thread checks.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "tests/unit/store_dir_fixture.h"

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

static void test_store_dir_mpu(void **state)
{
	struct sdfx *f = *state;
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
	sdfx_pattern(src, SRC, 1);
	sdfx_pattern(p1, P1, 2);
	sdfx_pattern(p3, P3, 3);
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
	sdfx_quiet();
	assert_int_equal(store_mpu_put_part(m, 0, v1, 2), -EINVAL);
	assert_int_equal(store_mpu_put_part(m, 10001, v1, 2), -EINVAL);
	sdfx_loud();
	assert_int_equal(store_mpu_copy_part(m, 4, "objs/none", 0, 1), -ENOENT);
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), 0);

	assert_int_equal(store_get_range(f->s, "settled/out", 0, P1 + CLEN + P3 + 1,
					 got_buf, &got), 0);
	assert_int_equal(got, P1 + CLEN + P3);
	assert_memory_equal(got_buf, want, got);
	assert_false(sdfx_path_exists(f, "#mpu"));
	free(src);
	free(p1);
	free(p3);
	free(want);
	free(got_buf);
}

static void test_store_dir_mpu_single_part_copy(void **state)
{
	struct sdfx *f = *state;
	struct store_mpu *m = NULL;

	assert_int_equal(sdfx_put_str(f->s, "s", "0123456789", 0), 0);
	assert_int_equal(store_mpu_create(f->s, "t", &m), 0);
	assert_int_equal(store_mpu_copy_part(m, 1, "s", 0, 10), 0);
	assert_int_equal(store_mpu_copy_part(m, 2, "s", 9, 1), 0);
	assert_int_equal(store_mpu_copy_part(m, 3, "s", 2, 3), 0);
	assert_int_equal(store_mpu_complete(m, 0), 0);
	sdfx_assert_content(f->s, "t", "01234567899234");
}

/* Without kernel copies: bigger than the fallback's bounce buffer, and
 * each of the errno values that mean "not supported here". */
static void test_store_dir_mpu_copy_fallback(void **state)
{
	struct sdfx *f = *state;
	static const int errs[] = { EXDEV, ENOSYS, EINVAL, EOPNOTSUPP };
	enum { SRC = 700000, OFF = 777, LEN = 600001 };
	uint8_t *src = malloc(SRC), *buf = malloc(LEN + 2);
	struct iovec v = { src, SRC }, tail = { "!", 1 };

	assert_non_null(src);
	assert_non_null(buf);
	sdfx_pattern(src, SRC, 5);
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
static void upload_dir(const struct sdfx *f, char *buf, size_t cap)
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
	struct sdfx *f = *state;
	struct iovec a = { "abc", 3 }, b = { "defg", 4 }, z = { "Z", 1 };
	struct store_mpu *m = NULL;
	char dir[PATH_MAX], p[PATH_MAX + 300];
	struct stat data, obj;

	assert_int_equal(sdfx_put_str(f->s, "src", "0123456789", 0), 0);
	assert_int_equal(store_mpu_create(f->s, "o/once", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &a, 1), 0);
	assert_int_equal(store_mpu_copy_part(m, 2, "src", 2, 5), 0);
	assert_int_equal(store_mpu_put_part(m, 3, &b, 1), 0);
	upload_dir(f, dir, sizeof(dir));
	assert_int_equal(sdfx_tree_entries(dir), 1); /* data, no part files */
	snprintf(p, sizeof(p), "%s/data", dir);
	assert_int_equal(stat(p, &data), 0);
	assert_int_equal(data.st_size, 12);
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), 0);
	snprintf(p, sizeof(p), "%s/o/once", f->root);
	assert_int_equal(stat(p, &obj), 0);
	assert_int_equal(obj.st_ino, data.st_ino);
	sdfx_assert_content(f->s, "o/once", "abc23456defg");
	assert_false(sdfx_path_exists(f, "#mpu"));

	/* 1, 2, then 2 again and 4 before 3: spilled, last copy kept. */
	assert_int_equal(store_mpu_create(f->s, "o/spill", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &a, 1), 0);
	assert_int_equal(store_mpu_put_part(m, 2, &z, 1), 0);
	assert_int_equal(store_mpu_put_part(m, 2, &b, 1), 0);
	assert_int_equal(store_mpu_put_part(m, 4, &z, 1), 0);
	assert_int_equal(store_mpu_copy_part(m, 3, "src", 0, 2), 0);
	assert_int_equal(store_mpu_complete(m, 0), 0);
	sdfx_assert_content(f->s, "o/spill", "abcdefg01Z");
	assert_false(sdfx_path_exists(f, "#mpu"));

	/* Create-once onto a standing object: -EEXIST, the object kept. */
	assert_int_equal(store_mpu_create(f->s, "o/once", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &z, 1), 0);
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), -EEXIST);
	sdfx_assert_content(f->s, "o/once", "abc23456defg");
	assert_false(sdfx_path_exists(f, "#mpu"));
}

static void test_store_dir_mpu_create_once_exists(void **state)
{
	struct sdfx *f = *state;
	struct iovec v = { "new", 3 };
	struct store_mpu *m = NULL;

	assert_int_equal(sdfx_put_str(f->s, "x/existing", "old content", 0), 0);
	assert_int_equal(store_mpu_create(f->s, "x/existing", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	assert_int_equal(store_mpu_complete(m, STORE_CREATE_ONCE), -EEXIST);
	sdfx_assert_content(f->s, "x/existing", "old content");
	assert_false(sdfx_path_exists(f, "#mpu"));
	assert_int_equal(sdfx_tree_entries(f->root), 2);

	/* Without the flag, complete replaces. */
	assert_int_equal(store_mpu_create(f->s, "x/existing", &m), 0);
	assert_int_equal(store_mpu_put_part(m, 1, &v, 1), 0);
	assert_int_equal(store_mpu_complete(m, 0), 0);
	sdfx_assert_content(f->s, "x/existing", "new");

	/* No parts: refused (as S3 does), and the upload is gone. */
	assert_int_equal(store_mpu_create(f->s, "x/empty", &m), 0);
	sdfx_quiet();
	assert_int_equal(store_mpu_complete(m, 0), -EINVAL);
	sdfx_loud();
	assert_false(sdfx_path_exists(f, "#mpu"));
	assert_false(sdfx_path_exists(f, "x/empty"));
}

static void test_store_dir_mpu_abort(void **state)
{
	struct sdfx *f = *state;
	struct iovec v = { "part", 4 };
	struct store_mpu *m1 = NULL, *m2 = NULL;

	assert_int_equal(store_mpu_create(f->s, "ab/k", &m1), 0);
	assert_int_equal(store_mpu_create(f->s, "ab/k", &m2), 0);
	assert_int_equal(store_mpu_put_part(m1, 1, &v, 1), 0);
	assert_int_equal(store_mpu_put_part(m2, 2, &v, 1), 0);
	assert_true(sdfx_path_exists(f, "#mpu"));
	store_mpu_abort(m1);
	assert_true(sdfx_path_exists(f, "#mpu")); /* m2 still lives there */
	store_mpu_abort(m2);
	store_mpu_abort(NULL);
	assert_false(sdfx_path_exists(f, "#mpu"));
	assert_false(sdfx_path_exists(f, "ab/k"));
	assert_int_equal(sdfx_tree_entries(f->root), 0);
}

static void test_store_dir_mpu_copy_out_of_range(void **state)
{
	struct sdfx *f = *state;
	uint8_t data[10000] = { 0 };
	struct iovec v = { data, sizeof(data) };
	struct store_mpu *m = NULL;

	assert_int_equal(store_put(f->s, "src", &v, 1, 0), 0);
	assert_int_equal(store_mpu_create(f->s, "dst", &m), 0);
	sdfx_quiet();
	assert_int_equal(store_mpu_copy_part(m, 1, "src", 9000, 2000), -ERANGE);
	assert_int_equal(store_mpu_copy_part(m, 1, "src", 10001, 1), -ERANGE);
	assert_int_equal(store_mpu_copy_part(m, 1, "src", UINT64_MAX, 2), -ERANGE);
	assert_int_equal(store_mpu_copy_part(m, 1, "src", 5, 0), -EINVAL);
	sdfx_loud();
	assert_int_equal(store_mpu_copy_part(m, 1, "src", 9000, 1000), 0);
	store_mpu_abort(m);
	assert_false(sdfx_path_exists(f, "#mpu"));
	assert_false(sdfx_path_exists(f, "dst"));
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
	struct sdfx *f = *state;
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
	assert_int_equal(sdfx_get_str(f->s, "conc/out", buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
}


static void test_store_dir_open_sweeps_stale_uploads(void **state)
{
	struct sdfx *f = *state;
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

	sdfx_quiet();
	assert_int_equal(store_open(f->root, &s2), 0);
	sdfx_loud();
	store_close(s2);
	assert_false(sdfx_path_exists(f, "#mpu/deadbeef"));
	assert_int_equal(store_mpu_complete(m, 0), 0); /* the live one is intact */
	sdfx_assert_content(f->s, "live", "p");
	assert_false(sdfx_path_exists(f, "#mpu"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, sdfx_setup, sdfx_teardown)
		T(test_store_dir_mpu),
		T(test_store_dir_mpu_single_part_copy),
		T(test_store_dir_mpu_copy_fallback),
		T(test_store_dir_mpu_in_order_written_once),
		T(test_store_dir_mpu_create_once_exists),
		T(test_store_dir_mpu_abort),
		T(test_store_dir_mpu_copy_out_of_range),
		T(test_store_dir_mpu_concurrent_parts),
		T(test_store_dir_open_sweeps_stale_uploads),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
