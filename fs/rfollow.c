/*
 * rfollow.c - see rfollow.h: the mount's subscriptions at other stars.
 *
 * One detached thread per subscription (a mount follows few streams across hosts;
 * api_client_subscribe() blocks for the subscription's life).  Its loop,
 * rsub_main(): ask who leads (star_lead_check()); another star: subscribe
 * there at the cursor until the holder ends it; this star: nothing to
 * do but re-check in 250 ms; vacant: raise this star's view to the refs'
 * end (star_view_refresh(): a dead leader's acked records appear as
 * settlement commits them), then re-check from 5 ms doubling to 250 ms,
 * back to 5 ms whenever the refs moved; unreachable: re-check likewise
 * (rfollow.h invariant 3).
 * The subscription names the stream by its id too (fs/remote.h invariant
 * 2): the holder's ESTALE or ENOENT is asked again under the stream's
 * name now; a stream found deleted ends the loop (rfollow.h invariant 6).
 *
 * Locking: rf->lock guards the list, rf->live, every r->users and
 * r->exited; r->lock guards r->stop for the interruptible sleep (r->stop
 * is also atomic, read in the frame callback).  Order: rf->lock, then
 * r->lock.  r->end is atomic (only its thread writes it).  Neither lock
 * is held while calling the client, the wake or FUSE.  An rsub is freed
 * by the last of its thread (on the way out) and its last put, both
 * decided under rf->lock; the thread's own wake_close() may run the last
 * put (a poll's handle reference, fs/follow.c), which only signals.
 *
 * Invariants: those of rfollow.h.
 */
#include "config.h"
#include "fs/rfollow.h"
#include "api/client.h"
#include "engine/lease.h"
#include "fs/handle.h"
#include "fs/remote.h"
#include "fs/session.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RSUB_POLL_MIN_MS 5
#define RSUB_POLL_MAX_MS 250

struct rsub {
	struct rfollow *rf;
	struct nv_stream *s;          /* a reference; NULL after fs_rfollow_stop() */
	unsigned users;               /* rf->lock */
	bool exited;                  /* rf->lock: its thread is gone */
	_Atomic uint64_t end;         /* the holder's acked end learned */
	atomic_bool stop;             /* also under lock, for the sleep */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rsub *next;            /* rf->lock: listed while users > 0 */
};

struct rfollow {
	struct nova_fs *fs;
	pthread_mutex_t lock;
	pthread_cond_t gone;          /* live dropped */
	struct rsub *head;            /* lock */
	unsigned live;                /* lock: threads running */
	bool stopped;                 /* lock: fs_rfollow_stop() ran */
};

static void rsub_free(struct rsub *r)
{
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	if (r->s)
		stream_put(r->s);
	free(r);
}

