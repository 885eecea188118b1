/*
 * test_s3_cache.c - unit tests of the S3 backend's object cache tier
 * (engine/store/s3/cache.c): the cache_* URL options (s3_cache_parse():
 * no tier without cache=, cache_* without cache= refused, the numbers'
 * ranges, the tier they make), and ranged gets through the tier against
 * a scripted origin and a scripted proxy (threads of this process on
 * 127.0.0.1): a healthy proxy serves every piece and the origin is never
 * asked; a proxy answering 5xx or refusing connections, and one that
 * stalls until the hedge, leave every piece to a direct ranged GET with
 * the object's bytes, counted in the tier's closing report (pieces
 * through proxies, straight to the bucket, proxy failures).  The stalled
 * proxy answers only after the origin has served the piece, so no case
 * races a clock (make memcheck, a loaded machine).
 *
 * Not for: the ring, bounded loads and down-marking (test_store_tier.c:
 * engine/store/tier.c), real nginx proxies, a proxy killed mid-read and
 * purges (tests/s3/t_cache_tier.sh runs nginx in front of s3rver).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/store/s3/internal.h"
#include "engine/store/store.h"
#include "src/base/log.h"

#define TOKEN "0123456789abcdef0123"

static char tok_path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	nv_log_level = -1;
	snprintf(tok_path, sizeof(tok_path), "/tmp/test_s3_cache.%d", (int)getpid());
	fd = open(tok_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, TOKEN "\n", 21), 21);
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(tok_path);
	return 0;
}

static int parse(const char *list, const char *slice, const char *auth)
{
	struct s3_store s = { 0 };
	struct s3_cache_opts o = { list, slice, NULL, NULL, auth };
	int rc = s3_cache_parse(&s, "s3://b", &o);

	if (rc == 0)
		s3_cache_free(s.cache);
	return rc;
}

static void test_options(void **state)
{
	struct s3_store s = { 0 };
	struct s3_cache_opts none = { 0 }, stray = { NULL, "64", NULL, NULL, NULL };
	char bad[80];
	int fd;

	(void)state;
	assert_int_equal(s3_cache_parse(&s, "s3://b", &none), 0);
	assert_null(s.cache); /* no tier without cache= */
	assert_int_equal(s3_cache_parse(&s, "s3://b", &stray), -EINVAL);
	assert_int_equal(parse("http://a:1", NULL, NULL), -EINVAL); /* token needed */
	assert_int_equal(parse("http://a:1+http://b:2", "1024", tok_path), 0);
	assert_int_equal(parse("ftp://a:1", NULL, tok_path), -EINVAL);
	assert_int_equal(parse("http://a:1/path", NULL, tok_path), -EINVAL);
	assert_int_equal(parse("http://a:1?x=1", NULL, tok_path), -EINVAL);
	assert_int_equal(parse("http://a:1++http://b:2", NULL, tok_path), -EINVAL);
	assert_int_equal(parse("", NULL, tok_path), -EINVAL);
	assert_int_equal(parse("http://a:1", "32", tok_path), -EINVAL); /* slice too small */
	assert_int_equal(parse("http://a:1", "x", tok_path), -EINVAL);
	assert_int_equal(parse("http://a:1", NULL, "/nonexistent/token"), -EINVAL);
	assert_int_equal(parse("http://a:1", "65537", tok_path), -EINVAL);

	/* What the options make: the knobs given and the defaults. */
	{
		struct s3_cache_opts o = { "http://a:1+http://b:2", "64", "20", NULL, tok_path };

		assert_int_equal(s3_cache_parse(&s, "s3://b", &o), 0);
		assert_non_null(s.cache);
		assert_int_equal(s.cache->n, 2);
		assert_int_equal(s.cache->slice, 64u << 10);
		assert_int_equal(s.cache->hedge_ms, 20);
		assert_int_equal(s.cache->eps_pct, STORE_TIER_EPS_PCT_DEFAULT);
		s3_cache_free(s.cache);
		s.cache = NULL;
	}

	/* A token others may read, a short one, one with a space. */
	snprintf(bad, sizeof(bad), "%s.bad", tok_path);
	fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef0123", 20), 20);
	fchmod(fd, 0644);
	close(fd);
	assert_int_equal(parse("http://a:1", NULL, bad), -EINVAL);
	fd = open(bad, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "short", 5), 5);
	fchmod(fd, 0600);
	close(fd);
	assert_int_equal(parse("http://a:1", NULL, bad), -EINVAL);
	fd = open(bad, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "0123456789 abcdef0123", 21), 21);
	close(fd);
	assert_int_equal(parse("http://a:1", NULL, bad), -EINVAL);
	unlink(bad);

	/* At most 64 proxies. */
	{
		char list[65 * 24] = "";

		for (int i = 0; i < 65; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list),
				 "%shttp://h%d:1", i ? "+" : "", i);
		assert_int_equal(parse(list, NULL, tok_path), -EINVAL);
	}
}

