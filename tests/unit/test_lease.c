/*
 * test_lease.c - the star registry and the writer leases
 * (engine/lease.h, meta/leases.h, meta/stars.h).
 *
 * For: one real star (star_open() on a temporary data directory, SQLite
 * metastore, directory store) beside other "stars" played by the test
 * directly on the same metastore (their registry rows, leases and
 * chain rows), since one SQLite file serves one daemon.  Covers: a
 * vacant take, lease epochs that only grow across releases and
 * expiries, a deleted stream's lease rows reclaimed and its name's
 * epochs going on in a re-created stream, NOT_OWNER with the holder, a take that waits for a dead
 * predecessor's epoch to be settled, a lost registry lease (no ack, no
 * append, then a new incarnation that takes its streams again), an ack
 * that comes after the deadline failing, a lease compare that fails a
 * ref commit, a vacant stream's view raised to another star's refs
 * without a take (star_view_refresh()), and to its row's trim point and
 * its catalog rows' settled end, a star id held by a live star
 * refused, and a release
 * (handoff): the flush before the lease goes, NOT_OWNER after it, the
 * lease passed to a named live star, and a successor's take that does
 * not wait on a live released predecessor's open epoch; the settle duty
 * lease (engine/duty.h: one holder, epochs that grow, taken over when
 * the holder's row goes, lost with the holder's registry lease) and the
 * demand driver (engine/runner.h: a take settles a dead predecessor's
 * epoch itself when another star holds the duty; the runner: a wait that
 * ends by its deadline or a cancel leaves the walk going); a lease passed
 * to this star readied by the first star_lead_check(); a drain (the
 * registry row set draining): a vacant stream placed on a serving star,
 * the head epochs settled once the star leads nothing.  Not for: several
 * processes (tests/etcd/t_stars.sh, t_stars_kill.sh).
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
#include "engine/duty.h"
#include "engine/handoff.h"
#include "engine/runner.h"
#include "engine/lease.h"
#include "engine/star.h"
#include "engine/star_impl.h"
#include "engine/trim.h"
#include "meta/chains.h"
#include "meta/keys.h"
#include "meta/leases.h"
#include "meta/refs.h"
#include "meta/stars.h"
#include "meta/streams.h"
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

/* A stream row of bucket "b" (a take needs one): its id. */
static uint64_t mk_stream(struct kv *kv, const char *name)
{
	struct meta_stream ms;

	assert_int_equal(meta_stream_create(kv, "b", name, -1, 1, NULL, &ms), 0);
	return ms.id;
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
	struct meta_stream ms;

	assert_int_equal(meta_lease_take(kv, ms.id, "sb", "", lb, &l, &ver, prev), -ENOENT);
	assert_int_equal(meta_stream_create(kv, "b", "e", -1, 1, NULL, &ms), 0);
	assert_int_equal(meta_lease_take(kv, ms.id, "sb", "", lb, &l, &ver, prev), 0);
	assert_int_equal(l.epoch, 1);
	assert_string_equal(prev, "");
	assert_int_equal(meta_lease_take(kv, ms.id, "sc", "", lc, &l, &ver, prev), -EEXIST);
	assert_int_equal(kv_lease_revoke(kv, lb), 0); /* sb is gone: vacant */
	assert_int_equal(meta_lease_get(kv, ms.id, &l, NULL), -ENOENT);
	assert_int_equal(meta_lease_take(kv, ms.id, "sc", "", lc, &l, &ver, prev), 0);
	assert_int_equal(l.epoch, 2);
	assert_string_equal(prev, "sb");
	assert_int_equal(meta_lease_release(kv, ms.id, ver + 1), -ECANCELED);
	assert_int_equal(meta_lease_release(kv, ms.id, ver), 0);
	assert_int_equal(meta_lease_last(kv, ms.id, &last, star, prev, NULL), 0);
	assert_int_equal(last, 2); /* kept after the release */
	assert_string_equal(star, "sc");
	assert_int_equal(meta_lease_take(kv, ms.id, "sc", "", lc, &l, &ver, prev), 0);
	assert_int_equal(l.epoch, 3);
	assert_int_equal(kv_lease_revoke(kv, lc), 0);
}

/* A deleted stream's lease and epoch rows go with its history, and a
 * stream re-created under the same name starts above the old epochs
 * (the client ignores a lower one: api/client.h invariant 2); a
 * deleted stream is never taken again. */
