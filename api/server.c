/*
 * server.c - see server.h: the star API over libmicrohttpd.
 *
 * For: the daemon (one thread per connection, bounded), the request
 * state across the library's calls (struct req), authentication first,
 * the body limit, and the handlers of append, read, end, locate, plan,
 * handoff and nudge; /metrics is api/metrics.c, subscriptions
 * api/subscribe.c, the changes a holder makes for another star (delete,
 * trim, rename) api/change.c.  Not for: the wire forms (api/wire.c).
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
 * Leases: only an append (and a hot read, locate past the end) leads a
 * stream (star_lead(), taking a vacant one).  A subscription never does:
 * it asks star_lead_check(); led elsewhere it is NOT_OWNER, led here the
 * leader's parked subscription, vacant it is served from the stream's
 * refs and polls them (the read-path seed's "Vacant streams": any star
 * serves committed state; api/subscribe.h invariant 5), so a Gateway or
 * another mount's follower never makes this star the leader.
 *
 * Stream ids: a per-stream request may name the stream's id too
 * (API_STREAM_ID_HEADER, api/wire.h).  The header is parsed in the first
 * call (malformed: 400 before the body is read) and compared in
 * stream_of(), right after the name's lookup and before any handler runs,
 * so a mismatch (or no stream under the name) is 404 stream_moved before
 * any side effect: no lease taken, nothing appended, served or deleted.
 *
 * Invariants: those of server.h.  Every refusal a client can provoke
 * logs one rate-limited line naming what and which stream.
 */
#include "config.h"
#include "api/change.h"
#include "api/httpd.h"
#include "api/metrics.h"
#include "api/plan.h"
#include "api/server.h"
#include "api/server_impl.h"
#include "api/subscribe.h"
#include "api/wire.h"
#include "engine/handoff.h"
#include "engine/lease.h"
#include "engine/star.h"
#include "src/base/clock.h"
#include "src/base/log.h"

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

/* One budget of log lines (NV_RATELIMIT_BURST a minute) per kind of
 * refusal: credentials, unroutable requests, refusals naming a stream,
 * stream ids that name another stream (stream_moved). */
static struct nv_ratelimit rl_auth, rl_route, rl_bad, rl_moved;

/* ------------------------------------------------------------ replies */

/* The star API's answers (api/httpd.h): 401 names the realm "novafs". */
static const struct api_http_style style = { .realm = "novafs", .retry_after = false };

static const char *peer_of(struct MHD_Connection *c, char *buf, size_t len)
{
	return api_http_peer(c, buf, len);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
			     const void *body, size_t len)
{
	return api_http_reply(c, &style, status, type, body, len);
}

enum MHD_Result api_srv_json(struct MHD_Connection *c, unsigned status, const char *doc)
{
	return api_http_reply_json(c, &style, status, doc);
}

enum MHD_Result api_srv_error(struct MHD_Connection *c, unsigned status, const char *code,
			      const char *detail)
{
	return api_http_reply_error(c, &style, status, code, detail);
}

/* A refusal the client provoked: a 4xx and one rate-limited line. */
enum MHD_Result api_srv_refuse(struct MHD_Connection *c, const struct req *q, unsigned status,
			       const char *code, const char *why)
{
	char peer[64];

	nv_log_ratelimited(q->r.ep == API_EP_NONE ? &rl_route : &rl_bad, NV_WARN, NV_SUB_API,
			   "star API: %u for %s %.200s from %s: %s (stream %s/%s)", status,
			   q->method, q->url, peer_of(c, peer, sizeof(peer)), why,
			   q->r.bucket[0] ? q->r.bucket : "-", q->r.stream[0] ? q->r.stream : "-");
	return api_srv_error(c, status, code, why);
}

enum MHD_Result api_srv_not_owner(struct MHD_Connection *c, const struct lease_holder *h)
{
	char doc[API_LINE_MAX];

	if (api_fmt_not_owner(h, doc, sizeof(doc)))
		return api_srv_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "NOT_OWNER");
	return api_srv_json(c, MHD_HTTP_MISDIRECTED_REQUEST, doc);
}

/* An engine error (-errno) as a reply.  The one translation of errno
 * into HTTP status (STYLE.md: one translator per foreign space). */
enum MHD_Result api_srv_errno(struct MHD_Connection *c, struct api_server *srv,
			      struct nv_stream *s, int rc)
{
	struct lease_holder h;

