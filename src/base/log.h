/*
 * log.h - the one logging call of novafs.
 *
 * For: every line a daemon or tool prints about what happened to which
 * stream, chain or slot.  Not for: user-facing command output (novactl
 * prints its reports with stdio).
 *
 * Invariants:
 *  1. The level is checked before anything is formatted, so a disabled
 *     debug line costs one load and one compare.
 *  2. Debug output is enabled per subsystem (`-o debug=absorb,chain`);
 *     warnings and errors are always on.
 *  3. A line is written with one write(2), so concurrent lines never
 *     interleave.
 */
#ifndef NOVAFS_BASE_LOG_H
#define NOVAFS_BASE_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum nv_level { NV_ERR = 0, NV_WARN = 1, NV_INFO = 2, NV_DEBUG = 3 };

/* Subsystems that can be debugged one by one.  Keep nv_log_subsys_name()
 * in log.c in step. */
enum nv_subsys {
	NV_SUB_MAIN = 0,
	NV_SUB_FS,
	NV_SUB_CHAIN,
	NV_SUB_FLIGHT,
	NV_SUB_ABSORB,
	NV_SUB_READ,
	NV_SUB_STORE,
	NV_SUB_META,
	NV_SUB_SETTLE,
	NV_SUB_TRIM,
	NV_SUB_RECOVER,
	NV_SUB_CACHE,
	NV_SUB_WAKE,
	NV_SUB_FAILPOINT,
	NV_SUB_API,
	NV_SUB_COUNT
};

/* Current global level and per-subsystem debug mask; read racily on the
 * hot path (a stale value only changes whether one line prints). */
extern int nv_log_level;
extern unsigned nv_log_debug_mask;

/* Enable debug for a list of subsystem names separated by ',', '+' or ':'
 * ("all" for every one).  Returns 0, or -EINVAL naming the first unknown word in
 * *bad (borrowed from spec, NUL not inserted; *badlen its length). */
int nv_log_set_debug(const char *spec, const char **bad, int *badlen)
	__attribute__((warn_unused_result));

/* The program name of stderr lines (static string; default "novafs"). */
void nv_log_set_ident(const char *ident);

/* Send lines to syslog instead of stderr (daemon mode). */
void nv_log_use_syslog(const char *ident);

/* Name of a subsystem, for messages and --help. */
const char *nv_log_subsys_name(enum nv_subsys s);

void nv_log_emit(enum nv_level level, enum nv_subsys sub, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline bool nv_log_enabled(enum nv_level level, enum nv_subsys sub)
{
	if (level < NV_DEBUG)
		return (int)level <= nv_log_level;
	return (nv_log_debug_mask >> sub) & 1u;
}

/*
 * A rate limit for one kind of line (a zero-initialised static per call
 * site): at most NV_RATELIMIT_BURST lines every NV_RATELIMIT_PERIOD_S
 * seconds pass; the others are counted, and the next line that passes
 * ends with how many were suppressed.  For lines a user can provoke at
 * will (refusals), so that a loop of them cannot flood the log.  The
 * fields are guarded by one lock inside log.c.
 */
#define NV_RATELIMIT_BURST 10
#define NV_RATELIMIT_PERIOD_S 60
struct nv_ratelimit {
	uint64_t window_ns;  /* monotonic start of the current window; 0: none */
	unsigned passed;     /* lines passed in it */
	unsigned suppressed; /* lines dropped since the last one passed */
};

void nv_log_emit_limited(struct nv_ratelimit *rl, enum nv_level level, enum nv_subsys sub,
			 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define nv_log_ratelimited(rl, level, sub, ...)                            \
	do {                                                               \
		if (nv_log_enabled((level), (sub)))                        \
			nv_log_emit_limited((rl), (level), (sub), __VA_ARGS__); \
	} while (0)

#define nv_log(level, sub, ...)                                          \
	do {                                                             \
		if (nv_log_enabled((level), (sub)))                      \
			nv_log_emit((level), (sub), __VA_ARGS__);        \
	} while (0)

#endif
