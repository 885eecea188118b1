/*
 * request.c - one S3 request, signed and retried, on a pooled curl handle
 * (S3 backend; overview and invariants in internal.h).
 *
 * For: s3_do() and what it needs: the handle pool and the curl share,
 * signing an attempt (sigv4.h) and setting a handle up, the curl read /
 * seek / header / write callbacks, retry classification and backoff,
 * reading <Error> bodies; and the hashing and parsing helpers the other
 * files share (MD5, SHA-256, ETags, decimal numbers, XML escaping).
 * Not for: deciding what a response means to a store call (ops.c, list.c,
 * mpu.c), the errno translation (errors.c).
 *
 * Invariants (internal.h 1, 2, 4, 7), here:
 *  1. What is signed is what is sent: sign_request() builds the URL with
 *     the encoders that produced the canonical request.
 *  2. A request is retried only when retryable() says so, at most
 *     s->retries times, re-signed each time, with backoff() between.
 *  3. A handle is taken by pool_get() and given back by pool_put() on
 *     every path of s3_do(); at most max_connections exist.
 *  4. A response body never grows past its bound, and a range sink never
 *     writes past dst_len.
 *
 * Locking: pool_lock guards free_handles, nfree, nhandles (pool_cond
 * waits for a handle); share_lock[i] guards curl's shared data i.  Order:
 * pool_lock, then share locks, never the reverse.
 */
#include "config.h"
#include "engine/store/s3/internal.h"
#include "engine/store/s3/xml.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

void s3_hex16(const unsigned char md[16], char out[33])
{
	static const char h[] = "0123456789abcdef";

	for (int i = 0; i < 16; i++) {
		out[2 * i] = h[md[i] >> 4];
		out[2 * i + 1] = h[md[i] & 15];
	}
	out[32] = '\0';
}

int s3_req_xml_body(struct s3_req *q, const struct nv_buf *x, struct iovec *v, char b64[25])
{
	unsigned char md[16];
	char hex[33];
	int rc;

	*v = (struct iovec){ x->ptr, x->len };
	rc = s3_md5_iov(v, 1, md, b64, hex);
	if (rc)
		return rc;
	q->hdr[q->nhdr++] = (struct sigv4_kv){ "content-md5", b64 };
	q->hdr[q->nhdr++] = (struct sigv4_kv){ "content-type", "application/xml" };
	q->iov = v;
	q->iovcnt = 1;
	q->body_len = x->len;
	return 0;
}

/* MD5 of the iovec: binary, base64 (Content-MD5) and hex.  0 or -EIO. */
int s3_md5_iov(const struct iovec *iov, int iovcnt, unsigned char md[16],
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
	s3_hex16(md, hex);
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
bool s3_etag_md5(const char *etag, char out[33])
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
int s3_parse_u64(const char *s, size_t n, uint64_t *out)
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
int s3_xml_escape(struct nv_buf *b, const char *s)
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
	if (s3_parse_u64(v, (size_t)(dash - v), &r->cr_first) < 0 ||
	    s3_parse_u64(dash + 1, (size_t)(slash - dash - 1), &r->cr_last) < 0 ||
	    r->cr_last < r->cr_first)
		return;
	if (end - slash == 2 && slash[1] == '*')
		r->cr_total = UINT64_MAX;
	else if (s3_parse_u64(slash + 1, (size_t)(end - slash - 1), &r->cr_total) < 0 ||
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
		r->have_clen = s3_parse_u64(v, vl, &r->clen) == 0;
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
	r->hedged = false;
}

/*
 * The signed request of one attempt: the URL to send into url and the
 * header list into *list (caller frees both; the list may be partly
 * built on failure).  0, -EINVAL (cannot sign: logged), -ENOMEM.
 */
static int sign_request(struct s3_store *s, const struct s3_req *q,
			const char *payload_hash, const char *path,
			const char *query, struct nv_buf *url,
			struct curl_slist **list)
{
	char date[SIGV4_DATE_LEN];
	struct sigv4_kv hs[12];
	size_t nh = 0;
	struct nv_buf auth, line;
	struct curl_slist *l2;
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
	nv_buf_init(&line, 64 * 1024);
	rc = sigv4_authorization(&sr, &c, &auth);
	if (rc == 0)
		rc = nv_buf_printf(url, "%s", q->via ? q->via : s->base_url);
	if (rc == 0)
		rc = sigv4_uri_encode(url, path, strlen(path), true);
	if (rc == 0 && query[0])
		rc = nv_buf_printf(url, "?%s", query);
	/* Headers: the signed ones exactly as signed, then the rest. */
	for (size_t i = 0; i < nh && rc == 0; i++) {
		nv_buf_reset(&line);
		rc = nv_buf_printf(&line, "%s: %s", hs[i].name,
				   hs[i].value ? hs[i].value : "");
		if (rc == 0 && !(l2 = curl_slist_append(*list, (char *)line.ptr)))
			rc = -ENOMEM;
		if (rc == 0)
			*list = l2;
	}
	/* Then the unsigned ones (a cache proxy may rewrite them). */
	for (size_t i = 0; i < q->nuhdr && rc == 0; i++) {
		nv_buf_reset(&line);
		rc = nv_buf_printf(&line, "%s: %s", q->uhdr[i].name,
				   q->uhdr[i].value ? q->uhdr[i].value : "");
		if (rc == 0 && !(l2 = curl_slist_append(*list, (char *)line.ptr)))
			rc = -ENOMEM;
		if (rc == 0)
			*list = l2;
	}
	if (rc == 0) {
		nv_buf_reset(&line);
		rc = nv_buf_printf(&line, "Authorization: %s", (char *)auth.ptr);
	}
	if (rc == 0 && !(l2 = curl_slist_append(*list, (char *)line.ptr)))
		rc = -ENOMEM;
	if (rc == 0) {
		*list = l2;
		/* No "Expect: 100-continue" round trip (lax servers stall on
		 * it), and no default Content-Type for POST bodies. */
		if (!(l2 = curl_slist_append(*list, "Expect:")))
			rc = -ENOMEM;
		else
			*list = l2;
	}
	if (rc == 0 && !(l2 = curl_slist_append(*list, "Content-Type:")))
		rc = -ENOMEM;
	if (rc == 0)
		*list = l2;
	if (rc == -EINVAL)
		nv_log(NV_ERR, NV_SUB_STORE, "s3://%s %s %s: cannot sign the request",
		       s->bucket, q->what, q->key ? q->key : "(bucket)");
	nv_buf_free(&line);
	if (auth.ptr)
		memset(auth.ptr, 0, auth.cap);
	nv_buf_free(&auth);
	return rc;
}

/* The hedge of a request through a cache proxy (q->hedge_ms): abandon
 * the transfer when no body byte came in time. */
static int hedge_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow,
		    curl_off_t ultotal, curl_off_t ulnow)
{
	struct s3_resp *r = arg;

	(void)dltotal;
	(void)ultotal;
	(void)ulnow;
	if (dlnow > 0 || r->sink_started)
		return 0;
	if (nv_now_mono_ns() - r->t0_ns > (uint64_t)r->req->hedge_ms * 1000000u) {
		r->hedged = true;
		return 1;
	}
	return 0;
}

