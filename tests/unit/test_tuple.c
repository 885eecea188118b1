/*
 * test_tuple.c - unit tests for meta/tuple.c.
 *
 * Pins tuple.h invariant 1 (byte order of encodings equals element-wise
 * order) with a few thousand random tuples whose strings hold 0x00 and
 * 0xFF bytes and are prefixes of each other, the prefix-end bound, and
 * invariant 2 (hostile input never decodes out of bounds: every input is
 * copied into a heap block of exactly its size, so valgrind or ASan would
 * see a stray read).
 */
#include "config.h"
#include "meta/tuple.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define NTUPLES 3000
#define STR_MAX 8

/* Deterministic xorshift64*, so a failure reproduces. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* One element: a string (bytes, n) or a u64. */
struct elem {
	int is_str;
	uint8_t s[STR_MAX];
	size_t n;
	uint64_t v;
};

/* A tuple of up to 3 elements plus its encoding. */
struct tup {
	struct elem e[3];
	int ne;
	uint8_t *enc; /* owned */
	size_t enclen;
};

/* Strings from a tiny alphabet that includes the escape-relevant bytes,
 * so that prefixes and 0x00/0xFF runs are common. */
static void rand_str(struct elem *e)
{
	static const uint8_t alpha[] = { 0x00, 0x01, 0x02, 0x15, 'a', 0xFE, 0xFF };

	e->is_str = 1;
	e->n = rnd() % (STR_MAX + 1);
	for (size_t i = 0; i < e->n; i++)
		e->s[i] = alpha[rnd() % sizeof(alpha)];
}

/* u64s near the edges and byte boundaries, where byte order is easy to
 * get wrong. */
static void rand_u64(struct elem *e)
{
	static const uint64_t edges[] = { 0, 1, 0xFF, 0x100, 0xFFFF, 0x10000,
					  0x7FFFFFFFFFFFFFFFull,
					  0x8000000000000000ull, UINT64_MAX - 1,
					  UINT64_MAX };

	e->is_str = 0;
	e->v = (rnd() & 1) ? edges[rnd() % 10] : rnd() >> (rnd() % 64);
}

static void encode(struct tup *t)
{
	struct nv_buf b;

	nv_buf_init(&b, 1024);
	for (int i = 0; i < t->ne; i++) {
		if (t->e[i].is_str)
			assert_int_equal(nv_tup_add_strn(&b, t->e[i].s, t->e[i].n), 0);
		else
			assert_int_equal(nv_tup_add_u64(&b, t->e[i].v), 0);
	}
	t->enc = nv_buf_steal(&b, &t->enclen);
	if (!t->enc) /* the empty tuple */
		t->enc = calloc(1, 1);
	assert_non_null(t->enc);
}

static int elem_cmp(const struct elem *a, const struct elem *b)
{
	if (a->is_str) {
		size_t n = a->n < b->n ? a->n : b->n;
		int c = n ? memcmp(a->s, b->s, n) : 0;

		if (c)
			return c < 0 ? -1 : 1;
		return a->n < b->n ? -1 : a->n > b->n;
	}
	return a->v < b->v ? -1 : a->v > b->v;
}

static int tup_cmp(const struct tup *a, const struct tup *b)
{
	for (int i = 0; i < a->ne && i < b->ne; i++) {
		int c = elem_cmp(&a->e[i], &b->e[i]);

		if (c)
			return c;
	}
	return a->ne < b->ne ? -1 : a->ne > b->ne;
}

/* kv.h invariant 3: memcmp, shorter first on a common prefix. */
static int bytes_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
	size_t n = an < bn ? an : bn;
	int c = n ? memcmp(a, b, n) : 0;

	if (c)
		return c < 0 ? -1 : 1;
	return an < bn ? -1 : an > bn;
}

static int enc_qsort_cmp(const void *pa, const void *pb)
{
	const struct tup *a = pa, *b = pb;

	return bytes_cmp(a->enc, a->enclen, b->enc, b->enclen);
}

