/*
 * sqlite.h - the SQLite metastore backend (embedded default).
 *
 * One table kv(k BLOB PRIMARY KEY, v BLOB, ver INTEGER) WITHOUT ROWID,
 * WAL journal, synchronous=FULL (a commit is durable on return), one
 * writer connection behind a mutex and a small pool of reader
 * connections, all statements prepared once.
 */
#ifndef NOVAFS_META_SQLITE_H
#define NOVAFS_META_SQLITE_H

#include "meta/kv.h"

/* Open or create the database file at path.  0 and *out (caller owns;
 * kv_close()), or -errno (logged with SQLite's message). */
int sqlite_kv_open(const char *path, struct kv **out)
	__attribute__((warn_unused_result));

/* Its kv_open() scheme: "sqlite:/abs/path" or "/abs/path" (meta/schemes.c). */
extern const struct kv_scheme sqlite_kv_scheme;

#endif
