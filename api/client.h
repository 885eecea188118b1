/*
 * client.h - the cluster client: the star API of another star, as fs/
 * and the Gateway (gw/) call it when this star does not lead a stream
 * (DESIGN.md section 7, "NOT_OWNER").
 *
 * For: append, read, acked end, subscribe, delete, trim and a rename over
 * a stream at its holder, with the cluster secret, and the redial rule of
 * the seed's SDK.  Not for:
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
 *     entries; a collision forgets the older stream, never errs).  A
 *     holder with epoch 0 claims nothing (the Gateway's "any star", used
 *     where a cold read needs no leader): it is dialed without the check,
 *     and its NOT_OWNER redial is checked as any other.
 *  3. Stars never forward: the client never asks the star it was sent to
 *     for anything on the holder's behalf.
 *  4. Bounded: at most max_handles requests at once (a caller waits for a
 *     handle), a reply at most API_READ_MAX bytes plus its JSON line.
 *  5. Stream ids: every per-stream call takes the stream's id as the
 *     caller loaded it (id; 0: unknown, the stream is named by bucket and
 *     name alone, as the Gateway does).  A nonzero id is sent on every
 *     dial (API_STREAM_ID_HEADER, api/wire.h), so the holder serves the
 *     call only from the stream of that id: when the stream under the
 *     name is another one (renamed, then a new one created under the old
 *     name) or there is none, the call fails with -ESTALE and nothing was
 *     done there; the caller may ask again under the stream's name now.
 *     The epoch memory (invariant 2) is then keyed by the id.
 *
 * Errors (-errno): -EHOSTUNREACH (the holder cannot be reached: refused,
 * unresolvable, timed out, or it serves no star API), -EACCES (the
 * holder refused the cluster secret), -ENOENT (no such stream there),
 * -ESTALE (the stream of that id is not under that name there:
 * invariant 5),
 * -EFBIG (record over the holder's limit), -EINVAL (a request the holder
 * called malformed), -EAGAIN (the holder is busy or stopping), -ENOSPC,
 * -ETIMEDOUT (the holder got the request and did not answer within
 * timeout_ms, or answered that its lease deadline passed: an append is
 * in doubt, it may be acked there),
 * -STAR_ENOTOWNER (invariants 1 and 2), -EIO (anything else, logged).
 */
#ifndef NOVAFS_API_CLIENT_H
#define NOVAFS_API_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/auth.h"
#include "engine/lease.h"
#include "engine/plan.h"

#define API_EPOCH_SLOTS 256

struct api_client;

struct api_client_cfg {
	const struct api_secret *secret; /* borrowed until api_client_free() */
	unsigned max_handles;            /* 0: 8 */
	unsigned connect_timeout_ms;     /* 0: 2000 */
	unsigned timeout_ms;             /* a whole request; 0: 30000 */
	unsigned sub_quiet_ms;           /* a subscription's quiet look; 0: 6000 */
};

int api_client_new(const struct api_client_cfg *cfg, struct api_client **out)
	__attribute__((warn_unused_result));
/* Every call must have returned.  NULL is a no-op. */
void api_client_free(struct api_client *cl);

struct api_append_result {
	uint64_t seq;                /* the record's seq */
	uint64_t end_seq, end_byte;  /* the acked end after it */
};

/* Every per-stream call below names the stream by bucket, stream (both
 * borrowed for the call) and id (invariant 5; 0: by name alone). */

/* Append one record at the holder (borrowed h; body len bytes), answered
 * when durable there.  0 and *res (may be NULL). */
int api_client_append(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, const void *body, size_t len,
		      struct api_append_result *res) __attribute__((warn_unused_result));

/* Read up to len bytes (at most API_READ_MAX) at off into dst: 0 and
 * *got (0: the acked end, or past it). */
int api_client_read(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		    const char *stream, uint64_t id, uint64_t off, void *dst, size_t len,
		    size_t *got) __attribute__((warn_unused_result));

/* The acked end at the holder. */
int api_client_end(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		   const char *stream, uint64_t id, uint64_t *seq, uint64_t *byte)
	__attribute__((warn_unused_result));

/* The acked end and the trim point at the holder: records below
 * trim_seq are gone, bytes below trim_byte read as zeros (0 and 0 from
 * a star that does not say). */
struct api_bounds {
	uint64_t end_seq, end_byte;
	uint64_t trim_seq, trim_byte;
};
int api_client_bounds(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, struct api_bounds *b)
	__attribute__((warn_unused_result));

/* The record holding record pos (by_seq) or byte pos at the holder
 * (the star API's locate): 0 and its *seq and first *byte; at the acked
 * end, the acked end.  -ERANGE past the acked end. */
