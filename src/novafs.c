/*
 * novafs.c - the mount daemon: `novafs [-f] [-o opt,...] MOUNTPOINT`.
 *
 * For: parsing options, starting the engine (engine/star.h) and the FUSE
 * session (fs/fs.h), daemonizing, and the graceful close when the
 * filesystem is unmounted or the daemon is signalled.  Not for: engine
 * or filesystem logic.
 *
 * Start-up order: parse -> (fork; the parent waits for the child's
 * verdict on a pipe, so start-up errors reach the terminal) -> open the
 * engine (recovery runs here) -> mount -> serve.
 * Shut-down order: the loop ends -> unmount -> close the engine (flush,
 * drain, absorb, mark epochs settled) -> free.
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

struct options {
	char *data_dir;
	char *store;
	char *express;
	char *location;
	char *meta;
	char *star;
	char *debug;
	char *log;
	unsigned backlog_mib;
	unsigned tail_cache_mib;
	unsigned read_cache_mib;
	unsigned flight_kib;
	unsigned linger_us;
	unsigned put_window;
	unsigned put_timeout_s;
	unsigned chunk_kib;
	int compress;
	unsigned readahead;
	unsigned prefetch_threads;
	unsigned absorb_batch;
	unsigned absorb_linger_us;
	unsigned max_write_kib;
	double attr_timeout;
	unsigned kernel_readahead_kib;
	unsigned age_cap_standard_s;
	unsigned age_cap_express_s;
	unsigned settle_trigger_mib;
	unsigned settle_linger_s;
	unsigned output_cap_mib;
	unsigned read_grace_s;
	unsigned fetch_cache_mib;
	char *scratch_dir;
	char *store_faults;
	unsigned settle_workers;
	unsigned audit_interval_ms;
	int show_help;
	int show_version;
};

#define OPT(t, p) { t, offsetof(struct options, p), 1 }

static const struct fuse_opt nova_opts[] = {
	OPT("data_dir=%s", data_dir),
	OPT("store=%s", store),
	OPT("express=%s", express),
	OPT("location=%s", location),
	OPT("meta=%s", meta),
	OPT("star=%s", star),
	OPT("debug=%s", debug),
	OPT("log=%s", log),
	OPT("backlog_mib=%u", backlog_mib),
	OPT("tail_window_cache_mib=%u", tail_cache_mib),
	OPT("read_cache_mib=%u", read_cache_mib),
	OPT("flight_kib=%u", flight_kib),
	OPT("linger_us=%u", linger_us),
	OPT("put_window=%u", put_window),
	OPT("put_timeout_s=%u", put_timeout_s),
	OPT("chunk_kib=%u", chunk_kib),
	OPT("compress=%d", compress),
	OPT("readahead=%u", readahead),
	OPT("prefetch_threads=%u", prefetch_threads),
	OPT("absorb_batch=%u", absorb_batch),
	OPT("absorb_linger_us=%u", absorb_linger_us),
	OPT("max_write_kib=%u", max_write_kib),
	OPT("attr_timeout=%lf", attr_timeout),
	OPT("kernel_readahead_kib=%u", kernel_readahead_kib),
	OPT("age_cap_standard_s=%u", age_cap_standard_s),
	OPT("age_cap_express_s=%u", age_cap_express_s),
	OPT("settle_trigger_mib=%u", settle_trigger_mib),
	OPT("settle_linger_s=%u", settle_linger_s),
	OPT("output_cap_mib=%u", output_cap_mib),
	OPT("read_grace_s=%u", read_grace_s),
	OPT("fetch_cache_mib=%u", fetch_cache_mib),
	OPT("scratch_dir=%s", scratch_dir),
	OPT("store_faults=%s", store_faults),
	OPT("settle_workers=%u", settle_workers),
	OPT("audit_interval_ms=%u", audit_interval_ms),
	OPT("-h", show_help),
	OPT("--help", show_help),
	OPT("-V", show_version),
	OPT("--version", show_version),
	FUSE_OPT_END
};

static void usage(const char *prog, const struct options *d)
{
	char dd[PATH_MAX], subsystems[256] = "";

	nv_default_data_dir(dd, sizeof(dd));
	for (int i = 0; i < NV_SUB_COUNT; i++) {
		size_t n = strlen(subsystems);

		snprintf(subsystems + n, sizeof(subsystems) - n, "%s%s", i ? ", " : "",
			 nv_log_subsys_name(i));
	}
	printf("usage: %s [-f] [-o opt,...] MOUNTPOINT\n\n"
	       "A durable stream store on object storage: every file is an append-only\n"
	       "stream; write() returns when the record is durable.  See novafs(8).\n\n"
	       "novafs options:\n"
	       "    -o data_dir=DIR            embedded store, metastore and star id (%s)\n"
	       "    -o store=URL               the standard bucket: dir:/path or\n"
	       "                               s3://BUCKET?OPT=VALUE&... (see novafs(8))\n"
	       "                               (dir:DATA_DIR/objects)\n"
	       "    -o express=URL;URL;...     the express bucket set, one URL per zone, each with\n"
	       "                               zone=Z in its query (the standard bucket)\n"
	       "    -o location=ZONE           this star's zone in the express set (the first)\n"
	       "    -o meta=URL                metastore: sqlite:/path.db (sqlite:DATA_DIR/meta.db)\n"
	       "    -o star=ID                 star id, 1-32 of [a-z0-9-] (DATA_DIR/star-id)\n"
	       "    -o backlog_mib=N           admitted-but-unabsorbed budget (%u)\n"
	       "    -o tail_window_cache_mib=N hot read cache (%u)\n"
	       "    -o read_cache_mib=N        decoded chunks and footers for cold reads (%u)\n"
	       "    -o flight_kib=N            seal a flight at this size (%u)\n"
	       "    -o linger_us=N             seal a flight this long after its first record\n"
	       "                               while PUTs are in flight (%u)\n"
	       "    -o put_window=N            slot PUTs in flight per chain (%u)\n"
	       "    -o put_timeout_s=N         retry a failing slot PUT this long, then fail\n"
	       "                               the writes and halt the chain (%u)\n"
	       "    -o chunk_kib=N             target raw size of a bundle chunk (%u)\n"
	       "    -o compress=N              zstd level per chunk, 0 = off (%d)\n"
	       "    -o readahead=N             chunks fetched ahead of a sequential reader (%u)\n"
	       "    -o prefetch_threads=N      read-ahead threads (%u)\n"
	       "    -o absorb_batch=N          max slots per absorb batch (%u)\n"
	       "    -o absorb_linger_us=N      absorb waits this long for more flights (%u)\n"
	       "    -o max_write_kib=N         largest write request, i.e. record (%u)\n"
	       "    -o attr_timeout=S          kernel attribute cache seconds (%.1f)\n"
	       "    -o kernel_readahead_kib=N  the mount's kernel readahead, 0 = the kernel's\n"
	       "                               own 128 (%u)\n"
	       "    -o age_cap_standard_s=N    standard bytes stay in transit at most (%u)\n"
	       "    -o age_cap_express_s=N     express bytes stay in transit at most (%u)\n"
	       "    -o settle_trigger_mib=N    settle a stream once it has this much un-settled (%u)\n"
	       "    -o settle_linger_s=N       ... this long after crossing it, plus jitter (%u)\n"
	       "    -o output_cap_mib=N        largest settled object (%u)\n"
	       "    -o read_grace_s=N          delete retired slots and objects this late (%u)\n"
	       "    -o fetch_cache_mib=N       local scratch for one settle era (%u)\n"
	       "    -o scratch_dir=DIR         where that scratch lives (DATA_DIR/scratch)\n"
	       "    -o store_faults=SPEC       testing: inject store faults, items joined by ':'\n"
	       "                               (put_error=P, get_error=P, flip=P, short=P, full=1,\n"
	       "                               full_after=B, latency_ms=N, prefix=S, seed=N;\n"
	       "                               also NOVAFS_STORE_FAULTS) (off)\n"
	       "    -o settle_workers=N        streams assembled at once (%u)\n"
	       "    -o audit_interval_ms=N     settle and trim-check pass period (%u)\n"
	       "    -o debug=LIST              debug log for subsystems, joined by '+':\n"
	       "                               all, %s\n"
	       "    -o log=FILE                log here (default: stderr with -f, else syslog)\n"
	       "    -h, --help                 this help\n"
	       "    -V, --version              print the version\n\n",
	       prog, dd, d->backlog_mib, d->tail_cache_mib, d->read_cache_mib, d->flight_kib,
	       d->linger_us, d->put_window, d->put_timeout_s, d->chunk_kib, d->compress,
	       d->readahead, d->prefetch_threads, d->absorb_batch, d->absorb_linger_us,
	       d->max_write_kib,
	       d->attr_timeout, d->kernel_readahead_kib, d->age_cap_standard_s, d->age_cap_express_s,
	       d->settle_trigger_mib, d->settle_linger_s, d->output_cap_mib, d->read_grace_s,
	       d->fetch_cache_mib, d->settle_workers, d->audit_interval_ms, subsystems);
	printf("FUSE options:\n");
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

static void set_defaults(struct options *o)
{
	struct star_cfg d;

	star_cfg_defaults(&d);
	memset(o, 0, sizeof(*o));
	o->backlog_mib = (unsigned)(d.backlog_bytes >> 20);
	o->tail_cache_mib = (unsigned)(d.tail_cache_bytes >> 20);
	o->read_cache_mib = (unsigned)(d.read_cache_bytes >> 20);
	o->flight_kib = (unsigned)(d.flight_max >> 10);
	o->linger_us = (unsigned)(d.linger_ns / 1000);
	o->put_window = d.put_window;
	o->put_timeout_s = (unsigned)(d.put_timeout_ns / NV_NS_PER_S);
	o->chunk_kib = d.chunk_kib;
	o->compress = d.zstd_level;
	o->readahead = d.readahead;
	o->prefetch_threads = d.prefetch_threads;
	o->absorb_batch = d.absorb_batch_slots;
	o->absorb_linger_us = (unsigned)(d.absorb_linger_ns / 1000);
	o->max_write_kib = 1024;
	o->attr_timeout = 1.0;
	o->kernel_readahead_kib = 8192;
	o->age_cap_standard_s = (unsigned)(d.age_cap_ns[NV_CLASS_STANDARD] / NV_NS_PER_S);
	o->age_cap_express_s = (unsigned)(d.age_cap_ns[NV_CLASS_EXPRESS] / NV_NS_PER_S);
	o->settle_trigger_mib = (unsigned)(d.settle_trigger_bytes >> 20);
	o->settle_linger_s = (unsigned)(d.settle_linger_ns / NV_NS_PER_S);
	o->output_cap_mib = (unsigned)(d.output_cap_bytes >> 20);
	o->read_grace_s = (unsigned)(d.read_grace_ns / NV_NS_PER_S);
	o->fetch_cache_mib = (unsigned)(d.fetch_cache_bytes >> 20);
	o->settle_workers = d.settle_workers;
	o->audit_interval_ms = (unsigned)(d.audit_period_ns / NV_NS_PER_MS);
}

static int check_options(const struct options *o)
{
	struct {
		const char *name;
		unsigned v, lo, hi;
	} r[] = {
		{ "backlog_mib", o->backlog_mib, 1, 1u << 20 },
		{ "tail_window_cache_mib", o->tail_cache_mib, 0, 1u << 20 },
		{ "read_cache_mib", o->read_cache_mib, 1, 1u << 20 },
		{ "flight_kib", o->flight_kib, 4, 1u << 20 },
		{ "linger_us", o->linger_us, 0, 10000000 },
		{ "put_window", o->put_window, 1, 64 },
		{ "put_timeout_s", o->put_timeout_s, 1, 86400 },
		{ "chunk_kib", o->chunk_kib, 4, 16384 },
		{ "readahead", o->readahead, 0, 64 },
		{ "prefetch_threads", o->prefetch_threads, 0, 64 },
		{ "absorb_batch", o->absorb_batch, 1, 65536 },
		{ "absorb_linger_us", o->absorb_linger_us, 0, 1000000 },
		{ "max_write_kib", o->max_write_kib, 4, 1024 },
		{ "kernel_readahead_kib", o->kernel_readahead_kib, 0, 1u << 20 },
		{ "age_cap_standard_s", o->age_cap_standard_s, 0, 30 * 86400 },
		{ "age_cap_express_s", o->age_cap_express_s, 0, 30 * 86400 },
		{ "settle_trigger_mib", o->settle_trigger_mib, 1, 1u << 20 },
		{ "settle_linger_s", o->settle_linger_s, 0, 86400 },
		{ "output_cap_mib", o->output_cap_mib, 1, 4096 },
		{ "read_grace_s", o->read_grace_s, 0, 86400 },
		{ "fetch_cache_mib", o->fetch_cache_mib, 16, 1u << 20 },
		{ "settle_workers", o->settle_workers, 1, 64 },
		{ "audit_interval_ms", o->audit_interval_ms, 10, 3600000 },
	};

	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		if (r[i].v < r[i].lo || r[i].v > r[i].hi) {
			fprintf(stderr, "novafs: -o %s=%u is out of range [%u, %u]\n", r[i].name,
				r[i].v, r[i].lo, r[i].hi);
			return -1;
		}
	}
	if (o->compress < -7 || o->compress > 19) {
		fprintf(stderr, "novafs: -o compress=%d is out of range [-7, 19]\n", o->compress);
		return -1;
	}
	if (o->attr_timeout < 0 || o->attr_timeout > 3600) {
		fprintf(stderr, "novafs: -o attr_timeout must be in [0, 3600]\n");
		return -1;
	}
	return 0;
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

/* The daemon's verdict to the waiting parent: one byte, 0 = mounted. */
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

