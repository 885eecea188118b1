/*
 * sqlite.c - the SQLite metastore backend (see sqlite.h, kv.h).
 *
 * For: the embedded default metastore of one star: a single database
 * file on local disk holding every key of kv.h.  Not for: sharing a
 * metastore between hosts (that is the remote backend), bulk data, or
 * any knowledge of what the keys mean.
 *
 * Schema:
 *   kv(k BLOB PRIMARY KEY, v BLOB NOT NULL, ver INTEGER NOT NULL)
 *       WITHOUT ROWID                      -- one row per live key
 *   kv_rev(id INTEGER PRIMARY KEY CHECK (id = 0), rev INTEGER NOT NULL)
 *                                          -- one row: current revision
 * Keys and values are always bound as BLOBs, whose default collation is
 * memcmp with the shorter blob first on a common prefix: exactly kv.h
 * invariant 3, so ORDER BY k and k < ? need nothing more.
 *
 * Connections: one writer connection behind be->wlock runs every commit
 * as BEGIN IMMEDIATE ... COMMIT; SQ_READERS reader connections (query_only)
 * serve get, floor and range, handed out from a free list under be->rlock
 * with a condition variable for waiters.  Every statement is prepared
 * once per connection (SQLITE_PREPARE_PERSISTENT) and reset right after
 * use, so no read transaction outlives its call.  Connections are opened
 * with SQLITE_OPEN_NOMUTEX (SQLite's multi-thread mode): our locks
 * guarantee that one thread at a time uses a connection.  We do not set
 * the threading mode with sqlite3_config(): it is process-wide and would
 * change it for every other SQLite user in the process; we only check at
 * open that the library was built threadsafe.  The one global setting we
 * make is turning memory statistics off (sqlite_global_init()).
 *
 * Durability: journal_mode=WAL with synchronous=FULL, so the WAL is
 * fsynced before COMMIT returns: a commit that returned 0 survives a
 * power cut (kv.h invariant 1).  WAL also lets readers run beside the
 * writer; a reader sees the last commit that finished before its
 * statement started (kv.h invariant 2).  busy_timeout (SQ_BUSY_MS)
 * covers other processes (novactl) on the same file.
 *
 * Invariants: meta/sqlite/internal.h (1-6, for both files).
 */
#include "config.h"
#include "meta/sqlite.h"
#include "meta/sqlite/internal.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* How long a connection waits for a lock held by another connection or
 * process before the call fails with -EBUSY.  Five seconds: far longer
 * than any commit of ours, short enough that a stuck novactl shows up as
 * an error instead of a hang. */
#define SQ_BUSY_MS 5000

static const char *const w_sql[W_COUNT] = {
	[W_BEGIN] = "BEGIN IMMEDIATE",
	[W_COMMIT] = "COMMIT",
	[W_ROLLBACK] = "ROLLBACK",
	[W_LOOKUP] = "SELECT v, ver FROM kv WHERE k = ?1",
	[W_PUT] = ("INSERT INTO kv(k, v, ver) VALUES (?1, ?2, ?3) "
		   "ON CONFLICT(k) DO UPDATE SET v = excluded.v, ver = excluded.ver"),
	[W_DEL] = "DELETE FROM kv WHERE k = ?1",
	[W_REV_GET] = "SELECT rev FROM kv_rev WHERE id = 0",
	[W_REV_SET] = "UPDATE kv_rev SET rev = ?1 WHERE id = 0",
	[W_LK_PUT] = "INSERT OR REPLACE INTO kv_lkey(k, lease) VALUES (?1, ?2)",
	[W_LK_DEL] = "DELETE FROM kv_lkey WHERE k = ?1",
	[W_LEASE_GET] = "SELECT deadline, boot, ttl FROM kv_lease WHERE id = ?1",
	[W_LEASE_PUT] = ("INSERT OR REPLACE INTO kv_lease(id, ttl, deadline, boot) "
			 "VALUES (?1, ?2, ?3, ?4)"),
	[W_LEASE_DEL] = "DELETE FROM kv_lease WHERE id = ?1",
	[W_LEASE_KEYS] = "DELETE FROM kv WHERE k IN (SELECT k FROM kv_lkey WHERE lease = ?1)",
	[W_LEASE_LKS] = "DELETE FROM kv_lkey WHERE lease = ?1",
	[W_LEASE_DUE] = "SELECT id FROM kv_lease WHERE deadline <= ?1 OR boot <> ?2 LIMIT 1",
	[W_LEASE_MIN] = "SELECT count(*), min(deadline) FROM kv_lease",
};

