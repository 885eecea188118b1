/*
 * test_base.c - unit tests of src/base: crc32c, nv_buf, the wire codec,
 * failpoints and the log's debug-mask parser.
 *
 * What is pinned: CRC-32C known vectors and hardware == software on random
 * buffers; the nv_buf limit (-E2BIG leaves the content unchanged) and
 * steal; sticky wire-reader errors on truncated and hostile input; and the
 * failpoint spec grammar (unknown names, error, @N, delay, reset); and
 * the u64 map: put/get/replace/remove, growth past many doublings,
 * tombstone churn, and iteration that removes as it goes.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/base/buf.h"
#include "src/base/clock.h"
#include "src/base/crc32c.h"
#include "src/base/endian.h"
#include "src/base/failpoint.h"
#include "src/base/log.h"
#include "src/base/u64map.h"
#include "src/base/wire.h"

/* Exported by crc32c.c for this test only: the software path. */
uint32_t nv_crc32c_sw(uint32_t crc, const void *p, size_t n);

static uint64_t rng_state = 7;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* ------------------------------------------------------------------ */
/* crc32c                                                              */

static void test_base_crc32c_vectors(void **state)
{
	static const uint8_t zeros[32], ones[32] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	};
	uint8_t inc[32];

	for (int i = 0; i < 32; i++)
		inc[i] = (uint8_t)i;
	assert_int_equal(nv_crc32c(0, "123456789", 9), 0xE3069283u);
	assert_int_equal(nv_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	/* RFC 3720 (iSCSI) B.4 test patterns. */
	assert_int_equal(nv_crc32c(0, zeros, 32), 0x8A9136AAu);
	assert_int_equal(nv_crc32c_sw(0, zeros, 32), 0x8A9136AAu);
	assert_int_equal(nv_crc32c(0, ones, 32), 0x62A8AB43u);
	assert_int_equal(nv_crc32c(0, inc, 32), 0x46DD794Eu);
	assert_int_equal(nv_crc32c(0, NULL, 0), 0);
	assert_int_equal(nv_crc32c(0, "", 0), 0);
}

