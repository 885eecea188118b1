/*
 * chains.c - see chains.h.
 *
 * Chain value v1: u8 version | u8 class | str star | u64 epoch | u8 state
 *   | u8 clean | u64 checkpoint | u64 cut | u64 created_ns | u64 settled_ns
 * v2: v1's fields, then u32 put_window (written when it is not 0, so a
 * row without one keeps its v1 bytes).
 * Mint head value: u64 epoch.
 */
#include "config.h"
#include "meta/chains.h"
#include "meta/keys.h"
#include "meta/streams.h"
#include "meta/tuple.h"
#include "src/base/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CHAIN_V1 1
#define CHAIN_V2 2

const char *meta_chain_state_name(unsigned state)
{
	switch (state) {
	case CHAIN_LIVE: return "live";
	case CHAIN_FENCED: return "fenced";
	case CHAIN_SETTLED: return "settled";
	default: return "?";
	}
}

int meta_star_check(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > META_STAR_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '-'))
			return -EINVAL;
	return 0;
}

int meta_chain_encode(const struct meta_chain *c, struct nv_buf *out)
{
	int rc;

	nv_buf_reset(out);
	rc = nv_wr_u8(out, c->put_window ? CHAIN_V2 : CHAIN_V1);
	if (!rc)
		rc = nv_wr_u8(out, c->cls);
	if (!rc)
		rc = nv_wr_str(out, c->star);
	if (!rc)
		rc = nv_wr_u64(out, c->epoch);
	if (!rc)
		rc = nv_wr_u8(out, c->state);
	if (!rc)
		rc = nv_wr_u8(out, c->clean);
	if (!rc)
		rc = nv_wr_u64(out, c->checkpoint);
	if (!rc)
		rc = nv_wr_u64(out, c->cut);
	if (!rc)
		rc = nv_wr_u64(out, c->created_ns);
	if (!rc)
		rc = nv_wr_u64(out, c->settled_ns);
	if (!rc && c->put_window)
		rc = nv_wr_u32(out, c->put_window);
	return rc;
}

int meta_chain_decode(const void *p, size_t n, struct meta_chain *c)
{
	struct nv_rd r;
	uint32_t slen;
	const uint8_t *star;
	uint8_t v;

	memset(c, 0, sizeof(*c));
	nv_rd_init(&r, p, n);
	v = nv_rd_u8(&r);
	if (v != CHAIN_V1 && v != CHAIN_V2)
		return -EBADMSG;
	c->cls = nv_rd_u8(&r);
	star = nv_rd_bytes(&r, &slen, META_STAR_MAX);
	if (!star || memchr(star, 0, slen))
		return -EBADMSG;
	memcpy(c->star, star, slen);
	c->star[slen] = 0;
	c->epoch = nv_rd_u64(&r);
	c->state = nv_rd_u8(&r);
	c->clean = nv_rd_u8(&r);
	c->checkpoint = nv_rd_u64(&r);
	c->cut = nv_rd_u64(&r);
	c->created_ns = nv_rd_u64(&r);
	c->settled_ns = nv_rd_u64(&r);
	if (v == CHAIN_V2) {
		c->put_window = nv_rd_u32(&r);
		if (c->put_window == 0)
			return -EBADMSG;
	}
	if (nv_rd_done(&r) || c->cls >= NV_CLASS_COUNT || meta_star_check(c->star) ||
	    c->state < CHAIN_LIVE || c->state > CHAIN_SETTLED || c->clean > 1 ||
	    (c->state != CHAIN_LIVE && c->checkpoint > c->cut))
		return -EBADMSG;
	return 0;
}

int meta_chain_get(struct kv *kv, unsigned cls, const char *star, uint64_t epoch,
		   struct meta_chain *out, uint64_t *ver)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_chain(&k, cls, star, epoch);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (!rc)
		rc = meta_chain_decode(v.ptr, v.len, out);
	if (!rc && (out->cls != cls || out->epoch != epoch || strcmp(out->star, star)))
		rc = -EBADMSG;
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_chain_txn_put(struct kv_txn *t, const struct meta_chain *c, uint64_t expect_ver)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_chain(&k, c->cls, c->star, c->epoch);
	if (!rc)
		rc = meta_chain_encode(c, &v);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, expect_ver);
	if (!rc)
		rc = kv_txn_put(t, k.ptr, k.len, v.ptr, v.len);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_chain_txn_del(struct kv_txn *t, unsigned cls, const char *star, uint64_t epoch,
		       uint64_t expect_ver)
{
	struct nv_buf k;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_chain(&k, cls, star, epoch);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, expect_ver);
	if (!rc)
		rc = kv_txn_del(t, k.ptr, k.len);
	nv_buf_free(&k);
	return rc;
}

