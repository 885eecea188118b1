/*
 * lease.c - see lease.h: the star registry (its lease, the keepalive
 * thread, re-registering after a loss) and the writer leases of streams
 * (take, cache, NOT_OWNER, the wait for a predecessor's epochs).
 *
 * Locking: r->lock guards the thread's stop flag and wake; the lease
 * id, the deadline, the generation and the lost flag are atomics read
 * lock-free by the hot path (lease_reg_may_ack(), star_lead()).
 * r->take_lock guards every stream's lease_taking flag: the slow path of
 * star_lead() (a metastore read, maybe a take, a wait for a predecessor
 * and a reload) runs for one stream at a time (others wait on
 * r->take_cond), so a stream is taken and reloaded once, while other
 * streams' takes go on.  It is never held across the slow path itself;
 * the slow path takes class_lock[c] (shared), then the chain's admission
 * lock (star.h lock order rows 2-4).
 *
 * Size exception: lease.c: 925 lines since the merge of the demand runner's take
 * path and the handoff's claimed take (two branches that each fit), and
 * a deleted stream's take.  The registry half (lease_reg_*) and the
 * writer-lease half share struct lease_reg's take lock, runner and
 * cache; splitting them means an internal header for struct lease_reg,
 * which is the next change here.
 */
#include "config.h"
#include "engine/lease.h"
#include "engine/auditor.h"
#include "engine/chain.h"
#include "engine/runner.h"
#include "engine/star.h"
#include "engine/star_impl.h"
#include "engine/tailcache.h"
#include "meta/chains.h"
#include "meta/kv.h"
#include "meta/leases.h"
#include "meta/stars.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct lease_reg {
	struct lease_reg_cfg cfg;
	struct meta_star row;          /* the thread's (and open's) */
	uint64_t row_ver;
	uint64_t ttl_ns, margin_ns;
	_Atomic uint64_t id;           /* the registry lease; 0 while lost */
	_Atomic uint64_t deadline_ns;  /* mono: ack and serve before this */
	_Atomic uint64_t gen;          /* bumped at every loss and rejoin */
	_Atomic bool lost;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t wake;           /* lock: the thread sleeps here */
	bool stop;                     /* lock */
	bool quiet;                    /* lock: no callbacks (closing) */
	pthread_mutex_t take_lock;     /* streams' lease_taking */
	pthread_cond_t take_cond;      /* take_lock: a slow path ended */
	struct runner *runner;         /* the demand settle runner (runner.h);
					* set by star_lease_start(), NULL before */
};

/* ------------------------------------------------------------ registry */

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / NV_NS_PER_S),
			       .tv_nsec = (long)(ns % NV_NS_PER_S) };

	nanosleep(&ts, NULL);
}

/* Grant a lease; the deadline counts from before the request was sent. */
static int grant(struct lease_reg *r, uint64_t *id, uint64_t *deadline)
{
	uint64_t t0 = nv_now_mono_ns();
	int rc = kv_lease_grant(r->cfg.kv, (unsigned)(r->ttl_ns / NV_NS_PER_S), id);

	if (!rc)
		*deadline = t0 + r->ttl_ns - r->margin_ns;
	return rc;
}

/*
 * Make our row under lease id: create it, or replace a v1 row, or a row
 * of an earlier incarnation of this data directory (revoking its lease
 * first: its writer leases go with it).  -EEXIST when a live star of
 * another data directory holds the id.
 */
