/*
 * backlog.c - see backlog.h.
 *
 * Locking: one mutex guards every field; waiters sleep on one condition
 * variable and check whether their ticket is the one being served.
 */
#include "config.h"
#include "engine/backlog.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct backlog {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t budget;      /* immutable */
	uint64_t used;        /* protected by lock */
	uint64_t next_ticket; /* protected by lock: next ticket to hand out */
	uint64_t serving;     /* protected by lock: ticket allowed to take */
	bool shutdown;        /* protected by lock */
	struct nv_stats *stats;
};

struct backlog *backlog_new(uint64_t budget, struct nv_stats *stats)
{
	struct backlog *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	b->budget = budget ? budget : 1;
	b->stats = stats;
	return b;
}

void backlog_free(struct backlog *b)
{
	if (!b)
		return;
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

static bool fits(const struct backlog *b, uint64_t n)
{
	return b->used + n <= b->budget || b->used == 0;
}

int backlog_take(struct backlog *b, uint64_t n)
{
	uint64_t ticket;
	int rc = 0;

	pthread_mutex_lock(&b->lock);
	ticket = b->next_ticket++;
	if (!b->shutdown && (ticket != b->serving || !fits(b, n))) {
		if (b->stats)
			NV_STAT_ADD(b->stats, backlog_waits, 1);
		while (!b->shutdown && (ticket != b->serving || !fits(b, n)))
			pthread_cond_wait(&b->cond, &b->lock);
	}
	if (b->shutdown) {
		rc = -ESHUTDOWN;
	} else {
		b->used += n;
	}
	/* Pass the turn on whether or not we took. */
	if (ticket == b->serving) {
		b->serving++;
		pthread_cond_broadcast(&b->cond);
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

void backlog_shutdown(struct backlog *b)
{
	pthread_mutex_lock(&b->lock);
	b->shutdown = true;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}
