/* sock.h: the socket layer's internal object and the functions its files share.
 *
 * One struct sock per smcr socket (an fd smcr_socket or smcr_accept returned), found by fd
 * number through the fd table (fdtab.h). Its life:
 *
 *   NEW ──listen──► LISTEN
 *    │ connect (rule tcp)              accept (rule tcp) ─► TCP
 *    ├────────────────────────► TCP    accept (rule smc) ─► HANDSHAKE
 *    │ connect (rule smc)
 *    ▼
 *   HANDSHAKE ──SMC-R up──► SMC ──close──► (recycled)
 *    │  └──────fallback──► TCP
 *    └─────────failure───► FAILED
 *
 * The fd the program holds (docs/design/engine-decisions.md decision 2; sig.h for the readiness
 * rules):
 *   NEW, LISTEN, TCP: the kernel TCP socket itself (tcp == fd); calls pass through.
 *   HANDSHAKE: a placeholder socket pair end with no readiness (sig filled, no tokens); the
 *     TCP socket is at a hidden number (tcp). DEVIATION from decision 2 (which keeps the TCP
 *     socket at fd while handshaking): a TCP socket would show POLLOUT as soon as TCP is up
 *     and POLLIN when CLC bytes arrive, long before the connection is usable, so programs
 *     doing a non-blocking connect would spin (or read CLC bytes). The placeholder shows
 *     nothing until the handshake ends, exactly like a TCP connect in progress.
 *     Undecided (struct sock.early: the interposer's connect returned once TCP was up, or
 *     an accepted connection was used): the same placeholder with POLLOUT while the
 *     pre-decision buffer (pend.h) has room; the decision flushes that buffer first.
 *   SMC: the same socket pair end, now driven by the engine's events; TCP stays hidden.
 *   FAILED: the placeholder with sig_error (POLLERR|POLLHUP|..., SO_ERROR = the reason).
 *   Fallback (HANDSHAKE -> TCP): pollers are woken (sig_unblock_out), the epoll
 *   registrations recorded by smcr_epoll_ctl are removed, the TCP socket is dup3()ed back
 *   onto fd, the registrations are added again (EPOLLET then sees a fresh edge).
 *
 * Locks, in order (take left before right, never the reverse):
 *   sock.lock  ->  engine/connection locks inside core_*  ->  sig.lock
 * sock.lock protects the fields marked (L). It is never held across a sleep (poll, cond
 * wait excepted: the cond wait releases it) nor across core_engine_progress (which runs
 * event callbacks). Core's event callback (sock_core_event) takes no sock lock: it only
 * touches sig (innermost) and atomics, and asks the progress thread (progress_call) for
 * anything that needs the lock.
 *
 * References (fdtab.h): the table holds one from install to sock_unlink; every lookup holds
 * one until its call returns; the handshake's TCP watch and each queued progress call hold
 * one (released by the watch's release function / after the call). The last put recycles:
 * core_conn_release, sig_close, closing the hidden TCP fd, back to the pool. Objects are
 * type-stable (never returned to malloc while the process runs), as fdtab requires. */
#ifndef SMCR_SOCK_SOCK_H
#define SMCR_SOCK_SOCK_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "core/core.h"
#include "sock/waitpol.h"
#include "sock/discovery.h"
#include "sock/pend.h"
#include "sock/fdtab.h"
#include "sock/progress.h"
#include "sock/rules.h"
#include "sock/sig.h"
#include "wire/clc.h"

enum sock_state {
	SS_NEW = 0,
	SS_LISTEN,
	SS_HANDSHAKE,
	SS_SMC,
	SS_TCP,
	SS_FAILED,
};

#define SOCK_ALIAS_MAX 8 /* numbers of one SMC-R connection besides fd (sock.c) */

/* One epoll registration of the program's fd, recorded by smcr_epoll_ctl. */
struct sock_epreg {
	int epfd;
	struct epoll_event ev;
};

/* Who drives a handshake (struct sock_hs.driver; hs_inline: one of the two threads). */
enum hs_driver {
	HS_DRV_NONE = 0,  /* not started, or ended by its inline driver */
	HS_DRV_PROGRESS,  /* the progress thread: a watch on the TCP socket, a timer, calls
			   * queued by the engine's callback (hs_kick) */
	HS_DRV_CONNECT,	  /* the thread in a blocking connect (hs_connect_inline_locked) */
	HS_DRV_ACCEPT,	  /* a thread in a blocking accept, for its listener's child (lsn.c) */
};

