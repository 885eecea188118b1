/*
 * segfmt.h - the record format of the directory store's segment files
 * (engine/store/dir/seg.c keeps chain slots in them).
 *
 * For: encoding a record header, and scanning a segment image record by
 * record, judging every byte as hostile (tests/fuzz/fuzz_dir_segment.c).
 * Not for: which keys go to segments, the index, or I/O policy (seg.c).
 *
 * A segment is records back to back from offset 0, each padded to a
 * multiple of 8 bytes; the never-written rest of the file reads as zeros.
 * One record, integers little-endian:
 *
 *   0  u32 magic "NVSR"
 *   4  u32 state "LIVE", or "DEAD" once the key is deleted (the one field
 *          ever rewritten in place; no checksum covers it)
 *   8  u16 key length (1..STORE_KEY_MAX)
 *  10  u16 version (1)
 *  12  u32 reserved (0)
 *  16  u64 payload length
 *  24  u32 head crc: crc32c of bytes 0..3, 8..23 and the key
 *  28  u32 data crc: crc32c of the payload, seeded with the head crc (so
 *          it covers header, key and payload)
 *  32  key bytes, then payload bytes, then zeros to the next multiple of 8
 *
 * Invariants:
 *  1. dir_seg_scan() reports a record only when its header, key and
 *     payload checksums all hold, its key is a valid store key, and it
 *     lies wholly inside the image: a torn or flipped record is never
 *     reported as valid.
 *  2. A record whose header holds but whose payload does not (a torn
 *     payload) is skipped, and the scan goes on after it; a header that
 *     does not hold (zeros, a torn header, garbage) ends the scan, since
 *     nothing after it can be located.
 *  3. A state other than "DEAD" reads as live: a flipped state byte can
 *     bring back a deleted record (garbage a delete removes again), never
 *     hide a live one.
 *  4. The scan reads through the caller's read function only, at most
 *     DIR_SEG_SCAN_BUF bytes at a time, and never past size.
 *  5. The payload of a record whose state reads "DEAD" is never read nor
 *     checksummed: it is reported dead on its header alone (a record is
 *     marked dead only after its put was acked, so its payload held; and
 *     a dead record is never read again).  A scan reads the headers and
 *     keys of every record but the payloads of live ones only, so opening
 *     a store costs its live slot bytes, not every byte ever written
 *     into segments that are not yet all dead.
 */
#ifndef NOVAFS_DIR_SEGFMT_H
#define NOVAFS_DIR_SEGFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/store/store.h"

#define DIR_SEG_HDR 32u
#define DIR_SEG_MAGIC 0x5253564eu /* "NVSR" */
#define DIR_SEG_LIVE 0x4556494cu  /* "LIVE" */
#define DIR_SEG_DEAD 0x44414544u  /* "DEAD" */
#define DIR_SEG_STATE_OFF 4u
#define DIR_SEG_VERSION 1u
/* Payload bytes checksummed per read during a scan. */
#define DIR_SEG_SCAN_BUF (256u * 1024)

/* Bytes a record of a klen-byte key and len-byte payload takes. */
static inline uint64_t dir_seg_rec_size(size_t klen, uint64_t len)
{
	return (DIR_SEG_HDR + klen + len + 7) & ~(uint64_t)7;
}

/* One record as a scan reports it (borrowed for the visit). */
struct dir_seg_rec {
	uint64_t off;      /* of the header in the segment */
	uint64_t data_off; /* of the payload */
	uint64_t len;      /* payload bytes */
	bool dead;
	size_t klen;
	char key[STORE_KEY_MAX + 1];
};

/* Fill hdr for key (klen bytes) and a len-byte payload whose crc32c,
 * seeded with the value this returns, the caller then stores with
 * dir_seg_set_data_crc().  Returns the head crc. */
uint32_t dir_seg_encode_head(uint8_t hdr[DIR_SEG_HDR], const char *key, size_t klen,
			     uint64_t len);
void dir_seg_set_data_crc(uint8_t hdr[DIR_SEG_HDR], uint32_t data_crc);

/* Read len bytes at off of the image into buf: the bytes read (fewer only
 * at its end) or -errno. */
typedef long (*dir_seg_read_fn)(void *ctx, uint64_t off, void *buf, size_t len);
/* A valid record: 0 to go on, else stop the scan with that value. */
typedef int (*dir_seg_visit_fn)(void *arg, const struct dir_seg_rec *r);

/*
 * Scan an image of size bytes from offset 0 (invariants 1-5), calling
 * visit for each valid record in order.  *end (may be NULL) gets the
 * offset after the last record that was valid or skipped; *skipped (may
 * be NULL) the number of torn payloads skipped.  Returns 0, a read error,
 * visit's value, or -ENOMEM.
 */
int dir_seg_scan(dir_seg_read_fn rd, void *ctx, uint64_t size, dir_seg_visit_fn visit,
		 void *arg, uint64_t *end, unsigned *skipped)
	__attribute__((warn_unused_result));

#endif