/* shape 0: (str, u64, u64); shape 1: (str, str) */
static struct tup *make_tuples(int shape, size_t n)
{
	struct tup *t = calloc(n, sizeof(*t));

	assert_non_null(t);
	for (size_t i = 0; i < n; i++) {
		/* Every 4th tuple shares its string with an earlier one, so
		 * later elements decide the order often. */
		if (i >= 4 && i % 4 == 0)
			t[i].e[0] = t[rnd() % i].e[0];
		else
			rand_str(&t[i].e[0]);
		if (shape == 0) {
			rand_u64(&t[i].e[1]);
			rand_u64(&t[i].e[2]);
			t[i].ne = 3;
		} else {
			rand_str(&t[i].e[1]);
			t[i].ne = 2;
		}
		encode(&t[i]);
	}
	return t;
}

static void free_tuples(struct tup *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(t[i].enc);
	free(t);
}

/* Decode t->enc back and compare with t's elements. */
static void check_round_trip(const struct tup *t)
{
	uint8_t *copy = malloc(t->enclen);
	struct nv_tup_rd r;

	assert_non_null(copy);
	memcpy(copy, t->enc, t->enclen);
	nv_tup_rd_init(&r, copy, t->enclen);
	for (int i = 0; i < t->ne; i++) {
		if (t->e[i].is_str) {
			char s[STR_MAX + 1];
			size_t n = 999;

			assert_int_equal(nv_tup_get_str(&r, s, sizeof(s), &n), 0);
			assert_int_equal(n, t->e[i].n);
			assert_memory_equal(s, t->e[i].s, n);
			assert_int_equal(s[n], 0);
		} else {
			uint64_t v = 0;

			assert_int_equal(nv_tup_get_u64(&r, &v), 0);
			assert_true(v == t->e[i].v);
		}
	}
	assert_true(nv_tup_rd_end(&r));
	free(copy);
}

static void test_tuple_round_trip(void **state)
{
	struct tup *t;

	(void)state;
	for (int shape = 0; shape < 2; shape++) {
		t = make_tuples(shape, NTUPLES);
		for (size_t i = 0; i < NTUPLES; i++)
			check_round_trip(&t[i]);
		free_tuples(t, NTUPLES);
	}
}

static void test_tuple_known_encodings(void **state)
{
	static const uint8_t want[] = {
		0x02, 'a', 0x00, 0xFF, 'b', 0x00,                    /* "a\0b" */
		0x15, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* u64 */
		0x02, 0x00,                                           /* "" */
		0xFF,                                                 /* end */
	};
	struct nv_buf b;

	(void)state;
	nv_buf_init(&b, 64);
	assert_int_equal(nv_tup_add_strn(&b, "a\0b", 3), 0);
	assert_int_equal(nv_tup_add_u64(&b, 0x0102030405060708ull), 0);
	assert_int_equal(nv_tup_add_str(&b, ""), 0);
	assert_int_equal(nv_tup_prefix_end(&b), 0);
	assert_int_equal(b.len, sizeof(want));
	assert_memory_equal(b.ptr, want, sizeof(want));
	nv_buf_free(&b);
}

/* An append that does not fit leaves the buffer unchanged. */
static void test_tuple_append_atomic(void **state)
{
	struct nv_buf b;

	(void)state;
	nv_buf_init(&b, 10);
	assert_int_equal(nv_tup_add_u64(&b, 7), 0);
	assert_int_equal(nv_tup_add_u64(&b, 7), -E2BIG);
	assert_int_equal(b.len, 9);
	assert_int_equal(nv_tup_add_strn(&b, "\0", 1), -E2BIG); /* needs 4 */
	assert_int_equal(b.len, 9);
	assert_int_equal(nv_tup_prefix_end(&b), 0);
	assert_int_equal(b.len, 10);
	nv_buf_free(&b);
}

