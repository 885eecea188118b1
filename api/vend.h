/*
 * vend.h - the plan consumer: a stream's settled history read from
 * object storage by read plans, record by record, verified.
 *
 * For: the Gateway (--serve-plan), tests/integration/plan_read.c and
 * anyone who replays settled history without a star in the bytes' path
 * (DESIGN.md section 8).  Not for: the residual (the caller reads or
 * subscribes at a star from where api_vend_read() stops), planning
 * (engine/plan.h), the plan's wire form (api/plan.h).
 *
 * One read:
 *
 *   plan at the start (api_client_plan(), or a plan cfg->keep kept)
 *   per entry: GET its footer window (or take cfg->keep's), verify it (bundle_footer_open():
 *     trailer, CRCs), check the stream's footer entries cover exactly the
 *     entry's records and bytes; then from the chunk holding the
 *     position, runs of consecutive chunks in one ranged GET each (at most
 *     8 MiB, or one larger chunk): verify and decode each chunk
 *     (bundle_chunk_decode(): CRC, length, frames), hand each record at
 *     or after the position to fn
 *   the plan's cursor: plan again from it; no cursor: stop at the
 *     residual (*next)
 *
 * Fetching: raw plans through the caller's own store handle on the
 * standard bucket (store_get_range(): dir:, s3:// with its own
 * credentials, and its own cache= tier); signed plans by libcurl GETs of
 * the entries' URLs with a Range header.  With cfg->tier a signed GET
 * goes through the object cache tier by the rules of
 * engine/store/tier.h (those of engine/store/s3/cache.c, 1-4): cut at
 * the tier's slices, each piece asks the proxy the ring picks for (the
 * entry's key, page: the stars' ring key when their store URL has no
 * prefix=, so both ask the same proxy; with a prefix the page may be
 * cached by two proxies, both correct) with the URL's path and query, the
 * URL's own Host and the tier's X-Nova-Cache-Auth; anything but a clean
 * 206 of the piece (or 200 from offset 0), or no body byte within the
 * hedge, and the piece is fetched straight from the URL, once (a
 * transport failure or a 5xx marks the proxy down, a hedge does not).
 * The proxy's answer is never authoritative: a 404 or 403 from it is a
 * fallback, only the bucket's own is stale.  Nothing else is dialed.
 *
 * Stale is re-plan, never error (invariants):
 *  1. A window that answers 404, 403 or 412 (raw: -ENOENT, -EACCES),
 *     or a plan whose expires has come (one second early, for clocks),
 *     re-plans from the next record wanted: the records already handed on
 *     are never handed on again, and the next plan names the same records
 *     under their new locations.  More than API_VEND_REPLANS re-plans in
 *     a row without a record handed on end the read with -ESTALE.
 *  2. Every record handed on passed the codec's checks; bytes that fail
 *     them are -EBADMSG, never handed on.  Records come in seq order with
 *     no gap and no repeat.
 *  3. Memory: one plan, one footer window, one fetched run of chunks (at
 *     most 8 MiB, or one larger chunk) and its decoded chunk at a time;
 *     with cfg->budget, the fetched window and the kept footer are taken
 *     from it while held (every take given back before the read returns).
 *  4. Records below a plan's trim point are never handed on (the start
 *     is raised to it, as the planner's is).
 */
#ifndef NOVAFS_API_VEND_H
#define NOVAFS_API_VEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/client.h"
#include "engine/store/store.h"
#include "engine/store/tier.h"
#include "meta/refs.h"

#define API_VEND_REPLANS 8

struct read_plan; /* engine/plan.h */

/* The caller's byte budgets (optional): take before a window is fetched
 * (footer: true for a footer window, false for a run of chunks), give
 * the same n when it is dropped.  take's -errno ends the read with it. */
struct api_vend_budget {
	int (*take)(void *arg, bool footer, uint64_t n);
	void (*give)(void *arg, bool footer, uint64_t n);
	void *arg;
};

