/*
 * stars.c - see stars.h.
 */
#include "config.h"
#include "meta/keys.h"
#include "meta/stars.h"
#include "meta/tuple.h"
#include "src/base/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define STAR_V2 2

int meta_star_encode(const struct meta_star *s, struct nv_buf *out)
{
	int rc;

	nv_buf_reset(out);
	rc = nv_wr_u8(out, STAR_V2);
	if (!rc)
		rc = nv_wr_u64(out, s->started_ns);
	if (!rc)
		rc = nv_wr_u32(out, s->pid);
	if (!rc)
		rc = nv_wr_str(out, s->host);
	if (!rc)
		rc = nv_wr_str(out, s->dir);
	if (!rc)
		rc = nv_wr_str(out, s->addr);
	if (!rc)
		rc = nv_wr_str(out, s->location);
	if (!rc)
		rc = nv_wr_u8(out, s->state);
	for (unsigned c = 0; !rc && c < NV_CLASS_COUNT; c++)
		rc = nv_wr_u64(out, s->epochs[c]);
	if (!rc)
		rc = nv_wr_u64(out, s->lease);
	return rc;
}

int meta_star_decode(const void *p, size_t n, const char *id, struct meta_star *s)
{
	struct nv_rd r;

	memset(s, 0, sizeof(*s));
	nv_rd_init(&r, p, n);
	if (nv_rd_u8(&r) != STAR_V2 || meta_star_check(id))
		return -EBADMSG;
	strcpy(s->id, id);
	s->started_ns = nv_rd_u64(&r);
	s->pid = nv_rd_u32(&r);
	if (nv_rd_str_into(&r, s->host, sizeof(s->host)) || nv_rd_str_into(&r, s->dir, sizeof(s->dir)) ||
	    nv_rd_str_into(&r, s->addr, sizeof(s->addr)) ||
	    nv_rd_str_into(&r, s->location, sizeof(s->location)))
		return -EBADMSG;
	s->state = nv_rd_u8(&r);
	for (unsigned c = 0; c < NV_CLASS_COUNT; c++)
		s->epochs[c] = nv_rd_u64(&r);
	s->lease = nv_rd_u64(&r);
	if (nv_rd_done(&r) ||
	    (s->state != STAR_RUNNING && s->state != STAR_CLOSED && s->state != STAR_DRAINING))
		return -EBADMSG;
	return 0;
}

/* One compare on the row's version, one leased put. */
static int put_row(struct kv *kv, const struct meta_star *s, uint64_t lease, uint64_t ver,
		   uint64_t *nver)
{
	struct nv_buf k, v;
	struct kv_txn *t = kv_txn_new();
	int rc;

	if (!t)
		return -ENOMEM;
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_star(&k, s->id);
	if (!rc)
		rc = meta_star_encode(s, &v);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, ver);
	if (!rc)
		rc = kv_txn_put_lease(t, k.ptr, k.len, v.ptr, v.len, lease);
	if (!rc)
		rc = kv_txn_commit(kv, t, nver);
	kv_txn_free(t);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_star_register(struct kv *kv, const struct meta_star *s, uint64_t lease)
{
	int rc = put_row(kv, s, lease, 0, NULL);

	return rc == -ECANCELED ? -EEXIST : rc;
}

int meta_star_replace(struct kv *kv, const struct meta_star *s, uint64_t lease, uint64_t ver,
		      uint64_t *nver)
{
	return put_row(kv, s, lease, ver, nver);
}

int meta_star_get(struct kv *kv, const char *id_in, struct meta_star *out, uint64_t *ver)
{
	char id[META_STAR_MAX + 1];
	struct nv_buf k, v;
	int rc;

	/* id_in may be out->id. */
	if (strlen(id_in) > META_STAR_MAX)
		return -EINVAL;
	strcpy(id, id_in);
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_star(&k, id);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (!rc)
		rc = meta_star_decode(v.ptr, v.len, id, out);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

struct star_page {
	struct meta_star *rows;
	unsigned n;
};

static int star_visit(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		      size_t vlen, uint64_t ver)
{
	struct star_page *pg = arg;
	struct nv_tup_rd r;
	char tag[8], id[META_STAR_MAX + 1];

	(void)ver;
	nv_tup_rd_init(&r, key, klen);
	if (nv_tup_get_str(&r, tag, sizeof(tag), NULL) || nv_tup_get_str(&r, id, sizeof(id), NULL))
		return 0; /* not a row of ours */
	if (pg->n == META_STARS_LIST_MAX)
		return -E2BIG;
	if (meta_star_decode(val, vlen, id, &pg->rows[pg->n]) == 0)
		pg->n++;
	return 0;
}

int meta_star_list(struct kv *kv, meta_star_fn fn, void *arg)
{
	struct star_page pg = { .rows = calloc(META_STARS_LIST_MAX, sizeof(struct meta_star)) };
	struct nv_buf start, end;
	int rc, cut;

	if (!pg.rows)
		return -ENOMEM;
	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_star_space(&start);
	if (!rc)
		rc = nv_buf_add(&end, start.ptr, start.len);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	if (!rc)
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, 0, false, star_visit, &pg);
	cut = rc == -E2BIG;
	if (cut)
		rc = 0;
	for (unsigned i = 0; !rc && i < pg.n; i++)
		rc = fn(arg, &pg.rows[i]);
	nv_buf_free(&start);
	nv_buf_free(&end);
	free(pg.rows);
	return rc ? rc : cut ? -E2BIG : 0;
}

int meta_star_set_state(struct kv *kv, const char *id, uint8_t state)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		struct meta_star row;
		uint64_t ver = 0;
		int rc = meta_star_get(kv, id, &row, &ver);

		if (rc)
			return rc;
		if (row.state == state)
			return 0;
		row.state = state;
		rc = put_row(kv, &row, row.lease, ver, NULL);
		if (rc == -ENOLCK)
			return -ENOENT; /* its lease went: the star is gone */
		if (rc != -ECANCELED)
			return rc;
	}
	return -EAGAIN;
}
