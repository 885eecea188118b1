/*
 * test_bundle.c - unit tests of engine/bundle.c.
 *
 * What is pinned: encode/decode round trips over several streams and data
 * kinds (compressible, incompressible, mixed; zstd on and off), the
 * chunking and keep-if-it-pays rules, zero-copy iovecs, point lookups by
 * seq and by byte for every record, and rejection of every corruption we
 * can think of: single-byte flips, truncation, wrong offsets, CRC-valid
 * hostile footers (the test reseals the CRCs after tampering), zstd bombs
 * and frames that do not add up.  Also concurrent encoders (per-thread
 * zstd contexts, freed at thread exit: run under valgrind).
 *
 * Objects are built from a deterministic PRNG, so a failure reproduces.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zstd.h>

#include "engine/bundle.h"
#include "src/base/crc32c.h"
#include "src/base/endian.h"

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

enum data_kind { DATA_TEXT, DATA_RANDOM, DATA_MIXED };

struct trec {
	uint64_t ts;
	uint32_t len;
	size_t body_off; /* offset of the body in the stream's frames */
};

struct tstream {
	uint64_t id, first_seq, first_byte;
	uint32_t nrec;
	struct trec *recs;
	uint8_t *frames; /* owned unless packed */
	size_t frames_len;
	uint32_t *entry_of; /* record index -> footer entry index */
};

struct fixture {
	struct tstream s[5];
	size_t ns;
	uint8_t *packed; /* when every stream's frames share one buffer */
	struct bundle_run runs[5];
	struct bundle_enc_opts opts;
	struct bundle_out out;
	uint8_t *obj; /* the object, flattened from the iovecs */
	struct bundle_footer f;
	uint32_t nzstd[5]; /* zstd chunks per stream, set by fx_verify() */
};

static const char phrase[] = "the quick brown fox jumps over the lazy dog; ";

static void fill_body(uint8_t *p, size_t n, enum data_kind kind)
{
	if (kind == DATA_MIXED)
		kind = (rng() & 1) ? DATA_TEXT : DATA_RANDOM;
	for (size_t i = 0; i < n; i++) {
		if (kind == DATA_TEXT)
			p[i] = (uint8_t)phrase[i % (sizeof(phrase) - 1)];
		else
			p[i] = (uint8_t)rng();
	}
}

/* Record lengths of one stream: zero-length bodies, small, medium, and
 * optionally one record of big bytes (bigger than the chunk target). */
static uint32_t pick_len(size_t si, uint32_t r, uint32_t big)
{
	if (si == 3)
		return 0; /* a stream of empty records only */
	if (big && r == 5)
		return big;
	if (r % 7 == 3)
		return 0;
	if (r % 10 == 9)
		return 1000 + (uint32_t)(rng() % 3000);
	return (uint32_t)(rng() % 300);
}

/*
 * Build ns streams (<= 5) of nrec records each; stream 1 gets one record
 * of big bytes when big != 0.  With packed, all frames live in one buffer
 * back to back.
 */
static void fx_build(struct fixture *fx, size_t ns, uint32_t nrec,
		     enum data_kind kind, uint32_t big, int packed)
{
	static const uint64_t ids[5] = { 0, 17, 1000, 1ull << 40, UINT64_MAX };
	size_t total = 0, pos = 0;

	memset(fx, 0, sizeof(*fx));
	rng_state = 42;
	fx->ns = ns;
	for (size_t si = 0; si < ns; si++) {
		struct tstream *s = &fx->s[si];
		uint64_t ts = 1700000000000000000ull + si;

		s->id = ids[si];
		s->first_seq = si == 0 ? 0 : si * 1000 + 7;
		s->first_byte = si * 123457;
		s->nrec = si == 3 ? nrec * 3 : nrec;
		s->recs = calloc(s->nrec, sizeof(*s->recs));
		s->entry_of = calloc(s->nrec, sizeof(*s->entry_of));
		assert_non_null(s->recs);
		assert_non_null(s->entry_of);
		for (uint32_t r = 0; r < s->nrec; r++) {
			s->recs[r].len = pick_len(si, r, si == 1 ? big : 0);
			/* Timestamps mostly rise, sometimes step back. */
			ts += rng() % 1000;
			s->recs[r].ts = (r % 13 == 12) ? ts - 5000 : ts;
			s->frames_len += BUNDLE_FRAME_HDR + s->recs[r].len;
		}
		total += s->frames_len;
	}
	if (packed) {
		fx->packed = malloc(total);
		assert_non_null(fx->packed);
	}
	for (size_t si = 0; si < ns; si++) {
		struct tstream *s = &fx->s[si];
		size_t off = 0;

		if (packed) {
			s->frames = fx->packed + pos;
			pos += s->frames_len;
		} else {
			s->frames = malloc(s->frames_len);
			assert_non_null(s->frames);
		}
		for (uint32_t r = 0; r < s->nrec; r++) {
			bundle_frame_hdr(s->frames + off, s->recs[r].len, s->recs[r].ts);
			off += BUNDLE_FRAME_HDR;
			s->recs[r].body_off = off;
			fill_body(s->frames + off, s->recs[r].len, kind);
			off += s->recs[r].len;
		}
		assert_int_equal(off, s->frames_len);
		fx->runs[si] = (struct bundle_run){
			.stream_id = s->id, .first_seq = s->first_seq,
			.first_byte = s->first_byte, .frames = s->frames,
			.frames_len = s->frames_len, .nrec = s->nrec,
		};
	}
}

/* Encode with opts and flatten into fx->obj; check the out's numbers. */
static void fx_encode(struct fixture *fx, size_t chunk_target, int level)
{
	size_t total = 0;
	uint64_t foff;
	uint32_t flen;

	fx->opts.chunk_target = chunk_target;
	fx->opts.zstd_level = level;
	assert_int_equal(bundle_encode(fx->runs, fx->ns, &fx->opts, &fx->out), 0);
	assert_true(fx->out.iovcnt >= 1);
	for (int i = 0; i < fx->out.iovcnt; i++)
		total += fx->out.iov[i].iov_len;
	assert_int_equal(total, fx->out.size);
	assert_int_equal(fx->out.footer_len, fx->out.size - fx->out.footer_off);
	assert_int_equal(fx->out.footer_len,
			 fx->out.nentries * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE);
	assert_int_equal(fx->out.stored_bytes, fx->out.footer_off);
	fx->obj = malloc(fx->out.size);
	assert_non_null(fx->obj);
	total = 0;
	for (int i = 0; i < fx->out.iovcnt; i++) {
		memcpy(fx->obj + total, fx->out.iov[i].iov_base, fx->out.iov[i].iov_len);
		total += fx->out.iov[i].iov_len;
	}
	/* The trailer alone locates the footer window, which opens. */
	assert_int_equal(bundle_trailer_parse(fx->obj + fx->out.size - BUNDLE_TRAILER_SIZE,
					      BUNDLE_TRAILER_SIZE, fx->out.size,
					      &foff, &flen), 0);
	assert_int_equal(foff, fx->out.footer_off);
	assert_int_equal(flen, fx->out.footer_len);
	assert_int_equal(bundle_footer_open(fx->obj + foff, flen, foff, &fx->f), 0);
	assert_int_equal(fx->f.n, fx->out.nentries);
	assert_int_equal(fx->f.footer_off, foff);
}

static void fx_free(struct fixture *fx)
{
	bundle_out_free(&fx->out);
	for (size_t si = 0; si < fx->ns; si++) {
		if (!fx->packed)
			free(fx->s[si].frames);
		free(fx->s[si].recs);
		free(fx->s[si].entry_of);
	}
	free(fx->packed);
	free(fx->obj);
	memset(fx, 0, sizeof(*fx));
}

/*
 * Walk every footer entry, decode every chunk and compare each record with
 * the source; check the continuity, chunking and compression rules.
 * Fills entry_of.  Returns the number of zstd chunks.
 */
