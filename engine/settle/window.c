/*
 * window.c - one stream's window: the job's NEW -> RESUMED -> LOADED
 * transitions (engine/settle/job.h), and the deletion of covered span
 * refs every phase that finds some uses.
 *
 * For: skipping keys trim already reclaimed, resuming after an earlier
 * run that committed part of the stream, reading and checking the span
 * refs of the window, the rule that earlier history settles first
 * (settle.h invariant 2), and gathering the window's chunks from the
 * slot footers.  Not for: the objects (publish.c) or the CAS (commit.c).
 *
 * Invariants:
 *  1. A window is contiguous: each ref's first_seq is the previous one's
 *     end_seq, or the job fails (-EIO) without writing.
 *  2. The gathered chunks cover the window exactly, seq and byte, or the
 *     job fails (-EIO).
 *  3. settle_delete_covered() deletes a span ref only at the version it
 *     read, with its byte twin (meta_ref_txn_del_ver()), up to
 *     DELETE_TXN_REFS of them per transaction in ascending order; a lost
 *     race is skipped, not an error.
 *  4. A catalog row before the window that already reaches into it
 *     (another settler of the chain committed since the resume) makes
 *     the load -ECANCELED: the window is never settled a second time
 *     (commit.c invariant 1 for a commit racing the load).
 *
 * Threads: a job is its worker's own (job.h).
 */
#include "config.h"
#include "engine/settle/job.h"
#include "src/base/log.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int settle_job_init(struct settle_job *j, struct era *e, struct era_stream *es)
{
	memset(j, 0, sizeof(*j));
	j->magic = JOB_MAGIC;
	j->state = JOB_NEW;
	j->e = e;
	j->es = es;
	meta_ref_init(&j->prev);
	meta_ref_init(&j->row);
	j->w.refs = calloc(es->nkeys, sizeof(*j->w.refs));
	j->w.vers = calloc(es->nkeys, sizeof(*j->w.vers));
	return j->w.refs && j->w.vers ? 0 : -ENOMEM;
}

void settle_job_free(struct settle_job *j)
{
	assert(j->magic == JOB_MAGIC);
	settle_plan_free(j->objs, j->nobjs);
	free(j->chunks);
	meta_ref_clear(&j->prev);
	meta_ref_clear(&j->row);
	for (uint32_t i = 0; i < j->nextra; i++)
		meta_ref_clear(&j->extra[i]);
	free(j->extra);
	for (uint32_t i = 0; i < j->w.n; i++)
		meta_ref_clear(&j->w.refs[i]);
	free(j->w.refs);
	free(j->w.vers);
	j->magic = 0;
}

void settle_job_done(struct settle_job *j, enum outcome o)
{
	j->es->outcome = o;
	j->state = JOB_DONE;
}

/* Covered span refs deleted per transaction: each is a compare and two
 * deletes (meta_ref_txn_del_ver()), and a transaction with compares must
 * fit every backend whole (kv.h KV_TXN_SAFE_OPS; etcd refuses more than
 * 128 operations per transaction branch with -E2BIG). */
#define DELETE_TXN_REFS (KV_TXN_SAFE_OPS / 3)

/* Delete keys[0..n) (each at the version read, with its twin) in one
 * transaction; with one_by_one, one transaction each, a lost race
 * skipped.  0, -ECANCELED (a batch lost a race: retry one by one), or
 * -errno. */
static int delete_refs(const struct settle_cfg *cfg, uint64_t stream, const uint64_t *keys,
		       const uint64_t *bytes, const uint64_t *vers, uint32_t n, bool one_by_one)
{
	struct kv_txn *t = NULL;
	int rc = 0;

	for (uint32_t i = 0; !rc && i < n; i++) {
		if (!t && !(t = kv_txn_new()))
			return -ENOMEM;
		rc = meta_ref_txn_del_ver(t, stream, keys[i], bytes[i], vers[i]);
		if (!rc && (one_by_one || i + 1 == n)) {
			rc = kv_txn_commit(cfg->kv, t, NULL);
			kv_txn_free(t);
			t = NULL;
			if (rc == -ECANCELED && one_by_one)
				rc = 0; /* that one moved meanwhile: not ours */
		}
	}
	kv_txn_free(t);
	return rc;
}

