/*
 * node.h - the node table: what the kernel's inode numbers name.
 *
 * For: mapping an inode number (fs/handle.h numbering) to its bucket or
 * stream, and counting the kernel's lookups of it (nlookup), so a node
 * lives from its first lookup to the forget that balances them.  Not
 * for: attributes or replies (fs/ns.c), open handles (fs/file.c), or the
 * engine's table of loaded streams (engine/stream.h), which this only
 * holds references into.
 *
 * Locking: nodes->lock guards the map and every node's nlookup; a node's ino, kind, bucket and stream are immutable once it is
 * in the table.  The lock is a leaf: nothing is called under it but
 * calloc/free, except that fs_nodes_clear() (at shutdown) drops stream
 * references under it; elsewhere they are dropped after unlocking.
 *
 * Invariants:
 *  1. A node found by fs_node_find() is only used while the kernel holds
 *     it: a request in flight on an inode pins it (the kernel sends no
 *     forget for an inode it is using), so no reference is taken.
 *  2. A stream node holds one stream reference, dropped with the node.
 *  3. The root and .follow nodes are embedded, never in the map, never
 *     forgotten.
 */
#ifndef NOVAFS_FS_NODE_H
#define NOVAFS_FS_NODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/star.h"
#include "fs/handle.h"
#include "src/base/names.h"
#include "src/base/u64map.h"

struct fs_node {
	uint64_t ino;
	enum fs_node_kind kind;
	char bucket[NV_BUCKET_NAME_MAX + 1];
	struct nv_stream *stream; /* FS_NODE_STREAM, FS_NODE_FOLLOW_STREAM: a reference */
	uint64_t nlookup;         /* protected by nodes->lock */
};

struct fs_nodes {
	pthread_mutex_t lock;
	struct u64map *map;                       /* ino -> node; protected by lock */
	struct fs_node root;                      /* immutable */
	struct fs_node follow_root;               /* MOUNT/.follow; immutable */
};

/* Set up an empty table (t caller-owned) with its root and .follow.
 * 0 or -ENOMEM (nothing to undo). */
int fs_nodes_init(struct fs_nodes *t) __attribute__((warn_unused_result));
/* Drop every node and its stream reference (at shutdown: no request is
 * in flight). */
void fs_nodes_clear(struct fs_nodes *t);
/* fs_nodes_clear(), then destroy the lock. */
void fs_nodes_destroy(struct fs_nodes *t);

/* The node of ino (borrowed, invariant 1), or NULL (ESTALE to the
 * kernel). */
struct fs_node *fs_node_find(struct fs_nodes *t, uint64_t ino);

/* Record one more kernel lookup of a bucket or stream node, creating it
 * on the first.  bucket is copied.  Takes ownership of the stream
 * reference s (may be NULL): kept by a new node, dropped if the node
 * already had one.  The node (borrowed), or NULL on ENOMEM (s dropped). */
struct fs_node *fs_node_remember(struct fs_nodes *t, uint64_t ino, enum fs_node_kind kind,
				 const char *bucket, struct nv_stream *s);

/* The kernel forgot nlookup lookups of ino; the node goes (with its
 * stream reference) when none are left.  The root and .follow are
 * never forgotten. */
void fs_node_forget(struct fs_nodes *t, uint64_t ino, uint64_t nlookup);

/* Whether n is in the read-only follow view. */
static inline bool fs_node_is_follow(const struct fs_node *n)
{
	return n->kind >= FS_NODE_FOLLOW_ROOT;
}

#endif
