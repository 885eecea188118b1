/*
 * test_stream.c - unit tests of engine/stream.c: the stream table, the
 * pend ring (the stream's slice of the flight index) and stream_load().
 *
 * What is pinned (stream.h): the table finds what was inserted with a
 * new reference, keeps the first of two streams with one id, grows past
 * many doublings, visits every stream once, and loses a stream exactly
 * when its last reference goes; the pend ring keeps seq order across
 * wrap-around and growth, pops whole runs only, and its two binary
 * searches (by seq and by byte) answer at every boundary: before the
 * first run, at a run's first and last position, in a gap between runs,
 * at and past the end; stream_load() builds an empty stream from its row
 * and returns the loaded one on a second call (over the engine fixture's
 * metastore, tests/unit/engine_fixture.h).
 */
#include "config.h"
#include "engine/stream.h"
#include "meta/kv.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "tests/unit/engine_fixture.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static struct nv_stream *mk(uint64_t id)
{
	struct nv_stream *s = stream_alloc();

	assert_non_null(s);
	s->id = id;
	return s;
}

/* ------------------------------------------------------------ table */

static void test_stream_table_add_find_remove(void **state)
{
	struct stream_table *t = stream_table_new();
	struct nv_stream *a, *b, *x;

	(void)state;
	assert_non_null(t);
	assert_null(stream_table_find(t, 7));
	a = stream_table_insert(t, mk(7));
	assert_non_null(a);
	assert_ptr_equal(a->table, t);
	assert_int_equal(stream_table_count(t), 1);
	/* find takes a reference. */
	x = stream_table_find(t, 7);
	assert_ptr_equal(x, a);
	assert_int_equal(atomic_load(&a->refs), 2);
	stream_put(x);
	/* A second stream with the same id: the first one stays (and gains
	 * a reference); the newcomer is freed. */
	b = stream_table_insert(t, mk(7));
	assert_ptr_equal(b, a);
	assert_int_equal(atomic_load(&a->refs), 2);
	assert_int_equal(stream_table_count(t), 1);
	stream_put(b);
	/* The last reference removes it from the table. */
	stream_put(a);
	assert_int_equal(stream_table_count(t), 0);
	assert_null(stream_table_find(t, 7));
	/* A stream outside any table is freed by its last put. */
	stream_put(mk(8));
	stream_put(NULL);
	stream_table_free(t);
}

/* A load that read a stream's positions before an instance of it left
 * the table must not insert them (they may predate records that
 * instance committed): stream_table_insert_since() says stale, unless
 * an instance is there now (then that one is used). */
static void test_stream_table_insert_since(void **state)
{
	struct stream_table *t = stream_table_new();
	uint64_t gen = stream_table_removals(t);
	struct nv_stream *a, *b;

	(void)state;
	a = stream_table_insert_since(t, mk(7), gen);
	assert_non_null(a);
	assert_ptr_not_equal(a, STREAM_TABLE_STALE);
	/* Still there: a stale snapshot gets the live instance. */
	stream_put(stream_table_insert_since(t, mk(9), gen)); /* another id */
	assert_int_equal(stream_table_removals(t), gen + 1);
	b = stream_table_insert_since(t, mk(7), gen);
	assert_ptr_equal(b, a);
	stream_put(b);
	stream_put(a); /* gone from the table */
	assert_int_equal(stream_table_removals(t), gen + 2);
	assert_ptr_equal(stream_table_insert_since(t, mk(7), gen + 1), STREAM_TABLE_STALE);
	assert_int_equal(stream_table_count(t), 0);
	a = stream_table_insert_since(t, mk(7), stream_table_removals(t));
	assert_non_null(a);
	assert_ptr_not_equal(a, STREAM_TABLE_STALE);
	assert_int_equal(stream_table_count(t), 1);
	stream_put(a);
	stream_table_free(t);
}

struct each_arg {
	uint8_t *seen;
	size_t n;
};

static void each_fn(void *arg, struct nv_stream *s)
{
	struct each_arg *a = arg;

	assert_true(s->id >= 1 && s->id <= a->n);
	/* The visit's own reference on top of the test's. */
	assert_true(atomic_load(&s->refs) >= 2);
	a->seen[s->id - 1]++;
}

static void test_stream_table_grow_and_each(void **state)
{
	enum { N = 5000 };
	struct stream_table *t = stream_table_new();
	static struct nv_stream *all[N];
	static uint8_t seen[N];
	struct each_arg ea = { seen, N };

	(void)state;
	assert_non_null(t);
	for (uint64_t i = 0; i < N; i++) {
		all[i] = stream_table_insert(t, mk(i + 1));
		assert_non_null(all[i]);
	}
	assert_int_equal(stream_table_count(t), N);
	for (uint64_t i = 0; i < N; i++) {
		struct nv_stream *x = stream_table_find(t, i + 1);

		assert_ptr_equal(x, all[i]);
		stream_put(x);
	}
	assert_null(stream_table_find(t, N + 1));
	memset(seen, 0, sizeof(seen));
	stream_table_each(t, each_fn, &ea);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(seen[i], 1);
	/* Drop every other one. */
	for (uint64_t i = 0; i < N; i += 2)
		stream_put(all[i]);
	assert_int_equal(stream_table_count(t), N / 2);
	for (uint64_t i = 0; i < N; i++) {
		struct nv_stream *x = stream_table_find(t, i + 1);

		if (i % 2 == 0) {
			assert_null(x);
		} else {
			assert_ptr_equal(x, all[i]);
			stream_put(x);
		}
	}
	/* The table frees what the layer above never released. */
	stream_table_free(t);
}

