/*
 * auth.c - see auth.h: the cluster secret and its constant-time check.
 *
 * For: reading the secret file with the permission rule of auth.h and
 * comparing "Authorization: Bearer <secret>".  Not for: TLS (a cluster
 * on an untrusted network puts the star API behind one; novafs(8)).
 *
 * Invariants: those of auth.h.  The secret's digest is computed once at
 * load; a check hashes only the presented credential.
 */
#include "config.h"
#include "api/auth.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BEARER "Bearer "

struct api_secret {
	char *text;                           /* NUL-terminated, never logged */
	unsigned char digest[SHA256_DIGEST_LENGTH];
};

/* The file's bytes into buf (cap - 1 at most, NUL-terminated). */
static int read_secret_file(int fd, char *buf, size_t cap, size_t *n, const char **why)
{
	struct stat sb;
	ssize_t r;

	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		*why = "cluster_secret_file is not a regular file";
		return -EINVAL;
	}
	if (sb.st_mode & (S_IRWXG | S_IRWXO)) {
		*why = "cluster_secret_file is accessible by group or others "
		       "(chmod 600 it, as for an ssh key)";
		return -EPERM;
	}
	*n = 0;
	while ((r = read(fd, buf + *n, cap - 1 - *n)) > 0)
		*n += (size_t)r;
	if (r < 0) {
		*why = "cluster_secret_file cannot be read";
		return -errno;
	}
	buf[*n] = '\0';
	return 0;
}

int api_secret_load(const char *path, struct api_secret **out, const char **why)
{
	struct api_secret *s;
	char *buf;
	size_t n = 0;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		*why = errno == ELOOP ? "cluster_secret_file is a symbolic link"
				      : "cluster_secret_file cannot be opened";
		return -errno;
	}
	buf = malloc(API_SECRET_MAX + 2);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	rc = read_secret_file(fd, buf, API_SECRET_MAX + 2, &n, why);
	close(fd);
	while (rc == 0 && n > 0 && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	if (rc == 0 && (n < API_SECRET_MIN || n > API_SECRET_MAX || strlen(buf) != n ||
			strpbrk(buf, "\r\n"))) {
		*why = "cluster_secret_file must hold one line of 16 to 4096 bytes";
		rc = -EINVAL;
	}
	s = rc ? NULL : calloc(1, sizeof(*s));
	if (!s) {
		OPENSSL_cleanse(buf, API_SECRET_MAX + 2);
		free(buf);
		return rc ? rc : -ENOMEM;
	}
	s->text = buf;
	SHA256((const unsigned char *)buf, n, s->digest);
	*out = s;
	return 0;
}

void api_secret_free(struct api_secret *s)
{
	if (!s)
		return;
	OPENSSL_cleanse(s->text, strlen(s->text));
	free(s->text);
	free(s);
}

const char *api_secret_text(const struct api_secret *s)
{
	return s->text;
}

bool api_auth_ok(const struct api_secret *s, const char *header)
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	const char *cred;

	if (!header || strncmp(header, BEARER, strlen(BEARER)))
		return false;
	cred = header + strlen(BEARER);
	SHA256((const unsigned char *)cred, strnlen(cred, API_SECRET_MAX + 1), d);
	return CRYPTO_memcmp(d, s->digest, sizeof(d)) == 0;
}
