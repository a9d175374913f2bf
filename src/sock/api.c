/* api.c: the public calls that create, connect and end smcr sockets (include/smcr/smcr.h):
 * socket, bind, listen, accept/accept4, connect, getsockname/getpeername, shutdown, close.
 * Which connections try SMC-R: the rules (rules.h); how: hs.c; the fd: sock.h.
 * Every call on an fd that is not an smcr socket, or on one in TCP mode, is the libc call. */
#define _GNU_SOURCE
#include <smcr/smcr.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "sock/closeq.h"
#include "sock/errmap.h"
#include "sock/lazyclose.h"
#include "sock/progress.h"
#include "sock/sock.h"
#include "sock/stats.h"
#include "sock/statsrv.h"
#include "sock/sys.h"
#include "util/clock.h"
#include "util/env.h"
#include "util/log.h"

#define SOCK_TYPE_MASK (~(SOCK_NONBLOCK | SOCK_CLOEXEC))

atomic_bool sock_early_connect; /* sock.h */

int smcr_socket(int domain, int type, int protocol)
{
	int fd = sock_sys.socket(domain, type, protocol);
	if (fd < 0)
		return -1;
	/* Only TCP stream sockets become smcr sockets (STYLE.md 25: the type is matched with
	 * a mask so SOCK_NONBLOCK/SOCK_CLOEXEC sockets qualify). */
	if ((domain != AF_INET && domain != AF_INET6) || (type & SOCK_TYPE_MASK) != SOCK_STREAM ||
	    (protocol != 0 && protocol != IPPROTO_TCP))
		return fd;
	struct sock *s;
	int rc = sock_create(fd, domain, type & SOCK_NONBLOCK, type & SOCK_CLOEXEC, &s);
	if (rc < 0) {
		sock_sys.close(fd);
		return sock_fail(rc);
	}
	sock_put(s);
	return fd;
}

int smcr_is_socket(int fd)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return 0;
	sock_put(s);
	return 1;
}

/* The TCP socket of s (fd itself, or the hidden one), for calls that go to it. */
static int sock_tcp_fd(struct sock *s)
{
	pthread_mutex_lock(&s->lock);
	int t = s->tcp;
	pthread_mutex_unlock(&s->lock);
	return t;
}

int smcr_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return sock_sys.bind(fd, addr, len);
	int t = sock_tcp_fd(s);
	sock_put(s);
	if (t < 0)
		return sock_fail(-SMCR_E_SOCK_INVAL);
	return sock_sys.bind(t, addr, len);
}

int smcr_listen(int fd, int backlog)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return sock_sys.listen(fd, backlog);
	pthread_mutex_lock(&s->lock);
	int st = atomic_load(&s->state);
	int rc;
	if (st == SS_NEW) {
		/* discovery.h: opt the listener in before listen() when the rules allow */
		struct disc_choice dc = disc_listener(fd);
		s->action = dc.action;
		s->disc = (uint8_t)dc.mode;
		s->disc_reason = dc.reason;
	}
	if (st == SS_NEW || st == SS_LISTEN) {
		/* the TCP listener may be hidden behind the accept queue's placeholder (lsn.c) */
		rc = sock_sys.listen(s->tcp, backlog);
		if (rc == 0) {
			atomic_store(&s->state, SS_LISTEN);
			lsn_listen_locked(s, backlog);
		}
	} else if (st == SS_TCP) {
		rc = sock_sys.listen(fd, backlog);
	} else {
		errno = EINVAL; /* connected (TCP gives EINVAL too) */
		rc = -1;
	}
	int e = errno;
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
	if (rc == 0)
		statsrv_ensure(); /* smcr-stat lists a process with a listener only */
	errno = e;
	return rc;
}

static int getname(int fd, struct sockaddr *addr, socklen_t *len, bool peer)
{
	struct sock *s = sock_get(fd);
	int t = fd;
	if (s) {
		t = sock_tcp_fd(s);
		sock_put(s);
		if (t < 0)
			return sock_fail(peer ? -SMCR_E_SOCK_NOTCONN : -SMCR_E_SOCK_INVAL);
	}
	return peer ? sock_sys.getpeername(t, addr, len) : sock_sys.getsockname(t, addr, len);
}

