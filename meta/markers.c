/*
 * markers.c - see markers.h.
 *
 * Value v2: u8 version | u8 class | str star | u64 epoch | u64 first_slot
 *   | u64 end_slot | u64 birth_ns | u64 ripe_ns | u8 crossed
 *   | u32 nstreams | nstreams x (u64 stream, u64 first_seq, u64 bytes,
 *   u64 ripe_ns)
 * v1 (read only) has no per-stream ripe_ns: each stream takes the
 * marker's.
 */
#include "config.h"
#include "meta/markers.h"
#include "meta/keys.h"
#include "meta/streams.h"
#include "meta/tuple.h"
#include "src/base/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MARKER_V1 1
#define MARKER_V2 2

void meta_marker_clear(struct meta_marker *m)
{
	free(m->streams);
	memset(m, 0, sizeof(*m));
}

int meta_marker_encode(const struct meta_marker *m, struct nv_buf *out)
{
	int rc;

	nv_buf_reset(out);
	if (m->nstreams > META_MARKER_STREAMS_MAX)
		return -E2BIG;
	rc = nv_wr_u8(out, MARKER_V2);
	if (!rc)
		rc = nv_wr_u8(out, m->cls);
	if (!rc)
		rc = nv_wr_str(out, m->star);
	if (!rc)
		rc = nv_wr_u64(out, m->epoch);
	if (!rc)
		rc = nv_wr_u64(out, m->first_slot);
	if (!rc)
		rc = nv_wr_u64(out, m->end_slot);
	if (!rc)
		rc = nv_wr_u64(out, m->birth_ns);
	if (!rc)
		rc = nv_wr_u64(out, m->ripe_ns);
	if (!rc)
		rc = nv_wr_u8(out, m->crossed);
	if (!rc)
		rc = nv_wr_u32(out, m->nstreams);
	for (uint32_t i = 0; !rc && i < m->nstreams; i++) {
		rc = nv_wr_u64(out, m->streams[i].stream_id);
		if (!rc)
			rc = nv_wr_u64(out, m->streams[i].first_seq);
		if (!rc)
			rc = nv_wr_u64(out, m->streams[i].bytes);
		if (!rc)
			rc = nv_wr_u64(out, m->streams[i].ripe_ns);
	}
	return rc;
}

int meta_marker_decode(const void *p, size_t n, struct meta_marker *m)
{
	struct nv_rd r;
	uint32_t slen, ns, esize;
	const uint8_t *star;
	uint8_t v;

	memset(m, 0, sizeof(*m));
	nv_rd_init(&r, p, n);
	v = nv_rd_u8(&r);
	if (v != MARKER_V1 && v != MARKER_V2)
		return -EBADMSG;
	esize = v == MARKER_V1 ? 24 : 32;
	m->cls = nv_rd_u8(&r);
	star = nv_rd_bytes(&r, &slen, META_STAR_MAX);
	if (!star || memchr(star, 0, slen))
		return -EBADMSG;
	memcpy(m->star, star, slen);
	m->star[slen] = 0;
	m->epoch = nv_rd_u64(&r);
	m->first_slot = nv_rd_u64(&r);
	m->end_slot = nv_rd_u64(&r);
	m->birth_ns = nv_rd_u64(&r);
	m->ripe_ns = nv_rd_u64(&r);
	m->crossed = nv_rd_u8(&r);
	ns = nv_rd_u32(&r);
	if (nv_rd_error(&r) || m->cls >= NV_CLASS_COUNT || meta_star_check(m->star) ||
	    m->end_slot <= m->first_slot || m->crossed > 1 ||
	    ns > META_MARKER_STREAMS_MAX || (uint64_t)ns * esize != nv_rd_left(&r))
		return -EBADMSG;
	if (ns) {
		m->streams = calloc(ns, sizeof(*m->streams));
		if (!m->streams)
			return -ENOMEM;
	}
	m->nstreams = ns;
	for (uint32_t i = 0; i < ns; i++) {
		m->streams[i].stream_id = nv_rd_u64(&r);
		m->streams[i].first_seq = nv_rd_u64(&r);
		m->streams[i].bytes = nv_rd_u64(&r);
		m->streams[i].ripe_ns = v == MARKER_V1 ? m->ripe_ns : nv_rd_u64(&r);
		if (i && m->streams[i].stream_id <= m->streams[i - 1].stream_id) {
			meta_marker_clear(m);
			return -EBADMSG;
		}
	}
	if (nv_rd_done(&r)) {
		meta_marker_clear(m);
		return -EBADMSG;
	}
	return 0;
}

