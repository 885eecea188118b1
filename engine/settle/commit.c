/*
 * commit.c - the catalog row of one stream's window: the job's PUBLISHED
 * -> COMMITTED -> DONE transitions (engine/settle/job.h), and
 * settle_stream(), which runs a job through the table of job.h.
 *
 * For: building the catalog row that covers the window (extending the
 * standing tail row when the plan did), the one CAS that makes settled
 * bytes visible (settle.h invariant 1), queueing a replaced tail object
 * for reclamation, and deleting the span refs the row now covers.  Not
 * for: the window (window.c) or the objects (publish.c).
 *
 * Invariants:
 *  1. The CAS is on the pivot row (the window's first span ref, or the
 *     catalog row holding the tail object) at the version read, and on
 *     the row on the other side of the window's start (with a tail, the
 *     first span ref; without, a catalog row before the window): two
 *     settlers of one chain (a star's own head and the duty, or two duty
 *     holders) may commit the same records, one extending the tail and
 *     one at the span ref.  Either that moved since makes the job
 *     -ECANCELED with nothing written, and the next pass re-runs it.
 *  2. The covered span refs are deleted only after the CAS, ascending,
 *     each with its byte twin; a crash in between is resumed by
 *     settle_job_resume().
 *  3. A window whose objects do not fit one catalog row (META_REF_OBJS_MAX)
 *     gets several: the pivot row takes the first objects, each
 *     non-pivot row the next META_REF_OBJS_MAX, keyed at its first
 *     object's seq.  The non-pivot rows are written before the CAS
 *     (settlement.txt: "the job creates any non-pivot catalog rows,
 *     then compare-and-swaps"): they name published objects holding the
 *     same bytes as the span refs under them, so a reader finds either.
 *     One that replaced a span ref of the window ends a re-run's window
 *     there (settle_job_load()), and settle_catalog_end() counts it, and
 *     the rows after it, as settled.
 *
 * Threads: a job is its worker's own (job.h).
 */
#include "config.h"
#include "engine/settle/job.h"
#include "meta/cursors.h"
#include "meta/leases.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Row r (first_seq and first_byte set) takes o. */
static int row_add(struct meta_ref *r, const struct meta_ref_obj *o)
{
	if (o->max_ts > r->max_ts)
		r->max_ts = o->max_ts;
	return meta_ref_add_obj(r, o);
}

/* A fresh catalog row of the job's stream starting at object o. */
static void row_start(const struct settle_job *j, struct meta_ref *r,
		      const struct meta_ref_obj *o)
{
	meta_ref_init(r);
	r->stream_id = j->es->id;
	r->kind = META_REF_CATALOG;
	snprintf(r->bucket, sizeof(r->bucket), "%s", j->es->row.bucket);
	r->first_seq = o->first_seq;
	r->first_byte = o->first_byte;
}

/* Object o of the job's catalog rows: a full row ends where o starts
 * and the next row (a non-pivot row, j->extra) starts with it. */
static int rows_add(struct settle_job *j, const struct meta_ref_obj *o)
{
	struct meta_ref *last = j->nextra ? &j->extra[j->nextra - 1] : &j->row;

	if (last->nobjs == META_REF_OBJS_MAX) {
		struct meta_ref *p;

		last->end_seq = o->first_seq;
		last->end_byte = o->first_byte;
		p = realloc(j->extra, (j->nextra + 1) * sizeof(*p));
		if (!p)
			return -ENOMEM;
		j->extra = p;
		last = &j->extra[j->nextra++];
		row_start(j, last, o);
	}
	return row_add(last, o);
}

/*
 * The catalog rows covering the window: the pivot row into j->row (sets
 * j->pivot_seq), and, when the window's objects do not fit one row, the
 * non-pivot rows after it into j->extra, each full but the last (invariant
 * 3).
 */
