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
 *     catalog row holding the tail object) at the version read; a pivot
 *     that moved since makes the job -ECANCELED with nothing written,
 *     and the next pass re-runs it.
 *  2. The covered span refs are deleted only after the CAS, ascending,
 *     each with its byte twin; a crash in between is resumed by
 *     settle_job_resume().
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
#include <string.h>

/* The catalog row covering the window, into j->row; sets j->pivot_seq. */
static int build_row(struct settle_job *j)
{
	const struct window *w = &j->w;
	const struct meta_ref *prev = &j->prev;
	struct meta_ref *row = &j->row;
	int rc = 0;

	row->stream_id = j->es->id;
	row->kind = META_REF_CATALOG;
	snprintf(row->bucket, sizeof(row->bucket), "%s", j->es->row.bucket);
	row->end_seq = w->refs[w->n - 1].end_seq;
	row->end_byte = w->refs[w->n - 1].end_byte;
	row->max_ts = j->max_ts;
	if (j->have_tail) {
		j->pivot_seq = prev->first_seq;
		row->first_seq = prev->first_seq;
		row->first_byte = prev->first_byte;
		if (prev->max_ts > row->max_ts)
			row->max_ts = prev->max_ts;
		for (uint32_t i = 0; !rc && i + 1 < prev->nobjs; i++)
			rc = meta_ref_add_obj(row, &prev->objs[i]);
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

		rc = meta_ref_add_obj(row, &ro);
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

/* PUBLISHED -> COMMITTED: the one CAS (invariant 1). */
int settle_job_commit(struct settle_job *j)
{
	const struct settle_cfg *cfg = j->e->cfg;
	struct kv_txn *t;
	uint64_t pivot_ver;
	int rc;

	assert_job_state(j, JOB_PUBLISHED);
	rc = build_row(j);
	if (!rc)
		rc = pivot_version(j, &pivot_ver);
	if (rc)
		return rc;
	t = kv_txn_new();
	if (!t)
		return -ENOMEM;
	rc = meta_ref_txn_cmp_ver(t, j->es->id, j->pivot_seq, pivot_ver);
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
	int rc;

	assert_job_state(j, JOB_COMMITTED);
	rc = settle_delete_covered(j->e->cfg, es->id, es->keys, es->nkeys, j->row.end_seq,
				   j->pivot_seq);
	if (rc)
		return rc;
	settle_job_done(j, SETTLED);
	es->end_seq = j->row.end_seq;
	es->end_byte = j->row.end_byte;
	es->objects = j->nobjs;
	nv_log(NV_DEBUG, NV_SUB_SETTLE, "stream %llu (%s/%s): seq [%llu, %llu) settled into %u "
	       "object(s)%s", (unsigned long long)es->id, es->row.bucket, es->row.name,
	       (unsigned long long)j->w.refs[0].first_seq, (unsigned long long)j->row.end_seq,
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
