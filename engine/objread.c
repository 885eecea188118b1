/*
 * objread.c - see objread.h.
 *
 * Each public call packs its arguments into a small struct and hands a
 * copy function to store_read_copies(); the function does the whole
 * multi-step read against the one copy it is given and judges it.
 */
#include "config.h"
#include "engine/objread.h"

#include <errno.h>
#include <stdlib.h>

/* One ranged read that must return exactly len bytes. */
static int get_exact(struct store *st, const char *key, uint64_t off, size_t len, void *dst)
{
	size_t got;
	int rc = store_get_range(st, key, off, len, dst, &got);

	return rc ? rc : (got == len ? 0 : -EBADMSG);
}

struct footer_args {
	const char *key;
	uint64_t off;
	uint32_t len;
	void *win;
	struct bundle_footer *f;
};

static int footer_copy(void *arg, struct store *copy)
{
	struct footer_args *a = arg;
	int rc = get_exact(copy, a->key, a->off, a->len, a->win);

	return rc ? rc : bundle_footer_open(a->win, a->len, a->off, a->f);
}

int objread_footer(struct store *st, const char *key, uint64_t off, uint32_t len, void *win,
		   struct bundle_footer *f)
{
	struct footer_args a = { key, off, len, win, f };

	return store_read_copies(st, key, footer_copy, &a);
}

static int whole_copy(void *arg, struct store *copy)
{
	struct footer_args *a = arg;
	uint8_t *buf = a->win;
	int rc = get_exact(copy, a->key, 0, a->off + a->len, buf);

	return rc ? rc : bundle_footer_open(buf + a->off, a->len, a->off, a->f);
}

int objread_whole(struct store *st, const char *key, uint64_t off, uint32_t len, uint8_t *buf,
		  struct bundle_footer *f)
{
	struct footer_args a = { key, off, len, buf, f };

	return store_read_copies(st, key, whole_copy, &a);
}

struct tail_args {
	const char *key;
	uint64_t *size, *foff;
	uint32_t *flen;
	uint8_t **win;
	struct bundle_footer *f;
};

static int tail_copy(void *arg, struct store *copy)
{
	struct tail_args *a = arg;
	uint8_t tr[BUNDLE_TRAILER_SIZE];
	int rc;

	free(*a->win);
	*a->win = NULL;
	rc = store_head(copy, a->key, a->size);
	if (rc)
		return rc;
	if (*a->size < BUNDLE_TRAILER_SIZE)
		return -EBADMSG;
	rc = get_exact(copy, a->key, *a->size - BUNDLE_TRAILER_SIZE, sizeof(tr), tr);
	if (!rc)
		rc = bundle_trailer_parse(tr, sizeof(tr), *a->size, a->foff, a->flen);
	if (rc)
		return rc;
	*a->win = malloc(*a->flen);
	if (!*a->win)
		return -ENOMEM;
	rc = get_exact(copy, a->key, *a->foff, *a->flen, *a->win);
	if (!rc)
		rc = bundle_footer_open(*a->win, *a->flen, *a->foff, a->f);
	return rc;
}

int objread_tail(struct store *st, const char *key, uint64_t *size, uint64_t *foff,
		 uint32_t *flen, uint8_t **win, struct bundle_footer *f)
{
	struct tail_args a = { key, size, foff, flen, win, f };
	int rc;

	*win = NULL;
	rc = store_read_copies(st, key, tail_copy, &a);
	if (rc) {
		free(*win);
		*win = NULL;
	}
	return rc;
}

struct chunk_args {
	const char *key;
	const struct bundle_entry *e;
	struct nv_buf *raw;
	uint8_t *stored;
};

static int chunk_copy(void *arg, struct store *copy)
{
	struct chunk_args *a = arg;
	int rc = get_exact(copy, a->key, a->e->chunk_off, a->e->comp_len, a->stored);

	nv_buf_reset(a->raw);
	return rc ? rc : bundle_chunk_decode(a->e, a->stored, a->e->comp_len, a->raw);
}

struct chunk_into_args {
	const char *key;
	const struct bundle_entry *e;
	uint8_t *dst;
	uint8_t *stored; /* NULL for a raw chunk: read straight into dst */
};

static int chunk_into_copy(void *arg, struct store *copy)
{
	struct chunk_into_args *a = arg;
	uint8_t *buf = a->stored ? a->stored : a->dst;
	int rc = get_exact(copy, a->key, a->e->chunk_off, a->e->comp_len, buf);

	return rc ? rc : bundle_chunk_decode_into(a->e, buf, a->e->comp_len, a->dst);
}

int objread_chunk_into(struct store *st, const char *key, const struct bundle_entry *e,
		       uint8_t *dst)
{
	struct chunk_into_args a = { key, e, dst, NULL };
	int rc;

	if (e->codec != BUNDLE_RAW && e->codec != BUNDLE_ZSTD)
		return -EBADMSG;
	if (e->codec == BUNDLE_ZSTD && !(a.stored = malloc(e->comp_len ? e->comp_len : 1)))
		return -ENOMEM;
	rc = store_read_copies(st, key, chunk_into_copy, &a);
	free(a.stored);
	return rc;
}

int objread_chunk(struct store *st, const char *key, const struct bundle_entry *e,
		  struct nv_buf *raw)
{
	struct chunk_args a = { key, e, raw, malloc(e->comp_len ? e->comp_len : 1) };
	int rc;

	if (!a.stored)
		return -ENOMEM;
	rc = store_read_copies(st, key, chunk_copy, &a);
	free(a.stored);
	return rc;
}
