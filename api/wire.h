/*
 * wire.h - the star API's wire forms (DESIGN.md section 7): request
 * paths and query values in, JSON replies and subscription frames out,
 * and the NOT_OWNER document both ways.
 *
 * For: api/server.c (parse a request, format a reply) and api/client.c
 * (format a path, parse a reply), and the fuzz target of the router.
 * Not for: HTTP itself (libmicrohttpd, libcurl), authentication
 * (api/auth.h), the engine calls (api/server.c).
 *
 * Paths (novafs(8) "STAR API"):
 *   POST /v1/streams/BUCKET/STREAM/records             append one record
 *   GET  /v1/streams/BUCKET/STREAM/bytes?offset=&length=  read bytes
 *   GET  /v1/streams/BUCKET/STREAM/end                 the acked end
 *   GET  /v1/streams/BUCKET/STREAM/locate?seq=|offset= the record holding a
 *                                                      seq or byte: {"seq","byte"}
 *   GET  /v1/streams/BUCKET/STREAM/subscribe?offset=   chunked frames
 *   POST /v1/streams/BUCKET/STREAM/handoff             {"to":"STAR"}
 *   POST /v1/streams/BUCKET/STREAM/delete              unlink(2) at the holder
 *   POST /v1/streams/BUCKET/STREAM/trim?seq=|offset=   a trim at the holder
 *   POST /v1/streams/BUCKET/STREAM/rename?from=NAME    rename(2) of NAME over
 *                                                      STREAM, at STREAM's holder
 *   GET  /v1/streams/BUCKET/STREAM/plan?seq=|offset=&max=  ReadPlan (api/plan.h)
 *   POST /v1/nudge                                     {"star":"STAR"}
 *   GET  /metrics                                      Prometheus text
 * BUCKET and STREAM arrive percent-decoded (the server library decodes
 * the path) and must pass the names.h rules.
 *
 * Every per-stream request (all but nudge and metrics) may carry the
 * header API_STREAM_ID_HEADER, the stream's id as the sender loaded it:
 * the star then serves it only when the stream it has under BUCKET/STREAM
 * has that id, and answers 404 {"error":"stream_moved"} otherwise (the
 * stream was renamed, replaced or deleted since; nothing is done).
 * Without the header a stream is named by BUCKET/STREAM alone.
 *
 * Subscription frames: one JSON object on one line each; a data frame
 * {"offset":O,"length":L} is followed by exactly L raw bytes.  The
 * others are {"heartbeat":true,"end":E} and the last one, an error
 * object ({"error":"not_owner",...}, {"error":"not_found"},
 * {"error":"shutting_down"}).
 *
 * Invariants:
 *  1. Every parser takes hostile input: bounded lengths, digits only for
 *     numbers (no sign, no spaces, no overflow), names by names.h; on
 *     failure it says which part was bad (api_route's why) and fills
 *     nothing the caller may trust.
 *  2. Every formatter writes into a caller's buffer of stated size and
 *     fails (-ENOSPC) rather than truncate.
 */
#ifndef NOVAFS_API_WIRE_H
#define NOVAFS_API_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/lease.h"
#include "src/base/names.h"

/* The longest request path the router accepts (two names, escaped by
 * the client at most three bytes per byte, plus the fixed parts). */
#define API_PATH_MAX 1024
/* The most bytes one GET .../bytes answers (the read path's page). */
#define API_READ_MAX (1u << 20)
/* Room for one frame's JSON line (a subscription or a reply). */
#define API_LINE_MAX 512

enum api_endpoint {
	API_EP_NONE = 0,
	API_EP_APPEND,    /* POST .../records */
	API_EP_READ,      /* GET .../bytes */
	API_EP_END,       /* GET .../end */
	API_EP_LOCATE,    /* GET .../locate */
	API_EP_SUBSCRIBE, /* GET .../subscribe */
	API_EP_HANDOFF,   /* POST .../handoff */
	API_EP_NUDGE,     /* POST /v1/nudge */
	API_EP_METRICS,   /* GET /metrics */
	API_EP_PLAN,      /* GET .../plan (api/plan.h) */
	API_EP_DELETE,    /* POST .../delete */
	API_EP_TRIM,      /* POST .../trim */
	API_EP_RENAME,    /* POST .../rename?from= */
};

/* A routed request. */
struct api_route {
	enum api_endpoint ep;
	char bucket[NV_BUCKET_NAME_MAX + 1]; /* "" for nudge and metrics */
	char stream[NV_STREAM_NAME_MAX + 1];
	int status;      /* when ep is API_EP_NONE: 404, 405 or 400 */
	const char *why; /* static text: what was wrong */
};

/*
 * Route method + path (both borrowed, NUL-terminated).  0 and *r filled;
 * -EINVAL with r->status (404 unknown path, 405 wrong method, 400 a bad
 * bucket or stream name) and r->why.
 */
