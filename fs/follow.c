/*
 * follow.c - see follow.h.
 *
 * A parked read's life (struct parked, owned by one party at a time):
 *
 *   follow_read --attempt: data/EOF--> replied
 *        |
 *        +--attempt: at the end--> PARKED on the stream's wake
 *                                    |            |
 *                  the wake closes --+            +-- FUSE interrupt:
 *                  (ack thread): queue it             wake_unpark() wins:
 *                                    |                queue it, interrupted
 *                                    v
 *                             worker: attempt again (park again, or reply)
 *
 * The interrupt callback never replies (it runs under libfuse's request
 * lock); it only marks the request and, when it takes it off the wake,
 * queues it for the worker.  After parking, the attempt re-checks the
 * mark, so an interrupt that lands between the check and the park is not
 * lost.
 *
 * Locking: fw->lock guards the worker queue and the shutdown flag;
 * ff->lock guards a handle's position and poll state.  Neither is held
 * while replying or while calling into the engine.
 */
#include "config.h"
#include "fs/follow.h"
#include "engine/lease.h"
#include "fs/handle.h"
#include "fs/remote.h"
#include "fs/rfollow.h"
#include "src/base/log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

struct follow_file {
	int kind;                 /* FS_FILE_FOLLOW: must stay first (fs/handle.h) */
	atomic_int refs;          /* the kernel's handle + parked reads */
	struct nv_stream *stream; /* a reference */
	struct reader *reader;
	struct rsub *rs;          /* the mount's subscription on it (NULL: none) */
	pthread_mutex_t lock;
	uint64_t pos;                 /* lock: where the last read ended */
	struct fuse_pollhandle *ph;   /* lock: the kernel's pending poll */
	struct wake_waiter pw;        /* a poll parked on the wake */
	bool poll_parked;             /* lock */
	struct follow *fw;
};

struct parked {
	struct wake_waiter w;     /* first: the wake hands this back */
	struct follow *fw;
	fuse_req_t req;
	struct follow_file *ff;   /* a reference */
	off_t off;
	size_t size;
	atomic_bool interrupted;
	struct parked *next;      /* the worker queue */
};

struct follow {
	struct star *st;
	struct nova_fs *fs;           /* borrowed: a hot page led elsewhere (fs/remote.h) */
	struct nv_stats *stats;
	struct rfollow *rf;           /* follow across hosts (fs/rfollow.h) */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct parked *qhead, *qtail; /* lock */
	bool shutdown;                /* lock */
	bool stop;                    /* lock */
};

static void ff_unref(struct follow_file *ff)
{
	if (atomic_fetch_sub(&ff->refs, 1) == 1) {
		fs_rfollow_put(ff->fw->rf, ff->rs);
		reader_free(ff->reader);
		stream_put(ff->stream);
		pthread_mutex_destroy(&ff->lock);
		free(ff);
	}
}

static void enqueue(struct follow *fw, struct parked *p)
{
	p->next = NULL;
	pthread_mutex_lock(&fw->lock);
	if (fw->qtail)
		fw->qtail->next = p;
	else
		fw->qhead = p;
	fw->qtail = p;
	pthread_cond_signal(&fw->cond);
	pthread_mutex_unlock(&fw->lock);
}

/* The wake closed (on the acknowledging thread): hand over, no more. */
static void parked_woken(struct wake_waiter *w)
{
	struct parked *p = (struct parked *)w;

	NV_STAT_ADD(p->fw->stats, parked_readers, (uint64_t)-1);
	enqueue(p->fw, p);
}

static void parked_interrupted(fuse_req_t req, void *data)
{
	struct parked *p = data;

	atomic_store(&p->interrupted, true);
	if (wake_unpark(&p->ff->stream->wake, &p->w)) {
		NV_STAT_ADD(p->fw->stats, parked_readers, (uint64_t)-1);
		enqueue(p->fw, p); /* the worker replies EINTR */
	}
}

static void finish(struct parked *p)
{
	ff_unref(p->ff);
	free(p);
}

static void reply_err(struct parked *p, int err)
{
	fuse_req_interrupt_func(p->req, NULL, NULL);
	fuse_reply_err(p->req, err);
	finish(p);
}

static bool shutting_down(struct follow *fw)
{
	bool s;

	pthread_mutex_lock(&fw->lock);
	s = fw->shutdown;
	pthread_mutex_unlock(&fw->lock);
	return s;
}

/* Reply with what p->ff's holder has at p->off (the subscription said the
 * end moved past it): true when replied (data or a hard error), false
 * when leadership is moving or the holder is unreachable (park and look
 * again on the next wake). */
