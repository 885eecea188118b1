/*
 * stars.h - the star registry: which stars exist, where their star API
 * listens, and whether they are alive.
 *
 * For: engine/lease.c (a star registers at start and keeps its row's
 * registry lease alive), the settle duty (engine/auditor.c) and the
 * take of a stream (engine/lease.c), which may settle or wait for
 * another star's epochs only when that star is gone.  Not for: the
 * per-stream writer leases (meta/leases.h).
 *
 * Row ("star", id) v2, put bound to the star's registry lease (kv.h):
 *   u8 2 | u64 started_ns | u32 pid | str host | str data_dir | str addr
 *   | str location | u8 state | u64 epoch per class (NV_CLASS_COUNT)
 *   | u64 lease (the registry lease the row is bound to)
 * state: 1 serving, 2 closed, 3 draining (novactl drain: the star takes
 * no writer lease and hands off the ones it holds; engine/handoff.h).
 * The state byte is the only field anyone but the star rewrites
 * (meta_star_set_state(), keeping the row bound to the star's lease), so
 * a v2 reader of any version understands a draining row.  epochs: the class heads this
 * incarnation started with (0: not minted yet); older epochs of the star
 * belong to an earlier incarnation.
 *
 * Invariants:
 *  1. A star whose row is gone is dead to every other star: the row
 *     lives exactly as long as its registry lease (no wall clock of
 *     another host is ever compared).
 *  2. A star id has at most one row, made by a create-if-absent
 *     transaction (meta_star_register()); a second star with that id is
 *     refused while the row lives.
 *  3. Rows of format v1 (a heartbeat, before issue 15) are not bound to
 *     a lease; they decode as -EBADMSG and are replaced at registration.
 */
#ifndef NOVAFS_META_STARS_H
#define NOVAFS_META_STARS_H

#include <stdint.h>

#include "meta/chains.h"
#include "meta/kv.h"
#include "src/base/names.h"

enum meta_star_state { STAR_RUNNING = 1, STAR_CLOSED = 2, STAR_DRAINING = 3 };

#define META_STAR_HOST_MAX 64
#define META_STAR_DIR_MAX 1024
#define META_STAR_ADDR_MAX 63
#define META_STAR_LOC_MAX 63

struct meta_star {
	char id[META_STAR_MAX + 1];
	uint64_t started_ns;
	uint32_t pid;
	char host[META_STAR_HOST_MAX + 1];
	char dir[META_STAR_DIR_MAX + 1];  /* the star's data directory */
	char addr[META_STAR_ADDR_MAX + 1]; /* listen=, "" none */
	char location[META_STAR_LOC_MAX + 1];
	uint8_t state;
	uint64_t epochs[NV_CLASS_COUNT];
	uint64_t lease; /* lets a restart of the same data directory revoke it */
};

int meta_star_encode(const struct meta_star *s, struct nv_buf *out)
	__attribute__((warn_unused_result));
int meta_star_decode(const void *p, size_t n, const char *id, struct meta_star *s)
	__attribute__((warn_unused_result));

/* Create the row bound to lease, if no row exists: 0, -EEXIST (a row
 * exists: meta_star_get() says whose), -ENOLCK (lease lost), kv error. */
int meta_star_register(struct kv *kv, const struct meta_star *s, uint64_t lease)
	__attribute__((warn_unused_result));
/* Rewrite the row bound to lease if its version is still ver (0: absent):
 * 0, -ECANCELED, -ENOLCK, kv error.  *nver (may be NULL): the new one. */
int meta_star_replace(struct kv *kv, const struct meta_star *s, uint64_t lease, uint64_t ver,
		      uint64_t *nver) __attribute__((warn_unused_result));
/* 0 and *out (*ver, may be NULL, its version), -ENOENT, -EBADMSG (also a
 * v1 row), kv error. */
int meta_star_get(struct kv *kv, const char *id, struct meta_star *out, uint64_t *ver)
	__attribute__((warn_unused_result));

/* The most rows meta_star_list() visits (a registry is a handful of
 * stars; past this the list is cut and -E2BIG returned after the visit). */
#define META_STARS_LIST_MAX 256

/* Visit every decodable row (v1 rows are skipped) in id order with fn
 * (the row borrowed for the call; nonzero stops and is returned).  0,
 * fn's value, -E2BIG (more than META_STARS_LIST_MAX rows), kv error. */
typedef int (*meta_star_fn)(void *arg, const struct meta_star *s);
int meta_star_list(struct kv *kv, meta_star_fn fn, void *arg)
	__attribute__((warn_unused_result));

/* Set the state of star id's row to state, keeping its lease and every
 * other field (a compare on the row's version, retried a few times when
 * the star rewrote it meanwhile).  0, -ENOENT (no live star id),
 * -EBADMSG, -EAGAIN (it kept changing), kv error. */
int meta_star_set_state(struct kv *kv, const char *id, uint8_t state)
	__attribute__((warn_unused_result));

#endif
