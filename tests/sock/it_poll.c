/* it_poll.c: readiness of SMC-R fds seen through poll, select and epoll (level- and
 * edge-triggered, mixed with other fds) between two processes (docs/design/engine-decisions.md
 * decision 2 and test list): non-blocking connect and accept with the handshake in the background
 * (nothing ready until it ends, then POLLOUT; smcr_epoll_ctl registrations survive the fd
 * swap, also the swap back of a fallback), POLLIN per arrival, POLLOUT off while the peer's
 * RMBE is full and back when it reads, POLLRDHUP, POLLHUP, POLLERR. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "itlib.h"
#include "sock/sock.h"
#include "util/clock.h"

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int cstage, sstage; /* client / server progress markers */
	_Atomic int srv_mode;
	_Atomic long long filled;
	_Atomic unsigned long long cli_cdc_sent, cli_tx_prod, srv_cdc_sent;
	char srv_state[32]; /* written before sstage is set; read after */
};
static struct shared *sh;

static void wait_for(_Atomic int *v, int s)
{
	for (int i = 0; i < 20000 && *v < s; i++)
		usleep(500);
	IT_CHECK(*v >= s);
}

static short pbits(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	int n = poll(&p, 1, ms);
	IT_CHECK(n >= 0);
	return n ? p.revents : 0;
}

/* Waits up to ms for one of events (only those: pbits returns at once on POLLOUT). */
static short pwait(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n = poll(&p, 1, ms);
	IT_CHECK(n >= 0);
	return n ? p.revents : 0;
}

static bool sel(int fd, bool *r, bool *w)
{
	fd_set rs, ws;
	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_SET(fd, &rs);
	FD_SET(fd, &ws);
	struct timeval tv = { 0, 0 };
	int n = select(fd + 1, &rs, &ws, NULL, &tv);
	*r = FD_ISSET(fd, &rs);
	*w = FD_ISSET(fd, &ws);
	return n >= 0;
}

/* epoll_wait for fd's event (other fds in the set are ignored), up to ms. */
static uint32_t ewait(int ep, int fd, int ms)
{
	struct epoll_event ev[8];
	int n = epoll_wait(ep, ev, 8, ms);
	IT_CHECK(n >= 0);
	for (int i = 0; i < n; i++)
		if (ev[i].data.fd == fd)
			return ev[i].events;
	return 0;
}

/* Edge-triggered sets may hold an older edge: wait for one that has the bits. */
static uint32_t ewait_for(int ep, int fd, uint32_t bits, int ms)
{
	uint32_t e = 0;
	uint64_t end = smcr_now_ns() + (uint64_t)ms * 1000000ull;
	while (!((e = ewait(ep, fd, 20)) & bits) && smcr_now_ns() < end)
		;
	if (!(e & bits)) {
		struct sock *so = sock_get(fd);
		struct core_conn_info ci;
		memset(&ci, 0, sizeof(ci));
		if (so && so->conn)
			core_conn_info(so->conn, &ci);
		fprintf(stderr, "ewait_for 0x%x: last 0x%x, poll 0x%x, state %s events 0x%x "
			"cdc_rx %llu rdhup %d\n", bits, e, pbits(fd, 0), ci.state ? ci.state : "-",
			so && so->conn ? core_conn_events(so->conn) : 0,
			(unsigned long long)ci.cdc_received, so ? so->sig.rdhup : -1);
	}
	return e;
}

static struct sockaddr_in dst(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	return sa;
}

/* ---- the SMC-R case ---- */

