/*
 * http.c - see http.h: the Gateway's server over libmicrohttpd.
 *
 * For: the daemon (one thread per connection, bounded), keys then
 * route, the records page (records_span(), then the read under the
 * pool), the end, /healthz, and the one errno-to-HTTP translator of the
 * Gateway.  Not for: events (gw/sse.c), parsing (gw/req.c).
 *
 * One request: the library calls on_request() first with the headers,
 * then with each piece of a body (discarded: the Gateway answers GET
 * only), then once more, when the answer is queued; answering there
 * keeps the connection alive for the next request.
 *
 * A records page, by seq S (or by byte O: S is the record holding O),
 * limit L, max_bytes M, from the source:
 *   bounds (Es, Eb, trim Ts, Tb); S moves up to Ts (O to Tb): the records
 *   below the trim point are gone; (S, B0) = locate(S); S >= Es (the
 *   stream grew since the bounds): an empty page
 *   (S1, B1) = S + L >= Es ? (Es, Eb) : locate(seq S + L)
 *   B1 - B0 > M?  (Sr, Br) = locate(byte B0 + M), the record holding the
 *                 first byte past the cap; Sr == S (one record larger
 *                 than M: it is served whole) ? locate(seq S + 1) : (Sr, Br)
 *   take B1 - B0 from the pool; read [B0, B1); answer with the Nova-*
 *   headers naming both ends.
 *
 * Invariants: those of http.h.
 */
#include "config.h"
#include "gw/http.h"
#include "gw/footers.h"
#include "gw/plancache.h"
#include "gw/req.h"
#include "gw/sse.h"
#include "api/httpd.h"
#include "api/wire.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct gw_server {
	struct gw_server_cfg cfg;
	struct MHD_Daemon *d;
	struct gw_sses *sses;
	char listen[256];
};

/* A records page's bytes until the library frees the response. */
struct page {
	struct gw_pool *pool;
	uint8_t *buf;
	uint64_t len;
	uint64_t deadline_ns; /* past it, an unfinished response is cut off */
};

/* What the records page covers: [s0, s1) and [b0, b1); the stream's
 * acked end and trim point. */
struct span {
	uint64_t s0, b0, s1, b1;
	struct api_bounds bd;
};

static struct nv_ratelimit rl_auth, rl_bad, rl_src, rl_drop;

/* ------------------------------------------------------------ replies */

/* The Gateway's answers (api/httpd.h): 401 names the realm "novagw", 503
 * says when to retry. */
static const struct api_http_style style = { .realm = "novagw", .retry_after = true };

static const char *peer_of(struct MHD_Connection *c, char *buf, size_t len)
{
	return api_http_peer(c, buf, len);
}

static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, const char *doc)
{
	return api_http_reply_json(c, &style, status, doc);
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *code,
				   const char *detail)
{
	return api_http_reply_error(c, &style, status, code, detail);
}

/* A refusal the client provoked: its 4xx and one rate-limited line. */
static enum MHD_Result refuse(struct MHD_Connection *c, struct nv_ratelimit *rl,
			      const char *method, const char *url, unsigned status,
			      const char *code, const char *why)
{
	char peer[64];

	nv_log_ratelimited(rl, NV_WARN, NV_SUB_API, "gateway: %u for %s %.200s from %s: %s",
			   status, method, url, peer_of(c, peer, sizeof(peer)), why);
	return reply_error(c, status, code, why);
}

/* A source error (gw/source.h) as a reply: the one translation of the
 * Gateway's errno into HTTP (STYLE.md: one translator per space). */
static enum MHD_Result reply_errno(struct MHD_Connection *c, const struct gw_req *r, int rc)
{
	switch (rc) {
	case -ENOENT:
		return reply_error(c, MHD_HTTP_NOT_FOUND, "not_found", "no such stream");
	case -ERANGE:
		return reply_error(c, MHD_HTTP_RANGE_NOT_SATISFIABLE, "past_end",
				   "the position is past the acked end");
	case -EAGAIN:
		return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable",
				   "busy, or leadership of the stream is moving: retry");
	default:
		break;
	}
	nv_log_ratelimited(&rl_src, NV_WARN, NV_SUB_API, "gateway: %s/%s: %s", r->bucket,
			   r->stream, rc == -EHOSTUNREACH ? "no star can be reached"
			   : rc == -EACCES ? "a star refused the cluster secret" : strerror(-rc));
	return reply_error(c, MHD_HTTP_BAD_GATEWAY, "bad_gateway",
			   rc == -EHOSTUNREACH ? "no star can be reached" : "the stars failed");
}

/* ------------------------------------------------------------ records */

/* The start of a read of r below bd's trim point moves up to it: the
 * records there are gone. */
