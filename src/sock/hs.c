/* hs.c: drives the CLC handshake of a connection over its TCP socket (docs/protocol/procedures.md
 * 2.2-2.4; RFC 7609 3.x): reads whole CLC messages from the TCP stream, hands them to the engine's
 * state machine (core_conn_clc_step), writes what it answers, and applies the outcome:
 * SMC-R (the placeholder becomes the live program end), fallback (the TCP socket goes back
 * to the program's fd) or failure (the program end shows the error).
 *
 * Who runs it, always under the socket's lock (one step: hs_run_locked):
 *   - in the background, on the progress thread: hs_start_locked registers the TCP watch
 *     and the deadline timer, and the step is re-entered on TCP readiness (the watch), the
 *     engine's CORE_EV_CLC (hs_kick) and the deadline (the timer): non-blocking connects,
 *     accepted connections under accept at first use (started by the first call that needs
 *     the mode, sock_lazy_start) and the accept queue's connections;
 *   - inline, on the calling thread: a blocking connect runs its own CLC exchange
 *     (hs_connect_inline_locked, with the answer's spin, hs_spin_poll) until the link's
 *     set-up, whose LLC messages come through the engine, then goes to the background and
 *     waits on s->cond (hs_wait_locked); a blocking accept drives its queue's handshakes
 *     itself (lsn.c: hs_drive_start_locked / hs_drive_step_locked, then
 *     hs_drive_release_locked hands an unfinished one to the background).
 *
 * Stream discipline: the engine must see CLC bytes only, and after a fallback every byte
 * that is not CLC must still be in the kernel for the program to read. So the driver never
 * reads past a message: it peeks at the 8-byte header for the length (clc_peek_header),
 * then reads exactly that many bytes once all are there. A server that has sent nothing yet
 * peeks at the first bytes too: anything but a CLC eyecatcher means a plain TCP client
 * (fallback, reason PEERNOSMC, nothing consumed), and so does silence until the first-byte
 * wait (sock.h) ends. Once it has sent its Accept it is committed (RFC 7609 3.5): bytes that
 * are not a CLC message fail the handshake and the TCP connection is reset, never handed to
 * the program (docs/parts/robust.md "Finding 1").
 *
 * Without an engine (no device could be opened) the driver answers for itself: a client
 * sends a Decline (NOSMCRDEV) as its first CLC message, which docs/protocol/procedures.md 2.2
 * allows; a server answers a Proposal with that Decline. Both then fall back. */
#define _GNU_SOURCE
#include "sock/sock.h"
#include "sock/stats.h"
#include "sock/trace.h"
#include "sock/waitpol.h"

#include <errno.h>
#include <poll.h>
#include <smcr/smcr.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sock/closeq.h"
#include "sock/errmap.h"
#include "sock/sys.h"
#include "util/clock.h"
#include "util/env.h"
#include "util/log.h"

#define HS_WRITE_WAIT_MS 2000 /* a CLC message fits any TCP send buffer; bound anyway */

static void hs_run_locked(struct sock *s, uint32_t tcp_events);

/* ---- references held by the watch, the timer and queued calls ---- */

static void hs_watch_fn(void *arg, uint32_t events);

static void hs_watch_release(void *arg)
{
	sock_put(arg);
}

static void hs_timer_fn(void *arg, uint32_t unused)
{
	(void)unused;
	struct sock *s = arg;
	pthread_mutex_lock(&s->lock);
	/* Re-armed while this call waited for the lock: the new arming keeps the reference. */
	bool rearmed = progress_timer_armed(&s->hs.timer);
	if (!rearmed)
		s->hs.timer_ref = false;
	hs_run_locked(s, 0);
	pthread_mutex_unlock(&s->lock);
	if (!rearmed)
		sock_put(s);
}

/* Caller holds the lock. A thread driving the handshake itself (hs_inline) only records
 * the deadline: it sleeps in poll() until then. */
static void hs_timer_arm_locked(struct sock *s, uint64_t deadline)
{
	if (hs_inline(s)) {
		if (deadline < s->hs.inline_deadline)
			s->hs.inline_deadline = deadline;
		return;
	}
	if (!s->hs.timer_ref) {
		sock_hold(s);
		s->hs.timer_ref = true;
	}
	if (progress_timer_arm(&s->hs.timer, deadline) < 0) {
		s->hs.timer_ref = false;
		sock_put(s); /* never the last: the caller holds one */
	}
}

static void hs_timer_cancel_locked(struct sock *s)
{
	if (s->hs.timer_ref && progress_timer_cancel(&s->hs.timer)) {
		s->hs.timer_ref = false;
		sock_put(s);
	}
	/* else: not armed, or its call is waiting for our lock and will drop the reference */
}

static void hs_kick_fn(void *arg, uint32_t unused)
{
	(void)unused;
	struct sock *s = arg;
	atomic_store(&s->hs.kick_pending, false);
	pthread_mutex_lock(&s->lock);
	hs_run_locked(s, 0);
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
}

void hs_kick(struct sock *s)
{
	if (atomic_exchange(&s->hs.kick_pending, true))
		return; /* one queued call runs everything that is due */
	sock_hold(s);
	if (progress_call(hs_kick_fn, s) < 0) {
		atomic_store(&s->hs.kick_pending, false);
		LOG_ERR("hs", "fd %d: cannot queue a handshake step", s->fd);
		sock_put(s);
	}
}

/* ---- the watch on the TCP socket: handshake input, later FIN/RST of an SMC connection */

static void tcp_event_smc_locked(struct sock *s, uint32_t ev)
{
	bool rst = false, fin = false;
	if (ev & EPOLLERR) {
		rst = true;
	} else {
		char b;
		ssize_t n = sock_sys.recv(s->tcp, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0)
			fin = true;
		else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			rst = true;
		else if (n > 0)
			SMCR_LOG_RL(SMCR_LOG_WARN, "hs",
				    "fd %d: peer sent bytes on the TCP connection of an SMC-R "
				    "connection; ignored",
				    s->fd);
	}
	if (rst || fin)
		core_conn_tcp_event(s->conn, rst, smcr_now_ns());
}

static void hs_watch_fn(void *arg, uint32_t events)
{
	struct sock *s = arg;
	pthread_mutex_lock(&s->lock);
	switch ((enum sock_state)atomic_load(&s->state)) {
	case SS_HANDSHAKE:
		hs_run_locked(s, events);
		break;
	case SS_SMC:
		if (s->conn && !s->closing)
			tcp_event_smc_locked(s, events);
		break;
	case SS_NEW:
	case SS_LISTEN:
	case SS_TCP:
	case SS_FAILED:
		break;
	}
	pthread_mutex_unlock(&s->lock);
}

/* The peer closed (C or A, docs/protocol/procedures.md 5.1): the TCP connection's FIN/RST that
 * follows tells nothing new, so the watch goes now, on the progress thread that took the C (no
 * lock or kick), instead of waking that thread again for the FIN and removing it in the
 * program's close (a wake-up and an epoll_ctl on each connection's path). */