/* Set h up for q: URL, headers, timeouts, callbacks into r and rd (all
 * borrowed until the transfer ends). */
static void set_options(struct s3_store *s, CURL *h, const struct s3_req *q,
			const char *url, struct curl_slist *list,
			struct s3_reader *rd, struct s3_resp *r)
{
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
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
	if (q->via && q->hedge_ms > 0) {
		r->t0_ns = nv_now_mono_ns();
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
				 q->hedge_ms < s->connect_timeout_ms ? q->hedge_ms
								     : s->connect_timeout_ms);
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, hedge_cb);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, r);
	}
	if (!strcmp(q->method, "HEAD")) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(q->method, "PUT") || !strcmp(q->method, "POST")) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(h, CURLOPT_READDATA, rd);
		curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, seek_cb);
		curl_easy_setopt(h, CURLOPT_SEEKDATA, rd);
		if (!strcmp(q->method, "POST"))
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "POST");
	} else if (strcmp(q->method, "GET")) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
	}
}

/* One attempt of q on handle h.  Fills r. */
static int attempt_once(struct s3_store *s, CURL *h, const struct s3_req *q,
			const char *payload_hash, const char *path,
			const char *query, struct s3_resp *r)
{
	struct nv_buf url;
	struct curl_slist *list = NULL;
	struct s3_reader rd = { q->iov, q->iovcnt, 0, 0 };
	int rc;

	nv_buf_init(&url, 64 * 1024);
	rc = sign_request(s, q, payload_hash, path, query, &url, &list);
	if (rc < 0) {
		r->cc = CURLE_OUT_OF_MEMORY;
		goto out;
	}
	set_options(s, h, q, (char *)url.ptr, list, &rd, r);
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
	nv_buf_free(&url);
	return rc;
}

/* internal.h invariant 4; contract in internal.h. */
int s3_do(struct s3_store *s, const struct s3_req *q, struct s3_resp *r)
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
		/* Through a cache proxy: one attempt; the caller goes direct. */
		if (q->via || !retryable(r) || r->attempts > s->retries)
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

void s3_resp_init(struct s3_resp *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	nv_buf_init(&r->body, max);
}

bool s3_ok2xx(const struct s3_resp *r)
{
	return r->cc == CURLE_OK && r->status >= 200 && r->status < 300;
}

/* The full key of key: "prefix/key", bounded by S3's 1024 bytes. */
int s3_full_key(const struct s3_store *s, const char *what, const char *key,
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

int s3_share_setup(struct s3_store *s)
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