static int register_row(struct lease_reg *r, uint64_t id)
{
	for (int attempt = 0; attempt < 4; attempt++) {
		struct meta_star cur;
		uint64_t ver = 0;
		int rc = meta_star_register(r->cfg.kv, &r->row, id);

		if (rc != -EEXIST)
			return rc;
		rc = meta_star_get(r->cfg.kv, r->row.id, &cur, &ver);
		if (rc == -ENOENT)
			continue; /* it just expired */
		if (rc == -EBADMSG) { /* a v1 row (stars.h invariant 3) */
			rc = meta_star_replace(r->cfg.kv, &r->row, id, ver, NULL);
			if (rc != -ECANCELED)
				return rc;
			continue;
		}
		if (rc)
			return rc;
		if (strcmp(cur.host, r->row.host) || strcmp(cur.dir, r->row.dir)) {
			nv_log(NV_ERR, NV_SUB_MAIN,
			       "star id %s is registered by a live star on host %s (data dir %s, "
			       "pid %u): two stars cannot share an id; give this one another "
			       "(-o star=ID) or stop the other", r->row.id, cur.host, cur.dir,
			       (unsigned)cur.pid);
			return -EEXIST;
		}
		/* An earlier incarnation of this data directory: dead (we
		 * hold the directory's lock).  Revoke its lease: its row and
		 * its writer leases go with it, so no stream stays bound to a
		 * lease nobody renews. */
		rc = cur.lease ? kv_lease_revoke(r->cfg.kv, cur.lease) : 0;
		if (rc && rc != -ENOLCK)
			return rc;
		nv_log(NV_INFO, NV_SUB_MAIN, "star %s: revoked the registry lease of an earlier "
		       "start (pid %u)", r->row.id, (unsigned)cur.pid);
		if (meta_star_get(r->cfg.kv, r->row.id, &cur, &ver) == 0 && ver) {
			/* Still there (a lease-less row): replace it. */
			rc = meta_star_replace(r->cfg.kv, &r->row, id, ver, NULL);
			if (rc != -ECANCELED)
				return rc;
		}
	}
	return -EAGAIN;
}

int lease_reg_open(const struct lease_reg_cfg *cfg, struct lease_reg **out)
{
	struct lease_reg *r = calloc(1, sizeof(*r));
	uint64_t id = 0, deadline = 0;
	int rc;

	if (!r)
		return -ENOMEM;
	r->cfg = *cfg;
	r->ttl_ns = (uint64_t)(cfg->ttl_s < KV_LEASE_TTL_MIN ? KV_LEASE_TTL_MIN : cfg->ttl_s) *
		    NV_NS_PER_S;
	r->margin_ns = r->ttl_ns / 5;
	snprintf(r->row.id, sizeof(r->row.id), "%s", cfg->star);
	r->row.started_ns = nv_now_wall_ns();
	r->row.pid = (uint32_t)getpid();
	gethostname(r->row.host, sizeof(r->row.host) - 1);
	snprintf(r->row.dir, sizeof(r->row.dir), "%s", cfg->data_dir ? cfg->data_dir : "");
	snprintf(r->row.addr, sizeof(r->row.addr), "%s", cfg->addr ? cfg->addr : "");
	snprintf(r->row.location, sizeof(r->row.location), "%s",
		 cfg->location ? cfg->location : "");
	r->row.state = STAR_RUNNING;
	pthread_mutex_init(&r->lock, NULL);
	pthread_mutex_init(&r->take_lock, NULL);
	pthread_cond_init(&r->take_cond, NULL);
	nv_cond_init_mono(&r->wake);
	rc = grant(r, &id, &deadline);
	r->row.lease = id;
	if (!rc)
		rc = register_row(r, id);
	if (!rc)
		rc = meta_star_get(cfg->kv, r->row.id, &r->row, &r->row_ver);
	if (rc) {
		if (rc != -EEXIST)
			nv_log(NV_ERR, NV_SUB_MAIN, "star %s: registering failed: %s", cfg->star,
			       strerror(-rc));
		if (id && kv_lease_revoke(cfg->kv, id))
			nv_log(NV_DEBUG, NV_SUB_MAIN, "star %s: the refused lease expires on its own",
			       cfg->star);
		pthread_cond_destroy(&r->wake);
		pthread_cond_destroy(&r->take_cond);
		pthread_mutex_destroy(&r->lock);
		pthread_mutex_destroy(&r->take_lock);
		free(r);
		return rc;
	}
	atomic_store(&r->id, id);
	atomic_store(&r->deadline_ns, deadline);
	atomic_store(&r->gen, 1);
	*out = r;
	return 0;
}

/* Registry lease lost: no ack, no cached lease, epochs handed back. */
static void lose(struct lease_reg *r, uint64_t *heads)
{
	atomic_store(&r->lost, true);
	atomic_store(&r->deadline_ns, 0);
	atomic_fetch_add(&r->gen, 1);
	atomic_store(&r->id, 0);
	nv_log(NV_ERR, NV_SUB_MAIN, "star %s: registry lease lost (paused or cut off from the "
	       "metastore past star_lease_s): acking nothing, restarting its epochs and "
	       "registering again", r->row.id);
	pthread_mutex_lock(&r->lock);
	if (!r->quiet) {
		r->cfg.heads(r->cfg.arg, heads);
		r->cfg.lost(r->cfg.arg, heads);
	}
	pthread_mutex_unlock(&r->lock);
}

