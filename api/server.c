/*
 * server.c - see server.h: the star API over libmicrohttpd.
 *
 * For: the daemon (one thread per connection, bounded), the request
 * state across the library's calls (struct req), authentication first,
 * the body limit, and the handlers of append, read, end, handoff and
 * nudge; /metrics is api/metrics.c, subscriptions api/subscribe.c.  Not
 * for: the wire forms (api/wire.c).
 *
 * One request, as the library calls on_request():
 *
 *   1st call (*con_cls NULL): route, check the credential, check a
 *        declared Content-Length; a refusal is queued at once (the body
 *        is never read); else a struct req is kept in *con_cls
 *   body calls (*upload_data_size > 0): copied into req->body, at most
 *        max_body bytes (past it: too_big, the rest is discarded)
 *   last call (*upload_data_size 0): dispatch() answers
 *   on_completed(): req freed
 *
 * A handler blocks its connection's thread (an append waits for its
 * ack; a subscription parks), which is why each connection has one and
 * their number is bounded (server.h invariant 2).
 *
 * Invariants: those of server.h.  Every refusal a client can provoke
 * logs one rate-limited line naming what and which stream.
 */
#include "config.h"
#include "api/metrics.h"
#include "api/server.h"
#include "api/subscribe.h"
#include "api/wire.h"
#include "engine/lease.h"
#include "engine/star.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define DEFAULT_CONNS 64
#define DEFAULT_TIMEOUT_S 60
#define DEFAULT_HEARTBEAT_NS (5 * NV_NS_PER_S)

struct api_server {
	struct MHD_Daemon *d;
	struct star *st;                /* borrowed */
	const struct api_secret *secret; /* borrowed */
	size_t max_body;
	struct api_subs *subs;
	char listen[LEASE_ADDR_MAX + 1];
};

/* One request across the library's calls. */
struct req {
	const char *method, *url; /* the library's, valid until on_completed() */
	struct api_route r;
	char *body;       /* max_body bytes; NULL without a body */
	size_t len;
	bool too_big;
	bool answered;    /* refused in the first call: discard the rest */
};

/* One budget of log lines (NV_RATELIMIT_BURST a minute) per kind of
 * refusal: credentials, unroutable requests, refusals naming a stream. */
static struct nv_ratelimit rl_auth, rl_route, rl_bad;

/* ------------------------------------------------------------ replies */

static const char *peer_of(struct MHD_Connection *c, char *buf, size_t len)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	snprintf(buf, len, "?");
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
			  (socklen_t)len);
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
			  buf, (socklen_t)len);
	return buf;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
			     const void *body, size_t len)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"novafs\"");
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, const char *doc)
{
	char line[API_LINE_MAX + 1];
	int n = snprintf(line, sizeof(line), "%s\n", doc);

	return reply(c, status, "application/json", line,
		     n > 0 && (size_t)n < sizeof(line) ? (size_t)n : strlen(line));
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *code,
				   const char *detail)
{
	char doc[API_LINE_MAX];

	if (api_fmt_error(code, detail, doc, sizeof(doc)))
		snprintf(doc, sizeof(doc), "{\"error\":\"%s\"}", code);
	return reply_json(c, status, doc);
}

/* A refusal the client provoked: a 4xx and one rate-limited line. */
static enum MHD_Result refuse(struct MHD_Connection *c, const struct req *q, unsigned status,
			      const char *code, const char *why)
{
	char peer[64];

	nv_log_ratelimited(q->r.ep == API_EP_NONE ? &rl_route : &rl_bad, NV_WARN, NV_SUB_API,
			   "star API: %u for %s %.200s from %s: %s (stream %s/%s)", status,
			   q->method, q->url, peer_of(c, peer, sizeof(peer)), why,
			   q->r.bucket[0] ? q->r.bucket : "-", q->r.stream[0] ? q->r.stream : "-");
	return reply_error(c, status, code, why);
}

static enum MHD_Result reply_not_owner(struct MHD_Connection *c, const struct lease_holder *h)
{
	char doc[API_LINE_MAX];

	if (api_fmt_not_owner(h, doc, sizeof(doc)))
		return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "NOT_OWNER");
	return reply_json(c, MHD_HTTP_MISDIRECTED_REQUEST, doc);
}

