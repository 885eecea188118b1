/*
 * ns.c - see ns.h: the namespace operations.
 *
 * For: names and attributes: lookup/forget, getattr/setattr, creating and
 * removing buckets (mkdir/rmdir) and streams (create/mknod/unlink),
 * renaming a stream within its bucket, the refusals (other renames,
 * link, symlink), listing directories, the xattr plumbing and statfs.
 * Owners and modes come from the rows; who may change them is
 * fs/perm.c's.  Not for: open stream files (fs/file.c), the node
 * table itself (fs/node.c), xattr values (fs/xattr.c), the follow view's
 * reads (fs/follow.c).
 *
 * Directories: an open directory gets a struct fs_dir (a page of names
 * and a cursor name, so listing a huge bucket needs bounded memory);
 * d->lock guards the page, its offset, the cursor and eof, and is held
 * for the whole of one readdir.
 *
 * Invariants:
 *  1. Every operation here replies exactly once (fs.h invariant 1), on
 *     every path, before returning; invalidations that follow a reply
 *     (unlink) are sent after it, with no lock held.
 *  2. The follow view is read-only: every change under it is EROFS.
 */
#include "config.h"
#include "fs/ns.h"
#include "fs/file.h"
#include "fs/perm.h"
#include "fs/remote.h"
#include "fs/session.h"
#include "fs/xattr.h"
#include "src/base/lockcheck.h"
#include "src/base/log.h"
#include "src/base/names.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#define DIR_PAGE 256 /* names per page of a directory listing */

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

static void stat_bucket(uint64_t ino, const struct meta_bucket *b, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = S_IFDIR | (mode_t)b->own.mode;
	st->st_nlink = 2;
	st->st_uid = b->own.uid;
	st->st_gid = b->own.gid;
	st->st_mtim.tv_sec = (time_t)(b->created_ns / 1000000000ull);
	st->st_ctim = st->st_mtim;
	st->st_atim = st->st_mtim;
}

static void stat_stream(struct nv_stream *s, struct stat *st)
{
	uint64_t size = stream_acked_byte(s);
	uint64_t live = size - atomic_load(&s->trim_byte);
	uint64_t mt = atomic_load(&s->mtime_ns);

	memset(st, 0, sizeof(*st));
	st->st_ino = FS_INO_BASE + s->id;
	st->st_mode = S_IFREG | (mode_t)atomic_load(&s->mode);
	st->st_nlink = 1;
	st->st_uid = atomic_load(&s->uid);
	st->st_gid = atomic_load(&s->gid);
	st->st_size = (off_t)size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((live + 511) / 512);
	st->st_mtim.tv_sec = (time_t)(mt / 1000000000ull);
	st->st_mtim.tv_nsec = (long)(mt % 1000000000ull);
	st->st_ctim = st->st_mtim;
	st->st_atim = st->st_mtim;
}

/* The follow view's mirror of mode: the same owner may read and search
 * what they may in the plain view, nobody may write. */
static mode_t follow_mode(mode_t mode)
{
	return (mode & S_IFMT) | (mode & 0555);
}

/* st_size of stream s whose local view is local: the holder's end when
 * another star leads s (fs/remote.h invariant 3).  When that end is
 * past ours, a page this star cached at its own end (read while it led
 * s) holds zeros past it: invalidated here, before the reply, so the
 * kernel drops these attributes too and re-asks at the next read
 * instead of serving the zeros (fs/file.c fs_file_acked()). */
static uint64_t holder_size(struct nova_fs *fs, struct nv_stream *s, uint64_t local)
{
	uint64_t end = fs_remote_size(fs, s, local);

	if (end > local)
		fs_file_acked(fs, s, local, end);
	return end;
}

/* Stream s as getattr and lookup answer it: the holder's size first
 * (holder_size(), which may raise this star's view: its end, its trim
 * point), then the rest from the view, so st_blocks counts from the
 * trim point the view has now. */
static void stat_stream_sized(struct nova_fs *fs, struct nv_stream *s, struct stat *st)
{
	uint64_t end = holder_size(fs, s, stream_acked_byte(s));

	stat_stream(s, st);
	st->st_size = (off_t)end;
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
		stat_bucket(n->ino, &b, st);
		return 0;
	case FS_NODE_STREAM:
		stat_stream_sized(fs, n->stream, st);
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
		stat_bucket(n->ino, &b, st);
		st->st_mode = follow_mode(st->st_mode);
		return 0;
	case FS_NODE_FOLLOW_STREAM:
		/* st_size is the acked size, so tail can seek (follow.h). */
		stat_stream(n->stream, st);
		st->st_ino = n->ino;
		st->st_mode = follow_mode(st->st_mode);
		return 0;
	}
	return -EIO;
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

