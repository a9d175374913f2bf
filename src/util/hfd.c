/* hfd.c: placement and record of the library's own fds (see hfd.h). */
#define _GNU_SOURCE
#include "util/hfd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

_Atomic uint64_t hfd_bits[HFD_MAX / 64];
_Atomic int hfd_lo = INT32_MAX;
static _Atomic int hfd_hi = -1;    /* highest number ever marked: bounds hfd_next */
static _Atomic int hfd_base_v = -1; /* -1: not set, computed at first use */

int hfd_base(void)
{
	int b = atomic_load_explicit(&hfd_base_v, memory_order_acquire);
	if (b >= 0)
		return b;
	/* Not under the interposer (a program using the smcr_* API knows the library): half
	 * the soft limit keeps the low numbers for the program. */
	struct rlimit rl;
	int v = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY)
			v = 4096;
		else if (rl.rlim_cur >= 64)
			v = (int)(rl.rlim_cur / 2 < HFD_MAX ? rl.rlim_cur / 2 : HFD_MAX / 2);
	}
	int expect = -1;
	if (!atomic_compare_exchange_strong(&hfd_base_v, &expect, v))
		v = expect;
	return v;
}

void hfd_set_base(int base)
{
	atomic_store_explicit(&hfd_base_v, base < 0 ? 0 : base, memory_order_release);
}

void hfd_mark(int fd)
{
	if (fd < 0 || fd >= HFD_MAX)
		return;
	atomic_fetch_or_explicit(&hfd_bits[(unsigned)fd / 64], 1ull << ((unsigned)fd % 64),
				 memory_order_relaxed);
	int lo = atomic_load_explicit(&hfd_lo, memory_order_relaxed);
	while (fd < lo && !atomic_compare_exchange_weak_explicit(&hfd_lo, &lo, fd,
								  memory_order_relaxed,
								  memory_order_relaxed))
		;
	int hi = atomic_load_explicit(&hfd_hi, memory_order_relaxed);
	while (fd > hi && !atomic_compare_exchange_weak_explicit(&hfd_hi, &hi, fd,
								  memory_order_relaxed,
								  memory_order_relaxed))
		;
}

void hfd_unmark(int fd)
{
	if (fd < 0 || fd >= HFD_MAX)
		return;
	atomic_fetch_and_explicit(&hfd_bits[(unsigned)fd / 64], ~(1ull << ((unsigned)fd % 64)),
				  memory_order_relaxed);
}

int hfd_next(int from)
{
	int lo = atomic_load_explicit(&hfd_lo, memory_order_relaxed);
	int hi = atomic_load_explicit(&hfd_hi, memory_order_relaxed);
	if (from < lo)
		from = lo;
	for (int fd = from; fd <= hi && fd < HFD_MAX;) {
		uint64_t w = atomic_load_explicit(&hfd_bits[(unsigned)fd / 64],
						  memory_order_relaxed) >> ((unsigned)fd % 64);
		if (w)
			return fd + __builtin_ctzll(w);
		fd = (fd | 63) + 1;
	}
	return -1;
}

int hfd_dup(int fd)
{
	int n = fcntl(fd, F_DUPFD_CLOEXEC, hfd_base());
	if (n < 0 && (errno == EINVAL || errno == EMFILE))
		n = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* no room up there (a lowered limit) */
	if (n >= 0)
		hfd_mark(n);
	return n;
}

int hfd_move(int fd)
{
	if (fd >= hfd_base() && fd < HFD_MAX) {
		hfd_mark(fd); /* already up there (the numbers below were all taken) */
		return fd;
	}
	int n = hfd_dup(fd);
	if (n >= 0)
		close(fd);
	return n;
}

int hfd_keep(int fd)
{
	if (fd < 0)
		return fd;
	int err = errno;
	int n = hfd_move(fd);
	if (n < 0) {
		n = fd;
		hfd_mark(fd);
	}
	errno = err;
	return n;
}
