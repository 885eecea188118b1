/*
 * lease.c - leases, watches and status of the SQLite backend (see
 * meta/sqlite/internal.h, kv.h).
 *
 * For: giving one host the same lease and watch calls etcd gives many,
 * so engine code has one path.  A lease is a row kv_lease(id, ttl,
 * deadline, boot) whose deadline is CLOCK_MONOTONIC nanoseconds (shared
 * by every process of one boot, so novactl and the daemon agree); keys
 * bound to it have a row kv_lkey(k, lease).  A watch is a registration in
 * be->watches, fired after commits in this process.  Not for: watches
 * across processes (another process's commits are not seen: one host has
 * one daemon per metastore, novactl only reads), history (a watch from
 * an old revision fires at once: re-read).
 *
 * Invariants (numbers of meta/sqlite/internal.h): 5 (leases, kept by
 * sq_lease_bind() inside every commit and by sq_lease_sweep() before
 * reads and commits) and 6 (sq_watch_notify(), sq_watch_fire_all()).
 * Every transaction here runs under the writer lock, as a commit does.
 */
#include "config.h"
#include "meta/sqlite/internal.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define NS_PER_S 1000000000ull

/* Commit the open transaction when err is 0, else roll it back.  Returns
 * err, or the commit's error. */
static int txn_end(struct sq_be *be, int err)
{
	if (!err)
		err = sq_w_step(be, be->w.st[W_COMMIT], SQLITE_OK, "commit");
	if (err && !sqlite3_get_autocommit(be->w.db)) {
		int rc = sq_w_step(be, be->w.st[W_ROLLBACK], SQLITE_OK, "rollback");

		(void)rc; /* logged; err is the one to report */
	}
	return err;
}

/* Step a statement binding one integer.  0 or -errno. */
static int step_id(struct sq_be *be, enum w_stmt which, uint64_t id, const char *op)
{
	sqlite3_stmt *st = be->w.st[which];

	return sq_w_step(be, st, sqlite3_bind_int64(st, 1, (sqlite3_int64)id), op);
}

/* Inside a transaction: is lease id alive?  0 (*ttl set), -ENOLCK, -errno. */
static int lease_alive(struct sq_be *be, uint64_t id, unsigned *ttl)
{
	sqlite3_stmt *st = be->w.st[W_LEASE_GET];
	int rc = sqlite3_bind_int64(st, 1, (sqlite3_int64)id), err = -ENOLCK;

	sq_assert_writer_held(be);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const unsigned char *boot = sqlite3_column_text(st, 1);
		uint64_t deadline = (uint64_t)sqlite3_column_int64(st, 0);

		if (boot && !strcmp((const char *)boot, be->boot) &&
		    deadline > nv_now_mono_ns()) {
			*ttl = (unsigned)sqlite3_column_int64(st, 2);
			err = 0;
		}
	} else if (rc != SQLITE_DONE) {
		err = sqlite_to_errno(be->path, be->w.db, rc, "lease lookup");
	}
	sq_st_done(st);
	return err;
}

/* Inside a transaction: delete lease id, its keys and their bindings. */
static int lease_drop(struct sq_be *be, uint64_t id)
{
	int err = step_id(be, W_LEASE_KEYS, id, "delete lease keys");

	if (!err)
		err = step_id(be, W_LEASE_LKS, id, "delete lease bindings");
	if (!err)
		err = step_id(be, W_LEASE_DEL, id, "delete lease");
	return err;
}

/* Inside a transaction: invariant 1 for a lease's deletions. */
static int rev_bump(struct sq_be *be, uint64_t *next)
{
	uint64_t cur = 0;
	int err = sq_rev_get(be, &cur);

	if (!err)
		err = step_id(be, W_REV_SET, cur + 1, "store revision");
	*next = cur + 1;
	return err;
}

int sq_lease_due_load(struct sq_be *be)
{
	sqlite3_stmt *st = be->w.st[W_LEASE_MIN];
	int rc = sqlite3_step(st), err = 0;

	sq_assert_writer_held(be);
	if (rc == SQLITE_ROW) {
		bool any = sqlite3_column_int64(st, 0) > 0;

		be->leased = any;
		atomic_store(&be->lease_due,
			     any ? (uint64_t)sqlite3_column_int64(st, 1) : UINT64_MAX);
	} else {
		err = sqlite_to_errno(be->path, be->w.db, rc, "lease deadlines");
	}
	sq_st_done(st);
	/* A lease of another boot has a meaningless deadline: sweep now. */
	if (!err && be->leased)
		atomic_store(&be->lease_due, 0);
	return err;
}

