/* verbs_dev.c: the libibverbs provider's devices: discovery of RDMA devices and their
 * ports, dev_open / dev_open_by_gid, device, port and GID queries, asynchronous events,
 * and the provider's registration (docs/parts/verbs.md "Mapping", "Devices and GIDs").
 *
 * Each opened device is one (RDMA device, port) pair, shown as a device with port 1; a
 * process opens each pair once (vb_devs), and opening it again holds the same device, as
 * dev_open_by_gid does for shm and emu. After fork() the child forgets the parent's list
 * (dev.h: a device is not usable in a child; the child opens its own). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev/verbs/verbs_int.h"
#include "util/log.h"

static pthread_mutex_t vb_devs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vb_dev *vb_devs;	/* (vb_devs_lock) open devices of this process */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void vb_atfork_child(void)
{
	/* The parent's contexts are not the child's (dev.h "Threads"): forget, do not free. */
	pthread_mutex_init(&vb_devs_lock, NULL);
	vb_devs = NULL;
}

static void vb_atfork_setup(void)
{
	pthread_atfork(NULL, NULL, vb_atfork_child);
}

int vb_errno_to_err(int e)
{
	switch (e) {
	case ENOMEM:
		return -SMCR_E_DEV_QUEUE_FULL;
	case EINVAL:
		return -SMCR_E_DEV_BAD_ATTR;
	case ENODEV:
	case ENXIO:
		return -SMCR_E_DEV_NO_DEVICE;
	case EBUSY:
		return -SMCR_E_DEV_BUSY;
	case EAGAIN:
		return -SMCR_E_AGAIN;
	case EOPNOTSUPP:
		return -SMCR_E_NOTSUP;
	case ENOSPC:
		return -SMCR_E_DEV_LIMIT;
	default:
		return -SMCR_E_DEV_LIMIT;
	}
}

/* ---- QP records (state updates from events and error completions) ---------------------- */

void vb_dev_qp_add(struct vb_dev *d, struct vb_qp *q)
{
	pthread_mutex_lock(&d->qps_lock);
	q->next = d->qps;
	d->qps = q;
	pthread_mutex_unlock(&d->qps_lock);
}

void vb_dev_qp_del(struct vb_dev *d, struct vb_qp *q)
{
	pthread_mutex_lock(&d->qps_lock);
	for (struct vb_qp **p = &d->qps; *p; p = &(*p)->next)
		if (*p == q) {
			*p = q->next;
			break;
		}
	pthread_mutex_unlock(&d->qps_lock);
}

void vb_dev_qp_err(struct vb_dev *d, uint32_t qpn)
{
	pthread_mutex_lock(&d->qps_lock);
	for (struct vb_qp *q = d->qps; q; q = q->next)
		if (q->qp.qp_num == qpn) {
			pthread_mutex_lock(&q->lock);
			atomic_store(&q->qp.state, DEV_QPS_ERR);
			pthread_mutex_unlock(&q->lock);
			break;
		}
	pthread_mutex_unlock(&d->qps_lock);
}

/* ---- helpers ------------------------------------------------------------------------------ */

