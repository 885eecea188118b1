/*
 * test_gw_cache.c - unit tests for the Gateway's two caches of
 * --serve-plan: gw/footers.c (verified footer windows in the
 * --footer-cache-bytes pool) and gw/plancache.c (kept read plans).
 *
 * Pins gw/footers.h invariants 1 (found only by the same key, revision,
 * offset and length), 2 (every byte kept is taken from the pool; LRU
 * windows given back when the pool is full; shrink gives back for a
 * reader) and 3 (a get copies); gw/plancache.h invariants 1 (at most
 * max, LRU replaced; 0 keeps nothing), 2 (only a position inside an
 * entry, never near the expiry), 3 (drop forgets the stream's plans) and
 * 4 (a get copies, URLs too).
 */
#include "config.h"
#include "gw/footers.h"
#include "gw/plancache.h"
#include "gw/pool.h"
#include "src/base/clock.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ------------------------------------------------------------ footers */

static void test_footers_keyed_and_copied(void **state)
{
	struct gw_pool *pool = gw_pool_new("footer-cache", 1 << 20);
	struct gw_footers *fc = gw_footers_new(pool);
	struct gw_footers_stats st;
	char win[100], out[100];

	(void)state;
	assert_non_null(fc);
	memset(win, 'a', sizeof(win));
	assert_int_equal(gw_footers_get(fc, "k1", 0, 500, 100, out), -ENOENT);
	gw_footers_put(fc, "k1", 0, 500, win, 100);
	memset(out, 0, sizeof(out));
	assert_int_equal(gw_footers_get(fc, "k1", 0, 500, 100, out), 0);
	assert_memory_equal(out, win, sizeof(win));
	/* Invariant 1: another revision, offset, length or key is a miss. */
	assert_int_equal(gw_footers_get(fc, "k1", 1, 500, 100, out), -ENOENT);
	assert_int_equal(gw_footers_get(fc, "k1", 0, 400, 100, out), -ENOENT);
	assert_int_equal(gw_footers_get(fc, "k1", 0, 500, 99, out), -ENOENT);
	assert_int_equal(gw_footers_get(fc, "k2", 0, 500, 100, out), -ENOENT);
	/* The replaced revision is its own window, the old one untouched. */
	memset(win, 'b', sizeof(win));
	gw_footers_put(fc, "k1", 1, 500, win, 100);
	assert_int_equal(gw_footers_get(fc, "k1", 1, 500, 100, out), 0);
	assert_int_equal(out[0], 'b');
	assert_int_equal(gw_footers_get(fc, "k1", 0, 500, 100, out), 0);
	assert_int_equal(out[0], 'a');
	/* Invariant 3: the caller's window was copied at the put. */
	memset(win, 'c', sizeof(win));
	assert_int_equal(gw_footers_get(fc, "k1", 1, 500, 100, out), 0);
	assert_int_equal(out[99], 'b');
	/* A second put of a kept window keeps one. */
	gw_footers_put(fc, "k1", 1, 500, win, 100);
	gw_footers_stats(fc, &st);
	assert_int_equal(st.windows, 2);
	assert_int_equal(st.hits, 4);
	assert_int_equal(st.misses, 5);
	/* Invariant 2: what is kept is taken from the pool, key included. */
	assert_int_equal(st.bytes, 2 * (100 + sizeof("k1")));
	assert_int_equal(gw_pool_used(pool), st.bytes);
	gw_footers_free(fc);
	assert_int_equal(gw_pool_used(pool), 0);
	gw_pool_free(pool);
}