static int build_rows(struct settle_job *j)
{
	const struct window *w = &j->w;
	const struct meta_ref *prev = &j->prev;
	struct meta_ref *row = &j->row;
	struct meta_ref *last;
	int rc = 0;

	row->stream_id = j->es->id;
	row->kind = META_REF_CATALOG;
	snprintf(row->bucket, sizeof(row->bucket), "%s", j->es->row.bucket);
	if (j->have_tail) {
		j->pivot_seq = prev->first_seq;
		row->first_seq = prev->first_seq;
		row->first_byte = prev->first_byte;
		row->max_ts = prev->max_ts;
		for (uint32_t i = 0; !rc && i + 1 < prev->nobjs; i++)
			rc = row_add(row, &prev->objs[i]);
	} else {
		j->pivot_seq = w->refs[0].first_seq;
		row->first_seq = w->refs[0].first_seq;
		row->first_byte = w->refs[0].first_byte;
	}
	for (uint32_t i = 0; !rc && i < j->nobjs; i++) {
		const struct plan_obj *o = &j->objs[i];
		struct meta_ref_obj ro = {
			.first_seq = o->first_seq, .first_byte = o->first_byte,
			.epoch = o->epoch, .rev = o->rev,
			.footer_off = o->footer_off, .footer_len = o->footer_len,
			.max_ts = o->max_ts,
		};

		rc = rows_add(j, &ro);
	}
	last = j->nextra ? &j->extra[j->nextra - 1] : row;
	last->end_seq = w->refs[w->n - 1].end_seq;
	last->end_byte = w->refs[w->n - 1].end_byte;
	return rc;
}

/* The non-pivot rows, before the CAS (invariant 3): one transaction
 * each (a row of META_REF_OBJS_MAX objects is a large value). */
static int put_extra_rows(const struct settle_job *j)
{
	int rc = 0;

	for (uint32_t i = 0; !rc && i < j->nextra; i++) {
		struct kv_txn *t = kv_txn_new();

		if (!t)
			return -ENOMEM;
		rc = meta_ref_txn_put(t, &j->extra[i]);
		if (!rc)
			rc = kv_txn_commit(j->e->cfg->kv, t, NULL);
		kv_txn_free(t);
	}
	return rc;
}

/* The pivot row's version now, if it is still the row the plan read:
 * 0 and *ver, -ECANCELED when it moved, or -errno. */
static int pivot_version(const struct settle_job *j, uint64_t *ver)
{
	struct meta_ref cur;
	int rc;

	meta_ref_init(&cur);
	rc = meta_ref_get(j->e->cfg->kv, j->es->id, j->pivot_seq, &cur, ver);
	if (!rc && j->have_tail && cur.end_seq != j->prev.end_seq)
		rc = -ECANCELED; /* the catalog row moved since we read it */
	if (!rc && !j->have_tail && *ver != j->w.vers[0])
		rc = -ECANCELED;
	meta_ref_clear(&cur);
	return rc;
}

/* The other row the CAS compares (invariant 1): with a tail, the
 * window's first span ref at the version the window read; without one,
 * a catalog row before the window, at its version now if it still ends
 * where the window starts.  0 and *key, *ver (*key UINT64_MAX: none),
 * -ECANCELED when it moved, or -errno. */
static int second_version(const struct settle_job *j, uint64_t *key, uint64_t *ver)
{
	struct meta_ref cur;
	int rc;

	*key = UINT64_MAX;
	if (j->have_tail) {
		*key = j->w.refs[0].first_seq;
		*ver = j->w.vers[0];
		return 0;
	}
	if (!j->have_prev || j->prev.kind != META_REF_CATALOG)
		return 0;
	meta_ref_init(&cur);
	rc = meta_ref_get(j->e->cfg->kv, j->es->id, j->prev.first_seq, &cur, ver);
	if (rc == -ENOENT || (!rc && (cur.kind != META_REF_CATALOG ||
				      cur.end_seq != j->prev.end_seq)))
		rc = -ECANCELED; /* another settler extended or re-keyed it */
	meta_ref_clear(&cur);
	if (!rc)
		*key = j->prev.first_seq;
	return rc;
}

