/*
 * crc32c.c - see crc32c.h.
 *
 * Software path: slicing-by-8 over tables built at first use from the
 * reflected polynomial 0x82F63B78.  Hardware path: the SSE4.2 crc32
 * instruction, 8 bytes at a time.  Selection happens once (pthread_once).
 */
#include "config.h"
#include "src/base/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static int have_hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

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
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
	uint64_t c = crc;

	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
	}
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
