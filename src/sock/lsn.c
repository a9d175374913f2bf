/* lsn.c: the accept queue of an smcr listener: CLC handshakes of many clients run at once,
 * and accept returns the first that completed (docs/protocol/procedures.md 2.3; project issue 4;
 * docs/parts/connect.md "Accept").
 *
 * Why: TCP's accept returns established connections in arrival order, whatever each client
 * does next. A server that ran one CLC handshake at a time behind a blocking accept let one
 * client that connects and sends nothing (or half a Proposal) hold every later client back
 * until the server's wait ran out.
 *
 * How (queue mode, per process):
 *   - At the first smcr_accept (or smcr_epoll_ctl) on a listener where SMC-R is possible
 *     (lsn_listen_locked decided: rules or the BPF option), the listening TCP socket moves
 *     to a hidden number and the program's fd becomes a placeholder (a signal pair, sig.h,
 *     with POLLOUT blocked): it shows POLLIN exactly while a completed connection is
 *     queued (one token per completion: a new EPOLLET edge each time, as a TCP listener).
 *     Per process, because fork() shares the listening socket but not this queue: a
 *     process that never accepts (a pre-forking master, a test's parent) never takes
 *     connections from the kernel's queue.
 *   - The progress thread watches the hidden listener; it, and a blocking accept before it
 *     sleeps, take the kernel's established connections (lsn_fill) and start a handshake
 *     for each: a "child" socket at the number accept4 gave (unknown to the program; the
 *     TCP file stays there, fd_is_tcp, plus a hidden dup the handshake uses), driven by the
 *     progress thread like any background handshake (hs.c).
 *   - A child that ends in SMC-R or TCP moves from pending to ready; one that fails is
 *     dropped (reset, closed; never handed to the program, docs/protocol/procedures.md 2.3): a
 *     malformed message at once, a silent client after the server's wait (SMCR_SERVER_WAIT_MS: TCP
 *     fallback, nothing was read), a client silent after its Proposal after the CLC wait.
 *   - accept pops the oldest ready child and applies accept4's flags to it.
 *
 * Bound: connections are taken from the kernel while ready < the listen() backlog (at
 * least 1, at most LSN_MAX) and pending < LSN_HS_MAX. Handshakes in flight do not count
 * against the backlog (a kernel TCP server's backlog holds established connections, and
 * clients that stall in their handshake must not hold the next ones back: slowloris); they
 * are bounded by LSN_HS_MAX, what a listener may spend on them in memory and fds, and each
 * ends at its timer. The rest wait in the kernel's queue (itself bounded by the backlog),
 * as TCP's do.
 *
 * Ownership: the listener's queue (pending and ready lists) holds one reference to each
 * child, and a child holds one to its listener (c->lsn) until it leaves the queue. Whoever
 * unlinks a child from a list (completion-with-failure, accept, listener close) owns that
 * reference and ends it. Locks: child.lock -> listener.lq.lock -> sig.lock; nothing takes
 * a child's lock while holding lq.lock, and the listener's own lock is never taken while
 * a child's is held. */
#define _GNU_SOURCE
#include "sock/sock.h"
#include "sock/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <smcr/smcr.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "sock/closeq.h"
#include "sock/errmap.h"
#include "sock/sys.h"
#include "util/clock.h"
#include "util/log.h"

#define LSN_MAX 4096	 /* ready at most (SOMAXCONN) */
#define LSN_HS_MAX 256	 /* handshakes running at once per listener */

/* Children a blocking accept drives itself while it waits (no hand-off to the progress
 * thread and back for the client's Confirm), each with a reference. */
#define LSN_DRIVE_MAX 16
struct lsn_drive {
	struct sock *c[LSN_DRIVE_MAX];
	int n;
	bool cloexec; /* the accept's SOCK_CLOEXEC: its children are installed so */
	/* The engine while this accept holds a poll bracket (core_engine_spin_begin): from
	 * the moment its wait for a Confirm ends (spin or poll) until it sleeps again or
	 * returns. The client's first CDC follows
	 * its Confirm by microseconds; with the CQs unarmed meanwhile it rings no doorbell
	 * and wakes no progress thread, and the bracket's end (spin_end: arm, then poll
	 * once) takes it on this thread. Never held across a sleep. */
	struct core_engine *held;
};

static void lsn_bracket_end(struct lsn_drive *d)
{
	if (d->held) {
		core_engine_spin_end(d->held);
		d->held = NULL;
	}
}

static void lsn_fill(struct sock *ls, struct lsn_drive *d);

/* The listener whose children this thread drives inside a blocking accept (NULL
 * elsewhere): a child that completes on this thread while no other is ready needs no
 * POLLIN token on the placeholder (a send, and a recv to drain it when accept pops it):
 * this thread pops it next. lq.quiet records such a completion; an accept that leaves
 * without popping (EINTR) writes the token then (lsn_quiet_flush). */
static _Thread_local struct sock *lsn_driving;

/* The process's fork generation (a child of fork() has a new one): a queue is set up per
 * process, and getpid() is a system call per accept. */
static _Atomic int lsn_gen = 1;
static pthread_once_t lsn_once = PTHREAD_ONCE_INIT;

atomic_uint sock_forks; /* sock.h */

static void lsn_atfork_child(void)
{
	atomic_fetch_add(&lsn_gen, 1);
	atomic_fetch_add(&sock_forks, 1);
}

