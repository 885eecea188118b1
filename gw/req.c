/*
 * req.c - see req.h: the Gateway's request parser.
 *
 * For: pure functions of bytes (no I/O), so the parser can be fuzzed
 * and unit-tested alone.  Not for: the star API's router (api/wire.c),
 * whose paths and rules differ.
 *
 * Invariants: those of req.h.
 */
#include "config.h"
#include "gw/req.h"
#include "api/wire.h"

#include <errno.h>
#include <string.h>

#define STREAMS "/v1/streams/"

static int fail(struct gw_req *r, int status, const char *why)
{
	r->op = GW_OP_NONE;
	r->bucket[0] = r->stream[0] = '\0';
	r->status = status;
	r->why = why;
	return -EINVAL;
}

/* A cap: absent is the server's, 0 or not a number is bad, more is
 * clamped (req.h invariant 2). */
static int cap_value(const char *text, uint32_t max, uint32_t *v)
{
	uint64_t x;

	if (api_parse_u64(text, max, &x) || x == 0)
		return -EINVAL;
	*v = x > max ? max : (uint32_t)x;
	return 0;
}

/* The start of a read: seq= or offset= (not both; neither: seq 0), and
 * for events a Last-Event-ID, which wins. */
static int start_of(const struct gw_query *q, struct gw_req *r)
{
	if (q->seq && q->offset)
		return fail(r, 400, "give seq= or offset=, not both");
	r->by_seq = !q->offset;
	if (api_parse_u64(q->offset ? q->offset : q->seq, 0, &r->pos))
		return fail(r, 400, "seq= and offset= must be decimal numbers");
	if (r->op != GW_OP_EVENTS || !q->last_event_id)
		return 0;
	if (api_parse_u64(q->last_event_id, 0, &r->pos) || !q->last_event_id[0])
		return fail(r, 400, "Last-Event-ID must be an event id this Gateway sent");
	r->by_seq = false;
	r->resume = true;
	return 0;
}

int gw_req_parse(const char *method, const char *path, const struct gw_query *q,
		 struct gw_req *r)
{
	static const struct { const char *tail; enum gw_op op; } ops[] = {
		{ "records", GW_OP_RECORDS },
		{ "events", GW_OP_EVENTS },
		{ "end", GW_OP_END },
	};
	const char *b, *s, *t;

	memset(r, 0, sizeof(*r));
	if (strnlen(path, GW_PATH_MAX + 1) > GW_PATH_MAX)
		return fail(r, 414, "path too long");
	if (strcmp(method, "GET"))
		return fail(r, 405, "the Gateway answers GET only");
	if (!strcmp(path, "/healthz")) {
		r->op = GW_OP_HEALTH;
		return 0;
	}
	if (strncmp(path, STREAMS, strlen(STREAMS)))
		return fail(r, 404, "no such path");
	b = path + strlen(STREAMS);
	s = strchr(b, '/');
	t = s ? strchr(s + 1, '/') : NULL;
	if (!s || !t || strchr(t + 1, '/'))
		return fail(r, 404, "want /v1/streams/BUCKET/STREAM/OPERATION");
	if (api_path_segment(b, s, r->bucket, sizeof(r->bucket)) ||
	    nv_bucket_name_check(r->bucket))
		return fail(r, 400, "bad bucket name");
	if (api_path_segment(s + 1, t, r->stream, sizeof(r->stream)) ||
	    nv_stream_name_check(r->stream))
		return fail(r, 400, "bad stream name");
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(t + 1, ops[i].tail))
			r->op = ops[i].op;
	if (r->op == GW_OP_NONE)
		return fail(r, 404, "unknown stream operation");
	if (r->op == GW_OP_END)
		return 0;
	if (start_of(q, r))
		return -EINVAL;
	if (r->op == GW_OP_RECORDS && (cap_value(q->limit, GW_LIMIT_MAX, &r->limit) ||
				       cap_value(q->max_bytes, GW_BYTES_MAX, &r->max_bytes)))
		return fail(r, 400, "limit= and max_bytes= must be positive decimal numbers");
	return 0;
}