static void test_base_crc32c_incremental(void **state)
{
	uint8_t buf[1000];
	uint32_t whole;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rng();
	whole = nv_crc32c(0, buf, sizeof(buf));
	for (size_t cut = 0; cut <= sizeof(buf); cut += 37) {
		uint32_t c = nv_crc32c(0, buf, cut);

		assert_int_equal(nv_crc32c(c, buf + cut, sizeof(buf) - cut), whole);
	}
	/* Byte by byte. */
	{
		uint32_t c = 0;

		for (size_t i = 0; i < sizeof(buf); i++)
			c = nv_crc32c(c, buf + i, 1);
		assert_int_equal(c, whole);
	}
	assert_int_equal(nv_crc32c(nv_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
}

static void test_base_crc32c_hw_equals_sw(void **state)
{
	size_t max = 4096 + 64;
	uint8_t *buf = malloc(max);

	assert_non_null(buf);
	for (size_t i = 0; i < max; i++)
		buf[i] = (uint8_t)rng();
	for (int round = 0; round < 2000; round++) {
		size_t align = rng() % 16;
		size_t len = round < 64 ? (size_t)round : rng() % (max - align);
		uint32_t seed = (round & 1) ? (uint32_t)rng() : 0;

		assert_int_equal(nv_crc32c(seed, buf + align, len),
				 nv_crc32c_sw(seed, buf + align, len));
	}
	free(buf);
}

/* Long buffers take the three-chain path (crc32c.c: runs of 3 x 8192 and
 * 3 x 256 bytes, joined by the zero-byte tables); every length around
 * those run boundaries, and random ones, equal the software reference. */
static void test_base_crc32c_hw_long_equals_sw(void **state)
{
	static const size_t edges[] = { 3 * 256, 3 * 8192 };
	size_t max = 4 * 3 * 8192 + 64;
	uint8_t *buf = malloc(max);

	assert_non_null(buf);
	for (size_t i = 0; i < max; i++)
		buf[i] = (uint8_t)rng();
	for (size_t e = 0; e < sizeof(edges) / sizeof(edges[0]); e++)
		for (size_t k = 1; k <= 3; k++)
			for (size_t d = 0; d < 24; d++) {
				size_t len = k * edges[e] + d - 12;

				assert_int_equal(nv_crc32c(7, buf + (d & 7), len),
						 nv_crc32c_sw(7, buf + (d & 7), len));
			}
	for (int round = 0; round < 200; round++) {
		size_t align = rng() % 16;
		size_t len = rng() % (max - align);
		uint32_t seed = (uint32_t)rng();

		assert_int_equal(nv_crc32c(seed, buf + align, len),
				 nv_crc32c_sw(seed, buf + align, len));
	}
	/* A whole 1 MiB-like buffer, incrementally in odd pieces. */
	{
		uint32_t whole = nv_crc32c(0, buf, max), c = 0;

		for (size_t off = 0; off < max;) {
			size_t take = 1 + rng() % 30000;

			if (take > max - off)
				take = max - off;
			c = nv_crc32c(c, buf + off, take);
			off += take;
		}
		assert_int_equal(c, whole);
		assert_int_equal(whole, nv_crc32c_sw(0, buf, max));
	}
	free(buf);
}

/* ------------------------------------------------------------------ */
/* nv_buf                                                              */

static void test_base_buf_limit(void **state)
{
	struct nv_buf b;

	nv_buf_init(&b, 10);
	assert_null(b.ptr);
	assert_int_equal(nv_buf_add(&b, "hello", 5), 0);
	assert_int_equal(nv_buf_add(&b, "world!", 6), -E2BIG);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.ptr, "hello", 5);
	assert_int_equal(nv_buf_printf(&b, "%s", "123456"), -E2BIG);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.ptr, "hello", 5);
	assert_int_equal(nv_buf_add(&b, "world", 5), 0);
	assert_int_equal(b.len, 10);
	assert_int_equal(nv_buf_add(&b, "", 0), 0);
	assert_int_equal(nv_buf_add_u8(&b, 1), -E2BIG);
	assert_int_equal(nv_buf_add_be32(&b, 1), -E2BIG);
	assert_int_equal(nv_buf_reserve(&b, 1), -E2BIG);
	assert_int_equal(nv_buf_reserve(&b, 0), 0);
	assert_memory_equal(b.ptr, "helloworld", 10);
	assert_true(b.len <= b.max);
	nv_buf_free(&b);
	assert_null(b.ptr);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.max, 10); /* stays usable with the same limit */
	assert_int_equal(nv_buf_add(&b, "0123456789", 10), 0);
	assert_int_equal(nv_buf_add(&b, "x", 1), -E2BIG);
	nv_buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_int_equal(nv_buf_add(&b, "x", 1), 0);
	nv_buf_free(&b);

	/* A huge reservation on an unlimited buffer must not wrap. */
	nv_buf_init(&b, SIZE_MAX);
	assert_int_equal(nv_buf_add(&b, "abc", 3), 0);
	assert_int_equal(nv_buf_reserve(&b, SIZE_MAX - 3), -E2BIG);
	assert_int_equal(nv_buf_reserve(&b, SIZE_MAX - 2), -E2BIG);
	assert_int_equal(nv_buf_reserve(&b, SIZE_MAX), -E2BIG);
	assert_int_equal(b.len, 3);
	nv_buf_free(&b);
}

static void test_base_buf_printf(void **state)
{
	struct nv_buf b;
	char *s;

	nv_buf_init(&b, 1 << 20);
	assert_int_equal(nv_buf_printf(&b, "%s-%d", "slot", 42), 0);
	assert_int_equal(b.len, 7);
	assert_string_equal((char *)b.ptr, "slot-42"); /* kept NUL-terminated */
	assert_int_equal(nv_buf_printf(&b, "/%016llx", 0xabcULL), 0);
	assert_string_equal((char *)b.ptr, "slot-42/0000000000000abc");
	assert_int_equal(nv_buf_printf(&b, "%s", ""), 0);
	assert_int_equal(b.len, 24);
	/* Growth across many appends keeps the content. */
	for (int i = 0; i < 1000; i++)
		assert_int_equal(nv_buf_printf(&b, "%04d", i), 0);
	assert_int_equal(b.len, 24 + 4000);
	assert_memory_equal(b.ptr + 24 + 4 * 999, "0999", 4);
	s = nv_buf_strdup(&b);
	assert_non_null(s);
	assert_int_equal(strlen(s), b.len);
	free(s);
	nv_buf_free(&b);

	/* Empty buffers. */
	s = nv_buf_strdup(&b);
	assert_non_null(s);
	assert_string_equal(s, "");
	free(s);
	assert_int_equal(nv_buf_printf(&b, "%s", ""), 0);
	assert_int_equal(b.len, 0);
	assert_non_null(b.ptr);
	assert_string_equal((char *)b.ptr, "");
	nv_buf_free(&b);
}

