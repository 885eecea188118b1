/*
 * auditor.c - see auditor.h.
 *
 * Liveness of other stars is their registry row (meta/stars.h), kept by
 * engine/lease.c.  One thread.  a->lock guards the gate, the halt requests, the live
 * epochs and the stop flag; no I/O happens under it.
 */
#include "config.h"
#include "engine/auditor.h"
#include "engine/duty.h"
#include "meta/chains.h"
#include "meta/stars.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"
#include "src/base/u64map.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The longest an era waits to coalesce (see auditor_new()): a second,
 * the default audit interval, is short next to any linger or age cap. */
#define COALESCE_MAX_NS NV_NS_PER_S

struct auditor {
	struct auditor_cfg cfg;
	char star[META_STAR_MAX + 1];
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;      /* the thread: nudge, halt, stop */
	pthread_cond_t gate_cond; /* waiters: gate opened or cancelled */
	bool gate_open;           /* lock */
	bool gate_shut;           /* lock: every wait answers -ESHUTDOWN */
	bool stop;                /* lock */
	bool nudged;              /* lock */
	uint64_t halted[NV_CLASS_COUNT]; /* lock: halted epoch per class, 0 none */
	uint64_t live[NV_CLASS_COUNT];   /* lock */
	/* The thread's: a failed restart of a halted class, or one whose
	 * epoch halts again within HALT_HEALTHY_NS, waits this long
	 * (doubling to HALT_BACKOFF_MAX_NS) before the next attempt, so a
	 * full disk or a store that stays away is not retried every pass. */
	uint64_t halt_next_ns[NV_CLASS_COUNT], halt_backoff_ns[NV_CLASS_COUNT];
	uint64_t halt_restart_ns[NV_CLASS_COUNT]; /* the thread's: last good restart; 0 none */
	/* The thread's: chains whose era failed, by digest of (class, star,
	 * epoch) -> struct chain_backoff (settle.h settle_backoff). */
	struct u64map *failing;
	struct settle_backoff reclaim_b; /* the thread's: trim_reclaim() failures */
	struct settle_backoff pass_b;    /* the thread's: chain listings that failed */
	struct duty *duty;               /* the settle duty lease (duty.h) */
	/* The thread's: mono; no slot deletion or reclamation before it
	 * (a duty taken from another star waits one read grace on our own
	 * clock: duty_taken_from_other()).  0: none. */
	uint64_t delete_after_ns;
};

struct chain_backoff {
	struct settle_backoff b;
	struct meta_chain c; /* which chain (digests may collide: compared) */
};

/* ------------------------------------------------------------ the gate */

bool auditor_gate_is_open(struct auditor *a)
{
	bool o;

	pthread_mutex_lock(&a->lock);
	o = a->gate_open;
	pthread_mutex_unlock(&a->lock);
	return o;
}

int auditor_gate_wait(struct auditor *a, struct gate_waiter *w)
{
	int rc = 0;

	pthread_mutex_lock(&a->lock);
	while (!a->gate_open && !(w && w->cancelled) && !a->stop && !a->gate_shut)
		pthread_cond_wait(&a->gate_cond, &a->lock);
	if (!a->gate_open)
		rc = a->stop || a->gate_shut ? -ESHUTDOWN : -EINTR;
	pthread_mutex_unlock(&a->lock);
	return rc;
}

void auditor_gate_cancel(struct auditor *a, struct gate_waiter *w)
{
	pthread_mutex_lock(&a->lock);
	w->cancelled = true;
	pthread_cond_broadcast(&a->gate_cond);
	pthread_mutex_unlock(&a->lock);
}

void auditor_gate_shut(struct auditor *a)
{
	pthread_mutex_lock(&a->lock);
	a->gate_shut = true;
	pthread_cond_broadcast(&a->gate_cond);
	pthread_mutex_unlock(&a->lock);
}

void auditor_report_halt(struct auditor *a, unsigned cls, uint64_t epoch)
{
	if (cls >= NV_CLASS_COUNT)
		return;
	pthread_mutex_lock(&a->lock);
	if (a->live[cls] == epoch)
		a->halted[cls] = epoch;
	a->nudged = true;
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->lock);
}

