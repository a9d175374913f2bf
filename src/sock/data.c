/* data.c: send and receive with TCP's semantics (include/smcr/smcr.h): send/recv/read/write/
 * readv/writev/sendto/recvfrom/sendmsg/recvmsg, flags MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL,
 * MSG_OOB, MSG_NOSIGNAL, MSG_MORE, SO_RCVTIMEO/SO_SNDTIMEO, EPIPE + SIGPIPE.
 *
 * On an SMC-R connection the bytes move through the engine (core_conn_send/recv: RDMA
 * WRITEs into the peer's RMBE, reads from ours; docs/protocol/procedures.md 4), which never blocks;
 * the blocking semantics are built here (docs/design/engine-decisions.md decision 3): spin on the
 * engine's progress for at most SOCK_SPIN_NS, then sleep in poll() on the program's own fd, whose
 * readiness the engine drives (sig.h). Every other fd, and every smcr socket in TCP mode, gets the
 * libc call. */
#define _GNU_SOURCE
#include <smcr/smcr.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "sock/closeq.h"
#include "sock/errmap.h"
#include "sock/lapse.h"
#include "sock/progress.h"
#include "sock/sock.h"
#include "sock/sys.h"
#include "util/clock.h"
#include "util/env.h"
#include "util/log.h"

#define ENV_US_MAX 10000000u /* $SMCR_HOLD_US, $SMCR_HANDOFF_US: at most 10 s */

#define SOCK_IOV_MAX 1024 /* IOV_MAX */

enum route {
	ROUTE_SYS, /* the libc call on fd */
	ROUTE_SMC, /* through the engine; *sp holds a reference */
	ROUTE_ERR, /* *err is the code */
};

/* Which way a data call goes. A call during a background handshake waits for its end
 * when blocking (as TCP waits for the connect), else EAGAIN.
 *
 * The state is read again under the lock: the handshake's end (hs.c) swaps the file,
 * re-adds the program's epoll registrations (a fresh edge-triggered event) and stores the
 * new state, all under the lock. A program woken by that event can get here between the
 * re-add and the store; its unlocked read then says HANDSHAKE, and an EAGAIN on that
 * stale state would consume the only edge it gets (it_examples: a TCP client's bytes sat
 * in the server's socket forever). */
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
	return ROUTE_SYS;
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

/* ---- Hand-over (wake branch; docs/history/stream.md "Round 2") ----
 *
 * A thread in a bracketed blocking call (call_spin_begin) ends its bracket before it
 * sleeps (the CQs armed: the peer's next message writes our eventfd and wakes the
 * progress thread), and begins it again as soon as it wakes, polling the CQs itself. The
 * progress thread that wakes it (the POLLIN token, the POLLOUT drain) used to arm the
 * CQs again right after: the peer's next message (a stream writer sends one every few
 * µs) then fired it again before the woken thread got a CPU (2.1 progress wake-ups per
 * reader sleep measured, each taking the other core from the peer's copy). Now such
 * a sleeper offers a hand-over (s->handoff[dir] = an address of its sleep); the waker,
 * just before the write that wakes it, takes the offer and tells the engine
 * (core_engine_handoff): the CQs stay unarmed until the woken thread has begun its
 * bracket (core_engine_handoff_done, after its spin_begin) or SOCK_HANDOFF_NS passed,
 * whichever is first; the progress thread arms then (its deadline). So an arrival for
 * another socket meanwhile is late by at most SOCK_HANDOFF_NS (plus the progress
 * thread's wake-up). The offer belongs to the thread, not to "some sleeper exists": an
 * idle thread blocked in recv (smcr-perf's control connection) is handed over only
 * when its own socket's event wakes it. One offer per socket and direction (a second
 * sleeper there just sleeps as before). Each offer taken by a waker is counted once in
 * the engine and uncounted once by its sleeper (whose compare-and-swap back fails), in
 * either order. $SMCR_HANDOFF_US (read once) changes the bound; 0 turns hand-overs off. */
_Atomic uint64_t sock_handoff_total;

