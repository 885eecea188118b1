/*
 * test_rows.c - unit tests of the typed metastore rows: meta/streams.c
 * (buckets and streams), meta/refs.c, meta/chains.c, meta/markers.c.
 *
 * Every case runs against a real SQLite metastore in a fresh mkdtemp()
 * directory.  The codec cases encode values independently (with
 * src/base/wire.h, following the layouts documented at the top of each
 * .c file) so a decoder is checked against the documented format, not
 * only against its own encoder; hostile values are built the same way.
 */
#include "config.h"
#include "meta/chains.h"
#include "meta/keys.h"
#include "meta/kv.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "meta/tuple.h"
#include "src/base/failpoint.h"
#include "src/base/wire.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
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
	struct kv *kv;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");
	char url[PATH_MAX + 32];

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s/novafs-rows-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(url, sizeof(url), "sqlite:%s/meta.db", f->dir);
	if (kv_open(url, &f->kv)) {
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

	kv_close(f->kv);
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

/* ================================================================ buckets */

struct names {
	char v[512][META_STREAM_NAME_MAX + 1];
	uint64_t ids[512];
	int n;
	int stop_after; /* 0: never */
};

static int bucket_collect(void *arg, const struct meta_bucket *b)
{
	struct names *nm = arg;

	assert_true(nm->n < 512);
	strcpy(nm->v[nm->n], b->name);
	nm->ids[nm->n] = b->id;
	nm->n++;
	return nm->stop_after && nm->n == nm->stop_after ? 1 : 0;
}

static void test_rows_bucket_create_get_dup(void **state)
{
	struct fx *f = *state;
	struct meta_bucket a, b, g;

	assert_int_equal(meta_bucket_get(f->kv, "logs", &g), -ENOENT);
	assert_int_equal(meta_bucket_create(f->kv, "logs", NV_CLASS_EXPRESS, NULL, &a), 0);
	assert_string_equal(a.name, "logs");
	assert_int_equal(a.default_class, NV_CLASS_EXPRESS);
	assert_true(a.id > 0);
	assert_true(a.created_ns > 0);
	assert_int_equal(meta_bucket_get(f->kv, "logs", &g), 0);
	assert_string_equal(g.name, "logs");
	assert_int_equal(g.id, a.id);
	assert_int_equal(g.created_ns, a.created_ns);
	assert_int_equal(g.default_class, NV_CLASS_EXPRESS);

	/* Duplicate: refused, the row unchanged. */
	assert_int_equal(meta_bucket_create(f->kv, "logs", NV_CLASS_STANDARD, NULL, &b), -EEXIST);
	assert_int_equal(meta_bucket_get(f->kv, "logs", &g), 0);
	assert_int_equal(g.id, a.id);
	assert_int_equal(g.default_class, NV_CLASS_EXPRESS);

	/* A second bucket gets a fresh id. */
	assert_int_equal(meta_bucket_create(f->kv, "logs2", NV_CLASS_STANDARD, NULL, &b), 0);
	assert_true(b.id != a.id);

	/* Bad arguments. */
	assert_int_equal(meta_bucket_create(f->kv, "x", NV_CLASS_COUNT, NULL, &b), -EINVAL);
	{
		char longname[META_BUCKET_NAME_MAX + 2];

		memset(longname, 'a', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = 0;
		assert_int_equal(meta_bucket_create(f->kv, longname, 0, NULL, &b), -EINVAL);
		assert_int_equal(meta_bucket_get(f->kv, longname, &g), -ENOENT);
	}

	/* set_class changes the default; -ENOENT for a missing bucket. */
	assert_int_equal(meta_bucket_set_class(f->kv, "logs", NV_CLASS_STANDARD), 0);
	assert_int_equal(meta_bucket_get(f->kv, "logs", &g), 0);
	assert_int_equal(g.default_class, NV_CLASS_STANDARD);
	assert_int_equal(g.id, a.id);
	assert_int_equal(meta_bucket_set_class(f->kv, "nope", NV_CLASS_STANDARD), -ENOENT);
	assert_int_equal(meta_bucket_set_class(f->kv, "logs", 7), -EINVAL);
}

static void test_rows_bucket_list_order(void **state)
{
	struct fx *f = *state;
	/* Created out of order; "a" is a prefix of "a.b" and "ab". */
	static const char *const created[] = { "c", "ab", "a", "b", "a.b", "a-z", "B" };
	static const char *const sorted[] = { "B", "a", "a-z", "a.b", "ab", "b", "c" };
	struct names *nm = calloc(1, sizeof(*nm));

	assert_non_null(nm);
	for (size_t i = 0; i < sizeof(created) / sizeof(created[0]); i++)
		assert_int_equal(meta_bucket_create(f->kv, created[i], 0, NULL, NULL), 0);
	assert_int_equal(meta_bucket_list(f->kv, "", bucket_collect, nm), 0);
	assert_int_equal(nm->n, 7);
	for (int i = 0; i < 7; i++)
		assert_string_equal(nm->v[i], sorted[i]);

	/* after: strictly after, also for a name that is a prefix of others
	 * and for a name that does not exist. */
	nm->n = 0;
	assert_int_equal(meta_bucket_list(f->kv, "a", bucket_collect, nm), 0);
	assert_int_equal(nm->n, 5);
	assert_string_equal(nm->v[0], "a-z");
	assert_string_equal(nm->v[4], "c");
	nm->n = 0;
	assert_int_equal(meta_bucket_list(f->kv, "aa", bucket_collect, nm), 0);
	assert_int_equal(nm->n, 3);
	assert_string_equal(nm->v[0], "ab");
	nm->n = 0;
	assert_int_equal(meta_bucket_list(f->kv, "c", bucket_collect, nm), 0);
	assert_int_equal(nm->n, 0);
	/* NULL after lists everything. */
	nm->n = 0;
	assert_int_equal(meta_bucket_list(f->kv, NULL, bucket_collect, nm), 0);
	assert_int_equal(nm->n, 7);

	/* fn returning 1 stops (success). */
	nm->n = 0;
	nm->stop_after = 2;
	assert_int_equal(meta_bucket_list(f->kv, "", bucket_collect, nm), 0);
	assert_int_equal(nm->n, 2);
	free(nm);
}

static void test_rows_bucket_delete(void **state)
{
	struct fx *f = *state;
	struct meta_stream s;
	struct meta_bucket g;

	assert_int_equal(meta_bucket_delete(f->kv, "nope"), -ENOENT);
	assert_int_equal(meta_bucket_create(f->kv, "full", 0, NULL, NULL), 0);
	assert_int_equal(meta_bucket_create(f->kv, "fullx", 0, NULL, NULL), 0);
	assert_int_equal(meta_stream_create(f->kv, "full", "one", -1, 1, NULL, &s), 0);
	/* A stream in a bucket whose name extends "full" must not count. */
	assert_int_equal(meta_stream_create(f->kv, "fullx", "two", -1, 1, NULL, NULL), 0);

	assert_int_equal(meta_bucket_delete(f->kv, "full"), -ENOTEMPTY);
	assert_int_equal(meta_bucket_get(f->kv, "full", &g), 0);

	/* A tombstoned stream no longer holds the bucket. */
	assert_int_equal(meta_stream_delete(f->kv, s.id, 2), 0);
	assert_int_equal(meta_bucket_delete(f->kv, "full"), 0);
	assert_int_equal(meta_bucket_get(f->kv, "full", &g), -ENOENT);
	assert_int_equal(meta_bucket_delete(f->kv, "full"), -ENOENT);
	/* Creating a stream in the deleted bucket fails. */
	assert_int_equal(meta_stream_create(f->kv, "full", "again", -1, 3, NULL, NULL), -ENOENT);
	/* The other bucket is untouched. */
	assert_int_equal(meta_bucket_delete(f->kv, "fullx"), -ENOTEMPTY);
}

/* ================================================================ streams */

static int stream_collect(void *arg, const struct meta_stream *s)
{
	struct names *nm = arg;

	assert_true(nm->n < 512);
	strcpy(nm->v[nm->n], s->name);
	nm->ids[nm->n] = s->id;
	nm->n++;
	return nm->stop_after && nm->n == nm->stop_after ? 1 : 0;
}

static void test_rows_stream_create_lookup(void **state)
{
	struct fx *f = *state;
	struct meta_stream s, g, d;
	uint64_t ver = 0;

	assert_int_equal(meta_bucket_create(f->kv, "b", NV_CLASS_EXPRESS, NULL, NULL), 0);
	assert_int_equal(meta_stream_create(f->kv, "nob", "x", -1, 5, NULL, &s), -ENOENT);
	assert_int_equal(meta_stream_create(f->kv, "b", "x", -1, 12345, NULL, &s), 0);
	assert_string_equal(s.bucket, "b");
	assert_string_equal(s.name, "x");
	assert_int_equal(s.cls, NV_CLASS_EXPRESS); /* the bucket default */
	assert_int_equal(s.created_ns, 12345);
	assert_int_equal(s.trim_seq, 0);
	assert_int_equal(s.deleted_ns, 0);

	assert_int_equal(meta_stream_lookup(f->kv, "b", "x", &g), 0);
	assert_memory_equal(&g, &s, sizeof(g));
	assert_int_equal(meta_stream_get(f->kv, s.id, &g, &ver), 0);
	assert_memory_equal(&g, &s, sizeof(g));
	assert_true(ver > 0);
	assert_int_equal(meta_stream_get(f->kv, s.id + 100, &g, NULL), -ENOENT);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "y", &g), -ENOENT);
	assert_int_equal(meta_stream_lookup(f->kv, "c", "x", &g), -ENOENT);

	/* Explicit class; duplicate name. */
	assert_int_equal(meta_stream_create(f->kv, "b", "std", NV_CLASS_STANDARD, 1, NULL, &d), 0);
	assert_int_equal(d.cls, NV_CLASS_STANDARD);
	assert_int_equal(meta_stream_create(f->kv, "b", "x", -1, 6, NULL, &d), -EEXIST);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "x", &g), 0);
	assert_int_equal(g.id, s.id);
	assert_int_equal(meta_stream_create(f->kv, "b", "z", NV_CLASS_COUNT, 6, NULL, &d), -EINVAL);
	/* Names with odd bytes are just names. */
	assert_int_equal(meta_stream_create(f->kv, "b", "a b\tc\xc3\xa9", -1, 7, NULL, &d), 0);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "a b\tc\xc3\xa9", &g), 0);
	assert_int_equal(g.id, d.id);
}

static void test_rows_stream_ids_never_reused(void **state)
{
	struct fx *f = *state;
	struct meta_stream s;
	uint64_t seen[20];

	assert_int_equal(meta_bucket_create(f->kv, "b", 0, NULL, NULL), 0);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(meta_stream_create(f->kv, "b", "same", -1, (uint64_t)i + 1, NULL, &s),
				 0);
		seen[i] = s.id;
		for (int j = 0; j < i; j++)
			assert_true(seen[j] != s.id);
		if (i)
			assert_true(s.id > seen[i - 1]);
		assert_int_equal(meta_stream_delete(f->kv, s.id, (uint64_t)i + 100), 0);
	}
	/* Every incarnation stays readable by id, tombstoned. */
	for (int i = 0; i < 20; i++) {
		assert_int_equal(meta_stream_get(f->kv, seen[i], &s, NULL), 0);
		assert_int_equal(s.deleted_ns, (uint64_t)i + 100);
		assert_string_equal(s.name, "same");
	}
	/* Buckets draw from the same counter: never an id a stream had. */
	{
		struct meta_bucket b;

		assert_int_equal(meta_bucket_create(f->kv, "b2", 0, NULL, &b), 0);
		for (int i = 0; i < 20; i++)
			assert_true(b.id != seen[i]);
	}
}