	switch (rc) {
	case -STAR_ENOTOWNER:
		if (s && star_leader(srv->st, s, &h) == 0)
			return api_srv_not_owner(c, &h);
		return api_srv_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no_leader",
				     "the stream's leader is not known");
	case -ENOENT:
		return api_srv_error(c, MHD_HTTP_NOT_FOUND, "not_found", "no such stream");
	case -EINVAL:
		return api_srv_error(c, MHD_HTTP_BAD_REQUEST, "bad_request", strerror(-rc));
	case -EFBIG:
	case -EMSGSIZE:
		return api_srv_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "too_large", strerror(-rc));
	case -ENOSPC:
	case -EDQUOT:
		return api_srv_error(c, MHD_HTTP_INSUFFICIENT_STORAGE, "no_space", strerror(-rc));
	case -ETIMEDOUT: /* past this star's lease deadline (engine/lease.h) */
		return api_srv_error(c, MHD_HTTP_GATEWAY_TIMEOUT, "lease_deadline", strerror(-rc));
	case -ESHUTDOWN:
	case -EAGAIN:
	case -EBUSY:
		return api_srv_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable", strerror(-rc));
	default:
		return api_srv_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", strerror(-rc));
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

/* The request named stream q->stream_id, and this star has stream `has`
 * (0: none) under its bucket/name: 404 stream_moved, one rate-limited
 * line naming the stream and both ids. */
static enum MHD_Result reply_moved(struct MHD_Connection *c, const struct req *q, uint64_t has)
{
	char peer[64], detail[160], here[24] = "none";

	if (has)
		snprintf(here, sizeof(here), "%llu", (unsigned long long)has);
	if (has)
		snprintf(detail, sizeof(detail), "the stream under this name is %llu, not %llu "
			 "(renamed or replaced)", (unsigned long long)has,
			 (unsigned long long)q->stream_id);
	else
		snprintf(detail, sizeof(detail), "no stream under this name, not %llu (renamed "
			 "or deleted)", (unsigned long long)q->stream_id);
	nv_log_ratelimited(&rl_moved, NV_INFO, NV_SUB_API, "star API: 404 %s for %s %.200s from "
			   "%s: %s/%s is stream %s here, the request names stream %llu",
			   API_STREAM_MOVED, q->method, q->url, peer_of(c, peer, sizeof(peer)),
			   q->r.bucket, q->r.stream, here, (unsigned long long)q->stream_id);
	return api_srv_error(c, MHD_HTTP_NOT_FOUND, API_STREAM_MOVED, detail);
}

/* The stream of the request (a reference), or a reply already queued.
 * With a stream id (q->stream_id), only the stream of that id: the check
 * every handler relies on coming before its first side effect. */
