/*
 * bundle.h - the bundle format shared by transit bundles (chain slots)
 * and settled objects (DESIGN.md section 3).
 *
 * For: encoding a flight's per-stream runs into one object, building a
 * footer for chunks copied from elsewhere (settle), and answering "which
 * chunk holds seq S / byte B of stream X" from a fetched footer window by
 * binary search that decodes one fixed-width entry per probe.  Not for:
 * fetching (engine/read.c) or deciding what goes in a flight.
 *
 * Layout of an object (all integers little-endian):
 *
 *   chunk 0 | chunk 1 | ... | entry 0 | entry 1 | ... | trailer
 *   ^0                       ^footer_off                 ^size-32
 *
 * Record frame (inside a chunk, after decompression):
 *   u32 body length | u64 timestamp (ns since the Unix epoch) | body
 *
 * Footer entry, 64 bytes, sorted by (stream_id, first_seq):
 *    0 u64 stream_id     8 u64 first_seq     16 u64 first_byte (stream
 *   offset of the first body byte)  24 u64 chunk_off  32 u64 max_ts
 *   40 u32 nrec  44 u32 comp_len (stored bytes)  48 u32 raw_len (frames)
 *   52 u32 crc32c of the stored bytes  56 u8 codec (0 raw, 1 zstd)
 *   57..63 zero
 *
 * Trailer, 32 bytes:
 *    0 "NOVABNDL"  8 u16 version (1)  10 u16 entry size (64)
 *   12 u32 nentries  16 u64 footer_off  24 u32 crc32c of the entries
 *   28 u32 crc32c of trailer bytes 0..27
 *
 * The footer window of an object is [footer_off, size): the entries and
 * the trailer, fetched with one ranged GET and stored in span refs.
 *
 * Invariants:
 *  1. A chunk holds 1..n whole records of one stream; records are never
 *     split across chunks.
 *  2. Within a stream, entries are contiguous: entry k+1 starts at entry
 *     k's first_seq + nrec and first_byte + body bytes.
 *  3. Decoders trust nothing: every length, offset, count, version and
 *     checksum is checked before use; failure is -EBADMSG, never a read
 *     out of bounds or an unbounded allocation.
 */
#ifndef NOVAFS_ENGINE_BUNDLE_H
#define NOVAFS_ENGINE_BUNDLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "src/base/buf.h"

#define BUNDLE_MAGIC "NOVABNDL"
#define BUNDLE_VERSION 1
#define BUNDLE_FRAME_HDR 12u
#define BUNDLE_ENTRY_SIZE 64u
#define BUNDLE_TRAILER_SIZE 32u
/* Decoder limits: a chunk never exceeds 64 MiB raw or stored, a record
 * body 32 MiB, a footer 4M entries (256 MiB).  Encoders stay far below. */
#define BUNDLE_CHUNK_MAX (64u << 20)
#define BUNDLE_RECORD_MAX (32u << 20)
#define BUNDLE_ENTRIES_MAX (1u << 22)

enum bundle_codec { BUNDLE_RAW = 0, BUNDLE_ZSTD = 1 };

/* Write a record frame header for a body of len bytes at ts. */
void bundle_frame_hdr(uint8_t hdr[BUNDLE_FRAME_HDR], uint32_t len, uint64_t ts);

/* One stream's consecutive records, already framed. */
struct bundle_run {
	uint64_t stream_id;
	uint64_t first_seq;
	uint64_t first_byte;
	const uint8_t *frames; /* borrowed until bundle_out_free() */
	size_t frames_len;
	uint32_t nrec;
};

struct bundle_enc_opts {
	size_t chunk_target; /* raw bytes per chunk before starting another (>= 1) */
	int zstd_level;      /* 0: never compress; else try and keep when it saves >= 1/16
			      * (negative: zstd's fast levels; clamped to zstd's range) */
};

/* An encoded object, as segments to hand to store_put(). */
struct bundle_out {
	struct iovec *iov;   /* owned by out; bases may borrow run frames */
	int iovcnt;
	uint64_t size;       /* object size */
	uint64_t footer_off; /* footer window = [footer_off, size) */
	uint32_t footer_len; /* size - footer_off */
	uint32_t nentries;
	uint64_t raw_bytes;    /* sum of raw chunk lengths */
	uint64_t stored_bytes; /* sum of stored chunk lengths */
	void *priv;          /* owned buffers; freed by bundle_out_free() */
};

/*
 * Encode runs (borrowed; sorted by stream_id, at most one run per stream)
 * into out.  Returns 0, -EINVAL (unsorted, empty run, frames that do not
 * hold nrec records, chunk_target 0), -E2BIG (a record over
 * BUNDLE_RECORD_MAX, or more than BUNDLE_ENTRIES_MAX chunks), -ENOMEM.
 * nruns == 0 gives a valid object of only a trailer (no entries).
 * On failure out is left empty.  The iovecs borrow the runs' frames for
 * uncompressed chunks: keep the runs alive until bundle_out_free().
 */
