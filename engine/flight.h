/*
 * flight.h - flights: batches of appends from many streams that become
 * one transit bundle in one chain slot; and run buffers, the per-stream
 * payload slices a flight is made of.
 *
 * For: admission (a record is framed straight into its stream's run
 * buffer in the open flight), sealing (runs sorted by stream, ready for
 * engine/bundle.c), completion bookkeeping (one callback per record),
 * and the metadata the absorb and the flight index need after release.
 * Not for: ordering or I/O (engine/chain.c owns both).
 *
 * A run buffer is refcounted: the flight holds it until release, the tail
 * window cache may keep it longer.  It is written only while its flight
 * is open (under the chain lock) and immutable from sealing on, so
 * readers never lock it.
 *
 * State diagram of a flight (transitions all in engine/chain.c):
 *
 *   OPEN --seal--> SEALED --put ok--> DURABLE --in slot order--> RELEASED
 *                     |                                             |
 *                     +--halt--> FAILED                    absorb --+--> freed
 *
 *   transition            function
 *   OPEN -> SEALED        chain.c seal_locked()
 *   SEALED -> DURABLE     chain.c put_flight(), run by worker_main()
 *   DURABLE -> RELEASED   chain.c release_ready_locked(), release_flight()
 *   SEALED/OPEN -> FAILED chain.c halt_locked()
 *   RELEASED -> freed     absorb.c after the batch commits
 */
#ifndef NOVAFS_ENGINE_FLIGHT_H
#define NOVAFS_ENGINE_FLIGHT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/bundle.h"
#include "engine/stream.h"

/* ---------------------------------------------------------- run buffers */

struct run_buf {
	atomic_int refs;
	uint64_t stream_id;
	uint64_t first_seq;
	uint64_t first_byte;
	uint32_t nrec;
	uint64_t max_ts;
	uint8_t *frames;  /* nrec record frames (bundle.h), back to back */
	size_t len, cap;
	uint32_t *rec_off; /* offset of each frame in frames */
	uint32_t rec_cap;
};

/* New empty run.  NULL on ENOMEM. */
struct run_buf *rbuf_new(uint64_t stream_id, uint64_t first_seq, uint64_t first_byte);
void rbuf_ref(struct run_buf *rb);
void rbuf_unref(struct run_buf *rb); /* NULL is a no-op */

/* Append one framed record.  0, -ENOMEM, -E2BIG (run over 4 GiB). */
int rbuf_add(struct run_buf *rb, uint64_t ts, const void *body, uint32_t len)
	__attribute__((warn_unused_result));

/* Body bytes in the run. */
static inline uint64_t rbuf_body_bytes(const struct run_buf *rb)
{
	return rb->len - (uint64_t)rb->nrec * BUNDLE_FRAME_HDR;
}

/* Memory the run pins (for cache budgets). */
static inline uint64_t rbuf_mem(const struct run_buf *rb)
{
	return rb->cap + (uint64_t)rb->rec_cap * 4 + sizeof(*rb);
}

/*
 * Copy stream bytes starting at stream offset off (inside the run) into
 * dst, at most len bytes and at most max_recs records.  Returns the bytes
 * copied (0 when off is outside the run).
 */
size_t rbuf_copy(const struct run_buf *rb, uint64_t off, void *dst, size_t len,
		 uint32_t max_recs);

/* ---------------------------------------------------------------- flights */

enum flight_state { FLIGHT_OPEN, FLIGHT_SEALED, FLIGHT_DURABLE, FLIGHT_RELEASED, FLIGHT_FAILED };

typedef void (*flight_done_fn)(void *arg, int err);

struct flight_done {
	flight_done_fn fn;
	void *arg;
};

/* One stream's share of a flight.  rb is dropped at release; the rest is
 * the metadata the absorb and the flight index keep. */
struct flight_run {
	struct nv_stream *stream; /* a reference, dropped when the flight is freed */
	struct run_buf *rb;       /* a reference until release */
	uint64_t first_seq;
	uint64_t first_byte;
	uint64_t nbytes;          /* body bytes */
	uint64_t max_ts;
	uint32_t nrec;
};

struct flight {
	uint64_t gen;     /* chain-local generation, for nv_stream.open_flight_gen */
	uint64_t slot;    /* assigned at seal */
	uint64_t epoch;
	uint8_t cls;
	enum flight_state state;
	struct flight_run *runs;
	uint32_t nruns, runs_cap;
	struct flight_done *done;  /* one per record, admission order */
	uint32_t ndone, done_cap;
	uint64_t bytes;            /* frame bytes (what the bundle's chunks hold raw) */
	uint64_t tokens;           /* backlog tokens held until absorbed */
	uint64_t first_admit_ns;   /* monotonic */
	uint64_t sealed_ns;        /* monotonic */
	/* Set once durable: */
	uint64_t object_size;
	uint64_t footer_off;
	uint32_t footer_len;
	struct flight *next;       /* queue link, owned by whoever queues it */
};

/* New empty open flight.  NULL on ENOMEM. */
struct flight *flight_new(uint64_t gen, unsigned cls, uint64_t epoch);

/* Free: drops run buffers and stream references.  Completions must have
 * been called.  NULL is a no-op. */
void flight_free(struct flight *f);

/*
 * Admit one record of stream s at (seq, byte) into the open flight.  The
 * caller holds the chain lock and has already assigned seq/byte.  cb is
 * recorded and called once at release or failure.  0, -ENOMEM.
 */
int flight_add(struct flight *f, struct nv_stream *s, uint64_t seq, uint64_t byte,
	       uint64_t ts, const void *body, uint32_t len, flight_done_fn cb, void *arg)
	__attribute__((warn_unused_result));

/* Seal: assign the slot and sort runs by stream id. */
void flight_seal(struct flight *f, uint64_t slot);

/* The flight's runs as bundle runs (out has nruns entries, caller-owned). */
void flight_bundle_runs(const struct flight *f, struct bundle_run *out);

/* Call every completion with err, in admission order, and forget them. */
void flight_complete(struct flight *f, int err);

#endif
