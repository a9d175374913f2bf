/* hfd.h: the library's own file descriptors ("hidden fds"): where they are placed and the
 * record of which numbers they are.
 *
 * Everything smcr keeps open for itself (the engine's ends of the signalling pairs, the TCP
 * socket behind an SMC-R connection, epoll sets, eventfds, timerfds, the memfds of RDMA
 * buffers, the provider's sockets, fds a peer passed) is an fd of the program's process. A
 * program must not see them: select(2) handles numbers below FD_SETSIZE (1024) only, so
 * they are placed at or above hfd_base() (F_DUPFD_CLOEXEC); and a program that names one of
 * those numbers (a guess, a close loop, a number read from /proc/self/fd) must be told
 * EBADF as if it were closed, which needs the record kept here (docs/INTERPOSER.md "The
 * library's own fds"). The interposer sets the base (it raises the soft RLIMIT_NOFILE and
 * shows the program its own limit); without it the base is half the soft limit.
 *
 * The record is a bitmap with one bit per number below HFD_MAX, set when a number is
 * placed (hfd_dup, hfd_move, hfd_keep, hfd_mark) and cleared before the library closes it
 * (hfd_unmark: the interposer's real close does it for every close the library makes).
 * Lock-free: relaxed atomics; a number's bit changes only while the library owns it. */
#ifndef SMCR_UTIL_HFD_H
#define SMCR_UTIL_HFD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define HFD_MAX (1 << 20) /* the kernel's default nr_open: no fd number reaches it */

extern _Atomic uint64_t hfd_bits[HFD_MAX / 64];
extern _Atomic int hfd_lo; /* lowest number ever marked; INT32_MAX while none */

/* True if fd is one of the library's own numbers now. One compare for every number below
 * the lowest ever placed (all of a program's, normally). */
static inline bool hfd_is(int fd)
{
	if (fd < atomic_load_explicit(&hfd_lo, memory_order_relaxed) || fd >= HFD_MAX)
		return false;
	return (atomic_load_explicit(&hfd_bits[(unsigned)fd / 64], memory_order_relaxed) >>
		((unsigned)fd % 64)) & 1;
}

/* The lowest number a hidden fd is placed at. */
int hfd_base(void);
/* Sets it (the interposer, at its start and when the program raises its limit). */
void hfd_set_base(int base);

/* A copy of fd at a hidden number (F_DUPFD_CLOEXEC at or above hfd_base(); if the limit
 * leaves no room there, at any number), recorded. -1 with errno on failure. */
int hfd_dup(int fd);
/* fd moved to a hidden number (hfd_dup, then fd closed). -1 with errno on failure (fd
 * untouched). */
int hfd_move(int fd);
/* For the providers: fd moved if it can be, else fd itself (recorded either way, so the
 * program is told EBADF for it). A negative fd is returned as it is, errno kept. */
int hfd_keep(int fd);

void hfd_mark(int fd);
void hfd_unmark(int fd);
/* The lowest recorded number >= from, or -1 (close_range, closefrom). */
int hfd_next(int from);

#endif
