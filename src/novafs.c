/*
 * novafs.c - the mount daemon: `novafs [-f] [-o opt,...] MOUNTPOINT`.
 *
 * For: parsing options, starting the engine (engine/star.h) and the FUSE
 * session (fs/fs.h), daemonizing, and the graceful close when the
 * filesystem is unmounted or the daemon is signalled.  Not for: engine
 * or filesystem logic.
 *
 * Start-up order (main()): parse_args() -> check_options() and
 * setup_process() -> daemonize() (the parent waits for the child's
 * verdict on a pipe, so start-up errors reach the terminal) ->
 * start_engine() (recovery runs in star_open()) -> mount_and_serve().
 * Shut-down order (mount_and_serve(), then teardown()): the loop ends ->
 * close the engine (flush, drain, absorb, mark epochs settled) while the
 * device is open -> unmount -> free.
 *
 * Invariants:
 *  1. Every novafs option is one line of NOVAFS_OPTIONS below: the
 *     struct, the fuse_opt table, --help, the range check and the mapping
 *     to struct star_cfg / struct fs_cfg are generated from it, so an
 *     option cannot be parsed without being documented, checked and
 *     applied.  tests/integration/t_options.sh checks that novafs(8)
 *     documents exactly these options, with the same defaults.
 *  2. A default is written once, in the option's own unit; the engine
 *     sees it multiplied by the option's unit factor, never converted
 *     back (no lossy round trip).
 *  3. The parent of a daemonizing start exits with the child's verdict:
 *     0 only once the filesystem is mounted.
 */
#include "config.h"
#include "engine/star.h"
#include "fs/fs.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"
#include "src/base/paths.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <fcntl.h>
#include <fuse_opt.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------ options */

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
 *            fs_cfg field; DAEMON(): used by this file only
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
	STR(star, "ID", "DATA_DIR/star-id", STAR(star_id), "star id, 1-32 of [a-z0-9-]")      \
	NUM(backlog_mib, u, "N", 128, 1, 1u << 20, U_MIB, STAR(backlog_bytes),                \
	    "admitted-but-unabsorbed budget")                                                 \
	NUM(tail_window_cache_mib, u, "N", 128, 0, 1u << 20, U_MIB, STAR(tail_cache_bytes),   \
	    "hot read cache")                                                                 \
	NUM(read_cache_mib, u, "N", 64, 1, 1u << 20, U_MIB, STAR(read_cache_bytes),           \
	    "decoded chunks and footers for cold reads")                                      \
	NUM(flight_kib, u, "N", 4096, 4, 1u << 20, U_KIB, STAR(flight_max),                   \
	    "seal a flight at this size")                                                     \
	NUM(linger_us, u, "N", 1000, 0, 10000000, U_US, STAR(linger_ns),                      \
	    "seal a flight this long after its first record while PUTs are in flight")        \
	NUM(put_window, u, "N", 4, 1, 64, U_1, STAR(put_window),                              \
	    "slot PUTs in flight per chain")                                                  \
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
#define OPT_FMT_u "%u"
#define OPT_FMT_i "%d"
#define OPT_FMT_d "%lf"
/* The value in the target's unit: unsigned options widen before the
 * multiplication (MiB -> bytes does not fit 32 bits). */
#define OPT_SCALE_u(v, unit) ((uint64_t)(v) * (unit))
#define OPT_SCALE_i(v, unit) ((v) * (unit))
#define OPT_SCALE_d(v, unit) ((v) * (unit))

/* The parsed options, each in its own unit. */
struct options {
#define OPT_DECL_NUM(name, type, meta, def, lo, hi, unit, to, help) OPT_CTYPE_##type name;
#define OPT_DECL_STR(name, meta, def, to, help) char *name;
	NOVAFS_OPTIONS(OPT_DECL_NUM, OPT_DECL_STR)
#undef OPT_DECL_NUM
#undef OPT_DECL_STR
	int show_help;
	int show_version;
};

