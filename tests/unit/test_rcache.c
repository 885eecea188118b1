/*
 * test_rcache.c - unit tests of the read cache (engine/rcache.c).
 *
 * The cache is single-flight with waiters: these cases pin the hit, the
 * shared load, a failed load (not cached), the budget, and an entry that
 * is evicted while threads that waited for its load have not yet woken
 * (they must find it alive, or find it gone; never freed under them).
 */
#include "config.h"
#include "engine/rcache.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static struct rc_blob *blob_of(size_t len, uint8_t fill)
{
	struct rc_blob *b = rc_blob_new(len, 0);

	assert_non_null(b);
	memset(b->data, fill, len);
	return b;
}

/* The blob pool: a freed chunk-sized blob's memory is handed to the next
 * blob of about its size (no fresh pages for a sequential read), not to
 * one of less than half its size nor to a small one; at most 8 are kept;
 * rcache_free() empties it. */
static void test_rcache_blob_pool(void **state)
{
	struct rc_blob *a, *b, *many[10], *again[10];
	void *pa;
	int reused = 0;

	(void)state;
	rcache_free(NULL); /* an empty pool to start from */
	a = rc_blob_new(300u << 10, 16);
	assert_non_null(a);
	memset(a->data, 0xab, a->len);
	pa = a;
	rc_blob_unref(a);
	/* Less than half its size: not this one. */
	b = rc_blob_new(100u << 10, 0);
	assert_ptr_not_equal(b, pa);
	rc_blob_unref(b); /* pooled too */
	/* About its size: the same memory, with this blob's own layout. */
	a = rc_blob_new((300u << 10) - 64, 8);
	assert_ptr_equal(a, pa);
	assert_int_equal(a->len, (300u << 10) - 64);
	assert_int_equal(a->nrec, 8);
	assert_ptr_equal(a->rec_off, (uint32_t *)(a + 1));
	assert_ptr_equal(a->data, (uint8_t *)(a + 1) + 8 * sizeof(uint32_t));
	assert_int_equal(atomic_load(&a->refs), 1);
	rc_blob_unref(a);
	/* Small blobs (footers) are never pooled: one freed between is not
	 * one of the eight below. */
	b = rc_blob_new(1000, 0);
	assert_int_equal(b->cap, sizeof(*b) + 1000);
	rc_blob_unref(b);
	rcache_free(NULL);
	/* Ten freed, at most eight kept. */
	for (int i = 0; i < 10; i++)
		assert_non_null(many[i] = rc_blob_new(512u << 10, 0));
	for (int i = 0; i < 10; i++)
		rc_blob_unref(many[i]);
	for (int i = 0; i < 10; i++) {
		struct rc_blob *c = rc_blob_new(512u << 10, 0);

		for (int j = 0; j < 10; j++)
			reused += c == many[j];
		again[i] = c;
	}
	assert_int_equal(reused, 8);
	for (int i = 0; i < 10; i++)
		rc_blob_unref(again[i]);
	rcache_free(NULL);
}

static void test_rcache_hit_after_fill(void **state)
{
	struct rcache *rc = rcache_new(1 << 20);
	struct rc_entry *e = NULL;
	struct rc_blob *b = NULL;

	(void)state;
	assert_int_equal(rcache_get(rc, "k", 0, &b, &e), 1);
	rcache_fill(rc, e, blob_of(100, 7), 0);
	assert_int_equal(rcache_get(rc, "k", 0, &b, &e), 0);
	assert_int_equal(b->len, 100);
	assert_int_equal(b->data[99], 7);
	rc_blob_unref(b);
	assert_int_equal(rcache_peek(rc, "k", 0, &b), 0);
	rc_blob_unref(b);
	assert_int_equal(rcache_peek(rc, "k", 1, &b), -ENOENT);
	rcache_free(rc);
}

