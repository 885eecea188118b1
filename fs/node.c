/*
 * node.c - see node.h.
 *
 * A fixed array of hash chains (Fibonacci hashing of the inode number):
 * the table holds only what the kernel has looked up and not forgotten,
 * which the kernel bounds by its own inode cache.
 */
#include "config.h"
#include "fs/node.h"

#include <stdio.h>
#include <stdlib.h>

static size_t node_hash(uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ULL) >> 54) & (FS_NODE_BUCKETS - 1);
}

void fs_nodes_init(struct fs_nodes *t)
{
	pthread_mutex_init(&t->lock, NULL);
	t->root.ino = FUSE_ROOT_ID;
	t->root.kind = FS_NODE_ROOT;
	t->follow_root.ino = FS_INO_FOLLOW;
	t->follow_root.kind = FS_NODE_FOLLOW_ROOT;
}

struct fs_node *fs_node_find(struct fs_nodes *t, uint64_t ino)
{
	struct fs_node *n;

	if (ino == FUSE_ROOT_ID)
		return &t->root;
	if (ino == FS_INO_FOLLOW)
		return &t->follow_root;
	pthread_mutex_lock(&t->lock);
	for (n = t->buckets[node_hash(ino)]; n; n = n->hnext)
		if (n->ino == ino)
			break;
	pthread_mutex_unlock(&t->lock);
	return n;
}

struct fs_node *fs_node_remember(struct fs_nodes *t, uint64_t ino, enum fs_node_kind kind,
				 const char *bucket, struct nv_stream *s)
{
	struct fs_node *n;
	size_t h = node_hash(ino);

	pthread_mutex_lock(&t->lock);
	for (n = t->buckets[h]; n; n = n->hnext)
		if (n->ino == ino)
			break;
	if (!n) {
		n = calloc(1, sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&t->lock);
			stream_put(s);
			return NULL;
		}
		n->ino = ino;
		n->kind = kind;
		snprintf(n->bucket, sizeof(n->bucket), "%s", bucket);
		n->stream = s;
		s = NULL;
		n->hnext = t->buckets[h];
		t->buckets[h] = n;
	}
	n->nlookup++;
	pthread_mutex_unlock(&t->lock);
	stream_put(s);
	return n;
}

void fs_node_forget(struct fs_nodes *t, uint64_t ino, uint64_t nlookup)
{
	struct fs_node **pp, *n = NULL;

	if (ino == FUSE_ROOT_ID || ino == FS_INO_FOLLOW)
		return;
	pthread_mutex_lock(&t->lock);
	for (pp = &t->buckets[node_hash(ino)]; *pp; pp = &(*pp)->hnext) {
		if ((*pp)->ino != ino)
			continue;
		n = *pp;
		if (n->nlookup > nlookup) {
			n->nlookup -= nlookup;
			n = NULL;
		} else {
			*pp = n->hnext;
		}
		break;
	}
	pthread_mutex_unlock(&t->lock);
	if (n) {
		stream_put(n->stream);
		free(n);
	}
}

void fs_nodes_clear(struct fs_nodes *t)
{
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < FS_NODE_BUCKETS; i++) {
		while (t->buckets[i]) {
			struct fs_node *n = t->buckets[i];

			t->buckets[i] = n->hnext;
			stream_put(n->stream);
			free(n);
		}
	}
	pthread_mutex_unlock(&t->lock);
}

void fs_nodes_destroy(struct fs_nodes *t)
{
	fs_nodes_clear(t);
	pthread_mutex_destroy(&t->lock);
}
