/*
 * test_api_wire.c - unit tests for api/wire.c: the star API's router,
 * numbers, listen= addresses and JSON forms.
 *
 * Pins wire.h invariant 1 (hostile paths and numbers are refused with
 * the right status, names by the names.h rules) and 2 (formatters fail
 * rather than truncate), and that every formatted document parses back
 * to what was formatted (the server and the client agree).
 */
#include "config.h"
#include "api/wire.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static void expect_route(const char *method, const char *path, enum api_endpoint ep,
			 const char *bucket, const char *stream)
{
	struct api_route r;

	assert_int_equal(api_route_parse(method, path, &r), 0);
	assert_int_equal(r.ep, ep);
	assert_string_equal(r.bucket, bucket);
	assert_string_equal(r.stream, stream);
}

static void expect_refused(const char *method, const char *path, int status)
{
	struct api_route r;

	assert_int_equal(api_route_parse(method, path, &r), -EINVAL);
	assert_int_equal(r.ep, API_EP_NONE);
	assert_int_equal(r.status, status);
	assert_non_null(r.why);
	assert_string_equal(r.bucket, "");
}

static void test_api_wire_routes(void **state)
{
	(void)state;
	expect_route("POST", "/v1/streams/logs/app/records", API_EP_APPEND, "logs", "app");
	expect_route("GET", "/v1/streams/logs/app.log/bytes", API_EP_READ, "logs", "app.log");
	expect_route("GET", "/v1/streams/logs/a b/end", API_EP_END, "logs", "a b");
	expect_route("GET", "/v1/streams/logs/app/subscribe", API_EP_SUBSCRIBE, "logs", "app");
	expect_route("POST", "/v1/streams/logs/app/handoff", API_EP_HANDOFF, "logs", "app");
	expect_route("GET", "/v1/streams/logs/app/plan", API_EP_PLAN, "logs", "app");
	expect_route("POST", "/v1/streams/logs/app/delete", API_EP_DELETE, "logs", "app");
	expect_route("POST", "/v1/streams/logs/app/trim", API_EP_TRIM, "logs", "app");
	expect_route("POST", "/v1/streams/logs/app/rename", API_EP_RENAME, "logs", "app");
	expect_route("POST", "/v1/nudge", API_EP_NUDGE, "", "");
	expect_route("GET", "/metrics", API_EP_METRICS, "", "");
}

static void test_api_wire_routes_refused(void **state)
{
	char longp[API_PATH_MAX + 16];

	(void)state;
	expect_refused("GET", "/", 404);
	expect_refused("GET", "/v2/streams/a/b/end", 404);
	expect_refused("GET", "/v1/streams/a/b", 404);
	expect_refused("GET", "/v1/streams/a/b/end/more", 404);
	expect_refused("GET", "/v1/streams/a/b/nope", 404);
	expect_refused("GET", "/v1/streams/a/b/records", 405);
	expect_refused("POST", "/v1/streams/a/b/end", 405);
	expect_refused("GET", "/v1/nudge", 405);
	expect_refused("POST", "/v1/streams/a/b/plan", 405);
	expect_refused("POST", "/metrics", 405);
	expect_refused("GET", "/v1/streams//b/end", 400);
	expect_refused("GET", "/v1/streams/a//end", 400);
	expect_refused("GET", "/v1/streams/../b/end", 400);
	expect_refused("GET", "/v1/streams/a/../end", 400);
	expect_refused("GET", "/v1/streams/a/./end", 400);
	expect_refused("GET", "/v1/streams/.follow/b/end", 400);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	memcpy(longp, "/v1/streams/", 12);
	expect_refused("GET", longp, 414);
}

