/*
 * session.h - one mount's state, shared by the files of fs/ that answer
 * FUSE requests (fs/fs.c, fs/ns.c, fs/file.c).
 *
 * For: the definition of struct nova_fs, which fs/fs.h keeps opaque to
 * src/; fs_of(), the way from a request to it; fs_node_or_stale(), the
 * node of an inode or the ESTALE reply.  It includes fs/cfg.h, not
 * fs/fs.h, because fs/fs.c includes the handlers' headers.  Not for: the
 * follow view (fs/follow.c has its own state and never sees this one)
 * or anything src/ calls (fs/fs.h).
 *
 * Locking: everything here is written before the session starts serving
 * (nova_fs_new(), nova_fs_set_star(), nova_fs_set_client(),
 * nova_fs_set_session()) and only
 * read while it serves, except the node table (its own lock, fs/node.h)
 * and `se`, which nova_fs_set_session(fs, NULL) clears after the session
 * loop has ended.
 *
 * Invariants:
 *  1. fuse_req_userdata() of every request is the struct nova_fs.
 *  2. star and follow outlive every request (set before the session
 *     serves; freed after it ended).
 */
#ifndef NOVAFS_FS_SESSION_H
#define NOVAFS_FS_SESSION_H

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "engine/star.h"
#include "fs/cfg.h"
#include "fs/handle.h"
#include "fs/node.h"

struct follow;
struct api_client;

struct nova_fs {
	struct fs_cfg cfg;
	enum fs_durable durable;      /* -o durable=: WRITE or FSYNC, never DEFAULT */
	char *data_dir;               /* owned: for statfs (fs/ns.c) */
	struct star *star;            /* borrowed until nova_fs_free() */
	struct fuse_session *se;      /* borrowed; NULL: no invalidations */
	struct fs_nodes nodes;        /* the node table (fs/node.h) */
	struct follow *follow;        /* the follow view's worker (fs/follow.h) */
	struct api_client *client;    /* borrowed; NULL: no cluster secret (fs/remote.h) */
	pthread_key_t bufkey;         /* per-thread read buffer (fs/file.c) */
	pthread_mutex_t files_lock;   /* guards files */
	struct fs_file *files;        /* files_lock: open plain handles (fs/file.c) */
	struct timespec started;      /* the root's times */
};

/* The mount a request belongs to (invariant 1). */
static inline struct nova_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The node of ino (borrowed, fs/node.h invariant 1), or NULL after
 * replying ESTALE to req: then that was the request's one reply. */
static inline struct fs_node *fs_node_or_stale(fuse_req_t req, fuse_ino_t ino)
{
	struct fs_node *n = fs_node_find(&fs_of(req)->nodes, ino);

	if (!n)
		fuse_reply_err(req, ESTALE);
	return n;
}

#endif
