/*
 * fuzz_gw_req.c - the Gateway's request parsing (gw/req.c) and its keys
 * file parser (gw/keys.c): what a reader or an operator hands novagw.
 *
 * Input: u8 sel | rest.
 *   sel & 1   0: gw_req_parse, 1: gw_keys_parse + gw_keys_check
 *   sel >> 1  (parse) which of the five query values are present, one bit
 *             each (seq, offset, limit, max_bytes, Last-Event-ID)
 *   rest      (parse) NUL-separated fields: method, path, then the
 *             values in that order (a missing field is absent);
 *             (keys) the file's text; what follows its last space, up
 *             to the end of that line, is also presented as a key
 *
 * Checks:
 *  - gw_req_parse() either accepts (an operation; for a stream operation
 *    both names pass the names.h rules, limit in 1..GW_LIMIT_MAX and
 *    max_bytes in 1..GW_BYTES_MAX for records; resume only for events
 *    with a Last-Event-ID) or refuses with 400, 404, 405 or 414, no
 *    operation and empty names.
 *  - gw_keys_parse() either gives at least one key and at most
 *    GW_KEYS_MAX, or refuses with a reason; gw_keys_check() answers only
 *    0, -EACCES or -EPERM, and -EACCES without a header.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw/keys.h"
#include "gw/req.h"
#include "src/base/names.h"
#include "tests/fuzz/fuzz.h"

/* The next NUL-terminated field of [*p, end), or NULL past the end. */
static const char *field(const char **p, const char *end)
{
	const char *f = *p;

	if (f >= end)
		return NULL;
	*p = f + strlen(f) + 1;
	return f;
}

static void check_req(unsigned present, const char *text, size_t n)
{
	const char *p = text, *end = text + n;
	const char *method = field(&p, end), *path = field(&p, end);
	const char **slot[5];
	struct gw_query q = { 0 };
	struct gw_req r;

	slot[0] = &q.seq;
	slot[1] = &q.offset;
	slot[2] = &q.limit;
	slot[3] = &q.max_bytes;
	slot[4] = &q.last_event_id;
	if (!method || !path)
		return;
	for (int i = 0; i < 5; i++) {
		const char *v = field(&p, end);

		*slot[i] = present & (1u << i) ? v : NULL;
	}
	if (gw_req_parse(method, path, &q, &r)) {
		FUZZ_ASSERT(r.op == GW_OP_NONE);
		FUZZ_ASSERT(r.status == 400 || r.status == 404 || r.status == 405 ||
			    r.status == 414);
		FUZZ_ASSERT(r.why && r.bucket[0] == '\0' && r.stream[0] == '\0');
		return;
	}
	FUZZ_ASSERT(r.op != GW_OP_NONE);
	FUZZ_ASSERT(!strcmp(method, "GET"));
	if (r.op == GW_OP_HEALTH)
		return;
	FUZZ_ASSERT(nv_bucket_name_check(r.bucket) == 0);
	FUZZ_ASSERT(nv_stream_name_check(r.stream) == 0);
	if (r.op == GW_OP_RECORDS) {
		FUZZ_ASSERT(r.limit >= 1 && r.limit <= GW_LIMIT_MAX);
		FUZZ_ASSERT(r.max_bytes >= 1 && r.max_bytes <= GW_BYTES_MAX);
	}
	FUZZ_ASSERT(!r.resume || (r.op == GW_OP_EVENTS && q.last_event_id && !r.by_seq));
	FUZZ_ASSERT(!(q.seq && q.offset));
}

static void check_keys(const char *text, size_t n)
{
	struct gw_keys *k = NULL;
	const char *why = NULL, *last, *eol;
	char header[GW_KEY_MAX + 64];
	unsigned line = 0;
	int rc;

	if (gw_keys_parse(text, n, &k, &why, &line)) {
		FUZZ_ASSERT(k == NULL && why != NULL);
		return;
	}
	FUZZ_ASSERT(gw_keys_count(k) >= 1 && gw_keys_count(k) <= GW_KEYS_MAX);
	last = memrchr(text, ' ', n);
	last = last ? last + 1 : text;
	eol = memchr(last, '\n', (size_t)(text + n - last));
	snprintf(header, sizeof(header), "Bearer %.*s", (int)((eol ? eol : text + n) - last), last);
	rc = gw_keys_check(k, header, "logs");
	FUZZ_ASSERT(rc == 0 || rc == -EACCES || rc == -EPERM);
	FUZZ_ASSERT(gw_keys_check(k, NULL, "logs") == -EACCES);
	gw_keys_free(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;

	if (size < 1)
		return 0;
	fuzz_quiet();
	text = malloc(size); /* rest + NUL */
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (data[0] & 1)
		check_keys(text, strnlen(text, size - 1));
	else
		check_req(data[0] >> 1, text, size - 1);
	free(text);
	return 0;
}
