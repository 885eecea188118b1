/*
 * store_dir_fixture.c - see store_dir_fixture.h.
 */
#include "config.h"
#include "tests/unit/store_dir_fixture.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "src/base/log.h"

static int rm_one(const char *path, const struct stat *sb, int type,
		  struct FTW *ftw)
{
	return remove(path);
}

int sdfx_setup(void **state)
{
	struct sdfx *f = calloc(1, sizeof(*f));

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

int sdfx_teardown(void **state)
{
	struct sdfx *f = *state;

	store_close(f->s);
	nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* Silence expected error lines; restore with sdfx_loud(). */
static int saved_level;
void sdfx_quiet(void)
{
	saved_level = nv_log_level;
	nv_log_level = -1;
}
void sdfx_loud(void)
{
	nv_log_level = saved_level;
}

int sdfx_put_str(struct store *s, const char *key, const char *str, unsigned flags)
{
	struct iovec v = { (void *)str, strlen(str) };

	return store_put(s, key, &v, 1, flags);
}

/* Whole object as a NUL-terminated string in buf (cap bytes). */
int sdfx_get_str(struct store *s, const char *key, char *buf, size_t cap)
{
	size_t got = 0;
	int rc = store_get_range(s, key, 0, cap - 1, buf, &got);

	buf[rc == 0 ? got : 0] = '\0';
	return rc;
}

void sdfx_assert_content(struct store *s, const char *key, const char *want)
{
	char buf[4096];

	assert_int_equal(sdfx_get_str(s, key, buf, sizeof(buf)), 0);
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
int sdfx_tree_entries(const char *root)
{
	tree_count = 0;
	nftw(root, count_one, 16, FTW_PHYS);
	return tree_count;
}

bool sdfx_path_exists(const struct sdfx *f, const char *rel)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", f->root, rel);
	return lstat(p, &st) == 0;
}

/* ------------------------------------------------------------ list */

int sdfx_collect(void *arg, const char *key, uint64_t size)
{
	struct sdfx_listing *l = arg;

	if (l->n >= SDFX_LIST_MAX)
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

void sdfx_listing_free(struct sdfx_listing *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->keys[i]);
	l->n = 0;
}

/* List and compare with want[] (NULL-terminated). */
void sdfx_assert_list(struct store *s, const char *prefix, const char *after,
		      const char *const *want)
{
	struct sdfx_listing l = { .n = 0 };
	int i;

	assert_int_equal(store_list(s, prefix, after, sdfx_collect, &l), 0);
	for (i = 0; want[i]; i++) {
		assert_true(i < l.n);
		assert_string_equal(l.keys[i], want[i]);
	}
	assert_int_equal(l.n, i);
	sdfx_listing_free(&l);
}

/* Bytes 0..n-1 of a deterministic pattern. */
void sdfx_pattern(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed) ^ (i >> 8));
}
