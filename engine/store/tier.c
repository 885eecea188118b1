/*
 * tier.c - see tier.h: the cache tier's proxies, the ring, bounded loads
 * and down-marking, shared by the S3 backend (engine/store/s3/cache.c)
 * and the plan consumer's signed fetches (api/vend.c).
 *
 * For: parsing the proxy list and reading the token (store_tier_new()),
 * the ring (FNV-1a of the key, the page mixed in; STORE_TIER_VNODES
 * points a proxy), the pick with bounded loads, the in-flight counts,
 * marking a proxy down.  Not for: any request.
 *
 * Locking: tier.h (immutable but the atomics; no lock).
 */
#include "config.h"
#include "engine/store/tier.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct nv_ratelimit down_rl;

static int64_t now_ms(void)
{
	return (int64_t)(nv_now_mono_ns() / 1000000u);
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* FNV-1a of s, then n mixed in: the ring position of (s, n). */
static uint64_t ring_hash(const char *s, uint64_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return mix64(h ^ mix64(n + 0x9e3779b97f4a7c15ull));
}

static int pt_cmp(const void *a, const void *b)
{
	const struct store_tier_pt *x = a, *y = b;

	return x->h < y->h ? -1 : x->h > y->h;
}

void store_tier_free(struct store_tier *t)
{
	if (!t)
		return;
	for (int i = 0; t->px && i < t->n; i++)
		free(t->px[i].base_url);
	free(t->px);
	free(t->ring);
	if (t->auth)
		memset(t->auth, 0, strlen(t->auth));
	free(t->auth);
	free(t);
}

/* The token of o->auth_file: one line, STORE_TIER_AUTH_MIN.._MAX
 * printable bytes, in a file nobody but its owner may read.  0 or
 * -EINVAL (logged). */
static int read_auth(const struct store_tier_opts *o, char **out)
{
	char buf[STORE_TIER_AUTH_MAX + 2];
	const char *path = o->auth_file;
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		nv_log(NV_ERR, NV_SUB_STORE, "%s: %s %s: %s", o->ctx, o->auth_name, path,
		       strerror(errno));
		return -EINVAL;
	}
	if (fstat(fd, &st) < 0 || (st.st_mode & 077)) {
		close(fd);
		nv_log(NV_ERR, NV_SUB_STORE, "%s: %s %s must not be readable by group or others",
		       o->ctx, o->auth_name, path);
		return -EINVAL;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] <= ' ' || buf[i] > '~')
			n = -1;
	if (n < STORE_TIER_AUTH_MIN || n > STORE_TIER_AUTH_MAX) {
		memset(buf, 0, sizeof(buf));
		nv_log(NV_ERR, NV_SUB_STORE,
		       "%s: %s %s must hold one token of %d to %d printable bytes", o->ctx,
		       o->auth_name, path, STORE_TIER_AUTH_MIN, STORE_TIER_AUTH_MAX);
		return -EINVAL;
	}
	*out = strdup(buf);
	memset(buf, 0, sizeof(buf));
	return *out ? 0 : -ENOMEM;
}

/* One "http://host:port" of the list ('+' between them: a ',' would end
 * a mount option) into t->px (bounded, no path). */
static int add_proxy(const struct store_tier_opts *o, struct store_tier *t, const char *p,
		     size_t n)
{
	char *u;

	if (n < 8 || n > 255 || (strncmp(p, "http://", 7) && strncmp(p, "https://", 8)) ||
	    memchr(p + 8, '/', n - 8) || memchr(p, '?', n) || memchr(p, ' ', n)) {
		nv_log(NV_ERR, NV_SUB_STORE,
		       "%s: %s wants http(s)://host:port entries separated by '+'; got '%.*s'",
		       o->ctx, o->list_name, (int)n, p);
		return -EINVAL;
	}
	if (t->n == STORE_TIER_PROXIES_MAX) {
		nv_log(NV_ERR, NV_SUB_STORE, "%s: %s names more than %d proxies", o->ctx,
		       o->list_name, STORE_TIER_PROXIES_MAX);
		return -EINVAL;
	}
	u = strndup(p, n);
	if (!u)
		return -ENOMEM;
	t->px[t->n++].base_url = u;
	return 0;
}

