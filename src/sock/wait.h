/* wait.h: the socket layer's waits, for the interposer (src/preload's poll, ppoll, select,
 * pselect, epoll_wait, epoll_pwait, epoll_pwait2 wrappers) and for the blocking calls of
 * data.c: the wait policy's configuration, and one entry per kind of wait
 * (docs/design/readiness.md section 4 has the model).
 *
 * Contract for the interposer. Each entry behaves exactly as the libc call it is named
 * after, on any mix of smcr and other fds (fds in TCP mode are plain TCP sockets; fds in
 * SMC-R mode are the program ends of signalling pairs whose readiness the engine keeps
 * true, sig.h), with the caller's timeout and signal mask (applied atomically for the
 * sleep, as ppoll/epoll_pwait do), returning what it returns and setting errno as it
 * does (EINTR on a signal; no restart: poll and epoll_wait are never restarted after a
 * handler, signal(7)). Added on top: before it looks at the fds, and while it polls
 * before sleeping, the engine's progress runs in the calling thread, so SMC-R arrivals
 * are shown without waiting for the progress thread; a wait that would sleep arms the
 * completion queues first (every sleeper does: no readiness is ever late). The caller
 * must not hold any smcr lock and must be outside its own recursion guard (the calls
 * below go to the real-call table, sock_sys, never to a wrapper).
 *
 * Thread safety: any thread, any number at once, on the same or different fds. */
#ifndef SMCR_SOCK_WAIT_H
#define SMCR_SOCK_WAIT_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <time.h>

#include "sock/waitpol.h"

/* poll/ppoll: timeout NULL waits for ever; sigmask NULL keeps the thread's mask. */
int sock_wait_poll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
		   const sigset_t *sigmask);
/* epoll_wait/epoll_pwait/epoll_pwait2: timeout_ns < 0 waits for ever (epoll_pwait2's
 * timespec converted by the caller, rounded up to whole milliseconds for the sleep). */
int sock_wait_epoll(int epfd, struct epoll_event *evs, int max, long long timeout_ns,
		    const sigset_t *sigmask);

/* A timespec timeout in ns, as ppoll and epoll_pwait2 take one: -1 for NULL (for
 * ever), -2 when out of range (the caller's EINVAL); waits past 1e9 s are clamped there. */
long long sock_wait_ns_of(const struct timespec *t);
/* ns (>= 0) as a timespec, for the sleep of a wait that was given ns. */
static inline struct timespec sock_wait_ts_of(long long ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000),
				  .tv_nsec = (long)(ns % 1000000000) };
}

/* The wait policy's configuration (read once: $SMCR_BUSY_POLL_US, the floor of every
 * spin, 0-100000 µs, default 0; the defaults of waitpol.h otherwise). */
const struct waitpol_cfg *sock_waitpol_cfg(void);

#endif
