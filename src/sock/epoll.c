/* epoll.c: smcr_epoll_ctl, which records the epoll registrations of smcr fds so a swap of
 * the file behind an fd (sock.h: placeholder at the start of a handshake, TCP socket back
 * at a fallback) can move them (docs/design/engine-decisions.md decision 2).
 *
 * Why: an epoll registration belongs to the (file, fd number) pair and lives as long as the
 * file. After dup3() puts another file at the number, the old registration keeps reporting
 * the old file's readiness under the program's fd and data, and the new file is not
 * registered at all. So before the swap each recorded registration is deleted (while the
 * old file is still at the number), and after it added again with the same events and
 * data: the kernel evaluates readiness on insertion, so an edge-triggered registration
 * sees the new file's state as a fresh edge. */
#define _GNU_SOURCE
#include <smcr/smcr.h>

#include <errno.h>
#include <stdlib.h>

#include "sock/errmap.h"
#include "sock/sock.h"
#include "sock/sys.h"
#include "util/clock.h"
#include "util/log.h"

static void ep_track(int epfd, int delta);
static void ep_solo_clear(struct sock *s);
static void ep_solo_update_locked(struct sock *s);

/* Caller holds s->lock. */
static struct sock_epreg *reg_find(struct sock *s, int epfd)
{
	for (size_t i = 0; i < s->nregs; i++)
		if (s->regs[i].epfd == epfd)
			return &s->regs[i];
	return NULL;
}

int smcr_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return sock_sys.epoll_ctl(epfd, op, fd, ev);
	pthread_mutex_lock(&s->lock);
	if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && s->lq_want &&
	    atomic_load(&s->state) == SS_LISTEN) {
		/* a listener's readiness is its accept queue's (lsn.c): set it up first */
		int arc = lsn_activate_locked(s);
		if (arc < 0)
			LOG_WARN("sock", "fd %d: no accept queue (%s)", fd, sock_err_name(arc));
	}
	/* A pending token-free arrival becomes a token first (a new registration sees it
	 * as ready at insertion, an edge-triggered one too), and none is taken token-free
	 * while the registrations change; ep_solo_update_locked decides afresh after. */
	ep_solo_clear(s);
	int rc = sock_sys.epoll_ctl(epfd, op, fd, ev);
	int e = errno;
	if (rc == 0) {
		struct sock_epreg *r = reg_find(s, epfd);
		switch (op) {
		case EPOLL_CTL_ADD:
		case EPOLL_CTL_MOD:
			if (!r) {
				if (s->nregs == s->capregs) {
					size_t cap = s->capregs ? s->capregs * 2 : 2;
					struct sock_epreg *v = realloc(s->regs, cap * sizeof(*v));
					if (!v) {
						/* cannot record it: undo, so we never lose track */
						(void)sock_sys.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
						rc = -1;
						e = ENOMEM;
						break;
					}
					s->regs = v;
					s->capregs = cap;
				}
				r = &s->regs[s->nregs++];
				r->epfd = epfd;
				ep_track(epfd, 1);
			}
			r->ev = *ev;
			break;
		case EPOLL_CTL_DEL:
			if (r) {
				*r = s->regs[--s->nregs];
				ep_track(epfd, -1);
			}
			break;
		default:
			break;
		}
	}
	ep_solo_update_locked(s);
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
	errno = e;
	return rc;
}

void sock_epoll_move_locked(struct sock *s, bool before)
{
	for (size_t i = 0; i < s->nregs;) {
		struct sock_epreg *r = &s->regs[i];
		int rc = before ? sock_sys.epoll_ctl(r->epfd, EPOLL_CTL_DEL, s->fd, NULL)
				: sock_sys.epoll_ctl(r->epfd, EPOLL_CTL_ADD, s->fd, &r->ev);
		if (rc < 0 && (errno == EBADF || errno == EINVAL)) {
			/* the program closed that epoll instance: forget it */
			ep_track(r->epfd, -1);
			s->regs[i] = s->regs[--s->nregs];
			continue;
		}
		if (rc < 0)
			LOG_WARN("sock", "fd %d: epoll %s on %d failed (errno %d)", s->fd,
				 before ? "del" : "add", r->epfd, errno);
		i++;
	}
	ep_solo_update_locked(s);
}

/* ---- smcr_epoll_wait (docs/parts/conns.md) ----
 *
 * An event loop over many SMC-R connections (smcr-perf's conns: 1000 non-blocking fds,
 * one thread) used to pay, per CDC: the peer's eventfd write, a wake-up of our progress
 * thread, its CQ poll and callback, the POLLIN token, and a wake-up of the program's
 * epoll_wait. Here the program thread polls the engine at every call instead, so one call
 * collects the arrivals of every connection (the callbacks' tokens are written by this
 * thread, to sockets nobody sleeps on), and:
 *   - between two calls the thread holds a spin on the engine (core_engine_spin_begin):
 *     the CQs stay disarmed, so the peers' CDCs write no eventfd and wake no progress
 *     thread while the program works through its events; each call renews it
 *     (core_engine_spin_renew_until) for twice the loop's recent longest turn (1-50 ms,
 *     ep_hold_ns below). If the program does not come back by then (it blocks
 *     elsewhere, or left the loop), the progress thread arms the CQs and takes over, as
 *     for a spinner that lost its CPU: nothing is lost, a completion waits at most that
 *     long.
 *   - before it sleeps (nothing ready) the thread gives the spin up (spin_end arms the
 *     CQs and polls once more), and the progress thread wakes it through the tokens, as
 *     before.
 * Only one spin per thread (ep_held); a blocking call of the same thread gives it up
 * first (sock_epoll_release_hold, data.c wait_for), so its own spin/sleep logic applies. */

