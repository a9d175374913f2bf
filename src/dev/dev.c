/* dev.c: the device interface's core: provider registry, the table of "not supported"
 * defaults, the thin verbs wrappers that keep holds and user counts, and helpers shared
 * by providers (QP transition check, names). Interface and semantics: dev.h. */
#define _GNU_SOURCE
#include "dev/dev.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"

/* ---- defaults: every op returns NOTSUP, so the core never checks for NULL ---------- */

static int def_alloc_pd(struct dev_device *d, struct dev_pd **o) { (void)d; (void)o; return -SMCR_E_NOTSUP; }
static void def_close_device(struct dev_device *d) { (void)d; }
static int def_create_cq(struct dev_device *d, int n, void *c, struct dev_cq **o) { (void)d; (void)n; (void)c; (void)o; return -SMCR_E_NOTSUP; }
static int def_create_qp(struct dev_pd *p, const struct dev_qp_init_attr *a, struct dev_qp **o) { (void)p; (void)a; (void)o; return -SMCR_E_NOTSUP; }
static int def_dealloc_pd(struct dev_pd *p) { (void)p; return -SMCR_E_NOTSUP; }
static int def_dereg_mr(struct dev_mr *m) { (void)m; return -SMCR_E_NOTSUP; }
static int def_destroy_cq(struct dev_cq *c) { (void)c; return -SMCR_E_NOTSUP; }
static int def_destroy_qp(struct dev_qp *q) { (void)q; return -SMCR_E_NOTSUP; }
static int def_disarm_cq(struct dev_cq *c) { (void)c; return -SMCR_E_NOTSUP; }
static int def_get_async_event(struct dev_device *d, struct dev_async_event *e) { (void)d; (void)e; return -SMCR_E_NOTSUP; }
static int def_get_cq_event(struct dev_cq *c) { (void)c; return -SMCR_E_NOTSUP; }
static int def_modify_qp(struct dev_qp *q, const struct dev_qp_attr *a, unsigned m) { (void)q; (void)a; (void)m; return -SMCR_E_NOTSUP; }
static int def_poll_cq(struct dev_cq *c, int n, struct dev_wc *w) { (void)c; (void)n; (void)w; return -SMCR_E_NOTSUP; }
static int def_post_recv(struct dev_qp *q, const struct dev_recv_wr *w, const struct dev_recv_wr **b) { (void)q; if (b) *b = w; return -SMCR_E_NOTSUP; }
static int def_post_send(struct dev_qp *q, const struct dev_send_wr *w, const struct dev_send_wr **b) { (void)q; if (b) *b = w; return -SMCR_E_NOTSUP; }
static int def_query_device(struct dev_device *d, struct dev_device_attr *a) { (void)d; (void)a; return -SMCR_E_NOTSUP; }
static int def_query_gid(struct dev_device *d, uint8_t p, int i, struct dev_gid_entry *o) { (void)d; (void)p; (void)i; (void)o; return -SMCR_E_NOTSUP; }
static int def_query_port(struct dev_device *d, uint8_t p, struct dev_port_attr *a) { (void)d; (void)p; (void)a; return -SMCR_E_NOTSUP; }
static int def_query_qp(struct dev_qp *q, struct dev_qp_attr *a) { (void)q; (void)a; return -SMCR_E_NOTSUP; }
static int def_reg_mr(struct dev_pd *p, void *a, size_t l, unsigned x, struct dev_mr **o) { (void)p; (void)a; (void)l; (void)x; (void)o; return -SMCR_E_NOTSUP; }
static int def_req_notify_cq(struct dev_cq *c, int s) { (void)c; (void)s; return -SMCR_E_NOTSUP; }
static int def_set_port_state(struct dev_device *d, uint8_t p, int u) { (void)d; (void)p; (void)u; return -SMCR_E_NOTSUP; }

