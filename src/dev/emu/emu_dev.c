/* emu_dev.c: the emu provider's devices: registration, dev_open("emu:...") arguments,
 * binding to an interface and IP address (the GID, RoCE v2 style), the port state that
 * follows the interface's link (netlink RTMGRP_LINK notifications, state read with
 * SIOCGIFFLAGS: up = IFF_UP and IFF_RUNNING), the listening socket and the I/O thread's
 * lifetime. Arguments and semantics: emu.h; design: docs/parts/emu.md. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "dev/emu/emu_int.h"
#include "util/clock.h"
#include "util/log.h"

/* Open devices, for sharing an address:port and for dev_open_by_gid. Protects emu_devs and
 * every d->next. First in the lock order (emu_int.h). */
static pthread_mutex_t emu_devs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_dev *emu_devs;
static _Atomic uint32_t emu_dev_seq;

static void emu_close_device(struct dev_device *dev);

int emu_is_emu_dev(const struct dev_device *d)
{
	return d && d->ops && d->ops->close_device == emu_close_device;
}

/* Set by each I/O thread for itself (emu_io_main), so no thread reads d->io while
 * pthread_create may still be writing it. */
static _Thread_local const struct emu_dev *emu_io_self;

void emu_io_thread_enter(const struct emu_dev *d)
{
	emu_io_self = d;
}

int emu_on_io_thread(const struct emu_dev *d)
{
	return emu_io_self == d;
}

void emu_dev_kick(struct emu_dev *d)
{
	if (emu_on_io_thread(d))
		return;	/* it runs its work list before it sleeps again */
	uint64_t one = 1;
	while (write(d->kickfd, &one, sizeof one) < 0 && errno == EINTR)
		;
}

int emu_more_fds(void)
{
	static _Atomic int said;
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) < 0 || r.rlim_cur >= r.rlim_max)
		return 0;
	r.rlim_cur = r.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &r) < 0)
		return 0;
	if (!atomic_exchange(&said, 1))
		LOG_INFO("emu", "out of file descriptors: open-files limit raised to %llu",
			 (unsigned long long)r.rlim_cur);
	return 1;
}

/* ---- GIDs and addresses -------------------------------------------------------------- */

static const uint8_t emu_v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static void emu_gid_from_sockaddr(const struct sockaddr_storage *ss, struct dev_gid *g)
{
	memset(g, 0, sizeof *g);
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)ss;
		memcpy(g->raw, emu_v4mapped, sizeof emu_v4mapped);
		memcpy(g->raw + 12, &s->sin_addr.s_addr, 4);
	} else {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;
		memcpy(g->raw, s->sin6_addr.s6_addr, 16);
	}
}

int emu_sockaddr_matches_gid(const struct sockaddr_storage *ss, const struct dev_gid *gid)
{
	struct dev_gid g;
	if (ss->ss_family != AF_INET && ss->ss_family != AF_INET6)
		return 0;
	emu_gid_from_sockaddr(ss, &g);
	return memcmp(g.raw, gid->raw, DEV_GID_LEN) == 0;
}

int emu_gid_to_sockaddr(const struct emu_dev *d, const struct dev_gid *gid,
			struct sockaddr_storage *ss, socklen_t *len)
{
	static const uint8_t zero[DEV_GID_LEN];
	memset(ss, 0, sizeof *ss);
	if (memcmp(gid->raw, zero, sizeof zero) == 0)
		return -SMCR_E_EMU_NO_ADDR;
	if (memcmp(gid->raw, emu_v4mapped, sizeof emu_v4mapped) == 0) {
		if (d->family != AF_INET)
			return -SMCR_E_EMU_NO_ADDR;
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(d->port);
		memcpy(&s->sin_addr.s_addr, gid->raw + 12, 4);
		*len = sizeof *s;
		return 0;
	}
	if (d->family != AF_INET6)
		return -SMCR_E_EMU_NO_ADDR;
	struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
	s->sin6_family = AF_INET6;
	s->sin6_port = htons(d->port);
	memcpy(s->sin6_addr.s6_addr, gid->raw, 16);
	if (IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr))
		s->sin6_scope_id = d->ifindex;
	*len = sizeof *s;
	return 0;
}

/* ---- arguments ------------------------------------------------------------------------ */

struct emu_args {
	char ifname[IF_NAMESIZE];
	char ip[INET6_ADDRSTRLEN];
	char name[DEV_NAME_MAX];
	char netns[256];	/* path of the network namespace to open the device in */
	long port;		/* -1: default */
	int prefix_len;		/* ip=a.b.c.d/len: allocate an address of the prefix; else -1 */
	enum dev_gid_type gid_type;	/* gid=soft (default) or gid=v2 */
};

