/*
 * log.c - see log.h.
 *
 * Lines look like "2026-11-29T12:00:00.123Z novafs[42] WARN absorb: ...".
 * In daemon mode they go to syslog with the matching priority.
 */
#include "config.h"
#include "src/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

int nv_log_level = NV_INFO;
unsigned nv_log_debug_mask;
static int use_syslog;

static const char *const subsys_names[NV_SUB_COUNT] = {
	[NV_SUB_MAIN] = "main",       [NV_SUB_FS] = "fs",
	[NV_SUB_CHAIN] = "chain",     [NV_SUB_FLIGHT] = "flight",
	[NV_SUB_ABSORB] = "absorb",   [NV_SUB_READ] = "read",
	[NV_SUB_STORE] = "store",     [NV_SUB_META] = "meta",
	[NV_SUB_SETTLE] = "settle",   [NV_SUB_TRIM] = "trim",
	[NV_SUB_RECOVER] = "recover", [NV_SUB_CACHE] = "cache",
	[NV_SUB_WAKE] = "wake",       [NV_SUB_FAILPOINT] = "failpoint",
	[NV_SUB_API] = "api",
};

static const char *const level_names[] = { "ERROR", "WARN", "INFO", "DEBUG" };

const char *nv_log_subsys_name(enum nv_subsys s)
{
	return (unsigned)s < NV_SUB_COUNT ? subsys_names[s] : "?";
}

int nv_log_set_debug(const char *spec, const char **bad, int *badlen)
{
	unsigned mask = 0;
	const char *p = spec;

	/* ',' separates words; so do '+' and ':', because -o itself splits
	 * on commas (-o debug=absorb+chain). */
	while (p && *p) {
		const char *e = strpbrk(p, ",+:");
		size_t n = e ? (size_t)(e - p) : strlen(p);
		int found = 0;

		if (n == 3 && !strncmp(p, "all", 3)) {
			mask = ~0u;
			found = 1;
		}
		for (int i = 0; !found && i < NV_SUB_COUNT; i++) {
			if (strlen(subsys_names[i]) == n &&
			    !strncmp(p, subsys_names[i], n)) {
				mask |= 1u << i;
				found = 1;
			}
		}
		if (!found && n > 0) {
			if (bad)
				*bad = p;
			if (badlen)
				*badlen = (int)n;
			return -EINVAL;
		}
		p = e ? e + 1 : NULL;
	}
	nv_log_debug_mask = mask;
	return 0;
}

static const char *log_ident = "novafs";

void nv_log_set_ident(const char *ident)
{
	log_ident = ident;
}

void nv_log_use_syslog(const char *ident)
{
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	use_syslog = 1;
}

void nv_log_emit(enum nv_level level, enum nv_subsys sub, const char *fmt, ...)
{
	char line[2048];
	int n = 0;
	va_list ap;
	int saved = errno;

	if (!use_syslog) {
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = snprintf(line, sizeof(line),
			     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%d] ",
			     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			     tm.tm_hour, tm.tm_min, tm.tm_sec,
			     ts.tv_nsec / 1000000, log_ident, (int)getpid());
	}
	n += snprintf(line + n, sizeof(line) - (size_t)n, "%s %s: ",
		      level_names[level], nv_log_subsys_name(sub));
	va_start(ap, fmt);
	if ((size_t)n < sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if ((size_t)n >= sizeof(line) - 1)
		n = (int)sizeof(line) - 2; /* truncated: keep the newline */
	if (use_syslog) {
		static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO,
					    LOG_DEBUG };
		syslog(prio[level], "%s", line);
	} else {
		line[n++] = '\n';
		/* One write per line: concurrent lines never interleave. */
		ssize_t w = write(STDERR_FILENO, line, (size_t)n);
		(void)w;
	}
	errno = saved;
}

/* Guards every struct nv_ratelimit (log.h). */
static pthread_mutex_t rl_lock = PTHREAD_MUTEX_INITIALIZER;

void nv_log_emit_limited(struct nv_ratelimit *rl, enum nv_level level, enum nv_subsys sub,
			 const char *fmt, ...)
{
	const uint64_t period = (uint64_t)NV_RATELIMIT_PERIOD_S * 1000000000ull;
	struct timespec ts;
	uint64_t now;
	unsigned dropped;
	char msg[1536];
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1;
	pthread_mutex_lock(&rl_lock);
	if (!rl->window_ns || now - rl->window_ns >= period) {
		rl->window_ns = now;
		rl->passed = 0;
	}
	if (rl->passed >= NV_RATELIMIT_BURST) {
		rl->suppressed++;
		pthread_mutex_unlock(&rl_lock);
		return;
	}
	rl->passed++;
	dropped = rl->suppressed;
	rl->suppressed = 0;
	pthread_mutex_unlock(&rl_lock);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (dropped)
		nv_log_emit(level, sub, "%s (%u similar lines suppressed)", msg, dropped);
	else
		nv_log_emit(level, sub, "%s", msg);
}