static uint32_t fx_verify(struct fixture *fx)
{
	size_t si = 0;
	uint32_t ri = 0, nzstd = 0;
	uint64_t seq = 0, byte = 0, chunk_off = 0, raw_total = 0;
	struct nv_buf raw;

	nv_buf_init(&raw, BUNDLE_CHUNK_MAX);
	for (uint32_t i = 0; i < fx->f.n; i++) {
		struct bundle_entry e;
		struct bundle_rec rec;
		struct tstream *s;
		uint64_t max_ts = 0, body = 0;
		size_t off = 0;
		int rc;

		assert_int_equal(bundle_footer_get(&fx->f, i, &e), 0);
		if (si < fx->ns && ri == fx->s[si].nrec) {
			si++;
			ri = 0;
		}
		assert_true(si < fx->ns);
		s = &fx->s[si];
		if (ri == 0) {
			seq = s->first_seq;
			byte = s->first_byte;
		}
		/* Entries are contiguous per stream, chunks back to back. */
		assert_int_equal(e.stream_id, s->id);
		assert_int_equal(e.first_seq, seq);
		assert_int_equal(e.first_byte, byte);
		assert_int_equal(e.chunk_off, chunk_off);
		/* Chunking: within the target unless a single record, and
		 * closed only when the next record of the run would pass it. */
		assert_true(e.raw_len <= fx->opts.chunk_target || e.nrec == 1);
		if (ri + e.nrec < s->nrec)
			assert_true(e.raw_len + BUNDLE_FRAME_HDR + s->recs[ri + e.nrec].len >
				    fx->opts.chunk_target);
		/* Compression: kept iff zstd saves at least raw/16. */
		if (fx->opts.zstd_level == 0) {
			assert_int_equal(e.codec, BUNDLE_RAW);
		} else {
			const uint8_t *src = s->frames + s->recs[ri].body_off - BUNDLE_FRAME_HDR;
			size_t bound = ZSTD_compressBound(e.raw_len);
			void *tmp = malloc(bound);
			size_t c;

			assert_non_null(tmp);
			c = ZSTD_compress(tmp, bound, src, e.raw_len, fx->opts.zstd_level);
			assert_false(ZSTD_isError(c));
			free(tmp);
			if (c <= e.raw_len - e.raw_len / 16) {
				assert_int_equal(e.codec, BUNDLE_ZSTD);
				assert_int_equal(e.comp_len, c);
			} else {
				assert_int_equal(e.codec, BUNDLE_RAW);
			}
		}
		if (e.codec == BUNDLE_ZSTD) {
			nzstd++;
			fx->nzstd[si]++;
		}
		else
			assert_int_equal(e.comp_len, e.raw_len);

		raw.len = 0;
		rc = bundle_chunk_decode(&e, fx->obj + e.chunk_off, e.comp_len, &raw);
		assert_int_equal(rc, 0);
		assert_int_equal(raw.len, e.raw_len);
		for (uint32_t k = 0; k < e.nrec; k++, ri++) {
			const struct trec *t = &s->recs[ri];

			assert_int_equal(bundle_frames_next(raw.ptr, raw.len, &off, &rec), 1);
			assert_int_equal(rec.len, t->len);
			assert_int_equal(rec.ts, t->ts);
			assert_memory_equal(rec.body, s->frames + t->body_off, t->len);
			if (rec.ts > max_ts)
				max_ts = rec.ts;
			body += rec.len;
			s->entry_of[ri] = i;
		}
		assert_int_equal(bundle_frames_next(raw.ptr, raw.len, &off, &rec), 0);
		assert_int_equal(e.max_ts, max_ts);
		assert_int_equal(bundle_entry_body_bytes(&e), body);
		seq += e.nrec;
		byte += body;
		chunk_off += e.comp_len;
		raw_total += e.raw_len;
	}
	/* Every record of every stream was seen. */
	assert_int_equal(si, fx->ns - 1);
	assert_int_equal(ri, fx->s[fx->ns - 1].nrec);
	assert_int_equal(chunk_off, fx->out.footer_off);
	assert_int_equal(raw_total, fx->out.raw_bytes);
	nv_buf_free(&raw);
	return nzstd;
}

/* Recompute the entries CRC and the trailer CRC of a footer window. */
static void reseal(uint8_t *win, size_t len)
{
	uint8_t *t = win + len - BUNDLE_TRAILER_SIZE;

	nv_put_le32(t + 24, nv_crc32c(0, win, len - BUNDLE_TRAILER_SIZE));
	nv_put_le32(t + 28, nv_crc32c(0, t, 28));
}

/* A chunk and its entry built by hand: frames of nrec records. */
static size_t make_frames(uint8_t *p, uint32_t nrec, uint32_t body)
{
	size_t off = 0;

	for (uint32_t i = 0; i < nrec; i++) {
		bundle_frame_hdr(p + off, body, 1000 + i);
		memset(p + off + BUNDLE_FRAME_HDR, 'a' + (int)i, body);
		off += BUNDLE_FRAME_HDR + body;
	}
	return off;
}

static void raw_entry(struct bundle_entry *e, const uint8_t *chunk, size_t len,
		      uint32_t nrec)
{
	memset(e, 0, sizeof(*e));
	e->stream_id = 9;
	e->first_seq = 100;
	e->nrec = nrec;
	e->comp_len = (uint32_t)len;
	e->raw_len = (uint32_t)len;
	e->crc = nv_crc32c(0, chunk, len);
	e->codec = BUNDLE_RAW;
}

/* ------------------------------------------------------------------ */
/* round trips                                                         */

static void round_trip(enum data_kind kind, int level, int expect_zstd)
{
	struct fixture fx;
	uint32_t nzstd;

	fx_build(&fx, 5, 120, kind, 20000, 0);
	fx_encode(&fx, 4096, level);
	nzstd = fx_verify(&fx);
	if (expect_zstd) {
		assert_true(nzstd > 0);
		assert_true(fx.out.stored_bytes < fx.out.raw_bytes);
	} else if (level == 0) {
		assert_int_equal(nzstd, 0);
		assert_int_equal(fx.out.stored_bytes, fx.out.raw_bytes);
	} else {
		/* Random bodies stay raw; only stream 3, whose records are
		 * all empty (frame headers only), compresses. */
		for (size_t si = 0; si < fx.ns; si++)
			if (si != 3)
				assert_int_equal(fx.nzstd[si], 0);
		assert_true(fx.nzstd[3] > 0);
	}
	if (level == 0) {
		/* Zero-copy: separately allocated runs give at most one
		 * iovec each, plus the footer; the first is the caller's. */
		assert_true(fx.out.iovcnt <= (int)fx.ns + 1);
		assert_ptr_equal(fx.out.iov[0].iov_base, fx.s[0].frames);
	}
	fx_free(&fx);
}

static void test_bundle_round_trip_text_level0(void **state)
{
	round_trip(DATA_TEXT, 0, 0);
}

static void test_bundle_round_trip_random_level0(void **state)
{
	round_trip(DATA_RANDOM, 0, 0);
}

static void test_bundle_round_trip_text_level3(void **state)
{
	round_trip(DATA_TEXT, 3, 1);
}

static void test_bundle_round_trip_random_level3(void **state)
{
	round_trip(DATA_RANDOM, 3, 0);
}

static void test_bundle_round_trip_mixed_level3(void **state)
{
	struct fixture fx;
	uint32_t nzstd;

	fx_build(&fx, 5, 200, DATA_MIXED, 20000, 0);
	fx_encode(&fx, 2048, 3);
	nzstd = fx_verify(&fx);
	/* Both decisions happen. */
	assert_true(nzstd > 0);
	assert_true(nzstd < fx.f.n);
	fx_free(&fx);
}

static void test_bundle_round_trip_negative_level(void **state)
{
	struct fixture fx;

	fx_build(&fx, 3, 100, DATA_TEXT, 0, 0);
	fx_encode(&fx, 4096, -5); /* zstd's fast levels */
	assert_true(fx_verify(&fx) > 0);
	fx_free(&fx);
}

static void test_bundle_iov_merge(void **state)
{
	struct fixture fx;

	/* Raw chunks over contiguous frames: one iovec, plus the footer. */
	fx_build(&fx, 4, 50, DATA_RANDOM, 0, 1);
	fx_encode(&fx, 1024, 0);
	assert_int_equal(fx.out.iovcnt, 2);
	assert_ptr_equal(fx.out.iov[0].iov_base, fx.packed);
	assert_int_equal(fx.out.iov[0].iov_len, fx.out.footer_off);
	fx_verify(&fx);
	fx_free(&fx);

	/* All chunks compressed: chunks and footer share the owned buffer. */
	fx_build(&fx, 3, 50, DATA_TEXT, 0, 0);
	fx_encode(&fx, 1 << 20, 3); /* one chunk per run */
	assert_int_equal(fx_verify(&fx), fx.f.n);
	assert_int_equal(fx.out.iovcnt, 1);
	fx_free(&fx);
}

/* engine/bundle.c's count_chunks(), reached through NOVA_TESTABLE (this
 * program compiles bundle.c with -DNOVA_TESTING). */
int count_chunks(const struct bundle_run *runs, size_t nruns, size_t target, size_t *nchunks);

/* The cutting rule alone: a chunk takes records while it stays within the
 * target, always at least one; runs must be sorted by stream. */
static void test_bundle_count_chunks(void **state)
{
	uint8_t frames[4096];
	uint32_t lens[] = { 100, 100, 1000, 100 };
	struct bundle_run runs[2] = {
		{ .stream_id = 1, .frames = frames, .nrec = 4 },
		{ .stream_id = 2, .frames = frames, .nrec = 4 },
	};
	size_t off = 0, n = 0;

	(void)state;
	for (uint32_t i = 0; i < 4; i++) {
		bundle_frame_hdr(frames + off, lens[i], i);
		memset(frames + off + BUNDLE_FRAME_HDR, 'y', lens[i]);
		off += BUNDLE_FRAME_HDR + lens[i];
	}
	runs[0].frames_len = runs[1].frames_len = off;
	assert_int_equal(count_chunks(runs, 1, 224, &n), 0);
	assert_int_equal(n, 3); /* 112+112 | 1012 | 112 */
	assert_int_equal(count_chunks(runs, 2, 224, &n), 0);
	assert_int_equal(n, 6);
	assert_int_equal(count_chunks(runs, 1, 1, &n), 0);
	assert_int_equal(n, 4); /* one record per chunk at the least */
	assert_int_equal(count_chunks(runs, 0, 224, &n), 0);
	assert_int_equal(n, 0);
	runs[1].stream_id = 1; /* not sorted by stream */
	assert_int_equal(count_chunks(runs, 2, 224, &n), -EINVAL);
}

