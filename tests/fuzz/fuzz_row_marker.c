/*
 * fuzz_row_marker.c - the batch marker codec (meta/markers.h:
 * meta_marker_decode).
 *
 * Input: the value.
 *
 * Checks: meta_marker_decode answers 0, -EBADMSG or -ENOMEM and holds no
 * memory on failure; a decoded marker keeps markers.h's rules (known
 * class, valid star name, first_slot < end_slot, crossed 0/1, at most
 * META_MARKER_STREAMS_MAX streams sorted by id, each once: invariant 3)
 * and re-encodes to exactly the input.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "meta/chains.h"
#include "meta/markers.h"
#include "meta/streams.h"
#include "src/base/buf.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta_marker m;
	struct nv_buf b;
	int rc;

	fuzz_quiet();
	rc = meta_marker_decode(data, size, &m);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
	if (rc) {
		FUZZ_ASSERT(m.streams == NULL);
		return 0;
	}
	FUZZ_ASSERT(m.cls < NV_CLASS_COUNT && meta_star_check(m.star) == 0);
	FUZZ_ASSERT(m.first_slot < m.end_slot && m.crossed <= 1);
	FUZZ_ASSERT(m.nstreams <= META_MARKER_STREAMS_MAX);
	FUZZ_ASSERT(m.nstreams == 0 || m.streams);
	for (uint32_t i = 1; i < m.nstreams; i++)
		FUZZ_ASSERT(m.streams[i].stream_id > m.streams[i - 1].stream_id);

	nv_buf_init(&b, SIZE_MAX);
	FUZZ_ASSERT(meta_marker_encode(&m, &b) == 0);
	if (data[0] == 2) {
		/* The current version: the encoder gives back the very bytes. */
		FUZZ_ASSERT(b.len == size && !memcmp(b.ptr, data, size));
	} else {
		/* A v1 row is re-encoded as v2: that decodes to the same
		 * marker (each stream ripening with the marker), and encodes
		 * back to itself. */
		struct meta_marker m2;
		struct nv_buf b2;

		FUZZ_ASSERT(meta_marker_decode(b.ptr, b.len, &m2) == 0);
		FUZZ_ASSERT(m2.cls == m.cls && !strcmp(m2.star, m.star) && m2.epoch == m.epoch);
		FUZZ_ASSERT(m2.first_slot == m.first_slot && m2.end_slot == m.end_slot);
		FUZZ_ASSERT(m2.birth_ns == m.birth_ns && m2.ripe_ns == m.ripe_ns &&
			    m2.crossed == m.crossed && m2.nstreams == m.nstreams);
		for (uint32_t i = 0; i < m.nstreams; i++)
			FUZZ_ASSERT(!memcmp(&m2.streams[i], &m.streams[i], sizeof(m.streams[i])));
		nv_buf_init(&b2, SIZE_MAX);
		FUZZ_ASSERT(meta_marker_encode(&m2, &b2) == 0);
		FUZZ_ASSERT(b2.len == b.len && !memcmp(b2.ptr, b.ptr, b.len));
		nv_buf_free(&b2);
		meta_marker_clear(&m2);
	}
	nv_buf_free(&b);
	meta_marker_clear(&m);
	return 0;
}
