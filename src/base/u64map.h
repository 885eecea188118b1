/*
 * u64map.h - a hash map from uint64_t keys to caller-owned pointers.
 *
 * For: every in-memory table of the tree keyed by a 64-bit number: the
 * stream table (engine/stream.c, by stream id), the tail cache's streams
 * (engine/tailcache.c), and the tables keyed by a 64-bit digest of a
 * longer key (engine/rcache.c, engine/fsck.c), which chain their own
 * collisions behind the value.  Not for: locking (callers lock), memory
 * budgets (the caller counts what its values cost), or owning values
 * (the map never frees or dereferences a value).
 *
 * Structure: open addressing with linear probing over a power-of-two
 * array of slots; removal leaves a tombstone, so a cursor of
 * u64map_next() stays valid across removals; the array is rebuilt
 * (doubled when live entries pass half of it, else at the same size to
 * drop tombstones) when live entries plus tombstones pass 3/4.
 *
 * Invariants:
 *  1. Every key is in the map at most once; a value is never NULL (NULL
 *     is "absent" for u64map_get()).
 *  2. A failed insert (-ENOMEM) leaves the map unchanged.
 *  3. u64map_next() visits every entry present for the whole iteration
 *     exactly once, in no particular order, while the caller removes
 *     entries (the one just returned or any other) but inserts none.
 */
#ifndef NOVAFS_BASE_U64MAP_H
#define NOVAFS_BASE_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64map;

/* New empty map with room for about hint entries before it grows (0: a
 * small default).  Caller owns it (u64map_free()).  NULL on ENOMEM. */
struct u64map *u64map_new(size_t hint);

/* Free the map; the values are the caller's and are not touched.  NULL
 * is a no-op. */
void u64map_free(struct u64map *m);

/* The value stored under key, or NULL.  Borrowed: the map never owns it. */
void *u64map_get(const struct u64map *m, uint64_t key);

/*
 * Store val (not NULL; the caller keeps ownership) under key, replacing
 * any value there.  0, or -ENOMEM when the map had to grow and could not
 * (nothing changed, invariant 2).  Replacing the value of a key already
 * present never allocates and always returns 0.
 */
int u64map_put(struct u64map *m, uint64_t key, void *val)
	__attribute__((warn_unused_result));

/* Remove key.  Returns the value it had (now the caller's alone), or
 * NULL when absent.  Never allocates. */
void *u64map_remove(struct u64map *m, uint64_t key);

/* Number of entries. */
size_t u64map_count(const struct u64map *m);

/*
 * Iterate: start with *cursor = 0; each call that returns true stores
 * one entry in *key and *val (either may be NULL) and advances *cursor.
 * false when every entry was visited.  See invariant 3 for what the
 * caller may change meanwhile.
 */
bool u64map_next(const struct u64map *m, size_t *cursor, uint64_t *key, void **val);

/* The map's 64-bit mixer (murmur3's fmix64), for callers that fold a
 * longer key into a u64 digest. */
uint64_t u64map_mix(uint64_t x);

/* FNV-1a of a NUL-terminated string continuing from h (start with
 * U64MAP_FNV_SEED): the digest half of a string-keyed table. */
#define U64MAP_FNV_SEED 1469598103934665603ULL
uint64_t u64map_fnv_str(uint64_t h, const char *s);

#endif
