/*
 * crc32c.c - see crc32c.h.
 *
 * Software path: slicing-by-8 over tables built at first use from the
 * reflected polynomial 0x82F63B78.  Hardware path: the SSE4.2 crc32
 * instruction, 8 bytes at a time.  Selection happens once (pthread_once).
 *
 * The instruction has a latency of three cycles and a throughput of one,
 * so one dependent chain runs it at a third of its speed.  Long buffers
 * are therefore cut into three consecutive blocks whose CRCs run as
 * three independent chains, interleaved, and are then joined: the CRC
 * register is linear over GF(2), so the register after A||B equals
 * Z_|B|(register after A) ^ (register of B started from 0), where Z_n
 * is the linear map "feed n zero bytes".  Z_n for the two block sizes
 * (BLOCK_LONG, BLOCK_SHORT) is built once as a 32x32 bit matrix and
 * applied through four 256-entry tables, one per byte of the register.
 * The software path is the reference the unit tests compare it with.
 */
#include "config.h"
#include "src/base/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

/* The interleaved blocks (bytes, multiples of 8): long for big buffers,
 * short for what is left of them. */
#define BLOCK_LONG 8192u
#define BLOCK_SHORT 256u

static uint32_t table[8][256];
static uint32_t zeros_long[4][256], zeros_short[4][256];
static int have_hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* mat (32 columns, column i the image of bit i) times vec over GF(2). */
static uint32_t gf2_apply(const uint32_t mat[32], uint32_t vec)
{
	uint32_t out = 0;

	for (int i = 0; vec; i++, vec >>= 1)
		if (vec & 1u)
			out ^= mat[i];
	return out;
}

/* out = m * m: the map applied twice. */
static void gf2_square(uint32_t out[32], const uint32_t m[32])
{
	for (int i = 0; i < 32; i++)
		out[i] = gf2_apply(m, m[i]);
}

/* The tables of Z_n, n a power of two >= 1 (bytes): t[k][b] is the image
 * of byte value b in byte k of the register. */
static void zeros_tables(uint32_t t[4][256], uint32_t n)
{
	uint32_t a[32], b[32];

	/* One zero bit: shift right, folding the polynomial in when the
	 * low bit falls out (the reflected register). */
	a[0] = POLY;
	for (int i = 1; i < 32; i++)
		a[i] = 1u << (i - 1);
	/* Square 3 times for one byte, then once per doubling of n. */
	for (uint64_t bits = 1; bits < 8ull * n; bits *= 2) {
		gf2_square(b, a);
		memcpy(a, b, sizeof(a));
	}
	for (int k = 0; k < 4; k++)
		for (uint32_t v = 0; v < 256; v++)
			t[k][v] = gf2_apply(a, v << (8 * k));
}

/* Z_n applied to register c through its tables. */
static uint32_t zeros_apply(const uint32_t t[4][256], uint32_t c)
{
	return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

static void init_tables(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = table[0][i];

		for (int t = 1; t < 8; t++) {
			c = table[0][c & 0xff] ^ (c >> 8);
			table[t][i] = c;
		}
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_hw = __builtin_cpu_supports("sse4.2");
#endif
	zeros_tables(zeros_long, BLOCK_LONG);
	zeros_tables(zeros_short, BLOCK_SHORT);
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		n--;
	}
	while (n >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		w ^= crc; /* little-endian hosts only: see configure */
		crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
		      table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
		      table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		      table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
/* Runs of three blocks of blk bytes each (8-byte aligned *p): three
 * chains, joined through the tables of Z_blk.  Advances *p and *n past
 * the runs. */
__attribute__((target("sse4.2")))
static uint64_t crc_hw3(uint64_t c0, const uint8_t **pp, size_t *np, uint32_t blk,
			const uint32_t zt[4][256])
{
	const uint8_t *p = *pp;
	size_t n = *np;

	while (n >= 3 * (size_t)blk) {
		uint64_t c1 = 0, c2 = 0;

		for (uint32_t i = 0; i < blk; i += 8) {
			uint64_t w0, w1, w2;

			memcpy(&w0, p + i, 8);
			memcpy(&w1, p + blk + i, 8);
			memcpy(&w2, p + 2 * (size_t)blk + i, 8);
			c0 = __builtin_ia32_crc32di(c0, w0);
			c1 = __builtin_ia32_crc32di(c1, w1);
			c2 = __builtin_ia32_crc32di(c2, w2);
		}
		c0 = zeros_apply(zt, (uint32_t)c0) ^ (uint32_t)c1;
		c0 = zeros_apply(zt, (uint32_t)c0) ^ (uint32_t)c2;
		p += 3 * (size_t)blk;
		n -= 3 * (size_t)blk;
	}
	*pp = p;
	*np = n;
	return c0;
}

__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
	uint64_t c = crc;

	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
	}
	c = crc_hw3(c, &p, &n, BLOCK_LONG, zeros_long);
	c = crc_hw3(c, &p, &n, BLOCK_SHORT, zeros_short);
	while (n >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

uint32_t nv_crc32c(uint32_t crc, const void *p, size_t n)
{
	pthread_once(&once, init_tables);
	crc = ~crc;
#if defined(__x86_64__)
	if (have_hw)
		return ~crc_hw(crc, p, n);
#endif
	return ~crc_sw(crc, p, n);
}

/* For the unit test: force the software path. */
uint32_t nv_crc32c_sw(uint32_t crc, const void *p, size_t n);
uint32_t nv_crc32c_sw(uint32_t crc, const void *p, size_t n)
{
	pthread_once(&once, init_tables);
	return ~crc_sw(~crc, p, n);
}
