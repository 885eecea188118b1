/*
 * test_plan.c - ReadPlan against the catalog (engine/plan.c), with the
 * wire form's round trip (api/plan.c).
 *
 * For: plan.h's invariants on rows the real settle writes (the settle
 * fixture): nothing settled is one residual; entries are contiguous
 * settled objects and the residual is where the catalog ends; the cap of
 * 256 and the cursor across catalog rows; starts by byte; the trim
 * point; the join of two reads never bridges a gap; a stale plan (a tail
 * extension replaced its object) re-planned to the same records under
 * the new key while the old one stays readable; star_plan()'s TTL, form
 * and stream row; and plans taken while settlement and trim run on
 * another thread never vend beyond the settled end nor stop short of it,
 * and name only objects still in the bucket.  Not for: the route
 * (tests/integration/t_plan.sh) or fetching (api/vend.c, the same test).
 */
#include "config.h"
#include "api/plan.h"
#include "engine/bundle.h"
#include "engine/plan.h"
#include "engine/star_impl.h"
#include "engine/trim.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "src/base/clock.h"
#include "tests/unit/settle_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static struct read_plan *plan_of(struct kv *kv, uint64_t id, enum meta_ref_key by,
				 uint64_t pos, uint32_t max, uint64_t trim_seq,
				 uint64_t trim_byte)
{
	struct read_plan *p = calloc(1, sizeof(*p));
	struct plan_req q = { .by = by, .pos = pos, .max = max, .trim_seq = trim_seq,
			      .trim_byte = trim_byte };

	assert_non_null(p);
	assert_int_equal(plan_build(kv, id, &q, p), 0);
	return p;
}

static void plan_free(struct read_plan *p)
{
	plan_clear(p);
	free(p);
}

/* Entries contiguous, each a record extent, the residual at the last end. */
static void expect_shape(const struct read_plan *p)
{
	for (uint32_t i = 0; i < p->n; i++) {
		assert_true(p->e[i].end_seq > p->e[i].first_seq);
		assert_true(p->e[i].footer_len >= BUNDLE_TRAILER_SIZE);
		assert_null(p->e[i].url);
		if (i) {
			assert_int_equal(p->e[i].first_seq, p->e[i - 1].end_seq);
			assert_int_equal(p->e[i].first_byte, p->e[i - 1].end_byte);
		}
	}
	if (p->n) {
		assert_int_equal(p->residual_seq, p->e[p->n - 1].end_seq);
		assert_int_equal(p->residual_byte, p->e[p->n - 1].end_byte);
	}
}

/* The footer window the entry names is the object's own (a verified
 * footer that holds the entry's records). */
static void expect_footer(struct efx *f, uint64_t id, const struct plan_entry *e)
{
	uint8_t *win = malloc(e->footer_len);
	struct bundle_footer ft;
	uint32_t first, count;
	size_t got = 0;

	assert_non_null(win);
	assert_int_equal(store_get_range(f->store, e->key, e->footer_off, e->footer_len, win,
					 &got), 0);
	assert_int_equal(got, e->footer_len);
	assert_int_equal(bundle_footer_open(win, got, e->footer_off, &ft), 0);
	assert_int_equal(bundle_footer_stream(&ft, id, &first, &count), 0);
	free(win);
}

static void test_plan_nothing_settled(void **state)
{
	struct st t;
	struct nv_stream *a, *b;
	struct read_plan *p;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	b = efx_stream(t.f, "b", -1);
	/* No rows at all: one residual at the trim point. */
	p = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, 0, 0, 0, 0);
	assert_int_equal(p->n, 0);
	assert_false(p->more);
	assert_int_equal(p->residual_seq, 0);
	plan_free(p);
	/* Span refs only: one residual, at the start of the row holding the
	 * start (at or below it; its byte is the row's). */
	efx_write_absorb(t.f, b, 0, 3, 100);
	p = plan_of(t.f->kv, b->id, META_REF_BY_SEQ, 2, 0, 0, 0);
	assert_int_equal(p->n, 0);
	assert_false(p->more);
	assert_true(p->residual_seq <= 2);
	assert_int_equal(p->residual_byte, p->residual_seq * 100);
	plan_free(p);
	p = plan_of(t.f->kv, b->id, META_REF_BY_SEQ, 0, 0, 0, 0);
	assert_int_equal(p->n, 0);
	assert_int_equal(p->residual_seq, 0);
	plan_free(p);
	st_stop(&t);
}