static int server(void *arg)
{
	(void)arg;
	it_child_env(0);
	/* non-blocking listener: the handshake runs behind; accept returns the connection
	 * once it completed (the first accept takes it from the kernel's queue and may say
	 * EAGAIN; the listener then shows POLLIN at the completion: docs/parts/connect.md) */
	IT_CHECK(smcr_fcntl(lfd, F_SETFL, O_NONBLOCK) == 0);
	struct pollfd lp = { .fd = lfd, .events = POLLIN };
	int fd = -1;
	for (int tries = 0; fd < 0 && tries < 3; tries++) {
		IT_CHECK(poll(&lp, 1, 5000) == 1);
		fd = smcr_accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		IT_CHECK(fd >= 0 || errno == EAGAIN);
	}
	IT_CHECK(fd >= 0);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLET, .data.fd = fd };
	IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	IT_CHECK(ewait(ep, fd, 5000) & EPOLLOUT);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	sh->srv_mode = in.mode;
	IT_CHECK(in.mode == SMCR_MODE_SMCR);
	close(ep);
	IT_CHECK(smcr_fcntl(fd, F_SETFL, 0) == 0); /* blocking from here */

	/* 1: three arrivals for the client's edge-triggered POLLIN */
	for (int i = 0; i < 3; i++) {
		wait_for(&sh->cstage, 1 + i);
		IT_CHECK(it_write_all(fd, "x", 1));
		sh->sstage = 1 + i;
	}
	/* 2: do not read until told: the client fills our RMBE */
	wait_for(&sh->cstage, 10);
	static char big[1 << 20];
	if (!(pwait(fd, POLLIN, 5000) & POLLIN)) { /* the writes may still be in flight */
		struct smcr_info in2;
		it_info(fd, &in2);
		struct sock *so = sock_get(fd);
		struct core_conn_info ci;
		core_conn_info(so->conn, &ci);
		fprintf(stderr, "server: no POLLIN; client filled %lld, rx prod %u:%u cons %u:%u "
			"events 0x%x tokens %u readable %u state %s cdc_rx %llu\n",
			sh->filled, in2.rx_prod.wrap, in2.rx_prod.count, in2.rx_cons.wrap,
			in2.rx_cons.count, core_conn_events(so->conn), so->sig.tokens, ci.readable,
			ci.state, (unsigned long long)ci.cdc_received);
		fprintf(stderr, "client had: cdc_sent %llu tx_prod 0x%llx\n", sh->cli_cdc_sent,
			sh->cli_tx_prod);
		if (getenv("IT_HANG")) {
			fprintf(stderr, "server pid %d hanging\n", (int)getpid());
			sleep(60);
		}
		IT_CHECK(0);
	}
	ssize_t n = smcr_recv(fd, big, sizeof(big), MSG_DONTWAIT);
	IT_CHECK(n > 0);
	while ((n = smcr_recv(fd, big, sizeof(big), MSG_DONTWAIT)) > 0)
		;
	sh->sstage = 10;
	/* 3: our SHUT_WR: the client sees POLLRDHUP */
	wait_for(&sh->cstage, 20);
	while ((n = smcr_recv(fd, big, sizeof(big), MSG_DONTWAIT)) > 0)
		;
	IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
	{
		struct sock *so = sock_get(fd);
		struct core_conn_info ci;
		core_conn_info(so->conn, &ci);
		sh->srv_cdc_sent = ci.cdc_sent;
		snprintf(sh->srv_state, sizeof(sh->srv_state), "%s", ci.state);
	}
	sh->sstage = 20;
	/* 4: reset */
	wait_for(&sh->cstage, 30);
	struct linger lg = { 1, 0 };
	IT_CHECK(smcr_setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	IT_CHECK(smcr_close(fd) == 0);
	sh->sstage = 30;
	return 0;
}