/* After a loss: once every class's head moved, register again.  0 when
 * registered, -EAGAIN not yet, -errno. */
static int rejoin(struct lease_reg *r, const uint64_t *lost_heads)
{
	uint64_t heads[NV_CLASS_COUNT], id = 0, deadline = 0;
	bool quiet;
	int rc;

	pthread_mutex_lock(&r->lock);
	quiet = r->quiet;
	if (!quiet)
		r->cfg.heads(r->cfg.arg, heads);
	pthread_mutex_unlock(&r->lock);
	if (quiet)
		return -EAGAIN;
	for (unsigned c = 0; c < NV_CLASS_COUNT; c++)
		if (heads[c] == lost_heads[c] || heads[c] == 0)
			return -EAGAIN;
	memcpy(r->row.epochs, heads, sizeof(heads));
	rc = grant(r, &id, &deadline);
	r->row.lease = id;
	if (!rc)
		rc = register_row(r, id);
	if (!rc)
		rc = meta_star_get(r->cfg.kv, r->row.id, &r->row, &r->row_ver);
	if (rc) {
		if (id && kv_lease_revoke(r->cfg.kv, id))
			nv_log(NV_DEBUG, NV_SUB_MAIN, "star %s: the refused lease expires on its own",
			       r->row.id);
		return rc;
	}
	atomic_store(&r->id, id);
	atomic_store(&r->deadline_ns, deadline);
	atomic_fetch_add(&r->gen, 1);
	atomic_store(&r->lost, false);
	nv_log(NV_INFO, NV_SUB_MAIN, "star %s: registered again (new epochs)", r->row.id);
	return 0;
}

/* Sleep up to ns or until stopped; true when stopped. */
static bool nap(struct lease_reg *r, uint64_t ns)
{
	struct timespec ts = nv_mono_deadline(ns);
	bool stop;

	pthread_mutex_lock(&r->lock);
	while (!r->stop && pthread_cond_timedwait(&r->wake, &r->lock, &ts) != ETIMEDOUT)
		;
	stop = r->stop;
	pthread_mutex_unlock(&r->lock);
	return stop;
}

static void *keepalive_main(void *arg)
{
	struct lease_reg *r = arg;
	uint64_t lost_heads[NV_CLASS_COUNT] = { 0 }, every = r->ttl_ns / 3, wait = every;
	unsigned fails = 0;

	while (!nap(r, wait)) {
		uint64_t t0 = nv_now_mono_ns();
		unsigned ttl = 0;
		int rc;

		wait = every;
		if (atomic_load(&r->lost)) {
			rc = rejoin(r, lost_heads);
			if (rc && rc != -EAGAIN && fails++ % 20 == 0)
				nv_log(NV_WARN, NV_SUB_MAIN, "star %s: registering again failed: %s",
				       r->row.id, strerror(-rc));
			if (rc)
				wait = every / 4 ? every / 4 : 1;
			else
				fails = 0;
			continue;
		}
		rc = kv_lease_keepalive(r->cfg.kv, atomic_load(&r->id), &ttl);
		if (!rc && ttl) {
			atomic_store(&r->deadline_ns,
				     t0 + (uint64_t)ttl * NV_NS_PER_S - r->margin_ns);
			fails = 0;
		} else if (rc == -ENOLCK || !rc) {
			lose(r, lost_heads);
			wait = 0;
		} else {
			/* Unreachable: the deadline runs out on its own. */
			if (fails++ % 10 == 0)
				nv_log(NV_WARN, NV_SUB_MAIN, "star %s: registry keepalive failed: %s; "
				       "acks stop at the lease deadline", r->row.id, strerror(-rc));
			wait = every / 4 ? every / 4 : 1;
		}
	}
	return NULL;
}

int lease_reg_start(struct lease_reg *r, const uint64_t *epochs)
{
	uint64_t nver;
	int rc;

	memcpy(r->row.epochs, epochs, sizeof(r->row.epochs));
	rc = meta_star_replace(r->cfg.kv, &r->row, atomic_load(&r->id), r->row_ver, &nver);
	if (rc)
		return rc;
	r->row_ver = nver;
	rc = -pthread_create(&r->thread, NULL, keepalive_main, r);
	r->started = rc == 0;
	return rc;
}

