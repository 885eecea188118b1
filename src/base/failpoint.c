/*
 * failpoint.c - see failpoint.h.
 *
 * The armed set is tiny (tests arm one or two points), so it is a fixed
 * array scanned under a mutex; only armed processes ever get here.
 */
#include "config.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

atomic_int nv_fp_armed;

/* Every point compiled into novafs.  Keep in step with the NV_FP() calls
 * (tests/unit/test_failpoint.c greps the tree to check). */
const char *const nv_fp_names[] = {
	"chain.before_put",      /* a sealed flight is about to be PUT */
	"chain.after_put",       /* the slot PUT returned, not yet acked */
	"chain.before_ack",      /* acks are about to be released */
	"absorb.before_refs",    /* a batch's rows are about to be written */
	"absorb.after_refs",     /* refs are down, checkpoint not advanced */
	"absorb.after_checkpoint", /* checkpoint + marker committed, tokens held */
	"recover.before_walk",   /* a stopped chain is about to be walked */
	"recover.after_fence",   /* the fence object is down, the cut not recorded */
	"recover.after_slot",    /* a batch of a stopped chain's slots was absorbed */
	"recover.before_settled", /* the walk is done, chain not yet marked */
	"auditor.before_restart", /* a halted class is about to be restarted */
	"settle.after_publish",  /* a stream's objects are published, not committed */
	"settle.after_rows",     /* non-pivot catalog rows are written, no CAS yet */
	"settle.after_commit",   /* the visibility CAS is done, refs not deleted */
	"settle.before_resolve", /* an era's streams are done, markers not resolved */
	"trim.before_delete",    /* slots are about to be deleted */
	"trim.after_delete",     /* slots are deleted, the cursor not advanced */
	"store.put",             /* any object PUT, before the backend */
	"store.get",             /* any ranged GET, before the backend */
	"read.whole_published",  /* a whole read's footer is cached, its chunks not yet */
	"dir.sync_parent",       /* dir store: syncing a found directory's entry */
	"dir.before_temp",       /* dir store: a put's walk done, its temp file not made */
	"dir.seg_create",        /* dir store: a new segment file, before its syncs */
	"dir.seg_falloc",        /* dir store: a new segment file's fallocate */
	"dir.seg_write",         /* dir store: a slot record, before its write */
	"dir.seg_sync",          /* dir store: a segment, before its fdatasync */
	"meta.commit",           /* any metastore transaction commit */
	"meta.sweep",            /* SQLite: a read's sweep of expired leases */
	NULL,
};

enum fp_action { FP_CRASH, FP_ERROR, FP_DELAY };

struct fp {
	char name[48];
	enum fp_action action;
	long arg;
	unsigned long after; /* act from this hit on (1-based) */
	unsigned long until; /* ... up to this hit (0: for ever) */
	unsigned long hits;
};

#define FP_MAX 16
static struct fp armed[FP_MAX];
static int narmed;
static pthread_mutex_t fp_lock = PTHREAD_MUTEX_INITIALIZER;

static int known(const char *name, size_t n)
{
	for (int i = 0; nv_fp_names[i]; i++)
		if (strlen(nv_fp_names[i]) == n && !strncmp(nv_fp_names[i], name, n))
			return 1;
	return 0;
}


/* A hit count: decimal digits (at least one, no sign) below 10^9.  The
 * end of the digits, or NULL. */
static const char *parse_count(const char *p, unsigned long *out)
{
	unsigned long x = 0;
	const char *q = p;

	for (; *q >= '0' && *q <= '9'; q++) {
		x = x * 10 + (unsigned long)(*q - '0');
		if (x >= 1000000000ul)
			return NULL;
	}
	if (q == p)
		return NULL;
	*out = x;
	return q;
}

