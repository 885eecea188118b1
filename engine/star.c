/*
 * star.c - see star.h.
 *
 * For: the star's lifecycle (star_open(), restart_class(), star_close())
 * and the calls fs/ makes, each a short delegation to the module that
 * does the work.  Not for: assembling the store and metastore
 * (engine/stack.c), the data directory's lock and star id
 * (engine/datadir.c), settling and trimming (engine/auditor.c).
 *
 * Ownership: the star owns the data directory's lock, the stack (store
 * and metastore, from stack_open()), the fetch cache, the stream table,
 * the backlog, the tail cache, the read engine, the auditor, and per
 * class one chain and one absorb.  All are created in star_open() and
 * torn down in star_close() in reverse order.
 *
 * The fields and their invariants: engine/star_impl.h.
 */
#include "config.h"
#include "engine/star.h"
#include "engine/star_impl.h"
#include "engine/absorb.h"
#include "engine/auditor.h"
#include "engine/backlog.h"
#include "engine/chain.h"
#include "engine/datadir.h"
#include "engine/fetch.h"
#include "engine/recover.h"
#include "engine/stack.h"
#include "engine/store/store.h"
#include "engine/tailcache.h"
#include "meta/chains.h"
#include "meta/kv.h"
#include "meta/refs.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


const char *star_id(const struct star *st) { return st->id; }
const char *star_listen_addr(const struct star *st) { return st->cfg.listen_addr; }

uint64_t star_epoch(const struct star *st, unsigned cls)
{
	return cls < NV_CLASS_COUNT ? st->epochs[cls] : 0;
}

struct nv_stats *star_stats(struct star *st)
{
	return &st->stats;
}

void star_get_gauges(struct star *st, struct star_gauges *g)
{
	g->backlog_bytes = backlog_used(st->backlog);
	g->backlog_budget = backlog_budget(st->backlog);
	g->tail_cache_bytes = tailcache_bytes(st->tc);
	g->read_cache_bytes = read_cache_bytes(st->re);
	g->streams_loaded = stream_table_count(st->streams);
	/* Slots an earlier run wrote are deleted by this one too: never
	 * below zero. */
	g->slots_live = NV_STAT_GET(&st->stats, slots_written) >
					NV_STAT_GET(&st->stats, slots_deleted)
				? NV_STAT_GET(&st->stats, slots_written) -
					  NV_STAT_GET(&st->stats, slots_deleted)
				: 0;
	g->fetch_cache_bytes = st->fc ? fetch_cache_bytes(st->fc) : 0;
	store_get_stats(st->store, &g->store);
}

/* ------------------------------------------------------------ start-up */

static void on_acked(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte)
{
	struct star *st = arg;

	if (st->cfg.acked)
		st->cfg.acked(st->cfg.acked_arg, s, old_byte, new_byte);
}

/* A settle moved a stream's settled end (settle.h). */
static void on_settled(void *arg, uint64_t stream, uint64_t end_seq, uint64_t end_byte)
{
	struct star *st = arg;
	struct nv_stream *s = stream_table_find(st->streams, stream);

	if (!s)
		return;
	(void)stream_settled_up(s, end_seq, end_byte);
	stream_put(s);
}

static void on_halted(void *arg, unsigned cls, uint64_t epoch, int err)
{
	struct star *st = arg;

	/* Fenced (absorb.c: -ECANCELED): another star settles or took what
	 * the absorb could not commit; its acked records are durable in
	 * their slots, so a close before the restart is not an error. */
	if (err == -ECANCELED)
		atomic_store(&st->halted_epochs[cls], epoch);
	if (st->auditor)
		auditor_report_halt(st->auditor, cls, epoch);
}

/* A linger this long or longer is a cost setting (novafs(8) linger_us):
 * the flight waits it out on an idle chain too, so a trickle of records
 * from many writers shares PUTs even when the store answers faster than
 * they arrive.  Shorter (the default 1 ms) is a latency setting: an idle
 * chain seals at once and a lone writer never waits for the linger. */
