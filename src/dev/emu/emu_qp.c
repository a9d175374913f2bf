/* emu_qp.c: RC queue pairs of the emu provider: the state machine (IB spec 10.3.1 via
 * dev_qp_check_modify), posting, the send side (frames, transmit queue, ACK-driven
 * completion, transport timer) and the error transition every fatal path goes through
 * (dev.h semantics 4, 5, 8). The receive side of a connection is emu_rx.c; connections
 * themselves are made and closed by the I/O thread (emu_conn.c). Locks: emu_int.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "dev/emu/emu_int.h"
#include "util/clock.h"
#include "util/log.h"

/* ---- table ------------------------------------------------------------------------- */

struct emu_qp *emu_qp_lookup_locked(struct emu_dev *d, uint32_t qpn)
{
	for (struct emu_qp *q = d->qpt[qpn % EMU_QP_HASH]; q; q = q->hnext)
		if (q->qp.qp_num == qpn)
			return q;
	return NULL;
}

static void emu_qp_set_state_locked(struct emu_qp *q, enum dev_qp_state s)
{
	q->state = s;
	/* release: readers of the hint (dev.h) see the state after what led to it. */
	atomic_store_explicit(&q->qp.state, (int)s, memory_order_release);
}

void emu_qp_work_locked(struct emu_qp *q, unsigned bits)
{
	struct emu_dev *d = q->dev;
	q->want |= bits;
	pthread_mutex_lock(&d->work_lock);
	if (!q->in_work) {
		q->in_work = 1;
		q->wnext = d->work_head;
		d->work_head = q;
	}
	pthread_mutex_unlock(&d->work_lock);
	emu_dev_kick(d);
}

/* ---- create / destroy --------------------------------------------------------------- */

int emu_create_qp(struct dev_pd *pd, const struct dev_qp_init_attr *attr, struct dev_qp **out)
{
	struct emu_dev *d = EMU_DEV(pd->dev);
	const struct dev_qp_cap *c = &attr->cap;
	if (c->max_send_wr > EMU_MAX_QP_WR || c->max_recv_wr > EMU_MAX_QP_WR ||
	    c->max_send_sge > EMU_MAX_SGE || c->max_recv_sge > EMU_MAX_SGE ||
	    c->max_inline_data > EMU_MAX_INLINE)
		return -SMCR_E_DEV_BAD_ATTR;
	struct dev_qp_cap g = *c;
	if (!g.max_send_wr)
		g.max_send_wr = 1;
	if (!g.max_recv_wr)
		g.max_recv_wr = 1;
	struct emu_qp *q = calloc(1, sizeof *q);
	if (!q)
		return -SMCR_E_NOMEM;
	q->sq = calloc(g.max_send_wr, sizeof *q->sq);
	q->rq = calloc(g.max_recv_wr, sizeof *q->rq);
	if (!q->sq || !q->rq) {
		free(q->sq);
		free(q->rq);
		free(q);
		return -SMCR_E_NOMEM;
	}
	pthread_mutex_init(&q->lock, NULL);
	q->ep.kind = EMU_EP_QP;
	q->dev = d;
	q->fd = -1;
	q->rnr_deadline = UINT64_MAX;
	q->sq_sig_all = attr->sq_sig_all;

	pthread_mutex_lock(&d->lock);
	if (d->nqp >= EMU_MAX_QP) {
		pthread_mutex_unlock(&d->lock);
		pthread_mutex_destroy(&q->lock);
		free(q->sq);
		free(q->rq);
		free(q);
		return -SMCR_E_DEV_LIMIT;
	}
	/* 24-bit QPNs, never 0, not reused while in use; the start is random per device so a
	 * late HELLO for a destroyed QP rarely meets a new QP of the same number. */
	uint32_t qpn;
	do {
		qpn = d->qpn_next;
		d->qpn_next = (d->qpn_next + 1) & 0xffffffu;
		if (!d->qpn_next)
			d->qpn_next = 1;
	} while (emu_qp_lookup_locked(d, qpn));
	dev_qp_init(&q->qp, pd, attr, qpn, &g);
	if (emu_cq_attach_qp(EMU_CQ(attr->send_cq), q, EMU_CQ_SEND) ||
	    emu_cq_attach_qp(EMU_CQ(attr->recv_cq), q, EMU_CQ_RECV)) {
		emu_cq_forget_qp(EMU_CQ(attr->send_cq), q);
		emu_cq_forget_qp(EMU_CQ(attr->recv_cq), q);
		pthread_mutex_unlock(&d->lock);
		pthread_mutex_destroy(&q->lock);
		free(q->sq);
		free(q->rq);
		free(q);
		return -SMCR_E_NOMEM;
	}
	q->hnext = d->qpt[qpn % EMU_QP_HASH];
	d->qpt[qpn % EMU_QP_HASH] = q;
	d->nqp++;
	pthread_mutex_unlock(&d->lock);
	*out = &q->qp;
	return 0;
}

