/*
 * fuzz_tuple.c - the metastore tuple-key decoder (meta/tuple.h:
 * nv_tup_get_u64, nv_tup_get_str).
 *
 * Input: u8 cap | u8 split | bytes.  The bytes are cut at split % (len
 * + 1) into two keys a and b.
 *
 * Checks, for each key:
 *  - decoding element by element (a u64 where the tag says so, else a
 *    string) either consumes the key or stops at -EBADMSG; a failed call
 *    leaves the reader where it was (tuple.c invariant 2); a string is
 *    NUL-terminated at its reported length.
 *  - canonical form (tuple.h invariant 2, tuple.c invariant 4): a key
 *    that decodes completely re-encodes, with nv_tup_add_u64 and
 *    nv_tup_add_strn, to exactly its own bytes.
 *  - a string buffer of cap + 1 bytes gives -ENAMETOOLONG exactly when
 *    the string is longer than cap, and the reader does not move.
 * And for the pair: when both decode completely and their element types
 * agree position by position, the byte order of the keys is the
 * element-wise order of the tuples (tuple.h invariant 1).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "meta/kv.h"
#include "meta/tuple.h"
#include "src/base/buf.h"
#include "tests/fuzz/fuzz.h"

/* Longest input key: twice the metastore's limit, to look past it.  A
 * string element costs a tag and a terminator besides its unescaped
 * bytes, so all strings of a key, each with a NUL, fit in KEY_MAX + 1
 * bytes, and a key holds at most KEY_MAX / 2 elements. */
#define KEY_MAX (2 * KV_KEY_MAX)
#define ELEMS_MAX (KEY_MAX / 2 + 1)

struct elem {
	uint8_t tag;
	uint64_t u;
	const char *s; /* in the tuple's arena */
	size_t n;
};

struct tuple {
	struct elem e[ELEMS_MAX];
	size_t n;
	bool complete; /* every byte consumed */
	char arena[KEY_MAX + 1];
};

static void decode(const uint8_t *p, size_t len, unsigned cap, struct tuple *t)
{
	struct nv_tup_rd r;
	char small[256];
	size_t used = 0;

	t->n = 0;
	t->complete = false;
	nv_tup_rd_init(&r, p, len);
	while (!nv_tup_rd_end(&r) && t->n < ELEMS_MAX) {
		struct elem *e = &t->e[t->n];
		size_t before = r.off, sn = 0;
		char *s = t->arena + used;
		int rc, small_rc;

		e->s = NULL;
		rc = nv_tup_get_u64(&r, &e->u);
		FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
		if (rc == 0) {
			FUZZ_ASSERT(r.off == before + 9 && p[before] == NV_TUP_U64);
			e->tag = NV_TUP_U64;
			t->n++;
			continue;
		}
		FUZZ_ASSERT(r.off == before);

		/* The small buffer first: too long leaves the reader alone. */
		rc = small_rc = nv_tup_get_str(&r, small, cap + 1, &sn);
		FUZZ_ASSERT(rc == 0 || rc == -EBADMSG || rc == -ENAMETOOLONG);
		if (rc == 0) {
			FUZZ_ASSERT(sn <= cap && small[sn] == 0);
			r.off = before; /* decode it again below, with room */
		} else {
			FUZZ_ASSERT(r.off == before);
		}

		rc = nv_tup_get_str(&r, s, sizeof(t->arena) - used, &e->n);
		FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
		if (rc) {
			FUZZ_ASSERT(r.off == before && small_rc == -EBADMSG);
			return;
		}
		FUZZ_ASSERT(p[before] == NV_TUP_STR && r.off >= before + 2);
		FUZZ_ASSERT(e->n + 1 <= r.off - before - 1 && s[e->n] == 0);
		/* The small-buffer call agreed: too long iff longer than cap. */
		if (e->n > cap)
			FUZZ_ASSERT(small_rc == -ENAMETOOLONG);
		else
			FUZZ_ASSERT(small_rc == 0 && sn == e->n && !memcmp(small, s, sn));
		e->s = s;
		used += e->n + 1;
		e->tag = NV_TUP_STR;
		t->n++;
	}
	t->complete = nv_tup_rd_end(&r);
}

static void check_canonical(const uint8_t *p, size_t len, const struct tuple *t)
{
	struct nv_buf b;

	if (!t->complete)
		return;
	nv_buf_init(&b, SIZE_MAX);
	for (size_t i = 0; i < t->n; i++) {
		const struct elem *e = &t->e[i];

		if (e->tag == NV_TUP_U64)
			FUZZ_ASSERT(nv_tup_add_u64(&b, e->u) == 0);
		else
			FUZZ_ASSERT(nv_tup_add_strn(&b, e->s, e->n) == 0);
	}
	FUZZ_ASSERT(b.len == len);
	FUZZ_ASSERT(len == 0 || !memcmp(b.ptr, p, len));
	nv_buf_free(&b);
}

static int sign(long v)
{
	return (v > 0) - (v < 0);
}

static int elem_cmp(const struct elem *a, const struct elem *b)
{
	int c;

	if (a->tag == NV_TUP_U64)
		return (a->u > b->u) - (a->u < b->u);
	c = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
	if (c)
		return sign(c);
	return (a->n > b->n) - (a->n < b->n);
}

static void check_order(const uint8_t *a, size_t alen, const struct tuple *ta,
			const uint8_t *b, size_t blen, const struct tuple *tb)
{
	size_t common = ta->n < tb->n ? ta->n : tb->n;
	int want = 0, got;

	if (!ta->complete || !tb->complete)
		return;
	for (size_t i = 0; i < common; i++)
		if (ta->e[i].tag != tb->e[i].tag)
			return; /* invariant 1 compares tuples of the same types */
	for (size_t i = 0; i < common && !want; i++)
		want = elem_cmp(&ta->e[i], &tb->e[i]);
	if (!want)
		want = (ta->n > tb->n) - (ta->n < tb->n); /* a prefix sorts first */
	got = memcmp(a, b, alen < blen ? alen : blen);
	got = got ? sign(got) : (alen > blen) - (alen < blen);
	FUZZ_ASSERT(want == got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct tuple ta, tb; /* large: off the stack */
	struct fuzz_in in;
	const uint8_t *rest;
	unsigned cap, split;
	size_t len;

	fuzz_quiet();
	fuzz_in_init(&in, data, size);
	cap = fuzz_u8(&in);
	split = fuzz_u8(&in);
	rest = fuzz_rest(&in, &len);
	if (len > KEY_MAX)
		return 0;
	split %= (unsigned)len + 1;

	decode(rest, split, cap, &ta);
	check_canonical(rest, split, &ta);
	decode(rest + split, len - split, cap, &tb);
	check_canonical(rest + split, len - split, &tb);
	check_order(rest, split, &ta, rest + split, len - split, &tb);
	return 0;
}
