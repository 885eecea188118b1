/*
 * test_s3.c - unit tests of engine/store/s3/ without a real server: URL
 * parsing, s3_to_errno(), and the request loop (retries, what is and is
 * not retried, ETag checks, 200-with-<Error>, hostile answers) against a
 * scripted HTTP server on 127.0.0.1 in a thread of this process.
 *
 * Not for: S3 semantics (test_store_conformance.c runs those against
 * s3rver and Ceph RGW).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/store/s3.h"
#include "engine/store/store.h"
#include "src/base/log.h"

static int saved_level;
static void quiet(void)
{
	saved_level = nv_log_level;
	nv_log_level = -1;
}
static void loud(void)
{
	nv_log_level = saved_level;
}

/* ------------------------------------------------------ URL parsing */

static void test_s3_url_rejects(void **state)
{
	static const char *const bad[] = {
		"s3://", "s3://ab", "s3://bucket/x", "s3://bucket?foo=1",
		"s3://bucket?region=", "s3://bucket?region=a&region=b",
		"s3://bucket?endpoint=ftp://h", "s3://bucket?endpoint=http://h/path",
		"s3://bucket?endpoint=http://", "s3://bucket?endpoint=http://h:0",
		"s3://bucket?endpoint=http://h:99999", "s3://bucket?endpoint=http://u@h",
		"s3://bucket?path_style=2", "s3://bucket?retries=99",
		"s3://bucket?retries=x", "s3://bucket?max_connections=0",
		"s3://bucket?list_max_keys=1001", "s3://bucket?prefix=/a",
		"s3://bucket?prefix=a//b", "s3://bucket?prefix=a%20b",
		"s3://bucket?access_key=K", "s3://bucket?secret_key=S",
		"s3://bucket?region=%zz", "s3://bucket?region=%00x",
		"s3://bucket?region=us-east-1&", "s3://bucket?region",
		"s3://bucket?zone=a/b", "s3://Bad_Bucket",
		"s3://bucket?endpoint=http://127.0.0.1:9000&path_style=0",
		"s3://-bucket?path_style=1", "s3://bucket?sign_payload=yes",
		"s3://bucket?connect_timeout_ms=0",
	};
	struct store *s = NULL;

	setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
	quiet();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = store_open(bad[i], &s);

		if (rc != -EINVAL)
			fail_msg("'%s' gave %d, want -EINVAL", bad[i], rc);
	}
	/* No credentials anywhere. */
	unsetenv("AWS_ACCESS_KEY_ID");
	assert_int_equal(store_open("s3://bucket", &s), -EINVAL);
	loud();
}

static void test_s3_url_accepts(void **state)
{
	struct store *s = NULL;

	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	assert_int_equal(store_open("s3://bucket?endpoint=http://127.0.0.1:9000/"
				    "&access_key=a&secret_key=b%2Bc%2Fd&prefix=p/q"
				    "&zone=z1&retries=0&max_connections=3"
				    "&connect_timeout_ms=100&request_timeout_ms=1000"
				    "&sign_payload=1&list_max_keys=7", &s), 0);
	assert_string_equal(store_name(s), "s3://bucket/p/q at http://127.0.0.1:9000 zone z1");
	store_close(s);

	/* Defaults: AWS, virtual host, environment credentials. */
	setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
	setenv("AWS_SESSION_TOKEN", "token", 1);
	assert_int_equal(store_open("s3://my-bucket?region=eu-west-1", &s), 0);
	assert_string_equal(store_name(s),
			    "s3://my-bucket at https://my-bucket.s3.eu-west-1.amazonaws.com");
	store_close(s);
	assert_int_equal(store_open("s3://my-bucket?path_style=1", &s), 0);
	assert_string_equal(store_name(s), "s3://my-bucket at https://s3.us-east-1.amazonaws.com");
	store_close(s);
	assert_int_equal(store_open("s3://Legacy_Bucket?endpoint=https://[::1]:8443", &s), 0);
	assert_string_equal(store_name(s), "s3://Legacy_Bucket at https://[::1]:8443");
	store_close(s);
	assert_int_equal(store_open("s3://bkt?endpoint=http://minio.local", &s), 0);
	assert_string_equal(store_name(s), "s3://bkt at http://minio.local");
	store_close(s);
	unsetenv("AWS_SESSION_TOKEN");
}

