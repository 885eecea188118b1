/*
 * options.h - the options of novafs(8): the one table NOVAFS_OPTIONS and
 * the struct it generates.
 *
 * For: src/novafs.c's parsing, checking, --help and mapping of options
 * onto struct star_cfg (engine/star.h) and struct fs_cfg (fs/fs.h).  Not
 * for: novactl's few options (src/novactl.c), or what an option does.
 *
 * Invariants:
 *  1. Every novafs option is one line of NOVAFS_OPTIONS below: the
 *     struct, the fuse_opt table, --help, the strict parse, the range
 *     check and the mapping are generated from it (options.c), so an
 *     option cannot be parsed without being documented, checked and
 *     applied.  tests/integration/t_options.sh checks that novafs(8)
 *     documents exactly these options, with the same defaults.
 *  2. A default is written once, in the option's own unit; the engine
 *     sees it multiplied by the option's unit factor, never converted
 *     back (no lossy round trip).
 *  3. A number is accepted only when its whole text is one number of the
 *     option's type; every refusal names the option.
 */
#ifndef NOVAFS_SRC_OPTIONS_H
#define NOVAFS_SRC_OPTIONS_H

#include "engine/star.h"
#include "fs/fs.h"
#include "src/base/clock.h"

#include <fuse_lowlevel.h>
#include <stdint.h>

/*
 * The option table, in --help order.  Two kinds of line:
 *
 *   NUM(name, type, meta, default, lo, hi, unit, to, help)
 *     type     u (unsigned, parsed "%u"), i (int, "%d"), d (double, "%lf")
 *     default, lo, hi   in the option's own unit (the one its name says);
 *              a value outside [lo, hi] refuses the start
 *     unit     factor from the option's unit to the target field's unit
 *   STR(name, meta, default, to, help)
 *     default  the text --help shows (the value is NULL when not given);
 *              NULL: computed at run time (help_computed())
 *
 *   to       STAR(field): a struct star_cfg field; FS(field): a struct
 *            fs_cfg field; DAEMON(): used by src/novafs.c only
 *
 * novafs(8)'s OPTIONS section has one entry per line, headed by the
 * help text and "(default: ...)"; its justifications of the settlement
 * defaults live there.
 */
#define U_1 1
#define U_KIB 1024ull
#define U_MIB (1024ull * 1024)
#define U_US NV_NS_PER_US /* microseconds -> nanoseconds */
#define U_MS NV_NS_PER_MS
#define U_S NV_NS_PER_S
#define DAYS(n) ((n) * 86400u)

