/*
 * test_lease.c - the star registry and the writer leases
 * (engine/lease.h, meta/leases.h, meta/stars.h).
 *
 * For: one real star (star_open() on a temporary data directory, SQLite
 * metastore, directory store) beside other "stars" played by the test
 * directly on the same metastore (their registry rows, leases and
 * chain rows), since one SQLite file serves one daemon.  Covers: a
 * vacant take, lease epochs that only grow across releases and
 * expiries, NOT_OWNER with the holder, a take that waits for a dead
 * predecessor's epoch to be settled, a lost registry lease (no ack, no
 * append, then a new incarnation that takes its streams again), an ack
 * that comes after the deadline failing, a lease compare that fails a
 * ref commit, a star id held by a live star refused, and a release
 * (handoff): the flush before the lease goes, NOT_OWNER after it, the
 * lease passed to a named live star, and a successor's take that does
 * not wait on a live released predecessor's open epoch.  Not for:
 * several processes (tests/etcd/t_stars.sh).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/absorb.h"
#include "engine/lease.h"
#include "engine/star.h"
#include "engine/star_impl.h"
#include "meta/chains.h"
#include "meta/keys.h"
#include "meta/leases.h"
#include "meta/refs.h"
#include "meta/stars.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

struct fx {
	char dir[64];
	struct star *st;
};

/* The star's registry lease TTL: 4 s (a keepalive every 1.3 s, acks
 * allowed 3.2 s past the last); under `make memcheck` (NOVAFS_MEMCHECK,
 * valgrind serializes the threads of a loaded machine) 10 s, where 2 s
 * and 4 s lost the lease before the first append. */
static unsigned lease_s(void)
{
	return getenv("NOVAFS_MEMCHECK") ? 10 : 4;
}

static struct star_cfg cfg_for(const char *dir)
{
	struct star_cfg c = { 0 };

