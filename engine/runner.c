/*
 * runner.c - see runner.h.
 *
 * Locking: r->lock guards the job list, every job's state, rc and
 * waiter count, the stop flag and every gate_waiter's cancelled flag
 * passed to runner_settle(); no I/O happens under it (the walk runs
 * unlocked on the runner thread).  r->wake wakes the thread, r->done
 * the waiters.
 */
#include "config.h"
#include "engine/runner.h"
#include "meta/stars.h"
#include "src/base/clock.h"
#include "src/base/lockcheck.h"
#include "src/base/log.h"
#include "src/base/names.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct job {
	struct job *next;
	unsigned cls;
	char star[META_STAR_MAX + 1];
	uint64_t epoch;
	enum job_state state;
	int rc;           /* JOB_DONE: recover_chain()'s answer */
	unsigned waiters; /* runner_settle() calls parked on it */
};

struct runner {
	struct runner_cfg cfg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* lock: a job was queued, or stop */
	pthread_cond_t done; /* lock: a job ended, a cancel, or stop */
	struct job *jobs;    /* lock */
	unsigned njobs;      /* lock */
	bool stop;           /* lock */
};

/* Unlink and free j (r->lock held). */
static void job_drop(struct runner *r, struct job *j)
{
	NV_ASSERT_LOCKED(&r->lock);
	for (struct job **p = &r->jobs; *p; p = &(*p)->next) {
		if (*p == j) {
			*p = j->next;
			r->njobs--;
			free(j);
			return;
		}
	}
}

static struct job *next_queued(struct runner *r)
{
	NV_ASSERT_LOCKED(&r->lock);
	for (struct job *j = r->jobs; j; j = j->next)
		if (j->state == JOB_QUEUED)
			return j;
	return NULL;
}

static void *runner_main(void *arg)
{
	struct runner *r = arg;

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		struct job *j = next_queued(r);
		unsigned cls;
		char star[META_STAR_MAX + 1];
		uint64_t epoch;
		int rc;

		if (!j) {
			pthread_cond_wait(&r->wake, &r->lock);
			continue;
		}
		j->state = JOB_RUNNING;
		cls = j->cls;
		epoch = j->epoch;
		snprintf(star, sizeof(star), "%s", j->star);
		pthread_mutex_unlock(&r->lock);
		nv_log(NV_INFO, NV_SUB_RECOVER, "%s/%s epoch %llu: settling on demand (a take "
		       "of one of its streams waits)", nv_class_name(cls), star,
		       (unsigned long long)epoch);
		/* -ECANCELED: a concurrent settler (the duty, another star's
		 * take) moved a row under us; walking again finds its work
		 * done or goes on from it (recover.h: every step idempotent). */
		rc = recover_chain(&r->cfg.recover, cls, star, epoch);
		for (int again = 0; rc == -ECANCELED && again < 4; again++)
			rc = recover_chain(&r->cfg.recover, cls, star, epoch);
		if (rc == -ENOENT)
			rc = 0; /* no chain row: settled and retired meanwhile */
		if (rc)
			nv_log(NV_WARN, NV_SUB_RECOVER, "%s/%s epoch %llu: settling on demand "
			       "failed: %s", nv_class_name(cls), star, (unsigned long long)epoch,
			       strerror(-rc));
		else if (r->cfg.stats)
			NV_STAT_ADD(r->cfg.stats, demand_settles, 1);
		pthread_mutex_lock(&r->lock);
		j->state = JOB_DONE;
		j->rc = rc;
		if (!j->waiters)
			job_drop(r, j); /* everybody stopped waiting (invariant 2) */
		pthread_cond_broadcast(&r->done);
	}
	pthread_cond_broadcast(&r->done);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int runner_new(const struct runner_cfg *cfg, struct runner **out)
{
	struct runner *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->cfg = *cfg;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	nv_cond_init_mono(&r->done);
	rc = -pthread_create(&r->thread, NULL, runner_main, r);
	if (rc) {
		pthread_cond_destroy(&r->wake);
		pthread_cond_destroy(&r->done);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void runner_free(struct runner *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_broadcast(&r->wake);
	pthread_cond_broadcast(&r->done);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	/* Waiters hold no job past stop: they answer -ESHUTDOWN and leave
	 * before their caller may free r (runner.h: any thread but ours,
	 * and the owner frees only after its callers ended). */
	while (r->jobs) {
		struct job *j = r->jobs;

		r->jobs = j->next;
		free(j);
	}
	pthread_cond_destroy(&r->wake);
	pthread_cond_destroy(&r->done);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* The job of (cls, star, epoch) that is not DONE, or a new QUEUED one;
 * NULL with *err (r->lock held). */
static struct job *job_join(struct runner *r, unsigned cls, const char *star, uint64_t epoch,
			    int *err)
{
	struct job *j;

	NV_ASSERT_LOCKED(&r->lock);
	for (j = r->jobs; j; j = j->next)
		if (j->state != JOB_DONE && j->cls == cls && j->epoch == epoch &&
		    !strcmp(j->star, star))
			return j;
	if (r->njobs >= RUNNER_JOBS_MAX) {
		*err = -EAGAIN;
		return NULL;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		*err = -ENOMEM;
		return NULL;
	}
	j->cls = cls;
	j->epoch = epoch;
	snprintf(j->star, sizeof(j->star), "%s", star);
	j->state = JOB_QUEUED;
	j->next = r->jobs;
	r->jobs = j;
	r->njobs++;
	pthread_cond_signal(&r->wake);
	return j;
}

int runner_settle(struct runner *r, unsigned cls, const char *star, uint64_t epoch,
		  uint64_t deadline_ns, struct gate_waiter *w)
{
	struct job *j;
	int rc = 0;

	pthread_mutex_lock(&r->lock);
	if (r->stop) {
		pthread_mutex_unlock(&r->lock);
		return -ESHUTDOWN;
	}
	j = job_join(r, cls, star, epoch, &rc);
	if (!j) {
		pthread_mutex_unlock(&r->lock);
		return rc;
	}
	j->waiters++;
	for (;;) {
		uint64_t now = nv_now_mono_ns();
		struct timespec ts;

		if (j->state == JOB_DONE) {
			rc = j->rc;
			break;
		}
		if (r->stop) {
			rc = -ESHUTDOWN;
			break;
		}
		if (w && w->cancelled) {
			rc = -EINTR;
			break;
		}
		if (now >= deadline_ns) {
			rc = -ETIMEDOUT;
			break;
		}
		ts = nv_mono_deadline(deadline_ns - now);
		(void)pthread_cond_timedwait(&r->done, &r->lock, &ts);
	}
	/* The last waiter of a finished walk frees it; an unfinished walk
	 * goes on without us (invariant 2). */
	if (--j->waiters == 0 && j->state == JOB_DONE)
		job_drop(r, j);
	pthread_mutex_unlock(&r->lock);
	return rc;
}

void runner_cancel(struct runner *r, struct gate_waiter *w)
{
	pthread_mutex_lock(&r->lock);
	w->cancelled = true;
	pthread_cond_broadcast(&r->done);
	pthread_mutex_unlock(&r->lock);
}