static uint64_t handoff_ns(void)
{
	static _Atomic uint64_t v = UINT64_MAX;
	uint64_t x = atomic_load_explicit(&v, memory_order_relaxed);
	if (x == UINT64_MAX) {
		x = smcr_env_num_or("SMCR_HANDOFF_US", 0, ENV_US_MAX, SOCK_HANDOFF_NS / 1000) *
		    1000;
		atomic_store_explicit(&v, x, memory_order_relaxed);
	}
	return x;
}

void sock_handoff_wake(struct sock *s, int dir)
{
	if (!atomic_load_explicit(&s->handoff[dir], memory_order_relaxed))
		return; /* fast path: nobody offers */
	if (!atomic_exchange_explicit(&s->handoff[dir], NULL, memory_order_acq_rel))
		return;
	struct core_engine *e = sock_engine_if_up();
	if (!e)
		return; /* cannot be (the offer is made in a bracket); nothing counted */
	core_engine_handoff(e, smcr_now_ns() + handoff_ns());
	atomic_fetch_add_explicit(&sock_handoff_total, 1, memory_order_relaxed);
}

/* The sleeper's side: offer before the last readiness check (a waker after it sees the
 * offer), settle after the bracket began again (the engine then needs no hold). */
static bool handoff_offer(struct sock *s, int dir, void *me)
{
	void *none = NULL;
	return handoff_ns() > 0 &&
	       atomic_compare_exchange_strong_explicit(&s->handoff[dir], &none, me,
						       memory_order_acq_rel, memory_order_relaxed);
}

static void handoff_settle(struct sock *s, int dir, void *me, struct core_engine *e)
{
	void *mine = me;
	if (!atomic_compare_exchange_strong_explicit(&s->handoff[dir], &mine, NULL,
						     memory_order_acq_rel, memory_order_relaxed))
		core_engine_handoff_done(e); /* a waker took the offer and counted it */
}

/* ---- Direct wake (mode branch; engine.c "Direct wake" has the rule) ----
 *
 * Which thread sleeps directly on the CQ fds: one at a time (sock_direct_begin), only in
 * a bracketed blocking call (it polls anyway as soon as it wakes: begin the bracket, then
 * core_engine_prepare_sleep takes the completion, arms nothing while the bracket holds),
 * and only a thread whose recent sleeps were short: the direct sleeper is woken by every
 * completion of the process, so an idle thread blocked for long (smcr-perf's control
 * connection) must not take the slot from the thread of a busy stream. tl_sleep_avg is
 * that thread's moving average of its sleeps (ns, 1/4 weight, 0 = none yet: the first
 * sleep of a thread is never direct); a direct wake-up that brought nothing for this
 * thread counts as SOCK_DIRECT_MISS_NS, so a thread woken for others' traffic soon
 * sleeps the usual way again. */
static _Thread_local uint64_t tl_sleep_avg;

static bool direct_wanted(void)
{
	int m = sock_direct_mode();
	return m == 2 || (m == 1 && tl_sleep_avg && tl_sleep_avg < SOCK_DIRECT_SHORT_NS);
}

static void sleep_note(uint64_t ns)
{
	if (ns > 16 * SOCK_DIRECT_MISS_NS)
		ns = 16 * SOCK_DIRECT_MISS_NS;
	uint64_t avg = tl_sleep_avg ? tl_sleep_avg - tl_sleep_avg / 4 + ns / 4 : ns;
	tl_sleep_avg = avg ? avg : 1;
}

/* ---- Adaptive spin ----
 *
 * A fixed spin has a stable bad mode on a loaded machine: as soon as one round trip takes
 * longer than the spin (a thread was descheduled), both ends sleep, and waking a sleeper
 * is slower than the spin, so every following round trip is longer than the spin too
 * (pingpong: 1.9 µs spinning, 50-90 µs once asleep, measured at load 7-11). So when the
 * recent waits of the socket in that direction were short (their moving average below
 * SOCK_SPIN_SHORT_NS: the spin catches them), the spin is SOCK_SPIN_MAX_NS, which rides
 * out a descheduled peer; otherwise SOCK_SPIN_NS. The other way round (spinning longer
 * because waits are long) feeds itself on 2 cores: a long spinner takes the CPU its peer
 * needs (measured: 250 µs round trips with a 200 µs spin). */
/* The socket's recent waits in direction dir; UINT64_MAX while none was measured (0 in
 * wait_avg: a new socket is not assumed busy). */