#define EP_SPIN_NS 20000ull /* smcr_epoll_wait's poll before it sleeps (= SOCK_SPIN_NS) */
#define EP_TRACK_MAX 65536 /* epfd numbers tracked (256 KiB of BSS, touched only where used);
			   * above: always treated as holding smcr fds */
static _Atomic unsigned ep_smcr[EP_TRACK_MAX];

static _Thread_local struct core_engine *ep_held; /* this thread's held spin, or NULL */

/* ---- Token-free arrivals (conns2 branch; the rule is in sig.h at sig_readable) ----
 *
 * The engine's callbacks of the progress round in smcr_epoll_wait run on the calling
 * thread. For every arrival there, the POLLIN token cost a send, and the receive that
 * emptied the RMBE a recv to drain it: ~2 system calls per 64 KiB for conns' server,
 * whose only watcher of the fd is this very thread. So an arrival on a socket that
 *   - has exactly one registration (smcr_epoll_ctl), in the epoll instance this thread
 *     waits on, level-triggered (no EPOLLET/EPOLLONESHOT/EPOLLEXCLUSIVE), with EPOLLIN and
 *     without EPOLLOUT (the kernel then reports the fd only for tokens, RDHUP, HUP, ERR,
 *     PRI, none of which this path touches), and
 *   - is non-blocking (no blocking receive of ours can sleep in poll on it), with no
 *     POLLIN token queued, no error, RDHUP or urgent data in the event,
 * goes to this thread's list (struct ep_thread) instead: the call returns it as EPOLLIN
 * with the registration's data, merged with what the kernel reports (an entry whose data
 * equals a kernel event's is folded into it: never two events for one registration).
 * Level-triggered: at the next call an entry the program read from (ep_read, set by the
 * program call's resync on this thread) is reported again if still readable, else
 * dropped. Everything else writes the token (sig_readable_if_none, when readable):
 *   - an entry the program did not read from in that loop turn (it may have handed the
 *     fd to another thread that polls it),
 *   - another thread's program call on the socket (sock_epoll_note_call: its resync then
 *     writes the token if data is left), smcr_epoll_ctl on it (ep_solo_clear), close,
 *   - this thread leaving the loop: a call on another epfd, a blocking call
 *     (sock_epoll_release_hold), going to sleep, thread exit,
 *   - the progress thread, SOCK_EP_GRACE_NS (2 ms) after the thread's last call (or the
 *     loop's held spin, ep_hold_ns, if longer: twice its recent longest turn), by a
 *     timer armed while the list holds entries (ep_timer_fn; while the thread keeps
 *     calling, one wake-up of the progress thread per 2 ms).
 * So a plain poll() or another epoll on the fd sees POLLIN at most one loop turn or that
 * grace late (tests/sock/it_epoll_wait.c). Edge-triggered registrations never go this way.
 *
 * Ownership: s->ep_owner names the list holding s (a reference, sock_hold; a quiet
 * POLLOUT owner may also hold s off the list, below). It is set only on the owner's own
 * thread, under the list's lock; whoever exchanges it back to NULL writes the token.
 * Entries whose owner was cleared are dropped by the owner's next call. Races with
 * smcr_epoll_ctl: the callback sets ep_owner, then re-reads ep_solo; ep_solo_clear sets
 * ep_solo to 0, then exchanges ep_owner (both sequentially consistent): either the
 * callback sees the change (and writes the token itself) or the clear sees the owner (and
 * writes it).
 * Locks: ep_thread.lock is held by the owner for its whole call (callbacks included) and
 * taken by the progress thread's timer (trylock), the owner between calls (trylock: quiet
 * POLLOUT, below) and the thread-exit destructor. Where it is waited for, it is taken
 * before any core, sig or progress lock, never inside one; only the trylocks (which
 * never wait) may be inside them. ep_pool_lock (lists of
 * exited threads, reused: a list is never freed, its timer may still fire) is a leaf. */

struct ep_ent {
	struct sock *s; /* a reference */
	uint64_t data;	/* the registration's data and events, at the arrival */
	uint32_t events;
	int epfd;
	bool report; /* to be returned (not yet returned since the arrival / last read) */
	bool out;    /* a writability entry ("Quiet POLLOUT"), else an arrival */
};

struct ep_thread {
	pthread_mutex_t lock; /* protects the fields below (see above) */
	struct ep_thread *next; /* ep_pool link (ep_pool_lock) */
	struct ep_ent *v;
	unsigned n, cap;
	unsigned rot;	  /* where ep_merge_locked starts: after the last entry it reported */
	unsigned gen;	  /* a pass over the list (ep_begin_locked, ep_merge_locked): an entry
			   * whose socket this pass has seen already is a duplicate (sock.h
			   * ep_gen) */
	int epfd;	  /* the call's epfd, while ep_cur is set */
	uint64_t call_ns; /* start of the owner's last call */
	uint64_t grace_ns; /* how long after call_ns the list is stale: SOCK_EP_GRACE_NS, or
			    * the loop's held spin if longer (a loop whose turns take
			    * milliseconds must not lose its list in every turn) */
	bool tmr_on;	  /* tmr armed (or running) */
	struct prog_timer tmr; /* the stale-list flush (ep_timer_fn) */
};

