/*
 * test_store_seg.c - unit tests of the directory store's segment files
 * for chain slots (engine/store/dir/seg.c, segfmt.c), through store.h.
 *
 * Not for: the file half of the directory store (test_store_dir.c).
 *
 * Every case runs in its own mkdtemp() root with small segments (so
 * records rotate through several files).  The crash case forks writers
 * that are killed with SIGKILL at random points (after a random number
 * of acknowledgements, with three more writers mid-put); the corruption cases
 * truncate, zero and flip bytes of closed segments.  In every case an
 * acknowledged slot must come back whole, and nothing torn or flipped
 * may come back at all.  Threads never call cmocka asserts.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "engine/store/dir.h"
#include "engine/store/dir/segfmt.h"
#include "engine/store/store.h"
#include "src/base/crc32c.h"
#include "src/base/failpoint.h"

#define SEG_BYTES (256u * 1024)
#define MAXLEN 40000u

struct fx {
	char root[64];
	struct store *s;
};

static int rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int open_seg(const char *root, bool write, struct store **out)
{
	struct dir_store_opts o = { .slot_segments = write, .segment_bytes = SEG_BYTES };

	return dir_store_open_opts(root, &o, out);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->root, sizeof(f->root), "/tmp/novafs-seg-XXXXXX");
	if (!mkdtemp(f->root) || open_seg(f->root, true, &f->s) < 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	store_close(f->s);
	nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static void reopen(struct fx *f, bool write)
{
	store_close(f->s);
	f->s = NULL;
	assert_int_equal(open_seg(f->root, write, &f->s), 0);
}

static char *slot_key(char *buf, size_t cap, uint64_t slot)
{
	snprintf(buf, cap, "chains/standard/t1/0000000000000002/%016" PRIx64, slot);
	return buf;
}

/* The payload of slot i: its length and bytes follow from i alone. */
static size_t payload(uint64_t i, uint8_t *out)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull + 1;
	size_t len = 1 + (size_t)((x >> 17) % MAXLEN);

	for (size_t k = 0; k < len; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		out[k] = (uint8_t)x;
	}
	return len;
}

static int put_slot(struct store *s, uint64_t i)
{
	static __thread uint8_t buf[MAXLEN];
	char key[STORE_KEY_MAX];
	struct iovec v = { buf, payload(i, buf) };

	return store_put(s, slot_key(key, sizeof(key), i), &v, 1, STORE_CREATE_ONCE);
}

/* 1 when slot i reads back exactly, 0 when absent, -1 when it reads
 * back different (the failure every case looks for). */
static int check_slot(struct store *s, uint64_t i)
{
	static uint8_t want[MAXLEN], got[MAXLEN + 16];
	char key[STORE_KEY_MAX];
	size_t len = payload(i, want), n = 0;
	uint64_t size;
	int rc = store_get_range(s, slot_key(key, sizeof(key), i), 0, sizeof(got), got, &n);

	if (rc == -ENOENT)
		return store_head(s, key, &size) == -ENOENT ? 0 : -1;
	if (rc || n != len || memcmp(want, got, len) || store_head(s, key, &size) || size != len)
		return -1;
	return 1;
}

static int count_segments(const char *root)
{
	char path[96];
	struct dirent *de;
	DIR *dp;
	int n = 0;

	snprintf(path, sizeof(path), "%s/#seg", root);
	dp = opendir(path);
	if (!dp)
		return -1;
	while ((de = readdir(dp)))
		n += strstr(de->d_name, ".seg") != NULL;
	closedir(dp);
	return n;
}

