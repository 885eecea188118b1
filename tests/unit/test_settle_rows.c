/*
 * test_settle_rows.c - unit tests of the group settle's catalog rows
 * (engine/settle/commit.c invariant 3): a window whose objects do not
 * fit one catalog row (META_REF_OBJS_MAX) settles in one era as the
 * pivot row plus non-pivot rows written before the CAS; a full row's
 * sub-cap tail object is still extended, so a stream keeps at most one
 * sub-cap object; and a crash between the non-pivot rows and the CAS
 * converges.
 *
 * The harness is tests/unit/settle_fixture.h (one record per slot and
 * batch, so every record has its own span ref and marker; with
 * output_cap_bytes = 1 every chunk, here every record, is one object).
 * Every settled object is checked byte by byte from the stored bytes.
 */
#include "config.h"
#include "tests/unit/settle_fixture.h"
#include "engine/fsck.h"
#include "meta/refs.h"
#include "src/base/failpoint.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define REC 20 /* bytes per record */

/* Stream id is settled whole into nrows catalog rows, contiguous from
 * seq 0, every object checked; no span ref left.  Returns the rows
 * (caller frees). */
static struct rows *expect_rows(struct efx *f, uint64_t id, uint64_t end_seq, int nrows)
{
	struct rows *rs = calloc(1, sizeof(*rs));
	uint64_t seq = 0, byte = 0;

	assert_non_null(rs);
	get_rows(f->kv, id, rs);
	assert_int_equal(rs->n, nrows);
	for (int i = 0; i < rs->n; i++) {
		const struct row *r = &rs->r[i];

		assert_int_equal(r->kind, META_REF_CATALOG);
		assert_int_equal(r->first_seq, seq);
		assert_int_equal(r->first_byte, byte);
		assert_true(r->nobjs >= 1 && r->nobjs <= META_REF_OBJS_MAX);
		for (uint32_t k = 0; k < r->nobjs; k++)
			expect_object(f, id, r, k, &seq, &byte);
		assert_int_equal(seq, r->end_seq);
		assert_int_equal(byte, r->end_byte);
	}
	assert_int_equal(seq, end_seq);
	assert_int_equal(byte, end_seq * REC);
	assert_int_equal(span_refs(f, id), 0);
	return rs;
}

/* A window of 2 x META_REF_OBJS_MAX + 6 objects settles in one era: the
 * pivot row and two full-then-partial non-pivot rows (issue 11 item 10;
 * the old code cut the window at one row and left the rest for later
 * eras). */
static void test_settle_window_over_row_cap(void **state)
{
	struct st t;
	struct nv_stream *a;
	const unsigned n = 2 * META_REF_OBJS_MAX + 6;
	struct rows *rs;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, n, REC);
	t.cfg.output_cap_bytes = 1; /* one object per chunk (per record here) */
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	rs = expect_rows(t.f, a->id, n, 3);
	assert_int_equal(rs->r[0].nobjs, META_REF_OBJS_MAX);
	assert_int_equal(rs->r[1].nobjs, META_REF_OBJS_MAX);
	assert_int_equal(rs->r[2].nobjs, 6);
	free(rs);
	assert_int_equal(count_markers(t.f), 0);
	expect_twins(t.f);
	assert_int_equal(settle_now(&t, NOW_RETRY), 0);
	st_stop(&t);
}

/* The row holding the stream's sub-cap tail object is full: the next
 * era still extends that object (its next revision holds old and new
 * records), so no second sub-cap object appears (the old code started
 * a new row with a new sub-cap object beside the old one). */
