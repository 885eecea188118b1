/*
 * plan.h - the wire form of ReadPlan (DESIGN.md section 8): the plan
 * route's query, its JSON reply, and the parser a consumer reads it with.
 *
 * For: api/server.c (parse the query, format the reply of
 * engine/plan.h's star_plan()), api/client.c (api_client_plan(): parse
 * the reply), api/vend.c and the Gateway.  Not for: planning
 * (engine/plan.c), fetching what a plan names (api/vend.h).
 *
 * The route (every star; no lease, no redirect: a cold read):
 *
 *   GET /v1/streams/BUCKET/STREAM/plan?seq=S[&max=N]
 *   GET /v1/streams/BUCKET/STREAM/plan?offset=B[&max=N]
 *
 *   seq=S     plan from the record with sequence number S
 *   offset=B  plan from stream byte B (the record holding it, or the next
 *             record when B falls between records; a record's bytes are
 *             its body, so byte offsets are those of `cat` and the
 *             bytes route); at most one of seq and offset (none: seq=0)
 *   max=N     at most N entries, 1..256 (default 256)
 *
 *   Authorization: Bearer SECRET, as every route (401 without it).
 *
 * The reply (200, one JSON object, Content-Type application/json):
 *
 *   {"stream_id":ID,                      the stream's id (footer entries carry it)
 *    "vending":"raw"|"signed",
 *    "trim":{"seq":T,"byte":TB},          records below T are gone; never planned
 *    "entries":[                          0..N settled objects, in stream order,
 *      {"key":"streams/B/ID/EPOCH/FIRST[~REV]",  contiguous: each starts where
 *       "epoch":E,"revision":R,                   the previous ended
 *       "first_seq":S0,"end_seq":S1,      records [S0, S1) ...
 *       "first_byte":B0,"end_byte":B1,    ... at stream bytes [B0, B1)
 *       "footer":[OFF,LEN],               the footer window (entries + trailer)
 *       "data":[0,OFF],                   the chunks; fetch from the chunk of the start
 *       "url":"https://..."}],            signed only: presigned GET, valid until expires
 *    "residual_seq":X,"residual_byte":XB, from here up, ask a star (a read or a
 *                                         subscription at max(X, your start))
 *    "cursor":X,                          only when the cap stopped the plan:
 *                                         plan again from seq X
 *    "expires":UNIX_S,"ttl_s":N}          wall-clock end of the plan's life
 *
 * Errors: 400 bad_request (both seq and offset, a number that is not
 * decimal, max out of 1..256), 404 not_found (no such stream), 401, 500.
 * A fetch of a vended window that answers 404, 403 or 412, or one made
 * after expires, re-plans from its position (api/vend.h).
 *
 * Invariants:
 *  1. The query parser and the reply parser take hostile input (wire.h
 *     invariant 1): the reply parser checks every field's type and range,
 *     keys by store.h's rules under "streams/", entries contiguous and
 *     inside [0, residual], at most PLAN_ENTRIES_MAX, URLs http(s) and at
 *     most API_PLAN_URL_MAX bytes; on failure nothing is left allocated.
 *  2. Formatting a plan and parsing the text gives the same plan back.
 */
#ifndef NOVAFS_API_PLAN_H
#define NOVAFS_API_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/plan.h"

/* The longest presigned URL a reply may carry. */
#define API_PLAN_URL_MAX 8192

/* A parsed plan query. */
struct api_plan_query {
	enum meta_ref_key by; /* META_REF_BY_SEQ (seq=, or neither) or _BY_BYTE */
	uint64_t pos;
	uint32_t max;         /* 1..PLAN_ENTRIES_MAX */
};

/* The query values (each NULL when absent; borrowed).  0 and *q, or
 * -EINVAL with *why (static text). */
int api_plan_query_parse(const char *seq, const char *offset, const char *max,
			 struct api_plan_query *q, const char **why)
	__attribute__((warn_unused_result));

/* The reply document of p (a malloc'd NUL-terminated string the caller
 * frees), or NULL (-ENOMEM). */
char *api_plan_format(const struct read_plan *p);

/* Parse a reply (borrowed, len bytes) into p (the caller's; plan_clear()
 * after).  0 or -EINVAL (invariant 1), -ENOMEM. */
int api_plan_parse(const char *doc, size_t len, struct read_plan *p)
	__attribute__((warn_unused_result));

#endif
