/*
 * sse.c - see sse.h: one producer thread and one bounded queue of
 * formatted events per subscription.
 *
 * For: the producer (producer_main(): catch_up() by reads, then ride()
 * the stream's hub as its sink, sink_deliver()), the queue (push(), the
 * content reader on_read()), and the registry's stop.  Not for: the
 * request (gw/http.c), the shared follow (gw/hub.c).
 *
 * Locking: sse->lock guards the queue, queued, next, closed, done,
 * joined, detached and why; the producer waits on sse->cond for room or
 * (joined) for the hub to let go, the reader for events on sse->cond, or
 * on the stream's bell while joined (set_joined() wakes it on both when
 * that changes), each with a timeout of at most 1 s so both see
 * reg->stopping.  The hub's thread takes
 * sse->lock inside its own lock (gw/hub.h order) and never waits on it.
 * reg->lock guards live; reg->cond signals a producer's return.  No lock is held
 * across a source call or a pool wait.
 *
 * References: the producer and the response hold one each (refs, under
 * sse->lock); the last drop frees.
 *
 * Invariants: those of sse.h.
 */
#include "config.h"
#include "gw/sse.h"
#include "gw/hub.h"
#include "src/base/clock.h"
#include "src/base/lockcheck.h"
#include "src/base/log.h"
#include "src/base/names.h"

#include <errno.h>
#include <microhttpd.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_SLICE_NS (NV_NS_PER_S)
#define STOP_WAIT_NS (10 * NV_NS_PER_S)
#define EVENT_HEAD_MAX 160
#define CATCHUP_READ (256u * 1024) /* bytes one catch-up read asks for (and takes) */
#define CATCHUP_TRIES 20           /* failed reads in a row before the error event */
#define CATCHUP_RACE_MS 10
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

struct gw_sses {
	struct gw_sse_cfg cfg;
	atomic_bool stopping;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a producer returned */
	unsigned live;       /* lock: producers running */
	struct gw_hubs *hubs; /* the live tails' shared follows */
};

/* One queued event. */
struct chunk {
	struct chunk *next;
	size_t len, sent;
	uint64_t taken; /* pool bytes (0: a heartbeat the reader made) */
	char text[];
};

struct sse {
	struct gw_sses *reg;
	char bucket[NV_BUCKET_NAME_MAX + 1];
	char stream[NV_STREAM_NAME_MAX + 1];
	uint64_t start;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct chunk *head, *tail; /* lock */
	uint64_t queued;           /* lock: bytes of text not yet sent */
	uint64_t next;             /* lock: the id of the last data event queued */
	uint64_t last_out_ns;      /* lock: when the reader last sent */
	bool closed;               /* lock: client gone or dropped */
	bool done;                 /* lock: the producer queued its last event */
	int refs;                  /* lock */
	bool joined;               /* lock: the reader waits on the bell */
	bool detached;             /* lock: the hub let go (why) */
	int why;                   /* lock */
	struct gw_hub_sink sink;   /* the hub's (gw/hub.h) */
	struct gw_hub_bell *bell;  /* the registry's, for this stream */
};

static struct nv_ratelimit rl_drop, rl_let_go;

/* ------------------------------------------------------------ the queue */

static void drain_locked(struct sse *x)
{
	while (x->head) {
		struct chunk *c = x->head;

		x->head = c->next;
		if (c->taken)
			gw_pool_give(x->reg->cfg.pool, c->taken);
		free(c);
	}
	x->tail = NULL;
	x->queued = 0;
}

