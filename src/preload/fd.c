/* fd.c: the wrappers of the calls on fd numbers: close (and close_range, closefrom),
 * dup/dup2/dup3, fcntl (fcntl64, __fcntl), ioctl and fstat (fstat64).
 *
 * Each treats a number of the library's own (util/hfd.h) as a closed one (EBADF), and the
 * numbers a program may name as limited by its own RLIMIT_NOFILE (lim.c), as the kernel
 * does with the limit the program set. */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <smcr/smcr.h>

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sock/fdtab.h"
#include "sock/sock.h"
#include "util/log.h"

static int pl_close(int fd)
{
	PL_HIDDEN(fd, -1);
	if (__builtin_expect(pl_foreign_any(), 0) && pl_foreign(fd))
		return pl_foreign_close(fd);
	PL_ENTER(close);
	int r = smcr_close(fd);
	PL_LEAVE(r == 0);
	return r;
}
int close(int fd) { return pl_close(fd); }
int __close(int fd) { return pl_close(fd); }

/* Every smcr socket in [lo, hi] is closed through smcr_close first (its protocol close),
 * then the kernel closes the rest. CLOSE_RANGE_CLOEXEC closes nothing: plain. */
static void pl_close_smcr_range(unsigned lo, unsigned hi)
{
	for (int fd = fdtab_next((int)(lo > INT_MAX ? INT_MAX : lo)); fd >= 0 && (unsigned)fd <= hi;
	     fd = fdtab_next(fd + 1))
		(void)smcr_close(fd);
}

/* The kernel's close_range over [lo, hi] without the library's own numbers: one call per
 * gap between them (the flags on each; a second CLOSE_RANGE_UNSHARE finds the table
 * unshared already). Numbers the library takes meanwhile in a gap are the program's race
 * with itself, as with any close of numbers another thread may be opening. */
static int pl_close_gaps(unsigned lo, unsigned hi, int fl)
{
	unsigned a = lo;
	for (int h = hfd_next(lo > INT_MAX ? INT_MAX : (int)lo); h >= 0 && (unsigned)h <= hi;
	     h = hfd_next(h + 1)) {
		if ((unsigned)h > a && PL_REAL(close_range)(a, (unsigned)h - 1, fl) < 0)
			return -1;
		a = (unsigned)h + 1;
		if (a == 0)
			return 0;
	}
	if (a <= hi)
		return PL_REAL(close_range)(a, hi, fl);
	return 0;
}

int close_range(unsigned lo, unsigned hi, int fl)
{
	PL_ENTER(close_range);
	if (!(fl & CLOSE_RANGE_CLOEXEC) && lo <= hi)
		pl_close_smcr_range(lo, hi);
	int r = lo <= hi ? pl_close_gaps(lo, hi, fl) : PL_REAL(close_range)(lo, hi, fl);
	PL_LEAVE(r == 0);
	return r;
}

/* closefrom: the gaps below the highest number of the library's through close_range (one
 * by one where the kernel has none), the rest through libc's closefrom. */
void closefrom(int lo)
{
	PL_ENTER(closefrom);
	if (lo >= 0) {
		pl_close_smcr_range((unsigned)lo, UINT_MAX);
		int a = lo;
		for (int h = hfd_next(lo); h >= 0; h = hfd_next(h + 1)) {
			if (h > a && PL_REAL(close_range)((unsigned)a, (unsigned)h - 1, 0) < 0)
				for (int fd = a; fd < h; fd++)
					(void)PL_REAL(close)(fd);
			a = h + 1;
		}
		lo = a;
	}
	PL_REAL(closefrom)(lo);
	PL_LEAVE(true);
}

/* dup, dup2, dup3: a copy of an SMC-R connection is a second number of the same
 * connection (src/sock/sock.c "Numbers of one connection"); of anything else the kernel's
 * copy. dup2/dup3 onto an smcr socket close it first through smcr_close, as the kernel's
 * dup2 closes newfd. A connection accepted and never used is declined first (TCP, so the
 * kernel's copy carries no CLC byte). */

/* A new number the kernel gave at or above the program's limit: Linux with that limit had
 * none (every number below it is taken), so EMFILE. */
static int pl_over_limit(int r)
{
	if (r >= 0 && (uint64_t)r >= pl_lim_soft()) {
		(void)smcr_close(r);
		errno = EMFILE;
		return -1;
	}
	return r;
}