/* An engine error (-errno) as a reply.  The one translation of errno
 * into HTTP status (STYLE.md: one translator per foreign space). */
static enum MHD_Result reply_errno(struct MHD_Connection *c, struct api_server *srv,
				   struct nv_stream *s, int rc)
{
	struct lease_holder h;

	switch (rc) {
	case -STAR_ENOTOWNER:
		if (s && star_leader(srv->st, s, &h) == 0)
			return reply_not_owner(c, &h);
		return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no_leader",
				   "the stream's leader is not known");
	case -ENOENT:
		return reply_error(c, MHD_HTTP_NOT_FOUND, "not_found", "no such stream");
	case -EINVAL:
		return reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request", strerror(-rc));
	case -EFBIG:
	case -EMSGSIZE:
		return reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "too_large", strerror(-rc));
	case -ENOSPC:
	case -EDQUOT:
		return reply_error(c, MHD_HTTP_INSUFFICIENT_STORAGE, "no_space", strerror(-rc));
	case -ETIMEDOUT: /* past this star's lease deadline (engine/lease.h) */
		return reply_error(c, MHD_HTTP_GATEWAY_TIMEOUT, "lease_deadline", strerror(-rc));
	case -ESHUTDOWN:
	case -EAGAIN:
	case -EBUSY:
		return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable", strerror(-rc));
	default:
		return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", strerror(-rc));
	}
}

/* ------------------------------------------------------------ handlers */

struct append_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
};

static void append_done(void *arg, int err)
{
	struct append_wait *w = arg;

	pthread_mutex_lock(&w->lock);
	w->done = true;
	w->err = err;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* The stream of the request (a reference), or a reply already queued. */
static struct nv_stream *stream_of(struct MHD_Connection *c, struct api_server *srv,
				   const struct req *q, enum MHD_Result *ret)
{
	struct nv_stream *s = NULL;
	int rc = star_stream_lookup(srv->st, q->r.bucket, q->r.stream, &s);

	if (rc) {
		*ret = rc == -ENOENT ? refuse(c, q, MHD_HTTP_NOT_FOUND, "not_found", "no such stream")
				     : reply_errno(c, srv, NULL, rc);
		return NULL;
	}
	return s;
}

static enum MHD_Result do_append(struct MHD_Connection *c, struct api_server *srv,
				 struct req *q, struct nv_stream *s)
{
	struct append_wait w = { .done = false };
	struct lease_holder h;
	char doc[API_LINE_MAX];
	uint64_t seq = 0;
	int rc;

	if (q->len == 0)
		return refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request", "empty record");
	rc = star_lead(srv->st, s, &h);
	if (rc == -STAR_ENOTOWNER)
		return reply_not_owner(c, &h);
	if (rc)
		return reply_errno(c, srv, s, rc);
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	rc = star_append(srv->st, s, q->body, q->len, append_done, &w, &seq);
	if (rc == 0) {
		/* Answer when durable (server.h invariant 4). */
		pthread_mutex_lock(&w.lock);
		while (!w.done)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		rc = w.err;
	}
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	if (rc)
		return reply_errno(c, srv, s, rc);
	snprintf(doc, sizeof(doc), "{\"seq\":%llu,\"end\":{\"seq\":%llu,\"byte\":%llu}}",
		 (unsigned long long)seq,
		 (unsigned long long)atomic_load_explicit(&s->acked_seq, memory_order_acquire),
		 (unsigned long long)stream_acked_byte(s));
	return reply_json(c, MHD_HTTP_OK, doc);
}

/* offset= and length= of a read: 0, or a reply queued. */
static int read_args(struct MHD_Connection *c, const struct req *q, uint64_t *off,
		     uint64_t *len, enum MHD_Result *ret)
{
	if (api_parse_u64(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset"), 0,
			  off) ||
	    api_parse_u64(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "length"),
			  API_READ_MAX, len)) {
		*ret = refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
			      "offset and length must be decimal numbers");
		return -EINVAL;
	}
	if (*len > API_READ_MAX)
		*len = API_READ_MAX;
	return 0;
}

/* Fill up to len bytes at off across pages; *hot: a page came from the
 * tail window (the leader's alone). */
