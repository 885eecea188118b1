/*
 * test_gw.c - unit tests for the Gateway's pure parts: gw/req.c (paths,
 * positions, the two response caps, Last-Event-ID), gw/keys.c (the keys
 * file, 401 against 403) and gw/pool.c (the byte budget); and the plan
 * source (gw/plan.c) over a recording star source and a scripted star
 * (a tiny libmicrohttpd server answering every plan with no entries).
 *
 * Pins gw/req.h invariants 1 and 2, gw/keys.h invariant 1 and the file
 * rules, gw/pool.h invariant 1, gw/plan.c invariant 1 (a position at or
 * past the residual goes to the star source, at exactly that position;
 * an unreachable star passes the plan to the next), invariant 3 (a raw
 * plan without a bucket goes to the star source at the op's own position,
 * counted) and its ownership of the star source (freed with it; the
 * caller's on a refused config).
 */
#include "config.h"
#include "api/plan.h"
#include "gw/keys.h"
#include "gw/pool.h"
#include "gw/req.h"
#include "gw/source.h"
#include "src/base/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static int parse(const char *method, const char *path, const struct gw_query *q,
		 struct gw_req *r)
{
	static const struct gw_query none;

	return gw_req_parse(method, path, q ? q : &none, r);
}

static void test_gw_req_paths(void **state)
{
	struct gw_req r;

	(void)state;
	assert_int_equal(parse("GET", "/v1/streams/logs/app/records", NULL, &r), 0);
	assert_int_equal(r.op, GW_OP_RECORDS);
	assert_string_equal(r.bucket, "logs");
	assert_string_equal(r.stream, "app");
	assert_true(r.by_seq);
	assert_int_equal(r.pos, 0);
	assert_int_equal(r.limit, GW_LIMIT_MAX);
	assert_int_equal(r.max_bytes, GW_BYTES_MAX);
	assert_int_equal(parse("GET", "/v1/streams/logs/a.b c/events", NULL, &r), 0);
	assert_int_equal(r.op, GW_OP_EVENTS);
	assert_string_equal(r.stream, "a.b c");
	assert_int_equal(parse("GET", "/v1/streams/logs/app/end", NULL, &r), 0);
	assert_int_equal(r.op, GW_OP_END);
	assert_int_equal(parse("GET", "/healthz", NULL, &r), 0);
	assert_int_equal(r.op, GW_OP_HEALTH);

	assert_int_equal(parse("POST", "/v1/streams/logs/app/records", NULL, &r), -EINVAL);
	assert_int_equal(r.status, 405);
	assert_int_equal(r.op, GW_OP_NONE);
	assert_int_equal(parse("GET", "/v1/streams/logs/app/append", NULL, &r), -EINVAL);
	assert_int_equal(r.status, 404);
	assert_int_equal(parse("GET", "/v1/streams/logs/app", NULL, &r), -EINVAL);
	assert_int_equal(r.status, 404);
	assert_int_equal(parse("GET", "/v1/streams/logs/a/b/records", NULL, &r), -EINVAL);
	assert_int_equal(r.status, 404);
	assert_int_equal(parse("GET", "/v1/streams/Bad*/app/records", NULL, &r), -EINVAL);
	assert_int_equal(r.status, 400);
	assert_string_equal(r.bucket, "");
	assert_int_equal(parse("GET", "/v1/streams/logs/../records", NULL, &r), -EINVAL);
	assert_int_equal(r.status, 400);
	assert_int_equal(parse("GET", "/v1/streams//app/records", NULL, &r), -EINVAL);
	assert_int_equal(r.status, 400);
	assert_int_equal(parse("GET", "/metrics", NULL, &r), -EINVAL);
	assert_int_equal(r.status, 404);
	{
		char path[GW_PATH_MAX + 64];

		memset(path, 'a', sizeof(path) - 1);
		path[sizeof(path) - 1] = '\0';
		memcpy(path, "/v1/streams/", 12);
		assert_int_equal(parse("GET", path, NULL, &r), -EINVAL);
		assert_int_equal(r.status, 414);
	}
}

