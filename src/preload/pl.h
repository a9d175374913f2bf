/* pl.h: what every wrapper file shares: entering and leaving a wrapper (depth, errno). */
#ifndef SMCR_PRELOAD_PL_H
#define SMCR_PRELOAD_PL_H

#include "preload/real.h"

#include <errno.h>

#include "preload/foreign.h"
#include "util/hfd.h"

/* A number of the library's own fds (util/hfd.h) is, to the program, a closed number: the
 * call fails with EBADF before it reaches anything. One compare for the program's numbers
 * (they are below the lowest hidden one, normally). */
#define PL_HIDDEN(fd, fail)                                  \
	do {                                                 \
		if (__builtin_expect(hfd_is(fd), 0)) {       \
			errno = EBADF;                       \
			return fail;                         \
		}                                            \
	} while (0)

/* The part of a wrapper that can run before the library's constructor, called by a
 * sanitizer's runtime from inside its own start (getrlimit, setrlimit, sigaction, ...):
 * its shadow memory is not there yet, so that part is not instrumented and calls only libc
 * or the kernel; the rest of the wrapper is a separate (instrumented) function. */
#define PL_EARLY __attribute__((no_sanitize("address", "thread", "undefined")))
#define PL_IS_EARLY() (!atomic_load_explicit(&pl_ready, memory_order_acquire))

/* The program's own soft RLIMIT_NOFILE (lim.c): the numbers it may name are below it. */
void pl_lim_init(void);
uint64_t pl_lim_soft(void);
bool pl_lim_virtual(void);
void pl_lim_exec_begin(void);
void pl_lim_exec_end(void);

/* Entering: the table is ready and this thread's depth counts one more. A second level on
 * one thread can only be a signal handler's call, since no internal call reaches a wrapper
 * (real.h); the check mode of the tests treats it as a failure. */

#define PL_ENTER(name)                     \
	int pl_saved_errno_ = errno;       \
	pl_ensure();                       \
	if (pl_depth++ && pl_check)        \
		pl_reentered(#name)

/* Leaving: on success errno is what it was at entry (the wrappers' own work changes none
 * of it the program could see); on failure it is the call's. */
#define PL_LEAVE(ok)                       \
	do {                               \
		pl_depth--;                \
		if (ok)                    \
			errno = pl_saved_errno_; \
	} while (0)

/* The wrapped names themselves (the __* aliases and _chk forms have no header of their
 * own; the others are compatible redeclarations). */
#define W(ret, name, params, args) ret name params;
#define V(ret, name, params) ret name params;
#include "preload/wrap.def"
#undef W
#undef V

/* A forked child's data call on its parent's SMC-R connection fails (foreign.c). */
#define PL_FOREIGN(fd)                                              \
	do {                                                        \
		if (__builtin_expect(pl_foreign_any(), 0) && pl_foreign(fd)) \
			return pl_foreign_fail(fd);                 \
	} while (0)

/* Accept at first use (src/sock/lsn.c): a call that needs fd's mode starts its server
 * handshake if it is still lazy. One relaxed load when no socket is lazy. */
extern atomic_uint sock_lazy_pending;
int sock_lazy_start(int fd);
void sock_lazy_decline(int fd);
void sock_early_settle(int fd);
void sock_lazy_decline_all(void);
#define PL_FIRST_USE(fd)                                                                \
	do {                                                                            \
		if (__builtin_expect(atomic_load_explicit(&sock_lazy_pending,          \
							  memory_order_relaxed), 0))   \
			(void)sock_lazy_start(fd);                                     \
	} while (0)

/* Waits across a fallback's swap (src/sock/sock.h struct sock.keep): armed keeps are
 * counted in sock_keep_live; sock_keep_get gives fd's keep number with a use held. */
struct sock;
extern atomic_uint sock_keep_live;
struct sock *sock_keep_get(int fd, int *keep);
void sock_keep_put(struct sock *s);

/* An epoll set that holds smcr fds, and the engine when it is up (src/sock/sock.h). */
bool sock_epoll_has_smcr(int epfd);
struct core_engine;
struct core_engine *sock_engine_if_up(void);

/* True if fd is an smcr socket (one table lookup, no system call). */
int smcr_is_socket(int fd);

#endif
