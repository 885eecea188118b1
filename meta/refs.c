/*
 * refs.c - see refs.h.
 *
 * Value layout v1 (little-endian, src/base/wire.h):
 *   u8 version=1 | u8 kind | u64 first_seq | u64 end_seq | u64 first_byte
 *   | u64 end_byte | u64 max_ts | u8 class | str star | u64 epoch
 *   | u32 nslots | nslots x (u64 slot, u64 first_seq, u64 first_byte,
 *   u64 footer_off, u32 footer_len)
 */
#include "config.h"
#include "meta/refs.h"
#include "meta/keys.h"
#include "meta/streams.h"
#include "meta/tuple.h"
#include "src/base/endian.h"
#include "src/base/wire.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_V1 1

void meta_ref_init(struct meta_ref *r)
{
	memset(r, 0, sizeof(*r));
}

void meta_ref_clear(struct meta_ref *r)
{
	free(r->slots);
	free(r->objs);
	meta_ref_init(r);
}

int meta_ref_add_obj(struct meta_ref *r, const struct meta_ref_obj *o)
{
	if (r->nobjs == META_REF_OBJS_MAX)
		return -E2BIG;
	if (r->nobjs == r->objs_cap) {
		uint32_t ncap = r->objs_cap ? r->objs_cap * 2 : 4;
		struct meta_ref_obj *p = realloc(r->objs, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		r->objs = p;
		r->objs_cap = ncap;
	}
	r->objs[r->nobjs++] = *o;
	return 0;
}

/*
 * The one floor search of a row's sorted entries: the index of the last
 * of n entries (stride bytes apart from base) whose uint64 at offset off
 * is <= pos, or 0 when none is.  Serves objects and slots, by seq and by
 * byte alike (enum meta_ref_key).
 */
static uint32_t floor_index(const void *base, uint32_t n, size_t stride, size_t off,
			    uint64_t pos)
{
	uint32_t lo = 0, hi = n; /* answer in [lo, hi) */

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		uint64_t v;

		memcpy(&v, (const uint8_t *)base + (size_t)mid * stride + off, sizeof(v));
		if (v <= pos)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

uint32_t meta_ref_obj_find(const struct meta_ref *r, enum meta_ref_key key, uint64_t pos)
{
	return floor_index(r->objs, r->nobjs, sizeof(*r->objs),
			   key == META_REF_BY_SEQ ? offsetof(struct meta_ref_obj, first_seq)
						  : offsetof(struct meta_ref_obj, first_byte),
			   pos);
}

uint64_t meta_ref_obj_end_seq(const struct meta_ref *r, uint32_t i)
{
	return i + 1 < r->nobjs ? r->objs[i + 1].first_seq : r->end_seq;
}

uint64_t meta_ref_obj_end_byte(const struct meta_ref *r, uint32_t i)
{
	return i + 1 < r->nobjs ? r->objs[i + 1].first_byte : r->end_byte;
}

char *meta_settled_key(char *buf, size_t cap, const char *bucket, uint64_t stream,
		       uint64_t epoch, uint64_t first_seq, uint32_t rev)
{
	if (rev)
		snprintf(buf, cap, "streams/%s/%llu/%016llx/%016llx~%u", bucket,
			 (unsigned long long)stream, (unsigned long long)epoch,
			 (unsigned long long)first_seq, rev);
	else
		snprintf(buf, cap, "streams/%s/%llu/%016llx/%016llx", bucket,
			 (unsigned long long)stream, (unsigned long long)epoch,
			 (unsigned long long)first_seq);
	return buf;
}

int meta_ref_add_slot(struct meta_ref *r, const struct meta_ref_slot *s)
{
	if (r->nslots == META_REF_SLOTS_MAX)
		return -E2BIG;
	if (r->nslots == r->slots_cap) {
		uint32_t ncap = r->slots_cap ? r->slots_cap * 2 : 4;
		struct meta_ref_slot *p = realloc(r->slots, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		r->slots = p;
		r->slots_cap = ncap;
	}
	r->slots[r->nslots++] = *s;
	return 0;
}

uint32_t meta_ref_slot_find(const struct meta_ref *r, enum meta_ref_key key, uint64_t pos)
{
	return floor_index(r->slots, r->nslots, sizeof(*r->slots),
			   key == META_REF_BY_SEQ ? offsetof(struct meta_ref_slot, first_seq)
						  : offsetof(struct meta_ref_slot, first_byte),
			   pos);
}

int meta_ref_encode(const struct meta_ref *r, struct nv_buf *out)
{
	int rc;

	nv_buf_reset(out);
	rc = nv_wr_u8(out, REF_V1);
	if (!rc)
		rc = nv_wr_u8(out, r->kind);
	if (!rc)
		rc = nv_wr_u64(out, r->first_seq);
	if (!rc)
		rc = nv_wr_u64(out, r->end_seq);
	if (!rc)
		rc = nv_wr_u64(out, r->first_byte);
	if (!rc)
		rc = nv_wr_u64(out, r->end_byte);
	if (!rc)
		rc = nv_wr_u64(out, r->max_ts);
	if (rc)
		return rc;
	if (r->kind == META_REF_CATALOG) {
		rc = nv_wr_str(out, r->bucket);
		if (!rc)
			rc = nv_wr_u32(out, r->nobjs);
		for (uint32_t i = 0; !rc && i < r->nobjs; i++) {
			const struct meta_ref_obj *o = &r->objs[i];

			rc = nv_wr_u64(out, o->first_seq);
			if (!rc)
				rc = nv_wr_u64(out, o->first_byte);
			if (!rc)
				rc = nv_wr_u64(out, o->epoch);
			if (!rc)
				rc = nv_wr_u32(out, o->rev);
			if (!rc)
				rc = nv_wr_u64(out, o->footer_off);
			if (!rc)
				rc = nv_wr_u32(out, o->footer_len);
			if (!rc)
				rc = nv_wr_u64(out, o->max_ts);
		}
		return rc;
	}
	rc = nv_wr_u8(out, r->cls);
	if (!rc)
		rc = nv_wr_str(out, r->star);
	if (!rc)
		rc = nv_wr_u64(out, r->epoch);
	if (!rc)
		rc = nv_wr_u32(out, r->nslots);
	for (uint32_t i = 0; !rc && i < r->nslots; i++) {
		const struct meta_ref_slot *s = &r->slots[i];

		rc = nv_wr_u64(out, s->slot);
		if (!rc)
			rc = nv_wr_u64(out, s->first_seq);
		if (!rc)
			rc = nv_wr_u64(out, s->first_byte);
		if (!rc)
			rc = nv_wr_u64(out, s->footer_off);
		if (!rc)
			rc = nv_wr_u32(out, s->footer_len);
	}
	return rc;
}

/* The catalog tail of a value: bucket and objects (refs.h). */
static int decode_catalog(struct nv_rd *rd, struct meta_ref *r)
{
	uint32_t blen, nobjs;
	const uint8_t *b = nv_rd_bytes(rd, &blen, sizeof(r->bucket) - 1);

	if (!b || blen == 0 || memchr(b, 0, blen) || memchr(b, '/', blen))
		return -EBADMSG;
	memcpy(r->bucket, b, blen);
	r->bucket[blen] = 0;
	nobjs = nv_rd_u32(rd);
	if (nv_rd_error(rd) || nobjs == 0 || nobjs > META_REF_OBJS_MAX ||
	    (uint64_t)nobjs * 48 != nv_rd_left(rd))
		return -EBADMSG;
	for (uint32_t i = 0; i < nobjs; i++) {
		struct meta_ref_obj o;

		o.first_seq = nv_rd_u64(rd);
		o.first_byte = nv_rd_u64(rd);
		o.epoch = nv_rd_u64(rd);
		o.rev = nv_rd_u32(rd);
		o.footer_off = nv_rd_u64(rd);
		o.footer_len = nv_rd_u32(rd);
		o.max_ts = nv_rd_u64(rd);
		if (i == 0 ? (o.first_seq != r->first_seq || o.first_byte != r->first_byte)
			   : (o.first_seq <= r->objs[i - 1].first_seq ||
			      o.first_byte < r->objs[i - 1].first_byte))
			return -EBADMSG;
		if (o.first_seq >= r->end_seq || o.first_byte > r->end_byte || o.footer_len == 0)
			return -EBADMSG;
		if (meta_ref_add_obj(r, &o))
			return -ENOMEM;
	}
	return nv_rd_done(rd);
}

int meta_ref_decode(const void *p, size_t n, uint64_t stream, struct meta_ref *r)
{
	struct nv_rd rd;
	uint32_t slen, nslots;
	const uint8_t *star;

	meta_ref_clear(r);
	nv_rd_init(&rd, p, n);
	if (nv_rd_u8(&rd) != REF_V1)
		return -EBADMSG;
	r->stream_id = stream;
	r->kind = nv_rd_u8(&rd);
	r->first_seq = nv_rd_u64(&rd);
	r->end_seq = nv_rd_u64(&rd);
	r->first_byte = nv_rd_u64(&rd);
	r->end_byte = nv_rd_u64(&rd);
	r->max_ts = nv_rd_u64(&rd);
	if (r->kind == META_REF_CATALOG) {
		int rc;

		if (nv_rd_error(&rd) || r->end_seq <= r->first_seq || r->end_byte < r->first_byte)
			goto bad;
		rc = decode_catalog(&rd, r);
		if (rc == -ENOMEM) {
			meta_ref_clear(r);
			return rc;
		}
		if (rc)
			goto bad;
		return 0;
	}
	r->cls = nv_rd_u8(&rd);
	star = nv_rd_bytes(&rd, &slen, META_STAR_MAX);
	if (!star || memchr(star, 0, slen))
		return -EBADMSG;
	memcpy(r->star, star, slen);
	r->star[slen] = 0;
	r->epoch = nv_rd_u64(&rd);
	nslots = nv_rd_u32(&rd);
	if (nv_rd_error(&rd) || r->kind != META_REF_SPAN || r->cls >= NV_CLASS_COUNT ||
	    meta_star_check(r->star) || r->end_seq <= r->first_seq ||
	    r->end_byte < r->first_byte || nslots == 0 || nslots > META_REF_SLOTS_MAX ||
	    (uint64_t)nslots * 36 != nv_rd_left(&rd))
		goto bad;
	for (uint32_t i = 0; i < nslots; i++) {
		struct meta_ref_slot s;

		s.slot = nv_rd_u64(&rd);
		s.first_seq = nv_rd_u64(&rd);
		s.first_byte = nv_rd_u64(&rd);
		s.footer_off = nv_rd_u64(&rd);
		s.footer_len = nv_rd_u32(&rd);
		/* Invariant 3: ascending, inside the ref. */
		if (i == 0 ? (s.first_seq != r->first_seq || s.first_byte != r->first_byte)
			   : (s.slot <= r->slots[i - 1].slot ||
			      s.first_seq <= r->slots[i - 1].first_seq ||
			      s.first_byte < r->slots[i - 1].first_byte))
			goto bad;
		if (s.first_seq >= r->end_seq || s.first_byte > r->end_byte || s.footer_len == 0)
			goto bad;
		if (meta_ref_add_slot(r, &s)) {
			meta_ref_clear(r);
			return -ENOMEM;
		}
	}
	if (nv_rd_done(&rd))
		goto bad;
	return 0;
bad:
	meta_ref_clear(r);
	return -EBADMSG;
}

/* The hint row of r's kind (refs.h "Hints"): r starts the newest row of
 * that kind.  Written beside every put; a stale hint only costs time. */
static int hint_txn_put(struct kv_txn *t, struct nv_buf *k, const struct meta_ref *r)
{
	uint8_t v[8];
	int rc = key_ref_hint(k, r->stream_id, r->kind);

	nv_put_le64(v, r->first_seq);
	return rc ? rc : kv_txn_put(t, k->ptr, k->len, v, sizeof(v));
}

/* The hint of kind: 0 and *seq, -ENOENT (none, or not a hint), kv error. */
static int hint_get(struct kv *kv, uint64_t stream, unsigned kind, uint64_t *seq)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, 64);
	rc = key_ref_hint(&k, stream, kind);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, NULL);
	if (!rc && v.len != 8)
		rc = -ENOENT; /* not ours: fall back to the bounded-by-nothing path */
	if (!rc)
		*seq = nv_get_le64(v.ptr);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_ref_txn_put(struct kv_txn *t, const struct meta_ref *r)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = meta_ref_encode(r, &v);
	if (!rc)
		rc = key_ref(&k, r->stream_id, r->first_seq);
	if (!rc)
		rc = kv_txn_put(t, k.ptr, k.len, v.ptr, v.len);
	if (!rc)
		rc = key_ref_byte(&k, r->stream_id, r->first_byte, r->first_seq);
	if (!rc)
		rc = kv_txn_put(t, k.ptr, k.len, v.ptr, v.len);
	if (!rc)
		rc = hint_txn_put(t, &k, r);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

/*
 * The twin rule, in this one place: a ref row and its byte-index row go
 * together, in the same transaction (refs.h).  With ver, the deletion
 * holds only while the ref row is still at that version.
 */
static int ref_txn_del_twins(struct kv_txn *t, uint64_t stream, uint64_t first_seq,
			     uint64_t first_byte, const uint64_t *ver)
{
	struct nv_buf k;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_ref(&k, stream, first_seq);
	if (!rc && ver)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, *ver);
	if (!rc)
		rc = kv_txn_del(t, k.ptr, k.len);
	if (!rc)
		rc = key_ref_byte(&k, stream, first_byte, first_seq);
	if (!rc)
		rc = kv_txn_del(t, k.ptr, k.len);
	nv_buf_free(&k);
	return rc;
}

