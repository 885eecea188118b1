/*
 * kvbench.c - the metastore side of bench/RESULTS.md, on any kv_open() URL.
 *
 * For: bench/metastore.sh, which runs it on SQLite, one etcd member and
 * three.  Not for: correctness (tests/unit/test_kv.c, test_rows.c).
 *
 *   kvbench URL [REFS]   (REFS span refs of one stream, default 100000)
 *
 * Prints key=value lines:
 *   load_s          writing REFS one-record span refs (absorb's batching:
 *                   REF_BATCH refs per unconditional transaction)
 *   floor_*_ms      meta_ref_floor_seq() at random seqs (the windowed
 *                   lookup every cold read makes), and the same floor as
 *                   one unbounded kv_floor() over the stream's refs (what
 *                   it cost before the windows), mean and p99
 *   point_*_ms      kv_get() of one ref row (a cold read's point read)
 *   stream_load_at_N_*_ms  what a stream load asks the metastore
 *                   (meta_ref_last() + meta_ref_settled_end(), through
 *                   the ref hints) with N refs written, N = 1000 and
 *                   REFS: flat in N
 *   stream_load_scan_*_ms  the same two answers by the scans they
 *                   replaced (one unbounded floor over the stream, one
 *                   page of the listing from its start), at REFS
 *   batch_*         one absorb batch of 8 streams: the refs transaction
 *                   and the checkpoint CAS (2 metastore requests), latency
 * Latencies are CLOCK_MONOTONIC per call, on a shared machine.
 */
#include "config.h"
#include "meta/keys.h"
#include "meta/kv.h"
#include "meta/refs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REF_BATCH 60
#define STREAM 1

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *name, double *v, int n)
{
	double sum = 0;

	for (int i = 0; i < n; i++)
		sum += v[i];
	qsort(v, (size_t)n, sizeof(*v), dcmp);
	printf("%s_mean_ms=%.3f\n%s_p50_ms=%.3f\n%s_p99_ms=%.3f\n", name, sum / n, name,
	       v[n / 2], name, v[(n * 99) / 100]);
}

static void fill_ref(struct meta_ref *r, uint64_t stream, uint64_t seq)
{
	struct meta_ref_slot sl = { seq, seq, seq * 100, 0, 96 };

	meta_ref_clear(r);
	r->stream_id = stream;
	r->kind = META_REF_SPAN;
	r->first_seq = seq;
	r->end_seq = seq + 1;
	r->first_byte = seq * 100;
	r->end_byte = seq * 100 + 100;
	r->cls = 0;
	strcpy(r->star, "bench");
	r->epoch = 1;
	if (meta_ref_add_slot(r, &sl))
		abort(); /* ENOMEM in a benchmark driver */
}

/* Write refs [from, n) of STREAM. */
static int load(struct kv *kv, uint64_t from, uint64_t n)
{
	struct meta_ref r;
	int rc = 0;

	meta_ref_init(&r);
	for (uint64_t s = from; s < n && !rc; s += REF_BATCH) {
		struct kv_txn *t = kv_txn_new();

		for (uint64_t i = s; i < n && i < s + REF_BATCH && !rc; i++) {
			fill_ref(&r, STREAM, i);
			rc = meta_ref_txn_put(t, &r);
		}
		if (!rc)
			rc = kv_txn_commit(kv, t, NULL);
		kv_txn_free(t);
	}
	meta_ref_clear(&r);
	return rc;
}

static int floor_unbounded(struct kv *kv, uint64_t pos)
{
	struct nv_buf k, lo, v;
	int rc;

	nv_buf_init(&k, KV_KEY_MAX);
	nv_buf_init(&lo, KV_KEY_MAX);
	nv_buf_init(&v, KV_VAL_MAX);
	rc = key_ref(&k, STREAM, pos);
	if (!rc)
		rc = key_refs_of(&lo, STREAM);
	if (!rc)
		rc = kv_floor(kv, k.ptr, k.len, lo.ptr, lo.len, NULL, &v, NULL);
	nv_buf_free(&k);
	nv_buf_free(&lo);
	nv_buf_free(&v);
	return rc;
}

static int noop_ref(void *arg, const struct meta_ref *r)
{
	(void)arg, (void)r;
	return 1;
}

/* A stream load's metastore reads, NL times: through the hints, or (scan)
 * the way they were answered before the hints. */
static int stream_loads(struct kv *kv, bool scan, uint64_t n, const char *name)
{
	enum { NL = 50 };
	double lat[NL], last[NL], settled[NL];
	char part[96];
	int rc = 0;

	for (int i = 0; i < NL && !rc; i++) {
		struct meta_ref r;
		uint64_t seq, byte;
		double t0 = now_ms(), t1;

		meta_ref_init(&r);
		if (scan) {
			rc = floor_unbounded(kv, n);
			t1 = now_ms();
			if (!rc)
				rc = meta_ref_list(kv, STREAM, 0, 1, noop_ref, NULL);
		} else {
			rc = meta_ref_last(kv, STREAM, &r);
			if (!rc && r.end_seq != n)
				rc = -EBADMSG;
			t1 = now_ms();
			if (!rc)
				rc = meta_ref_settled_end(kv, STREAM, 0, &seq, &byte);
		}
		lat[i] = now_ms() - t0;
		last[i] = t1 - t0;
		settled[i] = lat[i] - last[i];
		meta_ref_clear(&r);
	}
	if (!rc) {
		report(name, lat, NL);
		snprintf(part, sizeof(part), "%s_last", name);
		report(part, last, NL);
		snprintf(part, sizeof(part), "%s_settled", name);
		report(part, settled, NL);
	}
	return rc;
}