static void test_footers_lru_in_the_pool(void **state)
{
	/* Room for three windows of 1000 (+ a 3-byte key) and a bit. */
	struct gw_pool *pool = gw_pool_new("footer-cache", 3500);
	struct gw_footers *fc = gw_footers_new(pool);
	struct gw_footers_stats st;
	char win[2000], out[2000], key[8];

	(void)state;
	memset(win, 'w', sizeof(win));
	for (int i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		gw_footers_put(fc, key, 0, 0, win, 1000);
	}
	assert_int_equal(gw_pool_used(pool), 3 * 1003);
	/* k0 used most recently: k1 is the least recently used. */
	assert_int_equal(gw_footers_get(fc, "k0", 0, 0, 1000, out), 0);
	gw_footers_put(fc, "k3", 0, 0, win, 1000);
	assert_int_equal(gw_footers_get(fc, "k1", 0, 0, 1000, out), -ENOENT);
	assert_int_equal(gw_footers_get(fc, "k0", 0, 0, 1000, out), 0);
	assert_int_equal(gw_footers_get(fc, "k2", 0, 0, 1000, out), 0);
	assert_int_equal(gw_footers_get(fc, "k3", 0, 0, 1000, out), 0);
	gw_footers_stats(fc, &st);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(gw_pool_used(pool), 3 * 1003);
	/* A reader's own take meets a full pool: shrink gives back LRU first. */
	assert_int_equal(gw_pool_take(pool, 1500, 0), -EAGAIN);
	assert_true(gw_footers_shrink(fc, 1500) >= 1500);
	assert_int_equal(gw_pool_take(pool, 1500, 0), 0);
	assert_int_equal(gw_footers_get(fc, "k0", 0, 0, 1000, out), -ENOENT); /* the LRU two */
	assert_int_equal(gw_footers_get(fc, "k2", 0, 0, 1000, out), -ENOENT);
	assert_int_equal(gw_footers_get(fc, "k3", 0, 0, 1000, out), 0);
	/* With the reader's bytes held, a put evicts the LRU until it fits. */
	gw_footers_put(fc, "k4", 0, 0, win, 1700);
	assert_int_equal(gw_footers_get(fc, "k3", 0, 0, 1000, out), -ENOENT);
	assert_int_equal(gw_footers_get(fc, "k4", 0, 0, 1700, out), 0);
	assert_int_equal(gw_pool_used(pool), 1500 + 1703);
	/* And one that finds no room with every window given back keeps
	 * nothing (the readers' bytes are never taken). */
	assert_int_equal(gw_footers_shrink(fc, UINT64_MAX), 1703);
	assert_int_equal(gw_pool_take(pool, 1200, 0), 0);
	gw_footers_put(fc, "k5", 0, 0, win, 1000);
	gw_footers_stats(fc, &st);
	assert_int_equal(st.windows, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(gw_pool_used(pool), 2700);
	gw_pool_give(pool, 1200);
	/* A window over half the pool is never kept. */
	gw_pool_give(pool, 1500);
	gw_footers_put(fc, "k5", 0, 0, win, 1800);
	assert_int_equal(gw_footers_get(fc, "k5", 0, 0, 1800, out), -ENOENT);
	assert_int_equal(gw_pool_used(pool), 0);
	gw_footers_free(fc);
	gw_pool_free(pool);
}

/* Many windows (more than buckets): every one found, every one given back. */
static void test_footers_many(void **state)
{
	struct gw_pool *pool = gw_pool_new("footer-cache", 64 << 20);
	struct gw_footers *fc = gw_footers_new(pool);
	struct gw_footers_stats st;
	char key[48];
	uint32_t w, out;

	(void)state;
	for (uint32_t i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "streams/b/7/%016u", i / 3);
		w = i;
		gw_footers_put(fc, key, i % 3, 64ull * i, &w, sizeof(w));
	}
	for (uint32_t i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "streams/b/7/%016u", i / 3);
		assert_int_equal(gw_footers_get(fc, key, i % 3, 64ull * i, sizeof(out), &out), 0);
		assert_int_equal(out, i);
	}
	gw_footers_stats(fc, &st);
	assert_int_equal(st.windows, 10000);
	gw_footers_free(fc);
	assert_int_equal(gw_pool_used(pool), 0);
	gw_pool_free(pool);
}

/* Readers on four threads put, get and shrink at once (as the plan
 * source's do): every window got is the one put under its key, and the
 * pool holds exactly what the cache says it keeps. */
struct hammer {
	struct gw_footers *fc;
	struct gw_pool *pool;
	unsigned id;
};

