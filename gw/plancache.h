/*
 * plancache.h - the plans a --serve-plan Gateway was vended, kept for the
 * next pages of the same reader (or any other at a position they cover).
 *
 * For: gw/plan.c (through api/vend.h's api_vend_keep: before a star is
 * asked for a plan at a position, a kept plan of the stream one of whose
 * entries holds it answers instead).  Not for: fetching what a plan names
 * (api/vend.c), footers (gw/footers.h).
 *
 * Locking: pc->lock guards the slots and the counters; nothing blocks
 * under it.
 *
 * Invariants:
 *  1. Bounded: at most max plans (each at most PLAN_ENTRIES_MAX entries);
 *     a put past it replaces the least recently used.  max 0: nothing is
 *     kept (every position asks a star, as before the cache).
 *  2. A kept plan answers only while it is more than GW_PLAN_KEEP_MARGIN_S
 *     from its expires, and only for a position inside one of its
 *     entries (never at or past its last vended record: the residual and
 *     the plan's cursor are a star's to say again).
 *  3. A stale plan (api/vend.c met a replaced revision or an expired
 *     plan) is dropped with every kept plan of its stream
 *     (gw_plans_drop()): the re-plan goes to a star.
 *  4. A get copies the plan out (URLs too): nothing kept is borrowed.
 */
#ifndef NOVAFS_GW_PLANCACHE_H
#define NOVAFS_GW_PLANCACHE_H

#include <stdint.h>

#include "api/plan.h"  /* struct read_plan (engine/plan.h) */
#include "api/vend.h"  /* enum meta_ref_key (meta/refs.h) */

#define GW_PLAN_KEEP_MARGIN_S 3

struct gw_plans;

struct gw_plans_stats {
	uint64_t hits, misses, puts, drops;
	uint64_t kept; /* plans kept now */
};

/* A cache of at most max plans.  NULL on ENOMEM. */
struct gw_plans *gw_plans_new(unsigned max);
void gw_plans_free(struct gw_plans *pc); /* NULL is a no-op */

/* A copy into *p (plan_clear() after) of a kept plan of bucket/stream
 * with an entry holding pos (by seq, or the stream byte), at now_ns
 * (wall clock): 0, or -ENOENT (a miss; an expired plan met is dropped). */
int gw_plans_get(struct gw_plans *pc, const char *bucket, const char *stream,
		 enum meta_ref_key by, uint64_t pos, uint64_t now_ns, struct read_plan *p);

/* p was just vended for bucket/stream: keep a copy (kept plans of the
 * stream whose entries overlap p's, or of another stream id: a deleted
 * stream of the same name, are replaced by it).  A plan of no entries is
 * not kept. */
void gw_plans_put(struct gw_plans *pc, const char *bucket, const char *stream,
		  const struct read_plan *p);

/* Invariant 3. */
void gw_plans_drop(struct gw_plans *pc, const char *bucket, const char *stream);

void gw_plans_stats(struct gw_plans *pc, struct gw_plans_stats *out);

#endif