static void test_base_buf_steal(void **state)
{
	struct nv_buf b;
	uint8_t *p;
	size_t len = 99;

	nv_buf_init(&b, 100);
	p = nv_buf_steal(&b, &len);
	assert_null(p);
	assert_int_equal(len, 0);
	assert_int_equal(nv_buf_add_be64(&b, 0x0102030405060708ull), 0);
	assert_int_equal(nv_buf_add_be32(&b, 0x090a0b0c), 0);
	assert_int_equal(nv_buf_add_u8(&b, 0x0d), 0);
	p = nv_buf_steal(&b, &len);
	assert_non_null(p);
	assert_int_equal(len, 13);
	for (int i = 0; i < 13; i++)
		assert_int_equal(p[i], i + 1);
	assert_null(b.ptr);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
	/* The buffer is empty and reusable; the memory is ours. */
	assert_int_equal(nv_buf_add(&b, "z", 1), 0);
	assert_int_equal(b.len, 1);
	free(p);
	p = nv_buf_steal(&b, NULL);
	free(p);
	nv_buf_free(&b);
}

/* ------------------------------------------------------------------ */
/* endian                                                              */

static void test_base_endian(void **state)
{
	uint8_t p[8];

	nv_put_le64(p, 0x0807060504030201ull);
	for (int i = 0; i < 8; i++)
		assert_int_equal(p[i], i + 1);
	assert_int_equal(nv_get_le64(p), 0x0807060504030201ull);
	assert_int_equal(nv_get_le32(p), 0x04030201u);
	assert_int_equal(nv_get_le16(p), 0x0201);
	nv_put_be64(p, 0x0102030405060708ull);
	for (int i = 0; i < 8; i++)
		assert_int_equal(p[i], i + 1);
	assert_int_equal(nv_get_be64(p), 0x0102030405060708ull);
	assert_int_equal(nv_get_be32(p), 0x01020304u);
	nv_put_be32(p, 0xfffefdfc);
	assert_int_equal(p[0], 0xff);
	assert_int_equal(p[3], 0xfc);
	nv_put_le32(p, 0xfffefdfc);
	assert_int_equal(p[0], 0xfc);
	nv_put_le16(p, 0xbeef);
	assert_int_equal(nv_get_le16(p), 0xbeef);
}

/* ------------------------------------------------------------------ */
/* wire                                                                */

static void test_base_wire_round_trip(void **state)
{
	struct nv_buf b;
	struct nv_rd r;
	const uint8_t *bytes;
	uint32_t n;
	char *s;

	nv_buf_init(&b, 1 << 16);
	assert_int_equal(nv_wr_u8(&b, 0xab), 0);
	assert_int_equal(nv_wr_u16(&b, 0xbeef), 0);
	assert_int_equal(nv_wr_u32(&b, 0xdeadbeef), 0);
	assert_int_equal(nv_wr_u64(&b, 0x0123456789abcdefull), 0);
	assert_int_equal(nv_wr_u64(&b, UINT64_MAX), 0);
	assert_int_equal(nv_wr_bytes(&b, "\0\1\2", 3), 0);
	assert_int_equal(nv_wr_bytes(&b, NULL, 0), 0);
	assert_int_equal(nv_wr_str(&b, "stream/α"), 0);
	assert_int_equal(nv_wr_str(&b, ""), 0);
	assert_int_equal(nv_wr_u8(&b, 0), 0);
	/* Little-endian on the wire. */
	assert_int_equal(b.ptr[1], 0xef);
	assert_int_equal(b.ptr[2], 0xbe);

	nv_rd_init(&r, b.ptr, b.len);
	assert_int_equal(nv_rd_u8(&r), 0xab);
	assert_int_equal(nv_rd_u16(&r), 0xbeef);
	assert_int_equal(nv_rd_u32(&r), 0xdeadbeef);
	assert_int_equal(nv_rd_u64(&r), 0x0123456789abcdefull);
	assert_int_equal(nv_rd_u64(&r), UINT64_MAX);
	bytes = nv_rd_bytes(&r, &n, 100);
	assert_non_null(bytes);
	assert_int_equal(n, 3);
	assert_memory_equal(bytes, "\0\1\2", 3);
	bytes = nv_rd_bytes(&r, &n, 100);
	assert_int_equal(n, 0);
	assert_int_equal(nv_rd_error(&r), 0);
	s = nv_rd_str(&r, 100);
	assert_non_null(s);
	assert_string_equal(s, "stream/α");
	free(s);
	s = nv_rd_str(&r, 100);
	assert_non_null(s);
	assert_string_equal(s, "");
	free(s);
	assert_int_equal(nv_rd_left(&r), 1);
	assert_int_equal(nv_rd_done(&r), -EBADMSG); /* one byte unread */
	assert_int_equal(nv_rd_u8(&r), 0);
	assert_int_equal(nv_rd_done(&r), 0);
	assert_int_equal(nv_rd_error(&r), 0);
	nv_buf_free(&b);

	/* A failed encode leaves the buffer as it was. */
	nv_buf_init(&b, 6);
	assert_int_equal(nv_wr_u8(&b, 1), 0);
	assert_int_equal(nv_wr_bytes(&b, "abc", 3), -E2BIG);
	assert_int_equal(b.len, 1);
	assert_int_equal(nv_wr_str(&b, "ab"), -E2BIG); /* header fits, body not */
	assert_int_equal(b.len, 1);
	assert_int_equal(nv_wr_u64(&b, 1), -E2BIG);
	assert_int_equal(b.len, 1);
	nv_buf_free(&b);
}