/* store_presign(): the URL of the key under the prefix, the X-Amz-*
 * query of a GET valid for ttl_s, virtual host or path style, the
 * session token signed in; bad ttls and keys refused; the directory
 * store cannot presign. */
static void test_s3_presign(void **state)
{
	struct store *s = NULL;
	struct nv_buf url;
	const char *u, *sig;

	(void)state;
	unsetenv("AWS_SESSION_TOKEN");
	nv_buf_init(&url, 8192);
	assert_int_equal(store_open("s3://bkt?endpoint=http://127.0.0.1:9000&access_key=AK"
				    "&secret_key=SK&prefix=p/q", &s), 0);
	assert_int_equal(store_presign(s, "streams/b/7/0000000000000001/0000000000000000~1", 60,
				       &url), 0);
	u = (const char *)url.ptr;
	assert_int_equal(strncmp(u, "http://127.0.0.1:9000/bkt/p/q/streams/b/7/"
				 "0000000000000001/0000000000000000~1?X-Amz-Algorithm="
				 "AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F", 108), 0);
	assert_non_null(strstr(u, "%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date="));
	assert_non_null(strstr(u, "&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature="));
	assert_null(strstr(u, "X-Amz-Security-Token"));
	sig = strstr(u, "X-Amz-Signature=") + 16;
	assert_int_equal(strlen(sig), 64);
	assert_int_equal(strspn(sig, "0123456789abcdef"), 64);
	nv_buf_reset(&url);
	assert_int_equal(store_presign(s, "streams/x", 0, &url), -EINVAL);
	assert_int_equal(store_presign(s, "streams/x", 604801, &url), -EINVAL);
	assert_int_equal(store_presign(s, "../x", 60, &url), -EINVAL);
	store_close(s);

	setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
	setenv("AWS_SESSION_TOKEN", "tok", 1);
	assert_int_equal(store_open("s3://my-bucket?region=eu-west-1", &s), 0);
	nv_buf_reset(&url);
	assert_int_equal(store_presign(s, "streams/x", 5, &url), 0);
	u = (const char *)url.ptr;
	assert_int_equal(strncmp(u, "https://my-bucket.s3.eu-west-1.amazonaws.com/streams/x?", 55),
			 0);
	assert_non_null(strstr(u, "%2Feu-west-1%2Fs3%2Faws4_request"));
	assert_non_null(strstr(u, "&X-Amz-Security-Token=tok&"));
	store_close(s);
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");

	assert_int_equal(store_open("dir:/tmp/test_s3_presign_dir", &s), 0);
	nv_buf_reset(&url);
	assert_int_equal(store_presign(s, "streams/x", 60, &url), -ENOTSUP);
	store_close(s);
	assert_int_equal(system("rm -rf /tmp/test_s3_presign_dir"), 0);
	nv_buf_free(&url);
}