int smcr_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	return getname(fd, addr, len, false);
}

int smcr_getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	return getname(fd, addr, len, true);
}

/* ---- connect ---- */

static int connect_smc_locked(struct sock *s, const struct sockaddr *addr, socklen_t len)
{
	/* The engine up before the TCP connect: the server starts its wait for our first
	 * byte (SMCR_SERVER_WAIT_MS) when it accepts, so the Proposal must follow the connect
	 * at once, not after a first connect's engine start (devices, thread; slow under load
	 * or a sanitizer). hs_start_locked copes with no engine (declines). */
	(void)sock_engine();
	/* TCP first, on the program's fd as the program would. */
	bool nb = s->nonblock;
	bool early = atomic_load_explicit(&sock_early_connect, memory_order_relaxed);
	int rc = sock_sys.connect(s->fd, addr, len);
	/* A signal interrupted a blocking connect (a handler without SA_RESTART; with it the
	 * kernel restarts the call itself): TCP's connect goes on in the background and
	 * the call says EINTR. Undecided, the handshake follows it there, as after a
	 * non-blocking connect (poll for POLLOUT, then SO_ERROR). */
	bool intr = rc < 0 && errno == EINTR && early && !nb;
	if (rc < 0 && errno != EINPROGRESS && !intr)
		return sock_err_sys(errno); /* plain TCP error: the socket stays NEW */
	bool connecting = rc < 0;
	s->role = CORE_CLIENT;
	if (!connecting && s->hs.disc_pending && s->action != RULE_SMC_ONLY) {
		/* discovery.h: TCP is up; without the option exchange no CLC at all */
		s->hs.disc_pending = false;
		uint32_t why = disc_result(s->fd);
		if (why) {
			s->local_reason = why;
			atomic_store(&s->state, SS_TCP);
			stats_conn(STATS_MODE_TCP, why, 0);
			return 0;
		}
	}
	s->early = early ? SOCK_EARLY_OPEN : SOCK_EARLY_NO;
	if (!nb && !connecting) {
		/* Blocking: this thread runs the CLC exchange itself on a hidden dup of the TCP
		 * socket (hs_connect_inline_locked); the program's fd keeps the TCP file until
		 * SMC-R is up (then the SMC-R end goes over it) or falls back (nothing to undo).
		 * Nobody can see the connection before connect returns but another thread
		 * polling the same fd meanwhile, which sees TCP's readiness (docs/parts/
		 * connect.md). */
		int t = sock_fd_dup_hidden(s->fd);
		if (t < 0)
			return sock_err_sys(errno);
		socklen_t ll = sizeof(s->laddr);
		if (sock_sys.getsockname(s->fd, (struct sockaddr *)&s->laddr, &ll) < 0) {
			sock_sys.close(t);
			return sock_err_sys(errno);
		}
		memset(&s->paddr, 0, sizeof(s->paddr));
		memcpy(&s->paddr, addr, len < sizeof(s->paddr) ? len : sizeof(s->paddr));
		s->have_addrs = true;
		s->tcp = t;
		s->fd_is_tcp = true;
		atomic_store(&s->state, SS_HANDSHAKE);
		hs_connect_inline_locked(s);
	} else {
		/* undecided: writable once TCP is up (pend), else when the handshake ends */
		rc = sock_install_placeholder_locked(s, !early || connecting);
		if (rc < 0)
			return rc;
		s->tcp_connecting = connecting;
		atomic_store(&s->state, SS_HANDSHAKE);
		rc = hs_start_locked(s);
		if (rc < 0) {
			hs_abort_locked(s);
			return rc;
		}
		if (intr)
			return sock_err_sys(EINTR);
		if (nb)
			return -SMCR_E_SOCK_INPROGRESS;
		if (!early)
			hs_wait_locked(s);
	}
	switch ((enum sock_state)atomic_load(&s->state)) {
	case SS_SMC:
	case SS_TCP:
		return 0;
	case SS_HANDSHAKE:
		if (s->early)
			return connecting ? -SMCR_E_SOCK_INPROGRESS : 0; /* undecided: TCP is up */
		break;
	case SS_FAILED: {
		/* Undecided, TCP was up: TCP's connect succeeded, and a reset right after it
		 * (a server that accepts and closes at once) shows at the next call
		 * (s->error, ECONNRESET), as TCP's. An smc-only rule refuses here. */
		if (s->early && !connecting && s->action != RULE_SMC_ONLY)
			return 0;
		int e = s->error ? s->error : ECONNREFUSED;
		s->error = 0; /* reported by connect, as TCP does */
		return sock_err_sys(e);
	}
	case SS_NEW:
	case SS_LISTEN:
		break;
	}
	return -SMCR_E_INTERNAL;
}

