/*
 * follow.h - the follow view: MOUNT/.follow/<bucket>/<stream>.
 *
 * For: subscriptions through the filesystem (read-path.txt
 * "Subscriptions park on the wake").  Every stream is mirrored read-only
 * under .follow; a read there that starts at the end of the stream parks
 * on the stream's wake (engine/wake.h) instead of returning end-of-file,
 * and is answered asynchronously when an acknowledgement moves the end,
 * by a small worker that re-reads — no thread is held per parked reader,
 * so thousands can park.  A FUSE interrupt (Ctrl-C) ends a parked read
 * with EINTR; deleting the stream ends it with end-of-file; poll(),
 * select() and epoll report readability through FUSE poll
 * notifications.  Reads below the end return what is there (short reads
 * are normal here, as on a pipe).  Not for: the namespace of the view
 * (fs/ns.c) or reading itself (engine/read.h).
 *
 * Readability for poll() is judged at the handle's position: where its
 * last read ended (followers read sequentially).
 *
 * On a mount that does not lead the stream, a handle holds the mount's
 * subscription at the holder (fs/rfollow.h): its wake-ups close the
 * local wake, and a read past this star's view is served by the holder
 * (fs_remote_read()).
 *
 * Invariants:
 *  1. Every read request gets exactly one reply: data, 0 (deleted), EINTR
 *     (interrupted) or an error; a parked request is owned by whoever
 *     takes it off the wake (the waker or the interrupt), never both.
 *  2. A parked read holds a reference on its handle and stream.
 */
#ifndef NOVAFS_FS_FOLLOW_H
#define NOVAFS_FS_FOLLOW_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/types.h>

#include "engine/star.h"

struct follow;
struct follow_file;

struct nova_fs;

/* Start the view's worker (st and fs borrowed for its life: fs for the
 * hot pages of a stream another star leads, fs/remote.h).  0 and *out,
 * -ENOMEM, -EAGAIN. */
int follow_new(struct star *st, struct nova_fs *fs, struct follow **out) __attribute__((warn_unused_result));

/* Answer every parked read (and every later read at the end) with
 * end-of-file; the worker keeps answering.  For a stop that lets readers
 * finish while the session still serves their close. */
void follow_quiesce(struct follow *fw);
/* follow_quiesce(), then stop the worker.  Streams must still be alive. */
void follow_shutdown(struct follow *fw);
void follow_free(struct follow *fw); /* after follow_shutdown(); NULL ok */

/* A handle on stream s (takes a stream reference).  NULL on ENOMEM. */
struct follow_file *follow_open(struct follow *fw, struct nv_stream *s);
/* The kernel released the handle. */
void follow_release(struct follow *fw, struct follow_file *ff);

/* The FUSE read and poll operations on a follow handle. */
void follow_read(struct follow *fw, fuse_req_t req, struct follow_file *ff, size_t size,
		 off_t off);
void follow_poll(struct follow *fw, fuse_req_t req, struct follow_file *ff,
		 struct fuse_pollhandle *ph);

#endif