static void test_rows_stream_tombstone_hides_name(void **state)
{
	struct fx *f = *state;
	struct meta_stream s, g, s2;
	struct names *nm = calloc(1, sizeof(*nm));

	assert_non_null(nm);
	assert_int_equal(meta_bucket_create(f->kv, "b", 0, NULL, NULL), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", "gone", -1, 1, NULL, &s), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", "kept", -1, 1, NULL, NULL), 0);
	assert_int_equal(meta_stream_delete(f->kv, s.id, 777), 0);

	assert_int_equal(meta_stream_lookup(f->kv, "b", "gone", &g), -ENOENT);
	assert_int_equal(meta_stream_get(f->kv, s.id, &g, NULL), 0);
	assert_int_equal(g.deleted_ns, 777);
	assert_int_equal(meta_stream_list(f->kv, "b", "", stream_collect, nm), 0);
	assert_int_equal(nm->n, 1);
	assert_string_equal(nm->v[0], "kept");

	/* Changes to a tombstoned stream are refused. */
	assert_int_equal(meta_stream_delete(f->kv, s.id, 778), -ENOENT);
	assert_int_equal(meta_stream_set_trim(f->kv, s.id, 5, 5), -ENOENT);
	assert_int_equal(meta_stream_set_class(f->kv, s.id, NV_CLASS_EXPRESS), -ENOENT);
	assert_int_equal(meta_stream_get(f->kv, s.id, &g, NULL), 0);
	assert_int_equal(g.deleted_ns, 777);
	assert_int_equal(meta_stream_delete(f->kv, 999999, 1), -ENOENT);

	/* The name is free again, for a new stream. */
	assert_int_equal(meta_stream_create(f->kv, "b", "gone", -1, 2, NULL, &s2), 0);
	assert_true(s2.id != s.id);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "gone", &g), 0);
	assert_int_equal(g.id, s2.id);
	assert_int_equal(g.deleted_ns, 0);

	/* list_all sees every row, deleted ones too, in id order. */
	nm->n = 0;
	assert_int_equal(meta_stream_list_all(f->kv, stream_collect, nm), 0);
	assert_int_equal(nm->n, 3);
	assert_int_equal(nm->ids[0], s.id);
	assert_true(nm->ids[0] < nm->ids[1] && nm->ids[1] < nm->ids[2]);
	free(nm);
}

static void test_rows_stream_list_paging(void **state)
{
	struct fx *f = *state;
	struct names *nm = calloc(1, sizeof(*nm));
	char name[32];
	const int N = 300; /* more than one page of 256 */

	assert_non_null(nm);
	assert_int_equal(meta_bucket_create(f->kv, "b", 0, NULL, NULL), 0);
	assert_int_equal(meta_bucket_create(f->kv, "b0", 0, NULL, NULL), 0);
	/* Create in a scrambled order. */
	for (int i = 0; i < N; i++) {
		int k = (i * 7) % N;

		snprintf(name, sizeof(name), "st-%03d", k);
		assert_int_equal(meta_stream_create(f->kv, "b", name, -1, 1, NULL, NULL), 0);
	}
	/* Streams of a neighbouring bucket must not leak into the listing. */
	assert_int_equal(meta_stream_create(f->kv, "b0", "st-000", -1, 1, NULL, NULL), 0);
	/* Tombstone a few, on both sides of the page boundary. */
	for (int k = 250; k < 262; k += 3) {
		struct meta_stream s;

		snprintf(name, sizeof(name), "st-%03d", k);
		assert_int_equal(meta_stream_lookup(f->kv, "b", name, &s), 0);
		assert_int_equal(meta_stream_delete(f->kv, s.id, 9), 0);
	}

	assert_int_equal(meta_stream_list(f->kv, "b", "", stream_collect, nm), 0);
	assert_int_equal(nm->n, N - 4);
	for (int i = 0, k = 0; k < N; k++) {
		if (k >= 250 && k < 262 && (k - 250) % 3 == 0)
			continue;
		snprintf(name, sizeof(name), "st-%03d", k);
		assert_string_equal(nm->v[i], name);
		i++;
	}

	/* after, in the middle (a tombstoned name works as a cursor too). */
	nm->n = 0;
	assert_int_equal(meta_stream_list(f->kv, "b", "st-253", stream_collect, nm), 0);
	assert_int_equal(nm->n, N - 254 - 2);
	assert_string_equal(nm->v[0], "st-254");
	assert_string_equal(nm->v[nm->n - 1], "st-299");
	nm->n = 0;
	assert_int_equal(meta_stream_list(f->kv, "b", "st-0", stream_collect, nm), 0);
	assert_int_equal(nm->n, N - 4);
	nm->n = 0;
	assert_int_equal(meta_stream_list(f->kv, "b", "st-299", stream_collect, nm), 0);
	assert_int_equal(nm->n, 0);

	/* Stop across the page boundary. */
	nm->n = 0;
	nm->stop_after = 270;
	assert_int_equal(meta_stream_list(f->kv, "b", NULL, stream_collect, nm), 0);
	assert_int_equal(nm->n, 270);
	free(nm);
}

static void test_rows_stream_set_class(void **state)
{
	struct fx *f = *state;
	struct meta_stream s, g;

	assert_int_equal(meta_bucket_create(f->kv, "b", 0, NULL, NULL), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", "x", -1, 1, NULL, &s), 0);
	assert_int_equal(s.cls, NV_CLASS_STANDARD);
	assert_int_equal(meta_stream_set_class(f->kv, s.id, NV_CLASS_EXPRESS), 0);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "x", &g), 0);
	assert_int_equal(g.cls, NV_CLASS_EXPRESS);
	assert_int_equal(g.created_ns, s.created_ns);
	assert_int_equal(meta_stream_set_class(f->kv, s.id, NV_CLASS_COUNT), -EINVAL);
	assert_int_equal(meta_stream_set_class(f->kv, s.id + 50, NV_CLASS_STANDARD), -ENOENT);
	assert_int_equal(meta_stream_get(f->kv, s.id, &g, NULL), 0);
	assert_int_equal(g.cls, NV_CLASS_EXPRESS);
}

static void test_rows_stream_set_trim_never_backwards(void **state)
{
	struct fx *f = *state;
	struct meta_stream s, g;
	uint64_t v1, v2;

	assert_int_equal(meta_bucket_create(f->kv, "b", 0, NULL, NULL), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", "x", -1, 1, NULL, &s), 0);
	assert_int_equal(meta_stream_set_trim(f->kv, s.id, 10, 1000), 0);
	assert_int_equal(meta_stream_get(f->kv, s.id, &g, &v1), 0);
	assert_int_equal(g.trim_seq, 10);
	assert_int_equal(g.trim_byte, 1000);

	assert_int_equal(meta_stream_set_trim(f->kv, s.id, 9, 999), -ERANGE);
	assert_int_equal(meta_stream_set_trim(f->kv, s.id, 0, 0), -ERANGE);
	/* Equal: a no-op that writes nothing. */
	assert_int_equal(meta_stream_set_trim(f->kv, s.id, 10, 1000), 0);
	assert_int_equal(meta_stream_get(f->kv, s.id, &g, &v2), 0);
	assert_int_equal(v2, v1);
	assert_int_equal(g.trim_seq, 10);
	assert_int_equal(g.trim_byte, 1000);

	assert_int_equal(meta_stream_set_trim(f->kv, s.id, 11, 1500), 0);
	assert_int_equal(meta_stream_get(f->kv, s.id, &g, NULL), 0);
	assert_int_equal(g.trim_seq, 11);
	assert_int_equal(g.trim_byte, 1500);
	assert_int_equal(meta_stream_set_trim(f->kv, s.id + 9, 1, 1), -ENOENT);
}

static void test_rows_stream_codec_hostile(void **state)
{
	struct meta_stream s = { 0 }, g;
	struct nv_buf b;

	(void)state;
	s.id = 42;
	strcpy(s.bucket, "bk");
	strcpy(s.name, "nm");
	s.cls = NV_CLASS_EXPRESS;
	s.created_ns = 5;
	s.trim_seq = 6;
	s.trim_byte = 7;
	nv_buf_init(&b, 4096);
	assert_int_equal(meta_stream_encode(&s, &b), 0);
	assert_int_equal(meta_stream_decode(b.ptr, b.len, &g), 0);
	assert_memory_equal(&g, &s, sizeof(g));
	for (size_t n = 0; n < b.len; n++)
		assert_int_equal(meta_stream_decode(b.ptr, n, &g), -EBADMSG);
	assert_int_equal(nv_buf_add_u8(&b, 0), 0);
	assert_int_equal(meta_stream_decode(b.ptr, b.len, &g), -EBADMSG);
	/* Names containing '/' or empty names are refused. */
	strcpy(s.name, "a/b");
	assert_int_equal(meta_stream_encode(&s, &b), 0);
	assert_int_equal(meta_stream_decode(b.ptr, b.len, &g), -EBADMSG);
	s.name[0] = 0;
	assert_int_equal(meta_stream_encode(&s, &b), 0);
	assert_int_equal(meta_stream_decode(b.ptr, b.len, &g), -EBADMSG);
	strcpy(s.name, "ok");
	s.cls = 2;
	assert_int_equal(meta_stream_encode(&s, &b), 0);
	assert_int_equal(meta_stream_decode(b.ptr, b.len, &g), -EBADMSG);
	nv_buf_free(&b);
}

/* Owners: kept from creation, changed by set_owner, and old (v1) rows,
 * which had none, read as root:root with the default modes. */
static void test_rows_owners(void **state)
{
	struct fx *f = *state;
	struct meta_owner alice = { 1000, 1000, 0600 }, bob = { 1001, 100, 04755 };
	struct meta_stream s, g;
	struct meta_bucket b, gb;
	struct nv_buf v;

	assert_int_equal(meta_bucket_create(f->kv, "b", 0, &alice, &b), 0);
	assert_int_equal(meta_bucket_get(f->kv, "b", &gb), 0);
	assert_int_equal(gb.own.uid, 1000);
	assert_int_equal(gb.own.mode, 0600);
	assert_int_equal(meta_bucket_create(f->kv, "r", 0, NULL, &b), 0);
	assert_int_equal(b.own.uid, 0);
	assert_int_equal(b.own.mode, META_BUCKET_MODE);
	assert_int_equal(meta_bucket_set_owner(f->kv, "r", &bob), 0);
	assert_int_equal(meta_bucket_get(f->kv, "r", &gb), 0);
	assert_int_equal(gb.own.uid, 1001);
	assert_int_equal(gb.own.gid, 100);
	assert_int_equal(gb.own.mode, 04755);
	assert_int_equal(meta_bucket_set_owner(f->kv, "nob", &bob), -ENOENT);

	assert_int_equal(meta_stream_create(f->kv, "b", "x", -1, 1, &alice, &s), 0);
	assert_int_equal(meta_stream_get(f->kv, s.id, &g, NULL), 0);
	assert_memory_equal(&g.own, &alice, sizeof(alice));
	assert_int_equal(meta_stream_create(f->kv, "b", "y", -1, 1, NULL, &s), 0);
	assert_int_equal(s.own.mode, META_STREAM_MODE);
	assert_int_equal(meta_stream_set_owner(f->kv, s.id, &bob), 0);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "y", &g), 0);
	assert_memory_equal(&g.own, &bob, sizeof(bob));
	assert_int_equal(g.trim_seq, 0);

	/* A v1 row: the v2 row without its 10 owner bytes, version 1. */
	nv_buf_init(&v, 4096);
	assert_int_equal(meta_stream_encode(&g, &v), 0);
	assert_int_equal(v.ptr[0], 2);
	v.ptr[0] = 1;
	assert_int_equal(meta_stream_decode(v.ptr, v.len, &s), -EBADMSG);
	assert_int_equal(meta_stream_decode(v.ptr, v.len - 10, &s), 0);
	assert_int_equal(s.own.uid, 0);
	assert_int_equal(s.own.gid, 0);
	assert_int_equal(s.own.mode, META_STREAM_MODE);
	assert_string_equal(s.name, "y");
	assert_int_equal(meta_bucket_encode(&gb, &v), 0);
	v.ptr[0] = 1;
	assert_int_equal(meta_bucket_decode(v.ptr, v.len - 10, "r", &b), 0);
	assert_int_equal(b.own.uid, 0);
	assert_int_equal(b.own.mode, META_BUCKET_MODE);
	assert_int_equal(b.id, gb.id);
	/* A mode above 07777 is a corrupt row. */
	v.ptr[0] = 2;
	v.ptr[v.len - 1] = 0x10;
	assert_int_equal(meta_bucket_decode(v.ptr, v.len, "r", &b), -EBADMSG);
	nv_buf_free(&v);
}