static int emu_copy_arg(char *dst, size_t cap, const char *v, size_t n)
{
	if (n == 0 || n >= cap)
		return -SMCR_E_EMU_ARGS;
	memcpy(dst, v, n);
	dst[n] = 0;
	return 0;
}

static int emu_parse_args(const char *s, struct emu_args *a)
{
	memset(a, 0, sizeof *a);
	a->port = -1;
	a->prefix_len = -1;
	a->gid_type = DEV_GID_TYPE_SOFT;
	while (*s) {
		const char *end = strchr(s, ',');
		size_t n = end ? (size_t)(end - s) : strlen(s);
		const char *eq = memchr(s, '=', n);
		if (!eq)
			return -SMCR_E_EMU_ARGS;
		size_t kl = (size_t)(eq - s), vl = n - kl - 1;
		const char *v = eq + 1;
		int rc;
		if (kl == 2 && !memcmp(s, "if", 2)) {
			rc = emu_copy_arg(a->ifname, sizeof a->ifname, v, vl);
		} else if (kl == 2 && !memcmp(s, "ip", 2)) {
			rc = emu_copy_arg(a->ip, sizeof a->ip, v, vl);
		} else if (kl == 4 && !memcmp(s, "name", 4)) {
			rc = emu_copy_arg(a->name, sizeof a->name, v, vl);
		} else if (kl == 5 && !memcmp(s, "netns", 5)) {
			/* A name of "ip netns" (/run/netns/<name>) or a path (/proc/<pid>/ns/net). */
			char nm[200];
			rc = emu_copy_arg(nm, sizeof nm, v, vl);
			if (!rc && (memchr(v, '/', vl) ? snprintf(a->netns, sizeof a->netns, "%s", nm)
						      : snprintf(a->netns, sizeof a->netns,
								 "/run/netns/%s", nm)) >= (int)sizeof a->netns)
				rc = -SMCR_E_EMU_ARGS;
		} else if (kl == 3 && !memcmp(s, "gid", 3)) {
			/* gid=v2: present the GID as RoCE v2 (the IP-derived GID it already is), as
			 * a routed RoCE device or Soft-RoCE does; gid=soft: the default. */
			rc = 0;
			if (vl == 2 && !memcmp(v, "v2", 2))
				a->gid_type = DEV_GID_TYPE_ROCE_V2;
			else if (vl == 4 && !memcmp(v, "soft", 4))
				a->gid_type = DEV_GID_TYPE_SOFT;
			else
				return -SMCR_E_EMU_ARGS;
		} else if (kl == 4 && !memcmp(s, "port", 4)) {
			char buf[8];
			rc = emu_copy_arg(buf, sizeof buf, v, vl);
			char *e;
			long p = rc ? -1 : strtol(buf, &e, 10);
			if (rc || *e || p < 0 || p > 65535)
				return -SMCR_E_EMU_ARGS;
			a->port = p;
		} else {
			return -SMCR_E_EMU_ARGS;
		}
		if (rc)
			return rc;
		s += n;
		if (*s == ',')
			s++;
	}
	if (!a->ifname[0] && !a->ip[0])
		return -SMCR_E_EMU_ARGS;
	char *slash = strchr(a->ip, '/');
	if (slash) {
		char *e;
		long len = strtol(slash + 1, &e, 10);
		if (slash[1] == 0 || *e || len < 8 || len > 30)
			return -SMCR_E_EMU_ARGS;	/* IPv4 prefixes only: /8 .. /30 */
		*slash = 0;
		a->prefix_len = (int)len;
	}
	if (a->port < 0) {
		const char *env = getenv("SMCR_EMU_PORT");
		a->port = EMU_DEFAULT_PORT;
		if (env && *env) {
			char *e;
			long p = strtol(env, &e, 10);
			if (*e || p < 0 || p > 65535)
				return -SMCR_E_EMU_ARGS;
			a->port = p;
		}
	}
	if (a->prefix_len >= 0 && a->port == 0)
		return -SMCR_E_EMU_ARGS;	/* devices of a prefix share one known port */
	return 0;
}

static int emu_same_addr(const struct sockaddr *x, const struct sockaddr_storage *y)
{
	if (x->sa_family != y->ss_family)
		return 0;
	if (x->sa_family == AF_INET)
		return ((const struct sockaddr_in *)x)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)y)->sin_addr.s_addr;
	return memcmp(((const struct sockaddr_in6 *)x)->sin6_addr.s6_addr,
		      ((const struct sockaddr_in6 *)y)->sin6_addr.s6_addr, 16) == 0;
}

