/*
 * ops.c - the directory object store's ops glue: put, ranged get, head,
 * delete, close, the ops table, dir_store_open() and its scheme entry
 * (directory backend; overview and invariants in internal.h).
 *
 * For: what each store.h call means in files, and the lifetime of struct
 * dir_store (making ROOT durable, sweeping stale uploads at open).
 * Not for: how an object is written (files.c dir_publish(), or seg.c
 * for chain slots), listing (list.c), multipart (mpu.c).
 *
 * Invariants (internal.h 3, 6), here:
 *  1. Only regular files are objects: directories, symlinks and others
 *     read as -ENOENT (dir_open_object()).
 *  2. Delete removes emptied directories bottom-up and never ROOT; a
 *     missing key is no error.
 *  3. dir_store_open() makes every directory of ROOT it creates durable,
 *     and sweeps stale uploads before the store is used.
 *  4. A key the segment index holds (seg.c) is answered from there; put
 *     sends chain slot keys there when segments are on; get, head and
 *     delete look in both, so a store written with segments on and off
 *     reads the same.
 *
 * Locking: none here (struct dir_store is immutable but for the synced
 * set, files.c).
 */
#include "config.h"
#include "engine/store/dir/internal.h"
#include "src/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int dir_put(void *be, const char *key, const struct iovec *iov,
		   int iovcnt, unsigned flags)
{
	struct dir_put_ctx c = { be, key, iov, iovcnt };
	uint64_t size;

	if (dir_seg_wants(be, key))
		return dir_seg_put(be, key, iov, iovcnt, flags);
	/* A slot a segment holds (written while segments were on). */
	if ((flags & STORE_CREATE_ONCE) && dir_seg_head(be, key, &size) == 0)
		return -EEXIST;
	return dir_publish(be, key, flags, dir_put_fill, &c);
}

/* ------------------------------------------------- get, head, delete */

/* Open key for reading: an fd and its size, or -ENOENT / a store error
 * (logged).  Directories, symlinks and other non-files are not objects. */
int dir_open_object(const struct dir_store *d, const char *key,
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
	rc = dir_seg_get(be, key, off, len, dst, got);
	if (rc != -ENOENT)
		return rc;
	rc = 0;
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

	if (dir_seg_head(be, key, size) == 0)
		return 0;
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
static void dir_prune(struct dir_store *d, const char *key)
{
	char path[STORE_KEY_MAX + 1];
	char *slash;

	snprintf(path, sizeof(path), "%s", key);
	pthread_rwlock_wrlock(&d->prune_lock); /* no put of ours between walk and temp */
	while ((slash = strrchr(path, '/'))) {
		*slash = '\0';
		if (unlinkat(d->root_fd, path, AT_REMOVEDIR) < 0)
			break;
	}
	pthread_rwlock_unlock(&d->prune_lock);
}

static int dir_del(void *be, const char *const *keys, size_t n)
{
	struct dir_store *d = be;

	for (size_t i = 0; i < n; i++) {
		int e = dir_seg_del(d, keys[i]);

		if (e < 0)
			return e;
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

/* ------------------------------------------------------ open, close */

static void dir_close(void *be)
{
	struct dir_store *d = be;

	if (!d)
		return;
	dir_segs_close(d);
	if (d->root_fd >= 0)
		close(d->root_fd);
	pthread_mutex_destroy(&d->synced_lock);
	pthread_rwlock_destroy(&d->prune_lock);
	u64map_free(d->synced);
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
	return dir_store_open_opts(root, NULL, out);
}

int dir_store_open_opts(const char *root, const struct dir_store_opts *o,
			struct store **out)
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
	{
		pthread_rwlockattr_t ra; /* writer preference: a prune never starves */

		pthread_rwlockattr_init(&ra);
		pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&d->prune_lock, &ra);
		pthread_rwlockattr_destroy(&ra);
	}
	d->root_fd = -1;
	d->root = strdup(root);
	d->synced = u64map_new(DIR_SYNCED_MAX);
	if (!d->root || !d->synced) {
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
	dir_sweep_uploads(d);
	rc = dir_segs_open(d, o && o->slot_segments, o ? o->segment_bytes : 0);
	if (rc < 0)
		goto fail;
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
		.url = { .prefix = "dir:", .usage = "dir:/abs/path, /abs/path", .path = true },
	.open = dir_store_open,
};