static void test_s3_to_errno(void **state)
{
	assert_int_equal(s3_to_errno(CURLE_OK, 200, NULL), 0);
	assert_int_equal(s3_to_errno(CURLE_OK, 204, ""), 0);
	assert_int_equal(s3_to_errno(CURLE_OK, 404, "NoSuchKey"), -ENOENT);
	assert_int_equal(s3_to_errno(CURLE_OK, 404, ""), -ENOENT);
	assert_int_equal(s3_to_errno(CURLE_OK, 404, "NoSuchBucket"), -EIO);
	assert_int_equal(s3_to_errno(CURLE_OK, 404, "NoSuchUpload"), -EIO);
	assert_int_equal(s3_to_errno(CURLE_OK, 412, "PreconditionFailed"), -EEXIST);
	assert_int_equal(s3_to_errno(CURLE_OK, 416, "InvalidRange"), -ERANGE);
	assert_int_equal(s3_to_errno(CURLE_OK, 501, "NotImplemented"), -ENOTSUP);
	assert_int_equal(s3_to_errno(CURLE_OK, 501, ""), -ENOTSUP);
	assert_int_equal(s3_to_errno(CURLE_OK, 403, "SignatureDoesNotMatch"), -EACCES);
	assert_int_equal(s3_to_errno(CURLE_OK, 403, "QuotaExceeded"), -ENOSPC);
	assert_int_equal(s3_to_errno(CURLE_OK, 503, "SlowDown"), -EAGAIN);
	assert_int_equal(s3_to_errno(CURLE_OK, 500, "InternalError"), -EAGAIN);
	assert_int_equal(s3_to_errno(CURLE_OK, 502, ""), -EAGAIN);
	assert_int_equal(s3_to_errno(CURLE_OK, 429, ""), -EAGAIN);
	assert_int_equal(s3_to_errno(CURLE_OK, 400, "EntityTooSmall"), -EINVAL);
	assert_int_equal(s3_to_errno(CURLE_OK, 400, "BadDigest"), -EIO);
	assert_int_equal(s3_to_errno(CURLE_OK, 400, ""), -EINVAL);
	assert_int_equal(s3_to_errno(CURLE_OK, 507, ""), -ENOSPC);
	assert_int_equal(s3_to_errno(CURLE_OK, 418, ""), -EIO);
	assert_int_equal(s3_to_errno(CURLE_OK, 200, "InternalError"), -EAGAIN);
	assert_int_equal(s3_to_errno(CURLE_OPERATION_TIMEDOUT, 0, NULL), -ETIMEDOUT);
	assert_int_equal(s3_to_errno(CURLE_COULDNT_CONNECT, 0, NULL), -EAGAIN);
	assert_int_equal(s3_to_errno(CURLE_RECV_ERROR, 0, NULL), -EAGAIN);
	assert_int_equal(s3_to_errno(CURLE_OUT_OF_MEMORY, 0, NULL), -ENOMEM);
	assert_int_equal(s3_to_errno(CURLE_PEER_FAILED_VERIFICATION, 0, NULL), -EIO);
}

/* --------------------------------------------------- scripted server */

#define SCRIPT_MAX 16

struct fake {
	int lfd;
	int port;
	pthread_t th;
	pthread_mutex_t lock;
	const char *script[SCRIPT_MAX]; /* full responses, in order */
	int nscript, next;
	int requests;
	char last_req[16384];           /* head of the last request */
	bool stop;
};

static ssize_t read_request(int fd, char *buf, size_t cap)
{
	size_t len = 0, body = 0, need = 0;
	char *end = NULL;

	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);

		if (n <= 0)
			return n < 0 ? -1 : (ssize_t)len;
		len += (size_t)n;
		buf[len] = '\0';
		if (!end && (end = strstr(buf, "\r\n\r\n"))) {
			char *cl = strcasestr(buf, "\r\ncontent-length:");

			need = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 17, NULL, 10) : 0);
		}
		if (end && len >= need)
			break;
		(void)body;
	}
	return (ssize_t)len;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	static char req[1 << 20];

	for (;;) {
		int fd = accept(f->lfd, NULL, NULL);
		const char *resp;
		ssize_t n;

		if (fd < 0)
			return NULL;
		pthread_mutex_lock(&f->lock);
		if (f->stop) {
			pthread_mutex_unlock(&f->lock);
			close(fd);
			return NULL;
		}
		pthread_mutex_unlock(&f->lock);
		n = read_request(fd, req, sizeof(req));
		pthread_mutex_lock(&f->lock);
		if (n > 0) {
			f->requests++;
			snprintf(f->last_req, sizeof(f->last_req), "%.*s", (int)n, req);
		}
		resp = f->next < f->nscript ? f->script[f->next++]
		     : "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n"
		       "Connection: close\r\n\r\n";
		pthread_mutex_unlock(&f->lock);
		if (n > 0 && write(fd, resp, strlen(resp)) < 0)
			perror("fake server write");
		close(fd);
	}
}

