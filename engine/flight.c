/*
 * flight.c - see flight.h.
 *
 * Locking: a flight is owned by its chain; everything here runs either
 * under the chain lock (flight_add, flight_seal) or by the single owner
 * of a flight outside the chain's lists (put worker, releaser, absorb).
 * Run buffers are shared read-only after sealing, with atomic refcounts.
 */
#include "config.h"
#include "engine/flight.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct run_buf *rbuf_new(uint64_t stream_id, uint64_t first_seq, uint64_t first_byte)
{
	struct run_buf *rb = calloc(1, sizeof(*rb));

	if (!rb)
		return NULL;
	atomic_init(&rb->refs, 1);
	rb->stream_id = stream_id;
	rb->first_seq = first_seq;
	rb->first_byte = first_byte;
	return rb;
}

void rbuf_ref(struct run_buf *rb)
{
	int old = atomic_fetch_add(&rb->refs, 1);

	assert(old > 0);
	(void)old;
}

void rbuf_unref(struct run_buf *rb)
{
	if (!rb)
		return;
	if (atomic_fetch_sub(&rb->refs, 1) == 1) {
		free(rb->frames);
		free(rb->rec_off);
		free(rb);
	}
}

int rbuf_add(struct run_buf *rb, uint64_t ts, const void *body, uint32_t len)
{
	size_t need = rb->len + BUNDLE_FRAME_HDR + len;

	if (need > UINT32_MAX)
		return -E2BIG;
	if (need > rb->cap) {
		/* Double, but start at the first record's size: a 1 MiB
		 * record does not pay for a 4 KiB ramp. */
		size_t ncap = rb->cap ? rb->cap * 2 : 4096;
		uint8_t *p;

		if (ncap < need)
			ncap = rb->cap ? need + need / 2 : need;
		p = realloc(rb->frames, ncap);
		if (!p)
			return -ENOMEM;
		rb->frames = p;
		rb->cap = ncap;
	}
	if (rb->nrec == rb->rec_cap) {
		uint32_t ncap = rb->rec_cap ? rb->rec_cap * 2 : 16;
		uint32_t *p = realloc(rb->rec_off, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		rb->rec_off = p;
		rb->rec_cap = ncap;
	}
	rb->rec_off[rb->nrec++] = (uint32_t)rb->len;
	bundle_frame_hdr(rb->frames + rb->len, len, ts);
	if (len)
		memcpy(rb->frames + rb->len + BUNDLE_FRAME_HDR, body, len);
	rb->len = need;
	if (ts > rb->max_ts)
		rb->max_ts = ts;
	return 0;
}

/* Stream offset of the body of record i. */
static uint64_t rec_byte(const struct run_buf *rb, uint32_t i)
{
	return rb->first_byte + rb->rec_off[i] - (uint64_t)i * BUNDLE_FRAME_HDR;
}

static uint32_t rec_len(const struct run_buf *rb, uint32_t i)
{
	size_t end = i + 1 < rb->nrec ? rb->rec_off[i + 1] : rb->len;

	return (uint32_t)(end - rb->rec_off[i] - BUNDLE_FRAME_HDR);
}

size_t rbuf_copy(const struct run_buf *rb, uint64_t off, void *dst, size_t len,
		 uint32_t max_recs)
{
	uint32_t lo = 0, hi = rb->nrec, i;
	size_t done = 0;
	uint64_t pos;

	if (rb->nrec == 0 || off < rb->first_byte ||
	    off >= rb->first_byte + rbuf_body_bytes(rb))
		return 0;
	/* Last record whose body starts at or before off. */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (rec_byte(rb, mid) <= off)
			lo = mid;
		else
			hi = mid;
	}
	/* Zero-length records share their offset with the next; skip to
	 * the one that actually holds off. */
	i = lo;
	while (i < rb->nrec && rec_byte(rb, i) + rec_len(rb, i) <= off)
		i++;
	pos = off;
	for (uint32_t taken = 0; i < rb->nrec && done < len && taken < max_recs; i++, taken++) {
		uint64_t rb0 = rec_byte(rb, i);
		uint32_t rl = rec_len(rb, i);
		size_t skip = (size_t)(pos - rb0);
		size_t n = rl - skip;

		if (n > len - done)
			n = len - done;
		memcpy((uint8_t *)dst + done,
		       rb->frames + rb->rec_off[i] + BUNDLE_FRAME_HDR + skip, n);
		done += n;
		pos += n;
	}
	return done;
}

