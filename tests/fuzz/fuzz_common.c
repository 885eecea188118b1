/*
 * fuzz_common.c - see fuzz.h.
 */
#include "config.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <string.h>

#include "src/base/crc32c.h"
#include "src/base/endian.h"
#include "src/base/log.h"

void fuzz_quiet(void)
{
	nv_log_level = -1; /* below NV_ERR: nothing prints */
}

uint8_t fuzz_u8(struct fuzz_in *in)
{
	return in->off < in->len ? in->p[in->off++] : 0;
}

uint64_t fuzz_le64(struct fuzz_in *in)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)fuzz_u8(in) << (8 * i);
	return v;
}

const uint8_t *fuzz_rest(struct fuzz_in *in, size_t *n)
{
	const uint8_t *p = in->p + in->off;

	*n = in->len - in->off;
	in->off = in->len;
	return p;
}

char *fuzz_strndup(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);

	if (!s)
		abort();
	if (n)
		memcpy(s, p, n);
	s[n] = 0;
	return s;
}

uint8_t *fuzz_memdup(const uint8_t *p, size_t n)
{
	uint8_t *d;

	if (n == 0)
		return NULL;
	d = malloc(n);
	if (!d)
		abort();
	memcpy(d, p, n);
	return d;
}

long fuzz_walk_frames(const uint8_t *frames, size_t len)
{
	struct bundle_rec rec;
	size_t off = 0;
	long n = 0;

	for (;;) {
		size_t before = off;
		int rc = bundle_frames_next(frames, len, &off, &rec);

		FUZZ_ASSERT(rc == 1 || rc == 0 || rc == -EBADMSG);
		if (rc == 0) {
			FUZZ_ASSERT(off == len);
			return n;
		}
		if (rc < 0) {
			FUZZ_ASSERT(off == before); /* a failed step does not move */
			return -1;
		}
		FUZZ_ASSERT(off > before && off <= len);
		FUZZ_ASSERT(rec.len <= BUNDLE_RECORD_MAX);
		FUZZ_ASSERT(rec.body == frames + before + BUNDLE_FRAME_HDR);
		FUZZ_ASSERT(off - before == BUNDLE_FRAME_HDR + (size_t)rec.len);
		FUZZ_ASSERT(rec.ts == nv_get_le64(frames + before + 4));
		n++;
	}
}

void fuzz_bundle_fix(uint8_t *obj, uint8_t *win, size_t len, uint64_t footer_off,
		     unsigned fix)
{
	uint8_t *t;
	uint64_t n;

	if (len < BUNDLE_TRAILER_SIZE)
		return;
	t = win + len - BUNDLE_TRAILER_SIZE;
	if (fix & FUZZ_FIX_SHAPE) {
		memcpy(t, BUNDLE_MAGIC, 8);
		nv_put_le16(t + 8, BUNDLE_VERSION);
		nv_put_le16(t + 10, BUNDLE_ENTRY_SIZE);
		nv_put_le32(t + 12, (uint32_t)((len - BUNDLE_TRAILER_SIZE) / BUNDLE_ENTRY_SIZE));
		nv_put_le64(t + 16, footer_off);
	}
	/* The entries the trailer claims, when the window holds them. */
	n = nv_get_le32(t + 12);
	if (n > (len - BUNDLE_TRAILER_SIZE) / BUNDLE_ENTRY_SIZE)
		n = 0;
	if ((fix & FUZZ_FIX_CHUNKS) && obj) {
		for (uint64_t i = 0; i < n; i++) {
			uint8_t *p = win + i * BUNDLE_ENTRY_SIZE;
			uint64_t off = nv_get_le64(p + 24);
			uint32_t clen = nv_get_le32(p + 44);

			if (clen <= footer_off && off <= footer_off - clen)
				nv_put_le32(p + 52, nv_crc32c(0, obj + off, clen));
		}
	}
	if (fix & FUZZ_FIX_ENTRIES)
		nv_put_le32(t + 24, nv_crc32c(0, win, (size_t)n * BUNDLE_ENTRY_SIZE));
	if (fix & FUZZ_FIX_TRAILER)
		nv_put_le32(t + 28, nv_crc32c(0, t, 28));
}

