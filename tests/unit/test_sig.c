/* test_sig.c: the readiness rules of an SMC-R connection's fd (src/sock/sig.h), each bit
 * seen through poll, select, epoll level-triggered and epoll edge-triggered, and compared
 * with what a real TCP socket shows in the same situation (loopback pair). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock/sig.h"

#define ALLBITS (POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP)

static short poll_bits(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	int n = poll(&p, 1, 0);
	assert_true(n >= 0);
	return (short)(n ? p.revents & ALLBITS : 0);
}

/* select: readable = IN|HUP|ERR, writable = OUT|ERR (fs/select.c POLLIN_SET/POLLOUT_SET). */
static void check_select(int fd, short bits)
{
	fd_set r, w;
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_SET(fd, &r);
	FD_SET(fd, &w);
	struct timeval tv = { 0, 0 };
	assert_true(select(fd + 1, &r, &w, NULL, &tv) >= 0);
	assert_int_equal(!!FD_ISSET(fd, &r), !!(bits & (POLLIN | POLLHUP | POLLERR)));
	assert_int_equal(!!FD_ISSET(fd, &w), !!(bits & (POLLOUT | POLLERR)));
}

static uint32_t epoll_bits(int ep, int fd)
{
	(void)fd;
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, 0);
	assert_true(n >= 0 && n <= 1);
	return n ? ev[0].events & (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLRDHUP) : 0;
}

static int ioctl_fionread_helper(int fd, int *q)
{
	return ioctl(fd, FIONREAD, q);
}

struct fixture {
	struct sig s;
	int lt, et; /* epoll instances */
};

static int setup(void **state)
{
	static struct fixture f;
	assert_int_equal(sig_open(&f.s), 0);
	f.lt = epoll_create1(0);
	f.et = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP };
	assert_int_equal(epoll_ctl(f.lt, EPOLL_CTL_ADD, f.s.prog, &ev), 0);
	ev.events |= EPOLLET;
	assert_int_equal(epoll_ctl(f.et, EPOLL_CTL_ADD, f.s.prog, &ev), 0);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close(f->lt);
	close(f->et);
	close(f->s.prog);
	sig_close(&f->s);
	return 0;
}

/* Same bits through poll, select and epoll LT. */
static void expect(struct fixture *f, short bits)
{
	assert_int_equal(poll_bits(f->s.prog), bits);
	check_select(f->s.prog, bits);
	assert_int_equal(epoll_bits(f->lt, f->s.prog), (uint32_t)bits);
}

static void test_fresh_writable_only(void **state)
{
	struct fixture *f = *state;
	expect(f, POLLOUT);
	assert_int_equal(epoll_bits(f->et, f->s.prog), EPOLLOUT); /* first edge */
	assert_int_equal(epoll_bits(f->et, f->s.prog), 0);	     /* no new edge */
	/* the prog end is a hidden-free low fd, the signal end is hidden high */
	assert_true(f->s.end >= sock_hidden_min());
	assert_true(fcntl(f->s.end, F_GETFD) & FD_CLOEXEC);
}

static void test_readable_tokens_and_edges(void **state)
{
	struct fixture *f = *state;
	(void)epoll_bits(f->et, f->s.prog);
	sig_readable(&f->s);
	expect(f, POLLIN | POLLOUT);
	assert_int_equal(epoll_bits(f->et, f->s.prog) & EPOLLIN, EPOLLIN);
	assert_int_equal(epoll_bits(f->et, f->s.prog), 0);
	/* a second arrival without a read: a new edge, as TCP gives per segment */
	sig_readable(&f->s);
	assert_int_equal(epoll_bits(f->et, f->s.prog) & EPOLLIN, EPOLLIN);
	/* many arrivals: never more than the cap queued, and still an edge each time */
	for (int i = 0; i < 3 * SIG_TOKEN_CAP; i++) {
		sig_readable(&f->s);
		assert_int_equal(epoll_bits(f->et, f->s.prog) & EPOLLIN, EPOLLIN);
	}
	assert_true(f->s.tokens <= SIG_TOKEN_CAP);
	int q = 0;
	assert_int_equal(ioctl_fionread_helper(f->s.prog, &q), 0);
	assert_int_equal(q, (int)f->s.tokens);
	sig_drain_in(&f->s);
	expect(f, POLLOUT);
	assert_int_equal(f->s.tokens, 0);
}

