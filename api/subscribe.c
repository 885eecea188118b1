/*
 * subscribe.c - see subscribe.h: pushing a stream's acked ranges down a
 * chunked response.
 *
 * For: the content callback of one subscription (sub_next()), which the
 * server library calls on the connection's own thread (one thread per
 * connection, api/server.c), so it may block while parked.  Not for:
 * routing, authentication, the first NOT_OWNER check (api/server.c).
 *
 * Locking: subs->lock guards the list of live subscriptions;
 * subs->stopping is atomic (set before the wake-up round, read by a
 * parked sub under its own lock, so no wake-up is lost); a sub's
 * sub->lock guards its woken flag.  Order: subs->lock, then a sub->lock;
 * a wake's own lock and a stream's s->lock are taken with neither held,
 * and the wake callback (on_wake()) takes only sub->lock.
 *
 * Invariants: those of subscribe.h.
 */
#include "config.h"
#include "api/subscribe.h"
#include "api/wire.h"
#include "engine/lease.h"
#include "engine/star.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes the library asks for per callback (a page of frames). */
#define SUB_BLOCK (64u * 1024)
/* Room kept in front of a data frame's bytes for its JSON line. */
#define SUB_HDR 64

struct sub {
	struct api_subs *subs;
	struct nv_stream *s;      /* a reference */
	struct reader *rd;        /* may be NULL (ENOMEM: reads work without) */
	uint64_t off;             /* the next byte to push */
	bool ended;               /* the last frame went out */
	uint64_t poll_ns;         /* a vacant stream's next poll (0: not polling) */
	struct wake_waiter ww;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool woken;               /* sub->lock */
	struct sub *next, *prev;  /* subs->lock */
};

struct api_subs {
	struct star *st;
	uint64_t heartbeat_ns;
	pthread_mutex_t lock;
	pthread_cond_t gone;      /* a subscription was freed */
	atomic_bool stopping;     /* see Locking */
	struct sub *head;         /* lock */
};

/* How often a parked subscription looks whether its star still leads
 * the stream (subscribe.h invariant 2): nothing fires the stream's wake
 * when the lease leaves (a handoff, a release, a lost registry lease),
 * and a subscription parked until its heartbeat kept its follower on a
 * star that no longer leads for up to heartbeat_ns.  While the lease is
 * cached the look costs no metastore call (engine/lease.h invariant 5). */
#define SUB_LEAD_RECHECK_NS (100 * NV_NS_PER_MS)

/* A vacant stream's poll of its refs (subscribe.h invariant 5, the
 * read-path seed): from 5 ms, doubling on each empty page, to 250 ms. */
#define SUB_POLL_MIN_NS (5 * NV_NS_PER_MS)
#define SUB_POLL_MAX_NS (250 * NV_NS_PER_MS)

/* How long api_subs_stop() lets the last frames reach their clients
 * before the server library closes the sockets. */
#define SUB_DRAIN_NS (2 * NV_NS_PER_S)

int api_subs_new(struct star *st, uint64_t heartbeat_ns, struct api_subs **out)
{
	struct api_subs *subs = calloc(1, sizeof(*subs));

	if (!subs)
		return -ENOMEM;
	subs->st = st;
	subs->heartbeat_ns = heartbeat_ns;
	if (nv_cond_init_mono(&subs->gone)) {
		free(subs);
		return -ENOMEM;
	}
	pthread_mutex_init(&subs->lock, NULL);
	*out = subs;
	return 0;
}

static void sub_wake(struct sub *u)
{
	pthread_mutex_lock(&u->lock);
	u->woken = true;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
}

