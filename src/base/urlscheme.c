/*
 * urlscheme.c - see urlscheme.h.
 */
#include "config.h"
#include "src/base/urlscheme.h"

#include <stdio.h>
#include <string.h>

int nv_url_scheme_find(nv_url_scheme_at_fn at, const char *url, const char **arg)
{
	const struct nv_url_scheme *sc;

	for (size_t i = 0; url && (sc = at(i)); i++) {
		size_t n = strlen(sc->prefix);

		if (sc->path && url[0] == '/') {
			*arg = url;
			return (int)i;
		}
		if (strncmp(url, sc->prefix, n) != 0)
			continue;
		*arg = sc->path ? url + n : url;
		return sc->path && (*arg)[0] != '/' ? -1 : (int)i;
	}
	return -1;
}

char *nv_url_scheme_usages(nv_url_scheme_at_fn at, char *buf, size_t cap)
{
	const struct nv_url_scheme *sc;
	size_t n = 0;

	if (cap)
		buf[0] = '\0';
	for (size_t i = 0; (sc = at(i)) && n < cap; i++) {
		int w = snprintf(buf + n, cap - n, "%s%s",
				 i == 0 ? "" : at(i + 1) ? ", " : " or ", sc->usage);

		if (w < 0)
			break;
		n += (size_t)w;
	}
	return buf;
}
