/* emu_cq.c: the emu provider's protection domains, memory regions (the table the receiver
 * validates peers' WRITEs against, dev.h 3), completion queues (dev.h ibv_*_cq semantics)
 * and the async event queue. Locks: emu_int.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dev/emu/emu_int.h"
#include "util/log.h"

/* ---- protection domains ------------------------------------------------------------- */

int emu_alloc_pd(struct dev_device *dev, struct dev_pd **out)
{
	struct emu_pd *p = calloc(1, sizeof *p);
	if (!p)
		return -SMCR_E_NOMEM;
	dev_pd_init(&p->pd, dev);
	*out = &p->pd;
	return 0;
}

int emu_dealloc_pd(struct dev_pd *pd)
{
	free(EMU_PD(pd));
	return 0;
}

/* ---- memory regions ----------------------------------------------------------------- */

#define EMU_MR_NONE UINT32_MAX

struct emu_mr *emu_mr_lookup_locked(struct emu_dev *d, uint32_t key)
{
	uint32_t slot = key >> 8;
	if (slot >= d->mr_cap)
		return NULL;
	struct emu_mr_slot *s = &d->mrs[slot];
	if (!s->mr || s->gen != (uint8_t)key)
		return NULL;
	return s->mr;
}

int emu_reg_mr(struct dev_pd *pd, void *addr, size_t length, unsigned access,
	       struct dev_mr **out)
{
	struct emu_dev *d = EMU_DEV(pd->dev);
	if (length > EMU_MAX_MR_SIZE || (uintptr_t)addr + length < (uintptr_t)addr)
		return -SMCR_E_DEV_BAD_ATTR;
	struct emu_mr *m = calloc(1, sizeof *m);
	if (!m)
		return -SMCR_E_NOMEM;
	pthread_rwlock_wrlock(&d->mr_lock);
	if (d->nmr >= EMU_MAX_MR) {
		pthread_rwlock_unlock(&d->mr_lock);
		free(m);
		return -SMCR_E_DEV_LIMIT;
	}
	if (d->mr_free == EMU_MR_NONE) {
		uint32_t ncap = d->mr_cap ? d->mr_cap * 2 : 64;
		struct emu_mr_slot *n = realloc(d->mrs, ncap * sizeof *n);
		if (!n) {
			pthread_rwlock_unlock(&d->mr_lock);
			free(m);
			return -SMCR_E_NOMEM;
		}
		/* New slots go on the free list, lowest first. Generations start at a value
		 * derived from the slot so keys of different devices rarely coincide. */
		for (uint32_t i = d->mr_cap; i < ncap; i++) {
			n[i].mr = NULL;
			n[i].gen = (uint8_t)(0x5a + i * 7);
			n[i].next_free = i + 1 < ncap ? i + 1 : EMU_MR_NONE;
		}
		d->mrs = n;
		d->mr_free = d->mr_cap;
		d->mr_cap = ncap;
	}
	uint32_t slot = d->mr_free;
	struct emu_mr_slot *s = &d->mrs[slot];
	d->mr_free = s->next_free;
	s->gen++;
	uint32_t key = slot << 8 | s->gen;
	m->slot = slot;
	dev_mr_init(&m->mr, pd, addr, length, access, key, key);
	s->mr = m;
	d->nmr++;
	pthread_rwlock_unlock(&d->mr_lock);
	*out = &m->mr;
	return 0;
}

int emu_dereg_mr(struct dev_mr *mr)
{
	struct emu_mr *m = EMU_MR(mr);
	struct emu_dev *d = EMU_DEV(mr->pd->dev);
	/* Writers exclude the I/O thread's copies into the MR: once this returns, no frame
	 * touches the memory (dev.h: the rkey is invalid when dereg returns). */
	pthread_rwlock_wrlock(&d->mr_lock);
	struct emu_mr_slot *s = &d->mrs[m->slot];
	s->mr = NULL;
	s->next_free = d->mr_free;
	d->mr_free = m->slot;
	d->nmr--;
	pthread_rwlock_unlock(&d->mr_lock);
	free(m);
	return 0;
}

void emu_mr_table_fini(struct emu_dev *d)
{
	free(d->mrs);
	d->mrs = NULL;
	d->mr_cap = 0;
}

