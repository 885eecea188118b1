/*
 * source.h - where the Gateway's bytes come from: the one seam of its
 * read pipeline.
 *
 * For: gw/http.c and gw/sse.c, which ask a source for positions, bytes
 * and a live tail and never know whose they are.  Not for: HTTP, keys,
 * budgets (gw/pool.h: the caller takes before it asks).
 *
 * A source answers four questions about one stream (each a blocking
 * call, any thread):
 *   locate  the record holding a seq or a byte: its seq and first byte
 *   read    bytes [off, off+len) (a short answer: ask again from there)
 *   follow  push each acked range from a byte on, until fn stops it
 *   bounds  the acked end and the trim point (api_bounds)
 *
 * Built today: the star source (gw_source_stars()), which asks the stars
 * named by --star through the cluster client (api/client.h): any star
 * for cold positions, the holder (after one NOT_OWNER redial) for the
 * tail; a star that cannot be reached hands the question to the next.
 *
 * And the plan source (gw_source_plan(), gw/plan.c, --serve-plan): it
 * wraps a star source; its locate, read and follow answer below a
 * ReadPlan's residual from the vended objects (api/vend.h: footer
 * windows under the --footer-cache-bytes pool, runs of chunks under the
 * --fetch-inflight pool) and pass everything at or above the residual,
 * and a follow once it reaches it, to the star source; gw/http.c and
 * gw/sse.c stay as they are.  A raw plan it cannot read (no
 * --storage-bucket) sends the op to the star source too, as in proxy
 * mode (counted: gw_source_stats()).
 *
 * Errors (-errno): -ENOENT no such stream (or deleted), -ERANGE past the
 * acked end, -EHOSTUNREACH no star could be reached, -EAGAIN the stars
 * are busy or leadership is moving, -EACCES a star refused the cluster
 * secret, -EIO anything else (logged).
 *
 * Invariants:
 *  1. A source never serves a byte past the acked end, and every byte it
 *     serves is one a star served (or, for a plan source, one a settled
 *     object holds: the same bytes).
 *  2. A follow's ranges are contiguous from its start (the cluster
 *     client's frame reader checks), so a cursor is always exact.
 */
#ifndef NOVAFS_GW_SOURCE_H
#define NOVAFS_GW_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/client.h"
#include "api/vend.h"
#include "gw/pool.h"

struct gw_source;
struct store; /* engine/store/store.h, through api/vend.h */

/* A source's counters (/healthz), since it was made. */
struct gw_source_stats {
	uint64_t raw_proxied; /* plan source: locates, reads and follows that met a
			       * raw plan without --storage-bucket and went to a
			       * star instead (gw/plan.c invariant 3) */
};
struct gw_footers; /* gw/footers.h */
struct gw_plans;   /* gw/plancache.h */

struct gw_source_ops {
	int (*locate)(struct gw_source *src, const char *bucket, const char *stream, bool by_seq,
		      uint64_t pos, uint64_t *seq, uint64_t *byte);
	int (*read)(struct gw_source *src, const char *bucket, const char *stream, uint64_t off,
		    void *dst, size_t len, size_t *got);
	/* fn as api_client_subscribe()'s; returns fn's nonzero value or
	 * -errno when the stream ends (-ENOENT: deleted). */
	int (*follow)(struct gw_source *src, const char *bucket, const char *stream,
		      uint64_t off, api_sub_fn fn, void *arg);
	int (*bounds)(struct gw_source *src, const char *bucket, const char *stream,
		      struct api_bounds *b);
	/* Optional (NULL: all counters 0): the source's counters. */
	void (*stats)(struct gw_source *src, struct gw_source_stats *out);
	void (*free)(struct gw_source *src);
};

struct gw_source {
	const struct gw_source_ops *ops;
};

/* The star source over cl (borrowed until free) and the nstars
 * addresses in stars (copied; each "HOST:PORT").  0 and *out, -ENOMEM,
 * -EINVAL (no star, or an address too long). */
int gw_source_stars(struct api_client *cl, const char *const *stars, unsigned nstars,
		    struct gw_source **out) __attribute__((warn_unused_result));

struct gw_plan_cfg {
	struct gw_source *stars;   /* the star source: owned by the plan source once
				    * gw_source_plan() returns 0 */
	struct api_client *cl;     /* borrowed until free: plans */
	const char *const *addrs;  /* copied: the stars to plan at, "HOST:PORT" */
	unsigned naddrs;
	struct store *bucket;      /* borrowed until free: raw plans' bucket; NULL:
				    * reads that meet a raw plan go to the star
				    * source (plan.c invariant 3) */
	struct gw_pool *fetch;     /* borrowed until free: --fetch-inflight */
	struct gw_pool *footers;   /* borrowed until free: --footer-cache-bytes */
	uint64_t wait_ns;          /* a take waits at most this long */
	unsigned timeout_ms;       /* one signed GET */
	struct store_tier *tier;   /* borrowed until free: the cache tier signed
				    * GETs go through (--cache); NULL: straight */
	struct gw_footers *fcache; /* borrowed until free (gw/footers.h); NULL: none */
	struct gw_plans *plans;    /* borrowed until free (gw/plancache.h); NULL: none */
};

/* The plan source over cfg.  0 and *out, -ENOMEM, -EINVAL (no star or
 * pool, or an address too long); on error cfg->stars stays the caller's. */
int gw_source_plan(const struct gw_plan_cfg *cfg, struct gw_source **out)
	__attribute__((warn_unused_result));

/* Convenience wrappers of the ops. */
static inline int gw_locate(struct gw_source *s, const char *b, const char *n, bool by_seq,
			    uint64_t pos, uint64_t *seq, uint64_t *byte)
{
	return s->ops->locate(s, b, n, by_seq, pos, seq, byte);
}
static inline int gw_read(struct gw_source *s, const char *b, const char *n, uint64_t off,
			  void *dst, size_t len, size_t *got)
{
	return s->ops->read(s, b, n, off, dst, len, got);
}
static inline int gw_follow(struct gw_source *s, const char *b, const char *n, uint64_t off,
			    api_sub_fn fn, void *arg)
{
	return s->ops->follow(s, b, n, off, fn, arg);
}
static inline int gw_bounds(struct gw_source *s, const char *b, const char *n,
			    struct api_bounds *out)
{
	return s->ops->bounds(s, b, n, out);
}
static inline void gw_source_stats(struct gw_source *s, struct gw_source_stats *out)
{
	*out = (struct gw_source_stats){ 0 };
	if (s->ops->stats)
		s->ops->stats(s, out);
}
static inline void gw_source_free(struct gw_source *s)
{
	if (s)
		s->ops->free(s);
}

#endif