static void test_deleted_stream_lease_rows_reclaimed(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t lb = fake_star(kv, "sb", ""), lc = fake_star(kv, "sc", ""), ver, last;
	struct trim_cfg tc = { .store = f->st->store, .kv = kv, .stats = &f->st->stats };
	char prev[META_STAR_MAX + 1], star[META_STAR_MAX + 1];
	struct nv_buf k, v;
	struct meta_stream ms, again;
	struct meta_lease l;

	assert_int_equal(meta_stream_create(kv, "b", "gone", -1, 1, NULL, &ms), 0);
	assert_int_equal(meta_lease_take(kv, ms.id, "sb", "", lb, &l, &ver, prev), 0);
	assert_int_equal(meta_lease_release(kv, ms.id, ver), 0);
	assert_int_equal(meta_lease_take(kv, ms.id, "sc", "", lc, &l, &ver, prev), 0);
	assert_int_equal(l.epoch, 2);
	assert_int_equal(meta_lease_reclaim(kv, ms.id), -EBUSY); /* not deleted */
	assert_int_equal(meta_stream_delete(kv, ms.id, 1), 0);
	assert_int_equal(kv_lease_revoke(kv, lc), 0);
	assert_int_equal(meta_lease_take(kv, ms.id, "sb", "", lb, &l, &ver, prev), -ENOENT);
	/* The grace (0 here) has passed: the reclaim takes the rows. */
	assert_true(trim_reclaim(&tc, nv_now_wall_ns()) >= 0);
	assert_int_equal(meta_stream_get(kv, ms.id, &again, NULL), -ENOENT);
	assert_int_equal(meta_lease_get(kv, ms.id, &l, NULL), -ENOENT);
	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	assert_int_equal(key_lease_epoch(&k, ms.id), 0);
	assert_int_equal(kv_get(kv, k.ptr, k.len, &v, NULL), -ENOENT);
	nv_buf_free(&k);
	nv_buf_free(&v);
	assert_int_equal(meta_lease_last(kv, ms.id, &last, star, NULL, NULL), 0);
	assert_int_equal(last, 0);
	assert_int_equal(meta_lease_reclaim(kv, ms.id), 0); /* again: nothing */
	/* Same name, new stream: the epochs go on from the old ones. */
	assert_int_equal(meta_stream_create(kv, "b", "gone", -1, 2, NULL, &again), 0);
	assert_true(again.id != ms.id);
	assert_int_equal(meta_lease_take(kv, again.id, "sb", "", lb, &l, &ver, prev), 0);
	assert_int_equal(l.epoch, 3);
	assert_string_equal(prev, "");
	assert_int_equal(kv_lease_revoke(kv, lb), 0);
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
 * settled (on demand by the take, or by this star's settle duty), then
 * reloads the stream. */
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
	struct absorb_run run = { .first_seq = 0, .first_byte = 0,
				  .nbytes = 5, .nrec = 1, .settled_byte = ABSORB_UNKNOWN };
	struct absorb_slot slot = { .slot = 0, .footer_off = 0, .footer_len = 10, .nruns = 1,
				    .runs = &run };
	struct absorb_policy pol = { .age_cap_ns = NV_NS_PER_S };
	struct meta_chain row;
	struct meta_lease l;
	struct meta_ref r;

	uint64_t id = mk_stream(kv, "refs");

	run.stream_id = id;
	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "sd", nv_now_wall_ns(), &row,
					 &cver), 0);
	assert_int_equal(meta_lease_take(kv, id, "sd", "", ld, &l, &ver, prev), 0);
	run.lease_ver = ver + 1000; /* somebody else's */
	assert_int_equal(absorb_commit_batch(kv, &row, &cver, &slot, 1, &pol, NULL), -ECANCELED);
	meta_ref_init(&r);
	assert_int_equal(meta_ref_last(kv, id, &r), -ENOENT);
	run.lease_ver = ver;
	assert_int_equal(absorb_commit_batch(kv, &row, &cver, &slot, 1, &pol, NULL), 0);
	assert_int_equal(meta_ref_last(kv, id, &r), 0);
	meta_ref_clear(&r);
	assert_int_equal(kv_lease_revoke(kv, ld), 0);
}

/* A fenced absorb (the stream's writer lease moved under it: absorb.c
 * -ECANCELED) halts the epoch with every acked record durable in its
 * slots: a close before the auditor's restart leaves the epoch to the
 * settle and is not an error (handoff.c star_class_close()), as after a
 * registry lease loss; the soak's final unmount exited 1 so. */
