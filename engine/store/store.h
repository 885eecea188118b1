/*
 * store.h - the one object-storage interface of novafs.
 *
 * For: every byte the engine keeps in object storage: chain slots (transit
 * bundles), settled objects, fence objects.  The engine reaches storage
 * only through these calls, so the directory backend (embedded default),
 * the S3 backend and the fault-injecting wrapper are interchangeable.
 * Not for: metadata (meta/kv.h), local scratch files (the fetch cache).
 *
 * Invariants every backend keeps:
 *  1. store_put() and store_mpu_complete() are atomic: a reader sees the
 *     whole new object or no object, never a prefix.
 *  2. A successful put/complete is durable on return.
 *  3. With STORE_CREATE_ONCE an existing key is never replaced; the call
 *     fails with -EEXIST.  (Lax S3 servers may ignore the condition; the
 *     engine never relies on it alone, see engine/settle/publish.c.)
 *  4. Every call is thread-safe.  One multipart upload may receive parts
 *     from several threads at once.
 *  5. Keys are '/'-separated ASCII paths of [A-Za-z0-9._~/-] characters,
 *     1..1024 bytes, no empty or "."/".." components; anything else is
 *     -EINVAL.
 *
 * Errors are negative errno values:
 *   -ENOENT   no such object (get, head)
 *   -EEXIST   create-once key already present
 *   -ERANGE   ranged get starting past the end of the object
 *   -ENOTSUP  the backend cannot do this (range copy): fall back
 *   -ENOSPC   storage full;  -EIO  anything else below us
 *   -EAGAIN / -ETIMEDOUT  transient: the caller may retry
 * Which errors a caller may retry (store_err_transient()): -EIO, -EAGAIN,
 * -ETIMEDOUT, -EBUSY, -ENOSPC, -EDQUOT and the connection errors
 * -ECONNRESET, -ECONNREFUSED, -EHOSTUNREACH, -ENETUNREACH: a later attempt
 * of the same call may succeed (a server restarting, a zone coming back,
 * space freed).  Answers (-ENOENT, -EEXIST, -ERANGE, -ENOTSUP), caller
 * bugs (-EINVAL), bad bytes (-EBADMSG) and -ENOMEM are not retried: the
 * same call would fail the same way.
 */
#ifndef NOVAFS_STORE_STORE_H
#define NOVAFS_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "src/base/buf.h"
#include "src/base/urlscheme.h"

struct store;     /* one opened backend; opaque */
struct store_mpu; /* one multipart upload in progress; opaque */

#define STORE_CREATE_ONCE 0x1u
/* With a bucket set (set.h): put the object into every member, not one
 * (fence objects).  Plain stores ignore it. */
#define STORE_EVERYWHERE 0x2u
/* A small object recovery cannot do without (a fence): a store that
 * keeps space free for the metastore (the directory store's reserve)
 * lets it in there too.  Others ignore it. */
#define STORE_RESERVE 0x4u

/* Longest valid key in bytes (invariant 5); a key buffer needs one more. */
#define STORE_KEY_MAX 1024

/* Request and byte counters of one store, kept by store.c for every
 * backend.  Monotonic; read with store_get_stats(). */
#define STORE_STATS_FIELDS(X)                                           \
	X(puts) X(gets) X(heads) X(deletes) X(lists)                    \
	X(mpu_creates) X(mpu_parts) X(mpu_copies) X(mpu_completes)      \
	X(mpu_aborts) X(bytes_put) X(bytes_got) X(errors)

struct store_stats {
#define STORE_STATS_DECL(f) uint64_t f;
	STORE_STATS_FIELDS(STORE_STATS_DECL)
#undef STORE_STATS_DECL
};

/*
 * Open a store from a URL, by the scheme table (engine/store/schemes.c):
 *   dir:/abs/path or /abs/path     the directory backend rooted there
 *                                  (created if missing)
 *   s3://bucket?...                the S3 backend (s3.h)
 * Returns 0 and *out (caller owns; store_close()), or -EINVAL for an
 * unknown or malformed URL (logged), or the backend's error.
 */
int store_open(const char *url, struct store **out) __attribute__((warn_unused_result));