/* An undecided connection (struct sock.early): what the program has of it. */
enum sock_early {
	SOCK_EARLY_NO = 0, /* nothing before the decision: the handshake ends first */
	SOCK_EARLY_OPEN,   /* the program has it as established while the handshake goes
			    * on (stays so after the decision; read only in SS_HANDSHAKE) */
	SOCK_EARLY_ORPHAN, /* ... and closed it meanwhile: the handshake goes on with no
			    * program fd and its end closes the connection gracefully */
};

/* The handshake's part of a socket (hs.c; lsn.c for a child its accept drives). Every field
 * is written and read under the socket's lock (sock.lock) by the thread that drives the
 * handshake at that moment: the progress thread (its watch, timer and queued calls), the
 * connecting thread (HS_DRV_CONNECT) or the accepting thread that drives the child
 * (lsn.c). Exceptions: kick_pending (atomic: the engine's callback sets it without the lock,
 * hs_kick) and timer (its own lock in progress.c: armed and cancelled under sock.lock, its
 * callback takes sock.lock). Zeroed with the socket (a valid "nothing yet" state). */
struct sock_hs {
	uint8_t in[CLC_MSG_MAX_LEN]; /* CLC bytes read from TCP, not yet consumed */
	size_t in_len;
	bool got_bytes;		     /* any byte ever seen from the peer */
	bool tcp_rdhup;		     /* the TCP peer shut down or reset (EPOLLRDHUP/HUP/ERR) */
	bool tcp_reset;		     /* ... and it was a reset (an error read or seen) */
	bool in_more;		     /* the last hs_read's peek saw bytes after its message */
	bool clc_out;		     /* a CLC message of ours went out (server: the Accept) */
	/* DISC_BPF: result not read yet (hs.c reads it once TCP is up, before any CLC byte;
	 * written by connect/accept (api.c) before the handshake starts) */
	bool disc_pending;
	/* Who runs the steps now (docs/parts/sock.md "States"). A thread driving the
	 * handshake itself (HS_DRV_CONNECT, HS_DRV_ACCEPT) polls s->tcp and keeps no watch
	 * and no timer: hs_run records its next deadline in inline_deadline. */
	enum hs_driver driver;
	int status;		     /* the last enum core_clc_status seen (0 none) */
	uint64_t first_byte_deadline; /* server: fall back if no byte by then (ns) */
	uint64_t inline_deadline;     /* a driving thread's next deadline (UINT64_MAX none) */
	struct prog_timer timer;      /* the progress thread's deadline for it */
	bool timer_ref;		      /* the armed timer holds a reference */
	_Atomic bool kick_pending;    /* a progress_call for the handshake is queued: set by
				       * hs_kick (any thread), cleared by the call it queued */
};

/* A listener's part (lsn.c). Queue mode (on): its children handshake concurrently, accept
 * returns the first that completed. Fields marked (L) are the listener's sock.lock's; (Q)
 * are lq.lock's, which also protects the lq_next links of its children. Lock order: a
 * listener's sock.lock may be taken before a child's, never after; child.lock -> lq.lock
 * -> sig. */
struct sock_lsn {
	bool want;		  /* (L) listen() saw that SMC-R is possible here */
	bool on;		  /* (L) queue mode active in process pid */
	int pid;		  /* (L) fork generation that activated it (lsn.c) */
	int fd;			  /* (Q) the hidden listening socket (== tcp) */
	pthread_mutex_t lock;
	struct sock *pending;	  /* (Q) children handshaking */
	struct sock *ready, *ready_tail; /* (Q) completed, in completion order */
	unsigned npending, nready; /* (Q) */
	unsigned max;		  /* (Q) ready bound (listen backlog) */
	bool closed;		  /* (Q) smcr_close ran: children are dropped */
	bool shut;		  /* (Q) shutdown() stopped the listener: EINVAL */
	unsigned waiters;	  /* (Q) blocking accepts polling the listener themselves: the
				   * progress thread leaves new connections to them */
	bool defer;		  /* (L) TCP_DEFER_ACCEPT set on the hidden listener */
	uint64_t defer_ns;	  /* (L) ... at this time (smcr_now_ns) */
	bool quiet;		  /* (Q) a ready child got no POLLIN token: the blocking accept
				   * that drove it pops it (lsn.c) */
	unsigned driving;	  /* (Q) blocking accepts inside lsn_accept: while > 0 the
				   * listener's watch is disarmed (they poll the listener
				   * themselves: no progress-thread wake-up per connection); the
				   * last one out re-arms it */
	struct prog_watch *watch; /* (L and Q to change; either to read) the hidden listening
				   * socket's watch */
};

