/*
 * fs.c - see fs.h.
 *
 * Nodes: the kernel refers to buckets and streams by inode number; a
 * node table maps a number to what it names and counts the kernel's
 * lookups (nlookup), dropping the node on forget.  fs->lock guards the
 * table; a node found under it is only used while the kernel holds it
 * (a request in flight on an inode pins it).
 *
 * Handles: an open stream gets a struct fs_file (its stream reference,
 * a read-ahead reader, whether the handle bypasses the page cache);
 * an open directory gets a struct fs_dir (a page of names and a cursor
 * name, so listing a huge bucket needs bounded memory).
 *
 * Page cache policy (fs.h invariant 2): read-only handles use the page
 * cache with keep_cache (bytes never change); handles that can write use
 * direct I/O, so an append never lands in the page cache at an offset the
 * kernel guessed.  The kernel is told (FUSE_CAP_EXPLICIT_INVAL_DATA) that
 * only we invalidate; after an append we invalidate the page holding the
 * old end of a stream that was read through the cache.
 */
#include "config.h"
#include "fs/fs.h"
#include "fs/follow.h"
#include "fs/xattr.h"
#include "src/base/names.h"
#include "src/base/log.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* nv_stream.user_flags bit: read through the page cache since the last
 * invalidation of its end page. */
#define SF_CACHED 1u

#define DIR_PAGE 256

struct fs_node {
	uint64_t ino;
	enum fs_node_kind kind;
	char bucket[NV_BUCKET_NAME_MAX + 1];
	struct nv_stream *stream; /* FS_NODE_STREAM: a reference */
	uint64_t nlookup;         /* fs->lock */
	struct fs_node *hnext;    /* fs->lock */
};

struct fs_file {
	int kind;                 /* FS_FILE_PLAIN: must stay first (fs.h) */
	struct fs_node *node;
	struct nv_stream *stream; /* a reference */
	struct reader *reader;
	bool direct;
	bool writable;
};

struct fs_dirent {
	char name[NV_STREAM_NAME_MAX + 1];
	uint64_t ino;
	mode_t mode;
};

struct fs_dir {
	struct fs_node *node;
	pthread_mutex_t lock;
	struct fs_dirent *page;   /* DIR_PAGE entries */
	uint32_t npage;
	off_t page_off;           /* readdir offset of page[0] */
	char cursor[NV_STREAM_NAME_MAX + 1]; /* list after this name */
	bool eof;
};

struct nova_fs {
	struct fs_cfg cfg;
	char *data_dir;
	struct star *star;
	struct fuse_session *se;
	pthread_mutex_t lock;
	struct fs_node *buckets[1024]; /* lock: the node table */
	struct fs_node root;
	struct fs_node follow_root;   /* MOUNT/.follow */
	struct follow *follow;        /* the follow view's worker */
	pthread_key_t bufkey;         /* per-thread read buffer */
	struct timespec started;      /* the root's times */
};

int nova_fs_errno(int rc)
{
	if (rc >= 0)
		return 0;
	switch (rc) {
	case -ESHUTDOWN:
	case -EBADMSG:
	case -ECANCELED:
		return EIO;
	case -EBUSY:
		return EAGAIN;
	default:
		return -rc;
	}
}

/* ------------------------------------------------------------ nodes */

static struct nova_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static size_t node_hash(uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ULL) >> 54) & 1023;
}

static struct fs_node *node_find(struct nova_fs *fs, fuse_ino_t ino)
{
	struct fs_node *n;

	if (ino == FUSE_ROOT_ID)
		return &fs->root;
	if (ino == FS_INO_FOLLOW)
		return &fs->follow_root;
	pthread_mutex_lock(&fs->lock);
	for (n = fs->buckets[node_hash(ino)]; n; n = n->hnext)
		if (n->ino == ino)
			break;
	pthread_mutex_unlock(&fs->lock);
	return n;
}

/* Record one more kernel lookup of a bucket or stream node.  For a
 * stream, takes over the caller's reference s (dropped if the node
 * already had one). */
