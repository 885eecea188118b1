/*
 * perm.c - see perm.h.
 *
 * Group membership is asked of the kernel per call (fuse_req_getgroups(),
 * /proc/PID/task/TID/status): a check reads at most PERM_GROUPS groups;
 * a caller in more is treated as not in the rest.
 */
#include "config.h"
#include "fs/perm.h"

#include <errno.h>
#include <stdbool.h>

#define PERM_GROUPS 256

struct meta_owner fs_perm_creator(fuse_req_t req, mode_t mode)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct meta_owner o = {
		.uid = c->uid,
		.gid = c->gid,
		.mode = (uint32_t)(mode & ~c->umask & 07777),
	};

	return o;
}

/* Whether req's caller is in group gid (primary or supplementary). */
static bool in_group(fuse_req_t req, gid_t gid)
{
	gid_t list[PERM_GROUPS];
	int n;

	if (fuse_req_ctx(req)->gid == gid)
		return true;
	n = fuse_req_getgroups(req, PERM_GROUPS, list);
	if (n > PERM_GROUPS)
		n = PERM_GROUPS;
	for (int i = 0; i < n; i++)
		if (list[i] == gid)
			return true;
	return false;
}

int fs_perm_may_write(fuse_req_t req, const struct stat *st)
{
	uid_t uid = fuse_req_ctx(req)->uid;
	mode_t bit;

	if (uid == 0)
		return 0;
	if (uid == st->st_uid)
		bit = S_IWUSR;
	else if (in_group(req, st->st_gid))
		bit = S_IWGRP;
	else
		bit = S_IWOTH;
	return (st->st_mode & bit) ? 0 : -EACCES;
}

int fs_perm_setattr(fuse_req_t req, const struct stat *st, const struct stat *attr,
		    int to_set, struct meta_owner *out)
{
	uid_t caller = fuse_req_ctx(req)->uid;
	bool root = caller == 0;
	struct meta_owner o = { st->st_uid, st->st_gid, st->st_mode & 07777 };

	if (to_set & FUSE_SET_ATTR_UID && attr->st_uid != st->st_uid) {
		if (!root)
			return -EPERM; /* chown to another user: root only */
		o.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID && attr->st_gid != st->st_gid) {
		if (!root && (caller != st->st_uid || !in_group(req, attr->st_gid)))
			return -EPERM;
		o.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_MODE) {
		if (!root && caller != st->st_uid)
			return -EPERM;
		o.mode = attr->st_mode & 07777;
		if (!root && !in_group(req, o.gid))
			o.mode &= ~(uint32_t)S_ISGID;
	}
	if (!root && (o.uid != st->st_uid || o.gid != st->st_gid) && S_ISREG(st->st_mode))
		o.mode &= ~(uint32_t)(S_ISUID | S_ISGID);
	*out = o;
	return 0;
}