static const struct dev_ops dev_default_ops = {
	.alloc_pd = def_alloc_pd,
	.close_device = def_close_device,
	.create_cq = def_create_cq,
	.create_qp = def_create_qp,
	.dealloc_pd = def_dealloc_pd,
	.dereg_mr = def_dereg_mr,
	.destroy_cq = def_destroy_cq,
	.destroy_qp = def_destroy_qp,
	.disarm_cq = def_disarm_cq,
	.get_async_event = def_get_async_event,
	.get_cq_event = def_get_cq_event,
	.modify_qp = def_modify_qp,
	.poll_cq = def_poll_cq,
	.post_recv = def_post_recv,
	.post_send = def_post_send,
	.query_device = def_query_device,
	.query_gid = def_query_gid,
	.query_port = def_query_port,
	.query_qp = def_query_qp,
	.reg_mr = def_reg_mr,
	.req_notify_cq = def_req_notify_cq,
	.set_port_state = def_set_port_state,
};

/* ---- registry ---------------------------------------------------------------------- */

struct dev_reg_entry {
	const struct dev_provider *p;
	struct dev_ops ops;	/* p->ops laid over dev_default_ops; never changes once set */
};

/* Lock order: dev_reg_lock is a leaf (never held while calling a provider). It protects
 * dev_reg[] and dev_reg_n. Entries are never removed, so a pointer to an entry's ops stays
 * valid for the life of the process once dev_reg_n covers it. */
static pthread_mutex_t dev_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dev_reg_entry dev_reg[DEV_MAX_PROVIDERS];
static int dev_reg_n;

static void dev_ops_merge(struct dev_ops *dst, const struct dev_ops *p)
{
	*dst = dev_default_ops;
	if (!p)
		return;
#define M(f) if (p->f) dst->f = p->f
	M(alloc_pd); M(close_device); M(create_cq); M(create_qp); M(dealloc_pd); M(dereg_mr);
	M(destroy_cq); M(destroy_qp); M(disarm_cq); M(get_async_event); M(get_cq_event); M(modify_qp);
	M(poll_cq); M(post_recv); M(post_send); M(query_device); M(query_gid); M(query_port);
	M(query_qp); M(reg_mr); M(req_notify_cq); M(set_port_state);
#undef M
}

int dev_provider_register(const struct dev_provider *p)
{
	int rc = 0;

	if (!p || !p->name || !p->name[0] || !p->open || strlen(p->name) >= DEV_NAME_MAX ||
	    strchr(p->name, ':'))
		return -SMCR_E_INVAL;
	pthread_mutex_lock(&dev_reg_lock);
	for (int i = 0; i < dev_reg_n; i++) {
		if (strcmp(dev_reg[i].p->name, p->name) == 0) {
			rc = dev_reg[i].p == p ? 0 : -SMCR_E_DEV_EXISTS;
			goto out;
		}
	}
	if (dev_reg_n == DEV_MAX_PROVIDERS) {
		rc = -SMCR_E_DEV_TOO_MANY;
		goto out;
	}
	dev_reg[dev_reg_n].p = p;
	dev_ops_merge(&dev_reg[dev_reg_n].ops, p->ops);
	dev_reg_n++;
	LOG_DBG("dev", "provider %s registered", p->name);
out:
	pthread_mutex_unlock(&dev_reg_lock);
	return rc;
}

int dev_provider_count(void)
{
	pthread_mutex_lock(&dev_reg_lock);
	int n = dev_reg_n;
	pthread_mutex_unlock(&dev_reg_lock);
	return n;
}

const char *dev_provider_name(int i)
{
	const char *name = NULL;

	pthread_mutex_lock(&dev_reg_lock);
	if (i >= 0 && i < dev_reg_n)
		name = dev_reg[i].p->name;
	pthread_mutex_unlock(&dev_reg_lock);
	return name;
}

static struct dev_reg_entry *dev_reg_find(const char *name, size_t len)
{
	struct dev_reg_entry *e = NULL;

	pthread_mutex_lock(&dev_reg_lock);
	for (int i = 0; i < dev_reg_n; i++) {
		if (strlen(dev_reg[i].p->name) == len && memcmp(dev_reg[i].p->name, name, len) == 0) {
			e = &dev_reg[i];
			break;
		}
	}
	pthread_mutex_unlock(&dev_reg_lock);
	return e;
}

int dev_provider_registered(const char *name)
{
	return name && dev_reg_find(name, strlen(name)) != NULL;
}

int dev_open(const char *spec, struct dev_device **out)
{
	if (!spec || !out)
		return -SMCR_E_INVAL;
	const char *colon = strchr(spec, ':');
	size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
	struct dev_reg_entry *e = dev_reg_find(spec, len);
	if (!e)
		return -SMCR_E_DEV_NO_PROVIDER;
	return e->p->open(&e->ops, colon ? colon + 1 : "", out);
}

