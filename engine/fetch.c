/*
 * fetch.c - see fetch.h.
 *
 * Files are named by a counter (keys may be long); a hash map
 * (src/base/u64map.h) from a 64-bit digest of the key to the first file
 * with that digest, colliding files chained behind it, finds a key's
 * file (find_locked()); a list holds them all for fetch_cache_clear().
 * fc->lock guards the table and the byte count; copying an object
 * happens outside it, into a temporary name renamed when done.
 */
#include "config.h"
#include "engine/fetch.h"
#include "engine/bundle.h"
#include "src/base/lockcheck.h"
#include "src/base/log.h"
#include "src/base/u64map.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_CHUNK (4u << 20)

struct fc_file {
	char *key;
	uint64_t hash; /* digest of key: the map's key */
	uint64_t id;
	uint64_t size;
	struct fc_file *next;  /* every file */
	struct fc_file *hnext; /* the next file of the same digest */
};

struct fetch_cache {
	struct store *store;
	char *dir;
	uint64_t budget;
	pthread_mutex_t lock;
	struct fc_file *files; /* lock */
	struct u64map *map;    /* lock: digest -> first struct fc_file */
	uint64_t bytes;        /* lock: cached and being copied */
	uint64_t next_id;      /* lock */
};

static void empty_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char p[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
}

int fetch_cache_new(struct store *st, const char *dir, uint64_t budget,
		    struct fetch_cache **out)
{
	struct fetch_cache *fc = calloc(1, sizeof(*fc));

	if (!fc)
		return -ENOMEM;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		int rc = -errno;

		nv_log(NV_ERR, NV_SUB_SETTLE, "scratch directory %s: %s", dir, strerror(errno));
		free(fc);
		return rc;
	}
	fc->dir = strdup(dir);
	if (!fc->dir) {
		free(fc);
		return -ENOMEM;
	}
	fc->map = u64map_new(0);
	if (!fc->map) {
		free(fc->dir);
		free(fc);
		return -ENOMEM;
	}
	empty_dir(dir);
	fc->store = st;
	fc->budget = budget;
	pthread_mutex_init(&fc->lock, NULL);
	*out = fc;
	return 0;
}

static uint64_t hash_of(const char *key)
{
	return u64map_fnv_str(U64MAP_FNV_SEED, key);
}

/* The cached file of key, or NULL.  Caller holds fc->lock. */
static struct fc_file *find_locked(struct fetch_cache *fc, const char *key)
{
	NV_ASSERT_LOCKED(&fc->lock);
	if (!fc->map)
		return NULL;
	for (struct fc_file *f = u64map_get(fc->map, hash_of(key)); f; f = f->hnext)
		if (!strcmp(f->key, key))
			return f;
	return NULL;
}

static void path_of(const struct fetch_cache *fc, uint64_t id, char *buf, size_t cap, bool tmp)
{
	snprintf(buf, cap, "%s/%llu%s", fc->dir, (unsigned long long)id, tmp ? ".part" : "");
}

int fetch_cache_size(struct fetch_cache *fc, const char *key, uint64_t *size)
{
	struct fc_file *f;

	pthread_mutex_lock(&fc->lock);
	f = find_locked(fc, key);
	if (f)
		*size = f->size;
	pthread_mutex_unlock(&fc->lock);
	return f ? 0 : store_head(fc->store, key, size);
}

/* Reserve n more bytes of the budget; false when they do not fit. */
static bool reserve(struct fetch_cache *fc, uint64_t n)
{
	bool ok;

	pthread_mutex_lock(&fc->lock);
	ok = fc->bytes + n <= fc->budget;
	if (ok)
		fc->bytes += n;
	pthread_mutex_unlock(&fc->lock);
	return ok;
}

static void unreserve(struct fetch_cache *fc, uint64_t n)
{
	pthread_mutex_lock(&fc->lock);
	fc->bytes -= n;
	pthread_mutex_unlock(&fc->lock);
}

