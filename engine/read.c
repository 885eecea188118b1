/*
 * read.c - see read.h.
 *
 * Threads: callers of read_page() (FUSE workers) and the prefetch pool.
 * re->lock guards the prefetch queue; rd->lock guards a reader's
 * sequential state and its ref window (swapped whole, freed unlocked).  Neither is held during I/O.  Lock order: rd->lock,
 * then re->lock; a stream lock is taken alone (flight index lookups).
 */
#include "config.h"
#include "engine/read.h"
#include "engine/objread.h"
#include "engine/bundle.h"
#include "engine/chain.h"
#include "engine/chunkfetch.h"
#include "engine/chunkrec.h"
#include "engine/rcache.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "src/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define PF_QUEUE_MAX 256
#define WIN_REFS 32    /* refs a reader's ref window holds at most */
#define WIN_SLOTS 4096 /* ... and slots (catalog: objects), bounding its memory */

/* A reader's ref window: the refs at and after its last cold position,
 * read with one ranged scan (meta_ref_window_byte()), so a sequential
 * reader of many small refs asks the metastore once per window, never
 * once per page.  Refs are immutable (meta/refs.h invariant 2) except
 * that settlement replaces span refs by catalog rows and then deletes the
 * slots: a window's ref may name an object that is gone (-ESTALE below),
 * and the read then asks the metastore again. */
struct ref_win {
	struct meta_ref refs[WIN_REFS];
	size_t n;
	uint64_t trim_seq, trim_byte; /* row_trim() when it was read */
};

struct pf_job {
	struct reader *rd; /* a reference */
	uint64_t pos;
	bool cont;        /* continues a slot or object another job started */
	bool next_queued; /* a job for the slot or object after it is queued */
	struct pf_job *next;
};

struct read_engine {
	struct read_cfg cfg;
	char star[META_STAR_MAX + 1];
	struct rcache *cache;
	struct chunkfetch cf;         /* over cache and cfg's store */
	pthread_t *threads;
	unsigned nthreads;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct pf_job *qhead, *qtail; /* lock */
	unsigned qlen;                /* lock */
	bool stop;                    /* lock */
};

struct reader {
	struct read_engine *re;
	struct nv_stream *stream; /* a reference */
	atomic_int refs;          /* the handle + queued prefetch jobs */
	pthread_mutex_t lock;
	uint64_t last_end;        /* lock: where the previous page ended */
	uint64_t ra_end;          /* lock: read-ahead has covered [.., ra_end) */
	uint64_t chunk_bytes;     /* lock: size of the last cold chunk seen */
	unsigned ra_jobs;         /* lock: prefetch jobs queued or running */
	bool closed;              /* lock: handle released; stop prefetching */
	struct ref_win *win;      /* lock: cold refs read ahead, or NULL */
	struct ref_win *prev_win; /* lock: the one before (prefetch jobs ahead
				   * of the reader read the next one) */
};

/* Where a page's bytes are in object storage. */
struct loc {
	char key[META_SETTLED_KEY_MAX];
	uint64_t footer_off;
	uint32_t footer_len;
	enum read_tier tier;
	uint64_t next_byte; /* cold: where the next slot or object starts (or the
			     * ref ends); 0 unknown */
	uint64_t share;     /* cold: the stream's bytes in the object; 0 unknown */
	bool cached;        /* from a reader's ref window: its object may be gone */
	uint64_t trim_seq, trim_byte; /* cold: row_trim() with the ref (0: none) */
};