struct sock {
	struct fdobj h; /* first: the fd table's reference count */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* signalled (with lock) when a handshake ends */
	int fd;		     /* the program's fd number, fixed while installed */
	uint64_t serial;     /* unique per socket made (a pooled object gets a new one);
			      * written at creation, before the object is published */
	_Atomic int state;   /* enum sock_state; written under lock, read anywhere */
	int tcp;	     /* (L) the TCP socket: == fd, or hidden; -1 when closed */
	/* (L) The placeholder's file at a hidden number while fd may still change back to
	 * the TCP socket (a fallback), else -1. poll() and select() register their wait
	 * queues once, on the files their numbers had then: a waiter on fd that looks again
	 * only after the swap sees the TCP socket but sleeps on the old file's queue and
	 * would miss the TCP socket's data. So every wait that sleeps on fd while keep is
	 * armed also polls keep (events 0), and the fallback's close of the signal end
	 * (POLLHUP on this file) returns it (sock_keep_get, data.c early_wait).
	 * keep_users counts the waits holding it; once keep_retired (the handshake ended),
	 * the last of them closes it. */
	int keep;
	unsigned keep_users;
	bool keep_retired;
	int domain;	     /* AF_INET / AF_INET6 */
	bool nonblock;	     /* (L) O_NONBLOCK as the program set it */
	bool cloexec;	     /* (L) FD_CLOEXEC of fd */
	/* (L) A child driven by a blocking accept without SOCK_CLOEXEC: its SMC-R end is
	 * installed at fd without FD_CLOEXEC (sock_sig_install_locked), so the accept that
	 * pops it needs no F_SETFD; cleared when the driving accept hands it on. */
	bool cloexec_off_at_install;
	bool has_sig;	     /* (L) sig is open (HANDSHAKE, SMC, FAILED) */
	bool closing;	     /* (L) smcr_close ran: no more program calls */
	bool linger_set;     /* (L) SO_LINGER as set */
	bool oobinline;	     /* (L) SO_OOBINLINE */
	bool cork;	     /* (L) TCP_CORK */
	bool shut_wr;	     /* (L) program did shutdown(SHUT_WR) */
	int linger_secs;     /* (L) */
	uint32_t rcvbuf;     /* (L) SO_RCVBUF / SO_SNDBUF as asked (0 = default) */
	uint32_t sndbuf;
	struct timeval rcvtimeo, sndtimeo; /* (L) SO_RCVTIMEO / SO_SNDTIMEO */
	/* (L) Options the program set on an SMC-R connection (SS_SMC, final: no fallback
	 * any more) that reach the hidden TCP socket only when its options are read
	 * (opt.c: SOCK_OPT_* bits; SO_RCVTIMEO/SO_SNDTIMEO from the fields above,
	 * TCP_NODELAY from nodelay): TCP carries nothing more for it, so a setsockopt
	 * system call per option after connect/accept was work for nothing. */
	uint8_t opt_defer;
	int nodelay;
	struct sig sig;			  /* (own lock) the program end's readiness */
	/* Threads spinning in a receive on this socket (SOCK_RX_SPIN_ONE each) and
	 * SOCK_RX_DEFERRED: an arrival's POLLIN token was not written because a spinner
	 * will take the data (data.c "Deferred tokens"). Atomic:
	 * program threads and the engine's callback. */
	_Atomic unsigned rx_spin;
	/* (L) The wait policy's state of blocking receives ([0]) / sends ([1]) on this
	 * socket (waitpol.h; data.c wait_for reads and feeds it under the lock). Zeroed
	 * with the socket: a valid state whose first wait does not spin. */
	struct waitpol wpol[2];
	uint32_t busy_poll_us; /* (L) SO_BUSY_POLL as the kernel kept it: a floor under the spins */
	struct core_conn *conn;		  /* set once when the handshake starts; released at
					   * recycle (valid for any holder of a reference) */
	/* (L) The connection's link is on a software device (shm, emu), whose peer is always
	 * smcr (core_conn_info().soft_dev): written once by hs_smc_locked when the connection
	 * becomes SMC-R (a connection keeps its link until its LG dies or its close is
	 * complete), read by sock_close (the RST of a closed peer's TCP side). */
	bool soft_dev;
	int error;			  /* (L) pending SO_ERROR (errno), 0 none */
	uint32_t local_reason;		  /* (L) fallback reasons known to sock (rules, no
					   * engine); core's come from core_conn_info */
	uint32_t peer_reason;		  /* (L) */
	enum core_role role;		  /* set before the handshake starts */
	enum rule_action action;	  /* (L) rule that chose this connection's mode */
	uint8_t disc;			  /* (L) enum disc_mode (discovery.h): how SMC-R was chosen
					   * (a listener's is copied to what it accepts) */
	uint32_t disc_reason;		  /* (L) listener: reason for its TCP children */
	bool tcp_connecting;		  /* (L) non-blocking TCP connect not yet complete */
	_Atomic bool peer_closed_seen;	  /* hs_peer_closed queued its call (once per socket) */
	struct prog_watch *watch;	  /* (L) the TCP watch (handshake, then FIN/RST) */
	/* An established SMC-R connection's RST watch starts HS_WATCH_DEFER_NS after it is
	 * up (hs.c "deferred RST watch"): while it waits it is on hs.c's list, which holds
	 * a reference. Protected by hs.c's hs_dw_lock (a leaf), not by lock. */
	struct sock *dw_next, *dw_prev;
	uint64_t dw_deadline;
	bool dw_on;
	/* Where the TCP file is while s->tcp is hidden: fd_is_tcp = the program's number still
	 * holds the TCP file too (no placeholder: a listener's child before accept returns it,
	 * or a blocking connect whose thread runs the CLC exchange itself); the SMC-R end is
	 * installed over it (sock_smc_install_locked), a fallback just closes the hidden dup. */
	bool fd_is_tcp;			  /* (L) */
	bool sig_pre;			  /* (L) sig opened ahead (inline connect, while the server
					   * answers), prog not installed yet: ours to close */
	bool have_addrs;		  /* (L) laddr/paddr known (no getsockname/getpeername) */
	struct sockaddr_storage laddr, paddr; /* (L) */
	bool accept_deferred;		  /* a child of a listener with lq.defer (first-byte wait) */
	/* Accepted by the interposer's accept, SMC-R to be tried, handshake not started
	 * (lsn.c "Accept at first use"): the fd is the kernel's TCP socket (state SS_TCP)
	 * until the first call that needs the mode starts the handshake (sock_lazy_start).
	 * Written under lock; atomic so that an exec in a forked child can skip sockets
	 * without taking their locks (another thread of the parent may have held one). */
	_Atomic bool lazy;
	/* (L) sock_forks when it was accepted: its close reads the client's Proposal only if
	 * no fork came since (no other process can hold the file then, api.c sock_close). */
	unsigned lazy_forks;
	/* (L) The handshake may only decline (sock_lazy_decline, before exec): no engine
	 * connection is made, the Proposal gets a Decline and both ends fall back. */
	bool decline_only;
	/* (L) Undecided (docs/parts/connect.md "Undecided connections"): the program has the
	 * connection as established (its connect returned once TCP was up, or it was
	 * accepted and used) while the handshake (state SS_HANDSHAKE) goes on in the
	 * background. Its writes go to pend (POLLOUT on the placeholder while pend has
	 * room), its reads wait for the decision; SS_SMC or SS_TCP writes pend's bytes
	 * first. early_shut: the program's shutdown of that time (1 SHUT_RD, 2 SHUT_WR),
	 * applied after the flush. SOCK_EARLY_ORPHAN: the program closed it meanwhile;
	 * the handshake goes on (with no program fd) and its end closes the connection
	 * gracefully, so the peer reads every byte written and then EOF, as after a TCP
	 * close. */
	enum sock_early early; /* nonzero: given to the program before the decision */
	uint8_t early_shut;
	struct pend pend;
	/* (L) The program's other numbers for this connection (dup, dup2/dup3, F_DUPFD of an
	 * SMC-R connection; sock.c "Numbers of one connection"): each is in the fd table with
	 * a reference of its own. fd is always one of the numbers; when it is closed, an
	 * alias takes its place. The last number's close ends the connection. */
	int alias[SOCK_ALIAS_MAX];
	unsigned nalias;
	/* A listener's child: */
	struct sock *lsn;		  /* (L) its listener (a reference), until accepted */
	struct sock *lq_next;		  /* (listener's lq.lock) */
	/* epoll registrations (smcr_epoll_ctl) */
	struct sock_epreg *regs; /* (L) */
	size_t nregs, capregs;	 /* (L) */
	/* pool link (pool lock) */
	struct sock *pool_next;
	/* The handshake's part (struct sock_hs) and the listener's (struct sock_lsn): last, so
	 * that the hot fields above stay together. */
	struct sock_hs hs;
	struct sock_lsn lq;
};