int api_client_locate(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, bool by_seq, uint64_t pos, uint64_t *seq,
		      uint64_t *byte) __attribute__((warn_unused_result));
/* Ask the holder h (borrowed) to hand bucket/stream over to star `to`
 * (the star API's handoff: the release flush there, then the lease is
 * passed; a NOT_OWNER is redialed once, invariant 1).  0 and *out (may
 * be NULL: the new holder, epoch 0 and star "" when left vacant),
 * -ENOENT (no star `to` is registered), -EHOSTDOWN (`to` is closing or
 * its registry lease went: the stream is vacant now), -EOPNOTSUPP (the
 * holder has no registry), -ETIMEDOUT (the release flush did not finish
 * there: it still leads), or the errors above.  Costs one request per
 * dial. */
int api_client_handoff(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		       const char *stream, uint64_t id, const char *to, struct lease_holder *out)
	__attribute__((warn_unused_result));

/* Ask the holder h (borrowed) to delete bucket/stream (the star API's
 * delete: a tombstone there, after every append it acked; a NOT_OWNER is
 * redialed once, invariant 1).  0, or the errors above (-ENOENT: no such
 * stream there, deleted already).  Costs one request per dial. */
int api_client_delete(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id) __attribute__((warn_unused_result));

/* Ask the holder h (borrowed) to trim bucket/stream to record pos
 * (by_seq) or byte pos (the star API's trim: star_stream_trim_seq() or
 * star_stream_trim_bytes() there; a NOT_OWNER is redialed once,
 * invariant 1).  0 and the trim point there now, *seq and *byte;
 * -EINVAL (a seq below it or past the acked end: never backwards), or
 * the errors above.  Costs one request per dial. */
int api_client_trim(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		    const char *stream, uint64_t id, bool by_seq, uint64_t pos, uint64_t *seq,
		    uint64_t *byte) __attribute__((warn_unused_result));

/* Ask the holder h (borrowed) of bucket/stream to rename bucket/from
 * (borrowed) over it (the star API's rename: star_stream_rename() there,
 * one metastore transaction that swaps the names and tombstones the
 * stream of id under its lease; a NOT_OWNER is redialed once, invariant
 * 1).  0 (renamed; the stream of id is deleted there), -ENOENT (no
 * stream `from`: nothing changed), -ESTALE (bucket/stream is not the
 * stream of id there, or its lease moved as the holder committed:
 * nothing changed), -EINVAL (from is not a stream name), or the errors
 * above.  Costs one request per dial. */
int api_client_rename(struct api_client *cl, const struct lease_holder *h, const char *bucket,
		      const char *stream, uint64_t id, const char *from)
	__attribute__((warn_unused_result));

/* Nudge the star at addr ("ADDR:PORT") on behalf of star `from`: it
 * re-checks leases and settle markers now.  0 or -errno as above. */
int api_client_nudge(struct api_client *cl, const char *addr, const char *from)
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
			 const char *bucket, const char *stream, uint64_t id, uint64_t off,
			 api_sub_fn fn, void *arg) __attribute__((warn_unused_result));

/* Called with the holder dialed while its subscription is quiet: once
 * the holder has sent nothing (no frame, no heartbeat) for sub_quiet_ms
 * (past the 5 s heartbeat: api/server.h), then about every second until
 * it sends again.  A stopped holder (SIGSTOP, a hung host) keeps its
 * socket open and silent, and its lease expires long before the 20 s
 * silence bound: this is the caller's chance to look at the lease.
 * Nonzero stops the subscription, which returns that value. */
typedef int (*api_sub_quiet_fn)(void *arg, const struct lease_holder *at);

/* api_client_subscribe() with quiet (NULL: none) called as above. */
int api_client_subscribe_watch(struct api_client *cl, const struct lease_holder *h,
			       const char *bucket, const char *stream, uint64_t id, uint64_t off,
			       api_sub_fn fn, api_sub_quiet_fn quiet, void *arg)
	__attribute__((warn_unused_result));

/*
 * ReadPlan (api/plan.h) at the star at addr ("ADDR:PORT", borrowed): any
 * star answers, so there is no holder, no epoch and no redial; named by
 * bucket and stream alone (its one caller, the Gateway, knows no ids).  by/pos
 * /max as the route's query (max 0: the cap).  0 and *p (the caller's;
 * plan_clear() after), or -errno as above; -EIO for a reply that is not
 * a valid plan (api_plan_parse()).
 */
int api_client_plan(struct api_client *cl, const char *addr, const char *bucket,
		    const char *stream, enum meta_ref_key by, uint64_t pos, uint32_t max,
		    struct read_plan *p) __attribute__((warn_unused_result));

#endif
