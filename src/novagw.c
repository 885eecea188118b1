/*
 * novagw.c - the Gateway (novagw(8)): a public, read-only HTTP API for
 * streams in front of the stars (DESIGN.md section 8).
 *
 *   novagw --listen=ADDR:PORT --star=ADDR:PORT [--star=...]
 *          --cluster-secret-file=FILE --api-keys-file=FILE [options]
 *
 * For: the options (one table, GW_OPTIONS, which generates --help and
 * drives the parsing), loading the secret and the keys, building the
 * source (the star source, wrapped by the plan source with
 * --serve-plan; --storage-bucket's store; --cache's tier for signed
 * fetches, engine/store/tier.h), the two budgets, the footer and plan
 * caches (--serve-plan) and the server, and waiting for SIGTERM or
 * SIGINT.  Not for: the server
 * (gw/http.h), where bytes come from (gw/source.h, gw/plan.c).
 *
 * Invariants:
 *  1. Every start-up refusal names the option and why, on stderr, with
 *     exit status 2 (usage) or 1 (a file or the socket).
 *  2. --help lists exactly the options the table holds, each with its
 *     default and range; tests/integration/t_gw_options.sh checks
 *     man/novagw.8 against it.
 */
#include "config.h"
#include "api/auth.h"
#include "api/client.h"
#include "api/wire.h"
#include "engine/store/store.h"
#include "engine/store/tier.h"
#include "gw/footers.h"
#include "gw/http.h"
#include "gw/keys.h"
#include "gw/plancache.h"
#include "gw/pool.h"
#include "gw/source.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#define MAX_STARS 64
/* --fetch-inflight's floor with --serve-plan: one vended run (8 MiB,
 * api/vend.c) and the page it fills. */
#define SERVE_PLAN_FETCH_MIN (16u << 20)

struct gw_opts {
	const char *listen, *secret_file, *keys_file, *debug, *storage_bucket;
	const char *cache, *cache_auth_file;
	const char *stars[MAX_STARS];
	unsigned nstars;
	uint64_t fetch_inflight, footer_cache, max_conns, client_timeout_s, heartbeat_s,
		fetch_wait_ms, star_timeout_ms, serve_plan, cache_slice_kib, cache_hedge_ms,
		cache_eps_pct, plan_cache;
	bool cache_knob; /* a --cache-* option was given */
};

enum opt_kind { OPT_STR, OPT_STARS, OPT_U64, OPT_FLAG };