void lease_reg_close(struct lease_reg *r)
{
	uint64_t id;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_broadcast(&r->wake);
	pthread_mutex_unlock(&r->lock);
	if (r->started)
		pthread_join(r->thread, NULL);
	runner_free(r->runner); /* after every take (star_close()) */
	id = atomic_load(&r->id);
	if (id) {
		int rc = kv_lease_revoke(r->cfg.kv, id);

		if (rc && rc != -ENOLCK)
			nv_log(NV_WARN, NV_SUB_MAIN, "star %s: revoking the registry lease failed "
			       "(%s): its rows expire with it", r->row.id, strerror(-rc));
	}
	pthread_cond_destroy(&r->wake);
	pthread_cond_destroy(&r->take_cond);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->take_lock);
	free(r);
}

int lease_reg_may_ack(struct lease_reg *r)
{
	if (!r)
		return 0;
	if (atomic_load(&r->lost) || nv_now_mono_ns() >= atomic_load(&r->deadline_ns))
		return -ETIMEDOUT;
	return 0;
}

uint64_t lease_reg_id(struct lease_reg *r)
{
	return r ? atomic_load(&r->id) : 0;
}

uint64_t lease_reg_live_id(struct lease_reg *r)
{
	uint64_t id = lease_reg_id(r);

	return id && lease_reg_may_ack(r) == 0 && id == lease_reg_id(r) ? id : 0;
}

uint64_t star_lease_live_id(void *arg)
{
	struct star *st = arg;

	return lease_reg_live_id(st->reg);
}

void lease_reg_quiet(struct lease_reg *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->quiet = true;
	pthread_mutex_unlock(&r->lock);
}

int star_lease_may_ack(void *arg)
{
	struct star *st = arg;

	return lease_reg_may_ack(st->reg);
}

void star_lease_quiet(struct star *st)
{
	lease_reg_quiet(st->reg);
}

void star_lease_detach(struct star *st)
{
	lease_reg_close(st->reg);
	st->reg = NULL;
}

/* ------------------------------------------------------ the star's side */

static void star_heads(void *arg, uint64_t *epochs)
{
	struct star *st = arg;

	for (unsigned c = 0; c < NV_CLASS_COUNT; c++)
		epochs[c] = atomic_load(&st->epochs[c]);
}

/* Every class's head is handed to the auditor as halted: it quiesces
 * the chain, settles the epoch and starts a new one (star.c
 * restart_class()). */
static void star_lost(void *arg, const uint64_t *epochs)
{
	struct star *st = arg;

	for (unsigned c = 0; c < NV_CLASS_COUNT; c++)
		if (st->auditor && epochs[c]) {
			atomic_store(&st->halted_epochs[c], epochs[c]);
			auditor_report_halt(st->auditor, c, epochs[c]);
		}
}

int star_lease_attach(struct star *st)
{
	struct lease_reg_cfg rc = {
		.kv = st->kv, .star = st->id, .addr = st->cfg.listen_addr,
		.location = st->cfg.location, .data_dir = st->data_dir,
		.ttl_s = st->cfg.star_lease_s ? st->cfg.star_lease_s : 10,
		.take_wait_ns = st->cfg.take_wait_ns,
		.heads = star_heads, .lost = star_lost, .arg = st,
	};

	return lease_reg_open(&rc, &st->reg);
}

int star_lease_start(struct star *st)
{
	uint64_t epochs[NV_CLASS_COUNT];
	int rc = runner_new(&(struct runner_cfg){ .recover = st->recover, .stats = &st->stats },
			    &st->reg->runner);

	star_heads(st, epochs);
	return rc ? rc : lease_reg_start(st->reg, epochs);
}

/* ------------------------------------------------------- writer leases */

static void holder_of(const struct meta_lease *l, struct lease_holder *h)
{
	if (!h)
		return;
	memset(h, 0, sizeof(*h));
	snprintf(h->star, sizeof(h->star), "%s", l->star);
	snprintf(h->addr, sizeof(h->addr), "%s", l->addr);
	h->epoch = l->epoch;
}

static void self_holder(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	const char *addr = star_listen_addr(st);

	if (!h)
		return;
	memset(h, 0, sizeof(*h));
	snprintf(h->star, sizeof(h->star), "%s", star_id(st));
	snprintf(h->addr, sizeof(h->addr), "%s", addr ? addr : "");
	h->epoch = atomic_load(&s->lease_epoch);
}

