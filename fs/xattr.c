/*
 * xattr.c - see xattr.h.
 *
 * Values are plain decimal or words without a trailing newline, except
 * stats, which is one JSON object (jansson), and leader: "STAR EPOCH"
 * (the leading star's id and its lease epoch; "-" while the stream is
 * vacant).  Setting leader to a star id hands the stream over from any
 * mount: star_release() when this star leads it (or it is vacant), the
 * holder's star API handoff through the cluster client otherwise, by the
 * stream's id too (fs/remote.h invariant 2: never another stream created
 * under its old name).
 */
#include "config.h"
#include "fs/xattr.h"
#include "api/client.h"
#include "engine/lease.h"
#include "fs/remote.h"
#include "src/base/log.h"
#include "src/base/names.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PFX "user.nova."

static const char *const stream_names[] = { "seq",  "frontier", "settled", "trim",
					     "class", "epoch",    "layout",  "durable", "leader", NULL };
static const char *const bucket_names[] = { "class", NULL };
static const char *const root_names[] = { "stats", NULL };

static const char *const *names_of(enum fs_node_kind k)
{
	switch (k) {
	case FS_NODE_STREAM: return stream_names;
	case FS_NODE_BUCKET: return bucket_names;
	case FS_NODE_ROOT: return root_names;
	default: return NULL;
	}
}

static void stat_field(void *arg, const char *name, uint64_t value)
{
	json_object_set_new(arg, name, json_integer((json_int_t)value));
}

static int stats_json(struct star *st, struct nv_buf *out)
{
	struct star_gauges g;
	json_t *o = json_object();
	char *s;
	int rc;

	if (!o)
		return -ENOMEM;
	nv_stats_visit(star_stats(st), stat_field, o);
	star_get_gauges(st, &g);
	json_object_set_new(o, "star", json_string(star_id(st)));
	for (unsigned c = 0; c < NV_CLASS_COUNT; c++) {
		char k[32];

		snprintf(k, sizeof(k), "epoch_%s", nv_class_name(c));
		json_object_set_new(o, k, json_integer((json_int_t)star_epoch(st, c)));
	}
	json_object_set_new(o, "backlog_bytes", json_integer((json_int_t)g.backlog_bytes));
	json_object_set_new(o, "backlog_budget", json_integer((json_int_t)g.backlog_budget));
	json_object_set_new(o, "tail_cache_bytes", json_integer((json_int_t)g.tail_cache_bytes));
	json_object_set_new(o, "read_cache_bytes", json_integer((json_int_t)g.read_cache_bytes));
	json_object_set_new(o, "streams_loaded", json_integer((json_int_t)g.streams_loaded));
	json_object_set_new(o, "slots_live", json_integer((json_int_t)g.slots_live));
	json_object_set_new(o, "fetch_cache_bytes", json_integer((json_int_t)g.fetch_cache_bytes));
	{
		const struct { const char *k; uint64_t v; } sv[] = {
			{ "store_puts", g.store.puts },
			{ "store_gets", g.store.gets },
			{ "store_heads", g.store.heads },
			{ "store_deletes", g.store.deletes },
			{ "store_lists", g.store.lists },
			{ "store_mpu_parts", g.store.mpu_parts },
			{ "store_mpu_copies", g.store.mpu_copies },
			{ "store_mpu_completes", g.store.mpu_completes },
			{ "store_bytes_put", g.store.bytes_put },
			{ "store_bytes_got", g.store.bytes_got },
			{ "store_errors", g.store.errors },
		};

		for (size_t i = 0; i < sizeof(sv) / sizeof(sv[0]); i++)
			json_object_set_new(o, sv[i].k, json_integer((json_int_t)sv[i].v));
	}
	s = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(o);
	if (!s)
		return -ENOMEM;
	rc = nv_buf_add(out, s, strlen(s));
	free(s);
	return rc;
}

/* The positions of a stream this star does not lead are its view of
 * another star's (fs/remote.h invariants 3 and 6): attribute n of them
 * is read after the view was raised to the metastore's committed state
 * (star_view_refresh(): the refs' end, the trim point, the settled end),
 * so user.nova.trim and user.nova.settled say on every star what they
 * say on the leader.  A stream this star leads has them in memory
 * (star_lead_check() answers 0 with no metastore read). */