static void fake_start(struct fake *f)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);

	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &al), 0);
	f->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_script(struct fake *f, int n, ...)
{
	va_list ap;

	pthread_mutex_lock(&f->lock);
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		f->script[i] = va_arg(ap, const char *);
	va_end(ap);
	f->nscript = n;
	f->next = 0;
	f->requests = 0;
	pthread_mutex_unlock(&f->lock);
}

static void fake_stop(struct fake *f)
{
	int fd;
	struct sockaddr_in a = { .sin_family = AF_INET };

	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_mutex_unlock(&f->lock);
	/* Wake accept() with one last connection. */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)f->port);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd >= 0) {
		(void)connect(fd, (struct sockaddr *)&a, sizeof(a));
		close(fd);
	}
	pthread_join(f->th, NULL);
	close(f->lfd);
	pthread_mutex_destroy(&f->lock);
}

static struct store *fake_store(struct fake *f, const char *extra)
{
	char url[512];
	struct store *s = NULL;

	snprintf(url, sizeof(url),
		 "s3://bkt?endpoint=http://127.0.0.1:%d&access_key=AK&secret_key=SK"
		 "&retries=2&connect_timeout_ms=2000&request_timeout_ms=5000%s",
		 f->port, extra);
	assert_int_equal(store_open(url, &s), 0);
	return s;
}

/* Canned responses, built with their Content-Length; freed at the end. */
static char *made[64];
static int nmade;

static const char *mk(const char *status, const char *headers, const char *body)
{
	char *r = malloc(strlen(headers) + strlen(body) + 256);

	assert_non_null(r);
	assert_true(nmade < 64);
	sprintf(r, "HTTP/1.1 %s\r\nConnection: close\r\n%sContent-Length: %zu\r\n\r\n%s",
		status, headers, strlen(body), body);
	made[nmade++] = r;
	return r;
}

static void mk_free(void)
{
	while (nmade > 0)
		free(made[--nmade]);
}

static int no_keys(void *arg, const char *key, uint64_t size)
{
	return -EPROTO; /* must not be reached */
}

#define R(status, headers, body) mk(status, headers, "")
#define RB(status, headers, len, body) mk(status, headers, body)
#define SLOWDOWN RB("503 Slow Down", "", 0, \
	"<Error><Code>SlowDown</Code><Message>slow</Message></Error>")
/* MD5("hello") = 5d41402abc4b2a76b9719d911017c592 */
#define PUT_OK R("200 OK", "ETag: \"5d41402abc4b2a76b9719d911017c592\"\r\n", 0)

static int put_hello(struct store *s, unsigned flags)
{
	struct iovec v = { "hello", 5 };

	return store_put(s, "k/v", &v, 1, flags);
}

