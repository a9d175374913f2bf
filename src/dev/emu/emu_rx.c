/* emu_rx.c: the receive side of an emu QP connection, run by the device's I/O thread with
 * the QP lock held. Frames are decoded (emu_frame.c), then validated against this device's
 * state before anything is applied (STYLE.md 7):
 *   - data frames must come in sequence (one TCP stream per QP: dev.h 1, 2);
 *   - a WRITE must name an rkey of this device, in the QP's PD, with REMOTE_WRITE, and stay
 *     inside the MR, and the QP must accept remote writes; otherwise the sender gets a NAK
 *     (DEV_WC_REM_ACCESS_ERR) and both QPs go to ERR, as RC does (dev.h 3);
 *   - a SEND (or WRITE_IMM) needs a posted receive WR: without one the frame waits (RNR,
 *     dev.h 6) and the sender is told so; a SEND longer than the WR's buffers is refused
 *     (DEV_WC_LOC_LEN_ERR here, DEV_WC_REM_INV_REQ_ERR at the sender, dev.h 7);
 *   - ACK / NAK / RNR must name a frame that was sent and is not done.
 * Payloads stream from the receive buffer into memory chunk by chunk; each chunk re-checks
 * the MR under the MR lock, so a deregistered region is never written (dev.h dereg_mr).
 * Everything that violates the format or the sequence is a hostile or broken peer: the QP
 * goes to ERR and the connection is closed; the log line is rate limited. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "dev/emu/emu_int.h"
#include "util/clock.h"
#include "util/log.h"

/* An RDMA WRITE's payload lands in remote-writable memory the way a NIC's DMA would: the
 * program that owns the memory learns of it by a later message (the peer's CDC), and the
 * memory's earlier use is ordered before the peer's WRITE only through the peer process
 * (e.g. an RMB zeroed at attach, then announced by a CLC message over TCP), which
 * ThreadSanitizer cannot see across processes. Under TSan this copy is therefore not
 * recorded (it reported the zeroing of a pooled RMB against a WRITE that the CLC exchange
 * had ordered after it); everywhere else it is a plain memcpy. Receives into posted
 * buffers (emu_rx_recv) stay recorded: their order is visible (the posting lock). */
#if defined(__SANITIZE_THREAD__)
#define EMU_RX_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EMU_RX_TSAN 1
#endif
#endif
#ifdef EMU_RX_TSAN
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#endif

static void dma_write(void *dst, const void *src, size_t n)
{
#ifdef EMU_RX_TSAN
	AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
	memcpy(dst, src, n);
#ifdef EMU_RX_TSAN
	AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
}

/* IB spec table 45 (RNR NAK timer field), in units of 10 us; code 0 is the longest. */
static const uint32_t emu_rnr_10us[32] = {
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
	49152,
};

uint64_t emu_rnr_timer_ns(uint8_t code)
{
	return (uint64_t)emu_rnr_10us[code & 31] * 10000ull;
}

static void emu_rx_violation(struct emu_qp *q, int rc)
{
	SMCR_LOG_RL(SMCR_LOG_WARN, "emu", "%s: QP %u: peer violated the frame protocol: %s",
		    q->dev->dev.name, q->qp.qp_num, smcr_err_msg(rc));
	emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL, rc);
}

static void emu_rx_queue_ack_locked(struct emu_qp *q)
{
	if (!q->ack_due)
		return;
	struct emu_frame a = { .type = EMU_F_ACK };
	a.u.ack.seq = q->rx_seq;
	if (emu_qp_queue_ctrl_locked(q, &a) == 0)
		q->ack_due = 0;
}

/* Refuses data frame seq: ACK what was applied, NAK this one, then ERR (the NAK is sent
 * before the connection closes: emu_conn.c). */