static void test_bundle_chunk_split(void **state)
{
	uint8_t frames[8192];
	uint32_t lens[] = { 100, 100, 1000, 100, 100, 100, 0 };
	uint32_t n = sizeof(lens) / sizeof(lens[0]);
	struct bundle_run run = { .stream_id = 1, .first_seq = 10, .first_byte = 0 };
	struct bundle_enc_opts opts = { .chunk_target = 300, .zstd_level = 0 };
	struct bundle_out out;
	struct bundle_footer f;
	struct bundle_entry e;
	uint8_t obj[16384];
	size_t off = 0;
	/* expected nrec per chunk for targets 300, 224, 1, SIZE_MAX */
	static const struct {
		size_t target;
		uint32_t nchunks;
		uint32_t nrec[7];
	} cases[] = {
		{ 300, 4, { 2, 1, 2, 2 } }, /* 112+112 | 1012 | 112+112 | 112+12 */
		{ 224, 4, { 2, 1, 2, 2 } }, /* exactly at the target fits */
		{ 223, 6, { 1, 1, 1, 1, 1, 2 } }, /* r5+r6 = 124 */
		{ 1, 7, { 1, 1, 1, 1, 1, 1, 1 } },
		{ SIZE_MAX, 1, { 7 } },
	};

	for (uint32_t i = 0; i < n; i++) {
		bundle_frame_hdr(frames + off, lens[i], i);
		memset(frames + off + BUNDLE_FRAME_HDR, 'x', lens[i]);
		off += BUNDLE_FRAME_HDR + lens[i];
	}
	run.frames = frames;
	run.frames_len = off;
	run.nrec = n;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint64_t seq = 10;
		size_t pos = 0;

		opts.chunk_target = cases[c].target;
		assert_int_equal(bundle_encode(&run, 1, &opts, &out), 0);
		assert_int_equal(out.nentries, cases[c].nchunks);
		for (int i = 0; i < out.iovcnt; i++) {
			memcpy(obj + pos, out.iov[i].iov_base, out.iov[i].iov_len);
			pos += out.iov[i].iov_len;
		}
		assert_int_equal(pos, out.size);
		assert_int_equal(bundle_footer_open(obj + out.footer_off, out.footer_len,
						    out.footer_off, &f), 0);
		for (uint32_t i = 0; i < f.n; i++) {
			assert_int_equal(bundle_footer_get(&f, i, &e), 0);
			assert_int_equal(e.nrec, cases[c].nrec[i]);
			assert_int_equal(e.first_seq, seq);
			seq += e.nrec;
		}
		assert_int_equal(seq, 10 + n);
		bundle_out_free(&out);
	}
}

static void test_bundle_empty_object(void **state)
{
	struct bundle_enc_opts opts = { .chunk_target = 100, .zstd_level = 3 };
	struct bundle_out out;
	struct bundle_footer f;
	uint32_t idx, first, count;

	assert_int_equal(bundle_encode(NULL, 0, &opts, &out), 0);
	assert_int_equal(out.size, BUNDLE_TRAILER_SIZE);
	assert_int_equal(out.nentries, 0);
	assert_int_equal(out.iovcnt, 1);
	assert_int_equal(bundle_footer_open(out.iov[0].iov_base, out.iov[0].iov_len, 0, &f), 0);
	assert_int_equal(f.n, 0);
	assert_int_equal(bundle_footer_find_seq(&f, 1, 0, &idx), -ENOENT);
	assert_int_equal(bundle_footer_find_byte(&f, 1, 0, &idx), -ENOENT);
	assert_int_equal(bundle_footer_stream(&f, 1, &first, &count), -ENOENT);
	bundle_out_free(&out);
	bundle_out_free(&out); /* twice is harmless */
	bundle_out_free(NULL);
}

static void test_bundle_record_max(void **state)
{
	size_t len = BUNDLE_FRAME_HDR + (size_t)BUNDLE_RECORD_MAX + 1;
	uint8_t *frames = calloc(1, len);
	struct bundle_run run = { .stream_id = 1, .frames = frames, .nrec = 1 };
	struct bundle_enc_opts opts = { .chunk_target = 1 << 20, .zstd_level = 0 };
	struct bundle_out out;
	struct bundle_entry e;
	struct nv_buf raw;

	assert_non_null(frames);
	/* One byte over the limit. */
	bundle_frame_hdr(frames, BUNDLE_RECORD_MAX + 1, 5);
	run.frames_len = len;
	assert_int_equal(bundle_encode(&run, 1, &opts, &out), -E2BIG);
	assert_null(out.iov);
	assert_int_equal(out.size, 0);

	/* Exactly at the limit: one chunk, decodes. */
	bundle_frame_hdr(frames, BUNDLE_RECORD_MAX, 5);
	run.frames_len = len - 1;
	assert_int_equal(bundle_encode(&run, 1, &opts, &out), 0);
	assert_int_equal(out.nentries, 1);
	assert_ptr_equal(out.iov[0].iov_base, frames);
	raw_entry(&e, frames, run.frames_len, 1);
	nv_buf_init(&raw, BUNDLE_CHUNK_MAX);
	assert_int_equal(bundle_chunk_decode(&e, frames, run.frames_len, &raw), 0);
	assert_int_equal(raw.len, run.frames_len);

	/* A stored chunk whose one body is over the limit. */
	bundle_frame_hdr(frames, BUNDLE_RECORD_MAX + 1, 5);
	raw_entry(&e, frames, len, 1);
	raw.len = 0;
	assert_int_equal(bundle_chunk_decode(&e, frames, len, &raw), -EBADMSG);
	assert_int_equal(raw.len, 0);
	{
		struct bundle_rec rec;
		size_t off = 0;

		assert_int_equal(bundle_frames_next(frames, len, &off, &rec), -EBADMSG);
		assert_int_equal(off, 0);
	}
	nv_buf_free(&raw);
	bundle_out_free(&out);
	free(frames);
}

static void test_bundle_encode_rejects(void **state)
{
	uint8_t a[64] = { 0 }, b[64] = { 0 };
	struct bundle_run runs[2];
	struct bundle_enc_opts opts = { .chunk_target = 100, .zstd_level = 0 };
	struct bundle_out out;
	size_t la = make_frames(a, 2, 10), lb = make_frames(b, 1, 20);

	runs[0] = (struct bundle_run){ .stream_id = 5, .frames = a, .frames_len = la, .nrec = 2 };
	runs[1] = (struct bundle_run){ .stream_id = 6, .frames = b, .frames_len = lb, .nrec = 1 };
	assert_int_equal(bundle_encode(runs, 2, &opts, &out), 0);
	bundle_out_free(&out);

#define REJECT(rc_)                                                           \
	do {                                                                  \
		memset(&out, 0xa5, sizeof(out));                              \
		assert_int_equal(bundle_encode(runs, 2, &opts, &out), (rc_)); \
		assert_null(out.iov);                                         \
		assert_null(out.priv);                                        \
		assert_int_equal(out.iovcnt, 0);                              \
	} while (0)

	runs[1].stream_id = 4; /* unsorted */
	REJECT(-EINVAL);
	runs[1].stream_id = 5; /* two runs of one stream */
	REJECT(-EINVAL);
	runs[1].stream_id = 6;
	runs[0].nrec = 0; /* empty run */
	REJECT(-EINVAL);
	runs[0].nrec = 3; /* frames hold fewer */
	REJECT(-EINVAL);
	runs[0].nrec = 1; /* frames hold more */
	REJECT(-EINVAL);
	runs[0].nrec = 2;
	runs[0].frames_len = la - 1; /* truncated body */
	REJECT(-EINVAL);
	runs[0].frames_len = la + 5; /* truncated header after the frames */
	REJECT(-EINVAL);
	runs[0].frames_len = 0;
	REJECT(-EINVAL);
	runs[0].frames_len = la;
	runs[0].first_seq = UINT64_MAX - 1; /* seq range wraps */
	REJECT(-EINVAL);
	runs[0].first_seq = 0;
	runs[0].first_byte = UINT64_MAX - 5; /* byte range wraps */
	REJECT(-EINVAL);
	runs[0].first_byte = 0;
	opts.chunk_target = 0;
	REJECT(-EINVAL);
	opts.chunk_target = 100;
	nv_put_le32(b, BUNDLE_RECORD_MAX + 1); /* oversize record */
	REJECT(-E2BIG);
	make_frames(b, 1, 20);
	assert_int_equal(bundle_encode(runs, 2, NULL, &out), -EINVAL);
	assert_int_equal(bundle_encode(runs, 2, &opts, &out), 0);
	bundle_out_free(&out);
#undef REJECT
}

/* ------------------------------------------------------------------ */
/* lookups                                                             */

