/*
 * streams.h - stream rows (bucket rows: meta/buckets.h, included).
 *
 * For: the namespace (streams by name and by id), stream ids,
 * a stream's class, trim watermark and tombstone.  Not for: where a
 * stream's bytes are (meta/refs.h) or its in-memory state
 * (engine/stream.h).
 *
 * Rows (keys in meta/keys.h; values versioned, little-endian, decoded
 * with src/base/wire.h):
 *   name     v1: stream id                       (absent once deleted)
 *   stream   v1: id, bucket, name, class, created_ns, trim_seq,
 *                trim_byte, deleted_ns (0 = live)
 *            v2: v1, then owner uid, gid (u32 each), mode (u16)
 *            v3: v2, then durable (u8: META_DURABLE_*)
 * Writers write v3 when the stream has a durable override, else v2 (so a
 * row without one stays readable by a v2 reader); a v1 row decodes as
 * root:root META_STREAM_MODE, v1 and v2 as META_DURABLE_DEFAULT.
 *
 * Invariants:
 *  1. Ids come from one counter and are never reused, so a stream that
 *     is deleted and created again under the same name is a new stream.
 *  2. A name row exists iff its stream row exists with deleted_ns == 0.
 *  3. A bucket is deleted only when it has no name rows; a stream is
 *     created only in an existing bucket.  Both are guaranteed under
 *     concurrency because creation rewrites the bucket row and deletion
 *     compares its version.
 *  4. trim_seq never decreases (meta_stream_set_trim compares).
 *  5. Deleting or trimming a stream queues it for reclamation (a
 *     ("rcl", id) row in the same transaction; engine/trim.c).
 *  6. A rename that replaces a stream tombstones exactly the stream its
 *     caller resolved, under the lease the caller holds on it (or while
 *     it stays vacant): the target's name row, stream row and lease row
 *     are compared in the one transaction that swaps the names, so the
 *     new name is never absent and no other star is left acking appends
 *     to a stream whose replacement committed.
 */
#ifndef NOVAFS_META_STREAMS_H
#define NOVAFS_META_STREAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "meta/buckets.h"
#include "meta/kv.h"
#include "src/base/names.h"

#define META_STREAM_NAME_MAX NV_STREAM_NAME_MAX

/* When a write() to the stream returns (user.nova.durable, DESIGN.md 5):
 * the mount's -o durable= (DEFAULT), at the ack (WRITE), at admission with
 * fsync()/close() waiting (FSYNC).  fs/handle.h's enum has these values. */
#define META_DURABLE_DEFAULT 0u
#define META_DURABLE_WRITE 1u
#define META_DURABLE_FSYNC 2u

struct meta_stream {
	uint64_t id;
	char bucket[META_BUCKET_NAME_MAX + 1];
	char name[META_STREAM_NAME_MAX + 1];
	uint8_t cls;
	uint64_t created_ns;
	uint64_t trim_seq;  /* records below this seq are gone */
	uint64_t trim_byte; /* stream offset of trim_seq */
	uint64_t deleted_ns;
	struct meta_owner own;
	uint8_t durable; /* META_DURABLE_* */
};

/*
 * Create a stream in bucket.  cls < 0 takes the bucket's default class;
 * own (borrowed) may be NULL: root:root META_STREAM_MODE.
 * 0 and *out; -EEXIST (name taken), -ENOENT (no bucket), kv error.
 */
int meta_stream_create(struct kv *kv, const char *bucket, const char *name,
		       int cls, uint64_t now_ns, const struct meta_owner *own,
		       struct meta_stream *out) __attribute__((warn_unused_result));
/* By name: 0 and *out, -ENOENT, kv error. */
int meta_stream_lookup(struct kv *kv, const char *bucket, const char *name,
		       struct meta_stream *out) __attribute__((warn_unused_result));
/* By id (deleted streams too): 0 and *out (+ *ver, may be NULL),
 * -ENOENT, kv error. */
