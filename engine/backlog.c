/*
 * backlog.c - see backlog.h.
 *
 * Locking: one mutex guards every field; waiters queue in arrival order
 * (a list of nodes on their own stacks) and sleep on one condition
 * variable (CLOCK_MONOTONIC, for the wait bound); only the head of the
 * queue may take.
 */
#include "config.h"
#include "engine/backlog.h"
#include "src/base/clock.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct waiter {
	struct waiter *next;
};

struct backlog {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t budget;      /* immutable */
	uint64_t wait_ns;     /* immutable: 0 = wait as long as it takes */
	uint64_t used;        /* protected by lock */
	struct waiter *head;  /* protected by lock: the queue, oldest first */
	struct waiter **tailp; /* protected by lock */
	bool shutdown;        /* protected by lock */
	struct nv_stats *stats;
};

struct backlog *backlog_new(uint64_t budget, uint64_t wait_ns, struct nv_stats *stats)
{
	struct backlog *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	pthread_mutex_init(&b->lock, NULL);
	nv_cond_init_mono(&b->cond);
	b->budget = budget ? budget : 1;
	b->wait_ns = wait_ns;
	b->tailp = &b->head;
	b->stats = stats;
	return b;
}

void backlog_free(struct backlog *b)
{
	if (!b)
		return;
	assert(!b->head);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

static bool fits(const struct backlog *b, uint64_t n)
{
	return b->used + n <= b->budget || b->used == 0;
}

/* Take w out of the queue (anywhere in it); the new head may go on. */
static void unqueue(struct backlog *b, struct waiter *w)
{
	struct waiter **pp = &b->head;

	while (*pp != w)
		pp = &(*pp)->next;
	*pp = w->next;
	if (b->tailp == &w->next)
		b->tailp = pp;
	pthread_cond_broadcast(&b->cond);
}

int backlog_take(struct backlog *b, uint64_t n)
{
	struct waiter w = { NULL };
	bool timed_out = false;
	int rc = 0;

	pthread_mutex_lock(&b->lock);
	if (!b->shutdown && (b->head || !fits(b, n))) {
		struct timespec dl = nv_mono_deadline(b->wait_ns);

		if (b->stats)
			NV_STAT_ADD(b->stats, backlog_waits, 1);
		*b->tailp = &w;
		b->tailp = &w.next;
		while (!b->shutdown && (b->head != &w || !fits(b, n)) && !timed_out) {
			if (!b->wait_ns)
				pthread_cond_wait(&b->cond, &b->lock);
			else if (pthread_cond_timedwait(&b->cond, &b->lock, &dl) == ETIMEDOUT)
				timed_out = b->head != &w || !fits(b, n);
		}
		unqueue(b, &w);
	}
	if (b->shutdown) {
		rc = -ESHUTDOWN;
	} else if (timed_out) {
		rc = -ETIMEDOUT;
		if (b->stats)
			NV_STAT_ADD(b->stats, backlog_timeouts, 1);
	} else {
		b->used += n;
	}
	pthread_mutex_unlock(&b->lock);
	return rc;
}

void backlog_give(struct backlog *b, uint64_t n)
{
	pthread_mutex_lock(&b->lock);
	assert(n <= b->used);
	b->used -= n;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

uint64_t backlog_used(struct backlog *b)
{
	uint64_t u;

	pthread_mutex_lock(&b->lock);
	u = b->used;
	pthread_mutex_unlock(&b->lock);
	return u;
}

uint64_t backlog_budget(const struct backlog *b)
{
	return b->budget;
}

uint64_t backlog_wait_ns(const struct backlog *b)
{
	return b->wait_ns;
}

void backlog_shutdown(struct backlog *b)
{
	pthread_mutex_lock(&b->lock);
	b->shutdown = true;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}
