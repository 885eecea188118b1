/*
 * conn.c - talking to etcd: the URL, the curl handles, one call with
 * failover, retries and auth, the one error translation, base64 (see
 * meta/etcd/internal.h).
 *
 * For: ec_call(), which every other file of the backend uses.  Not for:
 * what a call means (kv.c, lease.c).
 *
 * Invariants: 3 (ec_call()'s loop) and 4 (etcd_to_errno()) of
 * meta/etcd/internal.h.  Every request carries "Grpc-Metadata-hasleader:
 * true", so a member without quorum answers "no leader" at once instead
 * of hanging, and the call moves on to the next member.
 */
#include "config.h"
#include "meta/etcd/internal.h"
#include "src/base/buf.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Largest answer kept: range pages are EC_PAGE keys of at most
 * KV_VAL_MAX each, base64. */
#define EC_RESP_MAX (256u << 20)
#define EC_BACKOFF_BASE_MS 25
#define EC_BACKOFF_CAP_MS 1000
#define EC_DEFAULT_TIMEOUT_S 30
#define EC_DEFAULT_REQUEST_MS 5000

/* ----------------------------------------------------------------------
 * URL and options
 */

/* Read "user:password" (first line) from path. */
static int read_password_file(struct ec_be *be, const char *path)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	char *colon;

	if (!f) {
		nv_log(NV_ERR, NV_SUB_META, "etcd: password_file %s: %s", path, strerror(errno));
		return -errno;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	line[strcspn(line, "\r\n")] = 0;
	colon = strchr(line, ':');
	if (!colon || colon == line) {
		nv_log(NV_ERR, NV_SUB_META,
		       "etcd: password_file %s: expected one line user:password", path);
		return -EINVAL;
	}
	*colon = 0;
	be->user = strdup(line);
	be->password = strdup(colon + 1);
	explicit_bzero(line, sizeof(line));
	return be->user && be->password ? 0 : -ENOMEM;
}

/* One option "name=value" of the query string. */
static int parse_option(struct ec_be *be, char *opt)
{
	char *eq = strchr(opt, '='), *end;
	unsigned long v;

	if (!eq) {
		nv_log(NV_ERR, NV_SUB_META, "etcd URL: option '%s' has no value", opt);
		return -EINVAL;
	}
	*eq++ = 0;
	if (!strcmp(opt, "cacert"))
		return (be->cacert = strdup(eq)) ? 0 : -ENOMEM;
	if (!strcmp(opt, "cert"))
		return (be->cert = strdup(eq)) ? 0 : -ENOMEM;
	if (!strcmp(opt, "key"))
		return (be->key = strdup(eq)) ? 0 : -ENOMEM;
	if (!strcmp(opt, "password_file"))
		return read_password_file(be, eq);
	errno = 0;
	v = strtoul(eq, &end, 10);
	if (!errno && *eq && !*end && v > 0 && v <= 86400000ul) {
		if (!strcmp(opt, "timeout") && v <= 86400) {
			be->timeout_ns = v * 1000000000ull;
			return 0;
		}
		if (!strcmp(opt, "request_timeout")) {
			be->request_ms = (long)v;
			return 0;
		}
	}
	nv_log(NV_ERR, NV_SUB_META,
	       "etcd URL: bad option %s=%s (cacert=, cert=, key=, password_file=, "
	       "timeout=SECONDS, request_timeout=MS)", opt, eq);
	return -EINVAL;
}

/* Members "h:p;h:p" into be->members.  s is modified. */
static int parse_members(struct ec_be *be, char *s, bool https)
{
	char *save = NULL;

	for (char *m = strtok_r(s, ";", &save); m; m = strtok_r(NULL, ";", &save)) {
		char *colon = strrchr(m, ':'), *end;
		unsigned long port;
		size_t n;

		if (!colon || colon == m)
			goto bad;
		port = strtoul(colon + 1, &end, 10);
		if (*end || port == 0 || port > 65535 || be->nmembers == EC_MAX_MEMBERS)
			goto bad;
		n = strlen(m) + 16;
		be->members[be->nmembers] = malloc(n);
		if (!be->members[be->nmembers])
			return -ENOMEM;
		snprintf(be->members[be->nmembers++], n, "%s://%s", https ? "https" : "http", m);
		continue;
bad:
		nv_log(NV_ERR, NV_SUB_META,
		       "etcd URL: member '%s': expected HOST:PORT (at most %d, ';' between)",
		       m, EC_MAX_MEMBERS);
		return -EINVAL;
	}
	return be->nmembers ? 0 : -EINVAL;
}