/* user.nova.durable's row field: absent (v2) until set, kept through a
 * rename, removed back to v2; a v3 row must carry an override. */
static void test_rows_stream_durable(void **state)
{
	struct fx *f = *state;
	struct meta_stream s, g;
	struct meta_bucket b;
	struct nv_buf v;

	assert_int_equal(meta_bucket_create(f->kv, "b", 0, NULL, &b), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", "x", -1, 1, NULL, &s), 0);
	assert_int_equal(s.durable, META_DURABLE_DEFAULT);
	nv_buf_init(&v, 4096);
	assert_int_equal(meta_stream_encode(&s, &v), 0);
	assert_int_equal(v.ptr[0], 2); /* no override: still readable by v2 readers */

	assert_int_equal(meta_stream_set_durable(f->kv, s.id, META_DURABLE_FSYNC), 0);
	assert_int_equal(meta_stream_get(f->kv, s.id, &g, NULL), 0);
	assert_int_equal(g.durable, META_DURABLE_FSYNC);
	assert_int_equal(meta_stream_encode(&g, &v), 0);
	assert_int_equal(v.ptr[0], 3);
	assert_int_equal(meta_stream_decode(v.ptr, v.len, &s), 0);
	assert_memory_equal(&s, &g, sizeof(s));
	for (size_t n = 0; n < v.len; n++)
		assert_int_equal(meta_stream_decode(v.ptr, n, &s), -EBADMSG);
	v.ptr[v.len - 1] = META_DURABLE_DEFAULT; /* v3 without an override */
	assert_int_equal(meta_stream_decode(v.ptr, v.len, &s), -EBADMSG);
	v.ptr[v.len - 1] = 3;
	assert_int_equal(meta_stream_decode(v.ptr, v.len, &s), -EBADMSG);

	assert_int_equal(meta_stream_rename(f->kv, "b", "x", "y", false, 0, 0, 2, NULL), 0);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "y", &g), 0);
	assert_int_equal(g.durable, META_DURABLE_FSYNC);
	assert_int_equal(meta_stream_set_durable(f->kv, g.id, META_DURABLE_WRITE), 0);
	assert_int_equal(meta_stream_set_durable(f->kv, g.id, META_DURABLE_WRITE), 0);
	assert_int_equal(meta_stream_get(f->kv, g.id, &s, NULL), 0);
	assert_int_equal(s.durable, META_DURABLE_WRITE);
	assert_int_equal(meta_stream_set_durable(f->kv, g.id, META_DURABLE_DEFAULT), 0);
	assert_int_equal(meta_stream_get(f->kv, g.id, &s, NULL), 0);
	assert_int_equal(s.durable, META_DURABLE_DEFAULT);
	assert_int_equal(meta_stream_encode(&s, &v), 0);
	assert_int_equal(v.ptr[0], 2);

	assert_int_equal(meta_stream_set_durable(f->kv, g.id, 3), -EINVAL);
	assert_int_equal(meta_stream_set_durable(f->kv, g.id + 9, META_DURABLE_FSYNC), -ENOENT);
	assert_int_equal(meta_stream_delete(f->kv, g.id, 3), 0);
	assert_int_equal(meta_stream_set_durable(f->kv, g.id, META_DURABLE_FSYNC), -ENOENT);
	nv_buf_free(&v);
}

static int list_count_fn(void *arg, const struct meta_stream *s)
{
	(void)s;
	(*(int *)arg)++;
	return 0;
}

static int count_fn(void *arg, uint64_t id)
{
	(void)id;
	(*(int *)arg)++;
	return 0;
}

/* Rename within a bucket: the id, owner and bytes stay; an existing
 * target is replaced and tombstoned (queued for reclamation), unless
 * noreplace. */
static void test_rows_stream_rename(void **state)
{
	struct fx *f = *state;
	struct meta_owner alice = { 1000, 1000, 0600 };
	struct meta_stream a, t, g;
	uint64_t replaced = 99;
	int queued = 0;

	assert_int_equal(meta_bucket_create(f->kv, "b", 0, NULL, NULL), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", ".tmp.a1b2", -1, 1, &alice, &a), 0);
	assert_int_equal(meta_stream_rename(f->kv, "b", ".tmp.a1b2", "final", false, 0, 0, 5,
					    &replaced), 0);
	assert_int_equal(replaced, 0);
	assert_int_equal(meta_stream_lookup(f->kv, "b", ".tmp.a1b2", &g), -ENOENT);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "final", &g), 0);
	assert_int_equal(g.id, a.id);
	assert_string_equal(g.name, "final");
	assert_memory_equal(&g.own, &alice, sizeof(alice));
	/* Same name: nothing to do; missing source: ENOENT. */
	assert_int_equal(meta_stream_rename(f->kv, "b", "final", "final", false, 0, 0, 5, NULL), 0);
	assert_int_equal(meta_stream_rename(f->kv, "b", "nope", "x", false, 0, 0, 5, NULL), -ENOENT);
	assert_int_equal(meta_stream_rename(f->kv, "c", "final", "x", false, 0, 0, 5, NULL), -ENOENT);

	/* Over an existing stream. */
	assert_int_equal(meta_stream_create(f->kv, "b", "other", -1, 1, NULL, &t), 0);
	assert_int_equal(meta_stream_rename(f->kv, "b", "final", "other", true, 0, 0, 6, NULL),
			 -EEXIST);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "final", &g), 0);
	assert_int_equal(meta_stream_rename(f->kv, "b", "final", "other", false, t.id, 0, 7,
					    &replaced), 0);
	assert_int_equal(replaced, t.id);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "other", &g), 0);
	assert_int_equal(g.id, a.id);
	assert_int_equal(meta_stream_get(f->kv, t.id, &g, NULL), 0);
	assert_int_equal(g.deleted_ns, 7);
	assert_int_equal(meta_reclaim_streams(f->kv, count_fn, &queued), 0);
	assert_int_equal(queued, 1);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "final", &g), -ENOENT);
	{
		int n = 0;

		assert_int_equal(meta_stream_list(f->kv, "b", "", list_count_fn, &n), 0);
		assert_int_equal(n, 1);
	}
}

/* Put a lease row for stream id (its value is not read by a rename):
 * its version. */
static uint64_t put_lease_row(struct kv *kv, uint64_t id)
{
	struct nv_buf k, v;
	uint64_t ver = 0;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	assert_int_equal(key_lease(&k, id), 0);
	assert_int_equal(kv_put(kv, k.ptr, k.len, "lease", 5), 0);
	assert_int_equal(kv_get(kv, k.ptr, k.len, &v, &ver), 0);
	nv_buf_free(&k);
	nv_buf_free(&v);
	assert_true(ver > 0);
	return ver;
}

/* Nothing of a refused rename is done: src under its name, dst live
 * under its own. */
static void assert_unrenamed(struct kv *kv, const struct meta_stream *src,
			     const struct meta_stream *dst)
{
	struct meta_stream g;

	assert_int_equal(meta_stream_lookup(kv, "b", src->name, &g), 0);
	assert_int_equal(g.id, src->id);
	assert_int_equal(meta_stream_lookup(kv, "b", dst->name, &g), 0);
	assert_int_equal(g.id, dst->id);
	assert_int_equal(g.deleted_ns, 0);
}

/* A rename replaces only the target its caller resolved (expect_tid),
 * under the lease the caller holds on it (tlease_ver; 0 vacant): any
 * other stream under the name, none where one was resolved, or a lease
 * row at another version is -ESTALE, nothing changed (streams.h
 * invariant 6). */
static void test_rows_stream_rename_resolved(void **state)
{
	struct fx *f = *state;
	struct meta_stream src, dst, x, g;
	uint64_t replaced = 99, ver;

	assert_int_equal(meta_bucket_create(f->kv, "b", 0, NULL, NULL), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", "src", -1, 1, NULL, &src), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", "dst", -1, 1, NULL, &dst), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", "x", -1, 1, NULL, &x), 0);
	/* Another stream than the one resolved; one where none was; none
	 * where one was. */
	assert_int_equal(meta_stream_rename(f->kv, "b", "src", "dst", false, x.id, 0, 5, &replaced),
			 -ESTALE);
	assert_int_equal(replaced, 0);
	assert_int_equal(meta_stream_rename(f->kv, "b", "src", "dst", false, 0, 0, 5, NULL),
			 -ESTALE);
	assert_int_equal(meta_stream_rename(f->kv, "b", "src", "new", false, dst.id, 0, 5, NULL),
			 -ESTALE);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "new", &g), -ENOENT);
	assert_unrenamed(f->kv, &src, &dst);
	/* dst is led (a lease row): a caller that saw it vacant, or at another
	 * version, replaces nothing; its holder (the version) does. */
	ver = put_lease_row(f->kv, dst.id);
	assert_int_equal(meta_stream_rename(f->kv, "b", "src", "dst", false, dst.id, 0, 5, NULL),
			 -ESTALE);
	assert_int_equal(meta_stream_rename(f->kv, "b", "src", "dst", false, dst.id, ver + 1, 5,
					    NULL), -ESTALE);
	assert_unrenamed(f->kv, &src, &dst);
	assert_int_equal(meta_stream_rename(f->kv, "b", "src", "dst", false, dst.id, ver, 6,
					    &replaced), 0);
	assert_int_equal(replaced, dst.id);
	assert_int_equal(meta_stream_lookup(f->kv, "b", "dst", &g), 0);
	assert_int_equal(g.id, src.id);
	assert_int_equal(meta_stream_get(f->kv, dst.id, &g, NULL), 0);
	assert_int_equal(g.deleted_ns, 6);
	/* noreplace ignores what was resolved: -EEXIST. */
	assert_int_equal(meta_stream_rename(f->kv, "b", "x", "dst", true, 12345, 0, 7, NULL),
			 -EEXIST);
}

struct take_arg {
	struct kv *kv;
	uint64_t id;
};

/* Another star's take, once the rename's commit is held back (it has
 * hit the delay: its reads are done).  The wait polls a counter; the
 * delay is long enough for any machine to reach it. */
static void *take_later(void *arg)
{
	struct take_arg *a = arg;
	struct timespec ts = { 0, 1000 * 1000 };

	while (nv_fp_hits("meta.commit") == 0)
		nanosleep(&ts, NULL);
	(void)put_lease_row(a->kv, a->id);
	return NULL;
}

/* The vacant-take race: a rename over a stream seen vacant, and a star
 * takes its lease between the rename's reads and its commit.  The commit
 * compares the lease row, so the rename fails (-ESTALE: it cannot
 * succeed by retrying) and the taker's stream stays live under its
 * name; without the compare it was tombstoned under a live leader.  The
 * failpoint holds the rename's commit (its first) for 2 s; the take
 * lands once the commit stands in that delay (nv_fp_hits()). */
