/*
 * set.c - see set.h.
 *
 * Both the set and the router are store backends (store.h backend side)
 * over other stores, so counters, key checks and failpoints apply at
 * every level.  Lists merge the members' sorted listings by pulling each
 * member's keys in pages (store_list with start_after) and emitting the
 * smallest, so memory stays one page per member.
 *
 * Member health: a member that fails a put, get or head with anything
 * but an answer about the key (exists, missing, out of range, invalid)
 * is down for a backoff (2 s, doubling to 60 s at each failed probe,
 * reset by its next success; a failure while it is still down, when it
 * was tried because no other member had the key, changes nothing).
 * Puts, gets and heads try members that are up first (the location's
 * first among them), then the down ones, so a dead zone
 * costs one failed request per backoff, not one per slot; the first
 * request after the backoff probes it again.  The health fields are
 * atomics, read and written by any thread without a lock: a lost
 * update only shifts a backoff.
 */
#include "config.h"
#include "engine/store/set.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SET_MAX 8
#define MERGE_PAGE 256

#define BACKOFF_MIN_NS (2 * NV_NS_PER_S)
#define BACKOFF_MAX_NS (60 * NV_NS_PER_S)

struct member {
	struct store *st;
	char zone[65];
	_Atomic uint64_t down_until; /* monotonic ns; 0: up */
	_Atomic uint64_t backoff;    /* ns of the last backoff; 0: up */
};

struct set_be {
	struct member m[SET_MAX];
	int n;
	int pref; /* the location's member */
	uint64_t backoff_min, backoff_max;
};

/* The order to try members in: the preferred one, then the others. */
static int nth(const struct set_be *s, int i)
{
	return i == 0 ? s->pref : (i <= s->pref ? i - 1 : i);
}

/* The order for one request: members that are up (in nth() order), then
 * those still in their backoff.  Returns s->n. */
static int order(struct set_be *s, int out[SET_MAX])
{
	uint64_t now = nv_now_mono_ns();
	int k = 0;

	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < s->n; i++) {
			int m = nth(s, i);
			bool up = atomic_load(&s->m[m].down_until) <= now;

			if (up == (pass == 0))
				out[k++] = m;
		}
	return k;
}

/* Did rc say something about the key (the member works) or fail? */
static bool answered(int rc)
{
	return rc == 0 || rc == -EEXIST || rc == -ENOENT || rc == -ERANGE || rc == -EINVAL ||
	       rc == -ENOTSUP || rc == -ENOMEM;
}

/* Bookkeeping after a request to member k returned rc. */
static void health(struct set_be *s, int k, int rc, const char *key)
{
	struct member *m = &s->m[k];

	if (answered(rc)) {
		if (atomic_load(&m->backoff) && atomic_exchange(&m->backoff, 0)) {
			atomic_store(&m->down_until, 0);
			nv_log(NV_INFO, NV_SUB_STORE, "zone %s (%s) answers again", m->zone,
			       store_name(m->st));
		}
		return;
	}
	if (atomic_load(&m->down_until) > nv_now_mono_ns()) {
		/* Still in its backoff: tried only because no member that is
		 * up had the key.  The backoff grows with probes, not here. */
		nv_log(NV_DEBUG, NV_SUB_STORE, "zone %s (%s), down, failed on %s too (%s)", m->zone,
		       store_name(m->st), key, strerror(-rc));
		return;
	}
	{
		uint64_t b = atomic_load(&m->backoff);

		b = b ? (b * 2 > s->backoff_max ? s->backoff_max : b * 2) : s->backoff_min;
		atomic_store(&m->backoff, b);
		atomic_store(&m->down_until, nv_now_mono_ns() + b);
		nv_log(NV_WARN, NV_SUB_STORE, "zone %s (%s) failed on %s (%s): trying the other "
		       "zones first for %llu ms", m->zone, store_name(m->st), key, strerror(-rc),
		       (unsigned long long)(b / NV_NS_PER_MS));
	}
}

static void set_close(void *be)
{
	struct set_be *s = be;

	for (int i = 0; i < s->n; i++)
		store_close(s->m[i].st);
	free(s);
}

