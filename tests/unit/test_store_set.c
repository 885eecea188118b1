/*
 * test_store_set.c - unit tests of bucket sets (engine/store/set.c): where
 * puts land, how reads fall through, fences everywhere, and member health:
 * a failing zone is tried last until its backoff ends, then probed, and
 * taken back when it answers.
 *
 * Members are directory stores in one mkdtemp() root; the failing zone is
 * a directory store wrapped by the fault store (fault.h) failing every
 * put and get of keys under "bad/", so the same member also answers for
 * other keys.  Waits for a backoff to end poll the member's counters (no
 * fixed sleeps).
 */
#include "config.h"

#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/store/fault.h"
#include "engine/store/set.h"
#include "engine/store/store.h"
#include "src/base/clock.h"

#define BACKOFF_NS (50 * NV_NS_PER_MS)     /* zone_comes_back awaits it */
#define BACKOFF_LONG_NS (600 * NV_NS_PER_S) /* never ends during a case */

struct fx {
	char root[64];
	struct store *a, *b; /* members (borrowed from the set) */
	struct store *set;
};

static int rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path);
}

/* Zone a (preferred): faults on "bad/" keys; zone b: plain. */
static int setup_backoff(void **state, uint64_t backoff_ns)
{
	struct fx *f = calloc(1, sizeof(*f));
	char path[128];
	struct store *m[2], *inner;
	char *zones[2] = { "a", "b" };

	if (!f)
		return -1;
	snprintf(f->root, sizeof(f->root), "/tmp/novafs-set-XXXXXX");
	if (!mkdtemp(f->root))
		return -1;
	snprintf(path, sizeof(path), "dir:%s/a", f->root);
	if (store_open(path, &inner) ||
	    fault_store_wrap(inner, "put_error=1:get_error=1:prefix=bad/", &m[0]))
		return -1;
	snprintf(path, sizeof(path), "dir:%s/b", f->root);
	if (store_open(path, &m[1]))
		return -1;
	f->a = m[0];
	f->b = m[1];
	if (store_set_new(m, zones, 2, "a", backoff_ns, &f->set))
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_backoff(state, BACKOFF_LONG_NS);
}

