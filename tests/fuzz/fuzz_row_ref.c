/*
 * fuzz_row_ref.c - the ref row codec (meta/refs.h: meta_ref_decode), both
 * kinds: span refs (per-slot index) and catalog rows (settled objects).
 *
 * Input: u64 stream id (little-endian; the row's key part) | the value.
 *
 * Checks: meta_ref_decode answers 0 or -EBADMSG (or -ENOMEM) and leaves
 * an empty ref on failure; a decoded ref keeps refs.h's promises:
 *  - kind is span or catalog, first_seq < end_seq, first_byte <= end_byte,
 *    stream_id is the key's;
 *  - span: known class, valid star name, 1..META_REF_SLOTS_MAX slots,
 *    ascending (invariant 3), the first at the ref's start, all inside;
 *  - catalog: bucket non-empty without '/', 1..META_REF_OBJS_MAX objects,
 *    ascending, the first at the ref's start, all inside; the derived
 *    object key fits META_SETTLED_KEY_MAX;
 *  - the slot and object lookups return, for keys inside the ref, the
 *    last entry at or below the key;
 *  - the value re-encodes to exactly the input (canonical format; a span
 *    ref's star in particular must be the bytes that were stored).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "meta/chains.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "src/base/buf.h"
#include "src/base/endian.h"
#include "tests/fuzz/fuzz.h"

/* A few keys inside [lo, hi): the ends, the middle, one from the input. */
static uint64_t key_at(uint64_t lo, uint64_t hi, unsigned k, uint64_t salt)
{
	uint64_t span = hi - lo;

	switch (k) {
	case 0: return lo;
	case 1: return hi - 1;
	case 2: return lo + span / 2;
	default: return lo + salt % span;
	}
}

static void check_span(const struct meta_ref *r, uint64_t salt)
{
	FUZZ_ASSERT(r->cls < NV_CLASS_COUNT);
	FUZZ_ASSERT(meta_star_check(r->star) == 0);
	FUZZ_ASSERT(r->nslots >= 1 && r->nslots <= META_REF_SLOTS_MAX && r->slots);
	FUZZ_ASSERT(r->slots[0].first_seq == r->first_seq);
	FUZZ_ASSERT(r->slots[0].first_byte == r->first_byte);
	for (uint32_t i = 0; i < r->nslots; i++) {
		const struct meta_ref_slot *s = &r->slots[i];

		FUZZ_ASSERT(s->first_seq < r->end_seq && s->first_byte <= r->end_byte);
		FUZZ_ASSERT(s->footer_len > 0);
		if (i)
			FUZZ_ASSERT(s->slot > s[-1].slot && s->first_seq > s[-1].first_seq &&
				    s->first_byte >= s[-1].first_byte);
	}
	for (unsigned k = 0; k < 4; k++) {
		uint64_t seq = key_at(r->first_seq, r->end_seq, k, salt);
		uint32_t i = meta_ref_slot_find(r, META_REF_BY_SEQ, seq);

		FUZZ_ASSERT(i < r->nslots && r->slots[i].first_seq <= seq);
		FUZZ_ASSERT(i + 1 == r->nslots || r->slots[i + 1].first_seq > seq);
		if (r->end_byte > r->first_byte) {
			uint64_t byte = key_at(r->first_byte, r->end_byte, k, salt);

			i = meta_ref_slot_find(r, META_REF_BY_BYTE, byte);
			FUZZ_ASSERT(i < r->nslots && r->slots[i].first_byte <= byte);
			FUZZ_ASSERT(i + 1 == r->nslots || r->slots[i + 1].first_byte > byte);
		}
	}
}

static void check_catalog(const struct meta_ref *r, uint64_t salt)
{
	char key[META_SETTLED_KEY_MAX];
	size_t bl = strnlen(r->bucket, sizeof(r->bucket));

	FUZZ_ASSERT(bl > 0 && bl < sizeof(r->bucket) && !strchr(r->bucket, '/'));
	FUZZ_ASSERT(r->nobjs >= 1 && r->nobjs <= META_REF_OBJS_MAX && r->objs);
	FUZZ_ASSERT(r->objs[0].first_seq == r->first_seq);
	FUZZ_ASSERT(r->objs[0].first_byte == r->first_byte);
	for (uint32_t i = 0; i < r->nobjs; i++) {
		const struct meta_ref_obj *o = &r->objs[i];

		FUZZ_ASSERT(o->first_seq < r->end_seq && o->first_byte <= r->end_byte);
		FUZZ_ASSERT(o->footer_len > 0);
		if (i)
			FUZZ_ASSERT(o->first_seq > o[-1].first_seq &&
				    o->first_byte >= o[-1].first_byte);
		/* Each object ends where the next begins (or the row ends). */
		FUZZ_ASSERT(meta_ref_obj_end_seq(r, i) > o->first_seq);
		FUZZ_ASSERT(meta_ref_obj_end_byte(r, i) >= o->first_byte);
		meta_settled_key(key, sizeof(key), r->bucket, r->stream_id, o->epoch,
				 o->first_seq, o->rev);
		FUZZ_ASSERT(strlen(key) < sizeof(key) - 1); /* never truncated */
	}
	for (unsigned k = 0; k < 4; k++) {
		uint64_t seq = key_at(r->first_seq, r->end_seq, k, salt);
		uint32_t i = meta_ref_obj_find(r, META_REF_BY_SEQ, seq);

		FUZZ_ASSERT(i < r->nobjs && r->objs[i].first_seq <= seq);
		FUZZ_ASSERT(i + 1 == r->nobjs || r->objs[i + 1].first_seq > seq);
		if (r->end_byte > r->first_byte) {
			uint64_t byte = key_at(r->first_byte, r->end_byte, k, salt);

			i = meta_ref_obj_find(r, META_REF_BY_BYTE, byte);
			FUZZ_ASSERT(i < r->nobjs && r->objs[i].first_byte <= byte);
			FUZZ_ASSERT(i + 1 == r->nobjs || r->objs[i + 1].first_byte > byte);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in;
	struct meta_ref r;
	struct nv_buf b;
	const uint8_t *val;
	uint64_t stream, salt;
	size_t n;
	int rc;

	fuzz_quiet();
	fuzz_in_init(&in, data, size);
	stream = fuzz_le64(&in);
	val = fuzz_rest(&in, &n);
	salt = n >= 8 ? nv_get_le64(val + n - 8) : n;

	meta_ref_init(&r);
	rc = meta_ref_decode(val, n, stream, &r);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
	if (rc) {
		FUZZ_ASSERT(r.slots == NULL && r.objs == NULL && r.nslots == 0 && r.nobjs == 0);
		return 0;
	}
	FUZZ_ASSERT(r.stream_id == stream);
	FUZZ_ASSERT(r.kind == META_REF_SPAN || r.kind == META_REF_CATALOG);
	FUZZ_ASSERT(r.first_seq < r.end_seq && r.first_byte <= r.end_byte);
	if (r.kind == META_REF_SPAN)
		check_span(&r, salt);
	else
		check_catalog(&r, salt);

	nv_buf_init(&b, SIZE_MAX);
	FUZZ_ASSERT(meta_ref_encode(&r, &b) == 0);
	FUZZ_ASSERT(b.len == n && !memcmp(b.ptr, val, n));
	nv_buf_free(&b);
	meta_ref_clear(&r);
	return 0;
}
