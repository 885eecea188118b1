/*
 * httpd.h - what the two HTTP servers over libmicrohttpd share: the
 * star API (api/server.c) and the Gateway (gw/http.c).
 *
 * For: naming a request's peer in a log line and queueing a one-line
 * JSON answer (an error document in api/wire.h's form, with the headers
 * its status wants).  Not for: routing, credentials, bodies, streaming
 * responses (each server's own).
 *
 * Invariants:
 *  1. A 401 answer carries WWW-Authenticate: Bearer realm="<realm>"; a
 *     503 carries Retry-After: 1 when the style asks for it.
 *  2. A JSON answer is one line ending in '\n', at most API_LINE_MAX
 *     bytes (a longer document is cut at a byte boundary, never
 *     overrun).
 */
#ifndef NOVAFS_API_HTTPD_H
#define NOVAFS_API_HTTPD_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

/* The headers a server's answers carry (static strings). */
struct api_http_style {
	const char *realm;  /* of a 401's WWW-Authenticate */
	bool retry_after;   /* a 503 says Retry-After: 1 */
};

/* The peer's numeric address into buf (len bytes; "?" when unknown). */
const char *api_http_peer(struct MHD_Connection *c, char *buf, size_t len);

/* Queue body (borrowed, copied; len bytes) of type with status. */
enum MHD_Result api_http_reply(struct MHD_Connection *c, const struct api_http_style *st,
			       unsigned status, const char *type, const void *body, size_t len);
/* Queue the JSON document doc (borrowed) plus a newline. */
enum MHD_Result api_http_reply_json(struct MHD_Connection *c, const struct api_http_style *st,
				    unsigned status, const char *doc);
/* Queue {"error":code,"detail":detail} (api_fmt_error()). */
enum MHD_Result api_http_reply_error(struct MHD_Connection *c, const struct api_http_style *st,
				     unsigned status, const char *code, const char *detail);

#endif