/* The engine's callback's token (sig_readable_since): none when the program drained after
 * the callback looked (the arrival's bytes were read: a token now would show POLLIN with
 * nothing to read), one when no drain came in between; a drain after the token was written
 * takes it back. */
static void test_readable_since_drain(void **state)
{
	struct fixture *f = *state;
	unsigned gen = sig_drain_gen(&f->s);
	sig_drain_in(&f->s); /* the program read the bytes: ring empty */
	sig_readable_since(&f->s, gen);
	expect(f, POLLOUT);
	assert_int_equal(f->s.tokens, 0);
	gen = sig_drain_gen(&f->s);
	sig_readable_since(&f->s, gen);
	expect(f, POLLIN | POLLOUT);
	assert_int_equal(f->s.tokens, 1);
	sig_drain_in(&f->s);
	expect(f, POLLOUT);
	assert_int_equal(f->s.tokens, 0);
}

static void test_block_unblock_out(void **state)
{
	struct fixture *f = *state;
	(void)epoll_bits(f->et, f->s.prog);
	sig_block_out(&f->s);
	expect(f, 0);
	assert_int_equal(epoll_bits(f->et, f->s.prog), 0);
	sig_block_out(&f->s); /* idempotent */
	expect(f, 0);
	/* a program that blocks in poll for POLLOUT is woken by the unblock */
	sig_unblock_out(&f->s);
	expect(f, POLLOUT);
	assert_int_equal(epoll_bits(f->et, f->s.prog), EPOLLOUT); /* new edge */
	assert_int_equal(f->s.filled, 0);
	/* blocked while readable */
	sig_block_out(&f->s);
	sig_readable(&f->s);
	expect(f, POLLIN);
	sig_unblock_out(&f->s);
	sig_drain_in(&f->s);
	expect(f, POLLOUT);
}

static void test_rdhup(void **state)
{
	struct fixture *f = *state;
	sig_readable(&f->s);
	sig_rdhup(&f->s);
	expect(f, POLLIN | POLLOUT | POLLRDHUP);
	/* EOF stays readable after the tokens are drained */
	sig_drain_in(&f->s);
	expect(f, POLLIN | POLLOUT | POLLRDHUP);
	char c;
	assert_int_equal(recv(f->s.prog, &c, 1, MSG_DONTWAIT), 0);
}

static void test_hup_after_both_shut(void **state)
{
	struct fixture *f = *state;
	sig_block_out(&f->s);
	sig_shut_wr(&f->s);
	/* TCP: POLLOUT after SHUT_WR even if the buffer was full */
	expect(f, POLLOUT);
	sig_rdhup(&f->s);
	expect(f, POLLIN | POLLOUT | POLLRDHUP | POLLHUP);
	/* a reset after both shut still shows POLLERR (the reserve byte) */
	sig_error(&f->s);
	expect(f, POLLIN | POLLOUT | POLLRDHUP | POLLHUP | POLLERR);
}

static void test_shut_rd(void **state)
{
	struct fixture *f = *state;
	sig_shut_rd(&f->s);
	expect(f, POLLIN | POLLOUT | POLLRDHUP);
	sig_readable(&f->s); /* no effect, no error */
	expect(f, POLLIN | POLLOUT | POLLRDHUP);
}

static void test_error_while_blocked(void **state)
{
	struct fixture *f = *state;
	/* the background handshake placeholder: nothing ready until it ends */
	sig_block_out(&f->s);
	expect(f, 0);
	(void)epoll_bits(f->et, f->s.prog);
	sig_error(&f->s);
	expect(f, POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP);
	assert_true(epoll_bits(f->et, f->s.prog) & EPOLLERR);
	int err = 0;
	socklen_t l = sizeof(err);
	assert_int_equal(getsockopt(f->s.prog, SOL_SOCKET, SO_ERROR, &err, &l), 0);
	assert_int_equal(err, ECONNRESET);
	/* everything after the error is a no-op, not a crash */
	sig_readable(&f->s);
	sig_block_out(&f->s);
	sig_unblock_out(&f->s);
	sig_rdhup(&f->s);
	sig_error(&f->s);
}

