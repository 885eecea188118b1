/*
 * kv.h - the ordered key-value interface of the metastore.
 *
 * For: every piece of novafs metadata (buckets, streams, span refs,
 * catalog rows, chains, markers).  The typed rows (meta/streams.h,
 * meta/refs.h, meta/chains.h, meta/markers.h) are built on these calls
 * only, so the SQLite backend (embedded default) and a remote backend
 * (meta/etcd/) are interchangeable.  Not for: bulk data.
 *
 * Model: etcd's KV API.  Every key carries a modification version
 * (a store-wide revision, strictly increasing across commits); 0 means
 * "absent".  Writes that another star could race are transactions that
 * compare first.
 *
 * Invariants every backend keeps:
 *  1. A transaction's compares and writes are atomic: all writes happen
 *     and are durable when commit returns 0, none happen otherwise.
 *  2. Reads see only committed state; a read that starts after a commit
 *     returned sees it.
 *  3. Keys compare as unsigned byte strings (memcmp, shorter first on a
 *     common prefix).
 *  4. Every call is thread-safe.
 *
 * Range and floor bounds may be KV_KEY_MAX + 1 bytes long, so the end of
 * a maximal prefix (prefix + 0xFF) is a valid bound.  A transaction of
 * compares only writes nothing and keeps the revision.  A transaction is
 * single-use: committing it twice, or building after commit, is -EINVAL.
 *
 * Errors: 0 or negative errno.  -ENOENT no such key (get/floor),
 * -ECANCELED a compare failed (nothing written), -EBUSY the backend
 * stayed busy past its timeout, -ETIMEDOUT a remote backend stayed
 * unreachable (no member answered) past its timeout, -ENOLCK a lease is
 * lost (expired, revoked or unknown), -ENOSPC, -EACCES (refused by the
 * backend's auth), -EIO.
 *
 * Splitting (remote backends have per-request limits: etcd allows 128
 * operations per transaction branch and 1.5 MiB per request):
 *  - Two writes to one key in one transaction are folded into the last
 *    one by every backend (same outcome as applying them in order).
 *  - A transaction WITHOUT compares that does not fit one request may be
 *    committed as several requests, in order; each part is atomic, the
 *    whole is not: a reader may see a prefix of the batch, and a failure
 *    may leave a prefix applied.  *rev is the last part's revision.
 *    The caller that writes such batches (absorb's refs, engine/absorb.c
 *    write_refs()) writes only rows that are correct on their own and
 *    idempotent to rewrite, and publishes them with a later small CAS
 *    (the chain checkpoint); every other transaction in the tree is a
 *    CAS of a few rows (settle's catalog commit: 1 compare, 3 writes).
 *  - A transaction WITH compares is never split: one of more than
 *    KV_TXN_SAFE_OPS operations is -E2BIG (nothing written) on every
 *    backend (kv.c refuses it before the backend sees it, so SQLite runs
 *    catch a caller that would fail on etcd).
 */
#ifndef NOVAFS_META_KV_H
#define NOVAFS_META_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/base/buf.h"
#include "src/base/urlscheme.h"

struct kv;     /* an opened metastore; opaque */
struct kv_txn; /* a transaction being built; opaque */

/* Hard limits, enforced by every backend (-E2BIG). */
#define KV_KEY_MAX 2048
#define KV_VAL_MAX (1u << 20)
/* Compares + writes a CAS transaction may carry on every backend (etcd's
 * 128 per branch, less room for the lease rows of later issues). */
#define KV_TXN_SAFE_OPS 120

/*
 * Open a metastore from a URL, by the scheme table (meta/schemes.c):
 *   sqlite:/abs/path.db or /abs/path.db   the SQLite backend (created)
 *   etcd://H:P[;H:P...]/PREFIX[?opts]     etcd's v3 gateway (meta/etcd.h)
 *   etcd+https://...                      the same over TLS
 * 0 and *out (caller owns; kv_close()), -EINVAL (bad URL, logged), or
 * the backend's error.
 */
int kv_open(const char *url, struct kv **out) __attribute__((warn_unused_result));

/* Close; NULL is a no-op.  No call may be in progress. */
void kv_close(struct kv *kv);

/*
 * The owner is shutting down (star_close()): a remote backend stops
 * retrying an unreachable metastore for its full timeout.  From now on
 * a call (also one in progress) that finds no member answering gives up
 * once it has tried every member once (each try at most one request
 * timeout: a cluster that just lost its leader answers elsewhere), and once
 * one call has given up every later call fails with -ETIMEDOUT at once,
 * without trying.  Callers that would retry a failed commit forever
 * (the absorb) check kv_is_closing() and stop instead: what they did not
 * write is recovered at the next start.  Idempotent; thread-safe; NULL
 * is a no-op.
 */