/* ---- completion queues -------------------------------------------------------------- */

int emu_create_cq(struct dev_device *dev, int cqe, void *ctx, struct dev_cq **out)
{
	struct emu_dev *d = EMU_DEV(dev);
	if (cqe < 1 || (unsigned)cqe > EMU_MAX_CQE)
		return -SMCR_E_DEV_BAD_ATTR;
	struct emu_cq *c = calloc(1, sizeof *c);
	if (!c)
		return -SMCR_E_NOMEM;
	c->cap = (uint32_t)cqe;
	c->ring = calloc(c->cap, sizeof *c->ring);
	c->x = calloc(c->cap, sizeof *c->x);
	emu_fd_begin();
	int fd = emu_fd_end(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (!c->ring || !c->x || fd < 0) {
		if (fd >= 0)
			emu_fd_close(fd);
		free(c->ring);
		free(c->x);
		free(c);
		return fd < 0 ? -SMCR_E_EMU_SYS : -SMCR_E_NOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->qps_lock, NULL);
	c->dev = d;
	dev_cq_init(&c->cq, dev, cqe, ctx, fd);
	*out = &c->cq;
	return 0;
}

int emu_destroy_cq(struct dev_cq *cq)
{
	struct emu_cq *c = EMU_CQ(cq);
	emu_fd_close(cq->comp_fd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->qps_lock);
	free(c->qps);
	free(c->ring);
	free(c->x);
	free(c);
	return 0;
}

static void emu_fd_signal(int fd)
{
	uint64_t one = 1;
	/* An eventfd write fails only when the counter would overflow, i.e. never here. */
	while (write(fd, &one, sizeof one) < 0 && errno == EINTR)
		;
}

static void emu_fd_drain(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof v) < 0 && errno == EINTR)
		;
}

void emu_cq_push(struct emu_cq *c, const struct dev_wc *wc, int solicited, struct emu_qp *qp,
		 uint64_t retire)
{
	pthread_mutex_lock(&c->lock);
	if (c->n == c->cap) {
		/* The caller sized the CQ for its queues; flushes of many QPs can still exceed
		 * it. Grow (dev.h: providers may grow a CQ) rather than lose a completion. */
		uint32_t ncap = c->cap * 2;
		struct dev_wc *n = malloc(ncap * sizeof *n);
		struct emu_cqx *nx = malloc(ncap * sizeof *nx);
		if (!n || !nx) {
			free(n);
			free(nx);
			pthread_mutex_unlock(&c->lock);
			LOG_ERR("emu", "CQ overflow: completion of wr_id %llu lost",
				(unsigned long long)wc->wr_id);
			emu_event_push(c->dev, DEV_EVENT_CQ_ERR, 0, NULL);
			return;
		}
		for (uint32_t i = 0; i < c->n; i++) {
			n[i] = c->ring[(c->head + i) % c->cap];
			nx[i] = c->x[(c->head + i) % c->cap];
		}
		free(c->ring);
		free(c->x);
		c->ring = n;
		c->x = nx;
		c->head = 0;
		c->cap = ncap;
	}
	uint32_t at = (c->head + c->n) % c->cap;
	c->ring[at] = *wc;
	c->x[at].qp = qp;
	c->x[at].retire = retire;
	c->n++;
	int wake = c->armed == EMU_ARM_ANY ||
		   (c->armed == EMU_ARM_SOLICITED && (solicited || wc->status != DEV_WC_SUCCESS));
	if (wake) {
		c->armed = 0;
		emu_fd_signal(c->cq.comp_fd);
	}
	pthread_mutex_unlock(&c->lock);
}