/* ------------------------------------------------------------ the gate */

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

/* ------------------------------------------------------------ names */

void fs_ns_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *p = fs_node_or_stale(req, parent);
	struct stat st;
	int rc;

	if (!p)
		return; /* replied ESTALE */
	if (p->kind == FS_NODE_ROOT && !strcmp(name, ".follow")) {
		node_stat(fs, &fs->nodes.follow_root, &st);
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
		if (!fs_node_remember(&fs->nodes, ino,
				      follow ? FS_NODE_FOLLOW_BUCKET : FS_NODE_BUCKET, name, NULL)) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		stat_bucket(ino, &b, &st);
		if (follow)
			st.st_mode = follow_mode(st.st_mode);
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
		stat_stream(s, &st);
		st.st_ino = ino;
		st.st_mode = follow_mode(st.st_mode);
		if (!fs_node_remember(&fs->nodes, ino, FS_NODE_FOLLOW_STREAM, p->bucket, s)) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
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
		/* As getattr: the kernel takes the entry's attributes as its
		 * cache, so a lookup too says the holder's end. */
		stat_stream_sized(fs, s, &st);
		if (!fs_node_remember(&fs->nodes, FS_INO_BASE + s->id, FS_NODE_STREAM, p->bucket,
				      s)) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		reply_entry(req, fs, &st);
	} else {
		fuse_reply_err(req, ENOTDIR);
	}
}

void fs_ns_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_node_forget(&fs_of(req)->nodes, ino, nlookup);
	fuse_reply_none(req);
}

void fs_ns_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		fs_node_forget(&fs_of(req)->nodes, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

void fs_ns_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = fs_node_or_stale(req, ino);
	struct stat st;
	int rc;

	if (!n)
		return; /* replied ESTALE */
	rc = node_stat(fs, n, &st);
	if (rc)
		fuse_reply_err(req, nova_fs_errno(rc));
	else
		fuse_reply_attr(req, &st, attr_timeout_of(fs, n));
}

/* chmod/chown/chgrp of a bucket or stream with attributes st (POSIX
 * rules: fs/perm.h).  0, -EPERM, engine errors. */
static int set_owner(fuse_req_t req, struct nova_fs *fs, struct fs_node *n,
		     const struct stat *st, const struct stat *attr, int to_set)
{
	struct meta_owner o;
	int rc;

	rc = fs_perm_setattr(req, st, attr, to_set, &o);
	if (rc)
		return rc;
	if (n->kind != FS_NODE_BUCKET && n->kind != FS_NODE_STREAM)
		/* The root is the daemon's: only a change of nothing passes. */
		return o.uid == st->st_uid && o.gid == st->st_gid &&
		       o.mode == (st->st_mode & 07777) ? 0 : -EPERM;
	return n->kind == FS_NODE_BUCKET ? star_bucket_set_owner(fs->star, n->bucket, &o)
					 : star_stream_set_owner(fs->star, n->stream, &o);
}

/* Owners and modes change (set_owner()); a size is only accepted equal
 * to the current one (O_TRUNC of an empty stream); time stamps (touch)
 * are ignored: mtime is the time of the last append. */
void fs_ns_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		   struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = fs_node_or_stale(req, ino);
	struct stat st;
	int rc;

	if (!n)
		return; /* replied ESTALE */
	rc = node_stat(fs, n, &st);
	if (rc) {
		fuse_reply_err(req, nova_fs_errno(rc));
		return;
	}
	if (fs_node_is_follow(n) && (to_set & ~(FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW))) {
		fuse_reply_err(req, EROFS); /* the follow view is read-only */
		return;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size != st.st_size) {
		nv_log(NV_DEBUG, NV_SUB_FS, "refusing to truncate inode %llu to %lld",
		       (unsigned long long)ino, (long long)attr->st_size);
		fuse_reply_err(req, EPERM);
		return;
	}
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		rc = set_owner(req, fs, n, &st, attr, to_set);
		if (!rc)
			rc = node_stat(fs, n, &st);
		if (rc) {
			fuse_reply_err(req, nova_fs_errno(rc));
			return;
		}
		fuse_reply_attr(req, &st, fs->cfg.attr_timeout);
		/* The follow view's mirror shows the new owner and mode now,
		 * not after its attribute timeout (after the reply). */
		if (fs->se && n->kind != FS_NODE_ROOT)
			fuse_lowlevel_notify_inval_inode(fs->se, n->ino | FS_INO_FOLLOW_BIT, -1, 0);
		return;
	}
	fuse_reply_attr(req, &st, fs->cfg.attr_timeout);
}

