/*
 * handoff.c - see handoff.h: the handoff thread (drain flag, drain
 * passes, idle release), placement of vacant streams by a star that
 * takes no lease, the graceful close's leave, and the class close that
 * star_close() and a drained star share.
 *
 * Locking: ho->lock guards stop and nudged (the thread sleeps on
 * ho->wake); state is an atomic read lock-free by star_lead(); rr is an
 * atomic; the idle table belongs to the thread alone.  No lock of this
 * file is held across a metastore call or a star_release().
 *
 * Invariants: those of handoff.h.
 */
#include "config.h"
#include "engine/handoff.h"
#include "engine/absorb.h"
#include "engine/auditor.h"
#include "engine/chain.h"
#include "engine/lease.h"
#include "engine/star.h"
#include "engine/star_impl.h"
#include "meta/chains.h"
#include "meta/leases.h"
#include "meta/stars.h"
#include "src/base/clock.h"
#include "src/base/log.h"
#include "src/base/u64map.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { HO_SERVING, HO_DRAINING, HO_LEAVING };

struct handoff {
	struct star *st;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;    /* lock: the thread sleeps here */
	bool stop, nudged;      /* lock */
	_Atomic int state;      /* HO_* */
	_Atomic unsigned rr;    /* round robin over the serving peers */
	struct u64map *idle;    /* the thread's: stream id -> struct idle_ent */
	uint64_t period_ns;
	bool settled;           /* the thread's: drain_settle() ran */
};

/* A stream led here as the idle release last saw it. */
struct idle_ent {
	uint64_t seq;      /* acked seq then */
	uint64_t since_ns; /* mono: when it last moved */
};

/* ------------------------------------------------------------ peers */

#define PEERS_MAX 64

struct peer_list {
	const char *me;
	bool serving_only; /* placement: serving stars only */
	unsigned n;
	char id[PEERS_MAX][META_STAR_MAX + 1];
	char addr[PEERS_MAX][META_STAR_ADDR_MAX + 1];
};

static int add_peer(void *arg, const struct meta_star *s)
{
	struct peer_list *p = arg;

	if (!strcmp(s->id, p->me) || !s->lease || p->n == PEERS_MAX ||
	    s->state == STAR_CLOSED || (p->serving_only && s->state != STAR_RUNNING))
		return 0;
	snprintf(p->id[p->n], sizeof(p->id[0]), "%s", s->id);
	snprintf(p->addr[p->n], sizeof(p->addr[0]), "%s", s->addr);
	p->n++;
	return 0;
}

static int list_peers(struct star *st, bool serving_only, struct peer_list *p)
{
	int rc;

	memset(p, 0, sizeof(*p));
	p->me = star_id(st);
	p->serving_only = serving_only;
	rc = meta_star_list(st->kv, add_peer, p);
	return rc == -E2BIG ? 0 : rc; /* the first PEERS_MAX are enough */
}

int handoff_peers(struct star *st, handoff_peer_fn fn, void *arg)
{
	struct peer_list *p;
	int rc;

	if (!st->reg)
		return 0;
	p = malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	rc = list_peers(st, false, p);
	for (unsigned i = 0; !rc && i < p->n; i++)
		if (p->addr[i][0])
			rc = fn(arg, p->id[i], p->addr[i]);
	free(p);
	return rc;
}

/* Hand s to the next serving peer of p (round robin), trying each once:
 * 0 with *h, -EAGAIN when p is empty or every peer refused. */
static int pass_round_robin(struct star *st, struct nv_stream *s, const struct peer_list *p,
			    struct lease_holder *h)
{
	int rc = -EAGAIN;

	for (unsigned tries = 0; tries < p->n; tries++) {
		unsigned i = atomic_fetch_add(&st->ho->rr, 1) % p->n;

		rc = star_release(st, s, p->id[i], h);
		if (rc != -EHOSTDOWN && rc != -ENOENT)
			return rc;
	}
	return -EAGAIN;
}

/* ------------------------------------------------------------ placement */

/* How long a placement waits for a release of the stream in progress. */
#define PLACE_WAIT_NS (5 * NV_NS_PER_S)