int ec_url_parse(struct ec_be *be, const char *url, bool https)
{
	const char *scheme = https ? "etcd+https://" : "etcd://";
	char *copy, *slash, *query, *save = NULL;
	size_t n;
	int rc;

	be->timeout_ns = EC_DEFAULT_TIMEOUT_S * 1000000000ull;
	be->request_ms = EC_DEFAULT_REQUEST_MS;
	if (strncmp(url, scheme, strlen(scheme)))
		return -EINVAL;
	copy = strdup(url + strlen(scheme));
	if (!copy)
		return -ENOMEM;
	slash = strchr(copy, '/');
	query = slash ? strchr(slash, '?') : NULL;
	if (query)
		*query++ = 0;
	if (!slash || !slash[1] || slash[1] == '/') {
		nv_log(NV_ERR, NV_SUB_META,
		       "etcd URL '%s': expected %sHOST:PORT[;HOST:PORT...]/PREFIX", url, scheme);
		free(copy);
		return -EINVAL;
	}
	*slash++ = 0;
	rc = parse_members(be, copy, https);
	if (!rc) {
		n = strlen(slash);
		while (n && slash[n - 1] == '/')
			slash[--n] = 0;
		be->prefix = malloc(n + 2);
		if (!be->prefix)
			rc = -ENOMEM;
		else
			snprintf(be->prefix, n + 2, "%s/", slash);
		be->plen = n + 1;
	}
	for (char *o = query ? strtok_r(query, "&", &save) : NULL; !rc && o;
	     o = strtok_r(NULL, "&", &save))
		rc = parse_option(be, o);
	if (!rc && (!!be->cert != !!be->key)) {
		nv_log(NV_ERR, NV_SUB_META, "etcd URL: cert= and key= go together");
		rc = -EINVAL;
	}
	if (!rc && !https && (be->cacert || be->cert)) {
		nv_log(NV_ERR, NV_SUB_META, "etcd URL: cacert=/cert=/key= need etcd+https://");
		rc = -EINVAL;
	}
	free(copy);
	return rc;
}

void ec_be_free(struct ec_be *be)
{
	for (int i = 0; i < be->nmembers; i++)
		free(be->members[i]);
	for (int i = 0; i < be->npool; i++)
		curl_easy_cleanup(be->pool[i]);
	if (be->password)
		explicit_bzero(be->password, strlen(be->password));
	free(be->password);
	free(be->user);
	free(be->token);
	free(be->cacert);
	free(be->cert);
	free(be->key);
	free(be->prefix);
	free(be->name);
	pthread_mutex_destroy(&be->lock);
	free(be);
}

/* ----------------------------------------------------------------------
 * Handles
 */

CURL *ec_handle_take(struct ec_be *be)
{
	CURL *h = NULL;

	pthread_mutex_lock(&be->lock);
	if (be->npool)
		h = be->pool[--be->npool];
	pthread_mutex_unlock(&be->lock);
	return h ? h : curl_easy_init();
}

void ec_handle_put(struct ec_be *be, CURL *h)
{
	pthread_mutex_lock(&be->lock);
	if (be->npool < EC_POOL) {
		be->pool[be->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&be->lock);
	if (h)
		curl_easy_cleanup(h);
}

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
	struct nv_buf *b = arg;

	if (b->len + sz * n > EC_RESP_MAX || nv_buf_add(b, p, sz * n))
		return 0; /* curl fails the transfer: CURLE_WRITE_ERROR */
	return sz * n;
}