static void *hammer_main(void *arg)
{
	struct hammer *h = arg;
	char key[32], win[600], out[600];

	for (unsigned i = 0; i < 4000; i++) {
		unsigned k = (i * 7 + h->id) % 300, len = 100 + k;

		snprintf(key, sizeof(key), "obj-%u", k);
		memset(win, (int)(k & 0xff), len);
		if (gw_footers_get(h->fc, key, k % 2, 0, len, out) == 0) {
			for (unsigned j = 0; j < len; j++)
				if (out[j] != (char)(k & 0xff))
					return (void *)1;
		} else {
			gw_footers_put(h->fc, key, k % 2, 0, win, len);
		}
		if (i % 97 == 0 && gw_pool_take(h->pool, 2000, 0) == 0)
			gw_pool_give(h->pool, 2000);
		if (i % 211 == 0)
			gw_footers_shrink(h->fc, 3000);
	}
	return NULL;
}

static void test_footers_threads(void **state)
{
	struct gw_pool *pool = gw_pool_new("footer-cache", 40000);
	struct gw_footers *fc = gw_footers_new(pool);
	struct gw_footers_stats st;
	struct hammer h[4];
	pthread_t t[4];
	void *rv;

	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		h[i] = (struct hammer){ fc, pool, i };
		assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &h[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(t[i], &rv), 0);
		assert_null(rv);
	}
	gw_footers_stats(fc, &st);
	assert_int_equal(gw_pool_used(pool), st.bytes);
	assert_true(st.bytes <= 40000);
	assert_true(st.hits > 0 && st.evictions > 0);
	gw_footers_free(fc);
	assert_int_equal(gw_pool_used(pool), 0);
	gw_pool_free(pool);
}

/* ------------------------------------------------------------ plans */

/* A plan of entries [first, first+n) of 10 records and 100 bytes each,
 * expiring in expires_s. */
static void mkplan(struct read_plan *p, uint64_t first, uint32_t n, int expires_s, bool urls)
{
	plan_clear(p);
	memset(p, 0, sizeof(*p));
	p->stream_id = 7;
	for (uint32_t i = 0; i < n; i++) {
		struct plan_entry *e = &p->e[i];

		snprintf(e->key, sizeof(e->key), "obj-%llu", (unsigned long long)(first + i));
		e->rev = 1;
		e->first_seq = (first + i) * 10;
		e->end_seq = e->first_seq + 10;
		e->first_byte = (first + i) * 100;
		e->end_byte = e->first_byte + 100;
		e->footer_off = 90;
		e->footer_len = 10;
		if (urls)
			e->url = strdup("http://x/obj");
	}
	p->n = n;
	p->residual_seq = (first + n) * 10;
	p->residual_byte = (first + n) * 100;
	p->more = false;
	p->ttl_s = 30;
	p->expires_ns = nv_now_wall_ns() + (uint64_t)((int64_t)expires_s * (int64_t)NV_NS_PER_S);
}

static void test_plans_positions_and_copies(void **state)
{
	struct read_plan *p = calloc(1, sizeof(*p)), *q = calloc(1, sizeof(*q));
	struct gw_plans *pc = gw_plans_new(4);
	struct gw_plans_stats st;
	uint64_t now = nv_now_wall_ns();

	(void)state;
	mkplan(p, 2, 3, 30, true); /* seqs [20, 50), bytes [200, 500) */
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 20, now, q), -ENOENT);
	gw_plans_put(pc, "b", "s", p);
	/* Invariant 4: the kept plan is a copy. */
	free(p->e[0].url);
	p->e[0].url = strdup("http://changed/");
	p->residual_seq = 999;
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 20, now, q), 0);
	assert_int_equal(q->n, 3);
	assert_int_equal(q->residual_seq, 50);
	assert_int_equal(q->stream_id, 7);
	assert_string_equal(q->e[0].key, "obj-2");
	assert_string_equal(q->e[0].url, "http://x/obj");
	assert_int_equal(q->e[2].end_byte, 500);
	plan_clear(q);
	/* Invariant 2: inside an entry only, by seq and by byte. */
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 49, now, q), 0);
	plan_clear(q);
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 50, now, q), -ENOENT);
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 19, now, q), -ENOENT);
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_BYTE, 499, now, q), 0);
	plan_clear(q);
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_BYTE, 500, now, q), -ENOENT);
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_BYTE, 199, now, q), -ENOENT);
	/* Another stream or bucket: a miss. */
	assert_int_equal(gw_plans_get(pc, "b", "t", META_REF_BY_SEQ, 20, now, q), -ENOENT);
	assert_int_equal(gw_plans_get(pc, "c", "s", META_REF_BY_SEQ, 20, now, q), -ENOENT);
	/* Near its expiry (within the margin) it is dropped, not served. */
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 20,
				      now + (30 - GW_PLAN_KEEP_MARGIN_S + 1) * NV_NS_PER_S, q),
			 -ENOENT);
	gw_plans_stats(pc, &st);
	assert_int_equal(st.kept, 0);
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 20, now, q), -ENOENT);
	/* A plan of no entries is not kept. */
	mkplan(p, 5, 0, 30, false);
	gw_plans_put(pc, "b", "s", p);
	gw_plans_stats(pc, &st);
	assert_int_equal(st.kept, 0);
	assert_int_equal(st.puts, 1);
	assert_int_equal(st.hits, 3);
	plan_clear(p);
	plan_clear(q);
	free(p);
	free(q);
	gw_plans_free(pc);
}