int smcr_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return sock_sys.connect(fd, addr, len);
	/* Every connection an smcr socket makes is listed by smcr-stat, a rule-chosen TCP one
	 * too (statsrv.h): one relaxed load once the server runs. Before s->lock. */
	statsrv_ensure();
	int rc;
	pthread_mutex_lock(&s->lock);
	switch ((enum sock_state)atomic_load(&s->state)) {
	case SS_NEW: {
		struct disc_choice dc = { RULE_TCP, DISC_NONE, SMCR_REASON_RULE_TCP };
		if (addr && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6))
			dc = disc_client(fd, addr); /* discovery.h: rules + TCP option */
		enum rule_action a = dc.action;
		if (a == RULE_TCP) {
			s->action = RULE_TCP;
			s->local_reason = dc.reason;
			s->role = CORE_CLIENT;
			atomic_store(&s->state, SS_TCP);
			pthread_mutex_unlock(&s->lock);
			rc = sock_sys.connect(fd, addr, len);
			stats_tcp_connect(rc, dc.reason);
			sock_put(s);
			return rc;
		}
		s->action = a;
		s->disc = (uint8_t)dc.mode;
		s->hs.disc_pending = dc.mode == DISC_BPF;
		if (a == RULE_SMC_ONLY && !sock_engine()) {
			rc = -SMCR_E_SOCK_SMC_ONLY;
			break;
		}
		rc = connect_smc_locked(s, addr, len);
		break;
	}
	case SS_HANDSHAKE:
		/* undecided with TCP up: connected, as TCP says */
		rc = s->early && !s->tcp_connecting ? -SMCR_E_SOCK_ISCONN : -SMCR_E_SOCK_ALREADY;
		break;
	case SS_SMC:
		rc = -SMCR_E_SOCK_ISCONN;
		break;
	case SS_TCP:
	case SS_LISTEN:
		pthread_mutex_unlock(&s->lock);
		rc = sock_sys.connect(fd, addr, len);
		sock_put(s);
		return rc;
	case SS_FAILED:
	default:
		rc = s->error ? sock_err_sys(s->error) : -SMCR_E_SOCK_CONNREFUSED;
		s->error = 0;
		break;
	}
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
	return rc < 0 ? sock_fail(rc) : 0;
}

/* ---- accept ---- */