static void hs_peer_closed_fn(void *arg, uint32_t lost_peer)
{
	struct sock *s = arg;
	bool lost = lost_peer != 0;
	/* Busy: the program is in a call on it, most likely its close (which removes the
	 * watch itself); waiting would be a futex sleep of this thread for nothing. If it was
	 * another call, the FIN's event finds the watch as before. A lost peer's end needs
	 * the FIN seen: wait for the lock then. */
	if (lost ? pthread_mutex_lock(&s->lock) == 0 : pthread_mutex_trylock(&s->lock) == 0) {
		if (atomic_load(&s->state) == SS_SMC && !s->closing && s->watch && s->conn) {
			struct core_conn_info ci;
			core_conn_info(s->conn, &ci);
			if (ci.peer_closed)
				hs_unwatch_locked(s);
			else if (ci.lost_wait &&
				 progress_watch_modify(s->watch, EPOLLET | EPOLLRDHUP) < 0)
				LOG_WARN("hs", "fd %d: cannot watch the TCP connection", s->fd);
		}
		/* not watched yet (deferred): its registration asks for EPOLLRDHUP */
		pthread_mutex_unlock(&s->lock);
	}
	sock_put(s);
}

static void hs_peer_closed_call(void *arg, uint32_t unused)
{
	(void)unused;
	hs_peer_closed_fn(arg, 0);
}

static void hs_peer_lost_call(void *arg, uint32_t unused)
{
	(void)unused;
	hs_peer_closed_fn(arg, 1);
}

void hs_peer_closed(struct sock *s, unsigned events)
{
	/* CORE_EV_RDHUP raised but not in the level: the peer was lost with its link
	 * (close_peer_lost_locked) and its TCP FIN must now wake the watch, from any thread.
	 * Otherwise only on the progress thread: its queued call then runs before it sleeps
	 * again (no eventfd kick); elsewhere the close removes the watch, as before. */
	bool lost = !(events & CORE_EV_RDHUP);
	if ((!lost && !progress_on_thread()) || atomic_exchange(&s->peer_closed_seen, true))
		return;
	/* The engine's callback holds no reference: s may be in its recycle (count 0,
	 * core_conn_release firing the last events). Take one only while others hold one. */
	uint32_t r = atomic_load_explicit(&s->h.ref, memory_order_relaxed);
	do {
		if (r == 0)
			return;
	} while (!atomic_compare_exchange_weak_explicit(&s->h.ref, &r, r + 1,
						       memory_order_acquire,
						       memory_order_relaxed));
	if (progress_call(lost ? hs_peer_lost_call : hs_peer_closed_call, s) < 0)
		sock_put(s);
}

/* ---- deferred RST watch of an established connection ----
 *
 * The watch of an SMC-R connection's idle TCP socket only catches a peer's RST (below):
 * registering it when the connection comes up and removing it at close cost two
 * epoll_ctl per connection and side (the ADD contending with the progress thread on the
 * epoll instance), for connections that mostly live a few hundred microseconds. So it
 * starts HS_WATCH_DEFER_NS after the connection is up: until then the connection waits on
 * one list (FIFO, deadlines in order), one progress timer for the whole list; a close
 * before takes it off the list (no system call). A registration reports a reset that
 * came before it (epoll checks the socket's state at EPOLL_CTL_ADD), so an RST in the
 * first HS_WATCH_DEFER_NS is noticed at most that late (docs/parts/connect.md "What a
 * connection's set-up does not do"; how the delay was chosen: docs/history/connect.md). The engine's own signals (the peer's C or A, link failure) are not delayed.
 * Lock: hs_dw_lock, a leaf (taken under a socket's lock; progress_lock is taken under it
 * by progress_timer_arm); it protects the list, the s->dw_* fields and hs_dw_inited. */
#define HS_WATCH_DEFER_NS (100ull * SMCR_NS_PER_MS)
static pthread_mutex_t hs_dw_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sock *hs_dw_head, *hs_dw_tail;
static struct prog_timer hs_dw_timer;
static bool hs_dw_inited;

static void hs_dw_fire(void *arg, uint32_t unused);

/* fork(): the child's progress thread starts with no timers and no watches (progress.c),
 * so none are inherited: the list is emptied (its references stay, as the parent's
 * watches' did) and the timer is armed again by the child's next connection. */
static pthread_once_t hs_dw_once = PTHREAD_ONCE_INIT;

static void hs_dw_atfork_child(void)
{
	pthread_mutex_init(&hs_dw_lock, NULL);
	for (struct sock *s = hs_dw_head, *n; s; s = n) {
		n = s->dw_next;
		s->dw_next = s->dw_prev = NULL;
		s->dw_on = false;
	}
	hs_dw_head = hs_dw_tail = NULL;
	hs_dw_inited = false;
}

static void hs_dw_init(void)
{
	pthread_atfork(NULL, NULL, hs_dw_atfork_child);
}

/* Caller holds hs_dw_lock. */
static void hs_dw_unlink_locked(struct sock *s)
{
	if (s->dw_prev)
		s->dw_prev->dw_next = s->dw_next;
	else
		hs_dw_head = s->dw_next;
	if (s->dw_next)
		s->dw_next->dw_prev = s->dw_prev;
	else
		hs_dw_tail = s->dw_prev;
	s->dw_next = s->dw_prev = NULL;
	s->dw_on = false;
}

/* Caller holds hs_dw_lock: the timer for the list's head, unless armed already (it then
 * fires earlier or at the same time and re-arms for what is left). The timer's own state
 * is asked (progress_timer_armed), not a flag of ours: progress_stop disarms every timer.
 * Armed by another thread while the callback is on its way: one extra turn, no loss. */
static void hs_dw_arm_locked(void)
{
	if (!hs_dw_head)
		return;
	if (!hs_dw_inited) {
		progress_timer_init(&hs_dw_timer, hs_dw_fire, NULL);
		hs_dw_inited = true;
	}
	if (!progress_timer_armed(&hs_dw_timer) &&
	    progress_timer_arm(&hs_dw_timer, hs_dw_head->dw_deadline) < 0)
		LOG_WARN("hs", "cannot arm the deferred TCP watch timer");
}

static void hs_watch_now_locked(struct sock *s)
{
	sock_hold(s); /* the watch's, dropped by hs_watch_release */
	/* Only a reset wakes the watch (EPOLLERR/EPOLLHUP): a FIN on an SMC-R connection's TCP
	 * side says nothing, except after its peer was lost with its link (hs_peer_closed). */
	uint32_t ev = EPOLLET;
	if (s->conn) {
		struct core_conn_info ci;
		core_conn_info(s->conn, &ci);
		if (ci.lost_wait)
			ev |= EPOLLRDHUP;
	}
	if (progress_watch(s->tcp, ev, hs_watch_fn, s, hs_watch_release, &s->watch) < 0) {
		sock_put(s);
		s->watch = NULL;
		LOG_WARN("hs", "fd %d: cannot watch the TCP connection", s->fd);
	}
}

