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
 * The fd the program holds (ENGINE.md decision 2; sig.h for the readiness rules):
 *   NEW, LISTEN, TCP: the kernel TCP socket itself (tcp == fd); calls pass through.
 *   HANDSHAKE: a placeholder socket pair end with no readiness (sig filled, no tokens); the
 *     TCP socket is at a hidden number (tcp). DEVIATION from decision 2 (which keeps the TCP
 *     socket at fd while handshaking): a TCP socket would show POLLOUT as soon as TCP is up
 *     and POLLIN when CLC bytes arrive, long before the connection is usable, so programs
 *     doing a non-blocking connect would spin (or read CLC bytes). The placeholder shows
 *     nothing until the handshake ends, exactly like a TCP connect in progress.
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
#include "sock/discovery.h"
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

/* One epoll registration of the program's fd, recorded by smcr_epoll_ctl. */
struct sock_epreg {
	int epfd;
	struct epoll_event ev;
};

struct sock {
	struct fdobj h; /* first: the fd table's reference count */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* signalled (with lock) when a handshake ends */
	int fd;		     /* the program's fd number, fixed while installed */
	_Atomic int state;   /* enum sock_state; written under lock, read anywhere */
	int tcp;	     /* (L) the TCP socket: == fd, or hidden; -1 when closed */
	int domain;	     /* AF_INET / AF_INET6 */
	bool nonblock;	     /* (L) O_NONBLOCK as the program set it */
	bool cloexec;	     /* (L) FD_CLOEXEC of fd */
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
	struct sig sig;			  /* (own lock) the program end's readiness */
	/* Threads spinning in a receive on this socket (SOCK_RX_SPIN_ONE each) and
	 * SOCK_RX_DEFERRED: an arrival's POLLIN token was not written because a spinner
	 * will take the data (data.c "Deferred tokens"; added by the ready branch). Atomic:
	 * program threads and the engine's callback. */
	_Atomic unsigned rx_spin;
	/* Recent wait times of blocking receives / sends (ns, moving average), for the
	 * adaptive spin (data.c spin_budget). Relaxed atomics: a lost update only skews a
	 * heuristic. */
	_Atomic uint64_t wait_avg[2];
	struct core_conn *conn;		  /* set once when the handshake starts; released at
					   * recycle (valid for any holder of a reference) */
	int error;			  /* (L) pending SO_ERROR (errno), 0 none */
	uint32_t local_reason;		  /* (L) fallback reasons known to sock (rules, no
					   * engine); core's come from core_conn_info */
	uint32_t peer_reason;		  /* (L) */
	enum core_role role;		  /* set before the handshake starts */
	enum rule_action action;	  /* (L) rule that chose this connection's mode */
	uint8_t disc;			  /* (L) enum disc_mode (discovery.h): how SMC-R was chosen
					   * (a listener's is copied to what it accepts) */
	bool disc_pending;		  /* (L) DISC_BPF: result not read yet (hs.c reads it
					   * once TCP is up, before any CLC byte) */
	uint32_t disc_reason;		  /* (L) listener: reason for its TCP children */
	bool background;		  /* (L) nobody waits on cond: report via readiness */
	bool tcp_connecting;		  /* (L) non-blocking TCP connect not yet complete */
	/* Handshake I/O, used only on the progress thread (under lock): */
	uint8_t in[CLC_MSG_MAX_LEN];
	size_t in_len;
	bool got_bytes;			  /* any byte ever seen from the peer */
	bool tcp_rdhup;			  /* the TCP peer shut down or reset (EPOLLRDHUP/HUP/ERR) */
	uint64_t first_byte_deadline;	  /* server: fall back if no byte by then (ns) */
	struct prog_watch *watch;	  /* (L) the TCP watch (handshake, then FIN/RST) */
	struct prog_timer timer;	  /* handshake deadline; armed under lock */
	bool timer_ref;			  /* (L) the armed timer holds a reference */
	_Atomic bool kick_pending;	  /* a progress_call for the handshake is queued */
	/* epoll registrations (smcr_epoll_ctl) */
	struct sock_epreg *regs; /* (L) */
	size_t nregs, capregs;	 /* (L) */
	/* pool link (pool lock) */
	struct sock *pool_next;
};

/* ---- objects (sock.c) ---- */

/* Looks fd up: the socket with a reference, or NULL if fd is not an smcr socket. */
struct sock *sock_get(int fd);
void sock_hold(struct sock *s);
void sock_put(struct sock *s);
/* New object for fd (state NEW, tcp = fd), installed in the table with the table's
 * reference plus one for the caller. */
SMCR_MUST_CHECK int sock_create(int fd, int domain, bool nonblock, bool cloexec,
				struct sock **out);
/* Removes s from the table (its fd is about to be closed) and drops the table's reference. */
void sock_unlink(struct sock *s);
/* Objects alive (tests: no growth). */
unsigned sock_count(void);

/* Swap helpers (sock.c). Caller holds s->lock. */
/* HANDSHAKE entry: hides the TCP socket, installs a placeholder at fd (no readiness). */
SMCR_MUST_CHECK int sock_install_placeholder_locked(struct sock *s);
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
/* One round of the engine's progress from a program thread (blocking calls spin on it for
 * at most SOCK_SPIN_NS before they sleep; decision 3). Leaves the CQs armed. */
void sock_engine_spin(void);
/* The engine's completion/async fds (core_engine_fds), read once; at most max. A program
 * thread about to sleep polls them too (data.c wait_for). */
#define SOCK_ENGINE_FDS_MAX 8
int sock_engine_fds(int *fds, int max);
/* The progress thread stops (true) / starts again (false) watching the engine's fds,
 * while a program thread sleeps on them itself (data.c wait_for): then a completion wakes
 * one thread, not two. Level-triggered: what fired meanwhile wakes it on the resume. */
void sock_engine_watch_pause(bool pause);
#define SOCK_SPIN_NS 20000ull	    /* the spin before sleeping, at least */
#define SOCK_SPIN_MAX_NS 100000ull  /* adaptive spin: the longer spin (data.c spin_budget) */
#define SOCK_SPIN_SHORT_NS 10000ull /* recent waits below this average: the longer spin */
#define SOCK_SLEEP_ENGINE_NS 1000000ull /* below this: a sleeper also polls the engine fds */
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
/* Waits (blocking connect/accept) until s leaves HANDSHAKE. Caller holds s->lock. */
void hs_wait_locked(struct sock *s);
/* Aborts a running handshake (close during it). Caller holds s->lock. */
void hs_abort_locked(struct sock *s);
/* Queues a handshake step on the progress thread (from the engine's callback). */
void hs_kick(struct sock *s);
/* Stops watching the TCP socket (close of an SMC connection). Caller holds s->lock. */
void hs_unwatch_locked(struct sock *s);

/* ---- epoll registrations (epoll.c) ---- */

/* Removes (before=true) or re-adds (false) every recorded registration. Caller holds lock. */
void sock_epoll_move_locked(struct sock *s, bool before);

/* ---- helpers ---- */

/* Fills the core_conn_params of s (addresses, prefixes, sizes, callback). Caller holds lock. */
SMCR_MUST_CHECK int sock_conn_params_locked(struct sock *s, struct core_conn_params *p,
					    struct core_ip_prefix *pfx, int maxpfx);
/* Converts a -SMCR_E code of core/sock to the errno for SO_ERROR. */
int sock_code_errno(int code);

#endif
