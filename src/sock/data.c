/* data.c: send and receive with TCP's semantics (include/smcr/smcr.h): send/recv/read/write/
 * readv/writev/sendto/recvfrom/sendmsg/recvmsg, flags MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL,
 * MSG_OOB, MSG_NOSIGNAL, MSG_MORE, SO_RCVTIMEO/SO_SNDTIMEO, EPIPE + SIGPIPE.
 *
 * On an SMC-R connection the bytes move through the engine (core_conn_send/recv: RDMA
 * WRITEs into the peer's RMBE, reads from ours; docs/protocol/procedures.md 4), which never blocks;
 * the blocking semantics are built here (docs/design/engine-decisions.md decision 3): poll the
 * engine's progress for the wait policy's budget (waitpol.h), then sleep on the CQ fds and the
 * program's own fd, or on that fd alone, whose readiness the engine drives (sig.h;
 * docs/design/readiness.md). Every other fd, and every smcr socket in TCP mode, gets the
 * libc call. */
#define _GNU_SOURCE
#include <smcr/smcr.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include "sock/closeq.h"
#include "sock/errmap.h"
#include "sock/progress.h"
#include "sock/wait.h"
#include "sock/sock.h"
#include "sock/stats.h"
#include "sock/sys.h"
#include "sock/intr.h"
#include "util/clock.h"
#include "util/env.h"
#include "util/log.h"

#define SOCK_IOV_MAX 1024 /* IOV_MAX */

enum route {
	ROUTE_SYS, /* the libc call on fd */
	ROUTE_TCP, /* the libc call on an smcr socket in TCP mode (its bytes are counted) */
	ROUTE_SMC, /* through the engine; *sp holds a reference */
	ROUTE_ERR, /* *err is the code */
	ROUTE_EARLY, /* undecided (sock.h struct sock.early); *sp holds a reference */
};

/* Which way a data call goes. A call during a background handshake waits for its end
 * when blocking (as TCP waits for the connect), else EAGAIN.
 *
 * The state is read again under the lock: the handshake's end (hs.c) swaps the file,
 * re-adds the program's epoll registrations (a fresh edge-triggered event) and stores the
 * new state, all under the lock. A program woken by that event can get here between the
 * re-add and the store; its unlocked read then says HANDSHAKE, and an EAGAIN on that
 * stale state would consume the only edge it gets (an edge-triggered server would leave
 * a TCP client's bytes in its socket forever; it_examples covers it). */
static enum route route(int fd, bool nowait, struct sock **sp, int *err)
{
	struct sock *s = sock_get(fd);
	*sp = NULL;
	if (!s)
		return ROUTE_SYS;
	int st = atomic_load(&s->state);
	if (st == SS_HANDSHAKE) {
		pthread_mutex_lock(&s->lock);
		st = atomic_load(&s->state);
		if (st == SS_HANDSHAKE && s->early && !hs_inline(s) && !s->fd_is_tcp) {
			pthread_mutex_unlock(&s->lock);
			*sp = s;
			return ROUTE_EARLY;
		}
		if (st == SS_HANDSHAKE && (nowait || s->nonblock)) {
			pthread_mutex_unlock(&s->lock);
			sock_put(s);
			*err = -SMCR_E_SOCK_AGAIN;
			return ROUTE_ERR;
		}
		hs_wait_locked(s);
		pthread_mutex_unlock(&s->lock);
		st = atomic_load(&s->state);
	}
	switch ((enum sock_state)st) {
	case SS_SMC:
		*sp = s;
		return ROUTE_SMC;
	case SS_FAILED:
		pthread_mutex_lock(&s->lock);
		*err = s->error ? sock_err_sys(s->error) : -SMCR_E_SOCK_NOTCONN;
		s->error = 0;
		pthread_mutex_unlock(&s->lock);
		sock_put(s);
		return ROUTE_ERR;
	case SS_NEW:
	case SS_LISTEN:
	case SS_TCP:
	case SS_HANDSHAKE:
		break;
	}
	sock_put(s);
	return ROUTE_TCP;
}

static uint64_t deadline_of(const struct timeval *tv)
{
	if (!tv->tv_sec && !tv->tv_usec)
		return UINT64_MAX;
	return smcr_now_ns() + (uint64_t)tv->tv_sec * SMCR_NS_PER_S +
	       (uint64_t)tv->tv_usec * 1000ull;
}

/* Ready for the caller: want is CORE_EV_IN or CORE_EV_OUT; for IN with have > 0 (a
 * MSG_PEEK|MSG_WAITALL that saw have bytes) more than have must be readable. An error,
 * reset or EOF is "ready" too: the caller's next call reports it. */
static bool ready(struct sock *s, unsigned want, uint32_t have)
{
	unsigned ev = core_conn_events(s->conn);
	if (ev & (CORE_EV_ERR | CORE_EV_HUP))
		return true;
	if (want == CORE_EV_OUT)
		return ev & CORE_EV_OUT;
	if (ev & CORE_EV_RDHUP)
		return true;
	if (!(ev & CORE_EV_IN))
		return false;
	if (!have)
		return true;
	struct core_conn_info ci;
	core_conn_info(s->conn, &ci);
	return ci.readable > have;
}