#define LINGER_IDLE_MIN_NS (10 * NV_NS_PER_MS)

uint64_t star_class_linger_ns(const struct star_cfg *cfg, unsigned cls, bool seg_store)
{
	if (cls < NV_CLASS_COUNT && cfg->linger_class_ns[cls] >= 0)
		return (uint64_t)cfg->linger_class_ns[cls];
	if (cfg->linger_ns >= 0)
		return (uint64_t)cfg->linger_ns;
	return seg_store ? 0 : STAR_LINGER_REQUEST_NS;
}

/* Whether class cls's slots go to segment files of a directory store:
 * the standard store keeps them there, and an express set (S3) does not
 * take this class. */
static bool class_seg_store(const struct star *st, unsigned cls)
{
	return st->slot_segs &&
	       (cls != NV_CLASS_EXPRESS || !st->cfg.express_urls || !*st->cfg.express_urls);
}

static int start_class(struct star *st, unsigned cls)
{
	struct meta_chain row;
	uint64_t ver;
	struct absorb_cfg ac = { 0 };
	struct chain_cfg cc = { 0 };
	int rc;

	rc = meta_chain_mint(st->kv, cls, st->id, nv_now_wall_ns(), &row, &ver);
	if (rc) {
		nv_log(NV_ERR, NV_SUB_MAIN, "minting a %s epoch failed: %s", nv_class_name(cls),
		       strerror(-rc));
		return rc;
	}
	/* The put window, for a recovery's garbage probe above the cut
	 * (recover.c reap()): a later start may run with another. */
	row.put_window = st->cfg.put_window;
	rc = meta_chain_cas(st->kv, &row, ver);
	if (!rc)
		rc = meta_chain_get(st->kv, cls, st->id, row.epoch, &row, &ver);
	if (rc) {
		nv_log(NV_ERR, NV_SUB_MAIN, "recording the %s epoch's put window failed: %s",
		       nv_class_name(cls), strerror(-rc));
		return rc;
	}
	st->epochs[cls] = row.epoch;
	ac.kv = st->kv;
	ac.backlog = st->backlog;
	ac.stats = &st->stats;
	ac.row = row;
	ac.row_ver = ver;
	ac.policy.age_cap_ns = st->cfg.age_cap_ns[cls];
	ac.policy.trigger_bytes = st->cfg.settle_trigger_bytes;
	ac.policy.linger_ns = st->cfg.settle_linger_ns;
	ac.max_batch_slots = st->cfg.absorb_batch_slots;
	ac.linger_ns = st->cfg.absorb_linger_ns;
	ac.failed = on_halted;
	ac.failed_arg = st;
	rc = absorb_new(&ac, &st->absorbs[cls]);
	if (rc)
		return rc;
	cc.cls = cls;
	cc.star = st->id;
	cc.epoch = row.epoch;
	cc.first_slot = 0;
	cc.put_window = st->cfg.put_window; cc.group_commit = st->cfg.group_commit != 0;
	cc.flight_max = st->cfg.flight_max;
	cc.linger_ns = star_class_linger_ns(&st->cfg, cls, class_seg_store(st, cls));
	cc.linger_idle = cc.linger_ns >= LINGER_IDLE_MIN_NS;
	cc.put_timeout_ns = st->cfg.put_timeout_ns;
	cc.enc.chunk_target = (size_t)st->cfg.chunk_kib << 10;
	cc.enc.zstd_level = st->cfg.zstd_level;
	cc.store = st->store;
	cc.backlog = st->backlog;
	cc.tc = st->tc;
	cc.stats = &st->stats;
	cc.release = absorb_push;
	cc.release_arg = st->absorbs[cls];
	cc.acked = on_acked;
	cc.acked_arg = st;
	cc.halted = on_halted;
	cc.halted_arg = st;
	cc.may_ack = star_lease_may_ack;
	cc.may_ack_arg = st;
	rc = chain_new(&cc, &st->chains[cls]);
	if (rc)
		return rc;
	nv_log(NV_INFO, NV_SUB_MAIN, "star %s: %s chain epoch %llu started (linger %llu us%s)",
	       st->id, nv_class_name(cls), (unsigned long long)row.epoch,
	       (unsigned long long)(cc.linger_ns / NV_NS_PER_US),
	       cc.linger_idle && !cc.group_commit ? ", also when idle" : "");
	return 0;
}

