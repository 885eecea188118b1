/*
 * fake_store.c - see fake_store.h.
 *
 * Structure: objects in one array sorted by key (binary search; tests hold
 * at most a few thousand objects), gates and injected errors in short
 * lists, and a call log.  One mutex (fs->lock) guards all of it and one
 * condition variable (fs->cond, CLOCK_MONOTONIC) carries every change a
 * waiter may care about: a gate opened, a put parked, an object stored.
 * A put parked at a gate holds no lock while it waits.
 */
#include "config.h"
#include "tests/unit/fake_store.h"
#include "src/base/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct fobj {
	char *key;
	uint8_t *data;
	size_t len;
};

struct fgate {
	char *prefix;
	bool open;
	unsigned parked;
	struct fgate *next;
};

struct ferr {
	char *prefix;
	enum fake_op op;
	int err;
	uint32_t left;
	struct ferr *next;
};

struct fcall {
	enum fake_op op;
	int rc;
	char *key;
};

struct fpart {
	int no;
	uint8_t *data;
	size_t len;
};

struct fupload {
	char *key;
	struct fpart *parts;
	int n, cap;
	pthread_mutex_t lock; /* parts may arrive from several threads */
};

struct fake_store {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fobj *objs; /* lock: sorted by key */
	size_t n, cap;     /* lock */
	struct fgate *gates; /* lock */
	struct ferr *errs;   /* lock */
	struct fcall *calls; /* lock */
	size_t ncalls, calls_cap;
};

static bool has_prefix(const char *key, const char *prefix)
{
	return strncmp(key, prefix, strlen(prefix)) == 0;
}

