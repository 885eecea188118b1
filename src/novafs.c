/*
 * novafs.c - the mount daemon: `novafs [-f] [-o opt,...] [SOURCE] MOUNTPOINT`.
 *
 * For: the command line (its options are src/options.h's table),
 * starting the engine (engine/star.h) and the FUSE session (fs/fs.h),
 * daemonizing and logging, signals, and the graceful close when the
 * filesystem is unmounted or the daemon is signalled.  Not for: engine
 * or filesystem logic.
 *
 * Start-up order (main()): parse_args() (opts_parse(), opts_check()) ->
 * setup_process() (check_mountpoint()) -> daemonize() (the parent waits for the child's
 * verdict on a pipe, so start-up errors reach the terminal) ->
 * start_engine() (load_cluster(), then star_open(): recovery runs there,
 * then start_api()) -> mount_and_serve().
 * Shut-down order (mount_and_serve(), then teardown()): the loop ends ->
 * release every writer lease with its flush and nudge the peers
 * (leave_gracefully()) -> stop the star API (api_server_stop()) -> close the engine (flush, drain, absorb, mark epochs settled) while the
 * device is open -> unmount -> free.
 *
 * Invariants:
 *  1. Every option is one line of NOVAFS_OPTIONS (src/options.h).
 *  2. The parent of a daemonizing start exits with the child's verdict:
 *     0 only once the filesystem is mounted (what mount(8) and
 *     mount.fuse3 wait for).
 *  3. Until detach() stderr is the terminal: every start-up refusal is
 *     said there; after it, a log file (-o log, or DATA_DIR/novafs.log
 *     without a syslog socket) or syslog gets the lines.
 */
#include "config.h"
#include "api/auth.h"
#include "api/client.h"
#include "api/server.h"
#include "engine/plan.h"
#include "engine/handoff.h"
#include "engine/stack.h"
#include "engine/star.h"
#include "fs/fs.h"
#include "src/base/clock.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"
#include "src/base/paths.h"
#include "src/options.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Where syslog(3) sends its lines. */
#define SYSLOG_SOCKET "/dev/log"

static volatile sig_atomic_t dummy;

/*
 * Signals.  libfuse's own handlers end the session loop at once, so a
 * reader's close or a writer's last acknowledgement would meet a session
 * nobody serves.  Ours only wake the stopper thread.  SIGTERM and SIGINT
 * stop: the stopper answers every request parked at the recovery gate
 * (star_gate_shut(): recovery may never finish), lets the session serve
 * while the follow view answers its parked reads (end-of-file) and their
 * readers close, then ends the loop; the engine then acknowledges the
 * last appends while the device is still open.  SIGHUP reopens the log
 * file (logrotate's convention) and does not stop.  Without a signal the
 * stopper still answers the gate's waiters when the session ends under
 * them (session_gone(): an aborted connection, a detached mount), since
 * the loop joins its workers before it returns.
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
	struct star *st;
	const char *log_path; /* reopened on SIGHUP; NULL: syslog or stderr */
	char dev[32];         /* the mount's MAJ:MIN in mountinfo; "": unknown */
};

/* Open path for appending and make it stderr (where nv_log writes).
 * 0 or -errno. */
static int log_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);

	if (fd < 0)
		return -errno;
	if (dup2(fd, STDERR_FILENO) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	close(fd);
	return 0;
}

static void reopen_log(const struct stopper *sp)
{
	int rc;

	if (!sp->log_path) {
		nv_log(NV_INFO, NV_SUB_MAIN, "SIGHUP: no log file to reopen");
		return;
	}
	rc = log_open(sp->log_path);
	if (rc)
		nv_log(NV_WARN, NV_SUB_MAIN, "SIGHUP: cannot reopen the log %s: %s; "
		       "logging on to the old file", sp->log_path, strerror(-rc));
	else
		nv_log(NV_INFO, NV_SUB_MAIN, "SIGHUP: log %s reopened", sp->log_path);
}

/* Some mount in /proc/self/mountinfo has device number dev ("MAJ:MIN").
 * 1 yes, 0 no, -errno when mountinfo cannot be read. */