struct reset_arg {
	struct star *st;
	unsigned cls;
	int err;
};

#ifndef NDEBUG
/* Debug builds: is class_lock[cls] held for writing?  As lockcheck.h
 * does for mutexes: a try-lock that fails means somebody holds it (false
 * negatives when another thread does; never false positives). */
static int class_lock_is_held(struct star *st, unsigned cls)
{
	if (pthread_rwlock_tryrdlock(&st->class_lock[cls]) == 0) {
		pthread_rwlock_unlock(&st->class_lock[cls]);
		return 0;
	}
	return 1;
}
#endif

/*
 * After a class's epoch was settled: positions come from the refs.
 * Called by restart_class() through stream_table_each() with
 * class_lock[cls] held exclusively and no chain of the class running.
 */
static void reset_stream(void *arg, struct nv_stream *s)
{
	struct reset_arg *r = arg;
	struct meta_ref ref;
	uint64_t end_seq = 0, end_byte = 0;
	int rc;

	assert(class_lock_is_held(r->st, r->cls));
	if (s->cls != r->cls)
		return;
	meta_ref_init(&ref);
	rc = meta_ref_last(r->st->kv, s->id, &ref);
	if (rc == 0) {
		end_seq = ref.end_seq;
		end_byte = ref.end_byte;
	} else if (rc == -ENOENT) {
		end_seq = atomic_load(&s->trim_seq);
		end_byte = atomic_load(&s->trim_byte);
	} else {
		r->err = rc;
	}
	meta_ref_clear(&ref);
	if (rc && rc != -ENOENT)
		return;
	/* No chain of this class exists now: its admission fields are ours. */
	s->next_seq = end_seq;
	s->next_byte = end_byte;
	s->open_flight_gen = UINT64_MAX;
	pthread_mutex_lock(&s->lock);
	atomic_store(&s->acked_seq, end_seq);
	atomic_store(&s->acked_byte, end_byte);
	atomic_store(&s->frontier_seq, end_seq);
	atomic_store(&s->frontier_byte, end_byte);
	stream_pend_pop_below(s, end_seq);
	pthread_mutex_unlock(&s->lock);
}

/*
 * The auditor's callback for a halted class: quiesce the chain and its
 * absorb, settle the epoch (fence at the cut, walk, reap), reload the
 * positions of the class's streams from their refs, and start a new
 * epoch.  Returns the new epoch, or 0 (the auditor retries; appends of
 * the class fail with EIO meanwhile).
 */
static uint64_t restart_class(void *arg, unsigned cls, uint64_t epoch)
{
	struct star *st = arg;
	/* One budget for this call's lines: the auditor retries a failing
	 * restart with back-off, a disk with no free block for minutes. */
	static struct nv_ratelimit rl;
	struct reset_arg ra = { st, cls, 0 };
	int rc;

	nv_log_ratelimited(&rl, NV_WARN, NV_SUB_MAIN, "%s epoch %llu halted: settling it and "
			   "starting a new epoch", nv_class_name(cls), (unsigned long long)epoch);
	pthread_rwlock_wrlock(&st->class_lock[cls]);
	if (st->chains[cls]) {
		chain_stop(st->chains[cls]);
		(void)absorb_drain(st->absorbs[cls]);
		absorb_free(st->absorbs[cls]);
		chain_free(st->chains[cls]);
		st->chains[cls] = NULL;
		st->absorbs[cls] = NULL;
	}
	rc = recover_chain(&st->recover, cls, st->id, epoch);
	if (rc == -ENOENT)
		rc = 0; /* settled and retired already (another star's duty) */
	if (!rc) {
		stream_table_each(st->streams, reset_stream, &ra);
		rc = ra.err;
	}
	if (!rc)
		rc = start_class(st, cls);
	pthread_rwlock_unlock(&st->class_lock[cls]);
	if (rc) {
		nv_log_ratelimited(&rl, NV_ERR, NV_SUB_MAIN, "%s: restart after the halt of epoch "
				   "%llu failed: %s; retrying", nv_class_name(cls),
				   (unsigned long long)epoch, strerror(-rc));
		return 0;
	}
	return st->epochs[cls];
}

