/*
 * tailcache.c - see tailcache.h.
 *
 * Structure: every cached run is an item on one global FIFO (insertion
 * order, for eviction) and in its stream's array (seq order, for lookup).
 * Streams are found through a u64 map (src/base/u64map.h) keyed by stream
 * id.  One mutex (tc->lock) guards all of it; a read takes a run reference under the
 * lock and copies outside it, so a large copy never blocks inserts.
 */
#include "config.h"
#include "engine/tailcache.h"
#include "src/base/clock.h"
#include "src/base/lockcheck.h"
#include "src/base/log.h"
#include "src/base/u64map.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct tc_item {
	struct run_buf *rb;          /* a cache reference */
	struct tc_stream *st;
	struct tc_item *older, *newer; /* global FIFO */
};

struct tc_stream {
	uint64_t id;
	struct tc_item **items; /* seq order; [head, head+n) of a ring */
	uint32_t head, n, cap;
};

/* Initial size of the stream map (it grows by doubling). */
#define TC_STREAMS_HINT 128
/* Evicted runs an insert collects before it drops the lock to unref them. */
#define TC_VICTIMS 64

struct tailcache {
	pthread_mutex_t lock;
	uint64_t budget;             /* immutable */
	uint64_t bytes;              /* lock */
	struct tc_item *oldest, *newest; /* lock */
	struct u64map *streams;      /* lock: id -> struct tc_stream * */
	struct nv_stats *stats;
	_Atomic uint64_t skip_logged_ns; /* last oversize-flight notice (mono) */
};

/* Oversize flights are noted at info level at most this often. */
#define TC_SKIP_LOG_NS (60ull * 1000000000ull)

struct tailcache *tailcache_new(uint64_t budget, struct nv_stats *stats)
{
	struct tailcache *tc = calloc(1, sizeof(*tc));

	if (!tc)
		return NULL;
	tc->streams = u64map_new(TC_STREAMS_HINT);
	if (!tc->streams) {
		free(tc);
		return NULL;
	}
	pthread_mutex_init(&tc->lock, NULL);
	tc->budget = budget;
	tc->stats = stats;
	return tc;
}

static struct tc_stream *find_locked(struct tailcache *tc, uint64_t id)
{
	NV_ASSERT_LOCKED(&tc->lock);
	return u64map_get(tc->streams, id);
}

static void unlink_stream_locked(struct tailcache *tc, struct tc_stream *st)
{
	u64map_remove(tc->streams, st->id);
	free(st->items);
	free(st);
}

/* Remove an item from the FIFO and the byte count; the caller has taken
 * it off its stream already.  Returns the run to unref outside the lock. */
static struct run_buf *drop_item_locked(struct tailcache *tc, struct tc_item *it)
{
	struct run_buf *rb = it->rb;

	if (it->older)
		it->older->newer = it->newer;
	else
		tc->oldest = it->newer;
	if (it->newer)
		it->newer->older = it->older;
	else
		tc->newest = it->older;
	tc->bytes -= rbuf_mem(rb);
	free(it);
	return rb;
}

void tailcache_free(struct tailcache *tc)
{
	if (!tc)
		return;
	while (tc->oldest) {
		struct tc_item *it = tc->oldest;

		rbuf_unref(drop_item_locked(tc, it));
	}
	{
		size_t cur = 0;
		void *v;

		while (u64map_next(tc->streams, &cur, NULL, &v))
			unlink_stream_locked(tc, v);
	}
	u64map_free(tc->streams);
	pthread_mutex_destroy(&tc->lock);
	free(tc);
}

/* The stream's entry, made when missing.  NULL on ENOMEM. */
static struct tc_stream *get_stream_locked(struct tailcache *tc, uint64_t id)
{
	struct tc_stream *st = find_locked(tc, id);

	if (st)
		return st;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->id = id;
	if (u64map_put(tc->streams, id, st)) {
		free(st);
		return NULL;
	}
	return st;
}