static void test_plan_settled_then_residual(void **state)
{
	struct st t;
	struct nv_stream *a;
	struct read_plan *p;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 400);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	efx_write_absorb(t.f, a, 3, 2, 400); /* span refs above the catalog */

	p = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, 0, 0, 0, 0);
	assert_int_equal(p->n, 1);
	expect_shape(p);
	assert_int_equal(p->e[0].first_seq, 0);
	assert_int_equal(p->e[0].end_seq, 3);
	assert_int_equal(p->e[0].end_byte, 1200);
	assert_false(p->more);
	assert_int_equal(p->residual_seq, 3);
	assert_int_equal(p->residual_byte, 1200);
	assert_non_null(strstr(p->e[0].key, "streams/" EFX_BUCKET "/"));
	expect_footer(t.f, a->id, &p->e[0]);
	plan_free(p);

	/* By byte: the object holding byte 500; the end byte of the catalog
	 * holds none of it. */
	p = plan_of(t.f->kv, a->id, META_REF_BY_BYTE, 500, 0, 0, 0);
	assert_int_equal(p->n, 1);
	assert_int_equal(p->e[0].first_byte, 0);
	plan_free(p);
	p = plan_of(t.f->kv, a->id, META_REF_BY_BYTE, 1200, 0, 0, 0);
	assert_int_equal(p->n, 0);
	assert_int_equal(p->residual_byte, 1200);
	plan_free(p);

	/* Inside the span refs: the residual is the start of the row
	 * holding the start, at or below it; beyond every row: the rows' end. */
	p = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, 4, 0, 0, 0);
	assert_int_equal(p->n, 0);
	assert_true(p->residual_seq >= 3 && p->residual_seq <= 4);
	assert_int_equal(p->residual_byte, p->residual_seq * 400);
	plan_free(p);
	p = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, 99, 0, 0, 0);
	assert_int_equal(p->n, 0);
	assert_int_equal(p->residual_seq, 5);
	assert_int_equal(p->residual_byte, 2000);
	plan_free(p);
	st_stop(&t);
}

/* n records, one per flight and (output cap 1 byte) one settled object each. */
static void settle_singletons(struct st *t, struct nv_stream *s, unsigned n)
{
	t->cfg.output_cap_bytes = 1;
	for (unsigned i = 0; i < n; i++)
		efx_write_absorb(t->f, s, i, 1, 16);
	assert_int_equal(settle_now(t, NOW_ALL), 1);
}

static void test_plan_cap_and_cursor(void **state)
{
	struct st t;
	struct nv_stream *a;
	struct read_plan *p;
	struct rows *rs = calloc(1, sizeof(*rs));
	struct kv_txn *x = kv_txn_new();
	uint64_t at = 0, first_seq1, first_byte1;
	unsigned plans = 0, total = 0;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	settle_singletons(&t, a, META_REF_OBJS_MAX + 76); /* two catalog rows */
	assert_non_null(rs);
	assert_non_null(x);
	get_rows(t.f->kv, a->id, rs);
	assert_true(rs->n >= 2 && rs->r[1].kind == META_REF_CATALOG);
	first_seq1 = rs->r[1].first_seq;
	first_byte1 = rs->r[1].first_byte;
	free(rs);

	/* Cap 256, continued by the cursor across both rows, to the end. */
	for (;;) {
		p = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, at, 0, 0, 0);
		expect_shape(p);
		assert_true(p->n <= PLAN_ENTRIES_MAX);
		assert_int_equal(p->e[0].first_seq, at);
		total += p->n;
		at = p->residual_seq;
		plans++;
		assert_true(plans < 10);
		if (!p->more)
			break;
		assert_int_equal(p->n, PLAN_ENTRIES_MAX);
		plan_free(p);
	}
	assert_int_equal(total, META_REF_OBJS_MAX + 76);
	assert_int_equal(p->residual_seq, META_REF_OBJS_MAX + 76);
	assert_int_equal(plans, (META_REF_OBJS_MAX + 76 + PLAN_ENTRIES_MAX - 1) / PLAN_ENTRIES_MAX);
	plan_free(p);

	/* A smaller max, from inside: the cursor is where it stopped. */
	p = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, 1020, 10, 0, 0);
	assert_int_equal(p->n, 10);
	assert_true(p->more);
	assert_int_equal(p->residual_seq, 1030);
	plan_free(p);
	/* A cap reached exactly at the catalog's end: no cursor. */
	p = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, META_REF_OBJS_MAX + 66, 10, 0, 0);
	assert_int_equal(p->n, 10);
	assert_false(p->more);
	plan_free(p);

	/* The trim point raises the start; by byte as well. */
	p = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, 0, 1, 150, 150 * 16);
	assert_int_equal(p->e[0].first_seq, 150);
	assert_int_equal(p->trim_seq, 150);
	plan_free(p);
	p = plan_of(t.f->kv, a->id, META_REF_BY_BYTE, 0, 1, 150, 150 * 16 + 3);
	assert_int_equal(p->e[0].first_seq, 150);
	plan_free(p);

	/* A row gone between the floor read and the next rows (as if
	 * settlement's CAS replaced it): the plan stops where the rows stop
	 * being contiguous, never bridging the gap. */
	assert_int_equal(meta_ref_txn_del(x, a->id, first_seq1, first_byte1), 0);
	assert_int_equal(kv_txn_commit(t.f->kv, x, NULL), 0);
	kv_txn_free(x);
	p = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, first_seq1 - 5, 0, 0, 0);
	assert_int_equal(p->n, 5);
	assert_false(p->more);
	assert_int_equal(p->residual_seq, first_seq1);
	plan_free(p);
	st_stop(&t);
}