static struct vb_dev *vbd(struct dev_device *d)
{
	return DEV_CONTAINER_OF(d, struct vb_dev, dev);
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char *r = fgets(buf, (int)len, f);
	fclose(f);
	if (!r)
		return -1;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* MAC and VLAN of a netdev, from sysfs and /proc/net/vlan. */
static void netdev_l2(const char *ifname, struct dev_gid_entry *out)
{
	char path[128], line[128];
	snprintf(path, sizeof path, "/sys/class/net/%s/address", ifname);
	unsigned m[DEV_MAC_LEN];
	if (read_line(path, line, sizeof line) == 0 &&
	    sscanf(line, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6)
		for (int i = 0; i < DEV_MAC_LEN; i++)
			out->mac[i] = (uint8_t)m[i];
	snprintf(path, sizeof path, "/proc/net/vlan/%s", ifname);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	unsigned vid;
	while (fgets(line, sizeof line, f)) {
		char *p = strstr(line, "VID:");
		if (p && sscanf(p, "VID: %u", &vid) == 1) {
			out->vlan_id = (uint16_t)vid;
			break;
		}
	}
	fclose(f);
}

static bool gid_zero(const uint8_t *g)
{
	for (int i = 0; i < DEV_GID_LEN; i++)
		if (g[i])
			return false;
	return true;
}

/* The GID table entry (real port), or -SMCR_E_INVAL for an empty or missing one. */
static int gid_entry(const struct vb_lib *L, struct ibv_context *ctx, const char *ibname,
		     uint8_t port, int index, struct dev_gid_entry *out)
{
	memset(out, 0, sizeof *out);
	out->vlan_id = DEV_VLAN_NONE;
	char ifname[IF_NAMESIZE + 1] = "";
	if (L->query_gid_ex) {
		struct ibv_gid_entry ge;
		if (L->query_gid_ex(ctx, port, (uint32_t)index, &ge, 0, sizeof ge))
			return -SMCR_E_INVAL;
		memcpy(out->gid.raw, ge.gid.raw, DEV_GID_LEN);
		out->type = ge.gid_type == IBV_GID_TYPE_ROCE_V2	  ? DEV_GID_TYPE_ROCE_V2
			    : ge.gid_type == IBV_GID_TYPE_ROCE_V1 ? DEV_GID_TYPE_ROCE_V1
								  : DEV_GID_TYPE_IB;
		if (ge.ndev_ifindex && !if_indextoname(ge.ndev_ifindex, ifname))
			ifname[0] = 0;
	} else {
		union ibv_gid g;
		if (L->query_gid(ctx, port, index, &g))
			return -SMCR_E_INVAL;
		memcpy(out->gid.raw, g.raw, DEV_GID_LEN);
		char path[160], line[64];
		snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d",
			 ibname, port, index);
		out->type = read_line(path, line, sizeof line) == 0 && strstr(line, "v2")
				    ? DEV_GID_TYPE_ROCE_V2
				    : DEV_GID_TYPE_ROCE_V1;
		snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/gid_attrs/ndevs/%d",
			 ibname, port, index);
		if (read_line(path, line, sizeof line) == 0)
			snprintf(ifname, sizeof ifname, "%.*s", IF_NAMESIZE - 1, line);
	}
	if (gid_zero(out->gid.raw))
		return -SMCR_E_INVAL;
	if (ifname[0])
		netdev_l2(ifname, out);
	return 0;
}

/* ---- ops: queries ------------------------------------------------------------------------ */

static int vb_query_device(struct dev_device *dev, struct dev_device_attr *a)
{
	struct vb_dev *d = vbd(dev);
	memset(a, 0, sizeof *a);
	snprintf(a->provider, sizeof a->provider, "%s", VERBS_PROVIDER_NAME);
	snprintf(a->name, sizeof a->name, "%s", dev->name);
	a->phys_port_cnt = 1;
	a->max_qp = (uint32_t)d->attr.max_qp;
	a->max_qp_wr = (uint32_t)d->attr.max_qp_wr;
	a->max_sge = (uint32_t)d->attr.max_sge;
	a->max_inline_data = d->max_inline;
	a->max_cq = (uint32_t)d->attr.max_cq;
	a->max_cqe = (uint32_t)d->attr.max_cqe;
	a->max_mr = (uint32_t)d->attr.max_mr;
	a->max_mr_size = d->attr.max_mr_size;
	a->node_guid = d->attr.node_guid;
	return 0;
}

static int port_attr(const struct vb_lib *L, struct ibv_context *ctx, uint8_t port,
		     struct ibv_port_attr *pa)
{
	memset(pa, 0, sizeof *pa);
	int rc = L->query_port(ctx, port, pa);
	return rc ? vb_errno_to_err(rc > 0 ? rc : errno) : 0;
}