void kv_closing(struct kv *kv);
bool kv_is_closing(struct kv *kv);

/*
 * Point lookup.  On 0, val (caller-owned, reset first) holds the value
 * and *ver (may be NULL) its version.  -ENOENT when absent.
 */
int kv_get(struct kv *kv, const void *key, size_t klen, struct nv_buf *val,
	   uint64_t *ver) __attribute__((warn_unused_result));

/*
 * Floor lookup: the greatest key k with lo <= k <= key.  key_out and
 * val_out (caller-owned, reset first; either may be NULL) receive it.
 * -ENOENT when no key lies in [lo, key].
 */
int kv_floor(struct kv *kv, const void *key, size_t klen, const void *lo,
	     size_t lolen, struct nv_buf *key_out, struct nv_buf *val_out,
	     uint64_t *ver) __attribute__((warn_unused_result));

/*
 * Visit the keys in [start, end) in ascending order (descending when
 * reverse), at most limit of them (0 = no limit).  fn gets key and value
 * (borrowed for the call) and returns 0 to go on, 1 to stop, -errno to
 * stop with that error.  The visit sees one consistent snapshot; fn must
 * not call back into the same kv (deadlock on some backends).
 * Returns 0, fn's error, or the backend's error.
 */
typedef int (*kv_visit_fn)(void *arg, const uint8_t *key, size_t klen,
			   const uint8_t *val, size_t vlen, uint64_t ver);
int kv_range(struct kv *kv, const void *start, size_t slen, const void *end,
	     size_t elen, size_t limit, bool reverse, kv_visit_fn fn, void *arg)
	__attribute__((warn_unused_result));

/* Transactions.  kv_txn_new() returns NULL on ENOMEM; the builders copy
 * their arguments and return 0 or -ENOMEM / -E2BIG (the transaction is
 * then poisoned and commit returns that error). */
struct kv_txn *kv_txn_new(void);
void kv_txn_free(struct kv_txn *t); /* NULL is a no-op */

/* Compare: key's version == ver (ver 0: key absent). */
int kv_txn_cmp_ver(struct kv_txn *t, const void *key, size_t klen, uint64_t ver);
/* Compare: key present with exactly this value. */
int kv_txn_cmp_val(struct kv_txn *t, const void *key, size_t klen,
		   const void *val, size_t vlen);
int kv_txn_put(struct kv_txn *t, const void *key, size_t klen, const void *val,
	       size_t vlen);
int kv_txn_del(struct kv_txn *t, const void *key, size_t klen);

/*
 * A put bound to a lease (kv_lease_grant()): the key is deleted when the
 * lease expires or is revoked.  A later put without a lease unbinds it.
 * Commit is -ENOLCK when the lease is already lost (nothing written).
 */
int kv_txn_put_lease(struct kv_txn *t, const void *key, size_t klen, const void *val,
		     size_t vlen, uint64_t lease);

/* Number of writes so far (callers split huge batches). */
size_t kv_txn_nwrites(const struct kv_txn *t);

/*
 * Commit: check every compare, then apply every write in order, all or
 * nothing.  0 (durable), -ECANCELED (a compare failed; nothing written),
 * or -errno.  The transaction is not freed and may not be reused.
 * *rev (may be NULL) gets the revision of the commit (the version every
 * written key now has).
 */
int kv_txn_commit(struct kv *kv, struct kv_txn *t, uint64_t *rev)
	__attribute__((warn_unused_result));

/*
 * Compare-and-swap with retries, the one home of the metastore's CAS
 * loop (JuiceFS's txn(ctx, f, retries)).  kv_cas_run() gives build a
 * fresh transaction; build reads what it needs, then fills in the
 * compares of the versions it read and the writes; kv_cas_run() commits.
 * A commit that fails its compares (-ECANCELED: a concurrent writer won)
 * runs cancelled (when set), then, unless that decided, build again on
 * the new state, at most attempts commits in all.
 */
struct kv_cas {
	/* 0: commit t; KV_CAS_DONE: nothing to write, stop with 0 without
	 * committing; -errno: stop with that error.  t is freed by
	 * kv_cas_run() (build must not keep it).  Runs once per attempt. */
	int (*build)(void *arg, struct kv *kv, struct kv_txn *t);
	/* Optional: called after a commit returned -ECANCELED.  Returns
	 * -ECANCELED to go on retrying, or the result to stop with (e.g.
	 * -EEXIST when the racer made the row this call wanted to make). */
	int (*cancelled)(void *arg, struct kv *kv);
	int attempts;      /* commits at most (> 0) */
	bool retry_eagain; /* a commit's -EAGAIN is retried like -ECANCELED */
};
#define KV_CAS_DONE 1

