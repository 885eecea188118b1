/*
 * list.c - store_list() over the directory tree, in byte order (directory
 * backend; overview and invariants in internal.h).
 *
 * For: dir_list(): a depth-first walk in which each directory's entries
 * are sorted with directory names compared as name + "/", so keys come
 * out in byte order without holding the whole tree (internal.h
 * invariant 4).
 * Chain slots kept in segments (seg.c) are merged into the walk's keys
 * in byte order (dir_seg_each(), sorted here).
 * Not for: anything that is no object: names holding '#' (temp files,
 * #mpu, #seg) and non-regular files are skipped.
 *
 * Invariants, here:
 *  1. Memory is the sorted names of the directories on the current path.
 *  2. No directory handle is open while fn runs.
 *  3. Only keys after start_after and under prefix reach fn; a directory
 *     that cannot hold such a key is not entered.
 *
 * Locking: a struct dir_lister belongs to one call; no shared state.
 */
#include "config.h"
#include "engine/store/dir/internal.h"
#include "src/base/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- list */

static int dir_walk(struct dir_store *d, const char *prefix, const char *start_after,
		    store_list_fn fn, void *arg);

struct dir_lister {
	const struct dir_store *d;
	const char *prefix; /* borrowed for the call; "" for all */
	size_t plen;
	const char *after;  /* borrowed; "" for none */
	store_list_fn fn;
	void *arg;
	/* The directory being listed ("a/b/", "" for ROOT) followed by the
	 * name at hand.  A key fits (<= STORE_KEY_MAX), and a directory is
	 * only entered when a key below it can fit, so +2 covers the '/' and
	 * NUL written before a candidate is judged. */
	char path[STORE_KEY_MAX + 2];
};

/* The kept names of one directory, NUL-separated in one allocation;
 * directory names carry their trailing '/'. */
struct dir_names {
	char *buf;
	size_t len, cap;
	size_t n;
};

static int names_add(struct dir_names *nm, const char *name, size_t n)
{
	if (nm->len + n + 1 > nm->cap) {
		size_t cap = nm->cap ? nm->cap : 4096;
		char *p;

		while (cap < nm->len + n + 1)
			cap *= 2;
		p = realloc(nm->buf, cap);
		if (!p)
			return -ENOMEM;
		nm->buf = p;
		nm->cap = cap;
	}
	memcpy(nm->buf + nm->len, name, n + 1);
	nm->len += n + 1;
	nm->n++;
	return 0;
}

static int names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * May path[0..len) -- a key, or with dir a directory prefix ending in '/'
 * -- give keys this listing wants?  A key must start with the prefix and
 * sort after start_after.  A directory must agree with the prefix as far
 * as both go, and not sort wholly before start_after: it is skipped only
 * when it differs from start_after at some byte and is smaller there.
 */
static bool list_wanted(const struct dir_lister *l, size_t len, bool dir)
{
	const char *c = l->path;

	if (dir)
		return memcmp(c, l->prefix, len < l->plen ? len : l->plen) == 0 &&
		       strncmp(c, l->after, len) >= 0;
	return len >= l->plen && memcmp(c, l->prefix, l->plen) == 0 &&
	       strcmp(c, l->after) > 0;
}

/* path holds a key: report it with its size, unless it vanished or is not
 * a file.  fn's result: 0 go on, > 0 stop, < 0 error. */
static int list_emit(struct dir_lister *l)
{
	struct stat st;

	if (fstatat(l->d->root_fd, l->path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (dir_missing(errno))
			return 0; /* deleted since we read its directory */
		return dir_fail(l->d, "stat", l->path, errno);
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	return l->fn(l->arg, l->path, (uint64_t)st.st_size);
}

/* Read directory path[0..dlen) and keep the wanted names in nm. */
static int list_read(struct dir_lister *l, size_t dlen, struct dir_names *nm)
{
	struct dirent *de;
	DIR *dp;
	int fd, rc = 0, e;

	l->path[dlen] = '\0';
	fd = openat(l->d->root_fd, dlen ? l->path : ".",
		    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		/* Gone (a delete emptied it) or never there: no keys. */
		return dir_missing(e) ? 0 : dir_fail(l->d, "open(dir)", l->path, e);
	}
	dp = fdopendir(fd);
	if (!dp) {
		e = errno;
		close(fd);
		return dir_fail(l->d, "fdopendir", l->path, e);
	}
	for (;;) {
		size_t n, len;
		bool dir;

		errno = 0;
		de = readdir(dp);
		if (!de) {
			if (errno) {
				l->path[dlen] = '\0';
				rc = dir_fail(l->d, "readdir", l->path, errno);
			}
			break;
		}
		/* ".", "..", temp files, "#mpu" and anything else that is no
		 * key component are not ours to list. */
		if (store_key_check(de->d_name) < 0)
			continue;
		n = strlen(de->d_name);
		if (de->d_type == DT_DIR) {
			dir = true;
		} else if (de->d_type == DT_REG) {
			dir = false;
		} else if (de->d_type == DT_UNKNOWN) {
			struct stat st;

			if (fstatat(dirfd(dp), de->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) < 0)
				continue; /* removed meanwhile */
			if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
				continue;
			dir = S_ISDIR(st.st_mode);
		} else {
			continue;
		}
		/* A key must fit; a directory must leave room for "/x". */
		if (dlen + n + (dir ? 2 : 0) > STORE_KEY_MAX)
			continue;
		memcpy(l->path + dlen, de->d_name, n);
		len = dlen + n;
		if (dir)
			l->path[len++] = '/';
		l->path[len] = '\0';
		if (!list_wanted(l, len, dir))
			continue;
		rc = names_add(nm, l->path + dlen, len - dlen);
		if (rc < 0)
			break;
	}
	closedir(dp);
	return rc;
}

/* List directory path[0..dlen) (which ends in '/', or is ROOT when dlen
 * is 0) and everything below it, in byte order.  0 when done, > 0 when fn
 * asked to stop, < 0 on error. */
static int list_level(struct dir_lister *l, size_t dlen)
{
	struct dir_names nm = { 0 };
	char **v = NULL;
	char *p;
	int rc;

	rc = list_read(l, dlen, &nm);
	if (rc < 0 || nm.n == 0)
		goto out;
	v = malloc(nm.n * sizeof(*v));
	if (!v) {
		rc = -ENOMEM;
		goto out;
	}
	p = nm.buf;
	for (size_t i = 0; i < nm.n; i++) {
		v[i] = p;
		p += strlen(p) + 1;
	}
	/* Directory names end in '/', so plain strcmp is key byte order. */
	qsort(v, nm.n, sizeof(*v), names_cmp);
	for (size_t i = 0; i < nm.n && rc == 0; i++) {
		size_t n = strlen(v[i]);

		memcpy(l->path + dlen, v[i], n + 1);
		if (v[i][n - 1] == '/')
			rc = list_level(l, dlen + n);
		else
			rc = list_emit(l);
	}
out:
	free(v);
	free(nm.buf);
	return rc;
}

/* The segment keys of a listing (seg.c), sorted. */
struct dir_seg_key {
	char *key;
	uint64_t size;
};
struct dir_seg_keys {
	struct dir_seg_key *v;
	size_t n, cap;
};

static int key_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dir_seg_key *)a)->key, ((const struct dir_seg_key *)b)->key);
}