/* The path of the n-th (sorted) segment file into buf, and its size. */
static off_t segment_path(const char *root, int nth, char *buf, size_t cap)
{
	char dir[96], names[64][NAME_MAX + 1];
	struct dirent *de;
	struct stat st;
	int n = 0;
	DIR *dp;

	snprintf(dir, sizeof(dir), "%s/#seg", root);
	dp = opendir(dir);
	assert_non_null(dp);
	while ((de = readdir(dp)) && n < 64)
		if (strstr(de->d_name, ".seg"))
			snprintf(names[n++], sizeof(names[0]), "%s", de->d_name);
	closedir(dp);
	qsort(names, (size_t)n, sizeof(names[0]), (int (*)(const void *, const void *))strcmp);
	assert_true(nth < n);
	snprintf(buf, cap, "%s/%s", dir, names[nth < 0 ? n + nth : nth]);
	assert_int_equal(stat(buf, &st), 0);
	return st.st_size;
}

struct lister {
	char keys[256][STORE_KEY_MAX];
	int n;
};

static int collect(void *arg, const char *key, uint64_t size)
{
	struct lister *l = arg;

	(void)size;
	if (l->n < 256)
		snprintf(l->keys[l->n++], STORE_KEY_MAX, "%s", key);
	return 0;
}

/* ---------------------------------------------------------------- cases */

static void test_store_seg_round_trip(void **state)
{
	struct fx *f = *state;
	struct lister l = { .n = 0 };
	struct iovec v = { "plain", 5 };
	char key[STORE_KEY_MAX];
	uint64_t size;

	for (uint64_t i = 0; i < 40; i++)
		assert_int_equal(put_slot(f->s, i), 0);
	for (uint64_t i = 0; i < 40; i++)
		assert_int_equal(check_slot(f->s, i), 1);
	/* Create-once: the fence of recovery depends on it. */
	assert_int_equal(put_slot(f->s, 7), -EEXIST);
	assert_int_equal(check_slot(f->s, 7), 1);
	/* Not a slot key: a plain file. */
	assert_int_equal(store_put(f->s, "chains/standard/t1/x", &v, 1, 0), 0);
	assert_int_equal(store_put(f->s, "streams/b/s/1", &v, 1, 0), 0);
	assert_true(count_segments(f->root) >= 2); /* 40 x ~20 KiB in 256 KiB files */
	/* One listing, in byte order, of both halves. */
	assert_int_equal(store_list(f->s, "chains/standard/t1/", NULL, collect, &l), 0);
	assert_int_equal(l.n, 41);
	for (int i = 1; i < l.n; i++)
		assert_true(strcmp(l.keys[i - 1], l.keys[i]) < 0);
	assert_string_equal(l.keys[0], slot_key(key, sizeof(key), 0));
	assert_string_equal(l.keys[40], "chains/standard/t1/x");
	l.n = 0;
	assert_int_equal(store_list(f->s, "chains/", slot_key(key, sizeof(key), 37), collect,
				    &l), 0);
	assert_int_equal(l.n, 3); /* slots 38, 39 and x */
	/* Ranged reads and head. */
	{
		uint8_t want[MAXLEN], got[8];
		size_t n, len = payload(3, want);

		assert_int_equal(store_get_range(f->s, slot_key(key, sizeof(key), 3), 1, 4, got,
						 &n), 0);
		assert_int_equal(n, len > 5 ? 4 : len - 1);
		assert_memory_equal(got, want + 1, n);
		assert_int_equal(store_get_range(f->s, key, len + 1, 4, got, &n), -ERANGE);
		assert_int_equal(store_head(f->s, key, &size), 0);
		assert_int_equal(size, len);
	}
	assert_int_equal(store_head(f->s, slot_key(key, sizeof(key), 99), &size), -ENOENT);
}

