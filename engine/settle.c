/*
 * settle.c - see settle.h.
 *
 * State of one stream in an era (era_stream.outcome):
 *
 *   PENDING --judge: deleted / trimmed away--> DROPPED
 *      |
 *      +--not qualified, or earlier history unsettled--> RESIDUE
 *      |
 *      +--assemble, publish, CAS, delete covered refs--> SETTLED
 *      |
 *      +--error (logged; retried by the next pass)-----> RESIDUE
 *
 *   transition   function
 *   judge        judge_streams()
 *   assemble..   settle_stream() -> plan(), publish(), commit()
 *   resolve      resolve_markers() (markers keep RESIDUE streams only)
 *
 * Threads: settle_chain() runs on the auditor thread and starts
 * cfg->workers threads for one era; they take streams from a shared index
 * under e->lock.  Everything else a worker touches is its own.
 */
#include "config.h"
#include "engine/settle.h"
#include "engine/bundle.h"
#include "engine/chain.h"
#include "meta/cursors.h"
#include "meta/keys.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERA_MARKERS_MAX 4096
#define PART_MIN (5u << 20)    /* S3's smallest non-last part */
#define PART_TARGET (8u << 20) /* parts we assemble by reading */

enum outcome { PENDING = 0, SETTLED, RESIDUE, DROPPED };

struct era_stream {
	uint64_t id;
	uint64_t *keys; /* the stream's span ref keys in the era, ascending */
	uint32_t nkeys;
	uint64_t bytes;
	uint64_t oldest_birth;
	enum outcome outcome;
	struct meta_stream row;
	uint64_t end_seq, end_byte; /* settled end, when SETTLED */
	uint32_t objects;
};

struct era {
	const struct settle_cfg *cfg;
	struct meta_chain chain;
	uint64_t now;
	struct meta_marker *marks;
	uint32_t nmarks, cap;
	uint64_t est_bytes;
	struct era_stream *streams;
	uint32_t nstreams;
	pthread_mutex_t lock;
	uint32_t next; /* lock: next stream for a worker */
};

/* ------------------------------------------------------------ planning */