bool handoff_draining(struct star *st)
{
	return st->ho && atomic_load(&st->ho->state) != HO_SERVING;
}

int handoff_place(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	struct lease_holder tmp, *hh = h ? h : &tmp;
	uint64_t until = nv_now_mono_ns() + PLACE_WAIT_NS, delay = 2 * NV_NS_PER_MS;
	struct peer_list *p;
	int rc;

	/* Ours still (not cached): a release of it is flushing; its end
	 * names the successor. */
	while ((rc = star_lead_check(st, s, hh)) == 0 && nv_now_mono_ns() < until) {
		nanosleep(&(struct timespec){ .tv_nsec = (long)delay }, NULL);
		delay = delay * 2 > 50 * NV_NS_PER_MS ? 50 * NV_NS_PER_MS : delay * 2;
	}
	if (rc != -ENOENT)
		return rc == 0 ? -EAGAIN : rc;
	p = malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	rc = list_peers(st, true, p);
	if (!rc)
		rc = pass_round_robin(st, s, p, hh);
	free(p);
	if (rc == 0) {
		nv_log(NV_INFO, NV_SUB_MAIN, "stream %s/%s: placed on star %s (lease epoch %llu): "
		       "this star is %s", s->bucket, s->name, hh->star,
		       (unsigned long long)hh->epoch,
		       atomic_load(&st->ho->state) == HO_LEAVING ? "closing" : "draining");
		return -STAR_ENOTOWNER;
	}
	return rc == -STAR_ENOTOWNER ? rc : -EAGAIN;
}

/* ------------------------------------------------------------ led streams */

struct led {
	size_t n, cap;
	uint64_t *ids, *seqs;
};

/* Streams the cache says this star leads (star_release() decides). */
static void collect_led(void *arg, struct nv_stream *s)
{
	struct led *l = arg;

	if (!atomic_load(&s->lease_gen) || atomic_load(&s->lease_released))
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		uint64_t *ids = realloc(l->ids, cap * sizeof(*ids));
		uint64_t *seqs = ids ? realloc(l->seqs, cap * sizeof(*seqs)) : NULL;

		if (ids)
			l->ids = ids;
		if (!seqs)
			return; /* ENOMEM: this pass skips it; the next one sees it */
		l->seqs = seqs;
		l->cap = cap;
	}
	l->ids[l->n] = s->id;
	l->seqs[l->n++] = atomic_load(&s->acked_seq);
}

static void led_free(struct led *l)
{
	free(l->ids);
	free(l->seqs);
}

static size_t led_count(struct star *st)
{
	struct led l = { 0 };
	size_t n;

	star_each_stream(st, collect_led, &l);
	n = l.n;
	led_free(&l);
	return n;
}

/* Release (to: NULL vacant, else p round robin) the stream id.  0 or the
 * release's error (logged by star_release()). */
static int release_one(struct star *st, uint64_t id, const struct peer_list *p)
{
	struct nv_stream *s;
	struct lease_holder h;
	int rc = star_stream_by_id(st, id, &s);

	if (rc)
		return rc == -ENOENT ? 0 : rc; /* deleted meanwhile */
	rc = p ? pass_round_robin(st, s, p, &h) : star_release(st, s, NULL, &h);
	if (rc == 0)
		nv_log(NV_INFO, NV_SUB_MAIN, "stream %s/%s: handed off%s%s", s->bucket, s->name,
		       h.star[0] ? " to " : " (vacant)", h.star);
	stream_put(s);
	return rc;
}

/* Release every stream led here (p NULL: left vacant).  Counts into *r. */
static int release_all(struct star *st, const struct peer_list *p, struct handoff_report *r)
{
	struct led l = { 0 };
	int first = 0;

	star_each_stream(st, collect_led, &l);
	for (size_t i = 0; i < l.n; i++) {
		int rc = release_one(st, l.ids[i], p);

		if (rc == 0) {
			r->released++;
		} else if (rc != -EAGAIN && rc != -STAR_ENOTOWNER) { /* not ours any more */
			r->failed++;
			if (!first)
				first = rc;
		}
	}
	led_free(&l);
	return first;
}

