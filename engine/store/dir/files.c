/*
 * files.c - the file-system half of the directory object store: errno
 * translation, temp names, writes and copies, the synced set, a key's
 * directories, and publishing an object (directory backend; overview and
 * invariants in internal.h).
 *
 * For: dir_publish(), the one way an object or a part appears (temp file
 * beside it, fill, fdatasync, link/rename, fsync of the directory), and
 * the helpers the other files share (dir_fail(), dir_missing(),
 * dir_tmp_name(), dir_write_iov(), dir_copy_range(), dir_put_fill()).
 * Not for: what a store call means (ops.c, list.c, mpu.c).
 *
 * Invariants (internal.h 1, 2, 3, 5), here:
 *  1. dir_open_parent() never returns a directory whose entry it has not
 *     seen durable: a directory it made or found unsynced has its parent
 *     fsync'd first, and is remembered in the synced set.
 *  2. dir_publish() removes its temp file on every failure up to and
 *     including the final link/rename, and retries a walk that met a
 *     concurrent delete (-ENOENT) at most DIR_RETRIES times.
 *  3. dir_errno() is the one translation of a file system errno into a
 *     store.h error; dir_fail() logs it once (a full disk rate-limited).
 *  4. A put never leaves less than dir_reserve() free on the file
 *     system (dir_headroom(), checked before and after the fill): the
 *     metastore next to the store keeps room to delete and trim.  Only
 *     a STORE_RESERVE put (recovery's fence) may go below.
 *
 * Locking: synced_lock guards the synced set (d->synced), held only inside
 * synced_has() and synced_add(), never across I/O.  prune_lock is held
 * shared from a put's walk until its temp file (or, for an upload, its
 * link) is in the object's directory, and exclusively by a delete's
 * prune (ops.c), so within a process a delete never empties a directory
 * a put is about to fill; synced_lock may be taken under it.
 */
#include "config.h"
#include "engine/store/dir/internal.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static atomic_ulong dir_tmp_seq;

unsigned long dir_next_seq(void)
{
	return atomic_fetch_add_explicit(&dir_tmp_seq, 1, memory_order_relaxed);
}

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
int dir_fail(const struct dir_store *d, const char *what,
	     const char *key, int e)
{
	static struct nv_ratelimit full; /* a full disk fails every put */

	if (e == ENOSPC || e == EDQUOT)
		nv_log_ratelimited(&full, NV_ERR, NV_SUB_STORE, "dir:%s %s %s: %s", d->root,
				   what, key, strerror(e));
	else
		nv_log(NV_ERR, NV_SUB_STORE, "dir:%s %s %s: %s", d->root, what, key,
		       strerror(e));
	return dir_errno(e);
}

/*
 * The reserve (invariant 4): the space a put may not take, so that the
 * metastore beside the store (usually the same file system) can always
 * commit a delete or a trim on a full disk.  5% of the file system,
 * at least 8 MiB, at most 64 MiB, and never more than a quarter of it.
 */
static uint64_t dir_reserve(uint64_t total)
{
	uint64_t r = total / 20;

	if (r < DIR_RESERVE_MIN)
		r = DIR_RESERVE_MIN;
	if (r > DIR_RESERVE_MAX)
		r = DIR_RESERVE_MAX;
	return r > total / 4 ? total / 4 : r;
}

/* 0 while the file system of fd keeps the reserve free, else -ENOSPC
 * (logged, rate-limited). */
int dir_headroom(const struct dir_store *d, int fd, const char *key)
{
	return dir_headroom_for(d, fd, key, 0);
}

/* The same with need more bytes taken (a segment about to be allocated,
 * seg.c). */
int dir_headroom_for(const struct dir_store *d, int fd, const char *key, uint64_t need)
{
	static struct nv_ratelimit rl;
	struct statvfs sv;
	uint64_t total, avail, reserve;

	if (fstatvfs(fd, &sv) || !sv.f_blocks)
		return 0; /* unknown: let the write itself fail */
	total = (uint64_t)sv.f_blocks * sv.f_frsize;
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	reserve = dir_reserve(total);
	if (avail >= reserve && avail - reserve >= need)
		return 0;
	nv_log_ratelimited(&rl, NV_ERR, NV_SUB_STORE,
			   "dir:%s put %s: refused, %" PRIu64 " bytes free is below the %" PRIu64
			   " kept for the metastore (so rm and trim still work): delete or trim "
			   "streams, or free space", d->root, key, avail, reserve);
	return -ENOSPC;
}

