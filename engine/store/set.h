/*
 * set.h - bucket sets and class routing: several stores behaving as one.
 *
 * For: the express class's bucket set (DESIGN.md: each class has its own
 * bucket set for chain slots; settled objects always go to the standard
 * bucket).  A set holds one store per zone.  A slot is written to the
 * bucket of the star's zone (`location`), and to the next zone's when
 * that one fails; reads try the location's bucket first and fall through
 * to the others on an error or a miss; deletes and lists cover every
 * bucket.  The router sends keys under chains/express/ to the express set
 * and everything else to the standard store, so the engine keeps one
 * store handle.  Not for: replication (a slot lives in one bucket).
 *
 * Invariants:
 *  1. A put that succeeds landed in exactly one member, unless flags has
 *     STORE_EVERYWHERE (fence objects): then it landed in every member
 *     that answered, and in none when any member already held the key
 *     (-EEXIST: the copies it made are removed again, so a fence never
 *     stands beside a slot in another bucket).
 *  2. A key is absent (-ENOENT) only when every member says so.
 *  3. A member that failed (not an answer about the key) is tried after
 *     the others until its backoff ends: a dead zone costs one failed
 *     request per backoff, not one per slot (set.c, member health).
 *  4. A put that failed on a member may still have left bytes there: a
 *     lax server killed mid-PUT keeps a prefix (s3rver), a real one may
 *     have stored the whole object before its reply was lost.  So a key
 *     can have a bad copy in one zone beside the good one in another;
 *     readers that verify go through store_read_copies(), which reads
 *     around it, and deletes cover every member, so it goes with the slot.
 */
#ifndef NOVAFS_STORE_SET_H
#define NOVAFS_STORE_SET_H

#include <stdint.h>

#include "engine/store/store.h"

/*
 * Open a set from URLs separated by ';' (each a store_open() URL; a
 * `zone=Z` query parameter names its zone — dir: URLs may carry it too).
 * location picks the preferred member (NULL or unknown: the first).
 * 0 and *out, -EINVAL (logged), or a member's open error.
 */
int store_set_open(const char *urls, const char *location, struct store **out)
	__attribute__((warn_unused_result));

/*
 * A set over n opened stores (ownership passes, also on failure), zones[i]
 * naming each (NULL or "": "z<i>"); location as above.  backoff_min_ns is
 * how long a failing member is tried last at first (0: 2 s; it doubles
 * per failure up to 60 s).  0 and *out, -EINVAL (n not in 1..8), -ENOMEM.
 */
int store_set_new(struct store **members, char **zones, int n, const char *location,
		  uint64_t backoff_min_ns, struct store **out)
	__attribute__((warn_unused_result));

/* A router over std and express (both taken over; express may be NULL:
 * then *out is std itself).  0 and *out, -ENOMEM (both closed). */
int store_route_new(struct store *std, struct store *express, struct store **out)
	__attribute__((warn_unused_result));

#endif