static void test_settle_full_row_extends_tail(void **state)
{
	struct st t;
	struct nv_stream *a;
	struct rows *rs;
	struct meta_ref_obj last;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, META_REF_OBJS_MAX, REC);
	t.cfg.output_cap_bytes = 1;
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	rs = expect_rows(t.f, a->id, META_REF_OBJS_MAX, 1);
	assert_int_equal(rs->r[0].nobjs, META_REF_OBJS_MAX);
	last = rs->r[0].objs[META_REF_OBJS_MAX - 1];
	free(rs);

	/* Now the last object is below the cap: the next settle extends it. */
	t.cfg.output_cap_bytes = 1u << 20;
	efx_write_absorb(t.f, a, META_REF_OBJS_MAX, 5, REC);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	rs = expect_rows(t.f, a->id, META_REF_OBJS_MAX + 5, 1);
	assert_int_equal(rs->r[0].nobjs, META_REF_OBJS_MAX);
	assert_int_equal(rs->r[0].objs[META_REF_OBJS_MAX - 1].first_seq, last.first_seq);
	assert_int_equal(rs->r[0].objs[META_REF_OBJS_MAX - 1].rev, last.rev + 1);
	free(rs);
	assert_int_equal(efx_count_space(t.f->kv, "gc"), 1); /* the replaced tail */
	assert_int_equal(count_markers(t.f), 0);
	expect_twins(t.f);

	/* A cap that forces new objects past the full row: they go into a
	 * non-pivot row after the extended tail. */
	t.cfg.output_cap_bytes = 1;
	efx_write_absorb(t.f, a, META_REF_OBJS_MAX + 5, 3, REC);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	rs = expect_rows(t.f, a->id, META_REF_OBJS_MAX + 8, 2);
	assert_int_equal(rs->r[0].nobjs, META_REF_OBJS_MAX);
	assert_int_equal(rs->r[1].nobjs, 3);
	free(rs);
	expect_twins(t.f);
	st_stop(&t);
}

/* Counts the notes about streams and objects: a live chain's note
 * ("the next mount settles it") is the fixture's running star. */
static void fsck_say(void *arg, bool violation, const char *text)
{
	print_message("fsck %s: %s\n", violation ? "VIOLATION" : "note", text);
	if (!violation && strncmp(text, "chain ", 6))
		(*(uint64_t *)arg)++;
}

/* fsck (engine/fsck.h) of the fixture's store: no violation; the notes
 * about streams and objects. */
static uint64_t fsck_notes(struct efx *f)
{
	uint64_t notes = 0;
	struct fsck_opts o = { .full = true, .report = fsck_say, .arg = &notes };
	struct fsck_summary sum;

	assert_int_equal(fsck_run(f->store, f->kv, &o, &sum), 0);
	assert_int_equal(sum.violations, 0);
	return notes;
}

/* A crash after the non-pivot rows, before the CAS: those rows stand
 * (one replaced a span ref of the window), the pivot is still the span
 * ref; the next era settles the rest and counts the standing rows as
 * settled, publishing nothing twice. */
static void test_settle_crash_after_rows(void **state)
{
	struct st t;
	struct nv_stream *a;
	const unsigned n = 2 * META_REF_OBJS_MAX + 6;
	struct rows *rs;
	struct meta_ref r;
	uint64_t objs, ver;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, n, REC);
	t.cfg.output_cap_bytes = 1;
	assert_int_equal(nv_fp_arm("settle.after_rows=error"), 0);
	assert_true(settle_now(&t, NOW_ALL) != 0);
	nv_fp_reset();
	objs = NV_STAT_GET(&t.f->stats, settled_objects);
	assert_int_equal(objs, n);
	meta_ref_init(&r);
	assert_int_equal(meta_ref_get(t.f->kv, a->id, 0, &r, &ver), 0);
	assert_int_equal(r.kind, META_REF_SPAN); /* no CAS */
	meta_ref_clear(&r);
	assert_int_equal(meta_ref_get(t.f->kv, a->id, META_REF_OBJS_MAX, &r, &ver), 0);
	assert_int_equal(r.kind, META_REF_CATALOG); /* a non-pivot row replaced a span ref */
	assert_int_equal(r.end_seq, 2 * META_REF_OBJS_MAX);
	meta_ref_clear(&r);
	assert_true(count_markers(t.f) > 0);
	/* A crash state fsck knows: the standing rows overlap span refs,
	 * the window's other objects are published, not committed. */
	assert_true(fsck_notes(t.f) > 0);

	while (settle_now(&t, NOW_RETRY) == 1)
		;
	rs = expect_rows(t.f, a->id, n, 3);
	free(rs);
	assert_int_equal(fsck_notes(t.f), 0);
	assert_int_equal(NV_STAT_GET(&t.f->stats, settled_objects), objs); /* none again */
	assert_int_equal(count_markers(t.f), 0);
	expect_twins(t.f);
	st_stop(&t);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, efx_setup, efx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_settle_window_over_row_cap),
		T(test_settle_full_row_extends_tail),
		T(test_settle_crash_after_rows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
