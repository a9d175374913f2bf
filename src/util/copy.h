/* copy.h: the data path's bulk copy (RMBE <-> caller buffers, RDMA WRITE emulation).
 *
 * Why not plain memcpy: glibc 2.36's memcpy for large blocks uses `rep movsb` (ERMS/FSRM),
 * and on the AMD EPYC cores of the machines smcr is measured on that instruction runs about
 * 20x slower (1.8 GB/s instead of 35-40 GB/s for a cached 64 KiB block) whenever the
 * destination is 1..31 bytes AHEAD of the source modulo the 4 KiB page:
 * (dst - src) mod 4096 in [1, 31]. That is exactly the common case of a page-aligned ring
 * (an RMBE) copied into a malloc'd buffer (glibc returns mmap'd blocks at page + 16), so
 * every recv() of a program that reads into malloc'd memory would copy at 1.8 GB/s
 * (measured: docs/parts/tune.md "The copy"). Below glibc's rep-movsb threshold (2 KiB with
 * FSRM) memcpy uses vector loads/stores, which have no such penalty; so in the bad window
 * the copy goes in 2 KiB pieces. Everywhere else it is memcpy, unchanged. */
#ifndef SMCR_UTIL_COPY_H
#define SMCR_UTIL_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SMCR_COPY_CHUNK 2048u	/* below glibc's rep_movsb_threshold with FSRM (2112) */
#define SMCR_COPY_BAD_DIST 64u	/* (dst - src) mod 4096 in [1, 63]: avoid rep movsb */

static inline void smcr_copy(void *dst, const void *src, size_t n)
{
	uintptr_t dist = ((uintptr_t)dst - (uintptr_t)src) & 4095u;
	if (n <= SMCR_COPY_CHUNK || dist == 0 || dist >= SMCR_COPY_BAD_DIST) {
		memcpy(dst, src, n);
		return;
	}
	uint8_t *d = dst;
	const uint8_t *s = src;
	/* The piece size is hidden from the compiler: a memcpy of a constant 2 KiB would be
	 * inlined as `rep movsq`, which is slow in the same window (11 GB/s measured). */
	size_t piece = SMCR_COPY_CHUNK;
	__asm__("" : "+r"(piece));
	while (n > piece) {
		memcpy(d, s, piece);
		d += piece;
		s += piece;
		n -= piece;
	}
	memcpy(d, s, n);
}

#endif
