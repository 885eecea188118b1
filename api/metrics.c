/*
 * metrics.c - see metrics.h: Prometheus text from star_stats() and
 * star_get_gauges().
 *
 * For: formatting only.  Not for: deciding what is counted (engine/).
 *
 * A counter of engine/stats.h whose comment says "gauge" is exposed as
 * a gauge (gauge_names[]), the rest as counters with the _total suffix
 * the format asks of counters.
 *
 * Invariants: those of metrics.h.
 */
#include "config.h"
#include "api/metrics.h"
#include "engine/star.h"
#include "src/base/buf.h"

#include <errno.h>
#include <string.h>

/* The nv_stats fields that are gauges (engine/stats.h says so). */
static const char *const gauge_names[] = {
	"settle_era_ms_max", "settle_pass_ms_max", "settle_markers_waiting",
	"settle_oldest_standard_ms", "settle_oldest_express_ms", "settle_chains_failing",
	"settle_backoff_ms", "settle_duty", "parked_readers", "subscriptions",
};

struct visit {
	struct nv_buf *b;
	const char *star;
	int rc;
};

static bool is_gauge(const char *name)
{
	for (size_t i = 0; i < sizeof(gauge_names) / sizeof(gauge_names[0]); i++)
		if (!strcmp(name, gauge_names[i]))
			return true;
	return false;
}

static void put_metric(struct visit *v, const char *name, const char *type, uint64_t value)
{
	const char *suffix = strcmp(type, "counter") ? "" : "_total";

	if (v->rc)
		return;
	v->rc = nv_buf_printf(v->b, "# HELP novafs_%s%s novafs %s %s\n# TYPE novafs_%s%s %s\n"
			      "novafs_%s%s{star=\"%s\"} %llu\n", name, suffix, type, name, name,
			      suffix, type, name, suffix, v->star, (unsigned long long)value);
}

static void on_stat(void *arg, const char *name, uint64_t value)
{
	struct visit *v = arg;

	put_metric(v, name, is_gauge(name) ? "gauge" : "counter", value);
}

int api_metrics_text(struct star *st, struct nv_buf *b)
{
	struct visit v = { b, star_id(st), 0 };
	struct star_gauges g;

	nv_stats_visit(star_stats(st), on_stat, &v);
	star_get_gauges(st, &g);
	put_metric(&v, "backlog_bytes", "gauge", g.backlog_bytes);
	put_metric(&v, "backlog_budget_bytes", "gauge", g.backlog_budget);
	put_metric(&v, "tail_cache_bytes", "gauge", g.tail_cache_bytes);
	put_metric(&v, "read_cache_bytes", "gauge", g.read_cache_bytes);
	put_metric(&v, "fetch_cache_bytes", "gauge", g.fetch_cache_bytes);
	put_metric(&v, "streams_loaded", "gauge", g.streams_loaded);
	put_metric(&v, "slots_live", "gauge", g.slots_live);
	return v.rc;
}

enum MHD_Result api_metrics_reply(struct MHD_Connection *c, struct star *st)
{
	struct MHD_Response *resp;
	struct nv_buf b;
	enum MHD_Result ret;
	unsigned status = MHD_HTTP_OK;
	static const char failed[] = "# metrics could not be built\n";

	nv_buf_init(&b, API_METRICS_MAX);
	if (api_metrics_text(st, &b)) {
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		resp = MHD_create_response_from_buffer(sizeof(failed) - 1, (void *)failed,
						       MHD_RESPMEM_PERSISTENT);
	} else {
		resp = MHD_create_response_from_buffer(b.len, b.ptr, MHD_RESPMEM_MUST_COPY);
	}
	nv_buf_free(&b);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}
