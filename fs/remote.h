/*
 * remote.h - appends and hot reads of a stream another star leads
 * (DESIGN.md section 7, "NOT_OWNER"): when the engine answers
 * -STAR_ENOTOWNER, the mount asks star_leader() who holds the stream and
 * sends the request there through the cluster client (api/client.h),
 * which redials a NOT_OWNER once.
 *
 * For: fs/file.c's write and read paths, the hot pages of fs/follow.c,
 * and getattr's size in fs/ns.c.  Not for: following a stream across
 * hosts (the subscription at the holder: fs/rfollow.h), leases
 * (engine/lease.h).
 *
 * Invariants:
 *  1. A remote append is answered only when the holder acked it
 *     (durable there), in either durability mode: the mount cannot park
 *     a holder's ack.
 *  2. The errno a user meets is one novafs(8) ERRORS lists:
 *     EHOSTUNREACH (the holder cannot be reached, serves no star API, or
 *     this mount has no cluster_secret_file), EAGAIN (leadership is
 *     moving: NOT_OWNER after the one redial, a stale redirect, a vacant
 *     stream), ETIMEDOUT (the holder got the request and did not
 *     answer in time, or its lease deadline passed: an append is in
 *     doubt), EIO (the holder refused this mount's secret, or answered
 *     nonsense; logged), or the holder's own refusal (ENOENT, EFBIG,
 *     ENOSPC).
 *  3. On a mount that does not lead a stream, its local view (what the
 *     metastore held when the stream was loaded here) is a prefix of the
 *     holder's: getattr's st_size is the holder's acked end
 *     (fs_remote_size(); the kernel caches it for attr_timeout, so stat
 *     is fresh within attr_timeout), a read past the local view is
 *     served by the holder (fs_remote_more()), and a read-only open is
 *     direct I/O (fs_remote_elsewhere()): no ack here would invalidate a
 *     cached last page.  Without a cluster client, or while the holder
 *     cannot say, the local view stands (stale, never wrong bytes).
 */
#ifndef NOVAFS_FS_REMOTE_H
#define NOVAFS_FS_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nova_fs;
struct nv_stream;

/* Append buf (size bytes, borrowed) to s at its holder.  0 or -errno. */
int fs_remote_append(struct nova_fs *fs, struct nv_stream *s, const void *buf, size_t size)
	__attribute__((warn_unused_result));

/* Fill up to size bytes of s at off from its holder into buf: 0 and
 * *done (short: the holder's acked end), or -errno. */
int fs_remote_read(struct nova_fs *fs, struct nv_stream *s, uint64_t off, void *buf,
		   size_t size, size_t *done) __attribute__((warn_unused_result));

/* st_size of s for getattr: the holder's acked end when another star
 * leads s (invariant 3), else local (this star's acked end). */
uint64_t fs_remote_size(struct nova_fs *fs, struct nv_stream *s, uint64_t local);

/* Another live star leads s, and this mount has a cluster client to ask
 * it (invariant 3).  Costs a metastore read when this star does not
 * lead s. */
bool fs_remote_elsewhere(struct nova_fs *fs, struct nv_stream *s);

/* A read of s that ended at this star's view at off (*done bytes of the
 * request filled so far): when another star leads s, fill more of buf
 * (size bytes from off) from the holder, adding to *done.  0 (nothing
 * more: the end), or -errno as fs_remote_read(). */
int fs_remote_more(struct nova_fs *fs, struct nv_stream *s, uint64_t off, void *buf,
		   size_t size, size_t *done) __attribute__((warn_unused_result));

#endif
