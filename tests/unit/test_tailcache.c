/*
 * test_tailcache.c - unit tests of engine/tailcache.c (and the run
 * buffer copy of engine/flight.c it serves reads with).
 *
 * Flights are built by hand exactly as the chain builds them
 * (flight_new, flight_add, flight_seal) for hand-made streams, and every
 * byte a read returns is compared with a model of the stream kept by the
 * test.  Budgets are derived from the rbuf_mem() of the sealed runs, so
 * the eviction model is exact.
 */
#include "config.h"
#include "engine/flight.h"
#include "engine/stats.h"
#include "engine/stream.h"
#include "engine/tailcache.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MODEL_MAX (256u << 10)
#define RECS_MAX 4096

/* A hand-made stream and a model of its bytes. */
struct hs {
	struct nv_stream *s;
	uint64_t seq, byte;   /* next record */
	uint64_t base;        /* stream offset of model[0] */
	uint8_t *model;       /* bytes [base, byte) */
	uint64_t rec_byte[RECS_MAX]; /* start offset of record seq - first */
	uint32_t rec_len[RECS_MAX];
	uint64_t first_seq;
};

static struct hs *hs_new(uint64_t id, uint64_t first_seq, uint64_t first_byte)
{
	struct hs *h = calloc(1, sizeof(*h));

	assert_non_null(h);
	h->s = stream_alloc();
	assert_non_null(h->s);
	h->s->id = id;
	h->s->open_flight_gen = UINT64_MAX;
	h->seq = h->first_seq = first_seq;
	h->byte = h->base = first_byte;
	h->model = malloc(MODEL_MAX);
	assert_non_null(h->model);
	return h;
}

static void hs_free(struct hs *h)
{
	stream_put(h->s);
	free(h->model);
	free(h);
}

static uint64_t gen_next;

static struct flight *fl_new(void)
{
	struct flight *f = flight_new(gen_next++, 0, 1);

	assert_non_null(f);
	return f;
}

/* Append one record of len bytes to h in flight f. */
static void add(struct flight *f, struct hs *h, uint32_t len)
{
	uint8_t body[8192];
	uint64_t i = h->seq - h->first_seq;

	assert_true(len <= sizeof(body));
	assert_true(i < RECS_MAX);
	assert_true(h->byte - h->base + len <= MODEL_MAX);
	for (uint32_t k = 0; k < len; k++)
		body[k] = (uint8_t)(h->s->id * 31 + h->seq * 7 + k * 13);
	assert_int_equal(flight_add(f, h->s, h->seq, h->byte, 1000 + h->seq, body, len, NULL,
				    NULL),
			 0);
	memcpy(h->model + (h->byte - h->base), body, len);
	h->rec_byte[i] = h->byte;
	h->rec_len[i] = len;
	h->seq++;
	h->byte += len;
}

/* The run of stream id in a sealed flight. */
static struct run_buf *run_of(struct flight *f, uint64_t id)
{
	for (uint32_t i = 0; i < f->nruns; i++)
		if (f->runs[i].stream->id == id)
			return f->runs[i].rb;
	fail_msg("no run of stream %llu", (unsigned long long)id);
	return NULL;
}

static uint64_t flight_mem(struct flight *f)
{
	uint64_t m = 0;

	for (uint32_t i = 0; i < f->nruns; i++)
		m += rbuf_mem(f->runs[i].rb);
	return m;
}

static void fl_done(struct flight *f)
{
	flight_complete(f, 0);
	flight_free(f);
}

/* Read at off and check against the model: expect exactly want bytes. */
static void expect_read(struct tailcache *tc, struct hs *h, uint64_t off, size_t len,
			uint32_t max_recs, size_t want)
{
	uint8_t *buf = malloc(len ? len : 1);
	size_t n;

	assert_non_null(buf);
	n = tailcache_read(tc, h->s->id, off, buf, len, max_recs);
	if (n != want)
		fail_msg("stream %llu off %llu len %zu: got %zu bytes, want %zu",
			 (unsigned long long)h->s->id, (unsigned long long)off, len, n, want);
	if (n)
		assert_memory_equal(buf, h->model + (off - h->base), n);
	free(buf);
}