/* ------------------------------------------------------------ class close */

/* Is this star's epoch of cls SETTLED in the metastore (by another
 * star's recovery: this star's own close settles it only after)? */
static bool settled_elsewhere(struct star *st, unsigned cls, uint64_t epoch)
{
	struct meta_chain now;
	uint64_t ver;

	return meta_chain_get(st->kv, cls, star_id(st), epoch, &now, &ver) == 0 &&
	       now.state == CHAIN_SETTLED;
}

int star_class_close(struct star *st, unsigned cls)
{
	uint64_t epoch = atomic_load(&st->epochs[cls]), ver, next;
	struct meta_chain row;
	int rc;

	pthread_rwlock_wrlock(&st->class_lock[cls]);
	if (!st->chains[cls]) {
		absorb_free(st->absorbs[cls]);
		st->absorbs[cls] = NULL;
		pthread_rwlock_unlock(&st->class_lock[cls]);
		return 0;
	}
	chain_stop(st->chains[cls]);
	rc = chain_halted(st->chains[cls]);
	next = chain_next_slot(st->chains[cls]);
	if (!rc)
		rc = absorb_drain(st->absorbs[cls]);
	absorb_chain_row(st->absorbs[cls], &row, &ver);
	absorb_free(st->absorbs[cls]);
	chain_free(st->chains[cls]);
	st->chains[cls] = NULL;
	st->absorbs[cls] = NULL;
	pthread_rwlock_unlock(&st->class_lock[cls]);
	if (!rc && row.checkpoint == next) {
		/* Everything is absorbed: the epoch is settled, cleanly. */
		row.state = CHAIN_SETTLED;
		row.clean = 1;
		row.cut = next;
		row.settled_ns = nv_now_wall_ns();
		rc = meta_chain_cas(st->kv, &row, ver);
	}
	if (rc && settled_elsewhere(st, cls, epoch)) {
		/* Another star's recovery fenced and settled it (a take
		 * after this star's registry lease lapsed: the epoch it
		 * halted with, or the new one it rejoins with): whatever it
		 * acked is below the fence and covered by that settle. */
		nv_log(NV_INFO, NV_SUB_MAIN, "%s epoch %llu was settled by another star (its "
		       "recovery fenced it after this star's registry lease lapsed): nothing left "
		       "to close", nv_class_name(cls), (unsigned long long)epoch);
		rc = 0;
	} else if (rc && epoch == atomic_load(&st->halted_epochs[cls])) {
		/* Halted with the registry lease loss or a fenced absorb, the
		 * restart not run: its acked records are durable in its slots,
		 * nothing is lost. */
		nv_log(NV_WARN, NV_SUB_MAIN, "%s epoch %llu left unsettled at the close (%s): it "
		       "halted with the registry lease loss or a fenced absorb and the close came "
		       "before its restart; "
		       "every record it acked is durable in its slots and is settled by whichever "
		       "star settles next (a take, the settle duty, or this star's next start)",
		       nv_class_name(cls),
		       (unsigned long long)epoch, strerror(-rc));
		rc = 0;
	} else if (rc)
		nv_log(NV_WARN, NV_SUB_MAIN, "%s epoch %llu not closed cleanly (%s): the next start "
		       "settles it", nv_class_name(cls), (unsigned long long)row.epoch,
		       strerror(-rc));
	else
		nv_log(NV_INFO, NV_SUB_MAIN, "%s epoch %llu closed at slot %llu", nv_class_name(cls),
		       (unsigned long long)row.epoch, (unsigned long long)next);
	return rc;
}

/* A draining star that leads nothing any more settles its head epochs
 * while it stands (settlement.txt: decommission settles a drained
 * star's chains): each class's chain is closed as at unmount.  Once. */
