/*
 * chains.h - chain rows and epoch minting.
 *
 * For: the durable record of each chain (one star's writing history in
 * one class for one epoch): its state, its absorb checkpoint and its
 * recovery cut; and the per-(class, star)
 * mint head from which a starting star takes a new epoch.  Not for: the
 * live chain's in-memory state (engine/chain.h).
 *
 * State diagram of a chain row:
 *
 *     mint          close or recovery walk
 *   ------> LIVE ---------------------------> SETTLED
 *             |                                  ^
 *             | fence (recovery records the cut) |
 *             +-----------> FENCED --------------+
 *                                 walk done
 *
 *   LIVE     a star may still append; checkpoint = next slot to absorb.
 *   FENCED   writing is over: cut = first slot that is not part of the
 *            chain (every slot < cut is durable, gap-free).  The walk
 *            from checkpoint to cut has not finished.
 *   SETTLED  refs cover every slot < cut; checkpoint == cut.
 *
 * Invariants:
 *  1. Every transition is a compare-and-swap on the row's version.
 *  2. An epoch below its (class, star) mint head is never LIVE for
 *     writing: the star that minted the head has moved on.
 *  3. checkpoint only grows; once FENCED, cut never changes.
 *  4. The settle and trim cursors live in a row of their own
 *     (meta/cursors.h), written by the auditor alone, so the absorb's CAS
 *     on this row never races them.
 */
#ifndef NOVAFS_META_CHAINS_H
#define NOVAFS_META_CHAINS_H

#include <stdint.h>

#include "meta/kv.h"

#define META_STAR_MAX 32

enum meta_chain_state { CHAIN_LIVE = 1, CHAIN_FENCED = 2, CHAIN_SETTLED = 3 };

const char *meta_chain_state_name(unsigned state);

struct meta_chain {
	uint8_t cls;
	char star[META_STAR_MAX + 1];
	uint64_t epoch;
	uint8_t state;
	uint8_t clean;          /* SETTLED by a graceful close, not a recovery */
	uint64_t checkpoint;    /* next slot the absorb has not committed */
	uint64_t cut;           /* FENCED/SETTLED: first slot not in the chain */
	uint64_t created_ns;
	uint64_t settled_ns;
	uint32_t put_window;    /* the writer's put window (0: not recorded);
				 * recovery's garbage probe covers it */
};

/* 0 when s is a valid star name: 1..32 of [a-z0-9-]. */
int meta_star_check(const char *s) __attribute__((warn_unused_result));

int meta_chain_encode(const struct meta_chain *c, struct nv_buf *out)
	__attribute__((warn_unused_result));
int meta_chain_decode(const void *p, size_t n, struct meta_chain *c)
	__attribute__((warn_unused_result));

/* 0 and *out (+ *ver), -ENOENT, -EBADMSG, kv error. */
int meta_chain_get(struct kv *kv, unsigned cls, const char *star, uint64_t epoch,
		   struct meta_chain *out, uint64_t *ver) __attribute__((warn_unused_result));

/* Add "row version == expect_ver, then write c" to t (expect_ver 0: the
 * row must not exist). */
int meta_chain_txn_put(struct kv_txn *t, const struct meta_chain *c, uint64_t expect_ver)
	__attribute__((warn_unused_result));

/* Add "row version == expect_ver, then delete the chain row" to t (a
 * retired chain: trim-check, engine/trim.c). */
int meta_chain_txn_del(struct kv_txn *t, unsigned cls, const char *star, uint64_t epoch,
		       uint64_t expect_ver) __attribute__((warn_unused_result));

/* Write c if its version is still expect_ver.  0, -ECANCELED, kv error. */
int meta_chain_cas(struct kv *kv, const struct meta_chain *c, uint64_t expect_ver)
	__attribute__((warn_unused_result));

/*
 * Mint the next epoch of (cls, star): raise the mint head by one and
 * create that epoch's chain row LIVE at checkpoint 0, in one
 * transaction.  0 and *out and *ver, or a kv error.
 */
int meta_chain_mint(struct kv *kv, unsigned cls, const char *star, uint64_t now_ns,
		    struct meta_chain *out, uint64_t *ver) __attribute__((warn_unused_result));

/* The current mint head of (cls, star) (0 when none was minted). */
int meta_mint_head(struct kv *kv, unsigned cls, const char *star, uint64_t *head)
	__attribute__((warn_unused_result));

/* Visit every chain row (all classes and stars) in key order.  fn gets
 * the row and its version; returns 0/1/-errno as usual. */
typedef int (*meta_chain_fn)(void *arg, const struct meta_chain *c, uint64_t ver);
int meta_chain_list(struct kv *kv, meta_chain_fn fn, void *arg)
	__attribute__((warn_unused_result));

#endif
