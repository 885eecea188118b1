/*
 * fuzz_bundle_footer.c - the bundle trailer and footer-window decoders
 * (engine/bundle.h): bundle_trailer_parse, bundle_footer_open and the
 * lookups on an opened footer (bundle_footer_get, _find_seq, _find_byte,
 * _stream).
 *
 * Input: u64 win_off (little-endian) | u8 fix (FUZZ_FIX_* bits, fuzz.h)
 *        | the footer window as fetched from object offset win_off.
 *
 * Checks:
 *  - bundle_trailer_parse(), given the window as an object suffix of an
 *    object of win_off + len bytes, and given it as a whole object,
 *    answers 0 or -EBADMSG; on 0 the footer window it names ends at the
 *    object's end and holds a whole number of entries plus the trailer.
 *  - bundle_footer_open() answers 0 or -EBADMSG; on 0 the view borrows
 *    the window, n = (len - 32) / 64, footer_off = win_off, and the
 *    trailer parse of the same bytes agrees on the window.
 *  - every entry the view hands out lies below footer_off and every
 *    lookup answer holds its key (fuzz_check_footer()).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "engine/bundle.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in;
	struct bundle_footer f;
	uint64_t win_off, obj_size, off;
	uint32_t flen;
	unsigned fix;
	const uint8_t *rest;
	uint8_t *win;
	size_t len;
	int rc, trc;

	fuzz_quiet();
	fuzz_in_init(&in, data, size);
	win_off = fuzz_le64(&in);
	fix = fuzz_u8(&in);
	rest = fuzz_rest(&in, &len);
	win = fuzz_memdup(rest, len);
	fuzz_bundle_fix(NULL, win, len, win_off, fix);

	/* The trailer alone, as the last bytes of a whole object. */
	trc = bundle_trailer_parse(win, len, (uint64_t)len, &off, &flen);
	FUZZ_ASSERT(trc == 0 || trc == -EBADMSG);
	if (trc == 0) {
		FUZZ_ASSERT(flen >= BUNDLE_TRAILER_SIZE && flen <= len);
		FUZZ_ASSERT((flen - BUNDLE_TRAILER_SIZE) % BUNDLE_ENTRY_SIZE == 0);
		FUZZ_ASSERT(off + flen == len);
	}

	/* As the suffix of an object that ends with the window. */
	obj_size = win_off + len;
	trc = obj_size >= win_off ? bundle_trailer_parse(win, len, obj_size, &off, &flen)
				  : -EBADMSG; /* the offset wraps: no such object */
	FUZZ_ASSERT(trc == 0 || trc == -EBADMSG);
	if (trc == 0) {
		FUZZ_ASSERT(flen >= BUNDLE_TRAILER_SIZE && flen <= obj_size);
		FUZZ_ASSERT((flen - BUNDLE_TRAILER_SIZE) % BUNDLE_ENTRY_SIZE == 0);
		FUZZ_ASSERT(off == obj_size - flen);
	}

	rc = bundle_footer_open(win, len, win_off, &f);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	if (rc == 0) {
		FUZZ_ASSERT(len >= BUNDLE_TRAILER_SIZE);
		FUZZ_ASSERT(f.entries == win);
		FUZZ_ASSERT((uint64_t)f.n * BUNDLE_ENTRY_SIZE + BUNDLE_TRAILER_SIZE == len);
		FUZZ_ASSERT(f.footer_off == win_off);
		/* Both decoders read the same trailer: they agree. */
		if (obj_size >= win_off)
			FUZZ_ASSERT(trc == 0 && off == win_off && flen == len);
		(void)fuzz_check_footer(&f);
	}
	free(win);
	return 0;
}
