/*
 * trim.h - trim-check (slot retirement) and the reclamation of settled
 * history that nothing names any more.
 *
 * For: settlement.txt "Trim-check retires the slots" and the reclamation
 * of deleted and trimmed streams.  A chain slot is never probed: its
 * batch marker is the not-settled flag.  The chain's rewritten cursor
 * advances to its first marker (or, with none, to its checkpoint or cut);
 * slots in [trimmed, rewritten) are deleted by cursor arithmetic once the
 * read grace has passed since rewritten reached them, so a reader holding
 * a footer it fetched moments ago is never cut off.  A settled chain with
 * every slot deleted is retired (its fence, cursor and chain rows go).
 *
 * Reclamation: the queue of replaced settled objects (meta/cursors.h) is
 * deleted when due; a deleted stream's rows and settled objects go after
 * the grace, and first its part of the batch markers under its span refs
 * ripens (the next era resolves it without a byte, so its slots go once
 * no live stream needs them, not at the batches' age cap); a trimmed
 * stream's rows and objects wholly below its trim point go (objects
 * after the grace).
 *
 * Invariants:
 *  1. A slot is deleted only when no marker stands at or below it and the
 *     read grace has passed since that was first seen (DESIGN.md 4.5).
 *  2. trimmed only grows; a crash between deleting slots and recording it
 *     re-deletes (deleting a missing object is not an error); a stop
 *     between two delete requests records how far the deletion got.
 */
#ifndef NOVAFS_ENGINE_TRIM_H
#define NOVAFS_ENGINE_TRIM_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/stats.h"
#include "engine/store/store.h"
#include "meta/chains.h"
#include "meta/kv.h"

struct trim_cfg {
	struct store *store;    /* borrowed */
	struct kv *kv;          /* borrowed */
	struct nv_stats *stats; /* borrowed */
	uint64_t read_grace_ns;
	/* True when the star is stopping: slot deletion gives up between
	 * requests (-ESHUTDOWN, the cursors unchanged; deleting again is
	 * harmless).  May be NULL. */
	bool (*cancelled)(void *cancel_arg);
	void *cancel_arg;
};

/* Trim-check the chain (cls, star, epoch).  1 when it changed something,
 * 0 when not, -errno. */
int trim_chain(const struct trim_cfg *cfg, unsigned cls, const char *star, uint64_t epoch,
	       uint64_t now_ns) __attribute__((warn_unused_result));

/* Delete due entries of the reclaim queue; reclaim deleted and trimmed
 * streams.  1 when something was reclaimed, 0 when not, -errno. */
int trim_reclaim(const struct trim_cfg *cfg, uint64_t now_ns) __attribute__((warn_unused_result));

#endif
