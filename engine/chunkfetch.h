/*
 * chunkfetch.h - a cold object's footer and chunks, fetched through the
 * read cache.
 *
 * For: the read path (engine/read.c), once it has located the object (a
 * transit slot or a settled object) holding a stream position: the
 * footer window (cached), the entry holding the position, and its chunk
 * decoded and indexed (cached).  Where a GET costs a round trip (S3), a
 * small object that is mostly the stream's is read whole: its footer and
 * every chunk of the stream in one GET, where a footer and then a chunk
 * took two.  Not for: locating objects (engine/read.c), verifying bytes
 * (engine/objread.h, engine/bundle.h), the cache itself (engine/rcache.h).
 *
 * Invariants:
 *  1. Every footer and chunk returned or cached passed verification
 *     (objread.h invariant 2); a chunk that fails in the copy read whole
 *     is read again on its own, around the bad copy.
 *  2. An object is read whole only when its bytes up to the footer's end
 *     are at most whole_max and other streams' bytes in it at most the
 *     stream's own or 64 KiB (framing, small records), so a whole read
 *     never costs more than about twice the bytes the reader asked for.
 *  3. Errors: -EIO for a missing or corrupt object (logged, counted in
 *     corrupt_objects), -ESTALE for one gone behind a reader's ref window
 *     (cf_obj.cached: the caller asks the metastore again), -ENOMEM.
 *
 * No state of its own: thread-safe as the store and the cache are.
 */
#ifndef NOVAFS_ENGINE_CHUNKFETCH_H
#define NOVAFS_ENGINE_CHUNKFETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/bundle.h"
#include "engine/rcache.h"
#include "engine/stats.h"
#include "engine/store/store.h"

struct chunkfetch {
	struct store *store;    /* borrowed */
	struct nv_stats *stats; /* borrowed: footer, chunk and whole fetches */
	struct rcache *cache;   /* borrowed */
	uint32_t whole_max;     /* read_cfg.whole_max (0: never whole) */
};

/* One object the read path located. */
struct cf_obj {
	const char *key;
	uint64_t footer_off;
	uint32_t footer_len;
	uint64_t share; /* the stream's bytes in it; 0 unknown (never whole) */
	bool cached;    /* located through a reader's ref window: may be gone */
};

/*
 * The footer entry of o holding stream's byte (by_seq: record) off into
 * *ent, and its decoded chunk (*chunk: a reference; *hit when the cache
 * had it).  0 or an error of invariant 3.
 */
int chunkfetch_get(const struct chunkfetch *cf, const struct cf_obj *o, uint64_t stream,
		   bool by_seq, uint64_t off, struct bundle_entry *ent, struct rc_blob **chunk,
		   bool *hit) __attribute__((warn_unused_result));

#endif