static const struct fuse_opt nova_opts[] = {
#define OPT_FUSE_NUM(name, type, meta, def, lo, hi, unit, to, help) \
	{ #name "=" OPT_FMT_##type, offsetof(struct options, name), 1 },
#define OPT_FUSE_STR(name, meta, def, to, help) { #name "=%s", offsetof(struct options, name), 1 },
	NOVAFS_OPTIONS(OPT_FUSE_NUM, OPT_FUSE_STR)
#undef OPT_FUSE_NUM
#undef OPT_FUSE_STR
	{ "-h", offsetof(struct options, show_help), 1 },
	{ "--help", offsetof(struct options, show_help), 1 },
	{ "-V", offsetof(struct options, show_version), 1 },
	{ "--version", offsetof(struct options, show_version), 1 },
	FUSE_OPT_END
};

/* What --help and check_options() need of each line, as data. */
enum opt_type { OPT_TYPE_u, OPT_TYPE_i, OPT_TYPE_d, OPT_TYPE_s };

struct opt_desc {
	const char *name, *meta, *help;
	const char *def_text; /* STR only */
	enum opt_type type;
	size_t off;             /* in struct options */
	double def, lo, hi;     /* NUM only: exact for every integer range here */
};

static const struct opt_desc opt_descs[] = {
#define OPT_DESC_NUM(name, type, meta, def, lo, hi, unit, to, help) \
	{ #name, meta, help, NULL, OPT_TYPE_##type, offsetof(struct options, name), def, lo, hi },
#define OPT_DESC_STR(name, meta, def, to, help) \
	{ #name, meta, help, def, OPT_TYPE_s, offsetof(struct options, name), 0, 0, 0 },
	NOVAFS_OPTIONS(OPT_DESC_NUM, OPT_DESC_STR)
#undef OPT_DESC_NUM
#undef OPT_DESC_STR
};

static void set_defaults(struct options *o)
{
	memset(o, 0, sizeof(*o));
#define OPT_DEF_NUM(name, type, meta, def, lo, hi, unit, to, help) o->name = def;
#define OPT_DEF_STR(name, meta, def, to, help)
	NOVAFS_OPTIONS(OPT_DEF_NUM, OPT_DEF_STR)
#undef OPT_DEF_NUM
#undef OPT_DEF_STR
}

/*
 * Every option into its target field (invariant 2).  The fields no line
 * names (data_dir, the uid, the hooks) are the caller's.
 */
static void map_options(const struct options *o, struct star_cfg *s, struct fs_cfg *f)
{
#define STAR(field) s->field =
#define FS(field) f->field =
#define DAEMON() (void)
#define OPT_MAP_NUM(name, type, meta, def, lo, hi, unit, to, help) \
	to OPT_SCALE_##type(o->name, unit);
#define OPT_MAP_STR(name, meta, def, to, help) to o->name;
	NOVAFS_OPTIONS(OPT_MAP_NUM, OPT_MAP_STR)
#undef OPT_MAP_NUM
#undef OPT_MAP_STR
#undef STAR
#undef FS
#undef DAEMON
	/* The kernel caches names as long as attributes. */
	f->entry_timeout = f->attr_timeout;
}

static double opt_value(const struct options *o, const struct opt_desc *d)
{
	const char *p = (const char *)o + d->off;

	switch (d->type) {
	case OPT_TYPE_u:
		return *(const unsigned *)p;
	case OPT_TYPE_i:
		return *(const int *)p;
	case OPT_TYPE_d:
		return *(const double *)p;
	default:
		return 0;
	}
}

/* A NUM value as --help and the errors show it. */
static void opt_num_text(const struct opt_desc *d, double v, char *buf, size_t cap)
{
	snprintf(buf, cap, d->type == OPT_TYPE_d ? "%g" : "%.0f", v);
}

static int check_options(const struct options *o)
{
	for (size_t i = 0; i < sizeof(opt_descs) / sizeof(opt_descs[0]); i++) {
		const struct opt_desc *d = &opt_descs[i];
		double v = opt_value(o, d);
		char vt[32], lt[32], ht[32];

		if (d->type == OPT_TYPE_s || (v >= d->lo && v <= d->hi))
			continue;
		opt_num_text(d, v, vt, sizeof(vt));
		opt_num_text(d, d->lo, lt, sizeof(lt));
		opt_num_text(d, d->hi, ht, sizeof(ht));
		fprintf(stderr, "novafs: -o %s=%s is out of range [%s, %s]\n", d->name, vt, lt, ht);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ --help */

#define HELP_COL 31   /* where the help text starts */
#define HELP_WIDTH 79 /* where it wraps */

/* "    LEFT  TEXT", TEXT word-wrapped at HELP_WIDTH under HELP_COL. */
static void help_entry(const char *left, const char *text)
{
	int col = printf("    %-*s", HELP_COL - 5, left);
	bool line_start = false;

	while (*text) {
		size_t w = strcspn(text, " ");

		if (!line_start && col + 1 + (int)w > HELP_WIDTH) {
			col = printf("\n%*s", HELP_COL, "") - 1;
			line_start = true;
		}
		col += printf("%s%.*s", line_start ? "" : " ", (int)w, text);
		line_start = false;
		text += w;
		text += strspn(text, " ");
	}
	putchar('\n');
}

/* The parts of --help known only at run time (the NULL defaults of the
 * table, and debug's subsystems), appended to buf. */
static void help_computed(const struct opt_desc *d, char *buf, size_t cap)
{
	size_t n = strlen(buf);

	if (!strcmp(d->name, "data_dir")) {
		char dd[PATH_MAX];

		nv_default_data_dir(dd, sizeof(dd));
		snprintf(buf + n, cap - n, " (default: %s)", dd);
	} else if (!strcmp(d->name, "debug")) {
		snprintf(buf + n, cap - n, " all");
		for (int i = 0; i < NV_SUB_COUNT; i++) {
			n = strlen(buf);
			snprintf(buf + n, cap - n, ", %s", nv_log_subsys_name(i));
		}
	}
}

/* --help: every option with its default, and each number's range. */
static void usage(const char *prog)
{
	printf("usage: %s [-f] [-o opt,...] MOUNTPOINT\n\n"
	       "A durable stream store on object storage: every file is an append-only\n"
	       "stream; write() returns when the record is durable.  See novafs(8).\n\n"
	       "novafs options:\n", prog);
	for (size_t i = 0; i < sizeof(opt_descs) / sizeof(opt_descs[0]); i++) {
		const struct opt_desc *d = &opt_descs[i];
		char left[64], text[PATH_MAX + 1024], def[32], lo[32], hi[32];
		size_t n;

		snprintf(left, sizeof(left), "-o %s=%s", d->name, d->meta);
		snprintf(text, sizeof(text), "%s", d->help);
		help_computed(d, text, sizeof(text));
		n = strlen(text);
		if (d->type != OPT_TYPE_s) {
			opt_num_text(d, d->def, def, sizeof(def));
			opt_num_text(d, d->lo, lo, sizeof(lo));
			opt_num_text(d, d->hi, hi, sizeof(hi));
			snprintf(text + n, sizeof(text) - n, " (default: %s; range %s..%s)", def,
				 lo, hi);
		} else if (d->def_text) {
			snprintf(text + n, sizeof(text) - n, " (default: %s)", d->def_text);
		}
		help_entry(left, text);
	}
	help_entry("-h, --help", "this help");
	help_entry("-V, --version", "print the version");
	printf("\nFUSE options:\n");
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

static volatile sig_atomic_t dummy;

/*
 * Stopping by signal.  libfuse's own handlers end the session loop at
 * once, so a reader's close or a writer's last acknowledgement would meet
 * a session nobody serves.  Ours only wake the stopper thread, which
 * lets the session serve while the follow view answers its parked reads
 * (end-of-file) and their readers close, then ends the loop; the engine
 * then acknowledges the last appends while the device is still open.
 */
static int stop_pipe[2] = { -1, -1 };
static pthread_t main_thread;

static void on_stop_signal(int sig)
{
	unsigned char c = (unsigned char)sig;
	ssize_t w = write(stop_pipe[1], &c, 1);

	(void)w;
}

static void on_wake_signal(int sig)
{
	(void)sig; /* only interrupts the session loop's wait */
}

struct stopper {
	struct fuse_session *se;
	struct nova_fs *fs;
};

static void *stopper_main(void *arg)
{
	struct stopper *sp = arg;
	unsigned char c = 0;

	while (read(stop_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	if (c == 0)
		return NULL; /* the loop ended on its own (fusermount3 -u) */
	nv_log(NV_INFO, NV_SUB_MAIN, "signal %d: stopping (answering followers first)", c);
	/* Parked reads end; give their readers up to 2 s to close. */
	for (int i = 0; i < 200 && nova_fs_quiesce(sp->fs) > 0; i++) {
		struct timespec ts = { 0, 10 * 1000000L };

		nanosleep(&ts, NULL);
	}
	{
		struct timespec ts = { 0, 200 * 1000000L }; /* their close() */

		nanosleep(&ts, NULL);
	}
	fuse_session_exit(sp->se);
	pthread_kill(main_thread, SIGUSR1);
	return NULL;
}

static int install_stop_handlers(void)
{
	struct sigaction sa;
	int sigs[] = { SIGTERM, SIGINT, SIGHUP };

	if (pipe(stop_pipe))
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], &sa, NULL))
			return -1;
	sa.sa_handler = on_wake_signal;
	return sigaction(SIGUSR1, &sa, NULL);
}

/* mountinfo escapes ' ', '\t', '\n' and '\\' as \ooo; undo it in place. */
static void unescape_octal(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = 0;
}

/*
 * The kernel gives a FUSE mount 128 KiB of readahead (libfuse can only
 * lower it at init), so a sequential `cat` keeps one or two requests in
 * flight where a local disk keeps megabytes.  Raise the mount's
 * read_ahead_kb in sysfs, found through its device number in
 * /proc/self/mountinfo (a stat of the mount point would call into this
 * very filesystem before its loop runs).  Failure (not root, no sysfs)
 * is logged and harmless.
 */
static void set_kernel_readahead(const char *mnt, unsigned kib)
{
	char line[4096], dev[32] = "", path[96];
	FILE *f;
	int fd;

	if (!kib)
		return;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f) {
		nv_log(NV_INFO, NV_SUB_MAIN, "kernel readahead left alone: mountinfo: %s",
		       strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE ... */
		char *save = NULL, *tok[5], *fstype;
		int n = 0;

		fstype = strstr(line, " - ");
		if (!fstype || strncmp(fstype + 3, "fuse", 4))
			continue;
		for (char *t = strtok_r(line, " ", &save); t && n < 5; t = strtok_r(NULL, " ", &save))
			tok[n++] = t;
		if (n < 5)
			continue;
		unescape_octal(tok[4]);
		if (!strcmp(tok[4], mnt))
			snprintf(dev, sizeof(dev), "%s", tok[2]); /* the last one is on top */
	}
	fclose(f);
	if (!dev[0]) {
		nv_log(NV_INFO, NV_SUB_MAIN, "kernel readahead left alone: %s not in mountinfo",
		       mnt);
		return;
	}
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		char v[16];
		int len = snprintf(v, sizeof(v), "%u\n", kib);

		if (write(fd, v, (size_t)len) == len) {
			close(fd);
			nv_log(NV_INFO, NV_SUB_MAIN, "kernel readahead of %s: %u KiB", mnt, kib);
			return;
		}
	}
	nv_log(NV_INFO, NV_SUB_MAIN, "kernel readahead of %s left at the default: %s: %s", mnt,
	       path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* The daemon's verdict to the waiting parent: one byte, 0 = mounted. */
static void tell_parent(int fd, int code)
{
	unsigned char c = (unsigned char)code;

	if (fd >= 0) {
		ssize_t w = write(fd, &c, 1);

		(void)w;
		close(fd);
	}
}

/* ------------------------------------------------------------ main */

/* One run of the daemon: what main() sets up and tears down. */
struct daemon {
	struct fuse_args args;
	struct fuse_cmdline_opts fopts;
	struct options o;
	char dd[PATH_MAX];      /* the data directory, absolute */
	int status_fd;          /* the waiting parent's pipe; -1: none (invariant 3) */
	struct nova_fs *fs;
	struct fuse_session *se;
	struct star *st;
};

/* The command line into d->o and d->fopts.  0: go on; 1: done (--help,
 * --version printed); -1: refused (said why). */
static int parse_args(struct daemon *d, const char *prog)
{
	set_defaults(&d->o);
	if (fuse_opt_parse(&d->args, &d->o, nova_opts, NULL) == -1)
		return -1;
	if (d->o.show_help) {
		usage(prog);
		return 1;
	}
	if (d->o.show_version) {
		printf("novafs %s (libfuse %s)\n", PACKAGE_VERSION, fuse_pkgversion());
		return 1;
	}
	if (fuse_parse_cmdline(&d->args, &d->fopts) != 0)
		return -1;
	if (!d->fopts.mountpoint) {
		fprintf(stderr, "usage: %s [-f] [-o opt,...] MOUNTPOINT (--help for options)\n",
			prog);
		return -1;
	}
	return 0;
}

/* Ranges, logging, failpoints and the data directory.  0 or -1 (said why). */
static int setup_process(struct daemon *d)
{
	const struct options *o = &d->o;

	if (check_options(o))
		return -1;
	if (o->debug) {
		const char *bad;
		int badlen;

		if (nv_log_set_debug(o->debug, &bad, &badlen)) {
			fprintf(stderr, "novafs: unknown debug subsystem '%.*s'\n", badlen, bad);
			return -1;
		}
	}
	if (d->fopts.debug)
		nv_log_level = NV_DEBUG;
	if (nv_fp_init_from_env()) {
		fprintf(stderr, "novafs: bad NOVAFS_FAILPOINTS\n");
		return -1;
	}
	if (o->data_dir) {
		if (!realpath(o->data_dir, d->dd)) {
			if (errno != ENOENT || o->data_dir[0] != '/') {
				fprintf(stderr, "novafs: data_dir %s: %s\n", o->data_dir,
					strerror(errno));
				return -1;
			}
			snprintf(d->dd, sizeof(d->dd), "%s", o->data_dir);
		}
	} else {
		nv_default_data_dir(d->dd, sizeof(d->dd));
	}
	if (o->log) {
		int lfd = open(o->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);

		if (lfd < 0) {
			fprintf(stderr, "novafs: log %s: %s\n", o->log, strerror(errno));
			return -1;
		}
		dup2(lfd, STDERR_FILENO);
		close(lfd);
	}
	return 0;
}

/* Without -f: fork before any thread starts; the parent waits for the
 * child's verdict and exits with it (invariant 3).  0 in the child (or
 * in the foreground), -1 when the fork failed. */
static int daemonize(struct daemon *d)
{
	int p[2];
	pid_t pid;

	if (d->fopts.foreground)
		return 0;
	if (pipe(p)) {
		perror("novafs: pipe");
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		perror("novafs: fork");
		return -1;
	}
	if (pid > 0) {
		unsigned char c = 1;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			c = 1;
		if (c != 0)
			fprintf(stderr, "novafs: start-up failed (see the log)\n");
		_exit(c);
	}
	close(p[0]);
	d->status_fd = p[1];
	setsid();
	if (!d->o.log)
		nv_log_use_syslog("novafs");
	return 0;
}

/* The translation layer, the FUSE session and the engine, in that order.
 * 0 or -1; what was made is undone by teardown(). */
static int start_engine(struct daemon *d)
{
	struct star_cfg scfg;
	struct fs_cfg fcfg;
	char mr[64];
	int rc;

	memset(&scfg, 0, sizeof(scfg));
	memset(&fcfg, 0, sizeof(fcfg));
	map_options(&d->o, &scfg, &fcfg);
	fcfg.uid = getuid();
	fcfg.gid = getgid();
	fcfg.data_dir = d->dd;
	if (nova_fs_new(&fcfg, &d->fs))
		return -1;
	scfg.data_dir = d->dd;
	if (!scfg.store_faults)
		scfg.store_faults = getenv("NOVAFS_STORE_FAULTS");
	scfg.acked = nova_fs_acked;
	scfg.acked_arg = d->fs;
	/* max_read must also be a mount option (libfuse docs). */
	snprintf(mr, sizeof(mr), "-omax_read=%u", 1u << 20);
	fuse_opt_add_arg(&d->args, mr);
	fuse_opt_add_arg(&d->args, "-osubtype=novafs");
	fuse_opt_add_arg(&d->args, "-ofsname=novafs");
	/* The session first: it rejects bad FUSE options before the engine
	 * mints an epoch for nothing. */
	d->se = fuse_session_new(&d->args, nova_fs_ops(), sizeof(*nova_fs_ops()), d->fs);
	if (!d->se)
		return -1;
	rc = star_open(&scfg, &d->st);
	if (rc) {
		fprintf(stderr, "novafs: cannot start on %s: %s\n", d->dd, strerror(-rc));
		return -1;
	}
	nova_fs_set_star(d->fs, d->st);
	return 0;
}

/* Mounted: tell the waiting parent, and let go of the terminal. */
static void detach(struct daemon *d)
{
	int nul;

	if (d->status_fd < 0)
		return;
	nul = open("/dev/null", O_RDWR);
	tell_parent(d->status_fd, 0);
	d->status_fd = -1;
	if (nul >= 0) {
		dup2(nul, STDIN_FILENO);
		dup2(nul, STDOUT_FILENO);
		if (!d->o.log)
			dup2(nul, STDERR_FILENO);
		if (nul > 2)
			close(nul);
	}
	if (chdir("/"))
		dummy = 1;
}

/* The session loop until unmount or a signal; its result (0: orderly). */
static int run_loop(struct daemon *d)
{
	struct fuse_loop_config *lcfg;
	int ret;

	if (d->fopts.singlethread) {
		ret = fuse_session_loop(d->se);
	} else {
		lcfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(lcfg, d->fopts.clone_fd);
		/* libfuse leaves max_threads at UINT_MAX when -o max_threads
		 * is absent. */
		fuse_loop_cfg_set_max_threads(lcfg, d->fopts.max_threads &&
							    d->fopts.max_threads <= 100000
							    ? d->fopts.max_threads : 32);
		if (d->fopts.max_idle_threads <= 100000) /* UINT_MAX: unset */
			fuse_loop_cfg_set_idle_threads(lcfg, d->fopts.max_idle_threads);
		ret = fuse_session_loop_mt(d->se, lcfg);
		fuse_loop_cfg_destroy(lcfg);
	}
	/* The loop returns the signal number when a signal ended it: that is
	 * an orderly stop, not a failure. */
	return ret > 0 ? 0 : ret;
}

/* Mount, serve, and on the way out close the engine while the device is
 * still open, then unmount.  The exit status: 0 or 1. */
static int mount_and_serve(struct daemon *d)
{
	struct stopper stopper = { d->se, d->fs };
	pthread_t stopper_thread;
	bool have_stopper = false;
	int ret, rc;

	main_thread = pthread_self();
	if (install_stop_handlers() != 0)
		return 1;
	if (fuse_session_mount(d->se, d->fopts.mountpoint) != 0) {
		fprintf(stderr, "novafs: cannot mount on %s\n", d->fopts.mountpoint);
		return 1;
	}
	nova_fs_set_session(d->fs, d->se);
	set_kernel_readahead(d->fopts.mountpoint, d->o.kernel_readahead_kib);
	if (pthread_create(&stopper_thread, NULL, stopper_main, &stopper) == 0)
		have_stopper = true;
	nv_log(NV_INFO, NV_SUB_MAIN, "star %s serving %s on %s", star_id(d->st), d->dd,
	       d->fopts.mountpoint);
	detach(d);
	ret = run_loop(d);
	if (have_stopper) {
		unsigned char zero = 0;
		ssize_t w = write(stop_pipe[1], &zero, 1); /* no-op if it already ran */

		(void)w;
		pthread_join(stopper_thread, NULL);
	}
	nv_log(NV_INFO, NV_SUB_MAIN, "unmounting %s: flushing and absorbing",
	       d->fopts.mountpoint);
	/* While the device is still open (a signal ended the loop; after
	 * fusermount3 -u nobody is listening anyway): parked follow reads
	 * get their end-of-file, the engine acknowledges its last appends,
	 * and only then is the filesystem unmounted. */
	nova_fs_shutdown(d->fs);
	rc = star_close(d->st);
	d->st = NULL;
	fuse_session_unmount(d->se);
	return ret || rc ? 1 : 0;
}

/* Undo whatever start_engine() made and mount_and_serve() left. */
static void teardown(struct daemon *d)
{
	if (d->st) {
		nova_fs_shutdown(d->fs);
		(void)star_close(d->st);
	}
	if (d->se) {
		nova_fs_set_session(d->fs, NULL);
		fuse_session_destroy(d->se);
	}
	tell_parent(d->status_fd, 1);
	nova_fs_free(d->fs);
	free(d->fopts.mountpoint);
	fuse_opt_free_args(&d->args);
#define OPT_FREE_NUM(name, type, meta, def, lo, hi, unit, to, help)
#define OPT_FREE_STR(name, meta, def, to, help) free(d->o.name);
	NOVAFS_OPTIONS(OPT_FREE_NUM, OPT_FREE_STR)
#undef OPT_FREE_NUM
#undef OPT_FREE_STR
}

int main(int argc, char **argv)
{
	struct daemon d;
	int ret = 1, rc;

	memset(&d, 0, sizeof(d));
	d.args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	d.status_fd = -1;
	/* A closed stderr or log pipe must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	rc = parse_args(&d, argv[0]);
	if (rc > 0)
		ret = 0;
	else if (rc == 0 && !setup_process(&d) && !daemonize(&d) && !start_engine(&d))
		ret = mount_and_serve(&d);
	teardown(&d);
	return ret;
}