#define NOVAFS_OPTIONS(NUM, STR)                                                              \
	STR(data_dir, "DIR", NULL, DAEMON(),                                                  \
	    "embedded store, metastore and star id")                                          \
	STR(store, "URL", "dir:DATA_DIR/objects", STAR(store_url),                            \
	    "the standard bucket: dir:/path or s3://BUCKET?OPT=VALUE&... (see novafs(8))")    \
	STR(express, "URL;URL;...", "the standard bucket", STAR(express_urls),               \
	    "the express bucket set, one URL per zone, each with zone=Z in its query")        \
	STR(location, "ZONE", "the first", STAR(location),                                    \
	    "this star's zone in the express set")                                            \
	STR(meta, "URL", "sqlite:DATA_DIR/meta.db", STAR(meta_url),                           \
	    "metastore: sqlite:/path.db or etcd://H:P[;H:P...]/PREFIX[?opts]")                \
	STR(meta_check, "quick|warn|off", "quick", STAR(meta_check),                           \
	    "check the metastore at start: refuse a damaged one, or log and start, or not")  \
	STR(star, "ID", "DATA_DIR/star-id", STAR(star_id), "star id, 1-32 of [a-z0-9-]")      \
	STR(listen, "ADDR:PORT", "off", STAR(listen_addr),                                    \
	    "serve the star API here (several stars share one metastore)")                    \
	STR(cluster_secret_file, "FILE", "none", STAR(cluster_secret_file),                   \
	    "the cluster credential every star API request must carry")                       \
	NUM(api_max_conns, u, "N", 256, 4, 4096, U_1, DAEMON(),                               \
	    "star API connections at once (one thread each; a subscription holds one)")      \
	NUM(star_lease_s, u, "N", 10, 2, 3600, U_1, STAR(star_lease_s),                       \
	    "registry and writer lease TTL; acks stop at TTL - TTL/5 without a keepalive")    \
	NUM(lease_idle_s, u, "N", 300, 0, DAYS(1), U_S, STAR(lease_idle_ns),                  \
	    "release a stream's writer lease after its appends were idle this long (0: never)") \
	NUM(backlog_mib, u, "N", 128, 1, 1u << 20, U_MIB, STAR(backlog_bytes),                \
	    "admitted-but-unabsorbed budget")                                                 \
	NUM(backlog_wait_s, u, "N", 60, 0, DAYS(1), U_S, STAR(backlog_wait_ns),              \
	    "a writer waits this long for backlog tokens, then fails, 0 = no bound")         \
	NUM(tail_window_cache_mib, u, "N", 128, 0, 1u << 20, U_MIB, STAR(tail_cache_bytes),   \
	    "hot read cache")                                                                 \
	NUM(read_cache_mib, u, "N", 64, 1, 1u << 20, U_MIB, STAR(read_cache_bytes),           \
	    "decoded chunks and footers for cold reads")                                      \
	NUM(flight_kib, u, "N", 4096, 4, 1u << 20, U_KIB, STAR(flight_max),                   \
	    "seal a flight at this size")                                                     \
	NUM(linger_us, i, "N", -1, -1, 10000000, U_US, STAR(linger_ns),                       \
	    "seal a flight this long after its first record while PUTs are in flight "        \
	    "(from 10 ms on also when none is); -1 = 0 for slots in segment files, else 1000") \
	NUM(linger_standard_us, i, "N", -1, -1, 10000000, U_US,                               \
	    STAR(linger_class_ns[NV_CLASS_STANDARD]),                                         \
	    "linger_us of the standard class, -1 = linger_us")                                \
	NUM(linger_express_us, i, "N", -1, -1, 10000000, U_US,                                \
	    STAR(linger_class_ns[NV_CLASS_EXPRESS]),                                          \
	    "linger_us of the express class, -1 = linger_us")                                 \
	STR(durable, "write|fsync", "write", FS(durable),                                     \
	    "write() returns when durable, or at admission with fsync()/close() waiting")     \
	NUM(put_window, u, "N", 4, 1, 64, U_1, STAR(put_window),                              \
	    "slot PUTs in flight per chain")                                                  \
	NUM(group_commit, u, "0|1", 0, 0, 1, U_1, STAR(group_commit),                         \
	    "while a PUT is in flight, seal when one returns instead of at linger")          \
	NUM(slot_segments, u, "0|1|2", 2, 0, 2, U_1, STAR(slot_segments),                     \
	    "directory store: chain slots in segment files, one flush each (2: own store)")   \
	NUM(put_timeout_s, u, "N", 10, 1, DAYS(1), U_S, STAR(put_timeout_ns),                 \
	    "retry a failing slot PUT this long, then fail the writes and halt the chain")    \
	NUM(chunk_kib, u, "N", 512, 4, 16384, U_1, STAR(chunk_kib),                           \
	    "target raw size of a bundle chunk")                                              \
	NUM(compress, i, "N", 1, -7, 19, U_1, STAR(zstd_level),                               \
	    "zstd level per chunk, 0 = off")                                                  \
	NUM(readahead, u, "N", 8, 0, 64, U_1, STAR(readahead),                                \
	    "chunks fetched ahead of a sequential reader")                                    \
	NUM(prefetch_threads, u, "N", 4, 0, 64, U_1, STAR(prefetch_threads),                  \
	    "read-ahead threads")                                                             \
	NUM(absorb_batch, u, "N", 256, 1, 65536, U_1, STAR(absorb_batch_slots),               \
	    "max slots per absorb batch")                                                     \
	NUM(absorb_linger_us, u, "N", 2000, 0, 1000000, U_US, STAR(absorb_linger_ns),         \
	    "absorb waits this long for more flights")                                        \
	NUM(max_write_kib, u, "N", 1024, 4, 1024, U_KIB, FS(max_write),                       \
	    "largest write request, i.e. record")                                             \
	NUM(attr_timeout, d, "S", 1.0, 0, 3600, U_1, FS(attr_timeout),                        \
	    "kernel attribute cache seconds")                                                 \
	NUM(kernel_readahead_kib, u, "N", 8192, 0, 1u << 20, U_KIB, FS(max_readahead),        \
	    "the mount's kernel readahead, 0 = the kernel's own 128")                         \
	NUM(age_cap_standard_s, u, "N", 1800, 0, DAYS(30), U_S,                               \
	    STAR(age_cap_ns[NV_CLASS_STANDARD]), "standard bytes stay in transit at most")    \
	NUM(age_cap_express_s, u, "N", 120, 0, DAYS(30), U_S,                                 \
	    STAR(age_cap_ns[NV_CLASS_EXPRESS]), "express bytes stay in transit at most")      \
	NUM(settle_trigger_mib, u, "N", 8, 1, 1u << 20, U_MIB, STAR(settle_trigger_bytes),    \
	    "settle a stream once it has this much un-settled")                               \
	NUM(settle_linger_s, u, "N", 30, 0, DAYS(1), U_S, STAR(settle_linger_ns),             \
	    "... this long after crossing it, plus jitter")                                   \
	NUM(output_cap_mib, u, "N", 128, 1, 4096, U_MIB, STAR(output_cap_bytes),              \
	    "largest settled object")                                                         \
	NUM(read_grace_s, u, "N", 30, 0, DAYS(1), U_S, STAR(read_grace_ns),                   \
	    "delete retired slots and objects this late")                                     \
	STR(plan_vending, "raw|signed", "raw", STAR(plan_vending),                             \
	    "ReadPlan vends object keys and windows, or presigned GET URLs (S3 only)")        \
	NUM(plan_ttl_s, u, "N", 30, 1, DAYS(1), U_S, STAR(plan_ttl_ns),                       \
	    "a read plan's life; never beyond read_grace_s")                                  \
	NUM(fetch_cache_mib, u, "N", 256, 16, 1u << 20, U_MIB, STAR(fetch_cache_bytes),       \
	    "local scratch for one settle era")                                               \
	STR(scratch_dir, "DIR", "DATA_DIR/scratch", STAR(scratch_dir),                        \
	    "where that scratch lives")                                                       \
	STR(store_faults, "SPEC", "off", STAR(store_faults),                                  \
	    "testing: inject store faults, items joined by ':' (put_error=P, get_error=P, "   \
	    "flip=P, short=P, full=1, full_after=B, latency_ms=N, prefix=S, seed=N; also "    \
	    "NOVAFS_STORE_FAULTS)")                                                           \
	NUM(settle_workers, u, "N", 2, 1, 64, U_1, STAR(settle_workers),                      \
	    "streams assembled at once")                                                      \
	NUM(audit_interval_ms, u, "N", 1000, 10, 3600000, U_MS, STAR(audit_period_ns),        \
	    "settle and trim-check pass period")                                              \
	STR(debug, "LIST", "off", DAEMON(), "debug log for subsystems, joined by '+':")       \
	STR(log, "FILE", "stderr with -f, else syslog", DAEMON(), "log here")

