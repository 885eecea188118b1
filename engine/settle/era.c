/*
 * era.c - era scheduling of the group settle: settle_chain() and the era
 * transitions of engine/settle/job.h (collect, judge, warm, assemble,
 * resolve).
 *
 * For: which markers form the era, which streams qualify, warming the
 * era's bundles, the worker pool, marker resolution and the settle
 * frontier.  Not for: one stream's window, objects or commit (window.c,
 * publish.c, commit.c).
 *
 * Invariants:
 *  1. An era is the chain's ripe markers in slot order, bounded by
 *     ERA_MARKERS_MAX and the fetch budget; a marker waiting for its
 *     ripening time (its age cap, for residue) is skipped, so it never
 *     hides the ripe markers behind it.
 *  3. Only the slots of markers holding a stream that settles are
 *     warmed; a marker of residue and dropped streams only resolves
 *     without a byte staged.
 *  2. Markers are resolved only after every worker has finished, and
 *     keep exactly the streams left RESIDUE (and a settled stream's
 *     batches beyond the end it settled to).
 *  4. Era coalescing: an era starts only once its first ripe marker (the
 *     smallest ripe_ns the era takes) has been ripe for cfg->coalesce_ns
 *     (the auditor's audit period), or at once when the era is full
 *     (ERA_MARKERS_MAX ripe markers, or their due bytes reach the fetch
 *     budget).  Until then settle_chain() collects nothing and returns 0,
 *     and the markers that ripen meanwhile join the same era.  The wait
 *     is counted from the first marker's ripening, which stays in the
 *     chain until settled, never from the last one's: markers that keep
 *     ripening behind it cannot hold the era back (no starvation), and a
 *     ripe marker waits at most coalesce_ns more than it would without
 *     coalescing (plus the pass that notices).  Every group settle is the
 *     auditor's; nothing waits on one to finish (a graceful close, a
 *     drain, a demand settle and a handoff settle in the recovery sense:
 *     refs, not objects), so no caller needs to bypass it.
 *
 * Threads: settle_chain() runs on the auditor thread; the workers of
 * settle_era_assemble() take streams under e->lock (job.h).
 */
#include "config.h"
#include "engine/settle/job.h"
#include "meta/cursors.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/lockcheck.h"
#include "src/base/log.h"
#include "src/base/u64map.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RESOLVE_TXN_MARKERS 128 /* markers resolved per transaction */

void settle_era_init(struct era *e, const struct settle_cfg *cfg, const struct meta_chain *c,
		     uint64_t now_ns)
{
	memset(e, 0, sizeof(*e));
	e->magic = ERA_MAGIC;
	e->state = ERA_NEW;
	e->cfg = cfg;
	e->chain = *c;
	e->now = now_ns;
	pthread_mutex_init(&e->lock, NULL);
}

void settle_era_free(struct era *e)
{
	assert(e->magic == ERA_MAGIC);
	for (uint32_t i = 0; i < e->nmarks; i++)
		meta_marker_clear(&e->marks[i]);
	free(e->marks);
	for (uint32_t i = 0; i < e->nstreams; i++)
		free(e->streams[i].keys);
	free(e->streams);
	u64map_free(e->due);
	pthread_mutex_destroy(&e->lock);
	e->magic = 0;
}

/* ------------------------------------------------------------ collect */

/*
 * Collecting an era is two passes over the chain's markers (slot
 * order); the list is read once (collect_due()), which keeps a copy of
 * every marker it meets while the era is open (keep_candidate()), and
 * the second pass runs over those copies (filter_kept()).  Only when
 * they exceed ERA_KEEP_MARKERS / ERA_KEEP_STREAMS is the list read a
 * second time (collect_keep()), so memory stays bounded:
 *
 *  1. due: the ripe markers (the first ERA_MARKERS_MAX, until the due
 *     bytes reach the fetch budget) name the due streams, those whose own
 *     part of a ripe marker has ripened (markers.h invariant 4); the last
 *     of them ends the era.  Waiting markers are counted, not taken.
 *  2. keep: up to that end, every marker holding a due stream at or
 *     before the stream's last ripe part (its earlier batches, which
 *     settle with it: settle.h invariant 2); a waiting marker of other
 *     streams alone, or of a due stream's later batches, is skipped, so
 *     it never hides the ripe markers behind it, and each due stream's
 *     keys in the era are a contiguous run (no later batch of it is
 *     taken while an earlier one is left out).
 */