static int setup_short(void **state)
{
	return setup_backoff(state, BACKOFF_NS);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	store_close(f->set);
	nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static int put(struct store *s, const char *key, const char *val, unsigned flags)
{
	struct iovec iov = { (void *)val, strlen(val) };

	return store_put(s, key, &iov, 1, flags);
}

static uint64_t puts_of(struct store *s)
{
	struct store_stats st;

	store_get_stats(s, &st);
	return st.puts;
}

static uint64_t gets_of(struct store *s)
{
	struct store_stats st;

	store_get_stats(s, &st);
	return st.gets;
}

static void expect_in(struct store *s, const char *key, const char *val)
{
	char buf[64];
	size_t got = 0;

	assert_int_equal(store_get_range(s, key, 0, sizeof(buf), buf, &got), 0);
	assert_int_equal(got, strlen(val));
	assert_memory_equal(buf, val, got);
}

/* A healthy set: puts land in the location's zone only; reads find keys
 * in any zone; -ENOENT only when every zone misses. */
static void test_set_location_and_fallthrough(void **state)
{
	struct fx *f = *state;
	uint64_t size;

	assert_int_equal(put(f->set, "k/1", "one", 0), 0);
	expect_in(f->a, "k/1", "one");
	assert_int_equal(store_head(f->b, "k/1", &size), -ENOENT);
	/* A key only zone b holds (written there by a failover earlier). */
	assert_int_equal(put(f->b, "k/2", "two", 0), 0);
	expect_in(f->set, "k/2", "two");
	assert_int_equal(store_head(f->set, "k/2", &size), 0);
	assert_int_equal(size, 3);
	assert_int_equal(store_head(f->set, "k/none", &size), -ENOENT);
	/* Create-once answers come from the zone tried: no failover. */
	assert_int_equal(put(f->set, "k/1", "uno", STORE_CREATE_ONCE), -EEXIST);
	assert_int_equal(store_head(f->b, "k/1", &size), -ENOENT);
}

/* Fences go to every zone; beside an existing key, none stays. */
static void test_set_everywhere(void **state)
{
	struct fx *f = *state;
	uint64_t size;

	assert_int_equal(put(f->set, "f/1", "fence", STORE_CREATE_ONCE | STORE_EVERYWHERE), 0);
	expect_in(f->a, "f/1", "fence");
	expect_in(f->b, "f/1", "fence");
	assert_int_equal(put(f->b, "f/2", "slot", 0), 0);
	assert_int_equal(put(f->set, "f/2", "fence", STORE_CREATE_ONCE | STORE_EVERYWHERE),
			 -EEXIST);
	assert_int_equal(store_head(f->a, "f/2", &size), -ENOENT);
	expect_in(f->b, "f/2", "slot");
}

/* Zone a fails: the put lands in b, and while a's backoff lasts puts
 * and gets go to b without asking a at all. */
static void test_set_failed_zone_is_tried_last(void **state)
{
	struct fx *f = *state;

	assert_int_equal(put(f->set, "bad/1", "x", 0), 0);
	expect_in(f->b, "bad/1", "x");
	assert_int_equal(puts_of(f->a), 1);
	for (int i = 0; i < 20; i++) {
		char key[32];

		snprintf(key, sizeof(key), i % 2 ? "bad/next%d" : "good/%d", i);
		assert_int_equal(put(f->set, key, "y", 0), 0);
		expect_in(f->set, key, "y");
		expect_in(f->b, key, "y");
	}
	assert_int_equal(puts_of(f->a), 1);
	assert_int_equal(gets_of(f->a), 0);
}

/* After the backoff the next request probes zone a; when it answers,
 * puts land there again. */
static void test_set_zone_comes_back(void **state)
{
	struct fx *f = *state;
	uint64_t t0, size;
	int i = 0;

	t0 = nv_now_mono_ns(); /* before the failure starts the backoff */
	assert_int_equal(put(f->set, "bad/1", "x", 0), 0); /* a fails: down */
	assert_int_equal(puts_of(f->a), 1);
	/* Await the probe: puts of good keys go to b until a is tried again,
	 * and a answers them, so it is up from then on. */
	for (;;) {
		char key[32];

		snprintf(key, sizeof(key), "good/%d", i++);
		assert_int_equal(put(f->set, key, "z", 0), 0);
		if (store_head(f->a, key, &size) == 0)
			break;
		assert_true(nv_now_mono_ns() - t0 < 10 * NV_NS_PER_S);
		usleep(1000);
	}
	assert_true(nv_now_mono_ns() - t0 >= BACKOFF_NS);
	/* Up again: the next put goes to a first. */
	assert_int_equal(put(f->set, "good/after", "w", 0), 0);
	expect_in(f->a, "good/after", "w");
	assert_int_equal(store_head(f->b, "good/after", &size), -ENOENT);
}

/* Every zone failing: the error, not a silent success. */
static void test_set_all_zones_fail(void **state)
{
	struct fx *f = *state;
	struct store *m[1], *inner, *set;
	char path[128], *zones[1] = { "only" };

	snprintf(path, sizeof(path), "dir:%s/c", f->root);
	assert_int_equal(store_open(path, &inner), 0);
	assert_int_equal(fault_store_wrap(inner, "put_error=1:get_error=1", &m[0]), 0);
	assert_int_equal(store_set_new(m, zones, 1, NULL, BACKOFF_NS, &set), 0);
	assert_int_equal(put(set, "k", "v", 0), -EIO);
	assert_int_equal(put(set, "k", "v", 0), -EIO); /* tried though down */
	store_close(set);
}

/* store_read_copies judges copies one by one: "good" passes. */
static int judge_copy(void *arg, struct store *copy)
{
	const char *key = arg;
	char buf[16];
	size_t got;
	int rc = store_get_range(copy, key, 0, sizeof(buf), buf, &got);

	if (rc)
		return rc;
	return got == 4 && !memcmp(buf, "good", 4) ? 0 : -EBADMSG;
}

/* A bad copy in the preferred zone is read around (set.h invariant 4):
 * the good one in the other zone is used, the preferred zone starts no
 * backoff (it answered) and is still read first; a key whose every copy
 * is bad is -EBADMSG, one that is nowhere -ENOENT. */
static void test_set_read_copies(void **state)
{
	struct fx *f = *state;
	uint64_t a0;

	assert_int_equal(put(f->a, "k/torn", "go", 0), 0);
	assert_int_equal(put(f->b, "k/torn", "good", 0), 0);
	a0 = gets_of(f->a);
	assert_int_equal(store_read_copies(f->set, "k/torn", judge_copy, "k/torn"), 0);
	assert_int_equal(gets_of(f->a), a0 + 1);
	assert_int_equal(put(f->a, "k/fine", "good", 0), 0);
	assert_int_equal(store_read_copies(f->set, "k/fine", judge_copy, "k/fine"), 0);
	assert_int_equal(gets_of(f->a), a0 + 2); /* still first: no backoff */
	assert_int_equal(put(f->b, "k/fine2", "good", 0), 0);
	assert_int_equal(store_read_copies(f->set, "k/fine2", judge_copy, "k/fine2"), 0);
	assert_int_equal(put(f->a, "k/bad", "bad", 0), 0);
	assert_int_equal(put(f->b, "k/bad", "worse", 0), 0);
	assert_int_equal(store_read_copies(f->set, "k/bad", judge_copy, "k/bad"), -EBADMSG);
	assert_int_equal(store_read_copies(f->set, "k/none", judge_copy, "k/none"), -ENOENT);
	/* The set's counters are its buckets' (copy functions read members). */
	{
		struct store_stats st;

		store_get_stats(f->set, &st);
		assert_int_equal(st.gets, gets_of(f->a) + gets_of(f->b));
		assert_true(st.gets >= 7);
	}
	/* A plain store judges its one copy. */
	assert_int_equal(store_read_copies(f->b, "k/torn", judge_copy, "k/torn"), 0);
	assert_int_equal(store_read_copies(f->a, "k/torn", judge_copy, "k/torn"), -EBADMSG);
}

/* Fault specs (fault.h): malformed numbers are refused, not read as
 * something else (found by fuzzing: NaN, signs, empty values). */
static void test_fault_spec_strict(void **state)
{
	struct fx *f = *state;
	static const char *const bad[] = {
		"flip=nan", "get_error=", "put_error=-0.5", "latency_ms=-1", "latency_ms=1e3",
		"full_after=-5", "full=2", "seed= 1", "put_error", "bogus=1",
	};
	char path[128];

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct store *inner, *out = NULL;

		snprintf(path, sizeof(path), "dir:%s/spec", f->root);
		assert_int_equal(store_open(path, &inner), 0);
		if (fault_store_wrap(inner, bad[i], &out) != -EINVAL)
			fail_msg("fault spec '%s' was accepted", bad[i]);
	}
	{
		struct store *inner, *out = NULL;

		snprintf(path, sizeof(path), "dir:%s/spec", f->root);
		assert_int_equal(store_open(path, &inner), 0);
		assert_int_equal(fault_store_wrap(inner, "flip=0.5:latency_ms=0:full_after=100:seed=7",
						  &out), 0);
		store_close(out);
	}
}

