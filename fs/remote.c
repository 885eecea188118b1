/*
 * remote.c - see remote.h: the mount's side of NOT_OWNER.
 *
 * For: finding the holder (star_leader(), star_lead_check()) and calling
 * the cluster client, the errno translation of remote.h invariant 2, and
 * the holder's view of a stream led elsewhere (invariant 3).  Not for: HTTP
 * (api/client.c) or the redial rule (api/client.h invariants 1-2).
 *
 * Locking: none of its own; the client has its own pool lock.
 *
 * Invariants: those of remote.h.
 */
#include "config.h"
#include "fs/remote.h"
#include "api/client.h"
#include "engine/lease.h"
#include "fs/session.h"
#include "src/base/log.h"

#include <errno.h>
#include <string.h>

static struct nv_ratelimit rl_remote;

/* The client's error as the one a user meets (remote.h invariant 2). */
static int remote_errno(const struct nv_stream *s, const struct lease_holder *h,
			const char *what, int rc)
{
	switch (rc) {
	case 0:
	case -ENOENT:
	case -EFBIG:
	case -ENOSPC:
	case -EHOSTUNREACH:
	case -EAGAIN:
	case -ETIMEDOUT:
		break;
	case -STAR_ENOTOWNER:
		rc = -EAGAIN;
		break;
	default:
		rc = -EIO;
		break;
	}
	if (rc)
		nv_log_ratelimited(&rl_remote, NV_WARN, NV_SUB_FS, "%s of %s/%s at its leader %s "
				   "(%s, lease epoch %llu) failed: %s", what, s->bucket, s->name,
				   h->star, h->addr[0] ? h->addr : "no star API",
				   (unsigned long long)h->epoch, strerror(-rc));
	return rc;
}

/* The holder of s: 0 and *h, or the errno for the user. */
static int holder_of(struct nova_fs *fs, struct nv_stream *s, struct lease_holder *h,
		     const char *what)
{
	int rc = star_leader(fs->star, s, h);

	if (rc == -ENOENT)
		return -EAGAIN; /* vacant since the engine said NOT_OWNER: moving */
	if (rc)
		return rc;
	if (!fs->client) {
		nv_log_ratelimited(&rl_remote, NV_WARN, NV_SUB_FS, "%s of %s/%s: star %s leads it, "
				   "and this mount has no cluster_secret_file to reach it", what,
				   s->bucket, s->name, h->star);
		return -EHOSTUNREACH;
	}
	return 0;
}

int fs_remote_append(struct nova_fs *fs, struct nv_stream *s, const void *buf, size_t size)
{
	struct lease_holder h;
	int rc = holder_of(fs, s, &h, "append");

	if (rc)
		return rc;
	rc = api_client_append(fs->client, &h, s->bucket, s->name, buf, size, NULL);
	return remote_errno(s, &h, "append", rc);
}

int fs_remote_read(struct nova_fs *fs, struct nv_stream *s, uint64_t off, void *buf,
		   size_t size, size_t *done)
{
	struct lease_holder h;
	int rc = holder_of(fs, s, &h, "read");
	uint8_t *dst = buf;

	*done = 0;
	if (rc)
		return rc;
	while (*done < size) {
		size_t got = 0;

		rc = api_client_read(fs->client, &h, s->bucket, s->name, off + *done, dst + *done,
				     size - *done, &got);
		if (rc || got == 0)
			break;
		*done += got;
	}
	return remote_errno(s, &h, "read", rc);
}

/* Another star leads s and the client can ask it: 0 and *h. */
static int elsewhere(struct nova_fs *fs, struct nv_stream *s, struct lease_holder *h)
{
	if (!fs->client || !fs->star)
		return -ENOENT;
	return star_lead_check(fs->star, s, h) == -STAR_ENOTOWNER ? 0 : -ENOENT;
}

bool fs_remote_elsewhere(struct nova_fs *fs, struct nv_stream *s)
{
	struct lease_holder h;

	return elsewhere(fs, s, &h) == 0;
}

uint64_t fs_remote_size(struct nova_fs *fs, struct nv_stream *s, uint64_t local)
{
	struct lease_holder h;
	uint64_t seq, byte;
	int rc;

	if (elsewhere(fs, s, &h))
		return local;
	rc = api_client_end(fs->client, &h, s->bucket, s->name, &seq, &byte);
	if (rc) {
		(void)remote_errno(s, &h, "acked end", rc); /* logged; the local view stands */
		return local;
	}
	return byte > local ? byte : local;
}

int fs_remote_more(struct nova_fs *fs, struct nv_stream *s, uint64_t off, void *buf,
		   size_t size, size_t *done)
{
	struct lease_holder h;
	uint8_t *dst = buf;
	size_t got = 0;
	int rc = 0;

	if (elsewhere(fs, s, &h))
		return 0; /* ours, vacant, or nobody to ask: the local end is the end */
	while (got < size) {
		size_t n = 0;

		rc = api_client_read(fs->client, &h, s->bucket, s->name, off + got, dst + got,
				     size - got, &n);
		if (rc || n == 0)
			break;
		got += n;
	}
	*done += got;
	return remote_errno(s, &h, "read", rc);
}