/* A key bound to a lease past due (meta/sqlite/internal.h invariant 5). */
#define SQ_DEAD                                                                  \
	"EXISTS (SELECT 1 FROM kv_lkey l JOIN kv_lease e ON e.id = l.lease "      \
	"WHERE l.k = kv.k AND (e.deadline <= ?8 OR e.boot <> ?9))"
#define SQ_GET "SELECT v, ver FROM kv WHERE k = ?1"
#define SQ_FLOOR "SELECT k, v, ver FROM kv WHERE k <= ?1 AND k >= ?2"
#define SQ_RANGE "SELECT k, v, ver FROM kv WHERE k >= ?1 AND k < ?2"

static const char *const r_sql[R_COUNT] = {
	[R_GET] = SQ_GET,
	[R_FLOOR] = SQ_FLOOR " ORDER BY k DESC LIMIT 1",
	/* LIMIT -1: no limit. */
	[R_RANGE_ASC] = SQ_RANGE " ORDER BY k ASC LIMIT ?3",
	[R_RANGE_DESC] = SQ_RANGE " ORDER BY k DESC LIMIT ?3",
	[R_GET_LIVE] = SQ_GET " AND NOT " SQ_DEAD,
	[R_FLOOR_LIVE] = SQ_FLOOR " AND NOT " SQ_DEAD " ORDER BY k DESC LIMIT 1",
	[R_RANGE_ASC_LIVE] = SQ_RANGE " AND NOT " SQ_DEAD " ORDER BY k ASC LIMIT ?3",
	[R_RANGE_DESC_LIVE] = SQ_RANGE " AND NOT " SQ_DEAD " ORDER BY k DESC LIMIT ?3",
};

/* Created idempotently by the writer at every open, in one transaction.
 * kv_lease and kv_lkey (leases, invariant 5) are new in issue 14; a
 * database made before them gains them here. */
static const char schema_sql[] =
	"BEGIN IMMEDIATE;"
	"CREATE TABLE IF NOT EXISTS kv(k BLOB PRIMARY KEY, v BLOB NOT NULL,"
	" ver INTEGER NOT NULL) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS kv_rev(id INTEGER PRIMARY KEY"
	" CHECK (id = 0), rev INTEGER NOT NULL);"
	"INSERT OR IGNORE INTO kv_rev(id, rev) VALUES (0, 0);"
	"CREATE TABLE IF NOT EXISTS kv_lease(id INTEGER PRIMARY KEY, ttl INTEGER NOT NULL,"
	" deadline INTEGER NOT NULL, boot TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS kv_lkey(k BLOB PRIMARY KEY, lease INTEGER NOT NULL)"
	" WITHOUT ROWID;"
	"CREATE INDEX IF NOT EXISTS kv_lkey_lease ON kv_lkey(lease);"
	"COMMIT;";

/*
 * The one translation of SQLite result codes into errno (STYLE: one
 * *_to_errno per foreign error space).  Logs the failure once, naming the
 * database file, the operation and SQLite's message (rate-limited for a
 * full disk, where every commit fails).  db may be NULL
 * (sqlite3_open_v2 out of memory).  Returns the negative errno.
 */