/* Invariant 1 by sorting: sort by encoded bytes, then the element-wise
 * order must be non-decreasing, with equal encodings only for equal
 * tuples. */
static void test_tuple_order_sorted(void **state)
{
	(void)state;
	for (int shape = 0; shape < 2; shape++) {
		struct tup *t = make_tuples(shape, NTUPLES);

		qsort(t, NTUPLES, sizeof(*t), enc_qsort_cmp);
		for (size_t i = 1; i < NTUPLES; i++) {
			int ce = bytes_cmp(t[i - 1].enc, t[i - 1].enclen, t[i].enc,
					   t[i].enclen);
			int ct = tup_cmp(&t[i - 1], &t[i]);

			assert_true(ce <= 0);
			assert_int_equal(ce, ct);
		}
		free_tuples(t, NTUPLES);
	}
}

/* Invariant 1 pairwise on random pairs (catches non-transitive bugs the
 * adjacent check could miss). */
static void test_tuple_order_pairs(void **state)
{
	(void)state;
	for (int shape = 0; shape < 2; shape++) {
		struct tup *t = make_tuples(shape, NTUPLES);

		for (int k = 0; k < 20000; k++) {
			const struct tup *a = &t[rnd() % NTUPLES];
			const struct tup *b = &t[rnd() % NTUPLES];

			assert_int_equal(bytes_cmp(a->enc, a->enclen, b->enc, b->enclen),
					 tup_cmp(a, b));
		}
		free_tuples(t, NTUPLES);
	}
}

/* Strings that are prefixes of each other, by hand. */
static void test_tuple_order_prefixes(void **state)
{
	static const struct {
		const char *s;
		size_t n;
	} in[] = { /* ascending */
		{ "", 0 },      { "\0", 1 },      { "\0\0", 2 },  { "\0\x01", 2 },
		{ "\0\xff", 2 }, { "\x01", 1 },    { "a", 1 },     { "a\0", 2 },
		{ "a\0a", 3 },  { "a\x01", 2 },    { "ab", 2 },    { "\xff", 1 },
		{ "\xff\0", 2 }, { "\xff\xff", 2 },
	};
	struct nv_buf prev, cur;

	(void)state;
	nv_buf_init(&prev, 64);
	nv_buf_init(&cur, 64);
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		nv_buf_reset(&cur);
		assert_int_equal(nv_tup_add_strn(&cur, in[i].s, in[i].n), 0);
		assert_int_equal(nv_tup_add_u64(&cur, 0), 0);
		if (i > 0)
			assert_true(bytes_cmp(prev.ptr, prev.len, cur.ptr, cur.len) < 0);
		nv_buf_reset(&prev);
		assert_int_equal(nv_buf_add(&prev, cur.ptr, cur.len), 0);
	}
	nv_buf_free(&prev);
	nv_buf_free(&cur);
}

/* For a prefix P of k whole elements of tuple t, and every tuple u:
 * P <= enc(u) < P+0xFF exactly when u's first k elements equal t's. */
static void test_tuple_prefix_end_bounds(void **state)
{
	(void)state;
	for (int shape = 0; shape < 2; shape++) {
		struct tup *t = make_tuples(shape, 600);

		for (size_t i = 0; i < 600; i += 7) {
			for (int k = 0; k <= t[i].ne; k++) {
				struct tup pre = t[i];
				struct nv_buf lo, hi;

				pre.ne = k;
				encode(&pre);
				nv_buf_init(&lo, 1024);
				nv_buf_init(&hi, 1024);
				assert_int_equal(nv_buf_add(&lo, pre.enc, pre.enclen), 0);
				assert_int_equal(nv_buf_add(&hi, pre.enc, pre.enclen), 0);
				assert_int_equal(nv_tup_prefix_end(&hi), 0);
				for (size_t j = 0; j < 600; j++) {
					const struct tup *u = &t[j];
					int in = bytes_cmp(lo.ptr, lo.len, u->enc, u->enclen) <= 0 &&
						 bytes_cmp(u->enc, u->enclen, hi.ptr, hi.len) < 0;
					int ext = 1;

					for (int e = 0; e < k; e++)
						if (elem_cmp(&pre.e[e], &u->e[e]))
							ext = 0;
					assert_int_equal(in, ext);
				}
				free(pre.enc);
				nv_buf_free(&lo);
				nv_buf_free(&hi);
			}
		}
		free_tuples(t, 600);
	}
}