/* The router (issue 11 items 6, 8): one delete request per member for a
 * batch of keys of both classes (not one per key), and a server-side
 * copy only from a source in the upload's own member (an express slot is
 * read and uploaded instead: -ENOTSUP tells the caller). */
static void test_route_batches_and_copies(void **state)
{
	struct fx *f = *state;
	char path[128];
	struct store *std, *xp, *r;
	struct store_stats a, b;
	const char *keys[6] = {
		"chains/standard/s/1/0", "chains/express/s/1/0", "chains/standard/s/1/1",
		"chains/express/s/1/1", "chains/standard/s/1/2", "chains/express/s/1/2",
	};
	struct store_mpu *mpu;
	uint64_t size;
	char *big = malloc(6u << 20);

	assert_non_null(big);
	memset(big, 'x', 6u << 20);
	snprintf(path, sizeof(path), "dir:%s/std", f->root);
	assert_int_equal(store_open(path, &std), 0);
	snprintf(path, sizeof(path), "dir:%s/xp", f->root);
	assert_int_equal(store_open(path, &xp), 0);
	assert_int_equal(store_route_new(std, xp, &r), 0);
	for (int i = 0; i < 6; i++) {
		struct iovec iov = { big, 6u << 20 };

		assert_int_equal(store_put(r, keys[i], &iov, 1, 0), 0);
	}
	assert_int_equal(store_head(xp, keys[1], &size), 0);
	assert_int_equal(store_head(std, keys[0], &size), 0);

	assert_int_equal(store_mpu_create(r, "streams/b/1/0", &mpu), 0);
	assert_int_equal(store_mpu_copy_part(mpu, 1, keys[1], 0, 5u << 20), -ENOTSUP);
	assert_int_equal(store_mpu_copy_part(mpu, 1, keys[0], 0, 5u << 20), 0);
	assert_int_equal(store_mpu_complete(mpu, STORE_CREATE_ONCE), 0);
	assert_int_equal(store_head(std, "streams/b/1/0", &size), 0);
	assert_int_equal(size, 5u << 20);

	store_get_stats(std, &a);
	store_get_stats(xp, &b);
	assert_int_equal(store_delete(r, keys, 6), 0);
	{
		struct store_stats a2, b2;

		store_get_stats(std, &a2);
		store_get_stats(xp, &b2);
		assert_int_equal(a2.deletes - a.deletes, 1);
		assert_int_equal(b2.deletes - b.deletes, 1);
	}
	for (int i = 0; i < 6; i++)
		assert_int_equal(store_head(r, keys[i], &size), -ENOENT);
	store_close(r);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_set_location_and_fallthrough, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_set_everywhere, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_failed_zone_is_tried_last, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_set_zone_comes_back, setup_short, teardown),
		cmocka_unit_test_setup_teardown(test_set_all_zones_fail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_spec_strict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_read_copies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route_batches_and_copies, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
