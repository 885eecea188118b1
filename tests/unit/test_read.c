/*
 * test_read.c - unit tests of engine/read.c (with engine/rcache.c): one
 * page from one tier.
 *
 * The stream is written by the real chain into the fake store and
 * absorbed into a real SQLite metastore (tests/unit/engine_fixture.h);
 * the read engine under test gets the metastore through a counting
 * proxy (kv_wrap() of a backend that forwards to the real one), so a test
 * can say "this cold page cost exactly one floor lookup", and the fake
 * store's call log says how many GETs of which object a page cost.
 * Every byte read is compared with a model of the stream.
 *
 * Tier control: the valve of the fixture keeps flights from the absorb
 * (frontier stays put: the FLIGHT tier), tailcache_drop_stream() forces
 * misses of the tail cache, and a tail cache budget of 0 caches nothing.
 */
#include "config.h"
#include "tests/unit/engine_fixture.h"
#include "tests/unit/fake_store.h"
#include "engine/bundle.h"
#include "engine/read.h"
#include "meta/kv.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 60000

/* ------------------------------------------------- a counting metastore */

struct ckv {
	struct kv *inner; /* borrowed */
	atomic_uint gets, floors, ranges, commits;
};

static int ck_get(void *be, const void *key, size_t klen, struct nv_buf *val, uint64_t *ver)
{
	struct ckv *c = be;

	atomic_fetch_add(&c->gets, 1);
	return kv_get(c->inner, key, klen, val, ver);
}

static int ck_floor(void *be, const void *key, size_t klen, const void *lo, size_t lolen,
		    struct nv_buf *key_out, struct nv_buf *val_out, uint64_t *ver)
{
	struct ckv *c = be;

	atomic_fetch_add(&c->floors, 1);
	return kv_floor(c->inner, key, klen, lo, lolen, key_out, val_out, ver);
}

static int ck_range(void *be, const void *start, size_t slen, const void *end, size_t elen,
		    size_t limit, bool reverse, kv_visit_fn fn, void *arg)
{
	struct ckv *c = be;

	atomic_fetch_add(&c->ranges, 1);
	return kv_range(c->inner, start, slen, end, elen, limit, reverse, fn, arg);
}

static int ck_commit(void *be, const struct kv_op *ops, size_t nops, uint64_t *rev)
{
	struct ckv *c = be;
	struct kv_txn *t = kv_txn_new();
	int rc = 0;

	atomic_fetch_add(&c->commits, 1);
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < nops && !rc; i++) {
		const struct kv_op *o = &ops[i];

		switch (o->kind) {
		case KV_CMP_VER: rc = kv_txn_cmp_ver(t, o->key, o->klen, o->ver); break;
		case KV_CMP_VAL: rc = kv_txn_cmp_val(t, o->key, o->klen, o->val, o->vlen); break;
		case KV_PUT: rc = kv_txn_put(t, o->key, o->klen, o->val, o->vlen); break;
		case KV_DEL: rc = kv_txn_del(t, o->key, o->klen); break;
		}
	}
	if (!rc)
		rc = kv_txn_commit(c->inner, t, rev);
	kv_txn_free(t);
	return rc;
}

static void ck_close(void *be)
{
	free(be);
}

static const struct kv_backend_ops ck_ops = {
	.scheme = "counting",
	.close = ck_close,
	.get = ck_get,
	.floor = ck_floor,
	.range = ck_range,
	.commit = ck_commit,
};

static unsigned kv_calls(struct ckv *c)
{
	return atomic_load(&c->gets) + atomic_load(&c->floors) + atomic_load(&c->ranges) +
	       atomic_load(&c->commits);
}

/* ------------------------------------------------------------ harness */

struct rt {
	struct efx *f;
	struct kv *kv;   /* the counting proxy */
	struct ckv *ck;  /* its counters (owned by kv) */
	struct read_engine *re;
	/* stream models */
	struct model {
		struct nv_stream *s;
		uint8_t *bytes;
		size_t len, cap;
		uint64_t nrec;
	} m[4];
	int nm;
	bool shared; /* read_cfg.shared of rt_engine()'s engine */
	uint32_t whole_max; /* read_cfg.whole_max of rt_engine()'s engine */
};

static void rt_engine(struct rt *t, bool with_tc, uint64_t cache_bytes, unsigned threads,
		      unsigned readahead)
{
	struct read_cfg rc = { 0 };

	if (!t->kv) {
		t->ck = calloc(1, sizeof(*t->ck));
		assert_non_null(t->ck);
		t->ck->inner = t->f->kv;
		assert_int_equal(kv_wrap(&ck_ops, t->ck, "counting", &t->kv), 0);
	}
	read_engine_free(t->re);
	rc.store = t->f->store;
	rc.kv = t->kv;
	rc.tc = with_tc ? t->f->tc : NULL;
	rc.stats = &t->f->stats;
	rc.star = EFX_STAR;
	rc.cache_bytes = cache_bytes;
	rc.prefetch_threads = threads;
	rc.readahead = readahead;
	rc.shared = t->shared;
	rc.whole_max = t->whole_max;
	assert_int_equal(read_engine_new(&rc, &t->re), 0);
}

static void rt_free(struct rt *t)
{
	read_engine_free(t->re);
	t->re = NULL;
	kv_close(t->kv);
	t->kv = NULL;
	for (int i = 0; i < t->nm; i++)
		free(t->m[i].bytes);
	t->nm = 0;
}

static struct model *rt_stream(struct rt *t, const char *name)
{
	struct model *m = &t->m[t->nm++];

	assert_true(t->nm <= 4);
	memset(m, 0, sizeof(*m));
	m->s = efx_stream(t->f, name, -1);
	return m;
}

/* The body of record seq of m. */
static void body_of(struct model *m, uint64_t seq, uint8_t *buf, size_t len)
{
	efx_fill(buf, len, m->s->id, seq);
}

static void model_add(struct model *m, size_t len, uint8_t **body)
{
	if (m->len + len > m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 65536;

		while (ncap < m->len + len)
			ncap *= 2;
		m->bytes = realloc(m->bytes, ncap);
		assert_non_null(m->bytes);
		m->cap = ncap;
	}
	body_of(m, m->nrec, m->bytes + m->len, len);
	*body = m->bytes + m->len;
	m->len += len;
	m->nrec++;
}

