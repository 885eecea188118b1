/*
 * chunkfetch.c - see chunkfetch.h.
 *
 * Threads: any; the cache (engine/rcache.h) makes concurrent loads of
 * one entry wait for the first.  No state of its own.
 */
#include "config.h"
#include "engine/chunkfetch.h"
#include "engine/chunkrec.h"
#include "engine/objread.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int bad_object(const struct chunkfetch *cf, const char *key, bool cached, const char *what,
		      int rc)
{
	if (rc == -ENOENT && cached) {
		/* Settled or trimmed since the reader's window was read. */
		nv_log(NV_DEBUG, NV_SUB_READ, "%s: %s: gone; its ref window was stale", key, what);
		return -ESTALE;
	}
	if (rc == -EBADMSG || rc == -ENOENT || rc == -ERANGE) {
		NV_STAT_ADD(cf->stats, corrupt_objects, 1);
		nv_log(NV_ERR, NV_SUB_READ, "%s: %s: %s", key, what,
		       rc == -EBADMSG ? "failed verification" : strerror(-rc));
		return -EIO;
	}
	nv_log(NV_WARN, NV_SUB_READ, "%s: %s: %s", key, what, strerror(-rc));
	/* The store already retried transient failures (a zone down, a
	 * timeout): to a reader that is an I/O error, never EAGAIN. */
	return rc == -ENOMEM ? rc : -EIO;
}

/* What a whole read of an object may carry of other streams' bytes:
 * no more than the stream's own, or this much (framing, small records). */
#define WHOLE_SLACK (64u << 10)

/* Whether l's object is read whole (read_cfg.whole_max): small, and not
 * mostly other streams' bytes. */
static bool read_whole(const struct chunkfetch *cf, const struct cf_obj *l)
{
	uint64_t others = l->footer_off > l->share ? l->footer_off - l->share : 0;

	return l->footer_off + l->footer_len <= cf->whole_max && l->share &&
	       others <= (l->share > WHOLE_SLACK ? l->share : WHOLE_SLACK);
}

/* The footer of l's object into a new blob; with whole (may be NULL) and
 * read_whole(), the object up to the footer's end in one GET, into
 * *whole (malloc'd; the caller frees it). */
static int load_footer(const struct chunkfetch *cf, const struct cf_obj *l, struct rc_blob **out,
		       uint8_t **whole)
{
	struct rc_blob *b = rc_blob_new(l->footer_len, 0);
	struct bundle_footer f;
	uint8_t *w = NULL;
	int rc;

	if (!b)
		return -ENOMEM;
	NV_STAT_ADD(cf->stats, footer_fetches, 1);
	if (whole && read_whole(cf, l) && (w = malloc(l->footer_off + l->footer_len))) {
		NV_STAT_ADD(cf->stats, whole_fetches, 1);
		rc = objread_whole(cf->store, l->key, l->footer_off, l->footer_len, w, &f);
		if (!rc) {
			memcpy(b->data, w + l->footer_off, l->footer_len);
			*whole = w;
		} else {
			free(w);
		}
	} else {
		rc = objread_footer(cf->store, l->key, l->footer_off, l->footer_len, b->data,
				    &f);
	}
	if (rc) {
		rc_blob_unref(b);
		return bad_object(cf, l->key, l->cached, "footer", rc);
	}
	*out = b;
	return 0;
}

/* The footer of l's object, from the cache or loaded.  With whole (may be
 * NULL) and a whole read, *whole is set and *pending is the footer's cache
 * entry, not yet filled: the caller claims the stream's chunk entries
 * first (claim_whole()) and then fills it, so that a thread waiting for
 * the footer finds those chunks loading, not missing, and waits for them
 * instead of fetching them again with a GET of its own. */
static int get_footer(const struct chunkfetch *cf, const struct cf_obj *l, struct bundle_footer *f,
		      struct rc_blob **hold, uint8_t **whole, struct rc_entry **pending)
{
	struct rc_entry *e;
	struct rc_blob *b;
	int rc;

	*pending = NULL;
	for (int i = 0; i < 4; i++) {
		rc = rcache_get(cf->cache, l->key, UINT64_MAX - l->footer_off, &b, &e);
		if (rc == 1) {
			rc = load_footer(cf, l, &b, whole);
			if (!rc)
				rc_blob_ref(b); /* ours; the cache gets the first */
			if (!rc && whole && *whole)
				*pending = e; /* filled by the caller */
			else
				rcache_fill(cf->cache, e, rc ? NULL : b, rc);
		}
		if (rc != -ENOBUFS)
			break;
	}
	if (rc)
		return rc;
	/* Verified when loaded: build the view without re-checking CRCs. */
	f->entries = b->data;
	f->n = (uint32_t)((b->len - BUNDLE_TRAILER_SIZE) / BUNDLE_ENTRY_SIZE);
	f->footer_off = l->footer_off;
	*hold = b;
	return 0;
}

/* Chunk e of key, from whole (the object up to its footer's end,
 * footer_off bytes of chunks; NULL: a GET of its own). */
static int load_chunk(const struct chunkfetch *cf, const char *key, bool cached,
		      const struct bundle_entry *e, const uint8_t *whole, uint64_t footer_off,
		      struct rc_blob **out)
{
	struct rc_blob *b;
	int rc;

