/*
 * internal.h - what the two files of the SQLite backend share (public
 * side meta/sqlite.h): the connection and backend structs, the statement
 * indices, and the calls one file makes into the other.  Included by
 * meta/sqlite.c and meta/sqlite/lease.c only.
 *
 *   meta/sqlite.c        connections, schema, reads, commit, open/close
 *   meta/sqlite/lease.c  leases (deadlines on CLOCK_MONOTONIC, expired
 *                        leases' keys deleted by sq_lease_sweep()),
 *                        in-process watches woken on commit, status
 *
 * For: one star's embedded metastore.  Not for: anything shared between
 * hosts (meta/etcd/).
 *
 * Invariants of the whole backend (the files cite them by number):
 *  1. Revision: kv_rev.rev is the revision of the last commit that wrote
 *     anything; each such commit (a lease sweep included) sets it to the
 *     old value + 1 inside the same transaction.
 *  2. A commit either passes every compare and applies every write in
 *     order, or leaves the database untouched.
 *  3. Each SQLite error is translated and logged exactly once, by
 *     sqlite_to_errno(), at the call that returned it.
 *  4. A statement that was stepped is reset (and its bindings cleared)
 *     before its connection is released.
 *  5. Leases: a key with a row in kv_lkey lives only while its lease row
 *     in kv_lease is alive (same boot, deadline in the future); a put
 *     without a lease or a delete removes the key's kv_lkey row.  Reads
 *     and commits sweep leases that are past due first, so no read
 *     returns a key of an expired lease; a read whose sweep could not
 *     write (a full disk) still answers, through a statement that hides
 *     the keys of leases past due (sq_read_sweep()): a read never fails
 *     because a sweep failed.
 *  6. Every watch in be->watches is fired after each commit that wrote a
 *     key under its prefix and after each sweep that deleted anything.
 */
#ifndef NOVAFS_META_SQLITE_INTERNAL_H
#define NOVAFS_META_SQLITE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "meta/kv.h"

/* Reader connections: enough for the absorb, settle and read paths of one
 * star to look up rows at once; more only costs file descriptors and
 * page cache. */
#define SQ_READERS 4

/* Writer statements, indexed by enum w_stmt (SQL in meta/sqlite.c). */
enum w_stmt {
	W_BEGIN,
	W_COMMIT,
	W_ROLLBACK,
	W_LOOKUP,
	W_PUT,
	W_DEL,
	W_REV_GET,
	W_REV_SET,
	W_LK_PUT,     /* bind key to lease */
	W_LK_DEL,     /* unbind key */
	W_LEASE_GET,  /* deadline, boot of one lease */
	W_LEASE_PUT,  /* insert or refresh a lease */
	W_LEASE_DEL,  /* drop one lease row */
	W_LEASE_KEYS, /* delete the keys of one lease */
	W_LEASE_LKS,  /* delete the kv_lkey rows of one lease */
	W_LEASE_DUE,  /* one lease past due */
	W_LEASE_MIN,  /* earliest deadline */
	W_COUNT
};

/* The _LIVE forms hide keys of leases past due (?8: now, ?9: boot); a
 * read uses them when the sweep before it failed (invariant 5). */
enum r_stmt {
	R_GET, R_FLOOR, R_RANGE_ASC, R_RANGE_DESC,
	R_GET_LIVE, R_FLOOR_LIVE, R_RANGE_ASC_LIVE, R_RANGE_DESC_LIVE,
	R_COUNT
};
#define R_LIVE (R_GET_LIVE - R_GET) /* R_x + R_LIVE: R_x_LIVE */

#define SQ_MAX_STMT ((int)W_COUNT > (int)R_COUNT ? (int)W_COUNT : (int)R_COUNT)

/* One connection and its prepared statements; used by one thread at a
 * time (the holder of be->wlock, or the thread that took it from the
 * reader free list). */
struct sq_conn {
	sqlite3 *db;
	sqlite3_stmt *st[SQ_MAX_STMT];
	int nst;
};

/* A watch registered with the backend (meta/sqlite/lease.c). */
struct sq_watch {
	struct kv_watch *w;   /* borrowed: its owner closes it after us */
	struct sq_watch *next;
};

