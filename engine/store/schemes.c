/*
 * schemes.c - the URL schemes of store_open(): the one file that knows
 * which object-store backends exist (see store.h struct store_scheme).
 *
 * For: listing the backends compiled into libnovastore.a, in the order
 * store_open() tries them and its error message names them.  A new
 * backend is one line here (its descriptor comes from its own header);
 * one built only under a configure switch is listed under that switch's
 * #if, so the table always names exactly what was compiled in.
 * Not for: parsing URLs (each backend parses what follows its prefix),
 * wrappers that are not opened by URL (fault.h, set.h).
 *
 * Invariants:
 *  1. No two prefixes are a prefix of each other, and at most one scheme
 *     takes bare absolute paths (path = true), so a URL selects at most
 *     one backend whatever the order.
 *  2. The table ends with NULL and is immutable (no lock).
 */
#include "config.h"
#include "engine/store/store.h"
#include "engine/store/dir.h"
#include "engine/store/s3.h"

#include <stddef.h>

const struct store_scheme *const store_schemes[] = {
	&dir_store_scheme, /* dir:/abs/path, /abs/path (embedded default) */
	&s3_store_scheme,  /* s3://bucket?... (engine/store/s3.am) */
	NULL,
};
