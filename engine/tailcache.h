/*
 * tailcache.h - the tail window cache: byte-budgeted memory of recently
 * acknowledged run buffers, per stream.
 *
 * For: serving hot reads (a follower at the tail, a reader just behind
 * it) from memory, with no footer and no metastore read.  At
 * acknowledgement the chain inserts each run of the flight (the flight's
 * own buffers, never a copy); the cache keeps them past the absorb until
 * the budget evicts them, oldest-admitted first, so a follower up to
 * budget / ingest behind is still served from memory.  Not for: being
 * authoritative: a miss falls back to the flight index or the refs.
 *
 * Invariants:
 *  1. bytes (the sum of rbuf_mem() of cached runs) <= budget after every
 *     insert returns.
 *  2. A flight whose runs together exceed the budget is not inserted at
 *     all (tail_cache_skipped counts it), so one huge flight cannot flush
 *     everything else.
 *  3. Per stream, cached runs are contiguous in seq order except where
 *     eviction removed a prefix; eviction order is global insertion
 *     order, which per stream is seq order.
 *  4. Cached bytes are immutable and acknowledged, so a hit is always
 *     safe to serve.
 */
#ifndef NOVAFS_ENGINE_TAILCACHE_H
#define NOVAFS_ENGINE_TAILCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/flight.h"
#include "engine/stats.h"

struct tailcache;

/* New cache of budget bytes (0 disables caching).  stats borrowed. */
struct tailcache *tailcache_new(uint64_t budget, struct nv_stats *stats);
void tailcache_free(struct tailcache *tc); /* NULL is a no-op */

/* Insert every run of a released flight (the cache takes its own
 * references), or none if the flight is larger than the budget. */
void tailcache_insert_flight(struct tailcache *tc, const struct flight *f);

/*
 * Copy stream bytes at offset off from one cached run into dst: at most
 * len bytes and max_recs records.  Returns the bytes copied, 0 on a miss.
 */
size_t tailcache_read(struct tailcache *tc, uint64_t stream, uint64_t off, void *dst,
		      size_t len, uint32_t max_recs);

/* Forget everything cached for a stream (deletion, trim). */
void tailcache_drop_stream(struct tailcache *tc, uint64_t stream);

/* Bytes currently held (a gauge). */
uint64_t tailcache_bytes(struct tailcache *tc);

#endif
