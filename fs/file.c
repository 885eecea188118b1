/*
 * file.c - see file.h: the operations on open stream files.
 *
 * For: open, read, write (append), flush, release, fsync, fallocate
 * (trim), lseek and poll, and the page-cache rule of fs.h invariant 2.
 * Not for: names (fs/ns.c; create opens through fs_file_open_node()), or
 * reads in the follow view (fs/follow.c; open, read, poll and release of
 * a follow handle are handed to it).
 *
 * A stream another star leads (the engine's -STAR_ENOTOWNER) is appended
 * to and hot-read at its holder through fs/remote.h.
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
 * Durability (fs/handle.h enum fs_durable): under durable=write a write
 * is answered from its acknowledgement (write_done()).  Under
 * durable=fsync (the mount's -o durable=, or the stream's
 * user.nova.durable) it is answered at admission and counted in the
 * handle's pending appends; fsync() and flush() (every close()) are
 * parked on the handle (f->waiters) and answered by the ack that brings
 * pending to zero (async_done(), pending_done()), with the first failed
 * ack's errno since the last one reported.  Readers see only acked bytes either way: the
 * engine moves st_size at acknowledgement.
 *
 * Locking: f->lock guards pending, err and waiters.  It is taken inside
 * an ack callback (no engine lock held then, chain.h) and never held
 * while calling the engine or replying.
 *
 * Invariants:
 *  1. A handle holds one stream reference from open until its last
 *     reference goes (file_put()): the handle's own, dropped at release
 *     (or at the interrupted open reply that the kernel will never
 *     release), and one per pending durable=fsync append.
 *  2. A durable=write append is answered from its acknowledgement, never
 *     before: exactly one reply, from whichever thread acks.
 *  3. A parked fsync/flush is answered exactly once, when pending is 0,
 *     and never before every append the handle admitted before it has
 *     been acked or failed.
 *  4. Every handle is on its mount's files list from open to its free
 *     (fs->files_lock, taken after no other lock).  A handle the kernel
 *     never released (the daemon stopped with the file open: SIGTERM, a
 *     lost connection) loses its own reference at nova_fs_shutdown(),
 *     after the session loop and before the star closes
 *     (fs_file_release_all()), so nothing is left at exit.
 */
#include "config.h"
#include "fs/file.h"
#include "engine/lease.h"
#include "fs/follow.h"
#include "fs/remote.h"
#include "fs/session.h"
#include "src/base/log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* nv_stream.user_flags bits.  SF_CACHED: read through the page cache
 * since the last invalidation of its end page.  SF_AHEAD: a durable=fsync
 * write was answered before its ack, so the kernel's size may have run
 * ahead of the acked end, and a reader's short read below it may have
 * cached a page of zeros and shrunk the size (fs_file_acked()); sticky
 * while loaded. */
#define SF_CACHED 1u
#define SF_AHEAD 2u

/* ------------------------------------------------------------ handles */

/* A flush or fsync request waiting for the handle's pending appends. */
struct file_waiter {
	fuse_req_t req;
	struct file_waiter *next;
};

struct fs_file {
	int kind;                 /* FS_FILE_PLAIN: must stay first (fs/handle.h) */
	struct nv_stream *stream; /* a reference (invariant 1) */
	struct reader *reader;    /* NULL: write-only, or ENOMEM */
	bool direct;
	bool writable;
	atomic_int refs;          /* invariant 1 */
	pthread_mutex_t lock;
	unsigned pending;         /* lock: durable=fsync appends not yet acked */
	int err;                  /* lock: first failed ack not yet reported (-errno) */
	struct file_waiter *waiters; /* lock */
	struct nova_fs *fs;       /* the mount: its files list (invariant 4) */
	struct fs_file *prev, *next; /* fs->files_lock */
	bool released;            /* fs->files_lock: the handle's own reference dropped */
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
	atomic_init(&f->refs, 1);
	pthread_mutex_init(&f->lock, NULL);
	stream_get(n->stream);
	f->stream = n->stream;
	f->writable = acc == O_WRONLY || acc == O_RDWR;
	/* A stream another star leads grows without an ack here to
	 * invalidate a cached last page by (fs/remote.h invariant 3). */
	f->direct = f->writable || fs_remote_elsewhere(fs, n->stream);
	if (acc != O_WRONLY)
		f->reader = star_reader_new(fs->star, n->stream);
	fi->fh = (uint64_t)(uintptr_t)f;
	fi->direct_io = f->direct;
	fi->keep_cache = !f->direct; /* bytes below st_size never change */
	f->fs = fs;
	pthread_mutex_lock(&fs->files_lock);
	f->next = fs->files;
	if (fs->files)
		fs->files->prev = f;
	fs->files = f;
	pthread_mutex_unlock(&fs->files_lock);
	return 0;
}