static int read_fill(struct api_server *srv, struct nv_stream *s, uint64_t off, uint8_t *dst,
		     size_t len, size_t *done, bool *hot)
{
	struct reader *rd = star_reader_new(srv->st, s);
	int rc = 0;

	*done = 0;
	*hot = false;
	while (*done < len) {
		enum read_tier tier;
		size_t got = 0;

		rc = star_read(srv->st, s, rd, off + *done, dst + *done, len - *done, &got, &tier);
		if (rc || got == 0)
			break;
		*hot |= tier == READ_HOT || tier == READ_FLIGHT;
		*done += got;
	}
	reader_free(rd);
	return rc;
}

static enum MHD_Result do_read(struct MHD_Connection *c, struct api_server *srv,
			       struct req *q, struct nv_stream *s)
{
	struct lease_holder h;
	enum MHD_Result ret = MHD_NO;
	uint64_t off, len, end = stream_acked_byte(s);
	uint8_t *buf;
	size_t done;
	bool hot;
	int rc;

	if (read_args(c, q, &off, &len, &ret))
		return ret;
	if (off > end)
		return refuse(c, q, MHD_HTTP_RANGE_NOT_SATISFIABLE, "past_end",
			      "offset is past the acked end");
	buf = malloc(len ? len : 1);
	if (!buf)
		return reply_errno(c, srv, s, -ENOMEM);
	rc = read_fill(srv, s, off, buf, (size_t)len, &done, &hot);
	/* A hot page is served only while this star leads (server.h
	 * invariant 3); cold pages need no lease. */
	if (rc == 0 && hot && (rc = star_lead(srv->st, s, &h)) == -STAR_ENOTOWNER)
		ret = reply_not_owner(c, &h);
	else if (rc)
		ret = reply_errno(c, srv, s, rc);
	else
		ret = reply(c, MHD_HTTP_OK, "application/octet-stream", buf, done);
	free(buf);
	return ret;
}

static enum MHD_Result do_end(struct MHD_Connection *c, struct api_server *srv,
			      struct nv_stream *s)
{
	struct lease_holder h;
	char doc[API_LINE_MAX];
	int rc = star_leader(srv->st, s, &h);

	/* The acked end is the leader's claim; a vacant stream's is its refs'. */
	if (rc == 0 && strcmp(h.star, star_id(srv->st)))
		return reply_not_owner(c, &h);
	if (rc && rc != -ENOENT)
		return reply_errno(c, srv, s, rc);
	snprintf(doc, sizeof(doc), "{\"seq\":%llu,\"byte\":%llu}",
		 (unsigned long long)atomic_load_explicit(&s->acked_seq, memory_order_acquire),
		 (unsigned long long)stream_acked_byte(s));
	return reply_json(c, MHD_HTTP_OK, doc);
}

static enum MHD_Result do_subscribe(struct MHD_Connection *c, struct api_server *srv,
				    struct req *q, struct nv_stream *s)
{
	struct MHD_Response *resp;
	struct lease_holder h;
	enum MHD_Result ret;
	uint64_t off;
	int rc;

	if (api_parse_u64(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset"), 0,
			  &off)) {
		stream_put(s);
		return refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
			      "offset must be a decimal number");
	}
	rc = star_lead(srv->st, s, &h);
	if (rc || off > stream_acked_byte(s)) {
		ret = rc == -STAR_ENOTOWNER ? reply_not_owner(c, &h)
		      : rc ? reply_errno(c, srv, s, rc)
			   : refuse(c, q, MHD_HTTP_RANGE_NOT_SATISFIABLE, "past_end",
				    "offset is past the acked end");
		stream_put(s);
		return ret;
	}
	resp = api_subscribe_response(srv->subs, s, off); /* takes s */
	if (!resp)
		return reply_errno(c, srv, NULL, -ENOMEM);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-novafs-frames");
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Nudge: validated (a JSON object naming a star by key), then refused
 * as not built yet: the peers' settle nudge has no engine call in this
 * stage (novafs(8)). */
static enum MHD_Result do_not_built(struct MHD_Connection *c, struct req *q, const char *key,
				    const char *what)
{
	char star[META_STAR_MAX + 1];

	if (api_parse_star_doc(q->body, q->len, key, star, sizeof(star)))
		return refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
			      "the body must be one JSON object naming a star id");
	return reply_error(c, MHD_HTTP_NOT_IMPLEMENTED, "not_implemented", what);
}