/* s->ep_owner: the list's thread, tagged in bit 0 when the entry is a writability one
 * ("Quiet POLLOUT"), so whoever takes it back (exchange) learns in the same atomic step
 * what to give back. struct ep_thread is at least 8-byte aligned. */
static inline void *ep_tag(const struct ep_thread *t, bool out)
{
	return (void *)((uintptr_t)t | (uintptr_t)out);
}
static inline bool ep_tag_out(const void *own)
{
	return ((uintptr_t)own & 1u) != 0;
}

_Atomic uint64_t sock_ep_tokenfree_total;
_Atomic uint64_t sock_ep_quietout_total;

static _Thread_local struct ep_thread *ep_t;	   /* this thread's, once it needed one */
static _Thread_local struct ep_thread *ep_cur;	   /* = ep_t inside the progress round */
/* Lists of exited threads, for reuse: a list is never freed (its timer may still fire). */
static pthread_mutex_t ep_pool_lock = PTHREAD_MUTEX_INITIALIZER; /* protects ep_pool */
static struct ep_thread *ep_pool;
static pthread_key_t ep_key;
static bool ep_key_ok;

/* s was just taken out of a list (its ep_owner exchanged to NULL by the caller): what
 * the list kept from the kernel goes back to it. An arrival: its POLLIN token, if still
 * readable. A writability entry: the filler read back (POLLOUT on), if still writable. */
static void ep_give_back(struct sock *s, bool out)
{
	if (!s->conn)
		return;
	unsigned ev = core_conn_events(s->conn);
	if (out && (ev & CORE_EV_OUT))
		sig_unblock_out(&s->sig);
	else if (!out && (ev & CORE_EV_IN))
		sig_readable_if_none(&s->sig);
}

static void ep_solo_clear(struct sock *s)
{
	if (atomic_load(&s->ep_solo))
		atomic_store(&s->ep_solo, 0);
	void *own = atomic_load(&s->ep_owner) ? atomic_exchange(&s->ep_owner, NULL) : NULL;
	if (own)
		ep_give_back(s, ep_tag_out(own));
}

/* Caller holds s->lock. */
static void ep_solo_update_locked(struct sock *s)
{
	uint64_t v = 0, d = 0;
	if (s->nregs == 1 && s->regs[0].epfd >= 0 && !s->closing) {
		uint32_t ev = s->regs[0].ev.events;
		bool in = (ev & EPOLLIN) && !(ev & EPOLLOUT);
		bool out = (ev & EPOLLOUT) && !(ev & EPOLLIN);
		if ((in || out) && !(ev & (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE))) {
			v = (uint64_t)(uint32_t)(s->regs[0].epfd + 1) << 32 | ev;
			d = s->regs[0].ev.data.u64;
		}
	}
	if (atomic_load(&s->ep_solo) == v && atomic_load(&s->ep_solo_data) == d)
		return;
	atomic_store(&s->ep_solo, 0);
	atomic_store(&s->ep_solo_data, d);
	atomic_store(&s->ep_solo, v);
}

void sock_epoll_forget_locked(struct sock *s)
{
	atomic_store(&s->ep_solo, 0);
	(void)atomic_exchange(&s->ep_owner, NULL); /* the fd goes: no token */
}

/* Takes an entry back (the owner gave it up): ep_give_back. */
static void ep_unmark(struct ep_thread *t, struct sock *s, bool out)
{
	void *me = ep_tag(t, out);
	if (atomic_compare_exchange_strong(&s->ep_owner, &me, NULL))
		ep_give_back(s, out);
}

/* Every entry becomes a token (if readable) and leaves the list. t->lock held. */
static void ep_flush_locked(struct ep_thread *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		ep_unmark(t, t->v[i].s, t->v[i].out);
		sock_put(t->v[i].s);
	}
	t->n = 0;
}

/* The progress thread, grace_ns after the owner's last call: its list is stale
 * (the owner left the loop without a call of ours that would flush it). While the owner
 * keeps calling, the timer just moves on (one wake-up of the progress thread per grace
 * at most, and only while the list holds entries). */
static void ep_timer_fn(void *arg, uint32_t events)
{
	(void)events;
	struct ep_thread *t = arg;
	if (pthread_mutex_trylock(&t->lock) != 0) {
		/* the owner is in a call: not stale */
		if (progress_timer_arm(&t->tmr, smcr_now_ns() + SOCK_EP_GRACE_NS) < 0)
			LOG_WARN("sock", "cannot re-arm the epoll list timer");
		return;
	}
	uint64_t now = smcr_now_ns(); /* after the lock: call_ns is not ahead of it */
	if (t->n && now - t->call_ns >= t->grace_ns)
		ep_flush_locked(t);
	t->tmr_on = t->n && progress_timer_arm(&t->tmr, t->call_ns + t->grace_ns) == 0;
	pthread_mutex_unlock(&t->lock);
}