/* Inside a transaction: one lease past due (or of another boot), or 0. */
static int lease_next_due(struct sq_be *be, uint64_t *id)
{
	sqlite3_stmt *st = be->w.st[W_LEASE_DUE];
	int rc = sqlite3_bind_int64(st, 1, (sqlite3_int64)nv_now_mono_ns()), err = 0;

	*id = 0;
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(st, 2, be->boot, -1, SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*id = (uint64_t)sqlite3_column_int64(st, 0);
	else if (rc != SQLITE_DONE)
		err = sqlite_to_errno(be->path, be->w.db, rc, "leases due");
	sq_st_done(st);
	return err;
}

int sq_lease_sweep(struct sq_be *be)
{
	uint64_t id = 0, next = 0;
	unsigned n = 0;
	int err;

	sq_assert_writer_held(be);
	err = sq_w_step(be, be->w.st[W_BEGIN], SQLITE_OK, "begin");
	if (err)
		return err;
	while (!err && !(err = lease_next_due(be, &id)) && id) {
		err = lease_drop(be, id);
		n++;
		nv_log(NV_DEBUG, NV_SUB_META, "sqlite %s: lease %" PRIx64 " expired",
		       be->path, id);
	}
	if (!err && n)
		err = rev_bump(be, &next);
	err = txn_end(be, err);
	if (!err)
		err = sq_lease_due_load(be);
	if (!err && n) {
		atomic_store(&be->rev, next);
		sq_watch_fire_all(be, next);
	}
	return err;
}

int sq_lease_sweep_due(struct sq_be *be)
{
	int err = 0;

	if (atomic_load(&be->lease_due) > nv_now_mono_ns())
		return 0;
	sq_writer_lock(be);
	if (atomic_load(&be->lease_due) <= nv_now_mono_ns())
		err = sq_lease_sweep(be);
	sq_writer_unlock(be);
	return err;
}

/* The back-off of a read's failed sweep: the first retry after
 * SWEEP_RETRY_MIN_NS, doubling to SWEEP_RETRY_MAX_NS.  Without it every
 * read on a full disk tried a write transaction (and logged it). */
#define SWEEP_RETRY_MIN_NS (100 * NV_NS_PER_MS)
#define SWEEP_RETRY_MAX_NS (5 * NV_NS_PER_S)

int sq_read_sweep(struct sq_be *be)
{
	uint64_t now = nv_now_mono_ns(), wait = SWEEP_RETRY_MIN_NS;
	unsigned fails;
	int err;

	if (atomic_load(&be->lease_due) > now)
		return 0;
	if (atomic_load(&be->sweep_retry_ns) > now)
		return R_LIVE; /* failed lately: hide, as after a failure */
	err = NV_FP("meta.sweep");
	if (!err)
		err = sq_lease_sweep_due(be);
	if (!err) {
		fails = atomic_exchange(&be->sweep_fails, 0);
		if (fails)
			nv_log(NV_INFO, NV_SUB_META, "sqlite %s: sweeping expired leases works "
			       "again, after %u failed tries", be->path, fails);
		return 0;
	}
	fails = atomic_fetch_add(&be->sweep_fails, 1) + 1;
	for (unsigned i = 1; i < fails && wait < SWEEP_RETRY_MAX_NS; i++)
		wait *= 2;
	if (wait > SWEEP_RETRY_MAX_NS)
		wait = SWEEP_RETRY_MAX_NS;
	atomic_store(&be->sweep_retry_ns, now + wait);
	if (fails == 1)
		nv_log(NV_WARN, NV_SUB_META, "sqlite %s: sweeping expired leases failed (%s); "
		       "reads hide their keys until a sweep succeeds (retried after %llu ms, "
		       "then less often, up to every %llu s)", be->path, strerror(-err),
		       (unsigned long long)(wait / NV_NS_PER_MS),
		       (unsigned long long)(SWEEP_RETRY_MAX_NS / NV_NS_PER_S));
	else
		nv_log(NV_DEBUG, NV_SUB_META, "sqlite %s: sweeping expired leases failed "
		       "again (%s, %u in a row); next try in %llu ms", be->path,
		       strerror(-err), fails, (unsigned long long)(wait / NV_NS_PER_MS));
	return R_LIVE;
}

int sq_live_bind(struct sq_be *be, sqlite3_stmt *st)
{
	int rc = sqlite3_bind_int64(st, 8, (sqlite3_int64)nv_now_mono_ns());

	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(st, 9, be->boot, -1, SQLITE_STATIC);
	return rc;
}

int sq_lease_bind(struct sq_be *be, const struct kv_op *op)
{
	sqlite3_stmt *st;
	unsigned ttl;
	int rc, err;

	if (op->kind == KV_PUT && op->lease) {
		err = lease_alive(be, op->lease, &ttl);
		if (err)
			return err;
		st = be->w.st[W_LK_PUT];
		rc = sq_bind_blob(st, 1, op->key, op->klen);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(st, 2, (sqlite3_int64)op->lease);
		return sq_w_step(be, st, rc, "bind key to lease");
	}
	st = be->w.st[W_LK_DEL];
	return sq_w_step(be, st, sq_bind_blob(st, 1, op->key, op->klen), "unbind key");
}

/* Inside a transaction: write lease id with a fresh deadline. */
static int lease_put(struct sq_be *be, uint64_t id, unsigned ttl)
{
	sqlite3_stmt *st = be->w.st[W_LEASE_PUT];
	int rc = sqlite3_bind_int64(st, 1, (sqlite3_int64)id);

	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 2, ttl);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 3, (sqlite3_int64)(nv_now_mono_ns() + ttl * NS_PER_S));
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(st, 4, be->boot, -1, SQLITE_STATIC);
	return sq_w_step(be, st, rc, "write lease");
}

