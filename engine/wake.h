/*
 * wake.h - a stream's wake: the edge subscriptions park on.
 *
 * For: read-path.txt "Subscriptions park on the wake".  The leader closes
 * a stream's wake at every acknowledgement that moves the stream's acked
 * end, at its deletion and at shutdown.  A subscriber captures the wake
 * (wake_capture) before it reads; after an empty read it parks with what
 * it captured (wake_park): if the edge closed in between, the park fails
 * and the subscriber reads again, so no edge is ever lost.  The wake
 * carries nothing: the read that follows is the only authority, and a
 * spurious wake is harmless.  Not for: holding threads — a parked waiter
 * is a small struct; its callback runs on the thread that closes the
 * edge and must only hand the waiter on.
 *
 * Invariants:
 *  1. A waiter parked with generation g fires exactly once, at the first
 *     close after g — or it is unparked by its owner first; never both.
 *  2. Callbacks run with no lock held, after the waiter left the list.
 */
#ifndef NOVAFS_ENGINE_WAKE_H
#define NOVAFS_ENGINE_WAKE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct wake_waiter {
	struct wake_waiter *next, *prev; /* the wake's lock */
	void (*fn)(struct wake_waiter *w); /* set by the owner before parking */
	bool parked;                       /* the wake's lock */
};

struct wake {
	pthread_mutex_t lock;
	uint64_t gen;              /* lock: closes so far */
	struct wake_waiter *head;  /* lock */
	uint32_t nparked;          /* lock */
};

void wake_init(struct wake *w);
void wake_destroy(struct wake *w); /* no waiter may be parked */

/* The current generation, to park with after an empty read. */
uint64_t wake_capture(struct wake *w);

/* Park w until the next close.  0 when parked; -EAGAIN when the edge
 * already closed since gen (nothing parked: read again). */
int wake_park(struct wake *w, uint64_t gen, struct wake_waiter *wt)
	__attribute__((warn_unused_result));

/* Take a parked waiter back (a cancelled subscription).  true when it was
 * still parked (its callback will never run); false when it has fired. */
bool wake_unpark(struct wake *w, struct wake_waiter *wt);

/* Close the edge: every parked waiter fires.  Returns how many fired. */
uint32_t wake_close(struct wake *w);

uint32_t wake_parked(struct wake *w);

#endif
