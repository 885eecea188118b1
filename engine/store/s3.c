/*
 * s3.c - the S3 backend of store.h over libcurl, signed with sigv4.c,
 * answers read with xml.c.
 *
 * For: keeping novafs objects in an S3-compatible bucket (AWS S3, Ceph
 * RGW, and lax servers such as s3rver): put, ranged get, head, batch
 * delete, paged listing, multipart upload with server-side part copy.
 * Not for: key checks, counters, failpoints (store.c does them before any
 * call gets here), bucket management, caching.
 *
 * Invariants:
 *  1. Every request is signed with SigV4 (sigv4.h) and carries
 *     x-amz-content-sha256.  The URL sent is built with the encoders that
 *     produced the canonical request, so what is signed is what is sent.
 *  2. Payload signing: a body is sent as UNSIGNED-PAYLOAD together with a
 *     signed Content-MD5 (every PUT, part, DeleteObjects and Complete).
 *     The server checks the body against the MD5 (BadDigest otherwise)
 *     and nobody can change the MD5 without breaking the signature, so
 *     integrity and tamper evidence cost one hash pass.  sign_payload=1
 *     adds the real SHA-256 (a second pass) for servers or policies that
 *     refuse UNSIGNED-PAYLOAD.  Bodiless requests sign the empty hash.
 *  3. Single-part PUT and UploadPart: the ETag the server returns must
 *     equal the MD5 we sent when it looks like a plain MD5 (32 hex digits,
 *     no SSE-KMS/SSE-C header); otherwise it is not checked.  Reads are
 *     verified by the bundle CRCs above us (DESIGN.md 3).
 *  4. Retries: a request is retried, re-signed, at most `retries` times
 *     with capped exponential backoff and equal jitter, on connection
 *     errors, timeouts, 5xx other than 501, and 429 -- never on any other
 *     4xx.  A retried request may have been applied by an attempt whose
 *     answer was lost; the callers that care resolve it (invariant 5).
 *  5. Ambiguous retries: a create-once PUT answered 412 after a retry is
 *     ours when the object's ETag is our MD5; a Complete answered
 *     NoSuchUpload after a retry succeeded when the object's ETag is the
 *     multipart ETag computed from the parts.  Everything else is
 *     idempotent (GET, HEAD, DELETE, UploadPart, UploadPartCopy);
 *     CreateMultipartUpload may leave an orphan upload behind (an S3
 *     lifecycle rule "abort incomplete multipart uploads" reclaims it).
 *  6. Every failure is translated by s3_to_errno() and logged once, by
 *     s3_fail(), with the call, the key, the HTTP status and the server's
 *     Code and Message (and request id).  Answers that are not faults
 *     (404 on get/head, 412 on create-once) are not logged.
 *  7. Response bodies are bounded (S3_XML_MAX, S3_ERR_MAX); a ranged get
 *     writes only into the caller's buffer and never past len.
 *
 * Handles and threads: libcurl easy handles are kept in a pool (LIFO) of
 * at most max_connections; a call takes one, performs its request(s) and
 * gives it back, so concurrent calls use different handles and each
 * handle keeps its own keep-alive connection (its private connection
 * cache, CURLOPT_MAXCONNECTS 2).  All handles share one CURLSH for DNS
 * and TLS sessions.  The connection cache is deliberately not shared:
 * libcurl documents (and 7.88 still has) races when the shared
 * connection pool is used by concurrent threads; a pooled handle per
 * concurrent request gives the same reuse without that.
 *
 * Locking (order: pool_lock, then share locks, never the reverse):
 *   s3_store.pool_lock guards free[], nfree, nhandles (pool_cond waits
 *   for a handle); share_lock[i] guards libcurl's shared data i (libcurl
 *   takes them through the share callbacks); s3_upload.lock guards
 *   parts, nparts, cap.  Everything else in s3_store is immutable after
 *   s3_store_open() except copy_unsupported, delete_unsupported and
 *   list_unsorted (atomics, sticky once set).
 *
 * Deviations from store.h (also in s3.h):
 *  - STORE_CREATE_ONCE put relies on If-None-Match: * (AWS, RGW); a
 *    server that ignores it (s3rver) overwrites.  Complete with
 *    STORE_CREATE_ONCE sends If-None-Match too (AWS honours it) and first
 *    HEADs the key, because RGW ignores the condition on Complete: the
 *    HEAD narrows the race but cannot close it.  engine/settle.c does not
 *    rely on either: the metastore CAS decides who publishes, and a
 *    settle that finds its key present adopts it by reading its footer.
 *  - Keys under prefix=P are P/KEY: 1024 - strlen(P) - 1 bytes at most.
 *  - A ranged get at off == size cannot be asked as a range (S3 answers
 *    416 for any range starting at the size); a 416 is resolved with a
 *    HEAD: size == off reads 0 bytes, size < off is -ERANGE.
 */
#include "config.h"
#include "engine/store/s3.h"
#include "engine/store/sigv4.h"
#include "engine/store/xml.h"
#include "src/base/buf.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

/* ------------------------------------------------------------ limits */

#define S3_CONNECT_TIMEOUT_MS 5000
#define S3_REQUEST_TIMEOUT_MS 120000
#define S3_RETRIES 4
#define S3_RETRIES_MAX 20
#define S3_MAX_CONNECTIONS 32
#define S3_MAX_CONNECTIONS_MAX 1024
/* Backoff before retry n (0-based): a random delay in [d/2, d] with
 * d = min(S3_BACKOFF_CAP_MS, S3_BACKOFF_BASE_MS << n).  100 ms doubles to
 * 5 s: four retries wait about 0.75..1.5 s in all, enough to ride out a
 * server restart or a SlowDown burst without stalling a flusher long. */
#define S3_BACKOFF_BASE_MS 100
#define S3_BACKOFF_CAP_MS 5000
/* DeleteObjects takes at most 1000 keys per request (S3 limit). */
#define S3_DELETE_BATCH 1000
#define S3_LIST_MAX_KEYS 1000
/* A ListObjectsV2 page of 1000 keys of <= 1024 bytes with sizes, dates,
 * ETags and storage classes is under 1.5 MB; 8 MiB leaves room for
 * servers that add more per key and still bounds a hostile answer. */
#define S3_XML_MAX (8u << 20)
/* Error documents are a few hundred bytes. */
#define S3_ERR_MAX (64u << 10)
/* Longest ETag, upload id and continuation token we accept. */
#define S3_ETAG_MAX 128
#define S3_TOKEN_MAX 4096
/* Truncated listing pages in a row that bring no key: a server that
 * keeps answering "more" without progress is broken, not slow. */
#define S3_LIST_EMPTY_PAGES_MAX 16
/* Ranged gets past this offset are answered from a HEAD: no object is
 * that large, and off + len must not overflow in the Range header. */
#define S3_OFF_MAX (1ull << 62)

/* ---------------------------------------------------------- structs */

struct s3_store {
	/* Immutable after s3_store_open(). */
	char *bucket;
	char *region;
	char *access_key, *secret_key, *session_token; /* token may be NULL */
	char *prefix;      /* "" or "P/" */
	char *zone;        /* may be NULL */
	char *ca_file;     /* may be NULL */
	char *base_url;    /* "http://host:port" (virtual host included) */
	char *host;        /* Host header value: "host[:port]" */
	char *path_base;   /* "/bucket" (path style) or "" */
	long connect_timeout_ms, request_timeout_ms;
	int retries;
	int max_connections;
	int list_max_keys;
	bool sign_payload;

	CURLSH *share;
	pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];

	pthread_mutex_t pool_lock;
	pthread_cond_t pool_cond;
	CURL **free_handles;  /* protected by pool_lock; max_connections slots */
	int nfree;            /* protected by pool_lock */
	int nhandles;         /* protected by pool_lock: made, free or in use */

	atomic_bool copy_unsupported;   /* UploadPartCopy answered 501 */
	atomic_bool delete_unsupported; /* DeleteObjects answered 501 */
	atomic_bool list_unsorted;      /* the server pages out of byte order */
};

struct s3_part {
	int no;
	char etag[S3_ETAG_MAX]; /* as the server sent it, quotes included */
};

/* One multipart upload.  key and id are immutable after create; the part
 * list grows under lock (parts may arrive from several threads). */
struct s3_upload {
	char *key;  /* owned: full key (prefix included) */
	char *id;   /* owned: UploadId */
	pthread_mutex_t lock;
	struct s3_part *parts; /* protected by lock */
	size_t nparts, cap;    /* protected by lock */
};

/* Where a response body goes. */
enum s3_sink { S3_SINK_BUF, S3_SINK_RANGE };

/* One request.  Everything borrowed for the call. */
struct s3_req {
	const char *what;   /* "put", "get", ... for logs */
	const char *method; /* GET PUT POST DELETE HEAD */
	const char *key;    /* full key, or NULL for the bucket */
	struct sigv4_kv query[6];
	size_t nquery;
	struct sigv4_kv hdr[6]; /* extra headers, all signed */
	size_t nhdr;
	const struct iovec *iov; /* body, or NULL */
	int iovcnt;
	uint64_t body_len;
	bool error_in_200;       /* a 200 may carry an <Error> (copy, complete) */
	/* S3_SINK_RANGE: the data of a ranged get lands in dst. */
	enum s3_sink sink;
	char *dst;
	size_t dst_len;
	uint64_t off;            /* object offset wanted at dst[0] */
	size_t body_max;         /* S3_SINK_BUF bound */
};

/* One response.  Reset before every attempt. */
struct s3_resp {
	CURLcode cc;
	long status;
	int attempts;       /* attempts made */
	bool maybe_applied; /* an earlier attempt may have reached the server */
	char etag[S3_ETAG_MAX];
	uint64_t clen;
	bool have_clen;
	bool have_crange;
	bool crange_bad;    /* a Content-Range we cannot believe */
	uint64_t cr_first, cr_last, cr_total; /* cr_total UINT64_MAX = '*' */
	bool sse_opaque;    /* SSE-KMS / SSE-C: ETag is no MD5 */
	char request_id[64];
	char code[64];
	char message[256];
	char curl_err[CURL_ERROR_SIZE];
	struct nv_buf body;  /* S3_SINK_BUF, and error bodies */
	bool overflow;       /* body larger than allowed */
	/* range sink */
	size_t got;
	uint64_t skip;       /* body bytes to drop before dst[0] */
	bool sink_started, sink_full;
	const struct s3_req *req;
};

/* ------------------------------------------------------- small helpers */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void hex16(const unsigned char md[16], char out[33])
{
	static const char h[] = "0123456789abcdef";

	for (int i = 0; i < 16; i++) {
		out[2 * i] = h[md[i] >> 4];
		out[2 * i + 1] = h[md[i] & 15];
	}
	out[32] = '\0';
}

/* MD5 of the iovec: binary, base64 (Content-MD5) and hex.  0 or -EIO. */
static int md5_iov(const struct iovec *iov, int iovcnt, unsigned char md[16],
		   char b64[25], char hex[33])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned int n = 0;
	int ok = c && EVP_DigestInit_ex(c, EVP_md5(), NULL);

	for (int i = 0; ok && i < iovcnt; i++)
		ok = EVP_DigestUpdate(c, iov[i].iov_base, iov[i].iov_len);
	ok = ok && EVP_DigestFinal_ex(c, md, &n) && n == 16;
	EVP_MD_CTX_free(c);
	if (!ok) {
		nv_log(NV_ERR, NV_SUB_STORE, "s3: OpenSSL MD5 failed");
		return -EIO;
	}
	EVP_EncodeBlock((unsigned char *)b64, md, 16);
	hex16(md, hex);
	return 0;
}

