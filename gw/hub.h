/*
 * hub.h - the Gateway's live-tail fan-out: one follow of a stream's
 * source per stream, its ranges handed to every consumer attached to it.
 *
 * For: gw/sse.c, whose events subscriptions at the live tail attach here
 * instead of each following the source (one star subscription per
 * stream, not per SSE client).  Not for: catch-up (history stays per
 * consumer: gw/sse.c reads it with gw_read()), formatting, budgets (the
 * sink's deliver takes its own).
 *
 * A hub (struct hub in hub.c) is made by the first attach to a stream
 * and follows the source from that consumer's cursor on one thread of
 * its own.  Each range the source pushes is handed, under the hub's
 * lock, to every attached sink's deliver, trimmed to the bytes at or
 * after that sink's cursor.  deliver must not block: a sink that
 * cannot take the range now (its bounded queue or the pool is full, its
 * client is gone) answers nonzero and is detached at once; the hub never
 * waits for a consumer.
 *
 *   attach(cursor >= hub's next) --> ATTACHED (ranges delivered)
 *   attach(cursor <  hub's next) --> -EAGAIN, *next: catch up to it first
 *   ATTACHED --deliver nonzero / the follow ended--> DETACHED: gone with why
 *   ATTACHED/DETACHED --gw_hub_leave()--> the sink is the caller's again
 *   the last attached sink's leave --> the hub closes (its follow stops at
 *   the source's next callback; a new attach makes a new hub)
 *
 * gone with why: why is deliver's nonzero value, or the follow's end (the
 * source's -errno: -ENOENT the stream was deleted, every byte before it
 * delivered), or -ESHUTDOWN (gw_hubs_stop()).
 *
 * Locking: the registry lock (hubs), then a hub's lock, then whatever
 * deliver and gone take (gw/sse.c: the subscription's lock).
 * deliver and gone are called with the hub's lock held and must not
 * call back into the hub.
 *
 * Invariants:
 *  1. A sink receives contiguous bytes from its attach cursor on, each
 *     byte once: a range below its cursor is trimmed, and the hub's
 *     follow is contiguous (source.h invariant 2).
 *  2. One follow per stream at a time from one registry (while a closed
 *     hub's follow winds down, at its next source callback, a new hub's
 *     may run beside it).
 *  3. A hub holds no budget; a detached sink is never called again.
 */
#ifndef NOVAFS_GW_HUB_H
#define NOVAFS_GW_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw/source.h"

struct gw_hubs;
struct hub;

/* One consumer, embedded in the caller's object. */
struct gw_hub_sink {
	/* Take [off, off+len) now, without blocking: 0, or nonzero to be
	 * detached (that value is gone's why). */
	int (*deliver)(struct gw_hub_sink *k, uint64_t off, const void *data, size_t len);
	/* Detached by the hub (the sink's leave must still follow). */
	void (*gone)(struct gw_hub_sink *k, int why);
	/* The hub's (between attach and leave): */
	struct hub *hub;
	struct gw_hub_sink *next;
	uint64_t at;   /* the next byte owed */
	bool attached;
};

/*
 * The bells: after each range a hub rings its stream's bell once (one
 * wake-up for every reader of the stream, not one per sink: the readers
 * of a joined sink wait on it instead of on their own condition).  A
 * fixed array in the registry (GW_HUB_BELLS, by the stream's name; two
 * streams may share one: a spurious wake-up), alive as long as the
 * registry, so a reader may wait on it whatever its hub does.
 */
#define GW_HUB_BELLS 64
struct gw_hub_bell;
struct gw_hub_bell *gw_hub_bell_of(struct gw_hubs *hs, const char *bucket, const char *stream);
/* The bell's count now: read it before looking for work, then wait. */
uint64_t gw_hub_bell_count(struct gw_hub_bell *b);
/* Wait until the count moves past seen, at most wait_ns. */
void gw_hub_bell_wait(struct gw_hub_bell *b, uint64_t seen, uint64_t wait_ns);
void gw_hub_bell_ring(struct gw_hub_bell *b);

int gw_hubs_new(struct gw_source *src, struct gw_hubs **out)
	__attribute__((warn_unused_result));
/* Detach every sink (gone with -ESHUTDOWN), refuse attaches, and wait (at
 * most 10 s) for every hub's follow to return. */
void gw_hubs_stop(struct gw_hubs *hs);
void gw_hubs_free(struct gw_hubs *hs); /* after stop and every leave; NULL: no-op */

/* Attach k at byte cursor of bucket/stream (both copied): 0, -EAGAIN
 * (the hub is past cursor: *next is where it is; catch up and retry),
 * -ESHUTDOWN (stopping), -ENOMEM. */
int gw_hub_attach(struct gw_hubs *hs, const char *bucket, const char *stream, uint64_t cursor,
		  struct gw_hub_sink *k, uint64_t *next) __attribute__((warn_unused_result));
/* After a 0 attach, exactly once, attached or not. */
void gw_hub_leave(struct gw_hubs *hs, struct gw_hub_sink *k);

/* Hubs following now (a gauge). */
unsigned gw_hubs_live(struct gw_hubs *hs);

#endif