int sqlite_to_errno(const char *path, sqlite3 *db, int rc, const char *op)
{
	static struct nv_ratelimit full_rl;
	const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
	const char *hint = "";
	enum nv_level level = NV_ERR;
	int err, sys;

	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		err = -EBUSY;
		level = NV_WARN;
		break;
	case SQLITE_FULL:
		err = -ENOSPC;
		break;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		hint = " - the database file is corrupt or not a database";
		err = -EIO;
		break;
	case SQLITE_NOMEM:
		err = -ENOMEM;
		break;
	case SQLITE_READONLY:
		err = -EROFS;
		break;
	case SQLITE_CANTOPEN:
		sys = db ? sqlite3_system_errno(db) : 0;
		err = (sys == ENOENT || sys == ENOTDIR) ? -ENOENT : -EACCES;
		break;
	case SQLITE_IOERR:
	default:
		err = -EIO;
		break;
	}
	if (err == -ENOSPC) /* every commit fails on a full disk: at the callers' rate */
		nv_log_ratelimited(&full_rl, level, NV_SUB_META, "sqlite %s: %s: %s (rc %d)%s",
				   path, op, msg, rc, hint);
	else
		nv_log(level, NV_SUB_META, "sqlite %s: %s: %s (rc %d)%s", path, op, msg,
		       rc, hint);
	return err;
}

void sq_writer_lock(struct sq_be *be)
{
	pthread_mutex_lock(&be->wlock);
#ifndef NDEBUG
	be->wowner = pthread_self();
	be->wheld = true;
#endif
}

void sq_writer_unlock(struct sq_be *be)
{
#ifndef NDEBUG
	be->wheld = false;
#endif
	pthread_mutex_unlock(&be->wlock);
}

void sq_assert_writer_held(const struct sq_be *be)
{
#ifndef NDEBUG
	assert(be->wheld && pthread_equal(be->wowner, pthread_self()));
#endif
	(void)be;
}

/* Take a reader connection, waiting while all are in use.  Borrowed until
 * reader_put(). */
static struct sq_conn *reader_take(struct sq_be *be)
{
	struct sq_conn *c;

	pthread_mutex_lock(&be->rlock);
	while (be->nfree == 0)
		pthread_cond_wait(&be->rcond, &be->rlock);
	c = &be->r[be->rfree[--be->nfree]];
	pthread_mutex_unlock(&be->rlock);
	return c;
}

static void reader_put(struct sq_be *be, struct sq_conn *c)
{
	pthread_mutex_lock(&be->rlock);
	assert(be->nfree < SQ_READERS);
	be->rfree[be->nfree++] = (int)(c - be->r);
	pthread_cond_signal(&be->rcond);
	pthread_mutex_unlock(&be->rlock);
}

/* Invariant 4: ready a statement for its next use.  The return value of
 * sqlite3_reset() repeats the last step's error, already handled. */
void sq_st_done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Bind n bytes as a BLOB.  A zero-length blob needs a non-NULL pointer:
 * a NULL one binds SQL NULL, which compares as no key at all. */
int sq_bind_blob(sqlite3_stmt *st, int i, const void *p, size_t n)
{
	return sqlite3_bind_blob64(st, i, n ? p : "", n, SQLITE_STATIC);
}

/* Column i as bytes: never NULL (a zero-length BLOB comes back NULL). */
static const uint8_t *col_blob(sqlite3_stmt *st, int i, size_t *n)
{
	const uint8_t *p = sqlite3_column_blob(st, i);

	*n = (size_t)sqlite3_column_bytes(st, i);
	return p ? p : (const uint8_t *)"";
}

/* Replace buf's content with n bytes.  0 or the nv_buf error. */
static int buf_set(struct nv_buf *b, const uint8_t *p, size_t n)
{
	nv_buf_reset(b);
	return nv_buf_add(b, p, n);
}

/* ----------------------------------------------------------------------
 * Opening and closing
 */

static void conn_close(const char *path, struct sq_conn *c)
{
	int rc;

	for (int i = 0; i < c->nst; i++)
		sqlite3_finalize(c->st[i]);
	c->nst = 0;
	rc = sqlite3_close(c->db);
	if (rc != SQLITE_OK)
		nv_log(NV_WARN, NV_SUB_META, "sqlite %s: close: %s", path,
		       sqlite3_errstr(rc));
	c->db = NULL;
}

