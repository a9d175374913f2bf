/* trace.c: SMCR_TRACE, the process's SMC-R messages as a pcapng capture (trace.h; frames
 * from util/netframe.h, the pcapng blocks written here). */
#define _GNU_SOURCE
#include "sock/trace.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/sys.h"
#include "util/env.h"
#include "util/log.h"
#include "util/netframe.h"

#define TRACE_MAX_MB_DEFAULT 64u
#define TRACE_FLOWS 256 /* connections whose TCP sequence numbers are kept (then reused) */
#define TRACE_FRAME_MAX (NF_ETH_HDR_LEN + NF_IPV4_HDR_LEN + NF_TCP_HDR_LEN + CLC_MSG_MAX_LEN + 64)

static char path_tmpl[4096];	 /* SMCR_TRACE as given (read once, at load) */
static bool per_pid;		 /* it has %p */
static _Atomic bool on;		 /* a file is open in this process */
static pthread_mutex_t tr_lock = PTHREAD_MUTEX_INITIALIZER;
static int tr_fd = -1;		 /* (tr_lock) */
static uint64_t tr_bytes, tr_max; /* (tr_lock) written so far, the bound */
static bool tr_full;		 /* (tr_lock) the bound was hit */
static uint32_t tr_psn;		 /* (tr_lock) a running BTH PSN for the RoCE frames */

/* Per connection: the next TCP sequence number each way (tr_lock). */
struct flow {
	uint64_t serial; /* struct sock.serial, 0 free */
	uint32_t seq[2]; /* [0] we send, [1] the peer sends */
};
static struct flow flows[TRACE_FLOWS];
static unsigned flow_next;

bool trace_on(void) { return atomic_load_explicit(&on, memory_order_relaxed); }

static void put32le(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put16le(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* One whole block, one write (tr_lock held). */
static void block_write(const uint8_t *b, size_t n)
{
	if (tr_fd < 0 || tr_full)
		return;
	if (tr_bytes + n > tr_max) {
		tr_full = true;
		LOG_WARN("trace", "SMCR_TRACE reached %llu bytes (SMCR_TRACE_MAX_MB): no more records",
			 (unsigned long long)tr_bytes);
		return;
	}
	ssize_t w = sock_sys.write(tr_fd, b, n);
	if (w == (ssize_t)n)
		tr_bytes += n;
	else
		tr_full = true; /* a short or failed write: the file ends at the last whole block */
}

/* Section header, then the one interface: Ethernet, nanosecond timestamps. */
static void header_write(void)
{
	uint8_t shb[28], idb[32];
	put32le(shb, 0x0A0D0D0A);
	put32le(shb + 4, sizeof(shb));
	put32le(shb + 8, 0x1A2B3C4D); /* byte-order magic */
	put16le(shb + 12, 1);	      /* version 1.0 */
	put16le(shb + 14, 0);
	memset(shb + 16, 0xff, 8); /* section length: not given */
	put32le(shb + 24, sizeof(shb));
	put32le(idb, 1);
	put32le(idb + 4, sizeof(idb));
	put16le(idb + 8, 1); /* LINKTYPE_ETHERNET */
	put16le(idb + 10, 0);
	put32le(idb + 12, 0);	    /* snap length: none */
	put16le(idb + 16, 9);	    /* if_tsresol */
	put16le(idb + 18, 1);
	idb[20] = 9;		    /* 10^-9 s */
	memset(idb + 21, 0, 3);	    /* padding */
	put32le(idb + 24, 0);	    /* opt_endofopt */
	put32le(idb + 28, sizeof(idb));
	block_write(shb, sizeof(shb));
	block_write(idb, sizeof(idb));
}

/* An enhanced packet block for one frame (tr_lock held). */
static void frame_write(const uint8_t *frame, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	size_t pad = (4 - len % 4) % 4, total = 28 + len + pad + 4;
	uint8_t b[28 + TRACE_FRAME_MAX + 8];
	if (len > TRACE_FRAME_MAX)
		return;
	put32le(b, 6);
	put32le(b + 4, (uint32_t)total);
	put32le(b + 8, 0); /* interface 0 */
	put32le(b + 12, (uint32_t)(t >> 32));
	put32le(b + 16, (uint32_t)t);
	put32le(b + 20, (uint32_t)len);
	put32le(b + 24, (uint32_t)len);
	memcpy(b + 28, frame, len);
	memset(b + 28 + len, 0, pad);
	put32le(b + 28 + len + pad, (uint32_t)total);
	block_write(b, total);
}

static void trace_open_locked(void)
{
	char path[sizeof(path_tmpl) + 16];
	size_t o = 0;
	for (const char *p = path_tmpl; *p && o + 12 < sizeof(path); p++) {
		if (p[0] == '%' && p[1] == 'p') {
			o += (size_t)snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
			p++;
		} else {
			path[o++] = *p;
		}
	}
	path[o] = 0;
	tr_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (tr_fd < 0) {
		LOG_WARN("trace", "SMCR_TRACE %s: %s: no trace", path, strerror(errno));
		return;
	}
	tr_bytes = 0;
	tr_full = false;
	memset(flows, 0, sizeof(flows));
	header_write();
	atomic_store(&on, true);
}

static void trace_atfork_prepare(void) { pthread_mutex_lock(&tr_lock); }
static void trace_atfork_parent(void) { pthread_mutex_unlock(&tr_lock); }

static void trace_atfork_child(void)
{
	/* tr_lock is held (prepare), by this thread: the child's only one. */
	atomic_store(&on, false);
	if (tr_fd >= 0)
		sock_sys.close(tr_fd);
	tr_fd = -1;
	if (per_pid)
		trace_open_locked();
	pthread_mutex_unlock(&tr_lock);
}

__attribute__((constructor)) static void trace_init(void)
{
	const char *p = getenv("SMCR_TRACE");
	if (!p || !*p || strlen(p) >= sizeof(path_tmpl))
		return;
	memcpy(path_tmpl, p, strlen(p) + 1);
	per_pid = strstr(path_tmpl, "%p") != NULL;
	tr_max = (uint64_t)smcr_env_num_or("SMCR_TRACE_MAX_MB", 1, 1u << 20, TRACE_MAX_MB_DEFAULT)
		 << 20;
	pthread_atfork(trace_atfork_prepare, trace_atfork_parent, trace_atfork_child);
	pthread_mutex_lock(&tr_lock);
	trace_open_locked();
	pthread_mutex_unlock(&tr_lock);
}

/* ---- CLC over TCP ---- */

/* An address as the frame's IPv4 and port: IPv4 and IPv4-mapped as they are; other IPv6
 * addresses by their last four bytes (the frames are IPv4 only). */
static void ep_of(const struct sockaddr_storage *ss, struct netframe_ep *ep)
{
	memset(ep, 0, sizeof(*ep));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)ss;
		ep->ip4 = ntohl(a->sin_addr.s_addr);
		ep->port = ntohs(a->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)ss;
		const uint8_t *b = a->sin6_addr.s6_addr + 12;
		ep->ip4 = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
		ep->port = ntohs(a->sin6_port);
	}
	/* a locally administered MAC from the address, so each end has its own */
	ep->mac[0] = 0x02;
	memcpy(ep->mac + 2, &ep->ip4, 4);
}

