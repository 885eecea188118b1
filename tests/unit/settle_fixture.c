/*
 * settle_fixture.c - see settle_fixture.h.
 */
#include "config.h"
#include "tests/unit/settle_fixture.h"
#include "tests/unit/fake_store.h"
#include "engine/bundle.h"
#include "meta/refs.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void on_settled(void *arg, uint64_t stream, uint64_t end_seq, uint64_t end_byte)
{
	struct st *t = arg;

	if (t->nsettled < 8) {
		t->settled_id[t->nsettled] = stream;
		t->settled_seq[t->nsettled] = end_seq;
		t->settled_byte[t->nsettled] = end_byte;
	}
	t->nsettled++;
}

void st_start(struct efx *f, struct st *t)
{
	memset(t, 0, sizeof(*t));
	t->f = f;
	t->fc = efx_start_settle(f, &t->cfg);
	t->cfg.settled = on_settled;
	t->cfg.arg = t;
}

void st_stop(struct st *t)
{
	fetch_cache_free(t->fc);
}

int settle_now(struct st *t, uint64_t now)
{
	struct meta_chain c = efx_chain_row(t->f);

	return settle_chain(&t->cfg, &c, now, NULL);
}

static int rows_fn(void *arg, const struct meta_ref *r)
{
	struct rows *rs = arg;
	struct row *w;

	if (rs->n == ROWS_MAX || r->nobjs > OBJS_MAX)
		return -E2BIG;
	w = &rs->r[rs->n++];
	w->kind = r->kind;
	w->first_seq = r->first_seq;
	w->end_seq = r->end_seq;
	w->first_byte = r->first_byte;
	w->end_byte = r->end_byte;
	w->nobjs = r->nobjs;
	if (r->nobjs)
		memcpy(w->objs, r->objs, r->nobjs * sizeof(*r->objs));
	snprintf(w->bucket, sizeof(w->bucket), "%s", r->bucket);
	return 0;
}

void get_rows(struct kv *kv, uint64_t id, struct rows *rs)
{
	rs->n = 0;
	assert_int_equal(meta_ref_list(kv, id, 0, 0, rows_fn, rs), 0);
}

static char *obj_key(const struct row *r, uint64_t id, uint32_t i, char *buf)
{
	return meta_settled_key(buf, META_SETTLED_KEY_MAX, r->bucket, id, r->objs[i].epoch,
				r->objs[i].first_seq, r->objs[i].rev);
}

/* Object i of catalog row r, from the stored bytes: trailer and footer
 * where the row says, every record as efx_fill() wrote it.  Advances
 * *seq / *byte over its records. */
void expect_object(struct efx *f, uint64_t id, const struct row *r, uint32_t i,
			  uint64_t *seq, uint64_t *byte)
{
	char key[META_SETTLED_KEY_MAX];
	uint64_t foff, end_seq = i + 1 < r->nobjs ? r->objs[i + 1].first_seq : r->end_seq;
	struct bundle_footer ft;
	uint32_t flen;
	uint8_t *data;
	size_t size;

	assert_int_equal(fake_store_copy(f->fs, obj_key(r, id, i, key), &data, &size), 0);
	assert_true(size >= BUNDLE_TRAILER_SIZE);
	assert_int_equal(bundle_trailer_parse(data + size - BUNDLE_TRAILER_SIZE,
					      BUNDLE_TRAILER_SIZE, size, &foff, &flen), 0);
	assert_int_equal(foff, r->objs[i].footer_off);
	assert_int_equal(flen, r->objs[i].footer_len);
	assert_int_equal(bundle_footer_open(data + foff, flen, foff, &ft), 0);
	assert_int_equal(r->objs[i].first_seq, *seq);
	assert_int_equal(r->objs[i].first_byte, *byte);
	for (uint32_t k = 0; k < ft.n; k++) {
		struct bundle_entry e;
		struct nv_buf raw;
		size_t off = 0;
		struct bundle_rec rec;
		int more;

		assert_int_equal(bundle_footer_get(&ft, k, &e), 0);
		assert_int_equal(e.stream_id, id);
		assert_int_equal(e.first_seq, *seq);
		assert_int_equal(e.first_byte, *byte);
		nv_buf_init(&raw, 1u << 26);
		assert_int_equal(bundle_chunk_decode(&e, data + e.chunk_off, e.comp_len, &raw), 0);
		while ((more = bundle_frames_next(raw.ptr, raw.len, &off, &rec)) == 1) {
			uint8_t *want = malloc(rec.len ? rec.len : 1);

			assert_non_null(want);
			efx_fill(want, rec.len, id, *seq);
			assert_memory_equal(rec.body, want, rec.len);
			free(want);
			(*seq)++;
			*byte += rec.len;
		}
		assert_int_equal(more, 0);
		nv_buf_free(&raw);
	}
	assert_int_equal(*seq, end_seq);
	free(data);
}

