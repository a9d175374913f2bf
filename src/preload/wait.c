/* wait.c: the wrappers of the waits: poll, ppoll, select, pselect, epoll_wait, epoll_pwait,
 * epoll_pwait2 (and their fortified and alias forms), epoll_create/epoll_create1 and
 * epoll_ctl.
 *
 * Every wait is the kernel's wait with the caller's timeout and signal mask: an smcr socket
 * is a real kernel fd whose readiness the engine drives (the TCP socket itself, or the
 * signalling end of an SMC-R connection, include/smcr/smcr.h), so the kernel's answer is
 * the right one by construction, for any mix of smcr and other fds, nested epoll, epoll
 * sets shared across fork, and waiters that are not under the interposer at all. A wait
 * whose set holds an smcr socket while the engine runs goes through the socket layer's
 * wait (sock_wait_poll, sock_wait_epoll, sock/wait.h): the engine's progress runs in the
 * waiting thread, and it may poll for the wait policy's budget, before the same kernel
 * wait; select and pselect become a ppoll for that, with the bits mapped back.
 *
 * epoll_ctl is smcr_epoll_ctl: it records the registrations of smcr fds so that they
 * move with the fd when a connection switches from its TCP socket to its SMC-R end or
 * back (include/smcr/smcr.h). */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <smcr/smcr.h>

#include "sock/fdtab.h"
#include "sock/wait.h"
#include "util/clock.h"

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

/* ---- waits across a fallback's swap ----
 *
 * The kernel's poll and select register their wait queues once, on the files the numbers
 * had at the call. An undecided connection's number holds the placeholder; when its
 * handshake falls back, the TCP socket takes the number (src/sock/sock.c
 * sock_restore_tcp_locked) and a wait that looks again after that swap sees the TCP
 * socket, but sleeps on the placeholder's queue only: the TCP socket's data would never
 * wake it. So while any connection is undecided (sock_keep_live), a wait adds, for each
 * undecided connection in its set, the placeholder's hidden reference with events 0. The
 * fallback gives it POLLHUP; if nothing the caller asked for is ready then, the wait
 * starts again on the current files with the time left (each reference at most once per
 * call: it stays HUP). epoll needs none of this: its registrations move with the swap. */

/* Whether a wait on these fds goes through the socket layer's wait (sock_wait_poll, the
 * same wait as an epoll set's, docs/design/readiness.md section 4): the engine runs and
 * the set holds an smcr socket. */
static bool pl_poll_ours(const struct pollfd *p, nfds_t n)
{
	if (!sock_engine_if_up())
		return false;
	for (nfds_t i = 0; i < n; i++)
		if (fdtab_has(p[i].fd))
			return true;
	return false;
}

/* ppoll(p, n, t, m) with the keeps of p's undecided connections added, through
 * sock_wait_poll when ours. *used is false (and nothing was done) when p holds none and
 * !force: the caller makes its own call. On return, *left (when t) is the time that was
 * left. */
static int pl_poll_kept(struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *m,
			bool force, bool ours, bool *used, struct timespec *left)
{
	*used = false;
	if (n == 0 || n > (nfds_t)INT32_MAX / 2)
		return 0;
	/* one block, most aligned first: ks, at, c (the caller's entries, then the keeps),
	 * spent (this entry's keep returned once already) */
	size_t per = sizeof(struct sock *) + sizeof(nfds_t) + 2 * sizeof(struct pollfd) + 1;
	void *blk = calloc(n, per);
	if (!blk)
		return 0; /* the plain call: right but for a wait across a swap */
	struct sock **ks = blk;
	nfds_t *at = (nfds_t *)(ks + n);
	struct pollfd *c = (struct pollfd *)(at + n);
	bool *spent = (bool *)(c + 2 * n);
	long long ns = sock_wait_ns_of(t); /* the callers checked t: -1 or >= 0 */
	uint64_t end = ns < 0 ? 0 : smcr_now_ns() + (uint64_t)ns;
	struct timespec l = sock_wait_ts_of(ns < 0 ? 0 : ns);
	int r = 0;
	for (;;) {
		nfds_t k = 0;
		for (nfds_t i = 0; i < n; i++) {
			c[i] = p[i];
			c[i].revents = 0;
			int kf;
			struct sock *s;
			if (p[i].fd >= 0 && !spent[i] && (s = sock_keep_get(p[i].fd, &kf))) {
				c[n + k] = (struct pollfd){ .fd = kf, .events = 0 };
				ks[k] = s;
				at[k++] = i;
			}
		}
		if (k == 0 && !*used && !force)
			break; /* none: the caller's own call */
		*used = true;
		r = ours ? sock_wait_poll(c, n + k, t ? &l : NULL, m)
			 : PL_REAL(ppoll)(c, n + k, t ? &l : NULL, m);
		int err = errno;
		bool again = false;
		for (nfds_t j = 0; j < k; j++) {
			if (c[n + j].revents) {
				spent[at[j]] = true;
				again = true;
			}
			sock_keep_put(ks[j]);
		}
		if (t) {
			uint64_t now = smcr_now_ns();
			l = sock_wait_ts_of(now < end ? (long long)(end - now) : 0);
		}
		if (r < 0) {
			errno = err;
			break;
		}
		int real = 0;
		for (nfds_t i = 0; i < n; i++) {
			p[i].revents = c[i].revents;
			real += c[i].revents != 0;
		}
		r = real;
		if (real > 0 || !again)
			break; /* ready, or the time is up */
	}
	if (left)
		*left = l;
	free(blk);
	return r;
}