/* ------------------------------------------------------------ pend ring */

/* Run k: seqs [10 + 4k, 14 + 4k), bytes [1000 + 100k, 1100 + 100k). */
static struct stream_pend run(uint64_t k)
{
	return (struct stream_pend){ .slot = k, .first_seq = 10 + 4 * k, .nrec = 4,
				     .first_byte = 1000 + 100 * k, .nbytes = 100 };
}

static void push(struct nv_stream *s, struct stream_pend p)
{
	pthread_mutex_lock(&s->lock);
	assert_int_equal(stream_pend_push(s, &p), 0);
	pthread_mutex_unlock(&s->lock);
}

static void pop_below(struct nv_stream *s, uint64_t end_seq)
{
	pthread_mutex_lock(&s->lock);
	stream_pend_pop_below(s, end_seq);
	pthread_mutex_unlock(&s->lock);
}

/* The slot of the run holding seq (or byte), or -1 for -ENOENT. */
static int64_t at_seq(struct nv_stream *s, uint64_t seq)
{
	struct stream_pend p;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = stream_pend_find_seq(s, seq, &p);
	pthread_mutex_unlock(&s->lock);
	if (rc) {
		assert_int_equal(rc, -ENOENT);
		return -1;
	}
	assert_true(p.first_seq <= seq && seq < p.first_seq + p.nrec);
	return (int64_t)p.slot;
}

static int64_t at_byte(struct nv_stream *s, uint64_t byte)
{
	struct stream_pend p;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = stream_pend_find_byte(s, byte, &p);
	pthread_mutex_unlock(&s->lock);
	if (rc) {
		assert_int_equal(rc, -ENOENT);
		return -1;
	}
	assert_true(p.first_byte <= byte && byte < p.first_byte + p.nbytes);
	return (int64_t)p.slot;
}

/* Runs [k0, k1) are in the ring: check every boundary of both keys. */
static void expect_runs(struct nv_stream *s, uint64_t k0, uint64_t k1)
{
	assert_int_equal(s->pend_n, k1 - k0);
	assert_int_equal(at_seq(s, 0), -1);
	assert_int_equal(at_byte(s, 0), -1);
	if (k0 == k1)
		return;
	assert_int_equal(at_seq(s, run(k0).first_seq - 1), -1);
	assert_int_equal(at_byte(s, run(k0).first_byte - 1), -1);
	for (uint64_t k = k0; k < k1; k++) {
		struct stream_pend p = run(k);

		assert_int_equal(at_seq(s, p.first_seq), (int64_t)k);
		assert_int_equal(at_seq(s, p.first_seq + p.nrec - 1), (int64_t)k);
		assert_int_equal(at_byte(s, p.first_byte), (int64_t)k);
		assert_int_equal(at_byte(s, p.first_byte + p.nbytes - 1), (int64_t)k);
	}
	assert_int_equal(at_seq(s, run(k1).first_seq), -1);
	assert_int_equal(at_byte(s, run(k1).first_byte), -1);
	assert_int_equal(at_seq(s, UINT64_MAX), -1);
	assert_int_equal(at_byte(s, UINT64_MAX), -1);
}

static void test_stream_pend_push_pop_wrap(void **state)
{
	struct nv_stream *s = mk(1);

	(void)state;
	expect_runs(s, 0, 0);
	for (uint64_t k = 0; k < 8; k++)
		push(s, run(k));
	assert_int_equal(s->pend_cap, 8);
	expect_runs(s, 0, 8);
	/* Popping below the middle of run 5 pops runs 0..4 only. */
	pop_below(s, run(5).first_seq + 2);
	expect_runs(s, 5, 8);
	assert_int_equal(s->pend_head, 5);
	/* Five more: the ring wraps without growing. */
	for (uint64_t k = 8; k < 13; k++)
		push(s, run(k));
	assert_int_equal(s->pend_cap, 8);
	assert_true(s->pend_head + s->pend_n > s->pend_cap);
	expect_runs(s, 5, 13);
	/* One more grows a wrapped ring: order is kept. */
	push(s, run(13));
	assert_int_equal(s->pend_cap, 16);
	expect_runs(s, 5, 14);
	/* Pop exactly at a run's end, then everything. */
	pop_below(s, run(9).first_seq);
	expect_runs(s, 9, 14);
	pop_below(s, UINT64_MAX);
	expect_runs(s, 14, 14);
	stream_put(s);
}

