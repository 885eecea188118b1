/*
 * engine_fixture.c - see engine_fixture.h.
 */
#include "config.h"
#include "tests/unit/engine_fixture.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "meta/tuple.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

/* Generous: a valgrind run is ~50x slower than a plain one. */
#define EFX_WAIT_MS 60000

void efx_opts_default(struct efx_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cls = NV_CLASS_STANDARD;
	o->backlog_bytes = 64ull << 20;
	o->tail_cache_bytes = 16ull << 20;
	o->flight_max = 1ull << 20;
	o->linger_ns = 1 * NV_NS_PER_MS;
	o->put_timeout_ns = 10 * NV_NS_PER_S;
	o->put_window = 4;
	o->chunk_target = 64u << 10;
	o->zstd_level = 0;
	o->absorb_batch_slots = 1;
	o->age_cap_ns = 3600 * NV_NS_PER_S;
}

/* ------------------------------------------------------------ setup */

static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char p[PATH_MAX * 2];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

int efx_setup(void **state)
{
	struct efx *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");
	char url[PATH_MAX + 32];
	struct meta_bucket b;

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s/novafs-eng-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(url, sizeof(url), "sqlite:%s/meta.db", f->dir);
	pthread_mutex_init(&f->vlock, NULL);
	pthread_mutex_init(&f->dlock, NULL);
	nv_cond_init_mono(&f->dcond);
	if (kv_open(url, &f->kv) || fake_store_open(&f->fs, &f->store) ||
	    !(f->table = stream_table_new()) ||
	    meta_bucket_create(f->kv, EFX_BUCKET, NV_CLASS_STANDARD, NULL, &b)) {
		*state = f;
		efx_teardown(state);
		return -1;
	}
	*state = f;
	return 0;
}

int efx_teardown(void **state)
{
	struct efx *f = *state;

	if (!f)
		return 0;
	nv_fp_reset();
	if (f->fs) {
		fake_store_open_all_gates(f->fs);
		fake_store_clear_errors(f->fs);
	}
	efx_stop(f);
	if (f->leaked) {
		*state = NULL;
		return 0;
	}
	for (unsigned i = 0; i < f->nallocs; i++)
		free(f->allocs[i]);
	for (unsigned i = 0; i < f->nstreams; i++)
		stream_put(f->streams[i]);
	stream_table_free(f->table);
	tailcache_free(f->tc);
	backlog_free(f->backlog);
	store_close(f->store);
	kv_close(f->kv);
	rm_dir(f->dir);
	pthread_cond_destroy(&f->dcond);
	pthread_mutex_destroy(&f->dlock);
	pthread_mutex_destroy(&f->vlock);
	free(f);
	*state = NULL;
	return 0;
}

/* ------------------------------------------------------------ valve */

static void efx_release(void *arg, struct flight *fl)
{
	struct efx *f = arg;

	/* Under vlock so held and pass-through flights keep slot order. */
	pthread_mutex_lock(&f->vlock);
	if (f->held || f->hhead) {
		fl->next = NULL;
		if (f->htail)
			f->htail->next = fl;
		else
			f->hhead = fl;
		f->htail = fl;
		f->nheld++;
	} else {
		absorb_push(f->absorb, fl);
	}
	pthread_mutex_unlock(&f->vlock);
}

void efx_hold(struct efx *f)
{
	pthread_mutex_lock(&f->vlock);
	f->held = true;
	pthread_mutex_unlock(&f->vlock);
}

void efx_unhold(struct efx *f)
{
	pthread_mutex_lock(&f->vlock);
	while (f->hhead) {
		struct flight *fl = f->hhead;

		f->hhead = fl->next;
		f->nheld--;
		absorb_push(f->absorb, fl);
	}
	f->htail = NULL;
	f->held = false;
	pthread_mutex_unlock(&f->vlock);
}

unsigned efx_held(struct efx *f)
{
	unsigned n;

	pthread_mutex_lock(&f->vlock);
	n = f->nheld;
	pthread_mutex_unlock(&f->vlock);
	return n;
}

unsigned efx_held_slots(struct efx *f, uint64_t *slots, unsigned cap)
{
	unsigned n = 0;

	pthread_mutex_lock(&f->vlock);
	for (struct flight *fl = f->hhead; fl; fl = fl->next, n++)
		if (n < cap)
			slots[n] = fl->slot;
	pthread_mutex_unlock(&f->vlock);
	return n;
}

