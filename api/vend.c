/*
 * vend.c - see vend.h: reading what read plans name.
 *
 * For: the plan loop, the two fetch forms (the caller's store for raw
 * plans, libcurl ranged GETs for signed ones), footer and chunk
 * verification, and the re-plan rule.  Not for: the residual.
 *
 * State of one read (struct vend, the caller's thread only, no locks):
 * the position (the next seq wanted, and its byte once known), the
 * current plan, one footer window and one chunk buffer, and whether the
 * next plan must come from a star (after a stale one: cfg->keep's kept
 * plans of the stream were dropped, and a re-plan never takes a kept one).
 * cfg->keep is the caller's and locks itself.  struct api_vend_handles
 * (the idle handles) is locked by its own mutex, held only to pop or push
 * one handle; a handle taken is the read's alone until given back.
 *
 * Invariants: those of vend.h.
 */
#include "config.h"
#include "api/vend.h"
#include "engine/bundle.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_TIMEOUT_MS 30000
/* A plan is treated as expired this long before its expires (clocks). */
#define EXPIRY_MARGIN_NS NV_NS_PER_S
/* Bytes one ranged GET of consecutive chunks asks for at most. */
#define FETCH_RUN_MAX (8u << 20)
/* The stale answers of a fetch (vend.h invariant 1): re-plan.  fn's own
 * nonzero values travel in vend.fn_rc, never as a return value inside. */
#define STALE 1
#define STOPPED 2
/* The longest host[:port] of a presigned URL sent through the tier. */
#define URL_HOST_MAX 255

struct vend {
	const struct api_vend_cfg *cfg;
	const char *bucket, *stream;
	api_vend_fn fn;
	void *arg;
	enum meta_ref_key by;
	uint64_t pos;          /* the start (by) */
	uint64_t seq, byte;    /* the next record wanted; byte valid once started */
	bool started;          /* a record or a whole entry was passed */
	struct read_plan *plan;
	CURL *easy;            /* signed fetches */
	struct nv_buf got;     /* the current window */
	size_t want;           /* its length: a longer signed answer is refused */
	int fn_rc;             /* fn's nonzero value (STOPPED inside) */
	bool body_seen, hedged; /* the current GET: a body byte came; abandoned */
	uint64_t t0_ns;        /* ... started (monotonic) */
	uint64_t cr_start;     /* ... its Content-Range start (UINT64_MAX: none) */
	uint64_t got_held;     /* bytes of got taken from cfg->budget ... */
	bool got_footer;       /* ... as a footer window */
	bool fresh;            /* the next plan from a star, never cfg->keep's */
};

/* ------------------------------------------------------------ handles */

struct api_vend_handles {
	pthread_mutex_t lock;
	unsigned max, n;  /* lock: idle[0, n) */
	uint64_t made, reused; /* lock */
	CURL *idle[];
};

int api_vend_handles_new(unsigned max, struct api_vend_handles **out)
{
	struct api_vend_handles *hs;

	*out = NULL;
	if (!max || max > 4096)
		return -EINVAL;
	hs = calloc(1, sizeof(*hs) + max * sizeof(hs->idle[0]));
	if (!hs)
		return -ENOMEM;
	pthread_mutex_init(&hs->lock, NULL);
	hs->max = max;
	*out = hs;
	return 0;
}

void api_vend_handles_free(struct api_vend_handles *hs)
{
	if (!hs)
		return;
	for (unsigned i = 0; i < hs->n; i++)
		curl_easy_cleanup(hs->idle[i]);
	pthread_mutex_destroy(&hs->lock);
	free(hs);
}

void api_vend_handles_counts(struct api_vend_handles *hs, uint64_t *made, uint64_t *reused)
{
	pthread_mutex_lock(&hs->lock);
	*made = hs->made;
	*reused = hs->reused;
	pthread_mutex_unlock(&hs->lock);
}

/* An idle handle of hs, or a new one (hs NULL: always new).  NULL: out
 * of memory. */