static int pl_poll(struct pollfd *p, nfds_t n, int t)
{
	if (__builtin_expect(pl_poll_has_hidden(p, n), 0))
		return pl_poll_hidden(p, n, NULL);
	pl_poll_first_use(p, n);
	bool ours = pl_poll_ours(p, n);
	struct timespec ts = { t / 1000, (long)(t % 1000) * 1000000L };
	if (__builtin_expect(atomic_load_explicit(&sock_keep_live, memory_order_relaxed), 0)) {
		bool used;
		int r = pl_poll_kept(p, n, t < 0 ? NULL : &ts, NULL, false, ours, &used, NULL);
		if (used)
			return r;
	}
	if (ours)
		return sock_wait_poll(p, n, t < 0 ? NULL : &ts, NULL);
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
	bool ours = pl_poll_ours(p, n);
	if (__builtin_expect(atomic_load_explicit(&sock_keep_live, memory_order_relaxed), 0)) {
		bool used;
		if (sock_wait_ns_of(t) == -2) {
			errno = EINVAL;
			return -1;
		}
		int r = pl_poll_kept(p, n, t, m, false, ours, &used, NULL);
		if (used)
			return r;
	}
	if (ours)
		return sock_wait_poll(p, n, t, m);
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

/* A select whose sets hold an smcr socket while the engine runs, or an undecided
 * connection (sock_keep_live): the same wait as a ppoll over the sets' fds (pl_poll_kept:
 * through sock_wait_poll, with the keeps added), the result mapped back as the kernel's
 * select maps poll bits (read: IN, HUP, ERR; write: OUT, ERR; except: PRI). *used false:
 * nothing done (neither in the sets, or no memory). */
static int pl_select_poll(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
			  const sigset_t *m, bool *used, struct timespec *left)
{
	*used = false;
	if (t)
		*left = *t;
	int lim = n < FD_SETSIZE ? n : FD_SETSIZE;
	nfds_t k = 0;
	bool kept = false, ours = false;
	bool up = sock_engine_if_up() != NULL;
	bool live = atomic_load_explicit(&sock_keep_live, memory_order_relaxed);
	for (int fd = 0; fd < lim; fd++)
		if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))) {
			k++;
			int kf;
			struct sock *s;
			if (up && !ours && fdtab_has(fd))
				ours = true;
			if (live && !kept && (s = sock_keep_get(fd, &kf))) {
				kept = true;
				sock_keep_put(s);
			}
		}
	if (!kept && !ours)
		return 0;
	struct pollfd *p = malloc(k * sizeof(*p));
	if (!p)
		return 0;
	k = 0;
	for (int fd = 0; fd < lim; fd++) {
		short ev = (short)((r && FD_ISSET(fd, r) ? POLLIN : 0) |
				   (w && FD_ISSET(fd, w) ? POLLOUT : 0) |
				   (e && FD_ISSET(fd, e) ? POLLPRI : 0));
		if (ev)
			p[k++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	int got = pl_poll_kept(p, k, t, m, true, ours, used, left);
	if (!*used || got < 0) {
		free(p);
		return got;
	}
	int cnt = 0;
	for (nfds_t i = 0; i < k; i++)
		if (p[i].revents & POLLNVAL) {
			free(p);
			errno = EBADF;
			return -1;
		}
	for (nfds_t i = 0; i < k; i++) {
		int fd = p[i].fd;
		short re = p[i].revents;
		if (r && FD_ISSET(fd, r) && !(re & (POLLIN | POLLHUP | POLLERR)))
			FD_CLR(fd, r);
		else if (r && FD_ISSET(fd, r))
			cnt++;
		if (w && FD_ISSET(fd, w) && !(re & (POLLOUT | POLLERR)))
			FD_CLR(fd, w);
		else if (w && FD_ISSET(fd, w))
			cnt++;
		if (e && FD_ISSET(fd, e) && !(re & POLLPRI))
			FD_CLR(fd, e);
		else if (e && FD_ISSET(fd, e))
			cnt++;
	}
	free(p);
	if (cnt == 0 && got > 0) {
		/* only bits select does not report (HUP on a write-only entry): select's own
		 * wait for the time left, on files that no longer change */
		*used = false;
		return 0;
	}
	return cnt;
}

/* The caller's sets as given, for the plain call after pl_select_poll declined */
struct pl_sets {
	fd_set r, w, e;
};

static void pl_sets_save(struct pl_sets *s, const fd_set *r, const fd_set *w, const fd_set *e)
{
	if (r)
		s->r = *r;
	if (w)
		s->w = *w;
	if (e)
		s->e = *e;
}

static void pl_sets_restore(const struct pl_sets *s, fd_set *r, fd_set *w, fd_set *e)
{
	if (r)
		*r = s->r;
	if (w)
		*w = s->w;
	if (e)
		*e = s->e;
}

static int pl_select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	if (__builtin_expect(pl_select_hidden(n, r, w, e), 0)) {
		errno = EBADF;
		return -1;
	}
	pl_select_first_use(n, r, w, e);
	if ((atomic_load_explicit(&sock_keep_live, memory_order_relaxed) || sock_engine_if_up()) &&
	    (!t || (t->tv_sec >= 0 && t->tv_usec >= 0))) {
		struct pl_sets saved;
		pl_sets_save(&saved, r, w, e);
		struct timespec ts, left;
		if (t) {
			ts.tv_sec = t->tv_sec + t->tv_usec / 1000000;
			ts.tv_nsec = (long)(t->tv_usec % 1000000) * 1000L;
		}
		bool used;
		int got = pl_select_poll(n, r, w, e, t ? &ts : NULL, NULL, &used, &left);
		if (used) {
			if (t) /* Linux's select leaves the time not slept in *t */
				*t = (struct timeval){ left.tv_sec, left.tv_nsec / 1000 };
			return got;
		}
		pl_sets_restore(&saved, r, w, e);
		if (t)
			*t = (struct timeval){ left.tv_sec, left.tv_nsec / 1000 };
	}
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
	if ((atomic_load_explicit(&sock_keep_live, memory_order_relaxed) || sock_engine_if_up()) &&
	    sock_wait_ns_of(t) != -2) {
		struct pl_sets saved;
		pl_sets_save(&saved, r, w, e);
		struct timespec left;
		bool used;
		int got = pl_select_poll(n, r, w, e, t, m, &used, &left);
		if (used)
			return got;
		pl_sets_restore(&saved, r, w, e);
		if (t)
			return PL_REAL(pselect)(n, r, w, e, &left, m);
	}
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

/* A set that holds smcr fds (smcr_epoll_ctl counts them per epfd) is waited on through
 * sock_wait_epoll (src/sock/wait.h): the engine's progress runs in this thread first and
 * while it polls before sleeping, so an SMC-R arrival is seen without waiting for the
 * progress thread's wake-up and token; a sleep arms the CQs first and sleeps in the kernel
 * on the set itself, so readiness stays the kernel's (tokens, sig.h). Other sets, and
 * every call before the engine is up, go straight to the kernel. */
static bool pl_epoll_ours(int ep, int n)
{
	return n > 0 && sock_epoll_has_smcr(ep) && sock_engine_if_up();
}

int epoll_wait(int ep, struct epoll_event *ev, int n, int t)
{
	PL_HIDDEN(ep, -1);
	if (pl_epoll_ours(ep, n))
		return sock_wait_epoll(ep, ev, n, t < 0 ? -1 : (long long)t * 1000000ll, NULL);
	return PL_REAL(epoll_wait)(ep, ev, n, t);
}
int epoll_pwait(int ep, struct epoll_event *ev, int n, int t, const sigset_t *m)
{
	PL_HIDDEN(ep, -1);
	if (pl_epoll_ours(ep, n))
		return sock_wait_epoll(ep, ev, n, t < 0 ? -1 : (long long)t * 1000000ll, m);
	return PL_REAL(epoll_pwait)(ep, ev, n, t, m);
}
int epoll_pwait2(int ep, struct epoll_event *ev, int n, const struct timespec *t, const sigset_t *m)
{
	PL_HIDDEN(ep, -1);
	long long ns;
	if (pl_epoll_ours(ep, n) && (ns = sock_wait_ns_of(t)) != -2)
		return sock_wait_epoll(ep, ev, n, ns, m);
	return PL_REAL(epoll_pwait2)(ep, ev, n, t, m);
}