static void emu_rx_nak(struct emu_qp *q, uint32_t seq, enum emu_nak_code code, int event,
		       int why)
{
	SMCR_LOG_RL(SMCR_LOG_INFO, "emu", "%s: QP %u refuses frame %u: %s", q->dev->dev.name,
		    q->qp.qp_num, seq, smcr_err_msg(why));
	emu_rx_queue_ack_locked(q);
	struct emu_frame n = { .type = EMU_F_NAK };
	n.u.nak.seq = seq;
	n.u.nak.code = (uint8_t)code;
	(void)emu_qp_queue_ctrl_locked(q, &n);	/* without memory the peer sees the close */
	emu_qp_error_locked(q, -1, DEV_WC_WR_FLUSH_ERR, event, why);
}

/* The checks of dev.h 3 for [addr, addr + len) under rkey. Caller holds mr_lock. */
static int emu_rx_check_write(struct emu_qp *q, uint32_t rkey, uint64_t addr, uint64_t len,
			      struct emu_mr **out)
{
	if (!(q->access & DEV_ACCESS_REMOTE_WRITE))
		return -SMCR_E_EMU_QP_ACCESS;
	struct emu_mr *m = emu_mr_lookup_locked(q->dev, rkey);
	if (!m)
		return -SMCR_E_EMU_RKEY;
	if (m->mr.pd != q->qp.pd)
		return -SMCR_E_EMU_PD;
	if (!(m->mr.access & DEV_ACCESS_REMOTE_WRITE))
		return -SMCR_E_EMU_MR_ACCESS;
	uint64_t lo = (uint64_t)(uintptr_t)m->mr.addr;
	if (addr < lo || len > m->mr.length || addr - lo > m->mr.length - len)
		return -SMCR_E_EMU_BOUNDS;
	*out = m;
	return 0;
}

/* A sequence number names an outstanding frame: after acked_seq, not after tx_seq. */
static int emu_rx_seq_outstanding(const struct emu_qp *q, uint32_t seq)
{
	return emu_seq_after(seq, q->acked_seq) && !emu_seq_after(seq, q->tx_seq);
}

static enum dev_wc_status emu_nak_status(uint8_t code)
{
	switch ((enum emu_nak_code)code) {
	case EMU_NAK_REM_ACCESS: return DEV_WC_REM_ACCESS_ERR;
	case EMU_NAK_REM_INV_REQ: return DEV_WC_REM_INV_REQ_ERR;
	case EMU_NAK_RNR_EXC: return DEV_WC_RNR_RETRY_EXC_ERR;
	case EMU_NAK_REM_OP: return DEV_WC_REM_OP_ERR;
	}
	return DEV_WC_REM_OP_ERR;
}

/* Parks a SEND/WRITE_IMM that found no receive WR (RNR, dev.h 6). */
static void emu_rx_park(struct emu_qp *q, const struct emu_frame *f)
{
	q->rx_parked = 1;
	if (!q->rnr_sent || q->rnr_seq != f->u.data.seq) {
		uint8_t retry = (uint8_t)((f->flags & EMU_FL_RNR_MASK) >> EMU_FL_RNR_SHIFT);
		q->rnr_seq = f->u.data.seq;
		q->rnr_sent = 1;
		/* The sender retries every RNR timer period, rnr_retry times, 7 = forever. */
		q->rnr_deadline = retry == 7 ? UINT64_MAX
					     : smcr_now_ns() + (uint64_t)(retry + 1) *
								 emu_rnr_timer_ns(q->min_rnr_timer);
		emu_rx_queue_ack_locked(q);
		struct emu_frame r = { .type = EMU_F_RNR };
		r.u.ack.seq = f->u.data.seq;
		(void)emu_qp_queue_ctrl_locked(q, &r);
	}
	emu_qp_epoll_update_locked(q);
}

void emu_rx_rnr_expired_locked(struct emu_qp *q)
{
	emu_rx_nak(q, q->rnr_seq, EMU_NAK_RNR_EXC, DEV_EVENT_QP_FATAL, SMCR_E_EMU_RNR);
}

/* Starts a frame whose header and fixed part are decoded. Returns 0 when consumed (data
 * frames: payload follows), 1 when the frame must wait (RNR), -1 when the QP went to ERR. */
