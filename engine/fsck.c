/*
 * fsck.c - see fsck.h.
 *
 * Memory: one entry per (slot, stream) pair below the checkpoints, to
 * match footers against refs; everything else is streamed.  Pairs are
 * found through a u64 map (src/base/u64map.h) from a digest of the whole
 * pair to the first pair with that digest; pairs whose digests collide
 * are chained behind it through hnext.
 */
#include "config.h"
#include "engine/fsck.h"
#include "engine/bundle.h"
#include "engine/chain.h"
#include "engine/objread.h"
#include "meta/chains.h"
#include "meta/cursors.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "meta/streams.h"
#include "src/base/u64map.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pair {
	uint64_t epoch, slot, stream;
	uint8_t cls;
	uint8_t covered;
	uint8_t marked; /* the slot lies inside a batch marker of its chain */
	struct pair *hnext; /* the next pair with the same digest */
	char star[META_STAR_MAX + 1];
	uint64_t first_seq, end_seq; /* the stream's records in the slot */
	uint64_t first_byte, end_byte; /* ... and their stream bytes */
};

/* A batch marker's slot range [a, b), per chain (check_chains()). */
struct span {
	uint64_t a, b;
};

struct objkey {
	char *key;
	bool named;
};

struct fsck {
	struct objkey *objs; /* every streams/ object in the store, sorted */
	size_t nobjs, objcap;
	struct store *store;
	struct kv *kv;
	const struct fsck_opts *o;
	struct fsck_summary *sum;
	struct meta_chain *chains;
	size_t nchains, cap;
	struct u64map *pairs; /* digest -> first struct pair (owned, as the chain) */
	uint64_t *present;    /* the chain being checked: its slots in the store, ascending */
	size_t npresent, prescap;
	struct span *marks;   /* ... and its markers' slot ranges, ascending */
	size_t nmarks, markcap;
};

/* Initial size of the pair map (it grows by doubling). */
#define FSCK_PAIRS_HINT 512

static void say(struct fsck *f, bool violation, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(struct fsck *f, bool violation, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (violation)
		f->sum->violations++;
	else
		f->sum->notes++;
	if (f->o->report)
		f->o->report(f->o->arg, violation, line);
}

/* "bucket/name" of a stream, for the findings (its row may be gone). */
static void stream_label(struct fsck *f, uint64_t id, char *buf, size_t cap)
{
	struct meta_stream s;

	if (meta_stream_get(f->kv, id, &s, NULL) == 0)
		snprintf(buf, cap, "%s/%s", s.bucket, s.name);
	else
		snprintf(buf, cap, "stream %" PRIu64 " (no row)", id);
}

static void progress(struct fsck *f, const char *phase, uint64_t done, uint64_t total)
{
	if (f->o->progress)
		f->o->progress(f->o->arg, phase, done, total);
}

/* Append v to a growing array of n (capacity *cap) elements of size sz. */
static int grow_push(void **arr, size_t *n, size_t *cap, size_t sz, const void *v)
{
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		void *p = realloc(*arr, ncap * sz);

		if (!p)
			return -ENOMEM;
		*arr = p;
		*cap = ncap;
	}
	memcpy((char *)*arr + *n * sz, v, sz);
	(*n)++;
	return 0;
}

static bool slot_present(const struct fsck *f, uint64_t slot)
{
	size_t lo = 0, hi = f->npresent;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->present[mid] < slot)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->npresent && f->present[lo] == slot;
}

static bool slot_marked(const struct fsck *f, uint64_t slot)
{
	for (size_t i = 0; i < f->nmarks; i++)
		if (slot >= f->marks[i].a && slot < f->marks[i].b)
			return true;
	return false;
}

/* ------------------------------------------------------------ pair set */

