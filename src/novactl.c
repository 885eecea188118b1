/*
 * novactl.c - the admin CLI beside the mount (novactl(8)).
 *
 *   novactl status [-o OPTS] [--json] a summary (mounted, buckets, streams,
 *                                     bytes, settlement, problems), the
 *                                     metastore and its members, then
 *                                     chains, epochs, cursors, backlog per star
 *   novactl fsck   [-o OPTS] [--full] check the invariants (engine/fsck.h);
 *                                     exit 1 on any violation
 *   novactl layout [-o OPTS] BUCKET/STREAM   the stream's full layout (JSON)
 *   novactl drain  [-o OPTS] [--timeout S] STAR   decommission a star: it
 *                                     takes no lease and hands off its own;
 *                                     progress until the terminate gate
 *   novactl version
 *
 * OPTS: data_dir=DIR (default as for novafs), store=URL, express=URL;...,
 * location=ZONE, meta=URL; the store and metastore are opened by
 * stack_open() (engine/stack.h), as novafs opens them, except that the
 * default metastore must exist already.
 * fsck refuses a data directory that a running novafs holds (its flock)
 * unless --force: the cursors would move under the check.  status reads
 * the metastore and lists the store (the unabsorbed slots), never
 * writes, and works on a mounted store.  drain writes one byte: the
 * state of the star's registry row (meta_star_set_state()); the star
 * itself does the rest (engine/handoff.h), and drain watches the
 * metastore for the terminate gate (drain_progress()).
 */
#include "config.h"
#include "engine/chain.h"
#include "engine/fsck.h"
#include "engine/layout.h"
#include "engine/stack.h"
#include "engine/store/store.h"
#include "meta/chains.h"
#include "meta/cursors.h"
#include "meta/kv.h"
#include "meta/leases.h"
#include "meta/markers.h"
#include "meta/refs.h"
#include "meta/stars.h"
#include "meta/streams.h"
#include "src/base/log.h"
#include "src/base/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

struct ctl {
	char data_dir[PATH_MAX];
	char store_url[PATH_MAX + 8];
	char meta_url[PATH_MAX + 8];
	char express[4 * PATH_MAX];
	char location[72];
	bool full, force, json;
	unsigned timeout_s;     /* drain: 0 waits for ever */
	struct stack stack; /* open_backends() */
};

static int usage(FILE *to)
{
	fprintf(to,
		"usage: novactl status [-o OPTS] [--json]\n"
		"       novactl fsck [-o OPTS] [--full] [--force]\n"
		"       novactl layout [-o OPTS] BUCKET/STREAM\n"
		"       novactl drain [-o OPTS] [--timeout S] STAR\n"
		"       novactl version\n"
		"OPTS (comma-separated): data_dir=DIR, store=URL, express=URL;URL;...,\n"
		"      location=ZONE, meta=URL (as for novafs)\n"
		"drain: STAR takes no writer lease, hands its streams to other live stars\n"
		"      and settles its chains; progress is printed until the terminate gate\n"
		"      passes (exit 0), or --timeout S seconds (default 600; 0: none) pass\n"
		"      (exit 1)\n"
		"See novactl(8).\n");
	return 2;
}

static int parse_opts(struct ctl *c, const char *spec)
{
	char *copy = strdup(spec), *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strncmp(t, "data_dir=", 9))
			snprintf(c->data_dir, sizeof(c->data_dir), "%s", t + 9);
		else if (!strncmp(t, "store=", 6))
			snprintf(c->store_url, sizeof(c->store_url), "%s", t + 6);
		else if (!strncmp(t, "meta=", 5))
			snprintf(c->meta_url, sizeof(c->meta_url), "%s", t + 5);
		else if (!strncmp(t, "express=", 8))
			snprintf(c->express, sizeof(c->express), "%s", t + 8);
		else if (!strncmp(t, "location=", 9))
			snprintf(c->location, sizeof(c->location), "%s", t + 9);
		else {
			fprintf(stderr, "novactl: unknown option '%s'\n", t);
			free(copy);
			return -EINVAL;
		}
	}
	free(copy);
	return 0;
}