int emu_destroy_qp(struct dev_qp *qp)
{
	struct emu_qp *q = EMU_QP(qp);
	struct emu_dev *d = q->dev;

	/* Out of the table first: no HELLO, port event or timer scan finds it any more. */
	pthread_mutex_lock(&d->lock);
	struct emu_qp **pp = &d->qpt[qp->qp_num % EMU_QP_HASH];
	while (*pp && *pp != q)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = q->hnext;
	d->nqp--;
	pthread_mutex_unlock(&d->lock);

	/* Posted WRs are dropped without completions (verbs). The I/O thread closes the
	 * connection (the peer sees it end: retry exceeded) and lets go of the QP. */
	pthread_mutex_lock(&q->lock);
	q->sq_n = 0;
	q->rq_n = 0;
	if (q->state != DEV_QPS_ERR)
		emu_qp_set_state_locked(q, DEV_QPS_ERR);
	if (q->cs != EMU_CS_NONE)
		q->cs = EMU_CS_DOWN;
	emu_qp_txq_clear_locked(q, 0);
	emu_qp_work_locked(q, EMU_W_DESTROY);
	pthread_mutex_unlock(&q->lock);

	pthread_mutex_lock(&d->work_lock);
	while (!q->io_released)
		pthread_cond_wait(&d->work_cv, &d->work_lock);
	pthread_mutex_unlock(&d->work_lock);

	emu_event_drop_qp(d, qp->qp_num);
	emu_cq_forget_qp(EMU_CQ(qp->send_cq), q);
	emu_cq_forget_qp(EMU_CQ(qp->recv_cq), q);
	emu_qp_txq_clear_locked(q, 0);	/* nothing can add to it any more */
	pthread_mutex_destroy(&q->lock);
	free(q->rx.buf);
	free(q->sq);
	free(q->rq);
	free(q);
	return 0;
}

/* ---- completions and the error transition ------------------------------------------- */

static void emu_qp_send_wc_locked(struct emu_qp *q, const struct emu_swr *w,
				  enum dev_wc_status st)
{
	struct dev_wc wc = {
		.wr_id = w->wr_id,
		.status = st,
		.opcode = w->opcode,
		.byte_len = w->len,
		.qp_num = q->qp.qp_num,
	};
	emu_cq_push(EMU_CQ(q->qp.send_cq), &wc, 0, q, w->idx + 1);
}

static void emu_qp_recv_flush_locked(struct emu_qp *q)
{
	while (q->rq_n) {
		struct emu_rwr *r = &q->rq[q->rq_head];
		struct dev_wc wc = {
			.wr_id = r->wr_id,
			.status = DEV_WC_WR_FLUSH_ERR,
			.opcode = DEV_WC_RECV,
			.qp_num = q->qp.qp_num,
		};
		emu_cq_push(EMU_CQ(q->qp.recv_cq), &wc, 0, NULL, 0);
		q->rq_head = (q->rq_head + 1) % q->qp.cap.max_recv_wr;
		q->rq_n--;
	}
	emu_qp_rq_changed_locked(q);
}

void emu_qp_txq_clear_locked(struct emu_qp *q, int keep_ctrl)
{
	struct emu_txf **pp = &q->txq;
	q->txq_tail = NULL;
	while (*pp) {
		struct emu_txf *f = *pp;
		/* A frame partly on the wire stays, or the stream would be cut mid-frame. */
		if ((keep_ctrl && f->ctrl) || (keep_ctrl && f->off)) {
			q->txq_tail = f;
			pp = &f->next;
			continue;
		}
		*pp = f->next;
		free(f);
	}
}

