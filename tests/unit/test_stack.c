/*
 * test_stack.c - unit tests of the storage stack builder (engine/stack.c):
 * the default URLs under DATA_DIR, the layers an express set and a fault
 * spec add, that a failure names its layer and leaves nothing open, and
 * that meta_must_exist refuses to create a metastore, and that
 * meta_check refuses (quick), logs (warn) or skips (off, NULL) a damaged
 * one, and which directory store keeps chain slots in segment files.
 *
 * Every case works in its own mkdtemp() data directory with directory
 * stores and SQLite; nothing leaves the machine.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/stack.h"
#include "src/base/log.h"

struct fx {
	char dir[64];
	char buf[256];
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

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/novafs-stack-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* f->buf = DIR/REL */
static const char *in_dir(struct fx *f, const char *rel)
{
	snprintf(f->buf, sizeof(f->buf), "%s/%s", f->dir, rel);
	return f->buf;
}

static bool exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

static int put_one(struct stack *stk, const char *key)
{
	struct iovec iov = { .iov_base = "x", .iov_len = 1 };

	return store_put(stk->store, key, &iov, 1, 0);
}

static void test_stack_defaults_live_in_data_dir(void **state)
{
	struct fx *f = *state;
	struct stack_cfg cfg = { .data_dir = f->dir };
	struct stack stk;

	assert_int_equal(stack_open(&cfg, &stk, NULL), 0);
	assert_non_null(stk.store);
	assert_non_null(stk.kv);
	assert_int_equal(put_one(&stk, "k"), 0);
	stack_close(&stk);
	assert_null(stk.store);
	assert_null(stk.kv);
	assert_true(exists(in_dir(f, "meta.db")));
	assert_true(exists(in_dir(f, "objects")));
}

static void test_stack_meta_must_exist(void **state)
{
	struct fx *f = *state;
	struct stack_cfg cfg = { .data_dir = f->dir, .meta_must_exist = true };
	struct stack stk;
	struct stack_failure why;
	char want[128];

	assert_int_equal(stack_open(&cfg, &stk, &why), -ENOENT);
	assert_int_equal(why.part, STACK_META_MISSING);
	snprintf(want, sizeof(want), "sqlite:%s/meta.db", f->dir);
	assert_string_equal(why.url, want);
	assert_null(stk.store);
	assert_null(stk.kv);
	assert_false(exists(in_dir(f, "meta.db")));
	/* Once a star made it, the tool opens it. */
	cfg.meta_must_exist = false;
	assert_int_equal(stack_open(&cfg, &stk, NULL), 0);
	stack_close(&stk);
	cfg.meta_must_exist = true;
	assert_int_equal(stack_open(&cfg, &stk, &why), 0);
	stack_close(&stk);
}

/* A metastore of a few hundred pages, then 64 bytes of a page header in
 * its middle overwritten (what t_fsck does to a daemon's meta.db). */
static void make_damaged_meta(struct fx *f)
{
	struct stack_cfg cfg = { .data_dir = f->dir };
	struct stack stk;
	char key[32], val[200];
	unsigned char junk[64];
	struct stat sb;
	int fd;

	memset(val, 'v', sizeof(val));
	assert_int_equal(stack_open(&cfg, &stk, NULL), 0);
	for (int b = 0; b < 30; b++) { /* 100 puts a commit (one fsync each) */
		struct kv_txn *t = kv_txn_new();

		assert_non_null(t);
		for (int i = 0; i < 100; i++) {
			snprintf(key, sizeof(key), "k%06d", b * 100 + i);
			assert_int_equal(kv_txn_put(t, key, strlen(key), val, sizeof(val)), 0);
		}
		assert_int_equal(kv_txn_commit(stk.kv, t, NULL), 0);
		kv_txn_free(t);
	}
	stack_close(&stk); /* the last connection checkpoints the WAL */
	assert_int_equal(stat(in_dir(f, "meta.db"), &sb), 0);
	assert_true(sb.st_size > 100 * 4096);
	memset(junk, 0xa5, sizeof(junk));
	fd = open(in_dir(f, "meta.db"), O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, junk, sizeof(junk), sb.st_size * 2 / 3 / 4096 * 4096),
			 (ssize_t)sizeof(junk));
	close(fd);
}

