/*
 * test_kv.c - the KV conformance suite: meta/kv.c (with its CAS helper
 * kv_cas_run()), leases and watches, run against every backend.
 *
 * Every case runs against a real SQLite database in a fresh mkdtemp()
 * directory (fixture), so durability pragmas, WAL and the reader pool are
 * the ones production uses.  When NOVAFS_ETCD_URL (a metastore URL) or
 * NOVAFS_ETCD_ENDPOINTS ("h:p;h:p") is set, every case that is not about
 * SQLite itself runs a second time against that etcd, each case under a
 * fresh key prefix (tests/etcd/t_kv_etcd.sh starts one and three
 * members); NOVAFS_KV_ONLY=etcd skips the SQLite pass.  Without an
 * endpoint the etcd pass is skipped (cmocka's skip(), 77 when it is the
 * only pass asked for).  Where backends may differ, kv.h says so and
 * the case checks only what kv.h promises.  Threads in the concurrency case never call
 * cmocka assertions (they longjmp); they count failures for the main
 * thread to assert on.
 */
#include "config.h"
#include "meta/kv.h"
#include "meta/sqlite.h"
#include "meta/tuple.h"
#include "src/base/failpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

struct fx {
	char dir[PATH_MAX];
	char path[PATH_MAX + 16]; /* dir/meta.db, or the etcd URL */
	struct kv *kv;
	bool etcd;
};

/* The etcd URL of this run ("" when none), and whether the pass now
 * running is the etcd one. */
static char g_etcd_url[4096];
static bool g_on_etcd;

/* A fresh prefix per case: "<url prefix>-<pid>-<n>". */
static int fx_setup_etcd(struct fx *f)
{
	static int n;
	const char *q = strchr(g_etcd_url, '?');
	int len = q ? (int)(q - g_etcd_url) : (int)strlen(g_etcd_url);

	f->etcd = true;
	snprintf(f->path, sizeof(f->path), "%.*s-%d-%d%s", len, g_etcd_url, (int)getpid(),
		 ++n, q ? q : "");
	if (kv_open(f->path, &f->kv)) {
		free(f);
		return -1;
	}
	return 0;
}

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");

	if (!f)
		return -1;
	if (g_on_etcd) {
		if (fx_setup_etcd(f))
			return -1;
		*state = f;
		return 0;
	}
	snprintf(f->dir, sizeof(f->dir), "%s/novafs-kv-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/meta.db", f->dir);
	if (kv_open(f->path, &f->kv)) {
		rmdir(f->dir);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	struct dirent *de;
	DIR *d;

	nv_fp_reset(); /* in case a failing case left a point armed */
	kv_close(f->kv);
	if (f->etcd) {
		free(f);
		return 0;
	}
	d = opendir(f->dir);
	while (d && (de = readdir(d))) {
		char p[PATH_MAX * 2];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", f->dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(f->dir);
	free(f);
	return 0;
}

#define S(s) (s), strlen(s)

/* Put a string value unconditionally. */
static void put_s(struct kv *kv, const char *k, const char *v)
{
	assert_int_equal(kv_put(kv, S(k), S(v)), 0);
}

/* Assert key k holds exactly v; return its version. */
static uint64_t expect_s(struct kv *kv, const char *k, const char *v)
{
	struct nv_buf b;
	uint64_t ver = 0;

	nv_buf_init(&b, KV_VAL_MAX);
	assert_int_equal(kv_get(kv, S(k), &b, &ver), 0);
	assert_int_equal(b.len, strlen(v));
	if (b.len)
		assert_memory_equal(b.ptr, v, b.len);
	assert_true(ver > 0);
	nv_buf_free(&b);
	return ver;
}

static void expect_absent(struct kv *kv, const void *k, size_t klen)
{
	struct nv_buf b;

	nv_buf_init(&b, KV_VAL_MAX);
	assert_int_equal(kv_get(kv, k, klen, &b, NULL), -ENOENT);
	nv_buf_free(&b);
}

/* Range visitor collecting keys into a newline-separated string. */
struct collect {
	char out[4096];
	size_t n;        /* keys seen */
	size_t stop_at;  /* 0: never stop */
	int stop_rc;     /* returned at stop_at */
	uint64_t minver, maxver;
};

static int collect_fn(void *arg, const uint8_t *key, size_t klen,
		      const uint8_t *val, size_t vlen, uint64_t ver)
{
	struct collect *c = arg;
	size_t used = strlen(c->out);

	(void)val;
	(void)vlen;
	if (used + klen + 2 < sizeof(c->out)) {
		memcpy(c->out + used, key, klen);
		c->out[used + klen] = ',';
		c->out[used + klen + 1] = 0;
	}
	if (c->n == 0 || ver < c->minver)
		c->minver = ver;
	if (ver > c->maxver)
		c->maxver = ver;
	c->n++;
	if (c->stop_at && c->n == c->stop_at)
		return c->stop_rc;
	return 0;
}

static void test_kv_get_put_del(void **state)
{
	struct fx *f = *state;
	struct nv_buf b;
	uint64_t v1, v2;

	expect_absent(f->kv, S("a"));
	put_s(f->kv, "a", "one");
	v1 = expect_s(f->kv, "a", "one");
	put_s(f->kv, "a", "two");
	v2 = expect_s(f->kv, "a", "two");
	assert_true(v2 > v1);
	assert_int_equal(kv_del(f->kv, S("a")), 0);
	expect_absent(f->kv, S("a"));
	assert_int_equal(kv_del(f->kv, S("a")), 0); /* absent: still fine */

	/* An empty value is a present key, not a NULL. */
	put_s(f->kv, "empty", "");
	expect_s(f->kv, "empty", "");
	/* The empty key is a key like any other. */
	put_s(f->kv, "", "root");
	expect_s(f->kv, "", "root");
	/* Binary keys and values with zero bytes. */
	assert_int_equal(kv_put(f->kv, "k\0\0", 3, "v\0w", 3), 0);
	nv_buf_init(&b, 16);
	assert_int_equal(kv_get(f->kv, "k\0\0", 3, &b, NULL), 0);
	assert_int_equal(b.len, 3);
	assert_memory_equal(b.ptr, "v\0w", 3);
	/* get resets the buffer first; NULL val is allowed. */
	assert_int_equal(kv_get(f->kv, S("empty"), &b, NULL), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(kv_get(f->kv, S("empty"), NULL, &v1), 0);
	/* The caller's buffer limit is honoured. */
	nv_buf_free(&b);
	nv_buf_init(&b, 2);
	assert_int_equal(kv_get(f->kv, "k\0\0", 3, &b, NULL), -E2BIG);
	nv_buf_free(&b);
	if (!f->etcd)
		assert_string_equal(kv_name(f->kv) + strlen("sqlite:"), f->path);
}

static void test_kv_versions_are_commit_revisions(void **state)
{
	struct fx *f = *state;
	struct kv_txn *t;
	uint64_t r1, r2, r3, r4, va, vb;

	t = kv_txn_new();
	assert_non_null(t);
	assert_int_equal(kv_txn_put(t, S("a"), S("1")), 0);
	assert_int_equal(kv_txn_put(t, S("b"), S("1")), 0);
	assert_int_equal(kv_txn_nwrites(t), 2);
	assert_int_equal(kv_txn_commit(f->kv, t, &r1), 0);
	kv_txn_free(t);
	assert_int_equal(expect_s(f->kv, "a", "1"), r1);
	assert_int_equal(expect_s(f->kv, "b", "1"), r1);

	t = kv_txn_new();
	assert_int_equal(kv_txn_put(t, S("a"), S("2")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, &r2), 0);
	kv_txn_free(t);
	assert_true(r2 == r1 + 1);
	va = expect_s(f->kv, "a", "2");
	vb = expect_s(f->kv, "b", "1");
	assert_true(va == r2 && vb == r1);

	/* A delete-only commit: SQLite gives it a revision; etcd does not
	 * when it deleted nothing (kv.h promises neither). */
	t = kv_txn_new();
	assert_int_equal(kv_txn_del(t, S("nothing")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, &r3), 0);
	kv_txn_free(t);
	assert_true(f->etcd ? r3 >= r2 : r3 == r2 + 1);

	/* A compare-only commit writes nothing: it reports the current
	 * revision and does not advance it. */
	t = kv_txn_new();
	assert_int_equal(kv_txn_cmp_ver(t, S("a"), va), 0);
	assert_int_equal(kv_txn_nwrites(t), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, &r4), 0);
	kv_txn_free(t);
	assert_true(r4 == r3);

	/* And kv_put takes the next one. */
	put_s(f->kv, "c", "x");
	assert_true(expect_s(f->kv, "c", "x") == r3 + 1);
}

static void test_kv_floor(void **state)
{
	struct fx *f = *state;
	struct nv_buf k, v;
	uint64_t ver = 0, vd;

	put_s(f->kv, "b", "B");
	put_s(f->kv, "d", "D");
	put_s(f->kv, "f", "F");
	vd = expect_s(f->kv, "d", "D");
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);

	/* exact hit */
	assert_int_equal(kv_floor(f->kv, S("d"), S(""), &k, &v, &ver), 0);
	assert_true(k.len == 1 && k.ptr[0] == 'd' && v.len == 1 && v.ptr[0] == 'D');
	assert_true(ver == vd);
	/* between keys */
	assert_int_equal(kv_floor(f->kv, S("e"), S(""), &k, &v, NULL), 0);
	assert_true(k.len == 1 && k.ptr[0] == 'd');
	/* a longer key with a stored key as prefix: "d" <= "d\0" */
	assert_int_equal(kv_floor(f->kv, "d\0", 2, S(""), &k, NULL, NULL), 0);
	assert_true(k.len == 1 && k.ptr[0] == 'd');
	/* above every key */
	assert_int_equal(kv_floor(f->kv, S("zzz"), S(""), &k, NULL, NULL), 0);
	assert_true(k.len == 1 && k.ptr[0] == 'f');
	/* below every key */
	assert_int_equal(kv_floor(f->kv, S("a"), S(""), &k, &v, NULL), -ENOENT);
	/* lo respected: the floor of "e" is "d", below lo "e" */
	assert_int_equal(kv_floor(f->kv, S("e"), S("e"), &k, NULL, NULL), -ENOENT);
	assert_int_equal(kv_floor(f->kv, S("e"), S("c"), &k, NULL, NULL), 0);
	assert_true(k.len == 1 && k.ptr[0] == 'd');
	/* lo inclusive */
	assert_int_equal(kv_floor(f->kv, S("e"), S("d"), NULL, NULL, &ver), 0);
	assert_true(ver == vd);
	/* lo above key: empty interval */
	assert_int_equal(kv_floor(f->kv, S("d"), S("e"), &k, NULL, NULL), -ENOENT);
	nv_buf_free(&k);
	nv_buf_free(&v);
}