static bool remote_tail(struct follow *fw, struct parked *p)
{
	uint8_t *buf = malloc(p->size);
	size_t done = 0;
	int rc;

	if (!buf) {
		reply_err(p, ENOMEM);
		return true;
	}
	rc = fs_remote_read(fw->fs, p->ff->stream, (uint64_t)p->off, buf, p->size, &done);
	if (done == 0 && (rc == 0 || rc == -EAGAIN || rc == -EHOSTUNREACH || rc == -ETIMEDOUT)) {
		free(buf);
		return false;
	}
	if (rc && done == 0) {
		free(buf);
		reply_err(p, -rc);
		return true;
	}
	pthread_mutex_lock(&p->ff->lock);
	p->ff->pos = (uint64_t)p->off + done;
	pthread_mutex_unlock(&p->ff->lock);
	fuse_req_interrupt_func(p->req, NULL, NULL);
	fuse_reply_buf(p->req, (const char *)buf, done);
	free(buf);
	finish(p);
	return true;
}

/*
 * Serve the read or park it.  Returns with p replied and freed, or
 * parked (then the wake or the interrupt owns it).
 */
static void attempt(struct follow *fw, struct parked *p)
{
	struct nv_stream *s = p->ff->stream;

	for (;;) {
		uint64_t gen = wake_capture(&s->wake);
		uint64_t acked = stream_acked_byte(s);
		uint64_t there = fs_rfollow_end(p->ff->rs); /* the holder's, when led elsewhere */
		bool deleted;

		pthread_mutex_lock(&s->lock);
		deleted = s->deleted;
		pthread_mutex_unlock(&s->lock);
		if ((uint64_t)p->off >= acked && (uint64_t)p->off < there) {
			if (remote_tail(fw, p))
				return;
			/* The holder cannot serve it now: park for the next wake. */
		} else if ((uint64_t)p->off < acked) {
			uint8_t *buf = malloc(p->size);
			size_t done;
			int rc;

			if (!buf) {
				reply_err(p, ENOMEM);
				return;
			}
			/* What is there, up to the request (a short read is fine). */
			rc = fs_handle_read(fw->st, s, p->ff->reader, (uint64_t)p->off, buf, p->size,
					    NULL, &done);
			if (rc == -STAR_ENOTOWNER) { /* a hot page another star leads */
				size_t more = 0;

				rc = fs_remote_read(fw->fs, s, (uint64_t)p->off + done, buf + done,
						    p->size - done, &more);
				done += more;
			}
			/* As fs/file.c: an error fails the request (a short answer
			 * would be taken for data that is not there). */
			if (rc) {
				free(buf);
				reply_err(p, nova_fs_errno(rc));
				return;
			}
			pthread_mutex_lock(&p->ff->lock);
			p->ff->pos = (uint64_t)p->off + done;
			pthread_mutex_unlock(&p->ff->lock);
			fuse_req_interrupt_func(p->req, NULL, NULL);
			fuse_reply_buf(p->req, (const char *)buf, done);
			free(buf);
			finish(p);
			return;
		}
		if (deleted || shutting_down(fw)) {
			fuse_req_interrupt_func(p->req, NULL, NULL);
			fuse_reply_buf(p->req, NULL, 0); /* end of the stream */
			finish(p);
			return;
		}
		if (atomic_load(&p->interrupted)) {
			reply_err(p, EINTR);
			return;
		}
		p->w.fn = parked_woken;
		if (wake_park(&s->wake, gen, &p->w) == 0) {
			NV_STAT_ADD(fw->stats, parked_readers, 1);
			/* An interrupt that came before the park found nothing
			 * to unpark: take it back ourselves. */
			if (atomic_load(&p->interrupted) && wake_unpark(&s->wake, &p->w)) {
				NV_STAT_ADD(fw->stats, parked_readers, (uint64_t)-1);
				reply_err(p, EINTR);
			}
			return;
		}
		/* The edge closed since the capture: look again. */
	}
}

