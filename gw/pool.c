/*
 * pool.c - see pool.h: a counting byte budget with timed waits.
 *
 * For: gw_pool_take() / gw_pool_give().  Not for: allocation (callers
 * malloc what they took).
 *
 * Invariants: those of pool.h.
 */
#include "config.h"
#include "gw/pool.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct gw_pool {
	const char *name;
	uint64_t cap;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a give happened */
	uint64_t used;       /* lock */
};

struct gw_pool *gw_pool_new(const char *name, uint64_t cap)
{
	struct gw_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->name = name;
	p->cap = cap;
	pthread_mutex_init(&p->lock, NULL);
	if (nv_cond_init_mono(&p->cond)) {
		pthread_mutex_destroy(&p->lock);
		free(p);
		return NULL;
	}
	return p;
}

void gw_pool_free(struct gw_pool *p)
{
	if (!p)
		return;
	if (p->used)
		nv_log(NV_ERR, NV_SUB_API, "gateway: %s pool freed with %llu bytes taken", p->name,
		       (unsigned long long)p->used);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int gw_pool_take(struct gw_pool *p, uint64_t n, uint64_t wait_ns)
{
	struct timespec until = nv_mono_deadline(wait_ns);
	int rc = 0;

	if (n > p->cap)
		return -E2BIG;
	pthread_mutex_lock(&p->lock);
	while (p->cap - p->used < n && rc == 0)
		rc = pthread_cond_timedwait(&p->cond, &p->lock, &until);
	if (p->cap - p->used >= n) {
		p->used += n;
		rc = 0;
	} else {
		rc = -EAGAIN;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

void gw_pool_give(struct gw_pool *p, uint64_t n)
{
	pthread_mutex_lock(&p->lock);
	p->used = n > p->used ? 0 : p->used - n;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

uint64_t gw_pool_used(struct gw_pool *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->lock);
	n = p->used;
	pthread_mutex_unlock(&p->lock);
	return n;
}

uint64_t gw_pool_cap(const struct gw_pool *p)
{
	return p->cap;
}
