/*
 * http.h - the Gateway's public HTTP server (novagw(8)): libmicrohttpd
 * on --listen, API keys first, then records, events and the end of a
 * stream from a source.
 *
 * For: src/novagw.c.  Not for: parsing (gw/req.h), keys (gw/keys.h),
 * where bytes come from (gw/source.h), events (gw/sse.h).
 *
 * Invariants:
 *  1. No request reads a byte without a key the keys file holds for its
 *     bucket: no key or an unknown one is 401, a key for other buckets
 *     403, before any star is asked.  /healthz needs no key.
 *  2. A malformed request is its 4xx (gw/req.h) and one rate-limited log
 *     line, never a crash.
 *  3. Bounded: at most max_conns connections (a thread each), headers
 *     at most GW_HEADER_MAX bytes, and every byte a response holds comes
 *     from the fetch pool: a records response takes its whole page
 *     before it asks a star (503 with Retry-After when the pool stays
 *     full for fetch_wait_ns) and gives it back when the library frees
 *     the response; events take per event (gw/sse.h).
 *  4. Slow or vanished clients are dropped without holding budget: the
 *     kernel keeps at most GW_SNDBUF for a client that does not read; a
 *     connection idle for client_timeout_s is closed by the library, a
 *     records response not fully taken within client_timeout_s is cut
 *     off, and an events client is dropped as gw/sse.h says; each frees
 *     its bytes at once, and each drop logs one rate-limited line.
 *  5. gw_server_stop() ends every events response and joins every
 *     connection before it returns.
 */
#ifndef NOVAFS_GW_HTTP_H
#define NOVAFS_GW_HTTP_H

#include <stdint.h>

#include "gw/keys.h"
#include "gw/pool.h"
#include "gw/source.h"

#define GW_HEADER_MAX (16 * 1024)
/* The send buffer of every client socket (the kernel doubles it). */
#define GW_SNDBUF (128 * 1024)

struct gw_server;

struct gw_server_cfg {
	const char *listen;            /* "ADDR:PORT", copied */
	const struct gw_keys *keys;    /* borrowed until gw_server_stop() */
	struct gw_source *src;         /* borrowed */
	struct gw_pool *fetch;         /* borrowed: --fetch-inflight */
	struct gw_pool *footers;       /* borrowed: --footer-cache-bytes (the plan source's;
					* reported by /healthz, taken by nothing in proxy mode) */
	struct gw_footers *fcache;     /* borrowed: the footer cache (--serve-plan; NULL:
					* none), its counters in /healthz */
	struct gw_plans *plans;        /* borrowed: the plan cache, likewise */
	unsigned max_conns;
	unsigned client_timeout_s;
	uint64_t heartbeat_ns;
	uint64_t fetch_wait_ns;
};

int gw_server_start(const struct gw_server_cfg *cfg, struct gw_server **out)
	__attribute__((warn_unused_result));
void gw_server_stop(struct gw_server *g); /* NULL is a no-op */

#endif