/* Append synchronously (one idle flight per record). */
static void put_sync(struct rt *t, struct model *m, size_t len)
{
	uint8_t *body;
	uint64_t seq;

	model_add(m, len, &body);
	assert_int_equal(efx_append_wait(t->f, m->s, body, len, &seq), 0);
	assert_int_equal(seq, m->nrec - 1);
}

/* Append without waiting; rec must outlive the completion. */
static void put_async(struct rt *t, struct model *m, size_t len, struct efx_rec *rec)
{
	uint8_t *body;

	model_add(m, len, &body);
	assert_int_equal(efx_append(t->f, m->s, body, len, rec), 0);
	assert_int_equal(rec->seq, m->nrec - 1);
}

/* Everything acked and (unless held) absorbed. */
static void settle(struct rt *t)
{
	assert_int_equal(chain_drain(t->f->chain), 0);
	assert_int_equal(absorb_drain(t->f->absorb), 0);
}

/* One page; checks the bytes against the model and the page limits. */
static size_t page(struct rt *t, struct model *m, struct reader *rd, uint64_t off, size_t len,
		   enum read_tier want)
{
	uint8_t *buf = malloc(len ? len : 1);
	enum read_tier tier;
	size_t got = 0;
	int rc;

	assert_non_null(buf);
	rc = read_page(t->re, m->s, rd, off, buf, len, &got, &tier);
	if (rc)
		fail_msg("read_page(stream %llu, off %llu, len %zu) = %d",
			 (unsigned long long)m->s->id, (unsigned long long)off, len, rc);
	if (tier != want)
		fail_msg("off %llu: tier %s, expected %s", (unsigned long long)off,
			 read_tier_name(tier), read_tier_name(want));
	assert_true(got <= len);
	assert_true(got <= READ_PAGE_MAX);
	if (tier == READ_EOF)
		assert_int_equal(got, 0);
	else
		assert_true(got > 0);
	if (tier == READ_TRIM) {
		for (size_t i = 0; i < got; i++)
			assert_int_equal(buf[i], 0);
	} else if (got) {
		assert_true(off + got <= m->len);
		assert_memory_equal(buf, m->bytes + off, got);
	}
	free(buf);
	return got;
}

static int page_err(struct rt *t, struct model *m, uint64_t off)
{
	uint8_t buf[4096];
	enum read_tier tier;
	size_t got = 12345;
	int rc;

	memset(buf, 0xa5, sizeof(buf));
	rc = read_page(t->re, m->s, NULL, off, buf, sizeof(buf), &got, &tier);
	if (rc) {
		/* Never bytes on an error. */
		assert_int_equal(got, 0);
		for (size_t i = 0; i < sizeof(buf); i++)
			assert_int_equal(buf[i], 0xa5);
	}
	return rc;
}

static unsigned gets_of(struct efx *f, const char *key)
{
	return fake_store_calls(f->fs, FAKE_GET, key);
}

/* Footer and chunk layout of a slot, read straight from the fake store. */
struct layout {
	uint64_t foff;
	uint32_t flen;
	uint32_t n;
	struct bundle_entry e[256];
};

static void slot_layout(struct efx *f, uint64_t slot, struct layout *ly)
{
	char key[CHAIN_KEY_MAX];
	uint8_t *obj;
	size_t size;
	struct bundle_footer ft;

	assert_int_equal(fake_store_copy(f->fs, efx_slot_key(f, slot, key), &obj, &size), 0);
	assert_int_equal(bundle_trailer_parse(obj + size - BUNDLE_TRAILER_SIZE,
					      BUNDLE_TRAILER_SIZE, size, &ly->foff, &ly->flen),
			 0);
	assert_int_equal(bundle_footer_open(obj + ly->foff, ly->flen, ly->foff, &ft), 0);
	assert_true(ft.n <= 256);
	ly->n = ft.n;
	for (uint32_t i = 0; i < ft.n; i++)
		assert_int_equal(bundle_footer_get(&ft, i, &ly->e[i]), 0);
	free(obj);
}

static void start(struct efx *f, uint64_t tc_bytes, bool hold, size_t chunk_target)
{
	struct efx_opts o;

	efx_opts_default(&o);
	o.tail_cache_bytes = tc_bytes;
	o.hold = hold;
	o.chunk_target = chunk_target;
	o.flight_max = 8u << 20;
	/* Flights seal when the chain is idle, by drain, or by size: a test
	 * that holds slot 0 at its gate collects the records it appends
	 * meanwhile in one flight. */
	o.linger_ns = 3600 * NV_NS_PER_S;
	efx_start(f, &o);
}

/* ============================================================ tiers */

static void test_read_tiers(void **state)
{
	struct rt t = { .f = *state };
	struct model *m;
	uint8_t b;
	size_t got;
	enum read_tier tier;

	start(t.f, 16u << 20, true, 64u << 10);
	rt_engine(&t, true, 8u << 20, 0, 0);
	m = rt_stream(&t, "x");
	put_sync(&t, m, 100);
	put_sync(&t, m, 200);
	put_sync(&t, m, 300);

	/* At or past the acked end: end of stream, no I/O, no kv. */
	fake_store_reset_calls(t.f->fs);
	page(&t, m, NULL, 600, 4096, READ_EOF);
	page(&t, m, NULL, 601, 4096, READ_EOF);
	assert_int_equal(read_page(t.re, m->s, NULL, 0, &b, 0, &got, &tier), 0);
	assert_int_equal(got, 0);
	assert_int_equal(tier, READ_EOF);

	/* Hot: from the tail cache, one run at a time. */
	assert_int_equal(page(&t, m, NULL, 0, 4096, READ_HOT), 100);
	assert_int_equal(page(&t, m, NULL, 150, 4096, READ_HOT), 150);
	assert_int_equal(page(&t, m, NULL, 599, 4096, READ_HOT), 1);
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_GET, NULL), 0);
	assert_int_equal(kv_calls(t.ck), 0);

	/* Not cached, not absorbed: the transit slot via the flight index. */
	tailcache_drop_stream(t.f->tc, m->s->id);
	assert_int_equal(page(&t, m, NULL, 0, 4096, READ_FLIGHT), 100);
	assert_int_equal(page(&t, m, NULL, 350, 4096, READ_FLIGHT), 250);
	assert_int_equal(kv_calls(t.ck), 0); /* no metastore read above the frontier */
	assert_true(fake_store_calls(t.f->fs, FAKE_GET, NULL) > 0);

	/* Absorbed: below the frontier, cold. */
	efx_unhold(t.f);
	settle(&t);
	assert_int_equal(atomic_load(&m->s->frontier_byte), 600);
	assert_int_equal(page(&t, m, NULL, 0, 4096, READ_COLD), 100);
	assert_int_equal(page(&t, m, NULL, 100, 4096, READ_COLD), 200);
	assert_int_equal(page(&t, m, NULL, 599, 4096, READ_COLD), 1);

	/* New appends are hot again. */
	put_sync(&t, m, 50);
	assert_int_equal(page(&t, m, NULL, 600, 4096, READ_HOT), 50);
	page(&t, m, NULL, 650, 4096, READ_EOF);

	/* Below the trim watermark: zeros, checked before anything else. */
	pthread_mutex_lock(&m->s->lock);
	atomic_store(&m->s->trim_seq, 2);
	atomic_store(&m->s->trim_byte, 300);
	pthread_mutex_unlock(&m->s->lock);
	{
		unsigned before = kv_calls(t.ck);

		assert_int_equal(page(&t, m, NULL, 0, 4096, READ_TRIM), 300);
		assert_int_equal(page(&t, m, NULL, 299, 4096, READ_TRIM), 1);
		assert_int_equal(page(&t, m, NULL, 10, 5, READ_TRIM), 5);
		assert_int_equal(kv_calls(t.ck), before);
	}
	assert_int_equal(page(&t, m, NULL, 300, 4096, READ_COLD), 300);
	rt_free(&t);
}

