/*
 * star_impl.h - the fields of struct star, for the modules that make up
 * the star: engine/star.c (lifecycle, namespace and data calls),
 * engine/startrim.c (trim and layout), engine/lease.c (registry and
 * writer leases), engine/plan.c (read plans), engine/handoff.c (idle
 * release, drain, leave) and engine/starview.c (a vacant stream's view
 * from its refs).
 *
 * For: those six files only (and tests/unit/test_plan.c, which builds a
 * star of a fixture's store and metastore for star_plan()).  Not for:
 * anything else (they use engine/star.h's calls).
 *
 * Invariants:
 *  1. Everything a star holds after open is immutable except chains[c]
 *     and absorbs[c], and those change only under class_lock[c] held
 *     exclusively (restart_class()); every other field changes through
 *     its own module's locking.
 *  2. Lock order: class_lock[c] -> the chain's admission lock
 *     (chain_admission_lock()) -> a stream's lock (s->lock).
 */
#ifndef NOVAFS_ENGINE_STAR_IMPL_H
#define NOVAFS_ENGINE_STAR_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>

#include "engine/recover.h"
#include "engine/starcfg.h"
#include "engine/stats.h"
#include "meta/chains.h"
#include "meta/kv.h"

struct absorb;
struct auditor;
struct backlog;
struct chain;
struct fetch_cache;
struct handoff;
struct lease_reg;
struct nv_stream;
struct read_engine;
struct stream_table;
struct tailcache;

struct star {
	struct star_cfg cfg;
	char *data_dir;
	char id[META_STAR_MAX + 1];
	int lock_fd;
	struct store *store;
	bool slot_segs;          /* immutable: the standard store keeps chain
				  * slots in segment files (stack.h) */
	struct kv *kv;
	struct nv_stats stats;
	struct stream_table *streams;
	struct backlog *backlog;
	struct tailcache *tc;
	struct read_engine *re;
	struct auditor *auditor;
	struct fetch_cache *fc;
	struct recover_cfg recover;
	/* Per class: the chain and absorb in service.  class_lock[c] is
	 * held shared by every append while it uses chains[c], and
	 * exclusively by restart_class() while it swaps them. */
	pthread_rwlock_t class_lock[NV_CLASS_COUNT];
	struct chain *chains[NV_CLASS_COUNT];
	struct absorb *absorbs[NV_CLASS_COUNT];
	_Atomic uint64_t epochs[NV_CLASS_COUNT];
	/* Per class, the head epoch last halted for a reason that loses no
	 * acked record: a registry lease loss (lease.c star_lost()) or a
	 * fenced absorb (its chain row or a stream's writer lease moved:
	 * star.c on_halted()); 0 none.  A close that finds that epoch halted
	 * before its restart leaves it to the settle and still exits 0
	 * (handoff.c star_class_close()). */
	_Atomic uint64_t halted_epochs[NV_CLASS_COUNT];
	/* The registry lease and the writer leases (engine/lease.c). */
	struct lease_reg *reg;
	/* The handoff thread, drain and leave (engine/handoff.c); NULL
	 * without a registry. */
	struct handoff *ho;
};

/* Implemented in engine/lease.c, for engine/star.c (lease.h says what
 * they mean). */

/* Register st (lease_reg_open() with the star's callbacks: its class
 * heads; a loss hands them to the auditor as halted).  0, -EEXIST (a
 * live star holds the id: logged), kv error. */
int star_lease_attach(struct star *st) __attribute__((warn_unused_result));
/* Once its epochs are minted: record them and start the keepalive. */
int star_lease_start(struct star *st) __attribute__((warn_unused_result));
/* Close began: no more registry callbacks. */
void star_lease_quiet(struct star *st);
/* Every epoch closed: revoke the registry lease (rows vanish). */
void star_lease_detach(struct star *st);
/* settle_cfg.lease_ver; arg is the star: the cached lease version of a
 * stream of this star's live head epoch c, else 0. */
uint64_t star_lease_settle_ver(void *arg, uint64_t stream, const struct meta_chain *c);
/* auditor_cfg.live_lease; arg is the star: lease_reg_live_id(). */
uint64_t star_lease_live_id(void *arg);
/* chain_cfg.may_ack; arg is the star. */
int star_lease_may_ack(void *arg);
/* An append's admission: star_lead() (cached: no metastore call). */
int star_lease_admit(struct star *st, struct nv_stream *s) __attribute__((warn_unused_result));
/* A read in the tail window: 0 when it may be served here (this star
 * leads, or the stream is vacant), -STAR_ENOTOWNER, -ETIMEDOUT, -errno. */
int star_lease_hot_read(struct star *st, struct nv_stream *s)
	__attribute__((warn_unused_result));
/* The fence of a change that replaces s (a rename over it,
 * meta_stream_rename()): 0 and *ver, the version of s's lease row as
 * this star holds it (0 without a registry), when this star leads s; 0
 * and *ver 0 when s is vacant; -STAR_ENOTOWNER when another live star
 * leads it; -ETIMEDOUT, -errno as star_lead_check().  Never takes s. */
int star_lease_fence(struct star *st, struct nv_stream *s, uint64_t *ver)
	__attribute__((warn_unused_result));

/* Implemented in engine/handoff.c (handoff.h says what the thread does),
 * for engine/star.c and engine/lease.c. */

/* Start the handoff thread (a no-op without a registry).  0, -ENOMEM,
 * -EAGAIN. */
int handoff_start(struct star *st) __attribute__((warn_unused_result));
/* Stop and join it.  Idempotent. */
void handoff_stop(struct star *st);
/* Close class cls's chain and absorb (class_lock[cls] exclusive): every
 * admitted append acked and absorbed, then its epoch marked SETTLED,
 * cleanly.  star_close(), and a drained star's settle (handoff.h).  0
 * or the first error (logged: the next start or the settle duty settles
 * the epoch); 0 too, logged, when the epoch is the one a registry lease
 * loss or a fenced absorb halted (halted_epochs: every record it acked is
 * durable in its slots). */
int star_class_close(struct star *st, unsigned cls);
/* Draining or leaving (handoff.h invariant 1).  Lock-free. */
bool handoff_draining(struct star *st);
struct lease_holder;
/* star_lead() of a draining or leaving star for s (not led here by the
 * cache): -STAR_ENOTOWNER with *h (may be NULL: the holder, maybe just
 * placed there), -EAGAIN (no live serving star to place it on, or it is
 * ours still and being handed off), -errno. */
int handoff_place(struct star *st, struct nv_stream *s, struct lease_holder *h)
	__attribute__((warn_unused_result));

#endif
