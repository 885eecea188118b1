/*
 * seg.c - chain slots in segment files: the directory store keeps the
 * objects of chain slot keys (chains/<class>/<star>/<epoch>/<16 hex>) as
 * records appended to preallocated segment files under ROOT/#seg/, one
 * flush per slot instead of a file, a link and two syncs (directory
 * backend; overview in internal.h, record format in segfmt.h).
 *
 * For: dir_segs_open() (the index rebuilt by scanning every segment),
 * dir_seg_put(), dir_seg_get(), dir_seg_head(), dir_seg_del(),
 * dir_seg_each() for listing, and dir_segs_close().  Not for: any other key (files.c publishes those),
 * nor the record bytes (segfmt.c).
 *
 * Layout: ROOT/#seg/NNNNNNNN.seg (8 hex digits, never reused).  Each
 * chain prefix (chains/<class>/<star>/<epoch>) has at most one active
 * segment, created by this process; records of one chain go to its
 * active segment, so a chain's segments die together when its slots are
 * deleted.  A chain's first segment is DIR_SEG_FIRST bytes and each next
 * one doubles, up to the segment size (64 MiB by default); a record
 * larger than that gets a segment of its own size.
 *
 * Invariants:
 *  1. A put returns 0 only after its record is written and an fdatasync
 *     of its segment that began after every byte of the segment up to the
 *     record's end was written has returned (group commit: concurrent
 *     puts to one segment share one fdatasync).  So no record that ever
 *     returned 0 lies behind a torn or missing one, and a scan, which
 *     stops at the first header that does not hold, finds every acked
 *     record after a crash (segfmt.h invariants 1-2).
 *  2. A new segment is fallocate()d, fsync'd and its directory fsync'd
 *     before its first record is written: no per-record link, rename or
 *     directory sync.
 *  3. A failed write leaves a hole: every later record of that segment
 *     fails (-EIO), and the segment takes no more records.  A failed
 *     fdatasync fails every record of the segment not yet durable.
 *  4. The index answers get, head and list only for durable records; a
 *     record being written is "pending": it reads as absent, and a
 *     create-once put of its key fails with -EEXIST.  A create-once put
 *     also fails when the key exists as a plain file (a store written
 *     before segments were turned on).
 *  5. Delete writes "DEAD" into the record's state field (no sync: a
 *     plain delete is not synced either) and drops it from the index; a
 *     segment whose records are all dead and that takes no more records
 *     is unlinked.  A segment found all dead at open is unlinked by the
 *     first write of this process.
 *  6. Only one process writes segments of a root: the first put or
 *     delete takes flock(LOCK_EX) on ROOT/#seg (else -EBUSY, logged).
 *     Readers (novactl on a mounted store) take no lock and see the
 *     segments as they were at open.  Opening never writes.
 *  7. Memory: one struct seg_ent (32 bytes, about 48 with malloc's
 *     header) plus one u64map slot (16 bytes at load <= 3/4) per indexed
 *     slot: about 72 bytes per slot, key text is never kept.  A listing
 *     holds the matching slot keys of the index while it runs.
 *
 * Locking: s->lock guards every field of struct dir_segs, seg_chain,
 * seg_file (but fd, id, cap: immutable) and seg_ent; s->cond is broadcast
 * when a sync ends or a write fails, s->wcond when a write ends.  No I/O
 * runs under the lock but a segment's creation (once per segment), the
 * 4-byte "DEAD" write of a delete, and unlink.  Lock order: s->lock only
 * (files.c's synced_lock is never taken with it).
 */
#include "config.h"
#include "engine/store/dir/internal.h"
#include "engine/store/dir/segfmt.h"
#include "src/base/crc32c.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEG_NAME_FMT "%08" PRIx32 ".seg"
#define SEG_NAME_MAX 16
#define NO_HOLE UINT64_MAX

/* A write in progress in a segment (lives on its put's stack). */
struct seg_res {
	uint64_t start;
	bool done;
	struct seg_res *next;
};

struct seg_file {
	uint32_t id;            /* immutable: the name */
	int fd;                 /* immutable; closed when freed */
	uint64_t cap;           /* immutable: file size */
	uint64_t end;           /* reserved (written or being written) end */
	uint64_t synced;        /* [0, synced) is durable (this process's writes) */
	uint64_t hole;          /* first record whose write failed, NO_HOLE */
	bool syncing, sync_failed;
	bool active;            /* the active segment of a chain: takes records */
	bool doomed;            /* found all dead at open (invariant 5) */
	bool unlinked;
	uint32_t nlive;         /* live and pending records */
	unsigned refs;          /* puts and gets using fd */
	struct seg_res *res;    /* writes in progress, by offset */
	struct seg_file *next;
};