static void test_tailcache_hits_and_misses(void **state)
{
	static const uint32_t lens1[] = { 10, 1, 300, 7, 50 };
	struct nv_stats st;
	struct tailcache *tc;
	struct hs *a, *b;
	struct flight *f;
	uint64_t end1;

	(void)state;
	memset(&st, 0, sizeof(st));
	tc = tailcache_new(1u << 20, &st);
	assert_non_null(tc);
	a = hs_new(1, 0, 0);
	b = hs_new(2, 40, 1000); /* a stream with history before the cache */
	f = fl_new();
	/* Interleaved admission, as from concurrent writers. */
	for (int i = 0; i < 5; i++) {
		add(f, a, lens1[i]);
		add(f, b, 20 + (uint32_t)i);
	}
	flight_seal(f, 0);
	tailcache_insert_flight(tc, f);
	assert_int_equal(tailcache_bytes(tc), flight_mem(f));
	fl_done(f);
	end1 = a->byte;
	assert_int_equal(end1, 368);

	/* Every record boundary and every byte inside: the rest of the run. */
	for (uint64_t off = 0; off < end1; off++)
		expect_read(tc, a, off, 4096, 1000, (size_t)(end1 - off));
	for (uint64_t off = 1000; off < b->byte; off++)
		expect_read(tc, b, off, 4096, 1000, (size_t)(b->byte - off));
	/* Short buffers get exactly what fits. */
	expect_read(tc, a, 5, 3, 1000, 3);
	expect_read(tc, a, 10, 1, 1000, 1);
	expect_read(tc, a, 11, 301, 1000, 301);
	/* Misses: at and past the end, before the first cached byte, and
	 * for a stream with nothing cached. */
	expect_read(tc, a, end1, 4096, 1000, 0);
	expect_read(tc, a, end1 + 100, 4096, 1000, 0);
	expect_read(tc, b, 999, 4096, 1000, 0);
	expect_read(tc, b, 0, 4096, 1000, 0);
	{
		uint8_t x;

		assert_int_equal(tailcache_read(tc, 3, 0, &x, 1, 1000), 0);
		assert_int_equal(tailcache_read(tc, 0, 0, &x, 1, 1000), 0);
	}
	/* Hits are counted, misses are not. */
	assert_int_equal(NV_STAT_GET(&st, tail_cache_hits),
			 end1 + (b->byte - 1000) + 3);

	tailcache_free(tc);
	hs_free(a);
	hs_free(b);
}

static void test_tailcache_read_stays_in_one_run(void **state)
{
	struct tailcache *tc;
	struct hs *a;
	struct flight *f1, *f2;
	uint64_t mid;

	(void)state;
	tc = tailcache_new(1u << 20, NULL);
	assert_non_null(tc);
	a = hs_new(5, 0, 0);
	f1 = fl_new();
	add(f1, a, 100);
	add(f1, a, 100);
	flight_seal(f1, 0);
	mid = a->byte;
	f2 = fl_new();
	add(f2, a, 50);
	add(f2, a, 60);
	flight_seal(f2, 1);
	tailcache_insert_flight(tc, f1);
	tailcache_insert_flight(tc, f2);
	fl_done(f1);
	fl_done(f2);

	/* A read never crosses into the next run: the caller asks again. */
	expect_read(tc, a, 150, 4096, 1000, (size_t)(mid - 150));
	expect_read(tc, a, mid - 1, 4096, 1000, 1);
	expect_read(tc, a, mid, 4096, 1000, (size_t)(a->byte - mid));
	expect_read(tc, a, mid + 49, 4096, 1000, (size_t)(a->byte - mid - 49));
	expect_read(tc, a, mid + 50, 4096, 1000, 60);
	tailcache_free(tc);
	hs_free(a);
}

/* A model of the cache's FIFO for the eviction test. */
struct fifo_item {
	uint64_t stream;
	uint64_t first_byte, end_byte;
	uint64_t mem;
	bool evicted;
};