static void test_bundle_find_seq_and_byte(void **state)
{
	struct fixture fx;
	static const uint64_t missing[] = { 1, 16, 18, 999, 1001, (1ull << 40) - 1,
					    (1ull << 40) + 1, UINT64_MAX - 1 };

	fx_build(&fx, 5, 150, DATA_MIXED, 20000, 0);
	fx_encode(&fx, 1500, 3);
	fx_verify(&fx);
	for (size_t si = 0; si < fx.ns; si++) {
		struct tstream *s = &fx.s[si];
		uint64_t byte = s->first_byte;
		uint32_t idx, first, count;

		for (uint32_t r = 0; r < s->nrec; r++) {
			const struct trec *t = &s->recs[r];

			idx = UINT32_MAX;
			assert_int_equal(bundle_footer_find_seq(&fx.f, s->id,
								s->first_seq + r, &idx), 0);
			assert_int_equal(idx, s->entry_of[r]);
			if (t->len) {
				idx = UINT32_MAX;
				assert_int_equal(bundle_footer_find_byte(&fx.f, s->id,
									 byte, &idx), 0);
				assert_int_equal(idx, s->entry_of[r]);
				idx = UINT32_MAX;
				assert_int_equal(bundle_footer_find_byte(&fx.f, s->id,
									 byte + t->len - 1, &idx), 0);
				assert_int_equal(idx, s->entry_of[r]);
			}
			byte += t->len;
		}
		/* Past the end, before the start. */
		assert_int_equal(bundle_footer_find_seq(&fx.f, s->id,
							s->first_seq + s->nrec, &idx), -ENOENT);
		assert_int_equal(bundle_footer_find_seq(&fx.f, s->id, UINT64_MAX, &idx),
				 -ENOENT);
		assert_int_equal(bundle_footer_find_byte(&fx.f, s->id, byte, &idx), -ENOENT);
		assert_int_equal(bundle_footer_find_byte(&fx.f, s->id, UINT64_MAX, &idx),
				 -ENOENT);
		if (s->first_seq)
			assert_int_equal(bundle_footer_find_seq(&fx.f, s->id,
								s->first_seq - 1, &idx), -ENOENT);
		if (s->first_byte)
			assert_int_equal(bundle_footer_find_byte(&fx.f, s->id,
								 s->first_byte - 1, &idx), -ENOENT);
		/* The stream's entries. */
		assert_int_equal(bundle_footer_stream(&fx.f, s->id, &first, &count), 0);
		assert_int_equal(first, s->entry_of[0]);
		assert_int_equal(first + count - 1, s->entry_of[s->nrec - 1]);
	}
	/* Stream 3 holds only empty records: no byte is in it. */
	assert_int_equal(fx.s[3].frames_len, fx.s[3].nrec * BUNDLE_FRAME_HDR);
	{
		uint32_t idx;

		assert_int_equal(bundle_footer_find_byte(&fx.f, fx.s[3].id,
							 fx.s[3].first_byte, &idx), -ENOENT);
	}
	for (size_t m = 0; m < sizeof(missing) / sizeof(missing[0]); m++) {
		uint32_t idx, first, count;

		assert_int_equal(bundle_footer_find_seq(&fx.f, missing[m], 0, &idx), -ENOENT);
		assert_int_equal(bundle_footer_find_seq(&fx.f, missing[m], 1007, &idx),
				 -ENOENT);
		assert_int_equal(bundle_footer_find_byte(&fx.f, missing[m], 0, &idx), -ENOENT);
		assert_int_equal(bundle_footer_find_byte(&fx.f, missing[m], 246914, &idx),
				 -ENOENT);
		assert_int_equal(bundle_footer_stream(&fx.f, missing[m], &first, &count),
				 -ENOENT);
	}
	{
		struct bundle_entry e;

		assert_int_equal(bundle_footer_get(&fx.f, fx.f.n, &e), -EINVAL);
		assert_int_equal(bundle_footer_get(&fx.f, UINT32_MAX, &e), -EINVAL);
	}
	fx_free(&fx);
}

/* Lookups decode only the entries they probe: a bad entry off the search
 * path does not disturb them, one on it is -EBADMSG. */
static void test_bundle_find_probes_only(void **state)
{
	struct fixture fx;
	uint8_t *win;
	struct bundle_footer f;
	struct bundle_entry last;
	uint32_t idx, first, count;

	fx_build(&fx, 2, 400, DATA_RANDOM, 0, 0);
	fx_encode(&fx, 200, 0);
	fx_verify(&fx);
	assert_true(fx.f.n > 64);
	win = fx.obj + fx.out.footer_off;
	assert_int_equal(bundle_footer_get(&fx.f, fx.f.n - 1, &last), 0);
	win[(size_t)(fx.f.n - 1) * BUNDLE_ENTRY_SIZE + 60] = 1; /* reserved byte */
	reseal(win, fx.out.footer_len);
	assert_int_equal(bundle_footer_open(win, fx.out.footer_len, fx.out.footer_off, &f), 0);
	assert_int_equal(bundle_footer_find_seq(&f, fx.s[0].id, fx.s[0].first_seq, &idx), 0);
	assert_int_equal(idx, 0);
	assert_int_equal(bundle_footer_find_byte(&f, fx.s[0].id, fx.s[0].first_byte + 3, &idx),
			 0);
	assert_int_equal(bundle_footer_find_seq(&f, last.stream_id, last.first_seq, &idx),
			 -EBADMSG);
	assert_int_equal(bundle_footer_stream(&f, fx.s[1].id, &first, &count), -EBADMSG);
	fx_free(&fx);
}

/* ------------------------------------------------------------------ */
/* corruption                                                          */

/* A small object for the exhaustive corruption loops. */
static void small_fixture(struct fixture *fx, int level)
{
	fx_build(fx, 3, 30, DATA_MIXED, 900, 0);
	fx_encode(fx, 512, level);
	fx_verify(fx);
}

static void test_bundle_footer_flip_every_byte(void **state)
{
	struct fixture fx;
	static const uint8_t masks[] = { 0x01, 0x80, 0xff };

	small_fixture(&fx, 3);
	for (size_t i = 0; i < fx.out.footer_len; i++) {
		uint8_t *p = fx.obj + fx.out.footer_off + i;

		for (size_t m = 0; m < sizeof(masks); m++) {
			struct bundle_footer f;
			uint64_t foff;
			uint32_t flen;

			*p ^= masks[m];
			assert_int_equal(bundle_footer_open(fx.obj + fx.out.footer_off,
							    fx.out.footer_len,
							    fx.out.footer_off, &f),
					 -EBADMSG);
			if (i >= fx.out.footer_len - BUNDLE_TRAILER_SIZE)
				assert_int_equal(bundle_trailer_parse(
						 fx.obj + fx.out.size - BUNDLE_TRAILER_SIZE,
						 BUNDLE_TRAILER_SIZE, fx.out.size,
						 &foff, &flen), -EBADMSG);
			*p ^= masks[m];
		}
	}
	fx_free(&fx);
}

static void test_bundle_chunk_flip_every_byte(void **state)
{
	struct fixture fx;
	struct nv_buf raw;

	small_fixture(&fx, 3);
	nv_buf_init(&raw, BUNDLE_CHUNK_MAX);
	for (uint32_t i = 0; i < fx.f.n; i++) {
		struct bundle_entry e;

		assert_int_equal(bundle_footer_get(&fx.f, i, &e), 0);
		for (size_t b = 0; b < e.comp_len; b++) {
			uint8_t *p = fx.obj + e.chunk_off + b;

			*p ^= 0x10;
			assert_int_equal(bundle_chunk_decode(&e, fx.obj + e.chunk_off,
							     e.comp_len, &raw), -EBADMSG);
			assert_int_equal(raw.len, 0);
			*p ^= 0x10;
		}
		/* A flipped CRC in the entry itself. */
		e.crc ^= 1;
		assert_int_equal(bundle_chunk_decode(&e, fx.obj + e.chunk_off, e.comp_len,
						     &raw), -EBADMSG);
		e.crc ^= 1;
		/* Truncated and overlong chunks. */
		assert_int_equal(bundle_chunk_decode(&e, fx.obj + e.chunk_off,
						     e.comp_len - 1, &raw), -EBADMSG);
		assert_int_equal(bundle_chunk_decode(&e, fx.obj + e.chunk_off,
						     e.comp_len + 1, &raw), -EBADMSG);
		assert_int_equal(bundle_chunk_decode(&e, fx.obj + e.chunk_off + 1,
						     e.comp_len, &raw), -EBADMSG);
		assert_int_equal(raw.len, 0);
		assert_int_equal(bundle_chunk_decode(&e, fx.obj + e.chunk_off, e.comp_len,
						     &raw), 0);
		assert_int_equal(raw.len, e.raw_len);
		raw.len = 0;
	}
	nv_buf_free(&raw);
	fx_free(&fx);
}

/* bundle_chunk_decode_into() decodes what bundle_chunk_decode() does,
 * into a caller's buffer, a raw chunk in place; and refuses every flipped
 * byte of the stored chunk, in place too. */
