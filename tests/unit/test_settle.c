/*
 * test_settle.c - unit tests of the group settle (engine/settle/).
 *
 * Streams are written by the real chain into the fake store and absorbed
 * into a real SQLite metastore (tests/unit/engine_fixture.h), one record
 * per slot and one slot per batch, so every record has its own span ref
 * and batch marker.  The settle runs over a fetch cache on the fake store,
 * either whole (settle_chain()) or phase by phase through the era and job
 * transitions of engine/settle/job.h, which a unit test reaches because
 * it links those functions directly.
 *
 * Every settled object is checked byte by byte: its trailer and footer
 * are parsed from the stored bytes, every chunk decoded, every record
 * compared with efx_fill() of its (stream, seq), and the seq/byte extents
 * compared with the catalog row that names it.
 *
 * Crashes are the failpoints settle.after_publish, settle.after_commit
 * and settle.before_resolve (error actions: the pass stops there, as a
 * crash would, and the next pass re-runs with the durable state only).
 */
#include "config.h"
#include "tests/unit/settle_fixture.h"
#include "tests/unit/fake_store.h"
#include "engine/bundle.h"
#include "engine/settle.h"
#include "engine/settle/job.h"
#include "meta/cursors.h"
#include "meta/keys.h"
#include "meta/leases.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ------------------------------------------------------------ harness */

/* Open an era at now through collect and judge. */
static void era_open(struct st *t, uint64_t now, struct era *e)
{
	struct meta_chain c = efx_chain_row(t->f);

	settle_era_init(e, &t->cfg, &c, now);
	assert_int_equal(settle_era_collect(e), 0);
	assert_int_equal(e->state, ERA_COLLECTED);
	assert_int_equal(e->walks, 1); /* the marker list is read once */
	assert_int_equal(settle_era_judge(e), 0);
	assert_int_equal(e->state, ERA_JUDGED);
}

static struct era_stream *era_find(struct era *e, uint64_t id)
{
	for (uint32_t i = 0; i < e->nstreams; i++)
		if (e->streams[i].id == id)
			return &e->streams[i];
	fail_msg("stream %llu not in the era", (unsigned long long)id);
	return NULL;
}

struct ripe_list {
	uint64_t ripe[256];
	unsigned n;
};

static int ripe_fn(void *arg, const struct meta_marker *m)
{
	struct ripe_list *l = arg;

	if (l->n < 256)
		l->ripe[l->n++] = m->ripe_ns;
	return 0;
}

struct marker_copies {
	struct meta_marker m[64];
	unsigned n;
};

/* Deep copies of up to 64 markers (the caller clears them). */
static int copy_marker_fn(void *arg, const struct meta_marker *m)
{
	struct marker_copies *c = arg;
	struct meta_marker *d;

	if (c->n == 64)
		return 1;
	d = &c->m[c->n++];
	*d = *m;
	d->streams = calloc(m->nstreams ? m->nstreams : 1, sizeof(*d->streams));
	if (!d->streams)
		return -ENOMEM;
	memcpy(d->streams, m->streams, m->nstreams * sizeof(*d->streams));
	return 0;
}

/* ===================================================== the era plan */

/* Which markers form the era and which streams qualify: the trigger
 * decides below the age cap, a deleted stream is dropped, nothing ripe
 * is no era, and the era stops at the last ripe marker. */
static void test_settle_era_plan(void **state)
{
	struct st t;
	struct era e;
	struct nv_stream *a, *b, *c;
	struct ripe_list rl = { .n = 0 };
	uint64_t far = nv_now_wall_ns() + 10 * 3600 * NV_NS_PER_S;
	uint32_t last = 0;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	c = efx_stream(t.f, "c", -1);
	efx_write_absorb(t.f, a, 0, 5, 1000);
	efx_write_absorb(t.f, b, 0, 2, 100);
	efx_write_absorb(t.f, c, 0, 3, 100);
	efx_write_absorb(t.f, a, 5, 2, 1000);
	assert_int_equal(meta_stream_delete(t.f->kv, c->id, nv_now_wall_ns()), 0);
	t.cfg.trigger_bytes = 5000;

	era_open(&t, far, &e);
	assert_int_equal(e.nmarks, 12);
	assert_int_equal(e.nstreams, 3);
	assert_int_equal(era_find(&e, a->id)->outcome, PENDING);
	assert_int_equal(era_find(&e, a->id)->bytes, 7000);
	assert_int_equal(era_find(&e, a->id)->nkeys, 7);
	for (uint32_t i = 0; i < 7; i++)
		assert_int_equal(era_find(&e, a->id)->keys[i], i);
	assert_int_equal(era_find(&e, b->id)->outcome, RESIDUE);
	assert_int_equal(era_find(&e, b->id)->bytes, 200);
	assert_int_equal(era_find(&e, c->id)->outcome, DROPPED);
	fetch_cache_clear(t.fc);
	settle_era_free(&e);

	/* Past the age cap everything standing qualifies. */
	t.cfg.age_cap_ns[t.f->o.cls] = 1;
	era_open(&t, far, &e);
	assert_int_equal(era_find(&e, b->id)->outcome, PENDING);
	assert_int_equal(era_find(&e, c->id)->outcome, DROPPED);
	fetch_cache_clear(t.fc);
	settle_era_free(&e);

	/* Nothing ripe: no era (and settle_chain() changes nothing). */
	{
		struct meta_chain ch = efx_chain_row(t.f);
		char *before = efx_kv_dump(t.f->kv, false), *after;

		settle_era_init(&e, &t.cfg, &ch, 1);
		assert_int_equal(settle_era_collect(&e), 0);
		assert_int_equal(e.state, ERA_NEW);
		fetch_cache_clear(t.fc);
	settle_era_free(&e);
		assert_int_equal(settle_now(&t, 1), 0);
		after = efx_kv_dump(t.f->kv, false);
		assert_string_equal(before, after);
		free(before);
		free(after);
	}

	/* The era ends at the last ripe marker. */
	assert_int_equal(meta_marker_list(t.f->kv, t.f->o.cls, EFX_STAR, t.f->row.epoch, ripe_fn,
					  &rl), 0);
	assert_int_equal(rl.n, 12);
	for (uint32_t i = 0; i < rl.n; i++)
		if (rl.ripe[i] <= rl.ripe[4])
			last = i;
	era_open(&t, rl.ripe[4], &e);
	assert_int_equal(e.nmarks, last + 1);
	assert_int_equal(e.nstreams, 1); /* a's first five records only */
	assert_int_equal(era_find(&e, a->id)->nkeys, last + 1);
	fetch_cache_clear(t.fc);
	settle_era_free(&e);

	/* The fetch budget bounds the era (at least one marker). */
	t.cfg.fetch_budget = 1;
	era_open(&t, far, &e);
	assert_int_equal(e.nmarks, 1);
	fetch_cache_clear(t.fc);
	settle_era_free(&e);
	st_stop(&t);
}

