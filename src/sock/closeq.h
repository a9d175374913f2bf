/* closeq.h: "close later" for the hidden fds of closed SMC-R sockets (docs/parts/connect.md
 * "Close").
 *
 * Why: a short connection's smcr_close closed its hidden TCP socket (its FIN runs through
 * the loopback stack with the peer's processing inline: ~24 µs) and the signal pair's
 * hidden end inline, and the program's next call (the connect test's next socket()) waited
 * for all of it. Those fds are no longer used by anything once the socket is closed: the
 * program's own number is closed at once by smcr_close (POSIX: the number is free when
 * close returns), so only the kernel objects behind hidden numbers outlive the call.
 * Their closes are queued here and done where a thread waits anyway:
 *   - the start of a data wait (data.c wait_for),
 *   - a blocking accept before it sleeps while no handshake is in flight (lsn.c: not in
 *     the wait for a Confirm, which is on the connection's critical path),
 *   - the close reaper's progress-thread timer (api.c), so an idle process closes them
 *     within CLOSEQ_TIMER_MS,
 *   - progress_stop (progress.c), which disarms that timer,
 *   - fork (pthread_atfork prepare: the child must not keep TCP connections open) and
 *     process exit (atexit).
 * A full list (CLOSEQ_MAX fds) closes the new fd at once; an fd below the hidden range
 * (sock_hidden_min() 0, or a number the program could get) is closed at once too, so the
 * numbers the program sees never change. $SMCR_CLOSEQ=0 turns the deferral off;
 * $SMCR_CLOSEQ_MS sets the timer's bound (tests).
 *
 * The hidden TCP socket of a connection whose peer had closed (its C arrived) is queued
 * with CLOSEQ_RST: the drain sets SO_LINGER 0 before the close, so it ends with an RST,
 * not a FIN exchange and a TIME_WAIT (api.c sock_close says when; $SMCR_CLOSE_RST=0 off).
 *
 * Locking: closeq_lock (static, a leaf: nothing else is taken under it but close(2) and
 * setsockopt(2)) protects the list; its length is mirrored in an atomic so that a wait with
 * nothing to close costs one load. Any thread. */
#ifndef SMCR_SOCK_CLOSEQ_H
#define SMCR_SOCK_CLOSEQ_H

#include <stdbool.h>
#include <stdint.h>

#define CLOSEQ_MAX 64	     /* fds queued at most (two per connection) */
#define CLOSEQ_WAIT_MAX 8    /* closes done by one wait's drain (bounds its delay) */
#define CLOSEQ_TIMER_MS 5    /* an idle process closes them within this (the timer) */

enum closeq_how {
	CLOSEQ_PLAIN = 0, /* close(2) */
	CLOSEQ_RST = 1,	  /* SO_LINGER {1, 0} first: the TCP connection ends with an RST */
};

/* Closes fd now or later (rules above). Returns true when it was queued: the caller then
 * makes sure the timer runs (sock_reap_soon, api.c; asked at every add, not only when the
 * list was empty: progress_stop disarms every timer, and a list that never empties again
 * would otherwise wait for a wait). */
bool closeq_close(int fd, enum closeq_how how);
/* Closes up to max queued fds (a wait site); cheap when the list is empty. */
void closeq_drain(unsigned max);
/* Closes every queued fd. */
void closeq_drain_all(void);
/* Fds queued now (tests, the timer). */
unsigned closeq_pending(void);
/* Fds queued since the process started (the timer: was the list used since its last
 * turn). */
uint64_t closeq_queued_total(void);
/* Reads $SMCR_CLOSEQ, $SMCR_CLOSEQ_MS and $SMCR_CLOSE_RST again (tests: a forked child
 * whose parent read them already). Call while nothing is queued. */
void closeq_reread_env(void);
/* The timer's bound in ms: CLOSEQ_TIMER_MS, or $SMCR_CLOSEQ_MS (1..60000; tests). */
unsigned closeq_timer_ms(void);
/* Whether SO_LINGER 0 is used for a closed peer's TCP socket ($SMCR_CLOSE_RST, default 1). */
bool closeq_rst_enabled(void);

#endif
