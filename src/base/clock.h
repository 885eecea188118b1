/*
 * clock.h - the two clocks novafs uses.
 *
 * nv_now_mono_ns(): CLOCK_MONOTONIC, for lingers, timeouts and latencies.
 * nv_now_wall_ns(): CLOCK_REALTIME, for record timestamps, marker birth
 * and ripening (these are compared across restarts, so they must be wall
 * time; a clock step only shifts when a marker ripens).
 */
#ifndef NOVAFS_BASE_CLOCK_H
#define NOVAFS_BASE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define NV_NS_PER_US 1000ull
#define NV_NS_PER_MS 1000000ull
#define NV_NS_PER_S 1000000000ull

static inline uint64_t nv_ts_to_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * NV_NS_PER_S + (uint64_t)ts->tv_nsec;
}

static inline uint64_t nv_now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return nv_ts_to_ns(&ts);
}

static inline uint64_t nv_now_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return nv_ts_to_ns(&ts);
}

/* Initialise a condition variable whose timed waits run on CLOCK_MONOTONIC
 * (so a wall-clock step neither shortens nor stretches a linger or a
 * timeout).  Pair its waits with nv_mono_deadline().  Returns 0 or a
 * positive pthread error, as pthread_cond_init does. */
static inline int nv_cond_init_mono(pthread_cond_t *cond)
{
	pthread_condattr_t ca;
	int rc;

	if ((rc = pthread_condattr_init(&ca)))
		return rc;
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(cond, &ca);
	pthread_condattr_destroy(&ca);
	return rc;
}

/* An absolute CLOCK_MONOTONIC deadline for pthread_cond_timedwait on a
 * condition variable created with nv_cond_init_mono(). */
static inline struct timespec nv_mono_deadline(uint64_t from_now_ns)
{
	uint64_t t = nv_now_mono_ns() + from_now_ns;
	struct timespec ts = { .tv_sec = (time_t)(t / NV_NS_PER_S),
			       .tv_nsec = (long)(t % NV_NS_PER_S) };
	return ts;
}

#endif
