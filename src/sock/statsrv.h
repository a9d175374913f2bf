/* statsrv.h: how smcr-stat (tools/smcr-stat) reads an smcr process's state from outside.
 *
 * Every process that makes an smcr socket listens on an abstract Unix socket named
 * STATSRV_PREFIX "<euid>/<pid>" (no file: the kernel removes the name the moment the
 * process dies, SIGKILL included, so a dead process can never be listed and leaves
 * nothing behind). The progress thread answers: it checks the caller's SO_PEERCRED (the
 * same user or root; anyone else is closed on without a byte, so one user cannot read
 * another's connections), reads one request line "json|text WHAT [reset]" within
 * 100 ms, writes the reply and closes. WHAT: conns (SMC-R and TCP-mode connections),
 * listen, all, lgs (link groups), devs (devices), stats (the SMCR_STATS counters; "reset"
 * makes later replies count from now). Nothing is shared with the reader, so nothing can
 * be left half-updated by a process that dies, and the data path pays nothing: the
 * connections are read (SOL_SMCR info, TCP_INFO for TCP mode) only when asked.
 * The socket sits at a hidden fd number (sock_hidden_min) with FD_CLOEXEC; a forked child
 * closes its copy and opens its own at its next listen, connect or accept.
 * SMCR_STAT_SOCKET=0: none (and no thread for it).
 * smcr-stat finds the processes in /proc/net/unix. */
#ifndef SMCR_SOCK_STATSRV_H
#define SMCR_SOCK_STATSRV_H

#define STATSRV_PREFIX "smcr-stat/" /* after the abstract name's leading NUL */

enum statsrv_what {
	STATSRV_CONNS,
	STATSRV_LISTEN,
	STATSRV_ALL,
	STATSRV_LGS,
	STATSRV_DEVS,
	STATSRV_STATS,
};

/* Starts this process's server if it is not running yet (one relaxed atomic load when it
 * is), and with it the progress thread that serves it. Called when the progress thread
 * starts (progress.c) and by every listen, connect and accept of an smcr socket (api.c):
 * a process is listed by smcr-stat from its first listener or connection, a TCP one
 * (a rule, no peer) included. A socket alone starts nothing, so a program that forks
 * before it listens or connects stays single-threaded; a forked child starts its own at
 * its next listen, connect or accept. Never called from a fork handler. */
void statsrv_ensure(void);

#endif
