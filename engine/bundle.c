/*
 * bundle.c - encoder and hostile-input-safe decoders of the bundle format
 * (layout in bundle.h, DESIGN.md section 3).
 *
 * For: turning a flight's per-stream runs into the segments of one object
 * (chunks, footer entries, trailer), building a footer for chunks copied
 * from other objects, and answering point lookups from a fetched footer
 * window.  Not for: fetching bytes, caching windows, or deciding what a
 * flight holds; this file does no I/O.
 *
 * NOTES ON THE DESIGN
 *
 *  1. Chunking.  A run is cut at record boundaries: a chunk is closed when
 *     adding the next frame would pass the chunk target and the chunk
 *     already holds a record, so a record bigger than the target is a
 *     chunk of its own.  The effective target is min(chunk_target,
 *     BUNDLE_CHUNK_MAX); since a frame is at most BUNDLE_RECORD_MAX + 12
 *     bytes, every chunk the encoder makes passes the decoder limits.
 *
 *  2. Compression pays or is dropped.  A chunk is compressed into a
 *     destination of raw - raw/16 bytes; if zstd cannot fit (or fails for
 *     any reason but ENOMEM) the chunk is stored raw.  Raw chunks are not
 *     copied: their iovecs point into the caller's frames, and iovecs over
 *     contiguous memory (raw chunks of one run, consecutive compressed
 *     chunks, the last compressed chunk and the footer) are merged.
 *
 *  3. One owned buffer.  Compressed chunks and then the footer are
 *     appended to one nv_buf (out->priv).  It may move while it grows, so
 *     segments remember offsets into it and become pointers only once the
 *     footer is written.
 *
 *  4. zstd contexts are per thread.  bundle_encode() runs on several slot
 *     PUT threads at once and decoders run on reader threads; each thread
 *     lazily creates its own ZSTD_CCtx / ZSTD_DCtx, cached in a __thread
 *     pointer and registered under a pthread key whose destructor frees
 *     them when the thread exits.  The thread that calls exit() never runs
 *     key destructors, so a library destructor frees that thread's pair.
 *
 *  5. Decoders trust nothing.  Every entry is validated as it is decoded
 *     (entry_check()), one entry per binary-search probe; the whole footer
 *     is never decoded.  zstd output goes into exactly raw_len reserved
 *     bytes: a frame that declares or produces any other size is
 *     -EBADMSG, so a "zstd bomb" can neither allocate nor write past
 *     raw_len.  Frames must tile raw_len exactly with nrec records.
 *
 *  6. Quiet.  -EBADMSG and -ENOENT are ordinary answers; the caller logs
 *     them with the object key it knows.  Only -ENOMEM is logged here.
 *
 * Thread safety: every function is reentrant; nothing is shared between
 * calls except the pthread key (created once under pthread_once).
 *
 * Size exception: bundle.c: about 940 lines since the chunk decoder got its
 * second entry point (bundle_chunk_decode_into(), the read path decoding
 * in place into its cache entry) beside bundle_chunk_decode(); both share
 * the checks that must run before anything is allocated.  The format's
 * encoder and decoders stay in one file so one layout's invariants are
 * read in one place; the zstd context cache (zctx_*) is the part to move
 * out next.
 */
#include "config.h"
#include "engine/bundle.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "src/base/crc32c.h"
#include "src/base/endian.h"
#include "src/base/log.h"
#include "src/base/testable.h"

_Static_assert(BUNDLE_CHUNK_MAX >= BUNDLE_RECORD_MAX + BUNDLE_FRAME_HDR,
	       "a single-record chunk must fit the chunk limit");

/* ------- zstd: per-thread contexts and the one error translation */

struct zctx {
	ZSTD_CCtx *cctx; /* owned; NULL until the thread first compresses */
	ZSTD_DCtx *dctx; /* owned; NULL until the thread first decompresses */
};

static pthread_key_t zkey;
static pthread_once_t zkey_once = PTHREAD_ONCE_INIT;
static int zkey_err;
static __thread struct zctx *tls_zctx; /* same pointer as the key's value */

static void zctx_free(void *arg)
{
	struct zctx *z = arg;

	if (!z)
		return;
	ZSTD_freeCCtx(z->cctx);
	ZSTD_freeDCtx(z->dctx);
	free(z);
}