void efx_drop_held(struct efx *f)
{
	struct flight *list;

	pthread_mutex_lock(&f->vlock);
	list = f->hhead;
	f->hhead = f->htail = NULL;
	f->nheld = 0;
	pthread_mutex_unlock(&f->vlock);
	while (list) {
		struct flight *fl = list;

		list = fl->next;
		backlog_give(f->backlog, fl->tokens);
		flight_free(fl);
	}
}

/* ------------------------------------------------------------ records */

static void efx_acked(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte)
{
	struct efx *f = arg;

	pthread_mutex_lock(&f->dlock);
	if (f->nacks < EFX_MAX_ACKS) {
		struct efx_ack *a = &f->acks[f->nacks++];

		a->stream = s->id;
		a->old_byte = old_byte;
		a->new_byte = new_byte;
		a->order = ++f->events;
	}
	pthread_mutex_unlock(&f->dlock);
}

static void efx_done(void *arg, int err)
{
	struct efx_rec *r = arg;
	struct efx *f = r->fx;

	pthread_mutex_lock(&f->dlock);
	r->calls++;
	r->err = err;
	r->order = ++f->events;
	r->acked_at_cb = r->s ? stream_acked_byte(r->s) : 0;
	f->ndone++;
	pthread_cond_broadcast(&f->dcond);
	pthread_mutex_unlock(&f->dlock);
}

struct efx_rec *efx_recs(struct efx *f, unsigned n)
{
	struct efx_rec *r = calloc(n ? n : 1, sizeof(*r));

	assert_non_null(r);
	assert_true(f->nallocs < sizeof(f->allocs) / sizeof(f->allocs[0]));
	f->allocs[f->nallocs++] = r;
	return r;
}

int efx_append(struct efx *f, struct nv_stream *s, const void *body, size_t len,
	       struct efx_rec *rec)
{
	rec->fx = f;
	rec->s = s;
	return chain_append(f->chain, s, body, len, efx_done, rec, &rec->seq);
}

bool efx_wait_done(struct efx *f, unsigned n, unsigned timeout_ms)
{
	struct timespec ts = nv_mono_deadline((uint64_t)timeout_ms * NV_NS_PER_MS);
	bool ok = true;

	pthread_mutex_lock(&f->dlock);
	while (f->ndone < n) {
		if (pthread_cond_timedwait(&f->dcond, &f->dlock, &ts) == ETIMEDOUT) {
			ok = f->ndone >= n;
			break;
		}
	}
	pthread_mutex_unlock(&f->dlock);
	return ok;
}

unsigned efx_done_count(struct efx *f)
{
	unsigned n;

	pthread_mutex_lock(&f->dlock);
	n = f->ndone;
	pthread_mutex_unlock(&f->dlock);
	return n;
}

struct efx_rec efx_rec_get(struct efx *f, const struct efx_rec *r)
{
	struct efx_rec c;

	pthread_mutex_lock(&f->dlock);
	c = *r;
	pthread_mutex_unlock(&f->dlock);
	return c;
}

unsigned efx_acks(struct efx *f, struct efx_ack *out, unsigned cap)
{
	unsigned n;

	pthread_mutex_lock(&f->dlock);
	n = f->nacks;
	memcpy(out, f->acks, (n < cap ? n : cap) * sizeof(*out));
	pthread_mutex_unlock(&f->dlock);
	return n;
}

