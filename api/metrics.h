/*
 * metrics.h - GET /metrics of the star API: the star's counters and
 * gauges in the Prometheus text exposition format (version 0.0.4).
 *
 * For: api/server.c.  Not for: the user.nova.stats xattr (fs/xattr.c
 * renders the same counters as JSON).
 *
 * Invariants:
 *  1. Every counter of engine/stats.h appears as novafs_<name>, and
 *     every field of struct star_gauges as a gauge, each with HELP and
 *     TYPE lines, labelled with the star id.
 *  2. The reply is built in a bounded buffer (API_METRICS_MAX).
 */
#ifndef NOVAFS_API_METRICS_H
#define NOVAFS_API_METRICS_H

#include <microhttpd.h>

struct star;
struct nv_buf;

#define API_METRICS_MAX (256u * 1024)

/* The exposition text of st into b (an nv_buf of at least
 * API_METRICS_MAX).  0 or -ENOMEM/-ENOSPC. */
int api_metrics_text(struct star *st, struct nv_buf *b) __attribute__((warn_unused_result));

/* Queue the 200 text/plain reply (500 when it cannot be built). */
enum MHD_Result api_metrics_reply(struct MHD_Connection *c, struct star *st);

#endif