/* e->due's value for a stream: the first slot of the last marker in
 * which its part ripened, plus one (never NULL). */
static void *due_value(uint64_t first_slot)
{
	return (void *)(uintptr_t)(first_slot + 1);
}

/* Is stream id due, and is the marker at first_slot at or before its last
 * ripe part? */
static bool due_at(const struct era *e, uint64_t id, uint64_t first_slot)
{
	uintptr_t v = (uintptr_t)u64map_get(e->due, id);

	return v && first_slot + 1 <= v;
}

/* May the walk still take ripe markers into the era? */
static bool era_open(const struct era *e)
{
	return e->nripe < ERA_MARKERS_MAX && !(e->nripe > 0 && e->est_bytes >= e->cfg->fetch_budget);
}

/* A deep copy of m at the end of e->marks.  0 or -ENOMEM. */
static int marks_push(struct era *e, const struct meta_marker *m)
{
	struct meta_marker *c;

	if (e->nmarks == e->cap) {
		uint32_t ncap = e->cap ? e->cap * 2 : 16;
		struct meta_marker *p = realloc(e->marks, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		e->marks = p;
		e->cap = ncap;
	}
	c = &e->marks[e->nmarks];
	*c = *m;
	c->streams = NULL;
	if (m->nstreams) {
		c->streams = malloc(m->nstreams * sizeof(*c->streams));
		if (!c->streams)
			return -ENOMEM;
		memcpy(c->streams, m->streams, m->nstreams * sizeof(*c->streams));
	}
	e->nmarks++;
	return 0;
}

static void marks_clear(struct era *e)
{
	for (uint32_t i = 0; i < e->nmarks; i++)
		meta_marker_clear(&e->marks[i]);
	e->nmarks = 0;
}

/* Walk 1 keeps every marker it meets while the era is open (a waiting
 * one may hold an earlier batch of a stream a later marker makes due),
 * up to ERA_KEEP_MARKERS markers and ERA_KEEP_STREAMS stream entries;
 * past that it drops them and walk 2 collects instead. */
static int keep_candidate(struct era *e, const struct meta_marker *m)
{
	if (e->keep_overflow)
		return 0;
	if (e->nmarks == ERA_KEEP_MARKERS || e->kept_streams + m->nstreams > ERA_KEEP_STREAMS) {
		marks_clear(e);
		e->keep_overflow = true;
		return 0;
	}
	e->kept_streams += m->nstreams;
	return marks_push(e, m);
}

static int collect_due(void *arg, const struct meta_marker *m)
{
	struct era *e = arg;

	if (m->birth_ns < e->oldest_birth)
		e->oldest_birth = m->birth_ns;
	if (era_open(e)) {
		int rc = keep_candidate(e, m);

		if (rc)
			return rc;
	}
	if (m->ripe_ns > e->now) {
		e->waiting++;
		return 0;
	}
	if (!era_open(e))
		return 0; /* a later era's */
	if (m->ripe_ns < e->first_ripe)
		e->first_ripe = m->ripe_ns;
	for (uint32_t i = 0; i < m->nstreams; i++) {
		const struct meta_marker_stream *ms = &m->streams[i];

		if (ms->ripe_ns > e->now)
			continue;
		if (u64map_put(e->due, ms->stream_id, due_value(m->first_slot)))
			return -ENOMEM;
		e->est_bytes += ms->bytes;
	}
	e->nripe++;
	e->last_slot = m->first_slot;
	return 0;
}

static bool holds_due(const struct era *e, const struct meta_marker *m)
{
	for (uint32_t i = 0; i < m->nstreams; i++)
		if (due_at(e, m->streams[i].stream_id, m->first_slot))
			return true;
	return false;
}

/* Does walk 2 take m (up to the era's end, holding a due stream)? */
static bool keeps(const struct era *e, const struct meta_marker *m)
{
	return m->first_slot <= e->last_slot && holds_due(e, m);
}

static int collect_keep(void *arg, const struct meta_marker *m)
{
	struct era *e = arg;

	if (m->first_slot > e->last_slot || e->nmarks == ERA_MARKERS_MAX)
		return 1;
	return keeps(e, m) ? marks_push(e, m) : 0;
}

/* Walk 2 over what walk 1 kept, in place. */
static void filter_kept(struct era *e)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < e->nmarks; i++) {
		if (n < ERA_MARKERS_MAX && keeps(e, &e->marks[i]))
			e->marks[n++] = e->marks[i];
		else
			meta_marker_clear(&e->marks[i]);
	}
	e->nmarks = n;
}

