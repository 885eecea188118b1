/*
 * leases.c - see leases.h.
 */
#include "config.h"
#include "meta/keys.h"
#include "meta/leases.h"
#include "meta/streams.h"
#include "meta/tuple.h"
#include "src/base/wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEASE_V1 1
#define LEP_V1 1
#define LEPN_V1 1
#define DUTY_V1 1
#define DEP_V1 1

int meta_lease_encode(const struct meta_lease *l, struct nv_buf *out)
{
	int rc;

	nv_buf_reset(out);
	rc = nv_wr_u8(out, LEASE_V1);
	if (!rc)
		rc = nv_wr_str(out, l->star);
	if (!rc)
		rc = nv_wr_str(out, l->addr);
	if (!rc)
		rc = nv_wr_u64(out, l->epoch);
	return rc;
}

int meta_lease_decode(const void *p, size_t n, struct meta_lease *l)
{
	struct nv_rd r;

	memset(l, 0, sizeof(*l));
	nv_rd_init(&r, p, n);
	if (nv_rd_u8(&r) != LEASE_V1 || nv_rd_str_into(&r, l->star, sizeof(l->star)) ||
	    nv_rd_str_into(&r, l->addr, sizeof(l->addr)))
		return -EBADMSG;
	l->epoch = nv_rd_u64(&r);
	if (nv_rd_done(&r) || meta_star_check(l->star) || l->epoch == 0)
		return -EBADMSG;
	return 0;
}

int meta_lease_get(struct kv *kv, uint64_t stream, struct meta_lease *out, uint64_t *ver)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_lease(&k, stream);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (!rc)
		rc = meta_lease_decode(v.ptr, v.len, out);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_lease_last(struct kv *kv, uint64_t stream, uint64_t *epoch, char *star, char *prev,
		    uint64_t *ver)
{
	char pbuf[META_STAR_MAX + 1];

	struct nv_buf k, v;
	struct nv_rd r;
	uint64_t vv = 0;
	int rc;

	*epoch = 0;
	star[0] = 0;
	if (!prev)
		prev = pbuf;
	prev[0] = 0;
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_lease_epoch(&k, stream);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, &vv);
	if (rc == -ENOENT) {
		rc = 0;
		vv = 0;
	} else if (!rc) {
		nv_rd_init(&r, v.ptr, v.len);
		if (nv_rd_u8(&r) != LEP_V1)
			rc = -EBADMSG;
		*epoch = nv_rd_u64(&r);
		if (!rc && (nv_rd_str_into(&r, star, META_STAR_MAX + 1) ||
			    nv_rd_str_into(&r, prev, META_STAR_MAX + 1) || nv_rd_done(&r)))
			rc = -EBADMSG;
	}
	if (ver)
		*ver = vv;
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

/* What one take attempt compares and writes. */
struct take_plan {
	uint64_t stream;
	const struct meta_lease *l;
	const char *prev;
	uint64_t lep_ver, reg;
	const struct meta_stream *ms; /* the stream row, read at sver */
	uint64_t sver, name_ver;      /* name_ver: the "lepn" row's, 0 absent */
};