/* ------------------------------------------------------------ buckets, streams */

void fs_ns_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct nova_fs *fs = fs_of(req);
	struct meta_owner own = fs_perm_creator(req, mode);
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
	rc = star_bucket_create(fs->star, name, &own, &b);
	if (rc) {
		fuse_reply_err(req, nova_fs_errno(rc));
		return;
	}
	if (!fs_node_remember(&fs->nodes, FS_INO_BASE + b.id, FS_NODE_BUCKET, name, NULL)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	stat_bucket(FS_INO_BASE + b.id, &b, &st);
	reply_entry(req, fs, &st);
}

void fs_ns_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
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

/* The follow view's name of bucket/name goes at once, not after the
 * kernel's entry timeout (called after the reply: no lock held). */
static void inval_follow_name(struct nova_fs *fs, const char *bucket, const char *name)
{
	struct meta_bucket b;

	if (fs->se && star_bucket_get(fs->star, bucket, &b) == 0)
		fuse_lowlevel_notify_inval_entry(fs->se, (FS_INO_BASE + b.id) | FS_INO_FOLLOW_BIT,
						 name, strlen(name));
}

void fs_ns_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *p = fs_node_find(&fs->nodes, parent);
	struct nv_stream *s;
	int rc;

	if (!p || p->kind != FS_NODE_BUCKET) {
		fuse_reply_err(req, !p ? ESTALE : fs_node_is_follow(p) ? EROFS : EPERM);
		return;
	}
	rc = star_stream_lookup(fs->star, p->bucket, name, &s);
	if (!rc) {
		rc = fs_remote_unlink(fs, s); /* at its leader when another star leads it */
		stream_put(s);
	}
	fuse_reply_err(req, nova_fs_errno(rc));
	if (!rc)
		inval_follow_name(fs, p->bucket, name);
}

static void fs_refuse(fuse_req_t req, const char *what)
{
	nv_log(NV_DEBUG, NV_SUB_FS, "refused: %s", what);
	fuse_reply_err(req, EPERM);
}

/*
 * Rename (novafs(8), THE FILESYSTEM, Everyday tools): a stream within its bucket is
 * renamed (an existing stream of the new name is replaced, as rename(2)
 * does, unless RENAME_NOREPLACE); across buckets, and of a bucket, it is
 * EXDEV, so mv falls back to copying and deleting; into the top level
 * EPERM (no files there); in the follow view EROFS; RENAME_EXCHANGE
 * EINVAL.
 */
void fs_ns_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		  fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *p = fs_node_or_stale(req, parent), *np;
	int rc;

	if (!p)
		return; /* replied ESTALE */
	np = fs_node_or_stale(req, newparent);
	if (!np)
		return;
	if (fs_node_is_follow(p) || fs_node_is_follow(np))
		rc = -EROFS;
	else if (flags & ~(unsigned)RENAME_NOREPLACE)
		rc = -EINVAL;
	else if (p->kind == FS_NODE_BUCKET && np->kind == FS_NODE_ROOT)
		rc = -EPERM;
	else if (p->kind != FS_NODE_BUCKET || np->kind != FS_NODE_BUCKET ||
		 strcmp(p->bucket, np->bucket))
		rc = -EXDEV;
	else
		rc = fs_remote_rename(fs, p->bucket, name, newname, /* a replaced stream */
				      flags & RENAME_NOREPLACE);       /* at its leader */
	if (rc && rc != -EXDEV)
		nv_log(NV_DEBUG, NV_SUB_FS, "rename of %s to %s refused: %s", name, newname,
		       strerror(-rc));
	fuse_reply_err(req, nova_fs_errno(rc));
	if (!rc) { /* the follow view's names change too */
		inval_follow_name(fs, p->bucket, name);
		inval_follow_name(fs, p->bucket, newname);
	}
}

void fs_ns_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fs_refuse(req, "link");
}

void fs_ns_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fs_refuse(req, "symlink");
}

