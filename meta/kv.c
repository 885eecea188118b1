/*
 * kv.c - the dispatch layer of the metastore interface (see kv.h).
 *
 * For: choosing a backend from a metastore URL (through the scheme table
 * of meta/schemes.c), owning the backend behind a struct kv, building
 * transactions, enforcing the hard size limits and running the
 * meta.commit failpoint before every backend commit; the backend-neutral
 * half of leases and watches (argument checks, the watch's prompt and its
 * wait).  Not for: storage
 * (meta/sqlite.c and later backends), knowing which backends exist
 * (meta/schemes.c), key layout (meta/tuple.c, meta/keys.c).
 *
 * Invariants:
 *  1. A backend never sees a key longer than KV_KEY_MAX or a value longer
 *     than KV_VAL_MAX in a write or compare; the check is made here, once,
 *     for every backend.
 *  2. The backend's commit gets the compares first, then the writes, each
 *     group in the order the caller added them.
 *  3. A transaction whose builder failed is poisoned: it keeps the first
 *     error, accepts nothing more, and its commit returns that error
 *     without reaching the backend.
 *  4. A transaction reaches the backend at most once.
 *  5. NV_FP("meta.commit") runs before every backend commit (transactions
 *     and the one-write conveniences); when it returns an error nothing
 *     is committed.
 *  6. A lease TTL reaching a backend lies in [KV_LEASE_TTL_MIN,
 *     KV_LEASE_TTL_MAX]; lease id 0 never reaches one (-ENOLCK).
 *  7. A watch's prompt is set only by kv_watch_fire() and cleared only by
 *     the kv_watch_wait() that reports it, both under the watch's lock.
 *
 * Threads: struct kv is immutable after kv_wrap() returns except its
 * closing flag (an atomic, set once by kv_closing()), so the calls here
 * need no lock; the backend is thread-safe (kv.h invariant 4).  A
 * struct kv_txn belongs to one thread at a time.
 */
#include "config.h"
#include "meta/kv.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <assert.h>
#include <pthread.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A range or floor bound may be one byte longer than a key: the exclusive
 * end of a maximal prefix is the prefix + 0xFF (nv_tup_prefix_end()).
 */
#define KV_BOUND_MAX (KV_KEY_MAX + 1)

/* Immutable after kv_wrap() but for closing; shared by every thread. */
struct kv {
	const struct kv_backend_ops *ops; /* borrowed: static tables */
	void *be;                         /* owned; ops->close() */
	char *name;                       /* owned */
	atomic_bool closing;              /* kv_closing() was called */
};

/*
 * Owned by the thread building it.  ops[] holds compares and writes in
 * the order they were added; every key and val in it is owned here.
 */
struct kv_txn {
	struct kv_op *ops;
	size_t nops, cap;
	size_t nwrites;  /* KV_PUT and KV_DEL entries in ops[] */
	bool mixed;      /* a compare was added after a write */
	bool committed;  /* handed to kv_txn_commit() once */
	int err;         /* first builder error (poison), or 0 */
};

int kv_wrap(const struct kv_backend_ops *ops, void *be, const char *name,
	    struct kv **out)
{
	struct kv *kv = calloc(1, sizeof(*kv));

	if (kv)
		kv->name = strdup(name ? name : ops->scheme);
	if (!kv || !kv->name) {
		free(kv);
		ops->close(be);
		return -ENOMEM;
	}
	kv->ops = ops;
	kv->be = be;
	*out = kv;
	return 0;
}

/* The scheme of url and the argument its open takes, or NULL. */
static const struct nv_url_scheme *scheme_at(size_t i)
{
	return kv_schemes[i] ? &kv_schemes[i]->url : NULL;
}

int kv_open(const char *url, struct kv **out)
{
	const char *arg = NULL;
	char want[256];
	int i = nv_url_scheme_find(scheme_at, url, &arg);

	if (i >= 0)
		return kv_schemes[i]->open(arg, out);
	nv_log(NV_ERR, NV_SUB_META, "metastore URL '%s': expected %s",
	       url ? url : "(null)", nv_url_scheme_usages(scheme_at, want, sizeof(want)));
	return -EINVAL;
}

void kv_close(struct kv *kv)
{
	if (!kv)
		return;
	kv->ops->close(kv->be);
	free(kv->name);
	free(kv);
}

void kv_closing(struct kv *kv)
{
	if (!kv || atomic_exchange(&kv->closing, true))
		return;
	if (kv->ops->closing)
		kv->ops->closing(kv->be);
}