static void test_api_wire_numbers(void **state)
{
	uint64_t v = 1;

	(void)state;
	assert_int_equal(api_parse_u64(NULL, 42, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(api_parse_u64("0", 1, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(api_parse_u64("18446744073709551615", 0, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(api_parse_u64("18446744073709551616", 0, &v), -EINVAL);
	assert_int_equal(api_parse_u64("", 0, &v), -EINVAL);
	assert_int_equal(api_parse_u64("-1", 0, &v), -EINVAL);
	assert_int_equal(api_parse_u64("+1", 0, &v), -EINVAL);
	assert_int_equal(api_parse_u64(" 1", 0, &v), -EINVAL);
	assert_int_equal(api_parse_u64("1 ", 0, &v), -EINVAL);
	assert_int_equal(api_parse_u64("0x10", 0, &v), -EINVAL);
	assert_int_equal(api_parse_u64("000000000000000000001", 0, &v), -EINVAL);
	/* X-Nova-Stream-Id: absent is 0 (by name alone); a positive decimal
	 * id; 0, signs, spaces and overflow are malformed. */
	v = 9;
	assert_int_equal(api_parse_stream_id(NULL, &v), 0);
	assert_true(v == 0);
	assert_int_equal(api_parse_stream_id("42", &v), 0);
	assert_true(v == 42);
	assert_int_equal(api_parse_stream_id("18446744073709551615", &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(api_parse_stream_id("0", &v), -EINVAL);
	assert_int_equal(api_parse_stream_id("", &v), -EINVAL);
	assert_int_equal(api_parse_stream_id("-4", &v), -EINVAL);
	assert_int_equal(api_parse_stream_id("4 ", &v), -EINVAL);
	assert_int_equal(api_parse_stream_id("x4", &v), -EINVAL);
	assert_int_equal(api_parse_stream_id("18446744073709551616", &v), -EINVAL);
	assert_true(v == 0);
}

static void test_api_wire_listen(void **state)
{
	char host[64];
	unsigned port = 0;

	(void)state;
	assert_int_equal(api_parse_listen("127.0.0.1:8080", host, sizeof(host), &port), 0);
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 8080);
	assert_int_equal(api_parse_listen("[::1]:9", host, sizeof(host), &port), 0);
	assert_string_equal(host, "::1");
	assert_int_equal(port, 9);
	assert_int_equal(api_parse_listen("star-a.example:65535", host, sizeof(host), &port), 0);
	assert_int_equal(api_parse_listen("h:0", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(api_parse_listen("h:65536", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(api_parse_listen("h", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(api_parse_listen(":80", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(api_parse_listen("::1:80", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(api_parse_listen("[]:80", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(api_parse_listen("h:80x", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(api_parse_listen("averyveryverylonghostname:1", host, 8, &port), -EINVAL);
}

static void test_api_wire_not_owner(void **state)
{
	struct lease_holder h = { .epoch = 12 }, back;
	char doc[API_LINE_MAX], tiny[16];

	(void)state;
	snprintf(h.star, sizeof(h.star), "star-b");
	snprintf(h.addr, sizeof(h.addr), "10.0.0.2:7000");
	assert_int_equal(api_fmt_not_owner(&h, doc, sizeof(doc)), 0);
	assert_string_equal(doc, "{\"error\":\"not_owner\",\"leader\":\"star-b\","
				 "\"address\":\"10.0.0.2:7000\",\"epoch\":12}");
	assert_int_equal(api_parse_not_owner(doc, strlen(doc), &back), 0);
	assert_string_equal(back.star, "star-b");
	assert_string_equal(back.addr, "10.0.0.2:7000");
	assert_int_equal(back.epoch, 12);
	assert_int_equal(api_fmt_not_owner(&h, tiny, sizeof(tiny)), -ENOSPC);
	/* Not a NOT_OWNER: another error, a field missing or wrong. */
	static const char *const bad[] = {
		"{\"error\":\"not_found\"}",
		"{\"error\":\"not_owner\",\"leader\":\"a\",\"address\":\"x:1\"}",
		"{\"error\":\"not_owner\",\"leader\":\"a\",\"address\":\"x:1\",\"epoch\":0}",
		"{\"error\":\"not_owner\",\"leader\":\"a\",\"address\":\"x:1\",\"epoch\":-3}",
		"{\"error\":\"not_owner\",\"leader\":\"a\",\"address\":\"x:1\",\"epoch\":\"3\"}",
		"{\"error\":\"not_owner\",\"leader\":\"a\",\"address\":7,\"epoch\":3}",
		"{\"error\":\"not_owner\",\"leader\":\"a\",\"leader\":\"b\",\"address\":\"x\","
		"\"epoch\":3}",
		"{\"error\":\"not_owner\",\"leader\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
		"\"address\":\"x:1\",\"epoch\":3}",
		"[1]", "", "{",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(api_parse_not_owner(bad[i], strlen(bad[i]), &back), -EINVAL);
}

static void test_api_wire_frames(void **state)
{
	struct api_frame f;
	const char *l;

	(void)state;
	l = "{\"offset\":5,\"length\":3}";
	assert_int_equal(api_parse_frame(l, strlen(l), &f), 0);
	assert_int_equal(f.kind, API_FRAME_DATA);
	assert_int_equal(f.offset, 5);
	assert_int_equal(f.length, 3);
	l = "{\"heartbeat\":true,\"end\":77}";
	assert_int_equal(api_parse_frame(l, strlen(l), &f), 0);
	assert_int_equal(f.kind, API_FRAME_HEARTBEAT);
	assert_int_equal(f.end, 77);
	l = "{\"error\":\"not_owner\",\"leader\":\"s\",\"address\":\"a:1\",\"epoch\":4}";
	assert_int_equal(api_parse_frame(l, strlen(l), &f), 0);
	assert_int_equal(f.kind, API_FRAME_ERROR);
	assert_string_equal(f.error, "not_owner");
	assert_int_equal(f.holder.epoch, 4);
	l = "{\"error\":\"shutting_down\"}";
	assert_int_equal(api_parse_frame(l, strlen(l), &f), 0);
	assert_string_equal(f.error, "shutting_down");
	l = "{\"offset\":5,\"length\":1048577}"; /* over API_READ_MAX */
	assert_int_equal(api_parse_frame(l, strlen(l), &f), -EINVAL);
	l = "{\"offset\":5}";
	assert_int_equal(api_parse_frame(l, strlen(l), &f), -EINVAL);
	l = "{\"error\":\"not_owner\"}"; /* no holder */
	assert_int_equal(api_parse_frame(l, strlen(l), &f), -EINVAL);
	l = "{\"error\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}";
	assert_int_equal(api_parse_frame(l, strlen(l), &f), -EINVAL);
	assert_int_equal(api_parse_frame("42", 2, &f), -EINVAL);
}

static void test_api_wire_paths(void **state)
{
	char buf[API_PATH_MAX], small[24];
	struct api_route r;

	(void)state;
	assert_int_equal(api_fmt_path(API_EP_APPEND, "logs", "a b/%?", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/v1/streams/logs/a%20b%2F%25%3F/records");
	assert_int_equal(api_fmt_path(API_EP_SUBSCRIBE, "b", "s", buf, sizeof(buf)), 0);
	assert_int_equal(api_route_parse("GET", buf, &r), 0);
	assert_int_equal(r.ep, API_EP_SUBSCRIBE);
	assert_int_equal(api_fmt_path(API_EP_READ, "logs", "stream", small, sizeof(small)),
			 -ENOSPC);
	assert_int_equal(api_fmt_path(API_EP_METRICS, "b", "s", buf, sizeof(buf)), -EINVAL);
	/* The rename route: the target in the path, the source in ?from=,
	 * escaped as a name; the longest name fits API_NAME_QUERY_MAX. */
	assert_int_equal(api_fmt_path(API_EP_RENAME, "b", "s", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/v1/streams/b/s/rename");
	assert_int_equal(api_route_parse("POST", buf, &r), 0);
	assert_int_equal(r.ep, API_EP_RENAME);
	assert_int_equal(api_route_parse("GET", buf, &r), -EINVAL);
	assert_int_equal(r.status, 405);
	{
		char q[API_NAME_QUERY_MAX], name[NV_STREAM_NAME_MAX + 1];

		assert_int_equal(api_fmt_query("from", "a b&c=d", q, sizeof(q)), 0);
		assert_string_equal(q, "?from=a%20b%26c%3Dd");
		memset(name, '&', NV_STREAM_NAME_MAX);
		name[NV_STREAM_NAME_MAX] = '\0';
		assert_int_equal(api_fmt_query("from", name, q, sizeof(q)), 0);
		assert_int_equal(strlen(q), 6 + 3 * NV_STREAM_NAME_MAX);
		assert_int_equal(api_fmt_query("from", "abc", small, 8), -ENOSPC);
	}
}

static void test_api_wire_documents(void **state)
{
	char star[40], doc[API_LINE_MAX];
	uint64_t v = 0;
	const char *d;

	(void)state;
	d = "{\"to\":\"star-2\"}";
	assert_int_equal(api_parse_star_doc(d, strlen(d), "to", star, sizeof(star)), 0);
	assert_string_equal(star, "star-2");
	d = "{\"to\":\"Star\"}";
	assert_int_equal(api_parse_star_doc(d, strlen(d), "to", star, sizeof(star)), -EINVAL);
	d = "{\"to\":\"\"}";
	assert_int_equal(api_parse_star_doc(d, strlen(d), "to", star, sizeof(star)), -EINVAL);
	d = "{\"star\":\"a\"}";
	assert_int_equal(api_parse_star_doc(d, strlen(d), "to", star, sizeof(star)), -EINVAL);
	assert_int_equal(api_parse_star_doc(NULL, 0, "to", star, sizeof(star)), -EINVAL);
	d = "{\"seq\":3,\"end\":{\"seq\":4,\"byte\":10}}";
	assert_int_equal(api_parse_reply_u64(d, strlen(d), "seq", NULL, &v), 0);
	assert_int_equal(v, 3);
	assert_int_equal(api_parse_reply_u64(d, strlen(d), "end", "byte", &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(api_parse_reply_u64(d, strlen(d), "end", "nope", &v), -EINVAL);
	assert_int_equal(api_parse_reply_u64(d, strlen(d), "seq", "x", &v), -EINVAL);
	assert_int_equal(api_fmt_error("bad_request", "a \"quoted\"\n detail", doc, sizeof(doc)),
			 0);
	assert_string_equal(doc, "{\"error\":\"bad_request\",\"detail\":\"a \\\"quoted\\\"\\n detail\"}");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_api_wire_routes),
		cmocka_unit_test(test_api_wire_routes_refused),
		cmocka_unit_test(test_api_wire_numbers),
		cmocka_unit_test(test_api_wire_listen),
		cmocka_unit_test(test_api_wire_not_owner),
		cmocka_unit_test(test_api_wire_frames),
		cmocka_unit_test(test_api_wire_paths),
		cmocka_unit_test(test_api_wire_documents),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
