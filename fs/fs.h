/*
 * fs.h - the FUSE face of novafs, as src/ sees it: create the translation
 * layer, hand it the engine and the session, get the one operations
 * table, stop and free it.
 *
 * For: src/novafs.c.  The operations translate filesystem requests into
 * engine calls (engine/star.h) and engine errors into errnos; no engine
 * logic lives in fs/.  Not for: the operations themselves (the node
 * table fs/node.c, the namespace fs/ns.c, open files fs/file.c, the
 * follow view fs/follow.c, the xattrs fs/xattr.c; what they share is in
 * fs/handle.h and fs/session.h).
 *
 * The namespace (DESIGN.md section 5):
 *   /                  directory; its entries are buckets
 *   /BUCKET            directory; its entries are streams
 *   /BUCKET/STREAM     regular file: an append-only stream
 *   /.follow/...       the read-only follow view of the same (fs/follow.h),
 *                      reached by name, not listed in /
 * (inode numbering: fs/handle.h).  Owners and modes come from the
 * bucket and stream rows and are enforced by the kernel
 * (default_permissions; fs/perm.h).
 *
 * Invariants:
 *  1. Exactly one reply per request; a write is replied to from the
 *     engine's acknowledgement (another thread), never before.
 *  2. st_size is the stream's acked length.  Bytes below it never
 *     change, so the page cache may keep them; when an append moves the
 *     end of a stream whose last partial page a reader may have cached,
 *     that page is invalidated before the writer is answered.  A trim
 *     turns bytes below it into zeros: its pages are invalidated, by the
 *     star that trims and by every star whose view learns of it
 *     (fs_file_trimmed()).
 *  3. Anything but an append (writes elsewhere, truncation of a non-empty
 *     stream, link, symlink) is refused with EPERM; a rename is one of a
 *     stream within its bucket, anything else is EXDEV (fs/ns.c).
 */
#ifndef NOVAFS_FS_FS_H
#define NOVAFS_FS_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdint.h>

#include "fs/cfg.h"

struct nova_fs;
struct nv_stream;
struct star;

/* Create the translation layer (before the star, whose ack hook it is).
 * cfg is copied.  0 and *out (caller owns; nova_fs_free()), -ENOMEM,
 * -EINVAL (cfg->durable is not write or fsync). */
int nova_fs_new(const struct fs_cfg *cfg, struct nova_fs **out)
	__attribute__((warn_unused_result));

/* 0 when v (NULL: the default) is a value of -o durable=, else -EINVAL. */
int nova_fs_check_durable(const char *v) __attribute__((warn_unused_result));

/* Attach the engine (borrowed until nova_fs_free()) and start the follow
 * view (if it cannot start, its reads fail; logged). */
void nova_fs_set_star(struct nova_fs *fs, struct star *st);
/* The cluster client (borrowed until nova_fs_free(); NULL: none): how
 * an append or a hot read of a stream another star leads reaches the
 * holder (fs/remote.h).  Set before the session serves. */
struct api_client;
void nova_fs_set_client(struct nova_fs *fs, struct api_client *cl);
/* Attach the session (borrowed; NULL detaches it once the loop ended). */
void nova_fs_set_session(struct nova_fs *fs, struct fuse_session *se);

/* The operations table (one const table for the whole program). */
const struct fuse_lowlevel_ops *nova_fs_ops(void);

/* The star's ack hook (star_cfg.acked); arg is the nova_fs, s borrowed
 * for the call (fs/file.c keeps invariant 2 here). */
void nova_fs_acked(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte);
/* The star's hook for a trim another star made (star_cfg.trimmed); arg
 * is the nova_fs, s borrowed for the call (fs/file.c fs_file_trimmed()). */
void nova_fs_trimmed(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte);

/* Once the session loop has ended, before the engine closes: answer the
 * follow view's parked reads and drop every node (and its stream
 * reference). */
void nova_fs_shutdown(struct nova_fs *fs);

/* The first step of a stop by signal, while the session still serves:
 * parked follow reads end with end-of-file.  Returns how many follow
 * reads are still parked (0 once they have all been answered). */
uint64_t nova_fs_quiesce(struct nova_fs *fs);

/* Free; every FUSE request must be finished.  NULL is a no-op. */
void nova_fs_free(struct nova_fs *fs);

#endif
