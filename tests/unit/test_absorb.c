/*
 * test_absorb.c - unit tests of engine/absorb.c (the batch commit and the
 * live absorb) and engine/recover.c (the recovery walk that feeds the
 * same batch commit from slot footers).
 *
 * Most cases drive absorb_commit_batch() directly with a fixed scenario
 * of six slots and three streams (SCN below), so the expected rows can be
 * computed independently.  Idempotence is checked the strong way: the
 * whole metastore is dumped (every key and value, marker birth/ripe times
 * zeroed) after a crashed-and-rerun sequence and compared with the dump
 * of a clean run in a second metastore.  Crashes are the failpoints
 * absorb.before_refs, absorb.after_refs, absorb.after_checkpoint and
 * meta.commit; after a "crash" the in-memory chain row is thrown away and
 * re-read, as a restarted star would.
 *
 * The recovery cases use bundles written by the real chain (test
 * recover_matches_live) or encoded directly with bundle_encode() into the
 * fake store (garbage above a gap, corrupt slots, crashes mid-walk).
 */
#include "config.h"
#include "tests/unit/engine_fixture.h"
#include "tests/unit/fake_store.h"
#include "engine/absorb.h"
#include "engine/bundle.h"
#include "engine/recover.h"
#include "meta/chains.h"
#include "meta/keys.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define WAIT_MS 60000
#define AGE_CAP (1000 * NV_NS_PER_S)
#define MINT_NS 12345 /* fixed, so chain rows of two metastores compare equal */

/* ------------------------------------------------------------ scenario */

/* Six slots, three streams; per stream seqs and bytes are contiguous.
 * max_ts follows the records written by put_bundle() (ts = 1000 + seq). */
#define SCN_SLOTS 6
#define SCN_RUNS_MAX 3

struct scn_slot {
	uint32_t nruns;
	struct absorb_run runs[SCN_RUNS_MAX];
};

#define RUN(id, fs, fb, n, b) \
	{ .stream_id = (id), .first_seq = (fs), .first_byte = (fb), .nbytes = (b), \
	  .max_ts = 1000 + (fs) + (n) - 1, .nrec = (n) }

static const struct scn_slot SCN[SCN_SLOTS] = {
	{ 2, { RUN(101, 0, 0, 4, 40), RUN(102, 0, 0, 2, 5) } },
	{ 2, { RUN(101, 4, 40, 1, 7), RUN(103, 0, 0, 3, 30) } },
	{ 2, { RUN(102, 2, 5, 4, 100), RUN(103, 3, 30, 1, 1) } },
	{ 3, { RUN(101, 5, 47, 5, 50), RUN(102, 6, 105, 1, 0), RUN(103, 4, 31, 2, 2) } },
	{ 1, { RUN(102, 7, 105, 3, 33) } },
	{ 2, { RUN(101, 10, 97, 1, 1), RUN(103, 6, 33, 1, 1) } },
};
static const uint64_t SCN_IDS[3] = { 101, 102, 103 };
static const uint64_t SCN_END_SEQ[3] = { 11, 10, 7 };
static const uint64_t SCN_END_BYTE[3] = { 98, 138, 34 };

/* Footer windows of the scenario (any values; recovery cases use real ones). */
static uint64_t scn_foff(uint64_t slot) { return 1000 + slot * 10; }
static uint32_t scn_flen(uint64_t slot) { return 96 + (uint32_t)slot; }

static void scn_batch(uint64_t first, uint32_t n, struct absorb_slot *out)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t s = first + i;

		out[i].slot = s;
		out[i].footer_off = scn_foff(s);
		out[i].footer_len = scn_flen(s);
		out[i].nruns = SCN[s].nruns;
		out[i].runs = SCN[s].runs;
	}
}

static const struct absorb_policy POLICY = { .age_cap_ns = AGE_CAP };

static struct meta_chain mint(struct kv *kv, uint64_t *ver)
{
	struct meta_chain row;

	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, EFX_STAR, MINT_NS, &row, ver), 0);
	return row;
}

/* Commit scenario slots [first, first + n) on (row, ver). */
static int commit(struct kv *kv, struct meta_chain *row, uint64_t *ver, uint64_t first,
		  uint32_t n, struct absorb_result *res)
{
	struct absorb_slot slots[SCN_SLOTS];

	scn_batch(first, n, slots);
	return absorb_commit_batch(kv, row, ver, slots, n, &POLICY, res);
}

static struct kv *open_kv(struct efx *f, const char *name)
{
	char url[PATH_MAX + 64];
	struct kv *kv;

	snprintf(url, sizeof(url), "sqlite:%s/%s", f->dir, name);
	assert_int_equal(kv_open(url, &kv), 0);
	return kv;
}

/* The expected span ref of stream id for batch [first, end) of the
 * scenario; false when the stream has no run in it. */
static bool expected_ref(uint64_t id, uint64_t first, uint64_t end, struct meta_ref *r)
{
	bool any = false;

	meta_ref_init(r);
	for (uint64_t s = first; s < end; s++)
		for (uint32_t j = 0; j < SCN[s].nruns; j++) {
			const struct absorb_run *run = &SCN[s].runs[j];
			struct meta_ref_slot se = { s, run->first_seq, run->first_byte, scn_foff(s),
						    scn_flen(s) };

			if (run->stream_id != id)
				continue;
			if (!any) {
				r->stream_id = id;
				r->kind = META_REF_SPAN;
				r->first_seq = r->end_seq = run->first_seq;
				r->first_byte = r->end_byte = run->first_byte;
				r->cls = NV_CLASS_STANDARD;
				strcpy(r->star, EFX_STAR);
				r->epoch = 1;
				any = true;
			}
			assert_int_equal(meta_ref_add_slot(r, &se), 0);
			r->end_seq += run->nrec;
			r->end_byte += run->nbytes;
			if (run->max_ts > r->max_ts)
				r->max_ts = run->max_ts;
		}
	return any;
}

static void expect_ref_row(struct kv *kv, const struct meta_ref *want)
{
	struct meta_ref got;
	struct nv_buf k, a, b;

	meta_ref_init(&got);
	assert_int_equal(meta_ref_floor_seq(kv, want->stream_id, want->first_seq, &got), 0);
	assert_int_equal(got.first_seq, want->first_seq);
	assert_int_equal(got.end_seq, want->end_seq);
	assert_int_equal(got.first_byte, want->first_byte);
	assert_int_equal(got.end_byte, want->end_byte);
	assert_int_equal(got.max_ts, want->max_ts);
	assert_int_equal(got.cls, want->cls);
	assert_string_equal(got.star, want->star);
	assert_int_equal(got.epoch, want->epoch);
	assert_int_equal(got.nslots, want->nslots);
	for (uint32_t i = 0; i < got.nslots; i++) {
		assert_int_equal(got.slots[i].slot, want->slots[i].slot);
		assert_int_equal(got.slots[i].first_seq, want->slots[i].first_seq);
		assert_int_equal(got.slots[i].first_byte, want->slots[i].first_byte);
		assert_int_equal(got.slots[i].footer_off, want->slots[i].footer_off);
		assert_int_equal(got.slots[i].footer_len, want->slots[i].footer_len);
	}
	/* The byte-index row carries the same value. */
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&a, KV_VAL_MAX);
	nv_buf_init(&b, KV_VAL_MAX);
	assert_int_equal(key_ref(&k, want->stream_id, want->first_seq), 0);
	assert_int_equal(kv_get(kv, k.ptr, k.len, &a, NULL), 0);
	assert_int_equal(key_ref_byte(&k, want->stream_id, want->first_byte, want->first_seq), 0);
	assert_int_equal(kv_get(kv, k.ptr, k.len, &b, NULL), 0);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.ptr, b.ptr, a.len);
	nv_buf_free(&k);
	nv_buf_free(&a);
	nv_buf_free(&b);
	meta_ref_clear(&got);
}

struct mk_list {
	struct meta_marker m[16];
	struct meta_marker_stream ss[16][SCN_RUNS_MAX * SCN_SLOTS];
	int n;
};

static int mk_collect(void *arg, const struct meta_marker *m)
{
	struct mk_list *l = arg;

	assert_true(l->n < 16);
	assert_true(m->nstreams <= SCN_RUNS_MAX * SCN_SLOTS);
	l->m[l->n] = *m;
	memcpy(l->ss[l->n], m->streams, m->nstreams * sizeof(*m->streams));
	l->m[l->n].streams = l->ss[l->n];
	l->n++;
	return 0;
}

