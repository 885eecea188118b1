/*
 * star.h - one running novafs daemon's engine: the lifecycle that ties
 * the store, the metastore, the chains, the absorbs, the caches and the
 * read path together, and the namespace and data calls fs/ makes.
 *
 * For: everything fs/ asks of the engine.  fs/ never includes a module
 * below this one; it uses the types this header's prototypes name
 * (nv_stream, reader, meta_bucket/meta_stream rows, the gate waiter of
 * engine/gate.h) and the shared vocabulary of src/base/names.h.  Not
 * for: FUSE, errno translation for users, option parsing (src/novafs.c).
 *
 * Lifecycle:
 *
 *   star_open:  lock DATA_DIR (datadir_lock()), open store + metastore
 *               (stack_open(), engine/stack.h), register in the star
 *               registry (engine/lease.h: refused while a live star
 *               holds the id), mint a new epoch per class, start a
 *               chain + absorb per class, start the registry keepalive,
 *               start the auditor, which settles every epoch left
 *               unsettled (recover.h) and then opens the gate
 *   (serving)   a chain that halts is quiesced, its epoch settled and a
 *               new epoch started for its class (restart_class())
 *   star_close: refuse new appends, flush and drain every chain (every
 *               admitted append acked), drain every absorb (everything
 *               absorbed), mark the epochs SETTLED (clean), revoke the
 *               registry lease (its writer leases go with it), close.
 *
 * Invariants:
 *  1. One star per data directory at a time (an flock on DATA_DIR/lock).
 *  2. No stream is served before every unsettled epoch of this star is
 *     settled, so a stream's refs end where its records end.
 *  3. A stream's class picks its chain; appends to one stream are in seq
 *     order across the whole star.
 *
 * Lock order, for the whole tree (the one place it is written; each
 * module's header says which of its fields each lock guards).  A thread
 * holding a lock of one row may take only locks of rows below it; locks
 * of one row are never held together unless the row says how:
 *
 *   1. fs/: a follow handle's ff->lock (fs/follow.c); the follow worker
 *      queue's fw->lock and the node table's lock (fs/node.c) are leaves.
 *      api/ (never under an fs/ lock): the subscription list's
 *      subs->lock, then a subscription's sub->lock (api/subscribe.c);
 *      an append's wait lock (api/server.c) and the client's pool lock
 *      (api/client.c) are leaves
 *   2. st->class_lock[c] (rwlock; shared by appends, exclusive in
 *      restart_class())
 *   3. a chain's c->lock (chain_admission_lock(); engine/chain.c)
 *   4. a stream's s->lock (engine/stream.h); the stream table's lock is
 *      never held while taking it
 *   5. the tail cache's lock (engine/tailcache.c)
 *   6. a reader's rd->lock, then the read engine's re->lock
 *      (engine/read.c); a stream lock is taken alone there
 *   7. leaves, taken with nothing below them: a wake's lock
 *      (engine/wake.c; its callbacks run with no lock held), the backlog
 *      (taken before c->lock, never under it), an absorb's a->lock
 *      (never held while taking a stream lock), the auditor's a->lock,
 *      the settle era's e->lock, the read cache and fetch cache locks,
 *      engine/lease.c's take_lock,
 *      the failpoint table
 *   8. below the engine: the S3 handle pool's pool_lock, then curl's
 *      share locks (engine/store/s3/); the directory store's synced set
 *      (engine/store/dir/); SQLite's wlock and rlock, never held
 *      together (meta/sqlite.c)
 *
 * No mutex of rows 1-7 is held across a store or metastore request; the
 * class lock (row 2) is held across an admission (shared) and across a
 * class restart's swap of chain and absorb (exclusive).
 * Debug builds assert "caller holds" with NV_ASSERT_LOCKED()
 * (src/base/lockcheck.h).
 */
#ifndef NOVAFS_ENGINE_STAR_H
#define NOVAFS_ENGINE_STAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/gate.h"
#include "engine/starcfg.h"
#include "engine/flight.h"
#include "engine/read.h"
#include "engine/stats.h"
#include "engine/stream.h"
#include "engine/store/store.h"
#include "meta/streams.h"
#include "src/base/names.h"

