/*
 * lockcheck.h - "this lock is held" assertions for debug builds.
 *
 * For: the entry of a function whose comment says "caller holds X->lock"
 * (STYLE.md, Threads and locks).  NV_ASSERT_LOCKED(&x->lock) fails the
 * assertion when nobody holds the mutex at that moment.
 *
 * How: pthread_mutex_trylock() on a mutex the caller holds answers EBUSY
 * (default, non-recursive mutexes, as every mutex in the tree is); if it
 * succeeds, the caller did not hold it: unlock and fail.  The check cannot
 * tell *which* thread holds the lock, so it has false negatives (another
 * thread holds it) and never false positives; that is enough to catch the
 * usual slip, a helper called from a path that forgot to lock.
 *
 * Not for: recursive mutexes (trylock would succeed for the owner), or
 * release builds (NDEBUG): there the macro is empty and costs nothing.
 */
#ifndef NOVAFS_BASE_LOCKCHECK_H
#define NOVAFS_BASE_LOCKCHECK_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>

#ifndef NDEBUG
static inline int nv_lock_is_held(pthread_mutex_t *m)
{
	if (pthread_mutex_trylock(m) == 0) {
		pthread_mutex_unlock(m);
		return 0;
	}
	return 1;
}
#define NV_ASSERT_LOCKED(m) assert(nv_lock_is_held(m))
#else
#define NV_ASSERT_LOCKED(m) ((void)0)
#endif

#endif
