/* pl_early: a connection is usable as soon as TCP is, as TCP's (docs/INTERPOSER.md
 * "Undecided connections"). One thread connects, writes, and only then accepts (CPython's
 * test_socketserver, test_eintr and test_epoll do this), so the client's connect must not
 * wait for a handshake the server has not started. Each scenario checks the bytes at the
 * other end and the mode both ends got (SMCR_INFO, after the bytes crossed):
 *   - blocking connect, a write before accept, the accepted end writable at once and
 *     readable with the client's bytes, a reply;
 *   - non-blocking connect: POLLOUT once TCP is up, SO_ERROR 0, a write before accept,
 *     both ends EPOLLOUT in one epoll_wait (EPOLLET), then no further event while nothing
 *     moves, then EPOLLIN at both ends after a write each (test_epoll's
 *     test_control_and_wait);
 *   - a client that writes, shuts its write side and closes before the server accepted:
 *     the server reads every byte, then EOF;
 *   - a write larger than what the connection buffers before the decision: a blocking
 *     write returns once all is sent, which needs the server to read in another thread;
 *   - a server that accepts and closes at once: the client reads EOF, SO_ERROR 0;
 *   - dup right after connect (a server thread accepts and reads): the copy carries the
 *     connection;
 *   - a blocking connect that a signal without SA_RESTART interrupts while TCP connects
 *     (a listener whose queue is full drops the SYN; TCP retries after 1 s): EINTR, the
 *     connection goes on, POLLOUT and SO_ERROR 0 later, then data over SMC-R; with
 *     SA_RESTART the connect returns 0.
 * The mode expected is SMC-R (PL_EXPECT=tcp: TCP). */
#include "pl_util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/syscall.h>

#define SMALL 10000

static void check_pattern(const unsigned char *b, size_t n, uint64_t off)
{
	unsigned char *want = malloc(n);
	CHECK(want);
	pl_fill(want, n, off);
	CHECK(memcmp(b, want, n) == 0);
	free(want);
}

static void check_mode(int fd)
{
	CHECK(pl_mode_now(fd) == pl_expect()); /* decided: bytes crossed */
}

/* The server's reply and the client's read of it: after it both ends decided. */
static void reply(int sv, int cl)
{
	unsigned char b[64], r[64];
	pl_fill(b, sizeof(b), 77);
	pl_write_all(sv, b, sizeof(b));
	pl_read_all(cl, r, sizeof(r));
	check_pattern(r, sizeof(r), 77);
	check_mode(cl);
	check_mode(sv);
}

static void blocking(int l, uint16_t port)
{
	int c = pl_connect(port); /* no thread accepts: returns once TCP is up */
	unsigned char b[SMALL];
	pl_fill(b, sizeof(b), 1);
	CHECK(write(c, b, sizeof(b)) == (ssize_t)sizeof(b));
	struct pollfd p = { .fd = c, .events = POLLOUT };
	CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLOUT));
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	/* the accepted end: writable at once, readable once the client's bytes came */
	p = (struct pollfd){ .fd = s, .events = POLLOUT };
	CHECK(poll(&p, 1, 0) == 1 && p.revents == POLLOUT);
	p = (struct pollfd){ .fd = s, .events = POLLIN };
	CHECK(poll(&p, 1, 20000) == 1 && (p.revents & POLLIN));
	unsigned char r[SMALL];
	pl_read_all(s, r, sizeof(r));
	check_pattern(r, sizeof(r), 1);
	reply(s, c);
	close(c);
	close(s);
}