	c.data_dir = dir;
	c.star_lease_s = lease_s();
	c.backlog_bytes = 64u << 20;
	c.tail_cache_bytes = 16u << 20;
	c.read_cache_bytes = 16u << 20;
	c.flight_max = 1u << 20;
	c.linger_ns = NV_NS_PER_MS;
	for (unsigned i = 0; i < NV_CLASS_COUNT; i++) {
		c.linger_class_ns[i] = -1;
		c.age_cap_ns[i] = 3600 * NV_NS_PER_S;
	}
	c.put_timeout_ns = 10 * NV_NS_PER_S;
	c.put_window = 4;
	c.chunk_kib = 64;
	c.absorb_batch_slots = 16;
	c.settle_trigger_bytes = 8u << 20;
	c.settle_linger_ns = 30 * NV_NS_PER_S;
	c.output_cap_bytes = 128u << 20;
	c.read_grace_ns = 30 * NV_NS_PER_S;
	c.fetch_cache_bytes = 16u << 20;
	c.settle_workers = 1;
	c.audit_period_ns = 100 * NV_NS_PER_MS;
	c.take_wait_ns = 500 * NV_NS_PER_MS;
	return c;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct star_cfg c;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/novafs-test-lease.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	c = cfg_for(f->dir);
	c.star_id = "sa";
	assert_int_equal(star_open(&c, &f->st), 0);
	assert_int_equal(star_gate_wait(f->st, NULL), 0);
	assert_int_equal(star_bucket_create(f->st, "b", NULL, NULL), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	nv_fp_reset();
	(void)star_close(f->st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", f->dir);
	free(f);
	return 0;
}

/* A synchronous append: the completion's error, or the admission's. */
struct done {
	pthread_mutex_t m;
	pthread_cond_t c;
	bool fired;
	int err;
};

static void on_done(void *arg, int err)
{
	struct done *d = arg;

	pthread_mutex_lock(&d->m);
	d->fired = true;
	d->err = err;
	pthread_cond_broadcast(&d->c);
	pthread_mutex_unlock(&d->m);
}

static int append_wait(struct star *st, struct nv_stream *s, const char *body)
{
	struct done d = { .m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER };
	int rc = star_append(st, s, body, strlen(body), on_done, &d, NULL);

	if (rc)
		return rc;
	pthread_mutex_lock(&d.m);
	while (!d.fired)
		pthread_cond_wait(&d.c, &d.m);
	pthread_mutex_unlock(&d.m);
	return d.err;
}

/* Poll cond up to 20 s (the registry's thread acts on its own time). */
#define AWAIT(cond)                                                                    \
	do {                                                                           \
		uint64_t until_ = nv_now_mono_ns() + 20 * NV_NS_PER_S;                   \
		bool ok_;                                                              \
		while (!(ok_ = (cond)) && nv_now_mono_ns() < until_)                   \
			usleep(20000);                                                 \
		assert_true(ok_);                                                      \
	} while (0)

/* Another star "id" on the same metastore: its registry row under a
 * fresh lease (returned). */
static uint64_t fake_star(struct kv *kv, const char *id, const char *addr)
{
	struct meta_star row = { .state = STAR_RUNNING, .pid = 1 };
	uint64_t lease;

	snprintf(row.id, sizeof(row.id), "%s", id);
	snprintf(row.host, sizeof(row.host), "elsewhere");
	snprintf(row.dir, sizeof(row.dir), "/elsewhere");
	snprintf(row.addr, sizeof(row.addr), "%s", addr);
	assert_int_equal(kv_lease_grant(kv, 30, &lease), 0);
	row.lease = lease;
	assert_int_equal(meta_star_register(kv, &row, lease), 0);
	return lease;
}

static void test_vacant_take(void **state)
{
	struct fx *f = *state;
	struct nv_stream *s;
	struct lease_holder h;
	struct meta_lease l;
	uint64_t last;
	char star[META_STAR_MAX + 1];

	assert_int_equal(star_stream_create(f->st, "b", "x", NULL, &s), 0);
	assert_int_equal(star_leader(f->st, s, &h), -ENOENT); /* vacant */
	assert_int_equal(append_wait(f->st, s, "one"), 0);
	assert_int_equal(meta_lease_get(f->st->kv, s->id, &l, NULL), 0);
	assert_string_equal(l.star, "sa");
	assert_int_equal(l.epoch, 1);
	assert_int_equal(star_leader(f->st, s, &h), 0);
	assert_string_equal(h.star, "sa");
	assert_int_equal(meta_lease_last(f->st->kv, s->id, &last, star, NULL, NULL), 0);
	assert_int_equal(last, 1);
	assert_int_equal(append_wait(f->st, s, "two"), 0);
	assert_int_equal(stream_acked_byte(s), 6);
	stream_put(s);
}

/* Epochs grow by one at every change of leader and never go back, even
 * after a release or an expiry left the stream vacant. */
static void test_epochs_only_grow(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t lb = fake_star(kv, "sb", ""), lc = fake_star(kv, "sc", ""), ver, last;
	char prev[META_STAR_MAX + 1], star[META_STAR_MAX + 1];
	struct meta_lease l;

	assert_int_equal(meta_lease_take(kv, 900, "sb", "", lb, &l, &ver, prev), 0);
	assert_int_equal(l.epoch, 1);
	assert_string_equal(prev, "");
	assert_int_equal(meta_lease_take(kv, 900, "sc", "", lc, &l, &ver, prev), -EEXIST);
	assert_int_equal(kv_lease_revoke(kv, lb), 0); /* sb is gone: vacant */
	assert_int_equal(meta_lease_get(kv, 900, &l, NULL), -ENOENT);
	assert_int_equal(meta_lease_take(kv, 900, "sc", "", lc, &l, &ver, prev), 0);
	assert_int_equal(l.epoch, 2);
	assert_string_equal(prev, "sb");
	assert_int_equal(meta_lease_release(kv, 900, ver + 1), -ECANCELED);
	assert_int_equal(meta_lease_release(kv, 900, ver), 0);
	assert_int_equal(meta_lease_last(kv, 900, &last, star, prev, NULL), 0);
	assert_int_equal(last, 2); /* kept after the release */
	assert_string_equal(star, "sc");
	assert_int_equal(meta_lease_take(kv, 900, "sc", "", lc, &l, &ver, prev), 0);
	assert_int_equal(l.epoch, 3);
	assert_int_equal(kv_lease_revoke(kv, lc), 0);
}

/* Another live star leads: NOT_OWNER with its address and epoch, for
 * appends and tail reads; once it is gone the stream is taken here with
 * the next epoch. */
static void test_refused_with_holder(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t lb = fake_star(kv, "sb", "10.1.2.3:7070"), ver;
	char prev[META_STAR_MAX + 1];
	struct nv_stream *s;
	struct lease_holder h;
	struct meta_lease l;

	assert_int_equal(star_stream_create(f->st, "b", "y", NULL, &s), 0);
	assert_int_equal(meta_lease_take(kv, s->id, "sb", "10.1.2.3:7070", lb, &l, &ver, prev), 0);
	assert_int_equal(append_wait(f->st, s, "no"), -STAR_ENOTOWNER);
	assert_int_equal(star_lead(f->st, s, &h), -STAR_ENOTOWNER);
	assert_string_equal(h.star, "sb");
	assert_string_equal(h.addr, "10.1.2.3:7070");
	assert_int_equal(h.epoch, 1);
	assert_int_equal(star_lead_check(f->st, s, NULL), -STAR_ENOTOWNER);
	assert_int_equal(stream_acked_byte(s), 0);
	assert_int_equal(kv_lease_revoke(kv, lb), 0);
	assert_int_equal(append_wait(f->st, s, "yes"), 0);
	assert_int_equal(star_lead(f->st, s, &h), 0);
	assert_string_equal(h.star, "sa");
	assert_int_equal(h.epoch, 2);
	stream_put(s);
}

/* A take after a dead star waits until that star's unsettled epoch is
 * settled (here by this star's settle duty), then reloads the stream. */
static void test_take_waits_for_predecessor(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t lc = fake_star(kv, "sc", ""), ver, cver;
	char prev[META_STAR_MAX + 1];
	struct meta_chain row;
	int rc;
	struct nv_stream *s;
	struct meta_lease l;

	assert_int_equal(star_stream_create(f->st, "b", "z", NULL, &s), 0);
	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "sc", nv_now_wall_ns(), &row,
					 &cver), 0);
	assert_int_equal(meta_lease_take(kv, s->id, "sc", "", lc, &l, &ver, prev), 0);
	assert_int_equal(kv_lease_revoke(kv, lc), 0); /* sc dies, its epoch unsettled */
	assert_int_equal(meta_chain_get(kv, NV_CLASS_STANDARD, "sc", row.epoch, &row, &cver), 0);
	assert_int_not_equal(row.state, CHAIN_SETTLED);
	assert_int_equal(append_wait(f->st, s, "after"), 0);
	/* Settled (and, with no slot, retired by the trim-check at once). */
	rc = meta_chain_get(kv, NV_CLASS_STANDARD, "sc", row.epoch, &row, &cver);
	assert_true(rc == -ENOENT || (rc == 0 && row.state == CHAIN_SETTLED));
	assert_int_equal(meta_lease_get(kv, s->id, &l, NULL), 0);
	assert_string_equal(l.star, "sa");
	assert_int_equal(l.epoch, 2);
	stream_put(s);
}