static void test_close_after_fenced_absorb(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t ld = fake_star(kv, "sd", ""), e = star_epoch(f->st, NV_CLASS_STANDARD), ver;
	char prev[META_STAR_MAX + 1];
	struct meta_lease l;
	struct nv_stream *s;

	assert_int_equal(star_stream_create(f->st, "b", "fenced", NULL, &s), 0);
	assert_int_equal(append_wait(f->st, s, "led"), 0);
	AWAIT(atomic_load(&s->frontier_seq) == 1); /* absorbed */
	assert_int_equal(nv_fp_arm("absorb.before_refs=delay:1000,"
				   "auditor.before_restart=delay:10000"), 0);
	assert_int_equal(append_wait(f->st, s, "acked"), 0);
	/* The lease moves to sd before the absorb commits the ack's refs. */
	assert_int_equal(meta_lease_get(kv, s->id, &l, &ver), 0);
	assert_int_equal(meta_lease_release(kv, s->id, ver), 0);
	assert_int_equal(meta_lease_take(kv, s->id, "sd", "", ld, &l, &ver, prev), 0);
	AWAIT(atomic_load(&f->st->halted_epochs[NV_CLASS_STANDARD]) == e);
	assert_int_equal(star_class_close(f->st, NV_CLASS_STANDARD), 0);
	nv_fp_reset();
	stream_put(s);
	assert_int_equal(kv_lease_revoke(kv, ld), 0);
}

/* An epoch another star settled while this one still ran it (a take
 * after this star's registry lease lapsed fences and settles every epoch
 * of it, also the one it had just started to rejoin with): the close
 * finds the row SETTLED and is not an error; the soak's final unmount
 * exited 1 so ("not closed cleanly (Operation canceled)"). */
static void test_close_after_settled_elsewhere(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t e = star_epoch(f->st, NV_CLASS_STANDARD), ver;
	struct meta_chain row;

	assert_int_equal(meta_chain_get(kv, NV_CLASS_STANDARD, star_id(f->st), e, &row, &ver), 0);
	row.state = CHAIN_SETTLED; /* as recover.c leaves it: fenced at cut 0 */
	row.cut = 0;
	row.settled_ns = nv_now_wall_ns();
	assert_int_equal(meta_chain_cas(kv, &row, ver), 0);
	assert_int_equal(star_class_close(f->st, NV_CLASS_STANDARD), 0);
}

/* The star's acked hook, as star_view_refresh() calls it. */
static struct {
	uint64_t stream, old_byte, new_byte;
	int calls;
} hooked;

static void on_acked_hook(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte)
{
	(void)arg;
	hooked.stream = s->id;
	hooked.old_byte = old_byte;
	hooked.new_byte = new_byte;
	hooked.calls++;
}

/* star_view_refresh() (engine/starview.c): a vacant stream another star
 * led and committed refs for is raised here to the refs' end, reported
 * to the acked hook as an ack is (fs/ invalidates the old end's page),
 * its wake closed, and never taken; positions never go back, and a
 * stream this star leads is left alone. */
static void test_view_refresh_vacant(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t ld = fake_star(kv, "sd", ""), cver, ver, gen;
	char prev[META_STAR_MAX + 1];
	struct absorb_run run = { .first_seq = 0, .first_byte = 0,
				  .nbytes = 5, .nrec = 1, .settled_byte = ABSORB_UNKNOWN };
	struct absorb_slot slot = { .slot = 0, .footer_off = 0, .footer_len = 10, .nruns = 1,
				    .runs = &run };
	struct absorb_policy pol = { .age_cap_ns = NV_NS_PER_S };
	struct lease_holder h;
	struct meta_chain row;
	struct meta_lease l;
	struct nv_stream *s, *mine;

	assert_int_equal(star_stream_create(f->st, "b", "v", NULL, &s), 0);
	assert_int_equal(star_view_refresh(f->st, s, STAR_VIEW_READ), 0); /* no refs yet */
	memset(&hooked, 0, sizeof(hooked));
	f->st->cfg.acked = on_acked_hook; /* nothing of this star is in flight */
	/* Star sd leads v, commits a ref over its one record, and dies. */
	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "sd", nv_now_wall_ns(), &row,
					 &cver), 0);
	assert_int_equal(meta_lease_take(kv, s->id, "sd", "", ld, &l, &ver, prev), 0);
	run.stream_id = s->id;
	run.lease_ver = ver;
	assert_int_equal(absorb_commit_batch(kv, &row, &cver, &slot, 1, &pol, NULL), 0);
	assert_int_equal(kv_lease_revoke(kv, ld), 0);
	assert_int_equal(star_lead_check(f->st, s, &h), -ENOENT); /* vacant */
	assert_int_equal(stream_acked_byte(s), 0); /* the view loaded here */
	gen = wake_capture(&s->wake);
	assert_int_equal(star_view_refresh(f->st, s, STAR_VIEW_READ), 1);
	assert_int_equal(stream_acked_byte(s), 5);
	assert_int_equal(atomic_load(&s->acked_seq), 1);
	assert_int_equal(atomic_load(&s->frontier_byte), 5);
	assert_int_not_equal(wake_capture(&s->wake), gen); /* followers woken */
	assert_int_equal(hooked.calls, 1);
	assert_int_equal(hooked.stream, s->id);
	assert_int_equal(hooked.old_byte, 0);
	assert_int_equal(hooked.new_byte, 5);
	assert_int_equal(star_view_refresh(f->st, s, STAR_VIEW_READ), 0); /* nothing new */
	assert_int_equal(hooked.calls, 1);
	f->st->cfg.acked = NULL;
	assert_int_equal(star_leader(f->st, s, &h), -ENOENT); /* never taken */
	stream_put(s);

	/* A stream this star leads: its acked end is past its refs'. */
	assert_int_equal(star_stream_create(f->st, "b", "w", NULL, &mine), 0);
	assert_int_equal(append_wait(f->st, mine, "one"), 0);
	assert_int_equal(append_wait(f->st, mine, "two"), 0);
	assert_int_equal(star_view_refresh(f->st, mine, STAR_VIEW_ALL), 0);
	assert_int_equal(stream_acked_byte(mine), 6);
	assert_int_equal(append_wait(f->st, mine, "three"), 0);
	assert_int_equal(stream_acked_byte(mine), 11);
	stream_put(mine);
}