const char *read_tier_name(enum read_tier t)
{
	static const char *const names[] = { "eof", "trim", "hot", "flight", "cold" };

	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

/* ------------------------------------------------------------ locating */

/* The object holding pos inside ref r (cold). */
static void loc_from_ref(const struct meta_ref *r, bool by_seq, uint64_t pos, struct loc *l)
{
	enum meta_ref_key key = by_seq ? META_REF_BY_SEQ : META_REF_BY_BYTE;

	if (r->kind == META_REF_CATALOG) {
		/* A settled object: the same read shape. */
		const struct meta_ref_obj *o = &r->objs[meta_ref_obj_find(r, key, pos)];

		meta_settled_key(l->key, sizeof(l->key), r->bucket, r->stream_id, o->epoch,
				 o->first_seq, o->rev);
		l->footer_off = o->footer_off;
		l->footer_len = o->footer_len;
		l->next_byte = o + 1 < r->objs + r->nobjs ? o[1].first_byte : r->end_byte;
		l->share = l->next_byte - o->first_byte;
	} else {
		uint32_t i = meta_ref_slot_find(r, key, pos);

		chain_slot_key(l->key, sizeof(l->key), r->cls, r->star, r->epoch,
			       r->slots[i].slot);
		l->footer_off = r->slots[i].footer_off;
		l->footer_len = r->slots[i].footer_len;
		l->next_byte = i + 1 < r->nslots ? r->slots[i + 1].first_byte : r->end_byte;
		l->share = l->next_byte - r->slots[i].first_byte;
	}
	l->tier = READ_COLD;
	l->cached = false;
}

static void win_free(struct ref_win *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		meta_ref_clear(&w->refs[i]);
	free(w);
}

/* The ref of w holding stream byte pos, as a location; false when w does
 * not hold pos. */
static bool win_find(const struct ref_win *w, uint64_t pos, struct loc *l)
{
	size_t lo = 0, hi;

	if (!w || !w->n || pos < w->refs[0].first_byte || pos >= w->refs[w->n - 1].end_byte)
		return false;
	hi = w->n;
	while (hi - lo > 1) { /* the last ref starting at or before pos */
		size_t mid = lo + (hi - lo) / 2;

		if (w->refs[mid].first_byte <= pos)
			lo = mid;
		else
			hi = mid;
	}
	while (lo + 1 < w->n && w->refs[lo].end_byte <= pos)
		lo++; /* refs of empty records share their first byte */
	loc_from_ref(&w->refs[lo], false, pos, l);
	l->cached = true;
	l->trim_seq = w->trim_seq;
	l->trim_byte = w->trim_byte;
	return true;
}

static void reader_drop_win(struct reader *rd)
{
	struct ref_win *w, *old;

	if (!rd)
		return;
	pthread_mutex_lock(&rd->lock);
	w = rd->win;
	old = rd->prev_win;
	rd->win = rd->prev_win = NULL;
	pthread_mutex_unlock(&rd->lock);
	win_free(w);
	win_free(old);
}

/*
 * The trim point a cold read of s must respect beyond this star's view
 * (read.h invariant 6): on a metastore other stars share, a stream this
 * star does not lead may have been trimmed by another star, and the
 * settled object holding that trim point still has the bytes below it;
 * so the row's trim point is read with every ref (or ref window) read
 * for such a stream.  0 and (0, 0) when this star leads s or no other
 * star can trim it (the view is the row then); a kv error.
 */
static int row_trim(struct read_engine *re, struct nv_stream *s, uint64_t *seq, uint64_t *byte)
{
	struct meta_stream ms;
	int rc;

	*seq = *byte = 0;
	if (!re->cfg.shared || atomic_load(&s->lease_gen))
		return 0;
	rc = meta_stream_get(re->cfg.kv, s->id, &ms, NULL);
	if (rc == -ENOENT)
		return 0; /* deleted: the view's own end stands */
	if (rc)
		return rc == -EBADMSG ? -EIO : rc;
	*seq = ms.trim_seq;
	*byte = ms.trim_byte;
	return 0;
}

/* Cold, by byte, for a reader: from its ref windows, else from a new one
 * read at pos (the older of the two is dropped). */
static int locate_win(struct read_engine *re, struct nv_stream *s, struct reader *rd,
		      uint64_t pos, struct loc *l)
{
	struct ref_win *w, *old;
	unsigned calls = 0;
	bool found;
	int rc;

	pthread_mutex_lock(&rd->lock);
	found = win_find(rd->win, pos, l) || win_find(rd->prev_win, pos, l);
	pthread_mutex_unlock(&rd->lock);
	if (found)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (size_t i = 0; i < WIN_REFS; i++)
		meta_ref_init(&w->refs[i]);
	rc = meta_ref_window_byte(re->cfg.kv, s->id, pos, w->refs, WIN_REFS, WIN_SLOTS, &w->n,
				  &calls);
	NV_STAT_ADD(re->cfg.stats, ref_lookups, calls);
	if (!rc)
		rc = row_trim(re, s, &w->trim_seq, &w->trim_byte);
	if (!rc && !win_find(w, pos, l))
		rc = -ENOENT; /* trimmed here since (missing_ref()), or not what refs.h promises */
	if (rc) {
		win_free(w);
		if (rc == -EBADMSG)
			nv_log(NV_ERR, NV_SUB_READ, "stream %llu: the ref window at byte %llu: %s",
			       (unsigned long long)s->id, (unsigned long long)pos, strerror(-rc));
		return rc == -EBADMSG ? -EIO : rc;
	}
	pthread_mutex_lock(&rd->lock);
	old = rd->prev_win;
	rd->prev_win = rd->win;
	rd->win = w;
	pthread_mutex_unlock(&rd->lock);
	win_free(old);
	return 0;
}

/* Where the bytes at stream position pos are: a byte offset, or a record
 * seq when by_seq.  A reader's cold positions by byte come from its ref
 * window (rd may be NULL).  -ENOENT (not logged): no ref holds pos below
 * the frontier (missing_ref() tells why). */
static int locate_at(struct read_engine *re, struct nv_stream *s, struct reader *rd,
		     bool by_seq, uint64_t pos, struct loc *l)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		uint64_t frontier = by_seq ? atomic_load(&s->frontier_seq)
					   : atomic_load(&s->frontier_byte);

		if (pos >= frontier) {
			struct stream_pend p;
			int rc;

			pthread_mutex_lock(&s->lock);
			rc = by_seq ? stream_pend_find_seq(s, pos, &p)
				    : stream_pend_find_byte(s, pos, &p);
			pthread_mutex_unlock(&s->lock);
			if (rc == 0) {
				chain_slot_key(l->key, sizeof(l->key), p.cls, re->star, p.epoch,
					       p.slot);
				l->footer_off = p.footer_off;
				l->footer_len = p.footer_len;
				l->tier = READ_FLIGHT;
				l->next_byte = l->share = 0;
				l->cached = false;
				l->trim_seq = l->trim_byte = 0;
				return 0;
			}
			/* Absorbed between the two loads: the frontier moved. */
			if ((by_seq ? atomic_load(&s->frontier_seq) : atomic_load(&s->frontier_byte)) >
			    pos)
				continue;
			nv_log(NV_ERR, NV_SUB_READ,
			       "stream %llu: %s %llu is acked but neither cached nor in the "
			       "flight index", (unsigned long long)s->id, by_seq ? "seq" : "byte",
			       (unsigned long long)pos);
			return -EIO;
		} else if (rd && !by_seq) {
			return locate_win(re, s, rd, pos, l);
		} else {
			struct meta_ref r;
			int rc;

			meta_ref_init(&r);
			NV_STAT_ADD(re->cfg.stats, ref_lookups, 1);
			rc = by_seq ? meta_ref_floor_seq(re->cfg.kv, s->id, pos, &r)
				    : meta_ref_floor_byte(re->cfg.kv, s->id, pos, &r);
			if (rc == 0 && (by_seq ? (pos < r.first_seq || pos >= r.end_seq)
					       : (pos < r.first_byte || pos >= r.end_byte)))
				rc = -ENOENT;
			if (rc) {
				meta_ref_clear(&r);
				if (rc == -EBADMSG)
					nv_log(NV_ERR, NV_SUB_READ, "stream %llu: the ref at %s %llu: %s",
					       (unsigned long long)s->id, by_seq ? "seq" : "byte",
					       (unsigned long long)pos, strerror(-rc));
				return rc == -EBADMSG ? -EIO : rc;
			}
			loc_from_ref(&r, by_seq, pos, l);
			meta_ref_clear(&r);
			return row_trim(re, s, &l->trim_seq, &l->trim_byte);
		}
	}
	return -EAGAIN;
}

