/*
 * fsck.h - offline consistency check of a store and its metastore
 * against the invariants of DESIGN.md section 4.
 *
 * For: `novactl fsck` and the crash tests.  It reads only; it never
 * repairs (the next mount's recovery settles what a crash left, and
 * fsck says so instead of calling it a violation).  Not for: a mounted
 * store: its cursors move under the check.
 *
 * Checks:
 *   metastore the backend's own integrity check (kv_integrity_check():
 *            SQLite's PRAGMA integrity_check), each problem a violation
 *   chains   each row decodes; no epoch above its mint head; at most one
 *            LIVE epoch per (class, star), and it is the head (a LIVE or
 *            FENCED epoch on an unmounted store is reported as
 *            "unsettled", a note, not a violation)
 *   slots    for every chain, slots in [trimmed, checkpoint) exist; no
 *            slot below trimmed; a SETTLED chain has no slot at or above
 *            its cut (garbage an earlier recovery should have reaped);
 *            missing slots below the grace target are a note (a
 *            trim-check stopped between its deletes and its cursor)
 *   markers  ascending and disjoint per chain, inside [rewritten,
 *            checkpoint); every slot a marker names is in the store; a
 *            stream's records in [rewritten, checkpoint) outside every
 *            marker are settled, trimmed or deleted (a lost marker would
 *            leave them unsettled forever)
 *   refs     per stream: contiguous in seq and byte from the trim point,
 *            each with its byte-index twin; every slot entry names an
 *            existing slot whose footer verifies and whose entries for
 *            the stream cover exactly that slot's share of the ref (a span
 *            ref overlapping a catalog row is a note: a settle stopped
 *            between its CAS and deleting what it covers); with
 *            `full`, every such chunk is fetched and verified (CRC,
 *            decompression, frames)
 *            catalog rows: every settled object present, its footer
 *            verifying and its entries covering its share of the row
 *   coverage every footer entry of every slot in [rewritten, checkpoint)
 *            of a chain is covered by a ref of its stream (no acked
 *            record invisible)
 *   objects  every settled object in the store is named by a catalog row
 *            or queued for reclamation (nothing leaks), or awaits the commit
 *            of the settle that published it (a note)
 *   cursors  trimmed/rewritten come from the chain's cursor row
 */
#ifndef NOVAFS_ENGINE_FSCK_H
#define NOVAFS_ENGINE_FSCK_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/store/store.h"
#include "meta/kv.h"

struct fsck_opts {
	bool full; /* verify every referenced chunk, not only footers */
	/* Report one finding (borrowed text); violation=false for notes. */
	void (*report)(void *arg, bool violation, const char *text);
	/* Optional: called as the check goes (phase "chains" or "streams",
	 * done of total; total 0 when unknown). */
	void (*progress)(void *arg, const char *phase, uint64_t done, uint64_t total);
	void *arg;
};

struct fsck_summary {
	uint64_t chains, slots, markers, streams, refs, objects, chunks;
	uint64_t notes, violations;
};

/* Every violation that concerns records names the stream (bucket/name)
 * and its seq and byte range.  Run every check.  0 when the check ran to the end (look at
 * summary->violations), or the first store/kv error that stopped it. */
int fsck_run(struct store *store, struct kv *kv, const struct fsck_opts *o,
	     struct fsck_summary *sum) __attribute__((warn_unused_result));

#endif