int meta_ref_txn_del(struct kv_txn *t, uint64_t stream, uint64_t first_seq,
		     uint64_t first_byte)
{
	return ref_txn_del_twins(t, stream, first_seq, first_byte, NULL);
}

int meta_ref_txn_del_ver(struct kv_txn *t, uint64_t stream, uint64_t first_seq,
			 uint64_t first_byte, uint64_t ver)
{
	return ref_txn_del_twins(t, stream, first_seq, first_byte, &ver);
}

int meta_ref_txn_cmp_ver(struct kv_txn *t, uint64_t stream, uint64_t first_seq, uint64_t ver)
{
	struct nv_buf k;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_ref(&k, stream, first_seq);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, ver);
	nv_buf_free(&k);
	return rc;
}

/*
 * Floor windows.  etcd 3.4 answers a DESCEND range only after reading it
 * whole, so a floor over [stream start, pos] would cost the stream's
 * whole history (114 ms per 100,000 refs).  Refs are contiguous (refs.h
 * invariant 1): the ref covering pos starts in [pos - W, pos] once W is
 * at least its length, and a window of W seqs holds at most W refs (each
 * covers a seq at least).  So ref_floor() tries windows of width
 * FLOOR_W0 << (FLOOR_SHIFT * i) below pos and stops at the first that
 * holds a ref: a stream of small refs pays one lookup of <= FLOOR_W0_SEQ
 * keys, a stream of big refs a few empty (cheap) windows more.  By byte
 * the windows are FLOOR_W0_BYTE wide (a window holds at most one ref per
 * byte plus the empty records sharing a first byte).  The answer is the
 * same floor as one unbounded lookup, on every backend.
 */
