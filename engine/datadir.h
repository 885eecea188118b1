/*
 * datadir.h - a star's data directory: created on first use, locked so
 * one star at a time uses it, and the star id it keeps.
 *
 * For: star_open() (engine/star.c).  Not for: what lives in the directory
 * besides the lock and the id (the default store and metastore are
 * engine/stack.h's, the scratch space engine/fetch.h's).
 *
 * Files: DATA_DIR/lock (an flock held while the star runs) and
 * DATA_DIR/star-id (one line, the id).
 *
 * Invariants:
 *  1. One star per data directory at a time: datadir_lock() takes an
 *     exclusive, non-blocking flock on DATA_DIR/lock and fails with
 *     -EBUSY when another process holds it.
 *  2. A star id, once written to DATA_DIR/star-id, never changes: it is
 *     created once, durably (written to a temporary file, fsynced,
 *     renamed, directory fsynced), and read back on every later start.
 */
#ifndef NOVAFS_ENGINE_DATADIR_H
#define NOVAFS_ENGINE_DATADIR_H

#include "meta/chains.h" /* META_STAR_MAX */

/* Create dir (mode 0700, parents too) and lock it (invariant 1).  0 and
 * *lock_fd (caller owns: closing it releases the lock), -EBUSY, or
 * -errno; logged.  On failure *lock_fd is the descriptor if one was
 * opened (caller closes), else left alone. */
int datadir_lock(const char *dir, int *lock_fd) __attribute__((warn_unused_result));

/* The star id into id: given (checked with meta_star_check()) when not
 * NULL, else DATA_DIR/star-id, created with a random id on first start
 * (invariant 2).  0, -EINVAL (invalid id, logged), -EIO or -errno. */
int datadir_star_id(const char *dir, const char *given, char id[META_STAR_MAX + 1])
	__attribute__((warn_unused_result));

#endif
