/*
 * publish.c - the objects of one stream's window: the job's LOADED ->
 * PLANNED -> PUBLISHED transitions (engine/settle/job.h).
 *
 * For: reading and verifying object footers, the plan (the standing
 * sub-cap tail object first, then the window's chunks, cut at
 * output_cap), multipart assembly (server-side range copy for extents of
 * PART_MIN or more, ranged reads + upload part otherwise), create-once
 * publication and the adoption of an object that already stands at the
 * derived key.  Not for: rows (commit.c writes the catalog row).
 *
 * Invariants:
 *  1. An object's key is derived (meta_settled_key()), so a re-run
 *     publishes to the same key.
 *  2. A standing object is never replaced: when its footer holds the
 *     same records it is adopted; when it holds a prefix of them (a
 *     crashed run's, or a racing settler's, from a shorter window) the
 *     job commits those durable bytes and leaves the rest of its window
 *     for a later era; anything else fails the job (logged).
 *  3. Nothing here writes the metastore.
 *
 * Threads: a job is its worker's own (job.h); the fetch cache and the
 * store are thread-safe.
 */
#include "config.h"
#include "engine/settle/job.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ footers */

int settle_read_footer(const struct settle_cfg *cfg, const char *key, uint64_t foff,
		       uint32_t flen, uint8_t **win, struct bundle_footer *f)
{
	int rc;

	*win = malloc(flen);
	if (!*win)
		return -ENOMEM;
	rc = fetch_cache_read(cfg->fc, key, foff, flen, *win);
	if (!rc)
		rc = bundle_footer_open(*win, flen, foff, f);
	if (rc) {
		free(*win);
		*win = NULL;
		nv_log(NV_ERR, NV_SUB_SETTLE, "%s: footer unreadable: %s", key,
		       rc == -EBADMSG ? "fails verification" : strerror(-rc));
	}
	return rc;
}

/* Footer window of an object from its trailer. */
static int object_window(const struct settle_cfg *cfg, const char *key, uint64_t *foff,
			 uint32_t *flen)
{
	uint8_t tr[BUNDLE_TRAILER_SIZE];
	uint64_t size;
	int rc = fetch_cache_size(cfg->fc, key, &size); /* the cached copy's */

	if (rc)
		return rc;
	if (size < BUNDLE_TRAILER_SIZE)
		return -EBADMSG;
	rc = fetch_cache_read(cfg->fc, key, size - BUNDLE_TRAILER_SIZE, sizeof(tr), tr);
	return rc ? rc : bundle_trailer_parse(tr, sizeof(tr), size, foff, flen);
}

/* ------------------------------------------------------------ the plan */

void settle_plan_free(struct plan_obj *o, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		free(o[i].ents);
		free(o[i].ext);
	}
	free(o);
}

