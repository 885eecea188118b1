/*
 * test_backlog.c - unit tests of engine/backlog.c.
 *
 * Blocking is shown without sleeps: a taker thread is known to be parked
 * once the backlog_waits counter (incremented under the backlog's lock
 * just before the wait) reaches the expected value; from then on the
 * only thing that can let it through is a give or a shutdown, which the
 * test controls.  A short bounded wait then confirms it did not return
 * early, and a condition variable with a deadline waits for it to return
 * once released.  Taker threads never call cmocka assertions.
 */
#include "config.h"
#include "engine/backlog.h"
#include "src/base/clock.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define WAIT_MS 30000 /* "it must happen": generous for valgrind */
#define STILL_MS 50   /* "it must not happen": how long we watch */

/* Shared by the takers of one test. */
struct board {
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

struct taker {
	struct backlog *b;
	uint64_t n;
	struct board *bd;
	pthread_t th;
	bool done; /* bd->lock */
	int rc;    /* bd->lock */
};

static void board_init(struct board *o)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&o->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&o->cond, &ca);
	pthread_condattr_destroy(&ca);
}

static void board_destroy(struct board *o)
{
	pthread_cond_destroy(&o->cond);
	pthread_mutex_destroy(&o->lock);
}

static void *taker_main(void *arg)
{
	struct taker *t = arg;
	int rc = backlog_take(t->b, t->n);

	pthread_mutex_lock(&t->bd->lock);
	t->rc = rc;
	t->done = true;
	pthread_cond_broadcast(&t->bd->cond);
	pthread_mutex_unlock(&t->bd->lock);
	return NULL;
}

static void taker_start(struct taker *t, struct backlog *b, uint64_t n, struct board *o)
{
	memset(t, 0, sizeof(*t));
	t->b = b;
	t->n = n;
	t->bd = o;
	assert_int_equal(pthread_create(&t->th, NULL, taker_main, t), 0);
}

/* Wait up to ms for t to return.  true when it did. */
static bool taker_wait(struct taker *t, unsigned ms)
{
	struct timespec ts = nv_mono_deadline((uint64_t)ms * NV_NS_PER_MS);
	bool done;

	pthread_mutex_lock(&t->bd->lock);
	while (!t->done)
		if (pthread_cond_timedwait(&t->bd->cond, &t->bd->lock, &ts) == ETIMEDOUT)
			break;
	done = t->done;
	pthread_mutex_unlock(&t->bd->lock);
	return done;
}

static void taker_join(struct taker *t)
{
	assert_int_equal(pthread_join(t->th, NULL), 0);
}

/* Wait (bounded) until the backlog_waits counter reaches n: that many
 * takers are parked (or were). */
static void wait_waits(struct nv_stats *st, uint64_t n)
{
	uint64_t end = nv_now_mono_ns() + WAIT_MS * NV_NS_PER_MS;
	struct timespec ms = { 0, 1000000L };

	while (NV_STAT_GET(st, backlog_waits) < n) {
		if (nv_now_mono_ns() > end)
			fail_msg("backlog_waits stayed at %llu, expected %llu",
				 (unsigned long long)NV_STAT_GET(st, backlog_waits),
				 (unsigned long long)n);
		nanosleep(&ms, NULL);
	}
}

static void test_backlog_accounting(void **state)
{
	struct nv_stats st;
	struct backlog *b;

	(void)state;
	memset(&st, 0, sizeof(st));
	b = backlog_new(1000, 0, &st);
	assert_non_null(b);
	assert_int_equal(backlog_budget(b), 1000);
	assert_int_equal(backlog_used(b), 0);
	assert_int_equal(backlog_take(b, 100), 0);
	assert_int_equal(backlog_take(b, 200), 0);
	assert_int_equal(backlog_used(b), 300);
	backlog_give(b, 100);
	assert_int_equal(backlog_used(b), 200);
	/* Exactly the budget fits. */
	assert_int_equal(backlog_take(b, 800), 0);
	assert_int_equal(backlog_used(b), 1000);
	backlog_give(b, 1000);
	assert_int_equal(backlog_used(b), 0);
	/* A zero take is free. */
	assert_int_equal(backlog_take(b, 0), 0);
	assert_int_equal(backlog_used(b), 0);
	/* Nothing ever waited. */
	assert_int_equal(NV_STAT_GET(&st, backlog_waits), 0);
	backlog_free(b);
	backlog_free(NULL);

	/* stats may be NULL. */
	b = backlog_new(10, 0, NULL);
	assert_non_null(b);
	assert_int_equal(backlog_take(b, 10), 0);
	backlog_give(b, 10);
	backlog_free(b);
}