static int dev_mounted(const char *dev)
{
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int found = 0;

	if (!f)
		return -errno;
	while (!found && fgets(line, sizeof(line), f)) {
		/* ID PARENT MAJ:MIN ... */
		char *save = NULL, *t = strtok_r(line, " ", &save);

		for (int i = 0; t && i < 2; i++)
			t = strtok_r(NULL, " ", &save);
		found = t && !strcmp(t, dev);
	}
	fclose(f);
	return found;
}

/*
 * The session is over although no signal came: the kernel aborted the
 * connection (`umount -f`, fusectl's abort: the loop ends and joins its
 * workers) or the mount was detached (`fusermount3 -uz`: the kernel ends
 * the connection once the last request is answered).  A request parked
 * at the recovery gate would keep its worker, and so the loop and the
 * unmount, forever: answer it (ESHUTDOWN), now and later.
 */
static void session_gone(const struct stopper *sp, const char *why)
{
	if (!star_gate_is_open(sp->st))
		nv_log(NV_WARN, NV_SUB_MAIN, "%s while recovery is unfinished: answering "
		       "the requests waiting for it with ESHUTDOWN", why);
	star_gate_shut(sp->st);
}

/*
 * Wait for a byte on the stop pipe (a signal number, or 0 once the loop
 * has returned) into *c, watching meanwhile the session's device (POLLERR:
 * the connection was aborted) and the mount table (POLLPRI: our mount may
 * have been detached); each is reported to session_gone() once.  The
 * device only while the gate is closed (it opens once): session_gone()
 * is for the gate's waiters, and a poll of the device wakes this thread
 * at every request the kernel queues, a context switch per append.
 */
static void stopper_wait(const struct stopper *sp, unsigned char *c)
{
	struct pollfd p[3] = {
		{ .fd = stop_pipe[0], .events = POLLIN },
		{ .fd = fuse_session_fd(sp->se), .events = 0 }, /* POLLERR only */
		{ .fd = sp->dev[0] ? open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC) : -1,
		  .events = POLLPRI },
	};

	if (p[2].fd >= 0 && dev_mounted(sp->dev) == 0) { /* gone before we looked */
		session_gone(sp, "the mount was detached");
		close(p[2].fd);
		p[2].fd = -1;
	}
	for (;;) {
		if (p[1].fd >= 0 && star_gate_is_open(sp->st))
			p[1].fd = -1;
		/* Closed, the gate is looked at again each second. */
		if (poll(p, 3, p[1].fd >= 0 ? 1000 : -1) < 0) {
			if (errno == EINTR)
				continue;
			break; /* cannot watch: wait for the pipe alone */
		}
		if (p[0].revents)
			break;
		if (p[1].revents) {
			session_gone(sp, "the FUSE connection was aborted");
			p[1].fd = -1;
		}
		if (p[2].revents) {
			/* Reopen before looking, so a change after the look
			 * wakes the next poll. */
			close(p[2].fd);
			p[2].fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
			if (dev_mounted(sp->dev) == 0) {
				session_gone(sp, "the mount was detached");
				if (p[2].fd >= 0)
					close(p[2].fd);
				p[2].fd = -1;
			}
		}
	}
	if (p[2].fd >= 0)
		close(p[2].fd);
	*c = 0;
	while (read(stop_pipe[0], c, 1) < 0 && errno == EINTR)
		;
}

static void *stopper_main(void *arg)
{
	struct stopper *sp = arg;
	unsigned char c = 0;

	for (;;) {
		stopper_wait(sp, &c);
		if (c != SIGHUP)
			break;
		reopen_log(sp);
	}
	if (c == 0)
		return NULL; /* the loop ended on its own (fusermount3 -u) */
	nv_log(NV_INFO, NV_SUB_MAIN, "signal %d: stopping (answering followers first)", c);
	/* A request waiting for a recovery that cannot finish would keep
	 * its worker, and so the loop, forever. */
	star_gate_shut(sp->st);
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
/*
 * The topmost FUSE mount on mnt in /proc/self/mountinfo: its device
 * number ("MAJ:MIN") and file system type ("fuse.novafs") into dev and
 * type.  1 found, 0 not, -errno when mountinfo cannot be read.
 */
static int fuse_mount_of(const char *mnt, char dev[32], char type[64])
{
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int found = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE ... */
		char *save = NULL, *tok[5], *fstype;
		int n = 0;

		fstype = strstr(line, " - ");
		if (!fstype || strncmp(fstype + 3, "fuse", 4))
			continue;
		fstype += 3;
		fstype[strcspn(fstype, " ")] = 0;
		for (char *t = strtok_r(line, " ", &save); t && n < 5; t = strtok_r(NULL, " ", &save))
			tok[n++] = t;
		if (n < 5)
			continue;
		unescape_octal(tok[4]);
		if (!strcmp(tok[4], mnt)) { /* the last one is on top */
			snprintf(dev, 32, "%s", tok[2]);
			snprintf(type, 64, "%s", fstype);
			found = 1;
		}
	}
	fclose(f);
	return found;
}

