/*
 * fs.c - see fs.h: the mount's lifecycle, the FUSE init and the one
 * operations table.
 *
 * For: creating, wiring, quiescing and freeing struct nova_fs
 * (fs/session.h), negotiating the connection (fs_init()), and the one
 * `const struct fuse_lowlevel_ops` table that names every handler of
 * fs/ns.h and fs/file.h.  Not for: the handlers themselves, the node
 * table (fs/node.c) or the follow view (fs/follow.c).
 *
 * Invariants:
 *  1. One operations table for the whole program (STYLE.md, FUSE).
 *  2. The follow view starts with the star (nova_fs_set_star()) and is
 *     stopped before the nodes, and with them their stream references,
 *     are dropped (nova_fs_shutdown()).
 */
#include "config.h"
#include "fs/fs.h"
#include "fs/file.h"
#include "fs/follow.h"
#include "fs/ns.h"
#include "fs/session.h"
#include "fs/xattr.h"
#include "src/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ the session */

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct nova_fs *fs = userdata;

	if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA) {
		conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
		conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	} else {
		nv_log(NV_WARN, NV_SUB_FS,
		       "kernel lacks explicit page-cache invalidation: every size change "
		       "drops the whole cached file");
	}
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->max_write = fs->cfg.max_write;
	conn->max_read = 1u << 20; /* must equal -o max_read (src/novafs.c) */
	/* The kernel keeps min(its bdi's read_ahead_kb, this): src/novafs.c
	 * raised the former in sysfs before this reply, so asking for more
	 * than the kernel proposed is what makes the raise stick. */
	if (fs->cfg.max_readahead)
		conn->max_readahead = fs->cfg.max_readahead;
	nv_log(NV_INFO, NV_SUB_FS, "FUSE protocol %u.%u, max_write %u, max_readahead %u",
	       conn->proto_major, conn->proto_minor, conn->max_write, conn->max_readahead);
}

/* ------------------------------------------------------------ the table */

static const struct fuse_lowlevel_ops ops = {
	.init = fs_init,
	.lookup = fs_ns_lookup,
	.forget = fs_ns_forget,
	.forget_multi = fs_ns_forget_multi,
	.getattr = fs_ns_getattr,
	.setattr = fs_ns_setattr,
	.mknod = fs_ns_mknod,
	.mkdir = fs_ns_mkdir,
	.unlink = fs_ns_unlink,
	.rmdir = fs_ns_rmdir,
	.symlink = fs_ns_symlink,
	.rename = fs_ns_rename,
	.link = fs_ns_link,
	.open = fs_file_open,
	.read = fs_file_read,
	.write = fs_file_write,
	.flush = fs_file_flush,
	.release = fs_file_release,
	.fsync = fs_file_fsync,
	.opendir = fs_ns_opendir,
	.readdir = fs_ns_readdir,
	.releasedir = fs_ns_releasedir,
	.statfs = fs_ns_statfs,
	.setxattr = fs_ns_setxattr,
	.getxattr = fs_ns_getxattr,
	.listxattr = fs_ns_listxattr,
	.removexattr = fs_ns_removexattr,
	.create = fs_ns_create,
	.fallocate = fs_file_fallocate,
	.lseek = fs_file_lseek,
	.poll = fs_file_poll,
};

const struct fuse_lowlevel_ops *nova_fs_ops(void)
{
	return &ops;
}

/* ------------------------------------------------------------ lifecycle */

int nova_fs_new(const struct fs_cfg *cfg, struct nova_fs **out)
{
	struct nova_fs *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return -ENOMEM;
	fs->cfg = *cfg;
	fs->cfg.durable = NULL; /* parsed here, not kept (fs/cfg.h invariant 1) */
	if (cfg->durable && fs_durable_parse(cfg->durable, strlen(cfg->durable), &fs->durable)) {
		free(fs);
		return -EINVAL;
	}
	if (!cfg->durable)
		fs->durable = FS_DURABLE_WRITE;
	if (cfg->data_dir)
		fs->data_dir = strdup(cfg->data_dir);
	if (fs_nodes_init(&fs->nodes)) {
		free(fs->data_dir);
		free(fs);
		return -ENOMEM;
	}
	pthread_key_create(&fs->bufkey, free);
	pthread_mutex_init(&fs->files_lock, NULL);
	clock_gettime(CLOCK_REALTIME, &fs->started);
	*out = fs;
	return 0;
}

int nova_fs_check_durable(const char *v)
{
	enum fs_durable d;

	return v ? fs_durable_parse(v, strlen(v), &d) : 0;
}

void nova_fs_set_star(struct nova_fs *fs, struct star *st)
{
	fs->star = st;
	if (follow_new(st, fs, &fs->follow))
		nv_log(NV_ERR, NV_SUB_FS, "the follow view could not start: its reads fail");
}

void nova_fs_set_client(struct nova_fs *fs, struct api_client *cl)
{
	fs->client = cl;
}

void nova_fs_set_session(struct nova_fs *fs, struct fuse_session *se)
{
	fs->se = se;
}

void nova_fs_acked(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte)
{
	fs_file_acked(arg, s, old_byte, new_byte);
}

void nova_fs_trimmed(void *arg, struct nv_stream *s, uint64_t old_byte, uint64_t new_byte)
{
	fs_file_trimmed(arg, s, old_byte, new_byte);
}

uint64_t nova_fs_quiesce(struct nova_fs *fs)
{
	follow_quiesce(fs->follow);
	return NV_STAT_GET(star_stats(fs->star), parked_readers);
}

void nova_fs_shutdown(struct nova_fs *fs)
{
	follow_shutdown(fs->follow);
	fs_file_release_all(fs);
	fs_nodes_clear(&fs->nodes);
}

void nova_fs_free(struct nova_fs *fs)
{
	if (!fs)
		return;
	fs_nodes_destroy(&fs->nodes);
	follow_free(fs->follow);
	free(pthread_getspecific(fs->bufkey));
	pthread_setspecific(fs->bufkey, NULL);
	pthread_key_delete(fs->bufkey);
	pthread_mutex_destroy(&fs->files_lock);
	free(fs->data_dir);
	free(fs);
}