static void test_base_wire_sticky_errors(void **state)
{
	static const uint8_t in[] = { 1, 2, 3, 4, 5 };
	struct nv_rd r;

	nv_rd_init(&r, in, sizeof(in));
	assert_int_equal(nv_rd_u32(&r), 0x04030201u);
	assert_int_equal(nv_rd_u16(&r), 0); /* only one byte left */
	assert_int_equal(nv_rd_error(&r), -EBADMSG);
	/* Everything after the first short read fails, even what would fit. */
	assert_int_equal(nv_rd_u8(&r), 0);
	assert_null(nv_rd_raw(&r, 0));
	assert_int_equal(nv_rd_left(&r), 0);
	assert_int_equal(nv_rd_error(&r), -EBADMSG);
	assert_int_equal(nv_rd_done(&r), -EBADMSG);

	/* Truncated at every length: never reads out of bounds, always
	 * reports the error. */
	{
		struct nv_buf b;

		nv_buf_init(&b, 256);
		assert_int_equal(nv_wr_u64(&b, 77), 0);
		assert_int_equal(nv_wr_str(&b, "hello"), 0);
		assert_int_equal(nv_wr_u32(&b, 9), 0);
		for (size_t len = 0; len < b.len; len++) {
			uint8_t *copy = malloc(len ? len : 1);
			char *s;

			assert_non_null(copy);
			memcpy(copy, b.ptr, len);
			nv_rd_init(&r, copy, len);
			(void)nv_rd_u64(&r);
			s = nv_rd_str(&r, 64);
			(void)nv_rd_u32(&r);
			assert_int_equal(nv_rd_error(&r), -EBADMSG);
			free(s);
			free(copy);
		}
		nv_rd_init(&r, b.ptr, b.len);
		(void)nv_rd_u64(&r);
		free(nv_rd_str(&r, 64));
		assert_int_equal(nv_rd_u32(&r), 9);
		assert_int_equal(nv_rd_done(&r), 0);
		nv_buf_free(&b);
	}
}