/* Refs of every scenario stream: contiguous from seq 0 to the end, each
 * record exactly once, up to the checkpoint's slot. */
struct ref_span {
	uint64_t next_seq, next_byte;
	int n;
	bool gap;
};

static int span_fn(void *arg, const struct meta_ref *r)
{
	struct ref_span *sp = arg;

	if (r->first_seq != sp->next_seq || r->first_byte != sp->next_byte)
		sp->gap = true;
	sp->next_seq = r->end_seq;
	sp->next_byte = r->end_byte;
	sp->n++;
	return 0;
}

static void expect_contiguous(struct kv *kv, const uint64_t *end_seq, const uint64_t *end_byte)
{
	for (int i = 0; i < 3; i++) {
		struct ref_span sp = { 0 };

		assert_int_equal(meta_ref_list(kv, SCN_IDS[i], 0, 0, span_fn, &sp), 0);
		if (sp.gap)
			fail_msg("stream %llu: refs are not contiguous",
				 (unsigned long long)SCN_IDS[i]);
		assert_int_equal(sp.next_seq, end_seq[i]);
		assert_int_equal(sp.next_byte, end_byte[i]);
	}
}

/* Fail naming the first line where two dumps differ. */
static void expect_same_text(const char *what, const char *a, const char *b)
{
	const char *pa = a, *pb = b;

	if (!strcmp(a, b))
		return;
	while (*pa && *pb) {
		const char *ea = strchr(pa, '\n'), *eb = strchr(pb, '\n');
		size_t la = ea ? (size_t)(ea - pa) : strlen(pa);
		size_t lb = eb ? (size_t)(eb - pb) : strlen(pb);

		if (la != lb || memcmp(pa, pb, la)) {
			print_error("%s: first difference:\n  expected: %.*s\n  actual:   %.*s\n", what,
				    (int)(la > 400 ? 400 : la), pa, (int)(lb > 400 ? 400 : lb), pb);
			fail();
		}
		pa += la + (ea != NULL);
		pb += lb + (eb != NULL);
	}
	print_error("%s: one dump has extra lines:\n  expected: %.400s\n  actual:   %.400s\n",
		    what, pa, pb);
	fail();
}

static void expect_same_dump(struct kv *a, struct kv *b)
{
	char *da = efx_kv_dump(a, true), *db = efx_kv_dump(b, true);

	expect_same_text("metastore dump", da, db);
	free(da);
	free(db);
}

/* ===================================================== the batch commit */

static void test_absorb_commit_batch_rows(void **state)
{
	struct efx *f = *state;
	struct meta_chain row, got;
	uint64_t ver, gver, before;
	struct absorb_result res = { 0 };
	struct mk_list *ml = calloc(1, sizeof(*ml));
	struct meta_ref want;

	assert_non_null(ml);
	row = mint(f->kv, &ver);
	before = nv_now_wall_ns();
	assert_int_equal(commit(f->kv, &row, &ver, 0, 4, &res), 0);
	assert_int_equal(res.nrefs, 3);
	assert_int_equal(res.end_slot, 4);
	assert_int_equal(row.checkpoint, 4);
	assert_int_equal(row.state, CHAIN_LIVE);
	assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, 1, &got, &gver), 0);
	assert_int_equal(got.checkpoint, 4);
	assert_int_equal(gver, ver);

	/* One ref per stream with the per-slot index, extents and max_ts. */
	for (int i = 0; i < 3; i++) {
		assert_true(expected_ref(SCN_IDS[i], 0, 4, &want));
		expect_ref_row(f->kv, &want);
		meta_ref_clear(&want);
	}
	/* Exactly 3 refs and 3 byte-index rows. */
	{
		char *refs = efx_kv_dump_space(f->kv, "ref", false);
		char *rby = efx_kv_dump_space(f->kv, "rby", false);
		int nl = 0, nb = 0;

		for (char *p = refs; *p; p++)
			nl += *p == '\n';
		for (char *p = rby; *p; p++)
			nb += *p == '\n';
		assert_int_equal(nl, 3);
		assert_int_equal(nb, 3);
		free(refs);
		free(rby);
	}

	/* The marker: in the same commit as the checkpoint (same version). */
	assert_int_equal(meta_marker_list(f->kv, 0, EFX_STAR, 1, mk_collect, ml), 0);
	assert_int_equal(ml->n, 1);
	assert_int_equal(ml->m[0].first_slot, 0);
	assert_int_equal(ml->m[0].end_slot, 4);
	assert_true(ml->m[0].birth_ns >= before);
	assert_int_equal(ml->m[0].ripe_ns, ml->m[0].birth_ns + AGE_CAP);
	assert_int_equal(ml->m[0].crossed, 0);
	assert_int_equal(ml->m[0].nstreams, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ml->ss[0][i].stream_id, SCN_IDS[i]);
		assert_int_equal(ml->ss[0][i].first_seq, 0);
	}
	assert_int_equal(ml->ss[0][0].bytes, 97);
	assert_int_equal(ml->ss[0][1].bytes, 105);
	assert_int_equal(ml->ss[0][2].bytes, 33);
	{
		struct nv_buf k, v;
		uint64_t mver;

		nv_buf_init(&k, KV_KEY_MAX);
		nv_buf_init(&v, KV_VAL_MAX);
		assert_int_equal(key_marker(&k, 0, EFX_STAR, 1, 0), 0);
		assert_int_equal(kv_get(f->kv, k.ptr, k.len, &v, &mver), 0);
		assert_int_equal(mver, ver);
		nv_buf_free(&k);
		nv_buf_free(&v);
	}

	/* The next batch: refs keyed by each stream's first seq in it. */
	assert_int_equal(commit(f->kv, &row, &ver, 4, 2, &res), 0);
	assert_int_equal(res.nrefs, 3);
	assert_int_equal(row.checkpoint, 6);
	for (int i = 0; i < 3; i++) {
		assert_true(expected_ref(SCN_IDS[i], 4, 6, &want));
		assert_int_equal(want.first_seq, SCN_END_SEQ[i] - (i == 1 ? 3 : 1));
		expect_ref_row(f->kv, &want);
		meta_ref_clear(&want);
	}
	expect_contiguous(f->kv, SCN_END_SEQ, SCN_END_BYTE);
	ml->n = 0;
	assert_int_equal(meta_marker_list(f->kv, 0, EFX_STAR, 1, mk_collect, ml), 0);
	assert_int_equal(ml->n, 2);
	assert_int_equal(ml->m[1].first_slot, 4);
	assert_int_equal(ml->m[1].end_slot, 6);
	assert_int_equal(ml->ss[1][1].first_seq, 7);
	assert_int_equal(ml->ss[1][1].bytes, 33);
	free(ml);
}

/* Checkpoint and marker are one transaction: when that commit fails,
 * neither is written (the refs before it are, harmlessly). */
static void test_absorb_checkpoint_and_marker_atomic(void **state)
{
	struct efx *f = *state;
	struct meta_chain row, got;
	uint64_t ver, gver, ver0;
	struct mk_list *ml = calloc(1, sizeof(*ml));

	assert_non_null(ml);
	row = mint(f->kv, &ver);
	ver0 = ver;
	assert_int_equal(nv_fp_arm("meta.commit=error@2"), 0);
	assert_int_equal(commit(f->kv, &row, &ver, 0, 4, NULL), -EIO);
	nv_fp_reset();
	assert_int_equal(ver, ver0);
	assert_int_equal(row.checkpoint, 0);
	assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, 1, &got, &gver), 0);
	assert_int_equal(got.checkpoint, 0);
	assert_int_equal(gver, ver0);
	assert_int_equal(meta_marker_list(f->kv, 0, EFX_STAR, 1, mk_collect, ml), 0);
	assert_int_equal(ml->n, 0);
	/* The re-run completes. */
	assert_int_equal(commit(f->kv, &row, &ver, 0, 4, NULL), 0);
	assert_int_equal(meta_marker_list(f->kv, 0, EFX_STAR, 1, mk_collect, ml), 0);
	assert_int_equal(ml->n, 1);
	free(ml);
}

/* Crash at each step, restart (re-read the row), re-run: the metastore
 * ends byte-identical to a clean run's, marker times aside. */