/* The "lepn" row of (bucket, name): *epoch (0 when absent), *ver. */
static int name_epoch_get(struct kv *kv, const char *bucket, const char *name,
			  uint64_t *epoch, uint64_t *ver)
{
	struct nv_buf k, v;
	struct nv_rd r;
	int rc;

	*epoch = 0;
	*ver = 0;
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_lease_name_epoch(&k, bucket, name);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (rc == -ENOENT) {
		rc = 0;
		*ver = 0;
	} else if (!rc) {
		nv_rd_init(&r, v.ptr, v.len);
		if (nv_rd_u8(&r) != LEPN_V1)
			rc = -EBADMSG;
		*epoch = nv_rd_u64(&r);
		if (!rc && nv_rd_done(&r))
			rc = -EBADMSG;
	}
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

/* The compares and puts of the stream's name row (invariant 4). */
static int take_name_ops(struct kv_txn *t, const struct take_plan *p, struct nv_buf *k,
			 struct nv_buf *v)
{
	int rc = key_stream_id(k, p->stream);

	if (!rc)
		rc = kv_txn_cmp_ver(t, k->ptr, k->len, p->sver);
	if (!rc)
		rc = key_lease_name_epoch(k, p->ms->bucket, p->ms->name);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k->ptr, k->len, p->name_ver);
	if (!rc) {
		nv_buf_reset(v);
		rc = nv_wr_u8(v, LEPN_V1);
		if (!rc)
			rc = nv_wr_u64(v, p->l->epoch);
	}
	if (!rc)
		rc = kv_txn_put(t, k->ptr, k->len, v->ptr, v->len);
	return rc;
}

/* One take attempt: -ECANCELED when a racer moved any row read. */
static int take_once(struct kv *kv, const struct take_plan *p, uint64_t *ver)
{
	struct nv_buf k, v;
	struct kv_txn *t = kv_txn_new();
	int rc;

	if (!t)
		return -ENOMEM;
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_lease(&k, p->stream);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, 0);
	if (!rc)
		rc = meta_lease_encode(p->l, &v);
	if (!rc)
		rc = kv_txn_put_lease(t, k.ptr, k.len, v.ptr, v.len, p->reg);
	if (!rc)
		rc = key_lease_epoch(&k, p->stream);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, p->lep_ver);
	if (!rc) {
		nv_buf_reset(&v);
		rc = nv_wr_u8(&v, LEP_V1);
		if (!rc)
			rc = nv_wr_u64(&v, p->l->epoch);
		if (!rc)
			rc = nv_wr_str(&v, p->l->star);
		if (!rc)
			rc = nv_wr_str(&v, p->prev);
	}
	if (!rc)
		rc = kv_txn_put(t, k.ptr, k.len, v.ptr, v.len);
	if (!rc)
		rc = take_name_ops(t, p, &k, &v);
	if (!rc)
		rc = kv_txn_commit(kv, t, ver);
	kv_txn_free(t);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_lease_take(struct kv *kv, uint64_t stream, const char *star, const char *addr,
		    uint64_t reg, struct meta_lease *out, uint64_t *ver, char *prev)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		struct meta_lease cur;
		struct meta_stream ms;
		struct take_plan p = { .stream = stream, .l = out, .prev = prev, .reg = reg,
				       .ms = &ms };
		uint64_t last, named;
		int rc = meta_lease_get(kv, stream, &cur, NULL);

		if (rc == 0)
			return -EEXIST;
		if (rc != -ENOENT)
			return rc;
		rc = meta_stream_get(kv, stream, &ms, &p.sver);
		if (!rc && ms.deleted_ns)
			rc = -ENOENT; /* deleted: never led again (invariant 5) */
		if (!rc)
			rc = meta_lease_last(kv, stream, &last, prev, NULL, &p.lep_ver);
		if (!rc)
			rc = name_epoch_get(kv, ms.bucket, ms.name, &named, &p.name_ver);
		if (rc)
			return rc;
		memset(out, 0, sizeof(*out));
		snprintf(out->star, sizeof(out->star), "%s", star);
		snprintf(out->addr, sizeof(out->addr), "%s", addr ? addr : "");
		out->epoch = (last > named ? last : named) + 1;
		rc = take_once(kv, &p, ver);
		if (rc != -ECANCELED)
			return rc;
	}
	return -EEXIST; /* racers kept winning: somebody holds it now */
}

/* Delete the row k (built, or rc its key's error) if its version is
 * still ver; frees k.  0, -ECANCELED (not ours any more), kv error. */
