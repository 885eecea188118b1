/*
 * leases.h - the rows of a stream's writer lease (DESIGN.md section 7).
 *
 * For: engine/lease.c, which takes a vacant stream, reads who leads it,
 * and adds the lease compare to every transaction that commits a
 * stream's refs (engine/absorb.c).  Not for: the registry rows
 * (meta/stars.h) or deciding what a lease permits (engine/lease.h).
 *
 * Rows:
 *   ("lease", stream) v1, put bound to the leader's registry lease:
 *       u8 1 | str star | str addr | u64 lease epoch
 *   ("lep", stream) v1, a plain put (it outlives the lease):
 *       u8 1 | u64 last lease epoch | str its leader | str the leader
 *       of the epoch before it ("" none)
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
 * registry lease reg (invariant 2).  0 and *out (*ver: the lease row's
 * version; *prev: the star that held the previous epoch, "" none;
 * META_STAR_MAX + 1 bytes), -EEXIST (somebody holds it: read it),
 * -ENOLCK (reg is lost), kv error.
 */
int meta_lease_take(struct kv *kv, uint64_t stream, const char *star, const char *addr,
		    uint64_t reg, struct meta_lease *out, uint64_t *ver, char *prev)
	__attribute__((warn_unused_result));

/* Release: delete the lease row if its version is still ver.  0,
 * -ECANCELED (not ours any more), kv error.  The epoch row stays. */
int meta_lease_release(struct kv *kv, uint64_t stream, uint64_t ver)
	__attribute__((warn_unused_result));

/* Add "stream's lease row is at version ver" to t: the fence every
 * commit of a leader carries (invariant 3).  0 or the builder's error. */
int meta_lease_txn_cmp(struct kv_txn *t, uint64_t stream, uint64_t ver)
	__attribute__((warn_unused_result));

#endif