static int set_put(void *be, const char *key, const struct iovec *iov, int iovcnt,
		   unsigned flags)
{
	struct set_be *s = be;
	int rc = -EIO;

	if (flags & STORE_EVERYWHERE) {
		bool made[SET_MAX] = { false }, any = false, exists = false;

		for (int i = 0; i < s->n; i++) {
			int r = store_put(s->m[i].st, key, iov, iovcnt, flags);

			if (r == 0)
				made[i] = any = true;
			else if (r == -EEXIST)
				exists = true;
			else
				rc = r;
		}
		if (exists) {
			/* Invariant 1: no copy of ours beside an existing key. */
			for (int i = 0; i < s->n; i++) {
				const char *keys[1] = { key };

				if (made[i] && store_delete(s->m[i].st, keys, 1))
					nv_log(NV_WARN, NV_SUB_STORE, "%s: could not take back the copy "
					       "put into %s", key, store_name(s->m[i].st));
			}
			return -EEXIST;
		}
		return any ? 0 : rc;
	}
	{
		int ord[SET_MAX], n = order(s, ord);

		for (int i = 0; i < n; i++) {
			rc = store_put(s->m[ord[i]].st, key, iov, iovcnt, flags);
			health(s, ord[i], rc, key);
			if (answered(rc))
				return rc;
		}
	}
	return rc;
}

/* Reads: the location's bucket first, then the others; -ENOENT only when
 * every member misses (invariant 2). */
static int set_get_range(void *be, const char *key, uint64_t off, size_t len, void *dst,
			 size_t *got)
{
	struct set_be *s = be;
	int rc = -ENOENT, err = 0, ord[SET_MAX], n = order(s, ord);

	for (int i = 0; i < n; i++) {
		rc = store_get_range(s->m[ord[i]].st, key, off, len, dst, got);
		health(s, ord[i], rc, key);
		if (rc == 0 || rc == -ERANGE)
			return rc;
		if (rc != -ENOENT)
			err = rc;
	}
	return err ? err : -ENOENT;
}

static int set_head(void *be, const char *key, uint64_t *size)
{
	struct set_be *s = be;
	int rc, err = 0, ord[SET_MAX], n = order(s, ord);

	for (int i = 0; i < n; i++) {
		rc = store_head(s->m[ord[i]].st, key, size);
		health(s, ord[i], rc, key);
		if (rc == 0)
			return 0;
		if (rc != -ENOENT)
			err = rc;
	}
	return err ? err : -ENOENT;
}

/* Copies: each member's in read order until one is good.  A bad copy is
 * an answer about the key (the zone works), so it starts no backoff. */
static int set_read_copies(void *be, const char *key, store_copy_fn fn, void *arg)
{
	struct set_be *s = be;
	int rc = -ENOENT, err = 0, bad = -1, ord[SET_MAX], n = order(s, ord);

	for (int i = 0; i < n; i++) {
		rc = fn(arg, s->m[ord[i]].st);
		health(s, ord[i], rc == -EBADMSG ? 0 : rc, key);
		if (rc == 0 || rc == -ERANGE) {
			if (rc == 0 && bad >= 0)
				nv_log(NV_WARN, NV_SUB_STORE, "%s: the copy in zone %s fails "
				       "verification; read the one in zone %s", key, s->m[bad].zone,
				       s->m[ord[i]].zone);
			return rc;
		}
		if (rc == -EBADMSG && bad < 0)
			bad = ord[i];
		if (rc != -ENOENT && err != -EBADMSG)
			err = rc;
	}
	return err ? err : -ENOENT;
}

static void set_stats(void *be, struct store_stats *out)
{
	struct set_be *s = be;

	for (int i = 0; i < s->n; i++)
		store_stats_add(out, s->m[i].st);
}

static int set_del(void *be, const char *const *keys, size_t n)
{
	struct set_be *s = be;
	int first = 0;

	for (int i = 0; i < s->n; i++) {
		int rc = store_delete(s->m[i].st, keys, n);

		if (rc && !first)
			first = rc;
	}
	return first;
}

/* ------------------------------------------------------------ merged lists */

struct page {
	char **keys;
	uint64_t *sizes;
	int n, at;
	bool done;
	char *after; /* last key pulled */
};

struct pull {
	struct page *pg;
};

static int pull_fn(void *arg, const char *key, uint64_t size)
{
	struct page *pg = arg;

	pg->keys[pg->n] = strdup(key);
	if (!pg->keys[pg->n])
		return -ENOMEM;
	pg->sizes[pg->n++] = size;
	return pg->n == MERGE_PAGE ? 1 : 0;
}

static void page_clear(struct page *pg)
{
	for (int i = 0; i < pg->n; i++)
		free(pg->keys[i]);
	pg->n = pg->at = 0;
}