static struct fs_node *node_remember(struct nova_fs *fs, uint64_t ino, enum fs_node_kind kind,
				     const char *bucket, struct nv_stream *s)
{
	struct fs_node *n;
	size_t h = node_hash(ino);

	pthread_mutex_lock(&fs->lock);
	for (n = fs->buckets[h]; n; n = n->hnext)
		if (n->ino == ino)
			break;
	if (!n) {
		n = calloc(1, sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&fs->lock);
			stream_put(s);
			return NULL;
		}
		n->ino = ino;
		n->kind = kind;
		snprintf(n->bucket, sizeof(n->bucket), "%s", bucket);
		n->stream = s;
		s = NULL;
		n->hnext = fs->buckets[h];
		fs->buckets[h] = n;
	}
	n->nlookup++;
	pthread_mutex_unlock(&fs->lock);
	stream_put(s);
	return n;
}

static void node_forget(struct nova_fs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs_node **pp, *n = NULL;

	if (ino == FUSE_ROOT_ID || ino == FS_INO_FOLLOW)
		return;
	pthread_mutex_lock(&fs->lock);
	for (pp = &fs->buckets[node_hash(ino)]; *pp; pp = &(*pp)->hnext) {
		if ((*pp)->ino != ino)
			continue;
		n = *pp;
		if (n->nlookup > nlookup) {
			n->nlookup -= nlookup;
			n = NULL;
		} else {
			*pp = n->hnext;
		}
		break;
	}
	pthread_mutex_unlock(&fs->lock);
	if (n) {
		stream_put(n->stream);
		free(n);
	}
}

/* ------------------------------------------------------------ attributes */

static void stat_root(struct nova_fs *fs, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = FUSE_ROOT_ID;
	st->st_mode = S_IFDIR | 0755;
	st->st_nlink = 2;
	st->st_uid = fs->cfg.uid;
	st->st_gid = fs->cfg.gid;
	st->st_mtim = fs->started;
	st->st_ctim = fs->started;
	st->st_atim = fs->started;
}

static void stat_bucket(struct nova_fs *fs, uint64_t ino, const struct meta_bucket *b,
			struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = S_IFDIR | 0755;
	st->st_nlink = 2;
	st->st_uid = fs->cfg.uid;
	st->st_gid = fs->cfg.gid;
	st->st_mtim.tv_sec = (time_t)(b->created_ns / 1000000000ull);
	st->st_ctim = st->st_mtim;
	st->st_atim = st->st_mtim;
}

static void stat_stream(struct nova_fs *fs, struct nv_stream *s, struct stat *st)
{
	uint64_t size = stream_acked_byte(s);
	uint64_t live = size - atomic_load(&s->trim_byte);
	uint64_t mt = atomic_load(&s->mtime_ns);

	memset(st, 0, sizeof(*st));
	st->st_ino = FS_INO_BASE + s->id;
	st->st_mode = S_IFREG | 0644;
	st->st_nlink = 1;
	st->st_uid = fs->cfg.uid;
	st->st_gid = fs->cfg.gid;
	st->st_size = (off_t)size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((live + 511) / 512);
	st->st_mtim.tv_sec = (time_t)(mt / 1000000000ull);
	st->st_mtim.tv_nsec = (long)(mt % 1000000000ull);
	st->st_ctim = st->st_mtim;
	st->st_atim = st->st_mtim;
}

static int node_stat(struct nova_fs *fs, struct fs_node *n, struct stat *st)
{
	struct meta_bucket b;
	int rc;

	switch (n->kind) {
	case FS_NODE_ROOT:
		stat_root(fs, st);
		return 0;
	case FS_NODE_BUCKET:
		rc = star_bucket_get(fs->star, n->bucket, &b);
		if (rc)
			return rc;
		stat_bucket(fs, n->ino, &b, st);
		return 0;
	case FS_NODE_STREAM:
		stat_stream(fs, n->stream, st);
		return 0;
	case FS_NODE_FOLLOW_ROOT:
		stat_root(fs, st);
		st->st_ino = FS_INO_FOLLOW;
		st->st_mode = S_IFDIR | 0555;
		return 0;
	case FS_NODE_FOLLOW_BUCKET:
		rc = star_bucket_get(fs->star, n->bucket, &b);
		if (rc)
			return rc;
		stat_bucket(fs, n->ino, &b, st);
		st->st_mode = S_IFDIR | 0555;
		return 0;
	case FS_NODE_FOLLOW_STREAM:
		/* st_size is the acked size, so tail can seek (follow.h). */
		stat_stream(fs, n->stream, st);
		st->st_ino = n->ino;
		st->st_mode = S_IFREG | 0444;
		return 0;
	}
	return -EIO;
}

