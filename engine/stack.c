/*
 * stack.c - see stack.h.
 *
 * For: the one place that turns URLs into the store and metastore a star
 * uses.  Not for: logging the failure in the caller's words (star.c logs,
 * novactl prints), or anything that needs the star's lock or id.
 *
 * Invariants:
 *  1. Each layer takes over the one below it (store_route_new() and
 *     fault_store_wrap() own their inner stores, also on failure), so a
 *     failure closes only what is still the caller's: the store built so
 *     far.
 */
#include "config.h"
#include "engine/stack.h"
#include "engine/store/dir.h"
#include "engine/store/fault.h"
#include "engine/store/set.h"
#include "src/base/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The standard bucket at url (own: the data directory's own store): with
 * slot_segments ON, or OWN and own, a directory store is opened with its
 * chain slots in segment files (engine/store/dir.h); every other URL as
 * store_open() does. */
static int open_standard(const struct stack_cfg *cfg, const char *url, bool own,
			 struct store **out, bool *segs_out)
{
	struct dir_store_opts o = { .slot_segments = true };
	bool segs = cfg->slot_segments == STACK_SEGMENTS_ON ||
		    (cfg->slot_segments == STACK_SEGMENTS_OWN && own);

	*segs_out = false;
	if (segs && (!strncmp(url, "dir:/", 5) || url[0] == '/')) {
		*segs_out = true;
		return dir_store_open_opts(url[0] == '/' ? url : url + 4, &o, out);
	}
	return store_open(url, out);
}

/* The store with its express set and faults: 0 and *out, or the error
 * and why->part. */
static int open_store(const struct stack_cfg *cfg, struct store **out, bool *segs,
		      struct stack_failure *why)
{
	struct store *std = NULL, *express = NULL;
	int rc;

	why->part = STACK_STORE;
	if (cfg->store_url)
		snprintf(why->url, sizeof(why->url), "%s", cfg->store_url);
	else
		snprintf(why->url, sizeof(why->url), "dir:%s/objects", cfg->data_dir);
	rc = open_standard(cfg, why->url, !cfg->store_url, &std, segs);
	if (rc)
		return rc;
	if (cfg->express_urls && *cfg->express_urls) {
		why->part = STACK_EXPRESS;
		snprintf(why->url, sizeof(why->url), "%s", cfg->express_urls);
		rc = store_set_open(cfg->express_urls, cfg->location, &express);
		if (rc) {
			store_close(std);
			return rc;
		}
		why->part = STACK_ROUTE;
		rc = store_route_new(std, express, &std); /* both taken over */
		if (rc)
			return rc;
	}
	if (cfg->store_faults && *cfg->store_faults) {
		struct store *inner = std;

		why->part = STACK_FAULTS;
		snprintf(why->url, sizeof(why->url), "%s", cfg->store_faults);
		rc = fault_store_wrap(inner, cfg->store_faults, &std); /* inner taken over */
		if (rc)
			return rc;
	}
	*out = std;
	return 0;
}

int stack_meta_check_valid(const char *v)
{
	return !v || !strcmp(v, "off") || !strcmp(v, "quick") || !strcmp(v, "warn") ? 0
										    : -EINVAL;
}

/* What kv_quick_check() found: the count, and the first few logged. */
struct damage {
	const char *url;
	unsigned n;
};

#define DAMAGE_LOGGED 5

static void note_damage(void *arg, const char *problem)
{
	struct damage *d = arg;

	if (d->n++ < DAMAGE_LOGGED)
		nv_log(NV_ERR, NV_SUB_META, "metastore %s is damaged: %s", d->url, problem);
}

/*
 * cfg->meta_check on the open metastore kv (url: its URL, for the
 * messages): 0 (healthy, not checked, or "warn"), or -EIO (damaged and
 * "quick"; logged with what to do).  A check that cannot run (the
 * backend has none: etcd keeps its own) is no refusal.
 */
static int check_meta(const struct stack_cfg *cfg, struct kv *kv, const char *url)
{
	struct damage d = { url, 0 };
	bool refuse = !strcmp(cfg->meta_check, "quick");
	const char *file = strncmp(url, "sqlite:", 7) ? url : url + 7;
	int rc;

	if (strcmp(cfg->meta_check, "quick") && strcmp(cfg->meta_check, "warn"))
		return 0;
	rc = kv_quick_check(kv, note_damage, &d);
	if (rc == -ENOTSUP)
		return 0;
	if (rc)
		nv_log(NV_WARN, NV_SUB_META, "metastore %s: the start-up check could not run: %s",
		       url, strerror(-rc));
	if (!d.n)
		return 0;
	nv_log(NV_ERR, NV_SUB_META,
	       "metastore %s is damaged (%u problem%s%s)%s: `novactl fsck -o data_dir=%s` "
	       "reports the streams concerned; recover by restoring %s from a backup (with "
	       "its -wal and -shm files removed), or by rebuilding it (`sqlite3 %s .recover "
	       "| sqlite3 %s.new`, fsck, then move it in place); -o meta_check=warn starts "
	       "on it anyway", url, d.n, d.n == 1 ? "" : "s",
	       d.n > DAMAGE_LOGGED ? ", the first logged above" : "",
	       refuse ? "; refusing to start" : "; starting on it (meta_check=warn)",
	       cfg->data_dir, file, file, file);
	return refuse ? -EIO : 0;
}

int stack_open(const struct stack_cfg *cfg, struct stack *out, struct stack_failure *why)
{
	struct stack_failure local;
	int rc;

	if (!why)
		why = &local;
	memset(out, 0, sizeof(*out));
	rc = open_store(cfg, &out->store, &out->slot_segments, why);
	if (rc)
		return rc;
	if (cfg->meta_url) {
		snprintf(why->url, sizeof(why->url), "%s", cfg->meta_url);
	} else {
		snprintf(why->url, sizeof(why->url), "sqlite:%s/meta.db", cfg->data_dir);
		if (cfg->meta_must_exist && access(why->url + strlen("sqlite:"), F_OK)) {
			why->part = STACK_META_MISSING;
			rc = -ENOENT;
			goto fail;
		}
	}
	why->part = STACK_META;
	rc = kv_open(why->url, &out->kv);
	if (rc)
		goto fail;
	if (cfg->meta_check) {
		rc = check_meta(cfg, out->kv, why->url);
		if (rc) {
			why->part = STACK_META_DAMAGED;
			goto fail;
		}
	}
	return 0;
fail:
	stack_close(out);
	return rc;
}

void stack_close(struct stack *s)
{
	kv_close(s->kv);
	store_close(s->store);
	s->kv = NULL;
	s->store = NULL;
}
