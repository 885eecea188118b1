/*
 * lease.h - writer leases (DESIGN.md section 7): which star leads a
 * stream, and whether this star may ack an append to it or serve its
 * tail window now.
 *
 * For: star.c's append and hot-read paths, api/'s NOT_OWNER answers and
 * the cluster client's redial (through fs/ and the Gateway).  Not for:
 * HTTP (api/), the rows' format (meta/stars.h, meta/leases.h).
 *
 * The registry (lease_reg_*): at start a star registers ("star", id)
 * bound to its registry lease (TTL star_lease_s), refusing a star id
 * that a live star holds; a keepalive thread renews the lease every
 * third of the TTL.  The star's deadline is the send time of the last
 * successful grant or keepalive + TTL - a margin of TTL/5, on
 * CLOCK_MONOTONIC.  A lost registry lease (-ENOLCK) bumps the registry
 * generation (every writer lease cached under the old one is gone: the
 * rows were bound to it), hands every class's epoch to the star for a
 * restart (lease_reg_cfg.lost) and re-registers once every class's head
 * epoch moved past the one it had then (lease_reg_cfg.heads).
 *
 * Registry states:
 *
 *   REGISTERED --keepalive -ENOLCK--> LOST --epochs restarted,
 *       ^                                     row re-made--> REGISTERED
 *       +--- keepalive ok (deadline moves) ---+ (same state)
 *
 * A writer lease is bound to the registry lease, so its deadline is the
 * registry's.
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
 *  4. A take of a stream another star (or an earlier incarnation) led
 *     returns only after that star's epochs that may hold the stream's
 *     unabsorbed records are settled, and after the stream's positions
 *     were reloaded from the metastore.  Another star's epochs are
 *     settled by the take itself on the star's settle runner (the demand
 *     driver, engine/runner.h), joining a walk under way; the wait is
 *     bounded by take_wait (3 x star_lease_s + 10 s unless set), after
 *     which the append fails with ETIMEDOUT and the next one waits again.
 *  5. The append hot path (a cached lease within its deadline) costs no
 *     metastore call.
 *  6. A star releases a stream's lease only after the release flush, so
 *     a live star's current epochs never hold a released stream's
 *     unabsorbed records: invariant 4's wait skips them (the stream's
 *     refs are its covered frontier; no fence, the epoch stays open).
 */
#ifndef NOVAFS_ENGINE_LEASE_H
#define NOVAFS_ENGINE_LEASE_H

#include "meta/chains.h" /* META_STAR_MAX */

#include <errno.h>
#include <stdbool.h>
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

/* Who leads s per the star's cache, or the metastore when the cache
 * cannot say.  A cold reader's question, not an append's: never takes
 * a vacant stream; a lease passed to this star (a handoff) is readied
 * first (invariant 4: the predecessor waited for, the view reloaded), so
 * 0 means the view here is the leader's.  0 when this star leads s now,
 * -STAR_ENOTOWNER with *h when another does, -ENOENT when vacant,
 * -errno. */
int star_lead_check(struct star *st, struct nv_stream *s, struct lease_holder *h)
	__attribute__((warn_unused_result));

/*
 * Hand s over (DESIGN.md section 7 "Handoff"): stop admitting appends to
 * it here (they answer -STAR_ENOTOWNER from then on), wait until every
 * admitted append is acked and absorbed (the release flush: refs over
 * the stream's resident span committed), then delete the lease row (its
 * epoch row stays, so the next epoch grows).  to (NULL or "": leave the
 * stream vacant) names a live star the lease is then passed to, bound to
 * its registry lease; the target opens against a covered frontier
 * (invariant 6).  0 with *h (may be NULL) the new holder (epoch 0 and
 * star "" when vacant); -STAR_ENOTOWNER with *h when another star leads
 * s; -ENOENT no star `to` is registered; -EHOSTDOWN `to` is closing or
 * its registry lease went (s is left vacant); -ETIMEDOUT the flush did
 * not finish within the take wait (s stays led here); -EOPNOTSUPP no
 * registry (a single-host metastore); kv error.  to naming this star
 * leads s (star_lead()).
 */
int star_release(struct star *st, struct nv_stream *s, const char *to, struct lease_holder *h)
	__attribute__((warn_unused_result));

/* ------------------------------------------------------------ registry */

struct kv;
struct lease_reg;

struct lease_reg_cfg {
	struct kv *kv;          /* borrowed for the registry's life */
	const char *star;       /* copied */
	const char *addr;       /* copied; NULL or "": no star API */
	const char *location;   /* copied; NULL: "" */
	const char *data_dir;   /* copied: recognises an earlier incarnation */
	unsigned ttl_s;         /* >= KV_LEASE_TTL_MIN */
	uint64_t take_wait_ns;  /* 0: 3 x TTL + 10 s (star_cfg.take_wait_ns) */
	/* The class heads now (epochs[NV_CLASS_COUNT]). */
	void (*heads)(void *arg, uint64_t *epochs);
	/* The registry lease was lost: restart the class heads epochs[]
	 * (the keepalive thread; no lock held). */
	void (*lost)(void *arg, const uint64_t *epochs);
	void *arg;
};

/* Grant the registry lease and register (meta/stars.h): 0 and *out,
 * -EEXIST (a live star holds the id: logged), kv error.  A row of an
 * earlier incarnation of this data directory (same host and directory:
 * the data directory's lock proves it is dead) is revoked first. */
int lease_reg_open(const struct lease_reg_cfg *cfg, struct lease_reg **out)
	__attribute__((warn_unused_result));
/* Record the class heads this incarnation started with, then start the
 * keepalive thread.  0, kv error, -EAGAIN. */
int lease_reg_start(struct lease_reg *r, const uint64_t *epochs)
	__attribute__((warn_unused_result));
/* Stop the thread and revoke the lease: the registry row and every
 * writer lease of this star vanish.  NULL is a no-op. */
void lease_reg_close(struct lease_reg *r);
/* May this star ack now (invariant 1)?  0, or -ETIMEDOUT past the
 * deadline / while the registry lease is lost.  Lock-free. */
int lease_reg_may_ack(struct lease_reg *r);
/* Registry lease id (0: lost), for tests. */
uint64_t lease_reg_id(struct lease_reg *r);
/* The registry lease id while this star is before its deadline, else 0
 * (what the settle duty is bound to: engine/duty.h).  Lock-free. */
uint64_t lease_reg_live_id(struct lease_reg *r);
/* No more callbacks into the star from now on (its close began); waits
 * for one in progress.  NULL is a no-op. */
void lease_reg_quiet(struct lease_reg *r);

/* The star's own calls into this module are declared in
 * engine/star_impl.h (star_lease_attach() ...), so engine/star.c does not
 * include this header (no module cycle). */

#endif