/* NAME, META, kind, field, default, min, max, text. */
#define GW_OPTIONS(X)                                                                      \
	X("listen", "ADDR:PORT", OPT_STR, listen, 0, 0, 0,                                   \
	  "where readers connect (required)")                                               \
	X("star", "ADDR:PORT", OPT_STARS, stars, 0, 0, 0,                                    \
	  "a star's API (its -o listen=); repeat for more (at least one)")                 \
	X("cluster-secret-file", "FILE", OPT_STR, secret_file, 0, 0, 0,                      \
	  "the stars' cluster secret, mode 0600 (required)")                                \
	X("api-keys-file", "FILE", OPT_STR, keys_file, 0, 0, 0,                              \
	  "read-only API keys, \"BUCKET KEY\" per line, mode 0600 (required)")             \
	X("fetch-inflight", "BYTES", OPT_U64, fetch_inflight, 67108864, 2097152,             \
	  68719476736, "one pool of in-flight bytes over all responses")                   \
	X("footer-cache-bytes", "BYTES", OPT_U64, footer_cache, 33554432, 0, 68719476736,    \
	  "budget of footer windows, cached and in use (the plan source's)")                \
	X("plan-cache", "N", OPT_U64, plan_cache, 64, 0, 4096,                               \
	  "plans kept for the next pages (--serve-plan; 0: ask a star every time)")         \
	X("serve-plan", "", OPT_FLAG, serve_plan, 0, 0, 1,                                   \
	  "read settled history by ReadPlan from object storage, stars only at the tail")  \
	X("storage-bucket", "URL", OPT_STR, storage_bucket, 0, 0, 0,                         \
	  "the standard bucket (a store URL) for raw plans, with the Gateway's credentials") \
	X("cache", "URL+URL", OPT_STR, cache, 0, 0, 0,                                       \
	  "caching proxies (http://host:port, + between) that signed fetches go through")   \
	X("cache-auth-file", "FILE", OPT_STR, cache_auth_file, 0, 0, 0,                      \
	  "the proxies' X-Nova-Cache-Auth token, mode 0600 (required with --cache)")       \
	X("cache-slice-kib", "KIB", OPT_U64, cache_slice_kib, STORE_TIER_SLICE_KIB_DEFAULT,  \
	  STORE_TIER_SLICE_KIB_MIN, STORE_TIER_SLICE_KIB_MAX,                              \
	  "the proxies' slice size: one page of the ring")                                  \
	X("cache-hedge-ms", "MS", OPT_U64, cache_hedge_ms, STORE_TIER_HEDGE_MS_DEFAULT,      \
	  STORE_TIER_HEDGE_MS_MIN, STORE_TIER_HEDGE_MS_MAX,                                \
	  "a proxy that sends no byte this long: the piece goes straight to the bucket")   \
	X("cache-eps-pct", "PCT", OPT_U64, cache_eps_pct, STORE_TIER_EPS_PCT_DEFAULT,        \
	  STORE_TIER_EPS_PCT_MIN, STORE_TIER_EPS_PCT_MAX,                                  \
	  "bounded loads: a proxy takes at most (100 + PCT)% of the average in flight")   \
	X("max-conns", "N", OPT_U64, max_conns, 512, 1, 65536,                               \
	  "concurrent connections, one thread each")                                        \
	X("client-timeout-s", "S", OPT_U64, client_timeout_s, 30, 1, 3600,                   \
	  "a client that takes nothing this long is dropped")                               \
	X("heartbeat-s", "S", OPT_U64, heartbeat_s, 15, 1, 3600,                             \
	  "an events response idle this long sends a heartbeat event")                      \
	X("fetch-wait-ms", "MS", OPT_U64, fetch_wait_ms, 5000, 0, 60000,                     \
	  "a records request waits this long for the fetch pool, then 503")                 \
	X("star-timeout-ms", "MS", OPT_U64, star_timeout_ms, 30000, 100, 600000,             \
	  "one request to a star, whole")                                                   \
	X("debug", "LIST", OPT_STR, debug, 0, 0, 0,                                          \
	  "debug logs of these subsystems, joined by + (api)")

struct opt_def {
	const char *name, *meta;
	enum opt_kind kind;
	size_t field;
	uint64_t def, min, max;
	const char *text;
};

#define OPT_ROW(n, m, k, f, d, lo, hi, t) \
	{ n, m, k, offsetof(struct gw_opts, f), d, lo, hi, t },
static const struct opt_def opts_table[] = { GW_OPTIONS(OPT_ROW) };
#define NOPTS (sizeof(opts_table) / sizeof(opts_table[0]))

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: novagw --listen=ADDR:PORT --star=ADDR:PORT [--star=...]\n"
		   "              --cluster-secret-file=FILE --api-keys-file=FILE [options]\n\n"
		   "A read-only HTTP API for novafs streams in front of the stars (novagw(8)).\n\n"
		   "options:\n");
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt_def *o = &opts_table[i];

		if (o->kind == OPT_FLAG)
			fprintf(f, "    --%s  %s", o->name, o->text);
		else
			fprintf(f, "    --%s=%s  %s", o->name, o->meta, o->text);
		if (o->kind == OPT_U64)
			fprintf(f, "\n        (default: %llu; range %llu..%llu)",
				(unsigned long long)o->def, (unsigned long long)o->min,
				(unsigned long long)o->max);
		fprintf(f, "\n");
	}
	fprintf(f, "    --help  this text\n    --version  the version\n");
}

/* BYTES with an optional binary suffix K, M or G. */
static int parse_size(const char *v, uint64_t *out)
{
	size_t n = strlen(v);
	unsigned shift = 0;
	char num[32];

	if (n && strchr("KMG", v[n - 1])) {
		shift = v[n - 1] == 'K' ? 10 : v[n - 1] == 'M' ? 20 : 30;
		n--;
	}
	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, v, n);
	num[n] = '\0';
	if (api_parse_u64(num, 0, out) || *out > (UINT64_MAX >> shift))
		return -EINVAL;
	*out <<= shift;
	return 0;
}

