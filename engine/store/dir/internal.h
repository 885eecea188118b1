/*
 * internal.h - what the files of the directory object store
 * (engine/store/dir/, public side engine/store/dir.h) share: limits, the
 * store and upload structs, and the calls one file makes into another.
 * Included by those files only.
 *
 * The backend is the embedded default behind store.h, in six files:
 *   files.c  errno translation, temp names, writes and copies, the
 *            synced set, walking/creating a key's directories, and
 *            publishing an object (dir_publish())
 *   ops.c    the store ops glue: put, ranged get, head, delete, close,
 *            the ops table, dir_store_open() and its scheme entry
 *   list.c   listing in byte order (dir_list())
 *   mpu.c    multipart uploads under ROOT/#mpu (dir_mpu_*())
 *   seg.c    chain slot keys in segment files under ROOT/#seg when
 *            dir_store_open_opts() asks (dir_seg_*(); its own invariants)
 *   segfmt.c the segment record format and scanner (segfmt.h)
 *
 *
 * For: keeping objects as plain files under one root directory on a local
 * (or otherwise POSIX) file system, atomically and durably.
 * Not for: checking keys, counting or failpoints (store.c does those before
 * any call gets here), nor local scratch files (the fetch cache).
 *
 * Layout:
 *   ROOT/<key>                   one object; key components are directories
 *   ROOT/<dir>/<name>#tmp.P.N    a put in progress (process P, sequence N)
 *   ROOT/#mpu/<id>/data          parts 1..n of upload <id>, sent in order
 *   ROOT/#mpu/<id>/part-NNNNN    the parts of upload <id> otherwise
 *   ROOT/#mpu/<id>/part-NNNNN#tmp.P.N   a part being written
 *   ROOT/#seg/NNNNNNNN.seg       a segment of chain slot records (seg.c)
 * '#' can never appear in a key (store.h invariant 5), so nothing of ours
 * can collide with an object, and list skips every name holding one.
 *
 * Invariants of the whole backend (the files cite them by number):
 *  1. An object (other than a slot in a segment: seg.c invariants 1-2
 *     instead) appears only by link() (create-once) or rename() of a
 *     complete, fdatasync'd temporary file in the object's own directory
 *     (or of a multipart upload's fdatasync'd data file, mpu.c),
 *     and a call returns success only after fsync of that directory; every
 *     directory a put creates (or loses a mkdir race for) is made durable
 *     by fsync of its parent.  So a reader (and a crash) sees the whole
 *     object or none of it.  A put that finds a directory already there
 *     cannot know whether its creator (another thread, or a process that
 *     crashed) synced it, so it fsyncs the parent of every directory on
 *     its path that this store has not yet seen durable (the synced set:
 *     a hash set of paths, so once per directory per process), and never
 *     relies on the file system committing metadata in order (ext4
 *     without a journal does not).
 *  2. A temporary file lives in the directory its object will live in, so
 *     the final link/rename never crosses directories, and its presence
 *     keeps that directory non-empty: delete's rmdir cannot pull the
 *     directory away from a put that has created its temp file.  The one
 *     exception is a multipart upload's data file (mpu.c), linked from
 *     ROOT/#mpu/<id>/ into the object's directory: a delete may remove
 *     that directory between the walk and the link (ENOENT), and the
 *     complete walks again (invariant 3).
 *  3. Delete removes emptied directories bottom-up, never ROOT.  Within
 *     a process a put's walk and a delete's prune exclude each other
 *     (prune_lock); a put that finds a directory of its path gone anyway
 *     (another process's delete: ENOENT while walking or creating the
 *     temp file) re-creates the path and retries, at most DIR_RETRIES
 *     times.
 *  4. list yields keys in byte order: each directory's entries are sorted
 *     with directory names compared as name + "/", and a directory is
 *     walked depth-first at its place in that order.  Memory is the
 *     sorted names of the directories on the current path, never the
 *     whole tree, and no directory handle is open while fn runs.
 *  5. No global mutable state but dir_tmp_seq (atomic), which makes temp
 *     names unique within the process; O_EXCL makes them unique across
 *     processes (a collision just draws the next number).
 *  6. Upload directories idle for more than DIR_MPU_STALE_NS are removed
 *     when a store is opened; completed and aborted uploads remove theirs
 *     at once, and ROOT/#mpu itself when it becomes empty.
 *
 * Limits (dir.h): a key component longer than NAME_MAX, or a key that
 * needs a directory where an object is (or the reverse: "a/b" then "a"),
 * cannot be stored: -EINVAL, logged.  Reads of such keys answer -ENOENT.
 * Stray temp files left by a crash are never listed or read; they stay
 * until someone removes them (they also keep their directory alive).
 *
 * Locking: struct dir_store is immutable after dir_store_open() but for
 * its synced set (synced_lock, never held across I/O);
 * struct dir_upload's in-order parts are written under its lock; other
 * parts land under unique temp names and are renamed into place.
 * Complete/abort must not race with part uploads (store.h).
 */