/* Close and free; NULL is a no-op.  No call may be in progress. */
void store_close(struct store *s);

/* A short human name for logs ("dir:/var/lib/novafs/objects"). Borrowed
 * until store_close(). */
const char *store_name(const struct store *s);

/* Snapshot of the counters (of a bucket set or router: the sum of its
 * buckets'). */
void store_get_stats(const struct store *s, struct store_stats *out);

/*
 * Write an object from iovcnt segments (borrowed for the call).  flags:
 * STORE_CREATE_ONCE.  Returns 0 once the object is durable; -EEXIST,
 * -ENOSPC, -EIO, -EINVAL (bad key).  On failure no partial object is
 * visible.
 */
int store_put(struct store *s, const char *key, const struct iovec *iov,
	      int iovcnt, unsigned flags) __attribute__((warn_unused_result));

/*
 * Read up to len bytes at off into dst (caller owns, len bytes).  *got
 * is set to the bytes read: fewer than len only at the end of the object
 * (off == size reads 0 bytes).  -ENOENT, -ERANGE (off > size), -EIO.
 */
int store_get_range(struct store *s, const char *key, uint64_t off,
		    size_t len, void *dst, size_t *got) __attribute__((warn_unused_result));

/*
 * Read one copy of key and judge it: fn reads the object through the
 * store it is handed (borrowed for the call; any number of gets and
 * heads) and returns 0 when the bytes are good, -EBADMSG when they fail
 * verification (a checksum, a trailer, a short object), or the store's
 * error.  A plain store calls fn once, with itself.  A bucket set (set.h)
 * calls fn with each member in its read order until one returns 0 or
 * -ERANGE, so a torn or corrupt copy in one zone (a lax server killed
 * mid-PUT keeps a prefix) is read around instead of failing the reader.
 * Returns fn's last verdict: 0, -ERANGE, else -EBADMSG if any copy was
 * bad, else the last store error, else -ENOENT.
 */
typedef int (*store_copy_fn)(void *arg, struct store *copy);
int store_read_copies(struct store *s, const char *key, store_copy_fn fn, void *arg)
	__attribute__((warn_unused_result));

/* Size of an object.  0, -ENOENT, -EIO. */
int store_head(struct store *s, const char *key, uint64_t *size)
	__attribute__((warn_unused_result));

/*
 * Delete n objects (keys borrowed).  A missing key is not an error.
 * Returns 0 when every key is gone, else the first error; keys before
 * the failing one may be deleted.
 */
int store_delete(struct store *s, const char *const *keys, size_t n)
	__attribute__((warn_unused_result));

/*
 * Visit every key that starts with prefix and sorts after start_after
 * (NULL or "" = from the first), in byte order.  fn gets the key
 * (borrowed for the call) and the object size and returns 0 to go on,
 * 1 to stop, or -errno to stop with that error.  Backends page
 * internally.  Returns 0, fn's error, or the backend's error.
 */
typedef int (*store_list_fn)(void *arg, const char *key, uint64_t size);
int store_list(struct store *s, const char *prefix, const char *start_after,
	       store_list_fn fn, void *arg) __attribute__((warn_unused_result));

/*
 * Multipart upload.  Part numbers are 1..10000; every part but the last
 * should be >= 5 MiB (S3 enforces it at complete time; the directory
 * backend does not).  Parts may arrive in any order and concurrently.
 *
 * store_mpu_create: 0 and *out (caller owns: exactly one of
 *   store_mpu_complete() or store_mpu_abort() frees it).
 * store_mpu_put_part: upload part_no from iov (borrowed).
 * store_mpu_copy_part: part_no is bytes [off, off+len) of the existing
 *   object src_key, copied server-side.  -ENOTSUP when the backend
 *   cannot: the caller reads the range and uses put_part instead.
 * store_mpu_complete: publish the parts in part-number order as key;
 *   flags: STORE_CREATE_ONCE.  Frees mpu whatever the result; on failure
 *   the upload is aborted.
 * store_mpu_abort: discard everything; frees mpu.  NULL is a no-op.
 */
int store_mpu_create(struct store *s, const char *key, struct store_mpu **out)
	__attribute__((warn_unused_result));