static void test_base_wire_hostile_lengths(void **state)
{
	struct nv_buf b;
	struct nv_rd r;
	uint32_t n = 123;
	uint8_t evil[8];

	/* A length above max: rejected before anything is touched. */
	nv_buf_init(&b, 256);
	assert_int_equal(nv_wr_bytes(&b, "0123456789", 10), 0);
	nv_rd_init(&r, b.ptr, b.len);
	assert_null(nv_rd_bytes(&r, &n, 9));
	assert_int_equal(n, 0);
	assert_int_equal(nv_rd_error(&r), -EBADMSG);
	nv_rd_init(&r, b.ptr, b.len);
	assert_non_null(nv_rd_bytes(&r, &n, 10)); /* max is inclusive */
	assert_int_equal(n, 10);
	nv_rd_init(&r, b.ptr, b.len);
	assert_null(nv_rd_str(&r, 9));
	assert_int_equal(nv_rd_error(&r), -EBADMSG);
	nv_buf_free(&b);

	/* A length larger than what remains. */
	nv_put_le32(evil, 0xffffffffu);
	memcpy(evil + 4, "abcd", 4);
	nv_rd_init(&r, evil, sizeof(evil));
	assert_null(nv_rd_bytes(&r, &n, UINT32_MAX));
	assert_int_equal(nv_rd_error(&r), -EBADMSG);
	nv_put_le32(evil, 5);
	nv_rd_init(&r, evil, sizeof(evil));
	assert_null(nv_rd_bytes(&r, &n, UINT32_MAX));
	assert_int_equal(nv_rd_error(&r), -EBADMSG);
	nv_rd_init(&r, evil, sizeof(evil));
	assert_null(nv_rd_str(&r, 100));
	assert_int_equal(nv_rd_error(&r), -EBADMSG);

	/* An embedded NUL is not a string. */
	nv_buf_init(&b, 256);
	assert_int_equal(nv_wr_bytes(&b, "ab\0cd", 5), 0);
	assert_int_equal(nv_wr_u8(&b, 1), 0);
	nv_rd_init(&r, b.ptr, b.len);
	assert_null(nv_rd_str(&r, 100));
	assert_int_equal(nv_rd_error(&r), -EBADMSG);
	assert_int_equal(nv_rd_u8(&r), 0); /* sticky */
	nv_buf_free(&b);

	/* Raw reads past the end. */
	nv_rd_init(&r, evil, sizeof(evil));
	assert_non_null(nv_rd_raw(&r, 8));
	assert_non_null(nv_rd_raw(&r, 0));
	assert_null(nv_rd_raw(&r, 1));
	nv_rd_init(&r, evil, sizeof(evil));
	assert_null(nv_rd_raw(&r, SIZE_MAX));
	assert_int_equal(nv_rd_error(&r), -EBADMSG);
}

/* ------------------------------------------------------------------ */
/* failpoints                                                          */

static int fp_teardown(void **state)
{
	nv_fp_reset();
	return 0;
}

static void test_base_failpoint_unknown(void **state)
{
	assert_int_equal(nv_fp_arm("no.such.point=error"), -EINVAL);
	assert_int_equal(NV_FP("meta.commit"), 0);
	assert_int_equal(nv_fp_arm("meta.commit"), -EINVAL);           /* no action */
	assert_int_equal(nv_fp_arm("meta.commit=explode"), -EINVAL);   /* unknown action */
	assert_int_equal(nv_fp_arm("meta.commit=delay"), -EINVAL);     /* delay needs MS */
	assert_int_equal(nv_fp_arm("meta.commit=error@0"), -EINVAL);
	assert_int_equal(nv_fp_arm("meta.commit=error@-1"), -EINVAL);  /* found by fuzzing */
	assert_int_equal(nv_fp_arm("meta.commit=error@2-"), -EINVAL);
	assert_int_equal(nv_fp_arm("meta.commit=error@+2"), -EINVAL);
	assert_int_equal(nv_fp_arm("meta.commit=error@2- 3"), -EINVAL);
	assert_int_equal(nv_fp_arm("meta.commit=error@x"), -EINVAL);
	assert_int_equal(nv_fp_arm("meta.commit=error:abc"), -EINVAL);
	assert_int_equal(nv_fp_arm("meta.commit=error:-3"), -EINVAL);
	assert_int_equal(nv_fp_arm("=error"), -EINVAL);
	assert_int_equal(nv_fp_arm(""), 0); /* empty spec: nothing armed */
	assert_int_equal(nv_fp_arm(NULL), 0);
	assert_int_equal(nv_fp_armed, 0);
	/* Every listed name is armable. */
	for (int i = 0; nv_fp_names[i]; i++) {
		char spec[128];

		snprintf(spec, sizeof(spec), "%s=error", nv_fp_names[i]);
		assert_int_equal(nv_fp_arm(spec), 0);
		nv_fp_reset();
	}
}