static void test_gw_req_positions_and_caps(void **state)
{
	struct gw_req r;
	struct gw_query q;

	(void)state;
	q = (struct gw_query){ .seq = "42", .limit = "5", .max_bytes = "100" };
	assert_int_equal(parse("GET", "/v1/streams/l/s/records", &q, &r), 0);
	assert_true(r.by_seq);
	assert_int_equal(r.pos, 42);
	assert_int_equal(r.limit, 5);
	assert_int_equal(r.max_bytes, 100);
	/* Larger asks are the caps (only less can be asked for). */
	q = (struct gw_query){ .offset = "7", .limit = "1000000", .max_bytes = "99999999999" };
	assert_int_equal(parse("GET", "/v1/streams/l/s/records", &q, &r), 0);
	assert_false(r.by_seq);
	assert_int_equal(r.pos, 7);
	assert_int_equal(r.limit, GW_LIMIT_MAX);
	assert_int_equal(r.max_bytes, GW_BYTES_MAX);
	/* Hostile numbers. */
	static const char *const bad[] = { "", "-1", "+1", " 1", "1 ", "0x10", "1e3", "abc",
					   "184467440737095516160", "18446744073709551616" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		q = (struct gw_query){ .seq = bad[i] };
		assert_int_equal(parse("GET", "/v1/streams/l/s/records", &q, &r), -EINVAL);
		assert_int_equal(r.status, 400);
		q = (struct gw_query){ .limit = bad[i] };
		assert_int_equal(parse("GET", "/v1/streams/l/s/records", &q, &r), -EINVAL);
	}
	q = (struct gw_query){ .limit = "0" };
	assert_int_equal(parse("GET", "/v1/streams/l/s/records", &q, &r), -EINVAL);
	q = (struct gw_query){ .max_bytes = "0" };
	assert_int_equal(parse("GET", "/v1/streams/l/s/records", &q, &r), -EINVAL);
	q = (struct gw_query){ .seq = "1", .offset = "1" };
	assert_int_equal(parse("GET", "/v1/streams/l/s/records", &q, &r), -EINVAL);
	/* Last-Event-ID wins for events, is ignored elsewhere, must be a number. */
	q = (struct gw_query){ .seq = "3", .last_event_id = "1234" };
	assert_int_equal(parse("GET", "/v1/streams/l/s/events", &q, &r), 0);
	assert_true(r.resume);
	assert_false(r.by_seq);
	assert_int_equal(r.pos, 1234);
	assert_int_equal(parse("GET", "/v1/streams/l/s/records", &q, &r), 0);
	assert_false(r.resume);
	assert_int_equal(r.pos, 3);
	q = (struct gw_query){ .last_event_id = "12abc" };
	assert_int_equal(parse("GET", "/v1/streams/l/s/events", &q, &r), -EINVAL);
	assert_int_equal(r.status, 400);
	q = (struct gw_query){ .last_event_id = "" };
	assert_int_equal(parse("GET", "/v1/streams/l/s/events", &q, &r), -EINVAL);
}

#define K1 "0123456789abcdef-logs"
#define K2 "fedcba9876543210-all"

static void test_gw_keys(void **state)
{
	const char *text = "# comment\n\nlogs " K1 "\r\n* " K2 "\nother " K1 "   \n";
	struct gw_keys *k = NULL;
	const char *why = NULL;
	unsigned line = 0;

	(void)state;
	assert_int_equal(gw_keys_parse(text, strlen(text), &k, &why, &line), 0);
	assert_int_equal(gw_keys_count(k), 3);
	assert_int_equal(gw_keys_check(k, "Bearer " K1, "logs"), 0);
	assert_int_equal(gw_keys_check(k, "Bearer " K1, "other"), 0);
	assert_int_equal(gw_keys_check(k, "Bearer " K1, "third"), -EPERM);
	assert_int_equal(gw_keys_check(k, "Bearer " K2, "third"), 0);
	assert_int_equal(gw_keys_check(k, NULL, "logs"), -EACCES);
	assert_int_equal(gw_keys_check(k, K1, "logs"), -EACCES);
	assert_int_equal(gw_keys_check(k, "Bearer " K1 "x", "logs"), -EACCES);
	assert_int_equal(gw_keys_check(k, "Bearer 0123456789abcdef-log", "logs"), -EACCES);
	assert_int_equal(gw_keys_check(k, "Basic " K1, "logs"), -EACCES);
	gw_keys_free(k);

	static const struct { const char *text; unsigned line; } bad[] = {
		{ "logs short\n", 1 },
		{ "logs\n", 1 },
		{ "# only a comment\n", 0 },
		{ "", 0 },
		{ "logs " K1 "\nBad*Name " K2 "\n", 2 },
		{ "logs " K1 " trailing-word\n", 1 },
		{ "logs " K1 "\x01\n", 1 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		k = NULL;
		assert_int_equal(gw_keys_parse(bad[i].text, strlen(bad[i].text), &k, &why, &line),
				 -EINVAL);
		assert_null(k);
		assert_int_equal(line, bad[i].line);
	}
}

static void test_gw_keys_file_mode(void **state)
{
	char path[] = "/tmp/test_gw_keys.XXXXXX";
	struct gw_keys *k = NULL;
	const char *why = NULL;
	unsigned line;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "logs " K1 "\n", strlen(K1) + 6), (ssize_t)strlen(K1) + 6);
	close(fd);
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(gw_keys_load(path, &k, &why, &line), -EPERM);
	assert_non_null(strstr(why, "chmod 600"));
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(gw_keys_load(path, &k, &why, &line), 0);
	assert_int_equal(gw_keys_check(k, "Bearer " K1, "logs"), 0);
	gw_keys_free(k);
	unlink(path);
	assert_true(gw_keys_load(path, &k, &why, &line) < 0);
}