static int vb_query_port(struct dev_device *dev, uint8_t port, struct dev_port_attr *a)
{
	struct vb_dev *d = vbd(dev);
	if (port != 1)
		return -SMCR_E_INVAL;
	struct ibv_port_attr pa;
	int rc = port_attr(vb_lib(), d->ctx, d->port, &pa);
	if (rc)
		return rc;
	memset(a, 0, sizeof *a);
	a->state = pa.state == IBV_PORT_ACTIVE || pa.state == IBV_PORT_ACTIVE_DEFER
			   ? DEV_PORT_ACTIVE
			   : pa.state == IBV_PORT_DOWN ? DEV_PORT_DOWN : DEV_PORT_INIT;
	a->max_mtu = (enum dev_mtu)pa.max_mtu;
	a->active_mtu = (enum dev_mtu)pa.active_mtu;
	a->gid_tbl_len = (uint32_t)pa.gid_tbl_len;
	a->max_msg_sz = pa.max_msg_sz;
	a->max_send_sz = pa.max_msg_sz; /* RC: a SEND may be as long as any message */
	return 0;
}

static int vb_query_gid(struct dev_device *dev, uint8_t port, int index, struct dev_gid_entry *o)
{
	struct vb_dev *d = vbd(dev);
	if (port != 1 || index < 0)
		return -SMCR_E_INVAL;
	return gid_entry(vb_lib(), d->ctx, d->ibname, d->port, index, o);
}

/* ---- ops: async events --------------------------------------------------------------------- */

static int vb_get_async_event(struct dev_device *dev, struct dev_async_event *ev)
{
	struct vb_dev *d = vbd(dev);
	const struct vb_lib *L = vb_lib();
	for (;;) {
		struct ibv_async_event e;
		if (L->get_async_event(d->ctx, &e))
			return -SMCR_E_AGAIN; /* the fd is nonblocking: nothing queued */
		memset(ev, 0, sizeof *ev);
		bool keep = true;
		switch ((int)e.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_COMM_EST: {
			struct vb_qp *q = e.element.qp->qp_context;
			if (!q) { /* the inline probe's QP (open_new): not a user's */
				keep = false;
				break;
			}
			ev->type = (enum dev_event_type)e.event_type;
			ev->qp_num = q->qp.qp_num;
			ev->qp_context = q->qp.qp_context;
			if (e.event_type != IBV_EVENT_COMM_EST) {
				pthread_mutex_lock(&q->lock);
				atomic_store(&q->qp.state, DEV_QPS_ERR);
				pthread_mutex_unlock(&q->lock);
			}
			break;
		}
		case IBV_EVENT_PORT_ACTIVE:
		case IBV_EVENT_PORT_ERR:
			keep = e.element.port_num == d->port;
			ev->type = (enum dev_event_type)e.event_type;
			ev->port_num = 1;
			break;
		case IBV_EVENT_CQ_ERR:
		case IBV_EVENT_DEVICE_FATAL:
			ev->type = (enum dev_event_type)e.event_type;
			break;
		default:
			keep = false; /* GID/LID/PKEY changes, SRQ events: nothing SMC-R uses */
			break;
		}
		L->ack_async_event(&e);
		if (keep)
			return 0;
	}
}

/* ---- open and close ------------------------------------------------------------------------ */

static void vb_close_device(struct dev_device *dev)
{
	struct vb_dev *d = vbd(dev);
	pthread_mutex_lock(&vb_devs_lock);
	for (struct vb_dev **p = &vb_devs; *p; p = &(*p)->next)
		if (*p == d) {
			*p = d->next;
			break;
		}
	pthread_mutex_unlock(&vb_devs_lock);
	if (vb_lib()->close_device(d->ctx))
		LOG_WARN(VB_UNIT, "ibv_close_device(%s) failed", d->ibname);
	pthread_mutex_destroy(&d->qps_lock);
	free(d);
}

/* The largest inline send the device grants an RC QP (verbs has no attribute for it):
 * asks for decreasing sizes until a QP is created. */
static uint32_t probe_inline(const struct vb_lib *L, struct ibv_context *ctx)
{
	uint32_t got = 0;
	struct ibv_pd *pd = L->alloc_pd(ctx);
	struct ibv_cq *cq = pd ? L->create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	static const uint32_t try[] = { 1024, 512, 256, 128, 64, 44 };
	for (size_t i = 0; cq && i < sizeof try / sizeof try[0] && !got; i++) {
		struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 2, .max_recv_wr = 2,
							.max_send_sge = 2, .max_recv_sge = 1,
							.max_inline_data = try[i] } };
		struct ibv_qp *qp = L->create_qp(pd, &ia);
		if (qp) {
			got = ia.cap.max_inline_data >= try[i] ? ia.cap.max_inline_data : try[i];
			(void)L->destroy_qp(qp);
		}
	}
	if (cq)
		(void)L->destroy_cq(cq);
	if (pd)
		(void)L->dealloc_pd(pd);
	return got;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -1 : 0;
}

