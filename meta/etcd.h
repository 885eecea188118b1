/*
 * etcd.h - the etcd metastore backend (meta/etcd/): kv.h over etcd's v3
 * JSON gateway (libcurl + jansson), for metastores shared by several
 * hosts.
 *
 * URL: etcd://HOST:PORT[;HOST:PORT...]/PREFIX[?opt=val&opt=val...]
 *      etcd+https://... the same over TLS.
 * Every key lives under "PREFIX/" in etcd.  Options: cacert=, cert=,
 * key= (PEM files, TLS), password_file= (a file holding "user:password";
 * the token from /v3/auth/authenticate is renewed when it expires),
 * timeout= (seconds a call keeps retrying while no member answers,
 * default 30; then -ETIMEDOUT), request_timeout= (milliseconds per HTTP
 * request, default 5000).  Reads are linearizable; members are tried in
 * order from the last that answered.
 */
#ifndef NOVAFS_META_ETCD_H
#define NOVAFS_META_ETCD_H

#include "meta/kv.h"

/* Open from the whole URL.  0 and *out (caller owns; kv_close()), or
 * -EINVAL (bad URL or option, logged), -errno of the first contact. */
int etcd_kv_open(const char *url, struct kv **out) __attribute__((warn_unused_result));

/* Its kv_open() schemes: "etcd://" and "etcd+https://" (meta/schemes.c). */
extern const struct kv_scheme etcd_kv_scheme;
extern const struct kv_scheme etcd_https_kv_scheme;

#endif