/* A predecessor that is alive and whose epoch is not yet known as older
 * than its incarnation is never settled by the duty: the take waits for
 * it up to take_wait_ns, then the append fails with ETIMEDOUT (the lease
 * stays taken); once that star is gone, the next append succeeds. */
static void test_take_wait_bounded(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t lg = fake_star(kv, "sg", ""), ver, cver, t0;
	char prev[META_STAR_MAX + 1];
	struct meta_chain row;
	struct nv_stream *s;
	struct meta_lease l;

	assert_int_equal(star_stream_create(f->st, "b", "q", NULL, &s), 0);
	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "sg", nv_now_wall_ns(), &row,
					 &cver), 0);
	assert_int_equal(meta_lease_take(kv, s->id, "sg", "", lg, &l, &ver, prev), 0);
	assert_int_equal(meta_lease_release(kv, s->id, ver), 0); /* vacant, sg lives */
	t0 = nv_now_mono_ns();
	assert_int_equal(append_wait(f->st, s, "x"), -ETIMEDOUT);
	assert_true(nv_now_mono_ns() - t0 >= 500 * NV_NS_PER_MS);
	assert_int_equal(meta_lease_get(kv, s->id, &l, NULL), 0);
	assert_string_equal(l.star, "sa"); /* taken, not ready */
	assert_int_equal(append_wait(f->st, s, "x"), -ETIMEDOUT);
	assert_int_equal(kv_lease_revoke(kv, lg), 0); /* sg dies: its epoch is due */
	AWAIT(append_wait(f->st, s, "y") == 0);
	assert_int_equal(stream_acked_byte(s), 1);
	stream_put(s);
}

