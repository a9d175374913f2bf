/* emu_fault.c: fault injection on emu QPs for tests (emu.h; STYLE.md 17: "the emulated one
 * can cut, delay and drop, so failover is tested exactly"). Each fault acts where a real
 * one would: a cut resets the TCP connection, a delay holds frames in the transmit queue,
 * a stall stops both directions while the connection stays open, so the peer learns of it
 * the way it would over a real link (reset, late acks, transport timeout). */
#define _GNU_SOURCE
#include "dev/emu/emu_int.h"

static int emu_fault_qp(struct dev_qp *qp, struct emu_qp **out)
{
	if (!qp || !emu_is_emu_dev(qp->dev))
		return -SMCR_E_EMU_NOT_EMU;
	*out = EMU_QP(qp);
	return 0;
}

int dev_emu_qp_cut(struct dev_qp *qp)
{
	struct emu_qp *q;
	int rc = emu_fault_qp(qp, &q);
	if (rc)
		return rc;
	pthread_mutex_lock(&q->lock);
	q->close_rst = 1;
	if (q->state == DEV_QPS_ERR)
		emu_qp_work_locked(q, EMU_W_CLOSE);
	else
		emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL,
				    SMCR_E_EMU_PEER_GONE);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

int dev_emu_qp_delay(struct dev_qp *qp, uint64_t delay_ns)
{
	struct emu_qp *q;
	int rc = emu_fault_qp(qp, &q);
	if (rc)
		return rc;
	pthread_mutex_lock(&q->lock);
	q->delay_ns = delay_ns;
	emu_qp_work_locked(q, EMU_W_TX);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

int dev_emu_qp_stall(struct dev_qp *qp, int on)
{
	struct emu_qp *q;
	int rc = emu_fault_qp(qp, &q);
	if (rc)
		return rc;
	pthread_mutex_lock(&q->lock);
	q->stalled = on != 0;
	/* Stalling takes effect at once (no more reads once epoll forgets EPOLLIN, no more
	 * sends); resuming lets the I/O thread catch up with both queues. */
	emu_qp_epoll_update_locked(q);
	emu_qp_work_locked(q, on ? EMU_W_TX : EMU_W_RX | EMU_W_TX);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

int dev_emu_qp_timeout(struct dev_qp *qp, uint64_t *ns)
{
	struct emu_qp *q;
	int rc = emu_fault_qp(qp, &q);
	if (rc)
		return rc;
	pthread_mutex_lock(&q->lock);
	*ns = q->ack_timeout_ns;
	pthread_mutex_unlock(&q->lock);
	return 0;
}