/* Is the file a whole bundle?  Its trailer and footer window check out
 * (chunk CRCs are checked when settle decodes them). */
static int verify_file(int fd, uint64_t size)
{
	uint8_t tr[BUNDLE_TRAILER_SIZE], *win;
	uint64_t foff;
	uint32_t flen;
	struct bundle_footer f;
	int rc;

	if (size < BUNDLE_TRAILER_SIZE ||
	    pread(fd, tr, sizeof(tr), (off_t)(size - sizeof(tr))) != (ssize_t)sizeof(tr))
		return -EBADMSG;
	rc = bundle_trailer_parse(tr, sizeof(tr), size, &foff, &flen);
	if (rc)
		return rc;
	win = malloc(flen);
	if (!win)
		return -ENOMEM;
	rc = pread(fd, win, flen, (off_t)foff) == (ssize_t)flen ? 0 : -EBADMSG;
	if (!rc)
		rc = bundle_footer_open(win, flen, foff, &f);
	free(win);
	return rc;
}

/* One copy being written to the temporary file. */
struct warm {
	struct fetch_cache *fc;
	const char *key, *tmp;
	int fd;
	uint8_t *buf;   /* COPY_CHUNK bytes */
	uint64_t off;   /* bytes copied */
	uint64_t held;  /* budget reserved */
};

/*
 * Copy one copy of the object by ranged GETs of COPY_CHUNK until one
 * comes back short (or, at an exact multiple, -ERANGE): no HEAD first.
 * The budget is reserved a chunk ahead and trimmed to what arrived.
 * Then check it is a whole bundle: -EBADMSG sends a bucket set on to
 * the next zone's copy (store_read_copies).
 */
static int warm_copy(void *arg, struct store *copy)
{
	struct warm *w = arg;
	int rc;

	if (ftruncate(w->fd, 0))
		return -errno;
	unreserve(w->fc, w->held);
	w->held = w->off = 0;
	for (;;) {
		size_t got = 0;

		if (!reserve(w->fc, COPY_CHUNK))
			return -ENOBUFS;
		w->held += COPY_CHUNK;
		rc = store_get_range(copy, w->key, w->off, COPY_CHUNK, w->buf, &got);
		if (rc == -ERANGE && w->off > 0)
			rc = 0; /* the object ended at a chunk boundary */
		if (rc)
			return rc;
		unreserve(w->fc, COPY_CHUNK - got);
		w->held -= COPY_CHUNK - got;
		if (got) {
			static struct nv_ratelimit rl; /* a full disk fails every copy */
			ssize_t n = pwrite(w->fd, w->buf, got, (off_t)w->off);

			if (n != (ssize_t)got) {
				/* A short write is a full file system. */
				rc = n < 0 ? -errno : -ENOSPC;
				nv_log_ratelimited(&rl, NV_ERR, NV_SUB_SETTLE, "fetch cache %s: %s",
						   w->tmp, strerror(-rc));
				return rc;
			}
		}
		w->off += got;
		if (got < COPY_CHUNK)
			break;
	}
	return verify_file(w->fd, w->off);
}