#define FLOOR_W0_SEQ 32ull
#define FLOOR_W0_BYTE (32ull << 10)
#define FLOOR_SHIFT 5

/* The lower bound of window w (0: the whole space) into lo. */
static int floor_window_lo(struct nv_buf *lo, bool by_byte, uint64_t stream, uint64_t pos,
			   uint64_t w)
{
	if (w == 0 || w >= pos)
		return by_byte ? key_ref_bytes_of(lo, stream) : key_refs_of(lo, stream);
	return by_byte ? key_ref_byte(lo, stream, pos - w, 0) : key_ref(lo, stream, pos - w);
}

/* Floor in one of the two spaces of a stream; pos UINT64_MAX (the last
 * ref, at stream load) looks at the whole space at once. */
static int ref_floor(struct kv *kv, bool by_byte, uint64_t stream, uint64_t pos,
		     struct meta_ref *r)
{
	uint64_t w = pos == UINT64_MAX ? 0 : by_byte ? FLOOR_W0_BYTE : FLOOR_W0_SEQ;
	struct nv_buf k, lo, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&lo, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	/* By byte: the last of the refs starting at or before pos — among
	 * refs sharing a first byte (empty records), the one with data. */
	rc = by_byte ? key_ref_byte(&k, stream, pos, UINT64_MAX) : key_ref(&k, stream, pos);
	for (;;) {
		bool whole = w == 0 || w >= pos;

		if (!rc)
			rc = floor_window_lo(&lo, by_byte, stream, pos, w);
		if (!rc)
			rc = kv_floor(kv, k.ptr, k.len, lo.ptr, lo.len, NULL, &v, NULL);
		if (rc != -ENOENT || whole)
			break;
		rc = 0;
		w = w > (UINT64_MAX >> FLOOR_SHIFT) ? UINT64_MAX : w << FLOOR_SHIFT;
	}
	if (!rc)
		rc = meta_ref_decode(v.ptr, v.len, stream, r);
	nv_buf_free(&k);
	nv_buf_free(&lo);
	nv_buf_free(&v);
	return rc;
}