/* Tail cache budget 0: above the frontier a read goes to the transit
 * slot named by the flight index: one footer GET and one chunk GET. */
static void test_read_flight_tier_without_cache(void **state)
{
	struct rt t = { .f = *state };
	struct model *m;
	char key[CHAIN_KEY_MAX];

	start(t.f, 0, true, 64u << 10);
	rt_engine(&t, true, 8u << 20, 0, 0);
	m = rt_stream(&t, "x");
	for (int i = 0; i < 4; i++)
		put_sync(&t, m, 1000);
	assert_true(NV_STAT_GET(&t.f->stats, tail_cache_skipped) >= 4);
	assert_int_equal(tailcache_bytes(t.f->tc), 0);

	fake_store_reset_calls(t.f->fs);
	assert_int_equal(page(&t, m, NULL, 0, 4096, READ_FLIGHT), 1000);
	assert_int_equal(gets_of(t.f, efx_slot_key(t.f, 0, key)), 2);
	assert_int_equal(page(&t, m, NULL, 500, 4096, READ_FLIGHT), 500);
	assert_int_equal(gets_of(t.f, key), 2); /* footer and chunk cached */
	assert_int_equal(page(&t, m, NULL, 1000, 4096, READ_FLIGHT), 1000);
	assert_int_equal(gets_of(t.f, efx_slot_key(t.f, 1, key)), 2);
	assert_int_equal(page(&t, m, NULL, 3999, 4096, READ_FLIGHT), 1);
	assert_int_equal(kv_calls(t.ck), 0);
	rt_free(&t);
}

/* Below the frontier: one floor lookup per page, then ranged GETs of the
 * footer window and of exactly the chunk (never the whole object), each
 * fetched once. */
/* Stream x, absorbed: slot 0 one small record (key0), slot 1 twenty
 * records in several chunks (key, layout ly); the store's counters reset. */
static struct model *two_slots(struct rt *t, char *key, char *key0, struct layout *ly)
{
	struct efx_rec *first, *r;
	struct model *m;

	start(t->f, 0, false, 4096);
	first = efx_recs(t->f, 21);
	r = first + 1;
	rt_engine(t, true, 8u << 20, 0, 0);
	m = rt_stream(t, "x");
	fake_store_gate(t->f->fs, efx_slot_key(t->f, 0, key0));
	put_async(t, m, 10, first);
	assert_true(fake_store_wait_parked(t->f->fs, key0, 1, WAIT_MS));
	/* Hold the rest in the open flight: linger can't seal it. */
	for (int i = 0; i < 20; i++)
		put_async(t, m, 1000, &r[i]);
	fake_store_open_gate(t->f->fs, key0);
	settle(t);
	assert_true(efx_wait_done(t->f, 21, WAIT_MS));
	assert_int_equal(atomic_load(&m->s->frontier_byte), m->len);
	efx_slot_key(t->f, 1, key);
	slot_layout(t->f, 1, ly);
	assert_true(ly->n >= 3);
	fake_store_reset_calls(t->f->fs);
	return m;
}

static void test_read_cold_one_floor_and_ranged_gets(void **state)
{
	struct rt t = { .f = *state };
	struct model *m;
	struct layout ly;
	struct store_stats s0, s1;
	char key[CHAIN_KEY_MAX], key0[CHAIN_KEY_MAX];
	uint64_t c1, c2;

	m = two_slots(&t, key, key0, &ly);
	c1 = ly.e[1].first_byte;
	c2 = ly.e[2].first_byte;
	store_get_stats(t.f->store, &s0);
	atomic_store(&t.ck->floors, 0);
	atomic_store(&t.ck->gets, 0);
	atomic_store(&t.ck->ranges, 0);
	atomic_store(&t.ck->commits, 0);

	/* First read inside chunk 1: one floor, one footer GET, one chunk GET. */
	assert_int_equal(page(&t, m, NULL, c1 + 7, 1u << 20, READ_COLD), c2 - c1 - 7);
	assert_int_equal(atomic_load(&t.ck->floors), 1);
	assert_int_equal(kv_calls(t.ck), 1);
	assert_int_equal(gets_of(t.f, key), 2);
	assert_int_equal(NV_STAT_GET(&t.f->stats, footer_fetches), 1);
	assert_int_equal(NV_STAT_GET(&t.f->stats, chunk_fetches), 1);
	store_get_stats(t.f->store, &s1);
	assert_int_equal(s1.bytes_got - s0.bytes_got, ly.flen + ly.e[1].comp_len);

	/* Same chunk again: no GET at all, a read-cache hit. */
	assert_int_equal(page(&t, m, NULL, c1, 100, READ_COLD), 100);
	assert_int_equal(gets_of(t.f, key), 2);
	assert_int_equal(NV_STAT_GET(&t.f->stats, read_cache_hits), 1);
	assert_int_equal(atomic_load(&t.ck->floors), 2);

	/* The next chunk of the same slot: its chunk only. */
	assert_int_equal(page(&t, m, NULL, c2, 1u << 20, READ_COLD),
			 ly.e[2].first_byte + bundle_entry_body_bytes(&ly.e[2]) - c2);
	assert_int_equal(gets_of(t.f, key), 3);
	assert_int_equal(NV_STAT_GET(&t.f->stats, footer_fetches), 1);
	assert_int_equal(NV_STAT_GET(&t.f->stats, chunk_fetches), 2);

	/* Another slot: its footer and chunk. */
	assert_int_equal(page(&t, m, NULL, 3, 4096, READ_COLD), 7);
	assert_int_equal(gets_of(t.f, key0), 2);
	assert_int_equal(atomic_load(&t.ck->floors), 4);
	assert_int_equal(kv_calls(t.ck), 4);
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_HEAD, NULL), 0);
	assert_int_equal(NV_STAT_GET(&t.f->stats, cold_reads), 4);
	rt_free(&t);
}