static void file_put(struct fs_file *f)
{
	struct nova_fs *fs = f->fs;

	if (atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	assert(!f->pending && !f->waiters);
	pthread_mutex_lock(&fs->files_lock);
	if (f->prev)
		f->prev->next = f->next;
	else
		fs->files = f->next;
	if (f->next)
		f->next->prev = f->prev;
	pthread_mutex_unlock(&fs->files_lock);
	reader_free(f->reader);
	stream_put(f->stream);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/* The handle's own reference, once (release, or fs_file_release_all()). */
static void file_release(struct fs_file *f)
{
	bool was;

	pthread_mutex_lock(&f->fs->files_lock);
	was = f->released;
	f->released = true;
	pthread_mutex_unlock(&f->fs->files_lock);
	if (!was)
		file_put(f);
}

void fs_file_discard(struct fuse_file_info *fi)
{
	file_release((struct fs_file *)(uintptr_t)fi->fh);
}

void fs_file_release_all(struct nova_fs *fs)
{
	for (;;) {
		struct fs_file *f;

		pthread_mutex_lock(&fs->files_lock);
		for (f = fs->files; f && f->released; f = f->next)
			;
		pthread_mutex_unlock(&fs->files_lock);
		if (!f)
			return;
		file_release(f); /* pending acks keep theirs: freed at the last */
	}
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

/* flush (every close()) and fsync: answered once every append the handle
 * admitted is acked (invariant 3); a durable=write append is acked before
 * its write() returns, so then at once. */
static void file_sync(fuse_req_t req, struct fuse_file_info *fi)
{
	struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
	struct file_waiter *w;
	int err;

	if (fs_handle_kind(fi) != FS_FILE_PLAIN) {
		fuse_reply_err(req, 0);
		return;
	}
	w = malloc(sizeof(*w));
	pthread_mutex_lock(&f->lock);
	if (f->pending && w) {
		w->req = req;
		w->next = f->waiters;
		f->waiters = w;
		pthread_mutex_unlock(&f->lock);
		return; /* answered by async_done() */
	}
	if (f->pending) {
		pthread_mutex_unlock(&f->lock);
		fuse_reply_err(req, ENOMEM); /* could not wait: not durable yet */
		return;
	}
	err = f->err;
	f->err = 0;
	pthread_mutex_unlock(&f->lock);
	free(w);
	fuse_reply_err(req, nova_fs_errno(err));
}

void fs_file_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	file_sync(req, fi);
}

void fs_file_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	file_sync(req, fi);
}

/* ------------------------------------------------------------ reads and appends */

/* A read's gather list: iovecs (a cold page takes one per record) and
 * pinned chunks.  Past either, pages are copied into the buffer. */
#define FS_READ_IOV 256
#define FS_READ_PINS 32

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
	struct iovec iov[FS_READ_IOV];
	struct rc_blob *pins[FS_READ_PINS];
	struct read_sink sink = { .iov = iov, .maxiov = FS_READ_IOV, .pins = pins,
				  .maxpins = FS_READ_PINS };
	uint8_t *buf;
	size_t done, before;
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
	/* Cold pages go out from the cached chunks (no copy into buf). */
	rc = fs_handle_read(fs->star, f->stream, f->reader, (uint64_t)off, buf, size, &sink,
			    &done);
	before = done;
	if (rc == 0 && done < size) /* past this star's view: the holder's? */
		rc = fs_remote_more(fs, f->stream, (uint64_t)off + done, buf + done, size - done,
				    &done);
	else if (rc == -STAR_ENOTOWNER) { /* a hot page another star leads (fs/remote.h) */
		size_t more = 0;

		rc = fs_remote_read(fs, f->stream, (uint64_t)off + done, buf + done, size - done,
				    &more);
		done += more;
	}
	/* An error fails the whole request, even after some pages: a short
	 * reply means end-of-file to the kernel (it would shrink its i_size
	 * and cache zeros), so partial data here would be silently wrong. */
	if (rc) {
		nv_log(NV_WARN, NV_SUB_FS, "read of %s/%s at %lld failed: %s", f->stream->bucket,
		       f->stream->name, (long long)(off + done), strerror(-rc));
		fuse_reply_err(req, nova_fs_errno(rc));
	} else {
		fs_handle_sink_add(&sink, buf + before, done - before);
		fuse_reply_iov(req, sink.iov, sink.niov);
	}
	for (int i = 0; i < sink.npins; i++)
		rc_blob_unref(sink.pins[i]);
}

