/*
 * engine_fixture.h - the shared harness of the engine unit tests
 * (test_chain, test_absorb, test_read, test_stream).
 *
 * For: building, in a fresh mkdtemp() directory, what engine/star.c
 * builds for one class: a SQLite metastore, a fake object store
 * (tests/unit/fake_store.h), a stream table, a backlog, a tail cache,
 * stats, a minted epoch with its absorb and its chain (release =
 * absorb_push, through a valve the test can close), streams loaded by
 * stream_load() (engine/stream.c, which star.c load_stream() calls), and
 * completion records that tell the test how often, with what error and in
 * which order each append was completed.  Not for: the FUSE layer or star_open() (which would bring
 * the directory store and recovery into every test).
 *
 * Threads: completions and the ack hook run on chain threads; they only
 * record (under fx->dlock) and never call cmocka assertions.  Every
 * helper that asserts runs on the test thread.
 *
 * Teardown (efx_teardown(), the cmocka teardown) is safe after a failed
 * test: it opens every gate, clears injected errors and failpoints, stops
 * the chain, drops flights held at the valve, frees the absorb (on a
 * helper thread, bounded: an absorb that can never drain is leaked with
 * the whole fixture rather than hanging the run), frees the completion
 * records of efx_recs() only after the chain has stopped, and removes the
 * directory.  Tests never hold a fixture or stream lock across an
 * assertion (a failed assertion would leave it held for the teardown).
 */
#ifndef NOVAFS_TESTS_ENGINE_FIXTURE_H
#define NOVAFS_TESTS_ENGINE_FIXTURE_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/absorb.h"
#include "engine/backlog.h"
#include "engine/chain.h"
#include "engine/fetch.h"
#include "engine/settle.h"
#include "engine/stats.h"
#include "engine/store/store.h"
#include "engine/stream.h"
#include "engine/tailcache.h"
#include "meta/chains.h"
#include "meta/kv.h"
#include "meta/streams.h"
#include "tests/unit/fake_store.h"

#define EFX_STAR "s1"
#define EFX_BUCKET "b"
#define EFX_MAX_STREAMS 64
#define EFX_MAX_ACKS 8192

/* Tunables of efx_start(); efx_opts_default() fills them. */
struct efx_opts {
	unsigned cls;              /* NV_CLASS_STANDARD */
	uint64_t backlog_bytes;    /* 64 MiB */
	uint64_t tail_cache_bytes; /* 16 MiB; 0: a cache that caches nothing */
	bool no_tail_cache;        /* the chain gets no cache at all (tc NULL) */
	uint64_t flight_max;       /* 1 MiB */
	uint64_t linger_ns;        /* 1 ms */
	uint64_t put_timeout_ns;   /* 10 s */
	unsigned put_window;       /* 4 */
	bool group_commit;         /* false: linger seals while PUTs are in flight */
	bool linger_idle;          /* false: an idle chain seals at once */
	size_t chunk_target;       /* 64 KiB */
	int zstd_level;            /* 0: raw chunks, so tests can corrupt them exactly */
	uint32_t absorb_batch_slots; /* 1: one batch per flight, deterministic */
	uint64_t age_cap_ns;       /* 1 hour */
	bool hold;                 /* start with the valve closed */
};

/* One append's completion, filled by the chain thread that completes it. */
struct efx_rec {
	struct efx *fx;
	struct nv_stream *s;
	uint64_t seq;         /* from chain_append() */
	uint64_t end_byte;    /* the record's end offset, when the test set it */
	int calls;            /* dlock: completions seen (must end at 1) */
	int err;              /* dlock */
	uint64_t order;       /* dlock: event number of the completion */
	uint64_t acked_at_cb; /* dlock: the stream's acked end seen by the callback */
};

/* One call of the chain's ack hook. */
struct efx_ack {
	uint64_t stream, old_byte, new_byte, order;
};

struct efx {
	char dir[PATH_MAX];
	struct kv *kv;
	struct fake_store *fs;
	struct store *store;
	struct nv_stats stats;
	struct stream_table *table;

	struct efx_opts o;
	struct backlog *backlog;
	struct tailcache *tc;
	struct chain *chain;
	bool chain_stopped;
	struct absorb *absorb;
	struct meta_chain row; /* as minted */
	uint64_t row_ver;

	/* The valve between the chain's release and the absorb. */
	pthread_mutex_t vlock;
	bool held;                    /* vlock */
	struct flight *hhead, *htail; /* vlock: held flights, slot order */
	unsigned nheld;               /* vlock */

	/* Completion and ack records. */
	pthread_mutex_t dlock;
	pthread_cond_t dcond;
	uint64_t events; /* dlock */
	unsigned ndone;  /* dlock */
	struct efx_ack acks[EFX_MAX_ACKS]; /* dlock */
	unsigned nacks;                   /* dlock */

	struct nv_stream *streams[EFX_MAX_STREAMS]; /* references the fixture drops */
	unsigned nstreams;
	bool leaked; /* a stuck absorb still uses the fixture: never freed */
	void *allocs[256]; /* efx_recs() arrays, freed after the chain stopped */
	unsigned nallocs;
};

/* cmocka setup/teardown: a fixture with dir, kv, fake store, table and
 * bucket EFX_BUCKET, nothing started. */
int efx_setup(void **state);
int efx_teardown(void **state);

void efx_opts_default(struct efx_opts *o);
/* Create backlog and tail cache, mint an epoch of o->cls, start its absorb
 * and its chain (star.c start_class()).  Asserts. */