static bool is_follow(const struct fs_node *n)
{
	return n->kind >= FS_NODE_FOLLOW_ROOT;
}

/* Follow-view files change size without writes through them: the kernel
 * must not cache their attributes. */
static double attr_timeout_of(const struct nova_fs *fs, const struct fs_node *n)
{
	return n->kind == FS_NODE_FOLLOW_STREAM ? 0.0 : fs->cfg.attr_timeout;
}

static void reply_entry(fuse_req_t req, struct nova_fs *fs, const struct stat *st)
{
	struct fuse_entry_param e;

	memset(&e, 0, sizeof(e));
	e.ino = st->st_ino;
	e.generation = 1;
	e.attr = *st;
	e.attr_timeout = (st->st_ino & FS_INO_FOLLOW_BIT) && S_ISREG(st->st_mode)
				 ? 0.0 : fs->cfg.attr_timeout;
	e.entry_timeout = fs->cfg.entry_timeout;
	fuse_reply_entry(req, &e);
}

/* ------------------------------------------------------------ lifecycle */

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct nova_fs *fs = userdata;

	if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA) {
		conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
		conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	} else {
		nv_log(NV_WARN, NV_SUB_FS,
		       "kernel lacks explicit page-cache invalidation: every size change "
		       "drops the whole cached file");
	}
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->max_write = fs->cfg.max_write;
	conn->max_read = 1u << 20; /* must equal -o max_read (src/novafs.c) */
	/* The kernel keeps min(its bdi's read_ahead_kb, this): src/novafs.c
	 * raised the former in sysfs before this reply, so asking for more
	 * than the kernel proposed is what makes the raise stick. */
	if (fs->cfg.max_readahead)
		conn->max_readahead = fs->cfg.max_readahead;
	nv_log(NV_INFO, NV_SUB_FS, "FUSE protocol %u.%u, max_write %u, max_readahead %u",
	       conn->proto_major, conn->proto_minor, conn->max_write, conn->max_readahead);
}

/* ------------------------------------------------------------ lookups */

struct gate_ctx {
	struct nova_fs *fs;
	struct gate_waiter w;
};

static void gate_interrupted(fuse_req_t req, void *data)
{
	struct gate_ctx *g = data;

	star_gate_cancel(g->fs->star, &g->w);
}

/* Park a request until the star serves streams (engine/star.h, the gate):
 * after a crash, until every earlier epoch is settled.  A FUSE interrupt
 * (Ctrl-C) ends the wait with EINTR; the settling goes on. */
static int gate(fuse_req_t req, struct nova_fs *fs)
{
	struct gate_ctx g = { .fs = fs };
	int rc;

	if (star_gate_is_open(fs->star))
		return 0;
	fuse_req_interrupt_func(req, gate_interrupted, &g);
	rc = star_gate_wait(fs->star, &g.w);
	fuse_req_interrupt_func(req, NULL, NULL);
	return rc;
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *p = node_find(fs, parent);
	struct stat st;
	int rc;

	if (!p) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (p->kind == FS_NODE_ROOT && !strcmp(name, ".follow")) {
		node_stat(fs, &fs->follow_root, &st);
		reply_entry(req, fs, &st);
	} else if (p->kind == FS_NODE_ROOT || p->kind == FS_NODE_FOLLOW_ROOT) {
		bool follow = p->kind == FS_NODE_FOLLOW_ROOT;
		uint64_t ino;
		struct meta_bucket b;

		rc = star_bucket_get(fs->star, name, &b);
		if (rc) {
			fuse_reply_err(req, nova_fs_errno(rc));
			return;
		}
		ino = (FS_INO_BASE + b.id) | (follow ? FS_INO_FOLLOW_BIT : 0);
		if (!node_remember(fs, ino, follow ? FS_NODE_FOLLOW_BUCKET : FS_NODE_BUCKET, name,
				   NULL)) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		stat_bucket(fs, ino, &b, &st);
		if (follow)
			st.st_mode = S_IFDIR | 0555;
		reply_entry(req, fs, &st);
	} else if (p->kind == FS_NODE_FOLLOW_BUCKET) {
		struct nv_stream *s;
		uint64_t ino;

		rc = gate(req, fs);
		if (!rc)
			rc = star_stream_lookup(fs->star, p->bucket, name, &s);
		if (rc) {
			fuse_reply_err(req, nova_fs_errno(rc));
			return;
		}
		ino = (FS_INO_BASE + s->id) | FS_INO_FOLLOW_BIT;
		stat_stream(fs, s, &st);
		st.st_ino = ino;
		st.st_mode = S_IFREG | 0444;
		if (!node_remember(fs, ino, FS_NODE_FOLLOW_STREAM, p->bucket, s)) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		reply_entry(req, fs, &st);
	} else if (p->kind == FS_NODE_ROOT) {
		struct meta_bucket b;

		rc = star_bucket_get(fs->star, name, &b);
		if (rc) {
			fuse_reply_err(req, nova_fs_errno(rc));
			return;
		}
		if (!node_remember(fs, FS_INO_BASE + b.id, FS_NODE_BUCKET, name, NULL)) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		stat_bucket(fs, FS_INO_BASE + b.id, &b, &st);
		reply_entry(req, fs, &st);
	} else if (p->kind == FS_NODE_BUCKET) {
		struct nv_stream *s;

		rc = gate(req, fs);
		if (!rc)
			rc = star_stream_lookup(fs->star, p->bucket, name, &s);
		if (rc) {
			fuse_reply_err(req, nova_fs_errno(rc));
			return;
		}
		stat_stream(fs, s, &st);
		if (!node_remember(fs, FS_INO_BASE + s->id, FS_NODE_STREAM, p->bucket, s)) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		reply_entry(req, fs, &st);
	} else {
		fuse_reply_err(req, ENOTDIR);
	}
}