/* ------------------------------------------------ reads through the tier */

/*
 * A scripted origin (the bucket) and a scripted caching proxy in front of
 * it, each a thread of this process on 127.0.0.1 answering one request
 * per connection (Connection: close), both serving ranges of one object
 * of OBJ_SIZE pattern bytes.  All their counters are under fk_lock;
 * fk_cond is signalled whenever the origin serves a range.
 *
 * The proxy's modes: PX_CLEAN answers 206 with the range (only with the
 * tier's token and the origin's Host); PX_5XX answers 502; PX_STALL
 * answers nothing until the origin has served the same range, i.e.
 * until the read has gone direct after its hedge, and then closes.  So
 * the hedge case races no clock: the proxy never answers first, however
 * slow the machine (valgrind); the hedge itself is the only timer.  A
 * stall ends unanswered after STALL_MAX_S only when the fallback never
 * comes (a broken cache.c): it then answers, and the case fails on the
 * origin's count instead of hanging.
 */
#define OBJ_KEY "obj/a"
#define OBJ_SIZE 200000u                /* three 64 KiB slices and a bit */
#define SLICE (64u << 10)               /* cache_slice_kib=64, the minimum */
#define STALL_MAX_S 30
#define FK_RANGES 16

enum px_mode { PX_CLEAN, PX_5XX, PX_STALL };

struct fk_srv {
	int lfd, port;
	pthread_t th;
	bool running;                   /* between fk_start() and fk_stop() */
	bool origin;
	enum px_mode mode;              /* proxy only; under fk_lock */
	int gets, refused;              /* under fk_lock */
	char ranges[FK_RANGES][48];     /* origin: the ranges served; under fk_lock */
	int nranges;                    /* under fk_lock */
	bool stop;                      /* under fk_lock */
	char head[16384];               /* the request; this thread's */
};

static pthread_mutex_t fk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fk_cond = PTHREAD_COND_INITIALIZER;
static struct fk_srv origin, proxy;

static uint8_t obj_byte(uint64_t i)
{
	return (uint8_t)(i * 131u + (i >> 9) + 7u);
}

/* The head of one request into buf (cap bytes, NUL-terminated); its
 * length, or <= 0 when the peer closed first. */
static ssize_t fk_read_head(int fd, char *buf, size_t cap)
{
	size_t len = 0;

	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);

		if (n <= 0)
			return n < 0 ? -1 : (ssize_t)len;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	return (ssize_t)len;
}

/* The value of header name (lower case, with its ':') of head into out
 * (cap bytes): false when absent. */
static bool fk_header(const char *head, const char *name, char *out, size_t cap)
{
	const char *p = head, *e;

	while ((p = strstr(p, "\r\n"))) {
		p += 2;
		if (!strncasecmp(p, name, strlen(name))) {
			p += strlen(name);
			while (*p == ' ')
				p++;
			e = strstr(p, "\r\n");
			snprintf(out, cap, "%.*s", (int)(e ? e - p : (ptrdiff_t)strlen(p)), p);
			return true;
		}
	}
	return false;
}

static void fk_send(int fd, const void *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return; /* the reader went away (a hedge): nothing to do */
		p = (const char *)p + w;
		n -= (size_t)w;
	}
}

