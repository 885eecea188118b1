/*
 * objread.h - reading bundle objects (chain slots, settled objects) from
 * a store, verified, around bad copies.
 *
 * For: every reader that fetches a footer window or a chunk and checks
 * it: the read path (engine/read.c), recovery's footer walk
 * (engine/recover.c), fsck (engine/fsck.c).  Each call reads one copy
 * of the object through store_read_copies(), so with a bucket set a copy
 * that fails verification in one zone (a torn prefix left by a lax
 * server killed mid-PUT, set.h invariant 4) is read around and the good
 * copy in another zone is used.  Not for: caching (engine/rcache.c), the
 * settle job's whole-object copies (engine/fetch.c), decoding
 * (engine/bundle.c).
 *
 * Invariants:
 *  1. What a call returns comes from one copy: a multi-step read (head,
 *     trailer, footer) never mixes zones.
 *  2. 0 means the bytes passed the codec's checks (bundle.h invariant 3);
 *     -EBADMSG means no copy did; any other error is the store's.
 *
 * No state, no locks: every call is thread-safe as the store is.
 */
#ifndef NOVAFS_ENGINE_OBJREAD_H
#define NOVAFS_ENGINE_OBJREAD_H

#include <stdint.h>

#include "engine/bundle.h"
#include "engine/store/store.h"
#include "src/base/buf.h"

/*
 * The footer window [off, off + len) of key, verified
 * (bundle_footer_open), into win (caller owns, len bytes); f borrows win.
 * 0, -EBADMSG, or the store's error (-ENOENT, -ERANGE, -EIO, ...).
 */
int objread_footer(struct store *st, const char *key, uint64_t off, uint32_t len, void *win,
		   struct bundle_footer *f) __attribute__((warn_unused_result));

/*
 * The whole of a small object up to its footer's end, [0, off + len) of
 * key, into buf (caller owns, off + len bytes), the footer window at off
 * verified (f borrows buf + off): one ranged read where a footer and
 * then a chunk would take two.  The chunks in buf are not verified yet
 * (bundle_chunk_decode_into() does it).  Errors as objread_footer().
 */
int objread_whole(struct store *st, const char *key, uint64_t off, uint32_t len, uint8_t *buf,
		  struct bundle_footer *f) __attribute__((warn_unused_result));
/*
 * The footer of key found from its own trailer: head, trailer, window.
 * 0 and *size, *foff, *flen, *win (malloc'd; caller frees) and f
 * (borrows *win).  On failure *win is NULL.  Errors as objread_footer(),
 * plus -ENOMEM.
 */
int objread_tail(struct store *st, const char *key, uint64_t *size, uint64_t *foff,
		 uint32_t *flen, uint8_t **win, struct bundle_footer *f)
	__attribute__((warn_unused_result));

/*
 * The chunk of entry e of key, verified and decoded (bundle_chunk_decode)
 * into raw (caller owns; reset first; its max must allow e->raw_len).
 * 0, -EBADMSG, -ENOMEM, or the store's error.
 */
int objread_chunk(struct store *st, const char *key, const struct bundle_entry *e,
		  struct nv_buf *raw) __attribute__((warn_unused_result));

/*
 * The same, decoded into dst (caller-owned, exactly e->raw_len bytes, e
 * checked by bundle_footer_get()).  A raw chunk is read straight into
 * dst and verified there: no staging buffer and no copy (the read path's
 * chunk cache).  On failure dst holds garbage.  Errors as objread_chunk().
 */
int objread_chunk_into(struct store *st, const char *key, const struct bundle_entry *e,
		       uint8_t *dst) __attribute__((warn_unused_result));

#endif
