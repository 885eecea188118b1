/*
 * test_api_client.c - unit tests for api/client.c: the redial rule of
 * client.h against tiny libmicrohttpd servers in this test that play
 * stars (one answers NOT_OWNER naming another, one serves).
 *
 * Pins client.h invariants 1 (one redial, never two), 2 (a redirect or
 * a holder with an older lease epoch than one seen for the stream is not
 * followed), the credential on every request, the error translation
 * (unreachable holder, refused secret, past the end), and a
 * subscription that ends with NOT_OWNER resuming at its cursor on the
 * named holder.
 */
#include "config.h"
#include "api/client.h"
#include "api/wire.h"

#include <errno.h>
#include <microhttpd.h>
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

#define SECRET "0123456789abcdef-test-secret"

/* What one fake star answers. */
enum fake_mode {
	FAKE_SERVE,       /* 200: an append reply, bytes, an end, or frames */
	FAKE_NOT_OWNER,   /* 421 naming redirect */
	FAKE_SUB_MOVES,   /* subscribe: one data frame, then a NOT_OWNER frame */
	FAKE_DEADLINE,    /* 504: the holder's lease deadline passed */
};

struct fake {
	struct MHD_Daemon *d;
	unsigned port;
	enum fake_mode mode;
	struct lease_holder redirect;
	int hits;
	char last_url[256];
	char last_offset[32];
	bool auth_ok;
	struct lease_holder self; /* its own name and address */
};

static struct fake fakes[3];
static struct api_secret *secret;
static struct api_client *cl;
static char secret_path[64];

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
								 MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret = MHD_queue_response(c, status, r);

	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result serve(struct fake *f, struct MHD_Connection *c, const char *url)
{
	char doc[API_LINE_MAX];

	if (f->mode == FAKE_NOT_OWNER) {
		assert_int_equal(api_fmt_not_owner(&f->redirect, doc, sizeof(doc)), 0);
		return answer(c, 421, doc);
	}
	if (f->mode == FAKE_DEADLINE)
		return answer(c, 504, "{\"error\":\"lease_deadline\"}");
	if (strstr(url, "/records"))
		return answer(c, 200, "{\"seq\":7,\"end\":{\"seq\":8,\"byte\":40}}");
	if (strstr(url, "/end"))
		return answer(c, 200, "{\"seq\":8,\"byte\":40}");
	if (strstr(url, "/bytes"))
		return strcmp(f->last_offset, "99") ? answer(c, 200, "hello")
						  : answer(c, 416, "{\"error\":\"past_end\"}");
	if (f->mode == FAKE_SUB_MOVES) {
		assert_int_equal(api_fmt_not_owner(&f->redirect, doc, sizeof(doc)), 0);
		char frames[API_LINE_MAX * 2];

		snprintf(frames, sizeof(frames), "{\"offset\":%s,\"length\":3}\nabc%s\n",
			 f->last_offset, doc);
		return answer(c, 200, frames);
	}
	{
		char frames[256];

		snprintf(frames, sizeof(frames),
			 "{\"heartbeat\":true,\"end\":9}\n{\"offset\":%s,\"length\":2}\nxy"
			 "{\"error\":\"shutting_down\",\"detail\":\"\"}\n", f->last_offset);
		return answer(c, 200, frames);
	}
}

static enum MHD_Result on_req(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *size, void **con_cls)
{
	struct fake *f = cls;
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	const char *off = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");

	(void)method;
	(void)version;
	(void)data;
	if (!*con_cls) {
		*con_cls = f;
		return MHD_YES;
	}
	if (*size) {
		*size = 0;
		return MHD_YES;
	}
	f->hits++;
	snprintf(f->last_url, sizeof(f->last_url), "%s", url);
	snprintf(f->last_offset, sizeof(f->last_offset), "%s", off ? off : "");
	f->auth_ok = auth && !strcmp(auth, "Bearer " SECRET);
	if (!f->auth_ok)
		return answer(c, 401, "{\"error\":\"unauthorized\"}");
	return serve(f, c, url);
}

static void holder_of(int i, uint64_t epoch, struct lease_holder *h)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->star, sizeof(h->star), "star%d", i);
	snprintf(h->addr, sizeof(h->addr), "127.0.0.1:%u", fakes[i].port);
	h->epoch = epoch;
}

