/*
 * tuple.h - order-preserving tuple keys for the metastore.
 *
 * For: building and parsing every metastore key, so that byte order of
 * encoded keys equals the element-wise order of the tuples and range and
 * floor lookups work on any ordered key-value store.  Not for: values
 * (src/base/wire.h).
 *
 * Encoding (one tag byte per element):
 *   0x02 string  the bytes, each 0x00 written as 0x00 0xFF, then 0x00
 *   0x15 u64     8 bytes big-endian
 * Tags are below 0xFF, so prefix + 0xFF sorts after every key that
 * extends prefix by whole elements (nv_tup_prefix_end()).
 *
 * Invariants:
 *  1. For tuples a, b of the same element types: a < b element-wise iff
 *     enc(a) < enc(b) bytewise (shorter strings first; a string that is a
 *     prefix of another sorts first).
 *  2. Decoding is total: any byte string either decodes or yields
 *     -EBADMSG; nothing is read out of bounds.
 */
#ifndef NOVAFS_META_TUPLE_H
#define NOVAFS_META_TUPLE_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/buf.h"

#define NV_TUP_STR 0x02
#define NV_TUP_U64 0x15

/* Append one element.  0 or the nv_buf error (buffer unchanged). */
int nv_tup_add_u64(struct nv_buf *b, uint64_t v) __attribute__((warn_unused_result));
int nv_tup_add_str(struct nv_buf *b, const char *s) __attribute__((warn_unused_result));
int nv_tup_add_strn(struct nv_buf *b, const void *s, size_t n) __attribute__((warn_unused_result));

/* Turn b (an encoded prefix) into the exclusive end of the range of keys
 * extending it: appends 0xFF. */
int nv_tup_prefix_end(struct nv_buf *b) __attribute__((warn_unused_result));

/* Sequential decoder over an encoded key (borrowed). */
struct nv_tup_rd {
	const uint8_t *p;
	size_t len;
	size_t off;
};

static inline void nv_tup_rd_init(struct nv_tup_rd *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
}

/* Next element as a u64: 0, -EBADMSG (wrong tag or truncated). */
int nv_tup_get_u64(struct nv_tup_rd *r, uint64_t *v) __attribute__((warn_unused_result));

/* Next element as a string, unescaped into out (caller owns, cap bytes,
 * always NUL-terminated on success).  *n (may be NULL) gets the length.
 * 0, -EBADMSG (wrong tag, truncated, unterminated), -ENAMETOOLONG (does
 * not fit in cap-1 bytes). */
int nv_tup_get_str(struct nv_tup_rd *r, char *out, size_t cap, size_t *n)
	__attribute__((warn_unused_result));

/* 1 when every byte was consumed. */
static inline int nv_tup_rd_end(const struct nv_tup_rd *r) { return r->off == r->len; }

#endif