int bundle_encode(const struct bundle_run *runs, size_t nruns,
		  const struct bundle_enc_opts *opts, struct bundle_out *out)
	__attribute__((warn_unused_result));
void bundle_out_free(struct bundle_out *out);

/* A decoded footer entry. */
struct bundle_entry {
	uint64_t stream_id;
	uint64_t first_seq;
	uint64_t first_byte;
	uint64_t chunk_off;
	uint64_t max_ts;
	uint32_t nrec;
	uint32_t comp_len;
	uint32_t raw_len;
	uint32_t crc;
	uint8_t codec;
};

/* Body bytes of the records of an entry. */
static inline uint64_t bundle_entry_body_bytes(const struct bundle_entry *e)
{
	return (uint64_t)e->raw_len - (uint64_t)e->nrec * BUNDLE_FRAME_HDR;
}

/*
 * Build a footer window (entries + trailer) for entries (sorted by the
 * caller) whose chunks end at footer_off.  Appends to out.  Used by the
 * encoder and by settle, which copies chunks from other objects.
 * 0, -EINVAL (unsorted or overlapping entries), or the nv_buf error.
 */
int bundle_footer_build(const struct bundle_entry *entries, uint32_t n,
			uint64_t footer_off, struct nv_buf *out)
	__attribute__((warn_unused_result));

/* A verified view over a fetched footer window; borrows the window. */
struct bundle_footer {
	const uint8_t *entries; /* n * BUNDLE_ENTRY_SIZE bytes */
	uint32_t n;
	uint64_t footer_off;
};

/*
 * Verify a footer window fetched from object offset win_off: trailer
 * magic, version, entry size and CRC, footer CRC, len == n*64 + 32 and
 * win_off == footer_off.  0 or -EBADMSG.  f borrows win.
 */
int bundle_footer_open(const void *win, size_t len, uint64_t win_off,
		       struct bundle_footer *f) __attribute__((warn_unused_result));

/*
 * Read only the trailer (the last 32 bytes of an object) to learn the
 * footer window: *footer_off, *footer_len.  object_size bounds it.
 * len may exceed 32 (a larger suffix of the object): the last 32 bytes
 * are the trailer.  0 or -EBADMSG.
 */
int bundle_trailer_parse(const void *trailer, size_t len, uint64_t object_size,
			 uint64_t *footer_off, uint32_t *footer_len)
	__attribute__((warn_unused_result));

/* Decode and validate entry i.  0, -EINVAL (i >= n), -EBADMSG. */
int bundle_footer_get(const struct bundle_footer *f, uint32_t i,
		      struct bundle_entry *e) __attribute__((warn_unused_result));

/*
 * Binary search for the entry of stream holding seq (first_seq <= seq <
 * first_seq + nrec), or holding stream byte offset byte.  0 and *idx,
 * -ENOENT (not in this object), -EBADMSG (a probed entry is malformed).
 */
int bundle_footer_find_seq(const struct bundle_footer *f, uint64_t stream,
			   uint64_t seq, uint32_t *idx) __attribute__((warn_unused_result));
int bundle_footer_find_byte(const struct bundle_footer *f, uint64_t stream,
			    uint64_t byte, uint32_t *idx) __attribute__((warn_unused_result));

/* The entries of one stream: [*first, *first + *count).  -ENOENT when
 * the stream has none. */
int bundle_footer_stream(const struct bundle_footer *f, uint64_t stream,
			 uint32_t *first, uint32_t *count) __attribute__((warn_unused_result));

/*
 * Verify and decode a chunk (stored bytes, borrowed) described by e:
 * len == comp_len, CRC, decompression to exactly raw_len, and exactly
 * nrec well-formed frames.  Appends the frames to raw (caller-owned; its
 * max must allow raw_len more bytes).  0, -EBADMSG, -ENOMEM, -E2BIG.
 */
int bundle_chunk_decode(const struct bundle_entry *e, const void *chunk,
			size_t len, struct nv_buf *raw) __attribute__((warn_unused_result));

/*
 * The same checks, decoding into dst (caller-owned, exactly e->raw_len
 * bytes).  A raw chunk may be decoded in place (chunk == dst: the stored
 * bytes are the frames, nothing is copied).  On failure dst holds
 * garbage.  0, -EBADMSG, -ENOMEM.
 */
int bundle_chunk_decode_into(const struct bundle_entry *e, const void *chunk, size_t len,
			     uint8_t *dst) __attribute__((warn_unused_result));

/* A record inside decoded frames; body borrowed from the frames. */
struct bundle_rec {
	uint64_t ts;
	const uint8_t *body;
	uint32_t len;
};

/* Step through frames: 1 and *rec for the record at *off (advanced),
 * 0 at the end, -EBADMSG for a malformed frame. */
int bundle_frames_next(const uint8_t *frames, size_t len, size_t *off,
		       struct bundle_rec *rec) __attribute__((warn_unused_result));

#endif