/* ===================================================== the window */

/* A job's window: the stream's span refs at the era's keys, contiguous,
 * their chunks covering it exactly; the plan puts them in one object, or
 * cuts at output_cap. */
static void test_settle_window(void **state)
{
	struct st t;
	struct era e;
	struct settle_job j;
	struct era_stream *es;
	struct nv_stream *a, *b;
	uint64_t seq = 0, comp = 0;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	efx_write_absorb(t.f, a, 0, 3, 500);
	efx_write_absorb(t.f, b, 0, 2, 50);
	efx_write_absorb(t.f, a, 3, 3, 700);
	era_open(&t, NOW_ALL, &e);
	assert_int_equal(settle_era_warm(&e), 0); /* jobs run on a warm era */
	es = era_find(&e, a->id);
	assert_int_equal(es->nkeys, 6);

	assert_int_equal(settle_job_init(&j, &e, es), 0);
	assert_int_equal(settle_job_resume(&j), 0);
	assert_int_equal(j.state, JOB_RESUMED);
	assert_int_equal(j.k0, 0);
	assert_int_equal(settle_job_load(&j), 0);
	assert_int_equal(j.state, JOB_LOADED);
	assert_int_equal(j.w.n, 6);
	for (uint32_t i = 0; i < j.w.n; i++) {
		assert_int_equal(j.w.refs[i].kind, META_REF_SPAN);
		assert_int_equal(j.w.refs[i].first_seq, i);
		if (i)
			assert_int_equal(j.w.refs[i].first_byte, j.w.refs[i - 1].end_byte);
	}
	assert_int_equal(j.w.refs[5].end_byte, 3 * 500 + 3 * 700);
	assert_false(j.have_prev);
	assert_true(j.nchunks >= 6);
	for (uint32_t i = 0; i < j.nchunks; i++) {
		assert_int_equal(j.chunks[i].e.stream_id, a->id);
		assert_int_equal(j.chunks[i].e.first_seq, seq);
		seq += j.chunks[i].e.nrec;
		comp += j.chunks[i].e.comp_len;
	}
	assert_int_equal(seq, 6);
	assert_true(j.max_ts > 0);

	assert_int_equal(settle_job_plan(&j), 0);
	assert_int_equal(j.state, JOB_PLANNED);
	assert_int_equal(j.nobjs, 1);
	assert_false(j.have_tail);
	assert_int_equal(j.objs[0].first_seq, 0);
	assert_int_equal(j.objs[0].rev, 0);
	assert_int_equal(j.objs[0].epoch, t.f->row.epoch);
	assert_int_equal(j.objs[0].nents, j.nchunks);
	assert_int_equal(j.objs[0].size, comp);
	settle_job_free(&j);

	/* An output cap below one chunk: one object per chunk. */
	t.cfg.output_cap_bytes = 1;
	assert_int_equal(settle_job_init(&j, &e, es), 0);
	assert_int_equal(settle_job_resume(&j), 0);
	assert_int_equal(settle_job_load(&j), 0);
	assert_int_equal(settle_job_plan(&j), 0);
	assert_int_equal(j.nobjs, j.nchunks);
	for (uint32_t i = 0; i < j.nobjs; i++)
		assert_int_equal(j.objs[i].first_seq, j.chunks[i].e.first_seq);
	settle_job_free(&j);
	fetch_cache_clear(t.fc);
	settle_era_free(&e);

	/* Nothing was written by any of it. */
	assert_int_equal(span_refs(t.f, a->id), 6);
	assert_int_equal(fake_store_count_objects(t.f->fs, "streams/"), 0);
	st_stop(&t);
}

/* ===================================================== a whole settle */

/* settle_chain(): every stream into one catalog row whose objects hold
 * every record, span refs and their twins gone, markers resolved, the
 * frontier advanced, the settled hook told; a second pass changes
 * nothing. */
static void test_settle_chain_whole(void **state)
{
	struct st t;
	struct nv_stream *a, *b;
	struct meta_cursors cur;
	char *before, *after;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	efx_write_absorb(t.f, a, 0, 5, 700);
	efx_write_absorb(t.f, b, 0, 4, 300);
	efx_write_absorb(t.f, a, 5, 3, 900);
	assert_int_equal(count_markers(t.f), 12);

	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	expect_settled(t.f, a->id, 8, 5 * 700 + 3 * 900, NULL);
	expect_settled(t.f, b->id, 4, 4 * 300, NULL);
	expect_twins(t.f);
	assert_int_equal(count_markers(t.f), 0);
	assert_int_equal(meta_cursors_get(t.f->kv, t.f->o.cls, EFX_STAR, t.f->row.epoch, &cur,
					  NULL), 0);
	assert_int_equal(cur.settle_frontier, efx_chain_row(t.f).checkpoint);
	assert_int_equal(NV_STAT_GET(&t.f->stats, settled_objects), 2);
	assert_int_equal(t.nsettled, 2);
	for (unsigned i = 0; i < 2; i++) {
		bool is_a = t.settled_id[i] == a->id;

		assert_true(is_a || t.settled_id[i] == b->id);
		assert_int_equal(t.settled_seq[i], is_a ? 8 : 4);
		assert_int_equal(t.settled_byte[i], is_a ? 5 * 700 + 3 * 900 : 4 * 300);
	}

	before = efx_kv_dump(t.f->kv, false);
	assert_int_equal(settle_now(&t, NOW_ALL), 0);
	after = efx_kv_dump(t.f->kv, false);
	assert_string_equal(before, after);
	free(before);
	free(after);
	st_stop(&t);
}