/* The registry lease is lost (revoked under the star, as an expiry
 * while paused would): appends fail, every class restarts, the star
 * registers again and takes its stream back with the next epoch; what
 * was acked before stays. */
static void test_registry_loss(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t e0 = star_epoch(f->st, NV_CLASS_STANDARD), id0 = lease_reg_id(f->st->reg);
	struct nv_stream *s;
	struct meta_star row;
	struct meta_lease l;

	assert_int_equal(star_stream_create(f->st, "b", "w", NULL, &s), 0);
	assert_int_equal(append_wait(f->st, s, "kept"), 0);
	assert_int_equal(kv_lease_revoke(kv, id0), 0);
	assert_int_equal(meta_lease_get(kv, s->id, &l, NULL), -ENOENT); /* went with it */
	AWAIT(lease_reg_may_ack(f->st->reg) != 0 || lease_reg_id(f->st->reg) != id0);
	AWAIT(lease_reg_id(f->st->reg) != 0 && lease_reg_id(f->st->reg) != id0);
	assert_true(star_epoch(f->st, NV_CLASS_STANDARD) > e0);
	assert_int_equal(meta_star_get(kv, "sa", &row, NULL), 0);
	assert_int_equal(row.epochs[NV_CLASS_STANDARD], star_epoch(f->st, NV_CLASS_STANDARD));
	assert_int_equal(append_wait(f->st, s, "again"), 0);
	assert_int_equal(meta_lease_get(kv, s->id, &l, NULL), 0);
	assert_string_equal(l.star, "sa");
	assert_int_equal(l.epoch, 2);
	assert_int_equal(stream_acked_byte(s), 9);
	stream_put(s);
}

/* Admitted before the deadline, durable after it: the writer is told
 * ETIMEDOUT, not acked. */
static void test_no_ack_past_deadline(void **state)
{
	struct fx *f = *state;
	struct done d = { .m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER };
	struct nv_stream *s;

	assert_int_equal(star_stream_create(f->st, "b", "v", NULL, &s), 0);
	assert_int_equal(append_wait(f->st, s, "led"), 0);
	/* The ack waits past the next keepalive (every TTL/3), which finds
	 * the lease revoked. */
	char spec[64];

	snprintf(spec, sizeof(spec), "chain.before_ack=delay:%u", lease_s() * 700);
	assert_int_equal(nv_fp_arm(spec), 0);
	assert_int_equal(star_append(f->st, s, "late", 4, on_done, &d, NULL), 0);
	assert_int_equal(kv_lease_revoke(f->st->kv, lease_reg_id(f->st->reg)), 0);
	pthread_mutex_lock(&d.m);
	while (!d.fired)
		pthread_cond_wait(&d.c, &d.m);
	pthread_mutex_unlock(&d.m);
	nv_fp_reset();
	assert_int_equal(d.err, -ETIMEDOUT);
	stream_put(s);
}

/* The absorb's ref commit compares the stream's lease row: a wrong
 * version commits nothing. */