static void test_bundle_chunk_decode_into(void **state)
{
	struct fixture fx;
	struct nv_buf raw;
	unsigned nraw = 0, nzstd = 0;

	small_fixture(&fx, 3);
	nv_buf_init(&raw, BUNDLE_CHUNK_MAX);
	for (uint32_t i = 0; i < fx.f.n; i++) {
		struct bundle_entry e;
		uint8_t *dst, *copy;

		assert_int_equal(bundle_footer_get(&fx.f, i, &e), 0);
		raw.len = 0;
		assert_int_equal(bundle_chunk_decode(&e, fx.obj + e.chunk_off, e.comp_len, &raw), 0);
		dst = malloc(e.raw_len);
		copy = malloc(e.comp_len);
		assert_non_null(dst);
		assert_non_null(copy);
		assert_int_equal(bundle_chunk_decode_into(&e, fx.obj + e.chunk_off, e.comp_len, dst),
				 0);
		assert_memory_equal(dst, raw.ptr, e.raw_len);
		assert_int_equal(bundle_chunk_decode_into(&e, fx.obj + e.chunk_off, e.comp_len, NULL),
				 -EBADMSG);
		if (e.codec == BUNDLE_RAW) {
			/* In place: the stored bytes are the frames. */
			nraw++;
			memcpy(copy, fx.obj + e.chunk_off, e.comp_len);
			assert_int_equal(bundle_chunk_decode_into(&e, copy, e.comp_len, copy), 0);
			assert_memory_equal(copy, raw.ptr, e.raw_len);
			for (size_t b = 0; b < e.comp_len; b++) {
				memcpy(copy, fx.obj + e.chunk_off, e.comp_len);
				copy[b] ^= 0x10;
				assert_int_equal(bundle_chunk_decode_into(&e, copy, e.comp_len, copy),
						 -EBADMSG);
			}
		} else {
			nzstd++;
			for (size_t b = 0; b < e.comp_len; b++) {
				memcpy(copy, fx.obj + e.chunk_off, e.comp_len);
				copy[b] ^= 0x10;
				assert_int_equal(bundle_chunk_decode_into(&e, copy, e.comp_len, dst),
						 -EBADMSG);
			}
		}
		free(dst);
		free(copy);
	}
	/* The mixed fixture has chunks of both codecs. */
	assert_true(nraw > 0);
	assert_true(nzstd > 0);
	nv_buf_free(&raw);
	fx_free(&fx);
}

static void test_bundle_footer_truncated(void **state)
{
	struct fixture fx;
	struct bundle_footer f;
	const uint8_t *win;
	size_t len;
	uint64_t foff, off;
	uint32_t flen;

	small_fixture(&fx, 0);
	win = fx.obj + fx.out.footer_off;
	len = fx.out.footer_len;
	off = fx.out.footer_off;
	for (size_t k = 1; k <= len; k++) {
		/* Tail cut off, head cut off. */
		assert_int_equal(bundle_footer_open(win, len - k, off, &f), -EBADMSG);
		assert_int_equal(bundle_footer_open(win + k, len - k, off + k, &f), -EBADMSG);
	}
	/* A window with one byte of the last chunk in front. */
	assert_int_equal(bundle_footer_open(win - 1, len + 1, off - 1, &f), -EBADMSG);
	/* Wrong offsets. */
	assert_int_equal(bundle_footer_open(win, len, off + 1, &f), -EBADMSG);
	assert_int_equal(bundle_footer_open(win, len, off - 1, &f), -EBADMSG);
	assert_int_equal(bundle_footer_open(win, len, 0, &f), -EBADMSG);
	assert_int_equal(bundle_footer_open(NULL, 0, 0, &f), -EBADMSG);
	assert_int_equal(bundle_footer_open(win, len, off, &f), 0);

	/* Trailer: good, suffix larger than the trailer, bad sizes. */
	assert_int_equal(bundle_trailer_parse(fx.obj + fx.out.size - 32, 32, fx.out.size,
					      &foff, &flen), 0);
	assert_int_equal(foff, off);
	assert_int_equal(flen, len);
	foff = 0;
	flen = 0;
	assert_int_equal(bundle_trailer_parse(win, len, fx.out.size, &foff, &flen), 0);
	assert_int_equal(foff, off);
	assert_int_equal(flen, len);
	assert_int_equal(bundle_trailer_parse(fx.obj + fx.out.size - 31, 31, fx.out.size,
					      &foff, &flen), -EBADMSG);
	assert_int_equal(bundle_trailer_parse(fx.obj + fx.out.size - 33, 32, fx.out.size,
					      &foff, &flen), -EBADMSG);
	assert_int_equal(bundle_trailer_parse(fx.obj + fx.out.size - 32, 32, fx.out.size + 1,
					      &foff, &flen), -EBADMSG);
	assert_int_equal(bundle_trailer_parse(fx.obj + fx.out.size - 32, 32, fx.out.size - 1,
					      &foff, &flen), -EBADMSG);
	assert_int_equal(bundle_trailer_parse(fx.obj + fx.out.size - 32, 32, len - 1,
					      &foff, &flen), -EBADMSG);
	assert_int_equal(bundle_trailer_parse(NULL, 0, fx.out.size, &foff, &flen), -EBADMSG);

	/* A self-consistent trailer over the entry limit (the object size
	 * is only claimed, so nothing else can catch it). */
	{
		uint8_t t[BUNDLE_TRAILER_SIZE];
		uint64_t size = 1ull << 40;

		for (uint32_t n = BUNDLE_ENTRIES_MAX; n <= BUNDLE_ENTRIES_MAX + 1; n++) {
			uint64_t fl = (uint64_t)n * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE;

			memcpy(t, fx.obj + fx.out.size - BUNDLE_TRAILER_SIZE, sizeof(t));
			nv_put_le32(t + 12, n);
			nv_put_le64(t + 16, size - fl);
			reseal(t, sizeof(t));
			assert_int_equal(bundle_trailer_parse(t, sizeof(t), size, &foff, &flen),
					 n == BUNDLE_ENTRIES_MAX ? 0 : -EBADMSG);
		}
		assert_int_equal(flen, (uint64_t)BUNDLE_ENTRIES_MAX * BUNDLE_ENTRY_SIZE +
					       BUNDLE_TRAILER_SIZE);
	}
	fx_free(&fx);
}

/* Tamper one field of a copy of the window, reseal, expect -EBADMSG from
 * open (on_open) or from get of entry ei. */
struct tamper {
	const char *what;
	size_t off; /* byte offset in the entry, or in the trailer */
	int width;  /* 1, 2, 4, 8 */
	uint64_t value;
	int in_trailer;
};