/* The store and metastore as novafs assembles them (engine/stack.h). */
static int open_backends(struct ctl *c)
{
	struct stack_cfg sc = {
		.data_dir = c->data_dir,
		.store_url = c->store_url[0] ? c->store_url : NULL,
		.express_urls = c->express,
		.location = c->location[0] ? c->location : NULL,
		.meta_url = c->meta_url[0] ? c->meta_url : NULL,
		.meta_must_exist = true, /* a typo in data_dir must not create one */
	};
	struct stack_failure why;
	int rc = stack_open(&sc, &c->stack, &why);

	if (!rc)
		return 0;
	switch (why.part) {
	case STACK_STORE:
		fprintf(stderr, "novactl: object store %s: %s\n", why.url, strerror(-rc));
		break;
	case STACK_EXPRESS:
	case STACK_ROUTE:
	case STACK_FAULTS: /* novactl injects no faults */
		fprintf(stderr, "novactl: express bucket set: %s\n", strerror(-rc));
		break;
	case STACK_META_MISSING:
		fprintf(stderr, "novactl: no metastore at %s (wrong data_dir?)\n",
			why.url + strlen("sqlite:"));
		break;
	case STACK_META:
	case STACK_META_DAMAGED: /* novactl runs no start-up check */
		fprintf(stderr, "novactl: metastore %s: %s\n", why.url, strerror(-rc));
		break;
	}
	return rc;
}

/* ------------------------------------------------------------ status */

struct status_arg {
	struct ctl *c;
	char last_star[META_STAR_MAX + 1];
};

static int count_markers(void *arg, const struct meta_marker *m)
{
	(*(uint64_t *)arg)++;
	return 0;
}

static int count_slots(void *arg, const char *key, uint64_t size)
{
	(*(uint64_t *)arg)++;
	return 0;
}

static int status_chain(void *arg, const struct meta_chain *ch, uint64_t ver)
{
	struct status_arg *a = arg;
	char prefix[CHAIN_KEY_MAX];
	uint64_t markers = 0, slots = 0, head = 0, curver;
	struct meta_cursors cur;
	int rc;

	if (strcmp(a->last_star, ch->star)) {
		snprintf(a->last_star, sizeof(a->last_star), "%s", ch->star);
		printf("star %s\n", ch->star);
		printf("  %-8s %6s %-8s %11s %11s %11s %11s %8s %10s\n", "class", "epoch", "state",
		       "checkpoint", "cut", "rewritten", "trimmed", "markers", "unabsorbed");
	}
	rc = meta_marker_list(a->c->stack.kv, ch->cls, ch->star, ch->epoch, count_markers,
			      &markers);
	if (rc)
		return rc;
	/* Backlog: slots in the store at or above the checkpoint. */
	chain_slot_key(prefix, sizeof(prefix), ch->cls, ch->star, ch->epoch, ch->checkpoint);
	{
		char dir[CHAIN_KEY_MAX], after[CHAIN_KEY_MAX];
		size_t n = strlen(prefix) - 16;

		memcpy(dir, prefix, n);
		dir[n] = 0;
		if (ch->state != CHAIN_LIVE) {
			slots = 0; /* settled or fenced: nothing to absorb (the
				    * object at the cut is the fence) */
		} else if (ch->checkpoint) {
			chain_slot_key(after, sizeof(after), ch->cls, ch->star, ch->epoch,
				       ch->checkpoint - 1);
			rc = store_list(a->c->stack.store, dir, after, count_slots, &slots);
		} else {
			rc = store_list(a->c->stack.store, dir, NULL, count_slots, &slots);
		}
		if (rc)
			return rc;
	}
	rc = meta_mint_head(a->c->stack.kv, ch->cls, ch->star, &head);
	if (!rc)
		rc = meta_cursors_get(a->c->stack.kv, ch->cls, ch->star, ch->epoch, &cur, &curver);
	if (rc)
		return rc;
	printf("  %-8s %6" PRIu64 " %-8s %11" PRIu64 " %11s %11" PRIu64 " %11" PRIu64
	       " %8" PRIu64 " %10" PRIu64 "%s\n",
	       nv_class_name(ch->cls), ch->epoch, meta_chain_state_name(ch->state),
	       ch->checkpoint,
	       ch->state == CHAIN_LIVE ? "-" : (snprintf(prefix, sizeof(prefix), "%" PRIu64,
						      ch->cut), prefix),
	       cur.rewritten, cur.trimmed, markers, slots,
	       ch->epoch == head && ch->state == CHAIN_LIVE ? "  (head)" : "");
	return 0;
}