static void view_for(struct star *st, struct nv_stream *s, const char *n)
{
	static const char *const positions[] = { "seq", "frontier", "settled", "trim", "layout",
						 NULL };
	const char *const *p;

	for (p = positions; *p && strcmp(*p, n); p++)
		;
	if (*p && star_lead_check(st, s, NULL) != 0)
		(void)star_view_refresh(st, s, STAR_VIEW_ALL); /* failed: the view stands */
}

int fs_xattr_get(struct star *st, const struct fs_xattr_target *t, const char *name,
		 struct nv_buf *out)
{
	const char *n;

	nv_buf_reset(out);
	if (strncmp(name, PFX, sizeof(PFX) - 1))
		return -ENODATA;
	n = name + sizeof(PFX) - 1;
	switch (t->kind) {
	case FS_NODE_ROOT:
		if (!strcmp(n, "stats"))
			return stats_json(st, out);
		return -ENODATA;
	case FS_NODE_BUCKET:
		if (!strcmp(n, "class")) {
			struct meta_bucket b;
			int rc = star_bucket_get(st, t->bucket, &b);

			return rc ? rc : nv_buf_printf(out, "%s", nv_class_name(b.default_class));
		}
		return -ENODATA;
	case FS_NODE_STREAM: {
		struct nv_stream *s = t->stream;
		unsigned cls;

		view_for(st, s, n);
		pthread_mutex_lock(&s->lock);
		cls = s->cls;
		pthread_mutex_unlock(&s->lock);
		if (!strcmp(n, "seq"))
			return nv_buf_printf(out, "%llu",
					     (unsigned long long)atomic_load(&s->acked_seq));
		if (!strcmp(n, "frontier"))
			return nv_buf_printf(out, "%llu",
					     (unsigned long long)atomic_load(&s->frontier_seq));
		if (!strcmp(n, "settled"))
			return nv_buf_printf(out, "%llu",
					     (unsigned long long)atomic_load(&s->settled_seq));
		if (!strcmp(n, "trim"))
			return nv_buf_printf(out, "%llu",
					     (unsigned long long)atomic_load(&s->trim_seq));
		if (!strcmp(n, "layout")) {
			int err = 0;
			char *doc = star_stream_layout(st, s, &err);
			int rc;

			if (!doc)
				return err ? err : -ENOMEM;
			rc = nv_buf_add(out, doc, strlen(doc));
			free(doc);
			return rc;
		}
		if (!strcmp(n, "class"))
			return nv_buf_printf(out, "%s", nv_class_name(cls));
		if (!strcmp(n, "epoch"))
			return nv_buf_printf(out, "%llu", (unsigned long long)star_epoch(st, cls));
		if (!strcmp(n, "leader")) {
			struct lease_holder h;
			int rc = star_leader(st, s, &h);

			if (rc == -ENOENT)
				return nv_buf_printf(out, "-"); /* vacant */
			return rc ? rc : nv_buf_printf(out, "%s %llu", h.star,
						       (unsigned long long)h.epoch);
		}
		if (!strcmp(n, "durable")) {
			enum fs_durable d = fs_stream_durable(s);

			return nv_buf_printf(out, "%s", fs_durable_name(d == FS_DURABLE_DEFAULT
									? t->durable_default : d));
		}
		return -ENODATA;
	}
	default: /* fs/ns.c maps follow-view nodes to these kinds */
		return -ENODATA;
	}
}

/* Ask the holder h of s, through the cluster client, to hand s to `to`
 * (api_client_handoff()); the errnos of set_leader(). */
