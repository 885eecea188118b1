/*
 * server.h - the star API server (DESIGN.md section 7): HTTP/1.1 on
 * -o listen=ADDR:PORT over the engine of one star.
 *
 * For: src/novafs.c, which starts it after star_open() and stops it
 * before star_close().  Not for: the wire forms (api/wire.h), the
 * credential (api/auth.h), subscriptions' frames (api/subscribe.h), the
 * cluster client (api/client.h).
 *
 * Endpoints, status codes and JSON: api/wire.h and novafs(8) "STAR API".
 *
 * Invariants:
 *  1. A request without the cluster credential is answered 401 before
 *     anything else is looked at, and changes nothing.
 *  2. Bounded: a request body at most max_body bytes (413 past it), its
 *     headers at most API_HEADER_MAX bytes (the server library answers
 *     431), at most max_conns connections (each with its own thread),
 *     each closed after timeout_s idle seconds; a read answers at most
 *     API_READ_MAX bytes.
 *  3. An append, a hot read or a subscription of a stream this star does
 *     not lead is answered 421 with the NOT_OWNER document
 *     (api_fmt_not_owner()); nothing is forwarded.  Only an append takes
 *     a vacant stream; a read or the end of one answers its committed
 *     state (star_view_refresh(), engine/starview.c).
 *  4. An append is answered only after its record is durable (the
 *     engine's ack), with its seq and the acked end.
 *  5. api_server_stop() ends every subscription (a last
 *     "shutting_down" frame) and joins every connection's thread before
 *     it returns, so star_close() can follow.
 *  6. A per-stream request that names a stream id (API_STREAM_ID_HEADER,
 *     api/wire.h) is served only by the stream of that id: when the
 *     stream under its bucket/name has another id, or there is none, it
 *     is answered 404 stream_moved (logged with both ids) before anything
 *     else, so no lease is taken and nothing is appended, served or
 *     deleted; a malformed id is 400.  Without the header, by name.
 */
#ifndef NOVAFS_API_SERVER_H
#define NOVAFS_API_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "api/auth.h"

struct star;
struct api_server;

/* Request headers and their buffers: the server library's per
 * connection memory pool (MHD_OPTION_CONNECTION_MEMORY_LIMIT). */
#define API_HEADER_MAX (32u * 1024)

struct api_server_cfg {
	const char *listen;               /* "ADDR:PORT" (borrowed for the call) */
	const struct api_secret *secret;  /* borrowed until api_server_stop() */
	struct star *star;                /* borrowed until api_server_stop() */
	size_t max_body;                  /* the record limit (max_write_kib) */
	unsigned max_conns;               /* 0: 64 (novafs: -o api_max_conns) */
	unsigned timeout_s;               /* idle connection timeout; 0: 60 */
	uint64_t heartbeat_ns;            /* subscription heartbeat; 0: 5 s */
};

/* Bind and start serving.  0 and *out; -EINVAL (a listen= that is not
 * ADDR:PORT or does not resolve), -EADDRINUSE and other bind errors
 * (logged with the address). */
int api_server_start(const struct api_server_cfg *cfg, struct api_server **out)
	__attribute__((warn_unused_result));

/* Stop (invariant 5) and free.  NULL is a no-op. */
void api_server_stop(struct api_server *srv);

#endif