/* ------------------------------------------------------------------ */
/* footer checks                                                       */

/* What bundle.h promises of every entry a decoder hands out. */
static void check_entry(const struct bundle_entry *e, uint64_t footer_off)
{
	FUZZ_ASSERT(e->codec == BUNDLE_RAW || e->codec == BUNDLE_ZSTD);
	FUZZ_ASSERT(e->nrec >= 1);
	FUZZ_ASSERT(e->comp_len <= BUNDLE_CHUNK_MAX && e->raw_len <= BUNDLE_CHUNK_MAX);
	FUZZ_ASSERT((uint64_t)e->nrec * BUNDLE_FRAME_HDR <= e->raw_len);
	FUZZ_ASSERT(e->codec != BUNDLE_RAW || e->comp_len == e->raw_len);
	/* The chunk lies wholly below the footer. */
	FUZZ_ASSERT(e->comp_len <= footer_off);
	FUZZ_ASSERT(e->chunk_off <= footer_off - e->comp_len);
	/* Seq and byte ranges do not wrap, so callers may add freely. */
	FUZZ_ASSERT(e->first_seq <= UINT64_MAX - e->nrec);
	FUZZ_ASSERT(e->first_byte <= UINT64_MAX - bundle_entry_body_bytes(e));
}

/* b may follow a in a well-formed footer (the encoder's rule). */
static bool follows(const struct bundle_entry *a, const struct bundle_entry *b)
{
	if (a->stream_id != b->stream_id)
		return a->stream_id < b->stream_id;
	return a->first_seq + a->nrec <= b->first_seq &&
	       a->first_byte + bundle_entry_body_bytes(a) <= b->first_byte;
}

static bool get_ok(const struct bundle_footer *f, uint32_t i, struct bundle_entry *e)
{
	return bundle_footer_get(f, i, e) == 0;
}

/* find_seq: any answer holds the key.  Returns rc, *idx on 0. */
static int probe_seq(const struct bundle_footer *f, uint64_t s, uint64_t seq,
		     bool wellformed, uint32_t *idx)
{
	struct bundle_entry e;
	int rc = bundle_footer_find_seq(f, s, seq, idx);

	FUZZ_ASSERT(rc == 0 || rc == -ENOENT || rc == -EBADMSG);
	FUZZ_ASSERT(!(wellformed && rc == -EBADMSG));
	if (rc == 0) {
		FUZZ_ASSERT(*idx < f->n);
		FUZZ_ASSERT(get_ok(f, *idx, &e));
		FUZZ_ASSERT(e.stream_id == s);
		FUZZ_ASSERT(e.first_seq <= seq && seq - e.first_seq < e.nrec);
	}
	return rc;
}

static int probe_byte(const struct bundle_footer *f, uint64_t s, uint64_t byte,
		      bool wellformed, uint32_t *idx)
{
	struct bundle_entry e;
	int rc = bundle_footer_find_byte(f, s, byte, idx);

	FUZZ_ASSERT(rc == 0 || rc == -ENOENT || rc == -EBADMSG);
	FUZZ_ASSERT(!(wellformed && rc == -EBADMSG));
	if (rc == 0) {
		FUZZ_ASSERT(*idx < f->n);
		FUZZ_ASSERT(get_ok(f, *idx, &e));
		FUZZ_ASSERT(e.stream_id == s);
		FUZZ_ASSERT(e.first_byte <= byte &&
			    byte - e.first_byte < bundle_entry_body_bytes(&e));
	}
	return rc;
}

/* bundle_footer_stream: any answer is a run of s.  On a well-formed
 * footer (sorted by stream) the run is exact: its neighbours belong to
 * other streams, and it contains entry `holder` when that entry is of s
 * (UINT32_MAX: no such promise). */
