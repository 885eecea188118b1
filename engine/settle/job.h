/*
 * job.h - the internals the phases of the group settle share (not
 * included outside engine/settle/ and tests/unit/test_settle.c).
 *
 * For: the era (one group settle job of a chain, settle.h) and the
 * per-stream settle job, their states, and the functions of each phase:
 *
 *   engine/settle/era.c      era scheduling: ripe markers, streams,
 *                            judge, warm, workers, markers, frontier
 *   engine/settle/window.c   one stream's window: resume after an
 *                            earlier run, load and check the span refs,
 *                            gather their chunks, delete covered refs
 *   engine/settle/publish.c  footers, the plan of objects, multipart
 *                            assembly, create-once publication, adoption
 *   engine/settle/commit.c   the catalog row, the one CAS, the clean-up,
 *                            and settle_stream(), which drives a job
 *
 * Not for: callers of the settle (engine/settle.h is the interface).
 *
 * State of an era (struct era.state), run by settle_chain() on the
 * auditor thread:
 *
 *   NEW --settle_era_collect()--> COLLECTED --settle_era_judge()--> JUDGED
 *    |     (nothing ripe, or coalescing: settle_chain() returns 0)    |
 *    |                                                  settle_era_warm()
 *    |                                                                v
 *    |   RESOLVED <--settle_era_resolve()-- ASSEMBLED <--settle_era_assemble()-- WARM
 *
 *   transition            function
 *   NEW -> COLLECTED      settle_era_collect()   ripe markers read (the
 *                                                first ripe for one
 *                                                coalesce_ns, or the era
 *                                                full: era.c invariant 4)
 *   COLLECTED -> JUDGED   settle_era_judge()     streams grouped, judged
 *   JUDGED -> WARM        settle_era_warm()      bundles in the fetch cache
 *   WARM -> ASSEMBLED     settle_era_assemble()  workers ran settle_stream()
 *   ASSEMBLED -> RESOLVED settle_era_resolve()   markers, frontier
 *
 * State of one stream's settle job (struct settle_job.state), run by
 * settle_stream() on one worker thread:
 *
 *   NEW --resume--> RESUMED --load--> LOADED --plan--> PLANNED
 *    |                 |                                  |
 *    |                 |                               publish
 *    |                 |                                  v
 *    +--> DONE <-------+  DONE <--finish-- COMMITTED <--commit-- PUBLISHED
 *
 *   transition            function              metastore writes
 *   NEW -> RESUMED        settle_job_resume()   covered span refs of an
 *                                               earlier run deleted
 *   NEW -> DONE           settle_job_resume()   (DROPPED: trimmed away;
 *                                               SETTLED: by an earlier run)
 *   RESUMED -> LOADED     settle_job_load()     none
 *   RESUMED -> DONE       settle_job_load()     (DROPPED: refs trimmed
 *                                               away, deleted; RESIDUE)
 *   LOADED -> PLANNED     settle_job_plan()     none (reads footers)
 *   PLANNED -> PUBLISHED  settle_job_publish()  none (store objects)
 *   PUBLISHED -> COMMITTED settle_job_commit()  the one CAS
 *   COMMITTED -> DONE     settle_job_finish()   covered span refs deleted
 *   any -> DONE           settle_job_fail()     none (RESIDUE, logged)
 *
 * A job's outcome (era_stream.outcome) is final once the job is DONE:
 *
 *   PENDING --judge: deleted / trimmed away--> DROPPED
 *      |
 *      +--not qualified, or earlier history unsettled--> RESIDUE
 *      |
 *      +--resume, load, plan, publish, commit, finish--> SETTLED
 *      |
 *      +--error (logged; retried by the next pass)-----> RESIDUE
 *
 * A crash between any two transitions leaves durable state the next
 * era's job resumes from (settle.h invariant 3): before COMMITTED the
 * rows are untouched and published objects are adopted or replaced;
 * after it, settle_job_resume() finds the catalog row and deletes what
 * it covers.
 *
 * Invariants:
 *  1. An era or a job changes state only in the transition function of
 *     its table, which asserts the state it leaves on entry
 *     (assert_era_state(), assert_job_state()); a job runs only while its
 *     era is WARM.
 *  2. A job's outcome is written once, when it becomes DONE
 *     (settle_job_done()); the era reads outcomes only after the workers
 *     are joined.
 *  3. Nothing but commit.c's settle_job_commit() and the deletions of
 *     settle_delete_covered() writes ref rows, and both go through
 *     meta/refs.h (the twin rule lives there).
 *
 * Threads: the era's fields are the auditor thread's except next (under
 * lock, taken by workers); a stream's era_stream and its job belong to
 * the one worker that took it until the workers are joined.
 */
#ifndef NOVAFS_ENGINE_SETTLE_JOB_H
#define NOVAFS_ENGINE_SETTLE_JOB_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/bundle.h"
#include "engine/chain.h"
#include "engine/settle.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "src/base/u64map.h"

#define ERA_MARKERS_MAX 4096
/* What the first walk of an era's collection keeps for the second
 * (era.c "Collecting an era"): past this it walks again instead. */
