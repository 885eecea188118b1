/*
 * layout.h - a stream's layout as a JSON document (like `juicefs info`):
 * where its bytes are, for user.nova.layout and `novactl layout`.
 *
 * The document: {"stream", "seq", "bytes", "frontier", "settled",
 * "trim_seq", "trim_byte", "span_refs", "catalog_rows", "settled_objects":
 * [{"key", "first_seq", "end_seq", "first_byte", "bytes", "stored_bytes"}],
 * "spans": [{"first_seq", "end_seq", "bytes", "epoch", "slots"}],
 * "truncated"}.  Counts are always complete; the two lists stop after
 * max_entries entries each (0: no limit) and "truncated" says so.
 */
#ifndef NOVAFS_ENGINE_LAYOUT_H
#define NOVAFS_ENGINE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "meta/kv.h"

/* Positions only the leader knows; NULL: taken from the rows. */
struct layout_live {
	uint64_t seq, bytes, frontier, settled;
};

/* Entries per list that keep the document under 64 KiB (xattrs). */
#define LAYOUT_XATTR_ENTRIES 200

/* The document (caller frees), or NULL and *err. */
char *layout_json(struct kv *kv, uint64_t stream, const struct layout_live *live,
		  size_t max_entries, int *err);

#endif
