/*
 * xattr.h - the user.nova.* extended attributes.
 *
 * For: reading engine state and administering it from getfattr and
 * setfattr.  Per stream: seq, frontier, settled, trim (writable), class
 * (writable while empty), epoch, layout (JSON); on a bucket: class (the default for new streams); on the root:
 * stats (a JSON document).  Anything else under user.nova. is unknown
 * (ENODATA to read, ENOTSUP to write); other namespaces are not stored
 * (ENODATA / ENOTSUP).  Not for: the FUSE plumbing of size probes
 * (fs/fs.c).
 */
#ifndef NOVAFS_FS_XATTR_H
#define NOVAFS_FS_XATTR_H

#include <stddef.h>

#include "engine/star.h"
#include "src/base/buf.h"

enum fs_node_kind {
	FS_NODE_ROOT,
	FS_NODE_BUCKET,
	FS_NODE_STREAM,
	FS_NODE_FOLLOW_ROOT,   /* MOUNT/.follow */
	FS_NODE_FOLLOW_BUCKET, /* MOUNT/.follow/BUCKET */
	FS_NODE_FOLLOW_STREAM, /* MOUNT/.follow/BUCKET/STREAM */
};

/* What an xattr call is about (borrowed for the call). */
struct fs_xattr_target {
	enum fs_node_kind kind;
	const char *bucket;       /* FS_NODE_BUCKET */
	struct nv_stream *stream; /* FS_NODE_STREAM */
};

/* Value of name into out (reset first).  0, -ENODATA, -ENOMEM, engine
 * errors. */
int fs_xattr_get(struct star *st, const struct fs_xattr_target *t, const char *name,
		 struct nv_buf *out) __attribute__((warn_unused_result));

/* Set name to value.  0, -ENOTSUP (not a settable attribute here),
 * -EPERM (read-only attribute), -EINVAL (malformed value), -ENOTEMPTY
 * (class of a non-empty stream), engine errors. */
int fs_xattr_set(struct star *st, const struct fs_xattr_target *t, const char *name,
		 const char *value, size_t size) __attribute__((warn_unused_result));

/* The NUL-separated list of names that exist on t, into out. */
int fs_xattr_list(const struct fs_xattr_target *t, struct nv_buf *out)
	__attribute__((warn_unused_result));

#endif