static void test_absorb_idempotent_after_crash(void **state)
{
	static const char *const points[] = { "absorb.before_refs=error",
					      "absorb.after_refs=error",
					      "absorb.after_checkpoint=error",
					      "meta.commit=error@2" };
	struct efx *f = *state;
	struct meta_chain row;
	uint64_t ver;
	struct kv *clean = open_kv(f, "clean.db");

	/* The clean run, in a metastore of its own. */
	row = mint(clean, &ver);
	assert_int_equal(commit(clean, &row, &ver, 0, 4, NULL), 0);
	assert_int_equal(commit(clean, &row, &ver, 4, 2, NULL), 0);

	for (size_t p = 0; p < sizeof(points) / sizeof(points[0]); p++) {
		char name[32];
		struct kv *kv;
		struct meta_chain stale;
		uint64_t stale_ver;
		int rc;

		snprintf(name, sizeof(name), "crash%zu.db", p);
		kv = open_kv(f, name);
		row = mint(kv, &ver);
		stale = row;
		stale_ver = ver;
		assert_int_equal(nv_fp_arm(points[p]), 0);
		rc = commit(kv, &row, &ver, 0, 4, NULL);
		nv_fp_reset();
		assert_int_equal(rc, -EIO);

		/* Restart: the in-memory row is gone; read it back. */
		assert_int_equal(meta_chain_get(kv, 0, EFX_STAR, 1, &row, &ver), 0);
		if (p == 2) {
			/* The checkpoint commit landed before the crash. */
			assert_int_equal(row.checkpoint, 4);
			/* A zombie re-running the batch on the old row loses
			 * the CAS and changes nothing that matters. */
			assert_int_equal(commit(kv, &stale, &stale_ver, 0, 4, NULL), -ECANCELED);
		} else {
			assert_int_equal(row.checkpoint, 0);
			assert_int_equal(commit(kv, &row, &ver, 0, 4, NULL), 0);
		}
		assert_int_equal(commit(kv, &row, &ver, 4, 2, NULL), 0);
		expect_same_dump(clean, kv);
		kv_close(kv);
	}
	kv_close(clean);
}

/* A crash after the refs of one batch, re-run with different batch
 * boundaries from the same checkpoint: every ref key the crashed attempt
 * wrote is rewritten, so the rows converge to the clean run's for the
 * new boundaries, contiguous, each record covered once. */
static void test_absorb_rerun_different_boundaries(void **state)
{
	struct efx *f = *state;
	struct meta_chain row;
	uint64_t ver;
	struct kv *kv, *clean = open_kv(f, "clean.db");

	/* Clean: [0,2) [2,4) [4,6). */
	row = mint(clean, &ver);
	assert_int_equal(commit(clean, &row, &ver, 0, 2, NULL), 0);
	assert_int_equal(commit(clean, &row, &ver, 2, 2, NULL), 0);
	assert_int_equal(commit(clean, &row, &ver, 4, 2, NULL), 0);
	expect_contiguous(clean, SCN_END_SEQ, SCN_END_BYTE);

	/* Crashed [0,6) after its refs; re-run as [0,2) [2,4) [4,6). */
	kv = open_kv(f, "a.db");
	row = mint(kv, &ver);
	assert_int_equal(nv_fp_arm("absorb.after_refs=error"), 0);
	assert_int_equal(commit(kv, &row, &ver, 0, 6, NULL), -EIO);
	nv_fp_reset();
	assert_int_equal(meta_chain_get(kv, 0, EFX_STAR, 1, &row, &ver), 0);
	assert_int_equal(commit(kv, &row, &ver, 0, 2, NULL), 0);
	assert_int_equal(commit(kv, &row, &ver, 2, 2, NULL), 0);
	assert_int_equal(commit(kv, &row, &ver, 4, 2, NULL), 0);
	expect_contiguous(kv, SCN_END_SEQ, SCN_END_BYTE);
	expect_same_dump(clean, kv);
	kv_close(kv);

	/* Crashed [0,1) and then [0,3) after refs, re-run as [0,2) [2,4)
	 * [4,6): still the clean rows. */
	kv = open_kv(f, "b.db");
	row = mint(kv, &ver);
	assert_int_equal(nv_fp_arm("absorb.after_refs=error"), 0);
	assert_int_equal(commit(kv, &row, &ver, 0, 1, NULL), -EIO);
	assert_int_equal(meta_chain_get(kv, 0, EFX_STAR, 1, &row, &ver), 0);
	assert_int_equal(commit(kv, &row, &ver, 0, 3, NULL), -EIO);
	nv_fp_reset();
	assert_int_equal(meta_chain_get(kv, 0, EFX_STAR, 1, &row, &ver), 0);
	assert_int_equal(commit(kv, &row, &ver, 0, 2, NULL), 0);
	assert_int_equal(commit(kv, &row, &ver, 2, 2, NULL), 0);
	assert_int_equal(commit(kv, &row, &ver, 4, 2, NULL), 0);
	expect_contiguous(kv, SCN_END_SEQ, SCN_END_BYTE);
	expect_same_dump(clean, kv);
	kv_close(kv);
	kv_close(clean);
}

/* Many streams: the refs of one batch span several transactions; a crash
 * between them, then a re-run with other boundaries, converges too. */
static void test_absorb_rerun_partial_ref_transactions(void **state)
{
	struct efx *f = *state;
	enum { NS = 700, NSLOT = 3 };
	struct absorb_run *runs = calloc((size_t)NS * NSLOT, sizeof(*runs));
	struct absorb_slot slots[NSLOT];
	struct meta_chain row;
	uint64_t ver;
	struct kv *kv, *clean = open_kv(f, "clean.db");

	assert_non_null(runs);
	for (int s = 0; s < NSLOT; s++) {
		for (int i = 0; i < NS; i++) {
			struct absorb_run *r = &runs[s * NS + i];

			r->stream_id = 1000 + (uint64_t)i;
			r->first_seq = (uint64_t)s * 2;
			r->first_byte = (uint64_t)s * 20;
			r->nrec = 2;
			r->nbytes = 20;
			r->max_ts = 5;
		}
		slots[s].slot = (uint64_t)s;
		slots[s].footer_off = 64;
		slots[s].footer_len = 96;
		slots[s].nruns = NS;
		slots[s].runs = &runs[s * NS];
	}
	/* Clean: [0,1) [1,3). */
	row = mint(clean, &ver);
	assert_int_equal(absorb_commit_batch(clean, &row, &ver, slots, 1, &POLICY, NULL), 0);
	assert_int_equal(absorb_commit_batch(clean, &row, &ver, slots + 1, 2, &POLICY, NULL), 0);

	/* [0,3) dies after its first ref transaction; re-run [0,1) [1,3). */
	kv = open_kv(f, "p.db");
	row = mint(kv, &ver);
	/* Hits count from arming: #1 is the first ref transaction (256
	 * refs), #2 the second. */
	assert_int_equal(nv_fp_arm("meta.commit=error@2"), 0);
	assert_int_equal(absorb_commit_batch(kv, &row, &ver, slots, 3, &POLICY, NULL), -EIO);
	nv_fp_reset();
	{
		/* Some refs were written, not all. */
		char *d = efx_kv_dump_space(kv, "ref", false);
		int n = 0;

		for (char *p = d; *p; p++)
			n += *p == '\n';
		assert_true(n > 0 && n < NS);
		free(d);
	}
	assert_int_equal(meta_chain_get(kv, 0, EFX_STAR, 1, &row, &ver), 0);
	assert_int_equal(absorb_commit_batch(kv, &row, &ver, slots, 1, &POLICY, NULL), 0);
	assert_int_equal(absorb_commit_batch(kv, &row, &ver, slots + 1, 2, &POLICY, NULL), 0);
	expect_same_dump(clean, kv);
	kv_close(kv);
	kv_close(clean);
	free(runs);
}