/* The key destructor, run in the exiting thread.  It forgets the
 * __thread copy too: the last thread to exit may go on to run exit() and
 * with it zctx_at_exit(). */
static void zctx_thread_exit(void *arg)
{
	if (tls_zctx == arg)
		tls_zctx = NULL;
	zctx_free(arg);
}

static void zkey_init(void)
{
	zkey_err = pthread_key_create(&zkey, zctx_thread_exit);
}

/* The exiting thread's contexts (see note 4). */
__attribute__((destructor)) static void zctx_at_exit(void)
{
	struct zctx *z = tls_zctx;

	if (!z)
		return;
	tls_zctx = NULL;
	(void)pthread_setspecific(zkey, NULL);
	zctx_free(z);
}

/* This thread's context pair, or NULL on allocation failure. */
static struct zctx *zctx_get(void)
{
	struct zctx *z = tls_zctx;

	if (z)
		return z;
	pthread_once(&zkey_once, zkey_init);
	if (zkey_err)
		return NULL;
	z = calloc(1, sizeof(*z));
	if (!z)
		return NULL;
	if (pthread_setspecific(zkey, z)) {
		free(z);
		return NULL;
	}
	tls_zctx = z;
	return z;
}

static ZSTD_CCtx *cctx_get(void)
{
	struct zctx *z = zctx_get();

	if (z && !z->cctx)
		z->cctx = ZSTD_createCCtx();
	return z ? z->cctx : NULL;
}

static ZSTD_DCtx *dctx_get(void)
{
	struct zctx *z = zctx_get();

	if (z && !z->dctx)
		z->dctx = ZSTD_createDCtx();
	return z ? z->dctx : NULL;
}

/*
 * The only place a zstd result becomes an errno: -ENOMEM for allocation
 * failure, -ENOSPC when the output did not fit the destination (for the
 * encoder: compression does not pay), -EBADMSG for everything else (for
 * the decoder: a corrupt or hostile frame).
 */
static int zstd_to_errno(size_t code)
{
	switch (ZSTD_getErrorCode(code)) {
	case ZSTD_error_memory_allocation:
		return -ENOMEM;
	case ZSTD_error_dstSize_tooSmall:
		return -ENOSPC;
	default:
		return -EBADMSG;
	}
}

/* -------------------------- fixed-width entry and trailer codecs */

void bundle_frame_hdr(uint8_t hdr[BUNDLE_FRAME_HDR], uint32_t len, uint64_t ts)
{
	nv_put_le32(hdr, len);
	nv_put_le64(hdr + 4, ts);
}

static void entry_encode(uint8_t p[BUNDLE_ENTRY_SIZE], const struct bundle_entry *e)
{
	nv_put_le64(p + 0, e->stream_id);
	nv_put_le64(p + 8, e->first_seq);
	nv_put_le64(p + 16, e->first_byte);
	nv_put_le64(p + 24, e->chunk_off);
	nv_put_le64(p + 32, e->max_ts);
	nv_put_le32(p + 40, e->nrec);
	nv_put_le32(p + 44, e->comp_len);
	nv_put_le32(p + 48, e->raw_len);
	nv_put_le32(p + 52, e->crc);
	p[56] = e->codec;
	memset(p + 57, 0, BUNDLE_ENTRY_SIZE - 57);
}

/*
 * Check an entry's fields against the format and against the footer
 * offset its chunk must lie below.  Shared by the footer builder (where a
 * failure is the caller's bug) and the decoders (hostile input).  Also
 * rejects seq and byte ranges that would wrap, so lookups can add freely.
 * 0 or -EBADMSG.
 */
static int entry_check(const struct bundle_entry *e, uint64_t footer_off)
{
	if (e->codec != BUNDLE_RAW && e->codec != BUNDLE_ZSTD)
		return -EBADMSG;
	if (e->nrec == 0 || e->comp_len > BUNDLE_CHUNK_MAX ||
	    e->raw_len > BUNDLE_CHUNK_MAX)
		return -EBADMSG;
	if ((uint64_t)e->nrec * BUNDLE_FRAME_HDR > e->raw_len)
		return -EBADMSG;
	if (e->codec == BUNDLE_RAW && e->comp_len != e->raw_len)
		return -EBADMSG;
	if (e->comp_len > footer_off || e->chunk_off > footer_off - e->comp_len)
		return -EBADMSG;
	if (e->first_seq > UINT64_MAX - e->nrec)
		return -EBADMSG;
	if (e->first_byte > UINT64_MAX - bundle_entry_body_bytes(e))
		return -EBADMSG;
	return 0;
}

