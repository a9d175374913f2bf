/* real.c: the real-call table (real.h), smcr_real_<name> for the rewritten archives, and the
 * library's constructor. */
#define _GNU_SOURCE
#include "preload/real.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/hfd.h"

extern atomic_bool sock_lazy_accept; /* src/sock/sock.h */
extern atomic_bool sock_early_connect;
void pl_lim_init(void);              /* lim.c */

struct pl_real pl_real;
atomic_bool pl_ready;
_Thread_local PL_TLS unsigned pl_depth;
_Thread_local PL_TLS unsigned pl_internal;
atomic_uint pl_reentries;
bool pl_check;

static pthread_once_t pl_once = PTHREAD_ONCE_INIT;
static _Thread_local bool pl_initing;

/* The message goes out with the raw write system call: the table may be what is missing. */
static void pl_say(const char *a, const char *b)
{
	char line[160];
	size_t n = (size_t)snprintf(line, sizeof(line), "smcr[%d] error preload: %s%s\n",
				    (int)getpid(), a, b);
	if (n >= sizeof(line))
		n = sizeof(line) - 1;
	(void)syscall(SYS_write, 2, line, n);
}

int pl_missing(const char *name)
{
	pl_say("no real function for ", name);
	errno = ENOSYS;
	return -1;
}

void pl_reentered(const char *name)
{
	atomic_fetch_add_explicit(&pl_reentries, 1, memory_order_relaxed);
	pl_say("a wrapper entered from inside another on one thread: ", name);
	abort();
}

static void pl_resolve(void)
{
	pl_initing = true;
	/* dlsym(RTLD_NEXT) gives the default version of each name in the objects after this
	 * one, which is the version a program linked today binds to. */
#define W(ret, name, params, args) pl_real.name = (ret(*) params)dlsym(RTLD_NEXT, #name);
#define V(ret, name, params) pl_real.name = (ret(*) params)dlsym(RTLD_NEXT, #name);
#include "preload/wrap.def"
#undef W
#undef V
	/* accept returns the kernel's socket, the handshake starts at first use (lsn.c) */
	atomic_store(&sock_lazy_accept, true);
	/* connect returns once TCP is up; the handshake decides in the background */
	atomic_store(&sock_early_connect, true);
	/* the library's own fds go above the program's open-files limit (lim.c) */
	pl_lim_init();
	const char *c = getenv("SMCR_PRELOAD_CHECK");
	pl_check = c && c[0] == '1';
	pl_initing = false;
	atomic_store_explicit(&pl_ready, true, memory_order_release);
}

void pl_init(void)
{
	if (pl_initing)
		return; /* re-entered from dlsym on this thread: the caller sees NULL */
	pthread_once(&pl_once, pl_resolve);
}

/* Runs before main and after the libraries this one needs (libc); constructors of other
 * preloads may run earlier and call us: pl_ensure covers them. */
__attribute__((constructor)) static void pl_ctor(void)
{
	pl_init();
}

/* ---- smcr_real_<name>: what the smcr archives call instead of <name> ---- */

/* The value a call returns when its real function is missing: NULL for a pointer, else -1. */
#define PL_FAIL(ret) _Generic((ret)0, FILE *: (ret)0, default: (ret)(intptr_t)-1)

#define PL_CALL(ret, name, args)                    \
	do {                                        \
		pl_ensure();                        \
		if (!pl_real.name) {                \
			(void)pl_missing(#name);    \
			return PL_FAIL(ret);        \
		}                                   \
		return pl_real.name args;           \
	} while (0)

#define W(ret, name, params, args) ret smcr_real_##name params;
#define V(ret, name, params) ret smcr_real_##name params;
#include "preload/wrap.def"
#undef W
#undef V

#define W(ret, name, params, args) \
	ret smcr_real_##name params { PL_CALL(ret, name, args); }
#define V(ret, name, params)
#include "preload/wrap.def"
#undef W
#undef V

/* The variadic ones: the third argument is an int or a pointer (fcntl(2), ioctl(2)); both
 * travel in one register, so it is read as a pointer and passed on as one, as libc does. */
int smcr_real_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	PL_CALL(int, fcntl, (fd, cmd, arg));
}

int smcr_real_fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	PL_CALL(int, fcntl64, (fd, cmd, arg));
}

int smcr_real___fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	PL_CALL(int, __fcntl, (fd, cmd, arg));
}

int smcr_real_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	PL_CALL(int, ioctl, (fd, req, arg));
}

/* Every close the library makes: a number of its own stops being hidden before the kernel
 * may give it to the program again (util/hfd.h). */
int smcr_real_close(int fd)
{
	if (hfd_is(fd))
		hfd_unmark(fd);
	PL_CALL(int, close, (fd));
}

int smcr_real___close(int fd)
{
	return smcr_real_close(fd);
}

void smcr_real_closefrom(int lo)
{
	pl_ensure();
	if (pl_real.closefrom)
		pl_real.closefrom(lo);
	else
		(void)pl_missing("closefrom");
}

/* Never called by the archives (they do not exit); the names are mapped anyway. */
void smcr_real__exit(int status)
{
	pl_ensure();
	pl_real._exit(status);
	__builtin_unreachable();
}

void smcr_real__Exit(int status)
{
	smcr_real__exit(status);
}