/* With whole_max (an object store's read): a small slot that is mostly
 * the stream's is one GET, footer and every chunk of the stream; one too
 * large for whole_max, or mostly other streams', reads as before. */
static void test_read_cold_whole_small_slot(void **state)
{
	struct rt t = { .f = *state, .whole_max = 1u << 20 };
	struct model *m, *y;
	struct layout ly;
	struct efx_rec *r;
	char key[CHAIN_KEY_MAX], key0[CHAIN_KEY_MAX], key2[CHAIN_KEY_MAX];

	m = two_slots(&t, key, key0, &ly);
	assert_int_equal(page(&t, m, NULL, ly.e[1].first_byte + 7, 1u << 20, READ_COLD),
			 ly.e[2].first_byte - ly.e[1].first_byte - 7);
	assert_int_equal(gets_of(t.f, key), 1);
	assert_int_equal(NV_STAT_GET(&t.f->stats, whole_fetches), 1);
	assert_int_equal(NV_STAT_GET(&t.f->stats, footer_fetches), 1);
	assert_int_equal(NV_STAT_GET(&t.f->stats, chunk_fetches), 0);
	/* Every chunk of the slot came with it: the whole stream, no GET. */
	for (uint32_t i = 0; i < ly.n; i++)
		assert_true(page(&t, m, NULL, ly.e[i].first_byte, 1u << 20, READ_COLD) > 0);
	assert_int_equal(gets_of(t.f, key), 1);
	assert_int_equal(NV_STAT_GET(&t.f->stats, chunk_fetches), 0);
	assert_int_equal(page(&t, m, NULL, 3, 4096, READ_COLD), 7);
	assert_int_equal(gets_of(t.f, key0), 1);

	/* Too large for whole_max: footer, then chunk. */
	t.whole_max = 1000;
	rt_engine(&t, true, 8u << 20, 0, 0);
	fake_store_reset_calls(t.f->fs);
	assert_int_equal(page(&t, m, NULL, ly.e[1].first_byte, 100, READ_COLD), 100);
	assert_int_equal(gets_of(t.f, key), 2);

	/* Slot 3: mostly another stream's bytes: footer, then chunk. */
	t.whole_max = 1u << 20;
	rt_engine(&t, true, 8u << 20, 0, 0);
	y = rt_stream(&t, "y");
	r = efx_recs(t.f, 3);
	fake_store_gate(t.f->fs, efx_slot_key(t.f, 2, key2));
	put_async(&t, m, 10, &r[0]);
	assert_true(fake_store_wait_parked(t.f->fs, key2, 1, WAIT_MS));
	put_async(&t, y, 200000, &r[1]);
	put_async(&t, m, 10, &r[2]);
	fake_store_open_gate(t.f->fs, key2);
	settle(&t);
	assert_true(efx_wait_done(t.f, 24, WAIT_MS));
	assert_int_equal(chain_next_slot(t.f->chain), 4);
	efx_slot_key(t.f, 3, key2);
	fake_store_reset_calls(t.f->fs);
	assert_int_equal(page(&t, m, NULL, m->len - 10, 100, READ_COLD), 10);
	assert_int_equal(gets_of(t.f, key2), 2);
	rt_free(&t);
}

/* A read_page() on another thread (cmocka's asserts stay on the main one). */
struct bg_read {
	struct rt *t;
	struct model *m;
	uint64_t off;
	uint8_t buf[4096];
	size_t got;
	enum read_tier tier;
	int rc;
};

static void *bg_read_main(void *arg)
{
	struct bg_read *b = arg;

	b->rc = read_page(b->t->re, b->m->s, NULL, b->off, b->buf, sizeof(b->buf), &b->got,
			  &b->tier);
	return NULL;
}

/* A reader that comes while another has read a small slot whole and
 * published its footer, but not yet its chunks, waits for its chunk
 * instead of GETting it again: the chunks are claimed before the footer
 * is published (chunkfetch.c).  24-48 of 256 slots were fetched twice on
 * RGW before. */
