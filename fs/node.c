/*
 * node.c - see node.h.
 *
 * The table is a u64 map from inode number to node (src/base/u64map.h):
 * it holds only what the kernel has looked up and not forgotten, which
 * the kernel bounds by its own inode cache.
 */
#include "config.h"
#include "fs/node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int fs_nodes_init(struct fs_nodes *t)
{
	t->map = u64map_new(1024);
	if (!t->map)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->root.ino = FUSE_ROOT_ID;
	t->root.kind = FS_NODE_ROOT;
	t->follow_root.ino = FS_INO_FOLLOW;
	t->follow_root.kind = FS_NODE_FOLLOW_ROOT;
	return 0;
}

struct fs_node *fs_node_find(struct fs_nodes *t, uint64_t ino)
{
	struct fs_node *n;

	if (ino == FUSE_ROOT_ID)
		return &t->root;
	if (ino == FS_INO_FOLLOW)
		return &t->follow_root;
	pthread_mutex_lock(&t->lock);
	n = u64map_get(t->map, ino);
	pthread_mutex_unlock(&t->lock);
	return n;
}

struct fs_node *fs_node_remember(struct fs_nodes *t, uint64_t ino, enum fs_node_kind kind,
				 const char *bucket, struct nv_stream *s)
{
	struct fs_node *n, *fresh = NULL;

	pthread_mutex_lock(&t->lock);
	n = u64map_get(t->map, ino);
	if (!n) {
		fresh = calloc(1, sizeof(*fresh));
		if (!fresh || u64map_put(t->map, ino, fresh)) {
			pthread_mutex_unlock(&t->lock);
			free(fresh);
			stream_put(s);
			return NULL;
		}
		n = fresh;
		n->ino = ino;
		n->kind = kind;
		snprintf(n->bucket, sizeof(n->bucket), "%s", bucket);
		n->stream = s;
		s = NULL;
	}
	n->nlookup++;
	pthread_mutex_unlock(&t->lock);
	stream_put(s);
	return n;
}

void fs_node_forget(struct fs_nodes *t, uint64_t ino, uint64_t nlookup)
{
	struct fs_node *n;

	if (ino == FUSE_ROOT_ID || ino == FS_INO_FOLLOW)
		return;
	pthread_mutex_lock(&t->lock);
	n = u64map_get(t->map, ino);
	if (n && n->nlookup > nlookup) {
		n->nlookup -= nlookup;
		n = NULL;
	} else if (n) {
		u64map_remove(t->map, ino);
	}
	pthread_mutex_unlock(&t->lock);
	if (n) {
		stream_put(n->stream);
		free(n);
	}
}

void fs_nodes_clear(struct fs_nodes *t)
{
	size_t cur = 0;
	uint64_t ino;
	void *v;

	pthread_mutex_lock(&t->lock);
	while (u64map_next(t->map, &cur, &ino, &v)) {
		struct fs_node *n = v;

		u64map_remove(t->map, ino);
		stream_put(n->stream);
		free(n);
	}
	pthread_mutex_unlock(&t->lock);
}

void fs_nodes_destroy(struct fs_nodes *t)
{
	fs_nodes_clear(t);
	u64map_free(t->map);
	t->map = NULL;
	pthread_mutex_destroy(&t->lock);
}
