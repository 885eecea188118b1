/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of every bundle chunk,
 * footer and trailer.
 *
 * Uses the SSE4.2 crc32 instruction when the CPU has it (checked once),
 * else a table-driven software loop; both give identical results.
 */
#ifndef NOVAFS_BASE_CRC32C_H
#define NOVAFS_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extend crc (0 to start) over n bytes at p.  crc32c(0, "123456789", 9)
 * == 0xE3069283. */
uint32_t nv_crc32c(uint32_t crc, const void *p, size_t n);

#endif