static void test_read_cold_whole_no_second_get(void **state)
{
	struct rt t = { .f = *state, .whole_max = 1u << 20 };
	struct bg_read a = { .t = &t };
	char key[CHAIN_KEY_MAX], key0[CHAIN_KEY_MAX];
	struct layout ly;
	pthread_t th;

	a.m = two_slots(&t, key, key0, &ly);
	a.off = ly.e[1].first_byte;
	assert_int_equal(nv_fp_arm("read.whole_published=delay:300"), 0);
	assert_int_equal(pthread_create(&th, NULL, bg_read_main, &a), 0);
	for (int i = 0; i < WAIT_MS && nv_fp_hits("read.whole_published") == 0; i++)
		usleep(1000); /* until a stands in the window */
	assert_int_equal(nv_fp_hits("read.whole_published"), 1);
	assert_true(page(&t, a.m, NULL, ly.e[2].first_byte, 4096, READ_COLD) > 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	nv_fp_reset();
	assert_int_equal(a.rc, 0);
	assert_int_equal(a.tier, READ_COLD);
	assert_true(a.got > 0);
	assert_memory_equal(a.buf, a.m->bytes + a.off, a.got);
	assert_int_equal(gets_of(t.f, key), 1);
	assert_int_equal(NV_STAT_GET(&t.f->stats, chunk_fetches), 0);
	rt_free(&t);
}

/* ============================================================ limits */

static void test_read_page_limits(void **state)
{
	struct rt t = { .f = *state };
	struct model *big, *small, *lead;
	struct efx_rec *r;
	char key0[CHAIN_KEY_MAX];
	const size_t BIG = 600u << 10;
	unsigned n = 1;

	start(t.f, 16u << 20, true, 4u << 20);
	r = efx_recs(t.f, 3100);
	rt_engine(&t, true, 32u << 20, 0, 0);
	lead = rt_stream(&t, "lead");
	big = rt_stream(&t, "big");
	small = rt_stream(&t, "small");
	/* One flight holding 3 big records and 3000 one-byte records. */
	fake_store_gate(t.f->fs, efx_slot_key(t.f, 0, key0));
	put_async(&t, lead, 1, &r[0]);
	assert_true(fake_store_wait_parked(t.f->fs, key0, 1, WAIT_MS));
	for (int i = 0; i < 3; i++, n++)
		put_async(&t, big, BIG, &r[n]);
	for (int i = 0; i < 3000; i++, n++)
		put_async(&t, small, 1, &r[n]);
	fake_store_open_gate(t.f->fs, key0);
	assert_int_equal(chain_drain(t.f->chain), 0);
	assert_true(efx_wait_done(t.f, n, WAIT_MS));
	assert_int_equal(chain_next_slot(t.f->chain), 2);

	/* Hot. */
	assert_int_equal(page(&t, big, NULL, 0, 4u << 20, READ_HOT), READ_PAGE_MAX);
	assert_int_equal(page(&t, big, NULL, 100, 4u << 20, READ_HOT), READ_PAGE_MAX);
	assert_int_equal(page(&t, big, NULL, 2 * BIG, 4u << 20, READ_HOT), BIG);
	assert_int_equal(page(&t, big, NULL, BIG, 1, READ_HOT), 1);
	assert_int_equal(page(&t, small, NULL, 0, 100000, READ_HOT), READ_PAGE_RECORDS);
	assert_int_equal(page(&t, small, NULL, 2500, 100000, READ_HOT), 500);
	/* The flight tier. */
	tailcache_drop_stream(t.f->tc, big->s->id);
	tailcache_drop_stream(t.f->tc, small->s->id);
	assert_int_equal(page(&t, big, NULL, 0, 4u << 20, READ_FLIGHT), READ_PAGE_MAX);
	assert_int_equal(page(&t, big, NULL, BIG - 1, 4u << 20, READ_FLIGHT), READ_PAGE_MAX);
	assert_int_equal(page(&t, big, NULL, BIG, 1, READ_FLIGHT), 1);
	assert_int_equal(page(&t, small, NULL, 0, 100000, READ_FLIGHT), READ_PAGE_RECORDS);
	assert_int_equal(page(&t, small, NULL, 1, 100000, READ_FLIGHT), READ_PAGE_RECORDS);
	/* Cold. */
	efx_unhold(t.f);
	settle(&t);
	assert_int_equal(page(&t, big, NULL, 0, 4u << 20, READ_COLD), READ_PAGE_MAX);
	assert_int_equal(page(&t, big, NULL, 3 * BIG - 10, 4u << 20, READ_COLD), 10);
	assert_int_equal(page(&t, small, NULL, 0, 100000, READ_COLD), READ_PAGE_RECORDS);
	assert_int_equal(page(&t, small, NULL, 2999, 100000, READ_COLD), 1);
	assert_int_equal(page(&t, small, NULL, 0, 10, READ_COLD), 10);
	rt_free(&t);
}

/* Gather the iovecs sink got from index k on into dst: the bytes. */
static size_t gather(const struct read_sink *sink, int k, uint8_t *dst)
{
	size_t n = 0;

	for (; k < sink->niov; k++) {
		memcpy(dst + n, sink->iov[k].iov_base, sink->iov[k].iov_len);
		n += sink->iov[k].iov_len;
	}
	return n;
}

/* Random ranges over three tiers, filled page by page like fs/ does:
 * copied (read_page()), or every other range handed to a small sink
 * (read_page_sink(): pages from chunks, cold or of a slot the flight
 * index names, as iovecs into the pinned chunks, copied when the sink
 * has no room left). */
static void test_read_random_ranges(void **state)
{
	struct rt t = { .f = *state };
	struct model *m[2];
	struct efx_opts o;
	struct efx_rec *r;
	uint64_t seed = 7;
	unsigned n = 0, seen[5] = { 0 }, sunk_pages = 0, full_copies = 0;
	uint8_t *buf = malloc(300000);
	struct iovec iov[8];
	struct rc_blob *pins[3];

	assert_non_null(buf);
	efx_opts_default(&o);
	o.tail_cache_bytes = 96u << 10;
	o.flight_max = 16u << 10;
	o.chunk_target = 4096;
	efx_start(t.f, &o);
	r = efx_recs(t.f, 700);
	rt_engine(&t, true, 1u << 20, 0, 0);
	m[0] = rt_stream(&t, "a");
	m[1] = rt_stream(&t, "b");
	for (int i = 0; i < 600; i++, n++) {
		size_t len = efx_rand(&seed) % 3000;

		if (efx_rand(&seed) % 10 == 0)
			len = 0;
		put_async(&t, m[i % 2], len, &r[n]);
	}
	settle(&t);
	/* A tail that is acked but not absorbed. */
	efx_hold(t.f);
	for (int i = 0; i < 60; i++, n++)
		put_async(&t, m[i % 2], efx_rand(&seed) % 3000, &r[n]);
	assert_int_equal(chain_drain(t.f->chain), 0);
	assert_true(efx_wait_done(t.f, n, WAIT_MS));
	assert_true(atomic_load(&m[0]->s->frontier_byte) < m[0]->len);
	tailcache_drop_stream(t.f->tc, m[1]->s->id); /* b's tail: flight tier */

	for (int k = 0; k < 400; k++) {
		struct model *x = m[k % 2];
		uint64_t off = efx_rand(&seed) % (x->len + 100);
		size_t len = (size_t)(efx_rand(&seed) % 300000), done = 0;
		struct read_sink sink = { .iov = iov, .maxiov = 1 + (int)(efx_rand(&seed) % 8),
					  .pins = pins, .maxpins = 1 + (int)(efx_rand(&seed) % 3) };

		if (k % 17 == 0)
			off = x->len - (efx_rand(&seed) % 50); /* near the end */
		while (done < len) {
			enum read_tier tier;
			int k0 = sink.niov, p0 = sink.npins;
			size_t got;

			if (k % 2) {
				assert_int_equal(read_page_sink(t.re, x->s, NULL, off + done,
								buf + done, len - done, &sink,
								&got, &tier),
						 0);
			} else {
				assert_int_equal(read_page(t.re, x->s, NULL, off + done,
							   buf + done, len - done, &got, &tier),
						 0);
			}
			if (sink.npins != p0) { /* sunk */
				assert_true(tier == READ_COLD || tier == READ_FLIGHT);
				assert_int_equal(sink.npins, p0 + 1);
				assert_int_equal(gather(&sink, k0, buf + done), got);
				sunk_pages++;
			} else {
				assert_int_equal(sink.niov, k0);
				assert_int_equal(sink.npins, p0);
				full_copies += k % 2 && tier == READ_COLD; /* no room */
			}
			seen[tier]++;
			assert_true(got <= READ_PAGE_MAX);
			if (tier == READ_EOF) {
				assert_int_equal(got, 0);
				assert_true(off + done >= x->len);
				break;
			}
			assert_true(got > 0);
			done += got;
		}
		if (off < x->len)
			assert_int_equal(done, len < x->len - off ? len : x->len - off);
		if (done)
			assert_memory_equal(buf, x->bytes + off, done);
		for (int i = 0; i < sink.npins; i++)
			rc_blob_unref(sink.pins[i]);
	}
	assert_true(sunk_pages > 0);
	assert_true(full_copies > 0);
	assert_true(seen[READ_HOT] > 0);
	assert_true(seen[READ_FLIGHT] > 0);
	assert_true(seen[READ_COLD] > 0);
	assert_true(seen[READ_EOF] > 0);
	efx_unhold(t.f);
	free(buf);
	rt_free(&t);
}

/* ============================================================ damage */

static void test_read_corrupt_objects_eio(void **state)
{
	struct rt t = { .f = *state };
	struct model *m;
	struct layout ly;
	char key[CHAIN_KEY_MAX];
	uint64_t corrupt = 0;

	start(t.f, 0, false, 64u << 10);
	rt_engine(&t, true, 8u << 20, 0, 0);
	m = rt_stream(&t, "x");
	for (int i = 0; i < 5; i++)
		put_sync(&t, m, 500);
	settle(&t);

	/* A flipped byte in a chunk: -EIO, counted, never bytes. */
	slot_layout(t.f, 0, &ly);
	efx_slot_key(t.f, 0, key);
	assert_int_equal(fake_store_flip(t.f->fs, key, ly.e[0].chunk_off + 17), 0);
	assert_int_equal(page_err(&t, m, 3), -EIO);
	assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), ++corrupt);
	/* Failures are not cached: repaired, it reads. */
	assert_int_equal(fake_store_flip(t.f->fs, key, ly.e[0].chunk_off + 17), 0);
	assert_int_equal(page(&t, m, NULL, 3, 4096, READ_COLD), 497);

	/* A flipped byte in a footer entry. */
	slot_layout(t.f, 1, &ly);
	efx_slot_key(t.f, 1, key);
	assert_int_equal(fake_store_flip(t.f->fs, key, ly.foff + 9), 0);
	assert_int_equal(page_err(&t, m, 500), -EIO);
	assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), ++corrupt);

	/* A flipped byte in the trailer (inside the footer window). */
	slot_layout(t.f, 2, &ly);
	efx_slot_key(t.f, 2, key);
	assert_int_equal(fake_store_flip(t.f->fs, key, ly.foff + ly.flen - 5), 0);
	assert_int_equal(page_err(&t, m, 1000), -EIO);
	assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), ++corrupt);

	/* A missing slot. */
	{
		const char *keys[1] = { key };

		efx_slot_key(t.f, 3, key);
		assert_int_equal(store_delete(t.f->store, keys, 1), 0);
		assert_int_equal(page_err(&t, m, 1500), -EIO);
		assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), ++corrupt);
	}
	/* Store errors that are not damage pass through (and are not counted). */
	fake_store_fail(t.f->fs, FAKE_GET, efx_slot_key(t.f, 4, key), EIO, 1);
	assert_int_equal(page_err(&t, m, 2000), -EIO);
	assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), corrupt);
	assert_int_equal(page(&t, m, NULL, 2000, 4096, READ_COLD), 500);
	rt_free(&t);
}