static void test_error_fresh(void **state)
{
	struct fixture *f = *state;
	sig_error(&f->s);
	expect(f, POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP);
}

static void test_install_and_nonblock(void **state)
{
	struct fixture *f = *state;
	int target = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(target >= 0);
	assert_int_equal(sig_install(&f->s, target, true), 0);
	assert_int_equal(f->s.prog, target);
	assert_true(fcntl(target, F_GETFD) & FD_CLOEXEC);
	int type = 0;
	socklen_t l = sizeof(type);
	int dom = 0;
	assert_int_equal(getsockopt(target, SOL_SOCKET, SO_DOMAIN, &dom, &l), 0);
	assert_int_equal(dom, AF_UNIX);
	(void)type;
	sig_set_nonblock(&f->s, true);
	assert_true(fcntl(target, F_GETFL) & O_NONBLOCK);
	sig_set_nonblock(&f->s, false);
	assert_false(fcntl(target, F_GETFL) & O_NONBLOCK);
	/* epoll registrations follow the file, so re-register after the install */
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP };
	assert_int_equal(epoll_ctl(f->lt, EPOLL_CTL_ADD, target, &ev), 0);
	sig_readable(&f->s);
	assert_int_equal(poll_bits(target), POLLIN | POLLOUT);
}

/* ---- the same situations on a real TCP connection ---- */

static void tcp_pair(int *a, int *b)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
	*a = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(*a, (struct sockaddr *)&sa, sizeof(sa)), 0);
	*b = accept(l, NULL, NULL);
	assert_true(*b >= 0);
	close(l);
}

static short settle_bits(int fd, short want)
{
	/* TCP state changes are asynchronous on loopback only by microseconds */
	short b = 0;
	for (int i = 0; i < 1000; i++) {
		b = poll_bits(fd);
		if (b == want)
			break;
		usleep(1000);
	}
	return b;
}

static void test_matches_tcp(void **state)
{
	struct fixture *f = *state;
	int a, b;
	/* peer FIN */
	tcp_pair(&a, &b);
	shutdown(b, SHUT_WR);
	short tcp_fin = settle_bits(a, POLLIN | POLLOUT | POLLRDHUP);
	sig_rdhup(&f->s);
	assert_int_equal(poll_bits(f->s.prog), tcp_fin);
	/* and our own SHUT_WR: HUP */
	shutdown(a, SHUT_WR);
	short tcp_both = settle_bits(a, POLLIN | POLLOUT | POLLRDHUP | POLLHUP);
	sig_shut_wr(&f->s);
	assert_int_equal(poll_bits(f->s.prog), tcp_both);
	close(a);
	close(b);
	/* peer RST */
	tcp_pair(&a, &b);
	struct linger lg = { 1, 0 };
	setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(b);
	short tcp_rst = settle_bits(a, POLLIN | POLLOUT | POLLRDHUP | POLLHUP | POLLERR);
	struct sig s2;
	assert_int_equal(sig_open(&s2), 0);
	sig_error(&s2);
	assert_int_equal(poll_bits(s2.prog), tcp_rst);
	close(s2.prog);
	sig_close(&s2);
	close(a);
}

/* ---- POLLPRI: urgent data, step by step against a real TCP connection ---- */

#define PRIBITS (POLLIN | POLLPRI | POLLOUT | POLLRDHUP)

static short pri_bits(int fd)
{
	struct pollfd p = { .fd = fd, .events = PRIBITS };
	int n = poll(&p, 1, 0);
	assert_true(n >= 0);
	/* select reports POLLPRI in exceptfds (fs/select.c POLLEX_SET) */
	fd_set x;
	FD_ZERO(&x);
	FD_SET(fd, &x);
	struct timeval tv = { 0, 0 };
	assert_true(select(fd + 1, NULL, NULL, &x, &tv) >= 0);
	assert_int_equal(!!FD_ISSET(fd, &x), !!(n && (p.revents & POLLPRI)));
	return (short)(n ? p.revents & PRIBITS : 0);
}