bool auditor_duty_held(struct auditor *a)
{
	return duty_held(a->duty);
}

void auditor_nudge(struct auditor *a)
{
	pthread_mutex_lock(&a->lock);
	a->nudged = true;
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->lock);
}

/* ------------------------------------------------------------ duties */

struct scan {
	struct auditor *a;
	struct meta_chain *due; /* chains to settle */
	size_t n, cap;
	int err;
};

/* Is this unsettled chain ours to settle now? (auditor.h invariant 2)
 * Another star's chain is due when the star is gone (its registry row,
 * bound to its registry lease, is: meta/stars.h invariant 1), closed, or
 * when the chain is older than the star's current incarnation or its
 * class's mint head. */
static bool settle_due(struct auditor *a, const struct meta_chain *c)
{
	uint64_t head = 0;
	struct meta_star reg;
	bool live_head;

	if (c->state == CHAIN_SETTLED)
		return false;
	if (!strcmp(c->star, a->star)) {
		/* Our live heads are not due; a halted head is handed to the
		 * star (handle_halts()), which quiesces it first. */
		pthread_mutex_lock(&a->lock);
		live_head = a->live[c->cls] == c->epoch || a->halted[c->cls] == c->epoch;
		pthread_mutex_unlock(&a->lock);
		return !live_head;
	}
	/* Another star's chains are the duty's (duty.h); a take that
	 * needs one settles it on demand (engine/runner.h). */
	if (!duty_held(a->duty))
		return false;
	if (meta_mint_head(a->cfg.recover.kv, c->cls, c->star, &head) == 0 && c->epoch < head)
		return true; /* below the mint head: terminally halted */
	switch (meta_star_get(a->cfg.recover.kv, c->star, &reg, NULL)) {
	case 0:
		break;
	case -ENOENT:  /* no registry row: not a running star */
	case -EBADMSG: /* a row of before issue 15, bound to no lease */
		return true;
	default:
		return false; /* the metastore cannot say now: not due yet */
	}
	if (reg.state == STAR_CLOSED)
		return true;
	return c->cls < NV_CLASS_COUNT && reg.epochs[c->cls] && c->epoch < reg.epochs[c->cls];
}

static int collect(void *arg, const struct meta_chain *c, uint64_t ver)
{
	struct scan *s = arg;

	if (c->state == CHAIN_SETTLED)
		return 0;
	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 8;
		struct meta_chain *p = realloc(s->due, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->due = p;
		s->cap = ncap;
	}
	s->due[s->n++] = *c;
	return 0;
}

/* Settle every due chain.  Returns the number still unsettled (due but
 * failed, or not ours to settle), or -errno when the scan failed;
 * *last_err gets the error of the last chain that failed (0: none). */
static int settle_due_chains(struct auditor *a, int *failed, int *last_err)
{
	struct scan s = { .a = a };
	int rc, pending = 0;

	*failed = 0;
	*last_err = 0;
	rc = meta_chain_list(a->cfg.recover.kv, collect, &s);
	if (rc) {
		free(s.due);
		return rc;
	}
	for (size_t i = 0; i < s.n; i++) {
		const struct meta_chain *c = &s.due[i];

		if (!settle_due(a, c)) {
			pending++;
			continue;
		}
		rc = recover_chain(&a->cfg.recover, c->cls, c->star, c->epoch);
		if (rc) {
			*last_err = rc;
			(*failed)++;
			pending++;
		}
	}
	free(s.due);
	return pending;
}

/* Other stars' live heads and our live heads may stay unsettled; the
 * gate needs everything else settled (invariant 1). */
static bool predecessors_settled(struct auditor *a)
{
	struct scan s = { .a = a };
	bool ok = true;

	if (meta_chain_list(a->cfg.recover.kv, collect, &s)) {
		free(s.due);
		return false;
	}
	/* Another live star's head does not block: a take of one of its
	 * streams waits for its epochs instead (engine/lease.c). */
	for (size_t i = 0; i < s.n && ok; i++)
		ok = !settle_due(a, &s.due[i]);
	free(s.due);
	return ok;
}

