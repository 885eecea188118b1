/*
 * test_api_vend.c - unit tests for the plan consumer (api/vend.c)
 * against a scripted star (a tiny libmicrohttpd server that answers the
 * plan route with prepared plans and, for signed plans, serves object
 * ranges like a presigned-URL endpoint) and a directory store holding
 * real bundle objects.
 *
 * Pins vend.h: a missing object (404 / -ENOENT) re-plans from the next
 * record wanted, before any record or midway (the second plan's query is
 * the position), and no record is handed on twice; the cursor continues
 * a capped plan; expired plans re-plan and, without progress, end in
 * -ESTALE; a corrupt chunk is -EBADMSG with nothing handed on from it; a
 * footer that does not hold the plan's records is -EBADMSG; starts by
 * seq and by byte inside an object; fn's value stops the read; a raw
 * plan without a bucket is -EOPNOTSUPP; signed fetches send a Range and
 * re-plan on 404; through a cache tier (a scripted proxy) signed fetches
 * carry the token and the star's Host, and every bad proxy answer (5xx,
 * a dead port, a refused token, a misplaced range, a hedge) falls back
 * to the URL with the same records, a 5xx or dead port marking the proxy
 * down, the others not; with cfg.keep, a read inside a kept plan asks no
 * star and fetches no kept footer (a kept window is verified again), and
 * a kept plan met stale (a 404, its expiry) is dropped and re-planned at
 * the star from the position.
 */
#include "config.h"
#include "api/client.h"
#include "api/plan.h"
#include "api/vend.h"
#include "engine/bundle.h"
#include "engine/store/store.h"
#include "engine/store/tier.h"
#include "src/base/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define SECRET "0123456789abcdef-vend-secret"
#define SID 7
#define KEY_A "streams/b/7/0000000000000001/0000000000000000"
#define KEY_B "streams/b/7/0000000000000001/0000000000000003"
#define KEY_GONE "streams/b/7/0000000000000001/0000000000000000~9"
#define KEY_BAD "streams/b/7/0000000000000001/0000000000000000~8"
#define NPLANS 16

static const char *bodies[6] = { "zero", "one!", "", "three", "4", "five-five" };

struct object {
	const char *key;
	uint64_t first_seq, end_seq, first_byte, end_byte, footer_off;
	uint32_t footer_len;
};
static struct object obj_a, obj_b;

/* The scripted star. */
static struct {
	struct MHD_Daemon *d;
	unsigned port;
	pthread_mutex_t lock;
	char *plans[NPLANS]; /* answered in turn; the last one repeats */
	int nplans, served;
	char queries[NPLANS][64]; /* "seq=N" or "offset=N" of each plan request */
	int range_gets;
	int conns; /* connections opened to it (test_vend_handles_reuse) */
} fake;

/* A scripted caching proxy in front of the scripted star's /obj/ ranges:
 * it serves them from the bucket itself (never asking the star) when the
 * request carries the token and the star's own Host, with
 * a Content-Range "bytes A-B/" with an unknown total; its mode scripts a
 * bad answer (test_vend_tier_*). */
enum px_mode { PX_CLEAN, PX_5XX, PX_MISPLACED, PX_SLOW_ONCE };

static struct {
	struct MHD_Daemon *d;
	unsigned port;
	pthread_mutex_t lock;
	enum px_mode mode;
	int reqs, refused;
} px;

#define PX_TOKEN "proxy-token-0123456789"

static struct api_secret *secret;
static struct api_client *cl;
static struct store *bucket;
static char dir[64], secret_path[80];

/* ------------------------------------------------------------ objects */

/* Encode records [first, end) of SID into key; describe it in *o. */
static void make_object(const char *key, uint64_t first, uint64_t end, struct object *o)
{
	uint8_t frames[1024];
	size_t n = 0;
	uint64_t byte = 0;
	struct bundle_out out;
	struct bundle_enc_opts opts = { .chunk_target = 8, .zstd_level = 0 };

	for (uint64_t s = 0; s < first; s++)
		byte += strlen(bodies[s]);
	for (uint64_t s = first; s < end; s++) {
		uint32_t len = (uint32_t)strlen(bodies[s]);

		bundle_frame_hdr(frames + n, len, 1000 + s);
		memcpy(frames + n + BUNDLE_FRAME_HDR, bodies[s], len);
		n += BUNDLE_FRAME_HDR + len;
	}
	struct bundle_run run = { .stream_id = SID, .first_seq = first, .first_byte = byte,
				  .frames = frames, .frames_len = n, .nrec = (uint32_t)(end - first) };
	assert_int_equal(bundle_encode(&run, 1, &opts, &out), 0);
	assert_int_equal(out.nentries, end - first); /* one chunk per record */
	assert_int_equal(store_put(bucket, key, out.iov, out.iovcnt, 0), 0);
	o->key = key;
	o->first_seq = first;
	o->end_seq = end;
	o->first_byte = byte;
	o->end_byte = byte;
	for (uint64_t s = first; s < end; s++)
		o->end_byte += strlen(bodies[s]);
	o->footer_off = out.footer_off;
	o->footer_len = out.footer_len;
	bundle_out_free(&out);
}

/* ------------------------------------------------------------ the scripted star */

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const void *body,
			      size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
								 MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret = MHD_queue_response(c, status, r);

	MHD_destroy_response(r);
	return ret;
}

/* GET /obj/KEY with "Range: bytes=A-B" from the bucket: 206, or 404. */
static enum MHD_Result serve_range(struct MHD_Connection *c, const char *key)
{
	const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
	unsigned long long a, b;
	uint8_t buf[4096];
	size_t got = 0;

