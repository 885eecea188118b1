/*
 * test_chain.c - unit tests of engine/chain.c (with engine/flight.c).
 *
 * The chain runs for real (its sealer and put workers) against the fake
 * store (tests/unit/fake_store.h) and a real SQLite metastore and absorb
 * (tests/unit/engine_fixture.h).  Ordering is made deterministic with
 * the fake store's gates: a gated slot PUT parks until the test opens
 * it, so "slot 1 and 2 are durable, slot 0 is not" is a state the test
 * builds and observes, not a race it hopes to win.  Where a test must
 * show that something does NOT happen, it first waits for the event that
 * would trigger it (a PUT finished, a writer parked on the backlog), then
 * watches for a short bounded window.
 *
 * Pinned: contiguous per-stream seqs under concurrent writers; every
 * completion exactly once; acknowledgement strictly in slot order
 * whatever order the PUTs finish in (invariant 1 of DESIGN.md); acked
 * end and ack hook before completions; sealing by size, idle, linger and
 * the put window; backlog back-pressure never failing a writer; halting
 * on a permanent PUT failure or a taken slot; drain; slot keys and the
 * bundles in them (decoded and compared byte for byte); the per-class
 * linger a star gives each chain (star_class_linger_ns()).
 */
#include "config.h"
#include "tests/unit/engine_fixture.h"
#include "tests/unit/fake_store.h"
#include "engine/bundle.h"
#include "engine/star.h"
#include "src/base/clock.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define WAIT_MS 60000 /* must happen (valgrind is slow) */
#define STILL_MS 100  /* must not happen, watched for this long */

/* ------------------------------------------------------------ helpers */

static bool still_no_completion(struct efx *f, unsigned have)
{
	/* Nothing may arrive in the window. */
	return !efx_wait_done(f, have + 1, STILL_MS);
}

static uint64_t flights(struct efx *f)
{
	return NV_STAT_GET(&f->stats, flights);
}

static void gate_slot(struct efx *f, uint64_t slot)
{
	char key[CHAIN_KEY_MAX];

	fake_store_gate(f->fs, efx_slot_key(f, slot, key));
}

static void open_slot(struct efx *f, uint64_t slot)
{
	char key[CHAIN_KEY_MAX];

	fake_store_open_gate(f->fs, efx_slot_key(f, slot, key));
}

static void wait_parked(struct efx *f, uint64_t slot)
{
	char key[CHAIN_KEY_MAX];

	if (!fake_store_wait_parked(f->fs, efx_slot_key(f, slot, key), 1, WAIT_MS))
		fail_msg("the PUT of slot %llu never reached its gate", (unsigned long long)slot);
}

static void wait_landed(struct efx *f, uint64_t slot)
{
	char key[CHAIN_KEY_MAX];

	if (!fake_store_wait_key(f->fs, efx_slot_key(f, slot, key), WAIT_MS))
		fail_msg("slot %llu never landed", (unsigned long long)slot);
}

static void wait_flights(struct efx *f, uint64_t n)
{
	if (!efx_poll_stat(f, flights, n, WAIT_MS))
		fail_msg("only %llu flights sealed, expected %llu",
			 (unsigned long long)flights(f), (unsigned long long)n);
}

static void must_done(struct efx *f, unsigned n)
{
	if (!efx_wait_done(f, n, WAIT_MS))
		fail_msg("%u completions, expected %u", efx_done_count(f), n);
}

/* A body of len bytes that depends on (tag, i) only. */
static void body_of(uint8_t *buf, size_t len, uint64_t tag, uint64_t i)
{
	efx_fill(buf, len, tag, i);
}

static void append_async(struct efx *f, struct nv_stream *s, size_t len, uint64_t tag,
			 struct efx_rec *r)
{
	uint8_t *buf = malloc(len ? len : 1);

	assert_non_null(buf);
	body_of(buf, len, tag, 0);
	assert_int_equal(efx_append(f, s, buf, len, r), 0);
	free(buf); /* chain_append copies */
}

/* ------------------------------------------------- bundle verification */

struct smodel {
	uint64_t id;
	uint8_t *bytes; /* expected stream bytes [0, len) */
	size_t len;
	uint64_t nrec;
	/* walk state */
	uint64_t next_seq, next_byte, last_ts;
};

/* Decode every slot of the fixture's chain, in slot order, and check the
 * records of every stream against the models: seqs and offsets
 * contiguous, bytes equal, timestamps non-decreasing, nothing missing. */
static void verify_bundles(struct efx *f, struct smodel *m, int nm)
{
	uint64_t nslots = chain_next_slot(f->chain);
	char prefix[CHAIN_KEY_MAX];

	assert_int_equal(fake_store_count_objects(f->fs, efx_chain_prefix(f, prefix)), nslots);
	for (int j = 0; j < nm; j++) {
		m[j].next_seq = 0;
		m[j].next_byte = 0;
		m[j].last_ts = 0;
	}
	for (uint64_t slot = 0; slot < nslots; slot++) {
		char key[CHAIN_KEY_MAX];
		uint8_t *obj;
		size_t size;
		uint64_t foff;
		uint32_t flen;
		struct bundle_footer ft;

		efx_slot_key(f, slot, key);
		assert_int_equal(fake_store_copy(f->fs, key, &obj, &size), 0);
		assert_true(size >= BUNDLE_TRAILER_SIZE);
		assert_int_equal(bundle_trailer_parse(obj + size - BUNDLE_TRAILER_SIZE,
						      BUNDLE_TRAILER_SIZE, size, &foff, &flen),
				 0);
		assert_int_equal(bundle_footer_open(obj + foff, flen, foff, &ft), 0);
		assert_true(ft.n > 0); /* a slot is never empty */
		for (uint32_t i = 0; i < ft.n; i++) {
			struct bundle_entry e;
			struct nv_buf raw;
			struct bundle_rec rec;
			struct smodel *x = NULL;
			size_t off = 0;
			int rc;

			assert_int_equal(bundle_footer_get(&ft, i, &e), 0);
			for (int j = 0; j < nm; j++)
				if (m[j].id == e.stream_id)
					x = &m[j];
			assert_non_null(x);
			assert_int_equal(e.first_seq, x->next_seq);
			assert_int_equal(e.first_byte, x->next_byte);
			assert_true(e.chunk_off + e.comp_len <= foff);
			nv_buf_init(&raw, e.raw_len);
			assert_int_equal(bundle_chunk_decode(&e, obj + e.chunk_off, e.comp_len, &raw),
					 0);
			while ((rc = bundle_frames_next(raw.ptr, raw.len, &off, &rec)) == 1) {
				assert_true(x->next_byte + rec.len <= x->len);
				if (rec.len)
					assert_memory_equal(rec.body, x->bytes + x->next_byte,
							    rec.len);
				assert_true(rec.ts >= x->last_ts);
				assert_true(rec.ts <= e.max_ts);
				x->last_ts = rec.ts;
				x->next_byte += rec.len;
				x->next_seq++;
			}
			assert_int_equal(rc, 0);
			assert_int_equal(x->next_seq, e.first_seq + e.nrec);
			nv_buf_free(&raw);
		}
		free(obj);
	}
	for (int j = 0; j < nm; j++) {
		assert_int_equal(m[j].next_seq, m[j].nrec);
		assert_int_equal(m[j].next_byte, m[j].len);
	}
}