static int client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int pfd[2];
	IT_CHECK(pipe(pfd) == 0);
	int fd = smcr_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	IT_CHECK(fd >= 0);
	/* registered before connect: the registration must follow the fd swap */
	int et = epoll_create1(0), lt = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = fd };
	IT_CHECK(smcr_epoll_ctl(et, EPOLL_CTL_ADD, fd, &ev) == 0);
	struct epoll_event pev = { .events = EPOLLIN, .data.fd = pfd[0] };
	IT_CHECK(epoll_ctl(et, EPOLL_CTL_ADD, pfd[0], &pev) == 0); /* mixed with a pipe */
	struct sockaddr_in sa = dst();
	int rc = smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	IT_CHECK(rc == -1 && errno == EINPROGRESS);
	/* during the handshake: nothing ready (as a TCP connect in progress) */
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	if (in.mode == SMCR_MODE_HANDSHAKE) {
		short b = pbits(fd, 0);
		IT_CHECK(b == 0);
		bool r, w;
		IT_CHECK(sel(fd, &r, &w) && !r && !w);
	}
	uint32_t e = ewait(et, fd, 5000);
	IT_CHECK(e & EPOLLOUT);
	IT_CHECK(!(e & (EPOLLERR | EPOLLHUP)));
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	int err = -1;
	socklen_t l = sizeof(err);
	IT_CHECK(smcr_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err == 0);
	ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
	IT_CHECK(smcr_epoll_ctl(lt, EPOLL_CTL_ADD, fd, &ev) == 0);
	IT_CHECK(ewait(lt, fd, 0) == EPOLLOUT);
	/* no new readiness: a repeated EPOLLOUT edge may come (the install's POLLOUT unblock
	 * can land after the wait above took the first edge; Linux TCP too reports EPOLLOUT
	 * again on an ACK that frees space), anything else is a defect. Seen 1-3 runs in 100
	 * before this allowed it. */
	uint32_t again = ewait(et, fd, 0);
	IT_CHECK(again == 0 || again == EPOLLOUT);

	/* 1: each arrival is a POLLIN edge, level stays until read */
	char c;
	for (int i = 0; i < 3; i++) {
		sh->cstage = 1 + i;
		wait_for(&sh->sstage, 1 + i);
		e = ewait(et, fd, 2000);
		IT_CHECK(e & EPOLLIN);
		IT_CHECK(ewait(lt, fd, 0) & EPOLLIN);
		IT_CHECK(pbits(fd, 0) & POLLIN);
		bool r, w;
		IT_CHECK(sel(fd, &r, &w) && r && w);
	}
	IT_CHECK(smcr_recv(fd, &c, 1, 0) == 1);
	IT_CHECK(pbits(fd, 0) & POLLIN); /* two more bytes */
	char b3[2];
	IT_CHECK(smcr_recv(fd, b3, 2, 0) == 2);
	IT_CHECK(!(pbits(fd, 0) & POLLIN));
	IT_CHECK(smcr_recv(fd, &c, 1, 0) == -1 && errno == EAGAIN);
	/* the pipe in the same epoll set works too */
	IT_CHECK(write(pfd[1], "p", 1) == 1);
	IT_CHECK(ewait(et, pfd[0], 1000) & EPOLLIN);
	IT_CHECK(read(pfd[0], &c, 1) == 1); /* level-triggered: drain it */

	/* 2: fill the server's RMBE: POLLOUT goes off, EAGAIN, and comes back when it reads */
	static char chunk[65536];
	for (;;) {
		ssize_t n = smcr_send(fd, chunk, sizeof(chunk), 0);
		if (n < 0) {
			IT_CHECK(errno == EAGAIN);
			break;
		}
		sh->filled += n;
	}
	IT_CHECK(sh->filled > 0);
	{
		struct smcr_info i2;
		it_info(fd, &i2);
		sh->cli_cdc_sent = i2.cdc_sent;
		sh->cli_tx_prod = (unsigned long long)i2.tx_prod.wrap << 32 | i2.tx_prod.count;
	}
	IT_CHECK(!(pbits(fd, 0) & POLLOUT));
	bool r, w;
	IT_CHECK(sel(fd, &r, &w) && !w);
	IT_CHECK(!(ewait(lt, fd, 0) & EPOLLOUT));
	(void)ewait(et, fd, 0);
	sh->cstage = 10;
	IT_CHECK(pwait(fd, POLLOUT, 5000) & POLLOUT); /* a blocking poll is woken */
	IT_CHECK(ewait(et, fd, 2000) & EPOLLOUT); /* and edge-triggered epoll gets an edge */
	wait_for(&sh->sstage, 10);

	/* 3: the peer's SHUT_WR: POLLIN|POLLRDHUP, EOF; our own SHUT_WR: POLLHUP */
	sh->cstage = 20;
	wait_for(&sh->sstage, 20);
	e = ewait_for(et, fd, EPOLLRDHUP, 3000);
	if (!(e & EPOLLRDHUP))
		fprintf(stderr, "server after SHUT_WR: cdc_sent %llu state %s\n", sh->srv_cdc_sent,
			sh->srv_state);
	IT_CHECK(e & EPOLLRDHUP);
	short pb = pbits(fd, 0);
	IT_CHECK((pb & (POLLIN | POLLRDHUP)) == (POLLIN | POLLRDHUP));
	IT_CHECK(!(pb & POLLHUP));
	IT_CHECK(smcr_recv(fd, &c, 1, 0) == 0);
	IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
	IT_CHECK(pbits(fd, 0) & POLLHUP);

	/* 4: the peer resets: POLLERR */
	sh->cstage = 30;
	wait_for(&sh->sstage, 30);
	for (int i = 0; i < 200 && !(pbits(fd, 0) & POLLERR); i++)
		usleep(5000);
	IT_CHECK(pbits(fd, 0) & POLLERR);
	close(et);
	close(lt);
	smcr_close(fd);
	return 0;
}

static void test_readiness_smc(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, server, NULL, client, NULL, 30000), 0);
	assert_int_equal(sh->srv_mode, SMCR_MODE_SMCR);
}

/* ---- the fallback case: the epoll registration follows the swap back ---- */

static int fb_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	setenv("SMCR_DEVICES", "no-such-provider", 1); /* declines every Proposal */
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_TCP);
	wait_for(&sh->cstage, 1);
	IT_CHECK(it_write_all(fd, "hello", 5));
	IT_CHECK(smcr_recv(fd, in.peer_id, 1, 0) == 0);
	smcr_close(fd);
	return 0;
}

static int fb_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = smcr_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLET, .data.fd = fd };
	IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	struct sockaddr_in sa = dst();
	IT_CHECK(smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno == EINPROGRESS);
	uint32_t e = ewait(ep, fd, 5000);
	IT_CHECK(e & EPOLLOUT);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_TCP);
	IT_CHECK(in.peer_reason == SMCR_REASON_NODEV);
	int dom = 0;
	socklen_t l = sizeof(dom);
	IT_CHECK(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) == 0 && dom == AF_INET);
	sh->cstage = 1;
	e = ewait_for(ep, fd, EPOLLIN, 5000); /* data on the TCP socket, same registration */
	IT_CHECK(e & EPOLLIN);
	char b[5];
	IT_CHECK(smcr_recv(fd, b, 5, 0) == 5 && memcmp(b, "hello", 5) == 0);
	close(ep);
	smcr_close(fd);
	return 0;
}

static void test_readiness_fallback_swap(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, fb_server, NULL, fb_client, NULL, 30000), 0);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_readiness_smc),
		cmocka_unit_test(test_readiness_fallback_swap),
	};
	return IT_MAIN(tests);
}