int fetch_cache_warm(struct fetch_cache *fc, const char *key)
{
	char tmp[4096], fin[4096];
	struct warm w = { .fc = fc, .key = key, .tmp = tmp, .fd = -1 };
	uint64_t id;
	struct fc_file *f;
	int rc;

	if (fc->budget == 0)
		return -ENOBUFS; /* reads go to the store (star.c: a local store) */
	pthread_mutex_lock(&fc->lock);
	f = find_locked(fc, key);
	id = fc->next_id++;
	pthread_mutex_unlock(&fc->lock);
	if (f)
		return 0;

	path_of(fc, id, tmp, sizeof(tmp), true);
	path_of(fc, id, fin, sizeof(fin), false);
	w.buf = malloc(COPY_CHUNK);
	w.fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (w.fd < 0 && errno == ENOENT && mkdir(fc->dir, 0700) == 0) {
		/* The scratch directory was removed under us: make it again. */
		nv_log(NV_WARN, NV_SUB_SETTLE, "scratch directory %s vanished; recreated it",
		       fc->dir);
		w.fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	}
	if (!w.buf || w.fd < 0) {
		rc = w.buf ? -errno : -ENOMEM;
		goto fail;
	}
	rc = store_read_copies(fc->store, key, warm_copy, &w);
	if (rc)
		goto fail;
	close(w.fd);
	w.fd = -1;
	if (rename(tmp, fin)) {
		rc = -errno;
		goto fail;
	}
	free(w.buf);
	f = calloc(1, sizeof(*f));
	if (f)
		f->key = strdup(key);
	if (!f || !f->key) {
		free(f);
		unlink(fin);
		unreserve(fc, w.held);
		return -ENOMEM;
	}
	f->id = id;
	f->size = w.off;
	f->hash = hash_of(key);
	pthread_mutex_lock(&fc->lock);
	if (!fc->map)
		fc->map = u64map_new(0);
	f->hnext = fc->map ? u64map_get(fc->map, f->hash) : NULL;
	rc = fc->map ? u64map_put(fc->map, f->hash, f) : -ENOMEM;
	if (!rc) {
		f->next = fc->files;
		fc->files = f;
	}
	pthread_mutex_unlock(&fc->lock);
	if (rc) {
		unlink(fin);
		unreserve(fc, w.off);
		free(f->key);
		free(f);
	}
	return rc;
fail:
	if (w.fd >= 0)
		close(w.fd);
	unlink(tmp);
	free(w.buf);
	unreserve(fc, w.held);
	return rc;
}

int fetch_cache_read(struct fetch_cache *fc, const char *key, uint64_t off, size_t len,
		     void *dst)
{
	struct fc_file *f;
	uint64_t id = 0;
	char path[4096];
	size_t got;
	int fd, rc;

	pthread_mutex_lock(&fc->lock);
	f = find_locked(fc, key);
	if (f)
		id = f->id;
	pthread_mutex_unlock(&fc->lock);
	if (!f) {
		rc = store_get_range(fc->store, key, off, len, dst, &got);
		return rc ? rc : (got == len ? 0 : -EBADMSG);
	}
	path_of(fc, id, path, sizeof(path), false);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (uint8_t *)dst + got, len - got, (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EBADMSG;
			close(fd);
			return rc;
		}
		got += (size_t)n;
	}
	close(fd);
	return 0;
}

void fetch_cache_clear(struct fetch_cache *fc)
{
	struct fc_file *list;

	pthread_mutex_lock(&fc->lock);
	list = fc->files;
	fc->files = NULL;
	u64map_free(fc->map);
	fc->map = u64map_new(0); /* NULL (no memory): made again by the next warm */
	pthread_mutex_unlock(&fc->lock);
	while (list) {
		struct fc_file *n = list->next;
		char path[4096];

		path_of(fc, list->id, path, sizeof(path), false);
		unlink(path);
		pthread_mutex_lock(&fc->lock);
		fc->bytes -= list->size;
		pthread_mutex_unlock(&fc->lock);
		free(list->key);
		free(list);
		list = n;
	}
}

uint64_t fetch_cache_bytes(struct fetch_cache *fc)
{
	uint64_t b;

	pthread_mutex_lock(&fc->lock);
	b = fc->bytes;
	pthread_mutex_unlock(&fc->lock);
	return b;
}

void fetch_cache_free(struct fetch_cache *fc)
{
	if (!fc)
		return;
	fetch_cache_clear(fc);
	empty_dir(fc->dir);
	rmdir(fc->dir);
	pthread_mutex_destroy(&fc->lock);
	u64map_free(fc->map);
	free(fc->dir);
	free(fc);
}
