/*
 * sigv4.c - AWS Signature Version 4 signing (see sigv4.h).
 *
 * For: turning a request description into its canonical request, string
 * to sign and Authorization value, following the SigV4 specification as
 * S3 applies it (no path normalisation, paths encoded once).
 * Not for: sending anything, choosing which headers to sign (request.c does),
 * or caching signing keys: the four HMACs of the key chain cost about a
 * microsecond, far below one request's round trip, and a cache would need
 * a lock and a day rollover rule.
 *
 * Invariants: those of sigv4.h, plus
 *  1. Every temporary is freed on every path; outputs are appended to the
 *     caller's nv_buf, which bounds them.
 *  2. Secrets never reach a log line: this file logs nothing.
 */
#include "config.h"
#include "engine/store/s3/sigv4.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

/* Longest header name or value we sign.  S3 headers are short; a request
 * with a longer one is a caller bug, not something to sign. */
#define SIGV4_FIELD_MAX 8192
/* Headers and query parameters per request: request.c signs at most a dozen. */
#define SIGV4_ITEMS_MAX 64

static const char hexdig[] = "0123456789ABCDEF";
static const char hexlow[] = "0123456789abcdef";

static void to_hex(const unsigned char *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexlow[p[i] >> 4];
		out[2 * i + 1] = hexlow[p[i] & 15];
	}
	out[2 * n] = '\0';
}

void sigv4_amz_date(time_t t, char out[SIGV4_DATE_LEN])
{
	struct tm tm;

	gmtime_r(&t, &tm);
	/* strftime cannot fail here: the format has a fixed width. */
	strftime(out, SIGV4_DATE_LEN, "%Y%m%dT%H%M%SZ", &tm);
}

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

int sigv4_uri_encode(struct nv_buf *out, const char *s, size_t n, bool keep_slash)
{
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		unsigned char c = (unsigned char)s[i];

		if (unreserved(c) || (keep_slash && c == '/')) {
			rc = nv_buf_add(out, &s[i], 1);
		} else {
			char e[3] = { '%', hexdig[c >> 4], hexdig[c & 15] };

			rc = nv_buf_add(out, e, 3);
		}
	}
	return rc;
}

/* ------------------------------------------------------------ query */

struct enc_pair {
	char *name;  /* owned, encoded */
	char *value; /* owned, encoded */
};

static int pair_cmp(const void *a, const void *b)
{
	const struct enc_pair *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

/* An owned, NUL-terminated URI encoding of s (NULL = ""), or NULL. */
static char *encode_dup(const char *s)
{
	struct nv_buf b;

	nv_buf_init(&b, SIGV4_FIELD_MAX * 3);
	if (!s)
		s = "";
	if (sigv4_uri_encode(&b, s, strlen(s), false) < 0 || nv_buf_add(&b, "", 0) < 0) {
		nv_buf_free(&b);
		return NULL;
	}
	return (char *)nv_buf_steal(&b, NULL);
}

int sigv4_query_string(struct nv_buf *out, const struct sigv4_kv *q, size_t n)
{
	struct enc_pair *v;
	size_t i;
	int rc = 0;

	if (n == 0)
		return 0;
	if (n > SIGV4_ITEMS_MAX)
		return -E2BIG;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		v[i].name = encode_dup(q[i].name);
		v[i].value = encode_dup(q[i].value);
		if (!v[i].name || !v[i].value) {
			rc = -ENOMEM;
			i++;
			goto out;
		}
	}
	qsort(v, n, sizeof(*v), pair_cmp);
	for (size_t j = 0; j < n && rc == 0; j++)
		rc = nv_buf_printf(out, "%s%s=%s", j ? "&" : "", v[j].name,
				   v[j].value);
out:
	while (i-- > 0) {
		free(v[i].name);
		free(v[i].value);
	}
	free(v);
	return rc;
}

/* ---------------------------------------------------------- headers */

struct canon_header {
	char *name;   /* owned: lower-cased */
	char *value;  /* owned: trimmed, runs of spaces collapsed */
	size_t order; /* position in the request: keeps sorting stable */
};

