/*
 * plancache.c - see plancache.h: a small LRU array of vended plans.
 *
 * For: gw_plans_get(), gw_plans_put(), gw_plans_drop().  Not for: asking a star.
 *
 * Ownership and locking: pc owns every struct kept (its bucket, stream,
 * entries and their URLs); pc->lock guards the array, each kept's use
 * tick and the counters.  The array is scanned whole (max is small: the
 * --plan-cache count).
 *
 * Invariants: those of plancache.h.
 */
#include "config.h"
#include "gw/plancache.h"
#include "src/base/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct kept {
	char *bucket, *stream;
	uint64_t used;               /* pc->tick at the last get or put */
	struct read_plan hdr;        /* all but the entries: hdr.n of them in e */
	struct plan_entry *e;
};

struct gw_plans {
	pthread_mutex_t lock;
	unsigned max;
	struct kept *slot;           /* max of them; a NULL bucket is free */
	uint64_t tick;               /* lock */
	struct gw_plans_stats st;    /* lock */
};

/* Copy the scalars and the entries (URLs duplicated) from src into
 * dst and de (de holds src->n; dst's own entries untouched): 0 or
 * -ENOMEM (the URLs copied so far stay de's, *n of them). */
static int copy_plan(struct read_plan *dst, struct plan_entry *de, uint32_t *n,
		     const struct read_plan *src, const struct plan_entry *se)
{
	dst->stream_id = src->stream_id;
	dst->trim_seq = src->trim_seq;
	dst->trim_byte = src->trim_byte;
	dst->residual_seq = src->residual_seq;
	dst->residual_byte = src->residual_byte;
	dst->more = src->more;
	dst->vending = src->vending;
	dst->expires_ns = src->expires_ns;
	dst->ttl_s = src->ttl_s;
	*n = 0;
	for (uint32_t i = 0; i < src->n; i++) {
		de[i] = se[i];
		de[i].url = NULL;
		*n = i + 1;
		if (se[i].url && !(de[i].url = strdup(se[i].url)))
			return -ENOMEM;
	}
	return 0;
}

static void free_urls(struct plan_entry *e, uint32_t n)
{
	for (uint32_t i = 0; e && i < n; i++)
		free(e[i].url);
}

static void kept_clear(struct gw_plans *pc, struct kept *k)
{
	if (!k || !k->bucket)
		return;
	free_urls(k->e, k->hdr.n);
	free(k->e);
	free(k->bucket);
	free(k->stream);
	memset(k, 0, sizeof(*k));
	pc->st.kept--;
}

static bool holds(const struct kept *k, enum meta_ref_key by, uint64_t pos)
{
	for (uint32_t i = 0; i < k->hdr.n; i++) {
		const struct plan_entry *e = &k->e[i];

		if (by == META_REF_BY_SEQ ? e->first_seq <= pos && pos < e->end_seq
					  : e->first_byte <= pos && pos < e->end_byte)
			return true;
	}
	return false;
}

static bool same(const struct kept *k, const char *bucket, const char *stream)
{
	return k->bucket && strcmp(k->bucket, bucket) == 0 && strcmp(k->stream, stream) == 0;
}

struct gw_plans *gw_plans_new(unsigned max)
{
	struct gw_plans *pc = calloc(1, sizeof(*pc));

	if (!pc || (max && !(pc->slot = calloc(max, sizeof(*pc->slot))))) {
		free(pc);
		return NULL;
	}
	pc->max = max;
	pthread_mutex_init(&pc->lock, NULL);
	return pc;
}

void gw_plans_free(struct gw_plans *pc)
{
	if (!pc)
		return;
	for (unsigned i = 0; i < pc->max; i++)
		kept_clear(pc, &pc->slot[i]);
	pthread_mutex_destroy(&pc->lock);
	free(pc->slot);
	free(pc);
}

int gw_plans_get(struct gw_plans *pc, const char *bucket, const char *stream,
		 enum meta_ref_key by, uint64_t pos, uint64_t now_ns, struct read_plan *p)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&pc->lock);
	for (unsigned i = 0; i < pc->max && rc == -ENOENT; i++) {
		struct kept *k = &pc->slot[i];

		if (!same(k, bucket, stream))
			continue;
		if (now_ns + (uint64_t)GW_PLAN_KEEP_MARGIN_S * NV_NS_PER_S >= k->hdr.expires_ns) {
			kept_clear(pc, k); /* invariant 2: expired (or about to be) */
			continue;
		}
		if (!holds(k, by, pos))
			continue;
		rc = copy_plan(p, p->e, &p->n, &k->hdr, k->e);
		if (rc) {
			plan_clear(p);
			break;
		}
		k->used = ++pc->tick;
	}
	if (rc == 0)
		pc->st.hits++;
	else
		pc->st.misses++;
	pthread_mutex_unlock(&pc->lock);
	return rc == 0 ? 0 : -ENOENT;
}

void gw_plans_put(struct gw_plans *pc, const char *bucket, const char *stream,
		  const struct read_plan *p)
{
	struct kept k = { 0 }, *lru = NULL;
	uint64_t lo, hi;

	if (pc->max == 0 || p->n == 0)
		return;
	k.bucket = strdup(bucket);
	k.stream = strdup(stream);
	k.e = calloc(p->n, sizeof(*k.e));
	if (!k.bucket || !k.stream || !k.e || copy_plan(&k.hdr, k.e, &k.hdr.n, p, p->e)) {
		free_urls(k.e, k.hdr.n);
		free(k.e);
		free(k.bucket);
		free(k.stream);
		return;
	}
	lo = p->e[0].first_seq;
	hi = p->e[p->n - 1].end_seq;
	pthread_mutex_lock(&pc->lock);
	for (unsigned i = 0; i < pc->max; i++) {
		struct kept *o = &pc->slot[i];

		/* A kept plan of the stream that overlaps the new one is older;
		 * one of another stream id is of a deleted stream of the name. */
		if (same(o, bucket, stream) && (o->hdr.stream_id != p->stream_id ||
						(o->e[0].first_seq < hi &&
						 lo < o->e[o->hdr.n - 1].end_seq)))
			kept_clear(pc, o);
		if (!o->bucket) {
			if (!lru || lru->bucket)
				lru = o; /* the first free slot */
		} else if (!lru || (lru->bucket && o->used < lru->used)) {
			lru = o;
		}
	}
	kept_clear(pc, lru);
	k.used = ++pc->tick;
	*lru = k;
	pc->st.kept++;
	pc->st.puts++;
	pthread_mutex_unlock(&pc->lock);
}

void gw_plans_drop(struct gw_plans *pc, const char *bucket, const char *stream)
{
	pthread_mutex_lock(&pc->lock);
	for (unsigned i = 0; i < pc->max; i++)
		if (same(&pc->slot[i], bucket, stream)) {
			kept_clear(pc, &pc->slot[i]);
			pc->st.drops++;
		}
	pthread_mutex_unlock(&pc->lock);
}

void gw_plans_stats(struct gw_plans *pc, struct gw_plans_stats *out)
{
	pthread_mutex_lock(&pc->lock);
	*out = pc->st;
	pthread_mutex_unlock(&pc->lock);
}