int efx_append_wait(struct efx *f, struct nv_stream *s, const void *body, size_t len,
		    uint64_t *seq)
{
	/* On the heap: on a timeout the record is leaked rather than left
	 * for a chain thread to write into a dead stack frame. */
	struct efx_rec *r = calloc(1, sizeof(*r));
	struct timespec ts = nv_mono_deadline((uint64_t)EFX_WAIT_MS * NV_NS_PER_MS);
	int rc;

	assert_non_null(r);
	rc = efx_append(f, s, body, len, r);
	if (rc) {
		free(r);
		return rc;
	}
	pthread_mutex_lock(&f->dlock);
	while (r->calls == 0)
		if (pthread_cond_timedwait(&f->dcond, &f->dlock, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&f->dlock);
	if (r->calls == 0)
		fail_msg("append to stream %llu: no completion within %d ms",
			 (unsigned long long)s->id, EFX_WAIT_MS);
	assert_int_equal(r->calls, 1);
	rc = r->err;
	if (seq)
		*seq = r->seq;
	free(r);
	return rc;
}

/* ------------------------------------------------------------ start */

void efx_start(struct efx *f, const struct efx_opts *o)
{
	struct absorb_cfg ac = { 0 };
	struct chain_cfg cc = { 0 };

	assert_null(f->chain);
	f->o = *o;
	f->backlog = backlog_new(o->backlog_bytes, 0, &f->stats);
	f->tc = tailcache_new(o->tail_cache_bytes, &f->stats);
	assert_non_null(f->backlog);
	assert_non_null(f->tc);
	f->held = o->hold;
	assert_int_equal(meta_chain_mint(f->kv, o->cls, EFX_STAR, nv_now_wall_ns(), &f->row,
					 &f->row_ver), 0);
	ac.kv = f->kv;
	ac.backlog = f->backlog;
	ac.stats = &f->stats;
	ac.row = f->row;
	ac.row_ver = f->row_ver;
	ac.policy.age_cap_ns = o->age_cap_ns;
	ac.max_batch_slots = o->absorb_batch_slots;
	assert_int_equal(absorb_new(&ac, &f->absorb), 0);
	cc.cls = o->cls;
	cc.star = EFX_STAR;
	cc.epoch = f->row.epoch;
	cc.first_slot = 0;
	cc.put_window = o->put_window;
	cc.flight_max = o->flight_max;
	cc.linger_ns = o->linger_ns;
	cc.group_commit = o->group_commit;
	cc.linger_idle = o->linger_idle;
	cc.put_timeout_ns = o->put_timeout_ns;
	cc.enc.chunk_target = o->chunk_target;
	cc.enc.zstd_level = o->zstd_level;
	cc.store = f->store;
	cc.backlog = f->backlog;
	cc.tc = o->no_tail_cache ? NULL : f->tc;
	cc.stats = &f->stats;
	cc.release = efx_release;
	cc.release_arg = f;
	cc.acked = efx_acked;
	cc.acked_arg = f;
	assert_int_equal(chain_new(&cc, &f->chain), 0);
}

void efx_chain_stop(struct efx *f)
{
	if (f->chain && !f->chain_stopped)
		chain_stop(f->chain);
	f->chain_stopped = true;
}

struct absorb_stopper {
	struct absorb *a;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done; /* lock */
	bool abandoned; /* lock: the waiter gave up; the thread frees this */
};

static void *absorb_stopper_main(void *arg)
{
	struct absorb_stopper *st = arg;
	bool abandoned;

	absorb_free(st->a);
	pthread_mutex_lock(&st->lock);
	st->done = true;
	abandoned = st->abandoned;
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
	if (abandoned) {
		pthread_cond_destroy(&st->cond);
		pthread_mutex_destroy(&st->lock);
		free(st);
	}
	return NULL;
}

/*
 * absorb_free() drains first, and a broken absorb (one that can never
 * commit) would hang the teardown of a test that already failed: free it
 * on a helper thread and give up after a bound, leaking it, so the failure
 * is reported instead of a hang.
 */
static bool absorb_free_bounded(struct absorb *a)
{
	struct absorb_stopper *st;
	struct timespec ts;
	pthread_t th;
	bool done;

	if (!a)
		return true;
	st = calloc(1, sizeof(*st));
	if (!st) {
		absorb_free(a);
		return true;
	}
	st->a = a;
	pthread_mutex_init(&st->lock, NULL);
	nv_cond_init_mono(&st->cond);
	if (pthread_create(&th, NULL, absorb_stopper_main, st)) {
		pthread_cond_destroy(&st->cond);
		pthread_mutex_destroy(&st->lock);
		free(st);
		absorb_free(a);
		return true;
	}
	ts = nv_mono_deadline((uint64_t)EFX_WAIT_MS * NV_NS_PER_MS);
	pthread_mutex_lock(&st->lock);
	while (!st->done)
		if (pthread_cond_timedwait(&st->cond, &st->lock, &ts) == ETIMEDOUT)
			break;
	done = st->done;
	if (!done)
		st->abandoned = true;
	pthread_mutex_unlock(&st->lock);
	if (done) {
		pthread_join(th, NULL);
		pthread_cond_destroy(&st->cond);
		pthread_mutex_destroy(&st->lock);
		free(st);
	} else {
		print_error("engine_fixture: the absorb did not drain within %d ms; leaking the "
			    "fixture\n", EFX_WAIT_MS);
		pthread_detach(th);
	}
	return done;
}

void efx_stop(struct efx *f)
{
	efx_chain_stop(f);
	efx_drop_held(f);
	if (!absorb_free_bounded(f->absorb))
		f->leaked = true; /* its thread still uses kv, backlog, stats */
	f->absorb = NULL;
	chain_free(f->chain);
	f->chain = NULL;
	f->chain_stopped = false;
}

/* ------------------------------------------------------------ streams */

struct nv_stream *efx_load(struct efx *f, const struct meta_stream *ms)
{
	struct nv_stream *s = NULL;

	assert_true(f->nstreams < EFX_MAX_STREAMS);
	assert_int_equal(stream_load(f->table, f->kv, ms, &s), 0);
	f->streams[f->nstreams++] = s;
	return s;
}

struct nv_stream *efx_stream(struct efx *f, const char *name, int cls)
{
	struct meta_stream ms;

	assert_int_equal(meta_stream_create(f->kv, EFX_BUCKET, name, cls, nv_now_wall_ns(), NULL, &ms),
			 0);
	return efx_load(f, &ms);
}

/* ------------------------------------------------------------ keys */

char *efx_slot_key(struct efx *f, uint64_t slot, char buf[CHAIN_KEY_MAX])
{
	return chain_slot_key(buf, CHAIN_KEY_MAX, f->o.cls, EFX_STAR, f->row.epoch, slot);
}

char *efx_chain_prefix(struct efx *f, char buf[CHAIN_KEY_MAX])
{
	snprintf(buf, CHAIN_KEY_MAX, "chains/%s/%s/%016llx/", nv_class_name(f->o.cls), EFX_STAR,
		 (unsigned long long)f->row.epoch);
	return buf;
}

/* ------------------------------------------------------------ waiting */

bool efx_poll(bool (*pred)(void *arg), void *arg, unsigned timeout_ms)
{
	uint64_t end = nv_now_mono_ns() + (uint64_t)timeout_ms * NV_NS_PER_MS;
	struct timespec ms = { 0, 1000000L };

	for (;;) {
		if (pred(arg))
			return true;
		if (nv_now_mono_ns() >= end)
			return pred(arg);
		nanosleep(&ms, NULL);
	}
}

struct stat_arg {
	struct efx *f;
	size_t off;
	uint64_t n;
};

static bool stat_pred(void *arg)
{
	struct stat_arg *a = arg;
	_Atomic uint64_t *p = (_Atomic uint64_t *)((char *)&a->f->stats + a->off);

	return atomic_load_explicit(p, memory_order_relaxed) >= a->n;
}

bool efx_poll_stat_(struct efx *f, size_t off, uint64_t n, unsigned timeout_ms)
{
	struct stat_arg a = { f, off, n };

	return efx_poll(stat_pred, &a, timeout_ms);
}

/* ------------------------------------------------------------ dumps */

struct dump {
	struct nv_buf out;
	const char *tag; /* NULL: every key */
	bool zero_times;
	int err;
};

static int hex_add(struct nv_buf *b, const uint8_t *p, size_t n)
{
	static const char hx[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		char c[2] = { hx[p[i] >> 4], hx[p[i] & 15] };
		int rc = nv_buf_add(b, c, 2);

		if (rc)
			return rc;
	}
	return 0;
}

static int dump_fn(void *arg, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
		   uint64_t ver)
{
	struct dump *d = arg;
	struct nv_tup_rd r;
	char tag[16];
	struct nv_buf v;
	int rc;

	(void)ver;
	nv_tup_rd_init(&r, key, klen);
	if (nv_tup_get_str(&r, tag, sizeof(tag), NULL))
		tag[0] = 0;
	if (d->tag && strcmp(tag, d->tag))
		return 0;
	nv_buf_init(&v, KV_VAL_MAX);
	rc = nv_buf_add(&v, val, vlen);
	if (!rc && d->zero_times && !strcmp(tag, "mrk")) {
		struct meta_marker m;

		rc = meta_marker_decode(val, vlen, &m);
		if (!rc) {
			m.birth_ns = m.ripe_ns = 0;
			for (uint32_t i = 0; i < m.nstreams; i++)
				m.streams[i].ripe_ns = 0;
			rc = meta_marker_encode(&m, &v);
			meta_marker_clear(&m);
		}
	}
	if (!rc && d->zero_times && !strcmp(tag, "chn")) {
		struct meta_chain c;

		rc = meta_chain_decode(val, vlen, &c);
		if (!rc) {
			c.settled_ns = 0;
			rc = meta_chain_encode(&c, &v);
		}
	}
	if (!rc)
		rc = nv_buf_printf(&d->out, "%s ", tag);
	if (!rc)
		rc = hex_add(&d->out, key, klen);
	if (!rc)
		rc = nv_buf_add(&d->out, " = ", 3);
	if (!rc)
		rc = hex_add(&d->out, v.ptr, v.len);
	if (!rc)
		rc = nv_buf_add(&d->out, "\n", 1);
	nv_buf_free(&v);
	if (rc) {
		d->err = rc;
		return rc;
	}
	return 0;
}

char *efx_kv_dump_space(struct kv *kv, const char *tag, bool zero_times)
{
	struct dump d = { .tag = tag, .zero_times = zero_times };
	static const uint8_t end[1] = { 0xff }; /* above every tuple key */
	char *s;

	nv_buf_init(&d.out, 1u << 30);
	assert_int_equal(kv_range(kv, "", 0, end, 1, 0, false, dump_fn, &d), 0);
	assert_int_equal(d.err, 0);
	assert_int_equal(nv_buf_add(&d.out, "", 1), 0);
	s = (char *)nv_buf_steal(&d.out, NULL);
	assert_non_null(s);
	return s;
}

char *efx_kv_dump(struct kv *kv, bool zero_times)
{
	return efx_kv_dump_space(kv, NULL, zero_times);
}

/* ------------------------------------------------------------ data */

uint64_t efx_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void efx_fill(uint8_t *buf, size_t len, uint64_t stream, uint64_t seq)
{
	uint64_t st = stream * 1000003ull + seq * 7919ull + 1;

	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = efx_rand(&st);
		size_t n = len - i < 8 ? len - i : 8;

		memcpy(buf + i, &v, n);
	}
}

