/* loopdev.c: the in-process test provider "loop" (see loopdev.h). One global mutex guards
 * every loop object; operations complete inside the call. */
#define _GNU_SOURCE
#include "loopdev.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define LOOP_MAX_DEVS 64
#define LOOP_MAX_MRS 4096
#define LOOP_MAX_QPS 1024

struct loop_dev;

struct loop_pd {
	struct dev_pd pd;
};

struct loop_mr {
	struct dev_mr mr;
	bool live;
};

struct loop_cq {
	struct dev_cq cq;
	struct dev_wc *ring;
	unsigned cap, head, n;
	bool armed, sol_only, overflow;
};

struct loop_rwqe {
	uint64_t wr_id;
	struct dev_sge sge[4];
	int nsge;
};

struct loop_pending {	/* a SEND waiting for a receive WR (RNR retry 7 = infinite) */
	uint8_t data[4096];
	uint32_t len;
	bool solicited;
	uint32_t src_qp;
};

/* A send WR waiting for its time on the path (loopdev_path): a copy of the WR and its SGEs
 * (and of inline bytes: the caller may reuse them at once; other SGEs are read when the WR
 * executes, as an HCA reads them). */
struct loop_op {
	struct loop_op *next;		/* loop_queue, in post order */
	struct loop_qp *q;
	uint64_t due;			/* simulated time it executes (or fails) at */
	bool fail;			/* lost on a cut path: RETRY_EXC_ERR at due */
	bool executed;			/* ran at its post (noack path): only its completion waits */
	struct dev_send_wr wr;
	struct dev_sge sge[4];
	uint8_t *inl;
};

struct loop_qp {
	struct dev_qp qp;
	struct loop_dev *ld;
	bool live;
	struct loopdev_path path;	/* this direction's controls (loopdev_path_set) */
	uint64_t cut_at;		/* simulated time of the cut */
	uint64_t last_due;		/* due of its latest queued op: order kept */
	unsigned queued;		/* its ops on loop_queue */
	unsigned queued_run;		/* of which executed already (noack: the ACK waits) */
	bool len_err;			/* a SEND just delivered was longer than the receive WR */
	struct dev_qp_attr av;	/* dest QPN, dgid */
	struct loop_rwqe *rq;
	unsigned rq_cap, rq_head, rq_n;
	struct loop_pending *pend;
	unsigned pend_cap, pend_head, pend_n;
};

struct loop_dev {
	struct dev_device dev;
	int idx;
	bool live;
	bool port_down;
	uint32_t max_inline;
	struct dev_gid gid;
	bool roce_v2;		/* "gid=v2": an IPv4-mapped GID of type RoCE v2 */
	uint8_t mac[6];
	struct loop_mr *mrs[LOOP_MAX_MRS];	/* by rkey & 0xFFF */
	struct loop_qp *qps[LOOP_MAX_QPS];	/* by qpn */
	uint32_t next_key;
	struct dev_async_event ev[256];
	unsigned ev_head, ev_n;
};

static pthread_mutex_t loop_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop_dev *loop_devs[LOOP_MAX_DEVS];
static struct loopdev_stats loop_st;
static struct loop_dev *loop_last;
static uint64_t loop_now;			/* simulated time (loopdev_clock) */
static struct loop_op *loop_queue, *loop_queue_tail;	/* queued send WRs of every QP */

#define LD(d) DEV_CONTAINER_OF(d, struct loop_dev, dev)

