/*
 * recover.c - see recover.h.
 *
 * State diagram (the chain row's, meta/chains.h):
 *
 *   LIVE --fence (cut recorded)--> FENCED --walk to cut, reap--> SETTLED
 *
 *   step                    function          durable effect
 *   find cut, fence it      fence()           fence object at cut;
 *                                             row: FENCED, cut
 *   absorb [ckpt, cut)      walk()            refs; row.checkpoint; markers
 *   delete garbage > cut    reap()            slots deleted
 *   mark settled            mark_settled()    row: SETTLED
 *
 * recover_chain() runs the four steps in this order; every store call
 * goes through r_store() (retries of passing errors).
 */
#include "config.h"
#include "engine/recover.h"
#include "engine/objread.h"
#include "engine/bundle.h"
#include "engine/chain.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"
#include "src/base/u64map.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Store calls with retries: a recovery that fails is retried as a whole
 * by the auditor, but a walk over many slots would then almost never get
 * through a store with a small error rate.  Passing errors (the store's
 * one rule, store_err_transient()) are retried here a few times with
 * backoff; answers (ENOENT, EEXIST, ERANGE) and hard errors are not.
 */
#define STORE_TRIES 6

static void backoff(int attempt)
{
	struct timespec ts = { 0, (long)(20000000L << (attempt < 5 ? attempt : 5)) };

	nanosleep(&ts, NULL);
}

/* The store calls recover.c makes; r_store() runs one with retries. */
enum r_op { R_HEAD, R_GET, R_PUT, R_DELETE, R_TAIL };

struct r_call {
	enum r_op op;
	const char *key;                 /* all but R_DELETE */
	uint64_t *size;                  /* R_HEAD, R_TAIL: out */
	uint64_t off;                    /* R_GET */
	size_t len;                      /* R_GET */
	void *dst;                       /* R_GET: len bytes */
	size_t *got;                     /* R_GET: out */
	const struct iovec *iov;         /* R_PUT */
	int iovcnt;                      /* R_PUT */
	unsigned flags;                  /* R_PUT */
	const char *const *keys;         /* R_DELETE */
	size_t nkeys;                    /* R_DELETE */
	uint64_t *foff;                  /* R_TAIL: out */
	uint32_t *flen;                  /* R_TAIL: out */
	uint8_t **win;                   /* R_TAIL: out, caller frees */
	struct bundle_footer *footer;    /* R_TAIL: out */
};

static int r_once(const struct recover_cfg *cfg, const struct r_call *c)
{
	switch (c->op) {
	case R_HEAD:
		return store_head(cfg->store, c->key, c->size);
	case R_GET:
		return store_get_range(cfg->store, c->key, c->off, c->len, c->dst, c->got);
	case R_PUT:
		/* After a passing error an earlier attempt may have landed:
		 * EEXIST then is ours, and the caller looks at what is there
		 * anyway. */
		return store_put(cfg->store, c->key, c->iov, c->iovcnt, c->flags);
	case R_DELETE:
		return store_delete(cfg->store, c->keys, c->nkeys);
	case R_TAIL:
		return objread_tail(cfg->store, c->key, c->size, c->foff, c->flen, c->win,
				    c->footer);
	}
	return -EINVAL;
}

/* Run c, then again after a backoff while it fails with a passing error,
 * at most STORE_TRIES more times.  Returns the last result. */
static int r_store(const struct recover_cfg *cfg, const struct r_call *c)
{
	int rc = r_once(cfg, c);

	for (int i = 0; i < STORE_TRIES && store_err_transient(rc); i++) {
		backoff(i);
		rc = r_once(cfg, c);
	}
	return rc;
}

/* One slot's footer turned into absorb input. */
struct walked {
	struct absorb_slot slot;
	struct absorb_run *runs; /* owned */
};

static void walked_free(struct walked *w, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(w[i].runs);
}

/* Read a slot's trailer and footer and build its absorb input.
 * -ENOENT when the slot does not exist. */
static int read_slot(const struct recover_cfg *cfg, const char *key, uint64_t slot,
		     struct walked *w)
{
	struct bundle_footer f;
	uint64_t size, foff;
	uint32_t flen, nruns = 0;
	uint8_t *win = NULL;
	int rc;