static short settle_pri(int fd, short want)
{
	short b = 0;
	for (int i = 0; i < 1000; i++) {
		b = pri_bits(fd);
		if (b == want)
			break;
		usleep(1000);
	}
	return b;
}

/* Sends on TCP (b -> a) and waits until a shows want; returns what a shows. */
static short tcp_send(int a, int b, const char *d, int flags, short want)
{
	assert_int_equal(send(b, d, strlen(d), flags), (ssize_t)strlen(d));
	return settle_pri(a, want);
}

static void tcp_recv(int a, const char *want, int flags)
{
	char buf[16] = { 0 };
	assert_int_equal(recv(a, buf, flags & MSG_OOB ? 1 : sizeof(buf), flags | MSG_DONTWAIT),
			 (ssize_t)strlen(want));
	assert_memory_equal(buf, want, strlen(want));
}

static void test_pri_matches_tcp(void **state)
{
	struct fixture *f = *state;
	if (!sig_pri_supported()) {
		fprintf(stderr, "SKIP: AF_UNIX MSG_OOB unusable on this kernel (see the log line "
				"above): POLLPRI is not shown, nothing to compare\n");
		skip();
	}
	int a, b;
	tcp_pair(&a, &b);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLPRI | EPOLLET };
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, f->s.prog, &ev), 0);
	struct epoll_event got;

	/* "ab" + urgent "c", then "de": what sock does on the two arrivals */
	short t = tcp_send(a, b, "abc", MSG_OOB, POLLIN | POLLPRI | POLLOUT);
	sig_readable(&f->s);
	sig_pri_on(&f->s);
	assert_int_equal(epoll_wait(ep, &got, 1, 0), 1); /* an EPOLLPRI edge */
	assert_true(got.events & EPOLLPRI);
	sig_readable(&f->s);
	sig_pri_on(&f->s); /* idempotent: one OOB byte */
	assert_int_equal(tcp_send(a, b, "de", 0, t), t);
	assert_int_equal(t, POLLIN | POLLPRI | POLLOUT);
	assert_int_equal(pri_bits(f->s.prog), t);
	/* a read stops at the mark: urgent data still pending */
	tcp_recv(a, "ab", 0);
	sig_drain_in(&f->s); /* as if the engine had reported nothing readable: must keep PRI */
	sig_readable_if_none(&f->s);
	assert_int_equal(pri_bits(f->s.prog), pri_bits(a));
	/* the urgent byte read out of band: POLLPRI off, "de" still readable */
	tcp_recv(a, "c", MSG_OOB);
	sig_pri_off(&f->s);
	sig_readable_if_none(&f->s);
	assert_int_equal(pri_bits(a), POLLIN | POLLOUT);
	assert_int_equal(pri_bits(f->s.prog), pri_bits(a));
	tcp_recv(a, "de", 0);
	sig_drain_in(&f->s);
	assert_int_equal(pri_bits(f->s.prog), pri_bits(a));
	assert_int_equal(pri_bits(a), POLLOUT);

	/* the lone urgent byte: TCP shows POLLPRI alone; the pair also POLLIN (sig.h
	 * DEVIATION: AF_UNIX counts the OOB byte as queued data) */
	t = tcp_send(a, b, "x", MSG_OOB, POLLPRI | POLLOUT);
	assert_int_equal(t, POLLPRI | POLLOUT);
	sig_readable(&f->s);
	sig_pri_on(&f->s);
	assert_int_equal(pri_bits(f->s.prog), t | POLLIN);
	tcp_recv(a, "x", MSG_OOB);
	sig_pri_off(&f->s);
	assert_int_equal(pri_bits(f->s.prog), pri_bits(a));
	assert_int_equal(pri_bits(a), POLLOUT);
	assert_int_equal(f->s.tokens, 0);

	/* a read that passes the mark (the urgent byte never read): POLLPRI off, as TCP */
	t = tcp_send(a, b, "fg", MSG_OOB, POLLIN | POLLPRI | POLLOUT);
	sig_readable(&f->s);
	sig_pri_on(&f->s);
	assert_int_equal(tcp_send(a, b, "h", 0, t), t);
	sig_readable(&f->s);
	assert_int_equal(pri_bits(f->s.prog), t);
	tcp_recv(a, "f", 0);
	assert_int_equal(pri_bits(f->s.prog), pri_bits(a));
	tcp_recv(a, "h", 0); /* skips "g": past the mark */
	sig_pri_off(&f->s);
	sig_drain_in(&f->s);
	assert_int_equal(pri_bits(a), POLLOUT);
	assert_int_equal(pri_bits(f->s.prog), POLLOUT);

	/* SO_OOBINLINE: the byte is data; POLLPRI until a read passes it */
	int one = 1;
	assert_int_equal(setsockopt(a, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one)), 0);
	t = tcp_send(a, b, "ij", MSG_OOB, POLLIN | POLLPRI | POLLOUT);
	sig_readable(&f->s);
	sig_pri_on(&f->s);
	assert_int_equal(pri_bits(f->s.prog), t);
	tcp_recv(a, "i", 0); /* stops at the mark */
	assert_int_equal(pri_bits(a), POLLIN | POLLPRI | POLLOUT);
	assert_int_equal(pri_bits(f->s.prog), pri_bits(a));
	tcp_recv(a, "j", 0);
	sig_pri_off(&f->s);
	sig_drain_in(&f->s);
	assert_int_equal(pri_bits(a), POLLOUT);
	assert_int_equal(pri_bits(f->s.prog), POLLOUT);
	close(ep);
	close(a);
	close(b);
}

