/*
 * handoff.h - moving writer leases off a star (DESIGN.md section 7,
 * "Handoff" and "Settlement drivers"): the idle release, the graceful
 * close's release of every lease, and decommission (novactl drain).
 *
 * For: engine/star.c (start and stop the handoff thread) and
 * engine/lease.c (a draining or leaving star takes no lease:
 * handoff_place()), both through engine/star_impl.h (no module cycle), the
 * daemon's graceful close (src/novafs.c: handoff_leave(), then a nudge to
 * every peer it lists with handoff_peers()), the star API's nudge
 * (api/server.c: handoff_nudge()).  Not for: the release itself (the
 * release flush and the lease row: star_release(), engine/lease.h), the
 * settle duty (engine/auditor.h), HTTP (api/).
 *
 * The handoff thread (only when the star has a registry) wakes every
 * third of star_lease_s, at a nudge, and at least every quarter of
 * lease_idle_s, and then:
 *   1. reads its registry row: a row set to draining (meta_star_set_state()
 *      by novactl drain) makes the star draining, once and for good;
 *   2. draining: passes every stream it leads to a live serving star
 *      (round robin over the registry) with the release flush; once it
 *      leads nothing (no lease row names it), it settles its
 *      head epochs while it stands: each class's chain is closed as at
 *      unmount (star_class_close()), so the terminate gate (every epoch
 *      of its chains SETTLED, novactl drain) can pass;
 *   3. idle release (lease_idle_s > 0): a stream it leads whose acked
 *      seq did not move for lease_idle_s is released (left vacant).
 *
 * States of a star here:
 *
 *   SERVING --registry row draining--> DRAINING --handoff_leave()--> LEAVING
 *   SERVING --handoff_leave() (unmount, SIGTERM)--------------------> LEAVING
 *
 * Invariants:
 *  1. A draining or leaving star takes no writer lease: star_lead() asks
 *     handoff_place(), which places a vacant stream on a live serving
 *     star (or answers -EAGAIN when there is none) and answers
 *     -STAR_ENOTOWNER with that holder.
 *  2. Every release here is star_release()'s (the release flush first),
 *     so the successor opens against a covered frontier.
 *  3. The batch markers of a leaving or drained star's chains stay as
 *     they are (durable rows): its chains are SETTLED when it closes
 *     them, and every star's auditor group-settles a settled chain's
 *     markers when they ripen; the nudge only makes the peers pass now.
 *  4. The thread holds no engine lock across a metastore call; the idle
 *     table is the thread's own.
 */
#ifndef NOVAFS_ENGINE_HANDOFF_H
#define NOVAFS_ENGINE_HANDOFF_H

#include <stdbool.h>
#include <stdint.h>

struct star;
struct nv_stream;
struct lease_holder;

/* Wake the thread and the auditor now (the star API's nudge: re-check
 * the registry row, the leases and the markers now). */
void handoff_nudge(struct star *st);

/* What a leave or a drain pass did. */
struct handoff_report {
	unsigned released;  /* leases released (flushed, then vacant or passed) */
	unsigned failed;    /* releases that failed (logged; the lease expires) */
};

/* Graceful close, before the star API stops: take no lease from now on,
 * release every lease with its flush (left vacant: the first star that
 * appends takes it) and nudge the auditor (invariant 3: the markers stay
 * for whoever settles next).  *r (may be NULL) says what it did.  0 or the first error
 * (logged; what failed expires with the registry lease at close). */
int handoff_leave(struct star *st, struct handoff_report *r);

/* Visit every live peer star (not this one) that serves a star API:
 * fn(arg, id, addr).  0, fn's nonzero value, kv error; 0 without a
 * registry. */
typedef int (*handoff_peer_fn)(void *arg, const char *id, const char *addr);
int handoff_peers(struct star *st, handoff_peer_fn fn, void *arg)
	__attribute__((warn_unused_result));

#endif