/* The store and the metastore (engine/stack.h). */
static int open_stack(struct star *st)
{
	const struct star_cfg *cfg = &st->cfg;
	struct stack_cfg sc = {
		.data_dir = st->data_dir, .store_url = cfg->store_url, .location = cfg->location,
		.express_urls = cfg->express_urls, .store_faults = cfg->store_faults,
		.meta_url = cfg->meta_url, .meta_check = cfg->meta_check,
		.slot_segments = cfg->slot_segments,
	};
	struct stack stk;
	struct stack_failure why;
	int rc = stack_open(&sc, &stk, &why);

	if (rc) {
		if (why.part == STACK_STORE)
			nv_log(NV_ERR, NV_SUB_MAIN, "opening the object store failed: %s",
			       strerror(-rc));
		else if (why.part == STACK_EXPRESS)
			nv_log(NV_ERR, NV_SUB_MAIN, "opening the express bucket set failed: %s",
			       strerror(-rc));
		else if (why.part == STACK_META)
			nv_log(NV_ERR, NV_SUB_MAIN, "opening the metastore failed: %s",
			       strerror(-rc));
		else if (why.part == STACK_FAULTS)
			nv_log(NV_ERR, NV_SUB_MAIN, "-o store_faults=%s (or NOVAFS_STORE_FAULTS): "
			       "%s: items KEY=VALUE joined by ':' (see novafs --help)", why.url,
			       strerror(-rc));
		return rc;
	}
	st->store = stk.store;
	st->kv = stk.kv;
	st->slot_segs = stk.slot_segments;
	return 0;
}

/* The caches and the read engine over the stack. */
static int start_caches(struct star *st)
{
	const struct star_cfg *cfg = &st->cfg;
	char path[4096];
	struct read_cfg rcfg = {
		.store = st->store, .kv = st->kv, .stats = &st->stats,
		.star = st->id, .cache_bytes = cfg->read_cache_bytes,
		.prefetch_threads = cfg->prefetch_threads, .readahead = cfg->readahead,
		.shared = kv_shared(st->kv),
	};
	int rc;

	if (cfg->scratch_dir)
		snprintf(path, sizeof(path), "%s", cfg->scratch_dir);
	else
		snprintf(path, sizeof(path), "%s/scratch", st->data_dir);
	/* A directory store is local disk already: staging its bundles in
	 * scratch would write every settled byte once more (bench/RESULTS.md,
	 * settlement on the directory store), so its eras read them in place
	 * (a fetch cache of no budget). */
	rc = fetch_cache_new(st->store, path,
			     strncmp(store_name(st->store), "dir:", 4) ? cfg->fetch_cache_bytes : 0,
			     &st->fc);
	if (rc)
		return rc;
	st->streams = stream_table_new();
	st->backlog = backlog_new(cfg->backlog_bytes, cfg->backlog_wait_ns, &st->stats);
	st->tc = tailcache_new(cfg->tail_cache_bytes, &st->stats);
	if (!st->streams || !st->backlog || !st->tc)
		return -ENOMEM;
	rcfg.tc = st->tc;
	/* Where a GET costs a round trip (S3), a small slot is read whole:
	 * one GET where a footer and a chunk took two.  A directory store
	 * reads the chunk alone, into its cache entry with no copy. */
	rcfg.whole_max = strncmp(store_name(st->store), "dir:", 4) ? STAR_READ_WHOLE_MAX : 0;
	return read_engine_new(&rcfg, &st->re);
}

/*
 * Invariant 2: the auditor settles what earlier incarnations left (they
 * are below the new mint heads now) and then opens the gate; stream
 * loads wait for it.
 */
