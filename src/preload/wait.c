/* wait.c: the wrappers of the waits: poll, ppoll, select, pselect, epoll_wait, epoll_pwait,
 * epoll_pwait2 (and their fortified and alias forms), epoll_create/epoll_create1 and
 * epoll_ctl.
 *
 * Every wait goes to the kernel with the caller's timeout and signal mask: an smcr socket
 * is a real kernel fd whose readiness the engine drives (the TCP socket itself, or the
 * signalling end of an SMC-R connection, include/smcr/smcr.h), so the kernel's answer is
 * the right one by construction, for any mix of smcr and other fds, nested epoll, epoll
 * sets shared across fork, and waiters that are not under the interposer at all. Each
 * kind of wait is one function here so that the socket layer can later see waits (the
 * readiness design of issue 21 item 5) without touching the wrappers.
 *
 * epoll_ctl is smcr_epoll_ctl: it records the registrations of smcr fds so that they
 * move with the fd when a connection switches from its TCP socket to its SMC-R end or
 * back (include/smcr/smcr.h). smcr_epoll_wait is not used: its token-free arrivals and
 * quiet POLLOUT would hide readiness from other pollers of the same fds. */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <smcr/smcr.h>

extern void __chk_fail(void) __attribute__((noreturn));

/* Accept at first use: a wait on a lazy connection starts its handshake first, so the
 * kernel's wait sees the placeholder and then the connection's real readiness. */
static void pl_poll_first_use(const struct pollfd *p, nfds_t n)
{
	if (__builtin_expect(atomic_load_explicit(&sock_lazy_pending, memory_order_relaxed), 0))
		for (nfds_t i = 0; i < n; i++)
			if (p[i].fd >= 0)
				(void)sock_lazy_start(p[i].fd);
}

static void pl_select_first_use(int n, const fd_set *r, const fd_set *w, const fd_set *e)
{
	if (!__builtin_expect(atomic_load_explicit(&sock_lazy_pending, memory_order_relaxed), 0))
		return;
	for (int fd = 0; fd < n && fd < FD_SETSIZE; fd++)
		if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e)))
			(void)sock_lazy_start(fd);
}

static int pl_poll(struct pollfd *p, nfds_t n, int t)
{
	pl_poll_first_use(p, n);
	return PL_REAL(poll)(p, n, t);
}
int poll(struct pollfd *p, nfds_t n, int t) { return pl_poll(p, n, t); }
int __poll(struct pollfd *p, nfds_t n, int t) { return pl_poll(p, n, t); }
int __poll_chk(struct pollfd *p, nfds_t n, int t, size_t pl)
{
	if (pl / sizeof(*p) < n)
		__chk_fail();
	return pl_poll(p, n, t);
}

static int pl_ppoll(struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *m)
{
	pl_poll_first_use(p, n);
	return PL_REAL(ppoll)(p, n, t, m);
}
int ppoll(struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *m)
{
	return pl_ppoll(p, n, t, m);
}
int __ppoll_chk(struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *m,
		size_t pl)
{
	if (pl / sizeof(*p) < n)
		__chk_fail();
	return pl_ppoll(p, n, t, m);
}

static int pl_select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	pl_select_first_use(n, r, w, e);
	return PL_REAL(select)(n, r, w, e, t);
}
int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	return pl_select(n, r, w, e, t);
}
int __select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	return pl_select(n, r, w, e, t);
}
int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *m)
{
	pl_select_first_use(n, r, w, e);
	return PL_REAL(pselect)(n, r, w, e, t, m);
}

int epoll_create(int size) { return PL_REAL(epoll_create)(size); }
int epoll_create1(int fl) { return PL_REAL(epoll_create1)(fl); }

int epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
	PL_ENTER(epoll_ctl);
	if (op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD)
		PL_FIRST_USE(fd);
	int r = smcr_epoll_ctl(ep, op, fd, ev);
	PL_LEAVE(r == 0);
	return r;
}

int epoll_wait(int ep, struct epoll_event *ev, int n, int t)
{
	return PL_REAL(epoll_wait)(ep, ev, n, t);
}
int epoll_pwait(int ep, struct epoll_event *ev, int n, int t, const sigset_t *m)
{
	return PL_REAL(epoll_pwait)(ep, ev, n, t, m);
}
int epoll_pwait2(int ep, struct epoll_event *ev, int n, const struct timespec *t, const sigset_t *m)
{
	return PL_REAL(epoll_pwait2)(ep, ev, n, t, m);
}