static void fk_status(int fd, const char *status)
{
	char h[160];
	int n = snprintf(h, sizeof(h), "HTTP/1.1 %s\r\nConnection: close\r\n"
			 "Content-Length: 0\r\n\r\n", status);

	fk_send(fd, h, (size_t)n);
}

/* 206 with bytes [a, b] of the object (b inside it). */
static void fk_range(int fd, unsigned long long a, unsigned long long b)
{
	char h[200];
	int n = snprintf(h, sizeof(h), "HTTP/1.1 206 Partial Content\r\nConnection: close\r\n"
			 "Content-Range: bytes %llu-%llu/%u\r\nContent-Length: %llu\r\n\r\n",
			 a, b, OBJ_SIZE, b - a + 1);
	uint8_t *buf = malloc((size_t)(b - a + 1));

	if (!buf) {
		fk_status(fd, "500 Internal Server Error");
		return;
	}
	for (unsigned long long i = a; i <= b; i++)
		buf[i - a] = obj_byte(i);
	fk_send(fd, h, (size_t)n);
	fk_send(fd, buf, (size_t)(b - a + 1));
	free(buf);
}

/* The origin has served range (under fk_lock). */
static bool origin_served(const char *range)
{
	for (int i = 0; i < origin.nranges; i++)
		if (!strcmp(origin.ranges[i], range))
			return true;
	return false;
}

/* PX_STALL: wait (fk_lock held) until the origin served range, stop, or
 * STALL_MAX_S; true when the origin served it. */
static bool stall(const char *range)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += STALL_MAX_S;
	while (!origin_served(range) && !proxy.stop)
		if (pthread_cond_timedwait(&fk_cond, &fk_lock, &until) == ETIMEDOUT)
			break;
	return origin_served(range);
}

/* One request on fd to f. */
static void fk_serve(struct fk_srv *f, int fd)
{
	char *head = f->head;
	char range[48], tok[64], host[64], want_host[32];
	unsigned long long a, b;
	enum px_mode mode;
	bool ok;

	if (fk_read_head(fd, head, sizeof(f->head)) <= 0)
		return;
	ok = fk_header(head, "range:", range, sizeof(range)) &&
	     sscanf(range, "bytes=%llu-%llu", &a, &b) == 2 && a <= b && a < OBJ_SIZE &&
	     !strncmp(head, "GET /bkt/" OBJ_KEY " ", 9 + strlen(OBJ_KEY) + 1);
	if (ok && b >= OBJ_SIZE)
		b = OBJ_SIZE - 1;
	pthread_mutex_lock(&fk_lock);
	f->gets++;
	mode = f->mode;
	if (f->origin) {
		if (ok && f->nranges < FK_RANGES)
			snprintf(f->ranges[f->nranges++], sizeof(f->ranges[0]), "%s", range);
		pthread_cond_broadcast(&fk_cond);
		pthread_mutex_unlock(&fk_lock);
		if (ok)
			fk_range(fd, a, b);
		else
			fk_status(fd, "400 Bad Request");
		return;
	}
	/* The proxy: the tier's token and the origin's own Host, always. */
	snprintf(want_host, sizeof(want_host), "127.0.0.1:%d", origin.port);
	if (!fk_header(head, "x-nova-cache-auth:", tok, sizeof(tok)) || strcmp(tok, TOKEN) ||
	    !fk_header(head, "host:", host, sizeof(host)) || strcmp(host, want_host)) {
		f->refused++;
		ok = false;
	}
	if (ok && mode == PX_STALL && stall(range)) {
		pthread_mutex_unlock(&fk_lock);
		return; /* the read went direct: close unanswered */
	}
	pthread_mutex_unlock(&fk_lock);
	if (!ok)
		fk_status(fd, "403 Forbidden");
	else if (mode == PX_5XX)
		fk_status(fd, "502 Bad Gateway");
	else
		fk_range(fd, a, b);
}

static void *fk_main(void *arg)
{
	struct fk_srv *f = arg;

	for (;;) {
		int fd = accept(f->lfd, NULL, NULL);
		bool stop;

		if (fd < 0)
			return NULL;
		pthread_mutex_lock(&fk_lock);
		stop = f->stop;
		pthread_mutex_unlock(&fk_lock);
		if (!stop)
			fk_serve(f, fd);
		close(fd);
		if (stop)
			return NULL;
	}
}

