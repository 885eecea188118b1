/*
 * duty.c - see duty.h.
 *
 * Locking: d->lock guards the last holder seen (holder, epoch); held,
 * reg_id and ver are atomics written only by the duty_poll() thread, so
 * duty_held() is lock-free.
 */
#include "config.h"
#include "engine/duty.h"
#include "meta/leases.h"
#include "src/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DUTY_NAME "settle"

struct duty {
	struct kv *kv;
	uint64_t (*live_lease)(void *arg);
	void *arg;
	char star[META_STAR_MAX + 1];
	_Atomic bool held;
	_Atomic uint64_t reg_id; /* the registry lease the row is bound to */
	_Atomic uint64_t ver;    /* the row's version while held */
	_Atomic bool from_other; /* the epoch before ours was another star's */
	pthread_mutex_t lock;
	char holder[META_STAR_MAX + 1]; /* lock */
	uint64_t epoch;                 /* lock */
};

/* The registry lease while before the deadline, else 0. */
static uint64_t live(struct duty *d)
{
	return d->live_lease(d->arg);
}

int duty_new(const struct duty_cfg *cfg, struct duty **out)
{
	struct duty *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->kv = cfg->kv;
	d->live_lease = cfg->live_lease;
	d->arg = cfg->arg;
	snprintf(d->star, sizeof(d->star), "%s", cfg->star);
	pthread_mutex_init(&d->lock, NULL);
	*out = d;
	return 0;
}

void duty_free(struct duty *d)
{
	if (!d)
		return;
	if (d->live_lease && atomic_load(&d->held) && live(d) == atomic_load(&d->reg_id)) {
		int rc = meta_duty_release(d->kv, DUTY_NAME, atomic_load(&d->ver));

		if (rc && rc != -ECANCELED)
			nv_log(NV_WARN, NV_SUB_SETTLE, "star %s: releasing the settle duty failed "
			       "(%s): it expires with the registry lease", d->star, strerror(-rc));
		else if (!rc)
			nv_log(NV_INFO, NV_SUB_SETTLE, "star %s: settle duty released", d->star);
	}
	pthread_mutex_destroy(&d->lock);
	free(d);
}

bool duty_held(struct duty *d)
{
	uint64_t id;

	if (!d->live_lease)
		return true;
	id = live(d);
	return id && atomic_load(&d->held) && id == atomic_load(&d->reg_id);
}

static void seen(struct duty *d, const char *star, uint64_t epoch)
{
	pthread_mutex_lock(&d->lock);
	snprintf(d->holder, sizeof(d->holder), "%s", star);
	d->epoch = epoch;
	pthread_mutex_unlock(&d->lock);
}

bool duty_taken_from_other(struct duty *d)
{
	return d->live_lease && atomic_load(&d->from_other);
}

void duty_holder(struct duty *d, char *star, uint64_t *epoch)
{
	if (!d->live_lease) {
		snprintf(star, META_STAR_MAX + 1, "%s", d->star);
		*epoch = 1;
		return;
	}
	pthread_mutex_lock(&d->lock);
	snprintf(star, META_STAR_MAX + 1, "%s", d->holder);
	*epoch = d->epoch;
	pthread_mutex_unlock(&d->lock);
}

/* Not held any more: say so once. */
static void drop(struct duty *d, const char *why)
{
	if (atomic_exchange(&d->held, false))
		nv_log(NV_WARN, NV_SUB_SETTLE, "star %s: settle duty lost (%s)", d->star, why);
}

int duty_poll(struct duty *d)
{
	char prev[META_STAR_MAX + 1] = "";
	struct meta_duty row;
	uint64_t ver = 0, rid;
	int rc;

	if (!d->live_lease)
		return 1;
	rid = live(d);
	if (!rid) {
		drop(d, "the registry lease is lost or past its deadline");
		return 0;
	}
	rc = meta_duty_get(d->kv, DUTY_NAME, &row, &ver);
	if (rc == 0) {
		seen(d, row.star, row.epoch);
		if (!strcmp(row.star, d->star) && atomic_load(&d->held) &&
		    ver == atomic_load(&d->ver) && rid == atomic_load(&d->reg_id))
			return duty_held(d) ? 1 : 0;
		drop(d, "another star holds it");
		return 0;
	}
	if (rc != -ENOENT) {
		if (rc == -EBADMSG)
			nv_log(NV_WARN, NV_SUB_SETTLE, "star %s: the settle duty row is not readable "
			       "(EBADMSG): nobody holds the duty until it expires", d->star);
		drop(d, strerror(-rc));
		return rc;
	}
	drop(d, "the row is gone");
	seen(d, "", 0);
	rc = meta_duty_take(d->kv, DUTY_NAME, d->star, rid, &row, &ver, prev);
	if (rc == -EEXIST || rc == -ENOLCK)
		return 0; /* a racer won, or our lease went: the next poll looks again */
	if (rc)
		return rc;
	atomic_store(&d->reg_id, rid);
	atomic_store(&d->ver, ver);
	atomic_store(&d->from_other, prev[0] && strcmp(prev, d->star));
	atomic_store(&d->held, true);
	seen(d, row.star, row.epoch);
	nv_log(NV_INFO, NV_SUB_SETTLE, "star %s: holds the settle duty (duty epoch %llu%s%s)",
	       d->star, (unsigned long long)row.epoch, prev[0] ? ", after " : "", prev);
	return duty_held(d) ? 1 : 0;
}
