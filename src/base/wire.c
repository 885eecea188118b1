/*
 * wire.c - see wire.h.
 */
#include "config.h"
#include "src/base/wire.h"
#include "src/base/endian.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(EBADMSG == 74, "wire.h hard-codes EBADMSG as 74");

const uint8_t *nv_rd_raw(struct nv_rd *r, size_t n)
{
	const uint8_t *p;

	if (r->bad || n > r->len - r->off) {
		r->bad = true;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

uint8_t nv_rd_u8(struct nv_rd *r)
{
	const uint8_t *p = nv_rd_raw(r, 1);

	return p ? p[0] : 0;
}

uint16_t nv_rd_u16(struct nv_rd *r)
{
	const uint8_t *p = nv_rd_raw(r, 2);

	return p ? nv_get_le16(p) : 0;
}

uint32_t nv_rd_u32(struct nv_rd *r)
{
	const uint8_t *p = nv_rd_raw(r, 4);

	return p ? nv_get_le32(p) : 0;
}

uint64_t nv_rd_u64(struct nv_rd *r)
{
	const uint8_t *p = nv_rd_raw(r, 8);

	return p ? nv_get_le64(p) : 0;
}

const uint8_t *nv_rd_bytes(struct nv_rd *r, uint32_t *len, uint32_t max)
{
	uint32_t n = nv_rd_u32(r);

	if (r->bad || n > max) {
		r->bad = true;
		*len = 0;
		return NULL;
	}
	*len = n;
	return nv_rd_raw(r, n);
}

int nv_rd_str_into(struct nv_rd *r, char *dst, size_t cap)
{
	uint32_t n;
	const uint8_t *p = nv_rd_bytes(r, &n, (uint32_t)cap - 1);

	if (!p || memchr(p, 0, n))
		return -EBADMSG;
	memcpy(dst, p, n);
	dst[n] = 0;
	return 0;
}

char *nv_rd_str(struct nv_rd *r, uint32_t max)
{
	uint32_t n;
	const uint8_t *p = nv_rd_bytes(r, &n, max);
	char *s;

	if (!p)
		return NULL;
	if (memchr(p, 0, n)) {
		r->bad = true;
		return NULL;
	}
	s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	memcpy(s, p, n);
	s[n] = 0;
	return s;
}

int nv_wr_u8(struct nv_buf *b, uint8_t v)
{
	return nv_buf_add(b, &v, 1);
}

int nv_wr_u16(struct nv_buf *b, uint16_t v)
{
	uint8_t t[2];

	nv_put_le16(t, v);
	return nv_buf_add(b, t, 2);
}

int nv_wr_u32(struct nv_buf *b, uint32_t v)
{
	uint8_t t[4];

	nv_put_le32(t, v);
	return nv_buf_add(b, t, 4);
}

int nv_wr_u64(struct nv_buf *b, uint64_t v)
{
	uint8_t t[8];

	nv_put_le64(t, v);
	return nv_buf_add(b, t, 8);
}

int nv_wr_bytes(struct nv_buf *b, const void *p, uint32_t n)
{
	size_t old = b->len;
	int rc = nv_wr_u32(b, n);

	if (!rc)
		rc = nv_buf_add(b, p, n);
	if (rc)
		b->len = old;
	return rc;
}

int nv_wr_str(struct nv_buf *b, const char *s)
{
	size_t n = strlen(s);

	if (n > UINT32_MAX)
		return -E2BIG;
	return nv_wr_bytes(b, s, (uint32_t)n);
}