/* The star's trim hook, as star_view_trim() calls it. */
static struct {
	uint64_t old_byte, new_byte;
	int calls;
} trim_hooked;

static void on_trimmed_hook(void *arg, struct nv_stream *s, uint64_t old_byte,
			    uint64_t new_byte)
{
	(void)arg;
	(void)s;
	trim_hooked.old_byte = old_byte;
	trim_hooked.new_byte = new_byte;
	trim_hooked.calls++;
}

/* star_view_refresh() on a stream another star trims and settles
 * (engine/starview.c invariants 1-3): the trim point from the row, capped
 * at the refs' end (a leader may trim past its frontier), the settled end
 * from the catalog rows only with STAR_VIEW_ALL, neither ever lowered,
 * the trim hook told of each move; star_view_trim() (the holder's word)
 * the same; never taken. */
static void test_view_refresh_trim_settled(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t ld = fake_star(kv, "sd", ""), cver, ver;
	char prev[META_STAR_MAX + 1];
	struct absorb_run run = { .first_seq = 0, .first_byte = 0,
				  .nbytes = 10, .nrec = 2, .settled_byte = ABSORB_UNKNOWN };
	struct absorb_slot slot = { .slot = 0, .footer_off = 0, .footer_len = 10, .nruns = 1,
				    .runs = &run };
	struct absorb_policy pol = { .age_cap_ns = NV_NS_PER_S };
	struct meta_ref_obj obj = { .first_seq = 0, .first_byte = 0, .epoch = 1,
				    .footer_off = 10, .footer_len = 10 };
	struct lease_holder h;
	struct meta_chain row;
	struct meta_lease l;
	struct meta_ref cat;
	struct kv_txn *txn;
	struct nv_stream *s;

	assert_int_equal(star_stream_create(f->st, "b", "t", NULL, &s), 0);
	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "sd", nv_now_wall_ns(), &row,
					 &cver), 0);
	assert_int_equal(meta_lease_take(kv, s->id, "sd", "", ld, &l, &ver, prev), 0);
	run.stream_id = s->id;
	run.lease_ver = ver;
	assert_int_equal(absorb_commit_batch(kv, &row, &cver, &slot, 1, &pol, NULL), 0);
	assert_int_equal(kv_lease_revoke(kv, ld), 0);
	memset(&trim_hooked, 0, sizeof(trim_hooked));
	f->st->cfg.trimmed = on_trimmed_hook;
	assert_int_equal(star_view_refresh(f->st, s, STAR_VIEW_READ), 1);
	assert_int_equal(stream_acked_byte(s), 10);
	assert_int_equal(trim_hooked.calls, 0); /* nothing trimmed */

	/* Settled elsewhere: the span ref became a catalog row. */
	meta_ref_init(&cat);
	cat.stream_id = s->id;
	cat.kind = META_REF_CATALOG;
	cat.end_seq = 2;
	cat.end_byte = 10;
	cat.cls = NV_CLASS_STANDARD;
	snprintf(cat.bucket, sizeof(cat.bucket), "b");
	assert_int_equal(meta_ref_add_obj(&cat, &obj), 0);
	txn = kv_txn_new();
	assert_non_null(txn);
	assert_int_equal(meta_ref_txn_put(txn, &cat), 0);
	assert_int_equal(kv_txn_commit(kv, txn, NULL), 0);
	kv_txn_free(txn);
	meta_ref_clear(&cat);
	assert_int_equal(star_view_refresh(f->st, s, STAR_VIEW_READ), 0);
	assert_int_equal(atomic_load(&s->settled_seq), 0); /* not read for a read */
	assert_int_equal(star_view_refresh(f->st, s, STAR_VIEW_ALL), 0);
	assert_int_equal(atomic_load(&s->settled_seq), 2);
	assert_int_equal(atomic_load(&s->settled_byte), 10);

	/* Trimmed elsewhere to record 1 (byte 5), then past the refs' end. */
	assert_int_equal(meta_stream_set_trim(kv, s->id, 1, 5), 0);
	assert_int_equal(star_view_refresh(f->st, s, STAR_VIEW_READ), 0);
	assert_int_equal(atomic_load(&s->trim_seq), 1);
	assert_int_equal(atomic_load(&s->trim_byte), 5);
	assert_int_equal(trim_hooked.calls, 1);
	assert_int_equal(trim_hooked.old_byte, 0);
	assert_int_equal(trim_hooked.new_byte, 5);
	assert_int_equal(meta_stream_set_trim(kv, s->id, 3, 17), 0);
	assert_int_equal(star_view_refresh(f->st, s, STAR_VIEW_ALL), 0);
	assert_int_equal(atomic_load(&s->trim_seq), 2); /* capped at the view's end */
	assert_int_equal(atomic_load(&s->trim_byte), 10);
	assert_int_equal(trim_hooked.calls, 2);
	assert_int_equal(trim_hooked.old_byte, 5);
	assert_int_equal(trim_hooked.new_byte, 10);
	assert_int_equal(star_view_refresh(f->st, s, STAR_VIEW_ALL), 0);
	assert_int_equal(trim_hooked.calls, 2); /* nothing new */
	/* The holder's word: never lowered. */
	assert_int_equal(star_view_trim(f->st, s, 1, 5), 0);
	assert_int_equal(atomic_load(&s->trim_byte), 10);
	assert_int_equal(trim_hooked.calls, 2);
	assert_int_equal(atomic_load(&s->settled_seq), 2);
	f->st->cfg.trimmed = NULL;
	assert_int_equal(star_leader(f->st, s, &h), -ENOENT); /* never taken */
	stream_put(s);
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
	uint64_t ids[N];
	struct absorb_slot slot = { .slot = 0, .footer_off = 0, .footer_len = 10, .nruns = N,
				    .runs = runs };
	struct absorb_policy pol = { .age_cap_ns = NV_NS_PER_S };
	struct meta_chain row;
	struct meta_lease l;
	struct meta_ref r;

	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "se", nv_now_wall_ns(), &row,
					 &cver), 0);
	for (unsigned i = 0; i < N; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%u", i);
		ids[i] = mk_stream(kv, name);
		assert_int_equal(meta_lease_take(kv, ids[i], "se", "", ld, &l, &ver, prev), 0);
		runs[i] = (struct absorb_run){ .stream_id = ids[i], .nbytes = 3, .nrec = 1,
					       .settled_byte = ABSORB_UNKNOWN, .lease_ver = ver };
	}
	assert_int_equal(absorb_commit_batch(kv, &row, &cver, &slot, 1, &pol, NULL), 0);
	meta_ref_init(&r);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(meta_ref_last(kv, ids[i], &r), 0);
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

