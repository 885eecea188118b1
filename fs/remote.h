/*
 * remote.h - appends and hot reads of a stream another star leads
 * (DESIGN.md section 7, "NOT_OWNER"): when the engine answers
 * -STAR_ENOTOWNER, the mount asks star_leader() who holds the stream and
 * sends the request there through the cluster client (api/client.h),
 * which redials a NOT_OWNER once.
 *
 * For: fs/file.c's write and read paths, the hot pages of fs/follow.c,
 * getattr's size, unlink and rename in fs/ns.c, the trims (fs/file.c's
 * hole punch, fs/ns.c's user.nova.trim), a renamed stream's name for
 * fs/rfollow.c and fs/xattr.c.  Not for: following a stream across
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
 *     The holder finds the stream by name, and s->name is the name at
 *     load here, so every call names s->id too (api/client.h invariant
 *     5): the holder serves it only from the stream of that id, never
 *     from another one created under s's old name.  Its ESTALE (the
 *     stream under that name is not s) or ENOENT is asked again once
 *     under the stream's name now (fs_remote_name_now()), so open
 *     descriptors of a stream renamed on any star keep working and
 *     reach it alone; when s was deleted the call fails with ENOENT, s
 *     is marked deleted here (its followers end) and one line is
 *     logged.  ESTALE again after that one call is EAGAIN.
 *  3. On a mount that does not lead a stream, its local view (what the
 *     metastore held when the stream was loaded here) is a prefix of the
 *     holder's: getattr's st_size is the holder's acked end
 *     (fs_remote_size(); the kernel caches it for attr_timeout, so stat
 *     is fresh within attr_timeout), a read past the local view is
 *     served by the holder (fs_remote_more()), and a read-only open is
 *     direct I/O (fs_remote_elsewhere()): no ack here would invalidate a
 *     cached last page.  Without a cluster client, or while the holder
 *     cannot say, the local view stands (stale, never wrong bytes).
 *  4. An unlink of a stream another star leads is done by the holder
 *     (fs_remote_unlink()), so its appends after the tombstone fail with
 *     ENOENT there as they would on one star.  When nothing could be sent
 *     (no cluster client, the holder unreachable or serving no star
 *     API) nothing is done and the unlink fails with EHOSTUNREACH
 *     (logged) for as long as the holder's lease stands: deleting it
 *     here would let the holder go on acking appends to a stream whose
 *     unlink returned.  Once the lease has gone the stream is vacant and
 *     is deleted here.
 *  5. On a vacant stream (no holder) getattr's st_size
 *     (fs_remote_size()) first raises the local view to the refs' end
 *     (star_view_refresh(): its row and last ref; the page holding the old
 *     end is invalidated as after an ack), so stat, and the reads within
 *     that size, see what settlement committed after a leader died.
 *  6. The trim point follows another star's trims: getattr raises the
 *     local view's to the holder's (its end reply says it) or, vacant,
 *     to the row's (star_view_refresh()), and pages cached below it are
 *     invalidated (star_cfg.trimmed), so reads below it are zeros here
 *     as on the holder.  A read that meets a trim this view has not
 *     learned yet finds it in the row (engine/read.c).
 *  7. A trim of a stream another star leads (setfattr user.nova.trim,
 *     the head hole punch) is done by the holder (fs_remote_trim()), so
 *     its memory, tail and page cache drop the trimmed bytes at once,
 *     and a later trim there below the point is refused as on one
 *     star; this star's view is raised to the point the holder answers.
 *     When nothing could be sent it fails with EHOSTUNREACH, nothing
 *     trimmed, as an unlink (invariant 4); a vacant stream is trimmed
 *     here.
 *  8. A rename over a stream another star leads (fs_remote_rename()) is
 *     done by that holder, whole: it swaps the names and tombstones the
 *     target in one metastore transaction under its lease (api/change.h
 *     invariant 3), so the target's name never reads ENOENT, the
 *     holder refuses appends to the old target from then on, and a
 *     failed rename (no source, say) changes nothing.  The rename's
 *     source is only a row change: its leader keeps leading it by id.
 *     A rename done here (the target ours, vacant or absent) compares
 *     the target's lease row as it was seen (meta/streams.h invariant
 *     6), so a star that takes it meanwhile, or a stream created under
 *     the name meanwhile, makes the rename look again (once; then
 *     EAGAIN, nothing changed).  When the holder cannot be asked:
 *     EHOSTUNREACH, nothing changed, as an unlink (invariant 4).
 */
