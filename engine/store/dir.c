/*
 * dir.c - the directory object store (see dir.h): the embedded default
 * backend behind store.h.
 *
 * For: keeping objects as plain files under one root directory on a local
 * (or otherwise POSIX) file system, atomically and durably.
 * Not for: checking keys, counting or failpoints (store.c does those before
 * any call gets here), nor local scratch files (the fetch cache).
 *
 * Layout:
 *   ROOT/<key>                   one object; key components are directories
 *   ROOT/<dir>/<name>#tmp.P.N    a put in progress (process P, sequence N)
 *   ROOT/#mpu/<id>/part-NNNNN    the parts of multipart upload <id>
 *   ROOT/#mpu/<id>/part-NNNNN#tmp.P.N   a part being written
 * '#' can never appear in a key (store.h invariant 5), so nothing of ours
 * can collide with an object, and list skips every name holding one.
 *
 * Invariants:
 *  1. An object appears only by link() (create-once) or rename() of a
 *     complete, fdatasync'd temporary file in the object's own directory,
 *     and a call returns success only after fsync of that directory; every
 *     directory a put creates (or loses a mkdir race for) is made durable
 *     by fsync of its parent.  So a reader (and a crash) sees the whole
 *     object or none of it.  A put that finds a directory already there
 *     cannot know whether its creator (another thread, or a process that
 *     crashed) synced it, so it fsyncs the parent of every directory on
 *     its path that this store has not yet seen durable (the synced set:
 *     a hash set of paths, so once per directory per process), and never
 *     relies on the file system committing metadata in order (ext4
 *     without a journal does not).
 *  2. A temporary file lives in the directory its object will live in, so
 *     the final link/rename never crosses directories, and its presence
 *     keeps that directory non-empty: delete's rmdir cannot pull the
 *     directory away from a put that has created its temp file.
 *  3. Delete removes emptied directories bottom-up, never ROOT.  A put
 *     that finds a directory of its path gone (ENOENT while walking or
 *     creating the temp file) re-creates the path and retries, at most
 *     DIR_RETRIES times; so put and delete in one directory can race.
 *  4. list yields keys in byte order: each directory's entries are sorted
 *     with directory names compared as name + "/", and a directory is
 *     walked depth-first at its place in that order.  Memory is the
 *     sorted names of the directories on the current path, never the
 *     whole tree, and no directory handle is open while fn runs.
 *  5. No global mutable state but dir_tmp_seq (atomic), which makes temp
 *     names unique within the process; O_EXCL makes them unique across
 *     processes (a collision just draws the next number).
 *  6. Upload directories idle for more than DIR_MPU_STALE_NS are removed
 *     when a store is opened; completed and aborted uploads remove theirs
 *     at once, and ROOT/#mpu itself when it becomes empty.
 *
 * Limits (dir.h): a key component longer than NAME_MAX, or a key that
 * needs a directory where an object is (or the reverse: "a/b" then "a"),
 * cannot be stored: -EINVAL, logged.  Reads of such keys answer -ENOENT.
 * Stray temp files left by a crash are never listed or read; they stay
 * until someone removes them (they also keep their directory alive).
 *
 * Locking: struct dir_store is immutable after dir_store_open() but for
 * its synced set (synced_lock, never held across I/O);
 * struct dir_upload is immutable after dir_mpu_create() and its parts
 * land under unique temp names and are renamed into place, so concurrent
 * parts need no lock.  Complete/abort must not race with part uploads
 * (store.h).
 */
#include "config.h"
#include "engine/store/dir.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* How often a put re-creates its directory path after a concurrent delete
 * removed it.  Each retry needs a delete to empty the directory in the
 * few microseconds between our walk and our temp file, so 16 in a row is
 * not contention but something broken. */
#define DIR_RETRIES 16
/* Bytes of an object's name kept in its temp name: enough to recognise
 * it, and short enough that temp names stay far below NAME_MAX (255). */
#define DIR_TMP_BASE_MAX 64
#define DIR_TMP_NAME_MAX (DIR_TMP_BASE_MAX + 64)
#define DIR_MPU "#mpu"
#define DIR_MPU_ID_BYTES 16 /* 128 random bits, 32 hex digits */
#define DIR_MPU_PATH_MAX (sizeof(DIR_MPU) + 2 * DIR_MPU_ID_BYTES + 2)
#define DIR_MPU_STALE_NS (24ull * 3600 * NV_NS_PER_S)
#define DIR_PART_FMT "part-%05d"
#define DIR_PART_NAME_MAX 16
/* iovec entries handed to one pwritev (IOV_MAX is 1024; a small stack
 * window is enough, pwritev is called again for the rest). */
#define DIR_IOV_BATCH 64
/* Bounce buffer of the read/write fallback of copy_range(). */
#define DIR_COPY_BUF (256u * 1024)
/* Largest request to one copy_file_range/pwrite call (the kernel caps a
 * single transfer a little under 2 GiB anyway). */
#define DIR_IO_MAX (1u << 30)

static atomic_ulong dir_tmp_seq;

/* Directories known durable (fsync'd parent entry), by path hash. */
#define DIR_SYNCED_SLOTS 4096

/* One opened directory store.  Immutable after dir_store_open() but for
 * the synced set, which synced_lock guards (held only around lookups and
 * inserts, never across I/O). */
struct dir_store {
	char *root;  /* owned; absolute, no trailing '/' (except "/") */
	int root_fd; /* owned; O_RDONLY|O_DIRECTORY */
	pthread_mutex_t synced_lock;
	uint64_t synced[DIR_SYNCED_SLOTS]; /* open addressing; 0 empty */
	unsigned nsynced;
};