static void sse_unref(struct sse *x)
{
	bool last;

	pthread_mutex_lock(&x->lock);
	last = --x->refs == 0;
	if (last)
		drain_locked(x);
	pthread_mutex_unlock(&x->lock);
	if (!last)
		return;
	pthread_cond_destroy(&x->cond);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

/* Drop the client (the producer's decision, or the library's): queued
 * budget goes back at once (sse.h invariant 2).  Caller holds x->lock. */
static void drop_locked(struct sse *x)
{
	NV_ASSERT_LOCKED(&x->lock);
	x->closed = true;
	drain_locked(x);
	pthread_cond_broadcast(&x->cond);
}

static void append_locked(struct sse *x, struct chunk *c)
{
	NV_ASSERT_LOCKED(&x->lock);
	if (x->tail)
		x->tail->next = c;
	else
		x->head = c;
	x->tail = c;
	x->queued += c->len;
}

/*
 * Queue head (hlen bytes) + body (blen bytes, base64-encoded into the
 * event when b64) + tail (tlen) as one event, and when id is not 0 make
 * it the subscription's cursor (x->next) in the same step.  wait: wait
 * for room (the client's pace) at most client_timeout_ns and for the
 * pool as long; 0, or -EPIPE: the client is gone or was dropped as too
 * slow (stop).  !wait (the hub's thread, hub.h): no waiting at all; 0,
 * -EPIPE (gone), or -ENOBUFS: no room in the queue or the pool now.
 */
static int push(struct sse *x, const char *head, size_t hlen, const void *body, size_t blen,
		bool b64, const char *tail, size_t tlen, uint64_t id, bool wait)
{
	const struct gw_sse_cfg *cfg = &x->reg->cfg;
	size_t bn = b64 ? 4 * ((blen + 2) / 3) : blen;
	uint64_t n = hlen + bn + tlen, t0 = nv_now_mono_ns();
	struct chunk *c;
	bool timed_out = false, gone, full;

	pthread_mutex_lock(&x->lock);
	while (wait && !x->closed && x->queued && x->queued + n > SSE_QUEUE_MAX && !timed_out) {
		struct timespec until = nv_mono_deadline(WAIT_SLICE_NS);

		pthread_cond_timedwait(&x->cond, &x->lock, &until);
		timed_out = nv_now_mono_ns() - t0 >= cfg->client_timeout_ns ||
			    atomic_load(&x->reg->stopping);
	}
	if (!x->closed && timed_out) {
		if (!atomic_load(&x->reg->stopping))
			nv_log_ratelimited(&rl_drop, NV_WARN, NV_SUB_API, "gateway: %s/%s: events client "
				   "dropped: it took nothing for %llu s", x->bucket, x->stream,
				   (unsigned long long)(cfg->client_timeout_ns / NV_NS_PER_S));
		drop_locked(x);
	}
	gone = x->closed;
	full = x->queued && x->queued + n > SSE_QUEUE_MAX;
	pthread_mutex_unlock(&x->lock);
	if (gone)
		return -EPIPE;
	if (!wait && full)
		return -ENOBUFS;
	if (gw_pool_take(cfg->pool, n, wait ? cfg->client_timeout_ns : 0))
		return wait ? -EPIPE : -ENOBUFS; /* saturated this long: shed this client */
	c = malloc(sizeof(*c) + n + 1); /* EVP_EncodeBlock() ends with a NUL */
	if (!c) {
		gw_pool_give(cfg->pool, n);
		return -EPIPE;
	}
	c->next = NULL;
	c->len = n;
	c->sent = 0;
	c->taken = n;
	memcpy(c->text, head, hlen);
	if (b64)
		EVP_EncodeBlock((unsigned char *)c->text + hlen, body, (int)blen);
	else
		memcpy(c->text + hlen, body, blen);
	memcpy(c->text + hlen + bn, tail, tlen);
	pthread_mutex_lock(&x->lock);
	if (x->closed) {
		pthread_mutex_unlock(&x->lock);
		gw_pool_give(cfg->pool, n);
		free(c);
		return -EPIPE;
	}
	append_locked(x, c);
	if (id)
		x->next = id;
	pthread_mutex_unlock(&x->lock);
	/* Woken after the unlock: the reader does not wake into a held lock.
	 * Joined (!wait, the hub's thread): the hub rings the stream's bell
	 * once the range is on every queue, one wake-up for all its readers. */
	if (wait)
		pthread_cond_broadcast(&x->cond);
	return 0;
}

static int push_text(struct sse *x, const char *text)
{
	return push(x, text, strlen(text), "", 0, false, "", 0, 0, true);
}

/* ------------------------------------------------------------ the producer */

/* One data event for [off, off+len) (see push() on wait). */
static int data_event(struct sse *x, uint64_t off, const void *data, size_t len, bool wait)
{
	char head[EVENT_HEAD_MAX];
	int n = snprintf(head, sizeof(head), "event: data\nid: %llu\ndata: {\"offset\":%llu,"
			 "\"length\":%zu,\"base64\":\"", (unsigned long long)(off + len),
			 (unsigned long long)off, len);

	return push(x, head, (size_t)n, data, len, true, "\"}\n\n", 4, off + len, wait);
}

static struct sse *sse_of(struct gw_hub_sink *k)
{
	return (struct sse *)(void *)((char *)k - offsetof(struct sse, sink));
}

/* The hub's thread, its lock held (hub.h): never waits. */
static int sink_deliver(struct gw_hub_sink *k, uint64_t off, const void *data, size_t len)
{
	return data_event(sse_of(k), off, data, len, false);
}

static void sink_gone(struct gw_hub_sink *k, int why)
{
	struct sse *x = sse_of(k);

	pthread_mutex_lock(&x->lock);
	x->detached = true;
	x->why = why;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
}

static bool worth_retrying(int rc)
{
	return rc == -EAGAIN || rc == -EHOSTUNREACH;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * Catch-up: read from *cur to the acked end (gw_read(), CATCHUP_READ at
 * a time under the pool) and queue each answer as one event, waiting at
 * the client's pace.  0 at the end, -EPIPE (gone, dropped, stopping), or
 * the source's -errno after CATCHUP_TRIES failures without a byte.
 */
static int catch_up(struct sse *x, uint64_t *cur)
{
	const struct gw_sse_cfg *cfg = &x->reg->cfg;
	unsigned fails = 0, backoff = BACKOFF_MIN_MS;
	char *buf;
	int rc;

	if (gw_pool_take(cfg->pool, CATCHUP_READ, cfg->client_timeout_ns))
		return -EPIPE;
	if (!(buf = malloc(CATCHUP_READ))) {
		gw_pool_give(cfg->pool, CATCHUP_READ);
		return -EPIPE;
	}
	for (;;) {
		size_t got = 0;
		bool gone;

		pthread_mutex_lock(&x->lock);
		gone = x->closed;
		pthread_mutex_unlock(&x->lock);
		if (gone || atomic_load(&x->reg->stopping)) {
			rc = -EPIPE;
			break;
		}
		rc = gw_read(cfg->src, x->bucket, x->stream, *cur, buf, CATCHUP_READ, &got);
		if (rc == -ERANGE || (rc == 0 && got == 0)) {
			rc = 0; /* at the acked end: the hub's from here */
			break;
		}
		if (rc == 0) {
			if ((rc = data_event(x, *cur, buf, got, true)))
				break;
			*cur += got;
			fails = 0;
			backoff = BACKOFF_MIN_MS;
			continue;
		}
		if (!worth_retrying(rc) || ++fails >= CATCHUP_TRIES)
			break;
		sleep_ms(backoff);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	free(buf);
	gw_pool_give(cfg->pool, CATCHUP_READ);
	return rc;
}

/* The reader's wait moves between x->cond and the bell: each wakes the
 * reader on the one it may be waiting on. */
static void set_joined(struct sse *x, bool joined)
{
	pthread_mutex_lock(&x->lock);
	x->joined = joined;
	pthread_mutex_unlock(&x->lock);
	pthread_cond_broadcast(&x->cond);
	gw_hub_bell_ring(x->bell);
}

/* Attached: wait until the hub detaches x, the client goes, or stop.
 * Returns gone's why, or -EPIPE. */
static int ride(struct sse *x)
{
	int why;

	pthread_mutex_lock(&x->lock);
	while (!x->detached && !x->closed && !atomic_load(&x->reg->stopping)) {
		struct timespec until = nv_mono_deadline(WAIT_SLICE_NS);

		pthread_cond_timedwait(&x->cond, &x->lock, &until);
	}
	why = x->closed || !x->detached ? -EPIPE : x->why;
	x->detached = false;
	pthread_mutex_unlock(&x->lock);
	gw_hub_leave(x->reg->hubs, &x->sink);
	set_joined(x, false);
	return why;
}

/*
 * The subscription: catch up by itself, then attach to the stream's hub
 * at the acked end; detached for want of room (-ENOBUFS), catch up again
 * from its cursor.  The hub past the cursor (-EAGAIN): read on to it.
 */
static int follow(struct sse *x)
{
	struct gw_sses *reg = x->reg;
	uint64_t cur = x->start, hub_at = 0, last_try = UINT64_MAX;
	int rc;

	for (;;) {
		if ((rc = catch_up(x, &cur)))
			return rc;
		set_joined(x, true); /* before the first range can come */
		rc = gw_hub_attach(reg->hubs, x->bucket, x->stream, cur, &x->sink, &hub_at);
		if (rc)
			set_joined(x, false);
		if (rc == -EAGAIN) {
			if (cur == last_try)
				sleep_ms(CATCHUP_RACE_MS); /* the hub is past what reads see yet */
			last_try = cur;
			continue;
		}
		if (rc)
			return -EPIPE; /* stopping, or ENOMEM */
		rc = ride(x);
		pthread_mutex_lock(&x->lock);
		cur = x->next;
		pthread_mutex_unlock(&x->lock);
		if (rc != -ENOBUFS)
			return rc == -ESHUTDOWN ? -EPIPE : rc;
		nv_log_ratelimited(&rl_let_go, NV_INFO, NV_SUB_API, "gateway: %s/%s: events reader "
				   "let go by the shared follow at byte %llu (no room in its queue or "
				   "the pool): catching up by itself", x->bucket, x->stream,
				   (unsigned long long)cur);
		last_try = UINT64_MAX;
	}
}

static void *producer_main(void *arg)
{
	struct sse *x = arg;
	struct gw_sses *reg = x->reg;
	int rc;

	rc = push_text(x, "retry: 1000\n\n");
	if (rc == 0)
		rc = follow(x);
	if (rc == -ENOENT) {
		push_text(x, "event: end\ndata: {\"reason\":\"deleted\"}\n\n");
	} else if (rc < 0 && rc != -EPIPE) {
		char line[128];

		nv_log(NV_WARN, NV_SUB_API, "gateway: %s/%s: events end: %s", x->bucket, x->stream,
		       strerror(-rc));
		snprintf(line, sizeof(line), "event: error\ndata: {\"error\":\"%s\"}\n\n",
			 rc == -EHOSTUNREACH ? "unreachable" : rc == -EAGAIN ? "unavailable"
			 : "internal");
		push_text(x, line);
	}
	pthread_mutex_lock(&x->lock);
	x->done = true;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	sse_unref(x);
	pthread_mutex_lock(&reg->lock);
	reg->live--;
	pthread_cond_broadcast(&reg->cond);
	pthread_mutex_unlock(&reg->lock);
	return NULL;
}

/* ------------------------------------------------------------ the reader */

/* A heartbeat chunk (no budget: a few bytes, one at a time).  Caller
 * holds x->lock; the queue is empty. */
static void heartbeat_locked(struct sse *x)
{
	char text[96];
	int n = snprintf(text, sizeof(text), "event: heartbeat\ndata: {\"next\":%llu}\n\n",
			 (unsigned long long)x->next);
	struct chunk *c = malloc(sizeof(*c) + (size_t)n);

	NV_ASSERT_LOCKED(&x->lock);
	if (!c)
		return;
	c->next = NULL;
	c->len = (size_t)n;
	c->sent = 0;
	c->taken = 0;
	memcpy(c->text, text, (size_t)n);
	append_locked(x, c);
}

static ssize_t on_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *x = cls;
	const uint64_t hb = x->reg->cfg.heartbeat_ns;
	uint64_t seen;
	ssize_t n = 0;

	(void)pos;
	seen = gw_hub_bell_count(x->bell); /* before looking: no ring is lost */
	pthread_mutex_lock(&x->lock);
	while (!x->head && !x->done && !x->closed && !atomic_load(&x->reg->stopping)) {
		uint64_t now = nv_now_mono_ns(), due = x->last_out_ns + hb;
		uint64_t wait = due - now < WAIT_SLICE_NS ? due - now : WAIT_SLICE_NS;
		struct timespec until;

		if (now >= due) {
			heartbeat_locked(x);
			break;
		}
		if (x->joined) { /* the hub fills the queue and rings the bell */
			pthread_mutex_unlock(&x->lock);
			gw_hub_bell_wait(x->bell, seen, wait);
			seen = gw_hub_bell_count(x->bell);
			pthread_mutex_lock(&x->lock);
			continue;
		}
		until = nv_mono_deadline(wait);
		pthread_cond_timedwait(&x->cond, &x->lock, &until);
	}
	if (x->closed || atomic_load(&x->reg->stopping)) {
		n = MHD_CONTENT_READER_END_WITH_ERROR;
	} else if (!x->head) {
		n = MHD_CONTENT_READER_END_OF_STREAM; /* done, all sent */
	} else {
		struct chunk *c = x->head;
		size_t k = c->len - c->sent < max ? c->len - c->sent : max;

		memcpy(buf, c->text + c->sent, k);
		c->sent += k;
		x->queued -= k;
		n = (ssize_t)k;
		if (c->sent == c->len) {
			x->head = c->next;
			if (!x->head)
				x->tail = NULL;
			if (c->taken)
				gw_pool_give(x->reg->cfg.pool, c->taken);
			free(c);
			pthread_cond_broadcast(&x->cond); /* room for the producer */
		}
		x->last_out_ns = nv_now_mono_ns();
	}
	pthread_mutex_unlock(&x->lock);
	return n;
}

static void on_free(void *cls)
{
	struct sse *x = cls;

	pthread_mutex_lock(&x->lock);
	drop_locked(x);
	pthread_mutex_unlock(&x->lock);
	sse_unref(x);
}

/* ------------------------------------------------------------ registry */

struct MHD_Response *gw_sse_response(struct gw_sses *reg, const char *bucket,
				     const char *stream, uint64_t off)
{
	struct sse *x = calloc(1, sizeof(*x));
	struct MHD_Response *resp;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (!x || atomic_load(&reg->stopping)) {
		free(x);
		return NULL;
	}
	x->reg = reg;
	snprintf(x->bucket, sizeof(x->bucket), "%s", bucket);
	snprintf(x->stream, sizeof(x->stream), "%s", stream);
	x->start = x->next = off;
	x->last_out_ns = nv_now_mono_ns();
	x->refs = 2; /* the producer's and the response's */
	x->sink.deliver = sink_deliver;
	x->sink.gone = sink_gone;
	x->bell = gw_hub_bell_of(reg->hubs, bucket, stream);
	pthread_mutex_init(&x->lock, NULL);
	if (nv_cond_init_mono(&x->cond)) {
		pthread_mutex_destroy(&x->lock);
		free(x);
		return NULL;
	}
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, on_read, x, on_free);
	if (!resp) {
		x->refs = 1;
		sse_unref(x);
		return NULL;
	}
	pthread_mutex_lock(&reg->lock);
	reg->live++;
	pthread_mutex_unlock(&reg->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, producer_main, x);
	pthread_attr_destroy(&attr);
	if (rc) {
		pthread_mutex_lock(&reg->lock);
		reg->live--;
		pthread_mutex_unlock(&reg->lock);
		pthread_mutex_lock(&x->lock);
		x->done = true;
		pthread_mutex_unlock(&x->lock);
		sse_unref(x); /* the producer's; the response's goes with resp */
		MHD_destroy_response(resp);
		return NULL;
	}
	return resp;
}

int gw_sses_new(const struct gw_sse_cfg *cfg, struct gw_sses **out)
{
	struct gw_sses *reg = calloc(1, sizeof(*reg));

	if (!reg)
		return -ENOMEM;
	reg->cfg = *cfg;
	atomic_init(&reg->stopping, false);
	if (gw_hubs_new(cfg->src, &reg->hubs)) {
		free(reg);
		return -ENOMEM;
	}
	pthread_mutex_init(&reg->lock, NULL);
	if (nv_cond_init_mono(&reg->cond)) {
		pthread_mutex_destroy(&reg->lock);
		gw_hubs_free(reg->hubs);
		free(reg);
		return -ENOMEM;
	}
	*out = reg;
	return 0;
}

void gw_sses_stop(struct gw_sses *reg)
{
	struct timespec until = nv_mono_deadline(STOP_WAIT_NS);
	int rc = 0;

	atomic_store(&reg->stopping, true);
	gw_hubs_stop(reg->hubs); /* detaches every attached producer at once */
	pthread_mutex_lock(&reg->lock);
	while (reg->live && rc == 0)
		rc = pthread_cond_timedwait(&reg->cond, &reg->lock, &until);
	if (reg->live)
		nv_log(NV_WARN, NV_SUB_API, "gateway: %u events producers still running at stop",
		       reg->live);
	pthread_mutex_unlock(&reg->lock);
}

unsigned gw_sses_live(struct gw_sses *reg)
{
	unsigned n;

	pthread_mutex_lock(&reg->lock);
	n = reg->live;
	pthread_mutex_unlock(&reg->lock);
	return n;
}

unsigned gw_sses_follows(struct gw_sses *reg)
{
	return gw_hubs_live(reg->hubs);
}

void gw_sses_free(struct gw_sses *reg)
{
	if (!reg || gw_sses_live(reg) || gw_hubs_live(reg->hubs))
		return; /* a producer outlived the stop: leave it its registry */
	gw_hubs_free(reg->hubs);
	pthread_cond_destroy(&reg->cond);
	pthread_mutex_destroy(&reg->lock);
	free(reg);
}