static int ask_holder(struct star *st, const struct fs_xattr_target *t, const char *to,
		      const struct lease_holder *h)
{
	struct nv_stream *s = t->stream;
	struct lease_holder nh;
	int rc;

	if (!t->client)
		return -EREMOTE; /* no cluster_secret_file: set it on the holder's mount */
	rc = api_client_handoff(t->client, h, s->bucket, s->name, s->id, to, &nh);
	if (rc == -ESTALE) { /* another stream under s->name there: under s's name now */
		char now[NV_STREAM_NAME_MAX + 1];

		rc = fs_remote_name_now(st, s, h->star, s->name, rc, now, sizeof(now));
		if (rc == -ENOENT)
			return rc; /* s was deleted: the file is gone (logged) */
		if (rc == 0)
			rc = api_client_handoff(t->client, h, s->bucket, now, s->id, to, &nh);
	}
	if (rc == 0)
		nv_log(NV_INFO, NV_SUB_FS, "user.nova.leader: %s/%s handed from star %s to %s "
		       "(lease epoch %llu), asked by star %s", s->bucket, s->name, h->star,
		       nh.star[0] ? nh.star : "nobody (vacant)", (unsigned long long)nh.epoch,
		       star_id(st));
	switch (rc) {
	case 0:
	case -EHOSTDOWN:
	case -EHOSTUNREACH:
	case -ETIMEDOUT:
	case -EOPNOTSUPP:
		return rc;
	case -ENOENT:
		return -EINVAL; /* no such star: ENOENT would read as the file */
	case -STAR_ENOTOWNER:
	case -EAGAIN:
	case -ESTALE: /* renamed again meanwhile */
		return -EAGAIN; /* leadership moved under the request: try again */
	default:
		nv_log(NV_WARN, NV_SUB_FS, "user.nova.leader: asking star %s (%s) to hand %s/%s "
		       "to %s failed: %s", h->star, h->addr[0] ? h->addr : "no star API",
		       s->bucket, s->name, to, strerror(-rc));
		return -EIO;
	}
}

/* setfattr user.nova.leader=STAR: hand the stream over to STAR, from any
 * mount.  This star leads it: star_release() here; another star leads
 * it: that star is asked through the cluster client; vacant: STAR takes
 * it (this star, or the lease is placed on STAR).  -EINVAL (not a star
 * id, or no such star registered), -EHOSTDOWN (STAR is not live),
 * -EHOSTUNREACH (the holder cannot be reached or serves no star API),
 * -EREMOTE (another star leads it and this mount has no cluster client),
 * -EAGAIN (leadership moved meanwhile), -EOPNOTSUPP (no registry: a
 * single-host metastore), -ETIMEDOUT (the release flush did not finish). */
static int set_leader(struct star *st, const struct fs_xattr_target *t, const char *value,
		      size_t size)
{
	char to[META_STAR_MAX + 1];
	struct lease_holder h;
	int rc;

	while (size && (value[size - 1] == '\n' || value[size - 1] == 0))
		size--;
	if (size == 0 || size >= sizeof(to) || memchr(value, 0, size))
		return -EINVAL;
	memcpy(to, value, size);
	to[size] = 0;
	if (meta_star_check(to))
		return -EINVAL;
	rc = star_release(st, t->stream, to, &h);
	if (rc == -STAR_ENOTOWNER)
		return ask_holder(st, t, to, &h);
	if (rc == -ENOENT)
		return -EINVAL; /* no such star: ENOENT would read as the file */
	if (rc == 0)
		nv_log(NV_INFO, NV_SUB_FS, "user.nova.leader: %s/%s now led by star %s (lease epoch "
		       "%llu)", t->stream->bucket, t->stream->name, h.star,
		       (unsigned long long)h.epoch);
	return rc;
}

/* The stream's durable override, kept in its row (fs/handle.h). */
static int set_durable(struct star *st, struct nv_stream *s, enum fs_durable d)
{
	int rc = star_stream_set_durable(st, s, (unsigned)d);

	if (rc)
		return rc;
	nv_log(NV_INFO, NV_SUB_FS, "stream %s/%s (%llu): user.nova.durable %s%s", s->bucket,
	       s->name, (unsigned long long)s->id, d == FS_DURABLE_DEFAULT ? "removed" : "set to ",
	       d == FS_DURABLE_DEFAULT ? "" : fs_durable_name(d));
	return 0;
}

