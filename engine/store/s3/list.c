/*
 * list.c - store_list() over S3 ListObjectsV2, paged and checked (S3
 * backend; overview and invariants in internal.h).
 *
 * For: s3_list(): keys inside our prefix, after start_after, in strictly
 * increasing byte order, as store.h promises, on servers that page in
 * order (streamed) and on those that do not (sorted mode, below).
 * Not for: sending requests (request.c), deleting (ops.c).
 *
 * Invariants, here:
 *  1. fn never sees a key twice nor out of byte order: in stream mode
 *     each key must sort after the last one handed out; a page that
 *     breaks it fails the call (-EIO), or, before any key was handed
 *     out, switches the store to sorted mode (list_unsorted, sticky).
 *  2. A truncated page must bring a continuation token, and at most
 *     S3_LIST_EMPTY_PAGES_MAX pages in a row may bring no key.
 *  3. Sorted mode holds at most S3_LIST_SORT_BYTES of keys.
 *
 * Locking: a struct lister belongs to one call; list_unsorted is an
 * atomic of struct s3_store.
 */
#include "config.h"
#include "engine/store/s3/internal.h"
#include "engine/store/s3/xml.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Listing.  ListObjectsV2 pages (list-type=2, start-after on the first
 * page, continuation-token after), checked: keys inside our prefix, after
 * start_after, in strictly increasing byte order, as store.h promises.
 *
 * A server that pages in another order (s3rver walks its directories:
 * "a/c/d" before "a/c-e") cannot be streamed.  When the first page shows
 * it, before anything was handed to fn, the store switches to sorted
 * mode for good (logged once): every listing then collects the whole
 * range, at most S3_LIST_SORT_BYTES of keys, sorts and hands it out.
 * When the disorder shows only after keys went to fn, that one call
 * fails with -EIO and later calls are sorted.
 */
#define S3_LIST_SORT_BYTES (64u << 20)
#define S3_LIST_RESTART 2 /* internal: switch to sorted mode, start over */

struct list_entry {
	char *key;     /* owned: the full key */
	uint64_t size;
};

struct lister {
	struct s3_store *s;
	const char *fprefix, *after; /* full prefix; full start_after or "" */
	store_list_fn fn;
	void *arg;
	bool sorted;
	bool emitted;                /* stream mode: fn saw a key */
	char last[STORE_KEY_MAX + 2];/* stream mode: the last key seen */
	struct list_entry *v;        /* sorted mode */
	size_t n, cap, bytes;
};

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct list_entry *)a)->key,
		      ((const struct list_entry *)b)->key);
}

/* Hand one full key to fn: 0 go on, > 0 stop, < 0 error. */
static int list_emit(struct lister *l, const char *k, uint64_t size)
{
	size_t plen = strlen(l->s->prefix);

	/* Objects that are no store keys (written by other tools) are not
	 * ours to list, as in the directory backend. */
	if (store_key_check(k + plen) < 0) {
		nv_log(NV_DEBUG, NV_SUB_STORE, "s3://%s list: skipping '%.64s'",
		       l->s->bucket, k);
		return 0;
	}
	l->emitted = true;
	return l->fn(l->arg, k + plen, size);
}

/* One parsed page: check, then stream or collect its keys. */
static int list_page(struct lister *l, const struct xml_node *root, int *nkeys)
{
	const struct xml_node *c;
	char prev[STORE_KEY_MAX + 2];
	size_t tn, kn;
	int rc = 0;

	/* Pass 1: form, prefix and (stream mode) order. */
	snprintf(prev, sizeof(prev), "%s", l->last);
	for (c = xml_child(root, "Contents"); c; c = xml_next(c, "Contents")) {
		const char *k = xml_child_text(c, "Key", &kn), *t;
		uint64_t size;

		t = xml_child_text(c, "Size", &tn);
		if (!k || !t || s3_parse_u64(t, tn, &size) < 0 || kn == 0 ||
		    kn > STORE_KEY_MAX || strlen(k) != kn ||
		    strncmp(k, l->fprefix, strlen(l->fprefix)) != 0)
			return s3_bad_answer(l->s, "list", l->fprefix,
					     "a Contents without Key/Size or outside the prefix");
		if (l->sorted)
			continue;
		if (strcmp(k, l->after) <= 0 || (prev[0] && strcmp(k, prev) <= 0)) {
			if (!atomic_exchange(&l->s->list_unsorted, true))
				nv_log(NV_WARN, NV_SUB_STORE,
				       "s3://%s: the server lists keys out of byte order; "
				       "listings are sorted here from now on (at most %u "
				       "MiB of keys each)", l->s->bucket,
				       S3_LIST_SORT_BYTES >> 20);
			if (!l->emitted)
				return S3_LIST_RESTART;
			return s3_bad_answer(l->s, "list", l->fprefix,
					     "keys out of order after the first page");
		}
		memcpy(prev, k, kn + 1);
	}
	/* Pass 2: hand out or collect. */
	for (c = xml_child(root, "Contents"); c && rc == 0; c = xml_next(c, "Contents")) {
		const char *k = xml_child_text(c, "Key", &kn);
		const char *t = xml_child_text(c, "Size", &tn);
		uint64_t size = 0;

		(void)s3_parse_u64(t, tn, &size); /* checked in pass 1 */
		(*nkeys)++;
		if (!l->sorted) {
			memcpy(l->last, k, kn + 1);
			rc = list_emit(l, k, size);
			continue;
		}
		if (strcmp(k, l->after) <= 0)
			continue;
		if (l->bytes + kn + 1 > S3_LIST_SORT_BYTES)
			return s3_bad_answer(l->s, "list", l->fprefix,
					     "unsorted listing too large to sort");
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 1024;
			struct list_entry *nv = realloc(l->v, cap * sizeof(*nv));

			if (!nv)
				return -ENOMEM;
			l->v = nv;
			l->cap = cap;
		}
		l->v[l->n].key = strdup(k);
		if (!l->v[l->n].key)
			return -ENOMEM;
		l->v[l->n++].size = size;
		l->bytes += kn + 1;
	}
	return rc;
}