void efx_start(struct efx *f, const struct efx_opts *o);
/* Stop the chain (drain), then drop held flights, then free the absorb. */
void efx_stop(struct efx *f);
/* chain_stop() once (the chain stays allocated until efx_stop()). */
void efx_chain_stop(struct efx *f);

/* Create stream name in EFX_BUCKET (cls < 0: the bucket default) and load
 * it.  The fixture keeps the reference (dropped at teardown). */
struct nv_stream *efx_stream(struct efx *f, const char *name, int cls);
/* Load a stream from its row and its last ref: stream_load(), as star.c does.
 * The fixture keeps the reference. */
struct nv_stream *efx_load(struct efx *f, const struct meta_stream *ms);

/* n zeroed completion records owned by the fixture: they outlive the test
 * body (a failed test's teardown still completes its appends into them)
 * and are freed after the chain has stopped. */
struct efx_rec *efx_recs(struct efx *f, unsigned n);

/* Append asynchronously, completion into rec (which must stay valid until
 * completed: use efx_recs()).  Returns chain_append()'s result. */
int efx_append(struct efx *f, struct nv_stream *s, const void *body, size_t len,
	       struct efx_rec *rec);
/* Append and wait (bounded) for the completion.  Returns the completion's
 * error, or chain_append()'s; fails the test on timeout.  *seq may be NULL. */
int efx_append_wait(struct efx *f, struct nv_stream *s, const void *body, size_t len,
		    uint64_t *seq);
/* Wait until at least n completions were seen.  false on timeout. */
bool efx_wait_done(struct efx *f, unsigned n, unsigned timeout_ms);
unsigned efx_done_count(struct efx *f);
/* Read a record under dlock. */
struct efx_rec efx_rec_get(struct efx *f, const struct efx_rec *r);
/* Copy up to cap ack hook records (under dlock); returns how many there are. */
unsigned efx_acks(struct efx *f, struct efx_ack *out, unsigned cap);

/* The valve: while held, released flights queue in the fixture instead
 * of reaching the absorb. */
void efx_hold(struct efx *f);
/* Push every held flight to the absorb, in slot order, and open. */
void efx_unhold(struct efx *f);
unsigned efx_held(struct efx *f);
/* The slots of the held flights, in queue order (up to cap); returns how
 * many are held. */
unsigned efx_held_slots(struct efx *f, uint64_t *slots, unsigned cap);
/* Free held flights (their tokens return): the absorb never sees them. */
void efx_drop_held(struct efx *f);

/* The slot key of slot in the fixture's chain. */
char *efx_slot_key(struct efx *f, uint64_t slot, char buf[CHAIN_KEY_MAX]);
/* The prefix of every slot key of the fixture's chain ("chains/.../<epoch>/"). */
char *efx_chain_prefix(struct efx *f, char buf[CHAIN_KEY_MAX]);

/* Bounded poll of pred every millisecond.  true once pred holds. */
bool efx_poll(bool (*pred)(void *arg), void *arg, unsigned timeout_ms);
/* Poll until stats field >= n; names the field in a failure message. */
#define efx_poll_stat(f, field, n, ms) efx_poll_stat_((f), offsetof(struct nv_stats, field), (n), (ms))
bool efx_poll_stat_(struct efx *f, size_t off, uint64_t n, unsigned timeout_ms);

/* Every key/value of the kv (kv_range over the whole keyspace), rendered
 * as one comparable string, one "tag hexkey = hexvalue" line per key.
 * With zero_times, the wall-clock fields a re-run legitimately changes
 * are zeroed first: markers' birth_ns/ripe_ns (and each stream's ripe_ns)
 * and chains' settled_ns.
 * Caller frees. */
char *efx_kv_dump(struct kv *kv, bool zero_times);
/* Same for the keys of one tag ("ref", "rby", "mrk", "chn", ...). */
char *efx_kv_dump_space(struct kv *kv, const char *tag, bool zero_times);

/* Deterministic PRNG (splitmix64). */
uint64_t efx_rand(uint64_t *state);
/* Fill buf with bytes derived from (stream, seq) so any byte can be
 * recomputed. */
void efx_fill(uint8_t *buf, size_t len, uint64_t stream, uint64_t seq);

/* ---------------------------------- settlement (test_settle, test_trim) */

/* efx_start() with default options and the valve held, a fetch cache
 * over the fixture's store in f->dir/fetch (64 MiB; the test frees it
 * with fetch_cache_free()), and *cfg from efx_settle_cfg() over it. */
struct fetch_cache *efx_start_settle(struct efx *f, struct settle_cfg *cfg);
/* A settle_cfg over the fixture: trigger 1 byte, age caps out of reach,
 * output cap 64 MiB, read grace 1 s, two workers. */
void efx_settle_cfg(struct efx *f, struct fetch_cache *fc, struct settle_cfg *cfg);
/* The fixture's chain row as the metastore has it now. */
struct meta_chain efx_chain_row(struct efx *f);
/* With the valve held: append n records of len bytes to s (bodies
 * efx_fill(s->id, seq), seqs first_seq...; asserted), then let the absorb
 * commit them and hold the valve again. */
void efx_write_absorb(struct efx *f, struct nv_stream *s, uint64_t first_seq, unsigned n,
		      size_t len);
/* Keys of the kv in the space of tag. */
unsigned efx_count_space(struct kv *kv, const char *tag);

#endif
