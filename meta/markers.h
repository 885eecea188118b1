/*
 * markers.h - batch markers.
 *
 * For: the absorb's durable note that a batch of a chain's slots is not
 * settled yet.  One marker per absorb batch, keyed (class, star, epoch,
 * first slot of the batch).  It records the batch's slot range, its
 * birth and ripening times, whether a stream in it crossed the
 * un-settled trigger, and the streams it holds with each one's first seq,
 * bytes in the batch and ripening time.  Its existence is the "not settled" flag that
 * holds trim-check back (engine/trim.c); the settle resolves (deletes)
 * it.  Not for: scheduling state that is not durable.
 *
 * Invariants:
 *  1. Markers of one chain cover disjoint, ascending slot ranges
 *     [first_slot, end_slot), written in order by the absorb.
 *  2. A marker is written in the same transaction that advances its
 *     chain's checkpoint past end_slot (engine/absorb.c), so a slot below
 *     the checkpoint is either covered by a marker or settled.
 *  3. streams are sorted by stream id, each at most once.
 *  4. ripe_ns (the marker's) is the smallest of its streams' ripe_ns:
 *     each stream ripens on its own (its own jitter, its own round, or
 *     the age cap), the marker when its first stream does.
 */
#ifndef NOVAFS_META_MARKERS_H
#define NOVAFS_META_MARKERS_H

#include <stdint.h>

#include "meta/chains.h"
#include "meta/kv.h"

/* Streams per marker: a marker's value (32 bytes a stream) stays below
 * the metastore's KV_VAL_MAX; the absorb splits batches to fit. */
#define META_MARKER_STREAMS_MAX ((KV_VAL_MAX - 256) / 32)

struct meta_marker_stream {
	uint64_t stream_id;
	uint64_t first_seq; /* the key of the stream's span ref for the batch */
	uint64_t bytes;     /* the stream's body bytes in the batch */
	uint64_t ripe_ns;   /* when this stream's part ripens (wall clock) */
};

struct meta_marker {
	uint8_t cls;
	char star[META_STAR_MAX + 1];
	uint64_t epoch;
	uint64_t first_slot, end_slot; /* [first, end) */
	uint64_t birth_ns, ripe_ns;    /* wall clock */
	uint8_t crossed;               /* a stream crossed the trigger */
	uint32_t nstreams;
	struct meta_marker_stream *streams; /* owned */
};

void meta_marker_clear(struct meta_marker *m); /* frees streams, zeroes */

/* 0, -E2BIG (more than META_MARKER_STREAMS_MAX streams), buffer errors. */
int meta_marker_encode(const struct meta_marker *m, struct nv_buf *out)
	__attribute__((warn_unused_result));
/* m is overwritten (not freed first).  0, -EBADMSG, -ENOMEM. */
int meta_marker_decode(const void *p, size_t n, struct meta_marker *m)
	__attribute__((warn_unused_result));

int meta_marker_txn_put(struct kv_txn *t, const struct meta_marker *m)
	__attribute__((warn_unused_result));
int meta_marker_txn_del(struct kv_txn *t, unsigned cls, const char *star,
			uint64_t epoch, uint64_t first_slot) __attribute__((warn_unused_result));

/*
 * Make stream's part of the chain's marker holding slot ripen by ripe_ns
 * (wall clock; never later than it already does; the marker's own ripe
 * time follows its first stream).  1 when the marker was rewritten, 0
 * when it already ripened by then or does not hold the stream, -ENOENT
 * when no marker holds slot (resolved already), or a kv error.  Used to
 * settle a stream's earlier history with its due batch (settle_nudge(),
 * engine/settle/era.c).
 */
int meta_marker_ripen(struct kv *kv, unsigned cls, const char *star, uint64_t epoch,
		      uint64_t slot, uint64_t stream, uint64_t ripe_ns)
	__attribute__((warn_unused_result));

/* Visit the markers of one chain in slot order; fn gets a decoded marker
 * (borrowed for the call). */
typedef int (*meta_marker_fn)(void *arg, const struct meta_marker *m);
int meta_marker_list(struct kv *kv, unsigned cls, const char *star, uint64_t epoch,
		     meta_marker_fn fn, void *arg) __attribute__((warn_unused_result));

#endif