static void hs_dw_fire(void *arg, uint32_t unused)
{
	(void)arg;
	(void)unused;
	uint64_t now = smcr_now_ns();
	struct sock *due = NULL, **tail = &due;
	pthread_mutex_lock(&hs_dw_lock);
	while (hs_dw_head && hs_dw_head->dw_deadline <= now) {
		struct sock *s = hs_dw_head;
		hs_dw_unlink_locked(s);
		*tail = s; /* the list's reference goes with it */
		tail = &s->dw_next;
	}
	hs_dw_arm_locked();
	pthread_mutex_unlock(&hs_dw_lock);
	while (due) {
		struct sock *s = due;
		due = s->dw_next; /* off the list: dw_next is ours until s->dw_on again */
		pthread_mutex_lock(&s->lock);
		s->dw_next = NULL;
		if (atomic_load(&s->state) == SS_SMC && !s->closing && !s->watch && s->tcp >= 0)
			hs_watch_now_locked(s);
		pthread_mutex_unlock(&s->lock);
		sock_put(s);
	}
}

/* The RST watch of s, HS_WATCH_DEFER_NS from now. Caller holds s->lock. */
static void hs_watch_defer_locked(struct sock *s)
{
	pthread_once(&hs_dw_once, hs_dw_init);
	sock_hold(s); /* the list's */
	pthread_mutex_lock(&hs_dw_lock);
	s->dw_deadline = smcr_now_ns() + HS_WATCH_DEFER_NS;
	s->dw_next = NULL;
	s->dw_prev = hs_dw_tail;
	if (hs_dw_tail)
		hs_dw_tail->dw_next = s;
	else
		hs_dw_head = s;
	hs_dw_tail = s;
	s->dw_on = true;
	hs_dw_arm_locked();
	pthread_mutex_unlock(&hs_dw_lock);
}

void hs_unwatch_locked(struct sock *s)
{
	pthread_mutex_lock(&hs_dw_lock);
	bool listed = s->dw_on;
	if (listed)
		hs_dw_unlink_locked(s);
	pthread_mutex_unlock(&hs_dw_lock);
	if (listed)
		sock_put(s); /* the list's; never the last: the caller holds one */
	if (s->watch) {
		progress_unwatch(s->watch); /* its release drops the watch's reference */
		s->watch = NULL;
	}
}

/* ---- undecided connections: the pre-decision buffer's flush (pend.h) ----
 *
 * When the handshake of an undecided connection (sock.h struct sock.early) ends, the bytes
 * the program wrote meanwhile go out first, in order, over the mode that won; then the
 * program's shutdown of that time is applied; an orphan (closed by the program meanwhile)
 * is then closed gracefully. All under the socket's lock, by whichever thread ended the
 * handshake: a later send of the program takes the lock and finds the state decided and
 * pend empty. */

static int hs_write_all(int fd, const uint8_t *p, size_t len);

/* SMC-R won: pend's capacity is the send ring's size, so its bytes fit the empty ring at
 * once. Caller holds lock; state SS_SMC already. */
static void hs_early_smc_locked(struct sock *s)
{
	size_t len;
	const uint8_t *d = pend_peek(&s->pend, &len);
	while (len) {
		struct iovec v = { (void *)(uintptr_t)d, len };
		long n = core_conn_send(s->conn, &v, 1, 0);
		if (n <= 0) {
			/* cannot happen (an empty ring of pend's size): the next send of the
			 * program tries again before its own bytes (data.c) */
			LOG_ERR("hs", "fd %d: %zu bytes written before the decision wait for the "
				      "send ring (%ld)", s->fd, len, n);
			return;
		}
		(void)stats_io(true, true, 0, n);
		pend_consume(&s->pend, (size_t)n);
		d = pend_peek(&s->pend, &len);
	}
	pend_free(&s->pend);
	if (s->early_shut & 2) {
		if (core_conn_shutdown(s->conn, SHUT_WR, smcr_now_ns()) < 0)
			LOG_DBG("hs", "fd %d: shutdown after the decision failed", s->fd);
		(void)sock_sys.shutdown(s->tcp, SHUT_WR);
		s->shut_wr = true;
		if (s->early != SOCK_EARLY_ORPHAN)
			sig_shut_wr(&s->sig);
	}
	if ((s->early_shut & 1) && s->early != SOCK_EARLY_ORPHAN) {
		if (core_conn_shutdown(s->conn, SHUT_RD, smcr_now_ns()) < 0)
			LOG_DBG("hs", "fd %d: shutdown after the decision failed", s->fd);
		sig_shut_rd(&s->sig);
	}
	s->early_shut = 0;
}

/* TCP won: pend's bytes are written to the TCP socket t (the program's fd again, or the
 * hidden one of an orphan) before anything else can be. pend held no more than t's send
 * buffer takes at once (data.c early_tcp_room), so this does not wait for the peer; should
 * it still fail (the program shrank SO_SNDBUF meanwhile, the peer reset), the bytes the
 * program was told are sent cannot be, and the connection is reset (the peer gets an RST,
 * the program an error at its next call) rather than go on with a hole. Caller holds
 * lock. */
static void hs_early_tcp_locked(struct sock *s, int t)
{
	size_t len;
	const uint8_t *d = pend_peek(&s->pend, &len);
	if (len) {
		int rc = hs_write_all(t, d, len);
		if (rc < 0) {
			LOG_ERR("hs", "fd %d: %zu bytes written before the fallback not sent (%s): "
				      "connection reset", s->fd, len, sock_err_name(rc));
			struct sockaddr un = { .sa_family = AF_UNSPEC };
			(void)sock_sys.connect(t, &un, sizeof(un));
		} else
			(void)stats_io(false, true, 0, (ssize_t)len);
	}
	pend_free(&s->pend);
	if (s->early_shut && s->early != SOCK_EARLY_ORPHAN)
		(void)sock_sys.shutdown(t, (s->early_shut & 3) == 3	? SHUT_RDWR
						   : (s->early_shut & 2) ? SHUT_WR
									 : SHUT_RD);
	s->early_shut = 0;
}

/* ---- outcomes ---- */

static void hs_finish_locked(struct sock *s)
{
	hs_timer_cancel_locked(s);
	sock_keep_retire_locked(s); /* decided: fd changes file no more */
	pthread_cond_broadcast(&s->cond);
	if (s->lsn)
		lsn_child_done_locked(s); /* a listener's child: ready, or dropped */
}

/* RST the TCP socket and close it (failure, abort). */
static void tcp_reset_close(int fd)
{
	struct linger lg = { 1, 0 };
	(void)sock_sys.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	sock_sys.close(fd);
}