static int emu_mask_len(const struct sockaddr *m)
{
	if (!m || m->sa_family != AF_INET)
		return 129;
	return __builtin_popcount(((const struct sockaddr_in *)m)->sin_addr.s_addr);
}

/* want inside x's prefix (mask m)? Used for loopback interfaces: 127.0.0.2 is lo's. */
static int emu_in_prefix(const struct sockaddr *x, const struct sockaddr *m,
			 const struct sockaddr *want)
{
	if (!m || x->sa_family != want->sa_family)
		return 0;
	const uint8_t *a, *k, *w;
	size_t n;
	if (x->sa_family == AF_INET) {
		a = (const uint8_t *)&((const struct sockaddr_in *)x)->sin_addr;
		k = (const uint8_t *)&((const struct sockaddr_in *)m)->sin_addr;
		w = (const uint8_t *)&((const struct sockaddr_in *)want)->sin_addr;
		n = 4;
	} else {
		a = ((const struct sockaddr_in6 *)x)->sin6_addr.s6_addr;
		k = ((const struct sockaddr_in6 *)m)->sin6_addr.s6_addr;
		w = ((const struct sockaddr_in6 *)want)->sin6_addr.s6_addr;
		n = 16;
	}
	for (size_t i = 0; i < n; i++)
		if ((a[i] & k[i]) != (w[i] & k[i]))
			return 0;
	return 1;
}

static void emu_store_addr(struct emu_dev *d, const struct sockaddr *sa)
{
	memset(&d->addr, 0, sizeof d->addr);
	if (sa->sa_family == AF_INET) {
		memcpy(&d->addr, sa, sizeof(struct sockaddr_in));
		d->addrlen = sizeof(struct sockaddr_in);
	} else {
		memcpy(&d->addr, sa, sizeof(struct sockaddr_in6));
		d->addrlen = sizeof(struct sockaddr_in6);
	}
	d->family = sa->sa_family;
}

/* Finds the interface and address (emu.h "Opening"). */
static int emu_resolve(const struct emu_args *a, struct emu_dev *d)
{
	struct sockaddr_storage want;
	int have_want = 0;
	memset(&want, 0, sizeof want);
	if (a->ip[0]) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&want;
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&want;
		if (inet_pton(AF_INET, a->ip, &s4->sin_addr) == 1)
			want.ss_family = AF_INET;
		else if (a->prefix_len < 0 && inet_pton(AF_INET6, a->ip, &s6->sin6_addr) == 1 &&
			 !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
			want.ss_family = AF_INET6;
		else
			return -SMCR_E_EMU_ARGS;
		have_want = 1;
	}
	struct sockaddr_in pmask = { .sin_family = AF_INET };
	if (a->prefix_len >= 0) {
		pmask.sin_addr.s_addr = htonl(~0u << (32 - a->prefix_len));
		struct sockaddr_in *s4 = (struct sockaddr_in *)&want;
		s4->sin_addr.s_addr &= pmask.sin_addr.s_addr;
		if (a->ifname[0]) {
			/* if= names the interface whose link the devices follow; the prefix's
			 * addresses may be local through another one (an AnyIP "local" route). */
			snprintf(d->ifname, sizeof d->ifname, "%s", a->ifname);
			emu_store_addr(d, (const struct sockaddr *)&want);
			d->ifindex = if_nametoindex(d->ifname);
			return d->ifindex ? 0 : -SMCR_E_EMU_NO_IF;
		}
	}
	struct ifaddrs *all, *pick = NULL, *v6 = NULL, *v6ll = NULL, *lo = NULL;
	if (getifaddrs(&all) < 0)
		return -SMCR_E_EMU_SYS;
	for (struct ifaddrs *i = all; i; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
				     i->ifa_addr->sa_family != AF_INET6))
			continue;
		if (a->ifname[0] && strcmp(i->ifa_name, a->ifname) != 0)
			continue;
		if (have_want && a->prefix_len >= 0) {
			/* A prefix: the interface holding an address of it, else the loopback
			 * interface if the prefix is inside its own (127/8). The addresses are
			 * local when bind() says so (emu_listen_in_prefix). */
			if (emu_in_prefix((const struct sockaddr *)&want, (const struct sockaddr *)&pmask,
					  i->ifa_addr)) {
				pick = i;
				break;
			}
			if (!lo && (i->ifa_flags & IFF_LOOPBACK) &&
			    emu_in_prefix(i->ifa_addr, i->ifa_netmask, (const struct sockaddr *)&want) &&
			    emu_mask_len(i->ifa_netmask) <= a->prefix_len)
				lo = i;
			continue;
		}
		if (have_want) {
			if (emu_same_addr(i->ifa_addr, &want)) {
				pick = i;
				break;
			}
			/* An address inside a loopback interface's prefix is local (Linux routes
			 * all of 127/8 to lo). */
			if (!lo && (i->ifa_flags & IFF_LOOPBACK) &&
			    emu_in_prefix(i->ifa_addr, i->ifa_netmask, (const struct sockaddr *)&want))
				lo = i;
			continue;
		}
		if (i->ifa_addr->sa_family == AF_INET) {
			pick = i;
			break;
		}
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)i->ifa_addr;
		if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) {
			if (!v6ll)
				v6ll = i;
		} else if (!v6) {
			v6 = i;
		}
	}
	if (!pick && !have_want)
		pick = v6 ? v6 : v6ll;
	int rc = 0;
	if (pick) {
		snprintf(d->ifname, sizeof d->ifname, "%s", pick->ifa_name);
		emu_store_addr(d, a->prefix_len >= 0 ? (const struct sockaddr *)&want : pick->ifa_addr);
	} else if (lo) {
		snprintf(d->ifname, sizeof d->ifname, "%s", lo->ifa_name);
		emu_store_addr(d, (const struct sockaddr *)&want);
	} else {
		rc = have_want ? -SMCR_E_EMU_NO_ADDR : -SMCR_E_EMU_NO_IF;
	}
	freeifaddrs(all);
	if (rc)
		return rc;
	d->ifindex = if_nametoindex(d->ifname);
	if (!d->ifindex)
		return -SMCR_E_EMU_NO_IF;
	if (d->family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&d->addr;
		s6->sin6_scope_id = IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr) ? d->ifindex : 0;
	}
	return 0;
}