static void fill_k0_k9(struct kv *kv)
{
	struct kv_txn *t = kv_txn_new();
	char key[16];

	assert_non_null(t);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(kv_txn_put(t, S(key), S("v")), 0);
	}
	assert_int_equal(kv_txn_commit(kv, t, NULL), 0);
	kv_txn_free(t);
}

static void range_expect(struct kv *kv, const char *s, const char *e,
			 size_t limit, bool rev, const char *want)
{
	struct collect c = { .out = "" };

	assert_int_equal(kv_range(kv, S(s), S(e), limit, rev, collect_fn, &c), 0);
	assert_string_equal(c.out, want);
}

static void test_kv_range(void **state)
{
	struct fx *f = *state;

	fill_k0_k9(f->kv);
	put_s(f->kv, "j", "before");
	put_s(f->kv, "l", "after");
	range_expect(f->kv, "k2", "k7", 0, false, "k2,k3,k4,k5,k6,");
	range_expect(f->kv, "k2", "k7", 0, true, "k6,k5,k4,k3,k2,");
	range_expect(f->kv, "k2", "k7", 3, false, "k2,k3,k4,");
	range_expect(f->kv, "k2", "k7", 3, true, "k6,k5,k4,");
	range_expect(f->kv, "k2", "k7", 100, false, "k2,k3,k4,k5,k6,");
	/* the "k" prefix: [k, k\xff) */
	range_expect(f->kv, "k", "k\xff", 0, false,
		     "k0,k1,k2,k3,k4,k5,k6,k7,k8,k9,");
	/* empty ranges */
	range_expect(f->kv, "k7", "k2", 0, false, "");
	range_expect(f->kv, "k7", "k2", 0, true, "");
	range_expect(f->kv, "k3", "k3", 0, false, "");
	range_expect(f->kv, "m", "z", 0, false, "");
	/* the end is exclusive, the start inclusive */
	range_expect(f->kv, "k9", "l", 0, false, "k9,");
	range_expect(f->kv, "j", "k0", 0, true, "j,");
}

static void test_kv_range_fn_stops(void **state)
{
	struct fx *f = *state;
	struct collect c = { .out = "", .stop_at = 2, .stop_rc = 1 };

	fill_k0_k9(f->kv);
	assert_int_equal(kv_range(f->kv, S("k"), S("l"), 0, false, collect_fn, &c), 0);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.out, "k0,k1,");

	memset(&c, 0, sizeof(c));
	c.stop_at = 3;
	c.stop_rc = -EUCLEAN;
	assert_int_equal(kv_range(f->kv, S("k"), S("l"), 0, true, collect_fn, &c),
			 -EUCLEAN);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.out, "k9,k8,k7,");

	/* The reader connection was given back: the pool still works for
	 * more visits than it has connections. */
	for (int i = 0; i < 10; i++) {
		memset(&c, 0, sizeof(c));
		c.stop_at = 1;
		c.stop_rc = -EIO;
		assert_int_equal(kv_range(f->kv, S("k"), S("l"), 0, false,
					  collect_fn, &c), -EIO);
	}
	range_expect(f->kv, "k8", "l", 0, false, "k8,k9,");
}

/* kv.h invariant 3: memcmp order, shorter first on a common prefix. */
static void test_kv_memcmp_order(void **state)
{
	static const struct {
		const char *k;
		size_t n;
	} keys[] = { /* ascending */
		{ "", 0 },     { "\0", 1 },   { "\0\0", 2 }, { "\x01", 1 },
		{ "a", 1 },    { "a\0", 2 },  { "a\0\0", 3 }, { "a\x01", 2 },
		{ "ab", 2 },   { "abc", 3 },  { "b", 1 },    { "\x7f", 1 },
		{ "\x80", 1 }, { "\xff", 1 }, { "\xff\xff", 2 },
	};
	const size_t nk = sizeof(keys) / sizeof(keys[0]);
	struct fx *f = *state;
	struct collect c = { .out = "" };
	struct nv_buf k;

	/* Insert in a scrambled order, one commit each. */
	for (size_t i = 0; i < nk; i++) {
		size_t j = (i * 7) % nk;
		char v[8];

		snprintf(v, sizeof(v), "%zu", j);
		assert_int_equal(kv_put(f->kv, keys[j].k, keys[j].n, S(v)), 0);
	}
	/* Walk ascending; check each key's position via its value. */
	for (size_t i = 0; i < nk; i++) {
		struct nv_buf v;
		char want[8];

		nv_buf_init(&v, 16);
		snprintf(want, sizeof(want), "%zu", i);
		assert_int_equal(kv_get(f->kv, keys[i].k, keys[i].n, &v, NULL), 0);
		assert_int_equal(v.len, strlen(want));
		assert_memory_equal(v.ptr, want, v.len);
		nv_buf_free(&v);
	}
	assert_int_equal(kv_range(f->kv, "", 0, "\xff\xff\xff", 3, 0, false,
				  collect_fn, &c), 0);
	assert_int_equal(c.n, nk);
	/* Each key's floor from just below the next key is itself. */
	nv_buf_init(&k, KV_KEY_MAX);
	for (size_t i = 0; i + 1 < nk; i++) {
		assert_int_equal(kv_floor(f->kv, keys[i].k, keys[i].n, "", 0, &k,
					  NULL, NULL), 0);
		assert_int_equal(k.len, keys[i].n);
		if (k.len)
			assert_memory_equal(k.ptr, keys[i].k, k.len);
		/* [key_i, key_i+1) holds exactly key_i */
		memset(&c, 0, sizeof(c));
		assert_int_equal(kv_range(f->kv, keys[i].k, keys[i].n,
					  keys[i + 1].k, keys[i + 1].n, 0, false,
					  collect_fn, &c), 0);
		assert_int_equal(c.n, 1);
	}
	nv_buf_free(&k);
}

