/*
 * read.h - the read path: one page from one tier.
 *
 * For: answering "bytes of stream X at offset B" in the order the read
 * path seed fixes: the trim watermark first (below it: a hole of zeros),
 * then the tail window cache (hot, no I/O), then the stream's position
 * relative to the ref frontier: above it the flight index names the
 * transit slot, below it one floor lookup in the byte index names the
 * ref and its slot (for a reader: its ref window, up to 32 refs read
 * with one ascending range of the byte index where a ref starts, so a
 * stream of many small unsettled refs costs one metastore request per
 * window, not one per page).  A cold page is one ranged GET of the footer window
 * (cached), then one ranged GET of exactly the chunk needed (cached,
 * decoded once).  Sequential readers get read-ahead: a pipeline of up to
 * `readahead` chunks (their footers and extents) fetched by a small pool
 * while the current one is served.  Not for: filling a whole FUSE
 * request (fs/ loops over pages) or waiting for data (engine/wake.h).
 *
 * Invariants:
 *  1. A page never spans tiers and never passes the acked end: a read
 *     at or past it is end-of-stream (got 0).
 *  2. A page is at most READ_PAGE_MAX bytes and READ_PAGE_RECORDS
 *     records, but always at least part of one record.
 *  3. Every byte served was verified: chunks by CRC and frame structure,
 *     footers by CRC; a bad object is -EIO, logged and counted, never
 *     wrong bytes.
 *  4. Memory: decoded chunks and footers live in one byte-budgeted cache
 *     (read_cache_mib); read-ahead never runs further than `readahead`
 *     chunks in front of a reader; a reader keeps two ref windows of at
 *     most 32 refs each, a window ending with the ref that brings it to
 *     4096 slots (so one ref's size more at most).
 *  5. A ref window may be stale (settlement replaced its span refs and
 *     deleted their slots): an object missing behind a windowed location
 *     is asked of the metastore again before it is an error.
 *  6. The stream's trim point in memory may be behind its row's on a
 *     star that does not lead it (another star trimmed it: fs/remote.h
 *     invariant 6).  So on a shared metastore (read_cfg.shared) every
 *     ref or ref window read for a stream this star does not lead is
 *     read with the row's trim point, and a position below it reads as
 *     zeros (a locate: -ERANGE), as below this star's own; that covers
 *     the settled object holding the trim point, which starts below it
 *     (trim re-keys the catalog row at that object, and the object keeps
 *     the bytes until it is rewritten).  A position below the frontier
 *     that no ref holds (reclaimed below a trim) is looked up in the row
 *     before it is an error.  The one position still read as the bytes
 *     it was: one in a reader's ref window read before the trim, until
 *     the view learns it (any getattr here, star_view_refresh()) or the
 *     window's objects go (a trim is ordered after the reads that
 *     loaded the window; t_stars_trim_view).
 */
#ifndef NOVAFS_ENGINE_READ_H
#define NOVAFS_ENGINE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "engine/rcache.h"
#include "engine/stats.h"
#include "engine/store/store.h"
#include "engine/stream.h"
#include "engine/tailcache.h"
#include "meta/kv.h"

#define READ_PAGE_MAX (1u << 20)
#define READ_PAGE_RECORDS 1000u

enum read_tier { READ_EOF = 0, READ_TRIM, READ_HOT, READ_FLIGHT, READ_COLD };

struct read_cfg {
	struct store *store;     /* borrowed */
	struct kv *kv;           /* borrowed */
	struct tailcache *tc;    /* borrowed; may be NULL */
	struct nv_stats *stats;  /* borrowed */
	const char *star;        /* copied: names our own slots in the flight index */
	uint64_t cache_bytes;    /* decoded chunks + footers */
	unsigned prefetch_threads;
	unsigned readahead;      /* chunks in front of a sequential reader (0: off) */
	uint32_t whole_max;      /* a cold object of at most this many bytes up to
				  * its footer's end, not mostly other streams'
				  * bytes, is read whole: its footer and chunks
				  * in one GET, not two (engine/chunkfetch.h
				  * invariant 2; 0: never) */
	bool shared;             /* other stars share the metastore
				  * (kv_shared()): they may trim a stream
				  * this star does not lead (invariant 6) */
};

struct read_engine;
struct reader;

int read_engine_new(const struct read_cfg *cfg, struct read_engine **out)
	__attribute__((warn_unused_result));
/* Stops the prefetch pool; every reader must be freed first. */
void read_engine_free(struct read_engine *re);

/* Per-handle state for sequential detection and read-ahead.  Takes a
 * stream reference.  NULL on ENOMEM (reads then work without it). */
struct reader *reader_new(struct read_engine *re, struct nv_stream *s);
void reader_free(struct reader *rd); /* NULL is a no-op */

/*
 * Read one page of stream s at offset off into dst (caller-owned, len
 * bytes).  rd may be NULL.  On 0, *got bytes were written (0 means
 * end-of-stream) and *tier says where they came from (READ_TRIM: zeros
 * below the trim point, this star's or the row's: invariant 6).
 * Errors: -EIO (a referenced object is missing or corrupt, or no ref
 * covers a position above the trim point; logged), kv errors.
 */
int read_page(struct read_engine *re, struct nv_stream *s, struct reader *rd, uint64_t off,
	      void *dst, size_t len, size_t *got, enum read_tier *tier)
	__attribute__((warn_unused_result));

/*
 * Where a reader that replies with a gather list (fs/file.c: FUSE's
 * fuse_reply_iov()) takes its bytes from: a page read from a chunk
 * (READ_COLD, or READ_FLIGHT from a slot) is handed over as iovecs into
 * the cached chunk, with a reference on the chunk (pins),
 * instead of being copied into dst.  A chunk the cache evicts meanwhile
 * lives on until the reply is sent: outside the cache's budget
 * (invariant 4) by at most maxpins chunks per request in flight.
 * A page from another tier, or one that does not fit the room left, is
 * copied into dst as before and appended by the caller.  The caller
 * owns the arrays and unrefs pins[0..npins) after its reply.
 */
struct read_sink {
	struct iovec *iov;
	int niov, maxiov;
	struct rc_blob **pins;
	int npins, maxpins;
};

/* read_page(), with a cold page handed to sink (NULL: read_page()):
 * sunk when sink->npins grew (by one), else copied into dst; either way
 * *got bytes were read. */
int read_page_sink(struct read_engine *re, struct nv_stream *s, struct reader *rd,
		   uint64_t off, void *dst, size_t len, struct read_sink *sink, size_t *got,
		   enum read_tier *tier) __attribute__((warn_unused_result));

/*
 * The record holding stream byte pos (by_seq false) or record pos (by_seq
 * true): its seq and the offset of its first body byte.  At the acked end
 * it answers the acked end.  0, -EINVAL (past the end), -ERANGE (the
 * record is below the trim point: the view's, even while the tail still
 * holds it, or the row's, which this star's view may not have learned
 * yet: invariant 6), -EIO.
 */
int read_locate_record(struct read_engine *re, struct nv_stream *s, bool by_seq, uint64_t pos,
		       uint64_t *seq, uint64_t *byte) __attribute__((warn_unused_result));

/* Decoded-chunk and footer cache bytes (a gauge). */
uint64_t read_cache_bytes(struct read_engine *re);

const char *read_tier_name(enum read_tier t);

#endif
