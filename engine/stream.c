/*
 * stream.c - see stream.h.
 *
 * The table is an open hash of singly linked buckets keyed by stream id,
 * resized by doubling; t->lock guards the buckets and the count.  A
 * stream's refcount is atomic; the 1 -> 0 transition takes the table lock
 * and re-checks, because a concurrent find may have revived it.
 */
#include "config.h"
#include "engine/stream.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct stream_table {
	pthread_mutex_t lock;
	struct nv_stream **buckets; /* lock; chained through hnext below */
	size_t nbuckets;            /* lock; power of two */
	size_t count;               /* lock */
};

/* Hash chain links live beside the struct to keep it public-simple. */
struct stream_node {
	struct nv_stream s;
	struct stream_node *hnext;
};

static size_t hash_id(uint64_t id, size_t n)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return (size_t)id & (n - 1);
}

struct stream_table *stream_table_new(void)
{
	struct stream_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->nbuckets = 64;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	if (!t->buckets) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

static struct stream_node *node_of(struct nv_stream *s)
{
	return (struct stream_node *)s;
}

static void stream_free(struct nv_stream *s)
{
	wake_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s->pend);
	free(node_of(s));
}

void stream_table_free(struct stream_table *t)
{
	if (!t)
		return;
	/* At shutdown the layer above may still hold streams it can no longer
	 * release (file handles the kernel never closed): free them. */
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct stream_node *n = (struct stream_node *)t->buckets[i];

		while (n) {
			struct stream_node *next = n->hnext;

			stream_free(&n->s);
			n = next;
		}
	}
	free(t->buckets);
	pthread_mutex_destroy(&t->lock);
	free(t);
}


struct nv_stream *stream_alloc(void)
{
	struct stream_node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	atomic_init(&n->s.refs, 1);
	pthread_mutex_init(&n->s.lock, NULL);
	wake_init(&n->s.wake);
	return &n->s;
}


static struct nv_stream *find_locked(struct stream_table *t, uint64_t id)
{
	for (struct stream_node *n = (struct stream_node *)t->buckets[hash_id(id, t->nbuckets)];
	     n; n = n->hnext)
		if (n->s.id == id)
			return &n->s;
	return NULL;
}

struct nv_stream *stream_table_find(struct stream_table *t, uint64_t id)
{
	struct nv_stream *s;

	pthread_mutex_lock(&t->lock);
	s = find_locked(t, id);
	if (s)
		atomic_fetch_add(&s->refs, 1);
	pthread_mutex_unlock(&t->lock);
	return s;
}