static void test_absorb_rejects_bad_batches(void **state)
{
	struct efx *f = *state;
	struct meta_chain row, copy;
	uint64_t ver, vcopy;
	struct absorb_slot slots[SCN_SLOTS];
	struct absorb_run bad[2];
	char *before, *after;

	row = mint(f->kv, &ver);
	assert_int_equal(commit(f->kv, &row, &ver, 0, 2, NULL), 0);
	before = efx_kv_dump(f->kv, false);
	copy = row;
	vcopy = ver;

	/* Empty batch. */
	assert_int_equal(absorb_commit_batch(f->kv, &row, &ver, slots, 0, &POLICY, NULL), -EINVAL);
	/* Not starting at the checkpoint (2): behind it and ahead of it. */
	scn_batch(1, 2, slots);
	assert_int_equal(absorb_commit_batch(f->kv, &row, &ver, slots, 2, &POLICY, NULL), -EINVAL);
	scn_batch(3, 2, slots);
	assert_int_equal(absorb_commit_batch(f->kv, &row, &ver, slots, 2, &POLICY, NULL), -EINVAL);
	/* Not consecutive: 2 then 4. */
	scn_batch(2, 3, slots);
	slots[1] = slots[2];
	assert_int_equal(absorb_commit_batch(f->kv, &row, &ver, slots, 2, &POLICY, NULL), -EINVAL);
	/* Runs of one stream not contiguous across slots: a seq gap, a byte
	 * gap, an overlap, an empty run. */
	scn_batch(2, 2, slots);
	memcpy(bad, SCN[3].runs, sizeof(bad));
	slots[1].runs = bad;
	slots[1].nruns = 2;
	bad[1].first_seq = 7; /* stream 102 continues at 6 */
	assert_int_equal(absorb_commit_batch(f->kv, &row, &ver, slots, 2, &POLICY, NULL), -EINVAL);
	memcpy(bad, SCN[3].runs, sizeof(bad));
	bad[1].first_byte = 106;
	assert_int_equal(absorb_commit_batch(f->kv, &row, &ver, slots, 2, &POLICY, NULL), -EINVAL);
	memcpy(bad, SCN[3].runs, sizeof(bad));
	bad[1].first_seq = 5;
	assert_int_equal(absorb_commit_batch(f->kv, &row, &ver, slots, 2, &POLICY, NULL), -EINVAL);
	memcpy(bad, SCN[3].runs, sizeof(bad));
	bad[0].nrec = 0;
	bad[0].nbytes = 0;
	assert_int_equal(absorb_commit_batch(f->kv, &row, &ver, slots, 2, &POLICY, NULL), -EINVAL);

	/* Nothing was written, and the caller's row is untouched. */
	after = efx_kv_dump(f->kv, false);
	assert_string_equal(after, before);
	assert_int_equal(ver, vcopy);
	assert_int_equal(row.checkpoint, copy.checkpoint);
	assert_int_equal(row.state, copy.state);
	free(before);
	free(after);
}

static void test_absorb_cas_conflict(void **state)
{
	struct efx *f = *state;
	struct meta_chain row, fenced, got;
	uint64_t ver, fver;
	struct mk_list *ml = calloc(1, sizeof(*ml));

	assert_non_null(ml);
	row = mint(f->kv, &ver);
	assert_int_equal(commit(f->kv, &row, &ver, 0, 2, NULL), 0);
	/* Recovery fences the chain under the absorb. */
	fenced = row;
	fenced.state = CHAIN_FENCED;
	fenced.cut = 2;
	assert_int_equal(meta_chain_cas(f->kv, &fenced, ver), 0);
	assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, 1, &got, &fver), 0);

	assert_int_equal(commit(f->kv, &row, &ver, 2, 2, NULL), -ECANCELED);
	assert_int_equal(row.checkpoint, 2); /* the caller's copy is unchanged */
	assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, 1, &got, &ver), 0);
	assert_int_equal(ver, fver);
	assert_int_equal(got.state, CHAIN_FENCED);
	assert_int_equal(got.checkpoint, 2);
	assert_int_equal(meta_marker_list(f->kv, 0, EFX_STAR, 1, mk_collect, ml), 0);
	assert_int_equal(ml->n, 1); /* only the first batch's */
	free(ml);
}

/* ===================================================== the live absorb */

static uint32_t pend_count(struct nv_stream *s)
{
	uint32_t n;

	pthread_mutex_lock(&s->lock);
	n = s->pend_n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void test_absorb_live(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s[2];
	struct meta_chain row;
	uint64_t ver, total[2] = { 0, 0 };
	uint8_t body[300];

	efx_opts_default(&o);
	o.hold = true;
	efx_start(f, &o);
	s[0] = efx_stream(f, "a", -1);
	s[1] = efx_stream(f, "b", -1);
	for (int i = 0; i < 12; i++) {
		size_t len = (size_t)(i * 23 % 300);

		efx_fill(body, len, s[i % 2]->id, (uint64_t)i);
		assert_int_equal(efx_append_wait(f, s[i % 2], body, len, NULL), 0);
		total[i % 2] += len;
	}
	/* Acked, not absorbed: frontier 0, tokens held, flight index full. */
	for (int j = 0; j < 2; j++) {
		assert_int_equal(stream_acked_byte(s[j]), total[j]);
		assert_int_equal(atomic_load(&s[j]->frontier_byte), 0);
		assert_int_equal(pend_count(s[j]), 6);
	}
	assert_true(backlog_used(f->backlog) > 0);
	assert_int_equal(NV_STAT_GET(&f->stats, absorb_batches), 0);

	efx_unhold(f);
	assert_int_equal(absorb_drain(f->absorb), 0);
	for (int j = 0; j < 2; j++) {
		struct meta_ref last;

		assert_int_equal(atomic_load(&s[j]->frontier_byte), total[j]);
		assert_int_equal(atomic_load(&s[j]->frontier_seq), 6);
		assert_int_equal(pend_count(s[j]), 0);
		meta_ref_init(&last);
		assert_int_equal(meta_ref_last(f->kv, s[j]->id, &last), 0);
		assert_int_equal(last.end_seq, 6);
		assert_int_equal(last.end_byte, total[j]);
		meta_ref_clear(&last);
	}
	assert_int_equal(backlog_used(f->backlog), 0);
	assert_int_equal(NV_STAT_GET(&f->stats, absorb_batches), 12); /* one slot per batch */
	assert_int_equal(NV_STAT_GET(&f->stats, span_refs), 12);
	absorb_chain_row(f->absorb, &row, &ver);
	assert_int_equal(row.checkpoint, 12);
	{
		struct meta_chain got;
		uint64_t gver;

		assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, f->row.epoch, &got, &gver), 0);
		assert_int_equal(got.checkpoint, 12);
		assert_int_equal(gver, ver);
	}
}

/* The live absorb stops with -ECANCELED when the chain row is moved under
 * it (a recovery fenced it), never advances a frontier for what it could
 * not commit, and wakes a drainer that was already waiting. */
struct drain_waiter {
	struct absorb *a;
	int rc;
	bool returned; /* lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t th;
};

static void *drain_main(void *arg)
{
	struct drain_waiter *d = arg;
	int rc = absorb_drain(d->a);

	pthread_mutex_lock(&d->lock);
	d->rc = rc;
	d->returned = true;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static void test_absorb_live_stops_on_conflict(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	struct meta_chain row;
	struct drain_waiter d;
	pthread_condattr_t ca;
	struct timespec ts;
	uint64_t ver;
	uint8_t body[10] = { 0 };
	bool returned;

	efx_opts_default(&o);
	efx_start(f, &o);
	s = efx_stream(f, "a", -1);
	assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), 0);
	assert_int_equal(chain_drain(f->chain), 0); /* released: pushed to the absorb */
	assert_int_equal(absorb_drain(f->absorb), 0);
	assert_int_equal(atomic_load(&s->frontier_byte), 10);

	absorb_chain_row(f->absorb, &row, &ver);
	row.state = CHAIN_FENCED;
	row.cut = row.checkpoint;
	assert_int_equal(meta_chain_cas(f->kv, &row, ver), 0);

	/* Slow the next commit down so a drainer is surely waiting when it
	 * fails. */
	assert_int_equal(nv_fp_arm("absorb.before_refs=delay:1000"), 0);
	assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), 0);
	assert_int_equal(chain_drain(f->chain), 0);
	memset(&d, 0, sizeof(d));
	d.a = f->absorb;
	pthread_mutex_init(&d.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d.cond, &ca);
	pthread_condattr_destroy(&ca);
	assert_int_equal(pthread_create(&d.th, NULL, drain_main, &d), 0);

	ts = nv_mono_deadline(10 * NV_NS_PER_S);
	pthread_mutex_lock(&d.lock);
	while (!d.returned && pthread_cond_timedwait(&d.cond, &d.lock, &ts) != ETIMEDOUT)
		;
	returned = d.returned;
	pthread_mutex_unlock(&d.lock);
	nv_fp_reset();
	if (!returned) {
		/* The drainer is stuck inside the absorb: leak both rather
		 * than free memory a blocked thread still uses. */
		f->absorb = NULL;
		efx_hold(f); /* later releases must not reach the leaked absorb */
		fail_msg("absorb_drain() waiting while the commit failed with -ECANCELED never "
			 "returned (absorb_main does not signal 'idle' when it stops on an "
			 "error with the batch put back)");
	}
	assert_int_equal(pthread_join(d.th, NULL), 0);
	pthread_cond_destroy(&d.cond);
	pthread_mutex_destroy(&d.lock);
	assert_int_equal(d.rc, -ECANCELED);
	/* Later drains report it at once. */
	assert_int_equal(absorb_drain(f->absorb), -ECANCELED);
	assert_int_equal(atomic_load(&s->frontier_byte), 10);
	assert_int_equal(stream_acked_byte(s), 20);
	/* The chain row is the fencer's. */
	{
		struct meta_chain got;

		assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, f->row.epoch, &got, NULL), 0);
		assert_int_equal(got.state, CHAIN_FENCED);
		assert_int_equal(got.checkpoint, 1);
	}
}

