/*
 * fault.h - a fault-injecting object store for tests.
 *
 * For: proving what novafs does when storage misbehaves: appends retry or
 * fail with EIO without losing acknowledged records; a corrupt object is
 * an EIO on read and a counted, logged event, never wrong bytes; other
 * streams keep serving.  It wraps any store and injects, per operation
 * and at random with given probabilities, errors, latency, short reads,
 * flipped bits and "disk full".  Not for: production.
 *
 * Spec (items separated by ':' or ','):
 *   put_error=P     a put / multipart part / complete fails with EIO
 *   put_errno=N     ... with errno N instead (e.g. 11, EAGAIN: an
 *                   unreachable S3 endpoint)
 *   get_error=P     a ranged get / head fails with EIO
 *   flip=P          a ranged get returns its bytes with one bit flipped
 *   short=P         a ranged get returns fewer bytes than asked
 *   full=1          every put fails with ENOSPC (disk full)
 *   full_after=B    puts fail with ENOSPC once B bytes were put
 *   latency_ms=N    every call sleeps about N ms first
 *   prefix=S        only keys starting with S are affected
 *   seed=N          random seed (default: from the clock)
 * P is a probability in [0, 1].
 */
#ifndef NOVAFS_STORE_FAULT_H
#define NOVAFS_STORE_FAULT_H

#include "engine/store/store.h"

/* Wrap inner (ownership passes, also on failure) with the faults in
 * spec.  0 and *out, -EINVAL (malformed spec, logged), -ENOMEM. */
int fault_store_wrap(struct store *inner, const char *spec, struct store **out)
	__attribute__((warn_unused_result));

#endif