/* Thread exit: the list becomes tokens; the struct goes to the pool. */
static void ep_thread_exit(void *arg)
{
	struct ep_thread *t = arg;
	pthread_mutex_lock(&t->lock);
	ep_flush_locked(t);
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_lock(&ep_pool_lock);
	t->next = ep_pool;
	ep_pool = t;
	pthread_mutex_unlock(&ep_pool_lock);
}

/* fork(): the child's engine is a new one (engine.c); the parent's must not be touched
 * (its locks may have been held by other threads at the fork). The handler runs in the
 * forking thread, the only one whose ep_held the child has. The lists (their sockets
 * belong to the parent's engine) are forgotten, leaked. */
static pthread_once_t ep_fork_once = PTHREAD_ONCE_INIT;

/* The held spin's end when the program does not come back (it waits elsewhere, e.g. in
 * the kernel's poll on an smcr fd, or another of its threads sleeps in a blocking call):
 * the progress thread arms the CQs and takes over once the spin is over, and it must be
 * awake then, even if it slept with no timeout when the spin began (or was renewed after
 * it had armed the CQs of an expired one): tests/sock/it_epoll_wait test_left_loop.
 *
 * How long a held spin lasts (ep_hold_ns): twice the loop's recent longest turn (the time
 * the program spends between two calls, a decaying maximum), at least the core's 1 ms
 * grace, at most EP_HOLD_MAX_NS. A fixed 1 ms made the progress thread take over in
 * every turn of conns' client (256 sends of 64 KiB per call: 4-30 ms between calls):
 * the CQs armed (an eventfd write by the peer per CDC), this process's completions and
 * send-ring flushes on the progress thread, fighting the loop for the locks; 20 % of
 * conns 1000 (docs/history/conns.md "Round 4"). While the loop runs, nothing waits longer
 * than the loop's next call (its progress round serves every connection and fires every
 * callback); EP_HOLD_MAX_NS bounds what a program that left the loop waits.
 *
 * How the progress thread learns it (no timer insert, no lock): the spin's end is in the
 * engine (core_engine_spin_renew_until), where the progress thread reads it whenever it
 * looks (it stands back while the spin is live and sleeps until its end); and every call
 * posts the end with progress_due_by, which kicks only when the thread sleeps past it
 * (it had slept with no timeout before the spin began, or after it took over an expired
 * one): two atomic loads per call otherwise. */
#define EP_HOLD_MIN_NS CORE_SPIN_GRACE_NS /* no shorter than the engine's own grace */
#define EP_HOLD_MAX_NS 50000000ull /* bound for a program that left the loop */

static _Thread_local uint64_t ep_ret_ns; /* when this thread's previous call returned */
static _Thread_local uint64_t ep_turn_ns; /* decaying max of its turns (between calls) */

/* The spin's length for a call starting at now (a turn of the program just ended). */
static uint64_t ep_hold_ns(uint64_t now)
{
	uint64_t turn = ep_ret_ns && now > ep_ret_ns ? now - ep_ret_ns : 0;
	uint64_t est = ep_turn_ns - ep_turn_ns / 8; /* decays by 1/8 per call */
	ep_turn_ns = turn > est ? turn : est;
	uint64_t h = 2 * ep_turn_ns;
	return h < EP_HOLD_MIN_NS ? EP_HOLD_MIN_NS : h > EP_HOLD_MAX_NS ? EP_HOLD_MAX_NS : h;
}

/* The spin is held (just begun or renewed at now) until now + hold: tell the engine and
 * make sure the progress thread looks by then. */
static void ep_hold(struct core_engine *e, uint64_t now, uint64_t hold)
{
	core_engine_spin_renew_until(e, now, now + hold);
	progress_due_by(now + hold);
}

static void ep_atfork_child(void)
{
	ep_held = NULL;
	ep_t = NULL;
	ep_cur = NULL;
	ep_pool = NULL;
	pthread_mutex_init(&ep_pool_lock, NULL);
}
static void ep_fork_setup(void)
{
	pthread_atfork(NULL, NULL, ep_atfork_child);
	ep_key_ok = pthread_key_create(&ep_key, ep_thread_exit) == 0;
}

/* This thread's list, created at its first call (NULL: no memory, or no key: then
 * every arrival gets its token, as before). */
static struct ep_thread *ep_thread_get(void)
{
	if (ep_t || !ep_key_ok)
		return ep_t;
	pthread_mutex_lock(&ep_pool_lock);
	struct ep_thread *t = ep_pool;
	if (t)
		ep_pool = t->next;
	pthread_mutex_unlock(&ep_pool_lock);
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		pthread_mutex_init(&t->lock, NULL);
		progress_timer_init(&t->tmr, ep_timer_fn, t);
	}
	t->epfd = -1;
	if (pthread_setspecific(ep_key, t) != 0) {
		pthread_mutex_lock(&ep_pool_lock);
		t->next = ep_pool;
		ep_pool = t;
		pthread_mutex_unlock(&ep_pool_lock);
		return NULL;
	}
	ep_t = t;
	return t;
}