int dev_open_by_gid(const struct dev_gid *gid, struct dev_device **out)
{
	if (!gid || !out)
		return -SMCR_E_INVAL;
	for (int i = 0;; i++) {
		struct dev_reg_entry *e = NULL;
		pthread_mutex_lock(&dev_reg_lock);
		if (i < dev_reg_n)
			e = &dev_reg[i];
		pthread_mutex_unlock(&dev_reg_lock);
		if (!e)
			return -SMCR_E_DEV_NO_DEVICE;
		if (!e->p->open_by_gid)
			continue;
		int rc = e->p->open_by_gid(&e->ops, gid, out);
		if (rc != -SMCR_E_DEV_NO_DEVICE)
			return rc;
	}
}

/* ---- references -------------------------------------------------------------------- */

void dev_device_init(struct dev_device *dev, const struct dev_ops *ops, const char *provider,
		     const char *name, uint8_t phys_port_cnt, int async_fd)
{
	dev->ops = ops;
	snprintf(dev->provider, sizeof dev->provider, "%s", provider);
	snprintf(dev->name, sizeof dev->name, "%s", name);
	dev->phys_port_cnt = phys_port_cnt;
	dev->async_fd = async_fd;
	atomic_init(&dev->refcnt, 1);
}

void dev_hold(struct dev_device *dev)
{
	/* relaxed: the caller already holds a reference, so the count cannot reach 0 here. */
	atomic_fetch_add_explicit(&dev->refcnt, 1, memory_order_relaxed);
}

void dev_put(struct dev_device *dev)
{
	if (!dev)
		return;
	/* acq_rel: the thread dropping the last reference must see every other thread's
	 * writes to the device before closing it (pairs with the release of their puts). */
	if (atomic_fetch_sub_explicit(&dev->refcnt, 1, memory_order_acq_rel) == 1)
		dev->ops->close_device(dev);
}

void dev_close(struct dev_device *dev)
{
	dev_put(dev);
}

/* ---- verbs wrappers ---------------------------------------------------------------- */

int dev_query_device(struct dev_device *dev, struct dev_device_attr *attr)
{
	memset(attr, 0, sizeof *attr);
	return dev->ops->query_device(dev, attr);
}

int dev_query_port(struct dev_device *dev, uint8_t port, struct dev_port_attr *attr)
{
	if (port < 1 || port > dev->phys_port_cnt)
		return -SMCR_E_INVAL;
	memset(attr, 0, sizeof *attr);
	return dev->ops->query_port(dev, port, attr);
}

int dev_query_gid(struct dev_device *dev, uint8_t port, int index, struct dev_gid_entry *out)
{
	if (port < 1 || port > dev->phys_port_cnt || index < 0)
		return -SMCR_E_INVAL;
	memset(out, 0, sizeof *out);
	return dev->ops->query_gid(dev, port, index, out);
}

int dev_alloc_pd(struct dev_device *dev, struct dev_pd **out)
{
	int rc = dev->ops->alloc_pd(dev, out);
	if (rc)
		return rc;
	dev_hold(dev);	/* put in dev_dealloc_pd */
	return 0;
}

int dev_dealloc_pd(struct dev_pd *pd)
{
	struct dev_device *dev = pd->dev;

	if (atomic_load(&pd->users))
		return -SMCR_E_DEV_BUSY;
	int rc = dev->ops->dealloc_pd(pd);
	if (rc)
		return rc;
	dev_put(dev);	/* hold in dev_alloc_pd */
	return 0;
}

int dev_reg_mr(struct dev_pd *pd, void *addr, size_t length, unsigned access,
	       struct dev_mr **out)
{
	if (!addr || !length)
		return -SMCR_E_DEV_BAD_ATTR;
	if (access & ~(unsigned)(DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE |
				 DEV_ACCESS_REMOTE_READ))
		return -SMCR_E_DEV_BAD_ATTR;
	/* verbs: remote write without local write is refused (IB spec 10.6.3.1). */
	if ((access & DEV_ACCESS_REMOTE_WRITE) && !(access & DEV_ACCESS_LOCAL_WRITE))
		return -SMCR_E_DEV_BAD_ATTR;
	atomic_fetch_add(&pd->users, 1);
	int rc = pd->dev->ops->reg_mr(pd, addr, length, access, out);
	if (rc)
		atomic_fetch_sub(&pd->users, 1);
	return rc;
}

