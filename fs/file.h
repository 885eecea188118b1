/*
 * file.h - the operations on open stream files (fs/file.c).
 *
 * For: fs/fs.c's one `const struct fuse_lowlevel_ops` table (the
 * fs_file_<op> handlers, libfuse's arguments: req owned by libfuse until
 * the one reply, buffers borrowed for the call), fs/ns.c's create (which
 * opens through fs_file_open_node()), and the star's ack hook
 * (fs_file_acked(), through nova_fs_acked()).  Not for: names (fs/ns.h);
 * follow-view handles are dispatched to fs/follow.h from here.
 *
 * Invariants:
 *  1. Each handler replies exactly once; fs_file_write() may reply later,
 *     from the acknowledging thread.
 *  2. fi->fh of a plain handle is a struct fs_file whose first int is
 *     FS_FILE_PLAIN (fs/handle.h invariant 1).
 */
#ifndef NOVAFS_FS_FILE_H
#define NOVAFS_FS_FILE_H

#include "fs/handle.h"

struct fs_node;
struct nova_fs;

/*
 * Open stream node n (borrowed; the kernel holds it) for fi->flags:
 * fills fi->fh with a new handle (owned by the kernel until release) and
 * the page-cache flags.  0, -EISDIR (not a stream), -EPERM (O_TRUNC of a
 * non-empty stream), -ENOMEM.  Does not reply.
 */
int fs_file_open_node(struct nova_fs *fs, struct fs_node *n, struct fuse_file_info *fi)
	__attribute__((warn_unused_result));
/* Free the plain handle fi->fh (after release, or after an open/create
 * reply the kernel never got). */
void fs_file_discard(struct fuse_file_info *fi);

/* Drop the own reference of every handle the kernel never released
 * (file.c invariant 4): after the session loop, before the star closes. */
void fs_file_release_all(struct nova_fs *fs);

void fs_file_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_file_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi);
void fs_file_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi);
void fs_file_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_file_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_file_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void fs_file_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
		       struct fuse_file_info *fi);
void fs_file_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		   struct fuse_file_info *fi);
void fs_file_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		  struct fuse_pollhandle *ph);

/* A stream's acked end moved from old_byte to new_byte (s borrowed):
 * invalidate the cached partial page at the old end, if any (fs.h
 * invariant 2); after durable=fsync appends also the kernel's size and
 * every page up to new_byte (fs/file.c). */
void fs_file_acked(struct nova_fs *fs, struct nv_stream *s, uint64_t old_byte,
		   uint64_t new_byte);
/* Another star's trim of s moved this star's view of its trim point
 * from old_byte to new_byte (s borrowed): the pages the kernel cached
 * below new_byte are invalidated, so they read as zeros (fs.h
 * invariant 2). */
void fs_file_trimmed(struct nova_fs *fs, struct nv_stream *s, uint64_t old_byte,
		     uint64_t new_byte);

#endif
