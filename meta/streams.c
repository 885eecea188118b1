/*
 * streams.c - see streams.h.
 *
 * Every multi-row change is one kv transaction that compares the versions
 * it read, retried a bounded number of times (CAS_RETRIES) on -ECANCELED
 * (a concurrent writer won) by kv_cas_run(); each change is a build
 * function (*_build) that re-reads and re-decides, so "already exists"
 * and "gone meanwhile" come out as -EEXIST / -ENOENT, never as a lost
 * update.
 *
 * Bucket rows are meta/buckets.c; what both share (row buffers, the
 * owner codec, the id counter, CAS runs) is meta/rowbuf.c.
 */
#include "config.h"
#include "meta/streams.h"
#include "meta/keys.h"
#include "meta/rowbuf.h"
#include "meta/tuple.h"
#include "src/base/clock.h"
#include "src/base/log.h"
#include "src/base/wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- codecs */
int meta_stream_encode(const struct meta_stream *s, struct nv_buf *out)
{
	int rc;

	nv_buf_reset(out);
	rc = nv_wr_u8(out, s->durable ? META_ROW_V3 : META_ROW_V2);
	if (!rc)
		rc = nv_wr_u64(out, s->id);
	if (!rc)
		rc = nv_wr_str(out, s->bucket);
	if (!rc)
		rc = nv_wr_str(out, s->name);
	if (!rc)
		rc = nv_wr_u8(out, s->cls);
	if (!rc)
		rc = nv_wr_u64(out, s->created_ns);
	if (!rc)
		rc = nv_wr_u64(out, s->trim_seq);
	if (!rc)
		rc = nv_wr_u64(out, s->trim_byte);
	if (!rc)
		rc = nv_wr_u64(out, s->deleted_ns);
	if (!rc)
		rc = meta_owner_write(out, &s->own);
	if (!rc && s->durable)
		rc = nv_wr_u8(out, s->durable);
	return rc;
}

static int rd_name(struct nv_rd *r, char *dst, size_t cap)
{
	uint32_t n;
	const uint8_t *p = nv_rd_bytes(r, &n, (uint32_t)cap - 1);

	if (!p || memchr(p, 0, n) || memchr(p, '/', n) || n == 0)
		return -EBADMSG;
	memcpy(dst, p, n);
	dst[n] = 0;
	return 0;
}

int meta_stream_decode(const void *p, size_t n, struct meta_stream *s)
{
	struct nv_rd r;
	uint8_t ver;

	nv_rd_init(&r, p, n);
	memset(s, 0, sizeof(*s));
	ver = nv_rd_u8(&r);
	if (ver != META_ROW_V1 && ver != META_ROW_V2 && ver != META_ROW_V3)
		return -EBADMSG;
	s->id = nv_rd_u64(&r);
	if (rd_name(&r, s->bucket, sizeof(s->bucket)) ||
	    rd_name(&r, s->name, sizeof(s->name)))
		return -EBADMSG;
	s->cls = nv_rd_u8(&r);
	s->created_ns = nv_rd_u64(&r);
	s->trim_seq = nv_rd_u64(&r);
	s->trim_byte = nv_rd_u64(&r);
	s->deleted_ns = nv_rd_u64(&r);
	meta_owner_read(&r, ver, META_STREAM_MODE, &s->own);
	if (ver == META_ROW_V3) {
		s->durable = nv_rd_u8(&r);
		/* v3 is written only for an override: DEFAULT there is corrupt */
		if (s->durable != META_DURABLE_WRITE && s->durable != META_DURABLE_FSYNC)
			return -EBADMSG;
	}
	if (nv_rd_done(&r) || s->cls >= NV_CLASS_COUNT || s->own.mode > 07777)
		return -EBADMSG;
	return 0;
}

/* ---------------------------------------------------------------- streams */

int meta_stream_get(struct kv *kv, uint64_t id, struct meta_stream *out, uint64_t *ver)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_stream_id(&k, id);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (!rc)
		rc = meta_stream_decode(v.ptr, v.len, out);
	if (!rc && out->id != id)
		rc = -EBADMSG;
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

