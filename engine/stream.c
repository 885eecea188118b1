/*
 * stream.c - see stream.h.
 *
 * The table is a u64 map (src/base/u64map.h) from stream id to stream;
 * t->lock guards the map.  A stream's refcount is atomic; the 1 -> 0
 * transition takes the table lock and re-checks, because a concurrent
 * find may have revived it.  t->removals counts streams dropped from
 * the map, so stream_load() can tell that positions it read may predate
 * an instance that came and went meanwhile (it reads them again).
 *
 * The pend ring is searched by one binary search, pend_find(), over
 * either key (enum pend_key, as engine/bundle.c's enum probe_key).
 */
#include "config.h"
#include "engine/stream.h"
#include "meta/refs.h"
#include "src/base/lockcheck.h"
#include "src/base/log.h"
#include "src/base/u64map.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Initial size of the table's map (it grows by doubling). */
#define STREAM_TABLE_HINT 32

struct stream_table {
	pthread_mutex_t lock;
	struct u64map *map; /* lock: id -> struct nv_stream * */
	uint64_t removals;  /* lock: streams dropped from map so far */
};

struct stream_table *stream_table_new(void)
{
	struct stream_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->map = u64map_new(STREAM_TABLE_HINT);
	if (!t->map) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

static void stream_free(struct nv_stream *s)
{
	wake_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s->pend);
	free(s);
}