int settle_delete_covered(const struct settle_cfg *cfg, uint64_t stream, const uint64_t *keys,
			  uint32_t nkeys, uint64_t covered_end, uint64_t skip_seq)
{
	uint64_t k[DELETE_TXN_REFS], b[DELETE_TXN_REFS], v[DELETE_TXN_REFS];
	uint32_t n = 0;
	int rc = 0;

	for (uint32_t i = 0; !rc && i <= nkeys; i++) {
		struct meta_ref r;
		uint64_t ver;

		if (i < nkeys && keys[i] != skip_seq) {
			meta_ref_init(&r);
			rc = meta_ref_get(cfg->kv, stream, keys[i], &r, &ver);
			if (rc == -ENOENT) {
				rc = 0; /* an earlier run deleted it */
			} else if (!rc && r.kind == META_REF_SPAN && r.end_seq <= covered_end) {
				k[n] = keys[i];
				b[n] = r.first_byte;
				v[n] = ver;
				n++;
			}
			meta_ref_clear(&r);
		}
		if (!rc && n && (n == DELETE_TXN_REFS || i == nkeys)) {
			rc = delete_refs(cfg, stream, k, b, v, n, false);
			if (rc == -ECANCELED)
				rc = delete_refs(cfg, stream, k, b, v, n, true);
			n = 0;
		}
	}
	return rc;
}

int settle_catalog_end(const struct settle_cfg *cfg, uint64_t stream, uint64_t *seq,
		       uint64_t *byte)
{
	for (;;) {
		struct meta_ref r;
		uint64_t ver;
		int rc;

		meta_ref_init(&r);
		rc = meta_ref_get(cfg->kv, stream, *seq, &r, &ver);
		if (!rc && (r.kind != META_REF_CATALOG || r.end_seq <= *seq))
			rc = -ENOENT;
		if (!rc) {
			*seq = r.end_seq;
			*byte = r.end_byte;
		}
		meta_ref_clear(&r);
		if (rc)
			return rc == -ENOENT ? 0 : rc;
	}
}

/* ------------------------------------------------------------ resume */

/* Refs below the trim point may have been reclaimed already (trim.c):
 * those keys are gone for good, not a settle in progress.  Moves j->k0
 * past them. */
static int skip_trimmed(struct settle_job *j)
{
	const struct era_stream *es = j->es;
	int rc = 0;

	while (j->k0 < es->nkeys && es->keys[j->k0] < es->row.trim_seq) {
		struct meta_ref tmp;
		uint64_t v;

		meta_ref_init(&tmp);
		rc = meta_ref_get(j->e->cfg->kv, es->id, es->keys[j->k0], &tmp, &v);
		meta_ref_clear(&tmp);
		if (rc != -ENOENT)
			break;
		j->k0++;
	}
	return rc && rc != -ENOENT ? rc : 0;
}

/*
 * What a catalog row already covers at the first key: 0 and *cov_seq
 * (0: nothing), or -errno.  The covering row is either the one at the
 * first key (the span ref was the pivot) or the one before it (a tail
 * extension's pivot).
 */
static int covered_end(struct settle_job *j, uint64_t *cov_seq, uint64_t *cov_byte)
{
	const struct settle_cfg *cfg = j->e->cfg;
	const struct era_stream *es = j->es;
	uint64_t key = es->keys[j->k0];
	struct meta_ref r0;
	int rc;

	*cov_seq = *cov_byte = 0;
	meta_ref_init(&r0);
	rc = meta_ref_floor_seq(cfg->kv, es->id, key, &r0);
	if (rc == 0 && r0.kind == META_REF_CATALOG && r0.end_seq > key) {
		*cov_seq = r0.end_seq;
		*cov_byte = r0.end_byte;
	} else if (rc == 0 && r0.kind == META_REF_SPAN && r0.first_seq == key && key > 0) {
		rc = meta_ref_floor_seq(cfg->kv, es->id, key - 1, &j->prev);
		if (rc == 0 && j->prev.kind == META_REF_CATALOG && j->prev.end_seq > key) {
			*cov_seq = j->prev.end_seq;
			*cov_byte = j->prev.end_byte;
		}
		meta_ref_clear(&j->prev);
		if (rc == -ENOENT)
			rc = 0;
	} else if (rc == -ENOENT) {
		rc = 0;
	}
	meta_ref_clear(&r0);
	if (!rc && *cov_seq) /* and the non-pivot rows after it */
		rc = settle_catalog_end(cfg, es->id, cov_seq, cov_byte);
	return rc;
}