static void test_bundle_hostile_footers(void **state)
{
	struct fixture fx;
	uint8_t *win;
	size_t len;
	uint32_t ei, raw_ei = UINT32_MAX;
	struct bundle_entry e;
	uint64_t foff;

	small_fixture(&fx, 3);
	len = fx.out.footer_len;
	foff = fx.out.footer_off;
	win = malloc(len);
	assert_non_null(win);
	ei = UINT32_MAX;
	for (uint32_t i = 0; i < fx.f.n; i++) {
		assert_int_equal(bundle_footer_get(&fx.f, i, &e), 0);
		if (e.codec == BUNDLE_RAW && raw_ei == UINT32_MAX)
			raw_ei = i;
		/* A middle entry with body bytes (for the wrap cases). */
		if (i >= fx.f.n / 2 && ei == UINT32_MAX && bundle_entry_body_bytes(&e))
			ei = i;
	}
	assert_true(raw_ei != UINT32_MAX);
	assert_true(ei != UINT32_MAX && ei + 1 < fx.f.n);
	assert_int_equal(bundle_footer_get(&fx.f, ei, &e), 0);

	const struct tamper cases[] = {
		{ "comp_len over the chunk limit", 44, 4, BUNDLE_CHUNK_MAX + 1, 0 },
		{ "comp_len past the footer", 44, 4, foff - e.chunk_off + 1, 0 },
		{ "raw_len over the chunk limit", 48, 4, BUNDLE_CHUNK_MAX + 1, 0 },
		{ "chunk_off past the footer", 24, 8, foff, 0 },
		{ "chunk_off wraps", 24, 8, UINT64_MAX - 2, 0 },
		{ "nrec zero", 40, 4, 0, 0 },
		{ "raw_len below nrec frames", 40, 4, e.raw_len / BUNDLE_FRAME_HDR + 1, 0 },
		{ "unknown codec 2", 56, 1, 2, 0 },
		{ "unknown codec 255", 56, 1, 255, 0 },
		{ "reserved 57", 57, 1, 1, 0 },
		{ "reserved 58", 58, 1, 0x80, 0 },
		{ "reserved 59", 59, 1, 1, 0 },
		{ "reserved 60", 60, 1, 1, 0 },
		{ "reserved 61", 61, 1, 1, 0 },
		{ "reserved 62", 62, 1, 1, 0 },
		{ "reserved 63", 63, 1, 0xff, 0 },
		{ "first_seq wraps", 8, 8, UINT64_MAX, 0 },
		{ "first_byte wraps", 16, 8, UINT64_MAX, 0 },
		{ "bad magic", 0, 1, 'X', 1 },
		{ "version 0", 8, 2, 0, 1 },
		{ "version 2", 8, 2, 2, 1 },
		{ "entry size 32", 10, 2, 32, 1 },
		{ "entry size 65", 10, 2, 65, 1 },
		{ "one entry more", 12, 4, fx.f.n + 1, 1 },
		{ "one entry less", 12, 4, fx.f.n - 1, 1 },
		{ "entries over the limit", 12, 4, BUNDLE_ENTRIES_MAX + 1, 1 },
		{ "footer_off moved", 16, 8, foff + 64, 1 },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct tamper *t = &cases[c];
		uint8_t *p = t->in_trailer ? win + len - BUNDLE_TRAILER_SIZE
					   : win + (size_t)ei * BUNDLE_ENTRY_SIZE;
		struct bundle_footer f;
		struct bundle_entry got;
		uint32_t idx;
		int rc;

		memcpy(win, fx.obj + foff, len);
		switch (t->width) {
		case 1: p[t->off] = (uint8_t)t->value; break;
		case 2: nv_put_le16(p + t->off, (uint16_t)t->value); break;
		case 4: nv_put_le32(p + t->off, (uint32_t)t->value); break;
		default: nv_put_le64(p + t->off, t->value); break;
		}
		reseal(win, len);
		rc = bundle_footer_open(win, len, foff, &f);
		if (t->in_trailer) {
			if (rc != -EBADMSG)
				fail_msg("%s: open gave %d", t->what, rc);
			continue;
		}
		if (rc != 0)
			fail_msg("%s: open gave %d", t->what, rc);
		rc = bundle_footer_get(&f, ei, &got);
		if (rc != -EBADMSG)
			fail_msg("%s: get gave %d", t->what, rc);
		/* Its neighbours are fine; a lookup of it fails loudly. */
		assert_int_equal(bundle_footer_get(&f, ei - 1, &got), 0);
		assert_int_equal(bundle_footer_get(&f, ei + 1, &got), 0);
		rc = bundle_footer_find_seq(&f, e.stream_id, e.first_seq, &idx);
		if (rc != -EBADMSG)
			fail_msg("%s: find_seq gave %d", t->what, rc);
	}

	/* A raw entry whose comp_len differs from raw_len. */
	memcpy(win, fx.obj + foff, len);
	{
		uint8_t *p = win + (size_t)raw_ei * BUNDLE_ENTRY_SIZE;
		struct bundle_footer f;
		struct bundle_entry got;

		nv_put_le32(p + 44, nv_get_le32(p + 48) - 1);
		reseal(win, len);
		assert_int_equal(bundle_footer_open(win, len, foff, &f), 0);
		assert_int_equal(bundle_footer_get(&f, raw_ei, &got), -EBADMSG);
	}
	/* In a big object the footer bound no longer covers for the chunk
	 * limits: they must hold on their own. */
	{
		uint64_t big = 1ull << 40;
		static const struct {
			size_t off;
			uint32_t value;
			int ok;
		} lim[] = {
			{ 44, BUNDLE_CHUNK_MAX, 1 },
			{ 44, BUNDLE_CHUNK_MAX + 1, 0 },
			{ 48, BUNDLE_CHUNK_MAX, 1 },
			{ 48, BUNDLE_CHUNK_MAX + 1, 0 },
		};

		for (size_t c = 0; c < sizeof(lim) / sizeof(lim[0]); c++) {
			uint8_t *p = win + (size_t)ei * BUNDLE_ENTRY_SIZE;
			struct bundle_footer f;
			struct bundle_entry got;

			memcpy(win, fx.obj + foff, len);
			nv_put_le64(win + len - BUNDLE_TRAILER_SIZE + 16, big);
			p[56] = BUNDLE_ZSTD;
			nv_put_le32(p + lim[c].off, lim[c].value);
			reseal(win, len);
			assert_int_equal(bundle_footer_open(win, len, big, &f), 0);
			assert_int_equal(bundle_footer_get(&f, ei, &got), lim[c].ok ? 0 : -EBADMSG);
			assert_int_equal(bundle_footer_get(&f, 0, &got), 0);
		}
	}
	/* Resealed but unchanged: still fine. */
	memcpy(win, fx.obj + foff, len);
	reseal(win, len);
	assert_int_equal(memcmp(win, fx.obj + foff, len), 0);

	/* The decoder rechecks the entry it is given. */
	{
		struct nv_buf raw;
		struct bundle_entry bad = e;

		nv_buf_init(&raw, BUNDLE_CHUNK_MAX);
		bad.nrec = 0;
		assert_int_equal(bundle_chunk_decode(&bad, fx.obj + e.chunk_off, e.comp_len,
						     &raw), -EBADMSG);
		bad = e;
		bad.codec = 7;
		assert_int_equal(bundle_chunk_decode(&bad, fx.obj + e.chunk_off, e.comp_len,
						     &raw), -EBADMSG);
		bad = e;
		bad.raw_len = BUNDLE_CHUNK_MAX + 1;
		assert_int_equal(bundle_chunk_decode(&bad, fx.obj + e.chunk_off, e.comp_len,
						     &raw), -EBADMSG);
		/* Right bytes, wrong claim about their frames. */
		bad = e;
		bad.nrec = e.nrec + 1;
		if ((uint64_t)bad.nrec * BUNDLE_FRAME_HDR <= bad.raw_len)
			assert_int_equal(bundle_chunk_decode(&bad, fx.obj + e.chunk_off,
							     e.comp_len, &raw), -EBADMSG);
		assert_int_equal(raw.len, 0);
		nv_buf_free(&raw);
	}
	free(win);
	fx_free(&fx);
}

/* A zstd entry for compressed bytes claiming raw_len and nrec. */
static void zstd_entry(struct bundle_entry *e, const void *comp, size_t clen,
		       uint32_t raw_len, uint32_t nrec)
{
	memset(e, 0, sizeof(*e));
	e->stream_id = 3;
	e->nrec = nrec;
	e->comp_len = (uint32_t)clen;
	e->raw_len = raw_len;
	e->crc = nv_crc32c(0, comp, clen);
	e->codec = BUNDLE_ZSTD;
}

/* Compress with or without the content size in the frame header. */
static size_t zc(void *dst, size_t cap, const void *src, size_t n, int with_size)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	size_t r;

	assert_non_null(cc);
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag,
							 with_size)));
	r = ZSTD_compress2(cc, dst, cap, src, n);
	assert_false(ZSTD_isError(r));
	ZSTD_freeCCtx(cc);
	return r;
}

static void test_bundle_zstd_bomb(void **state)
{
	size_t big = 8u << 20;
	uint8_t *src = calloc(1, big);
	size_t cap = ZSTD_compressBound(big);
	uint8_t *comp = malloc(cap);
	uint8_t frames[4096];
	size_t flen = make_frames(frames, 10, 100); /* 1120 bytes */
	struct bundle_entry e;
	struct nv_buf raw;
	size_t clen;

	assert_non_null(src);
	assert_non_null(comp);
	/* The destination may grow to exactly raw_len and no further. */
	nv_buf_init(&raw, flen);

	/* Sanity: the honest chunk decodes, with and without a size. */
	for (int ws = 0; ws <= 1; ws++) {
		clen = zc(comp, cap, frames, flen, ws);
		zstd_entry(&e, comp, clen, (uint32_t)flen, 10);
		assert_int_equal(bundle_chunk_decode(&e, comp, clen, &raw), 0);
		assert_memory_equal(raw.ptr, frames, flen);
		nv_buf_free(&raw);
	}

	/* 8 MiB of frames (valid ones: zero bytes are empty records) claim
	 * to be 1120 bytes: declared size, then undeclared size. */
	for (int ws = 0; ws <= 1; ws++) {
		clen = zc(comp, cap, src, big, ws);
		assert_true(clen < 4096);
		zstd_entry(&e, comp, clen, (uint32_t)flen, 10);
		assert_int_equal(bundle_chunk_decode(&e, comp, clen, &raw), -EBADMSG);
		assert_int_equal(raw.len, 0);
	}
	/* A declared size that differs is refused before any allocation:
	 * -EBADMSG even where raw_len bytes could not be reserved. */
	{
		struct nv_buf none;

		nv_buf_init(&none, 0);
		clen = zc(comp, cap, src, big, 1);
		zstd_entry(&e, comp, clen, (uint32_t)flen, 10);
		assert_int_equal(bundle_chunk_decode(&e, comp, clen, &none), -EBADMSG);
		assert_null(none.ptr);
		clen = zc(comp, cap, frames, flen, 1);
		zstd_entry(&e, comp, clen, (uint32_t)flen, 10);
		assert_int_equal(bundle_chunk_decode(&e, comp, clen, &none), -E2BIG);
		assert_null(none.ptr);
	}
	/* One byte more than claimed, and one frame less than claimed. */
	for (int ws = 0; ws <= 1; ws++) {
		memcpy(src, frames, flen);
		src[flen] = 0;
		clen = zc(comp, cap, src, flen + 1, ws);
		zstd_entry(&e, comp, clen, (uint32_t)flen, 10);
		assert_int_equal(bundle_chunk_decode(&e, comp, clen, &raw), -EBADMSG);
		clen = zc(comp, cap, frames, flen - 112, ws);
		zstd_entry(&e, comp, clen, (uint32_t)flen, 10);
		assert_int_equal(bundle_chunk_decode(&e, comp, clen, &raw), -EBADMSG);
		assert_int_equal(raw.len, 0);
	}
	/* Short output over stale valid frames in the buffer: decode ten
	 * empty records (120 zero bytes), forget them (the bytes stay), then
	 * a chunk without a declared size that yields only nine.  Zeros make
	 * zstd emit RLE blocks, so it leaves the buffer's tail alone (with
	 * literals it may use the tail as scratch) and the tail still holds
	 * a valid tenth frame: only the output size check can object. */
	{
		static const uint8_t zeros[120];
		size_t c = zc(comp, cap, zeros, 120, 1);

		zstd_entry(&e, comp, c, 120, 10);
		raw.len = 0;
		assert_int_equal(bundle_chunk_decode(&e, comp, c, &raw), 0);
		raw.len = 0;
		c = zc(comp, cap, zeros, 108, 0);
		zstd_entry(&e, comp, c, 120, 10);
		assert_int_equal(bundle_chunk_decode(&e, comp, c, &raw), -EBADMSG);
		assert_int_equal(raw.len, 0);
	}
	/* Two frames back to back that together exceed raw_len. */
	{
		size_t c1 = zc(comp, cap, frames, flen, 0);
		size_t c2 = zc(comp + c1, cap - c1, frames, flen, 0);

		zstd_entry(&e, comp, c1 + c2, (uint32_t)flen, 10);
		assert_int_equal(bundle_chunk_decode(&e, comp, c1 + c2, &raw), -EBADMSG);
		/* ...and together match raw_len with 20 records: accepted. */
		nv_buf_free(&raw);
		nv_buf_init(&raw, 2 * flen);
		zstd_entry(&e, comp, c1 + c2, (uint32_t)(2 * flen), 20);
		assert_int_equal(bundle_chunk_decode(&e, comp, c1 + c2, &raw), 0);
		assert_int_equal(raw.len, 2 * flen);
	}
	/* Not zstd at all. */
	memset(comp, 0x5a, 200);
	zstd_entry(&e, comp, 200, (uint32_t)flen, 10);
	raw.len = 0;
	assert_int_equal(bundle_chunk_decode(&e, comp, 200, &raw), -EBADMSG);
	assert_int_equal(raw.len, 0);
	nv_buf_free(&raw);
	free(src);
	free(comp);
}