/* ------------------------------------------------------------ summary */

/* What `novactl status` opens with (and --json prints). */
struct summary {
	bool mounted;
	uint64_t buckets, streams, deleted, bytes;
	uint64_t chains, unsettled, crashed; /* crashed: below the mint head, not settled */
	uint64_t markers, oldest_marker_ns;  /* unsettled batches; birth of the oldest */
	uint64_t *ids;                       /* live stream ids (collected, then sized) */
	size_t nids, idcap;
	int err;                             /* the first error reading them */
};

static int sum_bucket(void *arg, const struct meta_bucket *b)
{
	(void)b;
	((struct summary *)arg)->buckets++;
	return 0;
}

static int sum_stream(void *arg, const struct meta_stream *st)
{
	struct summary *s = arg;

	if (st->deleted_ns) {
		s->deleted++;
		return 0;
	}
	s->streams++;
	if (s->nids == s->idcap) {
		size_t ncap = s->idcap ? s->idcap * 2 : 256;
		uint64_t *p = realloc(s->ids, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->ids = p;
		s->idcap = ncap;
	}
	s->ids[s->nids++] = st->id;
	return 0;
}

static int sum_marker(void *arg, const struct meta_marker *m)
{
	struct summary *s = arg;

	s->markers++;
	if (!s->oldest_marker_ns || m->birth_ns < s->oldest_marker_ns)
		s->oldest_marker_ns = m->birth_ns;
	return 0;
}

struct sum_chains {
	struct meta_chain *v;
	size_t n, cap;
};

static int sum_chain(void *arg, const struct meta_chain *ch, uint64_t ver)
{
	struct sum_chains *sc = arg;

	(void)ver;
	if (sc->n == sc->cap) {
		size_t ncap = sc->cap ? sc->cap * 2 : 16;
		struct meta_chain *p = realloc(sc->v, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		sc->v = p;
		sc->cap = ncap;
	}
	sc->v[sc->n++] = *ch;
	return 0;
}

/* Is a daemon running on the data directory (its flock held)? */
static bool data_dir_mounted(const struct ctl *c)
{
	char path[PATH_MAX + 8];
	int fd;
	bool held;

	snprintf(path, sizeof(path), "%s/lock", c->data_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	held = flock(fd, LOCK_SH | LOCK_NB) != 0;
	close(fd);
	return held;
}

static int summarize(struct ctl *c, struct summary *s)
{
	struct kv *kv = c->stack.kv;
	struct sum_chains sc = { 0 };
	int rc;

	s->mounted = data_dir_mounted(c);
	rc = meta_bucket_list(kv, "", sum_bucket, s);
	if (!rc)
		rc = meta_stream_list_all(kv, sum_stream, s);
	for (size_t i = 0; !rc && i < s->nids; i++) {
		struct meta_ref r;
		int e;

		meta_ref_init(&r);
		e = meta_ref_last(kv, s->ids[i], &r);
		if (!e)
			s->bytes += r.end_byte;
		else if (e != -ENOENT)
			rc = e;
		meta_ref_clear(&r);
	}
	if (!rc)
		rc = meta_chain_list(kv, sum_chain, &sc);
	for (size_t i = 0; !rc && i < sc.n; i++) {
		const struct meta_chain *ch = &sc.v[i];
		uint64_t head = 0;

		s->chains++;
		if (ch->state != CHAIN_SETTLED) {
			s->unsettled++;
			if (!meta_mint_head(kv, ch->cls, ch->star, &head) && ch->epoch < head)
				s->crashed++;
		}
		rc = meta_marker_list(kv, ch->cls, ch->star, ch->epoch, sum_marker, s);
	}
	free(sc.v);
	free(s->ids);
	s->ids = NULL;
	return rc;
}

static void print_summary(const struct ctl *c, const struct summary *s)
{
	uint64_t now = (uint64_t)time(NULL) * 1000000000ull;
	uint64_t age = s->oldest_marker_ns && now > s->oldest_marker_ns
			       ? (now - s->oldest_marker_ns) / 1000000000ull : 0;

	printf("novafs data directory %s: %s\n", c->data_dir,
	       s->mounted ? "mounted (a novafs daemon holds its lock)" : "not mounted");
	printf("  %" PRIu64 " bucket%s, %" PRIu64 " stream%s, %" PRIu64 " bytes", s->buckets,
	       s->buckets == 1 ? "" : "s", s->streams, s->streams == 1 ? "" : "s", s->bytes);
	if (s->deleted)
		printf(" (%" PRIu64 " deleted streams being reclaimed)", s->deleted);
	printf("\n  settlement: %" PRIu64 " unsettled batch%s", s->markers,
	       s->markers == 1 ? "" : "es");
	if (s->markers)
		printf(", the oldest %" PRIu64 " s old", age);
	printf("; %" PRIu64 " chains, %" PRIu64 " not settled\n", s->chains, s->unsettled);
	if (s->crashed)
		printf("  problems: %" PRIu64 " epoch(s) of a crashed run wait for recovery (the "
		       "next mount settles them)\n", s->crashed);
	else
		printf("  problems: none seen (novactl fsck checks everything)\n");
	printf("\n");
}

static void print_summary_json(const struct ctl *c, const struct summary *s)
{
	json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			      "data_dir", c->data_dir, "mounted", s->mounted,
			      "buckets", (json_int_t)s->buckets, "streams", (json_int_t)s->streams,
			      "deleted_streams", (json_int_t)s->deleted,
			      "bytes", (json_int_t)s->bytes, "chains", (json_int_t)s->chains,
			      "unsettled_chains", (json_int_t)s->unsettled,
			      "crashed_epochs", (json_int_t)s->crashed,
			      "unsettled_batches", (json_int_t)s->markers,
			      "oldest_unsettled_batch_ns", (json_int_t)s->oldest_marker_ns);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	printf("%s\n", text ? text : "{}");
	free(text);
	json_decref(o);
}

static int cmd_status(struct ctl *c)
{
	struct status_arg a = { .c = c };
	struct summary sum = { 0 };
	struct nv_buf ms;
	int rc = summarize(c, &sum);

	if (rc) {
		fprintf(stderr, "novactl: status: %s\n", strerror(-rc));
		return 1;
	}
	if (c->json) {
		print_summary_json(c, &sum);
		return 0;
	}
	print_summary(c, &sum);
	/* Which metastore, and which of its members answer (kv_status()). */
	nv_buf_init(&ms, 1 << 16);
	rc = kv_status(c->stack.kv, &ms);
	if (ms.len)
		printf("%.*s", (int)ms.len, (const char *)ms.ptr);
	nv_buf_free(&ms);
	if (rc)
		fprintf(stderr, "novactl: status: metastore: %s\n", strerror(-rc));
	rc = meta_chain_list(c->stack.kv, status_chain, &a);
	if (rc) {
		fprintf(stderr, "novactl: status: %s\n", strerror(-rc));
		return 1;
	}
	if (!a.last_star[0])
		printf("no chains yet\n");
	return 0;
}

/* ------------------------------------------------------------ fsck */

static void fsck_report(void *arg, bool violation, const char *text)
{
	printf("%s %s\n", violation ? "VIOLATION" : "note     ", text);
}

/* How often a progress line goes to a stderr that is not a terminal. */
#define PROGRESS_LOG_S 5

/*
 * fsck's progress: on a terminal one line rewritten in place (stderr, so
 * the report on stdout stays clean); otherwise a line every
 * PROGRESS_LOG_S seconds.
 */
static void fsck_progress(void *arg, const char *phase, uint64_t done, uint64_t total)
{
	static time_t last;
	static int tty = -1;
	time_t now = time(NULL);

	(void)arg;
	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	if (!tty && now - last < PROGRESS_LOG_S)
		return;
	last = now;
	if (total)
		fprintf(stderr, "%sfsck: %s %" PRIu64 "/%" PRIu64 "%s", tty ? "\r\033[K" : "",
			phase, done, total, tty ? "" : "\n");
	else
		fprintf(stderr, "%sfsck: %s %" PRIu64 "%s", tty ? "\r\033[K" : "", phase, done,
			tty ? "" : "\n");
}

static int cmd_fsck(struct ctl *c)
{
	struct fsck_opts o = { .full = c->full, .report = fsck_report,
			       .progress = fsck_progress };
	struct fsck_summary s;
	int rc;

	rc = fsck_run(c->stack.store, c->stack.kv, &o, &s);
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "\r\033[K");
	printf("fsck: %" PRIu64 " chains, %" PRIu64 " slots, %" PRIu64 " markers, %" PRIu64
	       " streams, %" PRIu64 " refs, %" PRIu64 " settled objects",
	       s.chains, s.slots, s.markers, s.streams, s.refs, s.objects);
	if (c->full)
		printf(", %" PRIu64 " chunks verified", s.chunks);
	printf("; %" PRIu64 " notes, %" PRIu64 " violations\n", s.notes, s.violations);
	if (rc) {
		fprintf(stderr, "novactl: fsck stopped: %s\n", strerror(-rc));
		return 2;
	}
	return s.violations ? 1 : 0;
}

static int cmd_layout(struct ctl *c, const char *path)
{
	char bucket[META_BUCKET_NAME_MAX + 1];
	const char *slash = strchr(path, '/');
	struct meta_stream ms;
	char *doc;
	int rc, err;

	if (!slash || (size_t)(slash - path) > META_BUCKET_NAME_MAX || !slash[1]) {
		fprintf(stderr, "novactl: layout wants BUCKET/STREAM\n");
		return 2;
	}
	memcpy(bucket, path, (size_t)(slash - path));
	bucket[slash - path] = 0;
	rc = meta_stream_lookup(c->stack.kv, bucket, slash + 1, &ms);
	if (rc) {
		fprintf(stderr, "novactl: %s: %s\n", path, strerror(-rc));
		return 1;
	}
	doc = layout_json(c->stack.kv, ms.id, NULL, 0, &err);
	if (!doc) {
		fprintf(stderr, "novactl: layout of %s: %s\n", path, strerror(-err));
		return 1;
	}
	printf("%s\n", doc);
	free(doc);
	return 0;
}

/* ------------------------------------------------------------ drain */

/* Where a draining star stands, from the metastore alone. */
struct drain_state {
	struct ctl *c;
	const char *star;
	bool live;                         /* its registry row exists */
	uint64_t held, unsettled, markers;
};

/* An epoch of the star is settled when its chain is SETTLED: refs cover
 * every record of it (a draining star closes its head epochs once it
 * leads nothing, engine/handoff.h).  Its batch markers (bytes still in
 * transit objects) are counted for the report only: any star's auditor
 * group-settles a settled chain's markers later. */
static int drain_chain(void *arg, const struct meta_chain *ch, uint64_t ver)
{
	struct drain_state *d = arg;
	uint64_t markers = 0;
	int rc;

	(void)ver;
	if (strcmp(ch->star, d->star))
		return 0;
	rc = meta_marker_list(d->c->stack.kv, ch->cls, ch->star, ch->epoch, count_markers,
			      &markers);
	if (rc)
		return rc;
	d->markers += markers;
	if (ch->state != CHAIN_SETTLED)
		d->unsettled++;
	return 0;
}

static int drain_progress(struct ctl *c, const char *star, struct drain_state *d)
{
	struct meta_star row;
	int rc;

	memset(d, 0, sizeof(*d));
	d->c = c;
	d->star = star;
	rc = meta_star_get(c->stack.kv, star, &row, NULL);
	if (rc && rc != -ENOENT)
		return rc;
	d->live = rc == 0;
	rc = meta_lease_count(c->stack.kv, star, &d->held);
	if (!rc)
		rc = meta_chain_list(c->stack.kv, drain_chain, d);
	return rc;
}

static int cmd_drain(struct ctl *c, const char *star)
{
	time_t start = time(NULL), last = 0;
	struct drain_state d, prev = { 0 };
	bool first = true;
	int rc = meta_star_check(star) ? -EINVAL : meta_star_set_state(c->stack.kv, star,
									 STAR_DRAINING);

	if (rc == -EINVAL) {
		fprintf(stderr, "novactl: drain: '%s' is not a star id (1-32 of [a-z0-9-])\n", star);
		return 2;
	}
	if (rc == -ENOENT) {
		printf("novactl: drain %s: no such star is running; waiting for its epochs to be "
		       "settled by the others\n", star);
	} else if (rc) {
		fprintf(stderr, "novactl: drain %s: marking its registry row draining failed: %s\n",
			star, strerror(-rc));
		return 1;
	} else {
		printf("novactl: drain %s: draining (it takes no writer lease and hands off the "
		       "ones it holds)\n", star);
	}
	fflush(stdout);
	for (;;) {
		rc = drain_progress(c, star, &d);
		if (rc) {
			fprintf(stderr, "novactl: drain %s: reading the metastore failed: %s\n", star,
				strerror(-rc));
			return 1;
		}
		if (d.held == 0 && d.unsettled == 0) {
			printf("novactl: drain %s: the terminate gate passed: it leads no stream and "
			       "every epoch of its chains is settled (%" PRIu64 " batch marker(s) "
			       "left for the other stars' settle passes)%s\n", star, d.markers,
			       d.live ? "; stop it now (fusermount3 -u)" : "");
			return 0;
		}
		if (first || d.held != prev.held || d.unsettled != prev.unsettled ||
		    d.markers != prev.markers || time(NULL) - last >= 10) {
			printf("novactl: drain %s: %" PRIu64 " stream(s) still held, %" PRIu64
			       " epoch(s) unsettled (%" PRIu64 " batch marker(s) in transit)\n", star,
			       d.held, d.unsettled, d.markers);
			fflush(stdout);
			last = time(NULL);
			prev = d;
			first = false;
		}
		if (c->timeout_s && time(NULL) - start >= (time_t)c->timeout_s) {
			fprintf(stderr, "novactl: drain %s: the terminate gate did not pass within %u "
				"s (%" PRIu64 " stream(s) held, %" PRIu64 " epoch(s) unsettled); it "
				"stays draining\n", star, c->timeout_s, d.held, d.unsettled);
			return 1;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 250 * 1000 * 1000 }, NULL);
	}
}

