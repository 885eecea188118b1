/*
 * recover.h - settling a stopped chain: restoring "refs cover every acked
 * byte" for a chain whose writer is gone, before anything serves its
 * streams again.
 *
 * For: a chain row that is LIVE or FENCED but whose star is not writing
 * it (the star crashed, or this is the star's own previous epoch).  The
 * walk is fixed and idempotent:
 *
 *   1. fence: find the cut (the first slot missing from the store when
 *      walking up from the checkpoint; every slot below it is durable and
 *      gap-free), poison it with a create-once fence object so a zombie
 *      writer can never land it (chain.h), and record the cut in the
 *      chain row (LIVE -> FENCED, one CAS); or adopt the cut an earlier
 *      walk recorded;
 *   2. walk the footers of slots [checkpoint, cut) and feed them, a batch
 *      at a time, through absorb_commit_batch(): the same code the live
 *      absorb runs, so the two paths cannot diverge;
 *   3. reap garbage: slots in (cut, cut + probe window] that exist were
 *      PUT out of order and never acknowledged (a lower slot was
 *      missing); they are deleted;
 *   4. mark the chain SETTLED (one CAS).
 *
 * A crash at any step re-runs to the same result: the cut is recorded
 * before anything depends on it, refs are rewritten identically, and the
 * checkpoint CAS makes each batch count once.  Not for: chains a live
 * star is still writing.
 */
#ifndef NOVAFS_ENGINE_RECOVER_H
#define NOVAFS_ENGINE_RECOVER_H

#include <stdint.h>

#include "engine/absorb.h"
#include "engine/stats.h"
#include "engine/store/store.h"
#include "meta/chains.h"
#include "meta/kv.h"
#include "meta/streams.h"

struct recover_cfg {
	struct store *store;       /* borrowed */
	struct kv *kv;             /* borrowed */
	struct nv_stats *stats;    /* borrowed; may be NULL */
	/* Per class: the recovered batches ripen as the live absorb's do
	 * (the class's age cap, the size trigger measured from each
	 * stream's settled end in its catalog rows, the linger). */
	struct absorb_policy policy[NV_CLASS_COUNT];
	uint32_t batch_slots;      /* slots per absorb batch */
	uint32_t probe_window;     /* garbage probe above the cut (>= the writer's put window) */
};

/*
 * Settle the chain (cls, star, epoch).  0 when it is SETTLED (by us or
 * already); -EIO when a slot below the cut fails verification (logged:
 * acknowledged data would be lost, so nothing is marked); store or kv
 * errors.  Progress is logged every few thousand slots.
 */
int recover_chain(const struct recover_cfg *cfg, unsigned cls, const char *star,
		  uint64_t epoch) __attribute__((warn_unused_result));

#endif