static int locate(struct read_engine *re, struct nv_stream *s, struct reader *rd, uint64_t off,
		  struct loc *l)
{
	return locate_at(re, s, rd, false, off, l);
}

/*
 * No ref holds pos (a byte, or a seq when by_seq) below the frontier.
 * Refs are reclaimed only below a trim point (engine/trim.c): one this
 * star's view has not learned, another star's (read.h invariant 6).  1
 * and *trim_byte (the row's) when pos lies below the row's trim point;
 * -EIO (logged) when not, as refs.h promises a ref there; a kv error.
 */
static int missing_ref(struct read_engine *re, struct nv_stream *s, bool by_seq, uint64_t pos,
		       uint64_t *trim_byte)
{
	const char *k = by_seq ? "seq" : "byte";
	struct meta_stream ms;
	int rc = meta_stream_get(re->cfg.kv, s->id, &ms, NULL);

	if (rc && rc != -ENOENT)
		return rc == -EBADMSG ? -EIO : rc;
	if (rc == 0 && (by_seq ? pos < ms.trim_seq : pos < ms.trim_byte)) {
		nv_log(NV_DEBUG, NV_SUB_READ, "stream %s/%s: %s %llu is below the trim point "
		       "another star set (byte %llu)", s->bucket, s->name, k,
		       (unsigned long long)pos, (unsigned long long)ms.trim_byte);
		*trim_byte = ms.trim_byte;
		return 1;
	}
	nv_log(NV_ERR, NV_SUB_READ, "stream %s/%s (%llu): no ref covers %s %llu below the frontier",
	       s->bucket, s->name, (unsigned long long)s->id, k, (unsigned long long)pos);
	return -EIO;
}