	/* Decoded straight into the cache entry (a raw chunk is read into
	 * it and verified in place); e->raw_len is bounded by the footer
	 * (bundle_footer_get()). */
	b = rc_blob_new(e->raw_len, e->nrec);
	rc = b ? -EBADMSG : -ENOMEM;
	if (b && whole && e->chunk_off + e->comp_len <= footer_off)
		rc = bundle_chunk_decode_into(e, whole + e->chunk_off, e->comp_len, b->data);
	if (rc == -EBADMSG) { /* not in whole, or bad in its copy: read around it */
		NV_STAT_ADD(cf->stats, chunk_fetches, 1);
		rc = objread_chunk_into(cf->store, key, e, b->data);
	}
	if (!rc)
		rc = chunkrec_index(e, b); /* decode verified exactly nrec frames */
	if (rc) {
		rc_blob_unref(b);
		return bad_object(cf, key, cached, "chunk", rc);
	}
	*out = b;
	return 0;
}

/* The stream's chunks in whole (its object read whole), claimed in the
 * cache before the footer entry is filled (get_footer()): the next pages
 * of a sequential reader, for no GET.  *claims (malloc'd) and *nclaims:
 * the entries this thread must fill (fill_claims()). */
struct claim {
	struct rc_entry *ce;
	struct bundle_entry e;
};

static void claim_whole(const struct chunkfetch *cf, const struct cf_obj *l,
			const struct bundle_footer *f, uint64_t stream, struct claim **claims,
			uint32_t *nclaims)
{
	uint32_t first, count, n = 0;
	struct claim *c;

	*claims = NULL;
	*nclaims = 0;
	if (bundle_footer_stream(f, stream, &first, &count) || !count ||
	    !(c = calloc(count, sizeof(*c))))
		return;
	for (uint32_t q = first; q < first + count; q++) {
		struct rc_blob *b;
		int rc;

		if (bundle_footer_get(f, q, &c[n].e))
			continue;
		if (rcache_peek(cf->cache, l->key, c[n].e.chunk_off, &b) == 0) {
			rc_blob_unref(b); /* cached already */
			continue;
		}
		rc = rcache_get(cf->cache, l->key, c[n].e.chunk_off, &b, &c[n].ce);
		if (rc == 0)
			rc_blob_unref(b);
		if (rc == 1)
			n++;
	}
	*claims = c;
	*nclaims = n;
}

static void fill_claims(const struct chunkfetch *cf, const struct cf_obj *l, struct claim *c,
			uint32_t n, const uint8_t *whole)
{
	for (uint32_t i = 0; i < n; i++) {
		struct rc_blob *b;
		int rc = load_chunk(cf, l->key, l->cached, &c[i].e, whole, l->footer_off, &b);

		rcache_fill(cf->cache, c[i].ce, rc ? NULL : b, rc); /* our reference */
	}
	free(c);
}

/* Entry of the footer holding stream byte off, and its decoded chunk. */
int chunkfetch_get(const struct chunkfetch *cf, const struct cf_obj *l, uint64_t stream,
		   bool by_seq, uint64_t off, struct bundle_entry *ent, struct rc_blob **chunk,
		   bool *hit)
{
	struct bundle_footer f;
	struct rc_blob *fb, *b;
	struct rc_entry *e;
	uint8_t *whole = NULL;
	struct rc_entry *pending;
	struct claim *claims = NULL;
	uint32_t idx, nclaims = 0;
	bool loaded = false;
	int rc;

	rc = get_footer(cf, l, &f, &fb, &whole, &pending);
	if (rc)
		return rc;
	if (pending) {
		/* Claim the stream's chunks, then publish the footer. */
		claim_whole(cf, l, &f, stream, &claims, &nclaims);
		rcache_fill(cf->cache, pending, fb, 0); /* one of our two references */
		(void)NV_FP("read.whole_published"); /* delay only: tests hold the window */
	}
	rc = by_seq ? bundle_footer_find_seq(&f, stream, off, &idx)
		    : bundle_footer_find_byte(&f, stream, off, &idx);
	if (!rc)
		rc = bundle_footer_get(&f, idx, ent);
	for (uint32_t i = 0; !rc && i < nclaims; i++)
		if (claims[i].e.chunk_off == ent->chunk_off)
			loaded = true; /* its GET was ours: not a cache hit */
	if (claims)
		fill_claims(cf, l, claims, nclaims, whole); /* even on a failed lookup */
	rc_blob_unref(fb);
	if (rc) {
		free(whole);
		return bad_object(cf, l->key, false, "footer lookup",
				  rc == -ENOENT ? -EBADMSG : rc);
	}
	*hit = true;
	for (int i = 0; i < 4; i++) {
		rc = rcache_get(cf->cache, l->key, ent->chunk_off, &b, &e);
		if (rc == 1) {
			*hit = false;
			rc = load_chunk(cf, l->key, l->cached, ent, whole, l->footer_off, &b);
			if (!rc)
				rc_blob_ref(b);
			rcache_fill(cf->cache, e, rc ? NULL : b, rc);
		}
		if (rc != -ENOBUFS)
			break;
	}
	free(whole);
	if (rc)
		return rc;
	if (loaded)
		*hit = false;
	*chunk = b;
	return 0;
}
