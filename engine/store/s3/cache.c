/*
 * cache.c - the object cache tier of the S3 backend: caching proxies
 * (nginx with proxy_cache and the slice module, tests/cache/nginx.sh) in
 * front of the bucket, chosen per (object, page) by a client-side ring
 * hash with bounded loads (S3 backend; overview in internal.h).
 *
 * For: which proxy serves a page of a ranged get (store_tier_pick()), the
 * read that goes through it and falls back to a direct ranged GET
 * (s3_cache_get()), the purge after a delete (s3_cache_purge()), the
 * URL options cache=, cache_slice_kib=, cache_hedge_ms=, cache_eps_pct=,
 * cache_auth_file= (s3_cache_parse()).
 * Not for: the request itself (request.c: a request with q->via goes to
 * the proxy instead of the endpoint, signed for the endpoint's host),
 * what an answer means (ops.c s3_get_once()).
 *
 * The tier is never authoritative and never stalls a read:
 *  1. A page is one proxy slice (cache_slice_kib, the proxies' `slice`
 *     size): a get is cut at slice boundaries and each piece asks the
 *     proxy that owns (object key, page number) on the ring.
 *  2. Bounded loads: a proxy takes a piece only while its requests in
 *     flight are below ceil((1 + eps) * (all in flight + 1) / proxies);
 *     otherwise the walk goes on clockwise.  Proxies marked down are
 *     skipped.  Every proxy owns STORE_TIER_VNODES points.
 *  3. Anything but a clean 200/206 from a proxy (connection refused, 5xx,
 *     403, 416, a short or misplaced body, nothing received within
 *     cache_hedge_ms) sends the piece straight to the bucket, once; a
 *     transport failure or a 5xx marks the proxy down for STORE_TIER_DOWN_MS,
 *     so a dead proxy costs one failure, not one per read.  A hedge does
 *     not: a slow proxy keeps its pages (marking it down would send them
 *     to other proxies, which would fetch them from the bucket again).
 *  4. Proxy requests are signed for the bucket's own host (the proxy
 *     forwards Host and Authorization); the Range header is left out of
 *     the signature because the slice module rewrites it.  The proxy's
 *     cache key is the path and the slice, never the signature, so
 *     requests signed at different times share cached pages.  The tier
 *     itself is authenticated: every request carries
 *     X-Nova-Cache-Auth with the token of cache_auth_file, and the
 *     proxies refuse any other (403).
 *  5. Deletes: after the bucket deleted an object, every slice of it is
 *     re-fetched through every live proxy with X-Nova-Cache-Refresh (the
 *     proxies bypass their cache for it): the bucket answers 404, which
 *     the proxies store over the cached bytes for one second, so cached
 *     bytes die with the object.  Debian 12's cache-purge module
 *     (libnginx-mod-http-cache-purge 2.3) crashes nginx 1.22's workers on
 *     every purge request, so the tier uses this core-nginx purge instead
 *     (README, "The object cache tier").  A purge that fails is logged and
 *     counted; it does not fail the delete (the object is gone either way
 *     and the proxies expire entries after their `inactive` time).
 *
 * Locking: the tier (struct store_tier) is immutable after
 * s3_cache_parse() but for its atomics (tier.h); the failed purges are an
 * atomic of the store.  No lock is held across a request.
 */
#include "config.h"
#include "engine/store/s3/internal.h"
#include "engine/store/tier.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static struct nv_ratelimit purge_rl;

void s3_cache_free(struct store_tier *c)
{
	store_tier_free(c);
}

/* A cache_* number option into *out (0: not given, the tier's default). */
static int opt_long(const char *url, const char *name, const char *v, long lo, long hi,
		    long *out)
{
	*out = 0;
	return s3_parse_long(url, name, v, lo, hi, out);
}

