/*
 * footers.h - the Gateway's footer cache (--serve-plan): verified footer
 * windows of settled objects, kept across reads and readers, their bytes
 * taken from the --footer-cache-bytes pool.
 *
 * For: gw/plan.c (through api/vend.h's api_vend_keep: a footer window a
 * plan names is looked up here before it is fetched, and put here once
 * bundle_footer_open() verified it).  Not for: chunks (never cached),
 * plans (gw/plancache.h).
 *
 * Locking: fc->lock guards the table, the LRU list and the counters; no
 * call blocks under it (a pool take under it waits 0).
 *
 * Invariants:
 *  1. A window is found only by the same (object key, revision, window
 *     offset, window length) it was put under: a replaced revision of an
 *     object (a new rev, or another window) never serves an old footer.
 *  2. Every byte the cache holds is taken from the pool (non-blocking);
 *     when the pool has no room, the least recently used windows are
 *     given back first, and a window that still finds no room is not
 *     kept.  gw_footers_shrink() gives back for a reader whose own take
 *     would otherwise wait on the cache.
 *  3. A get copies the window out: nothing the cache holds is borrowed
 *     past the call.
 */
#ifndef NOVAFS_GW_FOOTERS_H
#define NOVAFS_GW_FOOTERS_H

#include <stdint.h>

#include "gw/pool.h"

struct gw_footers;

struct gw_footers_stats {
	uint64_t hits, misses, puts, evictions;
	uint64_t bytes;   /* held now (taken from the pool) */
	uint64_t windows; /* kept now */
};

/* A cache over pool (borrowed until free).  NULL on ENOMEM. */
struct gw_footers *gw_footers_new(struct gw_pool *pool);
void gw_footers_free(struct gw_footers *fc); /* gives every byte back; NULL is a no-op */

/* The window of (key, rev) at object offset off, len bytes, copied into
 * dst (len bytes): 0, or -ENOENT (counted as a miss). */
int gw_footers_get(struct gw_footers *fc, const char *key, uint32_t rev, uint64_t off,
		   uint32_t len, void *dst);

/* Keep a copy of a verified window (invariant 2: or not). */
void gw_footers_put(struct gw_footers *fc, const char *key, uint32_t rev, uint64_t off,
		    const void *win, uint32_t len);

/* Give back least recently used windows until n bytes were given back or
 * none is left; the bytes given back. */
uint64_t gw_footers_shrink(struct gw_footers *fc, uint64_t n);

void gw_footers_stats(struct gw_footers *fc, struct gw_footers_stats *out);

#endif
