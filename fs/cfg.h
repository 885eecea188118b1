/*
 * cfg.h - the FUSE side's settings of one mount (struct fs_cfg).
 *
 * For: src/novafs.c, which fills it from its options, through fs/fs.h;
 * and fs/session.h, which keeps a copy in struct nova_fs.  A header of
 * its own so the files that answer requests (fs/ns.c, fs/file.c) reach
 * the settings without including fs/fs.h, whose fs.c includes them.  Not
 * for: the engine's settings (struct star_cfg, engine/star.h).
 *
 * Invariants:
 *  1. nova_fs_new() copies the struct (and data_dir); nothing here is
 *     read from the caller's copy afterwards.
 */
#ifndef NOVAFS_FS_CFG_H
#define NOVAFS_FS_CFG_H

#include <sys/types.h>

struct fs_cfg {
	double attr_timeout;  /* seconds the kernel may cache attributes */
	double entry_timeout; /* seconds the kernel may cache names */
	unsigned max_write;   /* bytes per write request (one record) */
	unsigned max_readahead; /* bytes of kernel readahead; 0: the kernel's */
	uid_t uid;            /* owner of the root (buckets and streams: their rows) */
	gid_t gid;
	const char *data_dir; /* for statfs; copied */
	const char *durable;  /* -o durable=write|fsync (fs/handle.h); NULL: write */
};

#endif
