/*
 * trim.c - see trim.h.
 *
 * Runs on the auditor thread only; every durable step is a CAS on the
 * cursor row or an idempotent delete.
 */
#include "config.h"
#include "engine/trim.h"
#include "engine/chain.h"
#include "meta/cursors.h"
#include "meta/keys.h"
#include "meta/leases.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"
#include "src/base/testable.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELETE_BATCH 1000

static int first_marker(void *arg, const struct meta_marker *m)
{
	*(uint64_t *)arg = m->first_slot;
	return 1;
}

static int any_marker(void *arg, const struct meta_marker *m)
{
	*(int *)arg = 1;
	return 1;
}

/* Delete slots [from, to) of a chain, DELETE_BATCH keys a request;
 * *reached: where the deleted run ends (to, unless it stopped early). */
static int delete_slots(const struct trim_cfg *cfg, const struct meta_chain *c, uint64_t from,
			uint64_t to, uint64_t *reached)
{
	char (*keys)[CHAIN_KEY_MAX] = malloc(DELETE_BATCH * sizeof(*keys));
	const char **ptrs = malloc(DELETE_BATCH * sizeof(*ptrs));
	int rc = 0;

	if (!keys || !ptrs) {
		free(keys);
		free(ptrs);
		return -ENOMEM;
	}
	*reached = from;
	while (!rc && from < to) {
		size_t n = 0;

		if (cfg->cancelled && cfg->cancelled(cfg->cancel_arg)) {
			rc = -ESHUTDOWN;
			break;
		}
		for (; from < to && n < DELETE_BATCH; from++, n++) {
			chain_slot_key(keys[n], CHAIN_KEY_MAX, c->cls, c->star, c->epoch, from);
			ptrs[n] = keys[n];
		}
		rc = store_delete(cfg->store, ptrs, n);
		if (!rc) {
			NV_STAT_ADD(cfg->stats, slots_deleted, n);
			*reached = from;
		}
	}
	free(keys);
	free(ptrs);
	return rc;
}

/* A settled chain whose slots are all gone: drop its fence and rows. */
static int retire_chain(const struct trim_cfg *cfg, const struct meta_chain *c, uint64_t cver,
			uint64_t curver)
{
	char key[CHAIN_KEY_MAX];
	const char *keys[1] = { key };
	struct kv_txn *t;
	int rc;

	chain_slot_key(key, sizeof(key), c->cls, c->star, c->epoch, c->cut);
	rc = store_delete(cfg->store, keys, 1); /* the fence, if any */
	if (rc)
		return rc;
	t = kv_txn_new();
	if (!t)
		return -ENOMEM;
	rc = meta_chain_txn_del(t, c->cls, c->star, c->epoch, cver);
	if (!rc && curver)
		rc = meta_cursors_txn_del(t, c->cls, c->star, c->epoch);
	if (!rc)
		rc = kv_txn_commit(cfg->kv, t, NULL);
	kv_txn_free(t);
	if (!rc)
		nv_log(NV_INFO, NV_SUB_TRIM, "%s/%s epoch %llu: every slot retired; chain retired",
		       nv_class_name(c->cls), c->star, (unsigned long long)c->epoch);
	return rc;
}

/* Write cur (read at *curver) back; *curver gets the new version. */
static int put_cursors(const struct trim_cfg *cfg, const struct meta_cursors *cur,
		       uint64_t *curver)
{
	struct kv_txn *t = kv_txn_new();
	int rc;

	if (!t)
		return -ENOMEM;
	rc = meta_cursors_txn_put(t, cur, *curver);
	if (!rc)
		rc = kv_txn_commit(cfg->kv, t, curver);
	kv_txn_free(t);
	return rc;
}

