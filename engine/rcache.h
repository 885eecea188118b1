/*
 * rcache.h - the read path's byte-budgeted caches of fetched footer
 * windows and decoded chunks.
 *
 * For: making a cold read cost one ranged GET per footer and per chunk,
 * however many FUSE requests and readers touch them, and letting the
 * prefetcher land chunks before the reader asks.  Keyed by (object key,
 * offset in the object); values are immutable refcounted blobs.  Not
 * for: acknowledged-but-unabsorbed bytes (engine/tailcache.h).
 *
 * Loading is single-flight: the first thread to miss an entry loads it;
 * later threads wanting the same entry wait for that load instead of
 * issuing a second GET.
 *
 * Invariants:
 *  1. bytes (sum of blob sizes of cached entries) <= budget after every
 *     fill; least recently used entries go first.  Entries being loaded
 *     and blobs still referenced by readers are not counted once
 *     evicted (a reader's reference keeps the memory alive briefly).
 *  2. A failed load is not cached: the next reader tries again.
 *  2a. An entry is never freed while threads that waited for its load
 *     still have to look at it (entry->waiters > 0): eviction passes it
 *     over, so the budget may be exceeded by such entries until their
 *     waiters ran (bounded by the number of reader threads).
 *  3. Objects are immutable, so an entry never goes stale; entries of
 *     deleted objects age out.
 */
#ifndef NOVAFS_ENGINE_RCACHE_H
#define NOVAFS_ENGINE_RCACHE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct rcache;
struct rc_entry;

/* A cached value.  data is immutable once filled. */
struct rc_blob {
	atomic_int refs;
	size_t cap;        /* bytes allocated, header included */
	size_t len;
	uint32_t nrec;     /* decoded chunks: records, and ... */
	uint32_t *rec_off; /* ... offset of each frame (points into this blob) */
	uint8_t *data;     /* points into this blob */
};

/* A blob with room for len data bytes and nrec offsets (refs = 1), maybe
 * the recycled memory of a freed one (rcache.c: the blob pool).  NULL on
 * ENOMEM. */
struct rc_blob *rc_blob_new(size_t len, uint32_t nrec);
void rc_blob_ref(struct rc_blob *b);
void rc_blob_unref(struct rc_blob *b); /* NULL is a no-op */

struct rcache *rcache_new(uint64_t budget);
void rcache_free(struct rcache *rc); /* no loads may be in progress */

/*
 * Find (key, off).  Returns 0 with *out (a reference for the caller) on a
 * hit; 1 with *loading when the caller must load the entry and then call
 * rcache_fill() exactly once; or, when another thread is loading it,
 * waits and returns its result (0, or that load's error).  -ENOMEM.
 */
int rcache_get(struct rcache *rc, const char *key, uint64_t off, struct rc_blob **out,
	       struct rc_entry **loading) __attribute__((warn_unused_result));

/* Like rcache_get() but never waits and never loads: 0 and *out on a hit,
 * -ENOENT otherwise (used to test whether a prefetch is needed). */
int rcache_peek(struct rcache *rc, const char *key, uint64_t off, struct rc_blob **out);

/* Finish a load: blob (its reference passes to the cache; may be NULL
 * when err != 0) or err. */
void rcache_fill(struct rcache *rc, struct rc_entry *e, struct rc_blob *blob, int err);

uint64_t rcache_bytes(struct rcache *rc);

#endif