/* ------------------------------------- settlement (test_settle, test_trim) */

struct fetch_cache *efx_start_settle(struct efx *f, struct settle_cfg *cfg)
{
	char path[PATH_MAX + 16];
	struct fetch_cache *fc;
	struct efx_opts o;

	efx_opts_default(&o);
	o.hold = true;
	efx_start(f, &o);
	snprintf(path, sizeof(path), "%s/fetch", f->dir);
	assert_int_equal(fetch_cache_new(f->store, path, 64u << 20, &fc), 0);
	efx_settle_cfg(f, fc, cfg);
	return fc;
}

void efx_settle_cfg(struct efx *f, struct fetch_cache *fc, struct settle_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->store = f->store;
	cfg->kv = f->kv;
	cfg->stats = &f->stats;
	cfg->fc = fc;
	cfg->fetch_budget = 64u << 20;
	cfg->trigger_bytes = 1;
	cfg->output_cap_bytes = 64u << 20;
	cfg->read_grace_ns = NV_NS_PER_S;
	for (unsigned i = 0; i < NV_CLASS_COUNT; i++)
		cfg->age_cap_ns[i] = UINT64_MAX / 2; /* only the trigger qualifies */
	cfg->workers = 2;
}

struct meta_chain efx_chain_row(struct efx *f)
{
	struct meta_chain c;