/* read_page()'s zeros from off up to the trim point trim (len: capped at acked). */
static int hole(uint64_t trim, uint64_t off, void *dst, size_t len, size_t *got,
		enum read_tier *tier)
{
	size_t n = trim - off < len ? (size_t)(trim - off) : len;

	memset(dst, 0, n);
	*got = n;
	*tier = READ_TRIM;
	return 0;
}

/* ------------------------------------------------------------ fetching */

/* Entry of l's footer holding stream byte (or seq) off, and its decoded
 * chunk (engine/chunkfetch.h). */
static int get_chunk_at(struct read_engine *re, const struct loc *l, uint64_t stream,
			bool by_seq, uint64_t off, struct bundle_entry *ent, struct rc_blob **chunk,
			bool *hit)
{
	struct cf_obj o = { .key = l->key, .footer_off = l->footer_off,
			    .footer_len = l->footer_len, .share = l->share, .cached = l->cached };

	return chunkfetch_get(&re->cf, &o, stream, by_seq, off, ent, chunk, hit);
}

static int get_chunk(struct read_engine *re, const struct loc *l, uint64_t stream,
		     uint64_t off, struct bundle_entry *ent, struct rc_blob **chunk, bool *hit)
{
	return get_chunk_at(re, l, stream, false, off, ent, chunk, hit);
}

/* ----------------------------------------------------------- prefetch */

static void reader_unref(struct reader *rd)
{
	if (atomic_fetch_sub(&rd->refs, 1) == 1) {
		stream_put(rd->stream);
		win_free(rd->win);
		win_free(rd->prev_win);
		pthread_mutex_destroy(&rd->lock);
		free(rd);
	}
}

/*
 * Read-ahead.  A job warms the chunk at one stream position into the
 * read cache.  Jobs fan out: one that finds its bytes in a slot (or
 * settled object) whose successor starts at a known byte queues a job
 * there before its own GETs, so a stream of many small slots has up to
 * prefetch_threads footers and chunks in flight at once; a job inside a
 * large slot or object continues with the next chunk after its own (a
 * continuation, which never fans out, so no position is queued twice).
 * Nothing is queued past the reader's position plus the read-ahead
 * window (readahead chunks of the size the reader last met).
 */
static bool enqueue(struct read_engine *re, struct reader *rd, uint64_t pos, bool cont,
		    bool next_queued)
{
	struct pf_job *j;

	pthread_mutex_lock(&rd->lock);
	if (rd->closed) {
		pthread_mutex_unlock(&rd->lock);
		return false;
	}
	rd->ra_jobs++;
	pthread_mutex_unlock(&rd->lock);
	pthread_mutex_lock(&re->lock);
	if (re->stop || re->qlen >= PF_QUEUE_MAX || !re->nthreads ||
	    !(j = calloc(1, sizeof(*j)))) {
		pthread_mutex_unlock(&re->lock);
		pthread_mutex_lock(&rd->lock);
		rd->ra_jobs--;
		pthread_mutex_unlock(&rd->lock);
		return false;
	}
	atomic_fetch_add(&rd->refs, 1);
	j->rd = rd;
	j->pos = pos;
	j->cont = cont;
	j->next_queued = next_queued;
	if (re->qtail)
		re->qtail->next = j;
	else
		re->qhead = j;
	re->qtail = j;
	re->qlen++;
	pthread_cond_signal(&re->cond);
	pthread_mutex_unlock(&re->lock);
	return true;
}

