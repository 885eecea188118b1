/*
 * datadir.c - see datadir.h.
 *
 * For: the lock and the star id of a data directory.  Not for: its other
 * files.
 *
 * Invariants: those of datadir.h; nothing here keeps state between calls.
 */
#include "config.h"
#include "engine/datadir.h"
#include "src/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p: every missing component of path, with mode. */
static int mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

int datadir_star_id(const char *dir, const char *given, char id[META_STAR_MAX + 1])
{
	char path[4096], tmp[4096], buf[64];
	ssize_t n;
	int fd, rc;

	if (given) {
		if (meta_star_check(given)) {
			nv_log(NV_ERR, NV_SUB_MAIN,
			       "star id '%s' is invalid: 1-32 of a-z, 0-9 and '-'", given);
			return -EINVAL;
		}
		snprintf(id, META_STAR_MAX + 1, "%s", given);
		return 0;
	}
	snprintf(path, sizeof(path), "%s/star-id", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			return -EIO;
		buf[n] = 0;
		buf[strcspn(buf, "\n")] = 0;
		if (meta_star_check(buf)) {
			nv_log(NV_ERR, NV_SUB_MAIN, "%s holds an invalid star id", path);
			return -EINVAL;
		}
		memcpy(id, buf, strlen(buf) + 1); /* <= META_STAR_MAX: checked */
		return 0;
	}
	if (errno != ENOENT)
		return -errno;
	{
		unsigned char rnd[4];
		int r = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

		if (r < 0 || read(r, rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd)) {
			if (r >= 0)
				close(r);
			return -EIO;
		}
		close(r);
		snprintf(id, META_STAR_MAX + 1, "s%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
			 rnd[3]);
	}
	snprintf(tmp, sizeof(tmp), "%s/star-id.tmp", dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%s\n", id);
	rc = (write(fd, buf, (size_t)n) == n && fsync(fd) == 0) ? 0 : -EIO;
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (!rc) {
		int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (d >= 0) {
			fsync(d);
			close(d);
		}
		nv_log(NV_INFO, NV_SUB_MAIN, "new star id %s (in %s)", id, path);
	}
	return rc;
}
int datadir_lock(const char *dir, int *lock_fd)
{
	char path[4096];
	int fd, rc = mkdir_p(dir, 0700);

	if (rc) {
		nv_log(NV_ERR, NV_SUB_MAIN, "data directory %s: %s", dir, strerror(-rc));
		return rc;
	}
	snprintf(path, sizeof(path), "%s/lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		nv_log(NV_ERR, NV_SUB_MAIN, "%s: %s", path, strerror(errno));
		return rc;
	}
	*lock_fd = fd;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		nv_log(NV_ERR, NV_SUB_MAIN, "%s is in use by another novafs (lock %s)", dir, path);
		return rc;
	}
	return 0;
}
