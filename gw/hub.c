/*
 * hub.c - see hub.h: one follow per stream, fanned out to the attached
 * sinks.
 *
 * For: the registry of hubs (gw_hubs), attach/leave, the hub's thread
 * (hub_main(), on_range()).  Not for: what a sink does with a range
 * (gw/sse.c).
 *
 * Locking: hs->lock guards the registry list (head), every hub's refs,
 * and threads; a bell's lock its count only (taken with nothing else
 * held); h->lock guards a hub's sinks, nsinks, next and closing.
 * Order: hs->lock, then h->lock, then the sinks' own locks (inside
 * the sinks' callbacks).  No lock is held across the source's follow; its
 * callback takes h->lock only.
 *
 * References (h->refs, under hs->lock): the thread's one, and one per
 * sink from its attach to its leave; the last drop frees.  A hub is in
 * the registry from its creation until it closes (closing set, under
 * both locks), so a closed hub is never attached to again.
 *
 * Invariants: those of hub.h.
 */
#include "config.h"
#include "gw/hub.h"
#include "src/base/clock.h"
#include "src/base/log.h"
#include "src/base/names.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STOP_WAIT_NS (10 * NV_NS_PER_S)

struct hub {
	struct gw_hubs *hs;
	char bucket[NV_BUCKET_NAME_MAX + 1];
	char stream[NV_STREAM_NAME_MAX + 1];
	uint64_t start;             /* where the follow began */
	struct gw_hub_bell *bell;   /* the registry's */
	pthread_mutex_t lock;
	struct gw_hub_sink *sinks;  /* lock */
	unsigned nsinks;            /* lock */
	uint64_t next;              /* lock: the byte after the last range */
	bool closing;               /* lock (set under hs->lock too) */
	int refs;                   /* hs->lock */
	struct hub *rnext;          /* hs->lock: the registry list */
};

struct gw_hub_bell {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t count;             /* lock */
};

struct gw_hubs {
	struct gw_source *src;
	struct gw_hub_bell bells[GW_HUB_BELLS];
	atomic_bool stopping;
	pthread_mutex_t lock;
	pthread_cond_t cond;        /* a hub's thread returned */
	struct hub *head;           /* lock: hubs not closing */
	unsigned threads;           /* lock: follows running */
};

/* Unlink k from h (caller holds h->lock). */
static void unlink_locked(struct hub *h, struct gw_hub_sink *k)
{
	for (struct gw_hub_sink **p = &h->sinks; *p; p = &(*p)->next) {
		if (*p == k) {
			*p = k->next;
			k->next = NULL;
			k->attached = false;
			h->nsinks--;
			return;
		}
	}
}

/* Close h: out of the registry, every sink detached with why (caller
 * holds hs->lock and h->lock; why 0: there are none to detach). */
static void close_locked(struct hub *h, int why)
{
	struct gw_hubs *hs = h->hs;

	if (!h->closing) {
		h->closing = true;
		for (struct hub **p = &hs->head; *p; p = &(*p)->rnext) {
			if (*p == h) {
				*p = h->rnext;
				break;
			}
		}
	}
	while (h->sinks) {
		struct gw_hub_sink *k = h->sinks;

		unlink_locked(h, k);
		k->gone(k, why);
	}
}

