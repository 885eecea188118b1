/*
 * paths.h - where novafs keeps things by default.
 */
#ifndef NOVAFS_BASE_PATHS_H
#define NOVAFS_BASE_PATHS_H

#include <stddef.h>

/* The default data directory: /var/lib/novafs for root, else
 * $XDG_DATA_HOME/novafs or ~/.local/share/novafs.  Written into buf. */
void nv_default_data_dir(char *buf, size_t cap);

#endif
