/*
 * store.c - the backend-independent half of the object-store interface
 * (see store.h).
 *
 * For: choosing a backend from a URL (through the scheme table of
 * engine/store/schemes.c), checking keys, counting requests, bytes and
 * errors, running the store.put / store.get failpoints, wrapping a
 * backend's multipart upload state in struct store_mpu, so that every
 * backend only moves bytes, and the rule of which errors are transient
 * (store_err_transient()).
 * Not for: moving bytes (engine/store/dir/, engine/store/s3/), knowing
 * which backends exist (schemes.c), retrying (the engine decides when to
 * retry what store_err_transient() allows), caching.
 *
 * Invariants:
 *  1. A backend is never called with a key that fails store_key_check(),
 *     nor with a part number outside 1..STORE_MPU_PARTS_MAX.
 *  2. An armed failpoint fails the call before the backend sees it:
 *     "store.put" guards store_put() and store_mpu_complete(), "store.get"
 *     guards store_get_range().  A failed complete still aborts the
 *     upload, so the backend never keeps an orphan.
 *  3. Every public call adds one to its request counter, whatever the
 *     result.  "errors" counts the calls that failed, except the answers
 *     that are not faults: -ENOENT from get/head and -EEXIST from a
 *     create-once put or complete.  bytes_put counts the payload of
 *     successful puts and part uploads (not server-side copies); bytes_got
 *     the bytes successful gets returned.
 *  4. store_mpu_complete() and store_mpu_abort() free the wrapper on every
 *     path, exactly once (the backend frees its own upload state).
 *
 * Locking: struct store has no lock.  ops, be and name are immutable after
 * store_wrap(); the counters are atomics updated with relaxed order (they
 * are statistics: a snapshot need not be consistent across fields).
 */
#include "config.h"
#include "engine/store/store.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* S3's limits on part numbers; the directory backend follows them so the
 * engine cannot come to depend on anything S3 would refuse. */
#define STORE_MPU_PARTS_MAX 10000

struct store_counters {
#define COUNTER_DECL(f) atomic_uint_least64_t f;
	STORE_STATS_FIELDS(COUNTER_DECL)
#undef COUNTER_DECL
};

/* One opened store.  Immutable after store_wrap() except the counters
 * (atomics, relaxed). */
struct store {
	const struct store_backend_ops *ops; /* borrowed: static tables */
	void *be;                            /* owned; freed by ops->close */
	char *name;                          /* owned */
	struct store_counters c;
};

/*
 * One multipart upload.  States:
 *
 *     store_mpu_create()          put_part / copy_part
 *   ----------------------> OPEN <--------------------+
 *                            |  |                      |
 *                            |  +----------------------+
 *       store_mpu_complete() |  store_mpu_abort()
 *                            v
 *                          (freed)
 *
 *   transition          function                 backend call
 *   (none) -> OPEN      store_mpu_create()       mpu_create
 *   OPEN -> OPEN        store_mpu_put_part()     mpu_put_part
 *   OPEN -> OPEN        store_mpu_copy_part()    mpu_copy_part
 *   OPEN -> freed       store_mpu_complete()     mpu_complete (or
 *                                                mpu_abort on failpoint)
 *   OPEN -> freed       store_mpu_abort()        mpu_abort
 *
 * Parts may be added from several threads at once: the wrapper itself is
 * immutable while OPEN; the backend makes concurrent parts safe (store.h
 * invariant 4).  complete/abort must not race with anything on the upload.
 */
#define STORE_MPU_MAGIC 0x6d707521u /* "mpu!": catches use after free */

struct store_mpu {
	unsigned magic;   /* STORE_MPU_MAGIC while OPEN */
	struct store *s;  /* borrowed: the store outlives its uploads */
	char *key;        /* owned: target key, for logs */
	void *upload;     /* owned by the backend until complete/abort */
};

static void assert_mpu_state(const struct store_mpu *m)
{
	assert(m && m->magic == STORE_MPU_MAGIC);
	assert(m->s && m->key && m->upload);
	(void)m;
}