/* What the caller keeps across reads (optional; any op may be NULL;
 * every op may be called from any thread):
 *   plan_get     a kept plan of bucket/stream one of whose entries holds
 *                pos (by), copied into *p (the read plan_clear()s it):
 *                0, or -ENOENT (ask a star).  Asked before every plan but
 *                the re-plan after a stale one.
 *   plan_put     p was just vended by a star (borrowed for the call).
 *   plan_drop    a plan of bucket/stream was stale (invariant 1): keep
 *                none of its, the re-plan goes to a star.
 *   footer_get   the verified footer window of object key at revision
 *                rev, [off, off + len), copied into dst: 0 or -ENOENT.
 *                A window got so is verified again as if fetched.
 *   footer_put   a fetched window that bundle_footer_open() accepted
 *                (borrowed for the call). */
struct api_vend_keep {
	int (*plan_get)(void *arg, const char *bucket, const char *stream, enum meta_ref_key by,
			uint64_t pos, struct read_plan *p);
	void (*plan_put)(void *arg, const char *bucket, const char *stream,
			 const struct read_plan *p);
	void (*plan_drop)(void *arg, const char *bucket, const char *stream);
	int (*footer_get)(void *arg, const char *key, uint32_t rev, uint64_t off, uint32_t len,
			  void *dst);
	void (*footer_put)(void *arg, const char *key, uint32_t rev, uint64_t off,
			   const void *win, uint32_t len);
	void *arg;
};

/* Idle libcurl handles kept across reads (optional: cfg->handles).  A
 * read that fetches signed URLs takes one at its first GET and gives it
 * back when it returns, so the next read's GETs reuse the connections the
 * handle keeps open (TCP and TLS set up once per host and handle, not once
 * per read).  At most max handles stay idle; a read that finds none makes
 * its own, closed when it is given back to a full set.  Locks itself: any
 * thread.  api_vend_handles_new(): 0, -EINVAL (max 0), -ENOMEM. */
struct api_vend_handles;
int api_vend_handles_new(unsigned max, struct api_vend_handles **out)
	__attribute__((warn_unused_result));
void api_vend_handles_free(struct api_vend_handles *hs); /* none taken; NULL: no-op */
/* Handles made, and takes that found an idle one (for tests and stats). */
void api_vend_handles_counts(struct api_vend_handles *hs, uint64_t *made, uint64_t *reused);

struct api_vend_cfg {
	struct api_client *cl; /* borrowed: plans */
	const char *addr;      /* borrowed: any star's ADDR:PORT */
	struct store *bucket;  /* borrowed: raw plans' bucket; NULL: raw plans are
				* -EOPNOTSUPP, met before their first fetch
				* takes from the budget */
	unsigned timeout_ms;   /* one signed GET; 0: 30000 */
	struct store_tier *tier; /* borrowed: the cache tier signed GETs go
				  * through ("Fetching"); NULL: straight */
	const struct api_vend_budget *budget; /* borrowed; NULL: unbudgeted */
	uint64_t run_max;      /* bytes one GET of consecutive chunks asks at
				* most (a larger chunk alone); 0: 8 MiB.  A
				* caller after one record (a position lookup)
				* gives 1: one chunk per GET */
	const struct api_vend_keep *keep; /* borrowed; NULL: every plan from a star,
					   * every footer fetched */
	struct api_vend_handles *handles; /* borrowed; NULL: a handle per read */
};

/* One record: its seq, the stream byte of its body's first byte, its
 * body (borrowed for the call).  Nonzero stops the read with that value. */
typedef int (*api_vend_fn)(void *arg, uint64_t seq, uint64_t byte, const void *body,
			   size_t len);

/*
 * Hand fn every settled record of bucket/stream from the start position
 * (by seq, or the record holding stream byte pos) up to the residual, in
 * order.  0 and *next_seq / *next_byte: where to ask a star from: just
 * after the last record handed on, or, when none was, the plan's
 * residual (a boundary at or below the start: ask from max(it, start)).
 * Else fn's value, -ESTALE
 * (invariant 1), -EBADMSG, -EOPNOTSUPP, or a plan's or fetch's -errno.
 */
int api_vend_read(const struct api_vend_cfg *cfg, const char *bucket, const char *stream,
		  enum meta_ref_key by, uint64_t pos, api_vend_fn fn, void *arg,
		  uint64_t *next_seq, uint64_t *next_byte) __attribute__((warn_unused_result));

#endif