/* The lease version the catalog commit of a stream is told to compare
 * (issue 15): fence_ver[0] for stream fence_id[0], fence_ver[1] else. */
static uint64_t fence_id0, fence_ver[2];

static uint64_t fence_of(void *arg, uint64_t stream, const struct meta_chain *c)
{
	(void)arg;
	(void)c;
	return fence_ver[stream == fence_id0 ? 0 : 1];
}

/* settle_cfg.lease_ver: a catalog commit compares the stream's writer
 * lease, so a leader that lost a stream commits no catalog row of it
 * (its span refs stay); a stream whose lease it holds settles. */
static void test_settle_commit_compares_lease(void **state)
{
	struct st t;
	struct nv_stream *a, *b;
	struct meta_lease l;
	struct meta_ref r;
	char prev[META_STAR_MAX + 1];
	uint64_t lease, va, vb;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	efx_write_absorb(t.f, a, 0, 5, 700);
	efx_write_absorb(t.f, b, 0, 4, 300);
	assert_int_equal(kv_lease_grant(t.f->kv, 30, &lease), 0);
	assert_int_equal(meta_lease_take(t.f->kv, a->id, EFX_STAR, "", lease, &l, &va, prev), 0);
	assert_int_equal(meta_lease_take(t.f->kv, b->id, EFX_STAR, "", lease, &l, &vb, prev), 0);
	t.cfg.lease_ver = fence_of;
	fence_id0 = a->id;
	fence_ver[0] = va + 1000; /* a's lease moved on: another leader's */
	fence_ver[1] = vb;
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	meta_ref_init(&r);
	assert_int_equal(meta_ref_last(t.f->kv, a->id, &r), 0);
	assert_int_equal(r.kind, META_REF_SPAN); /* no catalog row for a */
	meta_ref_clear(&r);
	expect_settled(t.f, b->id, 4, 4 * 300, NULL);
	assert_int_equal(kv_lease_revoke(t.f->kv, lease), 0);
	st_stop(&t);
}

/* A second era extends the stream's standing sub-cap object: the next
 * revision holds old and new records, the catalog row keeps its key, and
 * the replaced object is queued for reclamation after the read grace. */
static void test_settle_tail_extension(void **state)
{
	struct st t;
	struct nv_stream *a;
	struct row r1, r2;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 400);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	expect_settled(t.f, a->id, 3, 1200, &r1);
	assert_int_equal(r1.nobjs, 1);
	assert_int_equal(r1.objs[0].rev, 0);
	assert_int_equal(efx_count_space(t.f->kv, "gc"), 0);

	efx_write_absorb(t.f, a, 3, 2, 400);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	expect_settled(t.f, a->id, 5, 2000, &r2);
	assert_int_equal(r2.nobjs, 1);
	assert_int_equal(r2.objs[0].rev, 1);
	assert_int_equal(r2.objs[0].first_seq, 0);
	assert_int_equal(r2.objs[0].epoch, r1.objs[0].epoch);
	assert_int_equal(efx_count_space(t.f->kv, "gc"), 1);
	expect_twins(t.f);
	st_stop(&t);
}

/* ===================================================== publish adoption */

/* A run stopped after publishing leaves an object no row names; the next
 * run adopts it (no second upload, no delete) because it holds exactly
 * the records of the window. */
static void test_settle_publish_adopts(void **state)
{
	struct st t;
	struct nv_stream *a;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 4, 600);

	assert_int_equal(nv_fp_arm("settle.after_publish=error"), 0);
	assert_true(settle_now(&t, NOW_ALL) >= 0);
	nv_fp_reset();
	assert_int_equal(span_refs(t.f, a->id), 4); /* rows untouched */
	assert_int_equal(count_markers(t.f), 4);
	assert_int_equal(fake_store_count_objects(t.f->fs, "streams/"), 1);
	assert_int_equal(NV_STAT_GET(&t.f->stats, settled_objects), 1);

	fake_store_reset_calls(t.f->fs);
	assert_int_equal(settle_now(&t, NOW_RETRY), 1);
	expect_settled(t.f, a->id, 4, 2400, NULL);
	assert_int_equal(NV_STAT_GET(&t.f->stats, settled_objects), 1); /* adopted */
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_DEL, "streams/"), 0);
	assert_int_equal(fake_store_count_objects(t.f->fs, "streams/"), 1);
	assert_int_equal(count_markers(t.f), 0);
	expect_twins(t.f);
	st_stop(&t);
}

/* A run stopped after publishing from a shorter window (an era bounded
 * by the fetch budget) leaves an object at the key the longer window
 * derives too, holding a prefix of its records.  The next run never
 * replaces it (issue 11 item 9): it commits those durable bytes, and the
 * rest of the window settles in a later era (a tail extension). */
static void test_settle_publish_keeps_shorter(void **state)
{
	struct st t;
	struct nv_stream *a;
	struct rows *rs = calloc(1, sizeof(*rs));

	assert_non_null(rs);
	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 600);

	t.cfg.fetch_budget = 1; /* an era of one marker: seq [0, 1) */
	assert_int_equal(nv_fp_arm("settle.after_publish=error"), 0);
	assert_true(settle_now(&t, NOW_ALL) >= 0);
	nv_fp_reset();
	assert_int_equal(fake_store_count_objects(t.f->fs, "streams/"), 1);
	assert_int_equal(span_refs(t.f, a->id), 3);

	t.cfg.fetch_budget = 64u << 20;
	fake_store_reset_calls(t.f->fs);
	assert_int_equal(settle_now(&t, NOW_RETRY), 1);
	get_rows(t.f->kv, a->id, rs);
	assert_int_equal(rs->n, 3); /* the catalog row [0, 1), span refs after it */
	assert_int_equal(rs->r[0].kind, META_REF_CATALOG);
	assert_int_equal(rs->r[0].end_seq, 1);
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_DEL, "streams/"), 0);
	assert_int_equal(NV_STAT_GET(&t.f->stats, settled_objects), 1);
	{
		uint64_t seq = 0, byte = 0;

		expect_object(t.f, a->id, &rs->r[0], 0, &seq, &byte);
	}
	while (settle_now(&t, NOW_RETRY + 2 * ERA_RETRY_NS) == 1)
		;
	expect_settled(t.f, a->id, 3, 1800, NULL);
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_DEL, "streams/"), 0);
	expect_twins(t.f);
	free(rs);
	st_stop(&t);
}