static int sha256_iov(const struct iovec *iov, int iovcnt, char hex[SIGV4_HEX_LEN])
{
	static const char h[] = "0123456789abcdef";
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned char md[32];
	unsigned int n = 0;
	int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL);

	for (int i = 0; ok && i < iovcnt; i++)
		ok = EVP_DigestUpdate(c, iov[i].iov_base, iov[i].iov_len);
	ok = ok && EVP_DigestFinal_ex(c, md, &n) && n == 32;
	EVP_MD_CTX_free(c);
	if (!ok)
		return -EIO;
	for (int i = 0; i < 32; i++) {
		hex[2 * i] = h[md[i] >> 4];
		hex[2 * i + 1] = h[md[i] & 15];
	}
	hex[64] = '\0';
	return 0;
}

/* The 32 hex digits inside a plain-MD5 ETag ("\"<hex>\"" or "<hex>"),
 * lower-cased into out; false for multipart or other ETags. */
static bool etag_md5(const char *etag, char out[33])
{
	size_t n = strlen(etag);

	if (n == 34 && etag[0] == '"' && etag[33] == '"') {
		etag++;
		n = 32;
	}
	if (n != 32)
		return false;
	for (size_t i = 0; i < 32; i++) {
		if (!isxdigit((unsigned char)etag[i]))
			return false;
		out[i] = (char)tolower((unsigned char)etag[i]);
	}
	out[32] = '\0';
	return true;
}

/* Strictly parse a decimal uint64 of s[0..n).  0 or -EINVAL. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* Append XML-escaped s. */
static int xml_escape(struct nv_buf *b, const char *s)
{
	int rc = 0;

	for (; *s && rc == 0; s++) {
		switch (*s) {
		case '<': rc = nv_buf_add(b, "&lt;", 4); break;
		case '>': rc = nv_buf_add(b, "&gt;", 4); break;
		case '&': rc = nv_buf_add(b, "&amp;", 5); break;
		case '"': rc = nv_buf_add(b, "&quot;", 6); break;
		case '\'': rc = nv_buf_add(b, "&apos;", 6); break;
		default: rc = nv_buf_add(b, s, 1); break;
		}
	}
	return rc;
}

/* Copy at most cap-1 bytes of s[0..n) into out, NUL-terminated, with
 * control characters replaced (server text goes into logs). */
static void copy_clean(char *out, size_t cap, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n && i + 1 < cap; i++)
		out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	out[i] = '\0';
}

/* ------------------------------------------------------ error mapping */