int ec_curl_setup(struct ec_be *be, CURL *h, struct curl_slist **hdrs, bool stream)
{
	struct curl_slist *l = NULL;
	char auth[1200];

	curl_easy_reset(h);
	l = curl_slist_append(l, "Content-Type: application/json");
	if (l)
		l = curl_slist_append(l, "Grpc-Metadata-hasleader: true");
	pthread_mutex_lock(&be->lock);
	if (be->token)
		snprintf(auth, sizeof(auth), "Authorization: %s", be->token);
	else
		auth[0] = 0;
	pthread_mutex_unlock(&be->lock);
	if (l && auth[0])
		l = curl_slist_append(l, auth);
	if (!l)
		return -ENOMEM;
	*hdrs = l;
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 be->request_ms < 1000 ? be->request_ms : 1000L);
	if (!stream)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, be->request_ms);
	if (be->cacert)
		curl_easy_setopt(h, CURLOPT_CAINFO, be->cacert);
	if (be->cert) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, be->cert);
		curl_easy_setopt(h, CURLOPT_SSLKEY, be->key);
	}
	return 0;
}

/* ----------------------------------------------------------------------
 * The one error translation (invariant 4)
 */

/* How a failed attempt may be handled. */
enum ec_kind {
	EC_FATAL,  /* report err */
	EC_UNSENT, /* not applied: retry on the next member */
	EC_LOST,   /* maybe applied: retry, telling the caller */
	EC_REAUTH, /* token expired or missing: authenticate, retry */
};

struct ec_fail {
	int err;
	enum ec_kind kind;
	char what[320]; /* for the log */
};

/*
 * Translate one failed attempt: a curl error (cc != CURLE_OK), or an HTTP
 * status other than 200 with etcd's JSON error body (may be unparsable).
 * Fills f; logs nothing (etcd_fail_log() does, once).
 */
static void etcd_to_errno(CURLcode cc, long status, const struct nv_buf *body,
			  struct ec_fail *f)
{
	json_t *j = NULL;
	const char *msg = "";
	long code = -1;

	f->kind = EC_FATAL;
	f->err = -EIO;
	if (cc != CURLE_OK) {
		/* post_once() leaves curl's error text in body. */
		snprintf(f->what, sizeof(f->what), "%s%s%.*s", curl_easy_strerror(cc),
			 body->len ? ": " : "", (int)body->len, (const char *)body->ptr);
		/* A TLS alert from the member that curl names as such is a
		 * refusal, not an outage.  (With TLS 1.3 a missing client
		 * certificate shows only as a receive error: it is retried
		 * like an outage until timeout=.) */
		if (body->len && memmem(body->ptr, body->len, "alert", 5)) {
			f->err = -EACCES;
			return;
		}
		switch (cc) {
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_CONNECT:
			f->kind = EC_UNSENT;
			f->err = -ETIMEDOUT;
			return;
		case CURLE_OPERATION_TIMEDOUT:
		case CURLE_SEND_ERROR:
		case CURLE_RECV_ERROR:
		case CURLE_GOT_NOTHING:
		case CURLE_PARTIAL_FILE:
			f->kind = EC_LOST;
			f->err = -ETIMEDOUT;
			return;
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_SSL_CACERT_BADFILE:
			f->err = -EACCES;
			return;
		case CURLE_WRITE_ERROR:
			f->err = -E2BIG;
			return;
		case CURLE_OUT_OF_MEMORY:
			f->err = -ENOMEM;
			return;
		default:
			return;
		}
	}
	if (body->len)
		j = json_loadb((const char *)body->ptr, body->len, 0, NULL);
	if (j) {
		json_t *e = json_object_get(j, "error");

		if (!json_is_string(e))
			e = json_object_get(j, "message");
		msg = json_is_string(e) ? json_string_value(e) : "";
		code = json_integer_value(json_object_get(j, "code"));
	}
	snprintf(f->what, sizeof(f->what), "HTTP %ld, grpc code %ld: %s", status, code, msg);
	/* gRPC codes: 3 invalid argument, 4 deadline exceeded, 5 not found,
	 * 7 permission denied, 8 resource exhausted, 9 failed precondition,
	 * 11 out of range, 14 unavailable, 16 unauthenticated. */
	if (strstr(msg, "too many operations") || strstr(msg, "too large"))
		f->err = -E2BIG;
	else if (strstr(msg, "duplicate key"))
		f->err = -EINVAL;
	else if (strstr(msg, "lease not found"))
		f->err = -ENOLCK;
	else if (strstr(msg, "compacted"))
		f->err = -ESTALE;
	else if (strstr(msg, "no leader") || strstr(msg, "not capable") ||
		 strstr(msg, "stopped") || status == 502)
		f->kind = EC_UNSENT, f->err = -ETIMEDOUT;
	else if (code == 14 || code == 4 || status == 503 || status == 504 ||
		 (status >= 500 && code < 0))
		f->kind = EC_LOST, f->err = -ETIMEDOUT;
	else if (code == 16 || status == 401 || strstr(msg, "invalid auth token") ||
		 strstr(msg, "user name is empty"))
		f->kind = EC_REAUTH, f->err = -EACCES;
	else if (code == 7 || strstr(msg, "password is invalid"))
		f->err = -EACCES;
	else if (code == 8 || strstr(msg, "space exceeded"))
		f->err = -ENOSPC;
	else if (code == 3)
		f->err = -EINVAL;
	json_decref(j);
}

