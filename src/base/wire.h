/*
 * wire.h - bounds-checked little-endian field codec for row values and
 * other small records that cross a trust boundary (metastore values,
 * fence objects, xattr values).
 *
 * For: sequential encode into an nv_buf and sequential decode of a byte
 * string that may be truncated, padded or hostile.  Not for: the bundle's
 * fixed-width footer entries (engine/bundle.c indexes those directly).
 *
 * Invariants:
 *  1. A reader never reads outside [p, p+len).
 *  2. Errors are sticky: after the first short read every getter returns
 *     0 and nv_rd_error() reports -EBADMSG, so a decoder checks once at
 *     the end.
 *  3. Variable-length fields carry a u32 length that is checked against
 *     the bytes that remain before anything is allocated or copied.
 */
#ifndef NOVAFS_BASE_WIRE_H
#define NOVAFS_BASE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/base/buf.h"

struct nv_rd {
	const uint8_t *p; /* borrowed for the reader's lifetime */
	size_t len;
	size_t off;
	bool bad;
};

static inline void nv_rd_init(struct nv_rd *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
	r->bad = false;
}

uint8_t nv_rd_u8(struct nv_rd *r);
uint16_t nv_rd_u16(struct nv_rd *r);
uint32_t nv_rd_u32(struct nv_rd *r);
uint64_t nv_rd_u64(struct nv_rd *r);

/* A u32-length-prefixed byte string: returns a pointer into the input
 * (borrowed) and its length, or NULL with the error set.  max bounds the
 * accepted length. */
const uint8_t *nv_rd_bytes(struct nv_rd *r, uint32_t *len, uint32_t max);

/* Same, copied into a fresh NUL-terminated string (caller frees); NULL on
 * error, on ENOMEM, or when the bytes contain a NUL. */
char *nv_rd_str(struct nv_rd *r, uint32_t max);

/* Same, into dst of cap bytes (at most cap - 1 of them, then a NUL):
 * 0, or -EBADMSG when short, too long or holding a NUL. */
int nv_rd_str_into(struct nv_rd *r, char *dst, size_t cap);

/* n raw bytes, borrowed; NULL with the error set when short. */
const uint8_t *nv_rd_raw(struct nv_rd *r, size_t n);

/* Remaining byte count. */
static inline size_t nv_rd_left(const struct nv_rd *r) { return r->bad ? 0 : r->len - r->off; }

/* 0 when every read so far was in bounds, else -EBADMSG. */
static inline int nv_rd_error(const struct nv_rd *r) { return r->bad ? -74 /* EBADMSG */ : 0; }

/* 0 when in bounds and every byte was consumed, else -EBADMSG. */
static inline int nv_rd_done(const struct nv_rd *r)
{
	return (!r->bad && r->off == r->len) ? 0 : -74;
}

/* Encoders: append to b; 0 or the nv_buf error. */
int nv_wr_u8(struct nv_buf *b, uint8_t v) __attribute__((warn_unused_result));
int nv_wr_u16(struct nv_buf *b, uint16_t v) __attribute__((warn_unused_result));
int nv_wr_u32(struct nv_buf *b, uint32_t v) __attribute__((warn_unused_result));
int nv_wr_u64(struct nv_buf *b, uint64_t v) __attribute__((warn_unused_result));
int nv_wr_bytes(struct nv_buf *b, const void *p, uint32_t n) __attribute__((warn_unused_result));
int nv_wr_str(struct nv_buf *b, const char *s) __attribute__((warn_unused_result));

#endif
