/* peers.c: TCP server and client on plain sockets + the opt-in API, run as forked test
 * peers (see peers.h). Each records, per connection, what smcr_optin_result() said. */
#define _GNU_SOURCE
#include "peers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bpf/optin.h"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static socklen_t make_addr(int family, const char *addr, uint16_t port,
			   struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		inet_pton(AF_INET, addr, &a->sin_addr);
		return sizeof(*a);
	}
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	a6->sin6_family = AF_INET6;
	a6->sin6_port = htons(port);
	inet_pton(AF_INET6, addr, &a6->sin6_addr);
	return sizeof(*a6);
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static int fail(struct peer_results *r, const char *what)
{
	if (!r->err[0])
		snprintf(r->err, sizeof(r->err), "%s: %s", what, strerror(errno));
	return 1;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Holds the accepted sockets, as a server that now runs CLC would, until each client
 * has closed (EOF), reading whatever Fast Open data came; then closes them. */
static int server_linger(struct srv_cfg *c, int *acc)
{
	struct peer_results *r = c->res;
	struct pollfd *p = calloc((size_t)r->nsrv, sizeof(*p));
	int open_n = r->nsrv;
	int64_t deadline = now_ms() + c->timeout_ms;
	char sink[256];

	if (!p)
		return fail(r, "calloc");
	for (int i = 0; i < r->nsrv; i++) {
		p[i].fd = acc[i];
		p[i].events = POLLIN;
	}
	while (open_n > 0 && now_ms() < deadline) {
		if (poll(p, (nfds_t)r->nsrv, (int)(deadline - now_ms())) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < r->nsrv; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			ssize_t k = recv(p[i].fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (k > 0 || (k < 0 && errno == EAGAIN))
				continue;
			close(p[i].fd);
			p[i].fd = -1;
			open_n--;
		}
	}
	for (int i = 0; i < r->nsrv; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	free(p);
	free(acc);
	if (open_n > 0) {
		errno = ETIMEDOUT;
		return fail(r, "clients did not close");
	}
	return 0;
}

int peer_server(void *arg)
{
	struct srv_cfg *c = arg;
	struct peer_results *r = c->res;
	struct pollfd pfd[PEER_MAX_LISTENERS];
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, n = c->nlisteners > 0 ? c->nlisteners : 1;
	int64_t deadline;
	int *acc = calloc(PEER_MAX_CONN, sizeof(int));

	if (!acc)
		return fail(r, "calloc");
	raise_nofile();
	for (int i = 0; i < n; i++) {
		int fd = socket(c->family, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return fail(r, "socket");
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (n > 1 && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
			return fail(r, "SO_REUSEPORT");
		if (c->family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &c->v6only, sizeof(int));
		if (c->optin & (1u << i)) {
			int e = 0;
			r->enable_srv[i] = smcr_optin_enable(fd, &e);
		}
		if (c->fastopen &&
		    setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN, &c->fastopen, sizeof(int)) != 0)
			return fail(r, "TCP_FASTOPEN");
		len = make_addr(c->family, c->addr, c->port, &ss);
		if (bind(fd, (struct sockaddr *)&ss, len) != 0)
			return fail(r, "bind");
		if (listen(fd, 4096) != 0)
			return fail(r, "listen");
		pfd[i].fd = fd;
		pfd[i].events = POLLIN;
	}
	if (write(c->ready_fd, "r", 1) != 1)
		return fail(r, "ready");
	deadline = now_ms() + c->timeout_ms;
	while (r->nsrv < c->count) {
		int left = (int)(deadline - now_ms());
		if (left <= 0) {
			errno = ETIMEDOUT;
			return fail(r, "accept");
		}
		int k = poll(pfd, (nfds_t)n, left);
		if (k < 0 && errno != EINTR)
			return fail(r, "poll");
		for (int i = 0; i < n && r->nsrv < c->count; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			for (;;) {
				len = sizeof(ss);
				int a = accept4(pfd[i].fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
				if (a < 0) {
					if (errno == EAGAIN || errno == EWOULDBLOCK)
						break;
					return fail(r, "accept4");
				}
				struct smcr_optin_info info;
				struct conn_rec *rec = &r->srv[r->nsrv++];
				rec->result = (uint8_t)smcr_optin_result(a, &info);
				rec->flags = info.flags;
				rec->port = port_of(&ss);
				rec->listener = (uint8_t)i;
				acc[r->nsrv - 1] = a; /* kept open until the client closes */
				if (r->nsrv >= c->count)
					break;
			}
		}
	}
	for (int i = 0; i < n; i++)
		close(pfd[i].fd);
	return server_linger(c, acc);
}

/* One client socket, connecting (non-blocking when parallel). Returns the fd or -1. */
static int client_open(struct cli_cfg *c, int idx, const struct sockaddr_storage *dst,
		       socklen_t dlen)
{
	struct peer_results *r = c->res;
	int fd = socket(c->family, SOCK_STREAM | (c->parallel ? SOCK_NONBLOCK : 0), 0);

	if (fd < 0)
		return -1;
	if (c->optin) {
		int e = 0, rc = smcr_optin_enable(fd, &e);
		if (idx == 0)
			r->enable_cli = rc;
	}
	if (c->fastopen) {
		if (sendto(fd, "x", 1, MSG_FASTOPEN, (const struct sockaddr *)dst, dlen) < 0 &&
		    errno != EINPROGRESS) {
			close(fd);
			return -1;
		}
	} else if (connect(fd, (const struct sockaddr *)dst, dlen) != 0 &&
		   errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

static void client_record(struct cli_cfg *c, int fd)
{
	struct peer_results *r = c->res;
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	struct smcr_optin_info info;
	struct conn_rec *rec = &r->cli[r->ncli++];

	rec->result = (uint8_t)smcr_optin_result(fd, &info);
	rec->flags = info.flags;
	getsockname(fd, (struct sockaddr *)&me, &len);
	rec->port = port_of(&me);
}

int peer_client(void *arg)
{
	struct cli_cfg *c = arg;
	struct peer_results *r = c->res;
	struct sockaddr_storage dst;
	socklen_t dlen = make_addr(c->family, c->addr, c->port, &dst);
	char b;

	raise_nofile();
	if (read(c->ready_fd, &b, 1) != 1) {
		errno = EPIPE;
		return fail(r, "server not ready");
	}
	if (!c->parallel) {
		for (int i = 0; i < c->count; i++) {
			int fd = client_open(c, i, &dst, dlen);
			if (fd < 0)
				return fail(r, "connect");
			if (c->fastopen) {
				struct pollfd p = { .fd = fd, .events = POLLOUT };
				if (poll(&p, 1, c->timeout_ms) != 1)
					return fail(r, "fastopen connect");
			}
			client_record(c, fd);
			close(fd);
		}
		return 0;
	}
	struct pollfd *p = calloc((size_t)c->count, sizeof(*p));
	int pending = c->count;
	int64_t deadline = now_ms() + c->timeout_ms;

	if (!p)
		return fail(r, "calloc");
	for (int i = 0; i < c->count; i++) {
		p[i].fd = client_open(c, i, &dst, dlen);
		if (p[i].fd < 0) {
			free(p);
			return fail(r, "connect");
		}
		p[i].events = POLLOUT;
	}
	while (pending > 0) {
		int left = (int)(deadline - now_ms());
		if (left <= 0) {
			errno = ETIMEDOUT;
			free(p);
			return fail(r, "parallel connect");
		}
		if (poll(p, (nfds_t)c->count, left) < 0 && errno != EINTR) {
			free(p);
			return fail(r, "poll");
		}
		for (int i = 0; i < c->count; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			int soerr = 0;
			socklen_t sl = sizeof(soerr);
			getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
			if (soerr != 0) {
				errno = soerr;
				free(p);
				return fail(r, "parallel connect failed");
			}
			client_record(c, p[i].fd);
			close(p[i].fd);
			p[i].fd = -1;
			pending--;
		}
	}
	free(p);
	return 0;
}
