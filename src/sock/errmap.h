/* errmap.h: the one place where the socket layer turns internal results into errno
 * (STYLE.md 11).
 *
 * Internal functions return 0 (or a count) on success and a negative code on failure:
 * either -SMCR_E_<NAME> from the error table (util/err.h; this layer's rows in
 * util/errors/sock.def, the engine's in core.def, ...), or, when a system call failed and
 * its errno is the right answer for the program (connect's ENETUNREACH, bind's EADDRINUSE,
 * ...), sock_err_sys(errno), which carries that errno unchanged. The public calls end in
 * sock_fail(rc): errno = the code's errno, return -1. */
#ifndef SMCR_SOCK_ERRMAP_H
#define SMCR_SOCK_ERRMAP_H

#include <errno.h>

#include "util/err.h"

/* Codes at or above this (negated) carry an errno: -(SOCK_ERRNO_BASE + errno). */
#define SOCK_ERRNO_BASE 0x100000

static inline int sock_err_sys(int errnum)
{
	return -(SOCK_ERRNO_BASE + (errnum > 0 ? errnum : EIO));
}

/* errno the program sees for an internal code (negative or positive). */
int sock_errno_of(int code);
/* Name for logs: the table's name, or "errno <n>". Returns a static or thread-local buffer. */
const char *sock_err_name(int code);

/* Sets errno from code and returns -1 (for the public calls' return statements). */
static inline int sock_fail(int code)
{
	errno = sock_errno_of(code);
	return -1;
}

#endif