/* ===================================================== the commit CAS */

/* The pivot span ref changes between plan and commit: the CAS fails
 * -ECANCELED and writes nothing; the next pass settles cleanly, adopting
 * the object the cancelled job published. */
static void test_settle_commit_cas(void **state)
{
	struct st t;
	struct era e;
	struct settle_job j;
	struct nv_stream *a;
	char *before, *after;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 800);
	era_open(&t, NOW_ALL, &e);
	assert_int_equal(settle_era_warm(&e), 0);
	assert_int_equal(settle_job_init(&j, &e, era_find(&e, a->id)), 0);
	assert_int_equal(settle_job_resume(&j), 0);
	assert_int_equal(settle_job_load(&j), 0);
	assert_int_equal(settle_job_plan(&j), 0);
	assert_int_equal(settle_job_publish(&j), 0);
	assert_int_equal(j.state, JOB_PUBLISHED);

	/* A concurrent writer rewrites the pivot row (same value, new
	 * version). */
	{
		struct kv_txn *tx = kv_txn_new();

		assert_non_null(tx);
		assert_int_equal(meta_ref_txn_put(tx, &j.w.refs[0]), 0);
		assert_int_equal(kv_txn_commit(t.f->kv, tx, NULL), 0);
		kv_txn_free(tx);
	}
	before = efx_kv_dump(t.f->kv, false);
	assert_int_equal(settle_job_commit(&j), -ECANCELED);
	assert_int_equal(j.state, JOB_PUBLISHED);
	after = efx_kv_dump(t.f->kv, false);
	assert_string_equal(before, after);
	free(before);
	free(after);
	settle_job_free(&j);
	fetch_cache_clear(t.fc);
	settle_era_free(&e);
	assert_int_equal(span_refs(t.f, a->id), 3);

	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	expect_settled(t.f, a->id, 3, 2400, NULL);
	assert_int_equal(NV_STAT_GET(&t.f->stats, settled_objects), 1);
	assert_int_equal(count_markers(t.f), 0);
	expect_twins(t.f);
	st_stop(&t);
}

/* Two settlers of one chain (a star settling its own head after a
 * take recovered it, and the duty): B extends the tail row over the
 * window after A's job resumed but before A loads it, and B's span refs
 * are not deleted yet.  A must not commit a second row over the same
 * records (refs cover every record once: a later key ending lower would
 * make a take's frontier (the last ref's end) reuse acked seqs). */
static void test_settle_commit_after_concurrent_tail(void **state)
{
	struct st t;
	struct era ea, eb;
	struct settle_job ja, jb;
	struct nv_stream *a;
	struct rows *rs = calloc(1, sizeof(*rs)); /* big: not on the stack (valgrind) */

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 400);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	expect_settled(t.f, a->id, 3, 1200, NULL);
	efx_write_absorb(t.f, a, 3, 2, 400);

	era_open(&t, NOW_ALL, &ea);
	assert_int_equal(settle_era_warm(&ea), 0);
	assert_int_equal(settle_job_init(&ja, &ea, era_find(&ea, a->id)), 0);
	assert_int_equal(settle_job_resume(&ja), 0);
	assert_int_equal(ja.state, JOB_RESUMED);

	era_open(&t, NOW_ALL, &eb);
	assert_int_equal(settle_era_warm(&eb), 0);
	assert_int_equal(settle_job_init(&jb, &eb, era_find(&eb, a->id)), 0);
	assert_int_equal(settle_job_resume(&jb), 0);
	assert_int_equal(settle_job_load(&jb), 0);
	assert_int_equal(settle_job_plan(&jb), 0);
	assert_int_equal(settle_job_publish(&jb), 0);
	assert_int_equal(settle_job_commit(&jb), 0);
	assert_true(jb.have_tail);

	/* A goes on: its window is covered by B's row now. */
	{
		int rc = settle_job_load(&ja);

		if (!rc)
			rc = settle_job_plan(&ja);
		if (!rc)
			rc = settle_job_publish(&ja);
		if (!rc)
			rc = settle_job_commit(&ja);
		assert_int_equal(rc, -ECANCELED);
	}
	assert_int_equal(settle_job_finish(&jb), 0);
	settle_job_free(&ja);
	settle_job_free(&jb);
	fetch_cache_clear(t.fc);
	settle_era_free(&ea);
	settle_era_free(&eb);
	assert_non_null(rs);
	get_rows(t.f->kv, a->id, rs);
	assert_int_equal(rs->n, 1); /* one catalog row [0, 5), no overlap */
	expect_settled(t.f, a->id, 5, 2000, NULL);
	free(rs);
	st_stop(&t);
}

/* A tail extension also compares the window's first span ref: another
 * settler's row there (rewritten here: same value, new version) makes
 * the commit -ECANCELED with nothing written. */