static void test_base_failpoint_error(void **state)
{
	assert_int_equal(nv_fp_arm("meta.commit=error"), 0);
	assert_int_equal(NV_FP("meta.commit"), -EIO);
	assert_int_equal(NV_FP("meta.commit"), -EIO);
	assert_int_equal(NV_FP("store.put"), 0); /* other points untouched */
	nv_fp_reset();
	assert_int_equal(NV_FP("meta.commit"), 0);

	assert_int_equal(nv_fp_arm("store.get=error:28,store.put=error"), 0);
	assert_int_equal(NV_FP("store.get"), -ENOSPC);
	assert_int_equal(NV_FP("store.put"), -EIO);
}

static void test_base_failpoint_nth_hit(void **state)
{
	assert_int_equal(nv_fp_arm("chain.after_put=error@3"), 0);
	assert_int_equal(NV_FP("chain.after_put"), 0);
	assert_int_equal(NV_FP("chain.after_put"), 0);
	assert_int_equal(NV_FP("chain.after_put"), -EIO);
	assert_int_equal(NV_FP("chain.after_put"), -EIO); /* and every hit after */
	nv_fp_reset();
	/* Re-arming counts hits afresh. */
	assert_int_equal(nv_fp_arm("chain.after_put=error:5@2"), 0);
	assert_int_equal(NV_FP("chain.after_put"), 0);
	assert_int_equal(NV_FP("chain.after_put"), -5);
	/* nv_fp_hits(): every hit counts, fired or not; 0 once disarmed or
	 * for a point not armed. */
	assert_int_equal(nv_fp_hits("chain.after_put"), 2);
	assert_int_equal(nv_fp_hits("absorb.before_refs"), 0);
	nv_fp_reset();
	assert_int_equal(nv_fp_hits("chain.after_put"), 0);
}

static void test_base_failpoint_delay(void **state)
{
	uint64_t t0;

	assert_int_equal(nv_fp_arm("absorb.before_refs=delay:20"), 0);
	t0 = nv_now_mono_ns();
	assert_int_equal(NV_FP("absorb.before_refs"), 0);
	assert_true(nv_now_mono_ns() - t0 >= 20 * NV_NS_PER_MS);
	nv_fp_reset();
	assert_int_equal(nv_fp_armed, 0);
	t0 = nv_now_mono_ns();
	assert_int_equal(NV_FP("absorb.before_refs"), 0);
	assert_true(nv_now_mono_ns() - t0 < 20 * NV_NS_PER_MS);
}

static void test_base_failpoint_env(void **state)
{
	assert_int_equal(setenv("NOVAFS_FAILPOINTS", "recover.after_slot=error@2", 1), 0);
	assert_int_equal(nv_fp_init_from_env(), 0);
	assert_int_equal(NV_FP("recover.after_slot"), 0);
	assert_int_equal(NV_FP("recover.after_slot"), -EIO);
	nv_fp_reset();
	assert_int_equal(setenv("NOVAFS_FAILPOINTS", "bogus=error", 1), 0);
	assert_int_equal(nv_fp_init_from_env(), -EINVAL);
	assert_int_equal(unsetenv("NOVAFS_FAILPOINTS"), 0);
	assert_int_equal(nv_fp_init_from_env(), 0);
	assert_int_equal(nv_fp_armed, 0);
}

/* ------------------------------------------------------------------ */
/* log                                                                 */

/* nv_log_ratelimited(): the first NV_RATELIMIT_BURST lines of a window
 * pass, the rest are dropped; stderr is captured through a pipe. */
static void test_base_log_ratelimited(void **state)
{
	static struct nv_ratelimit rl;
	char out[65536];
	int p[2], saved;
	ssize_t n;
	int lines = 0;

	(void)state;
	nv_log_level = NV_INFO;
	assert_int_equal(pipe(p), 0);
	saved = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	for (int i = 0; i < 3 * NV_RATELIMIT_BURST; i++)
		nv_log_ratelimited(&rl, NV_INFO, NV_SUB_FS, "refused %d", i);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(p[1]);
	n = read(p[0], out, sizeof(out) - 1);
	close(p[0]);
	assert_true(n > 0);
	out[n] = 0;
	for (char *c = out; *c; c++)
		lines += *c == '\n';
	assert_int_equal(lines, NV_RATELIMIT_BURST);
	assert_non_null(strstr(out, "refused 0"));
	assert_null(strstr(out, "refused 10"));
	assert_int_equal(rl.suppressed, 2 * NV_RATELIMIT_BURST);
	/* A new window: the next line passes and says what was dropped. */
	rl.window_ns = 1;
	assert_int_equal(pipe(p), 0);
	saved = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	nv_log_ratelimited(&rl, NV_INFO, NV_SUB_FS, "refused again");
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(p[1]);
	n = read(p[0], out, sizeof(out) - 1);
	close(p[0]);
	assert_true(n > 0);
	out[n] = 0;
	assert_non_null(strstr(out, "refused again (20 similar lines suppressed)"));
}

