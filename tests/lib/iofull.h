/* iofull.h: writes a whole buffer through any write(2)-shaped call (write, smcr_write),
 * retrying on EINTR and short writes. Header-only, for the test programs that link neither
 * smcr_testlib nor cmocka (the guests' vm_sha and vm_xfer). */
#ifndef SMCR_TESTS_IOFULL_H
#define SMCR_TESTS_IOFULL_H

#include <errno.h>
#include <stddef.h>
#include <sys/types.h>

/* 0 when all n bytes went out; -1 on an error (errno from wr) or a write of 0 bytes. */
static inline int io_write_full(ssize_t (*wr)(int, const void *, size_t), int fd,
				const void *b, size_t n)
{
	const char *p = b;
	while (n) {
		ssize_t w = wr(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

#endif