/* One indexed slot (invariant 7). */
struct seg_ent {
	struct seg_file *f;
	uint64_t off; /* of the record header */
	uint64_t len; /* payload bytes */
	uint16_t klen;
	bool pending;
};

struct seg_chain {
	char *prefix;           /* "chains/<class>/<star>/<epoch>", owned */
	size_t plen;
	struct u64map *slots;   /* slot -> struct seg_ent * */
	struct seg_file *active;
	uint64_t next_cap;      /* size of its next segment */
	struct seg_chain *next;
};

struct dir_segs {
	int dfd;                /* ROOT/#seg */
	bool write;             /* slot puts go to segments */
	bool locked;            /* the writer flock is held */
	uint64_t seg_size;
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* a sync ended, or a write failed */
	pthread_cond_t wcond;   /* a write finished (its res done) */
	struct seg_chain *chains;
	struct seg_file *files;
	uint32_t next_id;
};

/* --------------------------------------------------------------- keys */

/* Is key a chain slot key?  *plen gets the length of its chain prefix,
 * *slot its slot.  Only the exact form chain_slot_key() writes:
 * chains/A/B/C/<16 lowercase hex>, no '~'. */
static bool split_key(const char *key, size_t *plen, uint64_t *slot)
{
	const char *last;
	int slashes = 0;
	uint64_t v = 0;

	if (strncmp(key, "chains/", 7) || strchr(key, '~'))
		return false;
	for (const char *p = key; *p; p++)
		slashes += *p == '/';
	last = strrchr(key, '/');
	if (slashes != 4 || strlen(last + 1) != 16)
		return false;
	for (const char *p = last + 1; *p; p++) {
		int dv = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;

		if (dv < 0)
			return false;
		v = v << 4 | (uint64_t)dv;
	}
	*plen = (size_t)(last - key);
	*slot = v;
	return true;
}

bool dir_seg_wants(const struct dir_store *d, const char *key)
{
	size_t plen;
	uint64_t slot;

	return d->segs && d->segs->write && split_key(key, &plen, &slot);
}

static struct seg_chain *chain_find(struct dir_segs *s, const char *key, size_t plen,
				    bool create)
{
	struct seg_chain *ch;

	for (ch = s->chains; ch; ch = ch->next)
		if (ch->plen == plen && !memcmp(ch->prefix, key, plen))
			return ch;
	if (!create || !(ch = calloc(1, sizeof(*ch))))
		return NULL;
	ch->prefix = strndup(key, plen);
	ch->slots = u64map_new(64);
	if (!ch->prefix || !ch->slots) {
		free(ch->prefix);
		u64map_free(ch->slots);
		free(ch);
		return NULL;
	}
	ch->plen = plen;
	ch->next_cap = DIR_SEG_FIRST < s->seg_size ? DIR_SEG_FIRST : s->seg_size;
	ch->next = s->chains;
	s->chains = ch;
	return ch;
}

/* The durable entry of key, or NULL. */
static struct seg_ent *lookup_locked(struct dir_segs *s, const char *key)
{
	struct seg_chain *ch;
	struct seg_ent *e;
	size_t plen;
	uint64_t slot;

	if (!split_key(key, &plen, &slot) || !(ch = chain_find(s, key, plen, false)))
		return NULL;
	e = u64map_get(ch->slots, slot);
	return e && !e->pending ? e : NULL;
}

/* ------------------------------------------------------------ files */

