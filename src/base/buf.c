/*
 * buf.c - see buf.h.  Growth doubles, clamped to max.
 */
#include "config.h"
#include "src/base/buf.h"
#include "src/base/endian.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nv_buf_init(struct nv_buf *b, size_t max)
{
	b->ptr = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

void nv_buf_free(struct nv_buf *b)
{
	free(b->ptr);
	b->ptr = NULL;
	b->len = 0;
	b->cap = 0;
}

int nv_buf_reserve(struct nv_buf *b, size_t extra)
{
	size_t need, ncap;
	uint8_t *p;

	/* The second test keeps len + extra + 1 from wrapping when max is
	 * SIZE_MAX. */
	if (extra > b->max - b->len || extra > SIZE_MAX - 1 - b->len)
		return -E2BIG;
	need = b->len + extra + 1; /* +1: room for a NUL after printf */
	if (need <= b->cap)
		return 0;
	ncap = b->cap ? b->cap : 64;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	if (ncap - 1 > b->max) /* not ncap > max + 1: max may be SIZE_MAX */
		ncap = b->max + 1;
	p = realloc(b->ptr, ncap);
	if (!p)
		return -ENOMEM;
	b->ptr = p;
	b->cap = ncap;
	return 0;
}

int nv_buf_add(struct nv_buf *b, const void *p, size_t n)
{
	int rc = nv_buf_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->ptr + b->len, p, n);
	b->len += n;
	b->ptr[b->len] = 0;
	return 0;
}

int nv_buf_printf(struct nv_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	rc = nv_buf_reserve(b, (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf((char *)b->ptr + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int nv_buf_add_be64(struct nv_buf *b, uint64_t v)
{
	uint8_t t[8];

	nv_put_be64(t, v);
	return nv_buf_add(b, t, 8);
}

int nv_buf_add_be32(struct nv_buf *b, uint32_t v)
{
	uint8_t t[4];

	nv_put_be32(t, v);
	return nv_buf_add(b, t, 4);
}

int nv_buf_add_u8(struct nv_buf *b, uint8_t v)
{
	return nv_buf_add(b, &v, 1);
}

uint8_t *nv_buf_steal(struct nv_buf *b, size_t *len)
{
	uint8_t *p = b->ptr;

	if (len)
		*len = b->len;
	b->ptr = NULL;
	b->len = 0;
	b->cap = 0;
	return p;
}

char *nv_buf_strdup(const struct nv_buf *b)
{
	char *s = malloc(b->len + 1);

	if (!s)
		return NULL;
	if (b->len)
		memcpy(s, b->ptr, b->len);
	s[b->len] = 0;
	return s;
}
