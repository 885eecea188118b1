/*
 * test_api_server.c - unit tests for api/server.c: the star API over one
 * real star (star_open() on a temporary data directory: SQLite
 * metastore, directory store), asked through the cluster client
 * (api/client.c) and through raw libcurl requests where the test needs
 * what the client never sends (a malformed header) or the answer's
 * status and document.
 *
 * Pins server.h invariant 6, the stream id of a request
 * (X-Nova-Stream-Id, api/wire.h): a request naming the id of the stream
 * under its name is served as without the header; one naming another id
 * (the stream renamed, then a new one created under the old name), or a
 * name with no stream, is 404 stream_moved (the client's -ESTALE) on
 * every per-stream route, and nothing happens: no record appended to
 * either stream, no lease taken on a vacant stream, nothing deleted; a
 * malformed id is 400 and appends nothing; without the header a stream
 * is named as before (the old clients, the Gateway).  Not for: several
 * stars (tests/etcd/t_stars_delete.sh), the redial (test_api_client).
 */
#include "config.h"
#include "api/auth.h"
#include "api/client.h"
#include "api/server.h"
#include "api/wire.h"
#include "engine/lease.h"
#include "engine/star.h"
#include "src/base/clock.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#define SECRET "0123456789abcdef-server-secret"

struct fx {
	char dir[64];
	char secret_path[96];
	char addr[32];
	struct star *st;
	struct api_secret *secret;
	struct api_server *srv;
	struct api_client *cl;
	struct lease_holder at; /* the star under test, "any star" (epoch 0) */
};

/* The registry lease TTL: as test_lease.c (longer under valgrind, which
 * serializes a loaded machine's threads). */
static unsigned lease_s(void)
{
	return getenv("NOVAFS_MEMCHECK") ? 10 : 4;
}

static struct star_cfg cfg_for(const char *dir)
{
	struct star_cfg c = { 0 };

	c.data_dir = dir;
	c.star_id = "sa";
	c.star_lease_s = lease_s();
	c.backlog_bytes = 64u << 20;
	c.tail_cache_bytes = 16u << 20;
	c.read_cache_bytes = 16u << 20;
	c.flight_max = 1u << 20;
	c.linger_ns = NV_NS_PER_MS;
	for (unsigned i = 0; i < NV_CLASS_COUNT; i++) {
		c.linger_class_ns[i] = -1;
		c.age_cap_ns[i] = 3600 * NV_NS_PER_S;
	}
	c.put_timeout_ns = 10 * NV_NS_PER_S;
	c.put_window = 4;
	c.chunk_kib = 64;
	c.absorb_batch_slots = 16;
	c.settle_trigger_bytes = 8u << 20;
	c.settle_linger_ns = 30 * NV_NS_PER_S;
	c.output_cap_bytes = 128u << 20;
	c.read_grace_ns = 30 * NV_NS_PER_S;
	c.fetch_cache_bytes = 16u << 20;
	c.settle_workers = 1;
	c.audit_period_ns = 100 * NV_NS_PER_MS;
	c.take_wait_ns = 500 * NV_NS_PER_MS;
	return c;
}

/* A port nothing listens on now (the kernel's pick for port 0). */
static unsigned free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct api_client_cfg ccfg = { 0 };
	struct api_server_cfg scfg = { 0 };
	struct star_cfg c;
	const char *why;
	FILE *fp;
	int fd, rc = -EADDRINUSE;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/novafs-test-api-server.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	c = cfg_for(f->dir);
	assert_int_equal(star_open(&c, &f->st), 0);
	assert_int_equal(star_gate_wait(f->st, NULL), 0);
	assert_int_equal(star_bucket_create(f->st, "b", NULL, NULL), 0);
	snprintf(f->secret_path, sizeof(f->secret_path), "%s.secret", f->dir);
	fd = open(f->secret_path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	fprintf(fp, "%s\n", SECRET);
	fclose(fp);
	assert_int_equal(api_secret_load(f->secret_path, &f->secret, &why), 0);
	scfg.secret = f->secret;
	scfg.star = f->st;
	scfg.max_body = 1u << 20;
	/* The port can be taken between free_port() and the bind: again. */
	for (int i = 0; i < 5 && rc == -EADDRINUSE; i++) {
		snprintf(f->addr, sizeof(f->addr), "127.0.0.1:%u", free_port());
		scfg.listen = f->addr;
		rc = api_server_start(&scfg, &f->srv);
	}
	assert_int_equal(rc, 0);
	ccfg.secret = f->secret;
	assert_int_equal(api_client_new(&ccfg, &f->cl), 0);
	snprintf(f->at.star, sizeof(f->at.star), "sa");
	snprintf(f->at.addr, sizeof(f->at.addr), "%s", f->addr);
	f->at.epoch = 0;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[160];

	api_client_free(f->cl);
	api_server_stop(f->srv);
	(void)star_close(f->st);
	api_secret_free(f->secret);
	unlink(f->secret_path);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", f->dir);
	free(f);
	return 0;
}