/* ---- Deferred tokens (docs/parts/ready.md) ----
 *
 * Every arrival writes a POLLIN token to the program end (sig.h), and the read that
 * empties the RMBE drains it: two system calls per message. When the arrival is taken
 * by a thread spinning in a receive on the same socket, nobody needs that edge for bytes
 * that thread is about to read: the engine's callback skips the token (sock_rx_defer)
 * and marks the socket; the spinner, after its read (sock_rx_flush), writes the token
 * only if data is left. Why no waiter is lost:
 *   - the callback defers only while a spinner is registered (one compare-and-swap on
 *     rx_spin checks the count and sets the mark), and it runs after the engine made
 *     the data visible, so the spinner's next readiness check sees it;
 *   - a spinner that ends its spin without the data being ready for it (MSG_PEEK|
 *     MSG_WAITALL wants more, or another thread read it) flushes before it sleeps, so a
 *     deferred arrival always ends as a token unless it was read;
 *   - every receive on an SMC-R socket ends with sock_rx_flush, then the usual
 *     re-synchronisation (sock_sync_after_call): data left = token = POLLIN + an edge. */

_Atomic uint64_t sock_rx_deferred_total;

bool sock_rx_defer(struct sock *s)
{
	unsigned v = atomic_load_explicit(&s->rx_spin, memory_order_relaxed);
	while (v & ~SOCK_RX_DEFERRED) {
		if (atomic_compare_exchange_weak_explicit(&s->rx_spin, &v, v | SOCK_RX_DEFERRED,
							  memory_order_acq_rel,
							  memory_order_relaxed)) {
			atomic_fetch_add_explicit(&sock_rx_deferred_total, 1, memory_order_relaxed);
			return true;
		}
	}
	return false;
}

/* Writes the token of a deferred arrival if its data is still unread (an edge: the
 * arrival's own). */
static void sock_rx_flush(struct sock *s)
{
	if (!(atomic_load_explicit(&s->rx_spin, memory_order_relaxed) & SOCK_RX_DEFERRED))
		return;
	unsigned v = atomic_fetch_and_explicit(&s->rx_spin, ~SOCK_RX_DEFERRED,
					       memory_order_acq_rel);
	if ((v & SOCK_RX_DEFERRED) && (core_conn_events(s->conn) & CORE_EV_IN))
		sig_readable(&s->sig);
}

/* ---- Direct wake (engine.c "Direct wake" has the rule) ----
 *
 * Which thread sleeps directly on the CQ fds: one at a time (sock_direct_begin), and only
 * a thread the wait policy lets (waitpol_direct_ok: its recent sleeps were short; mode 2,
 * tests: every thread). tl_sleep_avg is this thread's average the policy keeps. */
static _Thread_local uint64_t tl_sleep_avg;

static bool direct_wanted(void)
{
	int m = sock_direct_mode();
	return m == 2 || (m == 1 && waitpol_direct_ok(tl_sleep_avg));
}

/* ---- Waiting (docs/design/readiness.md section 4; the timing is waitpol.h's) ----
 *
 * A blocking call that must wait polls the engine for the wait policy's budget, the CQs
 * unarmed meanwhile (core_engine_lease: the peer's messages write no eventfd, wake
 * nobody; this thread takes them), then arms them (a lease ending at once arms and
 * polls once more) and sleeps: on the CQ fds and its program fd when it may be the
 * direct sleeper (it takes the completions itself: the message's one wake-up is its
 * own), else on its program fd, whose token the thread that took the completion writes.
 * The spin's observations (how long the wait took, whether the spin caught it, whether
 * the spinner lost its CPU meanwhile) go back to the policy. */
static void wpol_note(struct sock *s, int dir, uint64_t waited, bool caught, bool lost)
{
	struct waitpol_obs o = { .waited_ns = waited, .caught = caught, .lost_cpu = lost };
	pthread_mutex_lock(&s->lock);
	waitpol_note(&s->wpol[dir], sock_waitpol_cfg(), &o);
	pthread_mutex_unlock(&s->lock);
}

static uint64_t wpol_spin(struct sock *s, int dir)
{
	pthread_mutex_lock(&s->lock);
	uint64_t b = waitpol_spin_ns(&s->wpol[dir], sock_waitpol_cfg());
	uint64_t floor = (uint64_t)s->busy_poll_us * 1000; /* SO_BUSY_POLL */
	pthread_mutex_unlock(&s->lock);
	return b > floor ? b : floor;
}

/* Waits until ready(s, want, have). Returns 0 (the caller tries again),
 * -SMCR_E_SOCK_AGAIN when the deadline passed, -SMCR_E_SOCK_INTR on a signal (and sets
 * tl_intr_restart: whether the handlers that ran want a restart, intr.h). */
static _Thread_local bool tl_intr_restart;

/* signal(7): an EINTR the kernel restarts: every handler that ran had SA_RESTART, the
 * socket has no timeout for this direction (SO_RCVTIMEO/SO_SNDTIMEO: EINTR) and nothing
 * moved yet (else the call returns the count). */