/* The end of the window read-ahead may reach for rd (lock held). */
static uint64_t ra_limit(const struct read_engine *re, const struct reader *rd)
{
	return rd->last_end + (uint64_t)re->cfg.readahead * (rd->chunk_bytes ? rd->chunk_bytes : 1);
}

static void run_job(struct read_engine *re, struct pf_job *j)
{
	struct reader *rd = j->rd;
	struct nv_stream *s = rd->stream;
	struct bundle_entry ent;
	struct rc_blob *b;
	struct loc l;
	bool closed, hit, next_queued = j->next_queued;
	uint64_t end, limit;
	uint8_t probe;

	pthread_mutex_lock(&rd->lock);
	closed = rd->closed;
	limit = ra_limit(re, rd);
	pthread_mutex_unlock(&rd->lock);
	if (closed || j->pos >= stream_acked_byte(s) ||
	    (re->cfg.tc && tailcache_read(re->cfg.tc, s->id, j->pos, &probe, 1, 1)))
		goto done; /* end of stream, or hot from here on */
	if (locate(re, s, rd, j->pos, &l))
		goto done;
	if (!next_queued && l.tier == READ_COLD && l.next_byte > j->pos && l.next_byte < limit)
		next_queued = enqueue(re, rd, l.next_byte, false, false); /* in parallel */
	if (get_chunk(re, &l, s->id, j->pos, &ent, &b, &hit)) {
		if (l.cached)
			reader_drop_win(rd); /* the reader's next page reads it anew */
		goto done;
	}
	rc_blob_unref(b);
	if (!hit)
		NV_STAT_ADD(re->cfg.stats, prefetches, 1);
	end = ent.first_byte + bundle_entry_body_bytes(&ent);
	pthread_mutex_lock(&rd->lock);
	if (end > rd->ra_end)
		rd->ra_end = end;
	limit = ra_limit(re, rd);
	pthread_mutex_unlock(&rd->lock);
	if (end < limit) {
		if (l.tier == READ_COLD && l.next_byte && end < l.next_byte)
			enqueue(re, rd, end, true, next_queued); /* this slot's next chunk */
		else if (!next_queued || l.tier != READ_COLD || end != l.next_byte)
			enqueue(re, rd, end, false, false); /* the next one, not yet queued */
	}
done:
	pthread_mutex_lock(&rd->lock);
	rd->ra_jobs--;
	pthread_mutex_unlock(&rd->lock);
	reader_unref(rd);
	free(j);
}

static void *pf_main(void *arg)
{
	struct read_engine *re = arg;

	pthread_mutex_lock(&re->lock);
	for (;;) {
		struct pf_job *j;

		while (!re->stop && !re->qhead)
			pthread_cond_wait(&re->cond, &re->lock);
		if (re->stop)
			break;
		j = re->qhead;
		re->qhead = j->next;
		if (!re->qhead)
			re->qtail = NULL;
		re->qlen--;
		pthread_mutex_unlock(&re->lock);
		run_job(re, j);
		pthread_mutex_lock(&re->lock);
	}
	pthread_mutex_unlock(&re->lock);
	return NULL;
}

/* After a cold page [off, chunk_end) for a reader: start a read-ahead
 * chain when the reader is sequential and the covered window runs low. */
static void maybe_readahead(struct read_engine *re, struct reader *rd, uint64_t off,
			    uint64_t page_end, uint64_t chunk_end, uint64_t chunk_bytes)
{
	uint64_t window, start = 0;
	bool go = false;

	if (!rd || !re->cfg.readahead)
		return;
	pthread_mutex_lock(&rd->lock);
	if (off == rd->last_end || (off > rd->last_end && off - rd->last_end <= chunk_bytes)) {
		rd->chunk_bytes = chunk_bytes;
		window = (uint64_t)re->cfg.readahead * (chunk_bytes ? chunk_bytes : 1);
		if (rd->ra_jobs == 0 && rd->ra_end < off + window / 2) {
			start = rd->ra_end > chunk_end ? rd->ra_end : chunk_end;
			go = true;
		}
	}
	rd->last_end = page_end;
	pthread_mutex_unlock(&rd->lock);
	if (go)
		enqueue(re, rd, start, false, false);
}

/* ------------------------------------------------------------ read_page */

