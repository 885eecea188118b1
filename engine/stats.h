/*
 * stats.h - the engine's counters and gauges.
 *
 * For: user.nova.stats on the mount root, novactl status and benchmarks.
 * Every field is a relaxed atomic: written on hot paths without locks,
 * read as an approximate snapshot.  Counters count since the star
 * started; gauges (marked) are current values.
 */
#ifndef NOVAFS_ENGINE_STATS_H
#define NOVAFS_ENGINE_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#define NV_STATS_FIELDS(X)                                                 \
	X(appends)            /* records acknowledged */                   \
	X(append_bytes)       /* body bytes acknowledged */                \
	X(append_errors)      /* records failed back to their writer */    \
	X(flights)            /* flights sealed */                         \
	X(slots_written)      /* slot PUTs that succeeded */               \
	X(slot_put_retries)   /* slot PUT attempts that were retried */    \
	X(slots_deleted)      /* slots retired by trim-check */            \
	X(absorb_batches)     /* absorb batches committed */               \
	X(span_refs)          /* span refs written */                      \
	X(tail_cache_hits)    /* reads served from the tail window cache */\
	X(tail_cache_skipped) /* flights too large for the cache */        \
	X(tail_cache_evicted) /* bytes evicted from the cache */           \
	X(backlog_waits)      /* admissions that blocked for tokens */     \
	X(backlog_timeouts)   /* admissions failed after backlog_wait_s */ \
	X(cold_reads)         /* reads served from object storage */       \
	X(cold_read_bytes)    /* bytes those reads returned */             \
	X(footer_fetches)     /* footer windows fetched */                 \
	X(chunk_fetches)      /* chunk extents fetched */                  \
	X(whole_fetches)      /* small objects read whole, in one GET */   \
	X(read_cache_hits)    /* chunks found decoded in the read cache */ \
	X(prefetches)         /* chunk extents fetched ahead */            \
	X(ref_lookups)        /* ref reads of the read path (metastore) */ \
	X(corrupt_objects)    /* bundles that failed verification */       \
	X(recovered_slots)    /* slots absorbed by recovery walks */       \
	X(settle_jobs)        /* eras settled (group settle jobs) */      \
	X(settled_objects)    /* settled objects published */             \
	X(range_copies)       /* extents copied server-side */            \
	X(copy_fallbacks)     /* copies the store refused: read instead */\
	X(settle_failures)    /* settle passes of a chain that failed */  \
	X(settle_era_ms_max)  /* gauge: the longest era so far, ms */     \
	X(settle_pass_ms_max) /* gauge: the longest settle pass so far   \
			       * (every chain's eras, trim), ms */       \
	X(settle_markers_waiting) /* gauge: markers not ripe yet */       \
	X(settle_oldest_standard_ms) /* gauge: age of the oldest un-settled\
				      * standard batch, ms (0: none) */   \
	X(settle_oldest_express_ms)  /* gauge: the same, express */       \
	X(settle_chains_failing)  /* gauge: chains backing off after a    \
				   * failed era */                        \
	X(settle_backoff_ms)  /* gauge: the longest of their backoffs, ms */\
	X(settle_duty)        /* gauge: 1 while this star holds the settle \
				 duty (engine/duty.h) */                    \
	X(demand_settles)     /* predecessor epochs settled on demand by a \
				 take (engine/runner.h) */                  \
	X(wakes)              /* parked readers woken by an edge */      \
	X(plans)              /* read plans answered (engine/plan.h) */  \
	X(plan_entries)       /* settled objects those plans vended */   \
	X(parked_readers)     /* gauge: follow-view reads parked now */ \
	X(subscriptions)      /* gauge: star-API subscriptions open now  \
			       * (api/subscribe.c) */                   \
	X(subscribes)         /* star-API subscriptions opened */

struct nv_stats {
#define NV_STATS_DECL(name) _Atomic uint64_t name;
	NV_STATS_FIELDS(NV_STATS_DECL)
#undef NV_STATS_DECL
};

#define NV_STAT_ADD(st, field, n) \
	atomic_fetch_add_explicit(&(st)->field, (uint64_t)(n), memory_order_relaxed)
#define NV_STAT_SET(st, field, v) \
	atomic_store_explicit(&(st)->field, (uint64_t)(v), memory_order_relaxed)
#define NV_STAT_GET(st, field) \
	atomic_load_explicit(&(st)->field, memory_order_relaxed)

/* Visit every counter by name (for JSON output). */
typedef void (*nv_stats_fn)(void *arg, const char *name, uint64_t value);
void nv_stats_visit(const struct nv_stats *st, nv_stats_fn fn, void *arg);

#endif
