/*
 * kv.c - the etcd backend's reads and commits, its open and its ops
 * table (see meta/etcd/internal.h, meta/etcd.h, kv.h).
 *
 * For: kv.h's get, floor, range and commit over /v3/kv/range and
 * /v3/kv/txn.  Not for: HTTP, retries, errors (conn.c), leases and
 * watches (lease.c).
 *
 * Floor: a range [lo, key + "\0") sorted DESCEND with limit 1.  etcd 3.4
 * reads the whole range before sorting it, so a floor costs the number of
 * keys in [lo, key]; callers keep that range tight (meta/refs.c's
 * windowed ref_floor()).  An ascending range sends no sort at all, which
 * lets etcd stop at the limit.
 *
 * Commit (invariant 5 of internal.h): writes to one key are folded into
 * the last; a transaction that fits one request goes as one txn; one
 * without compares that does not fit goes as several, in order (kv.h
 * "Splitting"); one with compares that does not fit is -E2BIG.
 *
 * Invariants: 1 (every key through ec_b64(be, .., true) and back through
 * ec_unb64(.., true)), 2 (ec_range()), 3 (ec_commit_resolve()), 5.
 */
#include "config.h"
#include "meta/etcd.h"
#include "meta/etcd/internal.h"
#include "src/base/buf.h"
#include "src/base/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keys per range page: bounds one answer to EC_PAGE values. */
#define EC_PAGE 64

/* A range request over [start, end) (end NULL: the one key start). */
static json_t *range_req(struct ec_be *be, const void *start, size_t slen,
			 const void *end, size_t elen, bool has_end)
{
	json_t *r = json_object();

	if (!r || json_object_set_new(r, "key", ec_b64(be, start, slen, true)))
		goto fail;
	if (has_end && json_object_set_new(r, "range_end", ec_b64(be, end, elen, true)))
		goto fail;
	return r;
fail:
	json_decref(r);
	return NULL;
}

int ec_range_kv(const struct ec_be *be, const json_t *resp, size_t i, struct nv_buf *k,
		struct nv_buf *v, uint64_t *ver)
{
	json_t *e = json_array_get(json_object_get(resp, "kvs"), i);
	int rc = 0;

	if (!e)
		return -ENOENT;
	if (k)
		rc = ec_unb64(be, json_object_get(e, "key"), k, true);
	if (!rc && v)
		rc = ec_unb64(be, json_object_get(e, "value"), v, false);
	if (ver)
		*ver = ec_u64(e, "mod_revision");
	return rc;
}

static int ec_get(void *vbe, const void *key, size_t klen, struct nv_buf *val,
		  uint64_t *ver)
{
	struct ec_be *be = vbe;
	json_t *req = range_req(be, key, klen, NULL, 0, false), *resp = NULL;
	int rc = req ? ec_call(be, "kv/range", req, NULL, &resp) : -ENOMEM;

	if (!rc)
		rc = ec_range_kv(be, resp, 0, NULL, val, ver);
	json_decref(req);
	json_decref(resp);
	return rc;
}

static int ec_floor(void *vbe, const void *key, size_t klen, const void *lo,
		    size_t lolen, struct nv_buf *key_out, struct nv_buf *val_out,
		    uint64_t *ver)
{
	struct ec_be *be = vbe;
	uint8_t *end = malloc(klen + 1);
	json_t *req = NULL, *resp = NULL;
	int rc = -ENOMEM;

	if (!end)
		return -ENOMEM;
	if (klen)
		memcpy(end, key, klen);
	end[klen] = 0; /* [lo, key + "\0") is [lo, key] */
	req = range_req(be, lo, lolen, end, klen + 1, true);
	if (req && !json_object_set_new(req, "limit", json_integer(1)) &&
	    !json_object_set_new(req, "sort_order", json_string("DESCEND")) &&
	    !json_object_set_new(req, "sort_target", json_string("KEY")))
		rc = ec_call(be, "kv/range", req, NULL, &resp);
	if (!rc)
		rc = ec_range_kv(be, resp, 0, key_out, val_out, ver);
	free(end);
	json_decref(req);
	json_decref(resp);
	return rc;
}