static void test_base_log_debug_mask(void **state)
{
	const char *bad = NULL;
	int badlen = 0;
	unsigned saved = nv_log_debug_mask;

	assert_int_equal(nv_log_set_debug("absorb,chain", &bad, &badlen), 0);
	assert_int_equal(nv_log_debug_mask, (1u << NV_SUB_ABSORB) | (1u << NV_SUB_CHAIN));
	assert_true(nv_log_enabled(NV_DEBUG, NV_SUB_ABSORB));
	assert_false(nv_log_enabled(NV_DEBUG, NV_SUB_READ));
	assert_true(nv_log_enabled(NV_ERR, NV_SUB_READ));
	assert_int_equal(nv_log_set_debug("read,bogus,wake", &bad, &badlen), -EINVAL);
	assert_int_equal(badlen, 5);
	assert_memory_equal(bad, "bogus", 5);
	/* A failed parse leaves the mask alone. */
	assert_int_equal(nv_log_debug_mask, (1u << NV_SUB_ABSORB) | (1u << NV_SUB_CHAIN));
	assert_int_equal(nv_log_set_debug("all", NULL, NULL), 0);
	assert_true(nv_log_enabled(NV_DEBUG, NV_SUB_WAKE));
	assert_int_equal(nv_log_set_debug("", NULL, NULL), 0);
	assert_int_equal(nv_log_debug_mask, 0);
	for (int i = 0; i < NV_SUB_COUNT; i++)
		assert_string_not_equal(nv_log_subsys_name((enum nv_subsys)i), "?");
	assert_string_equal(nv_log_subsys_name(NV_SUB_COUNT), "?");
	nv_log_debug_mask = saved;
}

/* ------------------------------------------------------------------ */
/* u64map                                                              */

/* Distinct non-NULL pointers for values: &vals[i]. */
static char vals[4096];

static void test_base_u64map_basic(void **state)
{
	struct u64map *m = u64map_new(0);
	size_t cur = 0;

	(void)state;
	assert_non_null(m);
	assert_int_equal(u64map_count(m), 0);
	assert_null(u64map_get(m, 0));
	assert_false(u64map_next(m, &cur, NULL, NULL));
	/* The extreme keys are ordinary keys. */
	assert_int_equal(u64map_put(m, 0, &vals[0]), 0);
	assert_int_equal(u64map_put(m, UINT64_MAX, &vals[1]), 0);
	assert_int_equal(u64map_put(m, 42, &vals[2]), 0);
	assert_int_equal(u64map_count(m), 3);
	assert_ptr_equal(u64map_get(m, 0), &vals[0]);
	assert_ptr_equal(u64map_get(m, UINT64_MAX), &vals[1]);
	assert_ptr_equal(u64map_get(m, 42), &vals[2]);
	assert_null(u64map_get(m, 43));
	/* Replacing keeps one entry. */
	assert_int_equal(u64map_put(m, 42, &vals[3]), 0);
	assert_int_equal(u64map_count(m), 3);
	assert_ptr_equal(u64map_get(m, 42), &vals[3]);
	/* Remove returns the value once. */
	assert_ptr_equal(u64map_remove(m, 42), &vals[3]);
	assert_null(u64map_remove(m, 42));
	assert_null(u64map_get(m, 42));
	assert_int_equal(u64map_count(m), 2);
	/* A removed key can come back. */
	assert_int_equal(u64map_put(m, 42, &vals[4]), 0);
	assert_ptr_equal(u64map_get(m, 42), &vals[4]);
	u64map_free(m);
	u64map_free(NULL);
}

