/*
 * dir.h - the directory object store (embedded default).
 *
 * An object is a file ROOT/<key>; a put writes a temporary file beside
 * it, fsyncs it, then link()s (create-once) or rename()s it into place and
 * fsyncs the directory, so objects are atomic and durable on return.
 * With slot_segments (dir_store_open_opts()), chain slots are records in
 * segment files under ROOT/#seg/ instead (engine/store/dir/seg.c).
 * Multipart uploads live under ROOT/#mpu/<upload id>/ until completed
 * ('#' can never appear in a key, so no object can collide with them).
 * Limits of this backend: a key component longer than the file system's
 * NAME_MAX, and the second of two keys where one is a directory of the
 * other ("a" and "a/b"), cannot be stored: put answers -EINVAL (logged).
 */
#ifndef NOVAFS_STORE_DIR_H
#define NOVAFS_STORE_DIR_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/store/store.h"

/* Open (creating ROOT if needed) a directory store.  0 and *out (caller
 * owns; store_close()), -ENOTDIR, -EACCES, -ENOMEM ... (logged). */
int dir_store_open(const char *root, struct store **out)
	__attribute__((warn_unused_result));

/*
 * Choices of dir_store_open_opts().  slot_segments: chain slot keys
 * (chains/<class>/<star>/<epoch>/<16 hex>) are appended to preallocated
 * segment files under ROOT/#seg, one fdatasync per slot (or fewer: puts
 * to one segment share syncs), instead of a file each; only one process
 * may write them.  Whatever the choice, slots already in segments are
 * found (the index is rebuilt by scanning them at open).
 * segment_bytes: largest preallocated segment, 0 = 64 MiB.
 */
struct dir_store_opts {
	bool slot_segments;
	uint64_t segment_bytes;
};
/* dir_store_open() with opts (borrowed for the call; NULL = defaults). */
int dir_store_open_opts(const char *root, const struct dir_store_opts *opts,
			struct store **out) __attribute__((warn_unused_result));

/* Its store_open() scheme: "dir:/abs/path" or "/abs/path" (schemes.c). */
extern const struct store_scheme dir_store_scheme;

#endif