int s3_to_errno(CURLcode cc, long status, const char *code)
{
	static const struct { const char *code; int err; } codes[] = {
		{ "NoSuchKey", ENOENT },
		{ "PreconditionFailed", EEXIST },
		{ "InvalidRange", ERANGE },
		{ "NotImplemented", ENOTSUP },
		{ "AccessDenied", EACCES },
		{ "SignatureDoesNotMatch", EACCES },
		{ "InvalidAccessKeyId", EACCES },
		{ "ExpiredToken", EACCES },
		{ "InvalidToken", EACCES },
		{ "RequestTimeTooSkewed", EACCES },
		{ "SlowDown", EAGAIN },
		{ "ServiceUnavailable", EAGAIN },
		{ "InternalError", EAGAIN },
		{ "RequestTimeout", EAGAIN },
		{ "OperationAborted", EAGAIN },
		{ "QuotaExceeded", ENOSPC },
		{ "InsufficientStorage", ENOSPC },
		{ "EntityTooSmall", EINVAL },
		{ "EntityTooLarge", EINVAL },
		{ "InvalidPart", EINVAL },
		{ "InvalidPartOrder", EINVAL },
		{ "MalformedXML", EINVAL },
		{ "InvalidArgument", EINVAL },
		{ "InvalidDigest", EINVAL },
		{ "KeyTooLongError", EINVAL },
		{ "InvalidRequest", EINVAL },
		{ "InvalidBucketName", EINVAL },
		{ "BadDigest", EIO },       /* the body changed on the way */
		{ "NoSuchBucket", EIO },    /* misconfiguration, not a missing object */
		{ "NoSuchUpload", EIO },    /* the upload is gone under us */
	};

	switch (cc) {
	case CURLE_OK:
		break;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
		return -EAGAIN;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
	if (code && code[0]) {
		for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
			if (strcmp(code, codes[i].code) == 0)
				return -codes[i].err;
	}
	if (status >= 200 && status < 300)
		return code && code[0] ? -EIO : 0;
	switch (status) {
	case 404: return -ENOENT;
	case 412: return -EEXIST;
	case 416: return -ERANGE;
	case 501: return -ENOTSUP;
	case 401:
	case 403: return -EACCES;
	case 408:
	case 409:
	case 429: return -EAGAIN;
	case 507: return -ENOSPC;
	case 400: return -EINVAL;
	default:
		return status >= 500 ? -EAGAIN : -EIO;
	}
}

/* Log a failed call once (invariant 6) and return its errno. */
static int s3_fail(const struct s3_store *s, const char *what, const char *key,
		   const struct s3_resp *r)
{
	int rc = s3_to_errno(r->cc, r->status, r->code);

	if (r->cc != CURLE_OK)
		nv_log(NV_ERR, NV_SUB_STORE,
		       "s3://%s %s %s: %s%s%s (after %d attempt%s)", s->bucket, what,
		       key ? key : "(bucket)", curl_easy_strerror(r->cc),
		       r->curl_err[0] ? ": " : "", r->curl_err, r->attempts,
		       r->attempts == 1 ? "" : "s");
	else
		nv_log(NV_ERR, NV_SUB_STORE,
		       "s3://%s %s %s: HTTP %ld %s: %s (request %s, after %d attempt%s)",
		       s->bucket, what, key ? key : "(bucket)", r->status,
		       r->code[0] ? r->code : "-", r->message[0] ? r->message : "-",
		       r->request_id[0] ? r->request_id : "-", r->attempts,
		       r->attempts == 1 ? "" : "s");
	return rc;
}

/* A response problem of our own finding (bad XML, wrong ETag...). */
static int s3_bad_answer(const struct s3_store *s, const char *what,
			 const char *key, const char *why)
{
	nv_log(NV_ERR, NV_SUB_STORE, "s3://%s %s %s: bad answer from the server: %s",
	       s->bucket, what, key ? key : "(bucket)", why);
	return -EIO;
}

/* ------------------------------------------------------- handle pool */

static void share_lock_cb(CURL *h, curl_lock_data data, curl_lock_access access,
			  void *arg)
{
	struct s3_store *s = arg;

	(void)h;
	(void)access;
	if (data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_lock(&s->share_lock[data]);
}

static void share_unlock_cb(CURL *h, curl_lock_data data, void *arg)
{
	struct s3_store *s = arg;

	(void)h;
	if (data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_unlock(&s->share_lock[data]);
}

/* Take a handle: a free one (most recently used first: its connection is
 * the likeliest to be alive), a new one while fewer than max_connections
 * exist, else wait.  NULL only when curl_easy_init() fails. */
static CURL *pool_get(struct s3_store *s)
{
	CURL *h = NULL;

	pthread_mutex_lock(&s->pool_lock);
	while (s->nfree == 0 && s->nhandles >= s->max_connections)
		pthread_cond_wait(&s->pool_cond, &s->pool_lock);
	if (s->nfree > 0) {
		h = s->free_handles[--s->nfree];
		pthread_mutex_unlock(&s->pool_lock);
		return h;
	}
	s->nhandles++;
	pthread_mutex_unlock(&s->pool_lock);
	h = curl_easy_init();
	if (!h) {
		pthread_mutex_lock(&s->pool_lock);
		s->nhandles--;
		pthread_cond_signal(&s->pool_cond);
		pthread_mutex_unlock(&s->pool_lock);
		nv_log(NV_ERR, NV_SUB_STORE, "s3://%s: curl_easy_init failed",
		       s->bucket);
	}
	return h;
}

static void pool_put(struct s3_store *s, CURL *h)
{
	pthread_mutex_lock(&s->pool_lock);
	assert(s->nfree < s->max_connections);
	s->free_handles[s->nfree++] = h;
	pthread_cond_signal(&s->pool_cond);
	pthread_mutex_unlock(&s->pool_lock);
}

/* ---------------------------------------------------- curl callbacks */

struct s3_reader {
	const struct iovec *iov;
	int iovcnt, i;
	size_t off;
};

static size_t read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	struct s3_reader *r = arg;
	size_t room = size * nitems, done = 0;

	while (done < room && r->i < r->iovcnt) {
		const struct iovec *v = &r->iov[r->i];
		size_t n = v->iov_len - r->off;

		if (n > room - done)
			n = room - done;
		memcpy(buf + done, (const char *)v->iov_base + r->off, n);
		done += n;
		r->off += n;
		if (r->off == v->iov_len) {
			r->i++;
			r->off = 0;
		}
	}
	return done;
}

/* Rewind for a resend (libcurl may resend a body on a reused connection
 * that turned out dead, or after a redirect/auth round). */
static int seek_cb(void *arg, curl_off_t offset, int origin)
{
	struct s3_reader *r = arg;
	curl_off_t left = offset;

	if (origin != SEEK_SET || offset < 0)
		return CURL_SEEKFUNC_CANTSEEK;
	r->i = 0;
	r->off = 0;
	while (left > 0 && r->i < r->iovcnt) {
		curl_off_t n = (curl_off_t)r->iov[r->i].iov_len;

		if (left < n) {
			r->off = (size_t)left;
			return CURL_SEEKFUNC_OK;
		}
		left -= n;
		r->i++;
	}
	return left == 0 ? CURL_SEEKFUNC_OK : CURL_SEEKFUNC_FAIL;
}

static bool hdr_is(const char *line, size_t n, const char *name, const char **val,
		   size_t *vlen)
{
	size_t nl = strlen(name);

	if (n <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return false;
	line += nl + 1;
	n -= nl + 1;
	while (n > 0 && (*line == ' ' || *line == '\t')) {
		line++;
		n--;
	}
	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == '\n' ||
			 line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	*val = line;
	*vlen = n;
	return true;
}

/* "bytes FIRST-LAST/TOTAL", or with an unknown total "bytes FIRST-LAST/" "*".
 * Anything else (s3rver answers "bytes 0-0/0" for an empty object) sets
 * crange_bad. */
static void parse_content_range(struct s3_resp *r, const char *v, size_t n)
{
	const char *dash, *slash, *end = v + n;

	r->crange_bad = true;
	if (n < 6 || strncasecmp(v, "bytes ", 6) != 0)
		return;
	v += 6;
	dash = memchr(v, '-', (size_t)(end - v));
	slash = memchr(v, '/', (size_t)(end - v));
	if (!dash || !slash || slash < dash)
		return;
	if (parse_u64(v, (size_t)(dash - v), &r->cr_first) < 0 ||
	    parse_u64(dash + 1, (size_t)(slash - dash - 1), &r->cr_last) < 0 ||
	    r->cr_last < r->cr_first)
		return;
	if (end - slash == 2 && slash[1] == '*')
		r->cr_total = UINT64_MAX;
	else if (parse_u64(slash + 1, (size_t)(end - slash - 1), &r->cr_total) < 0 ||
		 r->cr_total <= r->cr_last)
		return;
	r->have_crange = true;
	r->crange_bad = false;
}

static size_t header_cb(char *line, size_t size, size_t nitems, void *arg)
{
	struct s3_resp *r = arg;
	size_t n = size * nitems;
	const char *v;
	size_t vl;

	if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		/* A new response (after "100 Continue", or a resend): forget
		 * the headers of the previous one. */
		const char *sp = memchr(line, ' ', n);

		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		r->etag[0] = '\0';
		r->have_clen = r->have_crange = r->sse_opaque = false;
		r->crange_bad = false;
		r->request_id[0] = '\0';
		return n;
	}
	if (hdr_is(line, n, "etag", &v, &vl)) {
		copy_clean(r->etag, sizeof(r->etag), v, vl);
	} else if (hdr_is(line, n, "content-length", &v, &vl)) {
		r->have_clen = parse_u64(v, vl, &r->clen) == 0;
	} else if (hdr_is(line, n, "content-range", &v, &vl)) {
		parse_content_range(r, v, vl);
	} else if (hdr_is(line, n, "x-amz-server-side-encryption", &v, &vl)) {
		/* SSE-S3 (AES256) keeps MD5 ETags; KMS does not. */
		if (vl >= 7 && strncasecmp(v, "aws:kms", 7) == 0)
			r->sse_opaque = true;
	} else if (hdr_is(line, n, "x-amz-server-side-encryption-customer-algorithm",
			  &v, &vl)) {
		r->sse_opaque = true;
	} else if (hdr_is(line, n, "x-amz-request-id", &v, &vl)) {
		copy_clean(r->request_id, sizeof(r->request_id), v, vl);
	}
	return n;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct s3_resp *r = arg;
	const struct s3_req *q = r->req;
	size_t n = size * nmemb, take;

	if (q->sink == S3_SINK_RANGE && (r->status == 200 || r->status == 206)) {
		if (!r->sink_started) {
			r->sink_started = true;
			if (r->status == 200) {
				r->skip = q->off; /* the whole object came */
			} else if (r->crange_bad) {
				return 0; /* resolved by a HEAD (s3_get_range) */
			} else if (r->have_crange && r->cr_first <= q->off) {
				r->skip = q->off - r->cr_first;
			} else {
				r->overflow = true; /* a range we did not ask for */
				return 0;
			}
		}
		if (r->skip >= n) {
			r->skip -= n;
			return n;
		}
		data += r->skip;
		n -= (size_t)r->skip;
		r->skip = 0;
		take = q->dst_len - r->got < n ? q->dst_len - r->got : n;
		memcpy(q->dst + r->got, data, take);
		r->got += take;
		if (take < n) {
			/* More than asked (a server that ignored the range):
			 * we have all we want; stop the transfer. */
			r->sink_full = true;
			return 0;
		}
		return size * nmemb;
	}
	if (nv_buf_add(&r->body, data, n) < 0) {
		r->overflow = true;
		return 0;
	}
	return n;
}

/* ------------------------------------------------------------ requests */

/* Parse an <Error> document in r->body into code/message. */
static void parse_error_body(struct s3_resp *r)
{
	struct xml_doc *d = NULL;
	const struct xml_node *root;
	const char *t;
	size_t n;

	if (r->body.len == 0 || xml_parse((const char *)r->body.ptr, r->body.len, &d) < 0)
		return;
	root = xml_root(d);
	if (strcmp(xml_name(root), "Error") == 0) {
		if ((t = xml_child_text(root, "Code", &n)))
			copy_clean(r->code, sizeof(r->code), t, n);
		if ((t = xml_child_text(root, "Message", &n)))
			copy_clean(r->message, sizeof(r->message), t, n);
		if (!r->request_id[0] && (t = xml_child_text(root, "RequestId", &n)))
			copy_clean(r->request_id, sizeof(r->request_id), t, n);
	}
	xml_free(d);
}

static bool retryable(const struct s3_resp *r)
{
	if (r->crange_bad)
		return false; /* the same server answers the same way again */
	switch (r->cc) {
	case CURLE_OK:
		break;
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
	return (r->status >= 500 && r->status != 501) || r->status == 429;
}

static __thread uint64_t jitter_state;

static void backoff(int attempt)
{
	uint64_t d = (uint64_t)S3_BACKOFF_BASE_MS << (attempt < 16 ? attempt : 16);
	uint64_t ns;
	struct timespec ts;

	if (d > S3_BACKOFF_CAP_MS)
		d = S3_BACKOFF_CAP_MS;
	if (!jitter_state)
		jitter_state = (nv_now_mono_ns() ^ (uint64_t)pthread_self()) | 1;
	jitter_state ^= jitter_state << 13;
	jitter_state ^= jitter_state >> 7;
	jitter_state ^= jitter_state << 17;
	ns = (d * NV_NS_PER_MS) / 2 + jitter_state % (d * NV_NS_PER_MS / 2 + 1);
	ts.tv_sec = (time_t)(ns / NV_NS_PER_S);
	ts.tv_nsec = (long)(ns % NV_NS_PER_S);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The raw (unencoded) path of key (NULL: the bucket). */
static int req_path(const struct s3_store *s, const char *key, struct nv_buf *p)
{
	if (key)
		return nv_buf_printf(p, "%s/%s", s->path_base, key);
	return nv_buf_printf(p, "%s%s", s->path_base, s->path_base[0] ? "" : "/");
}

static void resp_reset(struct s3_resp *r)
{
	r->cc = CURLE_OK;
	r->status = 0;
	r->etag[0] = r->request_id[0] = r->code[0] = r->message[0] = '\0';
	r->curl_err[0] = '\0';
	r->have_clen = r->have_crange = r->sse_opaque = false;
	r->crange_bad = r->overflow = false;
	nv_buf_reset(&r->body);
	r->got = 0;
	r->skip = 0;
	r->sink_started = r->sink_full = false;
}

/* One attempt of q on handle h.  Fills r. */
static int attempt_once(struct s3_store *s, CURL *h, const struct s3_req *q,
			const char *payload_hash, const char *path,
			const char *query, struct s3_resp *r)
{
	char date[SIGV4_DATE_LEN];
	struct sigv4_kv hs[12];
	size_t nh = 0;
	struct nv_buf auth, url, line;
	struct curl_slist *list = NULL, *l2;
	struct s3_reader rd = { q->iov, q->iovcnt, 0, 0 };
	struct sigv4_creds c = { s->access_key, s->secret_key, s->region, "s3" };
	struct sigv4_request sr;
	int rc;

	sigv4_amz_date(time(NULL), date);
	hs[nh++] = (struct sigv4_kv){ "host", s->host };
	hs[nh++] = (struct sigv4_kv){ "x-amz-date", date };
	hs[nh++] = (struct sigv4_kv){ "x-amz-content-sha256", payload_hash };
	if (s->session_token)
		hs[nh++] = (struct sigv4_kv){ "x-amz-security-token", s->session_token };
	for (size_t i = 0; i < q->nhdr; i++)
		hs[nh++] = q->hdr[i];
	sr = (struct sigv4_request){
		.method = q->method, .path = path, .query = q->query,
		.nquery = q->nquery, .headers = hs, .nheaders = nh,
		.payload_hash = payload_hash, .amz_date = date,
	};
	nv_buf_init(&auth, 64 * 1024);
	nv_buf_init(&url, 64 * 1024);
	nv_buf_init(&line, 64 * 1024);
	rc = sigv4_authorization(&sr, &c, &auth);
	if (rc == 0)
		rc = nv_buf_printf(&url, "%s", s->base_url);
	if (rc == 0)
		rc = sigv4_uri_encode(&url, path, strlen(path), true);
	if (rc == 0 && query[0])
		rc = nv_buf_printf(&url, "?%s", query);
	/* Headers: the signed ones exactly as signed, then the rest. */
	for (size_t i = 0; i < nh && rc == 0; i++) {
		nv_buf_reset(&line);
		rc = nv_buf_printf(&line, "%s: %s", hs[i].name,
				   hs[i].value ? hs[i].value : "");
		if (rc == 0 && !(l2 = curl_slist_append(list, (char *)line.ptr)))
			rc = -ENOMEM;
		if (rc == 0)
			list = l2;
	}
	if (rc == 0) {
		nv_buf_reset(&line);
		rc = nv_buf_printf(&line, "Authorization: %s", (char *)auth.ptr);
	}
	if (rc == 0 && !(l2 = curl_slist_append(list, (char *)line.ptr)))
		rc = -ENOMEM;
	if (rc == 0) {
		list = l2;
		/* No "Expect: 100-continue" round trip (lax servers stall on
		 * it), and no default Content-Type for POST bodies. */
		if (!(l2 = curl_slist_append(list, "Expect:")))
			rc = -ENOMEM;
		else
			list = l2;
	}
	if (rc == 0 && !(l2 = curl_slist_append(list, "Content-Type:")))
		rc = -ENOMEM;
	if (rc == 0)
		list = l2;
	if (rc < 0) {
		if (rc == -EINVAL)
			nv_log(NV_ERR, NV_SUB_STORE, "s3://%s %s %s: cannot sign the request",
			       s->bucket, q->what, q->key ? q->key : "(bucket)");
		r->cc = CURLE_OUT_OF_MEMORY;
		goto out;
	}

	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, (char *)url.ptr);
	curl_easy_setopt(h, CURLOPT_SHARE, s->share);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: CURLOPT_PROTOCOLS deprecated */
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, s->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, s->request_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_MAXCONNECTS, 2L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->curl_err);
	if (s->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, s->ca_file);
	if (!strcmp(q->method, "HEAD")) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(q->method, "PUT") || !strcmp(q->method, "POST")) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(h, CURLOPT_READDATA, &rd);
		curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, seek_cb);
		curl_easy_setopt(h, CURLOPT_SEEKDATA, &rd);
		if (!strcmp(q->method, "POST"))
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "POST");
	} else if (strcmp(q->method, "GET")) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
	}
	r->cc = curl_easy_perform(h);
	if (r->cc == CURLE_OK || r->cc == CURLE_WRITE_ERROR)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	/* Our own stop after the wanted bytes is a success. */
	if (r->cc == CURLE_WRITE_ERROR && r->sink_full && !r->overflow)
		r->cc = CURLE_OK;
	/* The handle keeps pointers into this frame; drop them. */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
out:
	curl_slist_free_all(list);
	nv_buf_free(&line);
	nv_buf_free(&url);
	if (auth.ptr)
		memset(auth.ptr, 0, auth.cap);
	nv_buf_free(&auth);
	return rc;
}

/*
 * Perform q with retries (invariant 4) and leave the last answer in r
 * (r->body initialised by the caller with its bound via s3_resp_init).
 * Returns 0 when a response was received and classified (the caller
 * looks at r->status / r->code; 2xx with error_in_200 bodies are turned
 * into their error), -ENOMEM / -EIO on local failures (logged).  A
 * transport failure after all attempts is r->cc != CURLE_OK.
 */