/* Run one-time SQL (setup only; the hot path uses prepared statements). */
static int conn_exec(const char *path, struct sq_conn *c, const char *sql,
		     const char *op)
{
	int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK) {
		rc = sqlite_to_errno(path, c->db, rc, op);
		if (!sqlite3_get_autocommit(c->db))
			sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	return 0;
}

/* Switch the file to WAL (persistent in the file) and check it took. */
static int conn_set_wal(const char *path, struct sq_conn *c)
{
	sqlite3_stmt *st = NULL;
	const unsigned char *mode;
	int rc;

	rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = sqlite_to_errno(path, c->db, rc, "set journal_mode=WAL");
		sqlite3_finalize(st);
		return rc;
	}
	mode = sqlite3_column_text(st, 0);
	if (!mode || strcmp((const char *)mode, "wal")) {
		/* Still durable (synchronous=FULL); readers just block on the
		 * writer.  Happens on file systems without shared memory. */
		nv_log(NV_WARN, NV_SUB_META,
		       "sqlite %s: journal_mode is '%s', not WAL", path,
		       mode ? (const char *)mode : "?");
	}
	sqlite3_finalize(st);
	return 0;
}

/*
 * Open one connection: the writer (creates the file and the schema) or a
 * reader (query_only).  0, or -errno (logged); on failure c is closed.
 */
static int conn_open(const char *path, struct sq_conn *c, bool writer)
{
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
		    (writer ? SQLITE_OPEN_CREATE : 0);
	const char *const *sql = writer ? w_sql : r_sql;
	int n = writer ? W_COUNT : R_COUNT;
	int rc;

	memset(c, 0, sizeof(*c));
	rc = sqlite3_open_v2(path, &c->db, flags, NULL);
	if (rc != SQLITE_OK) {
		rc = sqlite_to_errno(path, c->db, rc, "open");
		goto fail;
	}
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, SQ_BUSY_MS);
	/* The file may come from anywhere: refuse writes that could corrupt
	 * it even through SQL (writable_schema, PRAGMA journal_mode=OFF...). */
	sqlite3_db_config(c->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	if (writer) {
		rc = conn_set_wal(path, c);
		if (!rc)
			rc = conn_exec(path, c, "PRAGMA synchronous=FULL",
				       "set synchronous=FULL");
		if (!rc)
			rc = conn_exec(path, c, schema_sql, "create schema");
	} else {
		rc = conn_exec(path, c, "PRAGMA query_only=1", "set query_only");
	}
	if (rc)
		goto fail;
	/* A prepare fails when kv or kv_rev lack a column we use: that is a
	 * foreign or damaged database, reported as such. */
	for (c->nst = 0; c->nst < n; c->nst++) {
		rc = sqlite3_prepare_v3(c->db, sql[c->nst], -1,
					SQLITE_PREPARE_PERSISTENT,
					&c->st[c->nst], NULL);
		if (rc != SQLITE_OK) {
			rc = sqlite_to_errno(path, c->db, rc, "prepare");
			goto fail;
		}
	}
	return 0;
fail:
	conn_close(path, c);
	return rc;
}

/* Read the current revision (writer, lock held).  0 or -errno. */
int sq_rev_get(struct sq_be *be, uint64_t *rev)
{
	sqlite3_stmt *st = be->w.st[W_REV_GET];
	int rc = sqlite3_step(st), err = 0;

	sq_assert_writer_held(be);
	if (rc == SQLITE_ROW) {
		*rev = (uint64_t)sqlite3_column_int64(st, 0);
	} else if (rc == SQLITE_DONE) {
		nv_log(NV_ERR, NV_SUB_META,
		       "sqlite %s: revision row missing: the database is damaged",
		       be->path);
		err = -EIO;
	} else {
		err = sqlite_to_errno(be->path, be->w.db, rc, "read revision");
	}
	sq_st_done(st);
	return err;
}