/* Tuple-encoded keys range correctly by prefix. */
static void test_kv_tuple_prefix_range(void **state)
{
	struct fx *f = *state;
	struct nv_buf key, lo, hi;
	struct collect c = { .out = "" };

	nv_buf_init(&key, KV_KEY_MAX);
	nv_buf_init(&lo, KV_KEY_MAX + 1);
	nv_buf_init(&hi, KV_KEY_MAX + 1);
	for (uint64_t s = 0; s < 3; s++) {
		for (uint64_t q = 0; q < 300; q += 100) {
			nv_buf_reset(&key);
			assert_int_equal(nv_tup_add_str(&key, "ref"), 0);
			assert_int_equal(nv_tup_add_u64(&key, s), 0);
			assert_int_equal(nv_tup_add_u64(&key, q), 0);
			assert_int_equal(kv_put(f->kv, key.ptr, key.len, S("x")), 0);
		}
	}
	/* Everything of stream 1: [("ref",1), ("ref",1)+0xFF) */
	assert_int_equal(nv_tup_add_str(&lo, "ref"), 0);
	assert_int_equal(nv_tup_add_u64(&lo, 1), 0);
	assert_int_equal(nv_buf_add(&hi, lo.ptr, lo.len), 0);
	assert_int_equal(nv_tup_prefix_end(&hi), 0);
	assert_int_equal(kv_range(f->kv, lo.ptr, lo.len, hi.ptr, hi.len, 0, false,
				  collect_fn, &c), 0);
	assert_int_equal(c.n, 3);
	/* Floor of (ref, 1, 250) within stream 1 is (ref, 1, 200). */
	nv_buf_reset(&key);
	assert_int_equal(nv_tup_add_str(&key, "ref"), 0);
	assert_int_equal(nv_tup_add_u64(&key, 1), 0);
	assert_int_equal(nv_tup_add_u64(&key, 250), 0);
	{
		struct nv_buf got;
		struct nv_tup_rd r;
		char s[8];
		uint64_t a, b;

		nv_buf_init(&got, KV_KEY_MAX);
		assert_int_equal(kv_floor(f->kv, key.ptr, key.len, lo.ptr, lo.len,
					  &got, NULL, NULL), 0);
		nv_tup_rd_init(&r, got.ptr, got.len);
		assert_int_equal(nv_tup_get_str(&r, s, sizeof(s), NULL), 0);
		assert_int_equal(nv_tup_get_u64(&r, &a), 0);
		assert_int_equal(nv_tup_get_u64(&r, &b), 0);
		assert_true(a == 1 && b == 200 && nv_tup_rd_end(&r));
		nv_buf_free(&got);
	}
	nv_buf_free(&key);
	nv_buf_free(&lo);
	nv_buf_free(&hi);
}

static void test_kv_cas_ver_conflict(void **state)
{
	struct fx *f = *state;
	struct kv_txn *t;
	uint64_t v, rev = 12345;

	put_s(f->kv, "x", "old");
	v = expect_s(f->kv, "x", "old");

	t = kv_txn_new();
	assert_int_equal(kv_txn_put(t, S("y"), S("new")), 0);
	assert_int_equal(kv_txn_cmp_ver(t, S("x"), v + 1), 0);
	assert_int_equal(kv_txn_put(t, S("x"), S("new")), 0);
	assert_int_equal(kv_txn_del(t, S("x")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, &rev), -ECANCELED);
	kv_txn_free(t);
	assert_true(rev == 12345); /* untouched on failure */
	expect_absent(f->kv, S("y"));
	assert_true(expect_s(f->kv, "x", "old") == v);

	/* The right version passes. */
	t = kv_txn_new();
	assert_int_equal(kv_txn_cmp_ver(t, S("x"), v), 0);
	assert_int_equal(kv_txn_put(t, S("x"), S("new")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, &rev), 0);
	kv_txn_free(t);
	assert_true(expect_s(f->kv, "x", "new") == rev);

	/* The old version no longer does. */
	t = kv_txn_new();
	assert_int_equal(kv_txn_cmp_ver(t, S("x"), v), 0);
	assert_int_equal(kv_txn_put(t, S("x"), S("newer")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), -ECANCELED);
	kv_txn_free(t);
	expect_s(f->kv, "x", "new");
}

static void test_kv_cas_ver_zero_means_absent(void **state)
{
	struct fx *f = *state;
	struct kv_txn *t;

	for (int round = 0; round < 2; round++) {
		t = kv_txn_new();
		assert_int_equal(kv_txn_cmp_ver(t, S("z"), 0), 0);
		assert_int_equal(kv_txn_put(t, S("z"), S("created")), 0);
		assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
		kv_txn_free(t);
		expect_s(f->kv, "z", "created");

		/* present now: create-if-absent fails */
		t = kv_txn_new();
		assert_int_equal(kv_txn_cmp_ver(t, S("z"), 0), 0);
		assert_int_equal(kv_txn_put(t, S("z"), S("again")), 0);
		assert_int_equal(kv_txn_commit(f->kv, t, NULL), -ECANCELED);
		kv_txn_free(t);
		expect_s(f->kv, "z", "created");

		assert_int_equal(kv_del(f->kv, S("z")), 0); /* absent again */
	}
}