static void test_settle_tail_commit_compares_first_ref(void **state)
{
	struct st t;
	struct era e;
	struct settle_job j;
	struct nv_stream *a;
	char *before, *after;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 400);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	efx_write_absorb(t.f, a, 3, 2, 400);
	era_open(&t, NOW_ALL, &e);
	assert_int_equal(settle_era_warm(&e), 0);
	assert_int_equal(settle_job_init(&j, &e, era_find(&e, a->id)), 0);
	assert_int_equal(settle_job_resume(&j), 0);
	assert_int_equal(settle_job_load(&j), 0);
	assert_int_equal(settle_job_plan(&j), 0);
	assert_int_equal(settle_job_publish(&j), 0);
	assert_true(j.have_tail);
	{
		struct kv_txn *tx = kv_txn_new();

		assert_non_null(tx);
		assert_int_equal(meta_ref_txn_put(tx, &j.w.refs[0]), 0);
		assert_int_equal(kv_txn_commit(t.f->kv, tx, NULL), 0);
		kv_txn_free(tx);
	}
	before = efx_kv_dump(t.f->kv, false);
	assert_int_equal(settle_job_commit(&j), -ECANCELED);
	after = efx_kv_dump(t.f->kv, false);
	assert_string_equal(before, after);
	free(before);
	free(after);
	settle_job_free(&j);
	fetch_cache_clear(t.fc);
	settle_era_free(&e);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	expect_settled(t.f, a->id, 5, 2000, NULL);
	expect_twins(t.f);
	st_stop(&t);
}

/* The job table runs a job through every state to DONE. */
static void test_settle_job_states(void **state)
{
	struct st t;
	struct era e;
	struct nv_stream *a;
	struct era_stream *es;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 2, 100);
	era_open(&t, NOW_ALL, &e);
	assert_int_equal(settle_era_warm(&e), 0);
	es = era_find(&e, a->id);
	assert_int_equal(es->outcome, PENDING);
	assert_int_equal(settle_stream(&e, es), 0);
	assert_int_equal(es->outcome, SETTLED);
	assert_int_equal(es->end_seq, 2);
	assert_int_equal(es->end_byte, 200);
	assert_int_equal(es->objects, 1);
	/* Run again on the same era: the earlier run's row is found. */
	es->outcome = PENDING;
	assert_int_equal(settle_stream(&e, es), 0);
	assert_int_equal(es->outcome, SETTLED);
	assert_int_equal(es->end_seq, 2);
	fetch_cache_clear(t.fc);
	settle_era_free(&e);
	expect_settled(t.f, a->id, 2, 200, NULL);
	st_stop(&t);
}

/* ===================================================== crash resume */

/* Stop the pass at failpoint fp, then re-run: the same catalog rows as
 * the first run's commit (nothing republished after the commit), every
 * span ref and twin gone, markers resolved. */
static void crash_resume(void **state, const char *fp, bool committed)
{
	struct st t;
	struct nv_stream *a, *b;
	struct row ra, rb, ra2, rb2;
	char spec[64];
	uint64_t objs;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	efx_write_absorb(t.f, a, 0, 3, 500);
	efx_write_absorb(t.f, b, 0, 2, 200);
	efx_write_absorb(t.f, a, 3, 2, 500);
	snprintf(spec, sizeof(spec), "%s=error", fp);
	assert_int_equal(nv_fp_arm(spec), 0);
	assert_true(settle_now(&t, NOW_ALL) != 0);
	nv_fp_reset();
	objs = NV_STAT_GET(&t.f->stats, settled_objects);
	assert_int_equal(objs, 2);
	assert_true(count_markers(t.f) > 0);
	if (committed) {
		struct rows *rs = calloc(1, sizeof(*rs));

		assert_non_null(rs);
		get_rows(t.f->kv, a->id, rs);
		assert_int_equal(rs->r[0].kind, META_REF_CATALOG);
		ra = rs->r[0];
		get_rows(t.f->kv, b->id, rs);
		assert_int_equal(rs->r[0].kind, META_REF_CATALOG);
		rb = rs->r[0];
		free(rs);
	}
	assert_int_equal(settle_now(&t, NOW_RETRY), 1);
	expect_settled(t.f, a->id, 5, 2500, &ra2);
	expect_settled(t.f, b->id, 2, 400, &rb2);
	if (committed) {
		expect_same_row(&ra, &ra2);
		expect_same_row(&rb, &rb2);
	}
	assert_int_equal(NV_STAT_GET(&t.f->stats, settled_objects), objs); /* none again */
	assert_int_equal(count_markers(t.f), 0);
	expect_twins(t.f);
	assert_int_equal(settle_now(&t, NOW_RETRY), 0);
	st_stop(&t);
}

static void test_settle_crash_after_publish(void **state)
{
	crash_resume(state, "settle.after_publish", false);
}

static void test_settle_crash_after_commit(void **state)
{
	crash_resume(state, "settle.after_commit", true);
}

static void test_settle_crash_before_resolve(void **state)
{
	crash_resume(state, "settle.before_resolve", true);
}

/* A crash between the commit and the clean-up, driven phase by phase:
 * the catalog row stands beside the covered span refs; the next run's
 * resume deletes them and calls the stream settled. */
static void test_settle_resume_phases(void **state)
{
	struct st t;
	struct era e;
	struct settle_job j;
	struct nv_stream *a;
	struct era_stream *es;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 4, 300);
	era_open(&t, NOW_ALL, &e);
	assert_int_equal(settle_era_warm(&e), 0);
	es = era_find(&e, a->id);
	assert_int_equal(settle_job_init(&j, &e, es), 0);
	assert_int_equal(settle_job_resume(&j), 0);
	assert_int_equal(settle_job_load(&j), 0);
	assert_int_equal(settle_job_plan(&j), 0);
	assert_int_equal(settle_job_publish(&j), 0);
	assert_int_equal(settle_job_commit(&j), 0);
	assert_int_equal(j.state, JOB_COMMITTED);
	settle_job_free(&j); /* the crash: no finish */
	assert_int_equal(span_refs(t.f, a->id), 3);

	assert_int_equal(settle_job_init(&j, &e, es), 0);
	assert_int_equal(settle_job_resume(&j), 0);
	assert_int_equal(j.state, JOB_DONE);
	assert_int_equal(es->outcome, SETTLED);
	assert_int_equal(es->end_seq, 4);
	assert_int_equal(es->end_byte, 1200);
	settle_job_free(&j);
	fetch_cache_clear(t.fc);
	settle_era_free(&e);
	assert_int_equal(span_refs(t.f, a->id), 0);
	expect_settled(t.f, a->id, 4, 1200, NULL);
	expect_twins(t.f);
	st_stop(&t);
}


/* ===================================================== era scheduling */

