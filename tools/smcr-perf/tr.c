/* tr.c: the tcp (libc) and smcr (include/smcr/smcr.h) transports of smcr-perf (tr.h). */
#define _GNU_SOURCE
#include "tr.h"

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SMCR_PERF_HAVE_SMCR
#include <smcr/smcr.h>
#endif

/* ---- tcp: the libc calls (thin wrappers so fortified inline definitions never matter) */

static int tcp_socket(int d, int t, int p)
{
	return socket(d, t, p);
}
static int tcp_bind(int fd, const struct sockaddr *a, socklen_t l)
{
	return bind(fd, a, l);
}
static int tcp_listen(int fd, int b)
{
	return listen(fd, b);
}
static int tcp_accept(int fd, struct sockaddr *a, socklen_t *l)
{
	return accept(fd, a, l);
}
static int tcp_connect(int fd, const struct sockaddr *a, socklen_t l)
{
	return connect(fd, a, l);
}
static ssize_t tcp_send(int fd, const void *b, size_t l, int f)
{
	return send(fd, b, l, f);
}
static ssize_t tcp_recv(int fd, void *b, size_t l, int f)
{
	return recv(fd, b, l, f);
}
static int tcp_shutdown(int fd, int how)
{
	return shutdown(fd, how);
}
static int tcp_close(int fd)
{
	return close(fd);
}
static int tcp_setsockopt(int fd, int lv, int n, const void *v, socklen_t l)
{
	return setsockopt(fd, lv, n, v, l);
}
static int tcp_getsockopt(int fd, int lv, int n, void *v, socklen_t *l)
{
	return getsockopt(fd, lv, n, v, l);
}
static int tcp_getsockname(int fd, struct sockaddr *a, socklen_t *l)
{
	return getsockname(fd, a, l);
}
static int tcp_epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
	return epoll_ctl(ep, op, fd, ev);
}
static int tcp_epoll_wait(int ep, struct epoll_event *evs, int max, int timeout)
{
	return epoll_wait(ep, evs, max, timeout);
}
static int tcp_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl);
}
static int tcp_query(int fd, struct tr_conn_info *ci)
{
	(void)fd;
	memset(ci, 0, sizeof(*ci));
	ci->raw_mode = -1;
	ci->mode = PERF_MODE_TCP;
	return 0;
}
static const char *tcp_reason_name(uint32_t r)
{
	return r ? "UNKNOWN" : "NONE";
}

static const struct perf_tr tr_tcp = {
    .name = "tcp",
    .kind = PERF_TR_TCP,
    .socket = tcp_socket,
    .bind = tcp_bind,
    .listen = tcp_listen,
    .accept = tcp_accept,
    .connect = tcp_connect,
    .send = tcp_send,
    .recv = tcp_recv,
    .shutdown = tcp_shutdown,
    .close = tcp_close,
    .setsockopt = tcp_setsockopt,
    .getsockopt = tcp_getsockopt,
    .getsockname = tcp_getsockname,
    .epoll_ctl = tcp_epoll_ctl,
    .epoll_wait = tcp_epoll_wait,
    .set_nonblock = tcp_set_nonblock,
    .query = tcp_query,
    .reason_name = tcp_reason_name,
};

/* ---- smcr: include/smcr/smcr.h ---- */

#ifdef SMCR_PERF_HAVE_SMCR
static int smcr_tr_set_nonblock(int fd, bool on)
{
	int fl = smcr_fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return smcr_fcntl(fd, F_SETFL, fl);
}