struct write_op {
	fuse_req_t req;     /* durable=write: answered at the ack */
	struct fs_file *f;  /* durable=fsync: a handle reference (invariant 1) */
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

/* One pending append of f is over (err: its failed ack, or 0): the last
 * one answers the parked fsync/flush requests (invariant 3) and drops
 * the append's handle reference. */
static void pending_done(struct fs_file *f, int err)
{
	struct file_waiter *ws = NULL;
	int report = 0;

	pthread_mutex_lock(&f->lock);
	if (err && !f->err)
		f->err = err;
	if (--f->pending == 0 && f->waiters) {
		ws = f->waiters;
		f->waiters = NULL;
		report = f->err;
		f->err = 0;
	}
	pthread_mutex_unlock(&f->lock);
	while (ws) {
		struct file_waiter *next = ws->next;

		fuse_reply_err(ws->req, nova_fs_errno(report));
		free(ws);
		ws = next;
	}
	file_put(f);
}

/* The ack of a durable=fsync append. */
static void async_done(void *arg, int err)
{
	struct write_op *w = arg;

	if (err)
		nv_log(NV_ERR, NV_SUB_FS, "%s/%s: a %zu-byte append written with durable=fsync "
		       "failed: %s; the next fsync or close reports it", w->f->stream->bucket,
		       w->f->stream->name, w->size, strerror(-err));
	pending_done(w->f, err);
	free(w);
}

/* The mode of the next append through f (fs/handle.h). */
static bool append_async(struct nova_fs *fs, struct fs_file *f)
{
	enum fs_durable d = fs_stream_durable(f->stream);

	return (d == FS_DURABLE_DEFAULT ? fs->durable : d) == FS_DURABLE_FSYNC;
}

/* Admit a durable=fsync append and answer it at once.  0 or the refusal. */
static int append_admit(struct nova_fs *fs, struct fs_file *f, fuse_req_t req,
			struct write_op *w, const char *buf)
{
	int rc;

	w->f = f;
	atomic_fetch_or(&f->stream->user_flags, SF_AHEAD);
	atomic_fetch_add(&f->refs, 1);
	pthread_mutex_lock(&f->lock);
	f->pending++;
	pthread_mutex_unlock(&f->lock);
	rc = star_append(fs->star, f->stream, buf, w->size, async_done, w, NULL);
	if (rc) {
		/* Refused: the write() reports it; a flush that parked on this
		 * append meanwhile is answered if it was the last. */
		pending_done(f, 0); /* drops the append's reference; the handle's stays */
		return rc;
	}
	fuse_reply_write(req, w->size);
	return 0;
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
	 * kernel serialises writes to one inode, so the admitted end is where
	 * this record will go (under durable=fsync it runs ahead of the acked
	 * end). */
	if (!(fi->flags & O_APPEND) && (uint64_t)off != stream_admitted_byte(f->stream)) {
		nv_log(NV_DEBUG, NV_SUB_FS, "%s/%s: write at %lld, end is %llu: refused",
		       f->stream->bucket, f->stream->name, (long long)off,
		       (unsigned long long)stream_admitted_byte(f->stream));
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
	w->f = NULL;
	w->size = size;
	if (append_async(fs, f))
		rc = append_admit(fs, f, req, w, buf);
	else
		rc = star_append(fs->star, f->stream, buf, size, write_done, w, NULL);
	if (rc == -STAR_ENOTOWNER) { /* another star leads it (fs/remote.h) */
		rc = fs_remote_append(fs, f->stream, buf, size);
		if (rc == 0) {
			free(w);
			fuse_reply_write(req, size);
			return;
		}
	}
	if (rc) {
		static struct nv_ratelimit rl_refused;

		free(w);
		if (rc != -ENOENT)
			nv_log_ratelimited(&rl_refused, NV_WARN, NV_SUB_FS, "append to %s/%s refused: %s",
					   f->stream->bucket, f->stream->name, strerror(-rc));
		fuse_reply_err(req, nova_fs_errno(rc));
	}
	/* else: replied at admission (append_admit()) or at the ack (write_done()). */
}

/* ------------------------------------------------------------ the page cache */

void fs_file_acked(struct nova_fs *fs, struct nv_stream *s, uint64_t old_byte,
		   uint64_t new_byte)
{
	uint64_t page = old_byte & ~(uint64_t)4095;

	if (fs->se && (atomic_load(&s->user_flags) & SF_AHEAD)) {
		/* The size the kernel holds is not ours: drop it, and any page
		 * a short read filled with zeros between the two ends. */
		fuse_lowlevel_notify_inval_inode(fs->se, FS_INO_BASE + s->id, -1, 0);
		if (atomic_fetch_and(&s->user_flags, ~SF_CACHED) & SF_CACHED)
			fuse_lowlevel_notify_inval_inode(fs->se, FS_INO_BASE + s->id, (off_t)page,
							 (off_t)(new_byte - page));
		return;
	}
	/* fs.h invariant 2: the page holding the old end may be cached with
	 * zeros past it.  Only when it was read through the cache, and only
	 * a partial page matters. */
	if (!fs->se || (old_byte & 4095) == 0)
		return;
	if (!(atomic_fetch_and(&s->user_flags, ~SF_CACHED) & SF_CACHED))
		return;
	fuse_lowlevel_notify_inval_inode(fs->se, FS_INO_BASE + s->id, (off_t)page, 4096);
}

void fs_file_trimmed(struct nova_fs *fs, struct nv_stream *s, uint64_t old_byte,
		     uint64_t new_byte)
{
	/* As after this star's own trim (fs_file_fallocate(), the setxattr
	 * of user.nova.trim): the trimmed range's cached pages go. */
	if (fs->se && new_byte > old_byte)
		fuse_lowlevel_notify_inval_inode(fs->se, FS_INO_BASE + s->id, 0, (off_t)new_byte);
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
	rc = fs_remote_trim(fs, n->stream, false, end, &old); /* at the leader (remote.h 7) */
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
