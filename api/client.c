/*
 * client.c - see client.h: the cluster client over libcurl.
 *
 * For: one pool of easy handles (each keeps its connections alive), the
 * redial rule, the epoch memory, and the subscription frame reader.
 * Also the plan route (api_client_plan(): any star, no redial).
 * Not for: who leads (the caller), the wire forms (api/wire.c,
 * api/plan.c), fetching what a plan names (api/vend.c).
 *
 * One call (call()):
 *
 *   dial holder h --200--> done
 *                 --421 NOT_OWNER {h'}--> h' stale (epoch below the
 *                       remembered one)? -STAR_ENOTOWNER
 *                       : remember h'.epoch; redialed already?
 *                         -STAR_ENOTOWNER : dial h' (once)
 *                 --other status / transport error--> -errno (client.h)
 *
 * Stream ids: a call given the stream's id (nonzero) sends it in
 * API_STREAM_ID_HEADER on every dial, and the holder's 404 stream_moved
 * (the stream under that name is another one now, or none) is -ESTALE,
 * never -ENOENT (status_to_errno()).  Its epoch memory is keyed by the id
 * then, not the name: a rename keeps the stream's epochs, and a new
 * stream under an old name starts its own.
 *
 * Locking: cl->lock guards the free-handle stack and the epoch table;
 * it is never held across a request.
 *
 * Invariants: those of client.h.
 */
#include "config.h"
#include "api/client.h"
#include "api/plan.h"
#include "api/wire.h"
#include "src/base/buf.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_HANDLES 8
#define DEFAULT_CONNECT_MS 2000
#define DEFAULT_TIMEOUT_MS 30000
/* A subscription whose holder sends nothing (not even a heartbeat, every
 * 5 s: api/server.h) for this long is dead. */
#define SUB_SILENT_S 20
/* How long a holder may be quiet before the caller's quiet look
 * (api_sub_quiet_fn): past one heartbeat (5 s) and a margin. */
#define DEFAULT_SUB_QUIET_MS 6000
/* The quiet look's period once due. */
#define SUB_QUIET_EVERY_NS NV_NS_PER_S

struct epoch_slot {
	uint64_t key;   /* hash of bucket/stream, or of bucket/id; 0: empty */
	uint64_t epoch;
};

struct api_client {
	struct api_client_cfg cfg;
	char auth[API_SECRET_MAX + 32]; /* "Authorization: Bearer ..." */
	pthread_mutex_t lock;
	pthread_cond_t freed;           /* a handle came back */
	CURL **free_h;                  /* lock: the free stack */
	unsigned nfree;                 /* lock */
	struct epoch_slot epochs[API_EPOCH_SLOTS]; /* lock */
};

