/*
 * test_trim.c - unit tests of engine/trim.c: trim-check (slot retirement
 * by cursor arithmetic after the read grace) and the reclamation of
 * trimmed history (span refs with their byte twins, settled objects via
 * the reclaim queue).
 *
 * Streams are written by the real chain into the fake store, absorbed
 * into a real SQLite metastore and settled by the real settle
 * (tests/unit/engine_fixture.h), one record per slot and per batch.
 * Time is passed in, never slept: the read grace is crossed by calling
 * with a later now_ns.
 */
#include "config.h"
#include "tests/unit/engine_fixture.h"
#include "tests/unit/fake_store.h"
#include "engine/settle.h"
#include "engine/trim.h"
#include "meta/cursors.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "src/base/clock.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define GRACE (10 * NV_NS_PER_S)

struct tt {
	struct efx *f;
	struct fetch_cache *fc;
	struct settle_cfg scfg;
	struct trim_cfg cfg;
};

static void tt_start(struct efx *f, struct tt *t)
{
	memset(t, 0, sizeof(*t));
	t->f = f;
	t->fc = efx_start_settle(f, &t->scfg);
	t->cfg.store = f->store;
	t->cfg.kv = f->kv;
	t->cfg.stats = &f->stats;
	t->cfg.read_grace_ns = GRACE;
}

/* Settle at now (which must change something). */
static void tt_settle(struct tt *t, uint64_t now)
{
	struct meta_chain c = efx_chain_row(t->f);

	assert_int_equal(settle_chain(&t->scfg, &c, now, NULL), 1);
}

/* Every absorbed marker ripe, no age cap reached (efx_settle_cfg()). */
static uint64_t soon(void)
{
	return nv_now_wall_ns() + 10 * 3600 * NV_NS_PER_S;
}

/* Every marker ripe, even one a resolve re-ripened at birth + the
 * settle's age cap. */
#define NOW_ALL (UINT64_MAX / 4 * 3)

static int tt_trim(struct tt *t, uint64_t now)
{
	return trim_chain(&t->cfg, t->f->o.cls, EFX_STAR, t->f->row.epoch, now);
}

static bool slot_exists(struct tt *t, uint64_t slot)
{
	char key[CHAIN_KEY_MAX];

	return fake_store_exists(t->f->fs, efx_slot_key(t->f, slot, key));
}

static void expect_cursors(struct tt *t, uint64_t trimmed, uint64_t rewritten, uint64_t target)
{
	struct meta_cursors cur;

	assert_int_equal(meta_cursors_get(t->f->kv, t->f->o.cls, EFX_STAR, t->f->row.epoch, &cur,
					  NULL), 0);
	assert_int_equal(cur.trimmed, trimmed);
	assert_int_equal(cur.rewritten, rewritten);
	assert_int_equal(cur.grace_target, target);
}

struct first_rows {
	uint64_t first[32];
	uint32_t nobjs[32];
	uint8_t kind[32];
	unsigned n;
};

static int rows_fn(void *arg, const struct meta_ref *r)
{
	struct first_rows *fr = arg;

	if (fr->n == 32)
		return -E2BIG;
	fr->first[fr->n] = r->first_seq;
	fr->nobjs[fr->n] = r->nobjs;
	fr->kind[fr->n] = r->kind;
	fr->n++;
	return 0;
}

static void get_rows(struct tt *t, uint64_t id, struct first_rows *fr)
{
	fr->n = 0;
	assert_int_equal(meta_ref_list(t->f->kv, id, 0, 0, rows_fn, fr), 0);
}

/* ===================================================== trim-check */

/* Slots go only in [trimmed, rewritten), where rewritten stops at the
 * first standing marker, and only once the read grace has passed since
 * rewritten reached them; a re-run deletes nothing more. */