/* The cached answer holds (invariant 5). */
static bool cached(struct lease_reg *r, struct nv_stream *s)
{
	uint64_t g = atomic_load(&s->lease_gen);

	return g && g == atomic_load(&r->gen) && lease_reg_may_ack(r) == 0;
}

struct pend_scan {
	const char *star;
	bool alive;
	uint64_t heads[NV_CLASS_COUNT];
	unsigned n;
	unsigned ndue;           /* of them, known stopped (settle_now()) */
	struct meta_chain first; /* the first of those, when ndue > 0 */
	struct meta_chain any;   /* the first pending chain, when n > 0 */
};

/* Is pending chain c of p->star known to be stopped, so that a walk
 * fences nothing alive?  Its star is gone or closed, or c is older than
 * the star's current incarnation.  (Below its mint head: asked of the
 * metastore by wait_predecessor().)  A live star's head epoch is never
 * displaced. */
static bool settle_now(const struct pend_scan *p, const struct meta_chain *c)
{
	return !p->alive || (p->heads[c->cls] && c->epoch < p->heads[c->cls]);
}

static int count_pending(void *arg, const struct meta_chain *c, uint64_t ver)
{
	struct pend_scan *p = arg;

	(void)ver;
	if (c->state == CHAIN_SETTLED || strcmp(c->star, p->star) || c->cls >= NV_CLASS_COUNT)
		return 0;
	/* A live star's current incarnation never held the stream's lost
	 * lease: the lease went with its previous registry lease. */
	if (p->alive && p->heads[c->cls] && c->epoch >= p->heads[c->cls])
		return 0;
	if (!p->n++)
		p->any = *c;
	if (settle_now(p, c) && !p->ndue++)
		p->first = *c;
	return 0;
}

/* How long a take waits for a predecessor's epochs at most. */
static uint64_t take_wait_ns(struct lease_reg *r)
{
	return r->cfg.take_wait_ns ? r->cfg.take_wait_ns : 3 * r->ttl_ns + 10 * NV_NS_PER_S;
}

/*
 * Invariant 4: wait until no epoch of star prev that may hold the
 * stream's unabsorbed records stays unsettled.  The demand driver: each
 * such epoch is settled here, on the star's settle runner (runner.h),
 * joining a walk of it already under way; the take parks on the walk,
 * bounded by take_wait_ns() (a walk that outlives the take goes on).
 * 0, -ETIMEDOUT (logged), kv error.
 */
static int wait_predecessor(struct star *st, const char *prev, uint64_t stream)
{
	uint64_t until = nv_now_mono_ns() + take_wait_ns(st->reg), delay = 10 * NV_NS_PER_MS;

	for (;;) {
		struct pend_scan p = { .star = prev };
		struct meta_star row;
		int rc = meta_star_get(st->kv, prev, &row, NULL);

		if (rc == 0) {
			p.alive = row.state != STAR_CLOSED;
			memcpy(p.heads, row.epochs, sizeof(p.heads));
		} else if (rc != -ENOENT && rc != -EBADMSG) {
			return rc;
		}
		rc = meta_chain_list(st->kv, count_pending, &p);
		if (rc)
			return rc;
		if (p.n == 0)
			return 0;
		if (nv_now_mono_ns() >= until) {
			nv_log(NV_WARN, NV_SUB_MAIN, "stream %llu: %u epoch(s) of its previous leader "
			       "%s are still unsettled; the take waits again at the next append",
			       (unsigned long long)stream, p.n, prev);
			return -ETIMEDOUT;
		}
		/* Our own earlier epochs are our auditor's (a halted head is
		 * quiesced by its restart first): wait for it. */
		if (!p.ndue) {
			uint64_t head = 0;

			if (meta_mint_head(st->kv, p.any.cls, p.any.star, &head) == 0 &&
			    p.any.epoch < head) {
				p.first = p.any; /* terminally halted */
				p.ndue = 1;
			}
		}
		rc = -EAGAIN;
		if (p.ndue && st->reg->runner && strcmp(prev, star_id(st)))
			rc = runner_settle(st->reg->runner, p.first.cls, p.first.star,
					   p.first.epoch, until, NULL);
		if (rc == 0 || rc == -ETIMEDOUT)
			continue; /* scan again: the next epoch, or the deadline */
		if (rc == -ESHUTDOWN)
			return -ETIMEDOUT;
		/* The walk failed (a store that does not answer) or the
		 * runner is full: the duty or a later walk may still settle
		 * it; look again after a back-off. */
		if (st->auditor)
			auditor_nudge(st->auditor);
		sleep_ns(delay);
		delay = delay * 2 > 500 * NV_NS_PER_MS ? 500 * NV_NS_PER_MS : delay * 2;
	}
}