static void test_plans_bounded_and_dropped(void **state)
{
	struct read_plan *p = calloc(1, sizeof(*p)), *q = calloc(1, sizeof(*q));
	struct gw_plans *pc = gw_plans_new(2), *none = gw_plans_new(0);
	struct gw_plans_stats st;
	uint64_t now = nv_now_wall_ns();

	(void)state;
	/* max 0: nothing kept. */
	mkplan(p, 0, 2, 30, false);
	gw_plans_put(none, "b", "s", p);
	assert_int_equal(gw_plans_get(none, "b", "s", META_REF_BY_SEQ, 0, now, q), -ENOENT);
	/* A newer plan of the stream overlapping a kept one replaces it. */
	gw_plans_put(pc, "b", "s", p);       /* seqs [0, 20) */
	mkplan(p, 1, 2, 30, false);          /* [10, 30) */
	p->residual_seq = 777;
	gw_plans_put(pc, "b", "s", p);
	gw_plans_stats(pc, &st);
	assert_int_equal(st.kept, 1);
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 5, now, q), -ENOENT);
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 15, now, q), 0);
	assert_int_equal(q->residual_seq, 777);
	plan_clear(q);
	/* Invariant 1: at most max; the least recently used is replaced. */
	mkplan(p, 0, 1, 30, false);
	gw_plans_put(pc, "b", "other", p);
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 15, now, q), 0);
	plan_clear(q);
	gw_plans_put(pc, "b", "third", p);   /* "other" was used least recently */
	gw_plans_stats(pc, &st);
	assert_int_equal(st.kept, 2);
	assert_int_equal(gw_plans_get(pc, "b", "other", META_REF_BY_SEQ, 0, now, q), -ENOENT);
	assert_int_equal(gw_plans_get(pc, "b", "third", META_REF_BY_SEQ, 0, now, q), 0);
	plan_clear(q);
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 15, now, q), 0);
	plan_clear(q);
	/* A plan of another stream id (the name deleted and created again)
	 * replaces the kept one, overlapping or not. */
	mkplan(p, 5, 1, 30, false);
	p->stream_id = 8;
	gw_plans_put(pc, "b", "third", p);
	assert_int_equal(gw_plans_get(pc, "b", "third", META_REF_BY_SEQ, 0, now, q), -ENOENT);
	assert_int_equal(gw_plans_get(pc, "b", "third", META_REF_BY_SEQ, 50, now, q), 0);
	assert_int_equal(q->stream_id, 8);
	plan_clear(q);
	/* Invariant 3: a stale plan drops the stream's, and only its. */
	gw_plans_drop(pc, "b", "s");
	assert_int_equal(gw_plans_get(pc, "b", "s", META_REF_BY_SEQ, 15, now, q), -ENOENT);
	assert_int_equal(gw_plans_get(pc, "b", "third", META_REF_BY_SEQ, 55, now, q), 0);
	plan_clear(q);
	gw_plans_stats(pc, &st);
	assert_int_equal(st.drops, 1);
	assert_int_equal(st.kept, 1);
	plan_clear(p);
	free(p);
	free(q);
	gw_plans_free(pc);
	gw_plans_free(none);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_footers_keyed_and_copied),
		cmocka_unit_test(test_footers_lru_in_the_pool),
		cmocka_unit_test(test_footers_many),
		cmocka_unit_test(test_footers_threads),
		cmocka_unit_test(test_plans_positions_and_copies),
		cmocka_unit_test(test_plans_bounded_and_dropped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
