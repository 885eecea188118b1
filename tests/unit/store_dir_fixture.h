/*
 * store_dir_fixture.h - the shared harness of the directory-store unit
 * tests (test_store_dir, test_store_dir_mpu).
 *
 * For: one store_open()ed directory store in a fresh mkdtemp() root per
 * case (sdfx_setup(), sdfx_teardown() as the cmocka setup and teardown;
 * the teardown removes the root), string puts and gets, listings
 * compared against a list, tree counts and path checks below the root,
 * a deterministic byte pattern, and silencing expected error lines.  Not
 * for: the S3 backend, or engine tests (tests/unit/engine_fixture.h).
 *
 * Threads: every helper that asserts runs on the test thread; threads of
 * a case only record results.
 */
#ifndef NOVAFS_TESTS_STORE_DIR_FIXTURE_H
#define NOVAFS_TESTS_STORE_DIR_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/store/store.h"

/* A case's state (*state of the cmocka case; owned by the fixture). */
struct sdfx {
	char root[64];
	struct store *s;
};

int sdfx_setup(void **state);
int sdfx_teardown(void **state);

/* Silence expected error lines; restore with sdfx_loud(). */
void sdfx_quiet(void);
void sdfx_loud(void);

/* str (borrowed) as the whole object key.  store_put()'s result. */
int sdfx_put_str(struct store *s, const char *key, const char *str, unsigned flags);
/* Whole object as a NUL-terminated string in buf (cap bytes). */
int sdfx_get_str(struct store *s, const char *key, char *buf, size_t cap);
void sdfx_assert_content(struct store *s, const char *key, const char *want);

/* Number of entries below root (root itself not counted). */
int sdfx_tree_entries(const char *root);
/* rel (relative to f->root) exists (lstat). */
bool sdfx_path_exists(const struct sdfx *f, const char *rel);

/* A listing collected by sdfx_collect() (a store_list() visitor); keys
 * are owned by it until sdfx_listing_free(). */
#define SDFX_LIST_MAX 64
struct sdfx_listing {
	char *keys[SDFX_LIST_MAX];
	uint64_t sizes[SDFX_LIST_MAX];
	int n;
	int stop_after; /* return 1 once n reaches it (0: never) */
	int fail_after; /* return -EIO once n reaches it (0: never) */
};
int sdfx_collect(void *arg, const char *key, uint64_t size);
void sdfx_listing_free(struct sdfx_listing *l);
/* List and compare with want[] (NULL-terminated). */
void sdfx_assert_list(struct store *s, const char *prefix, const char *after,
		      const char *const *want);

/* Bytes 0..n-1 of a deterministic pattern. */
void sdfx_pattern(uint8_t *p, size_t n, unsigned seed);

#endif
