/* sig.h: the program-visible fd of an SMC-R connection and how the engine drives its
 * readiness (docs/design/engine-decisions.md decision 2; docs/parts/sock.md "Readiness").
 *
 * An SMC-R connection's fd is the "program end" (prog) of an AF_UNIX SOCK_STREAM socket
 * pair; the engine holds the other, "signal end" (end), at a hidden high fd number. The
 * program never reads or writes prog itself (every data call goes through smcr_recv/send,
 * which move bytes through the RMBEs); the kernel's poll/select/epoll on prog see exactly
 * the readiness TCP would show, because the engine shapes it with these rules:
 *
 *   POLLIN    a token byte is written from end to prog for every arrival of data, EOF or
 *             error (so each arrival is a new EPOLLET edge); at most SIG_TOKEN_CAP are kept
 *             queued (the oldest is read back first; the write still makes the edge). The
 *             receive path drains them when the RMBE is empty again (sig_drain_in).
 *             Exception (data.c "Deferred tokens"): an arrival taken by a thread spinning
 *             in a receive on that socket writes no token; that thread writes it after
 *             its read if data is left (and before it sleeps if it could not use it), so
 *             a poller never misses bytes nobody read, and no token is spent on bytes
 *             read at once (2 system calls per message saved when spinning).
 *   POLLOUT   prog's send buffer (SO_SNDBUF minimum) is filled from prog when the peer's
 *             RMBE is full (sig_block_out): AF_UNIX reports writable only while the bytes
 *             queued from prog use at most a quarter of its sndbuf, so one 4 KiB send is
 *             enough (probed once; else sends until EAGAIN). They are read back at end
 *             when space returns (sig_unblock_out), which wakes POLLOUT waiters.
 *             No exception: writability a loop reports is the kernel's at the same
 *             time (docs/design/readiness.md section 3).
 *   POLLRDHUP shutdown(end, SHUT_WR) when the peer sent "sending done" or closed
 *             (sig_rdhup): prog reads EOF forever, so POLLIN|POLLRDHUP, as a TCP FIN.
 *   POLLHUP   both directions shut, as TCP: the program's shutdown(SHUT_WR) becomes
 *             shutdown(prog, SHUT_WR) (sig_shut_wr), and with sig_rdhup prog's shutdown
 *             mask is complete. A program's SHUT_RD: shutdown(prog, SHUT_RD) (sig_shut_rd).
 *   POLLERR   a reset (peer abort, peer gone, link lost): end is closed while bytes from prog
 *             are unread in it (sig_error). AF_UNIX then gives prog ECONNRESET and the full
 *             shutdown mask: POLLIN|POLLOUT|POLLERR|POLLHUP|POLLRDHUP, the set a TCP socket
 *             shows after a RST (tests/unit/test_sig.c compares both).
 *   POLLPRI   urgent data pending (core's CORE_EV_PRI, TCP's urg_data VALID): one byte sent
 *             from end with MSG_OOB (sig_pri_on); AF_UNIX shows POLLPRI while it is queued
 *             and not read with MSG_OOB. sig_pri_off takes it back (recv MSG_OOB at prog)
 *             and empties prog's queue (tokens included: the caller re-adds one when data
 *             is still readable), exactly when TCP's POLLPRI goes off: the urgent byte
 *             read with MSG_OOB, or a read passed the mark (inline or not). Needs
 *             CONFIG_AF_UNIX_OOB (Linux >= 5.15) and the behaviour sig_pri_supported()
 *             probes once; without it POLLPRI is never shown (logged once).
 *             DEVIATION: AF_UNIX counts the OOB byte as queued data, so prog also shows
 *             POLLIN while POLLPRI is on, even when the urgent byte is the only unread
 *             byte and not inline (TCP then shows POLLPRI alone; a read returns EAGAIN).
 *
 * The fill/drain and token bytes never reach the program; only this file touches them. All
 * operations use MSG_DONTWAIT|MSG_NOSIGNAL, so prog's O_NONBLOCK flag (which mirrors the
 * program's setting, sig_set_nonblock) never changes what the engine does.
 *
 * Threads: any thread may call any operation; struct sig's lock serializes them. It is an
 * innermost lock: nothing is called with it held except these few syscalls. */
#ifndef SMCR_SOCK_SIG_H
#define SMCR_SOCK_SIG_H

#include <pthread.h>
#include <stdbool.h>

#include "util/err.h"

#define SIG_TOKEN_CAP 64     /* POLLIN tokens kept queued at most */
#define SIG_PROG_SNDBUF 4096 /* SO_SNDBUF asked for prog (the kernel doubles it) */