static int emu_rx_begin(struct emu_qp *q, const struct emu_frame *f)
{
	struct emu_dev *d = q->dev;

	if (q->cs == EMU_CS_HELLO) {
		if (f->type != EMU_F_HELLO_ACK) {
			emu_rx_violation(q, -SMCR_E_EMU_UNEXPECTED);
			return -1;
		}
		if (f->u.hello_ack.status != EMU_HS_OK || f->u.hello_ack.qpn != q->dest_qpn) {
			SMCR_LOG_RL(SMCR_LOG_INFO, "emu", "%s: QP %u: peer refused pairing (status %u)",
				    d->dev.name, q->qp.qp_num, f->u.hello_ack.status);
			emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL,
					    SMCR_E_EMU_HELLO_REFUSED);
			return -1;
		}
		q->cs = EMU_CS_UP;
		q->progress_ns = smcr_now_ns();	/* the transport timer starts with the link */
		LOG_DBG("emu", "%s: QP %u paired with QP %u (connector)", d->dev.name,
			q->qp.qp_num, q->dest_qpn);
		emu_qp_tx_flush_locked(q);
		return 0;
	}

	switch (f->type) {
	case EMU_F_HELLO:
	case EMU_F_HELLO_ACK:
		emu_rx_violation(q, -SMCR_E_EMU_UNEXPECTED);
		return -1;
	case EMU_F_ACK:
		if (!emu_rx_seq_outstanding(q, f->u.ack.seq)) {
			emu_rx_violation(q, -SMCR_E_EMU_ACK_SEQ);
			return -1;
		}
		emu_qp_ack_locked(q, f->u.ack.seq);
		return 0;
	case EMU_F_RNR:
		if (!emu_rx_seq_outstanding(q, f->u.ack.seq)) {
			emu_rx_violation(q, -SMCR_E_EMU_ACK_SEQ);
			return -1;
		}
		emu_qp_ack_locked(q, f->u.ack.seq - 1);
		q->rnr_wait = 1;
		return 0;
	case EMU_F_NAK:
		if (!emu_rx_seq_outstanding(q, f->u.nak.seq)) {
			emu_rx_violation(q, -SMCR_E_EMU_ACK_SEQ);
			return -1;
		}
		emu_qp_ack_locked(q, f->u.nak.seq - 1);
		emu_qp_error_locked(q, 0, emu_nak_status(f->u.nak.code), DEV_EVENT_QP_FATAL,
				    SMCR_E_EMU_NAK);
		return -1;
	case EMU_F_WRITE:
	case EMU_F_WRITE_IMM:
	case EMU_F_SEND:
		break;
	}

	/* Data frame. */
	if (f->u.data.seq != q->rx_seq + 1) {
		emu_rx_violation(q, -SMCR_E_EMU_SEQ);
		return -1;
	}
	if (f->type != EMU_F_SEND && f->payload_len) {
		struct emu_mr *m;
		pthread_rwlock_rdlock(&d->mr_lock);
		int rc = emu_rx_check_write(q, f->u.data.rkey, f->u.data.raddr, f->payload_len, &m);
		pthread_rwlock_unlock(&d->mr_lock);
		if (rc) {
			emu_rx_nak(q, f->u.data.seq, EMU_NAK_REM_ACCESS, DEV_EVENT_QP_ACCESS_ERR, rc);
			return -1;
		}
	}
	if (f->type != EMU_F_WRITE) {
		if (!q->rq_n) {
			emu_rx_park(q, f);
			return 1;
		}
		struct emu_rwr *r = &q->rq[q->rq_head];
		if (f->type == EMU_F_SEND && f->payload_len > r->len) {
			struct dev_wc wc = {
				.wr_id = r->wr_id,
				.status = DEV_WC_LOC_LEN_ERR,
				.opcode = DEV_WC_RECV,
				.qp_num = q->qp.qp_num,
				.src_qp = q->dest_qpn,
			};
			q->rq_head = (q->rq_head + 1) % q->qp.cap.max_recv_wr;
			q->rq_n--;
			emu_qp_rq_changed_locked(q);
			emu_cq_push(EMU_CQ(q->qp.recv_cq), &wc, 0, NULL, 0);
			emu_rx_nak(q, f->u.data.seq, EMU_NAK_REM_INV_REQ, DEV_EVENT_QP_REQ_ERR,
				   SMCR_E_EMU_RECV_LEN);
			return -1;
		}
	}
	q->rx_parked = 0;
	q->rnr_sent = 0;
	q->rnr_deadline = UINT64_MAX;
	q->rx.f = *f;
	q->rx.done = 0;
	q->rx.in_frame = 1;
	return 0;
}