/* Decode 64 bytes; reserved bytes must be zero.  0 or -EBADMSG. */
static int entry_decode(const uint8_t p[BUNDLE_ENTRY_SIZE], struct bundle_entry *e)
{
	for (unsigned i = 57; i < BUNDLE_ENTRY_SIZE; i++)
		if (p[i])
			return -EBADMSG;
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
	return 0;
}

static void trailer_encode(uint8_t p[BUNDLE_TRAILER_SIZE], uint32_t n,
			   uint64_t footer_off, uint32_t entries_crc)
{
	memcpy(p, BUNDLE_MAGIC, 8);
	nv_put_le16(p + 8, BUNDLE_VERSION);
	nv_put_le16(p + 10, BUNDLE_ENTRY_SIZE);
	nv_put_le32(p + 12, n);
	nv_put_le64(p + 16, footer_off);
	nv_put_le32(p + 24, entries_crc);
	nv_put_le32(p + 28, nv_crc32c(0, p, 28));
}

/* Verify a trailer on its own: CRC, magic, version, entry size, entry
 * count limit.  0 or -EBADMSG. */
static int trailer_decode(const uint8_t p[BUNDLE_TRAILER_SIZE], uint32_t *n,
			  uint64_t *footer_off, uint32_t *entries_crc)
{
	if (nv_get_le32(p + 28) != nv_crc32c(0, p, 28))
		return -EBADMSG;
	if (memcmp(p, BUNDLE_MAGIC, 8) || nv_get_le16(p + 8) != BUNDLE_VERSION ||
	    nv_get_le16(p + 10) != BUNDLE_ENTRY_SIZE)
		return -EBADMSG;
	*n = nv_get_le32(p + 12);
	if (*n > BUNDLE_ENTRIES_MAX)
		return -EBADMSG;
	*footer_off = nv_get_le64(p + 16);
	*entries_crc = nv_get_le32(p + 24);
	return 0;
}

/* ----------------------------------------------- footer building */

/* True when b may follow a in a footer: (stream, seq) strictly greater,
 * and within one stream neither seq nor byte ranges overlap. */
static bool entry_follows(const struct bundle_entry *a, const struct bundle_entry *b)
{
	if (a->stream_id != b->stream_id)
		return a->stream_id < b->stream_id;
	/* entry_check() made both sums safe. */
	return a->first_seq + a->nrec <= b->first_seq &&
	       a->first_byte + bundle_entry_body_bytes(a) <= b->first_byte;
}

int bundle_footer_build(const struct bundle_entry *entries, uint32_t n,
			uint64_t footer_off, struct nv_buf *out)
{
	size_t need = (size_t)n * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE;
	uint8_t *p;
	int rc;

	if (n > BUNDLE_ENTRIES_MAX || (n && !entries))
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (entry_check(&entries[i], footer_off))
			return -EINVAL;
		if (i && !entry_follows(&entries[i - 1], &entries[i]))
			return -EINVAL;
	}
	rc = nv_buf_reserve(out, need);
	if (rc)
		return rc;
	p = out->ptr + out->len;
	for (uint32_t i = 0; i < n; i++)
		entry_encode(p + (size_t)i * BUNDLE_ENTRY_SIZE, &entries[i]);
	trailer_encode(p + (size_t)n * BUNDLE_ENTRY_SIZE, n, footer_off,
		       nv_crc32c(0, p, (size_t)n * BUNDLE_ENTRY_SIZE));
	out->len += need;
	out->ptr[out->len] = 0; /* nv_buf keeps a NUL after the content */
	return 0;
}

/* ------------------------------------------------------ encoding */

/* The owned part of a bundle_out (out->priv). */
struct enc_priv {
	struct nv_buf own; /* compressed chunks, then the footer window */
};

/* One stretch of the object: borrowed from a run, or inside priv->own. */
struct enc_seg {
	const uint8_t *ptr; /* borrowed frames; NULL for an owned segment */
	size_t own_off;     /* offset in priv->own when ptr is NULL */
	size_t len;
};

/* Records [off, end) of a run forming one chunk. */
struct chunk_span {
	size_t off, end;
	uint32_t nrec;
	uint64_t body; /* body bytes */
	uint64_t max_ts;
};