static void lsn_atfork_parent(void)
{
	atomic_fetch_add(&sock_forks, 1);
}

static void lsn_init(void)
{
	pthread_atfork(NULL, lsn_atfork_parent, lsn_atfork_child);
}

/* ---- decision at listen() ---- */

/* Could any accepted connection of s try SMC-R? Conservative: the BPF option, or any
 * server rule that is not "tcp" and matches the program and the listener's port (the
 * address is matched per connection at accept). */
static bool lsn_smc_possible(struct sock *s)
{
	if (s->disc == DISC_BPF || s->action != RULE_TCP)
		return true;
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);
	if (sock_sys.getsockname(s->tcp, (struct sockaddr *)&ss, &l) < 0)
		return true;
	uint16_t port = ntohs(ss.ss_family == AF_INET
				      ? ((struct sockaddr_in *)(void *)&ss)->sin_port
				      : ((struct sockaddr_in6 *)(void *)&ss)->sin6_port);
	const struct rules *rs = rules_get();
	const char *prog = rules_prog_name();
	for (size_t i = 0; i < rs->n; i++) {
		const struct rule *x = &rs->v[i];
		if ((x->roles & RULE_ROLE_SERVER) && x->action != RULE_TCP &&
		    fnmatch(x->prog, prog, 0) == 0 && port >= x->port_lo && port <= x->port_hi)
			return true;
	}
	return false;
}

/* Does every connection of listener s (address s->laddr, from getsockname) choose SMC-R
 * by the rules? Bound to one address: the rule for it. A wildcard: the first server rule
 * for the program and port (disc_listener_rule) must cover every address. Never with BPF
 * discovery. */
static bool lsn_all_smc(struct sock *s)
{
	if (s->disc == DISC_BPF)
		return false;
	const struct rule *which;
	enum rule_action a = disc_listener_rule(&s->laddr, &which);
	if (!which || a == RULE_TCP)
		return false;
	return !disc_wildcard(&s->laddr) || which->family == 0;
}

static unsigned lsn_bound(int backlog)
{
	if (backlog < 1)
		return 1;
	return backlog > LSN_MAX ? LSN_MAX : (unsigned)backlog;
}

void lsn_listen_locked(struct sock *s, int backlog)
{
	pthread_mutex_lock(&s->lq.lock);
	s->lq.max = lsn_bound(backlog);
	pthread_mutex_unlock(&s->lq.lock);
	pthread_once(&lsn_once, lsn_init);
	if (atomic_load(&s->state) != SS_LISTEN || s->lq.want)
		return;
	/* under the interposer the listener stays the kernel's: accept at first use (below) */
	if (atomic_load_explicit(&sock_lazy_accept, memory_order_relaxed))
		return;
	s->lq.want = lsn_smc_possible(s);
}

/* ---- activation ---- */

static void lsn_watch_fn(void *arg, uint32_t events)
{
	(void)events;
	lsn_fill(arg, NULL);
}

static void lsn_watch_release(void *arg)
{
	sock_put(arg);
}

/* A queued call holding a reference (progress_call). */
static void lsn_fill_call(void *arg, uint32_t unused)
{
	(void)unused;
	lsn_fill(arg, NULL);
	sock_put(arg);
}

static void lsn_fill_later(struct sock *ls)
{
	sock_hold(ls);
	if (progress_call(lsn_fill_call, ls) < 0)
		sock_put(ls);
}

/* Arms (EPOLLIN) or disarms the progress thread's watch on the hidden listener. Disarmed
 * keeps EPOLLET: a listener's EPOLLHUP (always reported) then fires once, not forever.
 * Arming re-evaluates readiness (epoll_ctl MOD): connections queued meanwhile give the
 * progress thread an event at once, so none is left in the kernel's queue when the last
 * blocking accept leaves. Caller holds lq.lock. */
static void lsn_watch_arm_locked(struct sock *s, bool on)
{
	if (!s->lq.watch)
		return;
	if (progress_watch_modify(s->lq.watch, on ? EPOLLIN | EPOLLET : EPOLLET) < 0)
		SMCR_LOG_RL(SMCR_LOG_WARN, "sock", "listener %d: cannot %s its watch", s->fd,
			    on ? "arm" : "disarm");
}