void fs_ns_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *p = fs_node_or_stale(req, parent);
	struct fuse_entry_param e;
	struct meta_owner own;
	struct nv_stream *s;
	struct fs_node *n;
	int rc;

	if (!p)
		return; /* replied ESTALE */
	if (p->kind != FS_NODE_BUCKET || !S_ISREG(mode)) {
		/* Streams live in buckets; the follow view is read-only. */
		fuse_reply_err(req, fs_node_is_follow(p) ? EROFS : EPERM);
		return;
	}
	own = fs_perm_creator(req, mode);
	rc = star_stream_create(fs->star, p->bucket, name, &own, &s);
	if (rc == -EEXIST && !(fi->flags & O_EXCL))
		rc = star_stream_lookup(fs->star, p->bucket, name, &s);
	if (rc) {
		fuse_reply_err(req, nova_fs_errno(rc));
		return;
	}
	memset(&e, 0, sizeof(e));
	stat_stream(s, &e.attr);
	n = fs_node_remember(&fs->nodes, FS_INO_BASE + s->id, FS_NODE_STREAM, p->bucket, s);
	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = fs_file_open_node(fs, n, fi);
	if (rc) {
		fs_node_forget(&fs->nodes, n->ino, 1);
		fuse_reply_err(req, -rc);
		return;
	}
	e.ino = e.attr.st_ino;
	e.generation = 1;
	e.attr_timeout = fs->cfg.attr_timeout;
	e.entry_timeout = fs->cfg.entry_timeout;
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		fs_file_discard(fi); /* interrupted: the kernel will never release it */
}

void fs_ns_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		 dev_t rdev)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *p = fs_node_find(&fs->nodes, parent);
	struct meta_owner own = fs_perm_creator(req, mode);
	struct nv_stream *s;
	struct stat st;
	int rc;

	if (!p || p->kind != FS_NODE_BUCKET || !S_ISREG(mode)) {
		fuse_reply_err(req, !p ? ESTALE : fs_node_is_follow(p) ? EROFS : EPERM);
		return;
	}
	rc = star_stream_create(fs->star, p->bucket, name, &own, &s);
	if (rc) {
		fuse_reply_err(req, nova_fs_errno(rc));
		return;
	}
	stat_stream(s, &st);
	if (!fs_node_remember(&fs->nodes, FS_INO_BASE + s->id, FS_NODE_STREAM, p->bucket, s)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_entry(req, fs, &st);
}

/* ------------------------------------------------------------ directories */

struct fs_dirent {
	char name[NV_STREAM_NAME_MAX + 1];
	uint64_t ino;
	mode_t mode;
};

/* An open directory.  node is immutable (the kernel holds it while the
 * directory is open); lock guards the rest. */
struct fs_dir {
	struct fs_node *node;
	pthread_mutex_t lock;
	struct fs_dirent *page;   /* lock: DIR_PAGE entries */
	uint32_t npage;           /* lock */
	off_t page_off;           /* lock: readdir offset of page[0] */
	char cursor[NV_STREAM_NAME_MAX + 1]; /* lock: list after this name */
	bool eof;                 /* lock */
};

void fs_ns_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_node *n = fs_node_or_stale(req, ino);
	struct fs_dir *d;

	if (!n)
		return; /* replied ESTALE */
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