static void test_gw_pool(void **state)
{
	struct gw_pool *p = gw_pool_new("test", 100);

	(void)state;
	assert_non_null(p);
	assert_int_equal(gw_pool_take(p, 101, 0), -E2BIG);
	assert_int_equal(gw_pool_take(p, 60, 0), 0);
	assert_int_equal(gw_pool_take(p, 50, 1000000), -EAGAIN); /* 1 ms: not free */
	assert_int_equal(gw_pool_used(p), 60);
	assert_int_equal(gw_pool_take(p, 40, 0), 0);
	assert_int_equal(gw_pool_used(p), 100);
	gw_pool_give(p, 60);
	assert_int_equal(gw_pool_take(p, 50, 0), 0);
	gw_pool_give(p, 50);
	gw_pool_give(p, 40);
	assert_int_equal(gw_pool_used(p), 0);
	assert_int_equal(gw_pool_cap(p), 100);
	gw_pool_free(p);
}

/* ------------------------------------------------------------ the plan source */

struct rec_src {
	struct gw_source src; /* first */
	int locates, reads, follows, bounds;
	uint64_t last;
	bool freed;
};

static int rec_locate(struct gw_source *src, const char *b, const char *n, bool by_seq,
		      uint64_t pos, uint64_t *seq, uint64_t *byte)
{
	struct rec_src *r = (struct rec_src *)(void *)src;

	(void)b, (void)n, (void)by_seq;
	r->locates++;
	r->last = pos;
	*seq = pos;
	*byte = pos * 10;
	return 0;
}

static int rec_read(struct gw_source *src, const char *b, const char *n, uint64_t off,
		    void *dst, size_t len, size_t *got)
{
	struct rec_src *r = (struct rec_src *)(void *)src;

	(void)b, (void)n;
	r->reads++;
	r->last = off;
	memset(dst, 'x', len);
	*got = len;
	return 0;
}

static int rec_follow(struct gw_source *src, const char *b, const char *n, uint64_t off,
		      api_sub_fn fn, void *arg)
{
	struct rec_src *r = (struct rec_src *)(void *)src;

	(void)b, (void)n, (void)fn, (void)arg;
	r->follows++;
	r->last = off;
	return -ENOENT;
}

static int rec_bounds(struct gw_source *src, const char *b, const char *n, struct api_bounds *bd)
{
	struct rec_src *r = (struct rec_src *)(void *)src;

	(void)b, (void)n;
	r->bounds++;
	memset(bd, 0, sizeof(*bd));
	return 0;
}

static void rec_free(struct gw_source *src)
{
	((struct rec_src *)(void *)src)->freed = true;
}

static const struct gw_source_ops rec_ops = {
	.locate = rec_locate, .read = rec_read, .follow = rec_follow, .bounds = rec_bounds,
	.free = rec_free,
};

static char *plan_doc; /* every plan the scripted star answers */
static int plans_asked;

static enum MHD_Result on_plan(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_len, void **con_cls)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_len;
	(void)con_cls;
	__atomic_add_fetch(&plans_asked, 1, __ATOMIC_SEQ_CST);
	r = MHD_create_response_from_buffer(strlen(plan_doc), plan_doc, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ret;
}

/* A client with a cluster secret, and the scripted star answering every
 * plan with plan_doc (set before the first plan is asked). */
