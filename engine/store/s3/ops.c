/*
 * ops.c - the S3 backend's store ops glue: put, ranged get, head, batch
 * delete, close, the ops table, s3_store_open() and its scheme entry
 * (S3 backend; overview and invariants in internal.h).
 *
 * For: what each store.h call means in S3 requests (s3_do()) and in
 * answers, and the lifetime of struct s3_store.
 * Not for: URL parsing (url.c), listing (list.c), multipart (mpu.c),
 * sending and retrying (request.c).
 *
 * Invariants (internal.h 3, 5, 7), here:
 *  1. A plain-MD5 ETag of a put must be the MD5 we sent.
 *  2. A create-once put answered 412 after a retry is ours when the
 *     object's ETag is our MD5 (s3_head_full()).
 *  3. A ranged get answered 416, or with a Content-Range we cannot
 *     believe, is resolved with a HEAD: size == off reads 0 bytes.
 *  4. s3_close() runs with no call in progress and frees everything
 *     s3_store_open() and s3_url_parse() set, whatever failed.
 *
 * Locking: none here; struct s3_store is immutable after s3_store_open()
 * but for the pool (request.c) and the sticky atomics.
 */
#include "config.h"
#include "engine/store/s3/internal.h"
#include "engine/store/s3/xml.h"
#include "src/base/log.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

/* ------------------------------------------------------- curl, once */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* --------------------------------------------------------- operations */

int s3_head_full(struct s3_store *s, const char *what, const char *fkey,
		 uint64_t *size, char *etag, size_t etag_cap)
{
	struct s3_req q = { .what = what, .method = "HEAD", .key = fkey };
	struct s3_resp r;
	int rc;

	s3_resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0 && s3_ok2xx(&r)) {
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
	int rc = s3_full_key(s, "head", key, fk, sizeof(fk));

	return rc ? rc : s3_head_full(s, "head", fk, size, NULL, 0);
}

/* A presigned GET of key (store_presign()): the same path, host and
 * credentials the backend's own requests sign with. */