static uint64_t follow_bit(const struct fs_dir *d)
{
	return fs_node_is_follow(d->node) ? FS_INO_FOLLOW_BIT : 0;
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

/* Load the page of names after d->cursor as the entries from readdir
 * offset page_off on (offsets 0 and 1 are "." and ".."; names start
 * after them).  Caller holds d->lock.  0, or the
 * listing's engine error (the page then holds what was listed). */
static int load_page(struct nova_fs *fs, struct fs_dir *d, off_t page_off)
{
	int rc;

	NV_ASSERT_LOCKED(&d->lock);
	d->npage = 0;
	d->page_off = page_off;
	if (d->node->kind == FS_NODE_ROOT || d->node->kind == FS_NODE_FOLLOW_ROOT)
		rc = star_bucket_list(fs->star, d->cursor, fill_bucket, d);
	else
		rc = star_stream_list(fs->star, d->node->bucket, d->cursor, fill_stream, d);
	d->eof = d->npage < DIR_PAGE;
	return rc;
}

void fs_ns_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
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
		} else {
			/* Position the page over off. */
			if (off < d->page_off || (d->npage == 0 && d->page_off != off) ||
			    (d->page_off == 0)) {
				d->cursor[0] = 0; /* rewind: list from the start */
				/* Names follow "." and "..".  The root does not
				 * list .follow (reachable by name only, so
				 * recursive tools never walk into it). */
				rc = load_page(fs, d, 2);
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

void fs_ns_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_dir *d = (struct fs_dir *)(uintptr_t)fi->fh;

	pthread_mutex_destroy(&d->lock);
	free(d->page);
	free(d);
	fuse_reply_err(req, 0);
}

/* ------------------------------------------------------------ xattrs, statfs */

/* user.nova.trim: at the stream's leader (fs/remote.h invariant 7). */
static int xattr_trim(void *arg, struct nv_stream *s, uint64_t seq)
{
	return fs_remote_trim(arg, s, true, seq, NULL);
}

/* What an xattr call on n is about.  The follow view shows its stream's
 * attributes (read-only: xattr_change() refuses it). */
static void xattr_target(struct nova_fs *fs, struct fs_node *n, struct fs_xattr_target *t)
{
	t->kind = n->kind == FS_NODE_FOLLOW_STREAM ? FS_NODE_STREAM
		  : n->kind == FS_NODE_FOLLOW_BUCKET ? FS_NODE_BUCKET
		  : n->kind == FS_NODE_FOLLOW_ROOT ? FS_NODE_ROOT : n->kind;
	t->bucket = n->bucket;
	t->stream = n->stream;
	t->durable_default = fs->durable;
	t->client = fs->client; /* user.nova.leader asks the holder through it */
	t->trim = xattr_trim;
	t->trim_arg = fs;
}

/* Bounds of what getxattr/listxattr build: a value (user.nova.layout of a
 * long stream is the big one) and the name list (the kernel's
 * XATTR_LIST_MAX). */
#define XATTR_VALUE_CAP (1u << 24)
#define XATTR_LIST_CAP 65536u

/* getxattr of name, or listxattr when name is NULL: one reply. */
static void xattr_query(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = fs_node_or_stale(req, ino);
	struct fs_xattr_target t;
	struct nv_buf v;
	int rc;

	if (!n)
		return; /* replied ESTALE */
	xattr_target(fs, n, &t);
	nv_buf_init(&v, name ? XATTR_VALUE_CAP : XATTR_LIST_CAP);
	rc = name ? fs_xattr_get(fs->star, &t, name, &v) : fs_xattr_list(&t, &v);
	if (rc)
		fuse_reply_err(req, nova_fs_errno(rc));
	else if (size == 0) /* a size probe */
		fuse_reply_xattr(req, v.len);
	else if (size < v.len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, (const char *)v.ptr, v.len);
	nv_buf_free(&v);
}

void fs_ns_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	xattr_query(req, ino, name, size);
}

void fs_ns_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	xattr_query(req, ino, NULL, size);
}

/* setxattr, or removexattr (remove; value NULL): one reply. */
static void xattr_change(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, bool remove)
{
	struct nova_fs *fs = fs_of(req);
	struct fs_node *n = fs_node_or_stale(req, ino);
	struct fs_xattr_target t;
	struct stat st;
	int rc;

	if (!n)
		return; /* replied ESTALE */
	if (fs_node_is_follow(n)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	xattr_target(fs, n, &t);
	/* Administration needs write permission on the node (fs/perm.h). */
	rc = node_stat(fs, n, &st);
	if (!rc)
		rc = fs_perm_may_write(req, &st);
	if (!rc)
		rc = remove ? fs_xattr_remove(fs->star, &t, name)
			    : fs_xattr_set(fs->star, &t, name, value, size);
	if (!rc && fs->se && n->kind == FS_NODE_STREAM && !strcmp(name, "user.nova.trim"))
		fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0); /* the hole reads as zeros */
	if (rc && rc != -ENOTSUP)
		nv_log(NV_INFO, NV_SUB_FS, "%sxattr %s on inode %llu refused: %s",
		       remove ? "remove" : "set", name, (unsigned long long)ino, strerror(-rc));
	fuse_reply_err(req, nova_fs_errno(rc));
}

void fs_ns_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags)
{
	xattr_change(req, ino, name, value, size, false);
}

void fs_ns_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (strcmp(name, "user.nova.durable")) /* nothing else is removable */
		fuse_reply_err(req, strncmp(name, "user.nova.", 10) ? ENODATA : EPERM);
	else
		xattr_change(req, ino, name, NULL, 0, true);
}

void fs_ns_statfs(fuse_req_t req, fuse_ino_t ino)
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