static int name_row_read(struct kv *kv, const char *bucket, const char *name,
			 uint64_t *id, uint64_t *ver)
{
	struct nv_buf k, v;
	struct nv_rd r;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_stream_name(&k, bucket, name);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (!rc) {
		nv_rd_init(&r, v.ptr, v.len);
		if (nv_rd_u8(&r) != META_ROW_V1)
			rc = -EBADMSG;
		*id = nv_rd_u64(&r);
		if (!rc)
			rc = nv_rd_done(&r);
	}
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_stream_lookup(struct kv *kv, const char *bucket, const char *name,
		       struct meta_stream *out)
{
	uint64_t id, ver;
	int rc;

	if (strlen(bucket) > META_BUCKET_NAME_MAX || strlen(name) > META_STREAM_NAME_MAX)
		return -ENOENT;
	rc = name_row_read(kv, bucket, name, &id, &ver);
	if (!rc)
		rc = meta_stream_get(kv, id, out, NULL);
	if (!rc && out->deleted_ns)
		rc = -ENOENT; /* tombstoned between the two reads */
	return rc;
}

struct stream_create_arg {
	struct meta_rowbufs b;
	const char *bucket, *name;
	int cls;
	uint64_t now_ns;
	const struct meta_owner *own;
	struct meta_stream s;
};

static int stream_create_build(void *arg, struct kv *kv, struct kv_txn *t)
{
	struct stream_create_arg *a = arg;
	struct meta_rowbufs *b = &a->b;
	struct meta_stream *s = &a->s;
	struct meta_bucket bk;
	uint64_t bver, next, cver;
	uint8_t nv[9];
	int rc;

	/* The bucket row: must exist; rewriting it bumps its version so a
	 * concurrent rmdir's compare fails (invariant 3). */
	rc = meta_bucket_row_read(kv, b, a->bucket, &bver);
	if (!rc)
		rc = meta_bucket_decode(b->v.ptr, b->v.len, a->bucket, &bk);
	if (!rc)
		rc = meta_id_counter_read(kv, &b->k2, &b->v2, &next, &cver);
	if (rc)
		return rc;
	memset(s, 0, sizeof(*s));
	s->id = next;
	strcpy(s->bucket, a->bucket);
	strcpy(s->name, a->name);
	s->cls = (uint8_t)(a->cls < 0 ? bk.default_class : a->cls);
	s->created_ns = a->now_ns;
	meta_owner_or_default(a->own, META_STREAM_MODE, &s->own);
	rc = kv_txn_cmp_ver(t, b->k.ptr, b->k.len, bver);
	if (!rc)
		rc = kv_txn_put(t, b->k.ptr, b->k.len, b->v.ptr, b->v.len);
	if (!rc)
		rc = meta_id_counter_txn_put(t, &b->k2, next + 1, cver);
	if (!rc)
		rc = key_stream_name(&b->k3, a->bucket, a->name);
	if (!rc)
		rc = kv_txn_cmp_ver(t, b->k3.ptr, b->k3.len, 0);
	nv[0] = META_ROW_V1;
	for (int j = 0; j < 8; j++)
		nv[1 + j] = (uint8_t)(s->id >> (8 * j));
	if (!rc)
		rc = kv_txn_put(t, b->k3.ptr, b->k3.len, nv, sizeof(nv));
	if (!rc)
		rc = key_stream_id(&b->k3, s->id);
	if (!rc)
		rc = meta_stream_encode(s, &b->v3);
	if (!rc)
		rc = kv_txn_cmp_ver(t, b->k3.ptr, b->k3.len, 0);
	if (!rc)
		rc = kv_txn_put(t, b->k3.ptr, b->k3.len, b->v3.ptr, b->v3.len);
	return rc;
}

/* Lost the race: to a creator of the same name (-EEXIST), or retry. */
static int stream_create_cancelled(void *arg, struct kv *kv)
{
	struct stream_create_arg *a = arg;
	uint64_t id, ver;

	return name_row_read(kv, a->bucket, a->name, &id, &ver) == 0 ? -EEXIST : -ECANCELED;
}

int meta_stream_create(struct kv *kv, const char *bucket, const char *name,
		       int cls, uint64_t now_ns, const struct meta_owner *own,
		       struct meta_stream *out)
{
	static const struct kv_cas how = {
		.build = stream_create_build,
		.cancelled = stream_create_cancelled,
		.attempts = META_CAS_RETRIES,
	};
	struct stream_create_arg a = { .bucket = bucket, .name = name, .cls = cls,
				       .now_ns = now_ns, .own = own };
	int rc;

	if (strlen(bucket) > META_BUCKET_NAME_MAX || strlen(name) > META_STREAM_NAME_MAX)
		return -ENAMETOOLONG;
	if (cls >= NV_CLASS_COUNT)
		return -EINVAL;
	rc = meta_rows_cas(kv, &how, &a, &a.b);
	if (!rc && out)
		*out = a.s;
	return rc;
}

struct trim_arg {
	uint64_t seq, byte;
};

static int set_trim_fn(struct meta_stream *s, void *arg)
{
	struct trim_arg *t = arg;

	if (t->seq < s->trim_seq)
		return -ERANGE;
	if (t->seq == s->trim_seq)
		return 1;
	s->trim_seq = t->seq;
	s->trim_byte = t->byte;
	return 0;
}

struct stream_update_arg {
	struct meta_rowbufs b;
	uint64_t id;
	int (*mutate)(struct meta_stream *s, void *arg);
	void *arg;
	bool drop_name;
	uint64_t now_ns;
};

static int stream_update_build(void *arg, struct kv *kv, struct kv_txn *t)
{
	struct stream_update_arg *a = arg;
	struct meta_rowbufs *b = &a->b;
	struct meta_stream s;
	uint64_t ver;
	int rc;

	rc = meta_stream_get(kv, a->id, &s, &ver);
	if (!rc && s.deleted_ns)
		rc = -ENOENT;
	if (!rc && a->mutate)
		rc = a->mutate(&s, a->arg);
	if (rc == 1) /* no change needed */
		return KV_CAS_DONE;
	if (rc)
		return rc;
	if (a->drop_name)
		s.deleted_ns = a->now_ns ? a->now_ns : 1;
	rc = key_stream_id(&b->k, a->id);
	if (!rc)
		rc = meta_stream_encode(&s, &b->v);
	if (!rc)
		rc = kv_txn_cmp_ver(t, b->k.ptr, b->k.len, ver);
	if (!rc)
		rc = kv_txn_put(t, b->k.ptr, b->k.len, b->v.ptr, b->v.len);
	if (!rc && a->drop_name) {
		rc = key_stream_name(&b->k2, s.bucket, s.name);
		if (!rc)
			rc = kv_txn_del(t, b->k2.ptr, b->k2.len);
	}
	/* Deleted or trimmed history: queue its reclamation (trim.c). */
	if (!rc && (a->drop_name || a->mutate == set_trim_fn)) {
		rc = key_reclaim_stream(&b->k3, a->id);
		if (!rc)
			rc = kv_txn_put(t, b->k3.ptr, b->k3.len, "", 0);
	}
	return rc;
}

/* Rewrite a stream row under a compare of the version read; the mutate
 * callback edits it and may refuse with an errno, or return 1 for "no change". */
static int stream_update(struct kv *kv, uint64_t id,
			 int (*mutate)(struct meta_stream *s, void *arg), void *arg,
			 bool drop_name, uint64_t now_ns)
{
	static const struct kv_cas how = {
		.build = stream_update_build,
		.attempts = META_CAS_RETRIES,
	};
	struct stream_update_arg a = { .id = id, .mutate = mutate, .arg = arg,
				       .drop_name = drop_name, .now_ns = now_ns };

	return meta_rows_cas(kv, &how, &a, &a.b);
}

int meta_stream_delete(struct kv *kv, uint64_t id, uint64_t now_ns)
{
	return stream_update(kv, id, NULL, NULL, true, now_ns);
}

static int set_class_fn(struct meta_stream *s, void *arg)
{
	s->cls = (uint8_t)*(unsigned *)arg;
	return 0;
}

int meta_stream_set_class(struct kv *kv, uint64_t id, unsigned cls)
{
	if (cls >= NV_CLASS_COUNT)
		return -EINVAL;
	return stream_update(kv, id, set_class_fn, &cls, false, 0);
}

static int set_owner_fn(struct meta_stream *s, void *arg)
{
	meta_owner_or_default(arg, META_STREAM_MODE, &s->own);
	return 0;
}

int meta_stream_set_owner(struct kv *kv, uint64_t id, const struct meta_owner *own)
{
	struct meta_owner o = *own;

	return stream_update(kv, id, set_owner_fn, &o, false, 0);
}

static int set_durable_fn(struct meta_stream *s, void *arg)
{
	unsigned d = *(unsigned *)arg;

	if (s->durable == d)
		return 1; /* no change */
	s->durable = (uint8_t)d;
	return 0;
}

int meta_stream_set_durable(struct kv *kv, uint64_t id, unsigned durable)
{
	if (durable > META_DURABLE_FSYNC)
		return -EINVAL;
	return stream_update(kv, id, set_durable_fn, &durable, false, 0);
}

struct rename_arg {
	struct meta_rowbufs b;
	const char *bucket, *from, *to;
	bool noreplace;
	uint64_t now_ns;
	uint64_t expect_tid; /* the stream the caller found under `to`, 0: none */
	uint64_t tlease_ver; /* its lease row's version the caller holds, 0: vacant */
	uint64_t replaced; /* the id of the stream `to` replaced, 0: none */
};

/* Put a stream row (key and value built in b->k3/b->v3) under a compare
 * of the version ver read. */
static int txn_put_stream(struct kv_txn *t, struct meta_rowbufs *b, const struct meta_stream *s,
			  uint64_t ver)
{
	int rc = key_stream_id(&b->k3, s->id);

	if (!rc)
		rc = meta_stream_encode(s, &b->v3);
	if (!rc)
		rc = kv_txn_cmp_ver(t, b->k3.ptr, b->k3.len, ver);
	if (!rc)
		rc = kv_txn_put(t, b->k3.ptr, b->k3.len, b->v3.ptr, b->v3.len);
	return rc;
}

/* Tombstone the live stream `to` (id tid) that a rename replaces, as
 * stream_update_build() does for a delete, under a compare of its lease
 * row at a->tlease_ver (0: absent), so a star that took or moved the
 * lease since the caller looked fails the commit (the header's
 * meta_stream_rename()); its name row is rewritten by the caller. */
static int rename_drop_target(struct rename_arg *a, struct kv *kv, struct kv_txn *t,
			      uint64_t tid)
{
	struct meta_rowbufs *b = &a->b;
	struct meta_stream ts;
	uint64_t ver;
	int rc = meta_stream_get(kv, tid, &ts, &ver);

	if (rc)
		return rc == -ENOENT ? -ECANCELED : rc;
	ts.deleted_ns = a->now_ns ? a->now_ns : 1;
	rc = txn_put_stream(t, b, &ts, ver);
	if (!rc)
		rc = key_reclaim_stream(&b->k3, tid);
	if (!rc)
		rc = kv_txn_put(t, b->k3.ptr, b->k3.len, "", 0);
	/* The lease fence (meta/leases.h invariant 3), with the key's one
	 * builder: meta/leases.c includes this module, so not its helper. */
	if (!rc)
		rc = key_lease(&b->k3, tid);
	if (!rc)
		rc = kv_txn_cmp_ver(t, b->k3.ptr, b->k3.len, a->tlease_ver);
	a->replaced = tid;
	return rc;
}

static int rename_build(void *arg, struct kv *kv, struct kv_txn *t)
{
	struct rename_arg *a = arg;
	struct meta_rowbufs *b = &a->b;
	struct meta_stream s;
	uint64_t id, fver, sver, tid, tver = 0;
	uint8_t nv[9];
	int rc;

	a->replaced = 0;
	rc = name_row_read(kv, a->bucket, a->from, &id, &fver);
	if (!rc)
		rc = meta_stream_get(kv, id, &s, &sver);
	if (!rc && s.deleted_ns)
		rc = -ENOENT;
	if (rc)
		return rc;
	rc = name_row_read(kv, a->bucket, a->to, &tid, &tver);
	if (rc == 0 && a->noreplace)
		return -EEXIST;
	if (rc == -ENOENT)
		tid = 0;
	if ((rc == 0 || rc == -ENOENT) && !a->noreplace && tid != a->expect_tid)
		return -ESTALE; /* not the target the caller resolved */
	if (rc == 0)
		rc = rename_drop_target(a, kv, t, tid);
	else if (rc == -ENOENT)
		rc = 0; /* no stream `to`: its name row must stay absent (tver 0) */
	if (rc)
		return rc;
	rc = key_stream_name(&b->k, a->bucket, a->from);
	if (!rc)
		rc = kv_txn_cmp_ver(t, b->k.ptr, b->k.len, fver);
	if (!rc)
		rc = kv_txn_del(t, b->k.ptr, b->k.len);
	nv[0] = META_ROW_V1;
	for (int j = 0; j < 8; j++)
		nv[1 + j] = (uint8_t)(id >> (8 * j));
	if (!rc)
		rc = key_stream_name(&b->k2, a->bucket, a->to);
	if (!rc)
		rc = kv_txn_cmp_ver(t, b->k2.ptr, b->k2.len, tver);
	if (!rc)
		rc = kv_txn_put(t, b->k2.ptr, b->k2.len, nv, sizeof(nv));
	strcpy(s.name, a->to);
	return rc ? rc : txn_put_stream(t, b, &s, sver);
}

/* Lost the race: to a star that took or moved the target's lease since
 * the caller looked (-ESTALE: building again would compare the same
 * stale version), or retry. */
static int rename_cancelled(void *arg, struct kv *kv)
{
	struct rename_arg *a = arg;
	uint64_t ver = 0;
	int rc;

	if (!a->replaced)
		return -ECANCELED;
	rc = key_lease(&a->b.k3, a->replaced);
	if (!rc)
		rc = kv_get(kv, a->b.k3.ptr, a->b.k3.len, &a->b.v3, &ver);
	if (rc == -ENOENT) /* vacant: no row, version 0 */
		return a->tlease_ver ? -ESTALE : -ECANCELED;
	if (rc)
		return rc;
	return ver != a->tlease_ver ? -ESTALE : -ECANCELED;
}

int meta_stream_rename(struct kv *kv, const char *bucket, const char *from, const char *to,
		       bool noreplace, uint64_t expect_tid, uint64_t tlease_ver, uint64_t now_ns,
		       uint64_t *replaced)
{
	static const struct kv_cas how = {
		.build = rename_build,
		.cancelled = rename_cancelled,
		.attempts = META_CAS_RETRIES,
	};
	struct rename_arg a = { .bucket = bucket, .from = from, .to = to,
				.noreplace = noreplace, .expect_tid = expect_tid,
				.tlease_ver = tlease_ver, .now_ns = now_ns };
	struct meta_stream tmp;
	int rc;

	if (replaced)
		*replaced = 0;
	if (strlen(bucket) > META_BUCKET_NAME_MAX || strlen(from) > META_STREAM_NAME_MAX)
		return -ENOENT;
	if (strlen(to) > META_STREAM_NAME_MAX)
		return -ENAMETOOLONG;
	if (!strcmp(from, to))
		return meta_stream_lookup(kv, bucket, from, &tmp);
	rc = meta_rows_cas(kv, &how, &a, &a.b);
	if (!rc && replaced)
		*replaced = a.replaced;
	return rc;
}

int meta_stream_set_trim(struct kv *kv, uint64_t id, uint64_t seq, uint64_t byte)
{
	struct trim_arg a = { seq, byte };

	return stream_update(kv, id, set_trim_fn, &a, false, 0);
}

struct stream_list_arg {
	struct kv *kv;
	meta_stream_fn fn;
	void *arg;
	/* Names are collected per page and resolved after the range visit,
	 * because a visit must not call back into the kv. */
	uint64_t ids[256];
	int n;
	char last[META_STREAM_NAME_MAX + 1];
};

static int name_visit(void *arg, const uint8_t *key, size_t klen,
		      const uint8_t *val, size_t vlen, uint64_t ver)
{
	struct stream_list_arg *a = arg;
	struct nv_tup_rd r;
	struct nv_rd vr;
	char tagbuf[8], bucket[META_BUCKET_NAME_MAX + 1];

	nv_tup_rd_init(&r, key, klen);
	if (nv_tup_get_str(&r, tagbuf, sizeof(tagbuf), NULL) ||
	    nv_tup_get_str(&r, bucket, sizeof(bucket), NULL) ||
	    nv_tup_get_str(&r, a->last, sizeof(a->last), NULL))
		return -EBADMSG;
	nv_rd_init(&vr, val, vlen);
	if (nv_rd_u8(&vr) != META_ROW_V1)
		return -EBADMSG;
	a->ids[a->n++] = nv_rd_u64(&vr);
	if (nv_rd_done(&vr))
		return -EBADMSG;
	return a->n == (int)(sizeof(a->ids) / sizeof(a->ids[0])) ? 1 : 0;
}

int meta_stream_list(struct kv *kv, const char *bucket, const char *after,
		     meta_stream_fn fn, void *arg)
{
	struct stream_list_arg *a;
	struct nv_buf sp;
	int rc = 0;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->kv = kv;
	a->fn = fn;
	a->arg = arg;
	if (after)
		snprintf(a->last, sizeof(a->last), "%s", after);
	nv_buf_init(&sp, KV_KEY_MAX);
	rc = key_stream_names_of(&sp, bucket);
	while (!rc) {
		char cursor[META_STREAM_NAME_MAX + 1];

		a->n = 0;
		strcpy(cursor, a->last);
		rc = meta_list_after(kv, &sp, cursor, name_visit, a);
		if (rc < 0)
			break;
		rc = 0;
		for (int i = 0; i < a->n && !rc; i++) {
			struct meta_stream s;
			int g = meta_stream_get(kv, a->ids[i], &s, NULL);

			if (g == -ENOENT || (!g && s.deleted_ns))
				continue; /* deleted meanwhile */
			rc = g ? g : fn(arg, &s);
		}
		if (rc || a->n < (int)(sizeof(a->ids) / sizeof(a->ids[0])))
			break;
	}
	nv_buf_free(&sp);
	free(a);
	return rc < 0 ? rc : 0;
}

struct all_arg {
	meta_stream_fn fn;
	void *arg;
	struct meta_stream rows[64];
	int n;
	uint64_t last_id;
};

static int all_visit(void *arg, const uint8_t *key, size_t klen,
		     const uint8_t *val, size_t vlen, uint64_t ver)
{
	struct all_arg *a = arg;

	if (meta_stream_decode(val, vlen, &a->rows[a->n]))
		return -EBADMSG;
	a->last_id = a->rows[a->n].id;
	a->n++;
	return a->n == 64 ? 1 : 0;
}

int meta_stream_list_all(struct kv *kv, meta_stream_fn fn, void *arg)
{
	struct all_arg *a = calloc(1, sizeof(*a));
	struct nv_buf start, end;
	int rc;

	if (!a)
		return -ENOMEM;
	a->fn = fn;
	a->arg = arg;
	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_stream_id_space(&end);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	if (!rc)
		rc = key_stream_id(&start, 0);
	while (!rc) {
		a->n = 0;
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, 64, false,
			      all_visit, a);
		if (rc < 0)
			break;
		rc = 0;
		for (int i = 0; i < a->n && !rc; i++)
			rc = fn(arg, &a->rows[i]);
		if (rc || a->n < 64)
			break;
		rc = key_stream_id(&start, a->last_id + 1);
	}
	nv_buf_free(&start);
	nv_buf_free(&end);
	free(a);
	return rc < 0 ? rc : 0;
}

