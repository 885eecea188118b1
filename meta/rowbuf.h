/*
 * rowbuf.h - what the namespace row modules share (meta/buckets.c,
 * meta/streams.c; not included elsewhere): row versions, the owner
 * codec, the row buffers a CAS build works in, the id counter and the
 * paged "keys after a name" range.
 *
 * For: writing each of these once.  Not for: callers of the namespace
 * (meta/buckets.h, meta/streams.h).
 *
 * Invariants:
 *  1. Every multi-row change of a namespace row is one kv transaction
 *     that compares the versions it read, retried at most
 *     META_CAS_RETRIES times on -ECANCELED by kv_cas_run() through
 *     meta_rows_cas(); each change is a build function that re-reads and
 *     re-decides.
 *  2. The id counter only grows; ids start at 1.
 */
#ifndef NOVAFS_META_ROWBUF_H
#define NOVAFS_META_ROWBUF_H

#include <stdint.h>

#include "meta/kv.h"
#include "meta/owner.h"
#include "src/base/buf.h"
#include "src/base/wire.h"

#define META_ROW_V1 1
#define META_ROW_V2 2 /* v1 + owner (buckets.h, streams.h) */
#define META_ROW_V3 3 /* stream rows: v2 + durable (streams.h) */
#define META_CAS_RETRIES 64


/* The key and value buffers of one CAS build (KV_KEY_MAX / KV_VAL_MAX
 * limits).  Set up and freed around the whole run by meta_rows_cas(). */
struct meta_rowbufs {
	struct nv_buf k, v, k2, v2, k3, v3;
};

void meta_rowbufs_init(struct meta_rowbufs *b);
void meta_rowbufs_free(struct meta_rowbufs *b);

/* The owner after a row's v1 fields: write (0 or a buffer error), read
 * (a v1 row's owner is root:root with mode dflt; a mode above 07777 is
 * left for the decoder to refuse), and own or the default (NULL: root:
 * root dflt; mode bits above 07777 dropped). */
int meta_owner_write(struct nv_buf *out, const struct meta_owner *o)
	__attribute__((warn_unused_result));
void meta_owner_read(struct nv_rd *r, uint8_t ver, uint32_t dflt, struct meta_owner *o);
void meta_owner_or_default(const struct meta_owner *own, uint32_t dflt, struct meta_owner *out);

/* Read bucket name's row into b->v (its key in b->k), *ver its version.
 * 0, -ENOENT, kv error. */
int meta_bucket_row_read(struct kv *kv, struct meta_rowbufs *b, const char *name,
			 uint64_t *ver) __attribute__((warn_unused_result));

/* kv_cas_run(kv, how, arg) with the row buffers b (inside arg) set up
 * around it.  Its result. */
int meta_rows_cas(struct kv *kv, const struct kv_cas *how, void *arg, struct meta_rowbufs *b)
	__attribute__((warn_unused_result));

/* Read the id counter into k/v: *next is the id to hand out, *ver its
 * version (0 when never written).  0 or a kv error (-EBADMSG). */
int meta_id_counter_read(struct kv *kv, struct nv_buf *k, struct nv_buf *v, uint64_t *next,
			 uint64_t *ver) __attribute__((warn_unused_result));
/* Add "counter version == ver, then counter = next" to t (k: its key). */
int meta_id_counter_txn_put(struct kv_txn *t, struct nv_buf *k, uint64_t next, uint64_t ver)
	__attribute__((warn_unused_result));

/* Visit the keys of space strictly after the name `after` ("" or NULL:
 * all), in order, with kv_range()'s fn.  Its result. */
int meta_list_after(struct kv *kv, struct nv_buf *space, const char *after, kv_visit_fn fn,
		    void *arg) __attribute__((warn_unused_result));

#endif