static uint64_t pair_hash(unsigned cls, const char *star, uint64_t epoch, uint64_t slot,
			  uint64_t stream)
{
	uint64_t h = 1469598103934665603ULL ^ cls;

	for (const char *p = star; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h ^= epoch * 0x9e3779b97f4a7c15ULL;
	h ^= slot * 0xc2b2ae3d27d4eb4fULL;
	h ^= stream * 0x165667b19e3779f9ULL;
	return h ^ (h >> 31);
}

/* The pair, or with add a new one when missing.  NULL when absent (or,
 * with add, on ENOMEM). */
static struct pair *pair_find(struct fsck *f, unsigned cls, const char *star, uint64_t epoch,
			      uint64_t slot, uint64_t stream, bool add)
{
	uint64_t h = pair_hash(cls, star, epoch, slot, stream);
	struct pair *head, *p;

	if (!f->pairs) {
		if (!add)
			return NULL;
		f->pairs = u64map_new(FSCK_PAIRS_HINT);
		if (!f->pairs)
			return NULL;
	}
	head = u64map_get(f->pairs, h);
	for (p = head; p; p = p->hnext)
		if (p->cls == cls && p->epoch == epoch && p->slot == slot && p->stream == stream &&
		    !strcmp(p->star, star))
			return p;
	if (!add)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->cls = (uint8_t)cls;
	snprintf(p->star, sizeof(p->star), "%s", star);
	p->epoch = epoch;
	p->slot = slot;
	p->stream = stream;
	p->hnext = head;
	if (u64map_put(f->pairs, h, p)) {
		free(p);
		return NULL;
	}
	return p;
}

/* Free every pair and the map. */
static void pairs_free(struct fsck *f)
{
	size_t cur = 0;
	void *v;

	if (!f->pairs)
		return;
	while (u64map_next(f->pairs, &cur, NULL, &v)) {
		for (struct pair *p = v, *n; p; p = n) {
			n = p->hnext;
			free(p);
		}
	}
	u64map_free(f->pairs);
	f->pairs = NULL;
}

/* ------------------------------------------------------------ objects */

static int obj_collect(void *arg, const char *key, uint64_t size)
{
	struct fsck *f = arg;

	if (f->nobjs == f->objcap) {
		size_t nc = f->objcap ? f->objcap * 2 : 256;
		struct objkey *p = realloc(f->objs, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		f->objs = p;
		f->objcap = nc;
	}
	f->objs[f->nobjs].key = strdup(key);
	if (!f->objs[f->nobjs].key)
		return -ENOMEM;
	f->objs[f->nobjs++].named = false;
	return 0;
}

/* Mark a settled object as named by the metastore; false when the store
 * does not hold it.  Keys come sorted from store_list(). */
static bool pair_find_obj(struct fsck *f, const char *key)
{
	size_t lo = 0, hi = f->nobjs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(f->objs[mid].key, key);

		if (c == 0) {
			f->objs[mid].named = true;
			return true;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static int gc_named(void *arg, uint64_t due_ns, const char *key)
{
	pair_find_obj(arg, key);
	return 0;
}

/*
 * An object no row names is a settle's output awaiting its commit (a
 * crash between publish and the CAS; the re-run adopts the object at the
 * same derived key, engine/settle/publish.c) when the stream's bytes at
 * its first seq are still a span ref's, or when it is a newer revision
 * of the object a catalog row names there (a tail extension).  Anything
 * else leaked.  Keys: meta_settled_key().
 */
static bool publish_pending(struct fsck *f, const char *key)
{
	const char *last = strrchr(key, '/'), *p = last;
	unsigned long long stream, epoch, seq;
	unsigned rev = 0;
	struct meta_ref r;
	bool pending = false;
	int n;

	/* Back over "<stream>/<epoch>" to the stream id. */
	for (int slashes = 0; p && p > key && slashes < 2; )
		if (*--p == '/')
			slashes++;
	if (!last || p == key ||
	    sscanf(p, "/%llu/%16llx/%16llx%n", &stream, &epoch, &seq, &n) != 3 ||
	    (p[n] && sscanf(p + n, "~%u", &rev) != 1))
		return false;
	meta_ref_init(&r);
	if (meta_ref_floor_seq(f->kv, stream, seq, &r) == 0) {
		if (r.kind == META_REF_SPAN)
			pending = seq < r.end_seq;
		for (uint32_t i = 0; r.kind == META_REF_CATALOG && i < r.nobjs; i++)
			if (r.objs[i].first_seq == seq && r.objs[i].epoch == epoch &&
			    r.objs[i].rev < rev)
				pending = true;
	}
	meta_ref_clear(&r);
	return pending;
}

/* ------------------------------------------------------------ footers */

/* Fetch and verify the footer window of an object; *win is malloc'd.
 * With a bucket set a bad copy beside a good one is read around (and
 * logged by the set): a failed PUT's leftovers, not lost data. */
static int fetch_footer(struct fsck *f, const char *key, uint64_t *foff, uint32_t *flen,
			uint8_t **win, struct bundle_footer *ft)
{
	uint64_t size;

	return objread_tail(f->store, key, &size, foff, flen, win, ft);
}

static int verify_chunk(struct fsck *f, const char *key, const struct bundle_entry *e)
{
	struct nv_buf raw;
	int rc;

	nv_buf_init(&raw, e->raw_len);
	rc = objread_chunk(f->store, key, e, &raw);
	nv_buf_free(&raw);
	f->sum->chunks++;
	return rc;
}

/* ------------------------------------------------------------ chains */

static int chain_collect(void *arg, const struct meta_chain *c, uint64_t ver)
{
	struct fsck *f = arg;

	if (f->nchains == f->cap) {
		size_t ncap = f->cap ? f->cap * 2 : 16;
		struct meta_chain *p = realloc(f->chains, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		f->chains = p;
		f->cap = ncap;
	}
	f->chains[f->nchains++] = *c;
	return 0;
}

struct slot_scan {
	struct fsck *f;
	const struct meta_chain *c;
	const struct meta_cursors *cur;
	uint64_t expect; /* next slot expected in [trimmed, checkpoint) */
	size_t prefix_len;
	int err;
};

/* Slots [a, b) of c, in [trimmed, checkpoint), are not in the store:
 * lost, except below the grace target, where a trim-check cut short
 * between its deletes and the cursor's advance left them (engine/trim.c;
 * its next pass deletes the rest and moves the cursor). */
static void say_missing(struct fsck *f, const struct meta_chain *c,
			const struct meta_cursors *cur, uint64_t a, uint64_t b)
{
	uint64_t gt = cur->grace_target;

	if (a < b && a < gt)
		say(f, false, "chain %s/%s/%" PRIu64 ": slots %" PRIu64 "..%" PRIu64 " deleted by "
			      "a trim-check cut short (its next pass finishes)",
		    nv_class_name(c->cls), c->star, c->epoch, a, (b < gt ? b : gt) - 1);
	for (uint64_t slot = a > gt ? a : gt; slot < b; slot++)
		say(f, true, "chain %s/%s/%" PRIu64 ": slot %" PRIu64
			     " below the checkpoint is missing",
		    nv_class_name(c->cls), c->star, c->epoch, slot);
}

static int slot_visit(void *arg, const char *key, uint64_t size)
{
	struct slot_scan *s = arg;
	const struct meta_chain *c = s->c;
	struct fsck *f = s->f;
	char *end;
	uint64_t slot = strtoull(key + s->prefix_len, &end, 16);

	f->sum->slots++;
	if (*end || strlen(key + s->prefix_len) != 16) {
		say(f, true, "%s: not a slot key", key);
		return 0;
	}
	if (slot < s->cur->trimmed)
		say(f, true, "%s: live slot below the trimmed cursor %" PRIu64, key,
		    s->cur->trimmed);
	if (grow_push((void **)&f->present, &f->npresent, &f->prescap, sizeof(slot), &slot))
		return -ENOMEM;
	if (c->state != CHAIN_LIVE && slot == c->cut && size == CHAIN_FENCE_SIZE)
		return 0; /* the fence recovery put there */
	if (c->state == CHAIN_SETTLED && slot >= c->cut)
		say(f, true, "%s: slot at or above the cut %" PRIu64 " of a settled chain", key,
		    c->cut);
	if (c->state != CHAIN_SETTLED && slot >= c->checkpoint)
		say(f, false, "%s: not absorbed yet (the next mount settles it)", key);
	if (slot >= s->cur->trimmed && slot < c->checkpoint) {
		say_missing(f, c, s->cur, s->expect, slot);
		s->expect = slot + 1;
	}
	return 0;
}

struct mark_scan {
	struct fsck *f;
	const struct meta_chain *c;
	const struct meta_cursors *cur;
	uint64_t next; /* slots below this are covered */
};

static int mark_visit(void *arg, const struct meta_marker *m)
{
	struct mark_scan *s = arg;
	const struct meta_chain *c = s->c;

	s->f->sum->markers++;
	if (m->first_slot < s->next)
		say(s->f, true, "chain %s/%s/%" PRIu64 ": marker at slot %" PRIu64
				" overlaps the previous one",
		    nv_class_name(c->cls), c->star, c->epoch, m->first_slot);
	/* A gap between markers is a batch whose every stream settled (its
	 * marker was resolved): legal; coverage below decides. */
	if (m->end_slot > c->checkpoint)
		say(s->f, true, "chain %s/%s/%" PRIu64 ": marker [%" PRIu64 ", %" PRIu64
				") passes the checkpoint %" PRIu64,
		    nv_class_name(c->cls), c->star, c->epoch, m->first_slot, m->end_slot,
		    c->checkpoint);
	if (m->first_slot < s->cur->rewritten)
		say(s->f, true, "chain %s/%s/%" PRIu64 ": marker at %" PRIu64
				" stands below the rewritten cursor %" PRIu64,
		    nv_class_name(c->cls), c->star, c->epoch, m->first_slot, s->cur->rewritten);
	if (m->end_slot > s->next)
		s->next = m->end_slot;
	{
		struct span sp = { m->first_slot, m->end_slot };

		if (grow_push((void **)&s->f->marks, &s->f->nmarks, &s->f->markcap, sizeof(sp),
			      &sp))
			return -ENOMEM;
	}
	/* Its slots must be in the store (those not yet trimmed). */
	for (uint64_t slot = m->first_slot; slot < m->end_slot && slot < c->checkpoint; slot++) {
		char who[META_BUCKET_NAME_MAX + META_STREAM_NAME_MAX + 32] = "no stream";

		if (slot < s->cur->trimmed || slot_present(s->f, slot))
			continue;
		if (m->nstreams)
			stream_label(s->f, m->streams[0].stream_id, who, sizeof(who));
		say(s->f, true, "chain %s/%s/%" PRIu64 ": the batch marker [%" PRIu64 ", %" PRIu64
				") names slot %" PRIu64 ", which is missing from the store (%u "
				"stream(s), first %s from seq %" PRIu64 ", %" PRIu64 " bytes)",
		    nv_class_name(c->cls), c->star, c->epoch, m->first_slot, m->end_slot, slot,
		    m->nstreams, who, m->nstreams ? m->streams[0].first_seq : 0,
		    m->nstreams ? m->streams[0].bytes : 0);
		break;
	}
	return 0;
}

/* Record every (slot, stream) of the chain's absorbed slots. */
static int chain_footers(struct fsck *f, const struct meta_chain *c,
			 const struct meta_cursors *cur)
{
	/* Slots below rewritten hold only settled (or deleted) history. */
	for (uint64_t slot = cur->rewritten; slot < c->checkpoint; slot++) {
		char key[CHAIN_KEY_MAX];
		struct bundle_footer ft;
		uint64_t foff;
		uint32_t flen;
		uint8_t *win;
		int rc;

		chain_slot_key(key, sizeof(key), c->cls, c->star, c->epoch, slot);
		rc = fetch_footer(f, key, &foff, &flen, &win, &ft);
		if (rc == -ENOENT)
			continue; /* reported by the slot scan */
		if (rc) {
			say(f, true, "%s: footer unreadable: %s", key,
			    rc == -EBADMSG ? "fails verification" : strerror(-rc));
			if (rc != -EBADMSG)
				return rc;
			continue;
		}
		for (uint32_t i = 0; i < ft.n; i++) {
			struct bundle_entry e;
			struct pair *p;

			if (bundle_footer_get(&ft, i, &e)) {
				say(f, true, "%s: footer entry %u malformed", key, i);
				continue;
			}
			p = pair_find(f, c->cls, c->star, c->epoch, slot, e.stream_id, true);
			if (!p) {
				free(win);
				return -ENOMEM;
			}
			if (!p->end_seq) {
				p->first_seq = e.first_seq;
				p->end_seq = e.first_seq;
				p->first_byte = e.first_byte;
				p->marked = slot_marked(f, slot);
			}
			p->end_byte = e.first_byte + bundle_entry_body_bytes(&e);
			if (e.first_seq != p->end_seq)
				say(f, true, "%s: stream %" PRIu64 " entries not contiguous at seq %" PRIu64,
				    key, e.stream_id, e.first_seq);
			p->end_seq = e.first_seq + e.nrec;
		}
		free(win);
	}
	return 0;
}

static int check_chains(struct fsck *f)
{
	int rc = meta_chain_list(f->kv, chain_collect, f);

	if (rc)
		return rc;
	for (size_t i = 0; i < f->nchains; i++) {
		const struct meta_chain *c = &f->chains[i];
		struct meta_cursors cur;
		uint64_t curver;
		struct slot_scan ss = { .f = f, .c = c, .cur = &cur };
		struct mark_scan ms = { .f = f, .c = c, .cur = &cur };
		char prefix[CHAIN_KEY_MAX];
		uint64_t head;

		f->sum->chains++;
		f->npresent = 0;
		f->nmarks = 0;
		progress(f, "chains", i, f->nchains);
		rc = meta_cursors_get(f->kv, c->cls, c->star, c->epoch, &cur, &curver);
		if (rc == -EBADMSG) {
			say(f, true, "chain %s/%s/%" PRIu64 ": cursor row fails to decode",
			    nv_class_name(c->cls), c->star, c->epoch);
			memset(&cur, 0, sizeof(cur));
		} else if (rc) {
			return rc;
		}
		ss.expect = cur.trimmed;
		ms.next = cur.rewritten;
		rc = meta_mint_head(f->kv, c->cls, c->star, &head);
		if (rc)
			return rc;
		if (c->epoch > head)
			say(f, true, "chain %s/%s/%" PRIu64 ": epoch above the mint head %" PRIu64,
			    nv_class_name(c->cls), c->star, c->epoch, head);
		if (c->state == CHAIN_LIVE && c->epoch < head)
			say(f, false, "chain %s/%s/%" PRIu64 ": below the mint head and not settled "
				      "(a crashed epoch; the next mount settles it)",
			    nv_class_name(c->cls), c->star, c->epoch);
		else if (c->state != CHAIN_SETTLED)
			say(f, false, "chain %s/%s/%" PRIu64 ": %s (the next mount settles it)",
			    nv_class_name(c->cls), c->star, c->epoch,
			    meta_chain_state_name(c->state));
		/* Slots: "chains/<class>/<star>/<epoch>/" then 16 hex digits. */
		chain_slot_key(prefix, sizeof(prefix), c->cls, c->star, c->epoch, 0);
		ss.prefix_len = strlen(prefix) - 16;
		prefix[ss.prefix_len] = 0;
		rc = store_list(f->store, prefix, NULL, slot_visit, &ss);
		if (rc)
			return rc;
		if (ss.expect < c->checkpoint)
			say_missing(f, c, &cur, ss.expect, c->checkpoint);
		rc = meta_marker_list(f->kv, c->cls, c->star, c->epoch, mark_visit, &ms);
		if (rc)
			return rc;
		rc = chain_footers(f, c, &cur);
		if (rc)
			return rc;
	}
	return 0;
}

/* ------------------------------------------------------------ refs */

struct ref_scan {
	struct fsck *f;
	const struct meta_stream *s;
	uint64_t next_seq, next_byte; /* the end of what the refs so far cover */
	uint8_t next_kind;            /* the kind of the row that reaches there */
	bool first;
	int err;
};

static int check_ref_slot(struct fsck *f, const struct meta_ref *r, uint32_t k)
{
	const struct meta_ref_slot *se = &r->slots[k];
	uint64_t end_seq = k + 1 < r->nslots ? r->slots[k + 1].first_seq : r->end_seq;
	uint64_t end_byte = k + 1 < r->nslots ? r->slots[k + 1].first_byte : r->end_byte;
	char key[CHAIN_KEY_MAX];
	struct bundle_footer ft;
	uint64_t foff, seq = se->first_seq, byte = se->first_byte;
	uint32_t flen, first, count;
	uint8_t *win;
	struct pair *p;
	int rc;

	chain_slot_key(key, sizeof(key), r->cls, r->star, r->epoch, se->slot);
	rc = fetch_footer(f, key, &foff, &flen, &win, &ft);
	if (rc) {
		say(f, true, "stream %" PRIu64 " ref %" PRIu64 ": slot %s %s", r->stream_id,
		    r->first_seq, key, rc == -ENOENT ? "is missing" : "footer fails verification");
		return rc == -ENOENT || rc == -EBADMSG ? 0 : rc;
	}
	if (foff != se->footer_off || flen != se->footer_len)
		say(f, true, "stream %" PRIu64 " ref %" PRIu64 ": footer window of %s differs",
		    r->stream_id, r->first_seq, key);
	rc = bundle_footer_stream(&ft, r->stream_id, &first, &count);
	if (rc) {
		say(f, true, "stream %" PRIu64 " ref %" PRIu64 ": %s holds none of its records",
		    r->stream_id, r->first_seq, key);
		free(win);
		return 0;
	}
	for (uint32_t i = first; i < first + count; i++) {
		struct bundle_entry e;

		if (bundle_footer_get(&ft, i, &e))
			continue; /* reported by the chain walk */
		if (e.first_seq != seq || e.first_byte != byte) {
			say(f, true, "stream %" PRIu64 ": %s entry at seq %" PRIu64 " byte %" PRIu64
				     " where the ref expects seq %" PRIu64 " byte %" PRIu64,
			    r->stream_id, key, e.first_seq, e.first_byte, seq, byte);
			break;
		}
		if (f->o->full) {
			int v = verify_chunk(f, key, &e);

			if (v == -EBADMSG)
				say(f, true, "%s: chunk at %" PRIu64 " fails verification", key,
				    e.chunk_off);
			else if (v) {
				free(win);
				return v;
			}
		}
		seq += e.nrec;
		byte += bundle_entry_body_bytes(&e);
	}
	free(win);
	if (seq != end_seq || byte != end_byte)
		say(f, true, "stream %" PRIu64 " ref %" PRIu64 ": %s covers up to seq %" PRIu64
			     ", the ref expects %" PRIu64,
		    r->stream_id, r->first_seq, key, seq, end_seq);
	p = pair_find(f, r->cls, r->star, r->epoch, se->slot, r->stream_id, false);
	if (p) {
		if (p->covered)
			say(f, true, "stream %" PRIu64 ": slot %s covered by two refs", r->stream_id,
			    key);
		p->covered = 1;
	}
	return 0;
}

/* A catalog row's objects: present, footers verify, entries cover each
 * object's share of the row exactly; chunks too with --full. */
static int check_catalog(struct fsck *f, const struct meta_ref *r)
{
	for (uint32_t k = 0; k < r->nobjs; k++) {
		const struct meta_ref_obj *o = &r->objs[k];
		uint64_t end_seq = meta_ref_obj_end_seq(r, k), end_byte = meta_ref_obj_end_byte(r, k);
		uint64_t seq = o->first_seq, byte = o->first_byte, foff;
		char key[META_SETTLED_KEY_MAX];
		struct bundle_footer ft;
		uint32_t flen;
		uint8_t *win;
		int rc;

		meta_settled_key(key, sizeof(key), r->bucket, r->stream_id, o->epoch, o->first_seq,
				 o->rev);
		if (pair_find_obj(f, key))
			f->sum->objects++;
		rc = fetch_footer(f, key, &foff, &flen, &win, &ft);
		if (rc) {
			say(f, true, "stream %" PRIu64 " catalog row %" PRIu64 ": object %s %s",
			    r->stream_id, r->first_seq, key,
			    rc == -ENOENT ? "is missing" : "footer fails verification");
			if (rc != -ENOENT && rc != -EBADMSG)
				return rc;
			continue;
		}
		if (foff != o->footer_off || flen != o->footer_len)
			say(f, true, "%s: footer window differs from its catalog row", key);
		for (uint32_t i = 0; i < ft.n; i++) {
			struct bundle_entry e;

			if (bundle_footer_get(&ft, i, &e) || e.stream_id != r->stream_id ||
			    e.first_seq != seq || e.first_byte != byte) {
				say(f, true, "%s: entry %u does not continue the object at seq %" PRIu64,
				    key, i, seq);
				break;
			}
			if (f->o->full) {
				int v = verify_chunk(f, key, &e);

				if (v == -EBADMSG)
					say(f, true, "%s: chunk at %" PRIu64 " fails verification", key,
					    e.chunk_off);
				else if (v) {
					free(win);
					return v;
				}
			}
			seq += e.nrec;
			byte += bundle_entry_body_bytes(&e);
		}
		free(win);
		if (seq != end_seq || byte != end_byte)
			say(f, true, "%s: holds records up to seq %" PRIu64 ", its row expects %" PRIu64,
			    key, seq, end_seq);
	}
	return 0;
}

static int ref_visit(void *arg, const struct meta_ref *r)
{
	struct ref_scan *s = arg;
	struct fsck *f = s->f;
	struct meta_ref twin;
	int rc;

	f->sum->refs++;
	if (s->first) {
		if (r->first_seq > s->s->trim_seq)
			say(f, true, "stream %" PRIu64 " (%s/%s): refs start at seq %" PRIu64
				     " above the trim point %" PRIu64,
			    r->stream_id, s->s->bucket, s->s->name, r->first_seq, s->s->trim_seq);
		s->first = false;
	} else if (r->first_seq < s->next_seq && r->first_byte < s->next_byte &&
		   r->kind != s->next_kind) {
		/* A settle cut short: its catalog row is committed and the
		 * span refs it covers are not deleted yet (or its non-pivot
		 * rows are down and the CAS is not); both describe the same
		 * bytes, and the stream's next settle removes the span refs
		 * (engine/settle/job.h, the resume). */
		say(f, false, "stream %" PRIu64 " (%s/%s): the %s at seq %" PRIu64 " overlaps the "
			      "%s before it (up to seq %" PRIu64 "): a settle cut short, which its "
			      "next pass finishes", r->stream_id, s->s->bucket, s->s->name,
		    r->kind == META_REF_SPAN ? "span ref" : "catalog row", r->first_seq,
		    s->next_kind == META_REF_SPAN ? "span ref" : "catalog row", s->next_seq);
	} else if (r->first_seq != s->next_seq || r->first_byte != s->next_byte) {
		say(f, true, "stream %" PRIu64 " (%s/%s): gap or overlap at seq %" PRIu64
			     " (previous ref ends at %" PRIu64 ")",
		    r->stream_id, s->s->bucket, s->s->name, r->first_seq, s->next_seq);
	}
	if (r->end_seq >= s->next_seq) {
		s->next_seq = r->end_seq;
		s->next_byte = r->end_byte;
		s->next_kind = r->kind;
	}
	meta_ref_init(&twin);
	rc = meta_ref_floor_byte(f->kv, r->stream_id, r->first_byte, &twin);
	if (rc == 0 && (twin.first_seq != r->first_seq || twin.first_byte != r->first_byte))
		rc = -ENOENT;
	meta_ref_clear(&twin);
	if (rc && r->end_byte > r->first_byte) /* an empty ref is found by no byte */
		say(f, true, "stream %" PRIu64 " ref %" PRIu64 ": byte index row missing",
		    r->stream_id, r->first_seq);
	if (r->kind == META_REF_CATALOG)
		return check_catalog(f, r);
	for (uint32_t k = 0; k < r->nslots; k++) {
		rc = check_ref_slot(f, r, k);
		if (rc)
			return rc;
	}
	return 0;
}

static int stream_visit(void *arg, const struct meta_stream *s)
{
	struct fsck *f = arg;
	struct ref_scan rs = { .f = f, .s = s, .first = true };

	f->sum->streams++;
	if (f->sum->streams % 256 == 0)
		progress(f, "streams", f->sum->streams, 0);
	return meta_ref_list(f->kv, s->id, 0, 0, ref_visit, &rs);
}

/* Records a slot holds that no span ref names are fine when a catalog row
 * covers them (settled), when they lie below the stream's trim point, or
 * when the stream is deleted (its history is being reclaimed). */
static bool settled_or_gone(struct fsck *f, const struct pair *p)
{
	struct meta_stream s;
	struct meta_ref r;
	bool ok = false;
	int rc = meta_stream_get(f->kv, p->stream, &s, NULL);

	if (rc == -ENOENT || (rc == 0 && (s.deleted_ns || p->end_seq <= s.trim_seq)))
		return true;
	meta_ref_init(&r);
	if (meta_ref_floor_seq(f->kv, p->stream, p->first_seq, &r) == 0 &&
	    r.kind == META_REF_CATALOG && r.first_seq <= p->first_seq && r.end_seq >= p->end_seq)
		ok = true;
	meta_ref_clear(&r);
	return ok;
}

static void integrity_problem(void *arg, const char *problem)
{
	say(arg, true, "metastore %s: %s", kv_name(((struct fsck *)arg)->kv), problem);
}

/* The metastore's own check first: a damaged database can make every
 * later read fail.  0, or a violation said and 0: the rest still runs. */
static void check_metastore(struct fsck *f)
{
	int rc;

	progress(f, "metastore", 0, 0);
	rc = kv_integrity_check(f->kv, integrity_problem, f);
	if (rc == -ENOTSUP)
		say(f, false, "metastore %s: the backend has no integrity check",
		    kv_name(f->kv));
	else if (rc)
		say(f, true, "metastore %s: the integrity check could not run: %s",
		    kv_name(f->kv), strerror(-rc));
}

/* A stream's records in a slot that no ref covers, or (unsettled) that
 * no batch marker covers. */
static void check_pairs(struct fsck *f)
{
	size_t cur = 0;
	void *v;

	while (u64map_next(f->pairs, &cur, NULL, &v)) {
		for (struct pair *p = v; p; p = p->hnext) {
			char who[META_BUCKET_NAME_MAX + META_STREAM_NAME_MAX + 32];
			const char *what;

			if (p->end_seq == 0 || (p->covered && p->marked))
				continue;
			if (settled_or_gone(f, p))
				continue;
			what = !p->covered ? "are covered by no ref"
					   : "are in no batch marker and not settled (the marker "
					     "is lost: they would never settle)";
			stream_label(f, p->stream, who, sizeof(who));
			say(f, true, "%s: records %" PRIu64 "..%" PRIu64 ", bytes [%" PRIu64
				     ", %" PRIu64 ") in chain %s/%s/%" PRIu64 " slot %" PRIu64 " %s",
			    who, p->first_seq, p->end_seq - 1, p->first_byte, p->end_byte,
			    nv_class_name(p->cls), p->star, p->epoch, p->slot, what);
		}
	}
}

int fsck_run(struct store *store, struct kv *kv, const struct fsck_opts *o,
	     struct fsck_summary *sum)
{
	struct fsck f = { .store = store, .kv = kv, .o = o, .sum = sum };
	int rc;

	memset(sum, 0, sizeof(*sum));
	check_metastore(&f);
	rc = store_list(store, "streams/", NULL, obj_collect, &f);
	if (!rc)
		rc = check_chains(&f);
	if (!rc)
		rc = meta_stream_list_all(kv, stream_visit, &f);
	if (!rc && f.pairs)
		check_pairs(&f);
	/* Every settled object is named by a catalog row or queued for
	 * reclamation; anything else leaked. */
	if (!rc)
		rc = meta_reclaim_due(kv, UINT64_MAX - 1, 0, gc_named, &f);
	for (size_t i = 0; i < f.nobjs; i++) {
		if (!rc && !f.objs[i].named && publish_pending(&f, f.objs[i].key))
			say(&f, false, "%s: published by a settle whose commit is not done (its next "
				       "pass adopts it)", f.objs[i].key);
		else if (!rc && !f.objs[i].named)
			say(&f, true, "%s: a settled object nothing names (leaked)", f.objs[i].key);
		free(f.objs[i].key);
	}
	free(f.objs);
	pairs_free(&f);
	free(f.chains);
	free(f.present);
	free(f.marks);
	return rc;
}