static int s3_do(struct s3_store *s, const struct s3_req *q, struct s3_resp *r)
{
	char payload_hash[SIGV4_HEX_LEN];
	struct nv_buf path, query;
	CURL *h;
	int rc = 0;

	r->req = q;
	r->attempts = 0;
	r->maybe_applied = false;
	nv_buf_init(&path, 8192);
	nv_buf_init(&query, 64 * 1024);
	if (q->body_len == 0) {
		snprintf(payload_hash, sizeof(payload_hash), "%s", SIGV4_EMPTY_SHA256);
	} else if (s->sign_payload) {
		rc = sha256_iov(q->iov, q->iovcnt, payload_hash);
	} else {
		snprintf(payload_hash, sizeof(payload_hash), "%s",
			 SIGV4_UNSIGNED_PAYLOAD);
	}
	if (rc == 0)
		rc = req_path(s, q->key, &path);
	if (rc == 0)
		rc = sigv4_query_string(&query, q->query, q->nquery);
	if (rc == 0 && !query.ptr)
		rc = nv_buf_add(&query, "", 0);
	if (rc < 0)
		goto out;
	h = pool_get(s);
	if (!h) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		resp_reset(r);
		r->attempts++;
		rc = attempt_once(s, h, q, payload_hash, (char *)path.ptr,
				  (char *)query.ptr, r);
		if (rc < 0)
			break;
		if (r->cc == CURLE_OK && (r->status < 200 || r->status >= 300))
			parse_error_body(r);
		else if (r->cc == CURLE_OK && q->error_in_200 && r->status == 200) {
			/* S3 may answer 200 and then report a failure in the
			 * body (copy, complete): treat it as the error it is. */
			parse_error_body(r);
			if (r->code[0])
				r->status = strcmp(r->code, "InternalError") &&
						    strcmp(r->code, "SlowDown")
					    ? 400 : 503;
		}
		if (r->overflow && r->cc == CURLE_WRITE_ERROR) {
			rc = s3_bad_answer(s, q->what, q->key,
					   "response larger than expected");
			break;
		}
		if (!retryable(r) || r->attempts > s->retries)
			break;
		nv_log(NV_DEBUG, NV_SUB_STORE,
		       "s3://%s %s %s: attempt %d failed (%s, HTTP %ld %s), retrying",
		       s->bucket, q->what, q->key ? q->key : "(bucket)", r->attempts,
		       curl_easy_strerror(r->cc), r->status, r->code);
		/* Only bodies that went out may have been applied; a refused
		 * connection never reached the server. */
		if (r->cc != CURLE_COULDNT_CONNECT && r->cc != CURLE_COULDNT_RESOLVE_HOST)
			r->maybe_applied = true;
		backoff(r->attempts - 1);
	}
	pool_put(s, h);
out:
	nv_buf_free(&path);
	nv_buf_free(&query);
	if (rc == -ENOMEM)
		nv_log(NV_ERR, NV_SUB_STORE, "s3://%s %s %s: out of memory", s->bucket,
		       q->what, q->key ? q->key : "(bucket)");
	return rc;
}

static void resp_init(struct s3_resp *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	nv_buf_init(&r->body, max);
}

static bool ok2xx(const struct s3_resp *r)
{
	return r->cc == CURLE_OK && r->status >= 200 && r->status < 300;
}

/* The full key of key: "prefix/key", bounded by S3's 1024 bytes. */
static int full_key(const struct s3_store *s, const char *what, const char *key,
		    char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s%s", s->prefix, key);

	if (n < 0 || (size_t)n >= cap || n > STORE_KEY_MAX) {
		nv_log(NV_ERR, NV_SUB_STORE,
		       "s3://%s %s %s: key with prefix \"%s\" exceeds S3's %d bytes",
		       s->bucket, what, key, s->prefix, STORE_KEY_MAX);
		return -EINVAL;
	}
	return 0;
}

/* --------------------------------------------------------- operations */

static int s3_head_full(struct s3_store *s, const char *what, const char *fkey,
			uint64_t *size, char *etag, size_t etag_cap)
{
	struct s3_req q = { .what = what, .method = "HEAD", .key = fkey };
	struct s3_resp r;
	int rc;

	resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0 && ok2xx(&r)) {
		if (!r.have_clen)
			rc = s3_bad_answer(s, what, fkey, "HEAD without Content-Length");
		else
			*size = r.clen;
		if (etag)
			snprintf(etag, etag_cap, "%s", r.etag);
	} else if (rc == 0) {
		rc = s3_to_errno(r.cc, r.status, r.code);
		if (rc != -ENOENT)
			rc = s3_fail(s, what, fkey, &r);
	}
	nv_buf_free(&r.body);
	return rc;
}

static int s3_head(void *be, const char *key, uint64_t *size)
{
	struct s3_store *s = be;
	char fk[STORE_KEY_MAX + 1];
	int rc = full_key(s, "head", key, fk, sizeof(fk));

	return rc ? rc : s3_head_full(s, "head", fk, size, NULL, 0);
}

static int s3_put(void *be, const char *key, const struct iovec *iov, int iovcnt,
		  unsigned flags)
{
	struct s3_store *s = be;
	char fk[STORE_KEY_MAX + 1], b64[25], hex[33], got[33];
	unsigned char md[16];
	struct s3_req q = { .what = "put", .method = "PUT", .key = fk,
			    .iov = iov, .iovcnt = iovcnt,
			    .body_len = store_iov_len(iov, iovcnt) };
	struct s3_resp r;
	int rc;

	rc = full_key(s, "put", key, fk, sizeof(fk));
	if (rc == 0)
		rc = md5_iov(iov, iovcnt, md, b64, hex);
	if (rc)
		return rc;
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "content-md5", b64 };
	if (flags & STORE_CREATE_ONCE)
		q.hdr[q.nhdr++] = (struct sigv4_kv){ "if-none-match", "*" };
	resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc)
		goto out;
	if (ok2xx(&r)) {
		/* Invariant 3. */
		if (!r.sse_opaque && etag_md5(r.etag, got) && strcmp(got, hex)) {
			nv_log(NV_ERR, NV_SUB_STORE,
			       "s3://%s put %s: ETag %s is not the MD5 %s we sent",
			       s->bucket, fk, r.etag, hex);
			rc = -EIO;
		}
		goto out;
	}
	rc = s3_to_errno(r.cc, r.status, r.code);
	if (rc == -EEXIST && (flags & STORE_CREATE_ONCE)) {
		/* Invariant 5: our own earlier attempt may have landed. */
		char etag[S3_ETAG_MAX];
		uint64_t size;

		if (r.maybe_applied &&
		    s3_head_full(s, "put", fk, &size, etag, sizeof(etag)) == 0 &&
		    etag_md5(etag, got) && strcmp(got, hex) == 0) {
			nv_log(NV_INFO, NV_SUB_STORE,
			       "s3://%s put %s: a retried create-once put found its own "
			       "object (ETag matches)", s->bucket, fk);
			rc = 0;
		}
		goto out;
	}
	rc = s3_fail(s, "put", fk, &r);
out:
	nv_buf_free(&r.body);
	return rc;
}

static int s3_get_range(void *be, const char *key, uint64_t off, size_t len,
			void *dst, size_t *got)
{
	struct s3_store *s = be;
	char fk[STORE_KEY_MAX + 1], range[64];
	struct s3_req q = { .what = "get", .method = "GET", .key = fk,
			    .sink = S3_SINK_RANGE, .dst = dst, .dst_len = len,
			    .off = off };
	struct s3_resp r;
	uint64_t size, last, want;
	int rc;

	*got = 0;
	rc = full_key(s, "get", key, fk, sizeof(fk));
	if (rc)
		return rc;
	if (len == 0 || off > S3_OFF_MAX) {
		/* No range can ask for nothing: a HEAD answers. */
		rc = s3_head_full(s, "get", fk, &size, NULL, 0);
		return rc ? rc : off > size ? -ERANGE : 0;
	}
	last = off + (len - 1 < S3_OFF_MAX ? len - 1 : S3_OFF_MAX);
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off, last);
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "range", range };
	resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc)
		goto out;
	if (r.crange_bad && r.status == 206) {
		/* A range answer that does not add up (s3rver on an empty
		 * object): ask for the size and decide ourselves. */
		rc = s3_head_full(s, "get", fk, &size, NULL, 0);
		if (rc == 0 && off > size)
			rc = -ERANGE;
		else if (rc == 0 && off < size)
			rc = s3_bad_answer(s, "get", fk, "malformed Content-Range");
		goto out;
	}
	if (ok2xx(&r) && (r.status == 200 || r.status == 206)) {
		/* How much the answer says there is from off on. */
		if (r.status == 206 && r.have_crange && r.cr_total != UINT64_MAX)
			size = r.cr_total;
		else if (r.status == 200 && r.have_clen)
			size = r.clen;
		else
			size = UINT64_MAX; /* unknown: trust the body */
		if (r.status == 200 && size != UINT64_MAX && off > size) {
			rc = -ERANGE; /* the server ignored the range */
			goto out;
		}
		want = size == UINT64_MAX ? r.got
		     : size - off < len ? size - off : len;
		if (r.got != want) {
			rc = s3_bad_answer(s, "get", fk, "short or misplaced range");
			goto out;
		}
		*got = r.got;
		goto out;
	}
	rc = s3_to_errno(r.cc, r.status, r.code);
	if (rc == -ERANGE) {
		/* 416: off == size (0 bytes) or off > size (-ERANGE). */
		rc = s3_head_full(s, "get", fk, &size, NULL, 0);
		if (rc == 0 && off > size)
			rc = -ERANGE;
		else if (rc == 0 && off < size)
			rc = s3_bad_answer(s, "get", fk, "416 for a range inside the object");
		goto out;
	}
	if (rc != -ENOENT)
		rc = s3_fail(s, "get", fk, &r);
out:
	nv_buf_free(&r.body);
	return rc;
}

/* DELETE one key (the fallback when DeleteObjects is not implemented). */
static int delete_one(struct s3_store *s, const char *fk)
{
	struct s3_req q = { .what = "delete", .method = "DELETE", .key = fk };
	struct s3_resp r;
	int rc;

	resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0 && !ok2xx(&r)) {
		rc = s3_to_errno(r.cc, r.status, r.code);
		rc = rc == -ENOENT ? 0 : s3_fail(s, "delete", fk, &r);
	}
	nv_buf_free(&r.body);
	return rc;
}