/* A thread of the program drives s's handshake itself (HS_DRV_CONNECT, HS_DRV_ACCEPT): no
 * watch, no timer. Caller holds s->lock. */
static inline bool hs_inline(const struct sock *s)
{
	return s->hs.driver == HS_DRV_CONNECT || s->hs.driver == HS_DRV_ACCEPT;
}

/* ---- objects (sock.c) ---- */

/* Looks fd up: the socket with a reference, or NULL if fd is not an smcr socket. */
struct sock *sock_get(int fd);
void sock_hold(struct sock *s);
void sock_put(struct sock *s);
/* New object for fd (state NEW, tcp = fd), installed in the table with the table's
 * reference plus one for the caller. */
SMCR_MUST_CHECK int sock_create(int fd, int domain, bool nonblock, bool cloexec,
				struct sock **out);
/* smcr_close on the object (api.c): -SMCR_E_SOCK_BADF if it was closed already. */
int sock_close(struct sock *s);
/* The close of an SMC-R connection: its C, the TCP side closed (api.c). may_wait: the
 * program's own close (SO_LINGER's wait may run; s->lock is released meanwhile).
 * Caller holds s->lock. */
void sock_close_smc_locked(struct sock *s, bool may_wait);
/* An fd was queued on the close-later list (closeq.h): the close reaper's timer (api.c)
 * runs within closeq_timer_ms(), so an idle process closes the queued fds. Any thread. */
