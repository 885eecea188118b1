/*
 * schemes.c - the URL schemes of kv_open(): the one file that knows which
 * metastore backends exist (see kv.h struct kv_scheme).
 *
 * For: listing the backends compiled into libnovameta.a, in the order
 * kv_open() tries them and its error message names them.  A new backend
 * (the etcd metastore) is one line here, its descriptor coming from its
 * own header; one built only under a configure switch is listed under
 * that switch's #if.
 * Not for: parsing URLs (each backend parses what follows its prefix).
 *
 * Invariants:
 *  1. No two prefixes are a prefix of each other, and at most one scheme
 *     takes bare absolute paths (path = true), so a URL selects at most
 *     one backend whatever the order.
 *  2. The table ends with NULL and is immutable (no lock).
 */
#include "config.h"
#include "meta/kv.h"
#include "meta/etcd.h"
#include "meta/sqlite.h"

#include <stddef.h>

const struct kv_scheme *const kv_schemes[] = {
	&sqlite_kv_scheme, /* sqlite:/abs/path, /abs/path (embedded default) */
	&etcd_kv_scheme,   /* etcd://HOST:PORT[;HOST:PORT...]/PREFIX (meta/etcd/) */
	&etcd_https_kv_scheme, /* etcd+https://... (TLS) */
	NULL,
};
