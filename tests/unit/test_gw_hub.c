/*
 * test_gw_hub.c - unit tests for the Gateway's live-tail fan-out
 * (gw/hub.c) over a scripted in-memory source (one growing stream whose
 * follow pushes each new range and a heartbeat every few ms, as a star
 * does) and recording sinks.
 *
 * Pins gw/hub.h: one follow for every sink of a stream (invariant 2),
 * each sink's bytes contiguous from its cursor and none twice, an attach
 * behind the hub answered -EAGAIN with where the hub is, an attach ahead
 * of it trimmed (invariant 1), a sink that refuses a range detached at
 * once and never called again while the others go on (invariant 3), the
 * follow's end (a deleted stream) handed to every sink after its bytes,
 * the last leave closing the hub and its follow, the stop, and the
 * stream's bell rung after a range (and a wait on it timing out).
 */
#include "config.h"
#include "gw/hub.h"
#include "gw/source.h"
#include "src/base/clock.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define STREAM_MAX 65536
#define BEAT_NS (5 * NV_NS_PER_MS)
#define AWAIT_NS (10 * NV_NS_PER_S)

/* ------------------------------------------------------------ the source */

struct live_src {
	struct gw_source src; /* first */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char data[STREAM_MAX];
	uint64_t end;    /* lock */
	bool deleted;    /* lock */
	unsigned follows, running; /* lock: follows opened, running now */
};

static struct live_src *live_of(struct gw_source *s)
{
	return (struct live_src *)(void *)s;
}

static int live_follow(struct gw_source *s, const char *b, const char *n, uint64_t off,
		       api_sub_fn fn, void *arg)
{
	struct live_src *l = live_of(s);
	uint64_t cur = off;
	int rc = 0;

	(void)b, (void)n;
	pthread_mutex_lock(&l->lock);
	l->follows++;
	l->running++;
	pthread_cond_broadcast(&l->cond);
	while (rc == 0) {
		uint64_t end;
		bool del;

		if (l->end == cur && !l->deleted) {
			struct timespec until = nv_mono_deadline(BEAT_NS);

			pthread_cond_timedwait(&l->cond, &l->lock, &until);
		}
		end = l->end;
		del = l->deleted;
		pthread_mutex_unlock(&l->lock);
		if (end > cur) {
			rc = fn(arg, cur, l->data + cur, end - cur); /* append-only: stable */
			cur = end;
		} else if (del) {
			rc = -ENOENT;
		} else {
			rc = fn(arg, end, NULL, 0); /* a heartbeat */
		}
		pthread_mutex_lock(&l->lock);
	}
	l->running--;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	return rc;
}

static const struct gw_source_ops live_ops = { .follow = live_follow };

static void live_init(struct live_src *l)
{
	memset(l, 0, sizeof(*l));
	l->src.ops = &live_ops;
	pthread_mutex_init(&l->lock, NULL);
	assert_int_equal(nv_cond_init_mono(&l->cond), 0);
}