/*
 * Run how (borrowed for the call) with arg.  Returns 0 (committed; *rev,
 * may be NULL, gets the revision), 0 for KV_CAS_DONE (nothing
 * committed), build's or cancelled's error, -ENOMEM, or the last
 * commit's error: -ECANCELED (or -EAGAIN) when every attempt lost.
 */
int kv_cas_run(struct kv *kv, const struct kv_cas *how, void *arg, uint64_t *rev)
	__attribute__((warn_unused_result));

/* One-write conveniences (unconditional). */
int kv_put(struct kv *kv, const void *key, size_t klen, const void *val,
	   size_t vlen) __attribute__((warn_unused_result));
int kv_del(struct kv *kv, const void *key, size_t klen)
	__attribute__((warn_unused_result));

/*
 * Claim the metastore for this daemon alone, for as long as kv is open.
 * A backend made to be shared by several stars (a remote one) has no
 * claim op and always succeeds; an embedded one (SQLite) refuses a
 * second daemon with -EBUSY (logged) instead of letting both write.
 * Tools that only read beside a daemon (novactl status) do not claim.
 */
int kv_claim(struct kv *kv) __attribute__((warn_unused_result));

/* kv is a backend made to be shared by several stars (it has no claim:
 * another star may change any row at any time), not an embedded one. */
bool kv_shared(const struct kv *kv);

/*
 * The backend's own consistency check (SQLite's PRAGMA
 * integrity_check): problem is called once per problem found (text
 * borrowed for the call).  0 (checked; no call means none found),
 * -ENOTSUP when the backend has no such check, or -errno when the check
 * could not run.
 */
typedef void (*kv_problem_fn)(void *arg, const char *problem);
int kv_integrity_check(struct kv *kv, kv_problem_fn problem, void *arg)
	__attribute__((warn_unused_result));
/* The same, bounded to one pass over the file (SQLite's PRAGMA
 * quick_check: no index cross-checks), for a start-up check. */
int kv_quick_check(struct kv *kv, kv_problem_fn problem, void *arg)
	__attribute__((warn_unused_result));

/* ---------------------------------------------------------------------
 * Leases (etcd's model).  A lease lives ttl seconds after its grant or
 * last keepalive; keys put with it vanish with it.  Minimum TTL
 * KV_LEASE_TTL_MIN (a smaller one is raised to it).  Remote backends may
 * let a lease outlive its TTL by up to one TTL (etcd resets TTLs on a
 * leader change), never expire it early.  The SQLite backend keeps
 * deadlines on CLOCK_MONOTONIC (one host), so a lease of a process that
 * died expires on time; after a reboot every old lease is expired.
 */
#define KV_LEASE_TTL_MIN 2
#define KV_LEASE_TTL_MAX (24u * 3600u)

/* 0 and *id (never 0), or -errno. */
int kv_lease_grant(struct kv *kv, unsigned ttl_s, uint64_t *id)
	__attribute__((warn_unused_result));
/* Refresh: 0 and *ttl_s (may be NULL) the TTL granted again; -ENOLCK
 * "lease lost": it expired or was revoked, its keys are gone or going,
 * and the holder must stop acting on it. */
int kv_lease_keepalive(struct kv *kv, uint64_t id, unsigned *ttl_s)
	__attribute__((warn_unused_result));
/* Revoke: 0 (its keys are deleted), -ENOLCK (already lost), -errno. */
int kv_lease_revoke(struct kv *kv, uint64_t id) __attribute__((warn_unused_result));

/* ---------------------------------------------------------------------
 * Watches.  A watch over a key prefix reports that something under it
 * changed at or after from_rev; an event is a prompt to re-read, never
 * the data.  It may fire spuriously (after a reconnect, a compaction, or
 * when the backend cannot tell), never miss a change: a reader that
 * re-reads after every wake sees every committed state it must.
 */
struct kv_watch; /* opaque; one owner thread */

/* Watch keys starting with prefix (borrowed for the call), for changes
 * at revisions >= from_rev (0: from now).  0 and *out (caller owns;
 * kv_watch_close() before kv_close()), or -errno. */
int kv_watch_open(struct kv *kv, const void *prefix, size_t plen, uint64_t from_rev,
		  struct kv_watch **out) __attribute__((warn_unused_result));