static void test_s3_retries(void **state)
{
	struct fake f;
	struct store *s;

	fake_start(&f);
	s = fake_store(&f, "");

	/* 503 SlowDown twice, then success: three requests, 0. */
	fake_script(&f, 3, SLOWDOWN, SLOWDOWN, PUT_OK);
	assert_int_equal(put_hello(s, 0), 0);
	assert_int_equal(f.requests, 3);
	/* What was sent: signed, MD5, unsigned payload, no Expect. */
	assert_non_null(strstr(f.last_req, "PUT /bkt/k/v HTTP/1.1\r\n"));
	assert_non_null(strstr(f.last_req, "x-amz-content-sha256: UNSIGNED-PAYLOAD\r\n"));
	assert_non_null(strstr(f.last_req, "content-md5: XUFAKrxLKna5cZ2REBfFkg==\r\n"));
	assert_non_null(strstr(f.last_req, "Authorization: AWS4-HMAC-SHA256 Credential=AK/"));
	assert_non_null(strstr(f.last_req,
			       "SignedHeaders=content-md5;host;x-amz-content-sha256;x-amz-date"));
	assert_null(strstr(f.last_req, "Expect:"));

	quiet();
	/* Always 500: 1 + retries attempts, then -EAGAIN. */
	fake_script(&f, 0);
	assert_int_equal(put_hello(s, 0), -EAGAIN);
	assert_int_equal(f.requests, 3);
	/* 4xx is never retried. */
	fake_script(&f, 1, RB("403 Forbidden", "", 51,
			      "<Error><Code>AccessDenied</Code><Message/></Error>"));
	assert_int_equal(put_hello(s, 0), -EACCES);
	assert_int_equal(f.requests, 1);
	fake_script(&f, 1, R("400 Bad Request", "", 0));
	assert_int_equal(put_hello(s, 0), -EINVAL);
	assert_int_equal(f.requests, 1);
	/* 429 is retried. */
	fake_script(&f, 2, R("429 Too Many Requests", "", 0), PUT_OK);
	assert_int_equal(put_hello(s, 0), 0);
	assert_int_equal(f.requests, 2);
	/* An ETag that is an MD5 but not ours: -EIO. */
	fake_script(&f, 1, R("200 OK", "ETag: \"00000000000000000000000000000000\"\r\n", 0));
	assert_int_equal(put_hello(s, 0), -EIO);
	/* ...but an opaque ETag (SSE-KMS) is not checked. */
	fake_script(&f, 1, R("200 OK", "ETag: \"00000000000000000000000000000000\"\r\n"
			     "x-amz-server-side-encryption: aws:kms\r\n", 0));
	assert_int_equal(put_hello(s, 0), 0);
	/* Create-once answered 412: -EEXIST, one request, not logged. */
	fake_script(&f, 1, R("412 Precondition Failed", "", 0));
	assert_int_equal(put_hello(s, STORE_CREATE_ONCE), -EEXIST);
	assert_int_equal(f.requests, 1);
	assert_non_null(strstr(f.last_req, "if-none-match: *\r\n"));
	/* A retried create-once put that finds its own object is a success. */
	fake_script(&f, 3, R("500 Internal Server Error", "", 0),
		    R("412 Precondition Failed", "", 0),
		    R("200 OK", "ETag: \"5d41402abc4b2a76b9719d911017c592\"\r\n", 0));
	assert_int_equal(put_hello(s, STORE_CREATE_ONCE), 0);
	assert_int_equal(f.requests, 3);
	assert_non_null(strstr(f.last_req, "HEAD /bkt/k/v HTTP/1.1"));
	loud();
	store_close(s);
	fake_stop(&f);
	mk_free();

	/* Nobody listening: connection refused, retried, -EAGAIN. */
	quiet();
	assert_int_equal(store_open("s3://bkt?endpoint=http://127.0.0.1:1&access_key=a"
				    "&secret_key=b&retries=1", &s), 0);
	assert_int_equal(put_hello(s, 0), -EAGAIN);
	store_close(s);
	loud();
}