/* What a request sends and where its reply goes. */
struct xfer {
	const char *method;             /* "GET" or "POST" */
	char url[API_PATH_MAX + API_NAME_QUERY_MAX]; /* the longest query: rename's */
	uint64_t id;                    /* the stream's id (API_STREAM_ID_HEADER); 0: none */
	const void *body;
	size_t len;
	struct nv_buf reply;            /* non-subscription replies */
	long status;
	/* Subscriptions: the frame reader. */
	api_sub_fn fn;
	void *arg;
	int fn_rc;
	char line[API_LINE_MAX + 1];
	size_t line_len;
	struct api_frame frame;         /* the current data frame, or the last frame */
	bool in_data, ended;
	struct nv_buf data;
	uint64_t cursor;                /* the next byte wanted */
	api_sub_quiet_fn quiet;         /* may be NULL */
	const struct lease_holder *at;  /* the holder dialed (call()) */
	uint64_t quiet_ns;              /* sub_quiet_ms */
	uint64_t heard_ns;              /* mono: the holder's last bytes */
	uint64_t look_ns;               /* mono: the next quiet look */
	CURL *easy;                     /* during perform() */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int api_client_new(const struct api_client_cfg *cfg, struct api_client **out)
{
	struct api_client *cl = calloc(1, sizeof(*cl));
	unsigned n = cfg->max_handles ? cfg->max_handles : DEFAULT_HANDLES;

	if (!cl)
		return -ENOMEM;
	pthread_once(&curl_once, curl_init_once);
	pthread_mutex_init(&cl->lock, NULL);
	pthread_cond_init(&cl->freed, NULL);
	cl->cfg = *cfg;
	cl->cfg.max_handles = n;
	if (!cl->cfg.connect_timeout_ms)
		cl->cfg.connect_timeout_ms = DEFAULT_CONNECT_MS;
	if (!cl->cfg.timeout_ms)
		cl->cfg.timeout_ms = DEFAULT_TIMEOUT_MS;
	snprintf(cl->auth, sizeof(cl->auth), "Authorization: Bearer %s",
		 api_secret_text(cfg->secret));
	cl->free_h = calloc(n, sizeof(*cl->free_h));
	for (unsigned i = 0; cl->free_h && i < n; i++) {
		cl->free_h[i] = curl_easy_init();
		if (!cl->free_h[i])
			break;
		cl->nfree++;
	}
	if (!cl->free_h || cl->nfree < n) {
		api_client_free(cl);
		return -ENOMEM;
	}
	*out = cl;
	return 0;
}

void api_client_free(struct api_client *cl)
{
	if (!cl)
		return;
	for (unsigned i = 0; cl->free_h && i < cl->nfree; i++)
		curl_easy_cleanup(cl->free_h[i]);
	free(cl->free_h);
	pthread_cond_destroy(&cl->freed);
	pthread_mutex_destroy(&cl->lock);
	memset(cl->auth, 0, sizeof(cl->auth));
	free(cl);
}

static CURL *handle_get(struct api_client *cl)
{
	CURL *h;

	pthread_mutex_lock(&cl->lock);
	while (cl->nfree == 0)
		pthread_cond_wait(&cl->freed, &cl->lock);
	h = cl->free_h[--cl->nfree];
	pthread_mutex_unlock(&cl->lock);
	return h;
}

static void handle_put(struct api_client *cl, CURL *h)
{
	pthread_mutex_lock(&cl->lock);
	cl->free_h[cl->nfree++] = h;
	pthread_cond_signal(&cl->freed);
	pthread_mutex_unlock(&cl->lock);
}

/* ------------------------------------------------------------ epochs */

/* The epoch table's key of a stream: bucket/stream, or bucket#id when
 * the caller named its id (a '#' never is in a name, names.h). */
static uint64_t stream_key(const char *bucket, const char *stream, uint64_t id)
{
	uint64_t k = 1469598103934665603ull; /* FNV-1a 64 */

	for (const char *p = bucket; *p; p++)
		k = (k ^ (unsigned char)*p) * 1099511628211ull;
	if (id) {
		k = (k ^ '#') * 1099511628211ull;
		for (int i = 0; i < 8; i++)
			k = (k ^ ((id >> (8 * i)) & 0xff)) * 1099511628211ull;
		return k ? k : 1;
	}
	k = (k ^ '/') * 1099511628211ull;
	for (const char *p = stream; *p; p++)
		k = (k ^ (unsigned char)*p) * 1099511628211ull;
	return k ? k : 1;
}

/* Note epoch for the stream: true when it is not older than the one
 * remembered (and it is remembered now); false: stale (invariant 2). */
static bool epoch_note(struct api_client *cl, uint64_t key, uint64_t epoch)
{
	struct epoch_slot *e = &cl->epochs[key % API_EPOCH_SLOTS];
	bool fresh = true;

	pthread_mutex_lock(&cl->lock);
	if (e->key == key && epoch < e->epoch) {
		fresh = false;
	} else {
		e->key = key;
		e->epoch = epoch;
	}
	pthread_mutex_unlock(&cl->lock);
	return fresh;
}

/* ------------------------------------------------------------ transfers */

/* The reply's error code is code (a JSON error document). */
static bool reply_code_is(const struct xfer *x, const char *code)
{
	char got[32];

	return api_parse_reply_str((const char *)x->reply.ptr, x->reply.len, "error", got,
				   sizeof(got)) == 0 && !strcmp(got, code);
}

/* The one translation of libcurl's and HTTP's error spaces to errno (x:
 * the reply, for the error code of a 404). */
static int status_to_errno(CURLcode cc, long status, bool sent, const struct xfer *x)
{
	/* A request the holder may have received and not answered in time
	 * is in doubt (an append may still be acked there): not "cannot be
	 * reached". */
	if (cc == CURLE_OPERATION_TIMEDOUT && sent)
		return -ETIMEDOUT;
	if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
	    cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_URL_MALFORMAT)
		return -EHOSTUNREACH;
	if (cc != CURLE_OK)
		return -EIO;
	switch (status) {
	case 200: return 0;
	case 400: return -EINVAL;
	case 401: case 403: return -EACCES;
	case 404: return reply_code_is(x, API_STREAM_MOVED) ? -ESTALE : -ENOENT;
	case 413: return -EFBIG;
	case 416: return -ERANGE;
	case 421: return -STAR_ENOTOWNER;
	case 503: return -EAGAIN;
	case 504: return -ETIMEDOUT;
	case 507: return -ENOSPC;
	default: return -EIO;
	}
}