static uint64_t wait_avg(struct sock *s, int dir)
{
	uint64_t avg = atomic_load_explicit(&s->wait_avg[dir], memory_order_relaxed);
	return avg ? avg : UINT64_MAX;
}

static uint64_t spin_budget(struct sock *s, int dir)
{
	return wait_avg(s, dir) < SOCK_SPIN_SHORT_NS ? SOCK_SPIN_MAX_NS : SOCK_SPIN_NS;
}

static void wait_note(struct sock *s, int dir, uint64_t ns)
{
	uint64_t avg = atomic_load_explicit(&s->wait_avg[dir], memory_order_relaxed);
	if (ns > 8 * SOCK_SPIN_MAX_NS)
		ns = 8 * SOCK_SPIN_MAX_NS; /* one long pause must not hide the next bursts */
	avg = avg ? avg - avg / 8 + ns / 8 : ns;
	atomic_store_explicit(&s->wait_avg[dir], avg ? avg : 1, memory_order_relaxed);
}

/* Waits until ready(s, want, have). Returns 0 (the caller tries again),
 * -SMCR_E_SOCK_AGAIN when the deadline passed, -SMCR_E_SOCK_INTR on a signal.
 * held: the caller brackets its whole call with core_engine_spin_begin/end (call_spin):
 * the spin needs no bracket of its own, and a sleep ends the caller's bracket before it
 * (the CQs must be armed for a sleeper) and begins it again after. */
static int sleep_for(struct sock *s, unsigned want, uint64_t deadline, uint32_t have,
		     uint64_t t0, bool direct, bool *mine);

static int wait_for(struct sock *s, unsigned want, uint64_t deadline, uint32_t have, bool held)
{
	/* an smcr_epoll_wait spin this thread holds would keep the CQs unarmed past our own
	 * spin_end (conns branch) */
	sock_epoll_release_hold();
	closeq_drain(CLOSEQ_WAIT_MAX); /* the peer works for us: earlier closes now */
	/* 1. spin briefly on the engine's progress (decision 3: a few microseconds) */
	uint64_t t0 = smcr_now_ns();
	struct core_engine *e = sock_engine();
	bool rx = want == CORE_EV_IN;
	bool ok = false;
	if (rx)
		atomic_fetch_add_explicit(&s->rx_spin, SOCK_RX_SPIN_ONE, memory_order_acq_rel);
	/* While this thread spins, peer messages wake nobody (core_engine_spin_begin disarms
	 * the CQs); spin_end re-arms and polls once more, so nothing is lost when we sleep. */
	int dir = rx ? 0 : 1;
	uint64_t budget = spin_budget(s, dir), now = t0;
	unsigned turns = 0;
	if (!held)
		core_engine_spin_begin(e, t0);
	do {
		if (ready(s, want, have)) {
			ok = true;
			break;
		}
		(void)core_engine_progress(e, now, NULL);
		/* the clock every 4th turn: clock_gettime was 13-29 % of a spinning
		 * thread's time on this VM (perf); timers tolerate a stale now */
		if ((++turns & 3) == 0)
			now = smcr_now_ns();
	} while (now - t0 < budget);
	if (!ok)
		core_engine_hold_cancel(e); /* we sleep: the CQs must be armed ("Hold") */
	if (!held || !ok)
		core_engine_spin_end(e);
	if (rx)
		atomic_fetch_sub_explicit(&s->rx_spin, SOCK_RX_SPIN_ONE, memory_order_acq_rel);
	if (ok) {
		wait_note(s, dir, smcr_now_ns() - t0);
		return 0; /* a deferred arrival is flushed by the receive after its read */
	}
	/* held: sleep directly on the CQ fds ("Direct wake"), or else the waker may hand the
	 * CQs over to us ("Hand-over"; a direct sleeper polls them itself) */
	bool direct = held && direct_wanted() && sock_direct_begin(s->fd, s->serial, !rx);
	char me;
	bool offered = held && !direct && handoff_offer(s, dir, &me);
	bool mine = true;
	uint64_t ts = smcr_now_ns();
	int rc = sleep_for(s, want, deadline, have, t0, direct, &mine);
	if (held)
		core_engine_spin_begin(e, smcr_now_ns());
	if (direct) {
		/* the rule: take whatever woke us (or raced with our return) before anything
		 * else; registered as a receiver, so our own arrival's token is deferred (the
		 * receive writes it if data is left) */
		if (rx)
			atomic_fetch_add_explicit(&s->rx_spin, SOCK_RX_SPIN_ONE, memory_order_acq_rel);
		(void)core_engine_prepare_sleep(e);
		if (rx)
			atomic_fetch_sub_explicit(&s->rx_spin, SOCK_RX_SPIN_ONE, memory_order_acq_rel);
		sock_direct_end();
	}
	if (offered)
		handoff_settle(s, dir, &me, e);
	if (direct && !mine && rc == 0 && !ready(s, want, have))
		sleep_note(SOCK_DIRECT_MISS_NS); /* woken for others' traffic */
	else
		sleep_note(smcr_now_ns() - ts);
	return rc;
}