struct plan_fx {
	char dir[32], path[64], live[32];
	struct api_secret *sec;
	struct api_client *cl;
	struct MHD_Daemon *d;
	struct gw_pool *fetch, *footers;
};

static void plan_fx_up(struct plan_fx *fx)
{
	struct api_client_cfg cc = { 0 };
	const char *why;
	int fd;

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_gw_plan.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/secret", fx->dir);
	fd = open(fx->path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef0123\n", 21), 21);
	close(fd);
	assert_int_equal(api_secret_load(fx->path, &fx->sec, &why), 0);
	cc.secret = fx->sec;
	assert_int_equal(api_client_new(&cc, &fx->cl), 0);
	fx->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_plan, NULL,
				 MHD_OPTION_END);
	assert_non_null(fx->d);
	snprintf(fx->live, sizeof(fx->live), "127.0.0.1:%u",
		 MHD_get_daemon_info(fx->d, MHD_DAEMON_INFO_BIND_PORT)->port);
	fx->fetch = gw_pool_new("f", 1 << 20);
	fx->footers = gw_pool_new("t", 1 << 20);
	assert_non_null(fx->fetch);
	assert_non_null(fx->footers);
	__atomic_store_n(&plans_asked, 0, __ATOMIC_SEQ_CST);
}

static void plan_fx_down(struct plan_fx *fx)
{
	MHD_stop_daemon(fx->d);
	free(plan_doc);
	plan_doc = NULL;
	api_client_free(fx->cl);
	api_secret_free(fx->sec);
	gw_pool_free(fx->fetch);
	gw_pool_free(fx->footers);
	unlink(fx->path);
	rmdir(fx->dir);
}

static void test_gw_plan_source_residual(void **state)
{
	char longaddr[LEASE_ADDR_MAX + 8], buf[10];
	struct rec_src rec = { .src.ops = &rec_ops };
	struct read_plan *p = calloc(1, sizeof(*p));
	struct gw_source *src = NULL;
	struct gw_source_stats ss;
	struct api_bounds bd;
	struct plan_fx fx;
	const char *addrs[2] = { "127.0.0.1:1", fx.live };
	uint64_t seq, byte;
	size_t got = 0;

	(void)state;
	assert_non_null(p);
	plan_fx_up(&fx);
	p->stream_id = 1;
	p->residual_seq = 5;
	p->residual_byte = 100;
	p->expires_ns = nv_now_wall_ns() + 60 * NV_NS_PER_S;
	p->ttl_s = 60;
	plan_doc = api_plan_format(p);
	assert_non_null(plan_doc);

	struct gw_plan_cfg pc = { .stars = &rec.src, .cl = fx.cl, .addrs = addrs, .naddrs = 2,
				  .fetch = fx.fetch, .footers = fx.footers };
	/* Refused configs leave the star source with the caller. */
	pc.naddrs = 0;
	assert_int_equal(gw_source_plan(&pc, &src), -EINVAL);
	memset(longaddr, '1', sizeof(longaddr) - 1);
	longaddr[sizeof(longaddr) - 1] = '\0';
	addrs[0] = longaddr;
	pc.naddrs = 2;
	assert_int_equal(gw_source_plan(&pc, &src), -EINVAL);
	assert_false(rec.freed);
	addrs[0] = "127.0.0.1:1"; /* nobody listens: the plan passes to the live star */
	assert_int_equal(gw_source_plan(&pc, &src), 0);

	/* Every position here is at or past the residual: the star source's. */
	assert_int_equal(gw_locate(src, "b", "s", true, 7, &seq, &byte), 0);
	assert_int_equal(rec.locates, 1);
	assert_int_equal(rec.last, 7);
	assert_int_equal(seq, 7);
	assert_int_equal(gw_locate(src, "b", "s", false, 100, &seq, &byte), 0);
	assert_int_equal(rec.locates, 2);
	assert_int_equal(rec.last, 100);
	assert_int_equal(gw_read(src, "b", "s", 120, buf, sizeof(buf), &got), 0);
	assert_int_equal(rec.reads, 1);
	assert_int_equal(rec.last, 120);
	assert_int_equal(got, sizeof(buf));
	assert_int_equal(gw_follow(src, "b", "s", 130, NULL, NULL), -ENOENT);
	assert_int_equal(rec.follows, 1);
	assert_int_equal(rec.last, 130);
	assert_int_equal(gw_bounds(src, "b", "s", &bd), 0);
	assert_int_equal(rec.bounds, 1);
	assert_int_equal(__atomic_load_n(&plans_asked, __ATOMIC_SEQ_CST), 4); /* not bounds */
	gw_source_stats(src, &ss);
	assert_int_equal(ss.raw_proxied, 0);
	assert_int_equal(gw_pool_used(fx.fetch), 0);
	assert_int_equal(gw_pool_used(fx.footers), 0);
	gw_source_free(src);
	assert_true(rec.freed);

	free(p);
	plan_fx_down(&fx);
}