static int set_opt(struct gw_opts *g, const struct opt_def *o, const char *v)
{
	char *base = (char *)g;
	uint64_t x;

	switch (o->kind) {
	case OPT_STR:
		*(const char **)(void *)(base + o->field) = v;
		return 0;
	case OPT_STARS:
		if (g->nstars >= MAX_STARS || !v[0] || strlen(v) > LEASE_ADDR_MAX)
			return -EINVAL;
		g->stars[g->nstars++] = v;
		return 0;
	default:
		if (parse_size(v, &x) || x < o->min || x > o->max)
			return -EINVAL;
		*(uint64_t *)(void *)(base + o->field) = x;
		return 0;
	}
}

/* argv into *g: 0, 1 (--help/--version answered), or -EINVAL (said). */
static int parse_args(int argc, char **argv, struct gw_opts *g)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (opts_table[i].kind == OPT_U64 || opts_table[i].kind == OPT_FLAG)
			*(uint64_t *)(void *)((char *)g + opts_table[i].field) = opts_table[i].def;
	for (int a = 1; a < argc; a++) {
		const char *arg = argv[a], *eq = strchr(arg, '=');
		const struct opt_def *o = NULL;

		if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
			usage(stdout);
			return 1;
		}
		if (!strcmp(arg, "--version")) {
			printf("novagw %s\n", PACKAGE_VERSION);
			return 1;
		}
		for (size_t i = 0; !strncmp(arg, "--", 2) && i < NOPTS; i++) {
			size_t n = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);

			if (strlen(opts_table[i].name) == n && !strncmp(arg + 2, opts_table[i].name, n)
			    && !eq == (opts_table[i].kind == OPT_FLAG))
				o = &opts_table[i];
		}
		if (o && o->kind == OPT_FLAG) {
			*(uint64_t *)(void *)((char *)g + o->field) = 1;
			continue;
		}
		if (!o) {
			fprintf(stderr, "novagw: unknown option '%s' (--help lists them)\n", arg);
			return -EINVAL;
		}
		if (!strncmp(o->name, "cache-", 6))
			g->cache_knob = true;
		if (set_opt(g, o, eq + 1)) {
			fprintf(stderr, "novagw: %s: bad value", arg);
			if (o->kind == OPT_U64)
				fprintf(stderr, " (a number of %s, %llu..%llu)", o->meta,
					(unsigned long long)o->min, (unsigned long long)o->max);
			fprintf(stderr, "\n");
			return -EINVAL;
		}
	}
	if (!g->listen || !g->nstars || !g->secret_file || !g->keys_file) {
		fprintf(stderr, "novagw: --listen, --star, --cluster-secret-file and "
				"--api-keys-file are required (--help)\n");
		return -EINVAL;
	}
	if (g->storage_bucket && !g->serve_plan) {
		fprintf(stderr, "novagw: --storage-bucket is for --serve-plan's raw plans: "
				"without --serve-plan nothing reads it\n");
		return -EINVAL;
	}
	if (g->cache_knob && !g->cache) {
		fprintf(stderr, "novagw: --cache-* options need --cache (the proxies)\n");
		return -EINVAL;
	}
	if (g->cache && !g->serve_plan) {
		fprintf(stderr, "novagw: --cache is for --serve-plan's signed fetches: "
				"without --serve-plan nothing reads through it\n");
		return -EINVAL;
	}
	if (g->cache && !g->cache_auth_file) {
		fprintf(stderr, "novagw: --cache needs --cache-auth-file (the proxies' token)\n");
		return -EINVAL;
	}
	if (g->serve_plan && g->fetch_inflight < SERVE_PLAN_FETCH_MIN) {
		fprintf(stderr, "novagw: --serve-plan needs --fetch-inflight of at least %u MiB "
				"(a vended run of chunks is up to 8 MiB, besides the page it fills)\n",
			SERVE_PLAN_FETCH_MIN >> 20);
		return -EINVAL;
	}
	if (g->serve_plan && g->footer_cache == 0) {
		fprintf(stderr, "novagw: --serve-plan needs --footer-cache-bytes above 0 (its "
				"footers are taken from it)\n");
		return -EINVAL;
	}
	return 0;
}