/* ===================================================== seqs and bundles */

#define W_RECS 150

struct writer {
	struct efx *f;
	struct nv_stream *s;
	uint64_t tag;
	int n;
	struct efx_rec recs[W_RECS];
	uint32_t lens[W_RECS];
	int rc;
	pthread_t th;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint8_t *buf = malloc(4096);

	if (!buf) {
		w->rc = -ENOMEM;
		return NULL;
	}
	for (int i = 0; i < w->n; i++) {
		body_of(buf, w->lens[i], w->tag, (uint64_t)i);
		w->rc = efx_append(w->f, w->s, buf, w->lens[i], &w->recs[i]);
		if (w->rc)
			break;
	}
	free(buf);
	return NULL;
}

struct seqrec {
	uint64_t seq;
	struct writer *w;
	int i;
};

static int seqrec_cmp(const void *a, const void *b)
{
	const struct seqrec *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void test_chain_contiguous_seqs_and_bundles(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s[4];
	struct writer *w = calloc(6, sizeof(*w));
	struct smodel m[4];
	uint64_t seed = 42, total = 0;
	char name[16];

	assert_non_null(w);
	efx_opts_default(&o);
	o.flight_max = 16 << 10; /* many flights */
	o.chunk_target = 4096;   /* several chunks per run */
	efx_start(f, &o);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "st%d", i);
		s[i] = efx_stream(f, name, -1);
	}
	/* Writers 0..3 own streams 0..3; writers 4 and 5 share stream 3. */
	for (int k = 0; k < 6; k++) {
		w[k].f = f;
		w[k].s = s[k < 4 ? k : 3];
		w[k].tag = 1000 + (uint64_t)k;
		w[k].n = W_RECS;
		for (int i = 0; i < W_RECS; i++) {
			/* Include empty records and sizes around chunk_target. */
			uint64_t r = efx_rand(&seed);

			w[k].lens[i] = (uint32_t)(r % 7 == 0 ? 0 : r % 4000);
		}
		assert_int_equal(pthread_create(&w[k].th, NULL, writer_main, &w[k]), 0);
	}
	for (int k = 0; k < 6; k++) {
		assert_int_equal(pthread_join(w[k].th, NULL), 0);
		assert_int_equal(w[k].rc, 0);
		total += (uint64_t)w[k].n;
	}
	assert_int_equal(chain_drain(f->chain), 0);
	must_done(f, (unsigned)total);

	/* Every completion exactly once, successful. */
	for (int k = 0; k < 6; k++)
		for (int i = 0; i < W_RECS; i++) {
			struct efx_rec r = efx_rec_get(f, &w[k].recs[i]);

			assert_int_equal(r.calls, 1);
			assert_int_equal(r.err, 0);
		}
	assert_int_equal(efx_done_count(f), total);

	/* Per stream: seqs 0..n-1; a single writer's in its own order. */
	for (int j = 0; j < 4; j++) {
		struct seqrec *sr = calloc(3 * W_RECS, sizeof(*sr));
		int n = 0;
		size_t len = 0;

		assert_non_null(sr);
		for (int k = 0; k < 6; k++) {
			uint64_t prev = 0;

			if (w[k].s != s[j])
				continue;
			for (int i = 0; i < W_RECS; i++) {
				if (i)
					assert_true(w[k].recs[i].seq > prev);
				prev = w[k].recs[i].seq;
				if (k < 3)
					assert_int_equal(w[k].recs[i].seq, (uint64_t)i);
				sr[n].seq = w[k].recs[i].seq;
				sr[n].w = &w[k];
				sr[n].i = i;
				n++;
				len += w[k].lens[i];
			}
		}
		qsort(sr, (size_t)n, sizeof(*sr), seqrec_cmp);
		m[j].id = s[j]->id;
		m[j].nrec = (uint64_t)n;
		m[j].len = len;
		m[j].bytes = malloc(len ? len : 1);
		assert_non_null(m[j].bytes);
		len = 0;
		for (int q = 0; q < n; q++) {
			struct writer *x = sr[q].w;
			struct efx_rec r = efx_rec_get(f, &x->recs[sr[q].i]);

			assert_int_equal(sr[q].seq, (uint64_t)q); /* contiguous */
			body_of(m[j].bytes + len, x->lens[sr[q].i], x->tag, (uint64_t)sr[q].i);
			len += x->lens[sr[q].i];
			/* Invariant 3: the acked end covered the record before
			 * its completion ran. */
			assert_true(r.acked_at_cb >= len);
		}
		assert_int_equal(atomic_load(&s[j]->acked_seq), (uint64_t)n);
		assert_int_equal(stream_acked_byte(s[j]), len);
		assert_int_equal(s[j]->next_seq, (uint64_t)n);
		free(sr);
	}

	/* Stats agree. */
	assert_int_equal(NV_STAT_GET(&f->stats, appends), total);
	assert_int_equal(NV_STAT_GET(&f->stats, append_errors), 0);
	assert_int_equal(NV_STAT_GET(&f->stats, slots_written), chain_next_slot(f->chain));
	assert_int_equal(flights(f), chain_next_slot(f->chain));
	assert_true(chain_next_slot(f->chain) > 1);

	/* The slots hold exactly the records, as valid bundles. */
	verify_bundles(f, m, 4);
	for (int j = 0; j < 4; j++)
		free(m[j].bytes);
	free(w);
}