/* At close (kv_closing(), star_close()) a commit that fails is not
 * retried: the drain returns its error at once, the flights stay for the
 * next start's recovery, instead of the drain waiting forever on a
 * metastore that does not answer (issue 14: unmount with etcd down). */
static void test_absorb_gives_up_at_close(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	struct drain_waiter d;
	pthread_condattr_t ca;
	struct timespec ts;
	uint8_t body[10] = { 0 };
	bool returned;

	efx_opts_default(&o);
	efx_start(f, &o);
	s = efx_stream(f, "a", -1);
	assert_int_equal(nv_fp_arm("meta.commit=error"), 0);
	assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), 0);
	assert_int_equal(chain_drain(f->chain), 0); /* pushed; its commits fail */
	kv_closing(f->kv);
	assert_true(kv_is_closing(f->kv));
	memset(&d, 0, sizeof(d));
	d.a = f->absorb;
	pthread_mutex_init(&d.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d.cond, &ca);
	pthread_condattr_destroy(&ca);
	assert_int_equal(pthread_create(&d.th, NULL, drain_main, &d), 0);
	ts = nv_mono_deadline(20 * NV_NS_PER_S);
	pthread_mutex_lock(&d.lock);
	while (!d.returned && pthread_cond_timedwait(&d.cond, &d.lock, &ts) != ETIMEDOUT)
		;
	returned = d.returned;
	pthread_mutex_unlock(&d.lock);
	nv_fp_reset();
	if (!returned) {
		f->absorb = NULL;
		efx_hold(f);
		fail_msg("absorb_drain() at close kept retrying a failing commit");
	}
	assert_int_equal(pthread_join(d.th, NULL), 0);
	pthread_cond_destroy(&d.cond);
	pthread_mutex_destroy(&d.lock);
	assert_int_equal(d.rc, -EIO);
	assert_int_equal(atomic_load(&s->frontier_byte), 0); /* not absorbed */
	assert_int_equal(stream_acked_byte(s), 10);          /* but acked */
}

/* ===================================================== recovery */

/* Slot `slot` of epoch 1 holds a valid fence object naming that cut. */
static void expect_fence(struct efx *f, uint64_t slot)
{
	char key[CHAIN_KEY_MAX];
	uint8_t *obj;
	size_t size;
	uint64_t epoch, cut;

	chain_slot_key(key, sizeof(key), NV_CLASS_STANDARD, EFX_STAR, 1, slot);
	assert_int_equal(fake_store_copy(f->fs, key, &obj, &size), 0);
	assert_int_equal(chain_fence_decode(obj, size, &epoch, &cut), 1);
	assert_int_equal(epoch, 1);
	assert_int_equal(cut, slot);
	free(obj);
}

static struct recover_cfg rcfg(struct efx *f, struct kv *kv, uint32_t batch)
{
	struct recover_cfg c = { 0 };

	c.store = f->store;
	c.kv = kv;
	c.stats = &f->stats;
	for (unsigned cls = 0; cls < NV_CLASS_COUNT; cls++)
		c.policy[cls] = POLICY;
	c.batch_slots = batch;
	c.probe_window = 8;
	return c;
}

/* The real chain writes the slots; the absorb never sees them (held at
 * the valve).  Recovery in a second metastore must produce exactly the
 * rows the live absorb produces in the first. */
static void test_absorb_recover_matches_live(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s[3];
	struct efx_rec *r;
	struct meta_chain row2, got;
	uint64_t ver2, nslots;
	struct recover_cfg rc;
	struct kv *kv2;
	uint8_t body[2000];
	static const char *const spaces[] = { "ref", "rby", "mrk" };

	efx_opts_default(&o);
	o.hold = true;
	o.flight_max = 3000;
	o.chunk_target = 1024;
	efx_start(f, &o);
	r = efx_recs(f, 90);
	for (int j = 0; j < 3; j++) {
		char name[8];

		snprintf(name, sizeof(name), "s%d", j);
		s[j] = efx_stream(f, name, -1);
	}
	for (int i = 0; i < 90; i++) {
		size_t len = (size_t)((i * 137) % 2000);

		efx_fill(body, len, s[i % 3]->id, (uint64_t)i);
		assert_int_equal(efx_append(f, s[(i * 7) % 3], body, len, &r[i]), 0);
	}
	assert_int_equal(chain_drain(f->chain), 0);
	nslots = chain_next_slot(f->chain);
	assert_true(nslots > 3);
	assert_int_equal(efx_held(f), nslots);

	/* Recovery in kv2, whose chain row is the same (cls, star, epoch). */
	kv2 = open_kv(f, "recover.db");
	assert_int_equal(meta_chain_mint(kv2, 0, EFX_STAR, 1, &row2, &ver2), 0);
	assert_int_equal(row2.epoch, f->row.epoch);
	rc = rcfg(f, kv2, 1);
	assert_int_equal(recover_chain(&rc, 0, EFX_STAR, row2.epoch), 0);
	assert_int_equal(NV_STAT_GET(&f->stats, recovered_slots), nslots);
	assert_int_equal(meta_chain_get(kv2, 0, EFX_STAR, row2.epoch, &got, NULL), 0);
	assert_int_equal(got.state, CHAIN_SETTLED);
	assert_int_equal(got.cut, nslots);
	assert_int_equal(got.checkpoint, nslots);
	assert_int_equal(got.clean, 0);

	/* The live absorb, one flight per batch like the walk. */
	efx_unhold(f);
	assert_int_equal(absorb_drain(f->absorb), 0);
	for (size_t k = 0; k < sizeof(spaces) / sizeof(spaces[0]); k++) {
		char *live = efx_kv_dump_space(f->kv, spaces[k], true);
		char *rec = efx_kv_dump_space(kv2, spaces[k], true);

		assert_true(strlen(live) > 0);
		expect_same_text(spaces[k], live, rec);
		free(live);
		free(rec);
	}
	/* No slot was reaped (all are below the cut); the cut holds the
	 * fence object. */
	{
		char prefix[CHAIN_KEY_MAX];

		assert_int_equal(fake_store_count_objects(f->fs, efx_chain_prefix(f, prefix)),
				 nslots + 1);
		expect_fence(f, nslots);
	}
	kv_close(kv2);
}

/* Write a transit bundle for slot directly: runs as in the scenario,
 * records of ts 1000 + seq.  Returns the footer window. */
static void put_bundle_cls(struct store *st, unsigned cls, uint64_t epoch, uint64_t slot,
			   const struct absorb_run *runs, uint32_t n, uint64_t *foff,
			   uint32_t *flen)
{
	struct bundle_run br[SCN_RUNS_MAX];
	uint8_t *frames[SCN_RUNS_MAX] = { 0 };
	struct bundle_enc_opts opts = { .chunk_target = 16, .zstd_level = 0 };
	struct bundle_out out;
	char key[CHAIN_KEY_MAX];

	assert_true(n <= SCN_RUNS_MAX);
	for (uint32_t i = 0; i < n; i++) {
		const struct absorb_run *r = &runs[i];
		size_t len = r->nrec * BUNDLE_FRAME_HDR + r->nbytes, at = 0;

		frames[i] = malloc(len ? len : 1);
		assert_non_null(frames[i]);
		for (uint32_t k = 0; k < r->nrec; k++) {
			uint32_t bl = (uint32_t)(r->nbytes / r->nrec + (k < r->nbytes % r->nrec));

			bundle_frame_hdr(frames[i] + at, bl, 1000 + r->first_seq + k);
			memset(frames[i] + at + BUNDLE_FRAME_HDR, (int)(r->stream_id + k), bl);
			at += BUNDLE_FRAME_HDR + bl;
		}
		br[i].stream_id = r->stream_id;
		br[i].first_seq = r->first_seq;
		br[i].first_byte = r->first_byte;
		br[i].frames = frames[i];
		br[i].frames_len = len;
		br[i].nrec = r->nrec;
	}
	assert_int_equal(bundle_encode(br, n, &opts, &out), 0);
	chain_slot_key(key, sizeof(key), cls, EFX_STAR, epoch, slot);
	assert_int_equal(store_put(st, key, out.iov, out.iovcnt, STORE_CREATE_ONCE), 0);
	if (foff)
		*foff = out.footer_off;
	if (flen)
		*flen = out.footer_len;
	bundle_out_free(&out);
	for (uint32_t i = 0; i < n; i++)
		free(frames[i]);
}

