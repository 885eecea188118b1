/*
 * rcache.c - see rcache.h.
 *
 * Structure: entries keyed by (key, off) are found through a u64 map
 * (src/base/u64map.h) from a 64-bit digest of (key, off) to the first
 * entry with that digest; entries whose digests collide are chained
 * behind it through hnext.  An LRU list links the filled entries.  One
 * mutex guards both; one condition variable wakes threads waiting for
 * loads (loads are rare next to hits).
 *
 * The blob pool (process-wide, its own mutex, taken alone): a sequential
 * cold read allocates a chunk-sized blob per chunk while the cache frees
 * one per eviction, and memory fresh from the kernel costs a page fault
 * and a memcg charge per 4 KiB when the chunk is read into it: a tenth of
 * the read path's CPU (bench/RESULTS.md).  So up to POOL_N freed blobs of
 * POOL_MIN..POOL_MAX bytes are kept, resident, and handed to the next
 * rc_blob_new() that fits in one without wasting more than half of it;
 * the rest are freed.  Memory: at most POOL_N * POOL_MAX (16 MiB) beyond
 * the caches' budgets; rcache_free() empties the pool.
 */
#include "config.h"
#include "engine/rcache.h"
#include "src/base/lockcheck.h"
#include "src/base/u64map.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { E_LOADING, E_FILLED };

#define POOL_N 8
#define POOL_MIN ((size_t)64 << 10)
#define POOL_MAX ((size_t)2 << 20)

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rc_blob *pool[POOL_N]; /* pool_lock */
static unsigned pool_n;              /* pool_lock */

/* A pooled blob of need..2*need bytes, or NULL. */
static struct rc_blob *pool_take(size_t need)
{
	struct rc_blob *b = NULL;

	if (need < POOL_MIN || need > POOL_MAX)
		return NULL;
	pthread_mutex_lock(&pool_lock);
	for (unsigned i = 0; i < pool_n; i++)
		if (pool[i]->cap >= need && pool[i]->cap / 2 <= need) {
			b = pool[i];
			pool[i] = pool[--pool_n];
			break;
		}
	pthread_mutex_unlock(&pool_lock);
	return b;
}

/* Keep b for reuse, or free it. */
static void pool_give(struct rc_blob *b)
{
	if (b->cap >= POOL_MIN && b->cap <= POOL_MAX) {
		pthread_mutex_lock(&pool_lock);
		if (pool_n < POOL_N) {
			pool[pool_n++] = b;
			b = NULL;
		}
		pthread_mutex_unlock(&pool_lock);
	}
	free(b);
}

static void pool_drain(void)
{
	pthread_mutex_lock(&pool_lock);
	while (pool_n)
		free(pool[--pool_n]);
	pthread_mutex_unlock(&pool_lock);
}

struct rc_entry {
	char *key;
	uint64_t off;
	uint64_t hash;    /* digest of (key, off): the map's key */
	int state;
	int err;          /* E_LOADING done with an error, for waiters */
	int waiters;
	struct rc_blob *blob;
	struct rc_entry *hnext;               /* same digest; or the victims list */
	struct rc_entry *lru_prev, *lru_next; /* filled entries only */
};

struct rcache {
	pthread_mutex_t lock;
	pthread_cond_t loaded;
	uint64_t budget;
	uint64_t bytes;             /* lock */
	struct u64map *map;         /* lock: digest -> first struct rc_entry */
	struct rc_entry *mru, *lru; /* lock */
};

struct rc_blob *rc_blob_new(size_t len, uint32_t nrec)
{
	size_t idx = (size_t)nrec * sizeof(uint32_t);
	size_t need = sizeof(struct rc_blob) + idx + len;
	struct rc_blob *b = pool_take(need);

	if (!b) {
		b = malloc(need);
		if (!b)
			return NULL;
		b->cap = need;
	}
	atomic_init(&b->refs, 1);
	b->len = len;
	b->nrec = nrec;
	b->rec_off = (uint32_t *)(b + 1);
	b->data = (uint8_t *)(b + 1) + idx;
	return b;
}

