/*
 * absorb.c - see absorb.h.
 *
 * Locking: a->lock guards the queue, the committed chain row and the
 * error; the commit itself runs unlocked on the absorb thread, which is
 * the only writer of the chain row while the chain is LIVE.  Lock order:
 * a->lock is never held while taking a stream lock.
 */
#include "config.h"
#include "engine/absorb.h"
#include "meta/leases.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"
#include "src/base/u64map.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Writes per metastore transaction when writing refs (2 per ref).  Large
 * enough to amortise a commit, small enough for a remote metastore's
 * transaction limits.  Refs that compare their stream's lease (3
 * operations each) go KV_TXN_SAFE_OPS operations per transaction, since
 * a transaction with compares is never split (kv.h). */
#define REF_TXN_WRITES 512
#define REF_TXN_FENCED_OPS 3

/* ------------------------------------------------------ batch commit */

struct ref_build {
	struct meta_ref *refs; /* cap entries, allocated once: never moves */
	uint64_t *ripe_delay;  /* per ref: its stream's ripening after birth,
				* UINT64_MAX: no crossing (the age cap) */
	uint64_t *lease_ver;   /* per ref: the lease version to compare, 0 none */
	uint32_t n, cap;
	struct u64map *by_stream; /* stream id -> its ref in refs */
};

/* The ref of stream in b (*fresh when just made), or NULL on ENOMEM. */
static struct meta_ref *rb_ref(struct ref_build *b, uint64_t stream, bool *fresh)
{
	struct meta_ref *r = u64map_get(b->by_stream, stream);

	*fresh = false;
	if (r)
		return r;
	if (b->n == b->cap)
		return NULL; /* sized up front; cannot happen */
	r = &b->refs[b->n];
	if (u64map_put(b->by_stream, stream, r))
		return NULL;
	meta_ref_init(r);
	b->ripe_delay[b->n] = UINT64_MAX;
	b->lease_ver[b->n] = 0;
	b->n++;
	*fresh = true;
	return r;
}

static void rb_free(struct ref_build *b)
{
	for (uint32_t i = 0; i < b->n; i++)
		meta_ref_clear(&b->refs[i]);
	free(b->refs);
	free(b->ripe_delay);
	free(b->lease_ver);
	u64map_free(b->by_stream);
}

uint64_t absorb_jitter_ns(uint64_t stream_id, uint64_t linger_ns)
{
	uint64_t h = stream_id * 0x9e3779b97f4a7c15ULL;

	h ^= h >> 29;
	return linger_ns ? h % (linger_ns / 2 + 1) : 0;
}

static int stream_cmp(const void *x, const void *y)
{
	const struct meta_marker_stream *a = x, *b = y;

	return a->stream_id < b->stream_id ? -1 : a->stream_id > b->stream_id;
}

/* Size the ref builder for up to `total` runs.  0 or -ENOMEM. */
static int rb_init(struct ref_build *b, uint64_t total)
{
	b->cap = (uint32_t)(total ? total : 1);
	b->refs = calloc(b->cap, sizeof(*b->refs));
	b->ripe_delay = calloc(b->cap, sizeof(*b->ripe_delay));
	b->lease_ver = calloc(b->cap, sizeof(*b->lease_ver));
	b->by_stream = u64map_new(b->cap);
	if (!b->refs || !b->ripe_delay || !b->lease_ver || !b->by_stream)
		return -ENOMEM;
	return 0;
}

/*
 * The size trigger: are the run's stream's un-settled bytes at or over
 * the trigger after this run?  Then the stream's part of the batch
 * ripens at the stream's open round, or opens one (absorb.h): lower
 * *ripe_linger (the stream's own) to that delay.
 */
static void note_trigger(const struct absorb_policy *pol, const struct absorb_run *run,
			 uint64_t birth, uint64_t *ripe_linger)
{
	uint64_t d;

	if (!pol->trigger_bytes || run->settled_byte == ABSORB_UNKNOWN ||
	    run->first_byte + run->nbytes < run->settled_byte ||
	    run->first_byte + run->nbytes - run->settled_byte < pol->trigger_bytes)
		return;
	d = run->round_ripe_ns > birth
		    ? run->round_ripe_ns - birth
		    : pol->linger_ns + absorb_jitter_ns(run->stream_id, pol->linger_ns);
	if (d < *ripe_linger)
		*ripe_linger = d;
}

/* Add one slot's run to its stream's ref in b.  0, -EINVAL (the run does
 * not continue the stream's batch), -ENOMEM. */