static void test_backlog_blocks_until_give(void **state)
{
	struct nv_stats st;
	struct board o;
	struct taker t;
	struct backlog *b;

	(void)state;
	memset(&st, 0, sizeof(st));
	board_init(&o);
	b = backlog_new(1000, 0, &st);
	assert_non_null(b);
	assert_int_equal(backlog_take(b, 800), 0);

	taker_start(&t, b, 300, &o); /* 800 + 300 > 1000 */
	wait_waits(&st, 1);
	assert_false(taker_wait(&t, STILL_MS));
	assert_int_equal(backlog_used(b), 800);

	/* Giving back too little is not enough. */
	backlog_give(b, 50);
	assert_false(taker_wait(&t, STILL_MS));
	assert_int_equal(backlog_used(b), 750);

	/* Enough: 650 + 300 <= 1000. */
	backlog_give(b, 100);
	assert_true(taker_wait(&t, WAIT_MS));
	assert_int_equal(t.rc, 0);
	assert_int_equal(backlog_used(b), 950);
	taker_join(&t);
	assert_int_equal(NV_STAT_GET(&st, backlog_waits), 1);
	backlog_give(b, 950);
	backlog_free(b);
	board_destroy(&o);
}

static void test_backlog_fifo_fairness(void **state)
{
	struct nv_stats st;
	struct board o;
	struct taker big, small[3];
	struct backlog *b;

	(void)state;
	memset(&st, 0, sizeof(st));
	board_init(&o);
	b = backlog_new(1000, 0, &st);
	assert_non_null(b);
	assert_int_equal(backlog_take(b, 900), 0);

	/* The big request arrives first and must wait for 600. */
	taker_start(&big, b, 600, &o);
	wait_waits(&st, 1);
	/* Small requests that would fit right now (900 + 50 <= 1000) arrive
	 * later: they queue behind the big one instead of overtaking it. */
	for (int i = 0; i < 3; i++) {
		taker_start(&small[i], b, 50, &o);
		wait_waits(&st, (uint64_t)i + 2);
	}
	assert_false(taker_wait(&small[0], STILL_MS));
	assert_int_equal(backlog_used(b), 900);

	/* Free room, but not for the big one: 500 + 600 > 1000.  Nobody may
	 * go: the smalls would fit but must not overtake. */
	backlog_give(b, 400);
	assert_false(taker_wait(&big, STILL_MS));
	assert_false(taker_wait(&small[2], STILL_MS));
	assert_int_equal(backlog_used(b), 500);

	/* Room for exactly the big one: 400 + 600 == 1000.  It goes; the
	 * smalls, which would have fitted all along, still wait. */
	backlog_give(b, 100);
	assert_true(taker_wait(&big, WAIT_MS));
	taker_join(&big);
	assert_int_equal(big.rc, 0);
	assert_int_equal(backlog_used(b), 1000);
	for (int i = 0; i < 3; i++)
		assert_false(taker_wait(&small[i], STILL_MS / 3 + 1));

	/* Room for the smalls. */
	backlog_give(b, 150);
	for (int i = 0; i < 3; i++) {
		assert_true(taker_wait(&small[i], WAIT_MS));
		taker_join(&small[i]);
		assert_int_equal(small[i].rc, 0);
	}
	assert_int_equal(backlog_used(b), 1000);
	assert_int_equal(NV_STAT_GET(&st, backlog_waits), 4);
	backlog_give(b, 1000);
	backlog_free(b);
	board_destroy(&o);
}

static void test_backlog_oversize_admitted_when_empty(void **state)
{
	struct nv_stats st;
	struct board o;
	struct taker t, u;
	struct backlog *b;

	(void)state;
	memset(&st, 0, sizeof(st));
	board_init(&o);
	b = backlog_new(100, 0, &st);
	assert_non_null(b);

	/* Empty: a request larger than the whole budget goes through (on a
	 * thread, so a regression fails here instead of hanging). */
	taker_start(&t, b, 1000, &o);
	if (!taker_wait(&t, WAIT_MS))
		fail_msg("an oversize take on an empty backlog blocked");
	taker_join(&t);
	assert_int_equal(t.rc, 0);
	assert_int_equal(backlog_used(b), 1000);
	assert_int_equal(NV_STAT_GET(&st, backlog_waits), 0);

	/* Over budget now: even one token waits. */
	taker_start(&t, b, 1, &o);
	wait_waits(&st, 1);
	assert_false(taker_wait(&t, STILL_MS));
	backlog_give(b, 1000);
	assert_true(taker_wait(&t, WAIT_MS));
	assert_int_equal(t.rc, 0);
	taker_join(&t);

	/* Not empty: an oversize request waits until used drops to 0. */
	taker_start(&u, b, 500, &o);
	wait_waits(&st, 2);
	assert_false(taker_wait(&u, STILL_MS));
	backlog_give(b, 1);
	assert_true(taker_wait(&u, WAIT_MS));
	assert_int_equal(u.rc, 0);
	taker_join(&u);
	assert_int_equal(backlog_used(b), 500);
	backlog_give(b, 500);
	backlog_free(b);
	board_destroy(&o);
}

