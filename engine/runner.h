/*
 * runner.h - the star-local settle runner: the demand driver of
 * settlement.txt "Settling a stopped chain".
 *
 * For: engine/lease.c, whose take of a vacant stream finds an epoch of
 * the stream's previous leader unsettled (the leader died or lost its
 * registry lease) and must not serve before refs cover every byte that
 * leader acked.  The take starts or joins the walk of that chain
 * (recover_chain(): fence, absorb the backlog above the checkpoint,
 * reap garbage above the cut, mark it settled) and parks on its end,
 * bounded by its own deadline.  Not for: epochs nothing demands (the
 * settle duty, engine/duty.h and engine/auditor.c), the walk itself
 * (engine/recover.h).
 *
 * States of a job (one per chain being walked):
 *
 *   QUEUED --the runner thread picks it--> RUNNING --recover_chain()
 *   returned--> DONE (rc kept) --its last waiter left--> freed
 *
 * Invariants:
 *  1. One walk per chain at a time in a star: a second demand for a
 *     chain QUEUED or RUNNING joins it; concurrent walks of other stars
 *     serialize on the chain's claim (recover.h).
 *  2. A waiter that stops waiting (deadline, cancel, shutdown) never
 *     stops the walk: a cancel stops the waiting, not the walk.
 *  3. Memory is bounded: at most RUNNER_JOBS_MAX jobs; a demand beyond
 *     answers -EAGAIN (the caller retries or falls back to the duty).
 *  4. One thread walks, one chain at a time.
 */
#ifndef NOVAFS_ENGINE_RUNNER_H
#define NOVAFS_ENGINE_RUNNER_H

#include <stdint.h>

#include "engine/gate.h"
#include "engine/recover.h"
#include "engine/stats.h"

#define RUNNER_JOBS_MAX 64

struct runner;

struct runner_cfg {
	struct recover_cfg recover; /* copied; store and kv borrowed */
	struct nv_stats *stats;     /* borrowed, may be NULL */
};

/* Start the runner thread.  0 and *out, -ENOMEM, -EAGAIN. */
int runner_new(const struct runner_cfg *cfg, struct runner **out)
	__attribute__((warn_unused_result));

/* Stop: the walk in progress ends (recover_chain() has no cancel), no
 * other starts; every waiter answers -ESHUTDOWN; then free.  NULL is a
 * no-op. */
void runner_free(struct runner *r);

/*
 * Settle chain (cls, star, epoch): start or join its walk and park until
 * it ends, the monotonic deadline passes, or w (borrowed for the call,
 * may be NULL) is cancelled (runner_cancel()).  0 (settled, or retired:
 * no chain row), the walk's
 * -errno, -ETIMEDOUT, -EINTR (cancelled), -ESHUTDOWN, -EAGAIN (too many
 * jobs), -ENOMEM.  Any thread but the runner's.
 */
int runner_settle(struct runner *r, unsigned cls, const char *star, uint64_t epoch,
		  uint64_t deadline_ns, struct gate_waiter *w) __attribute__((warn_unused_result));

/* Cancel w's wait (any thread; the walk goes on). */
void runner_cancel(struct runner *r, struct gate_waiter *w);

#endif