/* A plan whose object a tail extension replaced: the old key still reads
 * (queued for reclamation after the grace), and the re-plan names the
 * same records under the new revision. */
static void test_plan_stale_replanned(void **state)
{
	struct st t;
	struct nv_stream *a;
	struct read_plan *old, *p;
	uint8_t b[BUNDLE_TRAILER_SIZE];
	size_t got;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 400);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	old = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, 1, 0, 0, 0);
	assert_int_equal(old->n, 1);
	efx_write_absorb(t.f, a, 3, 2, 400);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);

	p = plan_of(t.f->kv, a->id, META_REF_BY_SEQ, 1, 0, 0, 0);
	assert_int_equal(p->n, 1);
	assert_string_not_equal(p->e[0].key, old->e[0].key);
	assert_int_equal(p->e[0].rev, old->e[0].rev + 1);
	assert_int_equal(p->e[0].first_seq, old->e[0].first_seq);
	assert_int_equal(p->e[0].end_seq, 5);
	assert_int_equal(p->residual_seq, 5);
	expect_footer(t.f, a->id, &p->e[0]);
	/* What the old plan named is still there (plan.h invariant 4). */
	assert_int_equal(store_get_range(t.f->store, old->e[0].key,
					 old->e[0].footer_off + old->e[0].footer_len -
					 BUNDLE_TRAILER_SIZE, sizeof(b), b, &got), 0);
	assert_int_equal(memcmp(b, BUNDLE_MAGIC, 8), 0);
	expect_footer(t.f, a->id, &old->e[0]);
	plan_free(old);
	plan_free(p);
	st_stop(&t);
}

/* star_plan(): the TTL is plan_ttl_s bounded by the read grace; under a
 * second nothing is vended; signed vending needs a store that presigns
 * (the fake store does not: star_plan_check() refuses it). */