	memset(w, 0, sizeof(*w));
	rc = r_store(cfg, &(struct r_call){ .op = R_TAIL, .key = key, .size = &size,
					    .foff = &foff, .flen = &flen, .win = &win,
					    .footer = &f });
	if (!rc) {
		w->runs = calloc(f.n ? f.n : 1, sizeof(*w->runs));
		if (!w->runs)
			rc = -ENOMEM;
	}
	/* Consecutive entries of one stream form one run (bundle.h inv. 2). */
	for (uint32_t i = 0; !rc && i < f.n; i++) {
		struct bundle_entry e;
		struct absorb_run *r;

		rc = bundle_footer_get(&f, i, &e);
		if (rc)
			break;
		r = nruns ? &w->runs[nruns - 1] : NULL;
		if (r && r->stream_id == e.stream_id) {
			if (e.first_seq != r->first_seq + r->nrec ||
			    e.first_byte != r->first_byte + r->nbytes) {
				rc = -EBADMSG;
				break;
			}
		} else {
			r = &w->runs[nruns++];
			r->settled_byte = ABSORB_UNKNOWN; /* set_settled() fills it in */
			r->stream_id = e.stream_id;
			r->first_seq = e.first_seq;
			r->first_byte = e.first_byte;
		}
		r->nrec += e.nrec;
		r->nbytes += bundle_entry_body_bytes(&e);
		if (e.max_ts > r->max_ts)
			r->max_ts = e.max_ts;
	}
	free(win);
	if (rc) {
		free(w->runs);
		w->runs = NULL;
		return rc;
	}
	w->slot.slot = slot;
	w->slot.footer_off = foff;
	w->slot.footer_len = flen;
	w->slot.nruns = nruns;
	w->slot.runs = w->runs;
	return 0;
}

/* What is in a slot: -ENOENT, 0 (a bundle) or 1 (the fence object). */
static int slot_kind(const struct recover_cfg *cfg, const char *key)
{
	uint8_t b[CHAIN_FENCE_SIZE];
	uint64_t size, e, c;
	size_t got;
	int rc = r_store(cfg, &(struct r_call){ .op = R_HEAD, .key = key, .size = &size });

	if (rc)
		return rc;
	if (size != CHAIN_FENCE_SIZE)
		return 0;
	rc = r_store(cfg, &(struct r_call){ .op = R_GET, .key = key, .off = 0, .len = sizeof(b),
					    .dst = b, .got = &got });
	if (rc)
		return rc;
	return chain_fence_decode(b, got, &e, &c);
}

/*
 * Step 1: find the end of the gap-free prefix from the checkpoint up, put
 * the fence object there (create-once: if a writer lands that slot first,
 * it belongs to the prefix and we fence the next one), and record the
 * cut (LIVE -> FENCED).  A FENCED row's cut is adopted; a fence found
 * where the prefix ends is an earlier run's, adopted too.
 */
static int fence(const struct recover_cfg *cfg, struct meta_chain *row, uint64_t *ver)
{
	char key[CHAIN_KEY_MAX];
	uint64_t slot = row->checkpoint;
	int rc;

	if (row->state != CHAIN_LIVE)
		return 0;
	for (;;) {
		uint8_t f[CHAIN_FENCE_SIZE];
		struct iovec iov = { f, sizeof(f) };

		chain_slot_key(key, sizeof(key), row->cls, row->star, row->epoch, slot);
		rc = slot_kind(cfg, key);
		if (rc == 1)
			break; /* an earlier run's fence: the cut */
		if (rc == 0) {
			slot++;
			continue;
		}
		if (rc != -ENOENT)
			return rc;
		chain_fence_encode(f, row->epoch, slot);
		rc = r_store(cfg, &(struct r_call){ .op = R_PUT, .key = key, .iov = &iov,
						    .iovcnt = 1,
						    .flags = STORE_CREATE_ONCE | STORE_EVERYWHERE |
							     STORE_RESERVE });
		if (rc == -EEXIST)
			continue; /* landed meanwhile: look again */
		if (rc)
			return rc;
		rc = NV_FP("recover.after_fence");
		if (rc)
			return rc;
		break;
	}
	nv_log(NV_INFO, NV_SUB_RECOVER, "%s/%s epoch %llu: fenced at slot %llu",
	       nv_class_name(row->cls), row->star, (unsigned long long)row->epoch,
	       (unsigned long long)slot);
	row->state = CHAIN_FENCED;
	row->cut = slot;
	rc = meta_chain_cas(cfg->kv, row, *ver);
	if (rc)
		return rc;
	return meta_chain_get(cfg->kv, row->cls, row->star, row->epoch, row, ver);
}

