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
 * named holder, the quiet look at a silent holder (api_sub_quiet_fn),
 * locate, trim, and the "any star" holder (epoch 0) the Gateway dials.  And
 * client.h invariant 5: a stream id is sent on every dial (X-Nova-Stream-Id)
 * and only then; the holder's 404 stream_moved is -ESTALE for every
 * per-stream call, a plain 404 still -ENOENT; the epoch memory of a call
 * with an id is the id's (a new stream under an old name is not stale, a
 * renamed one keeps its epochs).
 */
#include "config.h"
#include "api/client.h"
#include "api/wire.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
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
	FAKE_STAR_DOWN,   /* handoff: 503 star_down */
	FAKE_NO_STAR,     /* handoff: 404 no_such_star */
	FAKE_SUB_SILENT,  /* subscribe: one data frame, then silence (a stopped star) */
	FAKE_MOVED,       /* 404 stream_moved: another stream under the name */
	FAKE_NOT_FOUND,   /* 404 not_found: no such stream */
};

struct fake {
	struct MHD_Daemon *d;
	unsigned port;
	enum fake_mode mode;
	struct lease_holder redirect;
	int hits;
	char last_url[256];
	char last_offset[32];
	char last_seq[32];
	char last_from[NV_STREAM_NAME_MAX + 1]; /* ?from=, decoded */
	char last_body[128];
	char last_id[32];   /* X-Nova-Stream-Id, "" when not sent */
	bool auth_ok;
	struct lease_holder self; /* its own name and address */
};

static struct fake fakes[3];

/* FAKE_SUB_SILENT: its response says nothing after the first frame
 * until released (or 10 s), then ends. */
static pthread_mutex_t silent_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t silent_cond = PTHREAD_COND_INITIALIZER;
static bool silent_released;

