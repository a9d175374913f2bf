/* lazyclose.h: the close of a connection accepted and never used, under accept at first
 * use (lsn.c; docs/parts/connect.md "Undecided connections").
 *
 * TCP's close of such a connection is a FIN, and its client reads EOF with SO_ERROR 0.
 * An smcr client, though, has sent (or is about to send) its CLC Proposal, and a kernel
 * socket closed with unread bytes, or hit by bytes after its close, answers with an RST:
 * the client would see ECONNRESET. So the close of a lazy connection goes:
 *   - a whole Proposal already there: read it, and the program's close is the FIN;
 *   - anything else there (not CLC): nothing is read, the close resets as TCP's does;
 *   - nothing yet, or part of a Proposal: the FIN goes out now (shutdown SHUT_WR on a
 *     hidden second number of the file, then the program's number closes as usual), and
 *     the progress thread reads the Proposal when it comes and then closes the hidden
 *     number: still a FIN only, as TCP's. It closes it at once, unread, on anything but a
 *     Proposal (bytes that reach a closed TCP socket reset it: TCP's answer too), at the
 *     client's EOF, and at the server's wait for a client's first byte
 *     (sock_server_first_wait_ns: a plain client that never sends).
 * Not when a fork came since the accept (another process may hold the file and use it:
 * the caller checks), nor with SO_LINGER 0 (an abortive close resets).
 *
 * Bound: at most LAZYCLOSE_MAX such closes wait at once; past it the close is the plain
 * one (the race the wait closes comes back for those).
 *
 * Threads: lazyclose_prepare on the closing program thread (which holds the socket's
 * lock); every later step on the progress thread. A fork child keeps its copies of the
 * hidden numbers (close-on-exec) until it exits or execs; the parent's closes go on. */
#ifndef SMCR_SOCK_LAZYCLOSE_H
#define SMCR_SOCK_LAZYCLOSE_H

#define LAZYCLOSE_MAX 256

/* fd: the program's number of the lazy connection, about to be closed by the caller. */
void lazyclose_prepare(int fd);
/* Closes waiting now (tests, the count after rounds). */
unsigned lazyclose_pending(void);

#endif
