/*
 * internal.h - what the files of the etcd backend share (public side
 * meta/etcd.h).  Included by the files of meta/etcd/ only.
 *
 *   conn.c   URL and options, the curl handle pool, one call with
 *            failover, retries and auth (ec_call()), the one error
 *            translation (etcd_to_errno()), base64
 *   kv.c     get, floor, range, commit (folding, splitting), status,
 *            open/close, the ops table
 *   lease.c  leases and watches (one streaming thread per watch)
 *
 * For: a metastore several hosts share.  Not for: key layout (meta/keys.c)
 * or anything the callers' CAS logic decides.
 *
 * Invariants of the whole backend (the files cite them by number):
 *  1. Every etcd key is be->prefix + the kv.h key; nothing outside the
 *     prefix is read or written, and prefix ends with '/'.
 *  2. Reads are linearizable (never "serializable"); a paged range reads
 *     every page at the revision of the first, so a visit sees one
 *     snapshot (kv.h kv_range()).
 *  3. Retries: a call is retried on another member, with capped jittered
 *     backoff, while no member answers, until be->timeout_ns has passed
 *     (then -ETIMEDOUT); once kv_closing() has set be->closing, a call
 *     gives up once it has tried every member once and sets be->down,
 *     and while be->down every call fails at once (ec_call()).  A
 *     request that may have been applied (its answer
 *     lost) is retried only when repeating it is harmless: reads, lease
 *     calls, unconditional writes; a CAS retried after such a loss that
 *     fails its compares is resolved by reading back whether its writes
 *     hold (ec_commit_resolve() in kv.c).
 *  4. Each failure is translated by etcd_to_errno() and logged once there
 *     (member, call, curl or HTTP status, etcd's message); retried
 *     failures are logged once per call at WARN, not once per attempt.
 *  5. A transaction reaching etcd has <= EC_TXN_OPS operations per branch,
 *     <= EC_TXN_BYTES of keys and values, and no two writes to one key.
 */
#ifndef NOVAFS_META_ETCD_INTERNAL_H
#define NOVAFS_META_ETCD_INTERNAL_H

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "meta/kv.h"

#define EC_MAX_MEMBERS 9
/* etcd's --max-txn-ops default. */
#define EC_TXN_OPS 128
/* Bytes of keys and values per transaction: under etcd's 1.5 MiB request
 * cap with room for the framing; a KV_VAL_MAX value still fits. */
#define EC_TXN_BYTES (1280u * 1024u)
/* Curl handles kept for reuse (each keeps its connection alive). */
#define EC_POOL 8

struct ec_be {
	/* Immutable after open. */
	char *members[EC_MAX_MEMBERS]; /* "http://h:p" or "https://h:p" */
	int nmembers;
	char *prefix;        /* invariant 1 */
	size_t plen;
	char *cacert, *cert, *key;
	char *user, *password;
	uint64_t timeout_ns; /* total per call while unreachable */
	long request_ms;     /* per HTTP request */
	char *name;

	_Atomic int cur;     /* member that answered last */
	atomic_bool closing; /* kv_closing(): stop retrying (invariant 3) */
	atomic_bool down;    /* closing, and a call found no member answering */

	pthread_mutex_t lock;
	CURL *pool[EC_POOL]; /* protected by lock */
	int npool;           /* protected by lock */
	char *token;         /* protected by lock: auth token or NULL */
	unsigned token_gen;  /* protected by lock: bumped per authenticate */
};

/* conn.c */
int ec_url_parse(struct ec_be *be, const char *url, bool https);
void ec_closing(void *vbe); /* kv_closing() */
void ec_be_free(struct ec_be *be);
/*
 * POST req (borrowed) to /v3/<path> on the members (invariant 3).  0 and
 * *resp (caller owns; json_decref()), or -errno from etcd_to_errno().
 * *maybe_applied (may be NULL) is set when an attempt's answer was lost
 * after the request may have reached etcd (the caller resolves a CAS).
 */
int ec_call(struct ec_be *be, const char *path, json_t *req, bool *maybe_applied,
	    json_t **resp);
/* One POST to one member, no retry (status, watches): 0 and *resp, or
 * -errno (logged at DEBUG only). */
int ec_call_member(struct ec_be *be, int member, const char *path, json_t *req,
		   long timeout_ms, json_t **resp);
/* Set the options every request of be needs on h (TLS, auth header list
 * returned in *hdrs, caller frees with curl_slist_free_all). */
int ec_curl_setup(struct ec_be *be, CURL *h, struct curl_slist **hdrs, bool stream);
CURL *ec_handle_take(struct ec_be *be);
void ec_handle_put(struct ec_be *be, CURL *h);

/* base64 of n bytes of p with be's prefix first when prefixed: a new
 * JSON string (caller owns) or NULL. */
json_t *ec_b64(const struct ec_be *be, const void *p, size_t n, bool prefixed);
/* Decode JSON string s into out (reset first); strip be's prefix when
 * prefixed (-EBADMSG when absent, or when the text is not base64; -E2BIG
 * when longer than out's bound).  0 or -errno. */
int ec_unb64(const struct ec_be *be, const json_t *s, struct nv_buf *out, bool prefixed);
/* An int64 field etcd sends as a string (or omits as 0). */
uint64_t ec_u64(const json_t *obj, const char *field);

/*
 * Decoders of etcd's answers (fuzzed: tests/fuzz/fuzz_etcd_json.c).  Each
 * takes any JSON value, NULL too, and reads only what it reports.
 */
/* kv.c: key, value (either may be NULL) and version of kvs[i] of a range
 * answer: 0, -ENOENT (no such entry), -EBADMSG (not base64, or a key
 * outside be's prefix), -E2BIG (longer than k's or v's bound), -ENOMEM. */
int ec_range_kv(const struct ec_be *be, const json_t *resp, size_t i, struct nv_buf *k,
		struct nv_buf *v, uint64_t *ver);
/* kv.c: a txn answer: 0 (succeeded) or -ECANCELED; *rev its revision. */
int ec_txn_outcome(const json_t *resp, uint64_t *rev);
/* lease.c: a keepalive answer: 0 and *ttl_s (<= KV_LEASE_TTL_MAX), or
 * -ENOLCK (no TTL: the lease is lost). */
int ec_keepalive_ttl(const json_t *resp, unsigned *ttl_s);
/* lease.c: one line of a watch stream. */
enum ec_watch_kind {
	EC_WATCH_OVER,      /* an error, a cancel, or not a message: reconnect */
	EC_WATCH_COMPACTED, /* the resume point is gone: prompt, from now */
	EC_WATCH_EVENTS,    /* changes: prompt with top */
	EC_WATCH_QUIET,     /* created or progress: nothing changed */
};
struct ec_watch_msg {
	enum ec_watch_kind kind;
	uint64_t hrev;      /* the header's revision (0: none) */
	uint64_t top;       /* EVENTS: the greatest mod_revision (0: none) */
	uint64_t compacted; /* COMPACTED: etcd's compact_revision */
};
void ec_watch_decode(const char *p, size_t n, struct ec_watch_msg *m);

/* lease.c */
int ec_lease_grant(void *vbe, unsigned ttl_s, uint64_t *id);
int ec_lease_keepalive(void *vbe, uint64_t id, unsigned *ttl_s);
int ec_lease_revoke(void *vbe, uint64_t id);
int ec_watch_start(void *vbe, struct kv_watch *w);
void ec_watch_stop(void *vbe, struct kv_watch *w);

#endif
