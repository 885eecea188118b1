/*
 * fuzz_bundle_object.c - a whole bundle object read the way a reader
 * reads it (engine/bundle.h): the trailer from the object's end, the
 * footer window it names, every entry, and every entry's chunk.
 *
 * Input: u8 fix (FUZZ_FIX_* bits, fuzz.h) | the object.
 * The repairs act on the window of the last 32 + 64 * n bytes, n being
 * the trailer's entry count (clamped to what the object can hold), so a
 * mutated valid object keeps reaching the entry and chunk decoders.
 *
 * Checks:
 *  - bundle_trailer_parse() gives the same answer from the whole object
 *    and from its last 32 bytes; on 0 the window ends at the object's end.
 *  - bundle_footer_open() of that window answers 0 or -EBADMSG; on 0 the
 *    footer checks of fuzz_check_footer() hold (entries lie below the
 *    footer, lookups hold their keys).
 *  - every entry's chunk (which then lies inside the object) decodes with
 *    0, -EBADMSG or -E2BIG; on 0 to exactly nrec frames filling raw_len.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "engine/bundle.h"
#include "src/base/buf.h"
#include "src/base/endian.h"
#include "tests/fuzz/fuzz.h"

#define OUT_MAX (4u << 20) /* see fuzz_bundle_chunk.c */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in;
	struct bundle_footer f;
	struct nv_buf raw;
	uint64_t off, off2, nn, fo;
	uint32_t flen, flen2;
	const uint8_t *rest;
	uint8_t *obj;
	size_t len;
	unsigned fix;
	int rc, rc2;

	fuzz_quiet();
	fuzz_in_init(&in, data, size);
	fix = fuzz_u8(&in);
	rest = fuzz_rest(&in, &len);
	if (len < BUNDLE_TRAILER_SIZE)
		return 0;
	obj = fuzz_memdup(rest, len);

	nn = nv_get_le32(obj + len - BUNDLE_TRAILER_SIZE + 12);
	if (nn > (len - BUNDLE_TRAILER_SIZE) / BUNDLE_ENTRY_SIZE)
		nn = (len - BUNDLE_TRAILER_SIZE) / BUNDLE_ENTRY_SIZE;
	fo = len - BUNDLE_TRAILER_SIZE - nn * BUNDLE_ENTRY_SIZE;
	fuzz_bundle_fix(obj, obj + fo, len - fo, fo, fix);

	rc = bundle_trailer_parse(obj, len, len, &off, &flen);
	rc2 = bundle_trailer_parse(obj + len - BUNDLE_TRAILER_SIZE, BUNDLE_TRAILER_SIZE, len,
				   &off2, &flen2);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	FUZZ_ASSERT(rc == rc2);
	if (rc) {
		free(obj);
		return 0;
	}
	FUZZ_ASSERT(off == off2 && flen == flen2);
	FUZZ_ASSERT(flen <= len && off + flen == len);

	rc = bundle_footer_open(obj + off, flen, off, &f);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	if (rc) {
		free(obj);
		return 0;
	}
	FUZZ_ASSERT(f.footer_off == off && f.entries == obj + off);
	(void)fuzz_check_footer(&f);

	nv_buf_init(&raw, OUT_MAX);
	for (uint32_t i = 0; i < f.n; i++) {
		struct bundle_entry e;

		if (bundle_footer_get(&f, i, &e))
			continue;
		/* fuzz_check_footer() proved chunk_off + comp_len <= footer_off. */
		nv_buf_reset(&raw);
		rc = bundle_chunk_decode(&e, obj + e.chunk_off, e.comp_len, &raw);
		FUZZ_ASSERT(rc == 0 || rc == -EBADMSG || rc == -E2BIG);
		if (rc) {
			FUZZ_ASSERT(raw.len == 0);
			continue;
		}
		FUZZ_ASSERT(raw.len == e.raw_len);
		FUZZ_ASSERT(fuzz_walk_frames(raw.ptr, raw.len) == (long)e.nrec);
	}
	nv_buf_free(&raw);
	free(obj);
	return 0;
}