/* DeleteObjects for keys[0..n), n <= S3_DELETE_BATCH. */
static int delete_batch(struct s3_store *s, const char *const *keys, size_t n)
{
	char fk[STORE_KEY_MAX + 1], b64[25], hex[33];
	unsigned char md[16];
	struct nv_buf x;
	struct s3_req q = { .what = "delete", .method = "POST" };
	struct s3_resp r;
	struct xml_doc *d = NULL;
	struct iovec v;
	int rc = 0, failed = 0;

	nv_buf_init(&x, SIZE_MAX);
	resp_init(&r, S3_XML_MAX);
	rc = nv_buf_printf(&x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
			   "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
			   "<Quiet>true</Quiet>");
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = full_key(s, "delete", keys[i], fk, sizeof(fk));
		if (rc == 0)
			rc = nv_buf_printf(&x, "<Object><Key>");
		if (rc == 0)
			rc = xml_escape(&x, fk);
		if (rc == 0)
			rc = nv_buf_printf(&x, "</Key></Object>");
	}
	if (rc == 0)
		rc = nv_buf_printf(&x, "</Delete>");
	if (rc)
		goto out;
	v = (struct iovec){ x.ptr, x.len };
	rc = md5_iov(&v, 1, md, b64, hex);
	if (rc)
		goto out;
	q.query[q.nquery++] = (struct sigv4_kv){ "delete", NULL };
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "content-md5", b64 };
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "content-type", "application/xml" };
	q.iov = &v;
	q.iovcnt = 1;
	q.body_len = x.len;
	rc = s3_do(s, &q, &r);
	if (rc)
		goto out;
	if (!ok2xx(&r)) {
		rc = s3_to_errno(r.cc, r.status, r.code);
		if (rc == -ENOTSUP) {
			nv_log(NV_INFO, NV_SUB_STORE,
			       "s3://%s: DeleteObjects not implemented; deleting one "
			       "key per request", s->bucket);
			atomic_store(&s->delete_unsupported, true);
		} else {
			rc = s3_fail(s, "delete", keys[0], &r);
		}
		goto out;
	}
	if (r.body.len == 0)
		goto out; /* quiet mode, nothing failed, nothing said */
	if (xml_parse((const char *)r.body.ptr, r.body.len, &d) < 0 ||
	    strcmp(xml_name(xml_root(d)), "DeleteResult") != 0) {
		rc = s3_bad_answer(s, "delete", keys[0], "malformed DeleteResult");
		goto out;
	}
	/* Per-key errors; a missing key is not one. */
	for (const struct xml_node *e = xml_child(xml_root(d), "Error"); e;
	     e = xml_next(e, "Error")) {
		const char *code = xml_child_text(e, "Code", NULL);
		const char *k = xml_child_text(e, "Key", NULL);
		const char *msg = xml_child_text(e, "Message", NULL);
		int err;

		if (code && strcmp(code, "NoSuchKey") == 0)
			continue;
		err = s3_to_errno(CURLE_OK, 0, code ? code : "");
		if (err == 0)
			err = -EIO;
		if (failed++ == 0) {
			nv_log(NV_ERR, NV_SUB_STORE,
			       "s3://%s delete %.1100s: %s: %.256s", s->bucket,
			       k ? k : "?", code ? code : "-", msg ? msg : "-");
			rc = err;
		}
	}
	if (failed > 1)
		nv_log(NV_ERR, NV_SUB_STORE, "s3://%s delete: %d keys of %zu failed",
		       s->bucket, failed, n);
out:
	xml_free(d);
	nv_buf_free(&r.body);
	nv_buf_free(&x);
	return rc;
}

static int s3_del(void *be, const char *const *keys, size_t n)
{
	struct s3_store *s = be;
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i += S3_DELETE_BATCH) {
		size_t m = n - i < S3_DELETE_BATCH ? n - i : S3_DELETE_BATCH;

		if (!atomic_load(&s->delete_unsupported))
			rc = delete_batch(s, keys + i, m);
		if (rc == -ENOTSUP || atomic_load(&s->delete_unsupported)) {
			rc = 0;
			for (size_t j = i; j < i + m && rc == 0; j++) {
				char fk[STORE_KEY_MAX + 1];

				rc = full_key(s, "delete", keys[j], fk, sizeof(fk));
				if (rc == 0)
					rc = delete_one(s, fk);
			}
		}
	}
	return rc;
}

/*
 * Listing.  ListObjectsV2 pages (list-type=2, start-after on the first
 * page, continuation-token after), checked: keys inside our prefix, after
 * start_after, in strictly increasing byte order, as store.h promises.
 *
 * A server that pages in another order (s3rver walks its directories:
 * "a/c/d" before "a/c-e") cannot be streamed.  When the first page shows
 * it, before anything was handed to fn, the store switches to sorted
 * mode for good (logged once): every listing then collects the whole
 * range, at most S3_LIST_SORT_BYTES of keys, sorts and hands it out.
 * When the disorder shows only after keys went to fn, that one call
 * fails with -EIO and later calls are sorted.
 */
#define S3_LIST_SORT_BYTES (64u << 20)
#define S3_LIST_RESTART 2 /* internal: switch to sorted mode, start over */

struct list_entry {
	char *key;     /* owned: the full key */
	uint64_t size;
};

struct lister {
	struct s3_store *s;
	const char *fprefix, *after; /* full prefix; full start_after or "" */
	store_list_fn fn;
	void *arg;
	bool sorted;
	bool emitted;                /* stream mode: fn saw a key */
	char last[STORE_KEY_MAX + 2];/* stream mode: the last key seen */
	struct list_entry *v;        /* sorted mode */
	size_t n, cap, bytes;
};

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct list_entry *)a)->key,
		      ((const struct list_entry *)b)->key);
}

/* Hand one full key to fn: 0 go on, > 0 stop, < 0 error. */
static int list_emit(struct lister *l, const char *k, uint64_t size)
{
	size_t plen = strlen(l->s->prefix);

	/* Objects that are no store keys (written by other tools) are not
	 * ours to list, as in dir.c. */
	if (store_key_check(k + plen) < 0) {
		nv_log(NV_DEBUG, NV_SUB_STORE, "s3://%s list: skipping '%.64s'",
		       l->s->bucket, k);
		return 0;
	}
	l->emitted = true;
	return l->fn(l->arg, k + plen, size);
}

/* One parsed page: check, then stream or collect its keys. */
static int list_page(struct lister *l, const struct xml_node *root, int *nkeys)
{
	const struct xml_node *c;
	char prev[STORE_KEY_MAX + 2];
	size_t tn, kn;
	int rc = 0;

	/* Pass 1: form, prefix and (stream mode) order. */
	snprintf(prev, sizeof(prev), "%s", l->last);
	for (c = xml_child(root, "Contents"); c; c = xml_next(c, "Contents")) {
		const char *k = xml_child_text(c, "Key", &kn), *t;
		uint64_t size;

		t = xml_child_text(c, "Size", &tn);
		if (!k || !t || parse_u64(t, tn, &size) < 0 || kn == 0 ||
		    kn > STORE_KEY_MAX || strlen(k) != kn ||
		    strncmp(k, l->fprefix, strlen(l->fprefix)) != 0)
			return s3_bad_answer(l->s, "list", l->fprefix,
					     "a Contents without Key/Size or outside the prefix");
		if (l->sorted)
			continue;
		if (strcmp(k, l->after) <= 0 || (prev[0] && strcmp(k, prev) <= 0)) {
			if (!atomic_exchange(&l->s->list_unsorted, true))
				nv_log(NV_WARN, NV_SUB_STORE,
				       "s3://%s: the server lists keys out of byte order; "
				       "listings are sorted here from now on (at most %u "
				       "MiB of keys each)", l->s->bucket,
				       S3_LIST_SORT_BYTES >> 20);
			if (!l->emitted)
				return S3_LIST_RESTART;
			return s3_bad_answer(l->s, "list", l->fprefix,
					     "keys out of order after the first page");
		}
		memcpy(prev, k, kn + 1);
	}
	/* Pass 2: hand out or collect. */
	for (c = xml_child(root, "Contents"); c && rc == 0; c = xml_next(c, "Contents")) {
		const char *k = xml_child_text(c, "Key", &kn);
		const char *t = xml_child_text(c, "Size", &tn);
		uint64_t size = 0;

		(void)parse_u64(t, tn, &size); /* checked in pass 1 */
		(*nkeys)++;
		if (!l->sorted) {
			memcpy(l->last, k, kn + 1);
			rc = list_emit(l, k, size);
			continue;
		}
		if (strcmp(k, l->after) <= 0)
			continue;
		if (l->bytes + kn + 1 > S3_LIST_SORT_BYTES)
			return s3_bad_answer(l->s, "list", l->fprefix,
					     "unsorted listing too large to sort");
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 1024;
			struct list_entry *nv = realloc(l->v, cap * sizeof(*nv));

			if (!nv)
				return -ENOMEM;
			l->v = nv;
			l->cap = cap;
		}
		l->v[l->n].key = strdup(k);
		if (!l->v[l->n].key)
			return -ENOMEM;
		l->v[l->n++].size = size;
		l->bytes += kn + 1;
	}
	return rc;
}

/* Walk every page once.  0, > 0 (fn stopped), S3_LIST_RESTART, < 0. */
static int list_walk(struct lister *l)
{
	struct s3_store *s = l->s;
	char maxkeys[16];
	char *token = NULL;
	int rc = 0, empty_pages = 0;

	snprintf(maxkeys, sizeof(maxkeys), "%d", s->list_max_keys);
	for (;;) {
		struct s3_req q = { .what = "list", .method = "GET" };
		struct s3_resp r;
		struct xml_doc *d = NULL;
		const struct xml_node *root;
		const char *t;
		size_t tn;
		int nkeys = 0;
		bool truncated = false;

		q.query[q.nquery++] = (struct sigv4_kv){ "list-type", "2" };
		q.query[q.nquery++] = (struct sigv4_kv){ "max-keys", maxkeys };
		if (l->fprefix[0])
			q.query[q.nquery++] = (struct sigv4_kv){ "prefix", l->fprefix };
		if (token)
			q.query[q.nquery++] = (struct sigv4_kv){ "continuation-token", token };
		else if (l->after[0] && !l->sorted)
			q.query[q.nquery++] = (struct sigv4_kv){ "start-after", l->after };
		resp_init(&r, S3_XML_MAX);
		rc = s3_do(s, &q, &r);
		if (rc == 0 && !ok2xx(&r))
			rc = s3_fail(s, "list", l->fprefix, &r);
		if (rc == 0 && (xml_parse((const char *)r.body.ptr, r.body.len, &d) < 0 ||
				strcmp(xml_name(xml_root(d)), "ListBucketResult")))
			rc = s3_bad_answer(s, "list", l->fprefix, "malformed ListBucketResult");
		if (rc == 0) {
			root = xml_root(d);
			rc = list_page(l, root, &nkeys);
			t = xml_child_text(root, "IsTruncated", NULL);
			truncated = t && strcmp(t, "true") == 0;
		}
		free(token);
		token = NULL;
		if (rc == 0 && truncated) {
			t = xml_child_text(root, "NextContinuationToken", &tn);
			if (!t || tn == 0 || tn > S3_TOKEN_MAX || strlen(t) != tn)
				rc = s3_bad_answer(s, "list", l->fprefix,
						   "truncated without a continuation token");
			else if (!(token = strdup(t)))
				rc = -ENOMEM;
			else if (nkeys == 0 && ++empty_pages > S3_LIST_EMPTY_PAGES_MAX)
				rc = s3_bad_answer(s, "list", l->fprefix,
						   "pages without keys and without end");
			else if (nkeys)
				empty_pages = 0;
		}
		xml_free(d);
		nv_buf_free(&r.body);
		if (rc || !truncated)
			break;
	}
	free(token);
	return rc;
}

static void lister_clear(struct lister *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].key);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = l->bytes = 0;
}