void rc_blob_ref(struct rc_blob *b)
{
	atomic_fetch_add(&b->refs, 1);
}

void rc_blob_unref(struct rc_blob *b)
{
	if (b && atomic_fetch_sub(&b->refs, 1) == 1)
		pool_give(b);
}

/* What b holds of the budget: its allocation (a recycled one may be up
 * to twice what it needs). */
static uint64_t blob_size(const struct rc_blob *b)
{
	return b->cap;
}

/* Initial size of the map (it grows by doubling). */
#define RC_MAP_HINT 1024

static uint64_t hash_of(const char *key, uint64_t off)
{
	uint64_t h = u64map_fnv_str(U64MAP_FNV_SEED ^ off, key);

	return h ^ (h >> 29);
}

struct rcache *rcache_new(uint64_t budget)
{
	struct rcache *rc = calloc(1, sizeof(*rc));

	if (!rc)
		return NULL;
	rc->map = u64map_new(RC_MAP_HINT);
	if (!rc->map) {
		free(rc);
		return NULL;
	}
	rc->budget = budget;
	pthread_mutex_init(&rc->lock, NULL);
	pthread_cond_init(&rc->loaded, NULL);
	return rc;
}

static void lru_unlink(struct rcache *rc, struct rc_entry *e)
{
	NV_ASSERT_LOCKED(&rc->lock);
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else
		rc->mru = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		rc->lru = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_push(struct rcache *rc, struct rc_entry *e)
{
	NV_ASSERT_LOCKED(&rc->lock);
	e->lru_prev = NULL;
	e->lru_next = rc->mru;
	if (rc->mru)
		rc->mru->lru_prev = e;
	rc->mru = e;
	if (!rc->lru)
		rc->lru = e;
}

/* Make e findable.  0 or -ENOMEM (the map could not grow). */
static int hash_link(struct rcache *rc, struct rc_entry *e)
{
	NV_ASSERT_LOCKED(&rc->lock);
	e->hnext = u64map_get(rc->map, e->hash);
	return u64map_put(rc->map, e->hash, e);
}

static void hash_unlink(struct rcache *rc, struct rc_entry *e)
{
	struct rc_entry *head = u64map_get(rc->map, e->hash);

	NV_ASSERT_LOCKED(&rc->lock);
	if (head != e) {
		while (head->hnext != e)
			head = head->hnext;
		head->hnext = e->hnext;
	} else if (!e->hnext) {
		u64map_remove(rc->map, e->hash);
	} else {
		/* Replacing a present key never allocates (u64map.h): 0. */
		int rc_ = u64map_put(rc->map, e->hash, e->hnext);

		assert(rc_ == 0);
		(void)rc_;
	}
}

static void entry_free(struct rc_entry *e)
{
	rc_blob_unref(e->blob);
	free(e->key);
	free(e);
}

void rcache_free(struct rcache *rc)
{
	pool_drain();
	if (!rc)
		return;
	{
		size_t cur = 0;
		void *v;

		while (u64map_next(rc->map, &cur, NULL, &v)) {
			struct rc_entry *e = v;

			while (e) {
				struct rc_entry *n = e->hnext;

				entry_free(e);
				e = n;
			}
		}
	}
	u64map_free(rc->map);
	pthread_cond_destroy(&rc->loaded);
	pthread_mutex_destroy(&rc->lock);
	free(rc);
}

static struct rc_entry *find_locked(struct rcache *rc, const char *key, uint64_t off,
				    uint64_t h)
{
	NV_ASSERT_LOCKED(&rc->lock);
	for (struct rc_entry *e = u64map_get(rc->map, h); e; e = e->hnext)
		if (e->off == off && !strcmp(e->key, key))
			return e;
	return NULL;
}

int rcache_peek(struct rcache *rc, const char *key, uint64_t off, struct rc_blob **out)
{
	uint64_t h = hash_of(key, off);
	struct rc_entry *e;
	int rc_ = -ENOENT;

	pthread_mutex_lock(&rc->lock);
	e = find_locked(rc, key, off, h);
	if (e && e->state == E_FILLED) {
		rc_blob_ref(e->blob);
		*out = e->blob;
		lru_unlink(rc, e);
		lru_push(rc, e);
		rc_ = 0;
	} else if (e) {
		rc_ = -EINPROGRESS;
	}
	pthread_mutex_unlock(&rc->lock);
	return rc_;
}

int rcache_get(struct rcache *rc, const char *key, uint64_t off, struct rc_blob **out,
	       struct rc_entry **loading)
{
	uint64_t h = hash_of(key, off);
	struct rc_entry *e;

	pthread_mutex_lock(&rc->lock);
	for (;;) {
		e = find_locked(rc, key, off, h);
		if (!e)
			break;
		if (e->state == E_FILLED) {
			rc_blob_ref(e->blob);
			*out = e->blob;
			lru_unlink(rc, e);
			lru_push(rc, e);
			pthread_mutex_unlock(&rc->lock);
			return 0;
		}
		/* Someone is loading it: wait for that load. */
		e->waiters++;
		while (e->state == E_LOADING && !e->err)
			pthread_cond_wait(&rc->loaded, &rc->lock);
		e->waiters--;
		if (e->err) {
			int err = e->err;

			if (e->waiters == 0) /* the loader left it for us */
				entry_free(e);
			pthread_mutex_unlock(&rc->lock);
			return err;
		}
	}
	e = calloc(1, sizeof(*e));
	if (e)
		e->key = strdup(key);
	if (!e || !e->key) {
		free(e);
		pthread_mutex_unlock(&rc->lock);
		return -ENOMEM;
	}
	e->off = off;
	e->hash = h;
	e->state = E_LOADING;
	if (hash_link(rc, e)) {
		pthread_mutex_unlock(&rc->lock);
		entry_free(e);
		return -ENOMEM;
	}
	pthread_mutex_unlock(&rc->lock);
	*loading = e;
	return 1;
}

void rcache_fill(struct rcache *rc, struct rc_entry *e, struct rc_blob *blob, int err)
{
	struct rc_entry *victims = NULL;

	pthread_mutex_lock(&rc->lock);
	if (err || !blob) {
		/* Invariant 2: not cached.  Waiters read e->err; the last
		 * one out frees it. */
		hash_unlink(rc, e);
		e->err = err ? err : -EIO;
		rc_blob_unref(blob);
		if (e->waiters == 0)
			entry_free(e);
		pthread_cond_broadcast(&rc->loaded);
		pthread_mutex_unlock(&rc->lock);
		return;
	}
	e->blob = blob;
	e->state = E_FILLED;
	rc->bytes += blob_size(blob);
	lru_push(rc, e);
	for (struct rc_entry *v = rc->lru, *prev; rc->bytes > rc->budget && v && v != e;
	     v = prev) {
		prev = v->lru_prev;
		/* Threads that waited for v's load are woken but may not have
		 * run yet: they read v when they do, so v stays (it goes at a
		 * later fill, once they took their reference). */
		if (v->waiters)
			continue;
		lru_unlink(rc, v);
		hash_unlink(rc, v);
		rc->bytes -= blob_size(v->blob);
		v->hnext = victims;
		victims = v;
	}
	if (blob_size(blob) > rc->budget) {
		/* Larger than the whole budget on its own: serve it to the
		 * waiters, keep nothing. */
		lru_unlink(rc, e);
		hash_unlink(rc, e);
		rc->bytes -= blob_size(blob);
		e->state = E_LOADING;
		e->err = -ENOBUFS;
		/* Waiters see -ENOBUFS and load on their own (rare: a single
		 * chunk larger than the read cache); the last one frees e. */
		if (e->waiters == 0)
			entry_free(e);
	}
	pthread_cond_broadcast(&rc->loaded);
	pthread_mutex_unlock(&rc->lock);
	while (victims) {
		struct rc_entry *n = victims->hnext;

		entry_free(victims);
		victims = n;
	}
}

uint64_t rcache_bytes(struct rcache *rc)
{
	uint64_t b;

	pthread_mutex_lock(&rc->lock);
	b = rc->bytes;
	pthread_mutex_unlock(&rc->lock);
	return b;
}