static void file_release_locked(struct dir_segs *s, struct seg_file *f)
{
	struct seg_file **pp;

	if (!f->unlinked || f->refs)
		return;
	for (pp = &s->files; *pp && *pp != f; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = f->next;
	close(f->fd);
	free(f);
}

static void file_unlink_locked(struct dir_store *d, struct seg_file *f)
{
	struct dir_segs *s = d->segs;
	char name[SEG_NAME_MAX];

	snprintf(name, sizeof(name), SEG_NAME_FMT, f->id);
	if (unlinkat(s->dfd, name, 0) < 0 && errno != ENOENT)
		nv_log(NV_WARN, NV_SUB_STORE, "dir:%s unlink #seg/%s: %s", d->root, name,
		       strerror(errno));
	f->unlinked = true;
	file_release_locked(s, f);
}

/* Delete e (already out of its chain's map; invariant 5). */
static void kill_locked(struct dir_store *d, struct seg_ent *e)
{
	struct seg_file *f = e->f;
	uint8_t dead[4] = { 'D', 'E', 'A', 'D' };

	if (pwrite(f->fd, dead, sizeof(dead), (off_t)(e->off + DIR_SEG_STATE_OFF)) != 4)
		nv_log(NV_WARN, NV_SUB_STORE, "dir:%s #seg/" SEG_NAME_FMT
		       ": marking a deleted record at %" PRIu64 ": %s", d->root, f->id, e->off,
		       strerror(errno));
	free(e);
	if (--f->nlive == 0 && !f->active)
		file_unlink_locked(d, f);
}

/* Take the writer lock (invariant 6) and unlink the doomed segments. */
static int writer_lock_locked(struct dir_store *d)
{
	struct dir_segs *s = d->segs;
	struct seg_file *f, *next;

	if (s->locked)
		return 0;
	if (flock(s->dfd, LOCK_EX | LOCK_NB) < 0) {
		nv_log(NV_ERR, NV_SUB_STORE, "dir:%s: another process writes its segments "
		       "(#seg is locked): %s", d->root, strerror(errno));
		return errno == EWOULDBLOCK ? -EBUSY : -EIO;
	}
	s->locked = true;
	for (f = s->files; f; f = next) {
		next = f->next;
		if (f->doomed && f->nlive == 0)
			file_unlink_locked(d, f);
	}
	return 0;
}

/* Preallocate cap bytes of the new segment fd: 0 or -errno. */
static int seg_allocate(int fd, uint64_t cap)
{
	int rc = NV_FP("dir.seg_falloc");

	if (rc)
		return rc;
	if (fallocate(fd, 0, 0, (off_t)cap) == 0)
		return 0;
	if (errno == EOPNOTSUPP && ftruncate(fd, (off_t)cap) == 0)
		return 0; /* no preallocation here: a sparse file still works */
	return -errno;
}

/* Create a segment of cap bytes, or of need bytes when the reserve does
 * not leave room for cap or the file system has no cap bytes left (a put
 * that may take the reserve, STORE_RESERVE, on a full disk): invariant 2.
 * 0 and *out, or a store error. */
static int file_create_locked(struct dir_store *d, uint64_t cap, uint64_t need,
			      unsigned flags, const char *key, struct seg_file **out)
{
	struct dir_segs *s = d->segs;
	char name[SEG_NAME_MAX];
	struct seg_file *f;
	int fd = -1, rc, tries = 0, e;

	do {
		snprintf(name, sizeof(name), SEG_NAME_FMT, s->next_id++);
		fd = openat(s->dfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	} while (fd < 0 && errno == EEXIST && ++tries < 16);
	if (fd < 0)
		return dir_fail(d, "create segment for", key, errno);
	rc = flags & STORE_RESERVE ? 0 : dir_headroom_for(d, fd, key, cap);
	if (rc && cap > need) {
		cap = need;
		rc = flags & STORE_RESERVE ? 0 : dir_headroom_for(d, fd, key, cap);
	}
	e = rc ? 0 : seg_allocate(fd, cap);
	if (e == -ENOSPC && cap > need && !ftruncate(fd, 0))
		e = seg_allocate(fd, cap = need); /* the truncate freed what it took */
	if (e)
		rc = dir_fail(d, "fallocate segment for", key, -e);
	if (!rc && (rc = NV_FP("dir.seg_create")) == 0 && (fsync(fd) < 0 || fsync(s->dfd) < 0))
		rc = dir_fail(d, "fsync new segment for", key, errno);
	if (rc || !(f = calloc(1, sizeof(*f)))) {
		rc = rc ? rc : -ENOMEM;
		close(fd);
		(void)unlinkat(s->dfd, name, 0);
		return rc;
	}
	f->id = s->next_id - 1;
	f->fd = fd;
	f->cap = cap;
	f->hole = NO_HOLE;
	f->next = s->files;
	s->files = f;
	*out = f;
	return 0;
}

/* The segment the next rsz-byte record of ch goes to, and its offset. */
static int reserve_locked(struct dir_store *d, struct seg_chain *ch, uint64_t rsz,
			  unsigned flags, const char *key, struct seg_file **fp, uint64_t *off)
{
	struct dir_segs *s = d->segs;
	struct seg_file *f = ch->active;
	int rc;

	if (f && (f->hole != NO_HOLE || f->sync_failed || rsz > f->cap - f->end)) {
		ch->active = NULL;
		f->active = false;
		if (f->nlive == 0)
			file_unlink_locked(d, f);
		f = NULL;
	}
	if (!f) {
		uint64_t cap = ch->next_cap > rsz ? ch->next_cap : rsz;

		rc = file_create_locked(d, cap, rsz, flags, key, &f);
		if (rc)
			return rc;
		if (ch->next_cap < s->seg_size)
			ch->next_cap = ch->next_cap * 2 < s->seg_size ? ch->next_cap * 2 : s->seg_size;
		f->active = true;
		ch->active = f;
	}
	*off = f->end;
	f->end += rsz;
	*fp = f;
	return 0;
}

/* --------------------------------------------------------------- put */

/* Bytes of f written without a gap: up to the first write in progress. */
static uint64_t written_locked(const struct seg_file *f)
{
	for (const struct seg_res *r = f->res; r; r = r->next)
		if (!r->done)
			return r->start;
	return f->end;
}

/* Wait until [start, end) of f is durable (invariants 1, 3): share a
 * sync that covers it, or run one.  0 or -EIO (logged). */
static int wait_durable_locked(struct dir_store *d, struct seg_file *f, uint64_t start,
			       uint64_t end, const char *key)
{
	struct dir_segs *s = d->segs;

	for (;;) {
		uint64_t upto = written_locked(f);
		int rc;

		if (f->hole < start) {
			nv_log(NV_ERR, NV_SUB_STORE, "dir:%s put %s: an earlier record of its "
			       "segment failed to write", d->root, key);
			return -EIO;
		}
		if (f->synced >= end)
			return 0;
		if (f->sync_failed)
			return -EIO;
		if (f->syncing || upto < end) { /* a sync runs; an earlier record is written */
			pthread_cond_wait(f->syncing ? &s->cond : &s->wcond, &s->lock);
			continue;
		}
		f->syncing = true;
		pthread_mutex_unlock(&s->lock);
		rc = NV_FP("dir.seg_sync");
		if (!rc && fdatasync(f->fd) < 0)
			rc = dir_fail(d, "fdatasync segment for", key, errno);
		pthread_mutex_lock(&s->lock);
		f->syncing = false;
		if (rc)
			f->sync_failed = true;
		else if (upto > f->synced)
			f->synced = upto;
		pthread_cond_broadcast(&s->cond);
	}
}

/* Write the record: header, key, payload, padding.  0 or a store error. */
static int write_record(struct dir_store *d, struct seg_file *f, uint64_t off,
			const uint8_t *hdr, const char *key, size_t klen,
			const struct iovec *iov, int iovcnt, uint64_t rsz)
{
	static const uint8_t zeros[8];
	struct iovec *v = malloc(((size_t)iovcnt + 3) * sizeof(*v));
	uint64_t len = store_iov_len(iov, iovcnt);
	int n = 0, rc;

	if (!v)
		return -ENOMEM;
	v[n++] = (struct iovec){ (void *)hdr, DIR_SEG_HDR };
	v[n++] = (struct iovec){ (void *)key, klen };
	for (int i = 0; i < iovcnt; i++)
		v[n++] = iov[i];
	v[n++] = (struct iovec){ (void *)zeros, (size_t)(rsz - DIR_SEG_HDR - klen - len) };
	rc = NV_FP("dir.seg_write");
	if (!rc) {
		rc = dir_write_iov(f->fd, v, n, off);
		if (rc < 0)
			rc = dir_fail(d, "write segment for", key, -rc);
	}
	free(v);
	return rc;
}

/* Unhook r from f's writes in progress. */
static void res_remove_locked(struct seg_file *f, struct seg_res *r)
{
	struct seg_res **pp;

	for (pp = &f->res; *pp && *pp != r; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = r->next;
}

/* The admission half of a put: index the pending entry e and reserve
 * its record.  *old gets the entry it replaces (plain put). */
static int put_begin_locked(struct dir_store *d, const char *key, size_t plen,
			    uint64_t slot, unsigned flags, struct seg_ent *e,
			    struct seg_res *res, struct seg_ent **old)
{
	struct seg_chain *ch;
	struct seg_res **tail;
	uint64_t rsz = dir_seg_rec_size(e->klen, e->len);
	int rc = writer_lock_locked(d);

	if (rc)
		return rc;
	if (!(ch = chain_find(d->segs, key, plen, true)))
		return -ENOMEM;
	*old = u64map_get(ch->slots, slot);
	if (*old && ((flags & STORE_CREATE_ONCE) || (*old)->pending))
		return (flags & STORE_CREATE_ONCE) ? -EEXIST : -EAGAIN;
	rc = reserve_locked(d, ch, rsz, flags, key, &e->f, &e->off);
	if (rc)
		return rc;
	if (u64map_put(ch->slots, slot, e)) {
		e->f->end -= rsz; /* nothing after it was reserved: still ours */
		return -ENOMEM;
	}
	res->start = e->off;
	for (tail = &e->f->res; *tail; tail = &(*tail)->next)
		;
	*tail = res;
	e->f->refs++;
	e->f->nlive++;
	return 0;
}

int dir_seg_put(struct dir_store *d, const char *key, const struct iovec *iov,
		int iovcnt, unsigned flags)
{
	struct dir_segs *s = d->segs;
	struct seg_ent *e, *old = NULL;
	struct seg_res res = { 0 };
	uint8_t hdr[DIR_SEG_HDR];
	size_t plen, klen = strlen(key);
	uint64_t slot, rsz;
	uint32_t crc;
	struct stat st;
	int rc;

	if (!split_key(key, &plen, &slot))
		return -EINVAL;
	if ((flags & STORE_CREATE_ONCE) &&
	    fstatat(d->root_fd, key, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return -EEXIST; /* a slot file of before (invariant 4) */
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->len = store_iov_len(iov, iovcnt);
	e->klen = (uint16_t)klen;
	e->pending = true;
	rsz = dir_seg_rec_size(klen, e->len);
	crc = dir_seg_encode_head(hdr, key, klen, e->len);
	for (int i = 0; i < iovcnt; i++)
		crc = nv_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	dir_seg_set_data_crc(hdr, crc);

	pthread_mutex_lock(&s->lock);
	rc = put_begin_locked(d, key, plen, slot, flags, e, &res, &old);
	if (rc) {
		pthread_mutex_unlock(&s->lock);
		free(e);
		return rc;
	}
	pthread_mutex_unlock(&s->lock);

	rc = write_record(d, e->f, e->off, hdr, key, klen, iov, iovcnt, rsz);

	pthread_mutex_lock(&s->lock);
	res.done = true;
	pthread_cond_broadcast(&s->wcond);
	if (rc && e->off < e->f->hole) {
		e->f->hole = e->off;
		pthread_cond_broadcast(&s->cond); /* every later record fails */
	}
	if (!rc)
		rc = wait_durable_locked(d, e->f, e->off, e->off + rsz, key);
	res_remove_locked(e->f, &res);
	e->f->refs--;
	if (rc) {
		struct seg_chain *ch = chain_find(s, key, plen, false);
		struct seg_file *f = e->f;

		if (old) {
			if (u64map_put(ch->slots, slot, old)) {
				/* replaces e in place: no growth, cannot fail */
			}
		} else
			u64map_remove(ch->slots, slot);
		free(e);
		if (--f->nlive == 0 && !f->active)
			file_unlink_locked(d, f);
	} else {
		e->pending = false;
		if (old)
			kill_locked(d, old);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ------------------------------------------------- get, head, delete */

int dir_seg_get(struct dir_store *d, const char *key, uint64_t off, size_t len,
		void *dst, size_t *got)
{
	struct dir_segs *s = d->segs;
	struct seg_file *f;
	struct seg_ent *e;
	uint64_t data_off, size;
	size_t want, done = 0;
	int rc = 0;

	if (!s)
		return -ENOENT;
	pthread_mutex_lock(&s->lock);
	e = lookup_locked(s, key);
	if (!e) {
		pthread_mutex_unlock(&s->lock);
		return -ENOENT;
	}
	f = e->f;
	f->refs++;
	data_off = e->off + DIR_SEG_HDR + e->klen;
	size = e->len;
	pthread_mutex_unlock(&s->lock);

	*got = 0;
	if (off > size) {
		rc = -ERANGE;
		goto out;
	}
	want = size - off < len ? (size_t)(size - off) : len;
	while (done < want) {
		ssize_t n = pread(f->fd, (char *)dst + done, want - done,
				  (off_t)(data_off + off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? dir_fail(d, "pread segment of", key, errno) : -EIO;
			goto out;
		}
		done += (size_t)n;
	}
	*got = done;
out:
	pthread_mutex_lock(&s->lock);
	f->refs--;
	file_release_locked(s, f);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int dir_seg_head(struct dir_store *d, const char *key, uint64_t *size)
{
	struct dir_segs *s = d->segs;
	struct seg_ent *e;

	if (!s)
		return -ENOENT;
	pthread_mutex_lock(&s->lock);
	e = lookup_locked(s, key);
	if (e)
		*size = e->len;
	pthread_mutex_unlock(&s->lock);
	return e ? 0 : -ENOENT;
}

int dir_seg_del(struct dir_store *d, const char *key)
{
	struct dir_segs *s = d->segs;
	struct seg_chain *ch;
	struct seg_ent *e;
	size_t plen;
	uint64_t slot;
	int rc = 0;

	if (!s || !split_key(key, &plen, &slot))
		return 0;
	pthread_mutex_lock(&s->lock);
	ch = chain_find(s, key, plen, false);
	e = ch ? u64map_get(ch->slots, slot) : NULL;
	rc = writer_lock_locked(d); /* also when e is gone: unlinks doomed segments */
	if (!rc && e && !e->pending) {
		u64map_remove(ch->slots, slot);
		kill_locked(d, e);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ------------------------------------------------------------ listing */

int dir_seg_each(struct dir_store *d, const char *prefix, const char *after,
		 store_list_fn fn, void *arg)
{
	struct dir_segs *s = d->segs;
	size_t pl = strlen(prefix);
	int rc = 0;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	for (struct seg_chain *ch = s->chains; ch && !rc; ch = ch->next) {
		size_t cursor = 0, n = pl < ch->plen ? pl : ch->plen;
		uint64_t slot;
		void *val;

		if (memcmp(prefix, ch->prefix, n))
			continue; /* no key of this chain has the prefix */
		while (!rc && u64map_next(ch->slots, &cursor, &slot, &val)) {
			const struct seg_ent *e = val;
			char key[STORE_KEY_MAX + 1];

			if (e->pending)
				continue;
			snprintf(key, sizeof(key), "%s/%016" PRIx64, ch->prefix, slot);
			if (strncmp(key, prefix, pl) || (after && strcmp(key, after) <= 0))
				continue;
			rc = fn(arg, key, e->len);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* -------------------------------------------------------- open, close */

struct scan_ctx {
	struct dir_store *d;
	struct seg_file *f;
};

static long scan_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct scan_ctx *c = ctx;
	ssize_t n;

	do
		n = pread(c->f->fd, buf, len, (off_t)off);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : (long)n;
}

/* Index one record found by the scan; of two records of one key the
 * later (higher segment, then offset) wins. */
static int scan_visit(void *arg, const struct dir_seg_rec *r)
{
	struct scan_ctx *c = arg;
	struct seg_chain *ch;
	struct seg_ent *e, *old;
	size_t plen;
	uint64_t slot;

	if (r->dead || !split_key(r->key, &plen, &slot))
		return 0;
	if (!(ch = chain_find(c->d->segs, r->key, plen, true)) || !(e = calloc(1, sizeof(*e))))
		return -ENOMEM;
	*e = (struct seg_ent){ .f = c->f, .off = r->off, .len = r->len, .klen = (uint16_t)r->klen };
	old = u64map_get(ch->slots, slot);
	if (old && (old->f->id > e->f->id || (old->f == e->f && old->off > e->off))) {
		free(e);
		return 0;
	}
	if (u64map_put(ch->slots, slot, e)) {
		free(e);
		return -ENOMEM;
	}
	if (old) {
		old->f->nlive--;
		free(old);
	}
	c->f->nlive++;
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The ids of the segment files in #seg, sorted.  0 or -errno. */
static int list_ids(struct dir_store *d, uint32_t **ids, size_t *n)
{
	int fd = fcntl(d->segs->dfd, F_DUPFD_CLOEXEC, 0);
	size_t cap = 0;
	struct dirent *de;
	DIR *dp;

	*ids = NULL;
	*n = 0;
	if (fd < 0 || !(dp = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return dir_fail(d, "read", DIR_SEG, errno);
	}
	while ((de = readdir(dp))) {
		unsigned x;
		char tail[8];

		if (strlen(de->d_name) != 12 || sscanf(de->d_name, "%8x%7s", &x, tail) != 2 ||
		    strcmp(tail, ".seg"))
			continue;
		if (*n == cap) {
			uint32_t *p = realloc(*ids, (cap = cap ? cap * 2 : 64) * sizeof(*p));

			if (!p) {
				closedir(dp);
				return -ENOMEM;
			}
			*ids = p;
		}
		(*ids)[(*n)++] = x;
	}
	closedir(dp);
	if (*n) /* qsort(NULL, 0, ...) is undefined: no segment yet */
		qsort(*ids, *n, sizeof(**ids), name_cmp);
	return 0;
}

/* Scan segment id into the index (invariant 6: read only). */
static int scan_file(struct dir_store *d, uint32_t id)
{
	struct dir_segs *s = d->segs;
	struct scan_ctx c = { d, NULL };
	char name[SEG_NAME_MAX];
	unsigned skipped = 0;
	struct stat st;
	uint64_t end = 0;
	int fd, rc;

	snprintf(name, sizeof(name), SEG_NAME_FMT, id);
	fd = openat(s->dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == EACCES || errno == EROFS))
		fd = openat(s->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : dir_fail(d, "open segment", name, errno);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0; /* not a segment of ours */
	}
	if (!(c.f = calloc(1, sizeof(*c.f)))) {
		close(fd);
		return -ENOMEM;
	}
	*c.f = (struct seg_file){ .id = id, .fd = fd, .cap = (uint64_t)st.st_size,
				  .hole = NO_HOLE, .next = s->files };
	s->files = c.f;
	if (id >= s->next_id)
		s->next_id = id + 1;
	rc = dir_seg_scan(scan_read, &c, c.f->cap, scan_visit, &c, &end, &skipped);
	c.f->end = c.f->synced = c.f->cap; /* never written by us */
	c.f->doomed = c.f->nlive == 0;
	if (rc)
		return rc == -ENOMEM ? rc : dir_fail(d, "scan segment", name, -rc);
	if (skipped)
		nv_log(NV_WARN, NV_SUB_STORE, "dir:%s #seg/%s: %u torn or corrupt record(s) "
		       "skipped (never acked, or damaged)", d->root, name, skipped);
	return 0;
}

int dir_segs_open(struct dir_store *d, bool write, uint64_t seg_size)
{
	struct dir_segs *s;
	uint32_t *ids = NULL;
	size_t n = 0;
	int dfd, rc;

	if (write) {
		/* Synced whether made now or found: a process that made it may
		 * have crashed before its sync. */
		if (mkdirat(d->root_fd, DIR_SEG, 0755) < 0 && errno != EEXIST)
			return dir_fail(d, "mkdir", DIR_SEG, errno);
		if (fsync(d->root_fd) < 0)
			return dir_fail(d, "fsync root for", DIR_SEG, errno);
	}
	dfd = openat(d->root_fd, DIR_SEG, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT && !write ? 0 : dir_fail(d, "open", DIR_SEG, errno);
	if (!(s = calloc(1, sizeof(*s)))) {
		close(dfd);
		return -ENOMEM;
	}
	s->dfd = dfd;
	s->write = write;
	s->seg_size = seg_size ? seg_size : DIR_SEG_SIZE;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_cond_init(&s->wcond, NULL);
	d->segs = s;
	rc = list_ids(d, &ids, &n);
	for (size_t i = 0; !rc && i < n; i++)
		rc = scan_file(d, ids[i]);
	free(ids);
	return rc; /* on failure dir_segs_close() frees what was built */
}

void dir_segs_close(struct dir_store *d)
{
	struct dir_segs *s = d->segs;

	if (!s)
		return;
	while (s->chains) {
		struct seg_chain *ch = s->chains;
		size_t cursor = 0;
		uint64_t slot;
		void *val;

		s->chains = ch->next;
		while (u64map_next(ch->slots, &cursor, &slot, &val))
			free(val);
		u64map_free(ch->slots);
		free(ch->prefix);
		free(ch);
	}
	while (s->files) {
		struct seg_file *f = s->files;

		s->files = f->next;
		close(f->fd);
		free(f);
	}
	close(s->dfd); /* drops the writer flock */
	pthread_cond_destroy(&s->cond);
	pthread_cond_destroy(&s->wcond);
	pthread_mutex_destroy(&s->lock);
	free(s);
	d->segs = NULL;
}
