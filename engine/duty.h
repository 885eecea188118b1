/*
 * duty.h - the settle duty lease: which one star of the stars sharing a
 * metastore settles the epochs nothing demands and deletes slots
 * (DESIGN.md section 7, settlement.txt "The settle duty").
 *
 * For: engine/auditor.c, which calls duty_poll() once a pass and does the
 * duty's work (settling dead stars' chains and epochs below their
 * class's mint head, the group settle of settled chains, trim-check of
 * every chain, reclamation) only while duty_held().  Not for: what the
 * duty does (auditor.c), the demand driver (engine/runner.h), the rows
 * themselves (meta/leases.h "duties").
 *
 * The duty lease is the ("duty", "settle") row, bound to the holder's
 * registry lease as a writer lease is (meta/leases.h invariant 4): its
 * TTL is star_lease_s, its keepalive the registry keepalive
 * (engine/lease.c), and the holder's deadline its own monotonic one
 * (duty_cfg.live_lease: lease_reg_live_id()).  When the holder dies or is cut off, etcd
 * expires the registry lease and the row with it; the next duty_poll()
 * of another star (within an audit period) takes it.
 *
 * States (per star):
 *
 *   NOT HELD --duty_poll(): the row is vacant, the take commits--> HELD
 *   HELD --duty_poll() or duty_held(): the deadline passed, the registry
 *          lease changed, or the row is another's--> NOT HELD
 *   HELD --duty_free(): the row is released--> (gone)
 *
 * Invariants:
 *  1. duty_held() is true only before the holder's own monotonic
 *     deadline and while the registry lease the row was taken under is
 *     the star's current one; no decision compares two hosts' clocks.
 *  2. Two stars never hold one duty epoch; duty epochs only grow
 *     (meta/leases.h invariant 4).
 *  3. Without a registry (live_lease NULL) the duty is always held.
 *
 * An expiry never lets two stars act at once: the holder's deadline
 * (TTL - TTL/5 after its last keepalive was sent) ends before etcd's
 * expiry (TTL after it arrived).  A revoke of the holder's lease by
 * somebody else is seen at its next keepalive or duty_poll(); until then
 * two stars may delete the same slots, which is harmless (trim.h
 * invariant 2: deleting is idempotent).
 */
#ifndef NOVAFS_ENGINE_DUTY_H
#define NOVAFS_ENGINE_DUTY_H

#include <stdbool.h>
#include <stdint.h>

#include "meta/kv.h"
#include "meta/stars.h"

struct duty;

struct duty_cfg {
	struct kv *kv;    /* borrowed */
	const char *star; /* copied */
	/* The star's registry lease id while it is before its own deadline,
	 * else 0 (lease_reg_live_id()); any thread, no metastore call.
	 * NULL: no registry, always held (invariant 3). */
	uint64_t (*live_lease)(void *arg);
	void *arg;
};

/* 0 and *out, -ENOMEM.  Takes nothing yet (duty_poll()). */
int duty_new(const struct duty_cfg *cfg, struct duty **out) __attribute__((warn_unused_result));

/* Release the row when held (logged on failure: it expires with the
 * registry lease) and free.  NULL is a no-op. */
void duty_free(struct duty *d);

/* Check the row, take it when vacant: 1 held, 0 not, -errno (not held;
 * the metastore cannot say).  One thread (the auditor's). */
int duty_poll(struct duty *d) __attribute__((warn_unused_result));

/* Held now (invariant 1)?  Any thread, lock-free, no metastore call. */
bool duty_held(struct duty *d);

/* Was the duty epoch before ours (at our last take) another star's?  Any
 * thread.  A grace that star started (trim.h: the read grace, the
 * reclaim queue's due times) was read on its wall clock, so the auditor
 * deletes nothing until one read grace has passed on ours. */
bool duty_taken_from_other(struct duty *d);

/* Who held the duty at the last duty_poll() (star "" unknown or vacant)
 * and its duty epoch; star is META_STAR_MAX + 1 bytes.  Any thread. */
void duty_holder(struct duty *d, char *star, uint64_t *epoch);

#endif