static uint64_t start_of(const struct gw_req *r, const struct api_bounds *bd)
{
	uint64_t floor = r->by_seq ? bd->trim_seq : bd->trim_byte;

	return r->pos < floor ? floor : r->pos;
}

static int records_span(struct gw_source *src, const struct gw_req *r, struct span *sp)
{
	const char *b = r->bucket, *s = r->stream;
	uint64_t sr, br;
	int rc;

	rc = gw_bounds(src, b, s, &sp->bd);
	if (rc == 0)
		rc = gw_locate(src, b, s, r->by_seq, start_of(r, &sp->bd), &sp->s0, &sp->b0);
	if (rc)
		return rc;
	if (sp->s0 >= sp->bd.end_seq) { /* at the end (it may have grown since) */
		sp->s1 = sp->s0;
		sp->b1 = sp->b0;
		return 0;
	}
	if (sp->s0 + r->limit >= sp->bd.end_seq) {
		sp->s1 = sp->bd.end_seq;
		sp->b1 = sp->bd.end_byte;
	} else if ((rc = gw_locate(src, b, s, true, sp->s0 + r->limit, &sp->s1, &sp->b1))) {
		return rc;
	}
	if (sp->b1 < sp->b0 || sp->s1 < sp->s0)
		return -EIO;
	if (sp->b1 - sp->b0 <= r->max_bytes)
		return 0;
	rc = gw_locate(src, b, s, false, sp->b0 + r->max_bytes, &sr, &br);
	if (rc == 0 && sr == sp->s0) /* one record over max_bytes: served whole */
		rc = gw_locate(src, b, s, true, sp->s0 + 1, &sr, &br);
	if (rc == 0 && (br <= sp->b0 || sr <= sp->s0))
		rc = -EIO;
	sp->s1 = sr;
	sp->b1 = br;
	return rc;
}

static ssize_t page_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct page *p = cls;
	size_t n;

	if (pos >= p->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (nv_now_mono_ns() > p->deadline_ns)
		return MHD_CONTENT_READER_END_WITH_ERROR; /* too slow: cut off (http.h 4) */
	n = p->len - pos < max ? (size_t)(p->len - pos) : max;
	memcpy(buf, p->buf + pos, n);
	return (ssize_t)n;
}

static void page_free(void *cls)
{
	struct page *p = cls;

	gw_pool_give(p->pool, p->len);
	free(p->buf);
	free(p);
}

/* Read [b0, b1) into a page taken from the pool: 0 and *out, -EBUSY
 * (the pool stayed full), -errno of the source. */
static int page_fill(struct gw_server *g, const struct gw_req *r, const struct span *sp,
		     struct page **out)
{
	uint64_t n = sp->b1 - sp->b0, done = 0;
	struct page *p;
	int rc;

	if (gw_pool_take(g->cfg.fetch, n, g->cfg.fetch_wait_ns))
		return -EBUSY;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->buf = malloc(n ? n : 1))) {
		free(p);
		gw_pool_give(g->cfg.fetch, n);
		return -ENOMEM;
	}
	p->pool = g->cfg.fetch;
	p->len = n;
	p->deadline_ns = nv_now_mono_ns() + (uint64_t)g->cfg.client_timeout_s * NV_NS_PER_S;
	while (done < n) {
		size_t got = 0, want = n - done > API_READ_MAX ? API_READ_MAX : (size_t)(n - done);

		rc = gw_read(g->cfg.src, r->bucket, r->stream, sp->b0 + done, p->buf + done, want,
			     &got);
		if (rc == 0 && got == 0)
			rc = -EIO; /* below the acked end, every byte is there */
		if (rc) {
			page_free(p);
			return rc;
		}
		done += got;
	}
	*out = p;
	return 0;
}

static void add_u64(struct MHD_Response *resp, const char *name, uint64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
	MHD_add_response_header(resp, name, num);
}

