/*
 * stream.h - a stream's in-memory state on the star that leads it, and
 * the table that holds it.
 *
 * For: the positions a read or an append needs without a metastore read:
 * the admitted end (where the next record goes), the acknowledged end
 * (st_size), the ref frontier (below it refs cover everything), the trim
 * watermark; and the stream's slice of the flight index (released runs
 * not yet absorbed, so a read above the frontier that misses the tail
 * cache can still find its slot).  Not for: bytes (engine/tailcache.h),
 * durable state (meta/streams.h, meta/refs.h).
 *
 * Positions, always in this order:
 *
 *   trim <= frontier <= acked <= admitted        (seq and byte alike)
 *   settled <= frontier: history below settled is in settled objects
 *   |  gone | cold: refs | hot: tail window | in flight, unacked |
 *
 * Locking: s->lock guards every field marked "lock".  The acked,
 * frontier and trim positions are also atomics so st_size and the read
 * path's tier choice can load them without the lock; they are only
 * stored with s->lock held.  Lock order: chain lock, then stream lock,
 * then tail cache lock.  The table's lock is never held while taking a
 * stream lock.
 *
 * Invariants:
 *  1. The positions above never move backwards (trim excepted: it only
 *     moves forwards too, but may pass frontier only as far as acked).
 *  2. pend[] holds, in seq order, exactly the runs with
 *     frontier <= seq < acked: the absorb pops what it committed, the
 *     ack path pushes what it released.
 *  3. A stream is in the table while anyone holds a reference; the
 *     table's entry does not count.  The last stream_put() removes it.
 */
#ifndef NOVAFS_ENGINE_STREAM_H
#define NOVAFS_ENGINE_STREAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/wake.h"
#include "meta/kv.h"
#include "meta/streams.h"
#include "src/base/names.h"

struct stream_table;

/* One released, unabsorbed run of the stream: where its bytes are. */
struct stream_pend {
	uint64_t epoch;
	uint64_t slot;
	uint64_t first_seq;
	uint64_t first_byte;
	uint64_t nbytes; /* body bytes */
	uint64_t footer_off;
	uint32_t footer_len;
	uint32_t nrec;
	uint8_t cls;
};

struct nv_stream {
	/* Immutable once the stream is in the table.  name is the name at
	 * load, for log lines: a rename (star_stream_rename()) changes the
	 * rows, not this copy. */
	uint64_t id;
	char bucket[NV_BUCKET_NAME_MAX + 1];
	char name[NV_STREAM_NAME_MAX + 1];
	uint64_t created_ns;
	struct stream_table *table;

	atomic_int refs;

	pthread_mutex_t lock;
	uint8_t cls;     /* lock; changes only while the stream is empty */
	bool deleted;    /* lock */

	/* Admission: protected by the lock of the chain of class cls.
	 * next_byte (the admitted end) is also an atomic, stored only under
	 * that lock, so fs/ can check an append's offset against it without
	 * the lock (stream_admitted_byte()). */
	uint64_t next_seq;
	_Atomic uint64_t next_byte;
	uint64_t last_ts;         /* timestamps are non-decreasing */
	uint64_t open_flight_gen; /* generation of the open flight holding open_run */
	uint32_t open_run;        /* index of this stream's run in that flight */

	/* Stored under lock, loaded lock-free. */
	_Atomic uint64_t acked_seq, acked_byte;
	_Atomic uint64_t frontier_seq, frontier_byte;
	_Atomic uint64_t trim_seq, trim_byte;
	_Atomic uint64_t settled_seq, settled_byte; /* end of settled history */
	/* When the stream's open settle round ripens (wall ns; 0 none).
	 * Written only by the absorb of the stream's class (absorb.h). */
	_Atomic uint64_t round_ripe_ns;
	_Atomic uint64_t mtime_ns; /* time of the last acknowledged append */
	/* The writer lease as this star holds it (engine/lease.c): lease_gen
	 * is the registry generation under which this star leads the stream
	 * (0: not led here), lease_ver the lease row's version every ref
	 * commit compares (0: no compare), lease_epoch its lease epoch.
	 * Written by star_lead() only, loaded lock-free. */
	_Atomic uint64_t lease_gen, lease_ver, lease_epoch;
	bool lease_taking; /* engine/lease.c's take_lock: a star_lead() of s
			    * is reading, taking or reloading it */
	/* Set by star_release() when it stops admitting the stream, cleared
	 * by this star's next take of it (lead_slow()); while set,
	 * chain_append() refuses the stream with -EREMOTE (STAR_ENOTOWNER,
	 * engine/lease.h).  Loaded lock-free. */
	_Atomic bool lease_released;
	/* Owner and permission bits (meta_owner), stored under lock after
	 * the row changed (star_stream_set_owner()), loaded lock-free. */
	_Atomic uint32_t uid, gid, mode;
	/* The row's durable override (META_DURABLE_*, meta/streams.h), for
	 * fs/: stored under lock by star_stream_set_durable(), loaded
	 * lock-free.  Another star's change shows at the next load here. */
	_Atomic uint32_t durable;

	/* Closed at every ack that moves acked_byte, at deletion and at
	 * shutdown (wake.h). */
	struct wake wake;

	/* Bits owned by the layer above the engine (fs/): the engine never
	 * reads them. */
	atomic_uint user_flags;

	/* Flight index slice (lock): a ring of released runs, seq order. */
	struct stream_pend *pend;
	uint32_t pend_head, pend_n, pend_cap;
};

