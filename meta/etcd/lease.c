/*
 * lease.c - leases and watches of the etcd backend (see
 * meta/etcd/internal.h, kv.h).
 *
 * For: kv_lease_*() over /v3/lease/{grant,keepalive,revoke} and
 * kv_watch_*() over the streaming /v3/watch.  Not for: deciding who holds
 * what (callers guard leadership with compares on lease rows inside their
 * transactions, never with a client-side lock).
 *
 * Leases: etcd answers a keepalive of an expired or unknown lease with
 * 200 and no TTL; that, and "lease not found", is -ENOLCK (lease lost).
 * A revoke whose answer was lost and whose retry finds no lease revoked
 * it (0).
 *
 * Watches: one thread per watch holds a streaming request on one member:
 *
 *   connect --(created)--> streaming --(events)--> fire, streaming
 *      ^                       |  (compacted/canceled/error/member down)
 *      +------ backoff <-------+
 *
 * It resumes from the revision after the last one it saw, so a reconnect
 * loses nothing and fires nothing; a compaction past that revision (etcd
 * cancels the watch with compact_revision) fires a prompt and resumes
 * from now: the owner re-reads, which is all a prompt ever asks.  The
 * request carries "Grpc-Metadata-hasleader: true", so a member without
 * quorum ends it at once and the thread moves to the next member.
 *
 * Invariants:
 *  1. After ec_watch_stop() returns, the thread has exited and nothing
 *     touches the kv_watch again.
 *  2. Every event the stream delivers under the prefix fires a prompt
 *     with its revision; a lost resume point (compaction) fires one too.
 */
#include "config.h"
#include "meta/etcd/internal.h"
#include "src/base/buf.h"
#include "src/base/clock.h"
#include "src/base/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A line of the watch stream larger than this ends the stream (events
 * carry values; the caller re-reads anyway). */
#define EC_WATCH_LINE_MAX (8u << 20)

int ec_lease_grant(void *vbe, unsigned ttl_s, uint64_t *id)
{
	struct ec_be *be = vbe;
	json_t *req = json_pack("{s:I}", "TTL", (json_int_t)ttl_s), *resp = NULL;
	int rc = req ? ec_call(be, "lease/grant", req, NULL, &resp) : -ENOMEM;

	if (!rc) {
		*id = ec_u64(resp, "ID");
		if (!*id) {
			nv_log(NV_ERR, NV_SUB_META, "etcd %s: lease/grant: no ID in the answer",
			       be->name);
			rc = -EIO;
		}
	}
	json_decref(req);
	json_decref(resp);
	return rc;
}

int ec_lease_keepalive(void *vbe, uint64_t id, unsigned *ttl_s)
{
	struct ec_be *be = vbe;
	json_t *req = json_pack("{s:I}", "ID", (json_int_t)id), *resp = NULL;
	int rc = req ? ec_call(be, "lease/keepalive", req, NULL, &resp) : -ENOMEM;

	if (!rc)
		rc = ec_keepalive_ttl(resp, ttl_s);
	json_decref(req);
	json_decref(resp);
	return rc;
}

int ec_keepalive_ttl(const json_t *resp, unsigned *ttl_s)
{
	/* A stream's message comes wrapped in "result". */
	const json_t *res = json_object_get(resp, "result");
	uint64_t ttl = ec_u64(res ? res : resp, "TTL");

	*ttl_s = ttl > KV_LEASE_TTL_MAX ? KV_LEASE_TTL_MAX : (unsigned)ttl;
	return *ttl_s ? 0 : -ENOLCK;
}

int ec_lease_revoke(void *vbe, uint64_t id)
{
	struct ec_be *be = vbe;
	json_t *req = json_pack("{s:I}", "ID", (json_int_t)id), *resp = NULL;
	bool lost = false;
	int rc = req ? ec_call(be, "lease/revoke", req, &lost, &resp) : -ENOMEM;

	if (rc == -ENOLCK && lost)
		rc = 0; /* our lost attempt revoked it */
	json_decref(req);
	json_decref(resp);
	return rc;
}

/* ----------------------------------------------------------------------
 * Watches
 */

