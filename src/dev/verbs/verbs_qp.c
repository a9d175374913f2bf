/* verbs_qp.c: RC queue pairs of the libibverbs provider: create (sizing the CQs they
 * complete into, verbs_cq.c), modify with SMC-R's attributes (docs/protocol/procedures.md 2.6; the
 * port the user calls 1 is the device's real port), query, and the data path (ibv_post_send and
 * ibv_post_recv, inline in verbs.h: no library call). docs/parts/verbs.md "Mapping".
 *
 * The state machine is checked here first (dev_qp_check_modify), so a refused transition
 * reports DEV_BAD_STATE or DEV_BAD_ATTR as every provider does, where the kernel would
 * say EINVAL for both. The state kept in dev_qp is a hint (dev.h); it is updated on
 * modify, on query, on an error completion and on a QP async event. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dev/verbs/verbs_int.h"
#include "util/log.h"

#define VB_POST_BATCH 8	 /* WRs handed to ibv_post_send per call */
#define VB_MAX_SGE 4	 /* SGEs per WR we convert (SMC-R uses up to 2) */

static struct vb_dev *vbd(struct dev_device *d)
{
	return DEV_CONTAINER_OF(d, struct vb_dev, dev);
}

static struct vb_qp *vbq(struct dev_qp *q)
{
	return DEV_CONTAINER_OF(q, struct vb_qp, qp);
}

static struct vb_cq *vbc(struct dev_cq *c)
{
	return DEV_CONTAINER_OF(c, struct vb_cq, cq);
}

int vb_create_qp(struct dev_pd *pd, const struct dev_qp_init_attr *attr, struct dev_qp **out)
{
	const struct vb_lib *L = vb_lib();
	struct vb_dev *d = vbd(pd->dev);
	struct vb_pd *p = DEV_CONTAINER_OF(pd, struct vb_pd, pd);
	if (!attr->send_cq || !attr->recv_cq || attr->cap.max_send_sge > VB_MAX_SGE ||
	    attr->cap.max_recv_sge > VB_MAX_SGE)
		return -SMCR_E_DEV_BAD_ATTR;
	struct vb_qp *q = calloc(1, sizeof *q);
	if (!q)
		return -SMCR_E_NOMEM;
	struct ibv_qp_init_attr ia = {
		.qp_context = q,
		.send_cq = vbc(attr->send_cq)->ibcq,
		.recv_cq = vbc(attr->recv_cq)->ibcq,
		.cap = { .max_send_wr = attr->cap.max_send_wr,
			 .max_recv_wr = attr->cap.max_recv_wr,
			 .max_send_sge = attr->cap.max_send_sge,
			 .max_recv_sge = attr->cap.max_recv_sge,
			 .max_inline_data = attr->cap.max_inline_data < d->max_inline
						    ? attr->cap.max_inline_data
						    : d->max_inline },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = attr->sq_sig_all,
	};
	q->ibqp = L->create_qp(p->ibpd, &ia);
	if (!q->ibqp) {
		int e = errno;
		free(q);
		LOG_WARN(VB_UNIT, "ibv_create_qp(%u/%u WRs): %s", attr->cap.max_send_wr,
			 attr->cap.max_recv_wr, strerror(e));
		return e == ENOMEM ? -SMCR_E_DEV_LIMIT : vb_errno_to_err(e);
	}
	/* the CQs must hold every completion of the queues granted (never overflow) */
	int sq = (int)ia.cap.max_send_wr, rq = (int)ia.cap.max_recv_wr;
	int rc = vb_cq_reserve(vbc(attr->send_cq), sq);
	if (!rc) {
		rc = vb_cq_reserve(vbc(attr->recv_cq), rq);
		if (rc)
			vb_cq_release(vbc(attr->send_cq), sq);
	}
	if (rc) {
		(void)L->destroy_qp(q->ibqp);
		free(q);
		return rc;
	}
	pthread_mutex_init(&q->lock, NULL);
	/* WR depths as granted (the device may round up, and holds that many); SGEs and
	 * inline bytes as asked at most, so post_send refuses what the caller did not ask
	 * for, as every provider does (the device may grant its maximum) */
	struct dev_qp_cap granted = {
		ia.cap.max_send_wr, ia.cap.max_recv_wr,
		ia.cap.max_send_sge < attr->cap.max_send_sge ? ia.cap.max_send_sge : attr->cap.max_send_sge,
		ia.cap.max_recv_sge < attr->cap.max_recv_sge ? ia.cap.max_recv_sge : attr->cap.max_recv_sge,
		ia.cap.max_inline_data };
	dev_qp_init(&q->qp, pd, attr, q->ibqp->qp_num, &granted);
	vb_dev_qp_add(d, q);
	*out = &q->qp;
	return 0;
}