static void test_kv_cas_val(void **state)
{
	struct fx *f = *state;
	struct kv_txn *t;

	put_s(f->kv, "x", "hello");
	put_s(f->kv, "e", "");

	t = kv_txn_new();
	assert_int_equal(kv_txn_cmp_val(t, S("x"), S("hello")), 0);
	assert_int_equal(kv_txn_put(t, S("x"), S("world")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	expect_s(f->kv, "x", "world");

	/* a prefix, a longer value, a different value, an absent key */
	static const char *const bad[] = { "worl", "worlds", "WORLD" };
	for (int i = 0; i < 3; i++) {
		t = kv_txn_new();
		assert_int_equal(kv_txn_cmp_val(t, S("x"), S(bad[i])), 0);
		assert_int_equal(kv_txn_put(t, S("x"), S("bad")), 0);
		assert_int_equal(kv_txn_commit(f->kv, t, NULL), -ECANCELED);
		kv_txn_free(t);
	}
	t = kv_txn_new();
	assert_int_equal(kv_txn_cmp_val(t, S("absent"), S("")), 0);
	assert_int_equal(kv_txn_put(t, S("x"), S("bad")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), -ECANCELED);
	kv_txn_free(t);
	expect_s(f->kv, "x", "world");

	/* An empty value compares equal to an empty value only. */
	t = kv_txn_new();
	assert_int_equal(kv_txn_cmp_val(t, S("e"), S("")), 0);
	assert_int_equal(kv_txn_cmp_val(t, S("x"), S("world")), 0);
	assert_int_equal(kv_txn_put(t, S("e"), S("filled")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	expect_s(f->kv, "e", "filled");
}

/* Compares see the state before the transaction, whatever order the
 * builder calls came in (kv.c orders compares first). */
static void test_kv_compares_precede_writes(void **state)
{
	struct fx *f = *state;
	struct kv_txn *t = kv_txn_new();

	assert_int_equal(kv_txn_put(t, S("n"), S("1")), 0);
	assert_int_equal(kv_txn_cmp_ver(t, S("n"), 0), 0); /* absent before */
	assert_int_equal(kv_txn_put(t, S("m"), S("1")), 0);
	assert_int_equal(kv_txn_del(t, S("n")), 0);
	assert_int_equal(kv_txn_put(t, S("n"), S("2")), 0); /* writes in order */
	assert_int_equal(kv_txn_cmp_val(t, S("m"), S("1")), 0);
	assert_int_equal(kv_txn_nwrites(t), 4);
	/* m is absent before the txn, so its cmp_val fails: nothing lands. */
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), -ECANCELED);
	kv_txn_free(t);
	expect_absent(f->kv, S("m"));
	expect_absent(f->kv, S("n"));

	t = kv_txn_new();
	assert_int_equal(kv_txn_put(t, S("n"), S("1")), 0);
	assert_int_equal(kv_txn_cmp_ver(t, S("n"), 0), 0);
	assert_int_equal(kv_txn_del(t, S("n")), 0);
	assert_int_equal(kv_txn_put(t, S("n"), S("2")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	expect_s(f->kv, "n", "2");
}

static void test_kv_txn_single_use(void **state)
{
	struct fx *f = *state;
	struct kv_txn *t = kv_txn_new();

	assert_int_equal(kv_txn_put(t, S("a"), S("1")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), -EINVAL);
	assert_int_equal(kv_txn_put(t, S("b"), S("1")), -EINVAL);
	kv_txn_free(t);
	kv_txn_free(NULL);
	expect_absent(f->kv, S("b"));

	/* An empty transaction commits (nothing to do). */
	t = kv_txn_new();
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
}

struct count {
	size_t n;
	uint64_t ver;
	int mixed;
};

static int count_fn(void *arg, const uint8_t *key, size_t klen,
		    const uint8_t *val, size_t vlen, uint64_t ver)
{
	struct count *c = arg;

	(void)key;
	(void)klen;
	(void)val;
	(void)vlen;
	if (c->n && ver != c->ver)
		c->mixed = 1;
	c->ver = ver;
	c->n++;
	return 0;
}

#define BIG 10000

static void test_kv_big_txn_atomic(void **state)
{
	struct fx *f = *state;
	struct count c = { 0 };
	struct kv_txn *t;
	uint64_t rev;
	char key[32];
	int rc;

	/* 10,000 writes and a failing compare at the end: none land.  A CAS
	 * larger than KV_TXN_SAFE_OPS is refused whole, by every backend
	 * (kv.h "Splitting": a CAS never splits). */
	t = kv_txn_new();
	for (int i = 0; i < BIG; i++) {
		snprintf(key, sizeof(key), "big/%06d", i);
		assert_int_equal(kv_txn_put(t, S(key), S(key)), 0);
	}
	assert_int_equal(kv_txn_cmp_ver(t, S("big/guard"), 99), 0);
	assert_int_equal(kv_txn_nwrites(t), BIG);
	rc = kv_txn_commit(f->kv, t, NULL);
	assert_int_equal(rc, -E2BIG);
	kv_txn_free(t);
	assert_int_equal(kv_range(f->kv, S("big/"), S("big0"), 0, false, count_fn,
				  &c), 0);
	assert_int_equal(c.n, 0);

	/* Without it: all land; on SQLite all with the commit's revision, on
	 * etcd in parts whose last revision is the commit's. */
	t = kv_txn_new();
	for (int i = 0; i < BIG; i++) {
		snprintf(key, sizeof(key), "big/%06d", i);
		assert_int_equal(kv_txn_put(t, S(key), S(key)), 0);
	}
	assert_int_equal(kv_txn_commit(f->kv, t, &rev), 0);
	kv_txn_free(t);
	assert_int_equal(kv_range(f->kv, S("big/"), S("big0"), 0, false, count_fn,
				  &c), 0);
	assert_int_equal(c.n, BIG);
	if (!f->etcd) {
		assert_false(c.mixed);
		assert_true(c.ver == rev);
	}
	expect_s(f->kv, "big/004242", "big/004242");
	snprintf(key, sizeof(key), "big/%06d", BIG - 1);
	assert_true(expect_s(f->kv, key, key) == rev);
}

/* Two writes to one key in one transaction: the last wins (kv.h). */
static void test_kv_txn_folds_duplicate_writes(void **state)
{
	struct fx *f = *state;
	struct kv_txn *t = kv_txn_new();

	put_s(f->kv, "d/gone", "x");
	assert_int_equal(kv_txn_put(t, S("d/a"), S("1")), 0);
	assert_int_equal(kv_txn_put(t, S("d/a"), S("2")), 0);
	assert_int_equal(kv_txn_put(t, S("d/b"), S("1")), 0);
	assert_int_equal(kv_txn_del(t, S("d/b")), 0);
	assert_int_equal(kv_txn_del(t, S("d/gone")), 0);
	assert_int_equal(kv_txn_put(t, S("d/gone"), S("back")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	expect_s(f->kv, "d/a", "2");
	expect_absent(f->kv, S("d/b"));
	expect_s(f->kv, "d/gone", "back");
}

/* A CAS of more operations than KV_TXN_SAFE_OPS is all or nothing. */
static void test_kv_big_cas_all_or_nothing(void **state)
{
	struct fx *f = *state;
	struct count c = { 0 };
	struct kv_txn *t = kv_txn_new();
	char key[32];
	int rc;

	put_s(f->kv, "guard", "g");
	assert_int_equal(kv_txn_cmp_val(t, S("guard"), S("g")), 0);
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "cas/%04d", i);
		assert_int_equal(kv_txn_put(t, S(key), S("v")), 0);
	}
	rc = kv_txn_commit(f->kv, t, NULL);
	kv_txn_free(t);
	assert_true(rc == 0 || rc == -E2BIG);
	assert_int_equal(kv_range(f->kv, S("cas/"), S("cas0"), 0, false, count_fn, &c), 0);
	assert_int_equal(c.n, rc ? 0 : 300);
}

static void test_kv_size_limits_poison(void **state)
{
	struct fx *f = *state;
	uint8_t *big = calloc(1, KV_VAL_MAX + 1);
	struct kv_txn *t;
	struct nv_buf b;
	uint64_t ver;

	assert_non_null(big);
	memset(big, 'k', KV_KEY_MAX + 1);

	/* The limits themselves are fine. */
	assert_int_equal(kv_put(f->kv, big, KV_KEY_MAX, big, KV_VAL_MAX), 0);
	nv_buf_init(&b, KV_VAL_MAX);
	assert_int_equal(kv_get(f->kv, big, KV_KEY_MAX, &b, &ver), 0);
	assert_int_equal(b.len, KV_VAL_MAX);
	nv_buf_free(&b);
	/* One past them is -E2BIG. */
	assert_int_equal(kv_put(f->kv, big, KV_KEY_MAX + 1, "v", 1), -E2BIG);
	assert_int_equal(kv_put(f->kv, "k", 1, big, KV_VAL_MAX + 1), -E2BIG);
	assert_int_equal(kv_del(f->kv, big, KV_KEY_MAX + 1), -E2BIG);
	assert_int_equal(kv_get(f->kv, big, KV_KEY_MAX + 1, NULL, NULL), -E2BIG);

	/* A poisoned transaction: the builder says so, later calls repeat
	 * the first error, commit returns it and writes nothing. */
	t = kv_txn_new();
	assert_int_equal(kv_txn_put(t, S("good"), S("1")), 0);
	assert_int_equal(kv_txn_put(t, big, KV_KEY_MAX + 1, S("1")), -E2BIG);
	assert_int_equal(kv_txn_put(t, S("good2"), S("1")), -E2BIG);
	assert_int_equal(kv_txn_cmp_ver(t, S("good"), 0), -E2BIG);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), -E2BIG);
	kv_txn_free(t);
	expect_absent(f->kv, S("good"));
	expect_absent(f->kv, S("good2"));

	t = kv_txn_new();
	assert_int_equal(kv_txn_put(t, S("good"), S("1")), 0);
	assert_int_equal(kv_txn_cmp_val(t, S("good"), big, KV_VAL_MAX + 1), -E2BIG);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), -E2BIG);
	kv_txn_free(t);
	expect_absent(f->kv, S("good"));
	free(big);
}

/* ---- concurrency ---- */

#define WRITERS 4
#define INCS 500

struct conc {
	struct kv *kv;
	atomic_bool stop;
	atomic_int errors;     /* anything unexpected, from any thread */
	atomic_long retries;   /* -ECANCELED seen by writers */
	atomic_long reads;     /* reader iterations */
};

static const char counter_key[] = "counter";