int meta_ref_get(struct kv *kv, uint64_t stream, uint64_t first_seq, struct meta_ref *r,
		 uint64_t *ver)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_ref(&k, stream, first_seq);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (!rc)
		rc = meta_ref_decode(v.ptr, v.len, stream, r);
	if (!rc && r->first_seq != first_seq)
		rc = -EBADMSG;
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

struct settled_arg {
	uint64_t trim_seq;
	uint64_t seq, byte;
};

static int settled_visit(void *arg, const struct meta_ref *r)
{
	struct settled_arg *a = arg;

	if (r->kind != META_REF_CATALOG)
		/* A span ref trim left behind (not reclaimed yet) before
		 * the catalog rows is no settled end. */
		return r->end_seq <= a->trim_seq ? 0 : 1;
	a->seq = r->end_seq;
	a->byte = r->end_byte;
	return 0;
}

/* The first two rows of stream at or after seq (refs.h "Hints"): *n of
 * them decoded into two[] (the caller clears them). */
struct two_rows {
	uint64_t stream;
	struct meta_ref r[2];
	int n;
};

static int two_visit(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		     size_t vlen, uint64_t ver)
{
	struct two_rows *a = arg;
	int rc = meta_ref_decode(val, vlen, a->stream, &a->r[a->n]);

	(void)key, (void)klen, (void)ver;
	if (!rc)
		a->n++;
	return rc ? rc : a->n == 2;
}