int read_page(struct read_engine *re, struct nv_stream *s, struct reader *rd, uint64_t off,
	      void *dst, size_t len, size_t *got, enum read_tier *tier)
{
	return read_page_sink(re, s, rd, off, dst, len, NULL, got, tier);
}

/* Hand len bytes of chunk b from off to sink (b's reference with them):
 * the bytes, or 0 when there is no room (or b does not hold off). */
static size_t sink_chunk(struct read_sink *sink, const struct bundle_entry *e,
			 struct rc_blob *b, uint64_t off, size_t len)
{
	size_t n;

	if (!sink || sink->npins == sink->maxpins)
		return 0;
	n = chunkrec_iov(e, b, off, len, READ_PAGE_RECORDS, sink->iov, &sink->niov,
			 sink->maxiov);
	if (n)
		sink->pins[sink->npins++] = b;
	return n;
}

int read_page_sink(struct read_engine *re, struct nv_stream *s, struct reader *rd,
		   uint64_t off, void *dst, size_t len, struct read_sink *sink, size_t *got,
		   enum read_tier *tier)
{
	uint64_t acked = stream_acked_byte(s);
	uint64_t trim = atomic_load(&s->trim_byte);
	struct bundle_entry ent;
	struct rc_blob *b;
	struct loc l;
	bool hit;
	size_t n;
	int rc;

	*got = 0;
	*tier = READ_EOF;
	if (off >= acked || len == 0)
		return 0;
	if (len > acked - off)
		len = (size_t)(acked - off);
	if (len > READ_PAGE_MAX)
		len = READ_PAGE_MAX;
	if (off < trim)
		return hole(trim, off, dst, len, got, tier);
	if (re->cfg.tc) {
		n = tailcache_read(re->cfg.tc, s->id, off, dst, len, READ_PAGE_RECORDS);
		if (n) {
			*got = n;
			*tier = READ_HOT;
			if (rd) {
				pthread_mutex_lock(&rd->lock);
				rd->last_end = off + n;
				pthread_mutex_unlock(&rd->lock);
			}
			return 0;
		}
	}
	rc = locate(re, s, rd, off, &l);
	if (!rc && off >= l.trim_byte)
		rc = get_chunk(re, &l, s->id, off, &ent, &b, &hit);
	if (rc == -ESTALE) {
		/* The window's ref is out of date: the metastore's own answer. */
		reader_drop_win(rd);
		rc = locate(re, s, NULL, off, &l);
		if (!rc && off >= l.trim_byte)
			rc = get_chunk(re, &l, s->id, off, &ent, &b, &hit);
	}
	/* Below another star's trim point the row has (read.h invariant 6). */
	if (!rc && off < l.trim_byte)
		return hole(l.trim_byte, off, dst, len, got, tier);
	/* No ref: below the row's trim point, zeros as below this star's. */
	if (rc == -ENOENT && (rc = missing_ref(re, s, false, off, &trim)) == 1)
		return hole(trim, off, dst, len, got, tier);
	if (rc)
		return rc;
	n = sink_chunk(sink, &ent, b, off, len); /* b's reference goes with the bytes */
	if (!n) {
		n = chunkrec_copy(&ent, b, off, dst, len, READ_PAGE_RECORDS);
		rc_blob_unref(b);
	}
	if (n == 0) {
		nv_log(NV_ERR, NV_SUB_READ, "%s: chunk at %llu does not hold stream %llu byte %llu",
		       l.key, (unsigned long long)ent.chunk_off, (unsigned long long)s->id,
		       (unsigned long long)off);
		NV_STAT_ADD(re->cfg.stats, corrupt_objects, 1);
		return -EIO;
	}
	if (hit)
		NV_STAT_ADD(re->cfg.stats, read_cache_hits, 1);
	NV_STAT_ADD(re->cfg.stats, cold_reads, 1);
	NV_STAT_ADD(re->cfg.stats, cold_read_bytes, n);
	*got = n;
	*tier = l.tier;
	maybe_readahead(re, rd, off, off + n, ent.first_byte + bundle_entry_body_bytes(&ent),
			bundle_entry_body_bytes(&ent));
	return 0;
}