static int arm_one(const char *s, size_t n)
{
	char item[128];
	char *eq, *act, *colon, *at;
	struct fp f = { .after = 1 };

	if (n == 0)
		return 0;
	if (n >= sizeof(item))
		return -EINVAL;
	memcpy(item, s, n);
	item[n] = 0;
	eq = strchr(item, '=');
	if (!eq)
		return -EINVAL;
	*eq = 0;
	act = eq + 1;
	if (!known(item, strlen(item)) || strlen(item) >= sizeof(f.name)) {
		nv_log(NV_ERR, NV_SUB_FAILPOINT, "unknown failpoint '%s'", item);
		return -EINVAL;
	}
	strcpy(f.name, item);
	at = strchr(act, '@');
	if (at) {
		const char *end;

		*at = 0;
		end = parse_count(at + 1, &f.after);
		if (end && *end == '-')
			end = parse_count(end + 1, &f.until);
		if (!end || *end || f.after == 0 || (f.until && f.until < f.after))
			return -EINVAL;
	}
	colon = strchr(act, ':');
	if (colon)
		*colon = 0;
	if (!strcmp(act, "crash")) {
		f.action = FP_CRASH;
	} else if (!strcmp(act, "error")) {
		f.action = FP_ERROR;
		f.arg = EIO;
	} else if (!strcmp(act, "delay")) {
		f.action = FP_DELAY;
		if (!colon)
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	if (colon) {
		char *end;

		f.arg = strtol(colon + 1, &end, 10);
		if (*end || f.arg <= 0 || f.arg > 3600000)
			return -EINVAL;
	}
	pthread_mutex_lock(&fp_lock);
	if (narmed == FP_MAX) {
		pthread_mutex_unlock(&fp_lock);
		return -EINVAL;
	}
	armed[narmed++] = f;
	atomic_store(&nv_fp_armed, 1);
	pthread_mutex_unlock(&fp_lock);
	nv_log(NV_INFO, NV_SUB_FAILPOINT, "armed %s=%s from hit %lu", f.name,
	       act, f.after);
	return 0;
}

int nv_fp_arm(const char *spec)
{
	const char *p = spec;

	while (p && *p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		int rc = arm_one(p, n);

		if (rc) {
			nv_log(NV_ERR, NV_SUB_FAILPOINT,
			       "malformed failpoint spec '%.*s'", (int)n, p);
			return rc;
		}
		p = e ? e + 1 : NULL;
	}
	return 0;
}

int nv_fp_init_from_env(void)
{
	const char *s = getenv("NOVAFS_FAILPOINTS");

	return (s && *s) ? nv_fp_arm(s) : 0;
}

void nv_fp_reset(void)
{
	pthread_mutex_lock(&fp_lock);
	narmed = 0;
	atomic_store(&nv_fp_armed, 0);
	pthread_mutex_unlock(&fp_lock);
}

unsigned long nv_fp_hits(const char *name)
{
	unsigned long n = 0;

	pthread_mutex_lock(&fp_lock);
	for (int i = 0; i < narmed; i++)
		if (!strcmp(armed[i].name, name)) {
			n = armed[i].hits;
			break;
		}
	pthread_mutex_unlock(&fp_lock);
	return n;
}

int nv_fp_hit(const char *name)
{
	enum fp_action act = FP_ERROR;
	long arg = 0;
	int fire = 0;

	pthread_mutex_lock(&fp_lock);
	for (int i = 0; i < narmed; i++) {
		if (strcmp(armed[i].name, name))
			continue;
		++armed[i].hits;
		if (armed[i].hits >= armed[i].after &&
		    (!armed[i].until || armed[i].hits <= armed[i].until)) {
			fire = 1;
			act = armed[i].action;
			arg = armed[i].arg;
		}
		break;
	}
	pthread_mutex_unlock(&fp_lock);
	if (!fire)
		return 0;
	switch (act) {
	case FP_CRASH:
		nv_log(NV_WARN, NV_SUB_FAILPOINT, "%s: crash", name);
		_exit(77);
	case FP_DELAY: {
		struct timespec ts = { .tv_sec = arg / 1000,
				       .tv_nsec = (arg % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		return 0;
	}
	case FP_ERROR:
	default:
		nv_log(NV_DEBUG, NV_SUB_FAILPOINT, "%s: error %ld", name, arg);
		return -(int)arg;
	}
}
