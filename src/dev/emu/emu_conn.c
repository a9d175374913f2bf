/* emu_conn.c: the connections that carry emu QPs, run by the device's I/O thread only
 * (docs/parts/emu.md "Connection and pairing").
 *
 * Pairing. When a QP reaches RTR with the remote (GID, QPN), the side whose own (GID, QPN)
 * sorts first is the connector: it connects from its device's IP to <peer GID's IP>:<port>
 * and sends HELLO{src GID, dst GID, src QPN, dst QPN}. The listening device checks the
 * HELLO (format; destination GID is its own; source GID is the address the connection
 * comes from), then looks the destination QP up:
 *   RTR/RTS, its remote is the sender, it is not connected -> paired, HELLO_ACK(OK);
 *   RESET/INIT (the peer was quicker to RTR)                 -> parked until it reaches RTR;
 *   anything else                                            -> HELLO_ACK(reason), closed.
 * So the two sides may reach RTR in any order. The connector sends no data before
 * HELLO_ACK(OK); a refusal puts its QP in ERR.
 *
 * Ownership: this thread creates and closes every connection fd and frees every pending
 * and lingering connection object; an object is freed only while handling its own epoll
 * event, or in the work/timer phase after an event batch, never while another event of the
 * batch may still point at it. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dev/emu/emu_int.h"
#include "util/clock.h"
#include "util/log.h"

static void emu_sock_opts(int fd)
{
	int one = 1, idle = EMU_KEEPIDLE_S, intvl = EMU_KEEPINTVL_S, cnt = EMU_KEEPCNT;
	/* Frames are small and latency matters more than segment count. Keepalive notices a
	 * silent peer machine when no WR is outstanding (the transport timer covers the
	 * rest). Failures only lose these optimisations. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

static int emu_epoll(struct emu_dev *d, int op, int fd, uint32_t events, struct emu_ep *ep)
{
	struct epoll_event e = { .events = events, .data.ptr = ep };
	if (epoll_ctl(d->epfd, op, fd, &e) == 0)
		return 0;
	LOG_ERR("emu", "%s: epoll_ctl(%d) failed: %s", d->dev.name, op, strerror(errno));
	return -SMCR_E_EMU_SYS;
}

/* ---- pending connections ------------------------------------------------------------ */

/* With EMU_MAX_PEND connections waiting for their HELLO, new ones wait in the listen
 * backlog (the listener leaves epoll) until half of those are done: a burst of QPs
 * connecting at once only waits, and a flood of idle connections cannot take more. */
static void emu_listen_pause(struct emu_dev *d, int pause)
{
	if (pause == d->listen_paused)
		return;
	struct epoll_event e = { .events = pause ? 0 : EPOLLIN, .data.ptr = &d->ep_listen };
	if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, d->lfd, &e) == 0)
		d->listen_paused = pause;
}

static void emu_pend_unlink(struct emu_dev *d, struct emu_pend *p)
{
	struct emu_pend **pp = &d->pend;
	while (*pp && *pp != p)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = p->next;
		d->npend--;
	}
	if (d->listen_paused && d->npend <= EMU_MAX_PEND / 2)
		emu_listen_pause(d, 0);
}

/* Answers HELLO_ACK(status) (best effort: the socket is fresh and the frame tiny) unless
 * status < 0, then closes and frees p. */