static void nonblocking(int l, uint16_t port)
{
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(c >= 0);
	struct sockaddr_in a = pl_addr(port);
	int rc = connect(c, (struct sockaddr *)&a, sizeof(a));
	CHECK(rc == 0 || errno == EINPROGRESS);
	struct pollfd p = { .fd = c, .events = POLLOUT };
	CHECK(poll(&p, 1, 20000) == 1 && p.revents == POLLOUT);
	CHECK(pl_so_error(c) == 0);
	unsigned char b[SMALL];
	pl_fill(b, sizeof(b), 2);
	CHECK(send(c, b, sizeof(b), 0) == (ssize_t)sizeof(b));
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	CHECK(fcntl(s, F_SETFL, O_NONBLOCK) == 0);
	/* test_epoll's test_control_and_wait */
	int ep = epoll_create1(0);
	CHECK(ep >= 0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLET, .data.fd = s };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0);
	ev.data.fd = c;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) == 0);
	struct epoll_event got[4];
	int n = epoll_wait(ep, got, 4, 1000);
	CHECK(n == 2);
	for (int i = 0; i < n; i++)
		CHECK(got[i].events == EPOLLOUT || (got[i].data.fd == s && got[i].events ==
						    (EPOLLIN | EPOLLOUT)));
	/* the server's read: EAGAIN until the client's bytes came, then all of them */
	unsigned char r[SMALL];
	size_t have = 0;
	while (have < sizeof(r)) {
		ssize_t k = recv(s, r + have, sizeof(r) - have, 0);
		if (k < 0 && errno == EAGAIN) {
			p = (struct pollfd){ .fd = s, .events = POLLIN };
			CHECK(poll(&p, 1, 20000) == 1);
			continue;
		}
		CHECK(k > 0);
		have += (size_t)k;
	}
	check_pattern(r, sizeof(r), 2);
	/* both ends decided now (the client's bytes crossed); a write each: EPOLLIN at the
	 * other end */
	CHECK(send(c, "Hello!", 6, 0) == 6);
	CHECK(send(s, "world!!", 7, 0) == 7);
	int in = 0;
	for (int round = 0; round < 10 && in != 3; round++) {
		n = epoll_wait(ep, got, 4, 2000);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++)
			if (got[i].events & EPOLLIN)
				in |= got[i].data.fd == c ? 1 : 2;
	}
	CHECK(in == 3);
	char m[8];
	CHECK(recv(s, m, sizeof(m), 0) == 6 && !memcmp(m, "Hello!", 6));
	CHECK(recv(c, m, sizeof(m), 0) == 7 && !memcmp(m, "world!!", 7));
	check_mode(c);
	check_mode(s);
	close(ep);
	close(c);
	close(s);
}

/* Write, shut down, close, all before the server accepted: the bytes, then EOF. */
static void close_early(int l, uint16_t port, bool shut)
{
	int c = pl_connect(port);
	unsigned char b[SMALL];
	pl_fill(b, sizeof(b), 3);
	pl_write_all(c, b, sizeof(b));
	if (shut)
		CHECK(shutdown(c, SHUT_WR) == 0);
	CHECK(close(c) == 0);
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	unsigned char r[SMALL + 1];
	pl_read_all(s, r, SMALL);
	check_pattern(r, SMALL, 3);
	CHECK(read(s, r, sizeof(r)) == 0);
	close(s);
}