#ifndef NOVAFS_DIR_INTERNAL_H
#define NOVAFS_DIR_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "engine/store/dir.h"
#include "engine/store/store.h"
#include "src/base/clock.h"
#include "src/base/u64map.h"
/* How often a put re-creates its directory path after a concurrent delete
 * removed it.  Each retry needs a delete to empty the directory in the
 * few microseconds between our walk and our temp file, so 16 in a row is
 * not contention but something broken. */
#define DIR_RETRIES 16
/* Bytes of an object's name kept in its temp name: enough to recognise
 * it, and short enough that temp names stay far below NAME_MAX (255). */
#define DIR_TMP_BASE_MAX 64
#define DIR_TMP_NAME_MAX (DIR_TMP_BASE_MAX + 64)
#define DIR_MPU "#mpu"
#define DIR_MPU_ID_BYTES 16 /* 128 random bits, 32 hex digits */
#define DIR_MPU_PATH_MAX (sizeof(DIR_MPU) + 2 * DIR_MPU_ID_BYTES + 2)
#define DIR_MPU_STALE_NS (24ull * 3600 * NV_NS_PER_S)
#define DIR_PART_FMT "part-%05d"
#define DIR_PART_NAME_MAX 16
/* The file parts sent in order are written into (mpu.c). */
#define DIR_MPU_DATA "data"
/* iovec entries handed to one pwritev (IOV_MAX is 1024; a small stack
 * window is enough, pwritev is called again for the rest). */
#define DIR_IOV_BATCH 64
/* Bounce buffer of the read/write fallback of dir_copy_range(). */
#define DIR_COPY_BUF (256u * 1024)
/* Largest request to one copy_file_range/pwrite call (the kernel caps a
 * single transfer a little under 2 GiB anyway). */
#define DIR_IO_MAX (1u << 30)

/* Directories known durable (fsync'd parent entry), by path hash: at most
 * this many remembered; a full set starts over (it only costs fsyncs). */
#define DIR_SYNCED_MAX 3072

/* One opened directory store.  Immutable after dir_store_open() but for
 * the synced set, which synced_lock guards (held only around lookups and
 * inserts, never across I/O). */
/* The bounds of the space a put leaves free (files.c dir_reserve()). */
#define DIR_RESERVE_MIN (8ull << 20)
#define DIR_RESERVE_MAX (64ull << 20)

struct dir_segs; /* seg.c: chain slots in segment files */

struct dir_store {
	char *root;  /* owned; absolute, no trailing '/' (except "/") */
	int root_fd; /* owned; O_RDONLY|O_DIRECTORY */
	pthread_mutex_t synced_lock;
	pthread_rwlock_t prune_lock; /* a put's walk (shared) against a
				      * delete's prune (exclusive): files.c */
	struct u64map *synced; /* path hash -> (non-NULL marker); owned */
	struct dir_segs *segs; /* owned; NULL: no ROOT/#seg (its own lock) */
};

/* ROOT/#seg holds the segment files (seg.c); a chain's first segment is
 * DIR_SEG_FIRST bytes, each next one doubles up to the segment size
 * (DIR_SEG_SIZE unless dir_store_open_opts() says otherwise). */
#define DIR_SEG "#seg"
#define DIR_SEG_FIRST (1ull << 20)
#define DIR_SEG_SIZE (64ull << 20)

/* One multipart upload.  key, path and fd are immutable after
 * dir_mpu_create(); the rest is under lock (mpu.c "Parts in order"). */
struct dir_upload {
	char *key;                               /* owned: target key */
	char path[DIR_MPU_PATH_MAX];             /* "#mpu/<id>" under ROOT */
	int fd;                                  /* owned: that directory */
	pthread_mutex_t lock;
	int data;          /* lock: owned fd of DIR_MPU_DATA, or -1 */
	int nappended;     /* lock: parts 1..nappended are in data, in order */
	uint64_t *ends;    /* lock: owned; ends[i]: end of part i + 1 in data */
	int ends_cap;      /* lock */
	bool spilled;      /* lock: parts are files (DIR_PART_FMT) from now on */
};

/* ------------------------------------------------------------ files.c */

/* Log the failure of `what` on key (once, where it is first seen) and
 * return the store error for errno e. */
int dir_fail(const struct dir_store *d, const char *what, const char *key, int e);
/* Log that key's path collides with an object or directory; -EINVAL. */
int dir_conflict(const struct dir_store *d, const char *key);
/* e names something that cannot be an object of this store (not there,
 * a non-directory in the path, a symlink, a component too long). */
bool dir_missing(int e);
/* The next number of dir_tmp_seq, the process-wide sequence of temp
 * names and fallback upload ids (invariant 5). */
