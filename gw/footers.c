/*
 * footers.c - see footers.h: verified footer windows in a hash table
 * with an LRU list, their bytes in the --footer-cache-bytes pool.
 *
 * For: gw_footers_get(), gw_footers_put(), gw_footers_shrink().  Not for: verifying a
 * window (the caller puts only what bundle_footer_open() accepted).
 *
 * Ownership and locking: fc owns every struct win (its key and bytes in
 * the same allocation); fc->lock guards the buckets, the LRU list (head:
 * most recent) and the counters.  The pool is taken with wait 0 under
 * the lock and given back under it (gw/pool.c's own lock nests inside).
 *
 * Invariants: those of footers.h.
 */
#include "config.h"
#include "gw/footers.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 4096u

struct win {
	struct win *hnext;         /* bucket chain */
	struct win *prev, *next;   /* LRU */
	uint64_t off;
	uint32_t rev, len;
	uint64_t held;             /* taken from the pool: len + the key */
	uint8_t *bytes;            /* len bytes, after the key */
	char key[];
};

struct gw_footers {
	struct gw_pool *pool;
	pthread_mutex_t lock;
	struct win *bucket[NBUCKETS]; /* lock */
	struct win *head, *tail;      /* lock: LRU */
	struct gw_footers_stats st;   /* lock */
};

static uint32_t hash(const char *key, uint32_t rev, uint64_t off)
{
	uint64_t h = 1469598103934665603ull;

	for (const char *p = key; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	h = (h ^ rev) * 1099511628211ull;
	h = (h ^ off) * 1099511628211ull;
	return (uint32_t)(h ^ (h >> 32)) % NBUCKETS;
}

static void lru_unlink(struct gw_footers *fc, struct win *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		fc->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		fc->tail = w->prev;
	w->prev = w->next = NULL;
}

static void lru_front(struct gw_footers *fc, struct win *w)
{
	w->next = fc->head;
	w->prev = NULL;
	if (fc->head)
		fc->head->prev = w;
	fc->head = w;
	if (!fc->tail)
		fc->tail = w;
}

static struct win **slot_of(struct gw_footers *fc, const char *key, uint32_t rev, uint64_t off,
			    uint32_t len)
{
	struct win **pp = &fc->bucket[hash(key, rev, off)];

	for (; *pp; pp = &(*pp)->hnext)
		if ((*pp)->rev == rev && (*pp)->off == off && (*pp)->len == len &&
		    strcmp((*pp)->key, key) == 0)
			break;
	return pp;
}

/* Drop w (lock held): out of its chain and the list, its bytes given back. */
static uint64_t drop(struct gw_footers *fc, struct win *w)
{
	struct win **pp = &fc->bucket[hash(w->key, w->rev, w->off)];
	uint64_t held = w->held;

	while (*pp != w)
		pp = &(*pp)->hnext;
	*pp = w->hnext;
	lru_unlink(fc, w);
	gw_pool_give(fc->pool, held);
	fc->st.bytes -= held;
	fc->st.windows--;
	free(w);
	return held;
}

struct gw_footers *gw_footers_new(struct gw_pool *pool)
{
	struct gw_footers *fc = calloc(1, sizeof(*fc));

	if (!fc)
		return NULL;
	fc->pool = pool;
	pthread_mutex_init(&fc->lock, NULL);
	return fc;
}

void gw_footers_free(struct gw_footers *fc)
{
	if (!fc)
		return;
	while (fc->tail)
		drop(fc, fc->tail);
	pthread_mutex_destroy(&fc->lock);
	free(fc);
}

int gw_footers_get(struct gw_footers *fc, const char *key, uint32_t rev, uint64_t off,
		   uint32_t len, void *dst)
{
	struct win *w;

	pthread_mutex_lock(&fc->lock);
	w = *slot_of(fc, key, rev, off, len);
	if (w) {
		memcpy(dst, w->bytes, len);
		lru_unlink(fc, w);
		lru_front(fc, w);
		fc->st.hits++;
	} else {
		fc->st.misses++;
	}
	pthread_mutex_unlock(&fc->lock);
	return w ? 0 : -ENOENT;
}

void gw_footers_put(struct gw_footers *fc, const char *key, uint32_t rev, uint64_t off,
		    const void *win, uint32_t len)
{
	size_t klen = strlen(key) + 1;
	uint64_t held = (uint64_t)len + klen;
	struct win *w, **pp;
	bool room = false;

	if (len == 0 || held > gw_pool_cap(fc->pool) / 2)
		return; /* one window may not crowd out every reader's */
	w = malloc(sizeof(*w) + klen + len);
	if (!w)
		return;
	memcpy(w->key, key, klen);
	w->bytes = (uint8_t *)w->key + klen;
	memcpy(w->bytes, win, len);
	w->off = off;
	w->rev = rev;
	w->len = len;
	w->held = held;
	w->prev = w->next = NULL;
	pthread_mutex_lock(&fc->lock);
	pp = slot_of(fc, key, rev, off, len);
	if (!*pp) {
		while (!(room = gw_pool_take(fc->pool, held, 0) == 0) && fc->tail) {
			drop(fc, fc->tail);
			fc->st.evictions++;
		}
		pp = slot_of(fc, key, rev, off, len); /* a drop may have moved the chain */
	}
	if (room) {
		w->hnext = NULL;
		*pp = w;
		lru_front(fc, w);
		fc->st.bytes += held;
		fc->st.windows++;
		fc->st.puts++;
		w = NULL;
	}
	pthread_mutex_unlock(&fc->lock);
	free(w); /* already kept (another reader put it), or no room */
}

uint64_t gw_footers_shrink(struct gw_footers *fc, uint64_t n)
{
	uint64_t given = 0;

	pthread_mutex_lock(&fc->lock);
	while (given < n && fc->tail) {
		given += drop(fc, fc->tail);
		fc->st.evictions++;
	}
	pthread_mutex_unlock(&fc->lock);
	return given;
}

void gw_footers_stats(struct gw_footers *fc, struct gw_footers_stats *out)
{
	pthread_mutex_lock(&fc->lock);
	*out = fc->st;
	pthread_mutex_unlock(&fc->lock);
}