static int two_rows_from(struct kv *kv, uint64_t stream, uint64_t seq, struct two_rows *a)
{
	struct nv_buf start, end;
	int rc;

	memset(a, 0, sizeof(*a));
	a->stream = stream;
	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_refs_of(&end, stream);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	if (!rc)
		rc = key_ref(&start, stream, seq);
	if (!rc)
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, 2, false, two_visit, a);
	nv_buf_free(&start);
	nv_buf_free(&end);
	return rc;
}

static void two_rows_clear(struct two_rows *a)
{
	for (int i = 0; i < a->n; i++)
		meta_ref_clear(&a->r[i]);
}

/* The row that starts exactly at seq (a point read): 0, -ENOENT, or the
 * kv error. */
static int row_at(struct kv *kv, uint64_t stream, uint64_t seq, struct meta_ref *r)
{
	uint64_t ver;

	return meta_ref_get(kv, stream, seq, r, &ver);
}

/*
 * The scan of meta_ref_settled_end() by cheap reads (refs.h "Hints"):
 * the rows a scan from the start skips (wholly below trim_seq) end at
 * or before the row holding trim_seq, found with a windowed floor; among
 * them only the nearest catalog row counts (walked back to, past span
 * refs reclamation has not removed yet); from that row on the scan goes
 * row by row, each the one starting where the last ended (refs.h
 * invariant 1), until a live span ref.
 */
static int settled_scan(struct kv *kv, uint64_t stream, struct settled_arg *a)
{
	struct meta_ref r;
	uint64_t cur = a->trim_seq;
	int rc;

	meta_ref_init(&r);
	rc = ref_floor(kv, false, stream, a->trim_seq, &r);
	if (!rc) {
		cur = r.first_seq;
		while (!rc && r.kind != META_REF_CATALOG && r.first_seq > 0) {
			rc = ref_floor(kv, false, stream, r.first_seq - 1, &r);
			if (!rc && r.kind == META_REF_CATALOG) {
				a->seq = r.end_seq;
				a->byte = r.end_byte;
			}
		}
	}
	for (rc = rc == -ENOENT ? 0 : rc; !rc;) {
		rc = row_at(kv, stream, cur, &r);
		if (rc == -ENOENT) {
			rc = 0;
			break;
		}
		if (!rc && (settled_visit(a, &r) || r.end_seq <= cur))
			break;
		cur = r.end_seq;
	}
	meta_ref_clear(&r);
	return rc;
}

