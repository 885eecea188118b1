/*
 * mpu.c - store.h multipart uploads over S3 (CreateMultipartUpload,
 * UploadPart, UploadPartCopy, CompleteMultipartUpload, Abort) (S3
 * backend; overview and invariants in internal.h).
 *
 * For: s3_mpu_create/put_part/copy_part/complete/abort and struct
 * s3_upload, the part list a Complete sends.
 * Not for: sending requests (request.c), the wrapper's checks of part
 * numbers (store.c).
 *
 * Invariants (internal.h 3, 5), here:
 *  1. A part is recorded (number, ETag) only after the server accepted
 *     it; a part number sent twice keeps the last ETag.
 *  2. Complete sends the parts in part-number order; a Complete answered
 *     NoSuchUpload after a retry succeeded when the object's ETag is the
 *     multipart ETag of the parts (multipart_etag()).
 *  3. complete and abort free the upload on every path (store.h), and a
 *     failed complete aborts the upload on the server.
 *  4. An UploadPartCopy answered 501 makes copy_unsupported sticky:
 *     later copies are -ENOTSUP at once (the caller falls back).
 *
 * Locking: s3_upload.lock guards parts, nparts, cap (parts may arrive
 * from several threads); key and id are immutable after create.
 */
#include "config.h"
#include "engine/store/s3/internal.h"
#include "engine/store/s3/xml.h"
#include "src/base/log.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

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

int s3_mpu_create(void *be, const char *key, void **upload)
{
	struct s3_store *s = be;
	struct s3_upload *u;
	struct s3_req q = { .what = "mpu_create", .method = "POST" };
	struct s3_resp r;
	struct xml_doc *d = NULL;
	char fk[STORE_KEY_MAX + 1];
	const char *id = NULL;
	size_t n;
	int rc;

	rc = s3_full_key(s, "mpu_create", key, fk, sizeof(fk));
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
	s3_resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0 && !s3_ok2xx(&r))
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

int s3_mpu_put_part(void *be, void *upload, int part_no,
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

	rc = s3_md5_iov(iov, iovcnt, md, b64, hex);
	if (rc)
		return rc;
	part_query(&q, u, no, sizeof(no), part_no);
	q.hdr[q.nhdr++] = (struct sigv4_kv){ "content-md5", b64 };
	s3_resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0 && !s3_ok2xx(&r))
		rc = s3_fail(s, "mpu_put_part", u->key, &r);
	else if (rc == 0 && !r.etag[0])
		rc = s3_bad_answer(s, "mpu_put_part", u->key, "UploadPart without ETag");
	else if (rc == 0 && !r.sse_opaque && s3_etag_md5(r.etag, got) && strcmp(got, hex)) {
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

int s3_mpu_copy_part(void *be, void *upload, int part_no,
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
	rc = s3_full_key(s, "mpu_copy_part", src_key, fk, sizeof(fk));
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
	s3_resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc)
		goto out;
	if (s3_ok2xx(&r)) {
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

		if (!s3_etag_md5(u->parts[i].etag, hex)) {
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
	s3_hex16(md, hex);
	snprintf(out, 48, "%s-%zu", hex, u->nparts);
	return true;
}

static void abort_upload(struct s3_store *s, struct s3_upload *u)
{
	struct s3_req q = { .what = "mpu_abort", .method = "DELETE", .key = u->key };
	struct s3_resp r;
	int rc;

	q.query[q.nquery++] = (struct sigv4_kv){ "uploadId", u->id };
	s3_resp_init(&r, S3_ERR_MAX);
	rc = s3_do(s, &q, &r);
	if (rc == 0 && !s3_ok2xx(&r)) {
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

int s3_mpu_complete(void *be, void *upload, unsigned flags)
{
	struct s3_store *s = be;
	struct s3_upload *u = upload;
	struct s3_req q = { .what = "mpu_complete", .method = "POST", .key = u->key,
			    .error_in_200 = true };
	struct s3_resp r;
	struct nv_buf x;
	struct iovec v;
	char b64[25], expect[48], etag[S3_ETAG_MAX];
	uint64_t size;
	bool aborted = false;
	int rc;

	nv_buf_init(&x, SIZE_MAX);
	s3_resp_init(&r, S3_XML_MAX);
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
		/* RGW ignores If-None-Match on complete: look first (internal.h
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
			rc = s3_xml_escape(&x, u->parts[i].etag);
		if (rc == 0)
			rc = nv_buf_printf(&x, "</ETag></Part>");
	}
	if (rc == 0)
		rc = nv_buf_printf(&x, "</CompleteMultipartUpload>");
	if (rc == 0)
		rc = s3_req_xml_body(&q, &x, &v, b64);
	if (rc)
		goto fail;
	q.query[q.nquery++] = (struct sigv4_kv){ "uploadId", u->id };
	rc = s3_do(s, &q, &r);
	if (rc)
		goto fail;
	if (s3_ok2xx(&r))
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
		/* internal.h invariant 5: an earlier attempt completed it. */
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

void s3_mpu_abort(void *be, void *upload)
{
	abort_upload(be, upload);
	upload_free(upload);
}