static inline void bump(atomic_uint_least64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* Count a failed call (see invariant 3); benign is the one errno of this
 * call that is an answer rather than a fault (0 for none). */
static int count_err(struct store *s, int rc, int benign)
{
	if (rc < 0 && rc != -benign)
		bump(&s->c.errors, 1);
	return rc;
}

/* ------------------------------------------------------------- keys */

/* The characters of invariant 5: [A-Za-z0-9._~/-]. */
static bool key_char_ok(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
	       ch == '~' || ch == '-' || ch == '/';
}

int store_key_check(const char *key)
{
	size_t comp = 0; /* length of the current component so far */
	size_t i;

	if (!key || !key[0])
		return -EINVAL;
	for (i = 0; key[i]; i++) {
		unsigned char ch = (unsigned char)key[i];

		if (i >= STORE_KEY_MAX || !key_char_ok(ch))
			return -EINVAL;
		if (ch != '/') {
			comp++;
			continue;
		}
		/* End of a component: it must be non-empty and not . or .. */
		if (comp == 0 || (comp == 1 && key[i - 1] == '.') ||
		    (comp == 2 && key[i - 1] == '.' && key[i - 2] == '.'))
			return -EINVAL;
		comp = 0;
	}
	if (comp == 0 || (comp == 1 && key[i - 1] == '.') ||
	    (comp == 2 && key[i - 1] == '.' && key[i - 2] == '.'))
		return -EINVAL;
	return 0;
}

/* A list prefix need not be a key ("a/", "streams/b"), but it may only
 * hold key characters and be no longer than a key; NULL and "" are fine. */
static int prefix_check(const char *prefix)
{
	size_t i;

	if (!prefix)
		return 0;
	for (i = 0; prefix[i]; i++)
		if (i >= STORE_KEY_MAX || !key_char_ok((unsigned char)prefix[i]))
			return -EINVAL;
	return 0;
}

/* Check a key for call `what`; a bad key is a caller bug, logged once. */
static int key_ok(struct store *s, const char *what, const char *key)
{
	if (store_key_check(key) == 0)
		return 0;
	nv_log(NV_WARN, NV_SUB_STORE, "%s %s: invalid key '%.64s'%s", s->name,
	       what, key ? key : "(null)",
	       key && strlen(key) > 64 ? "..." : "");
	return -EINVAL;
}

bool store_err_transient(int rc)
{
	return rc == -EIO || rc == -EAGAIN || rc == -ETIMEDOUT || rc == -EBUSY ||
	       rc == -ENOSPC || rc == -ECONNRESET || rc == -ECONNREFUSED ||
	       rc == -EHOSTUNREACH || rc == -ENETUNREACH || rc == -EDQUOT;
}

size_t store_iov_len(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* --------------------------------------------------- open and close */

int store_wrap(const struct store_backend_ops *ops, void *be, const char *name,
	       struct store **out)
{
	struct store *s;

	s = calloc(1, sizeof(*s));
	if (!s)
		goto fail;
	s->name = strdup(name);
	if (!s->name)
		goto fail_free;
	s->ops = ops;
	s->be = be;
	*out = s;
	return 0;

fail_free:
	free(s);
fail:
	ops->close(be);
	nv_log(NV_ERR, NV_SUB_STORE, "%s: out of memory opening the store", name);
	return -ENOMEM;
}

/* The scheme of url and the argument its open takes, or NULL. */
static const struct nv_url_scheme *scheme_at(size_t i)
{
	return store_schemes[i] ? &store_schemes[i]->url : NULL;
}

int store_open(const char *url, struct store **out)
{
	const char *arg = NULL;
	char want[256];
	int i = nv_url_scheme_find(scheme_at, url, &arg);

	if (i >= 0)
		return store_schemes[i]->open(arg, out);
	nv_log(NV_ERR, NV_SUB_STORE, "unknown or malformed store URL '%s' (want %s)",
	       url ? url : "(null)", nv_url_scheme_usages(scheme_at, want, sizeof(want)));
	return -EINVAL;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	s->ops->close(s->be);
	free(s->name);
	free(s);
}

const char *store_name(const struct store *s)
{
	return s->name;
}

void store_get_stats(const struct store *s, struct store_stats *out)
{
	/* The counters are only ever added to; loading from a const store
	 * is safe, the casts only satisfy atomic_load's prototype. */
	struct store_counters *c = (struct store_counters *)&s->c;

	if (s->ops->stats) {
		memset(out, 0, sizeof(*out));
		s->ops->stats(s->be, out);
		return;
	}
#define LOAD(f) out->f = atomic_load_explicit(&c->f, memory_order_relaxed);
	STORE_STATS_FIELDS(LOAD)
#undef LOAD
}

/* ----------------------------------------------------- object calls */

int store_put(struct store *s, const char *key, const struct iovec *iov,
	      int iovcnt, unsigned flags)
{
	int benign = (flags & STORE_CREATE_ONCE) ? EEXIST : 0;
	int rc;

	bump(&s->c.puts, 1);
	rc = key_ok(s, "put", key);
	if (rc == 0 && (iovcnt < 0 || (iovcnt > 0 && !iov)))
		rc = -EINVAL;
	if (rc == 0)
		rc = NV_FP("store.put");
	if (rc == 0)
		rc = s->ops->put(s->be, key, iov, iovcnt, flags);
	if (rc == 0)
		bump(&s->c.bytes_put, store_iov_len(iov, iovcnt));
	return count_err(s, rc, benign);
}

int store_get_range(struct store *s, const char *key, uint64_t off,
		    size_t len, void *dst, size_t *got)
{
	int rc;

	*got = 0;
	bump(&s->c.gets, 1);
	rc = key_ok(s, "get", key);
	if (rc == 0 && len > 0 && !dst)
		rc = -EINVAL;
	if (rc == 0)
		rc = NV_FP("store.get");
	if (rc == 0)
		rc = s->ops->get_range(s->be, key, off, len, dst, got);
	if (rc == 0)
		bump(&s->c.bytes_got, *got);
	else
		*got = 0;
	return count_err(s, rc, ENOENT);
}

void store_stats_add(struct store_stats *sum, const struct store *s)
{
	struct store_stats one;

	store_get_stats(s, &one);
#define ADD(f) sum->f += one.f;
	STORE_STATS_FIELDS(ADD)
#undef ADD
}

int store_read_copies(struct store *s, const char *key, store_copy_fn fn, void *arg)
{
	int rc = key_ok(s, "read", key);

	if (rc)
		return rc;
	return s->ops->read_copies ? s->ops->read_copies(s->be, key, fn, arg) : fn(arg, s);
}

int store_head(struct store *s, const char *key, uint64_t *size)
{
	int rc;

	bump(&s->c.heads, 1);
	rc = key_ok(s, "head", key);
	if (rc == 0)
		rc = s->ops->head(s->be, key, size);
	return count_err(s, rc, ENOENT);
}

int store_presign(struct store *s, const char *key, unsigned ttl_s, struct nv_buf *url)
{
	int rc = key_ok(s, "presign", key);

	if (rc == 0)
		rc = s->ops->presign ? s->ops->presign(s->be, key, ttl_s, url) : -ENOTSUP;
	return rc;
}

int store_delete(struct store *s, const char *const *keys, size_t n)
{
	int rc = 0;

	bump(&s->c.deletes, 1);
	/* Check every key first, so a bad key deletes nothing. */
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = key_ok(s, "delete", keys[i]);
	if (rc == 0 && n > 0)
		rc = s->ops->del(s->be, keys, n);
	return count_err(s, rc, 0);
}

int store_list(struct store *s, const char *prefix, const char *start_after,
	       store_list_fn fn, void *arg)
{
	int rc;

	bump(&s->c.lists, 1);
	rc = prefix_check(prefix);
	if (rc < 0)
		nv_log(NV_WARN, NV_SUB_STORE, "%s list: invalid prefix '%.64s'",
		       s->name, prefix);
	if (rc == 0)
		rc = s->ops->list(s->be, prefix ? prefix : "",
				  start_after ? start_after : "", fn, arg);
	return count_err(s, rc, 0);
}

/* -------------------------------------------------------- multipart */

int store_mpu_create(struct store *s, const char *key, struct store_mpu **out)
{
	struct store_mpu *m;
	int rc;

	bump(&s->c.mpu_creates, 1);
	rc = key_ok(s, "mpu_create", key);
	if (rc < 0)
		goto fail;
	rc = -ENOMEM;
	m = calloc(1, sizeof(*m));
	if (!m)
		goto fail;
	m->key = strdup(key);
	if (!m->key)
		goto fail_free;
	rc = s->ops->mpu_create(s->be, key, &m->upload);
	if (rc < 0)
		goto fail_key;
	m->s = s;
	m->magic = STORE_MPU_MAGIC;
	*out = m;
	return 0;

fail_key:
	free(m->key);
fail_free:
	free(m);
fail:
	return count_err(s, rc, 0);
}

static int part_ok(struct store_mpu *m, int part_no)
{
	if (part_no >= 1 && part_no <= STORE_MPU_PARTS_MAX)
		return 0;
	nv_log(NV_WARN, NV_SUB_STORE, "%s mpu %s: part number %d outside 1..%d",
	       m->s->name, m->key, part_no, STORE_MPU_PARTS_MAX);
	return -EINVAL;
}

int store_mpu_put_part(struct store_mpu *m, int part_no, const struct iovec *iov,
		       int iovcnt)
{
	struct store *s;
	int rc;

	assert_mpu_state(m);
	s = m->s;
	bump(&s->c.mpu_parts, 1);
	rc = part_ok(m, part_no);
	if (rc == 0 && (iovcnt < 0 || (iovcnt > 0 && !iov)))
		rc = -EINVAL;
	if (rc == 0)
		rc = s->ops->mpu_put_part(s->be, m->upload, part_no, iov, iovcnt);
	if (rc == 0)
		bump(&s->c.bytes_put, store_iov_len(iov, iovcnt));
	return count_err(s, rc, 0);
}

int store_mpu_copy_part(struct store_mpu *m, int part_no, const char *src_key,
			uint64_t off, uint64_t len)
{
	struct store *s;
	int rc;

	assert_mpu_state(m);
	s = m->s;
	bump(&s->c.mpu_copies, 1);
	rc = part_ok(m, part_no);
	if (rc == 0)
		rc = key_ok(s, "mpu_copy_part", src_key);
	/* S3 names a copy range as bytes=first-last: it cannot be empty. */
	if (rc == 0 && len == 0)
		rc = -EINVAL;
	if (rc == 0)
		rc = s->ops->mpu_copy_part(s->be, m->upload, part_no, src_key,
					   off, len);
	return count_err(s, rc, 0);
}

static void mpu_free(struct store_mpu *m)
{
	m->magic = 0;
	free(m->key);
	free(m);
}

int store_mpu_complete(struct store_mpu *m, unsigned flags)
{
	int benign = (flags & STORE_CREATE_ONCE) ? EEXIST : 0;
	struct store *s;
	int rc;

	assert_mpu_state(m);
	s = m->s;
	bump(&s->c.mpu_completes, 1);
	rc = NV_FP("store.put");
	if (rc == 0)
		rc = s->ops->mpu_complete(s->be, m->upload, flags);
	else
		s->ops->mpu_abort(s->be, m->upload); /* invariant 2 */
	mpu_free(m);
	return count_err(s, rc, benign);
}

void store_mpu_abort(struct store_mpu *m)
{
	if (!m)
		return;
	assert_mpu_state(m);
	bump(&m->s->c.mpu_aborts, 1);
	m->s->ops->mpu_abort(m->s->be, m->upload);
	mpu_free(m);
}