/* One absorb-like batch: 8 streams' refs, then the checkpoint CAS. */
static int batch(struct kv *kv, uint64_t round)
{
	struct meta_ref r;
	struct kv_txn *t = kv_txn_new();
	uint64_t ver = 0;
	char val[64];
	int rc = 0;

	meta_ref_init(&r);
	for (uint64_t s = 0; s < 8 && !rc; s++) {
		fill_ref(&r, 100 + s, round);
		rc = meta_ref_txn_put(t, &r);
	}
	if (!rc)
		rc = kv_txn_commit(kv, t, NULL);
	kv_txn_free(t);
	meta_ref_clear(&r);
	if (!rc) {
		rc = kv_get(kv, "bench-chain", 11, NULL, &ver);
		if (rc == -ENOENT)
			rc = 0, ver = 0;
	}
	if (!rc) {
		t = kv_txn_new();
		snprintf(val, sizeof(val), "checkpoint %llu", (unsigned long long)round);
		rc = kv_txn_cmp_ver(t, "bench-chain", 11, ver);
		if (!rc)
			rc = kv_txn_put(t, "bench-chain", 11, val, strlen(val));
		if (!rc)
			rc = kv_txn_commit(kv, t, NULL);
		kv_txn_free(t);
	}
	return rc;
}

int main(int argc, char **argv)
{
	enum { NF = 500, NU = 30, NP = 500, NB = 200 };
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000, have = 0;
	static double lat[NP > NF ? NP : NF];
	struct meta_ref r;
	struct kv *kv;
	double t0;
	int rc;

	if (argc < 2) {
		fprintf(stderr, "usage: %s URL [REFS]\n", argv[0]);
		return 2;
	}
	if (kv_open(argv[1], &kv))
		return 1;
	meta_ref_init(&r);
	if (meta_ref_last(kv, STREAM, &r) == 0)
		have = r.end_seq;
	t0 = now_ms();
	rc = load(kv, have, n < 1000 ? n : 1000);
	if (!rc && n > 1000 && have <= 1000)
		rc = stream_loads(kv, false, 1000, "stream_load_at_1000");
	if (!rc)
		rc = load(kv, have > 1000 ? have : 1000, n);
	printf("refs=%llu\nload_s=%.2f\n", (unsigned long long)n, (now_ms() - t0) / 1e3);
	if (!rc) {
		char name[64];

		snprintf(name, sizeof(name), "stream_load_at_%llu", (unsigned long long)n);
		rc = stream_loads(kv, false, n, name);
	}
	if (!rc)
		rc = stream_loads(kv, true, n, "stream_load_scan");
	srand(42);
	for (int i = 0; !rc && i < NF; i++) {
		uint64_t pos = (uint64_t)rand() % n;

		t0 = now_ms();
		rc = meta_ref_floor_seq(kv, STREAM, pos, &r);
		lat[i] = now_ms() - t0;
		if (!rc && r.first_seq != pos)
			rc = -EBADMSG;
	}
	if (!rc)
		report("floor_windowed", lat, NF);
	for (int i = 0; !rc && i < NU; i++) {
		t0 = now_ms();
		rc = floor_unbounded(kv, (uint64_t)rand() % n);
		lat[i] = now_ms() - t0;
	}
	if (!rc)
		report("floor_unbounded", lat, NU);
	for (int i = 0; !rc && i < NP; i++) {
		struct nv_buf k, v;

		nv_buf_init(&k, KV_KEY_MAX);
		nv_buf_init(&v, KV_VAL_MAX);
		rc = key_ref(&k, STREAM, (uint64_t)rand() % n);
		t0 = now_ms();
		if (!rc)
			rc = kv_get(kv, k.ptr, k.len, &v, NULL);
		lat[i] = now_ms() - t0;
		nv_buf_free(&k);
		nv_buf_free(&v);
	}
	if (!rc)
		report("point", lat, NP);
	for (int i = 0; !rc && i < NB; i++) {
		t0 = now_ms();
		rc = batch(kv, (uint64_t)i);
		lat[i] = now_ms() - t0;
	}
	if (!rc) {
		printf("batch_requests=3 (refs txn, chain read, checkpoint CAS)\n");
		report("batch", lat, NB);
	}
	meta_ref_clear(&r);
	kv_close(kv);
	if (rc)
		fprintf(stderr, "kvbench: %s\n", strerror(-rc));
	return rc ? 1 : 0;
}
