/* smcr-echo-server: an echo server on the smcr socket API (include/smcr/smcr.h).
 *
 *   smcr-echo-server [-4|-6] [-p PORT] [-n CONNECTIONS]     (-p 0: any free port)
 *
 * One thread, non-blocking sockets, edge-triggered epoll: the shape of a real event-loop
 * server. It shows the three things a program on smcr must do differently from one on
 * plain TCP, and nothing else: the calls carry the smcr_ prefix, epoll registrations of
 * smcr fds go through smcr_epoll_ctl (an accepted connection's fd changes behind the
 * number when its handshake ends), and SOL_SMCR tells how each connection runs.
 * SMC-R is used when the rules allow it, e.g.  SMCR_RULES='use smc both * *'
 * (docs/CONFIG.md). Exits after -n connections (default: never). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <smcr/smcr.h>

#define MAXEV 64

static void report(int fd, const char *what)
{
	struct smcr_info in;
	socklen_t len = sizeof(in);
	if (smcr_getsockopt(fd, SOL_SMCR, SMCR_INFO, &in, &len) < 0)
		return;
	printf("fd %d %s: mode %s", fd, what, smcr_mode_name(in.mode));
	if (in.mode == SMCR_MODE_SMCR)
		printf(", link group %u%s, RMBE %u bytes, %llu bytes in, %llu out", in.lgr_id,
		       in.first_contact ? " (new)" : "", in.rmbe_size,
		       (unsigned long long)in.bytes_received, (unsigned long long)in.bytes_sent);
	if (in.local_reason || in.peer_reason)
		printf(", reasons: local %s, peer %s", smcr_reason_name(in.local_reason),
		       smcr_reason_name(in.peer_reason));
	printf("\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int port = 7000, family = AF_INET, limit = -1, opt;
	while ((opt = getopt(argc, argv, "46p:n:")) != -1) {
		switch (opt) {
		case '4': family = AF_INET; break;
		case '6': family = AF_INET6; break;
		case 'p': port = atoi(optarg); break;
		case 'n': limit = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-4|-6] [-p PORT] [-n CONNECTIONS]\n", argv[0]);
			return 2;
		}
	}
	int l = smcr_socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (l < 0) {
		perror("socket");
		return 1;
	}
	int one = 1;
	smcr_setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	socklen_t sl;
	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_any;
		a->sin6_port = htons((uint16_t)port);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_ANY);
		a->sin_port = htons((uint16_t)port);
		sl = sizeof(*a);
	}
	if (smcr_bind(l, (struct sockaddr *)&ss, sl) < 0 || smcr_listen(l, 128) < 0) {
		perror("bind/listen");
		return 1;
	}
	sl = sizeof(ss); /* -p 0: the kernel picked one */
	smcr_getsockname(l, (struct sockaddr *)&ss, &sl);
	port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					: ((struct sockaddr_in *)&ss)->sin_port);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = l };
	smcr_epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
	printf("listening on port %d\n", port);
	fflush(stdout);
	int served = 0;
	static char buf[65536];
	while (limit < 0 || served < limit) {
		struct epoll_event evs[MAXEV];
		int n = epoll_wait(ep, evs, MAXEV, -1);
		if (n < 0 && errno == EINTR)
			continue;
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == l) {
				int c;
				while ((c = smcr_accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					/* registered through smcr_epoll_ctl: it follows the fd when
					 * the background handshake ends */
					struct epoll_event cev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET,
								   .data.fd = c };
					smcr_epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
				}
				continue;
			}
			/* edge-triggered: read until EAGAIN, echo everything */
			bool done = evs[i].events & (EPOLLERR | EPOLLHUP);
			for (;;) {
				ssize_t r = smcr_recv(fd, buf, sizeof(buf), 0);
				if (r > 0) {
					ssize_t off = 0;
					while (off < r) {
						ssize_t w = smcr_send(fd, buf + off, (size_t)(r - off),
								      MSG_NOSIGNAL);
						if (w < 0 && errno == EAGAIN) {
							/* the peer's buffer is full: wait for room (a
							 * bigger server would queue and use EPOLLOUT) */
							struct pollfd p = { .fd = fd, .events = POLLOUT };
							poll(&p, 1, 1000);
							continue;
						}
						if (w < 0) {
							done = true;
							break;
						}
						off += w;
					}
					continue;
				}
				if (r == 0 || errno != EAGAIN)
					done = true; /* EOF or error */
				break;
			}
			if (done) {
				report(fd, "closing");
				smcr_epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				smcr_close(fd);
				served++;
			}
		}
	}
	close(ep);
	smcr_close(l);
	return 0;
}