/* Wait up to timeout_ms for a prompt.  0 (re-read now; *rev, may be
 * NULL, is the newest revision known to have changed under the prefix,
 * or 0 when unknown), -ETIMEDOUT.  A prompt is consumed by the wait
 * that returns it. */
int kv_watch_wait(struct kv_watch *w, uint64_t timeout_ms, uint64_t *rev)
	__attribute__((warn_unused_result));
void kv_watch_close(struct kv_watch *w); /* NULL is a no-op */

/*
 * What the metastore is and who answers, for novactl status: one line
 * per member ("member URL: ok (leader)" / "member URL: unreachable ...")
 * appended to out.  0 when at least one member answers, else the error.
 */
int kv_status(struct kv *kv, struct nv_buf *out) __attribute__((warn_unused_result));

/* ---------------------------------------------------------------------
 * Backend side: kv.c dispatches here, validates sizes and runs the
 * meta.commit failpoint.
 */
enum kv_op_kind { KV_CMP_VER, KV_CMP_VAL, KV_PUT, KV_DEL };

struct kv_op {
	enum kv_op_kind kind;
	uint8_t *key;  /* owned by the txn */
	size_t klen;
	uint8_t *val;  /* owned by the txn; NULL for CMP_VER and DEL */
	size_t vlen;
	uint64_t ver;  /* CMP_VER */
	uint64_t lease; /* PUT: bound to this lease, or 0 */
};

struct kv_backend_ops {
	const char *scheme;
	void (*close)(void *be);
	int (*get)(void *be, const void *key, size_t klen, struct nv_buf *val,
		   uint64_t *ver);
	int (*floor)(void *be, const void *key, size_t klen, const void *lo,
		     size_t lolen, struct nv_buf *key_out, struct nv_buf *val_out,
		     uint64_t *ver);
	int (*range)(void *be, const void *start, size_t slen, const void *end,
		     size_t elen, size_t limit, bool reverse, kv_visit_fn fn,
		     void *arg);
	/* ops: compares first, then writes (kv.c orders them). */
	int (*commit)(void *be, const struct kv_op *ops, size_t nops, uint64_t *rev);
	/* Optional (NULL: not supported): kv_claim(), kv_integrity_check(),
	 * kv_quick_check(). */
	int (*claim)(void *be);
	int (*integrity_check)(void *be, kv_problem_fn problem, void *arg);
	int (*quick_check)(void *be, kv_problem_fn problem, void *arg);
	int (*lease_grant)(void *be, unsigned ttl_s, uint64_t *id);
	int (*lease_keepalive)(void *be, uint64_t id, unsigned *ttl_s);
	int (*lease_revoke)(void *be, uint64_t id);
	/* Start delivering prompts to w (kv_watch_fire()); stop: after it
	 * returns the backend never touches w again. */
	int (*watch_start)(void *be, struct kv_watch *w);
	void (*watch_stop)(void *be, struct kv_watch *w);
	int (*status)(void *be, struct nv_buf *out);
	/* Optional (NULL: nothing to change): kv_closing(). */
	void (*closing)(void *be);
};

/* For backends: a watch's prefix (borrowed until kv_watch_close()) and
 * start revision, and the one way to deliver a prompt (thread-safe; any
 * thread; never blocks).  The watch_start op may keep a pointer in the slot
 * kv_watch_be() returns. */
const uint8_t *kv_watch_prefix(const struct kv_watch *w, size_t *plen);
uint64_t kv_watch_from(const struct kv_watch *w);
void kv_watch_fire(struct kv_watch *w, uint64_t rev);
void **kv_watch_be(struct kv_watch *w);

/*
 * One URL scheme of kv_open().  Each backend defines its own (sqlite.h);
 * meta/schemes.c lists the backends compiled in, so kv.c knows none of
 * them and a new backend is one line there.
 */
struct kv_scheme {
	struct nv_url_scheme url; /* prefix, usage, path (src/base/urlscheme.h) */
	int (*open)(const char *arg, struct kv **out);
};

/* The schemes compiled in, NULL-terminated (meta/schemes.c). */
extern const struct kv_scheme *const kv_schemes[];

/* Wrap an opened backend (takes ownership).  0 or -ENOMEM (be closed). */
int kv_wrap(const struct kv_backend_ops *ops, void *be, const char *name,
	    struct kv **out) __attribute__((warn_unused_result));

/* Human name for logs; borrowed until kv_close(). */
const char *kv_name(const struct kv *kv);

#endif