struct keylist {
	char keys[256][CHAIN_KEY_MAX];
	int n;
};

static int keylist_fn(void *arg, const char *key, uint64_t size)
{
	struct keylist *kl = arg;

	(void)size;
	if (kl->n < 256)
		snprintf(kl->keys[kl->n], CHAIN_KEY_MAX, "%s", key);
	kl->n++;
	return 0;
}

static void test_chain_slot_keys(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	struct keylist *kl = calloc(1, sizeof(*kl));
	char buf[CHAIN_KEY_MAX], want[CHAIN_KEY_MAX];
	uint8_t body[10] = { 0 };

	assert_non_null(kl);
	assert_string_equal(chain_slot_key(buf, sizeof(buf), NV_CLASS_EXPRESS, "star-7", 0x1234,
					   0xabcdef),
			    "chains/express/star-7/0000000000001234/0000000000abcdef");
	assert_string_equal(chain_slot_key(buf, sizeof(buf), NV_CLASS_STANDARD, "s1",
					   UINT64_MAX, 0),
			    "chains/standard/s1/ffffffffffffffff/0000000000000000");
	assert_int_equal(store_key_check(buf), 0);

	/* A second epoch: keys carry it; the first epoch's row exists too. */
	{
		struct meta_chain row;
		uint64_t ver;

		assert_int_equal(meta_chain_mint(f->kv, NV_CLASS_EXPRESS, EFX_STAR, 1, &row, &ver),
				 0);
	}
	efx_opts_default(&o);
	o.cls = NV_CLASS_EXPRESS;
	efx_start(f, &o);
	assert_int_equal(f->row.epoch, 2);
	assert_int_equal(chain_epoch(f->chain), 2);
	assert_int_equal(chain_class(f->chain), NV_CLASS_EXPRESS);
	s = efx_stream(f, "x", NV_CLASS_EXPRESS);
	for (int i = 0; i < 18; i++)
		assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), 0);
	assert_int_equal(chain_next_slot(f->chain), 18); /* idle: one slot each */
	assert_int_equal(store_list(f->store, "chains/", NULL, keylist_fn, kl), 0);
	assert_int_equal(kl->n, 18);
	for (int i = 0; i < 18; i++) {
		snprintf(want, sizeof(want), "chains/express/%s/%016llx/%016llx", EFX_STAR, 2ull,
			 (unsigned long long)i);
		assert_string_equal(kl->keys[i], want);
	}
	free(kl);
}

/* ===================================================== ack order */

/* The test: slot 0's PUT is held while slots 1 and 2 land.  No
 * completion of slot 1 or 2 may fire, no acked end may move, until slot 0
 * is durable; then everything completes in slot order, each flight's
 * ack hook before its completions. */
static void test_chain_ack_order_out_of_order_puts(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s1, *s2;
	struct efx_rec a, b, c, *R, *pa, *pb, *pc;
	struct efx_ack acks[4];

	efx_opts_default(&o);
	o.put_window = 3;
	o.hold = true; /* watch the release order at the valve */
	efx_start(f, &o);
	R = efx_recs(f, 3);
	pa = &R[0];
	pb = &R[1];
	pc = &R[2];
	s1 = efx_stream(f, "one", -1);
	s2 = efx_stream(f, "two", -1);
	gate_slot(f, 0);

	append_async(f, s1, 100, 1, pa); /* idle chain: sealed at once, slot 0 */
	assert_int_equal(flights(f), 1);
	wait_parked(f, 0);
	append_async(f, s2, 200, 2, pb); /* sealed by linger: slot 1 */
	wait_landed(f, 1);
	append_async(f, s1, 300, 3, pc); /* slot 2 */
	wait_landed(f, 2);
	assert_int_equal(flights(f), 3);
	/* Slots 1 and 2 are durable: their workers are done. */
	assert_true(efx_poll_stat(f, slots_written, 2, WAIT_MS));

	assert_true(still_no_completion(f, 0));
	assert_int_equal(stream_acked_byte(s1), 0);
	assert_int_equal(stream_acked_byte(s2), 0);
	assert_int_equal(atomic_load(&s2->acked_seq), 0);
	assert_int_equal(efx_acks(f, acks, 4), 0);
	assert_int_equal(efx_held(f), 0);
	assert_int_equal(NV_STAT_GET(&f->stats, appends), 0);

	open_slot(f, 0);
	must_done(f, 3);
	assert_int_equal(chain_drain(f->chain), 0); /* the releaser is done too */
	a = efx_rec_get(f, pa);
	b = efx_rec_get(f, pb);
	c = efx_rec_get(f, pc);
	assert_int_equal(a.calls, 1);
	assert_int_equal(b.calls, 1);
	assert_int_equal(c.calls, 1);
	assert_int_equal(a.err, 0);
	assert_int_equal(b.err, 0);
	assert_int_equal(c.err, 0);
	assert_int_equal(a.seq, 0);
	assert_int_equal(b.seq, 0);
	assert_int_equal(c.seq, 1);
	/* Completions in slot order. */
	assert_true(a.order < b.order);
	assert_true(b.order < c.order);
	/* Each flight's ack hook ran before its completion and after the
	 * previous flight's completions. */
	assert_int_equal(efx_acks(f, acks, 4), 3);
	assert_int_equal(acks[0].stream, s1->id);
	assert_int_equal(acks[0].old_byte, 0);
	assert_int_equal(acks[0].new_byte, 100);
	assert_true(acks[0].order < a.order);
	assert_int_equal(acks[1].stream, s2->id);
	assert_int_equal(acks[1].new_byte, 200);
	assert_true(a.order < acks[1].order && acks[1].order < b.order);
	assert_int_equal(acks[2].stream, s1->id);
	assert_int_equal(acks[2].old_byte, 100);
	assert_int_equal(acks[2].new_byte, 400);
	assert_true(b.order < acks[2].order && acks[2].order < c.order);
	assert_true(a.acked_at_cb >= 100);
	assert_true(b.acked_at_cb >= 200);
	assert_true(c.acked_at_cb >= 400);
	assert_int_equal(stream_acked_byte(s1), 400);
	assert_int_equal(stream_acked_byte(s2), 200);

	/* Released to the absorb side in slot order. */
	{
		uint64_t slots[4];

		assert_int_equal(efx_held_slots(f, slots, 4), 3);
		for (uint64_t k = 0; k < 3; k++)
			assert_int_equal(slots[k], k);
	}
	efx_unhold(f);
	assert_int_equal(absorb_drain(f->absorb), 0);
	assert_int_equal(atomic_load(&s1->frontier_byte), 400);
}

