/*
 * test_wake.c - unit tests of engine/wake.c, the edge subscriptions park on.
 *
 * What is pinned (wake.h): a close fires every parked waiter exactly once
 * and later closes fire nothing more; a park with a generation captured
 * before an edge fails (-EAGAIN) so no edge is lost; callbacks run with
 * the wake's lock free, off the list, and may re-park, unpark (a no-op
 * then) or free their own waiter; unpark before the close takes a waiter
 * back and its callback never runs; and under a racing closer every
 * waiter is either unparked or fired, never both, never twice.
 */
#include "config.h"
#include "engine/wake.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

/* A test waiter: the callback counts and may act on the wake. */
struct tw {
	struct wake_waiter w; /* first: the callback casts back */
	struct wake *wake;
	atomic_int fired;
	int lock_was_free;   /* the callback could take the wake's lock */
	int unpark_in_cb;    /* wake_unpark(self) inside the callback said */
	bool repark;         /* re-park with a fresh capture from the callback */
	int repark_rc;
	struct tw *victim;   /* unpark this other waiter from the callback */
	int victim_unpark;   /* what that wake_unpark() said */
};

static void tw_fn(struct wake_waiter *w)
{
	struct tw *t = (struct tw *)w;

	atomic_fetch_add(&t->fired, 1);
	if (pthread_mutex_trylock(&t->wake->lock) == 0) {
		t->lock_was_free = 1;
		pthread_mutex_unlock(&t->wake->lock);
	}
	t->unpark_in_cb = wake_unpark(t->wake, &t->w) ? 1 : 0;
	if (t->victim)
		t->victim_unpark = wake_unpark(t->wake, &t->victim->w) ? 1 : 0;
	if (t->repark) {
		t->repark = false;
		t->repark_rc = wake_park(t->wake, wake_capture(t->wake), &t->w);
	}
}

static void tw_init(struct tw *t, struct wake *wk)
{
	*t = (struct tw){ .wake = wk };
	t->w.fn = tw_fn;
	atomic_init(&t->fired, 0);
}

/* Initialise n test waiters and park each with a fresh capture. */
static void park_all(struct wake *wk, struct tw *t, int n)
{
	for (int i = 0; i < n; i++) {
		tw_init(&t[i], wk);
		assert_int_equal(wake_park(wk, wake_capture(wk), &t[i].w), 0);
	}
}