static void test_trim_check_window_and_grace(void **state)
{
	struct tt t;
	struct nv_stream *a, *b;
	uint64_t t0 = 1000 * NV_NS_PER_S, t1;

	tt_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	efx_write_absorb(t.f, a, 0, 4, 1000); /* slots 0..3 */
	efx_write_absorb(t.f, b, 0, 2, 10);   /* slots 4, 5 */
	assert_int_equal(efx_chain_row(t.f).checkpoint, 6);
	t.scfg.trigger_bytes = 500; /* a settles, b stays residue */
	tt_settle(&t, soon());
	assert_int_equal(efx_count_space(t.f->kv, "mrk"), 2);

	/* rewritten reaches the first marker (slot 4); the grace starts. */
	assert_int_equal(tt_trim(&t, t0), 1);
	expect_cursors(&t, 0, 4, 4);
	for (uint64_t s = 0; s < 6; s++)
		assert_true(slot_exists(&t, s));

	/* Just before the grace ends: nothing. */
	fake_store_reset_calls(t.f->fs);
	assert_int_equal(tt_trim(&t, t0 + GRACE - 1), 0);
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_DEL, NULL), 0);
	for (uint64_t s = 0; s < 6; s++)
		assert_true(slot_exists(&t, s));

	/* The grace has passed: [0, 4) goes, 4 and 5 stay. */
	assert_int_equal(tt_trim(&t, t0 + GRACE), 1);
	expect_cursors(&t, 4, 4, 4);
	for (uint64_t s = 0; s < 4; s++)
		assert_false(slot_exists(&t, s));
	assert_true(slot_exists(&t, 4));
	assert_true(slot_exists(&t, 5));
	assert_int_equal(NV_STAT_GET(&t.f->stats, slots_deleted), 4);

	/* Idempotent: nothing more to do. */
	fake_store_reset_calls(t.f->fs);
	assert_int_equal(tt_trim(&t, t0 + 5 * GRACE), 0);
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_DEL, NULL), 0);
	expect_cursors(&t, 4, 4, 4);

	/* b settles too: rewritten reaches the checkpoint, a new grace. */
	t.scfg.trigger_bytes = 1;
	tt_settle(&t, NOW_ALL);
	assert_int_equal(efx_count_space(t.f->kv, "mrk"), 0);
	t1 = t0 + 6 * GRACE;
	assert_int_equal(tt_trim(&t, t1), 1);
	expect_cursors(&t, 4, 6, 6);
	assert_true(slot_exists(&t, 4));
	assert_int_equal(tt_trim(&t, t1 + GRACE), 1);
	expect_cursors(&t, 6, 6, 6);
	assert_false(slot_exists(&t, 4));
	assert_false(slot_exists(&t, 5));
	assert_int_equal(NV_STAT_GET(&t.f->stats, slots_deleted), 6);
	assert_int_equal(tt_trim(&t, t1 + 2 * GRACE), 0);
	fetch_cache_free(t.fc);
}

static bool always(void *arg)
{
	(void)arg;
	return true;
}

/* Trim-check stops when the star stops (issue 11 item 8): with the
 * cancel hook true, slot deletion gives up before a request
 * (-ESHUTDOWN), leaves the cursors as they were, and the next run
 * deletes. */
static void test_trim_stops_with_the_star(void **state)
{
	struct tt t;
	struct nv_stream *a;
	uint64_t t0 = 1000 * NV_NS_PER_S;

	tt_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 1000);
	tt_settle(&t, soon());
	assert_int_equal(tt_trim(&t, t0), 1); /* the grace starts */
	expect_cursors(&t, 0, 3, 3);
	t.cfg.cancelled = always;
	fake_store_reset_calls(t.f->fs);
	assert_int_equal(tt_trim(&t, t0 + GRACE), -ESHUTDOWN);
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_DEL, NULL), 0);
	expect_cursors(&t, 0, 3, 3);
	assert_true(slot_exists(&t, 0));
	t.cfg.cancelled = NULL;
	assert_int_equal(tt_trim(&t, t0 + GRACE), 1);
	expect_cursors(&t, 3, 3, 3);
	assert_false(slot_exists(&t, 0));
	fetch_cache_free(t.fc);
}

/* A SETTLED chain whose slots are all gone is retired (row and fence
 * deleted) only below its star's mint head: the head may still be the
 * star's live chain, fenced by a take's recovery while the star was
 * renewing its registry lease, and the fence is all that stops it from
 * acking there (the multi-star soak lost acked records when the duty's
 * trim deleted it).  Once the star mints a later epoch it goes. */