/* lease_reg_cfg callbacks of a second registry in this process: heads
 * that move at every ask (so a lost registry registers again). */
static uint64_t other_heads_n;

static void other_heads(void *arg, uint64_t *epochs)
{
	(void)arg;
	other_heads_n++;
	for (unsigned c = 0; c < NV_CLASS_COUNT; c++)
		epochs[c] = 1000 + other_heads_n;
}

static void other_lost(void *arg, const uint64_t *epochs)
{
	(void)arg;
	(void)epochs;
}

static uint64_t other_live(void *arg)
{
	return lease_reg_live_id(arg);
}

static uint64_t duty_gauge(struct star *st)
{
	return NV_STAT_GET(star_stats(st), settle_duty);
}

/* The duty row: its holder and epoch (-ENOENT vacant). */
static int duty_row(struct kv *kv, char *star, uint64_t *epoch, uint64_t *ver)
{
	struct meta_duty d;
	int rc = meta_duty_get(kv, "settle", &d, ver);

	if (!rc) {
		snprintf(star, META_STAR_MAX + 1, "%s", d.star);
		*epoch = d.epoch;
	}
	return rc;
}

/* Release the duty row whoever holds it; true once d took it. */
static bool release_and_take(struct kv *kv, struct duty *d)
{
	char who[META_STAR_MAX + 1];
	uint64_t e, ver;

	if (duty_row(kv, who, &e, &ver) == 0 && meta_duty_release(kv, "settle", ver))
		return false;
	return duty_poll(d) == 1;
}