/* Tokens around a queued OOB byte: the cap's eviction must not read the OOB byte away
 * (POLLPRI stays), and taking it back leaves nothing readable. */
static void test_pri_with_many_tokens(void **state)
{
	struct fixture *f = *state;
	if (!sig_pri_supported()) {
		fprintf(stderr, "SKIP: AF_UNIX MSG_OOB unusable on this kernel\n");
		skip();
	}
	sig_pri_on(&f->s);
	assert_true(f->s.pri);
	for (int i = 0; i < 3 * SIG_TOKEN_CAP; i++)
		sig_readable(&f->s);
	assert_int_equal(pri_bits(f->s.prog), POLLIN | POLLPRI | POLLOUT);
	sig_drain_in(&f->s); /* nothing before the mark: nothing read */
	assert_int_equal(pri_bits(f->s.prog), POLLIN | POLLPRI | POLLOUT);
	sig_pri_off(&f->s);
	assert_int_equal(f->s.tokens, 0);
	assert_int_equal(pri_bits(f->s.prog), POLLOUT);
	/* tokens before the mark, cap reached: the evictions take only those */
	for (int i = 0; i < 10; i++)
		sig_readable(&f->s);
	sig_pri_on(&f->s);
	assert_int_equal(f->s.pre, 10);
	for (int i = 0; i < 2 * SIG_TOKEN_CAP; i++)
		sig_readable(&f->s);
	assert_int_equal(f->s.pre, 0);
	assert_int_equal(pri_bits(f->s.prog), POLLIN | POLLPRI | POLLOUT);
	sig_pri_off(&f->s);
	sig_pri_off(&f->s); /* idempotent */
	assert_int_equal(pri_bits(f->s.prog), POLLOUT);
	/* after EOF no OOB byte can be sent (TCP: no urgent data after the FIN) */
	sig_rdhup(&f->s);
	sig_pri_on(&f->s);
	assert_false(f->s.pri);
	assert_int_equal(pri_bits(f->s.prog), POLLIN | POLLOUT | POLLRDHUP);
}

static void test_hide_fd(void **state)
{
	(void)state;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int h = sock_fd_hide(fd);
	assert_true(h >= sock_hidden_min());
	assert_int_equal(fcntl(fd, F_GETFD), -1); /* old number closed */
	assert_int_equal(errno, EBADF);
	close(h);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_fresh_writable_only),  T(test_readable_tokens_and_edges),
		T(test_readable_since_drain),
		T(test_block_unblock_out),    T(test_rdhup),
		T(test_hup_after_both_shut),  T(test_shut_rd),
		T(test_error_while_blocked),  T(test_error_fresh),
		T(test_install_and_nonblock), T(test_matches_tcp),
		T(test_pri_matches_tcp),      T(test_pri_with_many_tokens),
		cmocka_unit_test(test_hide_fd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
