/*
 * stars.c - see source.h: the star source (proxy mode), the stars'
 * API through the cluster client.
 *
 * For: gw_source_stars() and its four ops.  Not for: the redial on
 * NOT_OWNER (api/client.c does it once per call), HTTP to readers.
 *
 * Each call dials a star of the list by rotation with the "any star"
 * holder (epoch 0, api/client.h invariant 2): a cold question is
 * answered there; a question about the tail is answered NOT_OWNER and
 * the client redials the holder it names.  A star that cannot be
 * reached, is busy, or whose redirect failed (leadership moving) passes
 * the question to the next; after every star, the last error.
 *
 * The Gateway names streams by bucket and name alone (its readers' URLs
 * do; id 0 to the client, api/client.h invariant 5).
 *
 * A follow survives its star: when the subscription breaks (star gone,
 * stopping, leadership moving), it resumes at its cursor at the next
 * star, backing off from 50 ms to 1 s, and gives up only after
 * FOLLOW_TRIES consecutive failures without a byte.
 *
 * Invariants: those of source.h.
 */
#include "config.h"
#include "gw/source.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FOLLOW_TRIES 20
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

struct stars {
	struct gw_source src; /* first: the ops */
	struct api_client *cl;
	unsigned n;
	atomic_uint next;
	struct lease_holder *at; /* n "any star" holders */
};

static struct stars *stars_of(struct gw_source *src)
{
	return (struct stars *)(void *)src;
}

/* Worth asking another star? */
static bool retryable(int rc)
{
	return rc == -EHOSTUNREACH || rc == -EAGAIN || rc == -STAR_ENOTOWNER || rc == -ETIMEDOUT;
}

/* The one translation of the cluster client's errors into source.h's. */
static int source_err(int rc)
{
	switch (rc) {
	case 0: case -ENOENT: case -ERANGE: case -EHOSTUNREACH: case -EACCES: case -EAGAIN:
		return rc;
	case -STAR_ENOTOWNER: case -ETIMEDOUT:
		return -EAGAIN;
	default:
		return -EIO;
	}
}

/* The star to dial first, and after it the others in order. */
static unsigned first_star(struct stars *ss)
{
	return atomic_fetch_add_explicit(&ss->next, 1, memory_order_relaxed) % ss->n;
}

enum star_q { Q_LOCATE, Q_READ, Q_BOUNDS };

struct question {
	enum star_q q;
	const char *bucket, *stream;
	bool by_seq;
	uint64_t pos;
	void *dst;
	size_t len, *got;
	uint64_t *seq, *byte;
	struct api_bounds *bounds;
};

static int ask_one(struct stars *ss, const struct lease_holder *h, const struct question *q)
{
	switch (q->q) {
	case Q_LOCATE:
		return api_client_locate(ss->cl, h, q->bucket, q->stream, 0, q->by_seq, q->pos,
					 q->seq, q->byte);
	case Q_READ:
		return api_client_read(ss->cl, h, q->bucket, q->stream, 0, q->pos, q->dst, q->len,
				       q->got);
	default:
		return api_client_bounds(ss->cl, h, q->bucket, q->stream, 0, q->bounds);
	}
}

static int ask(struct stars *ss, const struct question *q)
{
	unsigned i0 = first_star(ss);
	int rc = -EHOSTUNREACH;

	for (unsigned k = 0; k < ss->n; k++) {
		rc = ask_one(ss, &ss->at[(i0 + k) % ss->n], q);
		if (!retryable(rc))
			break;
	}
	return source_err(rc);
}

static int stars_locate(struct gw_source *src, const char *bucket, const char *stream,
			bool by_seq, uint64_t pos, uint64_t *seq, uint64_t *byte)
{
	struct question q = { .q = Q_LOCATE, .bucket = bucket, .stream = stream,
			      .by_seq = by_seq, .pos = pos, .seq = seq, .byte = byte };

	return ask(stars_of(src), &q);
}

static int stars_read(struct gw_source *src, const char *bucket, const char *stream,
		      uint64_t off, void *dst, size_t len, size_t *got)
{
	struct question q = { .q = Q_READ, .bucket = bucket, .stream = stream, .pos = off,
			      .dst = dst, .len = len, .got = got };

	return ask(stars_of(src), &q);
}

static int stars_bounds(struct gw_source *src, const char *bucket, const char *stream,
			struct api_bounds *b)
{
	struct question q = { .q = Q_BOUNDS, .bucket = bucket, .stream = stream, .bounds = b };

	return ask(stars_of(src), &q);
}

/* A follow's cursor between its caller and the subscription. */
struct follow {
	api_sub_fn fn;
	void *arg;
	uint64_t cursor;
	bool moved; /* a byte arrived since the last failure */
};

static int follow_fn(void *arg, uint64_t off, const void *data, size_t len)
{
	struct follow *f = arg;
	int rc = f->fn(f->arg, off, data, len);

	if (len) {
		f->cursor = off + len;
		f->moved = true;
	}
	return rc;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int stars_follow(struct gw_source *src, const char *bucket, const char *stream,
			uint64_t off, api_sub_fn fn, void *arg)
{
	struct stars *ss = stars_of(src);
	struct follow f = { .fn = fn, .arg = arg, .cursor = off };
	unsigned i = first_star(ss), fails = 0, backoff = BACKOFF_MIN_MS;
	int rc;

	for (;;) {
		f.moved = false;
		rc = api_client_subscribe(ss->cl, &ss->at[i % ss->n], bucket, stream, 0, f.cursor,
					  follow_fn, &f);
		if (rc > 0 || !(retryable(rc) || rc == -EIO))
			return rc > 0 ? rc : source_err(rc);
		if (f.moved) {
			fails = 0;
			backoff = BACKOFF_MIN_MS;
		}
		if (++fails >= FOLLOW_TRIES)
			return source_err(rc);
		nv_log(NV_DEBUG, NV_SUB_API, "gateway: %s/%s: subscription broke (%s), resuming "
		       "at byte %llu", bucket, stream, strerror(-rc), (unsigned long long)f.cursor);
		i++;
		sleep_ms(backoff);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
}

static void stars_free(struct gw_source *src)
{
	struct stars *ss = stars_of(src);

	free(ss->at);
	free(ss);
}

static const struct gw_source_ops stars_ops = {
	.locate = stars_locate,
	.read = stars_read,
	.follow = stars_follow,
	.bounds = stars_bounds,
	.free = stars_free,
};

int gw_source_stars(struct api_client *cl, const char *const *stars, unsigned nstars,
		    struct gw_source **out)
{
	struct stars *ss;

	if (nstars == 0)
		return -EINVAL;
	ss = calloc(1, sizeof(*ss));
	if (!ss || !(ss->at = calloc(nstars, sizeof(*ss->at)))) {
		free(ss);
		return -ENOMEM;
	}
	ss->src.ops = &stars_ops;
	ss->cl = cl;
	ss->n = nstars;
	for (unsigned i = 0; i < nstars; i++) {
		if (strlen(stars[i]) > LEASE_ADDR_MAX) {
			stars_free(&ss->src);
			return -EINVAL;
		}
		snprintf(ss->at[i].addr, sizeof(ss->at[i].addr), "%s", stars[i]);
		snprintf(ss->at[i].star, sizeof(ss->at[i].star), "any star");
	}
	*out = &ss->src;
	return 0;
}
