/*
 * fetch.h - the settle job's fetch cache: whole transit bundles copied
 * to local scratch files, each read from the store once per era.
 *
 * For: engine/settle/era.c, which warms exactly an era's bundles before
 * assembling, so every stream's small extents and every footer come from
 * local disk.  Not for: serving reads (engine/read.c has its own cache).
 *
 * Invariants:
 *  1. bytes (the sum of cached file sizes and of copies in progress)
 *     stays within the budget: a copy reserves each chunk before it GETs
 *     it, and an object that does not fit is not cached (-ENOBUFS; the
 *     caller reads it from the store).  Nothing is evicted: the settle
 *     job empties the cache at the end of each era (fetch_cache_clear()).
 *  2. A cached file is the whole object (read by ranged GETs until one
 *     comes back short, without a HEAD) and a whole bundle (its trailer
 *     and footer verify) before it is visible; partial files never are.
 *     A copy that fails the check is -EBADMSG, and a bucket set's other
 *     zones are tried (store_read_copies()).
 *  3. Files live in one private scratch directory, emptied at open and
 *     at close.
 */
#ifndef NOVAFS_ENGINE_FETCH_H
#define NOVAFS_ENGINE_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "engine/store/store.h"

struct fetch_cache;

/* Open over scratch directory dir (created; emptied).  A budget of 0
 * caches nothing (every warm is -ENOBUFS: reads go to the store).  0 and
 * *out. */
int fetch_cache_new(struct store *st, const char *dir, uint64_t budget,
		    struct fetch_cache **out) __attribute__((warn_unused_result));
void fetch_cache_free(struct fetch_cache *fc); /* removes the files */

/* Copy object key into the cache (no-op when present).  0, -ENOBUFS
 * (over the budget), -EBADMSG (no copy is a whole bundle), store errors. */
int fetch_cache_warm(struct fetch_cache *fc, const char *key) __attribute__((warn_unused_result));

/* Read [off, off+len) of key: from the cached file when present, else
 * from the store.  0 and exactly len bytes, or -EBADMSG (short), store
 * or I/O errors. */
int fetch_cache_read(struct fetch_cache *fc, const char *key, uint64_t off, size_t len,
		     void *dst) __attribute__((warn_unused_result));

/* Size of an object (cached or not). */
int fetch_cache_size(struct fetch_cache *fc, const char *key, uint64_t *size)
	__attribute__((warn_unused_result));

/* Drop every cached file (end of an era). */
void fetch_cache_clear(struct fetch_cache *fc);

uint64_t fetch_cache_bytes(struct fetch_cache *fc);

#endif