/* The mount's device number into dev ("" when it cannot be found; logged). */
static void find_mount_dev(const char *mnt, char dev[32])
{
	char type[64];
	int rc = fuse_mount_of(mnt, dev, type);

	if (rc < 0)
		nv_log(NV_INFO, NV_SUB_MAIN, "%s not found: mountinfo: %s", mnt, strerror(-rc));
	else if (!rc)
		nv_log(NV_INFO, NV_SUB_MAIN, "%s not in mountinfo", mnt);
	if (rc <= 0)
		dev[0] = 0;
}

/* dev: the mount's device number (find_mount_dev()); "" leaves it alone. */
static void set_kernel_readahead(const char *mnt, unsigned kib, const char *dev)
{
	char path[96];
	int fd;

	if (!kib || !dev[0])
		return;
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
	int status_fd;          /* the waiting parent's pipe; -1: none (invariant 2) */
	const char *log_path;   /* the log file (-o log, or log_buf); NULL: none */
	char log_buf[PATH_MAX + 16]; /* DATA_DIR/novafs.log when there is no syslog */
	struct nova_fs *fs;
	struct fuse_session *se;
	struct star *st;
	struct api_secret *secret;  /* -o cluster_secret_file; NULL: none */
	struct api_client *client;  /* with a secret: fs/ reaches other stars */
	struct api_server *api;     /* -o listen: the star API */
};

/*
 * `novafs SOURCE MOUNTPOINT` (mount -t fuse.novafs, /etc/fstab, through
 * mount.fuse3) or `novafs MOUNTPOINT`: the mount point goes back to
 * libfuse's own parser.  SOURCE is a label for mount(8) and
 * /proc/mounts; the data directory is -o data_dir.  0 or -1 (said why).
 */
static int take_positional(struct daemon *d, const char *prog)
{
	if (d->o.npos == 0) {
		fprintf(stderr, "usage: %s [-f] [-o opt,...] [SOURCE] MOUNTPOINT (--help for "
			"options)\n", prog);
		return -1;
	}
	return fuse_opt_add_arg(&d->args, d->o.pos[d->o.npos - 1]) ? -1 : 0;
}

/* The command line into d->o and d->fopts.  0: go on; 1: done (--help,
 * --version printed); -1: refused (said why). */
static int parse_args(struct daemon *d, const char *prog)
{
	if (opts_parse(&d->args, &d->o))
		return -1;
	if (d->o.show_help) {
		opts_usage(prog);
		return 1;
	}
	if (d->o.show_version) {
		printf("novafs %s (libfuse %s)\n", PACKAGE_VERSION, fuse_pkgversion());
		return 1;
	}
	if (opts_check(&d->o) || take_positional(d, prog) ||
	    fuse_parse_cmdline(&d->args, &d->fopts) != 0)
		return -1;
	return 0;
}

/*
 * The mount point: a directory, and not a live novafs already (a second
 * daemon on top would hide the first one's streams; a dead mount is
 * libfuse's to refuse).  0 or -1 (said why).
 */