static CURL *handle_take(struct api_vend_handles *hs)
{
	CURL *e = NULL;

	if (hs) {
		pthread_mutex_lock(&hs->lock);
		if (hs->n) {
			e = hs->idle[--hs->n];
			hs->reused++;
		}
		pthread_mutex_unlock(&hs->lock);
		if (e)
			return e;
	}
	e = curl_easy_init();
	if (e && hs) {
		pthread_mutex_lock(&hs->lock);
		hs->made++;
		pthread_mutex_unlock(&hs->lock);
	}
	return e;
}

/* e back to hs's idle set, or closed (hs NULL or full). */
static void handle_give(struct api_vend_handles *hs, CURL *e)
{
	if (!e)
		return;
	if (hs) {
		pthread_mutex_lock(&hs->lock);
		if (hs->n < hs->max) {
			hs->idle[hs->n++] = e;
			e = NULL;
		}
		pthread_mutex_unlock(&hs->lock);
	}
	if (e)
		curl_easy_cleanup(e);
}

/* ------------------------------------------------------------ budgets */

static void budget_give(struct vend *v, bool footer, uint64_t *held)
{
	if (*held && v->cfg->budget)
		v->cfg->budget->give(v->cfg->budget->arg, footer, *held);
	*held = 0;
}

static int budget_take(struct vend *v, bool footer, uint64_t n, uint64_t *held)
{
	int rc = 0;

	if (v->cfg->budget && (rc = v->cfg->budget->take(v->cfg->budget->arg, footer, n)) == 0)
		*held = n;
	return rc;
}

/* v->got is about to hold a window of len bytes (a footer window or not). */
static int budget_got(struct vend *v, bool footer, uint64_t len)
{
	nv_buf_free(&v->got); /* the last window: freed as its bytes are given back */
	budget_give(v, v->got_footer, &v->got_held);
	v->got_footer = footer;
	return budget_take(v, footer, len, &v->got_held);
}

/* ------------------------------------------------------------ fetching */

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct vend *v = arg;

	if (v->got.len + size * n > v->want)
		return 0;
	v->body_seen = true;
	return nv_buf_add(&v->got, p, size * n) ? 0 : size * n;
}

/* The start of a "Content-Range: bytes A-B/T" answer into v->cr_start. */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct vend *v = arg;
	size_t len = size * n;
	char line[128];
	unsigned long long a;

	if (len < sizeof(line) && !strncasecmp(p, "content-range:", 14)) {
		memcpy(line, p, len);
		line[len] = '\0';
		if (sscanf(line + 14, " bytes %llu-", &a) == 1)
			v->cr_start = a;
	}
	return len;
}

/* A hedged request (through a cache proxy): abandoned when no body byte
 * came within the tier's hedge_ms (api/vend.h, the tier). */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct vend *v = arg;

	(void)dltotal;
	(void)ultotal;
	(void)ulnow;
	if (dlnow > 0 || v->body_seen)
		return 0;
	if (nv_now_mono_ns() - v->t0_ns > (uint64_t)v->cfg->tier->hedge_ms * 1000000u) {
		v->hedged = true;
		return 1;
	}
	return 0;
}

/* One GET of [off, off + len) of url, appended to v->got (at most len
 * bytes); hdrs sent as they are; hedge: through a proxy (hedged, the
 * answer's Content-Range start kept).  curl's code, *status. */