/* Room for one more entry in t's list. t->lock held. */
static bool ep_room(struct ep_thread *t)
{
	if (t->n < t->cap)
		return true;
	unsigned cap = t->cap ? t->cap * 2 : 64;
	struct ep_ent *v = realloc(t->v, cap * sizeof(*v));
	if (!v)
		return false;
	t->v = v;
	t->cap = cap;
	return true;
}

/* s's entry in t's list, or NULL (s->ep_idx is only a hint: s may have been appended to
 * another list since, or its entry dropped). t->lock held. */
static struct ep_ent *ep_find(struct ep_thread *t, struct sock *s)
{
	return s->ep_idx < t->n && t->v[s->ep_idx].s == s ? &t->v[s->ep_idx] : NULL;
}

/* Whether solo (s->ep_solo) names a registration in epfd. */
static bool ep_solo_on(uint64_t solo, int epfd)
{
	return (solo >> 32) == (uint64_t)(uint32_t)(epfd + 1);
}

/* Appends s (now owned by t) to be reported; the list takes a reference. t->lock held,
 * ep_room checked. An entry of s still in the list from an earlier ownership (taken back
 * by another thread, not yet dropped by ep_begin_locked) is reused: never two entries,
 * so never two events, for one registration. */
static void ep_append(struct ep_thread *t, struct sock *s, uint64_t data, uint32_t events,
		      bool out)
{
	atomic_store(&s->ep_read, false);
	struct ep_ent en = { .s = s, .data = data, .events = events, .epfd = t->epfd,
			     .report = true, .out = out };
	struct ep_ent *old = ep_find(t, s);
	if (old) {
		*old = en; /* keeps the stale entry's reference */
		return;
	}
	sock_hold(s);
	s->ep_idx = t->n;
	t->v[t->n++] = en;
}

enum ep_take_res {
	EP_TAKEN,	/* s is in t's care now (the caller appends it) */
	EP_NOT_TAKEN,	/* someone else's, or the registration changed and s is nobody's
			 * again: the caller shows the readiness itself */
	EP_GIVEN_BACK	/* the registration changed and its smcr_epoll_ctl took s back and
			 * showed the readiness (ep_solo_clear): nothing more to do */
};

/* Takes s (not owned) for t's list, as registered by solo (read by the caller before
 * its checks); *data: the registration's data. t->lock held. */
static enum ep_take_res ep_take(struct ep_thread *t, struct sock *s, uint64_t solo, bool out,
				uint64_t *data)
{
	void *none = NULL, *me = ep_tag(t, out);
	if (!atomic_compare_exchange_strong(&s->ep_owner, &none, me))
		return EP_NOT_TAKEN;
	*data = atomic_load(&s->ep_solo_data);
	if (atomic_load(&s->ep_solo) == solo)
		return EP_TAKEN;
	/* the registration changed meanwhile (smcr_epoll_ctl, close): whoever takes the
	 * owner back shows the readiness */
	return atomic_compare_exchange_strong(&s->ep_owner, &me, NULL) ? EP_NOT_TAKEN
									: EP_GIVEN_BACK;
}

bool sock_epoll_defer(struct sock *s, unsigned events)
{
	struct ep_thread *t = ep_cur;
	if (!t || (events & (CORE_EV_ERR | CORE_EV_RDHUP | CORE_EV_PRI | CORE_EV_HUP)))
		return false;
	uint64_t solo = atomic_load(&s->ep_solo);
	if (!ep_solo_on(solo, t->epfd) || !(solo & EPOLLIN))
		return false;
	if (!atomic_load_explicit(&s->sig.nonblock, memory_order_relaxed))
		return false;
	void *own = atomic_load(&s->ep_owner);
	if (own == t) {
		/* in the list already (reported and read, or not returned yet): report */
		struct ep_ent *en = ep_find(t, s);
		if (en)
			en->report = true;
		atomic_fetch_add_explicit(&sock_ep_tokenfree_total, 1, memory_order_relaxed);
		return true;
	}
	if (own)
		return false; /* another thread's list: a token */
	/* POLLIN shown already: the kernel reports the fd (an unlocked count may be one too
	 * high while a drain runs; that drain's resync re-reads the engine afterwards). */
	if (atomic_load_explicit(&s->sig.tokens, memory_order_relaxed))
		return true;
	if (!ep_room(t))
		return false;
	uint64_t d;
	enum ep_take_res tr = ep_take(t, s, solo, false, &d);
	if (tr != EP_TAKEN)
		return tr == EP_GIVEN_BACK; /* not taken: the caller writes the token */
	ep_append(t, s, d, (uint32_t)solo & (EPOLLIN | EPOLLRDNORM), false);
	atomic_fetch_add_explicit(&sock_ep_tokenfree_total, 1, memory_order_relaxed);
	return true;
}

