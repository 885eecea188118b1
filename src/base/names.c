/*
 * names.c - see names.h.
 */
#include "config.h"
#include "src/base/names.h"

#include <errno.h>
#include <string.h>

const char *nv_class_name(unsigned cls)
{
	switch (cls) {
	case NV_CLASS_STANDARD: return "standard";
	case NV_CLASS_EXPRESS: return "express";
	default: return "?";
	}
}

int nv_class_parse(const char *s, size_t n, unsigned *cls)
{
	/* Accept a trailing newline: `setfattr -v` values often carry one. */
	while (n && (s[n - 1] == '\n' || s[n - 1] == 0))
		n--;
	if (n == 8 && !memcmp(s, "standard", 8)) {
		*cls = NV_CLASS_STANDARD;
		return 0;
	}
	if (n == 7 && !memcmp(s, "express", 7)) {
		*cls = NV_CLASS_EXPRESS;
		return 0;
	}
	return -EINVAL;
}

int nv_bucket_name_check(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || name[0] == '.')
		return -EINVAL;
	if (n > NV_BUCKET_NAME_MAX)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return -EINVAL;
	}
	return 0;
}

int nv_stream_name_check(const char *name)
{
	size_t n = strlen(name);

	/* Dot-names are streams too (rsync's temporary files, .gitignore);
	 * only "." and ".." are not names. */
	if (n == 0 || !strcmp(name, ".") || !strcmp(name, "..") || strchr(name, '/'))
		return -EINVAL;
	if (n > NV_STREAM_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}
