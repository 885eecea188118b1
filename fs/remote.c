/*
 * remote.c - see remote.h: the mount's side of NOT_OWNER.
 *
 * For: finding the holder (star_leader(), star_lead_check()) and calling
 * the cluster client, the errno translation of remote.h invariant 2, the
 * holder's view of a stream led elsewhere (invariant 3), an unlink
 * at the holder (invariant 4), a rename over a stream at its holder
 * (invariant 8) and a trim at the holder (invariant 7).  Not for: HTTP
 * (api/client.c) or the redial rule (api/client.h invariants 1-2).
 *
 * Every call names s by its id too (api/client.h invariant 5), so the
 * holder never serves it from another stream under s's name.  One call,
 * as each function below makes it:
 *
 *   call(s->name, s->id) --ok / other error--> done
 *        --ESTALE (not s under that name) / ENOENT--> fs_remote_name_now():
 *              deleted (its row): marked here, -ENOENT (one log line)
 *              renamed (or ESTALE): call(name now, s->id), once --> done
 *              ENOENT and not renamed: -ENOENT
 *
 * Locking: none of its own; the client has its own pool lock.
 *
 * Invariants: those of remote.h.
 */
#include "config.h"
#include "fs/remote.h"
#include "api/client.h"
#include "engine/lease.h"
#include "engine/star.h"
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
	case -ESTALE: /* moved again after the one call under its name now */
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

int fs_remote_name_now(struct star *st, struct nv_stream *s, const char *by,
		       const char *asked, int rc, char *buf, size_t size)
{
	int now;

	if (rc != -ESTALE && rc != -ENOENT)
		return rc;
	now = st ? star_stream_name(st, s, buf, size) : -EOPNOTSUPP;
	if (now == -ENOENT) /* deleted: marked here (followers end), logged once */
		return star_stream_gone(st, s, by);
	if (now) {
		nv_log(NV_DEBUG, NV_SUB_FS, "stream %s/%s (%llu): its leader %s has it under "
		       "another name or none, and the metastore cannot say which: %s", s->bucket,
		       asked, (unsigned long long)s->id, by, strerror(-now));
		return rc == -ESTALE ? -EAGAIN : rc;
	}
	if (rc == -ENOENT && !strcmp(buf, asked))
		return rc; /* not renamed: the holder's ENOENT stands */
	nv_log(NV_DEBUG, NV_SUB_FS, "stream %s/%s (%llu) is %s/%s now: asking its leader %s again",
	       s->bucket, asked, (unsigned long long)s->id, s->bucket, buf, by);
	return 0;
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
	char now[NV_STREAM_NAME_MAX + 1];
	int rc = holder_of(fs, s, &h, "append");

	if (rc)
		return rc;
	rc = api_client_append(fs->client, &h, s->bucket, s->name, s->id, buf, size, NULL);
	/* ESTALE, ENOENT: nothing appended there, so sending it again (to
	 * the stream of s->id alone) is safe. */
	if (rc == -ESTALE || rc == -ENOENT) {
		rc = fs_remote_name_now(fs->star, s, h.star, s->name, rc, now, sizeof(now));
		if (rc == -ENOENT)
			return rc; /* deleted, or no such stream there: logged */
		if (rc == 0)
			rc = api_client_append(fs->client, &h, s->bucket, now, s->id, buf, size,
					       NULL);
	}
	return remote_errno(s, &h, "append", rc);
}

int fs_remote_read(struct nova_fs *fs, struct nv_stream *s, uint64_t off, void *buf,
		   size_t size, size_t *done)
{
	struct lease_holder h;
	char now[NV_STREAM_NAME_MAX + 1];
	const char *nm = s->name;
	int rc = holder_of(fs, s, &h, "read");
	uint8_t *dst = buf;

	*done = 0;
	if (rc)
		return rc;
	while (*done < size) {
		size_t got = 0;

		rc = api_client_read(fs->client, &h, s->bucket, nm, s->id, off + *done, dst + *done,
				     size - *done, &got);
		if ((rc == -ESTALE || rc == -ENOENT) && nm == s->name) {
			rc = fs_remote_name_now(fs->star, s, h.star, s->name, rc, now, sizeof(now));
			if (rc == 0) {
				nm = now; /* once: nm is s->name no more */
				continue;
			}
		}
		if (rc || got == 0)
			break;
		*done += got;
	}
	return remote_errno(s, &h, "read", rc);
}

/* The holder h of s cannot be asked to `what` s (nothing was sent: it
 * cannot be reached, serves no star API, or this mount has no cluster
 * client): -EHOSTUNREACH, nothing done here either, for as long as its
 * lease stands (remote.h invariant 4); one log line. */
static int unreachable(const struct nv_stream *s, const struct lease_holder *h,
		       const char *what)
{
	nv_log_ratelimited(&rl_remote, NV_WARN, NV_SUB_FS, "%s of %s/%s: its leader %s (%s, "
			   "lease epoch %llu) cannot be asked: refused (EHOSTUNREACH), nothing "
			   "changed; it is done here once that lease has gone", what, s->bucket,
			   s->name, h->star, h->addr[0] ? h->addr : "no star API",
			   (unsigned long long)h->epoch);
	return -EHOSTUNREACH;
}