int meta_ref_settled_end(struct kv *kv, uint64_t stream, uint64_t trim_seq, uint64_t *seq,
			 uint64_t *byte)
{
	struct settled_arg a = { trim_seq, 0, 0 };
	struct meta_ref x, n, h;
	uint64_t hint;
	int rc = hint_get(kv, stream, META_REF_CATALOG, &hint);

	meta_ref_init(&x);
	meta_ref_init(&n);
	meta_ref_init(&h);
	/* The hint: a catalog row there, a live span ref (or nothing) after
	 * it, and the scan's first row a catalog row too: the catalog rows
	 * between are contiguous (refs.h "Hints"), the scan ends there. */
	if (!rc)
		rc = row_at(kv, stream, hint, &x);
	if (!rc && x.kind == META_REF_CATALOG)
		rc = row_at(kv, stream, x.end_seq, &n);
	else if (!rc)
		rc = -ENOENT;
	if (rc == -ENOENT && x.kind == META_REF_CATALOG)
		rc = 0, n.kind = 0; /* nothing after it */
	if (!rc && (n.kind == META_REF_CATALOG || (n.kind && n.end_seq <= trim_seq)))
		rc = -ENOENT;
	if (!rc)
		rc = ref_floor(kv, false, stream, trim_seq, &h);
	if (!rc && h.kind == META_REF_CATALOG) {
		a.seq = x.end_seq;
		a.byte = x.end_byte;
	} else if (!rc || rc == -ENOENT) {
		rc = settled_scan(kv, stream, &a);
	}
	meta_ref_clear(&x);
	meta_ref_clear(&n);
	meta_ref_clear(&h);
	*seq = a.seq;
	*byte = a.byte;
	return rc;
}

int meta_ref_floor_seq(struct kv *kv, uint64_t stream, uint64_t seq, struct meta_ref *r)
{
	return ref_floor(kv, false, stream, seq, r);
}

int meta_ref_floor_byte(struct kv *kv, uint64_t stream, uint64_t byte, struct meta_ref *r)
{
	return ref_floor(kv, true, stream, byte, r);
}

int meta_ref_last(struct kv *kv, uint64_t stream, struct meta_ref *r)
{
	struct two_rows two;
	uint64_t hint;
	int rc = hint_get(kv, stream, META_REF_SPAN, &hint);

	if (rc == -ENOENT)
		return ref_floor(kv, false, stream, UINT64_MAX, r);
	if (rc)
		return rc;
	rc = two_rows_from(kv, stream, hint, &two);
	if (!rc && two.n == 1) {
		/* The only row at or after the hint: the last one. */
		meta_ref_clear(r);
		*r = two.r[0];
		return 0;
	}
	if (rc) {
		two_rows_clear(&two);
		return rc;
	}
	two_rows_clear(&two);
	/* None at or after it: the last row starts below (settlement or trim
	 * moved it), a windowed floor; two: the hint is stale, the whole
	 * space. */
	return ref_floor(kv, false, stream, two.n ? UINT64_MAX : hint, r);
}

#define LIST_PAGE 32

struct list_page {
	uint64_t stream;
	struct meta_ref refs[LIST_PAGE];
	int n;
	int err;
};

static int list_visit(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		      size_t vlen, uint64_t ver)
{
	struct list_page *pg = arg;
	int rc = meta_ref_decode(val, vlen, pg->stream, &pg->refs[pg->n]);

	if (rc)
		return rc;
	pg->n++;
	return pg->n == LIST_PAGE ? 1 : 0;
}

int meta_ref_list(struct kv *kv, uint64_t stream, uint64_t from_seq, size_t limit,
		  meta_ref_fn fn, void *arg)
{
	struct list_page *pg = calloc(1, sizeof(*pg));
	struct nv_buf start, end;
	size_t seen = 0;
	int rc;

	if (!pg)
		return -ENOMEM;
	pg->stream = stream;
	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_refs_of(&end, stream);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	if (!rc)
		rc = key_ref(&start, stream, from_seq);
	/* Pages are collected first and handed to fn afterwards, so fn may
	 * call back into the kv. */
	while (!rc) {
		int n;
		uint64_t next;

		pg->n = 0;
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, LIST_PAGE,
			      false, list_visit, pg);
		if (rc < 0) {
			/* The range failed part way: free what was decoded. */
			for (int i = 0; i < pg->n; i++)
				meta_ref_clear(&pg->refs[i]);
			break;
		}
		rc = 0;
		n = pg->n;
		next = n ? pg->refs[n - 1].first_seq + 1 : 0;
		for (int i = 0; i < n; i++) {
			if (!rc && (!limit || seen < limit)) {
				rc = fn(arg, &pg->refs[i]);
				seen++;
			}
			meta_ref_clear(&pg->refs[i]);
		}
		if (rc || n < LIST_PAGE || (limit && seen >= limit))
			break;
		rc = key_ref(&start, stream, next);
	}
	nv_buf_free(&start);
	nv_buf_free(&end);
	free(pg);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------- byte windows */