struct star;

/* The default linger of a chain whose slot PUT is a request to an object
 * store: a millisecond of batching per PUT (novafs(8) linger_us). */
#define STAR_LINGER_REQUEST_NS (1000 * NV_NS_PER_US)

/* On an object store (or one with injected latency), a cold slot or
 * object of at most this many bytes, mostly one stream's, is read in one
 * GET (read_cfg.whole_max): a slot of small records, or a durable=write
 * writer's 1 MiB.  Larger ones are read a chunk per GET, which the
 * read-ahead runs in parallel (one 4 MiB GET was slower on RGW). */
#define STAR_READ_WHOLE_MAX ((2u << 20) + (64u << 10))

/* The linger of class cls's chain under cfg (borrowed): its own
 * linger_class_ns when set (>= 0), else linger_ns when set (>= 0), else
 * by the store: 0 when the class's slots go to segment files of a local
 * directory store (seg_store: a PUT is a write and a shared flush, not a
 * request; concurrent PUTs already share that flush, so waiting would
 * only add latency: bench/RESULTS.md), else STAR_LINGER_REQUEST_NS. */
uint64_t star_class_linger_ns(const struct star_cfg *cfg, unsigned cls, bool seg_store);

/* Open and start.  0 and *out; -EBUSY (another star holds DATA_DIR),
 * -EIO (recovery could not settle an epoch: see the log), or the error
 * of the store, the metastore or thread creation. */
int star_open(const struct star_cfg *cfg, struct star **out) __attribute__((warn_unused_result));

/* Graceful close (see above) and free.  Returns 0, or the first error
 * met while draining (data that could not be acked was failed back to
 * its writers already).  NULL is a no-op. */
int star_close(struct star *st);

const char *star_id(const struct star *st);
/* listen= (NULL: the star serves no star API). */
const char *star_listen_addr(const struct star *st);
uint64_t star_epoch(const struct star *st, unsigned cls);
struct nv_stats *star_stats(struct star *st);

/* Gauges for stats: backlog and cache bytes, loaded streams. */
struct star_gauges {
	uint64_t backlog_bytes;
	uint64_t backlog_budget;
	uint64_t tail_cache_bytes;
	uint64_t read_cache_bytes;
	uint64_t streams_loaded;
	uint64_t slots_live; /* slots written by this star's chains, not deleted */
	uint64_t fetch_cache_bytes;
	struct store_stats store; /* requests and bytes of the star's store */
};
void star_get_gauges(struct star *st, struct star_gauges *g);

/* Bucket and stream names are checked by the rules of
 * src/base/names.h (nv_bucket_name_check(), nv_stream_name_check()). */

/* ------------------------------------------------------------ buckets */

/* own (borrowed) may be NULL: root:root META_BUCKET_MODE. */
int star_bucket_create(struct star *st, const char *name, const struct meta_owner *own,
		       struct meta_bucket *out) __attribute__((warn_unused_result));
int star_bucket_get(struct star *st, const char *name, struct meta_bucket *out)
	__attribute__((warn_unused_result));
/* -ENOTEMPTY while it holds streams. */
int star_bucket_delete(struct star *st, const char *name) __attribute__((warn_unused_result));
int star_bucket_list(struct star *st, const char *after, meta_bucket_fn fn, void *arg)
	__attribute__((warn_unused_result));
int star_bucket_set_class(struct star *st, const char *name, unsigned cls)
	__attribute__((warn_unused_result));
/* chmod/chown of a bucket (the caller checked who may). */
int star_bucket_set_owner(struct star *st, const char *name, const struct meta_owner *own)
	__attribute__((warn_unused_result));

/* ------------------------------------------------------------ the gate */

/* Stream loads wait until every earlier epoch is settled (invariant 2).
 * A waiter (engine/gate.h: the caller's, zeroed, borrowed for the call)
 * can be cancelled from another thread (a FUSE interrupt):
 * star_gate_wait() then returns -EINTR.  w may be NULL (not cancellable). */