/*
 * The settle duty lease: the single star holds it (as a single star
 * always did its duty); a second star "sd" (its own registry in this
 * process) sees the holder and cannot take it; once the holder's row
 * goes, sd takes it with the next epoch and sa stops holding it; a take
 * on sa of a stream whose leader died now settles that leader's epoch
 * on demand (the duty is elsewhere); when sd's registry lease is lost,
 * its duty goes with it (no duty_held() past it) and sa takes it back,
 * deleting nothing for one read grace (sd's graces ran on its clock).
 */
static void test_duty_lease(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	struct lease_reg_cfg rcfg = { .kv = kv, .star = "sd", .data_dir = "/elsewhere-d",
				      .ttl_s = lease_s(), .heads = other_heads,
				      .lost = other_lost };
	uint64_t heads[NV_CLASS_COUNT] = { 0 }, e1 = 0, e, ver = 0, lc, lx, cver, lver, t0;
	char who[META_STAR_MAX + 1], prev[META_STAR_MAX + 1];
	struct lease_reg *rb;
	struct duty *db, *dn;
	struct meta_duty d;
	struct meta_chain row;
	struct meta_lease l;
	struct nv_stream *s;
	int rc;

	AWAIT(duty_gauge(f->st) == 1);
	assert_int_equal(duty_row(kv, who, &e1, &ver), 0);
	assert_string_equal(who, "sa");
	assert_true(e1 >= 1);
	/* A second star: the duty is held, it is not taken twice. */
	other_heads(NULL, heads);
	assert_int_equal(lease_reg_open(&rcfg, &rb), 0);
	assert_int_equal(lease_reg_start(rb, heads), 0);
	assert_int_equal(duty_new(&(struct duty_cfg){ .kv = kv, .star = "sd",
						      .live_lease = other_live, .arg = rb }, &db), 0);
	assert_int_equal(duty_poll(db), 0);
	assert_false(duty_held(db));
	duty_holder(db, who, &e);
	assert_string_equal(who, "sa");
	assert_int_equal(e, e1);
	assert_int_equal(meta_duty_take(kv, "settle", "sd", lease_reg_id(rb), &d, NULL, NULL),
			 -EEXIST);
	/* The holder's row goes (as with its registry lease): sd takes it
	 * (sa's own poll may win the race for the vacant row: then its row
	 * goes again). */
	assert_int_equal(meta_duty_release(kv, "settle", ver + 1), -ECANCELED);
	AWAIT(release_and_take(kv, db));
	assert_true(duty_held(db));
	assert_int_equal(duty_row(kv, who, &e, &ver), 0);
	assert_string_equal(who, "sd");
	assert_true(e > e1);
	e1 = e;
	AWAIT(duty_gauge(f->st) == 0);
	assert_int_equal(duty_poll(db), 1); /* still held: nothing moved */
	/* The demand driver: sc leads a stream and dies with its epoch
	 * unsettled; the take on sa settles it itself. */
	lc = fake_star(kv, "sc", "");
	assert_int_equal(star_stream_create(f->st, "b", "dd", NULL, &s), 0);
	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "sc", nv_now_wall_ns(), &row,
					 &cver), 0);
	assert_int_equal(meta_lease_take(kv, s->id, "sc", "", lc, &l, &lver, prev), 0);
	assert_int_equal(kv_lease_revoke(kv, lc), 0);
	t0 = nv_now_mono_ns();
	assert_int_equal(append_wait(f->st, s, "after"), 0);
	assert_true(nv_now_mono_ns() - t0 < 500 * NV_NS_PER_MS); /* < take_wait_ns */
	assert_int_equal(NV_STAT_GET(star_stats(f->st), demand_settles), 1);
	assert_int_equal(meta_chain_get(kv, NV_CLASS_STANDARD, "sc", row.epoch, &row, &cver), 0);
	assert_int_equal(row.state, CHAIN_SETTLED); /* not retired: the trim is the duty's */
	stream_put(s);
	/* sd's registry lease is lost: its duty goes with it, sa takes it
	 * back with the next epoch. */
	assert_int_equal(kv_lease_revoke(kv, lease_reg_id(rb)), 0);
	AWAIT(!duty_held(db));
	AWAIT(duty_gauge(f->st) == 1);
	assert_int_equal(duty_row(kv, who, &e, &ver), 0);
	assert_string_equal(who, "sa");
	assert_int_equal(e, e1 + 1);
	/* Taken from another star, whose graces ran on its clock: nothing
	 * is deleted for one read grace (30 s) on sa's.  sc's settled chain
	 * has no slot: without that wait the next pass (100 ms) would
	 * retire it.  A thing that must not happen: ten passes' time. */
	usleep(1000 * 1000);
	assert_int_equal(meta_chain_get(kv, NV_CLASS_STANDARD, "sc", row.epoch, &row, &cver), 0);
	assert_int_equal(row.state, CHAIN_SETTLED);
	rc = duty_poll(db);
	assert_true(rc == 0 || rc == -ENOENT);
	assert_false(duty_held(db));
	duty_free(db); /* not held: releases nothing */
	assert_int_equal(duty_row(kv, who, &e, &ver), 0);
	assert_string_equal(who, "sa");
	lease_reg_close(rb);
	/* A take under a lost lease writes nothing; no registry: held. */
	assert_int_equal(kv_lease_grant(kv, 30, &lx), 0);
	assert_int_equal(kv_lease_revoke(kv, lx), 0);
	assert_int_equal(meta_duty_release(kv, "settle", ver), 0);
	assert_int_equal(meta_duty_take(kv, "settle", "sx", lx, &d, NULL, NULL), -ENOLCK);
	assert_int_equal(meta_duty_get(kv, "settle", &d, NULL), -ENOENT);
	assert_int_equal(duty_new(&(struct duty_cfg){ .kv = kv, .star = "sn" }, &dn), 0);
	assert_int_equal(duty_poll(dn), 1);
	assert_true(duty_held(dn));
	duty_free(dn);
	AWAIT(duty_gauge(f->st) == 1); /* sa takes the vacant row again */
}

