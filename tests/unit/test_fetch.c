/*
 * test_fetch.c - unit tests of the settle job's fetch cache
 * (engine/fetch.c) over the directory store: objects of sizes around the
 * copy chunk (4 MiB) are cached whole without a HEAD, read back equal,
 * the byte budget holds, and what is not cached reads from the store.
 */
#include "config.h"

#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/bundle.h"
#include "engine/fetch.h"
#include "engine/store/set.h"
#include "engine/store/store.h"

#define MIB (1u << 20)

struct fx {
	char root[64];
	struct store *st;
	struct fetch_cache *fc;
};

static int rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char path[128];

	if (!f)
		return -1;
	snprintf(f->root, sizeof(f->root), "/tmp/novafs-fetch-XXXXXX");
	if (!mkdtemp(f->root))
		return -1;
	snprintf(path, sizeof(path), "dir:%s/objects", f->root);
	if (store_open(path, &f->st))
		return -1;
	snprintf(path, sizeof(path), "%s/scratch", f->root);
	if (fetch_cache_new(f->st, path, 16 * MIB, &f->fc))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	fetch_cache_free(f->fc);
	store_close(f->st);
	nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* Object key of n >= 32 bytes shaped as a bundle with no entries: byte
 * i = (i * 7 + seed) & 0xff below n - 32, then a valid trailer (the cache
 * keeps only whole bundles). */
static void put_object(struct store *st, const char *key, size_t n, unsigned seed)
{
	uint8_t *b = malloc(n);
	struct iovec iov = { b, n };
	struct nv_buf tr;

	assert_non_null(b);
	assert_true(n >= BUNDLE_TRAILER_SIZE);
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 7 + seed);
	nv_buf_init(&tr, BUNDLE_TRAILER_SIZE);
	assert_int_equal(bundle_footer_build(NULL, 0, n - BUNDLE_TRAILER_SIZE, &tr), 0);
	memcpy(b + n - BUNDLE_TRAILER_SIZE, tr.ptr, BUNDLE_TRAILER_SIZE);
	nv_buf_free(&tr);
	assert_int_equal(store_put(st, key, &iov, 1, 0), 0);
	free(b);
}

static void expect_range(struct fetch_cache *fc, const char *key, uint64_t off, size_t len,
			 unsigned seed)
{
	uint8_t *b = malloc(len ? len : 1);

	assert_non_null(b);
	assert_int_equal(fetch_cache_read(fc, key, off, len, b), 0);
	for (size_t i = 0; i < len; i++)
		if (b[i] != (uint8_t)((off + i) * 7 + seed))
			fail_msg("%s: byte %llu differs", key, (unsigned long long)(off + i));
	free(b);
}

static uint64_t heads(struct store *st)
{
	struct store_stats s;

	store_get_stats(st, &s);
	return s.heads;
}

/* Sizes below, at and above the copy chunk: cached whole, no HEAD. */
static void test_fetch_warm_sizes(void **state)
{
	struct fx *f = *state;
	static const size_t sizes[] = { 32, 100, 4 * MIB - 1, 4 * MIB, 4 * MIB + 1, 9 * MIB };
	uint64_t total = 0, size;

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char key[32];

		snprintf(key, sizeof(key), "obj/%u", i);
		put_object(f->st, key, sizes[i], i);
	}
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char key[32];

		snprintf(key, sizeof(key), "obj/%u", i);
		if (total + sizes[i] > 12 * MIB)
			break; /* the budget test below covers the rest */
		assert_int_equal(fetch_cache_warm(f->fc, key), 0);
		total += sizes[i];
		assert_int_equal(fetch_cache_bytes(f->fc), total);
		assert_int_equal(fetch_cache_size(f->fc, key, &size), 0);
		assert_int_equal(size, sizes[i]);
		expect_range(f->fc, key, 0, sizes[i] - BUNDLE_TRAILER_SIZE, i);
		if (sizes[i] > 42)
			expect_range(f->fc, key, sizes[i] - 42, 10, i);
		assert_int_equal(fetch_cache_warm(f->fc, key), 0); /* already there */
		assert_int_equal(fetch_cache_bytes(f->fc), total);
	}
	assert_int_equal(heads(f->st), 0);
	fetch_cache_clear(f->fc);
	assert_int_equal(fetch_cache_bytes(f->fc), 0);
	/* After the clear: read from the store, still right. */
	expect_range(f->fc, "obj/5", 5 * MIB, MIB, 5);
}

/* The budget (16 MiB) holds: a 9 MiB object fits, a second does not
 * (-ENOBUFS, nothing kept), and reads of it go to the store. */
static void test_fetch_budget(void **state)
{
	struct fx *f = *state;

	put_object(f->st, "big/1", 9 * MIB, 1);
	put_object(f->st, "big/2", 9 * MIB, 2);
	assert_int_equal(fetch_cache_warm(f->fc, "big/1"), 0);
	assert_int_equal(fetch_cache_warm(f->fc, "big/2"), -ENOBUFS);
	assert_int_equal(fetch_cache_bytes(f->fc), 9 * MIB);
	expect_range(f->fc, "big/2", 3 * MIB, MIB, 2);
	assert_int_equal(fetch_cache_warm(f->fc, "none"), -ENOENT);
	assert_int_equal(fetch_cache_bytes(f->fc), 9 * MIB);
}

/* Only whole bundles are cached: a torn object (a prefix, as a lax
 * server killed mid-PUT leaves) is -EBADMSG and leaves nothing behind;
 * in a bucket set the good copy in the other zone is cached instead. */
static void test_fetch_torn_copy(void **state)
{
	struct fx *f = *state;
	struct store *a, *b, *set, *members[2];
	struct fetch_cache *fc;
	char path[160], *zones[2] = { "a", "b" };
	uint8_t *torn = malloc(MIB);
	struct iovec iov = { torn, MIB };
	uint64_t size;

	assert_non_null(torn);
	put_object(f->st, "t/1", 2 * MIB, 3);
	assert_int_equal(fetch_cache_read(f->fc, "t/1", 0, MIB, torn), 0);
	/* the first MiB of t/1 only */
	snprintf(path, sizeof(path), "dir:%s/za", f->root);
	assert_int_equal(store_open(path, &a), 0);
	snprintf(path, sizeof(path), "dir:%s/zb", f->root);
	assert_int_equal(store_open(path, &b), 0);
	assert_int_equal(store_put(a, "t/1", &iov, 1, 0), 0);
	assert_int_equal(store_put(f->st, "t/2", &iov, 1, 0), 0);
	assert_int_equal(fetch_cache_warm(f->fc, "t/2"), -EBADMSG);
	assert_int_equal(fetch_cache_bytes(f->fc), 0);
	put_object(b, "t/1", 2 * MIB, 3);
	members[0] = a;
	members[1] = b;
	assert_int_equal(store_set_new(members, zones, 2, "a", 0, &set), 0);
	snprintf(path, sizeof(path), "%s/scratch2", f->root);
	assert_int_equal(fetch_cache_new(set, path, 16 * MIB, &fc), 0);
	assert_int_equal(fetch_cache_warm(fc, "t/1"), 0);
	assert_int_equal(fetch_cache_size(fc, "t/1", &size), 0);
	assert_int_equal(size, 2 * MIB);
	expect_range(fc, "t/1", MIB - 5, 10, 3);
	fetch_cache_free(fc);
	store_close(set);
	free(torn);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fetch_warm_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fetch_torn_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fetch_budget, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