#ifndef NOVAFS_FS_REMOTE_H
#define NOVAFS_FS_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nova_fs;
struct nv_stream;
struct star;

/* The holder `by` (borrowed) answered rc to a call for s under the name
 * `asked` (borrowed; s->name, the name at load, or the target of a
 * rename) (invariant 2).  rc -ESTALE (the stream under that name there
 * is not s) or -ENOENT: 0 and s's name now in buf (size bytes), to send
 * the call once more under it, with s->id; -ENOENT when s was deleted
 * (its row is gone: marked deleted here, star_stream_gone(), which logs
 * once) or, for an ENOENT, when the name did not change (it stands);
 * when the metastore cannot say (st NULL: no metastore), an ESTALE is
 * -EAGAIN and an ENOENT stands.  Any other rc is returned as it is.  One metastore read; also for
 * fs/rfollow.c's subscription and fs/xattr.c's handoff. */
int fs_remote_name_now(struct star *st, struct nv_stream *s, const char *by,
		       const char *asked, int rc, char *buf, size_t size)
	__attribute__((warn_unused_result));

/* Append buf (size bytes, borrowed) to s at its holder.  0 or -errno. */
int fs_remote_append(struct nova_fs *fs, struct nv_stream *s, const void *buf, size_t size)
	__attribute__((warn_unused_result));

/* Fill up to size bytes of s at off from its holder into buf: 0 and
 * *done (short: the holder's acked end), or -errno. */
int fs_remote_read(struct nova_fs *fs, struct nv_stream *s, uint64_t off, void *buf,
		   size_t size, size_t *done) __attribute__((warn_unused_result));

/* st_size of s for getattr: the holder's acked end when another star
 * leads s (invariant 3), else local (this star's acked end).  Raises the
 * local trim point (invariant 6). */
uint64_t fs_remote_size(struct nova_fs *fs, struct nv_stream *s, uint64_t local);

/* Another live star leads s, and this mount has a cluster client to ask
 * it (invariant 3).  Costs a metastore read when this star does not
 * lead s. */
bool fs_remote_elsewhere(struct nova_fs *fs, struct nv_stream *s);

/* unlink(2) of s (remote.h invariant 4): at its holder when another
 * star leads s, else here (star_stream_delete()).  0 (s is marked
 * deleted here too), or -errno (-ENOENT: deleted already;
 * -EHOSTUNREACH: the holder could not be asked, nothing deleted). */
int fs_remote_unlink(struct nova_fs *fs, struct nv_stream *s) __attribute__((warn_unused_result));

/* A trim of s to record pos (by_seq: user.nova.trim) or byte pos (the
 * head hole punch), at its holder when another star leads s (invariant
 * 7), else here (star_stream_trim_seq(), star_stream_trim_bytes()).  0
 * and *old_byte (may be NULL; this star's trim byte before), -EINVAL
 * (a seq below the trim point or past the end: never backwards), or
 * -errno (invariant 2). */
int fs_remote_trim(struct nova_fs *fs, struct nv_stream *s, bool by_seq, uint64_t pos,
		   uint64_t *old_byte) __attribute__((warn_unused_result));

/* rename(2) of bucket/from to `to` (star_stream_rename()); over a
 * stream `to` that another star leads, done by that star (invariant 8).
 * 0, or -errno, nothing renamed: star_stream_rename()'s, the
 * metastore's when it cannot say whether `to` exists, -EAGAIN (what is
 * under `to` moved twice as it was renamed), or when the holder was
 * asked the errno of invariant 2 (-ENOENT: no stream `from`). */
int fs_remote_rename(struct nova_fs *fs, const char *bucket, const char *from, const char *to,
		     bool noreplace) __attribute__((warn_unused_result));

/* A read of s that ended at this star's view at off (*done bytes of the
 * request filled so far): when another star leads s, fill more of buf
 * (size bytes from off) from the holder, adding to *done.  0 (nothing
 * more: the end), or -errno as fs_remote_read(). */
int fs_remote_more(struct nova_fs *fs, struct nv_stream *s, uint64_t off, void *buf,
		   size_t size, size_t *done) __attribute__((warn_unused_result));

#endif