int api_route_parse(const char *method, const char *path, struct api_route *r)
	__attribute__((warn_unused_result));

/* The path segment [p, e) (borrowed) into dst (cap bytes with the NUL):
 * 0, or -EINVAL when it is empty, does not fit or holds a NUL.  Shared
 * with the Gateway's parser (gw/req.c). */
int api_path_segment(const char *p, const char *e, char *dst, size_t cap)
	__attribute__((warn_unused_result));

/* A query value as a u64: digits only, at most 20, no overflow.  NULL
 * text: *v = def, 0.  0 or -EINVAL. */
int api_parse_u64(const char *text, uint64_t def, uint64_t *v)
	__attribute__((warn_unused_result));

/* The request header naming a stream by id too (see Paths above), and
 * the error code of its mismatch. */
#define API_STREAM_ID_HEADER "X-Nova-Stream-Id"
#define API_STREAM_MOVED "stream_moved"

/* The value of API_STREAM_ID_HEADER (borrowed; NULL: absent): *id, 0
 * when absent.  A stream id is a positive decimal number (api_parse_u64()
 * rules; 0 names no stream).  0 or -EINVAL. */
int api_parse_stream_id(const char *text, uint64_t *id) __attribute__((warn_unused_result));

/* "ADDR:PORT" of listen= into host (a numeric IPv4 or a bracketed IPv6
 * address, or a name) and port 1..65535.  0 or -EINVAL. */
int api_parse_listen(const char *addr, char *host, size_t hostlen, unsigned *port)
	__attribute__((warn_unused_result));

/* {"error":"not_owner","leader":..,"address":..,"epoch":..} into buf. */
int api_fmt_not_owner(const struct lease_holder *h, char *buf, size_t len)
	__attribute__((warn_unused_result));
/* {"error":"<code>","detail":"<detail>"}; detail (borrowed) is escaped. */
int api_fmt_error(const char *code, const char *detail, char *buf, size_t len)
	__attribute__((warn_unused_result));

/* Parse a NOT_OWNER document (borrowed, len bytes, not NUL-terminated):
 * 0 and *h, -EINVAL when it is not one (malformed, a field missing or
 * too long, epoch not a positive integer). */
int api_parse_not_owner(const char *doc, size_t len, struct lease_holder *h)
	__attribute__((warn_unused_result));

/* The path of ep for bucket/stream into buf, each name percent-encoded
 * (every byte outside [A-Za-z0-9._~-]).  0 or -ENOSPC/-EINVAL. */
int api_fmt_path(enum api_endpoint ep, const char *bucket, const char *stream, char *buf,
		 size_t len) __attribute__((warn_unused_result));

/* The longest query api_fmt_query() writes for a stream name: "?",
 * a key of at most 8 bytes, "=", the name escaped, the NUL. */
#define API_NAME_QUERY_MAX (11 + 3 * NV_STREAM_NAME_MAX)

/* "?key=value" into buf, value (borrowed) percent-encoded as
 * api_fmt_path() encodes a name; key (borrowed) is written as it is.
 * 0 or -ENOSPC. */
int api_fmt_query(const char *key, const char *value, char *buf, size_t len)
	__attribute__((warn_unused_result));

/* A handoff or nudge body (borrowed, len bytes): one JSON object whose
 * member key is a star id (1-32 of [a-z0-9-]) into star (cap bytes).
 * 0 or -EINVAL. */
int api_parse_star_doc(const char *doc, size_t len, const char *key, char *star, size_t cap)
	__attribute__((warn_unused_result));

/* A reply document (borrowed, len bytes): the non-negative integer
 * member key, or key.sub when sub is not NULL.  0 or -EINVAL. */
int api_parse_reply_u64(const char *doc, size_t len, const char *key, const char *sub,
			uint64_t *v) __attribute__((warn_unused_result));

/* A reply document (borrowed, len bytes): the string member key into
 * out (cap bytes, NUL-terminated).  0 or -EINVAL (not an object, no such
 * string member, too long). */
int api_parse_reply_str(const char *doc, size_t len, const char *key, char *out, size_t cap)
	__attribute__((warn_unused_result));

/* One subscription frame's header line. */
enum api_frame_kind { API_FRAME_DATA, API_FRAME_HEARTBEAT, API_FRAME_ERROR };
struct api_frame {
	enum api_frame_kind kind;
	uint64_t offset, length; /* DATA */
	uint64_t end;            /* HEARTBEAT */
	char error[32];          /* ERROR: its code */
	struct lease_holder holder; /* ERROR "not_owner" */
};

/* Parse one frame line (borrowed, len bytes without the '\n').  0 or
 * -EINVAL. */
int api_parse_frame(const char *line, size_t len, struct api_frame *f)
	__attribute__((warn_unused_result));

#endif