static void put_bundle(struct store *st, uint64_t epoch, uint64_t slot,
		       const struct absorb_run *runs, uint32_t n, uint64_t *foff, uint32_t *flen)
{
	put_bundle_cls(st, NV_CLASS_STANDARD, epoch, slot, runs, n, foff, flen);
}

static bool slot_exists(struct efx *f, uint64_t slot)
{
	char key[CHAIN_KEY_MAX];

	chain_slot_key(key, sizeof(key), NV_CLASS_STANDARD, EFX_STAR, 1, slot);
	return fake_store_exists(f->fs, key);
}

static void put_fence(struct efx *f, uint64_t slot)
{
	char key[CHAIN_KEY_MAX];
	uint8_t b[CHAIN_FENCE_SIZE];
	struct iovec iov = { b, sizeof(b) };

	chain_fence_encode(b, 1, slot);
	chain_slot_key(key, sizeof(key), NV_CLASS_STANDARD, EFX_STAR, 1, slot);
	assert_int_equal(store_put(f->store, key, &iov, 1, STORE_CREATE_ONCE), 0);
}

/* Slots 0..3 exist, 4 is missing, 5 exists (PUT out of order, never
 * acked): the cut is 4 and holds the fence, slot 5 is reaped, refs end
 * with slot 3, and a second run changes nothing. */
static void test_absorb_recover_reaps_and_settles(void **state)
{
	struct efx *f = *state;
	struct meta_chain got;
	uint64_t ver, foff[SCN_SLOTS];
	uint32_t flen[SCN_SLOTS];
	struct recover_cfg rc = rcfg(f, f->kv, 2);
	static const uint64_t end_seq4[3] = { 10, 7, 6 }, end_byte4[3] = { 97, 105, 33 };
	char *d1, *d2;
	unsigned dels;

	(void)mint(f->kv, &ver);
	for (uint64_t s = 0; s < SCN_SLOTS; s++)
		if (s != 4)
			put_bundle(f->store, 1, s, SCN[s].runs, SCN[s].nruns, &foff[s], &flen[s]);

	assert_int_equal(recover_chain(&rc, 0, EFX_STAR, 1), 0);
	assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, 1, &got, NULL), 0);
	assert_int_equal(got.state, CHAIN_SETTLED);
	assert_int_equal(got.cut, 4);
	assert_int_equal(got.checkpoint, 4);
	for (uint64_t s = 0; s < 4; s++)
		assert_true(slot_exists(f, s));
	expect_fence(f, 4);              /* a zombie can never land the cut */
	assert_false(slot_exists(f, 5)); /* reaped */
	expect_contiguous(f->kv, end_seq4, end_byte4);
	/* The refs carry the slots' real footer windows. */
	{
		struct meta_ref r;

		meta_ref_init(&r);
		assert_int_equal(meta_ref_floor_seq(f->kv, 102, 0, &r), 0);
		assert_int_equal(r.nslots, 1); /* batch [0,2) holds it in slot 0 only */
		assert_int_equal(r.slots[0].footer_off, foff[0]);
		assert_int_equal(r.slots[0].footer_len, flen[0]);
		assert_int_equal(meta_ref_floor_seq(f->kv, 102, 2, &r), 0);
		assert_int_equal(r.first_seq, 2);
		assert_int_equal(r.nslots, 2);
		assert_int_equal(r.slots[1].slot, 3);
		assert_int_equal(r.slots[1].footer_off, foff[3]);
		meta_ref_clear(&r);
	}
	/* Markers cover [0,2) and [2,4). */
	{
		struct mk_list *ml = calloc(1, sizeof(*ml));

		assert_non_null(ml);
		assert_int_equal(meta_marker_list(f->kv, 0, EFX_STAR, 1, mk_collect, ml), 0);
		assert_int_equal(ml->n, 2);
		assert_int_equal(ml->m[0].end_slot, 2);
		assert_int_equal(ml->m[1].first_slot, 2);
		assert_int_equal(ml->m[1].end_slot, 4);
		free(ml);
	}
	assert_int_equal(NV_STAT_GET(&f->stats, recovered_slots), 4);

	/* Twice: a no-op (not even marker times change, nothing is read). */
	d1 = efx_kv_dump(f->kv, false);
	fake_store_reset_calls(f->fs);
	dels = fake_store_calls(f->fs, FAKE_DEL, NULL);
	assert_int_equal(recover_chain(&rc, 0, EFX_STAR, 1), 0);
	d2 = efx_kv_dump(f->kv, false);
	assert_string_equal(d1, d2);
	assert_int_equal(fake_store_calls(f->fs, FAKE_DEL, NULL), dels);
	assert_int_equal(fake_store_calls(f->fs, FAKE_GET, NULL), 0);
	assert_int_equal(NV_STAT_GET(&f->stats, recovered_slots), 4);
	free(d1);
	free(d2);
}

/* A recorded cut is adopted (an earlier walk fenced it and recorded it);
 * what lies above the fence is garbage. */
static void test_absorb_recover_adopts_recorded_cut(void **state)
{
	struct efx *f = *state;
	struct meta_chain row, got;
	uint64_t ver;
	struct recover_cfg rc = rcfg(f, f->kv, 4);
	static const uint64_t end_seq2[3] = { 5, 2, 3 }, end_byte2[3] = { 47, 5, 30 };

	row = mint(f->kv, &ver);
	for (uint64_t s = 0; s < 2; s++)
		put_bundle(f->store, 1, s, SCN[s].runs, SCN[s].nruns, NULL, NULL);
	put_fence(f, 2);
	put_bundle(f->store, 1, 3, SCN[3].runs, SCN[3].nruns, NULL, NULL);
	row.state = CHAIN_FENCED;
	row.cut = 2;
	assert_int_equal(meta_chain_cas(f->kv, &row, ver), 0);

	assert_int_equal(recover_chain(&rc, 0, EFX_STAR, 1), 0);
	assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, 1, &got, NULL), 0);
	assert_int_equal(got.state, CHAIN_SETTLED);
	assert_int_equal(got.cut, 2);
	assert_int_equal(got.checkpoint, 2);
	expect_contiguous(f->kv, end_seq2, end_byte2);
	assert_true(slot_exists(f, 0));
	assert_true(slot_exists(f, 1));
	expect_fence(f, 2);
	assert_false(slot_exists(f, 3));
}

/* A LIVE row whose walk died after putting the fence: the fence found
 * where the durable prefix ends is adopted as the cut, not skipped. */
static void test_absorb_recover_adopts_fence_object(void **state)
{
	struct efx *f = *state;
	struct meta_chain got;
	uint64_t ver;
	struct recover_cfg rc = rcfg(f, f->kv, 4);
	static const uint64_t end_seq3[3] = { 5, 6, 4 }, end_byte3[3] = { 47, 105, 31 };

	(void)mint(f->kv, &ver);
	for (uint64_t s = 0; s < 3; s++)
		put_bundle(f->store, 1, s, SCN[s].runs, SCN[s].nruns, NULL, NULL);
	put_fence(f, 3);
	put_bundle(f->store, 1, 4, SCN[4].runs, SCN[4].nruns, NULL, NULL);

	assert_int_equal(recover_chain(&rc, 0, EFX_STAR, 1), 0);
	assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, 1, &got, NULL), 0);
	assert_int_equal(got.state, CHAIN_SETTLED);
	assert_int_equal(got.cut, 3);
	expect_contiguous(f->kv, end_seq3, end_byte3);
	expect_fence(f, 3);
	assert_false(slot_exists(f, 4));
}

/* A slot below the cut that fails verification: -EIO, and the chain is
 * not marked settled (acknowledged data would be lost). */