static int read_counter(struct kv *kv, uint64_t *n, uint64_t *ver)
{
	struct nv_buf b;
	int rc;

	nv_buf_init(&b, 64);
	rc = kv_get(kv, counter_key, sizeof(counter_key) - 1, &b, ver);
	if (rc == -ENOENT) {
		*n = 0;
		*ver = 0;
		rc = 0;
	} else if (rc == 0) {
		if (b.len != 8)
			rc = -EBADMSG;
		else
			memcpy(n, b.ptr, 8);
	}
	nv_buf_free(&b);
	return rc;
}

static void *writer_main(void *arg)
{
	struct conc *c = arg;

	for (int i = 0; i < INCS; i++) {
		for (;;) {
			uint64_t n, ver, next;
			struct kv_txn *t;
			int rc = read_counter(c->kv, &n, &ver);

			if (rc) {
				atomic_fetch_add(&c->errors, 1);
				return NULL;
			}
			next = n + 1;
			t = kv_txn_new();
			if (!t || kv_txn_cmp_ver(t, counter_key, sizeof(counter_key) - 1, ver) ||
			    kv_txn_put(t, counter_key, sizeof(counter_key) - 1, &next, 8)) {
				kv_txn_free(t);
				atomic_fetch_add(&c->errors, 1);
				return NULL;
			}
			rc = kv_txn_commit(c->kv, t, NULL);
			kv_txn_free(t);
			if (rc == 0)
				break;
			if (rc != -ECANCELED) {
				atomic_fetch_add(&c->errors, 1);
				return NULL;
			}
			atomic_fetch_add(&c->retries, 1);
		}
	}
	return NULL;
}

struct last_val {
	uint64_t v;
	size_t n;
};

static int last_val_fn(void *arg, const uint8_t *key, size_t klen,
		       const uint8_t *val, size_t vlen, uint64_t ver)
{
	struct last_val *l = arg;

	(void)key;
	(void)klen;
	(void)ver;
	if (vlen == 8)
		memcpy(&l->v, val, 8);
	l->n++;
	return 0;
}

/* Readers: the counter as seen by floor and by range never goes back. */
static void *reader_main(void *arg)
{
	struct conc *c = arg;
	uint64_t seen = 0;
	struct nv_buf k, v;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, 64);
	while (!atomic_load(&c->stop)) {
		struct last_val l = { 0 };
		uint64_t n = 0;
		int rc;

		rc = kv_floor(c->kv, "counter\xff", 8, "", 0, &k, &v, NULL);
		if (rc == 0) {
			if (v.len != 8 || k.len != 7) {
				atomic_fetch_add(&c->errors, 1);
				break;
			}
			memcpy(&n, v.ptr, 8);
			if (n < seen)
				atomic_fetch_add(&c->errors, 1);
			seen = n;
		} else if (rc != -ENOENT) {
			atomic_fetch_add(&c->errors, 1);
			break;
		}
		rc = kv_range(c->kv, "", 0, "\xff", 1, 0, (seen & 1) != 0,
			      last_val_fn, &l);
		if (rc || l.n > 1 || l.v < seen)
			atomic_fetch_add(&c->errors, 1);
		if (l.n)
			seen = l.v;
		atomic_fetch_add(&c->reads, 1);
		/* A breath between visits: under valgrind, which runs one
		 * thread at a time, two spinning readers would otherwise
		 * starve the writers for minutes. */
		nanosleep(&(struct timespec){ .tv_nsec = 100000 }, NULL);
	}
	nv_buf_free(&k);
	nv_buf_free(&v);
	return NULL;
}

