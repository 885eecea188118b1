/*
 * sse.h - the Gateway's server-sent events: catch-up, then the live
 * tail, of one stream from a byte on, as text/event-stream.
 *
 * For: gw/http.c's GET .../events.  Not for: where the bytes come from
 * (gw/source.h: the producer reads a source, gw/hub.h follows it),
 * parsing the request
 * (gw/req.h).
 *
 * The events (novagw(8) "SERVER-SENT EVENTS"):
 *   event: data       id: the byte after the event; data: {"offset":O,
 *                     "length":L,"base64":"..."}: bytes [O, O+L) of the
 *                     stream, as a star pushed them
 *   event: heartbeat  data: {"next":N} (N the id to resume at), after
 *                     heartbeat_ns without an event
 *   event: end        data: {"reason":"deleted"}: the stream was deleted
 *                     and everything before the deletion was sent
 *   event: error      data: {"error":"..."}: the Gateway gave up (stars
 *                     unreachable, stopping); resume with Last-Event-ID
 *
 * One subscription (struct sse in sse.c): a producer thread catches up
 * by itself (gw_read() from its cursor to the acked end, one event per
 * read of at most CATCHUP_READ bytes, the read buffer taken from the
 * --fetch-inflight pool while it is held) and then joins the stream's
 * hub (gw/hub.h): one follow of the source per stream, whose thread
 * queues each pushed range as an event on every joined subscription
 * without waiting, then rings the stream's bell once (gw/hub.h: one
 * wake-up for all the joined readers, not one each).  The server
 * library's content reader (the connection's thread) sends them.  The queue is bounded
 * (SSE_QUEUE_MAX), and every queued event's bytes are taken from the
 * --fetch-inflight pool before it is queued (the range is base64-encoded
 * straight into it) and given back when sent.  Outside the pool: the
 * cluster client's one frame buffer per hub, not per subscription (at
 * most API_READ_MAX, api/client.h invariant 4).
 *
 *   CATCHUP --at the acked end--> JOINED (the hub at the cursor; the hub
 *             past it: CATCHUP on to it)
 *   JOINED  --no room in the queue or the pool for a range--> CATCHUP
 *             from its cursor (let go by the hub, which never waits)
 *   CATCHUP --queue full past client_timeout_ns--> DROPPED (slow client)
 *   any     --client gone (library frees the response)--> DROPPED
 *   any     --the source ends (-ENOENT: end event; else error event)--> DONE
 *   any     --gw_sses_stop()--> DROPPED (the hubs let go at once)
 *   DROPPED/DONE --the producer returned and the response is freed--> freed
 *
 * Invariants:
 *  1. Events are contiguous and exact: event k+1's offset is event k's
 *     id; a client that resumes with Last-Event-ID misses nothing and
 *     sees nothing twice.
 *  2. A dropped subscription holds no budget: its queued events are given
 *     back when it is dropped, and its producer takes nothing after.
 *  3. gw_sses_stop() returns when every producer and every hub's follow
 *     has returned (bounded: a producer at its next read or within 1 s
 *     when joined, a follow at its next source callback, at least every
 *     5 s, the stars' heartbeat).
 *  4. One follow of the source per stream with joined subscriptions
 *     (gw/hub.h invariant 2), whatever their number.
 */
#ifndef NOVAFS_GW_SSE_H
#define NOVAFS_GW_SSE_H

#include <stdint.h>

#include "gw/pool.h"
#include "gw/source.h"

#define SSE_QUEUE_MAX (2u << 20) /* bytes of events queued per subscription */

struct MHD_Response;
struct gw_sses;

struct gw_sse_cfg {
	struct gw_source *src;      /* borrowed */
	struct gw_pool *pool;       /* borrowed: --fetch-inflight */
	uint64_t heartbeat_ns;
	uint64_t client_timeout_ns; /* a full queue this long: the client is dropped */
};

int gw_sses_new(const struct gw_sse_cfg *cfg, struct gw_sses **out)
	__attribute__((warn_unused_result));
/* Invariant 3.  Then the server library may be stopped. */
void gw_sses_stop(struct gw_sses *reg);
void gw_sses_free(struct gw_sses *reg); /* after the library stopped; NULL: no-op */
/* Subscriptions alive now (a gauge). */
unsigned gw_sses_live(struct gw_sses *reg);
/* Shared follows of the source running now (gw/hub.h; a gauge). */
unsigned gw_sses_follows(struct gw_sses *reg);

/* A response streaming bucket/stream (borrowed) from byte off, its
 * producer started.  NULL on ENOMEM or when stopping. */
struct MHD_Response *gw_sse_response(struct gw_sses *reg, const char *bucket,
				     const char *stream, uint64_t off);

#endif