void sock_reap_soon(void);
/* Removes s from the table (its fd is about to be closed) and drops the table's reference. */
void sock_unlink(struct sock *s);
/* Objects alive (tests: no growth). */
unsigned sock_count(void);

/* Swap helpers (sock.c). Caller holds s->lock. */
/* HANDSHAKE entry: hides the TCP socket, installs a placeholder at fd (no readiness;
 * POLLOUT on unless block_out: an undecided connection whose TCP is up, struct sock.early). */
SMCR_MUST_CHECK int sock_install_placeholder_locked(struct sock *s, bool block_out);
/* Fallback: wakes pollers, moves the epoll registrations, puts the TCP socket back at fd. */
SMCR_MUST_CHECK int sock_restore_tcp_locked(struct sock *s);
/* Applies the engine's level mask to the readiness (see sock_core_event for the rules);
 * from_program: the caller is the program's own call (may also turn bits off). */
void sock_apply_events(struct sock *s, unsigned events, unsigned raised, bool from_program);
/* The program-side resync after its own send/recv/shutdown: turn POLLIN/POLLOUT off when
 * the engine says so, then re-check (closes the race with a concurrent event). */
void sock_sync_after_call(struct sock *s);

/* ---- engine (engine.c) ---- */

/* The process's engine, created on first use (NULL when no device could be opened: the
 * reason is logged once and connections fall back with SMCR_REASON_NODEV). */
struct core_engine *sock_engine(void);
/* What exit() does (engine.c's exit handler): closes the SMC-R connections left open and
 * gives their close protocol up to $SMCR_EXIT_WAIT_MS; nothing in a process without an
 * engine of its own. The interposer's _exit/_Exit call it too. */
void sock_exit_flush(void);
/* dup of fd (sock.c "Numbers of one connection"): on an SMC-R connection a new number of
 * the same connection, at target (dup3; target >= 0, closed first by the caller) or the
 * lowest free number >= min; cloexec as asked. Returns the number, -SMCR_E_SOCK_NOTSUP for
 * a connection in a state that cannot be copied (handshaking, failed, a queue listener),
 * or SOCK_DUP_PLAIN when fd is not an smcr socket in SMC-R mode (the kernel's dup is
 * right). Called with s->lock held: sock_dup_locked. */
#define SOCK_DUP_PLAIN (-100000)
SMCR_MUST_CHECK int sock_dup(int fd, int target, int min, bool cloexec);
SMCR_MUST_CHECK int sock_dup_locked(struct sock *s, int target, int min, bool cloexec);
/* close of one number of a connection that has others: that number only (true), or false
 * when it is the last (the caller closes the connection). Lock held. */
bool sock_close_alias_locked(struct sock *s, int fd);
/* The engine if it exists already (never creates it): NULL before the first SMC-R
 * connection of the process or when there is none. */