static void emu_pend_close(struct emu_dev *d, struct emu_pend *p, int status, uint32_t qpn)
{
	if (status >= 0) {
		uint8_t b[EMU_HDR_LEN + EMU_HELLO_ACK_LEN];
		struct wcur w = wcur_make(b, sizeof b);
		struct emu_frame f = { .type = EMU_F_HELLO_ACK };
		f.u.hello_ack.status = (uint8_t)status;
		f.u.hello_ack.qpn = qpn ? qpn : 1;
		if (emu_frame_encode(&w, &f, NULL) == 0)
			(void)send(p->fd, b, w.off, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, p->fd, NULL);
	emu_fd_close(p->fd);
	emu_pend_unlink(d, p);
	free(p);
}

void emu_conn_accept(struct emu_dev *d)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		if (d->npend >= EMU_MAX_PEND && emu_port_is_active(d)) {
			emu_listen_pause(d, 1);
			return;
		}
		emu_fd_begin();
		int fd = emu_fd_end(accept4(d->lfd, (struct sockaddr *)&ss, &sl,
						 SOCK_NONBLOCK | SOCK_CLOEXEC));
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && emu_more_fds())
				continue;
			if (errno == EMFILE || errno == ENFILE) {
				/* The listener stays readable: leave epoll for a while rather than
				 * spin on it. */
				SMCR_LOG_RL(SMCR_LOG_WARN, "emu", "%s: accept: %s", d->dev.name,
					    strerror(errno));
				emu_listen_pause(d, 1);
				d->listen_retry_at = smcr_now_ns() + 100 * 1000 * 1000;
				return;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				SMCR_LOG_RL(SMCR_LOG_WARN, "emu", "%s: accept: %s", d->dev.name,
					    strerror(errno));
			return;
		}
		if (!emu_port_is_active(d)) {
			SMCR_LOG_RL(SMCR_LOG_INFO, "emu", "%s: connection refused (port down)",
				    d->dev.name);
			emu_fd_close(fd);
			continue;
		}
		struct emu_pend *p = calloc(1, sizeof *p);
		if (!p) {
			emu_fd_close(fd);
			continue;
		}
		p->ep.kind = EMU_EP_PEND;
		p->fd = fd;
		p->peer = ss;
		p->deadline = smcr_now_ns() + EMU_HELLO_DEADLINE_NS;
		if (emu_epoll(d, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLRDHUP, &p->ep)) {
			emu_fd_close(fd);
			free(p);
			continue;
		}
		p->next = d->pend;
		d->pend = p;
		d->npend++;
	}
}

/* Gives the pending connection's fd to q (which is in RTR/RTS, listening side). */
static void emu_conn_install_locked(struct emu_dev *d, struct emu_qp *q, struct emu_pend *p)
{
	if (!q->rx.buf) {
		q->rx.buf = malloc(EMU_RXBUF);
		if (!q->rx.buf) {
			emu_pend_close(d, p, EMU_HS_BUSY, q->qp.qp_num);
			return;
		}
	}
	q->rx.start = q->rx.end = 0;
	q->rx.in_frame = 0;
	q->fd = p->fd;
	q->cs = EMU_CS_UP;
	q->progress_ns = smcr_now_ns();	/* the transport timer starts with the link */
	q->tx_blocked = 0;
	struct emu_frame f = { .type = EMU_F_HELLO_ACK };
	f.u.hello_ack.status = EMU_HS_OK;
	f.u.hello_ack.qpn = q->qp.qp_num;
	struct wcur w = wcur_make(q->hs, sizeof q->hs);
	if (emu_frame_encode(&w, &f, NULL))
		w.off = 0;	/* cannot happen: fixed frame into a buffer sized for it */
	q->hs_len = (uint32_t)w.off;
	q->hs_off = 0;
	emu_sock_opts(q->fd);
	/* Re-tag the fd in epoll: its events now belong to the QP. */
	q->ep_events = EPOLLIN | EPOLLRDHUP;
	(void)emu_epoll(d, EPOLL_CTL_MOD, q->fd, q->ep_events, &q->ep);
	LOG_DBG("emu", "%s: QP %u paired with QP %u (listener)", d->dev.name, q->qp.qp_num,
		q->dest_qpn);
	emu_pend_unlink(d, p);
	free(p);
	emu_qp_tx_flush_locked(q);
	/* Frames that arrived with the HELLO (none from an honest peer) wait in the socket:
	 * EPOLLIN reports them. */
}

