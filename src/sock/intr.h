/* intr.h: whether a blocking socket call that a signal interrupted restarts (signal(7)).
 *
 * The kernel restarts a socket's blocking recv/send/accept/connect after a handler that
 * was installed with SA_RESTART, unless the socket has SO_RCVTIMEO/SO_SNDTIMEO (then
 * EINTR), and a transfer that moved bytes returns their count. An SMC-R connection's wait
 * is a poll() or epoll_wait() of the socket layer, which the kernel never restarts: so the
 * layer needs to know which handlers ran during its wait. The interposer runs every
 * handler the program installs through a trampoline (src/preload/signal.c) that counts,
 * per thread, the handlers run and those of them without SA_RESTART. A wait takes a mark
 * before it sleeps; after EINTR, sock_intr_restarts(mark) says whether each handler that
 * ran since had SA_RESTART (and at least one ran: an EINTR from a handler the trampoline
 * did not see, installed behind libc's back, stays EINTR). Without the interposer (the
 * smcr_* API) nothing counts and every EINTR is returned, as before. */
#ifndef SMCR_SOCK_INTR_H
#define SMCR_SOCK_INTR_H

#include <stdbool.h>

#define SOCK_INTR_TLS __attribute__((tls_model("initial-exec")))

/* Written by the trampoline on the thread the handler runs on (a signal handler: plain
 * thread-local counters, read by the same thread). initial-exec: the access from a handler
 * must not allocate (the library is loaded at start under the interposer). */
extern _Thread_local SOCK_INTR_TLS volatile unsigned sock_intr_runs;
extern _Thread_local SOCK_INTR_TLS volatile unsigned sock_intr_norestart;

struct sock_intr_mark {
	unsigned runs, norestart;
};

static inline struct sock_intr_mark sock_intr_mark(void)
{
	struct sock_intr_mark m = { sock_intr_runs, sock_intr_norestart };
	return m;
}

/* After an EINTR of a wait that took m: true if it is to be restarted (see above). */
static inline bool sock_intr_restarts(struct sock_intr_mark m)
{
	return sock_intr_runs != m.runs && sock_intr_norestart == m.norestart;
}

#endif
