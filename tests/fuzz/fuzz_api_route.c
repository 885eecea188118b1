/*
 * fuzz_api_route.c - the star API's request router and the parsers of
 * what a star or a client reads off the network (api/wire.c).
 *
 * Input: u8 sel | rest.
 *   sel % 6   which parser: 0-1 api_route_parse (method GET / POST, rest
 *             is the path up to its first NUL), 2 api_parse_frame, 3
 *             api_parse_not_owner, 4 api_parse_u64 and api_parse_listen,
 *             5 api_parse_star_doc and api_parse_reply_u64
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
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/wire.h"
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
	sel = data[0] % 6;
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