/* Pairs p with its QP, parks it, or refuses it. Frees p unless parked. */
static void emu_conn_try_pair(struct emu_dev *d, struct emu_pend *p)
{
	const struct emu_hello *h = &p->hello;
	int status;

	pthread_mutex_lock(&d->lock);
	struct emu_qp *q = emu_qp_lookup_locked(d, h->dst_qpn);
	if (!d->port_active) {
		status = EMU_HS_PORT_DOWN;
	} else if (!q) {
		status = EMU_HS_NO_QP;
	} else {
		pthread_mutex_lock(&q->lock);
		switch (q->state) {
		case DEV_QPS_RESET:
		case DEV_QPS_INIT:
			status = -1;
			for (struct emu_pend *o = d->pend; o; o = o->next)
				if (o != p && o->parked && o->hello.dst_qpn == h->dst_qpn)
					status = EMU_HS_BUSY;
			break;
		case DEV_QPS_RTR:
		case DEV_QPS_RTS:
			if (q->connector || q->dest_qpn != h->src_qpn ||
			    memcmp(q->ah.dgid.raw, h->src_gid.raw, DEV_GID_LEN) != 0)
				status = EMU_HS_MISMATCH;
			else if (q->cs != EMU_CS_NONE || q->fd >= 0)
				status = EMU_HS_BUSY;
			else
				status = EMU_HS_OK;
			break;
		case DEV_QPS_ERR:
		default:
			status = EMU_HS_QP_ERR;
			break;
		}
		if (status == EMU_HS_OK) {
			emu_conn_install_locked(d, q, p);
			pthread_mutex_unlock(&q->lock);
			pthread_mutex_unlock(&d->lock);
			return;
		}
		pthread_mutex_unlock(&q->lock);
	}
	pthread_mutex_unlock(&d->lock);
	if (status < 0) {
		if (!p->parked) {
			p->parked = 1;
			p->deadline = UINT64_MAX;
			(void)emu_epoll(d, EPOLL_CTL_MOD, p->fd, EPOLLRDHUP, &p->ep);
		}
		return;
	}
	SMCR_LOG_RL(SMCR_LOG_INFO, "emu", "%s: HELLO for QP %u from QP %u refused (status %d)",
		    d->dev.name, h->dst_qpn, h->src_qpn, status);
	emu_pend_close(d, p, status, h->dst_qpn);
}