int dev_dereg_mr(struct dev_mr *mr)
{
	struct dev_pd *pd = mr->pd;
	int rc = pd->dev->ops->dereg_mr(mr);
	if (rc)
		return rc;
	atomic_fetch_sub(&pd->users, 1);
	return 0;
}

int dev_create_cq(struct dev_device *dev, int cqe, void *cq_context, struct dev_cq **out)
{
	if (cqe < 1)
		return -SMCR_E_DEV_BAD_ATTR;
	int rc = dev->ops->create_cq(dev, cqe, cq_context, out);
	if (rc)
		return rc;
	dev_hold(dev);	/* put in dev_destroy_cq */
	return 0;
}

int dev_destroy_cq(struct dev_cq *cq)
{
	struct dev_device *dev = cq->dev;

	if (atomic_load(&cq->users))
		return -SMCR_E_DEV_BUSY;
	int rc = dev->ops->destroy_cq(cq);
	if (rc)
		return rc;
	dev_put(dev);	/* hold in dev_create_cq */
	return 0;
}

int dev_req_notify_cq(struct dev_cq *cq, int solicited_only)
{
	return cq->dev->ops->req_notify_cq(cq, solicited_only);
}

int dev_disarm_cq(struct dev_cq *cq)
{
	return cq->dev->ops->disarm_cq(cq);
}

int dev_get_cq_event(struct dev_cq *cq)
{
	return cq->dev->ops->get_cq_event(cq);
}

int dev_poll_cq(struct dev_cq *cq, int n, struct dev_wc *wc)
{
	return cq->dev->ops->poll_cq(cq, n, wc);
}

static inline void dev_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("pause");
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

int dev_poll_cq_wait(struct dev_cq *cq, int n, struct dev_wc *wc, uint64_t spin_ns,
		     int timeout_ms)
{
	int rc = dev_poll_cq(cq, n, wc);
	if (rc)
		return rc;
	if (spin_ns) {
		uint64_t now = smcr_now_ns(), end = now + spin_ns, yield_at = now + 2000;
		do {
			for (int i = 0; i < 32; i++)
				dev_cpu_relax();
			rc = dev_poll_cq(cq, n, wc);
			if (rc)
				return rc;
			now = smcr_now_ns();
			/* Every 2 us of spinning, let a runnable thread on this CPU (often the
			 * peer we wait for, on a loaded 2-core machine) have it; returns at
			 * once when nothing else wants the CPU. */
			if (now >= yield_at) {
				sched_yield();
				yield_at = now + 2000;
			}
		} while (now < end);
	}
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX
					   : smcr_now_ns() + (uint64_t)timeout_ms * SMCR_NS_PER_MS;
	for (;;) {
		rc = dev_req_notify_cq(cq, 0);
		if (rc)
			return rc;
		rc = dev_poll_cq(cq, n, wc);	/* completions that raced with the arm */
		if (rc)
			return rc;
		int wait_ms = -1;
		if (deadline != UINT64_MAX) {
			uint64_t now = smcr_now_ns();
			if (now >= deadline)
				return 0;
			wait_ms = (int)((deadline - now + SMCR_NS_PER_MS - 1) / SMCR_NS_PER_MS);
		}
		struct pollfd pfd = { .fd = cq->comp_fd, .events = POLLIN };
		int pr = poll(&pfd, 1, wait_ms);
		if (pr < 0 && errno != EINTR)
			return -SMCR_E_INTERNAL;
		if (pr > 0) {
			rc = dev_get_cq_event(cq);
			if (rc && rc != -SMCR_E_AGAIN)
				return rc;
		}
		rc = dev_poll_cq(cq, n, wc);
		if (rc)
			return rc;
	}
}