/* Scatters n payload bytes of a SEND into the head receive WR from offset off. */
static int emu_rx_scatter(struct emu_qp *q, const uint8_t *src, uint32_t n, uint64_t off)
{
	struct emu_dev *d = q->dev;
	struct emu_rwr *r = &q->rq[q->rq_head];
	int rc = 0;
	pthread_rwlock_rdlock(&d->mr_lock);
	for (int i = 0; i < r->num_sge && n; i++) {
		const struct dev_sge *s = &r->sge[i];
		if (off >= s->length) {
			off -= s->length;
			continue;
		}
		uint32_t k = (uint32_t)(s->length - off) < n ? (uint32_t)(s->length - off) : n;
		struct emu_mr *m = emu_mr_lookup_locked(d, s->lkey);
		uint64_t lo = m ? (uint64_t)(uintptr_t)m->mr.addr : 0;
		uint64_t a = s->addr + off;
		if (!m || m->mr.pd != q->qp.pd || !(m->mr.access & DEV_ACCESS_LOCAL_WRITE) ||
		    a < lo || k > m->mr.length || a - lo > m->mr.length - k) {
			rc = -SMCR_E_EMU_LKEY;
			break;
		}
		memcpy((void *)(uintptr_t)a, src, k);
		src += k;
		n -= k;
		off = 0;
	}
	pthread_rwlock_unlock(&d->mr_lock);
	return rc;
}

static int emu_rx_copy(struct emu_qp *q, const uint8_t *src, uint32_t n)
{
	struct emu_dev *d = q->dev;
	const struct emu_frame *f = &q->rx.f;
	int rc;

	if (f->type == EMU_F_SEND) {
		rc = emu_rx_scatter(q, src, n, q->rx.done);
		if (rc) {
			struct emu_rwr *r = &q->rq[q->rq_head];
			struct dev_wc wc = {
				.wr_id = r->wr_id,
				.status = DEV_WC_LOC_PROT_ERR,
				.opcode = DEV_WC_RECV,
				.qp_num = q->qp.qp_num,
			};
			q->rq_head = (q->rq_head + 1) % q->qp.cap.max_recv_wr;
			q->rq_n--;
			emu_qp_rq_changed_locked(q);
			emu_cq_push(EMU_CQ(q->qp.recv_cq), &wc, 0, NULL, 0);
			emu_rx_nak(q, f->u.data.seq, EMU_NAK_REM_OP, DEV_EVENT_QP_FATAL, rc);
		}
		return rc;
	}
	/* WRITE / WRITE_IMM: re-check this chunk (the MR may be gone since the header). */
	struct emu_mr *m;
	uint64_t a = f->u.data.raddr + q->rx.done;
	pthread_rwlock_rdlock(&d->mr_lock);
	rc = emu_rx_check_write(q, f->u.data.rkey, a, n, &m);
	if (!rc)
		dma_write((void *)(uintptr_t)a, src, n);
	pthread_rwlock_unlock(&d->mr_lock);
	if (rc)
		emu_rx_nak(q, f->u.data.seq, EMU_NAK_REM_ACCESS, DEV_EVENT_QP_ACCESS_ERR, rc);
	return rc;
}