void follow_read(struct follow *fw, fuse_req_t req, struct follow_file *ff, size_t size,
		 off_t off)
{
	struct parked *p = calloc(1, sizeof(*p));

	if (!p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	p->fw = fw;
	p->req = req;
	atomic_fetch_add(&ff->refs, 1);
	p->ff = ff;
	p->off = off;
	p->size = size;
	atomic_init(&p->interrupted, false);
	fuse_req_interrupt_func(req, parked_interrupted, p);
	attempt(fw, p);
}

static void *worker_main(void *arg)
{
	struct follow *fw = arg;

	pthread_mutex_lock(&fw->lock);
	for (;;) {
		struct parked *p;

		while (!fw->stop && !fw->qhead)
			pthread_cond_wait(&fw->cond, &fw->lock);
		if (!fw->qhead)
			break;
		p = fw->qhead;
		fw->qhead = p->next;
		if (!fw->qhead)
			fw->qtail = NULL;
		pthread_mutex_unlock(&fw->lock);
		attempt(fw, p);
		pthread_mutex_lock(&fw->lock);
	}
	pthread_mutex_unlock(&fw->lock);
	return NULL;
}

/* ------------------------------------------------------------ poll */

static void poll_woken(struct wake_waiter *w)
{
	struct follow_file *ff = (struct follow_file *)((char *)w -
							offsetof(struct follow_file, pw));
	struct fuse_pollhandle *ph;

	pthread_mutex_lock(&ff->lock);
	ff->poll_parked = false;
	ph = ff->ph;
	ff->ph = NULL;
	pthread_mutex_unlock(&ff->lock);
	if (ph) {
		fuse_lowlevel_notify_poll(ph);
		fuse_pollhandle_destroy(ph);
	}
	ff_unref(ff); /* the park's reference */
}

void follow_poll(struct follow *fw, fuse_req_t req, struct follow_file *ff,
		 struct fuse_pollhandle *ph)
{
	struct nv_stream *s = ff->stream;
	uint64_t gen = wake_capture(&s->wake);
	struct fuse_pollhandle *old = NULL;
	bool readable, deleted;

	pthread_mutex_lock(&s->lock);
	deleted = s->deleted;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&ff->lock);
	readable = deleted || ff->pos < stream_acked_byte(s) || ff->pos < fs_rfollow_end(ff->rs);
	if (ph) {
		old = ff->ph;
		ff->ph = ph;
	}
	if (!readable && ff->ph && !ff->poll_parked) {
		ff->pw.fn = poll_woken;
		atomic_fetch_add(&ff->refs, 1);
		if (wake_park(&s->wake, gen, &ff->pw) == 0) {
			ff->poll_parked = true;
		} else {
			atomic_fetch_sub(&ff->refs, 1); /* never below 1 here */
			readable = true; /* the edge moved meanwhile */
		}
	}
	pthread_mutex_unlock(&ff->lock);
	if (old)
		fuse_pollhandle_destroy(old);
	fuse_reply_poll(req, readable ? POLLIN | POLLRDNORM : 0);
}

/* ------------------------------------------------------------ handles */

struct follow_file *follow_open(struct follow *fw, struct nv_stream *s)
{
	struct follow_file *ff = calloc(1, sizeof(*ff));

	if (!ff)
		return NULL;
	ff->kind = FS_FILE_FOLLOW;
	atomic_init(&ff->refs, 1);
	stream_get(s);
	ff->stream = s;
	ff->reader = star_reader_new(fw->st, s);
	ff->fw = fw;
	/* A stream led elsewhere now or later: followed at its holder. */
	ff->rs = fs_rfollow_get(fw->rf, s);
	pthread_mutex_init(&ff->lock, NULL);
	return ff;
}

void follow_release(struct follow *fw, struct follow_file *ff)
{
	struct fuse_pollhandle *ph;
	bool parked;

	/* A poll still parked: take it back (its reference with it). */
	parked = wake_unpark(&ff->stream->wake, &ff->pw);
	pthread_mutex_lock(&ff->lock);
	ph = ff->ph;
	ff->ph = NULL;
	ff->poll_parked = false;
	pthread_mutex_unlock(&ff->lock);
	if (ph)
		fuse_pollhandle_destroy(ph);
	if (parked)
		ff_unref(ff);
	ff_unref(ff);
}

/* ------------------------------------------------------------ lifecycle */

int follow_new(struct star *st, struct nova_fs *fs, struct follow **out)
{
	struct follow *fw = calloc(1, sizeof(*fw));
	int rc;

	if (!fw)
		return -ENOMEM;
	fw->st = st;
	fw->fs = fs;
	fw->stats = star_stats(st);
	rc = fs_rfollow_new(fs, &fw->rf);
	if (rc) {
		free(fw);
		return rc;
	}
	pthread_mutex_init(&fw->lock, NULL);
	pthread_cond_init(&fw->cond, NULL);
	rc = -pthread_create(&fw->thread, NULL, worker_main, fw);
	if (rc) {
		pthread_mutex_destroy(&fw->lock);
		fs_rfollow_free(fw->rf);
		free(fw);
		return rc;
	}
	*out = fw;
	return 0;
}

static void close_wake(void *arg, struct nv_stream *s)
{
	wake_close(&s->wake);
}

void follow_quiesce(struct follow *fw)
{
	if (!fw)
		return;
	pthread_mutex_lock(&fw->lock);
	fw->shutdown = true;
	pthread_mutex_unlock(&fw->lock);
	/* Every parked read and poll fires; attempts now answer EOF. */
	star_each_stream(fw->st, close_wake, NULL);
}

void follow_shutdown(struct follow *fw)
{
	if (!fw)
		return;
	follow_quiesce(fw);
	pthread_mutex_lock(&fw->lock);
	fw->stop = true;
	pthread_cond_broadcast(&fw->cond);
	pthread_mutex_unlock(&fw->lock);
	pthread_join(fw->thread, NULL);
	fs_rfollow_stop(fw->rf); /* the streams are still alive */
}

void follow_free(struct follow *fw)
{
	if (!fw)
		return;
	fs_rfollow_free(fw->rf);
	pthread_cond_destroy(&fw->cond);
	pthread_mutex_destroy(&fw->lock);
	free(fw);
}