int lsn_activate_locked(struct sock *s)
{
	if (!s->lq.want || (s->lq.on && s->lq.pid == atomic_load(&lsn_gen)))
		return 0;
	if (s->lq.on) {
		/* A forked child: the placeholder file is shared with the parent and the
		 * queue's children are the parent's. Forget them (connections inherited across
		 * fork are not usable, docs/parts/sock.md) and make our own. */
		pthread_mutex_lock(&s->lq.lock);
		s->lq.pending = s->lq.ready = s->lq.ready_tail = NULL;
		s->lq.npending = s->lq.nready = 0;
		s->lq.driving = 0; /* the parent's threads */
		s->lq.watch = NULL; /* the parent's; progress forgot it at fork */
		pthread_mutex_unlock(&s->lq.lock);
		if (s->has_sig) {
			sig_forget_prog(&s->sig);
			s->has_sig = false; /* its end is the parent's too: left open */
		}
	}
	int t = s->tcp;
	if (t == s->fd) {
		t = sock_fd_dup_hidden(s->fd);
		if (t < 0)
			return sock_err_sys(errno);
		/* the progress thread takes connections from it: never block there */
		(void)sock_sys.fcntl(t, F_SETFL, O_NONBLOCK);
	}
	int rc = sig_open(&s->sig);
	if (rc < 0)
		goto fail_t;
	rc = sock_sig_install_locked(s, true); /* a listener is never writable */
	if (rc < 0)
		goto fail_t;
	s->tcp = t;
	/* A listener bound to one address: every child's local address is that one (no
	 * getsockname per connection). A wildcard one: asked per child. */
	socklen_t ll = sizeof(s->laddr);
	bool named = sock_sys.getsockname(t, (struct sockaddr *)&s->laddr, &ll) == 0;
	s->have_addrs = named && !disc_wildcard(&s->laddr);
	/* Every child will try SMC-R (its client speaks first, the Proposal): the kernel
	 * need not report a connection before its first bytes (TCP_DEFER_ACCEPT), which
	 * saves the accepting thread's wake-up for the bare connection (it would then sleep
	 * again until the Proposal). A client that never speaks is reported after the
	 * kernel's 1 s; the first-byte wait counts it (hs.c), so only when that wait is at
	 * least 1 s, and never with BPF discovery (a plain client is TCP at once there). */
	s->lq.defer = false;
	if (named && lsn_all_smc(s) && sock_server_first_wait_ns() >= SMCR_NS_PER_S) {
		int one = 1;
		s->lq.defer = sock_sys.setsockopt(t, IPPROTO_TCP, TCP_DEFER_ACCEPT, &one,
						  sizeof(one)) == 0;
		s->lq.defer_ns = smcr_now_ns();
	}
	pthread_mutex_lock(&s->lq.lock);
	s->lq.fd = t;
	s->lq.closed = false;
	pthread_mutex_unlock(&s->lq.lock);
	s->lq.on = true;
	s->lq.pid = atomic_load(&lsn_gen);
	sock_hold(s); /* the watch's, dropped by lsn_watch_release */
	struct prog_watch *w = NULL;
	rc = progress_watch(t, EPOLLIN | EPOLLET, lsn_watch_fn, s, lsn_watch_release, &w);
	pthread_mutex_lock(&s->lq.lock);
	s->lq.watch = rc < 0 ? NULL : w;
	if (w && s->lq.driving)
		lsn_watch_arm_locked(s, false); /* a blocking accept polls it already */
	pthread_mutex_unlock(&s->lq.lock);
	if (rc < 0) {
		sock_put(s);
		LOG_WARN("sock", "fd %d: cannot watch the listener (%s); accept takes "
				 "connections itself", s->fd, sock_err_name(rc));
	}
	/* connections already in the kernel's queue made no edge for the new watch */
	lsn_fill_later(s);
	return 0;
fail_t:
	if (t != s->tcp)
		sock_sys.close(t);
	return rc;
}

/* ---- children ---- */

/* What a child inherits from its listener (sk_clone), read under the listener's lock. */
struct lsn_inherit {
	int domain;
	struct disc_choice dc;
	uint32_t rcvbuf, sndbuf;
	bool linger_set, oobinline;
	int linger_secs;
	struct timeval rcvtimeo, sndtimeo;
	bool have_local;		/* the listener's own address is every child's */
	bool deferred;			/* TCP_DEFER_ACCEPT on the listener (lq.defer) */
	struct sockaddr_storage local;
};

static void lsn_inherit_of(struct sock *ls, struct lsn_inherit *in)
{
	memset(in, 0, sizeof(*in));
	pthread_mutex_lock(&ls->lock);
	in->domain = ls->domain;
	in->dc.action = ls->action;
	in->dc.mode = (enum disc_mode)ls->disc;
	in->dc.reason = ls->disc_reason;
	in->rcvbuf = ls->rcvbuf;
	in->sndbuf = ls->sndbuf;
	in->linger_set = ls->linger_set;
	in->linger_secs = ls->linger_secs;
	in->oobinline = ls->oobinline;
	in->rcvtimeo = ls->rcvtimeo;
	in->sndtimeo = ls->sndtimeo;
	in->have_local = ls->have_addrs;
	/* The kernel's 1 s counts only for a connection it held: one queued between listen()
	 * and this first accept (before the option) was not, and a silent one it held is
	 * reported 1 s after the option at the earliest. So no credit within that second
	 * (a client that spoke is not waited for anyway): the silent client of it_accept,
	 * queued before a slow server's first accept, was served as TCP 1 s early. */
	in->deferred = ls->lq.defer && smcr_now_ns() >= ls->lq.defer_ns + SMCR_NS_PER_S;
	if (in->have_local)
		in->local = ls->laddr;
	pthread_mutex_unlock(&ls->lock);
}

/* Appends c to the ready list. Caller holds ls->lq.lock. */
static void lsn_ready_locked(struct sock *ls, struct sock *c)
{
	c->lq_next = NULL;
	bool quiet = lsn_driving == ls && ls->lq.nready == 0;
	if (ls->lq.ready_tail)
		ls->lq.ready_tail->lq_next = c;
	else
		ls->lq.ready = c;
	ls->lq.ready_tail = c;
	ls->lq.nready++;
	if (quiet)
		ls->lq.quiet = true; /* this thread's accept pops it next (lsn_driving) */
	else
		sig_readable(&ls->sig); /* POLLIN, and a new edge per connection; wakes accept */
}