static int stream_push_locked(struct tc_stream *st, struct tc_item *it)
{
	if (st->n == st->cap) {
		uint32_t ncap = st->cap ? st->cap * 2 : 4;
		struct tc_item **p = malloc(ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		for (uint32_t i = 0; i < st->n; i++)
			p[i] = st->items[(st->head + i) % st->cap];
		free(st->items);
		st->items = p;
		st->cap = ncap;
		st->head = 0;
	}
	st->items[(st->head + st->n) % st->cap] = it;
	st->n++;
	return 0;
}

/* Evict the globally oldest item; returns its run (unref outside). */
static struct run_buf *evict_one_locked(struct tailcache *tc)
{
	struct tc_item *it = tc->oldest;
	struct tc_stream *st = it->st;
	struct run_buf *rb;

	NV_ASSERT_LOCKED(&tc->lock);
	/* Invariant 3: the oldest item of the cache is its stream's oldest. */
	st->head = (st->head + 1) % st->cap;
	st->n--;
	if (tc->stats)
		NV_STAT_ADD(tc->stats, tail_cache_evicted, rbuf_mem(it->rb));
	rb = drop_item_locked(tc, it);
	if (st->n == 0)
		unlink_stream_locked(tc, st);
	return rb;
}

void tailcache_insert_flight(struct tailcache *tc, const struct flight *f)
{
	uint64_t need = 0;
	struct run_buf *victims[TC_VICTIMS];
	int nv = 0;

	for (uint32_t i = 0; i < f->nruns; i++)
		if (f->runs[i].rb)
			need += rbuf_mem(f->runs[i].rb);
	if (need == 0)
		return;
	if (need > tc->budget) {
		if (tc->stats)
			NV_STAT_ADD(tc->stats, tail_cache_skipped, 1);
		{
			uint64_t now = nv_now_mono_ns(), last = atomic_load(&tc->skip_logged_ns);
			bool info = (last == 0 || now - last >= TC_SKIP_LOG_NS) &&
				    atomic_compare_exchange_strong(&tc->skip_logged_ns, &last, now);

			/* Reads of that flight go to the store until it is
			 * absorbed: worth telling, not at every flight. */
			nv_log(info ? NV_INFO : NV_DEBUG, NV_SUB_CACHE,
			       "flight slot %llu (%llu bytes) exceeds the %llu byte tail cache "
			       "budget: not cached (tail_cache_skipped counts them; raise "
			       "tail_window_cache_mib)", (unsigned long long)f->slot,
			       (unsigned long long)need, (unsigned long long)tc->budget);
		}
		return;
	}
	pthread_mutex_lock(&tc->lock);
	for (uint32_t i = 0; i < f->nruns; i++) {
		struct run_buf *rb = f->runs[i].rb;
		struct tc_stream *st;
		struct tc_item *it;

		if (!rb)
			continue;
		while (tc->bytes + rbuf_mem(rb) > tc->budget && tc->oldest) {
			victims[nv++] = evict_one_locked(tc);
			if (nv == TC_VICTIMS) {
				pthread_mutex_unlock(&tc->lock);
				while (nv)
					rbuf_unref(victims[--nv]);
				pthread_mutex_lock(&tc->lock);
			}
		}
		st = get_stream_locked(tc, rb->stream_id);
		it = calloc(1, sizeof(*it));
		if (!st || !it || stream_push_locked(st, it)) {
			free(it);
			if (st && st->n == 0)
				unlink_stream_locked(tc, st);
			continue; /* ENOMEM: simply not cached */
		}
		rbuf_ref(rb);
		it->rb = rb;
		it->st = st;
		it->older = tc->newest;
		if (tc->newest)
			tc->newest->newer = it;
		else
			tc->oldest = it;
		tc->newest = it;
		tc->bytes += rbuf_mem(rb);
	}
	pthread_mutex_unlock(&tc->lock);
	while (nv)
		rbuf_unref(victims[--nv]);
}

size_t tailcache_read(struct tailcache *tc, uint64_t stream, uint64_t off, void *dst,
		      size_t len, uint32_t max_recs)
{
	struct run_buf *rb = NULL;
	struct tc_stream *st;
	size_t n = 0;

	pthread_mutex_lock(&tc->lock);
	st = find_locked(tc, stream);
	if (st && st->n) {
		uint32_t lo = 0, hi = st->n;

		/* Last run whose first byte is <= off. */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			struct run_buf *m = st->items[(st->head + mid) % st->cap]->rb;

			if (m->first_byte <= off)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo) {
			struct run_buf *c = st->items[(st->head + lo - 1) % st->cap]->rb;

			if (off < c->first_byte + rbuf_body_bytes(c)) {
				rb = c;
				rbuf_ref(rb);
			}
		}
	}
	pthread_mutex_unlock(&tc->lock);
	if (rb) {
		n = rbuf_copy(rb, off, dst, len, max_recs);
		rbuf_unref(rb);
		if (n && tc->stats)
			NV_STAT_ADD(tc->stats, tail_cache_hits, 1);
	}
	return n;
}

void tailcache_drop_stream(struct tailcache *tc, uint64_t stream)
{
	struct run_buf **victims = NULL;
	uint32_t nv = 0;
	struct tc_stream *st;

	pthread_mutex_lock(&tc->lock);
	st = find_locked(tc, stream);
	if (st) {
		victims = calloc(st->n ? st->n : 1, sizeof(*victims));
		for (uint32_t i = 0; i < st->n; i++) {
			struct tc_item *it = st->items[(st->head + i) % st->cap];
			struct run_buf *rb = drop_item_locked(tc, it);

			if (victims)
				victims[nv++] = rb;
			else
				rbuf_unref(rb); /* ENOMEM: unref under the lock */
		}
		st->n = 0;
		unlink_stream_locked(tc, st);
	}
	pthread_mutex_unlock(&tc->lock);
	while (nv)
		rbuf_unref(victims[--nv]);
	free(victims);
}

uint64_t tailcache_bytes(struct tailcache *tc)
{
	uint64_t b;

	pthread_mutex_lock(&tc->lock);
	b = tc->bytes;
	pthread_mutex_unlock(&tc->lock);
	return b;
}