static ssize_t silent_next(void *cls, uint64_t pos, char *buf, size_t max)
{
	static const char frame[] = "{\"offset\":10,\"length\":3}\nabc";
	struct timespec until;

	(void)cls;
	if (pos == 0 && max >= sizeof(frame) - 1) {
		memcpy(buf, frame, sizeof(frame) - 1);
		return (ssize_t)(sizeof(frame) - 1);
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&silent_lock);
	while (!silent_released &&
	       pthread_cond_timedwait(&silent_cond, &silent_lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&silent_lock);
	return MHD_CONTENT_READER_END_OF_STREAM;
}
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
	if (f->mode == FAKE_MOVED)
		return answer(c, 404, "{\"error\":\"stream_moved\",\"detail\":\"the stream under "
				 "this name is 8, not 7 (renamed or replaced)\"}");
	if (f->mode == FAKE_NOT_FOUND)
		return answer(c, 404, "{\"error\":\"not_found\",\"detail\":\"no such stream\"}");
	if (f->mode == FAKE_STAR_DOWN)
		return answer(c, 503, "{\"error\":\"star_down\",\"detail\":\"closing\"}");
	if (f->mode == FAKE_NO_STAR)
		return answer(c, 404, "{\"error\":\"no_such_star\",\"detail\":\"none\"}");
	if (strstr(url, "/handoff"))
		return answer(c, 200, "{\"leader\":\"star2\",\"epoch\":5}");
	if (strstr(url, "/rename"))
		return answer(c, 200, "{\"renamed\":true}");
	if (strstr(url, "/trim"))
		return !strcmp(f->last_seq, "40") ? answer(c, 400, "{\"error\":\"bad_request\"}")
		       : answer(c, 200, "{\"trim\":{\"seq\":80,\"byte\":4000}}");
	if (!strcmp(url, "/v1/nudge"))
		return answer(c, 200, "{\"nudged\":true}");
	if (strstr(url, "/records"))
		return answer(c, 200, "{\"seq\":7,\"end\":{\"seq\":8,\"byte\":40}}");
	if (strstr(url, "/end"))
		return strstr(url, "/old/") ? answer(c, 200, "{\"seq\":8,\"byte\":40}")
		       : answer(c, 200, "{\"seq\":8,\"byte\":40,\"trim\":{\"seq\":2,\"byte\":9}}");
	if (strstr(url, "/locate"))
		return f->last_seq[0] ? answer(c, 200, "{\"seq\":3,\"byte\":21}")
				      : answer(c, 416, "{\"error\":\"past_end\"}");
	if (strstr(url, "/bytes"))
		return strcmp(f->last_offset, "99") ? answer(c, 200, "hello")
						  : answer(c, 416, "{\"error\":\"past_end\"}");
	if (f->mode == FAKE_SUB_SILENT) {
		struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024,
									   silent_next, f, NULL);
		enum MHD_Result ret = MHD_queue_response(c, 200, r);

		MHD_destroy_response(r);
		return ret;
	}
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
	const char *seq = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seq");
	const char *from = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from");
	const char *id = MHD_lookup_connection_value(c, MHD_HEADER_KIND, API_STREAM_ID_HEADER);

	(void)method;
	(void)version;
	if (!*con_cls) {
		*con_cls = f;
		f->last_body[0] = 0;
		return MHD_YES;
	}
	if (*size) {
		size_t n = strlen(f->last_body);

		snprintf(f->last_body + n, sizeof(f->last_body) - n, "%.*s", (int)*size, data);
		*size = 0;
		return MHD_YES;
	}
	f->hits++;
	snprintf(f->last_url, sizeof(f->last_url), "%s", url);
	snprintf(f->last_offset, sizeof(f->last_offset), "%s", off ? off : "");
	snprintf(f->last_seq, sizeof(f->last_seq), "%s", seq ? seq : "");
	snprintf(f->last_from, sizeof(f->last_from), "%s", from ? from : "");
	snprintf(f->last_id, sizeof(f->last_id), "%s", id ? id : "");
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
	cfg.sub_quiet_ms = 300; /* the quiet look within the test's time */
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
	assert_int_equal(api_client_append(cl, &h, "b", "direct", 0, "rec", 3, &r), 0);
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
	assert_int_equal(api_client_append(cl, &h, "b", "moved", 0, "rec", 3, &r), 0);
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
	assert_int_equal(api_client_append(cl, &h, "b", "twice", 0, "rec", 3, NULL), -STAR_ENOTOWNER);
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
	assert_int_equal(api_client_append(cl, &h, "b", "stale", 0, "rec", 3, NULL), 0);
	/* ...then a star answers NOT_OWNER naming star2 at epoch 3: stale. */
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(2, 3, &fakes[0].redirect);
	holder_of(0, 5, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "stale", 0, "rec", 3, NULL), -STAR_ENOTOWNER);
	assert_int_equal(fakes[0].hits, 1);
	assert_int_equal(fakes[2].hits, 0);
	/* A holder handed in with an older epoch is not dialed at all. */
	holder_of(2, 4, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "stale", 0, "rec", 3, NULL), -STAR_ENOTOWNER);
	assert_int_equal(fakes[2].hits, 0);
	/* Another stream is unaffected: its first epoch may be anything. */
	holder_of(2, 1, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "other", 0, "rec", 3, NULL), 0);
	assert_int_equal(fakes[2].hits, 1);
	/* A newer epoch is followed. */
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(2, 6, &fakes[0].redirect);
	holder_of(0, 5, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "stale", 0, "rec", 3, NULL), 0);
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
	assert_int_equal(api_client_append(cl, &h, "b", "e1", 0, "r", 1, NULL), -EHOSTUNREACH);
	h.addr[0] = '\0'; /* a holder without a star API */
	assert_int_equal(api_client_append(cl, &h, "b", "e2", 0, "r", 1, NULL), -EHOSTUNREACH);
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
	assert_int_equal(api_client_append(bad, &h, "b", "e3", 0, "r", 1, NULL), -EACCES);
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
	assert_int_equal(api_client_append(quick, &h, "b", "d1", 0, "r", 1, NULL), -ETIMEDOUT);
	close(fd);
	fakes[0].mode = FAKE_DEADLINE;
	holder_of(0, 1, &h);
	assert_int_equal(api_client_append(quick, &h, "b", "d2", 0, "r", 1, NULL), -ETIMEDOUT);
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
	assert_int_equal(api_client_read(cl, &h, "b", "rd", 0, 0, buf, sizeof(buf), &got), 0);
	assert_int_equal(got, 5);
	assert_memory_equal(buf, "hello", 5);
	assert_string_equal(fakes[1].last_url, "/v1/streams/b/rd/bytes");
	/* Past the holder's acked end (416): nothing to read, no error. */
	holder_of(1, 2, &h);
	assert_int_equal(api_client_read(cl, &h, "b", "rd", 0, 99, buf, sizeof(buf), &got), 0);
	assert_int_equal(got, 0);
	assert_int_equal(api_client_end(cl, &h, "b", "rd", 0, &seq, &byte), 0);
	assert_int_equal(seq, 8);
	assert_int_equal(byte, 40);
	{
		struct api_bounds b;

		assert_int_equal(api_client_bounds(cl, &h, "b", "rd", 0, &b), 0);
		assert_true(b.end_seq == 8 && b.end_byte == 40 && b.trim_seq == 2 &&
			    b.trim_byte == 9);
		/* A star whose end names no trim point: 0, 0. */
		assert_int_equal(api_client_bounds(cl, &h, "old", "rd", 0, &b), 0);
		assert_true(b.end_seq == 8 && b.end_byte == 40 && b.trim_seq == 0 &&
			    b.trim_byte == 0);
	}
}