bool kv_is_closing(struct kv *kv)
{
	return atomic_load(&kv->closing);
}

const char *kv_name(const struct kv *kv)
{
	return kv->name;
}

int kv_claim(struct kv *kv)
{
	return kv->ops->claim ? kv->ops->claim(kv->be) : 0;
}

bool kv_shared(const struct kv *kv)
{
	return kv->ops->claim == NULL;
}

int kv_integrity_check(struct kv *kv, kv_problem_fn problem, void *arg)
{
	if (!kv->ops->integrity_check)
		return -ENOTSUP;
	return kv->ops->integrity_check(kv->be, problem, arg);
}

int kv_quick_check(struct kv *kv, kv_problem_fn problem, void *arg)
{
	if (!kv->ops->quick_check)
		return -ENOTSUP;
	return kv->ops->quick_check(kv->be, problem, arg);
}

int kv_get(struct kv *kv, const void *key, size_t klen, struct nv_buf *val,
	   uint64_t *ver)
{
	if (klen > KV_KEY_MAX)
		return -E2BIG;
	return kv->ops->get(kv->be, key, klen, val, ver);
}

int kv_floor(struct kv *kv, const void *key, size_t klen, const void *lo,
	     size_t lolen, struct nv_buf *key_out, struct nv_buf *val_out,
	     uint64_t *ver)
{
	if (klen > KV_BOUND_MAX || lolen > KV_BOUND_MAX)
		return -E2BIG;
	return kv->ops->floor(kv->be, key, klen, lo, lolen, key_out, val_out, ver);
}

int kv_range(struct kv *kv, const void *start, size_t slen, const void *end,
	     size_t elen, size_t limit, bool reverse, kv_visit_fn fn, void *arg)
{
	if (!fn)
		return -EINVAL;
	if (slen > KV_BOUND_MAX || elen > KV_BOUND_MAX)
		return -E2BIG;
	return kv->ops->range(kv->be, start, slen, end, elen, limit, reverse, fn,
			      arg);
}

/* ----------------------------------------------------------------------
 * Transactions
 */

struct kv_txn *kv_txn_new(void)
{
	return calloc(1, sizeof(struct kv_txn));
}

void kv_txn_free(struct kv_txn *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nops; i++) {
		free(t->ops[i].key);
		free(t->ops[i].val);
	}
	free(t->ops);
	free(t);
}

size_t kv_txn_nwrites(const struct kv_txn *t)
{
	return t->nwrites;
}

/* Copy n bytes into a fresh allocation of at least one byte, so that a
 * zero-length key or value is still a non-NULL pointer.  NULL on ENOMEM. */
static uint8_t *dup_bytes(const void *p, size_t n)
{
	uint8_t *d = malloc(n ? n : 1);

	if (d && n)
		memcpy(d, p, n);
	return d;
}

/* Record err as the transaction's poison (the first error wins). */
static int poison(struct kv_txn *t, int err)
{
	if (!t->err)
		t->err = err;
	return err;
}

/*
 * Append one op with owned copies of key and (when has_val) val.  0, or
 * the error that now poisons t.
 */
static int txn_add(struct kv_txn *t, enum kv_op_kind kind, const void *key,
		   size_t klen, bool has_val, const void *val, size_t vlen,
		   uint64_t ver, uint64_t lease)
{
	bool is_write = kind == KV_PUT || kind == KV_DEL;
	struct kv_op *op;

	if (t->err)
		return t->err;
	if (t->committed)
		return poison(t, -EINVAL);
	if (klen > KV_KEY_MAX || (has_val && vlen > KV_VAL_MAX))
		return poison(t, -E2BIG);
	if (t->nops == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 8;
		struct kv_op *n;

		if (ncap > SIZE_MAX / sizeof(*n))
			return poison(t, -ENOMEM);
		n = realloc(t->ops, ncap * sizeof(*n));
		if (!n)
			return poison(t, -ENOMEM);
		t->ops = n;
		t->cap = ncap;
	}
	op = &t->ops[t->nops];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->klen = klen;
	op->ver = ver;
	op->lease = lease;
	op->key = dup_bytes(key, klen);
	if (!op->key)
		return poison(t, -ENOMEM);
	if (has_val) {
		op->vlen = vlen;
		op->val = dup_bytes(val, vlen);
		if (!op->val) {
			free(op->key);
			return poison(t, -ENOMEM);
		}
	}
	t->nops++;
	if (is_write)
		t->nwrites++;
	else if (t->nwrites)
		t->mixed = true;
	return 0;
}

