/*
 * lease.h - writer leases (DESIGN.md section 7): which star leads a
 * stream, and whether this star may ack an append to it or serve its
 * tail window now.
 *
 * For: star.c's append and hot-read paths, api/'s NOT_OWNER answers and
 * the cluster client's redial (through fs/ and the Gateway).  Not for:
 * HTTP (api/), the registry rows' format (meta/stars.h).
 *
 * A stream's writer lease names its leader star, that star's star API
 * address and a lease epoch that grows by one at every change of
 * leader.  A vacant stream (no lease) is taken by the first star that
 * leads it for an append.
 *
 * Invariants:
 *  1. A star acks an append to a stream, or serves its tail window, only
 *     before its own monotonic deadline for the stream's lease; no
 *     decision compares the clocks of two hosts.
 *  2. A lease epoch only grows; a holder seen with an older epoch than
 *     one already seen is stale and ignored.
 *  3. A star that does not lead a stream answers -STAR_ENOTOWNER with the
 *     holder; it never forwards the request itself.
 */
#ifndef NOVAFS_ENGINE_LEASE_H
#define NOVAFS_ENGINE_LEASE_H

#include "meta/chains.h" /* META_STAR_MAX */

#include <errno.h>
#include <stdint.h>

struct star;
struct nv_stream;

/* The engine's NOT_OWNER: another live star leads the stream. */
#define STAR_ENOTOWNER EREMOTE

#define LEASE_ADDR_MAX 63 /* "ADDR:PORT" of listen= */

/* Who leads a stream.  addr is "" when the leader serves no star API. */
struct lease_holder {
	char star[META_STAR_MAX + 1];
	char addr[LEASE_ADDR_MAX + 1];
	uint64_t epoch;
};

/* Lead s for an append or a hot read: 0 when this star holds the
 * stream's writer lease (taking a vacant stream's), -STAR_ENOTOWNER with
 * *h filled when another live star holds it, -errno when the metastore
 * cannot say.  h may be NULL. */
int star_lead(struct star *st, struct nv_stream *s, struct lease_holder *h)
	__attribute__((warn_unused_result));

/* Who leads s, without taking it: 0 with *h, -ENOENT when vacant,
 * -errno when the metastore cannot say. */
int star_leader(struct star *st, struct nv_stream *s, struct lease_holder *h)
	__attribute__((warn_unused_result));

#endif