/*
 * The backend.  Lock order: wlock, then watch_lock, then a watch's own
 * lock (kv_watch_fire()); wlock and rlock are never held together (a
 * commit uses no reader; a reader never commits), and none is held while
 * calling out of this backend except to SQLite and kv_watch_fire().
 */
struct sq_be {
	char *path; /* immutable */
	char boot[40]; /* immutable: this boot's id (/proc/sys/kernel/random/boot_id) */
	int claim_fd;  /* the flock of PATH-lock (sq_claim()); -1: not claimed */

	pthread_mutex_t wlock;
	struct sq_conn w;  /* protected by wlock */
#ifndef NDEBUG
	pthread_t wowner;  /* protected by wlock; meaningful while wheld */
	bool wheld;        /* protected by wlock */
#endif
	bool leased;       /* protected by wlock: kv_lease may have rows */
	/* Earliest lease deadline (CLOCK_MONOTONIC ns), UINT64_MAX when none;
	 * written under wlock, read without it (a hint: past it, sweep). */
	_Atomic uint64_t lease_due;
	/* A read's sweep that failed (a full disk) is not retried by every
	 * read: not before sweep_retry_ns (CLOCK_MONOTONIC), a wait that
	 * doubles with each of sweep_fails failures in a row
	 * (sq_read_sweep()).  Hints, read and written without a lock. */
	_Atomic uint64_t sweep_retry_ns;
	_Atomic unsigned sweep_fails;
	_Atomic uint64_t rev; /* last committed revision (for watches) */

	pthread_mutex_t rlock;
	pthread_cond_t rcond;         /* signalled when a reader is freed */
	struct sq_conn r[SQ_READERS]; /* owned by whoever took it from rfree */
	int rfree[SQ_READERS];        /* protected by rlock: free indices */
	int nfree;                    /* protected by rlock */

	pthread_mutex_t watch_lock;
	struct sq_watch *watches;     /* protected by watch_lock */
};

/* meta/sqlite.c */
int sqlite_to_errno(const char *path, sqlite3 *db, int rc, const char *op);
void sq_writer_lock(struct sq_be *be);
void sq_writer_unlock(struct sq_be *be);
void sq_assert_writer_held(const struct sq_be *be);
int sq_w_step(struct sq_be *be, sqlite3_stmt *st, int bind_rc, const char *op);
int sq_bind_blob(sqlite3_stmt *st, int i, const void *p, size_t n);
void sq_st_done(sqlite3_stmt *st);
int sq_rev_get(struct sq_be *be, uint64_t *rev);

/* meta/sqlite/lease.c */
/* Writer lock held, outside a transaction: delete the leases past due and
 * their keys in one transaction; fires every watch when it deleted any.
 * 0 or -errno. */
int sq_lease_sweep(struct sq_be *be);
/* Lock not held: sweep when the earliest deadline has passed. */
int sq_lease_sweep_due(struct sq_be *be);
/* Before a read (lock not held): sq_lease_sweep_due(); 0 when the read
 * may use its plain statement, R_LIVE when the sweep failed, or failed
 * lately and waits out its back-off, and the read must use the _LIVE
 * form.  The first failure of a run is a WARN line, its end an INFO. */
int sq_read_sweep(struct sq_be *be);
/* Bind the _LIVE statement's ?8 (now) and ?9 (boot).  SQLITE_OK or an
 * SQLite error. */
int sq_live_bind(struct sq_be *be, sqlite3_stmt *st);
/* Writer lock held, inside the commit's transaction: bind op's key to its
 * lease (-ENOLCK when lost) or unbind it. */
int sq_lease_bind(struct sq_be *be, const struct kv_op *op);
/* Recompute be->lease_due from the table (writer lock held). */
int sq_lease_due_load(struct sq_be *be);
/* After a commit of ops at revision rev: fire the watches it concerns. */
void sq_watch_notify(struct sq_be *be, const struct kv_op *ops, size_t nops, uint64_t rev);
void sq_watch_fire_all(struct sq_be *be, uint64_t rev);
int sq_lease_grant(void *vbe, unsigned ttl_s, uint64_t *id);
int sq_lease_keepalive(void *vbe, uint64_t id, unsigned *ttl_s);
int sq_lease_revoke(void *vbe, uint64_t id);
int sq_watch_start(void *vbe, struct kv_watch *w);
void sq_watch_stop(void *vbe, struct kv_watch *w);
int sq_status(void *vbe, struct nv_buf *out);

#endif
