/*
 * subscribe.h - the star API's subscriptions: a chunked response that
 * pushes each acked range of one stream as it happens (api/wire.h
 * frames), parked on the stream's wake between ranges.
 *
 * For: api/server.c's GET .../subscribe.  Not for: the follow view of
 * the mount (fs/follow.c), the client side (api/client.h).
 *
 * Lifecycle of one subscription (struct sub in subscribe.c):
 *
 *   READING --empty page--> PARKED --wake / heartbeat due--> READING
 *   PARKED  --the lease look is due (100 ms)--> READING
 *   READING --star_lead_check() says another star leads--> ENDED (not_owner)
 *   READING --star_lead_check() says nobody leads--> POLLING
 *   POLLING --the refs' end moved (star_view_refresh())--> READING
 *   POLLING --empty page: 5 ms, doubling to 250 ms--> READING
 *   READING --the stream was deleted, read to its end--> ENDED (not_found)
 *   any     --api_subs_stop()--> ENDED (shutting_down)
 *   ENDED   --the library frees the response--> freed (sub_free())
 *
 * Invariants:
 *  1. The wake is captured before every read and parked on after an
 *     empty one, so no ack is missed; a spurious wake costs one read.
 *  2. Leadership is checked (star_lead_check(), which never takes a
 *     vacant stream) before every read, and so at least every 100 ms
 *     while parked: within that bound of the lease leaving this star (a
 *     handoff, a release, a lost registry lease) the subscription ends
 *     with NOT_OWNER naming the new holder, or polls (invariant 5) when
 *     the stream was left vacant.  A subscription never takes a lease.
 *  3. A parked subscription sends a heartbeat frame at least every
 *     heartbeat_ns, so a dead client is noticed within that bound.
 *  4. After api_subs_stop() returns, every subscription ends at its next
 *     callback, and none parks again.
 *  5. A vacant stream (no writer lease) is served from its refs (the
 *     read-path seed: with no writer nothing is in flight, so committed
 *     state is everything): before each read the star raises its view to
 *     the refs' end (star_view_refresh()), so a dead leader's acked
 *     records reach the subscriber once settlement commits them; after
 *     an empty page it polls, from 5 ms doubling to 250 ms (reset by
 *     data), re-checking the lease each time: a lease taken elsewhere
 *     ends it with NOT_OWNER, one taken here turns it into the leader's
 *     parked subscription.
 */
#ifndef NOVAFS_API_SUBSCRIBE_H
#define NOVAFS_API_SUBSCRIBE_H

#include <stdint.h>

struct MHD_Response;
struct star;
struct nv_stream;
struct api_subs;

/* The registry of live subscriptions of one server: 0 and *out. */
int api_subs_new(struct star *st, uint64_t heartbeat_ns, struct api_subs **out)
	__attribute__((warn_unused_result));
/* Invariant 4: wake every parked subscription, refuse new parks, and
 * wait (at most 2 s) for their last frames to go out. */
void api_subs_stop(struct api_subs *subs);
/* After the server library joined every connection.  NULL: no-op. */
void api_subs_free(struct api_subs *subs);

/* A chunked response for a subscription of s from byte off.  Takes
 * ownership of the stream reference s (also on failure).  NULL on
 * ENOMEM. */
struct MHD_Response *api_subscribe_response(struct api_subs *subs, struct nv_stream *s,
					    uint64_t off);

#endif