static void test_rows_stream_rename_vacant_taken(void **state)
{
	struct fx *f = *state;
	struct meta_stream src, dst;
	struct take_arg a = { f->kv, 0 };
	pthread_t th;

	assert_int_equal(meta_bucket_create(f->kv, "b", 0, NULL, NULL), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", "src", -1, 1, NULL, &src), 0);
	assert_int_equal(meta_stream_create(f->kv, "b", "dst", -1, 1, NULL, &dst), 0);
	a.id = dst.id;
	assert_int_equal(nv_fp_arm("meta.commit=delay:2000@1-1"), 0);
	assert_int_equal(pthread_create(&th, NULL, take_later, &a), 0);
	assert_int_equal(meta_stream_rename(f->kv, "b", "src", "dst", false, dst.id, 0, 5, NULL),
			 -ESTALE);
	pthread_join(th, NULL);
	nv_fp_reset();
	assert_unrenamed(f->kv, &src, &dst);
}

/* ================================================================ refs */

/* The documented v1 layout (refs.c), written independently of the codec,
 * with every field under the test's control. */
struct raw_ref {
	uint8_t version, kind, cls;
	uint64_t first_seq, end_seq, first_byte, end_byte, max_ts, epoch;
	const char *star;
	uint32_t nslots_field; /* the count written */
	uint32_t nslots;       /* entries written */
	struct meta_ref_slot slots[8];
};

static void raw_ref_default(struct raw_ref *r)
{
	memset(r, 0, sizeof(*r));
	r->version = 1;
	r->kind = META_REF_SPAN;
	r->cls = NV_CLASS_EXPRESS;
	r->first_seq = 100;
	r->end_seq = 130;
	r->first_byte = 5000;
	r->end_byte = 8000;
	r->max_ts = 123456789;
	r->epoch = 7;
	r->star = "star-1";
	r->nslots = r->nslots_field = 3;
	r->slots[0] = (struct meta_ref_slot){ 10, 100, 5000, 4096, 96 };
	r->slots[1] = (struct meta_ref_slot){ 12, 110, 6000, 8192, 160 };
	r->slots[2] = (struct meta_ref_slot){ 13, 125, 7500, 1024, 32 };
}

static void raw_ref_encode(const struct raw_ref *r, struct nv_buf *b)
{
	nv_buf_reset(b);
	assert_int_equal(nv_wr_u8(b, r->version), 0);
	assert_int_equal(nv_wr_u8(b, r->kind), 0);
	assert_int_equal(nv_wr_u64(b, r->first_seq), 0);
	assert_int_equal(nv_wr_u64(b, r->end_seq), 0);
	assert_int_equal(nv_wr_u64(b, r->first_byte), 0);
	assert_int_equal(nv_wr_u64(b, r->end_byte), 0);
	assert_int_equal(nv_wr_u64(b, r->max_ts), 0);
	assert_int_equal(nv_wr_u8(b, r->cls), 0);
	assert_int_equal(nv_wr_bytes(b, r->star, (uint32_t)strlen(r->star)), 0);
	assert_int_equal(nv_wr_u64(b, r->epoch), 0);
	assert_int_equal(nv_wr_u32(b, r->nslots_field), 0);
	for (uint32_t i = 0; i < r->nslots; i++) {
		assert_int_equal(nv_wr_u64(b, r->slots[i].slot), 0);
		assert_int_equal(nv_wr_u64(b, r->slots[i].first_seq), 0);
		assert_int_equal(nv_wr_u64(b, r->slots[i].first_byte), 0);
		assert_int_equal(nv_wr_u64(b, r->slots[i].footer_off), 0);
		assert_int_equal(nv_wr_u32(b, r->slots[i].footer_len), 0);
	}
}

static int raw_ref_decode(const struct raw_ref *r)
{
	struct nv_buf b;
	struct meta_ref m;
	int rc;

	nv_buf_init(&b, 1 << 20);
	raw_ref_encode(r, &b);
	meta_ref_init(&m);
	rc = meta_ref_decode(b.ptr, b.len, 9, &m);
	if (rc) {
		/* A failed decode leaves the ref empty (nothing to leak). */
		assert_int_equal(m.nslots, 0);
		assert_null(m.slots);
	}
	meta_ref_clear(&m);
	nv_buf_free(&b);
	return rc;
}

static void test_rows_ref_round_trip(void **state)
{
	struct raw_ref rr;
	struct meta_ref r, d;
	struct nv_buf mine, theirs;

	(void)state;
	raw_ref_default(&rr);
	meta_ref_init(&r);
	r.stream_id = 9;
	r.kind = META_REF_SPAN;
	r.first_seq = rr.first_seq;
	r.end_seq = rr.end_seq;
	r.first_byte = rr.first_byte;
	r.end_byte = rr.end_byte;
	r.max_ts = rr.max_ts;
	r.cls = rr.cls;
	strcpy(r.star, rr.star);
	r.epoch = rr.epoch;
	for (int i = 0; i < 3; i++)
		assert_int_equal(meta_ref_add_slot(&r, &rr.slots[i]), 0);

	nv_buf_init(&mine, 1 << 20);
	nv_buf_init(&theirs, 1 << 20);
	raw_ref_encode(&rr, &mine);
	assert_int_equal(meta_ref_encode(&r, &theirs), 0);
	/* The codec writes exactly the documented layout. */
	assert_int_equal(theirs.len, mine.len);
	assert_memory_equal(theirs.ptr, mine.ptr, mine.len);

	meta_ref_init(&d);
	assert_int_equal(meta_ref_decode(theirs.ptr, theirs.len, 9, &d), 0);
	assert_int_equal(d.stream_id, 9);
	assert_int_equal(d.kind, META_REF_SPAN);
	assert_int_equal(d.first_seq, r.first_seq);
	assert_int_equal(d.end_seq, r.end_seq);
	assert_int_equal(d.first_byte, r.first_byte);
	assert_int_equal(d.end_byte, r.end_byte);
	assert_int_equal(d.max_ts, r.max_ts);
	assert_int_equal(d.cls, r.cls);
	assert_string_equal(d.star, r.star);
	assert_int_equal(d.epoch, r.epoch);
	assert_int_equal(d.nslots, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(d.slots[i].slot, rr.slots[i].slot);
		assert_int_equal(d.slots[i].first_seq, rr.slots[i].first_seq);
		assert_int_equal(d.slots[i].first_byte, rr.slots[i].first_byte);
		assert_int_equal(d.slots[i].footer_off, rr.slots[i].footer_off);
		assert_int_equal(d.slots[i].footer_len, rr.slots[i].footer_len);
	}

	/* Decoding into a ref that holds slots replaces them (no leak). */
	assert_int_equal(meta_ref_decode(theirs.ptr, theirs.len, 9, &d), 0);
	assert_int_equal(d.nslots, 3);

	/* slot_for_seq / slot_for_byte at every boundary. */
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_SEQ, 100), 0);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_SEQ, 109), 0);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_SEQ, 110), 1);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_SEQ, 124), 1);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_SEQ, 125), 2);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_SEQ, 129), 2);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_BYTE, 5000), 0);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_BYTE, 5999), 0);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_BYTE, 6000), 1);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_BYTE, 7499), 1);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_BYTE, 7500), 2);
	assert_int_equal(meta_ref_slot_find(&d, META_REF_BY_BYTE, 7999), 2);

	/* Boundary values that are valid: a ref of only empty records
	 * (end_byte == first_byte), slots whose byte does not advance. */
	rr.end_byte = rr.first_byte;
	rr.nslots = rr.nslots_field = 2;
	rr.slots[1].first_byte = rr.first_byte;
	assert_int_equal(raw_ref_decode(&rr), 0);

	meta_ref_clear(&r);
	meta_ref_clear(&d);
	nv_buf_free(&mine);
	nv_buf_free(&theirs);
}

static void test_rows_ref_decode_truncations(void **state)
{
	struct raw_ref rr;
	struct nv_buf b;
	struct meta_ref m;

	(void)state;
	raw_ref_default(&rr);
	nv_buf_init(&b, 1 << 20);
	raw_ref_encode(&rr, &b);
	meta_ref_init(&m);
	assert_int_equal(meta_ref_decode(b.ptr, b.len, 1, &m), 0);
	for (size_t n = 0; n < b.len; n++) {
		assert_int_equal(meta_ref_decode(b.ptr, n, 1, &m), -EBADMSG);
		assert_int_equal(m.nslots, 0);
	}
	/* One byte of trailing garbage. */
	assert_int_equal(nv_buf_add_u8(&b, 0), 0);
	assert_int_equal(meta_ref_decode(b.ptr, b.len, 1, &m), -EBADMSG);
	meta_ref_clear(&m);
	nv_buf_free(&b);
}

static void test_rows_ref_decode_hostile(void **state)
{
	struct raw_ref rr;
	char star33[34];

	(void)state;
#define HOSTILE(stmt)                                              \
	do {                                                       \
		raw_ref_default(&rr);                              \
		assert_int_equal(raw_ref_decode(&rr), 0);          \
		stmt;                                              \
		assert_int_equal(raw_ref_decode(&rr), -EBADMSG);   \
	} while (0)

	HOSTILE(rr.version = 2);
	HOSTILE(rr.version = 0);
	HOSTILE(rr.kind = 0);
	HOSTILE(rr.kind = 2);
	HOSTILE(rr.cls = NV_CLASS_COUNT);
	HOSTILE(rr.cls = 255);
	/* Stars: empty, upper case, a slash, too long. */
	HOSTILE(rr.star = "");
	HOSTILE(rr.star = "Star");
	HOSTILE(rr.star = "a/b");
	memset(star33, 'a', 33);
	star33[33] = 0;
	HOSTILE(rr.star = star33);
	/* Extents: empty or reversed. */
	HOSTILE(rr.end_seq = rr.first_seq);
	HOSTILE(rr.end_seq = rr.first_seq - 1);
	HOSTILE(rr.end_byte = rr.first_byte - 1);
	/* Zero slots (with and without a count). */
	HOSTILE(rr.nslots = rr.nslots_field = 0);
	HOSTILE(rr.nslots_field = 0);
	/* Count and entries disagree; a huge count must not allocate. */
	HOSTILE(rr.nslots_field = 4);
	HOSTILE(rr.nslots_field = 2);
	HOSTILE(rr.nslots_field = UINT32_MAX);
	HOSTILE(rr.nslots_field = META_REF_SLOTS_MAX + 1);
	/* The first slot must start where the ref starts. */
	HOSTILE(rr.slots[0].first_seq = 101);
	HOSTILE(rr.slots[0].first_byte = 5001);
	/* Non-ascending slots. */
	HOSTILE(rr.slots[1].slot = rr.slots[0].slot);
	HOSTILE(rr.slots[1].slot = rr.slots[0].slot - 1);
	HOSTILE(rr.slots[2].first_seq = rr.slots[1].first_seq);
	HOSTILE(rr.slots[2].first_seq = rr.slots[1].first_seq - 1);
	HOSTILE(rr.slots[2].first_byte = rr.slots[1].first_byte - 1);
	/* Slots outside the ref. */
	HOSTILE(rr.slots[2].first_seq = rr.end_seq);
	HOSTILE(rr.slots[2].first_byte = rr.end_byte + 1);
	/* An empty footer window. */
	HOSTILE(rr.slots[1].footer_len = 0);
#undef HOSTILE
}

/* Write a ref of stream with the given extents (one slot per 10 seqs). */
static void put_ref(struct kv *kv, uint64_t stream, uint64_t fs, uint64_t es, uint64_t fb,
		    uint64_t eb, uint64_t slot0)
{
	struct meta_ref r;
	struct kv_txn *t = kv_txn_new();

	assert_non_null(t);
	meta_ref_init(&r);
	r.stream_id = stream;
	r.kind = META_REF_SPAN;
	r.first_seq = fs;
	r.end_seq = es;
	r.first_byte = fb;
	r.end_byte = eb;
	r.max_ts = es * 10;
	r.cls = NV_CLASS_STANDARD;
	strcpy(r.star, "s1");
	r.epoch = 1;
	for (uint64_t s = fs, i = 0; s < es; s += 10, i++) {
		struct meta_ref_slot sl = { slot0 + i, s,
					    fb + (eb - fb) * (s - fs) / (es - fs), 64 * i, 96 };

		assert_int_equal(meta_ref_add_slot(&r, &sl), 0);
	}
	assert_int_equal(meta_ref_txn_put(t, &r), 0);
	assert_int_equal(kv_txn_commit(kv, t, NULL), 0);
	kv_txn_free(t);
	meta_ref_clear(&r);
}

