/*
 * tier.h - the object cache tier's proxy set: caching proxies (nginx
 * with proxy_cache and the slice module, tests/cache/nginx.sh) in front
 * of a bucket, and which of them serves a page of an object, chosen by a
 * client-side ring hash with bounded loads (DESIGN.md section 8).
 *
 * For: every reader that goes through the tier: the S3 backend's ranged
 * gets (engine/store/s3/cache.c) and the plan consumer's signed fetches
 * (api/vend.c).  The proxy list and token file (store_tier_new()), the
 * choice of a proxy per (object key, page) (store_tier_pick()), the in
 * flight counts of the bounded loads, down-marking.
 * Not for: requests (each reader sends its own, and falls back to a
 * direct GET itself), purges (cache.c).
 *
 * The rules every reader keeps (engine/store/s3/cache.c's invariants
 * 1-4 say them in full):
 *  1. A page is one proxy slice (slice bytes): a read is cut at slice
 *     boundaries and each piece asks store_tier_pick(key, page).
 *  2. Bounded loads: a proxy takes a piece only while its requests in
 *     flight are below ceil((1 + eps) * (all in flight + 1) / proxies);
 *     otherwise the walk goes on clockwise.  Proxies marked down are
 *     skipped.  Every proxy owns STORE_TIER_VNODES points.
 *  3. Anything but a clean answer, or no body byte within hedge_ms, sends
 *     the piece straight to the bucket, once; a transport failure or a
 *     5xx (not a hedge) marks the proxy down for STORE_TIER_DOWN_MS.
 *  4. Every request through a proxy carries X-Nova-Cache-Auth: auth and
 *     the origin's own Host; the proxies' cache key is the path and the
 *     slice, never a signature.
 *
 * Locking: a tier is immutable after store_tier_new() but the per-proxy
 * atomics (in flight, down until, counters) and the totals; any thread
 * may pick, enter, leave and mark down.  No lock at all.
 */
#ifndef NOVAFS_ENGINE_STORE_TIER_H
#define NOVAFS_ENGINE_STORE_TIER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_TIER_VNODES 64
#define STORE_TIER_PROXIES_MAX 64
#define STORE_TIER_DOWN_MS 2000
/* The knobs: defaults and ranges (the S3 URL's cache_* options and
 * novagw's --cache-* options share them). */
#define STORE_TIER_SLICE_KIB_DEFAULT 1024
#define STORE_TIER_SLICE_KIB_MIN 64
#define STORE_TIER_SLICE_KIB_MAX 65536
#define STORE_TIER_HEDGE_MS_DEFAULT 500
#define STORE_TIER_HEDGE_MS_MIN 1
#define STORE_TIER_HEDGE_MS_MAX 60000
#define STORE_TIER_EPS_PCT_DEFAULT 25
#define STORE_TIER_EPS_PCT_MIN 1
#define STORE_TIER_EPS_PCT_MAX 1000
#define STORE_TIER_AUTH_MIN 16
#define STORE_TIER_AUTH_MAX 256

/* One caching proxy.  base_url is immutable; the rest are atomics. */
struct store_tier_proxy {
	char *base_url;               /* "http://host:port" */
	atomic_long inflight;         /* requests through it now */
	atomic_llong down_until_ms;   /* monotonic ms; skipped before then */
	atomic_ullong gets, fails;    /* pieces served, failures */
};

/* A point of the ring: hash and proxy index. */
struct store_tier_pt {
	uint64_t h;
	int idx;
};

struct store_tier {
	struct store_tier_proxy *px;
	int n;
	struct store_tier_pt *ring; /* n * STORE_TIER_VNODES points, sorted by h */
	size_t nring;
	uint64_t slice;             /* bytes: the proxies' slice size, one page */
	long hedge_ms;              /* no body byte by then: go direct */
	int eps_pct;                /* bounded load: capacity (1 + eps) * average */
	char *auth;                 /* X-Nova-Cache-Auth token */
	atomic_long inflight;       /* sum of px[].inflight */
	atomic_ullong direct;       /* pieces a proxy failed, read direct */
};

/* What a tier is made of.  list: "http://h:p+http://h:p" ('+' between
 * them; no path, no query); auth_file: one token of STORE_TIER_AUTH_MIN
 * to _MAX printable bytes in a file of mode 0600 or stricter; the knobs
 * in their ranges, 0 for the default.  names: how the caller's user
 * spells the options in the logs (list, auth file), e.g. { "cache",
 * "cache_auth_file" }; ctx starts every log line ("bad s3 store URL
 * (starting 's3://b...')", "novagw"). */
struct store_tier_opts {
	const char *list, *auth_file;
	long slice_kib, hedge_ms, eps_pct;
	const char *ctx;
	const char *list_name, *auth_name;
};

/* A tier from o: 0 and *out, -EINVAL (logged: ctx, the option, why) or
 * -ENOMEM. */
int store_tier_new(const struct store_tier_opts *o, struct store_tier **out)
	__attribute__((warn_unused_result));
void store_tier_free(struct store_tier *t);

/* The proxy for page of key (invariant 2), or -1 when every proxy is
 * down or at capacity: go direct. */
int store_tier_pick(struct store_tier *t, const char *key, uint64_t page);
/* Count a request in flight at proxy idx, and its end. */
void store_tier_enter(struct store_tier *t, int idx);
void store_tier_leave(struct store_tier *t, int idx);
/* Whether proxy idx is marked down now (purges skip it). */
bool store_tier_is_down(const struct store_tier *t, int idx);
/* Mark proxy idx down (invariant 3), logged (rate-limited) with why. */
void store_tier_down(struct store_tier *t, int idx, const char *why);
/* Sums of the proxies' counters. */
void store_tier_counts(const struct store_tier *t, unsigned long long *gets,
		       unsigned long long *fails);

#endif