static void sq_close(void *vbe)
{
	struct sq_be *be = vbe;

	if (!be)
		return;
	for (int i = 0; i < SQ_READERS; i++)
		if (be->r[i].db)
			conn_close(be->path, &be->r[i]);
	if (be->w.db)
		conn_close(be->path, &be->w);
	assert(!be->watches); /* kv.h: every watch is closed before kv_close() */
	pthread_mutex_destroy(&be->watch_lock);
	pthread_cond_destroy(&be->rcond);
	pthread_mutex_destroy(&be->rlock);
	pthread_mutex_destroy(&be->wlock);
	if (be->claim_fd >= 0)
		close(be->claim_fd);
	free(be->path);
	free(be);
}

/*
 * kv_claim(): an flock on PATH-lock, beside the database (SQLite's own
 * locks are per transaction; two daemons would both run, and wait on
 * each other's commits).  The lock goes with the process.
 */
static int sq_claim(void *vbe)
{
	struct sq_be *be = vbe;
	char lock[4096 + 8];
	int fd;

	if (be->claim_fd >= 0)
		return 0;
	snprintf(lock, sizeof(lock), "%s-lock", be->path);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;

		nv_log(NV_ERR, NV_SUB_META, "sqlite %s: lock %s: %s", be->path, lock, strerror(e));
		return -e;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		int e = errno == EWOULDBLOCK ? EBUSY : errno;

		close(fd);
		nv_log(NV_ERR, NV_SUB_META, "sqlite %s is in use by another novafs daemon (it "
		       "holds %s): an embedded metastore serves one daemon; give each its own "
		       "-o meta= (or data_dir)", be->path, lock);
		return -e;
	}
	be->claim_fd = fd;
	return 0;
}

/* PRAGMA name (integrity_check or quick_check) on the writer connection,
 * every row but a lone "ok" a problem. */
static int sq_check(struct sq_be *be, const char *name, kv_problem_fn problem, void *arg)
{
	sqlite3_stmt *st = NULL;
	char sql[64];
	int rc;

	snprintf(sql, sizeof(sql), "PRAGMA %s", name);
	sq_writer_lock(be);
	rc = sqlite3_prepare_v2(be->w.db, sql, -1, &st, NULL);
	while (rc == SQLITE_OK || rc == SQLITE_ROW) {
		const char *row;

		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			break;
		row = (const char *)sqlite3_column_text(st, 0);
		if (row && strcmp(row, "ok"))
			problem(arg, row);
	}
	if (rc != SQLITE_DONE && rc != SQLITE_OK) {
		int code = rc & 0xff;

		if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
			problem(arg, sqlite3_errmsg(be->w.db));
			rc = SQLITE_DONE;
		}
	}
	rc = rc == SQLITE_DONE || rc == SQLITE_OK ? 0
						: sqlite_to_errno(be->path, be->w.db, rc, name);
	sqlite3_finalize(st);
	sq_writer_unlock(be);
	return rc;
}

/* kv_integrity_check(): PRAGMA integrity_check. */
static int sq_integrity_check(void *vbe, kv_problem_fn problem, void *arg)
{
	return sq_check(vbe, "integrity_check", problem, arg);
}

/* kv_quick_check(): PRAGMA quick_check (one pass, no index cross-checks). */
static int sq_quick_check(void *vbe, kv_problem_fn problem, void *arg)
{
	return sq_check(vbe, "quick_check", problem, arg);
}

/* ----------------------------------------------------------------------
 * Reads
 */

static int sq_get(void *vbe, const void *key, size_t klen, struct nv_buf *val,
		  uint64_t *ver)
{
	struct sq_be *be = vbe;
	struct sq_conn *c;
	sqlite3_stmt *st;
	const uint8_t *p;
	size_t n;
	int rc, err = 0;
	int live = sq_read_sweep(be); /* invariant 5 */

	c = reader_take(be);
	st = c->st[R_GET + live];
	rc = live ? sq_live_bind(be, st) : SQLITE_OK;
	if (rc == SQLITE_OK)
		rc = sq_bind_blob(st, 1, key, klen);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		p = col_blob(st, 0, &n);
		if (val)
			err = buf_set(val, p, n);
		if (ver)
			*ver = (uint64_t)sqlite3_column_int64(st, 1);
	} else if (rc == SQLITE_DONE) {
		err = -ENOENT;
	} else {
		err = sqlite_to_errno(be->path, c->db, rc, "get");
	}
	sq_st_done(st);
	reader_put(be, c);
	return err;
}