static void expect_floor(struct kv *kv, bool by_byte, uint64_t stream, uint64_t pos,
			 int want_rc, uint64_t want_first_seq)
{
	struct meta_ref r;
	int rc;

	meta_ref_init(&r);
	rc = by_byte ? meta_ref_floor_byte(kv, stream, pos, &r)
		     : meta_ref_floor_seq(kv, stream, pos, &r);
	assert_int_equal(rc, want_rc);
	if (!rc) {
		assert_int_equal(r.stream_id, stream);
		assert_int_equal(r.first_seq, want_first_seq);
	}
	meta_ref_clear(&r);
}

/* A ref of one slot (any length). */
static void put_ref1(struct kv *kv, uint64_t stream, uint64_t fs, uint64_t es, uint64_t fb,
		     uint64_t eb)
{
	struct meta_ref r;
	struct meta_ref_slot sl = { 1, fs, fb, 0, 96 };
	struct kv_txn *t = kv_txn_new();

	meta_ref_init(&r);
	r.stream_id = stream;
	r.kind = META_REF_SPAN;
	r.first_seq = fs;
	r.end_seq = es;
	r.first_byte = fb;
	r.end_byte = eb;
	r.cls = NV_CLASS_STANDARD;
	strcpy(r.star, "s1");
	r.epoch = 1;
	assert_int_equal(meta_ref_add_slot(&r, &sl), 0);
	assert_int_equal(meta_ref_txn_put(t, &r), 0);
	assert_int_equal(kv_txn_commit(kv, t, NULL), 0);
	kv_txn_free(t);
	meta_ref_clear(&r);
}

/*
 * ref_floor() looks in windows of growing width below pos (refs.c), so a
 * floor lookup costs the refs near pos, not the stream's history.  Refs
 * longer than several windows, and positions on window edges, still find
 * the same floor an unbounded lookup finds.
 */
static void test_rows_ref_floor_windows(void **state)
{
	struct fx *f = *state;
	const uint64_t big = 50000000, gb = 3000000000ull;

	put_ref1(f->kv, 9, 0, 31, 0, 31);                 /* inside the first window */
	put_ref1(f->kv, 9, 31, big, 31, gb);              /* longer than four windows */
	put_ref1(f->kv, 9, big, big + 1, gb, gb + 1);
	put_ref1(f->kv, 9, big + 1, big + 33, gb + 1, gb + 1); /* empty records */
	put_ref1(f->kv, 9, big + 33, big + 34, gb + 1, gb + 2);
	expect_floor(f->kv, false, 9, 30, 0, 0);
	expect_floor(f->kv, false, 9, 31, 0, 31);
	expect_floor(f->kv, false, 9, 32, 0, 31);
	expect_floor(f->kv, false, 9, 31 + 32, 0, 31);     /* on the first edge */
	expect_floor(f->kv, false, 9, big - 1, 0, 31);
	expect_floor(f->kv, false, 9, big, 0, big);
	expect_floor(f->kv, false, 9, big + 32, 0, big + 1);
	expect_floor(f->kv, false, 9, UINT64_MAX - 1, 0, big + 33);
	expect_floor(f->kv, true, 9, 31 + (32 << 10), 0, 31);
	expect_floor(f->kv, true, 9, gb - 1, 0, 31);
	expect_floor(f->kv, true, 9, gb, 0, big);
	expect_floor(f->kv, true, 9, gb + 1, 0, big + 33); /* the one with data (refs.c) */
	expect_floor(f->kv, true, 9, UINT64_MAX - 1, 0, big + 33);
	/* Nothing below the first ref, even with every window tried. */
	put_ref1(f->kv, 10, 1000000, 1000001, 1ull << 40, (1ull << 40) + 1);
	expect_floor(f->kv, false, 10, 999999, -ENOENT, 0);
	expect_floor(f->kv, true, 10, (1ull << 40) - 1, -ENOENT, 0);
	expect_floor(f->kv, true, 10, UINT64_MAX - 1, 0, 1000000);
}

static void test_rows_ref_floor_boundaries(void **state)
{
	struct fx *f = *state;
	struct meta_ref r;

	/* Stream 5: [0,10) bytes [0,100), [10,30) bytes [100,400),
	 * [30,40) bytes [400,401).  Neighbours 4 and 6 have refs too. */
	put_ref(f->kv, 5, 0, 10, 0, 100, 0);
	put_ref(f->kv, 5, 10, 30, 100, 400, 1);
	put_ref(f->kv, 5, 30, 40, 400, 401, 3);
	put_ref(f->kv, 6, 0, 10, 0, 50, 0);
	put_ref(f->kv, 4, 100, 110, 1000, 1100, 9);

	/* By seq: at each first seq, just below, just above, and past the end. */
	expect_floor(f->kv, false, 5, 0, 0, 0);
	expect_floor(f->kv, false, 5, 9, 0, 0);
	expect_floor(f->kv, false, 5, 10, 0, 10);
	expect_floor(f->kv, false, 5, 29, 0, 10);
	expect_floor(f->kv, false, 5, 30, 0, 30);
	expect_floor(f->kv, false, 5, 39, 0, 30);
	expect_floor(f->kv, false, 5, 1000000, 0, 30); /* the last ref */
	expect_floor(f->kv, false, 5, UINT64_MAX, 0, 30);
	/* By byte. */
	expect_floor(f->kv, true, 5, 0, 0, 0);
	expect_floor(f->kv, true, 5, 99, 0, 0);
	expect_floor(f->kv, true, 5, 100, 0, 10);
	expect_floor(f->kv, true, 5, 399, 0, 10);
	expect_floor(f->kv, true, 5, 400, 0, 30);
	expect_floor(f->kv, true, 5, 401, 0, 30);
	/* Below the first ref of a stream: nothing, never the neighbour's. */
	expect_floor(f->kv, false, 4, 99, -ENOENT, 0);
	expect_floor(f->kv, true, 4, 999, -ENOENT, 0);
	expect_floor(f->kv, false, 4, 100, 0, 100);
	/* A stream with no refs between two that have some. */
	put_ref(f->kv, 8, 0, 10, 0, 10, 0);
	expect_floor(f->kv, false, 7, 5, -ENOENT, 0);
	expect_floor(f->kv, true, 7, UINT64_MAX, -ENOENT, 0);
	/* Stream 6 never sees stream 5's refs. */
	expect_floor(f->kv, false, 6, 35, 0, 0);

	meta_ref_init(&r);
	assert_int_equal(meta_ref_last(f->kv, 5, &r), 0);
	assert_int_equal(r.first_seq, 30);
	assert_int_equal(r.end_seq, 40);
	assert_int_equal(r.end_byte, 401);
	assert_int_equal(meta_ref_last(f->kv, 7, &r), -ENOENT);
	assert_int_equal(meta_ref_last(f->kv, 3, &r), -ENOENT);
	meta_ref_clear(&r);

	/* A corrupt row is -EBADMSG, not a crash. */
	{
		struct nv_buf k;

		nv_buf_init(&k, KV_KEY_MAX);
		assert_int_equal(key_ref(&k, 5, 50), 0);
		assert_int_equal(kv_put(f->kv, k.ptr, k.len, "\x01\x01", 2), 0);
		nv_buf_free(&k);
		expect_floor(f->kv, false, 5, 60, -EBADMSG, 0);
	}
}

/* Where the settled history ends (issue 11 item 11): the end of the last
 * catalog row of the leading run, past span refs wholly below the trim
 * point that reclamation has not removed yet; a live span ref ends it. */