int star_gate_wait(struct star *st, struct gate_waiter *w) __attribute__((warn_unused_result));
bool star_gate_is_open(struct star *st);
void star_gate_cancel(struct star *st, struct gate_waiter *w);
/* Stopping: answer every request at the closed gate, now and later,
 * with -ESHUTDOWN (EIO to the caller), so the session loop can be
 * joined although recovery cannot finish.  NULL st is a no-op. */
void star_gate_shut(struct star *st);

/* ------------------------------------------------------------ streams */

/* Create, owned by own (borrowed; NULL: root:root META_STREAM_MODE):
 * 0 and *out (a reference), -EEXIST, -ENOENT (no bucket),
 * -EINVAL/-ENAMETOOLONG (name). */
int star_stream_create(struct star *st, const char *bucket, const char *name,
		       const struct meta_owner *own, struct nv_stream **out)
	__attribute__((warn_unused_result));
/* chmod/chown of a stream (the caller checked who may): the row, then
 * s's uid/gid/mode. */
int star_stream_set_owner(struct star *st, struct nv_stream *s, const struct meta_owner *own)
	__attribute__((warn_unused_result));
/* user.nova.durable of a stream (META_DURABLE_*; DEFAULT removes the
 * override): the row, then s->durable.  0, -EINVAL, -ENOENT, kv error. */
int star_stream_set_durable(struct star *st, struct nv_stream *s, unsigned durable)
	__attribute__((warn_unused_result));
/* Rename a stream within its bucket (meta_stream_rename(): a stream
 * named `to` is replaced and deleted unless noreplace, -EEXIST then).
 * The stream keeps its id and bytes; open handles keep working.  dst
 * (borrowed; NULL: none) is the stream the caller found under `to`: it
 * is replaced only while it is still there and this star leads it or it
 * is vacant, in the rename's one transaction (meta/streams.h invariant
 * 6); it is marked deleted here at once, so its appends here fail with
 * -ENOENT.  0, -ENOENT (no stream `from`), -EEXIST, -EINVAL/
 * -ENAMETOOLONG (name), -STAR_ENOTOWNER (another live star leads dst:
 * ask it, engine/lease.h), -ESTALE (`to` is not dst any more, or dst's
 * lease moved meanwhile: look again), -ETIMEDOUT (past this star's
 * lease deadline), kv error; nothing renamed on any error. */
int star_stream_rename(struct star *st, const char *bucket, const char *from, const char *to,
		       bool noreplace, struct nv_stream *dst) __attribute__((warn_unused_result));
/* s's name now (its row's: s->name is the name at load, which a rename
 * by any star changes) into name (size bytes).  0, -ENOENT (deleted),
 * kv error.  One metastore read. */
int star_stream_name(struct star *st, const struct nv_stream *s, char *name, size_t size)
	__attribute__((warn_unused_result));
/* By name or id, loading its state: 0 and *out (a reference), -ENOENT. */
int star_stream_lookup(struct star *st, const char *bucket, const char *name,
		       struct nv_stream **out) __attribute__((warn_unused_result));
int star_stream_by_id(struct star *st, uint64_t id, struct nv_stream **out)
	__attribute__((warn_unused_result));
/* Tombstone; later appends fail with -ENOENT. */
int star_stream_delete(struct star *st, struct nv_stream *s) __attribute__((warn_unused_result));
/* The in-memory side of a deletion another star committed (seen by a
 * take here, or done by the holder `by` at this mount's unlink): s is
 * marked deleted here (appends fail with -ENOENT, followers end), logged
 * once.  Returns -ENOENT. */
int star_stream_gone(struct star *st, struct nv_stream *s, const char *by);
int star_stream_list(struct star *st, const char *bucket, const char *after,
		     meta_stream_fn fn, void *arg) __attribute__((warn_unused_result));
/*
 * Trim the stream's head (DESIGN.md 5: a hole punch).  By byte: records
 * wholly below `byte` are gone and [0, byte) reads as zeros.  By seq:
 * records below `seq` are gone.  Never backwards: a point at or below the
 * current one is a no-op for bytes and -EINVAL for seqs (the current one:
 * this star's view, or the row's when another star trimmed further, as
 * the record lookup finds: read_locate_record()'s -ERANGE); past the
 * acked end is -EINVAL.  On 0, *old_byte (may be NULL) is the previous
 * trim byte.
 */
