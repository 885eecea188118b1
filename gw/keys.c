/*
 * keys.c - see keys.h: the API key table.
 *
 * For: parsing the file into a flat array of (bucket, key digest) and
 * the constant-time check.  Not for: HTTP.
 *
 * Invariants: those of keys.h.
 */
#include "config.h"
#include "gw/keys.h"
#include "src/base/names.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BEARER "Bearer "
/* The largest file read (GW_KEYS_MAX lines of a bucket and a key). */
#define FILE_MAX ((size_t)GW_KEYS_MAX * (NV_BUCKET_NAME_MAX + GW_KEY_MAX + 2))

struct key_entry {
	char bucket[NV_BUCKET_NAME_MAX + 1]; /* "*": every bucket */
	unsigned char digest[SHA256_DIGEST_LENGTH];
};

struct gw_keys {
	struct key_entry *e;
	size_t n, cap;
};

static bool key_ok(const char *p, size_t n)
{
	if (n < GW_KEY_MIN || n > GW_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] <= ' ' || p[i] > '~')
			return false;
	return true;
}

/* One line [p, p+n) without its '\n' into k (a new entry unless it is
 * blank or a comment).  0 or -EINVAL and *why. */
static int parse_line(struct gw_keys *k, const char *p, size_t n, const char **why)
{
	const char *sp, *key;
	size_t bn, kn;
	struct key_entry *e;

	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
		n--;
	if (n == 0 || p[0] == '#')
		return 0;
	sp = memchr(p, ' ', n);
	if (!sp) {
		*why = "want \"BUCKET KEY\"";
		return -EINVAL;
	}
	bn = (size_t)(sp - p);
	key = sp + 1;
	kn = n - bn - 1;
	if (k->n >= GW_KEYS_MAX) {
		*why = "more than 4096 keys";
		return -EINVAL;
	}
	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 16;
		struct key_entry *ne = realloc(k->e, cap * sizeof(*ne));

		if (!ne) {
			*why = "out of memory";
			return -ENOMEM;
		}
		k->e = ne;
		k->cap = cap;
	}
	e = &k->e[k->n];
	if (bn == 0 || bn > NV_BUCKET_NAME_MAX || memchr(p, '\0', bn)) {
		*why = "bad bucket name";
		return -EINVAL;
	}
	memcpy(e->bucket, p, bn);
	e->bucket[bn] = '\0';
	if (strcmp(e->bucket, "*") && nv_bucket_name_check(e->bucket)) {
		*why = "bad bucket name";
		return -EINVAL;
	}
	if (!key_ok(key, kn)) {
		*why = "a key is 16 to 256 printable bytes without white space";
		return -EINVAL;
	}
	SHA256((const unsigned char *)key, kn, e->digest);
	k->n++;
	return 0;
}

int gw_keys_parse(const char *text, size_t len, struct gw_keys **out, const char **why,
		  unsigned *line)
{
	struct gw_keys *k = calloc(1, sizeof(*k));
	size_t at = 0;
	int rc = 0;

	*line = 0;
	if (!k) {
		*why = "out of memory";
		return -ENOMEM;
	}
	while (rc == 0 && at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;

		++*line;
		rc = parse_line(k, text + at, n, why);
		at += n + 1;
	}
	if (rc == 0 && k->n == 0) {
		*why = "the file holds no key";
		*line = 0;
		rc = -EINVAL;
	}
	if (rc) {
		gw_keys_free(k);
		return rc;
	}
	*out = k;
	return 0;
}

int gw_keys_load(const char *path, struct gw_keys **out, const char **why, unsigned *line)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat sb;
	char *buf;
	size_t n = 0;
	ssize_t r = 0;
	int rc;

	*line = 0;
	if (fd < 0) {
		*why = "cannot be opened";
		return -errno;
	}
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || (sb.st_mode & (S_IRWXG | S_IRWXO))) {
		*why = "must be a regular file neither group nor others can access (chmod 600)";
		close(fd);
		return -EPERM;
	}
	buf = malloc(FILE_MAX + 1);
	while (buf && n <= FILE_MAX && (r = read(fd, buf + n, FILE_MAX + 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	if (!buf || r < 0 || n > FILE_MAX) {
		*why = !buf ? "out of memory" : r < 0 ? "cannot be read" : "is too large";
		free(buf);
		return !buf ? -ENOMEM : r < 0 ? -EIO : -EFBIG;
	}
	rc = gw_keys_parse(buf, n, out, why, line);
	OPENSSL_cleanse(buf, n);
	free(buf);
	return rc;
}

void gw_keys_free(struct gw_keys *k)
{
	if (!k)
		return;
	if (k->e)
		OPENSSL_cleanse(k->e, k->cap * sizeof(*k->e));
	free(k->e);
	free(k);
}

size_t gw_keys_count(const struct gw_keys *k)
{
	return k->n;
}

int gw_keys_check(const struct gw_keys *k, const char *header, const char *bucket)
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	const char *cred;
	bool known = false, allowed = false;

	if (!header || strncmp(header, BEARER, strlen(BEARER)))
		return -EACCES;
	cred = header + strlen(BEARER);
	SHA256((const unsigned char *)cred, strnlen(cred, GW_KEY_MAX + 1), d);
	for (size_t i = 0; i < k->n; i++) { /* every entry, whatever matched */
		bool same = CRYPTO_memcmp(d, k->e[i].digest, sizeof(d)) == 0;
		bool here = !strcmp(k->e[i].bucket, "*") || !strcmp(k->e[i].bucket, bucket);

		known |= same;
		allowed |= same & here;
	}
	return allowed ? 0 : known ? -EPERM : -EACCES;
}