/* Set the ripening of stream id's part of every marker holding it (the
 * marker's ripe_ns follows: its first stream's), and crossed. */
static void set_ripe(struct efx *f, uint64_t id, uint64_t ripe, int crossed)
{
	struct marker_copies *rs = calloc(1, sizeof(*rs));

	assert_non_null(rs);
	assert_int_equal(meta_marker_list(f->kv, f->o.cls, EFX_STAR, f->row.epoch, copy_marker_fn,
					  rs), 0);
	for (unsigned i = 0; i < rs->n; i++) {
		struct meta_marker *m = &rs->m[i];
		bool has = false;

		for (uint32_t k = 0; k < m->nstreams; k++)
			if (m->streams[k].stream_id == id) {
				m->streams[k].ripe_ns = ripe;
				has = true;
			}
		if (has) {
			struct kv_txn *tx = kv_txn_new();

			m->ripe_ns = UINT64_MAX;
			for (uint32_t k = 0; k < m->nstreams; k++)
				if (m->streams[k].ripe_ns < m->ripe_ns)
					m->ripe_ns = m->streams[k].ripe_ns;
			m->crossed = (uint8_t)crossed;
			assert_non_null(tx);
			assert_int_equal(meta_marker_txn_put(tx, m), 0);
			assert_int_equal(kv_txn_commit(f->kv, tx, NULL), 0);
			kv_txn_free(tx);
		}
		meta_marker_clear(m);
	}
	free(rs);
}

/* Item 1 of the density issue: markers of a trickling stream wait for
 * their age cap at the front of the chain; the ripe markers of a hot
 * stream behind them still form eras, even when the fetch budget (or
 * ERA_MARKERS_MAX) would be spent on the waiting ones first. */
static void test_settle_era_skips_waiting(void **state)
{
	struct st t;
	struct nv_stream *a, *b;
	uint64_t now = nv_now_wall_ns();
	int rounds = 0, rc;

	st_start(*state, &t);
	b = efx_stream(t.f, "b", -1);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, b, 0, 2, 100);
	efx_write_absorb(t.f, a, 0, 3, 700);
	set_ripe(t.f, b->id, now + 3600 * NV_NS_PER_S, 0); /* waits for its cap */
	set_ripe(t.f, a->id, now - 1, 1);                  /* ripened */
	t.cfg.trigger_bytes = 500;
	t.cfg.fetch_budget = 1; /* one marker per era */
	while ((rc = settle_now(&t, now)) == 1)
		rounds++;
	assert_int_equal(rc, 0);
	assert_true(rounds >= 1);
	expect_settled(t.f, a->id, 3, 2100, NULL);
	assert_int_equal(span_refs(t.f, b->id), 2); /* untouched */
	assert_int_equal(count_markers(t.f), 2);
	expect_twins(t.f);
	st_stop(&t);
}

/* Item 2: only the slots of markers holding a stream that settles are
 * warmed.  A ripe era of residue alone stages nothing; beside a settling
 * stream, the residue-only marker's slot is not read. */
static void test_settle_warm_only_qualifying(void **state)
{
	struct st t;
	struct nv_stream *a, *b;
	uint64_t now = nv_now_wall_ns();
	char prefix[CHAIN_KEY_MAX];

	st_start(*state, &t);
	efx_chain_prefix(t.f, prefix);
	b = efx_stream(t.f, "b", -1);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, b, 0, 2, 100);
	set_ripe(t.f, b->id, now - 1, 1);
	t.cfg.trigger_bytes = 1u << 20;
	fake_store_reset_calls(t.f->fs);
	assert_int_equal(settle_now(&t, now), 1); /* markers re-ripen at the cap */
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_GET, prefix), 0);
	assert_int_equal(span_refs(t.f, b->id), 2);

	/* a's two markers settle; b's third marker (ripe, residue) is not
	 * staged. */
	efx_write_absorb(t.f, a, 0, 2, 600);
	efx_write_absorb(t.f, b, 2, 1, 100);
	set_ripe(t.f, a->id, now - 1, 1);
	set_ripe(t.f, b->id, now - 1, 1);
	t.cfg.trigger_bytes = 1000;
	fake_store_reset_calls(t.f->fs);
	assert_int_equal(settle_now(&t, now), 1);
	expect_settled(t.f, a->id, 2, 1200, NULL);
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_GET, prefix), 2);
	assert_int_equal(span_refs(t.f, b->id), 3);
	st_stop(&t);
}


/* A due stream takes its earlier batches along: a's first two batches
 * wait for their age cap (under the trigger when written), its third
 * crossed and ripened; the era holds all three (and settles a whole)
 * but not b's waiting marker between them, which stays as it was. */
static void test_settle_era_takes_earlier_batches(void **state)
{
	struct st t;
	struct nv_stream *a, *b;
	uint64_t now = nv_now_wall_ns(), later = now + 3600 * NV_NS_PER_S;
	char *before, *after;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	efx_write_absorb(t.f, a, 0, 2, 400);
	efx_write_absorb(t.f, b, 0, 1, 100);
	efx_write_absorb(t.f, a, 2, 1, 400);
	set_ripe(t.f, a->id, later, 0);
	set_ripe(t.f, b->id, later, 0);
	{
		/* a's last batch ripened by its round. */
		struct marker_copies *mc = calloc(1, sizeof(*mc));
		struct kv_txn *tx = kv_txn_new();

		assert_non_null(mc);
		assert_non_null(tx);
		assert_int_equal(meta_marker_list(t.f->kv, t.f->o.cls, EFX_STAR, t.f->row.epoch,
						  copy_marker_fn, mc), 0);
		assert_int_equal(mc->n, 4);
		mc->m[3].streams[0].ripe_ns = mc->m[3].ripe_ns = now - 1;
		mc->m[3].crossed = 1;
		assert_int_equal(meta_marker_txn_put(tx, &mc->m[3]), 0);
		assert_int_equal(kv_txn_commit(t.f->kv, tx, NULL), 0);
		kv_txn_free(tx);
		for (unsigned i = 0; i < mc->n; i++)
			meta_marker_clear(&mc->m[i]);
		free(mc);
	}
	before = efx_kv_dump_space(t.f->kv, "mrk", false);
	t.cfg.trigger_bytes = 1200;
	assert_int_equal(settle_now(&t, now), 1);
	expect_settled(t.f, a->id, 3, 1200, NULL);
	assert_int_equal(span_refs(t.f, b->id), 1);
	assert_int_equal(count_markers(t.f), 1);
	after = efx_kv_dump_space(t.f->kv, "mrk", false);
	assert_non_null(strstr(before, after)); /* b's marker, unchanged */
	free(before);
	free(after);
	assert_int_equal(settle_now(&t, now), 0);
	st_stop(&t);
}


