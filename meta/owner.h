/*
 * owner.h - who owns a bucket or stream: the owner fields every namespace
 * row carries (meta/buckets.h, meta/streams.h; encoded by meta/rowbuf.c).
 *
 * For: the type and its defaults.  Not for: permission checks (the
 * kernel's default_permissions, and fs/perm.c for xattrs).
 *
 * Invariant: mode holds permission bits only (07777); the file type is
 * not stored.
 */
#ifndef NOVAFS_META_OWNER_H
#define NOVAFS_META_OWNER_H

#include <stdint.h>

/* Who owns a bucket or stream: uid, gid and the permission bits (07777;
 * the file type is not stored). */
struct meta_owner {
	uint32_t uid;
	uint32_t gid;
	uint32_t mode;
};

#define META_BUCKET_MODE 0755u /* of a v1 bucket row, and the default */
#define META_STREAM_MODE 0644u /* of a v1 stream row, and the default */

#endif