int dev_create_qp(struct dev_pd *pd, const struct dev_qp_init_attr *attr, struct dev_qp **out)
{
	if (!attr || !attr->send_cq || !attr->recv_cq || attr->send_cq->dev != pd->dev ||
	    attr->recv_cq->dev != pd->dev)
		return -SMCR_E_DEV_BAD_ATTR;
	int rc = pd->dev->ops->create_qp(pd, attr, out);
	if (rc)
		return rc;
	atomic_fetch_add(&pd->users, 1);
	atomic_fetch_add(&attr->send_cq->users, 1);
	atomic_fetch_add(&attr->recv_cq->users, 1);
	dev_hold(pd->dev);	/* put in dev_destroy_qp */
	return 0;
}

int dev_modify_qp(struct dev_qp *qp, const struct dev_qp_attr *attr, unsigned mask)
{
	return qp->dev->ops->modify_qp(qp, attr, mask);
}

int dev_query_qp(struct dev_qp *qp, struct dev_qp_attr *attr)
{
	memset(attr, 0, sizeof *attr);
	return qp->dev->ops->query_qp(qp, attr);
}

int dev_destroy_qp(struct dev_qp *qp)
{
	struct dev_device *dev = qp->dev;
	struct dev_pd *pd = qp->pd;
	struct dev_cq *scq = qp->send_cq, *rcq = qp->recv_cq;
	int rc = dev->ops->destroy_qp(qp);
	if (rc)
		return rc;
	atomic_fetch_sub(&pd->users, 1);
	atomic_fetch_sub(&scq->users, 1);
	atomic_fetch_sub(&rcq->users, 1);
	dev_put(dev);	/* hold in dev_create_qp */
	return 0;
}

int dev_post_send(struct dev_qp *qp, const struct dev_send_wr *wr,
		  const struct dev_send_wr **bad_wr)
{
	return qp->dev->ops->post_send(qp, wr, bad_wr);
}

int dev_post_recv(struct dev_qp *qp, const struct dev_recv_wr *wr,
		  const struct dev_recv_wr **bad_wr)
{
	return qp->dev->ops->post_recv(qp, wr, bad_wr);
}

int dev_get_async_event(struct dev_device *dev, struct dev_async_event *ev)
{
	memset(ev, 0, sizeof *ev);
	return dev->ops->get_async_event(dev, ev);
}

int dev_set_port_state(struct dev_device *dev, uint8_t port, int up)
{
	if (port < 1 || port > dev->phys_port_cnt)
		return -SMCR_E_INVAL;
	return dev->ops->set_port_state(dev, port, up);
}

/* ---- helpers ----------------------------------------------------------------------- */

void dev_pd_init(struct dev_pd *pd, struct dev_device *dev)
{
	pd->dev = dev;
	atomic_init(&pd->users, 0);
}

void dev_cq_init(struct dev_cq *cq, struct dev_device *dev, int cqe, void *cq_context,
		 int comp_fd)
{
	cq->dev = dev;
	cq->cqe = cqe;
	cq->cq_context = cq_context;
	cq->comp_fd = comp_fd;
	atomic_init(&cq->users, 0);
}

void dev_qp_init(struct dev_qp *qp, struct dev_pd *pd, const struct dev_qp_init_attr *attr,
		 uint32_t qp_num, const struct dev_qp_cap *granted)
{
	qp->dev = pd->dev;
	qp->pd = pd;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->qp_context = attr->qp_context;
	qp->qp_num = qp_num;
	qp->cap = *granted;
	atomic_init(&qp->state, DEV_QPS_RESET);
}

void dev_mr_init(struct dev_mr *mr, struct dev_pd *pd, void *addr, size_t length,
		 unsigned access, uint32_t lkey, uint32_t rkey)
{
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	mr->access = access;
	mr->lkey = lkey;
	mr->rkey = rkey;
}

