/*
 * perm.h - owners and modes of buckets and streams: who created them,
 * who may change them, who may administer them.
 *
 * For: the owner a new bucket or stream gets from the request that
 * creates it (fs_perm_creator()), the POSIX rules of chmod, chown and
 * chgrp (fs_perm_setattr()), and the write permission that xattr
 * administration needs (fs_perm_may_write()).  Everything else (open,
 * create, unlink, rmdir, mkdir, readdir) the kernel checks itself,
 * because every mount has default_permissions (src/novafs.c adds it).
 * Not for: storing owners (meta/streams.h rows, engine/star.h calls) or
 * the replies (fs/ns.c).
 *
 * Invariants:
 *  1. uid 0 passes every check here, as the kernel lets root.
 *  2. These checks repeat the kernel's: a request that reaches the
 *     daemon without them (a kernel that skipped default_permissions)
 *     is still refused.
 */
#ifndef NOVAFS_FS_PERM_H
#define NOVAFS_FS_PERM_H

#include <sys/stat.h>

#include "engine/star.h"
#include "fs/handle.h"

/* The owner of what req creates with mode: the caller's uid and gid,
 * mode & ~umask (permission bits only); returned by value. */
struct meta_owner fs_perm_creator(fuse_req_t req, mode_t mode);

/* May req's caller write an object whose attributes are st (borrowed)?
 * 0 or -EACCES. */
int fs_perm_may_write(fuse_req_t req, const struct stat *st);

/*
 * A setattr's change of mode, uid or gid (the FUSE_SET_ATTR_MODE/UID/GID
 * bits of to_set, values in attr) to an object with attributes st (both
 * borrowed; *out is the caller's), by
 * req's caller, under POSIX rules: chmod by root or the owner; chown to
 * another uid only by root; chgrp by root, or by the owner to a group
 * they are in (fuse_req_getgroups()).  A non-root chmod to a group the
 * caller is not in drops S_ISGID; a chown by non-root drops S_ISUID and
 * S_ISGID.  0 and *out (the new owner), or -EPERM.
 */
int fs_perm_setattr(fuse_req_t req, const struct stat *st, const struct stat *attr,
		    int to_set, struct meta_owner *out) __attribute__((warn_unused_result));

#endif