static void test_s3_hostile_answers(void **state)
{
	struct fake f;
	struct store *s;
	struct store_mpu *m = NULL;
	char buf[16];
	size_t got;

	fake_start(&f);
	s = fake_store(&f, "");
	quiet();
	/* A listing that is not XML, one truncated without a token, one
	 * with keys outside the prefix. */
	fake_script(&f, 1, RB("200 OK", "", 9, "not xml!!"));
	assert_int_equal(store_list(s, "a/", NULL, no_keys, NULL), -EIO);
	fake_script(&f, 1, RB("200 OK", "", 65,
			      "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"));
	assert_int_equal(store_list(s, "", NULL, no_keys, NULL), -EIO);
	fake_script(&f, 1, RB("200 OK", "", 97,
			      "<ListBucketResult><Contents><Key>b/x</Key><Size>1</Size>"
			      "</Contents><IsTruncated>false</IsTruncated></ListBucketResult>"));
	assert_int_equal(store_list(s, "a/", NULL, no_keys, NULL), -EIO);
	/* A ranged get answered with more than asked: only len bytes land. */
	fake_script(&f, 1, RB("206 Partial Content", "Content-Range: bytes 2-9/10\r\n", 8,
			      "23456789"));
	assert_int_equal(store_get_range(s, "k", 2, 3, buf, &got), 0);
	assert_int_equal(got, 3);
	assert_memory_equal(buf, "234", 3);
	/* A range we did not ask for. */
	fake_script(&f, 1, RB("206 Partial Content", "Content-Range: bytes 5-9/10\r\n", 5,
			      "56789"));
	assert_int_equal(store_get_range(s, "k", 2, 3, buf, &got), -EIO);
	/* A server that ignores ranges: the slice is cut out locally. */
	fake_script(&f, 1, RB("200 OK", "", 10, "0123456789"));
	assert_int_equal(store_get_range(s, "k", 4, 3, buf, &got), 0);
	assert_memory_equal(buf, "456", 3);
	/* UploadPartCopy: 200 with an <Error> inside is retried; then a
	 * good CopyPartResult. */
	fake_script(&f, 1, RB("200 OK", "", 82,
			      "<InitiateMultipartUploadResult><UploadId>u/1+=</UploadId>"
			      "</InitiateMultipartUploadResult>"));
	assert_int_equal(store_mpu_create(s, "out", &m), 0);
	fake_script(&f, 2,
		    RB("200 OK", "", 55, "<Error><Code>InternalError</Code><Message/></Error>\n\n\n\n"),
		    RB("200 OK", "", 83,
		       "<CopyPartResult><ETag>\"5d41402abc4b2a76b9719d911017c592\"</ETag>"
		       "</CopyPartResult>"));
	assert_int_equal(store_mpu_copy_part(m, 1, "src", 0, 5), 0);
	assert_int_equal(f.requests, 2);
	assert_non_null(strstr(f.last_req, "uploadId=u%2F1%2B%3D"));
	assert_non_null(strstr(f.last_req, "x-amz-copy-source: bkt/src\r\n"));
	assert_non_null(strstr(f.last_req, "x-amz-copy-source-range: bytes=0-4\r\n"));
	/* 501 from UploadPartCopy: -ENOTSUP, and no more tries after. */
	fake_script(&f, 1, RB("501 Not Implemented", "", 51,
			      "<Error><Code>NotImplemented</Code><Message/></Error>"));
	assert_int_equal(store_mpu_copy_part(m, 2, "src", 0, 5), -ENOTSUP);
	fake_script(&f, 0);
	assert_int_equal(store_mpu_copy_part(m, 2, "src", 0, 5), -ENOTSUP);
	assert_int_equal(f.requests, 0);
	/* Complete: the parts in order, then the abort on failure. */
	fake_script(&f, 2, RB("400 Bad Request", "", 51,
			      "<Error><Code>InvalidPart</Code><Message/></Error>"),
		    R("204 No Content", "", 0));
	assert_int_equal(store_mpu_complete(m, 0), -EINVAL);
	assert_int_equal(f.requests, 2);
	assert_non_null(strstr(f.last_req, "DELETE /bkt/out?uploadId=u%2F1%2B%3D"));
	/* DeleteObjects: per-key errors, NoSuchKey ignored. */
	{
		const char *keys[] = { "a", "b" };

		fake_script(&f, 1, RB("200 OK", "", 165,
				      "<DeleteResult><Error><Key>a</Key><Code>NoSuchKey</Code>"
				      "</Error><Error><Key>b</Key><Code>AccessDenied</Code>"
				      "<Message>no</Message></Error></DeleteResult>"));
		assert_int_equal(store_delete(s, keys, 2), -EACCES);
		assert_non_null(strstr(f.last_req, "POST /bkt?delete= HTTP/1.1"));
		assert_non_null(strstr(f.last_req, "content-md5: "));
	}
	loud();
	store_close(s);
	fake_stop(&f);
	mk_free();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_s3_url_rejects),
		cmocka_unit_test(test_s3_url_accepts),
		cmocka_unit_test(test_s3_presign),
		cmocka_unit_test(test_s3_to_errno),
		cmocka_unit_test(test_s3_retries),
		cmocka_unit_test(test_s3_hostile_answers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