static int obj_add_chunk(struct plan_obj *o, const char *src, const struct bundle_entry *se,
			 bool copy_ok)
{
	struct bundle_entry e = *se;
	struct extent *x;

	if (o->nents == o->ents_cap) {
		uint32_t nc = o->ents_cap ? o->ents_cap * 2 : 64;
		struct bundle_entry *p = realloc(o->ents, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		o->ents = p;
		o->ents_cap = nc;
	}
	x = o->next ? &o->ext[o->next - 1] : NULL;
	if (x && !strcmp(x->key, src) && x->off + x->len == se->chunk_off) {
		x->len += se->comp_len;
	} else {
		if (o->next == o->ext_cap) {
			uint32_t nc = o->ext_cap ? o->ext_cap * 2 : 16;
			struct extent *p = realloc(o->ext, nc * sizeof(*p));

			if (!p)
				return -ENOMEM;
			o->ext = p;
			o->ext_cap = nc;
		}
		x = &o->ext[o->next++];
		snprintf(x->key, sizeof(x->key), "%s", src);
		x->off = se->chunk_off;
		x->len = se->comp_len;
		x->copy_ok = copy_ok;
	}
	e.chunk_off = o->size;
	o->ents[o->nents++] = e;
	o->size += se->comp_len;
	if (e.max_ts > o->max_ts)
		o->max_ts = e.max_ts;
	return 0;
}

/* The standing tail object of j->prev as the plan's first object, with
 * the next revision: its chunks are copied from it. */
static int plan_tail(struct settle_job *j)
{
	const struct settle_cfg *cfg = j->e->cfg;
	const struct meta_ref_obj *to = &j->prev.objs[j->prev.nobjs - 1];
	struct plan_obj *o = &j->objs[j->nobjs++];
	struct bundle_footer f;
	uint8_t *win;
	int rc;

	meta_settled_key(j->tail_key, sizeof(j->tail_key), j->prev.bucket, j->es->id, to->epoch,
			 to->first_seq, to->rev);
	rc = settle_read_footer(cfg, j->tail_key, to->footer_off, to->footer_len, &win, &f);
	if (rc)
		return rc;
	o->epoch = to->epoch;
	o->first_seq = to->first_seq;
	o->first_byte = to->first_byte;
	o->rev = to->rev + 1;
	for (uint32_t i = 0; !rc && i < f.n; i++) {
		struct bundle_entry be;

		rc = bundle_footer_get(&f, i, &be);
		if (!rc)
			rc = obj_add_chunk(o, j->tail_key, &be, true);
	}
	free(win);
	if (!rc)
		j->have_tail = true;
	return rc;
}

/* LOADED -> PLANNED. */
int settle_job_plan(struct settle_job *j)
{
	const struct settle_cfg *cfg = j->e->cfg;
	const struct meta_ref *prev = &j->prev;
	uint32_t cap_objs;
	int rc;

	assert_job_state(j, JOB_LOADED);
	cap_objs = 2 + (uint32_t)(j->es->bytes /
				  (cfg->output_cap_bytes ? cfg->output_cap_bytes : 1));
	j->objs = calloc(cap_objs + j->nchunks, sizeof(*j->objs));
	if (!j->objs)
		return -ENOMEM;
	/* However full prev's row: the rows after it are commit.c's. */
	if (j->have_prev && prev->kind == META_REF_CATALOG &&
	    prev->end_seq == j->w.refs[0].first_seq &&
	    prev->objs[prev->nobjs - 1].footer_off < cfg->output_cap_bytes) {
		rc = plan_tail(j);
		if (rc)
			return rc;
	}
	for (uint32_t i = 0; i < j->nchunks; i++) {
		const struct src_chunk *c = &j->chunks[i];
		struct plan_obj *o = j->nobjs ? &j->objs[j->nobjs - 1] : NULL;

		if (!o || (o->size + c->e.comp_len > cfg->output_cap_bytes && o->nents)) {
			o = &j->objs[j->nobjs++];
			o->epoch = j->e->chain.epoch;
			o->first_seq = c->e.first_seq;
			o->first_byte = c->e.first_byte;
		}
		/* A store object: pw_extent() copies it server-side when the
		 * extent reaches PART_MIN, else reads it from the warm copy. */
		rc = obj_add_chunk(o, c->key, &c->e, true);
		if (rc)
			return rc;
	}
	j->state = JOB_PLANNED;
	return 0;
}

/* ------------------------------------------------------------ publish */

struct part_writer {
	const struct settle_cfg *cfg;
	struct store_mpu *mpu;
	int part;
	uint8_t *buf;
	size_t len;
};

static int pw_flush(struct part_writer *pw)
{
	struct iovec iov = { pw->buf, pw->len };
	int rc;

	if (!pw->len)
		return 0;
	rc = store_mpu_put_part(pw->mpu, ++pw->part, &iov, 1);
	pw->len = 0;
	return rc;
}

/* Read up to one part's worth of x at *off into the part buffer. */
static int pw_read(struct part_writer *pw, const struct extent *x, uint64_t *off, uint64_t *len)
{
	size_t n = PART_TARGET - pw->len;
	int rc;

	if (n > *len)
		n = (size_t)*len;
	rc = fetch_cache_read(pw->cfg->fc, x->key, *off, n, pw->buf + pw->len);
	if (rc)
		return rc;
	pw->len += n;
	*off += n;
	*len -= n;
	return 0;
}

static int pw_extent(struct part_writer *pw, const struct extent *x)
{
	uint64_t off = x->off, len = x->len;
	bool copy_ok = x->copy_ok;
	int rc;

	while (len) {
		if (pw->len == 0 && copy_ok && len >= PART_MIN) {
			rc = store_mpu_copy_part(pw->mpu, pw->part + 1, x->key, off, len);
			if (rc == 0) {
				pw->part++;
				NV_STAT_ADD(pw->cfg->stats, range_copies, 1);
				return 0;
			}
			if (rc != -ENOTSUP)
				return rc;
			/* The store cannot copy: read it through us. */
			NV_STAT_ADD(pw->cfg->stats, copy_fallbacks, 1);
			copy_ok = false;
			continue;
		}
		rc = pw_read(pw, x, &off, &len);
		if (rc)
			return rc;
		if (pw->len >= PART_TARGET) {
			rc = pw_flush(pw);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* An object already stands at key (an earlier run, or a lost race):
 * describe those durable bytes instead of ours (invariant 2).  0 when it
 * holds exactly o's records; 1 when it holds a prefix of them (a run
 * from a shorter window): o then describes it and *end_seq is where it
 * ends; -EIO when it holds anything else (never replaced: logged). */
static int adopt(const struct settle_cfg *cfg, const char *key, struct plan_obj *o,
		 uint64_t *end_seq)
{
	struct bundle_footer f;
	struct bundle_entry e, mine_last = o->ents[o->nents - 1];
	uint64_t foff, seq = o->first_seq, byte = o->first_byte, max_ts = 0;
	uint32_t flen;
	uint8_t *win;
	int rc;

	rc = object_window(cfg, key, &foff, &flen);
	if (!rc)
		rc = settle_read_footer(cfg, key, foff, flen, &win, &f);
	if (rc)
		return rc;
	for (uint32_t i = 0; !rc && i < f.n; i++) {
		rc = bundle_footer_get(&f, i, &e);
		if (!rc && (e.stream_id != o->ents[0].stream_id || e.first_seq != seq ||
			    e.first_byte != byte))
			rc = -EBADMSG;
		if (!rc) {
			seq += e.nrec;
			byte += bundle_entry_body_bytes(&e);
			if (e.max_ts > max_ts)
				max_ts = e.max_ts;
		}
	}
	free(win);
	if (!rc && (f.n == 0 || seq > mine_last.first_seq + mine_last.nrec))
		rc = -EBADMSG;
	if (rc) {
		nv_log(NV_ERR, NV_SUB_SETTLE, "%s: already stands and does not hold this window's "
		       "records: left as it is, the stream settles later", key);
		return -EIO;
	}
	o->footer_off = foff;
	o->footer_len = flen;
	if (seq == mine_last.first_seq + mine_last.nrec) {
		nv_log(NV_INFO, NV_SUB_SETTLE, "%s: already published; adopting it", key);
		return 0;
	}
	nv_log(NV_INFO, NV_SUB_SETTLE, "%s: stands from a shorter window (to seq %llu); adopting "
	       "those durable bytes", key, (unsigned long long)seq);
	o->nents = f.n;
	o->size = foff;
	o->max_ts = max_ts;
	*end_seq = seq;
	return 1;
}

/* Upload o's extents and footer as the parts of a multipart upload of
 * key: 0 and *mpu (the caller completes it), or -errno (aborted). */
static int upload_parts(const struct settle_cfg *cfg, const char *key, const struct plan_obj *o,
			const struct nv_buf *footer, uint8_t *buf, struct store_mpu **mpu)
{
	struct part_writer pw = { .cfg = cfg, .buf = buf };
	int rc = store_mpu_create(cfg->store, key, &pw.mpu);

	for (uint32_t i = 0; !rc && i < o->next; i++)
		rc = pw_extent(&pw, &o->ext[i]);
	if (!rc) {
		memcpy(pw.buf + pw.len, footer->ptr, footer->len);
		pw.len += footer->len;
		rc = pw_flush(&pw);
	}
	if (rc)
		store_mpu_abort(pw.mpu);
	else
		*mpu = pw.mpu;
	return rc;
}

/* Publish o: 0 (ours, or the same records adopted), 1 (a standing
 * object holds a prefix of o's records: o describes it, *end_seq is
 * where it ends), or -errno. */
static int publish_try(const struct settle_cfg *cfg, const char *bucket, uint64_t stream,
		       struct plan_obj *o, uint64_t *end_seq)
{
	char key[META_SETTLED_KEY_MAX];
	struct store_mpu *mpu = NULL;
	struct nv_buf footer;
	uint8_t *buf;
	int rc;

	meta_settled_key(key, sizeof(key), bucket, stream, o->epoch, o->first_seq, o->rev);
	nv_buf_init(&footer, (size_t)BUNDLE_ENTRIES_MAX * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE);
	rc = bundle_footer_build(o->ents, o->nents, o->size, &footer);
	if (rc) {
		nv_buf_free(&footer);
		return rc;
	}
	buf = malloc(PART_TARGET + footer.len);
	if (!buf) {
		nv_buf_free(&footer);
		return -ENOMEM;
	}
	rc = upload_parts(cfg, key, o, &footer, buf, &mpu);
	if (!rc) {
		rc = store_mpu_complete(mpu, STORE_CREATE_ONCE);
		if (rc == -EEXIST)
			rc = adopt(cfg, key, o, end_seq);
		else if (!rc) {
			o->footer_off = o->size;
			o->footer_len = (uint32_t)footer.len;
			NV_STAT_ADD(cfg->stats, settled_objects, 1);
		}
	}
	if (rc < 0)
		nv_log(NV_ERR, NV_SUB_SETTLE, "%s: publishing failed: %s", key, strerror(-rc));
	else
		nv_log(NV_DEBUG, NV_SUB_SETTLE, "%s: %u chunks, %llu bytes", key, o->nents,
		       (unsigned long long)o->size);
	free(buf);
	nv_buf_free(&footer);
	return rc;
}

/* Object i stands from a shorter window ending at end_seq: the job
 * commits what is durable, objects [0, i] and the window's refs up to
 * end_seq (which must end one of them: -EIO otherwise); the rest stays
 * span refs for a later era. */
static int cut_window(struct settle_job *j, uint32_t i, uint64_t end_seq)
{
	struct window *w = &j->w;
	uint32_t k = 0;

	while (k < w->n && w->refs[k].end_seq != end_seq)
		k++;
	if (k == w->n) {
		nv_log(NV_ERR, NV_SUB_SETTLE, "stream %llu: a standing object ends at seq %llu, "
		       "inside a span ref: settles later", (unsigned long long)j->es->id,
		       (unsigned long long)end_seq);
		return -EIO;
	}
	for (uint32_t q = k + 1; q < w->n; q++)
		meta_ref_clear(&w->refs[q]);
	w->n = k + 1;
	j->max_ts = 0;
	for (uint32_t q = 0; q < w->n; q++)
		if (w->refs[q].max_ts > j->max_ts)
			j->max_ts = w->refs[q].max_ts;
	for (uint32_t q = i + 1; q < j->nobjs; q++) {
		free(j->objs[q].ents);
		free(j->objs[q].ext);
		memset(&j->objs[q], 0, sizeof(j->objs[q]));
	}
	j->nobjs = i + 1;
	return 0;
}

/* PLANNED -> PUBLISHED. */
int settle_job_publish(struct settle_job *j)
{
	int rc = 0;

	assert_job_state(j, JOB_PLANNED);
	for (uint32_t i = 0; !rc && i < j->nobjs; i++) {
		uint64_t end_seq = 0;

		rc = publish_try(j->e->cfg, j->es->row.bucket, j->es->id, &j->objs[i], &end_seq);
		if (rc == 1)
			rc = cut_window(j, i, end_seq);
	}
	if (!rc)
		rc = NV_FP("settle.after_publish");
	if (!rc)
		j->state = JOB_PUBLISHED;
	return rc;
}
