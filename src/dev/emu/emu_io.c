/* emu_io.c: the per-device I/O thread of the emu provider. It blocks in epoll_wait (never
 * spins) and, after each batch of events, runs the work list (requests from application
 * threads) and the timers.
 *
 * Timers: one timerfd, armed (absolute, CLOCK_MONOTONIC) for the earliest deadline of the
 * device: each QP's transport timer (last progress + ack timeout), RNR deadlines, delayed
 * frames, HELLO deadlines of pending connections, lingering closes.
 *
 * Timer protocol with posting threads: a post that makes a QP's send queue non-empty sets
 * the QP's deadline (now + ack timeout) and must make sure the timer covers it, without a
 * syscall per post. The I/O thread stores timer_at = UINT64_MAX before it scans the QPs
 * (each under its lock) and stores the armed deadline after; the poster, under the QP lock
 * after queuing, kicks only if its deadline is before timer_at. Either the scan saw the
 * queued WR (the QP lock orders them) or the poster read a timer_at stored after the scan
 * started, i.e. UINT64_MAX or a deadline computed without its WR, and compares against it.
 * A timer that fires early (progress moved the deadline) just rescans. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "dev/emu/emu_int.h"
#include "util/clock.h"
#include "util/log.h"

static void emu_io_drain(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof v) < 0 && errno == EINTR)
		;
}

static void emu_io_drain_netlink(int fd)
{
	uint8_t buf[8192];
	/* The messages only say "some link changed"; the state itself is read with an ioctl
	 * (emu_port_update), which also covers a lost message (ENOBUFS on overrun). */
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ENOBUFS)
			continue;
		if (n <= 0)
			return;
	}
}

/* Runs the work list until it is empty. */
static int emu_io_work(struct emu_dev *d)
{
	int did = 0;
	for (;;) {
		pthread_mutex_lock(&d->work_lock);
		struct emu_qp *q = d->work_head;
		if (q) {
			d->work_head = q->wnext;
			q->in_work = 0;
		}
		pthread_mutex_unlock(&d->work_lock);
		if (!q)
			return did;
		did = 1;
		(void)emu_conn_work(d, q);
	}
}

static void emu_io_timers(struct emu_dev *d)
{
	atomic_store(&d->timer_at, UINT64_MAX);
	uint64_t now = smcr_now_ns();
	uint64_t next = emu_conn_timers(d, now);
	pthread_mutex_lock(&d->lock);
	for (uint32_t b = 0; b < EMU_QP_HASH; b++) {
		for (struct emu_qp *q = d->qpt[b]; q; q = q->hnext) {
			pthread_mutex_lock(&q->lock);
			uint64_t t = emu_qp_timers_locked(q, now);
			pthread_mutex_unlock(&q->lock);
			if (t < next)
				next = t;
		}
	}
	pthread_mutex_unlock(&d->lock);

	struct itimerspec its;
	memset(&its, 0, sizeof its);
	if (next != UINT64_MAX) {
		if (next <= now)
			next = now + 1;
		its.it_value.tv_sec = (time_t)(next / SMCR_NS_PER_S);
		its.it_value.tv_nsec = (long)(next % SMCR_NS_PER_S);
	}
	if (timerfd_settime(d->timerfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		LOG_ERR("emu", "%s: timerfd_settime: %s", d->dev.name, strerror(errno));
	atomic_store(&d->timer_at, next);
}

void *emu_io_main(void *arg)
{
	struct emu_dev *d = arg;
	struct epoll_event ev[256];

	emu_io_thread_enter(d);
	while (!atomic_load(&d->stop)) {
		int n = epoll_wait(d->epfd, ev, 256, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			LOG_ERR("emu", "%s: epoll_wait: %s; I/O thread stops", d->dev.name,
				strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct emu_ep *ep = ev[i].data.ptr;
			uint32_t e = ev[i].events;
			switch (ep->kind) {
			case EMU_EP_LISTEN:
				emu_conn_accept(d);
				break;
			case EMU_EP_KICK:
			case EMU_EP_TIMER:
				emu_io_drain(ep->kind == EMU_EP_KICK ? d->kickfd : d->timerfd);
				break;
			case EMU_EP_NETLINK:
				emu_io_drain_netlink(d->nlfd);
				emu_port_update(d);
				break;
			case EMU_EP_PEND:
				emu_conn_pend_event(d, DEV_CONTAINER_OF(ep, struct emu_pend, ep), e);
				break;
			case EMU_EP_QP:
				emu_conn_qp_event(d, DEV_CONTAINER_OF(ep, struct emu_qp, ep), e);
				break;
			case EMU_EP_LINGER:
				emu_conn_linger_event(d, DEV_CONTAINER_OF(ep, struct emu_linger, ep),
						      e);
				break;
			}
		}
		/* After the batch: nothing below frees an object an event above still uses. */
		if (atomic_exchange(&d->port_dirty, 0))
			emu_conn_port_down(d);
		/* Timers may add work (a QP timing out must close its connection); errors are
		 * one-shot, so this ends. */
		for (;;) {
			(void)emu_io_work(d);
			emu_io_timers(d);
			pthread_mutex_lock(&d->work_lock);
			int more = d->work_head != NULL;
			pthread_mutex_unlock(&d->work_lock);
			if (!more)
				break;
		}
	}
	return NULL;
}