/* ------------------------------------------------------------ raw requests */

struct resp {
	long status;
	char body[1024];
	size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct resp *r = arg;
	size_t k = size * n;

	if (k > sizeof(r->body) - 1 - r->len)
		k = sizeof(r->body) - 1 - r->len;
	memcpy(r->body + r->len, p, k);
	r->len += k;
	r->body[r->len] = '\0';
	return size * n;
}

/* method path (after the address) with X-Nova-Stream-Id: id (NULL: no
 * header) and body (NULL: none) into *r. */
static void http(struct fx *f, const char *method, const char *path, const char *id,
		 const char *body, struct resp *r)
{
	CURL *e = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[256], idh[96];

	memset(r, 0, sizeof(*r));
	assert_non_null(e);
	snprintf(url, sizeof(url), "http://%s%s", f->addr, path);
	hdrs = curl_slist_append(hdrs, "Authorization: Bearer " SECRET);
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (id) { /* "Name;" is libcurl's header with an empty value ("Name:" removes it) */
		snprintf(idh, sizeof(idh), id[0] ? API_STREAM_ID_HEADER ": %s" : API_STREAM_ID_HEADER ";",
			 id);
		hdrs = curl_slist_append(hdrs, idh);
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 20000L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	if (!strcmp(method, "POST")) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(body ? strlen(body) : 0));
	}
	assert_int_equal(curl_easy_perform(e), CURLE_OK);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(e);
}

/* The error code of a refusal document. */
static const char *code_of(const struct resp *r, char *buf, size_t cap)
{
	if (api_parse_reply_str(r->body, r->len, "error", buf, cap))
		snprintf(buf, cap, "(no error code: status %ld)", r->status);
	return buf;
}

/* ------------------------------------------------------------ helpers */

static struct nv_stream *create(struct fx *f, const char *name)
{
	struct nv_stream *s = NULL;

	assert_int_equal(star_stream_create(f->st, "b", name, NULL, &s), 0);
	return s;
}

static uint64_t acked_seq(const struct nv_stream *s)
{
	return atomic_load_explicit(&s->acked_seq, memory_order_acquire);
}

/* A subscription's frames: none are expected (refused before the first). */
static int on_frame(void *arg, uint64_t off, const void *data, size_t len)
{
	(void)arg;
	(void)off;
	(void)data;
	(void)len;
	return 1;
}

static int append(struct fx *f, const char *name, uint64_t id, const char *rec)
{
	return api_client_append(f->cl, &f->at, "b", name, id, rec, strlen(rec), NULL);
}

/* ------------------------------------------------------------ cases */

/* The id of the stream under the name: served as without it; another id
 * is 404 stream_moved (-ESTALE) and appends nothing; a malformed one is
 * 400 bad_request and appends nothing; no header: by name. */