struct ec_watch {
	struct ec_be *be;       /* borrowed: the kv outlives its watches */
	struct kv_watch *w;     /* borrowed: closed after ec_watch_stop() */
	pthread_t thread;
	_Atomic bool stop;
	/* Owned by the thread: */
	uint64_t next_rev;      /* resume point, 0: from now */
	struct nv_buf line;     /* partial line of the stream */
	bool cancelled;         /* this stream ended by etcd */
};

/* etcd's range end of every key starting with k[0..n): k with its last
 * byte below 0xFF incremented and the rest cut. */
static size_t prefix_end(uint8_t *k, size_t n)
{
	while (n && k[n - 1] == 0xFF)
		n--;
	if (n)
		k[n - 1]++;
	return n;
}

void ec_watch_decode(const char *p, size_t n, struct ec_watch_msg *m)
{
	json_t *j = json_loadb(p, n, 0, NULL), *res = json_object_get(j, "result");
	json_t *events = json_object_get(res, "events");

	memset(m, 0, sizeof(*m));
	m->hrev = ec_u64(json_object_get(res, "header"), "revision");
	m->compacted = ec_u64(res, "compact_revision");
	if (!res) {
		m->kind = EC_WATCH_OVER; /* an error object, or not JSON */
	} else if (m->compacted) {
		m->kind = EC_WATCH_COMPACTED;
	} else if (json_array_size(events)) {
		m->kind = EC_WATCH_EVENTS;
		for (size_t i = 0; i < json_array_size(events); i++) {
			uint64_t r = ec_u64(json_object_get(json_array_get(events, i), "kv"),
					    "mod_revision");

			if (r > m->top)
				m->top = r;
		}
	} else if (json_is_true(json_object_get(res, "canceled"))) {
		m->kind = EC_WATCH_OVER;
	} else {
		m->kind = EC_WATCH_QUIET; /* created, or progress */
	}
	json_decref(j);
}

/* One message of the stream (invariant 2). */
static void on_message(struct ec_watch *ew, const char *p, size_t n)
{
	struct ec_watch_msg m;

	ec_watch_decode(p, n, &m);
	switch (m.kind) {
	case EC_WATCH_OVER:
		ew->cancelled = true;
		break;
	case EC_WATCH_COMPACTED:
		nv_log(NV_DEBUG, NV_SUB_META, "etcd %s: watch compacted at %" PRIu64
		       ": prompting a re-read", ew->be->name, m.compacted);
		ew->next_rev = 0;
		ew->cancelled = true;
		kv_watch_fire(ew->w, m.hrev);
		break;
	case EC_WATCH_EVENTS:
		kv_watch_fire(ew->w, m.top ? m.top : m.hrev);
		ew->next_rev = (m.top > m.hrev ? m.top : m.hrev) + 1;
		break;
	case EC_WATCH_QUIET:
		if (!ew->next_rev && m.hrev)
			ew->next_rev = m.hrev + 1; /* created "from now": pin it */
		break;
	}
}

static size_t on_stream(char *p, size_t sz, size_t n, void *arg)
{
	struct ec_watch *ew = arg;
	size_t len = sz * n;

	for (size_t i = 0; i < len; i++) {
		if (p[i] != '\n') {
			if (nv_buf_add(&ew->line, &p[i], 1))
				return 0;
			continue;
		}
		if (ew->line.len)
			on_message(ew, (const char *)ew->line.ptr, ew->line.len);
		nv_buf_reset(&ew->line);
		if (ew->cancelled)
			return 0; /* end this transfer; the loop reconnects */
	}
	return len;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct ec_watch *ew = arg;

	(void)a, (void)b, (void)c, (void)d;
	return atomic_load(&ew->stop) ? 1 : 0;
}

