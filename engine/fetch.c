/*
 * fetch.c - see fetch.h.
 *
 * Files are named by a counter (keys may be long); a small table maps
 * keys to files.  fc->lock guards the table and the byte count; copying
 * an object happens outside it, into a temporary name renamed when done.
 */
#include "config.h"
#include "engine/fetch.h"
#include "src/base/log.h"

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
	uint64_t id;
	uint64_t size;
	struct fc_file *next;
};

struct fetch_cache {
	struct store *store;
	char *dir;
	uint64_t budget;
	pthread_mutex_t lock;
	struct fc_file *files; /* lock */
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
	empty_dir(dir);
	fc->store = st;
	fc->budget = budget;
	pthread_mutex_init(&fc->lock, NULL);
	*out = fc;
	return 0;
}

static struct fc_file *find_locked(struct fetch_cache *fc, const char *key)
{
	for (struct fc_file *f = fc->files; f; f = f->next)
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

/*
 * Copy the object by ranged GETs of COPY_CHUNK until one comes back
 * short (or, at an exact multiple, -ERANGE): no HEAD first.  The budget
 * is reserved a chunk ahead and trimmed to what arrived.
 */
int fetch_cache_warm(struct fetch_cache *fc, const char *key)
{
	char tmp[4096], fin[4096];
	uint64_t id, off = 0, held = 0;
	uint8_t *buf = NULL;
	struct fc_file *f;
	int fd = -1, rc;

	pthread_mutex_lock(&fc->lock);
	f = find_locked(fc, key);
	id = fc->next_id++;
	pthread_mutex_unlock(&fc->lock);
	if (f)
		return 0;

	path_of(fc, id, tmp, sizeof(tmp), true);
	path_of(fc, id, fin, sizeof(fin), false);
	buf = malloc(COPY_CHUNK);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT && mkdir(fc->dir, 0700) == 0) {
		/* The scratch directory was removed under us: make it again. */
		nv_log(NV_WARN, NV_SUB_SETTLE, "scratch directory %s vanished; recreated it",
		       fc->dir);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	}
	if (!buf || fd < 0) {
		rc = buf ? -errno : -ENOMEM;
		goto fail;
	}
	for (;;) {
		size_t got = 0;

		if (!reserve(fc, COPY_CHUNK)) {
			rc = -ENOBUFS;
			goto fail;
		}
		held += COPY_CHUNK;
		rc = store_get_range(fc->store, key, off, COPY_CHUNK, buf, &got);
		if (rc == -ERANGE && off > 0)
			rc = 0; /* the object ended at a chunk boundary */
		if (rc)
			goto fail;
		unreserve(fc, COPY_CHUNK - got);
		held -= COPY_CHUNK - got;
		if (got && pwrite(fd, buf, got, (off_t)off) != (ssize_t)got) {
			rc = errno ? -errno : -EIO;
			nv_log(NV_ERR, NV_SUB_SETTLE, "fetch cache %s: %s", tmp, strerror(-rc));
			goto fail;
		}
		off += got;
		if (got < COPY_CHUNK)
			break;
	}
	close(fd);
	fd = -1;
	if (rename(tmp, fin)) {
		rc = -errno;
		goto fail;
	}
	free(buf);
	f = calloc(1, sizeof(*f));
	if (f)
		f->key = strdup(key);
	if (!f || !f->key) {
		free(f);
		unlink(fin);
		unreserve(fc, held);
		return -ENOMEM;
	}
	f->id = id;
	f->size = off;
	pthread_mutex_lock(&fc->lock);
	f->next = fc->files;
	fc->files = f;
	pthread_mutex_unlock(&fc->lock);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(buf);
	unreserve(fc, held);
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
	free(fc->dir);
	free(fc);
}