static void test_absorb_recover_refuses_corrupt_slot(void **state)
{
	struct efx *f = *state;
	struct meta_chain got;
	uint64_t ver, foff;
	uint32_t flen;
	struct recover_cfg rc = rcfg(f, f->kv, 1);
	char key[CHAIN_KEY_MAX];

	(void)mint(f->kv, &ver);
	for (uint64_t s = 0; s < 3; s++)
		put_bundle(f->store, 1, s, SCN[s].runs, SCN[s].nruns, &foff, &flen);
	/* Corrupt slot 2's footer (its CRC no longer matches). */
	chain_slot_key(key, sizeof(key), 0, EFX_STAR, 1, 2);
	assert_int_equal(fake_store_flip(f->fs, key, foff + 3), 0);

	assert_int_equal(recover_chain(&rc, 0, EFX_STAR, 1), -EIO);
	assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, 1, &got, NULL), 0);
	assert_int_equal(got.state, CHAIN_FENCED);
	assert_int_equal(got.cut, 3);
	assert_int_equal(got.checkpoint, 2); /* slots 0 and 1 were absorbed */
	assert_true(slot_exists(f, 2));       /* nothing was deleted */

	/* Repaired, the next run finishes the job. */
	assert_int_equal(fake_store_flip(f->fs, key, foff + 3), 0);
	assert_int_equal(recover_chain(&rc, 0, EFX_STAR, 1), 0);
	assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, 1, &got, NULL), 0);
	assert_int_equal(got.state, CHAIN_SETTLED);
	assert_int_equal(got.checkpoint, 3);
}

/* A crash at any step of the walk re-runs to the same rows as a clean
 * recovery. */
static void test_absorb_recover_crash_rerun(void **state)
{
	static const char *const points[] = {
		"recover.before_walk=error", "recover.after_fence=error",
		"recover.after_slot=error@2",
		"recover.before_settled=error", "absorb.after_refs=error@3",
		"absorb.after_checkpoint=error@2",
	};
	struct efx *f = *state;
	struct meta_chain got;
	uint64_t ver;
	struct kv *clean = open_kv(f, "clean.db");
	struct recover_cfg rc = rcfg(f, clean, 1);

	for (uint64_t s = 0; s < SCN_SLOTS; s++)
		put_bundle(f->store, 1, s, SCN[s].runs, SCN[s].nruns, NULL, NULL);
	(void)mint(clean, &ver);
	assert_int_equal(recover_chain(&rc, 0, EFX_STAR, 1), 0);

	for (size_t p = 0; p < sizeof(points) / sizeof(points[0]); p++) {
		char name[32];
		struct kv *kv;
		int r;

		snprintf(name, sizeof(name), "rc%zu.db", p);
		kv = open_kv(f, name);
		(void)mint(kv, &ver);
		rc.kv = kv;
		/* Each walk starts from the bare slots: no earlier fence. */
		{
			char key[CHAIN_KEY_MAX];
			const char *keys[1] = { key };

			expect_fence(f, SCN_SLOTS);
			chain_slot_key(key, sizeof(key), 0, EFX_STAR, 1, SCN_SLOTS);
			assert_int_equal(store_delete(f->store, keys, 1), 0);
		}
		assert_int_equal(nv_fp_arm(points[p]), 0);
		r = recover_chain(&rc, 0, EFX_STAR, 1);
		nv_fp_reset();
		assert_int_equal(r, -EIO);
		assert_int_equal(meta_chain_get(kv, 0, EFX_STAR, 1, &got, NULL), 0);
		assert_true(got.state != CHAIN_SETTLED);
		assert_int_equal(recover_chain(&rc, 0, EFX_STAR, 1), 0);
		expect_same_dump(clean, kv);
		kv_close(kv);
	}
	kv_close(clean);
	for (uint64_t s = 0; s < SCN_SLOTS; s++)
		assert_true(slot_exists(f, s));
}

/* ===================================================== settle rounds */

/* Commit one single-run batch of stream 7 at the chain's checkpoint with
 * the trigger policy; returns the batch's ripe time, *birth_lo/hi bound
 * its birth. */
static uint64_t round_batch(struct kv *kv, struct meta_chain *row, uint64_t *ver,
			    uint64_t first_byte, uint64_t nbytes, uint64_t settled,
			    uint64_t round, uint64_t *birth_lo, uint64_t *birth_hi)
{
	static const struct absorb_policy pol = {
		.age_cap_ns = AGE_CAP, .trigger_bytes = 8u << 20, .linger_ns = 30 * NV_NS_PER_S,
	};
	struct absorb_run run = RUN(7, first_byte, first_byte, 1, nbytes);
	struct absorb_slot slot = { .slot = row->checkpoint, .footer_off = 1, .footer_len = 64,
				    .nruns = 1, .runs = &run };
	struct absorb_result res = { 0 };

	run.settled_byte = settled;
	run.round_ripe_ns = round;
	*birth_lo = nv_now_wall_ns();
	assert_int_equal(absorb_commit_batch(kv, row, ver, &slot, 1, &pol, &res), 0);
	*birth_hi = nv_now_wall_ns();
	return res.ripe_ns;
}

/* The size trigger opens a round; batches while it is open ripen with it;
 * the first batch after it ripened, still over the trigger, opens the
 * next; under the trigger, or with the settled end unknown, the age cap. */
static void test_absorb_settle_rounds(void **state)
{
	struct efx *f = *state;
	const uint64_t M = 1u << 20, linger = 30 * NV_NS_PER_S;
	const uint64_t jit = absorb_jitter_ns(7, linger);
	struct meta_chain row;
	uint64_t ver, lo, hi, ripe, round;
	struct mk_list *ml = calloc(1, sizeof(*ml));

	assert_non_null(ml);
	assert_true(jit <= linger / 2);
	row = mint(f->kv, &ver);

	/* 1 MiB un-settled: under the trigger. */
	ripe = round_batch(f->kv, &row, &ver, 0, M, 0, 0, &lo, &hi);
	assert_true(ripe >= lo + AGE_CAP && ripe <= hi + AGE_CAP);
	/* Crossing 8 MiB: a round opens at birth + linger + jitter. */
	round = round_batch(f->kv, &row, &ver, M, 8 * M, 0, 0, &lo, &hi);
	assert_true(round >= lo + linger + jit && round <= hi + linger + jit);
	/* Already over the trigger while the round is open: ripens with it. */
	ripe = round_batch(f->kv, &row, &ver, 9 * M, M, 0, round, &lo, &hi);
	assert_int_equal(ripe, round);
	/* The round ripened (its settle has not moved the settled end yet):
	 * still over the trigger, so the next round opens. */
	ripe = round_batch(f->kv, &row, &ver, 10 * M, M, 0, 1, &lo, &hi);
	assert_true(ripe >= lo + linger + jit && ripe <= hi + linger + jit);
	/* Settled end unknown (a recovery walk): the age cap. */
	ripe = round_batch(f->kv, &row, &ver, 11 * M, M, ABSORB_UNKNOWN, 0, &lo, &hi);
	assert_true(ripe >= lo + AGE_CAP && ripe <= hi + AGE_CAP);
	/* The settle moved the settled end: 2 MiB un-settled, the age cap. */
	ripe = round_batch(f->kv, &row, &ver, 12 * M, M, 11 * M, 0, &lo, &hi);
	assert_true(ripe >= lo + AGE_CAP && ripe <= hi + AGE_CAP);

	/* The markers say which batches crossed. */
	assert_int_equal(meta_marker_list(f->kv, 0, EFX_STAR, 1, mk_collect, ml), 0);
	assert_int_equal(ml->n, 6);
	{
		static const int crossed[6] = { 0, 1, 1, 1, 0, 0 };

		for (int i = 0; i < 6; i++)
			assert_int_equal(ml->m[i].crossed, crossed[i]);
	}
	assert_int_equal(ml->m[2].ripe_ns, ml->m[1].ripe_ns);
	free(ml);
}


/* Each crossing stream of a batch ripens with its own jitter (issue 11
 * item 5): two streams over the trigger in one batch keep their own
 * ripening times in the marker, the stream under the trigger its age
 * cap, and the marker ripens with the earliest. */