/* Walk every page once.  0, > 0 (fn stopped), S3_LIST_RESTART, < 0. */
static int list_walk(struct lister *l)
{
	struct s3_store *s = l->s;
	char maxkeys[16];
	char *token = NULL;
	int rc = 0, empty_pages = 0;

	snprintf(maxkeys, sizeof(maxkeys), "%d", s->list_max_keys);
	for (;;) {
		struct s3_req q = { .what = "list", .method = "GET" };
		struct s3_resp r;
		struct xml_doc *d = NULL;
		const struct xml_node *root;
		const char *t;
		size_t tn;
		int nkeys = 0;
		bool truncated = false;

		q.query[q.nquery++] = (struct sigv4_kv){ "list-type", "2" };
		q.query[q.nquery++] = (struct sigv4_kv){ "max-keys", maxkeys };
		if (l->fprefix[0])
			q.query[q.nquery++] = (struct sigv4_kv){ "prefix", l->fprefix };
		if (token)
			q.query[q.nquery++] = (struct sigv4_kv){ "continuation-token", token };
		else if (l->after[0] && !l->sorted)
			q.query[q.nquery++] = (struct sigv4_kv){ "start-after", l->after };
		s3_resp_init(&r, S3_XML_MAX);
		rc = s3_do(s, &q, &r);
		if (rc == 0 && !s3_ok2xx(&r))
			rc = s3_fail(s, "list", l->fprefix, &r);
		if (rc == 0 && (xml_parse((const char *)r.body.ptr, r.body.len, &d) < 0 ||
				strcmp(xml_name(xml_root(d)), "ListBucketResult")))
			rc = s3_bad_answer(s, "list", l->fprefix, "malformed ListBucketResult");
		if (rc == 0) {
			root = xml_root(d);
			rc = list_page(l, root, &nkeys);
			t = xml_child_text(root, "IsTruncated", NULL);
			truncated = t && strcmp(t, "true") == 0;
		}
		free(token);
		token = NULL;
		if (rc == 0 && truncated) {
			t = xml_child_text(root, "NextContinuationToken", &tn);
			if (!t || tn == 0 || tn > S3_TOKEN_MAX || strlen(t) != tn)
				rc = s3_bad_answer(s, "list", l->fprefix,
						   "truncated without a continuation token");
			else if (!(token = strdup(t)))
				rc = -ENOMEM;
			else if (nkeys == 0 && ++empty_pages > S3_LIST_EMPTY_PAGES_MAX)
				rc = s3_bad_answer(s, "list", l->fprefix,
						   "pages without keys and without end");
			else if (nkeys)
				empty_pages = 0;
		}
		xml_free(d);
		nv_buf_free(&r.body);
		if (rc || !truncated)
			break;
	}
	free(token);
	return rc;
}

static void lister_clear(struct lister *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].key);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = l->bytes = 0;
}

int s3_list(void *be, const char *prefix, const char *start_after,
	    store_list_fn fn, void *arg)
{
	struct s3_store *s = be;
	char fprefix[STORE_KEY_MAX + 2], after[STORE_KEY_MAX + 2];
	struct lister l = { .s = s, .fprefix = fprefix, .after = after,
			    .fn = fn, .arg = arg };
	int rc;

	if ((size_t)snprintf(fprefix, sizeof(fprefix), "%s%s", s->prefix, prefix) >=
		    sizeof(fprefix) ||
	    (size_t)snprintf(after, sizeof(after), "%s%s",
			     start_after[0] ? s->prefix : "", start_after) >=
		    sizeof(after))
		return 0; /* longer than any key: nothing can match */
	l.sorted = atomic_load(&s->list_unsorted);
	rc = list_walk(&l);
	if (rc == S3_LIST_RESTART) {
		lister_clear(&l);
		l.sorted = true;
		l.last[0] = '\0';
		rc = list_walk(&l);
	}
	if (rc == 0 && l.sorted && l.n) { /* l.v is NULL while empty */
		qsort(l.v, l.n, sizeof(*l.v), entry_cmp);
		for (size_t i = 0; i < l.n && rc == 0; i++)
			if (i == 0 || strcmp(l.v[i].key, l.v[i - 1].key))
				rc = list_emit(&l, l.v[i].key, l.v[i].size);
	}
	lister_clear(&l);
	return rc > 0 ? 0 : rc;
}