int trim_chain(const struct trim_cfg *cfg, unsigned cls, const char *star, uint64_t epoch,
	       uint64_t now_ns)
{
	struct meta_chain c;
	struct meta_cursors cur, was;
	uint64_t cver, curver, first, reached;
	int rc, changed = 0;

	/* The chain row first, then the markers: a batch committed in
	 * between lies above the checkpoint read here (invariant 1). */
	rc = meta_chain_get(cfg->kv, cls, star, epoch, &c, &cver);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	if (c.state == CHAIN_FENCED)
		return 0; /* recovery first */
	first = c.state == CHAIN_LIVE ? c.checkpoint : c.cut;
	rc = meta_marker_list(cfg->kv, cls, star, epoch, first_marker, &first);
	if (!rc)
		rc = meta_cursors_get(cfg->kv, cls, star, epoch, &cur, &curver);
	if (rc)
		return rc;
	was = cur;
	if (first > cur.rewritten)
		cur.rewritten = first;
	if (cur.grace_target > cur.trimmed && now_ns >= cur.grace_since_ns + cfg->read_grace_ns) {
		/* The grace has passed: retire [trimmed, grace_target). */
		reached = cur.trimmed;
		rc = NV_FP("trim.before_delete");
		if (!rc)
			rc = delete_slots(cfg, &c, cur.trimmed, cur.grace_target, &reached);
		if (!rc)
			rc = NV_FP("trim.after_delete");
		if (rc == -ESHUTDOWN && reached > cur.trimmed) {
			/* Stopping between requests: record what went, so a
			 * clean stop leaves trimmed where the slots start. */
			cur.trimmed = reached;
			(void)put_cursors(cfg, &cur, &curver);
		}
		if (rc)
			return rc;
		nv_log(NV_DEBUG, NV_SUB_TRIM, "%s/%s epoch %llu: slots [%llu, %llu) deleted",
		       nv_class_name(cls), star, (unsigned long long)epoch,
		       (unsigned long long)cur.trimmed, (unsigned long long)cur.grace_target);
		cur.trimmed = cur.grace_target;
	}
	if (cur.grace_target == cur.trimmed && cur.rewritten > cur.trimmed) {
		/* Start the grace for what rewritten passed since. */
		cur.grace_target = cur.rewritten;
		cur.grace_since_ns = now_ns;
	}
	if (memcmp(&cur, &was, sizeof(cur))) {
		rc = put_cursors(cfg, &cur, &curver);
		if (rc)
			return rc;
		changed = 1;
	}
	if (c.state == CHAIN_SETTLED && cur.trimmed == c.cut) {
		uint64_t head = 0;
		int any = 0;

		/* Only below the star's mint head: its head may still be its
		 * live chain, fenced by a take's recovery it has not heard of
		 * (the star was between losing and renewing its registry
		 * lease); the fence is all that stops it from acking there,
		 * so it stays until the star mints a later epoch. */
		rc = meta_marker_list(cfg->kv, cls, star, epoch, any_marker, &any);
		if (!rc && !any)
			rc = meta_mint_head(cfg->kv, cls, star, &head);
		if (!rc && !any && epoch < head) {
			rc = retire_chain(cfg, &c, cver, curver);
			changed = 1;
		}
	}
	return rc ? rc : changed;
}

/* ------------------------------------------------------------ reclaim */

struct gc_arg {
	const struct trim_cfg *cfg;
	int done;
};

static int gc_one(void *arg, uint64_t due_ns, const char *key)
{
	struct gc_arg *g = arg;
	const char *keys[1] = { key };
	struct kv_txn *t;
	int rc = store_delete(g->cfg->store, keys, 1);

	if (rc)
		return rc;
	t = kv_txn_new();
	if (!t)
		return -ENOMEM;
	rc = meta_reclaim_txn_del(t, due_ns, key);
	if (!rc)
		rc = kv_txn_commit(g->cfg->kv, t, NULL);
	kv_txn_free(t);
	if (!rc) {
		g->done++;
		nv_log(NV_DEBUG, NV_SUB_TRIM, "%s: reclaimed", key);
	}
	return rc;
}

struct stream_rc {
	const struct trim_cfg *cfg;
	uint64_t now;
	struct meta_stream s;
	struct meta_ref *rows;
	uint32_t n, cap;
	int done;
};