static void fk_start(struct fk_srv *f, bool is_origin, enum px_mode mode)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);

	memset(f, 0, sizeof(*f));
	f->origin = is_origin;
	f->mode = mode;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &al), 0);
	f->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&f->th, NULL, fk_main, f), 0);
	f->running = true;
}

/* Stop f: a stalled answer ends, accept() is woken by one last
 * connection. */
static void fk_stop(struct fk_srv *f)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd;

	if (!f->running)
		return;
	f->running = false;
	pthread_mutex_lock(&fk_lock);
	f->stop = true;
	pthread_cond_broadcast(&fk_cond);
	pthread_mutex_unlock(&fk_lock);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)f->port);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd >= 0) {
		(void)connect(fd, (struct sockaddr *)&a, sizeof(a));
		close(fd);
	}
	pthread_join(f->th, NULL);
	close(f->lfd);
}

/* After each case, also a failed one: no server left running. */
static int fk_teardown(void **state)
{
	(void)state;
	fk_stop(&proxy);
	fk_stop(&origin);
	return 0;
}

/* A port nobody listens on (bound, then closed). */
static int dead_port(void)
{
	struct fk_srv f;
	int port;

	fk_start(&f, true, PX_CLEAN);
	port = f.port;
	fk_stop(&f);
	return port;
}

/* The S3 store on the origin with the tier of one proxy at px_port and
 * hedge_ms; no retries (one direct GET per piece). */
static struct store *tier_store(int px_port, long hedge_ms)
{
	char url[512];
	struct store *s = NULL;

	snprintf(url, sizeof(url),
		 "s3://bkt?endpoint=http://127.0.0.1:%d&access_key=AK&secret_key=SK&retries=0"
		 "&cache=http://127.0.0.1:%d&cache_auth_file=%s&cache_slice_kib=%u"
		 "&cache_hedge_ms=%ld", origin.port, px_port, tok_path, SLICE >> 10, hedge_ms);
	assert_int_equal(store_open(url, &s), 0);
	return s;
}

/* The tier's counters, from the store's closing report (cache.c
 * s3_cache_report(), the line t_cache_tier.sh reads in the daemon's log):
 * stderr goes to a file while s closes. */
struct tier_counts {
	unsigned long long gets, direct, fails;
};

static void close_counts(struct store *s, struct tier_counts *n)
{
	char path[80], buf[8192];
	const char *p;
	int fd, saved, level = nv_log_level, nproxies = 0;
	ssize_t len;

	snprintf(path, sizeof(path), "%s.log", tok_path);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fd, STDERR_FILENO) >= 0);
	nv_log_level = NV_INFO;
	store_close(s);
	nv_log_level = level;
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	len = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(path);
	assert_true(len > 0);
	buf[len] = '\0';
	p = strstr(buf, "cache tier: ");
	assert_non_null(p);
	assert_int_equal(sscanf(p, "cache tier: %llu pieces through %d proxies, %llu straight to "
				"the bucket, %llu proxy failures", &n->gets, &nproxies, &n->direct,
				&n->fails), 4);
	assert_int_equal(nproxies, 1);
}

/* Read [off, off + len) of the object through s: every byte the
 * object's. */
static void read_check(struct store *s, uint64_t off, size_t len)
{
	uint8_t *buf = malloc(len);
	size_t got = 0;

	assert_non_null(buf);
	assert_int_equal(store_get_range(s, OBJ_KEY, off, len, buf, &got), 0);
	assert_int_equal(got, len);
	for (size_t i = 0; i < len; i++)
		if (buf[i] != obj_byte(off + i))
			fail_msg("byte %zu of the read (object offset %llu) is wrong", i,
				 (unsigned long long)(off + i));
	free(buf);
}

static int fk_count(const int *field)
{
	int v;

	pthread_mutex_lock(&fk_lock);
	v = *field;
	pthread_mutex_unlock(&fk_lock);
	return v;
}

/* Two pieces: [SLICE - 1000, SLICE) and [SLICE, SLICE + 5000). */
#define READ_OFF (SLICE - 1000u)
#define READ_LEN 6000u
#define READ_PIECES 2