int meta_chain_cas(struct kv *kv, const struct meta_chain *c, uint64_t expect_ver)
{
	struct kv_txn *t = kv_txn_new();
	int rc;

	if (!t)
		return -ENOMEM;
	rc = meta_chain_txn_put(t, c, expect_ver);
	if (!rc)
		rc = kv_txn_commit(kv, t, NULL);
	kv_txn_free(t);
	return rc;
}

static int mint_read(struct kv *kv, unsigned cls, const char *star, uint64_t *head,
		     uint64_t *ver)
{
	struct nv_buf k, v;
	struct nv_rd r;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_mint(&k, cls, star);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, ver);
	if (rc == -ENOENT) {
		*head = 0;
		*ver = 0;
		rc = 0;
	} else if (!rc) {
		nv_rd_init(&r, v.ptr, v.len);
		*head = nv_rd_u64(&r);
		rc = nv_rd_done(&r);
	}
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_mint_head(struct kv *kv, unsigned cls, const char *star, uint64_t *head)
{
	uint64_t ver;

	return mint_read(kv, cls, star, head, &ver);
}

/* Attempts of meta_chain_mint() against concurrent minters. */
#define MINT_RETRIES 64

struct mint_arg {
	unsigned cls;
	const char *star;
	uint64_t now_ns;
	struct meta_chain c;
};

static int mint_build(void *arg, struct kv *kv, struct kv_txn *t)
{
	struct mint_arg *a = arg;
	struct meta_chain *c = &a->c;
	uint64_t head, hver;
	struct nv_buf k;
	uint8_t val[8];
	int rc = mint_read(kv, a->cls, a->star, &head, &hver);

	if (rc)
		return rc;
	memset(c, 0, sizeof(*c));
	c->cls = (uint8_t)a->cls;
	strcpy(c->star, a->star);
	c->epoch = head + 1;
	c->state = CHAIN_LIVE;
	c->created_ns = a->now_ns;
	for (int j = 0; j < 8; j++)
		val[j] = (uint8_t)(c->epoch >> (8 * j));
	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_mint(&k, a->cls, a->star);
	if (!rc)
		rc = kv_txn_cmp_ver(t, k.ptr, k.len, hver);
	if (!rc)
		rc = kv_txn_put(t, k.ptr, k.len, val, 8);
	if (!rc)
		rc = meta_chain_txn_put(t, c, 0);
	nv_buf_free(&k);
	return rc;
}

int meta_chain_mint(struct kv *kv, unsigned cls, const char *star, uint64_t now_ns,
		    struct meta_chain *out, uint64_t *ver)
{
	static const struct kv_cas how = { .build = mint_build, .attempts = MINT_RETRIES };
	struct mint_arg a = { .cls = cls, .star = star, .now_ns = now_ns };
	uint64_t rev;
	int rc;

	if (cls >= NV_CLASS_COUNT || meta_star_check(star))
		return -EINVAL;
	rc = kv_cas_run(kv, &how, &a, &rev);
	if (!rc) {
		*out = a.c;
		if (ver)
			*ver = rev;
	}
	return rc;
}

#define CHAIN_PAGE 32

struct chain_page {
	struct meta_chain rows[CHAIN_PAGE];
	uint64_t vers[CHAIN_PAGE];
	struct nv_buf last;
	int n;
};

static int chain_visit(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		       size_t vlen, uint64_t ver)
{
	struct chain_page *pg = arg;
	int rc = meta_chain_decode(val, vlen, &pg->rows[pg->n]);

	if (rc)
		return rc;
	pg->vers[pg->n++] = ver;
	nv_buf_reset(&pg->last);
	rc = nv_buf_add(&pg->last, key, klen);
	if (rc)
		return rc;
	return pg->n == CHAIN_PAGE ? 1 : 0;
}

int meta_chain_list(struct kv *kv, meta_chain_fn fn, void *arg)
{
	struct chain_page *pg = calloc(1, sizeof(*pg));
	struct nv_buf start, end;
	int rc;

	if (!pg)
		return -ENOMEM;
	nv_buf_init(&pg->last, KV_KEY_MAX);
	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_chain_space(&start);
	if (!rc)
		rc = nv_buf_add(&end, start.ptr, start.len);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	while (!rc) {
		pg->n = 0;
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, CHAIN_PAGE,
			      false, chain_visit, pg);
		if (rc < 0)
			break;
		rc = 0;
		for (int i = 0; i < pg->n && !rc; i++)
			rc = fn(arg, &pg->rows[i], pg->vers[i]);
		if (rc || pg->n < CHAIN_PAGE)
			break;
		/* Next page starts just after the last key seen. */
		nv_buf_reset(&start);
		rc = nv_buf_add(&start, pg->last.ptr, pg->last.len);
		if (!rc)
			rc = nv_buf_add_u8(&start, 0);
	}
	nv_buf_free(&pg->last);
	nv_buf_free(&start);
	nv_buf_free(&end);
	free(pg);
	return rc < 0 ? rc : 0;
}