static void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	node_forget(fs_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void fs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		node_forget(fs_of(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = node_find(fs, ino);
	struct stat st;
	int rc;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	rc = node_stat(fs, n, &st);
	if (rc)
		fuse_reply_err(req, nova_fs_errno(rc));
	else
		fuse_reply_attr(req, &st, attr_timeout_of(fs, n));
}

/* Only a no-op is allowed: a size equal to the current one (O_TRUNC of
 * an empty stream) and time stamps (touch), which are ignored. */
static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = node_find(fs, ino);
	struct stat st;
	int rc;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	rc = node_stat(fs, n, &st);
	if (rc) {
		fuse_reply_err(req, nova_fs_errno(rc));
		return;
	}
	if (is_follow(n) && (to_set & ~(FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW))) {
		fuse_reply_err(req, EROFS); /* the follow view is read-only */
		return;
	}
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		bool same = (!(to_set & FUSE_SET_ATTR_MODE) ||
			     (attr->st_mode & 07777) == (st.st_mode & 07777)) &&
			    (!(to_set & FUSE_SET_ATTR_UID) || attr->st_uid == st.st_uid) &&
			    (!(to_set & FUSE_SET_ATTR_GID) || attr->st_gid == st.st_gid);

		if (!same) {
			fuse_reply_err(req, EPERM);
			return;
		}
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size != st.st_size) {
		nv_log(NV_DEBUG, NV_SUB_FS, "refusing to truncate inode %llu to %lld",
		       (unsigned long long)ino, (long long)attr->st_size);
		fuse_reply_err(req, EPERM);
		return;
	}
	fuse_reply_attr(req, &st, fs->cfg.attr_timeout);
}

/* ------------------------------------------------------------ namespace */

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct nova_fs *fs = fs_of(req);
	struct meta_bucket b;
	struct stat st;
	int rc;

	if (parent == FS_INO_FOLLOW || (parent & FS_INO_FOLLOW_BIT)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, EPERM); /* no directories inside a bucket */
		return;
	}
	if (!strcmp(name, ".follow")) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	rc = star_bucket_create(fs->star, name, &b);
	if (rc) {
		fuse_reply_err(req, nova_fs_errno(rc));
		return;
	}
	if (!node_remember(fs, FS_INO_BASE + b.id, FS_NODE_BUCKET, name, NULL)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	stat_bucket(fs, FS_INO_BASE + b.id, &b, &st);
	reply_entry(req, fs, &st);
}