/*
 * NEW -> RESUMED, or DONE.  An earlier run may have committed part of
 * this stream's history and crashed before its clean-up, and this era may
 * reach further than that run's (more markers ripened since).  Whatever
 * a catalog row already covers is done: its leftover span refs go, and
 * only the keys beyond it form the window (settle.h invariant 3).
 */
int settle_job_resume(struct settle_job *j)
{
	struct era_stream *es = j->es;
	uint64_t cov_seq, cov_byte;
	int rc;

	assert_job_state(j, JOB_NEW);
	rc = skip_trimmed(j);
	if (rc)
		return rc;
	if (j->k0 == es->nkeys) {
		settle_job_done(j, DROPPED); /* everything here was trimmed away */
		return 0;
	}
	rc = covered_end(j, &cov_seq, &cov_byte);
	if (rc)
		return rc;
	if (cov_seq) {
		rc = settle_delete_covered(j->e->cfg, es->id, es->keys, es->nkeys, cov_seq,
					   UINT64_MAX);
		if (rc)
			return rc;
		while (j->k0 < es->nkeys && es->keys[j->k0] < cov_seq)
			j->k0++;
		es->end_seq = cov_seq;
		es->end_byte = cov_byte;
		if (j->k0 == es->nkeys) {
			settle_job_done(j, SETTLED); /* all of it, by the earlier run */
			return 0;
		}
		nv_log(NV_INFO, NV_SUB_SETTLE, "stream %llu: an earlier run settled up to seq "
		       "%llu; settling on from seq %llu", (unsigned long long)es->id,
		       (unsigned long long)cov_seq, (unsigned long long)es->keys[j->k0]);
	}
	j->state = JOB_RESUMED;
	return 0;
}

/* ------------------------------------------------------------ load */

/* The span refs at keys[k0..] (up to a non-pivot catalog row of an
 * earlier run): 0 and all of them in j->w, 1 when one is missing
 * (RESIDUE, logged), or -errno. */
static int load_refs(struct settle_job *j)
{
	const struct settle_cfg *cfg = j->e->cfg;
	const struct era_stream *es = j->es;
	struct window *w = &j->w;

	for (uint32_t i = j->k0; i < es->nkeys; i++) {
		int rc;

		meta_ref_init(&w->refs[w->n]);
		rc = meta_ref_get(cfg->kv, es->id, es->keys[i], &w->refs[w->n], &w->vers[w->n]);
		if (rc == 0 && w->refs[w->n].kind == META_REF_CATALOG && w->n &&
		    w->refs[w->n].first_seq == w->refs[w->n - 1].end_seq) {
			/* A non-pivot row of an earlier run replaced this span
			 * ref (commit.c invariant 3): the window ends here,
			 * settle_job_finish() counts the rest as settled. */
			meta_ref_clear(&w->refs[w->n]);
			return 0;
		}
		if (rc == 0 && w->refs[w->n].kind != META_REF_SPAN)
			rc = -ENOENT;
		if (rc == -ENOENT) {
			meta_ref_clear(&w->refs[w->n]);
			nv_log(NV_WARN, NV_SUB_SETTLE, "stream %llu: no span ref at seq %llu and no "
			       "catalog row covers it: leaving it", (unsigned long long)es->id,
			       (unsigned long long)es->keys[i]);
			return 1;
		}
		if (rc)
			return rc;
		if (w->n && w->refs[w->n].first_seq != w->refs[w->n - 1].end_seq) {
			nv_log(NV_ERR, NV_SUB_SETTLE, "stream %llu: refs not contiguous at seq %llu",
			       (unsigned long long)es->id, (unsigned long long)w->refs[w->n].first_seq);
			meta_ref_clear(&w->refs[w->n]); /* not counted in w->n */
			return -EIO;
		}
		w->n++;
	}
	return 0;
}