static void test_plan_star_ttl_and_form(void **state)
{
	struct st t;
	struct nv_stream *a;
	struct star *star = calloc(1, sizeof(*star));
	struct read_plan *p = calloc(1, sizeof(*p));
	uint64_t now = nv_now_wall_ns();

	assert_non_null(star);
	assert_non_null(p);
	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	efx_write_absorb(t.f, a, 0, 3, 400);
	assert_int_equal(settle_now(&t, NOW_ALL), 1);
	star->kv = t.f->kv;
	star->store = t.f->store;
	star->cfg.plan_ttl_ns = 60 * NV_NS_PER_S;
	star->cfg.read_grace_ns = 7 * NV_NS_PER_S;
	assert_int_equal(star_plan_check(star), 0);
	assert_int_equal(star_plan(star, a, META_REF_BY_SEQ, 1, 0, p), 0);
	assert_int_equal(p->n, 1);
	assert_int_equal(p->ttl_s, 7);
	assert_int_equal(atomic_load(&star->stats.plans), 1);
	assert_int_equal(atomic_load(&star->stats.plan_entries), 1);
	assert_int_equal(p->vending, PLAN_RAW);
	assert_true(p->expires_ns >= now + 7 * NV_NS_PER_S &&
		    p->expires_ns <= nv_now_wall_ns() + 7 * NV_NS_PER_S);
	plan_clear(p);
	/* A life under PLAN_TTL_MIN_S (half a second; 2 s, which a consumer
	 * could use for at most a second after the wire's rounding and its
	 * own margin): the plan is its residual.  At the minimum it vends. */
	star->cfg.read_grace_ns = NV_NS_PER_S / 2;
	assert_int_equal(star_plan(star, a, META_REF_BY_SEQ, 1, 0, p), 0);
	assert_int_equal(p->n, 0);
	assert_int_equal(p->residual_seq, 0);
	assert_false(p->more);
	star->cfg.read_grace_ns = 2 * NV_NS_PER_S;
	assert_int_equal(star_plan(star, a, META_REF_BY_SEQ, 1, 0, p), 0);
	assert_int_equal(p->n, 0);
	assert_int_equal(p->residual_seq, 0);
	star->cfg.read_grace_ns = PLAN_TTL_MIN_S * NV_NS_PER_S;
	assert_int_equal(star_plan(star, a, META_REF_BY_SEQ, 1, 0, p), 0);
	assert_int_equal(p->n, 1);
	assert_int_equal(p->ttl_s, PLAN_TTL_MIN_S);
	plan_clear(p);
	/* Signed vending on a store that cannot presign: the store's error. */
	star->cfg.read_grace_ns = 7 * NV_NS_PER_S;
	star->cfg.plan_vending = "signed";
	assert_int_equal(star_plan(star, a, META_REF_BY_SEQ, 0, 0, p), -ENOTSUP);
	assert_int_equal(p->n, 0);
	star->cfg.plan_vending = NULL;
	/* The trim point of the stream row, not the (older) one in memory;
	 * a deleted stream plans nothing. */
	star->cfg.read_grace_ns = 7 * NV_NS_PER_S;
	assert_int_equal(meta_stream_set_trim(t.f->kv, a->id, 2, 800), 0);
	assert_int_equal(atomic_load(&a->trim_seq), 0);
	assert_int_equal(star_plan(star, a, META_REF_BY_SEQ, 0, 0, p), 0);
	assert_int_equal(p->trim_seq, 2);
	assert_int_equal(p->trim_byte, 800);
	assert_int_equal(p->n, 1);
	plan_clear(p);
	assert_int_equal(meta_stream_delete(t.f->kv, a->id, now), 0);
	assert_int_equal(star_plan(star, a, META_REF_BY_SEQ, 0, 0, p), -ENOENT);
	/* Bad arguments, a bad form, signed on a store that cannot sign. */
	assert_int_equal(star_plan(star, a, META_REF_BY_SEQ, 0, PLAN_ENTRIES_MAX + 1, p), -EINVAL);
	star->cfg.plan_vending = "sometimes";
	assert_int_equal(star_plan_check(star), -EINVAL);
	star->cfg.plan_vending = "signed";
	assert_int_equal(star_plan_check(star), -EINVAL);
	free(p);
	free(star);
	st_stop(&t);
}

/* ------------------------------------------------ plans while settling */

struct racer {
	struct kv *kv;
	struct store *store;
	uint64_t id;
	atomic_bool stop;
	_Atomic uint64_t written; /* records appended so far (raised before) */
	unsigned plans, bad;
	char why[128];
};

