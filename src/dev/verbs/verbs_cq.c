/* verbs_cq.c: protection domains, memory regions and completion queues of the libibverbs
 * provider (docs/parts/verbs.md "Mapping").
 *
 * A CQ has its own completion channel, whose fd (nonblocking) is the CQ's comp_fd, and
 * every event taken from it is acknowledged at once (ibv_destroy_cq waits for all of them).
 * CQ size: a verbs CQ that overflows is an error that takes its QPs down, so each CQ
 * counts the work requests of the QPs completing into it (vb_cq_reserve at create_qp) and
 * grows with ibv_resize_cq before a QP could overflow it; dev_create_cq's cqe is only its
 * first size (the core asks for one CQ per device, core_int.h CORE_CQE_PER_DEV). */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "dev/verbs/verbs_int.h"
#include "util/log.h"

static struct vb_dev *vbd(struct dev_device *d)
{
	return DEV_CONTAINER_OF(d, struct vb_dev, dev);
}

/* ---- PD and MR --------------------------------------------------------------------------- */

int vb_alloc_pd(struct dev_device *dev, struct dev_pd **out)
{
	struct vb_pd *p = calloc(1, sizeof *p);
	if (!p)
		return -SMCR_E_NOMEM;
	p->ibpd = vb_lib()->alloc_pd(vbd(dev)->ctx);
	if (!p->ibpd) {
		int e = errno;
		free(p);
		return vb_errno_to_err(e);
	}
	dev_pd_init(&p->pd, dev);
	*out = &p->pd;
	return 0;
}

int vb_dealloc_pd(struct dev_pd *pd)
{
	struct vb_pd *p = DEV_CONTAINER_OF(pd, struct vb_pd, pd);
	int rc = vb_lib()->dealloc_pd(p->ibpd);
	if (rc)
		return vb_errno_to_err(rc);
	free(p);
	return 0;
}

int vb_reg_mr(struct dev_pd *pd, void *addr, size_t length, unsigned access, struct dev_mr **out)
{
	if ((access & DEV_ACCESS_REMOTE_WRITE) && !(access & DEV_ACCESS_LOCAL_WRITE))
		return -SMCR_E_DEV_BAD_ATTR; /* as verbs */
	struct vb_pd *p = DEV_CONTAINER_OF(pd, struct vb_pd, pd);
	struct vb_mr *m = calloc(1, sizeof *m);
	if (!m)
		return -SMCR_E_NOMEM;
	int acc = 0;
	acc |= access & DEV_ACCESS_LOCAL_WRITE ? IBV_ACCESS_LOCAL_WRITE : 0;
	acc |= access & DEV_ACCESS_REMOTE_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0;
	acc |= access & DEV_ACCESS_REMOTE_READ ? IBV_ACCESS_REMOTE_READ : 0;
	m->ibmr = vb_lib()->reg_mr(p->ibpd, addr, length, acc);
	if (!m->ibmr) {
		int e = errno;
		free(m);
		LOG_WARN(VB_UNIT, "ibv_reg_mr(%zu bytes): %s", length, strerror(e));
		return e == ENOMEM ? -SMCR_E_DEV_LIMIT : vb_errno_to_err(e);
	}
	dev_mr_init(&m->mr, pd, addr, length, access, m->ibmr->lkey, m->ibmr->rkey);
	*out = &m->mr;
	return 0;
}

int vb_dereg_mr(struct dev_mr *mr)
{
	struct vb_mr *m = DEV_CONTAINER_OF(mr, struct vb_mr, mr);
	int rc = vb_lib()->dereg_mr(m->ibmr);
	if (rc)
		return vb_errno_to_err(rc);
	free(m);
	return 0;
}

/* ---- CQ ---------------------------------------------------------------------------------- */