/* Invariant 3: a raw plan that names settled records below the position,
 * and no bucket of the Gateway's own: every op goes to the star source
 * at exactly its own position (nothing is read by plan, nothing taken
 * from the pools), is counted in raw_proxied, and none is an error. */
static void test_gw_plan_source_raw_proxied(void **state)
{
	struct rec_src rec = { .src.ops = &rec_ops };
	struct read_plan *p = calloc(1, sizeof(*p));
	struct gw_source *src = NULL;
	struct gw_source_stats ss;
	struct plan_fx fx;
	const char *addrs[1] = { fx.live };
	uint64_t seq, byte;
	size_t got = 0;
	char buf[10];

	(void)state;
	assert_non_null(p);
	plan_fx_up(&fx);
	p->stream_id = 1;
	p->vending = PLAN_RAW;
	p->n = 1;
	snprintf(p->e[0].key, sizeof(p->e[0].key), "streams/b/1/1/0");
	p->e[0].epoch = 1;
	p->e[0].first_seq = 0;
	p->e[0].end_seq = 5;
	p->e[0].first_byte = 0;
	p->e[0].end_byte = 100;
	p->e[0].footer_off = 100;
	p->e[0].footer_len = 64;
	p->residual_seq = 5;
	p->residual_byte = 100;
	p->expires_ns = nv_now_wall_ns() + 60 * NV_NS_PER_S;
	p->ttl_s = 60;
	plan_doc = api_plan_format(p);
	assert_non_null(plan_doc);

	/* No bucket, no caches: every op asks the star for the plan. */
	struct gw_plan_cfg pc = { .stars = &rec.src, .cl = fx.cl, .addrs = addrs, .naddrs = 1,
				  .fetch = fx.fetch, .footers = fx.footers };
	assert_int_equal(gw_source_plan(&pc, &src), 0);
	assert_int_equal(gw_locate(src, "b", "s", true, 2, &seq, &byte), 0);
	assert_int_equal(rec.locates, 1);
	assert_int_equal(rec.last, 2);
	assert_int_equal(seq, 2);
	assert_int_equal(gw_locate(src, "b", "s", false, 30, &seq, &byte), 0);
	assert_int_equal(rec.locates, 2);
	assert_int_equal(rec.last, 30);
	assert_int_equal(gw_read(src, "b", "s", 40, buf, sizeof(buf), &got), 0);
	assert_int_equal(rec.reads, 1);
	assert_int_equal(rec.last, 40);
	assert_int_equal(got, sizeof(buf));
	assert_memory_equal(buf, "xxxxxxxxxx", sizeof(buf));
	assert_int_equal(gw_follow(src, "b", "s", 50, NULL, NULL), -ENOENT);
	assert_int_equal(rec.follows, 1);
	assert_int_equal(rec.last, 50);
	assert_int_equal(__atomic_load_n(&plans_asked, __ATOMIC_SEQ_CST), 4);
	gw_source_stats(src, &ss);
	assert_int_equal(ss.raw_proxied, 4);
	assert_int_equal(gw_pool_used(fx.fetch), 0);
	assert_int_equal(gw_pool_used(fx.footers), 0);
	gw_source_free(src);
	assert_true(rec.freed);

	/* The star source has no counters. */
	gw_source_stats(&rec.src, &ss);
	assert_int_equal(ss.raw_proxied, 0);

	free(p);
	plan_fx_down(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gw_req_paths),
		cmocka_unit_test(test_gw_req_positions_and_caps),
		cmocka_unit_test(test_gw_keys),
		cmocka_unit_test(test_gw_keys_file_mode),
		cmocka_unit_test(test_gw_pool),
		cmocka_unit_test(test_gw_plan_source_residual),
		cmocka_unit_test(test_gw_plan_source_raw_proxied),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