static void efd_signal(int fd)
{
	uint64_t one = 1;
	if (write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		abort();
}

static void async_push(struct loop_dev *ld, enum dev_event_type t, struct loop_qp *q)
{
	if (ld->ev_n == 256)
		return;
	struct dev_async_event *e = &ld->ev[(ld->ev_head + ld->ev_n++) % 256];
	memset(e, 0, sizeof(*e));
	e->type = t;
	e->port_num = 1;
	if (q) {
		e->qp_num = q->qp.qp_num;
		e->qp_context = q->qp.qp_context;
	}
	efd_signal(ld->dev.async_fd);
}

static void cq_push(struct dev_cq *dcq, const struct dev_wc *wc, bool solicited)
{
	struct loop_cq *cq = DEV_CONTAINER_OF(dcq, struct loop_cq, cq);
	if (cq->n == cq->cap) {
		cq->overflow = true;
		return;
	}
	cq->ring[(cq->head + cq->n++) % cq->cap] = *wc;
	if (cq->armed && (!cq->sol_only || solicited || wc->status != DEV_WC_SUCCESS ||
			  wc->opcode != DEV_WC_RECV)) {
		cq->armed = false;
		efd_signal(cq->cq.comp_fd);
	}
}

/* ---- ops ------------------------------------------------------------------------------------ */

static int l_query_device(struct dev_device *d, struct dev_device_attr *a)
{
	struct loop_dev *ld = LD(d);
	snprintf(a->provider, sizeof(a->provider), "loop");
	snprintf(a->name, sizeof(a->name), "loop%d", ld->idx);
	a->phys_port_cnt = 1;
	a->max_qp = LOOP_MAX_QPS - 1;
	a->max_qp_wr = 4096;
	a->max_sge = 4;
	a->max_inline_data = ld->max_inline;
	a->max_cq = 64;
	a->max_cqe = 1 << 16;
	a->max_mr = LOOP_MAX_MRS - 1;
	a->max_mr_size = 1ull << 32;
	return 0;
}

static int l_query_port(struct dev_device *d, uint8_t p, struct dev_port_attr *a)
{
	if (p != 1)
		return -SMCR_E_INVAL;
	memset(a, 0, sizeof(*a));
	a->max_send_sz = 1u << 30;
	pthread_mutex_lock(&loop_lock);
	a->state = LD(d)->port_down ? DEV_PORT_DOWN : DEV_PORT_ACTIVE;
	pthread_mutex_unlock(&loop_lock);
	a->max_mtu = DEV_MTU_4096;
	a->active_mtu = DEV_MTU_1024;
	a->gid_tbl_len = 1;
	a->max_msg_sz = 1u << 30;
	return 0;
}

static int l_query_gid(struct dev_device *d, uint8_t p, int i, struct dev_gid_entry *o)
{
	(void)p;
	if (i != 0)
		return -SMCR_E_INVAL;
	struct loop_dev *ld = LD(d);
	o->gid = ld->gid;
	o->type = ld->roce_v2 ? DEV_GID_TYPE_ROCE_V2 : DEV_GID_TYPE_SOFT;
	o->vlan_id = DEV_VLAN_NONE;
	memcpy(o->mac, ld->mac, 6);
	return 0;
}

static int l_alloc_pd(struct dev_device *d, struct dev_pd **out)
{
	struct loop_pd *p = calloc(1, sizeof(*p));
	if (!p)
		return -SMCR_E_NOMEM;
	dev_pd_init(&p->pd, d);
	*out = &p->pd;
	return 0;
}

static int l_dealloc_pd(struct dev_pd *pd)
{
	free(DEV_CONTAINER_OF(pd, struct loop_pd, pd));
	return 0;
}

static int l_reg_mr(struct dev_pd *pd, void *addr, size_t len, unsigned acc, struct dev_mr **out)
{
	struct loop_dev *ld = LD(pd->dev);
	pthread_mutex_lock(&loop_lock);
	int slot = -1;
	for (int k = 0; k < LOOP_MAX_MRS; k++) {
		uint32_t i = (ld->next_key + (uint32_t)k) % LOOP_MAX_MRS;
		if (i && !ld->mrs[i]) {
			slot = (int)i;
			break;
		}
	}
	if (slot < 0) {
		pthread_mutex_unlock(&loop_lock);
		return -SMCR_E_DEV_LIMIT;
	}
	struct loop_mr *m = calloc(1, sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&loop_lock);
		return -SMCR_E_NOMEM;
	}
	ld->next_key = (uint32_t)slot + 1;
	static uint32_t gen = 1;
	uint32_t key = (gen++ << 12) | (uint32_t)slot;
	dev_mr_init(&m->mr, pd, addr, len, acc, key, key);
	m->live = true;
	ld->mrs[slot] = m;
	pthread_mutex_unlock(&loop_lock);
	*out = &m->mr;
	return 0;
}

static int l_dereg_mr(struct dev_mr *mr)
{
	struct loop_dev *ld = LD(mr->pd->dev);
	pthread_mutex_lock(&loop_lock);
	ld->mrs[mr->rkey & (LOOP_MAX_MRS - 1)] = NULL;
	pthread_mutex_unlock(&loop_lock);
	free(DEV_CONTAINER_OF(mr, struct loop_mr, mr));
	return 0;
}

static int l_create_cq(struct dev_device *d, int cqe, void *ctx, struct dev_cq **out)
{
	struct loop_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -SMCR_E_NOMEM;
	cq->cap = (unsigned)cqe;
	cq->ring = calloc(cq->cap, sizeof(*cq->ring));
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!cq->ring || fd < 0) {
		free(cq->ring);
		free(cq);
		if (fd >= 0)
			close(fd);
		return -SMCR_E_NOMEM;
	}
	dev_cq_init(&cq->cq, d, cqe, ctx, fd);
	*out = &cq->cq;
	return 0;
}

static int l_destroy_cq(struct dev_cq *dcq)
{
	struct loop_cq *cq = DEV_CONTAINER_OF(dcq, struct loop_cq, cq);
	close(cq->cq.comp_fd);
	free(cq->ring);
	free(cq);
	return 0;
}

static int l_req_notify(struct dev_cq *dcq, int sol)
{
	struct loop_cq *cq = DEV_CONTAINER_OF(dcq, struct loop_cq, cq);
	pthread_mutex_lock(&loop_lock);
	cq->armed = true;
	cq->sol_only = sol != 0;
	pthread_mutex_unlock(&loop_lock);
	return 0;
}