static int header_cmp(const void *a, const void *b)
{
	const struct canon_header *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* RFC 9110 token characters. */
static bool tchar(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Fill h from one header (invariants 3 and 4).  0, -EINVAL, -ENOMEM. */
static int canon_one(const struct sigv4_kv *kv, size_t order,
		     struct canon_header *h)
{
	const char *v = kv->value ? kv->value : "";
	size_t nlen = kv->name ? strlen(kv->name) : 0, vlen = strlen(v), o = 0;
	bool space = false;

	if (nlen == 0 || nlen > SIGV4_FIELD_MAX || vlen > SIGV4_FIELD_MAX)
		return -EINVAL;
	for (size_t i = 0; i < nlen; i++)
		if (!tchar((unsigned char)kv->name[i]))
			return -EINVAL;
	h->order = order;
	h->name = malloc(nlen + 1);
	h->value = malloc(vlen + 1);
	if (!h->name || !h->value)
		return -ENOMEM;
	for (size_t i = 0; i <= nlen; i++) {
		unsigned char c = (unsigned char)kv->name[i];

		h->name[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	}
	for (size_t i = 0; i < vlen; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c == '\r' || c == '\n')
			return -EINVAL;
		if (c == ' ' || c == '\t') {
			space = o > 0; /* leading blanks vanish */
			continue;
		}
		if (space)
			h->value[o++] = ' ';
		space = false;
		h->value[o++] = (char)c;
	}
	h->value[o] = '\0'; /* trailing blanks vanish too */
	return 0;
}

/* Append "name:value\n" lines (merged, sorted) to canon and "a;b;c" to
 * signed_list (either may be NULL). */
static int canon_headers(const struct sigv4_request *rq, struct nv_buf *canon,
			 struct nv_buf *signed_list)
{
	struct canon_header *h;
	size_t n = rq->nheaders, i;
	int rc = 0;

	if (n == 0 || n > SIGV4_ITEMS_MAX)
		return -EINVAL; /* at least host must be signed */
	h = calloc(n, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (i = 0; i < n && rc == 0; i++)
		rc = canon_one(&rq->headers[i], i, &h[i]);
	if (rc < 0)
		goto out;
	qsort(h, n, sizeof(*h), header_cmp);
	for (i = 0; i < n && rc == 0; i++) {
		bool first = i == 0 || strcmp(h[i].name, h[i - 1].name) != 0;
		bool last = i + 1 == n || strcmp(h[i].name, h[i + 1].name) != 0;

		if (canon && first)
			rc = nv_buf_printf(canon, "%s:", h[i].name);
		if (canon && rc == 0)
			rc = nv_buf_printf(canon, "%s%s", h[i].value,
					   last ? "\n" : ",");
		if (signed_list && first && rc == 0)
			rc = nv_buf_printf(signed_list, "%s%s", i ? ";" : "",
					   h[i].name);
	}
out:
	for (i = 0; i < n; i++) { /* calloc'd: untouched entries are NULL */
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
	return rc;
}

/* --------------------------------------------------------- requests */

int sigv4_canonical_request(const struct sigv4_request *rq, struct nv_buf *out)
{
	struct nv_buf signed_list;
	const char *path = rq->path && rq->path[0] ? rq->path : "/";
	int rc;

	if (!rq->method || !rq->method[0] || path[0] != '/' || !rq->payload_hash)
		return -EINVAL;
	for (const char *m = rq->method; *m; m++)
		if (!tchar((unsigned char)*m))
			return -EINVAL;
	nv_buf_init(&signed_list, SIGV4_ITEMS_MAX * 256);
	rc = nv_buf_printf(out, "%s\n", rq->method);
	if (rc == 0)
		rc = sigv4_uri_encode(out, path, strlen(path), true);
	if (rc == 0)
		rc = nv_buf_add(out, "\n", 1);
	if (rc == 0)
		rc = sigv4_query_string(out, rq->query, rq->nquery);
	if (rc == 0)
		rc = nv_buf_add(out, "\n", 1);
	if (rc == 0)
		rc = canon_headers(rq, out, &signed_list);
	if (rc == 0)
		rc = nv_buf_printf(out, "\n%s\n%s", signed_list.ptr,
				   rq->payload_hash);
	nv_buf_free(&signed_list);
	return rc;
}

int sigv4_sha256_hex(const void *p, size_t n, char out[SIGV4_HEX_LEN])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		return -EIO;
	to_hex(md, 32, out);
	return 0;
}

/* The date (YYYYMMDD) of an x-amz-date value, validated. */
static int date_of(const char *amz_date, char day[9])
{
	if (!amz_date || strlen(amz_date) != SIGV4_DATE_LEN - 1 ||
	    amz_date[8] != 'T' || amz_date[15] != 'Z')
		return -EINVAL;
	memcpy(day, amz_date, 8);
	day[8] = '\0';
	for (int i = 0; i < 8; i++)
		if (day[i] < '0' || day[i] > '9')
			return -EINVAL;
	return 0;
}

static int sts_build(const struct sigv4_request *rq, const struct sigv4_creds *c,
		     const char *day, struct nv_buf *out)
{
	struct nv_buf creq;
	char hash[SIGV4_HEX_LEN];
	int rc;

	if (!c->region || !c->service || !c->region[0] || !c->service[0] ||
	    strpbrk(c->region, "/\r\n") || strpbrk(c->service, "/\r\n"))
		return -EINVAL;
	nv_buf_init(&creq, SIZE_MAX);
	rc = sigv4_canonical_request(rq, &creq);
	if (rc == 0)
		rc = sigv4_sha256_hex(creq.ptr, creq.len, hash);
	if (rc == 0)
		rc = nv_buf_printf(out, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s",
				   rq->amz_date, day, c->region, c->service, hash);
	nv_buf_free(&creq);
	return rc;
}

int sigv4_string_to_sign(const struct sigv4_request *rq,
			 const struct sigv4_creds *c, struct nv_buf *out)
{
	char day[9];
	int rc = date_of(rq->amz_date, day);

	return rc ? rc : sts_build(rq, c, day, out);
}

/* out = HMAC-SHA256(key, msg).  0 or -EIO. */
static int hmac(const void *key, size_t klen, const void *msg, size_t mlen,
		unsigned char out[32])
{
	unsigned int n = 0;

	if (!HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &n) || n != 32)
		return -EIO;
	return 0;
}

/* The signature of rq (lower-case hex) for c on day: the key chain
 * kDate, kRegion, kService, kSigning over the string to sign.  0,
 * -EINVAL (bad credentials, invariant 4), -E2BIG, -ENOMEM, -EIO. */
static int signature_hex(const struct sigv4_request *rq, const struct sigv4_creds *c,
			 const char *day, char sighex[SIGV4_HEX_LEN])
{
	struct nv_buf sts, secret;
	unsigned char k[32], sig[32];
	int rc;

	if (!c->access_key || !c->secret_key || !c->access_key[0] ||
	    strpbrk(c->access_key, "/,\r\n "))
		return -EINVAL;
	nv_buf_init(&sts, SIZE_MAX);
	nv_buf_init(&secret, SIGV4_FIELD_MAX);
	rc = sts_build(rq, c, day, &sts);
	if (rc == 0)
		rc = nv_buf_printf(&secret, "AWS4%s", c->secret_key);
	if (rc == 0)
		rc = hmac(secret.ptr, secret.len, day, 8, k);
	if (rc == 0)
		rc = hmac(k, 32, c->region, strlen(c->region), k);
	if (rc == 0)
		rc = hmac(k, 32, c->service, strlen(c->service), k);
	if (rc == 0)
		rc = hmac(k, 32, "aws4_request", 12, k);
	if (rc == 0)
		rc = hmac(k, 32, sts.ptr, sts.len, sig);
	if (rc == 0)
		to_hex(sig, 32, sighex);
	/* Wipe the derived secrets before the memory goes back. */
	if (secret.ptr)
		memset(secret.ptr, 0, secret.cap);
	memset(k, 0, sizeof(k));
	nv_buf_free(&secret);
	nv_buf_free(&sts);
	return rc;
}

int sigv4_authorization(const struct sigv4_request *rq,
			const struct sigv4_creds *c, struct nv_buf *out)
{
	struct nv_buf signed_list;
	char day[9], sighex[SIGV4_HEX_LEN];
	int rc = date_of(rq->amz_date, day);

	if (rc)
		return rc;
	nv_buf_init(&signed_list, SIGV4_ITEMS_MAX * 256);
	rc = signature_hex(rq, c, day, sighex);
	if (rc == 0)
		rc = canon_headers(rq, NULL, &signed_list);
	if (rc == 0)
		rc = nv_buf_printf(out,
				   "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, "
				   "SignedHeaders=%s, Signature=%s",
				   c->access_key, day, c->region, c->service,
				   signed_list.ptr, sighex);
	nv_buf_free(&signed_list);
	return rc;
}

int sigv4_presign_query(const struct sigv4_presign *p, const struct sigv4_creds *c,
			struct nv_buf *out)
{
	char day[9], cred[512], expires[16], sighex[SIGV4_HEX_LEN];
	struct sigv4_kv q[6], h[1] = { { "host", p->host } };
	struct sigv4_request rq;
	size_t nq = 0;
	int n, rc = date_of(p->amz_date, day);

	if (rc)
		return rc;
	if (p->expires_s < 1 || p->expires_s > SIGV4_PRESIGN_MAX_S || !p->host || !c->access_key ||
	    !c->region || !c->service)
		return -EINVAL;
	n = snprintf(cred, sizeof(cred), "%s/%s/%s/%s/aws4_request", c->access_key, day,
		     c->region, c->service);
	if (n < 0 || (size_t)n >= sizeof(cred))
		return -E2BIG;
	snprintf(expires, sizeof(expires), "%u", p->expires_s);
	q[nq++] = (struct sigv4_kv){ "X-Amz-Algorithm", "AWS4-HMAC-SHA256" };
	q[nq++] = (struct sigv4_kv){ "X-Amz-Credential", cred };
	q[nq++] = (struct sigv4_kv){ "X-Amz-Date", p->amz_date };
	q[nq++] = (struct sigv4_kv){ "X-Amz-Expires", expires };
	if (p->session_token)
		q[nq++] = (struct sigv4_kv){ "X-Amz-Security-Token", p->session_token };
	q[nq++] = (struct sigv4_kv){ "X-Amz-SignedHeaders", "host" };
	rq = (struct sigv4_request){
		.method = p->method, .path = p->path, .query = q, .nquery = nq,
		.headers = h, .nheaders = 1, .payload_hash = SIGV4_UNSIGNED_PAYLOAD,
		.amz_date = p->amz_date,
	};
	rc = signature_hex(&rq, c, day, sighex);
	if (rc == 0)
		rc = sigv4_query_string(out, q, nq);
	if (rc == 0)
		rc = nv_buf_printf(out, "&X-Amz-Signature=%s", sighex);
	return rc;
}
