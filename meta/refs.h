/*
 * refs.h - span refs (and, with settlement, catalog rows) and the byte
 * index beside them.
 *
 * For: the metastore's answer to "where are the bytes of stream X at seq
 * S / byte B" below the ref frontier.  A catalog row (written by the
 * settle, engine/settle/commit.c) shares the keyspace: keyed at the first seq
 * it covers, it lists a run of settled objects; a floor lookup lands on
 * either kind and the read has the same shape from both.  A span ref is written by the
 * absorb per (batch, stream): keyed (stream, first seq of the stream in
 * the batch), it carries the chain identity (class, star, epoch), the
 * seq and byte extent [first, end), the newest record timestamp, and a
 * per-slot index: for each slot of the batch holding the stream, the
 * slot number, the stream's first seq and first byte in it, and the
 * slot's footer window.  Not for: the tail window (engine/flight.h).
 *
 * The byte index row ("rby", stream, first_byte, first_seq) carries the
 * same value as the ref row, so a FUSE read finds the ref holding byte B with one
 * floor lookup (meta_ref_floor_byte()).  Both rows are written and
 * deleted together, in one transaction: meta_ref_txn_put() and
 * meta_ref_txn_del() / meta_ref_txn_del_ver() are the only writers of
 * either space (and of the hints below), so settle and trim never touch
 * a twin by hand.
 *
 * Hints ("rhn", stream, kind): meta_ref_txn_put() also writes, in the
 * same transaction, where the newest row of the ref's kind starts (its
 * first_seq: the absorb's newest span ref, the settle's newest catalog
 * row), so a stream load costs a few cheap reads, never its history: on
 * etcd a descending range reads its whole range first (meta/etcd/kv.c).
 * meta_ref_last() reads the span hint and the first two rows at or after
 * it (one ascending range of limit 2): one row is the last; none, the
 * last starts below (a windowed floor); two, the hint is stale.
 * meta_ref_settled_end() reads the catalog hint, the row starting there
 * and the one starting where it ends (point reads): a catalog row
 * followed by a live span ref (or nothing), with the row holding
 * trim_seq a catalog row too, ends the settled history (the catalog rows
 * between are contiguous: settlement extends the last one).  Otherwise
 * it scans by cheap reads (settled_scan() in refs.c: a windowed floor at
 * trim_seq, then row after row by invariant 1, stopping at the first
 * live span ref, which for a stream without catalog rows is the first).
 * meta_ref_last()'s answer is checked against the rows without relying
 * on invariant 1; a missing or stale span hint (a crash between the
 * parts of a split batch, rows from before hints existed) falls back to
 * the floor over the whole stream it replaces.  The hints of
 * a deleted stream go with its stream row (meta_reclaim_stream_done()).
 *
 * Record timestamps are non-decreasing per stream (engine/chain.c), so
 * max_ts is all a time lookup needs: the records of a ref lie in
 * (previous ref's max_ts, max_ts].
 *
 * Invariants:
 *  1. Refs of a stream are contiguous: a ref's end_seq/end_byte is the
 *     next ref's first_seq/first_byte.  The last ref's end is the ref
 *     frontier.
 *  2. A ref is immutable once written except by settlement's CAS into a
 *     catalog row; re-running an absorb batch writes byte-identical rows.
 *  3. slots are in ascending slot order and their first_seq/first_byte
 *     ascend from the ref's first_seq/first_byte.
 */
#ifndef NOVAFS_META_REFS_H
#define NOVAFS_META_REFS_H

#include <stdint.h>

#include "meta/chains.h"
#include "meta/kv.h"

#define META_REF_SPAN 1
#define META_REF_CATALOG 2
#define META_REF_SLOTS_MAX 65536
#define META_REF_OBJS_MAX 1024 /* settled objects per catalog row */

struct meta_ref_slot {
	uint64_t slot;
	uint64_t first_seq;
	uint64_t first_byte;
	uint64_t footer_off;
	uint32_t footer_len;
};

/*
 * One settled object of a catalog row.  Its key is derived, never stored:
 * streams/<bucket>/<stream id>/<epoch: 16 hex>/<first_seq: 16 hex>[~<rev>]
 * (meta_settled_key()); rev 0 has no suffix.  The object ends where the
 * next one (or the row) begins.
 */
struct meta_ref_obj {
	uint64_t first_seq;
	uint64_t first_byte;
	uint64_t epoch;      /* of the era that first wrote it */
	uint32_t rev;        /* 0, then 1, 2... for tail extensions */
	uint64_t footer_off; /* its footer window */
	uint32_t footer_len;
	uint64_t max_ts;
};

struct meta_ref {
	uint64_t stream_id;
	uint8_t kind; /* META_REF_SPAN or META_REF_CATALOG */
	uint64_t first_seq, end_seq;
	uint64_t first_byte, end_byte;
	uint64_t max_ts;
	uint8_t cls;
	char star[META_STAR_MAX + 1];
	uint64_t epoch;
	uint32_t nslots;
	uint32_t slots_cap;
	struct meta_ref_slot *slots; /* owned; meta_ref_clear() frees */
	/* META_REF_CATALOG: */
	char bucket[64];             /* the stream's bucket, for object keys */
	uint32_t nobjs;
	uint32_t objs_cap;
	struct meta_ref_obj *objs;   /* owned */
};

/* Append a settled object to a catalog row.  0, -ENOMEM, -E2BIG. */
int meta_ref_add_obj(struct meta_ref *r, const struct meta_ref_obj *o)
	__attribute__((warn_unused_result));
/* Which position a search is by: a record's seq or its stream byte. */
enum meta_ref_key { META_REF_BY_SEQ, META_REF_BY_BYTE };