static void test_stack_meta_check(void **state)
{
	struct fx *f = *state;
	struct stack_cfg cfg = { .data_dir = f->dir, .meta_check = "quick" };
	struct stack stk;
	struct stack_failure why;
	int saved = nv_log_level;

	assert_int_equal(stack_meta_check_valid(NULL), 0);
	assert_int_equal(stack_meta_check_valid("off"), 0);
	assert_int_equal(stack_meta_check_valid("quick"), 0);
	assert_int_equal(stack_meta_check_valid("warn"), 0);
	assert_int_equal(stack_meta_check_valid("Quick"), -EINVAL);
	assert_int_equal(stack_meta_check_valid(""), -EINVAL);
	/* A healthy metastore passes the check. */
	assert_int_equal(stack_open(&cfg, &stk, &why), 0);
	stack_close(&stk);
	make_damaged_meta(f);
	nv_log_level = -1; /* the damage is logged */
	assert_int_equal(stack_open(&cfg, &stk, &why), -EIO);
	assert_int_equal(why.part, STACK_META_DAMAGED);
	assert_null(stk.store);
	assert_null(stk.kv);
	cfg.meta_check = "warn";
	assert_int_equal(stack_open(&cfg, &stk, &why), 0);
	stack_close(&stk);
	nv_log_level = saved;
	cfg.meta_check = "off";
	assert_int_equal(stack_open(&cfg, &stk, &why), 0);
	stack_close(&stk);
	cfg.meta_check = NULL; /* the tools' default: no check */
	assert_int_equal(stack_open(&cfg, &stk, &why), 0);
	stack_close(&stk);
}

static void test_stack_named_urls(void **state)
{
	struct fx *f = *state;
	char store[128], meta[128];
	struct stack_cfg cfg = { .data_dir = f->dir, .store_url = store, .meta_url = meta };
	struct stack stk;

	snprintf(store, sizeof(store), "dir:%s/elsewhere", f->dir);
	snprintf(meta, sizeof(meta), "sqlite:%s/other.db", f->dir);
	assert_int_equal(stack_open(&cfg, &stk, NULL), 0);
	assert_int_equal(put_one(&stk, "k"), 0);
	stack_close(&stk);
	assert_true(exists(in_dir(f, "elsewhere")));
	assert_true(exists(in_dir(f, "other.db")));
	assert_false(exists(in_dir(f, "meta.db")));
}

/* Each layer's failure names the layer and leaves nothing open. */
static void test_stack_failure_names_layer(void **state)
{
	struct fx *f = *state;
	struct stack_cfg cfg = { .data_dir = f->dir };
	struct stack stk;
	struct stack_failure why;

	cfg.store_url = "bogus:x";
	assert_int_equal(stack_open(&cfg, &stk, &why), -EINVAL);
	assert_int_equal(why.part, STACK_STORE);
	assert_string_equal(why.url, "bogus:x");
	assert_null(stk.store);

	cfg.store_url = NULL;
	cfg.express_urls = "bogus:1";
	assert_int_equal(stack_open(&cfg, &stk, &why), -EINVAL);
	assert_int_equal(why.part, STACK_EXPRESS);
	assert_null(stk.store);

	cfg.express_urls = NULL;
	cfg.store_faults = "no_such_fault=1";
	assert_int_equal(stack_open(&cfg, &stk, &why), -EINVAL);
	assert_int_equal(why.part, STACK_FAULTS);
	assert_null(stk.store);

	cfg.store_faults = NULL;
	cfg.meta_url = "bogus:y";
	assert_int_equal(stack_open(&cfg, &stk, &why), -EINVAL);
	assert_int_equal(why.part, STACK_META);
	assert_string_equal(why.url, "bogus:y");
	assert_null(stk.store);
	assert_null(stk.kv);
}