static void test_trim_keeps_the_mint_heads_fence(void **state)
{
	struct tt t;
	struct nv_stream *a;
	struct meta_chain c, next;
	uint64_t t0 = 1000 * NV_NS_PER_S, ver, nver;
	char key[CHAIN_KEY_MAX];

	tt_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 1000);
	tt_settle(&t, soon());
	assert_int_equal(tt_trim(&t, t0), 1);
	assert_int_equal(tt_trim(&t, t0 + GRACE), 1); /* slots 0..2 gone */
	efx_chain_stop(t.f);
	/* As a take's recovery leaves it: fenced at the cut, SETTLED. */
	assert_int_equal(meta_chain_get(t.f->kv, t.f->o.cls, EFX_STAR, t.f->row.epoch, &c, &ver), 0);
	c.state = CHAIN_SETTLED;
	c.cut = c.checkpoint;
	assert_int_equal(meta_chain_cas(t.f->kv, &c, ver), 0);
	assert_int_equal(store_put(t.f->store, efx_slot_key(t.f, c.cut, key), NULL, 0,
				   STORE_CREATE_ONCE), 0);
	tt_trim(&t, t0 + 2 * GRACE);
	tt_trim(&t, t0 + 3 * GRACE);
	assert_int_equal(meta_chain_get(t.f->kv, t.f->o.cls, EFX_STAR, t.f->row.epoch, &c, &ver), 0);
	assert_true(slot_exists(&t, c.cut)); /* the fence stays */
	/* The star moves on: the old head is retired with its fence. */
	assert_int_equal(meta_chain_mint(t.f->kv, t.f->o.cls, EFX_STAR, nv_now_wall_ns(), &next,
					 &nver), 0);
	assert_int_equal(tt_trim(&t, t0 + 4 * GRACE), 1);
	assert_int_equal(meta_chain_get(t.f->kv, t.f->o.cls, EFX_STAR, t.f->row.epoch, &c, &ver),
			 -ENOENT);
	assert_false(slot_exists(&t, c.cut));
	fetch_cache_free(t.fc);
}

/* ===================================================== reclamation */

/* A trimmed stream's span refs wholly below the trim point go with their
 * byte twins; the rest stay; a re-run changes nothing. */
static void test_trim_reclaims_span_refs(void **state)
{
	struct tt t;
	struct nv_stream *a;
	struct first_rows fr;
	uint64_t now = nv_now_wall_ns();
	char *before, *after;

	tt_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 5, 100);
	assert_int_equal(efx_count_space(t.f->kv, "ref"), 5);
	assert_int_equal(meta_stream_set_trim(t.f->kv, a->id, 3, 300), 0);

	assert_int_equal(trim_reclaim(&t.cfg, now), 1);
	get_rows(&t, a->id, &fr);
	assert_int_equal(fr.n, 2);
	assert_int_equal(fr.first[0], 3);
	assert_int_equal(fr.first[1], 4);
	assert_int_equal(efx_count_space(t.f->kv, "ref"), 2);
	assert_int_equal(efx_count_space(t.f->kv, "rby"), 2);
	assert_int_equal(efx_count_space(t.f->kv, "rcl"), 0);

	before = efx_kv_dump(t.f->kv, false);
	assert_int_equal(trim_reclaim(&t.cfg, now + GRACE), 0);
	after = efx_kv_dump(t.f->kv, false);
	assert_string_equal(before, after);
	free(before);
	free(after);
	fetch_cache_free(t.fc);
}

/* A trim point inside a catalog row: the objects wholly below it are
 * queued and deleted only after the read grace, the row is re-keyed at
 * the first object it keeps (with its twin), and a re-run is a no-op. */
