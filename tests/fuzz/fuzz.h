/*
 * fuzz.h - shared helpers of the fuzz targets (tests/fuzz/fuzz_*.c).
 *
 * For: the pieces every target needs: an invariant check that aborts
 * (so libFuzzer, ASan and the replay driver all see a crash), a cursor
 * that splits an input into fields without ever reading past it, and
 * the bundle checks shared by the footer and object targets.  Not for:
 * anything linked into novafs itself.
 *
 * Each target defines LLVMFuzzerTestOneInput() and is built twice:
 *  - with clang -fsanitize=fuzzer,address,undefined by `make fuzz`
 *    (libFuzzer supplies main());
 *  - with the normal compiler plus tests/fuzz/driver.c by `make check`,
 *    which replays tests/fuzz/corpus/<name>/ and regressions/<name>/.
 *
 * Invariants:
 *  1. A target never reads outside the bytes it was given: both libFuzzer
 *     and driver.c hand over an exactly-sized heap copy, so an overread
 *     is an ASan report in the sanitizer builds.
 *  2. A target frees everything it allocated before returning (LeakSanitizer
 *     runs at the end of every libFuzzer input).
 *  3. A violated invariant calls FUZZ_ASSERT: one line naming the file,
 *     line and condition on stderr, then abort().
 */
#ifndef NOVAFS_TESTS_FUZZ_FUZZ_H
#define NOVAFS_TESTS_FUZZ_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/bundle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                      \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: fuzz invariant violated: %s\n", \
				__FILE__, __LINE__, #cond);                    \
			abort();                                               \
		}                                                              \
	} while (0)

/* Silence nv_log: option parsers log every malformed input at ERROR,
 * which would flood the fuzzer's output.  Called at the top of each
 * input (one store, no cost worth measuring). */
void fuzz_quiet(void);

/* A cursor over the input.  Reads past the end yield zeros and leave the
 * cursor at the end, so a short input is simply an input with zero
 * fields. */
struct fuzz_in {
	const uint8_t *p;
	size_t len;
	size_t off;
};

static inline void fuzz_in_init(struct fuzz_in *in, const uint8_t *p, size_t len)
{
	in->p = p;
	in->len = len;
	in->off = 0;
}

uint8_t fuzz_u8(struct fuzz_in *in);
uint64_t fuzz_le64(struct fuzz_in *in);
/* The rest of the input (borrowed), and its length in *n. */
const uint8_t *fuzz_rest(struct fuzz_in *in, size_t *n);

/* A NUL-terminated heap copy of n bytes (caller frees).  Aborts on
 * ENOMEM: a harness failure, not a finding. */
char *fuzz_strndup(const uint8_t *p, size_t n);
/* An exactly-sized heap copy (caller frees; NULL when n == 0). */
uint8_t *fuzz_memdup(const uint8_t *p, size_t n);

/*
 * The bundle checks shared by fuzz_bundle_footer and fuzz_bundle_object,
 * for a footer f that bundle_footer_open() accepted:
 *  - every entry bundle_footer_get() accepts passes the format checks
 *    (codec, limits, frames fit raw_len) and its chunk lies wholly below
 *    footer_off; bundle_footer_get(n) is -EINVAL;
 *  - every answer of find_seq/find_byte/stream names entries that hold
 *    the key; on a well-formed footer (every entry valid, sorted, no
 *    overlaps) every record's seq and every body byte is found in its own
 *    entry, and bundle_footer_stream() returns exactly a stream's run.
 * Returns the number of entries that decoded, for callers that go on to
 * the chunks.
 */
uint32_t fuzz_check_footer(const struct bundle_footer *f);

/*
 * Repairs a bundle target may apply to its (mutable copy of the) input
 * before decoding, chosen by bits of one input byte.  Without them the
 * fuzzer would spend nearly every input on a CRC mismatch; with them it
 * reaches the checks behind the CRCs, while inputs without the bits
 * still exercise the CRC checks themselves.
 */
#define FUZZ_FIX_SHAPE 0x01   /* trailer magic, version, entry size, n, footer_off */
#define FUZZ_FIX_CHUNKS 0x02  /* each in-range entry's crc = crc32c of its chunk */
#define FUZZ_FIX_ENTRIES 0x04 /* trailer's crc of the entries */
#define FUZZ_FIX_TRAILER 0x08 /* trailer's own crc */

/*
 * Apply the repairs in fix to a footer window win[0, len) whose object
 * offset is footer_off (the chunks, for FUZZ_FIX_CHUNKS, are obj[0,
 * footer_off), obj may be NULL when the window stands alone).
 * FUZZ_FIX_SHAPE sets n to (len - 32) / 64, so the window must hold
 * exactly the entries and the trailer for a window that validates.
 * Order: shape, chunks, entries, trailer, so later CRCs cover earlier
 * repairs.  Does nothing when len < 32.
 */
void fuzz_bundle_fix(uint8_t *obj, uint8_t *win, size_t len, uint64_t footer_off,
		     unsigned fix);

/* Walk frames[0, len) with bundle_frames_next(): every record lies
 * inside the buffer, the offset strictly grows.  Returns the number of
 * records when the walk ends cleanly at len, or -1 at a malformed frame. */
long fuzz_walk_frames(const uint8_t *frames, size_t len);

#endif