#define HALT_BACKOFF_MAX_NS (30 * NV_NS_PER_S)
#define HALT_HEALTHY_NS (60 * NV_NS_PER_S)

/* Give each halted class back to the star (which quiesces the chain,
 * settles its epoch and starts a new one), each failed class again only
 * after its back-off.  Returns how many failed. */
static int handle_halts(struct auditor *a)
{
	int failed = 0;

	for (unsigned cls = 0; cls < NV_CLASS_COUNT; cls++) {
		uint64_t epoch, e, now = nv_now_mono_ns();
		bool stop;

		pthread_mutex_lock(&a->lock);
		epoch = a->halted[cls];
		pthread_mutex_unlock(&a->lock);
		if (!epoch || !a->cfg.halted)
			continue;
		if (now < a->halt_next_ns[cls]) {
			failed++; /* still backing off */
			continue;
		}
		/* Only an epoch that ran HALT_HEALTHY_NS since its restart
		 * starts the back-off afresh: one that halts at once again (a
		 * disk with no free block lets the fence through, not the
		 * first slot) waits like a failed restart. */
		if (a->halt_restart_ns[cls] && now - a->halt_restart_ns[cls] >= HALT_HEALTHY_NS)
			a->halt_backoff_ns[cls] = 0;
		/* A close under way restarts nothing (star_close(): no restart
		 * races it); the halted epoch is left to the settle. */
		(void)NV_FP("auditor.before_restart");
		pthread_mutex_lock(&a->lock);
		stop = a->stop;
		pthread_mutex_unlock(&a->lock);
		if (stop)
			break;
		e = a->cfg.halted(a->cfg.arg, cls, epoch);
		{
			uint64_t b = a->halt_backoff_ns[cls] ? a->halt_backoff_ns[cls] * 2
							    : NV_NS_PER_S;

			a->halt_backoff_ns[cls] = b > HALT_BACKOFF_MAX_NS ? HALT_BACKOFF_MAX_NS : b;
			a->halt_next_ns[cls] = nv_now_mono_ns() + a->halt_backoff_ns[cls];
			a->halt_restart_ns[cls] = e ? nv_now_mono_ns() : 0;
		}
		pthread_mutex_lock(&a->lock);
		if (e) {
			a->halted[cls] = 0;
			a->live[cls] = e;
		}
		pthread_mutex_unlock(&a->lock);
		if (!e)
			failed++;
	}
	return failed;
}

struct pass {
	struct auditor *a;
	struct meta_chain *chains;
	size_t n, cap;
};