/*
 * Check that a run's frames hold exactly nrec well-formed records and that
 * its seq and byte ranges do not wrap.  0, -EINVAL, -E2BIG (a body over
 * BUNDLE_RECORD_MAX).
 */
static int run_check(const struct bundle_run *r)
{
	size_t off = 0;
	uint32_t n = 0;
	uint64_t body = 0;

	if (r->nrec == 0 || !r->frames || r->frames_len == 0)
		return -EINVAL;
	while (off < r->frames_len) {
		uint32_t blen;

		if (r->frames_len - off < BUNDLE_FRAME_HDR)
			return -EINVAL;
		blen = nv_get_le32(r->frames + off);
		if (blen > BUNDLE_RECORD_MAX)
			return -E2BIG;
		if (blen > r->frames_len - off - BUNDLE_FRAME_HDR || n == r->nrec)
			return -EINVAL;
		n++;
		body += blen;
		off += BUNDLE_FRAME_HDR + blen;
	}
	if (n != r->nrec)
		return -EINVAL;
	if (r->first_seq > UINT64_MAX - r->nrec || r->first_byte > UINT64_MAX - body)
		return -EINVAL;
	return 0;
}

/* The chunk starting at frame offset off of a run that passed run_check()
 * (note 1). */
static void chunk_next(const struct bundle_run *r, size_t off, size_t target,
		       struct chunk_span *c)
{
	c->off = off;
	c->end = off;
	c->nrec = 0;
	c->body = 0;
	c->max_ts = 0;
	while (c->end < r->frames_len) {
		uint32_t blen = nv_get_le32(r->frames + c->end);
		uint64_t ts = nv_get_le64(r->frames + c->end + 4);
		size_t flen = BUNDLE_FRAME_HDR + (size_t)blen;

		if (c->nrec && (c->end - c->off) + flen > target)
			break;
		c->end += flen;
		c->nrec++;
		c->body += blen;
		if (ts > c->max_ts)
			c->max_ts = ts;
	}
}

/*
 * chunk_compress(): try to compress n bytes at src onto the end of own,
 * keeping the result only if it saves at least n/16.  1 and *clen when
 * kept, 0 when the chunk is to be stored raw (own unchanged), -ENOMEM.
 *
 * Chunks above SAMPLE_FROM bytes are first judged on a SAMPLE_LEN sample
 * from their middle: incompressible data (media, encrypted or already
 * compressed payloads) then costs a 16 KiB trial instead of a full zstd
 * pass, which on such data runs at about half the speed of the disk.
 */
#define SAMPLE_FROM (64u << 10)
#define SAMPLE_LEN (16u << 10)

static bool sample_pays(ZSTD_CCtx *cc, int level, const uint8_t *src, size_t n)
{
	static __thread uint8_t scratch[SAMPLE_LEN];
	const uint8_t *mid = src + (n - SAMPLE_LEN) / 2;
	size_t r = ZSTD_compressCCtx(cc, scratch, SAMPLE_LEN - SAMPLE_LEN / 16, mid, SAMPLE_LEN,
				     level);

	return !ZSTD_isError(r);
}

static int chunk_compress(ZSTD_CCtx *cc, int level, const uint8_t *src, size_t n,
			  struct nv_buf *own, size_t *clen)
{
	size_t cap = n - n / 16;
	size_t r;
	int rc;

	if (n > SAMPLE_FROM && !sample_pays(cc, level, src, n))
		return 0;
	rc = nv_buf_reserve(own, cap);

	if (rc)
		return rc == -E2BIG ? -ENOMEM : rc; /* own has no real limit */
	r = ZSTD_compressCCtx(cc, own->ptr + own->len, cap, src, n, level);
	if (ZSTD_isError(r)) {
		rc = zstd_to_errno(r);
		if (rc == -ENOMEM)
			return rc;
		return 0; /* did not fit (-ENOSPC) or any other failure: raw */
	}
	own->len += r;
	*clen = r;
	return 1;
}

void bundle_out_free(struct bundle_out *out)
{
	struct enc_priv *p;

	if (!out)
		return;
	p = out->priv;
	if (p) {
		nv_buf_free(&p->own);
		free(p);
	}
	free(out->iov);
	memset(out, 0, sizeof(*out));
}