/* Reload s's positions under its class's admission lock (lease.h
 * invariant 4); its stale tail-cache slices go. */
static int reload(struct star *st, struct nv_stream *s)
{
	unsigned cls;
	int rc;

	pthread_mutex_lock(&s->lock);
	cls = s->cls;
	pthread_mutex_unlock(&s->lock);
	pthread_rwlock_rdlock(&st->class_lock[cls]);
	if (!st->chains[cls]) {
		pthread_rwlock_unlock(&st->class_lock[cls]);
		return -EIO; /* the class is restarting */
	}
	chain_admission_lock(st->chains[cls]);
	rc = stream_reload(st->kv, s);
	chain_admission_unlock(st->chains[cls]);
	pthread_rwlock_unlock(&st->class_lock[cls]);
	tailcache_drop_stream(st->tc, s->id);
	return rc;
}

/* The slow path of star_lead(), with s->lease_taking set by us. */
static int lead_slow(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	struct lease_reg *r = st->reg;
	uint64_t g = atomic_load(&r->gen), ver = 0, last;
	char prev[META_STAR_MAX + 1] = "";
	struct meta_lease l;
	int rc = meta_lease_get(st->kv, s->id, &l, &ver);

	if (rc == -ENOENT) {
		uint64_t rid = atomic_load(&r->id);

		if (!rid)
			return -ETIMEDOUT; /* lost meanwhile: never an unbound row */
		rc = meta_lease_take(st->kv, s->id, star_id(st), star_listen_addr(st), rid, &l,
				     &ver, prev);
		if (rc == -ENOENT) /* deleted (by another star): never led again */
			return star_stream_gone(st, s, NULL);
		if (rc == -EEXIST) {
			rc = meta_lease_get(st->kv, s->id, &l, &ver);
			/* Passed here meanwhile (a placement racing our take):
			 * wait for and reload after its predecessor as below. */
			if (!rc && !strcmp(l.star, star_id(st))) {
				char cur[META_STAR_MAX + 1];

				rc = meta_lease_last(st->kv, s->id, &last, cur, prev, NULL);
			}
		} else if (!rc)
			nv_log(NV_DEBUG, NV_SUB_MAIN, "stream %llu: taken, lease epoch %llu%s%s",
			       (unsigned long long)s->id, (unsigned long long)l.epoch,
			       prev[0] ? " after " : "", prev);
	} else if (rc == 0 && !strcmp(l.star, star_id(st))) {
		/* Ours, not yet ready here (an earlier take timed out): wait
		 * for the same predecessor again. */
		char cur[META_STAR_MAX + 1];

		rc = meta_lease_last(st->kv, s->id, &last, cur, prev, NULL);
	}
	if (rc == -ENOLCK)
		return -ETIMEDOUT; /* our registry lease went meanwhile */
	if (rc)
		return rc == -ENOENT ? -EAGAIN : rc;
	if (strcmp(l.star, star_id(st))) {
		holder_of(&l, h);
		return -STAR_ENOTOWNER;
	}
	if (prev[0]) {
		rc = wait_predecessor(st, prev, s->id);
		if (!rc)
			rc = reload(st, s);
		if (rc)
			return rc;
	}
	atomic_store(&s->lease_ver, ver);
	atomic_store(&s->lease_epoch, l.epoch);
	atomic_store(&s->lease_gen, g);
	atomic_store(&s->lease_released, false);
	self_holder(st, s, h);
	return 0;
}

/* The slow path of star_lead() under s's claim (lease_taking): one
 * take, wait and reload per stream at a time. */
static int lead_claimed(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	struct lease_reg *r = st->reg;
	int rc;

	pthread_mutex_lock(&r->take_lock);
	while (s->lease_taking)
		pthread_cond_wait(&r->take_cond, &r->take_lock);
	if (cached(r, s)) {
		pthread_mutex_unlock(&r->take_lock);
		self_holder(st, s, h);
		return 0;
	}
	s->lease_taking = true;
	pthread_mutex_unlock(&r->take_lock);
	rc = lead_slow(st, s, h);
	pthread_mutex_lock(&r->take_lock);
	s->lease_taking = false;
	pthread_cond_broadcast(&r->take_cond);
	pthread_mutex_unlock(&r->take_lock);
	return rc;
}