static void test_tailcache_evicts_oldest_first(void **state)
{
	struct nv_stats st;
	struct tailcache *tc;
	struct hs *h[2];
	struct fifo_item items[64];
	int nitems = 0;
	uint64_t budget, held = 0, evicted = 0;

	(void)state;
	memset(&st, 0, sizeof(st));
	h[0] = hs_new(11, 0, 0);
	h[1] = hs_new(12, 0, 0);

	/* Measure one run to size the budget: about three and a half runs. */
	{
		struct hs *probe = hs_new(99, 0, 0);
		struct flight *f = fl_new();

		for (int k = 0; k < 4; k++)
			add(f, probe, 1000);
		flight_seal(f, 0);
		budget = flight_mem(f) * 7 / 2;
		fl_done(f);
		hs_free(probe);
	}
	tc = tailcache_new(budget, &st);
	assert_non_null(tc);

	for (int i = 0; i < 12; i++) {
		struct flight *f = fl_new();
		int nr = (i % 3 == 2) ? 2 : 1; /* some flights carry both streams */

		for (int r = 0; r < nr; r++) {
			struct hs *x = h[(i + r) % 2];

			for (int k = 0; k < 4; k++)
				add(f, x, 900 + (uint32_t)(i * 10 + k));
		}
		flight_seal(f, (uint64_t)i);
		/* Model: runs are inserted in sorted stream order; each evicts
		 * the globally oldest until it fits. */
		for (uint32_t r = 0; r < f->nruns; r++) {
			struct run_buf *rb = f->runs[r].rb;
			uint64_t m = rbuf_mem(rb);

			for (int k = 0; k < nitems && held + m > budget; k++) {
				if (items[k].evicted)
					continue;
				items[k].evicted = true;
				held -= items[k].mem;
				evicted += items[k].mem;
			}
			items[nitems].stream = rb->stream_id;
			items[nitems].first_byte = rb->first_byte;
			items[nitems].end_byte = rb->first_byte + rbuf_body_bytes(rb);
			items[nitems].mem = m;
			items[nitems].evicted = false;
			nitems++;
			held += m;
		}
		tailcache_insert_flight(tc, f);
		fl_done(f);
		/* Invariant 1 after every insert, and the model agrees. */
		assert_true(tailcache_bytes(tc) <= budget);
		assert_int_equal(tailcache_bytes(tc), held);
		assert_int_equal(NV_STAT_GET(&st, tail_cache_evicted), evicted);
	}
	assert_true(evicted > 0);

	/* Survivors hit, evicted runs miss; per stream the evicted runs are
	 * a prefix. */
	for (int k = 0; k < nitems; k++) {
		struct hs *x = items[k].stream == 11 ? h[0] : h[1];
		uint64_t off = items[k].first_byte + 1;

		if (items[k].evicted)
			expect_read(tc, x, off, 1 << 16, 1000, 0);
		else
			expect_read(tc, x, off, 1 << 16, 1000,
				    (size_t)(items[k].end_byte - off));
	}
	for (int k = 1; k < nitems; k++)
		if (items[k].evicted)
			for (int j = 0; j < k; j++)
				assert_true(items[j].evicted); /* oldest first, globally */
	assert_int_equal(NV_STAT_GET(&st, tail_cache_skipped), 0);
	tailcache_free(tc);
	hs_free(h[0]);
	hs_free(h[1]);
}

/* One insert that must evict more runs than the cache batches per unlock
 * (64): the budget holds and every old run is gone. */
static void test_tailcache_mass_eviction(void **state)
{
	struct nv_stats st;
	struct tailcache *tc;
	struct hs *h[300];
	struct hs *big;
	struct flight *f;
	uint64_t budget = 0, held;

	(void)state;
	memset(&st, 0, sizeof(st));
	big = hs_new(1000, 0, 0);
	f = fl_new();
	for (int k = 0; k < 60; k++)
		add(f, big, 1000);
	flight_seal(f, 999);
	budget = flight_mem(f); /* exactly the big flight */
	tc = tailcache_new(budget, &st);
	assert_non_null(tc);
	for (int i = 0; i < 300; i++) {
		struct flight *g = fl_new();

		h[i] = hs_new((uint64_t)i + 1, 0, 0);
		add(g, h[i], 10);
		flight_seal(g, (uint64_t)i);
		tailcache_insert_flight(tc, g);
		fl_done(g);
		assert_true(tailcache_bytes(tc) <= budget);
	}
	held = tailcache_bytes(tc);
	assert_true(held > 0);
	tailcache_insert_flight(tc, f);
	assert_int_equal(tailcache_bytes(tc), budget);
	assert_int_equal(NV_STAT_GET(&st, tail_cache_evicted), held);
	for (int i = 0; i < 300; i++)
		expect_read(tc, h[i], 0, 64, 1000, 0);
	expect_read(tc, big, 0, 1 << 17, 1000, 60000);
	fl_done(f);
	tailcache_free(tc);
	for (int i = 0; i < 300; i++)
		hs_free(h[i]);
	hs_free(big);
}