static int setup(void **state)
{
	struct api_client_cfg cfg = { 0 };
	const char *why;
	FILE *fp;
	int fd;

	(void)state;
	snprintf(secret_path, sizeof(secret_path), "/tmp/test_api_client.XXXXXX");
	fd = mkstemp(secret_path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	fprintf(fp, "%s\n", SECRET);
	fclose(fp);
	assert_int_equal(api_secret_load(secret_path, &secret, &why), 0);
	for (int i = 0; i < 3; i++) {
		const union MHD_DaemonInfo *di;

		memset(&fakes[i], 0, sizeof(fakes[i]));
		fakes[i].d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_req,
					      &fakes[i], MHD_OPTION_END);
		assert_non_null(fakes[i].d);
		di = MHD_get_daemon_info(fakes[i].d, MHD_DAEMON_INFO_BIND_PORT);
		fakes[i].port = di->port;
	}
	cfg.secret = secret;
	cfg.max_handles = 2;
	return api_client_new(&cfg, &cl);
}

static int teardown(void **state)
{
	(void)state;
	api_client_free(cl);
	for (int i = 0; i < 3; i++)
		MHD_stop_daemon(fakes[i].d);
	api_secret_free(secret);
	unlink(secret_path);
	return 0;
}

/* Every fake serves, hit counts zeroed. */
static void reset(void)
{
	for (int i = 0; i < 3; i++) {
		fakes[i].mode = FAKE_SERVE;
		fakes[i].hits = 0;
	}
}

static void test_api_client_append_direct(void **state)
{
	struct api_append_result r;
	struct lease_holder h;

	(void)state;
	reset();
	holder_of(0, 1, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "direct", "rec", 3, &r), 0);
	assert_int_equal(r.seq, 7);
	assert_int_equal(r.end_seq, 8);
	assert_int_equal(r.end_byte, 40);
	assert_int_equal(fakes[0].hits, 1);
	assert_true(fakes[0].auth_ok);
	assert_string_equal(fakes[0].last_url, "/v1/streams/b/direct/records");
}

static void test_api_client_redial_once(void **state)
{
	struct api_append_result r;
	struct lease_holder h;

	(void)state;
	reset();
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(1, 2, &fakes[0].redirect);
	holder_of(0, 1, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "moved", "rec", 3, &r), 0);
	assert_int_equal(r.seq, 7);
	assert_int_equal(fakes[0].hits, 1);
	assert_int_equal(fakes[1].hits, 1);
}

static void test_api_client_redial_not_twice(void **state)
{
	struct lease_holder h;

	(void)state;
	reset();
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(1, 2, &fakes[0].redirect);
	fakes[1].mode = FAKE_NOT_OWNER;
	holder_of(2, 3, &fakes[1].redirect);
	holder_of(0, 1, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "twice", "rec", 3, NULL), -STAR_ENOTOWNER);
	assert_int_equal(fakes[0].hits, 1);
	assert_int_equal(fakes[1].hits, 1);
	assert_int_equal(fakes[2].hits, 0); /* the second redirect is not followed */
}

static void test_api_client_stale_redirect(void **state)
{
	struct lease_holder h;

	(void)state;
	reset();
	/* Epoch 5 seen for b/stale (a served call)... */
	holder_of(1, 5, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "stale", "rec", 3, NULL), 0);
	/* ...then a star answers NOT_OWNER naming star2 at epoch 3: stale. */
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(2, 3, &fakes[0].redirect);
	holder_of(0, 5, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "stale", "rec", 3, NULL), -STAR_ENOTOWNER);
	assert_int_equal(fakes[0].hits, 1);
	assert_int_equal(fakes[2].hits, 0);
	/* A holder handed in with an older epoch is not dialed at all. */
	holder_of(2, 4, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "stale", "rec", 3, NULL), -STAR_ENOTOWNER);
	assert_int_equal(fakes[2].hits, 0);
	/* Another stream is unaffected: its first epoch may be anything. */
	holder_of(2, 1, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "other", "rec", 3, NULL), 0);
	assert_int_equal(fakes[2].hits, 1);
	/* A newer epoch is followed. */
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(2, 6, &fakes[0].redirect);
	holder_of(0, 5, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "stale", "rec", 3, NULL), 0);
	assert_int_equal(fakes[2].hits, 2);
}

static void test_api_client_errors(void **state)
{
	struct api_client_cfg cfg = { 0 };
	struct api_client *bad;
	struct api_secret *other;
	struct lease_holder h;
	const char *why;
	char path[64];
	FILE *fp;
	int fd;

	(void)state;
	reset();
	holder_of(0, 1, &h);
	snprintf(h.addr, sizeof(h.addr), "127.0.0.1:1"); /* nothing listens on port 1 */
	assert_int_equal(api_client_append(cl, &h, "b", "e1", "r", 1, NULL), -EHOSTUNREACH);
	h.addr[0] = '\0'; /* a holder without a star API */
	assert_int_equal(api_client_append(cl, &h, "b", "e2", "r", 1, NULL), -EHOSTUNREACH);
	/* A client with another secret is refused: -EACCES. */
	snprintf(path, sizeof(path), "/tmp/test_api_client.XXXXXX");
	fd = mkstemp(path);
	fp = fdopen(fd, "w");
	fprintf(fp, "another-secret-of-16-bytes\n");
	fclose(fp);
	assert_int_equal(api_secret_load(path, &other, &why), 0);
	cfg.secret = other;
	assert_int_equal(api_client_new(&cfg, &bad), 0);
	holder_of(0, 1, &h);
	assert_int_equal(api_client_append(bad, &h, "b", "e3", "r", 1, NULL), -EACCES);
	assert_false(fakes[0].auth_ok);
	api_client_free(bad);
	api_secret_free(other);
	unlink(path);
}