/* Four slots, each PUT held separately and released in a scrambled
 * order: acks advance exactly to the lowest slot not yet durable. */
static void test_chain_ack_order_ladder(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	struct efx_rec *r;

	efx_opts_default(&o);
	o.put_window = 4;
	efx_start(f, &o);
	r = efx_recs(f, 4);
	s = efx_stream(f, "x", -1);
	for (uint64_t k = 0; k < 3; k++)
		gate_slot(f, k);
	for (uint64_t k = 0; k < 4; k++) {
		append_async(f, s, 10 * (k + 1), k, &r[k]);
		if (k < 3)
			wait_parked(f, k);
		else
			wait_landed(f, k);
	}
	assert_true(efx_poll_stat(f, slots_written, 1, WAIT_MS)); /* slot 3 */
	assert_true(still_no_completion(f, 0));

	/* Slot 2 durable: 0 and 1 still missing, nothing acks. */
	open_slot(f, 2);
	assert_true(efx_poll_stat(f, slots_written, 2, WAIT_MS));
	assert_true(still_no_completion(f, 0));
	assert_int_equal(stream_acked_byte(s), 0);

	/* Slot 0 durable: slot 0 acks, slot 1 is still missing. */
	open_slot(f, 0);
	must_done(f, 1);
	assert_true(still_no_completion(f, 1));
	assert_int_equal(efx_rec_get(f, &r[0]).calls, 1);
	assert_int_equal(efx_rec_get(f, &r[2]).calls, 0);
	assert_int_equal(stream_acked_byte(s), 10);
	assert_int_equal(atomic_load(&s->acked_seq), 1);

	/* Slot 1 durable: 1, 2 and 3 all ack, in order. */
	open_slot(f, 1);
	must_done(f, 4);
	for (int k = 0; k < 4; k++) {
		struct efx_rec x = efx_rec_get(f, &r[k]);

		assert_int_equal(x.calls, 1);
		assert_int_equal(x.err, 0);
		assert_int_equal(x.seq, (uint64_t)k);
		if (k)
			assert_true(efx_rec_get(f, &r[k - 1]).order < x.order);
	}
	assert_int_equal(stream_acked_byte(s), 100);
	assert_int_equal(chain_drain(f->chain), 0);
}

/* ===================================================== sealing */

static void test_chain_seal_idle_at_once(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	uint8_t body[32] = { 1 };

	efx_opts_default(&o);
	o.linger_ns = 3600 * NV_NS_PER_S; /* linger can never be the reason */
	efx_start(f, &o);
	s = efx_stream(f, "x", -1);
	for (int i = 0; i < 5; i++) {
		struct efx_rec *r = efx_recs(f, 1);

		assert_int_equal(efx_append(f, s, body, sizeof(body), r), 0);
		/* Sealed inside chain_append: the chain was idle. */
		assert_int_equal(flights(f), (uint64_t)i + 1);
		must_done(f, (unsigned)i + 1);
		assert_int_equal(efx_rec_get(f, r).err, 0);
	}
	assert_int_equal(chain_next_slot(f->chain), 5);
	/* chain_flush with nothing open is a no-op. */
	chain_flush(f->chain);
	assert_int_equal(flights(f), 5);
}

/* linger_idle (a cost setting: star.c LINGER_IDLE_MIN_NS): records on an
 * idle chain wait for the linger and share one flight; the sealer seals
 * it when the linger has passed. */
static void test_chain_seal_idle_waits_linger(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	uint8_t body[32] = { 1 };

	efx_opts_default(&o);
	o.linger_ns = 3600 * NV_NS_PER_S;
	o.linger_idle = true;
	efx_start(f, &o);
	s = efx_stream(f, "x", -1);
	for (int i = 0; i < 3; i++) {
		struct efx_rec *r = efx_recs(f, 1);

		assert_int_equal(efx_append(f, s, body, sizeof(body), r), 0);
		assert_int_equal(flights(f), 0); /* idle, and still open */
	}
	chain_flush(f->chain); /* a drain or fsync seals whatever the linger */
	assert_int_equal(flights(f), 1);
	must_done(f, 3);
}

/* linger_idle with a linger that passes: the sealer seals on its own. */
static void test_chain_seal_idle_linger_passes(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	uint8_t body[32] = { 1 };

	efx_opts_default(&o);
	o.linger_ns = 20 * NV_NS_PER_MS;
	o.linger_idle = true;
	efx_start(f, &o);
	s = efx_stream(f, "x", -1);
	assert_int_equal(efx_append(f, s, body, sizeof(body), efx_recs(f, 1)), 0);
	must_done(f, 1);
	assert_int_equal(flights(f), 1);
}