static bool intr_restart(int rc, size_t done, uint64_t deadline)
{
	return rc == -SMCR_E_SOCK_INTR && tl_intr_restart && done == 0 && deadline == UINT64_MAX;
}

static int sleep_for(struct sock *s, unsigned want, uint64_t deadline, uint32_t have,
		     bool direct, bool *mine);

static int wait_for(struct sock *s, unsigned want, uint64_t deadline, uint32_t have)
{
	closeq_drain(CLOSEQ_WAIT_MAX); /* the peer works for us: earlier closes now */
	uint64_t t0 = smcr_now_ns();
	struct core_engine *e = sock_engine();
	bool rx = want == CORE_EV_IN;
	int dir = rx ? 0 : 1;
	bool ok = false, lost = false;
	if (rx)
		atomic_fetch_add_explicit(&s->rx_spin, SOCK_RX_SPIN_ONE, memory_order_acq_rel);
	/* 1. poll, for the policy's budget (0: once) */
	uint64_t budget = wpol_spin(s, dir), now = t0;
	if (budget)
		(void)core_engine_lease(e, t0, t0 + budget);
	unsigned turns = 0;
	for (;;) {
		if (ready(s, want, have)) {
			ok = true;
			break;
		}
		(void)core_engine_progress(e, now, NULL);
		if (now - t0 >= budget)
			break;
		/* the clock every 4th turn: clock_gettime is a large share of a spinning
		 * thread's time; timers tolerate a stale now */
		if ((++turns & 3) == 0) {
			uint64_t t = smcr_now_ns();
			if (t - now > sock_waitpol_cfg()->lost_gap_ns)
				lost = true; /* descheduled: the host has no spare core */
			now = t;
		}
	}
	if (!ok)
		ok = ready(s, want, have);
	if (rx)
		atomic_fetch_sub_explicit(&s->rx_spin, SOCK_RX_SPIN_ONE, memory_order_acq_rel);
	if (ok) {
		wpol_note(s, dir, smcr_now_ns() - t0, budget > 0, lost);
		return 0; /* a deferred arrival is flushed by the receive after its read */
	}
	/* 2. sleep: the CQs armed first (and polled once more), directly on the CQ fds when
	 * this thread may (one at a time, "Direct wake"), else on the program fd */
	(void)core_engine_lease(e, smcr_now_ns(), 0);
	bool direct = direct_wanted() && sock_direct_begin(s->fd, s->serial, !rx);
	bool mine = true;
	uint64_t ts = smcr_now_ns();
	int rc = sleep_for(s, want, deadline, have, direct, &mine);
	if (direct) {
		/* the rule: take whatever woke us (or raced with our return) before anything
		 * else; registered as a receiver, so our own arrival's token is deferred (the
		 * receive writes it if data is left) */
		if (rx)
			atomic_fetch_add_explicit(&s->rx_spin, SOCK_RX_SPIN_ONE, memory_order_acq_rel);
		(void)core_engine_progress(e, smcr_now_ns(), NULL);
		(void)core_engine_prepare_sleep(e);
		if (rx)
			atomic_fetch_sub_explicit(&s->rx_spin, SOCK_RX_SPIN_ONE, memory_order_acq_rel);
		sock_direct_end();
	}
	uint64_t end = smcr_now_ns();
	if (direct && !mine && rc == 0 && !ready(s, want, have))
		waitpol_sleep_note(&tl_sleep_avg, WAITPOL_DIRECT_MISS_NS); /* others' traffic */
	else
		waitpol_sleep_note(&tl_sleep_avg, end - ts);
	wpol_note(s, dir, end - t0, false, lost);
	return rc;
}

/* poll's timeout in ms (-1: none) for a deadline still ahead of now, capped so an int
 * holds it. */
static int deadline_ms(uint64_t deadline, uint64_t now)
{
	if (deadline == UINT64_MAX)
		return -1;
	uint64_t d = (deadline - now + SMCR_NS_PER_MS - 1) / SMCR_NS_PER_MS;
	return d > 1000000 ? 1000000 : (int)d;
}

/* What a sleep that returned n (errno err) means to its wait: -SMCR_E_SOCK_INTR on a
 * signal (tl_intr_restart set from im), -SMCR_E_SOCK_AGAIN at the deadline, else 0 (look
 * again). */
static int sleep_outcome(int n, int err, struct sock_intr_mark im, uint64_t deadline)
{
	if (n < 0 && err == EINTR) {
		tl_intr_restart = sock_intr_restarts(im);
		return -SMCR_E_SOCK_INTR;
	}
	if (n == 0 && deadline != UINT64_MAX && smcr_now_ns() >= deadline)
		return -SMCR_E_SOCK_AGAIN;
	return 0;
}

/* wait_for's sleep: the spin ended without the event, the CQs are armed. direct: the
 * caller owns the direct sleep (sock_direct_begin) and polls the engine after this
 * returns, whatever it returns; *mine: the program fd woke us (or the sleep was not
 * direct). */