static void test_store_seg_reopen_rebuilds(void **state)
{
	struct fx *f = *state;
	char key[STORE_KEY_MAX];
	const char *k[1] = { key };

	for (uint64_t i = 0; i < 30; i++)
		assert_int_equal(put_slot(f->s, i), 0);
	slot_key(key, sizeof(key), 5);
	assert_int_equal(store_delete(f->s, k, 1), 0);
	/* A reader (segments off) finds them as a writer does. */
	reopen(f, false);
	for (uint64_t i = 0; i < 30; i++)
		assert_int_equal(check_slot(f->s, i), i == 5 ? 0 : 1);
	reopen(f, true);
	for (uint64_t i = 0; i < 30; i++)
		assert_int_equal(check_slot(f->s, i), i == 5 ? 0 : 1);
	/* Create-once still holds across the reopen, also with segments off. */
	assert_int_equal(put_slot(f->s, 3), -EEXIST);
	assert_int_equal(put_slot(f->s, 5), 0);
	reopen(f, false);
	assert_int_equal(put_slot(f->s, 4), -EEXIST);
	assert_int_equal(check_slot(f->s, 5), 1);
}

static void test_store_seg_delete_removes_segments(void **state)
{
	struct fx *f = *state;
	char keys[60][STORE_KEY_MAX];
	const char *k[60];

	for (uint64_t i = 0; i < 60; i++) {
		assert_int_equal(put_slot(f->s, i), 0);
		k[i] = slot_key(keys[i], sizeof(keys[i]), i);
	}
	assert_true(count_segments(f->root) >= 4);
	assert_int_equal(store_delete(f->s, k, 60), 0);
	/* All dead: only the active segment of the chain stays. */
	assert_int_equal(count_segments(f->root), 1);
	for (uint64_t i = 0; i < 60; i++)
		assert_int_equal(check_slot(f->s, i), 0);
	/* The next process removes it at its first write. */
	reopen(f, true);
	assert_int_equal(count_segments(f->root), 1);
	assert_int_equal(store_delete(f->s, k, 1), 0);
	assert_int_equal(count_segments(f->root), 0);
}

/* Segments cut short, or zeroed from a point: a torn tail. */
static void test_store_seg_torn_tail(void **state)
{
	struct fx *f = *state;
	char path[128];
	unsigned seed = (unsigned)time(NULL);

	for (uint64_t i = 0; i < 30; i++)
		assert_int_equal(put_slot(f->s, i), 0);
	store_close(f->s);
	f->s = NULL;
	for (int round = 0; round < 20; round++) {
		off_t size = segment_path(f->root, -1, path, sizeof(path));
		int fd = open(path, O_RDWR);
		off_t cut = (off_t)(rand_r(&seed) % (unsigned)size);
		static uint8_t zeros[MAXLEN];
		int present = 0;

		assert_true(fd >= 0);
		if (round % 2)
			assert_int_equal(ftruncate(fd, cut), 0);
		else
			assert_int_equal(pwrite(fd, zeros, sizeof(zeros), cut), (ssize_t)sizeof(zeros));
		close(fd);
		assert_int_equal(open_seg(f->root, false, &f->s), 0);
		for (uint64_t i = 0; i < 30; i++) {
			int r = check_slot(f->s, i);

			assert_int_not_equal(r, -1);
			present += r;
		}
		assert_true(present >= 1); /* the first segment was not touched */
		store_close(f->s);
		f->s = NULL;
	}
	assert_int_equal(open_seg(f->root, true, &f->s), 0);
}

/* Flipped bytes anywhere: what comes back is exact, never damaged. */
static void test_store_seg_flipped_bytes(void **state)
{
	struct fx *f = *state;
	unsigned seed = (unsigned)time(NULL) ^ 0x5eed;
	char path[128];

	for (uint64_t i = 0; i < 24; i++)
		assert_int_equal(put_slot(f->s, i), 0);
	store_close(f->s);
	f->s = NULL;
	for (int round = 0; round < 40; round++) {
		int nth = (int)(rand_r(&seed) % 2u);
		off_t size = segment_path(f->root, nth, path, sizeof(path));
		int fd = open(path, O_RDWR);
		off_t at = (off_t)(rand_r(&seed) % (unsigned)size);
		uint8_t b;

		assert_true(fd >= 0);
		assert_int_equal(pread(fd, &b, 1, at), 1);
		b ^= (uint8_t)(1u << (rand_r(&seed) % 8));
		assert_int_equal(pwrite(fd, &b, 1, at), 1);
		close(fd);
		assert_int_equal(open_seg(f->root, false, &f->s), 0);
		for (uint64_t i = 0; i < 24; i++)
			assert_int_not_equal(check_slot(f->s, i), -1);
		store_close(f->s);
		f->s = NULL;
	}
	assert_int_equal(open_seg(f->root, true, &f->s), 0);
}