/* --storage-bucket's store into *out (NULL without the option): 0, or 1
 * (said why).  A directory must exist: a read-only reader never creates
 * the bucket it reads (store_open() would). */
static int open_bucket(const struct gw_opts *o, struct store **out)
{
	const char *url = o->storage_bucket, *dir = NULL;
	struct stat st;
	int rc;

	*out = NULL;
	if (!url) {
		if (o->serve_plan)
			nv_log(NV_INFO, NV_SUB_API, "novagw: no --storage-bucket: reads that meet "
			       "raw plans will be proxied through a star (signed vending "
			       "needs none)");
		return 0;
	}
	if (!strncmp(url, "dir:", 4))
		dir = url + 4;
	else if (url[0] == '/')
		dir = url;
	if (dir && (stat(dir, &st) || !S_ISDIR(st.st_mode))) {
		fprintf(stderr, "novagw: --storage-bucket=%s: %s\n", url,
			errno == ENOENT || !S_ISDIR(st.st_mode) ? "no such directory" : strerror(errno));
		return 1;
	}
	rc = store_open(url, out);
	if (rc) {
		fprintf(stderr, "novagw: --storage-bucket=%s: %s\n", url,
			rc == -EINVAL ? "not a store URL (dir:/PATH or s3://BUCKET?...)"
				      : strerror(-rc));
		return 1;
	}
	return 0;
}

/* --cache's tier into *out (NULL without the option): 0, or 1 (said why). */
static int open_tier(const struct gw_opts *o, struct store_tier **out)
{
	struct store_tier_opts to = {
		.list = o->cache, .auth_file = o->cache_auth_file,
		.slice_kib = (long)o->cache_slice_kib, .hedge_ms = (long)o->cache_hedge_ms,
		.eps_pct = (long)o->cache_eps_pct, .ctx = "novagw", .list_name = "--cache",
		.auth_name = "--cache-auth-file",
	};
	int rc;

	*out = NULL;
	if (!o->cache)
		return 0;
	rc = store_tier_new(&to, out);
	if (rc) {
		fprintf(stderr, "novagw: --cache=%s --cache-auth-file=%s: %s\n", o->cache,
			o->cache_auth_file, rc == -EINVAL ? "refused (the log line above says why)"
							  : strerror(-rc));
		return 1;
	}
	nv_log(NV_INFO, NV_SUB_API, "novagw: signed fetches go through %d cache proxies "
	       "(%llu KiB slices, hedge %llu ms)", (*out)->n,
	       (unsigned long long)o->cache_slice_kib, (unsigned long long)o->cache_hedge_ms);
	return 0;
}

/* The tier's counters, at exit. */
static void report_tier(const struct store_tier *t)
{
	unsigned long long gets, fails;

	if (!t)
		return;
	store_tier_counts(t, &gets, &fails);
	nv_log(NV_INFO, NV_SUB_API, "novagw: cache tier: %llu pieces through %d proxies, %llu "
	       "straight to the bucket, %llu proxy failures", gets, t->n,
	       (unsigned long long)atomic_load(&t->direct), fails);
}

/* The source the server reads: the star source, wrapped by the plan
 * source with --serve-plan.  0 or -errno. */
static int make_source(const struct gw_opts *o, struct api_client *cl, struct store *bucket,
		       struct store_tier *tier, const struct gw_server_cfg *sc,
		       struct gw_source **out)
{
	struct gw_source *stars;
	struct gw_plan_cfg pc = {
		.cl = cl, .addrs = o->stars, .naddrs = o->nstars, .bucket = bucket, .tier = tier,
		.fetch = sc->fetch, .footers = sc->footers, .wait_ns = sc->fetch_wait_ns,
		.timeout_ms = (unsigned)o->star_timeout_ms,
		.fcache = sc->fcache, .plans = sc->plans,
	};
	int rc = gw_source_stars(cl, o->stars, o->nstars, &stars);

	if (rc || !o->serve_plan) {
		*out = rc ? NULL : stars;
		return rc;
	}
	pc.stars = stars;
	rc = gw_source_plan(&pc, out);
	if (rc)
		gw_source_free(stars);
	return rc;
}

