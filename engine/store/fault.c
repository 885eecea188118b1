/*
 * fault.c - see fault.h.
 *
 * Randomness is a per-thread xorshift64* seeded from the spec's seed and
 * a thread counter, so a run with a fixed seed and one thread repeats.
 * Counters of injected faults are logged at close.
 */
#include "config.h"
#include "engine/store/fault.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fault_be {
	struct store *inner;
	double put_error, get_error, flip, shortp;
	int put_errno; /* what an injected put error returns (positive; EIO) */
	bool full;
	uint64_t full_after; /* 0: never */
	unsigned latency_ms;
	char prefix[256];
	uint64_t seed;
	atomic_uint_least64_t put_bytes;
	atomic_uint_least64_t n_put_err, n_get_err, n_flip, n_short, n_full;
	atomic_uint threads;
};

static __thread uint64_t rng_state;

static uint64_t rnd(struct fault_be *f)
{
	if (!rng_state)
		rng_state = (f->seed ^ (0x9e3779b97f4a7c15ULL * (1 + atomic_fetch_add(&f->threads, 1)))) | 1;
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static bool chance(struct fault_be *f, double p)
{
	return p > 0 && (double)(rnd(f) >> 11) / (double)(1ull << 53) < p;
}

static bool applies(const struct fault_be *f, const char *key)
{
	return !f->prefix[0] || strncmp(key, f->prefix, strlen(f->prefix)) == 0;
}

static void delay(struct fault_be *f)
{
	if (f->latency_ms) {
		uint64_t ns = (uint64_t)f->latency_ms * 1000000ull;
		uint64_t d = ns / 2 + rnd(f) % (ns + 1);
		struct timespec ts = { (time_t)(d / 1000000000ull), (long)(d % 1000000000ull) };

		nanosleep(&ts, NULL);
	}
}

/* A put-like call: disk full or an injected error first. */
static int put_fault(struct fault_be *f, const char *key, size_t len)
{
	delay(f);
	if (!applies(f, key))
		return 0;
	if (f->full || (f->full_after && atomic_load(&f->put_bytes) + len > f->full_after)) {
		atomic_fetch_add(&f->n_full, 1);
		return -ENOSPC;
	}
	if (chance(f, f->put_error)) {
		atomic_fetch_add(&f->n_put_err, 1);
		return -f->put_errno;
	}
	return 0;
}

static void f_close(void *be)
{
	struct fault_be *f = be;

	nv_log(NV_INFO, NV_SUB_STORE, "fault store: injected %llu put errors, %llu get errors, "
	       "%llu flips, %llu short reads, %llu disk-full",
	       (unsigned long long)f->n_put_err, (unsigned long long)f->n_get_err,
	       (unsigned long long)f->n_flip, (unsigned long long)f->n_short,
	       (unsigned long long)f->n_full);
	store_close(f->inner);
	free(f);
}

static int f_put(void *be, const char *key, const struct iovec *iov, int iovcnt, unsigned flags)
{
	struct fault_be *f = be;
	size_t len = store_iov_len(iov, iovcnt);
	int rc = put_fault(f, key, len);

	if (rc)
		return rc;
	rc = store_put(f->inner, key, iov, iovcnt, flags);
	if (!rc)
		atomic_fetch_add(&f->put_bytes, len);
	return rc;
}

static int f_get_range(void *be, const char *key, uint64_t off, size_t len, void *dst,
		       size_t *got)
{
	struct fault_be *f = be;
	int rc;

	delay(f);
	if (applies(f, key) && chance(f, f->get_error)) {
		atomic_fetch_add(&f->n_get_err, 1);
		return -EIO;
	}
	rc = store_get_range(f->inner, key, off, len, dst, got);
	if (rc || !applies(f, key) || *got == 0)
		return rc;
	if (chance(f, f->flip)) {
		size_t at = (size_t)(rnd(f) % *got);

		((uint8_t *)dst)[at] ^= (uint8_t)(1u << (rnd(f) % 8));
		atomic_fetch_add(&f->n_flip, 1);
	}
	if (*got > 1 && chance(f, f->shortp)) {
		*got = (size_t)(rnd(f) % *got);
		atomic_fetch_add(&f->n_short, 1);
	}
	return 0;
}

/* Signing sends nothing: no fault applies. */
static int f_presign(void *be, const char *key, unsigned ttl_s, struct nv_buf *url)
{
	struct fault_be *f = be;

	return store_presign(f->inner, key, ttl_s, url);
}

static int f_head(void *be, const char *key, uint64_t *size)
{
	struct fault_be *f = be;

	delay(f);
	if (applies(f, key) && chance(f, f->get_error)) {
		atomic_fetch_add(&f->n_get_err, 1);
		return -EIO;
	}
	return store_head(f->inner, key, size);
}

static int f_del(void *be, const char *const *keys, size_t n)
{
	struct fault_be *f = be;

	delay(f);
	return store_delete(f->inner, keys, n);
}

static int f_list(void *be, const char *prefix, const char *start_after, store_list_fn fn,
		  void *arg)
{
	struct fault_be *f = be;

	delay(f);
	return store_list(f->inner, prefix, start_after, fn, arg);
}

struct f_upload {
	struct store_mpu *m;
	char *key;
};

static int f_mpu_create(void *be, const char *key, void **upload)
{
	struct fault_be *f = be;
	struct f_upload *u = calloc(1, sizeof(*u));
	int rc;

	if (!u)
		return -ENOMEM;
	u->key = strdup(key);
	rc = u->key ? put_fault(f, key, 0) : -ENOMEM;
	if (!rc)
		rc = store_mpu_create(f->inner, key, &u->m);
	if (rc) {
		free(u->key);
		free(u);
		return rc;
	}
	*upload = u;
	return 0;
}

static int f_mpu_put_part(void *be, void *upload, int part_no, const struct iovec *iov,
			  int iovcnt)
{
	struct fault_be *f = be;
	struct f_upload *u = upload;
	size_t len = store_iov_len(iov, iovcnt);
	int rc = put_fault(f, u->key, len);

	if (!rc)
		rc = store_mpu_put_part(u->m, part_no, iov, iovcnt);
	if (!rc)
		atomic_fetch_add(&f->put_bytes, len);
	return rc;
}

static int f_mpu_copy_part(void *be, void *upload, int part_no, const char *src_key,
			   uint64_t off, uint64_t len)
{
	struct fault_be *f = be;
	struct f_upload *u = upload;
	int rc = put_fault(f, u->key, (size_t)len);

	return rc ? rc : store_mpu_copy_part(u->m, part_no, src_key, off, len);
}

static int f_mpu_complete(void *be, void *upload, unsigned flags)
{
	struct fault_be *f = be;
	struct f_upload *u = upload;
	int rc = put_fault(f, u->key, 0);

	if (rc)
		store_mpu_abort(u->m);
	else
		rc = store_mpu_complete(u->m, flags);
	free(u->key);
	free(u);
	return rc;
}

static void f_mpu_abort(void *be, void *upload)
{
	struct f_upload *u = upload;

	store_mpu_abort(u->m);
	free(u->key);
	free(u);
}

static const struct store_backend_ops fault_ops = {
	.scheme = "fault",
	.close = f_close,
	.put = f_put,
	.get_range = f_get_range,
	.head = f_head,
	.del = f_del,
	.list = f_list,
	.mpu_create = f_mpu_create,
	.mpu_put_part = f_mpu_put_part,
	.mpu_copy_part = f_mpu_copy_part,
	.mpu_complete = f_mpu_complete,
	.mpu_abort = f_mpu_abort,
	.presign = f_presign,
};

static int parse_prob(const char *v, double *out)
{
	char *end;
	double d = strtod(v, &end);

	if (end == v || *end || !(d >= 0 && d <= 1)) /* NaN fails too */
		return -EINVAL;
	*out = d;
	return 0;
}

/* Decimal digits only (no sign, no space), at most max. */
static int parse_u64(const char *v, uint64_t max, uint64_t *out)
{
	uint64_t x = 0;

	if (!*v)
		return -EINVAL;
	for (; *v; v++) {
		uint64_t d = (uint64_t)(*v - '0');

		if (*v < '0' || *v > '9' || d > max || x > (max - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
	}
	*out = x;
	return 0;
}

static int parse_spec(struct fault_be *f, const char *spec)
{
	char *copy = strdup(spec), *save = NULL;
	int rc = 0;

	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, ":,", &save); t && !rc; t = strtok_r(NULL, ":,", &save)) {
		char *eq = strchr(t, '=');
		const char *v;
		uint64_t x = 0;

		if (!eq) {
			rc = -EINVAL;
			break;
		}
		*eq = 0;
		v = eq + 1;
		if (!strcmp(t, "put_error"))
			rc = parse_prob(v, &f->put_error);
		else if (!strcmp(t, "put_errno"))
			rc = parse_u64(v, 4095, &x), f->put_errno = x ? (int)x : EIO;
		else if (!strcmp(t, "get_error"))
			rc = parse_prob(v, &f->get_error);
		else if (!strcmp(t, "flip"))
			rc = parse_prob(v, &f->flip);
		else if (!strcmp(t, "short"))
			rc = parse_prob(v, &f->shortp);
		else if (!strcmp(t, "full"))
			rc = parse_u64(v, 1, &x), f->full = x != 0;
		else if (!strcmp(t, "full_after"))
			rc = parse_u64(v, UINT64_MAX, &f->full_after);
		else if (!strcmp(t, "latency_ms"))
			rc = parse_u64(v, 60000, &x), f->latency_ms = (unsigned)x;
		else if (!strcmp(t, "seed"))
			rc = parse_u64(v, UINT64_MAX, &f->seed);
		else if (!strcmp(t, "prefix"))
			snprintf(f->prefix, sizeof(f->prefix), "%s", v);
		else
			rc = -EINVAL;
		if (rc)
			nv_log(NV_ERR, NV_SUB_STORE, "fault store: bad item '%s=%s'", t, v);
	}
	free(copy);
	return rc;
}

int fault_store_wrap(struct store *inner, const char *spec, struct store **out)
{
	struct fault_be *f = calloc(1, sizeof(*f));
	char name[512];
	int rc;

	if (!f) {
		store_close(inner);
		return -ENOMEM;
	}
	f->inner = inner;
	f->seed = (uint64_t)time(NULL);
	f->put_errno = EIO;
	rc = parse_spec(f, spec);
	if (rc) {
		store_close(inner);
		free(f);
		return rc;
	}
	nv_log(NV_WARN, NV_SUB_STORE, "fault injection on %s: %s (testing only)", store_name(inner),
	       spec);
	snprintf(name, sizeof(name), "fault(%s)", store_name(inner));
	return store_wrap(&fault_ops, f, name, out);
}