static int s3_presign(void *be, const char *key, unsigned ttl_s, struct nv_buf *url)
{
	struct s3_store *s = be;
	struct sigv4_creds c = { s->access_key, s->secret_key, s->region, "s3" };
	char fk[STORE_KEY_MAX + 1], date[SIGV4_DATE_LEN];
	struct sigv4_presign p = { .method = "GET", .host = s->host, .amz_date = date,
				   .expires_s = ttl_s, .session_token = s->session_token };
	struct nv_buf path;
	int rc = s3_full_key(s, "presign", key, fk, sizeof(fk));

	if (rc)
		return rc;
	sigv4_amz_date(time(NULL), date);
	nv_buf_init(&path, 2 * STORE_KEY_MAX + 256);
	rc = nv_buf_printf(&path, "%s/%s", s->path_base, fk);
	p.path = (const char *)path.ptr;
	if (rc == 0)
		rc = nv_buf_printf(url, "%s", s->base_url);
	if (rc == 0)
		rc = sigv4_uri_encode(url, p.path, path.len, true);
	if (rc == 0)
		rc = nv_buf_printf(url, "?");
	if (rc == 0)
		rc = sigv4_presign_query(&p, &c, url);
	nv_buf_free(&path);
	return rc;
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

	rc = s3_full_key(s, "put", key, fk, sizeof(fk));
	if (rc == 0)
		rc = s3_md5_iov(iov, iovcnt, md, b64, hex);
	if (rc)
		return rc;
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "content-md5", b64 };
	if (flags & STORE_CREATE_ONCE)
		q.hdr[q.nhdr++] = (struct sigv4_kv){ "if-none-match", "*" };
	s3_resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc)
		goto out;
	if (s3_ok2xx(&r)) {
		/* internal.h invariant 3. */
		if (!r.sse_opaque && s3_etag_md5(r.etag, got) && strcmp(got, hex)) {
			nv_log(NV_ERR, NV_SUB_STORE,
			       "s3://%s put %s: ETag %s is not the MD5 %s we sent",
			       s->bucket, fk, r.etag, hex);
			rc = -EIO;
		}
		goto out;
	}
	rc = s3_to_errno(r.cc, r.status, r.code);
	if (rc == -EEXIST && (flags & STORE_CREATE_ONCE)) {
		/* internal.h invariant 5: our own earlier attempt may have landed. */
		char etag[S3_ETAG_MAX];
		uint64_t size;

		if (r.maybe_applied &&
		    s3_head_full(s, "put", fk, &size, etag, sizeof(etag)) == 0 &&
		    s3_etag_md5(etag, got) && strcmp(got, hex) == 0) {
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

/* A proxy's answer that is no clean 200/206 (internal.h s3_get_once()):
 * -EAGAIN, or -ETIMEDOUT for a hedge; *down when the proxy failed. */
static int proxy_miss(const struct s3_resp *r, bool *down)
{
	if (down)
		*down = r->cc != CURLE_OK || r->status >= 500;
	return r->hedged ? -ETIMEDOUT : -EAGAIN;
}

/* internal.h; invariant 3. */
int s3_get_once(struct s3_store *s, const char *fk, uint64_t off, size_t len,
		void *dst, size_t *got, int via, bool *down)
{
	char range[64];
	struct s3_req q = { .what = "get", .method = "GET", .key = fk,
			    .sink = S3_SINK_RANGE, .dst = dst, .dst_len = len,
			    .off = off };
	struct s3_resp r;
	uint64_t size, last, want;
	int rc;

	*got = 0;
	if (len == 0 || off > S3_OFF_MAX) {
		/* No range can ask for nothing: a HEAD answers. */
		if (via >= 0)
			return -EAGAIN;
		rc = s3_head_full(s, "get", fk, &size, NULL, 0);
		return rc ? rc : off > size ? -ERANGE : 0;
	}
	last = off + (len - 1 < S3_OFF_MAX ? len - 1 : S3_OFF_MAX);
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off, last);
	if (via >= 0) {
		/* cache.c invariant 4: Range unsigned, the tier's token. */
		q.via = s->cache->px[via].base_url;
		q.hedge_ms = s->cache->hedge_ms;
		q.uhdr[q.nuhdr++] = (struct sigv4_kv){ "Range", range };
		q.uhdr[q.nuhdr++] = (struct sigv4_kv){ "X-Nova-Cache-Auth", s->cache->auth };
	} else {
		q.hdr[q.nhdr++] = (struct sigv4_kv){ "range", range };
	}
	s3_resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc)
		goto out;
	if (r.crange_bad && r.status == 206) {
		if (via >= 0) {
			rc = proxy_miss(&r, down);
			goto out;
		}
		/* A range answer that does not add up (s3rver on an empty
		 * object): ask for the size and decide ourselves. */
		rc = s3_head_full(s, "get", fk, &size, NULL, 0);
		if (rc == 0 && off > size)
			rc = -ERANGE;
		else if (rc == 0 && off < size)
			rc = s3_bad_answer(s, "get", fk, "malformed Content-Range");
		goto out;
	}
	if (r.cc == CURLE_OK && s3_ok2xx(&r) && (r.status == 200 || r.status == 206)) {
		/* How much the answer says there is from off on. */
		if (r.status == 206 && r.have_crange && r.cr_total != UINT64_MAX)
			size = r.cr_total;
		else if (r.status == 200 && r.have_clen)
			size = r.clen;
		else
			size = UINT64_MAX; /* unknown: trust the body */
		if (r.status == 200 && size != UINT64_MAX && off > size) {
			rc = via >= 0 ? proxy_miss(&r, down) : -ERANGE;
			goto out;
		}
		want = size == UINT64_MAX ? r.got
		     : size - off < len ? size - off : len;
		if (r.got != want) {
			rc = via >= 0 ? proxy_miss(&r, down)
				      : s3_bad_answer(s, "get", fk, "short or misplaced range");
			goto out;
		}
		*got = r.got;
		goto out;
	}
	if (via >= 0) {
		rc = proxy_miss(&r, down);
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

static int s3_get_range(void *be, const char *key, uint64_t off, size_t len,
			void *dst, size_t *got)
{
	struct s3_store *s = be;
	char fk[STORE_KEY_MAX + 1];
	int rc;

	*got = 0;
	rc = s3_full_key(s, "get", key, fk, sizeof(fk));
	if (rc)
		return rc;
	if (s->cache && len > 0 && off <= S3_OFF_MAX)
		return s3_cache_get(s, fk, off, len, dst, got);
	return s3_get_once(s, fk, off, len, dst, got, -1, NULL);
}

/* internal.h (cache.c invariant 5): a GET of one byte of the slice at off
 * through proxy idx that bypasses its cache. */
int s3_cache_refresh_one(struct s3_store *s, const char *fk, uint64_t off, int idx)
{
	char range[64], one;
	struct s3_req q = { .what = "cache purge", .method = "GET", .key = fk,
			    .sink = S3_SINK_RANGE, .dst = &one, .dst_len = 1,
			    .off = off };
	struct s3_resp r;
	int rc;

	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off, off);
	q.via = s->cache->px[idx].base_url;
	q.uhdr[q.nuhdr++] = (struct sigv4_kv){ "Range", range };
	q.uhdr[q.nuhdr++] = (struct sigv4_kv){ "X-Nova-Cache-Auth", s->cache->auth };
	q.uhdr[q.nuhdr++] = (struct sigv4_kv){ "X-Nova-Cache-Refresh", "1" };
	s3_resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0)
		rc = r.cc != CURLE_OK || r.status >= 500 ? -EIO
		   : r.status == 403 ? -EACCES : 0;
	nv_buf_free(&r.body);
	return rc;
}

/* DELETE one key (the fallback when DeleteObjects is not implemented). */
static int delete_one(struct s3_store *s, const char *fk)
{
	struct s3_req q = { .what = "delete", .method = "DELETE", .key = fk };
	struct s3_resp r;
	int rc;

	s3_resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0 && !s3_ok2xx(&r)) {
		rc = s3_to_errno(r.cc, r.status, r.code);
		rc = rc == -ENOENT ? 0 : s3_fail(s, "delete", fk, &r);
	}
	nv_buf_free(&r.body);
	return rc;
}

