/* pl_slowloris: clients that connect, send half a CLC Proposal and stall hold nothing back
 * (issue 26 finding 2). 200 such connections (plain TCP clients by the rules: their
 * destination is 127.0.0.1, the real client's 127.0.0.2), then a real client (SMC-R by
 * the rules) is served by an epoll server while all 200 stall. The CLC and first-byte
 * waits are set to 10 minutes (CMakeLists.txt), so a server that made the real client
 * wait for any stalled handshake to time out would make this test time out instead: no
 * timing is measured. */
#include "pl_util.h"

#include <fcntl.h>
#include <sys/epoll.h>

#define STALLERS 200

static int lfd;
static _Atomic int stop;

/* An epoll echo server: non-blocking listener and connections, level-triggered. */
static void *server(void *arg)
{
	(void)arg;
	int ep = epoll_create1(0);
	CHECK(ep >= 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) == 0);
	while (!stop) {
		struct epoll_event out[64];
		int n = epoll_wait(ep, out, 64, 100);
		CHECK(n >= 0 || errno == EINTR);
		for (int i = 0; i < n; i++) {
			int fd = out[i].data.fd;
			if (fd == lfd) {
				int a;
				while ((a = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					struct epoll_event e2 = { .events = EPOLLIN | EPOLLRDHUP,
								  .data.fd = a };
					CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, a, &e2) == 0);
				}
				CHECK(errno == EAGAIN);
				continue;
			}
			char b[4096];
			ssize_t r = read(fd, b, sizeof(b));
			if (r > 0) {
				pl_write_all(fd, b, (size_t)r);
			} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
				CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0);
				close(fd);
			}
		}
	}
	close(ep);
	return NULL;
}

int main(void)
{
	pl_need_preload();
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(lfd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	CHECK(bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(lfd, 1024) == 0);
	socklen_t al = sizeof(a);
	CHECK(getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
	uint16_t port = ntohs(a.sin_port);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, server, NULL) == 0);

	/* half a Proposal: the eyecatcher, the type (1), and the first byte of the length */
	static const unsigned char half[] = { 0xE2, 0xD4, 0xC3, 0xD9, 0x01, 0x00 };
	int st[STALLERS];
	for (int i = 0; i < STALLERS; i++) {
		st[i] = pl_connect(port);
		CHECK(pl_mode(st[i]) == SMCR_MODE_TCP); /* the rules: a plain TCP client */
		pl_write_all(st[i], half, sizeof(half));
	}
	/* the real client */
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0);
	struct sockaddr_in r = pl_addr(port);
	r.sin_addr.s_addr = htonl(0x7f000002);
	/* from 127.0.0.2 too: SMC-R on loopback needs both ends on one address (the CLC's
	 * IP prefix check) */
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = r.sin_addr.s_addr };
	CHECK(bind(c, (struct sockaddr *)&src, sizeof(src)) == 0);
	CHECK(connect(c, (struct sockaddr *)&r, sizeof(r)) == 0);
	CHECK(pl_mode(c) == pl_expect());
	unsigned char msg[1000], back[1000];
	pl_fill(msg, sizeof(msg), 3);
	pl_write_all(c, msg, sizeof(msg));
	pl_read_all(c, back, sizeof(back));
	CHECK(!memcmp(msg, back, sizeof(msg)));
	CHECK(pl_mode(c) == pl_expect());
	close(c);
	for (int i = 0; i < STALLERS; i++)
		close(st[i]);
	stop = 1;
	CHECK(pthread_join(t, NULL) == 0);
	close(lfd);
	printf("pl_slowloris: the real client was served over %s beside %d stalled handshakes\n",
	       pl_expect() == SMCR_MODE_SMCR ? "SMC-R" : "TCP", STALLERS);
	return 0;
}