static void hs_fail_locked(struct sock *s, int code)
{
	LOG_INFO("hs", "fd %d: connection set-up failed: %s", s->fd, sock_err_name(code));
	hs_unwatch_locked(s);
	pend_free(&s->pend); /* the connection is reset: nothing of it will be delivered */
	s->error = sock_errno_of(code);
	sock_sig_drop_pre_locked(s);
	if (s->fd_is_tcp) {
		/* The TCP file is still at fd: reset it there. A listener's child is then
		 * closed by the queue (the close sends the RST); a client keeps a disconnected
		 * TCP socket (connect(AF_UNSPEC) resets the connection) that shows the error. */
		if (s->tcp >= 0 && s->tcp != s->fd)
			sock_sys.close(s->tcp);
		s->tcp = s->fd;
		s->fd_is_tcp = false;
		struct linger lg = { 1, 0 };
		(void)sock_sys.setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		if (!s->lsn) {
			struct sockaddr sa = { .sa_family = AF_UNSPEC };
			(void)sock_sys.connect(s->fd, &sa, sizeof(sa));
		}
	} else if (s->tcp >= 0 && s->tcp != s->fd) {
		tcp_reset_close(s->tcp);
		s->tcp = -1;
	}
	atomic_store(&s->state, SS_FAILED);
	stats_hs_failed(code);
	if (s->has_sig)
		sig_error(&s->sig); /* POLLERR|POLLHUP|POLLOUT|..., as a failed TCP connect */
	hs_finish_locked(s);
}

void hs_fail_start_locked(struct sock *s, int code)
{
	hs_fail_locked(s, code);
}

static void hs_smc_locked(struct sock *s)
{
	struct core_conn_info ci;
	core_conn_info(s->conn, &ci);
	s->soft_dev = ci.soft_dev; /* fixed from now on: sock_close reads it (sock.h) */
	LOG_INFO("hs", "fd %d: SMC-R (link group %u, %s contact)", s->fd, ci.lg_id,
		 ci.first_contact ? "first" : "reuse");
	if (s->fd_is_tcp) {
		/* no placeholder yet: the SMC-R end goes over the TCP file at fd now */
		int rc = sock_smc_install_locked(s);
		if (rc < 0) {
			hs_fail_locked(s, rc);
			return;
		}
	}
	/* The watch stays, now for the idle TCP connection's RST (RFC 7609: TCP stays up for
	 * the connection's life; a Linux peer resets it when it aborts connections,
	 * docs/protocol/linux-interop.md 8). Only EPOLLERR/EPOLLHUP, which epoll always reports: a
	 * FIN means nothing here (core_conn_tcp_event ignores it, the C says it all) and comes
	 * right after the peer's C on every connection: waking the progress thread for it
	 * cost a wake-up and a sock.lock contention with the program's close. HUP without
	 * ERR needs our own FIN too (we send it only in close, which removes the watch) or a
	 * reset. Edge-triggered: one event per change. A handshake its thread drove has
	 * none yet: it starts HS_WATCH_DEFER_NS later (deferred RST watch, above). */
	uint32_t wev = EPOLLET;
	if (s->watch) {
		if (progress_watch_modify(s->watch, wev) < 0)
			LOG_WARN("hs", "fd %d: cannot watch the TCP connection", s->fd);
	} else {
		hs_watch_defer_locked(s); /* below: most connections end before it starts */
	}
	atomic_store(&s->state, SS_SMC);
	stats_conn(STATS_MODE_SMCR, 0, 0);
	/* After the state store: an engine event from now on applies itself; one from before
	 * is in the level mask read here. */
	unsigned ev = core_conn_events(s->conn);
	if (s->early) {
		hs_early_smc_locked(s);
		ev = core_conn_events(s->conn);
	}
	if (s->early == SOCK_EARLY_ORPHAN) {
		/* closed by the program while undecided: its bytes are on their way, now
		 * the close it asked for (the watch goes with it) */
		sock_close_smc_locked(s, false);
		hs_finish_locked(s);
		return;
	}
	if (ev & CORE_EV_OUT)
		sig_unblock_out(&s->sig);
	sock_apply_events(s, ev, 0, true);
	hs_finish_locked(s);
}

static void hs_fallback_locked(struct sock *s, uint32_t local, uint32_t peer)
{
	if (local)
		s->local_reason = local;
	if (peer)
		s->peer_reason = peer;
	if (s->action == RULE_SMC_ONLY) {
		LOG_INFO("hs", "fd %d: would fall back (local %s, peer %s) but the rule is smc-only",
			 s->fd, smcr_reason_name(local), smcr_reason_name(peer));
		hs_fail_locked(s, -SMCR_E_SOCK_SMC_ONLY);
		return;
	}
	LOG_INFO("hs", "fd %d: TCP fallback (local %s, peer %s)", s->fd, smcr_reason_name(local),
		 smcr_reason_name(peer));
	/* Unwatch before the hidden number is closed: an epoll registration lives as long as
	 * the file, and the file lives on at the program's fd. */
	hs_unwatch_locked(s);
	sock_sig_drop_pre_locked(s);
	if (s->early == SOCK_EARLY_ORPHAN) {
		/* closed by the program while undecided: its bytes, then a FIN */
		hs_early_tcp_locked(s, s->tcp);
		sock_sys.close(s->tcp);
		s->tcp = -1;
		atomic_store(&s->state, SS_TCP);
		stats_conn(STATS_MODE_TCP, s->local_reason, s->peer_reason);
		hs_finish_locked(s);
		return;
	}
	if (s->fd_is_tcp) {
		/* the TCP file never left fd: drop the hidden dup */
		sock_sys.close(s->tcp);
		s->tcp = s->fd;
		s->fd_is_tcp = false;
	} else if (sock_restore_tcp_locked(s) < 0) {
		hs_fail_locked(s, -SMCR_E_SOCK_SYSCALL);
		return;
	}
	if (s->early)
		hs_early_tcp_locked(s, s->fd); /* before the state says TCP (data.c route) */
	atomic_store(&s->state, SS_TCP);
	stats_conn(STATS_MODE_TCP, s->local_reason, s->peer_reason);
	hs_finish_locked(s);
}

/* ---- TCP I/O ---- */

static int hs_write_all(int fd, const uint8_t *p, size_t len)
{
	uint64_t end = smcr_now_ns() + HS_WRITE_WAIT_MS * SMCR_NS_PER_MS;
	while (len) {
		ssize_t n = sock_sys.send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return sock_err_sys(errno);
		uint64_t now = smcr_now_ns();
		if (now >= end)
			return -SMCR_E_SOCK_TIMEDOUT;
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		(void)sock_sys.poll(&pf, 1, (int)((end - now) / SMCR_NS_PER_MS) + 1);
	}
	return 0;
}

enum hs_input {
	HS_IN_NONE,    /* nothing new (yet) */
	HS_IN_MSG,     /* one whole CLC message appended to s->hs.in */
	HS_IN_EOF,     /* TCP EOF or error */
	HS_IN_NOT_CLC, /* server: the client's first bytes are not CLC */
};