#define ERA_KEEP_MARKERS (2 * ERA_MARKERS_MAX)
#define ERA_KEEP_STREAMS (256u * 1024)
/* A residue stream past its age cap (its settle failed) is retried after
 * this long, not at every pass. */
#define ERA_RETRY_NS (30ull * 1000000000ull)
#define PART_MIN (5u << 20)    /* S3's smallest non-last part */
#define PART_TARGET (8u << 20) /* parts we assemble by reading */

enum outcome { PENDING = 0, SETTLED, RESIDUE, DROPPED };

enum era_state { ERA_NEW = 0, ERA_COLLECTED, ERA_JUDGED, ERA_WARM, ERA_ASSEMBLED, ERA_RESOLVED };

struct era_stream {
	uint64_t id;
	uint64_t *keys; /* the stream's span ref keys in the era, ascending */
	uint32_t nkeys;
	uint64_t bytes;
	uint64_t oldest_birth;
	enum outcome outcome;
	struct meta_stream row;
	uint64_t end_seq, end_byte; /* settled end, when SETTLED */
	uint32_t objects;
};

#define ERA_MAGIC 0x65726121u /* "era!" */

struct era {
	unsigned magic; /* ERA_MAGIC from settle_era_init() to settle_era_free() */
	enum era_state state;
	const struct settle_cfg *cfg;
	struct meta_chain chain;
	uint64_t now;
	struct meta_marker *marks;
	uint32_t nmarks, cap;
	uint64_t est_bytes;    /* due streams' bytes in the ripe markers */
	struct u64map *due;    /* stream id -> DUE: its part of a ripe marker ripened */
	uint32_t nripe;        /* ripe markers taken (collect walk 1) */
	uint64_t last_slot;    /* first slot of the last of them: the era's end */
	uint64_t first_ripe;   /* the earliest ripe_ns of them (UINT64_MAX: none) */
	bool coalescing;       /* collect stopped: the era waits to coalesce */
	uint32_t waiting;      /* markers seen not ripe yet */
	uint64_t oldest_birth; /* of every marker seen (UINT64_MAX: none) */
	uint32_t warmed;       /* slots warmed */
	uint32_t walks;        /* walks over the chain's markers (1, or 2 on overflow) */
	uint32_t kept_streams; /* stream entries walk 1 kept */
	bool keep_overflow;    /* walk 1 kept too much: walk 2 collects */
	struct era_stream *streams;
	uint32_t nstreams;
	pthread_mutex_t lock;
	uint32_t next; /* lock: next stream for a worker */
};

/* The stream's span refs at the era's keys (from the first one kept). */
struct window {
	struct meta_ref *refs;
	uint64_t *vers;
	uint32_t n;
};

struct src_chunk {
	char key[CHAIN_KEY_MAX];
	struct bundle_entry e; /* chunk_off: in the source */
};

struct extent {
	char key[META_SETTLED_KEY_MAX];
	uint64_t off, len;
	bool copy_ok; /* a store object: server-side copy allowed */
};

/* One object of the plan. */
struct plan_obj {
	uint64_t epoch, first_seq, first_byte, max_ts;
	uint32_t rev;
	struct bundle_entry *ents; /* chunk_off: in this object */
	uint32_t nents, ents_cap;
	struct extent *ext;
	uint32_t next, ext_cap;
	uint64_t size; /* chunk region */
	uint64_t footer_off;
	uint32_t footer_len;
};

enum job_state {
	JOB_NEW = 0, JOB_RESUMED, JOB_LOADED, JOB_PLANNED, JOB_PUBLISHED, JOB_COMMITTED, JOB_DONE
};

#define JOB_MAGIC 0x6a6f6221u /* "job!" */

/* One stream's settle job; everything it points to is its own except e
 * and es (borrowed from the era). */
struct settle_job {
	unsigned magic; /* JOB_MAGIC from settle_job_init() to settle_job_free() */
	enum job_state state;
	struct era *e;
	struct era_stream *es;
	uint32_t k0;            /* first key of es->keys in the window */
	struct window w;        /* from RESUMED: filled by settle_job_load() */
	struct meta_ref prev;   /* the row before the window, if have_prev */
	bool have_prev;
	struct src_chunk *chunks; /* from LOADED */
	uint32_t nchunks;
	uint64_t max_ts;
	struct plan_obj *objs;  /* from PLANNED */
	uint32_t nobjs;
	bool have_tail;         /* objs[0] extends prev's standing tail object */
	char tail_key[META_SETTLED_KEY_MAX];
	struct meta_ref row;    /* from COMMITTED: the pivot catalog row written */
	struct meta_ref *extra; /* and the non-pivot rows after it (commit.c) */
	uint32_t nextra;
	uint64_t pivot_seq;
};

/* The checks at the entry of every era / job transition (debug builds):
 * a live object (its magic cookie) in the state the transition leaves. */
static inline void assert_era_state(const struct era *e, enum era_state want)
{
	assert(e && e->magic == ERA_MAGIC);
	assert(e->state == want);
	(void)e;
	(void)want;
}

