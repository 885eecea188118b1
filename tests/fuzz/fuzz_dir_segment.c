/*
 * fuzz_dir_segment.c - the segment record scanner of the directory store
 * (engine/store/dir/segfmt.h: dir_seg_scan), which rebuilds the index of
 * chain slots from whatever bytes a crash, a torn write or a flipped bit
 * left in a segment file.
 *
 * Input: u8 fix | the segment image.  fix & 1 first repairs the
 * checksums of every record the image lays out from offset 0 (a header
 * with the magic and lengths that fit), so the fuzzer gets past them to
 * the key, state and payload checks.
 *
 * Checks: the scan never reads outside the image (the read function
 * asserts it); records come in increasing, non-overlapping order, each
 * wholly inside the image, with a valid store key of the stated length;
 * re-encoding a reported record (key, length, payload) gives back the
 * image's header bytes exactly but for the state field, and for a dead
 * record the data crc (its payload is not read); the end offset is within
 * the image.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/store/dir/segfmt.h"
#include "src/base/crc32c.h"
#include "src/base/endian.h"
#include "tests/fuzz/fuzz.h"

struct image {
	const uint8_t *p;
	size_t n;
	uint64_t next_off; /* the lowest offset the next record may start at */
};

static long image_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct image *im = ctx;

	FUZZ_ASSERT(off <= im->n);
	if (len > im->n - off)
		len = (size_t)(im->n - off);
	memcpy(buf, im->p + off, len);
	return (long)len;
}

static int visit(void *arg, const struct dir_seg_rec *r)
{
	struct image *im = arg;
	uint8_t hdr[DIR_SEG_HDR];
	uint32_t crc;

	FUZZ_ASSERT(r->off >= im->next_off && r->off % 8 == 0);
	FUZZ_ASSERT(r->klen >= 1 && r->klen <= STORE_KEY_MAX && strlen(r->key) == r->klen);
	FUZZ_ASSERT(store_key_check(r->key) == 0);
	FUZZ_ASSERT(r->data_off == r->off + DIR_SEG_HDR + r->klen);
	FUZZ_ASSERT(r->data_off <= im->n && r->len <= im->n - r->data_off);
	FUZZ_ASSERT(!memcmp(im->p + r->off + DIR_SEG_HDR, r->key, r->klen));
	crc = dir_seg_encode_head(hdr, r->key, r->klen, r->len);
	dir_seg_set_data_crc(hdr, nv_crc32c(crc, im->p + r->data_off, (size_t)r->len));
	FUZZ_ASSERT(!memcmp(hdr, im->p + r->off, DIR_SEG_STATE_OFF));
	/* A dead record's payload is not judged (segfmt.h invariant 5): its
	 * header up to the data crc must hold, the data crc only when live. */
	FUZZ_ASSERT(!memcmp(hdr + 8, im->p + r->off + 8, DIR_SEG_HDR - 8 - (r->dead ? 4 : 0)));
	FUZZ_ASSERT(r->dead == (nv_get_le32(im->p + r->off + DIR_SEG_STATE_OFF) == DIR_SEG_DEAD));
	im->next_off = r->data_off + r->len;
	return 0;
}

/* Recompute the checksums of the records laid out from offset 0. */
static void repair(uint8_t *p, size_t n)
{
	uint64_t off = 0;

	while (n >= DIR_SEG_HDR && off <= n - DIR_SEG_HDR) {
		uint8_t *h = p + off;
		size_t klen = nv_get_le16(h + 8);
		uint64_t len = nv_get_le64(h + 16), room = n - off - DIR_SEG_HDR;
		uint32_t crc;

		if (nv_get_le32(h) != DIR_SEG_MAGIC || klen > room || len > room - klen)
			return;
		crc = nv_crc32c(0, h, 4);
		crc = nv_crc32c(crc, h + 8, 16);
		crc = nv_crc32c(crc, h + DIR_SEG_HDR, klen);
		nv_put_le32(h + 24, crc);
		nv_put_le32(h + 28, nv_crc32c(crc, h + DIR_SEG_HDR + klen, (size_t)len));
		if (dir_seg_rec_size(klen, len) > n - off)
			return;
		off += dir_seg_rec_size(klen, len);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in;
	struct image im = { 0 };
	const uint8_t *rest;
	uint64_t end = 0;
	unsigned skipped = 0;
	uint8_t *img;
	size_t n;
	int rc;

	fuzz_quiet();
	fuzz_in_init(&in, data, size);
	if (fuzz_u8(&in) & 1) {
		rest = fuzz_rest(&in, &n);
		img = fuzz_memdup(rest, n);
		if (img)
			repair(img, n);
	} else {
		rest = fuzz_rest(&in, &n);
		img = fuzz_memdup(rest, n);
	}
	im.p = img ? img : (const uint8_t *)"";
	im.n = n;
	rc = dir_seg_scan(image_read, &im, n, visit, &im, &end, &skipped);
	FUZZ_ASSERT(rc == 0);
	FUZZ_ASSERT(end <= n);
	free(img);
	return 0;
}