static void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct nova_fs *fs = fs_of(req);
	int rc;

	if (parent == FS_INO_FOLLOW || (parent & FS_INO_FOLLOW_BIT) ||
	    (parent == FUSE_ROOT_ID && !strcmp(name, ".follow"))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	rc = star_bucket_delete(fs->star, name);
	fuse_reply_err(req, nova_fs_errno(rc));
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *p = node_find(fs, parent);
	struct nv_stream *s;
	int rc;

	if (!p || p->kind != FS_NODE_BUCKET) {
		fuse_reply_err(req, !p ? ESTALE : is_follow(p) ? EROFS : EPERM);
		return;
	}
	rc = star_stream_lookup(fs->star, p->bucket, name, &s);
	if (!rc) {
		rc = star_stream_delete(fs->star, s);
		stream_put(s);
	}
	fuse_reply_err(req, nova_fs_errno(rc));
	if (!rc && fs->se) {
		/* The follow view's name for it goes too, not after the
		 * kernel's entry timeout (after the reply: no lock held). */
		struct meta_bucket b;

		if (star_bucket_get(fs->star, p->bucket, &b) == 0)
			fuse_lowlevel_notify_inval_entry(fs->se,
							 (FS_INO_BASE + b.id) | FS_INO_FOLLOW_BIT,
							 name, strlen(name));
	}
}

static void fs_refuse(fuse_req_t req, const char *what)
{
	nv_log(NV_DEBUG, NV_SUB_FS, "refused: %s", what);
	fuse_reply_err(req, EPERM);
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	fs_refuse(req, "rename");
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fs_refuse(req, "link");
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fs_refuse(req, "symlink");
}

/* ------------------------------------------------------------ files */

static int file_open(struct nova_fs *fs, struct fs_node *n, struct fuse_file_info *fi)
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
	f->node = n;
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

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = node_find(fs, ino);
	int rc;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
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
	rc = file_open(fs, n, fi);
	if (rc)
		fuse_reply_err(req, -rc);
	else if (fuse_reply_open(req, fi) == -ENOENT) {
		/* Interrupted: the kernel will never release it. */
		struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;

		reader_free(f->reader);
		stream_put(f->stream);
		free(f);
	}
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *p = node_find(fs, parent);
	struct fuse_entry_param e;
	struct nv_stream *s;
	struct fs_node *n;
	int rc;

	if (!p) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (p->kind != FS_NODE_BUCKET || !S_ISREG(mode)) {
		/* Streams live in buckets; the follow view is read-only. */
		fuse_reply_err(req, is_follow(p) ? EROFS : EPERM);
		return;
	}
	rc = star_stream_create(fs->star, p->bucket, name, &s);
	if (rc == -EEXIST && !(fi->flags & O_EXCL))
		rc = star_stream_lookup(fs->star, p->bucket, name, &s);
	if (rc) {
		fuse_reply_err(req, nova_fs_errno(rc));
		return;
	}
	memset(&e, 0, sizeof(e));
	stat_stream(fs, s, &e.attr);
	n = node_remember(fs, FS_INO_BASE + s->id, FS_NODE_STREAM, p->bucket, s);
	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = file_open(fs, n, fi);
	if (rc) {
		node_forget(fs, n->ino, 1);
		fuse_reply_err(req, -rc);
		return;
	}
	e.ino = e.attr.st_ino;
	e.generation = 1;
	e.attr_timeout = fs->cfg.attr_timeout;
	e.entry_timeout = fs->cfg.entry_timeout;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;

		reader_free(f->reader);
		stream_put(f->stream);
		free(f);
	}
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *p = node_find(fs, parent);
	struct nv_stream *s;
	struct stat st;
	int rc;

	if (!p || p->kind != FS_NODE_BUCKET || !S_ISREG(mode)) {
		fuse_reply_err(req, !p ? ESTALE : is_follow(p) ? EROFS : EPERM);
		return;
	}
	rc = star_stream_create(fs->star, p->bucket, name, &s);
	if (rc) {
		fuse_reply_err(req, nova_fs_errno(rc));
		return;
	}
	stat_stream(fs, s, &st);
	if (!node_remember(fs, FS_INO_BASE + s->id, FS_NODE_STREAM, p->bucket, s)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_entry(req, fs, &st);
}

static int file_kind(const struct fuse_file_info *fi)
{
	return *(const int *)(uintptr_t)fi->fh;
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;

	if (file_kind(fi) == FS_FILE_FOLLOW) {
		follow_release(fs_of(req)->follow, (struct follow_file *)(uintptr_t)fi->fh);
		fuse_reply_err(req, 0);
		return;
	}

	reader_free(f->reader);
	stream_put(f->stream);
	free(f);
	fuse_reply_err(req, 0);
}

