/* pl_conn: connection semantics under the interposer.
 *   - non-blocking connect: EINPROGRESS at once, then POLLOUT with SO_ERROR 0 and the mode
 *     decided (SMC-R); a connect to a port nobody listens on: EINPROGRESS or ECONNREFUSED,
 *     and then SO_ERROR ECONNREFUSED;
 *   - SO_RCVTIMEO: a blocking recv with nothing to read ends with EAGAIN;
 *   - a signal without SA_RESTART interrupts a blocking recv (EINTR); with SA_RESTART and no
 *     timeout the recv goes on and returns the data sent later;
 *   - shutdown(SHUT_RD) in one thread wakes another blocked in recv (returns 0);
 *   - dup/dup2/dup3/F_DUPFD_CLOEXEC of an SMC-R connection: every copy is the same
 *     connection (bytes written through any reach the peer, in order), closing all but one
 *     ends nothing, the last close ends it (the peer reads EOF);
 *   - SCM_RIGHTS: passing an SMC-R connection fails with EOPNOTSUPP (nothing is sent);
 *     passing another fd over the same Unix socket works;
 *   - fdopen on an SMC-R connection: fgets/fputs/fflush move the bytes, fclose ends the
 *     connection (the peer reads EOF). */
#include "pl_util.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

static void on_alarm(int sig) { (void)sig; }

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* a connected pair: *cl the client end, *sv the accepted one */
static void pair(int lfd, uint16_t port, int *cl, int *sv)
{
	pl_pair(lfd, port, cl, sv);
	CHECK(pl_mode(*cl) == pl_expect() && pl_mode(*sv) == pl_expect());
}

static void test_nonblocking_connect(uint16_t port, int lfd)
{
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(c >= 0);
	struct sockaddr_in a = pl_addr(port);
	errno = 0;
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) == -1 && errno == EINPROGRESS);
	int s = pl_accept_used(lfd); /* returns at once; the poll starts the server's side */
	struct pollfd p = { .fd = c, .events = POLLOUT };
	CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLOUT) && !(p.revents & POLLERR));
	CHECK(pl_so_error(c) == 0);
	CHECK(pl_mode(c) == pl_expect());
	CHECK(write(c, "ping", 4) == 4);
	char b[4];
	pl_read_all(s, b, 4);
	CHECK(!memcmp(b, "ping", 4));
	close(c);
	close(s);

	/* refused: a port that was just closed */
	uint16_t dead;
	int d = pl_listen(&dead);
	close(d);
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	a = pl_addr(dead);
	errno = 0;
	int r = connect(c, (struct sockaddr *)&a, sizeof(a));
	CHECK(r == -1 && (errno == EINPROGRESS || errno == ECONNREFUSED));
	if (errno == EINPROGRESS) {
		p.fd = c;
		p.events = POLLOUT;
		CHECK(poll(&p, 1, 10000) == 1 && (p.revents & (POLLERR | POLLHUP)));
		CHECK(pl_so_error(c) == ECONNREFUSED);
	}
	close(c);
}

static void test_rcvtimeo(int lfd, uint16_t port)
{
	int c, s;
	pair(lfd, port, &c, &s);
	struct timeval tv = { 0, 100000 };
	CHECK(setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	char b;
	errno = 0;
	CHECK(recv(c, &b, 1, 0) == -1 && errno == EAGAIN);
	close(c);
	close(s);
}

struct writer {
	int fd, delay_ms;
};

static void *late_write(void *arg)
{
	struct writer *w = arg;
	sleep_ms(w->delay_ms);
	CHECK(write(w->fd, "late", 4) == 4);
	return NULL;
}

static void test_signals(int lfd, uint16_t port)
{
	int c, s;
	pair(lfd, port, &c, &s);
	struct sigaction sa = { .sa_handler = on_alarm };
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0); /* no SA_RESTART */
	struct itimerval it = { { 0, 0 }, { 0, 50000 } };
	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
	char b[4];
	errno = 0;
	CHECK(recv(c, b, 4, 0) == -1 && errno == EINTR);

	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	struct writer w = { s, 300 };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, late_write, &w) == 0);
	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
	pl_read_all(c, b, 4); /* pl_read_all retries EINTR: the check is on the data */
	CHECK(!memcmp(b, "late", 4));
	CHECK(pthread_join(t, NULL) == 0);
	signal(SIGALRM, SIG_DFL);
	close(c);
	close(s);
}