/* Era coalescing (engine/settle/era.c invariant 4), on a fake clock: the
 * markers of a, b and c ripen within one coalescing interval P; a pass
 * before a's marker has been ripe for P starts nothing (no job, no row
 * or marker touched), the pass at T0 + P settles all three in one era. */
#define COALESCE_NS (1000 * NV_NS_PER_MS)

static void test_settle_era_coalesces(void **state)
{
	struct st t;
	struct nv_stream *a, *b, *c;
	uint64_t t0 = nv_now_wall_ns() + 60 * NV_NS_PER_S, P = COALESCE_NS;
	char *before, *after;

	st_start(*state, &t);
	t.cfg.coalesce_ns = P;
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	c = efx_stream(t.f, "c", -1);
	efx_write_absorb(t.f, a, 0, 2, 300);
	efx_write_absorb(t.f, b, 0, 1, 200);
	efx_write_absorb(t.f, c, 0, 2, 100);
	set_ripe(t.f, a->id, t0, 1);
	set_ripe(t.f, b->id, t0 + 3 * P / 10, 1);
	set_ripe(t.f, c->id, t0 + 7 * P / 10, 1);
	before = efx_kv_dump_space(t.f->kv, "mrk", false);

	assert_int_equal(settle_now(&t, t0 - 1), 0);         /* nothing ripe */
	assert_int_equal(settle_now(&t, t0), 0);             /* a: ripe for 0 */
	assert_int_equal(settle_now(&t, t0 + P / 2), 0);     /* a and b ripe */
	assert_int_equal(settle_now(&t, t0 + P - 1), 0);     /* all three */
	assert_int_equal(NV_STAT_GET(&t.f->stats, settle_jobs), 0);
	assert_int_equal(span_refs(t.f, a->id), 2);
	assert_int_equal(span_refs(t.f, b->id), 1);
	assert_int_equal(span_refs(t.f, c->id), 2);
	after = efx_kv_dump_space(t.f->kv, "mrk", false);
	assert_string_equal(before, after); /* the markers, untouched */
	free(before);
	free(after);

	/* a ripe for P: one era takes every marker ripe by now. */
	assert_int_equal(settle_now(&t, t0 + P), 1);
	assert_int_equal(NV_STAT_GET(&t.f->stats, settle_jobs), 1);
	expect_settled(t.f, a->id, 2, 600, NULL);
	expect_settled(t.f, b->id, 1, 200, NULL);
	expect_settled(t.f, c->id, 2, 200, NULL);
	assert_int_equal(count_markers(t.f), 0);
	assert_int_equal(settle_now(&t, t0 + P), 0);
	assert_int_equal(NV_STAT_GET(&t.f->stats, settle_jobs), 1);
	expect_twins(t.f);
	st_stop(&t);
}

/* No starvation: while a's marker waits to coalesce, a new stream's
 * marker ripens every P / 4, the last one at the very pass; the era
 * still starts once a's marker has been ripe for P (the wait counts
 * from the first ripe marker, not from the last), and takes them all.
 * A marker ripening after that era waits its own P.  An era that is
 * already full (here the fetch budget: one marker) starts at once. */
static void test_settle_era_coalesce_no_starvation(void **state)
{
	struct st t;
	struct nv_stream *a, *b[4], *c, *d;
	uint64_t t0 = nv_now_wall_ns() + 60 * NV_NS_PER_S, P = COALESCE_NS;

	st_start(*state, &t);
	t.cfg.coalesce_ns = P;
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 1, 300);
	set_ripe(t.f, a->id, t0, 1);
	for (unsigned k = 0; k < 4; k++) {
		uint64_t now = t0 + (k + 1) * P / 4;
		char nm[8];

		snprintf(nm, sizeof(nm), "b%u", k);
		b[k] = efx_stream(t.f, nm, -1);
		efx_write_absorb(t.f, b[k], 0, 1, 100 + k);
		set_ripe(t.f, b[k]->id, now, 1); /* ripe just now */
		assert_int_equal(settle_now(&t, now), k < 3 ? 0 : 1);
		assert_int_equal(NV_STAT_GET(&t.f->stats, settle_jobs), k < 3 ? 0 : 1);
	}
	expect_settled(t.f, a->id, 1, 300, NULL);
	for (unsigned k = 0; k < 4; k++)
		expect_settled(t.f, b[k]->id, 1, 100 + k, NULL);
	assert_int_equal(count_markers(t.f), 0);

	/* The next era's own interval, from its own first ripe marker. */
	c = efx_stream(t.f, "c", -1);
	efx_write_absorb(t.f, c, 0, 1, 50);
	set_ripe(t.f, c->id, t0 + 5 * P / 4, 1);
	assert_int_equal(settle_now(&t, t0 + 2 * P), 0);
	assert_int_equal(span_refs(t.f, c->id), 1);
	assert_int_equal(settle_now(&t, t0 + 9 * P / 4), 1);
	expect_settled(t.f, c->id, 1, 50, NULL);
	assert_int_equal(NV_STAT_GET(&t.f->stats, settle_jobs), 2);

	/* A full era does not wait. */
	d = efx_stream(t.f, "d", -1);
	efx_write_absorb(t.f, d, 0, 2, 70);
	set_ripe(t.f, d->id, t0 + 3 * P, 1);
	t.cfg.fetch_budget = 1;
	assert_int_equal(settle_now(&t, t0 + 3 * P), 1);
	assert_int_equal(NV_STAT_GET(&t.f->stats, settle_jobs), 3);
	assert_int_equal(count_markers(t.f), 1); /* d's second: the next era's */
	t.cfg.fetch_budget = 64u << 20;
	assert_int_equal(settle_now(&t, t0 + 3 * P), 0); /* not full: coalesces */
	assert_int_equal(settle_now(&t, t0 + 4 * P), 1);
	expect_settled(t.f, d->id, 2, 140, NULL);
	assert_int_equal(count_markers(t.f), 0);
	expect_twins(t.f);
	st_stop(&t);
}