/* The mode is the engine's word (smcr.h "the smcr query"); nothing here assumes it. */
static int smcr_tr_query(int fd, struct tr_conn_info *ci)
{
	struct smcr_info info;
	socklen_t len = sizeof(info);
	memset(&info, 0, sizeof(info));
	memset(ci, 0, sizeof(*ci));
	ci->raw_mode = -1;
	ci->mode = PERF_MODE_UNKNOWN;
	if (smcr_getsockopt(fd, SOL_SMCR, SMCR_INFO, &info, &len) < 0)
		return -1;
	ci->raw_mode = info.mode;
	ci->local_reason = info.local_reason;
	ci->peer_reason = info.peer_reason;
	ci->first_contact = info.first_contact != 0;
	ci->rmbe = info.rmbe_size;
	ci->peer_rmbe = info.peer_rmbe_size;
	ci->sndbuf = info.sndbuf_size;
	switch ((enum smcr_mode)info.mode) {
	case SMCR_MODE_SMCR:
		ci->mode = PERF_MODE_SMCR;
		break;
	case SMCR_MODE_TCP:
		ci->mode = PERF_MODE_FALLBACK;
		break;
	case SMCR_MODE_NONE:
	case SMCR_MODE_LISTEN:
	case SMCR_MODE_HANDSHAKE:
	case SMCR_MODE_FAILED:
	default:
		ci->mode = PERF_MODE_UNKNOWN;
		break;
	}
	return 0;
}

static const struct perf_tr tr_smcr = {
    .name = "smcr",
    .kind = PERF_TR_SMCR,
    .socket = smcr_socket,
    .bind = smcr_bind,
    .listen = smcr_listen,
    .accept = smcr_accept,
    .connect = smcr_connect,
    .send = smcr_send,
    .recv = smcr_recv,
    .shutdown = smcr_shutdown,
    .close = smcr_close,
    .setsockopt = smcr_setsockopt,
    .getsockopt = smcr_getsockopt,
    .getsockname = smcr_getsockname,
    .epoll_ctl = smcr_epoll_ctl,
    .epoll_wait = smcr_epoll_wait,
    .set_nonblock = smcr_tr_set_nonblock,
    .query = smcr_tr_query,
    .reason_name = smcr_reason_name,
};
#endif

const struct perf_tr *tr_get(enum perf_trk kind)
{
	switch (kind) {
	case PERF_TR_TCP:
		return &tr_tcp;
	case PERF_TR_SMCR:
#ifdef SMCR_PERF_HAVE_SMCR
		return &tr_smcr;
#else
		return NULL;
#endif
	}
	return NULL;
}

bool tr_have_smcr(void)
{
	return tr_get(PERF_TR_SMCR) != NULL;
}

const char *tr_kind_name(enum perf_trk kind)
{
	switch (kind) {
	case PERF_TR_TCP:
		return "tcp";
	case PERF_TR_SMCR:
		return "smcr";
	}
	return "?";
}

void tr_smcr_rules(const char *role, const char *addr)
{
	if (getenv("SMCR_PERF_NO_RULES"))
		return;
	const char *old = getenv("SMCR_RULES");
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "use smc %s * %s%s%s", role, addr,
	                 old && *old ? ";" : "", old ? old : "");
	if (n < 0 || (size_t)n >= sizeof(buf)) {
		/* the user's rules are too long to prepend to: ours alone */
		snprintf(buf, sizeof(buf), "use smc %s * %s", role, addr);
	}
	setenv("SMCR_RULES", buf, 1);
}

int tr_resolve(const char *host, uint16_t port, bool passive, struct sockaddr_storage *ss,
               socklen_t *len, char *err, size_t elen)
{
	struct addrinfo hints, *res = NULL;
	char ports[8];
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = passive ? AI_PASSIVE : 0;
	snprintf(ports, sizeof(ports), "%u", port);
	int rc = getaddrinfo(host ? host : "0.0.0.0", ports, &hints, &res);
	if (rc != 0 || !res) {
		snprintf(err, elen, "cannot resolve '%s': %s", host ? host : "0.0.0.0",
		         rc ? gai_strerror(rc) : "no address");
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

const char *tr_fmt_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "(family %d)", sa->sa_family);
	}
	return buf;
}

int tr_send_all(const struct perf_tr *tr, int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = tr->send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int tr_recv_all(const struct perf_tr *tr, int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = tr->recv(fd, p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			return 0;
		p += n;
		len -= (size_t)n;
	}
	return 1;
}