static void *planner(void *arg)
{
	struct racer *r = arg;
	struct read_plan *p = calloc(1, sizeof(*p));

	while (p && !atomic_load(&r->stop)) {
		struct plan_req q = { .by = META_REF_BY_SEQ };
		struct meta_stream m0, m1;
		uint64_t before = 0, after = 0, bb, ab, size;
		bool trimmed;

		if (meta_stream_get(r->kv, r->id, &m0, NULL) ||
		    meta_ref_settled_end(r->kv, r->id, m0.trim_seq, &before, &bb)) {
			snprintf(r->why, sizeof(r->why), "a read failed");
			r->bad++;
			break;
		}
		q.trim_seq = m0.trim_seq;
		q.trim_byte = m0.trim_byte;
		if (plan_build(r->kv, r->id, &q, p) || meta_stream_get(r->kv, r->id, &m1, NULL) ||
		    meta_ref_settled_end(r->kv, r->id, m1.trim_seq, &after, &ab)) {
			snprintf(r->why, sizeof(r->why), "a read failed");
			r->bad++;
			break;
		}
		r->plans++;
		/* A trim between the reads may leave the start below every row,
		 * and the settled end reads 0 until reclamation caught up: then
		 * only "never beyond what was written" is checked. */
		trimmed = m1.trim_seq != m0.trim_seq;
		if (trimmed || after == 0)
			after = atomic_load(&r->written);
		/* Everything vended is settled and still in the bucket (the
		 * grace); nothing settled before the plan began is left to the
		 * residual unless the cap stopped it; the first entry holds the
		 * start (the trim point). */
		for (uint32_t i = 0; i < p->n; i++)
			if (store_head(r->store, p->e[i].key, &size))
				r->bad++;
		if (p->residual_seq > after || (!p->more && !trimmed && p->residual_seq < before) ||
		    (p->n && (p->e[0].first_seq > m0.trim_seq || p->e[0].end_seq <= m0.trim_seq))) {
			snprintf(r->why, sizeof(r->why), "residual %llu, settled %llu..%llu, n %u",
				 (unsigned long long)p->residual_seq, (unsigned long long)before,
				 (unsigned long long)after, p->n);
			r->bad++;
		}
		for (uint32_t i = 1; i < p->n; i++)
			if (p->e[i].first_seq != p->e[i - 1].end_seq)
				r->bad++;
		plan_clear(p);
		/* A breath between plans: valgrind runs one thread at a time, and
		 * a planner that never blocks there held the settle thread to a
		 * crawl (a 4-slot era took 190 s; the test ran for over 30 min
		 * under make memcheck).  Plans still land all through each era. */
		sched_yield();
		nanosleep(&(struct timespec){ .tv_nsec = 200 * 1000 }, NULL);
	}
	free(p);
	return NULL;
}

static void test_plan_while_settling(void **state)
{
	struct st t;
	struct nv_stream *a;
	struct racer r = { 0 };
	struct trim_cfg tc = { 0 };
	pthread_t th;

	st_start(*state, &t);
	a = efx_stream(t.f, "a", -1);
	r.kv = t.f->kv;
	r.store = t.f->store;
	r.id = a->id;
	tc.store = t.f->store;
	tc.kv = t.f->kv;
	tc.stats = &t.f->stats;
	tc.read_grace_ns = 600 * NV_NS_PER_S; /* nothing is deleted during the test */
	t.cfg.output_cap_bytes = 1500; /* several objects, so trim drops some */
	assert_int_equal(pthread_create(&th, NULL, planner, &r), 0);
	for (unsigned round = 0; round < 12; round++) {
		atomic_store(&r.written, round * 4 + 4);
		efx_write_absorb(t.f, a, round * 4, 4, 300);
		assert_int_equal(settle_now(&t, NOW_ALL), 1);
		if (round % 3 == 2) {
			/* Trim and reclaim: rows below the trim point go, the row
			 * holding it is rewritten to start there. */
			uint64_t seq = round * 4 - 2;

			assert_int_equal(meta_stream_set_trim(t.f->kv, a->id, seq, seq * 300), 0);
			assert_true(trim_reclaim(&tc, nv_now_wall_ns()) >= 0);
		}
	}
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	{
		/* The trims reclaimed rows: the first row starts above 0. */
		struct rows *rs = calloc(1, sizeof(*rs));

		assert_non_null(rs);
		get_rows(t.f->kv, a->id, rs);
		assert_true(rs->n >= 1 && rs->r[0].first_seq > 0);
		free(rs);
	}
	if (r.bad)
		fail_msg("%u bad plans of %u: %s", r.bad, r.plans, r.why);
	assert_true(r.plans > 0);
	st_stop(&t);
}

/* ------------------------------------------------ the wire form */