static void test_trim_reclaims_settled_objects(void **state)
{
	struct tt t;
	struct nv_stream *a;
	struct first_rows fr;
	uint64_t now = 5000 * NV_NS_PER_S;

	tt_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 200);
	t.scfg.output_cap_bytes = 1; /* one object per chunk: per record */
	tt_settle(&t, soon());
	get_rows(&t, a->id, &fr);
	assert_int_equal(fr.n, 1);
	assert_int_equal(fr.kind[0], META_REF_CATALOG);
	assert_int_equal(fr.nobjs[0], 3);
	assert_int_equal(fake_store_count_objects(t.f->fs, "streams/"), 3);

	assert_int_equal(meta_stream_set_trim(t.f->kv, a->id, 2, 400), 0);
	assert_int_equal(trim_reclaim(&t.cfg, now), 1);
	get_rows(&t, a->id, &fr);
	assert_int_equal(fr.n, 1);
	assert_int_equal(fr.first[0], 2);
	assert_int_equal(fr.nobjs[0], 1);
	assert_int_equal(efx_count_space(t.f->kv, "ref"), 1);
	assert_int_equal(efx_count_space(t.f->kv, "rby"), 1);
	assert_int_equal(efx_count_space(t.f->kv, "gc"), 2);
	/* Within the grace: the objects stand. */
	assert_int_equal(trim_reclaim(&t.cfg, now + GRACE - 1), 0);
	assert_int_equal(fake_store_count_objects(t.f->fs, "streams/"), 3);

	assert_int_equal(trim_reclaim(&t.cfg, now + GRACE), 1);
	assert_int_equal(fake_store_count_objects(t.f->fs, "streams/"), 1);
	assert_int_equal(efx_count_space(t.f->kv, "gc"), 0);
	assert_int_equal(trim_reclaim(&t.cfg, now + 2 * GRACE), 0);
	assert_int_equal(fake_store_count_objects(t.f->fs, "streams/"), 1);
	fetch_cache_free(t.fc);
}

/* engine/trim.c, through the NOVA_TESTABLE seam. */
int trim_split_commit(const struct trim_cfg *cfg, uint64_t now, uint64_t id, uint64_t trim_seq,
		      const struct meta_ref *r, uint64_t rver);

/* The split of the catalog row holding the trim point compares the
 * row's version: a settle on the stream's leader (another star) that
 * rewrote the row after the trim read it must not be undone by the old
 * copy (its new objects would vanish from the catalog). */
static void test_trim_split_compares_row(void **state)
{
	struct tt t;
	struct nv_stream *a;
	struct first_rows fr;
	struct meta_ref r;
	struct kv_txn *txn;
	uint64_t rver, now = 5000 * NV_NS_PER_S;

	tt_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 200);
	t.scfg.output_cap_bytes = 1; /* one object per record */
	tt_settle(&t, soon());
	meta_ref_init(&r);
	assert_int_equal(meta_ref_get(t.f->kv, a->id, 0, &r, &rver), 0);
	assert_int_equal(r.nobjs, 3);
	/* The leader's settle rewrites the row (here: the same content). */
	txn = kv_txn_new();
	assert_int_equal(meta_ref_txn_put(txn, &r), 0);
	assert_int_equal(kv_txn_commit(t.f->kv, txn, NULL), 0);
	kv_txn_free(txn);
	assert_int_equal(trim_split_commit(&t.cfg, now, a->id, 2, &r, rver), -ECANCELED);
	get_rows(&t, a->id, &fr);
	assert_int_equal(fr.n, 1);
	assert_int_equal(fr.first[0], 0);
	assert_int_equal(fr.nobjs[0], 3);
	assert_int_equal(efx_count_space(t.f->kv, "gc"), 0);
	meta_ref_clear(&r);
	/* Read again, it splits. */
	assert_int_equal(meta_stream_set_trim(t.f->kv, a->id, 2, 400), 0);
	assert_int_equal(trim_reclaim(&t.cfg, now), 1);
	get_rows(&t, a->id, &fr);
	assert_int_equal(fr.n, 1);
	assert_int_equal(fr.first[0], 2);
	fetch_cache_free(t.fc);
}

/* A split that queues more objects than one compared transaction may
 * carry (KV_TXN_SAFE_OPS) still happens: the queue entries go after the
 * CAS. */
static void test_trim_split_many_objects(void **state)
{
	struct tt t;
	struct nv_stream *a;
	struct first_rows fr;
	enum { N = KV_TXN_SAFE_OPS + 10 };

	tt_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, N, 20);
	t.scfg.output_cap_bytes = 1; /* one object per record */
	tt_settle(&t, soon());
	get_rows(&t, a->id, &fr);
	assert_int_equal(fr.n, 1);
	assert_int_equal(fr.nobjs[0], N);
	assert_int_equal(meta_stream_set_trim(t.f->kv, a->id, N - 2, (N - 2) * 20), 0);
	assert_int_equal(trim_reclaim(&t.cfg, 5000 * NV_NS_PER_S), 1);
	get_rows(&t, a->id, &fr);
	assert_int_equal(fr.n, 1);
	assert_int_equal(fr.first[0], N - 2);
	assert_int_equal(fr.nobjs[0], 2);
	assert_int_equal(efx_count_space(t.f->kv, "gc"), N - 2);
	fetch_cache_free(t.fc);
}