/* Log a failure once (invariant 4).  Expected answers are not faults. */
static void etcd_fail_log(const struct ec_be *be, int member, const char *path,
			  const struct ec_fail *f, enum nv_level level)
{
	if (f->err == -ENOLCK || f->err == -ESTALE)
		level = NV_DEBUG;
	nv_log(level, NV_SUB_META, "etcd %s: %s: %s", be->members[member], path, f->what);
}

/* ----------------------------------------------------------------------
 * One request and the call loop
 */

/* POST body to member's /v3/path.  0 and the body in out with *status,
 * or the curl error (its text in out). */
static CURLcode post_once(struct ec_be *be, CURL *h, int member, const char *path,
			  const char *body, long timeout_ms, struct nv_buf *out, long *status)
{
	struct curl_slist *hdrs = NULL;
	char url[512], eb[CURL_ERROR_SIZE];
	CURLcode cc;

	nv_buf_reset(out);
	*status = 0;
	if (ec_curl_setup(be, h, &hdrs, false))
		return CURLE_OUT_OF_MEMORY;
	snprintf(url, sizeof(url), "%s/v3/%s", be->members[member], path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	if (timeout_ms)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, eb);
	eb[0] = 0;
	cc = curl_easy_perform(h);
	if (cc == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	} else {
		nv_buf_reset(out); /* the error text for etcd_to_errno() */
		if (nv_buf_add(out, eb, strnlen(eb, sizeof(eb))))
			nv_buf_reset(out); /* the text is only for the log */
	}
	curl_slist_free_all(hdrs);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	return cc;
}

/* Get a token for be->user (when the token is still the one of gen).
 * 0 or -errno (logged). */
static int authenticate(struct ec_be *be, int member, unsigned gen)
{
	json_t *req, *resp = NULL, *tok;
	struct nv_buf out;
	char *body;
	long status = 0;
	CURL *h;
	CURLcode cc;
	int rc = -EACCES;

	pthread_mutex_lock(&be->lock);
	if (be->token_gen != gen) {
		pthread_mutex_unlock(&be->lock);
		return 0; /* another thread renewed it */
	}
	free(be->token);
	be->token = NULL;
	pthread_mutex_unlock(&be->lock);
	req = json_pack("{s:s, s:s}", "name", be->user, "password", be->password);
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	h = ec_handle_take(be);
	if (!body || !h) {
		free(body);
		if (h)
			ec_handle_put(be, h);
		return -ENOMEM;
	}
	nv_buf_init(&out, EC_RESP_MAX);
	cc = post_once(be, h, member, "auth/authenticate", body, 0, &out, &status);
	ec_handle_put(be, h);
	explicit_bzero(body, strlen(body));
	free(body);
	if (cc == CURLE_OK && status == 200)
		resp = json_loadb((const char *)out.ptr, out.len, 0, NULL);
	tok = json_object_get(resp, "token");
	if (json_is_string(tok)) {
		pthread_mutex_lock(&be->lock);
		be->token = strdup(json_string_value(tok));
		be->token_gen++;
		rc = be->token ? 0 : -ENOMEM;
		pthread_mutex_unlock(&be->lock);
		nv_log(NV_DEBUG, NV_SUB_META, "etcd %s: authenticated as %s",
		       be->members[member], be->user);
	} else {
		struct ec_fail f;

		etcd_to_errno(cc, status, &out, &f);
		etcd_fail_log(be, member, "auth/authenticate", &f, NV_ERR);
		rc = f.err == -ETIMEDOUT ? f.err : -EACCES;
	}
	json_decref(resp);
	nv_buf_free(&out);
	return rc;
}

