/*
 * urlscheme.h - choosing a backend by the scheme of its URL.
 *
 * For: store_open() (engine/store/store.c) and kv_open() (meta/kv.c),
 * whose scheme tables (engine/store/schemes.c, meta/schemes.c) list
 * entries that begin with a struct nv_url_scheme; the matching rule and
 * the "want a, b or c" message are written once, here.  Not for: parsing
 * what follows the prefix (each backend's open does), or opening anything.
 *
 * Invariants:
 *  1. A URL selects the first entry whose prefix it starts with; an
 *     absolute path alone ("/x") selects the entry with path = true.
 *  2. With path = true, what follows the prefix must be an absolute path,
 *     else nothing matches (a relative path is never guessed at).
 */
#ifndef NOVAFS_BASE_URLSCHEME_H
#define NOVAFS_BASE_URLSCHEME_H

#include <stdbool.h>
#include <stddef.h>

struct nv_url_scheme {
	const char *prefix; /* "dir:", "s3://", "sqlite:": the URL starts with it */
	/* How the URL is written, for the error message of a bad URL:
	 * "dir:/abs/path, /abs/path". */
	const char *usage;
	/* true: what follows the prefix must be an absolute path, and an
	 * absolute path alone also selects this scheme; open gets the path.
	 * false: open gets the whole URL. */
	bool path;
};

/* Entry i of a caller's table, or NULL past its end. */
typedef const struct nv_url_scheme *(*nv_url_scheme_at_fn)(size_t i);

/*
 * The index of the entry url selects (invariants 1-2), with *arg set to
 * what its open takes (the path, or the whole URL); -1 when none does or
 * url is NULL.
 */
int nv_url_scheme_find(nv_url_scheme_at_fn at, const char *url, const char **arg);

/* "u1, u2 or u3" from the entries' usages into buf (cap bytes, always
 * terminated, cut when too small).  Returns buf. */
char *nv_url_scheme_usages(nv_url_scheme_at_fn at, char *buf, size_t cap);

#endif