	if (!range || sscanf(range, "bytes=%llu-%llu", &a, &b) != 2 || b < a || b - a >= sizeof(buf))
		return answer(c, 400, "", 0);
	pthread_mutex_lock(&fake.lock);
	fake.range_gets++;
	pthread_mutex_unlock(&fake.lock);
	if (store_get_range(bucket, key, a, (size_t)(b - a + 1), buf, &got))
		return answer(c, 404, "", 0);
	return answer(c, 206, buf, got);
}

static void on_conn(void *cls, struct MHD_Connection *c, void **socket_context,
		    enum MHD_ConnectionNotificationCode code)
{
	(void)cls;
	(void)c;
	(void)socket_context;
	if (code != MHD_CONNECTION_NOTIFY_STARTED)
		return;
	pthread_mutex_lock(&fake.lock);
	fake.conns++;
	pthread_mutex_unlock(&fake.lock);
}

static enum MHD_Result on_req(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *size, void **con_cls)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	const char *seq = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seq");
	const char *off = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
	char *doc;

	(void)cls;
	(void)method;
	(void)version;
	(void)data;
	if (!*con_cls) {
		*con_cls = &fake;
		return MHD_YES;
	}
	*size = 0;
	if (!strncmp(url, "/obj/", 5))
		return serve_range(c, url + 5); /* presigned: no credential */
	if (!auth || strcmp(auth, "Bearer " SECRET))
		return answer(c, 401, "{}", 2);
	pthread_mutex_lock(&fake.lock);
	assert_true(fake.nplans > 0);
	doc = fake.plans[fake.served < fake.nplans ? fake.served : fake.nplans - 1];
	if (fake.served < NPLANS)
		snprintf(fake.queries[fake.served], sizeof(fake.queries[0]), "%s=%s",
			 seq ? "seq" : "offset", seq ? seq : off ? off : "");
	fake.served++;
	pthread_mutex_unlock(&fake.lock);
	return answer(c, 200, doc, strlen(doc));
}

/* ------------------------------------------------------------ plans */

struct spec {
	const struct object *o;
	const char *key; /* NULL: o's */
};

/* Script the next plan: the entries of specs (n), residual after the last;
 * expires_in_s from now (negative: already expired); signed: URLs at the
 * scripted star. */
static void script(const struct spec *specs, int n, bool more, int expires_in_s, bool sgn)
{
	struct read_plan *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	assert_true(fake.nplans < NPLANS);
	p->stream_id = SID;
	p->vending = sgn ? PLAN_SIGNED : PLAN_RAW;
	for (int i = 0; i < n; i++) {
		struct plan_entry *e = &p->e[i];
		const struct object *o = specs[i].o;
		char url[256];

		snprintf(e->key, sizeof(e->key), "%s", specs[i].key ? specs[i].key : o->key);
		e->first_seq = o->first_seq;
		e->end_seq = o->end_seq;
		e->first_byte = o->first_byte;
		e->end_byte = o->end_byte;
		e->footer_off = o->footer_off;
		e->footer_len = o->footer_len;
		if (sgn) {
			snprintf(url, sizeof(url), "http://127.0.0.1:%u/obj/%s", fake.port, e->key);
			e->url = strdup(url);
		}
		p->residual_seq = o->end_seq;
		p->residual_byte = o->end_byte;
	}
	p->n = (uint32_t)n;
	p->more = more;
	p->ttl_s = 30;
	p->expires_ns = (uint64_t)((int64_t)nv_now_wall_ns() + (int64_t)expires_in_s * (int64_t)NV_NS_PER_S);
	fake.plans[fake.nplans++] = api_plan_format(p);
	assert_non_null(fake.plans[fake.nplans - 1]);
	plan_clear(p);
	free(p);
}

static void reset(void)
{
	for (int i = 0; i < fake.nplans; i++)
		free(fake.plans[i]);
	fake.nplans = fake.served = fake.range_gets = 0;
	memset(fake.queries, 0, sizeof(fake.queries));
}

/* ------------------------------------------------------------ the reader */

struct got {
	uint64_t seqs[32];
	uint64_t bytes[32];
	int n;
	int stop_at; /* return stop_rc (0: 42) at this record count (0: never) */
	int stop_rc;
};

static int on_record(void *arg, uint64_t seq, uint64_t byte, const void *body, size_t len)
{
	struct got *g = arg;

	assert_true(g->n < 32);
	assert_int_equal(len, strlen(bodies[seq]));
	assert_memory_equal(body, bodies[seq], len);
	g->seqs[g->n] = seq;
	g->bytes[g->n] = byte;
	g->n++;
	return g->stop_at && g->n == g->stop_at ? (g->stop_rc ? g->stop_rc : 42) : 0;
}

/* A counting budget: every take given back, the largest footer and run. */
struct budget_count {
	uint64_t held[2], max[2], takes;
	int fail_at; /* answer -EAGAIN to this take (0: never) */
};

static int count_take(void *arg, bool footer, uint64_t n)
{
	struct budget_count *b = arg;

	if (++b->takes == (uint64_t)b->fail_at)
		return -EAGAIN;
	b->held[footer] += n;
	if (b->held[footer] > b->max[footer])
		b->max[footer] = b->held[footer];
	return 0;
}

static void count_give(void *arg, bool footer, uint64_t n)
{
	struct budget_count *b = arg;

	assert_true(b->held[footer] >= n);
	b->held[footer] -= n;
}