unsigned long dir_next_seq(void);
/* A unique temp name for an entry called base into buf (size bytes):
 * "<base>#tmp.<pid>.<seq>" (invariant 5). */
void dir_tmp_name(char *buf, size_t size, const char *base);
/* Write every segment of iov (borrowed) at off.  0 or -errno (raw). */
int dir_write_iov(int fd, const struct iovec *iov, int iovcnt, uint64_t off);
/* Copy len bytes from in at in_off to out at out_off (copy_file_range,
 * else a bounce buffer).  0, -EIO when in is short, -errno (raw). */
int dir_copy_range(int in, uint64_t in_off, int out, uint64_t out_off,
		   uint64_t len);

/* Writes an object's bytes into the temp file fd; 0 or a store error
 * (logged by the callee). */
typedef int (*dir_fill_fn)(void *ctx, int fd);

/* An owned fd of the directory key lives in, made and made durable on
 * the way (invariant 1); -ENOENT when a concurrent delete removed one of
 * them (walk again, invariant 3), or a store error (logged). */
int dir_open_parent(struct dir_store *d, const char *key);
/* 0 while the file system of fd keeps the reserve free, else -ENOSPC
 * (logged, rate-limited). */
int dir_headroom(const struct dir_store *d, int fd, const char *key);

/*
 * Publish key: a temp file beside it is filled by fill(ctx, fd),
 * fdatasync'd, closed, then link()ed (STORE_CREATE_ONCE) or rename()d
 * into place, and the directory fsync'd (invariant 1).  0 once durable;
 * -EEXIST, -EINVAL (path conflict), or a store error (logged).
 */
int dir_publish(struct dir_store *d, const char *key, unsigned flags,
		dir_fill_fn fill, void *ctx);

/* What dir_put_fill() writes: iov (borrowed) for key of d. */
struct dir_put_ctx {
	const struct dir_store *d;
	const char *key;
	const struct iovec *iov;
	int iovcnt;
};
/* A dir_fill_fn writing a struct dir_put_ctx's iovec. */
int dir_put_fill(void *arg, int fd);

/* 0 while the file system of fd keeps the reserve free after need more
 * bytes are taken, else -ENOSPC (logged).  files.c invariant 4. */
int dir_headroom_for(const struct dir_store *d, int fd, const char *key, uint64_t need);

/* --------------------------------------------------------------- seg.c */

/* Open ROOT/#seg (made when write) and rebuild the index from every
 * segment in it; with no #seg and !write, d->segs stays NULL.  0 or a
 * store error (logged); dir_segs_close() frees a half-built index. */
int dir_segs_open(struct dir_store *d, bool write, uint64_t seg_size);
void dir_segs_close(struct dir_store *d);
/* key is a chain slot key and slot puts go to segments. */
bool dir_seg_wants(const struct dir_store *d, const char *key);
/* The store ops for a slot key in segments; get and head answer -ENOENT
 * for a key the index does not hold (the caller then tries files), del
 * answers 0 for one. */
int dir_seg_put(struct dir_store *d, const char *key, const struct iovec *iov,
		int iovcnt, unsigned flags);
int dir_seg_get(struct dir_store *d, const char *key, uint64_t off, size_t len,
		void *dst, size_t *got);
int dir_seg_head(struct dir_store *d, const char *key, uint64_t *size);
int dir_seg_del(struct dir_store *d, const char *key);
/* Call fn(arg, key, size) for every durable segment key under prefix
 * and after after (NULL: all), in no order, with the index locked: fn
 * must not call into the store.  0 or fn's first non-zero result. */
int dir_seg_each(struct dir_store *d, const char *prefix, const char *after,
		 store_list_fn fn, void *arg);

/* -------------------------------------------------------------- ops.c */

/* Open key for reading: an owned fd (and *size), or -ENOENT / a store
 * error (logged).  Only regular files are objects. */
int dir_open_object(const struct dir_store *d, const char *key, uint64_t *size);

/* ----------------------------------------------------- list.c, mpu.c */

/* The store_backend_ops entries of list.c and mpu.c (store.h). */
int dir_list(void *be, const char *prefix, const char *start_after,
	     store_list_fn fn, void *arg);
int dir_mpu_create(void *be, const char *key, void **upload);
int dir_mpu_put_part(void *be, void *upload, int part_no,
		     const struct iovec *iov, int iovcnt);
int dir_mpu_copy_part(void *be, void *upload, int part_no,
		      const char *src_key, uint64_t off, uint64_t len);
int dir_mpu_complete(void *be, void *upload, unsigned flags);
void dir_mpu_abort(void *be, void *upload);
/* Remove upload directories idle for more than DIR_MPU_STALE_NS
 * (invariant 6); errors are logged and otherwise ignored. */
void dir_sweep_uploads(const struct dir_store *d);

#endif