void api_subs_stop(struct api_subs *subs)
{
	struct timespec until = nv_mono_deadline(SUB_DRAIN_NS);

	atomic_store(&subs->stopping, true);
	pthread_mutex_lock(&subs->lock);
	for (struct sub *u = subs->head; u; u = u->next)
		sub_wake(u);
	/* Their last frame ("shutting_down") goes out, the response ends and
	 * the library frees it (sub_free()); a client that reads nothing
	 * is cut off by the library's stop after SUB_DRAIN_NS. */
	while (subs->head)
		if (pthread_cond_timedwait(&subs->gone, &subs->lock, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&subs->lock);
}

void api_subs_free(struct api_subs *subs)
{
	if (!subs)
		return;
	if (subs->head)
		nv_log(NV_ERR, NV_SUB_API, "star API: a subscription outlived its server");
	pthread_cond_destroy(&subs->gone);
	pthread_mutex_destroy(&subs->lock);
	free(subs);
}

static bool subs_stopping(struct api_subs *subs)
{
	return atomic_load(&subs->stopping);
}

static bool stream_deleted(struct nv_stream *s)
{
	bool v;

	pthread_mutex_lock(&s->lock);
	v = s->deleted;
	pthread_mutex_unlock(&s->lock);
	return v;
}

/* The wake fired (no lock held, wake.h). */
static void on_wake(struct wake_waiter *w)
{
	struct sub *u = (struct sub *)((char *)w - offsetof(struct sub, ww));

	sub_wake(u);
}

/* The last frame: an error line into buf.  Its length. */
static ssize_t end_frame(struct sub *u, const char *line, char *buf, size_t max)
{
	size_t n = strlen(line);

	u->ended = true;
	if (n + 1 > max)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	memcpy(buf, line, n);
	buf[n] = '\n';
	return (ssize_t)(n + 1);
}

static ssize_t end_error(struct sub *u, const char *code, const char *detail, char *buf,
			 size_t max)
{
	char line[API_LINE_MAX];

	if (api_fmt_error(code, detail, line, sizeof(line)))
		snprintf(line, sizeof(line), "{\"error\":\"%s\"}", code);
	return end_frame(u, line, buf, max);
}

/* Park until the wake of gen fires, the server stops, the next lease
 * look is due (after max_ns: SUB_LEAD_RECHECK_NS, or a vacant stream's
 * poll) or the heartbeat (at beat_ns on CLOCK_MONOTONIC) is.  true:
 * woken or a look is due (look and read again); false: the heartbeat is
 * due. */
static bool park(struct sub *u, uint64_t gen, uint64_t beat_ns, uint64_t max_ns)
{
	uint64_t now = nv_now_mono_ns();
	struct timespec until;
	bool woken;

	if (now >= beat_ns)
		return false;
	u->woken = false;
	u->ww.fn = on_wake;
	if (wake_park(&u->s->wake, gen, &u->ww))
		return true; /* the edge passed since the capture: read again */
	until = nv_mono_deadline(beat_ns - now < max_ns ? beat_ns - now : max_ns);
	pthread_mutex_lock(&u->lock);
	while (!u->woken && !subs_stopping(u->subs)) {
		if (pthread_cond_timedwait(&u->cond, &u->lock, &until) == ETIMEDOUT)
			break;
	}
	woken = u->woken || subs_stopping(u->subs) || nv_now_mono_ns() < beat_ns;
	pthread_mutex_unlock(&u->lock);
	(void)wake_unpark(&u->s->wake, &u->ww); /* false: it fired meanwhile */
	return woken;
}

/* One data frame: the bytes at u->off, read into buf past SUB_HDR and
 * moved behind their line.  > 0: its length; 0: nothing to read (end of
 * the acked bytes); < 0: -errno. */
static ssize_t data_frame(struct sub *u, char *buf, size_t max)
{
	char line[SUB_HDR];
	enum read_tier tier;
	size_t got = 0;
	int rc, n;

	rc = star_read(u->subs->st, u->s, u->rd, u->off, buf + SUB_HDR, max - SUB_HDR, &got,
		       &tier);
	if (rc)
		return rc;
	if (got == 0)
		return 0;
	n = snprintf(line, sizeof(line), "{\"offset\":%llu,\"length\":%zu}\n",
		     (unsigned long long)u->off, got);
	memmove(buf + n, buf + SUB_HDR, got);
	memcpy(buf, line, (size_t)n);
	u->off += got;
	return (ssize_t)(n + got);
}

/* The content callback (libmicrohttpd): the next frames into buf. */
static ssize_t sub_next(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sub *u = cls;
	struct lease_holder h;
	char line[API_LINE_MAX];
	uint64_t beat_ns = nv_now_mono_ns() + u->subs->heartbeat_ns;

	(void)pos;
	if (u->ended)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (max < SUB_HDR + API_LINE_MAX)
		return end_error(u, "internal", "frame buffer too small", buf, max);
	for (;;) {
		uint64_t gen;
		ssize_t n;
		bool vacant;
		int rc;

		if (subs_stopping(u->subs))
			return end_error(u, "shutting_down", "the star is stopping", buf, max);
		/* Never star_lead(): a subscription must not take a stream
		 * (subscribe.h invariant 2). */
		rc = star_lead_check(u->subs->st, u->s, &h);
		if (rc == -STAR_ENOTOWNER && !api_fmt_not_owner(&h, line, sizeof(line)))
			return end_frame(u, line, buf, max);
		if (rc && rc != -ENOENT)
			return end_error(u, "unavailable", strerror(-rc), buf, max);
		vacant = rc == -ENOENT;
		if (!vacant)
			u->poll_ns = 0;
		else if (!u->poll_ns)
			u->poll_ns = SUB_POLL_MIN_NS;
		gen = wake_capture(&u->s->wake);
		/* Vacant: committed state is everything, from the refs
		 * (invariant 5); a failed look is the next poll's to retry. */
		if (vacant)
			(void)star_view_refresh(u->subs->st, u->s, STAR_VIEW_READ);
		n = data_frame(u, buf, max);
		if (n > 0) {
			if (vacant)
				u->poll_ns = SUB_POLL_MIN_NS;
			return n;
		}
		if (n < 0)
			return end_error(u, n == -ENOENT ? "not_found" : "read_failed",
					 strerror((int)-n), buf, max);
		if (stream_deleted(u->s)) /* its wake closed at the deletion */
			return end_error(u, "not_found", "the stream was deleted", buf, max);
		if (!park(u, gen, beat_ns, vacant ? u->poll_ns : SUB_LEAD_RECHECK_NS)) {
			int k = snprintf(buf, max, "{\"heartbeat\":true,\"end\":%llu}\n",
					 (unsigned long long)stream_acked_byte(u->s));

			return k;
		}
		if (vacant)
			u->poll_ns = u->poll_ns * 2 > SUB_POLL_MAX_NS ? SUB_POLL_MAX_NS
				     : u->poll_ns * 2;
	}
}

static void sub_free(void *cls)
{
	struct sub *u = cls;
	struct api_subs *subs = u->subs;

	pthread_mutex_lock(&subs->lock);
	if (u->prev)
		u->prev->next = u->next;
	else
		subs->head = u->next;
	if (u->next)
		u->next->prev = u->prev;
	NV_STAT_ADD(star_stats(subs->st), subscriptions, (uint64_t)-1);
	pthread_cond_broadcast(&subs->gone);
	pthread_mutex_unlock(&subs->lock);
	reader_free(u->rd);
	stream_put(u->s);
	pthread_cond_destroy(&u->cond);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

struct MHD_Response *api_subscribe_response(struct api_subs *subs, struct nv_stream *s,
					    uint64_t off)
{
	struct MHD_Response *resp;
	struct sub *u = calloc(1, sizeof(*u));

	if (!u) {
		stream_put(s);
		return NULL;
	}
	if (nv_cond_init_mono(&u->cond)) {
		free(u);
		stream_put(s);
		return NULL;
	}
	u->subs = subs;
	u->s = s;
	u->off = off;
	u->rd = star_reader_new(subs->st, s);
	pthread_mutex_init(&u->lock, NULL);
	pthread_mutex_lock(&subs->lock);
	u->next = subs->head;
	if (subs->head)
		subs->head->prev = u;
	subs->head = u;
	NV_STAT_ADD(star_stats(subs->st), subscriptions, 1);
	NV_STAT_ADD(star_stats(subs->st), subscribes, 1);
	pthread_mutex_unlock(&subs->lock);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SUB_BLOCK, sub_next, u,
						 sub_free);
	if (!resp)
		sub_free(u);
	return resp;
}