static int start_auditor(struct star *st)
{
	const struct star_cfg *cfg = &st->cfg;
	struct auditor_cfg ac = { 0 };

	ac.star = st->id;
	for (unsigned cls = 0; cls < NV_CLASS_COUNT; cls++)
		ac.live_epochs[cls] = st->epochs[cls];
	ac.recover = st->recover;
	ac.halted = restart_class;
	ac.arg = st;
	ac.period_ns = cfg->audit_period_ns;
	ac.settle.store = st->store;
	ac.settle.kv = st->kv;
	ac.settle.stats = &st->stats;
	ac.settle.fc = st->fc;
	ac.settle.fetch_budget = cfg->fetch_cache_bytes;
	ac.settle.trigger_bytes = cfg->settle_trigger_bytes;
	ac.settle.output_cap_bytes = cfg->output_cap_bytes;
	ac.settle.read_grace_ns = cfg->read_grace_ns;
	memcpy(ac.settle.age_cap_ns, cfg->age_cap_ns, sizeof(ac.settle.age_cap_ns));
	ac.settle.workers = cfg->settle_workers;
	ac.settle.settled = on_settled;
	ac.settle.lease_ver = star_lease_settle_ver;
	ac.settle.arg = st;
	ac.trim.store = st->store;
	ac.trim.kv = st->kv;
	ac.trim.stats = &st->stats;
	ac.trim.read_grace_ns = cfg->read_grace_ns;
	ac.live_lease = star_lease_live_id;
	ac.may_commit = star_lease_may_ack;
	return auditor_new(&ac, &st->auditor);
}

int star_open(const struct star_cfg *cfg, struct star **out)
{
	struct star *st = calloc(1, sizeof(*st));
	pthread_rwlockattr_t ra;
	int rc;

	if (!st)
		return -ENOMEM;
	st->cfg = *cfg;
	/* Writer preference: a restart must not starve behind appends. */
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	for (unsigned cls = 0; cls < NV_CLASS_COUNT; cls++)
		pthread_rwlock_init(&st->class_lock[cls], &ra);
	pthread_rwlockattr_destroy(&ra);
	st->lock_fd = -1;
	st->data_dir = strdup(cfg->data_dir);
	rc = st->data_dir ? datadir_lock(st->data_dir, &st->lock_fd) : -ENOMEM;
	if (!rc)
		rc = datadir_star_id(st->data_dir, cfg->star_id, st->id);
	if (!rc)
		rc = open_stack(st);
	if (!rc)
		rc = kv_claim(st->kv); /* logged */
	if (!rc)
		rc = star_lease_attach(st); /* refuses a live star's id (logged) */
	if (rc)
		goto fail;
	st->recover.store = st->store;
	st->recover.kv = st->kv;
	st->recover.stats = &st->stats;
	for (unsigned cls = 0; cls < NV_CLASS_COUNT; cls++) {
		st->recover.policy[cls].age_cap_ns = cfg->age_cap_ns[cls];
		st->recover.policy[cls].trigger_bytes = cfg->settle_trigger_bytes;
		st->recover.policy[cls].linger_ns = cfg->settle_linger_ns;
	}
	st->recover.batch_slots = cfg->absorb_batch_slots;
	st->recover.probe_window = cfg->put_window * 4 + 16;
	rc = start_caches(st);
	for (unsigned cls = 0; !rc && cls < NV_CLASS_COUNT; cls++)
		rc = start_class(st, cls);
	if (!rc)
		rc = star_lease_start(st);
	if (!rc)
		rc = start_auditor(st);
	if (!rc)
		rc = handoff_start(st);
	if (rc)
		goto fail;
	*out = st;
	return 0;
fail:
	(void)star_close(st);
	return rc;
}

/* ------------------------------------------------------------ close */