/* Under rf->lock: r's thread is to end (rf->lock, then r->lock). */
static void rsub_signal_stop(struct rsub *r)
{
	pthread_mutex_lock(&r->lock);
	atomic_store(&r->stop, true);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* The stream grew past old: tell the kernel its cached size and pages
 * past old are stale (both views).  -ENOENT: the kernel does not know
 * the inode; fine. */
static void inval_from(struct rsub *r, uint64_t old)
{
	struct fuse_session *se = r->rf->fs->se;
	fuse_ino_t ino = FS_INO_BASE + r->s->id;

	if (!se)
		return;
	(void)fuse_lowlevel_notify_inval_inode(se, ino, (off_t)old, 0);
	(void)fuse_lowlevel_notify_inval_inode(se, ino | FS_INO_FOLLOW_BIT, (off_t)old, 0);
}

/* The end moved to e: wake local follow reads, and tell the kernel its
 * cached size and pages past the old end are stale. */
static void learned(struct rsub *r, uint64_t e)
{
	uint64_t old = atomic_load(&r->end);

	if (e <= old)
		return;
	atomic_store(&r->end, e);
	inval_from(r, old); /* before the wake: a woken follower's stat sees it */
	wake_close(&r->s->wake);
}

/* Vacant: this star's view from the stream's refs (star_view_refresh(),
 * which closes the wake when the end moved).  true when it moved. */
static bool vacant_poll(struct rsub *r)
{
	uint64_t old = stream_acked_byte(r->s);
	int rc = star_view_refresh(r->rf->fs->star, r->s, STAR_VIEW_READ);

	if (rc < 0)
		nv_log(NV_DEBUG, NV_SUB_FS, "follow of vacant %s/%s: reading its refs: %s",
		       r->s->bucket, r->s->name, strerror(-rc));
	if (rc <= 0)
		return false;
	inval_from(r, old); /* after the wake: a stat racing it asks again */
	return true;
}

static int on_frame(void *arg, uint64_t off, const void *data, size_t len)
{
	struct rsub *r = arg;

	if (atomic_load(&r->stop))
		return 1;
	learned(r, data ? off + len : off);
	return 0;
}

/* The holder at has been quiet past a heartbeat (api_sub_quiet_fn): a
 * stopped or hung star keeps its socket open and silent while its lease
 * expires.  0: it still leads (wait on); 1: stopped; 2: leadership went
 * (vacant, or another star or epoch): end the subscription and look
 * again (rfollow.h invariant 5). */
static int on_quiet(void *arg, const struct lease_holder *at)
{
	struct rsub *r = arg;
	struct lease_holder h;
	int rc;

	if (atomic_load(&r->stop))
		return 1;
	rc = star_lead_check(r->rf->fs->star, r->s, &h);
	if (rc == -STAR_ENOTOWNER && !strcmp(h.star, at->star) && h.epoch == at->epoch)
		return 0;
	if (rc && rc != -ENOENT && rc != -STAR_ENOTOWNER)
		return 0; /* the metastore cannot say: the silence bound decides */
	nv_log(NV_INFO, NV_SUB_FS, "follow of %s/%s: its holder %s (lease epoch %llu) is silent "
	       "and leads it no more (%s): looking again", r->s->bucket, r->s->name, at->star,
	       (unsigned long long)at->epoch, rc == -ENOENT ? "vacant" : rc ? h.star : "this star");
	return 2;
}

/* s is marked deleted here (fs_remote_name_now() found its row gone, or
 * this mount deleted it): the subscription has nothing more to learn. */
static bool deleted(struct nv_stream *s)
{
	bool d;

	pthread_mutex_lock(&s->lock);
	d = s->deleted;
	pthread_mutex_unlock(&s->lock);
	return d;
}

/* Sleep ms unless stopped first; true when stopped. */
static bool nap(struct rsub *r, unsigned ms)
{
	struct timespec ts;
	bool stop;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&r->lock);
	while (!atomic_load(&r->stop) &&
	       pthread_cond_timedwait(&r->cond, &r->lock, &ts) != ETIMEDOUT)
		;
	stop = atomic_load(&r->stop);
	pthread_mutex_unlock(&r->lock);
	return stop;
}

static void *rsub_main(void *arg)
{
	struct rsub *r = arg;
	struct rfollow *rf = r->rf;
	struct nova_fs *fs = rf->fs;
	unsigned backoff = RSUB_POLL_MIN_MS;

	while (!atomic_load(&r->stop)) {
		struct lease_holder h;
		uint64_t local = stream_acked_byte(r->s), cur = atomic_load(&r->end);
		int rc = star_lead_check(fs->star, r->s, &h);

		if (rc == 0) { /* ours: local acks wake local readers */
			backoff = RSUB_POLL_MIN_MS;
			if (nap(r, RSUB_POLL_MAX_MS))
				break;
			continue;
		}
		if (rc == -ENOENT && vacant_poll(r))
			backoff = RSUB_POLL_MIN_MS; /* committed meanwhile: look again soon */
		else if (rc == -STAR_ENOTOWNER) {
			char now[NV_STREAM_NAME_MAX + 1];
			uint64_t at = cur > local ? cur : local;

			rc = api_client_subscribe_watch(fs->client, &h, r->s->bucket, r->s->name,
							r->s->id, at, on_frame, on_quiet, r);
			/* Not this stream under the name at load (ESTALE), or none
			 * (ENOENT): under its name now, once, by its id; deleted:
			 * marked here (local followers end), logged once. */
			if (rc == -ESTALE || rc == -ENOENT) {
				rc = fs_remote_name_now(fs->star, r->s, h.star, r->s->name, rc, now,
							sizeof(now));
				if (rc == 0)
					rc = api_client_subscribe_watch(fs->client, &h, r->s->bucket,
									now, r->s->id, at, on_frame,
									on_quiet, r);
			}
			if (rc == 1)
				break; /* stopped */
			nv_log(NV_DEBUG, NV_SUB_FS, "follow of %s/%s (%llu) at %s ended: %d",
			       r->s->bucket, r->s->name, (unsigned long long)r->s->id, h.star, rc);
			if (deleted(r->s)) {
				wake_close(&r->s->wake); /* marked already: followers see the end */
				break;
			}
			/* Moved or went away: readers look again. */
			wake_close(&r->s->wake);
			if (atomic_load(&r->end) > cur)
				backoff = RSUB_POLL_MIN_MS; /* it delivered: look again soon */
		}
		if (nap(r, backoff))
			break;
		backoff = backoff * 2 > RSUB_POLL_MAX_MS ? RSUB_POLL_MAX_MS : backoff * 2;
	}
	/* Whoever is last frees r: its last put, or here (see Locking). */
	pthread_mutex_lock(&rf->lock);
	r->exited = true;
	if (r->users == 0)
		rsub_free(r);
	rf->live--;
	pthread_cond_broadcast(&rf->gone);
	pthread_mutex_unlock(&rf->lock);
	return NULL;
}