/* One page of a range at revision *snap (0: current, then set). */
static int range_page(struct ec_be *be, const struct nv_buf *lo, const struct nv_buf *hi,
		      size_t limit, bool reverse, uint64_t *snap, json_t **resp)
{
	json_t *req = range_req(be, lo->ptr, lo->len, hi->ptr, hi->len, true);
	int rc = -ENOMEM;

	if (req && !json_object_set_new(req, "limit", json_integer((json_int_t)limit)) &&
	    (!reverse || (!json_object_set_new(req, "sort_order", json_string("DESCEND")) &&
			  !json_object_set_new(req, "sort_target", json_string("KEY")))) &&
	    (!*snap || !json_object_set_new(req, "revision", json_integer((json_int_t)*snap))))
		rc = ec_call(be, "kv/range", req, NULL, resp);
	json_decref(req);
	if (!rc && !*snap)
		*snap = ec_u64(json_object_get(*resp, "header"), "revision");
	return rc;
}

/* Invariant 2: pages at the first page's revision. */
static int ec_range(void *vbe, const void *start, size_t slen, const void *end,
		    size_t elen, size_t limit, bool reverse, kv_visit_fn fn, void *arg)
{
	struct ec_be *be = vbe;
	struct nv_buf lo, hi, k, v;
	uint64_t snap = 0;
	size_t seen = 0;
	int rc;

	nv_buf_init(&lo, KV_KEY_MAX + 2);
	nv_buf_init(&hi, KV_KEY_MAX + 2);
	nv_buf_init(&k, KV_KEY_MAX + 2);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = nv_buf_add(&lo, start, slen);
	if (!rc)
		rc = nv_buf_add(&hi, end, elen);
	while (!rc) {
		size_t want = limit && limit - seen < EC_PAGE ? limit - seen : EC_PAGE, n;
		json_t *resp = NULL;
		bool stop = false;

		rc = range_page(be, &lo, &hi, want, reverse, &snap, &resp);
		if (rc)
			break;
		n = json_array_size(json_object_get(resp, "kvs"));
		for (size_t i = 0; i < n && !rc && !stop; i++) {
			uint64_t ver = 0;

			rc = ec_range_kv(be, resp, i, &k, &v, &ver);
			if (!rc) {
				int frc = fn(arg, k.ptr, k.len, v.ptr, v.len, ver);

				seen++;
				if (frc)
					stop = true, rc = frc < 0 ? frc : 0;
			}
		}
		json_decref(resp);
		if (rc || stop || n < want || (limit && seen >= limit))
			break;
		/* The next page: past the last key seen. */
		nv_buf_reset(reverse ? &hi : &lo);
		rc = nv_buf_add(reverse ? &hi : &lo, k.ptr, k.len);
		if (!rc && !reverse)
			rc = nv_buf_add(&lo, "", 1);
	}
	nv_buf_free(&lo);
	nv_buf_free(&hi);
	nv_buf_free(&k);
	nv_buf_free(&v);
	return rc;
}

/* ----------------------------------------------------------------------
 * Commit
 */

static int op_cmp(const void *a, const void *b)
{
	const struct kv_op *x = *(const struct kv_op *const *)a;
	const struct kv_op *y = *(const struct kv_op *const *)b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);

	if (c)
		return c;
	if (x->klen != y->klen)
		return x->klen < y->klen ? -1 : 1;
	return x < y ? -1 : x > y; /* later ops last */
}

/*
 * The writes of ops[first..nops) that survive folding (the last write to
 * each key), in their original order, into *out (caller frees).  0 or
 * -ENOMEM.
 */