/* Does the era wait to take what ripens next (invariant 4)?  Only after
 * walk 1, which saw every ripe marker unless the era is full. */
static bool coalesces(const struct era *e)
{
	uint64_t ripe_for = e->now > e->first_ripe ? e->now - e->first_ripe : 0;

	return e->cfg->coalesce_ns && era_open(e) && ripe_for < e->cfg->coalesce_ns;
}

int settle_era_collect(struct era *e)
{
	const struct meta_chain *c = &e->chain;
	int rc;

	assert_era_state(e, ERA_NEW);
	e->due = u64map_new(0);
	if (!e->due)
		return -ENOMEM;
	e->oldest_birth = UINT64_MAX;
	e->first_ripe = UINT64_MAX;
	rc = meta_marker_list(e->cfg->kv, c->cls, c->star, c->epoch, collect_due, e);
	e->walks++;
	if (!rc && e->nripe && coalesces(e))
		e->coalescing = true;
	if (rc || e->nripe == 0 || e->coalescing) {
		marks_clear(e);
		return rc; /* an error, nothing ripe, or a coalescing era */
	}
	if (e->keep_overflow) {
		rc = meta_marker_list(e->cfg->kv, c->cls, c->star, c->epoch, collect_keep, e);
		e->walks++;
		if (rc)
			return rc;
	} else {
		filter_kept(e);
	}
	e->state = ERA_COLLECTED;
	return 0;
}

/* ------------------------------------------------------------ nudge */