static int s3_list(void *be, const char *prefix, const char *start_after,
		   store_list_fn fn, void *arg)
{
	struct s3_store *s = be;
	char fprefix[STORE_KEY_MAX + 2], after[STORE_KEY_MAX + 2];
	struct lister l = { .s = s, .fprefix = fprefix, .after = after,
			    .fn = fn, .arg = arg };
	int rc;

	if ((size_t)snprintf(fprefix, sizeof(fprefix), "%s%s", s->prefix, prefix) >=
		    sizeof(fprefix) ||
	    (size_t)snprintf(after, sizeof(after), "%s%s",
			     start_after[0] ? s->prefix : "", start_after) >=
		    sizeof(after))
		return 0; /* longer than any key: nothing can match */
	l.sorted = atomic_load(&s->list_unsorted);
	rc = list_walk(&l);
	if (rc == S3_LIST_RESTART) {
		lister_clear(&l);
		l.sorted = true;
		l.last[0] = '\0';
		rc = list_walk(&l);
	}
	if (rc == 0 && l.sorted && l.n) { /* l.v is NULL while empty */
		qsort(l.v, l.n, sizeof(*l.v), entry_cmp);
		for (size_t i = 0; i < l.n && rc == 0; i++)
			if (i == 0 || strcmp(l.v[i].key, l.v[i - 1].key))
				rc = list_emit(&l, l.v[i].key, l.v[i].size);
	}
	lister_clear(&l);
	return rc > 0 ? 0 : rc;
}

/* --------------------------------------------------------- multipart */

static void upload_free(struct s3_upload *u)
{
	if (!u)
		return;
	pthread_mutex_destroy(&u->lock);
	free(u->parts);
	free(u->key);
	free(u->id);
	free(u);
}

static int s3_mpu_create(void *be, const char *key, void **upload)
{
	struct s3_store *s = be;
	struct s3_upload *u;
	struct s3_req q = { .what = "mpu_create", .method = "POST" };
	struct s3_resp r;
	struct xml_doc *d = NULL;
	char fk[STORE_KEY_MAX + 1];
	const char *id;
	size_t n;
	int rc;

	rc = full_key(s, "mpu_create", key, fk, sizeof(fk));
	if (rc)
		return rc;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	pthread_mutex_init(&u->lock, NULL);
	u->key = strdup(fk);
	if (!u->key) {
		upload_free(u);
		return -ENOMEM;
	}
	q.key = u->key;
	q.query[q.nquery++] = (struct sigv4_kv){ "uploads", NULL };
	resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0 && !ok2xx(&r))
		rc = s3_fail(s, "mpu_create", fk, &r);
	if (rc == 0 && (xml_parse((const char *)r.body.ptr, r.body.len, &d) < 0 ||
			!(id = xml_child_text(xml_root(d), "UploadId", &n)) || n == 0 ||
			n > S3_TOKEN_MAX || strlen(id) != n))
		rc = s3_bad_answer(s, "mpu_create", fk, "no UploadId");
	if (rc == 0 && !(u->id = strdup(id)))
		rc = -ENOMEM;
	xml_free(d);
	nv_buf_free(&r.body);
	if (rc) {
		upload_free(u);
		return rc;
	}
	*upload = u;
	return 0;
}

/* Remember part no's ETag (a re-sent part replaces the old one). */
static int record_part(struct s3_upload *u, int no, const char *etag)
{
	int rc = 0;

	pthread_mutex_lock(&u->lock);
	for (size_t i = 0; i < u->nparts; i++) {
		if (u->parts[i].no == no) {
			snprintf(u->parts[i].etag, sizeof(u->parts[i].etag), "%s", etag);
			goto out;
		}
	}
	if (u->nparts == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 16;
		struct s3_part *p = realloc(u->parts, cap * sizeof(*p));

		if (!p) {
			rc = -ENOMEM;
			goto out;
		}
		u->parts = p;
		u->cap = cap;
	}
	u->parts[u->nparts].no = no;
	snprintf(u->parts[u->nparts].etag, sizeof(u->parts[0].etag), "%s", etag);
	u->nparts++;
out:
	pthread_mutex_unlock(&u->lock);
	return rc;
}

static void part_query(struct s3_req *q, const struct s3_upload *u, char *no_buf,
		       size_t cap, int no)
{
	snprintf(no_buf, cap, "%d", no);
	q->query[q->nquery++] = (struct sigv4_kv){ "partNumber", no_buf };
	q->query[q->nquery++] = (struct sigv4_kv){ "uploadId", u->id };
}

static int s3_mpu_put_part(void *be, void *upload, int part_no,
			   const struct iovec *iov, int iovcnt)
{
	struct s3_store *s = be;
	struct s3_upload *u = upload;
	char no[16], b64[25], hex[33], got[33];
	unsigned char md[16];
	struct s3_req q = { .what = "mpu_put_part", .method = "PUT", .key = u->key,
			    .iov = iov, .iovcnt = iovcnt,
			    .body_len = store_iov_len(iov, iovcnt) };
	struct s3_resp r;
	int rc;

	rc = md5_iov(iov, iovcnt, md, b64, hex);
	if (rc)
		return rc;
	part_query(&q, u, no, sizeof(no), part_no);
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "content-md5", b64 };
	resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0 && !ok2xx(&r))
		rc = s3_fail(s, "mpu_put_part", u->key, &r);
	else if (rc == 0 && !r.etag[0])
		rc = s3_bad_answer(s, "mpu_put_part", u->key, "UploadPart without ETag");
	else if (rc == 0 && !r.sse_opaque && etag_md5(r.etag, got) && strcmp(got, hex)) {
		nv_log(NV_ERR, NV_SUB_STORE,
		       "s3://%s mpu_put_part %s part %d: ETag %s is not the MD5 %s",
		       s->bucket, u->key, part_no, r.etag, hex);
		rc = -EIO;
	}
	if (rc == 0)
		rc = record_part(u, part_no, r.etag);
	nv_buf_free(&r.body);
	return rc;
}

static int s3_mpu_copy_part(void *be, void *upload, int part_no,
			    const char *src_key, uint64_t off, uint64_t len)
{
	struct s3_store *s = be;
	struct s3_upload *u = upload;
	char no[16], fk[STORE_KEY_MAX + 1], range[64];
	struct nv_buf src;
	struct s3_req q = { .what = "mpu_copy_part", .method = "PUT", .key = u->key,
			    .error_in_200 = true };
	struct s3_resp r;
	struct xml_doc *d = NULL;
	const char *etag;
	size_t n;
	uint64_t size;
	int rc;

	if (atomic_load(&s->copy_unsupported))
		return -ENOTSUP;
	if (off > S3_OFF_MAX || len > S3_OFF_MAX)
		return -ERANGE;
	rc = full_key(s, "mpu_copy_part", src_key, fk, sizeof(fk));
	if (rc)
		return rc;
	/* x-amz-copy-source: "bucket/key", URL-encoded, '/' kept. */
	nv_buf_init(&src, 8192);
	rc = sigv4_uri_encode(&src, s->bucket, strlen(s->bucket), false);
	if (rc == 0)
		rc = nv_buf_add(&src, "/", 1);
	if (rc == 0)
		rc = sigv4_uri_encode(&src, fk, strlen(fk), true);
	if (rc) {
		nv_buf_free(&src);
		return rc;
	}
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off, off + len - 1);
	part_query(&q, u, no, sizeof(no), part_no);
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "x-amz-copy-source", (char *)src.ptr };
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "x-amz-copy-source-range", range };
	resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc)
		goto out;
	if (ok2xx(&r)) {
		if (xml_parse((const char *)r.body.ptr, r.body.len, &d) < 0 ||
		    strcmp(xml_name(xml_root(d)), "CopyPartResult") ||
		    !(etag = xml_child_text(xml_root(d), "ETag", &n)) || n == 0 ||
		    n >= S3_ETAG_MAX || strlen(etag) != n)
			rc = s3_bad_answer(s, "mpu_copy_part", u->key,
					   "CopyPartResult without ETag");
		else
			rc = record_part(u, part_no, etag);
		goto out;
	}
	rc = s3_to_errno(r.cc, r.status, r.code);
	if (rc == -ENOTSUP) {
		if (!atomic_exchange(&s->copy_unsupported, true))
			nv_log(NV_INFO, NV_SUB_STORE,
			       "s3://%s: UploadPartCopy not implemented (HTTP %ld %s); "
			       "parts will be read and uploaded", s->bucket, r.status,
			       r.code);
		goto out;
	}
	if (rc == -ERANGE || rc == -EINVAL) {
		/* An out-of-range copy is 416 InvalidRange or 400
		 * InvalidArgument depending on the server: look. */
		int hrc = s3_head_full(s, "mpu_copy_part", fk, &size, NULL, 0);

		if (hrc == -ENOENT) {
			rc = -ENOENT;
			goto out;
		}
		if (hrc == 0 && (off > size || len > size - off)) {
			nv_log(NV_WARN, NV_SUB_STORE,
			       "s3://%s mpu_copy_part %s: copy of [%" PRIu64 ", +%" PRIu64
			       ") from %s of %" PRIu64 " bytes", s->bucket, u->key, off,
			       len, fk, size);
			rc = -ERANGE;
			goto out;
		}
	}
	if (rc != -ENOENT)
		rc = s3_fail(s, "mpu_copy_part", u->key, &r);
out:
	xml_free(d);
	nv_buf_free(&r.body);
	nv_buf_free(&src);
	return rc;
}

static int part_cmp(const void *a, const void *b)
{
	const struct s3_part *x = a, *y = b;

	return (x->no > y->no) - (x->no < y->no);
}

/* The ETag S3 gives a multipart object: MD5 of the parts' binary MD5s,
 * "-N".  false when a part's ETag is no plain MD5. */
static bool multipart_etag(const struct s3_upload *u, char out[48])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned char md[16];
	unsigned int n = 0;
	char hex[33];
	int ok = c && EVP_DigestInit_ex(c, EVP_md5(), NULL);

	for (size_t i = 0; ok && i < u->nparts; i++) {
		unsigned char b[16];

		if (!etag_md5(u->parts[i].etag, hex)) {
			ok = 0;
			break;
		}
		for (int j = 0; j < 16; j++) {
			unsigned hi = (unsigned)(isdigit((unsigned char)hex[2 * j])
				      ? hex[2 * j] - '0' : hex[2 * j] - 'a' + 10);
			unsigned lo = (unsigned)(isdigit((unsigned char)hex[2 * j + 1])
				      ? hex[2 * j + 1] - '0' : hex[2 * j + 1] - 'a' + 10);

			b[j] = (unsigned char)(hi << 4 | lo);
		}
		ok = EVP_DigestUpdate(c, b, 16);
	}
	ok = ok && EVP_DigestFinal_ex(c, md, &n) && n == 16;
	EVP_MD_CTX_free(c);
	if (!ok)
		return false;
	hex16(md, hex);
	snprintf(out, 48, "%s-%zu", hex, u->nparts);
	return true;
}