/* ------------------------------------------------------- kill -9 crash */

struct writer_arg {
	struct store *s;
	int fd;                 /* pipe: acked slot numbers */
	uint64_t first, stride; /* this thread's slots */
};

static void *crash_writer(void *p)
{
	struct writer_arg *a = p;

	for (uint64_t i = a->first;; i += a->stride) {
		if (put_slot(a->s, i))
			_exit(3);
		if (write(a->fd, &i, sizeof(i)) != sizeof(i))
			_exit(4);
	}
	return NULL;
}

/* A child writing slots from 4 threads, killed at a random point; every
 * slot it reported acked must be back whole, and nothing else damaged. */
static void test_store_seg_kill9(void **state)
{
	struct fx *f = *state;
	unsigned seed = (unsigned)time(NULL) ^ 0x9;
	uint64_t base = 0;

	store_close(f->s);
	f->s = NULL;
	for (int round = 0; round < 8; round++) {
		int pfd[2], status;
		static uint64_t acked[1 << 16];
		uint64_t slot;
		size_t nacked = 0;
		pid_t pid;
		/* Killed right after this many acks reached us: the other
		 * writers are then somewhere in their puts. */
		size_t kill_after = 1 + rand_r(&seed) % 300u;

		assert_int_equal(pipe(pfd), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct store *s;
			struct writer_arg a[4];
			pthread_t t[4];

			close(pfd[0]);
			if (open_seg(f->root, true, &s))
				_exit(2);
			for (int i = 0; i < 4; i++) {
				a[i] = (struct writer_arg){ s, pfd[1], base + (uint64_t)i, 4 };
				pthread_create(&t[i], NULL, crash_writer, &a[i]);
			}
			pause();
			_exit(0);
		}
		close(pfd[1]);
		while (nacked < kill_after && read(pfd[0], &slot, sizeof(slot)) == sizeof(slot))
			acked[nacked++] = slot;
		assert_int_equal(nacked, kill_after); /* else the child died on its own */
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status));
		while (nacked < (1 << 16) && read(pfd[0], &slot, sizeof(slot)) == sizeof(slot))
			acked[nacked++] = slot;
		close(pfd[0]);
		assert_int_equal(open_seg(f->root, false, &f->s), 0);
		print_message("round %d: killed after ack %zu, %zu slots acked\n", round,
			      kill_after, nacked);
		for (size_t i = 0; i < nacked; i++)
			assert_int_equal(check_slot(f->s, acked[i]), 1);
		for (uint64_t i = base; i < base + nacked + 64; i++)
			assert_int_not_equal(check_slot(f->s, i), -1);
		store_close(f->s);
		f->s = NULL;
		base += 1 << 20; /* every round writes slots of its own */
	}
	assert_int_equal(open_seg(f->root, true, &f->s), 0);
}

/* ----------------------------------------------- races, faults, owners */

struct race_arg {
	struct store *s;
	uint64_t slot;
	int rc;
};

static void *race_put(void *p)
{
	struct race_arg *a = p;

	a->rc = put_slot(a->s, a->slot);
	return NULL;
}

/* Concurrent puts: distinct keys all land (sharing syncs), one key
 * lands once. */