int kv_txn_cmp_ver(struct kv_txn *t, const void *key, size_t klen, uint64_t ver)
{
	return txn_add(t, KV_CMP_VER, key, klen, false, NULL, 0, ver, 0);
}

int kv_txn_cmp_val(struct kv_txn *t, const void *key, size_t klen,
		   const void *val, size_t vlen)
{
	return txn_add(t, KV_CMP_VAL, key, klen, true, val, vlen, 0, 0);
}

int kv_txn_put(struct kv_txn *t, const void *key, size_t klen, const void *val,
	       size_t vlen)
{
	return txn_add(t, KV_PUT, key, klen, true, val, vlen, 0, 0);
}

int kv_txn_put_lease(struct kv_txn *t, const void *key, size_t klen, const void *val,
		     size_t vlen, uint64_t lease)
{
	if (!lease)
		return poison(t, -EINVAL);
	return txn_add(t, KV_PUT, key, klen, true, val, vlen, 0, lease);
}

int kv_txn_del(struct kv_txn *t, const void *key, size_t klen)
{
	return txn_add(t, KV_DEL, key, klen, false, NULL, 0, 0, 0);
}

/* The one way into a backend's commit (invariant 5). */
static int backend_commit(struct kv *kv, const struct kv_op *ops, size_t nops,
			  uint64_t *rev)
{
	int rc = NV_FP("meta.commit");

	if (rc) {
		nv_log(NV_DEBUG, NV_SUB_META, "%s: commit failed by failpoint (%d)",
		       kv->name, rc);
		return rc;
	}
	return kv->ops->commit(kv->be, ops, nops, rev);
}