static void test_kv_concurrent_cas_counter(void **state)
{
	struct fx *f = *state;
	struct conc c = { .kv = f->kv };
	pthread_t w[WRITERS], r[2];
	uint64_t n, ver;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&r[i], NULL, reader_main, &c), 0);
	for (int i = 0; i < WRITERS; i++)
		assert_int_equal(pthread_create(&w[i], NULL, writer_main, &c), 0);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	atomic_store(&c.stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	assert_int_equal(atomic_load(&c.errors), 0);
	assert_int_equal(read_counter(f->kv, &n, &ver), 0);
	assert_true(n == WRITERS * INCS);
	print_message("%d CAS increments in %.2f s, %ld retries, %ld reader loops\n",
		      WRITERS * INCS,
		      (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
		      (long)atomic_load(&c.retries), (long)atomic_load(&c.reads));
}

static void test_kv_persists_across_reopen(void **state)
{
	struct fx *f = *state;
	struct kv_txn *t = kv_txn_new();
	uint64_t rev, rev2, va;

	assert_int_equal(kv_txn_put(t, S("p1"), S("one")), 0);
	assert_int_equal(kv_txn_put(t, S("p2"), S("two")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, &rev), 0);
	kv_txn_free(t);
	put_s(f->kv, "p1", "uno");
	va = expect_s(f->kv, "p1", "uno");
	assert_int_equal(kv_del(f->kv, S("p2")), 0);
	rev = va + 1; /* the delete's revision (nothing else writes here) */

	kv_close(f->kv);
	f->kv = NULL;
	assert_int_equal(kv_open(f->path, &f->kv), 0);
	assert_true(expect_s(f->kv, "p1", "uno") == va);
	expect_absent(f->kv, S("p2"));
	t = kv_txn_new();
	assert_int_equal(kv_txn_put(t, S("p3"), S("three")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, &rev2), 0);
	kv_txn_free(t);
	assert_true(rev2 == rev + 1); /* the revision survived too */

	/* And through the sqlite: URL form. */
	if (!f->etcd) {
		char url[sizeof(f->path) + 16];
		struct kv *kv2;

		snprintf(url, sizeof(url), "sqlite:%s", f->path);
		assert_int_equal(kv_open(url, &kv2), 0);
		assert_true(expect_s(kv2, "p3", "three") == rev2);
		kv_close(kv2);
	}
}

static void test_kv_commit_failpoint(void **state)
{
	struct fx *f = *state;
	struct kv_txn *t = kv_txn_new();

	put_s(f->kv, "fp", "before");
	assert_int_equal(nv_fp_arm("meta.commit=error"), 0);
	assert_int_equal(kv_txn_put(t, S("fp"), S("after")), 0);
	assert_int_equal(kv_txn_put(t, S("fp2"), S("after")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), -EIO);
	kv_txn_free(t);
	assert_int_equal(kv_put(f->kv, S("fp3"), S("x")), -EIO);
	assert_int_equal(kv_del(f->kv, S("fp")), -EIO);
	nv_fp_reset();
	expect_s(f->kv, "fp", "before");
	expect_absent(f->kv, S("fp2"));
	expect_absent(f->kv, S("fp3"));
	put_s(f->kv, "fp3", "x"); /* disarmed: works again */
}

/* ------------------------------------------------------------------ */
/* kv_cas_run: the CAS-with-retries helper                             */

struct cas_probe {
	const char *key;
	int builds, cancels;
	int race_until;     /* builds up to this one lose to a racing put */
	int build_err;      /* returned by build instead of filling t */
	int cancelled_rc;   /* what cancelled returns */
	const char *val;    /* written by the transaction */
};

static int cas_build(void *arg, struct kv *kv, struct kv_txn *t)
{
	struct cas_probe *p = arg;
	struct nv_buf v;
	uint64_t ver = 0;
	int rc;

	p->builds++;
	if (p->build_err)
		return p->build_err;
	nv_buf_init(&v, KV_VAL_MAX);
	rc = kv_get(kv, p->key, strlen(p->key), &v, &ver);
	nv_buf_free(&v);
	if (rc && rc != -ENOENT)
		return rc;
	if (p->builds <= p->race_until)
		assert_int_equal(kv_put(kv, S(p->key), S("racer")), 0);
	rc = kv_txn_cmp_ver(t, p->key, strlen(p->key), rc == -ENOENT ? 0 : ver);
	if (!rc)
		rc = kv_txn_put(t, S(p->key), S(p->val));
	return rc;
}

static int cas_cancelled(void *arg, struct kv *kv)
{
	struct cas_probe *p = arg;

	(void)kv;
	p->cancels++;
	return p->cancelled_rc;
}

static void test_kv_cas_retries_up_to_bound(void **state)
{
	struct fx *f = *state;
	struct kv_cas how = { .build = cas_build, .cancelled = cas_cancelled, .attempts = 5 };
	struct cas_probe p = { .key = "cas", .race_until = 1000, .val = "mine",
			       .cancelled_rc = -ECANCELED };

	/* Every attempt loses: five builds, five commits, -ECANCELED. */
	assert_int_equal(kv_cas_run(f->kv, &how, &p, NULL), -ECANCELED);
	assert_int_equal(p.builds, 5);
	assert_int_equal(p.cancels, 5);
	expect_s(f->kv, "cas", "racer");
}

static void test_kv_cas_stops_on_success(void **state)
{
	struct fx *f = *state;
	struct kv_cas how = { .build = cas_build, .attempts = 64 };
	struct cas_probe p = { .key = "cas", .race_until = 2, .val = "mine" };
	uint64_t rev = 0;

	/* Two lost races, then the third attempt commits and stops. */
	assert_int_equal(kv_cas_run(f->kv, &how, &p, &rev), 0);
	assert_int_equal(p.builds, 3);
	assert_true(expect_s(f->kv, "cas", "mine") == rev);
}

static void test_kv_cas_stops_on_other_errors(void **state)
{
	struct fx *f = *state;
	struct kv_cas how = { .build = cas_build, .cancelled = cas_cancelled, .attempts = 64 };
	struct cas_probe p = { .key = "cas", .val = "mine", .build_err = -ENOENT };

	/* A build's error ends the run at once. */
	assert_int_equal(kv_cas_run(f->kv, &how, &p, NULL), -ENOENT);
	assert_int_equal(p.builds, 1);
	expect_absent(f->kv, S("cas"));
	/* So does a commit error other than -ECANCELED. */
	p = (struct cas_probe){ .key = "cas", .val = "mine" };
	assert_int_equal(nv_fp_arm("meta.commit=error"), 0);
	assert_int_equal(kv_cas_run(f->kv, &how, &p, NULL), -EIO);
	nv_fp_reset();
	assert_int_equal(p.builds, 1);
	assert_int_equal(p.cancels, 0);
	expect_absent(f->kv, S("cas"));
	/* And cancelled() deciding: one lost race, -EEXIST. */
	p = (struct cas_probe){ .key = "cas", .val = "mine", .race_until = 1,
				.cancelled_rc = -EEXIST };
	assert_int_equal(kv_cas_run(f->kv, &how, &p, NULL), -EEXIST);
	assert_int_equal(p.builds, 1);
	assert_int_equal(p.cancels, 1);
	expect_s(f->kv, "cas", "racer");
}

static void test_kv_cas_eagain_and_done(void **state)
{
	struct fx *f = *state;
	struct kv_cas how = { .build = cas_build, .attempts = 64 };
	struct cas_probe p = { .key = "cas", .val = "mine" };
	char spec[64];

	/* -EAGAIN from the commit: retried only with retry_eagain. */
	snprintf(spec, sizeof(spec), "meta.commit=error:%d@1-2", EAGAIN);
	assert_int_equal(nv_fp_arm(spec), 0);
	assert_int_equal(kv_cas_run(f->kv, &how, &p, NULL), -EAGAIN);
	assert_int_equal(p.builds, 1);
	nv_fp_reset();
	assert_int_equal(nv_fp_arm(spec), 0);
	how.retry_eagain = true;
	p = (struct cas_probe){ .key = "cas", .val = "mine" };
	assert_int_equal(kv_cas_run(f->kv, &how, &p, NULL), 0);
	nv_fp_reset();
	assert_int_equal(p.builds, 3);
	expect_s(f->kv, "cas", "mine");
	/* KV_CAS_DONE: 0, nothing committed. */
	p = (struct cas_probe){ .key = "cas", .val = "other", .build_err = KV_CAS_DONE };
	assert_int_equal(kv_cas_run(f->kv, &how, &p, NULL), 0);
	assert_int_equal(p.builds, 1);
	expect_s(f->kv, "cas", "mine");
}

static void test_kv_open_bad_url(void **state)
{
	static const char *const bad[] = {
		"", "meta.db", "relative/meta.db", "sqlite:", "sqlite:meta.db",
		"etcd://127.0.0.1:2379", "sqlite//abs", "SQLITE:/abs.db",
	};
	struct kv *kv = (struct kv *)0x1;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(kv_open(bad[i], &kv), -EINVAL);
	assert_int_equal(kv_open(NULL, &kv), -EINVAL);
	assert_true(kv == (struct kv *)0x1); /* not written on failure */
	/* A missing directory is not a bad URL. */
	assert_int_equal(kv_open("/nonexistent-novafs-dir/x/meta.db", &kv), -ENOENT);
}

static void test_kv_open_not_a_database(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX + 16];
	char junk[8192];
	struct kv *kv = NULL;
	sqlite3 *db;
	int fd;

	/* Garbage bytes. */
	snprintf(path, sizeof(path), "%s/garbage.db", f->dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 131 + 7);
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	assert_int_equal(kv_open(path, &kv), -EIO);
	assert_null(kv);

	/* A real SQLite database with a foreign table named kv. */
	snprintf(path, sizeof(path), "%s/foreign.db", f->dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE kv(a INTEGER)", NULL, NULL,
				      NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(kv_open(path, &kv), -EIO);
	assert_null(kv);
}

/* Not a correctness test: records what a durable commit costs here. */
static void test_kv_commit_latency(void **state)
{
	struct fx *f = *state;
	enum { N = 200 };
	double ms[N], sum = 0, max = 0;

	for (int i = 0; i < N; i++) {
		struct timespec a, b;
		char key[16];

		snprintf(key, sizeof(key), "lat/%03d", i);
		clock_gettime(CLOCK_MONOTONIC, &a);
		assert_int_equal(kv_put(f->kv, S(key), S("value")), 0);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ms[i] = (double)(b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
		sum += ms[i];
		if (ms[i] > max)
			max = ms[i];
	}
	print_message("durable single-key commit: mean %.3f ms, max %.3f ms over %d\n",
		      sum / N, max, N);
}

/* kv_claim(): the first claim of a SQLite file holds it; a second
 * handle on the same file (another daemon) is refused with -EBUSY until
 * the first closes.  Unclaimed handles (novactl) open beside it.  etcd is
 * shared by design: every claim succeeds. */
static void test_kv_claim_exclusive(void **state)
{
	struct fx *f = *state;
	struct kv *kv2 = NULL;

	if (f->etcd) {
		assert_int_equal(kv_claim(f->kv), 0);
		assert_int_equal(kv_open(f->path, &kv2), 0);
		assert_int_equal(kv_claim(kv2), 0);
		kv_close(kv2);
		return;
	}
	assert_int_equal(kv_claim(f->kv), 0);
	assert_int_equal(kv_claim(f->kv), 0); /* idempotent */
	assert_int_equal(kv_open(f->path, &kv2), 0);
	assert_int_equal(kv_claim(kv2), -EBUSY);
	kv_close(f->kv);
	f->kv = NULL;
	assert_int_equal(kv_claim(kv2), 0);
	kv_close(kv2);
	assert_int_equal(kv_open(f->path, &f->kv), 0);
}

static void note_problem(void *arg, const char *problem)
{
	(void)problem;
	(*(int *)arg)++;
}

/* kv_integrity_check(): a healthy database has no problem; a backend
 * without the op answers -ENOTSUP and kv_claim() succeeds (shared by
 * design). */
static void test_kv_integrity_check(void **state)
{
	static const struct kv_backend_ops bare = { .scheme = "bare", .close = free };
	struct fx *f = *state;
	struct kv *kv;
	int n = 0;

	assert_int_equal(kv_put(f->kv, "a", 1, "b", 1), 0);
	/* SQLite checks itself; etcd has no such op (its own corruption
	 * checks run inside the members). */
	assert_int_equal(kv_integrity_check(f->kv, note_problem, &n), f->etcd ? -ENOTSUP : 0);
	assert_int_equal(n, 0);
	assert_int_equal(kv_wrap(&bare, malloc(1), NULL, &kv), 0);
	assert_int_equal(kv_integrity_check(kv, note_problem, &n), -ENOTSUP);
	assert_int_equal(kv_claim(kv), 0);
	kv_close(kv);
}

/* ------------------------------------------------------------------ */
/* Leases and watches (kv.h), both backends                            */

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Poll until key k is absent; the milliseconds it took, or UINT64_MAX
 * after limit_ms. */
static uint64_t await_absent(struct kv *kv, const char *k, uint64_t limit_ms)
{
	uint64_t t0 = now_ms();

	while (now_ms() - t0 < limit_ms) {
		if (kv_get(kv, S(k), NULL, NULL) == -ENOENT)
			return now_ms() - t0;
		sleep_ms(50);
	}
	return UINT64_MAX;
}

static int put_leased(struct kv *kv, const char *k, const char *v, uint64_t lease)
{
	struct kv_txn *t = kv_txn_new();
	int rc = kv_txn_put_lease(t, S(k), S(v), lease);

	if (!rc)
		rc = kv_txn_commit(kv, t, NULL);
	kv_txn_free(t);
	return rc;
}

static void test_kv_lease_revoke_deletes_keys(void **state)
{
	struct fx *f = *state;
	uint64_t id = 0;
	unsigned ttl = 0;

	assert_int_equal(kv_lease_grant(f->kv, 1, &id), 0); /* raised to the minimum */
	assert_true(id != 0);
	assert_int_equal(put_leased(f->kv, "l/a", "1", id), 0);
	assert_int_equal(put_leased(f->kv, "l/b", "1", id), 0);
	put_s(f->kv, "l/plain", "p");
	assert_int_equal(kv_lease_keepalive(f->kv, id, &ttl), 0);
	assert_true(ttl >= KV_LEASE_TTL_MIN);
	expect_s(f->kv, "l/a", "1");
	assert_int_equal(kv_lease_revoke(f->kv, id), 0);
	expect_absent(f->kv, S("l/a"));
	expect_absent(f->kv, S("l/b"));
	expect_s(f->kv, "l/plain", "p");
	/* Lost: every later use says so, and a put with it writes nothing. */
	assert_int_equal(kv_lease_keepalive(f->kv, id, &ttl), -ENOLCK);
	assert_int_equal(kv_lease_revoke(f->kv, id), -ENOLCK);
	assert_int_equal(put_leased(f->kv, "l/c", "1", id), -ENOLCK);
	expect_absent(f->kv, S("l/c"));
	assert_int_equal(kv_lease_keepalive(f->kv, 0, NULL), -ENOLCK);
	assert_int_equal(kv_lease_grant(f->kv, KV_LEASE_TTL_MAX + 1, &id), -EINVAL);
}

static void test_kv_lease_expires_and_keepalive_holds(void **state)
{
	struct fx *f = *state;
	uint64_t held = 0, lapsed = 0, t0, waited;
	unsigned ttl;

	assert_int_equal(kv_lease_grant(f->kv, KV_LEASE_TTL_MIN, &held), 0);
	assert_int_equal(kv_lease_grant(f->kv, KV_LEASE_TTL_MIN, &lapsed), 0);
	assert_true(held != lapsed);
	t0 = now_ms();
	assert_int_equal(put_leased(f->kv, "e/held", "1", held), 0);
	assert_int_equal(put_leased(f->kv, "e/lapsed", "1", lapsed), 0);
	/* Bound, then unbound by a plain put: survives its old lease. */
	assert_int_equal(put_leased(f->kv, "e/unbound", "1", lapsed), 0);
	put_s(f->kv, "e/unbound", "2");
	/* Keep one alive for three TTLs while the other lapses. */
	while (now_ms() - t0 < 3000 * KV_LEASE_TTL_MIN) {
		assert_int_equal(kv_lease_keepalive(f->kv, held, &ttl), 0);
		sleep_ms(400);
		if (kv_get(f->kv, S("e/lapsed"), NULL, NULL) == -ENOENT)
			break;
	}
	waited = await_absent(f->kv, "e/lapsed", 3000 * KV_LEASE_TTL_MIN);
	assert_true(waited != UINT64_MAX);
	/* Never before its TTL. */
	assert_true(now_ms() - t0 >= 1000 * KV_LEASE_TTL_MIN - 100);
	expect_s(f->kv, "e/held", "1");
	expect_s(f->kv, "e/unbound", "2");
	assert_int_equal(kv_lease_keepalive(f->kv, lapsed, &ttl), -ENOLCK);
	assert_int_equal(kv_lease_revoke(f->kv, held), 0);
	expect_absent(f->kv, S("e/held"));
}

static int count_visit(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		       size_t vlen, uint64_t ver)
{
	(*(int *)arg)++;
	return 0;
}

/* SQLite: a read whose sweep of expired leases cannot write (a full
 * disk, here the meta.sweep failpoint) still answers, and hides the
 * expired lease's keys (get, floor, range); the next sweep that can
 * write deletes them. */
static void test_kv_read_survives_failed_sweep(void **state)
{
	struct fx *f = *state;
	struct nv_buf k;
	uint64_t id = 0, t0 = now_ms();
	unsigned ttl;
	int rc, n = 0;

	assert_int_equal(kv_lease_grant(f->kv, KV_LEASE_TTL_MIN, &id), 0);
	put_s(f->kv, "sw/a", "plain");
	assert_int_equal(put_leased(f->kv, "sw/b", "leased", id), 0);
	assert_int_equal(nv_fp_arm("meta.sweep=error:28"), 0); /* ENOSPC */
	/* Every read answers: the key until its lease lapses, then none. */
	while ((rc = kv_get(f->kv, S("sw/b"), NULL, NULL)) == 0 &&
	       now_ms() - t0 < 3000 * KV_LEASE_TTL_MIN)
		sleep_ms(50);
	assert_int_equal(rc, -ENOENT);
	nv_buf_init(&k, 64);
	assert_int_equal(kv_floor(f->kv, S("sw/c"), S("sw/"), &k, NULL, NULL), 0);
	assert_int_equal(k.len, 4);
	assert_memory_equal(k.ptr, "sw/a", 4);
	nv_buf_free(&k);
	assert_int_equal(kv_range(f->kv, S("sw/"), S("sw0"), 0, false, count_visit, &n), 0);
	assert_int_equal(n, 1);
	n = 0;
	assert_int_equal(kv_range(f->kv, S("sw/"), S("sw0"), 0, true, count_visit, &n), 0);
	assert_int_equal(n, 1);
	/* The disk has room again: the sweep deletes the lease and its key. */
	nv_fp_reset();
	expect_absent(f->kv, S("sw/b"));
	expect_s(f->kv, "sw/a", "plain");
	assert_int_equal(kv_lease_keepalive(f->kv, id, &ttl), -ENOLCK);
}

/* SQLite: a read's failed sweep backs off (meta/sqlite/lease.c
 * SWEEP_RETRY_MIN_NS, 100 ms, doubling): many reads on a full disk try
 * the sweep at most once per 100 ms, not once each (it was a write
 * transaction and a log line per read). */
static void test_kv_failed_sweep_backs_off(void **state)
{
	struct fx *f = *state;
	uint64_t id = 0, t0 = now_ms(), t1;
	unsigned long h0, tries;
	int rc;

	assert_int_equal(kv_lease_grant(f->kv, KV_LEASE_TTL_MIN, &id), 0);
	assert_int_equal(put_leased(f->kv, "bo/b", "leased", id), 0);
	assert_int_equal(nv_fp_arm("meta.sweep=error:28"), 0); /* ENOSPC */
	while ((rc = kv_get(f->kv, S("bo/b"), NULL, NULL)) == 0 &&
	       now_ms() - t0 < 3000 * KV_LEASE_TTL_MIN)
		sleep_ms(50);
	assert_int_equal(rc, -ENOENT); /* past due: the sweep failed, hidden */
	h0 = nv_fp_hits("meta.sweep");
	assert_true(h0 >= 1);
	t0 = now_ms();
	for (int i = 0; i < 200; i++)
		assert_int_equal(kv_get(f->kv, S("bo/b"), NULL, NULL), -ENOENT);
	t1 = now_ms();
	tries = nv_fp_hits("meta.sweep") - h0;
	/* At most one try per 100 ms of the loop, and one at its start. */
	if (tries > 1 + (t1 - t0) / 100)
		fail_msg("%lu sweeps in %llu ms of 200 reads", tries,
			 (unsigned long long)(t1 - t0));
	nv_fp_reset();
}

static void test_kv_watch_prompts_on_prefix_writes(void **state)
{
	struct fx *f = *state;
	struct kv_watch *w = NULL, *old = NULL;
	uint64_t rev = 0, r0, r1;
	struct kv_txn *t;

	put_s(f->kv, "w/seed", "0");
	r0 = expect_s(f->kv, "w/seed", "0");
	assert_int_equal(kv_watch_open(f->kv, S("w/"), 0, &w), 0);
	assert_int_equal(kv_watch_wait(w, 100, &rev), -ETIMEDOUT);
	put_s(f->kv, "x/other", "1"); /* outside the prefix */
	assert_int_equal(kv_watch_wait(w, 300, &rev), -ETIMEDOUT);
	t = kv_txn_new();
	assert_int_equal(kv_txn_put(t, S("w/a"), S("1")), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, &r1), 0);
	kv_txn_free(t);
	assert_int_equal(kv_watch_wait(w, 5000, &rev), 0);
	assert_true(rev >= r1);
	/* Consumed: quiet again.  A delete under it prompts too. */
	assert_int_equal(kv_watch_wait(w, 100, &rev), -ETIMEDOUT);
	assert_int_equal(kv_del(f->kv, S("w/a")), 0);
	assert_int_equal(kv_watch_wait(w, 5000, &rev), 0);
	/* From an old revision: prompted at once (the change after r0). */
	assert_int_equal(kv_watch_open(f->kv, S("w/"), r0 + 1, &old), 0);
	assert_int_equal(kv_watch_wait(old, 5000, &rev), 0);
	kv_watch_close(old);
	kv_watch_close(w);
}

static void test_kv_watch_prompts_on_lease_loss(void **state)
{
	struct fx *f = *state;
	struct kv_watch *w = NULL;
	uint64_t id = 0, rev = 0;

	assert_int_equal(kv_lease_grant(f->kv, KV_LEASE_TTL_MIN, &id), 0);
	assert_int_equal(put_leased(f->kv, "wl/row", "1", id), 0);
	assert_int_equal(kv_watch_open(f->kv, S("wl/"), 0, &w), 0);
	assert_int_equal(kv_lease_revoke(f->kv, id), 0);
	assert_int_equal(kv_watch_wait(w, 5000, &rev), 0);
	expect_absent(f->kv, S("wl/row"));
	kv_watch_close(w);
}

/* etcd only, with tests/etcd/etcd.sh's NOVAFS_ETCD_CTL: a watch from a
 * revision that was compacted away prompts a re-read, and a live watch
 * goes on prompting after the compaction. */
static void test_kv_watch_survives_compaction(void **state)
{
	struct fx *f = *state;
	const char *ctl = getenv("NOVAFS_ETCD_CTL");
	struct kv_watch *live = NULL, *stale = NULL;
	uint64_t r1, r2, rev = 0;
	char cmd[8192];

	if (!f->etcd || !ctl || !*ctl)
		skip();
	put_s(f->kv, "c/k", "1");
	r1 = expect_s(f->kv, "c/k", "1");
	assert_int_equal(kv_watch_open(f->kv, S("c/"), 0, &live), 0);
	put_s(f->kv, "c/k", "2");
	r2 = expect_s(f->kv, "c/k", "2");
	assert_int_equal(kv_watch_wait(live, 5000, &rev), 0);
	snprintf(cmd, sizeof(cmd), "%s compact %llu >/dev/null", ctl, (unsigned long long)r2);
	assert_int_equal(system(cmd), 0);
	/* From r1 + 1 (compacted): prompted, and the re-read sees "2". */
	assert_int_equal(kv_watch_open(f->kv, S("c/"), r1 + 1, &stale), 0);
	assert_int_equal(kv_watch_wait(stale, 5000, &rev), 0);
	expect_s(f->kv, "c/k", "2");
	/* The live one still sees new writes. */
	put_s(f->kv, "c/k", "3");
	assert_int_equal(kv_watch_wait(live, 5000, &rev), 0);
	assert_true(rev > r2);
	kv_watch_close(stale);
	kv_watch_close(live);
}

static void test_kv_status_names_the_metastore(void **state)
{
	struct fx *f = *state;
	struct nv_buf b;

	nv_buf_init(&b, 1 << 16);
	assert_int_equal(kv_status(f->kv, &b), 0);
	assert_int_equal(nv_buf_add(&b, "", 1), 0);
	print_message("%s", (const char *)b.ptr);
	assert_non_null(strstr((const char *)b.ptr, f->etcd ? "etcd" : "sqlite:"));
	if (f->etcd)
		assert_non_null(strstr((const char *)b.ptr, ": ok"));
	nv_buf_free(&b);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

/* The etcd URL from the environment, or "" (no etcd pass). */
static void etcd_url_from_env(void)
{
	const char *url = getenv("NOVAFS_ETCD_URL");
	const char *eps = getenv("NOVAFS_ETCD_ENDPOINTS");

	if (url && *url) {
		int n = (int)strcspn(url, "?");

		snprintf(g_etcd_url, sizeof(g_etcd_url), "%.*s-kv%s", n, url, url + n);
	}
	else if (eps && *eps)
		snprintf(g_etcd_url, sizeof(g_etcd_url), "etcd://%s/novafs-kvtest", eps);
}

int main(void)
{
	/* Every backend. */
	const struct CMUnitTest all[] = {
		T(test_kv_get_put_del),
		T(test_kv_versions_are_commit_revisions),
		T(test_kv_floor),
		T(test_kv_range),
		T(test_kv_range_fn_stops),
		T(test_kv_memcmp_order),
		T(test_kv_tuple_prefix_range),
		T(test_kv_cas_ver_conflict),
		T(test_kv_cas_ver_zero_means_absent),
		T(test_kv_cas_val),
		T(test_kv_compares_precede_writes),
		T(test_kv_txn_single_use),
		T(test_kv_big_txn_atomic),
		T(test_kv_txn_folds_duplicate_writes),
		T(test_kv_big_cas_all_or_nothing),
		T(test_kv_size_limits_poison),
		T(test_kv_concurrent_cas_counter),
		T(test_kv_persists_across_reopen),
		T(test_kv_commit_failpoint),
		T(test_kv_cas_retries_up_to_bound),
		T(test_kv_cas_stops_on_success),
		T(test_kv_cas_stops_on_other_errors),
		T(test_kv_cas_eagain_and_done),
		T(test_kv_lease_revoke_deletes_keys),
		T(test_kv_lease_expires_and_keepalive_holds),
		T(test_kv_watch_prompts_on_prefix_writes),
		T(test_kv_watch_prompts_on_lease_loss),
		T(test_kv_watch_survives_compaction),
		T(test_kv_status_names_the_metastore),
		T(test_kv_commit_latency),
		T(test_kv_claim_exclusive),
		T(test_kv_integrity_check),
	};
	/* SQLite itself. */
	const struct CMUnitTest sqlite_only[] = {
		cmocka_unit_test(test_kv_open_bad_url),
		T(test_kv_open_not_a_database),
		T(test_kv_read_survives_failed_sweep),
		T(test_kv_failed_sweep_backs_off),
	};
	const char *only = getenv("NOVAFS_KV_ONLY");
	int rc = 0;

	/* NOVAFS_TEST_FILTER=test_kv_floor runs matching cases only. */
	if (getenv("NOVAFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("NOVAFS_TEST_FILTER"));
	etcd_url_from_env();
	if (!only || strcmp(only, "etcd")) {
		rc |= cmocka_run_group_tests_name("sqlite", all, NULL, NULL);
		rc |= cmocka_run_group_tests_name("sqlite_only", sqlite_only, NULL, NULL);
	}
	if (!g_etcd_url[0]) {
		print_message("etcd pass skipped: set NOVAFS_ETCD_URL or NOVAFS_ETCD_ENDPOINTS\n");
		return only && !strcmp(only, "etcd") ? 77 : rc;
	}
	g_on_etcd = true;
	rc |= cmocka_run_group_tests_name("etcd", all, NULL, NULL);
	return rc;
}
