/*
 * plan.c - see source.h: the plan source (--serve-plan), settled history
 * from the vended objects, the residual from the star source it wraps.
 *
 * For: gw_source_plan() and its four ops.  Not for: fetching and
 * verifying what a plan names (api/vend.h), the residual's stars
 * (gw/stars.c), HTTP (gw/http.c, gw/sse.c, which stay as in proxy mode).
 *
 * Every op but bounds reads by plan first (api_vend_read() from its
 * position, through a star of the list by rotation; a star that cannot
 * be reached before a record was handed on passes the plan to the next):
 *   locate  the first record handed on is the answer; none (the position
 *           is at or past the residual): the star source's locate
 *   read    record bodies copied from off until len is full; none: the
 *           star source's read (a short answer, as source.h allows, is
 *           how a page crosses from vended bytes to the residual: the
 *           caller asks again from there, plans again, and gets a star)
 *   follow  the vended bodies from off pushed to fn as ranges, then the
 *           star source's follow at exactly the byte after the last one
 *   bounds  the star source's (the acked end is a star's to say)
 *
 * Budgets: every window api_vend_read() fetches is taken before the
 * fetch and given back when dropped (api_vend_budget): footer windows
 * from the --footer-cache-bytes pool, runs of chunks from the
 * --fetch-inflight pool, each waiting at most the configured wait.
 *
 * Kept across reads (api_vend_keep, both optional): verified footer
 * windows in the footer cache (gw/footers.h: its bytes in the same
 * --footer-cache-bytes pool, given back first when a reader's own
 * window finds no room), and vended plans in the plan cache
 * (gw/plancache.h, --plan-cache): the next page of a replay, or its
 * next locate, is served from the plan the last one got while the
 * position lies inside its entries and it is not near its expiry; a
 * stale plan drops the stream's kept plans and re-plans at a star.
 * Signed GETs reuse up to PLAN_IDLE_HANDLES idle curl handles (and their
 * open connections to the bucket and the cache proxies) across reads.
 *
 * Invariants (and those of source.h):
 *  1. A position at or past the residual never reads by plan: the same
 *     answer as proxy mode, from a star.
 *  2. The bytes a read or follow hands on are contiguous from its start;
 *     a vended record that does not start where the last ended (a trim
 *     overtook the read) ends the op with -EAGAIN, never a gap.
 *  3. A raw plan without --storage-bucket is never an error: the op goes
 *     to the star source from where the plan left it (the records handed
 *     on so far stay; none: the op's own position), as in proxy mode.
 *     The first such op of the process logs it once, naming the option
 *     to add; every one counts in raw_proxied (gw_source_stats()).
 */
#include "config.h"
#include "gw/footers.h"
#include "gw/plancache.h"
#include "gw/source.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ops' own fn value: stop the read (never an errno). */
/* Idle curl handles kept for signed GETs (api_vend_handles): reads that
 * run at once beyond it make their own, closed after the read. */
#define PLAN_IDLE_HANDLES 32
#define STOP 1

struct plan_src {
	struct gw_source src; /* first: the ops */
	struct gw_source *stars;
	struct api_client *cl;
	struct store *bucket;
	struct store_tier *tier;
	struct gw_pool *fetch, *footers;
	uint64_t wait_ns;
	unsigned timeout_ms, n;
	atomic_uint next;
	char (*addr)[LEASE_ADDR_MAX + 1];
	struct api_vend_budget budget;
	struct gw_footers *fcache;  /* NULL: every footer fetched */
	struct gw_plans *plans;     /* NULL: every plan from a star */
	struct api_vend_keep keep;
	struct api_vend_handles *handles; /* signed GETs' idle curl handles */
	atomic_uint_least64_t raw_proxied; /* invariant 3's ops, for /healthz */
	atomic_bool raw_said;              /* invariant 3's log line was written */
};

static struct nv_ratelimit rl_err;

static struct plan_src *plan_of(struct gw_source *src)
{
	return (struct plan_src *)(void *)src;
}