/* Reads at most one whole CLC message (never more bytes than the message has). */
static enum hs_input hs_read(struct sock *s)
{
	/* One peek for the header and as much of the message as is there (never more than
	 * the buffer's room); then exactly the message is read. */
	uint8_t *hdr = s->hs.in + s->hs.in_len;
	size_t room = sizeof(s->hs.in) - s->hs.in_len;
	if (room < CLC_HDR_LEN)
		return HS_IN_EOF; /* the engine consumes every whole message: cannot happen */
	ssize_t n = sock_sys.recv(s->tcp, hdr, room, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		return HS_IN_EOF;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return HS_IN_NONE;
	if (n < 0) {
		s->hs.tcp_reset = true; /* the error is consumed by this read: remembered */
		return HS_IN_EOF;
	}
	s->hs.got_bytes = true;
	if (s->role == CORE_SERVER && s->hs.in_len == 0 && !s->hs.clc_out) {
		/* The client's first bytes: "SMCR" or "SMCD" (a Linux client may send an SMC-D
		 * Proposal or a Decline), else a plain TCP client. Only here: once our Accept is
		 * out we are committed (RFC 7609 3.5), and whatever follows is CLC or a reset. */
		if (!clc_eye_prefix(hdr, (size_t)n))
			return HS_IN_NOT_CLC;
	}
	if ((size_t)n < CLC_HDR_LEN)
		return s->hs.tcp_rdhup ? HS_IN_EOF : HS_IN_NONE;
	uint16_t msglen = 0;
	if (clc_peek_header(hdr, CLC_HDR_LEN, NULL, &msglen, NULL) < 0 || msglen < CLC_HDR_LEN)
		msglen = CLC_HDR_LEN; /* the engine reports the framing error precisely */
	if (msglen > room)
		msglen = (uint16_t)room;
	if (n < (ssize_t)msglen) {
		/* A part of a message and then EOF: a peek keeps returning the part, so the
		 * end shows only in the watch's EPOLLRDHUP. */
		return n == 0 || s->hs.tcp_rdhup ? HS_IN_EOF : HS_IN_NONE;
	}
	s->hs.in_more = n > (ssize_t)msglen;
	n = sock_sys.recv(s->tcp, s->hs.in + s->hs.in_len, msglen, MSG_DONTWAIT);
	if (n != (ssize_t)msglen)
		return HS_IN_EOF;
	s->hs.in_len += msglen;
	trace_clc(s, false, s->hs.in + s->hs.in_len - msglen, msglen);
	return HS_IN_MSG;
}

/* The TCP peer closed cleanly (a FIN, no reset pending): a read sees the end of the
 * stream and SO_ERROR is 0. */
static bool hs_clean_eof(struct sock *s)
{
	int err = 0;
	socklen_t l = sizeof(err);
	if (s->hs.tcp_reset || sock_sys.getsockopt(s->tcp, SOL_SOCKET, SO_ERROR, &err, &l) < 0 ||
	    err) {
		if (err)
			s->hs.tcp_reset = true;
		return false;
	}
	char b;
	return sock_sys.recv(s->tcp, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* ---- without an engine ---- */

static void hs_noengine_locked(struct sock *s, enum hs_input in)
{
	struct clc_msg m;
	memset(&m, 0, sizeof(m));
	m.type = CLC_DECLINE;
	m.decline.f.version = CLC_VERSION_1;
	m.decline.diag = SMCR_REASON_NODEV;
	uint8_t buf[CLC_DECLINE_V2_LEN];
	size_t len = 0;
	if (s->role == CORE_CLIENT) {
		if (clc_encode(&m, buf, sizeof(buf), &len) < 0 ||
		    hs_write_all(s->tcp, buf, len) < 0) {
			hs_fail_locked(s, -SMCR_E_SOCK_SYSCALL);
			return;
		}
		trace_clc(s, true, buf, len);
		hs_fallback_locked(s, SMCR_REASON_NODEV, 0);
		return;
	}
	switch (in) {
	case HS_IN_NONE:
		return;
	case HS_IN_EOF:
		hs_fail_locked(s, -SMCR_E_SOCK_CONNRESET);
		return;
	case HS_IN_NOT_CLC:
		hs_fallback_locked(s, SMCR_REASON_PEERNOSMC, 0);
		return;
	case HS_IN_MSG:
		break;
	}
	struct clc_msg got;
	int rc = clc_decode(s->hs.in, s->hs.in_len, &got);
	s->hs.in_len = 0;
	if (rc == 0 && got.type == CLC_DECLINE) {
		hs_fallback_locked(s, SMCR_REASON_PEERDECL, got.decline.diag);
	} else if (rc == 0 && got.type == CLC_PROPOSAL) {
		if (clc_encode(&m, buf, sizeof(buf), &len) < 0 ||
		    hs_write_all(s->tcp, buf, len) < 0)
			hs_fail_locked(s, -SMCR_E_SOCK_SYSCALL);
		else {
			trace_clc(s, true, buf, len);
			hs_fallback_locked(s, SMCR_REASON_NODEV, 0);
		}
	} else {
		hs_fail_locked(s, rc < 0 ? rc : -SMCR_E_CORE_CLC_UNEXPECTED);
	}
}

/* ---- the step loop ---- */

static void hs_run_locked(struct sock *s, uint32_t tcp_events)
{
	if (atomic_load(&s->state) != SS_HANDSHAKE ||
	    (s->closing && s->early != SOCK_EARLY_ORPHAN))
		return;
	if (tcp_events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		s->hs.tcp_rdhup = true;
	if (tcp_events & EPOLLERR)
		s->hs.tcp_reset = true;
	uint64_t now = smcr_now_ns();
	if (s->tcp_connecting) {
		int err = 0;
		socklen_t l = sizeof(err);
		if (sock_sys.getsockopt(s->tcp, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err) {
			hs_fail_locked(s, sock_err_sys(err));
			return;
		}
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		if (sock_sys.getpeername(s->tcp, (struct sockaddr *)&ss, &sl) < 0) {
			if (errno == ENOTCONN && !(tcp_events & (EPOLLERR | EPOLLHUP)))
				return; /* still connecting: EPOLLOUT will come */
			hs_fail_locked(s, -SMCR_E_SOCK_CONNREFUSED);
			return;
		}
		s->tcp_connecting = false;
		/* TCP is up: an undecided connection is writable now, as TCP's (pend) */
		if (s->early == SOCK_EARLY_OPEN && s->has_sig)
			sig_unblock_out(&s->sig);
	}
	if (s->hs.disc_pending) {
		/* discovery.h: the option exchange decides before any CLC byte */
		s->hs.disc_pending = false;
		uint32_t why = disc_result(s->tcp);
		if (why) {
			if (s->conn)
				core_conn_set_fallback(s->conn, why);
			hs_fallback_locked(s, why, 0);
			return;
		}
	}
	if (!s->conn) {
		hs_noengine_locked(s, s->role == CORE_SERVER ? hs_read(s) : HS_IN_NONE);
		return;
	}
	/* A client's first step writes the Proposal: nothing can have come before it. */
	bool may_read = !(s->role == CORE_CLIENT && s->hs.status == 0 && !s->hs.got_bytes &&
			  !(tcp_events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)));
	for (int round = 0; round < 16; round++) {
		enum hs_input in = may_read ? hs_read(s) : HS_IN_NONE;
		bool eof = false;
		switch (in) {
		case HS_IN_NOT_CLC:
			core_conn_set_fallback(s->conn, SMCR_REASON_PEERNOSMC);
			hs_fallback_locked(s, SMCR_REASON_PEERNOSMC, 0);
			return;
		case HS_IN_EOF:
			eof = true;
			break;
		case HS_IN_NONE:
		case HS_IN_MSG:
			break;
		}
		/* hs.status 0: the FIN came before the first step wrote the Proposal */
		if (eof && s->early && s->role == CORE_CLIENT && s->hs.in_len == 0 &&
		    (s->hs.status == CORE_CLC_NEED_INPUT || s->hs.status == 0) &&
		    hs_clean_eof(s)) {
			/* Undecided, and the server closed (a FIN, no reset) without a word:
			 * TCP's connection ended by its peer. The program gets exactly that: the
			 * TCP socket back, EOF on a read (a server that accepts and closes at
			 * once, CPython's test_socket). */
			core_conn_set_fallback(s->conn, SMCR_REASON_PEERNOSMC);
			hs_fallback_locked(s, SMCR_REASON_PEERNOSMC, 0);
			return;
		}
		if (s->role == CORE_SERVER && !s->hs.got_bytes && !eof) {
			if (now >= s->hs.first_byte_deadline) {
				/* Nothing read, nothing sent: the stream is untouched, so TCP is a
				 * clean choice (a plain client waiting for the server to talk). */
				core_conn_set_fallback(s->conn, SMCR_REASON_PEERNOSMC);
				hs_fallback_locked(s, SMCR_REASON_PEERNOSMC, 0);
				return;
			}
			hs_timer_arm_locked(s, s->hs.first_byte_deadline);
			return;
		}
		struct core_clc_result r;
		int rc = core_conn_clc_step(s->conn, s->hs.in, s->hs.in_len, eof, now, &r);
		if (rc < 0) {
			hs_fail_locked(s, rc);
			return;
		}
		s->hs.status = (int)r.status;
		if (r.consumed > s->hs.in_len)
			r.consumed = s->hs.in_len;
		memmove(s->hs.in, s->hs.in + r.consumed, s->hs.in_len - r.consumed);
		s->hs.in_len -= r.consumed;
		if (r.out_len) {
			trace_clc(s, true, r.out, r.out_len);
			rc = hs_write_all(s->tcp, r.out, r.out_len);
			if (rc < 0 && r.status != CORE_CLC_FAILED) {
				hs_fail_locked(s, rc);
				return;
			}
			s->hs.clc_out = true;
		}
		switch (r.status) {
		case CORE_CLC_SMC:
			hs_smc_locked(s);
			return;
		case CORE_CLC_FALLBACK: {
			struct core_conn_info ci;
			core_conn_info(s->conn, &ci);
			hs_fallback_locked(s, ci.fallback_local, ci.fallback_peer);
			return;
		}
		case CORE_CLC_FAILED:
			hs_fail_locked(s, r.err ? r.err : -SMCR_E_SOCK_CONNRESET);
			return;
		case CORE_CLC_NEED_INPUT:
		case CORE_CLC_WAIT_LINK:
			break;
		}
		if (eof) {
			/* The engine saw the EOF and still waits: it will fail at its deadline;
			 * do not spin on a readable EOF meanwhile. */
		}
		if (r.deadline_ns != UINT64_MAX)
			hs_timer_arm_locked(s, r.deadline_ns);
		if (in != HS_IN_MSG)
			return; /* nothing read: the peer's answer (if any) comes as an event */
		if (r.out_len && !s->hs.in_more && !s->hs.tcp_rdhup)
			return; /* we answered and nothing else was queued behind what we read:
				 * the peer's reply comes as a new event (a new EPOLLET edge, or
				 * poll's level), a read now would be an EAGAIN (a system call per
				 * handshake) */
		may_read = true;
		now = smcr_now_ns();
	}
	/* Many messages in a row (not a valid handshake): come back later, not in a loop. */
	hs_kick(s);
}

/* ---- the CLC answer's spin (sock.h hs_spin_poll) ----
 *
 * The connect phase of a reuse connection is one CLC round trip and a half: the client's
 * thread sleeps in poll() for the Accept, the server's accepting thread for the Confirm.
 * Each answer is computed within tens of microseconds of the question, but a thread woken
 * from poll() waits for a CPU first (tens to hundreds of microseconds on 2 busy cores:
 * docs/parts/connect.md). So the waiting thread polls without blocking for a bounded time
 * first, as wait_for (data.c) does for data. The two sides never spin at the same time for
 * the same exchange: each spins only after it sent a message, while the other side works
 * on it. Misses (the peer was slow: a loaded machine, or a peer that answers late) turn the
 * spin off for a while, so a spinner does not keep taking the CPU its peer needs (the
 * decision is the wait policy's: waitpol.h waitpol_clc_spin). */

_Atomic uint64_t hs_spin_runs[HS_SPIN_SITES], hs_spin_hits[HS_SPIN_SITES];
_Atomic uint64_t hs_spin_busy[HS_SPIN_SITES];
/* Per site: the wait policy's state (waitpol.h waitpol_clc_spin), a fresh one saying
 * "every spin hits". Racy read-modify-writes between threads of one process: a lost
 * update only delays the average by one sample. */
_Static_assert(HS_SPIN_SITES == 3, "hs_spin_rate and last_nivcsw: one entry per site");
static _Atomic unsigned hs_spin_rate[HS_SPIN_SITES] = { WAITPOL_CLC_SCALE, WAITPOL_CLC_SCALE,
							 WAITPOL_CLC_SCALE };
static _Atomic unsigned hs_spin_waits[HS_SPIN_SITES]; /* waits while the rate is low */
static _Atomic long long hs_spin_budget_ns = -1;      /* -1: not read from the env yet */

static uint64_t hs_spin_budget(void)
{
	long long b = atomic_load_explicit(&hs_spin_budget_ns, memory_order_relaxed);
	if (b < 0) {
		b = (long long)smcr_env_num_or("SMCR_CLC_SPIN_US", 0, 10000, HS_SPIN_NS / 1000) *
		    1000;
		atomic_store_explicit(&hs_spin_budget_ns, b, memory_order_relaxed);
	}
	return (uint64_t)b;
}

int hs_spin_poll(struct pollfd *pf, unsigned n, enum hs_spin_site site)
{
	/* The server spins shorter: the client's Confirm comes within about 2 µs of the
	 * spin's start when the client runs, the server's Accept within 2-50 µs (it may have
	 * to wake up first; the figures: docs/history/connect.md). */
	uint64_t budget = hs_spin_budget();
	if (site == HS_SPIN_SERVER && budget > HS_SPIN_SERVER_NS)
		budget = HS_SPIN_SERVER_NS;
	if (site == HS_SPIN_IDLE && budget > HS_SPIN_IDLE_NS)
		budget = HS_SPIN_IDLE_NS;
	if (!budget)
		return 0;
	unsigned rate = atomic_load_explicit(&hs_spin_rate[site], memory_order_relaxed);
	unsigned waits = waitpol_clc_low(rate) ? atomic_fetch_add_explicit(&hs_spin_waits[site], 1,
									  memory_order_relaxed)
					       : 0;
	if (!waitpol_clc_spin(rate, waits, false))
		return 0; /* low rate, not the probe: no getrusage either */
	/* "Preempted since the last wait here": per site, so the first wait at a site may
	 * always spin (a blocking accept has two: the idle wait's spin may be preempted
	 * before the Confirm's first). */
	static _Thread_local long last_nivcsw[HS_SPIN_SITES] = { -1, -1, -1 };
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru) == 0) {
		bool preempted = last_nivcsw[site] >= 0 && ru.ru_nivcsw != last_nivcsw[site];
		last_nivcsw[site] = ru.ru_nivcsw;
		if (!waitpol_clc_spin(rate, waits, preempted)) {
			atomic_fetch_add_explicit(&hs_spin_busy[site], 1, memory_order_relaxed);
			return 0;
		}
	}
	atomic_fetch_add_explicit(&hs_spin_runs[site], 1, memory_order_relaxed);
	uint64_t t0 = smcr_now_ns();
	int r;
	do {
		r = sock_sys.poll(pf, (nfds_t)n, 0);
		if (r != 0)
			break;
	} while (smcr_now_ns() - t0 < budget);
	if (r > 0)
		atomic_fetch_add_explicit(&hs_spin_hits[site], 1, memory_order_relaxed);
	rate = atomic_load_explicit(&hs_spin_rate[site], memory_order_relaxed);
	atomic_store_explicit(&hs_spin_rate[site], waitpol_clc_rate(rate, r > 0),
			      memory_order_relaxed);
	/* < 0 with errno (EINTR: a signal came during the spin; a blocking poll after it
	 * would sleep through it, so the caller treats it as its own poll's EINTR) */
	return r;
}

/* ---- entry points ---- */

int sock_conn_params_locked(struct sock *s, struct core_conn_params *p,
			    struct core_ip_prefix *pfx, int maxpfx)
{
	memset(p, 0, sizeof(*p));
	p->role = s->role;
	if (s->have_addrs) {
		/* known from accept4 / connect and one getsockname */
		p->local = s->laddr;
		p->peer = s->paddr;
	} else {
		socklen_t l = sizeof(p->local);
		if (sock_sys.getsockname(s->tcp, (struct sockaddr *)&p->local, &l) < 0)
			return sock_err_sys(errno);
		l = sizeof(p->peer);
		if (sock_sys.getpeername(s->tcp, (struct sockaddr *)&p->peer, &l) < 0 &&
		    errno != ENOTCONN)
			return sock_err_sys(errno);
	}
	p->rcvbuf = s->rcvbuf;
	p->sndbuf = s->sndbuf;
	p->oobinline = s->oobinline;
	p->cb = sock_core_event;
	p->cb_ctx = s;
	/* The prefixes of the interface holding the local address (docs/protocol/wire-formats.md
	 * 3.3), from the cache (prefix.c). */
	int n = sock_prefixes((const struct sockaddr *)&p->local, pfx, maxpfx);
	p->prefixes = n ? pfx : NULL;
	p->nprefixes = n;
	return 0;
}

/* The engine's connection and the deadlines; nothing watched yet. Caller holds lock. */
static void hs_prepare_locked(struct sock *s)
{
	struct core_engine *e = s->decline_only ? NULL : sock_engine(); /* none: a Decline */
	if (e) {
		struct core_conn_params p;
		struct core_ip_prefix pfx[CORE_MAX_PREFIXES];
		int rc = sock_conn_params_locked(s, &p, pfx, CORE_MAX_PREFIXES);
		if (rc == 0)
			rc = core_conn_new(e, &p, &s->conn);
		if (rc < 0) {
			LOG_WARN("hs", "fd %d: no engine connection (%s); declining", s->fd,
				 sock_err_name(rc));
			s->conn = NULL;
		}
	}
	if (s->role == CORE_SERVER) {
		uint64_t w = sock_server_first_wait_ns();
		/* a listener with TCP_DEFER_ACCEPT reports a silent client after the kernel's
		 * 1 s (lsn.c): that second counts towards the wait */
		if (s->accept_deferred)
			w = w > SMCR_NS_PER_S ? w - SMCR_NS_PER_S : 0;
		s->hs.first_byte_deadline = smcr_now_ns() + w;
	}
	progress_timer_init(&s->hs.timer, hs_timer_fn, s);
}

int hs_start_locked(struct sock *s)
{
	hs_prepare_locked(s);
	s->hs.driver = HS_DRV_PROGRESS;
	/* The first step here, not on the progress thread: a server's Proposal is usually
	 * there already (its Accept goes out before anything else is set up), a client's
	 * goes out at once. Later steps come from the watch, added after it: the kernel
	 * reports what is already there when a registration is added. */
	hs_run_locked(s, 0);
	if (atomic_load(&s->state) != SS_HANDSHAKE || s->watch)
		return 0; /* ended at once (SMC-R made its own FIN/RST watch) */
	/* EPOLLOUT only while TCP connects: a connected socket is writable at once, an
	 * event (a wake-up of the progress thread) for nothing. */
	uint32_t ev = EPOLLIN | EPOLLRDHUP | EPOLLET | (s->tcp_connecting ? EPOLLOUT : 0);
	sock_hold(s); /* the watch's reference, dropped by hs_watch_release */
	int rc = progress_watch(s->tcp, ev, hs_watch_fn, s, hs_watch_release, &s->watch);
	if (rc < 0) {
		sock_put(s);
		s->watch = NULL;
		return rc;
	}
	return 0;
}

/* A server whose Accept went out: open the signal pair now, while the client reads the
 * Accept and answers (4 system calls off the path between its Confirm and the first data;
 * as a client does while the server answers). A fallback or failure closes it. */
static void hs_presig_locked(struct sock *s)
{
	if (atomic_load(&s->state) == SS_HANDSHAKE && s->role == CORE_SERVER && s->conn &&
	    s->hs.clc_out && s->hs.status == CORE_CLC_NEED_INPUT && !s->has_sig && !s->sig_pre &&
	    sig_open(&s->sig) == 0)
		s->sig_pre = true;
}

bool hs_drive_start_locked(struct sock *s)
{
	hs_prepare_locked(s);
	s->hs.driver = HS_DRV_ACCEPT;
	s->hs.inline_deadline = UINT64_MAX;
	hs_run_locked(s, 0);
	hs_presig_locked(s);
	return atomic_load(&s->state) == SS_HANDSHAKE;
}

void hs_drive_step_locked(struct sock *s, uint32_t ev)
{
	s->hs.inline_deadline = UINT64_MAX;
	hs_run_locked(s, ev);
	hs_presig_locked(s);
}

int hs_drive_release_locked(struct sock *s)
{
	uint64_t d = s->hs.inline_deadline;
	s->hs.driver = HS_DRV_PROGRESS;
	if (atomic_load(&s->state) != SS_HANDSHAKE || s->closing || s->watch)
		return 0;
	sock_hold(s); /* the watch's reference, dropped by hs_watch_release */
	int rc = progress_watch(s->tcp, EPOLLIN | EPOLLRDHUP | EPOLLET, hs_watch_fn, s,
				hs_watch_release, &s->watch);
	if (rc < 0) {
		sock_put(s);
		s->watch = NULL;
		return rc;
	}
	if (d != UINT64_MAX)
		hs_timer_arm_locked(s, d);
	return 0;
}

/* An undecided blocking connect returns (sock.h struct sock.early): the SMC-R end (the
 * pair opened while the server answers) goes over the TCP file at fd as the placeholder,
 * writable (pend), and the handshake goes on in the background: the watch, and the
 * timer for the deadline the inline steps recorded. Caller holds lock. */
static void hs_early_detach_locked(struct sock *s)
{
	uint64_t d = s->hs.inline_deadline;
	s->hs.driver = HS_DRV_PROGRESS;
	if (s->fd_is_tcp) {
		int rc = sock_smc_install_locked(s);
		if (rc < 0) {
			hs_fail_locked(s, rc);
			return;
		}
		sock_keep_arm_locked(s); /* a fallback may still give the number back to TCP */
	}
	sock_hold(s); /* the watch's reference, dropped by hs_watch_release */
	if (progress_watch(s->tcp, EPOLLIN | EPOLLRDHUP | EPOLLET, hs_watch_fn, s,
			   hs_watch_release, &s->watch) < 0) {
		sock_put(s);
		s->watch = NULL;
		hs_fail_locked(s, -SMCR_E_SOCK_SYSCALL);
		return;
	}
	if (d != UINT64_MAX)
		hs_timer_arm_locked(s, d);
}

void hs_connect_inline_locked(struct sock *s)
{
	hs_prepare_locked(s);
	s->hs.driver = HS_DRV_CONNECT;
	uint32_t ev = 0;
	for (;;) {
		s->hs.inline_deadline = UINT64_MAX;
		hs_run_locked(s, ev);
		if (atomic_load(&s->state) != SS_HANDSHAKE || s->closing)
			break;
		if (s->hs.status == CORE_CLC_WAIT_LINK && s->early) {
			/* the link comes through the engine: connect returns, TCP is up */
			hs_early_detach_locked(s);
			break;
		}
		if (s->hs.status == CORE_CLC_WAIT_LINK) {
			/* The link's messages (CONFIRM LINK, CONFIRM RKEY) come through the engine
			 * on the progress thread: go to the background and wait. An event raised
			 * meanwhile was queued (hs_kick) and runs once we release the lock. */
			uint64_t d = s->hs.inline_deadline;
			s->hs.driver = HS_DRV_PROGRESS;
			sock_hold(s);
			if (progress_watch(s->tcp, EPOLLIN | EPOLLRDHUP | EPOLLET, hs_watch_fn, s,
					   hs_watch_release, &s->watch) < 0) {
				sock_put(s);
				s->watch = NULL;
				hs_fail_locked(s, -SMCR_E_SOCK_SYSCALL);
				break;
			}
			if (d != UINT64_MAX)
				hs_timer_arm_locked(s, d);
			hs_wait_locked(s);
			break;
		}
		/* While the server works on our Proposal: open the signal pair now (it is only
		 * installed over the TCP file if SMC-R comes; a fallback closes it). */
		if (!s->has_sig && !s->sig_pre && s->conn) {
			if (sig_open(&s->sig) == 0)
				s->sig_pre = true;
		}
		/* wait for the peer's next message (or the deadline) without the lock */
		int ms = -1;
		if (s->hs.inline_deadline != UINT64_MAX) {
			uint64_t now = smcr_now_ns();
			uint64_t d = s->hs.inline_deadline > now ? s->hs.inline_deadline - now : 0;
			d = (d + SMCR_NS_PER_MS - 1) / SMCR_NS_PER_MS;
			ms = d > 60000 ? 60000 : (int)d;
		}
		struct pollfd pf = { .fd = s->tcp, .events = POLLIN | POLLRDHUP };
		/* our message went out and the server's answer is due: spin for it first */
		bool spin = s->hs.clc_out && s->hs.status == CORE_CLC_NEED_INPUT;
		pthread_mutex_unlock(&s->lock);
		/* No closeq drain here: this wait is filled already (the signal pair is
		 * opened in it), and a close past the Accept's arrival delays the Confirm;
		 * the wait for the answer's data drains them (docs/parts/connect.md
		 * "Close"). */
		int n = spin ? hs_spin_poll(&pf, 1, HS_SPIN_CLIENT) : 0;
		if (n == 0 && !s->early)
			n = sock_sys.poll(&pf, 1, ms);
		pthread_mutex_lock(&s->lock);
		if (s->early && n <= 0) {
			/* Undecided: the answer did not come within the spin (or a signal
			 * came: TCP's connect is done, so it returns 0). The handshake goes on
			 * in the background; the server may be this very thread, which
			 * accepts after connect returns. */
			if (atomic_load(&s->state) == SS_HANDSHAKE && !s->closing)
				hs_early_detach_locked(s);
			break;
		}
		ev = 0;
		if (n > 0) {
			ev = (pf.revents & POLLIN ? EPOLLIN : 0) |
			     (pf.revents & POLLRDHUP ? EPOLLRDHUP : 0) |
			     (pf.revents & POLLHUP ? EPOLLHUP : 0) |
			     (pf.revents & (POLLERR | POLLNVAL) ? EPOLLERR : 0);
		}
	}
	if (s->hs.driver == HS_DRV_CONNECT)
		s->hs.driver = HS_DRV_NONE; /* ended here (else detached: the progress thread's) */
}

void sock_early_settle(int fd)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	while (atomic_load(&s->state) == SS_HANDSHAKE && s->early && !s->closing)
		pthread_cond_wait(&s->cond, &s->lock); /* hs_finish_locked broadcasts */
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
}

void hs_wait_locked(struct sock *s)
{
	while (atomic_load(&s->state) == SS_HANDSHAKE)
		pthread_cond_wait(&s->cond, &s->lock);
}

void hs_abort_locked(struct sock *s)
{
	if (atomic_load(&s->state) != SS_HANDSHAKE)
		return;
	hs_unwatch_locked(s);
	hs_timer_cancel_locked(s);
	sock_sig_drop_pre_locked(s);
	pend_free(&s->pend);
	if (s->fd_is_tcp) {
		/* the TCP file is at fd too: reset it there (the closer closes fd) */
		if (s->tcp >= 0 && s->tcp != s->fd)
			sock_sys.close(s->tcp);
		struct linger lg = { 1, 0 };
		(void)sock_sys.setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		s->tcp = s->fd;
		s->fd_is_tcp = false;
	} else if (s->tcp >= 0 && s->tcp != s->fd) {
		tcp_reset_close(s->tcp);
		s->tcp = -1;
	}
	s->error = ECONNABORTED;
	atomic_store(&s->state, SS_FAILED);
	stats_hs_failed(sock_err_sys(ECONNABORTED));
	if (s->has_sig)
		sig_error(&s->sig);
	pthread_cond_broadcast(&s->cond);
	if (s->lsn)
		lsn_child_done_locked(s);
}