struct core_engine *sock_engine_if_up(void);
/* At most this many CQ fds (one per device) for a direct sleeper (engine.c). */
#define SOCK_ENGINE_FDS_MAX 8
/* Direct wake (engine.c "Direct wake"): one program thread at a time sleeps
 * on the CQ fds and its program fd (fd, EPOLLIN or EPOLLOUT when out) and takes the
 * completions itself; the progress thread is then not woken for them. begin: false when
 * another thread owns it or it is off (sleep the usual way); serial: the socket's
 * (struct sock.serial: picks the cheaper epoll_ctl). wait: epoll_wait with ms
 * (-1: none), like poll's return; *mine: the program fd was reported. After wait
 * returns, the caller MUST poll the engine (core_engine_prepare_sleep) before anything
 * else, then call end. sock_direct_mode: $SMCR_DIRECT_WAKE, 0 off, 1 on for threads
 * whose recent sleeps were short (default), 2 always (tests). */
bool sock_direct_begin(int fd, uint64_t serial, bool out);
int sock_direct_wait(int ms, bool *mine);
void sock_direct_end(void);
int sock_direct_mode(void);
/* Direct sleeps and wake-ups by a CQ fd of a direct sleeper, since start (tests). */
extern _Atomic uint64_t sock_direct_sleeps_total, sock_direct_cq_wakes_total;
/* epoll_ctl calls made by sock_direct_begin, since start (tests: one per begin for a new
 * socket, or the same one as last time). */
extern _Atomic uint64_t sock_direct_ctl_total;
#define SOCK_RX_SPIN_ONE 1u
#define SOCK_RX_DEFERRED 0x80000000u
/* The engine's callback: true if a thread spins in a receive on s, which will then see
 * the arrival and either read it or write the token itself (sock_rx_flush): the token
 * may be skipped. Sets SOCK_RX_DEFERRED. */
bool sock_rx_defer(struct sock *s);
/* Arrivals whose token was skipped that way, since start (tests, diagnostics). */
extern _Atomic uint64_t sock_rx_deferred_total;
/* Core's event callback for every connection (ctx = struct sock). */
void sock_core_event(void *ctx, struct core_conn *c, unsigned events, unsigned raised);
/* Server: how long to wait for the client's first byte before deciding it is a plain TCP
 * client (ns; $SMCR_SERVER_WAIT_MS, default 2000). */
uint64_t sock_server_first_wait_ns(void);

/* ---- handshake (hs.c) ---- */

/* Starts the CLC handshake of s on the progress thread (state HANDSHAKE, placeholder
 * installed, conn created or NULL when there is no engine). Caller holds s->lock. */
SMCR_MUST_CHECK int hs_start_locked(struct sock *s);

/* Accept at first use (lsn.c): set once by the interposer before its first socket call;
 * then accept returns the kernel's TCP socket at once and a connection that would try
 * SMC-R is marked lazy. sock_lazy_pending counts lazy sockets (any thread, relaxed: a
 * caller that reads 0 has nothing to start). */
extern atomic_bool sock_lazy_accept;
extern atomic_uint sock_lazy_pending;
/* Undecided connections (set once by the interposer, as sock_lazy_accept; tests): a
 * connect returns once TCP is up, and the handshake of a connection accepted at first
 * use shows POLLOUT at once (sock.h struct sock.early). Otherwise a blocking smcr_connect
 * returns when the handshake ended and a non-blocking one shows POLLOUT then. */
extern atomic_bool sock_early_connect;
/* fork()s since start, counted in parent and child (lsn.c; any thread, relaxed). */
extern atomic_uint sock_forks;
/* Starts fd's server handshake if it is lazy (in the background: its readiness and the
 * data calls' waits follow as for a non-blocking connect). 0, or -errno-style code. */
int sock_lazy_start(int fd);
/* Every lazy socket without FD_CLOEXEC: handshake with a Decline (the connection goes on
 * as TCP, no CLC byte left for the program), waiting until each ended (before exec). */
void sock_lazy_decline_all(void);
/* The same for fd alone, whatever its FD_CLOEXEC (before a dup: the copy, which the fd
 * table does not know, must be the TCP socket with no CLC byte in it). */
void sock_lazy_decline(int fd);
/* Waits until fd, if it is an undecided connection (struct sock.early), is decided: a copy
 * of the number (dup) is made of a connection whose mode is known (sock_dup). No lock
 * held. */