static int keys_push(void *arg, const char *key, uint64_t size)
{
	struct dir_seg_keys *k = arg;

	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 64;
		struct dir_seg_key *p = realloc(k->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		k->v = p;
		k->cap = cap;
	}
	if (!(k->v[k->n].key = strdup(key)))
		return -ENOMEM;
	k->v[k->n++].size = size;
	return 0;
}

static void keys_free(struct dir_seg_keys *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i].key);
	free(k->v);
}

/* Keys of segments (seg.c) merged into the walk's, in byte order. */
struct dir_merge {
	struct dir_seg_keys k;
	size_t i;
	bool stopped; /* fn asked to stop, or failed */
	store_list_fn fn;
	void *arg;
};

/* Report the segment keys before key (and drop one equal to it: the
 * file stands for both). */
static int merge_upto(struct dir_merge *m, const char *key)
{
	while (m->i < m->k.n) {
		const struct dir_seg_key *sk = &m->k.v[m->i];
		int c = key ? strcmp(sk->key, key) : -1;
		int rc;

		if (c > 0)
			return 0;
		m->i++;
		if (c == 0)
			return 0;
		rc = m->fn(m->arg, sk->key, sk->size);
		if (rc)
			return rc;
	}
	return 0;
}

static int merge_fn(void *arg, const char *key, uint64_t size)
{
	struct dir_merge *m = arg;
	int rc = merge_upto(m, key);

	if (!rc)
		rc = m->fn(m->arg, key, size);
	m->stopped = rc != 0;
	return rc;
}

int dir_list(void *be, const char *prefix, const char *start_after,
	     store_list_fn fn, void *arg)
{
	struct dir_merge m = { .fn = fn, .arg = arg };
	int rc = dir_seg_each(be, prefix, start_after, keys_push, &m.k);

	if (rc < 0) {
		keys_free(&m.k);
		return rc;
	}
	if (m.k.n == 0) {
		keys_free(&m.k);
		return dir_walk(be, prefix, start_after, fn, arg);
	}
	qsort(m.k.v, m.k.n, sizeof(*m.k.v), key_cmp);
	rc = dir_walk(be, prefix, start_after, merge_fn, &m);
	if (rc == 0 && !m.stopped)
		rc = merge_upto(&m, NULL);
	keys_free(&m.k);
	return rc > 0 ? 0 : rc;
}

/* The walk of the directory tree (invariants 1-3). */
static int dir_walk(struct dir_store *d, const char *prefix, const char *start_after,
		    store_list_fn fn, void *arg)
{
	struct dir_lister l = {
		.d = d, .prefix = prefix, .plen = strlen(prefix),
		.after = start_after, .fn = fn, .arg = arg,
	};
	const char *slash = strrchr(prefix, '/');
	size_t dlen = slash ? (size_t)(slash - prefix) + 1 : 0;
	int rc;

	/* Start in the deepest directory the prefix names whole ("a/b/" of
	 * "a/b/c"): nothing above it can match.  If that path is no valid
	 * key path ("a//", "./"), no key can have the prefix. */
	if (dlen > 0) {
		memcpy(l.path, prefix, dlen - 1);
		l.path[dlen - 1] = '\0';
		if (store_key_check(l.path) < 0)
			return 0;
		l.path[dlen - 1] = '/';
	}
	rc = list_level(&l, dlen);
	return rc > 0 ? 0 : rc;
}