static int cancel_calls;

/* True from the second call on: one delete request goes, then the star
 * stops. */
static bool after_one(void *arg)
{
	(void)arg;
	return ++cancel_calls > 1;
}

/* The star stops between two delete requests: the trimmed cursor
 * records the slots the first one deleted (the old code left it where
 * it was, below slots already gone, which fsck reports), and the next
 * run deletes the rest. */
static void test_trim_stop_records_progress(void **state)
{
	struct tt t;
	struct nv_stream *a;
	uint64_t t0 = 1000 * NV_NS_PER_S;
	const unsigned n = 1005; /* two delete requests of at most 1000 keys */

	tt_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, n, 10);
	t.scfg.trigger_bytes = 1;
	tt_settle(&t, NOW_ALL);
	assert_int_equal(efx_count_space(t.f->kv, "mrk"), 0);
	assert_int_equal(tt_trim(&t, t0), 1);
	expect_cursors(&t, 0, n, n);
	cancel_calls = 0;
	t.cfg.cancelled = after_one;
	assert_int_equal(tt_trim(&t, t0 + GRACE), -ESHUTDOWN);
	expect_cursors(&t, 1000, n, n);
	assert_false(slot_exists(&t, 999));
	assert_true(slot_exists(&t, 1000));
	t.cfg.cancelled = NULL;
	assert_int_equal(tt_trim(&t, t0 + GRACE), 1);
	expect_cursors(&t, n, n, n);
	assert_false(slot_exists(&t, n - 1));
	fetch_cache_free(t.fc);
}

/* A deleted stream's batches waiting for their age cap (their settle
 * left residue: below the trigger here, on a full disk in issue 12 item
 * 9) ripen when its history is reclaimed: the next era resolves them
 * without a byte, and trim-check frees their slots after one grace, while
 * the live stream's markers and slots stay (the old code left them all
 * to the age cap). */
static void test_trim_deleted_stream_frees_slots(void **state)
{
	struct tt t;
	struct nv_stream *a, *b;
	struct meta_chain c;
	uint64_t t0 = 1000 * NV_NS_PER_S, tdel;

	tt_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	efx_write_absorb(t.f, a, 0, 4, 1000); /* slots 0..3 */
	efx_write_absorb(t.f, b, 0, 2, 10);   /* slots 4, 5 */
	t.scfg.trigger_bytes = 1u << 30;      /* both residue: to the age cap */
	tt_settle(&t, soon());
	assert_int_equal(efx_count_space(t.f->kv, "mrk"), 6);
	c = efx_chain_row(t.f);
	assert_int_equal(settle_chain(&t.scfg, &c, soon() + 1, NULL), 0); /* all waiting */

	tdel = nv_now_wall_ns();
	assert_int_equal(meta_stream_delete(t.f->kv, a->id, tdel), 0);
	assert_int_equal(trim_reclaim(&t.cfg, tdel + GRACE), 1);
	assert_int_equal(efx_count_space(t.f->kv, "ref"), 2); /* b's */
	/* The next era drops a: its markers go, b's stay. */
	assert_int_equal(settle_chain(&t.scfg, &c, tdel + GRACE, NULL), 1);
	assert_int_equal(efx_count_space(t.f->kv, "mrk"), 2);
	assert_int_equal(tt_trim(&t, t0), 1);
	expect_cursors(&t, 0, 4, 4);
	assert_int_equal(tt_trim(&t, t0 + GRACE), 1);
	for (uint64_t s = 0; s < 4; s++)
		assert_false(slot_exists(&t, s));
	assert_true(slot_exists(&t, 4));
	assert_true(slot_exists(&t, 5));
	assert_int_equal(efx_count_space(t.f->kv, "ref"), 2);
	(void)b;
	fetch_cache_free(t.fc);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, efx_setup, efx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_trim_check_window_and_grace),
		T(test_trim_stops_with_the_star),
		T(test_trim_keeps_the_mint_heads_fence),
		T(test_trim_reclaims_span_refs),
		T(test_trim_reclaims_settled_objects),
		T(test_trim_split_compares_row),
		T(test_trim_split_many_objects),
		T(test_trim_deleted_stream_frees_slots),
		T(test_trim_stop_records_progress),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