/* Opens (device, port) as a new vb_dev; vb_devs_lock held by the caller. */
static int open_new(const struct dev_ops *ops, struct ibv_device *ibdev, uint8_t port,
		    struct vb_dev **out)
{
	const struct vb_lib *L = vb_lib();
	const char *ibname = L->get_device_name(ibdev);
	struct ibv_context *ctx = L->open_device(ibdev);
	if (!ctx) {
		LOG_WARN(VB_UNIT, "ibv_open_device(%s): %s", ibname, strerror(errno));
		return -SMCR_E_DEV_NO_DEVICE;
	}
	struct vb_dev *d = calloc(1, sizeof *d);
	if (!d) {
		(void)L->close_device(ctx);
		return -SMCR_E_NOMEM;
	}
	d->ctx = ctx;
	d->port = port;
	snprintf(d->ibname, sizeof d->ibname, "%s", ibname);
	struct ibv_port_attr pa;
	int rc = L->query_device(ctx, &d->attr) ? -SMCR_E_DEV_NO_DEVICE : 0;
	if (!rc && (port < 1 || port > d->attr.phys_port_cnt))
		rc = -SMCR_E_DEV_NO_DEVICE;
	if (!rc)
		rc = port_attr(L, ctx, port, &pa);
	if (!rc && pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
		LOG_WARN(VB_UNIT, "%s port %u is not RoCE (link layer %u): SMC-R needs Ethernet",
			 ibname, port, pa.link_layer);
		rc = -SMCR_E_DEV_NO_DEVICE;
	}
	if (!rc && set_nonblock(ctx->async_fd))
		rc = -SMCR_E_DEV_LIMIT;
	if (!rc) {
		d->max_inline = probe_inline(L, ctx);
		if (!d->max_inline)
			rc = -SMCR_E_DEV_LIMIT;
	}
	if (rc) {
		(void)L->close_device(ctx);
		free(d);
		return rc;
	}
	pthread_mutex_init(&d->qps_lock, NULL);
	char name[DEV_NAME_MAX];
	snprintf(name, sizeof name, "%.24s/%u", ibname, port);
	dev_device_init(&d->dev, ops, VERBS_PROVIDER_NAME, name, 1, ctx->async_fd);
	d->next = vb_devs;
	vb_devs = d;
	LOG_INFO(VB_UNIT, "opened %s (max inline %u, max_qp_wr %d, max_cqe %d, mtu %u)", name,
		 d->max_inline, d->attr.max_qp_wr, d->attr.max_cqe,
		 dev_mtu_bytes((enum dev_mtu)pa.active_mtu));
	*out = d;
	return 0;
}

/* The open device for (ibname, port) held again, or NULL; vb_devs_lock held. */
static struct vb_dev *find_open(const char *ibname, uint8_t port)
{
	for (struct vb_dev *d = vb_devs; d; d = d->next) {
		if (d->port != port || strcmp(d->ibname, ibname) != 0)
			continue;
		/* hold unless its last reference is being dropped right now */
		uint32_t r = atomic_load(&d->dev.refcnt);
		while (r && !atomic_compare_exchange_weak(&d->dev.refcnt, &r, r + 1)) {
		}
		return r ? d : NULL;
	}
	return NULL;
}

static bool port_active(const struct vb_lib *L, struct ibv_context *ctx, uint8_t port)
{
	struct ibv_port_attr pa;
	return port_attr(L, ctx, port, &pa) == 0 && pa.state == IBV_PORT_ACTIVE &&
	       pa.link_layer == IBV_LINK_LAYER_ETHERNET;
}

/* Calls fn for every (device, port) of the host, with a context opened for the query,
 * until it returns nonzero (which is returned). */