static void test_chain_seal_by_size(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	struct efx_rec *R, *pfirst, *r;
	char key[CHAIN_KEY_MAX];
	uint8_t *obj;
	size_t size;

	efx_opts_default(&o);
	o.linger_ns = 3600 * NV_NS_PER_S;
	o.flight_max = 4096;
	o.put_window = 2;
	efx_start(f, &o);
	R = efx_recs(f, 13);
	pfirst = &R[0];
	r = &R[1];
	s = efx_stream(f, "x", -1);
	gate_slot(f, 0);
	append_async(f, s, 10, 0, pfirst);
	wait_parked(f, 0); /* busy from now on: no idle seals */

	/* 4 x (12 + 1000) = 4048 < 4096: still open. */
	for (int i = 0; i < 4; i++) {
		append_async(f, s, 1000, 1, &r[i]);
		assert_int_equal(flights(f), 1);
	}
	/* The 5th crosses flight_max and seals inside chain_append. */
	append_async(f, s, 1000, 1, &r[4]);
	assert_int_equal(flights(f), 2);
	/* The next ones start a new flight. */
	for (int i = 5; i < 9; i++)
		append_async(f, s, 1000, 1, &r[i]);
	assert_int_equal(flights(f), 2);
	append_async(f, s, 1000, 1, &r[9]);
	assert_int_equal(flights(f), 3);
	append_async(f, s, 5, 1, &r[10]);
	assert_int_equal(flights(f), 3);

	open_slot(f, 0);
	assert_int_equal(chain_drain(f->chain), 0); /* seals the rest */
	must_done(f, 12);
	assert_int_equal(flights(f), 4);
	/* Slot 1 holds exactly records 1..5. */
	assert_int_equal(fake_store_copy(f->fs, efx_slot_key(f, 1, key), &obj, &size), 0);
	{
		uint64_t foff;
		uint32_t flen, nrec = 0;
		struct bundle_footer ft;

		assert_int_equal(bundle_trailer_parse(obj + size - BUNDLE_TRAILER_SIZE,
						      BUNDLE_TRAILER_SIZE, size, &foff, &flen),
				 0);
		assert_int_equal(bundle_footer_open(obj + foff, flen, foff, &ft), 0);
		for (uint32_t i = 0; i < ft.n; i++) {
			struct bundle_entry e;

			assert_int_equal(bundle_footer_get(&ft, i, &e), 0);
			if (i == 0)
				assert_int_equal(e.first_seq, 1);
			nrec += e.nrec;
		}
		assert_int_equal(nrec, 5);
	}
	free(obj);
}

static void test_chain_seal_by_linger(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	struct efx_rec *R, *pa, *pb;
	const uint64_t linger = 300 * NV_NS_PER_MS;
	uint64_t t0, t1;

	efx_opts_default(&o);
	o.linger_ns = linger;
	o.put_window = 4;
	efx_start(f, &o);
	R = efx_recs(f, 2);
	pa = &R[0];
	pb = &R[1];
	s = efx_stream(f, "x", -1);
	gate_slot(f, 0);
	append_async(f, s, 10, 0, pa);
	wait_parked(f, 0);

	t0 = nv_now_mono_ns();
	append_async(f, s, 10, 1, pb);
	/* Busy, below flight_max: not sealed by the append itself. */
	if (nv_now_mono_ns() - t0 < linger)
		assert_int_equal(flights(f), 1);
	/* The sealer seals it once the linger has passed, while slot 0 is
	 * still in flight (the window has room). */
	wait_flights(f, 2);
	t1 = nv_now_mono_ns();
	assert_true(t1 - t0 >= linger);
	wait_landed(f, 1);
	assert_true(still_no_completion(f, 0)); /* slot 0 still held */
	open_slot(f, 0);
	must_done(f, 2);
	assert_int_equal(efx_rec_get(f, pb).err, 0);
}

/* Linger expired but the put window is full: the flight waits for room
 * instead of queueing more PUTs. */
static void test_chain_linger_waits_for_window(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	struct efx_rec *R, *pa, *pb;

	efx_opts_default(&o);
	o.linger_ns = 5 * NV_NS_PER_MS;
	o.put_window = 1;
	efx_start(f, &o);
	R = efx_recs(f, 2);
	pa = &R[0];
	pb = &R[1];
	s = efx_stream(f, "x", -1);
	gate_slot(f, 0);
	append_async(f, s, 10, 0, pa);
	wait_parked(f, 0);
	append_async(f, s, 10, 1, pb);
	/* Many lingers later, still one flight. */
	{
		struct timespec ts = { 0, 20L * 1000000L };

		nanosleep(&ts, NULL);
	}
	assert_int_equal(flights(f), 1);
	open_slot(f, 0);
	wait_flights(f, 2);
	must_done(f, 2);
	assert_int_equal(chain_next_slot(f->chain), 2);
}

/* Group commit: the records that arrive while a slot PUT is in flight
 * are not sealed at linger (the window has room) but ride one flight,
 * sealed when that PUT returns. */
static void test_chain_group_commit(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s[3];
	struct efx_rec *R;

	efx_opts_default(&o);
	o.linger_ns = 1 * NV_NS_PER_MS;
	o.put_window = 4;
	o.group_commit = true;
	efx_start(f, &o);
	R = efx_recs(f, 4);
	s[0] = efx_stream(f, "x", -1);
	s[1] = efx_stream(f, "y", -1);
	s[2] = efx_stream(f, "z", -1);
	gate_slot(f, 0);
	append_async(f, s[0], 10, 0, &R[0]); /* idle: sealed at once, slot 0 */
	wait_parked(f, 0);
	append_async(f, s[1], 10, 1, &R[1]);
	append_async(f, s[2], 10, 2, &R[2]);
	append_async(f, s[0], 10, 3, &R[3]);
	/* Twenty lingers later (the window has room), still one flight. */
	{
		struct timespec ts = { 0, 20L * 1000000L };

		nanosleep(&ts, NULL);
	}
	assert_int_equal(flights(f), 1);
	open_slot(f, 0);
	wait_flights(f, 2);
	must_done(f, 4);
	assert_int_equal(chain_next_slot(f->chain), 2); /* all three in slot 1 */
	for (int i = 0; i < 4; i++)
		assert_int_equal(efx_rec_get(f, &R[i]).err, 0);
}

/* ===================================================== back-pressure */

struct bg_append {
	struct efx *f;
	struct nv_stream *s;
	size_t len;
	struct efx_rec rec;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool returned; /* lock */
	int rc;        /* lock */
	pthread_t th;
};