int emu_req_notify_cq(struct dev_cq *cq, int solicited_only)
{
	struct emu_cq *c = EMU_CQ(cq);
	pthread_mutex_lock(&c->lock);
	/* An armed-for-any CQ stays so when re-armed for solicited (verbs: the wider wins). */
	if (!solicited_only)
		c->armed = EMU_ARM_ANY;
	else if (c->armed != EMU_ARM_ANY)
		c->armed = EMU_ARM_SOLICITED;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int emu_get_cq_event(struct dev_cq *cq)
{
	uint64_t v;
	for (;;) {
		ssize_t r = read(cq->comp_fd, &v, sizeof v);
		if (r == (ssize_t)sizeof v)
			return 0;
		if (r < 0 && errno == EINTR)
			continue;
		return -SMCR_E_AGAIN;
	}
}

int emu_cq_attach_qp(struct emu_cq *c, struct emu_qp *q, unsigned role)
{
	pthread_mutex_lock(&c->qps_lock);
	for (uint32_t i = 0; i < c->nqps; i++) {
		if (c->qps[i].qp == q) {
			c->qps[i].role |= role;	/* send and receive CQ are the same */
			pthread_mutex_unlock(&c->qps_lock);
			return 0;
		}
	}
	if (c->nqps == c->qps_cap) {
		uint32_t ncap = c->qps_cap ? c->qps_cap * 2 : 8;
		struct emu_cq_member *n = realloc(c->qps, ncap * sizeof *n);
		if (!n) {
			pthread_mutex_unlock(&c->qps_lock);
			return -SMCR_E_NOMEM;
		}
		c->qps = n;
		c->qps_cap = ncap;
	}
	c->qps[c->nqps].qp = q;
	c->qps[c->nqps].role = role;
	c->nqps++;
	pthread_mutex_unlock(&c->qps_lock);
	return 0;
}

/* Receive-side progress in the poller (dev.h: "providers do their receive-side progress
 * here"): the sockets of QPs that wait for something this CQ reports (ACKs for their sends,
 * messages for their receive WRs) are read and applied at once, so a spinning poller gets
 * its completions without waiting for the I/O thread to be scheduled. trylock: a QP the
 * I/O thread is working on is left to it. */
#define EMU_PUMP_MAX 8	/* QPs looked at per poll: polling stays cheap with many QPs */

static void emu_cq_pump(struct emu_cq *c)
{
	pthread_mutex_lock(&c->qps_lock);
	uint32_t looked = 0;
	for (uint32_t k = 0; k < c->nqps && looked < EMU_PUMP_MAX; k++) {
		struct emu_cq_member *m = &c->qps[(c->pump_next + k) % c->nqps];
		struct emu_qp *q = m->qp;
		if (!((m->role & EMU_CQ_SEND) &&
		      atomic_load_explicit(&q->awaiting_ack, memory_order_relaxed)) &&
		    !((m->role & EMU_CQ_RECV) &&
		      atomic_load_explicit(&q->recv_posted, memory_order_relaxed)))
			continue;
		looked++;
		if (pthread_mutex_trylock(&q->lock) != 0)
			continue;
		if ((q->cs == EMU_CS_UP || q->cs == EMU_CS_HELLO) && q->fd >= 0 && !q->stalled &&
		    !q->rx_parked)
			emu_rx_pump_locked(q, 1);
		pthread_mutex_unlock(&q->lock);
	}
	if (c->nqps)
		c->pump_next = (c->pump_next + 1) % c->nqps;
	pthread_mutex_unlock(&c->qps_lock);
}

int emu_poll_cq(struct dev_cq *cq, int n, struct dev_wc *wc)
{
	struct emu_cq *c = EMU_CQ(cq);
	if (n < 0)
		return -SMCR_E_INVAL;
	pthread_mutex_lock(&c->lock);
	uint32_t have = c->n;
	pthread_mutex_unlock(&c->lock);
	if (have < (uint32_t)n)
		emu_cq_pump(c);
	pthread_mutex_lock(&c->lock);
	int got = 0;
	while (got < n && c->n) {
		wc[got++] = c->ring[c->head];
		struct emu_cqx *x = &c->x[c->head];
		if (x->qp) {
			/* Frees the send queue slots up to this WR. The QP cannot be freed meanwhile:
			 * destroy_qp clears x->qp under this lock first. Several pollers may race:
			 * the count only grows (atomic max). */
			uint64_t cur = atomic_load(&x->qp->sq_retired);
			while (cur < x->retire &&
			       !atomic_compare_exchange_weak(&x->qp->sq_retired, &cur, x->retire))
				;
		}
		c->head = (c->head + 1) % c->cap;
		c->n--;
	}
	pthread_mutex_unlock(&c->lock);
	return got;
}

void emu_cq_forget_qp(struct emu_cq *c, struct emu_qp *q)
{
	pthread_mutex_lock(&c->qps_lock);
	for (uint32_t i = 0; i < c->nqps; i++) {
		if (c->qps[i].qp == q) {
			c->qps[i] = c->qps[--c->nqps];
			break;
		}
	}
	pthread_mutex_unlock(&c->qps_lock);
	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < c->n; i++) {
		struct emu_cqx *x = &c->x[(c->head + i) % c->cap];
		if (x->qp == q)
			x->qp = NULL;
	}
	pthread_mutex_unlock(&c->lock);
}