int sq_lease_grant(void *vbe, unsigned ttl_s, uint64_t *id)
{
	struct sq_be *be = vbe;
	uint64_t r = 0;
	int err;

	/* A random 62-bit id, never 0, so ids of earlier processes (and of
	 * novactl) do not collide in practice; INSERT OR REPLACE of a live
	 * id would be a collision of 2^-62. */
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = nv_now_mono_ns() ^ ((uint64_t)(uintptr_t)be << 17);
	r = (r >> 2) | 1;
	sq_writer_lock(be);
	err = sq_w_step(be, be->w.st[W_BEGIN], SQLITE_OK, "begin");
	if (!err) {
		err = txn_end(be, lease_put(be, r, ttl_s));
		if (!err)
			err = sq_lease_due_load(be);
	}
	sq_writer_unlock(be);
	if (!err)
		*id = r;
	return err;
}

int sq_lease_keepalive(void *vbe, uint64_t id, unsigned *ttl_s)
{
	struct sq_be *be = vbe;
	unsigned ttl = 0;
	int err;

	sq_writer_lock(be);
	err = sq_w_step(be, be->w.st[W_BEGIN], SQLITE_OK, "begin");
	if (!err) {
		err = lease_alive(be, id, &ttl);
		if (!err)
			err = lease_put(be, id, ttl);
		err = txn_end(be, err);
		if (!err)
			err = sq_lease_due_load(be);
	}
	sq_writer_unlock(be);
	if (!err)
		*ttl_s = ttl;
	return err;
}

int sq_lease_revoke(void *vbe, uint64_t id)
{
	struct sq_be *be = vbe;
	uint64_t next = 0;
	unsigned ttl;
	int err;

	sq_writer_lock(be);
	err = sq_w_step(be, be->w.st[W_BEGIN], SQLITE_OK, "begin");
	if (!err) {
		err = lease_alive(be, id, &ttl);
		if (!err)
			err = lease_drop(be, id);
		if (!err)
			err = rev_bump(be, &next);
		err = txn_end(be, err);
		if (!err)
			err = sq_lease_due_load(be);
	}
	if (!err) {
		atomic_store(&be->rev, next);
		sq_watch_fire_all(be, next);
	}
	sq_writer_unlock(be);
	return err;
}

/* ----------------------------------------------------------------------
 * Watches (invariant 6)
 */

int sq_watch_start(void *vbe, struct kv_watch *w)
{
	struct sq_be *be = vbe;
	struct sq_watch *sw = calloc(1, sizeof(*sw));
	uint64_t from = kv_watch_from(w), rev;

	if (!sw)
		return -ENOMEM;
	sw->w = w;
	*kv_watch_be(w) = sw;
	pthread_mutex_lock(&be->watch_lock);
	sw->next = be->watches;
	be->watches = sw;
	/* No history here: a watch from a revision already committed may
	 * have missed changes, so it is prompted to re-read at once. */
	rev = atomic_load(&be->rev);
	if (from && from <= rev)
		kv_watch_fire(w, rev);
	pthread_mutex_unlock(&be->watch_lock);
	return 0;
}

void sq_watch_stop(void *vbe, struct kv_watch *w)
{
	struct sq_be *be = vbe;
	struct sq_watch **pp, *sw = *kv_watch_be(w);

	pthread_mutex_lock(&be->watch_lock);
	for (pp = &be->watches; *pp; pp = &(*pp)->next)
		if (*pp == sw) {
			*pp = sw->next;
			break;
		}
	pthread_mutex_unlock(&be->watch_lock);
	free(sw);
}

void sq_watch_notify(struct sq_be *be, const struct kv_op *ops, size_t nops, uint64_t rev)
{
	pthread_mutex_lock(&be->watch_lock);
	for (struct sq_watch *sw = be->watches; sw; sw = sw->next) {
		size_t plen;
		const uint8_t *p = kv_watch_prefix(sw->w, &plen);

		for (size_t i = 0; i < nops; i++) {
			if ((ops[i].kind == KV_PUT || ops[i].kind == KV_DEL) &&
			    ops[i].klen >= plen && !memcmp(ops[i].key, p, plen)) {
				kv_watch_fire(sw->w, rev);
				break;
			}
		}
	}
	pthread_mutex_unlock(&be->watch_lock);
}

void sq_watch_fire_all(struct sq_be *be, uint64_t rev)
{
	pthread_mutex_lock(&be->watch_lock);
	for (struct sq_watch *sw = be->watches; sw; sw = sw->next)
		kv_watch_fire(sw->w, rev);
	pthread_mutex_unlock(&be->watch_lock);
}

int sq_status(void *vbe, struct nv_buf *out)
{
	struct sq_be *be = vbe;

	return nv_buf_printf(out, "metastore sqlite:%s (embedded, one host): revision %" PRIu64
			     "\n", be->path, (uint64_t)atomic_load(&be->rev));
}