int store_mpu_put_part(struct store_mpu *m, int part_no, const struct iovec *iov,
		       int iovcnt) __attribute__((warn_unused_result));
int store_mpu_copy_part(struct store_mpu *m, int part_no, const char *src_key,
			uint64_t off, uint64_t len) __attribute__((warn_unused_result));
int store_mpu_complete(struct store_mpu *m, unsigned flags)
	__attribute__((warn_unused_result));
void store_mpu_abort(struct store_mpu *m);

/*
 * A time-limited URL that GETs key without credentials (an S3 presigned
 * GET, DESIGN.md section 8 "signed" vending), valid for ttl_s seconds
 * from now, appended to url.  -ENOTSUP for a backend that cannot sign
 * (the directory store), -EINVAL (bad key, ttl_s out of the backend's
 * range), -E2BIG / -ENOMEM (url's limit).  Contacts no server.
 */
int store_presign(struct store *s, const char *key, unsigned ttl_s, struct nv_buf *url)
	__attribute__((warn_unused_result));

/* 0 when key is a valid object key (invariant 5), else -EINVAL. */
int store_key_check(const char *key) __attribute__((warn_unused_result));

/* Whether rc (a store error) is one a caller may retry: the rule of the
 * error list above.  0 and every other error are false. */
bool store_err_transient(int rc);

/* ---------------------------------------------------------------------
 * Backend side.  store.c wraps every backend: it checks keys, counts
 * requests and bytes, and runs the store.put/store.get failpoints, so
 * backends only move bytes.
 */
struct store_backend_ops {
	const char *scheme; /* "dir", "s3", ... */
	void (*close)(void *be);
	int (*put)(void *be, const char *key, const struct iovec *iov,
		   int iovcnt, unsigned flags);
	int (*get_range)(void *be, const char *key, uint64_t off, size_t len,
			 void *dst, size_t *got);
	int (*head)(void *be, const char *key, uint64_t *size);
	/* Optional (stores over other stores): store_read_copies(); without
	 * it fn gets the store itself. */
	int (*read_copies)(void *be, const char *key, store_copy_fn fn, void *arg);
	/* Optional (stores over other stores): the counters are the sum of
	 * the inner stores' (every request ends at one of them, including
	 * those a copy function makes), not the wrapper's own. */
	void (*stats)(void *be, struct store_stats *out);
	int (*del)(void *be, const char *const *keys, size_t n);
	int (*list)(void *be, const char *prefix, const char *start_after,
		    store_list_fn fn, void *arg);
	/* Multipart: the backend keeps its own per-upload state in *upload. */
	int (*mpu_create)(void *be, const char *key, void **upload);
	int (*mpu_put_part)(void *be, void *upload, int part_no,
			    const struct iovec *iov, int iovcnt);
	int (*mpu_copy_part)(void *be, void *upload, int part_no,
			     const char *src_key, uint64_t off, uint64_t len);
	int (*mpu_complete)(void *be, void *upload, unsigned flags); /* frees upload */
	void (*mpu_abort)(void *be, void *upload);                   /* frees upload */
	/* Optional: store_presign(); without it -ENOTSUP. */
	int (*presign)(void *be, const char *key, unsigned ttl_s, struct nv_buf *url);
};

/*
 * One URL scheme of store_open().  Each backend defines its own (dir.h,
 * s3.h); engine/store/schemes.c lists the backends compiled in, so
 * store.c knows none of them and a new backend is one line there.
 */
struct store_scheme {
	struct nv_url_scheme url; /* prefix, usage, path (src/base/urlscheme.h) */
	int (*open)(const char *arg, struct store **out);
};

/* The schemes compiled in, NULL-terminated (engine/store/schemes.c). */
extern const struct store_scheme *const store_schemes[];

/* Wrap an opened backend (takes ownership of be; ops->close frees it).
 * name is copied.  0 or -ENOMEM (be closed). */
int store_wrap(const struct store_backend_ops *ops, void *be, const char *name,
	       struct store **out) __attribute__((warn_unused_result));

/* Add the counters of s to *sum (for a backend's stats op). */
void store_stats_add(struct store_stats *sum, const struct store *s);

/* Sum of iovec lengths. */
size_t store_iov_len(const struct iovec *iov, int iovcnt);

#endif