static int build_run(struct ref_build *b, const struct meta_chain *row,
		     const struct absorb_slot *slot, const struct absorb_run *run)
{
	struct meta_ref_slot se = {
		.slot = slot->slot, .first_seq = run->first_seq,
		.first_byte = run->first_byte,
		.footer_off = slot->footer_off,
		.footer_len = slot->footer_len,
	};
	bool fresh;
	struct meta_ref *r = rb_ref(b, run->stream_id, &fresh);
	int rc;

	if (!r)
		return -ENOMEM;
	if (fresh) {
		r->stream_id = run->stream_id;
		r->kind = META_REF_SPAN;
		r->first_seq = r->end_seq = run->first_seq;
		r->first_byte = r->end_byte = run->first_byte;
		r->cls = row->cls;
		strcpy(r->star, row->star);
		r->epoch = row->epoch;
		b->lease_ver[r - b->refs] = run->lease_ver;
	}
	if (r->end_seq != run->first_seq || r->end_byte != run->first_byte ||
	    run->nrec == 0) {
		nv_log(NV_ERR, NV_SUB_ABSORB,
		       "stream %llu: slot %llu run at seq %llu does not continue "
		       "the batch at seq %llu", (unsigned long long)run->stream_id,
		       (unsigned long long)slot->slot,
		       (unsigned long long)run->first_seq,
		       (unsigned long long)r->end_seq);
		return -EINVAL;
	}
	if ((rc = meta_ref_add_slot(r, &se)))
		return rc;
	r->end_seq += run->nrec;
	r->end_byte += run->nbytes;
	if (run->max_ts > r->max_ts)
		r->max_ts = run->max_ts;
	return 0;
}

/* Refs (and their byte-index rows), in bounded transactions.  Puts that
 * rewrite identical values on a re-run (invariant 2), each behind its
 * stream's lease compare when it has one (invariant 5). */
static int write_refs(struct kv *kv, const struct ref_build *b)
{
	struct kv_txn *t = NULL;
	bool fenced = false;
	size_t cmps = 0;
	int rc = 0;

	/* One fenced ref makes every transaction of the batch one that may
	 * not be split: all of them keep to KV_TXN_SAFE_OPS. */
	for (uint32_t i = 0; i < b->n && !fenced; i++)
		fenced = b->lease_ver[i] != 0;
	for (uint32_t i = 0; i < b->n && !rc; i++) {
		bool full;

		if (!t && !(t = kv_txn_new()))
			return -ENOMEM;
		if (b->lease_ver[i]) {
			rc = meta_lease_txn_cmp(t, b->refs[i].stream_id, b->lease_ver[i]);
			cmps++;
		}
		if (!rc)
			rc = meta_ref_txn_put(t, &b->refs[i]);
		full = fenced ? cmps + kv_txn_nwrites(t) + REF_TXN_FENCED_OPS > KV_TXN_SAFE_OPS
			      : kv_txn_nwrites(t) >= REF_TXN_WRITES;
		if (!rc && (full || i + 1 == b->n)) {
			rc = kv_txn_commit(kv, t, NULL);
			kv_txn_free(t);
			t = NULL;
			cmps = 0;
		}
	}
	kv_txn_free(t);
	return rc;
}

/* Fill the batch's marker from its refs (streams sorted by id), each
 * stream ripening on its own (markers.h invariant 4).  The caller frees
 * mk->streams.  0 or -ENOMEM. */
static int build_marker(struct meta_marker *mk, const struct meta_chain *row,
			const struct absorb_slot *slots, uint32_t n,
			const struct ref_build *b, const struct absorb_policy *pol,
			uint64_t birth)
{
	mk->cls = row->cls;
	strcpy(mk->star, row->star);
	mk->epoch = row->epoch;
	mk->first_slot = slots[0].slot;
	mk->end_slot = slots[n - 1].slot + 1;
	mk->birth_ns = birth;
	mk->crossed = 0;
	mk->ripe_ns = birth + pol->age_cap_ns;
	mk->nstreams = b->n;
	mk->streams = calloc(b->n ? b->n : 1, sizeof(*mk->streams));
	if (!mk->streams)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->n; i++) {
		struct meta_marker_stream *ms = &mk->streams[i];

		ms->stream_id = b->refs[i].stream_id;
		ms->first_seq = b->refs[i].first_seq;
		ms->bytes = b->refs[i].end_byte - b->refs[i].first_byte;
		ms->ripe_ns = birth + (b->ripe_delay[i] != UINT64_MAX ? b->ripe_delay[i]
								     : pol->age_cap_ns);
		if (b->ripe_delay[i] != UINT64_MAX)
			mk->crossed = 1;
		if (ms->ripe_ns < mk->ripe_ns)
			mk->ripe_ns = ms->ripe_ns;
	}
	qsort(mk->streams, b->n, sizeof(*mk->streams), stream_cmp);
	return 0;
}