/* The key (or part of a path) names something that cannot be an object of
 * this store: not there, a non-directory in the middle of the path, a
 * symlink (O_NOFOLLOW), or a component too long to exist. */
bool dir_missing(int e)
{
	return e == ENOENT || e == ENOTDIR || e == ELOOP || e == ENAMETOOLONG;
}

/* A key whose path collides with an object or a directory (dir.h). */
int dir_conflict(const struct dir_store *d, const char *key)
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
void dir_tmp_name(char *buf, size_t size, const char *base)
{
	size_t n = strlen(base);
	unsigned long seq = dir_next_seq();

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
int dir_write_iov(int fd, const struct iovec *iov, int iovcnt, uint64_t off)
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
int dir_copy_range(int in, uint64_t in_off, int out, uint64_t out_off,
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
	bool found;

	pthread_mutex_lock(&d->synced_lock);
	found = u64map_get(d->synced, h) != NULL;
	pthread_mutex_unlock(&d->synced_lock);
	return found;
}

/* Remember h; a full set (DIR_SYNCED_MAX) starts over, and a set that
 * cannot grow forgets h: either only costs fsyncs. */
static void synced_add(struct dir_store *d, uint64_t h)
{
	static char present; /* the map's non-NULL value */

	pthread_mutex_lock(&d->synced_lock);
	if (u64map_count(d->synced) >= DIR_SYNCED_MAX) {
		size_t cur = 0;
		uint64_t k;

		while (u64map_next(d->synced, &cur, &k, NULL))
			u64map_remove(d->synced, k);
	}
	if (u64map_put(d->synced, h, &present)) {
		/* ENOMEM: not remembered, synced again next time. */
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
int dir_open_parent(struct dir_store *d, const char *key)
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

/*
 * Publish key: a temp file beside it is filled by fill(ctx, fd),
 * fdatasync'd, closed, then link()ed (STORE_CREATE_ONCE) or rename()d
 * into place, and the directory fsync'd (invariant 1).  0 once durable;
 * -EEXIST (create-once, key present), -EINVAL (path conflict), or a store
 * error (logged).  On failure the temp file is removed and no object
 * changed -- except when the final fsync fails: the object is then in
 * place but perhaps not durable, and the call reports the error.
 */
/* The directory of key (made as needed) and a new temp file in it for
 * base (name into tmp, open for writing into *fd): the directory's fd,
 * or a store error.  Called under prune_lock (shared), so no delete of
 * this process empties the directory before the temp file fills it
 * (internal.h invariant 3); another process's may, and the walk is
 * tried again. */
static int open_temp(struct dir_store *d, const char *key, const char *base, char *tmp,
		     size_t tmpsz, int *fd)
{
	for (int attempt = 0;; attempt++) {
		int dfd = dir_open_parent(d, key), e;

		if (dfd >= 0 && (e = NV_FP("dir.before_temp")) < 0) {
			close(dfd);
			return e;
		}
		if (dfd >= 0) {
			dir_tmp_name(tmp, tmpsz, base);
			*fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (*fd >= 0)
				return dfd;
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
}

int dir_publish(struct dir_store *d, const char *key,
		unsigned flags, dir_fill_fn fill, void *ctx)
{
	const char *base = key_base(key);
	char tmp[DIR_TMP_NAME_MAX];
	int dfd, fd = -1, rc, e;

	pthread_rwlock_rdlock(&d->prune_lock);
	dfd = open_temp(d, key, base, tmp, sizeof(tmp), &fd);
	pthread_rwlock_unlock(&d->prune_lock);
	if (dfd < 0)
		return dfd;

	rc = flags & STORE_RESERVE ? 0 : dir_headroom(d, fd, key);
	if (!rc)
		rc = fill(ctx, fd);
	/* Checked again with the object written: it may not take the
	 * reserve either (its temp file is removed below). */
	if (!rc && !(flags & STORE_RESERVE))
		rc = dir_headroom(d, fd, key);
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

int dir_put_fill(void *arg, int fd)
{
	struct dir_put_ctx *c = arg;
	int rc = dir_write_iov(fd, c->iov, c->iovcnt, 0);

	return rc < 0 ? dir_fail(c->d, "write", c->key, -rc) : 0;
}