typedef int (*port_fn)(void *arg, struct ibv_device *dev, struct ibv_context *ctx,
		       uint8_t port);
static int for_each_port(port_fn fn, void *arg)
{
	const struct vb_lib *L = vb_lib();
	if (!L)
		return 0;
	int n = 0, rc = 0;
	struct ibv_device **list = L->get_device_list(&n);
	for (int i = 0; list && i < n && !rc; i++) {
		struct ibv_context *ctx = L->open_device(list[i]);
		if (!ctx)
			continue;
		struct ibv_device_attr da;
		if (L->query_device(ctx, &da) == 0)
			for (uint8_t p = 1; p <= da.phys_port_cnt && !rc; p++)
				rc = fn(arg, list[i], ctx, p);
		(void)L->close_device(ctx);
	}
	if (list)
		L->free_device_list(list);
	return rc;
}

struct pick {
	const char *want; /* device name or NULL for the first active port */
	uint8_t port;	  /* 0: any (with want NULL), else this one */
	char ibname[DEV_NAME_MAX];
	uint8_t found_port;
};

static int pick_fn(void *arg, struct ibv_device *dev, struct ibv_context *ctx, uint8_t port)
{
	struct pick *pk = arg;
	const struct vb_lib *L = vb_lib();
	const char *name = L->get_device_name(dev);
	if (pk->want) {
		if (strcmp(name, pk->want) != 0 || port != pk->port)
			return 0;
	} else if (!port_active(L, ctx, port)) {
		return 0;
	}
	snprintf(pk->ibname, sizeof pk->ibname, "%s", name);
	pk->found_port = port;
	return 1;
}

/* Opens (or holds) the (device, port) named by name and port, both already picked. */
static int open_named(const struct dev_ops *ops, const char *ibname, uint8_t port,
		      struct dev_device **out)
{
	const struct vb_lib *L = vb_lib();
	pthread_mutex_lock(&vb_devs_lock);
	struct vb_dev *d = find_open(ibname, port);
	int rc = 0;
	if (!d) {
		int n = 0;
		struct ibv_device **list = L->get_device_list(&n);
		rc = -SMCR_E_DEV_NO_DEVICE;
		for (int i = 0; list && i < n; i++)
			if (strcmp(L->get_device_name(list[i]), ibname) == 0) {
				rc = open_new(ops, list[i], port, &d);
				break;
			}
		if (list)
			L->free_device_list(list);
	}
	pthread_mutex_unlock(&vb_devs_lock);
	if (!rc)
		*out = &d->dev;
	return rc;
}

/* args: "" (first active port), "<dev>" (its port 1) or "<dev>/<port>". */
static int vb_open(const struct dev_ops *ops, const char *args, struct dev_device **out)
{
	pthread_once(&atfork_once, vb_atfork_setup);
	const char *why = dev_verbs_absent();
	if (why) {
		LOG_INFO(VB_UNIT, "verbs absent: %s", why);
		return -SMCR_E_DEV_NO_DEVICE;
	}
	struct pick pk = { 0 };
	char want[DEV_NAME_MAX];
	if (args && *args) {
		snprintf(want, sizeof want, "%s", args);
		char *slash = strchr(want, '/');
		unsigned long p = 1;
		if (slash) {
			*slash = 0;
			char *end;
			p = strtoul(slash + 1, &end, 10);
			if (*end || p < 1 || p > 255)
				return -SMCR_E_INVAL;
		}
		pk.want = want;
		pk.port = (uint8_t)p;
	}
	if (!for_each_port(pick_fn, &pk)) {
		if (pk.want)
			LOG_WARN(VB_UNIT, "no RDMA port %s/%u on this host", pk.want, pk.port);
		else
			LOG_INFO(VB_UNIT, "no active RoCE port on this host");
		return -SMCR_E_DEV_NO_DEVICE;
	}
	return open_named(ops, pk.ibname, pk.found_port, out);
}

struct by_gid {
	const struct dev_gid *gid;
	char ibname[DEV_NAME_MAX];
	uint8_t port;
};