/* The same in the flight tier (held, uncached). */
static void test_read_corrupt_transit_slot_eio(void **state)
{
	struct rt t = { .f = *state };
	struct model *m;
	struct layout ly;
	char key[CHAIN_KEY_MAX];

	start(t.f, 0, true, 64u << 10);
	rt_engine(&t, true, 8u << 20, 0, 0);
	m = rt_stream(&t, "x");
	put_sync(&t, m, 500);
	put_sync(&t, m, 500);
	slot_layout(t.f, 0, &ly);
	efx_slot_key(t.f, 0, key);
	assert_int_equal(fake_store_flip(t.f->fs, key, ly.e[0].chunk_off), 0);
	assert_int_equal(page_err(&t, m, 0), -EIO);
	assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), 1);
	{
		const char *keys[1] = { key };

		efx_slot_key(t.f, 1, key);
		assert_int_equal(store_delete(t.f->store, keys, 1), 0);
		assert_int_equal(page_err(&t, m, 700), -EIO);
		assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), 2);
	}
	rt_free(&t);
}

/* ============================================================ read-ahead */

static void test_read_prefetch_sequential(void **state)
{
	struct rt t = { .f = *state };
	struct model *m;
	struct reader *rd;
	uint64_t off = 0;
	const int N = 40;

	start(t.f, 0, false, 64u << 10);
	rt_engine(&t, true, 8u << 20, 2, 4);
	m = rt_stream(&t, "x");
	for (int i = 0; i < N; i++)
		put_sync(&t, m, 3000); /* one slot, one chunk each */
	settle(&t);
	assert_int_equal(NV_STAT_GET(&t.f->stats, chunk_fetches), 0);

	/* Random access without a reader never prefetches. */
	page(&t, m, NULL, 3000 * 20, 4096, READ_COLD);
	page(&t, m, NULL, 3000 * 21, 4096, READ_COLD);
	assert_int_equal(NV_STAT_GET(&t.f->stats, prefetches), 0);

	rd = reader_new(t.re, m->s);
	assert_non_null(rd);
	off += page(&t, m, rd, off, 4096, READ_COLD);
	off += page(&t, m, rd, off, 4096, READ_COLD); /* sequential now */
	if (!efx_poll_stat(t.f, prefetches, 1, WAIT_MS))
		fail_msg("no prefetch after two sequential pages");
	while (off < m->len)
		off += page(&t, m, rd, off, 4096, READ_COLD);
	page(&t, m, rd, off, 4096, READ_EOF);
	reader_free(rd);
	/* Each chunk was fetched exactly once, by the reader or ahead of it,
	 * and some of the reader's pages found theirs already there. */
	assert_int_equal(NV_STAT_GET(&t.f->stats, chunk_fetches), N);
	assert_true(NV_STAT_GET(&t.f->stats, read_cache_hits) > 0);
	rt_free(&t);
}

