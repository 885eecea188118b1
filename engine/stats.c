/*
 * stats.c - see stats.h.
 */
#include "config.h"
#include "engine/stats.h"

void nv_stats_visit(const struct nv_stats *st, nv_stats_fn fn, void *arg)
{
#define NV_STATS_VISIT(name) fn(arg, #name, NV_STAT_GET(st, name));
	NV_STATS_FIELDS(NV_STATS_VISIT)
#undef NV_STATS_VISIT
}
