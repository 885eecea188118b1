/*
 * plan.c - see plan.h: the planner over the catalog, and the star's
 * vending of what it planned.
 *
 * For: plan_build() (a floor lookup at the start, then the rows after
 * the floor's row while they are contiguous catalog rows and the cap
 * has room) and star_plan() (the TTL rule and the presigned URLs).  Not
 * for: the wire form (api/plan.c).
 *
 * Invariants: those of plan.h.  No state, no locks: thread-safe as the
 * kv and the store are.
 */
#include "config.h"
#include "engine/plan.h"
#include "engine/star.h"
#include "engine/star_impl.h"
#include "engine/stream.h"
#include "engine/store/store.h"
#include "meta/streams.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int plan_vending_parse(const char *text, enum plan_vending *v)
{
	if (!text || !strcmp(text, "raw"))
		*v = PLAN_RAW;
	else if (!strcmp(text, "signed"))
		*v = PLAN_SIGNED;
	else
		return -EINVAL;
	return 0;
}

void plan_clear(struct read_plan *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->n; i++) {
		free(p->e[i].url);
		p->e[i].url = NULL;
	}
	p->n = 0;
}

/* The planning walk: where it stands and how much room is left. */
struct walk {
	struct read_plan *p;
	uint32_t max;
	uint64_t next_seq; /* the seq the next row must start at */
	bool stopped;      /* a row that is not a contiguous catalog row */
};

/* Vend the objects of catalog row r from index i while there is room. */
static void vend_row(struct walk *w, const struct meta_ref *r, uint32_t i)
{
	struct read_plan *p = w->p;

	for (; i < r->nobjs && p->n < w->max; i++) {
		const struct meta_ref_obj *o = &r->objs[i];
		struct plan_entry *e = &p->e[p->n++];

		memset(e, 0, sizeof(*e));
		meta_settled_key(e->key, sizeof(e->key), r->bucket, r->stream_id, o->epoch,
				 o->first_seq, o->rev);
		e->epoch = o->epoch;
		e->rev = o->rev;
		e->first_seq = o->first_seq;
		e->end_seq = meta_ref_obj_end_seq(r, i);
		e->first_byte = o->first_byte;
		e->end_byte = meta_ref_obj_end_byte(r, i);
		e->footer_off = o->footer_off;
		e->footer_len = o->footer_len;
		p->residual_seq = e->end_seq;
		p->residual_byte = e->end_byte;
	}
	p->more = i < r->nobjs;
	w->next_seq = r->end_seq;
}

/* meta_ref_list()'s visitor for the rows after the floor's. */
static int next_row(void *arg, const struct meta_ref *r)
{
	struct walk *w = arg;

	if (r->kind != META_REF_CATALOG || r->first_seq != w->next_seq || r->nobjs == 0) {
		w->stopped = true; /* plan.h invariant 2 */
		return 1;
	}
	if (w->p->n == w->max) {
		w->p->more = true; /* more settled history follows the cap */
		return 1;
	}
	vend_row(w, r, 0);
	return w->p->n == w->max ? 1 : 0;
}

int plan_build(struct kv *kv, uint64_t stream, const struct plan_req *q, struct read_plan *p)
{
	bool by_byte = q->by == META_REF_BY_BYTE;
	uint64_t start = by_byte ? (q->pos > q->trim_byte ? q->pos : q->trim_byte)
				 : (q->pos > q->trim_seq ? q->pos : q->trim_seq);
	struct walk w = { .p = p, .max = q->max && q->max < PLAN_ENTRIES_MAX ? q->max
								      : PLAN_ENTRIES_MAX };
	struct meta_ref r;
	uint32_t i;
	int rc;

	plan_clear(p);
	p->stream_id = stream;
	p->trim_seq = q->trim_seq;
	p->trim_byte = q->trim_byte;
	p->residual_seq = q->trim_seq;
	p->residual_byte = q->trim_byte;
	p->more = false;
	meta_ref_init(&r);
	rc = by_byte ? meta_ref_floor_byte(kv, stream, start, &r)
		     : meta_ref_floor_seq(kv, stream, start, &r);
	if (rc == -ENOENT) /* no rows: nothing settled, one residual */
		return 0;
	if (rc)
		return rc;
	if (start >= (by_byte ? r.end_byte : r.end_seq)) {
		/* Beyond the stream's rows (the floor is its last). */
		p->residual_seq = r.end_seq;
		p->residual_byte = r.end_byte;
	} else {
		p->residual_seq = r.first_seq;
		p->residual_byte = r.first_byte;
		if (r.kind == META_REF_CATALOG && r.nobjs) {
			i = meta_ref_obj_find(&r, q->by, start);
			/* By byte, an object ending at the start holds none of it
			 * (empty records end where the next begins). */
			while (by_byte && i + 1 < r.nobjs && meta_ref_obj_end_byte(&r, i) <= start)
				i++;
			vend_row(&w, &r, i);
			if (!p->more) /* the next rows; one past the cap says "more" */
				rc = meta_ref_list(kv, stream, r.end_seq, w.max - p->n + 1, next_row,
						   &w);
		}
	}
	meta_ref_clear(&r);
	if (rc)
		plan_clear(p);
	return rc;
}