/* Handoff: {"to":"STAR"} moves s's writer lease there after the release
 * flush (star_release()); 200 {"leader","epoch"}, 421 with the holder
 * when another star leads s, 404 no such star, 503 it is not live. */
static enum MHD_Result do_handoff(struct MHD_Connection *c, struct api_server *srv,
				  struct req *q, struct nv_stream *s)
{
	char star[META_STAR_MAX + 1], doc[160];
	struct lease_holder h;
	int rc;

	if (api_parse_star_doc(q->body, q->len, "to", star, sizeof(star))) {
		stream_put(s);
		return refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
			      "the body must be one JSON object naming a star id");
	}
	rc = star_release(srv->st, s, star, &h);
	stream_put(s);
	switch (rc) {
	case 0:
		snprintf(doc, sizeof(doc), "{\"leader\":\"%s\",\"epoch\":%llu}", h.star,
			 (unsigned long long)h.epoch);
		return reply_json(c, MHD_HTTP_OK, doc);
	case -STAR_ENOTOWNER:
		return reply_not_owner(c, &h);
	case -ENOENT:
		return reply_error(c, MHD_HTTP_NOT_FOUND, "no_such_star", "no such star is registered");
	case -EOPNOTSUPP:
		return reply_error(c, MHD_HTTP_NOT_IMPLEMENTED, "not_implemented",
				   "this star has no star registry");
	case -EHOSTDOWN:
		return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "star_down",
				   "the star is closing or its registry lease went");
	default:
		return reply_errno(c, srv, NULL, rc);
	}
}

static enum MHD_Result dispatch(struct MHD_Connection *c, struct api_server *srv, struct req *q)
{
	enum MHD_Result ret = MHD_NO;
	struct nv_stream *s;

	switch (q->r.ep) {
	case API_EP_METRICS:
		return api_metrics_reply(c, srv->st);
	case API_EP_NUDGE:
		return do_not_built(c, q, "star", "nudge: the peers' settle nudge is not built yet");
	case API_EP_HANDOFF:
		s = stream_of(c, srv, q, &ret);
		return s ? do_handoff(c, srv, q, s) : ret; /* takes s */
	case API_EP_SUBSCRIBE:
		s = stream_of(c, srv, q, &ret);
		return s ? do_subscribe(c, srv, q, s) : ret; /* takes s */
	default:
		break;
	}
	s = stream_of(c, srv, q, &ret);
	if (!s)
		return ret;
	if (q->r.ep == API_EP_APPEND)
		ret = do_append(c, srv, q, s);
	else if (q->r.ep == API_EP_READ)
		ret = do_read(c, srv, q, s);
	else
		ret = do_end(c, srv, s);
	stream_put(s);
	return ret;
}

/* ------------------------------------------------------------ the library's calls */

/* The first call: credential, route, declared length.  0: go on with
 * *qp; else a refusal was queued (*ret). */
static int first_call(struct MHD_Connection *c, struct api_server *srv, const char *url,
		      const char *method, struct req **qp, enum MHD_Result *ret)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);
	struct req *q = calloc(1, sizeof(*q));
	uint64_t declared;
	char peer[64];

	if (!q) {
		*ret = MHD_NO;
		return -ENOMEM;
	}
	*qp = q;
	q->method = method;
	q->url = url;
	if (!api_auth_ok(srv->secret, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
								  MHD_HTTP_HEADER_AUTHORIZATION))) {
		nv_log_ratelimited(&rl_auth, NV_WARN, NV_SUB_API,
				   "star API: 401 for %s %.200s from %s: missing or wrong credential",
				   method, url, peer_of(c, peer, sizeof(peer)));
		*ret = reply_error(c, MHD_HTTP_UNAUTHORIZED, "unauthorized",
				   "a valid cluster credential is required");
		return -EACCES;
	}
	if (api_route_parse(method, url, &q->r)) {
		*ret = refuse(c, q, (unsigned)q->r.status, q->r.status == 405 ? "bad_method"
				   : q->r.status == 404 ? "not_found" : "bad_request", q->r.why);
		return -EINVAL;
	}
	if (cl && (api_parse_u64(cl, 0, &declared) || declared > srv->max_body)) {
		*ret = refuse(c, q, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
			      "the body is larger than the record limit (max_write_kib)");
		return -EFBIG;
	}
	return 0;
}