static void test_bundle_frames_dont_add_up(void **state)
{
	uint8_t f[2048] = { 0 }, comp[4096];
	struct bundle_entry e;
	struct nv_buf raw;
	size_t len, clen;

	nv_buf_init(&raw, BUNDLE_CHUNK_MAX);
	len = make_frames(f, 3, 50); /* 186 bytes */

	raw_entry(&e, f, len, 3);
	assert_int_equal(bundle_chunk_decode(&e, f, len, &raw), 0);
	raw.len = 0;
	raw_entry(&e, f, len, 4); /* claims one more record */
	assert_int_equal(bundle_chunk_decode(&e, f, len, &raw), -EBADMSG);
	raw_entry(&e, f, len, 2); /* one record left over */
	assert_int_equal(bundle_chunk_decode(&e, f, len, &raw), -EBADMSG);
	f[len] = 0; /* trailing bytes shorter than a header */
	raw_entry(&e, f, len + 5, 3);
	assert_int_equal(bundle_chunk_decode(&e, f, len + 5, &raw), -EBADMSG);
	nv_put_le32(f + 2 * 62, 51); /* last body one byte too long */
	raw_entry(&e, f, len, 3);
	assert_int_equal(bundle_chunk_decode(&e, f, len, &raw), -EBADMSG);
	nv_put_le32(f + 2 * 62, 49); /* last body one byte short */
	raw_entry(&e, f, len, 3);
	assert_int_equal(bundle_chunk_decode(&e, f, len, &raw), -EBADMSG);
	nv_put_le32(f, BUNDLE_RECORD_MAX + 1); /* oversize body */
	raw_entry(&e, f, len, 3);
	assert_int_equal(bundle_chunk_decode(&e, f, len, &raw), -EBADMSG);
	nv_put_le32(f, UINT32_MAX);
	raw_entry(&e, f, len, 3);
	assert_int_equal(bundle_chunk_decode(&e, f, len, &raw), -EBADMSG);
	assert_int_equal(raw.len, 0);

	/* The same through zstd. */
	len = make_frames(f, 3, 50);
	nv_put_le32(f + 62, 40);
	clen = ZSTD_compress(comp, sizeof(comp), f, len, 3);
	assert_false(ZSTD_isError(clen));
	zstd_entry(&e, comp, clen, (uint32_t)len, 3);
	assert_int_equal(bundle_chunk_decode(&e, comp, clen, &raw), -EBADMSG);
	assert_int_equal(raw.len, 0);

	/* A destination that cannot hold raw_len: -E2BIG, unchanged. */
	len = make_frames(f, 3, 50);
	raw_entry(&e, f, len, 3);
	nv_buf_free(&raw);
	nv_buf_init(&raw, len - 1);
	assert_int_equal(bundle_chunk_decode(&e, f, len, &raw), -E2BIG);
	assert_int_equal(raw.len, 0);
	/* Appends after what is there. */
	nv_buf_free(&raw);
	nv_buf_init(&raw, 2 * len);
	assert_int_equal(bundle_chunk_decode(&e, f, len, &raw), 0);
	assert_int_equal(bundle_chunk_decode(&e, f, len, &raw), 0);
	assert_int_equal(raw.len, 2 * len);
	assert_memory_equal(raw.ptr + len, f, len);
	nv_buf_free(&raw);
}

static void test_bundle_frames_next(void **state)
{
	uint8_t f[256];
	size_t len = make_frames(f, 2, 7), off = 0;
	struct bundle_rec rec;

	assert_int_equal(bundle_frames_next(f, len, &off, &rec), 1);
	assert_int_equal(rec.len, 7);
	assert_int_equal(rec.ts, 1000);
	assert_ptr_equal(rec.body, f + 12);
	assert_int_equal(off, 19);
	assert_int_equal(bundle_frames_next(f, len, &off, &rec), 1);
	assert_int_equal(rec.ts, 1001);
	assert_int_equal(bundle_frames_next(f, len, &off, &rec), 0);
	assert_int_equal(bundle_frames_next(f, len, &off, &rec), 0);
	off = len + 1;
	assert_int_equal(bundle_frames_next(f, len, &off, &rec), -EBADMSG);
	off = 0;
	assert_int_equal(bundle_frames_next(f, 11, &off, &rec), -EBADMSG);
	assert_int_equal(bundle_frames_next(f, 18, &off, &rec), -EBADMSG);
	assert_int_equal(off, 0);
	assert_int_equal(bundle_frames_next(f, 0, &off, &rec), 0);

	/* The header layout. */
	bundle_frame_hdr(f, 0x04030201u, 0x0c0b0a0908070605ull);
	for (int i = 0; i < 12; i++)
		assert_int_equal(f[i], i + 1);
}

/* An unsorted footer (CRC-valid): answers may be wrong but are safe,
 * and a stream range whose ends are another stream's is -EBADMSG. */
static void test_bundle_unsorted_footer(void **state)
{
	struct bundle_entry ents[3];
	static const uint64_t ids[3] = { 1, 5, 9 };
	struct bundle_footer f;
	struct nv_buf out;
	uint8_t tmp[BUNDLE_ENTRY_SIZE];
	uint32_t idx, first, count;
	int rc;

	memset(ents, 0, sizeof(ents));
	for (int i = 0; i < 3; i++) {
		ents[i].stream_id = ids[i];
		ents[i].chunk_off = 100 * (uint64_t)i;
		ents[i].nrec = 1;
		ents[i].raw_len = ents[i].comp_len = 20;
	}
	nv_buf_init(&out, 4096);
	assert_int_equal(bundle_footer_build(ents, 3, 300, &out), 0);
	/* Swap entries 0 and 2: ids 9, 5, 1. */
	memcpy(tmp, out.ptr, sizeof(tmp));
	memcpy(out.ptr, out.ptr + 128, sizeof(tmp));
	memcpy(out.ptr + 128, tmp, sizeof(tmp));
	reseal(out.ptr, out.len);
	assert_int_equal(bundle_footer_open(out.ptr, out.len, 300, &f), 0);
	assert_int_equal(bundle_footer_stream(&f, 5, &first, &count), -EBADMSG);
	for (uint64_t s = 0; s <= 10; s++) {
		for (uint64_t v = 0; v <= 8; v++) {
			struct bundle_entry e;

			rc = bundle_footer_find_seq(&f, s, v, &idx);
			assert_true(rc == 0 || rc == -ENOENT);
			if (rc == 0) {
				assert_int_equal(bundle_footer_get(&f, idx, &e), 0);
				assert_int_equal(e.stream_id, s);
				assert_true(v >= e.first_seq && v < e.first_seq + e.nrec);
			}
			rc = bundle_footer_find_byte(&f, s, v, &idx);
			assert_true(rc == 0 || rc == -ENOENT);
			if (rc == 0) {
				assert_int_equal(bundle_footer_get(&f, idx, &e), 0);
				assert_int_equal(e.stream_id, s);
				assert_true(v >= e.first_byte &&
					    v < e.first_byte + bundle_entry_body_bytes(&e));
			}
			rc = bundle_footer_stream(&f, s, &first, &count);
			assert_true(rc == 0 || rc == -ENOENT || rc == -EBADMSG);
			if (rc == 0)
				assert_true(first + count <= f.n && count > 0);
		}
	}
	nv_buf_free(&out);
}