static void *bg_main(void *arg)
{
	struct bg_append *g = arg;
	uint8_t *buf = calloc(1, g->len ? g->len : 1);
	int rc = buf ? efx_append(g->f, g->s, buf, g->len, &g->rec) : -ENOMEM;

	free(buf);
	pthread_mutex_lock(&g->lock);
	g->rc = rc;
	g->returned = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

static void bg_start(struct bg_append *g, struct efx *f, struct nv_stream *s, size_t len)
{
	pthread_condattr_t ca;

	memset(g, 0, sizeof(*g));
	g->f = f;
	g->s = s;
	g->len = len;
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cond, &ca);
	pthread_condattr_destroy(&ca);
	assert_int_equal(pthread_create(&g->th, NULL, bg_main, g), 0);
}

static bool bg_wait(struct bg_append *g, unsigned ms)
{
	struct timespec ts = nv_mono_deadline((uint64_t)ms * NV_NS_PER_MS);
	bool r;

	pthread_mutex_lock(&g->lock);
	while (!g->returned)
		if (pthread_cond_timedwait(&g->cond, &g->lock, &ts) == ETIMEDOUT)
			break;
	r = g->returned;
	pthread_mutex_unlock(&g->lock);
	return r;
}

static void bg_finish(struct bg_append *g)
{
	assert_int_equal(pthread_join(g->th, NULL), 0);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

static void test_chain_backlog_blocks_writer(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	struct bg_append *g = calloc(1, sizeof(*g)); /* leaked if the test fails */
	uint8_t body[1000] = { 0 };

	assert_non_null(g);
	efx_opts_default(&o);
	o.backlog_bytes = 4096; /* three 1000-byte records (1064 tokens each) */
	o.hold = true;          /* nothing is absorbed: tokens stay taken */
	efx_start(f, &o);
	s = efx_stream(f, "x", -1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), 0);
	assert_int_equal(backlog_used(f->backlog), 3 * (1000 + CHAIN_RECORD_OVERHEAD));
	assert_int_equal(NV_STAT_GET(&f->stats, backlog_waits), 0);

	bg_start(g, f, s, sizeof(body));
	assert_true(efx_poll_stat(f, backlog_waits, 1, WAIT_MS));
	assert_false(bg_wait(g, STILL_MS)); /* blocked, not failed */
	assert_int_equal(efx_done_count(f), 3);

	/* The absorb commits and returns the tokens: the writer proceeds. */
	efx_unhold(f);
	assert_true(bg_wait(g, WAIT_MS));
	assert_int_equal(g->rc, 0);
	must_done(f, 4);
	assert_int_equal(efx_rec_get(f, &g->rec).err, 0);
	assert_int_equal(efx_rec_get(f, &g->rec).seq, 3);
	bg_finish(g);
	free(g);
	assert_int_equal(NV_STAT_GET(&f->stats, append_errors), 0);
	assert_int_equal(chain_drain(f->chain), 0);
	assert_int_equal(absorb_drain(f->absorb), 0);
	assert_int_equal(backlog_used(f->backlog), 0);
	assert_int_equal(stream_acked_byte(s), 4000);
}

/* ===================================================== failures */

static void test_chain_put_failure_halts(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s1, *s2;
	struct efx_rec a, b, c, e, *R, *pa, *pb, *pc, *pe, *pd;
	char key[CHAIN_KEY_MAX];
	uint8_t body[8] = { 0 };

	efx_opts_default(&o);
	o.put_window = 3;
	o.put_timeout_ns = 2 * NV_NS_PER_S;
	efx_start(f, &o);
	R = efx_recs(f, 5);
	pa = &R[0];
	pb = &R[1];
	pc = &R[2];
	pe = &R[3];
	pd = &R[4];
	s1 = efx_stream(f, "one", -1);
	s2 = efx_stream(f, "two", -1);
	gate_slot(f, 0);
	gate_slot(f, 2);
	fake_store_fail(f->fs, FAKE_PUT, efx_slot_key(f, 1, key), EIO, UINT32_MAX);

	append_async(f, s1, 11, 0, pa); /* slot 0, held */
	wait_parked(f, 0);
	append_async(f, s2, 22, 1, pb); /* slot 1, failing */
	wait_flights(f, 2);
	append_async(f, s1, 33, 2, pc); /* slot 2, held */
	wait_parked(f, 2);
	append_async(f, s1, 44, 3, pe); /* open: the window is full */
	assert_int_equal(flights(f), 3);

	/* Slot 1 retries until put_timeout, then the chain halts.  The open
	 * flight can never be acked: it fails at once. */
	{
		uint64_t end = nv_now_mono_ns() + WAIT_MS * NV_NS_PER_MS;
		struct timespec ms = { 0, 1000000L };

		while (chain_halted(f->chain) == 0 && nv_now_mono_ns() < end)
			nanosleep(&ms, NULL);
	}
	assert_int_equal(chain_halted(f->chain), -EIO);
	assert_true(NV_STAT_GET(&f->stats, slot_put_retries) > 0);
	must_done(f, 1);
	e = efx_rec_get(f, pe);
	assert_int_equal(e.calls, 1);
	assert_int_equal(e.err, -EIO);
	assert_int_equal(efx_rec_get(f, pa).calls, 0); /* slot 0 not durable yet */

	/* Later appends get the halt error and no completion. */
	assert_int_equal(efx_append(f, s1, body, sizeof(body), pd), -EIO);
	assert_int_equal(efx_append(f, s2, body, sizeof(body), pd), -EIO);

	/* Slot 0 lands: it is below the failed slot and acks.  Slot 2 lands
	 * too but is above it: it fails. */
	open_slot(f, 0);
	open_slot(f, 2);
	assert_int_equal(chain_drain(f->chain), -EIO);
	must_done(f, 4);
	a = efx_rec_get(f, pa);
	b = efx_rec_get(f, pb);
	c = efx_rec_get(f, pc);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.err, 0);
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.err, -EIO);
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.err, -EIO);
	assert_true(a.order < b.order && b.order < c.order);
	assert_int_equal(efx_rec_get(f, pd).calls, 0);
	assert_int_equal(efx_done_count(f), 4);
	assert_int_equal(stream_acked_byte(s1), 11);
	assert_int_equal(stream_acked_byte(s2), 0);
	assert_int_equal(NV_STAT_GET(&f->stats, appends), 1);
	assert_int_equal(NV_STAT_GET(&f->stats, append_errors), 3);
	assert_true(fake_store_exists(f->fs, efx_slot_key(f, 0, key)));
	assert_false(fake_store_exists(f->fs, efx_slot_key(f, 1, key)));
	assert_true(fake_store_exists(f->fs, efx_slot_key(f, 2, key))); /* garbage */
	/* Failed flights' tokens came back; the acked one's after absorb. */
	assert_int_equal(absorb_drain(f->absorb), 0);
	assert_int_equal(backlog_used(f->backlog), 0);
	assert_int_equal(chain_halted(f->chain), -EIO);
}