/* ---- Quiet POLLOUT (the writer's side of the list; rule in sig.h at POLLOUT) ----
 *
 * The reader's loop was spared its tokens above; a writer's loop (conns' client: 1000
 * non-blocking fds, each registered level-triggered for EPOLLOUT alone) paid the kernel
 * instead: every epoll_wait re-polled each writable program end (ep_send_events ->
 * sock_poll -> unix_poll: a cold socket per event, ~0.8 us each here), 10 % of that
 * process's CPU, which is the one that limits conns' throughput, and a fill and an
 * unfill whenever a socket's ring filled (docs/history/conns.md "Round 7"). So a socket
 * that
 *   - has exactly one registration, in the epoll instance this thread waits on,
 *     level-triggered, with EPOLLOUT and without EPOLLIN, and is non-blocking, and
 *   - is writable after a call of this thread's program on it (a send: sock_sync_after_call)
 *     or at an engine event with CORE_EV_OUT that this thread handles (a CDC that moved
 *     the peer's consumer cursor, a completion), inside its call or between two calls
 *     of its loop (a send of the program reaped them; the list is then changed under a
 *     trylock of its lock, as the timer does, since the caller holds core or sock locks)
 * is taken by this thread's list: its program end is filled (sig_block_out: POLLOUT off
 * for the kernel, one send, once), and the list reports EPOLLOUT while it is writable.
 * Level-triggered as the kernel: at the next call an entry the program wrote to (any
 * call on it: ep_read) is reported again if still writable; one that is not writable
 * stays owned but leaves the list (its end is filled, which is the kernel's truth too),
 * and comes back with the event that makes it writable, if this thread handles it.
 * An entry the program did not use in that turn goes back to the kernel
 * (sig_unblock_out if writable), and so does every entry in every case where an arrival
 * gets its token above: another thread's call on the socket, smcr_epoll_ctl, close, the
 * thread leaving the loop, the grace timer; and any event with CORE_EV_OUT that another
 * thread handles (the progress thread, or a thread outside a loop on that epfd) takes
 * the socket back and unblocks it. So another poller sees POLLOUT at most one loop turn or
 * the grace late (the same bound as POLLIN above; not while the program keeps writing to
 * the socket and it stays writable: the list keeps it), a blocking sender never sleeps on an end
 * the list keeps filled (it is not non-blocking, or it gave the list up first:
 * sock_epoll_release_hold), and a writable socket is never left without POLLOUT both in
 * the kernel and in a list. Kernel events for the same registration (RDHUP, HUP, ERR)
 * are merged with the entry's EPOLLOUT (ep_merge_locked). */
static bool ep_defer_out_locked(struct ep_thread *t, struct sock *s, uint64_t solo,
				unsigned events);

bool sock_epoll_defer_out(struct sock *s, unsigned events)
{
	uint64_t solo = atomic_load(&s->ep_solo);
	if (!(events & CORE_EV_OUT) || !(solo & EPOLLOUT))
		return false; /* an arrival's entry, or none: not ours */
	struct ep_thread *t = ep_cur;
	bool locked = false;
	if (!t && ep_t && ep_held && ep_solo_on(solo, ep_t->epfd) &&
	    pthread_mutex_trylock(&ep_t->lock) == 0) {
		/* this thread, between two calls of its loop (a send of the program reaped
		 * the completions): the list is ours to change under its lock; trylock, as
		 * the timer's, because a callback holds core locks */
		t = ep_t;
		locked = true;
	}
	bool kept = ep_defer_out_locked(t, s, solo, events);
	if (locked)
		pthread_mutex_unlock(&t->lock);
	return kept;
}

/* sock_epoll_defer_out with t (NULL: no list) locked by this thread. */
static bool ep_defer_out_locked(struct ep_thread *t, struct sock *s, uint64_t solo,
				unsigned events)
{
	void *own = atomic_load(&s->ep_owner);
	void *mine = t ? ep_tag(t, true) : NULL;
	bool fits = t && !(events & (CORE_EV_ERR | CORE_EV_HUP)) && ep_solo_on(solo, t->epfd) &&
		    atomic_load_explicit(&s->sig.nonblock, memory_order_relaxed);
	if (!fits || (own && own != mine)) {
		/* another thread's list, or this thread outside its call, or the socket no
		 * longer qualifies: back to the kernel (the caller unblocks) */
		if (own)
			(void)atomic_exchange(&s->ep_owner, NULL);
		return false;
	}
	struct ep_ent *en = own == mine ? ep_find(t, s) : NULL;
	if (en) {
		en->report = true; /* listed already */
	} else if (own == mine) {
		/* owned, waiting for this event (not writable at the last call) */
		if (!ep_room(t)) {
			(void)atomic_exchange(&s->ep_owner, NULL);
			return false;
		}
		ep_append(t, s, atomic_load(&s->ep_solo_data),
			  (uint32_t)solo & (EPOLLOUT | EPOLLWRNORM), true);
	} else {
		/* not owned: take it. The fill first, so the kernel stops reporting it
		 * before the list does. */
		if (!ep_room(t))
			return false;
		sig_block_out(&s->sig);
		uint64_t d;
		enum ep_take_res tr = ep_take(t, s, solo, true, &d);
		if (tr != EP_TAKEN)
			return tr == EP_GIVEN_BACK; /* not taken: the caller unblocks */
		ep_append(t, s, d, (uint32_t)solo & (EPOLLOUT | EPOLLWRNORM), true);
	}
	atomic_fetch_add_explicit(&sock_ep_quietout_total, 1, memory_order_relaxed);
	return true;
}

bool sock_epoll_keeps_out(struct sock *s)
{
	return ep_t && atomic_load(&s->ep_owner) == ep_tag(ep_t, true);
}