static void test_rows_ref_settled_end(void **state)
{
	struct fx *f = *state;
	struct meta_ref c;
	struct meta_ref_obj o = { .first_seq = 10, .first_byte = 100, .epoch = 1,
				  .footer_off = 50, .footer_len = 64 };
	struct kv_txn *t = kv_txn_new();
	uint64_t seq, byte;

	assert_non_null(t);
	put_ref(f->kv, 5, 0, 10, 0, 100, 0);   /* trimmed, not reclaimed yet */
	meta_ref_init(&c);
	c.stream_id = 5;
	c.kind = META_REF_CATALOG;
	c.first_seq = 10;
	c.end_seq = 30;
	c.first_byte = 100;
	c.end_byte = 400;
	strcpy(c.bucket, "b");
	assert_int_equal(meta_ref_add_obj(&c, &o), 0);
	assert_int_equal(meta_ref_txn_put(t, &c), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	meta_ref_clear(&c);
	put_ref(f->kv, 5, 30, 40, 400, 401, 3); /* in transit */

	assert_int_equal(meta_ref_settled_end(f->kv, 5, 10, &seq, &byte), 0);
	assert_int_equal(seq, 30);
	assert_int_equal(byte, 400);
	/* Not trimmed: the span ref before the catalog row is history still
	 * in transit, so nothing is settled from the start. */
	assert_int_equal(meta_ref_settled_end(f->kv, 5, 0, &seq, &byte), 0);
	assert_int_equal(seq, 0);
	assert_int_equal(byte, 0);
}

/* Set stream's hint of kind to seq (len 8), or to a value that is not a
 * hint (len 3). */
static void set_hint(struct kv *kv, uint64_t stream, unsigned kind, uint64_t seq, size_t len)
{
	struct nv_buf k;
	uint8_t v[8];

	for (int i = 0; i < 8; i++)
		v[i] = (uint8_t)(seq >> (8 * i));
	nv_buf_init(&k, KV_KEY_MAX);
	assert_int_equal(key_ref_hint(&k, stream, kind), 0);
	assert_int_equal(kv_put(kv, k.ptr, k.len, v, len), 0);
	nv_buf_free(&k);
}

static void expect_last(struct kv *kv, uint64_t stream, int rc, uint64_t first, uint64_t end)
{
	struct meta_ref r;

	meta_ref_init(&r);
	assert_int_equal(meta_ref_last(kv, stream, &r), rc);
	if (!rc) {
		assert_int_equal(r.first_seq, first);
		assert_int_equal(r.end_seq, end);
	}
	meta_ref_clear(&r);
}

static void expect_settled(struct kv *kv, uint64_t stream, uint64_t trim, uint64_t seq)
{
	uint64_t s = 99, b = 99;

	assert_int_equal(meta_ref_settled_end(kv, stream, trim, &s, &b), 0);
	assert_int_equal(s, seq);
	assert_int_equal(b, seq * 10);
}

/* The ref hints (refs.h "Hints"): a stream load reads where the newest
 * span ref and catalog row start instead of scanning the stream; every
 * hint, right, stale below, stale above, garbage or missing, gives the
 * scans' answers. */
static void test_rows_ref_hints(void **state)
{
	struct fx *f = *state;
	struct meta_ref_obj o = { .first_seq = 0, .first_byte = 0, .epoch = 1,
				  .footer_off = 50, .footer_len = 64 };
	struct meta_ref c;
	struct kv_txn *t;
	uint64_t stale[] = { 0, 10, 25, 40, 1000 };

	put_ref(f->kv, 9, 0, 10, 0, 100, 0);
	put_ref(f->kv, 9, 10, 20, 100, 200, 1);
	put_ref(f->kv, 9, 20, 30, 200, 300, 2);
	expect_last(f->kv, 9, 0, 20, 30); /* the hint the puts wrote */
	for (size_t i = 0; i < sizeof(stale) / sizeof(stale[0]); i++) {
		set_hint(f->kv, 9, META_REF_SPAN, stale[i], 8);
		expect_last(f->kv, 9, 0, 20, 30);
	}
	set_hint(f->kv, 9, META_REF_SPAN, 20, 3);
	expect_last(f->kv, 9, 0, 20, 30);
	set_hint(f->kv, 8, META_REF_SPAN, 5, 8); /* a hint with no rows */
	expect_last(f->kv, 8, -ENOENT, 0, 0);

	/* No catalog row: nothing settled, hint or not. */
	expect_settled(f->kv, 9, 0, 0);
	set_hint(f->kv, 9, META_REF_CATALOG, 10, 8);
	expect_settled(f->kv, 9, 0, 0);

	/* Settle [0, 20) into one catalog row (its put writes the hint). */
	meta_ref_init(&c);
	c.stream_id = 9;
	c.kind = META_REF_CATALOG;
	c.first_seq = 0;
	c.end_seq = 20;
	c.end_byte = 200;
	strcpy(c.bucket, "b");
	assert_int_equal(meta_ref_add_obj(&c, &o), 0);
	t = kv_txn_new();
	assert_non_null(t);
	assert_int_equal(meta_ref_txn_del(t, 9, 0, 0), 0);
	assert_int_equal(meta_ref_txn_del(t, 9, 10, 100), 0);
	assert_int_equal(meta_ref_txn_put(t, &c), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	expect_settled(f->kv, 9, 0, 20);
	expect_settled(f->kv, 9, 5, 20);
	for (size_t i = 0; i < sizeof(stale) / sizeof(stale[0]); i++) {
		set_hint(f->kv, 9, META_REF_CATALOG, stale[i], 8);
		expect_settled(f->kv, 9, 0, 20);
	}
	/* The whole stream settled: the span hint points at a row that is
	 * gone; the last row starts below it. */
	t = kv_txn_new();
	assert_non_null(t);
	assert_int_equal(meta_ref_txn_del(t, 9, 20, 200), 0);
	c.end_seq = 30;
	c.end_byte = 300;
	assert_int_equal(meta_ref_txn_put(t, &c), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	meta_ref_clear(&c);
	set_hint(f->kv, 9, META_REF_SPAN, 20, 8);
	expect_last(f->kv, 9, 0, 0, 30);
	expect_settled(f->kv, 9, 0, 30);
	/* A deleted stream's hints go with its row. */
	assert_int_equal(meta_reclaim_stream_done(f->kv, 9, true), 0);
	for (unsigned kind = META_REF_SPAN; kind <= META_REF_CATALOG; kind++) {
		struct nv_buf k;

		nv_buf_init(&k, KV_KEY_MAX);
		assert_int_equal(key_ref_hint(&k, 9, kind), 0);
		assert_int_equal(kv_get(f->kv, k.ptr, k.len, NULL, NULL), -ENOENT);
		assert_int_equal(key_ref_hint(&k, 8, META_REF_SPAN), 0);
		assert_int_equal(kv_get(f->kv, k.ptr, k.len, NULL, NULL), 0);
		nv_buf_free(&k);
	}
}

static void test_rows_ref_byte_index_same_value(void **state)
{
	struct fx *f = *state;
	struct nv_buf k, a, b;
	uint64_t va, vb;

	put_ref(f->kv, 5, 10, 30, 100, 400, 1);
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&a, KV_VAL_MAX);
	nv_buf_init(&b, KV_VAL_MAX);
	assert_int_equal(key_ref(&k, 5, 10), 0);
	assert_int_equal(kv_get(f->kv, k.ptr, k.len, &a, &va), 0);
	assert_int_equal(key_ref_byte(&k, 5, 100, 10), 0);
	assert_int_equal(kv_get(f->kv, k.ptr, k.len, &b, &vb), 0);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.ptr, b.ptr, a.len);
	assert_int_equal(va, vb); /* written in one transaction */

	/* txn_del removes both rows together. */
	{
		struct kv_txn *t = kv_txn_new();

		assert_non_null(t);
		assert_int_equal(meta_ref_txn_del(t, 5, 10, 100), 0);
		assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
		kv_txn_free(t);
	}
	assert_int_equal(key_ref(&k, 5, 10), 0);
	assert_int_equal(kv_get(f->kv, k.ptr, k.len, &a, NULL), -ENOENT);
	assert_int_equal(key_ref_byte(&k, 5, 100, 10), 0);
	assert_int_equal(kv_get(f->kv, k.ptr, k.len, &b, NULL), -ENOENT);
	nv_buf_free(&k);
	nv_buf_free(&a);
	nv_buf_free(&b);
}

/* A ref that covers only empty records ends where it starts
 * (end_byte == first_byte), so the next ref starts at the same byte and
 * both have the byte-index key ("rby", stream, byte).  refs.h promises a
 * byte-index row per ref, written and deleted with it: deleting the empty
 * ref must not take the next ref's byte-index row with it. */
static void test_rows_ref_empty_ref_shares_byte_key(void **state)
{
	struct fx *f = *state;
	struct meta_ref r;
	struct kv_txn *t;

	put_ref(f->kv, 5, 0, 10, 0, 400, 0);    /* [0,10)  bytes [0,400) */
	put_ref(f->kv, 5, 10, 20, 400, 400, 1); /* [10,20) empty records */
	put_ref(f->kv, 5, 20, 30, 400, 500, 2); /* [20,30) bytes [400,500) */
	expect_floor(f->kv, true, 5, 450, 0, 20);
	expect_floor(f->kv, false, 5, 15, 0, 10);

	/* Retire the empty ref (as trim or settlement retire covered refs). */
	t = kv_txn_new();
	assert_non_null(t);
	assert_int_equal(meta_ref_txn_del(t, 5, 10, 400), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	expect_floor(f->kv, false, 5, 25, 0, 20); /* the seq row is there */
	/* ... and the byte lookup must still find it. */
	meta_ref_init(&r);
	assert_int_equal(meta_ref_floor_byte(f->kv, 5, 450, &r), 0);
	{
		uint64_t fs = r.first_seq, fb = r.first_byte, eb = r.end_byte;

		meta_ref_clear(&r);
		if (fs != 20)
			fail_msg("byte 450 resolves to the ref at seq %llu [%llu, %llu): the "
				 "byte-index row of the ref at seq 20 was deleted with the empty ref "
				 "at seq 10 (same key rby/5/400)",
				 (unsigned long long)fs, (unsigned long long)fb,
				 (unsigned long long)eb);
	}
}

struct ref_walk {
	struct kv *kv;
	uint64_t firsts[256];
	int n;
	int stop_at;
	int nested_ok;
};

static int ref_walk_fn(void *arg, const struct meta_ref *r)
{
	struct ref_walk *w = arg;
	struct meta_ref again;

	assert_true(w->n < 256);
	w->firsts[w->n++] = r->first_seq;
	/* Call back into the kv from inside the visit. */
	meta_ref_init(&again);
	if (meta_ref_floor_seq(w->kv, r->stream_id, r->first_seq, &again) == 0 &&
	    again.first_seq == r->first_seq && again.end_seq == r->end_seq)
		w->nested_ok++;
	meta_ref_clear(&again);
	return w->stop_at && w->n == w->stop_at ? 1 : 0;
}

static void test_rows_ref_list_paging(void **state)
{
	struct fx *f = *state;
	struct ref_walk *w = calloc(1, sizeof(*w));
	const int N = 75; /* more than two pages of 32 */

	assert_non_null(w);
	w->kv = f->kv;
	for (int i = 0; i < N; i++)
		put_ref(f->kv, 5, (uint64_t)i * 10, (uint64_t)i * 10 + 10, (uint64_t)i * 100,
			(uint64_t)i * 100 + 100, (uint64_t)i);
	put_ref(f->kv, 6, 0, 10, 0, 10, 0);
	put_ref(f->kv, 4, 0, 10, 0, 10, 0);

	assert_int_equal(meta_ref_list(f->kv, 5, 0, 0, ref_walk_fn, w), 0);
	assert_int_equal(w->n, N);
	assert_int_equal(w->nested_ok, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(w->firsts[i], (uint64_t)i * 10);

	/* from_seq in the middle of a ref starts at the next ref. */
	w->n = w->nested_ok = 0;
	assert_int_equal(meta_ref_list(f->kv, 5, 315, 0, ref_walk_fn, w), 0);
	assert_int_equal(w->n, N - 32);
	assert_int_equal(w->firsts[0], 320);
	/* limit, across a page boundary. */
	w->n = 0;
	assert_int_equal(meta_ref_list(f->kv, 5, 0, 40, ref_walk_fn, w), 0);
	assert_int_equal(w->n, 40);
	/* A limit of exactly one page. */
	w->n = 0;
	assert_int_equal(meta_ref_list(f->kv, 5, 0, 32, ref_walk_fn, w), 0);
	assert_int_equal(w->n, 32);
	/* fn stopping with 1. */
	w->n = 0;
	w->stop_at = 33;
	assert_int_equal(meta_ref_list(f->kv, 5, 0, 0, ref_walk_fn, w), 0);
	assert_int_equal(w->n, 33);
	/* Empty stream. */
	w->n = 0;
	w->stop_at = 0;
	assert_int_equal(meta_ref_list(f->kv, 7, 0, 0, ref_walk_fn, w), 0);
	assert_int_equal(w->n, 0);
	free(w);
}

/* meta_ref_window_byte(): the ref holding a byte and those after it. */
static void expect_window(struct kv *kv, uint64_t stream, uint64_t byte, size_t cap,
			  size_t max_slots, int want_rc, size_t want_n, uint64_t want_first_seq,
			  unsigned want_calls)
{
	struct meta_ref w[8];
	size_t n = 99;
	unsigned calls = 0;

	assert_true(cap <= 8);
	for (int i = 0; i < 8; i++)
		meta_ref_init(&w[i]);
	assert_int_equal(meta_ref_window_byte(kv, stream, byte, w, cap, max_slots, &n, &calls),
			 want_rc);
	if (n != want_n)
		fail_msg("window at byte %llu: %zu refs, expected %zu", (unsigned long long)byte, n,
			 want_n);
	assert_int_equal(calls, want_calls);
	if (n) {
		assert_int_equal(w[0].first_seq, want_first_seq);
		assert_true(w[0].first_byte <= byte && byte < w[0].end_byte);
	}
	for (size_t i = 1; i < n; i++) {
		assert_int_equal(w[i].first_byte, w[i - 1].end_byte); /* contiguous */
		assert_int_equal(w[i].first_seq, w[i - 1].end_seq);
	}
	for (size_t i = 0; i < n; i++)
		meta_ref_clear(&w[i]);
}

static void test_rows_ref_window_byte(void **state)
{
	struct fx *f = *state;

	/* Refs of 10 seqs and 100 bytes (one slot each), an empty one at
	 * seq 50 (bytes [500, 500)), another stream beside. */
	for (int i = 0; i < 5; i++)
		put_ref(f->kv, 5, (uint64_t)i * 10, (uint64_t)i * 10 + 10, (uint64_t)i * 100,
			(uint64_t)i * 100 + 100, (uint64_t)i);
	put_ref(f->kv, 5, 50, 60, 500, 500, 5);
	for (int i = 6; i < 12; i++)
		put_ref(f->kv, 5, (uint64_t)i * 10, (uint64_t)i * 10 + 10, (uint64_t)i * 100 - 100,
			(uint64_t)i * 100, (uint64_t)i);
	put_ref(f->kv, 6, 0, 10, 0, 10, 0);

	/* At a ref's start: one range, no floor. */
	expect_window(f->kv, 5, 0, 4, 1000, 0, 4, 0, 1);
	expect_window(f->kv, 5, 300, 8, 1000, 0, 8, 30, 1);
	/* The empty ref at the start is skipped; in the middle it is kept. */
	expect_window(f->kv, 5, 500, 3, 1000, 0, 3, 60, 1);
	expect_window(f->kv, 5, 400, 3, 1000, 0, 3, 40, 1);
	/* Inside a ref: the range, then a floor by seq. */
	expect_window(f->kv, 5, 250, 4, 1000, 0, 4, 20, 2);
	expect_window(f->kv, 5, 499, 2, 1000, 0, 2, 40, 2);
	/* Inside the last ref: no next ref, a floor by byte. */
	expect_window(f->kv, 5, 1050, 4, 1000, 0, 1, 110, 2);
	/* The slot budget ends the window after the ref that reaches it. */
	expect_window(f->kv, 5, 0, 8, 2, 0, 2, 0, 1);
	/* Past the last ref, an unknown stream, cap 0. */
	expect_window(f->kv, 5, 1100, 4, 1000, -ENOENT, 0, 0, 2);
	expect_window(f->kv, 7, 0, 4, 1000, -ENOENT, 0, 0, 2);
	expect_window(f->kv, 5, 0, 0, 1000, -EINVAL, 0, 0, 0);
}

/* ================================================================ chains */

static void test_rows_chain_mint(void **state)
{
	struct fx *f = *state;
	struct meta_chain c, g;
	uint64_t ver, gver, head;

	assert_int_equal(meta_mint_head(f->kv, NV_CLASS_STANDARD, "s1", &head), 0);
	assert_int_equal(head, 0);
	assert_int_equal(meta_chain_mint(f->kv, NV_CLASS_STANDARD, "s1", 1111, &c, &ver), 0);
	assert_int_equal(c.epoch, 1);
	assert_int_equal(c.state, CHAIN_LIVE);
	assert_int_equal(c.checkpoint, 0);
	assert_int_equal(c.cls, NV_CLASS_STANDARD);
	assert_string_equal(c.star, "s1");
	assert_int_equal(c.created_ns, 1111);
	assert_int_equal(meta_chain_get(f->kv, NV_CLASS_STANDARD, "s1", 1, &g, &gver), 0);
	assert_int_equal(g.cls, c.cls);
	assert_string_equal(g.star, c.star);
	assert_int_equal(g.epoch, 1);
	assert_int_equal(g.state, CHAIN_LIVE);
	assert_int_equal(g.checkpoint, 0);
	assert_int_equal(g.cut, 0);
	assert_int_equal(g.created_ns, 1111);
	assert_int_equal(gver, ver);

	assert_int_equal(meta_chain_mint(f->kv, NV_CLASS_STANDARD, "s1", 2222, &c, &ver), 0);
	assert_int_equal(c.epoch, 2);
	assert_int_equal(meta_mint_head(f->kv, NV_CLASS_STANDARD, "s1", &head), 0);
	assert_int_equal(head, 2);
	/* Independent per class and per star. */
	assert_int_equal(meta_chain_mint(f->kv, NV_CLASS_EXPRESS, "s1", 1, &c, &ver), 0);
	assert_int_equal(c.epoch, 1);
	assert_int_equal(meta_chain_mint(f->kv, NV_CLASS_STANDARD, "s2", 1, &c, &ver), 0);
	assert_int_equal(c.epoch, 1);
	assert_int_equal(meta_mint_head(f->kv, NV_CLASS_STANDARD, "s1", &head), 0);
	assert_int_equal(head, 2);
	/* The earlier epoch's row is still there, unchanged. */
	assert_int_equal(meta_chain_get(f->kv, NV_CLASS_STANDARD, "s1", 1, &g, NULL), 0);
	assert_int_equal(g.created_ns, 1111);
	assert_int_equal(meta_chain_get(f->kv, NV_CLASS_STANDARD, "s1", 3, &g, NULL), -ENOENT);
	assert_int_equal(meta_chain_get(f->kv, NV_CLASS_EXPRESS, "s2", 1, &g, NULL), -ENOENT);

	assert_int_equal(meta_chain_mint(f->kv, NV_CLASS_COUNT, "s1", 1, &c, &ver), -EINVAL);
	assert_int_equal(meta_chain_mint(f->kv, 0, "S1", 1, &c, &ver), -EINVAL);
	assert_int_equal(meta_chain_mint(f->kv, 0, "", 1, &c, &ver), -EINVAL);
}

static void test_rows_chain_cas_conflict(void **state)
{
	struct fx *f = *state;
	struct meta_chain c, g;
	uint64_t ver, v2;

	assert_int_equal(meta_chain_mint(f->kv, 0, "s1", 1, &c, &ver), 0);
	c.checkpoint = 5;
	assert_int_equal(meta_chain_cas(f->kv, &c, ver), 0);
	/* The old version is stale now. */
	c.checkpoint = 9;
	assert_int_equal(meta_chain_cas(f->kv, &c, ver), -ECANCELED);
	assert_int_equal(meta_chain_get(f->kv, 0, "s1", 1, &g, &v2), 0);
	assert_int_equal(g.checkpoint, 5);
	assert_true(v2 > ver);
	/* "Must not exist" fails for an existing row. */
	assert_int_equal(meta_chain_cas(f->kv, &c, 0), -ECANCELED);
	/* A fresh row with expect 0 is created. */
	c.epoch = 40;
	assert_int_equal(meta_chain_cas(f->kv, &c, 0), 0);
	assert_int_equal(meta_chain_get(f->kv, 0, "s1", 40, &g, NULL), 0);
	assert_int_equal(g.checkpoint, 9);
	/* With the current version it goes through. */
	c.epoch = 1;
	c.state = CHAIN_FENCED;
	c.cut = 9;
	assert_int_equal(meta_chain_cas(f->kv, &c, v2), 0);
	assert_int_equal(meta_chain_get(f->kv, 0, "s1", 1, &g, NULL), 0);
	assert_int_equal(g.state, CHAIN_FENCED);
	assert_int_equal(g.cut, 9);
}

/* chains.c v1 layout, written independently. */
static void raw_chain(struct nv_buf *b, const struct meta_chain *c, const char *star,
		      uint8_t version)
{
	nv_buf_reset(b);
	assert_int_equal(nv_wr_u8(b, version), 0);
	assert_int_equal(nv_wr_u8(b, c->cls), 0);
	assert_int_equal(nv_wr_bytes(b, star, (uint32_t)strlen(star)), 0);
	assert_int_equal(nv_wr_u64(b, c->epoch), 0);
	assert_int_equal(nv_wr_u8(b, c->state), 0);
	assert_int_equal(nv_wr_u8(b, c->clean), 0);
	assert_int_equal(nv_wr_u64(b, c->checkpoint), 0);
	assert_int_equal(nv_wr_u64(b, c->cut), 0);
	assert_int_equal(nv_wr_u64(b, c->created_ns), 0);
	assert_int_equal(nv_wr_u64(b, c->settled_ns), 0);
}

static void chain_default(struct meta_chain *c)
{
	memset(c, 0, sizeof(*c));
	c->cls = NV_CLASS_EXPRESS;
	strcpy(c->star, "star-9");
	c->epoch = 3;
	c->state = CHAIN_FENCED;
	c->clean = 1;
	c->checkpoint = 50;
	c->cut = 60;
	c->created_ns = 77;
	c->settled_ns = 88;
}

static int chain_decode_of(const struct meta_chain *c, const char *star, uint8_t version)
{
	struct nv_buf b;
	struct meta_chain d;
	int rc;

	nv_buf_init(&b, 4096);
	raw_chain(&b, c, star, version);
	rc = meta_chain_decode(b.ptr, b.len, &d);
	nv_buf_free(&b);
	return rc;
}

static void test_rows_chain_decode_hostile(void **state)
{
	struct meta_chain c, d;
	struct nv_buf mine, theirs;

	(void)state;
	chain_default(&c);
	nv_buf_init(&mine, 4096);
	nv_buf_init(&theirs, 4096);
	raw_chain(&mine, &c, c.star, 1);
	assert_int_equal(meta_chain_encode(&c, &theirs), 0);
	assert_int_equal(theirs.len, mine.len);
	assert_memory_equal(theirs.ptr, mine.ptr, mine.len);
	assert_int_equal(meta_chain_decode(mine.ptr, mine.len, &d), 0);
	assert_memory_equal(&d, &c, sizeof(d));
	for (size_t n = 0; n < mine.len; n++)
		assert_int_equal(meta_chain_decode(mine.ptr, n, &d), -EBADMSG);
	assert_int_equal(nv_buf_add_u8(&mine, 0), 0);
	assert_int_equal(meta_chain_decode(mine.ptr, mine.len, &d), -EBADMSG);
	nv_buf_free(&mine);
	nv_buf_free(&theirs);

#define CHAIN_BAD(stmt, star, version)                                        \
	do {                                                                  \
		chain_default(&c);                                            \
		stmt;                                                         \
		assert_int_equal(chain_decode_of(&c, (star), (version)), -EBADMSG); \
	} while (0)

	CHAIN_BAD((void)0, "star-9", 2);
	CHAIN_BAD((void)0, "star-9", 0);
	CHAIN_BAD(c.cls = NV_CLASS_COUNT, "star-9", 1);
	CHAIN_BAD((void)0, "", 1);
	CHAIN_BAD((void)0, "Star", 1);
	CHAIN_BAD((void)0, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1); /* 33 */
	CHAIN_BAD(c.state = 0, "star-9", 1);
	CHAIN_BAD(c.state = 4, "star-9", 1);
	CHAIN_BAD(c.clean = 2, "star-9", 1);
	CHAIN_BAD(c.checkpoint = c.cut + 1, "star-9", 1); /* FENCED */
	CHAIN_BAD((c.state = CHAIN_SETTLED, c.checkpoint = c.cut + 1), "star-9", 1);
#undef CHAIN_BAD
	/* LIVE rows have no cut yet: a checkpoint above it is fine. */
	chain_default(&c);
	c.state = CHAIN_LIVE;
	c.cut = 0;
	assert_int_equal(chain_decode_of(&c, "star-9", 1), 0);
	/* Equal cursors are fine. */
	chain_default(&c);
	c.checkpoint = c.cut;
	assert_int_equal(chain_decode_of(&c, "star-9", 1), 0);
}

struct chain_walk {
	struct meta_chain rows[64];
	uint64_t vers[64];
	int n;
	int stop_at;
};

static int chain_walk_fn(void *arg, const struct meta_chain *c, uint64_t ver)
{
	struct chain_walk *w = arg;

	assert_true(w->n < 64);
	w->rows[w->n] = *c;
	w->vers[w->n] = ver;
	w->n++;
	return w->stop_at && w->n == w->stop_at ? 1 : 0;
}

static int chain_order(const struct meta_chain *a, const struct meta_chain *b)
{
	int c;

	if (a->cls != b->cls)
		return a->cls < b->cls ? -1 : 1;
	c = strcmp(a->star, b->star);
	if (c)
		return c;
	return a->epoch < b->epoch ? -1 : a->epoch > b->epoch;
}

static void test_rows_chain_list(void **state)
{
	struct fx *f = *state;
	struct chain_walk *w = calloc(1, sizeof(*w));
	static const char *const stars[] = { "zz", "a", "a-b", "b" };
	struct meta_chain c;
	uint64_t ver;
	int total = 0;

	assert_non_null(w);
	assert_int_equal(meta_chain_list(f->kv, chain_walk_fn, w), 0);
	assert_int_equal(w->n, 0);
	/* 2 classes x 4 stars x 5 epochs = 40 rows: more than a page. */
	for (int e = 0; e < 5; e++)
		for (unsigned cls = 0; cls < NV_CLASS_COUNT; cls++)
			for (int s = 0; s < 4; s++) {
				assert_int_equal(meta_chain_mint(f->kv, cls, stars[s], 1, &c, &ver),
						 0);
				total++;
			}
	/* Rows of other spaces around it must not show. */
	assert_int_equal(meta_bucket_create(f->kv, "b", 0, NULL, NULL), 0);
	put_ref(f->kv, 1, 0, 10, 0, 10, 0);

	assert_int_equal(meta_chain_list(f->kv, chain_walk_fn, w), 0);
	assert_int_equal(w->n, total);
	for (int i = 1; i < w->n; i++)
		assert_true(chain_order(&w->rows[i - 1], &w->rows[i]) < 0);
	assert_int_equal(w->rows[0].cls, 0);
	assert_string_equal(w->rows[0].star, "a");
	assert_int_equal(w->rows[0].epoch, 1);
	/* Versions are the rows' kv versions. */
	{
		uint64_t v;

		assert_int_equal(meta_chain_get(f->kv, w->rows[7].cls, w->rows[7].star,
						w->rows[7].epoch, &c, &v),
				 0);
		assert_int_equal(v, w->vers[7]);
	}
	w->n = 0;
	w->stop_at = 33;
	assert_int_equal(meta_chain_list(f->kv, chain_walk_fn, w), 0);
	assert_int_equal(w->n, 33);
	free(w);
}

/* ================================================================ markers */

static void marker_default(struct meta_marker *m, struct meta_marker_stream *ss)
{
	memset(m, 0, sizeof(*m));
	m->cls = NV_CLASS_STANDARD;
	strcpy(m->star, "s1");
	m->epoch = 4;
	m->first_slot = 10;
	m->end_slot = 14;
	m->birth_ns = 1000;
	m->ripe_ns = 2000;
	m->crossed = 1;
	m->nstreams = 3;
	m->streams = ss;
	ss[0] = (struct meta_marker_stream){ 3, 40, 400, 2000 };
	ss[1] = (struct meta_marker_stream){ 7, 0, 12, 2500 };
	ss[2] = (struct meta_marker_stream){ 900, 5, 0, 9000 };
}

/* The value of m as version v writes it (v1: no per-stream ripe_ns). */
static void raw_marker_v(struct nv_buf *b, const struct meta_marker *m, const char *star,
			 uint32_t count, int v)
{
	nv_buf_reset(b);
	assert_int_equal(nv_wr_u8(b, (uint8_t)v), 0);
	assert_int_equal(nv_wr_u8(b, m->cls), 0);
	assert_int_equal(nv_wr_bytes(b, star, (uint32_t)strlen(star)), 0);
	assert_int_equal(nv_wr_u64(b, m->epoch), 0);
	assert_int_equal(nv_wr_u64(b, m->first_slot), 0);
	assert_int_equal(nv_wr_u64(b, m->end_slot), 0);
	assert_int_equal(nv_wr_u64(b, m->birth_ns), 0);
	assert_int_equal(nv_wr_u64(b, m->ripe_ns), 0);
	assert_int_equal(nv_wr_u8(b, m->crossed), 0);
	assert_int_equal(nv_wr_u32(b, count), 0);
	for (uint32_t i = 0; i < m->nstreams; i++) {
		assert_int_equal(nv_wr_u64(b, m->streams[i].stream_id), 0);
		assert_int_equal(nv_wr_u64(b, m->streams[i].first_seq), 0);
		assert_int_equal(nv_wr_u64(b, m->streams[i].bytes), 0);
		if (v >= 2)
			assert_int_equal(nv_wr_u64(b, m->streams[i].ripe_ns), 0);
	}
}

static void raw_marker(struct nv_buf *b, const struct meta_marker *m, const char *star,
		       uint32_t count)
{
	raw_marker_v(b, m, star, count, 2);
}

static void test_rows_marker_round_trip(void **state)
{
	struct fx *f = *state;
	struct meta_marker_stream ss[3];
	struct meta_marker m, d;
	struct nv_buf mine, theirs, k;
	struct kv_txn *t;

	marker_default(&m, ss);
	nv_buf_init(&mine, 4096);
	nv_buf_init(&theirs, 4096);
	raw_marker(&mine, &m, m.star, m.nstreams);
	assert_int_equal(meta_marker_encode(&m, &theirs), 0);
	assert_int_equal(theirs.len, mine.len);
	assert_memory_equal(theirs.ptr, mine.ptr, mine.len);
	assert_int_equal(meta_marker_decode(mine.ptr, mine.len, &d), 0);
	assert_int_equal(d.nstreams, 3);
	assert_memory_equal(d.streams, ss, sizeof(ss));
	assert_int_equal(d.first_slot, 10);
	assert_int_equal(d.end_slot, 14);
	assert_int_equal(d.birth_ns, 1000);
	assert_int_equal(d.ripe_ns, 2000);
	assert_int_equal(d.crossed, 1);
	assert_string_equal(d.star, "s1");
	meta_marker_clear(&d);

	/* Version 1 (no per-stream ripening): each stream takes the
	 * marker's. */
	raw_marker_v(&mine, &m, m.star, m.nstreams, 1);
	assert_int_equal(meta_marker_decode(mine.ptr, mine.len, &d), 0);
	assert_int_equal(d.nstreams, 3);
	for (uint32_t i = 0; i < 3; i++) {
		assert_int_equal(d.streams[i].stream_id, ss[i].stream_id);
		assert_int_equal(d.streams[i].ripe_ns, 2000);
	}
	meta_marker_clear(&d);

	/* More streams than a value can hold: refused, never written. */
	m.nstreams = META_MARKER_STREAMS_MAX + 1;
	assert_int_equal(meta_marker_encode(&m, &theirs), -E2BIG);
	marker_default(&m, ss);
	assert_int_equal(meta_marker_encode(&m, &theirs), 0);

	/* A marker with no streams is valid (a batch of deleted streams). */
	m.nstreams = 0;
	raw_marker(&mine, &m, m.star, 0);
	assert_int_equal(meta_marker_decode(mine.ptr, mine.len, &d), 0);
	assert_int_equal(d.nstreams, 0);
	meta_marker_clear(&d);

	/* Through the kv: put, then delete. */
	marker_default(&m, ss);
	t = kv_txn_new();
	assert_non_null(t);
	assert_int_equal(meta_marker_txn_put(t, &m), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	nv_buf_init(&k, KV_KEY_MAX);
	assert_int_equal(key_marker(&k, m.cls, m.star, m.epoch, m.first_slot), 0);
	assert_int_equal(kv_get(f->kv, k.ptr, k.len, &mine, NULL), 0);
	assert_int_equal(mine.len, theirs.len);
	assert_memory_equal(mine.ptr, theirs.ptr, mine.len);
	t = kv_txn_new();
	assert_non_null(t);
	assert_int_equal(meta_marker_txn_del(t, m.cls, m.star, m.epoch, m.first_slot), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	assert_int_equal(kv_get(f->kv, k.ptr, k.len, &mine, NULL), -ENOENT);
	nv_buf_free(&k);
	nv_buf_free(&mine);
	nv_buf_free(&theirs);
}

static int marker_decode_of(const struct meta_marker *m, const char *star, uint32_t count)
{
	struct nv_buf b;
	struct meta_marker d;
	int rc;

	nv_buf_init(&b, 4096);
	raw_marker(&b, m, star, count);
	rc = meta_marker_decode(b.ptr, b.len, &d);
	if (rc)
		assert_null(d.streams); /* nothing to leak */
	meta_marker_clear(&d);
	nv_buf_free(&b);
	return rc;
}

static void test_rows_marker_decode_hostile(void **state)
{
	struct meta_marker_stream ss[3];
	struct meta_marker m, d;
	struct nv_buf b;

	(void)state;
	marker_default(&m, ss);
	nv_buf_init(&b, 4096);
	raw_marker(&b, &m, m.star, m.nstreams);
	for (size_t n = 0; n < b.len; n++) {
		assert_int_equal(meta_marker_decode(b.ptr, n, &d), -EBADMSG);
		assert_null(d.streams);
	}
	assert_int_equal(nv_buf_add_u8(&b, 0), 0);
	assert_int_equal(meta_marker_decode(b.ptr, b.len, &d), -EBADMSG);
	assert_null(d.streams);
	nv_buf_free(&b);

#define MARKER_BAD(stmt, star, count)                                          \
	do {                                                                   \
		marker_default(&m, ss);                                        \
		stmt;                                                          \
		assert_int_equal(marker_decode_of(&m, (star), (count)), -EBADMSG); \
	} while (0)

	MARKER_BAD(m.cls = NV_CLASS_COUNT, "s1", 3);
	MARKER_BAD((void)0, "", 3);
	MARKER_BAD((void)0, "S1", 3);
	MARKER_BAD(m.end_slot = m.first_slot, "s1", 3);
	MARKER_BAD(m.end_slot = m.first_slot - 1, "s1", 3);
	MARKER_BAD(m.crossed = 2, "s1", 3);
	MARKER_BAD((void)0, "s1", 2);
	MARKER_BAD((void)0, "s1", 4);
	MARKER_BAD((void)0, "s1", UINT32_MAX);
	MARKER_BAD(ss[1].stream_id = ss[0].stream_id, "s1", 3);  /* duplicate */
	MARKER_BAD(ss[2].stream_id = ss[1].stream_id - 1, "s1", 3); /* descending */
#undef MARKER_BAD
	marker_default(&m, ss);
	assert_int_equal(marker_decode_of(&m, "s1", 3), 0);
}

struct marker_walk {
	uint64_t firsts[128];
	uint64_t epochs[128];
	int n;
};

static int marker_walk_fn(void *arg, const struct meta_marker *m)
{
	struct marker_walk *w = arg;

	assert_true(w->n < 128);
	w->firsts[w->n] = m->first_slot;
	w->epochs[w->n] = m->epoch;
	w->n++;
	return 0;
}

static void put_marker(struct kv *kv, unsigned cls, const char *star, uint64_t epoch,
		       uint64_t first, uint64_t end)
{
	struct meta_marker_stream ss[3];
	struct meta_marker m;
	struct kv_txn *t = kv_txn_new();

	assert_non_null(t);
	marker_default(&m, ss);
	m.cls = (uint8_t)cls;
	strcpy(m.star, star);
	m.epoch = epoch;
	m.first_slot = first;
	m.end_slot = end;
	assert_int_equal(meta_marker_txn_put(t, &m), 0);
	assert_int_equal(kv_txn_commit(kv, t, NULL), 0);
	kv_txn_free(t);
}

static void test_rows_marker_list_order(void **state)
{
	struct fx *f = *state;
	struct marker_walk *w = calloc(1, sizeof(*w));
	const int N = 40; /* more than two pages of 16 */

	assert_non_null(w);
	/* Written out of order, with slot numbers that are not contiguous
	 * and cross byte boundaries of their big-endian encoding. */
	for (int i = N - 1; i >= 0; i--) {
		uint64_t first = (uint64_t)i * 37 + (i > 20 ? 300 : 0);

		put_marker(f->kv, 0, "s1", 2, first, first + 3);
	}
	/* Neighbouring chains. */
	put_marker(f->kv, 0, "s1", 1, 0, 5);
	put_marker(f->kv, 0, "s1", 3, 0, 5);
	put_marker(f->kv, 1, "s1", 2, 0, 5);
	put_marker(f->kv, 0, "s10", 2, 0, 5);
	put_marker(f->kv, 0, "s", 2, 0, 5);

	assert_int_equal(meta_marker_list(f->kv, 0, "s1", 2, marker_walk_fn, w), 0);
	assert_int_equal(w->n, N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(w->epochs[i], 2);
		assert_int_equal(w->firsts[i], (uint64_t)i * 37 + (i > 20 ? 300 : 0));
	}
	w->n = 0;
	assert_int_equal(meta_marker_list(f->kv, 0, "s1", 9, marker_walk_fn, w), 0);
	assert_int_equal(w->n, 0);
	w->n = 0;
	assert_int_equal(meta_marker_list(f->kv, 1, "s1", 2, marker_walk_fn, w), 0);
	assert_int_equal(w->n, 1);
	free(w);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_rows_bucket_create_get_dup),
		T(test_rows_bucket_list_order),
		T(test_rows_bucket_delete),
		T(test_rows_stream_create_lookup),
		T(test_rows_stream_ids_never_reused),
		T(test_rows_stream_tombstone_hides_name),
		T(test_rows_stream_list_paging),
		T(test_rows_stream_set_class),
		T(test_rows_stream_set_trim_never_backwards),
		T(test_rows_owners),
		T(test_rows_stream_durable),
		T(test_rows_stream_rename),
		T(test_rows_stream_rename_resolved),
		T(test_rows_stream_rename_vacant_taken),
		cmocka_unit_test(test_rows_stream_codec_hostile),
		cmocka_unit_test(test_rows_ref_round_trip),
		cmocka_unit_test(test_rows_ref_decode_truncations),
		cmocka_unit_test(test_rows_ref_decode_hostile),
		T(test_rows_ref_floor_boundaries),
		T(test_rows_ref_settled_end),
		T(test_rows_ref_hints),
		T(test_rows_ref_floor_windows),
		T(test_rows_ref_byte_index_same_value),
		T(test_rows_ref_empty_ref_shares_byte_key),
		T(test_rows_ref_list_paging),
		T(test_rows_ref_window_byte),
		T(test_rows_chain_mint),
		T(test_rows_chain_cas_conflict),
		cmocka_unit_test(test_rows_chain_decode_hostile),
		T(test_rows_chain_list),
		T(test_rows_marker_round_trip),
		cmocka_unit_test(test_rows_marker_decode_hostile),
		T(test_rows_marker_list_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