int s3_cache_parse(struct s3_store *s, const char *url, const struct s3_cache_opts *o)
{
	char ctx[64];
	struct store_tier_opts to = { .list = o->list, .auth_file = o->auth_file, .ctx = ctx,
				      .list_name = "cache=", .auth_name = "cache_auth_file" };
	int rc;

	if (!o->list) {
		if (o->slice_kib || o->hedge_ms || o->eps_pct || o->auth_file) {
			nv_log(NV_ERR, NV_SUB_STORE, "bad s3 store URL (starting '%.12s...'): cache_* options need cache=", url);
			return -EINVAL;
		}
		return 0;
	}
	snprintf(ctx, sizeof(ctx), "bad s3 store URL (starting '%.12s...')", url);
	if ((rc = opt_long(url, "cache_slice_kib", o->slice_kib, STORE_TIER_SLICE_KIB_MIN,
			   STORE_TIER_SLICE_KIB_MAX, &to.slice_kib)) ||
	    (rc = opt_long(url, "cache_hedge_ms", o->hedge_ms, STORE_TIER_HEDGE_MS_MIN,
			   STORE_TIER_HEDGE_MS_MAX, &to.hedge_ms)) ||
	    (rc = opt_long(url, "cache_eps_pct", o->eps_pct, STORE_TIER_EPS_PCT_MIN,
			   STORE_TIER_EPS_PCT_MAX, &to.eps_pct)))
		return rc;
	return store_tier_new(&to, &s->cache);
}

/* One piece [off, off + len) (inside one slice) of fk: through its proxy
 * when one takes it, else (or when the proxy fails it) direct. */
static int get_piece(struct s3_store *s, const char *fk, uint64_t off, size_t len,
		     char *dst, size_t *got)
{
	struct store_tier *c = s->cache;
	int idx = store_tier_pick(c, fk, off / c->slice), rc;
	bool down = false;

	if (idx >= 0) {
		store_tier_enter(c, idx);
		rc = s3_get_once(s, fk, off, len, dst, got, idx, &down);
		store_tier_leave(c, idx);
		if (rc == 0) {
			atomic_fetch_add(&c->px[idx].gets, 1);
			return 0;
		}
		/* A hedge is a slow answer, not a dead proxy: only this piece
		 * goes direct (marking it down would move its pages). */
		if (down && rc != -ETIMEDOUT)
			store_tier_down(c, idx, "failed");
		atomic_fetch_add(&c->direct, 1);
	}
	return s3_get_once(s, fk, off, len, dst, got, -1, NULL);
}

/* internal.h; invariant 1. */
int s3_cache_get(struct s3_store *s, const char *fk, uint64_t off, size_t len,
		 char *dst, size_t *got)
{
	uint64_t slice = s->cache->slice;
	size_t done = 0;

	*got = 0;
	while (done < len) {
		uint64_t at = off + done;
		uint64_t room = slice - at % slice;
		size_t want = len - done < room ? len - done : (size_t)room, n = 0;
		int rc = get_piece(s, fk, at, want, dst + done, &n);

		if (rc)
			return done && rc == -ERANGE ? 0 : rc;
		done += n;
		*got = done;
		if (n < want)
			break; /* the object ends here */
	}
	return 0;
}

/* internal.h; invariant 5. */
int s3_cache_purge(struct s3_store *s, const char *fk, uint64_t size)
{
	struct store_tier *c = s->cache;
	uint64_t slices = size ? (size + c->slice - 1) / c->slice : 1;
	int first = 0;

	for (int i = 0; i < c->n; i++) {
		if (store_tier_is_down(c, i))
			continue;
		for (uint64_t k = 0; k < slices; k++) {
			int rc = s3_cache_refresh_one(s, fk, k * c->slice, i);

			if (rc) {
				atomic_fetch_add(&s->cache_purge_fails, 1);
				if (rc == -EIO)
					store_tier_down(c, i, "purge failed");
				nv_log_ratelimited(&purge_rl, NV_WARN, NV_SUB_STORE,
						   "cache proxy %s: purge of %s failed (%s); "
						   "its copy expires with the proxy's inactive time",
						   c->px[i].base_url, fk, strerror(-rc));
				if (!first)
					first = rc;
				break;
			}
		}
	}
	return first;
}

void s3_cache_report(const struct s3_store *s)
{
	const struct store_tier *c = s->cache;
	unsigned long long gets = 0, fails = 0;

	for (int i = 0; i < c->n; i++) {
		gets += atomic_load(&c->px[i].gets);
		fails += atomic_load(&c->px[i].fails);
	}
	nv_log(NV_INFO, NV_SUB_STORE,
	       "s3://%s cache tier: %llu pieces through %d proxies, %llu straight to "
	       "the bucket, %llu proxy failures, %llu failed purges", s->bucket, gets,
	       c->n, (unsigned long long)atomic_load(&c->direct), fails,
	       (unsigned long long)atomic_load(&s->cache_purge_fails));
}