static int gid_fn(void *arg, struct ibv_device *dev, struct ibv_context *ctx, uint8_t port)
{
	struct by_gid *bg = arg;
	const struct vb_lib *L = vb_lib();
	struct ibv_port_attr pa;
	if (port_attr(L, ctx, port, &pa))
		return 0;
	const char *name = L->get_device_name(dev);
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct dev_gid_entry ge;
		if (gid_entry(L, ctx, name, port, i, &ge) == 0 &&
		    memcmp(ge.gid.raw, bg->gid->raw, DEV_GID_LEN) == 0) {
			snprintf(bg->ibname, sizeof bg->ibname, "%s", name);
			bg->port = port;
			return 1;
		}
	}
	return 0;
}

static int vb_open_by_gid(const struct dev_ops *ops, const struct dev_gid *gid,
			  struct dev_device **out)
{
	pthread_once(&atfork_once, vb_atfork_setup);
	if (dev_verbs_absent())
		return -SMCR_E_DEV_NO_DEVICE;
	struct by_gid bg = { .gid = gid };
	if (!for_each_port(gid_fn, &bg))
		return -SMCR_E_DEV_NO_DEVICE;
	return open_named(ops, bg.ibname, bg.port, out);
}

/* ---- registration and discovery for the socket layer ----------------------------------------- */

static const struct dev_ops vb_ops = {
	.alloc_pd = vb_alloc_pd,
	.close_device = vb_close_device,
	.create_cq = vb_create_cq,
	.create_qp = vb_create_qp,
	.dealloc_pd = vb_dealloc_pd,
	.dereg_mr = vb_dereg_mr,
	.destroy_cq = vb_destroy_cq,
	.destroy_qp = vb_destroy_qp,
	/* no disarm_cq: verbs cannot withdraw an arm (the default NOTSUP; the arm stays) */
	.get_async_event = vb_get_async_event,
	.get_cq_event = vb_get_cq_event,
	.modify_qp = vb_modify_qp,
	.poll_cq = vb_poll_cq,
	.post_recv = vb_post_recv,
	.post_send = vb_post_send,
	.query_device = vb_query_device,
	.query_gid = vb_query_gid,
	.query_port = vb_query_port,
	.query_qp = vb_query_qp,
	.reg_mr = vb_reg_mr,
	.req_notify_cq = vb_req_notify_cq,
	/* no set_port_state: a real port is not ours to take down */
};

static const struct dev_provider vb_provider = {
	.name = VERBS_PROVIDER_NAME,
	.ops = &vb_ops,
	.open = vb_open,
	.open_by_gid = vb_open_by_gid,
};

int dev_verbs_register(void)
{
	return dev_provider_register(&vb_provider);
}

const char *dev_verbs_absent(void)
{
	static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
	static char why[240];
	const char *r = vb_lib_reason();
	if (r)
		return r;
	int n = 0;
	struct ibv_device **list = vb_lib()->get_device_list(&n);
	if (list)
		vb_lib()->free_device_list(list);
	if (n > 0)
		return NULL;
	int e = errno;
	pthread_mutex_lock(&lk);
	snprintf(why, sizeof why,
		 "libibverbs found no RDMA device%s%s (a RoCE NIC, or Soft-RoCE: rdma link add "
		 "rxe0 type rxe netdev eth0)",
		 list ? "" : ": ", list ? "" : strerror(e));
	pthread_mutex_unlock(&lk);
	return why;
}

struct actives {
	char (*specs)[VERBS_SPEC_MAX];
	int max, n;
};

static int active_fn(void *arg, struct ibv_device *dev, struct ibv_context *ctx, uint8_t port)
{
	struct actives *a = arg;
	if (a->n < a->max && port_active(vb_lib(), ctx, port))
		snprintf(a->specs[a->n++], VERBS_SPEC_MAX, "%s:%.32s/%u", VERBS_PROVIDER_NAME,
			 vb_lib()->get_device_name(dev), port);
	return 0;
}

int dev_verbs_active_ports(char (*specs)[VERBS_SPEC_MAX], int max)
{
	if (dev_verbs_absent())
		return 0;
	struct actives a = { specs, max, 0 };
	(void)for_each_port(active_fn, &a);
	return a.n;
}
