/*
 * stars.c - see stars.h.
 */
#include "config.h"
#include "meta/keys.h"
#include "meta/stars.h"
#include "meta/tuple.h"
#include "src/base/wire.h"

#include <errno.h>
#include <string.h>

#define STAR_V1 1

int meta_star_encode(const struct meta_star *s, struct nv_buf *out)
{
	int rc;

	nv_buf_reset(out);
	rc = nv_wr_u8(out, STAR_V1);
	if (!rc)
		rc = nv_wr_u64(out, s->started_ns);
	if (!rc)
		rc = nv_wr_u64(out, s->heartbeat_ns);
	if (!rc)
		rc = nv_wr_u32(out, s->pid);
	if (!rc)
		rc = nv_wr_str(out, s->host);
	if (!rc)
		rc = nv_wr_u8(out, s->state);
	return rc;
}

int meta_star_decode(const void *p, size_t n, const char *id, struct meta_star *s)
{
	struct nv_rd r;
	uint32_t hl;
	const uint8_t *h;

	memset(s, 0, sizeof(*s));
	nv_rd_init(&r, p, n);
	if (nv_rd_u8(&r) != STAR_V1 || meta_star_check(id))
		return -EBADMSG;
	strcpy(s->id, id);
	s->started_ns = nv_rd_u64(&r);
	s->heartbeat_ns = nv_rd_u64(&r);
	s->pid = nv_rd_u32(&r);
	h = nv_rd_bytes(&r, &hl, sizeof(s->host) - 1);
	if (!h || memchr(h, 0, hl))
		return -EBADMSG;
	memcpy(s->host, h, hl);
	s->host[hl] = 0;
	s->state = nv_rd_u8(&r);
	if (nv_rd_done(&r) || (s->state != STAR_RUNNING && s->state != STAR_CLOSED))
		return -EBADMSG;
	return 0;
}

int meta_star_put(struct kv *kv, const struct meta_star *s)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_star(&k, s->id);
	if (!rc)
		rc = meta_star_encode(s, &v);
	if (!rc)
		rc = kv_put(kv, k.ptr, k.len, v.ptr, v.len);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_star_get(struct kv *kv, const char *id, struct meta_star *out)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_star(&k, id);
	if (!rc)
		rc = kv_get(kv, k.ptr, k.len, &v, NULL);
	if (!rc)
		rc = meta_star_decode(v.ptr, v.len, id, out);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}