static void test_stream_pend_search_gaps(void **state)
{
	struct nv_stream *s = mk(1);
	struct stream_pend a = run(0), b = run(3);

	(void)state;
	/* A lone run: its ends. */
	push(s, a);
	assert_int_equal(at_seq(s, a.first_seq), 0);
	assert_int_equal(at_seq(s, a.first_seq + a.nrec), -1);
	assert_int_equal(at_byte(s, a.first_byte + a.nbytes - 1), 0);
	assert_int_equal(at_byte(s, a.first_byte + a.nbytes), -1);
	/* Two runs with a gap between them (runs 1 and 2 lost to ENOMEM):
	 * the gap answers -ENOENT by either key. */
	push(s, b);
	assert_int_equal(at_seq(s, a.first_seq + a.nrec), -1);
	assert_int_equal(at_seq(s, b.first_seq - 1), -1);
	assert_int_equal(at_seq(s, b.first_seq), 3);
	assert_int_equal(at_byte(s, a.first_byte + a.nbytes), -1);
	assert_int_equal(at_byte(s, b.first_byte - 1), -1);
	assert_int_equal(at_byte(s, b.first_byte), 3);
	assert_int_equal(at_byte(s, b.first_byte + b.nbytes), -1);
	stream_put(s);
}

/* ------------------------------------------------------------ loading */

static void test_stream_load_from_row(void **state)
{
	struct efx *f = *state;
	struct meta_stream ms;
	struct nv_stream *s, *again;

	assert_int_equal(meta_stream_create(f->kv, EFX_BUCKET, "s", -1, 12345, NULL, &ms), 0);
	assert_int_equal(stream_load(f->table, f->kv, &ms, &s), 0);
	assert_int_equal(s->id, ms.id);
	assert_string_equal(s->bucket, EFX_BUCKET);
	assert_string_equal(s->name, "s");
	assert_int_equal(s->cls, NV_CLASS_STANDARD);
	assert_false(s->deleted);
	assert_int_equal(s->next_seq, 0);
	assert_int_equal(stream_acked_byte(s), 0);
	assert_int_equal(s->open_flight_gen, UINT64_MAX);
	assert_int_equal(atomic_load(&s->mtime_ns), 12345);
	/* Loaded once: the second load is a find. */
	assert_int_equal(stream_load(f->table, f->kv, &ms, &again), 0);
	assert_ptr_equal(again, s);
	assert_int_equal(stream_table_count(f->table), 1);
	stream_put(again);
	stream_put(s);
	assert_int_equal(stream_table_count(f->table), 0);
}

/* mtime of a loaded stream: its last ref's max_ts, the newest record's
 * timestamp (issue 12: it was read after meta_ref_clear() zeroed the
 * ref, so every reload showed the creation time); owner and mode from
 * the row. */
static void test_stream_load_mtime_and_owner(void **state)
{
	struct efx *f = *state;
	struct meta_owner own = { 1000, 100, 0600 };
	struct meta_stream ms;
	struct nv_stream *s;
	struct meta_ref r;
	struct kv_txn *t = kv_txn_new();

	assert_non_null(t);
	assert_int_equal(meta_stream_create(f->kv, EFX_BUCKET, "m", -1, 12345, &own, &ms), 0);
	meta_ref_init(&r);
	r.stream_id = ms.id;
	r.kind = META_REF_SPAN;
	r.end_seq = 3;
	r.end_byte = 30;
	r.max_ts = 777777;
	r.cls = NV_CLASS_STANDARD;
	strcpy(r.star, "s1");
	r.epoch = 1;
	{
		struct meta_ref_slot sl = { 0, 0, 0, 0, 96 };

		assert_int_equal(meta_ref_add_slot(&r, &sl), 0);
	}
	assert_int_equal(meta_ref_txn_put(t, &r), 0);
	assert_int_equal(kv_txn_commit(f->kv, t, NULL), 0);
	kv_txn_free(t);
	meta_ref_clear(&r);

	assert_int_equal(stream_load(f->table, f->kv, &ms, &s), 0);
	assert_int_equal(stream_acked_byte(s), 30);
	assert_int_equal(atomic_load(&s->mtime_ns), 777777);
	assert_int_equal(s->last_ts, 777777); /* appends continue from it */
	assert_int_equal(atomic_load(&s->uid), 1000);
	assert_int_equal(atomic_load(&s->gid), 100);
	assert_int_equal(atomic_load(&s->mode), 0600);
	stream_put(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_table_add_find_remove),
		cmocka_unit_test(test_stream_table_insert_since),
		cmocka_unit_test(test_stream_table_grow_and_each),
		cmocka_unit_test(test_stream_pend_push_pop_wrap),
		cmocka_unit_test(test_stream_pend_search_gaps),
		cmocka_unit_test_setup_teardown(test_stream_load_from_row, efx_setup, efx_teardown),
		cmocka_unit_test_setup_teardown(test_stream_load_mtime_and_owner, efx_setup,
						efx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
