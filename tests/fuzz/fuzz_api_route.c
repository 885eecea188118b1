/*
 * fuzz_api_route.c - the star API's request router and the parsers of
 * what a star or a client reads off the network (api/wire.c).
 *
 * Input: u8 sel | rest.
 *   sel % 8   which parser: 0-1 api_route_parse (method GET / POST, rest
 *             is the path up to its first NUL), 2 api_parse_frame, 3
 *             api_parse_not_owner, 4 api_parse_u64 and api_parse_listen,
 *             5 api_parse_star_doc and api_parse_reply_u64, 6
 *             api_plan_query_parse (the plan route's seq, offset and max:
 *             the rest's first three lines, an empty line for an absent
 *             value), 7 api_plan_parse (a plan reply, api/plan.h)
 *
 * Checks:
 *  - api_route_parse() either routes (a known endpoint; for a stream
 *    endpoint both names pass the names.h rules and the path formatted
 *    back from them routes to the same endpoint when the names need no
 *    escaping) or refuses with 400, 404, 405 or 414 and empty names.
 *  - a parsed NOT_OWNER holder has a positive epoch and NUL-terminated
 *    fields that fit; formatting it and parsing again gives it back.
 *  - a data frame never claims more than API_READ_MAX bytes.
 *  - api_parse_u64 agrees with strtoull on digit strings of <= 19 digits.
 *  - a parsed plan query has exactly one position kind and max in
 *    1..PLAN_ENTRIES_MAX; seq and offset together are refused.
 *  - a parsed plan reply keeps plan.h invariant 1 (at most 256 entries,
 *    contiguous, each a record extent, the last ending at the residual,
 *    keys under streams/, URLs exactly on a signed plan) and formats back
 *    to a document that parses to the same plan (invariant 2).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/plan.h"
#include "api/wire.h"
#include "engine/store/store.h"
#include "src/base/names.h"
#include "tests/fuzz/fuzz.h"

static void check_route(const char *method, const char *path)
{
	struct api_route r, back;
	char again[API_PATH_MAX];

	if (api_route_parse(method, path, &r)) {
		FUZZ_ASSERT(r.ep == API_EP_NONE);
		FUZZ_ASSERT(r.status == 400 || r.status == 404 || r.status == 405 ||
			    r.status == 414);
		FUZZ_ASSERT(r.bucket[0] == '\0' && r.stream[0] == '\0');
		return;
	}
	FUZZ_ASSERT(r.ep != API_EP_NONE);
	if (r.ep == API_EP_NUDGE || r.ep == API_EP_METRICS)
		return;
	FUZZ_ASSERT(nv_bucket_name_check(r.bucket) == 0);
	FUZZ_ASSERT(nv_stream_name_check(r.stream) == 0);
	if (strspn(r.bucket, "abcdefghijklmnopqrstuvwxyz0123456789.-_~") == strlen(r.bucket) &&
	    strspn(r.stream, "abcdefghijklmnopqrstuvwxyz0123456789.-_~") == strlen(r.stream)) {
		FUZZ_ASSERT(api_fmt_path(r.ep, r.bucket, r.stream, again, sizeof(again)) == 0);
		FUZZ_ASSERT(api_route_parse(method, again, &back) == 0 && back.ep == r.ep);
	}
}

static void check_holder(const struct lease_holder *h)
{
	struct lease_holder back;
	char doc[API_LINE_MAX];

	FUZZ_ASSERT(h->epoch > 0);
	FUZZ_ASSERT(memchr(h->star, '\0', sizeof(h->star)) && memchr(h->addr, '\0', sizeof(h->addr)));
	FUZZ_ASSERT(api_fmt_not_owner(h, doc, sizeof(doc)) == 0);
	FUZZ_ASSERT(api_parse_not_owner(doc, strlen(doc), &back) == 0);
	FUZZ_ASSERT(!strcmp(back.star, h->star) && !strcmp(back.addr, h->addr) &&
		    back.epoch == h->epoch);
}

static void check_number(const char *s)
{
	char host[64];
	unsigned port;
	uint64_t v;

	if (api_parse_u64(s, 0, &v) == 0 && strlen(s) <= 19)
		FUZZ_ASSERT(v == strtoull(s, NULL, 10));
	if (api_parse_listen(s, host, sizeof(host), &port) == 0)
		FUZZ_ASSERT(port >= 1 && port <= 65535 && strlen(host) < sizeof(host));
}

/* Line k (0-based) of text into buf, NULL when empty or missing. */
static const char *line_of(const char *text, int k, char *buf, size_t cap)
{
	const char *p = text, *e;

	for (; k > 0 && p; k--)
		p = (p = strchr(p, '\n')) ? p + 1 : NULL;
	if (!p)
		return NULL;
	e = strchr(p, '\n');
	if (!e)
		e = p + strlen(p);
	if (e == p || (size_t)(e - p) >= cap)
		return NULL;
	memcpy(buf, p, (size_t)(e - p));
	buf[e - p] = '\0';
	return buf;
}