int star_close(struct star *st)
{
	int first = 0;

	if (!st)
		return 0;
	handoff_stop(st); /* no drain pass or idle release from now on */
	kv_closing(st->kv); /* a dead metastore is given up on at once (kv.h) */
	/* The registry's callbacks first, then the auditor: no restart may
	 * race the close. */
	star_lease_quiet(st);
	auditor_free(st->auditor);
	st->auditor = NULL;
	for (unsigned cls = 0; cls < NV_CLASS_COUNT; cls++) {
		int rc = star_class_close(st, cls);

		if (rc && !first)
			first = rc;
	}
	/* Every epoch is closed: the registry row and the writer leases go. */
	star_lease_detach(st);
	read_engine_free(st->re);
	fetch_cache_free(st->fc);
	tailcache_free(st->tc);
	backlog_free(st->backlog);
	stream_table_free(st->streams);
	stack_close(&(struct stack){ .store = st->store, .kv = st->kv });
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	for (unsigned cls = 0; cls < NV_CLASS_COUNT; cls++)
		pthread_rwlock_destroy(&st->class_lock[cls]);
	free(st->data_dir);
	free(st);
	return first;
}

/* ------------------------------------------------------------ buckets */

int star_bucket_create(struct star *st, const char *name, const struct meta_owner *own,
		       struct meta_bucket *out)
{
	int rc = nv_bucket_name_check(name);

	if (rc)
		return rc;
	rc = meta_bucket_create(st->kv, name, NV_CLASS_STANDARD, own, out);
	if (!rc)
		nv_log(NV_INFO, NV_SUB_MAIN, "bucket %s created", name);
	return rc;
}

int star_bucket_get(struct star *st, const char *name, struct meta_bucket *out)
{
	return meta_bucket_get(st->kv, name, out);
}

int star_bucket_delete(struct star *st, const char *name)
{
	int rc = meta_bucket_delete(st->kv, name);

	if (!rc)
		nv_log(NV_INFO, NV_SUB_MAIN, "bucket %s deleted", name);
	return rc;
}

int star_bucket_list(struct star *st, const char *after, meta_bucket_fn fn, void *arg)
{
	return meta_bucket_list(st->kv, after, fn, arg);
}

int star_bucket_set_class(struct star *st, const char *name, unsigned cls)
{
	return meta_bucket_set_class(st->kv, name, cls);
}

int star_bucket_set_owner(struct star *st, const char *name, const struct meta_owner *own)
{
	return meta_bucket_set_owner(st->kv, name, own);
}

/* ------------------------------------------------------------ streams */

/* Load a stream's state from its row and its last ref (engine/stream.c). */
static int load_stream(struct star *st, const struct meta_stream *ms, struct nv_stream **out)
{
	return stream_load(st->streams, st->kv, ms, out);
}

int star_stream_create(struct star *st, const char *bucket, const char *name,
		       const struct meta_owner *own, struct nv_stream **out)
{
	struct meta_stream ms;
	int rc = nv_stream_name_check(name);

	if (rc)
		return rc;
	rc = meta_stream_create(st->kv, bucket, name, -1, nv_now_wall_ns(), own, &ms);
	if (rc)
		return rc;
	nv_log(NV_DEBUG, NV_SUB_MAIN, "stream %s/%s created (id %llu, %s)", bucket, name,
	       (unsigned long long)ms.id, nv_class_name(ms.cls));
	return load_stream(st, &ms, out);
}

int star_gate_wait(struct star *st, struct gate_waiter *w)
{
	if (!st->auditor || auditor_gate_is_open(st->auditor))
		return 0;
	return auditor_gate_wait(st->auditor, w);
}

bool star_gate_is_open(struct star *st)
{
	return !st->auditor || auditor_gate_is_open(st->auditor);
}

void star_gate_cancel(struct star *st, struct gate_waiter *w)
{
	if (st->auditor)
		auditor_gate_cancel(st->auditor, w);
}

void star_gate_shut(struct star *st)
{
	if (st && st->auditor)
		auditor_gate_shut(st->auditor);
}

int star_stream_lookup(struct star *st, const char *bucket, const char *name,
		       struct nv_stream **out)
{
	struct meta_stream ms;
	int rc = star_gate_wait(st, NULL);

