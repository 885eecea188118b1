/*
 * cursors.h - per-chain settle and trim cursors, and the reclamation
 * queue.
 *
 * For: the auditor's durable progress through a chain (engine/settle/era.c,
 * engine/trim.c), kept in a row of its own so the auditor never races
 * the absorb's CAS on the chain row; and the queue of object keys to
 * delete once the read grace has passed.
 *
 * Cursor row ("cur", class, star, epoch) v1:
 *   settle_frontier  no settle actor writes below this slot again
 *   rewritten        no marker stands below this slot
 *   trimmed          slots below this are deleted
 *   grace_target     rewritten as seen at grace_since_ns: slots below it
 *   grace_since_ns   may be deleted once the read grace has passed
 *
 * Reclaim row ("gc", due_ns, key): delete object `key` at or after due_ns.
 *
 * Invariants:
 *  1. trimmed <= grace_target <= rewritten; all only grow.
 *  2. A reclaim row is written in the same transaction that stops the
 *     metastore from naming its object, so no object leaks and none is
 *     deleted while named.
 *  3. A cursor row belongs to a chain (class, star, epoch), not to a
 *     stream, so no writer lease governs it (meta/leases.h): every put is
 *     a CAS on the row's version (meta_cursors_txn_put()), and its values
 *     are derived from the chain's row and markers and only grow
 *     (invariant 1), so a paused or partitioned star's late commit either
 *     fails its compare or writes what a current one would.
 */
#ifndef NOVAFS_META_CURSORS_H
#define NOVAFS_META_CURSORS_H

#include <stdint.h>

#include "meta/chains.h"
#include "meta/kv.h"

struct meta_cursors {
	uint8_t cls;
	char star[META_STAR_MAX + 1];
	uint64_t epoch;
	uint64_t settle_frontier;
	uint64_t rewritten;
	uint64_t trimmed;
	uint64_t grace_target;
	uint64_t grace_since_ns;
};

/* 0 and *out (+*ver); a missing row reads as all zeros with *ver 0. */
int meta_cursors_get(struct kv *kv, unsigned cls, const char *star, uint64_t epoch,
		     struct meta_cursors *out, uint64_t *ver) __attribute__((warn_unused_result));
int meta_cursors_txn_put(struct kv_txn *t, const struct meta_cursors *c, uint64_t expect_ver)
	__attribute__((warn_unused_result));
/* Add "delete the chain's cursor row" to t (a retired chain). */
int meta_cursors_txn_del(struct kv_txn *t, unsigned cls, const char *star, uint64_t epoch)
	__attribute__((warn_unused_result));
int meta_cursors_encode(const struct meta_cursors *c, struct nv_buf *out)
	__attribute__((warn_unused_result));
int meta_cursors_decode(const void *p, size_t n, struct meta_cursors *c)
	__attribute__((warn_unused_result));

/* Queue object key for deletion at due_ns (in t). */
int meta_reclaim_txn_add(struct kv_txn *t, uint64_t due_ns, const char *key)
	__attribute__((warn_unused_result));
/* Remove a queue entry (in t). */
int meta_reclaim_txn_del(struct kv_txn *t, uint64_t due_ns, const char *key)
	__attribute__((warn_unused_result));
/* Visit up to max entries due at or before now (max 0: all due), oldest
 * first.  fn may call back into the kv. */
typedef int (*meta_reclaim_fn)(void *arg, uint64_t due_ns, const char *key);
int meta_reclaim_due(struct kv *kv, uint64_t now_ns, size_t max, meta_reclaim_fn fn, void *arg)
	__attribute__((warn_unused_result));
/* Count queued entries (due or not), for fsck and stats. */
int meta_reclaim_count(struct kv *kv, uint64_t *n) __attribute__((warn_unused_result));

#endif