static struct budget_count *run_budget; /* run()'s, when set */

static int run(enum meta_ref_key by, uint64_t pos, struct got *g, uint64_t *ns, uint64_t *nb)
{
	char addr[32];
	struct api_vend_budget bg = { count_take, count_give, run_budget };
	struct api_vend_cfg cfg = { .cl = cl, .addr = addr, .bucket = bucket,
				    .budget = run_budget ? &bg : NULL };

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", fake.port);
	return api_vend_read(&cfg, "b", "s", by, pos, on_record, g, ns, nb);
}

/* Records from..5 exactly once, in order. */
static void expect_records(const struct got *g, uint64_t from)
{
	assert_int_equal(g->n, 6 - (int)from);
	for (int i = 0; i < g->n; i++)
		assert_int_equal(g->seqs[i], from + (uint64_t)i);
}

/* ------------------------------------------------------------ fixture */

static int setup(void **state)
{
	struct api_client_cfg cfg = { 0 };
	const union MHD_DaemonInfo *di;
	char url[96];
	const char *why;
	FILE *fp;
	int fd;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_api_vend.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(url, sizeof(url), "dir:%s/objects", dir);
	assert_int_equal(store_open(url, &bucket), 0);
	snprintf(secret_path, sizeof(secret_path), "%s/secret", dir);
	fd = open(secret_path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	fprintf(fp, "%s\n", SECRET);
	fclose(fp);
	assert_int_equal(api_secret_load(secret_path, &secret, &why), 0);
	cfg.secret = secret;
	assert_int_equal(api_client_new(&cfg, &cl), 0);
	pthread_mutex_init(&fake.lock, NULL);
	fake.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_req, NULL,
				  MHD_OPTION_NOTIFY_CONNECTION, on_conn, NULL, MHD_OPTION_END);
	assert_non_null(fake.d);
	di = MHD_get_daemon_info(fake.d, MHD_DAEMON_INFO_BIND_PORT);
	fake.port = di->port;
	make_object(KEY_A, 0, 3, &obj_a);
	make_object(KEY_B, 3, 6, &obj_b);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	reset();
	if (px.d)
		MHD_stop_daemon(px.d);
	MHD_stop_daemon(fake.d);
	api_client_free(cl);
	api_secret_free(secret);
	store_close(bucket);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* ------------------------------------------------------------ tests */

static void test_vend_reads_and_replans_on_missing(void **state)
{
	struct spec gone_first[] = { { &obj_a, KEY_GONE }, { &obj_b, NULL } };
	struct spec both[] = { { &obj_a, NULL }, { &obj_b, NULL } };
	struct got g = { 0 };
	uint64_t ns, nb;

	(void)state;
	reset();
	script(gone_first, 2, false, 30, false);
	script(both, 2, false, 30, false);
	assert_int_equal(run(META_REF_BY_SEQ, 0, &g, &ns, &nb), 0);
	expect_records(&g, 0);
	assert_int_equal(ns, 6);
	assert_int_equal(nb, obj_b.end_byte);
	assert_int_equal(fake.served, 2);
	assert_string_equal(fake.queries[1], "seq=0");
	for (int i = 0; i < g.n; i++)
		assert_int_equal(g.bytes[i], g.seqs[i] == 0 ? 0 : g.bytes[i - 1] +
				 strlen(bodies[g.seqs[i] - 1]));
}

static void test_vend_replans_midway(void **state)
{
	struct spec second_gone[] = { { &obj_a, NULL }, { &obj_b, KEY_GONE } };
	struct spec rest[] = { { &obj_b, NULL } };
	struct got g = { 0 };
	uint64_t ns, nb;

	(void)state;
	reset();
	script(second_gone, 2, false, 30, false);
	script(rest, 1, false, 30, false);
	assert_int_equal(run(META_REF_BY_SEQ, 0, &g, &ns, &nb), 0);
	expect_records(&g, 0); /* 0..2 once, then 3..5 under the new plan */
	assert_string_equal(fake.queries[1], "seq=3");
}

static void test_vend_cursor(void **state)
{
	struct spec first[] = { { &obj_a, NULL } };
	struct spec rest[] = { { &obj_b, NULL } };
	struct got g = { 0 };
	uint64_t ns, nb;

	(void)state;
	reset();
	script(first, 1, true, 30, false);
	script(rest, 1, false, 30, false);
	assert_int_equal(run(META_REF_BY_SEQ, 0, &g, &ns, &nb), 0);
	expect_records(&g, 0);
	assert_int_equal(fake.served, 2);
	assert_string_equal(fake.queries[1], "seq=3");
	assert_int_equal(ns, 6);
}

static void test_vend_expired_plans(void **state)
{
	struct spec both[] = { { &obj_a, NULL }, { &obj_b, NULL } };
	struct got g = { 0 };
	uint64_t ns = 99, nb = 99;

	(void)state;
	reset();
	script(both, 2, false, -5, false); /* repeats: every plan has expired */
	assert_int_equal(run(META_REF_BY_SEQ, 0, &g, &ns, &nb), -ESTALE);
	assert_int_equal(g.n, 0);
	assert_int_equal(fake.served, API_VEND_REPLANS + 1);
	/* One expired plan, then a good one: read once. */
	reset();
	script(both, 2, false, -5, false);
	script(both, 2, false, 30, false);
	assert_int_equal(run(META_REF_BY_SEQ, 0, &g, &ns, &nb), 0);
	expect_records(&g, 0);
}

static void test_vend_corrupt_and_mismatch(void **state)
{
	struct spec bad[] = { { &obj_a, KEY_BAD } };
	struct spec wrong[] = { { &obj_b, KEY_A } };
	struct got g = { 0 };
	uint8_t raw[512];
	size_t got = 0;
	struct iovec v;
	uint64_t ns, nb;

	(void)state;
	/* KEY_BAD: A with one byte of its first chunk flipped. */
	assert_int_equal(store_get_range(bucket, KEY_A, 0, sizeof(raw), raw, &got), 0);
	raw[BUNDLE_FRAME_HDR] ^= 0x20;
	v.iov_base = raw;
	v.iov_len = got;
	assert_int_equal(store_put(bucket, KEY_BAD, &v, 1, 0), 0);
	reset();
	script(bad, 1, false, 30, false);
	assert_int_equal(run(META_REF_BY_SEQ, 0, &g, &ns, &nb), -EBADMSG);
	assert_int_equal(g.n, 0);
	/* A plan naming B's records at A's key: its footer does not hold them. */
	reset();
	script(wrong, 1, false, 30, false);
	assert_int_equal(run(META_REF_BY_SEQ, 3, &g, &ns, &nb), -EBADMSG);
	assert_int_equal(g.n, 0);
}

static void test_vend_starts_inside(void **state)
{
	struct spec both[] = { { &obj_a, NULL }, { &obj_b, NULL } };
	struct got g = { 0 };
	uint64_t ns, nb;

	(void)state;
	reset();
	script(both, 2, false, 30, false);
	assert_int_equal(run(META_REF_BY_SEQ, 4, &g, &ns, &nb), 0);
	expect_records(&g, 4);
	assert_string_equal(fake.queries[0], "seq=4");
	/* Byte 5 is inside record 1 ("one!" at [4, 8)): from record 1. */
	memset(&g, 0, sizeof(g));
	assert_int_equal(run(META_REF_BY_BYTE, 5, &g, &ns, &nb), 0);
	expect_records(&g, 1);
	assert_int_equal(g.bytes[0], 4);
	assert_string_equal(fake.queries[1], "offset=5");
}

static void test_vend_fn_stops_and_no_bucket(void **state)
{
	struct spec both[] = { { &obj_a, NULL }, { &obj_b, NULL } };
	struct got g = { .stop_at = 2 };
	struct api_vend_cfg cfg = { .cl = cl };
	char addr[32];
	uint64_t ns, nb;

	(void)state;
	reset();
	script(both, 2, false, 30, false);
	assert_int_equal(run(META_REF_BY_SEQ, 0, &g, &ns, &nb), 42);
	assert_int_equal(g.n, 2);
	/* Any nonzero value stops the read with it, 1 and 2 (the reader's
	 * own codes inside) too: never a re-plan. */
	for (int v = 1; v <= 2; v++) {
		reset();
		script(both, 2, false, 30, false);
		memset(&g, 0, sizeof(g));
		g.stop_at = 2;
		g.stop_rc = v;
		assert_int_equal(run(META_REF_BY_SEQ, 0, &g, &ns, &nb), v);
		assert_int_equal(g.n, 2);
		assert_int_equal(fake.served, 1);
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", fake.port);
	cfg.addr = addr;
	memset(&g, 0, sizeof(g));
	assert_int_equal(api_vend_read(&cfg, "b", "s", META_REF_BY_SEQ, 0, on_record, &g, &ns, &nb),
			 -EOPNOTSUPP);
	assert_int_equal(g.n, 0);
}

/* With a budget, each window is taken before its fetch and given back;
 * a take refused ends the read with its error. */
static void test_vend_budget(void **state)
{
	struct spec both[] = { { &obj_a, NULL }, { &obj_b, NULL } };
	struct budget_count b = { 0 };
	struct got g = { 0 };
	uint64_t ns, nb;

	(void)state;
	reset();
	script(both, 2, false, 30, false);
	run_budget = &b;
	assert_int_equal(run(META_REF_BY_SEQ, 0, &g, &ns, &nb), 0);
	expect_records(&g, 0);
	assert_true(b.takes >= 4); /* two footer windows (and their kept copies), two runs */
	assert_true(b.max[true] > 0 && b.max[false] > 0);
	assert_int_equal(b.held[true], 0);
	assert_int_equal(b.held[false], 0);
	for (int at = 1; at <= 3; at++) {
		reset();
		script(both, 2, false, 30, false);
		memset(&b, 0, sizeof(b));
		memset(&g, 0, sizeof(g));
		b.fail_at = at;
		assert_int_equal(run(META_REF_BY_SEQ, 0, &g, &ns, &nb), -EAGAIN);
		assert_int_equal(b.held[true], 0);
		assert_int_equal(b.held[false], 0);
	}
	run_budget = NULL;
}

static void test_vend_signed(void **state)
{
	struct spec second_gone[] = { { &obj_a, NULL }, { &obj_b, KEY_GONE } };
	struct spec rest[] = { { &obj_b, NULL } };
	struct api_vend_cfg cfg = { .cl = cl }; /* no bucket: URLs only */
	struct got g = { 0 };
	char addr[32];
	uint64_t ns, nb;

	(void)state;
	reset();
	script(second_gone, 2, false, 30, true);
	script(rest, 1, false, 30, true);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", fake.port);
	cfg.addr = addr;
	assert_int_equal(api_vend_read(&cfg, "b", "s", META_REF_BY_SEQ, 0, on_record, &g, &ns, &nb),
			 0);
	expect_records(&g, 0);
	assert_string_equal(fake.queries[1], "seq=3");
	/* Footer and one run of three chunks per object, the missing footer: 5
	 * ranged GETs (consecutive chunks come in one). */
	assert_int_equal(fake.range_gets, 5);
	assert_int_equal(nb, obj_b.end_byte);
}

static int conns_now(void)
{
	int n;

	pthread_mutex_lock(&fake.lock);
	n = fake.conns;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

/* Signed reads with cfg.handles: the second read's GETs go over the
 * connection the first one's handle left open (no new connection to the
 * bucket: the plan request's api_client keeps its own); without it, a
 * read dials the bucket again. */
static void test_vend_handles_reuse(void **state)
{
	struct spec both[] = { { &obj_a, NULL }, { &obj_b, NULL } };
	struct api_vend_handles *hs;
	struct api_vend_cfg cfg = { .cl = cl };
	uint64_t ns, nb, made, reused;
	char addr[32];
	int before;

	(void)state;
	assert_int_equal(api_vend_handles_new(0, &hs), -EINVAL);
	assert_null(hs);
	assert_int_equal(api_vend_handles_new(2, &hs), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", fake.port);
	cfg.addr = addr;
	cfg.handles = hs;
	for (int i = 0; i < 3; i++) {
		struct got g = { 0 };

		reset();
		script(both, 2, false, 30, true);
		before = conns_now();
		if (i == 2)
			cfg.handles = NULL;
		assert_int_equal(api_vend_read(&cfg, "b", "s", META_REF_BY_SEQ, 0, on_record, &g,
					       &ns, &nb), 0);
		expect_records(&g, 0);
		assert_int_equal(fake.range_gets, 4);
		if (i == 1)
			assert_int_equal(conns_now(), before); /* all over kept connections */
		if (i == 2)
			assert_true(conns_now() > before); /* a new handle dials again */
	}
	api_vend_handles_counts(hs, &made, &reused);
	assert_int_equal(made, 1);
	assert_int_equal(reused, 1);
	api_vend_handles_free(hs);
	api_vend_handles_free(NULL);
}

/* cfg.run_max = 1 (a position lookup): every chunk its own GET, the
 * records the same. */
static void test_vend_run_max(void **state)
{
	struct spec second_gone[] = { { &obj_a, NULL }, { &obj_b, KEY_GONE } };
	struct spec rest[] = { { &obj_b, NULL } };
	struct api_vend_cfg cfg = { .cl = cl, .run_max = 1 };
	struct got g = { 0 };
	char addr[32];
	uint64_t ns, nb;

	(void)state;
	reset();
	script(second_gone, 2, false, 30, true);
	script(rest, 1, false, 30, true);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", fake.port);
	cfg.addr = addr;
	assert_int_equal(api_vend_read(&cfg, "b", "s", META_REF_BY_SEQ, 0, on_record, &g, &ns, &nb),
			 0);
	expect_records(&g, 0);
	/* Footer and three chunks apiece for both objects, the missing
	 * footer: 9 ranged GETs (5 with runs, test_vend_signed). */
	assert_int_equal(fake.range_gets, 9);
	assert_int_equal(nb, obj_b.end_byte);
}

/* ------------------------------------------------------------ the cache tier */


static enum MHD_Result px_req(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *size, void **con_cls)
{
	const char *tok = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Nova-Cache-Auth");
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
	const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
	struct MHD_Response *r;
	unsigned long long a, b;
	char want_host[32], cr[96];
	uint8_t buf[4096];
	size_t got = 0;
	enum px_mode mode;
	enum MHD_Result ret;

	(void)cls;
	(void)method;
	(void)version;
	(void)data;
	if (!*con_cls) {
		*con_cls = &px;
		return MHD_YES;
	}
	*size = 0;
	snprintf(want_host, sizeof(want_host), "127.0.0.1:%u", fake.port);
	pthread_mutex_lock(&px.lock);
	px.reqs++;
	mode = px.mode;
	if (mode == PX_SLOW_ONCE)
		px.mode = PX_CLEAN;
	if (!tok || strcmp(tok, PX_TOKEN) || !host || strcmp(host, want_host) ||
	    strncmp(url, "/obj/", 5))
		px.refused++;
	pthread_mutex_unlock(&px.lock);
	if (!tok || strcmp(tok, PX_TOKEN) || !host || strcmp(host, want_host) ||
	    strncmp(url, "/obj/", 5))
		return answer(c, 403, "", 0);
	if (mode == PX_5XX)
		return answer(c, 502, "", 0);
	if (mode == PX_SLOW_ONCE) {
		/* Held until the hedge has gone to the bucket (its GET reaches
		 * the fake star), at most 20 s: no race with the hedge's clock. */
		int seen, waited = 0;

		pthread_mutex_lock(&fake.lock);
		seen = fake.range_gets;
		pthread_mutex_unlock(&fake.lock);
		while (waited++ < 2000) {
			int now;

			pthread_mutex_lock(&fake.lock);
			now = fake.range_gets;
			pthread_mutex_unlock(&fake.lock);
			if (now > seen)
				break;
			usleep(10 * 1000);
		}
	}
	if (!range || sscanf(range, "bytes=%llu-%llu", &a, &b) != 2 || b < a || b - a >= sizeof(buf))
		return answer(c, 400, "", 0);
	if (store_get_range(bucket, url + 5, a, (size_t)(b - a + 1), buf, &got))
		return answer(c, 404, "", 0);
	snprintf(cr, sizeof(cr), "bytes %llu-%llu/*", a + (mode == PX_MISPLACED), b);
	r = MHD_create_response_from_buffer(got, buf, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(r, "Content-Range", cr);
	ret = MHD_queue_response(c, 206, r);
	MHD_destroy_response(r);
	return ret;
}

/* A tier of one proxy at port with token tok.  The hedge (2 s) is far
 * above a clean answer even under valgrind; the slow proxy holds its
 * answer until the hedge has fired, so no case races the hedge's clock. */
static struct store_tier *px_tier(unsigned port, const char *tok)
{
	char list[64], path[96];
	struct store_tier_opts o = { .list = list, .auth_file = path, .hedge_ms = 2000,
				     .ctx = "test", .list_name = "cache", .auth_name = "auth" };
	struct store_tier *t = NULL;
	FILE *fp;
	int fd;

	snprintf(list, sizeof(list), "http://127.0.0.1:%u", port);
	snprintf(path, sizeof(path), "%s/px.token", dir);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	fprintf(fp, "%s\n", tok);
	fclose(fp);
	assert_int_equal(store_tier_new(&o, &t), 0);
	return t;
}

/* Both objects by signed plan through tier t: records 0..5; the pieces
 * (4 windows: a footer and one run of chunks per object) that went
 * through a proxy, that a proxy failed (then straight to the bucket),
 * and the proxy's down-markings. */
static void tier_read(struct store_tier *t, unsigned long long *gets, unsigned long long *direct,
		      unsigned long long *fails)
{
	struct spec both[] = { { &obj_a, NULL }, { &obj_b, NULL } };
	struct api_vend_cfg cfg = { .cl = cl, .tier = t }; /* no bucket: URLs only */
	struct got g = { 0 };
	char addr[32];
	uint64_t ns, nb;

	reset();
	pthread_mutex_lock(&px.lock);
	px.reqs = px.refused = 0;
	pthread_mutex_unlock(&px.lock);
	script(both, 2, false, 30, true);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", fake.port);
	cfg.addr = addr;
	assert_int_equal(api_vend_read(&cfg, "b", "s", META_REF_BY_SEQ, 0, on_record, &g, &ns, &nb),
			 0);
	expect_records(&g, 0);
	assert_int_equal(nb, obj_b.end_byte);
	store_tier_counts(t, gets, fails);
	*direct = atomic_load(&t->direct);
	/* The star saw the pieces no proxy served (failed, or none asked). */
	assert_int_equal(fake.range_gets, 4 - (int)*gets);
}

static void px_start(enum px_mode mode)
{
	const union MHD_DaemonInfo *di;

	if (!px.d) {
		pthread_mutex_init(&px.lock, NULL);
		/* A thread per connection: a slow answer holds up no other. */
		px.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
					MHD_USE_THREAD_PER_CONNECTION, 0, NULL, NULL, px_req,
					NULL, MHD_OPTION_END);
		assert_non_null(px.d);
		di = MHD_get_daemon_info(px.d, MHD_DAEMON_INFO_BIND_PORT);
		px.port = di->port;
	}
	pthread_mutex_lock(&px.lock);
	px.mode = mode;
	pthread_mutex_unlock(&px.lock);
}

/* A clean proxy serves every window: the bucket is not asked; it got the
 * token, the star's Host and the URL's path. */
static void test_vend_tier_clean(void **state)
{
	struct store_tier *t;
	unsigned long long gets, direct, fails;

	(void)state;
	px_start(PX_CLEAN);
	t = px_tier(px.port, PX_TOKEN);
	tier_read(t, &gets, &direct, &fails);
	assert_int_equal(gets, 4);
	assert_int_equal(direct, 0);
	assert_int_equal(fails, 0);
	assert_int_equal(px.reqs, 4);
	assert_int_equal(px.refused, 0);
	store_tier_free(t);
}

/* Every bad answer is a fallback to the bucket, the records the same: a
 * 5xx or a dead proxy is marked down at once (one request, then none);
 * a refused token and a misplaced Content-Range are asked every time and
 * never marked down; a hedge goes direct once and keeps the proxy. */
static void test_vend_tier_fallback(void **state)
{
	struct store_tier *t;
	unsigned long long gets, direct, fails;
	unsigned dead;

	(void)state;
	px_start(PX_5XX);
	t = px_tier(px.port, PX_TOKEN);
	tier_read(t, &gets, &direct, &fails);
	assert_int_equal(gets, 0);
	assert_int_equal(direct, 1); /* the other three never asked it */
	assert_int_equal(fails, 1);
	assert_int_equal(px.reqs, 1);
	store_tier_free(t);

	px_start(PX_MISPLACED);
	t = px_tier(px.port, PX_TOKEN);
	tier_read(t, &gets, &direct, &fails);
	assert_int_equal(direct, 4);
	assert_int_equal(fails, 0);
	assert_int_equal(px.reqs, 4);
	store_tier_free(t);

	px_start(PX_CLEAN);
	t = px_tier(px.port, "not-the-proxy-token-000");
	tier_read(t, &gets, &direct, &fails);
	assert_int_equal(direct, 4);
	assert_int_equal(fails, 0);
	assert_int_equal(px.refused, 4);
	store_tier_free(t);

	px_start(PX_SLOW_ONCE);
	t = px_tier(px.port, PX_TOKEN);
	tier_read(t, &gets, &direct, &fails);
	assert_int_equal(direct, 1);
	assert_int_equal(gets, 3);
	assert_int_equal(fails, 0);
	assert_int_equal(px.reqs, 4);
	store_tier_free(t);

	/* A port nobody listens on (the star's daemon stopped would do too). */
	{
		struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL,
							NULL, px_req, NULL, MHD_OPTION_END);

		assert_non_null(d);
		dead = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
		MHD_stop_daemon(d);
	}
	t = px_tier(dead, PX_TOKEN);
	tier_read(t, &gets, &direct, &fails);
	assert_int_equal(gets, 0);
	assert_int_equal(direct, 1);
	assert_int_equal(fails, 1);
	store_tier_free(t);
}

/* ------------------------------------------------------------ cfg.keep */

/* A keep of one plan and a few footer windows, counting its calls. */
static struct {
	struct read_plan *plan; /* NULL: none kept */
	char bucket[8], stream[8];
	struct { char key[META_SETTLED_KEY_MAX]; uint32_t rev; uint64_t off; uint32_t len;
		 uint8_t win[4096]; } fw[4];
	int nfw;
	int plan_gets, plan_hits, plan_puts, plan_drops, footer_hits, footer_puts;
	bool corrupt; /* footer_get answers a flipped byte */
} kp;

static void kp_copy(struct read_plan *dst, const struct read_plan *src)
{
	memcpy(dst, src, sizeof(*dst));
	for (uint32_t i = 0; i < src->n; i++)
		if (src->e[i].url)
			assert_non_null(dst->e[i].url = strdup(src->e[i].url));
}

static void kp_reset(void)
{
	if (kp.plan) {
		plan_clear(kp.plan);
		free(kp.plan);
	}
	memset(&kp, 0, sizeof(kp));
}

static int kp_plan_get(void *arg, const char *bkt, const char *stream, enum meta_ref_key by,
		       uint64_t pos, struct read_plan *p)
{
	(void)arg;
	kp.plan_gets++;
	if (!kp.plan || strcmp(bkt, kp.bucket) || strcmp(stream, kp.stream))
		return -ENOENT;
	for (uint32_t i = 0; i < kp.plan->n; i++) {
		const struct plan_entry *e = &kp.plan->e[i];

		if (by == META_REF_BY_SEQ ? e->first_seq <= pos && pos < e->end_seq
					  : e->first_byte <= pos && pos < e->end_byte) {
			kp_copy(p, kp.plan);
			kp.plan_hits++;
			return 0;
		}
	}
	return -ENOENT;
}

static void kp_plan_put(void *arg, const char *bkt, const char *stream,
			const struct read_plan *p)
{
	(void)arg;
	if (kp.plan)
		plan_clear(kp.plan);
	else
		assert_non_null(kp.plan = calloc(1, sizeof(*kp.plan)));
	kp_copy(kp.plan, p);
	snprintf(kp.bucket, sizeof(kp.bucket), "%s", bkt);
	snprintf(kp.stream, sizeof(kp.stream), "%s", stream);
	kp.plan_puts++;
}

static void kp_plan_drop(void *arg, const char *bkt, const char *stream)
{
	(void)arg;
	(void)bkt;
	(void)stream;
	if (kp.plan) {
		plan_clear(kp.plan);
		free(kp.plan);
		kp.plan = NULL;
	}
	kp.plan_drops++;
}

static int kp_footer_get(void *arg, const char *key, uint32_t rev, uint64_t off, uint32_t len,
			 void *dst)
{
	(void)arg;
	for (int i = 0; i < kp.nfw; i++)
		if (!strcmp(kp.fw[i].key, key) && kp.fw[i].rev == rev && kp.fw[i].off == off &&
		    kp.fw[i].len == len) {
			memcpy(dst, kp.fw[i].win, len);
			if (kp.corrupt)
				((uint8_t *)dst)[0] ^= 1;
			kp.footer_hits++;
			return 0;
		}
	return -ENOENT;
}

static void kp_footer_put(void *arg, const char *key, uint32_t rev, uint64_t off,
			  const void *win, uint32_t len)
{
	(void)arg;
	assert_true(kp.nfw < 4 && len <= sizeof(kp.fw[0].win));
	snprintf(kp.fw[kp.nfw].key, sizeof(kp.fw[0].key), "%s", key);
	kp.fw[kp.nfw].rev = rev;
	kp.fw[kp.nfw].off = off;
	kp.fw[kp.nfw].len = len;
	memcpy(kp.fw[kp.nfw].win, win, len);
	kp.nfw++;
	kp.footer_puts++;
}

static const struct api_vend_keep kp_ops = {
	kp_plan_get, kp_plan_put, kp_plan_drop, kp_footer_get, kp_footer_put, NULL,
};

/* A signed read through kp. */
static int run_kept(enum meta_ref_key by, uint64_t pos, struct got *g, uint64_t *ns,
		    uint64_t *nb)
{
	struct api_vend_cfg cfg = { .cl = cl, .keep = &kp_ops };
	char addr[32];

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", fake.port);
	cfg.addr = addr;
	memset(g, 0, sizeof(*g));
	return api_vend_read(&cfg, "b", "s", by, pos, on_record, g, ns, nb);
}

/* The next read inside a kept plan asks no star and fetches no footer it
 * fetched before; past the plan's entries it asks a star again. */
static void test_vend_keep_reuses(void **state)
{
	struct spec both[] = { { &obj_a, NULL }, { &obj_b, NULL } };
	struct got g;
	uint64_t ns, nb;
	int gets;

	(void)state;
	reset();
	kp_reset();
	script(both, 2, false, 30, true);
	assert_int_equal(run_kept(META_REF_BY_SEQ, 0, &g, &ns, &nb), 0);
	expect_records(&g, 0);
	assert_int_equal(fake.served, 1);
	assert_int_equal(kp.plan_puts, 1);
	assert_int_equal(kp.footer_puts, 2);
	assert_int_equal(fake.range_gets, 4); /* two footers, two runs */
	/* From seq 4 and from byte 5: the kept plan, B's (and A's) footer kept. */
	assert_int_equal(run_kept(META_REF_BY_SEQ, 4, &g, &ns, &nb), 0);
	expect_records(&g, 4);
	assert_int_equal(ns, 6);
	assert_int_equal(run_kept(META_REF_BY_BYTE, 5, &g, &ns, &nb), 0);
	expect_records(&g, 1);
	assert_int_equal(g.bytes[0], 4);
	assert_int_equal(fake.served, 1);
	assert_int_equal(kp.plan_hits, 2);
	assert_int_equal(kp.footer_hits, 3);
	assert_int_equal(fake.range_gets, 4 + 1 + 2); /* runs only */
	/* At the residual (past every entry): a star is asked. */
	gets = fake.served;
	assert_int_equal(run_kept(META_REF_BY_SEQ, 6, &g, &ns, &nb), 0);
	assert_int_equal(g.n, 0);
	assert_int_equal(fake.served, gets + 1);
	assert_int_equal(ns, 6);
	/* A kept window is verified again: a bad one is -EBADMSG, nothing handed on. */
	kp.corrupt = true;
	assert_int_equal(run_kept(META_REF_BY_SEQ, 0, &g, &ns, &nb), -EBADMSG);
	assert_int_equal(g.n, 0);
	kp_reset();
}

/* A kept plan that meets a missing object or has expired is dropped and
 * the read re-plans at a star from where it is (vend.h invariant 1). */
static void test_vend_keep_stale(void **state)
{
	struct spec gone_first[] = { { &obj_a, KEY_GONE }, { &obj_b, NULL } };
	struct spec both[] = { { &obj_a, NULL }, { &obj_b, NULL } };
	struct got g;
	uint64_t ns, nb;

	(void)state;
	reset();
	kp_reset();
	/* Kept: a plan whose first object is gone (a read from 3 skips it). */
	script(gone_first, 2, false, 30, true);
	script(both, 2, false, 30, true);
	assert_int_equal(run_kept(META_REF_BY_SEQ, 3, &g, &ns, &nb), 0);
	expect_records(&g, 3);
	assert_int_equal(fake.served, 1);
	/* From 0 it serves the kept plan, meets the 404, drops, re-plans. */
	assert_int_equal(run_kept(META_REF_BY_SEQ, 0, &g, &ns, &nb), 0);
	expect_records(&g, 0);
	assert_int_equal(kp.plan_hits, 1);
	assert_int_equal(kp.plan_drops, 1);
	assert_int_equal(fake.served, 2);
	assert_string_equal(fake.queries[1], "seq=0");
	/* The new plan is kept; expired under the keep, it re-plans too. */
	assert_non_null(kp.plan);
	kp.plan->expires_ns = nv_now_wall_ns() - NV_NS_PER_S;
	assert_int_equal(run_kept(META_REF_BY_SEQ, 1, &g, &ns, &nb), 0);
	expect_records(&g, 1);
	assert_int_equal(kp.plan_drops, 2);
	assert_int_equal(fake.served, 3);
	assert_string_equal(fake.queries[2], "seq=1");
	kp_reset();
}

/* By byte at exactly an entry's end (a page boundary), with a plan that
 * names that entry too (a kept plan does): only its last chunks are
 * fetched (a zero-length record there is still the one holding the
 * byte), never the whole object again. */
static void test_vend_byte_at_an_entry_end(void **state)
{
	struct spec both[] = { { &obj_a, NULL }, { &obj_b, NULL } };
	struct api_vend_cfg cfg = { .cl = cl, .run_max = 1 };
	struct got g = { 0 };
	char addr[32];
	uint64_t ns, nb;

	(void)state;
	reset();
	script(both, 2, false, 30, true);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", fake.port);
	cfg.addr = addr;
	assert_int_equal(obj_a.end_byte, 8);
	assert_int_equal(api_vend_read(&cfg, "b", "s", META_REF_BY_BYTE, 8, on_record, &g, &ns,
				       &nb), 0);
	expect_records(&g, 2); /* "" at byte 8, then B's */
	/* Both footers, A's chunks from the one holding byte 7 (two), B's three. */
	assert_int_equal(fake.range_gets, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vend_run_max),
		cmocka_unit_test(test_vend_handles_reuse),
		cmocka_unit_test(test_vend_reads_and_replans_on_missing),
		cmocka_unit_test(test_vend_replans_midway),
		cmocka_unit_test(test_vend_cursor),
		cmocka_unit_test(test_vend_expired_plans),
		cmocka_unit_test(test_vend_corrupt_and_mismatch),
		cmocka_unit_test(test_vend_starts_inside),
		cmocka_unit_test(test_vend_fn_stops_and_no_bucket),
		cmocka_unit_test(test_vend_budget),
		cmocka_unit_test(test_vend_signed),
		cmocka_unit_test(test_vend_tier_clean),
		cmocka_unit_test(test_vend_tier_fallback),
		cmocka_unit_test(test_vend_byte_at_an_entry_end),
		cmocka_unit_test(test_vend_keep_reuses),
		cmocka_unit_test(test_vend_keep_stale),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