static size_t on_reply(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;

	return nv_buf_add(&x->reply, p, size * n) ? 0 : size * n;
}

/* One complete frame line (no '\n') of a subscription: 0, or -errno /
 * the callback's value to stop. */
static int sub_line(struct xfer *x)
{
	if (api_parse_frame(x->line, x->line_len, &x->frame))
		return -EIO;
	x->line_len = 0;
	if (x->frame.kind == API_FRAME_DATA) {
		if (x->frame.offset != x->cursor)
			return -EIO; /* a gap or a repeat: never hand it on */
		x->in_data = true;
		nv_buf_reset(&x->data);
		return 0;
	}
	if (x->frame.kind == API_FRAME_ERROR)
		x->ended = true;
	if (x->frame.kind == API_FRAME_HEARTBEAT) {
		/* The holder's acked end, and a chance for fn to stop. */
		int rc = x->fn(x->arg, x->frame.end, NULL, 0);

		if (rc)
			return x->fn_rc = rc;
	}
	return 0;
}

/* Feed subscription bytes [p, p+n) to the frame reader. */
static int sub_feed(struct xfer *x, const char *p, size_t n)
{
	while (n > 0 && !x->ended) {
		if (x->in_data) {
			size_t want = (size_t)x->frame.length - x->data.len;
			size_t k = n < want ? n : want;
			int rc = nv_buf_add(&x->data, p, k);

			if (rc)
				return rc;
			p += k;
			n -= k;
			if (x->data.len < x->frame.length)
				continue;
			x->in_data = false;
			x->cursor += x->frame.length;
			rc = x->fn(x->arg, x->frame.offset, x->data.ptr, x->data.len);
			if (rc)
				return x->fn_rc = rc;
			continue;
		}
		if (*p == '\n') {
			int rc = sub_line(x);

			if (rc)
				return rc;
		} else if (x->line_len >= API_LINE_MAX) {
			return -EIO;
		} else {
			x->line[x->line_len++] = *p;
		}
		p++;
		n--;
	}
	return 0;
}

static size_t on_frames(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;

	if (x->status == 0)
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
	if (x->status != 200) /* an error document: keep it for the redial */
		return on_reply(p, size, n, arg);
	x->heard_ns = nv_now_mono_ns();
	return sub_feed(x, p, size * n) ? 0 : size * n;
}

/* libcurl's progress call (about once a second while nothing moves): the
 * quiet look (api_sub_quiet_fn) when due.  Nonzero aborts the transfer
 * with the look's value in fn_rc. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct xfer *x = arg;
	uint64_t now = nv_now_mono_ns();
	int rc;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	if (now - x->heard_ns < x->quiet_ns || now < x->look_ns)
		return 0;
	x->look_ns = now + SUB_QUIET_EVERY_NS;
	rc = x->quiet(x->arg, x->at);
	if (rc)
		x->fn_rc = rc;
	return rc != 0;
}

/* Perform x at h->addr.  0 or -errno (client.h); -STAR_ENOTOWNER with
 * the reply's NOT_OWNER document left in x->reply. */