static int collect_row(void *arg, const struct meta_ref *r)
{
	struct stream_rc *a = arg;
	struct meta_ref *c;

	/* Live streams: only rows wholly below the trim point. */
	if (!a->s.deleted_ns && r->end_seq > a->s.trim_seq)
		return 1;
	if (a->n == a->cap) {
		uint32_t nc = a->cap ? a->cap * 2 : 16;
		struct meta_ref *p = realloc(a->rows, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		a->rows = p;
		a->cap = nc;
	}
	c = &a->rows[a->n++];
	*c = *r;
	/* Deep copies of the arrays. */
	c->slots = NULL;
	c->objs = NULL;
	c->nslots = c->slots_cap = 0;
	c->nobjs = c->objs_cap = 0;
	for (uint32_t i = 0; i < r->nobjs; i++)
		if (meta_ref_add_obj(c, &r->objs[i]))
			return -ENOMEM;
	/* A deleted stream's span ref: its first slot finds its batch's
	 * marker (ripen_deleted()). */
	if (a->s.deleted_ns && r->kind == META_REF_SPAN && r->nslots &&
	    meta_ref_add_slot(c, &r->slots[0]))
		return -ENOMEM;
	return a->n >= 256 ? 1 : 0; /* a page at a time */
}

/*
 * A deleted stream's part of the batch marker under each of its span
 * refs ripens now, before the refs go: the next era judges the stream
 * deleted and resolves its part without a byte staged (settlement.txt),
 * so the slots become deletable once no live stream needs them, not at
 * the batch's age cap.  Without this a marker whose settle had failed
 * (say, on a full disk) would wait for its cap, holding every slot from
 * it up.  Best effort: a marker resolved meanwhile is fine; an error
 * leaves it to its cap, as before.
 */
static void ripen_deleted(const struct stream_rc *a, uint64_t id)
{
	unsigned ripened = 0;

	for (uint32_t i = 0; i < a->n; i++) {
		const struct meta_ref *r = &a->rows[i];
		int rc;

		if (r->kind != META_REF_SPAN || !r->nslots)
			continue;
		rc = meta_marker_ripen(a->cfg->kv, r->cls, r->star, r->epoch, r->slots[0].slot, id,
				       a->now);
		if (rc == 1)
			ripened++;
		else if (rc < 0 && rc != -ENOENT)
			nv_log(NV_WARN, NV_SUB_TRIM, "stream %llu (deleted): the marker of slot %llu "
			       "not ripened (%s); it waits for its age cap", (unsigned long long)id,
			       (unsigned long long)r->slots[0].slot, strerror(-rc));
	}
	if (ripened)
		nv_log(NV_INFO, NV_SUB_TRIM, "stream %llu (deleted): %u batch marker(s) ripened",
		       (unsigned long long)id, ripened);
}

/* Objects a split step queues: with its compare, delete and put it stays
 * within KV_TXN_SAFE_OPS. */
#define SPLIT_STEP_OBJS (KV_TXN_SAFE_OPS - 24)

/*
 * Re-key catalog row r (read at version rver) of stream id at the first
 * object not wholly below trim_seq, queueing the objects below for
 * deletion after the grace.  Each step compares the row's version: a
 * settle on the stream's leader (any star) may have extended the row
 * meanwhile, and rewriting the old copy would drop its new objects.  A
 * step drops at most SPLIT_STEP_OBJS objects (one transaction: the row
 * re-keyed and their reclaim rows, cursors.h invariant 2), so a row of
 * many objects below the trim point goes in several steps, each leaving
 * a valid row.  1 (split), 0 (nothing to split), -ECANCELED (the row
 * moved: the next pass reads it again), kv error.
 */
NOVA_TESTABLE int trim_split_commit(const struct trim_cfg *cfg, uint64_t now, uint64_t id,
				    uint64_t trim_seq, const struct meta_ref *r, uint64_t rver)
{
	uint64_t at_seq = r->first_seq, at_byte = r->first_byte, ver = rver;
	uint32_t k = 0, done = 0;
	int rc = 0;

	if (r->kind == META_REF_CATALOG)
		while (k < r->nobjs && meta_ref_obj_end_seq(r, k) <= trim_seq)
			k++;
	if (r->kind != META_REF_CATALOG || k == 0 || k == r->nobjs)
		return 0;
	while (!rc && done < k) {
		uint32_t step = k - done < SPLIT_STEP_OBJS ? k - done : SPLIT_STEP_OBJS;
		struct meta_ref keep = *r;
		struct kv_txn *t;

		keep.objs = NULL;
		keep.nobjs = keep.objs_cap = 0;
		keep.slots = NULL;
		keep.nslots = keep.slots_cap = 0;
		keep.first_seq = r->objs[done + step].first_seq;
		keep.first_byte = r->objs[done + step].first_byte;
		for (uint32_t i = done + step; !rc && i < r->nobjs; i++)
			rc = meta_ref_add_obj(&keep, &r->objs[i]);
		t = rc ? NULL : kv_txn_new();
		if (!rc && !t)
			rc = -ENOMEM;
		if (!rc)
			rc = meta_ref_txn_cmp_ver(t, id, at_seq, ver);
		if (!rc)
			rc = meta_ref_txn_del(t, id, at_seq, at_byte);
		if (!rc)
			rc = meta_ref_txn_put(t, &keep);
		for (uint32_t i = done; !rc && i < done + step; i++) {
			char key[META_SETTLED_KEY_MAX];

			meta_settled_key(key, sizeof(key), r->bucket, id, r->objs[i].epoch,
					 r->objs[i].first_seq, r->objs[i].rev);
			rc = meta_reclaim_txn_add(t, now + cfg->read_grace_ns, key);
		}
		if (!rc)
			rc = kv_txn_commit(cfg->kv, t, &ver); /* the new row's version */
		kv_txn_free(t);
		meta_ref_clear(&keep);
		at_seq = r->objs[done + step].first_seq;
		at_byte = r->objs[done + step].first_byte;
		done += step;
	}
	return rc ? rc : 1;
}

/* The catalog row holding the trim point: objects wholly below it go,
 * the row is re-keyed at the first object it keeps (one transaction; a
 * read at or past the trim point finds the new row by its floor). */
static int split_straddling(struct stream_rc *a, uint64_t id)
{
	struct meta_ref r;
	uint64_t first, rver = 0;
	int rc;

	if (a->s.trim_seq == 0)
		return 0;
	meta_ref_init(&r);
	rc = meta_ref_floor_seq(a->cfg->kv, id, a->s.trim_seq, &r);
	first = r.first_seq;
	if (!rc && r.kind == META_REF_CATALOG) { /* again, with its version */
		meta_ref_clear(&r);
		meta_ref_init(&r);
		rc = meta_ref_get(a->cfg->kv, id, first, &r, &rver);
	}
	if (!rc)
		rc = trim_split_commit(a->cfg, a->now, id, a->s.trim_seq, &r, rver);
	meta_ref_clear(&r);
	if (rc == 1) {
		a->done++;
		rc = 0;
	}
	return rc == -ENOENT ? 0 : rc;
}

static int reclaim_stream(void *arg, uint64_t id)
{
	struct stream_rc *a = arg;
	bool deleted;
	int rc = meta_stream_get(a->cfg->kv, id, &a->s, NULL);

	if (rc == -ENOENT)
		return meta_reclaim_stream_done(a->cfg->kv, id, false);
	if (rc)
		return rc;
	deleted = a->s.deleted_ns != 0;
	if (deleted && a->now < a->s.deleted_ns + a->cfg->read_grace_ns)
		return 0; /* readers may still hold it */
	for (;;) {
		struct kv_txn *t;

		a->n = 0;
		rc = meta_ref_list(a->cfg->kv, id, 0, 0, collect_row, a);
		if (rc || a->n == 0)
			break;
		if (deleted)
			ripen_deleted(a, id);
		t = kv_txn_new();
		if (!t) {
			rc = -ENOMEM;
			break;
		}
		for (uint32_t i = 0; !rc && i < a->n; i++) {
			const struct meta_ref *r = &a->rows[i];

			rc = meta_ref_txn_del(t, id, r->first_seq, r->first_byte);
			for (uint32_t j = 0; !rc && j < r->nobjs; j++) {
				char key[META_SETTLED_KEY_MAX];

				meta_settled_key(key, sizeof(key), r->bucket, id, r->objs[j].epoch,
						 r->objs[j].first_seq, r->objs[j].rev);
				rc = meta_reclaim_txn_add(t, deleted ? a->now
								     : a->now + a->cfg->read_grace_ns,
							  key);
			}
		}
		if (!rc)
			rc = kv_txn_commit(a->cfg->kv, t, NULL);
		kv_txn_free(t);
		for (uint32_t i = 0; i < a->n; i++)
			meta_ref_clear(&a->rows[i]);
		if (rc)
			break;
		a->done++;
	}
	if (!rc && !deleted)
		rc = split_straddling(a, id);
	if (!rc && deleted) /* its writer lease rows (meta/leases.h "Reclaim") */
		rc = meta_lease_reclaim(a->cfg->kv, id);
	if (rc)
		return rc;
	if (deleted)
		nv_log(NV_INFO, NV_SUB_TRIM, "stream %llu (%s/%s, deleted): history reclaimed",
		       (unsigned long long)id, a->s.bucket, a->s.name);
	return meta_reclaim_stream_done(a->cfg->kv, id, deleted);
}

int trim_reclaim(const struct trim_cfg *cfg, uint64_t now_ns)
{
	struct gc_arg g = { .cfg = cfg };
	struct stream_rc a = { .cfg = cfg, .now = now_ns };
	int rc;

	rc = meta_reclaim_streams(cfg->kv, reclaim_stream, &a);
	free(a.rows);
	if (!rc)
		rc = meta_reclaim_due(cfg->kv, now_ns, 1000, gc_one, &g);
	if (rc)
		return rc;
	return g.done || a.done;
}
