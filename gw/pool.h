/*
 * pool.h - the Gateway's byte budgets: one pool of in-flight bytes over
 * every response (--fetch-inflight), and the decoded-footer budget
 * (--footer-cache-bytes).
 *
 * For: gw/http.c and gw/sse.c (each response takes the bytes it holds
 * before it fetches them and gives them back when they are sent or the
 * client is dropped).  Not for: what the bytes are (gw/source.h).
 *
 * Locking: pool->lock guards used; waiters sleep on pool->cond
 * (CLOCK_MONOTONIC).
 *
 * Invariants:
 *  1. used never exceeds cap: a take waits (up to its deadline) until
 *     the bytes are free; a take larger than cap is refused (-E2BIG).
 *  2. Every take is matched by one give of the same size (the caller's
 *     duty; gw_pool_free() logs a pool that is not empty).
 */
#ifndef NOVAFS_GW_POOL_H
#define NOVAFS_GW_POOL_H

#include <stddef.h>
#include <stdint.h>

struct gw_pool;

/* name (borrowed, static) labels the log lines.  NULL on ENOMEM. */
struct gw_pool *gw_pool_new(const char *name, uint64_t cap);
void gw_pool_free(struct gw_pool *p); /* NULL is a no-op */

/* Take n bytes, waiting at most wait_ns: 0, -EAGAIN (not free in time),
 * -E2BIG (n > cap). */
int gw_pool_take(struct gw_pool *p, uint64_t n, uint64_t wait_ns)
	__attribute__((warn_unused_result));
void gw_pool_give(struct gw_pool *p, uint64_t n);

uint64_t gw_pool_used(struct gw_pool *p);
uint64_t gw_pool_cap(const struct gw_pool *p);

#endif
