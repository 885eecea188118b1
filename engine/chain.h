/*
 * chain.h - a star's writing history in one class for one epoch: slots
 * 0, 1, 2, ... each holding one transit bundle.
 *
 * For: the append path.  Admission assigns each record its sequence
 * number and byte offset (contiguous per stream) and frames it into the
 * open flight; flights are sealed by size, by linger (with group_commit:
 * when a slot PUT returns, so whoever arrived during a flush rides the
 * next one), or at once when the chain is idle (unless linger_idle); up
 * to put_window slot
 * PUTs run at once; and
 * acknowledgements are released strictly in slot order ("one flusher
 * owns order"): a flight is acked only when its slot and every lower slot
 * are durable.  Not for: what happens after release (engine/absorb.c).
 *
 * Slot key: chains/<class>/<star>/<epoch: 16 hex>/<slot: 16 hex>.
 *
 * State diagram of a chain:
 *
 *   RUNNING --put fails past put_timeout, or slot taken--> HALTED
 *      |                                                     |
 *      +-------------- chain_stop() ------------------> STOPPED <-+
 *
 *   RUNNING  appends admitted.
 *   HALTED   a slot could not be written: every flight at or above it,
 *            and every later append, fails with the halt error; flights
 *            below it are still acked when durable.
 *   STOPPED  threads joined; only chain_free() remains.
 *
 * Locking: c->lock guards the open flight, the sealed list, the put
 * cursor, the in-flight count, the halt state and the admission fields
 * of every stream of this class (nv_stream next_seq, next_byte, last_ts,
 * open_flight_gen, open_run).  Lock order: c->lock, then a stream's lock.
 * Completions and hooks run with no lock held, from the one thread that
 * is releasing (c->releasing), in slot order.
 *
 * Invariants:
 *  1. Slots are assigned at seal, consecutively from first_slot.
 *  2. A record's completion is called exactly once: 0 after its slot and
 *     every lower slot are durable, or an error when it can never be, or
 *     when the star may not ack any more (chain_cfg.may_ack).
 *  3. The stream's acked end moves (and the ack hook runs) before any
 *     completion of that flight is called, so a writer that sees its
 *     write() return sees the new st_size.
 *  4. Released flights reach the release callback in slot order.
 */
#ifndef NOVAFS_ENGINE_CHAIN_H
#define NOVAFS_ENGINE_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/backlog.h"
#include "engine/bundle.h"
#include "engine/flight.h"
#include "engine/stats.h"
#include "engine/store/store.h"
#include "engine/stream.h"
#include "engine/tailcache.h"

struct chain;

/* Per-record backlog charge on top of the body: frame header plus the
 * metadata a record pins until absorbed. */
#define CHAIN_RECORD_OVERHEAD 64u

/* The largest record accepted (a FUSE write is at most max_write). */
#define CHAIN_RECORD_MAX (16u << 20)

/* A flight is sealed once it holds this many streams, so one slot's
 * batch marker always fits the metastore (meta/markers.h
 * META_MARKER_STREAMS_MAX; engine/absorb.c splits larger batches). */
#define CHAIN_FLIGHT_STREAMS_MAX 16384

struct chain_cfg {
	unsigned cls;
	const char *star;         /* copied */
	uint64_t epoch;
	uint64_t first_slot;
	unsigned put_window;      /* slot PUTs in flight at once (>= 1) */
	uint64_t flight_max;      /* seal when a flight holds this many frame bytes
				   * (or CHAIN_FLIGHT_STREAMS_MAX streams) */
	uint64_t linger_ns;       /* seal this long after a flight's first record */
	bool group_commit;        /* instead of linger: while a PUT is in flight, the
				   * open flight seals when a PUT returns */
	bool linger_idle;         /* without group_commit: a flight waits out its
				   * linger on an idle chain too (fewer PUTs for a
				   * trickle); else an idle chain seals at once */
	uint64_t put_timeout_ns;  /* give up on a slot (halt) after retrying this long */
	struct bundle_enc_opts enc;
	struct store *store;      /* borrowed for the chain's life */
	struct backlog *backlog;  /* borrowed */
	struct tailcache *tc;     /* borrowed; may be NULL */
	struct nv_stats *stats;   /* borrowed */
	/* Takes ownership of a released flight; called in slot order. */
	void (*release)(void *arg, struct flight *f);
	void *release_arg;
	/* Called (no locks held) after a stream's acked end moved, before
	 * the flight's completions; may be NULL. */
	void (*acked)(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte);
	void *acked_arg;
	/* Called once, no locks held, when the chain halts; may be NULL. */
	void (*halted)(void *arg, unsigned cls, uint64_t epoch, int err);
	void *halted_arg;
	/* Asked at every release, before the completions (may be NULL:
	 * always): 0, or the error the flight's writers get instead of their
	 * ack, because this star is past its lease deadline (engine/lease.h
	 * invariant 1).  The flight is released to the absorb all the same:
	 * it is durable, and whoever settles the chain absorbs it. */
	int (*may_ack)(void *arg);
	void *may_ack_arg;
};