void sock_epoll_note_call(struct sock *s)
{
	void *own = atomic_load_explicit(&s->ep_owner, memory_order_relaxed);
	if (!own)
		return;
	if (ep_t && (own == (void *)ep_t || own == ep_tag(ep_t, true))) {
		atomic_store_explicit(&s->ep_read, true, memory_order_relaxed);
		return;
	}
	/* another thread's entry: ours now; the caller's resync writes the token */
	(void)atomic_exchange(&s->ep_owner, NULL);
}

/* A socket seen a second time in this pass over t's list (t->lock held). */
static bool ep_dup(struct ep_thread *t, struct sock *s)
{
	if (atomic_load_explicit(&s->ep_gen, memory_order_relaxed) == t->gen)
		return true;
	atomic_store_explicit(&s->ep_gen, t->gen, memory_order_relaxed);
	return false;
}

/* Start of a call on epfd (t->lock held): entries of another epfd, dropped ones and those
 * the program did not use go back to the kernel (ep_unmark); used ones still readable or
 * writable are reported again; a writability entry written until full stays owned, off
 * the list. */
static void ep_begin_locked(struct ep_thread *t, int epfd)
{
	unsigned k = 0, rot = 0;
	t->gen++;
	for (unsigned i = 0; i < t->n; i++) {
		struct ep_ent en = t->v[i];
		struct sock *s = en.s;
		if (i == t->rot)
			rot = k;
		if (atomic_load(&s->ep_owner) != ep_tag(t, en.out) || ep_dup(t, s)) {
			/* taken back by somebody else (who gave it back), or an older entry
			 * of a socket taken back and then taken again: its newer entry has
			 * been kept (ep_append) */
			sock_put(s);
			continue;
		}
		if (en.epfd != epfd) {
			ep_unmark(t, s, en.out);
			sock_put(s);
			continue;
		}
		if (!en.report) {
			/* returned by the last call: level-triggered if the program used it */
			bool used = atomic_exchange_explicit(&s->ep_read, false,
							     memory_order_relaxed);
			unsigned ev = used ? core_conn_events(s->conn) : 0;
			if (used && (ev & (en.out ? CORE_EV_OUT : CORE_EV_IN))) {
				en.report = true; /* still readable / writable */
			} else if (used && en.out) {
				/* written until full: stays owned (its end filled), off the
				 * list until the event that makes it writable */
				sock_put(s);
				continue;
			} else {
				/* read out (no token), or skipped: back to the kernel */
				ep_unmark(t, s, en.out);
				sock_put(s);
				continue;
			}
		}
		s->ep_idx = k;
		t->v[k++] = en;
	}
	t->n = k;
	t->rot = rot < k ? rot : 0;
}

/* Appends the entries to report to evs[n..max) (folding any whose data equals a kernel
 * event's into it); returns the new count. t->lock held. */
static int ep_merge_locked(struct ep_thread *t, struct epoll_event *evs, int n, int max)
{
	int kn = n;
	/* from where the last call stopped: more entries to report than slots must not
	 * starve the list's tail (the kernel rotates its ready list the same way) */
	unsigned start = t->rot;
	t->gen++;
	for (unsigned r = 0; r < t->n && n < max; r++) {
		unsigned i = (start + r) % t->n;
		struct ep_ent *en = &t->v[i];
		if (!en->report || atomic_load(&en->s->ep_owner) != ep_tag(t, en->out) ||
		    ep_dup(t, en->s))
			continue;
		t->rot = i + 1 < t->n ? i + 1 : 0;
		en->report = false;
		atomic_store_explicit(&en->s->ep_read, false, memory_order_relaxed);
		bool folded = false;
		for (int j = 0; j < kn; j++) {
			if (evs[j].data.u64 == en->data) {
				evs[j].events |= en->events;
				folded = true;
				break;
			}
		}
		if (!folded) {
			evs[n].events = en->events;
			evs[n].data.u64 = en->data;
			n++;
		}
	}
	return n;
}

static unsigned ep_pending_locked(const struct ep_thread *t)
{
	unsigned p = 0;
	for (unsigned i = 0; i < t->n; i++)
		p += t->v[i].report;
	return p;
}

static void ep_track(int epfd, int delta)
{
	if (epfd < 0 || epfd >= EP_TRACK_MAX)
		return;
	if (delta > 0)
		atomic_fetch_add_explicit(&ep_smcr[epfd], 1, memory_order_relaxed);
	else if (atomic_load_explicit(&ep_smcr[epfd], memory_order_relaxed) > 0)
		atomic_fetch_sub_explicit(&ep_smcr[epfd], 1, memory_order_relaxed);
}

bool sock_epoll_has_smcr(int epfd)
{
	if (epfd < 0)
		return false;
	return epfd >= EP_TRACK_MAX || atomic_load_explicit(&ep_smcr[epfd], memory_order_relaxed);
}

/* Gives the held spin up; the list's entries become tokens first (the thread leaves
 * the loop: nobody would report them). */
static void ep_release(struct ep_thread *t, bool locked)
{
	if (t) {
		/* t->n under the lock: the timer may be flushing it (progress thread) */
		if (!locked)
			pthread_mutex_lock(&t->lock);
		if (t->n)
			ep_flush_locked(t);
		if (!locked)
			pthread_mutex_unlock(&t->lock);
	}
	struct core_engine *e = ep_held;
	if (!e)
		return;
	ep_held = NULL;
	core_engine_spin_end(e);
}