static int perform(struct api_client *cl, struct xfer *x)
{
	CURL *e = handle_get(cl);
	struct curl_slist *hdrs = curl_slist_append(NULL, cl->auth);
	char idh[sizeof(API_STREAM_ID_HEADER) + 24];
	bool sub = x->fn != NULL;
	long sent = 0;
	CURLcode cc;

	hdrs = curl_slist_append(hdrs, "Expect:");
	if (x->id) { /* never sent by name alone when the caller named the id */
		struct curl_slist *more;

		snprintf(idh, sizeof(idh), API_STREAM_ID_HEADER ": %llu", (unsigned long long)x->id);
		more = curl_slist_append(hdrs, idh);
		if (!more) {
			curl_slist_free_all(hdrs);
			handle_put(cl, e);
			return -ENOMEM;
		}
		hdrs = more;
	}
	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, x->url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: CURLOPT_PROTOCOLS deprecated */
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
#else
	curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTP);
#endif
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)cl->cfg.connect_timeout_ms);
	if (sub) {
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)SUB_SILENT_S);
		if (x->quiet) {
			x->heard_ns = nv_now_mono_ns();
			x->look_ns = 0;
			x->quiet_ns = cl->cfg.sub_quiet_ms ? cl->cfg.sub_quiet_ms * NV_NS_PER_MS
				      : DEFAULT_SUB_QUIET_MS * NV_NS_PER_MS;
			curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
			curl_easy_setopt(e, CURLOPT_XFERINFODATA, x);
			curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
		}
	} else {
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)cl->cfg.timeout_ms);
	}
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sub ? on_frames : on_reply);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	if (!strcmp(x->method, "POST")) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body ? x->body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->len);
	}
	x->status = 0;
	x->easy = e;
	nv_buf_reset(&x->reply);
	cc = curl_easy_perform(e);
	x->easy = NULL;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &x->status);
	curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &sent);
	curl_slist_free_all(hdrs);
	handle_put(cl, e);
	if (sub && x->fn_rc)
		return x->fn_rc;
	if (cc != CURLE_OK && cc != CURLE_WRITE_ERROR)
		nv_log(NV_DEBUG, NV_SUB_API, "cluster client: %s %s: %s", x->method, x->url,
		       curl_easy_strerror(cc));
	if (cc == CURLE_WRITE_ERROR)
		return -EIO; /* a reply over its bound, or a broken frame */
	/* A silent subscription is a holder gone quiet, not a request in
	 * doubt. */
	return status_to_errno(cc, x->status, sent > 0 && !sub, x);
}

/* ------------------------------------------------------------ the redial */

/* x->url for endpoint ep of bucket/stream at addr, with query (may be
 * ""). */
static int set_url(struct xfer *x, const char *addr, enum api_endpoint ep, const char *bucket,
		   const char *stream, const char *query)
{
	char path[API_PATH_MAX];
	int n;

	if (!addr[0])
		return -EHOSTUNREACH; /* the holder serves no star API */
	if (api_fmt_path(ep, bucket, stream, path, sizeof(path)))
		return -EINVAL;
	n = snprintf(x->url, sizeof(x->url), "http://%s%s%s", addr, path, query);
	return n < 0 || (size_t)n >= sizeof(x->url) ? -EINVAL : 0;
}

/*
 * Perform x at holder h, redialing once on NOT_OWNER (client.h
 * invariants 1 and 2).  query is built per dial from x->cursor for a
 * subscription (it resumes where it stopped) and used as is otherwise.
 */