static void live_append(struct live_src *l, size_t n)
{
	pthread_mutex_lock(&l->lock);
	assert_true(l->end + n <= STREAM_MAX);
	for (size_t i = 0; i < n; i++)
		l->data[l->end + i] = (char)((l->end + i) * 7 + 3);
	l->end += n;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static void live_delete(struct live_src *l)
{
	pthread_mutex_lock(&l->lock);
	l->deleted = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

/* Wait until the source has `running` follows running now. */
static void await_running(struct live_src *l, unsigned running)
{
	struct timespec until = nv_mono_deadline(AWAIT_NS);

	pthread_mutex_lock(&l->lock);
	while (l->running != running)
		if (pthread_cond_timedwait(&l->cond, &l->lock, &until))
			break;
	assert_int_equal(l->running, running);
	pthread_mutex_unlock(&l->lock);
}

/* Wait until hs runs n follows (its thread returns after the source's
 * follow did: polled, 1 ms apart, at most AWAIT_NS). */
static void await_hubs(struct gw_hubs *hs, unsigned n)
{
	uint64_t t0 = nv_now_mono_ns();
	struct timespec ms = { 0, 1000000L };

	while (gw_hubs_live(hs) != n && nv_now_mono_ns() - t0 < AWAIT_NS)
		nanosleep(&ms, NULL);
	assert_int_equal(gw_hubs_live(hs), n);
}

/* ------------------------------------------------------------ a sink */

struct rsink {
	struct gw_hub_sink k; /* first */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct live_src *l;
	uint64_t from, to;    /* lock: the bytes received, [from, to) */
	bool refuse;          /* lock: answer -ENOBUFS from now on */
	bool gone;            /* lock */
	int why;              /* lock */
	unsigned calls;       /* lock */
	bool bad;             /* lock: a gap, a repeat, wrong bytes */
};

static struct rsink *rs_of(struct gw_hub_sink *k)
{
	return (struct rsink *)(void *)k;
}

static int rs_deliver(struct gw_hub_sink *k, uint64_t off, const void *data, size_t len)
{
	struct rsink *r = rs_of(k);
	int rc = 0;

	pthread_mutex_lock(&r->lock);
	r->calls++;
	if (r->gone || off != r->to || memcmp(data, r->l->data + off, len))
		r->bad = true;
	if (r->refuse)
		rc = -ENOBUFS;
	else
		r->to = off + len;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return rc;
}

static void rs_gone(struct gw_hub_sink *k, int why)
{
	struct rsink *r = rs_of(k);

	pthread_mutex_lock(&r->lock);
	r->gone = true;
	r->why = why;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void rs_init(struct rsink *r, struct live_src *l, uint64_t from)
{
	memset(r, 0, sizeof(*r));
	r->k.deliver = rs_deliver;
	r->k.gone = rs_gone;
	r->l = l;
	r->from = r->to = from;
	pthread_mutex_init(&r->lock, NULL);
	assert_int_equal(nv_cond_init_mono(&r->cond), 0);
}

/* r starts again at byte from (after its leave). */
static void rs_reset(struct rsink *r, uint64_t from)
{
	pthread_mutex_lock(&r->lock);
	r->from = r->to = from;
	r->refuse = r->gone = r->bad = false;
	r->why = 0;
	pthread_mutex_unlock(&r->lock);
}

/* Wait until r received up to `to` (or was detached): true if it did. */
static bool await_to(struct rsink *r, uint64_t to)
{
	struct timespec until = nv_mono_deadline(AWAIT_NS);
	bool ok;

	pthread_mutex_lock(&r->lock);
	while (r->to < to && !r->gone)
		if (pthread_cond_timedwait(&r->cond, &r->lock, &until))
			break;
	ok = r->to == to && !r->bad;
	pthread_mutex_unlock(&r->lock);
	return ok;
}

static bool await_gone(struct rsink *r, int why)
{
	struct timespec until = nv_mono_deadline(AWAIT_NS);
	bool ok;

	pthread_mutex_lock(&r->lock);
	while (!r->gone)
		if (pthread_cond_timedwait(&r->cond, &r->lock, &until))
			break;
	ok = r->gone && r->why == why;
	pthread_mutex_unlock(&r->lock);
	return ok;
}

static unsigned calls_of(struct rsink *r)
{
	unsigned n;

	pthread_mutex_lock(&r->lock);
	n = r->calls;
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* ------------------------------------------------------------ tests */

static void test_hub_one_follow_for_all(void **state)
{
	struct live_src l;
	struct gw_hubs *hs;
	struct rsink a, b, c, late, ahead, again;
	uint64_t next = 0;

	(void)state;
	live_init(&l);
	assert_int_equal(gw_hubs_new(&l.src, &hs), 0);
	rs_init(&a, &l, 0);
	rs_init(&b, &l, 0);
	rs_init(&c, &l, 0);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", 0, &a.k, &next), 0);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", 0, &b.k, &next), 0);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", 0, &c.k, &next), 0);
	for (int i = 0; i < 20; i++)
		live_append(&l, 100 + (size_t)i);
	assert_true(await_to(&a, l.end));
	assert_true(await_to(&b, l.end));
	assert_true(await_to(&c, l.end));
	assert_int_equal(l.follows, 1); /* invariant 2: one follow for the three */
	assert_int_equal(gw_hubs_live(hs), 1);

	/* Behind the hub: -EAGAIN and where it is; at it: attached. */
	rs_init(&late, &l, 0);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", 0, &late.k, &next), -EAGAIN);
	assert_int_equal(next, l.end);
	rs_reset(&late, next);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", next, &late.k, &next), 0);
	/* Ahead of it (a read saw more than the hub yet): trimmed to its cursor. */
	rs_init(&ahead, &l, l.end + 50);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", l.end + 50, &ahead.k, &next), 0);
	live_append(&l, 200);
	assert_true(await_to(&a, l.end));
	assert_true(await_to(&late, l.end));
	assert_true(await_to(&ahead, l.end));
	assert_int_equal(ahead.from, l.end - 150);
	assert_int_equal(l.follows, 1);

	/* Another stream is another follow. */
	rs_init(&again, &l, 0);
	assert_int_equal(gw_hub_attach(hs, "logs", "t", l.end, &again.k, &next), 0);
	await_running(&l, 2);
	gw_hub_leave(hs, &again.k);
	await_running(&l, 1);

	/* The last leave closes the hub; a new attach makes a new one. */
	gw_hub_leave(hs, &a.k);
	gw_hub_leave(hs, &b.k);
	gw_hub_leave(hs, &c.k);
	gw_hub_leave(hs, &late.k);
	gw_hub_leave(hs, &ahead.k);
	await_running(&l, 0);
	await_hubs(hs, 0);
	rs_reset(&again, l.end);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", l.end, &again.k, &next), 0);
	live_append(&l, 10);
	assert_true(await_to(&again, l.end));
	assert_int_equal(l.follows, 3); /* s, t, s again */
	gw_hub_leave(hs, &again.k);
	gw_hubs_stop(hs);
	gw_hubs_free(hs);
}

static void test_hub_slow_sink_detached(void **state)
{
	struct live_src l;
	struct gw_hubs *hs;
	struct rsink fast, slow;
	uint64_t next = 0, cut;
	unsigned calls;

	(void)state;
	live_init(&l);
	assert_int_equal(gw_hubs_new(&l.src, &hs), 0);
	rs_init(&fast, &l, 0);
	rs_init(&slow, &l, 0);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", 0, &fast.k, &next), 0);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", 0, &slow.k, &next), 0);
	live_append(&l, 300);
	assert_true(await_to(&slow, 300));
	pthread_mutex_lock(&slow.lock);
	slow.refuse = true; /* its queue is full */
	pthread_mutex_unlock(&slow.lock);
	live_append(&l, 300);
	assert_true(await_gone(&slow, -ENOBUFS));
	calls = calls_of(&slow);
	cut = slow.to;
	assert_int_equal(cut, 300); /* it keeps its cursor: the refused range is not its */
	for (int i = 0; i < 10; i++)
		live_append(&l, 50);
	assert_true(await_to(&fast, l.end)); /* the others go on */
	assert_int_equal(calls_of(&slow), calls); /* invariant 3: never called again */
	/* It catches up by itself and comes back at the hub's byte. */
	gw_hub_leave(hs, &slow.k);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", cut, &slow.k, &next), -EAGAIN);
	assert_int_equal(next, l.end);
	rs_reset(&slow, next);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", next, &slow.k, &next), 0);
	live_append(&l, 70);
	assert_true(await_to(&slow, l.end));
	assert_true(await_to(&fast, l.end));
	assert_int_equal(l.follows, 1);
	gw_hub_leave(hs, &slow.k);
	gw_hub_leave(hs, &fast.k);
	await_running(&l, 0);
	gw_hubs_stop(hs);
	gw_hubs_free(hs);
}