int meta_marker_txn_put(struct kv_txn *t, const struct meta_marker *m)
{
	struct nv_buf k, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_marker(&k, m->cls, m->star, m->epoch, m->first_slot);
	if (!rc)
		rc = meta_marker_encode(m, &v);
	if (!rc)
		rc = kv_txn_put(t, k.ptr, k.len, v.ptr, v.len);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

int meta_marker_txn_del(struct kv_txn *t, unsigned cls, const char *star,
			uint64_t epoch, uint64_t first_slot)
{
	struct nv_buf k;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	rc = key_marker(&k, cls, star, epoch, first_slot);
	if (!rc)
		rc = kv_txn_del(t, k.ptr, k.len);
	nv_buf_free(&k);
	return rc;
}

#define MARK_PAGE 64

struct mark_page {
	struct meta_marker rows[MARK_PAGE];
	int n;
};

static int mark_visit(void *arg, const uint8_t *key, size_t klen, const uint8_t *val,
		      size_t vlen, uint64_t ver)
{
	struct mark_page *pg = arg;
	int rc = meta_marker_decode(val, vlen, &pg->rows[pg->n]);

	if (rc)
		return rc;
	pg->n++;
	return pg->n == MARK_PAGE ? 1 : 0;
}

int meta_marker_list(struct kv *kv, unsigned cls, const char *star, uint64_t epoch,
		     meta_marker_fn fn, void *arg)
{
	struct mark_page *pg = calloc(1, sizeof(*pg));
	struct nv_buf start, end;
	int rc;

	if (!pg)
		return -ENOMEM;
	nv_buf_init(&start, KV_KEY_MAX);
	nv_buf_init(&end, KV_KEY_MAX);
	rc = key_markers_of(&end, cls, star, epoch);
	if (!rc)
		rc = nv_tup_prefix_end(&end);
	if (!rc)
		rc = key_marker(&start, cls, star, epoch, 0);
	while (!rc) {
		uint64_t next;
		int n;

		pg->n = 0;
		rc = kv_range(kv, start.ptr, start.len, end.ptr, end.len, MARK_PAGE,
			      false, mark_visit, pg);
		if (rc < 0) {
			/* The range failed part way (a damaged database): the
			 * rows decoded so far are ours to free. */
			for (int i = 0; i < pg->n; i++)
				meta_marker_clear(&pg->rows[i]);
			break;
		}
		rc = 0;
		n = pg->n;
		next = n ? pg->rows[n - 1].first_slot + 1 : 0;
		for (int i = 0; i < n; i++) {
			if (!rc)
				rc = fn(arg, &pg->rows[i]);
			meta_marker_clear(&pg->rows[i]);
		}
		if (rc || n < MARK_PAGE)
			break;
		rc = key_marker(&start, cls, star, epoch, next);
	}
	nv_buf_free(&start);
	nv_buf_free(&end);
	free(pg);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------ ripening */

struct ripen_find {
	uint64_t slot;
	struct meta_marker m; /* the copy found (streams owned) */
	int found;
};

static int ripen_find(void *arg, const struct meta_marker *m)
{
	struct ripen_find *n = arg;

	if (m->first_slot > n->slot)
		return 1;
	if (n->slot >= m->end_slot)
		return 0;
	n->m = *m;
	n->m.streams = malloc((m->nstreams ? m->nstreams : 1) * sizeof(*m->streams));
	if (!n->m.streams)
		return -ENOMEM;
	memcpy(n->m.streams, m->streams, m->nstreams * sizeof(*m->streams));
	n->found = 1;
	return 1;
}

int meta_marker_ripen(struct kv *kv, unsigned cls, const char *star, uint64_t epoch,
		      uint64_t slot, uint64_t stream, uint64_t ripe_ns)
{
	struct ripen_find n = { .slot = slot };
	struct kv_txn *t;
	bool moved = false;
	int rc = meta_marker_list(kv, cls, star, epoch, ripen_find, &n);

	if (rc || !n.found) {
		meta_marker_clear(&n.m);
		return rc ? rc : -ENOENT;
	}
	for (uint32_t i = 0; i < n.m.nstreams; i++)
		if (n.m.streams[i].stream_id == stream && n.m.streams[i].ripe_ns > ripe_ns) {
			n.m.streams[i].ripe_ns = ripe_ns;
			moved = true;
		}
	if (!moved) {
		meta_marker_clear(&n.m);
		return 0;
	}
	if (ripe_ns < n.m.ripe_ns)
		n.m.ripe_ns = ripe_ns;
	t = kv_txn_new();
	rc = t ? meta_marker_txn_put(t, &n.m) : -ENOMEM;
	if (!rc)
		rc = kv_txn_commit(kv, t, NULL);
	kv_txn_free(t);
	meta_marker_clear(&n.m);
	return rc ? rc : 1;
}