/* A holder that got the request and never answers (a paused star: the
 * kernel accepts the connection, nobody reads it), and one whose lease
 * deadline passed: -ETIMEDOUT (in doubt), not -EHOSTUNREACH; the silent
 * one bounded by timeout_ms. */
static void test_api_client_in_doubt(void **state)
{
	struct api_client_cfg cfg = { .secret = secret, .timeout_ms = 300 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct api_client *quick;
	struct lease_holder h;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)state;
	reset();
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	assert_int_equal(api_client_new(&cfg, &quick), 0);
	holder_of(0, 1, &h);
	snprintf(h.addr, sizeof(h.addr), "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
	assert_int_equal(api_client_append(quick, &h, "b", "d1", "r", 1, NULL), -ETIMEDOUT);
	close(fd);
	fakes[0].mode = FAKE_DEADLINE;
	holder_of(0, 1, &h);
	assert_int_equal(api_client_append(quick, &h, "b", "d2", "r", 1, NULL), -ETIMEDOUT);
	assert_int_equal(fakes[0].hits, 1);
	api_client_free(quick);
}

static void test_api_client_read_and_end(void **state)
{
	struct lease_holder h;
	uint64_t seq = 0, byte = 0;
	char buf[16];
	size_t got = 0;

	(void)state;
	reset();
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(1, 2, &fakes[0].redirect);
	holder_of(0, 1, &h);
	assert_int_equal(api_client_read(cl, &h, "b", "rd", 0, buf, sizeof(buf), &got), 0);
	assert_int_equal(got, 5);
	assert_memory_equal(buf, "hello", 5);
	assert_string_equal(fakes[1].last_url, "/v1/streams/b/rd/bytes");
	/* Past the holder's acked end (416): nothing to read, no error. */
	holder_of(1, 2, &h);
	assert_int_equal(api_client_read(cl, &h, "b", "rd", 99, buf, sizeof(buf), &got), 0);
	assert_int_equal(got, 0);
	assert_int_equal(api_client_end(cl, &h, "b", "rd", &seq, &byte), 0);
	assert_int_equal(seq, 8);
	assert_int_equal(byte, 40);
}

struct seen {
	uint64_t off[4];
	char data[4][8];
	int n;
};

static int on_range(void *arg, uint64_t off, const void *data, size_t len)
{
	struct seen *s = arg;

	if (!data)
		return 0; /* a heartbeat */
	assert_true(s->n < 4 && len < 8);
	s->off[s->n] = off;
	memcpy(s->data[s->n], data, len);
	s->data[s->n][len] = '\0';
	s->n++;
	return 0;
}

static void test_api_client_subscribe_resumes(void **state)
{
	struct lease_holder h;
	struct seen s = { .n = 0 };

	(void)state;
	reset();
	fakes[0].mode = FAKE_SUB_MOVES;
	holder_of(1, 2, &fakes[0].redirect);
	holder_of(0, 1, &h);
	/* star0 pushes 3 bytes at 10 and says star1 leads now; star1 is
	 * dialed once at the cursor (13), pushes 2 bytes and stops. */
	assert_int_equal(api_client_subscribe(cl, &h, "b", "sub", 10, on_range, &s), -EAGAIN);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.off[0], 10);
	assert_string_equal(s.data[0], "abc");
	assert_int_equal(s.off[1], 13);
	assert_string_equal(s.data[1], "xy");
	assert_string_equal(fakes[0].last_offset, "10");
	assert_string_equal(fakes[1].last_offset, "13");
	assert_int_equal(fakes[1].hits, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_api_client_append_direct),
		cmocka_unit_test(test_api_client_redial_once),
		cmocka_unit_test(test_api_client_redial_not_twice),
		cmocka_unit_test(test_api_client_stale_redirect),
		cmocka_unit_test(test_api_client_errors),
		cmocka_unit_test(test_api_client_in_doubt),
		cmocka_unit_test(test_api_client_read_and_end),
		cmocka_unit_test(test_api_client_subscribe_resumes),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