int smcr_accept4(int lfd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	struct sock *ls = sock_get(lfd);
	if (!ls)
		return sock_sys.accept4(lfd, addr, alen, flags);
	/* A forked child accepting on its parent's listener is listed too (see connect) */
	statsrv_ensure();
	pthread_mutex_lock(&ls->lock);
	bool listening = atomic_load(&ls->state) == SS_LISTEN;
	if (listening && ls->lq.want && !atomic_load_explicit(&sock_lazy_accept,
							      memory_order_relaxed)) {
		/* SMC-R possible: concurrent handshakes, the first completed is returned */
		pthread_mutex_unlock(&ls->lock);
		int r = lsn_accept(ls, addr, alen, flags);
		sock_put(ls);
		return r < 0 ? sock_fail(r) : r;
	}
	int domain = ls->domain;
	struct disc_choice ldc = { ls->action, (enum disc_mode)ls->disc, ls->disc_reason };
	/* What an accepted TCP socket inherits from its listener (sk_clone), the socket
	 * layer's copies included: RMBE and send buffer sizes, linger, OOB inline, timeouts. */
	uint32_t rcvbuf = ls->rcvbuf, sndbuf = ls->sndbuf;
	bool linger_set = ls->linger_set, oobinline = ls->oobinline;
	int linger_secs = ls->linger_secs;
	struct timeval rcvtimeo = ls->rcvtimeo, sndtimeo = ls->sndtimeo;
	pthread_mutex_unlock(&ls->lock);
	sock_put(ls);
	if (!listening)
		return sock_sys.accept4(lfd, addr, alen, flags);
	for (;;) {
		socklen_t inlen = alen ? *alen : 0;
		int nfd = sock_sys.accept4(lfd, addr, alen, flags);
		if (nfd < 0)
			return -1;
		struct sockaddr_storage local;
		socklen_t ll = sizeof(local);
		if (sock_sys.getsockname(nfd, (struct sockaddr *)&local, &ll) < 0)
			memset(&local, 0, sizeof(local));
		const struct rule *which = NULL;
		enum rule_action a = RULE_TCP;
		uint32_t why = SMCR_REASON_RULE_TCP;
		if (ldc.mode == DISC_BPF) {
			/* discovery.h: the listener was opted in; the option exchange decides */
			why = disc_result(nfd);
			a = why ? RULE_TCP : ldc.action;
			if (why && ldc.action == RULE_SMC_ONLY) {
				LOG_INFO("sock", "accept: smc-only listener, client without the "
						 "option (%s): dropped", smcr_reason_name(why));
				sock_sys.close(nfd);
				if (alen)
					*alen = inlen;
				continue;
			}
		} else {
			a = rules_match(rules_get(), RULE_ROLE_SERVER, rules_prog_name(),
					(struct sockaddr *)&local, &which);
			if (a == RULE_TCP && !which && ldc.reason)
				why = ldc.reason; /* the default: BPF not installed */
		}
		struct sock *s;
		int rc = sock_create(nfd, domain, flags & SOCK_NONBLOCK, flags & SOCK_CLOEXEC, &s);
		if (rc < 0) {
			sock_sys.close(nfd);
			return sock_fail(rc);
		}
		pthread_mutex_lock(&s->lock);
		s->role = CORE_SERVER;
		s->action = a;
		s->rcvbuf = rcvbuf;
		s->sndbuf = sndbuf;
		s->linger_set = linger_set;
		s->linger_secs = linger_secs;
		s->oobinline = oobinline;
		s->rcvtimeo = rcvtimeo;
		s->sndtimeo = sndtimeo;
		s->disc = (uint8_t)ldc.mode;
		if (a == RULE_TCP) {
			s->local_reason = why;
			atomic_store(&s->state, SS_TCP);
			stats_conn(STATS_MODE_TCP, why, 0);
			pthread_mutex_unlock(&s->lock);
			sock_put(s);
			return nfd;
		}
		if (atomic_load_explicit(&sock_lazy_accept, memory_order_relaxed)) {
			/* lsn.c "Accept at first use": the kernel's socket now, the handshake
			 * when the connection is first used, in the process that uses it */
			s->lazy = true;
			s->lazy_forks = atomic_load_explicit(&sock_forks, memory_order_relaxed);
			atomic_fetch_add_explicit(&sock_lazy_pending, 1, memory_order_relaxed);
			atomic_store(&s->state, SS_TCP);
			pthread_mutex_unlock(&s->lock);
			sock_put(s);
			return nfd;
		}
		/* The listener's O_NONBLOCK decides: a non-blocking accept never waits for a
		 * handshake. */
		int lfl = sock_sys.fcntl(lfd, F_GETFL);
		bool bg = lfl >= 0 && (lfl & O_NONBLOCK);
		rc = sock_install_placeholder_locked(s, true);
		if (rc == 0) {
			atomic_store(&s->state, SS_HANDSHAKE);
			rc = hs_start_locked(s);
			if (rc < 0)
				hs_abort_locked(s);
		}
		if (rc < 0) {
			pthread_mutex_unlock(&s->lock);
			LOG_WARN("sock", "accept: cannot start the handshake (%s)", sock_err_name(rc));
			sock_unlink(s);
			sock_sys.close(nfd);
			sock_put(s);
			return sock_fail(rc);
		}
		if (bg) {
			pthread_mutex_unlock(&s->lock);
			sock_put(s);
			return nfd;
		}
		hs_wait_locked(s);
		int st = atomic_load(&s->state);
		pthread_mutex_unlock(&s->lock);
		if (st == SS_SMC || st == SS_TCP) {
			sock_put(s);
			return nfd;
		}
		/* docs/protocol/procedures.md 2.3: a client whose handshake fails is dropped, never
		 * handed to the program; wait for the next one. */
		smcr_close(nfd);
		sock_put(s);
		if (alen)
			*alen = inlen;
	}
}