static int call(struct api_client *cl, const struct lease_holder *h, enum api_endpoint ep,
		const char *bucket, const char *stream, const char *query, struct xfer *x)
{
	uint64_t key = stream_key(bucket, stream, x->id);
	struct lease_holder at = *h, next;
	char q[64];
	int rc;

	if (at.epoch && !epoch_note(cl, key, at.epoch)) {
		nv_log(NV_INFO, NV_SUB_API, "cluster client: %s/%s: holder %s at epoch %llu is "
		       "older than one seen: not dialed", bucket, stream, at.star,
		       (unsigned long long)at.epoch);
		return -STAR_ENOTOWNER;
	}
	for (int dial = 0;; dial++) {
		if (x->fn)
			snprintf(q, sizeof(q), "?offset=%llu", (unsigned long long)x->cursor);
		x->at = &at;
		rc = set_url(x, at.addr, ep, bucket, stream, x->fn ? q : query);
		if (rc == 0)
			rc = perform(cl, x);
		if (rc != -STAR_ENOTOWNER && !(x->fn && rc == 0 && x->frame.kind ==
					       API_FRAME_ERROR && !strcmp(x->frame.error,
									  "not_owner")))
			return rc;
		/* NOT_OWNER: as a 421 document, or a subscription's last frame. */
		if (rc == -STAR_ENOTOWNER &&
		    api_parse_not_owner((const char *)x->reply.ptr, x->reply.len, &next))
			return -EIO;
		if (rc == 0)
			next = x->frame.holder;
		if (!epoch_note(cl, key, next.epoch)) {
			nv_log(NV_INFO, NV_SUB_API, "cluster client: %s/%s: stale redirect to %s "
			       "(epoch %llu) ignored", bucket, stream, next.star,
			       (unsigned long long)next.epoch);
			return -STAR_ENOTOWNER;
		}
		if (dial == 1)
			return -STAR_ENOTOWNER; /* redialed once already */
		nv_log(NV_DEBUG, NV_SUB_API, "cluster client: %s/%s: NOT_OWNER from %s, redialing "
		       "%s at %s (epoch %llu)", bucket, stream, at.star, next.star, next.addr,
		       (unsigned long long)next.epoch);
		at = next;
		x->ended = x->in_data = false;
		x->line_len = 0;
		memset(&x->frame, 0, sizeof(x->frame));
	}
}

static void xfer_init(struct xfer *x, const char *method, size_t reply_max)
{
	memset(x, 0, sizeof(*x));
	x->method = method;
	nv_buf_init(&x->reply, reply_max);
	nv_buf_init(&x->data, API_READ_MAX);
}

static void xfer_done(struct xfer *x)
{
	nv_buf_free(&x->reply);
	nv_buf_free(&x->data);
}

/* A u64 member of the JSON reply (api_parse_reply_u64()). */
static int reply_u64(const struct xfer *x, const char *key, const char *sub, uint64_t *v)
{
	return api_parse_reply_u64((const char *)x->reply.ptr, x->reply.len, key, sub, v) ? -EIO
														: 0;
}

int api_client_append(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, const void *body, size_t len,
		      struct api_append_result *res)
{
	struct xfer x;
	struct api_append_result r = { 0 };
	int rc;

	xfer_init(&x, "POST", API_LINE_MAX);
	x.id = id;
	x.body = body;
	x.len = len;
	rc = call(cl, h, API_EP_APPEND, bucket, stream, "", &x);
	if (rc == 0 && (reply_u64(&x, "seq", NULL, &r.seq) ||
			reply_u64(&x, "end", "seq", &r.end_seq) ||
			reply_u64(&x, "end", "byte", &r.end_byte)))
		rc = -EIO;
	xfer_done(&x);
	if (rc == 0 && res)
		*res = r;
	return rc;
}

int api_client_read(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		    const char *stream, uint64_t id, uint64_t off, void *dst, size_t len,
		    size_t *got)
{
	struct xfer x;
	char q[80];
	int rc;

	*got = 0;
	if (len > API_READ_MAX)
		len = API_READ_MAX;
	/* Room for a NOT_OWNER document when len is small. */
	xfer_init(&x, "GET", len > API_LINE_MAX ? len : API_LINE_MAX);
	x.id = id;
	snprintf(q, sizeof(q), "?offset=%llu&length=%zu", (unsigned long long)off, len);
	rc = call(cl, h, API_EP_READ, bucket, stream, q, &x);
	if (rc == -ERANGE)
		rc = 0; /* past the acked end: nothing to read */
	else if (rc == 0 && x.reply.len > len)
		rc = -EIO;
	else if (rc == 0 && x.reply.len)
		memcpy(dst, x.reply.ptr, x.reply.len);
	if (rc == 0)
		*got = x.status == 200 ? x.reply.len : 0;
	xfer_done(&x);
	return rc;
}