static void drain_settle(struct handoff *ho)
{
	struct star *st = ho->st;
	uint64_t held = 0;
	int first = 0;

	if (ho->settled || led_count(st) || meta_lease_count(st->kv, star_id(st), &held) || held)
		return;
	for (unsigned cls = 0; cls < NV_CLASS_COUNT; cls++) {
		int rc = star_class_close(st, cls);

		if (rc && !first)
			first = rc;
	}
	ho->settled = true;
	nv_log(first ? NV_WARN : NV_INFO, NV_SUB_MAIN, "star %s: drained: it leads no stream%s",
	       star_id(st), first ? "; an epoch did not close cleanly (the settle duty settles "
	       "it)" : " and every epoch of its chains is settled; it can be stopped");
}

/* ------------------------------------------------------------ the thread */

/* The idle release: streams led here whose acked seq did not move for
 * lease_idle_ns are released (vacant). */
static void idle_pass(struct handoff *ho)
{
	struct star *st = ho->st;
	uint64_t now = nv_now_mono_ns(), idle = st->cfg.lease_idle_ns;
	struct u64map *next = u64map_new(64);
	struct led l = { 0 };

	if (!next)
		return;
	star_each_stream(st, collect_led, &l);
	for (size_t i = 0; i < l.n; i++) {
		struct idle_ent *e = u64map_remove(ho->idle, l.ids[i]);

		if (!e && !(e = calloc(1, sizeof(*e))))
			continue;
		if (e->since_ns == 0 || e->seq != l.seqs[i]) {
			e->seq = l.seqs[i];
			e->since_ns = now;
		} else if (now - e->since_ns >= idle) {
			nv_log(NV_INFO, NV_SUB_MAIN, "stream %llu: no append for %llu s: releasing "
			       "its writer lease (lease_idle_s)", (unsigned long long)l.ids[i],
			       (unsigned long long)(idle / NV_NS_PER_S));
			(void)release_one(st, l.ids[i], NULL);
			free(e);
			continue;
		}
		if (u64map_put(next, l.ids[i], e))
			free(e);
	}
	led_free(&l);
	/* What is left in the old table is no longer led here. */
	{
		size_t cur = 0;
		uint64_t k;
		void *v;

		while (u64map_next(ho->idle, &cur, &k, &v))
			free(v);
	}
	u64map_free(ho->idle);
	ho->idle = next;
}

/* The registry row says draining: become draining (once). */
static void check_row(struct handoff *ho)
{
	struct star *st = ho->st;
	struct meta_star row;
	int rc = meta_star_get(st->kv, star_id(st), &row, NULL);

	if (rc)
		return; /* lost or unreachable: the keepalive thread says so */
	if (row.state == STAR_DRAINING && atomic_load(&ho->state) == HO_SERVING) {
		atomic_store(&ho->state, HO_DRAINING);
		nv_log(NV_INFO, NV_SUB_MAIN, "star %s: draining (novactl drain): taking no "
		       "writer lease, handing off the ones it holds, settling its chains",
		       star_id(st));
	} else if (row.state == STAR_RUNNING && atomic_load(&ho->state) != HO_SERVING) {
		/* Re-registered after a loss: keep saying so. */
		rc = meta_star_set_state(st->kv, star_id(st), STAR_DRAINING);
		if (rc)
			nv_log(NV_DEBUG, NV_SUB_MAIN, "star %s: marking the row draining: %s",
			       star_id(st), strerror(-rc));
	}
}

static void drain_pass(struct handoff *ho)
{
	struct star *st = ho->st;
	struct handoff_report r = { 0 };
	struct peer_list *p = malloc(sizeof(*p));
	static struct nv_ratelimit rl;

	if (!p)
		return;
	if (list_peers(st, true, p) == 0) {
		if (p->n)
			(void)release_all(st, p, &r);
		else if (led_count(st))
			nv_log_ratelimited(&rl, NV_WARN, NV_SUB_MAIN, "star %s: draining, and no "
					   "other serving star to hand its streams to",
					   star_id(st));
	}
	free(p);
	if (r.released)
		nv_log(NV_INFO, NV_SUB_MAIN, "star %s: drain: %u stream(s) handed off", star_id(st),
		       r.released);
	drain_settle(ho);
}

