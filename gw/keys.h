/*
 * keys.h - the Gateway's read-only API keys, per bucket (novagw
 * --api-keys-file): loading the file and checking a request's
 * Authorization header against it.
 *
 * For: src/novagw.c (loading once at start) and gw/http.c (every
 * request).  Not for: the cluster secret the Gateway shows the stars
 * (api/auth.h); writing (a key only ever reads).
 *
 * The file: one "BUCKET KEY" per line ("*" for every bucket); blank
 * lines and lines starting with '#' are skipped; a key is 16 to 256
 * printable bytes without white space; one key may appear on several
 * lines, one per bucket.  Like the cluster secret, the file must be a
 * regular file neither group nor others can access.
 *
 * Invariants:
 *  1. No key, or a key the file does not hold: -EACCES (401); a key the
 *     file holds for other buckets only: -EPERM (403).
 *  2. Constant time: the presented key's SHA-256 is compared
 *     (CRYPTO_memcmp) with every entry's, all of them, whatever matched,
 *     so neither a key's bytes nor its position leak through timing.
 *  3. A key is never logged.
 */
#ifndef NOVAFS_GW_KEYS_H
#define NOVAFS_GW_KEYS_H

#include <stddef.h>

#define GW_KEY_MIN 16
#define GW_KEY_MAX 256
#define GW_KEYS_MAX 4096 /* entries */

struct gw_keys;

/* Load path (borrowed): 0 and *out (gw_keys_free()), else -errno and
 * *why (static) plus *line (1-based; 0: not a line's fault). */
int gw_keys_load(const char *path, struct gw_keys **out, const char **why, unsigned *line)
	__attribute__((warn_unused_result));
/* Parse text (borrowed, len bytes) as the file's contents (the part the
 * fuzz target and unit tests drive). */
int gw_keys_parse(const char *text, size_t len, struct gw_keys **out, const char **why,
		  unsigned *line) __attribute__((warn_unused_result));
void gw_keys_free(struct gw_keys *k); /* NULL is a no-op */
size_t gw_keys_count(const struct gw_keys *k);

/* May the request whose Authorization header is header (borrowed; NULL:
 * absent) read bucket?  0, -EACCES or -EPERM (invariant 1). */
int gw_keys_check(const struct gw_keys *k, const char *header, const char *bucket)
	__attribute__((warn_unused_result));

#endif
