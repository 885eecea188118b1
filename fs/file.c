/*
 * file.c - see file.h: the operations on open stream files.
 *
 * For: open, read, write (append), flush, release, fsync, fallocate
 * (trim), lseek and poll, and the page-cache rule of fs.h invariant 2.
 * Not for: names (fs/ns.c; create opens through fs_file_open_node()), or
 * reads in the follow view (fs/follow.c; open, read, poll and release of
 * a follow handle are handed to it).
 *
 * Handles: an open stream gets a struct fs_file (its stream reference,
 * a read-ahead reader, whether the handle bypasses the page cache).
 *
 * Page cache policy (fs.h invariant 2): read-only handles use the page
 * cache with keep_cache (bytes never change); handles that can write use
 * direct I/O, so an append never lands in the page cache at an offset the
 * kernel guessed.  The kernel is told (FUSE_CAP_EXPLICIT_INVAL_DATA,
 * fs/fs.c) that only we invalidate; after an append we invalidate the
 * page holding the old end of a stream that was read through the cache
 * (fs_file_acked()).
 *
 * Invariants:
 *  1. A handle holds one stream reference from open to release (or to the
 *     interrupted open reply that the kernel will never release).
 *  2. A write is answered from its acknowledgement (write_done()), never
 *     before: exactly one reply, from whichever thread acks.
 */
#include "config.h"
#include "fs/file.h"
#include "fs/follow.h"
#include "fs/session.h"
#include "src/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* nv_stream.user_flags bit: read through the page cache since the last
 * invalidation of its end page. */
#define SF_CACHED 1u

/* ------------------------------------------------------------ handles */

struct fs_file {
	int kind;                 /* FS_FILE_PLAIN: must stay first (fs/handle.h) */
	struct nv_stream *stream; /* a reference (invariant 1) */
	struct reader *reader;    /* NULL: write-only, or ENOMEM */
	bool direct;
	bool writable;
};

int fs_file_open_node(struct nova_fs *fs, struct fs_node *n, struct fuse_file_info *fi)
{
	struct fs_file *f;
	int acc = fi->flags & O_ACCMODE;

	if (n->kind != FS_NODE_STREAM)
		return -EISDIR;
	if ((fi->flags & O_TRUNC) && stream_acked_byte(n->stream) > 0)
		return -EPERM;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->kind = FS_FILE_PLAIN;
	stream_get(n->stream);
	f->stream = n->stream;
	f->writable = acc == O_WRONLY || acc == O_RDWR;
	f->direct = f->writable;
	if (acc != O_WRONLY)
		f->reader = star_reader_new(fs->star, n->stream);
	fi->fh = (uint64_t)(uintptr_t)f;
	fi->direct_io = f->direct;
	fi->keep_cache = !f->direct; /* bytes below st_size never change */
	return 0;
}

void fs_file_discard(struct fuse_file_info *fi)
{
	struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;

	reader_free(f->reader);
	stream_put(f->stream);
	free(f);
}

void fs_file_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = fs_node_or_stale(req, ino);
	int rc;

	if (!n)
		return; /* replied ESTALE */
	if (n->kind == FS_NODE_FOLLOW_STREAM) {
		struct follow_file *ff;

		if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
			fuse_reply_err(req, EROFS);
			return;
		}
		ff = follow_open(fs->follow, n->stream);
		if (!ff) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		fi->fh = (uint64_t)(uintptr_t)ff;
		fi->direct_io = 1; /* every read comes here, to park at the end */
		if (fuse_reply_open(req, fi) == -ENOENT)
			follow_release(fs->follow, ff);
		return;
	}
	rc = fs_file_open_node(fs, n, fi);
	if (rc)
		fuse_reply_err(req, -rc);
	else if (fuse_reply_open(req, fi) == -ENOENT)
		fs_file_discard(fi); /* interrupted: the kernel will never release it */
}

/* ------------------------------------------------------------ closing */

void fs_file_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (fs_handle_kind(fi) == FS_FILE_FOLLOW) {
		follow_release(fs_of(req)->follow, (struct follow_file *)(uintptr_t)fi->fh);
		fuse_reply_err(req, 0);
		return;
	}
	fs_file_discard(fi);
	fuse_reply_err(req, 0);
}

/* Every acknowledged write is already durable: nothing to flush. */
void fs_file_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

void fs_file_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

/* ------------------------------------------------------------ reads and appends */

/* The per-thread read buffer (READ_PAGE_MAX bytes or max_read). */
static uint8_t *read_buffer(struct nova_fs *fs, size_t size)
{
	struct rdbuf {
		size_t cap;
		uint8_t data[];
	} *b = pthread_getspecific(fs->bufkey);

	if (b && b->cap >= size)
		return b->data;
	free(b);
	b = malloc(sizeof(*b) + size);
	if (!b) {
		pthread_setspecific(fs->bufkey, NULL);
		return NULL;
	}
	b->cap = size;
	pthread_setspecific(fs->bufkey, b);
	return b->data;
}

void fs_file_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
	uint8_t *buf;
	size_t done;
	int rc;

	if (fs_handle_kind(fi) == FS_FILE_FOLLOW) {
		follow_read(fs->follow, req, (struct follow_file *)(uintptr_t)fi->fh, size, off);
		return;
	}
	buf = read_buffer(fs, size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!f->direct)
		atomic_fetch_or(&f->stream->user_flags, SF_CACHED);
	/* Fill the whole request across tiers (fs.h): a short read is the
	 * end of the stream. */
	rc = fs_handle_read(fs->star, f->stream, f->reader, (uint64_t)off, buf, size, &done);
	/* An error fails the whole request, even after some pages: a short
	 * reply means end-of-file to the kernel (it would shrink its i_size
	 * and cache zeros), so partial data here would be silently wrong. */
	if (rc) {
		nv_log(NV_WARN, NV_SUB_FS, "read of %s/%s at %lld failed: %s", f->stream->bucket,
		       f->stream->name, (long long)(off + done), strerror(-rc));
		fuse_reply_err(req, nova_fs_errno(rc));
		return;
	}
	fuse_reply_buf(req, (const char *)buf, done);
}