/* Append the chunk e of slot object key to *c. */
static int chunk_push(struct src_chunk **c, uint32_t *n, uint32_t *cap, const char *key,
		      const struct bundle_entry *e)
{
	if (*n == *cap) {
		uint32_t nc = *cap ? *cap * 2 : 64;
		struct src_chunk *p = realloc(*c, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		*c = p;
		*cap = nc;
	}
	snprintf((*c)[*n].key, sizeof((*c)[*n].key), "%s", key);
	(*c)[*n].e = *e;
	(*n)++;
	return 0;
}

/* Gather the stream's chunks of the window, in seq order (invariant 2). */
static int gather_chunks(const struct settle_cfg *cfg, uint64_t stream, const struct window *w,
			 struct src_chunk **out, uint32_t *nout, uint64_t *max_ts)
{
	struct src_chunk *c = NULL;
	uint32_t n = 0, cap = 0;
	uint64_t seq = w->refs[0].first_seq, byte = w->refs[0].first_byte;
	int rc = 0;

	*max_ts = 0;
	for (uint32_t i = 0; !rc && i < w->n; i++) {
		const struct meta_ref *r = &w->refs[i];

		if (r->max_ts > *max_ts)
			*max_ts = r->max_ts;
		for (uint32_t j = 0; !rc && j < r->nslots; j++) {
			uint64_t end = j + 1 < r->nslots ? r->slots[j + 1].first_seq : r->end_seq;
			char key[CHAIN_KEY_MAX];
			struct bundle_footer f;
			uint32_t first, count;
			uint8_t *win;

			chain_slot_key(key, sizeof(key), r->cls, r->star, r->epoch, r->slots[j].slot);
			rc = settle_read_footer(cfg, key, r->slots[j].footer_off,
						r->slots[j].footer_len, &win, &f);
			if (rc)
				break;
			rc = bundle_footer_stream(&f, stream, &first, &count);
			for (uint32_t q = first; !rc && q < first + count; q++) {
				struct bundle_entry e;

				rc = bundle_footer_get(&f, q, &e);
				if (rc || e.first_seq < r->slots[j].first_seq || e.first_seq >= end)
					continue;
				if (e.first_seq != seq || e.first_byte != byte) {
					rc = -EBADMSG;
					break;
				}
				rc = chunk_push(&c, &n, &cap, key, &e);
				if (rc)
					break;
				seq += e.nrec;
				byte += bundle_entry_body_bytes(&e);
			}
			free(win);
			if (rc)
				nv_log(NV_ERR, NV_SUB_SETTLE, "stream %llu: %s does not hold the records "
				       "its ref names", (unsigned long long)stream, key);
		}
	}
	if (!rc && (seq != w->refs[w->n - 1].end_seq || byte != w->refs[w->n - 1].end_byte))
		rc = -EBADMSG;
	if (rc) {
		free(c);
		return rc == -EBADMSG ? -EIO : rc;
	}
	*out = c;
	*nout = n;
	return 0;
}

/*
 * RESUMED -> LOADED, or DONE: the window's refs, the judge of a window
 * wholly trimmed away, the row before the window (settle.h invariant 2),
 * and the window's chunks.
 */
int settle_job_load(struct settle_job *j)
{
	const struct settle_cfg *cfg = j->e->cfg;
	struct era_stream *es = j->es;
	struct window *w = &j->w;
	int rc;

	assert_job_state(j, JOB_RESUMED);
	rc = load_refs(j);
	if (rc == 1) {
		settle_job_done(j, RESIDUE);
		return 0;
	}
	if (rc)
		return rc;
	/* Judge: wholly trimmed away. */
	if (w->refs[w->n - 1].end_seq <= es->row.trim_seq) {
		rc = settle_delete_covered(cfg, es->id, es->keys, es->nkeys, es->row.trim_seq,
					   UINT64_MAX);
		if (!rc)
			settle_job_done(j, DROPPED);
		return rc;
	}
	/* The row before the window is a catalog row, nothing, or trimmed
	 * away. */
	if (w->refs[0].first_seq > 0) {
		rc = meta_ref_floor_seq(cfg->kv, es->id, w->refs[0].first_seq - 1, &j->prev);
		if (rc == 0) {
			j->have_prev = true;
			if (j->prev.kind != META_REF_CATALOG && j->prev.end_seq > es->row.trim_seq) {
				/* Earlier history settles first; when it waits in an
				 * older chain (a recovered epoch) while the stream is
				 * due here, it is due there too. */
				if (u64map_get(j->e->due, es->id))
					(void)settle_nudge(cfg, &j->prev, es->id, j->e->now);
				settle_job_done(j, RESIDUE);
				return 0;
			}
			if (j->prev.kind == META_REF_CATALOG &&
			    j->prev.end_seq > w->refs[0].first_seq)
				return -ECANCELED; /* another settler's row covers the
						    * window since the resume: the
						    * next pass resumes past it */
		} else if (rc != -ENOENT) {
			return rc;
		}
	}
	rc = gather_chunks(cfg, es->id, w, &j->chunks, &j->nchunks, &j->max_ts);
	if (!rc)
		j->state = JOB_LOADED;
	return rc;
}