/* Another star leads s and the client can ask it: 0 and *h.  Vacant:
 * -ENOENT, after this star's view was raised to the refs' end when
 * refresh (remote.h invariant 5; never in a read: star_view_refresh()'s
 * hook invalidates the page a read in flight holds locked). */
static int elsewhere(struct nova_fs *fs, struct nv_stream *s, struct lease_holder *h,
		     bool refresh)
{
	int rc;

	if (!fs->client || !fs->star)
		return -ENOENT;
	rc = star_lead_check(fs->star, s, h);
	if (rc == -ENOENT && refresh) /* failed: the view stands */
		(void)star_view_refresh(fs->star, s, STAR_VIEW_READ);
	return rc == -STAR_ENOTOWNER ? 0 : -ENOENT;
}

bool fs_remote_elsewhere(struct nova_fs *fs, struct nv_stream *s)
{
	struct lease_holder h;

	return elsewhere(fs, s, &h, false) == 0;
}

/* For the calls that change s (unlink, trim, a rename over it): 0 and
 * *h when another live star leads s (ask it), -ENOENT when s is ours or
 * vacant or the metastore cannot say (here), -EHOSTUNREACH when another
 * star leads s and this mount has no cluster client to ask it (nothing
 * done: remote.h invariant 4, logged). */
static int changer(struct nova_fs *fs, struct nv_stream *s, struct lease_holder *h,
		   const char *what)
{
	if (!fs->star || star_lead_check(fs->star, s, h) != -STAR_ENOTOWNER)
		return -ENOENT;
	if (fs->client)
		return 0;
	return unreachable(s, h, what);
}

int fs_remote_unlink(struct nova_fs *fs, struct nv_stream *s)
{
	struct lease_holder h;
	char now[NV_STREAM_NAME_MAX + 1];
	int rc;

	rc = changer(fs, s, &h, "unlink");
	if (rc == -ENOENT)
		return star_stream_delete(fs->star, s); /* ours or vacant */
	if (rc)
		return rc;
	rc = api_client_delete(fs->client, &h, s->bucket, s->name, s->id);
	if (rc == -ESTALE || rc == -ENOENT) {
		rc = fs_remote_name_now(fs->star, s, h.star, s->name, rc, now, sizeof(now));
		if (rc == 0)
			rc = api_client_delete(fs->client, &h, s->bucket, now, s->id);
	}
	if (rc == 0 || rc == -ENOENT) {
		(void)star_stream_gone(fs->star, s, h.star); /* -ENOENT: marked here */
		return rc;
	}
	return rc == -EHOSTUNREACH ? unreachable(s, &h, "unlink") : remote_errno(s, &h, "unlink", rc);
}

/* A trim of s here: star_stream_trim_seq() or star_stream_trim_bytes(). */
static int trim_here(struct nova_fs *fs, struct nv_stream *s, bool by_seq, uint64_t pos,
		     uint64_t *old_byte)
{
	return by_seq ? star_stream_trim_seq(fs->star, s, pos, old_byte)
		      : star_stream_trim_bytes(fs->star, s, pos, old_byte);
}

int fs_remote_trim(struct nova_fs *fs, struct nv_stream *s, bool by_seq, uint64_t pos,
		   uint64_t *old_byte)
{
	uint64_t was = atomic_load(&s->trim_byte), seq = 0, byte = 0;
	struct lease_holder h;
	char now[NV_STREAM_NAME_MAX + 1];
	int rc;

	rc = changer(fs, s, &h, "trim");
	if (rc == -ENOENT)
		return trim_here(fs, s, by_seq, pos, old_byte); /* ours or vacant */
	if (rc)
		return rc;
	rc = api_client_trim(fs->client, &h, s->bucket, s->name, s->id, by_seq, pos, &seq, &byte);
	if (rc == -ESTALE || rc == -ENOENT) {
		rc = fs_remote_name_now(fs->star, s, h.star, s->name, rc, now, sizeof(now));
		if (rc == 0)
			rc = api_client_trim(fs->client, &h, s->bucket, now, s->id, by_seq, pos,
					     &seq, &byte);
	}
	if (rc == 0) {
		(void)star_view_trim(fs->star, s, seq, byte); /* getfattr here says it at once */
		if (old_byte)
			*old_byte = was;
		return 0;
	}
	if (rc == -EINVAL)
		return rc; /* never backwards, or past the end: as a trim here */
	return rc == -EHOSTUNREACH ? unreachable(s, &h, "trim") : remote_errno(s, &h, "trim", rc);
}

/* The rename of bucket/from over dst (the stream under `to`), which
 * another star leads (h): done there, in one transaction under its lease
 * (invariant 8).  0 (renamed; dst is marked deleted here too), -ESTALE
 * (`to` is not dst there any more, or dst's lease moved: nothing
 * changed, look again), or the errno for the user (nothing renamed:
 * -ENOENT no stream `from`, -EHOSTUNREACH h cannot be asked, logged). */