static void test_ref_commit_compares_lease(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t ld = fake_star(kv, "sd", ""), cver, ver;
	char prev[META_STAR_MAX + 1];
	struct absorb_run run = { .stream_id = 777, .first_seq = 0, .first_byte = 0,
				  .nbytes = 5, .nrec = 1, .settled_byte = ABSORB_UNKNOWN };
	struct absorb_slot slot = { .slot = 0, .footer_off = 0, .footer_len = 10, .nruns = 1,
				    .runs = &run };
	struct absorb_policy pol = { .age_cap_ns = NV_NS_PER_S };
	struct meta_chain row;
	struct meta_lease l;
	struct meta_ref r;

	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "sd", nv_now_wall_ns(), &row,
					 &cver), 0);
	assert_int_equal(meta_lease_take(kv, 777, "sd", "", ld, &l, &ver, prev), 0);
	run.lease_ver = ver + 1000; /* somebody else's */
	assert_int_equal(absorb_commit_batch(kv, &row, &cver, &slot, 1, &pol, NULL), -ECANCELED);
	meta_ref_init(&r);
	assert_int_equal(meta_ref_last(kv, 777, &r), -ENOENT);
	run.lease_ver = ver;
	assert_int_equal(absorb_commit_batch(kv, &row, &cver, &slot, 1, &pol, NULL), 0);
	assert_int_equal(meta_ref_last(kv, 777, &r), 0);
	meta_ref_clear(&r);
	assert_int_equal(kv_lease_revoke(kv, ld), 0);
}

/* A batch of many fenced refs commits in transactions within
 * KV_TXN_SAFE_OPS (kv.c refuses a larger one with compares: -E2BIG). */
static void test_many_fenced_refs(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t ld = fake_star(kv, "se", ""), cver, ver;
	char prev[META_STAR_MAX + 1];
	enum { N = 150 };
	struct absorb_run runs[N];
	struct absorb_slot slot = { .slot = 0, .footer_off = 0, .footer_len = 10, .nruns = N,
				    .runs = runs };
	struct absorb_policy pol = { .age_cap_ns = NV_NS_PER_S };
	struct meta_chain row;
	struct meta_lease l;
	struct meta_ref r;

	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "se", nv_now_wall_ns(), &row,
					 &cver), 0);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(meta_lease_take(kv, 5000 + i, "se", "", ld, &l, &ver, prev), 0);
		runs[i] = (struct absorb_run){ .stream_id = 5000 + i, .nbytes = 3, .nrec = 1,
					       .settled_byte = ABSORB_UNKNOWN, .lease_ver = ver };
	}
	assert_int_equal(absorb_commit_batch(kv, &row, &cver, &slot, 1, &pol, NULL), 0);
	meta_ref_init(&r);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(meta_ref_last(kv, 5000 + i, &r), 0);
		meta_ref_clear(&r);
	}
	assert_int_equal(kv_lease_revoke(kv, ld), 0);
}

/* A star id a live star holds is refused; a v1 row (no lease) is not. */
static void test_duplicate_id_refused(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	struct lease_reg_cfg c = { .kv = kv, .star = "sa", .data_dir = "/another/dir",
				   .ttl_s = 2 };
	struct lease_reg *r = NULL;
	struct nv_buf k;
	const uint8_t v1[] = { 1, 0, 0 };

	assert_int_equal(lease_reg_open(&c, &r), -EEXIST);
	nv_buf_init(&k, KV_KEY_MAX);
	assert_int_equal(key_star(&k, "sv"), 0);
	assert_int_equal(kv_put(kv, k.ptr, k.len, v1, sizeof(v1)), 0);
	nv_buf_free(&k);
	c.star = "sv";
	assert_int_equal(lease_reg_open(&c, &r), 0);
	lease_reg_close(r);
}

/* A start on the same data directory (host and directory match) finds
 * its earlier incarnation's row: that star is dead (the directory's lock
 * says so), so its registry lease is revoked, and its writer leases go
 * with it instead of lingering until the TTL. */
