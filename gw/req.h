/*
 * req.h - the Gateway's public requests (novagw(8) "HTTP API"): a
 * method, a path and the few query values and headers that matter, in;
 * a validated request or a 4xx with its reason, out.
 *
 * For: gw/http.c (every request) and the fuzz target of the Gateway's
 * request parsing (tests/fuzz/fuzz_gw_req.c).  Not for: HTTP itself,
 * API keys (gw/keys.h), reading (gw/source.h).
 *
 * Paths (all GET; BUCKET and STREAM percent-decoded by the server
 * library, checked by names.h):
 *   /v1/streams/BUCKET/STREAM/records?seq=N|offset=O&limit=&max_bytes=
 *   /v1/streams/BUCKET/STREAM/events?seq=N|offset=O   (Last-Event-ID: O)
 *   /v1/streams/BUCKET/STREAM/end
 *   /healthz
 *
 * Invariants:
 *  1. Hostile input: every value is bounded and digits only
 *     (api_parse_u64()); on failure r->status (400, 404, 405, 414) and
 *     r->why (static text) say what was wrong, and nothing else of *r
 *     may be trusted.
 *  2. The two response caps (the read-path seed): a request's limit and
 *     max_bytes can only ask for less than GW_LIMIT_MAX records and
 *     GW_BYTES_MAX bytes; larger values are clamped, 0 is a 400.
 */
#ifndef NOVAFS_GW_REQ_H
#define NOVAFS_GW_REQ_H

#include <stdbool.h>
#include <stdint.h>

#include "src/base/names.h"

/* The server's caps on one records response (S2's read caps). */
#define GW_LIMIT_MAX 1000u
#define GW_BYTES_MAX (1u << 20)
/* The longest path accepted. */
#define GW_PATH_MAX 1024

enum gw_op {
	GW_OP_NONE = 0,
	GW_OP_RECORDS, /* a page of whole records */
	GW_OP_EVENTS,  /* server-sent events: catch-up, then the live tail */
	GW_OP_END,     /* the acked end */
	GW_OP_HEALTH,  /* /healthz: no key needed */
};

/* The raw values of one request (borrowed; NULL: absent). */
struct gw_query {
	const char *seq, *offset, *limit, *max_bytes;
	const char *last_event_id; /* the header */
};

struct gw_req {
	enum gw_op op;
	char bucket[NV_BUCKET_NAME_MAX + 1];
	char stream[NV_STREAM_NAME_MAX + 1];
	bool by_seq;        /* pos is a seq (else a byte offset) */
	bool resume;        /* events: pos is a Last-Event-ID (an exact byte offset) */
	uint64_t pos;
	uint32_t limit;     /* records: 1..GW_LIMIT_MAX */
	uint32_t max_bytes; /* records: 1..GW_BYTES_MAX */
	int status;         /* on failure: the HTTP status */
	const char *why;    /* on failure: static text */
};

/* Parse method, path and q (all borrowed) into *r: 0, or -EINVAL with
 * r->status and r->why (invariant 1). */
int gw_req_parse(const char *method, const char *path, const struct gw_query *q,
		 struct gw_req *r) __attribute__((warn_unused_result));

#endif