static int xattr_set(struct star *st, const struct fs_xattr_target *t, const char *name,
		     const char *value, size_t size)
{
	const char *const *known;
	const char *n;
	unsigned cls;

	if (strncmp(name, PFX, sizeof(PFX) - 1))
		return -ENOTSUP; /* novafs stores no other attributes */
	n = name + sizeof(PFX) - 1;
	if (!strcmp(n, "trim") && t->kind == FS_NODE_STREAM) {
		char num[32];
		char *end;
		unsigned long long seq;

		while (size && (value[size - 1] == '\n' || value[size - 1] == 0))
			size--;
		if (size == 0 || size >= sizeof(num))
			return -EINVAL;
		/* Decimal digits only: strtoull alone would take white space,
		 * a sign (" -1" wraps) and stop at an embedded NUL. */
		for (size_t i = 0; i < size; i++)
			if (value[i] < '0' || value[i] > '9')
				return -EINVAL;
		memcpy(num, value, size);
		num[size] = 0;
		errno = 0;
		seq = strtoull(num, &end, 10);
		if (*end || errno)
			return -EINVAL;
		if (t->trim)
			return t->trim(t->trim_arg, t->stream, seq);
		return star_stream_trim_seq(st, t->stream, seq, NULL);
	}
	if (!strcmp(n, "class") && t->kind != FS_NODE_ROOT) {
		if (nv_class_parse(value, size, &cls))
			return -EINVAL;
		if (t->kind == FS_NODE_BUCKET)
			return star_bucket_set_class(st, t->bucket, cls);
		return star_stream_set_class(st, t->stream, cls);
	}
	if (!strcmp(n, "leader") && t->kind == FS_NODE_STREAM)
		return set_leader(st, t, value, size);
	if (!strcmp(n, "durable") && t->kind == FS_NODE_STREAM) {
		enum fs_durable d;

		if (fs_durable_parse(value, size, &d))
			return -EINVAL;
		return set_durable(st, t->stream, d);
	}
	for (known = names_of(t->kind); known && *known; known++)
		if (!strcmp(n, *known))
			return -ENOTSUP; /* read-only: ENOTSUP, which cp -a and mv
					  * skip quietly when they copy xattrs */
	return -ENOTSUP;
}

/* user.nova.trim is not listed: copying tools (cp -a, mv across
 * buckets, rsync -X) set every listed attribute on the copy, and a trim
 * point is a record number of this stream, which would cut the copy's
 * own records.  getfattr -n user.nova.trim reads it.  Nor is
 * user.nova.leader: setting it on the copy would hand the copy over. */
int fs_xattr_list(const struct fs_xattr_target *t, struct nv_buf *out)
{
	nv_buf_reset(out);
	for (const char *const *k = names_of(t->kind); k && *k; k++) {
		int rc;

		if (t->kind == FS_NODE_STREAM && (!strcmp(*k, "trim") || !strcmp(*k, "leader")))
			continue;
		rc = nv_buf_printf(out, PFX "%s", *k);

		if (!rc)
			rc = nv_buf_add_u8(out, 0);
		if (rc)
			return rc;
	}
	return 0;
}

/* fs_xattr_set(): xattr_set(), and a refused administration (EPERM,
 * EINVAL, ENOTEMPTY) logged at info level, rate-limited (src/base/log.h),
 * naming the attribute and the stream or bucket. */
int fs_xattr_set(struct star *st, const struct fs_xattr_target *t, const char *name,
		 const char *value, size_t size)
{
	static struct nv_ratelimit rl;
	int rc = xattr_set(st, t, name, value, size);

	if (rc == -EPERM || rc == -EINVAL || rc == -ENOTEMPTY || rc == -EHOSTDOWN ||
	    rc == -EREMOTE || rc == -EHOSTUNREACH || rc == -EAGAIN)
		nv_log_ratelimited(&rl, NV_INFO, NV_SUB_FS, "setxattr %s=%.*s on %s%s%s refused: %s",
				   name, (int)(size < 64 ? size : 64), value,
				   t->kind == FS_NODE_STREAM ? t->stream->bucket
				   : t->kind == FS_NODE_BUCKET ? t->bucket : "the root",
				   t->kind == FS_NODE_STREAM ? "/" : "",
				   t->kind == FS_NODE_STREAM ? t->stream->name : "", strerror(-rc));
	return rc;
}

int fs_xattr_remove(struct star *st, const struct fs_xattr_target *t, const char *name)
{
	if (strncmp(name, PFX, sizeof(PFX) - 1))
		return -ENODATA; /* novafs stores no other attributes */
	if (t->kind == FS_NODE_STREAM && !strcmp(name + sizeof(PFX) - 1, "durable"))
		return set_durable(st, t->stream, FS_DURABLE_DEFAULT);
	return -EPERM; /* engine state, not a stored value */
}

int fs_durable_parse(const char *v, size_t len, enum fs_durable *out)
{
	while (len && (v[len - 1] == '\n' || v[len - 1] == 0))
		len--;
	if (len == 5 && !memcmp(v, "write", 5))
		*out = FS_DURABLE_WRITE;
	else if (len == 5 && !memcmp(v, "fsync", 5))
		*out = FS_DURABLE_FSYNC;
	else
		return -EINVAL;
	return 0;
}

const char *fs_durable_name(enum fs_durable d)
{
	return d == FS_DURABLE_FSYNC ? "fsync" : "write";
}