static void test_base_u64map_grow(void **state)
{
	struct u64map *m = u64map_new(1);
	const uint64_t n = 50000;

	(void)state;
	assert_non_null(m);
	/* Keys that collide in their low bits: multiples of 4096. */
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(u64map_put(m, i << 12, &vals[i % 4096]), 0);
	assert_int_equal(u64map_count(m), n);
	for (uint64_t i = 0; i < n; i++)
		assert_ptr_equal(u64map_get(m, i << 12), &vals[i % 4096]);
	assert_null(u64map_get(m, 1));
	assert_null(u64map_get(m, n << 12));
	u64map_free(m);
}

static void test_base_u64map_churn(void **state)
{
	struct u64map *m = u64map_new(0);

	(void)state;
	assert_non_null(m);
	/* A sliding window of 100 live keys over 100,000 inserts: the
	 * tombstones left behind must never fill the array. */
	for (uint64_t i = 0; i < 100000; i++) {
		assert_int_equal(u64map_put(m, i, &vals[i % 4096]), 0);
		if (i >= 100)
			assert_ptr_equal(u64map_remove(m, i - 100), &vals[(i - 100) % 4096]);
	}
	assert_int_equal(u64map_count(m), 100);
	for (uint64_t i = 0; i < 100000; i++) {
		if (i < 100000 - 100)
			assert_null(u64map_get(m, i));
		else
			assert_ptr_equal(u64map_get(m, i), &vals[i % 4096]);
	}
	u64map_free(m);
}

static void test_base_u64map_iterate_remove(void **state)
{
	struct u64map *m = u64map_new(0);
	static uint8_t seen[2000];
	size_t cur = 0, visits = 0;
	uint64_t key;
	void *val;

	(void)state;
	assert_non_null(m);
	memset(seen, 0, sizeof(seen));
	for (uint64_t i = 0; i < 2000; i++)
		assert_int_equal(u64map_put(m, rng() << 11 | i, &vals[i]), 0);
	/* Remove every entry as it is visited, and every odd one ahead of
	 * its visit: each even entry is seen exactly once. */
	while (u64map_next(m, &cur, &key, &val)) {
		uint64_t i = key & 2047;

		assert_true(i < 2000);
		assert_ptr_equal(val, &vals[i]);
		seen[i]++;
		visits++;
		assert_ptr_equal(u64map_remove(m, key), val);
		if (i % 2 == 0 && i + 1 < 2000) {
			/* Its odd twin may already be gone (visited first). */
			size_t c2 = 0;
			uint64_t k2;

			while (u64map_next(m, &c2, &k2, NULL))
				if ((k2 & 2047) == i + 1) {
					assert_non_null(u64map_remove(m, k2));
					break;
				}
		}
	}
	assert_int_equal(u64map_count(m), 0);
	for (int i = 0; i < 2000; i += 2)
		assert_int_equal(seen[i], 1);
	for (int i = 1; i < 2000; i += 2)
		assert_true(seen[i] <= 1);
	assert_true(visits >= 1000);
	u64map_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_base_crc32c_vectors),
		cmocka_unit_test(test_base_crc32c_incremental),
		cmocka_unit_test(test_base_crc32c_hw_equals_sw),
		cmocka_unit_test(test_base_crc32c_hw_long_equals_sw),
		cmocka_unit_test(test_base_buf_limit),
		cmocka_unit_test(test_base_buf_printf),
		cmocka_unit_test(test_base_buf_steal),
		cmocka_unit_test(test_base_endian),
		cmocka_unit_test(test_base_wire_round_trip),
		cmocka_unit_test(test_base_wire_sticky_errors),
		cmocka_unit_test(test_base_wire_hostile_lengths),
		cmocka_unit_test_teardown(test_base_failpoint_unknown, fp_teardown),
		cmocka_unit_test_teardown(test_base_failpoint_error, fp_teardown),
		cmocka_unit_test_teardown(test_base_failpoint_nth_hit, fp_teardown),
		cmocka_unit_test_teardown(test_base_failpoint_delay, fp_teardown),
		cmocka_unit_test_teardown(test_base_failpoint_env, fp_teardown),
		cmocka_unit_test(test_base_log_debug_mask),
		cmocka_unit_test(test_base_log_ratelimited),
		cmocka_unit_test(test_base_u64map_basic),
		cmocka_unit_test(test_base_u64map_grow),
		cmocka_unit_test(test_base_u64map_churn),
		cmocka_unit_test(test_base_u64map_iterate_remove),
	};

	/* Failpoint arming logs at INFO; keep the output to the results. */
	nv_log_level = NV_WARN;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