	assert_int_equal(meta_chain_get(f->kv, f->o.cls, EFX_STAR, f->row.epoch, &c, NULL), 0);
	return c;
}

void efx_write_absorb(struct efx *f, struct nv_stream *s, uint64_t first_seq, unsigned n,
		      size_t len)
{
	uint8_t *body = malloc(len ? len : 1);

	assert_non_null(body);
	assert_true(f->held);
	for (unsigned i = 0; i < n; i++) {
		uint64_t seq;

		efx_fill(body, len, s->id, first_seq + i);
		assert_int_equal(efx_append_wait(f, s, body, len, &seq), 0);
		assert_int_equal(seq, first_seq + i);
	}
	free(body);
	/* A flight is released to the valve just after its ack: wait until
	 * the absorb has committed every slot the chain wrote. */
	for (int tries = 0;; tries++) {
		struct meta_chain row;
		uint64_t ver;

		efx_unhold(f);
		assert_int_equal(absorb_drain(f->absorb), 0);
		absorb_chain_row(f->absorb, &row, &ver);
		if (row.checkpoint == chain_next_slot(f->chain))
			break;
		assert_true(tries < 5000);
		usleep(1000);
	}
	efx_hold(f);
}

unsigned efx_count_space(struct kv *kv, const char *tag)
{
	char *d = efx_kv_dump_space(kv, tag, false);
	unsigned n = 0;

	for (const char *p = d; *p; p++)
		n += *p == '\n';
	free(d);
	return n;
}
