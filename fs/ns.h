/*
 * ns.h - the namespace operations of the FUSE table (fs/ns.c).
 *
 * For: fs/fs.c's one `const struct fuse_lowlevel_ops` table: each
 * function here is the handler of the libfuse operation it is named
 * after, with libfuse's arguments (req owned by libfuse until the one
 * reply; names and attributes borrowed for the call).  Not for: open
 * stream files (fs/file.h), or calling from anywhere but that table.
 *
 * Invariants:
 *  1. Each handler replies exactly once before it returns (forget and
 *     forget_multi with fuse_reply_none()).
 */
#ifndef NOVAFS_FS_NS_H
#define NOVAFS_FS_NS_H

#include "fs/handle.h"

/* Names and attributes. */
void fs_ns_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_ns_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fs_ns_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void fs_ns_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_ns_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		   struct fuse_file_info *fi);

/* Buckets and streams: created, removed, renamed (a stream within its
 * bucket), refused. */
void fs_ns_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fs_ns_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_ns_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi);
void fs_ns_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		 dev_t rdev);
void fs_ns_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_ns_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		  fuse_ino_t newparent, const char *newname, unsigned int flags);
void fs_ns_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void fs_ns_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);

/* Directory listings. */
void fs_ns_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_ns_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void fs_ns_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* Extended attributes (values: fs/xattr.h) and statfs. */
void fs_ns_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void fs_ns_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_ns_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags);
void fs_ns_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
void fs_ns_statfs(fuse_req_t req, fuse_ino_t ino);

#endif