/* Locate (the Gateway's records by seq), and the "any star" holder of
 * epoch 0: dialed even after a higher epoch was seen for the stream,
 * its redirect checked as any other (client.h invariant 2). */
static void test_api_client_locate_any_star(void **state)
{
	struct lease_holder h, any;
	uint64_t seq = 0, byte = 0;

	(void)state;
	reset();
	holder_of(1, 7, &h);
	assert_int_equal(api_client_locate(cl, &h, "b", "loc", 0, true, 3, &seq, &byte), 0);
	assert_int_equal(seq, 3);
	assert_int_equal(byte, 21);
	assert_string_equal(fakes[1].last_url, "/v1/streams/b/loc/locate");
	assert_string_equal(fakes[1].last_seq, "3");
	/* By byte; past the end (no seq= in this fake) is -ERANGE. */
	assert_int_equal(api_client_locate(cl, &h, "b", "loc", 0, false, 25, &seq, &byte), -ERANGE);
	assert_string_equal(fakes[1].last_offset, "25");
	/* Epoch 7 is remembered; any star (epoch 0) is still dialed... */
	holder_of(0, 0, &any);
	assert_int_equal(api_client_locate(cl, &any, "b", "loc", 0, true, 3, &seq, &byte), 0);
	assert_int_equal(fakes[0].hits, 1);
	/* ...and its NOT_OWNER to an older epoch is not followed... */
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(2, 6, &fakes[0].redirect);
	assert_int_equal(api_client_locate(cl, &any, "b", "loc", 0, true, 3, &seq, &byte),
			 -STAR_ENOTOWNER);
	assert_int_equal(fakes[2].hits, 0);
	/* ...while one to the current holder is. */
	holder_of(1, 7, &fakes[0].redirect);
	assert_int_equal(api_client_locate(cl, &any, "b", "loc", 0, true, 3, &seq, &byte), 0);
	assert_int_equal(fakes[1].hits, 3);
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

/* The quiet look (api_sub_quiet_fn): a holder silent past sub_quiet_ms
 * is looked at with the holder dialed, about every second, until the
 * look says stop; its value ends the subscription (not the 20 s silence
 * bound). */
struct quiet {
	int looks;
	struct lease_holder at;
};

static int on_quiet(void *arg, const struct lease_holder *at)
{
	struct quiet *q = arg;

	q->at = *at;
	return ++q->looks == 2 ? 7 : 0;
}

static int on_quiet_range(void *arg, uint64_t off, const void *data, size_t len)
{
	(void)arg;
	(void)off;
	(void)data;
	(void)len;
	return 0;
}

static void test_api_client_subscribe_quiet(void **state)
{
	struct lease_holder h;
	struct quiet q = { .looks = 0 };
	struct timespec t0, t1;
	double el;

	(void)state;
	reset();
	fakes[0].mode = FAKE_SUB_SILENT;
	silent_released = false;
	holder_of(0, 4, &h);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(api_client_subscribe_watch(cl, &h, "b", "quiet", 0, 10, on_quiet_range,
						    on_quiet, &q), 7);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_int_equal(q.looks, 2);
	assert_string_equal(q.at.star, "star0");
	assert_int_equal(q.at.epoch, 4);
	assert_true(el >= 0.3 && el < 10); /* after the quiet bound, long before 20 s */
	pthread_mutex_lock(&silent_lock);
	silent_released = true;
	pthread_cond_broadcast(&silent_cond);
	pthread_mutex_unlock(&silent_lock);
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
	assert_int_equal(api_client_subscribe(cl, &h, "b", "sub", 0, 10, on_range, &s), -EAGAIN);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.off[0], 10);
	assert_string_equal(s.data[0], "abc");
	assert_int_equal(s.off[1], 13);
	assert_string_equal(s.data[1], "xy");
	assert_string_equal(fakes[0].last_offset, "10");
	assert_string_equal(fakes[1].last_offset, "13");
	assert_int_equal(fakes[1].hits, 1);
}

/* Handoff at the holder: the target in the body, the new holder back; a
 * NOT_OWNER redialed once; the holder's refusals by their codes. */