static void test_earlier_incarnation_revoked(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	struct lease_reg_cfg c = { .kv = kv, .star = "sa", .data_dir = f->dir, .ttl_s = 2 };
	uint64_t old = lease_reg_id(f->st->reg);
	struct lease_reg *r = NULL;
	struct nv_stream *s;
	struct meta_star row;
	struct meta_lease l;

	assert_int_equal(star_stream_create(f->st, "b", "u", NULL, &s), 0);
	assert_int_equal(append_wait(f->st, s, "mine"), 0);
	assert_int_equal(meta_lease_get(kv, s->id, &l, NULL), 0);
	assert_int_equal(lease_reg_open(&c, &r), 0);
	assert_int_equal(meta_lease_get(kv, s->id, &l, NULL), -ENOENT);
	assert_int_equal(kv_lease_keepalive(kv, old, NULL), -ENOLCK);
	assert_int_equal(meta_star_get(kv, "sa", &row, NULL), 0);
	assert_int_equal(row.lease, lease_reg_id(r));
	lease_reg_close(r);
	stream_put(s);
}

/* Appends admitted before a release are all absorbed (their refs
 * committed) before the lease row goes; the lease is passed to a named
 * live star with the next epoch; appends here then answer NOT_OWNER. */
static void test_release_flushes_then_passes(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t lb = fake_star(kv, "sb", "10.0.0.2:7070"), last;
	struct done d[8];
	char star[META_STAR_MAX + 1], prev[META_STAR_MAX + 1];
	struct nv_stream *s;
	struct lease_holder h;
	struct meta_ref r;
	struct meta_lease l;

	assert_int_equal(star_stream_create(f->st, "b", "h", NULL, &s), 0);
	assert_int_equal(append_wait(f->st, s, "first"), 0); /* taken: epoch 1 */
	for (int i = 0; i < 8; i++) {
		memset(&d[i], 0, sizeof(d[i]));
		pthread_mutex_init(&d[i].m, NULL);
		pthread_cond_init(&d[i].c, NULL);
		assert_int_equal(star_append(f->st, s, "abcd", 4, on_done, &d[i], NULL), 0);
	}
	assert_int_equal(star_release(f->st, s, "sb", &h), 0);
	assert_string_equal(h.star, "sb");
	assert_string_equal(h.addr, "10.0.0.2:7070");
	assert_int_equal(h.epoch, 2);
	/* The release flush: the refs cover every admitted record. */
	meta_ref_init(&r);
	assert_int_equal(meta_ref_last(kv, s->id, &r), 0);
	assert_int_equal(r.end_seq, 9);
	assert_int_equal(r.end_byte, 5 + 8 * 4);
	meta_ref_clear(&r);
	for (int i = 0; i < 8; i++) {
		pthread_mutex_lock(&d[i].m);
		while (!d[i].fired)
			pthread_cond_wait(&d[i].c, &d[i].m);
		pthread_mutex_unlock(&d[i].m);
		assert_int_equal(d[i].err, 0);
	}
	assert_int_equal(meta_lease_get(kv, s->id, &l, NULL), 0);
	assert_string_equal(l.star, "sb");
	assert_int_equal(meta_lease_last(kv, s->id, &last, star, prev, NULL), 0);
	assert_int_equal(last, 2);
	assert_string_equal(prev, "sa");
	assert_int_equal(append_wait(f->st, s, "late"), -STAR_ENOTOWNER);
	assert_int_equal(star_lead(f->st, s, &h), -STAR_ENOTOWNER);
	assert_string_equal(h.star, "sb");
	assert_int_equal(star_lead_check(f->st, s, NULL), -STAR_ENOTOWNER);
	/* Releasing what another star leads: NOT_OWNER with the holder. */
	assert_int_equal(star_release(f->st, s, NULL, &h), -STAR_ENOTOWNER);
	assert_string_equal(h.star, "sb");
	assert_int_equal(kv_lease_revoke(kv, lb), 0);
	stream_put(s);
}

/* A release to nobody leaves the stream vacant (epoch row kept); the
 * next append here takes it with a grown epoch.  Unknown and closed
 * targets are refused before anything changes. */