int star_lead(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	struct lease_reg *r = st->reg;

	if (!r) {
		self_holder(st, s, h);
		return 0;
	}
	if (cached(r, s)) {
		self_holder(st, s, h);
		return 0;
	}
	if (lease_reg_may_ack(r))
		return -ETIMEDOUT;
	if (handoff_draining(st)) /* takes no lease (handoff.h invariant 1) */
		return handoff_place(st, s, h);
	return lead_claimed(st, s, h);
}

/* --------------------------------------------------------------- handoff */

/* Claim s's slow path (the take_lock's lease_taking flag) for a release:
 * the registry generation it was led under, 0 when this star does not
 * hold s now. */
static uint64_t claim_for_release(struct lease_reg *r, struct nv_stream *s)
{
	uint64_t ours;

	pthread_mutex_lock(&r->take_lock);
	while (s->lease_taking)
		pthread_cond_wait(&r->take_cond, &r->take_lock);
	ours = cached(r, s) ? atomic_load(&s->lease_gen) : 0;
	if (ours) {
		s->lease_taking = true;
		/* Order: chain_append() refuses before star_lead() stops
		 * answering from the cache. */
		atomic_store(&s->lease_released, true);
		atomic_store(&s->lease_gen, 0);
	}
	pthread_mutex_unlock(&r->take_lock);
	return ours;
}

static void unclaim(struct lease_reg *r, struct nv_stream *s)
{
	pthread_mutex_lock(&r->take_lock);
	s->lease_taking = false;
	pthread_cond_broadcast(&r->take_cond);
	pthread_mutex_unlock(&r->take_lock);
}

/* The release flush: every append admitted before lease_released was set
 * is absorbed (its ref committed).  0, -ETIMEDOUT, -EIO (the class is
 * restarting: its chain's records are settled by the restart). */
static int release_flush(struct star *st, struct nv_stream *s)
{
	uint64_t until = nv_now_mono_ns() + take_wait_ns(st->reg), delay = NV_NS_PER_MS, end;
	unsigned cls;

	pthread_mutex_lock(&s->lock);
	cls = s->cls;
	pthread_mutex_unlock(&s->lock);
	for (;;) {
		pthread_rwlock_rdlock(&st->class_lock[cls]);
		if (!st->chains[cls]) {
			pthread_rwlock_unlock(&st->class_lock[cls]);
			return -EIO;
		}
		/* The admission lock orders us after every admit. */
		chain_admission_lock(st->chains[cls]);
		end = s->next_seq;
		chain_admission_unlock(st->chains[cls]);
		if (atomic_load(&s->frontier_seq) >= end) {
			pthread_rwlock_unlock(&st->class_lock[cls]);
			return 0;
		}
		chain_flush(st->chains[cls]);
		pthread_rwlock_unlock(&st->class_lock[cls]);
		if (nv_now_mono_ns() >= until)
			return -ETIMEDOUT;
		sleep_ns(delay);
		delay = delay * 2 > 20 * NV_NS_PER_MS ? 20 * NV_NS_PER_MS : delay * 2;
	}
}

/* Pass vacant s to star `to` (row: its registry row).  0 with *h. */
static int pass_to(struct star *st, struct nv_stream *s, const struct meta_star *row,
		   struct lease_holder *h)
{
	char prev[META_STAR_MAX + 1] = "";
	struct meta_lease l;
	uint64_t ver = 0;
	int rc = meta_lease_take(st->kv, s->id, row->id, row->addr, row->lease, &l, &ver, prev);

	if (rc == -EEXIST) /* another star took it meanwhile */
		rc = meta_lease_get(st->kv, s->id, &l, NULL);
	if (rc == -ENOLCK || rc == -ENOENT)
		return -EHOSTDOWN; /* its registry lease went: s stays vacant */
	if (rc)
		return rc;
	holder_of(&l, h);
	return 0;
}

