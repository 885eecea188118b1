/*
 * starview.c - the star's view of a stream it does not lead (star.h
 * star_view_refresh(), star_view_trim()): a vacant stream's committed
 * end, read from its refs; the trim point and the settled end of any
 * stream another star trims or settles, read from its row and catalog
 * rows (or, for the trim, told by the holder).
 *
 * For: followers of a vacant stream (DESIGN.md section 7 "Follow across
 * hosts"; the read-path seed's "Vacant streams": with no writer, committed
 * state is everything and any star serves it from refs): the star API's
 * subscription on a vacant stream (api/subscribe.c), the mount's follow
 * across hosts (fs/rfollow.c) and its st_size (fs/remote.c).  A dead
 * leader's acked records above its last ref become visible here when
 * settlement (the settle duty, a successor's take) commits refs over
 * them.  And for a stream led elsewhere or vacant that another star
 * trimmed or settled since this star loaded it: reads below the trim
 * point are zeros here as on the leader, user.nova.trim and
 * user.nova.settled are the metastore's (fs/remote.c, fs/xattr.c).  Not
 * for: taking a lease (engine/lease.c), reloading a taken stream
 * (stream_reload()), or a read that meets a trim this view has not
 * learned yet (engine/read.c looks at the row itself).
 *
 * Locking: the rows are read with no lock held; the acked end is raised
 * under class_lock[cls] (shared) and the chain's admission lock, the
 * order of star_impl.h invariant 2, so a take's reload (engine/lease.c
 * reload()) and this never interleave; the trim point and the settled
 * end under s->lock alone (stream_trim_up(), stream_settled_up()).  The
 * star's hooks (star_cfg.acked, star_cfg.trimmed) are called and the
 * wake closed with none held.  Callers: never a FUSE read (the hooks
 * invalidate pages, and a read in flight holds its page locked).
 *
 * Invariants:
 *  1. Positions only grow (stream_catch_up(), stream_trim_up(),
 *     stream_settled_up()); on a stream this star leads the call changes
 *     nothing (its positions are at or past the rows'), so it may race
 *     a take.
 *  2. It never takes the stream's writer lease.
 *  3. trim <= acked and settled <= frontier stay true: the trim is
 *     capped at the acked end, and the settled end is read before the
 *     refs' end it is raised with (settlement only turns committed refs
 *     into catalog rows).
 */
#include "config.h"
#include "engine/star.h"
#include "engine/star_impl.h"
#include "engine/chain.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "src/base/log.h"

#include <errno.h>

/* Raise s's acked end to its last ref's: 1 when it moved (the hook
 * called, the wake closed), 0, -errno. */
static int view_end(struct star *st, struct nv_stream *s)
{
	uint64_t end_seq, end_byte, max_ts, was = stream_acked_byte(s);
	struct meta_ref r;
	unsigned cls;
	bool grew;
	int rc;

	meta_ref_init(&r);
	rc = meta_ref_last(st->kv, s->id, &r);
	end_seq = r.end_seq;
	end_byte = r.end_byte;
	max_ts = r.max_ts;
	meta_ref_clear(&r);
	if (rc == -ENOENT)
		return 0; /* no refs: nothing committed past the view loaded */
	if (rc)
		return rc == -EBADMSG ? -EIO : rc;
	if (end_byte <= was)
		return 0;
	pthread_mutex_lock(&s->lock);
	cls = s->cls;
	pthread_mutex_unlock(&s->lock);
	pthread_rwlock_rdlock(&st->class_lock[cls]);
	if (!st->chains[cls]) {
		pthread_rwlock_unlock(&st->class_lock[cls]);
		return -EAGAIN; /* the class is restarting: it reloads from refs */
	}
	chain_admission_lock(st->chains[cls]);
	grew = stream_catch_up(s, end_seq, end_byte, max_ts);
	chain_admission_unlock(st->chains[cls]);
	pthread_rwlock_unlock(&st->class_lock[cls]);
	if (!grew)
		return 0;
	nv_log(NV_DEBUG, NV_SUB_READ, "stream %s/%s: committed end from its refs: byte %llu "
	       "(was %llu here), record %llu", s->bucket, s->name, (unsigned long long)end_byte,
	       (unsigned long long)was, (unsigned long long)end_seq);
	/* As an ack does (chain.c): the layer above hears of the growth
	 * (fs/: the page holding the old end may be cached with zeros past
	 * it), then the followers wake. */
	if (st->cfg.acked)
		st->cfg.acked(st->cfg.acked_arg, s, was, end_byte);
	wake_close(&s->wake);
	return 1;
}

int star_view_trim(struct star *st, struct nv_stream *s, uint64_t seq, uint64_t byte)
{
	uint64_t old;

	if (!stream_trim_up(s, seq, byte, &old))
		return 0;
	nv_log(NV_DEBUG, NV_SUB_TRIM, "stream %s/%s: trimmed elsewhere: seq %llu, byte %llu here "
	       "(was byte %llu)", s->bucket, s->name,
	       (unsigned long long)atomic_load(&s->trim_seq),
	       (unsigned long long)atomic_load(&s->trim_byte), (unsigned long long)old);
	/* As this star's own trim does (fs/file.c): pages cached below the
	 * new trim point read as zeros now. */
	if (st->cfg.trimmed)
		st->cfg.trimmed(st->cfg.trimmed_arg, s, old, atomic_load(&s->trim_byte));
	return 1;
}

int star_view_refresh(struct star *st, struct nv_stream *s, enum star_view what)
{
	struct meta_stream ms;
	uint64_t sseq = 0, sbyte = 0;
	bool row;
	int rc, grew;

	/* The row, then the settled end, then the refs' end (invariant 3). */
	rc = meta_stream_get(st->kv, s->id, &ms, NULL);
	if (rc && rc != -ENOENT)
		return rc == -EBADMSG ? -EIO : rc;
	row = rc == 0; /* none: deleted and reclaimed, nothing to learn */
	if (row && what == STAR_VIEW_ALL) {
		rc = meta_ref_settled_end(st->kv, s->id, ms.trim_seq, &sseq, &sbyte);
		if (rc)
			return rc == -EBADMSG ? -EIO : rc;
	}
	grew = view_end(st, s);
	if (grew < 0)
		return grew;
	if (row)
		(void)star_view_trim(st, s, ms.trim_seq, ms.trim_byte);
	if (row && what == STAR_VIEW_ALL)
		(void)stream_settled_up(s, sseq, sbyte);
	return grew;
}