int vb_destroy_qp(struct dev_qp *qp)
{
	struct vb_qp *q = vbq(qp);
	int rc = vb_lib()->destroy_qp(q->ibqp);
	if (rc)
		return vb_errno_to_err(rc);
	vb_dev_qp_del(vbd(qp->dev), q);
	vb_cq_release(vbc(qp->send_cq), (int)qp->cap.max_send_wr);
	vb_cq_release(vbc(qp->recv_cq), (int)qp->cap.max_recv_wr);
	pthread_mutex_destroy(&q->lock);
	free(q);
	return 0;
}

static bool gid_is_v2(struct vb_dev *d, uint8_t index)
{
	struct dev_gid_entry ge;
	return dev_query_gid(&d->dev, 1, index, &ge) == 0 && ge.type == DEV_GID_TYPE_ROCE_V2;
}

int vb_modify_qp(struct dev_qp *qp, const struct dev_qp_attr *a, unsigned mask)
{
	struct vb_qp *q = vbq(qp);
	struct vb_dev *d = vbd(qp->dev);
	struct ibv_qp_attr ia;
	memset(&ia, 0, sizeof ia);
	/* the dev mask bits have the values of enum ibv_qp_attr_mask */
	int imask = (int)(mask & (DEV_QP_STATE | DEV_QP_ACCESS_FLAGS | DEV_QP_PKEY_INDEX |
				  DEV_QP_PORT | DEV_QP_AV | DEV_QP_PATH_MTU | DEV_QP_TIMEOUT |
				  DEV_QP_RETRY_CNT | DEV_QP_RNR_RETRY | DEV_QP_RQ_PSN |
				  DEV_QP_MAX_QP_RD_ATOMIC | DEV_QP_MIN_RNR_TIMER |
				  DEV_QP_SQ_PSN | DEV_QP_MAX_DEST_RD_ATOMIC | DEV_QP_DEST_QPN));
	ia.qp_state = (enum ibv_qp_state)a->qp_state;
	ia.qp_access_flags = (int)((a->qp_access_flags & DEV_ACCESS_LOCAL_WRITE ? IBV_ACCESS_LOCAL_WRITE : 0) |
				   (a->qp_access_flags & DEV_ACCESS_REMOTE_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0) |
				   (a->qp_access_flags & DEV_ACCESS_REMOTE_READ ? IBV_ACCESS_REMOTE_READ : 0));
	ia.pkey_index = a->pkey_index;
	ia.port_num = d->port;
	ia.path_mtu = (enum ibv_mtu)a->path_mtu;
	ia.dest_qp_num = a->dest_qp_num;
	ia.rq_psn = a->rq_psn;
	ia.sq_psn = a->sq_psn;
	ia.timeout = a->timeout;
	ia.retry_cnt = a->retry_cnt;
	ia.rnr_retry = a->rnr_retry;
	ia.min_rnr_timer = a->min_rnr_timer;
	ia.max_rd_atomic = a->max_rd_atomic;
	ia.max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & DEV_QP_AV) {
		ia.ah_attr.is_global = 1; /* RoCE: always a GRH */
		memcpy(ia.ah_attr.grh.dgid.raw, a->ah_attr.dgid.raw, DEV_GID_LEN);
		ia.ah_attr.grh.sgid_index = a->ah_attr.sgid_index;
		ia.ah_attr.grh.hop_limit = a->ah_attr.hop_limit;
		/* RoCE v2 is routable: a hop limit of 1 (RoCE v1's) would stop at the
		 * first router, so v2 GIDs get IP's usual 64 */
		if (ia.ah_attr.grh.hop_limit <= 1 && gid_is_v2(d, a->ah_attr.sgid_index))
			ia.ah_attr.grh.hop_limit = 64;
		ia.ah_attr.port_num = d->port;
	}
	pthread_mutex_lock(&q->lock);
	int rc = dev_qp_check_modify((enum dev_qp_state)atomic_load(&qp->state), a, mask);
	if (!rc) {
		int e = vb_lib()->modify_qp(q->ibqp, &ia, imask);
		if (e) {
			LOG_WARN(VB_UNIT, "ibv_modify_qp(QP %u to %s): %s", qp->qp_num,
				 dev_qp_state_str(a->qp_state), strerror(e));
			rc = e == EINVAL ? -SMCR_E_DEV_BAD_ATTR : vb_errno_to_err(e);
		} else if (mask & DEV_QP_STATE) {
			atomic_store(&qp->state, (int)a->qp_state);
		}
	}
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int vb_query_qp(struct dev_qp *qp, struct dev_qp_attr *a)
{
	struct vb_qp *q = vbq(qp);
	struct ibv_qp_attr ia;
	struct ibv_qp_init_attr ii;
	memset(&ia, 0, sizeof ia);
	int e = vb_lib()->query_qp(q->ibqp, &ia, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_SQ_PSN |
					   IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					   IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS,
				   &ii);
	if (e)
		return vb_errno_to_err(e);
	memset(a, 0, sizeof *a);
	a->qp_state = (enum dev_qp_state)ia.qp_state;
	if (ia.qp_state == IBV_QPS_SQD || ia.qp_state == IBV_QPS_SQE)
		a->qp_state = DEV_QPS_ERR; /* states SMC-R never asks for */
	a->qp_access_flags = (unsigned)ia.qp_access_flags &
			     (DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE | DEV_ACCESS_REMOTE_READ);
	a->port_num = 1;
	memcpy(a->ah_attr.dgid.raw, ia.ah_attr.grh.dgid.raw, DEV_GID_LEN);
	a->ah_attr.sgid_index = ia.ah_attr.grh.sgid_index;
	a->ah_attr.hop_limit = ia.ah_attr.grh.hop_limit;
	a->ah_attr.port_num = 1;
	a->path_mtu = (enum dev_mtu)ia.path_mtu;
	a->dest_qp_num = ia.dest_qp_num;
	a->rq_psn = ia.rq_psn;
	a->sq_psn = ia.sq_psn;
	a->timeout = ia.timeout;
	a->retry_cnt = ia.retry_cnt;
	a->rnr_retry = ia.rnr_retry;
	a->min_rnr_timer = ia.min_rnr_timer;
	pthread_mutex_lock(&q->lock);
	atomic_store(&qp->state, (int)a->qp_state);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

static int sge_conv(const struct dev_sge *in, int n, struct ibv_sge *out, uint32_t *len)
{
	if (n < 0 || n > VB_MAX_SGE)
		return -1;
	*len = 0;
	for (int i = 0; i < n; i++) {
		out[i].addr = in[i].addr;
		out[i].length = in[i].length;
		out[i].lkey = in[i].lkey;
		*len += in[i].length;
	}
	return 0;
}

int vb_post_send(struct dev_qp *qp, const struct dev_send_wr *wr, const struct dev_send_wr **bad)
{
	struct vb_qp *q = vbq(qp);
	int st = atomic_load(&qp->state);
	if (st != DEV_QPS_RTS && st != DEV_QPS_ERR) {
		if (bad)
			*bad = wr;
		return -SMCR_E_DEV_BAD_STATE;
	}
	while (wr) {
		struct ibv_send_wr w[VB_POST_BATCH];
		struct ibv_sge sg[VB_POST_BATCH][VB_MAX_SGE];
		const struct dev_send_wr *src[VB_POST_BATCH];
		int n = 0;
		for (; wr && n < VB_POST_BATCH; wr = wr->next, n++) {
			uint32_t len;
			if (sge_conv(wr->sg_list, wr->num_sge, sg[n], &len) ||
			    (uint32_t)wr->num_sge > qp->cap.max_send_sge ||
			    ((wr->send_flags & DEV_SEND_INLINE) && len > qp->cap.max_inline_data) ||
			    wr->opcode > DEV_WR_SEND)
				break;
			memset(&w[n], 0, sizeof w[n]);
			w[n].wr_id = wr->wr_id;
			w[n].sg_list = sg[n];
			w[n].num_sge = wr->num_sge;
			/* opcodes and flags have the values of ibv_wr_opcode and ibv_send_flags */
			w[n].opcode = (enum ibv_wr_opcode)wr->opcode;
			w[n].send_flags = wr->send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED |
							    IBV_SEND_SOLICITED | IBV_SEND_INLINE);
			w[n].imm_data = htonl(wr->imm_data);
			w[n].wr.rdma.remote_addr = wr->rdma.remote_addr;
			w[n].wr.rdma.rkey = wr->rdma.rkey;
			w[n].next = NULL;
			if (n)
				w[n - 1].next = &w[n];
			src[n] = wr;
		}
		const struct dev_send_wr *stop = wr; /* an invalid WR, or the next batch */
		bool invalid = stop && n < VB_POST_BATCH;
		if (n) {
			struct ibv_send_wr *ibad = NULL;
			int e = ibv_post_send(q->ibqp, w, &ibad);
			if (e) {
				if (bad)
					*bad = ibad ? src[ibad - w] : src[0];
				return e == ENOMEM ? -SMCR_E_DEV_QUEUE_FULL : -SMCR_E_DEV_BAD_WR;
			}
		}
		if (invalid) {
			if (bad)
				*bad = stop;
			return -SMCR_E_DEV_BAD_WR;
		}
	}
	return 0;
}