static int pl_dup_common(int fd, int nfd, int min, bool cloexec, bool is3)
{
	if (hfd_is(fd)) {
		errno = EBADF;
		return -1;
	}
	/* dup2/dup3 onto a number past the program's limit: EBADF; F_DUPFD from there: EINVAL
	 * (the kernel's answers with that limit) */
	if (nfd >= 0 && (uint64_t)nfd >= pl_lim_soft()) {
		errno = EBADF;
		return -1;
	}
	if (nfd < 0 && min >= 0 && (uint64_t)min >= pl_lim_soft()) {
		errno = EINVAL;
		return -1;
	}
	if (nfd >= 0 && hfd_is(nfd)) {
		/* A number of the library's inside the program's range (no room above its
		 * limit): the library's fd cannot be moved under its users (docs/INTERPOSER.md
		 * "The library's own fds"), so the number is refused as if out of range. */
		SMCR_LOG_RL(SMCR_LOG_WARN, "preload",
			    "dup2/dup3 onto fd %d, one of the library's own: EBADF", nfd);
		errno = EBADF;
		return -1;
	}
	if (nfd >= 0 && fd == nfd) {
		if (is3) {
			errno = EINVAL;
			return -1;
		}
		return PL_REAL(fcntl)(fd, F_GETFD) < 0 ? -1 : fd;
	}
	if (smcr_is_socket(fd)) {
		sock_lazy_decline(fd);
		/* undecided (connect returned once TCP was up): the copy is made of the
		 * decided connection (docs/INTERPOSER.md "Undecided connections") */
		sock_early_settle(fd);
	}
	if (nfd >= 0 && smcr_is_socket(nfd))
		(void)smcr_close(nfd);
	int r = sock_dup(fd, nfd, min, cloexec);
	if (r == SOCK_DUP_PLAIN) {
		if (nfd >= 0)
			return is3 ? PL_REAL(dup3)(fd, nfd, cloexec ? O_CLOEXEC : 0)
				   : PL_REAL(dup2)(fd, nfd);
		return pl_over_limit(PL_REAL(fcntl)(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, min));
	}
	if (r < 0) {
		errno = smcr_err_errno(r);
		return -1;
	}
	return nfd >= 0 ? r : pl_over_limit(r);
}

static int pl_dup3(int fd, int nfd, int fl, bool is3)
{
	PL_ENTER(dup3);
	int r;
	if (is3 && (fl & ~O_CLOEXEC)) {
		errno = EINVAL;
		r = -1;
	} else {
		r = pl_dup_common(fd, nfd, 0, (fl & O_CLOEXEC) != 0, is3);
	}
	PL_LEAVE(r >= 0);
	return r;
}
int dup2(int fd, int nfd) { return pl_dup3(fd, nfd, 0, false); }
int __dup2(int fd, int nfd) { return pl_dup3(fd, nfd, 0, false); }
int dup3(int fd, int nfd, int fl) { return pl_dup3(fd, nfd, fl, true); }

int dup(int fd)
{
	PL_ENTER(dup);
	int r = pl_dup_common(fd, -1, 0, false, false);
	PL_LEAVE(r >= 0);
	return r;
}

static int pl_fcntl(int fd, int cmd, void *arg)
{
	PL_HIDDEN(fd, -1);
	PL_ENTER(fcntl);
	int r;
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		r = pl_dup_common(fd, -1, (int)(intptr_t)arg, cmd == F_DUPFD_CLOEXEC, false);
	else
		r = smcr_fcntl(fd, cmd, arg);
	PL_LEAVE(r != -1);
	return r;
}

#define PL_VA_ARG(last, arg)            \
	va_list ap;                     \
	va_start(ap, last);             \
	void *arg = va_arg(ap, void *); \
	va_end(ap)

int fcntl(int fd, int cmd, ...) { PL_VA_ARG(cmd, a); return pl_fcntl(fd, cmd, a); }
int fcntl64(int fd, int cmd, ...) { PL_VA_ARG(cmd, a); return pl_fcntl(fd, cmd, a); }
int __fcntl(int fd, int cmd, ...) { PL_VA_ARG(cmd, a); return pl_fcntl(fd, cmd, a); }

int ioctl(int fd, unsigned long req, ...)
{
	PL_HIDDEN(fd, -1);
	PL_VA_ARG(req, a);
	if (req == FIONREAD || req == SIOCOUTQ || req == SIOCOUTQNSD || req == SIOCATMARK)
		PL_FIRST_USE(fd); /* they read the connection's state (SIOCINQ == FIONREAD) */
	PL_ENTER(ioctl);
	int r = smcr_ioctl(fd, req, a);
	PL_LEAVE(r != -1);
	return r;
}

/* Before the constructor (a sanitizer's start, pl.h PL_EARLY): the kernel's fstat
 * (newfstatat with AT_EMPTY_PATH fills the 64-bit struct stat libc gives). */
__attribute__((noinline)) static int pl_fstat(int fd, struct stat *st)
{
	PL_HIDDEN(fd, -1);
	return PL_REAL(fstat)(fd, st);
}

__attribute__((noinline)) static int pl_fstat64(int fd, struct stat64 *st)
{
	PL_HIDDEN(fd, -1);
	return PL_REAL(fstat64)(fd, st);
}

PL_EARLY int fstat(int fd, struct stat *st)
{
	if (PL_IS_EARLY())
		return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
	return pl_fstat(fd, st);
}

PL_EARLY int fstat64(int fd, struct stat64 *st)
{
	if (PL_IS_EARLY())
		return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
	return pl_fstat64(fd, st);
}
