/*
 * fuzz_bundle_chunk.c - the chunk decoder and the record-frame walker
 * (engine/bundle.h: bundle_chunk_decode, bundle_frames_next).
 *
 * Input: 64-byte footer entry (the bundle.h layout; reserved bytes are
 *        ignored: bundle_chunk_decode takes a decoded entry)
 *        | u8 fix | the chunk's stored bytes.
 * fix repairs the entry before the call, so the fuzzer gets past the
 * cheap checks into zstd and the frame checks:
 *   0x01 comp_len = chunk length   0x02 codec &= 1
 *   0x04 raw codec: raw_len = comp_len
 *   0x08 raw codec: nrec = the number of frames in the chunk, when they
 *        tile it (counted here, independently of bundle.c)
 *   0x10 crc = crc32c of the chunk
 *
 * Checks:
 *  - bundle_frames_next() over the stored bytes never steps outside them
 *    (fuzz_walk_frames()).
 *  - bundle_chunk_decode() answers 0, -EBADMSG or -E2BIG (the output
 *    buffer's limit), appends nothing on failure and exactly raw_len
 *    bytes on success, keeping what the buffer held before and the NUL
 *    after the content.
 *  - On success the frames are exactly nrec well-formed records filling
 *    raw_len; a raw chunk decodes to itself; and the frames survive the
 *    encoder: bundle_encode() of them as one run, then trailer, footer
 *    and chunk decoding, gives back the same frames and entry fields.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "engine/bundle.h"
#include "src/base/buf.h"
#include "src/base/crc32c.h"
#include "src/base/endian.h"
#include "tests/fuzz/fuzz.h"

/* Largest decoded chunk the target accepts (bundle_chunk_decode then
 * answers -E2BIG, as documented): far above what an input of a few KiB
 * can produce raw, and bounds what a declared zstd size may allocate. */
#define OUT_MAX (4u << 20)
static const char prefix[] = "pre";

/* Frames tiling p[0, len): their number, or 0 when they do not tile. */
static uint32_t count_frames(const uint8_t *p, size_t len)
{
	size_t off = 0;
	uint32_t n = 0;

	while (off < len) {
		uint32_t blen;

		if (len - off < BUNDLE_FRAME_HDR)
			return 0;
		blen = nv_get_le32(p + off);
		if (blen > len - off - BUNDLE_FRAME_HDR)
			return 0;
		off += BUNDLE_FRAME_HDR + blen;
		n++;
	}
	return n;
}

static void entry_from_bytes(const uint8_t *p, struct bundle_entry *e)
{
	e->stream_id = nv_get_le64(p + 0);
	e->first_seq = nv_get_le64(p + 8);
	e->first_byte = nv_get_le64(p + 16);
	e->chunk_off = nv_get_le64(p + 24);
	e->max_ts = nv_get_le64(p + 32);
	e->nrec = nv_get_le32(p + 40);
	e->comp_len = nv_get_le32(p + 44);
	e->raw_len = nv_get_le32(p + 48);
	e->crc = nv_get_le32(p + 52);
	e->codec = p[56];
}