static void test_api_server_append_id(void **state)
{
	struct fx *f = *state;
	struct nv_stream *s = create(f, "n");
	static const char *const bad[] = { "abc", "0", "", "-1", "1 2", "0x10",
					   "18446744073709551616" };
	char id[24], other[24], code[64];
	struct resp r;

	snprintf(id, sizeof(id), "%llu", (unsigned long long)s->id);
	snprintf(other, sizeof(other), "%llu", (unsigned long long)s->id + 1000);
	assert_int_equal(append(f, "n", s->id, "one"), 0);
	assert_int_equal(acked_seq(s), 1);
	assert_int_equal(append(f, "n", s->id + 1000, "two"), -ESTALE);
	http(f, "POST", "/v1/streams/b/n/records", other, "two", &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(code_of(&r, code, sizeof(code)), "stream_moved");
	assert_int_equal(acked_seq(s), 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		http(f, "POST", "/v1/streams/b/n/records", bad[i], "three", &r);
		assert_int_equal(r.status, 400);
		assert_string_equal(code_of(&r, code, sizeof(code)), "bad_request");
	}
	assert_int_equal(acked_seq(s), 1);
	http(f, "POST", "/v1/streams/b/n/records", id, "four", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(append(f, "n", 0, "five"), 0); /* no header: by name */
	assert_int_equal(acked_seq(s), 3);
	stream_put(s);
}

/* Renamed (old -> new), then a new stream created under the old name:
 * every per-stream route naming the first stream's id under the old name
 * is stream_moved and changes nothing, in either stream; under its name
 * now it is served; by name alone the old name is the new stream. */
static void test_api_server_rename_reuse(void **state)
{
	struct fx *f = *state;
	struct nv_stream *x = create(f, "old"), *y, *s;
	struct lease_holder nh;
	struct api_bounds b;
	uint64_t seq, byte;
	char buf[16], idx[24], code[64];
	size_t got = 9;
	struct resp r;

	assert_int_equal(append(f, "old", x->id, "x0"), 0);
	assert_int_equal(star_stream_rename(f->st, "b", "old", "new", true, NULL), 0);
	y = create(f, "old");
	assert_true(y->id != x->id);
	snprintf(idx, sizeof(idx), "%llu", (unsigned long long)x->id);
	assert_int_equal(append(f, "old", x->id, "x1"), -ESTALE);
	assert_int_equal(acked_seq(x), 1);
	assert_int_equal(acked_seq(y), 0);
	assert_int_equal(api_client_read(f->cl, &f->at, "b", "old", x->id, 0, buf, sizeof(buf),
					 &got), -ESTALE);
	assert_int_equal(got, 0);
	assert_int_equal(api_client_end(f->cl, &f->at, "b", "old", x->id, &seq, &byte), -ESTALE);
	assert_int_equal(api_client_bounds(f->cl, &f->at, "b", "old", x->id, &b), -ESTALE);
	assert_int_equal(api_client_locate(f->cl, &f->at, "b", "old", x->id, true, 0, &seq, &byte),
			 -ESTALE);
	assert_int_equal(api_client_subscribe(f->cl, &f->at, "b", "old", x->id, 0, on_frame,
					      NULL),
			 -ESTALE);
	assert_int_equal(api_client_handoff(f->cl, &f->at, "b", "old", x->id, "sa", &nh),
			 -ESTALE);
	assert_int_equal(api_client_delete(f->cl, &f->at, "b", "old", x->id), -ESTALE);
	assert_int_equal(api_client_rename(f->cl, &f->at, "b", "old", x->id, "new"), -ESTALE);
	assert_int_equal(api_client_trim(f->cl, &f->at, "b", "old", x->id, true, 1, &seq, &byte),
			 -ESTALE);
	http(f, "GET", "/v1/streams/b/old/plan?seq=0", idx, NULL, &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(code_of(&r, code, sizeof(code)), "stream_moved");
	/* Nothing happened to either: y is there, unled; x has its record. */
	assert_int_equal(star_stream_lookup(f->st, "b", "old", &s), 0);
	assert_true(s == y);
	stream_put(s);
	assert_int_equal(star_leader(f->st, y, &nh), -ENOENT);
	assert_int_equal(acked_seq(x), 1);
	assert_int_equal(acked_seq(y), 0);
	assert_int_equal(atomic_load(&x->trim_seq), 0); /* the refused trim */
	/* Under its name now, by its id: served. */
	assert_int_equal(append(f, "new", x->id, "x1"), 0);
	assert_int_equal(acked_seq(x), 2);
	assert_int_equal(api_client_read(f->cl, &f->at, "b", "new", x->id, 0, buf, sizeof(buf),
					 &got), 0);
	assert_int_equal(got, 4);
	assert_memory_equal(buf, "x0x1", 4);
	/* By name alone, as before the header: the stream under the name. */
	assert_int_equal(append(f, "old", 0, "y0"), 0);
	assert_int_equal(acked_seq(y), 1);
	assert_int_equal(acked_seq(x), 2);
	stream_put(y);
	stream_put(x);
}

/* Rename over a stream this star leads (api/change.h): one transaction
 * here, the target's name never absent; its appends here fail at once;
 * a wrong target id is stream_moved and a missing source not_found,
 * each changing nothing; from= must be a name. */
static void test_api_server_rename(void **state)
{
	struct fx *f = *state;
	struct nv_stream *src = create(f, "src"), *dst = create(f, "dst"), *s;
	uint64_t seq = 0;
	char buf[16], code[64], path[64];
	size_t got = 0;
	struct resp r;

	assert_int_equal(append(f, "src", src->id, "s0"), 0);
	assert_int_equal(append(f, "dst", dst->id, "d0"), 0);
	/* A wrong target id, a missing source: nothing changed. */
	assert_int_equal(api_client_rename(f->cl, &f->at, "b", "dst", dst->id + 1000, "src"),
			 -ESTALE);
	assert_int_equal(api_client_rename(f->cl, &f->at, "b", "dst", dst->id, "nosuch"), -ENOENT);
	assert_int_equal(star_stream_lookup(f->st, "b", "dst", &s), 0);
	assert_true(s == dst);
	stream_put(s);
	assert_int_equal(star_stream_lookup(f->st, "b", "src", &s), 0);
	assert_true(s == src);
	stream_put(s);
	/* Not a name; none. */
	snprintf(path, sizeof(path), "/v1/streams/b/dst/rename?from=%s", "..");
	http(f, "POST", path, NULL, NULL, &r);
	assert_int_equal(r.status, 400);
	http(f, "POST", "/v1/streams/b/dst/rename", NULL, NULL, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(code_of(&r, code, sizeof(code)), "bad_request");
	/* Done: src's bytes under dst, dst deleted (its appends refused). */
	assert_int_equal(api_client_rename(f->cl, &f->at, "b", "dst", dst->id, "src"), 0);
	assert_int_equal(star_stream_lookup(f->st, "b", "dst", &s), 0);
	assert_true(s == src);
	stream_put(s);
	assert_int_equal(star_stream_lookup(f->st, "b", "src", &s), -ENOENT);
	assert_int_equal(api_client_read(f->cl, &f->at, "b", "dst", src->id, 0, buf, sizeof(buf),
					 &got), 0);
	assert_int_equal(got, 2);
	assert_memory_equal(buf, "s0", 2);
	assert_true(dst->deleted);
	assert_int_equal(star_append(f->st, dst, "d1", 2, NULL, NULL, &seq), -ENOENT);
	assert_int_equal(acked_seq(dst), 1);
	stream_put(dst);
	stream_put(src);
}

/* A vacant stream: a wrong id is refused before the append's lease take
 * (the stream stays vacant); the right one takes it. */
static void test_api_server_vacant(void **state)
{
	struct fx *f = *state;
	struct nv_stream *v = create(f, "vacant");
	struct lease_holder h;

	assert_int_equal(star_leader(f->st, v, &h), -ENOENT);
	assert_int_equal(append(f, "vacant", v->id + 1, "r"), -ESTALE);
	assert_int_equal(star_leader(f->st, v, &h), -ENOENT);
	assert_int_equal(acked_seq(v), 0);
	assert_int_equal(append(f, "vacant", v->id, "r"), 0);
	assert_int_equal(star_leader(f->st, v, &h), 0);
	assert_string_equal(h.star, "sa");
	stream_put(v);
}

/* No stream under the name: with an id it is stream_moved (the id's
 * stream is elsewhere or gone), without one not_found, as before. */
static void test_api_server_no_stream(void **state)
{
	struct fx *f = *state;
	char code[64];
	struct resp r;

	assert_int_equal(append(f, "none", 5, "r"), -ESTALE);
	assert_int_equal(append(f, "none", 0, "r"), -ENOENT);
	http(f, "GET", "/v1/streams/b/none/end", "5", NULL, &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(code_of(&r, code, sizeof(code)), "stream_moved");
	http(f, "GET", "/v1/streams/b/none/end", NULL, NULL, &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(code_of(&r, code, sizeof(code)), "not_found");
	/* Routes without a stream ignore the header. */
	http(f, "POST", "/v1/nudge", "abc", "{\"star\":\"sb\"}", &r);
	assert_int_equal(r.status, 200);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_api_server_append_id, setup, teardown),
		cmocka_unit_test_setup_teardown(test_api_server_rename_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_api_server_vacant, setup, teardown),
		cmocka_unit_test_setup_teardown(test_api_server_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_api_server_no_stream, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