static int sleep_for(struct sock *s, unsigned want, uint64_t deadline, uint32_t have,
		     bool direct, bool *mine)
{
	struct core_engine *e = sock_engine();
	bool rx = want == CORE_EV_IN;
	uint64_t now;
	/* turn the program end's bit off, so the next arrival (a token, or the drain of
	 * the filler) wakes poll; check again for one that came in between */
	if (rx)
		sig_drain_in(&s->sig);
	else
		sig_block_out(&s->sig);
	if (ready(s, want, have))
		return 0;
	/* an arrival deferred for us that is not enough for us: its token now, before we
	 * sleep (another thread may be waiting for it) */
	if (rx)
		sock_rx_flush(s);
	now = smcr_now_ns();
	if (deadline != UINT64_MAX && now >= deadline)
		return -SMCR_E_SOCK_AGAIN;
	int ms = deadline_ms(deadline, now);
	LOG_DBG("data", "fd %d: sleep for %s%s (ev 0x%x)", s->fd, rx ? "in" : "out",
		direct ? " (direct)" : "", core_conn_events(s->conn));
	int n;
	int err = 0;
	struct sock_intr_mark im = sock_intr_mark();
	if (direct) {
		/* Direct wake: checked once more (1: work came in meanwhile, go round
		 * again), then one epoll_wait on the CQ fds and our program fd. */
		if (core_engine_prepare_sleep(e) != 0)
			return 0;
		if (ready(s, want, have))
			return 0;
		n = sock_direct_wait(ms, mine);
		err = errno;
	} else {
		struct pollfd p = { .fd = s->fd, .events = rx ? POLLIN : POLLOUT };
		n = sock_sys.poll(&p, 1, ms);
		err = errno;
		*mine = true;
	}
	LOG_DBG("data", "fd %d: woke for %s (ev 0x%x, n %d, mine %d)", s->fd, rx ? "in" : "out",
		core_conn_events(s->conn), n, *mine);
	return sleep_outcome(n, err, im, deadline);
}

/* A blocking data call on a host where spinning pays (the policy's budget is not 0)
 * keeps the CQs unarmed from its start (a lease of CORE_SPIN_GRACE_NS, renewed by its
 * waits): while it copies, the peer's CDCs then write no eventfd and wake no progress
 * thread that would take the CPU and the engine's locks from the copying threads. Under
 * load (budget 0) the CQs stay armed: the consumer's sleep is the one wake-up. Returns the
 * engine to pass to call_end, NULL when not blocking (non-blocking calls never poll). */
static struct core_engine *call_begin(struct sock *s, int dir, bool nowait)
{
	if (nowait)
		return NULL;
	struct core_engine *e = sock_engine();
	if (!e)
		return NULL;
	uint64_t now = smcr_now_ns();
	pthread_mutex_lock(&s->lock);
	uint64_t b = waitpol_spin_ns(&s->wpol[dir], sock_waitpol_cfg());
	pthread_mutex_unlock(&s->lock);
	if (b)
		(void)core_engine_lease(e, now, now + CORE_SPIN_GRACE_NS);
	return e;
}

/* The call's end: the CQs armed again and polled once more (the lease of call_begin
 * ends), so nothing is left unseen. */
static void call_end(struct core_engine *e)
{
	if (e)
		(void)core_engine_lease(e, smcr_now_ns(), 0);
}

/* core said "not now" (-SMCR_E_AGAIN): a call that may not block fails with EAGAIN, one that
 * may blocks until the event or the deadline (the one rule of every data call's loop). */
static int block_or_again(struct sock *s, bool nowait, unsigned want, uint64_t deadline)
{
	return nowait ? -SMCR_E_SOCK_AGAIN : wait_for(s, want, deadline, 0);
}

