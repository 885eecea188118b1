/*
 * buckets.c - see buckets.h.
 *
 * Every change is one kv transaction comparing the versions it read, run
 * by meta_rows_cas() (meta/rowbuf.h invariant 1).
 */
#include "config.h"
#include "meta/buckets.h"
#include "meta/keys.h"
#include "meta/rowbuf.h"
#include "meta/tuple.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- codecs */

int meta_bucket_encode(const struct meta_bucket *b, struct nv_buf *out)
{
	int rc;

	nv_buf_reset(out);
	rc = nv_wr_u8(out, META_ROW_V2);
	if (!rc)
		rc = nv_wr_u64(out, b->id);
	if (!rc)
		rc = nv_wr_u64(out, b->created_ns);
	if (!rc)
		rc = nv_wr_u8(out, b->default_class);
	if (!rc)
		rc = meta_owner_write(out, &b->own);
	return rc;
}

int meta_bucket_decode(const void *p, size_t n, const char *name, struct meta_bucket *b)
{
	struct nv_rd r;
	uint8_t ver;

	nv_rd_init(&r, p, n);
	memset(b, 0, sizeof(*b));
	ver = nv_rd_u8(&r);
	if (ver != META_ROW_V1 && ver != META_ROW_V2)
		return -EBADMSG;
	b->id = nv_rd_u64(&r);
	b->created_ns = nv_rd_u64(&r);
	b->default_class = nv_rd_u8(&r);
	meta_owner_read(&r, ver, META_BUCKET_MODE, &b->own);
	if (nv_rd_done(&r) || b->default_class >= NV_CLASS_COUNT || b->own.mode > 07777)
		return -EBADMSG;
	if (strlen(name) > META_BUCKET_NAME_MAX)
		return -EBADMSG;
	strcpy(b->name, name);
	return 0;
}

/* ---------------------------------------------------------------- buckets */

int meta_bucket_get(struct kv *kv, const char *name, struct meta_bucket *out)
{
	struct nv_buf k, v;
	int rc;

	if (strlen(name) > META_BUCKET_NAME_MAX)
		return -ENOENT;
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_bucket(&k, name);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, NULL);
	if (!rc)
		rc = meta_bucket_decode(v.ptr, v.len, name, out);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

struct bucket_create_arg {
	struct meta_rowbufs b;
	const char *name;
	unsigned cls;
	const struct meta_owner *own;
	struct meta_bucket bk;
};

static int bucket_create_build(void *arg, struct kv *kv, struct kv_txn *t)
{
	struct bucket_create_arg *a = arg;
	struct meta_rowbufs *b = &a->b;
	uint64_t next, cver;
	int rc = meta_id_counter_read(kv, &b->k2, &b->v2, &next, &cver);

	if (rc)
		return rc;
	a->bk.id = next;
	a->bk.created_ns = nv_now_wall_ns();
	a->bk.default_class = (uint8_t)a->cls;
	meta_owner_or_default(a->own, META_BUCKET_MODE, &a->bk.own);
	strcpy(a->bk.name, a->name);
	rc = key_bucket(&b->k, a->name);
	if (!rc)
		rc = meta_bucket_encode(&a->bk, &b->v);
	if (!rc)
		rc = kv_txn_cmp_ver(t, b->k.ptr, b->k.len, 0);
	if (!rc)
		rc = meta_id_counter_txn_put(t, &b->k2, next + 1, cver);
	if (!rc)
		rc = kv_txn_put(t, b->k.ptr, b->k.len, b->v.ptr, b->v.len);
	return rc;
}

/* Lost the race: to a creator of the same bucket (-EEXIST), or retry. */
static int bucket_create_cancelled(void *arg, struct kv *kv)
{
	struct bucket_create_arg *a = arg;
	struct meta_bucket tmp;

	return meta_bucket_get(kv, a->name, &tmp) == 0 ? -EEXIST : -ECANCELED;
}

int meta_bucket_create(struct kv *kv, const char *name, unsigned default_class,
		       const struct meta_owner *own, struct meta_bucket *out)
{
	static const struct kv_cas how = {
		.build = bucket_create_build,
		.cancelled = bucket_create_cancelled,
		.attempts = META_CAS_RETRIES,
		.retry_eagain = true,
	};
	struct bucket_create_arg a = { .name = name, .cls = default_class, .own = own };
	int rc;

	if (strlen(name) > META_BUCKET_NAME_MAX || default_class >= NV_CLASS_COUNT)
		return -EINVAL;
	rc = meta_rows_cas(kv, &how, &a, &a.b);
	if (!rc && out)
		*out = a.bk;
	return rc;
}

struct any_arg {
	int found;
};

static int any_fn(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		  size_t vlen, uint64_t ver)
{
	((struct any_arg *)arg)->found = 1;
	return 1;
}

struct bucket_arg {
	struct meta_rowbufs b;
	const char *name;
	unsigned cls;                 /* meta_bucket_set_class() */
	const struct meta_owner *own; /* meta_bucket_set_owner(); NULL: set cls */
};

