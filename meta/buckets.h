/*
 * buckets.h - bucket rows, and the owner every bucket and stream row
 * carries.
 *
 * For: creating, reading, listing and deleting buckets; a bucket's
 * default class and owner.  Not for: streams (meta/streams.h, which
 * includes this), the shared row helpers (meta/rowbuf.h).
 *
 * Row (key in meta/keys.h; value versioned, little-endian):
 *   bucket   v1: id, created_ns, default class
 *            v2: v1, then owner uid, gid (u32 each), mode (u16)
 * Writers write v2; a v1 row decodes as root:root META_BUCKET_MODE.
 *
 * Invariants:
 *  1. A bucket is deleted only when it has no name rows (streams); a
 *     stream is created only in an existing bucket.  Both hold under
 *     concurrency because stream creation rewrites the bucket row and
 *     deletion compares its version (meta/streams.c, meta/buckets.c).
 *  2. Bucket ids come from the one id counter streams use (never reused).
 */
#ifndef NOVAFS_META_BUCKETS_H
#define NOVAFS_META_BUCKETS_H

#include <stdint.h>

#include "meta/kv.h"
#include "meta/owner.h"
#include "src/base/names.h"

/* Classes and name limits are the shared vocabulary (src/base/names.h);
 * the row buffers are sized by it. */
#define META_BUCKET_NAME_MAX NV_BUCKET_NAME_MAX

struct meta_bucket {
	char name[META_BUCKET_NAME_MAX + 1];
	uint64_t id;
	uint64_t created_ns;
	uint8_t default_class;
	struct meta_owner own;
};

/* Create a bucket owned by own (borrowed; NULL: root:root
 * META_BUCKET_MODE).  0 and *out, -EEXIST, or a kv error. */
int meta_bucket_create(struct kv *kv, const char *name, unsigned default_class,
		       const struct meta_owner *own, struct meta_bucket *out)
	__attribute__((warn_unused_result));
/* 0 and *out, -ENOENT, or a kv error (-EBADMSG for a corrupt row). */
int meta_bucket_get(struct kv *kv, const char *name, struct meta_bucket *out)
	__attribute__((warn_unused_result));
/* Delete an empty bucket: 0, -ENOENT, -ENOTEMPTY, or a kv error. */
int meta_bucket_delete(struct kv *kv, const char *name) __attribute__((warn_unused_result));
/* Set the default class of new streams.  0, -ENOENT, kv error. */
int meta_bucket_set_class(struct kv *kv, const char *name, unsigned cls)
	__attribute__((warn_unused_result));
/* Set the owner and mode (own borrowed; mode bits above 07777 are
 * dropped).  0, -ENOENT, kv error. */
int meta_bucket_set_owner(struct kv *kv, const char *name, const struct meta_owner *own)
	__attribute__((warn_unused_result));
/* Visit buckets in name order after `after` ("" for all).  fn returns 0
 * to go on, 1 to stop, -errno to fail. */
typedef int (*meta_bucket_fn)(void *arg, const struct meta_bucket *b);
int meta_bucket_list(struct kv *kv, const char *after, meta_bucket_fn fn, void *arg)
	__attribute__((warn_unused_result));

/* Value codecs, exposed for tests and fuzzing.  Decoder: 0 or -EBADMSG. */
int meta_bucket_encode(const struct meta_bucket *b, struct nv_buf *out)
	__attribute__((warn_unused_result));
int meta_bucket_decode(const void *p, size_t n, const char *name, struct meta_bucket *b)
	__attribute__((warn_unused_result));

#endif
