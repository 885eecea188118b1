/*
 * backlog.h - the backlog budget: tokens for bytes admitted but not yet
 * absorbed.
 *
 * For: back-pressure on the append path.  A producer takes tokens at
 * admission and blocks while none are left; the absorb returns them when
 * a batch's refs are committed.  A writer waits for tokens at most the
 * backlog's wait bound (backlog_wait_s; the absorb cannot commit, e.g.
 * the metastore is unreachable), then fails with -ETIMEDOUT, having
 * taken nothing.  Not for: memory accounting of caches.
 *
 * Invariants:
 *  1. used <= budget, except that one request larger than the whole
 *     budget is admitted when used == 0 (it could never fit otherwise).
 *  2. Waiters are served in arrival order (a ticket queue), so a large
 *     request is not starved by a stream of small ones.
 *  3. After backlog_shutdown() every waiter and every later take returns
 *     -ESHUTDOWN; gives still work.
 *  4. A take that times out leaves the queue and takes nothing; the
 *     waiters behind it keep their order.
 */
#ifndef NOVAFS_ENGINE_BACKLOG_H
#define NOVAFS_ENGINE_BACKLOG_H

#include <stdint.h>

#include "engine/stats.h"

struct backlog;

/* New budget of `budget` bytes; a take waits at most wait_ns (0: as long
 * as it takes).  stats borrowed for the backlog's life (may be NULL).
 * NULL on ENOMEM. */
struct backlog *backlog_new(uint64_t budget, uint64_t wait_ns, struct nv_stats *stats);
void backlog_free(struct backlog *b); /* NULL is a no-op; no waiters allowed */

/* Take n tokens, blocking until they are available, at most the wait
 * bound.  0, -ETIMEDOUT (nothing taken) or -ESHUTDOWN. */
int backlog_take(struct backlog *b, uint64_t n) __attribute__((warn_unused_result));

/* Return n tokens (n <= used). */
void backlog_give(struct backlog *b, uint64_t n);

/* Tokens in use now (a gauge). */
uint64_t backlog_used(struct backlog *b);
uint64_t backlog_budget(const struct backlog *b);
uint64_t backlog_wait_ns(const struct backlog *b);

/* Fail every current and future take with -ESHUTDOWN. */
void backlog_shutdown(struct backlog *b);

#endif
