/*
 * tuple.c - order-preserving tuple keys; see tuple.h for the encoding.
 *
 * For: encoding and decoding metastore keys element by element.  Not
 * for: values (src/base/wire.h), or any schema knowledge (meta/keys.c
 * says which tuples exist).
 *
 * Invariants:
 *  1. An append either adds one whole element or leaves the buffer
 *     unchanged (the encoded size is computed and reserved first).
 *  2. A decoder call either consumes exactly one whole element and
 *     returns 0, or returns an error and leaves r->off unchanged.
 *  3. The decoder reads only bytes in [r->p, r->p + r->len); every index
 *     is checked against r->len before it is dereferenced.
 *  4. Decoding is strict: inside a string, 0x00 must be followed by 0xFF
 *     (an escaped zero byte), by the end of the key, or by a valid tag
 *     (the next element).  Anything else is -EBADMSG, so every key that
 *     decodes has exactly one encoding.
 */
#include "config.h"
#include "meta/tuple.h"
#include "src/base/endian.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* The escape byte after a 0x00 inside a string, and the prefix-end byte.
 * Both are 0xFF: above every tag, so "prefix + 0xFF" sorts after every
 * whole-element extension of the prefix. */
#define TUP_ESC 0xFF

static bool tag_valid(uint8_t t)
{
	return t == NV_TUP_STR || t == NV_TUP_U64;
}

int nv_tup_add_u64(struct nv_buf *b, uint64_t v)
{
	uint8_t e[9];

	e[0] = NV_TUP_U64;
	nv_put_be64(e + 1, v);
	return nv_buf_add(b, e, sizeof(e));
}

int nv_tup_add_str(struct nv_buf *b, const char *s)
{
	return nv_tup_add_strn(b, s, strlen(s));
}

int nv_tup_add_strn(struct nv_buf *b, const void *s, size_t n)
{
	const uint8_t *src = s;
	size_t zeros = 0, enc;
	uint8_t *d;
	int rc;

	for (size_t i = 0; i < n; i++)
		zeros += src[i] == 0;
	/* n + zeros <= 2n; refuse sizes where tag + 2n + terminator wraps. */
	if (n > (SIZE_MAX - 2) / 2)
		return -E2BIG;
	enc = 1 + n + zeros + 1;
	rc = nv_buf_reserve(b, enc);
	if (rc)
		return rc;
	d = b->ptr + b->len;
	*d++ = NV_TUP_STR;
	for (size_t i = 0; i < n; i++) {
		*d++ = src[i];
		if (src[i] == 0)
			*d++ = TUP_ESC;
	}
	*d = 0;
	b->len += enc;
	b->ptr[b->len] = 0; /* nv_buf keeps a spare NUL byte (buf.c) */
	return 0;
}

int nv_tup_prefix_end(struct nv_buf *b)
{
	return nv_buf_add_u8(b, TUP_ESC);
}

int nv_tup_get_u64(struct nv_tup_rd *r, uint64_t *v)
{
	if (r->off >= r->len || r->p[r->off] != NV_TUP_U64 ||
	    r->len - r->off - 1 < 8)
		return -EBADMSG;
	*v = nv_get_be64(r->p + r->off + 1);
	r->off += 9;
	return 0;
}

/*
 * Scan the string element at r->off without copying.  0 with *raw_end
 * (offset just past the terminator) and *n (unescaped length), or
 * -EBADMSG.
 */
static int scan_str(const struct nv_tup_rd *r, size_t *raw_end, size_t *n)
{
	size_t i, count = 0;

	if (r->off >= r->len || r->p[r->off] != NV_TUP_STR)
		return -EBADMSG;
	for (i = r->off + 1; i < r->len; i++) {
		if (r->p[i] != 0) {
			count++;
			continue;
		}
		if (i + 1 == r->len || tag_valid(r->p[i + 1])) {
			*raw_end = i + 1;
			*n = count;
			return 0;
		}
		if (r->p[i + 1] != TUP_ESC)
			return -EBADMSG; /* 0x00 then junk (invariant 4) */
		count++;
		i++; /* skip the escape byte */
	}
	return -EBADMSG; /* unterminated */
}

int nv_tup_get_str(struct nv_tup_rd *r, char *out, size_t cap, size_t *n)
{
	size_t raw_end, len, o = 0;
	int rc = scan_str(r, &raw_end, &len);

	if (rc)
		return rc;
	if (cap == 0 || len > cap - 1)
		return -ENAMETOOLONG;
	/* Second pass: copy, dropping each escape byte.  scan_str() proved
	 * the layout, so i + 1 < raw_end holds for every escaped zero. */
	for (size_t i = r->off + 1; i + 1 < raw_end; i++) {
		out[o++] = (char)r->p[i];
		if (r->p[i] == 0)
			i++;
	}
	out[o] = 0;
	if (n)
		*n = o;
	r->off = raw_end;
	return 0;
}
