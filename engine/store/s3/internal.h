/*
 * internal.h - what the files of the S3 backend (engine/store/s3/, public
 * side engine/store/s3.h) share: limits, the store, upload, request and
 * response structs, and the calls one file makes into another.  Included
 * by those files only.
 *
 * The backend is store.h over libcurl, signed with sigv4.c, answers read
 * with xml.c, in seven files:
 *   ops.c      the store ops glue: put, ranged get, head, delete, close,
 *              the ops table and s3_store_open()
 *   url.c      URL and options parsing (s3_url_parse())
 *   request.c  one request with retries (s3_do()), the handle pool and
 *              curl share, the curl callbacks, hashing, small parsers
 *   errors.c   the one errno translation (s3_to_errno()), failure logs
 *   list.c     paged listing (s3_list())
 *   mpu.c      multipart upload (s3_mpu_*())
 *   cache.c    the object cache tier: ranged gets through caching
 *              proxies chosen per (object, page) by the bounded-load
 *              ring of engine/store/tier.h, direct fallback, purge after
 *              delete (s3_cache_*())
 *
 * For: keeping novafs objects in an S3-compatible bucket (AWS S3, Ceph
 * RGW, and lax servers such as s3rver): put, ranged get, head, batch
 * delete, paged listing, multipart upload with server-side part copy.
 * Not for: key checks, counters, failpoints (store.c does them before any
 * call gets here), bucket management, caching in this process (the
 * cache tier of cache.c is other processes: nginx proxies).
 *
 * Invariants of the whole backend (the files cite them by number):
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
 *    HEAD narrows the race but cannot close it.  engine/settle/publish.c does not
 *    rely on either: the metastore CAS decides who publishes, and a
 *    settle that finds its key present adopts it by reading its footer.
 *  - Keys under prefix=P are P/KEY: 1024 - strlen(P) - 1 bytes at most.
 *  - A ranged get at off == size cannot be asked as a range (S3 answers
 *    416 for any range starting at the size); a 416 is resolved with a
 *    HEAD: size == off reads 0 bytes, size < off is -ERANGE.
 */
#ifndef NOVAFS_S3_INTERNAL_H
#define NOVAFS_S3_INTERNAL_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "engine/store/s3.h"
#include "engine/store/s3/sigv4.h"
#include "engine/store/store.h"
#include "engine/store/tier.h"
#include "src/base/buf.h"

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

/* The cache_* URL options as given (NULL: not given); url.c fills it. */
struct s3_cache_opts {
	const char *list, *slice_kib, *hedge_ms, *eps_pct, *auth_file;
};

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

	struct store_tier *cache; /* the cache tier (cache.c, tier.h), or NULL */
	atomic_ullong cache_purge_fails; /* cache.c: purges that failed */

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
	/* Through a cache proxy (cache.c): the request goes to via instead
	 * of the endpoint, signed for the endpoint's host, attempted once;
	 * uhdr are sent unsigned (the proxy may rewrite them: Range); with
	 * hedge_ms > 0 it is abandoned (-ETIMEDOUT) when no body byte came
	 * within hedge_ms. */
	const char *via;
	struct sigv4_kv uhdr[3];
	size_t nuhdr;
	long hedge_ms;
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
	bool hedged;         /* via: abandoned by the hedge (q->hedge_ms) */
	uint64_t t0_ns;      /* monotonic start of the attempt */
	const struct s3_req *req;
};

/* ------------------------------------------------ request.c: requests */

/*
 * Perform q with retries (invariant 4) and leave the last answer in r
 * (r->body initialised by the caller with its bound via s3_resp_init()).
 * q and everything it points to are borrowed for the call.  Returns 0
 * when a response was received and classified (the caller looks at
 * r->status / r->code; 2xx with error_in_200 bodies are turned into their
 * error), -ENOMEM / -EIO on local failures (logged).  A transport failure
 * after all attempts is r->cc != CURLE_OK.  The caller frees r->body.
 */
int s3_do(struct s3_store *s, const struct s3_req *q, struct s3_resp *r);
/* Zero r and give its body the bound max (nothing allocated yet). */
void s3_resp_init(struct s3_resp *r, size_t max);
/* A response came and its status is 2xx. */
bool s3_ok2xx(const struct s3_resp *r);
/* The full key of key, "prefix/key", into out (caller's, cap bytes),
 * bounded by S3's 1024 bytes.  0, or -EINVAL (logged, naming what). */
int s3_full_key(const struct s3_store *s, const char *what, const char *key,
		char *out, size_t cap);
/* The curl share of s (DNS, TLS sessions) with its lock callbacks.
 * 0, -ENOMEM, -EIO; s3_close() frees it either way. */
int s3_share_setup(struct s3_store *s);

/* ------------------------------------ request.c: hashing and parsing */

/* md as 32 lower-case hex digits into out. */
void s3_hex16(const unsigned char md[16], char out[33]);
/* MD5 of the iovec (borrowed): binary, base64 (Content-MD5) and hex.
 * 0 or -EIO (logged). */