/* New empty table.  NULL on ENOMEM. */
struct stream_table *stream_table_new(void);
/* Free the table and any stream still in it.  NULL is a no-op. */
void stream_table_free(struct stream_table *t);

/* The stream with this id with a new reference, or NULL if not loaded. */
struct nv_stream *stream_table_find(struct stream_table *t, uint64_t id);

/*
 * Insert s (fully initialised by the caller with refs == 1, from
 * stream_alloc()) unless a stream with the same id is already there.
 * Returns the stream now in the table with a reference for the caller:
 * s itself, or the existing one (then s is freed); NULL on ENOMEM (the
 * table could not grow; s is freed).
 */
struct nv_stream *stream_table_insert(struct stream_table *t, struct nv_stream *s);

/* How many streams have left the table so far (a load's snapshot). */
uint64_t stream_table_removals(struct stream_table *t);

/* A stream read before a removal the table counted since. */
#define STREAM_TABLE_STALE ((struct nv_stream *)(uintptr_t)1)

/* As stream_table_insert(), but when no stream with s's id is there and
 * a stream left the table since stream_table_removals() answered
 * removals, s is freed and STREAM_TABLE_STALE returned: what s was
 * loaded from may predate records that stream committed (the caller
 * loads again).  UINT64_MAX: never stale. */
struct nv_stream *stream_table_insert_since(struct stream_table *t, struct nv_stream *s,
					    uint64_t removals);

/* Number of loaded streams. */
size_t stream_table_count(struct stream_table *t);

/* Visit every loaded stream with a temporary reference (fn must not
 * take the table's lock). */
void stream_table_each(struct stream_table *t, void (*fn)(void *arg, struct nv_stream *s),
		       void *arg);

/* A zeroed stream with refs == 1 and an initialised lock.  NULL on ENOMEM. */
struct nv_stream *stream_alloc(void);

void stream_get(struct nv_stream *s);
/* Drop a reference; the last one removes the stream from its table and
 * frees it. */
void stream_put(struct nv_stream *s);

/*
 * Load a stream's state from its row ms and its last ref (kv borrowed),
 * unless the table has it already: 0 and *out (a new reference), -EIO
 * (an undecodable ref row), -ENOMEM, or the kv's error (logged).  Used
 * by engine/star.c (load_stream()) and the unit tests' fixture.
 */
int stream_load(struct stream_table *t, struct kv *kv, const struct meta_stream *ms,
		struct nv_stream **out) __attribute__((warn_unused_result));

/* Push a released run (lock held).  0 or -ENOMEM. */
int stream_pend_push(struct nv_stream *s, const struct stream_pend *p)
	__attribute__((warn_unused_result));
/*
 * Reload s's positions from the metastore (its row's trim, its last
 * ref, its settled end), dropping its flight index: what a star does
 * when it takes a stream another star (or an earlier incarnation) led.
 * The caller holds whatever guards s's admission fields (the class's
 * chain admission lock, or no chain of the class runs).  0, kv error.
 */
int stream_reload(struct kv *kv, struct nv_stream *s) __attribute__((warn_unused_result));
/*
 * Raise s's positions to a committed end (its last ref's end_seq,
 * end_byte and max_ts), never lowering one: the view of a stream this
 * star does not lead, which another star's refs (the settle duty's, a
 * dead leader's successor's) moved on (engine/starview.c).  On a stream
 * this star leads it changes nothing (its acked end is at or past its
 * refs').  The caller holds the class's chain admission lock, as for
 * stream_reload().  true when the acked end moved (the caller closes the
 * wake).
 */
bool stream_catch_up(struct nv_stream *s, uint64_t end_seq, uint64_t end_byte,
		     uint64_t max_ts);
/*
 * Raise s's trim point to (seq, byte), each never lowered and never past
 * the acked end (stream.h invariant 1: trim passes the frontier only as
 * far as acked): the view of a stream another star trimmed
 * (engine/starview.c).  Takes s->lock.  true when it moved; *old_byte
 * (may be NULL) gets the trim byte before.
 */
bool stream_trim_up(struct nv_stream *s, uint64_t seq, uint64_t byte, uint64_t *old_byte);
/* Raise s's settled end to (seq, byte), never lowered: what a settle on
 * this star (engine/star.c) or another one (engine/starview.c)
 * committed.  The caller read it before the refs' end it raised s's
 * frontier to, so settled <= frontier holds.  Takes s->lock.  true when
 * it moved. */
bool stream_settled_up(struct nv_stream *s, uint64_t seq, uint64_t byte);
/* Pop runs whose seqs all lie below end_seq (lock held). */
void stream_pend_pop_below(struct nv_stream *s, uint64_t end_seq);
/* Find the run holding byte (lock held): 0 and *out, or -ENOENT. */
int stream_pend_find_byte(const struct nv_stream *s, uint64_t byte, struct stream_pend *out);
/* Find the run holding record seq (lock held): 0 and *out, or -ENOENT. */
int stream_pend_find_seq(const struct nv_stream *s, uint64_t seq, struct stream_pend *out);

static inline uint64_t stream_acked_byte(const struct nv_stream *s)
{
	return atomic_load_explicit(&s->acked_byte, memory_order_acquire);
}

/* Where the next admitted record starts: the acked end plus every byte
 * admitted and not yet acked (durable=fsync writers run ahead of acks). */
static inline uint64_t stream_admitted_byte(const struct nv_stream *s)
{
	return atomic_load_explicit(&s->next_byte, memory_order_acquire);
}

#endif
