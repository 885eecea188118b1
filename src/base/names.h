/*
 * names.h - the vocabulary every layer shares: stream classes and the
 * rules for bucket and stream names.
 *
 * For: the one home of what a class is called and what a valid name is,
 * so the metastore rows (meta/streams.h), the engine (engine/star.h,
 * engine/stream.h) and the FUSE face (fs/) agree without fs/ reaching
 * the metastore.  Not for: storing names or classes (meta/streams.h), or
 * what a class means to the engine (its chain: engine/star.h).
 *
 * Invariants:
 *  1. Classes are dense, 0 .. NV_CLASS_COUNT - 1, and their names are
 *     the ones user.nova.class shows and accepts.
 *  2. A name that passes nv_bucket_name_check() / nv_stream_name_check()
 *     fits the fixed buffers sized by NV_BUCKET_NAME_MAX /
 *     NV_STREAM_NAME_MAX (+ 1 for the NUL).
 */
#ifndef NOVAFS_BASE_NAMES_H
#define NOVAFS_BASE_NAMES_H

#include <stddef.h>

enum nv_class { NV_CLASS_STANDARD = 0, NV_CLASS_EXPRESS = 1, NV_CLASS_COUNT = 2 };

/* "standard"/"express"; "?" otherwise (a static string). */
const char *nv_class_name(unsigned cls);
/* s is n bytes (borrowed; a trailing newline or NUL is ignored).  0 and
 * *cls for "standard"/"express", else -EINVAL. */
int nv_class_parse(const char *s, size_t n, unsigned *cls) __attribute__((warn_unused_result));

#define NV_BUCKET_NAME_MAX 63  /* bytes, without the NUL */
#define NV_STREAM_NAME_MAX 255 /* bytes, without the NUL (NAME_MAX) */

/* name borrowed, NUL-terminated.  0 when a bucket name is valid: 1..63
 * of [A-Za-z0-9._-], not starting with '.'; else -EINVAL (-ENAMETOOLONG
 * when too long). */
int nv_bucket_name_check(const char *name) __attribute__((warn_unused_result));
/* name borrowed, NUL-terminated.  0 when a stream name is valid: 1..255
 * bytes, no '/', not "." or ".." (dot-names are valid); else -EINVAL or
 * -ENAMETOOLONG. */
int nv_stream_name_check(const char *name) __attribute__((warn_unused_result));

#endif