/* Every acknowledged write is already durable: nothing to flush. */
static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

static void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

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

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
	uint8_t *buf;
	size_t done = 0;
	int rc = 0;

	if (file_kind(fi) == FS_FILE_FOLLOW) {
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
	while (done < size) {
		enum read_tier tier;
		size_t got;

		rc = star_read(fs->star, f->stream, f->reader, (uint64_t)off + done, buf + done,
			       size - done, &got, &tier);
		if (rc || got == 0)
			break;
		done += got;
	}
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

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_file *f = (struct fs_file *)(uintptr_t)fi->fh;
	struct write_op *w;
	int rc;

	if (file_kind(fi) != FS_FILE_PLAIN || !f->writable) {
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

void nova_fs_acked(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte)
{
	struct nova_fs *fs = arg;
	uint64_t page = old_byte & ~(uint64_t)4095;

	/* fs.h invariant 2: the page holding the old end may be cached with
	 * zeros past it.  Only when it was read through the cache, and only
	 * a partial page matters. */
	if (!fs->se || (old_byte & 4095) == 0)
		return;
	if (!(atomic_fetch_and(&s->user_flags, ~SF_CACHED) & SF_CACHED))
		return;
	(void)new_byte;
	fuse_lowlevel_notify_inval_inode(fs->se, FS_INO_BASE + s->id, (off_t)page, 4096);
}

/* ------------------------------------------------------------ directories */

static void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = node_find(fs, ino);
	struct fs_dir *d;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (n->kind == FS_NODE_STREAM || n->kind == FS_NODE_FOLLOW_STREAM) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (d)
		d->page = calloc(DIR_PAGE, sizeof(*d->page));
	if (!d || !d->page) {
		free(d);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	d->node = n;
	pthread_mutex_init(&d->lock, NULL);
	fi->fh = (uint64_t)(uintptr_t)d;
	fuse_reply_open(req, fi);
}

struct page_fill {
	struct fs_dir *d;
};

static uint64_t follow_bit(const struct fs_dir *d)
{
	return is_follow(d->node) ? FS_INO_FOLLOW_BIT : 0;
}

static int fill_bucket(void *arg, const struct meta_bucket *b)
{
	struct fs_dir *d = arg;
	struct fs_dirent *e = &d->page[d->npage++];

	snprintf(e->name, sizeof(e->name), "%s", b->name);
	e->ino = (FS_INO_BASE + b->id) | follow_bit(d);
	e->mode = S_IFDIR;
	return d->npage == DIR_PAGE ? 1 : 0;
}

static int fill_stream(void *arg, const struct meta_stream *s)
{
	struct fs_dir *d = arg;
	struct fs_dirent *e = &d->page[d->npage++];

	snprintf(e->name, sizeof(e->name), "%s", s->name);
	e->ino = (FS_INO_BASE + s->id) | follow_bit(d);
	e->mode = S_IFREG;
	return d->npage == DIR_PAGE ? 1 : 0;
}

/* Load the page of names after d->cursor; offsets 0 and 1 are "." and
 * "..", names start at 2. */
static int load_page(struct nova_fs *fs, struct fs_dir *d, off_t page_off)
{
	int rc;

	d->npage = 0;
	d->page_off = page_off;
	if (d->node->kind == FS_NODE_ROOT || d->node->kind == FS_NODE_FOLLOW_ROOT)
		rc = star_bucket_list(fs->star, d->cursor, fill_bucket, d);
	else
		rc = star_stream_list(fs->star, d->node->bucket, d->cursor, fill_stream, d);
	d->eof = d->npage < DIR_PAGE;
	return rc;
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_dir *d = (struct fs_dir *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	size_t used = 0;
	int rc = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (off == 0) { /* opendir or rewinddir: list afresh */
		d->page_off = 0;
		d->npage = 0;
	}
	while (used < size) {
		struct stat st = { 0 };
		const char *name;
		size_t need;

		if (off == 0 || off == 1) {
			name = off == 0 ? "." : "..";
			st.st_ino = off == 0 ? ino : FUSE_ROOT_ID;
			st.st_mode = S_IFDIR;
		} else if (off == 2 && d->node->kind == FS_NODE_ROOT) {
			name = ".follow";
			st.st_ino = FS_INO_FOLLOW;
			st.st_mode = S_IFDIR;
		} else {
			/* Position the page over off. */
			if (off < d->page_off || (d->npage == 0 && d->page_off != off) ||
			    (d->page_off == 0)) {
				d->cursor[0] = 0; /* rewind: list from the start */
				/* Names follow ".", ".." (and the root's .follow). */
				rc = load_page(fs, d, d->node->kind == FS_NODE_ROOT ? 3 : 2);
				if (rc)
					break;
			}
			while (off >= d->page_off + (off_t)d->npage && !d->eof) {
				snprintf(d->cursor, sizeof(d->cursor), "%s",
					 d->page[d->npage - 1].name);
				rc = load_page(fs, d, d->page_off + (off_t)d->npage);
				if (rc)
					break;
			}
			if (rc || off >= d->page_off + (off_t)d->npage)
				break; /* end of the directory */
			name = d->page[off - d->page_off].name;
			st.st_ino = d->page[off - d->page_off].ino;
			st.st_mode = d->page[off - d->page_off].mode;
		}
		need = fuse_add_direntry(req, buf + used, size - used, name, &st, off + 1);
		if (need > size - used)
			break;
		used += need;
		off++;
	}
	pthread_mutex_unlock(&d->lock);
	if (rc && used == 0)
		fuse_reply_err(req, nova_fs_errno(rc));
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void fs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_dir *d = (struct fs_dir *)(uintptr_t)fi->fh;

	pthread_mutex_destroy(&d->lock);
	free(d->page);
	free(d);
	fuse_reply_err(req, 0);
}

/* ------------------------------------------------------------ xattrs */

static int xattr_target(struct fs_node *n, struct fs_xattr_target *t)
{
	/* The follow view shows its stream's attributes (read-only). */
	t->kind = n->kind == FS_NODE_FOLLOW_STREAM ? FS_NODE_STREAM
		  : n->kind == FS_NODE_FOLLOW_BUCKET ? FS_NODE_BUCKET
		  : n->kind == FS_NODE_FOLLOW_ROOT ? FS_NODE_ROOT : n->kind;
	t->bucket = n->bucket;
	t->stream = n->stream;
	return 0;
}

static void reply_value(fuse_req_t req, size_t size, const struct nv_buf *v)
{
	if (size == 0)
		fuse_reply_xattr(req, v->len);
	else if (size < v->len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, (const char *)v->ptr, v->len);
}

static void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = node_find(fs, ino);
	struct fs_xattr_target t;
	struct nv_buf v;
	int rc;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	xattr_target(n, &t);
	nv_buf_init(&v, 1u << 24);
	rc = fs_xattr_get(fs->star, &t, name, &v);
	if (rc)
		fuse_reply_err(req, nova_fs_errno(rc));
	else
		reply_value(req, size, &v);
	nv_buf_free(&v);
}

static void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = node_find(fs, ino);
	struct fs_xattr_target t;
	struct nv_buf v;
	int rc;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	xattr_target(n, &t);
	nv_buf_init(&v, 65536);
	rc = fs_xattr_list(&t, &v);
	if (rc)
		fuse_reply_err(req, nova_fs_errno(rc));
	else
		reply_value(req, size, &v);
	nv_buf_free(&v);
}

static void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = node_find(fs, ino);
	struct fs_xattr_target t;
	int rc;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (is_follow(n)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	xattr_target(n, &t);
	rc = fs_xattr_set(fs->star, &t, name, value, size);
	if (!rc && fs->se && n->kind == FS_NODE_STREAM && !strcmp(name, "user.nova.trim"))
		fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0); /* the hole reads as zeros */
	if (rc && rc != -ENOTSUP)
		nv_log(NV_INFO, NV_SUB_FS, "setxattr %s on inode %llu refused: %s", name,
		       (unsigned long long)ino, strerror(-rc));
	fuse_reply_err(req, nova_fs_errno(rc));
}