static void check_plan_query(const char *text)
{
	char a[64], b[64], c[64];
	const char *seq = line_of(text, 0, a, sizeof(a)), *off = line_of(text, 1, b, sizeof(b));
	const char *max = line_of(text, 2, c, sizeof(c)), *why;
	struct api_plan_query q;

	if (api_plan_query_parse(seq, off, max, &q, &why)) {
		FUZZ_ASSERT(why != NULL);
		return;
	}
	FUZZ_ASSERT(!(seq && off));
	FUZZ_ASSERT(q.by == (off ? META_REF_BY_BYTE : META_REF_BY_SEQ));
	FUZZ_ASSERT(q.max >= 1 && q.max <= PLAN_ENTRIES_MAX);
	if (!seq && !off)
		FUZZ_ASSERT(q.pos == 0);
}

static void check_plan_reply(const char *text, size_t len)
{
	struct read_plan *p = calloc(1, sizeof(*p)), *back = calloc(1, sizeof(*back));
	char *again;

	if (!p || !back || api_plan_parse(text, len, p)) {
		if (p)
			FUZZ_ASSERT(p->n == 0);
		free(p);
		free(back);
		return;
	}
	FUZZ_ASSERT(p->n <= PLAN_ENTRIES_MAX);
	for (uint32_t i = 0; i < p->n; i++) {
		const struct plan_entry *e = &p->e[i];

		FUZZ_ASSERT(e->end_seq > e->first_seq && e->end_byte >= e->first_byte);
		FUZZ_ASSERT(store_key_check(e->key) == 0 && !strncmp(e->key, "streams/", 8));
		FUZZ_ASSERT((e->url != NULL) == (p->vending == PLAN_SIGNED));
		if (i)
			FUZZ_ASSERT(e->first_seq == e[-1].end_seq && e->first_byte == e[-1].end_byte);
	}
	if (p->n)
		FUZZ_ASSERT(p->residual_seq == p->e[p->n - 1].end_seq);
	again = api_plan_format(p);
	FUZZ_ASSERT(again && api_plan_parse(again, strlen(again), back) == 0);
	FUZZ_ASSERT(back->n == p->n && back->residual_seq == p->residual_seq &&
		    back->more == p->more && back->stream_id == p->stream_id);
	for (uint32_t i = 0; i < p->n; i++)
		FUZZ_ASSERT(!strcmp(back->e[i].key, p->e[i].key) &&
			    back->e[i].footer_off == p->e[i].footer_off &&
			    (!p->e[i].url || !strcmp(back->e[i].url, p->e[i].url)));
	free(again);
	plan_clear(p);
	plan_clear(back);
	free(p);
	free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_frame f;
	struct lease_holder h;
	char star[META_STAR_MAX + 1];
	uint64_t v;
	char *text;
	unsigned sel;

	if (size < 1)
		return 0;
	fuzz_quiet();
	sel = data[0] % 8;
	text = malloc(size); /* rest + NUL */
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	switch (sel) {
	case 0:
	case 1:
		check_route(sel ? "POST" : "GET", text);
		break;
	case 2:
		if (api_parse_frame(text, size - 1, &f) == 0) {
			FUZZ_ASSERT(f.kind != API_FRAME_DATA || f.length <= API_READ_MAX);
			if (f.kind == API_FRAME_ERROR && !strcmp(f.error, "not_owner"))
				check_holder(&f.holder);
		}
		break;
	case 3:
		if (api_parse_not_owner(text, size - 1, &h) == 0)
			check_holder(&h);
		break;
	case 4:
		check_number(text);
		break;
	case 6:
		check_plan_query(text);
		break;
	case 7:
		check_plan_reply(text, size - 1);
		break;
	default:
		if (api_parse_star_doc(text, size - 1, "to", star, sizeof(star)) == 0)
			FUZZ_ASSERT(star[0] && strlen(star) <= META_STAR_MAX);
		if (api_parse_reply_u64(text, size - 1, "end", "seq", &v) == 0)
			FUZZ_ASSERT(v <= (uint64_t)INT64_MAX); /* jansson's integers */
		break;
	}
	free(text);
	return 0;
}
