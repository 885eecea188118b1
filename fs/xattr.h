/*
 * xattr.h - the user.nova.* extended attributes.
 *
 * For: reading engine state and administering it from getfattr and
 * setfattr.  Per stream: seq, frontier, settled, trim (writable), class
 * (writable while empty), epoch, layout (JSON), durable (writable: write
 * or fsync, removable, kept in the stream row: fs/handle.h); on a bucket: class (the
 * default for new streams); on the root: stats (a JSON document).
 * Anything else under user.nova. is unknown (ENODATA to read, ENOTSUP to
 * write); other namespaces are not stored (ENODATA / ENOTSUP).  Not for:
 * the FUSE plumbing (size probes, ERANGE, the follow view's EROFS:
 * fs/ns.c), so this file links without libfuse (tests/fuzz/fuzz_xattr.c).
 *
 * Invariants:
 *  1. fs_xattr_get() and fs_xattr_list() change no state, but for
 *     raising this star's view of a stream it does not lead to the
 *     committed state before a position is read (fs/remote.h invariant
 *     6; positions only grow).
 *  2. Every value is computed from the engine at the call (nothing is
 *     cached here), so two reads may differ while appends run.
 */
#ifndef NOVAFS_FS_XATTR_H
#define NOVAFS_FS_XATTR_H

#include <stddef.h>

struct api_client;

#include "engine/star.h"
#include "fs/handle.h"
#include "src/base/buf.h"

/* What an xattr call is about (borrowed for the call). */
struct fs_xattr_target {
	enum fs_node_kind kind;
	const char *bucket;       /* FS_NODE_BUCKET */
	struct nv_stream *stream; /* FS_NODE_STREAM */
	enum fs_durable durable_default; /* the mount's -o durable= (durable's value) */
	/* The mount's cluster client (NULL: none): a leader set on a mount
	 * that does not lead the stream asks the holder through it. */
	struct api_client *client;
	/* The trim of user.nova.trim (NULL: star_stream_trim_seq() here):
	 * the mount's sends it to the stream's leader (fs_remote_trim()). */
	int (*trim)(void *arg, struct nv_stream *s, uint64_t seq);
	void *trim_arg;
};

/* "write" or "fsync" (a trailing newline or NUL allowed) into *out.  0 or
 * -EINVAL. */
int fs_durable_parse(const char *v, size_t len, enum fs_durable *out)
	__attribute__((warn_unused_result));
const char *fs_durable_name(enum fs_durable d); /* static string */

/* Value of name into out (reset first).  0, -ENODATA, -ENOMEM, engine
 * errors. */
int fs_xattr_get(struct star *st, const struct fs_xattr_target *t, const char *name,
		 struct nv_buf *out) __attribute__((warn_unused_result));

/* Set name to value.  0, -ENOTSUP (not a settable attribute here:
 * unknown, or read-only), -EINVAL (malformed value), -ENOTEMPTY
 * (class of a non-empty stream), engine errors. */
int fs_xattr_set(struct star *st, const struct fs_xattr_target *t, const char *name,
		 const char *value, size_t size) __attribute__((warn_unused_result));

/* Remove name: only a stream's user.nova.durable can be (its override
 * goes: the mount's -o durable= applies again).  0, -ENODATA (not a
 * user.nova. name), -EPERM (any other user.nova. name), engine errors. */
int fs_xattr_remove(struct star *st, const struct fs_xattr_target *t, const char *name)
	__attribute__((warn_unused_result));

/* The NUL-separated list of names that exist on t, into out; a
 * stream's trim and leader exist but are not listed (xattr.c says why). */
int fs_xattr_list(const struct fs_xattr_target *t, struct nv_buf *out)
	__attribute__((warn_unused_result));

#endif