void emu_qp_error_locked(struct emu_qp *q, int err_idx, enum dev_wc_status status, int event,
			 int why)
{
	if (q->state == DEV_QPS_ERR)
		return;
	if (event >= 0)
		LOG_INFO("emu", "%s: QP %u to ERR: %s (%s)", q->dev->dev.name, q->qp.qp_num,
			 smcr_err_msg(why), dev_wc_status_str(status));
	emu_qp_set_state_locked(q, DEV_QPS_ERR);
	/* dev.h 4: every posted WR completes, in order, signaled or not. */
	for (uint32_t i = 0; i < q->sq_n; i++) {
		struct emu_swr *w = &q->sq[(q->sq_head + i) % q->qp.cap.max_send_wr];
		emu_qp_send_wc_locked(q, w, (int)i == err_idx ? status : DEV_WC_WR_FLUSH_ERR);
	}
	q->sq_n = 0;
	emu_qp_sq_changed_locked(q);
	emu_qp_recv_flush_locked(q);
	q->rx_parked = 0;
	q->rnr_deadline = UINT64_MAX;
	emu_qp_txq_clear_locked(q, 1);
	if (q->cs != EMU_CS_NONE) {
		q->cs = EMU_CS_DOWN;
	}
	emu_qp_work_locked(q, EMU_W_CLOSE);
	if (event >= 0)
		emu_event_push(q->dev, (enum dev_event_type)event, q->qp.qp_num, q->qp.qp_context);
}

void emu_qp_ack_locked(struct emu_qp *q, uint32_t seq)
{
	while (q->sq_n) {
		struct emu_swr *w = &q->sq[q->sq_head];
		if (emu_seq_after(w->seq, seq))
			break;
		if (w->signaled)
			emu_qp_send_wc_locked(q, w, DEV_WC_SUCCESS);
		q->sq_head = (q->sq_head + 1) % q->qp.cap.max_send_wr;
		q->sq_n--;
	}
	emu_qp_sq_changed_locked(q);
	if (emu_seq_after(seq, q->acked_seq))
		q->acked_seq = seq;
	q->progress_ns = smcr_now_ns();
	q->rnr_wait = 0;
}

/* ---- modify / query ----------------------------------------------------------------- */

static uint64_t emu_ack_timeout_ns(uint8_t timeout, uint8_t retry_cnt)
{
	if (timeout == 0 || timeout > 31)
		return EMU_ACK_TIMEOUT_MAX_NS;
	/* 4.096 us * 2^timeout, times (retry_cnt + 1) tries (IB spec 9.7.6.1.3). */
	uint64_t one = 4096ull << timeout;	/* ns; fits: 4096 << 31 < 2^44 */
	uint64_t t = one * (uint64_t)(retry_cnt + 1);
	if (t < EMU_ACK_TIMEOUT_MIN_NS)
		t = EMU_ACK_TIMEOUT_MIN_NS;
	if (t > EMU_ACK_TIMEOUT_MAX_NS)
		t = EMU_ACK_TIMEOUT_MAX_NS;
	return t;
}

/* Which side connects: the one whose (GID, QPN) sorts first. Both sides compute the same
 * answer from the same two pairs, so exactly one connects whatever the RTR order. */
static int emu_cmp_ends(const struct dev_gid *ga, uint32_t qa, const struct dev_gid *gb,
			uint32_t qb)
{
	int c = memcmp(ga->raw, gb->raw, DEV_GID_LEN);
	if (c)
		return c < 0 ? -1 : 1;
	return qa < qb ? -1 : qa > qb ? 1 : 0;
}