/* A blocking accept leaves without popping: a quiet completion gets its token now. */
static void lsn_quiet_flush(struct sock *ls)
{
	pthread_mutex_lock(&ls->lq.lock);
	if (ls->lq.quiet && ls->lq.nready && !ls->lq.closed)
		sig_readable(&ls->sig);
	ls->lq.quiet = false;
	pthread_mutex_unlock(&ls->lq.lock);
}

/* Removes c from the pending list. Caller holds ls->lq.lock. */
static bool lsn_unpend_locked(struct sock *ls, struct sock *c)
{
	for (struct sock **pp = &ls->lq.pending; *pp; pp = &(*pp)->lq_next) {
		if (*pp == c) {
			*pp = c->lq_next;
			c->lq_next = NULL;
			ls->lq.npending--;
			return true;
		}
	}
	return false;
}

/* Ends a child the program never sees: closes it as smcr_close would (reset for a
 * failed handshake: hs.c set SO_LINGER 0), then drops the queue's reference and the
 * child's reference to its listener. No lock held. */
static void lsn_drop(struct sock *c)
{
	pthread_mutex_lock(&c->lock);
	struct sock *ls = c->lsn;
	c->lsn = NULL;
	pthread_mutex_unlock(&c->lock);
	(void)sock_close(c);
	sock_put(c);
	if (ls)
		sock_put(ls);
}

static void lsn_drop_call(void *arg, uint32_t unused)
{
	(void)unused;
	lsn_drop(arg);
}

void lsn_child_done_locked(struct sock *c)
{
	struct sock *ls = c->lsn;
	if (!ls)
		return;
	int st = atomic_load(&c->state);
	if (st == SS_HANDSHAKE)
		return;
	pthread_mutex_lock(&ls->lq.lock);
	if (!lsn_unpend_locked(ls, c)) {
		pthread_mutex_unlock(&ls->lq.lock);
		return; /* not ours any more (listener closed, or already done) */
	}
	bool refill = ls->lq.npending + 1 >= LSN_HS_MAX;
	bool keep = (st == SS_SMC || st == SS_TCP) && !ls->lq.closed && !c->closing;
	if (keep)
		lsn_ready_locked(ls, c);
	pthread_mutex_unlock(&ls->lq.lock);
	if (!keep) {
		/* Never handed to the program (docs/protocol/procedures.md 2.3). The queue's
		 * reference may be the last and we hold c's lock: end it on the progress thread. */
		LOG_INFO("sock", "accept: dropped a client whose handshake failed (fd %d)", c->fd);
		if (progress_call(lsn_drop_call, c) < 0)
			LOG_ERR("sock", "fd %d: cannot queue the drop; leaked", c->fd);
	}
	if (refill)
		lsn_fill_later(ls); /* a slot is free: the kernel's queue may hold more */
}

/* A new connection nfd from the kernel's queue; d: taken by a blocking accept, which
 * drives the handshake itself while it waits (NULL: the progress thread's watch does). */
