/*
 * fuzz_row_streams.c - the stream and bucket row codecs (meta/streams.h:
 * meta_stream_decode, meta_bucket_decode).
 *
 * Input: u8 which | ...
 *   which even: the stream row value.
 *   which odd:  u8 name length L | L bytes of bucket name (the row's key
 *               part; cut at a NUL, as a C string would be) | the bucket
 *               row value.
 *
 * Checks: the decoders answer 0 or -EBADMSG; a decoded row satisfies the
 * field rules (class known; bucket and stream names non-empty, without
 * '/', NUL-terminated inside their arrays; a bucket's name is the key's)
 * and re-encodes to exactly the input (the formats are canonical: one
 * value per row).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "meta/streams.h"
#include "src/base/buf.h"
#include "tests/fuzz/fuzz.h"

/* A current (v2, or v3 with a durable override) row re-encodes to the
 * same bytes; an old (v1) row, which encodes as v2, to a row that
 * decodes to the same value (same, sizeof(same), from decode: decode
 * zeroes the whole struct first). */
static void check_reencode(int rc, struct nv_buf *b, const uint8_t *p, size_t n,
			   const void *same, size_t len, int (*redecode)(struct nv_buf *, void *))
{
	uint8_t again[sizeof(struct meta_stream) > sizeof(struct meta_bucket)
			      ? sizeof(struct meta_stream) : sizeof(struct meta_bucket)];

	FUZZ_ASSERT(rc == 0);
	if (n > 0 && p[0] == 1) {
		FUZZ_ASSERT(b->len > n && redecode(b, again) == 0);
		FUZZ_ASSERT(!memcmp(again, same, len));
		return;
	}
	FUZZ_ASSERT(b->len == n && (n == 0 || !memcmp(b->ptr, p, n)));
}

static const char *redecode_name; /* the bucket name of bucket_row()'s input */

static int redecode_stream(struct nv_buf *b, void *out)
{
	return meta_stream_decode(b->ptr, b->len, out);
}

static int redecode_bucket(struct nv_buf *b, void *out)
{
	return meta_bucket_decode(b->ptr, b->len, redecode_name, out);
}

static void check_name(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	FUZZ_ASSERT(n > 0 && n < cap);
	FUZZ_ASSERT(!strchr(s, '/'));
}

static void stream_row(const uint8_t *p, size_t n)
{
	struct meta_stream s;
	struct nv_buf b;
	int rc = meta_stream_decode(p, n, &s);

	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	if (rc)
		return;
	FUZZ_ASSERT(s.cls < NV_CLASS_COUNT && s.own.mode <= 07777);
	check_name(s.bucket, sizeof(s.bucket));
	check_name(s.name, sizeof(s.name));
	nv_buf_init(&b, SIZE_MAX);
	check_reencode(meta_stream_encode(&s, &b), &b, p, n, &s, sizeof(s), redecode_stream);
	nv_buf_free(&b);
}

static void bucket_row(struct fuzz_in *in)
{
	struct meta_bucket bk;
	struct nv_buf b;
	unsigned l = fuzz_u8(in);
	const uint8_t *rest;
	size_t n;
	char *name;
	int rc;

	if (l > in->len - in->off)
		l = (unsigned)(in->len - in->off);
	name = fuzz_strndup(in->p + in->off, l);
	in->off += l;
	rest = fuzz_rest(in, &n);
	rc = meta_bucket_decode(rest, n, name, &bk);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	if (rc == 0) {
		FUZZ_ASSERT(bk.default_class < NV_CLASS_COUNT && bk.own.mode <= 07777);
		FUZZ_ASSERT(strlen(name) <= META_BUCKET_NAME_MAX && !strcmp(bk.name, name));
		nv_buf_init(&b, SIZE_MAX);
		redecode_name = name;
		check_reencode(meta_bucket_encode(&bk, &b), &b, rest, n, &bk, sizeof(bk),
			       redecode_bucket);
		nv_buf_free(&b);
	}
	free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in;
	const uint8_t *rest;
	size_t n;

	fuzz_quiet();
	fuzz_in_init(&in, data, size);
	if (fuzz_u8(&in) & 1) {
		bucket_row(&in);
	} else {
		rest = fuzz_rest(&in, &n);
		stream_row(rest, n);
	}
	return 0;
}