struct flight *flight_new(uint64_t gen, unsigned cls, uint64_t epoch)
{
	struct flight *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->gen = gen;
	f->cls = (uint8_t)cls;
	f->epoch = epoch;
	f->state = FLIGHT_OPEN;
	return f;
}

void flight_free(struct flight *f)
{
	if (!f)
		return;
	assert(f->ndone == 0);
	for (uint32_t i = 0; i < f->nruns; i++) {
		rbuf_unref(f->runs[i].rb);
		stream_put(f->runs[i].stream);
	}
	free(f->runs);
	free(f->done);
	free(f);
}

int flight_add(struct flight *f, struct nv_stream *s, uint64_t seq, uint64_t byte,
	       uint64_t ts, const void *body, uint32_t len, flight_done_fn cb, void *arg)
{
	struct flight_run *run;
	int rc;

	if (f->ndone == f->done_cap) {
		uint32_t ncap = f->done_cap ? f->done_cap * 2 : 16;
		struct flight_done *p = realloc(f->done, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		f->done = p;
		f->done_cap = ncap;
	}
	if (s->open_flight_gen == f->gen && s->open_run < f->nruns &&
	    f->runs[s->open_run].stream == s) {
		run = &f->runs[s->open_run];
	} else {
		if (f->nruns == f->runs_cap) {
			uint32_t ncap = f->runs_cap ? f->runs_cap * 2 : 8;
			struct flight_run *p = realloc(f->runs, ncap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			f->runs = p;
			f->runs_cap = ncap;
		}
		run = &f->runs[f->nruns];
		memset(run, 0, sizeof(*run));
		run->rb = rbuf_new(s->id, seq, byte);
		if (!run->rb)
			return -ENOMEM;
		stream_get(s);
		run->stream = s;
		run->first_seq = seq;
		run->first_byte = byte;
		s->open_flight_gen = f->gen;
		s->open_run = f->nruns++;
	}
	assert(run->first_seq + run->nrec == seq);
	rc = rbuf_add(run->rb, ts, body, len);
	if (rc)
		return rc; /* the run stays, possibly empty; seal drops empty runs */
	run->nrec++;
	run->nbytes += len;
	if (ts > run->max_ts)
		run->max_ts = ts;
	f->bytes += BUNDLE_FRAME_HDR + len;
	f->done[f->ndone].fn = cb;
	f->done[f->ndone].arg = arg;
	f->ndone++;
	return 0;
}

static int run_cmp(const void *a, const void *b)
{
	const struct flight_run *x = a, *y = b;

	return x->stream->id < y->stream->id ? -1 : x->stream->id > y->stream->id;
}

void flight_seal(struct flight *f, uint64_t slot)
{
	uint32_t n = 0;

	/* Drop runs that an allocation failure left empty. */
	for (uint32_t i = 0; i < f->nruns; i++) {
		if (f->runs[i].nrec == 0) {
			rbuf_unref(f->runs[i].rb);
			stream_put(f->runs[i].stream);
			continue;
		}
		f->runs[n++] = f->runs[i];
	}
	f->nruns = n;
	/* Give back growth slack: the tail cache charges capacity. */
	for (uint32_t i = 0; i < n; i++) {
		struct run_buf *rb = f->runs[i].rb;

		if (rb->cap > rb->len + rb->len / 8 + 64) {
			uint8_t *p = realloc(rb->frames, rb->len);

			if (p) {
				rb->frames = p;
				rb->cap = rb->len;
			}
		}
	}
	qsort(f->runs, f->nruns, sizeof(*f->runs), run_cmp);
	f->slot = slot;
	f->state = FLIGHT_SEALED;
}

void flight_bundle_runs(const struct flight *f, struct bundle_run *out)
{
	for (uint32_t i = 0; i < f->nruns; i++) {
		const struct run_buf *rb = f->runs[i].rb;

		out[i].stream_id = rb->stream_id;
		out[i].first_seq = rb->first_seq;
		out[i].first_byte = rb->first_byte;
		out[i].frames = rb->frames;
		out[i].frames_len = rb->len;
		out[i].nrec = rb->nrec;
	}
}

void flight_complete(struct flight *f, int err)
{
	for (uint32_t i = 0; i < f->ndone; i++)
		if (f->done[i].fn)
			f->done[i].fn(f->done[i].arg, err);
	f->ndone = 0;
}
