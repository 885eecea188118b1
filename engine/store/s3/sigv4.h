/*
 * sigv4.h - AWS Signature Version 4 (header form, "AWS4-HMAC-SHA256").
 *
 * For: signing the S3 requests of s3/request.c.  The module builds
 * the canonical request, the string to sign and the Authorization header
 * value from a description of the request; it also exports the two
 * encoders it uses (path and query), so the caller builds the URL it
 * sends with the very same bytes it signed.
 * sigv4_presign_query() is the query form of the same signature (a
 * presigned GET URL, DESIGN.md section 8 "signed" vending).
 * Not for: chunked (streaming) payload signing, SigV4A,
 * the generic-service path normalisation ("/a/../b"): S3 signs the path
 * as sent, each segment URI-encoded once, which is what this does.
 *
 * Why not curl's CURLOPT_AWS_SIGV4: see /work/shared/notes/s3-peers.md --
 * it mis-signs bare subresources and orders x-amz-copy-source* headers
 * wrongly, so a verifying server answers 403.
 *
 * Invariants:
 *  1. Canonical path: every byte outside [A-Za-z0-9-._~] is %XX (upper
 *     case hex), '/' is kept.  An empty path is "/".
 *  2. Canonical query: each name and value URI-encoded (also '/'), pairs
 *     sorted by encoded name, then encoded value; a parameter without a
 *     value is "name=" (so "?uploads" signs as "uploads=").
 *  3. Canonical headers: names lower-cased, values trimmed with inner
 *     runs of spaces collapsed to one, repeated names joined with ','
 *     in the order given, sorted by name.  SignedHeaders lists exactly
 *     the headers given, in that order.
 *  4. Header names must be HTTP tokens and values must not hold CR, LF
 *     or NUL; anything else is -EINVAL (no header injection through a
 *     signed value).
 *  5. Pure functions: no state, thread-safe.
 */
#ifndef NOVAFS_S3_SIGV4_H
#define NOVAFS_S3_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "src/base/buf.h"

/* "UNSIGNED-PAYLOAD": the body is not part of the signature (the S3
 * backend sends a signed Content-MD5 instead, see internal.h invariant 2). */
#define SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
/* Hex SHA-256 of the empty string: the payload hash of a bodiless request. */
#define SIGV4_EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* One name/value pair, both borrowed.  value NULL means "" (a query
 * parameter without a value, a header with an empty value). */
struct sigv4_kv {
	const char *name;
	const char *value;
};

/* Who signs, where.  All borrowed for the call. */
struct sigv4_creds {
	const char *access_key;
	const char *secret_key;
	const char *region;  /* "us-east-1" */
	const char *service; /* "s3" */
};

/* The request to sign; everything borrowed for the call. */
struct sigv4_request {
	const char *method;            /* "GET", "PUT", ... */
	const char *path;              /* raw (not encoded) absolute path */
	const struct sigv4_kv *query;  /* raw names and values, any order */
	size_t nquery;
	const struct sigv4_kv *headers; /* every header to sign, incl. host
					  * and x-amz-date, any case/order */
	size_t nheaders;
	const char *payload_hash;      /* lower-case hex SHA-256 of the body,
					* or SIGV4_UNSIGNED_PAYLOAD */
	const char *amz_date;          /* "YYYYMMDDTHHMMSSZ", as sent in
					* x-amz-date */
};

/* Length of an x-amz-date value plus its NUL. */
#define SIGV4_DATE_LEN 17
/* Lower-case hex of a SHA-256 plus its NUL. */
#define SIGV4_HEX_LEN 65

/* Format t (UTC) as an x-amz-date value into out. */
void sigv4_amz_date(time_t t, char out[SIGV4_DATE_LEN]);

/* Append the URI encoding of s[0..n) to out (invariant 1; with
 * keep_slash false '/' becomes %2F too).  0, -E2BIG, -ENOMEM. */
int sigv4_uri_encode(struct nv_buf *out, const char *s, size_t n, bool keep_slash)
	__attribute__((warn_unused_result));

/* Append the canonical query string of q[0..n) (invariant 2) to out; the
 * same string is a valid URL query.  0, -E2BIG, -ENOMEM. */
int sigv4_query_string(struct nv_buf *out, const struct sigv4_kv *q, size_t n)
	__attribute__((warn_unused_result));

/* Append the canonical request of rq to out (exposed for tests and
 * debug logs).  0, -EINVAL (invariant 4, bad method or path), -E2BIG,
 * -ENOMEM. */
int sigv4_canonical_request(const struct sigv4_request *rq, struct nv_buf *out)
	__attribute__((warn_unused_result));

/* Append the string to sign of rq for region/service of c to out.
 * Errors as sigv4_canonical_request(). */
int sigv4_string_to_sign(const struct sigv4_request *rq,
			 const struct sigv4_creds *c, struct nv_buf *out)
	__attribute__((warn_unused_result));

/* Append the Authorization header value to out:
 *   AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/SERVICE/aws4_request,
 *   SignedHeaders=a;b;c, Signature=HEX
 * Errors as sigv4_canonical_request(); -EIO when OpenSSL fails. */
int sigv4_authorization(const struct sigv4_request *rq,
			const struct sigv4_creds *c, struct nv_buf *out)
	__attribute__((warn_unused_result));

/* The longest validity S3 accepts for a presigned URL (7 days). */
#define SIGV4_PRESIGN_MAX_S 604800u

/* A presigned request: everything borrowed for the call. */
struct sigv4_presign {
	const char *method;        /* "GET" */
	const char *path;          /* raw absolute path, as for sigv4_request */
	const char *host;          /* the Host header value: the one signed header */
	const char *amz_date;      /* signing time, "YYYYMMDDTHHMMSSZ" */
	unsigned expires_s;        /* X-Amz-Expires: 1..SIGV4_PRESIGN_MAX_S */
	const char *session_token; /* NULL, or X-Amz-Security-Token */
};

/* Append the query string of the presigned request p to out: the
 * X-Amz-* parameters in canonical order (invariant 2), then
 * "&X-Amz-Signature=HEX".  The payload is UNSIGNED-PAYLOAD.  Errors as
 * sigv4_authorization(), and -EINVAL for expires_s out of range. */
int sigv4_presign_query(const struct sigv4_presign *p, const struct sigv4_creds *c,
			struct nv_buf *out) __attribute__((warn_unused_result));

/* Hex SHA-256 of p[0..n).  0 or -EIO (OpenSSL failure). */
int sigv4_sha256_hex(const void *p, size_t n, char out[SIGV4_HEX_LEN])
	__attribute__((warn_unused_result));

#endif