/* Trim is a hole punch at the head (DESIGN.md 5): FALLOC_FL_PUNCH_HOLE |
 * FALLOC_FL_KEEP_SIZE over a range that starts inside the existing head
 * hole.  Anything else fallocate can ask is refused: the size never
 * changes except by appending. */
static void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = node_find(fs, ino);
	uint64_t old = 0, end;
	int rc;

	if (!n || n->kind != FS_NODE_STREAM) {
		fuse_reply_err(req, !n ? ESTALE : is_follow(n) ? EROFS : EISDIR);
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
static void fs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct fs_node *n = node_find(fs_of(req), ino);
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

static void fs_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct fuse_pollhandle *ph)
{
	if (file_kind(fi) == FS_FILE_FOLLOW) {
		follow_poll(fs_of(req)->follow, req, (struct follow_file *)(uintptr_t)fi->fh, ph);
		return;
	}
	/* A plain stream never blocks: reads end at its end, writes are
	 * answered when durable. */
	if (ph)
		fuse_pollhandle_destroy(ph);
	fuse_reply_poll(req, POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM);
}

static void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, strncmp(name, "user.nova.", 10) ? ENODATA : EPERM);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct nova_fs *fs = fs_of(req);
	struct statvfs sv;

	if (!fs->data_dir || statvfs(fs->data_dir, &sv)) {
		memset(&sv, 0, sizeof(sv));
		sv.f_bsize = 4096;
	}
	sv.f_namemax = NV_STREAM_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.forget = fs_forget,
	.forget_multi = fs_forget_multi,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.mknod = fs_mknod,
	.mkdir = fs_mkdir,
	.unlink = fs_unlink,
	.rmdir = fs_rmdir,
	.symlink = fs_symlink,
	.rename = fs_rename,
	.link = fs_link,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.flush = fs_flush,
	.release = fs_release,
	.fsync = fs_fsync,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.releasedir = fs_releasedir,
	.statfs = fs_statfs,
	.setxattr = fs_setxattr,
	.getxattr = fs_getxattr,
	.listxattr = fs_listxattr,
	.removexattr = fs_removexattr,
	.create = fs_create,
	.fallocate = fs_fallocate,
	.lseek = fs_lseek,
	.poll = fs_poll,
};

