/*
 * mpu.c - store.h multipart uploads of the directory object store, under
 * ROOT/#mpu/<id>/ (directory backend; overview and invariants in
 * internal.h).
 *
 * For: dir_mpu_create/put_part/copy_part/complete/abort, the upload's
 * data file (parts sent in order), concatenating part files into the
 * object at complete otherwise, and dir_sweep_uploads().
 * Not for: part-number checks (store.c), how a file is published
 * (files.c dir_publish()).
 *
 * Parts in order: while parts arrive as 1, 2, 3, ... (the settle's
 * assembly sends them so), each is written (or copied) straight into the
 * upload's data file at the end of the one before, and complete
 * publishes that file itself: fdatasync, then link() (create-once) or
 * rename() into the object's directory, then fsync of that directory.
 * Every byte is written once.  The first part out of order (or sent
 * again) spills: the parts in the data file become part files, and the
 * upload goes on as part files, concatenated at complete.
 *
 * Invariants (internal.h 1 and 6), here:
 *  1. A part is whole or absent: a part file appears only by rename of a
 *     complete temp file in the upload's directory; a part in the data
 *     file counts (nappended) only once written whole.  A part sent
 *     twice keeps the last.
 *  2. Complete publishes the data file (all parts in order) or the
 *     concatenation of the part files in part-number order in a temp
 *     file (dir_publish()); either is fdatasync'd before its link or
 *     rename, so a crash leaves no object or the whole one.
 *  3. Complete and abort remove the upload directory on every path, and
 *     ROOT/#mpu when it is empty.
 *
 * Locking: a struct dir_upload's key, path and fd are immutable after
 * dir_mpu_create(); data, nappended, ends and spilled are under its lock,
 * held across an in-order part's write and a spill (parts of one upload
 * are few and sequential in practice).  Part files land under unique
 * temp names.  Complete/abort must not race with part uploads (store.h).
 */
#include "config.h"
#include "engine/store/dir/internal.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/lockcheck.h"
#include "src/base/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

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

	if (u->data >= 0)
		close(u->data);
	close(u->fd);
	rc = rmdir_files(d->root_fd, u->path);
	if (rc < 0)
		nv_log(NV_WARN, NV_SUB_STORE, "dir:%s mpu %s: remove %s: %s",
		       d->root, u->key, u->path, strerror(-rc));
	(void)unlinkat(d->root_fd, DIR_MPU, AT_REMOVEDIR);
	pthread_mutex_destroy(&u->lock);
	free(u->ends);
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
		 dir_next_seq() & 0xfffffffful,
		 (unsigned)getpid());
}