/* A receive WR posted on a QP in ERR must flush (dev.h rule 4). rxe's user-space
 * receive queue is not looked at by the kernel until a packet comes or the QP enters ERR,
 * so a WR posted in ERR would wait forever: asking for ERR again makes the kernel flush
 * it. Only on this rare path (devices that flush by themselves just see a no-op). */
static void flush_kick(struct vb_qp *q)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	pthread_mutex_lock(&q->lock);
	(void)vb_lib()->modify_qp(q->ibqp, &a, IBV_QP_STATE);
	pthread_mutex_unlock(&q->lock);
}

int vb_post_recv(struct dev_qp *qp, const struct dev_recv_wr *wr, const struct dev_recv_wr **bad)
{
	struct vb_qp *q = vbq(qp);
	if (atomic_load(&qp->state) == DEV_QPS_RESET) {
		if (bad)
			*bad = wr;
		return -SMCR_E_DEV_BAD_STATE;
	}
	while (wr) {
		struct ibv_recv_wr w[VB_POST_BATCH];
		struct ibv_sge sg[VB_POST_BATCH][VB_MAX_SGE];
		const struct dev_recv_wr *src[VB_POST_BATCH];
		int n = 0;
		for (; wr && n < VB_POST_BATCH; wr = wr->next, n++) {
			uint32_t len;
			if (sge_conv(wr->sg_list, wr->num_sge, sg[n], &len) ||
			    (uint32_t)wr->num_sge > qp->cap.max_recv_sge)
				break;
			memset(&w[n], 0, sizeof w[n]);
			w[n].wr_id = wr->wr_id;
			w[n].sg_list = sg[n];
			w[n].num_sge = wr->num_sge;
			if (n)
				w[n - 1].next = &w[n];
			src[n] = wr;
		}
		const struct dev_recv_wr *stop = wr;
		bool invalid = stop && n < VB_POST_BATCH;
		if (n) {
			struct ibv_recv_wr *ibad = NULL;
			int e = ibv_post_recv(q->ibqp, w, &ibad);
			if (e) {
				if (bad)
					*bad = ibad ? src[ibad - w] : src[0];
				return e == ENOMEM ? -SMCR_E_DEV_QUEUE_FULL : -SMCR_E_DEV_BAD_WR;
			}
			if (atomic_load(&qp->state) == DEV_QPS_ERR)
				flush_kick(q);
		}
		if (invalid) {
			if (bad)
				*bad = stop;
			return -SMCR_E_DEV_BAD_WR;
		}
	}
	return 0;
}