static void grow_locked(struct stream_table *t)
{
	size_t nb = t->nbuckets * 2;
	struct nv_stream **b = calloc(nb, sizeof(*b));

	if (!b)
		return; /* keep the longer chains */
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct stream_node *n = (struct stream_node *)t->buckets[i];

		while (n) {
			struct stream_node *next = n->hnext;
			size_t h = hash_id(n->s.id, nb);

			n->hnext = (struct stream_node *)b[h];
			b[h] = &n->s;
			n = next;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = nb;
}

struct nv_stream *stream_table_insert(struct stream_table *t, struct nv_stream *s)
{
	struct nv_stream *old;
	size_t h;

	pthread_mutex_lock(&t->lock);
	old = find_locked(t, s->id);
	if (old) {
		atomic_fetch_add(&old->refs, 1);
		pthread_mutex_unlock(&t->lock);
		stream_free(s);
		return old;
	}
	if (t->count >= t->nbuckets)
		grow_locked(t);
	h = hash_id(s->id, t->nbuckets);
	node_of(s)->hnext = (struct stream_node *)t->buckets[h];
	t->buckets[h] = s;
	t->count++;
	s->table = t;
	pthread_mutex_unlock(&t->lock);
	return s;
}

size_t stream_table_count(struct stream_table *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = t->count;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void stream_table_each(struct stream_table *t, void (*fn)(void *arg, struct nv_stream *s),
		       void *arg)
{
	struct nv_stream **all;
	size_t n = 0;

	pthread_mutex_lock(&t->lock);
	all = calloc(t->count ? t->count : 1, sizeof(*all));
	if (all) {
		for (size_t i = 0; i < t->nbuckets; i++)
			for (struct stream_node *x = (struct stream_node *)t->buckets[i]; x;
			     x = x->hnext) {
				atomic_fetch_add(&x->s.refs, 1);
				all[n++] = &x->s;
			}
	}
	pthread_mutex_unlock(&t->lock);
	for (size_t i = 0; i < n; i++) {
		fn(arg, all[i]);
		stream_put(all[i]);
	}
	free(all);
}

void stream_get(struct nv_stream *s)
{
	int old = atomic_fetch_add(&s->refs, 1);

	assert(old > 0);
	(void)old;
}

void stream_put(struct nv_stream *s)
{
	struct stream_table *t;

	if (!s)
		return;
	t = s->table;
	if (!t) {
		if (atomic_fetch_sub(&s->refs, 1) == 1)
			stream_free(s);
		return;
	}
	/* Fast path: not the last reference. */
	for (;;) {
		int r = atomic_load(&s->refs);

		assert(r > 0);
		if (r == 1)
			break;
		if (atomic_compare_exchange_weak(&s->refs, &r, r - 1))
			return;
	}
	/* Possibly the last: decide under the table lock, where finds
	 * take their references. */
	pthread_mutex_lock(&t->lock);
	if (atomic_fetch_sub(&s->refs, 1) != 1) {
		pthread_mutex_unlock(&t->lock);
		return;
	}
	{
		size_t h = hash_id(s->id, t->nbuckets);
		struct nv_stream **pp = &t->buckets[h];

		while (*pp && *pp != s)
			pp = (struct nv_stream **)&node_of(*pp)->hnext;
		if (*pp) {
			*pp = (struct nv_stream *)node_of(s)->hnext;
			t->count--;
		}
	}
	pthread_mutex_unlock(&t->lock);
	stream_free(s);
}

int stream_pend_push(struct nv_stream *s, const struct stream_pend *p)
{
	if (s->pend_n == s->pend_cap) {
		uint32_t ncap = s->pend_cap ? s->pend_cap * 2 : 8;
		struct stream_pend *np = malloc(ncap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		for (uint32_t i = 0; i < s->pend_n; i++)
			np[i] = s->pend[(s->pend_head + i) % s->pend_cap];
		free(s->pend);
		s->pend = np;
		s->pend_cap = ncap;
		s->pend_head = 0;
	}
	s->pend[(s->pend_head + s->pend_n) % s->pend_cap] = *p;
	s->pend_n++;
	return 0;
}

void stream_pend_pop_below(struct nv_stream *s, uint64_t end_seq)
{
	while (s->pend_n) {
		const struct stream_pend *p = &s->pend[s->pend_head];

		if (p->first_seq + p->nrec > end_seq)
			break;
		s->pend_head = (s->pend_head + 1) % s->pend_cap;
		s->pend_n--;
	}
}

int stream_pend_find_byte(const struct nv_stream *s, uint64_t byte, struct stream_pend *out)
{
	uint32_t lo = 0, hi = s->pend_n;

	/* Binary search over the ring for the last run starting <= byte. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct stream_pend *p = &s->pend[(s->pend_head + mid) % s->pend_cap];

		if (p->first_byte <= byte)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	{
		const struct stream_pend *p = &s->pend[(s->pend_head + lo - 1) % s->pend_cap];

		if (byte >= p->first_byte + p->nbytes)
			return -ENOENT;
		*out = *p;
	}
	return 0;
}

int stream_pend_find_seq(const struct nv_stream *s, uint64_t seq, struct stream_pend *out)
{
	uint32_t lo = 0, hi = s->pend_n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct stream_pend *p = &s->pend[(s->pend_head + mid) % s->pend_cap];

		if (p->first_seq <= seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	{
		const struct stream_pend *p = &s->pend[(s->pend_head + lo - 1) % s->pend_cap];

		if (seq >= p->first_seq + p->nrec)
			return -ENOENT;
		*out = *p;
	}
	return 0;
}
