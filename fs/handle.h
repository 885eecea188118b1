/*
 * handle.h - what every file of fs/ shares: inode numbering, node and
 * handle kinds, the durability modes, the engine-error translator and the
 * request-filling read.
 *
 * For: the FUSE operations (fs/ns.c, fs/file.c), the follow view
 * (fs/follow.c) and the xattrs (fs/xattr.c), without any of them
 * including another's world: this header includes only libfuse and the
 * engine's face (engine/star.h).  Not for: the node table
 * (fs/node.h), the mount's state (fs/session.h), or anything src/ calls
 * (fs/fs.h).
 *
 * Inode numbers: 1 is the root, 2 is .follow; a bucket or a stream has
 * FS_INO_BASE + its id (ids are never reused, so generation is always
 * 1), and its follow-view mirror that number with FS_INO_FOLLOW_BIT set.
 *
 * Invariants:
 *  1. Every open handle (fuse_file_info.fh) points at a struct whose first
 *     member is an int holding its FS_FILE_* kind (fs/file.c struct
 *     fs_file, fs/follow.c struct follow_file); fs_handle_kind() reads it.
 *  2. nova_fs_errno() is the only translation of engine errors into the
 *     errnos a user sees.
 */
#ifndef NOVAFS_FS_HANDLE_H
#define NOVAFS_FS_HANDLE_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/star.h"

#define FS_INO_BASE 16u
#define FS_INO_FOLLOW 2u               /* MOUNT/.follow */
#define FS_INO_FOLLOW_BIT (1ull << 62) /* a follow-view mirror of an inode */

enum fs_node_kind {
	FS_NODE_ROOT,
	FS_NODE_BUCKET,
	FS_NODE_STREAM,
	FS_NODE_FOLLOW_ROOT,   /* MOUNT/.follow */
	FS_NODE_FOLLOW_BUCKET, /* MOUNT/.follow/BUCKET */
	FS_NODE_FOLLOW_STREAM, /* MOUNT/.follow/BUCKET/STREAM */
};

/* What an open file handle is (the first int of every handle). */
enum { FS_FILE_PLAIN = 1, FS_FILE_FOLLOW = 2 };

/* The kind of the open file handle fi->fh (invariant 1); fi borrowed. */
static inline int fs_handle_kind(const struct fuse_file_info *fi)
{
	return *(const int *)(uintptr_t)fi->fh;
}

/*
 * When a write() returns (DESIGN.md 5): FS_DURABLE_WRITE when its record
 * is durable (the default), FS_DURABLE_FSYNC at admission, fsync() and
 * close() then waiting for every record the handle wrote (fs/file.c).
 * A stream's override (user.nova.durable, fs/xattr.c) is kept in its
 * stream row (meta_stream.durable, the values of META_DURABLE_*) and
 * loaded with it (nv_stream.durable); FS_DURABLE_DEFAULT there means the
 * mount's -o durable=.
 */
enum fs_durable {
	FS_DURABLE_DEFAULT = META_DURABLE_DEFAULT,
	FS_DURABLE_WRITE = META_DURABLE_WRITE,
	FS_DURABLE_FSYNC = META_DURABLE_FSYNC
};

/* The stream's override (FS_DURABLE_DEFAULT: none). */
static inline enum fs_durable fs_stream_durable(struct nv_stream *s)
{
	return (enum fs_durable)atomic_load(&s->durable);
}

/* Map an engine error to the errno a user sees (positive; 0 for rc >= 0). */
int nova_fs_errno(int engine_rc);

/*
 * Read up to size bytes of stream s from off into buf (caller-owned),
 * page after page across tiers (engine/read.h), stopping at the acked
 * end.  rd may be NULL.  *done is how many bytes were read, also on
 * error.  0, or the first page's error (engine errors, -EIO).
 * With sink (may be NULL; maxiov >= 2, and niov, npins 0 on entry) the
 * bytes are sink's gather list instead: cold pages point into cached
 * chunks (pinned), the others into buf at their offset, which is still
 * size bytes; the caller replies with sink->iov and unrefs sink->pins.
 */
int fs_handle_read(struct star *st, struct nv_stream *s, struct reader *rd, uint64_t off,
		   void *buf, size_t size, struct read_sink *sink, size_t *done)
	__attribute__((warn_unused_result));

/* Append buf[0..n) (the bytes of buf right after those fs_handle_read()
 * put there) to sink's gather list: merged with its last entry when that
 * ends at buf, else in the entry fs_handle_read() kept free. */
void fs_handle_sink_add(struct read_sink *sink, void *buf, size_t n);

#endif