static void test_tailcache_skips_oversize_flight(void **state)
{
	struct nv_stats st;
	struct tailcache *tc, *zero;
	struct hs *a, *b;
	struct flight *small, *big, *fits;
	uint64_t budget, before;

	(void)state;
	memset(&st, 0, sizeof(st));
	a = hs_new(1, 0, 0);
	b = hs_new(2, 0, 0);
	small = fl_new();
	add(small, a, 100);
	flight_seal(small, 0);
	big = fl_new();
	for (int k = 0; k < 8; k++) {
		add(big, a, 1000);
		add(big, b, 1000);
	}
	flight_seal(big, 1);
	/* A budget that holds the small flight and either run of the big
	 * one alone, but not the big flight as a whole. */
	budget = flight_mem(big) - 1;
	assert_true(rbuf_mem(run_of(big, 1)) + flight_mem(small) <= budget);
	tc = tailcache_new(budget, &st);
	assert_non_null(tc);

	tailcache_insert_flight(tc, small);
	before = tailcache_bytes(tc);
	tailcache_insert_flight(tc, big);
	assert_int_equal(NV_STAT_GET(&st, tail_cache_skipped), 1);
	/* Nothing of it went in, and nothing was flushed for it. */
	assert_int_equal(tailcache_bytes(tc), before);
	assert_int_equal(NV_STAT_GET(&st, tail_cache_evicted), 0);
	expect_read(tc, a, 0, 4096, 1000, 100);
	expect_read(tc, a, 100, 4096, 1000, 0);
	expect_read(tc, b, 0, 4096, 1000, 0);

	/* A flight that fits is inserted, evicting as needed. */
	fits = fl_new();
	for (int k = 0; k < 8; k++)
		add(fits, b, 1000);
	flight_seal(fits, 2);
	tailcache_insert_flight(tc, fits);
	assert_int_equal(NV_STAT_GET(&st, tail_cache_skipped), 1);
	assert_true(tailcache_bytes(tc) <= budget);
	expect_read(tc, b, 8000, 4096, 1000, 4096);

	/* Budget 0: everything is skipped. */
	zero = tailcache_new(0, &st);
	assert_non_null(zero);
	tailcache_insert_flight(zero, small);
	assert_int_equal(NV_STAT_GET(&st, tail_cache_skipped), 2);
	assert_int_equal(tailcache_bytes(zero), 0);
	expect_read(zero, a, 0, 4096, 1000, 0);
	tailcache_free(zero);

	fl_done(small);
	fl_done(big);
	fl_done(fits);
	tailcache_free(tc);
	hs_free(a);
	hs_free(b);
}

static void test_tailcache_drop_stream(void **state)
{
	struct tailcache *tc;
	struct hs *a, *b;
	uint64_t bmem = 0;

	(void)state;
	tc = tailcache_new(1u << 20, NULL);
	assert_non_null(tc);
	a = hs_new(1, 0, 0);
	b = hs_new(2, 0, 0);
	for (int i = 0; i < 4; i++) {
		struct flight *f = fl_new();

		add(f, a, 100);
		add(f, b, 200);
		flight_seal(f, (uint64_t)i);
		bmem += rbuf_mem(run_of(f, 2));
		tailcache_insert_flight(tc, f);
		fl_done(f);
	}
	tailcache_drop_stream(tc, 1);
	assert_int_equal(tailcache_bytes(tc), bmem);
	for (uint64_t off = 0; off < a->byte; off += 50)
		expect_read(tc, a, off, 4096, 1000, 0);
	expect_read(tc, b, 0, 4096, 1000, 200);
	expect_read(tc, b, 799, 4096, 1000, 1);
	/* Again, and an unknown stream: no-ops. */
	tailcache_drop_stream(tc, 1);
	tailcache_drop_stream(tc, 77);
	assert_int_equal(tailcache_bytes(tc), bmem);
	/* The stream can be cached again afterwards. */
	{
		struct flight *f = fl_new();

		add(f, a, 10);
		flight_seal(f, 9);
		tailcache_insert_flight(tc, f);
		fl_done(f);
	}
	expect_read(tc, a, 400, 4096, 1000, 10);
	tailcache_drop_stream(tc, 2);
	tailcache_drop_stream(tc, 1);
	assert_int_equal(tailcache_bytes(tc), 0);
	tailcache_free(tc);
	hs_free(a);
	hs_free(b);
}