void sock_early_settle(int fd);
/* Blocking connect: the calling thread runs the CLC exchange itself (no hand-off to the
 * progress thread and back); a first contact's wait for the link goes to the progress
 * thread and the caller waits. s->fd holds the TCP file (fd_is_tcp), s->tcp a hidden dup.
 * Returns when s left HANDSHAKE. Caller holds s->lock. */
void hs_connect_inline_locked(struct sock *s);
/* A listener's child driven by the accepting thread (lsn.c): the first step now, no watch
 * and no timer (HS_DRV_ACCEPT: deadlines in hs.inline_deadline); the thread polls s->tcp and
 * calls hs_drive_step_locked with what poll saw (or 0 at the deadline). Returns true
 * while it still handshakes. hs_drive_release_locked hands it to the progress thread
 * (watch, timer) when the accepting thread leaves. Caller holds s->lock. */
bool hs_drive_start_locked(struct sock *s);
void hs_drive_step_locked(struct sock *s, uint32_t ev);
SMCR_MUST_CHECK int hs_drive_release_locked(struct sock *s);
/* The CLC answer's bounded spin (hs.c): before a thread that just sent a CLC message
 * sleeps in poll() for the peer's answer, it polls the same fds without blocking for at
 * most HS_SPIN_NS / HS_SPIN_SERVER_NS (the answer usually comes within tens of
 * microseconds, a wake-up from poll costs as much again on a busy machine); a blocking
 * accept with no handshake in flight spins HS_SPIN_IDLE_NS for the next connection
 * (a client making connections one after the other: lsn.c). Whether a wait spins is the
 * wait policy's (waitpol.h waitpol_clc_spin: per site and process, by the recent spins' hit
 * rate and whether the thread was preempted since its last wait there).
 * Returns poll()'s answer for the last non-blocking poll (> 0: pf[].revents are set; the
 * caller skips its sleep; < 0 with errno, e.g. EINTR: as its own poll's), 0 when the spin
 * ended without an event or did not run.
 * $SMCR_CLC_SPIN_US overrides the budget (0 turns the spin off). No lock held. */
enum hs_spin_site {
	HS_SPIN_CLIENT, /* a blocking connect waits for the Accept (or Decline) */
	HS_SPIN_SERVER, /* a blocking accept waits for the Confirm of a child it answered */
	HS_SPIN_IDLE,	/* a blocking accept with no handshake in flight waits for the next */
	HS_SPIN_SITES,
};
#define HS_SPIN_NS 50000ull	    /* the client's spin for the Accept */
#define HS_SPIN_SERVER_NS 20000ull /* the server's spin for the Confirm */
#define HS_SPIN_IDLE_NS 30000ull   /* a blocking accept's spin for the next connection */
struct pollfd;
int hs_spin_poll(struct pollfd *pf, unsigned n, enum hs_spin_site site);
/* Spins run, spins that caught the answer, since start, per site (tests, diagnostics). */
extern _Atomic uint64_t hs_spin_runs[HS_SPIN_SITES], hs_spin_hits[HS_SPIN_SITES];
/* Waits that did not spin because the thread was preempted since its last one. */
extern _Atomic uint64_t hs_spin_busy[HS_SPIN_SITES];

/* Fails a handshake that could not start (state HANDSHAKE already). Caller holds lock. */
void hs_fail_start_locked(struct sock *s, int code);
/* Waits (blocking connect/accept) until s leaves HANDSHAKE. Caller holds s->lock. */
void hs_wait_locked(struct sock *s);
/* Aborts a running handshake (close during it). Caller holds s->lock. */
void hs_abort_locked(struct sock *s);
/* Queues a handshake step on the progress thread (from the engine's callback). */
void hs_kick(struct sock *s);
/* Stops watching the TCP socket (close of an SMC connection), or takes it off the list of
 * deferred watches. Caller holds s->lock. */
void hs_unwatch_locked(struct sock *s);
/* The engine's callback saw the peer stop (CORE_EV_RDHUP raised; events: the level): on the
 * progress thread, queues the removal of the TCP watch if the peer closed (C or A); from
 * any thread, when the peer was lost with its link (RDHUP raised, not in the level), has
 * the watch report the TCP FIN too (core_conn_info lost_wait). No lock held. */
void hs_peer_closed(struct sock *s, unsigned events);