/* (NOVA_TESTABLE: tests/unit/test_bundle.c checks the chunk cutting here
 * without encoding.)
 * Validate the runs (sorted by stream, well framed) and count the chunks
 * they cut into.  0, -EINVAL, -E2BIG (more than BUNDLE_ENTRIES_MAX). */
NOVA_TESTABLE int count_chunks(const struct bundle_run *runs, size_t nruns, size_t target,
			size_t *nchunks)
{
	int rc;

	*nchunks = 0;
	for (size_t i = 0; i < nruns; i++) {
		if (i && runs[i - 1].stream_id >= runs[i].stream_id)
			return -EINVAL;
		rc = run_check(&runs[i]);
		if (rc)
			return rc;
		for (size_t o = 0; o < runs[i].frames_len; (*nchunks)++) {
			struct chunk_span c;

			chunk_next(&runs[i], o, target, &c);
			o = c.end;
		}
	}
	return *nchunks > BUNDLE_ENTRIES_MAX ? -E2BIG : 0;
}

/*
 * Compress (when cc is set and it pays) and describe one chunk c of run r:
 * fills e's codec, lengths, CRC and record fields (the caller set its
 * offsets) and the segment s that will carry its bytes (in own when
 * compressed, else pointing into the run).  0 or -ENOMEM.
 */
static int encode_chunk(ZSTD_CCtx *cc, int level, const struct bundle_run *r,
			const struct chunk_span *c, struct bundle_entry *e,
			struct enc_seg *s, struct nv_buf *own)
{
	const uint8_t *raw = r->frames + c->off;
	size_t rawlen = c->end - c->off, clen = 0, own_off = own->len;
	int rc = 0;

	if (cc && (rc = chunk_compress(cc, level, raw, rawlen, own, &clen)) < 0)
		return rc;
	e->stream_id = r->stream_id;
	e->max_ts = c->max_ts;
	e->nrec = c->nrec;
	e->raw_len = (uint32_t)rawlen;
	if (rc == 1) {
		e->codec = BUNDLE_ZSTD;
		e->comp_len = (uint32_t)clen;
		e->crc = nv_crc32c(0, own->ptr + own_off, clen);
		s->ptr = NULL;
		s->own_off = own_off;
		s->len = clen;
	} else {
		e->codec = BUNDLE_RAW;
		e->comp_len = (uint32_t)rawlen;
		e->crc = nv_crc32c(0, raw, rawlen);
		s->ptr = raw;
		s->len = rawlen;
	}
	return 0;
}

/* own no longer moves: resolve the segments' offsets into out->iov,
 * merging contiguous segments. */
static void resolve_iov(const struct enc_seg *segs, size_t nsegs, const struct nv_buf *own,
			struct bundle_out *out)
{
	for (size_t i = 0; i < nsegs; i++) {
		uint8_t *base = segs[i].ptr ? (uint8_t *)segs[i].ptr : own->ptr + segs[i].own_off;
		struct iovec *last = out->iovcnt ? &out->iov[out->iovcnt - 1] : NULL;

		if (last && (uint8_t *)last->iov_base + last->iov_len == base) {
			last->iov_len += segs[i].len;
		} else {
			out->iov[out->iovcnt].iov_base = base;
			out->iov[out->iovcnt].iov_len = segs[i].len;
			out->iovcnt++;
		}
	}
}