static int budget_take(void *arg, bool footer, uint64_t n)
{
	struct plan_src *ps = arg;

	if (!footer)
		return gw_pool_take(ps->fetch, n, ps->wait_ns);
	/* The footer cache's windows are in the same pool: a reader's own
	 * window comes first (gw/footers.h invariant 2). */
	if (ps->fcache && gw_pool_take(ps->footers, n, 0) == 0)
		return 0;
	if (ps->fcache)
		gw_footers_shrink(ps->fcache, n);
	return gw_pool_take(ps->footers, n, ps->wait_ns);
}

/* ------------------------------------------------------------ what is kept */

static int keep_plan_get(void *arg, const char *bucket, const char *stream, enum meta_ref_key by,
			 uint64_t pos, struct read_plan *p)
{
	struct plan_src *ps = arg;

	return gw_plans_get(ps->plans, bucket, stream, by, pos, nv_now_wall_ns(), p);
}

static void keep_plan_put(void *arg, const char *bucket, const char *stream,
			  const struct read_plan *p)
{
	gw_plans_put(((struct plan_src *)arg)->plans, bucket, stream, p);
}

static void keep_plan_drop(void *arg, const char *bucket, const char *stream)
{
	gw_plans_drop(((struct plan_src *)arg)->plans, bucket, stream);
}

static int keep_footer_get(void *arg, const char *key, uint32_t rev, uint64_t off, uint32_t len,
			   void *dst)
{
	return gw_footers_get(((struct plan_src *)arg)->fcache, key, rev, off, len, dst);
}

static void keep_footer_put(void *arg, const char *key, uint32_t rev, uint64_t off,
			    const void *win, uint32_t len)
{
	gw_footers_put(((struct plan_src *)arg)->fcache, key, rev, off, win, len);
}

static void budget_give(void *arg, bool footer, uint64_t n)
{
	struct plan_src *ps = arg;

	gw_pool_give(footer ? ps->footers : ps->fetch, n);
}

/* Whether rc is api_vend_read()'s raw plan without a bucket of our own:
 * then the op goes on at the star source (invariant 3), counted, and
 * the first of the process logged. */
static bool raw_proxied(struct plan_src *ps, const char *bucket, const char *stream, int rc)
{
	if (rc != -EOPNOTSUPP)
		return false;
	atomic_fetch_add_explicit(&ps->raw_proxied, 1, memory_order_relaxed);
	if (!atomic_exchange(&ps->raw_said, true))
		nv_log(NV_WARN, NV_SUB_API, "gateway: %s/%s: the stars vend raw plans and novagw "
		       "has no --storage-bucket: reads are proxied through a star (start "
		       "novagw with --storage-bucket=URL, the standard bucket, to read "
		       "settled history from the objects; said once)", bucket, stream);
	return true;
}

/* api_vend_read()'s other errors into source.h's. */
static int plan_err(const char *bucket, const char *stream, int rc)
{
	switch (rc) {
	case 0: case -ENOENT: case -ERANGE: case -EHOSTUNREACH: case -EACCES: case -EAGAIN:
		return rc;
	case -ESTALE: case -ETIMEDOUT:
		return -EAGAIN;
	case -E2BIG:
		nv_log_ratelimited(&rl_err, NV_WARN, NV_SUB_API, "gateway: %s/%s: a vended window "
				   "is larger than its whole pool (--fetch-inflight, "
				   "--footer-cache-bytes)", bucket, stream);
		return -EIO;
	default:
		nv_log_ratelimited(&rl_err, NV_WARN, NV_SUB_API, "gateway: %s/%s: plan read: %s", bucket, stream,
			       strerror(-rc));
		return -EIO;
	}
}

/* Every op's context starts with this: records handed on so far. */
struct vctx {
	uint64_t handed;
};

/* api_vend_read() at a star of the list, GETs of at most run_max bytes
 * (0: the consumer's 8 MiB): 0 (the residual reached), STOP (fn stopped
 * it), or -errno. */