/* Puts the program end of s->sig (opened, not yet installed) at s->fd, moving the
 * program's epoll registrations across the swap (sock_epoll_move_locked); block_out first
 * turns POLLOUT off (a listener). On failure the pair is closed and has_sig is false
 * again. Caller holds s->lock. */
SMCR_MUST_CHECK int sock_sig_install_locked(struct sock *s, bool block_out);

/* SMC-R is up on a socket whose number still holds the TCP file (fd_is_tcp): opens the
 * signal pair and puts its program end at s->fd. Caller holds s->lock. */
SMCR_MUST_CHECK int sock_smc_install_locked(struct sock *s);

/* The placeholder's hidden reference (struct sock.keep). arm: after the placeholder went
 * to s->fd; retire: the handshake ended (no swap is left to wait for); hold/drop: a wait
 * of the library's own, under s->lock around the unlocked sleep (hold gives -1 when
 * nothing is armed). Caller holds s->lock. */
void sock_keep_arm_locked(struct sock *s);
void sock_keep_retire_locked(struct sock *s);
int sock_keep_hold_locked(struct sock *s);
void sock_keep_drop_locked(struct sock *s);
/* For the interposer's poll/select: sock_keep_live counts armed keeps (relaxed: a wait
 * that reads 0 has none to add). sock_keep_get: fd's armed keep number in *keep with a
 * use and a reference counted, or NULL; sock_keep_put undoes both. No lock held. */
extern atomic_uint sock_keep_live;
struct sock *sock_keep_get(int fd, int *keep);
void sock_keep_put(struct sock *s);

/* Closes a signal pair opened ahead (sig_pre) that will not be installed (fallback,
 * failure, recycle). Caller holds s->lock (or owns s alone). */
void sock_sig_drop_pre_locked(struct sock *s);

/* ---- listener accept queue (lsn.c) ---- */

/* listen() on s succeeded: records whether accept needs the queue (SMC-R possible here)
 * and its bound. Caller holds s->lock. */
void lsn_listen_locked(struct sock *s, int backlog);
/* Queue mode in this process (first accept or smcr_epoll_ctl on the listener, per
 * process: fork() shares the listener, not our queue): placeholder at fd, TCP listener
 * hidden and watched by the progress thread. No-op when already on or not wanted.
 * Caller holds s->lock. */
SMCR_MUST_CHECK int lsn_activate_locked(struct sock *s);
/* accept4 on a listener in queue mode. Returns the fd or a negative code. */
int lsn_accept(struct sock *ls, struct sockaddr *addr, socklen_t *alen, int flags);
/* Close of a listener in queue mode: drops every child not accepted. Caller holds
 * ls->lock. */
void lsn_close_locked(struct sock *ls);
/* shutdown() of a listener in queue mode: the listening socket stops (accept gives
 * EINVAL, as TCP), the children not accepted are reset. Caller holds ls->lock. */
void lsn_shutdown_locked(struct sock *ls);
/* A child's handshake ended (state SMC, TCP or FAILED). Caller holds child->lock. */
void lsn_child_done_locked(struct sock *child);

/* ---- epoll registrations (epoll.c) ---- */

/* Removes (before=true) or re-adds (false) every recorded registration. Caller holds lock. */
void sock_epoll_move_locked(struct sock *s, bool before);
/* The epoll instance epfd had registrations of smcr fds (smcr_epoll_ctl): smcr_epoll_wait
 * waits on it through sock_wait_epoll (wait.h), which runs the engine's progress. Counts per epfd number, never exact (a registration
 * dropped by close() is not seen): a stale count only costs an idle progress round. */
bool sock_epoll_has_smcr(int epfd);

/* ---- helpers ---- */

/* The prefixes of the interface holding local (docs/protocol/wire-formats.md 3.3), from a cache of
 * the interface addresses (getifaddrs) refreshed when older than SOCK_PFX_TTL_NS, or on a miss
 * once it is older than SOCK_PFX_MISS_NS. Returns how many were written (0: none known). */
int sock_prefixes(const struct sockaddr *local, struct core_ip_prefix *out, int max);
#define SOCK_PFX_TTL_NS 1000000000ull
#define SOCK_PFX_MISS_NS 50000000ull
/* Refreshes of the cache so far (tests). */
uint64_t sock_prefix_refreshes(void);

/* Fills the core_conn_params of s (addresses, prefixes, sizes, callback). Caller holds lock. */
SMCR_MUST_CHECK int sock_conn_params_locked(struct sock *s, struct core_conn_params *p,
					    struct core_ip_prefix *pfx, int maxpfx);

#endif