	if (!rc)
		rc = meta_stream_lookup(st->kv, bucket, name, &ms);
	return rc ? rc : load_stream(st, &ms, out);
}

int star_stream_by_id(struct star *st, uint64_t id, struct nv_stream **out)
{
	struct nv_stream *s = stream_table_find(st->streams, id);
	struct meta_stream ms;
	int rc;

	if (s) {
		*out = s;
		return 0;
	}
	rc = star_gate_wait(st, NULL);
	if (!rc)
		rc = meta_stream_get(st->kv, id, &ms, NULL);
	if (!rc && ms.deleted_ns)
		rc = -ENOENT;
	return rc ? rc : load_stream(st, &ms, out);
}

/* The in-memory side of a deletion whose row change committed. */
static void mark_deleted(struct star *st, struct nv_stream *s)
{
	pthread_mutex_lock(&s->lock);
	s->deleted = true;
	pthread_mutex_unlock(&s->lock);
	tailcache_drop_stream(st->tc, s->id);
	/* Followers end: their next read sees the deletion. */
	NV_STAT_ADD(&st->stats, wakes, wake_close(&s->wake));
}

int star_stream_delete(struct star *st, struct nv_stream *s)
{
	int rc = meta_stream_delete(st->kv, s->id, nv_now_wall_ns());

	if (rc)
		return rc;
	mark_deleted(st, s);
	nv_log(NV_INFO, NV_SUB_MAIN, "stream %s/%s (%llu) deleted at %llu bytes", s->bucket,
	       s->name, (unsigned long long)s->id, (unsigned long long)stream_acked_byte(s));
	return 0;
}

int star_stream_gone(struct star *st, struct nv_stream *s, const char *by)
{
	bool was;

	pthread_mutex_lock(&s->lock);
	was = s->deleted;
	pthread_mutex_unlock(&s->lock);
	if (was)
		return -ENOENT;
	mark_deleted(st, s);
	nv_log(NV_INFO, NV_SUB_MAIN, "stream %s/%s (%llu) deleted by %s%s at %llu bytes here",
	       s->bucket, s->name, (unsigned long long)s->id, by && by[0] ? "star " : "another star",
	       by ? by : "", (unsigned long long)stream_acked_byte(s));
	return -ENOENT;
}