static enum MHD_Result do_records(struct MHD_Connection *c, struct gw_server *g,
				  const struct gw_req *r)
{
	struct MHD_Response *resp;
	struct page *p = NULL;
	struct span sp;
	enum MHD_Result ret;
	int rc = records_span(g->cfg.src, r, &sp);

	if (rc == 0)
		rc = page_fill(g, r, &sp, &p);
	if (rc == -EBUSY)
		return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "busy",
				   "the Gateway's fetch budget is in use: retry");
	if (rc)
		return reply_errno(c, r, rc);
	resp = MHD_create_response_from_callback(p->len, 64 * 1024, page_read, p, page_free);
	if (!resp) {
		page_free(p);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	add_u64(resp, "Nova-Seq", sp.s0);
	add_u64(resp, "Nova-Offset", sp.b0);
	add_u64(resp, "Nova-Count", sp.s1 - sp.s0);
	add_u64(resp, "Nova-Next-Seq", sp.s1);
	add_u64(resp, "Nova-Next-Offset", sp.b1);
	add_u64(resp, "Nova-End-Seq", sp.bd.end_seq);
	add_u64(resp, "Nova-End-Offset", sp.bd.end_byte);
	add_u64(resp, "Nova-Trim-Seq", sp.bd.trim_seq);
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* ------------------------------------------------------------ events, end, health */

static enum MHD_Result do_events(struct MHD_Connection *c, struct gw_server *g,
				 const struct gw_req *r)
{
	struct MHD_Response *resp;
	struct api_bounds bd;
	uint64_t seq, off = r->pos;
	enum MHD_Result ret;
	int rc;

	/* A Last-Event-ID is an exact byte this Gateway sent (unless it was
	 * trimmed since); a seq or an offset starts at its record, at the
	 * trim point at the lowest.  Either is checked before the 200. */
	rc = gw_bounds(g->cfg.src, r->bucket, r->stream, &bd);
	if (rc == 0 && r->resume && off > bd.end_byte)
		rc = -ERANGE;
	else if (rc == 0 && (!r->resume || off < bd.trim_byte))
		rc = gw_locate(g->cfg.src, r->bucket, r->stream, r->by_seq, start_of(r, &bd), &seq,
			       &off);
	if (rc)
		return reply_errno(c, r, rc);
	resp = gw_sse_response(g->sses, r->bucket, r->stream, off);
	if (!resp)
		return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable",
				   "the Gateway is stopping or out of memory");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result do_end(struct MHD_Connection *c, struct gw_server *g,
			      const struct gw_req *r)
{
	char doc[160];
	struct api_bounds bd;
	int rc = gw_bounds(g->cfg.src, r->bucket, r->stream, &bd);

	if (rc)
		return reply_errno(c, r, rc);
	snprintf(doc, sizeof(doc), "{\"seq\":%llu,\"byte\":%llu,\"trim\":{\"seq\":%llu,"
		 "\"byte\":%llu}}", (unsigned long long)bd.end_seq,
		 (unsigned long long)bd.end_byte, (unsigned long long)bd.trim_seq,
		 (unsigned long long)bd.trim_byte);
	return reply_json(c, MHD_HTTP_OK, doc);
}

static enum MHD_Result do_health(struct MHD_Connection *c, struct gw_server *g)
{
	struct gw_footers_stats fs = { 0 };
	struct gw_plans_stats pls = { 0 };
	struct gw_source_stats ss;
	char doc[768];

	gw_source_stats(g->cfg.src, &ss);
	if (g->cfg.fcache)
		gw_footers_stats(g->cfg.fcache, &fs);
	if (g->cfg.plans)
		gw_plans_stats(g->cfg.plans, &pls);
	snprintf(doc, sizeof(doc), "{\"fetch_inflight\":{\"used\":%llu,\"cap\":%llu},"
		 "\"footer_cache\":{\"used\":%llu,\"cap\":%llu,\"cached\":%llu,"
		 "\"windows\":%llu,\"hits\":%llu,\"misses\":%llu,\"evictions\":%llu},"
		 "\"plans\":{\"kept\":%llu,\"hits\":%llu,\"misses\":%llu,\"asked\":%llu,"
		 "\"dropped\":%llu,\"raw_proxied\":%llu},\"events\":%u,\"follows\":%u}",
		 (unsigned long long)gw_pool_used(g->cfg.fetch),
		 (unsigned long long)gw_pool_cap(g->cfg.fetch),
		 (unsigned long long)gw_pool_used(g->cfg.footers),
		 (unsigned long long)gw_pool_cap(g->cfg.footers), (unsigned long long)fs.bytes,
		 (unsigned long long)fs.windows, (unsigned long long)fs.hits,
		 (unsigned long long)fs.misses, (unsigned long long)fs.evictions,
		 (unsigned long long)pls.kept, (unsigned long long)pls.hits,
		 (unsigned long long)pls.misses, (unsigned long long)pls.puts,
		 (unsigned long long)pls.drops, (unsigned long long)ss.raw_proxied,
		 gw_sses_live(g->sses),
		 gw_sses_follows(g->sses));
	return reply_json(c, MHD_HTTP_OK, doc);
}

/* ------------------------------------------------------------ the library's calls */

static const char *arg(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

static enum MHD_Result answer(struct MHD_Connection *c, struct gw_server *g, const char *url,
			      const char *method)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_AUTHORIZATION);
	struct gw_query q = {
		.seq = arg(c, "seq"), .offset = arg(c, "offset"), .limit = arg(c, "limit"),
		.max_bytes = arg(c, "max_bytes"),
		.last_event_id = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID"),
	};
	struct gw_req r;
	int rc;

	if (gw_req_parse(method, url, &q, &r) == 0 && r.op == GW_OP_HEALTH)
		return do_health(c, g);
	/* No key, no read; an unknown key learns nothing of the paths. */
	if (gw_keys_check(g->cfg.keys, auth, "") == -EACCES)
		return refuse(c, &rl_auth, method, url, MHD_HTTP_UNAUTHORIZED, "unauthorized",
			      "a valid API key is required (Authorization: Bearer KEY)");
	if (r.op == GW_OP_NONE)
		return refuse(c, &rl_bad, method, url, (unsigned)r.status,
			      r.status == 405 ? "bad_method" : r.status == 404 ? "not_found"
			      : "bad_request", r.why);
	rc = gw_keys_check(g->cfg.keys, auth, r.bucket);
	if (rc)
		return refuse(c, &rl_auth, method, url, MHD_HTTP_FORBIDDEN, "forbidden",
			      "this API key does not read this bucket");
	switch (r.op) {
	case GW_OP_RECORDS:
		return do_records(c, g, &r);
	case GW_OP_EVENTS:
		return do_events(c, g, &r);
	default:
		return do_end(c, g, &r);
	}
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	static int seen;

	(void)version;
	(void)upload_data;
	if (!*con_cls) { /* the headers: answer once the request is whole */
		*con_cls = &seen;
		return MHD_YES;
	}
	if (*upload_data_size) { /* a body: never ours (the answer is 405) */
		*upload_data_size = 0;
		return MHD_YES;
	}
	return answer(c, cls, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode why)
{
	struct gw_server *g = cls;
	char peer[64];

	if (why == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED)
		nv_log_ratelimited(&rl_drop, NV_WARN, NV_SUB_API, "gateway: client %s dropped: it "
				   "took nothing for %u s", peer_of(c, peer, sizeof(peer)),
				   g->cfg.client_timeout_s);
	*con_cls = NULL; /* the next request on the connection starts afresh */
}

static void on_library_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	nv_log_ratelimited(&rl_bad, NV_WARN, NV_SUB_API, "gateway: %s", line);
}