/* Start a chain (its sealer and put_window put workers).  0 and *out, or
 * -ENOMEM / -EAGAIN (thread creation). */
int chain_new(const struct chain_cfg *cfg, struct chain **out)
	__attribute__((warn_unused_result));

/*
 * Append one record of len bytes (copied) to stream s, whose class must
 * be this chain's.  Blocks while the backlog has no tokens.  On 0 the
 * record is admitted and cb(arg, err) will be called exactly once
 * (invariant 2); on error cb is never called:
 *   -EFBIG  record larger than CHAIN_RECORD_MAX
 *   -ENOENT the stream was deleted
 *   -EAGAIN the stream's class changed; re-pick the chain
 *   -ESHUTDOWN the chain is stopping
 *   the halt error (-EIO, -ENOSPC, ...) when the chain is halted
 *   -ENOMEM
 * *seq (may be NULL) gets the record's sequence number.
 */
int chain_append(struct chain *c, struct nv_stream *s, const void *body, size_t len,
		 flight_done_fn cb, void *arg, uint64_t *seq) __attribute__((warn_unused_result));

/* Hold admission on this chain (no record is admitted meanwhile), for a
 * change that must not race an append, such as a stream's class. */
void chain_admission_lock(struct chain *c);
void chain_admission_unlock(struct chain *c);

/* Seal the open flight now (unmount, explicit flush). */
void chain_flush(struct chain *c);

/* Seal and wait until every admitted record is acked or failed.  Returns
 * 0, or the halt error. */
int chain_drain(struct chain *c);

/* Refuse new appends (-ESHUTDOWN), drain, and join the threads. */
void chain_stop(struct chain *c);
void chain_free(struct chain *c); /* after chain_stop(); NULL is a no-op */

/* 0, or the error that halted the chain. */
int chain_halted(struct chain *c);
/* Next slot that will be assigned (= slots sealed so far + first_slot). */
uint64_t chain_next_slot(struct chain *c);
uint64_t chain_epoch(const struct chain *c);
unsigned chain_class(const struct chain *c);

/*
 * The fence object: recovery of a stopped chain puts one, create-once, in
 * the slot right after the chain's durable prefix (the cut), so a zombie
 * writer of that epoch can never land that slot (its create-once PUT
 * fails with -EEXIST and the chain halts).  32 bytes:
 *   "NOVAFENC" | u64 epoch | u64 cut | u32 crc32c of bytes 0..23 | u32 0
 * A bundle can never look like it: a bundle's first 8 bytes are chunk
 * data, or its trailer magic when it is empty.
 */
#define CHAIN_FENCE_SIZE 32u
void chain_fence_encode(uint8_t out[CHAIN_FENCE_SIZE], uint64_t epoch, uint64_t cut);
/* 1 when p/n is a valid fence object (and *epoch, *cut), else 0. */
int chain_fence_decode(const void *p, size_t n, uint64_t *epoch, uint64_t *cut);

/* Format a slot key into buf (cap >= 96).  Returns buf. */
char *chain_slot_key(char *buf, size_t cap, unsigned cls, const char *star,
		     uint64_t epoch, uint64_t slot);
#define CHAIN_KEY_MAX 112

#endif