/* A failing era backs off (issue 11 item 4): 1 s, doubling, capped at
 * 60 s; a pass that does not fail ends it. */
static void test_settle_backoff(void **state)
{
	struct settle_backoff b = { 0 };
	uint64_t t = 1000 * NV_NS_PER_S, want = SETTLE_BACKOFF_MIN_NS;

	(void)state;
	assert_true(settle_backoff_ready(&b, t));
	for (int i = 1; i <= 10; i++) {
		settle_backoff_note(&b, -EIO, t);
		assert_int_equal(b.failures, i);
		assert_int_equal(b.last_err, -EIO);
		assert_int_equal(b.next_ns, t + want);
		assert_false(settle_backoff_ready(&b, t + want - 1));
		assert_true(settle_backoff_ready(&b, t + want));
		t += want;
		want = want * 2 > SETTLE_BACKOFF_MAX_NS ? SETTLE_BACKOFF_MAX_NS : want * 2;
	}
	assert_int_equal(b.next_ns - (t - SETTLE_BACKOFF_MAX_NS), SETTLE_BACKOFF_MAX_NS);
	settle_backoff_note(&b, 0, t);
	assert_int_equal(b.failures, 0);
	assert_true(settle_backoff_ready(&b, t));
	settle_backoff_note(&b, 1, t);
	assert_true(settle_backoff_ready(&b, t));
}


/* The settle frontier (DESIGN.md section 4 invariant 6; issue 11 item
 * 12), checked after every era over rounds of settling beside a residue
 * stream: it only advances; no marker stands below it; no span ref of
 * any stream names a slot below it (everything there is settled, so no
 * settle actor has anything left to write there). */
struct frontier_check {
	uint64_t front;
	int bad;
};

static int below_front_marker(void *arg, const struct meta_marker *m)
{
	struct frontier_check *fc = arg;

	fc->bad += m->first_slot < fc->front;
	return 0;
}

static int below_front_ref(void *arg, const struct meta_ref *r)
{
	struct frontier_check *fc = arg;

	for (uint32_t i = 0; r->kind == META_REF_SPAN && i < r->nslots; i++)
		fc->bad += r->slots[i].slot < fc->front;
	return 0;
}

static uint64_t expect_frontier(struct st *t, uint64_t was, const uint64_t *ids, unsigned n)
{
	struct frontier_check fc = { 0 };
	struct meta_cursors cur;

	assert_int_equal(meta_cursors_get(t->f->kv, t->f->o.cls, EFX_STAR, t->f->row.epoch, &cur,
					  NULL), 0);
	assert_true(cur.settle_frontier >= was);
	fc.front = cur.settle_frontier;
	assert_int_equal(meta_marker_list(t->f->kv, t->f->o.cls, EFX_STAR, t->f->row.epoch,
					  below_front_marker, &fc), 0);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(meta_ref_list(t->f->kv, ids[i], 0, 0, below_front_ref, &fc), 0);
	assert_int_equal(fc.bad, 0);
	return cur.settle_frontier;
}

static void test_settle_frontier_pinned(void **state)
{
	struct st t;
	struct nv_stream *a, *b;
	uint64_t ids[2], front = 0, now = nv_now_wall_ns();

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	ids[0] = a->id;
	ids[1] = b->id;
	t.cfg.trigger_bytes = 1000;
	efx_write_absorb(t.f, a, 0, 2, 600);
	efx_write_absorb(t.f, b, 0, 1, 100); /* residue: holds the frontier */
	efx_write_absorb(t.f, a, 2, 2, 600);
	set_ripe(t.f, a->id, now - 1, 1);
	set_ripe(t.f, b->id, now + 3600 * NV_NS_PER_S, 0);
	for (int round = 0; round < 3; round++) {
		while (settle_now(&t, now) == 1)
			;
		front = expect_frontier(&t, front, ids, 2);
		efx_write_absorb(t.f, a, 4 + 2 * (uint64_t)round, 2, 600);
		set_ripe(t.f, a->id, now - 1, 1);
	}
	assert_int_equal(front, 2); /* b's marker */
	/* b reaches its cap: everything settles, the frontier passes it. */
	now = nv_now_wall_ns() + NV_NS_PER_S;
	set_ripe(t.f, b->id, now - 1, 0);
	t.cfg.age_cap_ns[t.f->o.cls] = 1;
	while (settle_now(&t, now) == 1)
		;
	front = expect_frontier(&t, front, ids, 2);
	assert_int_equal(front, efx_chain_row(t.f).checkpoint);
	assert_int_equal(count_markers(t.f), 0);
	st_stop(&t);
}


#define T(fn) cmocka_unit_test_setup_teardown(fn, efx_setup, efx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_settle_era_plan),
		T(test_settle_window),
		T(test_settle_chain_whole),
		T(test_settle_tail_extension),
		T(test_settle_publish_adopts),
		T(test_settle_publish_keeps_shorter),
		T(test_settle_commit_cas),
		T(test_settle_commit_after_concurrent_tail),
		T(test_settle_tail_commit_compares_first_ref),
		T(test_settle_job_states),
		T(test_settle_crash_after_publish),
		T(test_settle_crash_after_commit),
		T(test_settle_crash_before_resolve),
		T(test_settle_resume_phases),
		T(test_settle_era_skips_waiting),
		T(test_settle_warm_only_qualifying),
		T(test_settle_era_takes_earlier_batches),
		T(test_settle_era_coalesces),
		T(test_settle_era_coalesce_no_starvation),
		cmocka_unit_test(test_settle_backoff),
		T(test_settle_frontier_pinned),
		T(test_settle_commit_compares_lease),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