static void emu_qp_reset_locked(struct emu_qp *q)
{
	/* RESET drops WRs without completions: their slots are free at once. */
	atomic_store(&q->sq_retired, q->sq_posted);
	q->sq_n = 0;
	emu_qp_sq_changed_locked(q);
	q->sq_head = 0;
	q->rq_n = 0;
	q->rq_head = 0;
	emu_qp_rq_changed_locked(q);
	q->tx_seq = 0;
	q->acked_seq = 0;
	q->rx_seq = 0;
	q->ack_due = 0;
	q->rx_parked = 0;
	q->rnr_sent = 0;
	q->rnr_wait = 0;
	q->rnr_deadline = UINT64_MAX;
	q->ack_timeout_ns = 0;
	q->connector = 0;
	memset(&q->ah, 0, sizeof q->ah);
	q->dest_qpn = 0;
	emu_qp_txq_clear_locked(q, 0);
	q->hs_len = q->hs_off = 0;
	if (q->fd >= 0 || q->cs != EMU_CS_NONE) {
		q->cs = EMU_CS_DOWN;
		emu_qp_work_locked(q, EMU_W_CLOSE);
	}
}

int emu_modify_qp(struct dev_qp *qp, const struct dev_qp_attr *a, unsigned mask)
{
	struct emu_qp *q = EMU_QP(qp);
	struct emu_dev *d = q->dev;
	int rc;

	pthread_mutex_lock(&q->lock);
	rc = dev_qp_check_modify(q->state, a, mask);
	if (rc)
		goto out;
	enum dev_qp_state to = a->qp_state;
	/* Validate what this provider needs before changing anything. */
	if ((mask & DEV_QP_PORT) && a->port_num != 1) {
		rc = -SMCR_E_DEV_BAD_ATTR;
		goto out;
	}
	if (to == DEV_QPS_RTR) {
		struct sockaddr_storage ss;
		socklen_t sl;
		if (a->ah_attr.sgid_index != 0 || (a->ah_attr.port_num && a->ah_attr.port_num != 1) ||
		    emu_gid_to_sockaddr(d, &a->ah_attr.dgid, &ss, &sl) ||
		    emu_cmp_ends(&d->gid, qp->qp_num, &a->ah_attr.dgid, a->dest_qp_num) == 0) {
			rc = -SMCR_E_DEV_BAD_ATTR;
			goto out;
		}
	}
	if (mask & DEV_QP_ACCESS_FLAGS)
		q->access = a->qp_access_flags;
	if (mask & DEV_QP_PORT)
		q->port_num = a->port_num;
	if (mask & DEV_QP_PKEY_INDEX)
		q->pkey_index = a->pkey_index;
	if (mask & DEV_QP_AV)
		q->ah = a->ah_attr;
	if (mask & DEV_QP_PATH_MTU)
		q->path_mtu = a->path_mtu;
	if (mask & DEV_QP_DEST_QPN)
		q->dest_qpn = a->dest_qp_num;
	if (mask & DEV_QP_RQ_PSN)
		q->rq_psn = a->rq_psn;
	if (mask & DEV_QP_SQ_PSN)
		q->sq_psn = a->sq_psn;
	if (mask & DEV_QP_TIMEOUT)
		q->timeout = a->timeout;
	if (mask & DEV_QP_RETRY_CNT)
		q->retry_cnt = a->retry_cnt;
	if (mask & DEV_QP_RNR_RETRY)
		q->rnr_retry = a->rnr_retry;
	if (mask & DEV_QP_MIN_RNR_TIMER)
		q->min_rnr_timer = a->min_rnr_timer;
	if (mask & DEV_QP_MAX_QP_RD_ATOMIC)
		q->max_rd_atomic = a->max_rd_atomic;
	if (mask & DEV_QP_MAX_DEST_RD_ATOMIC)
		q->max_dest_rd_atomic = a->max_dest_rd_atomic;

	switch (to) {
	case DEV_QPS_RESET:
		emu_qp_reset_locked(q);
		emu_qp_set_state_locked(q, DEV_QPS_RESET);
		break;
	case DEV_QPS_INIT:
		emu_qp_set_state_locked(q, DEV_QPS_INIT);
		break;
	case DEV_QPS_RTR:
		q->connector = emu_cmp_ends(&d->gid, qp->qp_num, &q->ah.dgid, q->dest_qpn) < 0;
		emu_qp_set_state_locked(q, DEV_QPS_RTR);
		emu_qp_work_locked(q, q->connector ? EMU_W_CONNECT : EMU_W_PAIR);
		break;
	case DEV_QPS_RTS:
		q->ack_timeout_ns = emu_ack_timeout_ns(q->timeout, q->retry_cnt);
		emu_qp_set_state_locked(q, DEV_QPS_RTS);
		break;
	case DEV_QPS_ERR:
		/* Explicit: everything flushes, no event (dev.h). */
		emu_qp_error_locked(q, -1, DEV_WC_WR_FLUSH_ERR, -1, 0);
		break;
	}
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int emu_query_qp(struct dev_qp *qp, struct dev_qp_attr *a)
{
	struct emu_qp *q = EMU_QP(qp);
	pthread_mutex_lock(&q->lock);
	a->qp_state = q->state;
	a->qp_access_flags = q->access;
	a->pkey_index = q->pkey_index;
	a->port_num = q->port_num;
	a->ah_attr = q->ah;
	a->path_mtu = q->path_mtu;
	a->dest_qp_num = q->dest_qpn;
	a->rq_psn = q->rq_psn;
	a->sq_psn = q->sq_psn;
	a->timeout = q->timeout;
	a->retry_cnt = q->retry_cnt;
	a->rnr_retry = q->rnr_retry;
	a->min_rnr_timer = q->min_rnr_timer;
	a->max_rd_atomic = q->max_rd_atomic;
	a->max_dest_rd_atomic = q->max_dest_rd_atomic;
	pthread_mutex_unlock(&q->lock);
	return 0;
}

/* ---- transmit ----------------------------------------------------------------------- */

void emu_qp_epoll_update_locked(struct emu_qp *q)
{
	if (q->fd < 0)
		return;
	uint32_t ev = EPOLLRDHUP;
	if (q->cs == EMU_CS_CONNECTING) {
		ev |= EPOLLOUT;
	} else {
		if (!q->stalled && !q->rx_parked)
			ev |= EPOLLIN;
		if (q->tx_blocked && !q->stalled)
			ev |= EPOLLOUT;
	}
	if (ev == q->ep_events)
		return;
	struct epoll_event e = { .events = ev, .data.ptr = &q->ep };
	if (epoll_ctl(q->dev->epfd, EPOLL_CTL_MOD, q->fd, &e) == 0)
		q->ep_events = ev;
	else
		LOG_ERR("emu", "epoll_ctl(MOD) of QP %u: %s", q->qp.qp_num, strerror(errno));
}

/* Writes bytes without blocking: >= 0 bytes written (0: would block), or -1 on a socket
 * error (the connection is gone). */
static ssize_t emu_send_some(int fd, struct iovec *iov, int n)
{
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
	for (;;) {
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w >= 0)
			return w;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return -1;
	}
}

