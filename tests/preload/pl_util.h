/* pl_util.h: helpers of the interposer's test programs (tests/preload). These programs are
 * plain libc programs, never linked to smcr: they run under smcr-run, and read the mode of
 * a connection with getsockopt(SOL_SMCR, SMCR_INFO) through the interposer (only the
 * constants and the struct come from include/smcr/smcr.h). Each check that fails prints
 * where and aborts; a program that cannot run here exits 77 (CTest: skipped). */
#ifndef SMCR_TESTS_PRELOAD_UTIL_H
#define SMCR_TESTS_PRELOAD_UTIL_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <smcr/smcr.h>

#define CHECK(c)                                                                        \
	do {                                                                            \
		if (!(c)) {                                                             \
			fprintf(stderr, "%s:%d: check failed: %s (errno %d %s)\n", __FILE__, \
				__LINE__, #c, errno, strerror(errno));                  \
			abort(); /* at once: no exit handler waits for connections */   \
		}                                                                       \
	} while (0)

/* The mode smcr reports for fd (enum smcr_mode) as it is now, or -1 if fd is not an smcr
 * socket (the interposer is not there). */
static inline int pl_mode_now(int fd)
{
	struct smcr_info in;
	socklen_t l = sizeof(in);
	memset(&in, 0, sizeof(in));
	if (getsockopt(fd, SOL_SMCR, SMCR_INFO, &in, &l) < 0)
		return -1;
	return in.mode;
}

/* The mode fd's handshake decided. A connection is usable before that (docs/INTERPOSER.md
 * "Undecided connections": connect returns once TCP is up, an accepted connection's
 * handshake starts at its first use): while SMCR_INFO says handshake, this looks again
 * every millisecond, for at most 60 s (then it returns the handshake mode). */
static inline int pl_mode(int fd)
{
	int m = pl_mode_now(fd);
	for (int i = 0; i < 60000 && m == SMCR_MODE_HANDSHAKE; i++) {
		usleep(1000);
		m = pl_mode_now(fd);
	}
	return m;
}

/* A listening TCP socket on the IPv4 address ip (a loopback one), port chosen by the kernel. */
static inline int pl_listen_on(const char *ip, uint16_t *port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(l >= 0);
	int one = 1;
	CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1);
	CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(l, 64) == 0);
	socklen_t al = sizeof(a);
	CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0);
	*port = ntohs(a.sin_port);
	return l;
}

static inline struct sockaddr_in pl_addr_on(const char *ip, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1);
	return a;
}

static inline int pl_connect_on(const char *ip, uint16_t port)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0);
	struct sockaddr_in a = pl_addr_on(ip, port);
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) == 0);
	return c;
}

/* The same on 127.0.0.1. */
static inline int pl_listen(uint16_t *port)
{
	return pl_listen_on("127.0.0.1", port);
}

static inline struct sockaddr_in pl_addr(uint16_t port)
{
	return pl_addr_on("127.0.0.1", port);
}

static inline int pl_connect(uint16_t port)
{
	return pl_connect_on("127.0.0.1", port);
}

static inline int pl_so_error(int fd)
{
	int err = -1;
	socklen_t el = sizeof(err);
	CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0);
	return err;
}

/* accept, then a first use (a poll that does not wait, as a server's event loop makes):
 * under the interposer a connection's server handshake starts at its first use
 * (docs/INTERPOSER.md). */
static inline int pl_accept_used(int lfd)
{
	int s = accept(lfd, NULL, NULL);
	CHECK(s >= 0);
	struct pollfd p = { .fd = s, .events = POLLIN };
	CHECK(poll(&p, 1, 0) >= 0);
	return s;
}

struct pl_acceptor {
	pthread_t t;
	int lfd, fd;
};

static inline void *pl_acceptor_main(void *arg)
{
	struct pl_acceptor *a = arg;
	a->fd = pl_accept_used(a->lfd);
	return NULL;
}

/* A connected pair made the way a client and a server in two threads make it. */
static inline void pl_pair(int lfd, uint16_t port, int *cl, int *sv)
{
	struct pl_acceptor a = { .lfd = lfd, .fd = -1 };
	CHECK(pthread_create(&a.t, NULL, pl_acceptor_main, &a) == 0);
	*cl = pl_connect(port);
	CHECK(pthread_join(a.t, NULL) == 0);
	*sv = a.fd;
	/* the server's side is writable at once (its handshake runs in the background
	 * since the first use; its writes wait in the pre-decision buffer meanwhile) */
	struct pollfd p = { .fd = *sv, .events = POLLOUT };
	CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLOUT));
}

/* FNV-1a over a stream, and the pattern both ends can compute. */
static inline uint64_t pl_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}
#define PL_FNV0 14695981039346656037ull

static inline void pl_fill(unsigned char *b, size_t n, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((off + i) * 2654435761u >> 13);
}

static inline void pl_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		CHECK(w > 0);
		c += w;
		n -= (size_t)w;
	}
}

static inline void pl_read_all(int fd, void *p, size_t n)
{
	char *c = p;
	while (n) {
		ssize_t r = read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r > 0);
		c += r;
		n -= (size_t)r;
	}
}

/* The mode the test expects: SMCR_MODE_SMCR unless PL_EXPECT says "tcp" (the runs with one
 * end, or both, not under the interposer's rules). */
static inline int pl_expect(void)
{
	const char *e = getenv("PL_EXPECT");
	return e && !strcmp(e, "tcp") ? SMCR_MODE_TCP : SMCR_MODE_SMCR;
}

static inline void pl_need_preload(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0);
	if (pl_mode(s) < 0) {
		fprintf(stderr, "not under the interposer (run it with smcr-run)\n");
		exit(1);
	}
	close(s);
}

#endif