int kv_txn_commit(struct kv *kv, struct kv_txn *t, uint64_t *rev)
{
	struct kv_op *sorted;
	size_t n = 0;
	int rc;

	if (t->err)
		return t->err;
	if (t->committed)
		return -EINVAL;
	t->committed = true;
	if (t->nops > t->nwrites && t->nops > KV_TXN_SAFE_OPS) {
		/* A CAS must fit every backend whole (kv.h, Splitting): refused
		 * here on every backend, so a caller that builds one too large
		 * fails its tests on SQLite too, not first on etcd. */
		nv_log(NV_ERR, NV_SUB_META, "%s: a transaction with compares has %zu operations, "
		       "more than the %d every backend takes whole", kv->name, t->nops,
		       KV_TXN_SAFE_OPS);
		return -E2BIG;
	}
	if (!t->mixed)
		return backend_commit(kv, t->ops, t->nops, rev);

	/* Invariant 2: a shallow copy with compares first; the keys and
	 * values stay owned by t. */
	sorted = malloc(t->nops * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	for (size_t i = 0; i < t->nops; i++)
		if (t->ops[i].kind == KV_CMP_VER || t->ops[i].kind == KV_CMP_VAL)
			sorted[n++] = t->ops[i];
	for (size_t i = 0; i < t->nops; i++)
		if (t->ops[i].kind == KV_PUT || t->ops[i].kind == KV_DEL)
			sorted[n++] = t->ops[i];
	rc = backend_commit(kv, sorted, n, rev);
	free(sorted);
	return rc;
}

int kv_cas_run(struct kv *kv, const struct kv_cas *how, void *arg, uint64_t *rev)
{
	int rc = -ECANCELED;

	assert(how->attempts > 0);
	for (int i = 0; i < how->attempts; i++) {
		struct kv_txn *t = kv_txn_new();

		if (!t)
			return -ENOMEM;
		rc = how->build(arg, kv, t);
		if (rc) {
			kv_txn_free(t);
			return rc == KV_CAS_DONE ? 0 : rc;
		}
		rc = kv_txn_commit(kv, t, rev);
		kv_txn_free(t);
		if (rc == -ECANCELED && how->cancelled)
			rc = how->cancelled(arg, kv);
		if (rc != -ECANCELED && !(rc == -EAGAIN && how->retry_eagain))
			break;
	}
	return rc;
}

int kv_put(struct kv *kv, const void *key, size_t klen, const void *val,
	   size_t vlen)
{
	/* One write needs no copies: the op borrows the caller's bytes for
	 * the duration of the commit (the backend only reads them). */
	struct kv_op op = {
		.kind = KV_PUT,
		.key = (uint8_t *)(key ? key : ""),
		.klen = klen,
		.val = (uint8_t *)(val ? val : ""),
		.vlen = vlen,
	};

	if (klen > KV_KEY_MAX || vlen > KV_VAL_MAX)
		return -E2BIG;
	return backend_commit(kv, &op, 1, NULL);
}

int kv_del(struct kv *kv, const void *key, size_t klen)
{
	struct kv_op op = {
		.kind = KV_DEL,
		.key = (uint8_t *)(key ? key : ""),
		.klen = klen,
	};

	if (klen > KV_KEY_MAX)
		return -E2BIG;
	return backend_commit(kv, &op, 1, NULL);
}

/* ----------------------------------------------------------------------
 * Leases, watches, status: checks here, the work in the backend.
 */

int kv_lease_grant(struct kv *kv, unsigned ttl_s, uint64_t *id)
{
	if (ttl_s > KV_LEASE_TTL_MAX)
		return -EINVAL;
	if (ttl_s < KV_LEASE_TTL_MIN)
		ttl_s = KV_LEASE_TTL_MIN;
	return kv->ops->lease_grant(kv->be, ttl_s, id);
}

int kv_lease_keepalive(struct kv *kv, uint64_t id, unsigned *ttl_s)
{
	unsigned dummy;

	if (!id)
		return -ENOLCK;
	return kv->ops->lease_keepalive(kv->be, id, ttl_s ? ttl_s : &dummy);
}

int kv_lease_revoke(struct kv *kv, uint64_t id)
{
	if (!id)
		return -ENOLCK;
	return kv->ops->lease_revoke(kv->be, id);
}

/*
 * A watch: the prompt flag and the newest revision are set by the
 * backend's thread (kv_watch_fire()) and consumed by the owner
 * (kv_watch_wait()).  prefix, from_rev and kv are immutable after
 * kv_watch_open(); be is the backend's slot, touched only by the
 * backend's watch_start and watch_stop ops.
 */
struct kv_watch {
	struct kv *kv;
	uint8_t *prefix;
	size_t plen;
	uint64_t from_rev;
	void *be;
	pthread_mutex_t lock;
	pthread_cond_t cond;  /* signalled by kv_watch_fire() */
	bool fired;           /* protected by lock */
	uint64_t rev;         /* protected by lock: newest fired revision */
};

int kv_watch_open(struct kv *kv, const void *prefix, size_t plen, uint64_t from_rev,
		  struct kv_watch **out)
{
	struct kv_watch *w;
	int rc;

	if (plen > KV_KEY_MAX)
		return -E2BIG;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->prefix = dup_bytes(prefix, plen);
	if (!w->prefix) {
		free(w);
		return -ENOMEM;
	}
	w->kv = kv;
	w->plen = plen;
	w->from_rev = from_rev;
	pthread_mutex_init(&w->lock, NULL);
	rc = nv_cond_init_mono(&w->cond);
	if (!rc)
		rc = kv->ops->watch_start(kv->be, w);
	if (rc) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		free(w->prefix);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int kv_watch_wait(struct kv_watch *w, uint64_t timeout_ms, uint64_t *rev)
{
	struct timespec dl = nv_mono_deadline(timeout_ms * 1000000ull);
	int rc = 0;

	pthread_mutex_lock(&w->lock);
	while (!w->fired && rc == 0)
		rc = pthread_cond_timedwait(&w->cond, &w->lock, &dl);
	if (w->fired) {
		w->fired = false;
		if (rev)
			*rev = w->rev;
		rc = 0;
	} else {
		rc = -ETIMEDOUT;
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

void kv_watch_close(struct kv_watch *w)
{
	if (!w)
		return;
	w->kv->ops->watch_stop(w->kv->be, w);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w->prefix);
	free(w);
}

const uint8_t *kv_watch_prefix(const struct kv_watch *w, size_t *plen)
{
	*plen = w->plen;
	return w->prefix;
}

uint64_t kv_watch_from(const struct kv_watch *w)
{
	return w->from_rev;
}

void **kv_watch_be(struct kv_watch *w)
{
	return &w->be;
}

void kv_watch_fire(struct kv_watch *w, uint64_t rev)
{
	pthread_mutex_lock(&w->lock);
	w->fired = true;
	if (rev > w->rev)
		w->rev = rev;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int kv_status(struct kv *kv, struct nv_buf *out)
{
	return kv->ops->status(kv->be, out);
}