static void abort_upload(struct s3_store *s, struct s3_upload *u)
{
	struct s3_req q = { .what = "mpu_abort", .method = "DELETE", .key = u->key };
	struct s3_resp r;
	int rc;

	q.query[q.nquery++] = (struct sigv4_kv){ "uploadId", u->id };
	resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0 && !ok2xx(&r)) {
		if (r.cc == CURLE_OK && (r.status == 404 || r.status == 405 ||
					 r.status == 501))
			/* Already gone, or a server without abort (s3rver:
			 * 405): nothing more we can do; its parts stay until
			 * the server's own cleanup. */
			nv_log(NV_DEBUG, NV_SUB_STORE,
			       "s3://%s mpu_abort %s: HTTP %ld %s (ignored)", s->bucket,
			       u->key, r.status, r.code);
		else
			(void)s3_fail(s, "mpu_abort", u->key, &r);
	}
	nv_buf_free(&r.body);
}

static int s3_mpu_complete(void *be, void *upload, unsigned flags)
{
	struct s3_store *s = be;
	struct s3_upload *u = upload;
	struct s3_req q = { .what = "mpu_complete", .method = "POST", .key = u->key,
			    .error_in_200 = true };
	struct s3_resp r;
	struct nv_buf x;
	struct iovec v;
	char b64[25], hex[33], expect[48], etag[S3_ETAG_MAX];
	unsigned char md[16];
	uint64_t size;
	bool aborted = false;
	int rc;

	nv_buf_init(&x, SIZE_MAX);
	resp_init(&r, S3_XML_MAX);
	/* No other call may use the upload now (store.h); no lock needed,
	 * but take it for the memory order of parts added by other threads. */
	pthread_mutex_lock(&u->lock);
	pthread_mutex_unlock(&u->lock);
	if (u->nparts == 0) { /* S3 refuses it too (MalformedXML) */
		nv_log(NV_ERR, NV_SUB_STORE, "s3://%s mpu %s: complete with no parts",
		       s->bucket, u->key);
		rc = -EINVAL;
		goto fail;
	}
	if (flags & STORE_CREATE_ONCE) {
		/* RGW ignores If-None-Match on complete: look first (s3.c
		 * "Deviations": the metastore, not this check, decides). */
		rc = s3_head_full(s, "mpu_complete", u->key, &size, NULL, 0);
		if (rc == 0)
			rc = -EEXIST;
		if (rc != -ENOENT)
			goto fail;
		q.hdr[q.nhdr++] = (struct sigv4_kv){ "if-none-match", "*" };
	}
	qsort(u->parts, u->nparts, sizeof(*u->parts), part_cmp);
	rc = nv_buf_printf(&x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
			   "<CompleteMultipartUpload "
			   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	for (size_t i = 0; i < u->nparts && rc == 0; i++) {
		rc = nv_buf_printf(&x, "<Part><PartNumber>%d</PartNumber><ETag>",
				   u->parts[i].no);
		if (rc == 0)
			rc = xml_escape(&x, u->parts[i].etag);
		if (rc == 0)
			rc = nv_buf_printf(&x, "</ETag></Part>");
	}
	if (rc == 0)
		rc = nv_buf_printf(&x, "</CompleteMultipartUpload>");
	v = (struct iovec){ x.ptr, x.len };
	if (rc == 0)
		rc = md5_iov(&v, 1, md, b64, hex);
	if (rc)
		goto fail;
	q.query[q.nquery++] = (struct sigv4_kv){ "uploadId", u->id };
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "content-md5", b64 };
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "content-type", "application/xml" };
	q.iov = &v;
	q.iovcnt = 1;
	q.body_len = x.len;
	rc = s3_do(s, &q, &r);
	if (rc)
		goto fail;
	if (ok2xx(&r))
		goto out;
	rc = s3_to_errno(r.cc, r.status, r.code);
	if (rc == -EEXIST && (flags & STORE_CREATE_ONCE))
		goto fail;
	if (r.maybe_applied && r.cc == CURLE_OK && strcmp(r.code, "NoSuchUpload") == 0 &&
	    multipart_etag(u, expect) &&
	    s3_head_full(s, "mpu_complete", u->key, &size, etag, sizeof(etag)) == 0 &&
	    (strcmp(etag, expect) == 0 ||
	     (strlen(etag) == strlen(expect) + 2 && strncmp(etag + 1, expect,
							    strlen(expect)) == 0))) {
		/* Invariant 5: an earlier attempt completed it. */
		nv_log(NV_INFO, NV_SUB_STORE,
		       "s3://%s mpu_complete %s: a retried complete found its object",
		       s->bucket, u->key);
		rc = 0;
		aborted = true; /* nothing left to abort */
		goto out;
	}
	rc = s3_fail(s, "mpu_complete", u->key, &r);
fail:
	if (!aborted)
		abort_upload(s, u);
out:
	nv_buf_free(&r.body);
	nv_buf_free(&x);
	upload_free(u);
	return rc;
}

static void s3_mpu_abort(void *be, void *upload)
{
	abort_upload(be, upload);
	upload_free(upload);
}

/* ------------------------------------------------------- open, close */

static void s3_close(void *be)
{
	struct s3_store *s = be;

	if (!s)
		return;
	if (s->free_handles) {
		assert(s->nfree == s->nhandles); /* no call in progress */
		for (int i = 0; i < s->nfree; i++)
			curl_easy_cleanup(s->free_handles[i]);
	}
	if (s->share)
		curl_share_cleanup(s->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&s->share_lock[i]);
	pthread_mutex_destroy(&s->pool_lock);
	pthread_cond_destroy(&s->pool_cond);
	free(s->free_handles);
	free(s->bucket);
	free(s->region);
	free(s->access_key);
	if (s->secret_key)
		memset(s->secret_key, 0, strlen(s->secret_key));
	free(s->secret_key);
	free(s->session_token);
	free(s->prefix);
	free(s->zone);
	free(s->ca_file);
	free(s->base_url);
	free(s->host);
	free(s->path_base);
	free(s);
}

static const struct store_backend_ops s3_ops = {
	.scheme = "s3",
	.close = s3_close,
	.put = s3_put,
	.get_range = s3_get_range,
	.head = s3_head,
	.del = s3_del,
	.list = s3_list,
	.mpu_create = s3_mpu_create,
	.mpu_put_part = s3_mpu_put_part,
	.mpu_copy_part = s3_mpu_copy_part,
	.mpu_complete = s3_mpu_complete,
	.mpu_abort = s3_mpu_abort,
};

/* ------------------------------------------------------ URL parsing */

/* The parsed options of one URL; strings owned (decoded). */
struct s3_opts {
	char *endpoint, *region, *path_style, *access_key, *secret_key;
	char *prefix, *zone, *connect_timeout_ms, *request_timeout_ms;
	char *retries, *max_connections, *sign_payload, *list_max_keys, *ca_file;
};

#define OPT(name) { #name, offsetof(struct s3_opts, name) }
static const struct { const char *name; size_t off; } s3_opt_table[] = {
	OPT(endpoint), OPT(region), OPT(path_style), OPT(access_key),
	OPT(secret_key), OPT(prefix), OPT(zone), OPT(connect_timeout_ms),
	OPT(request_timeout_ms), OPT(retries), OPT(max_connections),
	OPT(sign_payload), OPT(list_max_keys), OPT(ca_file),
};
#undef OPT

static void opts_free(struct s3_opts *o)
{
	for (size_t i = 0; i < sizeof(s3_opt_table) / sizeof(s3_opt_table[0]); i++) {
		char **p = (char **)((char *)o + s3_opt_table[i].off);

		if (*p && (!strcmp(s3_opt_table[i].name, "secret_key")))
			memset(*p, 0, strlen(*p));
		free(*p);
	}
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	     : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A decoded copy of s[0..n) (%XX escapes), or NULL with *err set. */
static char *pct_decode(const char *s, size_t n, int *err)
{
	char *o = malloc(n + 1);
	size_t j = 0;

	if (!o) {
		*err = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%') {
			int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
			int lo = i + 2 < n ? hexval(s[i + 2]) : -1;

			/* %00 would cut the value short: refused. */
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				free(o);
				*err = -EINVAL;
				return NULL;
			}
			o[j++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			o[j++] = s[i];
		}
	}
	o[j] = '\0';
	return o;
}

static int url_bad(const char *url, const char *what, const char *detail)
{
	nv_log(NV_ERR, NV_SUB_STORE, "bad s3 store URL: %s%s%s (URL starting '%.12s...')",
	       what, detail ? ": " : "", detail ? detail : "", url);
	return -EINVAL;
}

/* Parse "s3://BUCKET?k=v&..." into *bucket and o.  0 or -EINVAL/-ENOMEM. */
static int url_split(const char *url, char **bucket, struct s3_opts *o)
{
	const char *b = url + 5, *q = strchr(b, '?'), *p;
	size_t bn = q ? (size_t)(q - b) : strlen(b);
	int err = 0;

	if (strncmp(url, "s3://", 5) != 0)
		return url_bad(url, "not an s3:// URL", NULL);
	if (memchr(b, '/', bn))
		return url_bad(url, "a path after the bucket", "use prefix=P");
	*bucket = strndup(b, bn);
	if (!*bucket)
		return -ENOMEM;
	for (p = q ? q + 1 : NULL; p && *p;) {
		const char *amp = strchr(p, '&'), *eq;
		size_t n = amp ? (size_t)(amp - p) : strlen(p), i;
		char **slot = NULL, name[32];

		eq = memchr(p, '=', n);
		if (!eq || eq == p || (size_t)(eq - p) >= sizeof(name)) {
			snprintf(name, sizeof(name), "%.*s", (int)(n < 31 ? n : 31), p);
			return url_bad(url, "option without value", name);
		}
		snprintf(name, sizeof(name), "%.*s", (int)(eq - p), p);
		for (i = 0; i < sizeof(s3_opt_table) / sizeof(s3_opt_table[0]); i++)
			if (!strcmp(name, s3_opt_table[i].name))
				slot = (char **)((char *)o + s3_opt_table[i].off);
		if (!slot)
			return url_bad(url, "unknown option", name);
		if (*slot)
			return url_bad(url, "option given twice", name);
		*slot = pct_decode(eq + 1, n - (size_t)(eq + 1 - p), &err);
		if (!*slot)
			return err == -ENOMEM ? err : url_bad(url, "bad %-escape in", name);
		p = amp ? amp + 1 : NULL;
		if (amp && !*p)
			return url_bad(url, "trailing '&'", NULL);
	}
	return 0;
}

/* A bucket name: 3..63 of [a-z0-9.-], alphanumeric at both ends (the S3
 * rules; path-style endpoints also allow upper case and '_'). */
static bool bucket_ok(const char *b, bool path_style)
{
	size_t n = strlen(b);

	if (n < 3 || n > 63 || !isalnum((unsigned char)b[0]) ||
	    !isalnum((unsigned char)b[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)b[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
		    c == '.')
			continue;
		if (path_style && ((c >= 'A' && c <= 'Z') || c == '_'))
			continue;
		return false;
	}
	return true;
}

static int parse_long(const char *url, const char *name, const char *v, long lo,
		      long hi, long *out)
{
	char *end;
	long x;

	if (!v)
		return 0;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi) {
		char msg[96];

		snprintf(msg, sizeof(msg), "%s=%.20s (want %ld..%ld)", name, v, lo, hi);
		return url_bad(url, "bad number", msg);
	}
	*out = x;
	return 0;
}