struct cancel_arg {
	struct runner *r;
	struct gate_waiter w;
	unsigned cls;
	uint64_t epoch;
	int rc;
};

static void *settle_thread(void *arg)
{
	struct cancel_arg *c = arg;

	c->rc = runner_settle(c->r, c->cls, "sk", c->epoch, nv_now_mono_ns() + 20 * NV_NS_PER_S,
			      &c->w);
	return NULL;
}

static bool chain_settled(struct kv *kv, unsigned cls, const char *star, uint64_t epoch)
{
	struct meta_chain row;
	uint64_t v;

	int rc = meta_chain_get(kv, cls, star, epoch, &row, &v);

	/* Gone: settled and retired by the duty's trim-check. */
	return rc == -ENOENT || (rc == 0 && row.state == CHAIN_SETTLED);
}

/*
 * The settle runner (runner.h): a wait bounded by its deadline answers
 * -ETIMEDOUT and a cancelled one -EINTR while the walk (slowed by a
 * failpoint) goes on and settles the chain; a later demand for the
 * settled (or settled and retired) chain answers 0.  The chain is a live star's ("sk", its heads
 * unknown), so nothing but the runner walks it.
 */
static void test_runner_cancel_not_walk(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t lk = fake_star(kv, "sk", ""), cver;
	struct cancel_arg c = { .cls = NV_CLASS_STANDARD };
	struct meta_chain row;
	pthread_t t;

	assert_int_equal(meta_chain_mint(kv, NV_CLASS_STANDARD, "sk", nv_now_wall_ns(), &row,
					 &cver), 0);
	c.epoch = row.epoch;
	assert_int_equal(runner_new(&(struct runner_cfg){ .recover = f->st->recover }, &c.r), 0);
	assert_int_equal(nv_fp_arm("recover.before_walk=delay:1500"), 0);
	assert_int_equal(runner_settle(c.r, NV_CLASS_STANDARD, "sk", row.epoch,
				       nv_now_mono_ns() + 100 * NV_NS_PER_MS, NULL), -ETIMEDOUT);
	assert_false(chain_settled(kv, NV_CLASS_STANDARD, "sk", row.epoch));
	/* A second demand joins the walk under way; its cancel ends only
	 * its wait. */
	assert_int_equal(pthread_create(&t, NULL, settle_thread, &c), 0);
	runner_cancel(c.r, &c.w);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(c.rc, -EINTR);
	assert_false(chain_settled(kv, NV_CLASS_STANDARD, "sk", row.epoch));
	AWAIT(chain_settled(kv, NV_CLASS_STANDARD, "sk", row.epoch));
	nv_fp_reset();
	assert_int_equal(runner_settle(c.r, NV_CLASS_STANDARD, "sk", row.epoch,
				       nv_now_mono_ns() + 10 * NV_NS_PER_S, NULL), 0);
	runner_free(c.r);
	assert_int_equal(kv_lease_revoke(kv, lk), 0);
}

/* A lease passed to this star (a handoff elsewhere) is readied by the
 * first star_lead_check(): the predecessor waited for, the view
 * reloaded, the lease cached, before it answers "this star leads". */