void emu_conn_pend_event(struct emu_dev *d, struct emu_pend *p, uint32_t events)
{
	if (p->parked || !(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
		if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			emu_pend_close(d, p, -1, 0);
		return;
	}
	/* Read exactly the HELLO: an honest connector sends nothing else before our answer. */
	ssize_t n;
	do {
		n = recv(p->fd, p->buf + p->have, sizeof p->buf - p->have, MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0) {
		emu_pend_close(d, p, -1, 0);
		return;
	}
	p->have += (uint32_t)n;
	if (p->have < sizeof p->buf)
		return;
	struct rcur c = rcur_make(p->buf, p->have);
	struct emu_frame f;
	int rc = emu_frame_decode(&c, &f, NULL);
	if (!rc && f.type != EMU_F_HELLO)
		rc = -SMCR_E_EMU_UNEXPECTED;
	if (rc) {
		SMCR_LOG_RL(SMCR_LOG_WARN, "emu", "%s: bad HELLO: %s", d->dev.name,
			    smcr_err_msg(rc));
		emu_pend_close(d, p, rc == -SMCR_E_EMU_HELLO_VERSION ? EMU_HS_BAD_HELLO : -1, 0);
		return;
	}
	p->hello = f.u.hello;
	if (memcmp(f.u.hello.dst_gid.raw, d->gid.raw, DEV_GID_LEN) != 0)
		rc = -SMCR_E_EMU_HELLO_GID;
	else if (!emu_sockaddr_matches_gid(&p->peer, &f.u.hello.src_gid))
		rc = -SMCR_E_EMU_HELLO_SRC;
	if (rc) {
		SMCR_LOG_RL(SMCR_LOG_WARN, "emu", "%s: HELLO refused: %s", d->dev.name,
			    smcr_err_msg(rc));
		emu_pend_close(d, p, EMU_HS_BAD_HELLO, f.u.hello.dst_qpn);
		return;
	}
	emu_conn_try_pair(d, p);
}

/* ---- lingering (closing) connections ------------------------------------------------- */

static void emu_linger_close(struct emu_dev *d, struct emu_linger *l)
{
	struct emu_linger **pp = &d->linger;
	while (*pp && *pp != l)
		pp = &(*pp)->next;
	if (*pp)
		*pp = l->next;
	(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, l->fd, NULL);
	emu_fd_close(l->fd);
	free(l);
}

void emu_conn_linger_event(struct emu_dev *d, struct emu_linger *l, uint32_t events)
{
	(void)events;
	uint8_t scratch[4096];
	for (;;) {
		ssize_t n = recv(l->fd, scratch, sizeof scratch, MSG_DONTWAIT);
		if (n > 0)
			continue;	/* the peer's last frames: nobody wants them now */
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		emu_linger_close(d, l);	/* FIN or error: done */
		return;
	}
}

/* Ends q's connection: best-effort flush of its control frames (a NAK must reach the
 * peer), FIN, then wait up to EMU_LINGER_NS for the peer's FIN; or a reset (cut). */
static void emu_conn_close_locked(struct emu_dev *d, struct emu_qp *q)
{
	if (q->fd < 0) {
		q->cs = EMU_CS_NONE;
		return;
	}
	int fd = q->fd;
	if (q->close_rst) {
		(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, fd, NULL);
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		emu_fd_close(fd);
	} else {
		if (q->cs == EMU_CS_DOWN || q->cs == EMU_CS_UP) {
			for (struct emu_txf *f = q->txq; f; f = f->next)
				f->not_before = 0;
			int stalled = q->stalled;
			q->stalled = 0;
			q->cs = EMU_CS_DOWN;
			emu_qp_tx_flush_locked(q);
			q->stalled = stalled;
		}
		(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, fd, NULL);
		(void)shutdown(fd, SHUT_WR);
		struct emu_linger *l = calloc(1, sizeof *l);
		if (!l || emu_epoll(d, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLRDHUP, &l->ep)) {
			free(l);
			emu_fd_close(fd);
		} else {
			l->ep.kind = EMU_EP_LINGER;
			l->fd = fd;
			l->deadline = smcr_now_ns() + EMU_LINGER_NS;
			l->next = d->linger;
			d->linger = l;
		}
	}
	q->fd = -1;
	q->cs = EMU_CS_NONE;
	q->ep_events = 0;
	q->tx_blocked = 0;
	q->close_rst = 0;
	q->hs_len = q->hs_off = 0;
	q->rx.start = q->rx.end = 0;
	q->rx.in_frame = 0;
	emu_qp_txq_clear_locked(q, 0);
}

/* ---- connecting ---------------------------------------------------------------------- */

static void emu_conn_connect_locked(struct emu_dev *d, struct emu_qp *q)
{
	struct sockaddr_storage to, from = d->addr;
	socklen_t tolen;
	int err = 0;

	if (!emu_port_is_active(d)) {
		emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL,
				    SMCR_E_EMU_PEER_GONE);
		return;
	}
	if (!q->rx.buf && !(q->rx.buf = malloc(EMU_RXBUF))) {
		emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL, SMCR_E_NOMEM);
		return;
	}
	if (emu_gid_to_sockaddr(d, &q->ah.dgid, &to, &tolen)) {
		emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL,
				    SMCR_E_EMU_NO_ADDR);
		return;
	}
	/* From our own address (any port): the listener checks that the HELLO's source GID
	 * is the address the connection comes from. */
	if (from.ss_family == AF_INET)
		((struct sockaddr_in *)&from)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&from)->sin6_port = 0;
	emu_fd_begin();
	int fd = emu_fd_end(socket(d->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (fd < 0 && errno == EMFILE && emu_more_fds()) {
		emu_fd_begin();
		fd = emu_fd_end(socket(d->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	}
	if (fd < 0) {
		err = errno;
		goto fail;
	}
	emu_sock_opts(fd);
	if (bind(fd, (struct sockaddr *)&from, d->addrlen) < 0 ||
	    (connect(fd, (struct sockaddr *)&to, tolen) < 0 && errno != EINPROGRESS)) {
		err = errno;
		emu_fd_close(fd);
		goto fail;
	}
	q->ep_events = EPOLLOUT | EPOLLRDHUP;
	if (emu_epoll(d, EPOLL_CTL_ADD, fd, q->ep_events, &q->ep)) {
		emu_fd_close(fd);
		q->ep_events = 0;
		goto fail;
	}
	q->fd = fd;
	q->cs = EMU_CS_CONNECTING;
	q->rx.start = q->rx.end = 0;
	q->rx.in_frame = 0;
	return;
fail:
	SMCR_LOG_RL(SMCR_LOG_INFO, "emu", "%s: QP %u: connect to the peer failed: %s",
		    d->dev.name, q->qp.qp_num, err ? strerror(err) : "epoll");
	emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL, SMCR_E_EMU_PEER_GONE);
}

static void emu_conn_connected_locked(struct emu_dev *d, struct emu_qp *q, uint32_t events)
{
	int err = 0;
	socklen_t el = sizeof err;
	if (getsockopt(q->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	if (!err && (events & (EPOLLERR | EPOLLHUP)))
		err = ECONNRESET;
	if (err) {
		SMCR_LOG_RL(SMCR_LOG_INFO, "emu", "%s: QP %u: connect to the peer failed: %s",
			    d->dev.name, q->qp.qp_num, strerror(err));
		emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL,
				    SMCR_E_EMU_PEER_GONE);
		return;
	}
	struct emu_frame f = { .type = EMU_F_HELLO };
	f.u.hello.version = EMU_VERSION;
	f.u.hello.src_gid = d->gid;
	f.u.hello.dst_gid = q->ah.dgid;
	f.u.hello.src_qpn = q->qp.qp_num;
	f.u.hello.dst_qpn = q->dest_qpn;
	struct wcur w = wcur_make(q->hs, sizeof q->hs);
	if (emu_frame_encode(&w, &f, NULL)) {
		emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL,
				    SMCR_E_INTERNAL);
		return;
	}
	q->hs_len = (uint32_t)w.off;
	q->hs_off = 0;
	q->cs = EMU_CS_HELLO;
	emu_qp_tx_flush_locked(q);	/* sends the HELLO; updates epoll (EPOLLIN) */
}

/* ---- QP connection events ------------------------------------------------------------ */

void emu_conn_qp_event(struct emu_dev *d, struct emu_qp *q, uint32_t events)
{
	pthread_mutex_lock(&q->lock);
	if (q->fd < 0 || q->cs == EMU_CS_DOWN || q->cs == EMU_CS_NONE)
		goto out;	/* closing: the work phase ends it */
	if (q->cs == EMU_CS_CONNECTING) {
		if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			emu_conn_connected_locked(d, q, events);
		goto out;
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		if (q->stalled || q->rx_parked) {
			/* Not reading: only the end of the connection matters. */
			if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
				emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL,
						    SMCR_E_EMU_PEER_GONE);
			goto out;
		}
		/* A few reads per event, then back to epoll so other QPs get their turn. */
		emu_rx_pump_locked(q, 4);
		if (q->fd < 0 || q->cs == EMU_CS_DOWN)
			goto out;
	}
	if ((events & EPOLLOUT) && (q->cs == EMU_CS_UP || q->cs == EMU_CS_HELLO))
		emu_qp_tx_flush_locked(q);
out:
	pthread_mutex_unlock(&q->lock);
}

/* ---- work ----------------------------------------------------------------------------- */

/* Refuses every parked HELLO for qpn. */
static void emu_conn_drop_parked(struct emu_dev *d, uint32_t qpn, int status)
{
	struct emu_pend *p = d->pend;
	while (p) {
		struct emu_pend *next = p->next;
		if (p->parked && p->hello.dst_qpn == qpn)
			emu_pend_close(d, p, status, qpn);
		p = next;
	}
}

int emu_conn_work(struct emu_dev *d, struct emu_qp *q)
{
	pthread_mutex_lock(&q->lock);
	unsigned want = q->want;
	q->want = 0;
	if (want & (EMU_W_CLOSE | EMU_W_DESTROY)) {
		if (q->cs == EMU_CS_DOWN || (want & EMU_W_DESTROY) || q->state == DEV_QPS_ERR ||
		    q->state == DEV_QPS_RESET)
			emu_conn_close_locked(d, q);
	}
	uint32_t qpn = q->qp.qp_num;
	int err = q->state == DEV_QPS_ERR;
	if (want & EMU_W_DESTROY) {
		pthread_mutex_unlock(&q->lock);
		emu_conn_drop_parked(d, qpn, EMU_HS_NO_QP);
		pthread_mutex_lock(&d->work_lock);
		if (q->in_work) {
			struct emu_qp **pp = &d->work_head;
			while (*pp && *pp != q)
				pp = &(*pp)->wnext;
			if (*pp)
				*pp = q->wnext;
			q->in_work = 0;
		}
		q->io_released = 1;
		pthread_cond_broadcast(&d->work_cv);
		pthread_mutex_unlock(&d->work_lock);
		return 1;
	}
	if ((want & EMU_W_CONNECT) && q->connector && q->fd < 0 &&
	    (q->state == DEV_QPS_RTR || q->state == DEV_QPS_RTS))
		emu_conn_connect_locked(d, q);
	if (want & (EMU_W_RX | EMU_W_TX)) {
		if (q->rx_parked && q->rq_n)
			q->rx_parked = 0;
		if (q->cs == EMU_CS_UP && !q->stalled && q->fd >= 0) {
			emu_rx_process_locked(q);	/* also flushes */
		}
		emu_qp_epoll_update_locked(q);
	}
	pthread_mutex_unlock(&q->lock);
	if (err)
		emu_conn_drop_parked(d, qpn, EMU_HS_QP_ERR);
	if (want & EMU_W_PAIR) {
		struct emu_pend *p = d->pend;
		while (p) {
			struct emu_pend *next = p->next;
			if (p->parked && p->hello.dst_qpn == qpn) {
				emu_conn_try_pair(d, p);
				break;	/* at most one is parked per QP */
			}
			p = next;
		}
	}
	return 0;
}

/* ---- timers and teardown ---------------------------------------------------------------- */

uint64_t emu_conn_timers(struct emu_dev *d, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	if (d->listen_retry_at) {
		if (d->listen_retry_at <= now) {
			d->listen_retry_at = 0;
			if (d->npend < EMU_MAX_PEND)
				emu_listen_pause(d, 0);
		} else {
			next = d->listen_retry_at;
		}
	}
	struct emu_pend *p = d->pend;
	while (p) {
		struct emu_pend *pn = p->next;
		if (p->deadline <= now) {
			SMCR_LOG_RL(SMCR_LOG_INFO, "emu", "%s: %s", d->dev.name,
				    smcr_err_msg(SMCR_E_EMU_HELLO_TIMEOUT));
			emu_pend_close(d, p, -1, 0);
		} else if (p->deadline < next) {
			next = p->deadline;
		}
		p = pn;
	}
	struct emu_linger *l = d->linger;
	while (l) {
		struct emu_linger *ln = l->next;
		if (l->deadline <= now) {
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };
			(void)setsockopt(l->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
			emu_linger_close(d, l);
		} else if (l->deadline < next) {
			next = l->deadline;
		}
		l = ln;
	}
	return next;
}

void emu_conn_port_down(struct emu_dev *d)
{
	while (d->pend)
		emu_pend_close(d, d->pend, d->pend->parked ? EMU_HS_PORT_DOWN : -1, 0);
}

void emu_conn_fini(struct emu_dev *d)
{
	while (d->pend)
		emu_pend_close(d, d->pend, -1, 0);
	while (d->linger)
		emu_linger_close(d, d->linger);
}
