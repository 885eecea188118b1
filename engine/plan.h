/*
 * plan.h - ReadPlan: where a stream's settled history lies, handed to a
 * consumer so it fetches the bytes from object storage itself (DESIGN.md
 * section 8, the read-path seed's "Read plans and vending").
 *
 * For: the star API's plan route (api/plan.c), which any star serves
 * from the catalog with no lease and no redirect.  plan_build() is the
 * planner over the catalog rows of meta/refs.h; star_plan() runs it for
 * a loaded stream with the star's vending form and TTL.  Not for:
 * fetching or decoding what a plan names (api/vend.c), the tail window
 * (a plan carries no tail).
 *
 * A plan for a start position (a record's seq, or a stream byte: the
 * byte's record is the one holding it, or the next record when the byte
 * falls between records) is:
 *
 *   entries   settled objects in stream order, each with its key, seq
 *             and byte extent [first, end), its footer window [footer_off,
 *             footer_off + footer_len) and its data extent [0, footer_off)
 *             (the object's chunks: a consumer starting inside it reads the
 *             footer first and fetches from the chunk holding its start);
 *             the first holds the start position
 *   residual  (seq, byte): from here up, ask a star.  The end of the last
 *             entry, or with no entries a row boundary at or below the start
 *             (the start of the row holding it, or the end of the stream's
 *             rows when the start lies beyond them): a consumer asks a star
 *             from max(residual, its own start)
 *   more      the entry cap stopped the plan: the residual is a cursor,
 *             plan again from it (that plan may vend nothing)
 *
 * Invariants:
 *  1. Everything vended is settled: an entry comes only from a catalog row
 *     read in this call, and entries are contiguous from the first.
 *  2. The residual never hides a durable record: it is the end of the
 *     last entry, or a boundary at or below the start; rows read in two
 *     steps (the floor, then the rows after it) are joined only where
 *     the next row starts exactly where the last ended, so a row that
 *     settlement replaced between the steps ends the plan, never leaves
 *     a gap.
 *  3. At most PLAN_ENTRIES_MAX entries; memory is bounded by the cap.
 *  4. A plan lives at most its TTL, and the TTL is at most the read
 *     grace: every settled-object deletion (a replaced tail revision, a
 *     trimmed or deleted stream) is queued at least one grace after the
 *     catalog stopped naming the object, so nothing a plan names is
 *     deleted before the plan expires.  A TTL under PLAN_TTL_MIN_S
 *     vends nothing (the plan is its residual).
 *  5. Records below the trim point are never planned: the start is
 *     raised to it.
 */
#ifndef NOVAFS_ENGINE_PLAN_H
#define NOVAFS_ENGINE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "meta/kv.h"
#include "meta/refs.h"

struct star;
struct nv_stream;

#define PLAN_ENTRIES_MAX 256
/* The shortest TTL that vends entries.  The wire carries `expires` in
 * whole seconds (up to a second lost to rounding down), and a consumer
 * stops using a plan a second before it expires (clocks of two hosts:
 * api/vend.c EXPIRY_MARGIN_NS); under 3 s a consumer would get entries it
 * may never fetch and re-plan without end, so such a plan is its residual
 * and the reads go to a star. */
#define PLAN_TTL_MIN_S 3

/* The vending form of a deployment (-o plan_vending=). */
enum plan_vending {
	PLAN_RAW = 0, /* keys and windows: the consumer reads the bucket itself */
	PLAN_SIGNED,  /* each entry also carries a presigned GET URL */
};

struct plan_entry {
	char key[META_SETTLED_KEY_MAX];
	uint64_t epoch;
	uint32_t rev;
	uint64_t first_seq, end_seq;
	uint64_t first_byte, end_byte;
	uint64_t footer_off; /* footer window; the data extent is [0, footer_off) */
	uint32_t footer_len;
	char *url;           /* PLAN_SIGNED: owned presigned GET; else NULL */
};

struct read_plan {
	uint64_t stream_id;
	uint64_t trim_seq, trim_byte;
	uint32_t n;
	struct plan_entry e[PLAN_ENTRIES_MAX];
	uint64_t residual_seq, residual_byte;
	bool more;
	enum plan_vending vending;
	uint64_t expires_ns; /* wall clock (ns since the Unix epoch) */
	unsigned ttl_s;
};

/* What to plan. */
struct plan_req {
	enum meta_ref_key by; /* META_REF_BY_SEQ or META_REF_BY_BYTE */
	uint64_t pos;         /* the start position */
	uint32_t max;         /* entries, 1..PLAN_ENTRIES_MAX; 0: the cap */
	uint64_t trim_seq, trim_byte; /* the stream's trim point */
};

/* "raw" / "signed" (NULL: raw) into *v.  0 or -EINVAL. */
int plan_vending_parse(const char *text, enum plan_vending *v)
	__attribute__((warn_unused_result));

/*
 * Plan stream from q over kv's catalog rows (invariants 1, 2, 3, 5) into
 * p (caller's; entries without URLs, no TTL).  0, or a kv error /
 * -EBADMSG.  An empty stream, or one with nothing settled at the start,
 * is one residual.
 */
int plan_build(struct kv *kv, uint64_t stream, const struct plan_req *q, struct read_plan *p)
	__attribute__((warn_unused_result));

/* Free the entries' URLs; p may be planned again.  NULL is a no-op. */
void plan_clear(struct read_plan *p);

/*
 * Plan loaded stream s (borrowed) on st with the star's vending form
 * and TTL (invariant 4; signed: one presigned URL per entry), from the
 * trim point of s's stream row (a star that does not lead s may hold an
 * older one in memory).  p is the caller's (plan_clear() after).  0,
 * -EINVAL (a bad q), -ENOENT (the stream was deleted), a kv error, or the
 * store's presign error.  Needs no lease: any star answers.
 */
int star_plan(struct star *st, struct nv_stream *s, enum meta_ref_key by, uint64_t pos,
	      uint32_t max, struct read_plan *p) __attribute__((warn_unused_result));

/* Whether st can vend in its configured form: 0, or -EINVAL (logged:
 * plan_vending=signed on a standard store that cannot presign). */
int star_plan_check(struct star *st) __attribute__((warn_unused_result));

#endif