static void test_store_seg_concurrent_puts(void **state)
{
	struct fx *f = *state;
	struct race_arg a[16];
	pthread_t t[16];
	int won = 0;

	for (int i = 0; i < 16; i++) {
		a[i] = (struct race_arg){ f->s, (uint64_t)(i < 8 ? i : 100), 1 };
		assert_int_equal(pthread_create(&t[i], NULL, race_put, &a[i]), 0);
	}
	for (int i = 0; i < 16; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 8; i++)
		assert_int_equal(a[i].rc, 0);
	for (int i = 8; i < 16; i++) {
		assert_true(a[i].rc == 0 || a[i].rc == -EEXIST);
		won += a[i].rc == 0;
	}
	assert_int_equal(won, 1);
	reopen(f, false);
	for (uint64_t i = 0; i < 8; i++)
		assert_int_equal(check_slot(f->s, i), 1);
	assert_int_equal(check_slot(f->s, 100), 1);
}

/* A failed write or sync fails that put; the next one goes to a fresh
 * segment and lands. */
static void test_store_seg_write_failure(void **state)
{
	struct fx *f = *state;

	assert_int_equal(put_slot(f->s, 0), 0);
	assert_int_equal(nv_fp_arm("dir.seg_write=error"), 0);
	assert_int_equal(put_slot(f->s, 1), -EIO);
	nv_fp_reset();
	assert_int_equal(check_slot(f->s, 1), 0);
	assert_int_equal(put_slot(f->s, 2), 0);
	assert_int_equal(nv_fp_arm("dir.seg_sync=error"), 0);
	assert_int_equal(put_slot(f->s, 3), -EIO);
	nv_fp_reset();
	assert_int_equal(put_slot(f->s, 4), 0);
	assert_int_equal(nv_fp_arm("dir.seg_create=error"), 0);
	reopen(f, true); /* the next put needs a new segment */
	assert_int_equal(put_slot(f->s, 5), -EIO);
	nv_fp_reset();
	assert_int_equal(put_slot(f->s, 5), 0);
	reopen(f, false);
	assert_int_equal(check_slot(f->s, 0), 1);
	assert_int_equal(check_slot(f->s, 1), 0);
	assert_int_equal(check_slot(f->s, 2), 1);
	assert_int_equal(check_slot(f->s, 4), 1);
	assert_int_equal(check_slot(f->s, 5), 1);
}

/* A second writer of the same root is refused; a reader is not. */
static void test_store_seg_one_writer(void **state)
{
	struct fx *f = *state;
	struct store *other, *reader;

	assert_int_equal(put_slot(f->s, 0), 0);
	assert_int_equal(open_seg(f->root, true, &other), 0);
	assert_int_equal(open_seg(f->root, false, &reader), 0);
	assert_int_equal(put_slot(other, 1), -EBUSY);
	assert_int_equal(check_slot(reader, 0), 1);
	store_close(other);
	store_close(reader);
}

/* A slot kept as a file (a store from before segments) still reads, and
 * blocks a create-once put of its key. */
static void test_store_seg_file_slots(void **state)
{
	struct fx *f = *state;
	struct store *plain;
	uint8_t buf[MAXLEN];
	char key[STORE_KEY_MAX];
	struct iovec v = { buf, payload(9, buf) };

	assert_int_equal(dir_store_open(f->root, &plain), 0);
	assert_int_equal(store_put(plain, slot_key(key, sizeof(key), 9), &v, 1,
				   STORE_CREATE_ONCE), 0);
	store_close(plain);
	assert_int_equal(check_slot(f->s, 9), 1);
	assert_int_equal(put_slot(f->s, 9), -EEXIST);
	assert_int_equal(count_segments(f->root), 0);
}

/* A chain's next segment does not fit on a full disk (fallocate fails
 * with ENOSPC) while the record itself would: the put gets a segment of
 * the record's size (a put with STORE_RESERVE, as recovery's settlement
 * on a full disk makes, must not fail on the segment's preallocation). */