static void *handoff_main(void *arg)
{
	struct handoff *ho = arg;

	pthread_mutex_lock(&ho->lock);
	while (!ho->stop) {
		struct timespec ts = nv_mono_deadline(ho->period_ns);

		while (!ho->stop && !ho->nudged &&
		       pthread_cond_timedwait(&ho->wake, &ho->lock, &ts) != ETIMEDOUT)
			;
		if (ho->stop)
			break;
		ho->nudged = false;
		pthread_mutex_unlock(&ho->lock);
		check_row(ho);
		if (atomic_load(&ho->state) == HO_DRAINING)
			drain_pass(ho);
		else if (atomic_load(&ho->state) == HO_SERVING && ho->st->cfg.lease_idle_ns)
			idle_pass(ho);
		pthread_mutex_lock(&ho->lock);
	}
	pthread_mutex_unlock(&ho->lock);
	return NULL;
}

int handoff_start(struct star *st)
{
	struct handoff *ho;
	uint64_t ttl = (uint64_t)(st->cfg.star_lease_s ? st->cfg.star_lease_s : 10) * NV_NS_PER_S;
	int rc;

	if (!st->reg)
		return 0;
	ho = calloc(1, sizeof(*ho));
	if (!ho || !(ho->idle = u64map_new(64))) {
		free(ho);
		return -ENOMEM;
	}
	ho->st = st;
	ho->period_ns = ttl / 3;
	if (st->cfg.lease_idle_ns && st->cfg.lease_idle_ns / 4 < ho->period_ns)
		ho->period_ns = st->cfg.lease_idle_ns / 4;
	if (ho->period_ns < 100 * NV_NS_PER_MS)
		ho->period_ns = 100 * NV_NS_PER_MS;
	pthread_mutex_init(&ho->lock, NULL);
	nv_cond_init_mono(&ho->wake);
	rc = -pthread_create(&ho->thread, NULL, handoff_main, ho);
	if (rc) {
		pthread_cond_destroy(&ho->wake);
		pthread_mutex_destroy(&ho->lock);
		u64map_free(ho->idle);
		free(ho);
		return rc;
	}
	st->ho = ho;
	return 0;
}

void handoff_stop(struct star *st)
{
	struct handoff *ho = st->ho;
	size_t cur = 0;
	uint64_t k;
	void *v;

	if (!ho)
		return;
	pthread_mutex_lock(&ho->lock);
	ho->stop = true;
	pthread_cond_broadcast(&ho->wake);
	pthread_mutex_unlock(&ho->lock);
	pthread_join(ho->thread, NULL);
	st->ho = NULL;
	while (u64map_next(ho->idle, &cur, &k, &v))
		free(v);
	u64map_free(ho->idle);
	pthread_cond_destroy(&ho->wake);
	pthread_mutex_destroy(&ho->lock);
	free(ho);
}

void handoff_nudge(struct star *st)
{
	struct handoff *ho = st->ho;

	if (st->auditor)
		auditor_nudge(st->auditor);
	if (!ho)
		return;
	pthread_mutex_lock(&ho->lock);
	ho->nudged = true;
	pthread_cond_broadcast(&ho->wake);
	pthread_mutex_unlock(&ho->lock);
}

int handoff_leave(struct star *st, struct handoff_report *out)
{
	struct handoff_report r = { 0 };
	int rc;

	if (!st->ho) {
		if (out)
			*out = r;
		return 0;
	}
	atomic_store(&st->ho->state, HO_LEAVING);
	/* Alive, and no target for a pass any more. */
	rc = meta_star_set_state(st->kv, star_id(st), STAR_DRAINING);
	if (rc && rc != -ENOENT)
		nv_log(NV_WARN, NV_SUB_MAIN, "star %s: closing: marking the registry row failed: "
		       "%s", star_id(st), strerror(-rc));
	rc = release_all(st, NULL, &r);
	if (st->auditor)
		auditor_nudge(st->auditor);
	nv_log(NV_INFO, NV_SUB_MAIN, "star %s: closing: %u writer lease(s) released with their "
	       "flush%s; the batch markers of its chains stay for whichever star settles next",
	       star_id(st), r.released, r.failed ? " (some failed: they expire with the registry "
	       "lease)" : "");
	if (out)
		*out = r;
	return rc;
}
