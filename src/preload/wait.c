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

#include <stdlib.h>

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

/* The library's own numbers (util/hfd.h) in a poll set are closed numbers to the program:
 * POLLNVAL for each, and the call returns at once, as the kernel does for a closed fd. The
 * kernel polls a copy in which those entries are -1 (ignored), with a zero timeout. */
static bool pl_poll_has_hidden(const struct pollfd *p, nfds_t n)
{
	int lo = atomic_load_explicit(&hfd_lo, memory_order_relaxed);
	for (nfds_t i = 0; i < n; i++)
		if (p[i].fd >= lo && hfd_is(p[i].fd))
			return true;
	return false;
}

static int pl_poll_hidden(struct pollfd *p, nfds_t n, const sigset_t *m)
{
	struct pollfd *c = malloc(n * sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	for (nfds_t i = 0; i < n; i++) {
		c[i] = p[i];
		if (hfd_is(p[i].fd))
			c[i].fd = -1;
	}
	struct timespec zero = { 0, 0 };
	int r = PL_REAL(ppoll)(c, n, &zero, m);
	if (r >= 0)
		for (nfds_t i = 0; i < n; i++) {
			p[i].revents = c[i].revents;
			if (c[i].fd == -1 && p[i].fd != -1) {
				p[i].revents = POLLNVAL;
				r++;
			}
		}
	free(c);
	return r;
}

static int pl_poll(struct pollfd *p, nfds_t n, int t)
{
	if (__builtin_expect(pl_poll_has_hidden(p, n), 0))
		return pl_poll_hidden(p, n, NULL);
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
	if (__builtin_expect(pl_poll_has_hidden(p, n), 0))
		return pl_poll_hidden(p, n, m);
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

/* select with one of the library's numbers in a set: EBADF, as for a closed fd. */
static bool pl_select_hidden(int n, const fd_set *r, const fd_set *w, const fd_set *e)
{
	int lo = atomic_load_explicit(&hfd_lo, memory_order_relaxed);
	for (int fd = lo; fd < n && fd < FD_SETSIZE; fd++)
		if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))) &&
		    hfd_is(fd))
			return true;
	return false;
}

static int pl_select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	if (__builtin_expect(pl_select_hidden(n, r, w, e), 0)) {
		errno = EBADF;
		return -1;
	}
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
	if (__builtin_expect(pl_select_hidden(n, r, w, e), 0)) {
		errno = EBADF;
		return -1;
	}
	pl_select_first_use(n, r, w, e);
	return PL_REAL(pselect)(n, r, w, e, t, m);
}

int epoll_create(int size) { return PL_REAL(epoll_create)(size); }
int epoll_create1(int fl) { return PL_REAL(epoll_create1)(fl); }

int epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
	PL_HIDDEN(ep, -1);
	PL_HIDDEN(fd, -1);
	PL_ENTER(epoll_ctl);
	if (op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD)
		PL_FIRST_USE(fd);
	int r = smcr_epoll_ctl(ep, op, fd, ev);
	PL_LEAVE(r == 0);
	return r;
}

int epoll_wait(int ep, struct epoll_event *ev, int n, int t)
{
	PL_HIDDEN(ep, -1);
	return PL_REAL(epoll_wait)(ep, ev, n, t);
}
int epoll_pwait(int ep, struct epoll_event *ev, int n, int t, const sigset_t *m)
{
	PL_HIDDEN(ep, -1);
	return PL_REAL(epoll_pwait)(ep, ev, n, t, m);
}
int epoll_pwait2(int ep, struct epoll_event *ev, int n, const struct timespec *t, const sigset_t *m)
{
	PL_HIDDEN(ep, -1);
	return PL_REAL(epoll_pwait2)(ep, ev, n, t, m);
}