static void test_absorb_jitter_per_stream(void **state)
{
	struct efx *f = *state;
	static const struct absorb_policy pol = {
		.age_cap_ns = AGE_CAP, .trigger_bytes = 8u << 20, .linger_ns = 30 * NV_NS_PER_S,
	};
	const uint64_t M = 1u << 20;
	struct absorb_run runs[3] = { RUN(5, 0, 0, 1, 9 * M), RUN(6, 0, 0, 1, M),
				      RUN(7, 0, 0, 1, 9 * M) };
	struct absorb_slot slot = { .slot = 0, .footer_off = 1, .footer_len = 64, .nruns = 3,
				    .runs = runs };
	struct absorb_result res = { 0 };
	struct mk_list *ml = calloc(1, sizeof(*ml));
	struct meta_chain row;
	uint64_t ver, lo, hi, j5 = absorb_jitter_ns(5, pol.linger_ns),
			      j7 = absorb_jitter_ns(7, pol.linger_ns);

	assert_non_null(ml);
	assert_true(j5 != j7);
	for (int i = 0; i < 3; i++)
		runs[i].settled_byte = 0;
	row = mint(f->kv, &ver);
	lo = nv_now_wall_ns();
	assert_int_equal(absorb_commit_batch(f->kv, &row, &ver, &slot, 1, &pol, &res), 0);
	hi = nv_now_wall_ns();
	assert_int_equal(meta_marker_list(f->kv, 0, EFX_STAR, 1, mk_collect, ml), 0);
	assert_int_equal(ml->n, 1);
	assert_int_equal(ml->m[0].nstreams, 3);
	assert_int_equal(ml->m[0].crossed, 1);
	{
		const struct meta_marker *m = &ml->m[0];
		uint64_t b = m->birth_ns;

		assert_true(b >= lo && b <= hi);
		assert_int_equal(m->streams[0].ripe_ns, b + pol.linger_ns + j5);
		assert_int_equal(m->streams[1].ripe_ns, b + AGE_CAP);
		assert_int_equal(m->streams[2].ripe_ns, b + pol.linger_ns + j7);
		assert_int_equal(m->ripe_ns, b + pol.linger_ns + (j5 < j7 ? j5 : j7));
		assert_int_equal(res.ripe_ns, m->ripe_ns);
	}
	free(ml);
}


/* Recovery ripens each class's batches by that class's policy (issue 11
 * item 3): an express chain's recovered batch waits for the express age
 * cap, not the standard one, and a stream over the size trigger (its
 * un-settled bytes measured from its settled end) ripens at the linger
 * plus its jitter. */
static void test_absorb_recover_class_policy(void **state)
{
	struct efx *f = *state;
	struct recover_cfg rc = rcfg(f, f->kv, 8);
	struct meta_stream hot, slow;
	struct meta_chain row;
	struct mk_list *ml = calloc(1, sizeof(*ml));
	uint64_t ver, lo, hi;
	const uint64_t linger = 7 * NV_NS_PER_S, xcap = 120 * NV_NS_PER_S;

	assert_non_null(ml);
	assert_int_equal(meta_stream_create(f->kv, EFX_BUCKET, "hot", NV_CLASS_EXPRESS, 1, NULL, &hot), 0);
	assert_int_equal(meta_stream_create(f->kv, EFX_BUCKET, "slow", NV_CLASS_EXPRESS, 1, NULL, &slow),
			 0);
	rc.policy[NV_CLASS_STANDARD] = (struct absorb_policy){ .age_cap_ns = AGE_CAP };
	rc.policy[NV_CLASS_EXPRESS] = (struct absorb_policy){
		.age_cap_ns = xcap, .trigger_bytes = 1000, .linger_ns = linger,
	};
	assert_int_equal(meta_chain_mint(f->kv, NV_CLASS_EXPRESS, EFX_STAR, MINT_NS, &row, &ver), 0);
	{
		struct absorb_run r0[2] = { RUN(hot.id, 0, 0, 4, 600), RUN(slow.id, 0, 0, 1, 10) };
		struct absorb_run r1[1] = { RUN(hot.id, 4, 600, 4, 600) };

		if (hot.id > slow.id) {
			struct absorb_run t = r0[0];

			r0[0] = r0[1];
			r0[1] = t;
		}
		put_bundle_cls(f->store, NV_CLASS_EXPRESS, row.epoch, 0, r0, 2, NULL, NULL);
		put_bundle_cls(f->store, NV_CLASS_EXPRESS, row.epoch, 1, r1, 1, NULL, NULL);
	}
	lo = nv_now_wall_ns();
	assert_int_equal(recover_chain(&rc, NV_CLASS_EXPRESS, EFX_STAR, row.epoch), 0);
	hi = nv_now_wall_ns();
	assert_int_equal(meta_marker_list(f->kv, NV_CLASS_EXPRESS, EFX_STAR, row.epoch, mk_collect,
					  ml), 0);
	assert_int_equal(ml->n, 1);
	assert_int_equal(ml->m[0].nstreams, 2);
	for (uint32_t i = 0; i < 2; i++) {
		const struct meta_marker_stream *ms = &ml->m[0].streams[i];
		uint64_t b = ml->m[0].birth_ns;

		assert_true(b >= lo && b <= hi);
		if (ms->stream_id == hot.id)
			assert_int_equal(ms->ripe_ns, b + linger + absorb_jitter_ns(hot.id, linger));
		else
			assert_int_equal(ms->ripe_ns, b + xcap);
	}
	assert_int_equal(ml->m[0].crossed, 1);
	free(ml);
}


/* A batch of more streams than one marker can hold (issue 11 item 7) is
 * committed as consecutive batches whose markers fit the metastore's
 * value limit: two slots of 22,000 streams each (44,000 would make a
 * 1 MiB+ marker) become two markers, every ref is written, and the
 * checkpoint passes both slots. */
static void test_absorb_splits_huge_batch(void **state)
{
	struct efx *f = *state;
	const uint32_t per = 22000;
	struct absorb_run *runs = calloc(2 * per, sizeof(*runs));
	struct absorb_slot slots[2] = {
		{ .slot = 0, .footer_off = 1, .footer_len = 64, .nruns = per, .runs = runs },
		{ .slot = 1, .footer_off = 1, .footer_len = 64, .nruns = per, .runs = runs + per },
	};
	struct absorb_result res = { 0 };
	struct meta_chain row;
	uint64_t ver;

	assert_non_null(runs);
	for (uint32_t i = 0; i < 2 * per; i++)
		runs[i] = (struct absorb_run)RUN(1000 + i, 0, 0, 1, 10);
	row = mint(f->kv, &ver);
	assert_int_equal(absorb_commit_batch(f->kv, &row, &ver, slots, 2, &POLICY, &res), 0);
	assert_int_equal(row.checkpoint, 2);
	assert_int_equal(res.nrefs, 2 * per);
	assert_int_equal(res.end_slot, 2);
	assert_int_equal(efx_count_space(f->kv, "mrk"), 2);
	assert_int_equal(efx_count_space(f->kv, "ref"), 2 * per);
	free(runs);
}


/* The garbage probe above the cut covers the crashed writer's own put
 * window, recorded in its chain row (issue 11 item 11), not only the
 * probe window of the star that recovers (8 here): a slot 40 above the
 * cut of a writer with a window of 16 is reaped. */
static void test_absorb_recover_probe_writers_window(void **state)
{
	struct efx *f = *state;
	struct recover_cfg rc = rcfg(f, f->kv, 4);
	struct meta_chain row;
	uint64_t ver;

	row = mint(f->kv, &ver);
	row.put_window = 16;
	assert_int_equal(meta_chain_cas(f->kv, &row, ver), 0);
	put_bundle(f->store, 1, 0, SCN[0].runs, SCN[0].nruns, NULL, NULL);
	put_bundle(f->store, 1, 41, SCN[1].runs, SCN[1].nruns, NULL, NULL);
	assert_int_equal(recover_chain(&rc, 0, EFX_STAR, 1), 0);
	assert_true(slot_exists(f, 0));
	assert_false(slot_exists(f, 41)); /* cut 1: 41 is within 16 * 4 + 16 */
	{
		struct meta_chain got;

		assert_int_equal(meta_chain_get(f->kv, 0, EFX_STAR, 1, &got, NULL), 0);
		assert_int_equal(got.put_window, 16);
		assert_int_equal(got.cut, 1);
	}
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, efx_setup, efx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_absorb_commit_batch_rows),
		T(test_absorb_checkpoint_and_marker_atomic),
		T(test_absorb_idempotent_after_crash),
		T(test_absorb_rerun_different_boundaries),
		T(test_absorb_rerun_partial_ref_transactions),
		T(test_absorb_rejects_bad_batches),
		T(test_absorb_cas_conflict),
		T(test_absorb_live),
		T(test_absorb_live_stops_on_conflict),
		T(test_absorb_gives_up_at_close),
		T(test_absorb_recover_matches_live),
		T(test_absorb_recover_reaps_and_settles),
		T(test_absorb_recover_adopts_recorded_cut),
		T(test_absorb_recover_adopts_fence_object),
		T(test_absorb_recover_refuses_corrupt_slot),
		T(test_absorb_recover_crash_rerun),
		T(test_absorb_settle_rounds),
		T(test_absorb_jitter_per_stream),
		T(test_absorb_recover_class_policy),
		T(test_absorb_splits_huge_batch),
		T(test_absorb_recover_probe_writers_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