/* Decode a fixed hostile input from an exact-size heap copy. */
static int dec_str(const void *p, size_t len, size_t cap, size_t *off_after)
{
	uint8_t *copy = malloc(len ? len : 1);
	char *out = cap ? malloc(cap) : NULL;
	struct nv_tup_rd r;
	int rc;

	assert_non_null(copy);
	if (len)
		memcpy(copy, p, len);
	nv_tup_rd_init(&r, copy, len);
	rc = nv_tup_get_str(&r, out, cap, NULL);
	*off_after = r.off;
	free(copy);
	free(out);
	return rc;
}

static int dec_u64(const void *p, size_t len, size_t *off_after)
{
	uint8_t *copy = malloc(len ? len : 1);
	struct nv_tup_rd r;
	uint64_t v;
	int rc;

	assert_non_null(copy);
	if (len)
		memcpy(copy, p, len);
	nv_tup_rd_init(&r, copy, len);
	rc = nv_tup_get_u64(&r, &v);
	*off_after = r.off;
	free(copy);
	return rc;
}

static void test_tuple_decode_hostile_cases(void **state)
{
	size_t off;

	(void)state;
	/* empty input */
	assert_int_equal(dec_str("", 0, 16, &off), -EBADMSG);
	assert_int_equal(dec_u64("", 0, &off), -EBADMSG);
	/* bad tags, and each type's tag given to the other decoder */
	assert_int_equal(dec_str("\x03" "a\0", 3, 16, &off), -EBADMSG);
	assert_int_equal(dec_u64("\x03" "12345678", 9, &off), -EBADMSG);
	assert_int_equal(dec_str("\x15" "12345678", 9, 16, &off), -EBADMSG);
	assert_int_equal(dec_u64("\x02" "1234567\0", 9, &off), -EBADMSG);
	assert_int_equal(dec_str("\xff", 1, 16, &off), -EBADMSG);
	/* truncated u64 */
	assert_int_equal(dec_u64("\x15" "1234567", 8, &off), -EBADMSG);
	assert_int_equal(off, 0);
	assert_int_equal(dec_u64("\x15" "12345678", 9, &off), 0);
	assert_int_equal(off, 9);
	/* unterminated strings */
	assert_int_equal(dec_str("\x02", 1, 16, &off), -EBADMSG);
	assert_int_equal(dec_str("\x02" "abc", 4, 16, &off), -EBADMSG);
	assert_int_equal(dec_str("\x02" "a\0\xff", 4, 16, &off), -EBADMSG);
	assert_int_equal(off, 0);
	/* 0x00 followed by neither 0xFF, a tag nor the end */
	assert_int_equal(dec_str("\x02" "a\0\x05", 4, 16, &off), -EBADMSG);
	assert_int_equal(dec_str("\x02" "a\0\0", 4, 16, &off), -EBADMSG);
	assert_int_equal(dec_str("\x02\0\xfe", 3, 16, &off), -EBADMSG);
	/* ...but followed by a tag it ends the string */
	assert_int_equal(dec_str("\x02" "a\0\x15", 4, 16, &off), 0);
	assert_int_equal(off, 3);
	assert_int_equal(dec_str("\x02\0", 2, 16, &off), 0);
	assert_int_equal(off, 2);
	/* capacity: "abc" needs 4 bytes with its NUL */
	assert_int_equal(dec_str("\x02" "abc\0", 5, 3, &off), -ENAMETOOLONG);
	assert_int_equal(off, 0);
	assert_int_equal(dec_str("\x02" "abc\0", 5, 4, &off), 0);
	assert_int_equal(dec_str("\x02\0", 2, 0, &off), -ENAMETOOLONG);
	assert_int_equal(dec_str("\x02\0", 2, 1, &off), 0);
	/* escaped zeros count once each */
	assert_int_equal(dec_str("\x02\0\xff\0\xff\0", 6, 2, &off), -ENAMETOOLONG);
	assert_int_equal(dec_str("\x02\0\xff\0\xff\0", 6, 3, &off), 0);
	/* malformed wins over too long */
	assert_int_equal(dec_str("\x02" "abcdef", 7, 2, &off), -EBADMSG);
}