static int collect_all(void *arg, const struct meta_chain *c, uint64_t ver)
{
	struct pass *p = arg;

	if (p->n == p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : 8;
		struct meta_chain *q = realloc(p->chains, ncap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		p->chains = q;
		p->cap = ncap;
	}
	p->chains[p->n++] = *c;
	return 0;
}

static bool stopping(struct auditor *a)
{
	bool s;

	pthread_mutex_lock(&a->lock);
	s = a->stop;
	pthread_mutex_unlock(&a->lock);
	return s;
}

/* settle_cfg.cancelled and trim_cfg.cancelled: an era or a slot
 * deletion in progress gives up when we stop. */
/* settle_cfg.cancelled: also the moment this star's registry lease is
 * gone by its own deadline (a duty holder or a head's settler past its
 * lease kept committing until its auditor noticed: the soak). */
static bool settle_cancelled(void *arg)
{
	struct auditor *a = arg;

	return stopping(a) || (a->cfg.may_commit && a->cfg.may_commit(a->cfg.arg) != 0);
}

/* trim_cfg.cancelled: slot deletion also stops the moment the duty is
 * no longer held by our own deadline (duty.h invariant 1). */
static bool trim_cancelled(void *arg)
{
	struct auditor *a = arg;

	return stopping(a) || !duty_held(a->duty);
}

/* Is c our live, not halted, head? */
static bool own_head(struct auditor *a, const struct meta_chain *c)
{
	bool h;

	pthread_mutex_lock(&a->lock);
	h = !strcmp(c->star, a->star) && c->cls < NV_CLASS_COUNT && a->live[c->cls] == c->epoch &&
	    a->halted[c->cls] != c->epoch;
	pthread_mutex_unlock(&a->lock);
	return h;
}

/* Does this star run the group settle of c?  Its own live heads (their
 * commits compare its writer leases); every settled chain, any star's,
 * only with the duty. */
static bool group_settles(struct auditor *a, const struct meta_chain *c, bool duty)
{
	return own_head(a, c) || (duty && c->state == CHAIN_SETTLED);
}

/* Does this star trim-check c?  Only the duty, for every star's chains
 * (settled ones and live heads; a fenced chain waits for its settle, a
 * halted head of ours for its restart). */
static bool trims(struct auditor *a, const struct meta_chain *c, bool duty)
{
	bool halted;

	if (!duty || c->state == CHAIN_FENCED)
		return false;
	pthread_mutex_lock(&a->lock);
	halted = !strcmp(c->star, a->star) && c->cls < NV_CLASS_COUNT &&
		 a->halted[c->cls] == c->epoch;
	pthread_mutex_unlock(&a->lock);
	return !halted;
}

/* We just took the settle duty.  Graces another holder started were
 * read on its wall clock: no decision compares two hosts' clocks, so
 * nothing is deleted before one read grace has passed here, by which
 * time every grace it started has run its full length in real time. */
static void took_duty(struct auditor *a)
{
	a->delete_after_ns = 0;
	if (!duty_taken_from_other(a->duty) || !a->cfg.trim.read_grace_ns)
		return;
	a->delete_after_ns = nv_now_mono_ns() + a->cfg.trim.read_grace_ns;
	nv_log(NV_INFO, NV_SUB_TRIM, "star %s: took the settle duty from another star: slot "
	       "deletion starts after one read grace (%llu s) on this star's clock", a->star,
	       (unsigned long long)(a->cfg.trim.read_grace_ns / NV_NS_PER_S));
}

/* May the duty delete slots and reclaim now? */
static bool may_delete(struct auditor *a, bool duty)
{
	return duty && duty_held(a->duty) && nv_now_mono_ns() >= a->delete_after_ns;
}

static uint64_t chain_digest(const struct meta_chain *c)
{
	return u64map_fnv_str(U64MAP_FNV_SEED ^ (c->epoch * 2 + c->cls), c->star);
}

/* The backoff of chain c, or NULL when it is not failing. */
static struct chain_backoff *backoff_of(struct auditor *a, const struct meta_chain *c)
{
	struct chain_backoff *cb = u64map_get(a->failing, chain_digest(c));

	if (cb && (cb->c.cls != c->cls || cb->c.epoch != c->epoch || strcmp(cb->c.star, c->star)))
		return NULL; /* a digest collision: tracked as not failing */
	return cb;
}

/* Record a settle result of chain c: a failure starts or extends its
 * backoff (settle.h), anything else ends it. */
static void note_result(struct auditor *a, const struct meta_chain *c, int rc)
{
	struct chain_backoff *cb = backoff_of(a, c);
	uint64_t now = nv_now_mono_ns();

	if (rc >= 0) {
		if (cb) {
			nv_log(NV_INFO, NV_SUB_SETTLE, "%s/%s epoch %llu: settling again after %u "
			       "failed pass(es)", nv_class_name(c->cls), c->star,
			       (unsigned long long)c->epoch, cb->b.failures);
			free(u64map_remove(a->failing, chain_digest(c)));
		}
		return;
	}
	NV_STAT_ADD(a->cfg.settle.stats, settle_failures, 1);
	if (!cb && !u64map_get(a->failing, chain_digest(c))) {
		cb = calloc(1, sizeof(*cb));
		if (cb && u64map_put(a->failing, chain_digest(c), cb)) {
			free(cb);
			cb = NULL;
		}
		if (cb)
			cb->c = *c;
	}
	if (!cb)
		return; /* no memory (or a collision): retried next pass */
	settle_backoff_note(&cb->b, rc, now);
	nv_log(NV_WARN, NV_SUB_SETTLE, "%s/%s epoch %llu: era failed %u time(s) in a row (%s); "
	       "next try in %llu ms", nv_class_name(c->cls), c->star, (unsigned long long)c->epoch,
	       cb->b.failures, strerror(-rc),
	       (unsigned long long)((cb->b.next_ns - now) / NV_NS_PER_MS));
}

/* The settle gauges of user.nova.stats after a pass. */
struct pass_view {
	uint64_t waiting;
	uint64_t oldest[NV_CLASS_COUNT]; /* birth, wall ns; UINT64_MAX: none */
};

static void publish_view(struct auditor *a, const struct pass_view *pv)
{
	struct nv_stats *st = a->cfg.settle.stats;
	uint64_t now = nv_now_wall_ns(), mono = nv_now_mono_ns(), longest = 0, nfail = 0;
	size_t cur = 0;
	void *v;

	if (!st)
		return;
	NV_STAT_SET(st, settle_markers_waiting, pv->waiting);
	NV_STAT_SET(st, settle_oldest_standard_ms,
		    pv->oldest[NV_CLASS_STANDARD] < now
			    ? (now - pv->oldest[NV_CLASS_STANDARD]) / NV_NS_PER_MS : 0);
	NV_STAT_SET(st, settle_oldest_express_ms,
		    pv->oldest[NV_CLASS_EXPRESS] < now
			    ? (now - pv->oldest[NV_CLASS_EXPRESS]) / NV_NS_PER_MS : 0);
	while (u64map_next(a->failing, &cur, NULL, &v)) {
		const struct chain_backoff *cb = v;

		nfail++;
		if (cb->b.next_ns > mono && cb->b.next_ns - mono > longest)
			longest = cb->b.next_ns - mono;
	}
	NV_STAT_SET(st, settle_chains_failing, nfail);
	NV_STAT_SET(st, settle_backoff_ms, longest / NV_NS_PER_MS);
}

/* The gauges from what the chains' last settle calls saw (views[i] of
 * p->chains[i]). */
static void pass_view_publish(struct auditor *a, const struct pass *p,
			      const struct settle_view *views)
{
	struct pass_view pv = { 0 };

	for (unsigned cls = 0; cls < NV_CLASS_COUNT; cls++)
		pv.oldest[cls] = UINT64_MAX;
	for (size_t i = 0; i < p->n; i++) {
		unsigned cls = p->chains[i].cls;

		pv.waiting += views[i].waiting;
		if (cls < NV_CLASS_COUNT && views[i].oldest_birth < pv.oldest[cls])
			pv.oldest[cls] = views[i].oldest_birth;
	}
	publish_view(a, &pv);
}

/* One era on chain c, unless it is backing off; *sv gets what the call
 * saw (unchanged when it did not run).  Returns 1 when another era may
 * be due. */
static int settle_one(struct auditor *a, const struct meta_chain *c, struct settle_view *sv)
{
	const struct chain_backoff *cb = backoff_of(a, c);
	struct meta_chain fresh;
	uint64_t v;
	int rc;

	if (cb && !settle_backoff_ready(&cb->b, nv_now_mono_ns()))
		return 0;
	if (meta_chain_get(a->cfg.recover.kv, c->cls, c->star, c->epoch, &fresh, &v))
		return 0;
	rc = settle_chain(&a->cfg.settle, &fresh, nv_now_wall_ns(), sv);
	if (sv->era_ms > NV_STAT_GET(a->cfg.settle.stats, settle_era_ms_max))
		NV_STAT_SET(a->cfg.settle.stats, settle_era_ms_max, sv->era_ms);
	if (rc != -ESHUTDOWN)
		note_result(a, c, rc);
	return rc == 1;
}

/* Several eras may be due per chain; at most this many per pass. */
#define ERAS_PER_PASS 16

/* The group settle and trim-check over every chain we may settle.  The
 * chains take turns, one era each per round, so a chain of many small
 * cap-ripened eras never holds back another chain's (a hot stream's)
 * round. */
/* Lines a settle pass (once a period) would repeat while the metastore
 * or the store keeps failing (a full disk): rate-limited. */
static struct nv_ratelimit trim_rl, list_rl;

/* trim_reclaim() once its back-off (a->reclaim_b) allows: a failing
 * reclamation is retried after 1 s, doubling to a minute, not every pass. */
static void reclaim(struct auditor *a)
{
	static struct nv_ratelimit rl;
	uint64_t now = nv_now_mono_ns();
	int r;

	if (!settle_backoff_ready(&a->reclaim_b, now))
		return;
	r = trim_reclaim(&a->cfg.trim, nv_now_wall_ns());
	settle_backoff_note(&a->reclaim_b, r, now);
	if (r < 0)
		nv_log_ratelimited(&rl, NV_WARN, NV_SUB_TRIM,
				   "reclamation failed: %s; retrying in %llu s", strerror(-r),
				   (unsigned long long)((a->reclaim_b.next_ns - now) / NV_NS_PER_S));
}

static void settle_pass(struct auditor *a, bool duty)
{
	struct pass p = { .a = a };
	uint64_t now = nv_now_wall_ns(), t0 = nv_now_mono_ns();
	int rc;

	/* A pass whose chain listing failed (a metastore that cannot read:
	 * a full disk) is retried after 1 s doubling to a minute, not every
	 * period. */
	if (!settle_backoff_ready(&a->pass_b, t0))
		return;
	rc = meta_chain_list(a->cfg.recover.kv, collect_all, &p);
	settle_backoff_note(&a->pass_b, rc < 0 ? rc : 0, t0);
	bool *more = calloc(p.n ? p.n : 1, sizeof(*more));
	struct settle_view *views = calloc(p.n ? p.n : 1, sizeof(*views));
	uint64_t *idle_since = calloc(p.n ? p.n : 1, sizeof(*idle_since)); /* mono; 0: not idle */

	for (size_t i = 0; views && i < p.n; i++)
		views[i].oldest_birth = UINT64_MAX;
	if (!more || !views || !idle_since)
		rc = rc ? rc : -ENOMEM;
	for (size_t i = 0; !rc && i < p.n; i++)
		more[i] = group_settles(a, &p.chains[i], duty);
	/* Rounds ask again the chains that settled something, and, once an
	 * audit period has passed since they had nothing, the others: a
	 * round of another chain may ripen while a long pass runs, and an
	 * idle chain's ask is a walk of its markers. */
	for (int round = 0; !rc && round < ERAS_PER_PASS && !stopping(a); round++) {
		bool any = false;

		for (size_t i = 0; i < p.n && !stopping(a); i++) {
			if (!more[i] || (idle_since[i] &&
					 nv_now_mono_ns() - idle_since[i] < a->cfg.period_ns))
				continue;
			if (settle_one(a, &p.chains[i], &views[i])) {
				idle_since[i] = 0;
				any = true;
			} else {
				idle_since[i] = nv_now_mono_ns();
			}
		}
		/* The gauges after every round, not only after the pass: on
		 * a slow store a pass of many rounds lasts tens of seconds. */
		if (!rc)
			pass_view_publish(a, &p, views);
		if (!any)
			break;
	}
	for (size_t i = 0; !rc && i < p.n && !stopping(a); i++) {
		const struct meta_chain *c = &p.chains[i];
		int t;

		if (!trims(a, c, duty) || !may_delete(a, duty))
			continue;
		t = trim_chain(&a->cfg.trim, c->cls, c->star, c->epoch, now);
		if (t < 0 && t != -ESHUTDOWN)
			nv_log_ratelimited(&trim_rl, NV_WARN, NV_SUB_TRIM,
					   "%s/%s epoch %llu: trim-check failed: %s",
					   nv_class_name(c->cls), c->star,
					   (unsigned long long)c->epoch, strerror(-t));
	}
	if (!rc)
		pass_view_publish(a, &p, views);
	free(more);
	free(views);
	free(idle_since);
	free(p.chains);
	if ((nv_now_mono_ns() - t0) / NV_NS_PER_MS > NV_STAT_GET(a->cfg.settle.stats, settle_pass_ms_max))
		NV_STAT_SET(a->cfg.settle.stats, settle_pass_ms_max,
			    (nv_now_mono_ns() - t0) / NV_NS_PER_MS);
	if (!rc && may_delete(a, duty)) {
		reclaim(a);
	} else if (rc) {
		nv_log_ratelimited(&list_rl, NV_WARN, NV_SUB_SETTLE,
				   "settle pass: listing chains failed: %s; retrying in %llu s",
				   strerror(-rc),
				   (unsigned long long)((a->pass_b.next_ns - t0) / NV_NS_PER_S));
	}
}

/* How often a recovery that cannot finish says so (issue: at least
 * once a minute). */
#define STUCK_LOG_NS (60 * NV_NS_PER_S)

/*
 * The gate is still closed after a duty pass that failed: say why, and
 * what would unblock it, the first time and then once a minute
 * (*last_ns: the last line's time, 0 none).
 */
static void log_stuck(struct auditor *a, int pending, int failed, int last_err,
		      uint64_t retry_ns, uint64_t *last_ns)
{
	uint64_t now = nv_now_mono_ns();

	if (*last_ns && now - *last_ns < STUCK_LOG_NS)
		return;
	*last_ns = now;
	if (pending < 0)
		nv_log(NV_WARN, NV_SUB_RECOVER,
		       "star %s: recovery cannot finish: listing the chains in the metastore "
		       "failed (%s); streams wait at the gate.  To unblock it: make the "
		       "metastore (-o meta=) readable again; retrying in %llu s",
		       a->star, strerror(-pending), (unsigned long long)(retry_ns / NV_NS_PER_S));
	else
		nv_log(NV_WARN, NV_SUB_RECOVER,
		       "star %s: recovery cannot finish: %d earlier epoch(s) could not be "
		       "settled (last error: %s); streams wait at the gate.  To unblock it: "
		       "make the object store (-o store=, express=) answer GET and PUT again "
		       "(network, credentials, a full disk, store_faults), or stop the daemon "
		       "(requests at the gate then fail with EIO); retrying in %llu s",
		       a->star, failed, strerror(last_err ? -last_err : EIO),
		       (unsigned long long)(retry_ns / NV_NS_PER_S));
}

static void *auditor_main(void *arg)
{
	struct auditor *a = arg;
	uint64_t backoff = NV_NS_PER_S, last_janitor = 0, next_duty = 0;
	uint64_t last_stuck = 0;
	bool duty_failed = false, held = false;

	pthread_mutex_lock(&a->lock);
	while (!a->stop) {
		int failed = 0, hfail, pending, last_err = 0;
		uint64_t wait = a->cfg.janitor_ns;
		struct timespec ts;
		bool duty, was = held;

		/* A closed gate retries at once after a clean pass (another
		 * star's head may settle any moment), after a failure only
		 * when the back-off is over. */
		duty = a->nudged || (!a->gate_open && !duty_failed) ||
		       nv_now_mono_ns() >= next_duty;
		a->nudged = false;
		pthread_mutex_unlock(&a->lock);
		/* The settle duty lease, once a pass: a star that just took
		 * it scans at once (a dead holder's work waits for nobody). */
		held = duty_poll(a->duty) == 1;
		NV_STAT_SET(a->cfg.settle.stats, settle_duty, held ? 1 : 0);
		if (held && !was) {
			duty = true;
			took_duty(a);
		}
		hfail = handle_halts(a);
		pending = 0;
		if (duty) {
			pending = settle_due_chains(a, &failed, &last_err);
			last_janitor = nv_now_mono_ns();
		}
		failed += hfail;
		if (pending < 0)
			nv_log_ratelimited(&list_rl, NV_WARN, NV_SUB_RECOVER,
					   "settle duty: scanning chains failed: %s",
					   strerror(-pending));
		if (!auditor_gate_is_open(a) && pending >= 0 && failed == 0 &&
		    predecessors_settled(a)) {
			pthread_mutex_lock(&a->lock);
			a->gate_open = true;
			pthread_cond_broadcast(&a->gate_cond);
			pthread_mutex_unlock(&a->lock);
			nv_log(NV_INFO, NV_SUB_RECOVER, "star %s: every earlier epoch is settled; "
			       "serving streams", a->star);
		}
		if (duty) {
			duty_failed = failed || pending < 0;
			if (duty_failed) {
				next_duty = last_janitor + backoff;
				if (!auditor_gate_is_open(a))
					log_stuck(a, pending, failed, last_err, backoff,
						  &last_stuck);
				backoff = backoff * 2 > 30 * NV_NS_PER_S ? 30 * NV_NS_PER_S
									 : backoff * 2;
			} else {
				next_duty = last_janitor + a->cfg.janitor_ns;
				backoff = NV_NS_PER_S;
			}
		}
		if (auditor_gate_is_open(a))
			settle_pass(a, held);
		wait = a->cfg.period_ns;
		{
			uint64_t now = nv_now_mono_ns();

			if (next_duty > now && next_duty - now < wait)
				wait = next_duty - now;
		}

		pthread_mutex_lock(&a->lock);
		ts = nv_mono_deadline(wait);
		while (!a->stop && !a->nudged &&
		       pthread_cond_timedwait(&a->wake, &a->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_cond_broadcast(&a->gate_cond);
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int auditor_new(const struct auditor_cfg *cfg, struct auditor **out)
{
	struct auditor *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	a->cfg = *cfg;
	a->cfg.settle.cancelled = settle_cancelled;
	a->cfg.settle.cancel_arg = a;
	a->cfg.trim.cancelled = trim_cancelled;
	a->cfg.trim.cancel_arg = a;
	snprintf(a->star, sizeof(a->star), "%s", cfg->star);
	a->cfg.star = a->star;
	memcpy(a->live, cfg->live_epochs, sizeof(a->live));
	if (!a->cfg.janitor_ns)
		a->cfg.janitor_ns = 10 * NV_NS_PER_S;
	if (!a->cfg.period_ns)
		a->cfg.period_ns = NV_NS_PER_S;
	/* Era coalescing (engine/settle/era.c invariant 4): an era waits
	 * until its first marker has been ripe for one audit interval, so it
	 * takes what ripens in that interval, not one era per pass; at most
	 * COALESCE_MAX_NS, so a long interval (up to an hour) does not hold
	 * a ripe era for as long again. */
	a->cfg.settle.coalesce_ns = a->cfg.period_ns < COALESCE_MAX_NS ? a->cfg.period_ns
									  : COALESCE_MAX_NS;
	a->failing = u64map_new(0);
	rc = a->failing ? duty_new(&(struct duty_cfg){ .kv = cfg->recover.kv, .star = a->star,
						      .live_lease = cfg->live_lease,
						      .arg = cfg->arg }, &a->duty)
			: -ENOMEM;
	if (rc) {
		u64map_free(a->failing);
		free(a);
		return rc;
	}
	pthread_mutex_init(&a->lock, NULL);
	nv_cond_init_mono(&a->wake);
	pthread_cond_init(&a->gate_cond, NULL);
	rc = -pthread_create(&a->thread, NULL, auditor_main, a);
	if (rc) {
		pthread_mutex_destroy(&a->lock);
		duty_free(a->duty);
		u64map_free(a->failing);
		free(a);
		return rc;
	}
	*out = a;
	return 0;
}

void auditor_free(struct auditor *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->stop = true;
	pthread_cond_broadcast(&a->wake);
	pthread_cond_broadcast(&a->gate_cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	duty_free(a->duty);
	pthread_cond_destroy(&a->wake);
	pthread_cond_destroy(&a->gate_cond);
	pthread_mutex_destroy(&a->lock);
	{
		size_t cur = 0;
		void *v;

		while (u64map_next(a->failing, &cur, NULL, &v))
			free(v);
	}
	u64map_free(a->failing);
	free(a);
}
