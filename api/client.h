/*
 * client.h - the cluster client: the star API of another star, as fs/
 * (and later the Gateway) call it when this star does not lead a stream
 * (DESIGN.md section 7, "NOT_OWNER").
 *
 * For: append, read, acked end and subscribe at a stream's holder, with
 * the cluster secret, and the redial rule of the seed's SDK.  Not for:
 * deciding who leads (engine/lease.h: the caller asks star_leader() and
 * passes the holder), serving (api/server.h).
 *
 * Redial (invariants):
 *  1. A NOT_OWNER answer names a new holder; the client redials it once
 *     and only once per call.  A second NOT_OWNER ends the call with
 *     -STAR_ENOTOWNER (leadership is moving: the caller may retry).
 *  2. Per stream the client remembers the highest lease epoch seen (the
 *     holder it was given, and every NOT_OWNER).  A redirect or a holder
 *     with an older epoch is stale: it is not followed, and the call ends
 *     with -STAR_ENOTOWNER.  The memory is a fixed table (API_EPOCH_SLOTS
 *     entries; a collision forgets the older stream, never errs).
 *  3. Stars never forward: the client never asks the star it was sent to
 *     for anything on the holder's behalf.
 *  4. Bounded: at most max_handles requests at once (a caller waits for a
 *     handle), a reply at most API_READ_MAX bytes plus its JSON line.
 *
 * Errors (-errno): -EHOSTUNREACH (the holder cannot be reached: refused,
 * unresolvable, timed out, or it serves no star API), -EACCES (the
 * holder refused the cluster secret), -ENOENT (no such stream there),
 * -EFBIG (record over the holder's limit), -EINVAL (a request the holder
 * called malformed), -EAGAIN (the holder is busy or stopping), -ENOSPC,
 * -ETIMEDOUT (the holder got the request and did not answer within
 * timeout_ms, or answered that its lease deadline passed: an append is
 * in doubt, it may be acked there),
 * -STAR_ENOTOWNER (invariants 1 and 2), -EIO (anything else, logged).
 */
#ifndef NOVAFS_API_CLIENT_H
#define NOVAFS_API_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "api/auth.h"
#include "engine/lease.h"

#define API_EPOCH_SLOTS 256

struct api_client;

struct api_client_cfg {
	const struct api_secret *secret; /* borrowed until api_client_free() */
	unsigned max_handles;            /* 0: 8 */
	unsigned connect_timeout_ms;     /* 0: 2000 */
	unsigned timeout_ms;             /* a whole request; 0: 30000 */
};

int api_client_new(const struct api_client_cfg *cfg, struct api_client **out)
	__attribute__((warn_unused_result));
/* Every call must have returned.  NULL is a no-op. */
void api_client_free(struct api_client *cl);

struct api_append_result {
	uint64_t seq;                /* the record's seq */
	uint64_t end_seq, end_byte;  /* the acked end after it */
};

/* Append one record at the holder (borrowed h; body len bytes), answered
 * when durable there.  0 and *res (may be NULL). */
int api_client_append(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, const void *body, size_t len,
		      struct api_append_result *res) __attribute__((warn_unused_result));

/* Read up to len bytes (at most API_READ_MAX) at off into dst: 0 and
 * *got (0: the acked end, or past it). */
int api_client_read(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		    const char *stream, uint64_t off, void *dst, size_t len, size_t *got)
	__attribute__((warn_unused_result));

/* The acked end at the holder. */
int api_client_end(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		   const char *stream, uint64_t *seq, uint64_t *byte)
	__attribute__((warn_unused_result));

/* Called with each pushed range (data borrowed for the call), and with
 * len 0, data NULL and off the holder's acked end on each heartbeat;
 * nonzero stops the subscription, which returns that value. */
typedef int (*api_sub_fn)(void *arg, uint64_t off, const void *data, size_t len);

/* Subscribe from byte off until fn stops it or the holder ends it.  A
 * NOT_OWNER end redials the named holder once at the cursor (invariant
 * 1).  Returns fn's nonzero value, or -errno as above (-EAGAIN when the
 * holder is stopping). */
int api_client_subscribe(struct api_client *cl, const struct lease_holder *h,
			 const char *bucket, const char *stream, uint64_t off, api_sub_fn fn,
			 void *arg) __attribute__((warn_unused_result));

#endif