/* ---- async events ------------------------------------------------------------------- */

/* dev->async_fd (d->evfd) is an eventfd that is nonzero exactly while ev_n > 0: set on the
 * first push, drained when the queue empties (both under ev_lock). */
void emu_event_push(struct emu_dev *d, enum dev_event_type type, uint32_t qpn, void *ctx)
{
	pthread_mutex_lock(&d->ev_lock);
	if (d->ev_n == d->ev_cap) {
		uint32_t ncap = d->ev_cap ? d->ev_cap * 2 : 16;
		struct dev_async_event *n = malloc(ncap * sizeof *n);
		if (!n) {
			pthread_mutex_unlock(&d->ev_lock);
			LOG_ERR("emu", "async event %s lost (no memory)", dev_event_type_str(type));
			return;
		}
		for (uint32_t i = 0; i < d->ev_n; i++)
			n[i] = d->evq[(d->ev_head + i) % d->ev_cap];
		free(d->evq);
		d->evq = n;
		d->ev_head = 0;
		d->ev_cap = ncap;
	}
	struct dev_async_event *e = &d->evq[(d->ev_head + d->ev_n) % d->ev_cap];
	memset(e, 0, sizeof *e);
	e->type = type;
	e->port_num = 1;
	e->qp_num = qpn;
	e->qp_context = ctx;
	if (d->ev_n++ == 0)
		emu_fd_signal(d->evfd);
	pthread_mutex_unlock(&d->ev_lock);
	LOG_DBG("emu", "%s: event %s qp %u", d->dev.name, dev_event_type_str(type), qpn);
}

int emu_get_async_event(struct dev_device *dev, struct dev_async_event *ev)
{
	struct emu_dev *d = EMU_DEV(dev);
	int rc = -SMCR_E_AGAIN;
	pthread_mutex_lock(&d->ev_lock);
	if (d->ev_n) {
		*ev = d->evq[d->ev_head];
		d->ev_head = (d->ev_head + 1) % d->ev_cap;
		if (--d->ev_n == 0)
			emu_fd_drain(d->evfd);
		rc = 0;
	}
	pthread_mutex_unlock(&d->ev_lock);
	return rc;
}

static int emu_event_is_qp(enum dev_event_type t)
{
	switch (t) {
	case DEV_EVENT_QP_FATAL:
	case DEV_EVENT_QP_REQ_ERR:
	case DEV_EVENT_QP_ACCESS_ERR:
	case DEV_EVENT_COMM_EST:
		return 1;
	case DEV_EVENT_CQ_ERR:
	case DEV_EVENT_PORT_ACTIVE:
	case DEV_EVENT_PORT_ERR:
	case DEV_EVENT_DEVICE_FATAL:
		return 0;
	}
	return 0;
}

void emu_event_drop_qp(struct emu_dev *d, uint32_t qpn)
{
	pthread_mutex_lock(&d->ev_lock);
	uint32_t kept = 0;
	for (uint32_t i = 0; i < d->ev_n; i++) {
		struct dev_async_event e = d->evq[(d->ev_head + i) % d->ev_cap];
		if (emu_event_is_qp(e.type) && e.qp_num == qpn)
			continue;
		d->evq[(d->ev_head + kept) % d->ev_cap] = e;
		kept++;
	}
	if (d->ev_n && !kept)
		emu_fd_drain(d->evfd);
	d->ev_n = kept;
	pthread_mutex_unlock(&d->ev_lock);
}