static void test_chain_transient_put_errors_retried(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	char key[CHAIN_KEY_MAX];
	uint8_t body[8] = { 7 };

	efx_opts_default(&o);
	efx_start(f, &o);
	s = efx_stream(f, "x", -1);
	fake_store_fail(f->fs, FAKE_PUT, efx_slot_key(f, 0, key), EIO, 2);
	fake_store_fail(f->fs, FAKE_PUT, efx_slot_key(f, 1, key), EAGAIN, 1);
	assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), 0);
	assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), 0);
	assert_int_equal(NV_STAT_GET(&f->stats, slot_put_retries), 3);
	assert_int_equal(fake_store_calls(f->fs, FAKE_PUT, efx_slot_key(f, 0, key)), 3);
	assert_int_equal(chain_halted(f->chain), 0);
	assert_int_equal(stream_acked_byte(s), 16);
	assert_int_equal(NV_STAT_GET(&f->stats, append_errors), 0);
}

/* A PUT that landed but whose answer was lost: the retry meets its own
 * object (create-once -EEXIST), recognises it, and acks; nothing halts. */
static void test_chain_put_landed_answer_lost(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	char key[CHAIN_KEY_MAX];
	uint8_t body[100];
	struct smodel m = { 0 };

	efx_opts_default(&o);
	efx_start(f, &o);
	s = efx_stream(f, "x", -1);
	fake_store_fail(f->fs, FAKE_PUT_LATE, efx_slot_key(f, 0, key), ETIMEDOUT, 1);
	body_of(body, sizeof(body), 5, 0);
	assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), 0);
	assert_int_equal(chain_halted(f->chain), 0);
	assert_int_equal(NV_STAT_GET(&f->stats, slot_put_retries), 1);
	assert_int_equal(fake_store_calls(f->fs, FAKE_PUT, key), 2);
	assert_int_equal(stream_acked_byte(s), sizeof(body));
	m.id = s->id;
	m.bytes = body;
	m.len = sizeof(body);
	m.nrec = 1;
	verify_bundles(f, &m, 1);
}

/* A slot that already exists (a recovery fence, another writer) halts
 * the chain on the first attempt, never overwritten; the zombie's
 * writers see -EIO (chain.h, the fence object). */
static void test_chain_slot_taken_halts(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s;
	char key[CHAIN_KEY_MAX];
	uint8_t body[8] = { 7 }, *obj, fence[CHAIN_FENCE_SIZE];
	size_t size;
	struct iovec iov = { fence, sizeof(fence) };
	uint64_t epoch, cut;

	efx_opts_default(&o);
	efx_start(f, &o);
	s = efx_stream(f, "x", -1);
	chain_fence_encode(fence, f->row.epoch, 1);
	assert_int_equal(store_put(f->store, efx_slot_key(f, 1, key), &iov, 1, 0), 0);
	assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), 0);
	assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), -EIO);
	assert_int_equal(chain_halted(f->chain), -EIO);
	assert_int_equal(NV_STAT_GET(&f->stats, slot_put_retries), 0);
	assert_int_equal(fake_store_copy(f->fs, key, &obj, &size), 0);
	assert_int_equal(chain_fence_decode(obj, size, &epoch, &cut), 1);
	assert_int_equal(epoch, f->row.epoch);
	assert_int_equal(cut, 1);
	free(obj);
	assert_int_equal(efx_append_wait(f, s, body, sizeof(body), NULL), -EIO);
	assert_int_equal(stream_acked_byte(s), 8);
	assert_int_equal(chain_drain(f->chain), -EIO);
}

/* ===================================================== drain, refusals */

struct drainer {
	struct chain *c;
	struct efx *f;
	int rc;
	unsigned done_at_return;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool returned;
	pthread_t th;
};

static void *drainer_main(void *arg)
{
	struct drainer *d = arg;
	int rc = chain_drain(d->c);
	unsigned n = efx_done_count(d->f);

	pthread_mutex_lock(&d->lock);
	d->rc = rc;
	d->done_at_return = n;
	d->returned = true;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static void test_chain_drain_waits_for_everything(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s[2];
	struct efx_rec *r;
	struct drainer *d = calloc(1, sizeof(*d)); /* leaked if the test fails */
	pthread_condattr_t ca;
	struct timespec ts;
	bool returned;

	assert_non_null(d);
	efx_opts_default(&o);
	o.linger_ns = 3600 * NV_NS_PER_S; /* only drain seals the last flight */
	o.flight_max = 2048;
	efx_start(f, &o);
	r = efx_recs(f, 40);
	s[0] = efx_stream(f, "a", -1);
	s[1] = efx_stream(f, "b", -1);
	gate_slot(f, 0);
	append_async(f, s[0], 10, 0, &r[0]);
	wait_parked(f, 0);
	for (int i = 1; i < 40; i++)
		append_async(f, s[i % 2], 100, (uint64_t)i, &r[i]);
	assert_true(flights(f) > 1);

	d->c = f->chain;
	d->f = f;
	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &ca);
	pthread_condattr_destroy(&ca);
	assert_int_equal(pthread_create(&d->th, NULL, drainer_main, d), 0);

	ts = nv_mono_deadline(STILL_MS * NV_NS_PER_MS);
	pthread_mutex_lock(&d->lock);
	while (!d->returned && pthread_cond_timedwait(&d->cond, &d->lock, &ts) != ETIMEDOUT)
		;
	returned = d->returned;
	pthread_mutex_unlock(&d->lock);
	assert_false(returned);

	open_slot(f, 0);
	assert_int_equal(pthread_join(d->th, NULL), 0);
	assert_int_equal(d->rc, 0);
	/* When drain returned, every completion had run. */
	assert_int_equal(d->done_at_return, 40);
	for (int i = 0; i < 40; i++)
		assert_int_equal(efx_rec_get(f, &r[i]).calls, 1);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
	assert_int_equal(stream_acked_byte(s[0]) + stream_acked_byte(s[1]), 10 + 39 * 100);
}