/* Index of the object holding the seq or byte pos (inside the row): the
 * last object whose first_seq / first_byte is <= pos. */
uint32_t meta_ref_obj_find(const struct meta_ref *r, enum meta_ref_key key, uint64_t pos);
/* End seq/byte of object i (the next object's start, or the row's end). */
uint64_t meta_ref_obj_end_seq(const struct meta_ref *r, uint32_t i);
uint64_t meta_ref_obj_end_byte(const struct meta_ref *r, uint32_t i);

/* The derived key of a settled object into buf (cap >= META_SETTLED_KEY_MAX). */
#define META_SETTLED_KEY_MAX 160
char *meta_settled_key(char *buf, size_t cap, const char *bucket, uint64_t stream,
		       uint64_t epoch, uint64_t first_seq, uint32_t rev);

void meta_ref_init(struct meta_ref *r);
void meta_ref_clear(struct meta_ref *r); /* frees slots, re-inits */

/* Append a slot entry.  0 or -ENOMEM / -E2BIG. */
int meta_ref_add_slot(struct meta_ref *r, const struct meta_ref_slot *s)
	__attribute__((warn_unused_result));

/* Index of the slot entry holding the seq or byte pos (which must lie
 * inside the ref): the last entry whose first_seq / first_byte is <= pos. */
uint32_t meta_ref_slot_find(const struct meta_ref *r, enum meta_ref_key key, uint64_t pos);

int meta_ref_encode(const struct meta_ref *r, struct nv_buf *out)
	__attribute__((warn_unused_result));
/* Decode a value for stream; r must be initialised (it is cleared
 * first).  0 or -EBADMSG / -ENOMEM; checks invariant 3 and extents. */
int meta_ref_decode(const void *p, size_t n, uint64_t stream, struct meta_ref *r)
	__attribute__((warn_unused_result));

/* Add the ref row and its byte-index row to t (either kind). */
int meta_ref_txn_put(struct kv_txn *t, const struct meta_ref *r)
	__attribute__((warn_unused_result));
/* Add the deletion of both rows of the ref at (stream, first_seq,
 * first_byte) to t: the ref row and its byte-index twin always go
 * together (the one function that knows the twin rule is in refs.c). */
int meta_ref_txn_del(struct kv_txn *t, uint64_t stream, uint64_t first_seq,
		     uint64_t first_byte) __attribute__((warn_unused_result));
/* The same, conditioned on the ref row still being at version ver (the
 * commit fails -ECANCELED otherwise). */
int meta_ref_txn_del_ver(struct kv_txn *t, uint64_t stream, uint64_t first_seq,
			 uint64_t first_byte, uint64_t ver) __attribute__((warn_unused_result));
/* Add "the row keyed (stream, first_seq) is still at version ver" to t. */
int meta_ref_txn_cmp_ver(struct kv_txn *t, uint64_t stream, uint64_t first_seq, uint64_t ver)
	__attribute__((warn_unused_result));

/* The row keyed exactly (stream, first_seq), with its version (for a
 * CAS).  0, -ENOENT, -EBADMSG, kv error. */
int meta_ref_get(struct kv *kv, uint64_t stream, uint64_t first_seq, struct meta_ref *r,
		 uint64_t *ver) __attribute__((warn_unused_result));

/* Where the stream's settled history ends: the end of its last catalog
 * row when catalog rows start the stream's rows (they always do, after
 * span refs wholly below trim_seq that reclamation has not removed yet),
 * else 0.  0 and *seq, *byte, or a kv error. */
int meta_ref_settled_end(struct kv *kv, uint64_t stream, uint64_t trim_seq, uint64_t *seq,
			 uint64_t *byte) __attribute__((warn_unused_result));

/* The ref with the greatest first_seq <= seq / first_byte <= byte, or the
 * stream's last ref.  r initialised by the caller.  0, -ENOENT, -EBADMSG,
 * kv error. */
int meta_ref_floor_seq(struct kv *kv, uint64_t stream, uint64_t seq, struct meta_ref *r)
	__attribute__((warn_unused_result));
int meta_ref_floor_byte(struct kv *kv, uint64_t stream, uint64_t byte, struct meta_ref *r)
	__attribute__((warn_unused_result));
int meta_ref_last(struct kv *kv, uint64_t stream, struct meta_ref *r)
	__attribute__((warn_unused_result));

/* The refs a sequential reader at stream byte byte reads next: into
 * out[0..*n), *n <= cap, in byte order and contiguous, out[0] the ref
 * holding byte (refs holding no byte skipped at the start), and no more
 * after the one that brings their slots (catalog: objects) to
 * max_slots.  out[] initialised by the caller, who owns the refs put
 * there (meta_ref_clear() each).  One ascending range of the byte index
 * when a ref starts at byte (a window read to its end continues so),
 * else a floor too (by seq, at the seq before the next ref's: a few
 * keys; by byte when there is no next ref); *calls says how many
 * requests went out.
 * 0, -ENOENT (no ref holds byte), -EINVAL (cap 0), -EBADMSG, kv error;
 * on an error *n is 0. */
int meta_ref_window_byte(struct kv *kv, uint64_t stream, uint64_t byte, struct meta_ref *out,
			 size_t cap, size_t max_slots, size_t *n, unsigned *calls)
	__attribute__((warn_unused_result));

/* Visit the refs of a stream with first_seq >= from_seq in order, at most
 * limit (0 = all).  fn gets a decoded ref (borrowed for the call). */
typedef int (*meta_ref_fn)(void *arg, const struct meta_ref *r);
int meta_ref_list(struct kv *kv, uint64_t stream, uint64_t from_seq, size_t limit,
		  meta_ref_fn fn, void *arg) __attribute__((warn_unused_result));

#endif