static int refill(struct store *st, const char *prefix, struct page *pg)
{
	int rc;

	page_clear(pg);
	rc = store_list(st, prefix, pg->after, pull_fn, pg);
	if (rc < 0)
		return rc;
	if (pg->n < MERGE_PAGE)
		pg->done = true;
	if (pg->n) {
		free(pg->after);
		pg->after = strdup(pg->keys[pg->n - 1]);
		if (!pg->after)
			return -ENOMEM;
	}
	return 0;
}

/* Merge the sorted listings of n stores (dropping duplicates). */
static int merge_list(struct store *const *st, int n, const char *prefix,
		      const char *start_after, store_list_fn fn, void *arg)
{
	struct page pg[SET_MAX];
	char *last = NULL;
	int rc = 0;

	memset(pg, 0, sizeof(pg));
	for (int i = 0; i < n && !rc; i++) {
		pg[i].keys = calloc(MERGE_PAGE, sizeof(char *));
		pg[i].sizes = calloc(MERGE_PAGE, sizeof(uint64_t));
		pg[i].after = start_after ? strdup(start_after) : NULL;
		if (!pg[i].keys || !pg[i].sizes || (start_after && !pg[i].after))
			rc = -ENOMEM;
		if (!rc)
			rc = refill(st[i], prefix, &pg[i]);
	}
	while (!rc) {
		int best = -1;

		for (int i = 0; i < n; i++) {
			if (pg[i].at == pg[i].n && !pg[i].done) {
				rc = refill(st[i], prefix, &pg[i]);
				if (rc)
					break;
			}
			if (pg[i].at < pg[i].n &&
			    (best < 0 || strcmp(pg[i].keys[pg[i].at], pg[best].keys[pg[best].at]) < 0))
				best = i;
		}
		if (rc || best < 0)
			break;
		if (!last || strcmp(last, pg[best].keys[pg[best].at])) {
			rc = fn(arg, pg[best].keys[pg[best].at], pg[best].sizes[pg[best].at]);
			free(last);
			last = strdup(pg[best].keys[pg[best].at]);
			if (!rc && !last)
				rc = -ENOMEM;
		}
		pg[best].at++;
	}
	free(last);
	for (int i = 0; i < n; i++) {
		page_clear(&pg[i]);
		free(pg[i].keys);
		free(pg[i].sizes);
		free(pg[i].after);
	}
	return rc < 0 ? rc : 0;
}

static int set_list(void *be, const char *prefix, const char *start_after, store_list_fn fn,
		    void *arg)
{
	struct set_be *s = be;
	struct store *st[SET_MAX];

	for (int i = 0; i < s->n; i++)
		st[i] = s->m[i].st;
	return merge_list(st, s->n, prefix, start_after, fn, arg);
}

/* Multipart: the preferred member (settled objects never go to a set). */
static int set_mpu_create(void *be, const char *key, void **upload)
{
	struct set_be *s = be;

	return store_mpu_create(s->m[s->pref].st, key, (struct store_mpu **)upload);
}

static int set_mpu_put_part(void *be, void *upload, int part_no, const struct iovec *iov,
			    int iovcnt)
{
	return store_mpu_put_part(upload, part_no, iov, iovcnt);
}

static int set_mpu_copy_part(void *be, void *upload, int part_no, const char *src_key,
			     uint64_t off, uint64_t len)
{
	return store_mpu_copy_part(upload, part_no, src_key, off, len);
}

static int set_mpu_complete(void *be, void *upload, unsigned flags)
{
	return store_mpu_complete(upload, flags);
}

static void set_mpu_abort(void *be, void *upload)
{
	store_mpu_abort(upload);
}

static const struct store_backend_ops set_ops = {
	.scheme = "set",
	.close = set_close,
	.put = set_put,
	.get_range = set_get_range,
	.head = set_head,
	.read_copies = set_read_copies,
	.stats = set_stats,
	.del = set_del,
	.list = set_list,
	.mpu_create = set_mpu_create,
	.mpu_put_part = set_mpu_put_part,
	.mpu_copy_part = set_mpu_copy_part,
	.mpu_complete = set_mpu_complete,
	.mpu_abort = set_mpu_abort,
};

/* zone=Z of a URL's query, into zone; for dir: URLs the query is cut off
 * (the directory backend takes none). */