static void test_api_client_handoff(void **state)
{
	struct lease_holder h, nh;

	(void)state;
	reset();
	holder_of(0, 1, &h);
	assert_int_equal(api_client_handoff(cl, &h, "b", "ho", 0, "star2", &nh), 0);
	assert_string_equal(nh.star, "star2");
	assert_int_equal(nh.epoch, 5);
	assert_string_equal(fakes[0].last_url, "/v1/streams/b/ho/handoff");
	assert_string_equal(fakes[0].last_body, "{\"to\":\"star2\"}");
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(1, 2, &fakes[0].redirect);
	assert_int_equal(api_client_handoff(cl, &h, "b", "ho2", 0, "star2", &nh), 0);
	assert_int_equal(fakes[1].hits, 1);
	assert_string_equal(fakes[1].last_body, "{\"to\":\"star2\"}");
	holder_of(1, 3, &h);
	fakes[1].mode = FAKE_STAR_DOWN;
	assert_int_equal(api_client_handoff(cl, &h, "b", "ho3", 0, "star2", &nh), -EHOSTDOWN);
	fakes[1].mode = FAKE_NO_STAR;
	assert_int_equal(api_client_handoff(cl, &h, "b", "ho3", 0, "nosuch", &nh), -ENOENT);
}

/* Invariant 5: the id goes on every dial of a call given one (the
 * redial too), never on one without; the holder's stream_moved is
 * -ESTALE for each per-stream call, its not_found -ENOENT. */
static void test_api_client_stream_id(void **state)
{
	struct lease_holder h, nh;
	struct api_bounds b;
	struct seen s = { .n = 0 };
	uint64_t seq, byte;
	char buf[16];
	size_t got = 9;

	(void)state;
	reset();
	holder_of(0, 1, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "ids", 7, "rec", 3, NULL), 0);
	assert_string_equal(fakes[0].last_id, "7");
	assert_int_equal(api_client_append(cl, &h, "b", "noid", 0, "rec", 3, NULL), 0);
	assert_string_equal(fakes[0].last_id, ""); /* by name alone: no header */
	/* A NOT_OWNER redial sends it again. */
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(1, 2, &fakes[0].redirect);
	assert_int_equal(api_client_read(cl, &h, "b", "ids", 7, 0, buf, sizeof(buf), &got), 0);
	assert_string_equal(fakes[0].last_id, "7");
	assert_string_equal(fakes[1].last_id, "7");
	/* stream_moved: -ESTALE, for every per-stream call. */
	reset();
	fakes[1].mode = FAKE_MOVED;
	holder_of(1, 2, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "ids", 7, "rec", 3, NULL), -ESTALE);
	got = 9;
	assert_int_equal(api_client_read(cl, &h, "b", "ids", 7, 0, buf, sizeof(buf), &got),
			 -ESTALE);
	assert_int_equal(got, 0);
	assert_int_equal(api_client_end(cl, &h, "b", "ids", 7, &seq, &byte), -ESTALE);
	assert_int_equal(api_client_bounds(cl, &h, "b", "ids", 7, &b), -ESTALE);
	assert_int_equal(api_client_locate(cl, &h, "b", "ids", 7, true, 0, &seq, &byte), -ESTALE);
	assert_int_equal(api_client_delete(cl, &h, "b", "ids", 7), -ESTALE);
	assert_int_equal(api_client_handoff(cl, &h, "b", "ids", 7, "star2", &nh), -ESTALE);
	assert_int_equal(api_client_subscribe(cl, &h, "b", "ids", 7, 0, on_range, &s), -ESTALE);
	assert_int_equal(api_client_rename(cl, &h, "b", "ids", 7, "src"), -ESTALE);
	assert_int_equal(s.n, 0);
	assert_int_equal(fakes[1].hits, 9);
	assert_string_equal(fakes[1].last_id, "7");
	/* A plain 404 is still -ENOENT: the caller tells the two apart. */
	fakes[1].mode = FAKE_NOT_FOUND;
	assert_int_equal(api_client_append(cl, &h, "b", "ids", 7, "rec", 3, NULL), -ENOENT);
	assert_int_equal(api_client_append(cl, &h, "b", "ids", 0, "rec", 3, NULL), -ENOENT);
}

/* Invariant 5, epochs: by name, epoch 5 of b/reuse makes epoch 1 under
 * that name stale; a call naming a new stream's id under it is not (its
 * epochs are its own), while the renamed stream keeps its memory under
 * its new name. */