static int l_get_cq_event(struct dev_cq *dcq)
{
	uint64_t v;
	if (read(dcq->comp_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		return 0;
	return -SMCR_E_AGAIN;
}

static int l_poll_cq(struct dev_cq *dcq, int n, struct dev_wc *wc)
{
	struct loop_cq *cq = DEV_CONTAINER_OF(dcq, struct loop_cq, cq);
	int k = 0;
	pthread_mutex_lock(&loop_lock);
	while (k < n && cq->n) {
		wc[k++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->n--;
	}
	pthread_mutex_unlock(&loop_lock);
	return k;
}

static int l_create_qp(struct dev_pd *pd, const struct dev_qp_init_attr *a, struct dev_qp **out)
{
	struct loop_dev *ld = LD(pd->dev);
	if (a->cap.max_inline_data > ld->max_inline || a->cap.max_send_sge > 4 ||
	    a->cap.max_recv_sge > 4)
		return -SMCR_E_DEV_BAD_ATTR;
	struct loop_qp *q = calloc(1, sizeof(*q));
	if (!q)
		return -SMCR_E_NOMEM;
	q->rq_cap = a->cap.max_recv_wr ? a->cap.max_recv_wr : 1;
	q->rq = calloc(q->rq_cap, sizeof(*q->rq));
	/* The pending-SEND ring (1 MiB) is allocated when a SEND first waits: most QPs never
	 * need it, and a test that makes thousands of QPs (the fuzz targets) should not pay
	 * for it each time. */
	q->pend_cap = 256;
	if (!q->rq) {
		free(q);
		return -SMCR_E_NOMEM;
	}
	pthread_mutex_lock(&loop_lock);
	uint32_t qpn = 0;
	for (uint32_t i = 1; i < LOOP_MAX_QPS; i++) {
		if (!ld->qps[i]) {
			qpn = i;
			break;
		}
	}
	if (!qpn) {
		pthread_mutex_unlock(&loop_lock);
		free(q->rq);
		free(q->pend);
		free(q);
		return -SMCR_E_DEV_LIMIT;
	}
	q->ld = ld;
	q->live = true;
	struct dev_qp_cap g = a->cap;
	dev_qp_init(&q->qp, pd, a, qpn, &g);
	ld->qps[qpn] = q;
	pthread_mutex_unlock(&loop_lock);
	*out = &q->qp;
	return 0;
}

static struct loop_qp *peer_of(struct loop_qp *q)
{
	for (int i = 0; i < LOOP_MAX_DEVS; i++) {
		struct loop_dev *d = loop_devs[i];
		if (d && d->live && !memcmp(d->gid.raw, q->av.ah_attr.dgid.raw, 16)) {
			uint32_t n = q->av.dest_qp_num;
			return n < LOOP_MAX_QPS ? d->qps[n] : NULL;
		}
	}
	return NULL;
}

static void qp_flush_locked(struct loop_qp *q)
{
	while (q->rq_n) {
		struct loop_rwqe *r = &q->rq[q->rq_head];
		struct dev_wc wc = { .wr_id = r->wr_id, .status = DEV_WC_WR_FLUSH_ERR,
				     .opcode = DEV_WC_RECV, .qp_num = q->qp.qp_num };
		q->rq_head = (q->rq_head + 1) % q->rq_cap;
		q->rq_n--;
		cq_push(q->qp.recv_cq, &wc, true);
	}
	q->pend_n = 0;
}

static void qp_error_locked(struct loop_qp *q, bool event)
{
	if (atomic_load(&q->qp.state) == DEV_QPS_ERR)
		return;
	atomic_store(&q->qp.state, DEV_QPS_ERR);
	qp_flush_locked(q);
	if (event)
		async_push(q->ld, DEV_EVENT_QP_FATAL, q);
}

static bool deliver_locked(struct loop_qp *t, const uint8_t *data, uint32_t len, bool sol,
			   uint32_t src)
{
	if (!t->rq_n)
		return false;
	struct loop_rwqe *r = &t->rq[t->rq_head];
	uint32_t room = 0;
	for (int i = 0; i < r->nsge; i++)
		room += r->sge[i].length;
	struct dev_wc wc = { .wr_id = r->wr_id, .opcode = DEV_WC_RECV, .qp_num = t->qp.qp_num,
			     .src_qp = src, .byte_len = len };
	t->rq_head = (t->rq_head + 1) % t->rq_cap;
	t->rq_n--;
	if (len > room) {
		wc.status = DEV_WC_LOC_LEN_ERR;
		cq_push(t->qp.recv_cq, &wc, true);
		qp_error_locked(t, false);
		t->len_err = true;	/* the sender's SEND fails with REM_INV_REQ_ERR */
		return true;
	}
	uint32_t off = 0;
	for (int i = 0; i < r->nsge && off < len; i++) {
		uint32_t k = len - off < r->sge[i].length ? len - off : r->sge[i].length;
		memcpy((void *)(uintptr_t)r->sge[i].addr, data + off, k);
		off += k;
	}
	cq_push(t->qp.recv_cq, &wc, sol);
	return true;
}

static int l_post_recv(struct dev_qp *dq, const struct dev_recv_wr *wr,
		       const struct dev_recv_wr **bad)
{
	struct loop_qp *q = DEV_CONTAINER_OF(dq, struct loop_qp, qp);
	pthread_mutex_lock(&loop_lock);
	for (; wr; wr = wr->next) {
		if (q->rq_n == q->rq_cap || wr->num_sge > 4) {
			if (bad)
				*bad = wr;
			pthread_mutex_unlock(&loop_lock);
			return -SMCR_E_DEV_QUEUE_FULL;
		}
		struct loop_rwqe *r = &q->rq[(q->rq_head + q->rq_n++) % q->rq_cap];
		r->wr_id = wr->wr_id;
		r->nsge = wr->num_sge;
		memcpy(r->sge, wr->sg_list, sizeof(r->sge[0]) * (size_t)wr->num_sge);
		if (atomic_load(&q->qp.state) == DEV_QPS_ERR) {
			qp_flush_locked(q);
			continue;
		}
		/* A SEND that waited for this receive WR (infinite RNR retry). */
		while (q->pend_n && q->rq_n) {
			struct loop_pending *p = &q->pend[q->pend_head];
			q->pend_head = (q->pend_head + 1) % q->pend_cap;
			q->pend_n--;
			deliver_locked(q, p->data, p->len, p->solicited, p->src_qp);
		}
	}
	pthread_mutex_unlock(&loop_lock);
	return 0;
}

static struct loop_mr *lkey_mr(struct loop_dev *ld, uint32_t lkey, uint64_t addr, uint32_t len)
{
	struct loop_mr *m = ld->mrs[lkey & (LOOP_MAX_MRS - 1)];
	if (!m || m->mr.lkey != lkey)
		return NULL;
	uint64_t a = (uint64_t)(uintptr_t)m->mr.addr;
	if (addr < a || addr + len > a + m->mr.length)
		return NULL;
	return m;
}

/* Gathers a WR's data into buf (<= cap); false on a bad local SGE. */
static bool gather(struct loop_qp *q, const struct dev_send_wr *wr, uint8_t *buf, size_t cap,
		   uint32_t *len)
{
	uint64_t n = 0;
	for (int i = 0; i < wr->num_sge; i++) {
		const struct dev_sge *s = &wr->sg_list[i];
		if (!(wr->send_flags & DEV_SEND_INLINE) && !lkey_mr(q->ld, s->lkey, s->addr, s->length))
			return false;
		if (n + s->length > cap)
			return false;
		memcpy(buf + n, (const void *)(uintptr_t)s->addr, s->length);
		n += s->length;
	}
	*len = (uint32_t)n;
	return true;
}

static uint8_t *loop_scratch;	/* under loop_lock */

/* Executes one send WR now (its checks at post time passed); ack false: no success
 * completion (the noack control: the ACK did not come back). */
static void exec_wr_locked(struct loop_qp *q, const struct dev_send_wr *wr, bool ack)
{
	int st = atomic_load(&q->qp.state);
	struct dev_wc wc = { .wr_id = wr->wr_id, .qp_num = q->qp.qp_num,
			     .opcode = wr->opcode == DEV_WR_SEND ? DEV_WC_SEND : DEV_WC_RDMA_WRITE };
	bool signaled = wr->send_flags & DEV_SEND_SIGNALED;
	if (st == DEV_QPS_ERR) {
		wc.status = DEV_WC_WR_FLUSH_ERR;
		cq_push(q->qp.send_cq, &wc, true);
		return;
	}
	struct loop_qp *t = peer_of(q);
	uint32_t len = 0;
	if (!t || !t->live || atomic_load(&t->qp.state) < DEV_QPS_RTR ||
	    atomic_load(&t->qp.state) == DEV_QPS_ERR) {
		wc.status = DEV_WC_RETRY_EXC_ERR;	/* peer gone */
		cq_push(q->qp.send_cq, &wc, true);
		qp_error_locked(q, true);
		return;
	}
	if (!gather(q, wr, loop_scratch, 1u << 24, &len)) {
		wc.status = DEV_WC_LOC_PROT_ERR;
		cq_push(q->qp.send_cq, &wc, true);
		qp_error_locked(q, false);
		return;
	}
	if (wr->opcode == DEV_WR_RDMA_WRITE) {
		struct loop_mr *m = t->ld->mrs[wr->rdma.rkey & (LOOP_MAX_MRS - 1)];
		uint64_t a = m ? (uint64_t)(uintptr_t)m->mr.addr : 0;
		if (!m || m->mr.rkey != wr->rdma.rkey || m->mr.pd != t->qp.pd ||
		    !(m->mr.access & DEV_ACCESS_REMOTE_WRITE) || wr->rdma.remote_addr < a ||
		    wr->rdma.remote_addr + len > a + m->mr.length) {
			loop_st.access_errors++;
			wc.status = DEV_WC_REM_ACCESS_ERR;
			cq_push(q->qp.send_cq, &wc, true);
			qp_error_locked(q, false);
			qp_error_locked(t, true);
			async_push(t->ld, DEV_EVENT_QP_ACCESS_ERR, t);
			return;
		}
		memcpy((void *)(uintptr_t)wr->rdma.remote_addr, loop_scratch, len);
		loop_st.writes++;
		loop_st.write_bytes += len;
	} else {
		loop_st.sends++;
		if (len >= 1)
			loop_st.send_type[loop_scratch[0]]++;
		loop_st.last_send_len = len < sizeof(loop_st.last_send) ? len : sizeof(loop_st.last_send);
		memcpy(loop_st.last_send, loop_scratch, loop_st.last_send_len);
		bool sol = wr->send_flags & DEV_SEND_SOLICITED;
		t->len_err = false;
		bool done = deliver_locked(t, loop_scratch, len, sol, q->qp.qp_num);
		if (done && t->len_err) {
			t->len_err = false;
			wc.status = DEV_WC_REM_INV_REQ_ERR;	/* RC rule 7 (dev.h) */
			cq_push(q->qp.send_cq, &wc, true);
			qp_error_locked(q, false);
			return;
		}
		if (!done) {
			if (!t->pend)
				t->pend = calloc(t->pend_cap, sizeof(*t->pend));
			if (!t->pend || t->pend_n == t->pend_cap || len > sizeof(t->pend[0].data)) {
				wc.status = DEV_WC_RNR_RETRY_EXC_ERR;
				cq_push(q->qp.send_cq, &wc, true);
				qp_error_locked(q, true);
				return;
			}
			struct loop_pending *p = &t->pend[(t->pend_head + t->pend_n++) % t->pend_cap];
			memcpy(p->data, loop_scratch, len);
			p->len = len;
			p->solicited = sol;
			p->src_qp = q->qp.qp_num;
		}
	}
	if (signaled && ack) {
		wc.status = DEV_WC_SUCCESS;
		cq_push(q->qp.send_cq, &wc, true);
	}
}

static void op_free(struct loop_op *op)
{
	free(op->inl);
	free(op);
}

/* Queues wr behind the QP's earlier ones: due after the path's delay, later for each loss
 * on it (RC retransmits after its timeout, in order), failed after the transport timeout
 * on a cut path. false: no memory. */
static bool queue_wr_locked(struct loop_qp *q, const struct dev_send_wr *wr, uint32_t tot)
{
	struct loop_op *op = calloc(1, sizeof(*op));
	if (!op)
		return false;
	op->q = q;
	op->wr = *wr;
	op->wr.next = NULL;
	op->wr.sg_list = op->sge;
	memcpy(op->sge, wr->sg_list, sizeof(op->sge[0]) * (size_t)wr->num_sge);
	if ((wr->send_flags & DEV_SEND_INLINE) && tot) {
		op->inl = malloc(tot);
		if (!op->inl) {
			free(op);
			return false;
		}
		uint32_t off = 0;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(op->inl + off, (const void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
		op->sge[0].addr = (uint64_t)(uintptr_t)op->inl;
		op->sge[0].length = tot;
		op->wr.num_sge = 1;
	}
	const struct loopdev_path *p = &q->path;
	if (p->noack && !p->cut && !p->hold && q->queued == q->queued_run) {
		/* the responder has it now; the requester waits for an ACK that does not come */
		exec_wr_locked(q, wr, false);
		if (atomic_load(&q->qp.state) == DEV_QPS_ERR) {
			op_free(op);	/* it failed at once: its error completion is out */
			return true;
		}
		op->executed = true;
		q->queued_run++;
	}
	uint64_t due = loop_now + p->delay_ns;
	if (p->drop) {
		q->path.drop--;
		due += p->retrans_ns;
	}
	if (p->cut) {
		op->fail = true;
		due = (q->cut_at > loop_now ? q->cut_at : loop_now) + p->timeout_ns;
	}
	if (due < q->last_due)
		due = q->last_due;
	op->due = q->last_due = due;
	q->queued++;
	if (loop_queue_tail)
		loop_queue_tail->next = op;
	else
		loop_queue = op;
	loop_queue_tail = op;
	return true;
}

static bool path_quiet(const struct loop_qp *q)
{
	return !q->queued && !q->path.cut && !q->path.hold && !q->path.delay_ns && !q->path.drop &&
	       !q->path.noack;
}

static int l_post_send(struct dev_qp *dq, const struct dev_send_wr *wr,
		       const struct dev_send_wr **bad)
{
	struct loop_qp *q = DEV_CONTAINER_OF(dq, struct loop_qp, qp);
	pthread_mutex_lock(&loop_lock);
	if (!loop_scratch)
		loop_scratch = malloc(1u << 24);
	for (; wr; wr = wr->next) {
		int st = atomic_load(&q->qp.state);
		if (st != DEV_QPS_RTS && st != DEV_QPS_ERR) {
			if (bad)
				*bad = wr;
			pthread_mutex_unlock(&loop_lock);
			return -SMCR_E_DEV_BAD_STATE;
		}
		uint32_t tot = 0;
		for (int i = 0; i < wr->num_sge; i++)
			tot += wr->sg_list[i].length;
		if (wr->num_sge > (int)q->qp.cap.max_send_sge || wr->num_sge > 4 ||
		    ((wr->send_flags & DEV_SEND_INLINE) && tot > q->ld->max_inline) ||
		    tot > (1u << 24) ||
		    (wr->opcode != DEV_WR_SEND && wr->opcode != DEV_WR_RDMA_WRITE)) {
			if (bad)
				*bad = wr;
			pthread_mutex_unlock(&loop_lock);
			return -SMCR_E_DEV_BAD_WR;
		}
		if (st == DEV_QPS_ERR || path_quiet(q)) {
			exec_wr_locked(q, wr, true);	/* the synchronous path of loopdev.h */
			continue;
		}
		if (!queue_wr_locked(q, wr, tot)) {
			if (bad)
				*bad = wr;
			pthread_mutex_unlock(&loop_lock);
			return -SMCR_E_DEV_QUEUE_FULL;
		}
	}
	pthread_mutex_unlock(&loop_lock);
	return 0;
}

/* Drops the queued ops of q (its QP goes), without completions. */
static void ops_drop_locked(struct loop_qp *q)
{
	struct loop_op **pp = &loop_queue, *last = NULL;
	while (*pp) {
		struct loop_op *op = *pp;
		if (op->q == q) {
			*pp = op->next;
			op_free(op);
			continue;
		}
		last = op;
		pp = &op->next;
	}
	loop_queue_tail = last;
	q->queued = 0;
	q->queued_run = 0;
}

static int l_modify_qp(struct dev_qp *dq, const struct dev_qp_attr *a, unsigned mask)
{
	struct loop_qp *q = DEV_CONTAINER_OF(dq, struct loop_qp, qp);
	pthread_mutex_lock(&loop_lock);
	int rc = dev_qp_check_modify((enum dev_qp_state)atomic_load(&q->qp.state), a, mask);
	if (!rc && (mask & DEV_QP_STATE)) {
		if (a->qp_state == DEV_QPS_RTR) {
			q->av.ah_attr = a->ah_attr;
			q->av.dest_qp_num = a->dest_qp_num;
		}
		if (a->qp_state == DEV_QPS_ERR) {
			struct loop_qp *t = atomic_load(&q->qp.state) >= DEV_QPS_RTR ? peer_of(q) : NULL;
			qp_error_locked(q, false);
			if (t && !memcmp(t->av.ah_attr.dgid.raw, q->ld->gid.raw, 16) &&
			    t->av.dest_qp_num == q->qp.qp_num)
				qp_error_locked(t, true);
		} else {
			if (a->qp_state == DEV_QPS_RESET) {
				q->rq_n = 0;	/* RESET drops WRs without completions */
				q->pend_n = 0;
				ops_drop_locked(q);
			}
			atomic_store(&q->qp.state, (int)a->qp_state);
		}
	}
	pthread_mutex_unlock(&loop_lock);
	return rc;
}

static int l_query_qp(struct dev_qp *dq, struct dev_qp_attr *a)
{
	struct loop_qp *q = DEV_CONTAINER_OF(dq, struct loop_qp, qp);
	pthread_mutex_lock(&loop_lock);
	*a = q->av;
	a->qp_state = (enum dev_qp_state)atomic_load(&q->qp.state);
	pthread_mutex_unlock(&loop_lock);
	return 0;
}

static int l_destroy_qp(struct dev_qp *dq)
{
	struct loop_qp *q = DEV_CONTAINER_OF(dq, struct loop_qp, qp);
	pthread_mutex_lock(&loop_lock);
	/* The peer notices at its next send (RETRY_EXC_ERR), as RC would. */
	q->ld->qps[q->qp.qp_num] = NULL;
	ops_drop_locked(q);
	pthread_mutex_unlock(&loop_lock);
	free(q->rq);
	free(q->pend);
	free(q);
	return 0;
}

static int l_get_async(struct dev_device *d, struct dev_async_event *ev)
{
	struct loop_dev *ld = LD(d);
	uint64_t v;
	pthread_mutex_lock(&loop_lock);
	if (!ld->ev_n) {
		pthread_mutex_unlock(&loop_lock);
		return -SMCR_E_AGAIN;
	}
	*ev = ld->ev[ld->ev_head];
	ld->ev_head = (ld->ev_head + 1) % 256;
	ld->ev_n--;
	if (!ld->ev_n && read(d->async_fd, &v, sizeof(v)) < 0) {
		/* nothing: the counter was already drained */
	}
	pthread_mutex_unlock(&loop_lock);
	return 0;
}

static void l_close(struct dev_device *d)
{
	struct loop_dev *ld = LD(d);
	pthread_mutex_lock(&loop_lock);
	loop_devs[ld->idx] = NULL;
	if (loop_last == ld)
		loop_last = NULL;
	for (int i = 0; i < LOOP_MAX_MRS; i++)
		free(ld->mrs[i]);
	pthread_mutex_unlock(&loop_lock);
	close(d->async_fd);
	free(ld);
}

static int l_set_port_state(struct dev_device *d, uint8_t p, int up)
{
	(void)p;
	struct loop_dev *ld = LD(d);
	pthread_mutex_lock(&loop_lock);
	ld->port_down = !up;
	async_push(ld, up ? DEV_EVENT_PORT_ACTIVE : DEV_EVENT_PORT_ERR, NULL);
	if (!up) {
		/* the port's QPs lose their path: ERR here, and their peers (as after the
		 * transport timeout) get QP_FATAL */
		for (int i = 1; i < LOOP_MAX_QPS; i++) {
			struct loop_qp *q = ld->qps[i];
			if (!q || atomic_load(&q->qp.state) < DEV_QPS_RTR)
				continue;
			struct loop_qp *t = peer_of(q);
			qp_error_locked(q, true);
			if (t)
				qp_error_locked(t, true);
		}
	}
	pthread_mutex_unlock(&loop_lock);
	return 0;
}

static const struct dev_ops loop_ops = {
	.set_port_state = l_set_port_state,
	.alloc_pd = l_alloc_pd,
	.close_device = l_close,
	.create_cq = l_create_cq,
	.create_qp = l_create_qp,
	.dealloc_pd = l_dealloc_pd,
	.dereg_mr = l_dereg_mr,
	.destroy_cq = l_destroy_cq,
	.destroy_qp = l_destroy_qp,
	.get_async_event = l_get_async,
	.get_cq_event = l_get_cq_event,
	.modify_qp = l_modify_qp,
	.poll_cq = l_poll_cq,
	.post_recv = l_post_recv,
	.post_send = l_post_send,
	.query_device = l_query_device,
	.query_gid = l_query_gid,
	.query_port = l_query_port,
	.query_qp = l_query_qp,
	.reg_mr = l_reg_mr,
	.req_notify_cq = l_req_notify,
};

static int l_open(const struct dev_ops *ops, const char *args, struct dev_device **out)
{
	struct loop_dev *ld = calloc(1, sizeof(*ld));
	if (!ld)
		return -SMCR_E_NOMEM;
	ld->max_inline = 128;
	unsigned v;
	const char *in = args ? strstr(args, "inline=") : NULL;
	if (in && sscanf(in, "inline=%u", &v) == 1)
		ld->max_inline = v;
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0) {
		free(ld);
		return -SMCR_E_NOMEM;
	}
	pthread_mutex_lock(&loop_lock);
	int idx = -1;
	for (int i = 0; i < LOOP_MAX_DEVS; i++) {
		if (!loop_devs[i]) {
			idx = i;
			break;
		}
	}
	if (idx < 0) {
		pthread_mutex_unlock(&loop_lock);
		close(fd);
		free(ld);
		return -SMCR_E_DEV_LIMIT;
	}
	static uint32_t serial;
	serial++;
	ld->idx = idx;
	ld->live = true;
	ld->gid.raw[0] = 0xfe;
	ld->gid.raw[1] = 0x80;
	ld->gid.raw[12] = (uint8_t)(serial >> 24);
	ld->gid.raw[13] = (uint8_t)(serial >> 16);
	ld->gid.raw[14] = (uint8_t)(serial >> 8);
	ld->gid.raw[15] = (uint8_t)serial;
	if (args && strstr(args, "gid=v2")) {
		/* ::ffff:10.x.y.z, what a RoCE v2 GID of an IPv4 interface looks like */
		ld->roce_v2 = true;
		memset(ld->gid.raw, 0, 10);
		ld->gid.raw[10] = 0xff;
		ld->gid.raw[11] = 0xff;
		ld->gid.raw[12] = 10;
	}
	uint8_t mac[6] = { 0x02, 0x00, (uint8_t)(serial >> 24), (uint8_t)(serial >> 16),
			   (uint8_t)(serial >> 8), (uint8_t)serial };
	memcpy(ld->mac, mac, 6);
	ld->next_key = 1;
	char name[16];
	snprintf(name, sizeof(name), "loop%d", idx);
	dev_device_init(&ld->dev, ops, "loop", name, 1, fd);
	loop_devs[idx] = ld;
	loop_last = ld;
	pthread_mutex_unlock(&loop_lock);
	*out = &ld->dev;
	return 0;
}

static int l_open_by_gid(const struct dev_ops *ops, const struct dev_gid *gid,
			 struct dev_device **out)
{
	(void)ops;
	int rc = -SMCR_E_DEV_NO_DEVICE;
	pthread_mutex_lock(&loop_lock);
	for (int i = 0; i < LOOP_MAX_DEVS; i++) {
		struct loop_dev *d = loop_devs[i];
		if (!d || !d->live || memcmp(d->gid.raw, gid->raw, DEV_GID_LEN))
			continue;
		dev_hold(&d->dev);	/* the caller's: dev_close (l_close unlists it under the lock) */
		*out = &d->dev;
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&loop_lock);
	return rc;
}

static const struct dev_provider loop_provider = {
	.name = "loop",
	.ops = &loop_ops,
	.open = l_open,
	.open_by_gid = l_open_by_gid,
};

int loopdev_register(void)
{
	return dev_provider_register(&loop_provider);
}

void loopdev_kill(struct dev_device *d)
{
	struct loop_dev *ld = LD(d);
	pthread_mutex_lock(&loop_lock);
	ld->live = false;
	for (int i = 1; i < LOOP_MAX_QPS; i++) {
		struct loop_qp *q = ld->qps[i];
		if (!q)
			continue;
		struct loop_qp *t = peer_of(q);
		qp_error_locked(q, true);
		if (t)
			qp_error_locked(t, true);
	}
	/* QPs elsewhere pointing at this device also lose their peer. */
	for (int k = 0; k < LOOP_MAX_DEVS; k++) {
		struct loop_dev *o = loop_devs[k];
		if (!o || o == ld)
			continue;
		for (int i = 1; i < LOOP_MAX_QPS; i++) {
			struct loop_qp *q = o->qps[i];
			if (q && !memcmp(q->av.ah_attr.dgid.raw, ld->gid.raw, 16) &&
			    atomic_load(&q->qp.state) >= DEV_QPS_RTR)
				qp_error_locked(q, true);
		}
	}
	pthread_mutex_unlock(&loop_lock);
}

void loopdev_stats(struct loopdev_stats *st)
{
	pthread_mutex_lock(&loop_lock);
	*st = loop_st;
	pthread_mutex_unlock(&loop_lock);
}

static struct loop_qp *LQ(struct dev_qp *qp)
{
	return DEV_CONTAINER_OF(qp, struct loop_qp, qp);
}

void loopdev_path_set(struct dev_qp *qp, const struct loopdev_path *p)
{
	pthread_mutex_lock(&loop_lock);
	struct loop_qp *q = LQ(qp);
	bool was_cut = q->path.cut;
	q->path = *p;
	if (!q->path.timeout_ns)
		q->path.timeout_ns = LOOPDEV_TIMEOUT_NS;
	if (!q->path.retrans_ns)
		q->path.retrans_ns = LOOPDEV_RETRANS_NS;
	if (p->cut && !was_cut) {
		q->cut_at = loop_now;
		/* what is on the wire now is lost with the cut: failed after the timeout */
		for (struct loop_op *op = loop_queue; op; op = op->next) {
			if (op->q == q && !op->fail) {
				op->fail = true;
				uint64_t d = loop_now + q->path.timeout_ns;
				op->due = d > op->due ? d : op->due;
				if (op->due > q->last_due)
					q->last_due = op->due;
			}
		}
	}
	pthread_mutex_unlock(&loop_lock);
}

void loopdev_link_set(struct dev_qp *qp, const struct loopdev_path *p)
{
	loopdev_path_set(qp, p);
	pthread_mutex_lock(&loop_lock);
	struct loop_qp *t = peer_of(LQ(qp));
	pthread_mutex_unlock(&loop_lock);
	if (t)
		loopdev_path_set(&t->qp, p);
}

void loopdev_clock(uint64_t now)
{
	pthread_mutex_lock(&loop_lock);
	if (now > loop_now)
		loop_now = now;
	/* In post order; an op of a held QP, or one not due, waits, and so does every later
	 * op of its QP (their dues never decrease), so each QP's order is kept. */
	struct loop_op **pp = &loop_queue, *last = NULL;
	while (*pp) {
		struct loop_op *op = *pp;
		struct loop_qp *q = op->q;
		if (op->due > loop_now || ((q->path.hold || (op->executed && q->path.noack)) &&
					     !op->fail)) {
			last = op;
			pp = &op->next;
			continue;
		}
		*pp = op->next;
		q->queued--;
		if (op->executed)
			q->queued_run--;
		if (op->fail && atomic_load(&q->qp.state) != DEV_QPS_ERR) {
			struct dev_wc wc = { .wr_id = op->wr.wr_id, .qp_num = q->qp.qp_num,
					     .status = DEV_WC_RETRY_EXC_ERR,
					     .opcode = op->wr.opcode == DEV_WR_SEND ? DEV_WC_SEND
									  : DEV_WC_RDMA_WRITE };
			cq_push(q->qp.send_cq, &wc, true);
			qp_error_locked(q, true);
		} else if (op->executed) {
			/* the late ACK: the WR ran at its post (flushed if the QP failed since) */
			bool err = atomic_load(&q->qp.state) == DEV_QPS_ERR;
			if (err || (op->wr.send_flags & DEV_SEND_SIGNALED)) {
				struct dev_wc wc = { .wr_id = op->wr.wr_id, .qp_num = q->qp.qp_num,
						     .status = err ? DEV_WC_WR_FLUSH_ERR
								   : DEV_WC_SUCCESS,
						     .opcode = op->wr.opcode == DEV_WR_SEND
								       ? DEV_WC_SEND
								       : DEV_WC_RDMA_WRITE };
				cq_push(q->qp.send_cq, &wc, true);
			}
		} else {
			exec_wr_locked(q, &op->wr, true);
		}
		op_free(op);
	}
	loop_queue_tail = last;
	pthread_mutex_unlock(&loop_lock);
}

unsigned loopdev_queued(struct dev_qp *qp)
{
	pthread_mutex_lock(&loop_lock);
	unsigned n = LQ(qp)->queued;
	pthread_mutex_unlock(&loop_lock);
	return n;
}

struct dev_device *loopdev_last_opened(void)
{
	pthread_mutex_lock(&loop_lock);
	struct dev_device *d = loop_last ? &loop_last->dev : NULL;
	pthread_mutex_unlock(&loop_lock);
	return d;
}