static void tell_parent(int fd, int code)
{
	unsigned char c = (unsigned char)code;

	if (fd >= 0) {
		ssize_t w = write(fd, &c, 1);

		(void)w;
		close(fd);
	}
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts fopts;
	struct fuse_loop_config *lcfg = NULL;
	struct fuse_session *se = NULL;
	struct nova_fs *fs = NULL;
	struct stopper stopper;
	pthread_t stopper_thread;
	bool have_stopper = false;
	struct star *st = NULL;
	struct star_cfg scfg;
	struct fs_cfg fcfg;
	struct options o, defaults;
	char dd[PATH_MAX];
	int ret = 1, rc, status_fd = -1;

	/* A closed stderr or log pipe must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	set_defaults(&o);
	defaults = o;
	if (fuse_opt_parse(&args, &o, nova_opts, NULL) == -1)
		return 1;
	if (o.show_help) {
		usage(argv[0], &defaults);
		return 0;
	}
	if (o.show_version) {
		printf("novafs %s (libfuse %s)\n", PACKAGE_VERSION, fuse_pkgversion());
		return 0;
	}
	if (fuse_parse_cmdline(&args, &fopts) != 0)
		return 1;
	if (!fopts.mountpoint) {
		fprintf(stderr, "usage: %s [-f] [-o opt,...] MOUNTPOINT (--help for options)\n",
			argv[0]);
		return 1;
	}
	if (check_options(&o))
		goto out_args;
	if (o.debug) {
		const char *bad;
		int badlen;

		if (nv_log_set_debug(o.debug, &bad, &badlen)) {
			fprintf(stderr, "novafs: unknown debug subsystem '%.*s'\n", badlen, bad);
			goto out_args;
		}
	}
	if (fopts.debug)
		nv_log_level = NV_DEBUG;
	if (nv_fp_init_from_env()) {
		fprintf(stderr, "novafs: bad NOVAFS_FAILPOINTS\n");
		goto out_args;
	}
	if (o.data_dir) {
		if (!realpath(o.data_dir, dd)) {
			if (errno != ENOENT || o.data_dir[0] != '/') {
				fprintf(stderr, "novafs: data_dir %s: %s\n", o.data_dir,
					strerror(errno));
				goto out_args;
			}
			snprintf(dd, sizeof(dd), "%s", o.data_dir);
		}
	} else {
		nv_default_data_dir(dd, sizeof(dd));
	}
	if (o.log) {
		int lfd = open(o.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);

		if (lfd < 0) {
			fprintf(stderr, "novafs: log %s: %s\n", o.log, strerror(errno));
			goto out_args;
		}
		dup2(lfd, STDERR_FILENO);
		close(lfd);
	}

	/* Daemonize before any thread starts; the parent reports how the
	 * start-up went. */
	if (!fopts.foreground) {
		int p[2];
		pid_t pid;

		if (pipe(p)) {
			perror("novafs: pipe");
			goto out_args;
		}
		pid = fork();
		if (pid < 0) {
			perror("novafs: fork");
			goto out_args;
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
		status_fd = p[1];
		setsid();
		if (!o.log)
			nv_log_use_syslog("novafs");
	}

	fcfg.attr_timeout = o.attr_timeout;
	fcfg.entry_timeout = o.attr_timeout;
	fcfg.max_write = o.max_write_kib << 10;
	fcfg.max_readahead = o.kernel_readahead_kib << 10;
	fcfg.uid = getuid();
	fcfg.gid = getgid();
	fcfg.data_dir = dd;
	if (nova_fs_new(&fcfg, &fs))
		goto out_parent;

	star_cfg_defaults(&scfg);
	scfg.data_dir = dd;
	scfg.store_url = o.store;
	scfg.express_urls = o.express;
	scfg.location = o.location;
	scfg.meta_url = o.meta;
	scfg.star_id = o.star;
	scfg.store_faults = o.store_faults ? o.store_faults : getenv("NOVAFS_STORE_FAULTS");
	scfg.backlog_bytes = (uint64_t)o.backlog_mib << 20;
	scfg.tail_cache_bytes = (uint64_t)o.tail_cache_mib << 20;
	scfg.read_cache_bytes = (uint64_t)o.read_cache_mib << 20;
	scfg.flight_max = (uint64_t)o.flight_kib << 10;
	scfg.linger_ns = (uint64_t)o.linger_us * 1000;
	scfg.put_window = o.put_window;
	scfg.put_timeout_ns = (uint64_t)o.put_timeout_s * NV_NS_PER_S;
	scfg.chunk_kib = o.chunk_kib;
	scfg.zstd_level = o.compress;
	scfg.readahead = o.readahead;
	scfg.prefetch_threads = o.prefetch_threads;
	scfg.absorb_batch_slots = o.absorb_batch;
	scfg.absorb_linger_ns = (uint64_t)o.absorb_linger_us * 1000;
	scfg.age_cap_ns[NV_CLASS_STANDARD] = (uint64_t)o.age_cap_standard_s * NV_NS_PER_S;
	scfg.age_cap_ns[NV_CLASS_EXPRESS] = (uint64_t)o.age_cap_express_s * NV_NS_PER_S;
	scfg.settle_trigger_bytes = (uint64_t)o.settle_trigger_mib << 20;
	scfg.settle_linger_ns = (uint64_t)o.settle_linger_s * NV_NS_PER_S;
	scfg.output_cap_bytes = (uint64_t)o.output_cap_mib << 20;
	scfg.read_grace_ns = (uint64_t)o.read_grace_s * NV_NS_PER_S;
	scfg.fetch_cache_bytes = (uint64_t)o.fetch_cache_mib << 20;
	scfg.scratch_dir = o.scratch_dir;
	scfg.settle_workers = o.settle_workers;
	scfg.audit_period_ns = (uint64_t)o.audit_interval_ms * NV_NS_PER_MS;
	scfg.acked = nova_fs_acked;
	scfg.acked_arg = fs;
	{
		/* max_read must also be a mount option (libfuse docs). */
		char mr[64];

		snprintf(mr, sizeof(mr), "-omax_read=%u", 1u << 20);
		fuse_opt_add_arg(&args, mr);
		fuse_opt_add_arg(&args, "-osubtype=novafs");
		fuse_opt_add_arg(&args, "-ofsname=novafs");
	}
	/* The session first: it rejects bad FUSE options before the engine
	 * mints an epoch for nothing. */
	se = fuse_session_new(&args, nova_fs_ops(), sizeof(*nova_fs_ops()), fs);
	if (!se)
		goto out_parent;
	rc = star_open(&scfg, &st);
	if (rc) {
		fprintf(stderr, "novafs: cannot start on %s: %s\n", dd, strerror(-rc));
		fuse_session_destroy(se);
		goto out_parent;
	}
	nova_fs_set_star(fs, st);
	main_thread = pthread_self();
	if (install_stop_handlers() != 0)
		goto out_session;
	if (fuse_session_mount(se, fopts.mountpoint) != 0) {
		fprintf(stderr, "novafs: cannot mount on %s\n", fopts.mountpoint);
		goto out_signals;
	}
	nova_fs_set_session(fs, se);
	set_kernel_readahead(fopts.mountpoint, o.kernel_readahead_kib);
	stopper.se = se;
	stopper.fs = fs;
	if (pthread_create(&stopper_thread, NULL, stopper_main, &stopper) == 0)
		have_stopper = true;
	nv_log(NV_INFO, NV_SUB_MAIN, "star %s serving %s on %s", star_id(st), dd,
	       fopts.mountpoint);
	if (status_fd >= 0) {
		int nul = open("/dev/null", O_RDWR);

		tell_parent(status_fd, 0);
		status_fd = -1;
		if (nul >= 0) {
			dup2(nul, STDIN_FILENO);
			dup2(nul, STDOUT_FILENO);
			if (!o.log)
				dup2(nul, STDERR_FILENO);
			if (nul > 2)
				close(nul);
		}
		if (chdir("/"))
			dummy = 1;
	}

	if (fopts.singlethread) {
		ret = fuse_session_loop(se);
	} else {
		lcfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(lcfg, fopts.clone_fd);
		/* libfuse leaves max_threads at UINT_MAX when -o max_threads
		 * is absent. */
		fuse_loop_cfg_set_max_threads(lcfg, fopts.max_threads && fopts.max_threads <= 100000
							    ? fopts.max_threads : 32);
		if (fopts.max_idle_threads <= 100000) /* UINT_MAX: unset */
			fuse_loop_cfg_set_idle_threads(lcfg, fopts.max_idle_threads);
		ret = fuse_session_loop_mt(se, lcfg);
		fuse_loop_cfg_destroy(lcfg);
	}
	/* The loop returns the signal number when a signal ended it: that is
	 * an orderly stop, not a failure. */
	if (ret > 0)
		ret = 0;
	if (have_stopper) {
		unsigned char zero = 0;
		ssize_t w = write(stop_pipe[1], &zero, 1); /* no-op if it already ran */

		(void)w;
		pthread_join(stopper_thread, NULL);
	}
	nv_log(NV_INFO, NV_SUB_MAIN, "unmounting %s: flushing and absorbing", fopts.mountpoint);
	/* While the device is still open (a signal ended the loop; after
	 * fusermount3 -u nobody is listening anyway): parked follow reads
	 * get their end-of-file, the engine acknowledges its last appends,
	 * and only then is the filesystem unmounted. */
	nova_fs_shutdown(fs);
	rc = star_close(st);
	st = NULL;
	if (rc)
		ret = 1;
	fuse_session_unmount(se);
out_signals:
out_session:
	if (st) {
		nova_fs_shutdown(fs);
		(void)star_close(st);
	}
	nova_fs_set_session(fs, NULL);
	fuse_session_destroy(se);
out_parent:
	tell_parent(status_fd, 1);
	nova_fs_free(fs);
out_args:
	free(fopts.mountpoint);
	fuse_opt_free_args(&args);
	free(o.data_dir);
	free(o.store);
	free(o.express);
	free(o.location);
	free(o.meta);
	free(o.star);
	free(o.debug);
	free(o.log);
	free(o.scratch_dir);
	free(o.store_faults);
	return ret ? 1 : 0;
}
