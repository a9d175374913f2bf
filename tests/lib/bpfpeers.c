/* bpfpeers.c: TCP server and client on plain sockets + the opt-in API, run as forked test
 * peers (see bpfpeers.h). Each records, per connection, what smcr_optin_result() said. */
#define _GNU_SOURCE
#include "lib/bpfpeers.h"

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
#include "lib/bpfenv.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static socklen_t make_addr(int family, const char *addr, uint16_t port, struct sockaddr_storage *ss)
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

static int peer_fail(struct peer_results *r, const char *what)
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
		return peer_fail(r, "calloc");
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
		return peer_fail(r, "clients did not close");
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
		return peer_fail(r, "calloc");
	raise_nofile();
	for (int i = 0; i < n; i++) {
		int fd = socket(c->family, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return peer_fail(r, "socket");
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (n > 1 && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
			return peer_fail(r, "SO_REUSEPORT");
		if (c->family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &c->v6only, sizeof(int));
		if (c->optin & (1u << i)) {
			int e = 0;
			r->enable_srv[i] = smcr_optin_enable(fd, &e);
		}
		if (c->fastopen &&
		    setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN, &c->fastopen, sizeof(int)) != 0)
			return peer_fail(r, "TCP_FASTOPEN");
		len = make_addr(c->family, c->addr, c->port, &ss);
		if (bind(fd, (struct sockaddr *)&ss, len) != 0)
			return peer_fail(r, "bind");
		if (listen(fd, 4096) != 0)
			return peer_fail(r, "listen");
		pfd[i].fd = fd;
		pfd[i].events = POLLIN;
	}
	if (write(c->ready_fd, "r", 1) != 1)
		return peer_fail(r, "ready");
	deadline = now_ms() + c->timeout_ms;
	while (r->nsrv < c->count) {
		int left = (int)(deadline - now_ms());
		if (left <= 0) {
			errno = ETIMEDOUT;
			return peer_fail(r, "accept");
		}
		int k = poll(pfd, (nfds_t)n, left);
		if (k < 0 && errno != EINTR)
			return peer_fail(r, "poll");
		for (int i = 0; i < n && r->nsrv < c->count; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			for (;;) {
				len = sizeof(ss);
				int a =
				    accept4(pfd[i].fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
				if (a < 0) {
					if (errno == EAGAIN || errno == EWOULDBLOCK)
						break;
					return peer_fail(r, "accept4");
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
	} else if (connect(fd, (const struct sockaddr *)dst, dlen) != 0 && errno != EINPROGRESS) {
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
		return peer_fail(r, "server not ready");
	}
	if (!c->parallel) {
		for (int i = 0; i < c->count; i++) {
			int fd = client_open(c, i, &dst, dlen);
			if (fd < 0)
				return peer_fail(r, "connect");
			if (c->fastopen) {
				struct pollfd p = {.fd = fd, .events = POLLOUT};
				if (poll(&p, 1, c->timeout_ms) != 1)
					return peer_fail(r, "fastopen connect");
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
		return peer_fail(r, "calloc");
	for (int i = 0; i < c->count; i++) {
		p[i].fd = client_open(c, i, &dst, dlen);
		if (p[i].fd < 0) {
			free(p);
			return peer_fail(r, "connect");
		}
		p[i].events = POLLOUT;
	}
	while (pending > 0) {
		int left = (int)(deadline - now_ms());
		if (left <= 0) {
			errno = ETIMEDOUT;
			free(p);
			return peer_fail(r, "parallel connect");
		}
		if (poll(p, (nfds_t)c->count, left) < 0 && errno != EINTR) {
			free(p);
			return peer_fail(r, "poll");
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
				return peer_fail(r, "parallel connect failed");
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

/* Runs one case and checks that the two ends agree on every connection. */
void peers_run(const struct bpfenv *env, struct srv_cfg *s, struct side ss, struct cli_cfg *c,
               struct side cs, struct outcome *o)
{
	struct peer_results *r = bpfenv_shared(sizeof(*r));
	static struct conn_rec *by_port[65536];
	int pfd[2];

	assert_non_null(r);
	memset(o, 0, sizeof(*o));
	assert_int_equal(pipe(pfd), 0);
	s->res = c->res = r;
	s->ready_fd = pfd[1];
	c->ready_fd = pfd[0];
	s->count = c->count = c->count ? c->count : PEER_DEFAULT_CONN;
	if (!s->timeout_ms)
		s->timeout_ms = 20000;
	if (!c->timeout_ms)
		c->timeout_ms = 20000;
	pid_t sp = bpfenv_spawn(env, ss.covered, ss.netns, peer_server, s);
	pid_t cp = bpfenv_spawn(env, cs.covered, cs.netns, peer_client, c);
	close(pfd[0]);
	close(pfd[1]);
	int crc = bpfenv_wait(cp, 30000);
	int src = bpfenv_wait(sp, 30000);
	if (crc != 0 || src != 0)
		fprintf(stderr, "peer failure: client %d server %d: %s\n", crc, src, r->err);
	assert_int_equal(crc, 0);
	assert_int_equal(src, 0);
	assert_int_equal(r->ncli, s->count);
	assert_int_equal(r->nsrv, s->count);

	memset(by_port, 0, sizeof(by_port));
	for (int i = 0; i < r->nsrv; i++) {
		assert_null(by_port[r->srv[i].port]); /* one record per client port */
		by_port[r->srv[i].port] = &r->srv[i];
	}
	for (int i = 0; i < r->ncli; i++) {
		struct conn_rec *cr = &r->cli[i], *sr = by_port[cr->port];
		assert_non_null(sr);
		int c_smc = cr->result == SMCR_OPTIN_SMC, s_smc = sr->result == SMCR_OPTIN_SMC;
		if (c_smc != s_smc)
			fprintf(stderr, "DISAGREE port %u: client %s (flags %#x) server %s (%#x)\n",
			        cr->port, smcr_optin_name(cr->result), cr->flags,
			        smcr_optin_name(sr->result), sr->flags);
		assert_int_equal(c_smc, s_smc);
		o->smc += c_smc;
		o->plain += !c_smc;
		o->cli_counts[cr->result]++;
		o->srv_counts[sr->result]++;
		if (c_smc)
			o->per_listener_smc[sr->listener]++;
		else
			o->per_listener_plain[sr->listener]++;
	}
	bpfenv_unshared(r, sizeof(*r));
}

/* Every connection of the case ended with these two results. */
void peers_expect_all(const struct outcome *o, int n, enum smcr_optin_result cli,
                      enum smcr_optin_result srv)
{
	if (o->cli_counts[cli] != n || o->srv_counts[srv] != n) {
		for (int i = 0; i < SMCR_OPTIN__COUNT; i++)
			if (o->cli_counts[i] || o->srv_counts[i])
				fprintf(stderr, "  %-14s client %d server %d\n", smcr_optin_name(i),
				        o->cli_counts[i], o->srv_counts[i]);
	}
	assert_int_equal(o->cli_counts[cli], n);
	assert_int_equal(o->srv_counts[srv], n);
}