int smcr_accept(int lfd, struct sockaddr *addr, socklen_t *alen)
{
	return smcr_accept4(lfd, addr, alen, 0);
}

/* ---- shutdown and close ---- */

int smcr_shutdown(int fd, int how)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return sock_sys.shutdown(fd, how);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		sock_put(s);
		return sock_fail(-SMCR_E_SOCK_INVAL);
	}
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	switch ((enum sock_state)atomic_load(&s->state)) {
	case SS_LISTEN:
		if (s->lq.on) {
			/* the listening socket is hidden behind the accept queue (lsn.c) */
			rc = sock_sys.shutdown(s->tcp, how) < 0 ? sock_err_sys(errno) : 0;
			if (rc == 0 && how != SHUT_WR)
				lsn_shutdown_locked(s);
			break;
		}
		/* fall through */
	case SS_NEW:
	case SS_TCP:
		pthread_mutex_unlock(&s->lock);
		rc = sock_sys.shutdown(fd, how);
		sock_put(s);
		return rc;
	case SS_HANDSHAKE:
		if (s->early && !s->tcp_connecting) {
			/* undecided: applied after pend's bytes at the decision (hs.c) */
			s->early_shut |= (how != SHUT_WR ? 1 : 0) | (how != SHUT_RD ? 2 : 0);
			break;
		}
		/* fall through */
	case SS_FAILED:
		rc = -SMCR_E_SOCK_NOTCONN;
		break;
	case SS_SMC:
		rc = core_conn_shutdown(s->conn, how, smcr_now_ns());
		if (rc < 0)
			break;
		if (how != SHUT_RD) {
			/* docs/protocol/procedures.md 5.1: the TCP side follows ("sending done"
			 * first) */
			(void)sock_sys.shutdown(s->tcp, SHUT_WR);
			sig_shut_wr(&s->sig);
			s->shut_wr = true;
		}
		if (how != SHUT_WR)
			sig_shut_rd(&s->sig);
		sock_sync_after_call(s);
		break;
	}
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
	return rc < 0 ? sock_fail(rc) : 0;
}

/* SO_LINGER with a positive time (docs/parts/sndbuf.md "Linger"):
 * wait until every byte of the send ring is written into the peer's RMBE and the C went
 * out after it (TCP: until the data is sent and acknowledged), at most linger seconds.
 * At the timeout close returns anyway and the engine goes on in the background, as Linux
 * TCP does. The wait sleeps in steps of 1..10 ms (the progress thread does the work; the
 * program's fd shows nothing useful once the write side is closed). s->lock not held. */
static void linger_wait(struct sock *s, int secs)
{
	uint64_t until = smcr_now_ns() + (uint64_t)secs * SMCR_NS_PER_S;
	int step = 1;
	for (;;) {
		struct core_conn_info ci;
		core_conn_info(s->conn, &ci);
		if ((ci.sndbuf_queued == 0 && !ci.close_pending) || ci.error ||
		    ci.tcp_action == CORE_TCP_RESET)
			return;
		uint64_t now = smcr_now_ns();
		if (now >= until)
			return;
		uint64_t left_ms = (until - now + SMCR_NS_PER_MS - 1) / SMCR_NS_PER_MS;
		(void)sock_sys.poll(NULL, 0, (int)(left_ms < (uint64_t)step ? left_ms : (uint64_t)step));
		if (step < 10)
			step++;
	}
}