#define EMU_TX_IOV 16

void emu_qp_tx_flush_locked(struct emu_qp *q)
{
	if (q->fd < 0 || q->stalled || q->cs == EMU_CS_CONNECTING || q->cs == EMU_CS_NONE)
		return;
	q->tx_blocked = 0;
	/* The handshake frame goes first; data waits for the pairing (cs UP). */
	while (q->hs_off < q->hs_len) {
		struct iovec iov = { q->hs + q->hs_off, q->hs_len - q->hs_off };
		ssize_t w = emu_send_some(q->fd, &iov, 1);
		if (w < 0)
			goto broken;
		if (w == 0) {
			q->tx_blocked = 1;
			goto out;
		}
		q->hs_off += (uint32_t)w;
	}
	if (q->cs != EMU_CS_UP && q->cs != EMU_CS_DOWN)
		goto out;
	uint64_t now = q->delay_ns ? smcr_now_ns() : 0;
	while (q->txq) {
		struct iovec iov[EMU_TX_IOV];
		int n = 0;
		for (struct emu_txf *f = q->txq; f && n < EMU_TX_IOV; f = f->next) {
			if (f->not_before > now)
				break;	/* the timer scan sends it when due */
			iov[n].iov_base = f->data + f->off;
			iov[n].iov_len = f->len - f->off;
			n++;
		}
		if (!n)
			break;
		ssize_t w = emu_send_some(q->fd, iov, n);
		if (w < 0)
			goto broken;
		if (w == 0) {
			q->tx_blocked = 1;
			break;
		}
		size_t left = (size_t)w;
		while (left && q->txq) {
			struct emu_txf *f = q->txq;
			size_t k = f->len - f->off;
			if (left < k) {
				f->off += (uint32_t)left;
				left = 0;
				break;
			}
			left -= k;
			q->txq = f->next;
			if (!q->txq)
				q->txq_tail = NULL;
			free(f);
		}
		if (q->txq && q->txq->off) {
			q->tx_blocked = 1;	/* partial write: the socket is full */
			break;
		}
	}
out:
	emu_qp_epoll_update_locked(q);
	return;
broken:
	q->tx_blocked = 0;
	if (q->cs == EMU_CS_DOWN) {
		emu_qp_txq_clear_locked(q, 0);
		return;	/* already closing: the frames were best effort */
	}
	emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL, SMCR_E_EMU_PEER_GONE);
}