int settle_nudge(const struct settle_cfg *cfg, const struct meta_ref *r, uint64_t stream,
		 uint64_t ripe_ns)
{
	uint64_t slot = r->nslots ? r->slots[0].slot : 0;
	int rc;

	if (r->kind != META_REF_SPAN || !r->nslots)
		return -ENOENT;
	rc = meta_marker_ripen(cfg->kv, r->cls, r->star, r->epoch, slot, stream, ripe_ns);
	if (rc == 1)
		nv_log(NV_INFO, NV_SUB_SETTLE, "stream %llu: due, its earlier history waits in "
		       "%s/%s epoch %llu slot %llu: ripened there too", (unsigned long long)stream,
		       nv_class_name(r->cls), r->star, (unsigned long long)r->epoch,
		       (unsigned long long)slot);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------ judge */

struct tuple_row {
	uint64_t id, first_seq, bytes, birth;
};

static int tuple_cmp(const void *x, const void *y)
{
	const struct tuple_row *a = x, *b = y;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return a->first_seq < b->first_seq ? -1 : a->first_seq > b->first_seq;
}

/* The era's streams, each with its ref keys in seq order. */
static int group_streams(struct era *e)
{
	size_t n = 0, k = 0;
	struct tuple_row *t;

	for (uint32_t i = 0; i < e->nmarks; i++)
		n += e->marks[i].nstreams;
	t = calloc(n ? n : 1, sizeof(*t));
	e->streams = calloc(n ? n : 1, sizeof(*e->streams));
	if (!t || !e->streams) {
		free(t);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < e->nmarks; i++)
		for (uint32_t j = 0; j < e->marks[i].nstreams; j++) {
			if (!due_at(e, e->marks[i].streams[j].stream_id, e->marks[i].first_slot))
				continue; /* not this era's: left as it is */
			t[k].id = e->marks[i].streams[j].stream_id;
			t[k].first_seq = e->marks[i].streams[j].first_seq;
			t[k].bytes = e->marks[i].streams[j].bytes;
			t[k].birth = e->marks[i].birth_ns;
			k++;
		}
	n = k;
	qsort(t, n, sizeof(*t), tuple_cmp);
	for (size_t i = 0; i < n;) {
		struct era_stream *s = &e->streams[e->nstreams++];
		size_t j = i;

		while (j < n && t[j].id == t[i].id)
			j++;
		s->id = t[i].id;
		s->keys = malloc((j - i) * sizeof(*s->keys));
		if (!s->keys) {
			free(t);
			return -ENOMEM;
		}
		s->oldest_birth = UINT64_MAX;
		for (size_t q = i; q < j; q++) {
			s->keys[s->nkeys++] = t[q].first_seq;
			s->bytes += t[q].bytes;
			if (t[q].birth < s->oldest_birth)
				s->oldest_birth = t[q].birth;
		}
		i = j;
	}
	free(t);
	return 0;
}

/* The stream's standing window from its first key in the era to its
 * ref frontier (its refs in later eras and chains included), into *out;
 * 0 when the rows are not there (-ENOENT: judged as the era's bytes). */
static int standing_bytes(const struct settle_cfg *cfg, const struct era_stream *es,
			  uint64_t *out)
{
	struct meta_ref first, last;
	uint64_t ver;
	int rc;

	*out = 0;
	meta_ref_init(&first);
	meta_ref_init(&last);
	rc = meta_ref_get(cfg->kv, es->id, es->keys[0], &first, &ver);
	if (!rc)
		rc = meta_ref_last(cfg->kv, es->id, &last);
	if (!rc && last.end_byte > first.first_byte)
		*out = last.end_byte - first.first_byte;
	meta_ref_clear(&first);
	meta_ref_clear(&last);
	return rc == -ENOENT ? 0 : rc;
}

/* Which streams settle, which resolve without bytes, which wait (every
 * stream of an era is due, collect_due()).  It settles when its
 * standing window reaches the trigger (the era's bytes, or, when they
 * fall short, everything it has standing: its later batches may sit in
 * a newer chain); past the age cap everything standing goes. */
static int judge_streams(struct era *e)
{
	const struct settle_cfg *cfg = e->cfg;
	uint64_t cap = cfg->age_cap_ns[e->chain.cls];

	for (uint32_t i = 0; i < e->nstreams; i++) {
		struct era_stream *es = &e->streams[i];
		int rc = meta_stream_get(cfg->kv, es->id, &es->row, NULL);

		if (rc == -ENOENT || (!rc && es->row.deleted_ns)) {
			es->outcome = DROPPED; /* reclamation removes its rows */
			continue;
		}
		if (rc)
			return rc;
		if (es->oldest_birth != UINT64_MAX && e->now >= es->oldest_birth + cap) {
			es->outcome = PENDING;
		} else {
			uint64_t standing = es->bytes;

			if (standing < cfg->trigger_bytes) {
				rc = standing_bytes(cfg, es, &standing);
				if (rc)
					return rc;
			}
			es->outcome = standing >= cfg->trigger_bytes ? PENDING : RESIDUE;
		}
	}
	return 0;
}

int settle_era_judge(struct era *e)
{
	int rc;

	assert_era_state(e, ERA_COLLECTED);
	rc = group_streams(e);
	if (!rc)
		rc = judge_streams(e);
	if (!rc)
		e->state = ERA_JUDGED;
	return rc;
}

/* ------------------------------------------------------------ warm */

static bool era_cancelled(const struct era *e)
{
	return e->cfg->cancelled && e->cfg->cancelled(e->cfg->cancel_arg);
}

static const struct era_stream *find_stream(const struct era *e, uint64_t id);

/* Does marker m hold a stream this era settles? */
static bool marker_settles(const struct era *e, const struct meta_marker *m)
{
	for (uint32_t i = 0; i < m->nstreams; i++) {
		const struct era_stream *es = find_stream(e, m->streams[i].stream_id);

		if (es && es->outcome == PENDING && due_at(e, es->id, m->first_slot))
			return true;
	}
	return false;
}

/*
 * Warm exactly the era's bundles (each read once): the slots of the
 * markers that hold a stream to settle (invariant 3).  Over the budget
 * (-ENOBUFS) the workers read a bundle from the store instead; a slot the
 * store cannot give (a zone down, no good copy) fails the era here, after
 * one slot's cost, not one per slot: the era re-runs at the next pass.
 */
int settle_era_warm(struct era *e)
{
	const struct settle_cfg *cfg = e->cfg;
	const struct meta_chain *c = &e->chain;

	assert_era_state(e, ERA_JUDGED);
	for (uint32_t i = 0; i < e->nmarks; i++) {
		const struct meta_marker *m = &e->marks[i];

		if (!marker_settles(e, m))
			continue;
		for (uint64_t slot = m->first_slot; slot < m->end_slot; slot++) {
			char key[CHAIN_KEY_MAX];
			int w;

			if (era_cancelled(e))
				return -ESHUTDOWN;
			chain_slot_key(key, sizeof(key), c->cls, c->star, c->epoch, slot);
			w = fetch_cache_warm(cfg->fc, key);
			if (w && w != -ENOBUFS && w != -ENOENT) {
				nv_log(NV_WARN, NV_SUB_SETTLE, "%s: unreadable (%s); the era's "
				       "marker at slot %llu settles later", key, strerror(-w),
				       (unsigned long long)m->first_slot);
				fetch_cache_clear(cfg->fc);
				return w;
			}
			e->warmed++;
		}
	}
	e->state = ERA_WARM;
	return 0;
}

/* ------------------------------------------------------------ assemble */

/* The next PENDING stream, or NULL.  Caller holds e->lock. */
static struct era_stream *next_stream(struct era *e)
{
	NV_ASSERT_LOCKED(&e->lock);
	while (e->next < e->nstreams && e->streams[e->next].outcome != PENDING)
		e->next++;
	return e->next < e->nstreams ? &e->streams[e->next++] : NULL;
}

static void *worker_main(void *arg)
{
	struct era *e = arg;

	for (;;) {
		struct era_stream *es;

		pthread_mutex_lock(&e->lock);
		es = next_stream(e);
		pthread_mutex_unlock(&e->lock);
		if (!es || era_cancelled(e))
			break;
		(void)settle_stream(e, es);
	}
	return NULL;
}

void settle_era_assemble(struct era *e)
{
	unsigned nw = e->cfg->workers ? e->cfg->workers : 1;
	pthread_t *th = calloc(nw, sizeof(*th));
	unsigned started = 0;

	assert_era_state(e, ERA_WARM);
	if (th)
		for (; started < nw; started++)
			if (pthread_create(&th[started], NULL, worker_main, e))
				break;
	if (started == 0)
		worker_main(e); /* no threads: do it here */
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	fetch_cache_clear(e->cfg->fc);
	e->state = ERA_ASSEMBLED;
}

/* ------------------------------------------------------------ resolve */

/* The era stream of id (streams are sorted by id), or NULL. */
static const struct era_stream *find_stream(const struct era *e, uint64_t id)
{
	uint32_t lo = 0, hi = e->nstreams;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (e->streams[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < e->nstreams && e->streams[lo].id == id ? &e->streams[lo] : NULL;
}

/*
 * Keep residue in the markers; delete markers with none.  A residue
 * stream whose part had ripened waits again for its age cap (or, past
 * it, a failed settle, one retry delay); the others keep their own
 * ripening; the marker ripens with its first stream (markers.h
 * invariant 4).  *changed counts the markers deleted or rewritten.
 */
static int resolve_markers(struct era *e, int *changed)
{
	const struct settle_cfg *cfg = e->cfg;
	uint64_t cap = cfg->age_cap_ns[e->chain.cls];
	struct kv_txn *t = NULL;
	uint32_t pending = 0;
	int rc = NV_FP("settle.before_resolve");

	for (uint32_t i = 0; !rc && i <= e->nmarks; i++) {
		struct meta_marker *m = &e->marks[i < e->nmarks ? i : 0];
		uint64_t ripe = UINT64_MAX;
		uint32_t keep = 0;
		bool moved = false;

		if (i == e->nmarks || pending == RESOLVE_TXN_MARKERS) {
			/* The batch so far (markers of other streams are
			 * independent: any order, any grouping, is the same). */
			if (pending)
				rc = kv_txn_commit(cfg->kv, t, NULL);
			kv_txn_free(t);
			t = NULL;
			if (!rc)
				*changed += (int)pending;
			pending = 0;
			if (rc || i == e->nmarks)
				break;
		}

		for (uint32_t j = 0; j < m->nstreams; j++) {
			struct meta_marker_stream ms = m->streams[j];
			const struct era_stream *es = due_at(e, ms.stream_id, m->first_slot)
							      ? find_stream(e, ms.stream_id)
							      : NULL;

			/* A settled stream's part beyond its settled end (the
			 * job committed less than its window) is residue. */
			if (es && es->outcome != RESIDUE &&
			    !(es->outcome == SETTLED && ms.first_seq >= es->end_seq))
				continue;
			if (es && ms.ripe_ns <= e->now) {
				ms.ripe_ns = m->birth_ns + cap > e->now ? m->birth_ns + cap
									: e->now + ERA_RETRY_NS;
				moved = true;
			}
			if (ms.ripe_ns < ripe)
				ripe = ms.ripe_ns;
			m->streams[keep++] = ms;
		}
		if (keep == m->nstreams && !moved && ripe == m->ripe_ns)
			continue; /* unchanged */
		if (!t && !(t = kv_txn_new()))
			return -ENOMEM;
		if (keep == 0) {
			rc = meta_marker_txn_del(t, m->cls, m->star, m->epoch, m->first_slot);
		} else {
			m->nstreams = keep;
			m->ripe_ns = ripe;
			m->crossed = ripe < m->birth_ns + cap;
			rc = meta_marker_txn_put(t, m);
		}
		pending++;
	}
	kv_txn_free(t);
	return rc;
}

static int first_marker(void *arg, const struct meta_marker *m)
{
	*(uint64_t *)arg = m->first_slot;
	return 1;
}

/* The settle frontier: the first marker left, else the chain's end. */
static int advance_frontier(const struct settle_cfg *cfg, const struct meta_chain *c)
{
	struct meta_cursors cur;
	uint64_t ver, front = c->state == CHAIN_LIVE ? c->checkpoint : c->cut;
	struct kv_txn *t;
	int rc;

	rc = meta_marker_list(cfg->kv, c->cls, c->star, c->epoch, first_marker, &front);
	if (!rc)
		rc = meta_cursors_get(cfg->kv, c->cls, c->star, c->epoch, &cur, &ver);
	if (rc || front <= cur.settle_frontier)
		return rc;
	cur.settle_frontier = front;
	t = kv_txn_new();
	if (!t)
		return -ENOMEM;
	rc = meta_cursors_txn_put(t, &cur, ver);
	if (!rc)
		rc = kv_txn_commit(cfg->kv, t, NULL);
	kv_txn_free(t);
	return rc;
}

int settle_era_resolve(struct era *e, int *changed)
{
	int rc;

	assert_era_state(e, ERA_ASSEMBLED);
	rc = resolve_markers(e, changed);
	if (!rc)
		rc = advance_frontier(e->cfg, &e->chain);
	if (!rc)
		e->state = ERA_RESOLVED;
	return rc;
}

/* ------------------------------------------------------------ the era */

struct era_tally {
	uint32_t settled, residue, dropped, objects;
	uint64_t bytes;
};

/* Count the outcomes; tell cfg->settled of every settled stream. */
static void era_tally(const struct era *e, struct era_tally *n)
{
	const struct settle_cfg *cfg = e->cfg;

	for (uint32_t i = 0; i < e->nstreams; i++) {
		const struct era_stream *es = &e->streams[i];

		if (es->outcome == SETTLED) {
			n->settled++;
			n->objects += es->objects;
			n->bytes += es->bytes;
			if (cfg->settled)
				cfg->settled(cfg->arg, es->id, es->end_seq, es->end_byte);
		} else if (es->outcome == DROPPED) {
			n->dropped++;
		} else {
			n->residue++;
		}
	}
}

bool settle_backoff_ready(const struct settle_backoff *b, uint64_t now_mono_ns)
{
	return b->failures == 0 || now_mono_ns >= b->next_ns;
}

void settle_backoff_note(struct settle_backoff *b, int rc, uint64_t now_mono_ns)
{
	uint64_t d = SETTLE_BACKOFF_MIN_NS;

	if (rc >= 0) {
		memset(b, 0, sizeof(*b));
		return;
	}
	b->failures++;
	b->last_err = rc;
	for (uint32_t i = 1; i < b->failures && d < SETTLE_BACKOFF_MAX_NS; i++)
		d *= 2;
	if (d > SETTLE_BACKOFF_MAX_NS)
		d = SETTLE_BACKOFF_MAX_NS;
	b->next_ns = now_mono_ns + d;
}

int settle_chain(const struct settle_cfg *cfg, const struct meta_chain *c, uint64_t now_ns,
		 struct settle_view *view)
{
	struct era e;
	struct era_tally n = { 0 };
	uint64_t t0 = nv_now_mono_ns();
	int rc, changed = 0;

	if (view) {
		view->waiting = 0;
		view->oldest_birth = UINT64_MAX;
		view->era_ms = 0;
	}
	if (c->state == CHAIN_FENCED)
		return 0; /* recovery first */
	settle_era_init(&e, cfg, c, now_ns);
	rc = settle_era_collect(&e);
	if (view) {
		view->waiting = e.waiting;
		view->oldest_birth = e.oldest_birth;
	}
	if (!rc && e.coalescing)
		nv_log(NV_DEBUG, NV_SUB_SETTLE, "%s/%s epoch %llu: %u ripe marker(s), the first "
		       "ripe for %llu ms: the era coalesces for %llu ms", nv_class_name(c->cls),
		       c->star, (unsigned long long)c->epoch, e.nripe,
		       (unsigned long long)((now_ns - e.first_ripe) / NV_NS_PER_MS),
		       (unsigned long long)(cfg->coalesce_ns / NV_NS_PER_MS));
	if (rc || e.state != ERA_COLLECTED)
		goto out; /* an error, nothing ripe, or a coalescing era */
	rc = settle_era_judge(&e);
	if (rc)
		goto out;
	NV_STAT_ADD(cfg->stats, settle_jobs, 1);
	rc = settle_era_warm(&e);
	if (rc)
		goto out;
	settle_era_assemble(&e);
	if (era_cancelled(&e)) {
		/* Streams done so far are committed; the rest and the markers
		 * wait for the next start (as after a crash here). */
		rc = -ESHUTDOWN;
		goto out;
	}
	era_tally(&e, &n);
	rc = settle_era_resolve(&e, &changed);
	if (view)
		view->era_ms = (nv_now_mono_ns() - t0) / NV_NS_PER_MS;
	nv_log(n.settled || n.dropped ? NV_INFO : NV_DEBUG, NV_SUB_SETTLE,
	       "%s/%s epoch %llu slots [%llu, %llu): %u stream(s) settled into %u object(s) "
	       "(%llu bytes), %u dropped, %u residue, in %llu ms",
	       nv_class_name(c->cls), c->star, (unsigned long long)c->epoch,
	       (unsigned long long)e.marks[0].first_slot,
	       (unsigned long long)e.marks[e.nmarks - 1].end_slot, n.settled, n.objects,
	       (unsigned long long)n.bytes, n.dropped, n.residue,
	       (unsigned long long)((nv_now_mono_ns() - t0) / NV_NS_PER_MS));
out:
	settle_era_free(&e);
	if (rc) {
		nv_log(NV_WARN, NV_SUB_SETTLE, "%s/%s epoch %llu: settle pass failed: %s",
		       nv_class_name(c->cls), c->star, (unsigned long long)c->epoch, strerror(-rc));
		return rc;
	}
	return changed > 0 || n.settled > 0;
}