/* wait_for's sleep: the spin ended without the event (no spin bracket held). direct: the
 * caller owns the direct sleep (sock_direct_begin) and polls the engine after this
 * returns, whatever it returns; *mine: the program fd woke us (or the sleep was not
 * direct). */
static int sleep_for(struct sock *s, unsigned want, uint64_t deadline, uint32_t have,
		     uint64_t t0, bool direct, bool *mine)
{
	struct core_engine *e = sock_engine();
	bool rx = want == CORE_EV_IN;
	int dir = rx ? 0 : 1;
	uint64_t now;
	/* 2. turn the program end's bit off, so the next arrival (a token, or the drain of
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
	/* 3. sleep on it */
	now = smcr_now_ns();
	if (deadline != UINT64_MAX && now >= deadline)
		return -SMCR_E_SOCK_AGAIN;
	int ms = -1;
	if (deadline != UINT64_MAX) {
		uint64_t d = (deadline - now + SMCR_NS_PER_MS - 1) / SMCR_NS_PER_MS;
		ms = d > 1000000 ? 1000000 : (int)d;
	}
	LOG_DBG("data", "fd %d: sleep for %s%s (ev 0x%x)", s->fd, rx ? "in" : "out",
		direct ? " (direct)" : "", core_conn_events(s->conn));
	int n;
	int err = 0;
	if (direct) {
		/* Direct wake: the CQs armed (our bracket ended; another thread's spin or a
		 * hand-over may keep them unarmed: then that thread polls and our program fd
		 * gets the token), checked once more, then one epoll_wait on the CQ fds and
		 * our program fd. 1: work came in meanwhile, go round again. */
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
	wait_note(s, dir, smcr_now_ns() - t0);
	if (n < 0 && err == EINTR)
		return -SMCR_E_SOCK_INTR;
	if (n == 0 && deadline != UINT64_MAX && smcr_now_ns() >= deadline)
		return -SMCR_E_SOCK_AGAIN;
	return 0;
}

/* A blocking data call is one spin for the engine (core_engine_spin_begin/end), from its
 * start to its end, not only while it waits: the thread polls the CQs whenever it waits,
 * and ends the bracket (arming them) before it sleeps or returns, so nothing is lost. In
 * between, while it copies, the peer's CDCs then write no eventfd and wake no progress
 * thread that would take the CPU and the engine's locks from the copying threads
 * (perf of a 64 KiB stream: futex wake/wait and finish_task_switch of the progress
 * thread, 0.4 context switches per write and side). Returns the engine to pass to
 * call_spin_end, NULL when not bracketed (non-blocking calls never poll). */
static struct core_engine *call_spin_begin(bool nowait)
{
	if (nowait)
		return NULL;
	struct core_engine *e = sock_engine();
	if (e)
		core_engine_spin_begin(e, smcr_now_ns());
	return e;
}

static void call_spin_end(struct core_engine *e)
{
	if (e)
		core_engine_spin_end(e);
}

/* ---- Hold (mode branch; core.h core_engine_spin_end_hold) ----
 *
 * A blocking call that moved data ends its bracket with a hold instead: the CQs stay
 * unarmed for the hold's bound ($SMCR_HOLD_US, default 1000), since the thread is likely
 * to call again within microseconds (a stream: 30 000 calls a second) and poll then.
 * Without it each call's spin_end armed the CQs and the next began the bracket again a
 * microsecond or two later; the peer's message landing in between wrote our eventfd and
 * woke the progress thread, 10 000-20 000 times a second in the spinning mode (measured
 * 19:20, load 4), preempting the program threads as often. Why nothing is lost: the
 * progress timer hold_tmr is armed at the hold's end, and a hold is made only when that
 * needs no kick (progress_timer_arm_quiet: the progress thread is awake or due by then),
 * so the progress thread polls, and arms, by then at the latest; and
 * core_engine_progress reports the bound as a deadline while the hold is renewed. A
 * thread that is about to sleep in wait_for cancels every hold first
 * (core_engine_hold_cancel), so its own wake-up is never held up. $SMCR_HOLD_US (read
 * once) changes the bound; 0: no holds.
 *
 * Hold watchdog. What a hold can cost: a thread that, after a blocking call, waits in
 * the kernel (poll/select/epoll_wait on an smcr fd, not through an smcr call, which
 * would poll) sees an arrival only when the progress thread next polls: at the hold's
 * end at the latest, 1 ms against a round trip of microseconds. Two facts together show
 * that it happened: the progress thread's round at a hold's end took an arrival
 * (readiness for a connection) that the unarmed CQs had kept back (sock_hold_late
 * records that hold's bound), and the thread that made that hold (the newest: its
 * bound was the engine's) calls again only after the bound (its hold lapsed: it was not
 * calling, so it waited somewhere else): a lapse. Neither fact alone: the progress
 * thread wakes at the old bound while a stream renews its hold (an arrival then is its
 * holder's, microseconds early), and a thread that computes for a while between calls
 * lapses with nothing kept back. A lapse also comes from a holder that lost its CPU for
 * longer than the bound (two cores, four busy threads: a few a second in a stream); a
 * program that waits in the kernel after each blocking call lapses at each call. So
 * lapses are scored (lapse.h: each adds one, the score halves every 100 ms), and a score
 * of 4 ($SMCR_HOLD_LAPSES) makes the process pause its holds: 1 s, doubled at each pause
 * up to 64 s. Such a program sees a few late arrivals per pause; one whose blocking calls
 * follow each other keeps the holds (on the 2026-12-01 VM: stream 1.5x, connect 1.15x;
 * docs/history/hold.md section 5). */
#define HOLD_DEFAULT_US 1000
#define HOLD_LAPSES_DEFAULT 4 /* lapses (lapse.h: decayed) that pause the holds */
#define HOLD_PAUSE_FIRST_NS (1000 * SMCR_NS_PER_MS)
#define HOLD_PAUSE_MAX_NS (64000 * SMCR_NS_PER_MS)

static struct prog_timer hold_tmr;
static pthread_once_t hold_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t hold_late_bound; /* the bound of the newest hold that ended with
					  * an arrival kept back (the progress thread) */
static _Atomic uint64_t hold_off_until; /* no holds before this (a lapse that cost) */
static _Thread_local uint64_t my_hold_until; /* this thread's newest hold, 0: none */
_Atomic uint64_t sock_holds_total, sock_hold_late_total, sock_hold_pauses_total;

static void hold_fire(void *arg, uint32_t events)
{
	(void)arg;
	(void)events; /* the hook that runs after the timers polls and arms */
}

static void hold_init(void)
{
	progress_timer_init(&hold_tmr, hold_fire, NULL);
}

static uint64_t hold_ns(void)
{
	static _Atomic uint64_t v = UINT64_MAX;
	uint64_t x = atomic_load_explicit(&v, memory_order_relaxed);
	if (x == UINT64_MAX) {
		/* On by default since the watchdog above bounds what it costs a program that
		 * waits in the kernel (hold.md section 5); before, off, for that cost. */
		x = smcr_env_num_or("SMCR_HOLD_US", 0, ENV_US_MAX, HOLD_DEFAULT_US) * 1000;
		atomic_store_explicit(&v, x, memory_order_relaxed);
	}
	return x;
}

/* $SMCR_HOLD_LAPSES (read once): the score that pauses the holds; tests set 1. */
static unsigned hold_lapses(void)
{
	static _Atomic unsigned v;
	unsigned x = atomic_load_explicit(&v, memory_order_relaxed);
	if (!x) {
		x = (unsigned)smcr_env_num_or("SMCR_HOLD_LAPSES", 1, 1000, HOLD_LAPSES_DEFAULT);
		atomic_store_explicit(&v, x, memory_order_relaxed);
	}
	return x;
}

void sock_hold_late(uint64_t bound)
{
	/* release: the thread woken by the readiness shown next acquires it */
	atomic_store_explicit(&hold_late_bound, bound, memory_order_release);
}

/* This thread's previous hold lapsed (it calls again after the bound), it was the newest
 * (its bound was the engine's) and the progress thread found an arrival kept back when it
 * ended: a lapse. Lapses that come often pause the holds. */
static void hold_check_lapse(uint64_t now)
{
	uint64_t mine = my_hold_until;
	if (!mine || now < mine)
		return;
	my_hold_until = 0;
	if (atomic_load_explicit(&hold_late_bound, memory_order_acquire) != mine)
		return;
	atomic_fetch_add_explicit(&sock_hold_late_total, 1, memory_order_relaxed);
	static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
	static struct lapse_score score;	     /* (lk) */
	static uint64_t next_pause = HOLD_PAUSE_FIRST_NS; /* (lk) */
	pthread_mutex_lock(&lk);
	bool pause = lapse_score_add(&score, now, hold_lapses());
	uint64_t p = 0;
	if (pause) {
		p = next_pause;
		next_pause = p * 2 > HOLD_PAUSE_MAX_NS ? HOLD_PAUSE_MAX_NS : p * 2;
		atomic_store_explicit(&hold_off_until, now + p, memory_order_relaxed);
		atomic_fetch_add_explicit(&sock_hold_pauses_total, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&lk);
	if (pause)
		LOG_INFO("sock", "arrivals waited for the end of holds while their threads waited "
				 "outside smcr calls: no holds for %llu ms",
			 (unsigned long long)(p / SMCR_NS_PER_MS));
}

/* call_spin_end for a call that moved data: a hold when on. */
static void call_spin_end_moved(struct core_engine *e, bool moved)
{
	uint64_t h = e && moved ? hold_ns() : 0;
	uint64_t now = h ? smcr_now_ns() : 0;
	if (h)
		hold_check_lapse(now);
	if (!h || now < atomic_load_explicit(&hold_off_until, memory_order_relaxed)) {
		call_spin_end(e);
		return;
	}
	pthread_once(&hold_once, hold_init);
	uint64_t until = now + h;
	/* the timer first: once the hold is visible, the progress thread is due by then.
	 * Only when that costs no kick (it is awake, or due by then anyway: while holds
	 * follow each other it wakes once per bound); otherwise no hold: a kick per
	 * call would cost the wake-up the hold saves (pingpong's sleeping mode). */
	if (progress_timer_arm_quiet(&hold_tmr, until) < 0) {
		call_spin_end(e);
		return;
	}
	my_hold_until = until;
	atomic_fetch_add_explicit(&sock_holds_total, 1, memory_order_relaxed);
	core_engine_spin_end_hold(e, until);
}

/* core said "not now" (-SMCR_E_AGAIN): a call that may not block fails with EAGAIN, one that
 * may blocks until the event or the deadline (the one rule of every data call's loop). */
static int block_or_again(struct sock *s, bool nowait, unsigned want, uint64_t deadline,
			  bool held)
{
	return nowait ? -SMCR_E_SOCK_AGAIN : wait_for(s, want, deadline, 0, held);
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
	struct core_engine *held = call_spin_begin(nowait);
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
		rc = block_or_again(s, nowait, CORE_EV_OUT, deadline, held != NULL);
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
			rc = block_or_again(s, nowait, CORE_EV_OUT, deadline, held != NULL);
			if (rc < 0)
				break;
		}
	}
	call_spin_end_moved(held, done > 0 && rc == 0);
	sock_sync_after_call(s);
	if (done > 0)
		return (ssize_t)done; /* an error after some bytes shows at the next call */
	if (rc == -SMCR_E_CORE_PIPE && !(flags & MSG_NOSIGNAL))
		raise_sigpipe();
	if (rc < 0) {
		if (sock_errno_of(rc) == ECONNRESET)
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
	struct core_engine *held = call_spin_begin(nowait);
	for (;;) {
		long n = core_conn_recv(s->conn, iov + idx, cnt - idx, cflags);
		if (n > 0 && (flags & MSG_PEEK)) {
			/* PEEK|WAITALL: TCP waits until len bytes are there, then peeks */
			done = (size_t)n;
			if (!waitall || (size_t)n >= want)
				break;
			rc = wait_for(s, CORE_EV_IN, deadline, (uint32_t)n, held != NULL);
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
		rc = block_or_again(s, nowait, CORE_EV_IN, deadline, held != NULL);
		if (rc < 0)
			break;
	}
	call_spin_end_moved(held, done > 0 && rc == 0 && !(flags & MSG_PEEK));
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

/* ---- the public calls ---- */

/* The body shared by every data call: route, then the libc call (sys_expr) or the engine
 * (smc_expr, with s held). */
#define DATA_CALL(fd, dontwait, sys_expr, smc_expr, is_send, flags)                     \
	do {                                                                            \
		struct sock *s;                                                         \
		int err_;                                                               \
		switch (route((fd), (dontwait), &s, &err_)) {                           \
		case ROUTE_SYS:                                                         \
			return (sys_expr);                                              \
		case ROUTE_ERR:                                                         \
			if ((is_send) && err_ == -SMCR_E_SOCK_PIPE &&                    \
			    !((flags) & MSG_NOSIGNAL))                                   \
				raise_sigpipe();                                        \
			return sock_fail(err_);                                         \
		case ROUTE_SMC:                                                         \
			break;                                                          \
		}                                                                       \
		ssize_t r_ = (smc_expr);                                                \
		int e_ = errno;                                                         \
		sock_put(s);                                                            \
		errno = e_;                                                             \
		return r_;                                                              \
	} while (0)

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
		  smc_sendmsg(s, msg, flags), true, flags);
}

ssize_t smcr_recvmsg(int fd, struct msghdr *msg, int flags)
{
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.recvmsg(fd, msg, flags),
		  smc_recvmsg(s, msg, flags), false, flags);
}

