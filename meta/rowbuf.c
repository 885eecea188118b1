/*
 * rowbuf.c - see rowbuf.h.
 */
#include "config.h"
#include "meta/rowbuf.h"
#include "meta/keys.h"
#include "meta/tuple.h"

#include <errno.h>

int meta_owner_write(struct nv_buf *out, const struct meta_owner *o)
{
	int rc = nv_wr_u32(out, o->uid);

	if (!rc)
		rc = nv_wr_u32(out, o->gid);
	if (!rc)
		rc = nv_wr_u16(out, (uint16_t)(o->mode & 07777));
	return rc;
}

/* The owner after the v1 fields of a row of version ver; a v1 row's is
 * root:root with mode dflt. */
void meta_owner_read(struct nv_rd *r, uint8_t ver, uint32_t dflt, struct meta_owner *o)
{
	if (ver == META_ROW_V1) {
		o->uid = 0;
		o->gid = 0;
		o->mode = dflt;
		return;
	}
	o->uid = nv_rd_u32(r);
	o->gid = nv_rd_u32(r);
	o->mode = nv_rd_u16(r); /* above 07777: corrupt (the decoders check) */
}

/* A row's owner, or the default when own is NULL. */
void meta_owner_or_default(const struct meta_owner *own, uint32_t dflt, struct meta_owner *out)
{
	struct meta_owner o = { 0, 0, dflt };

	if (own) {
		o = *own;
		o.mode &= 07777u;
	}
	*out = o;
}

/* ---------------------------------------------------------------- buffers, reads, CAS */

void meta_rowbufs_init(struct meta_rowbufs *b)
{
	nv_buf_init(&b->k, KV_KEY_MAX);
	nv_buf_init(&b->v, KV_VAL_MAX);
	nv_buf_init(&b->k2, KV_KEY_MAX);
	nv_buf_init(&b->v2, KV_VAL_MAX);
	nv_buf_init(&b->k3, KV_KEY_MAX);
	nv_buf_init(&b->v3, KV_VAL_MAX);
}

void meta_rowbufs_free(struct meta_rowbufs *b)
{
	nv_buf_free(&b->k);
	nv_buf_free(&b->v);
	nv_buf_free(&b->k2);
	nv_buf_free(&b->v2);
	nv_buf_free(&b->k3);
	nv_buf_free(&b->v3);
}

/* Read bucket name's row into b->v (its key in b->k), *ver its version. */
int meta_bucket_row_read(struct kv *kv, struct meta_rowbufs *b, const char *name, uint64_t *ver)
{
	int rc = key_bucket(&b->k, name);

	return rc ? rc : kv_get(kv, b->k.ptr, b->k.len, &b->v, ver);
}

/* kv_cas_run() with the row buffers b (inside arg) set up around it. */
int meta_rows_cas(struct kv *kv, const struct kv_cas *how, void *arg, struct meta_rowbufs *b)
{
	int rc;

	meta_rowbufs_init(b);
	rc = kv_cas_run(kv, how, arg, NULL);
	meta_rowbufs_free(b);
	return rc;
}

/* Read the id counter: *next is the id to hand out, *ver its version (0
 * when the counter was never written; ids start at 1). */
int meta_id_counter_read(struct kv *kv, struct nv_buf *k, struct nv_buf *v,
			   uint64_t *next, uint64_t *ver)
{
	int rc = key_id_counter(k);
	struct nv_rd r;

	if (rc)
		return rc;
	rc = kv_get(kv, k->ptr, k->len, v, ver);
	if (rc == -ENOENT) {
		*next = 1;
		*ver = 0;
		return 0;
	}
	if (rc)
		return rc;
	nv_rd_init(&r, v->ptr, v->len);
	*next = nv_rd_u64(&r);
	return nv_rd_done(&r);
}

int meta_id_counter_txn_put(struct kv_txn *t, struct nv_buf *k, uint64_t next, uint64_t ver)
{
	uint8_t val[8];
	int rc;

	for (int i = 0; i < 8; i++)
		val[i] = (uint8_t)(next >> (8 * i));
	rc = kv_txn_cmp_ver(t, k->ptr, k->len, ver);
	return rc ? rc : kv_txn_put(t, k->ptr, k->len, val, 8);
}

/* Range [space + after + 0x00 .. space end): keys strictly after `after`. */
int meta_list_after(struct kv *kv, struct nv_buf *space, const char *after,
		      kv_visit_fn fn, void *arg)
{
	struct nv_buf start, end;
	int rc;

	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = nv_buf_add(&end, space->ptr, space->len);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	if (!rc)
		rc = nv_buf_add(&start, space->ptr, space->len);
	if (!rc && after && *after) {
		/* after's own key + one byte sorts right after it and before
		 * any longer name. */
		rc = nv_tup_add_str(&start, after);
		if (!rc)
			rc = nv_buf_add_u8(&start, 0);
	}
	if (!rc)
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, 0, false, fn, arg);
	nv_buf_free(&start);
	nv_buf_free(&end);
	return rc;
}