/* Body bytes: kept up to max_body, the rest counted and dropped. */
static void take_body(struct api_server *srv, struct req *q, const char *data, size_t n)
{
	if (q->too_big || q->len + n > srv->max_body) {
		q->too_big = true;
		return;
	}
	if (!q->body && !(q->body = malloc(srv->max_body ? srv->max_body : 1))) {
		q->too_big = true; /* ENOMEM: refused below like an oversize body */
		return;
	}
	memcpy(q->body + q->len, data, n);
	q->len += n;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct api_server *srv = cls;
	struct req *q = *con_cls;
	enum MHD_Result ret = MHD_NO;

	(void)version;
	if (!q) {
		int rc = first_call(c, srv, url, method, &q, &ret);

		*con_cls = q;
		if (q)
			q->answered = rc != 0;
		return rc ? ret : MHD_YES;
	}
	if (q->answered) { /* a refusal is queued: the body is not ours */
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (*upload_data_size) {
		take_body(srv, q, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (q->too_big)
		return refuse(c, q, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
			      "the body is larger than the record limit (max_write_kib)");
	return dispatch(c, srv, q);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode why)
{
	struct req *q = *con_cls;

	(void)cls;
	(void)c;
	(void)why;
	if (q) {
		free(q->body);
		free(q);
	}
	*con_cls = NULL;
}

static void on_library_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	nv_log_ratelimited(&rl_route, NV_WARN, NV_SUB_API, "star API: %s", line);
}

/* listen= into one socket address (the first that resolves). */
static int resolve(const char *listen, struct sockaddr_storage *ss, socklen_t *sslen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *ai = NULL;
	char host[LEASE_ADDR_MAX + 1], port[8];
	unsigned p;

	if (api_parse_listen(listen, host, sizeof(host), &p))
		return -EINVAL;
	snprintf(port, sizeof(port), "%u", p);
	if (getaddrinfo(host, port, &hints, &ai) || !ai)
		return -EINVAL;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sslen = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int api_server_start(const struct api_server_cfg *cfg, struct api_server **out)
{
	struct api_server *srv = calloc(1, sizeof(*srv));
	struct sockaddr_storage ss;
	socklen_t sslen = 0;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_ERROR_LOG;
	int rc;

	if (!srv)
		return -ENOMEM;
	srv->st = cfg->star;
	srv->secret = cfg->secret;
	srv->max_body = cfg->max_body;
	snprintf(srv->listen, sizeof(srv->listen), "%s", cfg->listen);
	rc = resolve(cfg->listen, &ss, &sslen);
	if (rc == 0)
		rc = api_subs_new(cfg->star, cfg->heartbeat_ns ? cfg->heartbeat_ns
				  : DEFAULT_HEARTBEAT_NS, &srv->subs);
	if (rc) {
		nv_log(NV_ERR, NV_SUB_API, "star API: listen=%s: not ADDR:PORT, or it does not "
		       "resolve", cfg->listen);
		free(srv);
		return rc;
	}
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	srv->d = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, srv,
		MHD_OPTION_EXTERNAL_LOGGER, on_library_log, srv, /* first: the library asks */
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_CONNECTION_LIMIT, cfg->max_conns ? cfg->max_conns : DEFAULT_CONNS,
		MHD_OPTION_CONNECTION_TIMEOUT, cfg->timeout_s ? cfg->timeout_s : DEFAULT_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_HEADER_MAX,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
	if (!srv->d) {
		rc = errno ? -errno : -EADDRINUSE;
		nv_log(NV_ERR, NV_SUB_API, "star API: cannot listen on %s: %s", cfg->listen,
		       strerror(-rc));
		api_subs_free(srv->subs);
		free(srv);
		return rc;
	}
	nv_log(NV_INFO, NV_SUB_API, "star API listening on %s", cfg->listen);
	*out = srv;
	return 0;
}

void api_server_stop(struct api_server *srv)
{
	if (!srv)
		return;
	api_subs_stop(srv->subs);
	MHD_stop_daemon(srv->d); /* joins every connection's thread */
	api_subs_free(srv->subs);
	nv_log(NV_INFO, NV_SUB_API, "star API on %s stopped", srv->listen);
	free(srv);
}