static int fold_writes(const struct kv_op *ops, size_t first, size_t nops,
		       const struct kv_op ***out, size_t *nout)
{
	size_t n = nops - first, k = 0;
	const struct kv_op **s = malloc((n ? n : 1) * sizeof(*s));
	bool *drop = calloc(n ? n : 1, 1);

	if (!s || !drop) {
		free(s);
		free(drop);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		s[i] = &ops[first + i];
	qsort(s, n, sizeof(*s), op_cmp);
	for (size_t i = 0; i + 1 < n; i++)
		if (s[i]->klen == s[i + 1]->klen && !memcmp(s[i]->key, s[i + 1]->key, s[i]->klen))
			drop[s[i] - &ops[first]] = true;
	for (size_t i = 0; i < n; i++)
		if (!drop[i])
			s[k++] = &ops[first + i];
	free(drop);
	*out = s;
	*nout = k;
	return 0;
}

/* One compare as etcd JSON. */
static json_t *cmp_json(struct ec_be *be, const struct kv_op *op)
{
	json_t *c = json_object();

	if (!c || json_object_set_new(c, "key", ec_b64(be, op->key, op->klen, true)) ||
	    json_object_set_new(c, "result", json_string("EQUAL")))
		goto fail;
	if (op->kind == KV_CMP_VER) {
		if (json_object_set_new(c, "target", json_string("MOD")) ||
		    json_object_set_new(c, "mod_revision", json_integer((json_int_t)op->ver)))
			goto fail;
	} else if (json_object_set_new(c, "target", json_string("VALUE")) ||
		   json_object_set_new(c, "value", ec_b64(be, op->val, op->vlen, false))) {
		goto fail;
	}
	return c;
fail:
	json_decref(c);
	return NULL;
}

/* One write as etcd JSON. */
static json_t *write_json(struct ec_be *be, const struct kv_op *op)
{
	if (op->kind == KV_DEL)
		return json_pack("{s:{s:o}}", "request_delete_range", "key",
				 ec_b64(be, op->key, op->klen, true));
	if (op->lease)
		return json_pack("{s:{s:o, s:o, s:I}}", "request_put", "key",
				 ec_b64(be, op->key, op->klen, true), "value",
				 ec_b64(be, op->val, op->vlen, false), "lease",
				 (json_int_t)op->lease);
	return json_pack("{s:{s:o, s:o}}", "request_put", "key",
			 ec_b64(be, op->key, op->klen, true), "value",
			 ec_b64(be, op->val, op->vlen, false));
}

/*
 * Send one txn: compares cmps[0..nc), writes w[0..nw).  0 (*rev set),
 * -ECANCELED, or -errno; *lost when an attempt's answer was lost.
 */
static int txn_send(struct ec_be *be, const struct kv_op *const *cmps, size_t nc,
		    const struct kv_op *const *w, size_t nw, uint64_t *rev, bool *lost)
{
	json_t *req = json_object(), *ca = json_array(), *sa = json_array(), *resp = NULL;
	int rc = -ENOMEM;

	if (!req || !ca || !sa)
		goto out;
	for (size_t i = 0; i < nc; i++)
		if (json_array_append_new(ca, cmp_json(be, cmps[i])))
			goto out;
	for (size_t i = 0; i < nw; i++)
		if (json_array_append_new(sa, write_json(be, w[i])))
			goto out;
	if (json_object_set(req, "compare", ca) || json_object_set(req, "success", sa))
		goto out;
	rc = ec_call(be, "kv/txn", req, lost, &resp);
	if (!rc)
		rc = ec_txn_outcome(resp, rev);
out:
	json_decref(ca);
	json_decref(sa);
	json_decref(req);
	json_decref(resp);
	return rc;
}

int ec_txn_outcome(const json_t *resp, uint64_t *rev)
{
	*rev = ec_u64(json_object_get(resp, "header"), "revision");
	return json_is_true(json_object_get(resp, "succeeded")) ? 0 : -ECANCELED;
}

/*
 * Invariant 3: a CAS whose answer was lost and whose retry failed its
 * compares.  If every write of it holds (puts have their values, deletes
 * are absent), the lost attempt was ours: 0 with *rev the revision of a
 * put key (or the current one).  Else -ECANCELED.
 */
static int ec_commit_resolve(struct ec_be *be, const struct kv_op *const *w, size_t nw,
			     uint64_t *rev)
{
	struct kv_op *chk = calloc(nw ? nw : 1, sizeof(*chk));
	const struct kv_op **pc = calloc(nw ? nw : 1, sizeof(*pc));
	uint64_t r = 0, ver = 0;
	bool lost;
	int rc = -ENOMEM;

	if (chk && pc) {
		for (size_t i = 0; i < nw; i++) {
			chk[i] = *w[i];
			chk[i].kind = w[i]->kind == KV_PUT ? KV_CMP_VAL : KV_CMP_VER;
			chk[i].ver = 0;
			pc[i] = &chk[i];
		}
		rc = txn_send(be, pc, nw, NULL, 0, &r, &lost);
	}
	for (size_t i = 0; !rc && i < nw; i++)
		if (w[i]->kind == KV_PUT) {
			rc = ec_get(be, w[i]->key, w[i]->klen, NULL, &ver);
			r = ver;
			break;
		}
	free(chk);
	free(pc);
	if (!rc) {
		nv_log(NV_INFO, NV_SUB_META,
		       "etcd %s: a transaction whose answer was lost had committed (revision %"
		       PRIu64 ")", be->name, r);
		*rev = r;
	}
	return rc == -ENOENT ? -ECANCELED : rc;
}

/* Bytes of a write in a request (keys and values, invariant 5). */
static size_t op_bytes(const struct ec_be *be, const struct kv_op *op)
{
	return be->plen + op->klen + op->vlen;
}

static int ec_commit(void *vbe, const struct kv_op *ops, size_t nops, uint64_t *rev)
{
	struct ec_be *be = vbe;
	const struct kv_op **w = NULL, **c = NULL;
	size_t nc = 0, nw = 0, bytes = 0, i = 0;
	uint64_t r = 0;
	bool lost = false;
	int rc;

	while (nc < nops && (ops[nc].kind == KV_CMP_VER || ops[nc].kind == KV_CMP_VAL))
		nc++;
	rc = fold_writes(ops, nc, nops, &w, &nw);
	if (rc)
		return rc;
	c = malloc((nc ? nc : 1) * sizeof(*c));
	if (!c) {
		free(w);
		return -ENOMEM;
	}
	for (size_t k = 0; k < nc; k++) {
		c[k] = &ops[k];
		bytes += op_bytes(be, &ops[k]);
	}
	for (size_t k = 0; k < nw; k++)
		bytes += op_bytes(be, w[k]);
	if (nc > EC_TXN_OPS || (nc && (nw > EC_TXN_OPS || bytes > EC_TXN_BYTES))) {
		nv_log(NV_WARN, NV_SUB_META,
		       "etcd %s: a transaction with %zu compares and %zu writes (%zu bytes) "
		       "exceeds etcd's limits (%d operations, %u bytes) and cannot be split",
		       be->name, nc, nw, bytes, EC_TXN_OPS, EC_TXN_BYTES);
		rc = -E2BIG;
	} else if (nc || nw <= EC_TXN_OPS) {
		if (bytes <= EC_TXN_BYTES || nw <= 1) {
			rc = txn_send(be, c, nc, w, nw, &r, &lost);
			if (rc == -ECANCELED && lost)
				rc = ec_commit_resolve(be, w, nw, &r);
			i = nw;
		}
	}
	/* No compares and too big: parts in order (kv.h "Splitting"). */
	while (!rc && i < nw) {
		size_t n = 0, b = 0;

		while (i + n < nw && n < EC_TXN_OPS &&
		       (n == 0 || b + op_bytes(be, w[i + n]) <= EC_TXN_BYTES))
			b += op_bytes(be, w[i + n++]);
		rc = txn_send(be, NULL, 0, w + i, n, &r, &lost);
		i += n;
	}
	free(w);
	free(c);
	if (!rc && rev)
		*rev = r;
	return rc;
}

/* ----------------------------------------------------------------------
 * Status, open, close
 */

static int ec_status(void *vbe, struct nv_buf *out)
{
	struct ec_be *be = vbe;
	int answered = 0, last = -ETIMEDOUT, rc;

	rc = nv_buf_printf(out, "metastore %s (etcd, %d member%s)\n", be->name, be->nmembers,
			   be->nmembers == 1 ? "" : "s");
	for (int i = 0; !rc && i < be->nmembers; i++) {
		json_t *req = json_object(), *resp = NULL;
		int crc = req ? ec_call_member(be, i, "maintenance/status", req, 2000, &resp)
			      : -ENOMEM;

		if (!crc) {
			uint64_t id = ec_u64(json_object_get(resp, "header"), "member_id");
			uint64_t leader = ec_u64(resp, "leader");
			json_t *ver = json_object_get(resp, "version");

			answered++;
			rc = nv_buf_printf(out, "  member %s: ok, etcd %s, %s, revision %" PRIu64 "\n",
					   be->members[i],
					   json_is_string(ver) ? json_string_value(ver) : "?",
					   id && id == leader ? "leader" : "follower",
					   ec_u64(json_object_get(resp, "header"), "revision"));
		} else {
			last = crc;
			rc = nv_buf_printf(out, "  member %s: unreachable (%s)\n", be->members[i],
					   strerror(-crc));
		}
		json_decref(req);
		json_decref(resp);
	}
	return rc ? rc : answered ? 0 : last;
}

static void ec_close(void *vbe)
{
	if (vbe)
		ec_be_free(vbe);
}

static const struct kv_backend_ops ec_ops = {
	.scheme = "etcd",
	.close = ec_close,
	.get = ec_get,
	.floor = ec_floor,
	.range = ec_range,
	.commit = ec_commit,
	.lease_grant = ec_lease_grant,
	.lease_keepalive = ec_lease_keepalive,
	.lease_revoke = ec_lease_revoke,
	.watch_start = ec_watch_start,
	.watch_stop = ec_watch_stop,
	.status = ec_status,
	.closing = ec_closing,
};

static void curl_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int etcd_kv_open(const char *url, struct kv **out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	bool https = !strncmp(url, "etcd+https://", 13);
	struct ec_be *be = calloc(1, sizeof(*be));
	struct nv_buf probe;
	uint64_t ver;
	int rc;

	if (!be)
		return -ENOMEM;
	pthread_once(&once, curl_once);
	pthread_mutex_init(&be->lock, NULL);
	rc = ec_url_parse(be, url, https);
	if (!rc) {
		/* The name is the URL without its options (they may name key
		 * files, never secrets, but keep log lines short). */
		be->name = strndup(url, strcspn(url, "?"));
		if (!be->name)
			rc = -ENOMEM;
	}
	if (rc) {
		ec_be_free(be);
		return rc;
	}
	/* First contact: any answer (the prefix's own key is normally
	 * absent) proves a member, TLS and auth work. */
	nv_buf_init(&probe, KV_VAL_MAX);
	rc = ec_get(be, "", 0, &probe, &ver);
	nv_buf_free(&probe);
	if (rc && rc != -ENOENT) {
		nv_log(NV_ERR, NV_SUB_META, "etcd %s: cannot open: %s", be->name, strerror(-rc));
		ec_be_free(be);
		return rc;
	}
	rc = kv_wrap(&ec_ops, be, be->name, out);
	if (!rc)
		nv_log(NV_INFO, NV_SUB_META, "etcd %s: opened (%d member%s, prefix %s)",
		       kv_name(*out), be->nmembers, be->nmembers == 1 ? "" : "s", be->prefix);
	return rc;
}

const struct kv_scheme etcd_kv_scheme = {
	.url = { .prefix = "etcd://", .usage = "etcd://HOST:PORT[;HOST:PORT...]/PREFIX" },
	.open = etcd_kv_open,
};

const struct kv_scheme etcd_https_kv_scheme = {
	.url = { .prefix = "etcd+https://",
		 .usage = "etcd+https://HOST:PORT[;...]/PREFIX?cacert=..." },
	.open = etcd_kv_open,
};