/* ---- link and port state -------------------------------------------------------------- */

static int emu_read_link(struct emu_dev *d)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", d->ifname);
	if (ioctl(d->ctlfd, SIOCGIFFLAGS, &ifr) < 0)
		return 0;	/* interface gone: down */
	return (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
}

int emu_port_is_active(struct emu_dev *d)
{
	return atomic_load(&d->port_active);
}

void emu_port_update(struct emu_dev *d)
{
	int link = emu_read_link(d);
	pthread_mutex_lock(&d->lock);
	d->link_up = link;
	int active = link && !d->forced_down;
	if (active == atomic_load(&d->port_active)) {
		pthread_mutex_unlock(&d->lock);
		return;
	}
	atomic_store(&d->port_active, active);
	LOG_INFO("emu", "%s: port %s (%s link %s%s)", d->dev.name, active ? "ACTIVE" : "DOWN",
		 d->ifname, link ? "up" : "down", d->forced_down ? ", forced down" : "");
	emu_event_push(d, active ? DEV_EVENT_PORT_ACTIVE : DEV_EVENT_PORT_ERR, 0, NULL);
	if (!active) {
		/* Every QP using the port loses its peer (dev.h 5). */
		for (uint32_t b = 0; b < EMU_QP_HASH; b++) {
			for (struct emu_qp *q = d->qpt[b]; q; q = q->hnext) {
				pthread_mutex_lock(&q->lock);
				if (q->state == DEV_QPS_RTR || q->state == DEV_QPS_RTS)
					emu_qp_error_locked(q, 0, DEV_WC_RETRY_EXC_ERR,
							    DEV_EVENT_QP_FATAL,
							    SMCR_E_EMU_PEER_GONE);
				pthread_mutex_unlock(&q->lock);
			}
		}
		atomic_store(&d->port_dirty, 1);
	}
	pthread_mutex_unlock(&d->lock);
	if (!active)
		emu_dev_kick(d);
}

static int emu_set_port_state(struct dev_device *dev, uint8_t port, int up)
{
	struct emu_dev *d = EMU_DEV(dev);
	(void)port;	/* one port; the core checked the number */
	pthread_mutex_lock(&d->lock);
	d->forced_down = !up;
	pthread_mutex_unlock(&d->lock);
	emu_port_update(d);
	return 0;
}

/* ---- queries --------------------------------------------------------------------------- */

static int emu_query_device(struct dev_device *dev, struct dev_device_attr *a)
{
	struct emu_dev *d = EMU_DEV(dev);
	snprintf(a->provider, sizeof a->provider, "%s", EMU_PROVIDER_NAME);
	snprintf(a->name, sizeof a->name, "%s", dev->name);
	a->phys_port_cnt = 1;
	a->max_qp = EMU_MAX_QP;
	a->max_qp_wr = EMU_MAX_QP_WR;
	a->max_sge = EMU_MAX_SGE;
	a->max_inline_data = EMU_MAX_INLINE;
	a->max_cq = EMU_MAX_CQ;
	a->max_cqe = EMU_MAX_CQE;
	a->max_mr = EMU_MAX_MR;
	a->max_mr_size = EMU_MAX_MR_SIZE;
	a->node_guid = d->node_guid;
	return 0;
}

