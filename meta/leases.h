/*
 * leases.h - the rows of a stream's writer lease (DESIGN.md section 7).
 *
 * For: engine/lease.c, which takes a vacant stream, reads who leads it,
 * and adds the lease compare to every transaction that commits a
 * stream's refs (engine/absorb.c); engine/trim.c, which reclaims a
 * deleted stream's rows.  Not for: the registry rows
 * (meta/stars.h) or deciding what a lease permits (engine/lease.h).
 *
 * Rows:
 *   ("lease", stream) v1, put bound to the leader's registry lease:
 *       u8 1 | str star | str addr | u64 lease epoch
 *   ("lep", stream) v1, a plain put (it outlives the lease):
 *       u8 1 | u64 last lease epoch | str its leader | str the leader
 *       of the epoch before it ("" none)
 *   ("duty", name) v1, put bound to the holder's registry lease (the
 *       settle duty: name "settle", engine/duty.h):
 *       u8 1 | str star | u64 duty epoch
 *   ("dep", name) v1, a plain put: u8 1 | u64 last duty epoch | str its
 *       holder
 *   ("lepn", bucket, name) v1, a plain put:
 *       u8 1 | u64 the last lease epoch of any stream of that name
 *
 * Reclaim (the choice): a deleted stream's "lease" and "lep" rows go
 * with its history (meta_lease_reclaim(), from engine/trim.c's reclaim
 * of the deleted stream, before its stream row goes).  What must survive
 * is the epoch per stream *name*: the cluster client (api/client.h
 * invariant 2) remembers the highest epoch it saw per bucket/name and
 * ignores a holder with a lower one, so a stream re-created under the
 * same name (a new stream id, no "lep" row) must start above the old
 * one.  That is the "lepn" row: every take writes it, and a take starts
 * at max("lep", "lepn") + 1.  It is one small row per name ever led and
 * is never reclaimed (nothing can tell when no client remembers the
 * name).  A rename carries no epoch: the renamed stream's next take
 * starts above the new name's row; until that take a client that led the
 * new name's earlier stream at a higher epoch sees the holder as stale
 * (-STAR_ENOTOWNER) and retries once leadership moves.
 *
 * Invariants:
 *  1. The lease row exists exactly while its leader's registry lease
 *     lives and it has not released the stream; a vacant stream has none.
 *  2. A take is one transaction: the lease row absent, the epoch row at
 *     the version read, the lease row created with epoch = last + 1 and
 *     the epoch row moved to it; so lease epochs of a stream only grow,
 *     even across releases and expiries, and two stars never hold one
 *     epoch.
 *  3. The lease row's version changes only at a take (keepalives of the
 *     registry lease do not rewrite it), so comparing it fences every
 *     commit of a leader that lost the stream.
 *  4. A duty row is to a duty what the lease row is to a stream: it
 *     exists exactly while its holder's registry lease lives and it has
 *     not released it; a take is one transaction (the row absent, the
 *     "dep" row at the version read, both written), so duty epochs only
 *     grow and two stars never hold one duty epoch.
 *  5. The take also compares the stream row and the "lepn" row of its
 *     name at the versions read and moves "lepn" to the new epoch, so
 *     the epochs of one bucket/name only grow, across deletion and
 *     re-creation.
 *  6. A deleted stream is never taken (-ENOENT), so once
 *     meta_lease_reclaim() ran no "lease" or "lep" row of it comes back.
 */
#ifndef NOVAFS_META_LEASES_H
#define NOVAFS_META_LEASES_H

#include <stdint.h>

#include "meta/chains.h"
#include "meta/kv.h"
#include "meta/stars.h"

struct meta_lease {
	char star[META_STAR_MAX + 1];
	char addr[META_STAR_ADDR_MAX + 1];
	uint64_t epoch;
};

int meta_lease_encode(const struct meta_lease *l, struct nv_buf *out)
	__attribute__((warn_unused_result));
