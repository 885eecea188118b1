/*
 * chunkrec.c - see chunkrec.h.
 *
 * A frame is BUNDLE_FRAME_HDR bytes of header and its record's payload;
 * b->rec_off[k] is where frame k starts in b->data, so record k's
 * payload starts BUNDLE_FRAME_HDR after it and its stream byte is the
 * chunk's first byte plus the payload bytes of the frames before it.
 */
#include "config.h"
#include "engine/chunkrec.h"

#include <errno.h>
#include <string.h>

int chunkrec_index(const struct bundle_entry *e, struct rc_blob *b)
{
	struct bundle_rec rec;
	size_t off = 0;

	for (uint32_t i = 0; i < e->nrec; i++) {
		size_t at = off;

		if (bundle_frames_next(b->data, b->len, &off, &rec) != 1)
			return -EBADMSG;
		b->rec_off[i] = (uint32_t)at;
	}
	return 0;
}

uint64_t chunkrec_byte(const struct bundle_entry *e, const struct rc_blob *b, uint32_t k)
{
	return e->first_byte + b->rec_off[k] - (uint64_t)k * BUNDLE_FRAME_HDR;
}

uint32_t chunkrec_for_byte(const struct bundle_entry *e, const struct rc_blob *b, uint64_t off)
{
	uint32_t lo = 0, hi = b->nrec;

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (chunkrec_byte(e, b, mid) <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Payload bytes of record k of b. */
static uint32_t rec_len(const struct rc_blob *b, uint32_t k)
{
	size_t end = k + 1 < b->nrec ? b->rec_off[k + 1] : b->len;

	return (uint32_t)(end - b->rec_off[k] - BUNDLE_FRAME_HDR);
}

/* The record holding stream byte off (b->nrec when none does). */
static uint32_t first_record(const struct bundle_entry *e, const struct rc_blob *b, uint64_t off)
{
	uint32_t i = chunkrec_for_byte(e, b, off);

	while (i < b->nrec && chunkrec_byte(e, b, i) + rec_len(b, i) <= off)
		i++;
	return i;
}

size_t chunkrec_copy(const struct bundle_entry *e, const struct rc_blob *b, uint64_t off,
		     uint8_t *dst, size_t len, uint32_t max_records)
{
	uint32_t i = first_record(e, b, off);
	size_t done = 0;
	uint64_t pos = off;

	for (uint32_t taken = 0; i < b->nrec && done < len && taken < max_records; i++, taken++) {
		size_t skip = (size_t)(pos - chunkrec_byte(e, b, i));
		size_t n = rec_len(b, i) - skip;

		if (n > len - done)
			n = len - done;
		memcpy(dst + done, b->data + b->rec_off[i] + BUNDLE_FRAME_HDR + skip, n);
		done += n;
		pos += n;
	}
	return done;
}

size_t chunkrec_iov(const struct bundle_entry *e, const struct rc_blob *b, uint64_t off,
		    size_t len, uint32_t max_records, struct iovec *iov, int *niov, int maxiov)
{
	uint32_t i = first_record(e, b, off);
	size_t done = 0;
	uint64_t pos = off;
	int k = *niov;

	for (uint32_t taken = 0; i < b->nrec && done < len && taken < max_records; i++, taken++) {
		size_t skip = (size_t)(pos - chunkrec_byte(e, b, i));
		size_t n = rec_len(b, i) - skip;

		if (k >= maxiov)
			return 0;
		if (n > len - done)
			n = len - done;
		iov[k].iov_base = b->data + b->rec_off[i] + BUNDLE_FRAME_HDR + skip;
		iov[k++].iov_len = n;
		done += n;
		pos += n;
	}
	*niov = k;
	return done;
}
