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
 * sees the new file's state as a fresh edge. That edge stays even where it is one more
 * than TCP's (the program had collected the old file's last edge): nothing tells whether
 * the old edge is still queued, and a registration added without it could lose the only
 * edge the program waits for (docs/design/readiness.md section 2). A fired one-shot
 * registration moves disarmed (sock_epoll_move_locked). */
#define _GNU_SOURCE
#include <smcr/smcr.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "sock/errmap.h"
#include "sock/sock.h"
#include "sock/sys.h"
#include "sock/wait.h"
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
	if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && s->lq.want &&
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

/* The event bits the kernel holds now for fd's registration in epfd, from
 * /proc/self/fdinfo/<epfd> (a line "tfd: <fd> events: <hex> ..." per registration); -1
 * when it cannot tell. */
static long reg_kernel_events(int epfd, int fd)
{
	char path[48], line[256];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long ev = -1;
	while (ev < 0 && fgets(line, sizeof(line), f)) {
		int tfd;
		unsigned e;
		if (sscanf(line, "tfd: %d events: %x", &tfd, &e) == 2 && tfd == fd)
			ev = (long)e;
	}
	fclose(f);
	return ev;
}

void sock_epoll_move_locked(struct sock *s, bool before)
{
	for (size_t i = 0; i < s->nregs;) {
		struct sock_epreg *r = &s->regs[i];
		if (before && (r->ev.events & EPOLLONESHOT)) {
			/* A one-shot registration that fired is disarmed (the kernel keeps only
			 * its flag bits) until the program's EPOLL_CTL_MOD: re-added with its
			 * recorded mask it would be armed again and fire once more, which TCP's
			 * never does. So it moves disarmed (the MOD records the new mask). The
			 * kernel adds EPOLLERR and EPOLLHUP to every ADD: only an error or a
			 * hang-up of the TCP socket before that MOD still shows
			 * (docs/INTERPOSER.md "Undecided connections"). */
			long kev = reg_kernel_events(r->epfd, s->fd);
			uint32_t flags = EPOLLONESHOT | EPOLLET | EPOLLWAKEUP | EPOLLEXCLUSIVE;
			if (kev >= 0 && !((uint32_t)kev & ~flags))
				r->ev.events &= flags;
		}
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

/* ---- smcr_epoll_wait ----
 *
 * A set that holds smcr fds is waited on through sock_wait_epoll (wait.h;
 * docs/design/readiness.md section 4): the engine's progress runs in the calling thread
 * first and while it polls before sleeping, so one call collects the arrivals of every
 * connection, each shown by its token at once (no arrival is kept from another poller),
 * and a sleep arms the CQs first. Other sets go straight to the kernel. */

#define EP_TRACK_MAX 65536 /* epfd numbers tracked (256 KiB of BSS, touched only where used);
			   * above: always treated as holding smcr fds */
static _Atomic unsigned ep_smcr[EP_TRACK_MAX];

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

int smcr_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	if (!sock_epoll_has_smcr(epfd) || !sock_engine_if_up() || max <= 0)
		return sock_sys.epoll_wait(epfd, evs, max, timeout);
	return sock_wait_epoll(epfd, evs, max, timeout < 0 ? -1 : (long long)timeout * 1000000ll,
			       NULL);
}