static int split_zone(char *url, char *zone, size_t cap)
{
	char *q = strchr(url, '?'), *p;

	zone[0] = 0;
	if (!q)
		return 0;
	for (p = q + 1; p && *p;) {
		char *amp = strchr(p, '&');
		size_t n = amp ? (size_t)(amp - p) : strlen(p);

		if (n > 5 && !strncmp(p, "zone=", 5)) {
			if (n - 5 >= cap)
				return -EINVAL;
			memcpy(zone, p + 5, n - 5);
			zone[n - 5] = 0;
		}
		p = amp ? amp + 1 : NULL;
	}
	if (!strncmp(url, "dir:", 4) || url[0] == '/')
		*q = 0;
	return 0;
}

int store_set_new(struct store **members, char **zones, int n, const char *location,
		  uint64_t backoff_min_ns, struct store **out)
{
	struct set_be *s = n > 0 && n <= SET_MAX ? calloc(1, sizeof(*s)) : NULL;
	char name[512] = "set(";

	if (!s) {
		for (int i = 0; i < n; i++)
			store_close(members[i]);
		if (n <= 0 || n > SET_MAX) {
			nv_log(NV_ERR, NV_SUB_STORE, "a bucket set holds 1 to %d buckets, not %d",
			       SET_MAX, n);
			return -EINVAL;
		}
		return -ENOMEM;
	}
	s->backoff_min = backoff_min_ns ? backoff_min_ns : BACKOFF_MIN_NS;
	s->backoff_max = s->backoff_min > BACKOFF_MAX_NS ? s->backoff_min : BACKOFF_MAX_NS;
	for (int i = 0; i < n; i++) {
		s->m[i].st = members[i];
		if (zones && zones[i] && zones[i][0])
			snprintf(s->m[i].zone, sizeof(s->m[i].zone), "%s", zones[i]);
		else
			snprintf(s->m[i].zone, sizeof(s->m[i].zone), "z%d", i);
		if (location && !strcmp(location, s->m[i].zone))
			s->pref = i;
		snprintf(name + strlen(name), sizeof(name) - strlen(name), "%s%s=%s",
			 i ? ";" : "", s->m[i].zone, store_name(s->m[i].st));
	}
	s->n = n;
	snprintf(name + strlen(name), sizeof(name) - strlen(name), ")");
	nv_log(NV_INFO, NV_SUB_STORE, "bucket set %s, preferring zone %s", name,
	       s->m[s->pref].zone);
	return store_wrap(&set_ops, s, name, out);
}

int store_set_open(const char *urls, const char *location, struct store **out)
{
	struct store *st[SET_MAX];
	char zone[SET_MAX][65], *zones[SET_MAX];
	char *copy = strdup(urls), *save = NULL;
	int n = 0, rc = 0;

	if (!copy)
		return -ENOMEM;
	for (char *u = strtok_r(copy, ";", &save); u && !rc; u = strtok_r(NULL, ";", &save)) {
		if (n == SET_MAX) {
			nv_log(NV_ERR, NV_SUB_STORE, "a bucket set holds at most %d buckets", SET_MAX);
			rc = -EINVAL;
			break;
		}
		rc = split_zone(u, zone[n], sizeof(zone[n]));
		if (!rc)
			rc = store_open(u, &st[n]);
		if (rc)
			break;
		zones[n] = zone[n];
		n++;
	}
	free(copy);
	if (!rc && n == 0) {
		nv_log(NV_ERR, NV_SUB_STORE, "an empty bucket set");
		rc = -EINVAL;
	}
	if (rc) {
		for (int i = 0; i < n; i++)
			store_close(st[i]);
		return rc;
	}
	return store_set_new(st, zones, n, location, 0, out);
}

/* ------------------------------------------------------------ the router */

#define EXPRESS_PREFIX "chains/express/"

struct route_be {
	struct store *std, *express;
};

static struct store *route(const struct route_be *r, const char *key)
{
	return strncmp(key, EXPRESS_PREFIX, sizeof(EXPRESS_PREFIX) - 1) ? r->std : r->express;
}

static void r_close(void *be)
{
	struct route_be *r = be;

	store_close(r->std);
	store_close(r->express);
	free(r);
}

static int r_put(void *be, const char *key, const struct iovec *iov, int iovcnt, unsigned flags)
{
	return store_put(route(be, key), key, iov, iovcnt, flags);
}

static int r_get_range(void *be, const char *key, uint64_t off, size_t len, void *dst,
		       size_t *got)
{
	return store_get_range(route(be, key), key, off, len, dst, got);
}

static int r_head(void *be, const char *key, uint64_t *size)
{
	return store_head(route(be, key), key, size);
}

