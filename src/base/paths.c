/*
 * paths.c - see paths.h.
 */
#include "config.h"
#include "src/base/paths.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void nv_default_data_dir(char *buf, size_t cap)
{
	const char *x = getenv("XDG_DATA_HOME"), *h = getenv("HOME");

	if (geteuid() == 0)
		snprintf(buf, cap, "/var/lib/novafs");
	else if (x && *x)
		snprintf(buf, cap, "%s/novafs", x);
	else
		snprintf(buf, cap, "%s/.local/share/novafs", h ? h : "/tmp");
}