static struct flow *flow_of(uint64_t serial)
{
	for (unsigned i = 0; i < TRACE_FLOWS; i++)
		if (flows[i].serial == serial)
			return &flows[i];
	struct flow *f = &flows[flow_next++ % TRACE_FLOWS];
	f->serial = serial;
	f->seq[0] = f->seq[1] = 1;
	return f;
}

void trace_clc(struct sock *s, bool out, const uint8_t *msg, size_t len)
{
	if (!trace_on() || !len || len > CLC_MSG_MAX_LEN)
		return;
	struct sockaddr_storage l, p;
	if (s->have_addrs) {
		l = s->laddr;
		p = s->paddr;
	} else {
		socklen_t ll = sizeof(l), pl = sizeof(p);
		memset(&l, 0, sizeof(l));
		memset(&p, 0, sizeof(p));
		(void)sock_sys.getsockname(s->tcp, (struct sockaddr *)&l, &ll);
		(void)sock_sys.getpeername(s->tcp, (struct sockaddr *)&p, &pl);
	}
	struct netframe_ep me, peer;
	ep_of(&l, &me);
	ep_of(&p, &peer);
	uint8_t frame[TRACE_FRAME_MAX];
	pthread_mutex_lock(&tr_lock);
	struct flow *f = flow_of(s->serial);
	struct netframe_tcp seg = {
		.src = out ? &me : &peer,
		.dst = out ? &peer : &me,
		.seq = f->seq[!out],
		.ack = f->seq[out],
		.flags = 0x18, /* PSH|ACK */
		.window = 65535,
		.data = msg,
		.len = len,
	};
	size_t n = netframe_tcp4(frame, sizeof(frame), &seg);
	f->seq[!out] += (uint32_t)len;
	if (n)
		frame_write(frame, n);
	pthread_mutex_unlock(&tr_lock);
}

/* ---- LLC, CDC and RDMA WRITEs over RoCE v1 ---- */

static void core_trace(void *ctx, const struct core_trace_ev *ev)
{
	(void)ctx;
	if (!trace_on())
		return;
	struct netframe_ep me, peer;
	memset(&me, 0, sizeof(me));
	memset(&peer, 0, sizeof(peer));
	memcpy(me.gid, ev->local_gid, 16);
	memcpy(me.mac, ev->local_mac, 6);
	memcpy(peer.gid, ev->peer_gid, 16);
	memcpy(peer.mac, ev->peer_mac, 6);
	bool rx = ev->kind == CORE_TRACE_RECV;
	struct netframe_roce r = {
		.src = rx ? &peer : &me,
		.dst = rx ? &me : &peer,
		.opcode = ev->kind == CORE_TRACE_WRITE ? NF_BTH_OP_RC_RDMA_WRITE_ONLY
						       : NF_BTH_OP_RC_SEND_ONLY,
		.se = ev->solicited,
		.dqpn = rx ? ev->local_qpn : ev->peer_qpn,
	};
	if (ev->kind == CORE_TRACE_WRITE) {
		r.reth = true;
		r.va = ev->remote_addr;
		r.rkey = ev->rkey;
		r.dmalen = (uint32_t)ev->len;
	} else {
		if (!ev->msg || ev->len > 64)
			return;
		r.payload = ev->msg;
		r.len = ev->len;
	}
	uint8_t frame[256];
	pthread_mutex_lock(&tr_lock);
	r.psn = tr_psn++ & 0xffffff;
	size_t n = netframe_roce_v1(frame, sizeof(frame), &r);
	if (n)
		frame_write(frame, n);
	pthread_mutex_unlock(&tr_lock);
}

void (*trace_core_fn(void))(void *ctx, const struct core_trace_ev *ev)
{
	return trace_on() ? core_trace : NULL;
}