static void test_backlog_shutdown_wakes_waiters(void **state)
{
	struct nv_stats st;
	struct board o;
	struct taker t[3];
	struct backlog *b;

	(void)state;
	memset(&st, 0, sizeof(st));
	board_init(&o);
	b = backlog_new(100, 0, &st);
	assert_non_null(b);
	assert_int_equal(backlog_take(b, 100), 0);
	for (int i = 0; i < 3; i++) {
		taker_start(&t[i], b, 10, &o);
		wait_waits(&st, (uint64_t)i + 1);
	}
	assert_false(taker_wait(&t[0], STILL_MS));

	backlog_shutdown(b);
	for (int i = 0; i < 3; i++) {
		assert_true(taker_wait(&t[i], WAIT_MS));
		taker_join(&t[i]);
		assert_int_equal(t[i].rc, -ESHUTDOWN);
	}
	/* Failed takes took nothing. */
	assert_int_equal(backlog_used(b), 100);
	backlog_give(b, 100); /* gives still work */
	assert_int_equal(backlog_used(b), 0);
	/* Later takes fail at once, even ones that would fit. */
	assert_int_equal(backlog_take(b, 1), -ESHUTDOWN);
	assert_int_equal(backlog_used(b), 0);
	backlog_free(b);
	board_destroy(&o);
}

/* The wait bound (backlog_wait_s): a take that cannot get its tokens in
 * time fails with -ETIMEDOUT, takes nothing and leaves the queue, so a
 * later take is not stuck behind it (the old ticket queue would have
 * waited for the abandoned ticket forever). */
static void test_backlog_wait_bound(void **state)
{
	struct nv_stats st;
	struct board o;
	struct taker a, c;
	struct backlog *b;

	(void)state;
	memset(&st, 0, sizeof(st));
	board_init(&o);
	b = backlog_new(100, 200 * NV_NS_PER_MS, &st);
	assert_non_null(b);
	assert_int_equal(backlog_take(b, 50), 0);
	/* a cannot fit (50 + 60 > 100); c would fit but queues behind it. */
	taker_start(&a, b, 60, &o);
	wait_waits(&st, 1);
	taker_start(&c, b, 60, &o);
	wait_waits(&st, 2);
	assert_true(taker_wait(&a, WAIT_MS));
	assert_true(taker_wait(&c, WAIT_MS));
	taker_join(&a);
	taker_join(&c);
	assert_int_equal(a.rc, -ETIMEDOUT);
	assert_int_equal(c.rc, -ETIMEDOUT);
	assert_int_equal(NV_STAT_GET(&st, backlog_timeouts), 2);
	assert_int_equal(backlog_used(b), 50); /* nothing taken */
	/* The queue is empty again: a take that fits goes at once. */
	assert_int_equal(backlog_take(b, 40), 0);
	assert_int_equal(NV_STAT_GET(&st, backlog_waits), 2);
	backlog_give(b, 90);
	backlog_free(b);
	/* A waiter released by a give before the bound passes does not fail
	 * (a bound far longer than the test, so load cannot make it pass). */
	b = backlog_new(100, (uint64_t)WAIT_MS * 10 * NV_NS_PER_MS, &st);
	assert_non_null(b);
	assert_int_equal(backlog_take(b, 90), 0);
	taker_start(&a, b, 60, &o);
	wait_waits(&st, 3);
	backlog_give(b, 90);
	assert_true(taker_wait(&a, WAIT_MS));
	taker_join(&a);
	assert_int_equal(a.rc, 0);
	assert_int_equal(backlog_used(b), 60);
	backlog_give(b, 60);
	backlog_free(b);
	board_destroy(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backlog_accounting),
		cmocka_unit_test(test_backlog_blocks_until_give),
		cmocka_unit_test(test_backlog_fifo_fairness),
		cmocka_unit_test(test_backlog_oversize_admitted_when_empty),
		cmocka_unit_test(test_backlog_wait_bound),
		cmocka_unit_test(test_backlog_shutdown_wakes_waiters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