/* Shut down before accept, then the reply still comes back. */
static void shut_early(int l, uint16_t port)
{
	int c = pl_connect(port);
	unsigned char b[SMALL];
	pl_fill(b, sizeof(b), 4);
	pl_write_all(c, b, sizeof(b));
	CHECK(shutdown(c, SHUT_WR) == 0);
	CHECK(send(c, "x", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE);
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	unsigned char r[SMALL];
	pl_read_all(s, r, sizeof(r));
	check_pattern(r, sizeof(r), 4);
	CHECK(read(s, r, 1) == 0);
	reply(s, c);
	close(c);
	close(s);
}

struct reader {
	pthread_t t;
	int lfd;
	size_t n;
	uint64_t fnv;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	int s = accept(r->lfd, NULL, NULL);
	CHECK(s >= 0);
	unsigned char b[65536];
	uint64_t h = PL_FNV0;
	size_t have = 0;
	while (have < r->n) {
		ssize_t k = read(s, b, sizeof(b));
		CHECK(k > 0);
		h = pl_fnv(h, b, (size_t)k);
		have += (size_t)k;
	}
	r->fnv = h;
	CHECK(write(s, "k", 1) == 1);
	close(s);
	return NULL;
}

/* More than the undecided connection buffers (its send ring's size) in one blocking
 * write: the write returns once all of it went. The server accepts only after the
 * client's connect returned and starts reading. */
static void big(int l, uint16_t port)
{
	size_t n = 3u << 20;
	unsigned char *b = malloc(n);
	CHECK(b);
	pl_fill(b, n, 5);
	int c = pl_connect(port);
	struct reader r = { .lfd = l, .n = n };
	CHECK(pthread_create(&r.t, NULL, reader_main, &r) == 0);
	CHECK(write(c, b, n) == (ssize_t)n);
	char k;
	CHECK(read(c, &k, 1) == 1 && k == 'k');
	CHECK(pthread_join(r.t, NULL) == 0);
	CHECK(r.fnv == pl_fnv(PL_FNV0, b, n));
	check_mode(c);
	close(c);
	free(b);
}

/* The server accepts and closes at once (CPython's test_socket does): the client sees what
 * TCP's sees, the end of the stream, no error. */
static void closed_at_once(int l, uint16_t port)
{
	int c = pl_connect(port);
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	CHECK(close(s) == 0);
	struct pollfd p = { .fd = c, .events = POLLIN };
	CHECK(poll(&p, 1, 20000) == 1 && (p.revents & POLLIN));
	char b;
	CHECK(read(c, &b, 1) == 0);
	CHECK(pl_so_error(c) == 0);
	close(c);
}

struct user {
	pthread_t t;
	int lfd;
	unsigned char got[SMALL];
};

static void *user_main(void *arg)
{
	struct user *u = arg;
	int s = accept(u->lfd, NULL, NULL);
	CHECK(s >= 0);
	pl_read_all(s, u->got, sizeof(u->got));
	pl_write_all(s, "d", 1);
	close(s);
	return NULL;
}

/* dup of a connection that connect returned undecided: the copy is the same connection
 * (it waits for the decision, which the server thread's use of it brings) */
static void dup_early(int l, uint16_t port)
{
	struct user u = { .lfd = l };
	int c = pl_connect(port);
	CHECK(pthread_create(&u.t, NULL, user_main, &u) == 0);
	int d = dup(c);
	CHECK(d >= 0);
	close(c);
	unsigned char b[SMALL];
	pl_fill(b, sizeof(b), 8);
	pl_write_all(d, b, sizeof(b));
	char k;
	CHECK(read(d, &k, 1) == 1 && k == 'd');
	CHECK(pthread_join(u.t, NULL) == 0);
	check_pattern(u.got, sizeof(u.got), 8);
	check_mode(d);
	close(d);
}

/* ---- EINTR of a blocking connect ---- */

static volatile sig_atomic_t hits;
static void on_sig(int sig)
{
	(void)sig;
	hits++;
}

static char tstate(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

struct kicker {
	pthread_t main;
	pid_t tid;
	int lfd, sf; /* the listener; the filler's accepted end */
	_Atomic int done;
};

static void *kicker_main(void *arg)
{
	struct kicker *k = arg;
	int seen = 0;
	for (int i = 0; i < 20000 && seen < 20 && !atomic_load(&k->done); i++) {
		seen = tstate(k->tid) == 'S' ? seen + 1 : 0;
		usleep(1000);
	}
	if (!atomic_load(&k->done))
		CHECK(pthread_kill(k->main, SIGUSR1) == 0);
	/* the filler's connection is accepted: the queue has room for the retried SYN */
	usleep(50000);
	k->sf = accept(k->lfd, NULL, NULL);
	CHECK(k->sf >= 0);
	return NULL;
}

static void intr(bool restart)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sa.sa_flags = restart ? SA_RESTART : 0;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	/* backlog 0: one connection fills the queue, the next one's SYN is dropped */
	uint16_t port;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(l >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(l, 0) == 0);
	socklen_t al = sizeof(a);
	CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0);
	port = ntohs(a.sin_port);
	int fill = pl_connect(port);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0);
	struct kicker k = { .main = pthread_self(), .tid = (pid_t)syscall(SYS_gettid),
			    .lfd = l, .sf = -1 };
	pthread_t kt;
	CHECK(pthread_create(&kt, NULL, kicker_main, &k) == 0);
	int h0 = hits;
	struct sockaddr_in to = pl_addr(port);
	int rc = connect(c, (struct sockaddr *)&to, sizeof(to));
	int e = errno;
	atomic_store(&k.done, 1);
	CHECK(pthread_join(kt, NULL) == 0);
	int sf = k.sf;
	CHECK(hits > h0); /* the signal came while connect waited */
	if (restart) {
		CHECK(rc == 0);
	} else {
		errno = e;
		CHECK(rc == -1 && e == EINTR);
		struct pollfd p = { .fd = c, .events = POLLOUT };
		CHECK(poll(&p, 1, 20000) == 1 && p.revents == POLLOUT);
		CHECK(pl_so_error(c) == 0);
	}
	unsigned char b[SMALL];
	pl_fill(b, sizeof(b), 6);
	pl_write_all(c, b, sizeof(b));
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	unsigned char r[SMALL];
	pl_read_all(s, r, sizeof(r));
	check_pattern(r, sizeof(r), 6);
	reply(s, c);
	close(s);
	close(c);
	close(sf);
	close(fill);
	close(l);
}

int main(void)
{
	pl_need_preload();
	uint16_t port;
	int l = pl_listen(&port);
	blocking(l, port);
	nonblocking(l, port);
	close_early(l, port, false);
	close_early(l, port, true);
	shut_early(l, port);
	big(l, port);
	dup_early(l, port);
	closed_at_once(l, port);
	close(l);
	intr(false);
	intr(true);
	printf("pl_early: ok\n");
	return 0;
}