/* An express set goes behind a router; "" means no set, no faults. */
static void test_stack_express_and_empty(void **state)
{
	struct fx *f = *state;
	char express[256];
	struct stack_cfg cfg = { .data_dir = f->dir, .express_urls = express,
				 .location = "b" };
	struct stack stk;

	snprintf(express, sizeof(express), "dir:%s/ex1?zone=a;dir:%s/ex2?zone=b", f->dir,
		 f->dir);
	assert_int_equal(stack_open(&cfg, &stk, NULL), 0);
	assert_int_equal(put_one(&stk, "k"), 0);
	stack_close(&stk);
	assert_true(exists(in_dir(f, "ex2")));

	cfg.express_urls = "";
	cfg.store_faults = "";
	assert_int_equal(stack_open(&cfg, &stk, NULL), 0);
	assert_int_equal(put_one(&stk, "k2"), 0);
	stack_close(&stk);
}

/* The fault wrapper sits on top: every PUT fails as the spec says. */
static void test_stack_faults_on_top(void **state)
{
	struct fx *f = *state;
	struct stack_cfg cfg = { .data_dir = f->dir, .store_faults = "put_error=1" };
	struct stack stk;

	assert_int_equal(stack_open(&cfg, &stk, NULL), 0);
	assert_int_equal(put_one(&stk, "k"), -EIO);
	stack_close(&stk);
}

/* The default (STACK_SEGMENTS_OWN): chain slots go to segment files on
 * the data directory's own store, and stay files on a store=dir: URL,
 * which two stars (two processes) may share, and both write slots there;
 * with ON the second writer of a shared store's segments is refused. */
static void test_stack_segments_own_store_only(void **state)
{
	struct fx *f = *state;
	char store[128], da[128], db[128];
	const char *ka = "chains/standard/sa/0000000000000001/0000000000000000";
	const char *kb = "chains/standard/sb/0000000000000001/0000000000000000";
	struct stack_cfg cfg = { .data_dir = f->dir, .slot_segments = STACK_SEGMENTS_OWN };
	struct stack_cfg ca = { .data_dir = da, .store_url = store,
				.slot_segments = STACK_SEGMENTS_OWN };
	struct stack_cfg cb = ca;
	struct stack a, b;

	assert_int_equal(stack_open(&cfg, &a, NULL), 0);
	assert_int_equal(put_one(&a, ka), 0);
	stack_close(&a);
	assert_true(exists(in_dir(f, "objects/#seg")));
	assert_false(exists(in_dir(f, "objects/chains")));

	snprintf(store, sizeof(store), "dir:%s/shared", f->dir);
	snprintf(da, sizeof(da), "%s/a", f->dir);
	snprintf(db, sizeof(db), "%s/b", f->dir);
	cb.data_dir = db;
	assert_int_equal(mkdir(da, 0755), 0);
	assert_int_equal(mkdir(db, 0755), 0);
	assert_int_equal(stack_open(&ca, &a, NULL), 0);
	assert_int_equal(stack_open(&cb, &b, NULL), 0);
	assert_int_equal(put_one(&a, ka), 0);
	assert_int_equal(put_one(&b, kb), 0);
	stack_close(&a);
	stack_close(&b);
	assert_true(exists(in_dir(f, "shared/chains/standard/sa/0000000000000001/0000000000000000")));
	assert_true(exists(in_dir(f, "shared/chains/standard/sb/0000000000000001/0000000000000000")));
	assert_false(exists(in_dir(f, "shared/#seg")));

	ca.slot_segments = cb.slot_segments = STACK_SEGMENTS_ON;
	assert_int_equal(stack_open(&ca, &a, NULL), 0);
	assert_int_equal(stack_open(&cb, &b, NULL), 0);
	assert_int_equal(put_one(&a, "chains/standard/sa/0000000000000001/0000000000000001"), 0);
	assert_int_not_equal(put_one(&b, "chains/standard/sb/0000000000000001/0000000000000001"), 0);
	stack_close(&a);
	stack_close(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_stack_defaults_live_in_data_dir, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stack_meta_must_exist, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stack_meta_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stack_named_urls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stack_failure_names_layer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stack_express_and_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stack_faults_on_top, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stack_segments_own_store_only, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