int vb_create_cq(struct dev_device *dev, int cqe, void *cq_context, struct dev_cq **out)
{
	const struct vb_lib *L = vb_lib();
	struct vb_dev *d = vbd(dev);
	if (cqe < 1)
		return -SMCR_E_DEV_BAD_ATTR;
	if (cqe > d->attr.max_cqe)
		cqe = d->attr.max_cqe; /* grown on demand up to the device's limit anyway */
	struct vb_cq *c = calloc(1, sizeof *c);
	if (!c)
		return -SMCR_E_NOMEM;
	c->ch = L->create_comp_channel(d->ctx);
	if (!c->ch)
		goto fail;
	int fl = fcntl(c->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(c->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		goto fail;
	c->ibcq = L->create_cq(d->ctx, cqe, c, c->ch, 0);
	if (!c->ibcq)
		goto fail;
	c->cqe_cap = c->ibcq->cqe;
	pthread_mutex_init(&c->lock, NULL);
	dev_cq_init(&c->cq, dev, cqe, cq_context, c->ch->fd);
	*out = &c->cq;
	return 0;
fail:;
	int e = errno;
	if (c->ch)
		(void)L->destroy_comp_channel(c->ch);
	free(c);
	LOG_WARN(VB_UNIT, "cannot create a CQ of %d entries: %s", cqe, strerror(e));
	return vb_errno_to_err(e);
}

int vb_destroy_cq(struct dev_cq *cq)
{
	const struct vb_lib *L = vb_lib();
	struct vb_cq *c = DEV_CONTAINER_OF(cq, struct vb_cq, cq);
	int rc = L->destroy_cq(c->ibcq);
	if (rc)
		return vb_errno_to_err(rc);
	(void)L->destroy_comp_channel(c->ch);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return 0;
}

int vb_cq_reserve(struct vb_cq *c, int n)
{
	struct vb_dev *d = vbd(c->cq.dev);
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	int need = c->cqe_used + n;
	if (need > c->cqe_cap) {
		/* grow with room for more QPs, so resizes stay rare */
		int want = need + need / 2;
		if (want > d->attr.max_cqe)
			want = d->attr.max_cqe;
		if (want < need) {
			rc = -SMCR_E_DEV_LIMIT;
		} else {
			int e = vb_lib()->resize_cq(c->ibcq, want);
			if (e) {
				LOG_WARN(VB_UNIT, "ibv_resize_cq(%d): %s", want, strerror(e));
				rc = -SMCR_E_DEV_LIMIT;
			} else {
				c->cqe_cap = c->ibcq->cqe;
			}
		}
	}
	if (!rc)
		c->cqe_used = need;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void vb_cq_release(struct vb_cq *c, int n)
{
	pthread_mutex_lock(&c->lock);
	c->cqe_used -= n;
	pthread_mutex_unlock(&c->lock);
}

int vb_req_notify_cq(struct dev_cq *cq, int solicited_only)
{
	struct vb_cq *c = DEV_CONTAINER_OF(cq, struct vb_cq, cq);
	int rc = ibv_req_notify_cq(c->ibcq, solicited_only);
	return rc ? vb_errno_to_err(rc) : 0;
}

int vb_get_cq_event(struct dev_cq *cq)
{
	struct vb_cq *c = DEV_CONTAINER_OF(cq, struct vb_cq, cq);
	struct ibv_cq *got;
	void *ctx;
	/* the channel is nonblocking: -1/EAGAIN when no event is pending */
	if (vb_lib()->get_cq_event(c->ch, &got, &ctx))
		return -SMCR_E_AGAIN;
	vb_lib()->ack_cq_events(got, 1);
	return 0;
}

int vb_poll_cq(struct dev_cq *cq, int n, struct dev_wc *wc)
{
	struct vb_cq *c = DEV_CONTAINER_OF(cq, struct vb_cq, cq);
	struct ibv_wc w[32];
	int total = 0;
	while (total < n) {
		int want = n - total < 32 ? n - total : 32;
		int got = ibv_poll_cq(c->ibcq, want, w);
		if (got < 0)
			return total ? total : -SMCR_E_DEV_LIMIT;
		for (int i = 0; i < got; i++) {
			struct dev_wc *o = &wc[total + i];
			o->wr_id = w[i].wr_id;
			o->status = (enum dev_wc_status)w[i].status;
			o->opcode = (enum dev_wc_opcode)w[i].opcode;
			o->byte_len = w[i].byte_len;
			o->qp_num = w[i].qp_num;
			o->src_qp = w[i].src_qp;
			o->wc_flags = w[i].wc_flags & IBV_WC_WITH_IMM ? DEV_WC_WITH_IMM : 0;
			o->imm_data = w[i].wc_flags & IBV_WC_WITH_IMM ? ntohl(w[i].imm_data) : 0;
			/* an error completion: the QP is in ERR (a flush means it already was) */
			if (w[i].status != IBV_WC_SUCCESS && w[i].status != IBV_WC_WR_FLUSH_ERR)
				vb_dev_qp_err(vbd(cq->dev), w[i].qp_num);
		}
		total += got;
		if (got < want)
			break;
	}
	return total;
}