static int check_mountpoint(const char *mnt)
{
	char dev[32], type[64];
	struct stat sb;

	if (stat(mnt, &sb)) {
		if (errno == ENOTCONN)
			return 0;
		fprintf(stderr, "novafs: mount point %s: %s\n", mnt, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		fprintf(stderr, "novafs: mount point %s is not a directory\n", mnt);
		return -1;
	}
	if (fuse_mount_of(mnt, dev, type) == 1 && !strcmp(type, "fuse.novafs")) {
		fprintf(stderr, "novafs: %s is already a novafs mount (unmount it first: "
			"fusermount3 -u %s)\n", mnt, mnt);
		return -1;
	}
	return 0;
}

/* Ranges, logging, failpoints and the data directory.  0 or -1 (said why). */
static int setup_process(struct daemon *d)
{
	const struct options *o = &d->o;
	enum plan_vending vending;

	if (check_mountpoint(d->fopts.mountpoint))
		return -1;
	if (o->debug) {
		const char *bad;
		int badlen;

		if (nv_log_set_debug(o->debug, &bad, &badlen)) {
			fprintf(stderr, "novafs: unknown debug subsystem '%.*s'\n", badlen, bad);
			return -1;
		}
	}
	if (nova_fs_check_durable(o->durable)) {
		fprintf(stderr, "novafs: -o durable=%s: expected write or fsync\n", o->durable);
		return -1;
	}
	if (plan_vending_parse(o->plan_vending, &vending)) {
		fprintf(stderr, "novafs: -o plan_vending=%s: expected raw or signed\n",
			o->plan_vending);
		return -1;
	}
	if (stack_meta_check_valid(o->meta_check)) {
		fprintf(stderr, "novafs: -o meta_check=%s: expected quick, warn or off\n",
			o->meta_check);
		return -1;
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
		int rc = log_open(o->log);

		if (rc) {
			fprintf(stderr, "novafs: -o log=%s: %s\n", o->log, strerror(-rc));
			return -1;
		}
		d->log_path = o->log;
	}
	return 0;
}

/*
 * Without -f and -o log: syslog, when something listens on its socket;
 * else (a container) the file novafs.log in the data directory, said on
 * the terminal before it is let go.  0 or -1 (said why).
 */
static int background_log(struct daemon *d)
{
	struct stat sb;
	int rc;

	if (!stat(SYSLOG_SOCKET, &sb) && S_ISSOCK(sb.st_mode)) {
		nv_log_use_syslog("novafs");
		return 0;
	}
	snprintf(d->log_buf, sizeof(d->log_buf), "%s/novafs.log", d->dd);
	if (mkdir(d->dd, 0700) && errno != EEXIST) {
		fprintf(stderr, "novafs: data_dir %s: %s\n", d->dd, strerror(errno));
		return -1;
	}
	/* Said while stderr is still the terminal. */
	fprintf(stderr, "novafs: no syslog socket (%s): logging to %s\n", SYSLOG_SOCKET,
		d->log_buf);
	rc = log_open(d->log_buf);
	if (rc) {
		fprintf(stderr, "novafs: log %s: %s\n", d->log_buf, strerror(-rc));
		return -1;
	}
	d->log_path = d->log_buf;
	return 0;
}

/* Without -f: fork before any thread starts; the parent waits for the
 * child's verdict and exits with it (invariant 2).  0 in the child (or
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
		return background_log(d);
	return 0;
}

/* The cluster secret and client: listen= needs the secret; a secret
 * alone makes this mount a client of the stars that lead its streams.
 * A request to a holder is bounded by put_timeout_s + star_lease_s: a
 * live holder answers within its store's retries, and one paused or cut
 * off can ack nothing past its lease deadline, so a longer wait only
 * stalls the writer (the answer is then ETIMEDOUT: in doubt).  0 or -1
 * (said why on the terminal). */
static int load_cluster(struct daemon *d, const struct star_cfg *scfg)
{
	struct api_client_cfg ccfg = { 0 };
	const char *why = "";
	int rc;

	if (d->o.listen && !d->o.cluster_secret_file) {
		fprintf(stderr, "novafs: listen=%s needs cluster_secret_file= (every star API "
			"request must carry the cluster secret)\n", d->o.listen);
		return -1;
	}
	if (!d->o.cluster_secret_file)
		return 0;
	rc = api_secret_load(d->o.cluster_secret_file, &d->secret, &why);
	if (rc) {
		fprintf(stderr, "novafs: %s: %s (%s)\n", d->o.cluster_secret_file, why,
			strerror(-rc));
		return -1;
	}
	ccfg.secret = d->secret;
	ccfg.timeout_ms = (unsigned)(scfg->put_timeout_ns / 1000000u) +
			  (scfg->star_lease_s ? scfg->star_lease_s : 10) * 1000u;
	if (api_client_new(&ccfg, &d->client)) {
		fprintf(stderr, "novafs: cannot start the cluster client: out of memory\n");
		return -1;
	}
	nova_fs_set_client(d->fs, d->client);
	return 0;
}

/* The star API on listen= (after star_open()).  0 or -1 (said why). */
static int start_api(struct daemon *d, size_t max_body)
{
	struct api_server_cfg acfg = { 0 };
	int rc;

	if (!d->o.listen)
		return 0;
	acfg.listen = d->o.listen;
	acfg.secret = d->secret;
	acfg.star = d->st;
	acfg.max_body = max_body;
	acfg.max_conns = d->o.api_max_conns;
	rc = api_server_start(&acfg, &d->api);
	if (rc) {
		fprintf(stderr, "novafs: cannot serve the star API on %s: %s\n", d->o.listen,
			strerror(-rc));
		return -1;
	}
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
	opts_map(&d->o, &scfg, &fcfg);
	fcfg.uid = getuid();
	fcfg.gid = getgid();
	fcfg.data_dir = d->dd;
	if (nova_fs_new(&fcfg, &d->fs) || load_cluster(d, &scfg))
		return -1;
	scfg.data_dir = d->dd;
	if (!scfg.store_faults)
		scfg.store_faults = getenv("NOVAFS_STORE_FAULTS");
	if (!scfg.meta_check)
		scfg.meta_check = "quick"; /* the table's default */
	scfg.acked = nova_fs_acked;
	scfg.acked_arg = d->fs;
	scfg.trimmed = nova_fs_trimmed;
	scfg.trimmed_arg = d->fs;
	/* max_read must also be a mount option (libfuse docs). */
	snprintf(mr, sizeof(mr), "-omax_read=%u", 1u << 20);
	fuse_opt_add_arg(&d->args, mr);
	fuse_opt_add_arg(&d->args, "-osubtype=novafs");
	fuse_opt_add_arg(&d->args, "-ofsname=novafs");
	fuse_opt_add_arg(&d->args, "-odefault_permissions"); /* owners and modes (fs/perm.h) */
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
	return start_api(d, fcfg.max_write);
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
		if (!d->log_path)
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

static int nudge_peer(void *arg, const char *id, const char *addr)
{
	struct daemon *d = arg;
	int rc = api_client_nudge(d->client, addr, star_id(d->st));

	nv_log(rc ? NV_WARN : NV_DEBUG, NV_SUB_MAIN, "closing: nudging star %s at %s: %s", id,
	       addr, rc ? strerror(-rc) : "done");
	return 0;
}

/* The graceful close's first half (DESIGN.md section 7 "Settlement
 * drivers"), while the star API still answers so a redialed append
 * finds the new holder: every writer lease released with its flush
 * (handoff_leave()), then every live peer nudged to re-check its leases
 * and settle the chains' batch markers now. */
static void leave_gracefully(struct daemon *d)
{
	int rc = handoff_leave(d->st, NULL);

	if (rc)
		nv_log(NV_WARN, NV_SUB_MAIN, "closing: handing off failed (%s): what is left "
		       "expires with the registry lease", strerror(-rc));
	if (d->client && (rc = handoff_peers(d->st, nudge_peer, d)))
		nv_log(NV_WARN, NV_SUB_MAIN, "closing: listing the peers to nudge failed: %s",
		       strerror(-rc));
}

/* Mount, serve, and on the way out close the engine while the device is
 * still open, then unmount.  The exit status: 0 or 1. */
static int mount_and_serve(struct daemon *d)
{
	struct stopper stopper = { d->se, d->fs, d->st, d->log_path, "" };
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
	find_mount_dev(d->fopts.mountpoint, stopper.dev);
	set_kernel_readahead(d->fopts.mountpoint, d->o.kernel_readahead_kib, stopper.dev);
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
	 * and only then is the filesystem unmounted.  The star API first:
	 * its appends are acked and its subscriptions ended while the
	 * engine still runs. */
	leave_gracefully(d);
	api_server_stop(d->api);
	d->api = NULL;
	nova_fs_shutdown(d->fs);
	rc = star_close(d->st);
	d->st = NULL;
	fuse_session_unmount(d->se);
	return ret || rc ? 1 : 0;
}

/* Undo whatever start_engine() made and mount_and_serve() left. */
static void teardown(struct daemon *d)
{
	api_server_stop(d->api);
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
	api_client_free(d->client);
	api_secret_free(d->secret);
	free(d->fopts.mountpoint);
	opts_free(&d->o);
	fuse_opt_free_args(&d->args); /* fuse_opt_add_arg() copied argv */
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