static void test_wake_close_fires_each_once(void **state)
{
	struct wake wk;
	struct tw t[3];

	(void)state;
	wake_init(&wk);
	park_all(&wk, t, 3);
	assert_int_equal(wake_parked(&wk), 3);
	assert_int_equal(wake_close(&wk), 3);
	assert_int_equal(wake_parked(&wk), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(atomic_load(&t[i].fired), 1);
		assert_false(t[i].w.parked);
	}
	/* Nothing parked: later closes fire nobody. */
	assert_int_equal(wake_close(&wk), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(atomic_load(&t[i].fired), 1);
	wake_destroy(&wk);
}

static void test_wake_capture_before_read(void **state)
{
	struct wake wk;
	struct tw t;
	uint64_t g;

	(void)state;
	wake_init(&wk);
	tw_init(&t, &wk);
	/* The subscriber captures, reads (empty), and meanwhile an ack
	 * closes the edge: the park must fail so it reads again. */
	g = wake_capture(&wk);
	assert_int_equal(wake_close(&wk), 0);
	assert_int_equal(wake_park(&wk, g, &t.w), -EAGAIN);
	assert_int_equal(wake_parked(&wk), 0);
	assert_false(t.w.parked);
	/* The fresh capture parks, and the next edge fires it. */
	g = wake_capture(&wk);
	assert_int_equal(g, 1);
	assert_int_equal(wake_park(&wk, g, &t.w), 0);
	assert_int_equal(wake_close(&wk), 1);
	assert_int_equal(atomic_load(&t.fired), 1);
	/* A generation two edges old fails as well. */
	assert_int_equal(wake_close(&wk), 0);
	assert_int_equal(wake_park(&wk, g, &t.w), -EAGAIN);
	wake_destroy(&wk);
}

static void test_wake_callbacks_run_unlocked(void **state)
{
	struct wake wk;
	struct tw a, b;

	(void)state;
	wake_init(&wk);
	tw_init(&a, &wk);
	tw_init(&b, &wk);
	a.repark = true;
	assert_int_equal(wake_park(&wk, wake_capture(&wk), &a.w), 0);
	assert_int_equal(wake_park(&wk, wake_capture(&wk), &b.w), 0);
	assert_int_equal(wake_close(&wk), 2);
	assert_true(a.lock_was_free);
	assert_true(b.lock_was_free);
	/* Off the list before its callback: unparking itself is a no-op. */
	assert_int_equal(a.unpark_in_cb, 0);
	assert_int_equal(b.unpark_in_cb, 0);
	/* A re-park from the callback waits for the next edge, not this one. */
	assert_int_equal(a.repark_rc, 0);
	assert_int_equal(atomic_load(&a.fired), 1);
	assert_int_equal(wake_parked(&wk), 1);
	assert_int_equal(wake_close(&wk), 1);
	assert_int_equal(atomic_load(&a.fired), 2);
	assert_int_equal(atomic_load(&b.fired), 1);
	wake_destroy(&wk);
}

static void test_wake_unpark_during_wake(void **state)
{
	struct wake wk;
	struct tw t[4];

	(void)state;
	wake_init(&wk);
	for (int i = 0; i < 4; i++)
		tw_init(&t[i], &wk);
	/* Each waiter's callback tries to take another back while the close
	 * is calling them; those were detached with the rest, so the unpark
	 * says "already fired" and each callback still runs exactly once. */
	t[0].victim = &t[1];
	t[1].victim = &t[0];
	t[2].victim = &t[3];
	t[3].victim = &t[2];
	for (int i = 0; i < 4; i++)
		assert_int_equal(wake_park(&wk, wake_capture(&wk), &t[i].w), 0);
	assert_int_equal(wake_close(&wk), 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(atomic_load(&t[i].fired), 1);
		assert_int_equal(t[i].victim_unpark, 0);
	}
	wake_destroy(&wk);
}

static void test_wake_unpark_before_close(void **state)
{
	struct wake wk;
	struct tw t[3];

	(void)state;
	wake_init(&wk);
	park_all(&wk, t, 3);
	/* Take back the middle one, then the head (the last parked). */
	assert_true(wake_unpark(&wk, &t[1].w));
	assert_false(wake_unpark(&wk, &t[1].w));
	assert_true(wake_unpark(&wk, &t[2].w));
	assert_int_equal(wake_parked(&wk), 1);
	assert_int_equal(wake_close(&wk), 1);
	assert_int_equal(atomic_load(&t[0].fired), 1);
	assert_int_equal(atomic_load(&t[1].fired), 0);
	assert_int_equal(atomic_load(&t[2].fired), 0);
	assert_false(wake_unpark(&wk, &t[0].w));
	wake_destroy(&wk);
}

/* A waiter that frees itself in its callback (wake.c reads next first). */
static atomic_int freed;

static void free_fn(struct wake_waiter *w)
{
	free(w);
	atomic_fetch_add(&freed, 1);
}

static void test_wake_waiter_frees_itself(void **state)
{
	struct wake wk;

	(void)state;
	wake_init(&wk);
	atomic_store(&freed, 0);
	for (int i = 0; i < 16; i++) {
		struct wake_waiter *w = calloc(1, sizeof(*w));

		assert_non_null(w);
		w->fn = free_fn;
		assert_int_equal(wake_park(&wk, wake_capture(&wk), w), 0);
	}
	assert_int_equal(wake_close(&wk), 16);
	assert_int_equal(atomic_load(&freed), 16);
	wake_destroy(&wk);
}

/* Racing closer: each round a waiter is parked, then either the owner
 * takes it back or the closer fires it; never both, never twice. */
#define RACE_ROUNDS 20000

struct race {
	struct wake wk;
	atomic_bool stop;
};

static void *closer_main(void *arg)
{
	struct race *r = arg;

	while (!atomic_load(&r->stop))
		wake_close(&r->wk);
	return NULL;
}

/* The racing waiter's callback only counts, as its last action: once
 * fired is seen the closer no longer touches the waiter. */
struct rw {
	struct wake_waiter w; /* first */
	atomic_int fired;
};

static void rw_fn(struct wake_waiter *w)
{
	atomic_fetch_add(&((struct rw *)w)->fired, 1);
}

static void test_wake_race_unpark_or_fire(void **state)
{
	struct race r;
	struct rw t;
	pthread_t th;
	unsigned fired = 0, taken = 0, late = 0;

	(void)state;
	wake_init(&r.wk);
	atomic_init(&r.stop, false);
	assert_int_equal(pthread_create(&th, NULL, closer_main, &r), 0);
	for (int i = 0; i < RACE_ROUNDS; i++) {
		t.w = (struct wake_waiter){ .fn = rw_fn };
		atomic_store(&t.fired, 0);
		if (wake_park(&r.wk, wake_capture(&r.wk), &t.w)) {
			late++; /* an edge between capture and park */
			continue;
		}
		if (wake_unpark(&r.wk, &t.w)) {
			taken++;
			/* Taken back: its callback never runs. */
			assert_int_equal(atomic_load(&t.fired), 0);
			continue;
		}
		/* Fired: the closer calls it right after the detach. */
		while (atomic_load(&t.fired) == 0)
			sched_yield();
		fired++;
		assert_int_equal(atomic_load(&t.fired), 1);
	}
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	assert_int_equal(fired + taken + late, RACE_ROUNDS);
	assert_int_equal(wake_parked(&r.wk), 0);
	wake_destroy(&r.wk);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wake_close_fires_each_once),
		cmocka_unit_test(test_wake_capture_before_read),
		cmocka_unit_test(test_wake_callbacks_run_unlocked),
		cmocka_unit_test(test_wake_unpark_during_wake),
		cmocka_unit_test(test_wake_unpark_before_close),
		cmocka_unit_test(test_wake_waiter_frees_itself),
		cmocka_unit_test(test_wake_race_unpark_or_fire),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