int dir_mpu_create(void *be, const char *key, void **upload)
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
	u->data = openat(u->fd, DIR_MPU_DATA, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (u->data < 0) {
		rc = dir_fail(d, "create upload data file for", key, errno);
		close(u->fd);
		(void)unlinkat(d->root_fd, u->path, AT_REMOVEDIR);
		goto fail_key;
	}
	pthread_mutex_init(&u->lock, NULL);
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
	dir_tmp_name(tmp, sizeof(tmp), part);
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

/* ---------------------------------------------------- parts in order */

/* What copy_fill() copies: len bytes of src at off. */
struct dir_copy_ctx {
	const struct dir_store *d;
	const char *key; /* for logs */
	int src;
	uint64_t off, len;
};

static int copy_fill(void *arg, int fd)
{
	struct dir_copy_ctx *c = arg;
	int rc = dir_copy_range(c->src, c->off, fd, 0, c->len);

	return rc < 0 ? dir_fail(c->d, "copy into", c->key, -rc) : 0;
}

/* Part part_no breaks the order: the parts in the data file become part
 * files, and every later part is one (u->spilled).  Caller holds
 * u->lock.  0 or store error. */
static int spill(const struct dir_store *d, struct dir_upload *u)
{
	int rc = 0;

	NV_ASSERT_LOCKED(&u->lock);
	for (int i = 0; !rc && i < u->nappended; i++) {
		uint64_t from = i ? u->ends[i - 1] : 0;
		struct dir_copy_ctx c = { d, u->key, u->data, from, u->ends[i] - from };

		rc = part_publish(d, u, i + 1, copy_fill, &c);
	}
	if (!rc)
		u->spilled = true;
	return rc;
}

/* Append part part_no (the next in order) to the data file through
 * fill-like write: 1 when the part is not the next one (the caller
 * writes a part file after a spill), 0 when it is in the data file, or
 * a store error.  Caller holds u->lock. */
static int append_part(const struct dir_store *d, struct dir_upload *u, int part_no,
		       int (*write)(void *ctx, int fd, uint64_t off, uint64_t *len), void *ctx)
{
	uint64_t off = u->nappended ? u->ends[u->nappended - 1] : 0, len = 0;
	int rc;

	NV_ASSERT_LOCKED(&u->lock);
	if (u->spilled)
		return 1;
	if (part_no != u->nappended + 1) {
		rc = spill(d, u);
		return rc ? rc : 1;
	}
	if (u->nappended == u->ends_cap) {
		int nc = u->ends_cap ? 2 * u->ends_cap : 64;
		uint64_t *p = realloc(u->ends, (size_t)nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		u->ends = p;
		u->ends_cap = nc;
	}
	rc = write(ctx, u->data, off, &len);
	if (rc < 0) {
		/* Whatever landed past off is not a part (invariant 1). */
		(void)ftruncate(u->data, (off_t)off);
		return rc;
	}
	u->ends[u->nappended++] = off + len;
	return 0;
}

struct iov_part {
	const struct dir_store *d;
	const char *key;
	const struct iovec *iov;
	int iovcnt;
};

static int iov_write(void *arg, int fd, uint64_t off, uint64_t *len)
{
	struct iov_part *p = arg;
	int rc = dir_write_iov(fd, p->iov, p->iovcnt, off);

	if (rc < 0)
		return dir_fail(p->d, "write part for", p->key, -rc);
	for (int i = 0; i < p->iovcnt; i++)
		*len += p->iov[i].iov_len;
	return 0;
}

static int range_write(void *arg, int fd, uint64_t off, uint64_t *len)
{
	struct dir_copy_ctx *c = arg;
	int rc = dir_copy_range(c->src, c->off, fd, off, c->len);

	if (rc < 0)
		return dir_fail(c->d, "copy into", c->key, -rc);
	*len = c->len;
	return 0;
}

int dir_mpu_put_part(void *be, void *upload, int part_no,
		     const struct iovec *iov, int iovcnt)
{
	struct dir_upload *u = upload;
	struct dir_put_ctx c = { be, u->key, iov, iovcnt };
	struct iov_part ip = { be, u->key, iov, iovcnt };
	int rc;

	pthread_mutex_lock(&u->lock);
	rc = append_part(be, u, part_no, iov_write, &ip);
	pthread_mutex_unlock(&u->lock);
	return rc == 1 ? part_publish(be, u, part_no, dir_put_fill, &c) : rc;
}

int dir_mpu_copy_part(void *be, void *upload, int part_no,
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
	pthread_mutex_lock(&u->lock);
	rc = append_part(d, u, part_no, range_write, &c);
	pthread_mutex_unlock(&u->lock);
	if (rc == 1)
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
		rc = dir_copy_range(pfd, 0, fd, off, (uint64_t)st.st_size);
		close(pfd);
		if (rc < 0)
			return dir_fail(c->d, "concatenate parts into", c->u->key,
					-rc);
		off += (uint64_t)st.st_size;
	}
	return 0;
}

/* Link (create-once) or rename the data file into place in dfd as base.
 * 0, 1 (dfd was removed under us: walk again), -EEXIST, or a store
 * error. */
static int data_link(struct dir_store *d, struct dir_upload *u, int dfd, const char *base,
		     unsigned flags)
{
	struct stat st;
	int e;

	if (flags & STORE_CREATE_ONCE) {
		if (linkat(u->fd, DIR_MPU_DATA, dfd, base, 0) == 0)
			return 0;
		e = errno;
		if (e == EEXIST)
			return fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
					       !S_ISREG(st.st_mode)
				       ? dir_conflict(d, u->key)
				       : -EEXIST;
	} else {
		if (renameat(u->fd, DIR_MPU_DATA, dfd, base) == 0)
			return 0;
		e = errno;
		if (e == EISDIR)
			return dir_conflict(d, u->key);
	}
	/* ENOENT: a delete emptied and removed the object's directory
	 * between our walk and the link (invariant 3). */
	return e == ENOENT ? 1 : dir_fail(d, "link upload into", u->key, e);
}

/* Complete an upload whose parts are all in the data file: it becomes
 * the object (invariant 2).  0 once durable, -EEXIST, or a store error. */
static int publish_data(struct dir_store *d, struct dir_upload *u, unsigned flags)
{
	const char *slash = strrchr(u->key, '/');
	const char *base = slash ? slash + 1 : u->key;
	int rc = flags & STORE_RESERVE ? 0 : dir_headroom(d, u->data, u->key);

	if (!rc && fdatasync(u->data) < 0)
		rc = dir_fail(d, "fdatasync", u->key, errno);
	for (int attempt = 0; !rc; attempt++) {
		int dfd;

		/* Walk and link under prune_lock (files.c): no delete of ours
		 * empties the directory in between. */
		pthread_rwlock_rdlock(&d->prune_lock);
		dfd = dir_open_parent(d, u->key);
		if (dfd == -ENOENT && attempt < DIR_RETRIES) {
			pthread_rwlock_unlock(&d->prune_lock);
			continue;
		}
		if (dfd < 0) {
			pthread_rwlock_unlock(&d->prune_lock);
			return dfd == -ENOENT ? -EIO : dfd;
		}
		rc = data_link(d, u, dfd, base, flags);
		pthread_rwlock_unlock(&d->prune_lock);
		if (rc == 1 && attempt < DIR_RETRIES) {
			close(dfd);
			rc = 0;
			continue;
		}
		if (rc == 1)
			rc = -EIO;
		if (!rc && fsync(dfd) < 0)
			rc = dir_fail(d, "fsync(dir)", u->key, errno);
		close(dfd);
		return rc;
	}
	return rc;
}

int dir_mpu_complete(void *be, void *upload, unsigned flags)
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
	if (!u->spilled && u->nappended > 0) {
		rc = publish_data(d, u, flags);
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

void dir_mpu_abort(void *be, void *upload)
{
	upload_free(be, upload);
}

/* Remove upload directories idle for more than DIR_MPU_STALE_NS: left by
 * a crashed process (invariant 6).  Failures are logged and skipped. */
void dir_sweep_uploads(const struct dir_store *d)
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