/* Split "http(s)://host[:port][/]" into scheme, host (IPv6 in []), port. */
static int parse_endpoint(const char *url, const char *ep, bool *https,
			  char **host, long *port, bool *is_ip)
{
	const char *h, *end, *colon;
	size_t hn;

	if (!strncmp(ep, "https://", 8)) {
		*https = true;
		h = ep + 8;
	} else if (!strncmp(ep, "http://", 7)) {
		*https = false;
		h = ep + 7;
	} else {
		return url_bad(url, "endpoint must start with http:// or https://", NULL);
	}
	end = h + strlen(h);
	if (end > h && end[-1] == '/')
		end--;
	if (memchr(h, '/', (size_t)(end - h)) || memchr(h, '?', (size_t)(end - h)) ||
	    memchr(h, '@', (size_t)(end - h)))
		return url_bad(url, "endpoint must be scheme://host[:port]", NULL);
	if (*h == '[') {
		const char *rb = memchr(h, ']', (size_t)(end - h));

		if (!rb)
			return url_bad(url, "endpoint: unclosed [IPv6]", NULL);
		colon = rb + 1 < end ? rb + 1 : NULL;
		if (colon && *colon != ':')
			return url_bad(url, "endpoint: junk after [IPv6]", NULL);
		hn = (size_t)(rb + 1 - h);
		*is_ip = true;
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		hn = colon ? (size_t)(colon - h) : (size_t)(end - h);
		*is_ip = true;
		for (size_t i = 0; i < hn; i++)
			if (!isdigit((unsigned char)h[i]) && h[i] != '.')
				*is_ip = false;
	}
	if (hn == 0)
		return url_bad(url, "endpoint without a host", NULL);
	for (size_t i = 0; i < hn; i++)
		if (!isalnum((unsigned char)h[i]) && !strchr(".-_[]:", h[i]))
			return url_bad(url, "endpoint: bad character in host", NULL);
	*port = *https ? 443 : 80;
	if (colon) {
		char pb[8];
		size_t pn = (size_t)(end - colon - 1);
		char *pe;

		if (pn == 0 || pn >= sizeof(pb))
			return url_bad(url, "endpoint: bad port", NULL);
		memcpy(pb, colon + 1, pn);
		pb[pn] = '\0';
		*port = strtol(pb, &pe, 10);
		if (*pe || *port < 1 || *port > 65535)
			return url_bad(url, "endpoint: bad port", pb);
	}
	*host = strndup(h, hn);
	return *host ? 0 : -ENOMEM;
}

static bool label_ok(const char *z, size_t max)
{
	size_t n = strlen(z);

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)z[i]) && !strchr("._-", z[i]))
			return false;
	return true;
}

static int share_setup(struct s3_store *s)
{
	s->share = curl_share_init();
	if (!s->share)
		return -ENOMEM;
	if (curl_share_setopt(s->share, CURLSHOPT_LOCKFUNC, share_lock_cb) ||
	    curl_share_setopt(s->share, CURLSHOPT_UNLOCKFUNC, share_unlock_cb) ||
	    curl_share_setopt(s->share, CURLSHOPT_USERDATA, s) ||
	    curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) ||
	    curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION))
		return -EIO;
	return 0;
}

int s3_store_open(const char *url, struct store **out)
{
	struct s3_opts o = { 0 };
	struct s3_store *s;
	char *bucket = NULL, *host = NULL, *name = NULL;
	bool https = true, is_ip = false, path_style;
	long port = 443, v;
	const char *ak, *sk;
	int rc;

	pthread_once(&curl_once, curl_init_once);
	if (curl_init_rc != CURLE_OK) {
		nv_log(NV_ERR, NV_SUB_STORE, "s3: curl_global_init failed: %s",
		       curl_easy_strerror(curl_init_rc));
		return -EIO;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&s->share_lock[i], NULL);
	pthread_mutex_init(&s->pool_lock, NULL);
	pthread_cond_init(&s->pool_cond, NULL);
	s->connect_timeout_ms = S3_CONNECT_TIMEOUT_MS;
	s->request_timeout_ms = S3_REQUEST_TIMEOUT_MS;
	s->retries = S3_RETRIES;
	s->max_connections = S3_MAX_CONNECTIONS;
	s->list_max_keys = S3_LIST_MAX_KEYS;

	rc = url_split(url, &bucket, &o);
	if (rc)
		goto fail;
	s->bucket = bucket;
	bucket = NULL;
	rc = -EINVAL;
	if (o.endpoint &&
	    (rc = parse_endpoint(url, o.endpoint, &https, &host, &port, &is_ip)))
		goto fail;
	rc = -EINVAL;
	if (o.path_style && strcmp(o.path_style, "0") && strcmp(o.path_style, "1")) {
		url_bad(url, "path_style must be 0 or 1", o.path_style);
		goto fail;
	}
	path_style = o.path_style ? o.path_style[0] == '1' : o.endpoint != NULL;
	if (!bucket_ok(s->bucket, path_style)) {
		url_bad(url, "bad bucket name", s->bucket);
		goto fail;
	}
	if (!path_style && is_ip) {
		url_bad(url, "virtual-host style needs a DNS endpoint", "set path_style=1");
		goto fail;
	}
	s->region = strdup(o.region ? o.region : "us-east-1");
	if (!s->region || !label_ok(s->region, 64)) {
		rc = s->region ? url_bad(url, "bad region", o.region) : -ENOMEM;
		goto fail;
	}
	if (o.zone && !label_ok(o.zone, 64)) {
		url_bad(url, "bad zone", o.zone);
		goto fail;
	}
	if (o.prefix && o.prefix[0] && store_key_check(o.prefix) < 0) {
		url_bad(url, "prefix is no valid key", o.prefix);
		goto fail;
	}
	if ((rc = parse_long(url, "connect_timeout_ms", o.connect_timeout_ms, 1,
			     600000, &s->connect_timeout_ms)) ||
	    (rc = parse_long(url, "request_timeout_ms", o.request_timeout_ms, 1,
			     86400000, &s->request_timeout_ms)))
		goto fail;
	v = s->retries;
	if ((rc = parse_long(url, "retries", o.retries, 0, S3_RETRIES_MAX, &v)))
		goto fail;
	s->retries = (int)v;
	v = s->max_connections;
	if ((rc = parse_long(url, "max_connections", o.max_connections, 1,
			     S3_MAX_CONNECTIONS_MAX, &v)))
		goto fail;
	s->max_connections = (int)v;
	v = s->list_max_keys;
	if ((rc = parse_long(url, "list_max_keys", o.list_max_keys, 1,
			     S3_LIST_MAX_KEYS, &v)))
		goto fail;
	s->list_max_keys = (int)v;
	v = 0;
	if ((rc = parse_long(url, "sign_payload", o.sign_payload, 0, 1, &v)))
		goto fail;
	s->sign_payload = v == 1;
	rc = -EINVAL;

	/* Credentials: both from the URL, or both from the environment
	 * (with its session token). */
	if (!o.access_key != !o.secret_key) {
		url_bad(url, "access_key and secret_key go together", NULL);
		goto fail;
	}
	ak = o.access_key ? o.access_key : getenv("AWS_ACCESS_KEY_ID");
	sk = o.secret_key ? o.secret_key : getenv("AWS_SECRET_ACCESS_KEY");
	if (!ak || !sk || !ak[0] || !sk[0]) {
		url_bad(url, "no credentials",
			"give access_key= and secret_key= or set AWS_ACCESS_KEY_ID "
			"and AWS_SECRET_ACCESS_KEY");
		goto fail;
	}
	if (strpbrk(ak, "/, \r\n") || strpbrk(sk, "\r\n")) {
		url_bad(url, "malformed credentials", NULL);
		goto fail;
	}
	rc = -ENOMEM;
	s->access_key = strdup(ak);
	s->secret_key = strdup(sk);
	if (!o.access_key && getenv("AWS_SESSION_TOKEN") && getenv("AWS_SESSION_TOKEN")[0]) {
		s->session_token = strdup(getenv("AWS_SESSION_TOKEN"));
		if (!s->session_token)
			goto fail;
		if (strpbrk(s->session_token, "\r\n")) {
			rc = url_bad(url, "malformed AWS_SESSION_TOKEN", NULL);
			goto fail;
		}
	}
	if (!s->access_key || !s->secret_key)
		goto fail;
	if (o.prefix && o.prefix[0]) {
		s->prefix = malloc(strlen(o.prefix) + 2);
		if (s->prefix)
			sprintf(s->prefix, "%s/", o.prefix);
	} else {
		s->prefix = strdup("");
	}
	s->zone = xstrdup(o.zone);
	s->ca_file = xstrdup(o.ca_file);
	if (!s->prefix || (o.zone && !s->zone) || (o.ca_file && !s->ca_file))
		goto fail;

	/* Where requests go. */
	if (!host && !(host = malloc(strlen(s->region) + 32)))
		goto fail;
	if (!o.endpoint)
		sprintf(host, "s3.%s.amazonaws.com", s->region);
	{
		bool default_port = port == (https ? 443 : 80);
		size_t n = strlen(host) + strlen(s->bucket) + 32;

		s->host = malloc(n);
		s->base_url = malloc(n + 16);
		if (!s->host || !s->base_url)
			goto fail;
		snprintf(s->host, n, "%s%s%s", path_style ? "" : s->bucket,
			 path_style ? "" : ".", host);
		if (!default_port)
			snprintf(s->host + strlen(s->host), n - strlen(s->host), ":%ld",
				 port);
		snprintf(s->base_url, n + 16, "%s://%s", https ? "https" : "http",
			 s->host);
	}
	if (path_style) {
		s->path_base = malloc(strlen(s->bucket) + 2);
		if (s->path_base)
			sprintf(s->path_base, "/%s", s->bucket);
	} else {
		s->path_base = strdup("");
	}
	if (!s->path_base)
		goto fail;
	s->free_handles = calloc((size_t)s->max_connections, sizeof(CURL *));
	if (!s->free_handles)
		goto fail;
	rc = share_setup(s);
	if (rc) {
		nv_log(NV_ERR, NV_SUB_STORE, "s3://%s: cannot set up the curl share",
		       s->bucket);
		goto fail;
	}
	rc = -ENOMEM;
	name = malloc(strlen(s->bucket) + strlen(s->prefix) + strlen(s->base_url) +
		      (s->zone ? strlen(s->zone) : 0) + 32);
	if (!name)
		goto fail;
	sprintf(name, "s3://%s%s%.*s at %s%s%s", s->bucket, s->prefix[0] ? "/" : "",
		s->prefix[0] ? (int)strlen(s->prefix) - 1 : 0, s->prefix, s->base_url,
		s->zone ? " zone " : "", s->zone ? s->zone : "");
	opts_free(&o);
	free(host);
	nv_log(NV_INFO, NV_SUB_STORE, "opened %s (%s style, region %s)", name,
	       path_style ? "path" : "virtual-host", s->region);
	rc = store_wrap(&s3_ops, s, name, out); /* closes s on failure */
	free(name);
	return rc;

fail:
	opts_free(&o);
	free(bucket);
	free(host);
	free(name);
	s3_close(s);
	return rc;
}

const struct store_scheme s3_store_scheme = {
	.prefix = "s3://",
	.usage = "s3://bucket?...",
	.path = false,
	.open = s3_store_open,
};