static void test_chain_refusals(void **state)
{
	struct efx *f = *state;
	struct efx_opts o;
	struct nv_stream *s, *x, *gone;
	struct efx_rec *r;
	uint8_t body[16] = { 0 };

	efx_opts_default(&o);
	efx_start(f, &o);
	r = efx_recs(f, 1);
	s = efx_stream(f, "s", -1);
	x = efx_stream(f, "x", NV_CLASS_EXPRESS);
	gone = efx_stream(f, "gone", -1);
	pthread_mutex_lock(&gone->lock);
	gone->deleted = true;
	pthread_mutex_unlock(&gone->lock);

	assert_int_equal(efx_append(f, s, body, (size_t)CHAIN_RECORD_MAX + 1, r), -EFBIG);
	assert_int_equal(efx_append(f, x, body, sizeof(body), r), -EAGAIN);
	assert_int_equal(efx_append(f, gone, body, sizeof(body), r), -ENOENT);
	/* Refused appends leave no trace: no seq, no tokens, no callback. */
	assert_int_equal(s->next_seq, 0);
	assert_int_equal(x->next_seq, 0);
	assert_int_equal(gone->next_seq, 0);
	assert_int_equal(backlog_used(f->backlog), 0);
	assert_int_equal(flights(f), 0);

	/* The largest record is accepted. */
	{
		uint8_t *big = calloc(1, CHAIN_RECORD_MAX);

		assert_non_null(big);
		assert_int_equal(efx_append_wait(f, s, big, CHAIN_RECORD_MAX, NULL), 0);
		free(big);
	}
	/* After stop: -ESHUTDOWN. */
	efx_chain_stop(f);
	assert_int_equal(efx_append(f, s, body, sizeof(body), r), -ESHUTDOWN);
	assert_int_equal(efx_done_count(f), 1);
	assert_int_equal(stream_acked_byte(s), CHAIN_RECORD_MAX);
}

/* Per-class linger (star.h): each class's chain gets its own value when
 * set, linger_ns otherwise; 0 is a value, not "unset". */
static void test_chain_class_linger(void **state)
{
	struct star_cfg cfg;

	(void)state;
	memset(&cfg, 0, sizeof(cfg));
	cfg.linger_ns = 1000 * NV_NS_PER_US;
	cfg.linger_class_ns[NV_CLASS_STANDARD] = -1;
	cfg.linger_class_ns[NV_CLASS_EXPRESS] = -1;
	for (int seg = 0; seg < 2; seg++) { /* a set linger_us wins over the store */
		assert_int_equal(star_class_linger_ns(&cfg, NV_CLASS_STANDARD, seg), 1000 * NV_NS_PER_US);
		assert_int_equal(star_class_linger_ns(&cfg, NV_CLASS_EXPRESS, seg), 1000 * NV_NS_PER_US);
	}
	cfg.linger_class_ns[NV_CLASS_STANDARD] = 50 * NV_NS_PER_MS;
	assert_int_equal(star_class_linger_ns(&cfg, NV_CLASS_STANDARD, true), 50 * NV_NS_PER_MS);
	assert_int_equal(star_class_linger_ns(&cfg, NV_CLASS_EXPRESS, false), 1000 * NV_NS_PER_US);
	cfg.linger_class_ns[NV_CLASS_EXPRESS] = 0;
	assert_int_equal(star_class_linger_ns(&cfg, NV_CLASS_EXPRESS, false), 0);
	assert_int_equal(star_class_linger_ns(&cfg, NV_CLASS_STANDARD, false), 50 * NV_NS_PER_MS);
	/* linger_us unset (-1, as -o gives it): by the store. */
	cfg.linger_ns = -1000;
	cfg.linger_class_ns[NV_CLASS_STANDARD] = -1;
	cfg.linger_class_ns[NV_CLASS_EXPRESS] = -1;
	assert_int_equal(star_class_linger_ns(&cfg, NV_CLASS_STANDARD, true), 0);
	assert_int_equal(star_class_linger_ns(&cfg, NV_CLASS_STANDARD, false),
			 STAR_LINGER_REQUEST_NS);
	assert_int_equal(STAR_LINGER_REQUEST_NS, 1000 * NV_NS_PER_US);
	cfg.linger_class_ns[NV_CLASS_EXPRESS] = 20 * NV_NS_PER_MS;
	assert_int_equal(star_class_linger_ns(&cfg, NV_CLASS_EXPRESS, true), 20 * NV_NS_PER_MS);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, efx_setup, efx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_chain_contiguous_seqs_and_bundles),
		T(test_chain_slot_keys),
		T(test_chain_ack_order_out_of_order_puts),
		T(test_chain_ack_order_ladder),
		T(test_chain_seal_idle_at_once),
		T(test_chain_seal_idle_waits_linger),
		T(test_chain_seal_idle_linger_passes),
		T(test_chain_group_commit),
		T(test_chain_seal_by_size),
		T(test_chain_seal_by_linger),
		T(test_chain_linger_waits_for_window),
		T(test_chain_backlog_blocks_writer),
		T(test_chain_put_failure_halts),
		T(test_chain_transient_put_errors_retried),
		T(test_chain_put_landed_answer_lost),
		T(test_chain_slot_taken_halts),
		T(test_chain_drain_waits_for_everything),
		T(test_chain_refusals),
		cmocka_unit_test(test_chain_class_linger),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