static void test_release_vacant_and_refusals(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	struct meta_star row = { .state = STAR_CLOSED, .pid = 1 };
	struct nv_stream *s;
	struct lease_holder h;
	struct meta_lease l;
	uint64_t lz;

	snprintf(row.id, sizeof(row.id), "sz");
	assert_int_equal(kv_lease_grant(kv, 30, &lz), 0);
	row.lease = lz;
	assert_int_equal(meta_star_register(kv, &row, lz), 0);
	assert_int_equal(star_stream_create(f->st, "b", "v", NULL, &s), 0);
	assert_int_equal(append_wait(f->st, s, "one"), 0);
	assert_int_equal(star_release(f->st, s, "nosuch", &h), -ENOENT);
	assert_int_equal(star_release(f->st, s, "sz", &h), -EHOSTDOWN);
	assert_int_equal(star_lead_check(f->st, s, NULL), 0); /* still ours */
	assert_int_equal(star_release(f->st, s, "", &h), 0);
	assert_string_equal(h.star, "");
	assert_int_equal(meta_lease_get(kv, s->id, &l, NULL), -ENOENT);
	assert_int_equal(star_leader(f->st, s, &h), -ENOENT);
	assert_int_equal(append_wait(f->st, s, "two"), 0);
	assert_int_equal(meta_lease_get(kv, s->id, &l, NULL), 0);
	assert_string_equal(l.star, "sa");
	assert_int_equal(l.epoch, 2);
	assert_int_equal(stream_acked_byte(s), 6);
	/* to naming this star: it leads s. */
	assert_int_equal(star_release(f->st, s, "sa", &h), 0);
	assert_string_equal(h.star, "sa");
	assert_int_equal(kv_lease_revoke(kv, lz), 0);
	stream_put(s);
}

/* A live predecessor that released the stream after its flush (its row
 * names the epochs this incarnation started with; its open chain stays
 * unsettled): the take does not wait for it (lease.h invariant 6). */
static void test_take_after_release_no_wait(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	struct meta_star row = { .state = STAR_RUNNING, .pid = 1 };
	char prev[META_STAR_MAX + 1];
	struct meta_chain ch;
	struct nv_stream *s;
	struct meta_lease l;
	uint64_t lr, ver, cver, t0;

	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "sr", nv_now_wall_ns(), &ch,
					 &cver), 0);
	snprintf(row.id, sizeof(row.id), "sr");
	snprintf(row.host, sizeof(row.host), "elsewhere");
	for (unsigned c = 0; c < NV_CLASS_COUNT; c++)
		row.epochs[c] = c == NV_CLASS_STANDARD ? ch.epoch : 1;
	assert_int_equal(kv_lease_grant(kv, 30, &lr), 0);
	row.lease = lr;
	assert_int_equal(meta_star_register(kv, &row, lr), 0);
	assert_int_equal(star_stream_create(f->st, "b", "w", NULL, &s), 0);
	assert_int_equal(meta_lease_take(kv, s->id, "sr", "", lr, &l, &ver, prev), 0);
	assert_int_equal(meta_lease_release(kv, s->id, ver), 0); /* its release */
	t0 = nv_now_mono_ns();
	assert_int_equal(append_wait(f->st, s, "next"), 0);
	assert_true(nv_now_mono_ns() - t0 < 500 * NV_NS_PER_MS); /* < take_wait_ns */
	assert_int_equal(meta_chain_get(kv, NV_CLASS_STANDARD, "sr", ch.epoch, &ch, &cver), 0);
	assert_int_not_equal(ch.state, CHAIN_SETTLED); /* open, not fenced */
	assert_int_equal(meta_lease_get(kv, s->id, &l, NULL), 0);
	assert_string_equal(l.star, "sa");
	assert_int_equal(l.epoch, 2);
	assert_int_equal(kv_lease_revoke(kv, lr), 0);
	stream_put(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_vacant_take, setup, teardown),
		cmocka_unit_test_setup_teardown(test_epochs_only_grow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_with_holder, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_waits_for_predecessor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_wait_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_registry_loss, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_ack_past_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ref_commit_compares_lease, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_fenced_refs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_id_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_earlier_incarnation_revoked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_flushes_then_passes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_vacant_and_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_after_release_no_wait, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