/* Each stream's settled end, read once per walk (the size trigger of
 * the class's policy measures un-settled bytes from it). */
struct settled_ends {
	struct u64map *map;  /* stream id -> &ends[i] */
	uint64_t *ends;
	uint32_t n, cap;
};

static void settled_ends_free(struct settled_ends *se)
{
	u64map_free(se->map);
	free(se->ends);
}

static int settled_end_of(const struct recover_cfg *cfg, struct settled_ends *se, uint64_t id,
			  uint64_t *end)
{
	uint64_t *p = u64map_get(se->map, id), seq, byte;
	struct meta_stream ms;
	int rc;

	if (p) {
		*end = *p;
		return 0;
	}
	if (se->n == se->cap)
		return -ENOBUFS; /* ripens by the age cap, as before the cache */
	rc = meta_stream_get(cfg->kv, id, &ms, NULL);
	if (rc == -ENOENT) {
		*end = ABSORB_UNKNOWN; /* deleted: nothing to trigger */
		return 0;
	}
	if (!rc)
		rc = meta_ref_settled_end(cfg->kv, id, ms.trim_seq, &seq, &byte);
	if (rc)
		return rc;
	se->ends[se->n] = byte > ms.trim_byte ? byte : ms.trim_byte;
	rc = u64map_put(se->map, id, &se->ends[se->n]);
	if (rc)
		return rc;
	*end = se->ends[se->n++];
	return 0;
}

/* The settled end of every run of w (ABSORB_UNKNOWN when unknown: the
 * age cap then). */
static int set_settled(const struct recover_cfg *cfg, struct settled_ends *se, struct walked *w)
{
	for (uint32_t i = 0; i < w->slot.nruns; i++) {
		uint64_t end;
		int rc = settled_end_of(cfg, se, w->runs[i].stream_id, &end);

		if (rc == -ENOBUFS)
			continue;
		if (rc)
			return rc;
		w->runs[i].settled_byte = end;
	}
	return 0;
}

#define SETTLED_ENDS_MAX 65536 /* streams whose settled end a walk keeps */

/* Step 2: absorb [checkpoint, cut) a batch at a time. */
static int walk(const struct recover_cfg *cfg, struct meta_chain *row, uint64_t *ver)
{
	struct settled_ends se = { .map = u64map_new(1024), .cap = SETTLED_ENDS_MAX };
	uint32_t cap = cfg->batch_slots ? cfg->batch_slots : 64;
	struct walked *w = calloc(cap, sizeof(*w));
	struct absorb_slot *slots = calloc(cap, sizeof(*slots));
	uint64_t start = row->checkpoint, last_log = nv_now_mono_ns();
	int rc = 0;

	se.ends = calloc(se.cap, sizeof(*se.ends));
	if (!w || !slots || !se.map || !se.ends) {
		free(w);
		free(slots);
		settled_ends_free(&se);
		return -ENOMEM;
	}
	while (!rc && row->checkpoint < row->cut) {
		uint32_t n = 0;

		while (n < cap && row->checkpoint + n < row->cut) {
			char key[CHAIN_KEY_MAX];
			uint64_t slot = row->checkpoint + n;

			chain_slot_key(key, sizeof(key), row->cls, row->star, row->epoch, slot);
			rc = read_slot(cfg, key, slot, &w[n]);
			if (!rc) {
				rc = set_settled(cfg, &se, &w[n]);
				if (rc) {
					walked_free(&w[n], 1);
					break;
				}
			}
			if (rc) {
				nv_log(NV_ERR, NV_SUB_RECOVER,
				       "%s: slot below the cut %llu unreadable (%s): acknowledged "
				       "records would be lost, not settling",
				       key, (unsigned long long)row->cut, strerror(-rc));
				if (rc == -EBADMSG || rc == -ENOENT)
					rc = -EIO;
				break;
			}
			slots[n] = w[n].slot;
			n++;
		}
		if (!rc && n)
			rc = absorb_commit_batch(cfg->kv, row, ver, slots, n, &cfg->policy[row->cls],
						 NULL);
		walked_free(w, n);
		if (!rc && cfg->stats)
			NV_STAT_ADD(cfg->stats, recovered_slots, n);
		if (!rc)
			rc = NV_FP("recover.after_slot");
		if (!rc && nv_now_mono_ns() - last_log > 5 * NV_NS_PER_S) {
			last_log = nv_now_mono_ns();
			nv_log(NV_INFO, NV_SUB_RECOVER, "%s/%s epoch %llu: %llu of %llu slots absorbed",
			       nv_class_name(row->cls), row->star, (unsigned long long)row->epoch,
			       (unsigned long long)(row->checkpoint - start),
			       (unsigned long long)(row->cut - start));
		}
	}
	free(w);
	free(slots);
	settled_ends_free(&se);
	return rc;
}