static void test_store_seg_full_disk_smaller_segment(void **state)
{
	struct fx *f = *state;
	char path[128];

	assert_int_equal(nv_fp_arm("dir.seg_falloc=error:28@1-1"), 0);
	assert_int_equal(put_slot(f->s, 5), 0);
	nv_fp_reset();
	assert_int_equal(check_slot(f->s, 5), 1);
	assert_true(segment_path(f->root, 0, path, sizeof(path)) < (off_t)SEG_BYTES / 4);
	assert_int_equal(put_slot(f->s, 6), 0);
	reopen(f, true);
	assert_int_equal(check_slot(f->s, 5), 1);
	assert_int_equal(check_slot(f->s, 6), 1);
	/* Not a full disk: the error stands. */
	assert_int_equal(nv_fp_arm("dir.seg_falloc=error"), 0);
	assert_int_not_equal(put_slot(f->s, 900), 0);
	nv_fp_reset();
}

/* ------------------------------------------------- scanning dead records */

struct img {
	uint8_t *b;
	uint64_t size;
	uint64_t lo, hi;  /* a range no read may touch */
	int touched;      /* reads that did */
	uint64_t read;    /* bytes read */
};

static long img_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	struct img *m = ctx;
	size_t n = off >= m->size ? 0 : (size_t)(m->size - off < len ? m->size - off : len);

	if (n && off < m->hi && off + n > m->lo)
		m->touched++;
	memcpy(buf, m->b + off, n);
	m->read += n;
	return (long)n;
}

/* Append a record of key and len bytes of payload(seed) at *off. */
static void img_put(struct img *m, uint64_t *off, const char *key, uint64_t seed, bool dead)
{
	static uint8_t data[MAXLEN];
	size_t klen = strlen(key), len = payload(seed, data);
	uint8_t *h = m->b + *off;
	uint32_t crc = dir_seg_encode_head(h, key, klen, len);

	memcpy(h + DIR_SEG_HDR, key, klen);
	memcpy(h + DIR_SEG_HDR + klen, data, len);
	dir_seg_set_data_crc(h, nv_crc32c(crc, data, len));
	if (dead)
		memcpy(h + DIR_SEG_STATE_OFF, "DEAD", 4);
	*off += dir_seg_rec_size(klen, len);
}

struct seen {
	int live, dead;
};

static int count_rec(void *arg, const struct dir_seg_rec *r)
{
	struct seen *s = arg;

	if (r->dead)
		s->dead++;
	else
		s->live++;
	return 0;
}

/* A scan reports a dead record from its header alone: its payload is
 * never read (so opening a store costs its live bytes), and the records
 * after it are still found. */
static void test_store_seg_scan_skips_dead_payloads(void **state)
{
	struct img m = { .size = 4 * MAXLEN };
	char key[STORE_KEY_MAX];
	struct seen seen = { 0, 0 };
	uint64_t off = 0, end = 0;
	unsigned skipped = 9;

	(void)state;
	assert_non_null(m.b = calloc(1, m.size));
	img_put(&m, &off, slot_key(key, sizeof(key), 1), 1, false);
	m.lo = off + DIR_SEG_HDR + strlen(key);
	img_put(&m, &off, slot_key(key, sizeof(key), 2), 2, true);
	m.hi = off;
	img_put(&m, &off, slot_key(key, sizeof(key), 3), 3, false);
	/* Damage the dead payload: a scan that read it would skip it as torn. */
	m.b[m.lo] ^= 0xff;
	assert_int_equal(dir_seg_scan(img_read, &m, m.size, count_rec, &seen, &end, &skipped), 0);
	assert_int_equal(seen.live, 2);
	assert_int_equal(seen.dead, 1);
	assert_int_equal(skipped, 0);
	assert_int_equal(end, off);
	assert_int_equal(m.touched, 0);
	free(m.b);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_store_seg_round_trip),
		T(test_store_seg_reopen_rebuilds),
		T(test_store_seg_delete_removes_segments),
		T(test_store_seg_torn_tail),
		T(test_store_seg_flipped_bytes),
		T(test_store_seg_kill9),
		T(test_store_seg_concurrent_puts),
		T(test_store_seg_write_failure),
		T(test_store_seg_one_writer),
		T(test_store_seg_file_slots),
		T(test_store_seg_scan_skips_dead_payloads),
		T(test_store_seg_full_disk_smaller_segment),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