int read_locate_record(struct read_engine *re, struct nv_stream *s, bool by_seq, uint64_t pos,
		       uint64_t *seq, uint64_t *byte)
{
	uint64_t aseq = atomic_load(&s->acked_seq), abyte = stream_acked_byte(s);
	struct bundle_entry e;
	struct rc_blob *b;
	struct loc l;
	uint32_t k;
	bool hit;
	int rc;

	if (by_seq ? pos > aseq : pos > abyte)
		return -EINVAL;
	if (by_seq ? pos == aseq : pos == abyte) {
		*seq = aseq;
		*byte = abyte;
		return 0;
	}
	rc = locate_at(re, s, NULL, by_seq, pos, &l);
	if (!rc && (by_seq ? pos < l.trim_seq : pos < l.trim_byte))
		return -ERANGE; /* below another star's trim point */
	if (rc == -ENOENT) {
		uint64_t trim;

		rc = missing_ref(re, s, by_seq, pos, &trim);
		return rc == 1 ? -ERANGE : rc;
	}
	if (!rc)
		rc = get_chunk_at(re, &l, s->id, by_seq, pos, &e, &b, &hit);
	if (rc)
		return rc;
	k = by_seq ? (uint32_t)(pos - e.first_seq) : chunkrec_for_byte(&e, b, pos);
	*seq = e.first_seq + k;
	*byte = chunkrec_byte(&e, b, k);
	rc_blob_unref(b);
	/* Below the trim point a record is gone, held in the tail or not. */
	return *seq < atomic_load(&s->trim_seq) ? -ERANGE : 0;
}

/* ------------------------------------------------------------ lifecycle */

struct reader *reader_new(struct read_engine *re, struct nv_stream *s)
{
	struct reader *rd = calloc(1, sizeof(*rd));

	if (!rd)
		return NULL;
	rd->re = re;
	stream_get(s);
	rd->stream = s;
	atomic_init(&rd->refs, 1);
	pthread_mutex_init(&rd->lock, NULL);
	rd->last_end = UINT64_MAX;
	return rd;
}

void reader_free(struct reader *rd)
{
	if (!rd)
		return;
	pthread_mutex_lock(&rd->lock);
	rd->closed = true;
	pthread_mutex_unlock(&rd->lock);
	reader_unref(rd);
}

int read_engine_new(const struct read_cfg *cfg, struct read_engine **out)
{
	struct read_engine *re = calloc(1, sizeof(*re));
	int rc = 0;

	if (!re)
		return -ENOMEM;
	re->cfg = *cfg;
	snprintf(re->star, sizeof(re->star), "%s", cfg->star);
	re->cfg.star = re->star;
	re->cache = rcache_new(cfg->cache_bytes);
	re->threads = calloc(cfg->prefetch_threads ? cfg->prefetch_threads : 1,
			     sizeof(*re->threads));
	if (!re->cache || !re->threads) {
		rcache_free(re->cache);
		free(re->threads);
		free(re);
		return -ENOMEM;
	}
	re->cf = (struct chunkfetch){ .store = cfg->store, .stats = cfg->stats,
				      .cache = re->cache, .whole_max = cfg->whole_max };
	pthread_mutex_init(&re->lock, NULL);
	pthread_cond_init(&re->cond, NULL);
	for (; re->nthreads < cfg->prefetch_threads; re->nthreads++) {
		rc = -pthread_create(&re->threads[re->nthreads], NULL, pf_main, re);
		if (rc)
			break;
	}
	if (rc && re->nthreads == 0)
		nv_log(NV_WARN, NV_SUB_READ, "no prefetch threads (%s): read-ahead off",
		       strerror(-rc));
	*out = re;
	return 0;
}

void read_engine_free(struct read_engine *re)
{
	if (!re)
		return;
	pthread_mutex_lock(&re->lock);
	re->stop = true;
	pthread_cond_broadcast(&re->cond);
	pthread_mutex_unlock(&re->lock);
	for (unsigned i = 0; i < re->nthreads; i++)
		pthread_join(re->threads[i], NULL);
	while (re->qhead) {
		struct pf_job *j = re->qhead;

		re->qhead = j->next;
		reader_unref(j->rd);
		free(j);
	}
	rcache_free(re->cache);
	free(re->threads);
	pthread_cond_destroy(&re->cond);
	pthread_mutex_destroy(&re->lock);
	free(re);
}

uint64_t read_cache_bytes(struct read_engine *re)
{
	return rcache_bytes(re->cache);
}