int meta_stream_get(struct kv *kv, uint64_t id, struct meta_stream *out, uint64_t *ver)
	__attribute__((warn_unused_result));
/* Tombstone: remove the name row, stamp deleted_ns.  0, -ENOENT, kv error. */
int meta_stream_delete(struct kv *kv, uint64_t id, uint64_t now_ns)
	__attribute__((warn_unused_result));
/* Change the class (caller checked the stream is empty).  0, -ENOENT. */
int meta_stream_set_class(struct kv *kv, uint64_t id, unsigned cls)
	__attribute__((warn_unused_result));
/* Set the owner and mode (as meta_bucket_set_owner()).  0, -ENOENT. */
int meta_stream_set_owner(struct kv *kv, uint64_t id, const struct meta_owner *own)
	__attribute__((warn_unused_result));
/* Set the durable override (META_DURABLE_*; DEFAULT removes it).  0,
 * -EINVAL (not one of them), -ENOENT, kv error. */
int meta_stream_set_durable(struct kv *kv, uint64_t id, unsigned durable)
	__attribute__((warn_unused_result));
/*
 * Rename a live stream within its bucket: the name row moves, the
 * stream row (same id, same bytes) takes the new name, in one
 * transaction.  A live stream already named `to` is replaced: it is
 * tombstoned as by meta_stream_delete() in the same transaction (its id
 * in *replaced, 0 when none; may be NULL), unless noreplace (-EEXIST).
 * Unless noreplace, the caller names what it found under `to` and may
 * replace: expect_tid, that stream's id (0: none), and tlease_ver, the
 * version of its lease row (meta/leases.h) as the caller holds it (0:
 * vacant, no row).  The transaction compares both (invariant 6), so a
 * stream created under `to` since, or a lease taken or moved since, is
 * never tombstoned: -ESTALE, nothing changed (look again).
 * 0, -ENOENT (no stream `from`), -EEXIST, -ESTALE, kv error.  from == to
 * is 0.
 */
int meta_stream_rename(struct kv *kv, const char *bucket, const char *from, const char *to,
		       bool noreplace, uint64_t expect_tid, uint64_t tlease_ver, uint64_t now_ns,
		       uint64_t *replaced) __attribute__((warn_unused_result));
/* Raise the trim watermark.  0; -ERANGE when seq is below the current
 * one (never backwards); -ENOENT; kv error.  Equal is a no-op. */
int meta_stream_set_trim(struct kv *kv, uint64_t id, uint64_t seq, uint64_t byte)
	__attribute__((warn_unused_result));
/* Visit the live streams of a bucket in name order after `after`. */
typedef int (*meta_stream_fn)(void *arg, const struct meta_stream *s);
int meta_stream_list(struct kv *kv, const char *bucket, const char *after,
		     meta_stream_fn fn, void *arg) __attribute__((warn_unused_result));
/* Visit every stream row (deleted ones too) in id order: for fsck and
 * reclamation. */
int meta_stream_list_all(struct kv *kv, meta_stream_fn fn, void *arg)
	__attribute__((warn_unused_result));

/* Streams queued for reclamation (deleted or trimmed), in id order; fn
 * may call back into the kv. */
typedef int (*meta_id_fn)(void *arg, uint64_t id);
int meta_reclaim_streams(struct kv *kv, meta_id_fn fn, void *arg)
	__attribute__((warn_unused_result));
/* Done with a queued stream: drop its queue row, and its stream row and
 * ref hints (meta/refs.h) too when drop_row (a deleted stream whose
 * history is gone). */
int meta_reclaim_stream_done(struct kv *kv, uint64_t id, bool drop_row)
	__attribute__((warn_unused_result));

/* Value codecs, exposed for tests and fuzzing.  Decoders: 0 or -EBADMSG. */
int meta_stream_encode(const struct meta_stream *s, struct nv_buf *out)
	__attribute__((warn_unused_result));
int meta_stream_decode(const void *p, size_t n, struct meta_stream *s)
	__attribute__((warn_unused_result));
#endif
