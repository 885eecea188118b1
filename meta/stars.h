/*
 * stars.h - the star registry: which stars exist and whether they are
 * alive.
 *
 * For: the settle duty (engine/auditor.c), which may settle another
 * star's epochs only when that star is gone.  A running star rewrites
 * its row every heartbeat; a closing star marks it closed.  A star whose
 * heartbeat is older than the lease timeout is presumed dead.  Not for:
 * per-stream writer leases (a later stage, engine/lease.c).
 *
 * Row ("star", id) v1: u64 started_ns | u64 heartbeat_ns | u32 pid
 *   | str host | u8 state (1 running, 2 closed)
 */
#ifndef NOVAFS_META_STARS_H
#define NOVAFS_META_STARS_H

#include <stdint.h>

#include "meta/chains.h"
#include "meta/kv.h"

enum meta_star_state { STAR_RUNNING = 1, STAR_CLOSED = 2 };

struct meta_star {
	char id[META_STAR_MAX + 1];
	uint64_t started_ns;
	uint64_t heartbeat_ns;
	uint32_t pid;
	char host[65];
	uint8_t state;
};

int meta_star_encode(const struct meta_star *s, struct nv_buf *out)
	__attribute__((warn_unused_result));
int meta_star_decode(const void *p, size_t n, const char *id, struct meta_star *s)
	__attribute__((warn_unused_result));

/* Write (unconditionally: only the star itself writes its row). */
int meta_star_put(struct kv *kv, const struct meta_star *s) __attribute__((warn_unused_result));
/* 0 and *out, -ENOENT, -EBADMSG, kv error. */
int meta_star_get(struct kv *kv, const char *id, struct meta_star *out)
	__attribute__((warn_unused_result));

#endif