/* ------------------------------------------------------------------ */
/* footer building                                                     */

static void test_bundle_footer_build(void **state)
{
	struct bundle_entry ents[3];
	struct bundle_footer f;
	struct nv_buf out;
	uint32_t idx;

	memset(ents, 0, sizeof(ents));
	for (int i = 0; i < 3; i++) {
		ents[i].stream_id = 7;
		ents[i].first_seq = 10 + 2 * (uint64_t)i;
		ents[i].first_byte = 100 + 50 * (uint64_t)i;
		ents[i].chunk_off = 1000 * (uint64_t)i;
		ents[i].nrec = 2;
		ents[i].raw_len = 74; /* 50 body bytes */
		ents[i].comp_len = 74;
		ents[i].codec = BUNDLE_RAW;
	}
	ents[2].stream_id = 8;
	ents[2].first_seq = 0;
	ents[2].first_byte = 0;
	nv_buf_init(&out, 1 << 20);
	assert_int_equal(nv_buf_add(&out, "prefix", 6), 0);
	assert_int_equal(bundle_footer_build(ents, 3, 5000, &out), 0);
	assert_int_equal(out.len, 6 + 3 * 64 + 32);
	assert_int_equal(bundle_footer_open(out.ptr + 6, out.len - 6, 5000, &f), 0);
	assert_int_equal(f.n, 3);
	assert_int_equal(bundle_footer_find_seq(&f, 7, 13, &idx), 0);
	assert_int_equal(idx, 1);
	assert_int_equal(bundle_footer_find_byte(&f, 7, 149, &idx), 0);
	assert_int_equal(idx, 0);
	assert_int_equal(bundle_footer_find_byte(&f, 7, 150, &idx), 0);
	assert_int_equal(idx, 1);
	assert_int_equal(bundle_footer_find_byte(&f, 8, 49, &idx), 0);
	assert_int_equal(idx, 2);
	assert_int_equal(bundle_footer_find_byte(&f, 8, 50, &idx), -ENOENT);
	{
		struct bundle_entry got;

		for (uint32_t i = 0; i < 3; i++) {
			assert_int_equal(bundle_footer_get(&f, i, &got), 0);
			assert_memory_equal(&got, &ents[i], offsetof(struct bundle_entry, codec));
			assert_int_equal(got.codec, ents[i].codec);
		}
	}

	/* Rejections leave the buffer unchanged. */
#define BUILD_REJECT(fix, undo)                                                \
	do {                                                                   \
		size_t before = out.len;                                       \
		fix;                                                           \
		assert_int_equal(bundle_footer_build(ents, 3, 5000, &out), -EINVAL); \
		assert_int_equal(out.len, before);                             \
		undo;                                                          \
		assert_int_equal(bundle_footer_build(ents, 3, 5000, &out), 0); \
	} while (0)

	BUILD_REJECT(ents[2].stream_id = 6, ents[2].stream_id = 8);  /* streams unsorted */
	BUILD_REJECT(ents[1].first_seq = 9, ents[1].first_seq = 12); /* seqs unsorted */
	BUILD_REJECT(ents[1].first_seq = 10, ents[1].first_seq = 12); /* duplicate */
	BUILD_REJECT(ents[1].first_seq = 11, ents[1].first_seq = 12); /* seq overlap */
	BUILD_REJECT(ents[1].first_byte = 149, ents[1].first_byte = 150); /* byte overlap */
	BUILD_REJECT(ents[2].chunk_off = 4927, ents[2].chunk_off = 2000); /* past footer */
	BUILD_REJECT(ents[2].nrec = 0, ents[2].nrec = 2);
	BUILD_REJECT(ents[2].raw_len = 23, ents[2].raw_len = 74);   /* < 2 frame hdrs */
	BUILD_REJECT(ents[2].codec = 2, ents[2].codec = BUNDLE_RAW);
	BUILD_REJECT(ents[2].comp_len = 73, ents[2].comp_len = 74); /* raw: comp != raw */
	/* Gaps between entries are allowed (only overlaps are not). */
	ents[1].first_seq = 20;
	ents[1].first_byte = 500;
	assert_int_equal(bundle_footer_build(ents, 3, 5000, &out), 0);
	/* zstd entries may have comp_len != raw_len. */
	ents[2].codec = BUNDLE_ZSTD;
	ents[2].comp_len = 30;
	assert_int_equal(bundle_footer_build(ents, 3, 5000, &out), 0);
	/* Exactly up to the footer. */
	ents[2].chunk_off = 4970;
	assert_int_equal(bundle_footer_build(ents, 3, 5000, &out), 0);
	ents[2].chunk_off = 4971;
	assert_int_equal(bundle_footer_build(ents, 3, 5000, &out), -EINVAL);
	ents[2].chunk_off = 4970;
	/* Empty footer; too small a buffer. */
	assert_int_equal(bundle_footer_build(NULL, 0, 0, &out), 0);
	nv_buf_free(&out);
	nv_buf_init(&out, 3 * 64 + 31);
	assert_int_equal(bundle_footer_build(ents, 3, 5000, &out), -E2BIG);
	assert_int_equal(out.len, 0);
	nv_buf_free(&out);
#undef BUILD_REJECT
}

/* ------------------------------------------------------------------ */
/* threads                                                             */

struct thr_arg {
	const struct fixture *fx;
	int bad;
};

static void *encode_thread(void *p)
{
	struct thr_arg *a = p;
	struct nv_buf raw;

	nv_buf_init(&raw, BUNDLE_CHUNK_MAX);
	for (int i = 0; i < 10 && !a->bad; i++) {
		struct bundle_out out;
		size_t pos = 0;

		if (bundle_encode(a->fx->runs, a->fx->ns, &a->fx->opts, &out)) {
			a->bad = 1;
			break;
		}
		if (out.size != a->fx->out.size)
			a->bad = 1;
		for (int k = 0; !a->bad && k < out.iovcnt; k++) {
			if (memcmp(a->fx->obj + pos, out.iov[k].iov_base, out.iov[k].iov_len))
				a->bad = 1;
			pos += out.iov[k].iov_len;
		}
		bundle_out_free(&out);
		/* And decode every chunk on this thread too. */
		for (uint32_t k = 0; !a->bad && k < a->fx->f.n; k++) {
			struct bundle_entry e;

			raw.len = 0;
			if (bundle_footer_get(&a->fx->f, k, &e) ||
			    bundle_chunk_decode(&e, a->fx->obj + e.chunk_off, e.comp_len, &raw))
				a->bad = 1;
		}
	}
	nv_buf_free(&raw);
	return NULL;
}

static void test_bundle_encode_threads(void **state)
{
	struct fixture fx;
	pthread_t th[6];
	struct thr_arg args[6];

	fx_build(&fx, 5, 60, DATA_MIXED, 5000, 0);
	fx_encode(&fx, 2048, 3);
	for (int i = 0; i < 6; i++) {
		args[i] = (struct thr_arg){ .fx = &fx };
		assert_int_equal(pthread_create(&th[i], NULL, encode_thread, &args[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(args[i].bad, 0);
	}
	fx_free(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bundle_round_trip_text_level0),
		cmocka_unit_test(test_bundle_round_trip_random_level0),
		cmocka_unit_test(test_bundle_round_trip_text_level3),
		cmocka_unit_test(test_bundle_round_trip_random_level3),
		cmocka_unit_test(test_bundle_round_trip_mixed_level3),
		cmocka_unit_test(test_bundle_round_trip_negative_level),
		cmocka_unit_test(test_bundle_iov_merge),
		cmocka_unit_test(test_bundle_count_chunks),
		cmocka_unit_test(test_bundle_chunk_split),
		cmocka_unit_test(test_bundle_empty_object),
		cmocka_unit_test(test_bundle_record_max),
		cmocka_unit_test(test_bundle_encode_rejects),
		cmocka_unit_test(test_bundle_find_seq_and_byte),
		cmocka_unit_test(test_bundle_find_probes_only),
		cmocka_unit_test(test_bundle_footer_flip_every_byte),
		cmocka_unit_test(test_bundle_chunk_flip_every_byte),
		cmocka_unit_test(test_bundle_chunk_decode_into),
		cmocka_unit_test(test_bundle_footer_truncated),
		cmocka_unit_test(test_bundle_hostile_footers),
		cmocka_unit_test(test_bundle_zstd_bomb),
		cmocka_unit_test(test_bundle_frames_dont_add_up),
		cmocka_unit_test(test_bundle_frames_next),
		cmocka_unit_test(test_bundle_unsorted_footer),
		cmocka_unit_test(test_bundle_footer_build),
		cmocka_unit_test(test_bundle_encode_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