const struct fuse_lowlevel_ops *nova_fs_ops(void)
{
	return &ops;
}

/* ------------------------------------------------------------ setup */

int nova_fs_new(const struct fs_cfg *cfg, struct nova_fs **out)
{
	struct nova_fs *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return -ENOMEM;
	fs->cfg = *cfg;
	if (cfg->data_dir)
		fs->data_dir = strdup(cfg->data_dir);
	pthread_mutex_init(&fs->lock, NULL);
	pthread_key_create(&fs->bufkey, free);
	clock_gettime(CLOCK_REALTIME, &fs->started);
	fs->root.ino = FUSE_ROOT_ID;
	fs->root.kind = FS_NODE_ROOT;
	fs->follow_root.ino = FS_INO_FOLLOW;
	fs->follow_root.kind = FS_NODE_FOLLOW_ROOT;
	*out = fs;
	return 0;
}

void nova_fs_set_star(struct nova_fs *fs, struct star *st)
{
	fs->star = st;
	if (follow_new(st, &fs->follow))
		nv_log(NV_ERR, NV_SUB_FS, "the follow view could not start: its reads fail");
}

void nova_fs_set_session(struct nova_fs *fs, struct fuse_session *se)
{
	fs->se = se;
}

static void nova_fs_forget_all(struct nova_fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	for (size_t i = 0; i < sizeof(fs->buckets) / sizeof(fs->buckets[0]); i++) {
		while (fs->buckets[i]) {
			struct fs_node *n = fs->buckets[i];

			fs->buckets[i] = n->hnext;
			stream_put(n->stream);
			free(n);
		}
	}
	pthread_mutex_unlock(&fs->lock);
}

uint64_t nova_fs_quiesce(struct nova_fs *fs)
{
	follow_quiesce(fs->follow);
	return NV_STAT_GET(star_stats(fs->star), parked_readers);
}

void nova_fs_shutdown(struct nova_fs *fs)
{
	follow_shutdown(fs->follow);
	nova_fs_forget_all(fs);
}

void nova_fs_free(struct nova_fs *fs)
{
	if (!fs)
		return;
	nova_fs_forget_all(fs);
	follow_free(fs->follow);
	free(pthread_getspecific(fs->bufkey));
	pthread_setspecific(fs->bufkey, NULL);
	pthread_key_delete(fs->bufkey);
	pthread_mutex_destroy(&fs->lock);
	free(fs->data_dir);
	free(fs);
}