static void emu_rx_end(struct emu_qp *q)
{
	const struct emu_frame *f = &q->rx.f;
	q->rx_seq = f->u.data.seq;
	q->ack_due = 1;
	q->rx.in_frame = 0;
	if (f->type != EMU_F_WRITE) {
		/* A message that completes a receive WR is acknowledged at once (not at the end
		 * of the batch): the sender's completion then follows the receiver's closely,
		 * as on RC hardware, and its send queue drains at the pace of delivery. */
		emu_rx_queue_ack_locked(q);
		emu_qp_tx_flush_locked(q);
		struct emu_rwr *r = &q->rq[q->rq_head];
		struct dev_wc wc = {
			.wr_id = r->wr_id,
			.status = DEV_WC_SUCCESS,
			.opcode = f->type == EMU_F_SEND ? DEV_WC_RECV : DEV_WC_RECV_RDMA_WITH_IMM,
			.byte_len = f->payload_len,
			.qp_num = q->qp.qp_num,
			.src_qp = q->dest_qpn,
		};
		if (f->type == EMU_F_WRITE_IMM) {
			wc.imm_data = f->u.data.imm;
			wc.wc_flags = DEV_WC_WITH_IMM;
		}
		q->rq_head = (q->rq_head + 1) % q->qp.cap.max_recv_wr;
		q->rq_n--;
		emu_qp_rq_changed_locked(q);
		emu_cq_push(EMU_CQ(q->qp.recv_cq), &wc, (f->flags & EMU_FL_SOLICITED) != 0, NULL,
			    0);
	}
}

void emu_rx_pump_locked(struct emu_qp *q, int max_reads)
{
	for (int i = 0; i < max_reads; i++) {
		uint32_t space = EMU_RXBUF - q->rx.end;
		if (!space)
			return;
		ssize_t n = recv(q->fd, q->rx.buf + q->rx.end, space, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL,
					    SMCR_E_EMU_PEER_GONE);
			return;
		}
		q->rx.end += (uint32_t)n;
		emu_rx_process_locked(q);
		if ((q->cs != EMU_CS_UP && q->cs != EMU_CS_HELLO) || q->stalled || q->rx_parked ||
		    (uint32_t)n < space)
			return;
	}
}

void emu_rx_process_locked(struct emu_qp *q)
{
	struct emu_rx *rx = &q->rx;

	while ((q->cs == EMU_CS_UP || q->cs == EMU_CS_HELLO) && !q->stalled && !q->rx_parked) {
		if (!rx->in_frame) {
			struct rcur c = rcur_make(rx->buf + rx->start, rx->end - rx->start);
			struct emu_frame f;
			int rc = emu_frame_hdr_decode(&c, &f);
			if (!rc)
				rc = emu_frame_fixed_decode(&c, &f);
			if (rc == -SMCR_E_SHORT)
				break;	/* the rest is still on its way */
			if (rc) {
				emu_rx_violation(q, rc);
				break;
			}
			rc = emu_rx_begin(q, &f);
			if (rc)
				break;
			rx->start += (uint32_t)c.off;
			continue;
		}
		uint32_t avail = rx->end - rx->start;
		uint32_t need = rx->f.payload_len - rx->done;
		uint32_t n = avail < need ? avail : need;
		if (n) {
			if (emu_rx_copy(q, rx->buf + rx->start, n))
				break;
			rx->start += n;
			rx->done += n;
		}
		if (rx->done < rx->f.payload_len)
			break;
		emu_rx_end(q);
	}
	if (rx->buf) {
		if (rx->start == rx->end) {
			rx->start = rx->end = 0;
		} else if (rx->start > EMU_RXBUF / 2 || EMU_RXBUF - rx->end < EMU_MAX_FIXED) {
			memmove(rx->buf, rx->buf + rx->start, rx->end - rx->start);
			rx->end -= rx->start;
			rx->start = 0;
		}
	}
	if (q->cs == EMU_CS_UP)
		emu_rx_queue_ack_locked(q);
	emu_qp_tx_flush_locked(q);
}