static int del_at_ver(struct kv *kv, struct nv_buf *k, int rc, uint64_t ver)
{
	struct kv_txn *t = rc ? NULL : kv_txn_new();

	if (!rc && !t)
		rc = -ENOMEM;
	if (!rc)
		rc = kv_txn_cmp_ver(t, k->ptr, k->len, ver);
	if (!rc)
		rc = kv_txn_del(t, k->ptr, k->len);
	if (!rc)
		rc = kv_txn_commit(kv, t, NULL);
	kv_txn_free(t);
	nv_buf_free(k);
	return rc;
}

int meta_lease_release(struct kv *kv, uint64_t stream, uint64_t ver)
{
	struct nv_buf k;

	nv_buf_init(&k, KV_KEY_MAX);
	return del_at_ver(kv, &k, key_lease(&k, stream), ver);
}

int meta_lease_txn_cmp(struct kv_txn *t, uint64_t stream, uint64_t ver)
{
	struct nv_buf k;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_lease(&k, stream);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, ver);
	nv_buf_free(&k);
	return rc;
}

/* ------------------------------------------------------------ duties */

int meta_duty_get(struct kv *kv, const char *name, struct meta_duty *out, uint64_t *ver)
{
	struct nv_buf k, v;
	struct nv_rd r;
	int rc;

	memset(out, 0, sizeof(*out));
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_duty(&k, name);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (!rc) {
		nv_rd_init(&r, v.ptr, v.len);
		if (nv_rd_u8(&r) != DUTY_V1 || nv_rd_str_into(&r, out->star, sizeof(out->star)))
			rc = -EBADMSG;
		out->epoch = nv_rd_u64(&r);
		if (!rc && (nv_rd_done(&r) || meta_star_check(out->star) || !out->epoch))
			rc = -EBADMSG;
	}
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

/* The last epoch of duty name (0: never held), its holder (star,
 * META_STAR_MAX + 1 bytes; "" none) and the "dep" row's version (0:
 * absent). */
static int duty_last(struct kv *kv, const char *name, uint64_t *epoch, char *star,
		     uint64_t *ver)
{
	struct nv_buf k, v;
	struct nv_rd r;
	int rc;

	*epoch = 0;
	*ver = 0;
	star[0] = 0;
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_duty_epoch(&k, name);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (rc == -ENOENT) {
		rc = 0;
		*ver = 0;
	} else if (!rc) {
		nv_rd_init(&r, v.ptr, v.len);
		if (nv_rd_u8(&r) != DEP_V1)
			rc = -EBADMSG;
		*epoch = nv_rd_u64(&r);
		if (!rc && (nv_rd_str_into(&r, star, META_STAR_MAX + 1) || nv_rd_done(&r)))
			rc = -EBADMSG;
	}
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

/* One take attempt: -ECANCELED when a racer moved either row. */
static int duty_take_once(struct kv *kv, const char *name, const struct meta_duty *d,
			  uint64_t dep_ver, uint64_t reg, uint64_t *ver)
{
	struct nv_buf k, v;
	struct kv_txn *t = kv_txn_new();
	int rc;

	if (!t)
		return -ENOMEM;
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_duty(&k, name);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, 0);
	if (!rc)
		rc = nv_wr_u8(&v, DUTY_V1);
	if (!rc)
		rc = nv_wr_str(&v, d->star);
	if (!rc)
		rc = nv_wr_u64(&v, d->epoch);
	if (!rc)
		rc = kv_txn_put_lease(t, k.ptr, k.len, v.ptr, v.len, reg);
	if (!rc)
		rc = key_duty_epoch(&k, name);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, dep_ver);
	if (!rc) {
		nv_buf_reset(&v);
		rc = nv_wr_u8(&v, DEP_V1);
		if (!rc)
			rc = nv_wr_u64(&v, d->epoch);
		if (!rc)
			rc = nv_wr_str(&v, d->star);
	}
	if (!rc)
		rc = kv_txn_put(t, k.ptr, k.len, v.ptr, v.len);
	if (!rc)
		rc = kv_txn_commit(kv, t, ver);
	kv_txn_free(t);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_duty_take(struct kv *kv, const char *name, const char *star, uint64_t reg,
		   struct meta_duty *out, uint64_t *ver, char *prev)
{
	char pbuf[META_STAR_MAX + 1];

	if (!prev)
		prev = pbuf;
	for (int attempt = 0; attempt < 8; attempt++) {
		struct meta_duty cur;
		uint64_t last, dep_ver;
		int rc = meta_duty_get(kv, name, &cur, NULL);

		if (rc == 0)
			return -EEXIST;
		if (rc != -ENOENT)
			return rc;
		rc = duty_last(kv, name, &last, prev, &dep_ver);
		if (rc)
			return rc;
		memset(out, 0, sizeof(*out));
		snprintf(out->star, sizeof(out->star), "%s", star);
		out->epoch = last + 1;
		rc = duty_take_once(kv, name, out, dep_ver, reg, ver);
		if (rc != -ECANCELED)
			return rc;
	}
	return -EEXIST;
}

int meta_duty_release(struct kv *kv, const char *name, uint64_t ver)
{
	struct nv_buf k;

	nv_buf_init(&k, KV_KEY_MAX);
	return del_at_ver(kv, &k, key_duty(&k, name), ver);
}

#define LEASE_PAGE 512

struct lease_page {
	const char *star;
	uint64_t n;     /* rows of star */
	unsigned seen;  /* rows this page */
	struct nv_buf last;
};

static int count_visit(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		       size_t vlen, uint64_t ver)
{
	struct lease_page *pg = arg;
	struct meta_lease l;

	(void)ver;
	if (meta_lease_decode(val, vlen, &l) == 0 && !strcmp(l.star, pg->star))
		pg->n++;
	pg->seen++;
	nv_buf_reset(&pg->last);
	return nv_buf_add(&pg->last, key, klen);
}

int meta_lease_count(struct kv *kv, const char *star, uint64_t *n)
{
	struct lease_page pg = { .star = star };
	struct nv_buf start, end;
	int rc;

	nv_buf_init(&pg.last, KV_KEY_MAX);
	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_lease_space(&start);
	if (!rc)
		rc = nv_buf_add(&end, start.ptr, start.len);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	while (!rc) {
		pg.seen = 0;
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, LEASE_PAGE, false,
			      count_visit, &pg);
		if (rc || pg.seen < LEASE_PAGE)
			break;
		/* The next page starts just after the last key seen. */
		nv_buf_reset(&start);
		rc = nv_buf_add(&start, pg.last.ptr, pg.last.len);
		if (!rc)
			rc = nv_buf_add_u8(&start, 0);
	}
	nv_buf_free(&pg.last);
	nv_buf_free(&start);
	nv_buf_free(&end);
	if (!rc)
		*n = pg.n;
	return rc;
}

/* ------------------------------------------------------------ reclaim */

int meta_lease_reclaim(struct kv *kv, uint64_t stream)
{
	struct meta_stream ms;
	struct nv_buf k;
	struct kv_txn *t;
	uint64_t sver;
	int rc = meta_stream_get(kv, stream, &ms, &sver);

	if (rc == -ENOENT)
		return 0; /* its rows went with it already */
	if (rc)
		return rc;
	if (!ms.deleted_ns)
		return -EBUSY;
	t = kv_txn_new();
	if (!t)
		return -ENOMEM;
	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_stream_id(&k, stream);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, sver);
	if (!rc)
		rc = key_lease(&k, stream);
	if (!rc)
		rc = kv_txn_del(t, k.ptr, k.len);
	if (!rc)
		rc = key_lease_epoch(&k, stream);
	if (!rc)
		rc = kv_txn_del(t, k.ptr, k.len);
	if (!rc)
		rc = kv_txn_commit(kv, t, NULL);
	kv_txn_free(t);
	nv_buf_free(&k);
	return rc;
}