/* The checkpoint (CAS on the chain row's version) and the marker in one
 * commit; on success *row and *ver move on. */
static int commit_checkpoint(struct kv *kv, struct meta_chain *row, uint64_t *ver,
			     const struct meta_marker *mk)
{
	struct meta_chain next = *row;
	struct kv_txn *t = kv_txn_new();
	uint64_t rev;
	int rc;

	if (!t)
		return -ENOMEM;
	next.checkpoint = mk->end_slot;
	rc = meta_chain_txn_put(t, &next, *ver);
	if (!rc)
		rc = meta_marker_txn_put(t, mk);
	if (!rc)
		rc = kv_txn_commit(kv, t, &rev);
	kv_txn_free(t);
	if (!rc) {
		*row = next;
		*ver = rev;
	}
	return rc;
}

/* Commit slots[0..n) as one batch (absorb_commit_batch() sized it). */
static int commit_one(struct kv *kv, struct meta_chain *row, uint64_t *ver,
		      const struct absorb_slot *slots, uint32_t n,
		      const struct absorb_policy *pol, struct absorb_result *res)
{
	struct ref_build b = { 0 };
	struct meta_marker mk = { 0 };
	uint64_t total = 0, birth = nv_now_wall_ns();
	int rc = 0;

	if (n == 0)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (slots[i].slot != row->checkpoint + i)
			return -EINVAL;
		total += slots[i].nruns;
	}
	if ((rc = rb_init(&b, total)))
		goto out;
	/* One ref per stream, slot entries in slot order. */
	for (uint32_t i = 0; i < n && !rc; i++) {
		for (uint32_t j = 0; j < slots[i].nruns && !rc; j++) {
			const struct absorb_run *run = &slots[i].runs[j];

			rc = build_run(&b, row, &slots[i], run);
			if (!rc) {
				const struct meta_ref *r = u64map_get(b.by_stream, run->stream_id);

				note_trigger(pol, run, birth, &b.ripe_delay[r - b.refs]);
			}
		}
	}
	if (!rc)
		rc = NV_FP("absorb.before_refs");
	if (!rc)
		rc = write_refs(kv, &b);
	if (!rc)
		rc = NV_FP("absorb.after_refs");
	if (!rc)
		rc = build_marker(&mk, row, slots, n, &b, pol, birth);
	if (!rc)
		rc = commit_checkpoint(kv, row, ver, &mk);
	if (!rc) {
		if (res) {
			res->nrefs = b.n;
			res->end_slot = mk.end_slot;
			res->ripe_ns = mk.ripe_ns;
			res->birth_ns = birth;
			res->crossed = mk.crossed;
		}
		rc = NV_FP("absorb.after_checkpoint");
	}
out:
	free(mk.streams);
	rb_free(&b);
	return rc;
}

/*
 * How many of slots[0..n) form the next batch: no more than
 * ABSORB_BATCH_SLOTS_MAX slots (a span ref holds one entry per slot) and
 * no more than META_MARKER_STREAMS_MAX streams (the marker holds one per
 * stream), so neither row can outgrow the metastore's value limit.  At
 * least one slot (a flight holds at most CHAIN_FLIGHT_STREAMS_MAX).
 */
static int batch_prefix(const struct absorb_slot *slots, uint32_t n, uint32_t *out)
{
	struct u64map *seen = u64map_new(1024);
	uint32_t k = 0, distinct = 0;
	int rc = 0;

	if (!seen)
		return -ENOMEM;
	for (; k < n && k < ABSORB_BATCH_SLOTS_MAX && !rc; k++) {
		uint32_t fresh = 0;

		for (uint32_t j = 0; j < slots[k].nruns; j++)
			fresh += !u64map_get(seen, slots[k].runs[j].stream_id);
		if (k > 0 && distinct + fresh > META_MARKER_STREAMS_MAX)
			break;
		for (uint32_t j = 0; j < slots[k].nruns && !rc; j++)
			if (!u64map_get(seen, slots[k].runs[j].stream_id))
				rc = u64map_put(seen, slots[k].runs[j].stream_id, (void *)&slots[k]);
		distinct += fresh;
	}
	u64map_free(seen);
	*out = k;
	return rc;
}