struct rcl_page {
	uint64_t ids[128];
	int n;
};

static int rcl_visit(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		     size_t vlen, uint64_t ver)
{
	struct rcl_page *pg = arg;
	struct nv_tup_rd r;
	char tagbuf[8];

	nv_tup_rd_init(&r, key, klen);
	if (nv_tup_get_str(&r, tagbuf, sizeof(tagbuf), NULL) ||
	    nv_tup_get_u64(&r, &pg->ids[pg->n]))
		return -EBADMSG;
	pg->n++;
	return pg->n == 128 ? 1 : 0;
}

int meta_reclaim_streams(struct kv *kv, meta_id_fn fn, void *arg)
{
	struct rcl_page pg;
	struct nv_buf start, end;
	int rc;

	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_reclaim_stream_space(&end);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	if (!rc)
		rc = key_reclaim_stream(&start, 0);
	while (!rc) {
		pg.n = 0;
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, 128, false, rcl_visit,
			      &pg);
		if (rc < 0)
			break;
		rc = 0;
		for (int i = 0; i < pg.n && !rc; i++)
			rc = fn(arg, pg.ids[i]);
		if (rc || pg.n < 128)
			break;
		rc = key_reclaim_stream(&start, pg.ids[pg.n - 1] + 1);
	}
	nv_buf_free(&start);
	nv_buf_free(&end);
	return rc < 0 ? rc : 0;
}

int meta_reclaim_stream_done(struct kv *kv, uint64_t id, bool drop_row)
{
	struct kv_txn *t = kv_txn_new();
	struct nv_buf k;
	int rc;

	if (!t)
		return -ENOMEM;
	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_reclaim_stream(&k, id);
	if (!rc)
		rc = kv_txn_del(t, k.ptr, k.len);
	if (!rc && drop_row) {
		rc = key_stream_id(&k, id);
		if (!rc)
			rc = kv_txn_del(t, k.ptr, k.len);
		/* Its ref hints (kinds META_REF_SPAN and META_REF_CATALOG of
		 * meta/refs.h, "Hints") go with it. */
		for (unsigned kind = 1; !rc && kind <= 2; kind++) {
			rc = key_ref_hint(&k, id, kind);
			if (!rc)
				rc = kv_txn_del(t, k.ptr, k.len);
		}
	}
	if (!rc)
		rc = kv_txn_commit(kv, t, NULL);
	nv_buf_free(&k);
	kv_txn_free(t);
	return rc;
}