struct write_op {
	fuse_req_t req;
	size_t size;
};

static void write_done(void *arg, int err)
{
	struct write_op *w = arg;

	if (err)
		fuse_reply_err(w->req, nova_fs_errno(err));
	else
		fuse_reply_write(w->req, w->size);
	free(w);
}

void fs_file_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
	struct write_op *w;
	int rc;

	if (fs_handle_kind(fi) != FS_FILE_PLAIN || !f->writable) {
		fuse_reply_err(req, EBADF);
		return;
	}
	/* Appends only (DESIGN.md 5): O_APPEND goes to the end wherever the
	 * kernel thinks it is; otherwise the offset must be the end.  The
	 * kernel serialises writes to one inode, so the acked end is the
	 * admitted end here. */
	if (!(fi->flags & O_APPEND) && (uint64_t)off != stream_acked_byte(f->stream)) {
		nv_log(NV_DEBUG, NV_SUB_FS, "%s/%s: write at %lld, end is %llu: refused",
		       f->stream->bucket, f->stream->name, (long long)off,
		       (unsigned long long)stream_acked_byte(f->stream));
		fuse_reply_err(req, EPERM);
		return;
	}
	if (size == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	w = malloc(sizeof(*w));
	if (!w) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	w->req = req;
	w->size = size;
	rc = star_append(fs->star, f->stream, buf, size, write_done, w, NULL);
	if (rc) {
		free(w);
		if (rc != -ENOENT)
			nv_log(NV_WARN, NV_SUB_FS, "append to %s/%s refused: %s", f->stream->bucket,
			       f->stream->name, strerror(-rc));
		fuse_reply_err(req, nova_fs_errno(rc));
	}
	/* else: replied from write_done() at acknowledgement. */
}

/* ------------------------------------------------------------ the page cache */

void fs_file_acked(struct nova_fs *fs, struct nv_stream *s, uint64_t old_byte)
{
	uint64_t page = old_byte & ~(uint64_t)4095;

	/* fs.h invariant 2: the page holding the old end may be cached with
	 * zeros past it.  Only when it was read through the cache, and only
	 * a partial page matters. */
	if (!fs->se || (old_byte & 4095) == 0)
		return;
	if (!(atomic_fetch_and(&s->user_flags, ~SF_CACHED) & SF_CACHED))
		return;
	fuse_lowlevel_notify_inval_inode(fs->se, FS_INO_BASE + s->id, (off_t)page, 4096);
}

/* ------------------------------------------------------------ holes, poll */

/* Trim is a hole punch at the head (DESIGN.md 5): FALLOC_FL_PUNCH_HOLE |
 * FALLOC_FL_KEEP_SIZE over a range that starts inside the existing head
 * hole.  Anything else fallocate can ask is refused: the size never
 * changes except by appending. */
void fs_file_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
		       struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = fs_node_find(&fs->nodes, ino);
	uint64_t old = 0, end;
	int rc;

	if (!n || n->kind != FS_NODE_STREAM) {
		fuse_reply_err(req, !n ? ESTALE : fs_node_is_follow(n) ? EROFS : EISDIR);
		return;
	}
	if (mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) || off < 0 || len <= 0) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if ((uint64_t)off > atomic_load(&n->stream->trim_byte)) {
		nv_log(NV_DEBUG, NV_SUB_FS, "%s/%s: hole at %lld is not at the head: refused",
		       n->stream->bucket, n->stream->name, (long long)off);
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	end = (uint64_t)off + (uint64_t)len;
	rc = star_stream_trim_bytes(fs->star, n->stream, end, &old);
	if (!rc && fs->se && end > old)
		/* Cached pages of the trimmed range now read as zeros. */
		fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, (off_t)end);
	fuse_reply_err(req, nova_fs_errno(rc));
}

/* SEEK_DATA / SEEK_HOLE: the only hole is the trimmed head. */
void fs_file_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		   struct fuse_file_info *fi)
{
	struct fs_node *n = fs_node_find(&fs_of(req)->nodes, ino);
	struct nv_stream *s;
	uint64_t size, trim;

	if (!n || !n->stream) {
		fuse_reply_err(req, n ? EINVAL : ESTALE);
		return;
	}
	s = n->stream;
	size = stream_acked_byte(s);
	trim = atomic_load(&s->trim_byte);

	if (off < 0 || (uint64_t)off >= size) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	if (whence == SEEK_DATA) {
		uint64_t at = (uint64_t)off < trim ? trim : (uint64_t)off;

		if (at >= size)
			fuse_reply_err(req, ENXIO);
		else
			fuse_reply_lseek(req, (off_t)at);
	} else if (whence == SEEK_HOLE) {
		fuse_reply_lseek(req, (uint64_t)off < trim ? off : (off_t)size);
	} else {
		fuse_reply_err(req, EINVAL);
	}
}

void fs_file_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		  struct fuse_pollhandle *ph)
{
	if (fs_handle_kind(fi) == FS_FILE_FOLLOW) {
		follow_poll(fs_of(req)->follow, req, (struct follow_file *)(uintptr_t)fi->fh, ph);
		return;
	}
	/* A plain stream never blocks: reads end at its end, writes are
	 * answered when durable. */
	if (ph)
		fuse_pollhandle_destroy(ph);
	fuse_reply_poll(req, POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM);
}
