/*
 * u64map.c - see u64map.h.
 *
 * A slot is EMPTY (val NULL, not a tombstone), LIVE (val set) or a
 * TOMBSTONE (val NULL, tomb set).  A lookup probes from the key's home
 * slot until it finds the key or an EMPTY slot; tombstones keep probe
 * chains intact after a removal.  An insert reuses the first tombstone
 * it passed.
 */
#include "config.h"
#include "src/base/u64map.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

/* Smallest array (slots); a power of two. */
#define U64MAP_MIN_CAP 16

struct u64map_slot {
	uint64_t key;
	void *val;  /* NULL: empty or tombstone */
	bool tomb;
};

struct u64map {
	struct u64map_slot *slots;
	size_t cap;   /* power of two */
	size_t count; /* live slots */
	size_t tombs; /* tombstones */
};

uint64_t u64map_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t u64map_fnv_str(uint64_t h, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

static size_t cap_for(size_t n)
{
	size_t cap = U64MAP_MIN_CAP;

	/* Room for n live entries below the 1/2 growth mark. */
	while (cap / 2 < n)
		cap *= 2;
	return cap;
}

struct u64map *u64map_new(size_t hint)
{
	struct u64map *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->cap = cap_for(hint);
	m->slots = calloc(m->cap, sizeof(*m->slots));
	if (!m->slots) {
		free(m);
		return NULL;
	}
	return m;
}

void u64map_free(struct u64map *m)
{
	if (!m)
		return;
	free(m->slots);
	free(m);
}

/* The slot holding key, or NULL. */
static struct u64map_slot *find(const struct u64map *m, uint64_t key)
{
	size_t mask = m->cap - 1;

	for (size_t i = u64map_mix(key) & mask;; i = (i + 1) & mask) {
		struct u64map_slot *s = &m->slots[i];

		if (s->val && s->key == key)
			return s;
		if (!s->val && !s->tomb)
			return NULL;
	}
}

void *u64map_get(const struct u64map *m, uint64_t key)
{
	struct u64map_slot *s = find(m, key);

	return s ? s->val : NULL;
}

/* Rebuild into ncap slots (live entries only).  0 or -ENOMEM (unchanged). */
static int rebuild(struct u64map *m, size_t ncap)
{
	struct u64map_slot *ns = calloc(ncap, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (size_t k = 0; k < m->cap; k++) {
		const struct u64map_slot *s = &m->slots[k];
		size_t i;

		if (!s->val)
			continue;
		for (i = u64map_mix(s->key) & (ncap - 1); ns[i].val; i = (i + 1) & (ncap - 1))
			;
		ns[i] = *s;
	}
	free(m->slots);
	m->slots = ns;
	m->cap = ncap;
	m->tombs = 0;
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, void *val)
{
	struct u64map_slot *s = find(m, key), *reuse = NULL;
	size_t mask, i;

	assert(val);
	if (s) {
		s->val = val;
		return 0;
	}
	/* One more live entry: keep live + tombstones <= 3/4 of the array. */
	if ((m->count + 1 + m->tombs) * 4 > m->cap * 3) {
		size_t ncap = (m->count + 1) * 2 > m->cap ? m->cap * 2 : m->cap;
		int rc = rebuild(m, ncap);

		if (rc)
			return rc;
	}
	mask = m->cap - 1;
	for (i = u64map_mix(key) & mask; m->slots[i].val || m->slots[i].tomb;
	     i = (i + 1) & mask)
		if (!reuse && m->slots[i].tomb)
			reuse = &m->slots[i];
	s = reuse ? reuse : &m->slots[i];
	if (s->tomb) {
		s->tomb = false;
		m->tombs--;
	}
	s->key = key;
	s->val = val;
	m->count++;
	return 0;
}

void *u64map_remove(struct u64map *m, uint64_t key)
{
	struct u64map_slot *s = find(m, key);
	void *val;

	if (!s)
		return NULL;
	val = s->val;
	s->val = NULL;
	s->tomb = true;
	m->count--;
	m->tombs++;
	return val;
}

size_t u64map_count(const struct u64map *m)
{
	return m->count;
}

bool u64map_next(const struct u64map *m, size_t *cursor, uint64_t *key, void **val)
{
	for (size_t i = *cursor; i < m->cap; i++) {
		const struct u64map_slot *s = &m->slots[i];

		if (!s->val)
			continue;
		if (key)
			*key = s->key;
		if (val)
			*val = s->val;
		*cursor = i + 1;
		return true;
	}
	*cursor = m->cap;
	return false;
}