int star_release(struct star *st, struct nv_stream *s, const char *to, struct lease_holder *h)
{
	struct lease_reg *r = st->reg;
	struct meta_star row;
	uint64_t gen;
	int rc;

	if (!r)
		return -EOPNOTSUPP;
	if (to && !to[0])
		to = NULL;
	if (to && !strcmp(to, star_id(st)))
		return star_lead(st, s, h);
	if (to) {
		rc = meta_star_get(st->kv, to, &row, NULL);
		if (rc == -EBADMSG)
			rc = -EHOSTDOWN; /* an old row: not a star we can name */
		if (rc)
			return rc;
		if (row.state != STAR_RUNNING || !row.lease)
			return -EHOSTDOWN;
	}
	gen = claim_for_release(r, s);
	if (!gen) {
		rc = star_lead_check(st, s, h);
		if (rc == -ENOENT && to) /* vacant: pass it straight on */
			return pass_to(st, s, &row, h);
		return rc == 0 ? -EAGAIN : rc;
	}
	rc = release_flush(st, s);
	if (!rc) {
		rc = meta_lease_release(st->kv, s->id, atomic_load(&s->lease_ver));
		if (rc == -ECANCELED) /* the row went with our registry lease */
			rc = 0;
	}
	if (rc) {
		/* Still ours: admit again. */
		atomic_store(&s->lease_released, false);
		atomic_store(&s->lease_gen, gen); /* stale if lost meanwhile */
		unclaim(r, s);
		nv_log(NV_WARN, NV_SUB_MAIN, "stream %s/%s: release failed (%s); it stays led here",
		       s->bucket, s->name, strerror(-rc));
		return rc;
	}
	nv_log(NV_INFO, NV_SUB_MAIN, "stream %s/%s: released (lease epoch %llu)%s%s", s->bucket,
	       s->name, (unsigned long long)atomic_load(&s->lease_epoch), to ? " to " : "",
	       to ? to : "");
	if (h)
		memset(h, 0, sizeof(*h));
	rc = to ? pass_to(st, s, &row, h) : 0;
	unclaim(r, s);
	return rc;
}

int star_leader(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	struct meta_lease l;
	int rc;

	if (!st->reg) {
		self_holder(st, s, h);
		return 0;
	}
	rc = meta_lease_get(st->kv, s->id, &l, NULL);
	if (rc)
		return rc == -EBADMSG ? -EIO : rc;
	holder_of(&l, h);
	return 0;
}

int star_lead_check(struct star *st, struct nv_stream *s, struct lease_holder *h)
{
	struct lease_holder me;
	int rc;

	if (!st->reg || cached(st->reg, s))
		return 0;
	rc = star_leader(st, s, h ? h : &me);
	if (rc)
		return rc;
	if (!strcmp((h ? h : &me)->star, star_id(st))) {
		if (lease_reg_may_ack(st->reg))
			return -ETIMEDOUT;
		/* Passed here (a handoff) and not ready yet: its view is this
		 * star's old one until the predecessor's epochs are waited for
		 * and the positions reloaded (invariant 4); ready it now, so a
		 * read never serves the stale view as the leader's. */
		return lead_claimed(st, s, h);
	}
	return -STAR_ENOTOWNER;
}

int star_lease_admit(struct star *st, struct nv_stream *s)
{
	return star_lead(st, s, NULL);
}

int star_lease_hot_read(struct star *st, struct nv_stream *s)
{
	int rc = star_lead_check(st, s, NULL);

	return rc == -ENOENT ? 0 : rc;
}

int star_lease_fence(struct star *st, struct nv_stream *s, uint64_t *ver)
{
	int rc = star_lead_check(st, s, NULL);

	*ver = 0;
	if (rc == -ENOENT)
		return 0; /* vacant: the row must stay absent */
	if (rc == 0 && st->reg)
		*ver = atomic_load(&s->lease_ver); /* ready and ours (star_lead_check()) */
	return rc;
}

uint64_t star_lease_settle_ver(void *arg, uint64_t stream, const struct meta_chain *c)
{
	struct star *st = arg;
	struct nv_stream *s;
	uint64_t v;

	if (!st->reg || c->state == CHAIN_SETTLED || strcmp(c->star, st->id) ||
	    c->cls >= NV_CLASS_COUNT || c->epoch != atomic_load(&st->epochs[c->cls]))
		return 0;
	s = stream_table_find(st->streams, stream);
	if (!s)
		return 0;
	/* A released stream's refs cover what this epoch holds of it
	 * (lease.h invariant 6): its settle commits without the lease. */
	v = atomic_load(&s->lease_released) ? 0 : atomic_load(&s->lease_ver);
	stream_put(s);
	return v;
}