/* A knob: 0 is def, else within [lo, hi]. */
static int knob(const struct store_tier_opts *o, const char *name, long v, long def, long lo,
		long hi, long *out)
{
	if (v == 0) {
		*out = def;
		return 0;
	}
	if (v < lo || v > hi) {
		nv_log(NV_ERR, NV_SUB_STORE, "%s: %s %ld is out of range %ld..%ld", o->ctx, name, v,
		       lo, hi);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int store_tier_new(const struct store_tier_opts *o, struct store_tier **out)
{
	struct store_tier *t;
	long slice_kib, hedge, eps;
	const char *p, *plus;
	int rc;

	*out = NULL;
	if (!o->list)
		return -EINVAL;
	if (!o->auth_file) {
		nv_log(NV_ERR, NV_SUB_STORE, "%s: %s needs %s (the proxies' token)", o->ctx,
		       o->list_name, o->auth_name);
		return -EINVAL;
	}
	if ((rc = knob(o, "slice KiB", o->slice_kib, STORE_TIER_SLICE_KIB_DEFAULT,
		       STORE_TIER_SLICE_KIB_MIN, STORE_TIER_SLICE_KIB_MAX, &slice_kib)) ||
	    (rc = knob(o, "hedge ms", o->hedge_ms, STORE_TIER_HEDGE_MS_DEFAULT,
		       STORE_TIER_HEDGE_MS_MIN, STORE_TIER_HEDGE_MS_MAX, &hedge)) ||
	    (rc = knob(o, "eps %", o->eps_pct, STORE_TIER_EPS_PCT_DEFAULT, STORE_TIER_EPS_PCT_MIN,
		       STORE_TIER_EPS_PCT_MAX, &eps)))
		return rc;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->px = calloc(STORE_TIER_PROXIES_MAX, sizeof(*t->px)))) {
		free(t);
		return -ENOMEM;
	}
	t->slice = (uint64_t)slice_kib << 10;
	t->hedge_ms = hedge;
	t->eps_pct = (int)eps;
	rc = read_auth(o, &t->auth);
	for (p = o->list; rc == 0 && *p; p = *plus ? plus + 1 : plus) {
		plus = strchr(p, '+');
		if (!plus)
			plus = p + strlen(p);
		rc = add_proxy(o, t, p, (size_t)(plus - p));
	}
	if (rc == 0 && t->n == 0)
		rc = add_proxy(o, t, "", 0);
	if (rc == 0 && !(t->ring = calloc((size_t)t->n * STORE_TIER_VNODES, sizeof(*t->ring))))
		rc = -ENOMEM;
	if (rc) {
		store_tier_free(t);
		return rc;
	}
	for (int i = 0; i < t->n; i++)
		for (int v = 0; v < STORE_TIER_VNODES; v++)
			t->ring[t->nring++] = (struct store_tier_pt){
				ring_hash(t->px[i].base_url, (uint64_t)v), i };
	qsort(t->ring, t->nring, sizeof(*t->ring), pt_cmp);
	*out = t;
	return 0;
}

/* tier.h invariant 2. */
int store_tier_pick(struct store_tier *t, const char *key, uint64_t page)
{
	uint64_t h = ring_hash(key, page);
	int64_t now = now_ms();
	size_t lo = 0, hi = t->nring;
	long total = atomic_load(&t->inflight) + 1;
	long cap = (total * (100 + t->eps_pct) + 100L * t->n - 1) / (100L * t->n);

	if (cap < 1)
		cap = 1;
	while (lo < hi) { /* first point at or after h */
		size_t mid = lo + (hi - lo) / 2;

		if (t->ring[mid].h < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = 0; k < t->nring; k++) {
		const struct store_tier_pt *pt = &t->ring[(lo + k) % t->nring];
		struct store_tier_proxy *px = &t->px[pt->idx];

		if (atomic_load(&px->down_until_ms) > now)
			continue;
		if (atomic_load(&px->inflight) < cap)
			return pt->idx;
	}
	return -1;
}

void store_tier_enter(struct store_tier *t, int idx)
{
	atomic_fetch_add(&t->px[idx].inflight, 1);
	atomic_fetch_add(&t->inflight, 1);
}

void store_tier_leave(struct store_tier *t, int idx)
{
	atomic_fetch_sub(&t->px[idx].inflight, 1);
	atomic_fetch_sub(&t->inflight, 1);
}

bool store_tier_is_down(const struct store_tier *t, int idx)
{
	return atomic_load(&t->px[idx].down_until_ms) > now_ms();
}

/* tier.h invariant 3. */
void store_tier_down(struct store_tier *t, int idx, const char *why)
{
	struct store_tier_proxy *px = &t->px[idx];

	atomic_store(&px->down_until_ms, now_ms() + STORE_TIER_DOWN_MS);
	atomic_fetch_add(&px->fails, 1);
	nv_log_ratelimited(&down_rl, NV_WARN, NV_SUB_STORE,
			   "cache proxy %s: %s; reads go straight to the bucket for %d ms",
			   px->base_url, why, STORE_TIER_DOWN_MS);
}

void store_tier_counts(const struct store_tier *t, unsigned long long *gets,
		       unsigned long long *fails)
{
	*gets = *fails = 0;
	for (int i = 0; i < t->n; i++) {
		*gets += atomic_load(&t->px[i].gets);
		*fails += atomic_load(&t->px[i].fails);
	}
}