/* DeleteObjects for keys[0..n), n <= S3_DELETE_BATCH. */
static int delete_batch(struct s3_store *s, const char *const *keys, size_t n)
{
	char fk[STORE_KEY_MAX + 1], b64[25];
	struct nv_buf x;
	struct s3_req q = { .what = "delete", .method = "POST" };
	struct s3_resp r;
	struct xml_doc *d = NULL;
	struct iovec v;
	int rc = 0, failed = 0;

	nv_buf_init(&x, SIZE_MAX);
	s3_resp_init(&r, S3_XML_MAX);
	rc = nv_buf_printf(&x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
			   "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
			   "<Quiet>true</Quiet>");
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = s3_full_key(s, "delete", keys[i], fk, sizeof(fk));
		if (rc == 0)
			rc = nv_buf_printf(&x, "<Object><Key>");
		if (rc == 0)
			rc = s3_xml_escape(&x, fk);
		if (rc == 0)
			rc = nv_buf_printf(&x, "</Key></Object>");
	}
	if (rc == 0)
		rc = nv_buf_printf(&x, "</Delete>");
	if (rc)
		goto out;
	rc = s3_req_xml_body(&q, &x, &v, b64);
	if (rc)
		goto out;
	q.query[q.nquery++] = (struct sigv4_kv){ "delete", NULL };
	rc = s3_do(s, &q, &r);
	if (rc)
		goto out;
	if (!s3_ok2xx(&r)) {
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

/* Delete keys[0..n) from the bucket (DeleteObjects, or one by one). */
static int del_direct(struct s3_store *s, const char *const *keys, size_t n)
{
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i += S3_DELETE_BATCH) {
		size_t m = n - i < S3_DELETE_BATCH ? n - i : S3_DELETE_BATCH;

		if (!atomic_load(&s->delete_unsupported))
			rc = delete_batch(s, keys + i, m);
		if (rc == -ENOTSUP || atomic_load(&s->delete_unsupported)) {
			rc = 0;
			for (size_t j = i; j < i + m && rc == 0; j++) {
				char fk[STORE_KEY_MAX + 1];

				rc = s3_full_key(s, "delete", keys[j], fk, sizeof(fk));
				if (rc == 0)
					rc = delete_one(s, fk);
			}
		}
	}
	return rc;
}

/* With a cache tier (cache.c invariant 5): the sizes first (a HEAD each:
 * how many slices to purge), the delete, then the purge; a key already
 * gone has nothing to purge that we can size, and is left to the
 * proxies' inactive time. */
static int del_purged(struct s3_store *s, const char *const *keys, size_t n)
{
	uint64_t size[S3_DELETE_BATCH];
	bool have[S3_DELETE_BATCH];
	char fk[STORE_KEY_MAX + 1];
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i += S3_DELETE_BATCH) {
		size_t m = n - i < S3_DELETE_BATCH ? n - i : S3_DELETE_BATCH;

		for (size_t j = 0; j < m && rc == 0; j++) {
			rc = s3_full_key(s, "delete", keys[i + j], fk, sizeof(fk));
			if (rc == 0)
				rc = s3_head_full(s, "delete", fk, &size[j], NULL, 0);
			have[j] = rc == 0;
			if (rc == -ENOENT)
				rc = 0;
		}
		if (rc == 0)
			rc = del_direct(s, keys + i, m);
		for (size_t j = 0; j < m && rc == 0; j++)
			if (have[j] && s3_full_key(s, "delete", keys[i + j], fk, sizeof(fk)) == 0)
				(void)s3_cache_purge(s, fk, size[j]); /* logged */
	}
	return rc;
}

static int s3_del(void *be, const char *const *keys, size_t n)
{
	struct s3_store *s = be;

	return s->cache ? del_purged(s, keys, n) : del_direct(s, keys, n);
}

/* ------------------------------------------------------- open, close */

static void s3_close(void *be)
{
	struct s3_store *s = be;

	if (!s)
		return;
	if (s->cache) {
		s3_cache_report(s);
		s3_cache_free(s->cache);
	}
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
	.presign = s3_presign,
};

int s3_store_open(const char *url, struct store **out)
{
	struct s3_store *s;
	char *name = NULL;
	bool path_style = false;
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

	rc = s3_url_parse(url, s, &path_style);
	if (rc)
		goto fail;
	rc = -ENOMEM;
	s->free_handles = calloc((size_t)s->max_connections, sizeof(CURL *));
	if (!s->free_handles)
		goto fail;
	rc = s3_share_setup(s);
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
	nv_log(NV_INFO, NV_SUB_STORE, "opened %s (%s style, region %s)", name,
	       path_style ? "path" : "virtual-host", s->region);
	rc = store_wrap(&s3_ops, s, name, out); /* closes s on failure */
	free(name);
	return rc;

fail:
	s3_close(s);
	return rc;
}

const struct store_scheme s3_store_scheme = {
		.url = { .prefix = "s3://", .usage = "s3://bucket?...", .path = false },
	.open = s3_store_open,
};
