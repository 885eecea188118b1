/*
 * chain.c - see chain.h.
 *
 * Threads: one sealer (lingers), put_window put workers.  Whichever put
 * worker finds the head of the sealed list durable becomes the releaser
 * (c->releasing) and releases every durable flight at the head, in slot
 * order, with the lock dropped around each release.
 *
 * The sealed list is a singly linked FIFO in slot order: [head .. tail].
 * c->put_next points at the first sealed flight no worker has taken.
 * Flights before it are being PUT or are durable, waiting for a lower
 * slot.
 */
#include "config.h"
#include "engine/chain.h"
#include "meta/chains.h"
#include "meta/streams.h"
#include "src/base/clock.h"
#include "src/base/crc32c.h"
#include "src/base/endian.h"
#include "src/base/failpoint.h"
#include "src/base/lockcheck.h"
#include "src/base/log.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct chain {
	/* Immutable after chain_new(). */
	struct chain_cfg cfg;
	char star[META_STAR_MAX + 1];
	pthread_t sealer;
	pthread_t *workers;
	unsigned nworkers;

	pthread_mutex_t lock;
	pthread_cond_t put_cond;    /* workers: a flight to put, or stop */
	pthread_cond_t seal_cond;   /* sealer: a flight opened, or stop */
	pthread_cond_t drain_cond;  /* drainers: something was released or failed */

	struct flight *open;        /* lock */
	uint64_t gen;               /* lock: generation of the next flight */
	uint64_t next_slot;         /* lock */
	struct flight *head, *tail; /* lock: sealed, unreleased flights */
	struct flight *put_next;    /* lock: first sealed flight not yet taken */
	unsigned queued;            /* lock: sealed, not yet taken */
	unsigned inflight;          /* lock: being PUT */
	bool releasing;             /* lock */
	int halted;                 /* lock: 0 or -errno */
	uint64_t halt_slot;         /* lock: first slot that can never be acked */
	bool stopping;              /* lock: no new appends */
	bool stop_threads;          /* lock */
};

char *chain_slot_key(char *buf, size_t cap, unsigned cls, const char *star,
		     uint64_t epoch, uint64_t slot)
{
	snprintf(buf, cap, "chains/%s/%s/%016llx/%016llx", nv_class_name(cls), star,
		 (unsigned long long)epoch, (unsigned long long)slot);
	return buf;
}

void chain_fence_encode(uint8_t out[CHAIN_FENCE_SIZE], uint64_t epoch, uint64_t cut)
{
	memcpy(out, "NOVAFENC", 8);
	nv_put_le64(out + 8, epoch);
	nv_put_le64(out + 16, cut);
	nv_put_le32(out + 24, nv_crc32c(0, out, 24));
	nv_put_le32(out + 28, 0);
}

int chain_fence_decode(const void *p, size_t n, uint64_t *epoch, uint64_t *cut)
{
	const uint8_t *b = p;

	if (n != CHAIN_FENCE_SIZE || memcmp(b, "NOVAFENC", 8) ||
	    nv_get_le32(b + 24) != nv_crc32c(0, b, 24) || nv_get_le32(b + 28) != 0)
		return 0;
	*epoch = nv_get_le64(b + 8);
	*cut = nv_get_le64(b + 16);
	return 1;
}

/* ------------------------------------------------------------- sealing */

static void seal_locked(struct chain *c)
{
	struct flight *f = c->open;

	assert(f && f->ndone);
	c->open = NULL;
	flight_seal(f, c->next_slot++);
	f->sealed_ns = nv_now_mono_ns();
	if (c->tail)
		c->tail->next = f;
	else
		c->head = f;
	c->tail = f;
	if (!c->put_next)
		c->put_next = f;
	c->queued++;
	NV_STAT_ADD(c->cfg.stats, flights, 1);
	pthread_cond_signal(&c->put_cond);
}

/* The sealing policy of chain.h, evaluated whenever it may have changed;
 * flushed: a slot PUT just returned (group commit seals then). */