static void emu_qp_txq_append_locked(struct emu_qp *q, struct emu_txf *f)
{
	f->next = NULL;
	f->not_before = q->delay_ns ? smcr_now_ns() + q->delay_ns : 0;
	if (q->txq_tail)
		q->txq_tail->next = f;
	else
		q->txq = f;
	q->txq_tail = f;
}

int emu_qp_queue_ctrl_locked(struct emu_qp *q, const struct emu_frame *fr)
{
	uint32_t len = emu_frame_len(fr);
	struct emu_txf *f = malloc(sizeof *f + len);
	if (!f)
		return -SMCR_E_NOMEM;
	struct wcur w = wcur_make(f->data, len);
	int rc = emu_frame_encode(&w, fr, NULL);
	if (rc) {
		free(f);
		return rc;
	}
	f->len = len;
	f->off = 0;
	f->ctrl = 1;
	emu_qp_txq_append_locked(q, f);
	return 0;
}

/* Copies the WR's data into dst: inline data straight from the addresses, otherwise
 * checked against the local MR table (lkey, bounds, PD). 0 or -SMCR_E_EMU_LKEY. */
static int emu_gather_locked(struct emu_qp *q, const struct dev_send_wr *wr, uint8_t *dst)
{
	if (wr->send_flags & DEV_SEND_INLINE) {
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(dst, (const void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			dst += wr->sg_list[i].length;
		}
		return 0;
	}
	struct emu_dev *d = q->dev;
	int rc = 0;
	pthread_rwlock_rdlock(&d->mr_lock);
	for (int i = 0; i < wr->num_sge && !rc; i++) {
		const struct dev_sge *s = &wr->sg_list[i];
		if (!s->length)
			continue;
		struct emu_mr *m = emu_mr_lookup_locked(d, s->lkey);
		uintptr_t lo = m ? (uintptr_t)m->mr.addr : 0;
		if (!m || m->mr.pd != q->qp.pd || s->addr < lo ||
		    s->length > m->mr.length || s->addr - lo > m->mr.length - s->length) {
			rc = -SMCR_E_EMU_LKEY;
			break;
		}
		memcpy(dst, (const void *)(uintptr_t)s->addr, s->length);
		dst += s->length;
	}
	pthread_rwlock_unlock(&d->mr_lock);
	return rc;
}

/* Builds the data frame of one WR and queues it. */
static int emu_post_one_locked(struct emu_qp *q, const struct dev_send_wr *wr, uint64_t total)
{
	struct emu_frame fr;
	memset(&fr, 0, sizeof fr);
	switch (wr->opcode) {
	case DEV_WR_RDMA_WRITE:
		fr.type = EMU_F_WRITE;
		break;
	case DEV_WR_RDMA_WRITE_WITH_IMM:
		fr.type = EMU_F_WRITE_IMM;
		break;
	case DEV_WR_SEND:
		fr.type = EMU_F_SEND;
		break;
	}
	if (fr.type != EMU_F_WRITE) {
		if (wr->send_flags & DEV_SEND_SOLICITED)
			fr.flags |= EMU_FL_SOLICITED;
		fr.flags |= (uint8_t)((q->rnr_retry & 7u) << EMU_FL_RNR_SHIFT);
	}
	fr.payload_len = (uint32_t)total;
	fr.u.data.seq = q->tx_seq + 1;
	fr.u.data.raddr = wr->rdma.remote_addr;
	fr.u.data.rkey = wr->rdma.rkey;
	fr.u.data.imm = wr->imm_data;
	uint32_t len = emu_frame_len(&fr);
	struct emu_txf *f = malloc(sizeof *f + len);
	if (!f)
		return -SMCR_E_NOMEM;
	struct wcur w = wcur_make(f->data, len);
	int rc = emu_frame_encode(&w, &fr, NULL);
	if (rc) {
		free(f);
		return rc;
	}
	f->len = len;
	f->off = 0;
	f->ctrl = 0;

	uint32_t idx = (q->sq_head + q->sq_n) % q->qp.cap.max_send_wr;
	struct emu_swr *s = &q->sq[idx];
	s->wr_id = wr->wr_id;
	s->idx = q->sq_posted++;
	s->seq = fr.u.data.seq;
	s->len = (uint32_t)total;
	s->opcode = fr.type == EMU_F_SEND ? DEV_WC_SEND : DEV_WC_RDMA_WRITE;
	s->signaled = (wr->send_flags & DEV_SEND_SIGNALED) || q->sq_sig_all;
	int was_idle = q->sq_n == 0;
	q->sq_n++;
	emu_qp_sq_changed_locked(q);

	rc = emu_gather_locked(q, wr, f->data + (len - (uint32_t)total));
	if (rc) {
		free(f);
		/* A local protection error is reported by a completion, as verbs does; the QP
		 * goes to ERR and every other outstanding WR flushes. */
		emu_qp_error_locked(q, (int)q->sq_n - 1, DEV_WC_LOC_PROT_ERR, DEV_EVENT_QP_FATAL,
				    rc);
		return 0;
	}
	q->tx_seq = fr.u.data.seq;
	emu_qp_txq_append_locked(q, f);
	if (was_idle) {
		q->progress_ns = smcr_now_ns();
		/* Timer protocol (emu_io.c): kick if the armed timer fires after our deadline. */
		uint64_t dl = q->progress_ns + q->ack_timeout_ns;
		if (dl < atomic_load_explicit(&q->dev->timer_at, memory_order_acquire))
			emu_dev_kick(q->dev);
	}
	return 0;
}

int emu_post_send(struct dev_qp *qp, const struct dev_send_wr *wr,
		  const struct dev_send_wr **bad_wr)
{
	struct emu_qp *q = EMU_QP(qp);
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	for (; wr; wr = wr->next) {
		uint64_t total = 0;
		if (wr->opcode != DEV_WR_RDMA_WRITE && wr->opcode != DEV_WR_RDMA_WRITE_WITH_IMM &&
		    wr->opcode != DEV_WR_SEND) {
			rc = -SMCR_E_DEV_BAD_WR;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge ||
		    (wr->num_sge && !wr->sg_list)) {
			rc = -SMCR_E_DEV_BAD_WR;
			break;
		}
		for (int i = 0; i < wr->num_sge; i++)
			total += wr->sg_list[i].length;
		if (total > EMU_MAX_MSG ||
		    ((wr->send_flags & DEV_SEND_INLINE) && total > qp->cap.max_inline_data)) {
			rc = -SMCR_E_DEV_BAD_WR;
			break;
		}
		if (q->state != DEV_QPS_RTS && q->state != DEV_QPS_ERR) {
			rc = -SMCR_E_DEV_BAD_STATE;
			break;
		}
		/* Slots free when completions are polled, as in verbs. */
		if (q->sq_posted - atomic_load(&q->sq_retired) >= qp->cap.max_send_wr) {
			rc = -SMCR_E_DEV_QUEUE_FULL;
			break;
		}
		if (q->state == DEV_QPS_ERR) {
			/* Accepted and flushed at once (dev.h 4). */
			struct emu_swr s = {
				.wr_id = wr->wr_id,
				.idx = q->sq_posted++,
				.len = (uint32_t)total,
				.opcode = wr->opcode == DEV_WR_SEND ? DEV_WC_SEND : DEV_WC_RDMA_WRITE,
			};
			emu_qp_send_wc_locked(q, &s, DEV_WC_WR_FLUSH_ERR);
			continue;
		}
		rc = emu_post_one_locked(q, wr, total);
		if (rc)
			break;
	}
	if (rc && bad_wr)
		*bad_wr = wr;
	if (q->state == DEV_QPS_RTS) {
		if (q->delay_ns || q->stalled)
			emu_qp_work_locked(q, EMU_W_TX);
		else if (q->cs == EMU_CS_UP)
			emu_qp_tx_flush_locked(q);
	}
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int emu_post_recv(struct dev_qp *qp, const struct dev_recv_wr *wr,
		  const struct dev_recv_wr **bad_wr)
{
	struct emu_qp *q = EMU_QP(qp);
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_recv_sge ||
		    (wr->num_sge && !wr->sg_list)) {
			rc = -SMCR_E_DEV_BAD_WR;
			break;
		}
		if (q->state == DEV_QPS_RESET) {
			rc = -SMCR_E_DEV_BAD_STATE;
			break;
		}
		if (q->rq_n == qp->cap.max_recv_wr) {
			rc = -SMCR_E_DEV_QUEUE_FULL;
			break;
		}
		if (q->state == DEV_QPS_ERR) {
			struct dev_wc wc = {
				.wr_id = wr->wr_id,
				.status = DEV_WC_WR_FLUSH_ERR,
				.opcode = DEV_WC_RECV,
				.qp_num = qp->qp_num,
			};
			emu_cq_push(EMU_CQ(qp->recv_cq), &wc, 0, NULL, 0);
			continue;
		}
		struct emu_rwr *r = &q->rq[(q->rq_head + q->rq_n) % qp->cap.max_recv_wr];
		r->wr_id = wr->wr_id;
		r->num_sge = wr->num_sge;
		r->len = 0;
		for (int i = 0; i < wr->num_sge; i++) {
			r->sge[i] = wr->sg_list[i];
			r->len += wr->sg_list[i].length;
		}
		q->rq_n++;
	}
	emu_qp_rq_changed_locked(q);
	if (rc && bad_wr)
		*bad_wr = wr;
	/* A SEND waiting for a receive WR (RNR) can go on now: the I/O thread resumes. */
	if (q->rx_parked && q->rq_n)
		emu_qp_work_locked(q, EMU_W_RX);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* ---- timers -------------------------------------------------------------------------- */

uint64_t emu_qp_timers_locked(struct emu_qp *q, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	if (q->state == DEV_QPS_ERR || q->state == DEV_QPS_RESET)
		return next;
	/* Transport timer (dev.h 5): outstanding sends and no progress for ack_timeout. An RNR
	 * report from the peer stops it, as RNR NAKs restart the RC timer. */
	if (q->sq_n && !q->rnr_wait && q->ack_timeout_ns) {
		uint64_t dl = q->progress_ns +
			      (q->cs == EMU_CS_UP ? q->ack_timeout_ns : EMU_PAIR_TIMEOUT_NS);
		if (dl <= now && q->cs == EMU_CS_UP && q->fd >= 0 && !q->stalled && !q->rx_parked) {
			/* An ACK may be waiting in the socket, its epoll event not handled yet
			 * (another batch): look before declaring the peer silent. */
			emu_rx_pump_locked(q, 4);
			if (q->state == DEV_QPS_ERR)
				return UINT64_MAX;
			if (!q->sq_n || q->rnr_wait)
				goto rnr;
			dl = q->progress_ns + q->ack_timeout_ns;
		}
		if (dl <= now) {
			LOG_INFO("emu", "%s: QP %u: no progress for %llu ms (%s)", q->dev->dev.name,
				 q->qp.qp_num, (unsigned long long)((now - q->progress_ns) / 1000000),
				 q->cs == EMU_CS_UP ? "paired" : "not paired yet");
			emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL,
					    SMCR_E_TIMEDOUT);
			return UINT64_MAX;
		}
		next = dl;
	}
rnr:
	if (q->rx_parked && q->rnr_deadline != UINT64_MAX) {
		if (q->rnr_deadline <= now) {
			emu_rx_rnr_expired_locked(q);
			return UINT64_MAX;
		}
		if (q->rnr_deadline < next)
			next = q->rnr_deadline;
	}
	if (q->txq && !q->stalled && q->cs == EMU_CS_UP) {
		if (q->txq->not_before <= now)
			emu_qp_tx_flush_locked(q);
		if (q->txq && !q->tx_blocked && q->txq->not_before > now &&
		    q->txq->not_before < next)
			next = q->txq->not_before;
	}
	return next;
}