int absorb_commit_batch(struct kv *kv, struct meta_chain *row, uint64_t *ver,
			const struct absorb_slot *slots, uint32_t n,
			const struct absorb_policy *pol, struct absorb_result *res)
{
	struct absorb_result one = { 0 };
	uint32_t nrefs = 0;
	int rc = 0;

	if (n == 0)
		return -EINVAL;
	while (!rc && n) {
		uint32_t k;

		rc = batch_prefix(slots, n, &k);
		if (!rc)
			rc = commit_one(kv, row, ver, slots, k, pol, &one);
		if (!rc) {
			nrefs += one.nrefs;
			slots += k;
			n -= k;
		}
	}
	if (!rc && res) {
		*res = one;
		res->nrefs = nrefs;
	}
	return rc;
}

/* ------------------------------------------------------ the live absorb */

struct absorb {
	struct absorb_cfg cfg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t work;       /* the absorb thread: something queued */
	pthread_cond_t idle;       /* drainers: the queue went empty */
	struct flight *qhead, *qtail; /* lock */
	uint32_t qlen;             /* lock */
	bool busy;                 /* lock: a batch is being committed */
	bool lingering;            /* lock: the absorb thread waits out its linger */
	int draining;              /* lock: threads in absorb_drain() */
	bool stop;                 /* lock */
	int err;                   /* lock: set when the chain was taken from us */
	struct meta_chain row;     /* lock */
	uint64_t row_ver;          /* lock */
};

void absorb_push(void *arg, struct flight *f)
{
	struct absorb *a = arg;

	f->next = NULL;
	pthread_mutex_lock(&a->lock);
	if (a->qtail)
		a->qtail->next = f;
	else
		a->qhead = f;
	a->qtail = f;
	a->qlen++;
	/* A lingering absorb thread needs waking only when its batch is
	 * full: a wake per flight would be a context switch per flight. */
	if (!a->lingering || a->qlen >= a->cfg.max_batch_slots)
		pthread_cond_signal(&a->work);
	pthread_mutex_unlock(&a->lock);
}

/* After a batch committed: frontiers, flight index, tokens, memory. */
static void finish_batch(struct absorb *a, struct flight *list)
{
	uint64_t tokens = 0;

	while (list) {
		struct flight *f = list;

		list = f->next;
		for (uint32_t i = 0; i < f->nruns; i++) {
			struct flight_run *r = &f->runs[i];
			struct nv_stream *s = r->stream;
			uint64_t end_seq = r->first_seq + r->nrec;

			pthread_mutex_lock(&s->lock);
			if (end_seq > atomic_load(&s->frontier_seq)) {
				atomic_store(&s->frontier_seq, end_seq);
				atomic_store(&s->frontier_byte, r->first_byte + r->nbytes);
			}
			stream_pend_pop_below(s, end_seq);
			pthread_mutex_unlock(&s->lock);
		}
		tokens += f->tokens;
		flight_free(f);
	}
	backlog_give(a->cfg.backlog, tokens);
}

