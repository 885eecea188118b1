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

#include "engine/fetch.h"
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

/* Object key of n bytes, byte i = (i * 7 + seed) & 0xff. */
static void put_object(struct store *st, const char *key, size_t n, unsigned seed)
{
	uint8_t *b = malloc(n ? n : 1);
	struct iovec iov = { b, n };

	assert_non_null(b);
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 7 + seed);
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
	static const size_t sizes[] = { 1, 100, 4 * MIB - 1, 4 * MIB, 4 * MIB + 1, 9 * MIB };
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
		expect_range(f->fc, key, 0, sizes[i], i);
		if (sizes[i] > 10)
			expect_range(f->fc, key, sizes[i] - 10, 10, i);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fetch_warm_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fetch_budget, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