int star_stream_set_owner(struct star *st, struct nv_stream *s, const struct meta_owner *own)
{
	int rc = meta_stream_set_owner(st->kv, s->id, own);

	if (rc)
		return rc;
	pthread_mutex_lock(&s->lock);
	atomic_store(&s->uid, own->uid);
	atomic_store(&s->gid, own->gid);
	atomic_store(&s->mode, own->mode & 07777u);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int star_stream_set_durable(struct star *st, struct nv_stream *s, unsigned durable)
{
	int rc = meta_stream_set_durable(st->kv, s->id, durable);

	if (rc)
		return rc;
	pthread_mutex_lock(&s->lock);
	atomic_store(&s->durable, durable);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int star_stream_rename(struct star *st, const char *bucket, const char *from, const char *to,
		       bool noreplace, struct nv_stream *dst)
{
	uint64_t replaced = 0, tver = 0;
	struct nv_stream *old;
	int rc = nv_stream_name_check(to);

	if (!rc)
		rc = star_gate_wait(st, NULL);
	if (!rc && dst && !noreplace)
		rc = star_lease_fence(st, dst, &tver); /* led elsewhere: ask its leader */
	if (!rc)
		rc = meta_stream_rename(st->kv, bucket, from, to, noreplace,
					noreplace || !dst ? 0 : dst->id, tver, nv_now_wall_ns(),
					&replaced);
	if (rc)
		return rc;
	nv_log(NV_DEBUG, NV_SUB_MAIN, "stream %s/%s renamed to %s", bucket, from, to);
	old = replaced ? stream_table_find(st->streams, replaced) : NULL;
	if (old) { /* the replaced stream is deleted (its row is a tombstone) */
		mark_deleted(st, old); /* its appends here fail from now on */
		stream_put(old);
	}
	if (replaced)
		nv_log(NV_INFO, NV_SUB_MAIN, "stream %s/%s (%llu) deleted: replaced by a rename",
		       bucket, to, (unsigned long long)replaced);
	return 0;
}

int star_stream_name(struct star *st, const struct nv_stream *s, char *name, size_t size)
{
	struct meta_stream ms;
	int rc = meta_stream_get(st->kv, s->id, &ms, NULL);

	if (!rc && ms.deleted_ns)
		rc = -ENOENT;
	if (!rc && (size_t)snprintf(name, size, "%s", ms.name) >= size)
		rc = -ENAMETOOLONG;
	return rc;
}

int star_stream_list(struct star *st, const char *bucket, const char *after,
		     meta_stream_fn fn, void *arg)
{
	return meta_stream_list(st->kv, bucket, after, fn, arg);
}

int star_stream_set_class(struct star *st, struct nv_stream *s, unsigned cls)
{
	struct chain *c;
	unsigned old;
	int rc;

	if (cls >= NV_CLASS_COUNT)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	old = s->cls;
	pthread_mutex_unlock(&s->lock);
	if (old == cls)
		return 0;
	/* Hold admission on the stream's chain so no record slips in
	 * between the emptiness check and the switch (invariant 3). */
	pthread_rwlock_rdlock(&st->class_lock[old]);
	c = st->chains[old];
	if (!c) {
		pthread_rwlock_unlock(&st->class_lock[old]);
		return -EIO; /* the class is restarting */
	}
	chain_admission_lock(c);
	if (s->next_seq != 0) {
		rc = -ENOTEMPTY;
	} else {
		rc = meta_stream_set_class(st->kv, s->id, cls);
		if (!rc) {
			pthread_mutex_lock(&s->lock);
			s->cls = (uint8_t)cls;
			pthread_mutex_unlock(&s->lock);
		}
	}
	chain_admission_unlock(c);
	pthread_rwlock_unlock(&st->class_lock[old]);
	return rc;
}

/* ------------------------------------------------------------ data */

int star_append(struct star *st, struct nv_stream *s, const void *body, size_t len,
		flight_done_fn cb, void *arg, uint64_t *seq)
{
	int rc = star_lease_admit(st, s); /* cached: no metastore call */

	if (rc)
		return rc;
	rc = -EAGAIN;
	for (int i = 0; i < 4 && rc == -EAGAIN; i++) {
		unsigned cls;

		pthread_mutex_lock(&s->lock);
		cls = s->cls;
		pthread_mutex_unlock(&s->lock);
		pthread_rwlock_rdlock(&st->class_lock[cls]);
		rc = st->chains[cls] ? chain_append(st->chains[cls], s, body, len, cb, arg, seq)
				     : -EIO; /* halted, restart pending */
		pthread_rwlock_unlock(&st->class_lock[cls]);
	}
	return rc;
}

void star_each_stream(struct star *st, void (*fn)(void *arg, struct nv_stream *s), void *arg)
{
	stream_table_each(st->streams, fn, arg);
}

int star_read(struct star *st, struct nv_stream *s, struct reader *rd, uint64_t off,
	      void *dst, size_t len, size_t *got, enum read_tier *tier)
{
	return star_read_sink(st, s, rd, off, dst, len, NULL, got, tier);
}

int star_read_sink(struct star *st, struct nv_stream *s, struct reader *rd, uint64_t off,
		   void *dst, size_t len, struct read_sink *sink, size_t *got,
		   enum read_tier *tier)
{
	/* The tail window is the leader's alone (a vacant stream's state
	 * here is its committed state: served from refs). */
	if (off >= atomic_load(&s->frontier_byte) && off < stream_acked_byte(s)) {
		int rc = star_lease_hot_read(st, s);

		if (rc)
			return rc;
	}
	return read_page_sink(st->re, s, rd, off, dst, len, sink, got, tier);
}

struct reader *star_reader_new(struct star *st, struct nv_stream *s)
{
	return reader_new(st->re, s);
}