static int commit_flights(struct absorb *a, struct flight *list, uint32_t n)
{
	struct absorb_slot *slots = calloc(n, sizeof(*slots));
	struct absorb_run *runs;
	struct absorb_result res;
	uint32_t total = 0, k = 0, i = 0;
	int rc;

	if (!slots)
		return -ENOMEM;
	for (struct flight *f = list; f; f = f->next)
		total += f->nruns;
	runs = calloc(total ? total : 1, sizeof(*runs));
	if (!runs) {
		free(slots);
		return -ENOMEM;
	}
	for (struct flight *f = list; f; f = f->next, i++) {
		slots[i].slot = f->slot;
		slots[i].footer_off = f->footer_off;
		slots[i].footer_len = f->footer_len;
		slots[i].nruns = f->nruns;
		slots[i].runs = &runs[k];
		for (uint32_t j = 0; j < f->nruns; j++, k++) {
			runs[k].stream_id = f->runs[j].stream->id;
			runs[k].first_seq = f->runs[j].first_seq;
			runs[k].first_byte = f->runs[j].first_byte;
			runs[k].nbytes = f->runs[j].nbytes;
			runs[k].max_ts = f->runs[j].max_ts;
			runs[k].nrec = f->runs[j].nrec;
			runs[k].settled_byte = atomic_load(&f->runs[j].stream->settled_byte);
			runs[k].round_ripe_ns = atomic_load(&f->runs[j].stream->round_ripe_ns);
			runs[k].lease_ver = atomic_load(&f->runs[j].stream->lease_ver);
		}
	}
	{
		struct meta_chain row;
		uint64_t ver;

		/* Commit on a copy: readers of a->row hold a->lock. */
		pthread_mutex_lock(&a->lock);
		row = a->row;
		ver = a->row_ver;
		pthread_mutex_unlock(&a->lock);
		rc = absorb_commit_batch(a->cfg.kv, &row, &ver, slots, n, &a->cfg.policy, &res);
		if (!rc) {
			pthread_mutex_lock(&a->lock);
			a->row = row;
			a->row_ver = ver;
			pthread_mutex_unlock(&a->lock);
		}
	}
	if (!rc && res.crossed) {
		/* Streams over the trigger whose round had ripened (or that had
		 * none) opened a round: it ripens at this batch's birth + the
		 * linger + the stream's own jitter (note_trigger()). */
		const struct absorb_policy *pol = &a->cfg.policy;
		uint64_t now = nv_now_wall_ns(), x = 0;

		for (struct flight *f = list; f; f = f->next)
			for (uint32_t j = 0; j < f->nruns; j++, x++) {
				const struct absorb_run *r = &runs[x];
				uint64_t end = r->first_byte + r->nbytes;
				struct nv_stream *s = f->runs[j].stream;

				if (pol->trigger_bytes && r->settled_byte != ABSORB_UNKNOWN &&
				    end >= r->settled_byte &&
				    end - r->settled_byte >= pol->trigger_bytes &&
				    atomic_load(&s->round_ripe_ns) <= now)
					atomic_store(&s->round_ripe_ns,
						     res.birth_ns + pol->linger_ns +
							     absorb_jitter_ns(r->stream_id,
									      pol->linger_ns));
			}
	}
	if (!rc) {
		NV_STAT_ADD(a->cfg.stats, absorb_batches, 1);
		NV_STAT_ADD(a->cfg.stats, span_refs, res.nrefs);
		nv_log(NV_DEBUG, NV_SUB_ABSORB, "%s/%s epoch %llu: slots [%llu, %llu) -> %u refs",
		       nv_class_name(a->row.cls), a->row.star, (unsigned long long)a->row.epoch,
		       (unsigned long long)slots[0].slot, (unsigned long long)res.end_slot,
		       res.nrefs);
	}
	free(runs);
	free(slots);
	return rc;
}