static int collect_marker(void *arg, const struct meta_marker *m)
{
	struct era *e = arg;
	struct meta_marker *c;

	if (e->nmarks == ERA_MARKERS_MAX ||
	    (e->nmarks > 0 && e->est_bytes >= e->cfg->fetch_budget))
		return 1;
	if (e->nmarks == e->cap) {
		uint32_t ncap = e->cap ? e->cap * 2 : 16;
		struct meta_marker *p = realloc(e->marks, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		e->marks = p;
		e->cap = ncap;
	}
	c = &e->marks[e->nmarks];
	*c = *m;
	c->streams = NULL;
	if (m->nstreams) {
		c->streams = malloc(m->nstreams * sizeof(*c->streams));
		if (!c->streams)
			return -ENOMEM;
		memcpy(c->streams, m->streams, m->nstreams * sizeof(*c->streams));
	}
	for (uint32_t i = 0; i < m->nstreams; i++)
		e->est_bytes += m->streams[i].bytes;
	e->nmarks++;
	return 0;
}

struct tuple_row {
	uint64_t id, first_seq, bytes, birth;
};

static int tuple_cmp(const void *x, const void *y)
{
	const struct tuple_row *a = x, *b = y;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return a->first_seq < b->first_seq ? -1 : a->first_seq > b->first_seq;
}

/* The era's streams, each with its ref keys in seq order. */
static int group_streams(struct era *e)
{
	size_t n = 0, k = 0;
	struct tuple_row *t;

	for (uint32_t i = 0; i < e->nmarks; i++)
		n += e->marks[i].nstreams;
	t = calloc(n ? n : 1, sizeof(*t));
	e->streams = calloc(n ? n : 1, sizeof(*e->streams));
	if (!t || !e->streams) {
		free(t);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < e->nmarks; i++)
		for (uint32_t j = 0; j < e->marks[i].nstreams; j++) {
			t[k].id = e->marks[i].streams[j].stream_id;
			t[k].first_seq = e->marks[i].streams[j].first_seq;
			t[k].bytes = e->marks[i].streams[j].bytes;
			t[k].birth = e->marks[i].birth_ns;
			k++;
		}
	qsort(t, n, sizeof(*t), tuple_cmp);
	for (size_t i = 0; i < n;) {
		struct era_stream *s = &e->streams[e->nstreams++];
		size_t j = i;

		while (j < n && t[j].id == t[i].id)
			j++;
		s->id = t[i].id;
		s->keys = malloc((j - i) * sizeof(*s->keys));
		if (!s->keys) {
			free(t);
			return -ENOMEM;
		}
		s->oldest_birth = UINT64_MAX;
		for (size_t q = i; q < j; q++) {
			s->keys[s->nkeys++] = t[q].first_seq;
			s->bytes += t[q].bytes;
			if (t[q].birth < s->oldest_birth)
				s->oldest_birth = t[q].birth;
		}
		i = j;
	}
	free(t);
	return 0;
}

/* ------------------------------------------------------------ footers */

/* Read and verify the footer window of an object (via the fetch cache). */
static int read_footer(const struct settle_cfg *cfg, const char *key, uint64_t foff,
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

struct src_chunk {
	char key[CHAIN_KEY_MAX];
	struct bundle_entry e; /* chunk_off: in the source */
};

struct extent {
	char key[META_SETTLED_KEY_MAX];
	uint64_t off, len;
	bool copy_ok; /* a store object: server-side copy allowed */
};

struct plan_obj {
	uint64_t epoch, first_seq, first_byte, max_ts;
	uint32_t rev;
	struct bundle_entry *ents; /* chunk_off: in this object */
	uint32_t nents, ents_cap;
	struct extent *ext;
	uint32_t next, ext_cap;
	uint64_t size; /* chunk region */
	uint64_t footer_off;
	uint32_t footer_len;
};

static void plan_free(struct plan_obj *o, uint32_t n)
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
		{
			size_t n = PART_TARGET - pw->len;

			if (n > len)
				n = (size_t)len;
			rc = fetch_cache_read(pw->cfg->fc, x->key, off, n, pw->buf + pw->len);
			if (rc)
				return rc;
			pw->len += n;
			off += n;
			len -= n;
		}
		if (pw->len >= PART_TARGET) {
			rc = pw_flush(pw);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* An object already stands at key (an earlier run, or a lost race):
 * describe those durable bytes instead of ours, if they hold the same
 * records. */
static int adopt(const struct settle_cfg *cfg, const char *key, struct plan_obj *o)
{
	struct bundle_footer f;
	struct bundle_entry first, last;
	uint64_t foff;
	uint32_t flen;
	uint8_t *win;
	int rc;

	rc = object_window(cfg, key, &foff, &flen);
	if (!rc)
		rc = read_footer(cfg, key, foff, flen, &win, &f);
	if (rc)
		return rc;
	rc = f.n == o->nents ? 0 : -EBADMSG;
	if (!rc)
		rc = bundle_footer_get(&f, 0, &first);
	if (!rc)
		rc = bundle_footer_get(&f, f.n - 1, &last);
	free(win);
	if (!rc && (first.first_seq != o->first_seq ||
		    last.first_seq + last.nrec != o->ents[o->nents - 1].first_seq +
							  o->ents[o->nents - 1].nrec))
		rc = -EBADMSG;
	if (rc) {
		/* A crashed run published here from a shorter window; nothing
		 * names it (the rows still name the revision before), so the
		 * caller replaces it. */
		return -ESTALE;
	}
	nv_log(NV_INFO, NV_SUB_SETTLE, "%s: already published; adopting it", key);
	o->footer_off = foff;
	o->footer_len = flen;
	return 0;
}

static int publish_try(const struct settle_cfg *cfg, const char *bucket, uint64_t stream,
		       struct plan_obj *o, bool again)
{
	struct part_writer pw = { .cfg = cfg };
	char key[META_SETTLED_KEY_MAX];
	struct nv_buf footer;
	int rc;

	meta_settled_key(key, sizeof(key), bucket, stream, o->epoch, o->first_seq, o->rev);
	nv_buf_init(&footer, (size_t)BUNDLE_ENTRIES_MAX * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE);
	rc = bundle_footer_build(o->ents, o->nents, o->size, &footer);
	if (rc) {
		nv_buf_free(&footer);
		return rc;
	}
	pw.buf = malloc(PART_TARGET + footer.len);
	if (!pw.buf) {
		nv_buf_free(&footer);
		return -ENOMEM;
	}
	rc = store_mpu_create(cfg->store, key, &pw.mpu);
	for (uint32_t i = 0; !rc && i < o->next; i++)
		rc = pw_extent(&pw, &o->ext[i]);
	if (!rc) {
		memcpy(pw.buf + pw.len, footer.ptr, footer.len);
		pw.len += footer.len;
		rc = pw_flush(&pw);
	}
	if (rc) {
		store_mpu_abort(pw.mpu);
	} else {
		rc = store_mpu_complete(pw.mpu, STORE_CREATE_ONCE);
		if (rc == -EEXIST)
			rc = adopt(cfg, key, o);
		if (rc == -ESTALE && !again) {
			const char *keys[1] = { key };

			nv_log(NV_WARN, NV_SUB_SETTLE, "%s: a crashed run's object from a shorter "
			       "window stands there, named by no row: replacing it", key);
			rc = store_delete(cfg->store, keys, 1);
			free(pw.buf);
			nv_buf_free(&footer);
			return rc ? rc : publish_try(cfg, bucket, stream, o, true);
		}
		if (!rc && o->footer_len == 0) {
			o->footer_off = o->size;
			o->footer_len = (uint32_t)footer.len;
			NV_STAT_ADD(cfg->stats, settled_objects, 1);
		}
	}
	if (rc == -ESTALE)
		rc = -EIO; /* replaced once and still not ours */
	if (rc)
		nv_log(NV_ERR, NV_SUB_SETTLE, "%s: publishing failed: %s", key, strerror(-rc));
	else
		nv_log(NV_DEBUG, NV_SUB_SETTLE, "%s: %u chunks, %llu bytes", key, o->nents,
		       (unsigned long long)o->size);
	free(pw.buf);
	nv_buf_free(&footer);
	return rc;
}

static int publish(const struct settle_cfg *cfg, const char *bucket, uint64_t stream,
		   struct plan_obj *o)
{
	return publish_try(cfg, bucket, stream, o, false);
}

/* ------------------------------------------------------------ one stream */

struct window {
	struct meta_ref *refs;
	uint64_t *vers;
	uint32_t n;
};

static void window_free(struct window *w)
{
	for (uint32_t i = 0; i < w->n; i++)
		meta_ref_clear(&w->refs[i]);
	free(w->refs);
	free(w->vers);
}

/* Delete the window's span refs that the catalog now covers (ascending;
 * the row at skip_seq, the pivot, was replaced, not deleted). */
static int delete_covered(const struct settle_cfg *cfg, uint64_t stream, const uint64_t *keys,
			  uint32_t nkeys, uint64_t covered_end, uint64_t skip_seq)
{
	for (uint32_t i = 0; i < nkeys; i++) {
		struct meta_ref r;
		struct kv_txn *t;
		uint64_t ver;
		int rc;

		if (keys[i] == skip_seq)
			continue;
		meta_ref_init(&r);
		rc = meta_ref_get(cfg->kv, stream, keys[i], &r, &ver);
		if (rc == -ENOENT)
			continue; /* an earlier run deleted it */
		if (rc)
			return rc;
		if (r.kind != META_REF_SPAN || r.end_seq > covered_end) {
			meta_ref_clear(&r);
			continue;
		}
		t = kv_txn_new();
		if (!t) {
			meta_ref_clear(&r);
			return -ENOMEM;
		}
		{
			struct nv_buf k;

			nv_buf_init(&k, KV_KEY_MAX);
			rc = key_ref(&k, stream, keys[i]);
			if (!rc)
				rc = kv_txn_cmp_ver(t, k.ptr, k.len, ver);
			if (!rc)
				rc = kv_txn_del(t, k.ptr, k.len);
			/* The byte twin (its key is this ref's alone: refs.h). */
			if (!rc)
				rc = key_ref_byte(&k, stream, r.first_byte, r.first_seq);
			if (!rc)
				rc = kv_txn_del(t, k.ptr, k.len);
			nv_buf_free(&k);
		}
		if (!rc)
			rc = kv_txn_commit(cfg->kv, t, NULL);
		kv_txn_free(t);
		meta_ref_clear(&r);
		if (rc && rc != -ECANCELED)
			return rc;
	}
	return 0;
}

/* Gather the stream's chunks of the window, in seq order. */
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
			rc = read_footer(cfg, key, r->slots[j].footer_off, r->slots[j].footer_len,
					 &win, &f);
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
				if (n == cap) {
					uint32_t nc = cap ? cap * 2 : 64;
					struct src_chunk *p = realloc(c, nc * sizeof(*p));

					if (!p) {
						rc = -ENOMEM;
						break;
					}
					c = p;
					cap = nc;
				}
				snprintf(c[n].key, sizeof(c[n].key), "%s", key);
				c[n].e = e;
				n++;
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

static int settle_stream(struct era *e, struct era_stream *es)
{
	const struct settle_cfg *cfg = e->cfg;
	struct window w = { 0 };
	struct meta_ref prev, row;
	uint64_t pivot_seq, pivot_ver, max_ts, tail_due = 0;
	struct src_chunk *chunks = NULL;
	struct plan_obj *objs = NULL;
	uint32_t nchunks = 0, nobjs = 0, cap_objs;
	char tail_key[META_SETTLED_KEY_MAX] = "";
	bool have_tail = false, have_prev = false;
	struct kv_txn *t = NULL;
	uint32_t k0 = 0;
	int rc = 0;

	meta_ref_init(&prev);
	meta_ref_init(&row);
	/* The window: the stream's span refs at the era's keys. */
	w.refs = calloc(es->nkeys, sizeof(*w.refs));
	w.vers = calloc(es->nkeys, sizeof(*w.vers));
	if (!w.refs || !w.vers) {
		rc = -ENOMEM;
		goto out;
	}
	/* Refs below the trim point may have been reclaimed already
	 * (trim.c): those keys are gone for good, not a settle in progress. */
	while (k0 < es->nkeys && es->keys[k0] < es->row.trim_seq) {
		struct meta_ref tmp;
		uint64_t v;

		meta_ref_init(&tmp);
		rc = meta_ref_get(cfg->kv, es->id, es->keys[k0], &tmp, &v);
		meta_ref_clear(&tmp);
		if (rc != -ENOENT)
			break;
		k0++;
	}
	if (rc && rc != -ENOENT)
		goto out;
	rc = 0;
	if (k0 == es->nkeys) {
		es->outcome = DROPPED; /* everything here was trimmed away */
		goto out;
	}
	/*
	 * An earlier run may have committed part of this stream's history
	 * and crashed before its clean-up, and this era may reach further
	 * than that run's (more markers ripened since).  Whatever a catalog
	 * row already covers is done: its leftover span refs go, and only
	 * the keys beyond it form the window (settle.h invariant 3).  The
	 * covering row is either the one at the first key (the span ref was
	 * the pivot) or the one before it (a tail extension's pivot).
	 */
	{
		uint64_t cov_seq = 0, cov_byte = 0;
		struct meta_ref r0;

		meta_ref_init(&r0);
		rc = meta_ref_floor_seq(cfg->kv, es->id, es->keys[k0], &r0);
		if (rc == 0 && r0.kind == META_REF_CATALOG && r0.end_seq > es->keys[k0]) {
			cov_seq = r0.end_seq;
			cov_byte = r0.end_byte;
		} else if (rc == 0 && r0.kind == META_REF_SPAN && r0.first_seq == es->keys[k0] &&
			   es->keys[k0] > 0) {
			rc = meta_ref_floor_seq(cfg->kv, es->id, es->keys[k0] - 1, &prev);
			if (rc == 0 && prev.kind == META_REF_CATALOG && prev.end_seq > es->keys[k0]) {
				cov_seq = prev.end_seq;
				cov_byte = prev.end_byte;
			}
			meta_ref_clear(&prev);
			if (rc == -ENOENT)
				rc = 0;
		} else if (rc == -ENOENT) {
			rc = 0;
		}
		meta_ref_clear(&r0);
		if (rc)
			goto out;
		if (cov_seq) {
			rc = delete_covered(cfg, es->id, es->keys, es->nkeys, cov_seq, UINT64_MAX);
			if (rc)
				goto out;
			while (k0 < es->nkeys && es->keys[k0] < cov_seq)
				k0++;
			es->end_seq = cov_seq;
			es->end_byte = cov_byte;
			if (k0 == es->nkeys) {
				es->outcome = SETTLED; /* all of it, by the earlier run */
				goto out;
			}
			nv_log(NV_INFO, NV_SUB_SETTLE, "stream %llu: an earlier run settled up to seq "
			       "%llu; settling on from seq %llu", (unsigned long long)es->id,
			       (unsigned long long)cov_seq, (unsigned long long)es->keys[k0]);
		}
	}
	for (uint32_t i = k0; i < es->nkeys; i++) {
		meta_ref_init(&w.refs[w.n]);
		rc = meta_ref_get(cfg->kv, es->id, es->keys[i], &w.refs[w.n], &w.vers[w.n]);
		if (rc == 0 && w.refs[w.n].kind != META_REF_SPAN)
			rc = -ENOENT;
		if (rc == -ENOENT) {
			meta_ref_clear(&w.refs[w.n]);
			nv_log(NV_WARN, NV_SUB_SETTLE, "stream %llu: no span ref at seq %llu and no "
			       "catalog row covers it: leaving it", (unsigned long long)es->id,
			       (unsigned long long)es->keys[i]);
			es->outcome = RESIDUE;
			rc = 0;
			goto out;
		}
		if (rc)
			goto out;
		if (w.n && w.refs[w.n].first_seq != w.refs[w.n - 1].end_seq) {
			nv_log(NV_ERR, NV_SUB_SETTLE, "stream %llu: refs not contiguous at seq %llu",
			       (unsigned long long)es->id, (unsigned long long)w.refs[w.n].first_seq);
			rc = -EIO;
			goto out;
		}
		w.n++;
	}
	/* Judge: wholly trimmed away. */
	if (w.refs[w.n - 1].end_seq <= es->row.trim_seq) {
		rc = delete_covered(cfg, es->id, es->keys, es->nkeys, es->row.trim_seq, UINT64_MAX);
		if (!rc)
			es->outcome = DROPPED;
		goto out;
	}
	/* Invariant 2: the row before the window is a catalog row, nothing,
	 * or trimmed away. */
	if (w.refs[0].first_seq > 0) {
		rc = meta_ref_floor_seq(cfg->kv, es->id, w.refs[0].first_seq - 1, &prev);
		if (rc == 0) {
			have_prev = true;
			if (prev.kind != META_REF_CATALOG && prev.end_seq > es->row.trim_seq) {
				es->outcome = RESIDUE; /* earlier history settles first */
				goto out;
			}
		} else if (rc != -ENOENT) {
			goto out;
		}
		rc = 0;
	}
	rc = gather_chunks(cfg, es->id, &w, &chunks, &nchunks, &max_ts);
	if (rc)
		goto out;

	/* The plan: the standing tail object first (when there is room). */
	cap_objs = 2 + (uint32_t)(es->bytes / (cfg->output_cap_bytes ? cfg->output_cap_bytes : 1));
	objs = calloc(cap_objs + nchunks, sizeof(*objs));
	if (!objs) {
		rc = -ENOMEM;
		goto out;
	}
	if (have_prev && prev.kind == META_REF_CATALOG && prev.end_seq == w.refs[0].first_seq &&
	    prev.nobjs + cap_objs <= META_REF_OBJS_MAX &&
	    prev.objs[prev.nobjs - 1].footer_off < cfg->output_cap_bytes) {
		const struct meta_ref_obj *to = &prev.objs[prev.nobjs - 1];
		struct bundle_footer f;
		uint8_t *win;
		struct plan_obj *o = &objs[nobjs++];

		meta_settled_key(tail_key, sizeof(tail_key), prev.bucket, es->id, to->epoch,
				 to->first_seq, to->rev);
		rc = read_footer(cfg, tail_key, to->footer_off, to->footer_len, &win, &f);
		if (rc)
			goto out;
		o->epoch = to->epoch;
		o->first_seq = to->first_seq;
		o->first_byte = to->first_byte;
		o->rev = to->rev + 1;
		for (uint32_t i = 0; !rc && i < f.n; i++) {
			struct bundle_entry be;

			rc = bundle_footer_get(&f, i, &be);
			if (!rc)
				rc = obj_add_chunk(o, tail_key, &be, true);
		}
		free(win);
		if (rc)
			goto out;
		have_tail = true;
	}
	for (uint32_t i = 0; i < nchunks; i++) {
		struct plan_obj *o = nobjs ? &objs[nobjs - 1] : NULL;

		if (!o || (o->size + chunks[i].e.comp_len > cfg->output_cap_bytes && o->nents)) {
			o = &objs[nobjs++];
			o->epoch = e->chain.epoch;
			o->first_seq = chunks[i].e.first_seq;
			o->first_byte = chunks[i].e.first_byte;
		}
		/* A store object: pw_extent() copies it server-side when the
		 * extent reaches PART_MIN, else reads it from the warm copy. */
		rc = obj_add_chunk(o, chunks[i].key, &chunks[i].e, true);
		if (rc)
			goto out;
	}
	for (uint32_t i = 0; i < nobjs; i++) {
		rc = publish(cfg, es->row.bucket, es->id, &objs[i]);
		if (rc)
			goto out;
	}
	rc = NV_FP("settle.after_publish");
	if (rc)
		goto out;

	/* The catalog row covering the window, and the one CAS. */
	row.stream_id = es->id;
	row.kind = META_REF_CATALOG;
	snprintf(row.bucket, sizeof(row.bucket), "%s", es->row.bucket);
	row.end_seq = w.refs[w.n - 1].end_seq;
	row.end_byte = w.refs[w.n - 1].end_byte;
	row.max_ts = max_ts;
	if (have_tail) {
		pivot_seq = prev.first_seq;
		row.first_seq = prev.first_seq;
		row.first_byte = prev.first_byte;
		if (prev.max_ts > row.max_ts)
			row.max_ts = prev.max_ts;
		for (uint32_t i = 0; !rc && i + 1 < prev.nobjs; i++)
			rc = meta_ref_add_obj(&row, &prev.objs[i]);
	} else {
		pivot_seq = w.refs[0].first_seq;
		row.first_seq = w.refs[0].first_seq;
		row.first_byte = w.refs[0].first_byte;
	}
	for (uint32_t i = 0; !rc && i < nobjs; i++) {
		struct meta_ref_obj ro = {
			.first_seq = objs[i].first_seq, .first_byte = objs[i].first_byte,
			.epoch = objs[i].epoch, .rev = objs[i].rev,
			.footer_off = objs[i].footer_off, .footer_len = objs[i].footer_len,
			.max_ts = objs[i].max_ts,
		};

		rc = meta_ref_add_obj(&row, &ro);
	}
	if (rc)
		goto out;
	{
		struct meta_ref cur;

		meta_ref_init(&cur);
		rc = meta_ref_get(cfg->kv, es->id, pivot_seq, &cur, &pivot_ver);
		if (!rc && have_tail && cur.end_seq != prev.end_seq)
			rc = -ECANCELED; /* the catalog row moved since we read it */
		if (!rc && !have_tail && pivot_ver != w.vers[0])
			rc = -ECANCELED;
		meta_ref_clear(&cur);
		if (rc)
			goto out;
	}
	t = kv_txn_new();
	if (!t) {
		rc = -ENOMEM;
		goto out;
	}
	{
		struct nv_buf k;

		nv_buf_init(&k, KV_KEY_MAX);
		rc = key_ref(&k, es->id, pivot_seq);
		if (!rc)
			rc = kv_txn_cmp_ver(t, k.ptr, k.len, pivot_ver);
		nv_buf_free(&k);
	}
	if (!rc)
		rc = meta_ref_txn_put(t, &row);
	if (!rc && have_tail) {
		tail_due = nv_now_wall_ns() + cfg->read_grace_ns;
		rc = meta_reclaim_txn_add(t, tail_due, tail_key);
	}
	if (!rc)
		rc = kv_txn_commit(cfg->kv, t, NULL);
	if (rc)
		goto out;
	rc = NV_FP("settle.after_commit");
	if (rc)
		goto out;
	rc = delete_covered(cfg, es->id, es->keys, es->nkeys, row.end_seq, pivot_seq);
	if (rc)
		goto out;
	es->outcome = SETTLED;
	es->end_seq = row.end_seq;
	es->end_byte = row.end_byte;
	es->objects = nobjs;
	nv_log(NV_DEBUG, NV_SUB_SETTLE, "stream %llu (%s/%s): seq [%llu, %llu) settled into %u "
	       "object(s)%s", (unsigned long long)es->id, es->row.bucket, es->row.name,
	       (unsigned long long)w.refs[0].first_seq, (unsigned long long)row.end_seq, nobjs,
	       have_tail ? " extending the tail" : "");
out:
	kv_txn_free(t);
	plan_free(objs, nobjs);
	free(chunks);
	meta_ref_clear(&prev);
	meta_ref_clear(&row);
	window_free(&w);
	if (rc) {
		if (rc != -ECANCELED)
			nv_log(NV_WARN, NV_SUB_SETTLE, "stream %llu: settle failed (%s); retried later",
			       (unsigned long long)es->id, strerror(-rc));
		es->outcome = RESIDUE;
	}
	return rc;
}

/* ------------------------------------------------------------ the era */

static void *worker_main(void *arg)
{
	struct era *e = arg;

	for (;;) {
		struct era_stream *es;

		pthread_mutex_lock(&e->lock);
		while (e->next < e->nstreams && e->streams[e->next].outcome != PENDING)
			e->next++;
		es = e->next < e->nstreams ? &e->streams[e->next++] : NULL;
		pthread_mutex_unlock(&e->lock);
		if (!es || (e->cfg->cancelled && e->cfg->cancelled(e->cfg->cancel_arg)))
			break;
		(void)settle_stream(e, es);
	}
	return NULL;
}

/* Which streams settle, which resolve without bytes, which wait. */
static int judge_streams(struct era *e)
{
	const struct settle_cfg *cfg = e->cfg;
	uint64_t cap = cfg->age_cap_ns[e->chain.cls];

	for (uint32_t i = 0; i < e->nstreams; i++) {
		struct era_stream *es = &e->streams[i];
		int rc = meta_stream_get(cfg->kv, es->id, &es->row, NULL);

		if (rc == -ENOENT || (!rc && es->row.deleted_ns)) {
			es->outcome = DROPPED; /* reclamation removes its rows */
			continue;
		}
		if (rc)
			return rc;
		if (es->bytes >= cfg->trigger_bytes ||
		    (es->oldest_birth != UINT64_MAX && e->now >= es->oldest_birth + cap))
			es->outcome = PENDING;
		else
			es->outcome = RESIDUE;
	}
	return 0;
}

/* Keep residue in the markers; delete markers with none.  Returns how
 * many markers were deleted or rewritten. */
static int resolve_markers(struct era *e, int *changed)
{
	const struct settle_cfg *cfg = e->cfg;
	uint64_t cap = cfg->age_cap_ns[e->chain.cls];
	int rc = NV_FP("settle.before_resolve");

	for (uint32_t i = 0; !rc && i < e->nmarks; i++) {
		struct meta_marker *m = &e->marks[i];
		struct kv_txn *t;
		uint32_t keep = 0;

		for (uint32_t j = 0; j < m->nstreams; j++) {
			uint64_t id = m->streams[j].stream_id;
			uint32_t lo = 0, hi = e->nstreams;

			while (lo < hi) { /* streams are sorted by id */
				uint32_t mid = lo + (hi - lo) / 2;

				if (e->streams[mid].id < id)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < e->nstreams && e->streams[lo].id == id &&
			    e->streams[lo].outcome == RESIDUE)
				m->streams[keep++] = m->streams[j];
		}
		if (keep == m->nstreams && m->ripe_ns == m->birth_ns + cap && !m->crossed)
			continue; /* unchanged */
		t = kv_txn_new();
		if (!t)
			return -ENOMEM;
		if (keep == 0) {
			rc = meta_marker_txn_del(t, m->cls, m->star, m->epoch, m->first_slot);
		} else {
			m->nstreams = keep;
			m->crossed = 0;
			m->ripe_ns = m->birth_ns + cap;
			rc = meta_marker_txn_put(t, m);
		}
		if (!rc)
			rc = kv_txn_commit(cfg->kv, t, NULL);
		kv_txn_free(t);
		if (!rc)
			(*changed)++;
	}
	return rc;
}

static int first_marker(void *arg, const struct meta_marker *m)
{
	*(uint64_t *)arg = m->first_slot;
	return 1;
}

/* The settle frontier: the first marker left, else the chain's end. */
static int advance_frontier(const struct settle_cfg *cfg, const struct meta_chain *c)
{
	struct meta_cursors cur;
	uint64_t ver, front = c->state == CHAIN_LIVE ? c->checkpoint : c->cut;
	struct kv_txn *t;
	int rc;

	rc = meta_marker_list(cfg->kv, c->cls, c->star, c->epoch, first_marker, &front);
	if (!rc)
		rc = meta_cursors_get(cfg->kv, c->cls, c->star, c->epoch, &cur, &ver);
	if (rc || front <= cur.settle_frontier)
		return rc;
	cur.settle_frontier = front;
	t = kv_txn_new();
	if (!t)
		return -ENOMEM;
	rc = meta_cursors_txn_put(t, &cur, ver);
	if (!rc)
		rc = kv_txn_commit(cfg->kv, t, NULL);
	kv_txn_free(t);
	return rc;
}

int settle_chain(const struct settle_cfg *cfg, const struct meta_chain *c, uint64_t now_ns)
{
	struct era e = { .cfg = cfg, .chain = *c, .now = now_ns };
	uint64_t t0 = nv_now_mono_ns(), bytes = 0;
	uint32_t last = UINT32_MAX, settled = 0, residue = 0, dropped = 0, objects = 0;
	int rc, changed = 0;

	if (c->state == CHAIN_FENCED)
		return 0; /* recovery first */
	pthread_mutex_init(&e.lock, NULL);
	rc = meta_marker_list(cfg->kv, c->cls, c->star, c->epoch, collect_marker, &e);
	if (rc)
		goto out;
	for (uint32_t i = 0; i < e.nmarks; i++)
		if (e.marks[i].ripe_ns <= now_ns)
			last = i;
	if (last == UINT32_MAX)
		goto out; /* nothing ripe */
	for (uint32_t i = last + 1; i < e.nmarks; i++)
		meta_marker_clear(&e.marks[i]);
	e.nmarks = last + 1;
	rc = group_streams(&e);
	if (!rc)
		rc = judge_streams(&e);
	if (rc)
		goto out;
	NV_STAT_ADD(cfg->stats, settle_jobs, 1);

	/* Warm exactly the era's bundles (each read once).  Over the budget
	 * (-ENOBUFS) the workers read a bundle from the store instead; a
	 * slot the store cannot give (a zone down, no good copy) fails the
	 * era here, after one slot's cost, not one per slot: the era re-runs
	 * at the next pass. */
	for (uint64_t slot = e.marks[0].first_slot; slot < e.marks[last].end_slot; slot++) {
		char key[CHAIN_KEY_MAX];
		int w;

		if (cfg->cancelled && cfg->cancelled(cfg->cancel_arg)) {
			rc = -ESHUTDOWN;
			goto out;
		}
		chain_slot_key(key, sizeof(key), c->cls, c->star, c->epoch, slot);
		w = fetch_cache_warm(cfg->fc, key);
		if (w && w != -ENOBUFS && w != -ENOENT) {
			nv_log(NV_WARN, NV_SUB_SETTLE, "%s: unreadable (%s); the era [%llu, %llu) "
			       "settles later", key, strerror(-w),
			       (unsigned long long)e.marks[0].first_slot,
			       (unsigned long long)e.marks[last].end_slot);
			fetch_cache_clear(cfg->fc);
			rc = w;
			goto out;
		}
	}

	{
		unsigned nw = cfg->workers ? cfg->workers : 1;
		pthread_t *th = calloc(nw, sizeof(*th));
		unsigned started = 0;

		if (th)
			for (; started < nw; started++)
				if (pthread_create(&th[started], NULL, worker_main, &e))
					break;
		if (started == 0)
			worker_main(&e); /* no threads: do it here */
		for (unsigned i = 0; i < started; i++)
			pthread_join(th[i], NULL);
		free(th);
	}
	fetch_cache_clear(cfg->fc);
	if (cfg->cancelled && cfg->cancelled(cfg->cancel_arg)) {
		/* Streams done so far are committed; the rest and the markers
		 * wait for the next start (as after a crash here). */
		rc = -ESHUTDOWN;
		goto out;
	}
	for (uint32_t i = 0; i < e.nstreams; i++) {
		struct era_stream *es = &e.streams[i];

		if (es->outcome == SETTLED) {
			settled++;
			objects += es->objects;
			bytes += es->bytes;
			if (cfg->settled)
				cfg->settled(cfg->arg, es->id, es->end_seq, es->end_byte);
		} else if (es->outcome == DROPPED) {
			dropped++;
		} else {
			residue++;
		}
	}
	rc = resolve_markers(&e, &changed);
	if (!rc)
		rc = advance_frontier(cfg, c);
	nv_log(settled || dropped ? NV_INFO : NV_DEBUG, NV_SUB_SETTLE,
	       "%s/%s epoch %llu slots [%llu, %llu): %u stream(s) settled into %u object(s) "
	       "(%llu bytes), %u dropped, %u residue, in %llu ms",
	       nv_class_name(c->cls), c->star, (unsigned long long)c->epoch,
	       (unsigned long long)e.marks[0].first_slot,
	       (unsigned long long)e.marks[last].end_slot, settled, objects,
	       (unsigned long long)bytes, dropped, residue,
	       (unsigned long long)((nv_now_mono_ns() - t0) / NV_NS_PER_MS));
out:
	for (uint32_t i = 0; i < e.nmarks; i++)
		meta_marker_clear(&e.marks[i]);
	free(e.marks);
	for (uint32_t i = 0; i < e.nstreams; i++)
		free(e.streams[i].keys);
	free(e.streams);
	pthread_mutex_destroy(&e.lock);
	if (rc) {
		nv_log(NV_WARN, NV_SUB_SETTLE, "%s/%s epoch %llu: settle pass failed: %s",
		       nv_class_name(c->cls), c->star, (unsigned long long)c->epoch, strerror(-rc));
		return rc;
	}
	return changed > 0 || settled > 0;
}
