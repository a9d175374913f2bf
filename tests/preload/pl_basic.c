/* pl_basic: a client and a server thread in one unmodified program, over the interposer.
 * Checks: both ends in SMC-R mode (SMCR_INFO); SO_DOMAIN/SO_TYPE/SO_PROTOCOL and
 * getsockname/getpeername answer as TCP; 8 MiB through write/writev/send into
 * read/readv/recv/recvmsg, checksummed; FIONREAD; poll, select and epoll (LT and ET) see
 * the SMC-R fd's readiness; O_NONBLOCK via fcntl and FIONBIO gives EAGAIN; shutdown(SHUT_WR)
 * gives the peer EOF after every byte; SO_RCVBUF reads back as set, doubled. */
#include "pl_util.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/uio.h>

#define TOTAL (8u << 20)

static int lfd;
static uint64_t srv_hash;
static size_t srv_bytes;

static void check_tcp_identity(int fd)
{
	int v;
	socklen_t l = sizeof(v);
	CHECK(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) == 0 && v == AF_INET);
	l = sizeof(v);
	CHECK(getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) == 0 && v == SOCK_STREAM);
	l = sizeof(v);
	CHECK(getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &l) == 0 && v == IPPROTO_TCP);
	CHECK(pl_so_error(fd) == 0);
}

static void *server(void *arg)
{
	(void)arg;
	struct sockaddr_in peer;
	socklen_t pl = sizeof(peer);
	int c = accept(lfd, (struct sockaddr *)&peer, &pl);
	CHECK(c >= 0);
	CHECK(pl == sizeof(peer) && peer.sin_family == AF_INET);
	/* the first bytes: wait for them with poll, select and epoll in turn */
	struct pollfd p = { .fd = c, .events = POLLIN };
	CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLIN));
	CHECK(c < FD_SETSIZE);
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(c, &rs);
	struct timeval tv = { 10, 0 };
	CHECK(select(c + 1, &rs, NULL, NULL, &tv) == 1 && FD_ISSET(c, &rs));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.fd = c }, out;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) == 0);
	CHECK(epoll_wait(ep, &out, 1, 10000) == 1 && out.data.fd == c && (out.events & EPOLLIN));
	int n = 0;
	CHECK(ioctl(c, FIONREAD, &n) == 0 && n >= 1);
	unsigned char buf[65536];
	uint64_t h = PL_FNV0;
	size_t got = 0;
	int turn = 0;
	for (;;) {
		ssize_t r;
		switch (turn++ % 4) {
		case 0: r = read(c, buf, sizeof(buf)); break;
		case 1: {
			struct iovec v[2] = { { buf, 1000 }, { buf + 1000, sizeof(buf) - 1000 } };
			r = readv(c, v, 2);
			break;
		}
		case 2: r = recv(c, buf, sizeof(buf), 0); break;
		default: {
			struct iovec v = { buf, sizeof(buf) };
			struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
			r = recvmsg(c, &m, 0);
			break;
		}
		}
		CHECK(r >= 0);
		if (r == 0)
			break;
		h = pl_fnv(h, buf, (size_t)r);
		got += (size_t)r;
	}
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL) == 0);
	close(ep);
	srv_hash = h;
	srv_bytes = got;
	check_tcp_identity(c);
	CHECK(pl_mode(c) == pl_expect());
	/* reply with the hash, then end */
	pl_write_all(c, &h, sizeof(h));
	CHECK(close(c) == 0);
	return NULL;
}

int main(void)
{
	pl_need_preload();
	uint16_t port;
	lfd = pl_listen(&port);
	CHECK(pl_mode(lfd) == SMCR_MODE_LISTEN);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, server, NULL) == 0);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
	CHECK(c >= 0);
	int rb = 128 * 1024;
	CHECK(setsockopt(c, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb)) == 0);
	struct sockaddr_in a = pl_addr(port);
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(pl_mode(c) == pl_expect());
	check_tcp_identity(c);
	int v;
	socklen_t l = sizeof(v);
	CHECK(getsockopt(c, SOL_SOCKET, SO_RCVBUF, &v, &l) == 0 && v == 2 * rb);
	struct sockaddr_in me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	CHECK(getsockname(c, (struct sockaddr *)&me, &ml) == 0 && me.sin_port != 0);
	CHECK(getpeername(c, (struct sockaddr *)&peer, &pl) == 0 && peer.sin_port == htons(port));
	CHECK(peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
	int fl = fcntl(c, F_GETFL);
	CHECK(fl >= 0 && !(fl & O_NONBLOCK));
	CHECK(fcntl(c, F_GETFD) == FD_CLOEXEC);
	/* non-blocking: nothing to read yet (the server answers only at the end) */
	CHECK(fcntl(c, F_SETFL, fl | O_NONBLOCK) == 0);
	char x;
	errno = 0;
	CHECK(recv(c, &x, 1, 0) == -1 && errno == EAGAIN);
	CHECK(fcntl(c, F_SETFL, fl) == 0);
	int on = 1;
	CHECK(ioctl(c, FIONBIO, &on) == 0);
	errno = 0;
	CHECK(read(c, &x, 1) == -1 && errno == EAGAIN);
	on = 0;
	CHECK(ioctl(c, FIONBIO, &on) == 0);
	struct pollfd p = { .fd = c, .events = POLLOUT };
	CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLOUT));

	static unsigned char buf[200000];
	uint64_t h = PL_FNV0;
	size_t sent = 0;
	int turn = 0;
	while (sent < TOTAL) {
		size_t n = 1 + (sent * 7919u) % sizeof(buf);
		if (n > TOTAL - sent)
			n = TOTAL - sent;
		pl_fill(buf, n, sent);
		size_t done = 0;
		while (done < n) {
			ssize_t w;
			switch (turn++ % 3) {
			case 0: w = write(c, buf + done, n - done); break;
			case 1: {
				size_t half = (n - done) / 2;
				struct iovec iv[2] = { { buf + done, half },
						       { buf + done + half, n - done - half } };
				w = writev(c, iv, 2);
				break;
			}
			default: w = send(c, buf + done, n - done, MSG_NOSIGNAL); break;
			}
			CHECK(w > 0);
			done += (size_t)w;
		}
		h = pl_fnv(h, buf, n);
		sent += n;
	}
	CHECK(shutdown(c, SHUT_WR) == 0);
	uint64_t back;
	pl_read_all(c, &back, sizeof(back));
	CHECK(read(c, &x, 1) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(srv_bytes == TOTAL);
	CHECK(back == h && srv_hash == h);
	CHECK(close(c) == 0);
	CHECK(close(lfd) == 0);
	printf("pl_basic: %u bytes, mode %s, checksum %016llx\n", TOTAL,
	       pl_expect() == SMCR_MODE_SMCR ? "smcr" : "tcp", (unsigned long long)h);
	return 0;
}