static struct nv_stream *stream_of(struct MHD_Connection *c, struct api_server *srv,
				   const struct req *q, enum MHD_Result *ret)
{
	struct nv_stream *s = NULL;
	int rc = star_stream_lookup(srv->st, q->r.bucket, q->r.stream, &s);

	if (rc == -ENOENT && q->stream_id) {
		*ret = reply_moved(c, q, 0);
		return NULL;
	}
	if (rc) {
		*ret = rc == -ENOENT ? api_srv_refuse(c, q, MHD_HTTP_NOT_FOUND, "not_found",
						      "no such stream")
				     : api_srv_errno(c, srv, NULL, rc);
		return NULL;
	}
	if (q->stream_id && s->id != q->stream_id) {
		uint64_t has = s->id;

		stream_put(s);
		*ret = reply_moved(c, q, has);
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
		return api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request", "empty record");
	rc = star_lead(srv->st, s, &h);
	if (rc == -STAR_ENOTOWNER)
		return api_srv_not_owner(c, &h);
	if (rc)
		return api_srv_errno(c, srv, s, rc);
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
		return api_srv_errno(c, srv, s, rc);
	snprintf(doc, sizeof(doc), "{\"seq\":%llu,\"end\":{\"seq\":%llu,\"byte\":%llu}}",
		 (unsigned long long)seq,
		 (unsigned long long)atomic_load_explicit(&s->acked_seq, memory_order_acquire),
		 (unsigned long long)stream_acked_byte(s));
	return api_srv_json(c, MHD_HTTP_OK, doc);
}

/* offset= and length= of a read: 0, or a reply queued. */
static int read_args(struct MHD_Connection *c, const struct req *q, uint64_t *off,
		     uint64_t *len, enum MHD_Result *ret)
{
	if (api_parse_u64(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset"), 0,
			  off) ||
	    api_parse_u64(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "length"),
			  API_READ_MAX, len)) {
		*ret = api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
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
	uint64_t off, len, end;
	uint8_t *buf;
	size_t done;
	bool hot;
	int rc;

	if (read_args(c, q, &off, &len, &ret))
		return ret;
	end = stream_acked_byte(s);
	/* Past this star's view of a vacant stream: raised to its refs first
	 * (star_view_refresh()), so a star that led it once never answers
	 * the end it saw then. */
	if ((off >= end || len > end - off) && star_lead_check(srv->st, s, &h) == -ENOENT) {
		rc = star_view_refresh(srv->st, s, STAR_VIEW_READ);
		if (rc < 0)
			return api_srv_errno(c, srv, s, rc);
		end = stream_acked_byte(s);
	}
	if (off > end)
		return api_srv_refuse(c, q, MHD_HTTP_RANGE_NOT_SATISFIABLE, "past_end",
				      "offset is past the acked end");
	buf = malloc(len ? len : 1);
	if (!buf)
		return api_srv_errno(c, srv, s, -ENOMEM);
	rc = read_fill(srv, s, off, buf, (size_t)len, &done, &hot);
	/* A hot page is served only while this star leads (server.h
	 * invariant 3); cold pages need no lease. */
	if (rc == 0 && hot && (rc = star_lead_check(srv->st, s, &h)) == -ENOENT)
		rc = 0; /* vacant: its view here is committed, and a read takes no lease */
	if (rc == -STAR_ENOTOWNER)
		ret = api_srv_not_owner(c, &h);
	else if (rc)
		ret = api_srv_errno(c, srv, s, rc);
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
		return api_srv_not_owner(c, &h);
	if (rc && rc != -ENOENT)
		return api_srv_errno(c, srv, s, rc);
	if (rc == -ENOENT && (rc = star_view_refresh(srv->st, s, STAR_VIEW_READ)) < 0)
		return api_srv_errno(c, srv, s, rc); /* vacant: its refs' end */
	snprintf(doc, sizeof(doc), "{\"seq\":%llu,\"byte\":%llu,\"trim\":{\"seq\":%llu,"
		 "\"byte\":%llu}}",
		 (unsigned long long)atomic_load_explicit(&s->acked_seq, memory_order_acquire),
		 (unsigned long long)stream_acked_byte(s),
		 (unsigned long long)atomic_load(&s->trim_seq),
		 (unsigned long long)atomic_load(&s->trim_byte));
	return api_srv_json(c, MHD_HTTP_OK, doc);
}

/* Locate: ?seq=N or ?offset=O (exactly one) names a position; the
 * answer is the record holding it, {"seq":S,"byte":B} (at the acked end,
 * the acked end).  Past this star's view of the stream, another star's
 * NOT_OWNER (its tail is the holder's to tell), else 416 past_end; below
 * the trim point (one this star learnt as it looked) 416 trimmed. */
static enum MHD_Result do_locate(struct MHD_Connection *c, struct api_server *srv,
				 struct req *q, struct nv_stream *s)
{
	const char *vs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seq");
	const char *vo = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
	struct lease_holder h;
	char doc[API_LINE_MAX];
	uint64_t pos, seq, byte;
	int rc;

	if (!vs == !vo || api_parse_u64(vs ? vs : vo, 0, &pos))
		return api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
				      "give one of seq= and offset=, a decimal number");
	rc = star_locate_record(srv->st, s, vs != NULL, pos, &seq, &byte);
	if (rc == -EINVAL) {
		rc = star_lead(srv->st, s, &h);
		if (rc == -STAR_ENOTOWNER)
			return api_srv_not_owner(c, &h);
		if (rc)
			return api_srv_errno(c, srv, s, rc);
		return api_srv_refuse(c, q, MHD_HTTP_RANGE_NOT_SATISFIABLE, "past_end",
				      "the position is past the acked end");
	}
	if (rc == -ERANGE) /* below a trim point this star learnt at the read */
		return api_srv_refuse(c, q, MHD_HTTP_RANGE_NOT_SATISFIABLE, "trimmed",
				      "the position is below the stream's trim point");
	if (rc)
		return api_srv_errno(c, srv, s, rc);
	snprintf(doc, sizeof(doc), "{\"seq\":%llu,\"byte\":%llu}", (unsigned long long)seq,
		 (unsigned long long)byte);
	return api_srv_json(c, MHD_HTTP_OK, doc);
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
		return api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
				      "offset must be a decimal number");
	}
	/* Never star_lead(): a subscriber (a Gateway, another mount's follow
	 * view) must not make this star the leader.  Vacant: served from the
	 * refs (api/subscribe.h invariant 5), at any offset, since a cursor
	 * learned from a dead leader's acks is reached once settlement
	 * commits them. */
	rc = star_lead_check(srv->st, s, &h);
	if (rc == -ENOENT)
		rc = 0;
	else if (rc == 0 && off > stream_acked_byte(s))
		rc = -ERANGE;
	if (rc) {
		ret = rc == -STAR_ENOTOWNER ? api_srv_not_owner(c, &h)
		      : rc != -ERANGE ? api_srv_errno(c, srv, s, rc)
			   : api_srv_refuse(c, q, MHD_HTTP_RANGE_NOT_SATISFIABLE, "past_end",
					    "offset is past the acked end");
		stream_put(s);
		return ret;
	}
	resp = api_subscribe_response(srv->subs, s, off); /* takes s */
	if (!resp)
		return api_srv_errno(c, srv, NULL, -ENOMEM);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-novafs-frames");
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* ReadPlan (api/plan.h): any star, no lease, no redirect; the read
 * action's authorization (the cluster credential, checked first). */
