/*
 * segfmt.c - encoding and scanning the records of the directory store's
 * segment files (format and invariants in segfmt.h).
 *
 * For: dir_seg_encode_head(), dir_seg_set_data_crc(), dir_seg_scan().
 * Not for: files, locks or the index (seg.c).
 *
 * Invariants: those of segfmt.h, kept here by one rule: nothing read from
 * the image is used before it is bounds-checked against size, and a
 * record is reported only after every checksum held.
 *
 * Locking: none; a scan belongs to its caller.
 */
#include "config.h"
#include "engine/store/dir/segfmt.h"
#include "src/base/crc32c.h"
#include "src/base/endian.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The head crc: bytes 0..3 and 8..23 of the header, then the key. */
static uint32_t head_crc(const uint8_t *hdr, const void *key, size_t klen)
{
	uint32_t crc = nv_crc32c(0, hdr, 4);

	crc = nv_crc32c(crc, hdr + 8, 16);
	return nv_crc32c(crc, key, klen);
}

uint32_t dir_seg_encode_head(uint8_t hdr[DIR_SEG_HDR], const char *key, size_t klen,
			     uint64_t len)
{
	uint32_t crc;

	memset(hdr, 0, DIR_SEG_HDR);
	nv_put_le32(hdr, DIR_SEG_MAGIC);
	nv_put_le32(hdr + DIR_SEG_STATE_OFF, DIR_SEG_LIVE);
	nv_put_le16(hdr + 8, (uint16_t)klen);
	nv_put_le16(hdr + 10, DIR_SEG_VERSION);
	nv_put_le64(hdr + 16, len);
	crc = head_crc(hdr, key, klen);
	nv_put_le32(hdr + 24, crc);
	return crc;
}

void dir_seg_set_data_crc(uint8_t hdr[DIR_SEG_HDR], uint32_t data_crc)
{
	nv_put_le32(hdr + 28, data_crc);
}

/* Read exactly len bytes at off: 0, -EBADMSG when the image is short, or
 * the read error. */
static int read_full(dir_seg_read_fn rd, void *ctx, uint64_t off, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		long n = rd(ctx, off + done, (uint8_t *)buf + done, len - done);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EBADMSG;
		done += (size_t)n;
	}
	return 0;
}

/*
 * Judge the header at off (hdr: its 32 bytes) and read its key into r.
 * 1 when it holds (r filled but for dead), 0 when it does not (the scan
 * ends), or a read error.
 */
static int judge_head(dir_seg_read_fn rd, void *ctx, uint64_t size, uint64_t off,
		      const uint8_t *hdr, struct dir_seg_rec *r)
{
	size_t klen = nv_get_le16(hdr + 8);
	uint64_t len = nv_get_le64(hdr + 16);
	uint64_t room = size - off - DIR_SEG_HDR;
	int rc;

	if (nv_get_le32(hdr) != DIR_SEG_MAGIC || nv_get_le16(hdr + 10) != DIR_SEG_VERSION ||
	    nv_get_le32(hdr + 12) != 0 || klen == 0 || klen > STORE_KEY_MAX ||
	    klen > room || len > room - klen)
		return 0;
	rc = read_full(rd, ctx, off + DIR_SEG_HDR, r->key, klen);
	if (rc)
		return rc == -EBADMSG ? 0 : rc;
	r->key[klen] = '\0';
	if (memchr(r->key, '\0', klen) || store_key_check(r->key) ||
	    head_crc(hdr, r->key, klen) != nv_get_le32(hdr + 24))
		return 0;
	r->off = off;
	r->klen = klen;
	r->len = len;
	r->data_off = off + DIR_SEG_HDR + klen;
	return 1;
}

/* Does the payload of r hold (its data crc)?  1, 0, or a read error. */
static int judge_data(dir_seg_read_fn rd, void *ctx, const struct dir_seg_rec *r,
		      const uint8_t *hdr, uint8_t *buf)
{
	uint32_t crc = nv_get_le32(hdr + 24);
	uint64_t done = 0;

	while (done < r->len) {
		size_t n = r->len - done < DIR_SEG_SCAN_BUF ? (size_t)(r->len - done)
							    : DIR_SEG_SCAN_BUF;
		int rc = read_full(rd, ctx, r->data_off + done, buf, n);

		if (rc)
			return rc == -EBADMSG ? 0 : rc;
		crc = nv_crc32c(crc, buf, n);
		done += n;
	}
	return crc == nv_get_le32(hdr + 28);
}

int dir_seg_scan(dir_seg_read_fn rd, void *ctx, uint64_t size, dir_seg_visit_fn visit,
		 void *arg, uint64_t *end, unsigned *skipped)
{
	struct dir_seg_rec *r = malloc(sizeof(*r));
	uint8_t *buf = malloc(DIR_SEG_SCAN_BUF);
	uint8_t hdr[DIR_SEG_HDR];
	uint64_t off = 0;
	unsigned skips = 0;
	int rc = 0;

	if (!r || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	while (size >= DIR_SEG_HDR && off <= size - DIR_SEG_HDR) {
		rc = read_full(rd, ctx, off, hdr, DIR_SEG_HDR);
		if (rc == -EBADMSG) {
			rc = 0;
			break;
		}
		if (rc)
			break;
		rc = judge_head(rd, ctx, size, off, hdr, r);
		if (rc <= 0)
			break; /* 0: nothing after this header can be located */
		/* A dead record's payload is not read (invariant 5). */
		r->dead = nv_get_le32(hdr + DIR_SEG_STATE_OFF) == DIR_SEG_DEAD;
		rc = r->dead ? 1 : judge_data(rd, ctx, r, hdr, buf);
		if (rc < 0)
			break;
		if (rc == 1) {
			rc = visit(arg, r);
			if (rc)
				break;
		} else {
			skips++; /* a torn payload: its length still holds */
			rc = 0;
		}
		/* judge_head() bounded klen + len by size - off. */
		off = dir_seg_rec_size(r->klen, r->len) > size - off
		      ? size : off + dir_seg_rec_size(r->klen, r->len);
	}
out:
	if (end)
		*end = off;
	if (skipped)
		*skipped = skips;
	free(buf);
	free(r);
	return rc;
}