/* ============================================================ ref windows */

static int count_ref(void *arg, const struct meta_ref *r)
{
	(void)r;
	(*(unsigned *)arg)++;
	return 0;
}

/*
 * A stream of many small span refs (one record, slot and ref each, the
 * shape many small flights leave before settlement) read sequentially by
 * a reader: the refs come in windows of one ranged scan each, not one
 * floor per page (on etcd a floor costs the keys of its window: 4 ms a
 * record at 2,000 refs, 13 ms at 8,000; bench/read_unsettled.sh), and
 * each slot costs its footer and chunk GETs once.
 */
static void test_read_window_many_refs(void **state)
{
	struct rt t = { .f = *state };
	struct model *m;
	struct reader *rd;
	char key[CHAIN_KEY_MAX];
	unsigned nrefs = 0, pages = 0, calls;
	uint64_t off = 0, mid;
	const int N = 300;

	start(t.f, 0, false, 64u << 10);
	rt_engine(&t, true, 8u << 20, 0, 0);
	m = rt_stream(&t, "x");
	for (int i = 0; i < N; i++)
		put_sync(&t, m, 14);
	settle(&t);
	assert_int_equal(meta_ref_list(t.f->kv, m->s->id, 0, 0, count_ref, &nrefs), 0);
	assert_int_equal(nrefs, N); /* one batch per flight */

	fake_store_reset_calls(t.f->fs);
	rd = reader_new(t.re, m->s);
	assert_non_null(rd);
	while (off < m->len) {
		off += page(&t, m, rd, off, 4096, READ_COLD);
		pages++;
	}
	page(&t, m, rd, off, 4096, READ_EOF);
	assert_int_equal(pages, N); /* a page ends where its slot does */
	/* One ascending range per window of 32 refs (each starts where the
	 * last ended: no floor at all). */
	calls = kv_calls(t.ck);
	assert_int_equal(calls, (N + 31) / 32);
	assert_int_equal(atomic_load(&t.ck->floors), 0);
	assert_int_equal(NV_STAT_GET(&t.f->stats, ref_lookups), calls);
	assert_int_equal(fake_store_calls(t.f->fs, FAKE_GET, NULL), 2 * N);
	reader_free(rd);

	/* A reader starting inside a ref: the range, then its floor (a
	 * fresh engine: nothing cached). */
	rt_engine(&t, true, 8u << 20, 0, 0);
	rd = reader_new(t.re, m->s);
	assert_non_null(rd);
	mid = 14 * 100 + 5;
	assert_int_equal(page(&t, m, rd, mid, 4096, READ_COLD), 9);
	assert_int_equal(kv_calls(t.ck), calls + 2);
	assert_int_equal(atomic_load(&t.ck->floors), 1);
	assert_int_equal(page(&t, m, rd, mid + 9, 4096, READ_COLD), 14);
	assert_int_equal(kv_calls(t.ck), calls + 2);

	/* The window gone stale: record 105's ref now names another object
	 * with its bytes (as settlement replaces a span ref by a catalog row,
	 * then deletes the slot).  The read through the window finds the
	 * slot gone, asks the metastore (one floor) and reads the new one;
	 * nothing counted as corrupt. */
	{
		char nkey[CHAIN_KEY_MAX];
		const char *keys[1] = { key };
		struct meta_ref r;
		struct kv_txn *txn = kv_txn_new();
		struct iovec iov;
		uint8_t *obj;
		size_t size;
		uint64_t ver;
		unsigned floors = atomic_load(&t.ck->floors);

		efx_slot_key(t.f, 105, key);
		assert_int_equal(fake_store_copy(t.f->fs, key, &obj, &size), 0);
		iov.iov_base = obj;
		iov.iov_len = size;
		assert_int_equal(store_put(t.f->store, efx_slot_key(t.f, 9999, nkey), &iov, 1, 0),
				 0);
		free(obj);
		meta_ref_init(&r);
		assert_int_equal(meta_ref_get(t.f->kv, m->s->id, 105, &r, &ver), 0);
		assert_int_equal(r.nslots, 1);
		r.slots[0].slot = 9999;
		assert_non_null(txn);
		assert_int_equal(meta_ref_txn_put(txn, &r), 0);
		assert_int_equal(kv_txn_commit(t.f->kv, txn, NULL), 0);
		kv_txn_free(txn);
		meta_ref_clear(&r);
		assert_int_equal(store_delete(t.f->store, keys, 1), 0);

		assert_int_equal(page(&t, m, rd, 14 * 105, 4096, READ_COLD), 14);
		assert_int_equal(atomic_load(&t.ck->floors), floors + 1);
		assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), 0);
		assert_int_equal(gets_of(t.f, nkey), 2);
		assert_int_equal(page(&t, m, rd, 14 * 106, 4096, READ_COLD), 14);
	}

	/* An object gone under the window that is really missing: -EIO,
	 * counted once. */
	{
		const char *keys[1] = { key };
		uint8_t buf[64];
		enum read_tier tier;
		size_t got = 0;

		efx_slot_key(t.f, 110, key);
		assert_int_equal(store_delete(t.f->store, keys, 1), 0);
		assert_int_equal(read_page(t.re, m->s, rd, 14 * 110, buf, sizeof(buf), &got, &tier),
				 -EIO);
		assert_int_equal(got, 0);
		assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), 1);
		assert_int_equal(atomic_load(&t.ck->floors), 3);
		/* The next page reads a new window, and reads. */
		assert_int_equal(page(&t, m, rd, 14 * 111, 4096, READ_COLD), 14);
	}
	reader_free(rd);
	rt_free(&t);
}

