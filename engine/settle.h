/*
 * settle.h - the group settle: per-stream objects out of chain slots.
 *
 * For: settlement.txt "The transit window" and "The group settle".  The
 * auditor calls settle_chain() for a chain; it schedules in chain
 * coordinates:
 *
 *   era      the chain's batch markers whose ripening time has passed, in
 *            slot order (a marker still waiting is skipped, never a
 *            stop; bounded by the fetch cache budget): one group settle
 *            job.  It starts once its first marker has been ripe for
 *            coalesce_ns (one audit interval, at most 1 s), or at once when it is full,
 *            so one era takes what ripens in that interval instead of one
 *            era per pass (each era re-copies every stream's standing
 *            tail object)
 *   judge    streams that are deleted, or whose window lies wholly below
 *            their trim point, resolve without staging a byte
 *   warm     the slots of the era's markers that hold a qualifying
 *            stream are copied once into the fetch cache (none when no
 *            stream qualifies)
 *   qualify  a stream settles when its bytes in the era reach the trigger
 *            (a linger-ripened era) or when its oldest batch in the era
 *            has reached the class's age cap (everything standing goes);
 *            the rest is residue
 *   assemble per qualifying stream (a bounded worker pool), one multipart
 *            upload per object: the standing sub-cap tail object first
 *            (server-side range copy), then the window's chunks (range
 *            copy for extents of 5 MiB or more, ranged reads + upload
 *            part otherwise); objects cut at output_cap; each carries its
 *            own footer; published create-once, adopting an existing
 *            object (a lost race, or an earlier run) by reading its footer
 *   commit   non-pivot catalog rows first (a window of more objects than
 *            one row holds), then one CAS turns the row at the window's
 *            start (the span ref, or the catalog row holding the tail
 *            object) into the catalog row covering it, queueing the replaced tail object
 *            for reclamation after the read grace; then the window's other
 *            span refs are deleted in ascending order
 *   resolve  markers whose streams all settled are deleted; the others
 *            keep their residue and ripen again at their age cap; the
 *            chain's settle frontier advances to the first marker left
 *
 * Code: engine/settle/ holds the phases (era.c: era, judge, warm,
 * workers, resolve; window.c: resume and window; publish.c: plan and
 * publication; commit.c: the CAS and clean-up), with the era and job
 * state machines in engine/settle/job.h.
 *
 * Keys: settled objects are streams/<bucket>/<stream id>/<epoch>/<first
 * seq>[~rev] (meta_settled_key()); a tail extension keeps epoch and first
 * seq and takes the next revision, so a re-run computes the same keys.
 *
 * Invariants:
 *  1. Settled bytes become visible by one CAS; until then the span refs
 *     and their slots serve every byte.
 *  2. A stream settles in seq order: its window settles only when every
 *     row before it is a catalog row (or trimmed away), so a stream has at
 *     most one sub-cap object, its last (the tail is extended however
 *     full its catalog row is: objects beyond a row's META_REF_OBJS_MAX
 *     go into non-pivot rows, written before the CAS, engine/settle/
 *     commit.c invariant 3).
 *  3. Every step re-runs to the same result after a crash: object keys
 *     are derived, publication is create-once with adoption, the CAS
 *     decides once, deletions and marker resolution are idempotent.
 */
#ifndef NOVAFS_ENGINE_SETTLE_H
#define NOVAFS_ENGINE_SETTLE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/fetch.h"
#include "engine/stats.h"
#include "engine/store/store.h"
#include "meta/chains.h"
#include "meta/kv.h"
#include "meta/streams.h"

struct settle_cfg {
	struct store *store;        /* borrowed */
	struct kv *kv;              /* borrowed */
	struct nv_stats *stats;     /* borrowed */
	struct fetch_cache *fc;     /* borrowed; its budget bounds an era */
	uint64_t fetch_budget;
	uint64_t trigger_bytes;
	uint64_t output_cap_bytes;
	uint64_t read_grace_ns;
	uint64_t age_cap_ns[NV_CLASS_COUNT];
	unsigned workers;           /* streams assembled at once (>= 1) */
	/* An era starts once its first ripe marker has been ripe this long,
	 * unless it is full (ERA_MARKERS_MAX markers or fetch_budget bytes):
	 * era coalescing, engine/settle/era.c invariant 4.  0: at once.  The
	 * auditor sets its audit period. */
	uint64_t coalesce_ns;
	/* A stream's settled end moved (in-memory state upkeep); may be NULL. */
	void (*settled)(void *arg, uint64_t stream, uint64_t end_seq, uint64_t end_byte);
	/* The version of stream's writer lease row the catalog commit of a
	 * window of chain c compares (meta/leases.h), 0: none.  The star
	 * answers its cached lease for its own live head epochs (a former
	 * leader commits no catalog row), 0 for settled chains (history,
	 * guarded by the span ref CAS).  May be NULL.  Takes arg. */
	uint64_t (*lease_ver)(void *arg, uint64_t stream, const struct meta_chain *c);
	void *arg;
	/* True when the star is stopping: an era gives up between slots and
	 * between streams (-ESHUTDOWN; every step is idempotent, the next
	 * start re-runs it).  May be NULL. */
	bool (*cancelled)(void *cancel_arg);
	void *cancel_arg;
};

/* What one settle_chain() call saw of the chain (for user.nova.stats). */
struct settle_view {
	uint32_t waiting;      /* markers not ripe yet */
	uint64_t oldest_birth; /* birth (wall ns) of its oldest marker; UINT64_MAX: none */
	uint64_t era_ms;       /* the era's duration (0: no era ran) */
};

/*
 * Settle the era of chain c that is due at now_ns, if any.  Returns 1
 * when it changed something (call again: another era may be due), 0 when
 * nothing is due or only residue remains, or -errno (logged; the caller
 * backs off, settle_backoff_note()).  *view (may be NULL) gets what the
 * call saw.
 */
int settle_chain(const struct settle_cfg *cfg, const struct meta_chain *c, uint64_t now_ns,
		 struct settle_view *view) __attribute__((warn_unused_result));

/*
 * The retry state of a chain whose era fails (a corrupt chunk, a store
 * error): the next try waits SETTLE_BACKOFF_MIN_NS, doubling per failure
 * up to SETTLE_BACKOFF_MAX_NS; a call that does not fail resets it.  The
 * caller keeps one per failing chain (engine/auditor.c).
 */
#define SETTLE_BACKOFF_MIN_NS (1000000000ull)
#define SETTLE_BACKOFF_MAX_NS (60ull * 1000000000ull)

struct settle_backoff {
	uint32_t failures; /* consecutive */
	uint64_t next_ns;  /* monotonic: no try before */
	int last_err;
};

/* May the chain be tried at now_mono_ns? */
bool settle_backoff_ready(const struct settle_backoff *b, uint64_t now_mono_ns);
/* Record the result rc of a try at now_mono_ns (rc < 0: a failure). */
void settle_backoff_note(struct settle_backoff *b, int rc, uint64_t now_mono_ns);

#endif