/* The close reaper (core close.c "Quiet final C"). A peer's final C may
 * come unsolicited: it wakes no thread here, and is taken by the next CQ poll of this
 * process (a spin, a progress turn for anything else). So that an idle process still
 * releases the connection's RMB, a close that leaves the exchange incomplete (close_wait)
 * arms one shared progress timer, unless it is armed already; when it fires, the progress
 * thread polls the CQs and re-arms while connections still wait, the interval doubling
 * from REAP_MIN_NS up to REAP_MAX_NS (a peer that never answers is given up by the engine
 * after close_wait_ns anyway). While connections close back to back (the connect test)
 * their C are taken by the program threads' spins and the timer fires every few ms at
 * most: one progress wake-up for many connections instead of one each.
 * $SMCR_CLOSE_REAP_MS sets the first interval (tests). The timer's state is asked
 * (progress_timer_armed), as hs.c's deferred watch does: progress_stop disarms every
 * timer. reap_lock (taken before progress_lock, nothing else under it) protects
 * reap_inited, reap_next_ns, reap_due_ns and reap_closeq_seen. fork(): the child's
 * progress thread has no timers; the child's next close arms its own.
 * The same timer closes the close-later list (closeq.h): every fd queued
 * makes sure it fires within closeq_timer_ms() (sock_reap_soon); a turn that finds fds
 * were queued since the last one comes back after that bound again, so while closes go
 * on it fires every 5 ms without a kick, and stops (or falls back to the reaper's own
 * doubling interval) one turn after they stopped. */
#define REAP_MIN_NS (10ull * SMCR_NS_PER_MS)
#define REAP_MAX_NS (160ull * SMCR_NS_PER_MS)
static pthread_mutex_t reap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct prog_timer reap_tmr;
static bool reap_inited;
static uint64_t reap_first_ns, reap_next_ns;
static uint64_t reap_due_ns;	   /* the last deadline armed (the timer may have run since) */
static uint64_t reap_closeq_seen; /* closeq_queued_total() at the last turn */
#define CLOSEQ_NS ((uint64_t)closeq_timer_ms() * SMCR_NS_PER_MS)
static pthread_once_t reap_once = PTHREAD_ONCE_INIT;

static void reap_atfork_child(void)
{
	pthread_mutex_init(&reap_lock, NULL);
	reap_inited = false;
}

static void reap_setup(void)
{
	uint64_t ms;
	reap_first_ns =
	    smcr_env_num("SMCR_CLOSE_REAP_MS", 1, 60000, &ms) ? ms * SMCR_NS_PER_MS : REAP_MIN_NS;
	pthread_atfork(NULL, NULL, reap_atfork_child);
}

static void reap_fire(void *arg, uint32_t unused)
{
	(void)arg;
	(void)unused;
	/* the close-later list (closeq.h): an idle process closes its hidden fds here */
	closeq_drain_all();
	struct core_engine *e = sock_engine_if_up();
	uint64_t now = smcr_now_ns(), next = UINT64_MAX;
	/* the hook polls too, after the timers: polled here first so the count below sees
	 * what this turn takes */
	if (e)
		(void)core_engine_progress(e, now, &next);
	bool waits = e && core_engine_close_waits(e) > 0;
	pthread_mutex_lock(&reap_lock);
	/* fds were queued since the last turn: closes are going on, come back at the
	 * close-later bound (re-armed here, on the progress thread: no kick, and the next
	 * close finds the timer armed within the bound, so a close loop costs one progress
	 * wake-up per CLOSEQ_TIMER_MS, not one per close) */
	uint64_t total = closeq_queued_total();
	bool used = total != reap_closeq_seen;
	reap_closeq_seen = total;
	uint64_t iv = 0;
	if (used) {
		iv = CLOSEQ_NS;
		reap_next_ns = reap_first_ns;
	} else if (waits) {
		iv = reap_next_ns < REAP_MAX_NS ? reap_next_ns * 2 : REAP_MAX_NS;
		reap_next_ns = iv;
	}
	if (iv && !progress_timer_armed(&reap_tmr)) {
		reap_due_ns = now + iv;
		if (progress_timer_arm(&reap_tmr, reap_due_ns) < 0)
			LOG_WARN("sock", "cannot re-arm the close reaper");
	}
	pthread_mutex_unlock(&reap_lock);
}

