/*
 * startrim.c - the star's trim and layout calls (star.h): a trim moves
 * the stream's trim watermark (never backwards) and wakes the auditor,
 * which reclaims what fell below it; the layout is the user.nova.layout
 * document.
 *
 * For: star_stream_trim_bytes(), star_stream_trim_seq(),
 * star_stream_layout(), and star_locate_record() (the record lookup the
 * trim calls share with the star API's locate).  Not for: reclaiming (engine/trim.c).
 *
 * Invariants:
 *  1. A stream's trim point only grows, in the row and in memory.
 *  2. A trim that moved the point calls star_cfg.trimmed, whoever asked
 *     (this star's mount, or another's through the star API).
 */
#include "config.h"
#include "engine/star.h"
#include "engine/star_impl.h"
#include "engine/auditor.h"
#include "engine/layout.h"
#include "src/base/log.h"

#include <errno.h>

/* ------------------------------------------------------------ trim */

static int trim_to(struct star *st, struct nv_stream *s, uint64_t seq, uint64_t byte,
		   uint64_t *old_byte)
{
	uint64_t cur_seq, cur_byte;
	int rc;

	pthread_mutex_lock(&s->lock);
	cur_seq = atomic_load(&s->trim_seq);
	cur_byte = atomic_load(&s->trim_byte);
	pthread_mutex_unlock(&s->lock);
	if (old_byte)
		*old_byte = cur_byte;
	if (byte <= cur_byte && seq <= cur_seq)
		return 0;
	if (seq < cur_seq)
		seq = cur_seq;
	if (byte < cur_byte)
		byte = cur_byte;
	rc = meta_stream_set_trim(st->kv, s->id, seq, byte);
	if (rc == -ERANGE)
		return -EINVAL;
	if (rc)
		return rc;
	pthread_mutex_lock(&s->lock);
	if (byte > atomic_load(&s->trim_byte)) {
		atomic_store(&s->trim_seq, seq);
		atomic_store(&s->trim_byte, byte);
	}
	pthread_mutex_unlock(&s->lock);
	nv_log(NV_INFO, NV_SUB_TRIM, "stream %s/%s (%llu) trimmed to seq %llu, byte %llu",
	       s->bucket, s->name, (unsigned long long)s->id, (unsigned long long)seq,
	       (unsigned long long)byte);
	/* Pages cached below the new point read as zeros now: a trim the
	 * star API ran for another mount (api/server.c) has no FUSE request
	 * here to invalidate them. */
	if (st->cfg.trimmed)
		st->cfg.trimmed(st->cfg.trimmed_arg, s, cur_byte, byte);
	if (st->auditor)
		auditor_nudge(st->auditor);
	return 0;
}

int star_stream_trim_bytes(struct star *st, struct nv_stream *s, uint64_t byte,
			   uint64_t *old_byte)
{
	uint64_t seq, start;
	int rc;

	if (byte > stream_acked_byte(s))
		byte = stream_acked_byte(s);
	if (byte <= atomic_load(&s->trim_byte)) {
		if (old_byte)
			*old_byte = atomic_load(&s->trim_byte);
		return 0;
	}
	/* The record holding `byte` is the first one kept. */
	rc = read_locate_record(st->re, s, false, byte, &seq, &start);
	if (rc == -ERANGE) {
		/* Trimmed past it already, by another star: nothing to do, as
		 * for a shorter punch here. */
		if (old_byte)
			*old_byte = byte;
		return 0;
	}
	if (rc)
		return rc;
	return trim_to(st, s, seq, byte, old_byte);
}

int star_stream_trim_seq(struct star *st, struct nv_stream *s, uint64_t seq,
			 uint64_t *old_byte)
{
	uint64_t got_seq, byte;
	int rc;

	if (seq < atomic_load(&s->trim_seq))
		return -EINVAL; /* never backwards */
	if (seq == atomic_load(&s->trim_seq)) {
		if (old_byte)
			*old_byte = atomic_load(&s->trim_byte);
		return 0;
	}
	rc = read_locate_record(st->re, s, true, seq, &got_seq, &byte);
	if (rc == -ERANGE)
		return -EINVAL; /* below another star's trim point: backwards too */
	if (rc)
		return rc;
	return trim_to(st, s, seq, byte, old_byte);
}

int star_locate_record(struct star *st, struct nv_stream *s, bool by_seq, uint64_t pos,
		       uint64_t *seq, uint64_t *byte)
{
	return read_locate_record(st->re, s, by_seq, pos, seq, byte);
}

/* ------------------------------------------------------------ layout */

char *star_stream_layout(struct star *st, struct nv_stream *s, int *err)
{
	struct layout_live live = {
		.seq = atomic_load(&s->acked_seq),
		.bytes = stream_acked_byte(s),
		.frontier = atomic_load(&s->frontier_seq),
		.settled = atomic_load(&s->settled_seq),
	};

	/* An xattr value is at most 64 KiB: long lists are cut there (the
	 * full document: novactl layout). */
	return layout_json(st->kv, s->id, &live, LAYOUT_XATTR_ENTRIES, err);
}
