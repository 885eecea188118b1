/*
 * s3.h - the S3 object store (libcurl + OpenSSL + our own SigV4).
 *
 * URL (store.h store_open()):
 *
 *   s3://BUCKET[?OPT=VALUE&...]
 *
 *   endpoint=URL            http(s)://host[:port] of an S3-compatible
 *                           server (default https://s3.REGION.amazonaws.com)
 *   region=R                signing region (default us-east-1)
 *   path_style=0|1          URLs as ENDPOINT/BUCKET/KEY (1) or
 *                           BUCKET.HOST/KEY (0); default 1 with an
 *                           endpoint, 0 without
 *   access_key=K            credentials (default: AWS_ACCESS_KEY_ID and
 *   secret_key=S            AWS_SECRET_ACCESS_KEY, with AWS_SESSION_TOKEN
 *                           when set); both or neither
 *   prefix=P                every key lives under P/ (P is a valid key)
 *   zone=Z                  a label for logs and zone-aware routing later
 *                           (DESIGN.md 6.3); never sent to the server
 *   connect_timeout_ms=N    TCP+TLS connect timeout (default 5000)
 *   request_timeout_ms=N    whole-request timeout per attempt (default
 *                           120000: a 64 MiB part at ~1 MB/s still fits)
 *   retries=N               retries after the first attempt on transient
 *                           failures (default 4, at most 20)
 *   max_connections=N       concurrent requests (pooled handles, each with
 *                           its keep-alive connection), default 32
 *   sign_payload=0|1        sign bodies with their SHA-256 instead of
 *                           UNSIGNED-PAYLOAD + Content-MD5 (default 0)
 *   list_max_keys=N         ListObjectsV2 page size, 1..1000 (default 1000)
 *   ca_file=PATH            CA bundle for https endpoints
 *   cache=URL[+URL...]      the object cache tier: caching proxies
 *                           (http://host:port each, at most 64; nginx as
 *                           tests/cache/nginx.sh sets it up) that ranged
 *                           gets go through, chosen per (object, page) by
 *                           a ring hash with bounded loads, straight to
 *                           the bucket when a proxy fails (s3/cache.c)
 *   cache_auth_file=PATH    the proxies' token (16..256 printable bytes,
 *                           mode 0600); required with cache=
 *   cache_slice_kib=N       the proxies' slice size, one page (default 1024)
 *   cache_hedge_ms=N        no byte from a proxy by then: go direct
 *                           (default 500)
 *   cache_eps_pct=N         bounded load: a proxy takes at most
 *                           (100 + N)% of the average load (default 25)
 *
 * Values are percent-decoded (%XX); '+' is literal.  Anything unknown,
 * repeated or malformed is -EINVAL with a log line naming it.  Opening
 * does not contact the server.
 *
 * What S3 cannot honour of store.h exactly (see s3/internal.h "Deviations"):
 *  - create-once on servers that ignore If-None-Match (s3rver) is not
 *    enforced for store_put(); store_mpu_complete() checks with a HEAD
 *    first, which is racy.  The engine's metastore decides who publishes.
 *  - with prefix=P the longest key is 1024 - strlen(P) - 1 bytes (S3's
 *    own key limit is 1024 bytes); longer keys are -EINVAL.
 */
#ifndef NOVAFS_STORE_S3_H
#define NOVAFS_STORE_S3_H

#include <curl/curl.h>

#include "engine/store/store.h"

/* Open an S3 store from an "s3://" URL (above).  0 and *out (caller owns;
 * store_close()), -EINVAL (bad URL or no credentials; logged), -ENOMEM,
 * -EIO (libcurl could not be initialised). */
int s3_store_open(const char *url, struct store **out)
	__attribute__((warn_unused_result));

/* Its store_open() scheme: "s3://" (schemes.c). */
extern const struct store_scheme s3_store_scheme;

/* The one translation of an S3 failure into a store.h errno: the libcurl
 * result cc (CURLE_OK when a response came), the HTTP status and the S3
 * error Code (NULL or "" when the response had none).  A success
 * (CURLE_OK, 2xx, no code) is 0. */
int s3_to_errno(CURLcode cc, long status, const char *code);

#endif
