/*
 * cursors.c - see cursors.h.
 */
#include "config.h"
#include "meta/cursors.h"
#include "meta/keys.h"
#include "meta/streams.h"
#include "meta/tuple.h"
#include "src/base/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define CUR_V1 1

int meta_cursors_encode(const struct meta_cursors *c, struct nv_buf *out)
{
	int rc;

	nv_buf_reset(out);
	rc = nv_wr_u8(out, CUR_V1);
	if (!rc)
		rc = nv_wr_u8(out, c->cls);
	if (!rc)
		rc = nv_wr_str(out, c->star);
	if (!rc)
		rc = nv_wr_u64(out, c->epoch);
	if (!rc)
		rc = nv_wr_u64(out, c->settle_frontier);
	if (!rc)
		rc = nv_wr_u64(out, c->rewritten);
	if (!rc)
		rc = nv_wr_u64(out, c->trimmed);
	if (!rc)
		rc = nv_wr_u64(out, c->grace_target);
	if (!rc)
		rc = nv_wr_u64(out, c->grace_since_ns);
	return rc;
}

int meta_cursors_decode(const void *p, size_t n, struct meta_cursors *c)
{
	struct nv_rd r;
	uint32_t sl;
	const uint8_t *star;

	memset(c, 0, sizeof(*c));
	nv_rd_init(&r, p, n);
	if (nv_rd_u8(&r) != CUR_V1)
		return -EBADMSG;
	c->cls = nv_rd_u8(&r);
	star = nv_rd_bytes(&r, &sl, META_STAR_MAX);
	if (!star || memchr(star, 0, sl))
		return -EBADMSG;
	memcpy(c->star, star, sl);
	c->star[sl] = 0;
	c->epoch = nv_rd_u64(&r);
	c->settle_frontier = nv_rd_u64(&r);
	c->rewritten = nv_rd_u64(&r);
	c->trimmed = nv_rd_u64(&r);
	c->grace_target = nv_rd_u64(&r);
	c->grace_since_ns = nv_rd_u64(&r);
	if (nv_rd_done(&r) || c->cls >= NV_CLASS_COUNT || meta_star_check(c->star) ||
	    c->trimmed > c->grace_target || c->grace_target > c->rewritten)
		return -EBADMSG;
	return 0;
}

int meta_cursors_get(struct kv *kv, unsigned cls, const char *star, uint64_t epoch,
		     struct meta_cursors *out, uint64_t *ver)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_cursors(&k, cls, star, epoch);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (rc == -ENOENT) {
		memset(out, 0, sizeof(*out));
		out->cls = (uint8_t)cls;
		snprintf(out->star, sizeof(out->star), "%s", star);
		out->epoch = epoch;
		if (ver)
			*ver = 0;
		rc = 0;
	} else if (!rc) {
		rc = meta_cursors_decode(v.ptr, v.len, out);
		if (!rc && (out->cls != cls || out->epoch != epoch || strcmp(out->star, star)))
			rc = -EBADMSG;
	}
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_cursors_txn_put(struct kv_txn *t, const struct meta_cursors *c, uint64_t expect_ver)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_cursors(&k, c->cls, c->star, c->epoch);
	if (!rc)
		rc = meta_cursors_encode(c, &v);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, expect_ver);
	if (!rc)
		rc = kv_txn_put(t, k.ptr, k.len, v.ptr, v.len);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_cursors_txn_del(struct kv_txn *t, unsigned cls, const char *star, uint64_t epoch)
{
	struct nv_buf k;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_cursors(&k, cls, star, epoch);
	if (!rc)
		rc = kv_txn_del(t, k.ptr, k.len);
	nv_buf_free(&k);
	return rc;
}

/* ------------------------------------------------------------ reclaim */

int meta_reclaim_txn_add(struct kv_txn *t, uint64_t due_ns, const char *key)
{
	struct nv_buf k;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_reclaim(&k, due_ns, key);
	if (!rc)
		rc = kv_txn_put(t, k.ptr, k.len, "", 0);
	nv_buf_free(&k);
	return rc;
}

int meta_reclaim_txn_del(struct kv_txn *t, uint64_t due_ns, const char *key)
{
	struct nv_buf k;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_reclaim(&k, due_ns, key);
	if (!rc)
		rc = kv_txn_del(t, k.ptr, k.len);
	nv_buf_free(&k);
	return rc;
}

#define GC_PAGE 64

struct gc_page {
	uint64_t due[GC_PAGE];
	char keys[GC_PAGE][1025];
	int n;
	uint64_t count;
};

static int gc_visit(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		    size_t vlen, uint64_t ver)
{
	struct gc_page *pg = arg;
	struct nv_tup_rd r;
	char tagbuf[8];

	nv_tup_rd_init(&r, key, klen);
	if (nv_tup_get_str(&r, tagbuf, sizeof(tagbuf), NULL) ||
	    nv_tup_get_u64(&r, &pg->due[pg->n]) ||
	    nv_tup_get_str(&r, pg->keys[pg->n], sizeof(pg->keys[0]), NULL))
		return -EBADMSG;
	pg->n++;
	return pg->n == GC_PAGE ? 1 : 0;
}

int meta_reclaim_due(struct kv *kv, uint64_t now_ns, size_t max, meta_reclaim_fn fn, void *arg)
{
	struct gc_page *pg = calloc(1, sizeof(*pg));
	struct nv_buf start, end;
	size_t seen = 0;
	int rc;

	if (!pg)
		return -ENOMEM;
	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_reclaim_space(&start);
	if (!rc)
		rc = key_reclaim_space(&end);
	if (!rc)
		rc = nv_tup_add_u64(&end, now_ns + 1); /* due <= now */
	while (!rc) {
		pg->n = 0;
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, GC_PAGE, false,
			      gc_visit, pg);
		if (rc < 0)
			break;
		rc = 0;
		for (int i = 0; i < pg->n && !rc; i++) {
			if (max && seen >= max)
				break;
			rc = fn(arg, pg->due[i], pg->keys[i]);
			seen++;
		}
		if (rc || pg->n < GC_PAGE || (max && seen >= max))
			break;
		/* Next page after the last key seen. */
		rc = key_reclaim(&start, pg->due[pg->n - 1], pg->keys[pg->n - 1]);
		if (!rc)
			rc = nv_buf_add_u8(&start, 0);
	}
	nv_buf_free(&start);
	nv_buf_free(&end);
	free(pg);
	return rc < 0 ? rc : 0;
}

static int gc_count(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		    size_t vlen, uint64_t ver)
{
	(*(uint64_t *)arg)++;
	return 0;
}

int meta_reclaim_count(struct kv *kv, uint64_t *n)
{
	struct nv_buf start, end;
	int rc;

	*n = 0;
	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_reclaim_space(&start);
	if (!rc)
		rc = nv_buf_add(&end, start.ptr, start.len);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	if (!rc)
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, 0, false, gc_count, n);
	nv_buf_free(&start);
	nv_buf_free(&end);
	return rc;
}