static void test_api_client_stream_id_epochs(void **state)
{
	struct lease_holder h;

	(void)state;
	reset();
	holder_of(0, 5, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "reuse", 0, "r", 1, NULL), 0);
	assert_int_equal(api_client_append(cl, &h, "b", "reuse", 11, "r", 1, NULL), 0);
	holder_of(0, 1, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "reuse", 0, "r", 1, NULL), -STAR_ENOTOWNER);
	assert_int_equal(api_client_append(cl, &h, "b", "reuse", 12, "r", 1, NULL), 0);
	/* Stream 11 renamed to b/moved: still at epoch 5. */
	holder_of(0, 4, &h);
	assert_int_equal(api_client_append(cl, &h, "b", "moved", 11, "r", 1, NULL),
			 -STAR_ENOTOWNER);
	assert_int_equal(fakes[0].hits, 3);
}

/* Trim: POST .../trim?seq= or ?offset=, the holder's trim point back;
 * its 400 (never backwards) is -EINVAL; a NOT_OWNER is redialed once. */
static void test_api_client_trim(void **state)
{
	struct lease_holder h;
	uint64_t seq = 0, byte = 0;

	(void)state;
	reset();
	holder_of(0, 1, &h);
	assert_int_equal(api_client_trim(cl, &h, "b", "tr", 0, true, 80, &seq, &byte), 0);
	assert_int_equal(seq, 80);
	assert_int_equal(byte, 4000);
	assert_string_equal(fakes[0].last_url, "/v1/streams/b/tr/trim");
	assert_string_equal(fakes[0].last_seq, "80");
	assert_string_equal(fakes[0].last_offset, "");
	assert_int_equal(api_client_trim(cl, &h, "b", "tr", 0, false, 3000, &seq, &byte), 0);
	assert_string_equal(fakes[0].last_offset, "3000");
	assert_string_equal(fakes[0].last_seq, "");
	assert_int_equal(api_client_trim(cl, &h, "b", "tr", 0, true, 40, &seq, &byte), -EINVAL);
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(1, 2, &fakes[0].redirect);
	assert_int_equal(api_client_trim(cl, &h, "b", "tr2", 0, true, 80, &seq, &byte), 0);
	assert_int_equal(fakes[1].hits, 1);
	assert_string_equal(fakes[1].last_url, "/v1/streams/b/tr2/trim");
	assert_string_equal(fakes[1].last_seq, "80");
}

/* Rename over a stream: POST .../TARGET/rename?from=SOURCE (the source
 * escaped, decoded again by the holder) with the target's id; a
 * NOT_OWNER is redialed once; not_found (no source) is -ENOENT. */
static void test_api_client_rename(void **state)
{
	struct lease_holder h;

	(void)state;
	reset();
	holder_of(0, 1, &h);
	assert_int_equal(api_client_rename(cl, &h, "b", "log", 23, "app 1&x=y"), 0);
	assert_string_equal(fakes[0].last_url, "/v1/streams/b/log/rename");
	assert_string_equal(fakes[0].last_from, "app 1&x=y");
	assert_string_equal(fakes[0].last_id, "23");
	fakes[0].mode = FAKE_NOT_OWNER;
	holder_of(1, 2, &fakes[0].redirect);
	assert_int_equal(api_client_rename(cl, &h, "b", "log2", 24, "app"), 0);
	assert_int_equal(fakes[1].hits, 1);
	assert_string_equal(fakes[1].last_url, "/v1/streams/b/log2/rename");
	assert_string_equal(fakes[1].last_from, "app");
	assert_string_equal(fakes[1].last_id, "24");
	fakes[1].mode = FAKE_NOT_FOUND;
	assert_int_equal(api_client_rename(cl, &fakes[0].redirect, "b", "log2", 24, "gone"),
			 -ENOENT);
}

/* Nudge: POST /v1/nudge naming the sender; a star nobody serves is
 * unreachable. */
static void test_api_client_nudge(void **state)
{
	char addr[32];

	(void)state;
	reset();
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", fakes[2].port);
	assert_int_equal(api_client_nudge(cl, addr, "star0"), 0);
	assert_string_equal(fakes[2].last_url, "/v1/nudge");
	assert_string_equal(fakes[2].last_body, "{\"star\":\"star0\"}");
	assert_int_equal(api_client_nudge(cl, "", "star0"), -EHOSTUNREACH);
	assert_int_equal(api_client_nudge(cl, "127.0.0.1:1", "star0"), -EHOSTUNREACH);
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
		cmocka_unit_test(test_api_client_subscribe_quiet),
		cmocka_unit_test(test_api_client_locate_any_star),
		cmocka_unit_test(test_api_client_handoff),
		cmocka_unit_test(test_api_client_nudge),
		cmocka_unit_test(test_api_client_stream_id),
		cmocka_unit_test(test_api_client_stream_id_epochs),
		cmocka_unit_test(test_api_client_trim),
		cmocka_unit_test(test_api_client_rename),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