/* Caller holds reap_lock. */
static void reap_init_locked(void)
{
	if (!reap_inited) {
		progress_timer_init(&reap_tmr, reap_fire, NULL);
		reap_inited = true;
	}
}

/* Makes sure the shared timer fires within delay_ns (0: the reaper's first interval, and
 * an unarmed timer starts its doubling anew): arms it if unarmed; if bring_forward, also
 * when it is armed later (the reaper's backed-off interval; may kick the progress thread
 * once). Returns -1 if the timer could not be armed. */
static int reap_arm_by(uint64_t delay_ns, bool bring_forward)
{
	pthread_once(&reap_once, reap_setup);
	pthread_mutex_lock(&reap_lock);
	reap_init_locked();
	int rc = 0;
	bool armed = progress_timer_armed(&reap_tmr);
	uint64_t due = smcr_now_ns() + (delay_ns ? delay_ns : reap_first_ns);
	if (!armed || (bring_forward && reap_due_ns > due)) {
		if (!delay_ns && !armed)
			reap_next_ns = reap_first_ns;
		reap_due_ns = due;
		rc = progress_timer_arm(&reap_tmr, due) < 0 ? -1 : 0;
	}
	pthread_mutex_unlock(&reap_lock);
	return rc;
}

static void reap_arm(void)
{
	if (reap_arm_by(0, false) < 0)
		LOG_WARN("sock", "cannot arm the close reaper");
}

void sock_reap_soon(void)
{
	if (reap_arm_by(CLOSEQ_NS, true) < 0) {
		LOG_WARN("sock", "cannot arm the close-later timer");
		closeq_drain_all(); /* no timer: not later, then */
	}
}

int smcr_close(int fd)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return sock_sys.close(fd);
	pthread_mutex_lock(&s->lock);
	bool alias = sock_close_alias_locked(s, fd); /* one number of several (sock.c) */
	pthread_mutex_unlock(&s->lock);
	if (alias) {
		sock_put(s);
		return 0;
	}
	int rc = sock_close(s);
	int e = errno;
	sock_put(s);
	if (rc == -SMCR_E_SOCK_BADF)
		return sock_fail(rc);
	errno = e;
	return rc;
}

/* The program's close of an SMC-R connection (also an undecided connection that became
 * SMC-R after its program closed it, hs.c: may_wait false, no linger wait on that
 * thread). Caller holds s->lock. */