static int sq_floor(void *vbe, const void *key, size_t klen, const void *lo,
		    size_t lolen, struct nv_buf *key_out, struct nv_buf *val_out,
		    uint64_t *ver)
{
	struct sq_be *be = vbe;
	struct sq_conn *c;
	sqlite3_stmt *st;
	const uint8_t *p;
	size_t n;
	int rc, err = 0;
	int live = sq_read_sweep(be); /* invariant 5 */

	c = reader_take(be);
	st = c->st[R_FLOOR + live];
	rc = live ? sq_live_bind(be, st) : SQLITE_OK;
	if (rc == SQLITE_OK)
		rc = sq_bind_blob(st, 1, key, klen);
	if (rc == SQLITE_OK)
		rc = sq_bind_blob(st, 2, lo, lolen);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (key_out) {
			p = col_blob(st, 0, &n);
			err = buf_set(key_out, p, n);
		}
		if (val_out && !err) {
			p = col_blob(st, 1, &n);
			err = buf_set(val_out, p, n);
		}
		if (ver)
			*ver = (uint64_t)sqlite3_column_int64(st, 2);
	} else if (rc == SQLITE_DONE) {
		err = -ENOENT;
	} else {
		err = sqlite_to_errno(be->path, c->db, rc, "floor");
	}
	sq_st_done(st);
	reader_put(be, c);
	return err;
}

/*
 * Visit [start, end).  fn runs while the statement is being stepped, so
 * it sees one snapshot, holds one reader connection for the whole visit
 * and must not call back into this kv: with every reader taken by such
 * visits a nested read would wait for ever.
 */
static int sq_range(void *vbe, const void *start, size_t slen, const void *end,
		    size_t elen, size_t limit, bool reverse, kv_visit_fn fn,
		    void *arg)
{
	struct sq_be *be = vbe;
	struct sq_conn *c;
	sqlite3_stmt *st;
	sqlite3_int64 lim = (limit == 0 || limit > INT64_MAX) ? -1 : (sqlite3_int64)limit;
	int rc, err = 0;
	int live = sq_read_sweep(be); /* invariant 5 */

	c = reader_take(be);
	st = c->st[(reverse ? R_RANGE_DESC : R_RANGE_ASC) + live];
	rc = live ? sq_live_bind(be, st) : SQLITE_OK;
	if (rc == SQLITE_OK)
		rc = sq_bind_blob(st, 1, start, slen);
	if (rc == SQLITE_OK)
		rc = sq_bind_blob(st, 2, end, elen);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 3, lim);
	while (rc == SQLITE_OK || rc == SQLITE_ROW) {
		const uint8_t *k, *v;
		size_t kn, vn;
		int frc;

		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			break;
		k = col_blob(st, 0, &kn);
		v = col_blob(st, 1, &vn);
		frc = fn(arg, k, kn, v, vn, (uint64_t)sqlite3_column_int64(st, 2));
		if (frc != 0) {
			err = frc < 0 ? frc : 0;
			rc = SQLITE_DONE;
			break;
		}
	}
	if (rc != SQLITE_DONE)
		err = sqlite_to_errno(be->path, c->db, rc, "range");
	sq_st_done(st);
	reader_put(be, c);
	return err;
}

/* ----------------------------------------------------------------------
 * Commit
 */

/*
 * Step a statement that returns no rows we need (writer, lock held).
 * 0 or -errno (logged as op).
 */
int sq_w_step(struct sq_be *be, sqlite3_stmt *st, int bind_rc, const char *op)
{
	int rc = bind_rc == SQLITE_OK ? sqlite3_step(st) : bind_rc, err = 0;

	sq_assert_writer_held(be);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		err = sqlite_to_errno(be->path, be->w.db, rc, op);
	sq_st_done(st);
	return err;
}

/*
 * Evaluate one compare (writer, inside the transaction).  0 when it
 * holds, -ECANCELED when it does not, or -errno.
 */