/* Stream id is settled whole: one catalog row [0, end), its objects
 * hold every record, and no span ref is left.  *out gets the row. */
void expect_settled(struct efx *f, uint64_t id, uint64_t end_seq, uint64_t end_byte,
			   struct row *out)
{
	struct rows *rs = calloc(1, sizeof(*rs));
	uint64_t seq = 0, byte = 0;

	assert_non_null(rs);
	get_rows(f->kv, id, rs);
	assert_int_equal(rs->n, 1);
	assert_int_equal(rs->r[0].kind, META_REF_CATALOG);
	assert_int_equal(rs->r[0].first_seq, 0);
	assert_int_equal(rs->r[0].end_seq, end_seq);
	assert_int_equal(rs->r[0].first_byte, 0);
	assert_int_equal(rs->r[0].end_byte, end_byte);
	assert_true(rs->r[0].nobjs >= 1);
	for (uint32_t i = 0; i < rs->r[0].nobjs; i++)
		expect_object(f, id, &rs->r[0], i, &seq, &byte);
	assert_int_equal(seq, end_seq);
	assert_int_equal(byte, end_byte);
	if (out)
		*out = rs->r[0];
	free(rs);
}

void expect_same_row(const struct row *a, const struct row *b)
{
	assert_int_equal(a->kind, b->kind);
	assert_int_equal(a->first_seq, b->first_seq);
	assert_int_equal(a->end_seq, b->end_seq);
	assert_int_equal(a->first_byte, b->first_byte);
	assert_int_equal(a->end_byte, b->end_byte);
	assert_string_equal(a->bucket, b->bucket);
	assert_int_equal(a->nobjs, b->nobjs);
	for (uint32_t i = 0; i < a->nobjs; i++) {
		assert_int_equal(a->objs[i].first_seq, b->objs[i].first_seq);
		assert_int_equal(a->objs[i].first_byte, b->objs[i].first_byte);
		assert_int_equal(a->objs[i].epoch, b->objs[i].epoch);
		assert_int_equal(a->objs[i].rev, b->objs[i].rev);
		assert_int_equal(a->objs[i].footer_off, b->objs[i].footer_off);
		assert_int_equal(a->objs[i].footer_len, b->objs[i].footer_len);
		assert_int_equal(a->objs[i].max_ts, b->objs[i].max_ts);
	}
}

unsigned count_markers(struct efx *f)
{
	return efx_count_space(f->kv, "mrk");
}

/* Every ref row has its byte twin and no twin is left alone. */
void expect_twins(struct efx *f)
{
	assert_int_equal(efx_count_space(f->kv, "ref"), efx_count_space(f->kv, "rby"));
}

unsigned span_refs(struct efx *f, uint64_t id)
{
	struct rows *rs = calloc(1, sizeof(*rs));
	unsigned n = 0;

	assert_non_null(rs);
	get_rows(f->kv, id, rs);
	for (int i = 0; i < rs->n; i++)
		n += rs->r[i].kind == META_REF_SPAN;
	free(rs);
	return n;
}

