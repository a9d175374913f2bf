/* real.h: the real-call table of the interposer: the next definition (libc's, or another
 * preload's) of every name in wrap.def, and the per-thread state every wrapper keeps.
 *
 * Why: the wrappers define socket, read, close, ... themselves, so neither they nor the
 * smcr archives linked into libsmcr-preload.so may call those names directly (the call
 * would enter a wrapper again). The wrappers call PL_REAL(name); the archives were rewritten
 * at build time (objcopy --redefine-syms, src/preload/CMakeLists.txt) so that their
 * references to <name> are references to smcr_real_<name>, defined in real.c as a call
 * through this table. Nothing in the library references a wrapped name
 * (tests/preload: test_preload_syms checks `nm -D --undefined-only`).
 *
 * Threads: pl_real is filled once (pl_init, under pthread_once, from the constructor or
 * from whichever call comes first: another library's constructor, several threads' first
 * socket()) and only read after pl_ready is set (release/acquire). */
#ifndef SMCR_PRELOAD_REAL_H
#define SMCR_PRELOAD_REAL_H

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/sendfile.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

struct pl_real {
#define W(ret, name, params, args) ret(*name) params;
#define V(ret, name, params) ret(*name) params;
#include "preload/wrap.def"
#undef W
#undef V
};

extern struct pl_real pl_real;
extern atomic_bool pl_ready;

/* Fills pl_real (idempotent, thread-safe). A call made from inside it on the same thread
 * (a dlsym that re-enters us) finds its pointer NULL: pl_missing() answers it. */
void pl_init(void);

static inline void pl_ensure(void)
{
	if (!atomic_load_explicit(&pl_ready, memory_order_acquire))
		pl_init();
}

/* The real function for name, resolved if needed. */
#define PL_REAL(name) (pl_ensure(), pl_real.name)

/* A real function that cannot be resolved (re-entry during pl_init, or a libc without it):
 * logs once and sets ENOSYS. Returns -1. */
int pl_missing(const char *name);

/* Per-thread wrapper depth: a wrapper entered while another runs on the same thread can
 * only be a signal handler's call (internal calls never reach a wrapper, by the build).
 * With SMCR_PRELOAD_CHECK=1 such an entry from smcr's own code (pl_internal > 0) aborts:
 * the tests run so, to prove no internal call recurses. */
/* initial-exec: the library is loaded at the start (LD_PRELOAD), so its thread-locals are in
 * the static TLS block and each access is one instruction instead of a __tls_get_addr call
 * (two per wrapped call: bench/plcost). */
#define PL_TLS __attribute__((tls_model("initial-exec")))
extern _Thread_local PL_TLS unsigned pl_depth;
extern _Thread_local PL_TLS unsigned pl_internal;
extern atomic_uint pl_reentries;
extern bool pl_check;
/* Counts and reports such an entry, then aborts (check mode only). */
void pl_reentered(const char *name) __attribute__((noreturn));

#endif