int bundle_encode(const struct bundle_run *runs, size_t nruns,
		  const struct bundle_enc_opts *opts, struct bundle_out *out)
{
	struct bundle_entry *ents = NULL;
	struct enc_seg *segs = NULL;
	struct enc_priv *priv = NULL;
	ZSTD_CCtx *cc = NULL;
	size_t target, nchunks = 0, k = 0, nsegs = 0;
	uint64_t off = 0;
	int level, rc;

	memset(out, 0, sizeof(*out));
	if (!opts || opts->chunk_target < 1 || (nruns && !runs))
		return -EINVAL;
	target = opts->chunk_target < BUNDLE_CHUNK_MAX ? opts->chunk_target
						       : BUNDLE_CHUNK_MAX;
	level = opts->zstd_level;
	if (level > ZSTD_maxCLevel())
		level = ZSTD_maxCLevel();
	if (level < ZSTD_minCLevel())
		level = ZSTD_minCLevel();

	/* Pass 1: validate, count chunks. */
	if ((rc = count_chunks(runs, nruns, target, &nchunks)))
		return rc;

	rc = -ENOMEM;
	priv = calloc(1, sizeof(*priv));
	ents = calloc(nchunks ? nchunks : 1, sizeof(*ents));
	segs = calloc(nchunks + 1, sizeof(*segs));
	out->iov = calloc(nchunks + 1, sizeof(*out->iov));
	if (!priv || !ents || !segs || !out->iov)
		goto fail;
	nv_buf_init(&priv->own, SIZE_MAX);
	if (level != 0 && nchunks) {
		cc = cctx_get();
		if (!cc)
			goto fail;
	}

	/* Pass 2: cut, compress, describe. */
	for (size_t i = 0; i < nruns; i++) {
		const struct bundle_run *r = &runs[i];
		uint64_t seq = r->first_seq, byte = r->first_byte;

		for (size_t o = 0; o < r->frames_len; k++) {
			struct bundle_entry *e = &ents[k];
			struct chunk_span c;

			chunk_next(r, o, target, &c);
			e->first_seq = seq;
			e->first_byte = byte;
			e->chunk_off = off;
			rc = encode_chunk(cc, level, r, &c, e, &segs[nsegs++], &priv->own);
			if (rc < 0)
				goto fail;
			out->raw_bytes += e->raw_len;
			out->stored_bytes += e->comp_len;
			off += e->comp_len;
			seq += c.nrec;
			byte += c.body;
			o = c.end;
		}
	}

	/* The footer window, after the last compressed chunk in own. */
	segs[nsegs].ptr = NULL;
	segs[nsegs].own_off = priv->own.len;
	rc = bundle_footer_build(ents, (uint32_t)nchunks, off, &priv->own);
	if (rc) {
		/* Pass 1 guaranteed valid entries: only memory can fail. */
		rc = -ENOMEM;
		goto fail;
	}
	segs[nsegs].len = priv->own.len - segs[nsegs].own_off;
	nsegs++;

	resolve_iov(segs, nsegs, &priv->own, out);
	out->footer_off = off;
	out->footer_len = (uint32_t)(nchunks * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE);
	out->size = off + out->footer_len;
	out->nentries = (uint32_t)nchunks;
	out->priv = priv;
	free(segs);
	free(ents);
	return 0;

fail:
	if (rc == -ENOMEM)
		nv_log(NV_WARN, NV_SUB_CHAIN,
		       "bundle encode of %zu runs (%zu chunks): out of memory",
		       nruns, nchunks);
	free(segs);
	free(ents);
	out->priv = priv;
	bundle_out_free(out);
	return rc;
}

/* ----------------------------------------------- footer decoding */

int bundle_trailer_parse(const void *trailer, size_t len, uint64_t object_size,
			 uint64_t *footer_off, uint32_t *footer_len)
{
	const uint8_t *p = trailer;
	uint64_t off, flen;
	uint32_t n, crc;

	if (!p || len < BUNDLE_TRAILER_SIZE)
		return -EBADMSG;
	p += len - BUNDLE_TRAILER_SIZE;
	if (trailer_decode(p, &n, &off, &crc))
		return -EBADMSG;
	flen = (uint64_t)n * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE;
	if (object_size < flen || off != object_size - flen)
		return -EBADMSG;
	*footer_off = off;
	*footer_len = (uint32_t)flen;
	return 0;
}

int bundle_footer_open(const void *win, size_t len, uint64_t win_off,
		       struct bundle_footer *f)
{
	const uint8_t *p = win;
	uint64_t off;
	uint32_t n, crc;

	if (!p || len < BUNDLE_TRAILER_SIZE)
		return -EBADMSG;
	if (trailer_decode(p + len - BUNDLE_TRAILER_SIZE, &n, &off, &crc))
		return -EBADMSG;
	if ((uint64_t)len != (uint64_t)n * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE ||
	    off != win_off)
		return -EBADMSG;
	if (nv_crc32c(0, p, (size_t)n * BUNDLE_ENTRY_SIZE) != crc)
		return -EBADMSG;
	f->entries = p;
	f->n = n;
	f->footer_off = off;
	return 0;
}

int bundle_footer_get(const struct bundle_footer *f, uint32_t i,
		      struct bundle_entry *e)
{
	if (i >= f->n)
		return -EINVAL;
	if (entry_decode(f->entries + (size_t)i * BUNDLE_ENTRY_SIZE, e))
		return -EBADMSG;
	return entry_check(e, f->footer_off);
}