static void lsn_new_child(struct sock *ls, int nfd, const struct sockaddr_storage *peer,
			  struct lsn_drive *d)
{
	struct lsn_inherit in;
	lsn_inherit_of(ls, &in);
	struct sockaddr_storage local = in.local;
	socklen_t ll = sizeof(local);
	if (!in.have_local && sock_sys.getsockname(nfd, (struct sockaddr *)&local, &ll) < 0)
		memset(&local, 0, sizeof(local));
	const struct rule *which = NULL;
	enum rule_action a;
	uint32_t why = SMCR_REASON_RULE_TCP;
	if (in.dc.mode == DISC_BPF) {
		/* discovery.h: the listener was opted in; the option exchange decides */
		why = disc_result(nfd);
		a = why ? RULE_TCP : in.dc.action;
		if (why && in.dc.action == RULE_SMC_ONLY) {
			LOG_INFO("sock", "accept: smc-only listener, client without the option "
					 "(%s): dropped", smcr_reason_name(why));
			sock_sys.close(nfd);
			return;
		}
	} else {
		a = rules_match(rules_get(), RULE_ROLE_SERVER, rules_prog_name(),
				(struct sockaddr *)&local, &which);
		if (a == RULE_TCP && !which && in.dc.reason)
			why = in.dc.reason; /* the default: BPF not installed */
	}
	struct sock *c;
	int rc = sock_create(nfd, in.domain, false, true, &c);
	if (rc < 0) {
		LOG_WARN("sock", "accept: %s; connection closed", sock_err_name(rc));
		sock_sys.close(nfd);
		return;
	}
	/* c's references: the table's, and ours, which becomes the queue's */
	pthread_mutex_lock(&c->lock);
	c->role = CORE_SERVER;
	c->action = a;
	c->rcvbuf = in.rcvbuf;
	c->sndbuf = in.sndbuf;
	c->linger_set = in.linger_set;
	c->linger_secs = in.linger_secs;
	c->oobinline = in.oobinline;
	c->rcvtimeo = in.rcvtimeo;
	c->sndtimeo = in.sndtimeo;
	c->disc = (uint8_t)in.dc.mode;
	c->laddr = local;
	c->paddr = *peer;
	c->have_addrs = true;
	c->accept_deferred = in.deferred;
	sock_hold(ls);
	c->lsn = ls;
	if (a == RULE_TCP) {
		c->local_reason = why;
		atomic_store(&c->state, SS_TCP);
		stats_conn(STATS_MODE_TCP, why, 0);
		pthread_mutex_lock(&ls->lq.lock);
		lsn_ready_locked(ls, c);
		pthread_mutex_unlock(&ls->lq.lock);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	/* The handshake reads and writes a hidden dup (the program's number will get the
	 * SMC-R end over the TCP file, or keep the TCP file on a fallback). */
	int t = sock_fd_dup_hidden(nfd);
	pthread_mutex_lock(&ls->lq.lock);
	c->lq_next = ls->lq.pending;
	ls->lq.pending = c;
	ls->lq.npending++;
	pthread_mutex_unlock(&ls->lq.lock);
	atomic_store(&c->state, SS_HANDSHAKE);
	if (t < 0) {
		hs_fail_start_locked(c, sock_err_sys(errno));
	} else {
		c->tcp = t;
		c->fd_is_tcp = true;
		if (d && d->n < LSN_DRIVE_MAX) {
			/* Most likely this accept returns it: its SMC-R end goes in with the
			 * accept's close-on-exec flag, no F_SETFD when it is taken. */
			c->cloexec_off_at_install = !d->cloexec;
			if (hs_drive_start_locked(c)) {
				sock_hold(c);
				d->c[d->n++] = c;
			} else {
				c->cloexec_off_at_install = false; /* ended at once */
			}
		} else {
			rc = hs_start_locked(c);
			if (rc < 0)
				hs_fail_start_locked(c, rc);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

/* Takes established connections from the kernel's queue while the bound allows. Any
 * thread, no lock held; concurrent calls are fine (accept4 hands each connection to one). */
static void lsn_fill(struct sock *ls, struct lsn_drive *d)
{
	for (;;) {
		pthread_mutex_lock(&ls->lq.lock);
		bool room = !ls->lq.closed && ls->lq.nready < ls->lq.max &&
			    ls->lq.npending < LSN_HS_MAX && (d || !ls->lq.waiters);
		int lfd = ls->lq.fd;
		pthread_mutex_unlock(&ls->lq.lock);
		if (!room)
			return;
		struct sockaddr_storage peer;
		socklen_t pl = sizeof(peer);
		memset(&peer, 0, sizeof(peer));
		/* Blocking file (the handshake uses MSG_DONTWAIT; accept's flags are applied
		 * when the program takes it), close-on-exec until then. */
		int nfd = sock_sys.accept4(lfd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
		if (nfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				SMCR_LOG_RL(SMCR_LOG_WARN, "sock", "listener %d: accept failed "
					    "(errno %d); retried at the next connection", ls->fd, errno);
			return;
		}
		lsn_new_child(ls, nfd, &peer, d);
		if (d)
			return; /* a blocking accept polls the listener (level): the next poll
				 * returns at once if more are queued; no accept4 for EAGAIN */
	}
}

/* ---- accept ---- */

/* The program takes c (accept4's flags). Returns its fd, or -1 if c was closed meanwhile
 * (the exit handler). Drops the queue's reference and c's reference to the listener. */
static int lsn_deliver(struct sock *c, struct sockaddr *addr, socklen_t *alen, int flags)
{
	pthread_mutex_lock(&c->lock);
	struct sock *ls = c->lsn;
	c->lsn = NULL;
	int fd = c->closing ? -1 : c->fd;
	if (fd >= 0) {
		bool nb = (flags & SOCK_NONBLOCK) != 0, ce = (flags & SOCK_CLOEXEC) != 0;
		c->nonblock = nb;
		c->cloexec_off_at_install = false;
		if (ce != c->cloexec) {
			/* Children are close-on-exec until taken (invisible until now), except
			 * one a blocking accept without SOCK_CLOEXEC drove to SMC-R (installed
			 * without it): fix whichever differs from this accept's flag. */
			(void)sock_sys.fcntl(fd, F_SETFD, ce ? FD_CLOEXEC : 0);
			c->cloexec = ce;
		}
		if (nb) {
			if (c->has_sig)
				sig_set_nonblock(&c->sig, true);
			else
				(void)sock_sys.fcntl(fd, F_SETFL, O_NONBLOCK); /* accept4 gave 0 */
		}
		if (addr && alen) {
			socklen_t full = c->paddr.ss_family == AF_INET6
						 ? (socklen_t)sizeof(struct sockaddr_in6)
						 : (socklen_t)sizeof(struct sockaddr_in);
			memcpy(addr, &c->paddr, *alen < full ? *alen : full);
			*alen = full;
		}
	}
	pthread_mutex_unlock(&c->lock);
	sock_put(c);
	if (ls)
		sock_put(ls);
	return fd;
}

/* The accepting thread leaves: the children it drove go to the progress thread. */
static void lsn_drive_release(struct lsn_drive *d)
{
	lsn_bracket_end(d); /* every return of a blocking accept comes here */
	for (int i = 0; i < d->n; i++) {
		struct sock *c = d->c[i];
		pthread_mutex_lock(&c->lock);
		c->cloexec_off_at_install = false; /* handed on: close-on-exec until taken */
		int rc = hs_drive_release_locked(c);
		if (rc < 0)
			hs_fail_start_locked(c, rc);
		pthread_mutex_unlock(&c->lock);
		sock_put(c);
	}
	d->n = 0;
}

/* Sleeps until a completion (the placeholder's token), a new connection (the hidden
 * listener), a driven child's input or deadline, or the caller's deadline; then steps
 * the driven children. Returns 1 when the listener has connections to take, 0, or
 * -SMCR_E_SOCK_INTR on a signal. */
static int lsn_wait(struct sock *ls, struct lsn_drive *d, uint64_t deadline)
{
	struct pollfd pf[2 + LSN_DRIVE_MAX];
	int k = 0;
	pf[k++] = (struct pollfd){ .fd = ls->fd, .events = POLLIN };
	pthread_mutex_lock(&ls->lq.lock);
	int lfd = ls->lq.fd;
	ls->lq.waiters++; /* new connections are ours to take (lsn_fill on the progress thread) */
	pthread_mutex_unlock(&ls->lq.lock);
	pf[k++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
	uint64_t dl = deadline;
	int j = 0;
	bool answered = false; /* a child's Accept went out: its Confirm is due */
	for (int i = 0; i < d->n; i++) {
		struct sock *c = d->c[i];
		pthread_mutex_lock(&c->lock);
		bool live = atomic_load(&c->state) == SS_HANDSHAKE && !c->closing;
		if (live) {
			if (c->hs.clc_out && c->hs.status == CORE_CLC_NEED_INPUT)
				answered = true;
			pf[k++] = (struct pollfd){ .fd = c->tcp, .events = POLLIN | POLLRDHUP };
			if (c->hs.inline_deadline < dl)
				dl = c->hs.inline_deadline;
		}
		pthread_mutex_unlock(&c->lock);
		if (live)
			d->c[j++] = c;
		else
			sock_put(c); /* done (ready or dropped by the queue) */
	}
	d->n = j;
	int ms = -1;
	if (dl != UINT64_MAX) {
		uint64_t now = smcr_now_ns();
		uint64_t t = dl > now ? (dl - now + SMCR_NS_PER_MS - 1) / SMCR_NS_PER_MS : 0;
		ms = t > 1000000 ? 1000000 : (int)t;
	}
	/* The client's Confirm follows our Accept within microseconds unless the client is
	 * slow: spin for it first (hs.c; bounded, off after misses). A silent or stalled
	 * client costs at most the spin, once, and turns it off when it repeats. */
	/* Earlier connections' hidden closes only while no handshake is in flight: waiting
	 * for a new connection, the server is idle (the client is between two connections).
	 * In the wait for a Confirm it is not: the client answers our Accept within ~10 µs,
	 * and the closes (one TCP socket's ~12 µs) delayed the Confirm's step, the answer
	 * and the connection (about 15 % of the connect rate: docs/history/connect.md). */
	if (d->n == 0)
		closeq_drain(CLOSEQ_WAIT_MAX);
	/* Idle (no handshake in flight), a short spin for the next connection too: a client
	 * that makes connections one after the other sends its Proposal ~20 µs after our
	 * answer, and its send would otherwise pay for waking us (docs/parts/connect.md
	 * "Spinning for the CLC answer"). Off after misses, like the others: an idle server spins once in 8. */
	int n = answered    ? hs_spin_poll(pf, (unsigned)k, HS_SPIN_SERVER)
		: d->n == 0 ? hs_spin_poll(pf, (unsigned)k, HS_SPIN_IDLE)
			    : 0;
	if (n == 0) {
		lsn_bracket_end(d); /* never asleep with the CQs unarmed */
		n = sock_sys.poll(pf, (nfds_t)k, ms); /* < 0 from the spin: EINTR as this poll's */
	}
	if (answered && n > 0 && !d->held) {
		/* Most likely the Confirm: the client's first CDC is microseconds behind it,
		 * while we step the child and return it (struct lsn_drive). */
		d->held = sock_engine_if_up();
		if (d->held)
			core_engine_spin_begin(d->held, smcr_now_ns());
	}
	int perr = errno;
	pthread_mutex_lock(&ls->lq.lock);
	ls->lq.waiters--;
	pthread_mutex_unlock(&ls->lq.lock);
	if (n < 0 && perr == EINTR)
		return -SMCR_E_SOCK_INTR; /* what the listener holds: lsn_accept's re-arm */
	uint64_t now = smcr_now_ns();
	for (int i = 0; i < d->n; i++) {
		struct sock *c = d->c[i];
		short re = pf[2 + i].revents;
		uint32_t ev = (re & POLLIN ? EPOLLIN : 0) | (re & POLLRDHUP ? EPOLLRDHUP : 0) |
			      (re & POLLHUP ? EPOLLHUP : 0) | (re & (POLLERR | POLLNVAL) ? EPOLLERR : 0);
		pthread_mutex_lock(&c->lock);
		if (atomic_load(&c->state) == SS_HANDSHAKE && (ev || now >= c->hs.inline_deadline))
			hs_drive_step_locked(c, ev); /* may complete: ready, or dropped */
		pthread_mutex_unlock(&c->lock);
	}
	return (pf[1].revents & POLLIN) ? 1 : 0;
}

static int lsn_accept_loop(struct sock *ls, struct sockaddr *addr, socklen_t *alen, int flags,
			   bool nonblock, struct timeval tmo)
{
	int rc;
	uint64_t deadline = UINT64_MAX;
	if (tmo.tv_sec || tmo.tv_usec)
		deadline = smcr_now_ns() + (uint64_t)tmo.tv_sec * SMCR_NS_PER_S +
			   (uint64_t)tmo.tv_usec * 1000ull;
	struct lsn_drive d = { .n = 0, .cloexec = (flags & SOCK_CLOEXEC) != 0 };
	/* A blocking accept takes connections after its poll saw the listener readable (it
	 * returns at once when some are queued): no accept4 answered EAGAIN per call. */
	bool filled = !nonblock;
	for (;;) {
		pthread_mutex_lock(&ls->lq.lock);
		struct sock *c = ls->lq.ready;
		if (c) {
			ls->lq.ready = c->lq_next;
			if (!ls->lq.ready)
				ls->lq.ready_tail = NULL;
			c->lq_next = NULL;
			ls->lq.nready--;
			if (!ls->lq.nready) {
				sig_drain_in(&ls->sig); /* POLLIN off until the next completion */
				ls->lq.quiet = false;
			}
			bool was_full = ls->lq.nready + 1 >= ls->lq.max;
			pthread_mutex_unlock(&ls->lq.lock);
			if (was_full)
				lsn_fill_later(ls);
			int fd = lsn_deliver(c, addr, alen, flags);
			if (fd >= 0) {
				lsn_drive_release(&d);
				return fd;
			}
			continue;
		}
		if (ls->lq.closed) {
			bool shut = ls->lq.shut;
			pthread_mutex_unlock(&ls->lq.lock);
			lsn_drive_release(&d);
			return shut ? -SMCR_E_SOCK_INVAL : -SMCR_E_SOCK_BADF; /* nothing to hand on */
		}
		pthread_mutex_unlock(&ls->lq.lock);
		if (!filled) {
			/* Connections the kernel holds: start their handshakes now (some complete
			 * at once: TCP by rule); a blocking accept drives them itself. */
			lsn_fill(ls, nonblock ? NULL : &d);
			filled = true;
			continue;
		}
		if (nonblock)
			return -SMCR_E_SOCK_AGAIN;
		if (deadline != UINT64_MAX && smcr_now_ns() >= deadline) {
			lsn_drive_release(&d);
			return -SMCR_E_SOCK_AGAIN;
		}
		/* Sleep on the placeholder (a completion writes its token: no lost wake-up, one
		 * that came after the check above is queued), the hidden listener and the
		 * driven children; a signal interrupts it as TCP's accept (EINTR). */
		rc = lsn_wait(ls, &d, deadline);
		if (rc < 0) {
			lsn_drive_release(&d);
			lsn_quiet_flush(ls);
			return rc;
		}
		filled = rc != 1; /* take from the kernel's queue only when it has some */
	}
}

int lsn_accept(struct sock *ls, struct sockaddr *addr, socklen_t *alen, int flags)
{
	pthread_mutex_lock(&ls->lock);
	int rc = lsn_activate_locked(ls);
	bool nonblock = ls->nonblock;
	struct timeval tmo = ls->rcvtimeo;
	pthread_mutex_unlock(&ls->lock);
	if (rc < 0)
		return rc;
	if (nonblock)
		return lsn_accept_loop(ls, addr, alen, flags, true, tmo);
	/* A blocking accept polls the hidden listener itself: the progress thread's watch
	 * is disarmed meanwhile (an EPOLLET edge per connection would wake it for nothing).
	 * The last one out re-arms it; connections still queued then give the progress
	 * thread an event at once (lsn_watch_arm_locked), as they must: once a process
	 * accepted on a listener, its handshakes run even while nobody is in accept. */
	pthread_mutex_lock(&ls->lq.lock);
	if (ls->lq.driving++ == 0)
		lsn_watch_arm_locked(ls, false);
	pthread_mutex_unlock(&ls->lq.lock);
	lsn_driving = ls;
	rc = lsn_accept_loop(ls, addr, alen, flags, false, tmo);
	lsn_driving = NULL;
	pthread_mutex_lock(&ls->lq.lock);
	if (--ls->lq.driving == 0 && !ls->lq.closed)
		lsn_watch_arm_locked(ls, true);
	pthread_mutex_unlock(&ls->lq.lock);
	return rc;
}

/* ---- close ---- */

void lsn_close_locked(struct sock *ls)
{
	if (!ls->lq.on)
		return;
	if (ls->lq.pid != atomic_load(&lsn_gen)) {
		/* a forked child closing its copy: the queue, its watch and its connections are
		 * the parent's (their engine too): touch nothing */
		pthread_mutex_lock(&ls->lq.lock);
		ls->lq.closed = true;
		ls->lq.pending = ls->lq.ready = ls->lq.ready_tail = NULL;
		ls->lq.npending = ls->lq.nready = 0;
		ls->lq.watch = NULL;
		pthread_mutex_unlock(&ls->lq.lock);
		return;
	}
	pthread_mutex_lock(&ls->lq.lock);
	if (ls->lq.watch) {
		/* its release (the listener's reference) may run here: the closer holds one */
		progress_unwatch(ls->lq.watch);
		ls->lq.watch = NULL;
	}
	ls->lq.closed = true;
	struct sock *p = ls->lq.pending, *r = ls->lq.ready;
	ls->lq.pending = ls->lq.ready = ls->lq.ready_tail = NULL;
	ls->lq.npending = ls->lq.nready = 0;
	sig_readable(&ls->sig); /* wakes blocked accepts: they see lq.closed */
	pthread_mutex_unlock(&ls->lq.lock);
	/* As the kernel resets connections nobody accepted. The children's locks come after
	 * the listener's in no path that takes the listener's while holding a child's. */
	for (struct sock *lists[2] = { p, r }, **l = lists; l < lists + 2; l++) {
		for (struct sock *c = *l; c;) {
			struct sock *n = c->lq_next;
			c->lq_next = NULL;
			pthread_mutex_lock(&c->lock);
			struct sock *cl = c->lsn;
			c->lsn = NULL;
			/* SO_LINGER 0: the close aborts (A on SMC-R, RST on TCP) */
			c->linger_set = true;
			c->linger_secs = 0;
			struct linger lg = { 1, 0 };
			if (atomic_load(&c->state) == SS_TCP && c->tcp >= 0)
				(void)sock_sys.setsockopt(c->tcp, SOL_SOCKET, SO_LINGER, &lg,
							  sizeof(lg));
			pthread_mutex_unlock(&c->lock);
			(void)sock_close(c);
			sock_put(c);
			if (cl)
				sock_put(cl); /* never the last: the closer holds one */
			c = n;
		}
	}
}

void lsn_shutdown_locked(struct sock *ls)
{
	if (!ls->lq.on)
		return;
	pthread_mutex_lock(&ls->lq.lock);
	ls->lq.shut = true;
	pthread_mutex_unlock(&ls->lq.lock);
	lsn_close_locked(ls);
}

/* ---- Accept at first use (the interposer) ----
 *
 * Under the interposer accept returns the kernel's established TCP socket at once, as
 * TCP's accept does, and a connection the rules send to SMC-R is marked lazy: its server
 * handshake starts at the first call that needs the connection's mode (a data call,
 * shutdown, poll/select on it, epoll_ctl ADD/MOD, an ioctl that reads the mode), in
 * whichever process makes it:
 *   - accept-then-fork servers (PostgreSQL, socat fork, Python's ForkingMixIn): the child
 *     that uses the connection runs the handshake with its own engine, and owns it;
 *   - a listener is readable exactly when the kernel's is, and each accepting process
 *     (pre-forked workers) takes connections from the kernel's queue itself, so no
 *     process's background queue takes another's connection;
 *   - clients that connect and stall (half a Proposal, slowloris) hold nothing back:
 *     accept never waits for a handshake, and each handshake runs in the background of the
 *     process that used its connection, as a non-blocking connect's does (hs.c), with the
 *     placeholder (sock.h) showing no readiness until it ends.
 * The accept queue (queue mode above) is for the smcr_* API, whose blocking accept returns
 * a connection whose handshake is complete. */
atomic_bool sock_lazy_accept;
atomic_uint sock_lazy_pending;

static int lazy_start_locked(struct sock *s)
{
	s->lazy = false;
	atomic_fetch_sub_explicit(&sock_lazy_pending, 1, memory_order_relaxed);
	/* undecided: writable at once, as TCP's accepted socket (pend, sock.h) */
	s->early = s->decline_only ? SOCK_EARLY_NO : SOCK_EARLY_OPEN;
	int rc = sock_install_placeholder_locked(s, !s->early);
	if (rc == 0) {
		atomic_store(&s->state, SS_HANDSHAKE);
		rc = hs_start_locked(s);
	}
	if (rc < 0) {
		LOG_WARN("lsn", "fd %d: cannot start the handshake (%s)", s->fd, sock_err_name(rc));
		if (atomic_load(&s->state) != SS_HANDSHAKE)
			atomic_store(&s->state, SS_HANDSHAKE);
		hs_fail_start_locked(s, rc);
	}
	return rc;
}

int sock_lazy_start(int fd)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return 0;
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	if (s->lazy && !s->closing)
		rc = lazy_start_locked(s);
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
	return rc;
}

static void lazy_decline(struct sock *s, bool all)
{
	if (!atomic_load(&s->lazy))
		return;
	/* Before exec, possibly in a forked child: a lock that another thread of the parent
	 * held at the fork stays held here. A lazy socket's lock is taken only briefly (its
	 * accept, its first use), so a short wait tells the two cases apart. */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 100000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	if (pthread_mutex_timedlock(&s->lock, &until) != 0) {
		LOG_WARN("lsn", "fd %d: not declined before exec (its lock is held)", s->fd);
		return;
	}
	if (s->lazy && !s->closing && (!all || !s->cloexec)) {
		s->decline_only = true;
		if (lazy_start_locked(s) == 0)
			hs_wait_locked(s); /* the Decline is out, or the client was silent */
	}
	pthread_mutex_unlock(&s->lock);
}

void sock_lazy_decline(int fd)
{
	if (!atomic_load_explicit(&sock_lazy_pending, memory_order_relaxed))
		return;
	struct sock *s = sock_get(fd);
	if (!s)
		return;
	lazy_decline(s, false);
	sock_put(s);
}

void sock_lazy_decline_all(void)
{
	if (!atomic_load_explicit(&sock_lazy_pending, memory_order_relaxed))
		return;
	for (int fd = fdtab_next(0); fd >= 0; fd = fdtab_next(fd + 1)) {
		struct sock *s = sock_get(fd);
		if (!s)
			continue;
		lazy_decline(s, true);
		sock_put(s);
	}
}