/* Re-encode decoded frames as one run and decode them back. */
static void reencode(const struct bundle_entry *e, const uint8_t *frames)
{
	struct bundle_run run = {
		.stream_id = e->stream_id, .first_seq = e->first_seq,
		.first_byte = e->first_byte, .frames = frames,
		.frames_len = e->raw_len, .nrec = e->nrec,
	};
	struct bundle_enc_opts opts = { .chunk_target = e->raw_len, .zstd_level = 1 };
	struct bundle_out out;
	struct bundle_footer f;
	struct bundle_entry e2;
	struct nv_buf raw;
	uint64_t off, max_ts = 0;
	uint32_t flen;
	uint8_t *obj;
	size_t pos = 0;
	int rc;

	rc = bundle_encode(&run, 1, &opts, &out);
	FUZZ_ASSERT(rc == 0);
	FUZZ_ASSERT(out.nentries == 1 && out.raw_bytes == e->raw_len);
	obj = malloc(out.size);
	FUZZ_ASSERT(obj);
	for (int i = 0; i < out.iovcnt; i++) {
		memcpy(obj + pos, out.iov[i].iov_base, out.iov[i].iov_len);
		pos += out.iov[i].iov_len;
	}
	FUZZ_ASSERT(pos == out.size);
	FUZZ_ASSERT(bundle_trailer_parse(obj, out.size, out.size, &off, &flen) == 0);
	FUZZ_ASSERT(off == out.footer_off && flen == out.footer_len);
	FUZZ_ASSERT(bundle_footer_open(obj + off, flen, off, &f) == 0);
	FUZZ_ASSERT(f.n == 1 && bundle_footer_get(&f, 0, &e2) == 0);
	FUZZ_ASSERT(e2.stream_id == e->stream_id && e2.first_seq == e->first_seq &&
		    e2.first_byte == e->first_byte && e2.nrec == e->nrec &&
		    e2.raw_len == e->raw_len && e2.chunk_off == 0);
	for (size_t o = 0; o < e->raw_len;) {
		uint64_t ts = nv_get_le64(frames + o + 4);

		if (ts > max_ts)
			max_ts = ts;
		o += BUNDLE_FRAME_HDR + nv_get_le32(frames + o);
	}
	FUZZ_ASSERT(e2.max_ts == max_ts);
	nv_buf_init(&raw, OUT_MAX);
	FUZZ_ASSERT(bundle_chunk_decode(&e2, obj + e2.chunk_off, e2.comp_len, &raw) == 0);
	FUZZ_ASSERT(raw.len == e->raw_len && !memcmp(raw.ptr, frames, raw.len));
	nv_buf_free(&raw);
	free(obj);
	bundle_out_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in;
	struct bundle_entry e;
	struct nv_buf raw;
	const uint8_t *rest;
	uint8_t *chunk;
	size_t len;
	unsigned fix;
	long nframes;
	int rc;

	fuzz_quiet();
	if (size < BUNDLE_ENTRY_SIZE)
		return 0;
	entry_from_bytes(data, &e);
	fuzz_in_init(&in, data + BUNDLE_ENTRY_SIZE, size - BUNDLE_ENTRY_SIZE);
	fix = fuzz_u8(&in);
	rest = fuzz_rest(&in, &len);
	chunk = fuzz_memdup(rest, len);

	if (fix & 0x01)
		e.comp_len = (uint32_t)len;
	if (fix & 0x02)
		e.codec &= 1;
	if ((fix & 0x04) && e.codec == BUNDLE_RAW)
		e.raw_len = e.comp_len;
	if ((fix & 0x08) && e.codec == BUNDLE_RAW && chunk)
		e.nrec = count_frames(chunk, len);
	if ((fix & 0x10) && chunk)
		e.crc = nv_crc32c(0, chunk, len);

	/* The stored bytes as frames, whatever the entry says. */
	nframes = fuzz_walk_frames(chunk, len);
	FUZZ_ASSERT(nframes >= -1);

	nv_buf_init(&raw, OUT_MAX + sizeof(prefix) - 1);
	FUZZ_ASSERT(nv_buf_add(&raw, prefix, sizeof(prefix) - 1) == 0);
	rc = bundle_chunk_decode(&e, chunk, len, &raw);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG || rc == -E2BIG);
	FUZZ_ASSERT(!memcmp(raw.ptr, prefix, sizeof(prefix) - 1));
	if (rc) {
		FUZZ_ASSERT(raw.len == sizeof(prefix) - 1);
		if (rc == -E2BIG)
			FUZZ_ASSERT(e.raw_len > OUT_MAX);
	} else {
		const uint8_t *frames = raw.ptr + sizeof(prefix) - 1;

		FUZZ_ASSERT(raw.len == sizeof(prefix) - 1 + (size_t)e.raw_len);
		FUZZ_ASSERT(raw.ptr[raw.len] == 0);
		FUZZ_ASSERT(len == e.comp_len && nv_crc32c(0, chunk, len) == e.crc);
		FUZZ_ASSERT(e.codec == BUNDLE_RAW || e.codec == BUNDLE_ZSTD);
		FUZZ_ASSERT(fuzz_walk_frames(frames, e.raw_len) == (long)e.nrec);
		if (e.codec == BUNDLE_RAW)
			FUZZ_ASSERT(e.raw_len == len && !memcmp(frames, chunk, len));
		reencode(&e, frames);
	}
	nv_buf_free(&raw);
	free(chunk);
	return 0;
}