void stream_table_free(struct stream_table *t)
{
	size_t cur = 0;
	void *v;

	if (!t)
		return;
	/* At shutdown the layer above may still hold streams it can no longer
	 * release (file handles the kernel never closed): free them. */
	while (u64map_next(t->map, &cur, NULL, &v))
		stream_free(v);
	u64map_free(t->map);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

struct nv_stream *stream_alloc(void)
{
	struct nv_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	atomic_init(&s->refs, 1);
	pthread_mutex_init(&s->lock, NULL);
	wake_init(&s->wake);
	return s;
}

struct nv_stream *stream_table_find(struct stream_table *t, uint64_t id)
{
	struct nv_stream *s;

	pthread_mutex_lock(&t->lock);
	s = u64map_get(t->map, id);
	if (s)
		atomic_fetch_add(&s->refs, 1);
	pthread_mutex_unlock(&t->lock);
	return s;
}

uint64_t stream_table_removals(struct stream_table *t)
{
	uint64_t n;

	pthread_mutex_lock(&t->lock);
	n = t->removals;
	pthread_mutex_unlock(&t->lock);
	return n;
}

struct nv_stream *stream_table_insert(struct stream_table *t, struct nv_stream *s)
{
	return stream_table_insert_since(t, s, UINT64_MAX);
}

struct nv_stream *stream_table_insert_since(struct stream_table *t, struct nv_stream *s,
					    uint64_t removals)
{
	struct nv_stream *old;

	pthread_mutex_lock(&t->lock);
	old = u64map_get(t->map, s->id);
	if (old) {
		atomic_fetch_add(&old->refs, 1);
		pthread_mutex_unlock(&t->lock);
		stream_free(s);
		return old;
	}
	if (removals != UINT64_MAX && removals != t->removals) {
		/* s was read before a stream left the table: maybe this one,
		 * with records committed since that s does not know of. */
		pthread_mutex_unlock(&t->lock);
		stream_free(s);
		return STREAM_TABLE_STALE;
	}
	if (u64map_put(t->map, s->id, s)) {
		pthread_mutex_unlock(&t->lock);
		stream_free(s);
		return NULL;
	}
	s->table = t;
	pthread_mutex_unlock(&t->lock);
	return s;
}

size_t stream_table_count(struct stream_table *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = u64map_count(t->map);
	pthread_mutex_unlock(&t->lock);
	return n;
}

void stream_table_each(struct stream_table *t, void (*fn)(void *arg, struct nv_stream *s),
		       void *arg)
{
	struct nv_stream **all;
	size_t n = 0, count, cur = 0;
	void *v;

	pthread_mutex_lock(&t->lock);
	count = u64map_count(t->map);
	all = calloc(count ? count : 1, sizeof(*all));
	if (all) {
		while (u64map_next(t->map, &cur, NULL, &v)) {
			struct nv_stream *x = v;

			atomic_fetch_add(&x->refs, 1);
			all[n++] = x;
		}
	}
	pthread_mutex_unlock(&t->lock);
	for (size_t i = 0; i < n; i++) {
		fn(arg, all[i]);
		stream_put(all[i]);
	}
	free(all);
}

void stream_get(struct nv_stream *s)
{
	int old = atomic_fetch_add(&s->refs, 1);

	assert(old > 0);
	(void)old;
}

void stream_put(struct nv_stream *s)
{
	struct stream_table *t;

	if (!s)
		return;
	t = s->table;
	if (!t) {
		if (atomic_fetch_sub(&s->refs, 1) == 1)
			stream_free(s);
		return;
	}
	/* Fast path: not the last reference. */
	for (;;) {
		int r = atomic_load(&s->refs);

		assert(r > 0);
		if (r == 1)
			break;
		if (atomic_compare_exchange_weak(&s->refs, &r, r - 1))
			return;
	}
	/* Possibly the last: decide under the table lock, where finds
	 * take their references. */
	pthread_mutex_lock(&t->lock);
	if (atomic_fetch_sub(&s->refs, 1) != 1) {
		pthread_mutex_unlock(&t->lock);
		return;
	}
	if (u64map_get(t->map, s->id) == s) {
		u64map_remove(t->map, s->id);
		t->removals++;
	}
	pthread_mutex_unlock(&t->lock);
	stream_free(s);
}

int stream_pend_push(struct nv_stream *s, const struct stream_pend *p)
{
	NV_ASSERT_LOCKED(&s->lock);
	if (s->pend_n == s->pend_cap) {
		uint32_t ncap = s->pend_cap ? s->pend_cap * 2 : 8;
		struct stream_pend *np = malloc(ncap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		for (uint32_t i = 0; i < s->pend_n; i++)
			np[i] = s->pend[(s->pend_head + i) % s->pend_cap];
		free(s->pend);
		s->pend = np;
		s->pend_cap = ncap;
		s->pend_head = 0;
	}
	s->pend[(s->pend_head + s->pend_n) % s->pend_cap] = *p;
	s->pend_n++;
	return 0;
}

void stream_pend_pop_below(struct nv_stream *s, uint64_t end_seq)
{
	NV_ASSERT_LOCKED(&s->lock);
	while (s->pend_n) {
		const struct stream_pend *p = &s->pend[s->pend_head];

		if (p->first_seq + p->nrec > end_seq)
			break;
		s->pend_head = (s->pend_head + 1) % s->pend_cap;
		s->pend_n--;
	}
}

/* The two positions a run covers: its records and its body bytes. */
enum pend_key { PEND_SEQ, PEND_BYTE };

static const struct stream_pend *pend_at(const struct nv_stream *s, uint32_t i)
{
	return &s->pend[(s->pend_head + i) % s->pend_cap];
}

/*
 * Binary search over the ring (seq order, invariant 2; byte order
 * follows) for the last run starting at or below pos in key k; 0 and
 * *out when that run also covers pos, else -ENOENT.  Caller holds
 * s->lock.
 */
static int pend_find(const struct nv_stream *s, enum pend_key k, uint64_t pos,
		     struct stream_pend *out)
{
	uint32_t lo = 0, hi = s->pend_n;
	const struct stream_pend *p;

	NV_ASSERT_LOCKED((pthread_mutex_t *)&s->lock);
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		p = pend_at(s, mid);
		if ((k == PEND_SEQ ? p->first_seq : p->first_byte) <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	p = pend_at(s, lo - 1);
	if (k == PEND_SEQ ? pos >= p->first_seq + p->nrec : pos >= p->first_byte + p->nbytes)
		return -ENOENT;
	*out = *p;
	return 0;
}

int stream_pend_find_byte(const struct nv_stream *s, uint64_t byte, struct stream_pend *out)
{
	return pend_find(s, PEND_BYTE, byte, out);
}

int stream_pend_find_seq(const struct nv_stream *s, uint64_t seq, struct stream_pend *out)
{
	return pend_find(s, PEND_SEQ, seq, out);
}

/* ------------------------------------------------------------ loading */

/* stream_load() once: 0, 1 (stale: load again), -errno. */
static int load_once(struct stream_table *t, struct kv *kv, const struct meta_stream *ms,
		     struct nv_stream **out)
{
	uint64_t removals = stream_table_removals(t);
	struct nv_stream *s = stream_table_find(t, ms->id);
	struct meta_ref r;
	uint64_t end_seq = 0, end_byte = 0, sseq, sbyte, max_ts = 0;
	int rc;

	if (s) {
		*out = s;
		return 0;
	}
	meta_ref_init(&r);
	rc = meta_ref_last(kv, ms->id, &r);
	if (rc == 0) {
		end_seq = r.end_seq;
		end_byte = r.end_byte;
		max_ts = r.max_ts; /* read before meta_ref_clear() zeroes r */
	} else if (rc == -ENOENT) {
		/* No rows: empty, or trimmed to the end (its rows reclaimed). */
		end_seq = ms->trim_seq;
		end_byte = ms->trim_byte;
	} else {
		meta_ref_clear(&r);
		nv_log(NV_ERR, NV_SUB_MAIN, "stream %s/%s (%llu): reading its refs failed: %s",
		       ms->bucket, ms->name, (unsigned long long)ms->id, strerror(-rc));
		return rc == -EBADMSG ? -EIO : rc;
	}
	meta_ref_clear(&r);
	rc = meta_ref_settled_end(kv, ms->id, ms->trim_seq, &sseq, &sbyte);
	if (rc)
		return rc == -EBADMSG ? -EIO : rc;
	s = stream_alloc();
	if (!s)
		return -ENOMEM;
	atomic_store(&s->settled_seq, sseq);
	atomic_store(&s->settled_byte, sbyte);
	s->id = ms->id;
	snprintf(s->bucket, sizeof(s->bucket), "%s", ms->bucket);
	snprintf(s->name, sizeof(s->name), "%s", ms->name);
	s->created_ns = ms->created_ns;
	s->cls = ms->cls;
	s->deleted = ms->deleted_ns != 0;
	s->next_seq = end_seq;
	s->next_byte = end_byte;
	s->open_flight_gen = UINT64_MAX;
	atomic_store(&s->acked_seq, end_seq);
	atomic_store(&s->acked_byte, end_byte);
	atomic_store(&s->frontier_seq, end_seq);
	atomic_store(&s->frontier_byte, end_byte);
	atomic_store(&s->trim_seq, ms->trim_seq);
	atomic_store(&s->trim_byte, ms->trim_byte);
	atomic_store(&s->uid, ms->own.uid);
	atomic_store(&s->gid, ms->own.gid);
	atomic_store(&s->mode, ms->own.mode);
	atomic_store(&s->durable, ms->durable);
	/* mtime: the newest record's timestamp (the last ref's max_ts, a
	 * catalog row's too after settlement), the creation time while no
	 * record exists; appends continue from it (timestamps never
	 * decrease within a stream, meta/refs.h). */
	atomic_store(&s->mtime_ns, max_ts ? max_ts : ms->created_ns);
	s->last_ts = max_ts;
	/* Another load of this stream may have come, appended, been
	 * absorbed and gone while we read its refs: then ours are stale
	 * (an append would reuse a committed offset), read them again. */
	s = stream_table_insert_since(t, s, removals);
	if (s == STREAM_TABLE_STALE)
		return 1;
	if (!s)
		return -ENOMEM;
	*out = s;
	return 0;
}

int stream_load(struct stream_table *t, struct kv *kv, const struct meta_stream *ms,
		struct nv_stream **out)
{
	int rc;

	/* Each retry follows a removal from the table: progress. */
	while ((rc = load_once(t, kv, ms, out)) == 1)
		;
	return rc;
}

int stream_reload(struct kv *kv, struct nv_stream *s)
{
	struct meta_stream ms;
	struct meta_ref r;
	uint64_t end_seq, end_byte, sseq, sbyte, max_ts = 0;
	int rc = meta_stream_get(kv, s->id, &ms, NULL);

	if (rc)
		return rc == -EBADMSG ? -EIO : rc;
	end_seq = ms.trim_seq;
	end_byte = ms.trim_byte;
	meta_ref_init(&r);
	rc = meta_ref_last(kv, s->id, &r);
	if (rc == 0) {
		end_seq = r.end_seq;
		end_byte = r.end_byte;
		max_ts = r.max_ts;
	}
	meta_ref_clear(&r);
	if (rc && rc != -ENOENT)
		return rc == -EBADMSG ? -EIO : rc;
	rc = meta_ref_settled_end(kv, s->id, ms.trim_seq, &sseq, &sbyte);
	if (rc)
		return rc == -EBADMSG ? -EIO : rc;
	s->next_seq = end_seq;
	s->next_byte = end_byte;
	s->open_flight_gen = UINT64_MAX;
	if (max_ts > s->last_ts)
		s->last_ts = max_ts;
	pthread_mutex_lock(&s->lock);
	atomic_store(&s->acked_seq, end_seq);
	atomic_store(&s->acked_byte, end_byte);
	atomic_store(&s->frontier_seq, end_seq);
	atomic_store(&s->frontier_byte, end_byte);
	atomic_store(&s->trim_seq, ms.trim_seq);
	atomic_store(&s->trim_byte, ms.trim_byte);
	atomic_store(&s->settled_seq, sseq);
	atomic_store(&s->settled_byte, sbyte);
	s->deleted = ms.deleted_ns != 0;
	stream_pend_pop_below(s, UINT64_MAX);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

bool stream_catch_up(struct nv_stream *s, uint64_t end_seq, uint64_t end_byte,
		     uint64_t max_ts)
{
	bool grew = false;

	if (end_seq > s->next_seq)
		s->next_seq = end_seq;
	if (end_byte > atomic_load(&s->next_byte))
		atomic_store(&s->next_byte, end_byte);
	if (max_ts > s->last_ts)
		s->last_ts = max_ts;
	pthread_mutex_lock(&s->lock);
	/* acked first, then the frontier: frontier <= acked at every load. */
	if (end_byte > atomic_load(&s->acked_byte)) {
		atomic_store(&s->acked_seq, end_seq);
		atomic_store(&s->acked_byte, end_byte);
		grew = true;
	}
	if (end_byte > atomic_load(&s->frontier_byte)) {
		atomic_store(&s->frontier_seq, end_seq);
		atomic_store(&s->frontier_byte, end_byte);
		stream_pend_pop_below(s, end_seq);
	}
	if (grew && max_ts > atomic_load(&s->mtime_ns))
		atomic_store(&s->mtime_ns, max_ts);
	pthread_mutex_unlock(&s->lock);
	return grew;
}

/* v capped at cap (a position never past the end it may not pass). */
static uint64_t at_most(uint64_t v, uint64_t cap)
{
	return v < cap ? v : cap;
}

bool stream_trim_up(struct nv_stream *s, uint64_t seq, uint64_t byte, uint64_t *old_byte)
{
	uint64_t cur_seq, cur_byte;
	bool moved = false;

	pthread_mutex_lock(&s->lock);
	cur_seq = atomic_load(&s->trim_seq);
	cur_byte = atomic_load(&s->trim_byte);
	/* Each field on its own: (seq, byte) and the current trim are both
	 * a record and its first byte, and so is the acked end, so the
	 * greater of each pair is one too. */
	seq = at_most(seq, atomic_load(&s->acked_seq));
	byte = at_most(byte, stream_acked_byte(s));
	if (seq > cur_seq) {
		atomic_store(&s->trim_seq, seq);
		moved = true;
	}
	if (byte > cur_byte) {
		atomic_store(&s->trim_byte, byte);
		moved = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (old_byte)
		*old_byte = cur_byte;
	return moved;
}

bool stream_settled_up(struct nv_stream *s, uint64_t seq, uint64_t byte)
{
	bool moved = false;

	pthread_mutex_lock(&s->lock);
	if (seq > atomic_load(&s->settled_seq)) {
		atomic_store(&s->settled_seq, seq);
		atomic_store(&s->settled_byte, byte);
		moved = true;
	}
	pthread_mutex_unlock(&s->lock);
	return moved;
}