static int vend(struct plan_src *ps, const char *bucket, const char *stream, bool by_seq,
		uint64_t pos, uint64_t run_max, api_vend_fn fn, struct vctx *cx)
{
	unsigned i0 = atomic_fetch_add_explicit(&ps->next, 1, memory_order_relaxed);
	uint64_t ns, nb;
	int rc = -EHOSTUNREACH;

	for (unsigned k = 0; k < ps->n; k++) {
		struct api_vend_cfg c = { .cl = ps->cl, .addr = ps->addr[(i0 + k) % ps->n],
					  .bucket = ps->bucket, .timeout_ms = ps->timeout_ms,
					  .tier = ps->tier,
					  .budget = &ps->budget, .run_max = run_max,
					  .keep = &ps->keep, .handles = ps->handles };

		rc = api_vend_read(&c, bucket, stream, by_seq ? META_REF_BY_SEQ : META_REF_BY_BYTE,
				   pos, fn, cx, &ns, &nb);
		if (cx->handed || (rc != -EHOSTUNREACH && rc != -EAGAIN && rc != -STAR_ENOTOWNER))
			break;
	}
	return rc;
}

/* ------------------------------------------------------------ locate */

struct loc {
	struct vctx h;
	uint64_t seq, byte;
};

static int loc_fn(void *arg, uint64_t seq, uint64_t byte, const void *body, size_t len)
{
	struct loc *l = arg;

	(void)body;
	(void)len;
	l->seq = seq;
	l->byte = byte;
	l->h.handed++;
	return STOP;
}

static int plan_locate(struct gw_source *src, const char *bucket, const char *stream,
		       bool by_seq, uint64_t pos, uint64_t *seq, uint64_t *byte)
{
	struct plan_src *ps = plan_of(src);
	struct loc l = { { 0 }, 0, 0 };
	int rc = vend(ps, bucket, stream, by_seq, pos, 1, loc_fn, &l.h); /* one chunk a GET */

	if (rc == STOP) {
		*seq = l.seq;
		*byte = l.byte;
		return 0;
	}
	if (rc == 0 || raw_proxied(ps, bucket, stream, rc))
		return gw_locate(ps->stars, bucket, stream, by_seq, pos, seq, byte);
	return plan_err(bucket, stream, rc);
}

/* ------------------------------------------------------------ read */

struct rd {
	struct vctx h;
	uint64_t off;
	char *dst;
	size_t len, got;
	bool gap;
};

static int rd_fn(void *arg, uint64_t seq, uint64_t byte, const void *body, size_t len)
{
	struct rd *r = arg;
	uint64_t cur = r->off + r->got;
	size_t from, n;

	(void)seq;
	if (byte + len <= cur)
		return 0;
	if (byte > cur) { /* invariant 2 */
		r->gap = true;
		return STOP;
	}
	from = (size_t)(cur - byte);
	n = len - from < r->len - r->got ? len - from : r->len - r->got;
	memcpy(r->dst + r->got, (const char *)body + from, n);
	r->got += n;
	r->h.handed++;
	return r->got == r->len ? STOP : 0;
}

static int plan_read(struct gw_source *src, const char *bucket, const char *stream,
		     uint64_t off, void *dst, size_t len, size_t *got)
{
	struct plan_src *ps = plan_of(src);
	struct rd r = { .off = off, .dst = dst, .len = len };
	int rc;

	if (len == 0) {
		*got = 0;
		return 0;
	}
	rc = vend(ps, bucket, stream, false, off, len, rd_fn, &r.h);
	/* Records handed on before a raw plan (a kept signed plan, then a
	 * raw one): a short answer; the caller's next read goes on from
	 * there at a star (invariant 3). */
	if ((rc == STOP || rc == 0 || rc == -EOPNOTSUPP) && r.got) {
		*got = r.got;
		return 0;
	}
	if (rc == STOP) /* a gap before the first byte */
		return -EAGAIN;
	if (rc == 0 || raw_proxied(ps, bucket, stream, rc))
		return gw_read(ps->stars, bucket, stream, off, dst, len, got);
	return plan_err(bucket, stream, rc);
}

/* ------------------------------------------------------------ follow */

struct fl {
	struct vctx h;
	api_sub_fn fn;
	void *arg;
	uint64_t cursor;
	int fn_rc;
	bool gap;
};

