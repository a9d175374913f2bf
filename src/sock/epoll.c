/* epoll.c: smcr_epoll_ctl, which records the epoll registrations of smcr fds so a swap of
 * the file behind an fd (sock.h: placeholder at the start of a handshake, TCP socket back
 * at a fallback) can move them (ENGINE.md decision 2).
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
 *     (core_engine_spin_renew). If the program does not come back within the spin grace
 *     (CORE_SPIN_GRACE_NS, 1 ms: it blocks elsewhere, or left the loop), the progress
 *     thread arms the CQs and takes over, as for a spinner that lost its CPU: nothing is
 *     lost, a completion waits at most that long.
 *   - before it sleeps (nothing ready) the thread gives the spin up (spin_end arms the
 *     CQs and polls once more), and the progress thread wakes it through the tokens, as
 *     before.
 * Only one spin per thread (ep_held); a blocking call of the same thread gives it up
 * first (sock_epoll_release_hold, data.c wait_for), so its own spin/sleep logic applies. */

#define EP_TRACK_MAX 65536 /* epfd numbers tracked (256 KiB of BSS, touched only where used);
			   * above: always treated as holding smcr fds */
static _Atomic unsigned ep_smcr[EP_TRACK_MAX];

static _Thread_local struct core_engine *ep_held; /* this thread's held spin, or NULL */

/* fork(): the child's engine is a new one (engine.c); the parent's must not be touched
 * (its locks may have been held by other threads at the fork). The handler runs in the
 * forking thread, the only one whose ep_held the child has. */
static pthread_once_t ep_fork_once = PTHREAD_ONCE_INIT;
static void ep_atfork_child(void)
{
	ep_held = NULL;
}
static void ep_fork_setup(void)
{
	pthread_atfork(NULL, NULL, ep_atfork_child);
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

void sock_epoll_release_hold(void)
{
	struct core_engine *e = ep_held;
	if (!e)
		return;
	ep_held = NULL;
	core_engine_spin_end(e);
}

int smcr_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	struct core_engine *e = sock_epoll_has_smcr(epfd) ? sock_engine_if_up() : NULL;
	if (!e || max <= 0) {
		sock_epoll_release_hold();
		return sock_sys.epoll_wait(epfd, evs, max, timeout);
	}
	pthread_once(&ep_fork_once, ep_fork_setup);
	uint64_t now = smcr_now_ns();
	if (ep_held != e) {
		sock_epoll_release_hold(); /* (none: ep_held is this engine's or NULL) */
		core_engine_spin_begin(e, now);
		ep_held = e;
	} else {
		core_engine_spin_renew(e, now);
	}
	/* the arrivals of every connection, their callbacks (tokens) on this thread */
	(void)core_engine_progress(e, now, NULL);
	int n = sock_sys.epoll_wait(epfd, evs, max, 0);
	if (n != 0 || timeout == 0) {
		if (n < 0) {
			int err = errno; /* spin_end's calls must not change the caller's errno */
			sock_epoll_release_hold();
			errno = err;
		}
		return n; /* the spin stays held while the program handles the events */
	}
	/* Nothing ready: sleep. spin_end arms the CQs and polls once more (what came in
	 * meanwhile is a token now, and epoll_wait returns at once); from here the
	 * progress thread handles arrivals. */
	sock_epoll_release_hold();
	int ms = timeout;
	if (timeout > 0) {
		uint64_t spent = (smcr_now_ns() - now) / SMCR_NS_PER_MS;
		ms = spent >= (uint64_t)timeout ? 0 : timeout - (int)spent;
	}
	n = sock_sys.epoll_wait(epfd, evs, max, ms);
	if (n > 0) {
		core_engine_spin_begin(e, smcr_now_ns());
		ep_held = e;
	}
	return n;
}