int star_stream_trim_bytes(struct star *st, struct nv_stream *s, uint64_t byte,
			   uint64_t *old_byte) __attribute__((warn_unused_result));
int star_stream_trim_seq(struct star *st, struct nv_stream *s, uint64_t seq,
			 uint64_t *old_byte) __attribute__((warn_unused_result));

/* user.nova.layout: a JSON document of the stream's rows and objects
 * (caller frees).  NULL on error (*err). */
char *star_stream_layout(struct star *st, struct nv_stream *s, int *err);

/* Change the class of an empty stream: -ENOTEMPTY once it holds records. */
int star_stream_set_class(struct star *st, struct nv_stream *s, unsigned cls)
	__attribute__((warn_unused_result));

/* Visit every loaded stream with a temporary reference. */
void star_each_stream(struct star *st, void (*fn)(void *arg, struct nv_stream *s), void *arg);

/* ------------------------------------------------------------ data */

/* Append one record (chain_append() semantics, the chain picked by the
 * stream's class).  cb(arg, err) is called once when acked or failed. */
int star_append(struct star *st, struct nv_stream *s, const void *body, size_t len,
		flight_done_fn cb, void *arg, uint64_t *seq) __attribute__((warn_unused_result));

/* One page of reading (read.h). */
int star_read(struct star *st, struct nv_stream *s, struct reader *rd, uint64_t off,
	      void *dst, size_t len, size_t *got, enum read_tier *tier)
	__attribute__((warn_unused_result));
/* star_read() with a cold page handed to sink (read_page_sink()). */
int star_read_sink(struct star *st, struct nv_stream *s, struct reader *rd, uint64_t off,
		   void *dst, size_t len, struct read_sink *sink, size_t *got,
		   enum read_tier *tier) __attribute__((warn_unused_result));
struct reader *star_reader_new(struct star *st, struct nv_stream *s);

/* What star_view_refresh() reads: the refs' end and the trim point (what
 * a read and st_size need: three point reads and a short range), or
 * the settled end too (user.nova.settled and layout; a few more). */
enum star_view { STAR_VIEW_READ, STAR_VIEW_ALL };

/* The committed state of s from the metastore, for a stream this star
 * does not lead (a vacant one: any star serves it from refs; or one
 * another star leads, trims and settles): its positions are raised to
 * the last ref's end, its row's trim point (capped at that end) and,
 * with STAR_VIEW_ALL, its settled end, never lowered; when the acked end
 * moved, star_cfg.acked is called as for an ack, and the wake closed;
 * when the trim point moved, star_cfg.trimmed.  Never takes the lease;
 * on a stream this star leads it changes nothing.  Never from a FUSE
 * read (the hooks invalidate pages).  1: the end moved, 0: it did not,
 * -EAGAIN (the class is restarting), kv error.  In engine/starview.c. */
int star_view_refresh(struct star *st, struct nv_stream *s, enum star_view what);

/* s's trim point as the star leading it said it is (the star API's end,
 * fs/remote.c): raised as star_view_refresh() raises it from the row,
 * star_cfg.trimmed called when it moved.  1 moved, 0 not. */
int star_view_trim(struct star *st, struct nv_stream *s, uint64_t seq, uint64_t byte);

/* The record holding stream byte pos (by_seq false) or record pos
 * (by_seq true): its seq and the offset of its first byte
 * (read_locate_record(); at the acked end, the acked end).  0, -EINVAL
 * past this star's acked end, -ERANGE below the trim point (its refs
 * reclaimed), -EIO.  For the star API's locate (the
 * Gateway's records by sequence).  In engine/startrim.c. */
int star_locate_record(struct star *st, struct nv_stream *s, bool by_seq, uint64_t pos,
		       uint64_t *seq, uint64_t *byte) __attribute__((warn_unused_result));

#endif