static int emu_query_port(struct dev_device *dev, uint8_t port, struct dev_port_attr *a)
{
	struct emu_dev *d = EMU_DEV(dev);
	(void)port;
	a->state = emu_port_is_active(d) ? DEV_PORT_ACTIVE : DEV_PORT_DOWN;
	a->max_mtu = DEV_MTU_4096;
	a->active_mtu = d->active_mtu;
	a->gid_tbl_len = 1;
	a->max_msg_sz = EMU_MAX_MSG;
	a->max_send_sz = EMU_MAX_MSG;
	return 0;
}

static int emu_query_gid(struct dev_device *dev, uint8_t port, int index,
			 struct dev_gid_entry *out)
{
	struct emu_dev *d = EMU_DEV(dev);
	(void)port;
	if (index != 0)
		return -SMCR_E_INVAL;
	out->gid = d->gid;
	out->type = d->gid_type;
	out->vlan_id = DEV_VLAN_NONE;
	memcpy(out->mac, d->mac, DEV_MAC_LEN);
	return 0;
}

/* ---- open / close ---------------------------------------------------------------------- */

/* Takes a reference unless the count already reached 0 (the device is being closed). */
static int emu_dev_tryhold(struct emu_dev *d)
{
	uint32_t n = atomic_load(&d->dev.refcnt);
	while (n) {
		if (atomic_compare_exchange_weak(&d->dev.refcnt, &n, n + 1))
			return 1;
	}
	return 0;
}

static void emu_dev_free(struct emu_dev *d)
{
	int fds[] = { d->lfd, d->epfd, d->kickfd, d->timerfd, d->nlfd, d->evfd, d->ctlfd };
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (fds[i] >= 0)
			emu_fd_close(fds[i]);
	emu_mr_table_fini(d);
	free(d->evq);
	pthread_mutex_destroy(&d->lock);
	pthread_rwlock_destroy(&d->mr_lock);
	pthread_mutex_destroy(&d->ev_lock);
	pthread_mutex_destroy(&d->work_lock);
	pthread_cond_destroy(&d->work_cv);
	free(d);
}

static void emu_close_device(struct dev_device *dev)
{
	struct emu_dev *d = EMU_DEV(dev);
	pthread_mutex_lock(&emu_devs_lock);
	struct emu_dev **pp = &emu_devs;
	while (*pp && *pp != d)
		pp = &(*pp)->next;
	if (*pp)
		*pp = d->next;
	pthread_mutex_unlock(&emu_devs_lock);

	atomic_store(&d->stop, 1);
	uint64_t one = 1;
	while (write(d->kickfd, &one, sizeof one) < 0 && errno == EINTR)
		;
	pthread_join(d->io, NULL);
	emu_conn_fini(d);
	LOG_INFO("emu", "%s: closed", dev->name);
	emu_dev_free(d);
}

static int emu_epoll_add(struct emu_dev *d, int fd, struct emu_ep *ep, enum emu_ep_kind k)
{
	ep->kind = k;
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = ep };
	return epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &e) < 0 ? -SMCR_E_EMU_SYS : 0;
}

static void emu_dev_identity(struct emu_dev *d)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", d->ifname);
	if (ioctl(d->ctlfd, SIOCGIFHWADDR, &ifr) == 0)
		memcpy(d->mac, ifr.ifr_hwaddr.sa_data, DEV_MAC_LEN);
	int mtu = 1500;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", d->ifname);
	if (ioctl(d->ctlfd, SIOCGIFMTU, &ifr) == 0)
		mtu = ifr.ifr_mtu;
	/* RoCE: the largest IB MTU that fits the netdev MTU with the headers. */
	d->active_mtu = mtu >= 4096 + 100 ? DEV_MTU_4096 : mtu >= 2048 + 100 ? DEV_MTU_2048
		      : mtu >= 1024 + 100 ? DEV_MTU_1024 : mtu >= 512 + 100 ? DEV_MTU_512
		      : DEV_MTU_256;
	/* Node GUID: EUI-64 of the MAC, or folded from the GID (loopback has no MAC). */
	static const uint8_t nomac[DEV_MAC_LEN];
	if (memcmp(d->mac, nomac, DEV_MAC_LEN) != 0) {
		const uint8_t *m = d->mac;
		d->node_guid = (uint64_t)(m[0] ^ 2) << 56 | (uint64_t)m[1] << 48 |
			       (uint64_t)m[2] << 40 | 0xfffeull << 24 | (uint64_t)m[3] << 16 |
			       (uint64_t)m[4] << 8 | m[5];
	} else {
		uint64_t h = 1469598103934665603ull;
		for (int i = 0; i < DEV_GID_LEN; i++)
			h = (h ^ d->gid.raw[i]) * 1099511628211ull;
		d->node_guid = h ^ d->port;
	}
}