static void test_plan_wire_round_trip(void **state)
{
	struct read_plan *p = calloc(1, sizeof(*p)), *back = calloc(1, sizeof(*back));
	struct api_plan_query q;
	const char *why;
	char *doc;

	(void)state;
	p->stream_id = 7;
	p->trim_seq = 2;
	p->trim_byte = 20;
	p->n = 2;
	for (uint32_t i = 0; i < 2; i++) {
		snprintf(p->e[i].key, sizeof(p->e[i].key), "streams/b/7/0000000000000001/%016x", i);
		p->e[i].epoch = 1;
		p->e[i].first_seq = 2 + i * 5;
		p->e[i].end_seq = 7 + i * 5;
		p->e[i].first_byte = 20 + i * 50;
		p->e[i].end_byte = 70 + i * 50;
		p->e[i].footer_off = 100;
		p->e[i].footer_len = 96;
		p->e[i].url = strdup("http://127.0.0.1:1/x?X-Amz-Signature=ab");
	}
	p->vending = PLAN_SIGNED;
	p->residual_seq = 12;
	p->residual_byte = 120;
	p->more = true;
	p->expires_ns = 1700000000ull * NV_NS_PER_S;
	p->ttl_s = 30;
	doc = api_plan_format(p);
	assert_non_null(doc);
	assert_int_equal(api_plan_parse(doc, strlen(doc), back), 0);
	assert_int_equal(back->n, 2);
	assert_string_equal(back->e[1].key, p->e[1].key);
	assert_string_equal(back->e[1].url, p->e[1].url);
	assert_int_equal(back->e[1].end_byte, 120);
	assert_true(back->more);
	assert_int_equal(back->expires_ns, p->expires_ns);
	plan_clear(back);
	/* A gap between entries, a key outside streams/, a raw plan with a
	 * URL: refused, nothing left allocated. */
	p->e[1].first_seq = 8;
	free(doc);
	doc = api_plan_format(p);
	assert_int_equal(api_plan_parse(doc, strlen(doc), back), -EINVAL);
	assert_int_equal(back->n, 0);
	p->e[1].first_seq = 7;
	strcpy(p->e[0].key, "chains/x");
	free(doc);
	doc = api_plan_format(p);
	assert_int_equal(api_plan_parse(doc, strlen(doc), back), -EINVAL);
	strcpy(p->e[0].key, "streams/b/7/0000000000000001/0000000000000000");
	p->vending = PLAN_RAW;
	free(doc);
	doc = api_plan_format(p);
	assert_int_equal(api_plan_parse(doc, strlen(doc), back), -EINVAL);
	free(doc);
	plan_clear(p);
	free(p);
	free(back);

	/* The query. */
	assert_int_equal(api_plan_query_parse(NULL, NULL, NULL, &q, &why), 0);
	assert_int_equal(q.by, META_REF_BY_SEQ);
	assert_int_equal(q.pos, 0);
	assert_int_equal(q.max, PLAN_ENTRIES_MAX);
	assert_int_equal(api_plan_query_parse(NULL, "77", "3", &q, &why), 0);
	assert_int_equal(q.by, META_REF_BY_BYTE);
	assert_int_equal(q.pos, 77);
	assert_int_equal(q.max, 3);
	assert_int_equal(api_plan_query_parse("1", "2", NULL, &q, &why), -EINVAL);
	assert_int_equal(api_plan_query_parse("-1", NULL, NULL, &q, &why), -EINVAL);
	assert_int_equal(api_plan_query_parse(NULL, NULL, "0", &q, &why), -EINVAL);
	assert_int_equal(api_plan_query_parse(NULL, NULL, "257", &q, &why), -EINVAL);
	assert_non_null(why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_plan_nothing_settled, efx_setup, efx_teardown),
		cmocka_unit_test_setup_teardown(test_plan_settled_then_residual, efx_setup,
						efx_teardown),
		cmocka_unit_test_setup_teardown(test_plan_cap_and_cursor, efx_setup, efx_teardown),
		cmocka_unit_test_setup_teardown(test_plan_stale_replanned, efx_setup, efx_teardown),
		cmocka_unit_test_setup_teardown(test_plan_star_ttl_and_form, efx_setup,
						efx_teardown),
		cmocka_unit_test_setup_teardown(test_plan_while_settling, efx_setup, efx_teardown),
		cmocka_unit_test(test_plan_wire_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