static void test_hub_end_and_stop(void **state)
{
	struct live_src l;
	struct gw_hubs *hs;
	struct rsink a, b;
	uint64_t next = 0;

	(void)state;
	live_init(&l);
	assert_int_equal(gw_hubs_new(&l.src, &hs), 0);
	rs_init(&a, &l, 0);
	rs_init(&b, &l, 0);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", 0, &a.k, &next), 0);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", 0, &b.k, &next), 0);
	live_append(&l, 123);
	live_delete(&l);
	assert_true(await_gone(&a, -ENOENT));
	assert_true(await_gone(&b, -ENOENT));
	assert_int_equal(a.to, 123); /* every byte before the end */
	assert_int_equal(b.to, 123);
	gw_hub_leave(hs, &a.k);
	gw_hub_leave(hs, &b.k);
	await_running(&l, 0);

	/* The stop detaches whoever is attached and refuses the next. */
	pthread_mutex_lock(&l.lock);
	l.deleted = false;
	pthread_mutex_unlock(&l.lock);
	rs_reset(&a, l.end);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", l.end, &a.k, &next), 0);
	await_running(&l, 1);
	gw_hubs_stop(hs);
	assert_true(await_gone(&a, -ESHUTDOWN));
	assert_int_equal(gw_hubs_live(hs), 0);
	rs_reset(&b, l.end);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", l.end, &b.k, &next), -ESHUTDOWN);
	gw_hub_leave(hs, &a.k);
	gw_hubs_free(hs);
}

static void test_hub_rings_the_bell(void **state)
{
	struct live_src l;
	struct gw_hubs *hs;
	struct gw_hub_bell *bell;
	struct rsink a;
	uint64_t next = 0, seen, t0;

	(void)state;
	live_init(&l);
	assert_int_equal(gw_hubs_new(&l.src, &hs), 0);
	bell = gw_hub_bell_of(hs, "logs", "s");
	assert_ptr_equal(bell, gw_hub_bell_of(hs, "logs", "s"));
	seen = gw_hub_bell_count(bell);
	t0 = nv_now_mono_ns();
	gw_hub_bell_wait(bell, seen, 20 * NV_NS_PER_MS); /* nobody rings: the timeout */
	assert_true(nv_now_mono_ns() - t0 >= 20 * NV_NS_PER_MS);
	assert_int_equal(gw_hub_bell_count(bell), seen);
	rs_init(&a, &l, 0);
	assert_int_equal(gw_hub_attach(hs, "logs", "s", 0, &a.k, &next), 0);
	live_append(&l, 40);
	assert_true(await_to(&a, 40));
	gw_hub_bell_wait(bell, seen, AWAIT_NS); /* rung once the range was queued */
	assert_true(gw_hub_bell_count(bell) > seen);
	gw_hub_leave(hs, &a.k);
	gw_hubs_stop(hs);
	gw_hubs_free(hs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hub_one_follow_for_all),
		cmocka_unit_test(test_hub_slow_sink_detached),
		cmocka_unit_test(test_hub_end_and_stop),
		cmocka_unit_test(test_hub_rings_the_bell),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