struct win_fill {
	uint64_t stream, byte;
	struct meta_ref *out;
	size_t cap, max_slots, n, slots;
};

static int win_visit(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		     size_t vlen, uint64_t ver)
{
	struct win_fill *w = arg;
	struct meta_ref *r = &w->out[w->n];
	int rc;

	(void)key;
	(void)klen;
	(void)ver;
	rc = meta_ref_decode(val, vlen, w->stream, r);
	if (rc)
		return rc;
	/* Refs holding no byte (empty records) at the window's start. */
	if (w->n == 0 && r->end_byte <= w->byte)
		return 0;
	/* Invariant 1: anything else would be a hole; the window stops. */
	if (w->n > 0 && r->first_byte != w->out[w->n - 1].end_byte) {
		meta_ref_clear(r);
		return 1;
	}
	w->slots += r->kind == META_REF_CATALOG ? r->nobjs : r->nslots;
	w->n++;
	return w->n == w->cap || w->slots >= w->max_slots ? 1 : 0;
}

int meta_ref_window_byte(struct kv *kv, uint64_t stream, uint64_t byte, struct meta_ref *out,
			 size_t cap, size_t max_slots, size_t *n, unsigned *calls)
{
	struct win_fill w = { .stream = stream, .byte = byte, .out = out, .cap = cap,
			      .max_slots = max_slots };
	struct nv_buf start, end;
	int rc;

	*n = 0;
	*calls = 0;
	if (cap == 0)
		return -EINVAL;
	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_ref_bytes_of(&end, stream);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	if (!rc)
		rc = key_ref_byte(&start, stream, byte, 0);
	if (!rc) {
		/* Ascending: a backend stops at the limit (one slack row for
		 * an empty ref at the start). */
		(*calls)++;
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, cap + 1, false,
			      win_visit, &w);
		if (w.n < cap)
			meta_ref_clear(&out[w.n]); /* a row decoded, then skipped */
	}
	if (rc > 0)
		rc = 0;
	if (!rc && (w.n == 0 || out[0].first_byte > byte)) {
		/* The ref holding byte starts below it: its floor first, then
		 * the rows already read after it (they start at its end). */
		struct meta_ref f;

		meta_ref_init(&f);
		rc = -ENOENT;
		if (w.n > 0 && out[0].first_seq > 0) {
			/* Invariant 1: it ends where out[0] starts, so it holds
			 * seq out[0].first_seq - 1: a floor by seq, whose first
			 * window is a few keys (by byte it is 32 KiB of refs,
			 * thousands of keys for refs of small records). */
			(*calls)++;
			rc = ref_floor(kv, false, stream, out[0].first_seq - 1, &f);
			if (!rc && (byte < f.first_byte || byte >= f.end_byte))
				rc = -ENOENT;
		}
		if (rc == -ENOENT) {
			(*calls)++;
			rc = ref_floor(kv, true, stream, byte, &f);
			if (!rc && (byte < f.first_byte || byte >= f.end_byte))
				rc = -ENOENT;
		}
		if (!rc && w.n > 0 && out[0].first_byte != f.end_byte) {
			/* Not contiguous with the floor: keep the floor alone. */
			for (size_t i = 0; i < w.n; i++)
				meta_ref_clear(&out[i]);
			w.n = 0;
		}
		if (!rc) {
			if (w.n == cap)
				meta_ref_clear(&out[--w.n]);
			memmove(out + 1, out, w.n * sizeof(*out));
			out[0] = f; /* moves the floor's arrays */
			w.n++;
		} else {
			meta_ref_clear(&f);
		}
	}
	if (rc) {
		for (size_t i = 0; i < w.n; i++)
			meta_ref_clear(&out[i]);
		w.n = 0;
	}
	*n = w.n;
	nv_buf_free(&start);
	nv_buf_free(&end);
	return rc;
}