/* The create request for the current resume point. */
static char *create_body(struct ec_watch *ew)
{
	size_t plen;
	const uint8_t *p = kv_watch_prefix(ew->w, &plen);
	uint8_t *end = malloc(ew->be->plen + plen + 1);
	json_t *cr, *req;
	char *body = NULL;
	size_t elen;

	if (!end)
		return NULL;
	memcpy(end, ew->be->prefix, ew->be->plen);
	memcpy(end + ew->be->plen, p, plen);
	elen = prefix_end(end, ew->be->plen + plen);
	cr = json_pack("{s:o, s:o}", "key", ec_b64(ew->be, p, plen, true), "range_end",
		       ec_b64(ew->be, end, elen, false));
	if (cr && ew->next_rev)
		json_object_set_new(cr, "start_revision", json_integer((json_int_t)ew->next_rev));
	req = cr ? json_pack("{s:o}", "create_request", cr) : NULL;
	if (req)
		body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	free(end);
	return body;
}

/* One streaming request on member m, until it ends or stop. */
static void stream_once(struct ec_watch *ew, CURL *h, int m)
{
	struct curl_slist *hdrs = NULL;
	char url[512], *body = create_body(ew);

	if (!body || ec_curl_setup(ew->be, h, &hdrs, true)) {
		free(body);
		return;
	}
	snprintf(url, sizeof(url), "%s/v3/watch", ew->be->members[m]);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, ew);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, ew);
	ew->cancelled = false;
	nv_buf_reset(&ew->line);
	(void)curl_easy_perform(h); /* ends on stop, cancel, or a dead member */
	curl_slist_free_all(hdrs);
	free(body);
}

/* The current revision (one cheap read), so a watch "from now" resumes
 * from the moment kv_watch_open() returned, not from when its stream
 * reached a member. */
static int current_rev(struct ec_be *be, uint64_t *rev)
{
	json_t *req = json_pack("{s:o, s:b}", "key", ec_b64(be, "", 0, true), "count_only", 1);
	json_t *resp = NULL;
	int rc = req ? ec_call(be, "kv/range", req, NULL, &resp) : -ENOMEM;

	if (!rc)
		*rev = ec_u64(json_object_get(resp, "header"), "revision");
	json_decref(req);
	json_decref(resp);
	return rc;
}

static void *watch_main(void *arg)
{
	struct ec_watch *ew = arg;
	CURL *h = curl_easy_init();
	int m = atomic_load(&ew->be->cur) % ew->be->nmembers;

	while (h && !atomic_load(&ew->stop)) {
		uint64_t t0 = nv_now_mono_ns();

		stream_once(ew, h, m);
		if (atomic_load(&ew->stop))
			break;
		/* Ended: a dead member or a cancel.  Next member; pause unless
		 * the stream lived long enough to have been healthy. */
		m = (m + 1) % ew->be->nmembers;
		if (nv_now_mono_ns() - t0 < 1000000000ull) {
			struct timespec ts = { 0, 200 * 1000000L };
			uint64_t rev;

			nanosleep(&ts, NULL);
			/* A stream refused for an expired token: one ordinary
			 * call renews it (ec_call() re-authenticates). */
			if (ew->be->user && current_rev(ew->be, &rev) == 0)
				(void)rev;
		}
	}
	if (h)
		curl_easy_cleanup(h);
	return NULL;
}

int ec_watch_start(void *vbe, struct kv_watch *w)
{
	struct ec_watch *ew = calloc(1, sizeof(*ew));
	uint64_t now = 0;
	int rc;

	if (!ew)
		return -ENOMEM;
	ew->be = vbe;
	ew->w = w;
	ew->next_rev = kv_watch_from(w);
	if (!ew->next_rev) {
		rc = current_rev(vbe, &now);
		if (rc) {
			free(ew);
			return rc;
		}
		ew->next_rev = now + 1;
	}
	nv_buf_init(&ew->line, EC_WATCH_LINE_MAX);
	if (pthread_create(&ew->thread, NULL, watch_main, ew)) {
		nv_buf_free(&ew->line);
		free(ew);
		return -EAGAIN;
	}
	*kv_watch_be(w) = ew;
	return 0;
}

void ec_watch_stop(void *vbe, struct kv_watch *w)
{
	struct ec_watch *ew = *kv_watch_be(w);

	(void)vbe;
	atomic_store(&ew->stop, true);
	pthread_join(ew->thread, NULL); /* invariant 1 */
	nv_buf_free(&ew->line);
	free(ew);
}