/* The TTL of st's plans in whole seconds: plan_ttl_s, at most the read
 * grace (plan.h invariant 4). */
static unsigned plan_ttl_s(const struct star *st)
{
	uint64_t ttl = st->cfg.plan_ttl_ns ? st->cfg.plan_ttl_ns : 30 * NV_NS_PER_S;

	if (ttl > st->cfg.read_grace_ns)
		ttl = st->cfg.read_grace_ns;
	return (unsigned)(ttl / NV_NS_PER_S);
}

/* With a TTL under PLAN_TTL_MIN_S nothing is vended: the plan is its
 * residual (the start of what would have been the first entry). */
static void vend_nothing(struct read_plan *p)
{
	if (p->n) {
		p->residual_seq = p->e[0].first_seq;
		p->residual_byte = p->e[0].first_byte;
	}
	plan_clear(p);
	p->more = false;
}

static int presign_all(struct star *st, struct read_plan *p)
{
	for (uint32_t i = 0; i < p->n; i++) {
		struct nv_buf url;
		int rc;

		nv_buf_init(&url, 8192);
		rc = store_presign(st->store, p->e[i].key, p->ttl_s, &url);
		if (rc) {
			nv_buf_free(&url);
			return rc;
		}
		p->e[i].url = (char *)nv_buf_steal(&url, NULL); /* kept NUL-terminated */
	}
	return 0;
}

int star_plan(struct star *st, struct nv_stream *s, enum meta_ref_key by, uint64_t pos,
	      uint32_t max, struct read_plan *p)
{
	struct plan_req q = {
		.by = by, .pos = pos, .max = max,
		.trim_seq = atomic_load_explicit(&s->trim_seq, memory_order_acquire),
		.trim_byte = atomic_load_explicit(&s->trim_byte, memory_order_acquire),
	};
	int rc;

	struct meta_stream ms;

	if ((by != META_REF_BY_SEQ && by != META_REF_BY_BYTE) || max > PLAN_ENTRIES_MAX)
		return -EINVAL;
	p->n = 0;
	/* The trim point and tombstone as the metastore has them: a star
	 * that does not lead s may hold an older trim in memory. */
	rc = meta_stream_get(st->kv, s->id, &ms, NULL);
	if (rc == 0 && ms.deleted_ns)
		rc = -ENOENT;
	if (rc)
		return rc;
	if (ms.trim_seq > q.trim_seq) {
		q.trim_seq = ms.trim_seq;
		q.trim_byte = ms.trim_byte;
	}
	rc = plan_vending_parse(st->cfg.plan_vending, &p->vending);
	p->ttl_s = plan_ttl_s(st);
	p->expires_ns = nv_now_wall_ns() + (uint64_t)p->ttl_s * NV_NS_PER_S;
	if (rc == 0)
		rc = plan_build(st->kv, s->id, &q, p);
	if (rc == 0 && p->ttl_s < PLAN_TTL_MIN_S)
		vend_nothing(p);
	if (rc == 0 && p->vending == PLAN_SIGNED)
		rc = presign_all(st, p);
	if (rc) {
		plan_clear(p);
		return rc;
	}
	NV_STAT_ADD(&st->stats, plans, 1);
	NV_STAT_ADD(&st->stats, plan_entries, p->n);
	return 0;
}

int star_plan_check(struct star *st)
{
	enum plan_vending v;
	struct nv_buf url;
	int rc;

	if (plan_vending_parse(st->cfg.plan_vending, &v)) {
		nv_log(NV_ERR, NV_SUB_API, "plan_vending=%s: expected raw or signed",
		       st->cfg.plan_vending);
		return -EINVAL;
	}
	if (v != PLAN_SIGNED)
		return 0;
	nv_buf_init(&url, 8192);
	rc = store_presign(st->store, "streams/probe", 60, &url);
	nv_buf_free(&url);
	if (rc) {
		nv_log(NV_ERR, NV_SUB_API,
		       "plan_vending=signed: the standard store %s cannot presign URLs (%s); "
		       "use an s3:// store= or plan_vending=raw",
		       store_name(st->store), strerror(-rc));
		return -EINVAL;
	}
	return 0;
}