ssize_t smcr_send(int fd, const void *buf, size_t len, int flags)
{
	struct iovec v = { (void *)(uintptr_t)buf, len };
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.send(fd, buf, len, flags),
		  smc_send(s, &v, 1, flags), true, flags);
}

ssize_t smcr_recv(int fd, void *buf, size_t len, int flags)
{
	struct iovec v = { buf, len };
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.recv(fd, buf, len, flags),
		  smc_recv(s, &v, 1, flags), false, flags);
}

/* A connected stream ignores the address (as Linux TCP does outside Fast Open). */
ssize_t smcr_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *dest,
		    socklen_t destlen)
{
	struct iovec v = { (void *)(uintptr_t)buf, len };
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.sendto(fd, buf, len, flags, dest, destlen),
		  smc_send(s, &v, 1, flags), true, flags);
}

ssize_t smcr_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *src,
		      socklen_t *srclen)
{
	struct iovec v = { buf, len };
	DATA_CALL(fd, flags & MSG_DONTWAIT, sock_sys.recvfrom(fd, buf, len, flags, src, srclen),
		  (srclen ? (void)(*srclen = 0) : (void)0, smc_recv(s, &v, 1, flags)), false, flags);
}

ssize_t smcr_read(int fd, void *buf, size_t len)
{
	struct iovec v = { buf, len };
	DATA_CALL(fd, false, sock_sys.read(fd, buf, len), smc_recv(s, &v, 1, 0), false, 0);
}

ssize_t smcr_write(int fd, const void *buf, size_t len)
{
	struct iovec v = { (void *)(uintptr_t)buf, len };
	DATA_CALL(fd, false, sock_sys.write(fd, buf, len), smc_send(s, &v, 1, 0), true, 0);
}

ssize_t smcr_readv(int fd, const struct iovec *iov, int cnt)
{
	DATA_CALL(fd, false, sock_sys.readv(fd, iov, cnt), smc_recv(s, iov, cnt, 0), false, 0);
}

ssize_t smcr_writev(int fd, const struct iovec *iov, int cnt)
{
	DATA_CALL(fd, false, sock_sys.writev(fd, iov, cnt), smc_send(s, iov, cnt, 0), true, 0);
}
