/*
 * auditor.h - the star's background duties.
 *
 * For (so far): the settle duty of settlement.txt "Settling a stopped
 * chain": at start-up it settles every epoch this star's earlier
 * incarnations left unsettled and then opens the star's gate (no stream
 * is served before); afterwards a janitor settles epochs nothing demands
 * (a halted epoch of this star; and, while this star holds the settle
 * duty lease (engine/duty.h), any star's epoch below its class's mint
 * head and the epochs of a star whose registry row is gone: its registry
 * lease lapsed, engine/lease.c).  Halted chains of this star are handed
 * back to the star (the `halted` callback) on the auditor thread, after
 * their epoch is settled.  Every period it also runs the group settle
 * (settle.h) over this star's live heads and, with the duty, every
 * settled chain; and, only with the duty, trim-check of every star's
 * chains (trim.h) and reclamation: slot deletion has one owner.
 *
 * Several stars on one metastore: each one's auditor settles its own
 * earlier epochs and group-settles its own live heads; exactly one (the
 * duty holder) settles the rest and deletes slots.  A take of a stream
 * whose previous leader's epoch is unsettled settles it on demand
 * (engine/runner.h), so no star's gate waits for the duty.
 *
 * State of the gate:
 *
 *   CLOSED --first scan settled every predecessor--> OPEN
 *
 * Invariants:
 *  1. The gate opens only when no epoch this star must settle
 *     (settle_due(): its own earlier epochs; with the duty, every epoch
 *     but the live stars' heads) is LIVE or FENCED in the metastore.
 *  2. A live star's head epoch is never settled by the janitor.
 *  3. One settle at a time per auditor; a settle failure is retried with
 *     backoff and logged, never skipped.
 *  4. trim_chain() and trim_reclaim() run only while duty_held(), and a
 *     slot deletion stops between requests the moment it is not; after
 *     a take of the duty from another star, only once one read grace has
 *     passed on this star's monotonic clock (that star's graces were
 *     read on its wall clock: no decision compares two hosts' clocks).
 */
#ifndef NOVAFS_ENGINE_AUDITOR_H
#define NOVAFS_ENGINE_AUDITOR_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/gate.h"
#include "engine/recover.h"
#include "engine/settle.h"
#include "engine/trim.h"
#include "src/base/names.h"

struct auditor;

struct auditor_cfg {
	const char *star;             /* copied */
	uint64_t live_epochs[NV_CLASS_COUNT];
	struct recover_cfg recover;   /* store, kv, stats, policy, windows */
	uint64_t janitor_ns;          /* janitor scan period */
	uint64_t period_ns;           /* settle and trim-check pass period */
	/* settle jobs (settle.h); its coalesce_ns is set to period_ns (at
	 * most 1 s): an era waits one audit interval to take what ripens in
	 * it */
	struct settle_cfg settle;
	struct trim_cfg trim;         /* trim-check and reclamation (trim.h) */
	/* duty_cfg.live_lease (duty.h), with arg: the registry lease the
	 * settle duty is bound to; NULL: the duty is always held. */
	uint64_t (*live_lease)(void *arg);
	/* 0 while this star may commit (its registry lease lives by its own
	 * deadline), else -errno: settle jobs stop between steps (a paused or
	 * cut-off star's writer leases and duty went with the lease); with
	 * arg.  NULL: always. */
	int (*may_commit)(void *arg);
	/* A halted chain of this star was settled; restart the class.  On
	 * the auditor thread.  Returns the new live epoch, or 0 on failure
	 * (retried later). */
	uint64_t (*halted)(void *arg, unsigned cls, uint64_t epoch);
	void *arg;
};

/* Start the auditor thread.  0 and *out, -ENOMEM, -EAGAIN. */
int auditor_new(const struct auditor_cfg *cfg, struct auditor **out)
	__attribute__((warn_unused_result));

/* Stop the thread and free. */
void auditor_free(struct auditor *a);

/* A chain of this star halted (any thread; idempotent). */
void auditor_report_halt(struct auditor *a, unsigned cls, uint64_t epoch);

/* Does this star hold the settle duty now (duty_held())?  Any thread. */
bool auditor_duty_held(struct auditor *a);

/* Wake the janitor now. */
void auditor_nudge(struct auditor *a);

/* The gate.  A waiter (engine/gate.h; borrowed for the call, may be NULL
 * for a wait nobody cancels) is cancelled from another thread (a FUSE
 * interrupt); the wait then returns -EINTR, or -ESHUTDOWN once the
 * auditor stops.  0 once open. */
bool auditor_gate_is_open(struct auditor *a);
int auditor_gate_wait(struct auditor *a, struct gate_waiter *w)
	__attribute__((warn_unused_result));
void auditor_gate_cancel(struct auditor *a, struct gate_waiter *w);
/* The daemon is stopping: every wait in progress, and every later one
 * while the gate is closed, returns -ESHUTDOWN (idempotent; the
 * settling goes on until auditor_free()). */
void auditor_gate_shut(struct auditor *a);

#endif