int s3_md5_iov(const struct iovec *iov, int iovcnt, unsigned char md[16],
	       char b64[25], char hex[33]);
/* Make the XML document x (borrowed, with v and b64, until q is done)
 * q's body: v, its Content-MD5 in b64 and an XML content type.
 * 0 or -EIO (logged). */
int s3_req_xml_body(struct s3_req *q, const struct nv_buf *x, struct iovec *v, char b64[25]);
/* The 32 hex digits inside a plain-MD5 ETag ("\"<hex>\"" or "<hex>"),
 * lower-cased into out; false for multipart or other ETags. */
bool s3_etag_md5(const char *etag, char out[33]);
/* Strictly parse a decimal uint64 of s[0..n).  0 or -EINVAL. */
int s3_parse_u64(const char *s, size_t n, uint64_t *out);
/* Append XML-escaped s to b.  0 or -ENOMEM (b's bound). */
int s3_xml_escape(struct nv_buf *b, const char *s);

/* ----------------------------------------------- errors.c: failures */

/* Log a failed call once (invariant 6) and return its errno. */
int s3_fail(const struct s3_store *s, const char *what, const char *key,
	    const struct s3_resp *r);
/* A response problem of our own finding (bad XML, wrong ETag...):
 * logged, -EIO. */
int s3_bad_answer(const struct s3_store *s, const char *what,
		  const char *key, const char *why);

/* ----------------------------------------------------- url.c: options */

/*
 * Parse an "s3://" URL (s3.h) into the immutable configuration of s:
 * bucket, region, credentials, prefix, zone, ca_file, the addresses
 * (host, base_url, path_base) and the numeric options, defaults first.
 * *path_style tells which URL style was chosen.  0, -EINVAL (logged,
 * naming the option), -ENOMEM.  On failure s holds what was set so far:
 * s3_close() frees it.
 */
int s3_url_parse(const char *url, struct s3_store *s, bool *path_style);
/* The decimal option name=v (NULL: not given, *out untouched) within
 * [lo, hi] into *out.  0 or -EINVAL (logged without the URL's secrets). */
int s3_parse_long(const char *url, const char *name, const char *v, long lo,
		  long hi, long *out);

/* ---------------------------------------------- ops.c, list.c, mpu.c */

/*
 * One ranged get of the full key fk into dst (len bytes, caller's):
 * direct when via < 0, else through proxy via of s->cache.  Direct: the
 * store.h get_range contract (0 and *got, -ENOENT, -ERANGE, or the logged
 * error).  Through a proxy: 0 and *got only for a clean 200/206 that adds
 * up; anything else is -EAGAIN (not logged; -ETIMEDOUT for a hedge), with
 * *down set when the proxy itself failed (transport, 5xx, hedge).
 */
int s3_get_once(struct s3_store *s, const char *fk, uint64_t off, size_t len,
		void *dst, size_t *got, int via, bool *down);

/* HEAD of the full key fkey (what names the call in logs).  0 and *size
 * (and the ETag into etag, etag_cap bytes, when etag is not NULL),
 * -ENOENT (not logged), or the logged error. */
int s3_head_full(struct s3_store *s, const char *what, const char *fkey,
		 uint64_t *size, char *etag, size_t etag_cap);

/* The store_backend_ops entries of list.c and mpu.c (store.h). */
int s3_list(void *be, const char *prefix, const char *start_after,
	    store_list_fn fn, void *arg);
int s3_mpu_create(void *be, const char *key, void **upload);
int s3_mpu_put_part(void *be, void *upload, int part_no,
		    const struct iovec *iov, int iovcnt);
int s3_mpu_copy_part(void *be, void *upload, int part_no,
		     const char *src_key, uint64_t off, uint64_t len);
int s3_mpu_complete(void *be, void *upload, unsigned flags);
void s3_mpu_abort(void *be, void *upload);

/* ------------------------------------------------- cache.c: the tier */

/* The cache_* options o of url into s->cache (left NULL without cache=).
 * 0, -EINVAL (logged, naming the option), -ENOMEM. */
int s3_cache_parse(struct s3_store *s, const char *url, const struct s3_cache_opts *o);
void s3_cache_free(struct store_tier *c);
/* The ranged get of fk through the tier (store.h get_range contract). */
int s3_cache_get(struct s3_store *s, const char *fk, uint64_t off, size_t len,
		 char *dst, size_t *got);
/* Purge every slice of the deleted fk (size bytes) from every live proxy
 * (cache.c invariant 5).  0 or the first failure (logged). */
int s3_cache_purge(struct s3_store *s, const char *fk, uint64_t size);
/* ops.c: refresh the slice at off of fk through proxy idx (bypassing its
 * cache); 0 when the proxy answered (any status but 5xx and 403), else
 * -EIO / -EACCES. */
int s3_cache_refresh_one(struct s3_store *s, const char *fk, uint64_t off, int idx);
/* Log the tier's counters (at close). */
void s3_cache_report(const struct s3_store *s);

#endif
