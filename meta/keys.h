/*
 * keys.h - the metastore keyspaces, in one place.
 *
 * For: building every metastore key from its typed parts.  Each builder
 * resets the buffer and appends an order-preserving tuple (meta/tuple.h),
 * so the byte order of keys of one space is the order of their parts.
 * Not for: values (each row module encodes its own).
 *
 * Spaces (tuple elements; first element a short string tag):
 *   ("bkt", bucket)                          bucket row       streams.c
 *   ("sn",  bucket, name)                    stream by name   streams.c
 *   ("sid", stream_id)                       stream row       streams.c
 *   ("ctr", "ids")                           id counter       streams.c
 *   ("ref", stream_id, first_seq)            span ref /       refs.c
 *                                            catalog row
 *   ("rby", stream_id, first_byte, first_seq) byte index of   refs.c
 *                                            the same rows (first_seq
 *                                            keeps refs of empty records
 *                                            apart)
 *   ("rhn", stream_id, kind)                 where the newest refs.c
 *                                            row of a kind starts (a
 *                                            hint: refs.h "Hints")
 *   ("mint", class, star)                    epoch mint head  chains.c
 *   ("chn", class, star, epoch)              chain row        chains.c
 *   ("mrk", class, star, epoch, first_slot)  batch marker     markers.c
 *   ("star", star)                           star registry    stars.c
 *   ("lease", stream_id)                     writer lease     leases.c
 *   ("lep", stream_id)                       last lease epoch leases.c
 *                                            and leader (not leased)
 *   ("duty", name)                           a duty's holder  leases.c
 *   ("dep", name)                            its last duty    leases.c
 *                                            epoch (not leased)
 *   ("lepn", bucket, name)                   last lease epoch leases.c
 *                                            of any stream of
 *                                            that name
 *   ("cur", class, star, epoch)              chain cursors    cursors.c,
 *                                                             trim.c
 *   ("gc", due_ns, object key)               reclaim queue    cursors.c
 *   ("rcl", stream_id)                       stream history   streams.c
 *                                            to reclaim
 *
 * Invariants:
 *  1. No two spaces share a tag, and a tag is never a prefix of another
 *     tag's encoding (tuple strings are terminated), so spaces never
 *     interleave.
 *  2. A "prefix" builder yields the encoded prefix of every key of a
 *     sub-space; nv_tup_prefix_end() of it bounds the sub-space above.
 */
#ifndef NOVAFS_META_KEYS_H
#define NOVAFS_META_KEYS_H

#include <stdint.h>

#include "src/base/buf.h"

/* Every builder: 0 or -ENOMEM/-E2BIG (from nv_buf); b is reset first. */
int key_bucket(struct nv_buf *b, const char *bucket) __attribute__((warn_unused_result));
int key_bucket_space(struct nv_buf *b) __attribute__((warn_unused_result));
int key_stream_name(struct nv_buf *b, const char *bucket, const char *name)
	__attribute__((warn_unused_result));
int key_stream_names_of(struct nv_buf *b, const char *bucket) __attribute__((warn_unused_result));
int key_stream_id(struct nv_buf *b, uint64_t id) __attribute__((warn_unused_result));
int key_stream_id_space(struct nv_buf *b) __attribute__((warn_unused_result));
int key_id_counter(struct nv_buf *b) __attribute__((warn_unused_result));
int key_ref(struct nv_buf *b, uint64_t stream, uint64_t first_seq) __attribute__((warn_unused_result));
int key_refs_of(struct nv_buf *b, uint64_t stream) __attribute__((warn_unused_result));
int key_ref_byte(struct nv_buf *b, uint64_t stream, uint64_t first_byte, uint64_t first_seq)
	__attribute__((warn_unused_result));
int key_ref_bytes_of(struct nv_buf *b, uint64_t stream) __attribute__((warn_unused_result));
int key_ref_hint(struct nv_buf *b, uint64_t stream, unsigned kind)
	__attribute__((warn_unused_result));
int key_mint(struct nv_buf *b, unsigned cls, const char *star) __attribute__((warn_unused_result));
int key_reclaim_stream(struct nv_buf *b, uint64_t stream) __attribute__((warn_unused_result));
int key_reclaim_stream_space(struct nv_buf *b) __attribute__((warn_unused_result));
int key_chain(struct nv_buf *b, unsigned cls, const char *star, uint64_t epoch)
	__attribute__((warn_unused_result));
int key_chain_space(struct nv_buf *b) __attribute__((warn_unused_result));
int key_marker(struct nv_buf *b, unsigned cls, const char *star, uint64_t epoch,
	       uint64_t first_slot) __attribute__((warn_unused_result));
int key_markers_of(struct nv_buf *b, unsigned cls, const char *star, uint64_t epoch)
	__attribute__((warn_unused_result));
int key_star(struct nv_buf *b, const char *star) __attribute__((warn_unused_result));
/* Every star row's prefix (invariant 2). */
int key_star_space(struct nv_buf *b) __attribute__((warn_unused_result));
int key_lease(struct nv_buf *b, uint64_t stream) __attribute__((warn_unused_result));
/* Every writer lease row's prefix (invariant 2). */
int key_lease_space(struct nv_buf *b) __attribute__((warn_unused_result));
int key_lease_epoch(struct nv_buf *b, uint64_t stream) __attribute__((warn_unused_result));
int key_duty(struct nv_buf *b, const char *duty) __attribute__((warn_unused_result));
int key_duty_epoch(struct nv_buf *b, const char *duty) __attribute__((warn_unused_result));
int key_lease_name_epoch(struct nv_buf *b, const char *bucket, const char *name)
	__attribute__((warn_unused_result));
int key_cursors(struct nv_buf *b, unsigned cls, const char *star, uint64_t epoch)
	__attribute__((warn_unused_result));
/* ("gc", due_ns, object key); key_reclaim_space() is the bare tag. */
int key_reclaim(struct nv_buf *b, uint64_t due_ns, const char *object_key)
	__attribute__((warn_unused_result));
int key_reclaim_space(struct nv_buf *b) __attribute__((warn_unused_result));

#endif