int api_client_bounds(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, struct api_bounds *b)
{
	struct xfer x;
	int rc;

	memset(b, 0, sizeof(*b));
	xfer_init(&x, "GET", API_LINE_MAX);
	x.id = id;
	rc = call(cl, h, API_EP_END, bucket, stream, "", &x);
	if (rc == 0 && (reply_u64(&x, "seq", NULL, &b->end_seq) ||
			reply_u64(&x, "byte", NULL, &b->end_byte)))
		rc = -EIO;
	if (rc == 0 && (reply_u64(&x, "trim", "seq", &b->trim_seq) ||
			reply_u64(&x, "trim", "byte", &b->trim_byte)))
		b->trim_seq = b->trim_byte = 0; /* a star that does not say */
	xfer_done(&x);
	return rc;
}

int api_client_end(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		   const char *stream, uint64_t id, uint64_t *seq, uint64_t *byte)
{
	struct api_bounds b;
	int rc = api_client_bounds(cl, h, bucket, stream, id, &b);

	if (rc == 0) {
		*seq = b.end_seq;
		*byte = b.end_byte;
	}
	return rc;
}

int api_client_locate(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, bool by_seq, uint64_t pos, uint64_t *seq,
		      uint64_t *byte)
{
	struct xfer x;
	char q[64];
	int rc;

	xfer_init(&x, "GET", API_LINE_MAX);
	x.id = id;
	snprintf(q, sizeof(q), "?%s=%llu", by_seq ? "seq" : "offset", (unsigned long long)pos);
	rc = call(cl, h, API_EP_LOCATE, bucket, stream, q, &x);
	if (rc == 0 && (reply_u64(&x, "seq", NULL, seq) || reply_u64(&x, "byte", NULL, byte)))
		rc = -EIO;
	xfer_done(&x);
	return rc;
}

int api_client_subscribe(struct api_client *cl, const struct lease_holder *h,
			 const char *bucket, const char *stream, uint64_t id, uint64_t off,
			 api_sub_fn fn, void *arg)
{
	return api_client_subscribe_watch(cl, h, bucket, stream, id, off, fn, NULL, arg);
}

int api_client_subscribe_watch(struct api_client *cl, const struct lease_holder *h,
			       const char *bucket, const char *stream, uint64_t id, uint64_t off,
			       api_sub_fn fn, api_sub_quiet_fn quiet, void *arg)
{
	struct xfer x;
	int rc;

	xfer_init(&x, "GET", API_LINE_MAX);
	x.id = id;
	x.fn = fn;
	x.quiet = quiet;
	x.arg = arg;
	x.cursor = off;
	rc = call(cl, h, API_EP_SUBSCRIBE, bucket, stream, "", &x);
	if (rc == 0 && x.frame.kind == API_FRAME_ERROR)
		rc = !strcmp(x.frame.error, "not_found") ? -ENOENT
		     : !strcmp(x.frame.error, "shutting_down") ? -EAGAIN : -EIO;
	else if (rc == 0)
		rc = -EIO; /* the holder closed without a last frame */
	xfer_done(&x);
	return rc;
}

/* The largest plan reply: every entry with a URL at its bound. */
#define PLAN_REPLY_MAX ((size_t)PLAN_ENTRIES_MAX * (API_PLAN_URL_MAX + 1024) + 4096)

int api_client_plan(struct api_client *cl, const char *addr, const char *bucket,
		    const char *stream, enum meta_ref_key by, uint64_t pos, uint32_t max,
		    struct read_plan *p)
{
	struct xfer x;
	char q[96];
	int rc;