void sock_epoll_release_hold(void)
{
	ep_release(ep_t, false);
}

int smcr_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	struct core_engine *e = sock_epoll_has_smcr(epfd) ? sock_engine_if_up() : NULL;
	if (!e || max <= 0) {
		sock_epoll_release_hold();
		return sock_sys.epoll_wait(epfd, evs, max, timeout);
	}
	pthread_once(&ep_fork_once, ep_fork_setup);
	struct ep_thread *t = ep_thread_get();
	if (t)
		pthread_mutex_lock(&t->lock);
	uint64_t now = smcr_now_ns();
	uint64_t hold = ep_hold_ns(now);
	if (ep_held != e) {
		ep_release(t, true); /* (none: ep_held is this engine's or NULL) */
		core_engine_spin_begin(e, now);
		ep_held = e;
	}
	ep_hold(e, now, hold);
	unsigned pend = 0;
	if (t) {
		t->call_ns = now;
		t->grace_ns = hold > SOCK_EP_GRACE_NS ? hold : SOCK_EP_GRACE_NS;
		ep_begin_locked(t, epfd);
		t->epfd = epfd;
		ep_cur = t;
	}
	/* the arrivals of every connection, their callbacks (tokens, or this thread's
	 * list) on this thread */
	(void)core_engine_progress(e, now, NULL);
	ep_cur = NULL;
	if (t)
		pend = ep_pending_locked(t);
	/* the kernel's events first, but half of the slots at most while the list has
	 * entries (neither side can starve the other) */
	int kmax = max;
	if (pend)
		kmax = max - (int)(pend < (unsigned)max / 2 ? pend : (unsigned)max / 2);
	if (kmax == max && pend && max == 1 && (now & 1))
		kmax = 0; /* one slot: alternate */
	int n = kmax > 0 ? sock_sys.epoll_wait(epfd, evs, kmax, 0) : 0;
	if (n < 0) {
		int err = errno; /* spin_end's calls must not change the caller's errno */
		ep_release(t, true);
		if (t)
			pthread_mutex_unlock(&t->lock);
		errno = err;
		return n;
	}
	if (pend)
		n = ep_merge_locked(t, evs, n, max);
	/* Nothing yet: poll the engine a little longer before sleeping (EP_SPIN_NS): the
	 * peer's next CDC is usually microseconds away in a busy loop, and a sleep costs
	 * two wake-ups (the progress thread's, then ours through the token) and hands the
	 * arrivals meanwhile to the progress thread (tokens). Measured (conns 1000, load
	 * 6): 20 us 40-45 us of CPU per 64 KiB for both ends, 50 us 45-52, 100 us 41-50,
	 * none 51-55 (main 52-55); docs/history/conns.md "Round 2". The kernel's events are
	 * looked at every 8th turn (and whenever the list has some). */
	if (n == 0 && timeout != 0 && t) {
		uint64_t t0 = now, tnow = now;
		unsigned turns = 0;
		while (n == 0 && tnow - t0 < EP_SPIN_NS) {
			ep_cur = t;
			(void)core_engine_progress(e, tnow, NULL);
			ep_cur = NULL;
			pend = ep_pending_locked(t);
			if (pend || (++turns & 7) == 0) {
				int km = max - (pend ? 1 : 0);
				n = km > 0 ? sock_sys.epoll_wait(epfd, evs, km, 0) : 0;
				if (n < 0)
					n = 0; /* the sleep's epoll_wait below reports it */
				if (pend)
					n = ep_merge_locked(t, evs, n, max);
			}
			if ((turns & 3) == 0)
				tnow = smcr_now_ns();
		}
		if (n > 0)
			core_engine_spin_renew_until(e, tnow, tnow + hold);
	}
	if (n != 0 || timeout == 0) {
		ep_ret_ns = smcr_now_ns();
		if (t) {
			/* entries to take back if the program does not come back (ep_timer_fn) */
			if (t->n && !t->tmr_on)
				t->tmr_on = progress_timer_arm(&t->tmr, now + t->grace_ns) == 0;
			pthread_mutex_unlock(&t->lock);
		}
		return n; /* the spin stays held while the program handles the events */
	}
	/* Nothing ready: sleep. spin_end arms the CQs and polls once more (what came in
	 * meanwhile is a token now, and epoll_wait returns at once); from here the
	 * progress thread handles arrivals. */
	ep_release(t, true);
	if (t)
		pthread_mutex_unlock(&t->lock);
	int ms = timeout;
	if (timeout > 0) {
		uint64_t spent = (smcr_now_ns() - now) / SMCR_NS_PER_MS;
		ms = spent >= (uint64_t)timeout ? 0 : timeout - (int)spent;
	}
	n = sock_sys.epoll_wait(epfd, evs, max, ms);
	ep_ret_ns = smcr_now_ns();
	if (n > 0) {
		/* the progress thread that woke us may have looked at the engine before
		 * this begin: the post makes it look again by the spin's end */
		core_engine_spin_begin(e, ep_ret_ns);
		ep_hold(e, ep_ret_ns, hold);
		ep_held = e;
	}
	return n;
}