/*
 * Invariant 6: another star trimmed the stream to record 4 and the refs
 * below were reclaimed, while this star's view still has no trim point
 * (its view is raised outside reads: star_view_refresh()).  A page below
 * the row's trim point reads as zeros up to it, with or without a
 * reader's window; the record lookup below it is -ERANGE; above it a
 * missing ref is still -EIO; the view itself is left for the refresh.
 */
static void test_read_trimmed_elsewhere(void **state)
{
	struct rt t = { .f = *state };
	struct model *m;
	struct reader *rd;
	struct kv_txn *txn = kv_txn_new();
	uint64_t seq, byte;

	start(t.f, 0, false, 4096);
	rt_engine(&t, true, 8u << 20, 0, 0);
	m = rt_stream(&t, "x");
	for (int i = 0; i < 10; i++)
		put_sync(&t, m, 100); /* one ref each */
	settle(&t);
	assert_int_equal(meta_stream_set_trim(t.f->kv, m->s->id, 4, 400), 0);
	assert_non_null(txn);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(meta_ref_txn_del(txn, m->s->id, i, i * 100), 0);
	assert_int_equal(kv_txn_commit(t.f->kv, txn, NULL), 0);
	kv_txn_free(txn);

	assert_int_equal(page(&t, m, NULL, 0, 4096, READ_TRIM), 400);
	assert_int_equal(page(&t, m, NULL, 150, 100, READ_TRIM), 100);
	rd = reader_new(t.re, m->s);
	assert_non_null(rd);
	assert_int_equal(page(&t, m, rd, 0, 4096, READ_TRIM), 400);
	assert_int_equal(page(&t, m, rd, 400, 4096, READ_COLD), 100);
	assert_int_equal(page(&t, m, rd, 399, 4096, READ_TRIM), 1);
	reader_free(rd);
	assert_int_equal(read_locate_record(t.re, m->s, true, 2, &seq, &byte), -ERANGE);
	assert_int_equal(read_locate_record(t.re, m->s, false, 250, &seq, &byte), -ERANGE);
	assert_int_equal(read_locate_record(t.re, m->s, true, 5, &seq, &byte), 0);
	assert_int_equal(seq, 5);
	assert_int_equal(byte, 500);
	assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), 0);

	/* Above the row's trim point a missing ref is what it always was. */
	txn = kv_txn_new();
	assert_non_null(txn);
	assert_int_equal(meta_ref_txn_del(txn, m->s->id, 6, 600), 0);
	assert_int_equal(kv_txn_commit(t.f->kv, txn, NULL), 0);
	kv_txn_free(txn);
	assert_int_equal(page_err(&t, m, 650), -EIO);
	assert_int_equal(read_locate_record(t.re, m->s, true, 6, &seq, &byte), -EIO);
	/* The view's trim point is the refresh's to raise (with its hook). */
	assert_int_equal(atomic_load(&m->s->trim_byte), 0);
	rt_free(&t);
}

/* Read invariant 6 on a shared metastore: another star trimmed the
 * stream to record 4 and nothing was reclaimed yet (the refs below the
 * point stand, as the settled object holding a trim point starts below
 * it): a stream this star does not lead reads zeros below the row's trim
 * point, by any reader and through a ref window, and a locate there is
 * -ERANGE; one this star leads is read by its own view (the row is not
 * asked). */
static void test_read_trimmed_elsewhere_refs_stand(void **state)
{
	struct rt t = { .f = *state, .shared = true };
	struct model *m;
	struct reader *rd;
	uint64_t seq, byte;

	start(t.f, 0, false, 4096);
	rt_engine(&t, false, 8u << 20, 0, 0);
	m = rt_stream(&t, "x");
	for (int i = 0; i < 10; i++)
		put_sync(&t, m, 100); /* one ref each */
	settle(&t);
	assert_int_equal(meta_stream_set_trim(t.f->kv, m->s->id, 4, 400), 0);

	/* Led here: this star's view is the row (nobody else trims). */
	atomic_store(&m->s->lease_gen, 1);
	assert_int_equal(page(&t, m, NULL, 150, 100, READ_COLD), 50); /* to its slot's end */
	atomic_store(&m->s->lease_gen, 0);

	assert_int_equal(page(&t, m, NULL, 150, 100, READ_TRIM), 100);
	assert_int_equal(page(&t, m, NULL, 0, 4096, READ_TRIM), 400); /* zeros up to the point */
	assert_int_equal(page(&t, m, NULL, 400, 4096, READ_COLD), 100);
	rd = reader_new(t.re, m->s);
	assert_non_null(rd);
	assert_int_equal(page(&t, m, rd, 399, 4096, READ_TRIM), 1);
	assert_int_equal(page(&t, m, rd, 400, 4096, READ_COLD), 100);
	assert_int_equal(page(&t, m, rd, 200, 4096, READ_TRIM), 200); /* the same window */
	reader_free(rd);
	assert_int_equal(read_locate_record(t.re, m->s, true, 2, &seq, &byte), -ERANGE);
	assert_int_equal(read_locate_record(t.re, m->s, false, 250, &seq, &byte), -ERANGE);
	assert_int_equal(read_locate_record(t.re, m->s, true, 5, &seq, &byte), 0);
	assert_int_equal(byte, 500);
	assert_int_equal(NV_STAT_GET(&t.f->stats, corrupt_objects), 0);
	assert_int_equal(atomic_load(&m->s->trim_byte), 0); /* the refresh's to raise */
	rt_free(&t);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, efx_setup, efx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_read_tiers),
		T(test_read_trimmed_elsewhere),
		T(test_read_trimmed_elsewhere_refs_stand),
		T(test_read_flight_tier_without_cache),
		T(test_read_cold_one_floor_and_ranged_gets),
		T(test_read_cold_whole_small_slot),
		T(test_read_cold_whole_no_second_get),
		T(test_read_page_limits),
		T(test_read_random_ranges),
		T(test_read_corrupt_objects_eio),
		T(test_read_corrupt_transit_slot_eio),
		T(test_read_prefetch_sequential),
		T(test_read_window_many_refs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