int fs_rfollow_new(struct nova_fs *fs, struct rfollow **out)
{
	struct rfollow *rf = calloc(1, sizeof(*rf));

	if (!rf)
		return -ENOMEM;
	if (nv_cond_init_mono(&rf->gone)) {
		free(rf);
		return -ENOMEM;
	}
	rf->fs = fs;
	pthread_mutex_init(&rf->lock, NULL);
	*out = rf;
	return 0;
}

void fs_rfollow_stop(struct rfollow *rf)
{
	if (!rf)
		return;
	pthread_mutex_lock(&rf->lock);
	rf->stopped = true;
	for (struct rsub *r = rf->head; r; r = r->next)
		rsub_signal_stop(r);
	while (rf->live)
		pthread_cond_wait(&rf->gone, &rf->lock);
	/* Handles still open keep their r until their put; the streams go. */
	for (struct rsub *r = rf->head; r; r = r->next) {
		stream_put(r->s);
		r->s = NULL;
	}
	pthread_mutex_unlock(&rf->lock);
}

void fs_rfollow_free(struct rfollow *rf)
{
	if (!rf)
		return;
	while (rf->head) {
		struct rsub *r = rf->head;

		rf->head = r->next;
		rsub_free(r);
	}
	pthread_cond_destroy(&rf->gone);
	pthread_mutex_destroy(&rf->lock);
	free(rf);
}

struct rsub *fs_rfollow_get(struct rfollow *rf, struct nv_stream *s)
{
	struct rsub *r;

	if (!rf || !rf->fs->client || !rf->fs->star)
		return NULL;
	pthread_mutex_lock(&rf->lock);
	for (r = rf->head; r; r = r->next)
		if (r->s == s) {
			r->users++;
			pthread_mutex_unlock(&rf->lock);
			return r;
		}
	r = rf->stopped ? NULL : calloc(1, sizeof(*r));
	if (!r || nv_cond_init_mono(&r->cond)) {
		pthread_mutex_unlock(&rf->lock);
		free(r);
		return NULL;
	}
	r->rf = rf;
	stream_get(s);
	r->s = s;
	r->users = 1;
	atomic_init(&r->end, 0);
	atomic_init(&r->stop, false);
	pthread_mutex_init(&r->lock, NULL);
	if (pthread_create(&r->thread, NULL, rsub_main, r)) {
		pthread_mutex_unlock(&rf->lock);
		rsub_free(r);
		return NULL;
	}
	pthread_detach(r->thread);
	rf->live++;
	r->next = rf->head;
	rf->head = r;
	pthread_mutex_unlock(&rf->lock);
	return r;
}

void fs_rfollow_put(struct rfollow *rf, struct rsub *r)
{
	struct rsub **pp;
	bool exited;

	if (!r)
		return;
	pthread_mutex_lock(&rf->lock);
	if (--r->users) {
		pthread_mutex_unlock(&rf->lock);
		return;
	}
	for (pp = &rf->head; *pp != r; pp = &(*pp)->next)
		;
	*pp = r->next;
	exited = r->exited;
	if (!exited)
		rsub_signal_stop(r); /* its thread frees it on the way out */
	pthread_mutex_unlock(&rf->lock);
	if (exited)
		rsub_free(r);
}

uint64_t fs_rfollow_end(const struct rsub *r)
{
	return r ? atomic_load(&r->end) : 0;
}