/* Every truncation of valid keys fails cleanly or decodes a prefix of the
 * elements; nothing reads past the end. */
static void test_tuple_decode_truncations(void **state)
{
	struct tup *t;

	(void)state;
	for (int shape = 0; shape < 2; shape++) {
		t = make_tuples(shape, 200);
		for (size_t i = 0; i < 200; i++) {
			for (size_t cut = 0; cut < t[i].enclen; cut++) {
				uint8_t *copy = malloc(cut ? cut : 1);
				struct nv_tup_rd r;
				int e, rc = 0;

				memcpy(copy, t[i].enc, cut);
				nv_tup_rd_init(&r, copy, cut);
				for (e = 0; e < t[i].ne && !rc; e++) {
					char s[STR_MAX + 1];
					uint64_t v;

					rc = t[i].e[e].is_str ?
						     nv_tup_get_str(&r, s, sizeof(s), NULL) :
						     nv_tup_get_u64(&r, &v);
				}
				/* A cut key may still decode (cutting "a\0" after
				 * its 0x00 leaves "a"); what must hold is that
				 * the decoder stayed inside the cut and that a
				 * failure names a malformed key. */
				assert_true(rc == 0 || rc == -EBADMSG);
				assert_true(r.off <= cut);
				free(copy);
			}
		}
		free_tuples(t, 200);
	}
}

/* Random bytes, biased towards tags and escapes, through both decoders
 * until neither makes progress. */
static void test_tuple_decode_random(void **state)
{
	static const uint8_t alpha[] = { 0x00, 0x02, 0x15, 0xFF, 'x', 0x01 };

	(void)state;
	for (int k = 0; k < 20000; k++) {
		size_t len = rnd() % 24;
		uint8_t *p = malloc(len ? len : 1);
		struct nv_tup_rd r;

		for (size_t i = 0; i < len; i++)
			p[i] = alpha[rnd() % sizeof(alpha)];
		nv_tup_rd_init(&r, p, len);
		for (;;) {
			char s[8];
			uint64_t v;
			size_t before = r.off;
			int rc = nv_tup_get_str(&r, s, sizeof(s), NULL);

			if (rc == 0) {
				assert_true(r.off > before);
				continue;
			}
			assert_true(rc == -EBADMSG || rc == -ENAMETOOLONG);
			assert_int_equal(r.off, before);
			if (nv_tup_get_u64(&r, &v) == 0) {
				assert_int_equal(r.off, before + 9);
				continue;
			}
			assert_int_equal(r.off, before);
			break;
		}
		assert_true(r.off <= len);
		free(p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tuple_round_trip),
		cmocka_unit_test(test_tuple_known_encodings),
		cmocka_unit_test(test_tuple_append_atomic),
		cmocka_unit_test(test_tuple_order_sorted),
		cmocka_unit_test(test_tuple_order_pairs),
		cmocka_unit_test(test_tuple_order_prefixes),
		cmocka_unit_test(test_tuple_prefix_end_bounds),
		cmocka_unit_test(test_tuple_decode_hostile_cases),
		cmocka_unit_test(test_tuple_decode_truncations),
		cmocka_unit_test(test_tuple_decode_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