/* One multipart upload.  Immutable after dir_mpu_create(). */
struct dir_upload {
	char *key;                               /* owned: target key */
	char path[DIR_MPU_PATH_MAX];             /* "#mpu/<id>" under ROOT */
	int fd;                                  /* owned: that directory */
};

/* ---------------------------------------------------------- helpers */

/* The one translation of file system errno values into store.h errors. */
static int dir_errno(int e)
{
	switch (e) {
	case ENOSPC:
	case EDQUOT:
		return -ENOSPC;
	case EACCES:
	case EPERM:
	case EROFS:
	case ENOMEM:
	case EMFILE:
	case ENFILE:
		return -e;
	case ENAMETOOLONG: /* a key component longer than NAME_MAX */
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* Log the failure of `what` on key (once, where it is first seen) and
 * return the store error for errno e. */
static int dir_fail(const struct dir_store *d, const char *what,
		    const char *key, int e)
{
	nv_log(NV_ERR, NV_SUB_STORE, "dir:%s %s %s: %s", d->root, what, key,
	       strerror(e));
	return dir_errno(e);
}

/* The key (or part of a path) names something that cannot be an object of
 * this store: not there, a non-directory in the middle of the path, a
 * symlink (O_NOFOLLOW), or a component too long to exist. */
static bool dir_missing(int e)
{
	return e == ENOENT || e == ENOTDIR || e == ELOOP || e == ENAMETOOLONG;
}

/* A key whose path collides with an object or a directory (dir.h). */
static int dir_conflict(const struct dir_store *d, const char *key)
{
	nv_log(NV_ERR, NV_SUB_STORE,
	       "dir:%s put %s: the path collides with an existing object or "
	       "directory (this backend cannot hold both \"a\" and \"a/b\")",
	       d->root, key);
	return -EINVAL;
}

static const char *key_base(const char *key)
{
	const char *slash = strrchr(key, '/');

	return slash ? slash + 1 : key;
}

/* A unique temp name for an entry called base: "<base>#tmp.<pid>.<seq>". */
static void tmp_name(char *buf, size_t size, const char *base)
{
	size_t n = strlen(base);
	unsigned long seq =
		atomic_fetch_add_explicit(&dir_tmp_seq, 1, memory_order_relaxed);

	snprintf(buf, size, "%.*s#tmp.%ld.%lu",
		 (int)(n < DIR_TMP_BASE_MAX ? n : DIR_TMP_BASE_MAX), base,
		 (long)getpid(), seq);
}

/* Write all of buf at off.  0 or -errno. */
static int pwrite_all(int fd, const char *buf, size_t len, uint64_t off)
{
	while (len > 0) {
		ssize_t n = pwrite(fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* no progress and no error: give up */
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Write every segment of iov (borrowed) at off, handling short writes and
 * any number of segments.  0 or -errno. */
static int write_iov(int fd, const struct iovec *iov, int iovcnt, uint64_t off)
{
	struct iovec v[DIR_IOV_BATCH];
	size_t skip = 0; /* bytes of iov[i] already written */
	int i = 0;

	for (;;) {
		int n = 0;
		ssize_t w;

		while (i < iovcnt && iov[i].iov_len == skip) {
			i++;
			skip = 0;
		}
		if (i == iovcnt)
			return 0;
		for (; n < DIR_IOV_BATCH && i + n < iovcnt; n++)
			v[n] = iov[i + n];
		v[0].iov_base = (char *)v[0].iov_base + skip;
		v[0].iov_len -= skip;
		w = pwritev(fd, v, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		off += (uint64_t)w;
		/* Advance (i, skip) past the w bytes just written. */
		for (size_t left = (size_t)w; left > 0;) {
			size_t rest = iov[i].iov_len - skip;

			if (left < rest) {
				skip += left;
				break;
			}
			left -= rest;
			i++;
			skip = 0;
		}
	}
}

/*
 * Copy len bytes from in at in_off to out at out_off.  copy_file_range
 * first (the kernel copies, or reflinks on XFS/btrfs); when it cannot
 * (EXDEV across file systems on some kernels, ENOSYS, EINVAL or
 * EOPNOTSUPP on file systems without support) the rest goes through a
 * bounce buffer.  0, -EIO when in ends before len bytes, or -errno (raw:
 * the caller logs and maps).
 */
static int copy_range(int in, uint64_t in_off, int out, uint64_t out_off,
		      uint64_t len)
{
	char *buf = NULL;
	bool kernel = true;
	int rc = 0;

	while (len > 0) {
		size_t chunk = len > DIR_IO_MAX ? DIR_IO_MAX : (size_t)len;
		ssize_t n;

		if (kernel) {
			off_t io = (off_t)in_off, oo = (off_t)out_off;

			n = copy_file_range(in, &io, out, &oo, chunk, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EXDEV || errno == ENOSYS ||
				      errno == EINVAL || errno == EOPNOTSUPP)) {
				kernel = false;
				continue;
			}
		} else {
			if (!buf && !(buf = malloc(DIR_COPY_BUF))) {
				rc = -ENOMEM;
				break;
			}
			if (chunk > DIR_COPY_BUF)
				chunk = DIR_COPY_BUF;
			n = pread(in, buf, chunk, (off_t)in_off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n > 0) {
				rc = pwrite_all(out, buf, (size_t)n, out_off);
				if (rc < 0)
					break;
			}
		}
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0) {
			rc = -EIO; /* the source is shorter than it said */
			break;
		}
		in_off += (uint64_t)n;
		out_off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	free(buf);
	return rc;
}

/* ------------------------------------------------ the synced set */

static uint64_t path_hash(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
	return h ? h : 1;
}

static bool synced_has(struct dir_store *d, uint64_t h)
{
	bool found = false;

	pthread_mutex_lock(&d->synced_lock);
	for (unsigned i = 0, at = (unsigned)(h % DIR_SYNCED_SLOTS); i < DIR_SYNCED_SLOTS;
	     i++, at = (at + 1) % DIR_SYNCED_SLOTS) {
		if (d->synced[at] == h)
			found = true;
		if (found || !d->synced[at])
			break;
	}
	pthread_mutex_unlock(&d->synced_lock);
	return found;
}

/* Remember h; a full set (3/4) starts over, which only costs fsyncs. */
static void synced_add(struct dir_store *d, uint64_t h)
{
	unsigned at = (unsigned)(h % DIR_SYNCED_SLOTS);

	pthread_mutex_lock(&d->synced_lock);
	if (d->nsynced >= DIR_SYNCED_SLOTS / 4 * 3) {
		memset(d->synced, 0, sizeof(d->synced));
		d->nsynced = 0;
	}
	while (d->synced[at] && d->synced[at] != h)
		at = (at + 1) % DIR_SYNCED_SLOTS;
	if (!d->synced[at]) {
		d->synced[at] = h;
		d->nsynced++;
	}
	pthread_mutex_unlock(&d->synced_lock);
}

/* ------------------------------------------------ directories, put */

/*
 * Open the directory that holds key's last component (ROOT itself for a
 * one-component key), making missing directories on the way, each new
 * entry made durable by fsync of its parent.
 * Returns an owned fd, or: -ENOENT when a concurrent delete removed a
 * directory while we walked (the caller walks again, invariant 3);
 * -EINVAL when the path runs into an object or a too-long component; or
 * another store error.  Everything but -ENOENT is logged.
 */
static int dir_open_parent(struct dir_store *d, const char *key)
{
	char path[STORE_KEY_MAX + 1];
	char *comp = path, *slash;
	int cur = d->root_fd, next, rc, e;

	snprintf(path, sizeof(path), "%s", key); /* key is checked: fits */
	while ((slash = strchr(comp, '/'))) {
		uint64_t h = path_hash(path, (size_t)(slash - path));

		*slash = '\0';
		next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						 O_CLOEXEC);
		if (next >= 0 && !synced_has(d, h)) {
			/* Found, but perhaps not yet durable (invariant 1). */
			rc = NV_FP("dir.sync_parent");
			if (rc || fsync(cur) < 0) {
				if (!rc)
					rc = dir_fail(d, "fsync(parent dir) for", key, errno);
				close(next);
				goto out;
			}
			synced_add(d, h);
		}
		if (next < 0 && errno == ENOENT) {
			/* Made by us, or by a racing put that may not have
			 * fsync'd it yet: either way sync the entry before we
			 * build on it. */
			if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
				e = errno;
				rc = e == ENOENT ? -ENOENT
				   : e == ENOTDIR ? dir_conflict(d, key)
				   : dir_fail(d, "mkdir for", key, e);
				goto out;
			}
			if (fsync(cur) < 0) {
				rc = dir_fail(d, "fsync(parent dir) for", key, errno);
				goto out;
			}
			synced_add(d, h);
			next = openat(cur, comp, O_RDONLY | O_DIRECTORY |
							 O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0) {
			e = errno;
			if (e == ENOENT)
				rc = -ENOENT;
			else if (e == ENOTDIR || e == ELOOP)
				rc = dir_conflict(d, key);
			else
				rc = dir_fail(d, "open(dir) for", key, e);
			goto out;
		}
		if (cur != d->root_fd)
			close(cur);
		cur = next;
		comp = slash + 1;
	}
	if (cur == d->root_fd) {
		cur = fcntl(d->root_fd, F_DUPFD_CLOEXEC, 0);
		if (cur < 0)
			return dir_fail(d, "dup(root) for", key, errno);
	}
	return cur;

out:
	if (cur != d->root_fd)
		close(cur);
	return rc;
}

/* Writes an object's bytes into the temp file fd; 0 or a store error
 * (logged by the callee). */
typedef int (*dir_fill_fn)(void *ctx, int fd);

/*
 * Publish key: a temp file beside it is filled by fill(ctx, fd),
 * fdatasync'd, closed, then link()ed (STORE_CREATE_ONCE) or rename()d
 * into place, and the directory fsync'd (invariant 1).  0 once durable;
 * -EEXIST (create-once, key present), -EINVAL (path conflict), or a store
 * error (logged).  On failure the temp file is removed and no object
 * changed -- except when the final fsync fails: the object is then in
 * place but perhaps not durable, and the call reports the error.
 */
static int dir_publish(struct dir_store *d, const char *key,
		       unsigned flags, dir_fill_fn fill, void *ctx)
{
	const char *base = key_base(key);
	char tmp[DIR_TMP_NAME_MAX];
	int dfd, fd, rc, e;

	for (int attempt = 0;; attempt++) {
		dfd = dir_open_parent(d, key);
		if (dfd >= 0) {
			tmp_name(tmp, sizeof(tmp), base);
			fd = openat(dfd, tmp,
				    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (fd >= 0)
				break;
			e = errno;
			close(dfd);
			/* ENOENT: the directory was removed after we opened
			 * it; EEXIST: a crashed process with our pid left this
			 * name.  Both: walk again, with a fresh name. */
			if (e != ENOENT && e != EEXIST)
				return dir_fail(d, "create temp for", key, e);
			dfd = -ENOENT;
		}
		if (dfd != -ENOENT)
			return dfd;
		if (attempt == DIR_RETRIES) {
			nv_log(NV_ERR, NV_SUB_STORE,
			       "dir:%s put %s: directory removed under us %d times",
			       d->root, key, DIR_RETRIES + 1);
			return -EIO;
		}
	}

	rc = fill(ctx, fd);
	if (rc < 0)
		goto out_tmp;
	if (fdatasync(fd) < 0) {
		rc = dir_fail(d, "fdatasync", key, errno);
		goto out_tmp;
	}
	e = close(fd);
	fd = -1;
	if (e < 0) {
		rc = dir_fail(d, "close", key, errno);
		goto out_tmp;
	}
	if (flags & STORE_CREATE_ONCE) {
		if (linkat(dfd, tmp, dfd, base, 0) < 0) {
			struct stat st;

			e = errno;
			if (e != EEXIST)
				rc = dir_fail(d, "link", key, e);
			else if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				 !S_ISREG(st.st_mode))
				rc = dir_conflict(d, key);
			else
				rc = -EEXIST;
			goto out_tmp;
		}
		/* The object is in place; a temp left behind is only litter. */
		if (unlinkat(dfd, tmp, 0) < 0)
			nv_log(NV_WARN, NV_SUB_STORE, "dir:%s put %s: unlink %s: %s",
			       d->root, key, tmp, strerror(errno));
	} else if (renameat(dfd, tmp, dfd, base) < 0) {
		e = errno;
		rc = e == EISDIR ? dir_conflict(d, key)
				 : dir_fail(d, "rename", key, e);
		goto out_tmp;
	}
	if (fsync(dfd) < 0) {
		rc = dir_fail(d, "fsync(dir)", key, errno);
		goto out_dir;
	}
	rc = 0;
	goto out_dir;

out_tmp:
	if (fd >= 0)
		close(fd);
	if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
		nv_log(NV_WARN, NV_SUB_STORE, "dir:%s put %s: unlink %s: %s",
		       d->root, key, tmp, strerror(errno));
out_dir:
	close(dfd);
	return rc;
}

struct dir_put_ctx {
	const struct dir_store *d;
	const char *key;
	const struct iovec *iov;
	int iovcnt;
};

static int put_fill(void *arg, int fd)
{
	struct dir_put_ctx *c = arg;
	int rc = write_iov(fd, c->iov, c->iovcnt, 0);

	return rc < 0 ? dir_fail(c->d, "write", c->key, -rc) : 0;
}

static int dir_put(void *be, const char *key, const struct iovec *iov,
		   int iovcnt, unsigned flags)
{
	struct dir_put_ctx c = { be, key, iov, iovcnt };

	return dir_publish(be, key, flags, put_fill, &c);
}

/* ------------------------------------------------- get, head, delete */

/* Open key for reading: an fd and its size, or -ENOENT / a store error
 * (logged).  Directories, symlinks and other non-files are not objects. */
static int dir_open_object(const struct dir_store *d, const char *key,
			   uint64_t *size)
{
	struct stat st;
	int fd, e;

	fd = openat(d->root_fd, key, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		return dir_missing(e) ? -ENOENT : dir_fail(d, "open", key, e);
	}
	if (fstat(fd, &st) < 0) {
		e = errno;
		close(fd);
		return dir_fail(d, "fstat", key, e);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOENT;
	}
	*size = (uint64_t)st.st_size;
	return fd;
}

static int dir_get_range(void *be, const char *key, uint64_t off, size_t len,
			 void *dst, size_t *got)
{
	const struct dir_store *d = be;
	uint64_t size;
	size_t want, done = 0;
	int fd, rc = 0;

	*got = 0;
	fd = dir_open_object(d, key, &size);
	if (fd < 0)
		return fd;
	if (off > size) {
		rc = -ERANGE;
		goto out;
	}
	/* Objects never change in place (a put renames a new inode over the
	 * old one), so size bounds what this fd can return. */
	want = size - off < len ? (size_t)(size - off) : len;
	while (done < want) {
		ssize_t n = pread(fd, (char *)dst + done, want - done,
				  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = dir_fail(d, "pread", key, errno);
			goto out;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
out:
	close(fd);
	return rc;
}

static int dir_head(void *be, const char *key, uint64_t *size)
{
	const struct dir_store *d = be;
	struct stat st;

	if (fstatat(d->root_fd, key, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return dir_missing(errno) ? -ENOENT : dir_fail(d, "stat", key, errno);
	if (!S_ISREG(st.st_mode))
		return -ENOENT;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* Remove key's now-empty directories bottom-up, up to (not including)
 * ROOT.  The first one that is not empty (or already gone) ends it; a
 * put racing us re-creates what it needs (invariant 3). */
static void dir_prune(const struct dir_store *d, const char *key)
{
	char path[STORE_KEY_MAX + 1];
	char *slash;

	snprintf(path, sizeof(path), "%s", key);
	while ((slash = strrchr(path, '/'))) {
		*slash = '\0';
		if (unlinkat(d->root_fd, path, AT_REMOVEDIR) < 0)
			break;
	}
}

static int dir_del(void *be, const char *const *keys, size_t n)
{
	const struct dir_store *d = be;

	for (size_t i = 0; i < n; i++) {
		int e;

		if (unlinkat(d->root_fd, keys[i], 0) < 0) {
			e = errno;
			/* EISDIR: a directory is not an object, so the key
			 * has no object to delete. */
			if (!dir_missing(e) && e != EISDIR)
				return dir_fail(d, "unlink", keys[i], e);
		}
		dir_prune(d, keys[i]);
	}
	return 0;
}

/* ------------------------------------------------------------- list */

struct dir_lister {
	const struct dir_store *d;
	const char *prefix; /* borrowed for the call; "" for all */
	size_t plen;
	const char *after;  /* borrowed; "" for none */
	store_list_fn fn;
	void *arg;
	/* The directory being listed ("a/b/", "" for ROOT) followed by the
	 * name at hand.  A key fits (<= STORE_KEY_MAX), and a directory is
	 * only entered when a key below it can fit, so +2 covers the '/' and
	 * NUL written before a candidate is judged. */
	char path[STORE_KEY_MAX + 2];
};

/* The kept names of one directory, NUL-separated in one allocation;
 * directory names carry their trailing '/'. */
struct dir_names {
	char *buf;
	size_t len, cap;
	size_t n;
};

static int names_add(struct dir_names *nm, const char *name, size_t n)
{
	if (nm->len + n + 1 > nm->cap) {
		size_t cap = nm->cap ? nm->cap : 4096;
		char *p;

		while (cap < nm->len + n + 1)
			cap *= 2;
		p = realloc(nm->buf, cap);
		if (!p)
			return -ENOMEM;
		nm->buf = p;
		nm->cap = cap;
	}
	memcpy(nm->buf + nm->len, name, n + 1);
	nm->len += n + 1;
	nm->n++;
	return 0;
}

static int names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * May path[0..len) -- a key, or with dir a directory prefix ending in '/'
 * -- give keys this listing wants?  A key must start with the prefix and
 * sort after start_after.  A directory must agree with the prefix as far
 * as both go, and not sort wholly before start_after: it is skipped only
 * when it differs from start_after at some byte and is smaller there.
 */
static bool list_wanted(const struct dir_lister *l, size_t len, bool dir)
{
	const char *c = l->path;

	if (dir)
		return memcmp(c, l->prefix, len < l->plen ? len : l->plen) == 0 &&
		       strncmp(c, l->after, len) >= 0;
	return len >= l->plen && memcmp(c, l->prefix, l->plen) == 0 &&
	       strcmp(c, l->after) > 0;
}

/* path holds a key: report it with its size, unless it vanished or is not
 * a file.  fn's result: 0 go on, > 0 stop, < 0 error. */
static int list_emit(struct dir_lister *l)
{
	struct stat st;

	if (fstatat(l->d->root_fd, l->path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (dir_missing(errno))
			return 0; /* deleted since we read its directory */
		return dir_fail(l->d, "stat", l->path, errno);
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	return l->fn(l->arg, l->path, (uint64_t)st.st_size);
}

/* Read directory path[0..dlen) and keep the wanted names in nm. */
static int list_read(struct dir_lister *l, size_t dlen, struct dir_names *nm)
{
	struct dirent *de;
	DIR *dp;
	int fd, rc = 0, e;

	l->path[dlen] = '\0';
	fd = openat(l->d->root_fd, dlen ? l->path : ".",
		    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		/* Gone (a delete emptied it) or never there: no keys. */
		return dir_missing(e) ? 0 : dir_fail(l->d, "open(dir)", l->path, e);
	}
	dp = fdopendir(fd);
	if (!dp) {
		e = errno;
		close(fd);
		return dir_fail(l->d, "fdopendir", l->path, e);
	}
	for (;;) {
		size_t n, len;
		bool dir;

		errno = 0;
		de = readdir(dp);
		if (!de) {
			if (errno) {
				l->path[dlen] = '\0';
				rc = dir_fail(l->d, "readdir", l->path, errno);
			}
			break;
		}
		/* ".", "..", temp files, "#mpu" and anything else that is no
		 * key component are not ours to list. */
		if (store_key_check(de->d_name) < 0)
			continue;
		n = strlen(de->d_name);
		if (de->d_type == DT_DIR) {
			dir = true;
		} else if (de->d_type == DT_REG) {
			dir = false;
		} else if (de->d_type == DT_UNKNOWN) {
			struct stat st;

			if (fstatat(dirfd(dp), de->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) < 0)
				continue; /* removed meanwhile */
			if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
				continue;
			dir = S_ISDIR(st.st_mode);
		} else {
			continue;
		}
		/* A key must fit; a directory must leave room for "/x". */
		if (dlen + n + (dir ? 2 : 0) > STORE_KEY_MAX)
			continue;
		memcpy(l->path + dlen, de->d_name, n);
		len = dlen + n;
		if (dir)
			l->path[len++] = '/';
		l->path[len] = '\0';
		if (!list_wanted(l, len, dir))
			continue;
		rc = names_add(nm, l->path + dlen, len - dlen);
		if (rc < 0)
			break;
	}
	closedir(dp);
	return rc;
}

/* List directory path[0..dlen) (which ends in '/', or is ROOT when dlen
 * is 0) and everything below it, in byte order.  0 when done, > 0 when fn
 * asked to stop, < 0 on error. */
static int list_level(struct dir_lister *l, size_t dlen)
{
	struct dir_names nm = { 0 };
	char **v = NULL;
	char *p;
	int rc;

	rc = list_read(l, dlen, &nm);
	if (rc < 0 || nm.n == 0)
		goto out;
	v = malloc(nm.n * sizeof(*v));
	if (!v) {
		rc = -ENOMEM;
		goto out;
	}
	p = nm.buf;
	for (size_t i = 0; i < nm.n; i++) {
		v[i] = p;
		p += strlen(p) + 1;
	}
	/* Directory names end in '/', so plain strcmp is key byte order. */
	qsort(v, nm.n, sizeof(*v), names_cmp);
	for (size_t i = 0; i < nm.n && rc == 0; i++) {
		size_t n = strlen(v[i]);

		memcpy(l->path + dlen, v[i], n + 1);
		if (v[i][n - 1] == '/')
			rc = list_level(l, dlen + n);
		else
			rc = list_emit(l);
	}
out:
	free(v);
	free(nm.buf);
	return rc;
}

static int dir_list(void *be, const char *prefix, const char *start_after,
		    store_list_fn fn, void *arg)
{
	struct dir_lister l = {
		.d = be, .prefix = prefix, .plen = strlen(prefix),
		.after = start_after, .fn = fn, .arg = arg,
	};
	const char *slash = strrchr(prefix, '/');
	size_t dlen = slash ? (size_t)(slash - prefix) + 1 : 0;
	int rc;

	/* Start in the deepest directory the prefix names whole ("a/b/" of
	 * "a/b/c"): nothing above it can match.  If that path is no valid
	 * key path ("a//", "./"), no key can have the prefix. */
	if (dlen > 0) {
		memcpy(l.path, prefix, dlen - 1);
		l.path[dlen - 1] = '\0';
		if (store_key_check(l.path) < 0)
			return 0;
		l.path[dlen - 1] = '/';
	}
	rc = list_level(&l, dlen);
	return rc > 0 ? 0 : rc;
}

/* -------------------------------------------------------- multipart */

/* Remove directory name under parent and the files in it (upload
 * directories hold only files).  0 or -errno (raw). */
static int rmdir_files(int parent, const char *name)
{
	struct dirent *de;
	DIR *dp;
	int fd, rc = 0;

	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	dp = fdopendir(fd);
	if (!dp) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((de = readdir(dp))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(dirfd(dp), de->d_name, 0) < 0 && errno != ENOENT)
			rc = -errno;
	}
	closedir(dp);
	if (rc == 0 && unlinkat(parent, name, AT_REMOVEDIR) < 0)
		rc = -errno;
	return rc;
}

/* Discard an upload's directory (and ROOT/#mpu when that leaves it empty;
 * a concurrent create re-makes it, see dir_mpu_create) and free u. */
static void upload_free(const struct dir_store *d, struct dir_upload *u)
{
	int rc;

	close(u->fd);
	rc = rmdir_files(d->root_fd, u->path);
	if (rc < 0)
		nv_log(NV_WARN, NV_SUB_STORE, "dir:%s mpu %s: remove %s: %s",
		       d->root, u->key, u->path, strerror(-rc));
	(void)unlinkat(d->root_fd, DIR_MPU, AT_REMOVEDIR);
	free(u->key);
	free(u);
}

/* A fresh upload id of 32 hex digits: random, or (no entropy yet) time,
 * sequence and pid -- unique enough, and mkdir's EEXIST catches the rest. */
static void upload_id(char *hex, size_t size)
{
	unsigned char b[DIR_MPU_ID_BYTES];

	if (getrandom(b, sizeof(b), GRND_NONBLOCK) == (ssize_t)sizeof(b)) {
		for (size_t i = 0; i < sizeof(b); i++)
			snprintf(hex + 2 * i, size - 2 * i, "%02x", b[i]);
		return;
	}
	snprintf(hex, size, "%016llx%08lx%08x",
		 (unsigned long long)nv_now_wall_ns(),
		 atomic_fetch_add_explicit(&dir_tmp_seq, 1, memory_order_relaxed) &
			 0xfffffffful,
		 (unsigned)getpid());
}

static int dir_mpu_create(void *be, const char *key, void **upload)
{
	const struct dir_store *d = be;
	struct dir_upload *u;
	char id[2 * DIR_MPU_ID_BYTES + 1];
	int rc, e;

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->key = strdup(key);
	if (!u->key) {
		rc = -ENOMEM;
		goto fail_u;
	}
	for (int attempt = 0;; attempt++) {
		if (mkdirat(d->root_fd, DIR_MPU, 0755) < 0 && errno != EEXIST) {
			rc = dir_fail(d, "mkdir " DIR_MPU " for", key, errno);
			goto fail_key;
		}
		upload_id(id, sizeof(id));
		snprintf(u->path, sizeof(u->path), DIR_MPU "/%s", id);
		if (mkdirat(d->root_fd, u->path, 0755) == 0)
			break;
		e = errno;
		/* ENOENT: another upload's end removed #mpu between our two
		 * mkdirs; EEXIST: an id collision.  Both: try again. */
		if ((e != ENOENT && e != EEXIST) || attempt == DIR_RETRIES) {
			rc = dir_fail(d, "mkdir upload dir for", key, e);
			goto fail_key;
		}
	}
	u->fd = openat(d->root_fd, u->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (u->fd < 0) {
		rc = dir_fail(d, "open upload dir for", key, errno);
		goto fail_dir;
	}
	*upload = u;
	return 0;

fail_dir:
	(void)unlinkat(d->root_fd, u->path, AT_REMOVEDIR);
fail_key:
	free(u->key);
fail_u:
	free(u);
	return rc;
}

/* Make part part_no of u from what fill writes into a temp file, renamed
 * into place (a re-sent part replaces the old one whole).  Parts are not
 * fsync'd: complete makes the concatenation durable.  0 or store error. */
static int part_publish(const struct dir_store *d, struct dir_upload *u,
			int part_no, dir_fill_fn fill, void *ctx)
{
	char part[DIR_PART_NAME_MAX], tmp[DIR_TMP_NAME_MAX];
	int fd, rc;

	snprintf(part, sizeof(part), DIR_PART_FMT, part_no);
	tmp_name(tmp, sizeof(tmp), part);
	fd = openat(u->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return dir_fail(d, "create part for", u->key, errno);
	rc = fill(ctx, fd);
	if (close(fd) < 0 && rc == 0)
		rc = dir_fail(d, "close part for", u->key, errno);
	if (rc == 0 && renameat(u->fd, tmp, u->fd, part) < 0)
		rc = dir_fail(d, "rename part for", u->key, errno);
	if (rc < 0)
		(void)unlinkat(u->fd, tmp, 0);
	return rc;
}

static int dir_mpu_put_part(void *be, void *upload, int part_no,
			    const struct iovec *iov, int iovcnt)
{
	struct dir_upload *u = upload;
	struct dir_put_ctx c = { be, u->key, iov, iovcnt };

	return part_publish(be, u, part_no, put_fill, &c);
}

struct dir_copy_ctx {
	const struct dir_store *d;
	const char *key; /* for logs */
	int src;
	uint64_t off, len;
};

static int copy_fill(void *arg, int fd)
{
	struct dir_copy_ctx *c = arg;
	int rc = copy_range(c->src, c->off, fd, 0, c->len);

	return rc < 0 ? dir_fail(c->d, "copy into", c->key, -rc) : 0;
}

static int dir_mpu_copy_part(void *be, void *upload, int part_no,
			     const char *src_key, uint64_t off, uint64_t len)
{
	const struct dir_store *d = be;
	struct dir_upload *u = upload;
	struct dir_copy_ctx c = { d, u->key, -1, off, len };
	uint64_t size;
	int rc;

	c.src = dir_open_object(d, src_key, &size);
	if (c.src < 0)
		return c.src;
	if (off > size || len > size - off) {
		nv_log(NV_WARN, NV_SUB_STORE,
		       "dir:%s mpu %s: copy of [%llu, +%llu) from %s of %llu bytes",
		       d->root, u->key, (unsigned long long)off,
		       (unsigned long long)len, src_key, (unsigned long long)size);
		rc = -ERANGE;
		goto out;
	}
	rc = part_publish(d, u, part_no, copy_fill, &c);
out:
	close(c.src);
	return rc;
}

static int int_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* The part numbers present in u, ascending, in *parts (caller frees).
 * 0 or store error. */
static int upload_parts(const struct dir_store *d, struct dir_upload *u,
			int **parts, size_t *n)
{
	struct dirent *de;
	DIR *dp;
	int *v = NULL, *nv;
	size_t cnt = 0, cap = 0;
	int fd, rc = 0;

	fd = openat(u->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return dir_fail(d, "open upload dir for", u->key, errno);
	dp = fdopendir(fd);
	if (!dp) {
		rc = dir_fail(d, "fdopendir upload dir for", u->key, errno);
		close(fd);
		return rc;
	}
	while ((de = readdir(dp))) {
		char want[DIR_PART_NAME_MAX];
		int no;

		/* Exactly "part-NNNNN": temps and anything else are skipped. */
		if (sscanf(de->d_name, "part-%5d", &no) != 1 || no < 1)
			continue;
		snprintf(want, sizeof(want), DIR_PART_FMT, no);
		if (strcmp(want, de->d_name))
			continue;
		if (cnt == cap) {
			cap = cap ? 2 * cap : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[cnt++] = no;
	}
	closedir(dp);
	if (rc < 0) {
		free(v);
		return rc;
	}
	if (cnt > 1)
		qsort(v, cnt, sizeof(*v), int_cmp);
	*parts = v;
	*n = cnt;
	return 0;
}

struct dir_concat_ctx {
	const struct dir_store *d;
	struct dir_upload *u;
	const int *parts;
	size_t n;
};

/* Fill the object with the upload's parts in part-number order. */
static int concat_fill(void *arg, int fd)
{
	struct dir_concat_ctx *c = arg;
	uint64_t off = 0;

	for (size_t i = 0; i < c->n; i++) {
		char part[DIR_PART_NAME_MAX];
		struct stat st;
		int pfd, rc;

		snprintf(part, sizeof(part), DIR_PART_FMT, c->parts[i]);
		pfd = openat(c->u->fd, part, O_RDONLY | O_CLOEXEC);
		if (pfd < 0)
			return dir_fail(c->d, "open part for", c->u->key, errno);
		if (fstat(pfd, &st) < 0) {
			rc = dir_fail(c->d, "fstat part for", c->u->key, errno);
			close(pfd);
			return rc;
		}
		rc = copy_range(pfd, 0, fd, off, (uint64_t)st.st_size);
		close(pfd);
		if (rc < 0)
			return dir_fail(c->d, "concatenate parts into", c->u->key,
					-rc);
		off += (uint64_t)st.st_size;
	}
	return 0;
}

static int dir_mpu_complete(void *be, void *upload, unsigned flags)
{
	struct dir_store *d = be;
	struct dir_upload *u = upload;
	struct dir_concat_ctx c = { d, u, NULL, 0 };
	int *parts = NULL;
	struct stat st;
	int rc;

	/* An early answer before copying everything; link() decides. */
	if ((flags & STORE_CREATE_ONCE) &&
	    fstatat(d->root_fd, u->key, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode)) {
		rc = -EEXIST;
		goto out;
	}
	rc = upload_parts(d, u, &parts, &c.n);
	if (rc < 0)
		goto out;
	if (c.n == 0) { /* S3 refuses this too (MalformedXML) */
		nv_log(NV_ERR, NV_SUB_STORE, "dir:%s mpu %s: complete with no parts",
		       d->root, u->key);
		rc = -EINVAL;
		goto out_parts;
	}
	c.parts = parts;
	rc = dir_publish(d, u->key, flags, concat_fill, &c);
out_parts:
	free(parts);
out:
	upload_free(d, u);
	return rc;
}

static void dir_mpu_abort(void *be, void *upload)
{
	upload_free(be, upload);
}

/* Remove upload directories idle for more than DIR_MPU_STALE_NS: left by
 * a crashed process (invariant 6).  Failures are logged and skipped. */
static void sweep_uploads(const struct dir_store *d)
{
	uint64_t now = nv_now_wall_ns();
	struct dirent *de;
	DIR *dp;
	int fd, removed = 0, rc;

	fd = openat(d->root_fd, DIR_MPU, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			nv_log(NV_WARN, NV_SUB_STORE, "dir:%s open " DIR_MPU ": %s",
			       d->root, strerror(errno));
		return;
	}
	dp = fdopendir(fd);
	if (!dp) {
		nv_log(NV_WARN, NV_SUB_STORE, "dir:%s fdopendir " DIR_MPU ": %s",
		       d->root, strerror(errno));
		close(fd);
		return;
	}
	while ((de = readdir(dp))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (nv_ts_to_ns(&st.st_mtim) + DIR_MPU_STALE_NS > now)
			continue;
		rc = rmdir_files(dirfd(dp), de->d_name);
		if (rc < 0)
			nv_log(NV_WARN, NV_SUB_STORE, "dir:%s remove " DIR_MPU "/%s: %s",
			       d->root, de->d_name, strerror(-rc));
		else
			removed++;
	}
	closedir(dp);
	(void)unlinkat(d->root_fd, DIR_MPU, AT_REMOVEDIR);
	if (removed > 0)
		nv_log(NV_INFO, NV_SUB_STORE,
		       "dir:%s: removed %d multipart upload(s) idle for over 24 h",
		       d->root, removed);
}

/* ------------------------------------------------------ open, close */

static void dir_close(void *be)
{
	struct dir_store *d = be;

	if (!d)
		return;
	if (d->root_fd >= 0)
		close(d->root_fd);
	pthread_mutex_destroy(&d->synced_lock);
	free(d->root);
	free(d);
}

static const struct store_backend_ops dir_ops = {
	.scheme = "dir",
	.close = dir_close,
	.put = dir_put,
	.get_range = dir_get_range,
	.head = dir_head,
	.del = dir_del,
	.list = dir_list,
	.mpu_create = dir_mpu_create,
	.mpu_put_part = dir_mpu_put_part,
	.mpu_copy_part = dir_mpu_copy_part,
	.mpu_complete = dir_mpu_complete,
	.mpu_abort = dir_mpu_abort,
};

/* mkdir -p root (absolute, no trailing '/'), fsyncing the parent of every
 * directory made so the root survives a crash.  0 or -errno (raw). */
static int mkdir_root(char *root)
{
	char *slash = root;

	for (;;) {
		int fd, e;

		slash = strchr(slash + 1, '/');
		if (slash)
			*slash = '\0';
		if (mkdir(root, 0755) == 0) {
			/* fsync the new directory's parent. */
			char *up = strrchr(root, '/');

			*up = '\0';
			fd = open(up == root ? "/" : root,
				  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			*up = '/';
			e = fd < 0 || fsync(fd) < 0 ? errno : 0;
			if (fd >= 0)
				close(fd);
		} else {
			e = errno == EEXIST ? 0 : errno;
		}
		if (slash)
			*slash = '/';
		if (e)
			return -e;
		if (!slash)
			return 0;
	}
}

int dir_store_open(const char *root, struct store **out)
{
	struct dir_store *d;
	char *name = NULL;
	size_t n;
	int rc;

	if (!root || root[0] != '/') {
		nv_log(NV_ERR, NV_SUB_STORE, "dir store root '%s' is not absolute",
		       root ? root : "(null)");
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->synced_lock, NULL);
	d->root_fd = -1;
	d->root = strdup(root);
	if (!d->root) {
		rc = -ENOMEM;
		goto fail;
	}
	for (n = strlen(d->root); n > 1 && d->root[n - 1] == '/'; n--)
		d->root[n - 1] = '\0';
	if (n > 1) {
		rc = mkdir_root(d->root);
		if (rc < 0) {
			nv_log(NV_ERR, NV_SUB_STORE, "dir:%s: create: %s", d->root,
			       strerror(-rc));
			goto fail;
		}
	}
	d->root_fd = open(d->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->root_fd < 0) {
		rc = -errno;
		nv_log(NV_ERR, NV_SUB_STORE, "dir:%s: open: %s", d->root,
		       strerror(-rc));
		goto fail;
	}
	sweep_uploads(d);
	name = malloc(n + sizeof("dir:"));
	if (!name) {
		rc = -ENOMEM;
		goto fail;
	}
	snprintf(name, n + sizeof("dir:"), "dir:%s", d->root);
	rc = store_wrap(&dir_ops, d, name, out); /* closes d on failure */
	free(name);
	return rc;

fail:
	dir_close(d);
	return rc;
}

const struct store_scheme dir_store_scheme = {
	.prefix = "dir:",
	.usage = "dir:/abs/path, /abs/path",
	.path = true,
	.open = dir_store_open,
};