	p->n = 0;
	snprintf(q, sizeof(q), "?%s=%llu&max=%u", by == META_REF_BY_BYTE ? "offset" : "seq",
		 (unsigned long long)pos, max ? max : PLAN_ENTRIES_MAX);
	xfer_init(&x, "GET", PLAN_REPLY_MAX);
	rc = set_url(&x, addr, API_EP_PLAN, bucket, stream, q);
	if (rc == 0)
		rc = perform(cl, &x);
	if (rc == 0 && api_plan_parse((const char *)x.reply.ptr, x.reply.len, p)) {
		nv_log(NV_WARN, NV_SUB_API, "cluster client: %s/%s: a plan from %s that does "
		       "not parse", bucket, stream, addr);
		rc = -EIO;
	}
	xfer_done(&x);
	return rc;
}

int api_client_handoff(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		       const char *stream, uint64_t id, const char *to, struct lease_holder *out)
{
	struct lease_holder nh = { .epoch = 0 };
	char body[META_STAR_MAX + 16], code[32];
	uint64_t epoch = 0;
	struct xfer x;
	int rc;

	if (snprintf(body, sizeof(body), "{\"to\":\"%s\"}", to) >= (int)sizeof(body))
		return -EINVAL;
	xfer_init(&x, "POST", API_LINE_MAX);
	x.id = id;
	x.body = body;
	x.len = strlen(body);
	rc = call(cl, h, API_EP_HANDOFF, bucket, stream, "", &x);
	if (rc && api_parse_reply_str((const char *)x.reply.ptr, x.reply.len, "error", code,
				      sizeof(code)) == 0) {
		/* The holder's refusals by their codes (novafs(8) STAR API). */
		if (!strcmp(code, "no_such_star"))
			rc = -ENOENT;
		else if (!strcmp(code, "star_down"))
			rc = -EHOSTDOWN;
		else if (!strcmp(code, "not_implemented"))
			rc = -EOPNOTSUPP;
	}
	if (rc == 0 && (api_parse_reply_str((const char *)x.reply.ptr, x.reply.len, "leader",
					    nh.star, sizeof(nh.star)) ||
			reply_u64(&x, "epoch", NULL, &epoch)))
		rc = -EIO;
	xfer_done(&x);
	nh.epoch = epoch;
	if (rc == 0 && out)
		*out = nh;
	return rc;
}

int api_client_delete(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id)
{
	struct xfer x;
	int rc;

	xfer_init(&x, "POST", API_LINE_MAX);
	x.id = id;
	rc = call(cl, h, API_EP_DELETE, bucket, stream, "", &x);
	xfer_done(&x);
	return rc;
}

int api_client_trim(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		    const char *stream, uint64_t id, bool by_seq, uint64_t pos, uint64_t *seq,
		    uint64_t *byte)
{
	struct xfer x;
	char q[64];
	int rc;

	xfer_init(&x, "POST", API_LINE_MAX);
	x.id = id;
	snprintf(q, sizeof(q), "?%s=%llu", by_seq ? "seq" : "offset", (unsigned long long)pos);
	rc = call(cl, h, API_EP_TRIM, bucket, stream, q, &x);
	if (rc == 0 && (reply_u64(&x, "trim", "seq", seq) || reply_u64(&x, "trim", "byte", byte)))
		rc = -EIO;
	xfer_done(&x);
	return rc;
}

int api_client_rename(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, const char *from)
{
	char q[API_NAME_QUERY_MAX];
	struct xfer x;
	int rc;

	if (api_fmt_query("from", from, q, sizeof(q)))
		return -EINVAL;
	xfer_init(&x, "POST", API_LINE_MAX);
	x.id = id;
	rc = call(cl, h, API_EP_RENAME, bucket, stream, q, &x);
	xfer_done(&x);
	return rc;
}

int api_client_nudge(struct api_client *cl, const char *addr, const char *from)
{
	char body[META_STAR_MAX + 16];
	struct xfer x;
	int n, rc;

	if (!addr[0])
		return -EHOSTUNREACH;
	xfer_init(&x, "POST", API_LINE_MAX);
	snprintf(body, sizeof(body), "{\"star\":\"%s\"}", from);
	x.body = body;
	x.len = strlen(body);
	n = snprintf(x.url, sizeof(x.url), "http://%s/v1/nudge", addr);
	rc = n < 0 || (size_t)n >= sizeof(x.url) ? -EINVAL : perform(cl, &x);
	xfer_done(&x);
	return rc;
}