static int r_presign(void *be, const char *key, unsigned ttl_s, struct nv_buf *url)
{
	return store_presign(route(be, key), key, ttl_s, url);
}

static int r_read_copies(void *be, const char *key, store_copy_fn fn, void *arg)
{
	return store_read_copies(route(be, key), key, fn, arg);
}

static void r_stats(void *be, struct store_stats *out)
{
	struct route_be *r = be;

	store_stats_add(out, r->std);
	store_stats_add(out, r->express);
}

/* One delete request per member: the keys that route to it, in order. */
static int r_del(void *be, const char *const *keys, size_t n)
{
	struct route_be *r = be;
	struct store *members[2] = { r->std, r->express };
	const char **part = malloc((n ? n : 1) * sizeof(*part));
	int first = 0;

	if (!part)
		return -ENOMEM;
	for (int m = 0; m < 2; m++) {
		size_t k = 0;
		int rc;

		for (size_t i = 0; i < n; i++)
			if (route(r, keys[i]) == members[m])
				part[k++] = keys[i];
		if (!k)
			continue;
		rc = store_delete(members[m], part, k);
		if (rc && !first)
			first = rc;
	}
	free(part);
	return first;
}

static int r_list(void *be, const char *prefix, const char *start_after, store_list_fn fn,
		  void *arg)
{
	struct route_be *r = be;
	size_t pl = strlen(prefix), el = sizeof(EXPRESS_PREFIX) - 1;
	struct store *both[2] = { r->std, r->express };

	if (pl >= el && !strncmp(prefix, EXPRESS_PREFIX, el))
		return store_list(r->express, prefix, start_after, fn, arg);
	if (pl < el && !strncmp(prefix, EXPRESS_PREFIX, pl))
		return merge_list(both, 2, prefix, start_after, fn, arg);
	return store_list(r->std, prefix, start_after, fn, arg);
}

/* A router upload: the member's upload and the member it lives in. */
struct route_upload {
	struct store_mpu *inner;
	struct store *member;
};

static int r_mpu_create(void *be, const char *key, void **upload)
{
	struct route_upload *u = calloc(1, sizeof(*u));
	int rc;

	if (!u)
		return -ENOMEM;
	u->member = route(be, key);
	rc = store_mpu_create(u->member, key, &u->inner);
	if (rc) {
		free(u);
		return rc;
	}
	*upload = u;
	return 0;
}

static int r_mpu_put_part(void *be, void *upload, int part_no, const struct iovec *iov,
			  int iovcnt)
{
	struct route_upload *u = upload;

	return store_mpu_put_part(u->inner, part_no, iov, iovcnt);
}

/* A server-side copy only from a source in the upload's own member (an
 * express slot lives in the express set, not the standard bucket):
 * otherwise -ENOTSUP, and the caller reads the range and uploads it. */
static int r_mpu_copy_part(void *be, void *upload, int part_no, const char *src_key,
			   uint64_t off, uint64_t len)
{
	struct route_upload *u = upload;

	if (route(be, src_key) != u->member)
		return -ENOTSUP;
	return store_mpu_copy_part(u->inner, part_no, src_key, off, len);
}

static int r_mpu_complete(void *be, void *upload, unsigned flags)
{
	struct route_upload *u = upload;
	int rc = store_mpu_complete(u->inner, flags);

	free(u);
	return rc;
}

static void r_mpu_abort(void *be, void *upload)
{
	struct route_upload *u = upload;

	store_mpu_abort(u->inner);
	free(u);
}

static const struct store_backend_ops route_ops = {
	.scheme = "route",
	.close = r_close,
	.put = r_put,
	.get_range = r_get_range,
	.head = r_head,
	.read_copies = r_read_copies,
	.stats = r_stats,
	.del = r_del,
	.list = r_list,
	.mpu_create = r_mpu_create,
	.mpu_put_part = r_mpu_put_part,
	.mpu_copy_part = r_mpu_copy_part,
	.mpu_complete = r_mpu_complete,
	.mpu_abort = r_mpu_abort,
	.presign = r_presign,
};

int store_route_new(struct store *std, struct store *express, struct store **out)
{
	struct route_be *r;
	char name[512];

	if (!express) {
		*out = std;
		return 0;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		store_close(std);
		store_close(express);
		return -ENOMEM;
	}
	r->std = std;
	r->express = express;
	snprintf(name, sizeof(name), "standard=%s express=%s", store_name(std),
		 store_name(express));
	return store_wrap(&route_ops, r, name, out);
}