int main(int argc, char **argv)
{
	struct ctl c;
	const char *cmd;
	int lock_fd = -1, ret;

	memset(&c, 0, sizeof(c));
	c.timeout_s = 600;
	nv_default_data_dir(c.data_dir, sizeof(c.data_dir));
	nv_log_level = NV_WARN;
	if (argc < 2)
		return usage(stderr);
	cmd = argv[1];
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("novactl %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	const char *arg = NULL;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			if (parse_opts(&c, argv[++i]))
				return 2;
		} else if (!strncmp(argv[i], "-o", 2) && argv[i][2]) {
			if (parse_opts(&c, argv[i] + 2))
				return 2;
		} else if (!strcmp(argv[i], "--full")) {
			c.full = true;
		} else if (!strcmp(argv[i], "--force")) {
			c.force = true;
		} else if (!strcmp(argv[i], "--json") && !strcmp(cmd, "status")) {
			c.json = true;
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc && !strcmp(cmd, "drain")) {
			char *end;
			unsigned long v = strtoul(argv[++i], &end, 10);

			if (*end || !*argv[i] || v > 86400 * 30)
				return usage(stderr);
			c.timeout_s = (unsigned)v;
		} else if ((!strcmp(cmd, "layout") || !strcmp(cmd, "drain")) && !arg) {
			arg = argv[i];
		} else {
			return usage(stderr);
		}
	}
	if (strcmp(cmd, "status") && strcmp(cmd, "fsck") && strcmp(cmd, "layout") &&
	    strcmp(cmd, "drain"))
		return usage(stderr);
	if ((!strcmp(cmd, "layout") || !strcmp(cmd, "drain")) && !arg)
		return usage(stderr);
	if (!strcmp(cmd, "fsck") && !c.store_url[0] && !c.force) {
		char path[PATH_MAX + 8];

		snprintf(path, sizeof(path), "%s/lock", c.data_dir);
		lock_fd = open(path, O_RDWR | O_CLOEXEC);
		if (lock_fd >= 0 && flock(lock_fd, LOCK_EX | LOCK_NB)) {
			fprintf(stderr, "novactl: %s is mounted (a novafs holds %s); unmount it or "
					"use --force\n", c.data_dir, path);
			close(lock_fd);
			return 2;
		}
	}
	if (open_backends(&c)) {
		ret = 2;
		goto out;
	}
	ret = !strcmp(cmd, "status") ? cmd_status(&c)
	      : !strcmp(cmd, "layout") ? cmd_layout(&c, arg)
	      : !strcmp(cmd, "drain") ? cmd_drain(&c, arg) : cmd_fsck(&c);
out:
	stack_close(&c.stack);
	if (lock_fd >= 0)
		close(lock_fd);
	return ret;
}