struct sig {
	pthread_mutex_t lock; /* protects every field below and the byte counts in the pair;
			       * the _Atomic ones are written under it and also read without
			       * it, by the fast paths that see nothing to do (a stale read
			       * there is the same race as a change right after the unlock,
			       * which the callers' re-check of the engine's mask covers) */
	int prog;	      /* program end; its number changes when installed (sig_install) */
	int end;	      /* signal end, hidden high fd; -1 after sig_error/sig_close */
	_Atomic unsigned tokens; /* token bytes queued from end towards prog; counted before
				  * the send (an unlocked reader may see one more, never one
				  * less: the fast paths then take the lock) */
	_Atomic bool sending; /* a token send is in flight: tokens may count it already, but
			       * prog may not show it yet. Set and cleared under the lock around the
			       * send (and the drain check before it, sig_readable_since); read
			       * without it by sig_drain_in and by sig_readable_if_none's fast
			       * path, which must not take "tokens > 0" for "POLLIN is on" while
			       * the byte is still on its way (else a program's poll right after
			       * its receive could miss POLLIN with bytes left,
			       * docs/parts/hold.md) */
	unsigned filled;      /* bytes queued from prog towards end (POLLOUT off when > 0) */
	_Atomic bool out_blocked; /* sig_block_out done and not undone */
	bool rdhup;	      /* shutdown(end, SHUT_WR) done */
	bool wr_shut;	      /* shutdown(prog, SHUT_WR) done */
	bool rd_shut;	      /* shutdown(prog, SHUT_RD) done */
	bool dead;	      /* sig_error done: end closed */
	bool small_sndbuf;    /* prog's SO_SNDBUF set to SIG_PROG_SNDBUF: only before the
			       * first fill (sig_block_out), not at sig_open: most
			       * connections never block POLLOUT (one call less each) */
	_Atomic bool pri;     /* an OOB byte is queued end -> prog (POLLPRI) */
	unsigned pre;	      /* of tokens: queued before that OOB byte (a plain read of
			       * more would pass the mark and drop it) */
	_Atomic bool nonblock; /* prog's O_NONBLOCK as last set by sig_set_nonblock (the
				* program's setting) */
	_Atomic unsigned drains; /* sig_drain_in calls so far: an arrival's token written
				  * after a drain that followed the read of its bytes would be
				  * stale (sig_readable_since) */
};

/* Creates the pair: prog at any free number (close-on-exec), end at a hidden one. */
SMCR_MUST_CHECK int sig_open(struct sig *s);
/* Moves prog onto fd number target (dup3; the file that was there is closed by it), with
 * close-on-exec as cloexec says. */
SMCR_MUST_CHECK int sig_install(struct sig *s, int target, bool cloexec);
/* Closes end (if still open). prog belongs to the program's fd and is closed by its owner.
 * Frees the lock. */
void sig_close(struct sig *s);
/* sig_close, with end's close done later (closeq.h): true when end was
 * queued (the caller calls sock_reap_soon). */
bool sig_close_later(struct sig *s);

/* The program's fd number stops being the program end (it is closed, or the TCP socket is
 * about to be put there): from now on nothing touches prog. */
void sig_forget_prog(struct sig *s);
/* The program end is now at number fd, another number of the same file (its previous
 * number was closed: sock.c "Numbers of one connection"). */
void sig_set_prog(struct sig *s, int fd);
/* Clears prog's pending socket error (after the program was told of it, as TCP clears
 * sk_err when it reports it). */
void sig_clear_error(struct sig *s);
void sig_set_nonblock(struct sig *s, bool on);
/* One more arrival (data, EOF, error): POLLIN, and a new edge. The only arrival that
 * writes none is one a thread waiting in a receive on the same socket takes and reads
 * within that call (data.c "Deferred tokens"); every arrival a call returns to the program
 * unread has its token (docs/design/readiness.md section 3). */
void sig_readable(struct sig *s);
/* The engine's callback's sig_readable (sock.c sock_apply_events). The callback runs after
 * the arrival's bytes became readable and computed its level mask some time before: the
 * program may have read those bytes and drained meanwhile, and a token written then says
 * POLLIN with nothing to read (a level-triggered poller wakes, its read gets EAGAIN: wrk
 * counts that as a read error). So the callback reads sig_drain_gen first, then checks
 * that data is still unread, then calls this, which writes the token only if no drain
 * happened since gen. A drain that comes after this check finds the token in flight and
 * takes it back (sig_drain_in), and the drainer re-reads the mask after draining
 * (sock_sync_after_call), so bytes still unread keep a token. */
unsigned sig_drain_gen(struct sig *s);
void sig_readable_since(struct sig *s, unsigned gen);
/* POLLIN on if no token is queued (no new edge otherwise). On return POLLIN is on: a
 * token another thread is still sending is waited for (the lock), not assumed. */
void sig_readable_if_none(struct sig *s);
/* Nothing left to read: POLLIN off (unless EOF/error made it permanent). Counts a drain
 * (sig_readable_since) whether or not a token was queued. */
void sig_drain_in(struct sig *s);
/* Peer's RMBE full: POLLOUT off. Idempotent. */
void sig_block_out(struct sig *s);
/* Space again: POLLOUT on. Idempotent. */
void sig_unblock_out(struct sig *s);
void sig_rdhup(struct sig *s);
void sig_shut_wr(struct sig *s);
void sig_shut_rd(struct sig *s);
void sig_error(struct sig *s);
/* Urgent data pending: POLLPRI on. Idempotent; no-op without sig_pri_supported(). */
void sig_pri_on(struct sig *s);
/* Urgent data read or passed: POLLPRI off. Empties prog's queue (tokens too); the caller
 * re-adds POLLIN (sig_readable_if_none) when data is still readable. Idempotent. */
bool sig_pri_off(struct sig *s); /* true if POLLPRI was on */
/* Whether this kernel's AF_UNIX MSG_OOB behaves as sig_pri_on/off need (probed once on
 * a scratch pair; logs one line when not). */
bool sig_pri_supported(void);

/* Moves fd to a hidden number (util/hfd.h: at or above sock_hidden_min(), recorded so the
 * interposer tells the program EBADF for it) and closes the old number. Returns the new
 * number or a negative code (errmap.h); on failure fd is untouched. */
SMCR_MUST_CHECK int sock_fd_hide(int fd);
/* A second number of fd's file at a hidden number, recorded; -1 with errno on failure. */
int sock_fd_dup_hidden(int fd);
/* Lowest number for hidden fds (util/hfd.h: above the program's limit under the
 * interposer, half the soft RLIMIT_NOFILE otherwise). */
int sock_hidden_min(void);

#endif