void sock_close_smc_locked(struct sock *s, bool may_wait)
{
	bool abort = s->linger_set && s->linger_secs == 0;
	/* The TCP watch goes before our C, not after it: a peer that
	 * resets its TCP side once both C crossed (below) must not have its RST taken
	 * for an abort of a connection whose C we sent (an A after our C). */
	hs_unwatch_locked(s);
	core_conn_close(s->conn, abort, smcr_now_ns());
	struct core_conn_info ci;
	core_conn_info(s->conn, &ci);
	if (ci.close_wait)
		reap_arm(); /* the peer's C may come quiet (the close reaper, above) */
	/* O_NONBLOCK does not matter: Linux TCP's close lingers either way
	 * (docs/parts/sndbuf.md "Linger"). */
	if (may_wait && !abort && s->linger_set && s->linger_secs > 0 &&
	    ci.tcp_action != CORE_TCP_RESET) {
		/* s->closing keeps other calls away; the progress thread may need the
		 * lock meanwhile */
		pthread_mutex_unlock(&s->lock);
		linger_wait(s, s->linger_secs);
		pthread_mutex_lock(&s->lock);
	}
	if (s->tcp >= 0) {
		if (ci.tcp_action == CORE_TCP_RESET) {
			struct linger lg = { 1, 0 };
			(void)sock_sys.setsockopt(s->tcp, SOL_SOCKET, SO_LINGER, &lg,
						  sizeof(lg));
		} else {
			/* The active closer's TCP side goes right after the C: closed
			 * here, not shut down and closed at the recycle
			 * (docs/protocol/procedures.md 5.1; the same FIN, one system call
			 * fewer per connection). Nothing uses it after this: the watch is
			 * gone, calls see closing. The close itself is done later, where a
			 * thread waits anyway (closeq.h); the number is hidden, so the
			 * program sees no difference. When the peer's C came first and ours
			 * is out (both sides closed the SMC-R connection; nobody reads the
			 * TCP connection any more), it ends with an RST: no FIN exchange
			 * and no TIME_WAIT (DEVIATION from Linux's FIN, bounded in
			 * docs/parts/connect.md "Close"; $SMCR_CLOSE_RST=0).
			 * Only on a software device, whose peer is smcr: its C is sent
			 * by close only, and its TCP watch went before its C. A Linux
			 * peer (verbs) sends C at shutdown(SHUT_RDWR) too, with its
			 * socket still open: it keeps the FIN. */
			/* s->soft_dev, recorded when the connection became SMC-R: the
			 * close may have unlinked it already (core_conn_info's soft_dev
			 * is false then). Until our close only an LG's death unlinks it,
			 * and that resets (tcp_action CORE_TCP_RESET, above). */
			bool rst = ci.peer_closed && !ci.close_pending && !ci.close_wait &&
				   s->soft_dev && closeq_rst_enabled();
			if (closeq_close(s->tcp, rst ? CLOSEQ_RST : CLOSEQ_PLAIN))
				sock_reap_soon();
			s->tcp = -1;
		}
	}
}

int sock_close(struct sock *s)
{
	int fd = s->fd;
	pthread_mutex_lock(&s->lock);
	if (s->closing) {
		pthread_mutex_unlock(&s->lock);
		return -SMCR_E_SOCK_BADF;
	}
	s->closing = true;
	if (s->lazy) {
		s->lazy = false; /* never started: the TCP socket just closes */
		atomic_fetch_sub_explicit(&sock_lazy_pending, 1, memory_order_relaxed);
		/* The close must be the FIN a TCP client of a server that closes at once
		 * gets, though an smcr client's Proposal may be there or on its way
		 * (lazyclose.h). Not when a fork came since the accept: another process
		 * may hold the same file and use it (accept-then-fork servers). */
		if (s->lazy_forks == atomic_load_explicit(&sock_forks, memory_order_relaxed) &&
		    !(s->linger_set && s->linger_secs == 0))
			lazyclose_prepare(fd);
	}
	/* Out of the table first: once the number is closed the kernel may hand it out
	 * again, and the new socket must find the slot free. */
	sock_unlink(s);
	int st = atomic_load(&s->state);
	if (st == SS_LISTEN && s->lq.on)
		lsn_close_locked(s); /* connections nobody accepted are reset */
	if (st == SS_HANDSHAKE && s->early && !s->fd_is_tcp && !hs_inline(s) &&
	    !(s->linger_set && s->linger_secs == 0)) {
		/* Undecided: TCP's close would deliver what was written, then a FIN. The
		 * handshake goes on without the program's fd; its end flushes pend and
		 * closes gracefully (hs.c, orphan). SO_LINGER 0 (an abortive close, and the
		 * interposer's before an exec) resets it instead, as TCP's. */
		s->early = SOCK_EARLY_ORPHAN;
	} else if (st == SS_HANDSHAKE) {
		hs_abort_locked(s);
	}
	if (st == SS_SMC)
		sock_close_smc_locked(s, true);
	int rc = 0;
	if (s->has_sig)
		sig_forget_prog(&s->sig);
	if (s->tcp == s->fd)
		s->tcp = -1; /* TCP mode: the program's fd is the TCP socket */
	rc = sock_sys.close(fd);
	int e = errno;
	pthread_mutex_unlock(&s->lock);
	errno = e;
	return rc; /* the caller's put (usually the last) recycles: engine, hidden fds */
}