/* The listening socket for cfg->listen: 0 and *fd, or -errno.  Its
 * send buffer is GW_SNDBUF (accepted sockets inherit it), so the kernel
 * holds at most that much for a client that does not read: the rest
 * stays in the response, under the pool and its deadline (http.h 4). */
static int listen_socket(const char *addr, int *fd, bool *v6)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai = NULL;
	char host[LEASE_ADDR_MAX + 1], port[8];
	int one = 1, sndbuf = GW_SNDBUF, rc = 0;
	unsigned p;

	if (api_parse_listen(addr, host, sizeof(host), &p))
		return -EINVAL;
	snprintf(port, sizeof(port), "%u", p);
	if (getaddrinfo(host, port, &hints, &ai) || !ai)
		return -EINVAL;
	*v6 = ai->ai_family == AF_INET6;
	*fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0 || setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(*fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) ||
	    bind(*fd, ai->ai_addr, ai->ai_addrlen) || listen(*fd, 128))
		rc = -errno;
	freeaddrinfo(ai);
	if (rc && *fd >= 0)
		close(*fd);
	return rc;
}

int gw_server_start(const struct gw_server_cfg *cfg, struct gw_server **out)
{
	struct gw_server *g = calloc(1, sizeof(*g));
	struct gw_sse_cfg sc = { .src = cfg->src, .pool = cfg->fetch,
				 .heartbeat_ns = cfg->heartbeat_ns,
				 .client_timeout_ns = (uint64_t)cfg->client_timeout_s * NV_NS_PER_S };
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_ERROR_LOG;
	bool v6 = false;
	int fd = -1, rc;

	if (!g)
		return -ENOMEM;
	g->cfg = *cfg;
	snprintf(g->listen, sizeof(g->listen), "%s", cfg->listen);
	rc = listen_socket(cfg->listen, &fd, &v6);
	if (rc == 0 && (rc = gw_sses_new(&sc, &g->sses)))
		close(fd);
	if (rc) {
		free(g);
		return rc;
	}
	if (v6)
		flags |= MHD_USE_IPv6;
	g->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, g,
				MHD_OPTION_EXTERNAL_LOGGER, on_library_log, g,
				MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_CONNECTION_LIMIT, cfg->max_conns,
				MHD_OPTION_CONNECTION_TIMEOUT, cfg->client_timeout_s,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)GW_HEADER_MAX,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, g, MHD_OPTION_END);
	if (!g->d) {
		rc = errno ? -errno : -EADDRINUSE;
		close(fd);
		gw_sses_free(g->sses);
		free(g);
		return rc;
	}
	*out = g;
	return 0;
}

void gw_server_stop(struct gw_server *g)
{
	if (!g)
		return;
	gw_sses_stop(g->sses);
	MHD_stop_daemon(g->d); /* joins every connection's thread */
	gw_sses_free(g->sses);
	free(g);
}