int dev_qp_check_modify(enum dev_qp_state cur, const struct dev_qp_attr *attr, unsigned mask)
{
	if (!attr || !(mask & DEV_QP_STATE))
		return -SMCR_E_DEV_BAD_ATTR;	/* only state transitions are supported */
	switch (attr->qp_state) {
	case DEV_QPS_RESET:
	case DEV_QPS_ERR:
		return 0;	/* any state -> RESET / ERR (IB spec 10.3.1) */
	case DEV_QPS_INIT:
		if (cur != DEV_QPS_RESET && cur != DEV_QPS_INIT)
			return -SMCR_E_DEV_BAD_STATE;
		if (cur == DEV_QPS_RESET && (mask & DEV_QP_MASK_INIT) != DEV_QP_MASK_INIT)
			return -SMCR_E_DEV_BAD_ATTR;
		return 0;
	case DEV_QPS_RTR:
		if (cur != DEV_QPS_INIT)
			return -SMCR_E_DEV_BAD_STATE;
		if ((mask & DEV_QP_MASK_RTR) != DEV_QP_MASK_RTR)
			return -SMCR_E_DEV_BAD_ATTR;
		if (!dev_mtu_bytes(attr->path_mtu) || attr->dest_qp_num > 0xffffffu ||
		    attr->dest_qp_num == 0 || attr->rq_psn > 0xffffffu)
			return -SMCR_E_DEV_BAD_ATTR;
		return 0;
	case DEV_QPS_RTS:
		if (cur == DEV_QPS_RTS)
			return 0;
		if (cur != DEV_QPS_RTR)
			return -SMCR_E_DEV_BAD_STATE;
		if ((mask & DEV_QP_MASK_RTS) != DEV_QP_MASK_RTS)
			return -SMCR_E_DEV_BAD_ATTR;
		if (attr->sq_psn > 0xffffffu || attr->retry_cnt > 7 || attr->rnr_retry > 7 ||
		    attr->timeout > 31)
			return -SMCR_E_DEV_BAD_ATTR;
		return 0;
	}
	return -SMCR_E_DEV_BAD_ATTR;
}

uint32_t dev_mtu_bytes(enum dev_mtu mtu)
{
	switch (mtu) {
	case DEV_MTU_256: return 256;
	case DEV_MTU_512: return 512;
	case DEV_MTU_1024: return 1024;
	case DEV_MTU_2048: return 2048;
	case DEV_MTU_4096: return 4096;
	}
	return 0;
}

const char *dev_qp_state_str(enum dev_qp_state s)
{
	switch (s) {
	case DEV_QPS_RESET: return "RESET";
	case DEV_QPS_INIT: return "INIT";
	case DEV_QPS_RTR: return "RTR";
	case DEV_QPS_RTS: return "RTS";
	case DEV_QPS_ERR: return "ERR";
	}
	return "?";
}

const char *dev_wc_status_str(enum dev_wc_status s)
{
	switch (s) {
	case DEV_WC_SUCCESS: return "success";
	case DEV_WC_LOC_LEN_ERR: return "local length error";
	case DEV_WC_LOC_QP_OP_ERR: return "local QP operation error";
	case DEV_WC_LOC_PROT_ERR: return "local protection error";
	case DEV_WC_WR_FLUSH_ERR: return "WR flushed";
	case DEV_WC_REM_INV_REQ_ERR: return "remote invalid request";
	case DEV_WC_REM_ACCESS_ERR: return "remote access error";
	case DEV_WC_REM_OP_ERR: return "remote operation error";
	case DEV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
	case DEV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
	case DEV_WC_FATAL_ERR: return "fatal error";
	case DEV_WC_GENERAL_ERR: return "general error";
	}
	return "?";
}

const char *dev_event_type_str(enum dev_event_type t)
{
	switch (t) {
	case DEV_EVENT_CQ_ERR: return "CQ error";
	case DEV_EVENT_QP_FATAL: return "QP fatal";
	case DEV_EVENT_QP_REQ_ERR: return "QP request error";
	case DEV_EVENT_QP_ACCESS_ERR: return "QP access error";
	case DEV_EVENT_COMM_EST: return "communication established";
	case DEV_EVENT_PORT_ACTIVE: return "port active";
	case DEV_EVENT_PORT_ERR: return "port error";
	case DEV_EVENT_DEVICE_FATAL: return "device fatal";
	}
	return "?";
}

void dev_gid_str(const struct dev_gid *gid, char out[DEV_GID_STR_LEN])
{
	const uint8_t *b = gid->raw;
	snprintf(out, DEV_GID_STR_LEN, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

int dev_gid_ipv4(const struct dev_gid *gid, uint32_t *ip)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (memcmp(gid->raw, mapped, sizeof mapped) != 0)
		return 0;
	*ip = (uint32_t)gid->raw[12] << 24 | (uint32_t)gid->raw[13] << 16 |
	      (uint32_t)gid->raw[14] << 8 | gid->raw[15];
	return 1;
}