/* Step 3: slots above the cut (the fence's slot) were never acknowledged;
 * they lie within the writer's put window of it. */
static int reap(const struct recover_cfg *cfg, const struct meta_chain *row)
{
	uint32_t win = cfg->probe_window ? cfg->probe_window : 16;

	/* The crashed writer's own window (the chain row has it), not only
	 * the one this star runs with: slots above a lowered window would
	 * leak. */
	if (row->put_window && row->put_window * 4 + 16 > win)
		win = row->put_window * 4 + 16;

	for (uint64_t slot = row->cut + 1; slot <= row->cut + win; slot++) {
		char key[CHAIN_KEY_MAX];
		const char *keys[1] = { key };
		uint64_t size;
		int rc;

		chain_slot_key(key, sizeof(key), row->cls, row->star, row->epoch, slot);
		rc = r_store(cfg, &(struct r_call){ .op = R_HEAD, .key = key, .size = &size });
		if (rc == -ENOENT)
			continue;
		if (rc)
			return rc;
		nv_log(NV_INFO, NV_SUB_RECOVER, "%s: above the cut, never acknowledged: deleting",
		       key);
		rc = r_store(cfg, &(struct r_call){ .op = R_DELETE, .keys = keys, .nkeys = 1 });
		if (rc)
			return rc;
	}
	return 0;
}

/* Step 4: FENCED -> SETTLED, one CAS of the row read at ver. */
static int mark_settled(const struct recover_cfg *cfg, struct meta_chain *row, uint64_t ver)
{
	row->state = CHAIN_SETTLED;
	row->settled_ns = nv_now_wall_ns();
	return meta_chain_cas(cfg->kv, row, ver);
}

int recover_chain(const struct recover_cfg *cfg, unsigned cls, const char *star,
		  uint64_t epoch)
{
	struct meta_chain row;
	uint64_t ver, t0 = nv_now_mono_ns();
	int rc;

	rc = meta_chain_get(cfg->kv, cls, star, epoch, &row, &ver);
	if (rc)
		return rc;
	if (row.state == CHAIN_SETTLED)
		return 0;
	nv_log(NV_INFO, NV_SUB_RECOVER, "%s/%s epoch %llu: settling (%s, checkpoint %llu)",
	       nv_class_name(cls), star, (unsigned long long)epoch,
	       meta_chain_state_name(row.state), (unsigned long long)row.checkpoint);
	rc = NV_FP("recover.before_walk");
	if (!rc)
		rc = fence(cfg, &row, &ver);
	if (!rc)
		rc = walk(cfg, &row, &ver);
	if (!rc)
		rc = reap(cfg, &row);
	if (!rc)
		rc = NV_FP("recover.before_settled");
	if (!rc)
		rc = mark_settled(cfg, &row, ver);
	if (rc == -ECANCELED) {
		/* Someone else moved the row: re-read; settled is success. */
		if (meta_chain_get(cfg->kv, cls, star, epoch, &row, &ver) == 0 &&
		    row.state == CHAIN_SETTLED)
			rc = 0;
	}
	if (rc)
		nv_log(NV_ERR, NV_SUB_RECOVER, "%s/%s epoch %llu: settling failed: %s",
		       nv_class_name(cls), star, (unsigned long long)epoch, strerror(-rc));
	else
		nv_log(NV_INFO, NV_SUB_RECOVER,
		       "%s/%s epoch %llu: settled at cut %llu in %llu ms", nv_class_name(cls),
		       star, (unsigned long long)epoch, (unsigned long long)row.cut,
		       (unsigned long long)((nv_now_mono_ns() - t0) / NV_NS_PER_MS));
	return rc;
}