static void maybe_seal_locked(struct chain *c, uint64_t now, bool flushed)
{
	struct flight *f = c->open;

	NV_ASSERT_LOCKED(&c->lock);
	if (!f || f->ndone == 0)
		return;
	if (f->bytes >= c->cfg.flight_max || f->nruns >= CHAIN_FLIGHT_STREAMS_MAX) {
		seal_locked(c);
		return;
	}
	if (c->inflight == 0 && c->queued == 0 && !(c->cfg.linger_idle && !c->cfg.group_commit)) {
		/* Idle: nothing to batch behind, seal at once (unless the
		 * linger is a cost setting: linger_idle). */
		seal_locked(c);
		return;
	}
	if (c->cfg.group_commit) {
		/* Whoever arrived during the flush rides the next one. */
		if (flushed && c->inflight + c->queued < c->cfg.put_window)
			seal_locked(c);
		return;
	}
	if (now >= f->first_admit_ns + c->cfg.linger_ns &&
	    c->inflight + c->queued < c->cfg.put_window)
		seal_locked(c);
}

static void *sealer_main(void *arg)
{
	struct chain *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stop_threads) {
		uint64_t now = nv_now_mono_ns();

		maybe_seal_locked(c, now, false);
		if (c->open && c->open->ndone && !c->cfg.group_commit) {
			uint64_t due = c->open->first_admit_ns + c->cfg.linger_ns;
			uint64_t wait = due > now ? due - now : c->cfg.linger_ns;
			struct timespec ts = nv_mono_deadline(wait ? wait : NV_NS_PER_MS);

			pthread_cond_timedwait(&c->seal_cond, &c->lock, &ts);
		} else {
			pthread_cond_wait(&c->seal_cond, &c->lock);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---------------------------------------------------------- admission */

int chain_append(struct chain *c, struct nv_stream *s, const void *body, size_t len,
		 flight_done_fn cb, void *arg, uint64_t *seqp)
{
	uint64_t tokens = len + CHAIN_RECORD_OVERHEAD;
	uint64_t seq, byte, ts, now;
	bool deleted, fresh;
	unsigned cls;
	int rc;

	if (len > CHAIN_RECORD_MAX)
		return -EFBIG;
	rc = backlog_take(c->cfg.backlog, tokens);
	if (rc == -ETIMEDOUT)
		nv_log(NV_WARN, NV_SUB_MAIN,
		       "stream %s/%s: a write failed (ETIMEDOUT) after waiting %llu s for "
		       "backlog tokens: %llu of %llu KiB admitted and not yet absorbed; the "
		       "absorb is not committing (see its warnings: is the metastore reachable?)",
		       s->bucket, s->name,
		       (unsigned long long)(backlog_wait_ns(c->cfg.backlog) / NV_NS_PER_S),
		       (unsigned long long)(backlog_used(c->cfg.backlog) >> 10),
		       (unsigned long long)(backlog_budget(c->cfg.backlog) >> 10));
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	if (c->halted || c->stopping) {
		rc = c->halted ? c->halted : -ESHUTDOWN;
		goto refuse;
	}
	pthread_mutex_lock(&s->lock);
	deleted = s->deleted;
	cls = s->cls;
	pthread_mutex_unlock(&s->lock);
	if (deleted) {
		rc = -ENOENT;
		goto refuse;
	}
	if (atomic_load(&s->lease_released)) {
		rc = -EREMOTE; /* STAR_ENOTOWNER: released (star_release()) */
		goto refuse;
	}
	if (cls != c->cfg.cls) {
		rc = -EAGAIN;
		goto refuse;
	}
	now = nv_now_mono_ns();
	if (!c->open) {
		c->open = flight_new(c->gen++, c->cfg.cls, c->cfg.epoch);
		if (!c->open) {
			rc = -ENOMEM;
			goto refuse;
		}
	}
	fresh = c->open->ndone == 0;
	if (fresh)
		c->open->first_admit_ns = now;
	seq = s->next_seq;
	byte = s->next_byte;
	ts = nv_now_wall_ns();
	if (ts < s->last_ts)
		ts = s->last_ts; /* non-decreasing per stream (refs.h) */
	rc = flight_add(c->open, s, seq, byte, ts, body, (uint32_t)len, cb, arg);
	if (rc)
		goto refuse;
	s->next_seq = seq + 1;
	s->next_byte = byte + len;
	s->last_ts = ts;
	c->open->tokens += tokens;
	if (seqp)
		*seqp = seq;
	maybe_seal_locked(c, now, false);
	/* The sealer times the linger of a flight that stays open; one
	 * sealed at once (an idle chain, linger 0) needs no wake-up, which
	 * would cost a context switch per flight. */
	if (fresh && c->open && c->open->ndone)
		pthread_cond_signal(&c->seal_cond);
	pthread_mutex_unlock(&c->lock);
	return 0;
refuse:
	pthread_mutex_unlock(&c->lock);
	backlog_give(c->cfg.backlog, tokens);
	return rc;
}

/* ------------------------------------------------------------ the PUT */

/* After a create-once PUT met an existing object on a retry: is it the
 * object we tried to write (an earlier attempt landed)?  Compare size and
 * trailer, which carries the footer CRC. */
static bool same_object(struct chain *c, const char *key, const struct bundle_out *out)
{
	uint8_t mine[BUNDLE_TRAILER_SIZE], theirs[BUNDLE_TRAILER_SIZE];
	uint64_t size;
	size_t got, need = BUNDLE_TRAILER_SIZE;

	if (store_head(c->cfg.store, key, &size) || size != out->size)
		return false;
	/* The trailer is the tail of the last iovec(s). */
	for (int i = out->iovcnt - 1; i >= 0 && need; i--) {
		size_t take = out->iov[i].iov_len < need ? out->iov[i].iov_len : need;

		memcpy(mine + need - take,
		       (const uint8_t *)out->iov[i].iov_base + out->iov[i].iov_len - take, take);
		need -= take;
	}
	if (store_get_range(c->cfg.store, key, size - BUNDLE_TRAILER_SIZE,
			    BUNDLE_TRAILER_SIZE, theirs, &got) ||
	    got != BUNDLE_TRAILER_SIZE)
		return false;
	return memcmp(mine, theirs, BUNDLE_TRAILER_SIZE) == 0;
}

static int put_flight(struct chain *c, struct flight *f)
{
	struct bundle_run *runs = calloc(f->nruns, sizeof(*runs));
	struct bundle_out out;
	char key[CHAIN_KEY_MAX];
	uint64_t start = nv_now_mono_ns(), backoff = 10 * NV_NS_PER_MS;
	int rc, attempt = 0;

	if (!runs)
		return -ENOMEM;
	flight_bundle_runs(f, runs);
	rc = bundle_encode(runs, f->nruns, &c->cfg.enc, &out);
	free(runs);
	if (rc) {
		nv_log(NV_ERR, NV_SUB_CHAIN, "%s epoch %llu slot %llu: encoding failed: %s",
		       nv_class_name(c->cfg.cls), (unsigned long long)c->cfg.epoch,
		       (unsigned long long)f->slot, strerror(-rc));
		return rc;
	}
	chain_slot_key(key, sizeof(key), c->cfg.cls, c->star, c->cfg.epoch, f->slot);
	rc = NV_FP("chain.before_put");
	for (; !rc || store_err_transient(rc); attempt++) {
		if (attempt > 0) {
			uint64_t now = nv_now_mono_ns();
			struct timespec ts;

			if (now - start >= c->cfg.put_timeout_ns)
				break;
			NV_STAT_ADD(c->cfg.stats, slot_put_retries, 1);
			if (attempt == 1 || (attempt % 10) == 0)
				nv_log(NV_WARN, NV_SUB_CHAIN, "%s: PUT failed (%s), retrying",
				       key, strerror(-rc));
			/* Capped exponential backoff with jitter. */
			backoff = backoff * 2 > NV_NS_PER_S ? NV_NS_PER_S : backoff * 2;
			{
				uint64_t d = backoff / 2 + (uint64_t)rand() % (backoff / 2 + 1);

				ts.tv_sec = (time_t)(d / NV_NS_PER_S);
				ts.tv_nsec = (long)(d % NV_NS_PER_S);
			}
			nanosleep(&ts, NULL);
		}
		rc = store_put(c->cfg.store, key, out.iov, out.iovcnt, STORE_CREATE_ONCE);
		if (rc == -EEXIST && attempt > 0 && same_object(c, key, &out))
			rc = 0; /* an earlier attempt landed */
		if (!rc)
			break;
		if (rc == -EEXIST) {
			nv_log(NV_ERR, NV_SUB_CHAIN,
			       "%s: slot already taken (fenced by recovery?): halting", key);
			rc = -EIO; /* a zombie: its writers see an I/O error */
			break;
		}
	}
	if (!rc)
		rc = NV_FP("chain.after_put");
	if (!rc) {
		f->object_size = out.size;
		f->footer_off = out.footer_off;
		f->footer_len = out.footer_len;
		NV_STAT_ADD(c->cfg.stats, slots_written, 1);
		nv_log(NV_DEBUG, NV_SUB_CHAIN, "%s: %u records, %llu bytes, %u streams", key,
		       f->ndone, (unsigned long long)out.size, f->nruns);
	} else {
		nv_log(NV_ERR, NV_SUB_CHAIN, "%s: giving up after %d attempts: %s", key,
		       attempt + 1, strerror(-rc));
	}
	bundle_out_free(&out);
	return rc;
}

/* ------------------------------------------------------------ release */

static void release_flight(struct chain *c, struct flight *f)
{
	uint64_t bytes = 0;
	int ack;

	(void)NV_FP("chain.before_ack"); /* crash/delay only */
	/* Past the lease deadline nothing is acked: the writers hear an
	 * error (the record is durable and may still become visible). */
	ack = c->cfg.may_ack ? c->cfg.may_ack(c->cfg.may_ack_arg) : 0;
	if (c->cfg.tc)
		tailcache_insert_flight(c->cfg.tc, f);
	for (uint32_t i = 0; i < f->nruns; i++) {
		struct flight_run *r = &f->runs[i];
		struct nv_stream *s = r->stream;
		struct stream_pend p = {
			.epoch = f->epoch, .slot = f->slot, .first_seq = r->first_seq,
			.first_byte = r->first_byte, .nbytes = r->nbytes,
			.footer_off = f->footer_off, .footer_len = f->footer_len,
			.nrec = r->nrec, .cls = f->cls,
		};
		uint64_t old;

		pthread_mutex_lock(&s->lock);
		if (stream_pend_push(s, &p))
			nv_log(NV_WARN, NV_SUB_CHAIN,
			       "stream %llu: flight index entry lost (ENOMEM); reads of slot %llu "
			       "wait for the absorb", (unsigned long long)s->id,
			       (unsigned long long)f->slot);
		old = atomic_load(&s->acked_byte);
		atomic_store_explicit(&s->acked_seq, r->first_seq + r->nrec, memory_order_release);
		atomic_store_explicit(&s->acked_byte, r->first_byte + r->nbytes,
				      memory_order_release);
		/* The run's newest record timestamp: what a reload finds in
		 * the ref's max_ts (engine/stream.c stream_load()). */
		atomic_store(&s->mtime_ns, r->max_ts ? r->max_ts : nv_now_wall_ns());
		pthread_mutex_unlock(&s->lock);
		bytes += r->nbytes;
		if (c->cfg.acked)
			c->cfg.acked(c->cfg.acked_arg, s, old, r->first_byte + r->nbytes);
		NV_STAT_ADD(c->cfg.stats, wakes, wake_close(&s->wake));
		rbuf_unref(r->rb);
		r->rb = NULL;
	}
	if (ack) {
		NV_STAT_ADD(c->cfg.stats, append_errors, f->ndone);
		nv_log(NV_WARN, NV_SUB_CHAIN, "%s epoch %llu slot %llu: durable after this star's "
		       "lease deadline: %u write(s) not acknowledged (%s)", nv_class_name(c->cfg.cls),
		       (unsigned long long)c->cfg.epoch, (unsigned long long)f->slot, f->ndone,
		       strerror(-ack));
	} else {
		NV_STAT_ADD(c->cfg.stats, appends, f->ndone);
		NV_STAT_ADD(c->cfg.stats, append_bytes, bytes);
	}
	flight_complete(f, ack);
	f->state = FLIGHT_RELEASED;
	c->cfg.release(c->cfg.release_arg, f);
}

static void fail_flight(struct chain *c, struct flight *f, int err)
{
	NV_STAT_ADD(c->cfg.stats, append_errors, f->ndone);
	flight_complete(f, err);
	f->state = FLIGHT_FAILED;
	backlog_give(c->cfg.backlog, f->tokens);
	flight_free(f);
}

/* Release or fail flights at the head while they are ready.  Called with
 * the lock held; returns with it held. */
static void release_ready_locked(struct chain *c)
{
	if (c->releasing)
		return; /* the active releaser loops until nothing is ready */
	c->releasing = true;
	for (;;) {
		struct flight *f = c->head;
		bool fail;

		if (!f || f == c->put_next)
			break; /* nothing, or not yet taken by a worker */
		fail = c->halted && f->slot >= c->halt_slot;
		if (!fail && f->state != FLIGHT_DURABLE)
			break; /* still being PUT */
		if (fail && f->state == FLIGHT_SEALED)
			break; /* its worker is still PUTting; it fails it on return */
		c->head = f->next;
		if (!c->head)
			c->tail = NULL;
		f->next = NULL;
		pthread_mutex_unlock(&c->lock);
		if (fail)
			fail_flight(c, f, c->halted);
		else
			release_flight(c, f);
		pthread_mutex_lock(&c->lock);
	}
	c->releasing = false;
	pthread_cond_broadcast(&c->drain_cond);
}

/*
 * What a writer is told when the store's own retries (put_timeout_s)
 * are over: a transient store error becomes EIO, since EAGAIN would make
 * a writer busy-loop on a store that stays away (novafs(8), ERRORS); a
 * full store stays ENOSPC.
 */
static int writer_errno(int err)
{
	if (err == -ENOSPC || err == -EDQUOT || !store_err_transient(err))
		return err;
	return -EIO;
}

/* Halt: from slot on, nothing can be acked (chain.h). */
static void halt_locked(struct chain *c, uint64_t slot, int err)
{
	int werr = writer_errno(err);

	if (!c->halted || slot < c->halt_slot) {
		if (!c->halted)
			nv_log(NV_ERR, NV_SUB_CHAIN,
			       "%s epoch %llu halted at slot %llu: %s; appends of this class "
			       "fail until a new epoch starts", nv_class_name(c->cfg.cls),
			       (unsigned long long)c->cfg.epoch, (unsigned long long)slot,
			       strerror(-err));
		c->halted = werr;
		c->halt_slot = slot;
	}
	/* Fail the queued flights no worker took, and the open one. */
	while (c->put_next) {
		struct flight *f = c->put_next;

		c->put_next = f->next;
		c->queued--;
		f->state = FLIGHT_DURABLE; /* taken: release_ready fails it */
	}
	if (c->open) {
		struct flight *f = c->open;

		c->open = NULL;
		pthread_mutex_unlock(&c->lock);
		fail_flight(c, f, werr);
		pthread_mutex_lock(&c->lock);
	}
}

static void *worker_main(void *arg)
{
	struct chain *c = arg;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct flight *f;
		int rc;

		while (!c->stop_threads && !c->put_next)
			pthread_cond_wait(&c->put_cond, &c->lock);
		if (!c->put_next)
			break; /* stopping and nothing left to put */
		f = c->put_next;
		c->put_next = f->next;
		c->queued--;
		c->inflight++;
		pthread_mutex_unlock(&c->lock);

		rc = put_flight(c, f);

		pthread_mutex_lock(&c->lock);
		c->inflight--;
		f->state = FLIGHT_DURABLE;
		if (rc) {
			bool first = !c->halted;

			halt_locked(c, f->slot, rc);
			if (first && c->cfg.halted) {
				pthread_mutex_unlock(&c->lock);
				c->cfg.halted(c->cfg.halted_arg, c->cfg.cls, c->cfg.epoch, rc);
				pthread_mutex_lock(&c->lock);
			}
		}
		/* Seal first: the next flight's PUT (another worker) then
		 * overlaps this one's release, whose replies to the writers
		 * are syscalls each; released after, it waited for them. */
		maybe_seal_locked(c, nv_now_mono_ns(), true);
		release_ready_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ------------------------------------------------------------ lifecycle */

int chain_new(const struct chain_cfg *cfg, struct chain **out)
{
	struct chain *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	snprintf(c->star, sizeof(c->star), "%s", cfg->star);
	c->cfg.star = c->star;
	if (c->cfg.put_window == 0)
		c->cfg.put_window = 1;
	c->next_slot = cfg->first_slot;
	pthread_mutex_init(&c->lock, NULL);
	nv_cond_init_mono(&c->seal_cond);
	pthread_cond_init(&c->put_cond, NULL);
	pthread_cond_init(&c->drain_cond, NULL);
	c->workers = calloc(c->cfg.put_window, sizeof(*c->workers));
	if (!c->workers) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = -pthread_create(&c->sealer, NULL, sealer_main, c);
	if (rc)
		goto fail;
	for (; c->nworkers < c->cfg.put_window; c->nworkers++) {
		rc = -pthread_create(&c->workers[c->nworkers], NULL, worker_main, c);
		if (rc) {
			chain_stop(c); /* joins the sealer and the workers started */
			chain_free(c);
			return rc;
		}
	}
	*out = c;
	return 0;
fail:
	free(c->workers);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return rc;
}

void chain_admission_lock(struct chain *c)
{
	pthread_mutex_lock(&c->lock);
}

void chain_admission_unlock(struct chain *c)
{
	pthread_mutex_unlock(&c->lock);
}

void chain_flush(struct chain *c)
{
	pthread_mutex_lock(&c->lock);
	if (c->open && c->open->ndone)
		seal_locked(c);
	pthread_mutex_unlock(&c->lock);
}

int chain_drain(struct chain *c)
{
	int rc;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		if (c->open && c->open->ndone)
			seal_locked(c);
		if (!c->open || c->open->ndone == 0) {
			if (!c->head && !c->releasing)
				break;
		}
		pthread_cond_wait(&c->drain_cond, &c->lock);
	}
	rc = c->halted;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void chain_stop(struct chain *c)
{
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_mutex_unlock(&c->lock);
	(void)chain_drain(c);
	pthread_mutex_lock(&c->lock);
	c->stop_threads = true;
	pthread_cond_broadcast(&c->put_cond);
	pthread_cond_broadcast(&c->seal_cond);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->sealer, NULL);
	for (unsigned i = 0; i < c->nworkers; i++)
		pthread_join(c->workers[i], NULL);
	c->nworkers = 0;
}

void chain_free(struct chain *c)
{
	if (!c)
		return;
	flight_free(c->open); /* empty by now */
	free(c->workers);
	pthread_cond_destroy(&c->put_cond);
	pthread_cond_destroy(&c->seal_cond);
	pthread_cond_destroy(&c->drain_cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int chain_halted(struct chain *c)
{
	int h;

	pthread_mutex_lock(&c->lock);
	h = c->halted;
	pthread_mutex_unlock(&c->lock);
	return h;
}

uint64_t chain_next_slot(struct chain *c)
{
	uint64_t s;

	pthread_mutex_lock(&c->lock);
	s = c->next_slot;
	pthread_mutex_unlock(&c->lock);
	return s;
}

uint64_t chain_epoch(const struct chain *c)
{
	return c->cfg.epoch;
}

unsigned chain_class(const struct chain *c)
{
	return c->cfg.cls;
}
