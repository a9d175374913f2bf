/* fd.c: the wrappers of the calls on fd numbers: close (and close_range, closefrom),
 * dup/dup2/dup3, fcntl (fcntl64, __fcntl) and ioctl. */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <smcr/smcr.h>

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "sock/fdtab.h"

static int pl_close(int fd)
{
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

int close_range(unsigned lo, unsigned hi, int fl)
{
	PL_ENTER(close_range);
	if (!(fl & CLOSE_RANGE_CLOEXEC) && lo <= hi)
		pl_close_smcr_range(lo, hi);
	int r = PL_REAL(close_range)(lo, hi, fl);
	PL_LEAVE(r == 0);
	return r;
}

void closefrom(int lo)
{
	PL_ENTER(closefrom);
	if (lo >= 0)
		pl_close_smcr_range((unsigned)lo, UINT_MAX);
	PL_REAL(closefrom)(lo);
	PL_LEAVE(true);
}

/* dup2/dup3 onto an smcr socket close it first, as the kernel's dup2 closes newfd: the
 * protocol close runs and the table slot is free for what lands there. */
static int pl_dup3(int fd, int nfd, int fl, bool is3)
{
	PL_ENTER(dup3);
	int r;
	if (fd == nfd) {
		r = is3 ? (errno = EINVAL, -1) : PL_REAL(fcntl)(fd, F_GETFD) < 0 ? -1 : fd;
	} else if (smcr_is_socket(fd)) {
		sock_lazy_decline(fd); /* a copy of a lazy socket: TCP (sock.h) */
		r = smcr_fcntl(fd, F_DUPFD, 0); /* refuses an fd it cannot copy */
		if (r >= 0) {
			PL_REAL(close)(r);
			if (smcr_is_socket(nfd))
				(void)smcr_close(nfd);
			r = is3 ? PL_REAL(dup3)(fd, nfd, fl) : PL_REAL(dup2)(fd, nfd);
		}
	} else {
		if (smcr_is_socket(nfd))
			(void)smcr_close(nfd);
		r = is3 ? PL_REAL(dup3)(fd, nfd, fl) : PL_REAL(dup2)(fd, nfd);
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
	sock_lazy_decline(fd);
	int r = smcr_fcntl(fd, F_DUPFD, 0);
	PL_LEAVE(r >= 0);
	return r;
}

static int pl_fcntl(int fd, int cmd, void *arg)
{
	PL_ENTER(fcntl);
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		sock_lazy_decline(fd);
	int r = smcr_fcntl(fd, cmd, arg);
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
	PL_VA_ARG(req, a);
	if (req == FIONREAD || req == SIOCOUTQ || req == SIOCOUTQNSD || req == SIOCATMARK)
		PL_FIRST_USE(fd); /* they read the connection's state (SIOCINQ == FIONREAD) */
	PL_ENTER(ioctl);
	int r = smcr_ioctl(fd, req, a);
	PL_LEAVE(r != -1);
	return r;
}