enum probe_key { KEY_SEQ, KEY_BYTE };

/*
 * Binary search: *pos = the number of leading entries whose (stream_id,
 * key) <= (stream, v).  One entry decoded (and validated) per probe.
 * When *pos > 0, entry *pos - 1 was probed and satisfied the predicate.
 * 0 or -EBADMSG.
 */
static int count_le(const struct bundle_footer *f, uint64_t stream,
		    enum probe_key k, uint64_t v, uint32_t *pos)
{
	uint32_t lo = 0, hi = f->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		struct bundle_entry e;
		uint64_t ev;
		int rc = bundle_footer_get(f, mid, &e);

		if (rc)
			return rc;
		ev = k == KEY_SEQ ? e.first_seq : e.first_byte;
		if (e.stream_id < stream || (e.stream_id == stream && ev <= v))
			lo = mid + 1;
		else
			hi = mid;
	}
	*pos = lo;
	return 0;
}

/* The entry that could hold (stream, v): the last with key <= v.  Its
 * containment is the caller's to check.  0, -ENOENT, -EBADMSG. */
static int find_floor(const struct bundle_footer *f, uint64_t stream,
		      enum probe_key k, uint64_t v, uint32_t *idx,
		      struct bundle_entry *e)
{
	uint32_t pos;
	int rc = count_le(f, stream, k, v, &pos);

	if (rc)
		return rc;
	if (pos == 0)
		return -ENOENT;
	rc = bundle_footer_get(f, pos - 1, e);
	if (rc)
		return rc;
	if (e->stream_id != stream)
		return -ENOENT;
	*idx = pos - 1;
	return 0;
}

int bundle_footer_find_seq(const struct bundle_footer *f, uint64_t stream,
			   uint64_t seq, uint32_t *idx)
{
	struct bundle_entry e;
	uint32_t i;
	int rc = find_floor(f, stream, KEY_SEQ, seq, &i, &e);

	if (rc)
		return rc;
	if (seq < e.first_seq || seq - e.first_seq >= e.nrec)
		return -ENOENT;
	*idx = i;
	return 0;
}

int bundle_footer_find_byte(const struct bundle_footer *f, uint64_t stream,
			    uint64_t byte, uint32_t *idx)
{
	struct bundle_entry e;
	uint32_t i;
	int rc = find_floor(f, stream, KEY_BYTE, byte, &i, &e);

	if (rc)
		return rc;
	/* Entries of zero-length bodies hold no byte; ties on first_byte
	 * resolve to the last entry, which is the one with the bytes. */
	if (byte < e.first_byte || byte - e.first_byte >= bundle_entry_body_bytes(&e))
		return -ENOENT;
	*idx = i;
	return 0;
}

int bundle_footer_stream(const struct bundle_footer *f, uint64_t stream,
			 uint32_t *first, uint32_t *count)
{
	struct bundle_entry e;
	uint32_t lo = 0, hi;
	int rc;

	rc = count_le(f, stream, KEY_SEQ, UINT64_MAX, &hi);
	if (!rc && stream > 0)
		rc = count_le(f, stream - 1, KEY_SEQ, UINT64_MAX, &lo);
	if (rc)
		return rc;
	/* hi >= lo even on an unsorted footer: a binary search's answer is
	 * monotonic in its key whatever the array holds. */
	if (hi == lo)
		return -ENOENT;
	/* Only an unsorted (hostile) footer can fail these. */
	if (bundle_footer_get(f, lo, &e) || e.stream_id != stream ||
	    bundle_footer_get(f, hi - 1, &e) || e.stream_id != stream)
		return -EBADMSG;
	*first = lo;
	*count = hi - lo;
	return 0;
}

/* ------------------------------------------------ chunk decoding */

int bundle_frames_next(const uint8_t *frames, size_t len, size_t *off,
		       struct bundle_rec *rec)
{
	size_t o = *off;
	uint32_t blen;

	if (o == len)
		return 0;
	if (o > len || len - o < BUNDLE_FRAME_HDR)
		return -EBADMSG;
	blen = nv_get_le32(frames + o);
	if (blen > BUNDLE_RECORD_MAX || blen > len - o - BUNDLE_FRAME_HDR)
		return -EBADMSG;
	rec->len = blen;
	rec->ts = nv_get_le64(frames + o + 4);
	rec->body = frames + o + BUNDLE_FRAME_HDR;
	*off = o + BUNDLE_FRAME_HDR + blen;
	return 1;
}