static void *absorb_main(void *arg)
{
	struct absorb *a = arg;
	unsigned failures = 0;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		struct flight *list, *last;
		uint32_t n = 0;
		int rc;

		while (!a->stop && (!a->qhead || a->err))
			pthread_cond_wait(&a->work, &a->lock);
		if (!a->qhead || a->err)
			break;
		/* Linger: a pass that waits briefly for more flights commits
		 * fewer, larger batches (fewer refs and markers per stream).
		 * Never while someone drains or stops. */
		if (a->cfg.linger_ns && a->qlen < a->cfg.max_batch_slots && !a->stop &&
		    !a->draining) {
			struct timespec ts = nv_mono_deadline(a->cfg.linger_ns);

			a->lingering = true;
			while (!a->stop && !a->draining && a->qlen < a->cfg.max_batch_slots &&
			       pthread_cond_timedwait(&a->work, &a->lock, &ts) != ETIMEDOUT)
				;
			a->lingering = false;
		}
		/* Take up to max_batch_slots flights from the head. */
		list = last = a->qhead;
		n = 1;
		while (last->next && n < a->cfg.max_batch_slots) {
			last = last->next;
			n++;
		}
		a->qhead = last->next;
		if (!a->qhead)
			a->qtail = NULL;
		last->next = NULL;
		a->qlen -= n;
		a->busy = true;
		pthread_mutex_unlock(&a->lock);

		rc = commit_flights(a, list, n);

		pthread_mutex_lock(&a->lock);
		if (rc == 0) {
			failures = 0;
			pthread_mutex_unlock(&a->lock);
			finish_batch(a, list);
			pthread_mutex_lock(&a->lock);
		} else {
			/* Put the batch back at the head and retry; the rows
			 * written so far are rewritten identically. */
			last->next = a->qhead;
			a->qhead = list;
			if (!a->qtail)
				a->qtail = last;
			a->qlen += n;
			if (rc == -ECANCELED) {
				a->err = rc;
				pthread_cond_broadcast(&a->idle); /* drainers: it is over */
				nv_log(NV_ERR, NV_SUB_ABSORB,
				       "%s/%s epoch %llu: chain row changed under the absorb "
				       "(fenced?), or a stream's writer lease moved: absorb "
				       "stopped; the epoch is settled by recovery",
				       nv_class_name(a->row.cls), a->row.star,
				       (unsigned long long)a->row.epoch);
				if (a->cfg.failed) {
					unsigned cls = a->row.cls;
					uint64_t epoch = a->row.epoch;

					pthread_mutex_unlock(&a->lock);
					a->cfg.failed(a->cfg.failed_arg, cls, epoch, rc);
					pthread_mutex_lock(&a->lock);
				}
			} else if (kv_is_closing(a->cfg.kv)) {
				/* The star is closing (kv.h kv_closing()): no retry.
				 * The batch's records are acked and durable in their
				 * slots; the next start's recovery absorbs them. */
				a->err = rc;
				pthread_cond_broadcast(&a->idle);
				nv_log(NV_WARN, NV_SUB_ABSORB,
				       "%s/%s epoch %llu: commit failed while closing (%s): %u "
				       "flight(s) left to the next start's recovery",
				       nv_class_name(a->row.cls), a->row.star,
				       (unsigned long long)a->row.epoch, strerror(-rc), a->qlen);
			} else {
				uint64_t ms = failures < 10 ? 10u << failures : 5000;
				struct timespec ts;

				if (ms > 5000)
					ms = 5000;
				if (failures++ % 20 == 0)
					nv_log(NV_WARN, NV_SUB_ABSORB,
					       "%s/%s epoch %llu: commit failed (%s); retrying",
					       nv_class_name(a->row.cls), a->row.star,
					       (unsigned long long)a->row.epoch, strerror(-rc));
				/* The pause; a close (its drain wakes us) cuts it
				 * short. */
				ts = nv_mono_deadline(ms * NV_NS_PER_MS);
				while (!a->stop && !kv_is_closing(a->cfg.kv) &&
				       pthread_cond_timedwait(&a->work, &a->lock, &ts) != ETIMEDOUT)
					;
			}
		}
		a->busy = false;
		if (!a->qhead)
			pthread_cond_broadcast(&a->idle);
	}
	pthread_cond_broadcast(&a->idle);
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int absorb_new(const struct absorb_cfg *cfg, struct absorb **out)
{
	struct absorb *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	a->cfg = *cfg;
	if (!a->cfg.max_batch_slots)
		a->cfg.max_batch_slots = 1;
	a->row = cfg->row;
	a->row_ver = cfg->row_ver;
	pthread_mutex_init(&a->lock, NULL);
	nv_cond_init_mono(&a->work);
	pthread_cond_init(&a->idle, NULL);
	rc = -pthread_create(&a->thread, NULL, absorb_main, a);
	if (rc) {
		pthread_mutex_destroy(&a->lock);
		free(a);
		return rc;
	}
	*out = a;
	return 0;
}

int absorb_drain(struct absorb *a)
{
	int rc;

	pthread_mutex_lock(&a->lock);
	a->draining++;
	pthread_cond_broadcast(&a->work); /* cut a linger short */
	while ((a->qhead || a->busy) && !a->err)
		pthread_cond_wait(&a->idle, &a->lock);
	a->draining--;
	rc = a->err;
	pthread_mutex_unlock(&a->lock);
	return rc;
}

void absorb_chain_row(struct absorb *a, struct meta_chain *row, uint64_t *ver)
{
	pthread_mutex_lock(&a->lock);
	*row = a->row;
	*ver = a->row_ver;
	pthread_mutex_unlock(&a->lock);
}

void absorb_free(struct absorb *a)
{
	struct flight *f;

	if (!a)
		return;
	(void)absorb_drain(a);
	pthread_mutex_lock(&a->lock);
	a->stop = true;
	pthread_cond_broadcast(&a->work);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	/* Flights left only when the absorb was stopped by an error: their
	 * records are acked and durable; recovery will absorb them. */
	while ((f = a->qhead)) {
		a->qhead = f->next;
		backlog_give(a->cfg.backlog, f->tokens);
		flight_free(f);
	}
	pthread_cond_destroy(&a->work);
	pthread_cond_destroy(&a->idle);
	pthread_mutex_destroy(&a->lock);
	free(a);
}