/* The C type and the fuse_opt conversion of each NUM type. */
#define OPT_CTYPE_u unsigned
#define OPT_CTYPE_i int
#define OPT_CTYPE_d double
/* The value in the target's unit: unsigned options widen before the
 * multiplication (MiB -> bytes does not fit 32 bits). */
#define OPT_SCALE_u(v, unit) ((uint64_t)(v) * (unit))
#define OPT_SCALE_i(v, unit) ((v) * (unit))
#define OPT_SCALE_d(v, unit) ((v) * (unit))

/* The parsed options, each in its own unit.  A NUM option's text (as
 * given; NULL: not given) is parsed strictly by parse_numbers(), never
 * by fuse_opt's sscanf (which takes "4096abc" and "-1"); pos and npos
 * are the positional arguments ([SOURCE] MOUNTPOINT, opts_parse()). */
struct options {
#define OPT_DECL_NUM(name, type, meta, def, lo, hi, unit, to, help) \
	OPT_CTYPE_##type name;                                      \
	char *text_##name;
#define OPT_DECL_STR(name, meta, def, to, help) char *name;
	NOVAFS_OPTIONS(OPT_DECL_NUM, OPT_DECL_STR)
#undef OPT_DECL_NUM
#undef OPT_DECL_STR
	int show_help;
	int show_version;
	char *pos[2]; /* the positional arguments: [SOURCE] MOUNTPOINT */
	int npos;
};

/* Defaults, then the command line into o (caller-owned; opts_free()):
 * the novafs options and the positional arguments are taken out of
 * args, the rest stays for libfuse.  0, or -1 (said why on stderr). */
int opts_parse(struct fuse_args *args, struct options *o);

/* Every number within its range.  0, or -1 (said why on stderr). */
int opts_check(const struct options *o);

/* Every option into its target field (invariant 2).  The fields no line
 * names (data_dir, the uid, the hooks) are the caller's. */
void opts_map(const struct options *o, struct star_cfg *s, struct fs_cfg *f);

/* --help: every option with its default, and each number's range. */
void opts_usage(const char *prog);

/* Free what opts_parse() allocated in o. */
void opts_free(struct options *o);

#endif