/* Exactly nrec frames tiling [p, p+len).  0 or -EBADMSG. */
static int frames_check(const uint8_t *p, size_t len, uint32_t nrec)
{
	struct bundle_rec rec;
	size_t off = 0;

	for (uint32_t i = 0; i < nrec; i++)
		if (bundle_frames_next(p, len, &off, &rec) != 1)
			return -EBADMSG;
	return off == len ? 0 : -EBADMSG;
}

/* What a chunk must pass before anything is allocated or written for it:
 * the entry's bounds, the stored length and CRC, and a declared zstd
 * content size equal to raw_len.  0 or -EBADMSG. */
static int chunk_check(const struct bundle_entry *e, const void *chunk, size_t len)
{
	/* The entry may come from anywhere: its chunk_off is not ours to
	 * bound here, the rest is. */
	if (entry_check(e, UINT64_MAX))
		return -EBADMSG;
	if (!chunk || len != e->comp_len || nv_crc32c(0, chunk, len) != e->crc)
		return -EBADMSG;
	if (e->codec == BUNDLE_ZSTD) {
		/* A declared size that differs is rejected here; an
		 * undeclared one is bounded by the decompression. */
		unsigned long long fcs = ZSTD_getFrameContentSize(chunk, len);

		if (fcs == ZSTD_CONTENTSIZE_ERROR ||
		    (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != e->raw_len))
			return -EBADMSG;
	}
	return 0;
}

/* Decode a checked chunk into dst (raw_len bytes; may be chunk itself for
 * a raw one) and check its frames.  0, -EBADMSG, -ENOMEM. */
static int chunk_decode_checked(const struct bundle_entry *e, const void *chunk, size_t len,
				uint8_t *dst)
{
	int rc;

	if (e->codec == BUNDLE_RAW) {
		if (dst != chunk) /* in place: the stored bytes are the frames */
			memmove(dst, chunk, e->raw_len);
	} else {
		ZSTD_DCtx *dc = dctx_get();
		size_t n;

		if (!dc) {
			rc = -ENOMEM;
			goto out;
		}
		/* Writes at most raw_len bytes: more is dstSize_tooSmall. */
		n = ZSTD_decompressDCtx(dc, dst, e->raw_len, chunk, len);
		if (ZSTD_isError(n)) {
			rc = zstd_to_errno(n);
			if (rc != -ENOMEM)
				rc = -EBADMSG;
			goto out;
		}
		if (n != e->raw_len)
			return -EBADMSG;
	}
	return frames_check(dst, e->raw_len, e->nrec);
out:
	if (rc == -ENOMEM)
		nv_log(NV_WARN, NV_SUB_READ,
		       "bundle chunk of stream %llu seq %llu (%u bytes): out of memory",
		       (unsigned long long)e->stream_id,
		       (unsigned long long)e->first_seq, e->raw_len);
	return rc;
}

int bundle_chunk_decode_into(const struct bundle_entry *e, const void *chunk, size_t len,
			     uint8_t *dst)
{
	int rc = chunk_check(e, chunk, len);

	if (rc)
		return rc;
	return dst ? chunk_decode_checked(e, chunk, len, dst) : -EBADMSG;
}

int bundle_chunk_decode(const struct bundle_entry *e, const void *chunk,
			size_t len, struct nv_buf *raw)
{
	int rc = chunk_check(e, chunk, len);

	if (rc)
		return rc;
	rc = nv_buf_reserve(raw, e->raw_len);
	if (rc) {
		if (rc == -ENOMEM) /* -E2BIG (raw's max) is the caller's to say */
			nv_log(NV_WARN, NV_SUB_READ,
			       "bundle chunk of stream %llu seq %llu (%u bytes): out of memory",
			       (unsigned long long)e->stream_id,
			       (unsigned long long)e->first_seq, e->raw_len);
		return rc;
	}
	rc = chunk_decode_checked(e, chunk, len, raw->ptr + raw->len);
	if (rc)
		return rc;
	raw->len += e->raw_len;
	raw->ptr[raw->len] = 0; /* nv_buf keeps a NUL after the content */
	return 0;
}