static void hub_free(struct hub *h)
{
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/* Drop one reference (caller holds hs->lock): true when h must be freed. */
static bool unref_locked(struct hub *h)
{
	return --h->refs == 0;
}

static int on_range(void *arg, uint64_t off, const void *data, size_t len)
{
	struct hub *h = arg;
	const char *bytes = data;
	struct gw_hub_sink *k, *nk;
	int stop;

	if (atomic_load(&h->hs->stopping))
		return 1;
	pthread_mutex_lock(&h->lock);
	stop = h->closing;
	if (!stop && len) {
		for (k = h->sinks; k; k = nk) {
			uint64_t skip = k->at > off ? k->at - off : 0;
			int rc;

			nk = k->next;
			if (skip >= len)
				continue; /* attached past this range (invariant 1) */
			rc = k->deliver(k, off + skip, bytes + skip, len - skip);
			if (rc) {
				unlink_locked(h, k);
				k->gone(k, rc);
			} else {
				k->at = off + len;
			}
		}
		h->next = off + len;
	}
	pthread_mutex_unlock(&h->lock);
	if (!stop && len)
		gw_hub_bell_ring(h->bell); /* every queue filled: one wake-up for all */
	return stop;
}

static void *hub_main(void *arg)
{
	struct hub *h = arg;
	struct gw_hubs *hs = h->hs;
	bool last;
	int rc;

	rc = gw_follow(hs->src, h->bucket, h->stream, h->start, on_range, h);
	pthread_mutex_lock(&hs->lock);
	pthread_mutex_lock(&h->lock);
	if (!h->closing && rc < 0)
		nv_log(rc == -ENOENT ? NV_INFO : NV_WARN, NV_SUB_API, "gateway: %s/%s: shared "
		       "follow ended at byte %llu: %s", h->bucket, h->stream,
		       (unsigned long long)h->next, strerror(-rc));
	close_locked(h, rc < 0 ? rc : -ESHUTDOWN);
	pthread_mutex_unlock(&h->lock);
	hs->threads--;
	last = unref_locked(h);
	pthread_cond_broadcast(&hs->cond);
	pthread_mutex_unlock(&hs->lock);
	if (last)
		hub_free(h);
	return NULL;
}

/* A new hub of bucket/stream from cursor, its thread started, in the
 * registry (caller holds hs->lock).  NULL on ENOMEM. */
static struct hub *hub_start_locked(struct gw_hubs *hs, const char *bucket, const char *stream,
				    uint64_t cursor)
{
	struct hub *h = calloc(1, sizeof(*h));
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (!h)
		return NULL;
	h->hs = hs;
	snprintf(h->bucket, sizeof(h->bucket), "%s", bucket);
	snprintf(h->stream, sizeof(h->stream), "%s", stream);
	h->start = h->next = cursor;
	h->bell = gw_hub_bell_of(hs, bucket, stream);
	h->refs = 1; /* the thread's */
	pthread_mutex_init(&h->lock, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, hub_main, h);
	pthread_attr_destroy(&attr);
	if (rc) {
		hub_free(h);
		return NULL;
	}
	hs->threads++;
	h->rnext = hs->head;
	hs->head = h;
	nv_log(NV_DEBUG, NV_SUB_API, "gateway: %s/%s: shared follow from byte %llu", bucket,
	       stream, (unsigned long long)cursor);
	return h;
}

int gw_hub_attach(struct gw_hubs *hs, const char *bucket, const char *stream, uint64_t cursor,
		  struct gw_hub_sink *k, uint64_t *next)
{
	struct hub *h;
	int rc = 0;

	pthread_mutex_lock(&hs->lock);
	if (atomic_load(&hs->stopping)) {
		pthread_mutex_unlock(&hs->lock);
		return -ESHUTDOWN;
	}
	for (h = hs->head; h; h = h->rnext)
		if (!strcmp(h->bucket, bucket) && !strcmp(h->stream, stream))
			break;
	if (!h && !(h = hub_start_locked(hs, bucket, stream, cursor))) {
		pthread_mutex_unlock(&hs->lock);
		return -ENOMEM;
	}
	pthread_mutex_lock(&h->lock);
	if (cursor < h->next) {
		*next = h->next;
		rc = -EAGAIN;
	} else {
		k->hub = h;
		k->at = cursor;
		k->attached = true;
		k->next = h->sinks;
		h->sinks = k;
		h->nsinks++;
		h->refs++;
	}
	pthread_mutex_unlock(&h->lock);
	pthread_mutex_unlock(&hs->lock);
	return rc;
}

void gw_hub_leave(struct gw_hubs *hs, struct gw_hub_sink *k)
{
	struct hub *h = k->hub;
	bool last;

	if (!h)
		return;
	pthread_mutex_lock(&hs->lock);
	pthread_mutex_lock(&h->lock);
	if (k->attached)
		unlink_locked(h, k);
	if (h->nsinks == 0)
		close_locked(h, 0); /* the last one: the follow stops at its next callback */
	pthread_mutex_unlock(&h->lock);
	last = unref_locked(h);
	pthread_mutex_unlock(&hs->lock);
	if (last)
		hub_free(h);
	k->hub = NULL;
}

struct gw_hub_bell *gw_hub_bell_of(struct gw_hubs *hs, const char *bucket, const char *stream)
{
	uint32_t x = 2166136261u; /* FNV-1a over bucket NUL stream */

	for (const char *p = bucket; *p; p++)
		x = (x ^ (unsigned char)*p) * 16777619u;
	x *= 16777619u;
	for (const char *p = stream; *p; p++)
		x = (x ^ (unsigned char)*p) * 16777619u;
	return &hs->bells[x % GW_HUB_BELLS];
}

uint64_t gw_hub_bell_count(struct gw_hub_bell *b)
{
	uint64_t n;

	pthread_mutex_lock(&b->lock);
	n = b->count;
	pthread_mutex_unlock(&b->lock);
	return n;
}

void gw_hub_bell_wait(struct gw_hub_bell *b, uint64_t seen, uint64_t wait_ns)
{
	struct timespec until = nv_mono_deadline(wait_ns);
	int rc = 0;

	pthread_mutex_lock(&b->lock);
	while (b->count == seen && rc == 0)
		rc = pthread_cond_timedwait(&b->cond, &b->lock, &until);
	pthread_mutex_unlock(&b->lock);
}

void gw_hub_bell_ring(struct gw_hub_bell *b)
{
	pthread_mutex_lock(&b->lock);
	b->count++;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

int gw_hubs_new(struct gw_source *src, struct gw_hubs **out)
{
	struct gw_hubs *hs = calloc(1, sizeof(*hs));

	if (!hs)
		return -ENOMEM;
	for (unsigned i = 0; i < GW_HUB_BELLS; i++) {
		pthread_mutex_init(&hs->bells[i].lock, NULL);
		if (nv_cond_init_mono(&hs->bells[i].cond)) {
			while (i--)
				pthread_cond_destroy(&hs->bells[i].cond);
			free(hs);
			return -ENOMEM;
		}
	}
	hs->src = src;
	atomic_init(&hs->stopping, false);
	pthread_mutex_init(&hs->lock, NULL);
	if (nv_cond_init_mono(&hs->cond)) {
		pthread_mutex_destroy(&hs->lock);
		free(hs);
		return -ENOMEM;
	}
	*out = hs;
	return 0;
}

void gw_hubs_stop(struct gw_hubs *hs)
{
	struct timespec until = nv_mono_deadline(STOP_WAIT_NS);
	int rc = 0;

	pthread_mutex_lock(&hs->lock);
	atomic_store(&hs->stopping, true);
	while (hs->head) {
		struct hub *h = hs->head;

		pthread_mutex_lock(&h->lock);
		close_locked(h, -ESHUTDOWN); /* unlinks h from head */
		pthread_mutex_unlock(&h->lock);
	}
	while (hs->threads && rc == 0)
		rc = pthread_cond_timedwait(&hs->cond, &hs->lock, &until);
	if (hs->threads)
		nv_log(NV_WARN, NV_SUB_API, "gateway: %u shared follows still running at stop",
		       hs->threads);
	pthread_mutex_unlock(&hs->lock);
}

unsigned gw_hubs_live(struct gw_hubs *hs)
{
	unsigned n;

	pthread_mutex_lock(&hs->lock);
	n = hs->threads;
	pthread_mutex_unlock(&hs->lock);
	return n;
}

void gw_hubs_free(struct gw_hubs *hs)
{
	if (!hs || gw_hubs_live(hs))
		return; /* a follow outlived the stop: leave it its registry */
	for (unsigned i = 0; i < GW_HUB_BELLS; i++) {
		pthread_cond_destroy(&hs->bells[i].cond);
		pthread_mutex_destroy(&hs->bells[i].lock);
	}
	pthread_cond_destroy(&hs->cond);
	pthread_mutex_destroy(&hs->lock);
	free(hs);
}