static void *blocked_recv(void *arg)
{
	int fd = *(int *)arg;
	char b[8];
	ssize_t r = recv(fd, b, sizeof(b), 0);
	return (void *)(intptr_t)r;
}

static void test_shutdown_wakes(int lfd, uint16_t port)
{
	int c, s;
	pair(lfd, port, &c, &s);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, blocked_recv, &c) == 0);
	sleep_ms(200);
	CHECK(shutdown(c, SHUT_RD) == 0);
	void *r;
	CHECK(pthread_join(t, &r) == 0);
	CHECK((intptr_t)r == 0);
	close(c);
	close(s);
}

static void test_dup(int lfd, uint16_t port)
{
	int c, s;
	pair(lfd, port, &c, &s);
	int d = dup(c);
	CHECK(d >= 0 && d != c && pl_mode(d) == pl_expect());
	int e = fcntl(c, F_DUPFD_CLOEXEC, 50);
	CHECK(e >= 50 && (fcntl(e, F_GETFD) & FD_CLOEXEC));
	int f = 200;
	CHECK(dup2(d, f) == f);
	int g = 201;
	CHECK(dup3(e, g, O_CLOEXEC) == g);
	int nums[] = { c, d, e, f, g };
	char b[2];
	for (int i = 0; i < 5; i++) {
		char m[2] = { 'a', (char)('0' + i) };
		CHECK(write(nums[i], m, 2) == 2);
		pl_read_all(s, b, 2);
		CHECK(b[0] == 'a' && b[1] == '0' + i);
		pl_write_all(s, m, 2); /* and back, read through the next number */
		pl_read_all(nums[(i + 1) % 5], b, 2);
		CHECK(b[1] == '0' + i);
	}
	/* close all but the last: the connection goes on */
	CHECK(close(c) == 0 && close(e) == 0 && close(f) == 0 && close(g) == 0);
	CHECK(write(d, "zz", 2) == 2);
	pl_read_all(s, b, 2);
	CHECK(!memcmp(b, "zz", 2));
	CHECK(pl_mode(d) == pl_expect());
	CHECK(close(d) == 0);
	char x;
	CHECK(read(s, &x, 1) == 0);
	close(s);
}

static int send_fd(int u, int fd)
{
	char byte = 'x';
	struct iovec v = { &byte, 1 };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	memset(&cb, 0, sizeof(cb));
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1, .msg_control = cb.b,
			    .msg_controllen = sizeof(cb.b) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return (int)sendmsg(u, &m, 0);
}

static void test_scm_rights(int lfd, uint16_t port)
{
	int c, s;
	pair(lfd, port, &c, &s);
	int u[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, u) == 0);
	if (pl_expect() == SMCR_MODE_SMCR) {
		errno = 0;
		CHECK(send_fd(u[0], c) == -1 && errno == EOPNOTSUPP);
	}
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(send_fd(u[0], p[0]) == 1);
	char b;
	CHECK(read(u[1], &b, 1) == 1 && b == 'x'); /* only the second message arrived */
	close(p[0]);
	close(p[1]);
	close(u[0]);
	close(u[1]);
	close(c);
	close(s);
}

static void test_fdopen(int lfd, uint16_t port)
{
	int c, s;
	pair(lfd, port, &c, &s);
	FILE *f = fdopen(s, "r+");
	CHECK(f != NULL);
	pl_write_all(c, "hello\n", 6);
	char line[64];
	CHECK(fgets(line, sizeof(line), f) != NULL && !strcmp(line, "hello\n"));
	CHECK(fputs("world\n", f) >= 0 && fflush(f) == 0);
	char b[6];
	pl_read_all(c, b, 6);
	CHECK(!memcmp(b, "world\n", 6));
	CHECK(fclose(f) == 0);
	char x;
	CHECK(read(c, &x, 1) == 0);
	close(c);
}

int main(void)
{
	pl_need_preload();
	uint16_t port;
	int lfd = pl_listen(&port);
	test_nonblocking_connect(port, lfd);
	test_rcvtimeo(lfd, port);
	test_signals(lfd, port);
	test_shutdown_wakes(lfd, port);
	test_fdopen(lfd, port);
	test_dup(lfd, port);
	test_scm_rights(lfd, port);
	close(lfd);
	printf("pl_conn: ok\n");
	return 0;
}
