/*
 * starcfg.h - struct star_cfg, the tunables of a star (star_open(),
 * engine/star.h).
 *
 * For: engine/star.h's callers, and engine/star_impl.h, which keeps a
 * copy inside struct star without including star.h.  Not for: defaults
 * and ranges (src/options.h).
 *
 * Invariants:
 *  1. Every field is set by the caller; none is changed after
 *     star_open().
 */
#ifndef NOVAFS_ENGINE_STARCFG_H
#define NOVAFS_ENGINE_STARCFG_H

#include <stdint.h>

#include "src/base/names.h"

struct nv_stream;

/* The caller sets every tunable: their defaults and ranges live in one
 * place, src/novafs.c's option table (novafs(8) justifies each). */
struct star_cfg {
	const char *data_dir;      /* required: lock file, default store and metastore */
	const char *store_url;     /* NULL: dir:DATA_DIR/objects (the standard bucket) */
	const char *express_urls;  /* NULL: express slots go to the standard bucket;
				    * else ';'-separated URLs, one per zone (set.h) */
	const char *location;      /* the star's zone in the express set */
	const char *meta_url;      /* NULL: sqlite:DATA_DIR/meta.db */
	const char *meta_check;    /* at open (engine/stack.h): NULL/"off", "quick", "warn" */
	const char *star_id;       /* NULL: DATA_DIR/star-id, created on first start */
	const char *listen_addr;   /* NULL: no star API; else ADDR:PORT (registry row) */
	unsigned star_lease_s;     /* registry lease TTL (engine/lease.h); 0: 10 */
	uint64_t take_wait_ns;     /* a take waits this long for a predecessor's
				    * epochs at most; 0: 3 x star_lease_s + 10 s */
	uint64_t lease_idle_ns;    /* release a lease idle this long (engine/handoff.h);
				    * 0: never */
	const char *cluster_secret_file; /* NULL: none; the star API's credential */
	const char *store_faults;  /* testing: a fault.h spec wrapping the store */
	uint64_t backlog_bytes;
	uint64_t backlog_wait_ns;  /* a writer waits this long for tokens; 0: forever */
	uint64_t tail_cache_bytes;
	uint64_t read_cache_bytes;
	uint64_t flight_max;
	/* The chains' linger; < 0: by the store (star_class_linger_ns()). */
	int64_t linger_ns;
	/* Per class (by nv class number): the chain's linger; < 0 means
	 * linger_ns (star_class_linger_ns()). */
	int64_t linger_class_ns[NV_CLASS_COUNT];
	uint64_t put_timeout_ns;
	unsigned put_window;
	unsigned group_commit;     /* 1: chain_cfg.group_commit */
	unsigned slot_segments;    /* stack_cfg.slot_segments: STACK_SEGMENTS_*
				    * of engine/stack.h */
	unsigned chunk_kib;
	int zstd_level;
	unsigned prefetch_threads;
	unsigned readahead;
	unsigned absorb_batch_slots;
	uint64_t absorb_linger_ns;
	uint64_t age_cap_ns[NV_CLASS_COUNT];
	/* Settlement (engine/settle.h, engine/trim.h). */
	uint64_t settle_trigger_bytes;
	uint64_t settle_linger_ns;
	uint64_t output_cap_bytes;
	uint64_t read_grace_ns;
	/* ReadPlan (engine/plan.h): "raw" or "signed" (NULL: raw), and a
	 * plan's TTL before the read grace bounds it (0: 30 s). */
	const char *plan_vending;
	uint64_t plan_ttl_ns;
	uint64_t fetch_cache_bytes;
	const char *scratch_dir;   /* NULL: DATA_DIR/scratch */
	unsigned settle_workers;
	uint64_t audit_period_ns;
	/* Called after a stream's acked end moved (chain.h); may be NULL. */
	void (*acked)(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte);
	void *acked_arg;
	/* Called after this star's view of a stream learned a trim another
	 * star made (engine/starview.c), or after this star trimmed it
	 * (engine/startrim.c: also for another mount, through the star
	 * API): bytes below new_byte read as zeros now; may be NULL.  Never
	 * from a read. */
	void (*trimmed)(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte);
	void *trimmed_arg;
};

#endif
