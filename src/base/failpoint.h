/*
 * failpoint.h - named fault points for crash and error tests.
 *
 * For: proving that every step of append, absorb, settle and recovery is
 * crash-safe and idempotent.  Compiled into every build; when nothing is
 * armed a point costs one relaxed atomic load.
 *
 * Arming: the environment variable NOVAFS_FAILPOINTS (read by
 * nv_fp_init_from_env() at start-up) or nv_fp_arm() from a unit test:
 *
 *     NOVAFS_FAILPOINTS="name=ACTION[:ARG][@N],..."
 *
 *   ACTION  crash       _exit(77) at once, no cleanup (a SIGKILL stand-in)
 *           error       the point returns -EIO (ARG: another errno number)
 *           delay:MS    sleep MS milliseconds, then continue
 *   @N      act on the N-th hit and on every hit after it (default 1)
 *   @N-M    act on hits N to M only (a passing fault)
 *
 * Invariants:
 *  1. An unarmed point never changes behaviour.
 *  2. The list of point names lives in nv_fp_names[] (failpoint.c), so
 *     tests can walk every point and arming an unknown name fails.
 */
#ifndef NOVAFS_BASE_FAILPOINT_H
#define NOVAFS_BASE_FAILPOINT_H

#include <stdatomic.h>

extern atomic_int nv_fp_armed;

/* The slow path: 0, or the armed error as -errno.  May not return. */
int nv_fp_hit(const char *name);

/* 0 normally; -errno when an "error" action fires.  Crashes and delays
 * happen inside. */
#define NV_FP(name) \
	(atomic_load_explicit(&nv_fp_armed, memory_order_relaxed) ? nv_fp_hit(name) : 0)

/* Parse and arm a spec (format above).  0, or -EINVAL for a malformed
 * spec or an unknown name (logged). */
int nv_fp_arm(const char *spec) __attribute__((warn_unused_result));

/* Arm from NOVAFS_FAILPOINTS if set.  0 or -EINVAL. */
int nv_fp_init_from_env(void) __attribute__((warn_unused_result));

/* Disarm everything. */
void nv_fp_reset(void);

/* How often the armed point name has been hit since it was armed (its
 * action taken or not; a delay counts on entry, before it sleeps), or 0
 * when it is not armed.  For a test that waits until another thread
 * stands in a delay, instead of sleeping and hoping. */
unsigned long nv_fp_hits(const char *name);

/* NULL-terminated list of every point name compiled in. */
extern const char *const nv_fp_names[];

#endif
