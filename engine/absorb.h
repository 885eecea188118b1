/*
 * absorb.h - the leader's background consumer of its own released
 * flights, and the batch commit that recovery shares with it.
 *
 * For: turning slots into refs.  Per batch (a run of consecutive slots)
 * and per stream it commits one span ref (meta/refs.h); then, in one
 * transaction, the chain's checkpoint advances past the batch and the
 * batch marker (meta/markers.h) is written; then the backlog tokens of
 * the batch's flights return to producers.  It wakes on work (a push
 * from the release path), never polls, and never touches object storage.
 * Not for: reading footers (engine/recover.c feeds footers in through
 * absorb_commit_batch()).
 *
 * Invariants:
 *  1. A batch is committed only for slots [chain checkpoint, ...), in
 *     order; the checkpoint CAS fails if anyone else moved the chain.
 *  2. Re-running a batch (after a crash at any step) writes the same ref
 *     keys with byte-identical values: a ref's key is the stream's first
 *     seq in the batch, and every live ref key of a batch is rewritten by
 *     any re-run that starts at the same checkpoint, whatever its batch
 *     boundaries (the stream's first seq in the first slot holding it).
 *  3. Tokens return only after the checkpoint commit, so the backlog
 *     bounds admitted-but-unabsorbed bytes.
 *  4. A stream's ref frontier (engine/stream.h) moves only after its ref
 *     is committed.
 *  5. A ref of a run with a lease_ver commits only while the stream's
 *     lease row is at that version: a leader that lost the stream
 *     commits none of its refs (-ECANCELED; the absorb stops and the
 *     chain is settled by recovery, whose runs compare no lease).
 */
#ifndef NOVAFS_ENGINE_ABSORB_H
#define NOVAFS_ENGINE_ABSORB_H

#include <stdint.h>

#include "engine/backlog.h"
#include "engine/flight.h"
#include "engine/stats.h"
#include "meta/chains.h"
#include "meta/kv.h"

/* ----------------------------------------------------- the batch commit */

/* One stream's records in one slot (from a flight run or footer entries). */
struct absorb_run {
	uint64_t stream_id;
	uint64_t first_seq;
	uint64_t first_byte;
	uint64_t nbytes;
	uint64_t max_ts;
	uint32_t nrec;
	/* Where the stream's settled history ends (its un-settled bytes are
	 * measured from here), or ABSORB_UNKNOWN: no crossing detection. */
	uint64_t settled_byte;
	/* When the stream's open settle round ripens (wall ns), 0: none. */
	uint64_t round_ripe_ns;
	/* The version of the stream's writer lease row this star holds
	 * (meta/leases.h), compared by the transaction that commits the
	 * stream's ref; 0: no compare (recovery settling a stopped chain,
	 * which is guarded by the chain row and the fence instead). */
	uint64_t lease_ver;
};

#define ABSORB_UNKNOWN UINT64_MAX

/* One slot's worth of input, runs sorted by stream id. */
struct absorb_slot {
	uint64_t slot;
	uint64_t footer_off;
	uint32_t footer_len;
	uint32_t nruns;
	const struct absorb_run *runs; /* borrowed for the call */
};

/*
 * When markers ripen (engine/settle/era.c schedules by them), per stream
 * of the batch (meta/markers.h invariant 4).  A batch in which a
 * stream's un-settled bytes (its ref end minus its settled end) reach
 * trigger_bytes opens a settle round for the stream: its part ripens at
 * birth + linger + that stream's deterministic jitter (up to linger/2,
 * from its id, so cohorts of streams spread out; the jitter is the
 * stream's own, never another crossing stream's).  Later batches of the
 * stream while that round is open ripen with it (run->round_ripe_ns), so
 * the round's settle takes everything the stream accumulated, once per
 * round, never once per threshold; the first batch after the round
 * ripened, still over the trigger, opens the next round.  A stream
 * below the trigger ripens at birth + the class's age cap; the marker
 * ripens when its first stream does.
 */
struct absorb_policy {
	uint64_t age_cap_ns;
	uint64_t trigger_bytes; /* 0: no size trigger */
	uint64_t linger_ns;
};

/* The jitter of a stream for a linger of linger_ns. */
uint64_t absorb_jitter_ns(uint64_t stream_id, uint64_t linger_ns);

/* What a committed batch did, for the caller's bookkeeping. */
struct absorb_result {
	uint32_t nrefs;
	uint64_t end_slot;
	uint64_t ripe_ns;  /* when the batch's marker ripens (its first stream) */
	uint64_t birth_ns; /* the batch's birth (wall ns) */
	int crossed;       /* a stream in it crossed the trigger */
};

/* Slots per batch at most (a span ref holds an entry per slot; see
 * absorb_commit_batch()). */
#define ABSORB_BATCH_SLOTS_MAX 16384

/*
 * Commit slots[0..n) of the chain *row (whose version is *ver) as one
 * batch: refs, then checkpoint + marker; or, when one batch would make a
 * marker or a span ref outgrow the metastore's value limit (more than
 * META_MARKER_STREAMS_MAX streams, more than ABSORB_BATCH_SLOTS_MAX
 * slots), as consecutive batches that do not (*res: the last one's, with
 * nrefs summed).  -ECANCELED also when a run's lease compare failed
 * (invariant 5).  slots must start at
 * row->checkpoint and be consecutive.  On 0 *row and *ver are the new
 * chain row and version.  -ECANCELED: the chain row changed under us
 * (another actor fenced or settled it); -EINVAL: slots not consecutive
 * from the checkpoint or runs not contiguous per stream; kv errors.
 * Idempotent (invariant 2).
 */
int absorb_commit_batch(struct kv *kv, struct meta_chain *row, uint64_t *ver,
			const struct absorb_slot *slots, uint32_t n,
			const struct absorb_policy *pol, struct absorb_result *res)
	__attribute__((warn_unused_result));

/* ------------------------------------------------------ the live absorb */

struct absorb;

struct absorb_cfg {
	struct kv *kv;            /* borrowed */
	struct backlog *backlog;  /* borrowed */
	struct nv_stats *stats;   /* borrowed */
	struct meta_chain row;    /* the chain row as of start */
	uint64_t row_ver;
	struct absorb_policy policy;
	uint32_t max_batch_slots; /* >= 1 */
	uint64_t linger_ns;       /* wait this long for more flights per pass */
	/* Called once, no locks held, when the chain row was taken from the
	 * absorb (-ECANCELED: fenced); may be NULL. */
	void (*failed)(void *arg, unsigned cls, uint64_t epoch, int err);
	void *failed_arg;
};

/* Start the absorb thread.  0 and *out, -ENOMEM, -EAGAIN. */
int absorb_new(const struct absorb_cfg *cfg, struct absorb **out)
	__attribute__((warn_unused_result));

/* Hand over a released flight (chain release callback; takes ownership).
 * Flights must arrive in slot order. */
void absorb_push(void *absorb, struct flight *f);

/* Wait until every pushed flight is committed.  0, or the error that
 * stopped the absorb. */
int absorb_drain(struct absorb *a);

/* The chain row as last committed (copied out) and its version. */
void absorb_chain_row(struct absorb *a, struct meta_chain *row, uint64_t *ver);

/* Drain, stop the thread, free.  NULL is a no-op. */
void absorb_free(struct absorb *a);

#endif