/* Index of key, or where it would go (*found false). */
static size_t find_locked(struct fake_store *fs, const char *key, bool *found)
{
	size_t lo = 0, hi = fs->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(fs->objs[mid].key, key);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static void log_call_locked(struct fake_store *fs, enum fake_op op, const char *key, int rc)
{
	if (fs->ncalls == fs->calls_cap) {
		size_t ncap = fs->calls_cap ? fs->calls_cap * 2 : 64;
		struct fcall *p = realloc(fs->calls, ncap * sizeof(*p));

		if (!p)
			return; /* the log is best effort; tests would see a low count */
		fs->calls = p;
		fs->calls_cap = ncap;
	}
	fs->calls[fs->ncalls].op = op;
	fs->calls[fs->ncalls].rc = rc;
	fs->calls[fs->ncalls].key = strdup(key ? key : "");
	fs->ncalls++;
}

static void log_call(struct fake_store *fs, enum fake_op op, const char *key, int rc)
{
	pthread_mutex_lock(&fs->lock);
	log_call_locked(fs, op, key, rc);
	pthread_mutex_unlock(&fs->lock);
}

/* An injected error for this call, consuming one, or 0. */
static int injected_locked(struct fake_store *fs, enum fake_op op, const char *key)
{
	for (struct ferr *e = fs->errs; e; e = e->next) {
		if (e->op != op || e->left == 0 || !has_prefix(key, e->prefix))
			continue;
		if (e->left != UINT32_MAX)
			e->left--;
		return -e->err;
	}
	return 0;
}

static struct fgate *closed_gate_locked(struct fake_store *fs, const char *key)
{
	for (struct fgate *g = fs->gates; g; g = g->next)
		if (!g->open && has_prefix(key, g->prefix))
			return g;
	return NULL;
}

/* Store data (ownership passes) as key under the lock. */
static int store_locked(struct fake_store *fs, const char *key, uint8_t *data, size_t len,
			unsigned flags)
{
	bool found;
	size_t i = find_locked(fs, key, &found);

	if (found) {
		if (flags & STORE_CREATE_ONCE) {
			free(data);
			return -EEXIST;
		}
		free(fs->objs[i].data);
		fs->objs[i].data = data;
		fs->objs[i].len = len;
		pthread_cond_broadcast(&fs->cond);
		return 0;
	}
	if (fs->n == fs->cap) {
		size_t ncap = fs->cap ? fs->cap * 2 : 64;
		struct fobj *p = realloc(fs->objs, ncap * sizeof(*p));

		if (!p) {
			free(data);
			return -ENOMEM;
		}
		fs->objs = p;
		fs->cap = ncap;
	}
	{
		char *k = strdup(key);

		if (!k) {
			free(data);
			return -ENOMEM;
		}
		memmove(&fs->objs[i + 1], &fs->objs[i], (fs->n - i) * sizeof(*fs->objs));
		fs->objs[i].key = k;
		fs->objs[i].data = data;
		fs->objs[i].len = len;
		fs->n++;
	}
	pthread_cond_broadcast(&fs->cond);
	return 0;
}

static uint8_t *flatten(const struct iovec *iov, int iovcnt, size_t *len)
{
	size_t n = store_iov_len(iov, iovcnt), at = 0;
	uint8_t *p = malloc(n ? n : 1);

	if (!p)
		return NULL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(p + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	*len = n;
	return p;
}

/* ------------------------------------------------------------ backend */

static void fk_close(void *be)
{
	struct fake_store *fs = be;

	for (size_t i = 0; i < fs->n; i++) {
		free(fs->objs[i].key);
		free(fs->objs[i].data);
	}
	free(fs->objs);
	while (fs->gates) {
		struct fgate *g = fs->gates;

		fs->gates = g->next;
		free(g->prefix);
		free(g);
	}
	fake_store_clear_errors(fs);
	for (size_t i = 0; i < fs->ncalls; i++)
		free(fs->calls[i].key);
	free(fs->calls);
	pthread_cond_destroy(&fs->cond);
	pthread_mutex_destroy(&fs->lock);
	free(fs);
}

static int fk_put(void *be, const char *key, const struct iovec *iov, int iovcnt,
		  unsigned flags)
{
	struct fake_store *fs = be;
	uint8_t *data;
	size_t len = 0;
	int rc;

	pthread_mutex_lock(&fs->lock);
	rc = injected_locked(fs, FAKE_PUT, key);
	if (rc) {
		log_call_locked(fs, FAKE_PUT, key, rc);
		pthread_mutex_unlock(&fs->lock);
		return rc;
	}
	for (;;) {
		struct fgate *g = closed_gate_locked(fs, key);

		if (!g)
			break;
		g->parked++;
		pthread_cond_broadcast(&fs->cond);
		while (!g->open)
			pthread_cond_wait(&fs->cond, &fs->lock);
		g->parked--;
	}
	pthread_mutex_unlock(&fs->lock);

	data = flatten(iov, iovcnt, &len);
	pthread_mutex_lock(&fs->lock);
	rc = data ? store_locked(fs, key, data, len, flags) : -ENOMEM;
	if (!rc)
		rc = injected_locked(fs, FAKE_PUT_LATE, key);
	log_call_locked(fs, FAKE_PUT, key, rc);
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

static int fk_get_range(void *be, const char *key, uint64_t off, size_t len, void *dst,
			size_t *got)
{
	struct fake_store *fs = be;
	bool found;
	size_t i;
	int rc;

	pthread_mutex_lock(&fs->lock);
	rc = injected_locked(fs, FAKE_GET, key);
	if (!rc) {
		i = find_locked(fs, key, &found);
		if (!found) {
			rc = -ENOENT;
		} else if (off > fs->objs[i].len) {
			rc = -ERANGE;
		} else {
			size_t n = fs->objs[i].len - (size_t)off;

			if (n > len)
				n = len;
			if (n)
				memcpy(dst, fs->objs[i].data + off, n);
			*got = n;
		}
	}
	log_call_locked(fs, FAKE_GET, key, rc);
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

static int fk_head(void *be, const char *key, uint64_t *size)
{
	struct fake_store *fs = be;
	bool found;
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&fs->lock);
	i = find_locked(fs, key, &found);
	if (found)
		*size = fs->objs[i].len;
	else
		rc = -ENOENT;
	log_call_locked(fs, FAKE_HEAD, key, rc);
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

static int fk_del(void *be, const char *const *keys, size_t n)
{
	struct fake_store *fs = be;

	pthread_mutex_lock(&fs->lock);
	for (size_t k = 0; k < n; k++) {
		bool found;
		size_t i = find_locked(fs, keys[k], &found);

		if (found) {
			free(fs->objs[i].key);
			free(fs->objs[i].data);
			memmove(&fs->objs[i], &fs->objs[i + 1], (fs->n - i - 1) * sizeof(*fs->objs));
			fs->n--;
		}
		log_call_locked(fs, FAKE_DEL, keys[k], 0);
	}
	pthread_cond_broadcast(&fs->cond);
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

static int fk_list(void *be, const char *prefix, const char *start_after, store_list_fn fn,
		   void *arg)
{
	struct fake_store *fs = be;
	char **keys = NULL;
	uint64_t *sizes = NULL;
	size_t n = 0;
	int rc = 0;

	pthread_mutex_lock(&fs->lock);
	log_call_locked(fs, FAKE_LIST, prefix, 0);
	keys = calloc(fs->n ? fs->n : 1, sizeof(*keys));
	sizes = calloc(fs->n ? fs->n : 1, sizeof(*sizes));
	if (!keys || !sizes) {
		rc = -ENOMEM;
	} else {
		for (size_t i = 0; i < fs->n; i++) {
			if (!has_prefix(fs->objs[i].key, prefix) ||
			    strcmp(fs->objs[i].key, start_after) <= 0)
				continue;
			keys[n] = strdup(fs->objs[i].key);
			sizes[n] = fs->objs[i].len;
			if (!keys[n]) {
				rc = -ENOMEM;
				break;
			}
			n++;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	for (size_t i = 0; !rc && i < n; i++) {
		rc = fn(arg, keys[i], sizes[i]);
		if (rc == 1) {
			rc = 0;
			break;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	free(sizes);
	return rc;
}

static void upload_free(struct fupload *u)
{
	for (int i = 0; i < u->n; i++)
		free(u->parts[i].data);
	free(u->parts);
	free(u->key);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

static int fk_mpu_create(void *be, const char *key, void **upload)
{
	struct fupload *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->key = strdup(key);
	if (!u->key) {
		free(u);
		return -ENOMEM;
	}
	pthread_mutex_init(&u->lock, NULL);
	log_call(be, FAKE_MPU, key, 0);
	*upload = u;
	return 0;
}

/* Set part no of u to data (ownership passes). */
static int upload_set(struct fupload *u, int no, uint8_t *data, size_t len)
{
	int rc = 0;

	pthread_mutex_lock(&u->lock);
	for (int i = 0; i < u->n; i++) {
		if (u->parts[i].no == no) {
			free(u->parts[i].data);
			u->parts[i].data = data;
			u->parts[i].len = len;
			pthread_mutex_unlock(&u->lock);
			return 0;
		}
	}
	if (u->n == u->cap) {
		int ncap = u->cap ? u->cap * 2 : 8;
		struct fpart *p = realloc(u->parts, (size_t)ncap * sizeof(*p));

		if (!p) {
			rc = -ENOMEM;
			free(data);
			goto out;
		}
		u->parts = p;
		u->cap = ncap;
	}
	u->parts[u->n].no = no;
	u->parts[u->n].data = data;
	u->parts[u->n].len = len;
	u->n++;
out:
	pthread_mutex_unlock(&u->lock);
	return rc;
}

static int fk_mpu_put_part(void *be, void *upload, int part_no, const struct iovec *iov,
			   int iovcnt)
{
	size_t len = 0;
	uint8_t *data = flatten(iov, iovcnt, &len);

	(void)be;
	if (!data)
		return -ENOMEM;
	return upload_set(upload, part_no, data, len);
}

static int fk_mpu_copy_part(void *be, void *upload, int part_no, const char *src_key,
			    uint64_t off, uint64_t len)
{
	struct fake_store *fs = be;
	uint8_t *data = NULL;
	bool found;
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&fs->lock);
	i = find_locked(fs, src_key, &found);
	if (!found)
		rc = -ENOENT;
	else if (off > fs->objs[i].len || len > fs->objs[i].len - off)
		rc = -ERANGE;
	else if (!(data = malloc(len ? len : 1)))
		rc = -ENOMEM;
	else
		memcpy(data, fs->objs[i].data + off, len);
	pthread_mutex_unlock(&fs->lock);
	if (rc)
		return rc;
	return upload_set(upload, part_no, data, len);
}

static int part_cmp(const void *a, const void *b)
{
	const struct fpart *x = a, *y = b;

	return x->no - y->no;
}

static int fk_mpu_complete(void *be, void *upload, unsigned flags)
{
	struct fake_store *fs = be;
	struct fupload *u = upload;
	size_t total = 0, at = 0;
	uint8_t *data;
	int rc;

	qsort(u->parts, (size_t)u->n, sizeof(*u->parts), part_cmp);
	for (int i = 0; i < u->n; i++)
		total += u->parts[i].len;
	data = malloc(total ? total : 1);
	if (!data) {
		upload_free(u);
		return -ENOMEM;
	}
	for (int i = 0; i < u->n; i++) {
		if (u->parts[i].len)
			memcpy(data + at, u->parts[i].data, u->parts[i].len);
		at += u->parts[i].len;
	}
	pthread_mutex_lock(&fs->lock);
	rc = store_locked(fs, u->key, data, total, flags);
	log_call_locked(fs, FAKE_MPU, u->key, rc);
	pthread_mutex_unlock(&fs->lock);
	upload_free(u);
	return rc;
}

static void fk_mpu_abort(void *be, void *upload)
{
	(void)be;
	upload_free(upload);
}

static const struct store_backend_ops fake_ops = {
	.scheme = "fake",
	.close = fk_close,
	.put = fk_put,
	.get_range = fk_get_range,
	.head = fk_head,
	.del = fk_del,
	.list = fk_list,
	.mpu_create = fk_mpu_create,
	.mpu_put_part = fk_mpu_put_part,
	.mpu_copy_part = fk_mpu_copy_part,
	.mpu_complete = fk_mpu_complete,
	.mpu_abort = fk_mpu_abort,
};

int fake_store_open(struct fake_store **out_fs, struct store **out)
{
	struct fake_store *fs = calloc(1, sizeof(*fs));
	int rc;

	if (!fs)
		return -ENOMEM;
	pthread_mutex_init(&fs->lock, NULL);
	nv_cond_init_mono(&fs->cond);
	rc = store_wrap(&fake_ops, fs, "fake:", out);
	if (rc)
		return rc; /* fs freed by fk_close */
	*out_fs = fs;
	return 0;
}

/* ---------------------------------------------------------------- hooks */

static struct fgate *gate_find_locked(struct fake_store *fs, const char *prefix)
{
	for (struct fgate *g = fs->gates; g; g = g->next)
		if (!strcmp(g->prefix, prefix))
			return g;
	return NULL;
}

void fake_store_gate(struct fake_store *fs, const char *prefix)
{
	struct fgate *g;

	pthread_mutex_lock(&fs->lock);
	g = gate_find_locked(fs, prefix);
	if (!g) {
		g = calloc(1, sizeof(*g));
		if (g)
			g->prefix = strdup(prefix);
		if (g && !g->prefix) {
			free(g);
			g = NULL;
		}
		if (g) {
			g->next = fs->gates;
			fs->gates = g;
		}
	}
	if (g)
		g->open = false;
	pthread_mutex_unlock(&fs->lock);
}

void fake_store_open_gate(struct fake_store *fs, const char *prefix)
{
	struct fgate *g;

	pthread_mutex_lock(&fs->lock);
	g = gate_find_locked(fs, prefix);
	if (g)
		g->open = true;
	pthread_cond_broadcast(&fs->cond);
	pthread_mutex_unlock(&fs->lock);
}

void fake_store_open_all_gates(struct fake_store *fs)
{
	pthread_mutex_lock(&fs->lock);
	for (struct fgate *g = fs->gates; g; g = g->next)
		g->open = true;
	pthread_cond_broadcast(&fs->cond);
	pthread_mutex_unlock(&fs->lock);
}

unsigned fake_store_parked(struct fake_store *fs, const char *prefix)
{
	struct fgate *g;
	unsigned n;

	pthread_mutex_lock(&fs->lock);
	g = gate_find_locked(fs, prefix);
	n = g ? g->parked : 0;
	pthread_mutex_unlock(&fs->lock);
	return n;
}

/* Wait on fs->cond (lock held) until pred or the deadline.  true if pred. */
static bool wait_until_locked(struct fake_store *fs, bool (*pred)(struct fake_store *, const void *),
			      const void *arg, unsigned timeout_ms)
{
	struct timespec ts = nv_mono_deadline((uint64_t)timeout_ms * NV_NS_PER_MS);

	while (!pred(fs, arg))
		if (pthread_cond_timedwait(&fs->cond, &fs->lock, &ts) == ETIMEDOUT)
			return pred(fs, arg);
	return true;
}

struct parked_arg {
	const char *prefix;
	unsigned n;
};

static bool parked_pred(struct fake_store *fs, const void *arg)
{
	const struct parked_arg *a = arg;
	struct fgate *g = gate_find_locked(fs, a->prefix);

	return g && g->parked >= a->n;
}

bool fake_store_wait_parked(struct fake_store *fs, const char *prefix, unsigned n,
			    unsigned timeout_ms)
{
	struct parked_arg a = { prefix, n };
	bool ok;

	pthread_mutex_lock(&fs->lock);
	ok = wait_until_locked(fs, parked_pred, &a, timeout_ms);
	pthread_mutex_unlock(&fs->lock);
	return ok;
}

void fake_store_fail(struct fake_store *fs, enum fake_op op, const char *prefix, int err,
		     uint32_t n)
{
	struct ferr *e = calloc(1, sizeof(*e));

	if (!e)
		return;
	e->prefix = strdup(prefix);
	if (!e->prefix) {
		free(e);
		return;
	}
	e->op = op;
	e->err = err;
	e->left = n;
	pthread_mutex_lock(&fs->lock);
	/* Append: earlier injections are consumed first. */
	{
		struct ferr **pp = &fs->errs;

		while (*pp)
			pp = &(*pp)->next;
		*pp = e;
	}
	pthread_mutex_unlock(&fs->lock);
}

void fake_store_clear_errors(struct fake_store *fs)
{
	pthread_mutex_lock(&fs->lock);
	while (fs->errs) {
		struct ferr *e = fs->errs;

		fs->errs = e->next;
		free(e->prefix);
		free(e);
	}
	pthread_mutex_unlock(&fs->lock);
}

int fake_store_flip(struct fake_store *fs, const char *key, uint64_t off)
{
	bool found;
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&fs->lock);
	i = find_locked(fs, key, &found);
	if (!found)
		rc = -ENOENT;
	else if (off >= fs->objs[i].len)
		rc = -ERANGE;
	else
		fs->objs[i].data[off] ^= 0xff;
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

int fake_store_copy(struct fake_store *fs, const char *key, uint8_t **data, size_t *len)
{
	bool found;
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&fs->lock);
	i = find_locked(fs, key, &found);
	if (!found) {
		rc = -ENOENT;
	} else {
		*data = malloc(fs->objs[i].len ? fs->objs[i].len : 1);
		if (!*data)
			rc = -ENOMEM;
		else
			memcpy(*data, fs->objs[i].data, fs->objs[i].len);
		*len = fs->objs[i].len;
	}
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

bool fake_store_exists(struct fake_store *fs, const char *key)
{
	bool found;

	pthread_mutex_lock(&fs->lock);
	(void)find_locked(fs, key, &found);
	pthread_mutex_unlock(&fs->lock);
	return found;
}

unsigned fake_store_count_objects(struct fake_store *fs, const char *prefix)
{
	unsigned n = 0;

	pthread_mutex_lock(&fs->lock);
	for (size_t i = 0; i < fs->n; i++)
		if (has_prefix(fs->objs[i].key, prefix))
			n++;
	pthread_mutex_unlock(&fs->lock);
	return n;
}

static bool key_pred(struct fake_store *fs, const void *arg)
{
	bool found;

	(void)find_locked(fs, arg, &found);
	return found;
}

bool fake_store_wait_key(struct fake_store *fs, const char *key, unsigned timeout_ms)
{
	bool ok;

	pthread_mutex_lock(&fs->lock);
	ok = wait_until_locked(fs, key_pred, key, timeout_ms);
	pthread_mutex_unlock(&fs->lock);
	return ok;
}

static unsigned count_calls(struct fake_store *fs, enum fake_op op, const char *prefix,
			    bool ok_only)
{
	unsigned n = 0;

	pthread_mutex_lock(&fs->lock);
	for (size_t i = 0; i < fs->ncalls; i++) {
		const struct fcall *c = &fs->calls[i];

		if (c->op != op || (ok_only && c->rc) || !c->key ||
		    (prefix && !has_prefix(c->key, prefix)))
			continue;
		n++;
	}
	pthread_mutex_unlock(&fs->lock);
	return n;
}

unsigned fake_store_calls(struct fake_store *fs, enum fake_op op, const char *prefix)
{
	return count_calls(fs, op, prefix, false);
}

unsigned fake_store_ok_calls(struct fake_store *fs, enum fake_op op, const char *prefix)
{
	return count_calls(fs, op, prefix, true);
}

void fake_store_reset_calls(struct fake_store *fs)
{
	pthread_mutex_lock(&fs->lock);
	for (size_t i = 0; i < fs->ncalls; i++)
		free(fs->calls[i].key);
	fs->ncalls = 0;
	pthread_mutex_unlock(&fs->lock);
}