static void test_passed_lease_readied(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t lb = fake_star(kv, "sb", "10.0.0.2:7070"), ver;
	char prev[META_STAR_MAX + 1];
	struct nv_stream *s;
	struct lease_holder h;
	struct meta_lease l;

	assert_int_equal(star_stream_create(f->st, "b", "p", NULL, &s), 0);
	assert_int_equal(meta_lease_take(kv, s->id, "sb", "10.0.0.2:7070", lb, &l, &ver, prev), 0);
	assert_int_equal(star_lead_check(f->st, s, &h), -STAR_ENOTOWNER);
	assert_int_equal(meta_lease_release(kv, s->id, ver), 0); /* sb's release */
	assert_int_equal(meta_lease_take(kv, s->id, "sa", "", lease_reg_id(f->st->reg), &l, &ver,
					 prev), 0); /* ... passed to sa */
	assert_string_equal(prev, "sb");
	assert_int_equal(atomic_load(&s->lease_gen), 0);
	assert_int_equal(star_lead_check(f->st, s, &h), 0);
	assert_string_equal(h.star, "sa");
	assert_int_equal(h.epoch, 2);
	assert_int_not_equal(atomic_load(&s->lease_gen), 0); /* readied: cached */
	assert_int_equal(kv_lease_revoke(kv, lb), 0);
	stream_put(s);
}

/* Every head chain of star sa SETTLED, or retired since (its row
 * deleted by the trim once its slots are gone: under valgrind the trim
 * got there before the first look, and the wait timed out). */
static bool all_settled(struct kv *kv)
{
	for (unsigned c = 0; c < NV_CLASS_COUNT; c++) {
		struct meta_chain ch;
		uint64_t head = 0, ver;
		int rc;

		if (meta_mint_head(kv, c, "sa", &head) || !head)
			return false;
		rc = meta_chain_get(kv, c, "sa", head, &ch, &ver);
		if (rc == -ENOENT)
			continue; /* retired */
		if (rc || ch.state != CHAIN_SETTLED)
			return false;
	}
	return true;
}

/* Drain: the registry row set draining (novactl drain); the star takes
 * no lease (a vacant stream is placed on a serving star, NOT_OWNER with
 * it), refuses to be a handoff target, hands off what it leads, and once
 * it leads nothing settles its head epochs while it stands. */
static void test_drain(void **state)
{
	struct fx *f = *state;
	struct kv *kv = f->st->kv;
	uint64_t lb = fake_star(kv, "sb", "10.0.0.2:7070"), n = 9;
	struct nv_stream *s, *v;
	struct lease_holder h;
	struct meta_star row;

	assert_int_equal(star_stream_create(f->st, "b", "d", NULL, &s), 0);
	assert_int_equal(append_wait(f->st, s, "led"), 0);
	assert_int_equal(star_stream_create(f->st, "b", "dv", NULL, &v), 0);
	assert_int_equal(meta_star_set_state(kv, "sa", STAR_DRAINING), 0);
	assert_int_equal(meta_star_get(kv, "sa", &row, NULL), 0);
	assert_int_equal(row.state, STAR_DRAINING);
	assert_int_equal(row.lease, lease_reg_id(f->st->reg)); /* still bound to it */
	handoff_nudge(f->st);
	/* s handed to sb: a release to a successor is two steps (vacant,
	 * then sb's take), so sa's count reaches 0 before sb holds it. */
	AWAIT(meta_lease_count(kv, "sa", &n) == 0 && n == 0 && star_leader(f->st, s, &h) == 0 &&
	      !strcmp(h.star, "sb"));
	assert_int_equal(star_lead(f->st, v, &h), -STAR_ENOTOWNER); /* placed */
	assert_string_equal(h.star, "sb");
	assert_int_equal(star_release(f->st, v, "sa", &h), -STAR_ENOTOWNER);
	AWAIT(all_settled(kv));
	assert_int_equal(meta_lease_count(kv, "sb", &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(kv_lease_revoke(kv, lb), 0);
	stream_put(v);
	stream_put(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_vacant_take, setup, teardown),
		cmocka_unit_test_setup_teardown(test_epochs_only_grow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deleted_stream_lease_rows_reclaimed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refused_with_holder, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_waits_for_predecessor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_wait_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_registry_loss, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_ack_past_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ref_commit_compares_lease, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_fenced_refs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_view_refresh_vacant, setup, teardown),
		cmocka_unit_test_setup_teardown(test_view_refresh_trim_settled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_id_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_earlier_incarnation_revoked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_flushes_then_passes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_vacant_and_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_after_release_no_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(test_passed_lease_readied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_after_fenced_absorb, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_after_settled_elsewhere, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duty_lease, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runner_cancel_not_walk, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