static void test_tailcache_max_recs(void **state)
{
	struct tailcache *tc;
	struct hs *a;
	struct flight *f;
	struct run_buf *rb;
	uint8_t buf[256];

	(void)state;
	tc = tailcache_new(1u << 20, NULL);
	assert_non_null(tc);
	a = hs_new(1, 0, 0);
	f = fl_new();
	for (int i = 0; i < 10; i++)
		add(f, a, 5);
	flight_seal(f, 0);
	tailcache_insert_flight(tc, f);

	/* From inside record 0: the rest of it counts as one record. */
	expect_read(tc, a, 2, sizeof(buf), 3, 3 + 5 + 5);
	expect_read(tc, a, 2, sizeof(buf), 1, 3);
	expect_read(tc, a, 0, sizeof(buf), 4, 20);
	expect_read(tc, a, 45, sizeof(buf), 4, 5);
	/* max_recs 0 copies nothing. */
	expect_read(tc, a, 0, sizeof(buf), 0, 0);
	/* len and max_recs together: the smaller wins. */
	expect_read(tc, a, 0, 7, 4, 7);

	/* rbuf_copy directly, same rules, and 0 outside the run. */
	rb = run_of(f, 1);
	assert_int_equal(rbuf_copy(rb, 7, buf, sizeof(buf), 2), 3 + 5);
	assert_memory_equal(buf, a->model + 7, 8);
	assert_int_equal(rbuf_copy(rb, 50, buf, sizeof(buf), 2), 0);
	assert_int_equal(rbuf_copy(rb, 49, buf, sizeof(buf), 1000), 1);
	fl_done(f);
	tailcache_free(tc);
	hs_free(a);
}

static void test_tailcache_zero_length_records(void **state)
{
	static const uint32_t lens[] = { 0, 5, 0, 0, 3, 0 };
	struct tailcache *tc;
	struct hs *a, *z;
	struct flight *f, *g;

	(void)state;
	tc = tailcache_new(1u << 20, NULL);
	assert_non_null(tc);
	a = hs_new(1, 0, 0);
	z = hs_new(2, 0, 0);
	f = fl_new();
	for (int i = 0; i < 6; i++)
		add(f, a, lens[i]);
	for (int i = 0; i < 4; i++)
		add(f, z, 0); /* a stream of only empty records */
	flight_seal(f, 0);
	tailcache_insert_flight(tc, f);
	fl_done(f);
	assert_int_equal(a->byte, 8);

	expect_read(tc, a, 0, 64, 1000, 8);
	/* The empty record at offset 0 is skipped, not served as a 0-byte hit. */
	expect_read(tc, a, 0, 64, 1, 5);
	expect_read(tc, a, 3, 64, 1000, 5);
	/* Offset 5 holds two empty records and then the 3-byte one. */
	expect_read(tc, a, 5, 64, 1, 3);
	expect_read(tc, a, 5, 64, 1000, 3);
	expect_read(tc, a, 7, 64, 1000, 1);
	expect_read(tc, a, 8, 64, 1000, 0);
	/* Nothing to read in a stream of empty records. */
	expect_read(tc, z, 0, 64, 1000, 0);

	/* A next run that starts where the empty tail ended. */
	g = fl_new();
	add(g, a, 0);
	add(g, a, 4);
	flight_seal(g, 1);
	tailcache_insert_flight(tc, g);
	fl_done(g);
	expect_read(tc, a, 8, 64, 1000, 4);
	expect_read(tc, a, 7, 64, 1000, 1);
	tailcache_free(tc);
	hs_free(a);
	hs_free(z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tailcache_hits_and_misses),
		cmocka_unit_test(test_tailcache_read_stays_in_one_run),
		cmocka_unit_test(test_tailcache_evicts_oldest_first),
		cmocka_unit_test(test_tailcache_mass_eviction),
		cmocka_unit_test(test_tailcache_skips_oversize_flight),
		cmocka_unit_test(test_tailcache_drop_stream),
		cmocka_unit_test(test_tailcache_max_recs),
		cmocka_unit_test(test_tailcache_zero_length_records),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