static int rename_at(struct nova_fs *fs, struct nv_stream *dst, const struct lease_holder *h,
		     const char *from, const char *to)
{
	int rc = api_client_rename(fs->client, h, dst->bucket, to, dst->id, from);

	if (rc == 0) {
		(void)star_stream_gone(fs->star, dst, h->star); /* marked here too */
		nv_log(NV_INFO, NV_SUB_FS, "rename of %s/%s over %s done by its leader %s: %s "
		       "(%llu) deleted", dst->bucket, from, to, h->star, to,
		       (unsigned long long)dst->id);
		return 0;
	}
	if (rc == -ESTALE || rc == -ENOENT)
		return rc;
	return rc == -EHOSTUNREACH ? unreachable(dst, h, "rename over")
				   : remote_errno(dst, h, "rename over", rc);
}

/* One try of a rename over whatever is under `to` now: here when it is
 * ours, vacant or absent, at its leader otherwise.  0, -ESTALE (what was
 * under `to`, or its lease, changed as the rename committed: nothing
 * changed), or the errno for the user. */
static int rename_try(struct nova_fs *fs, const char *bucket, const char *from, const char *to)
{
	struct nv_stream *dst;
	struct lease_holder h;
	int rc = star_stream_lookup(fs->star, bucket, to, &dst);

	if (rc == -ENOENT) /* nothing to replace (or a name the rename refuses) */
		return star_stream_rename(fs->star, bucket, from, to, false, NULL);
	if (rc)
		return rc; /* the metastore cannot say: nothing renamed */
	rc = changer(fs, dst, &h, "rename over");
	if (rc == -ENOENT) { /* ours or vacant: replaced here, under that lease */
		rc = star_stream_rename(fs->star, bucket, from, to, false, dst);
		if (rc == -STAR_ENOTOWNER)
			rc = -ESTALE; /* taken by another star meanwhile: look again */
	} else if (rc == 0) {
		rc = rename_at(fs, dst, &h, from, to);
	}
	stream_put(dst);
	return rc;
}

int fs_remote_rename(struct nova_fs *fs, const char *bucket, const char *from, const char *to,
		     bool noreplace)
{
	int rc;

	if (noreplace || !strcmp(from, to))
		return star_stream_rename(fs->star, bucket, from, to, noreplace, NULL);
	rc = rename_try(fs, bucket, from, to);
	if (rc == -ESTALE) /* once more, on what is there now */
		rc = rename_try(fs, bucket, from, to);
	if (rc == -ESTALE) {
		nv_log_ratelimited(&rl_remote, NV_WARN, NV_SUB_FS, "rename of %s/%s over %s: "
				   "the stream under %s, or its lease, moved twice as it was "
				   "renamed: refused (EAGAIN), nothing changed", bucket, from, to,
				   to);
		rc = -EAGAIN;
	}
	return rc;
}

uint64_t fs_remote_size(struct nova_fs *fs, struct nv_stream *s, uint64_t local)
{
	struct lease_holder h;
	struct api_bounds b;
	char cur[NV_STREAM_NAME_MAX + 1];
	int rc;

	if (elsewhere(fs, s, &h, true)) {
		uint64_t now = stream_acked_byte(s); /* vacant: maybe raised from refs */

		return now > local ? now : local;
	}
	rc = api_client_bounds(fs->client, &h, s->bucket, s->name, s->id, &b);
	if (rc == -ESTALE || rc == -ENOENT) {
		rc = fs_remote_name_now(fs->star, s, h.star, s->name, rc, cur, sizeof(cur));
		if (rc == 0)
			rc = api_client_bounds(fs->client, &h, s->bucket, cur, s->id, &b);
	}
	if (rc) {
		(void)remote_errno(s, &h, "acked end", rc); /* logged; the local view stands */
		return local;
	}
	/* The holder's trim point too (invariant 6). */
	(void)star_view_trim(fs->star, s, b.trim_seq, b.trim_byte);
	return b.end_byte > local ? b.end_byte : local;
}

int fs_remote_more(struct nova_fs *fs, struct nv_stream *s, uint64_t off, void *buf,
		   size_t size, size_t *done)
{
	struct lease_holder h;
	char now[NV_STREAM_NAME_MAX + 1];
	const char *nm = s->name;
	uint8_t *dst = buf;
	size_t got = 0;
	int rc = 0;

	if (elsewhere(fs, s, &h, false))
		return 0; /* ours, vacant, or nobody to ask: the local end is the end */
	while (got < size) {
		size_t n = 0;

		rc = api_client_read(fs->client, &h, s->bucket, nm, s->id, off + got, dst + got,
				     size - got, &n);
		if ((rc == -ESTALE || rc == -ENOENT) && nm == s->name) {
			rc = fs_remote_name_now(fs->star, s, h.star, s->name, rc, now, sizeof(now));
			if (rc == 0) {
				nm = now; /* once */
				continue;
			}
		}
		if (rc || n == 0)
			break;
		got += n;
	}
	*done += got;
	return remote_errno(s, &h, "read", rc);
}