static int cmp_check(struct sq_be *be, const struct kv_op *op)
{
	sqlite3_stmt *st = be->w.st[W_LOOKUP];
	bool ok = false;
	int rc, err = 0;

	rc = sq_bind_blob(st, 1, op->key, op->klen);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
		bool found = rc == SQLITE_ROW;

		if (op->kind == KV_CMP_VER) {
			uint64_t ver = found ? (uint64_t)sqlite3_column_int64(st, 1) : 0;

			ok = ver == op->ver;
		} else {
			size_t n = 0;
			const uint8_t *p = found ? col_blob(st, 0, &n) : NULL;

			ok = found && n == op->vlen && !memcmp(p, op->val, n);
		}
		if (!ok)
			err = -ECANCELED;
	} else {
		err = sqlite_to_errno(be->path, be->w.db, rc, "compare");
	}
	sq_st_done(st);
	return err;
}

/* Apply one write with version rev (writer, inside the transaction). */
static int write_apply(struct sq_be *be, const struct kv_op *op, uint64_t rev)
{
	sqlite3_stmt *st;
	int rc;

	if (op->kind == KV_DEL) {
		st = be->w.st[W_DEL];
		return sq_w_step(be, st, sq_bind_blob(st, 1, op->key, op->klen), "delete");
	}
	st = be->w.st[W_PUT];
	rc = sq_bind_blob(st, 1, op->key, op->klen);
	if (rc == SQLITE_OK)
		rc = sq_bind_blob(st, 2, op->val, op->vlen);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(st, 3, (sqlite3_int64)rev);
	return sq_w_step(be, st, rc, "put");
}

static int sq_commit(void *vbe, const struct kv_op *ops, size_t nops,
		     uint64_t *rev)
{
	struct sq_be *be = vbe;
	uint64_t cur = 0, next = 0;
	size_t i;
	int err, rc;

	sq_writer_lock(be);
	/* Invariant 5: a past-due lease goes before anything compares. */
	err = atomic_load(&be->lease_due) <= nv_now_mono_ns() ? sq_lease_sweep(be) : 0;
	if (!err)
		err = sq_w_step(be, be->w.st[W_BEGIN], SQLITE_OK, "begin");
	if (err)
		goto out;
	err = sq_rev_get(be, &cur);
	next = cur;
	for (i = 0; !err && i < nops; i++) {
		if (ops[i].kind != KV_CMP_VER && ops[i].kind != KV_CMP_VAL)
			break;
		err = cmp_check(be, &ops[i]);
	}
	if (!err && i < nops) {
		next = cur + 1;
		for (; !err && i < nops; i++) {
			err = write_apply(be, &ops[i], next);
			if (!err && (ops[i].lease || be->leased))
				err = sq_lease_bind(be, &ops[i]);
		}
		if (!err) {
			sqlite3_stmt *st = be->w.st[W_REV_SET];

			err = sq_w_step(be, st,
				     sqlite3_bind_int64(st, 1, (sqlite3_int64)next),
				     "store revision");
		}
	}
	if (!err)
		err = sq_w_step(be, be->w.st[W_COMMIT], SQLITE_OK, "commit");
	/* Invariant 2.  Some errors (I/O, full disk) already rolled back. */
	if (err && !sqlite3_get_autocommit(be->w.db)) {
		rc = sq_w_step(be, be->w.st[W_ROLLBACK], SQLITE_OK, "rollback");
		(void)rc; /* logged; err is the error to report */
	}
	if (!err && next != cur)
		atomic_store(&be->rev, next);
out:
	sq_writer_unlock(be);
	if (err == -ECANCELED)
		nv_log(NV_DEBUG, NV_SUB_META, "sqlite %s: compare failed at revision %" PRIu64,
		       be->path, cur);
	if (!err && next != cur)
		sq_watch_notify(be, ops, nops, next); /* invariant 6 */
	if (!err && rev)
		*rev = next;
	return err;
}