/* Load the secret and the keys: 0, or 1 (said why). */
static int load_files(const struct gw_opts *o, struct api_secret **sec, struct gw_keys **keys)
{
	const char *why = NULL;
	unsigned line = 0;
	int rc = api_secret_load(o->secret_file, sec, &why);

	if (rc) {
		fprintf(stderr, "novagw: --cluster-secret-file=%s: %s\n", o->secret_file, why);
		return 1;
	}
	rc = gw_keys_load(o->keys_file, keys, &why, &line);
	if (rc) {
		if (line)
			fprintf(stderr, "novagw: --api-keys-file=%s: line %u: %s\n", o->keys_file,
				line, why);
		else
			fprintf(stderr, "novagw: --api-keys-file=%s: %s\n", o->keys_file, why);
		api_secret_free(*sec);
		return 1;
	}
	return 0;
}

static int run(const struct gw_opts *o, struct api_secret *sec, const struct gw_keys *keys)
{
	struct api_client_cfg cc = {
		.secret = sec, .max_handles = (unsigned)o->max_conns + 16,
		.timeout_ms = (unsigned)o->star_timeout_ms,
	};
	struct gw_server_cfg sc = {
		.listen = o->listen, .keys = keys, .max_conns = (unsigned)o->max_conns,
		.client_timeout_s = (unsigned)o->client_timeout_s,
		.heartbeat_ns = o->heartbeat_s * NV_NS_PER_S,
		.fetch_wait_ns = o->fetch_wait_ms * 1000000ull,
	};
	struct api_client *cl = NULL;
	struct store *bucket = NULL;
	struct store_tier *tier = NULL;
	struct gw_server *srv = NULL;
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t term, none;
	int rc;

	/* SIGTERM and SIGINT go to this thread alone: blocked before any
	 * thread starts (they inherit the mask), taken in sigsuspend(). */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (open_bucket(o, &bucket))
		return 1;
	if (open_tier(o, &tier)) {
		store_close(bucket);
		return 1;
	}
	sc.fetch = gw_pool_new("fetch-inflight", o->fetch_inflight);
	sc.footers = gw_pool_new("footer-cache", o->footer_cache);
	if (o->serve_plan) {
		sc.fcache = gw_footers_new(sc.footers);
		sc.plans = gw_plans_new((unsigned)o->plan_cache);
	}
	rc = sc.fetch && sc.footers && (!o->serve_plan || (sc.fcache && sc.plans))
	     ? api_client_new(&cc, &cl) : -ENOMEM;
	if (rc == 0)
		rc = make_source(o, cl, bucket, tier, &sc, &sc.src);
	if (rc == 0 && (rc = gw_server_start(&sc, &srv)))
		fprintf(stderr, "novagw: --listen=%s: %s\n", o->listen,
			rc == -EINVAL ? "not ADDR:PORT, or it does not resolve" : strerror(-rc));
	if (rc == 0) {
		nv_log(NV_INFO, NV_SUB_API, "novagw listening on %s, %u star(s), %zu API key(s), "
		       "%s", o->listen, o->nstars, gw_keys_count(keys),
		       o->serve_plan ? "serving plans" : "proxy mode");
		sigemptyset(&none);
		while (!stop_sig)
			sigsuspend(&none);
		nv_log(NV_INFO, NV_SUB_API, "novagw: signal %d, stopping", (int)stop_sig);
		gw_server_stop(srv);
	}
	gw_source_free(sc.src);
	api_client_free(cl);
	store_close(bucket);
	report_tier(tier);
	store_tier_free(tier);
	gw_plans_free(sc.plans);
	gw_footers_free(sc.fcache);
	gw_pool_free(sc.footers);
	gw_pool_free(sc.fetch);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct gw_opts o = { 0 };
	struct api_secret *sec = NULL;
	struct gw_keys *keys = NULL;
	int rc;

	nv_log_set_ident("novagw");
	rc = parse_args(argc, argv, &o);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (o.debug) {
		const char *bad;
		int badlen;

		if (nv_log_set_debug(o.debug, &bad, &badlen)) {
			fprintf(stderr, "novagw: --debug: unknown subsystem '%.*s'\n", badlen, bad);
			return 2;
		}
	}
	if (load_files(&o, &sec, &keys))
		return 1;
	rc = run(&o, sec, keys);
	gw_keys_free(keys);
	api_secret_free(sec);
	return rc;
}