/* Sleep the attempt's backoff: equal jitter, capped. */
static void backoff(int attempt)
{
	unsigned ms = EC_BACKOFF_BASE_MS << (attempt < 6 ? attempt : 6), r = 0;
	struct timespec ts;

	if (ms > EC_BACKOFF_CAP_MS)
		ms = EC_BACKOFF_CAP_MS;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (unsigned)nv_now_mono_ns();
	ms = ms / 2 + r % (ms / 2 + 1);
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

int ec_call(struct ec_be *be, const char *path, json_t *req, bool *maybe_applied,
	    json_t **resp)
{
	uint64_t deadline = nv_now_mono_ns() + be->timeout_ns;
	char *body = json_dumps(req, JSON_COMPACT);
	struct nv_buf out;
	struct ec_fail f = { .err = -EIO };
	bool warned = false;
	int attempt = 0, reauths = 0, rc;
	int closing_tries = 0; /* members tried since closing began */
	CURL *h;

	if (maybe_applied)
		*maybe_applied = false;
	if (atomic_load(&be->down)) {
		free(body);
		return -ETIMEDOUT; /* invariant 3: closing, and nobody answers */
	}
	if (!body)
		return -ENOMEM;
	h = ec_handle_take(be);
	if (!h) {
		free(body);
		return -ENOMEM;
	}
	nv_buf_init(&out, EC_RESP_MAX);
	for (;;) {
		int m = atomic_load(&be->cur) % be->nmembers;
		long status = 0;
		unsigned gen;
		CURLcode cc = post_once(be, h, m, path, body, 0, &out, &status);

		if (cc == CURLE_OK && status == 200) {
			*resp = json_loadb((const char *)out.ptr, out.len, 0, NULL);
			rc = *resp ? 0 : -EBADMSG;
			if (rc)
				nv_log(NV_ERR, NV_SUB_META, "etcd %s: %s: unparsable answer",
				       be->members[m], path);
			else if (warned)
				nv_log(NV_INFO, NV_SUB_META, "etcd %s: %s: answered again",
				       be->members[m], path);
			break;
		}
		etcd_to_errno(cc, status, &out, &f);
		if (f.kind == EC_REAUTH && be->user && reauths++ < 3) {
			pthread_mutex_lock(&be->lock);
			gen = be->token_gen;
			pthread_mutex_unlock(&be->lock);
			rc = authenticate(be, m, gen);
			if (rc && rc != -ETIMEDOUT)
				break;
			continue;
		}
		if (f.kind != EC_UNSENT && f.kind != EC_LOST) {
			etcd_fail_log(be, m, path, &f, NV_ERR);
			rc = f.err;
			break;
		}
		if (f.kind == EC_LOST && maybe_applied)
			*maybe_applied = true;
		if (!warned) {
			etcd_fail_log(be, m, path, &f, NV_WARN);
			warned = true;
		}
		/* Invariant 3: the next member, after a pause. */
		atomic_compare_exchange_strong(&be->cur, &m, (m + 1) % be->nmembers);
		/* Closing: every member once (one round, each attempt bounded by
		 * request_timeout), not the whole timeout: a cluster that just
		 * lost its leader still answers at another member. */
		if (atomic_load(&be->closing) && ++closing_tries >= be->nmembers) {
			if (!atomic_exchange(&be->down, true))
				nv_log(NV_WARN, NV_SUB_META,
				       "etcd %s: %s: no member answers while closing: giving up "
				       "on the metastore (the next start recovers what was not "
				       "written): %s", be->name, path, f.what);
			rc = -ETIMEDOUT;
			break;
		}
		if (nv_now_mono_ns() >= deadline) {
			nv_log(NV_ERR, NV_SUB_META,
			       "etcd %s: %s: no member answered for %llu s: %s", be->name, path,
			       (unsigned long long)(be->timeout_ns / 1000000000ull), f.what);
			rc = -ETIMEDOUT;
			break;
		}
		backoff(attempt++);
	}
	ec_handle_put(be, h);
	nv_buf_free(&out);
	free(body);
	return rc;
}

void ec_closing(void *vbe)
{
	struct ec_be *be = vbe;

	atomic_store(&be->closing, true);
}

int ec_call_member(struct ec_be *be, int member, const char *path, json_t *req,
		   long timeout_ms, json_t **resp)
{
	char *body = json_dumps(req, JSON_COMPACT);
	struct nv_buf out;
	long status = 0;
	CURL *h = ec_handle_take(be);
	CURLcode cc;
	int rc;

	if (!body || !h) {
		free(body);
		if (h)
			ec_handle_put(be, h);
		return -ENOMEM;
	}
	nv_buf_init(&out, EC_RESP_MAX);
	cc = post_once(be, h, member, path, body, timeout_ms, &out, &status);
	ec_handle_put(be, h);
	if (cc == CURLE_OK && status == 200) {
		*resp = json_loadb((const char *)out.ptr, out.len, 0, NULL);
		rc = *resp ? 0 : -EBADMSG;
	} else {
		struct ec_fail f;

		etcd_to_errno(cc, status, &out, &f);
		etcd_fail_log(be, member, path, &f, NV_DEBUG);
		rc = f.err;
	}
	nv_buf_free(&out);
	free(body);
	return rc;
}

/* ----------------------------------------------------------------------
 * base64 and numbers
 */

json_t *ec_b64(const struct ec_be *be, const void *p, size_t n, bool prefixed)
{
	size_t pl = prefixed ? be->plen : 0, in = pl + n;
	unsigned char *raw = malloc(in ? in : 1), *enc = malloc(4 * ((in + 2) / 3) + 1);
	json_t *s = NULL;
	int len;

	if (raw && enc) {
		memcpy(raw, be->prefix, pl);
		if (n)
			memcpy(raw + pl, p, n);
		len = EVP_EncodeBlock(enc, raw, (int)in);
		s = json_stringn((const char *)enc, (size_t)len);
	}
	free(raw);
	free(enc);
	return s;
}

int ec_unb64(const struct ec_be *be, const json_t *s, struct nv_buf *out, bool prefixed)
{
	const char *in = json_is_string(s) ? json_string_value(s) : "";
	size_t n = json_is_string(s) ? json_string_length(s) : 0, pad = 0, skip;
	unsigned char *dec;
	int len, rc;

	nv_buf_reset(out);
	if (n % 4)
		return -EBADMSG;
	while (pad < 2 && n > pad && in[n - 1 - pad] == '=')
		pad++;
	dec = malloc(n / 4 * 3 + 1);
	if (!dec)
		return -ENOMEM;
	len = n ? EVP_DecodeBlock(dec, (const unsigned char *)in, (int)n) : 0;
	if (len < 0 || (size_t)len < pad) {
		free(dec);
		return -EBADMSG;
	}
	len -= (int)pad;
	skip = prefixed ? be->plen : 0;
	if ((size_t)len < skip || memcmp(dec, be->prefix, skip)) {
		free(dec);
		return -EBADMSG;
	}
	rc = nv_buf_add(out, dec + skip, (size_t)len - skip);
	free(dec);
	return rc; /* -E2BIG: longer than out's bound (kv.h kv_get()) */
}

uint64_t ec_u64(const json_t *obj, const char *field)
{
	json_t *v = json_object_get(obj, field);

	if (json_is_string(v))
		return strtoull(json_string_value(v), NULL, 10);
	if (json_is_integer(v))
		return (uint64_t)json_integer_value(v);
	return 0;
}