static const struct kv_backend_ops sq_ops = {
	.scheme = "sqlite",
	.close = sq_close,
	.get = sq_get,
	.floor = sq_floor,
	.range = sq_range,
	.commit = sq_commit,
	.claim = sq_claim,
	.integrity_check = sq_integrity_check,
	.quick_check = sq_quick_check,
	.lease_grant = sq_lease_grant,
	.lease_keepalive = sq_lease_keepalive,
	.lease_revoke = sq_lease_revoke,
	.watch_start = sq_watch_start,
	.watch_stop = sq_watch_stop,
	.status = sq_status,
};

/*
 * Process-wide SQLite set-up, once, before the first connection.
 * Memory statistics off: with them on (Debian's default) every SQLite
 * malloc and free takes one global mutex, which serialises all our
 * connections; nothing in novafs reads sqlite3_memory_used().  If
 * another part of the process initialised SQLite first, the call fails
 * with SQLITE_MISUSE and we simply run with the statistics on.
 */
static void sqlite_global_init(void)
{
	int rc = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);

	if (rc != SQLITE_OK)
		nv_log(NV_DEBUG, NV_SUB_META,
		       "sqlite: memory statistics stay on: %s", sqlite3_errstr(rc));
}

/* This boot's id, so leases of an earlier boot (whose CLOCK_MONOTONIC
 * deadlines mean nothing now) count as expired; "" when unreadable. */
static void read_boot_id(char *buf, size_t cap)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	buf[0] = 0;
	if (f) {
		if (!fgets(buf, (int)cap, f))
			buf[0] = 0;
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
}

int sqlite_kv_open(const char *path, struct kv **out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct sq_be *be;
	struct nv_buf name;
	char *label;
	uint64_t rev = 0;
	int rc;

	if (!sqlite3_threadsafe()) {
		nv_log(NV_ERR, NV_SUB_META,
		       "sqlite %s: the SQLite library was built without thread support",
		       path);
		return -ENOTSUP;
	}
	pthread_once(&once, sqlite_global_init);
	be = calloc(1, sizeof(*be));
	if (!be)
		return -ENOMEM;
	be->claim_fd = -1;
	be->path = strdup(path);
	if (!be->path) {
		free(be);
		return -ENOMEM;
	}
	pthread_mutex_init(&be->wlock, NULL);
	pthread_mutex_init(&be->rlock, NULL);
	pthread_cond_init(&be->rcond, NULL);
	pthread_mutex_init(&be->watch_lock, NULL);
	atomic_init(&be->lease_due, UINT64_MAX);
	read_boot_id(be->boot, sizeof(be->boot));

	/* The writer first: it creates the file and the schema the readers
	 * prepare against. */
	rc = conn_open(path, &be->w, true);
	if (rc)
		goto fail;
	sq_writer_lock(be);
	rc = sq_rev_get(be, &rev);
	if (!rc)
		rc = sq_lease_due_load(be);
	sq_writer_unlock(be);
	atomic_init(&be->rev, rev);
	if (rc)
		goto fail;
	for (int i = 0; i < SQ_READERS; i++) {
		rc = conn_open(path, &be->r[i], false);
		if (rc)
			goto fail;
		be->rfree[be->nfree++] = i;
	}

	nv_buf_init(&name, strlen(path) + 16);
	if (nv_buf_printf(&name, "sqlite:%s", path)) {
		rc = -ENOMEM;
		goto fail;
	}
	label = nv_buf_strdup(&name);
	nv_buf_free(&name);
	/* kv_wrap() closes be on failure; a NULL label falls back to the
	 * scheme name. */
	rc = kv_wrap(&sq_ops, be, label, out);
	free(label);
	if (rc)
		return rc;
	nv_log(NV_INFO, NV_SUB_META, "sqlite %s: opened at revision %" PRIu64, path,
	       rev);
	return 0;
fail:
	sq_close(be);
	return rc;
}

const struct kv_scheme sqlite_kv_scheme = {
		.url = { .prefix = "sqlite:", .usage = "sqlite:/abs/path or /abs/path", .path = true },
	.open = sqlite_kv_open,
};