static inline void assert_job_state(const struct settle_job *j, enum job_state want)
{
	assert(j && j->magic == JOB_MAGIC);
	assert(j->state == want);
	assert(j->e && j->es && j->w.refs && j->w.vers);
	assert_era_state(j->e, ERA_WARM); /* jobs run while the era assembles */
	(void)j;
	(void)want;
}

/* ------------------------------------------------------------ era.c */

/* e zeroed and ready (ERA_NEW); settle_era_free() undoes it. */
void settle_era_init(struct era *e, const struct settle_cfg *cfg, const struct meta_chain *c,
		     uint64_t now_ns);
void settle_era_free(struct era *e);
/* NEW -> COLLECTED: the ripe markers and the waiting markers holding a
 * due stream, in slot order, up to the last ripe marker taken (era.c
 * "Collecting an era"; other waiting markers are counted in e->waiting).
 * 0 and COLLECTED, 0 with e->nmarks == 0 (nothing ripe, or the era
 * coalesces: e->coalescing, era.c invariant 4; state stays NEW), or
 * -errno. */
int settle_era_collect(struct era *e) __attribute__((warn_unused_result));
/* COLLECTED -> JUDGED: the era's streams, each judged. */
int settle_era_judge(struct era *e) __attribute__((warn_unused_result));
/* JUDGED -> WARM: the slots of the era's markers that hold a stream
 * to settle, in the fetch cache (nothing when no stream qualifies). */
int settle_era_warm(struct era *e) __attribute__((warn_unused_result));
/* The stream's part of the marker holding span ref r's first slot (in
 * r's chain) ripens at ripe_ns, if it would later: a due stream's
 * earlier history in an older chain settles with it.  0, -ENOENT (no
 * such marker: settled meanwhile), or -errno.  Best effort: a caller may
 * ignore the result (the next era of this chain nudges again). */
int settle_nudge(const struct settle_cfg *cfg, const struct meta_ref *r, uint64_t stream,
		 uint64_t ripe_ns);
/* WARM -> ASSEMBLED: every PENDING stream through settle_stream(). */
void settle_era_assemble(struct era *e);
/* ASSEMBLED -> RESOLVED: markers rewritten or deleted (*changed counts
 * them), then the frontier. */
int settle_era_resolve(struct era *e, int *changed) __attribute__((warn_unused_result));

/* ------------------------------------------------------------ window.c */

/* j ready for es (JOB_NEW).  0 or -ENOMEM (j is still freeable). */
int settle_job_init(struct settle_job *j, struct era *e, struct era_stream *es)
	__attribute__((warn_unused_result));
void settle_job_free(struct settle_job *j);
/* JOB_DONE with outcome o. */
void settle_job_done(struct settle_job *j, enum outcome o);
/* NEW -> RESUMED or DONE. */
int settle_job_resume(struct settle_job *j) __attribute__((warn_unused_result));
/* RESUMED -> LOADED or DONE (chunks gathered when LOADED). */
int settle_job_load(struct settle_job *j) __attribute__((warn_unused_result));
/* *seq (and *byte) moved past the catalog rows that start exactly
 * there, one after the other (non-pivot rows of an earlier run: commit.c
 * invariant 3).  0 or -errno. */
int settle_catalog_end(const struct settle_cfg *cfg, uint64_t stream, uint64_t *seq,
		       uint64_t *byte) __attribute__((warn_unused_result));
/* Delete keys' span refs whose end is <= covered_end (ascending; the
 * row at skip_seq, the pivot, was replaced, not deleted). */
int settle_delete_covered(const struct settle_cfg *cfg, uint64_t stream, const uint64_t *keys,
			  uint32_t nkeys, uint64_t covered_end, uint64_t skip_seq)
	__attribute__((warn_unused_result));

/* ------------------------------------------------------------ publish.c */

/* Read and verify the footer window of an object (via the fetch cache);
 * *win (caller frees) backs *f.  Logs a failure. */
int settle_read_footer(const struct settle_cfg *cfg, const char *key, uint64_t foff,
		       uint32_t flen, uint8_t **win, struct bundle_footer *f)
	__attribute__((warn_unused_result));
/* LOADED -> PLANNED: the objects (the standing sub-cap tail object
 * first), cut at output_cap. */
int settle_job_plan(struct settle_job *j) __attribute__((warn_unused_result));
/* PLANNED -> PUBLISHED: every object published (or adopted). */
int settle_job_publish(struct settle_job *j) __attribute__((warn_unused_result));
void settle_plan_free(struct plan_obj *o, uint32_t n);

/* ------------------------------------------------------------ commit.c */

/* PUBLISHED -> COMMITTED: the non-pivot catalog rows, then the pivot
 * row by one CAS (-ECANCELED when the pivot row moved). */
int settle_job_commit(struct settle_job *j) __attribute__((warn_unused_result));
/* COMMITTED -> DONE (SETTLED): the covered span refs deleted. */
int settle_job_finish(struct settle_job *j) __attribute__((warn_unused_result));
/* Run one stream's job to DONE; on error (logged unless -ECANCELED) the
 * outcome is RESIDUE.  0 or the error. */
int settle_stream(struct era *e, struct era_stream *es);

#endif
