/* stdio.c: fdopen on an smcr socket.
 *
 * stdio reads and writes its fd with libc's internal calls, which never reach a wrapper
 * (STYLE.md 27). That is right for a socket whose fd is the kernel's TCP socket (TCP mode),
 * and wrong for an SMC-R connection, whose fd is the socket pair end the engine drives: so
 * on such an fd fdopen returns a stream of its own (fopencookie) whose reads, writes and
 * close are smcr_read, smcr_write and smcr_close. Its fileno() is -1 (glibc's rule for
 * cookie streams). A connection accepted and never used is declined first (src/sock/lsn.c),
 * so a stream on it is a plain TCP stream with no CLC byte in it. */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <smcr/smcr.h>

#include <stdint.h>
#include <stdio.h>

#include "sock/sock.h"

static ssize_t ck_read(void *c, char *b, size_t n)
{
	return smcr_read((int)(intptr_t)c, b, n);
}

static ssize_t ck_write(void *c, const char *b, size_t n)
{
	ssize_t w = smcr_write((int)(intptr_t)c, b, n);
	return w < 0 ? 0 : w; /* a cookie write reports an error as 0 bytes written */
}

static int ck_close(void *c)
{
	return smcr_close((int)(intptr_t)c);
}

FILE *fdopen(int fd, const char *mode)
{
	PL_HIDDEN(fd, NULL);
	struct sock *s = sock_get(fd);
	if (!s)
		return PL_REAL(fdopen)(fd, mode);
	sock_lazy_decline(fd);
	int st = atomic_load(&s->state);
	sock_put(s);
	if (st != SS_SMC && st != SS_HANDSHAKE)
		return PL_REAL(fdopen)(fd, mode); /* the kernel's TCP socket: stdio as usual */
	cookie_io_functions_t io = { .read = ck_read, .write = ck_write, .close = ck_close };
	return fopencookie((void *)(intptr_t)fd, mode, io);
}