static void probe_stream(const struct bundle_footer *f, uint64_t s, bool wellformed,
			 uint32_t holder)
{
	struct bundle_entry e;
	uint32_t first = 0, count = 0;
	int rc = bundle_footer_stream(f, s, &first, &count);

	FUZZ_ASSERT(rc == 0 || rc == -ENOENT || rc == -EBADMSG);
	FUZZ_ASSERT(!(wellformed && rc == -EBADMSG));
	if (rc == 0) {
		FUZZ_ASSERT(count >= 1 && first < f->n && count <= f->n - first);
		FUZZ_ASSERT(get_ok(f, first, &e) && e.stream_id == s);
		FUZZ_ASSERT(get_ok(f, first + count - 1, &e) && e.stream_id == s);
	}
	if (!wellformed)
		return;
	if (holder != UINT32_MAX)
		FUZZ_ASSERT(rc == 0 && holder >= first && holder - first < count);
	if (rc == 0 && first > 0)
		FUZZ_ASSERT(get_ok(f, first - 1, &e) && e.stream_id != s);
	if (rc == 0 && first + count < f->n)
		FUZZ_ASSERT(get_ok(f, first + count, &e) && e.stream_id != s);
}

uint32_t fuzz_check_footer(const struct bundle_footer *f)
{
	struct bundle_entry e, prev;
	bool wellformed = true, have_prev = false;
	uint32_t nvalid = 0, idx;
	int rc;

	FUZZ_ASSERT(f->n <= BUNDLE_ENTRIES_MAX);
	FUZZ_ASSERT(bundle_footer_get(f, f->n, &e) == -EINVAL);
	for (uint32_t i = 0; i < f->n; i++) {
		rc = bundle_footer_get(f, i, &e);
		FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
		if (rc) {
			wellformed = false;
			continue;
		}
		nvalid++;
		check_entry(&e, f->footer_off);
		if (have_prev && !follows(&prev, &e))
			wellformed = false;
		prev = e;
		have_prev = true;
	}

	/* Keys that cannot be anywhere, on any footer. */
	(void)probe_seq(f, 0, 0, wellformed, &idx);
	(void)probe_seq(f, UINT64_MAX, UINT64_MAX, wellformed, &idx);
	(void)probe_byte(f, UINT64_MAX, 0, wellformed, &idx);
	probe_stream(f, 0, wellformed, UINT32_MAX);
	probe_stream(f, UINT64_MAX, wellformed, UINT32_MAX);

	/* Keys taken from the entries themselves.  The footer's size bounds
	 * the work: n <= input size / 64. */
	for (uint32_t i = 0; i < f->n; i++) {
		uint64_t body;

		if (!get_ok(f, i, &e))
			continue;
		body = bundle_entry_body_bytes(&e);
		rc = probe_seq(f, e.stream_id, e.first_seq, wellformed, &idx);
		if (wellformed)
			FUZZ_ASSERT(rc == 0 && idx == i);
		rc = probe_seq(f, e.stream_id, e.first_seq + e.nrec - 1, wellformed, &idx);
		if (wellformed)
			FUZZ_ASSERT(rc == 0 && idx == i);
		(void)probe_seq(f, e.stream_id, e.first_seq + e.nrec, wellformed, &idx);
		if (e.first_seq)
			(void)probe_seq(f, e.stream_id, e.first_seq - 1, wellformed, &idx);
		rc = probe_byte(f, e.stream_id, e.first_byte, wellformed, &idx);
		if (wellformed && body)
			FUZZ_ASSERT(rc == 0 && idx == i);
		if (body) {
			rc = probe_byte(f, e.stream_id, e.first_byte + body - 1, wellformed, &idx);
			if (wellformed)
				FUZZ_ASSERT(rc == 0 && idx == i);
		}
		(void)probe_byte(f, e.stream_id, e.first_byte + body, wellformed, &idx);
		probe_stream(f, e.stream_id, wellformed, i);
		if (e.stream_id)
			probe_stream(f, e.stream_id - 1, wellformed, UINT32_MAX);
	}
	return nvalid;
}
