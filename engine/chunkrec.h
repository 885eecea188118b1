/*
 * chunkrec.h - the records of a decoded chunk: a bundle chunk's frames,
 * indexed in an rc_blob (engine/rcache.h), found by stream byte and
 * copied out.
 *
 * For: the read path (engine/read.c): indexing a chunk it fetched,
 * serving a page from it, and the record lookup of a locate.  Not for:
 * decoding or verifying a chunk (engine/bundle.c, engine/objread.c),
 * caching it (engine/rcache.c), the flight's own runs (engine/flight.c).
 *
 * Invariants:
 *  1. A blob chunkrec_index() accepted has exactly e->nrec frames, each
 *     inside the blob: every later call only reads within it.
 *  2. A copy (or the iovecs of one) is at most len bytes and
 *     READ_PAGE_RECORDS records (read.h invariant 2), and starts at the
 *     byte asked for.
 *
 * No state, no locks: a blob is immutable once indexed.
 */
#ifndef NOVAFS_ENGINE_CHUNKREC_H
#define NOVAFS_ENGINE_CHUNKREC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "engine/bundle.h"
#include "engine/rcache.h"

/* Index the frames of chunk e's decoded bytes in b (b->data, b->len;
 * room for e->nrec offsets): 0, or -EBADMSG when they are not e->nrec
 * whole frames. */
int chunkrec_index(const struct bundle_entry *e, struct rc_blob *b)
	__attribute__((warn_unused_result));

/* Stream byte of record k of b (chunk e). */
uint64_t chunkrec_byte(const struct bundle_entry *e, const struct rc_blob *b, uint32_t k);

/* The last record of b that starts at or before stream byte off (0 when
 * none does). */
uint32_t chunkrec_for_byte(const struct bundle_entry *e, const struct rc_blob *b, uint64_t off);

/* Copy stream bytes from off out of b into dst: at most len bytes and
 * max_records records (invariant 2).  The bytes copied; 0 when b does
 * not hold off. */
size_t chunkrec_copy(const struct bundle_entry *e, const struct rc_blob *b, uint64_t off,
		     uint8_t *dst, size_t len, uint32_t max_records);

/* The same bytes as chunkrec_copy() as at most maxiov iovecs pointing
 * into b (one per record), appended at iov[*niov]: the bytes, or 0 (and
 * *niov unchanged) when b does not hold off or they need more iovecs. */
size_t chunkrec_iov(const struct bundle_entry *e, const struct rc_blob *b, uint64_t off,
		    size_t len, uint32_t max_records, struct iovec *iov, int *niov, int maxiov);

#endif