/* A healthy proxy serves every piece: the origin is never asked, the
 * proxy got the token and the origin's Host.  The hedge is the longest
 * allowed (60 s), so no clock decides anything. */
static void test_s3_cache_clean(void **state)
{
	struct tier_counts n;
	struct store *s;

	(void)state;
	fk_start(&origin, true, PX_CLEAN);
	fk_start(&proxy, false, PX_CLEAN);
	s = tier_store(proxy.port, STORE_TIER_HEDGE_MS_MAX);
	read_check(s, READ_OFF, READ_LEN);
	close_counts(s, &n);
	assert_int_equal(fk_count(&origin.gets), 0);
	assert_int_equal(fk_count(&proxy.gets), READ_PIECES);
	assert_int_equal(fk_count(&proxy.refused), 0);
	assert_int_equal(n.gets, READ_PIECES);
	assert_int_equal(n.direct, 0);
	assert_int_equal(n.fails, 0);
}

/* A proxy that answers 502, and one that refuses connections: every
 * piece comes from the origin with the object's bytes; each failure is
 * a piece gone direct and a down-marking.  (After the first failure the
 * proxy is down for STORE_TIER_DOWN_MS: the second piece skips it, or
 * on a slow enough machine asks it again and fails again; the counts
 * are tied to the proxy's requests, not to the clock.) */
static void test_s3_cache_proxy_fails(void **state)
{
	struct tier_counts n;
	struct store *s;

	(void)state;
	fk_start(&origin, true, PX_CLEAN);
	fk_start(&proxy, false, PX_5XX);
	s = tier_store(proxy.port, STORE_TIER_HEDGE_MS_MAX);
	read_check(s, READ_OFF, READ_LEN);
	close_counts(s, &n);
	assert_int_equal(fk_count(&origin.gets), READ_PIECES);
	assert_true(fk_count(&proxy.gets) >= 1);
	assert_int_equal(fk_count(&proxy.refused), 0);
	assert_int_equal(n.gets, 0);
	assert_int_equal(n.direct, (unsigned long long)fk_count(&proxy.gets));
	assert_int_equal(n.fails, n.direct);
	fk_stop(&proxy);
	fk_stop(&origin);

	/* Connection refused. */
	fk_start(&origin, true, PX_CLEAN);
	s = tier_store(dead_port(), STORE_TIER_HEDGE_MS_MAX);
	read_check(s, READ_OFF, READ_LEN);
	close_counts(s, &n);
	assert_int_equal(fk_count(&origin.gets), READ_PIECES);
	assert_int_equal(n.gets, 0);
	assert_true(n.direct >= 1);
	assert_int_equal(n.fails, n.direct);
}

/* A proxy that stalls: each piece is hedged and read direct, the bytes
 * the origin's; a hedge is no failure (the proxy is not marked down, so
 * it is asked for the second piece too).  The stall ends only when the
 * origin has served the piece (see above), so the order is fixed: the
 * proxy's request, the hedge, the direct GET, then the proxy's close.
 * cache_hedge_ms=1000: also the connect timeout of a proxy request
 * (request.c), which a connect on 127.0.0.1 never nears. */
static void test_s3_cache_hedge(void **state)
{
	struct tier_counts n;
	struct store *s;

	(void)state;
	fk_start(&origin, true, PX_CLEAN);
	fk_start(&proxy, false, PX_STALL);
	s = tier_store(proxy.port, 1000);
	read_check(s, READ_OFF, READ_LEN);
	close_counts(s, &n);
	assert_int_equal(fk_count(&origin.gets), READ_PIECES);
	assert_int_equal(fk_count(&proxy.gets), READ_PIECES);
	assert_int_equal(fk_count(&proxy.refused), 0);
	assert_int_equal(n.gets, 0);
	assert_int_equal(n.direct, READ_PIECES);
	assert_int_equal(n.fails, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options),
		cmocka_unit_test_teardown(test_s3_cache_clean, fk_teardown),
		cmocka_unit_test_teardown(test_s3_cache_proxy_fails, fk_teardown),
		cmocka_unit_test_teardown(test_s3_cache_hedge, fk_teardown),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