static enum MHD_Result do_plan(struct MHD_Connection *c, struct api_server *srv,
			       struct req *q, struct nv_stream *s)
{
	struct api_plan_query pq;
	struct read_plan *p;
	enum MHD_Result ret;
	const char *why;
	char *doc;
	int rc;

	if (api_plan_query_parse(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seq"),
				 MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset"),
				 MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "max"), &pq,
				 &why))
		return api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request", why);
	p = calloc(1, sizeof(*p));
	if (!p)
		return api_srv_errno(c, srv, s, -ENOMEM);
	rc = star_plan(srv->st, s, pq.by, pq.pos, pq.max, p);
	doc = rc ? NULL : api_plan_format(p);
	if (rc)
		ret = api_srv_errno(c, srv, NULL, rc);
	else if (!doc)
		ret = api_srv_errno(c, srv, NULL, -ENOMEM);
	else
		ret = reply(c, MHD_HTTP_OK, "application/json", doc, strlen(doc));
	free(doc);
	plan_clear(p);
	free(p);
	return ret;
}

/* Nudge: {"star":"STAR"} (the sender, logged): this star re-checks its
 * registry row, its leases and the settle markers now instead of at its
 * next pass (handoff_nudge()).  200 {"nudged":true}. */
static enum MHD_Result do_nudge(struct MHD_Connection *c, struct api_server *srv, struct req *q)
{
	char star[META_STAR_MAX + 1];

	if (api_parse_star_doc(q->body, q->len, "star", star, sizeof(star)))
		return api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
				      "the body must be one JSON object naming a star id");
	nv_log(NV_INFO, NV_SUB_API, "star API: nudged by star %s: re-checking leases and "
	       "settle markers now", star);
	handoff_nudge(srv->st);
	return api_srv_json(c, MHD_HTTP_OK, "{\"nudged\":true}");
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
		return api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request",
				      "the body must be one JSON object naming a star id");
	}
	rc = star_release(srv->st, s, star, &h);
	stream_put(s);
	switch (rc) {
	case 0:
		snprintf(doc, sizeof(doc), "{\"leader\":\"%s\",\"epoch\":%llu}", h.star,
			 (unsigned long long)h.epoch);
		return api_srv_json(c, MHD_HTTP_OK, doc);
	case -STAR_ENOTOWNER:
		return api_srv_not_owner(c, &h);
	case -ENOENT:
		return api_srv_error(c, MHD_HTTP_NOT_FOUND, "no_such_star",
				     "no such star is registered");
	case -EOPNOTSUPP:
		return api_srv_error(c, MHD_HTTP_NOT_IMPLEMENTED, "not_implemented",
				     "this star has no star registry");
	case -EHOSTDOWN:
		return api_srv_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "star_down",
				     "the star is closing or its registry lease went");
	default:
		return api_srv_errno(c, srv, NULL, rc);
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
		return do_nudge(c, srv, q);
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
	else if (q->r.ep == API_EP_PLAN)
		ret = do_plan(c, srv, q, s);
	else if (q->r.ep == API_EP_LOCATE)
		ret = do_locate(c, srv, q, s);
	else if (q->r.ep == API_EP_DELETE)
		ret = api_change_delete(c, srv, s);
	else if (q->r.ep == API_EP_TRIM)
		ret = api_change_trim(c, srv, q, s);
	else if (q->r.ep == API_EP_RENAME)
		ret = api_change_rename(c, srv, q, s);
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
		*ret = api_srv_error(c, MHD_HTTP_UNAUTHORIZED, "unauthorized",
				     "a valid cluster credential is required");
		return -EACCES;
	}
	if (api_route_parse(method, url, &q->r)) {
		*ret = api_srv_refuse(c, q, (unsigned)q->r.status,
				      q->r.status == 405 ? "bad_method"
				      : q->r.status == 404 ? "not_found" : "bad_request", q->r.why);
		return -EINVAL;
	}
	if (q->r.stream[0] &&
	    api_parse_stream_id(MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							    API_STREAM_ID_HEADER),
				&q->stream_id)) {
		*ret = api_srv_refuse(c, q, MHD_HTTP_BAD_REQUEST, "bad_request", API_STREAM_ID_HEADER
				      " must be a stream id, a positive decimal number");
		return -EINVAL;
	}
	if (cl && (api_parse_u64(cl, 0, &declared) || declared > srv->max_body)) {
		*ret = api_srv_refuse(c, q, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
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
		return api_srv_refuse(c, q, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
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
	rc = star_plan_check(cfg->star); /* plan_vending= this store can serve */
	if (rc) {
		free(srv);
		return rc;
	}
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
