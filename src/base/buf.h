/*
 * buf.h - growable byte buffer with a hard size limit.
 *
 * For: building values, keys, bundles and replies whose size is not known
 * up front.  Not for: shared or refcounted payloads (see engine/flight.h).
 *
 * Invariants:
 *  1. len <= cap <= max at all times; an append that would pass max fails
 *     with -E2BIG and leaves the buffer unchanged.
 *  2. A buffer is either empty with ptr == NULL or owns ptr.
 *  3. nv_buf_free() leaves a valid empty buffer with the same max.
 *
 * Model: curl's dynbuf (lib/curlx/dynbuf.h).
 */
#ifndef NOVAFS_BASE_BUF_H
#define NOVAFS_BASE_BUF_H

#include <stddef.h>
#include <stdint.h>

struct nv_buf {
	uint8_t *ptr; /* owned; NULL when nothing was ever appended */
	size_t len;
	size_t cap;
	size_t max; /* hard limit on len, fixed at init */
};

/* Initialise an empty buffer that may grow to max bytes. */
void nv_buf_init(struct nv_buf *b, size_t max);

/* Release the memory; the buffer stays usable and empty. */
void nv_buf_free(struct nv_buf *b);

/* Forget the content, keep the allocation. */
static inline void nv_buf_reset(struct nv_buf *b) { b->len = 0; }

/* Make room for at least extra more bytes.  0, -E2BIG past max, -ENOMEM. */
int nv_buf_reserve(struct nv_buf *b, size_t extra)
	__attribute__((warn_unused_result));

/* Append n bytes (copied).  0, -E2BIG, -ENOMEM; unchanged on failure. */
int nv_buf_add(struct nv_buf *b, const void *p, size_t n)
	__attribute__((warn_unused_result));

/* Append printf output.  0, -E2BIG, -ENOMEM; unchanged on failure.
 * The content is kept NUL-terminated (the NUL is not counted in len). */
int nv_buf_printf(struct nv_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), warn_unused_result));

/* Append big-endian integers. */
int nv_buf_add_be64(struct nv_buf *b, uint64_t v) __attribute__((warn_unused_result));
int nv_buf_add_be32(struct nv_buf *b, uint32_t v) __attribute__((warn_unused_result));
int nv_buf_add_u8(struct nv_buf *b, uint8_t v) __attribute__((warn_unused_result));

/* Take the memory out of the buffer: the caller owns the returned pointer
 * (free()), the buffer is left empty.  May return NULL when empty. */
uint8_t *nv_buf_steal(struct nv_buf *b, size_t *len);

/* Copy of the content as a NUL-terminated string (caller frees) or NULL. */
char *nv_buf_strdup(const struct nv_buf *b);

#endif