static void test_rcache_failed_load_not_cached(void **state)
{
	struct rcache *rc = rcache_new(1 << 20);
	struct rc_entry *e = NULL;
	struct rc_blob *b = NULL;

	(void)state;
	assert_int_equal(rcache_get(rc, "k", 0, &b, &e), 1);
	rcache_fill(rc, e, NULL, -EIO);
	assert_int_equal(rcache_peek(rc, "k", 0, &b), -ENOENT);
	assert_int_equal(rcache_get(rc, "k", 0, &b, &e), 1); /* the next reader loads */
	rcache_fill(rc, e, blob_of(10, 1), 0);
	assert_int_equal(rcache_peek(rc, "k", 0, &b), 0);
	rc_blob_unref(b);
	rcache_free(rc);
}

static void test_rcache_budget_evicts_lru(void **state)
{
	struct rcache *rc = rcache_new(3000);
	struct rc_entry *e = NULL;
	struct rc_blob *b = NULL;

	(void)state;
	for (uint64_t off = 0; off < 10; off++) {
		assert_int_equal(rcache_get(rc, "k", off, &b, &e), 1);
		rcache_fill(rc, e, blob_of(1000, (uint8_t)off), 0);
		assert_true(rcache_bytes(rc) <= 3000);
	}
	assert_int_equal(rcache_peek(rc, "k", 0, &b), -ENOENT); /* oldest went */
	assert_int_equal(rcache_peek(rc, "k", 9, &b), 0);
	rc_blob_unref(b);
	rcache_free(rc);
}

/*
 * Readers of a few keys on several threads with a budget that holds about
 * one entry: every fill evicts, often an entry whose waiters were woken
 * by its fill but have not yet run.  Each reader checks the bytes it got
 * (the key's fill byte).  A cache that frees an entry with waiters still
 * on it is caught here by ASan (the sanitizer build) and valgrind
 * (make memcheck), and often by the byte check alone.
 */
#define STRESS_THREADS 6
#define STRESS_ROUNDS 3000
#define STRESS_KEYS 4

struct stress {
	struct rcache *rc;
	int id;
	int bad;
};

static void *stress_main(void *arg)
{
	struct stress *s = arg;
	unsigned seed = (unsigned)s->id * 7919u + 1;

	for (int i = 0; i < STRESS_ROUNDS; i++) {
		uint64_t off = (uint64_t)(rand_r(&seed) % STRESS_KEYS);
		struct rc_entry *e = NULL;
		struct rc_blob *b = NULL;
		int rc = rcache_get(s->rc, "obj", off, &b, &e);

		if (rc == 1) {
			rcache_fill(s->rc, e, blob_of(4096, (uint8_t)(off + 1)), 0);
			continue;
		}
		if (rc == -ENOBUFS || rc == -ENOMEM)
			continue;
		if (rc != 0 || b->len != 4096 || b->data[4095] != (uint8_t)(off + 1))
			s->bad++;
		if (rc == 0)
			rc_blob_unref(b);
	}
	return NULL;
}

static void test_rcache_evict_while_waiters_wake(void **state)
{
	struct rcache *rc = rcache_new(4096 + 512); /* about one entry */
	pthread_t th[STRESS_THREADS];
	struct stress st[STRESS_THREADS];

	(void)state;
	for (int i = 0; i < STRESS_THREADS; i++) {
		st[i] = (struct stress){ .rc = rc, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, stress_main, &st[i]), 0);
	}
	for (int i = 0; i < STRESS_THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(st[i].bad, 0);
	}
	{
		/* No waiters now: one more fill brings the cache within its
		 * budget (invariant 2a lets it overshoot only for entries with
		 * waiters). */
		struct rc_entry *e = NULL;
		struct rc_blob *b = NULL;

		assert_int_equal(rcache_get(rc, "other", 0, &b, &e), 1);
		rcache_fill(rc, e, blob_of(4096, 9), 0);
		assert_true(rcache_bytes(rc) <= 4096 + 512);
	}
	rcache_free(rc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rcache_blob_pool),
		cmocka_unit_test(test_rcache_hit_after_fill),
		cmocka_unit_test(test_rcache_failed_load_not_cached),
		cmocka_unit_test(test_rcache_budget_evicts_lru),
		cmocka_unit_test(test_rcache_evict_while_waiters_wake),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