static CURLcode perform(struct vend *v, const char *url, struct curl_slist *hdrs, uint64_t off,
			uint64_t len, bool hedge, long *status)
{
	long timeout = (long)(v->cfg->timeout_ms ? v->cfg->timeout_ms : DEFAULT_TIMEOUT_MS);
	char range[64];
	CURLcode cc;

	snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)off,
		 (unsigned long long)(off + len - 1));
	curl_easy_reset(v->easy);
	curl_easy_setopt(v->easy, CURLOPT_URL, url);
	curl_easy_setopt(v->easy, CURLOPT_RANGE, range);
	curl_easy_setopt(v->easy, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(v->easy, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(v->easy, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(v->easy, CURLOPT_TIMEOUT_MS, timeout);
	curl_easy_setopt(v->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(v->easy, CURLOPT_WRITEDATA, v);
	if (hdrs)
		curl_easy_setopt(v->easy, CURLOPT_HTTPHEADER, hdrs);
	v->want = v->got.len + (size_t)len;
	v->body_seen = v->hedged = false;
	v->cr_start = UINT64_MAX;
	if (hedge) {
		long hedge_ms = v->cfg->tier->hedge_ms;

		v->t0_ns = nv_now_mono_ns();
		curl_easy_setopt(v->easy, CURLOPT_CONNECTTIMEOUT_MS,
				 hedge_ms < timeout ? hedge_ms : timeout);
		curl_easy_setopt(v->easy, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(v->easy, CURLOPT_HEADERDATA, v);
		curl_easy_setopt(v->easy, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(v->easy, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(v->easy, CURLOPT_XFERINFODATA, v);
	}
	*status = 0;
	cc = curl_easy_perform(v->easy);
	curl_easy_getinfo(v->easy, CURLINFO_RESPONSE_CODE, status);
	curl_easy_setopt(v->easy, CURLOPT_HTTPHEADER, NULL);
	return cc;
}

/* Piece [off, off + len) of a presigned URL straight from the bucket,
 * appended to v->got.  0, STALE, -errno. */
static int direct_piece(struct vend *v, const char *url, uint64_t off, uint64_t len)
{
	size_t start = v->got.len;
	long status;
	CURLcode cc = perform(v, url, NULL, off, len, false, &status);

	if (cc == CURLE_OK && (status == 404 || status == 403 || status == 412))
		return STALE;
	if (cc == CURLE_OK && status == 200 && off == 0 && v->got.len - start == len)
		return 0; /* a server that answers the whole (short) object */
	if (cc != CURLE_OK || status != 206) {
		nv_log(NV_DEBUG, NV_SUB_API, "plan fetch %s/%s: %s, HTTP %ld", v->bucket, v->stream,
		       curl_easy_strerror(cc), status);
		return cc == CURLE_OK ? -EIO : cc == CURLE_WRITE_ERROR ? -EBADMSG : -EHOSTUNREACH;
	}
	return v->got.len - start == len ? 0 : -EBADMSG;
}

/* Piece [off, off + len) (inside one slice) of the presigned URL whose
 * origin host is host and path and query pathq, through proxy idx of the
 * tier, appended to v->got: true when the proxy's answer was clean (the
 * tier's rules 3 and 4; *down: a transport failure or a 5xx, not a
 * hedge).  A failed piece leaves v->got as it was. */
static bool proxy_piece(struct vend *v, int idx, const char *host, const char *pathq,
			uint64_t off, uint64_t len, bool *down)
{
	const struct store_tier *t = v->cfg->tier;
	char hhost[URL_HOST_MAX + 8], auth[STORE_TIER_AUTH_MAX + 32];
	struct curl_slist *hdrs, *l;
	struct nv_buf url;
	size_t start = v->got.len;
	long status = 0;
	CURLcode cc = CURLE_OUT_OF_MEMORY;
	bool ok = false;

	*down = false;
	nv_buf_init(&url, 64 * 1024);
	/* The origin's Host (the URL was signed for it), the tier's token. */
	snprintf(hhost, sizeof(hhost), "Host: %s", host);
	snprintf(auth, sizeof(auth), "X-Nova-Cache-Auth: %s", t->auth);
	hdrs = curl_slist_append(NULL, hhost);
	l = hdrs ? curl_slist_append(hdrs, auth) : NULL;
	memset(auth, 0, sizeof(auth));
	if (l && nv_buf_printf(&url, "%s%s", t->px[idx].base_url, pathq) == 0)
		cc = perform(v, (char *)url.ptr, hdrs, off, len, true, &status);
	if (cc == CURLE_OK && v->got.len - start == len &&
	    ((status == 206 && v->cr_start == off) || (status == 200 && off == 0)))
		ok = true;
	else if ((cc != CURLE_OK && cc != CURLE_WRITE_ERROR && !v->hedged &&
		  cc != CURLE_OUT_OF_MEMORY) || status >= 500)
		*down = true;
	if (!ok) {
		nv_log(NV_DEBUG, NV_SUB_API, "plan fetch %s/%s: cache proxy %s: %s, HTTP %ld%s; "
		       "the piece at %llu goes straight to the bucket", v->bucket, v->stream,
		       t->px[idx].base_url, curl_easy_strerror(cc), status,
		       v->hedged ? " (hedge)" : "", (unsigned long long)off);
		v->got.len = start;
	}
	curl_slist_free_all(hdrs); /* curl's copy of the token went with it */
	nv_buf_free(&url);
	return ok;
}
/* The host[:port] of url (after "://", up to its path) into host, its
 * path and query into *pathq.  0 or -EINVAL (no path: not through the
 * tier). */
static int split_url(const char *url, char host[URL_HOST_MAX + 1], const char **pathq)
{
	const char *h = strstr(url, "://"), *p;
	size_t n;

	if (!h)
		return -EINVAL;
	h += 3;
	p = h + strcspn(h, "/?#");
	n = (size_t)(p - h);
	if (n == 0 || n > URL_HOST_MAX || *p != '/' || memchr(h, '@', n))
		return -EINVAL;
	memcpy(host, h, n);
	host[n] = '\0';
	*pathq = p;
	return 0;
}

/* GET [off, off + len) of entry e's presigned URL into v->got: straight
 * from the bucket, or with a cache tier cut at its slices, each piece
 * through the proxy the ring picks for (e->key, page) and straight from
 * the bucket when none takes it or its answer is not clean (vend.h
 * "Fetching").  0, STALE, -errno. */
static int fetch_url(struct vend *v, const struct plan_entry *e, uint64_t off, uint64_t len)
{
	struct store_tier *t = v->cfg->tier;
	char host[URL_HOST_MAX + 1];
	const char *pathq = NULL;
	uint64_t done = 0;
	int rc = 0;

	if (!v->easy && !(v->easy = handle_take(v->cfg->handles)))
		return -ENOMEM;
	nv_buf_reset(&v->got);
	if (!t || split_url(e->url, host, &pathq))
		return direct_piece(v, e->url, off, len);
	while (done < len && rc == 0) {
		uint64_t at = off + done, room = t->slice - at % t->slice;
		uint64_t want = len - done < room ? len - done : room;
		int idx = store_tier_pick(t, e->key, at / t->slice);
		bool down = false, ok = false;

		if (idx >= 0) {
			store_tier_enter(t, idx);
			ok = proxy_piece(v, idx, host, pathq, at, want, &down);
			store_tier_leave(t, idx);
			if (ok) {
				atomic_fetch_add(&t->px[idx].gets, 1);
			} else {
				/* A hedge is a slow proxy, not a dead one: it keeps
				 * its pages (tier.h invariant 3). */
				if (down)
					store_tier_down(t, idx, "failed");
				atomic_fetch_add(&t->direct, 1);
			}
		}
		if (!ok)
			rc = direct_piece(v, e->url, at, want);
		done += want;
	}
	return rc;
}

/* Window [off, off + len) of entry e into v->got.  0, STALE, -errno. */
static int fetch(struct vend *v, const struct plan_entry *e, uint64_t off, uint64_t len)
{
	size_t n = 0;
	int rc;

	if (len == 0 || len > BUNDLE_CHUNK_MAX + (uint64_t)BUNDLE_ENTRIES_MAX * BUNDLE_ENTRY_SIZE)
		return -EBADMSG;
	if (!e->url && !v->cfg->bucket)
		return -EOPNOTSUPP; /* a raw plan and no bucket of our own: nothing taken */
	rc = budget_got(v, off == e->footer_off && len == e->footer_len, len);
	if (rc)
		return rc;
	if (e->url)
		return fetch_url(v, e, off, len);
	nv_buf_reset(&v->got);
	rc = nv_buf_reserve(&v->got, len);
	if (rc == 0)
		rc = store_get_range(v->cfg->bucket, e->key, off, (size_t)len, v->got.ptr, &n);
	if (rc == -ENOENT || rc == -EACCES || rc == -ERANGE)
		return STALE;
	if (rc)
		return rc;
	v->got.len = n;
	return n == len ? 0 : -EBADMSG;
}

/* ------------------------------------------------------------ one entry */

/* Whether record (seq, byte, len) is at or after the start. */
static bool wanted(const struct vend *v, uint64_t seq, uint64_t byte, size_t len)
{
	if (v->started || v->by == META_REF_BY_SEQ)
		return seq >= v->seq;
	return byte + len > v->pos || (len == 0 && byte >= v->pos);
}

/* One GET: the run of chunks from idx (below end) whose stored extents
 * follow each other, up to cfg->run_max (FETCH_RUN_MAX) bytes (a larger
 * chunk alone),
 * into v->got.  0 and *n chunks from object offset *base, STALE, -errno. */
static int fetch_run(struct vend *v, const struct plan_entry *e, const struct bundle_footer *f,
		     uint32_t idx, uint32_t end, uint32_t *n, uint64_t *base)
{
	uint64_t run_max = v->cfg->run_max && v->cfg->run_max < FETCH_RUN_MAX
			   ? v->cfg->run_max : FETCH_RUN_MAX;
	struct bundle_entry be;
	uint64_t stop;
	uint32_t k;

	if (bundle_footer_get(f, idx, &be))
		return -EBADMSG;
	*base = be.chunk_off;
	stop = be.chunk_off + be.comp_len;
	for (k = idx + 1; k < end; k++) {
		if (bundle_footer_get(f, k, &be))
			return -EBADMSG;
		if (be.chunk_off != stop || stop + be.comp_len - *base > run_max)
			break;
		stop += be.comp_len;
	}
	if (stop > e->footer_off)
		return -EBADMSG;
	*n = k - idx;
	return fetch(v, e, *base, stop - *base);
}

/* Chunk idx of the stream in footer f, fetched in v->got from object
 * offset base: verify, decode, hand on. */
static int chunk(struct vend *v, const struct bundle_footer *f, uint32_t idx, uint64_t base,
		 struct nv_buf *raw)
{
	struct bundle_entry be;
	uint64_t byte, seq;
	size_t off = 0;
	int rc = bundle_footer_get(f, idx, &be);

	if (rc)
		return rc;
	nv_buf_reset(raw);
	rc = bundle_chunk_decode(&be, v->got.ptr + (be.chunk_off - base), be.comp_len, raw);
	if (rc)
		return rc;
	seq = be.first_seq;
	byte = be.first_byte;
	for (;;) {
		struct bundle_rec r;
		int more = bundle_frames_next(raw->ptr, raw->len, &off, &r);

		if (more <= 0)
			return more;
		if (wanted(v, seq, byte, r.len)) {
			if (v->started && (seq != v->seq || byte != v->byte))
				return -EBADMSG; /* vend.h invariant 2: no gap, no repeat */
			v->fn_rc = v->fn(v->arg, seq, byte, r.body, r.len);
			v->seq = seq + 1;
			v->byte = byte + r.len;
			v->started = true;
			if (v->fn_rc)
				return STOPPED;
		}
		seq++;
		byte += r.len;
	}
}

/* The stream's footer entries must hold exactly e's records and bytes. */
static int check_cover(const struct vend *v, const struct plan_entry *e,
		       const struct bundle_footer *f, uint32_t first, uint32_t count)
{
	struct bundle_entry a, z;

	if (bundle_footer_get(f, first, &a) || bundle_footer_get(f, first + count - 1, &z) ||
	    a.first_seq != e->first_seq || a.first_byte != e->first_byte ||
	    z.first_seq + z.nrec != e->end_seq ||
	    z.first_byte + bundle_entry_body_bytes(&z) != e->end_byte) {
		nv_log(NV_WARN, NV_SUB_API, "plan fetch %s/%s: %s does not hold the records its "
		       "plan names", v->bucket, v->stream, e->key);
		return -EBADMSG;
	}
	return 0;
}

/* entry(), its footer window in win (kept: from cfg->keep) or fetched
 * into v->got. */
static int entry_in(struct vend *v, const struct plan_entry *e, struct nv_buf *win,
		    struct nv_buf *raw, bool kept)
{
	const struct api_vend_keep *keep = v->cfg->keep;
	struct bundle_footer f;
	uint32_t first, count, i;
	int rc = 0;

	if (!kept) {
		nv_buf_reset(win);
		rc = nv_buf_add(win, v->got.ptr, v->got.len);
	}
	if (rc == 0)
		rc = bundle_footer_open(win->ptr, win->len, e->footer_off, &f);
	if (rc == 0 && !kept && keep && keep->footer_put)
		keep->footer_put(keep->arg, e->key, e->rev, e->footer_off, win->ptr, (uint32_t)win->len);
	if (rc == 0)
		rc = bundle_footer_stream(&f, v->plan->stream_id, &first, &count) ? -EBADMSG : 0;
	if (rc == 0)
		rc = check_cover(v, e, &f, first, count);
	if (rc)
		return rc == -EBADMSG || rc == -ENOMEM ? rc : -EBADMSG;
	/* The chunk holding the position (vend.h: from there, not the first). */
	i = first;
	if (v->started || v->by == META_REF_BY_SEQ) {
		if (v->seq > e->first_seq && bundle_footer_find_seq(&f, v->plan->stream_id, v->seq,
								    &i))
			return -EBADMSG;
	} else if (v->pos > e->first_byte && v->pos <= e->end_byte &&
		   /* At the entry's end (a plan that names the entry before the
		    * position, as a kept plan does) only zero-length records at
		    * its end are wanted: from the chunk of its last byte. */
		   bundle_footer_find_byte(&f, v->plan->stream_id,
					   v->pos < e->end_byte ? v->pos : v->pos - 1, &i)) {
		return -EBADMSG;
	}
	while (i < first + count) {
		uint64_t base;
		uint32_t n;

		rc = fetch_run(v, e, &f, i, first + count, &n, &base);
		for (uint32_t k = i; rc == 0 && k < i + n; k++)
			rc = chunk(v, &f, k, base, raw);
		if (rc)
			return rc;
		i += n;
		if (nv_now_wall_ns() + EXPIRY_MARGIN_NS >= v->plan->expires_ns && i < first + count)
			return STALE; /* expired mid-object: the rest under a new plan */
	}
	v->seq = e->end_seq;
	v->byte = e->end_byte;
	v->started = true;
	return 0;
}

/* The footer window of e from cfg->keep into win, its bytes taken from
 * the budget (*held): true, or false (not kept: fetch it). */
static bool footer_kept(struct vend *v, const struct plan_entry *e, struct nv_buf *win,
			uint64_t *held)
{
	const struct api_vend_keep *k = v->cfg->keep;

	if (!k || !k->footer_get || e->footer_len == 0)
		return false;
	nv_buf_reset(win);
	if (nv_buf_reserve(win, e->footer_len) ||
	    budget_take(v, true, e->footer_len, held))
		return false;
	if (k->footer_get(k->arg, e->key, e->rev, e->footer_off, e->footer_len, win->ptr)) {
		budget_give(v, true, held);
		return false;
	}
	win->len = e->footer_len;
	return true;
}

/* Entry e: footer, cover, chunks from the position.  0, STALE, -errno. */
static int entry(struct vend *v, const struct plan_entry *e, struct nv_buf *win,
		 struct nv_buf *raw)
{
	uint64_t win_held = 0;
	bool kept = footer_kept(v, e, win, &win_held);
	int rc = 0;

	if (kept)
		rc = entry_in(v, e, win, raw, true);
	else if ((rc = fetch(v, e, e->footer_off, e->footer_len)) == 0 &&
		 (rc = budget_take(v, true, v->got.len, &win_held)) == 0)
		rc = entry_in(v, e, win, raw, false);
	nv_buf_free(win); /* what the budget gave back is freed with it */
	budget_give(v, true, &win_held);
	return rc;
}

/* ------------------------------------------------------------ the plan loop */

/* One plan from the position, its entries read.  0 (*done: the residual
 * was reached), STALE, or -errno / fn's value. */
static int one_plan(struct vend *v, struct nv_buf *win, struct nv_buf *raw, bool *done)
{
	struct read_plan *p = v->plan;
	const struct api_vend_keep *k = v->cfg->keep;
	enum meta_ref_key by = v->started ? META_REF_BY_SEQ : v->by;
	uint64_t pos = v->started ? v->seq : v->pos;
	int rc = -ENOENT;

	if (k && k->plan_get && !v->fresh)
		rc = k->plan_get(k->arg, v->bucket, v->stream, by, pos, p);
	if (rc) {
		rc = api_client_plan(v->cfg->cl, v->cfg->addr, v->bucket, v->stream, by, pos, 0, p);
		if (rc == 0 && k && k->plan_put)
			k->plan_put(k->arg, v->bucket, v->stream, p);
	}
	v->fresh = false;

	*done = false;
	/* Records below the trim point are gone: never hand them on. */
	if (rc == 0 && v->seq < p->trim_seq && (v->started || v->by == META_REF_BY_SEQ))
		v->seq = p->trim_seq;
	if (rc == 0 && !v->started && v->by == META_REF_BY_BYTE && v->pos < p->trim_byte)
		v->pos = p->trim_byte;
	for (uint32_t i = 0; rc == 0 && i < p->n; i++) {
		/* Entries wholly below the position (the first of a plan
		 * holds the planner's start, which may lie below ours). */
		if ((v->started || v->by == META_REF_BY_SEQ) ? p->e[i].end_seq <= v->seq
							      : p->e[i].end_byte < v->pos)
			continue;
		if (nv_now_wall_ns() + EXPIRY_MARGIN_NS >= p->expires_ns)
			rc = STALE;
		else
			rc = entry(v, &p->e[i], win, raw);
	}
	if (rc == 0 && !p->more) {
		*done = true;
		if (!v->started || p->residual_seq > v->seq) {
			v->seq = p->residual_seq;
			v->byte = p->residual_byte;
		}
	}
	if (rc == 0 && p->more && p->n == 0)
		rc = -EIO; /* a cursor that does not move: never loop on it */
	plan_clear(p);
	return rc;
}

int api_vend_read(const struct api_vend_cfg *cfg, const char *bucket, const char *stream,
		  enum meta_ref_key by, uint64_t pos, api_vend_fn fn, void *arg,
		  uint64_t *next_seq, uint64_t *next_byte)
{
	struct vend v = { .cfg = cfg, .bucket = bucket, .stream = stream, .fn = fn, .arg = arg,
			  .by = by, .pos = pos, .seq = by == META_REF_BY_SEQ ? pos : 0 };
	struct nv_buf win, raw;
	unsigned stale = 0;
	bool done = false;
	int rc = 0;

	v.plan = calloc(1, sizeof(*v.plan));
	if (!v.plan)
		return -ENOMEM;
	nv_buf_init(&v.got, (size_t)BUNDLE_ENTRIES_MAX * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE);
	nv_buf_init(&win, (size_t)BUNDLE_ENTRIES_MAX * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE);
	nv_buf_init(&raw, BUNDLE_CHUNK_MAX);
	while (!done) {
		uint64_t before = v.seq;
		bool was = v.started;

		rc = one_plan(&v, &win, &raw, &done);
		if (rc == STOPPED) {
			rc = v.fn_rc; /* fn's value, whatever it is (1 is not STALE here) */
			break;
		}
		if (rc != STALE && rc != 0)
			break;
		if (rc == STALE) {
			/* vend.h invariant 1: re-plan from the position, at a
			 * star (whatever cfg->keep kept of the stream is stale). */
			if (cfg->keep && cfg->keep->plan_drop)
				cfg->keep->plan_drop(cfg->keep->arg, bucket, stream);
			v.fresh = true;
			stale = was == v.started && before == v.seq ? stale + 1 : 1;
			rc = 0;
			if (stale > API_VEND_REPLANS) {
				nv_log(NV_WARN, NV_SUB_API, "plan fetch %s/%s: %u re-plans in a row "
				       "without progress at seq %llu", bucket, stream, stale,
				       (unsigned long long)v.seq);
				rc = -ESTALE;
				break;
			}
		}
	}
	if (rc == 0) {
		*next_seq = v.seq;
		*next_byte = v.byte;
	}
	handle_give(cfg->handles, v.easy);
	nv_buf_free(&v.got);
	budget_give(&v, v.got_footer, &v.got_held);
	nv_buf_free(&win);
	nv_buf_free(&raw);
	plan_clear(v.plan);
	free(v.plan);
	return rc;
}
