/*
 * leases.c - see leases.h.
 */
#include "config.h"
#include "meta/keys.h"
#include "meta/leases.h"
#include "src/base/wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEASE_V1 1
#define LEP_V1 1

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

/* One take attempt: -ECANCELED when a racer moved either row. */
static int take_once(struct kv *kv, uint64_t stream, const struct meta_lease *l,
		     const char *prev, uint64_t lep_ver, uint64_t reg, uint64_t *ver)
{
	struct nv_buf k, v;
	struct kv_txn *t = kv_txn_new();
	int rc;

	if (!t)
		return -ENOMEM;
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_lease(&k, stream);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, 0);
	if (!rc)
		rc = meta_lease_encode(l, &v);
	if (!rc)
		rc = kv_txn_put_lease(t, k.ptr, k.len, v.ptr, v.len, reg);
	if (!rc)
		rc = key_lease_epoch(&k, stream);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, lep_ver);
	if (!rc) {
		nv_buf_reset(&v);
		rc = nv_wr_u8(&v, LEP_V1);
		if (!rc)
			rc = nv_wr_u64(&v, l->epoch);
		if (!rc)
			rc = nv_wr_str(&v, l->star);
		if (!rc)
			rc = nv_wr_str(&v, prev);
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

int meta_lease_take(struct kv *kv, uint64_t stream, const char *star, const char *addr,
		    uint64_t reg, struct meta_lease *out, uint64_t *ver, char *prev)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		struct meta_lease cur;
		uint64_t last, lep_ver;
		int rc = meta_lease_get(kv, stream, &cur, NULL);

		if (rc == 0)
			return -EEXIST;
		if (rc != -ENOENT)
			return rc;
		rc = meta_lease_last(kv, stream, &last, prev, NULL, &lep_ver);
		if (rc)
			return rc;
		memset(out, 0, sizeof(*out));
		snprintf(out->star, sizeof(out->star), "%s", star);
		snprintf(out->addr, sizeof(out->addr), "%s", addr ? addr : "");
		out->epoch = last + 1;
		rc = take_once(kv, stream, out, prev, lep_ver, reg, ver);
		if (rc != -ECANCELED)
			return rc;
	}
	return -EEXIST; /* racers kept winning: somebody holds it now */
}

int meta_lease_release(struct kv *kv, uint64_t stream, uint64_t ver)
{
	struct nv_buf k;
	struct kv_txn *t = kv_txn_new();
	int rc;

	if (!t)
		return -ENOMEM;
	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_lease(&k, stream);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, ver);
	if (!rc)
		rc = kv_txn_del(t, k.ptr, k.len);
	if (!rc)
		rc = kv_txn_commit(kv, t, NULL);
	kv_txn_free(t);
	nv_buf_free(&k);
	return rc;
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