static int emu_dev_listen(struct emu_dev *d, uint16_t port)
{
	int one = 1;
	emu_fd_begin();
	d->lfd = emu_fd_end(socket(d->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (d->lfd < 0)
		return -SMCR_E_EMU_SYS;
	(void)setsockopt(d->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (d->family == AF_INET6)
		(void)setsockopt(d->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (d->family == AF_INET)
		((struct sockaddr_in *)&d->addr)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&d->addr)->sin6_port = htons(port);
	/* A deep backlog: many QPs may connect at once (each QP is one connection). */
	if (bind(d->lfd, (struct sockaddr *)&d->addr, d->addrlen) < 0 ||
	    listen(d->lfd, SOMAXCONN) < 0) {
		int err = errno;
		LOG_DBG("emu", "cannot listen on %s port %u: %s", d->ifname, port, strerror(err));
		emu_fd_close(d->lfd);
		d->lfd = -1;
		return err == EADDRNOTAVAIL ? -SMCR_E_EMU_NO_ADDR : -SMCR_E_EMU_LISTEN;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (getsockname(d->lfd, (struct sockaddr *)&ss, &sl) < 0)
		return -SMCR_E_EMU_SYS;
	d->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
						: ((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

static int emu_dev_netlink(struct emu_dev *d)
{
	emu_fd_begin();
	d->nlfd = emu_fd_end(socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC,
				   NETLINK_ROUTE));
	if (d->nlfd < 0)
		return -SMCR_E_EMU_SYS;
	struct sockaddr_nl sa;
	memset(&sa, 0, sizeof sa);
	sa.nl_family = AF_NETLINK;
	sa.nl_groups = RTMGRP_LINK;
	if (bind(d->nlfd, (struct sockaddr *)&sa, sizeof sa) < 0)
		return -SMCR_E_EMU_SYS;
	return 0;
}

/* The network namespace the calling thread is in (its inode), to tell devices apart. */
static uint64_t emu_netns_id(void)
{
	struct stat st;
	if (stat("/proc/thread-self/ns/net", &st) < 0)
		return 0;
	return (uint64_t)st.st_ino;
}

/* ip=a.b.c.d/len: binds the listener to a free address of the prefix (one a device of
 * this or another process does not hold yet), starting at a point derived from the pid so
 * that processes rarely try the same ones. An address that is not local (EADDRNOTAVAIL)
 * ends the search: the prefix is not local here. */
static int emu_listen_in_prefix(struct emu_dev *d, const struct emu_args *a)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)&d->addr;
	uint32_t mask = ~0u << (32 - a->prefix_len);
	uint32_t net = ntohl(s4->sin_addr.s_addr) & mask;
	uint32_t hosts = (~mask) - 1;	/* without the network and broadcast addresses */
	uint32_t start = ((uint32_t)getpid() * 2654435761u) % hosts;
	int rc = -SMCR_E_EMU_LISTEN;
	for (uint32_t i = 0; i < hosts && i < 4096; i++) {
		s4->sin_addr.s_addr = htonl(net + 1 + (start + i) % hosts);
		rc = emu_dev_listen(d, (uint16_t)a->port);
		if (rc != -SMCR_E_EMU_LISTEN)
			break;
	}
	return rc;
}

/* Opens a device in the calling thread's network namespace. */
static int emu_open_here(const struct dev_ops *ops, struct emu_args *a, struct dev_device **out)
{
	struct emu_dev *d = calloc(1, sizeof *d);
	if (!d)
		return -SMCR_E_NOMEM;
	d->lfd = d->epfd = d->kickfd = d->timerfd = d->nlfd = d->evfd = d->ctlfd = -1;
	pthread_mutex_init(&d->lock, NULL);
	pthread_rwlock_init(&d->mr_lock, NULL);
	pthread_mutex_init(&d->ev_lock, NULL);
	pthread_mutex_init(&d->work_lock, NULL);
	pthread_cond_init(&d->work_cv, NULL);
	d->mr_free = UINT32_MAX;
	atomic_init(&d->timer_at, UINT64_MAX);
	d->netns_id = emu_netns_id();
	int rc = emu_resolve(a, d);
	if (rc)
		goto fail;

	pthread_mutex_lock(&emu_devs_lock);
	if (a->port && a->prefix_len < 0) {
		/* Same address and port (and namespace): the same device, one more reference. */
		for (struct emu_dev *o = emu_devs; o; o = o->next) {
			if (o->explicit_port && o->port == a->port && o->netns_id == d->netns_id &&
			    emu_same_addr((struct sockaddr *)&d->addr, &o->addr) &&
			    emu_dev_tryhold(o)) {
				pthread_mutex_unlock(&emu_devs_lock);
				emu_dev_free(d);
				*out = &o->dev;
				return 0;
			}
		}
	}
	d->explicit_port = a->port != 0 && a->prefix_len < 0;
	emu_fd_begin();
	d->ctlfd = emu_fd_end(socket(d->family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
	emu_fd_begin();
	d->epfd = emu_fd_end(epoll_create1(EPOLL_CLOEXEC));
	emu_fd_begin();
	d->kickfd = emu_fd_end(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	emu_fd_begin();
	d->evfd = emu_fd_end(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	emu_fd_begin();
	d->timerfd = emu_fd_end(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
	rc = -SMCR_E_EMU_SYS;
	if (d->ctlfd < 0 || d->epfd < 0 || d->kickfd < 0 || d->evfd < 0 || d->timerfd < 0)
		goto fail_unlock;
	rc = a->prefix_len >= 0 ? emu_listen_in_prefix(d, a) : emu_dev_listen(d, (uint16_t)a->port);
	if (rc)
		goto fail_unlock;
	emu_gid_from_sockaddr(&d->addr, &d->gid);
	d->gid_type = a->gid_type;
	emu_dev_identity(d);
	if (emu_dev_netlink(d)) {
		LOG_WARN("emu", "no netlink link notifications (%s): the port follows "
			 "dev_set_port_state only", strerror(errno));
		if (d->nlfd >= 0)
			emu_fd_close(d->nlfd);
		d->nlfd = -1;
	}
	if (emu_epoll_add(d, d->lfd, &d->ep_listen, EMU_EP_LISTEN) ||
	    emu_epoll_add(d, d->kickfd, &d->ep_kick, EMU_EP_KICK) ||
	    emu_epoll_add(d, d->timerfd, &d->ep_timer, EMU_EP_TIMER) ||
	    (d->nlfd >= 0 && emu_epoll_add(d, d->nlfd, &d->ep_nl, EMU_EP_NETLINK)))
		goto fail_unlock;
	d->link_up = emu_read_link(d);
	atomic_init(&d->port_active, d->link_up);
	uint32_t r = 0;
	if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
		r = (uint32_t)smcr_now_ns() ^ (uint32_t)getpid() << 8;
	d->qpn_next = (r & 0xffffffu) ? (r & 0xffffffu) : 1;

	char name[DEV_NAME_MAX];
	if (a->name[0])
		snprintf(name, sizeof name, "%s", a->name);
	else
		snprintf(name, sizeof name, "emu%u-%s", atomic_fetch_add(&emu_dev_seq, 1),
			 d->ifname);
	dev_device_init(&d->dev, ops, EMU_PROVIDER_NAME, name, 1, d->evfd);

	/* The I/O thread takes no signals: the program's handlers run in its own threads.
	 * It is created in the calling thread's network namespace, which it keeps (the
	 * sockets it creates for connects belong there). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int prc = pthread_create(&d->io, NULL, emu_io_main, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (prc) {
		rc = -SMCR_E_EMU_SYS;
		goto fail_unlock;
	}
	d->next = emu_devs;
	emu_devs = d;
	pthread_mutex_unlock(&emu_devs_lock);

	char gs[DEV_GID_STR_LEN];
	dev_gid_str(&d->gid, gs);
	LOG_INFO("emu", "%s: opened on %s port %u, GID %s, link %s", name, d->ifname, d->port,
		 gs, d->link_up ? "up" : "down");
	*out = &d->dev;
	return 0;

fail_unlock:
	pthread_mutex_unlock(&emu_devs_lock);
fail:
	emu_dev_free(d);
	return rc;
}

/* Successive opens of one multi-device spec take its devices in turn (emu.h). One counter
 * per spec text, for the life of the process. */
struct emu_turn {
	struct emu_turn *next;
	unsigned next_idx;
	char spec[];
};
static pthread_mutex_t emu_turn_lock = PTHREAD_MUTEX_INITIALIZER;	/* a leaf */
static struct emu_turn *emu_turns;

static unsigned emu_take_turn(const char *spec)
{
	unsigned idx = 0;
	pthread_mutex_lock(&emu_turn_lock);
	struct emu_turn *t = emu_turns;
	while (t && strcmp(t->spec, spec) != 0)
		t = t->next;
	if (!t) {
		size_t n = strlen(spec) + 1;
		t = malloc(sizeof *t + n);
		if (t) {
			memcpy(t->spec, spec, n);
			t->next_idx = 0;
			t->next = emu_turns;
			emu_turns = t;
		}
	}
	if (t)
		idx = t->next_idx++;
	pthread_mutex_unlock(&emu_turn_lock);
	return idx;
}

/* Picks the device description this open uses out of "desc;desc;...". */
static int emu_pick(const char *spec, char *out, size_t cap)
{
	unsigned n = 1;
	for (const char *p = spec; *p; p++)
		n += *p == ';';
	unsigned k = n > 1 ? emu_take_turn(spec) % n : 0;
	const char *s = spec;
	for (unsigned i = 0; i < k; i++)
		s = strchr(s, ';') + 1;
	const char *e = strchr(s, ';');
	size_t len = e ? (size_t)(e - s) : strlen(s);
	if (len >= cap)
		return -SMCR_E_EMU_ARGS;
	memcpy(out, s, len);
	out[len] = 0;
	return 0;
}

static int emu_open(const struct dev_ops *ops, const char *args, struct dev_device **out)
{
	struct emu_args a;
	char one[512];
	/* "emu" alone: the arguments come from $SMCR_EMU_ARGS, else a loopback device. */
	if (!args[0]) {
		args = getenv("SMCR_EMU_ARGS");
		if (!args || !args[0])
			args = EMU_DEFAULT_ARGS;
	}
	int rc = emu_pick(args, one, sizeof one);
	if (!rc)
		rc = emu_parse_args(one, &a);
	if (rc)
		return rc;
	if (!a.netns[0])
		return emu_open_here(ops, &a, out);
	/* netns=: enter the namespace for the open only. Everything the device creates there
	 * (listener, netlink and ioctl sockets, the I/O thread and so its connections) stays
	 * in it; the calling thread returns to its own namespace. */
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int ns = open(a.netns, O_RDONLY | O_CLOEXEC);
	if (self < 0 || ns < 0 || setns(ns, CLONE_NEWNET) < 0) {
		LOG_WARN("emu", "cannot enter network namespace %s: %s", a.netns, strerror(errno));
		if (self >= 0)
			close(self);
		if (ns >= 0)
			close(ns);
		return -SMCR_E_EMU_NETNS;
	}
	rc = emu_open_here(ops, &a, out);
	if (setns(self, CLONE_NEWNET) < 0)
		LOG_ERR("emu", "cannot return to the caller's network namespace: %s",
			strerror(errno));
	close(self);
	close(ns);
	return rc;
}

static int emu_open_by_gid(const struct dev_ops *ops, const struct dev_gid *gid,
			   struct dev_device **out)
{
	(void)ops;
	int rc = -SMCR_E_DEV_NO_DEVICE;
	pthread_mutex_lock(&emu_devs_lock);
	for (struct emu_dev *d = emu_devs; d; d = d->next) {
		if (memcmp(d->gid.raw, gid->raw, DEV_GID_LEN) == 0 && emu_dev_tryhold(d)) {
			*out = &d->dev;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&emu_devs_lock);
	return rc;
}

/* ---- registration ---------------------------------------------------------------------- */

static const struct dev_ops emu_ops = {
	.alloc_pd = emu_alloc_pd,
	.close_device = emu_close_device,
	.create_cq = emu_create_cq,
	.create_qp = emu_create_qp,
	.dealloc_pd = emu_dealloc_pd,
	.dereg_mr = emu_dereg_mr,
	.destroy_cq = emu_destroy_cq,
	.destroy_qp = emu_destroy_qp,
	.get_async_event = emu_get_async_event,
	.get_cq_event = emu_get_cq_event,
	.modify_qp = emu_modify_qp,
	.poll_cq = emu_poll_cq,
	.post_recv = emu_post_recv,
	.post_send = emu_post_send,
	.query_device = emu_query_device,
	.query_gid = emu_query_gid,
	.query_port = emu_query_port,
	.query_qp = emu_query_qp,
	.reg_mr = emu_reg_mr,
	.req_notify_cq = emu_req_notify_cq,
	.set_port_state = emu_set_port_state,
};

static const struct dev_provider emu_provider = {
	.name = EMU_PROVIDER_NAME,
	.ops = &emu_ops,
	.open = emu_open,
	.open_by_gid = emu_open_by_gid,
};

int dev_emu_register(void)
{
	return dev_provider_register(&emu_provider);
}

int dev_emu_port(struct dev_device *dev, uint16_t *port)
{
	if (!emu_is_emu_dev(dev))
		return -SMCR_E_EMU_NOT_EMU;
	*port = EMU_DEV(dev)->port;
	return 0;
}