static int fl_fn(void *arg, uint64_t seq, uint64_t byte, const void *body, size_t len)
{
	struct fl *f = arg;
	size_t from;

	(void)seq;
	if (byte + len <= f->cursor)
		return 0;
	if (byte > f->cursor) { /* invariant 2 */
		f->gap = true;
		return STOP;
	}
	from = (size_t)(f->cursor - byte);
	f->h.handed++;
	f->fn_rc = f->fn(f->arg, f->cursor, (const char *)body + from, len - from);
	f->cursor = byte + len;
	return f->fn_rc ? STOP : 0;
}

static int plan_follow(struct gw_source *src, const char *bucket, const char *stream,
		       uint64_t off, api_sub_fn fn, void *arg)
{
	struct plan_src *ps = plan_of(src);
	struct fl f = { .fn = fn, .arg = arg, .cursor = off };
	int rc = vend(ps, bucket, stream, false, off, 0, fl_fn, &f.h);

	if (rc == STOP)
		return f.gap ? -EAGAIN : f.fn_rc;
	if (rc == 0 || raw_proxied(ps, bucket, stream, rc))
		return gw_follow(ps->stars, bucket, stream, f.cursor, fn, arg);
	return plan_err(bucket, stream, rc);
}

/* ------------------------------------------------------------ the rest */

static int plan_bounds(struct gw_source *src, const char *bucket, const char *stream,
		       struct api_bounds *b)
{
	return gw_bounds(plan_of(src)->stars, bucket, stream, b);
}

static void plan_stats(struct gw_source *src, struct gw_source_stats *out)
{
	out->raw_proxied = atomic_load_explicit(&plan_of(src)->raw_proxied,
						memory_order_relaxed);
}

static void plan_free(struct gw_source *src)
{
	struct plan_src *ps = plan_of(src);

	gw_source_free(ps->stars);
	api_vend_handles_free(ps->handles);
	free(ps->addr);
	free(ps);
}

static const struct gw_source_ops plan_ops = {
	.locate = plan_locate,
	.read = plan_read,
	.follow = plan_follow,
	.bounds = plan_bounds,
	.stats = plan_stats,
	.free = plan_free,
};

int gw_source_plan(const struct gw_plan_cfg *cfg, struct gw_source **out)
{
	struct plan_src *ps;

	if (cfg->naddrs == 0 || !cfg->stars || !cfg->fetch || !cfg->footers)
		return -EINVAL;
	for (unsigned i = 0; i < cfg->naddrs; i++)
		if (strlen(cfg->addrs[i]) > LEASE_ADDR_MAX)
			return -EINVAL;
	ps = calloc(1, sizeof(*ps));
	if (!ps || !(ps->addr = calloc(cfg->naddrs, sizeof(*ps->addr))) ||
	    api_vend_handles_new(PLAN_IDLE_HANDLES, &ps->handles)) {
		if (ps)
			free(ps->addr);
		free(ps);
		return -ENOMEM;
	}
	ps->src.ops = &plan_ops;
	ps->stars = cfg->stars;
	ps->cl = cfg->cl;
	ps->bucket = cfg->bucket;
	ps->tier = cfg->tier;
	ps->fetch = cfg->fetch;
	ps->footers = cfg->footers;
	ps->wait_ns = cfg->wait_ns;
	ps->timeout_ms = cfg->timeout_ms;
	ps->n = cfg->naddrs;
	for (unsigned i = 0; i < cfg->naddrs; i++)
		snprintf(ps->addr[i], sizeof(ps->addr[i]), "%s", cfg->addrs[i]);
	ps->budget = (struct api_vend_budget){ .take = budget_take, .give = budget_give,
					       .arg = ps };
	ps->fcache = cfg->fcache;
	ps->plans = cfg->plans;
	ps->keep = (struct api_vend_keep){
		.plan_get = cfg->plans ? keep_plan_get : NULL,
		.plan_put = cfg->plans ? keep_plan_put : NULL,
		.plan_drop = cfg->plans ? keep_plan_drop : NULL,
		.footer_get = cfg->fcache ? keep_footer_get : NULL,
		.footer_put = cfg->fcache ? keep_footer_put : NULL,
		.arg = ps,
	};
	*out = &ps->src;
	return 0;
}