static int bucket_delete_build(void *arg, struct kv *kv, struct kv_txn *t)
{
	struct bucket_arg *a = arg;
	struct meta_rowbufs *b = &a->b;
	struct any_arg any = { 0 };
	uint64_t ver;
	int rc;

	rc = meta_bucket_row_read(kv, b, a->name, &ver);
	if (!rc)
		rc = key_stream_names_of(&b->k2, a->name);
	if (!rc) {
		rc = nv_buf_add(&b->k3, b->k2.ptr, b->k2.len);
		if (!rc)
			rc = nv_tup_prefix_end(&b->k3);
	}
	if (!rc)
		rc = kv_range(kv, b->k2.ptr, b->k2.len, b->k3.ptr, b->k3.len, 1, false, any_fn,
			      &any);
	nv_buf_reset(&b->k3);
	if (rc)
		return rc;
	if (any.found)
		return -ENOTEMPTY;
	rc = kv_txn_cmp_ver(t, b->k.ptr, b->k.len, ver);
	if (!rc)
		rc = kv_txn_del(t, b->k.ptr, b->k.len);
	return rc;
}

int meta_bucket_delete(struct kv *kv, const char *name)
{
	static const struct kv_cas how = {
		.build = bucket_delete_build,
		.attempts = META_CAS_RETRIES,
	};
	struct bucket_arg a = { .name = name };

	if (strlen(name) > META_BUCKET_NAME_MAX)
		return -ENOENT;
	return meta_rows_cas(kv, &how, &a, &a.b);
}

/* Rewrite the bucket row with a->own, or else a->cls. */
static int bucket_set_build(void *arg, struct kv *kv, struct kv_txn *t)
{
	struct bucket_arg *a = arg;
	struct meta_rowbufs *b = &a->b;
	struct meta_bucket bk;
	uint64_t ver;
	int rc;

	rc = meta_bucket_row_read(kv, b, a->name, &ver);
	if (!rc)
		rc = meta_bucket_decode(b->v.ptr, b->v.len, a->name, &bk);
	if (rc)
		return rc;
	if (a->own)
		meta_owner_or_default(a->own, META_BUCKET_MODE, &bk.own);
	else
		bk.default_class = (uint8_t)a->cls;
	rc = meta_bucket_encode(&bk, &b->v);
	if (!rc)
		rc = kv_txn_cmp_ver(t, b->k.ptr, b->k.len, ver);
	if (!rc)
		rc = kv_txn_put(t, b->k.ptr, b->k.len, b->v.ptr, b->v.len);
	return rc;
}

static int bucket_set(struct kv *kv, struct bucket_arg *a)
{
	static const struct kv_cas how = {
		.build = bucket_set_build,
		.attempts = META_CAS_RETRIES,
	};

	if (strlen(a->name) > META_BUCKET_NAME_MAX)
		return -ENOENT;
	return meta_rows_cas(kv, &how, a, &a->b);
}

int meta_bucket_set_class(struct kv *kv, const char *name, unsigned cls)
{
	struct bucket_arg a = { .name = name, .cls = cls };

	if (cls >= NV_CLASS_COUNT)
		return -EINVAL;
	return bucket_set(kv, &a);
}

int meta_bucket_set_owner(struct kv *kv, const char *name, const struct meta_owner *own)
{
	struct bucket_arg a = { .name = name, .own = own };

	return bucket_set(kv, &a);
}

#define BUCKET_PAGE 64

struct bucket_page {
	struct meta_bucket rows[BUCKET_PAGE];
	int n;
};

static int bucket_visit(void *arg, const uint8_t *key, size_t klen,
			const uint8_t *val, size_t vlen, uint64_t ver)
{
	struct bucket_page *pg = arg;
	struct nv_tup_rd r;
	char tagbuf[8], name[META_BUCKET_NAME_MAX + 1];

	nv_tup_rd_init(&r, key, klen);
	if (nv_tup_get_str(&r, tagbuf, sizeof(tagbuf), NULL) ||
	    nv_tup_get_str(&r, name, sizeof(name), NULL) || !nv_tup_rd_end(&r) ||
	    meta_bucket_decode(val, vlen, name, &pg->rows[pg->n])) {
		nv_log(NV_WARN, NV_SUB_META, "skipping a malformed bucket row");
		return 0;
	}
	pg->n++;
	return pg->n == BUCKET_PAGE ? 1 : 0;
}

int meta_bucket_list(struct kv *kv, const char *after, meta_bucket_fn fn, void *arg)
{
	struct bucket_page *pg = calloc(1, sizeof(*pg));
	char cursor[META_BUCKET_NAME_MAX + 1] = "";
	struct nv_buf sp;
	int rc;

	if (!pg)
		return -ENOMEM;
	if (after)
		snprintf(cursor, sizeof(cursor), "%s", after);
	nv_buf_init(&sp, KV_KEY_MAX);
	rc = key_bucket_space(&sp);
	/* Pages are collected first and handed to fn afterwards, so fn may
	 * call back into the kv. */
	while (!rc) {
		pg->n = 0;
		rc = meta_list_after(kv, &sp, cursor, bucket_visit, pg);
		if (rc < 0)
			break;
		rc = 0;
		for (int i = 0; i < pg->n && !rc; i++)
			rc = fn(arg, &pg->rows[i]);
		if (rc || pg->n < BUCKET_PAGE)
			break;
		snprintf(cursor, sizeof(cursor), "%s", pg->rows[pg->n - 1].name);
	}
	nv_buf_free(&sp);
	free(pg);
	return rc < 0 ? rc : 0;
}