static size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	for (int i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* Advances a private copy of the iovec by n bytes; returns the new start index. */
static int iov_advance(struct iovec *iov, int cnt, int idx, size_t n)
{
	while (idx < cnt && n) {
		size_t k = iov[idx].iov_len < n ? iov[idx].iov_len : n;
		iov[idx].iov_base = (char *)iov[idx].iov_base + k;
		iov[idx].iov_len -= k;
		n -= k;
		if (iov[idx].iov_len == 0)
			idx++;
	}
	while (idx < cnt && iov[idx].iov_len == 0)
		idx++;
	return idx;
}

static void raise_sigpipe(void)
{
	/* TCP sends SIGPIPE to the writing thread (send_sig(SIGPIPE, current)). */
	pthread_kill(pthread_self(), SIGPIPE);
}

static int early_flush_rest(struct sock *s);

#define SEND_FLAGS_OK (MSG_DONTWAIT | MSG_NOSIGNAL | MSG_OOB | MSG_MORE | MSG_EOR)

static ssize_t smc_send(struct sock *s, const struct iovec *uiov, int cnt, int flags)
{
	if (cnt < 0 || cnt > SOCK_IOV_MAX)
		return sock_fail(-SMCR_E_SOCK_INVAL);
	if (flags & ~SEND_FLAGS_OK)
		return sock_fail(-SMCR_E_SOCK_NOTSUP);
	struct iovec iov[SOCK_IOV_MAX];
	memcpy(iov, uiov, (size_t)cnt * sizeof(*iov));
	pthread_mutex_lock(&s->lock);
	bool nowait = (flags & MSG_DONTWAIT) || s->nonblock;
	unsigned cflags = ((flags & MSG_MORE) || s->cork) ? CORE_MSG_MORE : 0;
	uint64_t deadline = deadline_of(&s->sndtimeo);
	pthread_mutex_unlock(&s->lock);
	size_t want = iov_total(iov, cnt), done = 0;
	int idx = iov_advance(iov, cnt, 0, 0);
	int rc = 0;
	/* MSG_OOB: the last byte is urgent (docs/protocol/procedures.md 4.6). The engine sends an
	 * urgent write only if it fits whole, so a long one goes as data first, then its last
	 * byte. */
	int oob_idx = -1;
	struct iovec last;
	if ((flags & MSG_OOB) && want > 1) {
		for (int i = cnt - 1; i >= 0; i--) {
			if (iov[i].iov_len) {
				oob_idx = i;
				break;
			}
		}
		last.iov_base = (char *)iov[oob_idx].iov_base + iov[oob_idx].iov_len - 1;
		last.iov_len = 1;
		iov[oob_idx].iov_len--;
		want--;
	} else if (flags & MSG_OOB) {
		cflags |= CORE_MSG_OOB;
	}
	if (__builtin_expect(s->pend.len != 0, 0) && early_flush_rest(s) < 0)
		return sock_fail(-SMCR_E_SOCK_AGAIN);
	struct core_engine *eng = call_begin(s, 1, nowait);
	while (done < want || (want == 0 && done == 0 && oob_idx < 0)) {
		uint64_t timer = UINT64_MAX;
		long n = core_conn_send_at(s->conn, iov + idx, cnt - idx, cflags,
					   (cflags & CORE_MSG_MORE) ? smcr_now_ns() : 0, &timer);
		if (timer != UINT64_MAX)
			progress_kick(); /* held bytes: the cork ceiling is the earliest deadline now */
		if (n > 0) {
			done += (size_t)n;
			idx = iov_advance(iov, cnt, idx, (size_t)n);
			continue;
		}
		if (n == 0)
			break; /* zero-length send */
		if (n != -SMCR_E_AGAIN) {
			rc = (int)n;
			break;
		}
		rc = block_or_again(s, nowait, CORE_EV_OUT, deadline);
		if (intr_restart(rc, done, deadline)) {
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
	}
	if (oob_idx >= 0 && done == want && rc == 0) {
		for (;;) {
			long n = core_conn_send(s->conn, &last, 1, cflags | CORE_MSG_OOB);
			if (n == 1) {
				done++;
				break;
			}
			if (n != -SMCR_E_AGAIN) {
				rc = (int)n;
				break;
			}
			rc = block_or_again(s, nowait, CORE_EV_OUT, deadline);
			if (intr_restart(rc, done, deadline)) {
				rc = 0;
				continue;
			}
			if (rc < 0)
				break;
		}
	}
	call_end(eng);
	sock_sync_after_call(s);
	if (done > 0)
		return (ssize_t)done; /* an error after some bytes shows at the next call */
	if (rc == -SMCR_E_CORE_PIPE && !(flags & MSG_NOSIGNAL))
		raise_sigpipe();
	if (rc < 0) {
		/* the error the program's end shows is reported by this call (TCP's
		 * sock_error: EPIPE after a write the closed peer reset, or the reset) */
		int e = sock_errno_of(rc);
		if (e == ECONNRESET || e == EPIPE)
			sig_clear_error(&s->sig);
		return sock_fail(rc);
	}
	return 0;
}

#define RECV_FLAGS_OK (MSG_DONTWAIT | MSG_PEEK | MSG_WAITALL | MSG_OOB | MSG_NOSIGNAL | MSG_CMSG_CLOEXEC)

static ssize_t smc_recv(struct sock *s, const struct iovec *uiov, int cnt, int flags)
{
	if (cnt < 0 || cnt > SOCK_IOV_MAX)
		return sock_fail(-SMCR_E_SOCK_INVAL);
	if (flags & ~RECV_FLAGS_OK)
		return sock_fail(-SMCR_E_SOCK_NOTSUP);
	struct iovec iov[SOCK_IOV_MAX];
	memcpy(iov, uiov, (size_t)cnt * sizeof(*iov));
	pthread_mutex_lock(&s->lock);
	bool nowait = (flags & MSG_DONTWAIT) || s->nonblock;
	uint64_t deadline = deadline_of(&s->rcvtimeo);
	pthread_mutex_unlock(&s->lock);
	unsigned cflags = (flags & MSG_PEEK ? CORE_MSG_PEEK : 0) | (flags & MSG_OOB ? CORE_MSG_OOB : 0);
	size_t want = iov_total(iov, cnt), done = 0;
	int idx = iov_advance(iov, cnt, 0, 0);
	int rc = 0;
	if (flags & MSG_OOB) {
		/* Urgent data never waits (TCP: EINVAL without an urgent byte, EAGAIN if it
		 * is announced but not here yet). */
		long n = core_conn_recv(s->conn, iov + idx, cnt - idx, cflags);
		sock_sync_after_call(s);
		return n >= 0 ? (ssize_t)n : sock_fail((int)n);
	}
	bool waitall = (flags & MSG_WAITALL) && !nowait;
	struct core_engine *eng = call_begin(s, 0, nowait);
	for (;;) {
		long n = core_conn_recv(s->conn, iov + idx, cnt - idx, cflags);
		if (n > 0 && (flags & MSG_PEEK)) {
			/* PEEK|WAITALL: TCP waits until len bytes are there, then peeks */
			done = (size_t)n;
			if (!waitall || (size_t)n >= want)
				break;
			rc = wait_for(s, CORE_EV_IN, deadline, (uint32_t)n);
			if (rc < 0)
				break;
			continue;
		}
		if (n > 0) {
			done += (size_t)n;
			idx = iov_advance(iov, cnt, idx, (size_t)n);
			if (!waitall || done == want)
				break;
			continue;
		}
		if (n == 0)
			break; /* end of stream (or a zero-length read) */
		if (n != -SMCR_E_AGAIN) {
			rc = (int)n;
			break;
		}
		if (done > 0 && !waitall)
			break;
		rc = block_or_again(s, nowait, CORE_EV_IN, deadline);
		if (intr_restart(rc, done, deadline)) {
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
	}
	call_end(eng);
	sock_rx_flush(s);
	sock_sync_after_call(s);
	if (done > 0)
		return (ssize_t)done;
	if (rc < 0) {
		if (sock_errno_of(rc) == ECONNRESET)
			sig_clear_error(&s->sig);
		return sock_fail(rc);
	}
	return 0;
}

/* ---- undecided connections (sock.h struct sock.early; hs.c flushes pend) ----
 *
 * The program has the connection as established while its handshake decides the mode.
 * A send copies into pend (as much as it has room for; POLLOUT on the placeholder while it
 * has room) and returns; a blocking send that does not fit waits for room or the
 * decision, then sends the rest the decided way. A receive waits for the decision: a
 * blocking one in poll() on the program's fd, which shows POLLIN at the first data, EOF
 * or error of SMC-R, and is returned at a fallback by the placeholder's hidden reference
 * (struct sock.keep, sock.c sock_restore_tcp_locked), so signals and SO_RCVTIMEO act as on
 * any wait. */

/* Waits without the lock until s's fd shows ev, the fallback swaps the TCP socket in
 * (struct sock.keep), or the deadline: 0 (look again), -SMCR_E_SOCK_AGAIN at the
 * deadline, -SMCR_E_SOCK_INTR on a signal (tl_intr_restart set). Caller holds s->lock;
 * it is dropped for the sleep and taken again. */
static int early_wait(struct sock *s, short ev, uint64_t deadline)
{
	uint64_t now = smcr_now_ns();
	if (deadline != UINT64_MAX && now >= deadline)
		return -SMCR_E_SOCK_AGAIN;
	struct pollfd p[2] = { { .fd = s->fd, .events = ev }, { .fd = -1 } };
	p[1].fd = sock_keep_hold_locked(s);
	pthread_mutex_unlock(&s->lock);
	struct sock_intr_mark im = sock_intr_mark();
	int n = sock_sys.poll(p, p[1].fd >= 0 ? 2 : 1, deadline_ms(deadline, now));
	int err = errno;
	pthread_mutex_lock(&s->lock);
	if (p[1].fd >= 0)
		sock_keep_drop_locked(s);
	return sleep_outcome(n, err, im, deadline);
}

/* SMC-R came and pend still holds bytes (hs.c could not put them all into the ring): they
 * go before the caller's. 0 when pend is empty now. Takes the lock. */
static int early_flush_rest(struct sock *s)
{
	pthread_mutex_lock(&s->lock);
	size_t len;
	const uint8_t *d = pend_peek(&s->pend, &len);
	while (len) {
		struct iovec v = { (void *)(uintptr_t)d, len };
		long n = core_conn_send(s->conn, &v, 1, 0);
		if (n <= 0)
			break;
		(void)stats_io(true, true, 0, n);
		pend_consume(&s->pend, (size_t)n);
		d = pend_peek(&s->pend, &len);
	}
	if (!len)
		pend_free(&s->pend);
	pthread_mutex_unlock(&s->lock);
	return len ? -1 : 0;
}

/* What the connection's TCP socket t takes at once should the handshake fall back: half
 * its send buffer (the kernel charges a queued segment more than its payload) less what
 * it still holds (CLC messages not yet acknowledged). A send buffer only grows unless the
 * program shrinks it, so pend's bytes, bounded by this, are written at a fallback without
 * waiting for the peer to read (hs.c hs_early_tcp_locked). */
static uint32_t early_tcp_room(int t)
{
	int sb = 0, q = 0;
	socklen_t sl = sizeof(sb);
	if (t < 0 || sock_sys.getsockopt(t, SOL_SOCKET, SO_SNDBUF, &sb, &sl) < 0 || sb <= 0)
		return 0;
	if (sock_sys.ioctl(t, SIOCOUTQ, &q) < 0 || q < 0)
		q = 0;
	long room = (long)sb / 2 - q;
	return room > 0 ? (uint32_t)room : 0;
}

/* A send on an undecided connection: the bytes pend took, the rest (a blocking send)
 * through the decided mode; -1 with errno when nothing was sent. s: the caller's
 * reference. */
static ssize_t early_send(int fd, struct sock *s, const struct iovec *uiov, int cnt, int flags)
{
	if (cnt < 0 || cnt > SOCK_IOV_MAX)
		return sock_fail(-SMCR_E_SOCK_INVAL);
	if (flags & ~SEND_FLAGS_OK)
		return sock_fail(-SMCR_E_SOCK_NOTSUP);
	struct iovec iov[SOCK_IOV_MAX];
	memcpy(iov, uiov, (size_t)cnt * sizeof(*iov));
	size_t want = iov_total(iov, cnt), done = 0;
	int idx = iov_advance(iov, cnt, 0, 0);
	int rc = 0;
	bool decided = false;
	pthread_mutex_lock(&s->lock);
	bool nowait = (flags & MSG_DONTWAIT) || s->nonblock;
	uint64_t deadline = deadline_of(&s->sndtimeo);
	for (;;) {
		if (atomic_load(&s->state) != SS_HANDSHAKE || !s->early || s->closing) {
			decided = true;
			break;
		}
		if (s->early_shut & 2) {
			rc = -SMCR_E_SOCK_PIPE;
			break;
		}
		/* urgent data needs the mode (its mark is the stream's): it waits for it */
		if (!s->tcp_connecting && !(flags & MSG_OOB)) {
			if (!s->pend.buf) {
				struct core_conn_info ci = { 0 };
				if (s->conn)
					core_conn_info(s->conn, &ci);
				uint32_t cap = ci.sndbuf_size ? ci.sndbuf_size
							      : pend_cap_for(s->sndbuf);
				uint32_t room = early_tcp_room(s->tcp);
				s->pend.cap = room < cap ? room : cap;
			}
			size_t k = 0;
			rc = pend_put(&s->pend, s->pend.cap, iov + idx, cnt - idx, &k);
			if (rc < 0)
				break;
			done += k;
			idx = iov_advance(iov, cnt, idx, k);
			if (!pend_room(&s->pend, s->pend.cap) && s->has_sig)
				sig_block_out(&s->sig); /* POLLOUT off until the decision */
			if (done == want)
				break;
		}
		if (nowait) {
			if (!done)
				rc = -SMCR_E_SOCK_AGAIN;
			break;
		}
		rc = early_wait(s, POLLOUT, deadline);
		if (rc == -SMCR_E_SOCK_INTR && tl_intr_restart && !done &&
		    deadline == UINT64_MAX)
			rc = 0; /* SA_RESTART, nothing moved: restarted (signal(7)) */
		if (rc < 0)
			break;
	}
	pthread_mutex_unlock(&s->lock);
	if (decided && done < want && !(nowait && done)) {
		/* the mode is known: the rest goes its way (the public call routes again) */
		struct msghdr m = { .msg_iov = iov + idx, .msg_iovlen = (size_t)(cnt - idx) };
		ssize_t r = smcr_sendmsg(fd, &m, flags);
		if (r >= 0)
			return (ssize_t)done + r;
		return done ? (ssize_t)done : -1;
	}
	if (done || (want == 0 && rc == 0))
		return (ssize_t)done;
	if (rc == -SMCR_E_SOCK_PIPE && !(flags & MSG_NOSIGNAL))
		raise_sigpipe();
	return sock_fail(rc);
}

/* A receive on an undecided connection waits for the decision: 0 to route again, 1 for
 * an end of stream (the program's SHUT_RD of that time), or a negative code. */
static int early_recv_wait(struct sock *s, int flags)
{
	pthread_mutex_lock(&s->lock);
	bool nowait = (flags & MSG_DONTWAIT) || s->nonblock;
	uint64_t deadline = deadline_of(&s->rcvtimeo);
	int rc = 0;
	for (;;) {
		if (atomic_load(&s->state) != SS_HANDSHAKE || !s->early || s->closing)
			break;
		if (s->early_shut & 1) {
			rc = 1;
			break;
		}
		if (nowait) {
			rc = -SMCR_E_SOCK_AGAIN;
			break;
		}
		rc = early_wait(s, POLLIN, deadline);
		if (rc == -SMCR_E_SOCK_INTR && tl_intr_restart && deadline == UINT64_MAX)
			rc = 0;
		if (rc < 0)
			break;
		/* woken: the data, EOF or error of the decided connection, or the fallback */
		if (atomic_load(&s->state) != SS_HANDSHAKE)
			break;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- the public calls ---- */

/* The body shared by every data call: route, then the libc call (sys_expr) or the engine
 * (smc_expr, with s held). */
#define DATA_CALL(fd, dontwait, sys_expr, smc_expr, is_send, flags, eiov, ecnt)        \
	for (;;) {                                                                      \
		struct sock *s;                                                         \
		int err_;                                                               \
		switch (route((fd), (dontwait), &s, &err_)) {                           \
		case ROUTE_SYS:                                                         \
			return (sys_expr);                                              \
		case ROUTE_TCP:                                                         \
			return stats_io(false, (is_send), (flags), (sys_expr));         \
		case ROUTE_ERR:                                                         \
			if ((is_send) && err_ == -SMCR_E_SOCK_PIPE &&                    \
			    !((flags) & MSG_NOSIGNAL))                                   \
				raise_sigpipe();                                        \
			return sock_fail(err_);                                         \
		case ROUTE_EARLY:                                                       \
			if (is_send) {                                                  \
				ssize_t r_ = early_send((fd), s, (eiov), (ecnt), (flags)); \
				int e_ = errno;                                         \
				sock_put(s);                                            \
				errno = e_;                                             \
				return r_;                                              \
			} else {                                                        \
				int w_ = early_recv_wait(s, (flags));                   \
				sock_put(s);                                            \
				if (w_ == 1)                                            \
					return 0;                                       \
				if (w_ < 0)                                             \
					return sock_fail(w_);                           \
				continue; /* decided: route again */                    \
			}                                                               \
		case ROUTE_SMC:                                                         \
			break;                                                          \
		}                                                                       \
		ssize_t r_ = stats_io(true, (is_send), (flags), (smc_expr));           \
		int e_ = errno;                                                         \
		sock_put(s);                                                            \
		errno = e_;                                                             \
		return r_;                                                              \
	}

static ssize_t smc_sendmsg(struct sock *s, const struct msghdr *msg, int flags)
{
	if (msg->msg_controllen)
		return sock_fail(-SMCR_E_SOCK_NOTSUP);
	if (msg->msg_iovlen > SOCK_IOV_MAX)
		return sock_fail(-SMCR_E_SOCK_INVAL);
	return smc_send(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

static ssize_t smc_recvmsg(struct sock *s, struct msghdr *msg, int flags)
{
	if (msg->msg_iovlen > SOCK_IOV_MAX)
		return sock_fail(-SMCR_E_SOCK_INVAL);
	ssize_t r = smc_recv(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (r >= 0) {
		msg->msg_namelen = 0; /* a connected stream: no source address, as TCP */
		msg->msg_controllen = 0;
		msg->msg_flags = (flags & MSG_OOB) ? MSG_OOB : 0;
	}
	return r;
}

ssize_t smcr_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.sendmsg(fd, msg, flags),
		  smc_sendmsg(s, msg, flags), true, flags, msg->msg_iov, (int)msg->msg_iovlen);
}

ssize_t smcr_recvmsg(int fd, struct msghdr *msg, int flags)
{
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.recvmsg(fd, msg, flags),
		  smc_recvmsg(s, msg, flags), false, flags, NULL, 0);
}

ssize_t smcr_send(int fd, const void *buf, size_t len, int flags)
{
	struct iovec v = { (void *)(uintptr_t)buf, len };
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.send(fd, buf, len, flags),
		  smc_send(s, &v, 1, flags), true, flags, &v, 1);
}

ssize_t smcr_recv(int fd, void *buf, size_t len, int flags)
{
	struct iovec v = { buf, len };
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.recv(fd, buf, len, flags),
		  smc_recv(s, &v, 1, flags), false, flags, NULL, 0);
}

/* A connected stream ignores the address (as Linux TCP does outside Fast Open). */
ssize_t smcr_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *dest,
		    socklen_t destlen)
{
	struct iovec v = { (void *)(uintptr_t)buf, len };
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.sendto(fd, buf, len, flags, dest, destlen),
		  smc_send(s, &v, 1, flags), true, flags, &v, 1);
}

ssize_t smcr_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *src,
		      socklen_t *srclen)
{
	struct iovec v = { buf, len };
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.recvfrom(fd, buf, len, flags, src, srclen),
		  (srclen ? (void)(*srclen = 0) : (void)0, smc_recv(s, &v, 1, flags)), false, flags,
		  NULL, 0);
}

ssize_t smcr_read(int fd, void *buf, size_t len)
{
	struct iovec v = { buf, len };
	DATA_CALL(fd, false, sock_sys.read(fd, buf, len), smc_recv(s, &v, 1, 0), false, 0, NULL, 0);
}

ssize_t smcr_write(int fd, const void *buf, size_t len)
{
	struct iovec v = { (void *)(uintptr_t)buf, len };
	DATA_CALL(fd, false, sock_sys.write(fd, buf, len), smc_send(s, &v, 1, 0), true, 0, &v, 1);
}

ssize_t smcr_readv(int fd, const struct iovec *iov, int cnt)
{
	DATA_CALL(fd, false, sock_sys.readv(fd, iov, cnt), smc_recv(s, iov, cnt, 0), false, 0, NULL, 0);
}

ssize_t smcr_writev(int fd, const struct iovec *iov, int cnt)
{
	DATA_CALL(fd, false, sock_sys.writev(fd, iov, cnt), smc_send(s, iov, cnt, 0), true, 0, iov, cnt);
}