int meta_lease_decode(const void *p, size_t n, struct meta_lease *l)
	__attribute__((warn_unused_result));

/* Who leads stream: 0 and *out (*ver, may be NULL: the row's version),
 * -ENOENT (vacant), -EBADMSG, kv error. */
int meta_lease_get(struct kv *kv, uint64_t stream, struct meta_lease *out, uint64_t *ver)
	__attribute__((warn_unused_result));

/* The last lease epoch of stream, its leader (star) and the leader
 * before it (prev, may be NULL; both META_STAR_MAX + 1 bytes): 0 (epoch
 * 0 and "" when the stream was never led), -EBADMSG, kv error.  *ver
 * (may be NULL): the epoch row's version, 0 when absent. */
int meta_lease_last(struct kv *kv, uint64_t stream, uint64_t *epoch, char *star, char *prev,
		    uint64_t *ver) __attribute__((warn_unused_result));

/*
 * Take vacant stream for star (addr: its star API, "" none), bound to
 * registry lease reg (invariants 2, 4).  0 and *out (*ver: the lease
 * row's version; *prev: the star that held the previous epoch, "" none;
 * META_STAR_MAX + 1 bytes), -EEXIST (somebody holds it: read it),
 * -ENOENT (no such stream, or deleted), -ENOLCK (reg is lost), kv error.
 */
int meta_lease_take(struct kv *kv, uint64_t stream, const char *star, const char *addr,
		    uint64_t reg, struct meta_lease *out, uint64_t *ver, char *prev)
	__attribute__((warn_unused_result));

/* Release: delete the lease row if its version is still ver.  0,
 * -ECANCELED (not ours any more), kv error.  The epoch row stays. */
int meta_lease_release(struct kv *kv, uint64_t stream, uint64_t ver)
	__attribute__((warn_unused_result));

/* How many writer leases star holds now: *n.  0, kv error (a row that
 * does not decode is not counted).  Paged: one range of 512 rows at a
 * time, so any number of streams is bounded in memory. */
int meta_lease_count(struct kv *kv, const char *star, uint64_t *n)
	__attribute__((warn_unused_result));

/* Add "stream's lease row is at version ver" to t: the fence every
 * commit of a leader carries (invariant 3).  0 or the builder's error. */
int meta_lease_txn_cmp(struct kv_txn *t, uint64_t stream, uint64_t ver)
	__attribute__((warn_unused_result));

/* ------------------------------------------------------------ duties */

struct meta_duty {
	char star[META_STAR_MAX + 1];
	uint64_t epoch;
};

/* Who holds duty name: 0 and *out (*ver, may be NULL: the row's
 * version), -ENOENT (vacant), -EBADMSG, kv error. */
int meta_duty_get(struct kv *kv, const char *name, struct meta_duty *out, uint64_t *ver)
	__attribute__((warn_unused_result));

/* Take vacant duty name for star, bound to registry lease reg
 * (invariant 4).  0 and *out (*ver, may be NULL: the row's version;
 * prev, may be NULL, META_STAR_MAX + 1 bytes: who held the epoch before,
 * "" none), -EEXIST (somebody holds it), -ENOLCK (reg is lost), kv
 * error. */
int meta_duty_take(struct kv *kv, const char *name, const char *star, uint64_t reg,
		   struct meta_duty *out, uint64_t *ver, char *prev)
	__attribute__((warn_unused_result));

/* Release: delete the duty row if its version is still ver.  0,
 * -ECANCELED (not ours any more), kv error. */
int meta_duty_release(struct kv *kv, const char *name, uint64_t ver)
	__attribute__((warn_unused_result));
/* A deleted stream's history is reclaimed: delete its "lease" and "lep"
 * rows (the "lepn" row of its name stays: header).  0 (also when the
 * stream row is gone), -EBUSY (the stream is not deleted), kv error
 * (-ECANCELED: the stream row moved meanwhile; run again). */
int meta_lease_reclaim(struct kv *kv, uint64_t stream) __attribute__((warn_unused_result));

#endif