/* PUBLISHED -> COMMITTED: the one CAS (invariant 1). */
int settle_job_commit(struct settle_job *j)
{
	const struct settle_cfg *cfg = j->e->cfg;
	struct kv_txn *t;
	uint64_t pivot_ver, key2, ver2 = 0;
	int rc;

	assert_job_state(j, JOB_PUBLISHED);
	rc = build_rows(j);
	if (!rc)
		rc = pivot_version(j, &pivot_ver);
	if (!rc)
		rc = second_version(j, &key2, &ver2);
	if (!rc && j->nextra)
		rc = put_extra_rows(j);
	if (!rc && j->nextra)
		rc = NV_FP("settle.after_rows");
	if (rc)
		return rc;
	t = kv_txn_new();
	if (!t)
		return -ENOMEM;
	rc = meta_ref_txn_cmp_ver(t, j->es->id, j->pivot_seq, pivot_ver);
	if (!rc && key2 != UINT64_MAX)
		rc = meta_ref_txn_cmp_ver(t, j->es->id, key2, ver2);
	if (!rc && cfg->lease_ver) { /* a former leader commits nothing */
		uint64_t lv = cfg->lease_ver(cfg->arg, j->es->id, &j->e->chain);

		if (lv)
			rc = meta_lease_txn_cmp(t, j->es->id, lv);
	}
	if (!rc)
		rc = meta_ref_txn_put(t, &j->row);
	if (!rc && j->have_tail)
		rc = meta_reclaim_txn_add(t, nv_now_wall_ns() + cfg->read_grace_ns, j->tail_key);
	if (!rc)
		rc = kv_txn_commit(cfg->kv, t, NULL);
	kv_txn_free(t);
	if (!rc)
		rc = NV_FP("settle.after_commit");
	if (!rc)
		j->state = JOB_COMMITTED;
	return rc;
}

/* COMMITTED -> DONE (SETTLED): the covered span refs go (invariant 2). */
int settle_job_finish(struct settle_job *j)
{
	struct era_stream *es = j->es;
	uint64_t end_seq, end_byte;
	int rc;

	assert_job_state(j, JOB_COMMITTED);
	end_seq = j->w.refs[j->w.n - 1].end_seq;
	end_byte = j->w.refs[j->w.n - 1].end_byte;
	/* Non-pivot rows of an earlier run may stand right after the
	 * window (settle_job_load() stopped there): they are settled too. */
	rc = settle_catalog_end(j->e->cfg, es->id, &end_seq, &end_byte);
	if (!rc)
		rc = settle_delete_covered(j->e->cfg, es->id, es->keys, es->nkeys, end_seq,
					   j->pivot_seq);
	if (rc)
		return rc;
	settle_job_done(j, SETTLED);
	es->end_seq = end_seq;
	es->end_byte = end_byte;
	es->objects = j->nobjs;
	nv_log(NV_DEBUG, NV_SUB_SETTLE, "stream %llu (%s/%s): seq [%llu, %llu) settled into %u "
	       "object(s)%s", (unsigned long long)es->id, es->row.bucket, es->row.name,
	       (unsigned long long)j->w.refs[0].first_seq, (unsigned long long)end_seq,
	       j->nobjs, j->have_tail ? " extending the tail" : "");
	return 0;
}

/* any -> DONE (RESIDUE): the job failed with rc; the next pass retries. */
static void settle_job_fail(struct settle_job *j, int rc)
{
	if (rc != -ECANCELED)
		nv_log(NV_WARN, NV_SUB_SETTLE, "stream %llu: settle failed (%s); retried later",
		       (unsigned long long)j->es->id, strerror(-rc));
	settle_job_done(j, RESIDUE);
}

/* The transition out of each state short of DONE (job.h's table). */
static int (*const job_step[JOB_DONE])(struct settle_job *) = {
	[JOB_NEW] = settle_job_resume,
	[JOB_RESUMED] = settle_job_load,
	[JOB_LOADED] = settle_job_plan,
	[JOB_PLANNED] = settle_job_publish,
	[JOB_PUBLISHED] = settle_job_commit,
	[JOB_COMMITTED] = settle_job_finish,
};

int settle_stream(struct era *e, struct era_stream *es)
{
	struct settle_job j;
	int rc = settle_job_init(&j, e, es);

	while (!rc && j.state != JOB_DONE)
		rc = job_step[j.state](&j);
	if (rc)
		settle_job_fail(&j, rc);
	settle_job_free(&j);
	return rc;
}
