/* it_accept.c: the accept queue (src/sock/lsn.c; issue 4): a listener's CLC handshakes run
 * concurrently and accept returns the first that completed (docs/parts/connect.md).
 *
 *   - a client that connects and stays silent does not delay a second, normal smcr client:
 *     the second is accepted first (the silent one holds 2.5 s) and moves data over
 *     SMC-R; the silent one is then served as plain TCP after the server's wait (nothing
 *     was read: fallback), with its data; no fd is left behind;
 *   - a client that sends half a Proposal and stalls does not delay the next either (accepted
 *     while the stalled one is still pending); it is
 *     dropped after the CLC wait (never accepted: the raw client sees its connection end)
 *     and leaves no fd;
 *   - a non-blocking listener in epoll (edge-triggered) with several concurrent handshakes:
 *     every wake-up yields at least one connection, accept says EAGAIN exactly when none is
 *     complete, POLLIN is off then, every connection is SMC-R;
 *   - accept4's SOCK_NONBLOCK / SOCK_CLOEXEC reach the returned fd (SMC-R and TCP);
 *   - a signal ends a blocking accept with EINTR, as TCP's;
 *   - blocking accepts serve clients that connect at once, and a client that connects
 *     while the server is outside accept completes its handshake at once (in the
 *     background), not at the server's next accept. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "itlib.h"
#include "sock/closeq.h"
#include "sock/progress.h"
#include "sock/sock.h"
#include "util/clock.h"
#include "wire/clc.h"

static int lfd;
static uint16_t port;

#define NCLI 6

struct shared {
	_Atomic int stage;
	_Atomic uint64_t cli_start_ns;	    /* the normal client's connect began */
	_Atomic uint64_t srv_accept_ns[4];
	_Atomic int srv_mode[4];
	_Atomic int srv_n;
	_Atomic int socks_at_first; /* echo_server: socket objects when accept returned the first */
	_Atomic int fds_mid, fds_after, socks_mid;
	_Atomic int wakeups, accepted, eagain_with_pollin, pollin_after_eagain;
	_Atomic int modes_ok;
	_Atomic int flags_ok[4];
	_Atomic int done;
	_Atomic uint64_t conn_ns[NCLI];    /* each client's connect duration */
	_Atomic uint64_t conn_end_ns[NCLI]; /* ... and when it returned (CLOCK_MONOTONIC) */
	_Atomic uint64_t gap_start_ns;	    /* the server left accept for a while */
	_Atomic uint64_t gap_end_ns;	    /* ... and called it again */
	_Atomic int gap_saw_conn;	    /* ... because the 4th client's connect had returned */
	_Atomic int echo_ok[NCLI];
	_Atomic int go; /* late_server: the silent client is queued */
	_Atomic int cli_reaped; /* the parent reaped the normal client (echo_server's mid) */
};
static struct shared *sh;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* A normal smcr client: connect, 5 bytes each way over SMC-R. */
static int normal_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	(void)sock_engine(); /* the process's start-up is not the server's doing */
	sh->cli_start_ns = now_ns();
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	IT_CHECK(it_write_all(fd, "norm!", 5));
	char b[5];
	IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "norm!", 5) == 0);
	smcr_close(fd);
	return 0;
}

/* Non-blocking accept on a blocking listener: EAGAIN (nothing complete). */
static bool accept_again(void)
{
	IT_CHECK(smcr_fcntl(lfd, F_SETFL, O_NONBLOCK) == 0);
	int fd = smcr_accept(lfd, NULL, NULL);
	int e = errno;
	IT_CHECK(smcr_fcntl(lfd, F_SETFL, 0) == 0);
	return fd < 0 && e == EAGAIN;
}

/* A silent client the server served as plain TCP: its 5 bytes come back. */
static void tcp_echo(int staller)
{
	struct pollfd p = { .fd = staller, .events = POLLIN };
	assert_int_equal(write(staller, "tcp!!", 5), 5);
	assert_int_equal(poll(&p, 1, 10000), 1);
	char b[5];
	assert_int_equal(read(staller, b, 5), 5);
	assert_memory_equal(b, "tcp!!", 5);
}

/* Our shm device's connections to other processes' devices: connected AF_UNIX
 * SOCK_SEQPACKET sockets (the device's listening one is not connected). */
static int shm_peer_conns(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int fd = atoi(e->d_name), v = 0, dom = 0, acc = 1;
		socklen_t l = sizeof(v);
		if (e->d_name[0] == '.' || fd == dirfd(d) ||
		    getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != SOCK_SEQPACKET)
			continue;
		l = sizeof(dom);
		getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l);
		l = sizeof(acc);
		getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l);
		n += dom == AF_UNIX && !acc;
	}
	if (d)
		closedir(d);
	return n;
}

static bool no_shm_peer(void *arg)
{
	(void)arg;
	return shm_peer_conns() == 0;
}

static bool mid_counted(void *arg)
{
	(void)arg;
	return sh->fds_mid != 0;
}

static bool second_accepted(void *arg)
{
	(void)arg;
	return sh->srv_accept_ns[1] != 0;
}

static bool cli_reaped(void *arg)
{
	(void)arg;
	return sh->cli_reaped;
}

/* fds once only `socks` socket objects are left (a closed socket's last reference, its
 * watch, is released by the progress thread a moment later; the release closes its
 * hidden fds), no link group is left, no shm device connection is left, and the count
 * stopped moving. */
static int settled_fds(unsigned socks)
{
	/* and no hidden fd waiting to be closed (sock/closeq.h) */
	for (int i = 0; i < 5000 && (sock_count() > socks || closeq_pending() != 0); i++)
		usleep(1000);
	/* and the normal client's link group gone (it exits after its close: the server
	 * sees the peer go and frees the LG, its QP and RMB memfds) */
	struct core_engine_stats st;
	for (int i = 0; i < 5000; i++) {
		core_engine_stats(sock_engine(), &st);
		if (st.lgs == 0 && st.rmbs == 0)
			break;
		usleep(1000);
	}
	/* and the device's connection to the normal client's device gone: a SEQPACKET
	 * socket and the kick eventfd that device sent in its HELLO (src/dev/shm). They
	 * outlive the link group: the client's exit handler ends the LG, then the process
	 * still runs its exit (the sanitizers' reports, long under load) before the kernel
	 * closes its end and our device thread sees the hang-up. Callers make sure that
	 * process is gone (cli_reaped). */
	IT_CHECK(it_poll_until(no_shm_peer, NULL, 20000, 1000));
	int last = -1, same = 0;
	for (int i = 0; i < 200 && same < 3; i++) {
		int n = it_count_fds();
		same = n == last ? same + 1 : 0;
		last = n;
		usleep(10000);
	}
	return last;
}

/* Blocking accept of n connections: each echoes 5 bytes; records time and mode. The
 * stalled client (one) holds its fd and the handshake's hidden dup while pending. */
static int echo_server(void *arg)
{
	int n = (int)(intptr_t)arg;
	it_child_env(0);
	IT_CHECK(accept_again()); /* the queue is on before the clients come */
	for (int i = 0; i < n; i++) {
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		sh->srv_accept_ns[i] = now_ns();
		if (i == 0)
			sh->socks_at_first = (int)sock_count();
		struct smcr_info in;
		IT_CHECK(it_info(fd, &in));
		sh->srv_mode[i] = in.mode;
		char b[5];
		IT_CHECK(it_read_all(fd, b, 5));
		IT_CHECK(it_write_all(fd, b, 5));
		IT_CHECK(smcr_close(fd) == 0);
		if (i == 0) {
			/* the normal client's process is gone (its device connection with it,
			 * settled_fds) */
			IT_CHECK(it_poll_until(cli_reaped, NULL, 30000, 1000));
			/* listener + the stalled client, pending. A silent client may still be
			 * in the kernel (TCP_DEFER_ACCEPT, lsn.c): then it holds none of our fds
			 * yet; and under TSan on a loaded machine the settling (the normal client's LG to
			 * go) can outlast the stalled one's CLC wait: then it was dropped
			 * already. The socket count is read around the fd count, so both
			 * describe the same moment (retried if it changed in between). */
			int fds = 0, socks = 0;
			for (int k = 0; k < 3; k++) { /* it moves twice at most: taken, dropped */
				int before = (int)sock_count();
				fds = settled_fds(2);
				socks = (int)sock_count();
				if (socks == before)
					break;
			}
			/* fds_mid last: the parent waits for it, then reads the others */
			sh->socks_mid = socks;
			sh->srv_n = 1;
			sh->fds_mid = fds;
		}
		sh->srv_n = i + 1;
	}
	/* whatever the test still expects to be dropped is gone by stage 1 */
	while (sh->stage < 1)
		usleep(1000);
	/* nothing more is ever accepted */
	IT_CHECK(accept_again());
	sh->fds_after = settled_fds(1); /* the listener */
	return 0;
}

static void start_clc(const char *wait_ms, const char *clc_wait_ms)
{
	memset(sh, 0, sizeof(*sh));
	setenv("SMCR_SERVER_WAIT_MS", wait_ms, 1);
	setenv("SMCR_CLC_WAIT_MS", clc_wait_ms, 1);
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
}

static void start(const char *wait_ms)
{
	start_clc(wait_ms, "1500");
}

static void finish(void)
{
	smcr_close(lfd);
	unsetenv("SMCR_SERVER_WAIT_MS");
	unsetenv("SMCR_CLC_WAIT_MS");
}

/* ---- a silent client ---- */

/* The server's fds after the test: those at mid less the pending client's two (its fd and
 * the handshake's hidden dup) if it was ours then. Both counts are taken once the normal
 * client's device connection is gone (settled_fds): counted at one point and not at the
 * other, its two fds made the balance off by two either way under load. */
static void check_fd_balance(void)
{
	int want = sh->fds_mid - 2 * (sh->socks_mid - 1);
	fprintf(stderr, "server fds: %d at mid (%d socket objects), %d after\n", sh->fds_mid,
		sh->socks_mid, sh->fds_after);
	assert_int_equal(sh->fds_after, want);
}

static void test_silent_client_does_not_delay_next(void **state)
{
	(void)state;
	start("2500");
	pid_t s = it_fork(echo_server, (void *)(intptr_t)2);
	usleep(100 * 1000); /* the server is in accept */
	uint64_t t0 = now_ns();
	int staller = it_raw_connect(port);
	usleep(50 * 1000); /* the server has taken it from the kernel's queue */
	pid_t c = it_fork(normal_client, NULL);
	assert_int_equal(it_wait(c, 20000), 0);
	sh->cli_reaped = 1;
	assert_true(it_poll_until(mid_counted, NULL, 40000, 1000));
	/* the normal client was accepted first, promptly, over SMC-R */
	assert_true(sh->srv_n >= 1);
	assert_int_equal(sh->srv_mode[0], SMCR_MODE_SMCR);
	uint64_t lag = sh->srv_accept_ns[0] - sh->cli_start_ns;
	fprintf(stderr, "normal client accepted %.1f ms after its connect began (the silent "
		"one connected %.1f ms before)\n", (double)lag / 1e6,
		(double)(sh->cli_start_ns - t0) / 1e6);
	/* (the first accept returned the normal client, SMC-R: a serial accept would have
	 * returned the silent one first, as TCP after its wait) */
	assert_true(sh->srv_n == 1); /* the silent one is still waiting */
	/* the silent one: after the server's wait (2.5 s), a plain TCP client */
	/* (accepted: the server then waits for our 5 bytes, so srv_n moves only after them) */
	assert_true(it_poll_until(second_accepted, NULL, 20000, 1000));
	tcp_echo(staller);
	uint64_t t_fb = sh->srv_accept_ns[1] - t0;
	fprintf(stderr, "silent client served as TCP after %.1f ms\n", (double)t_fb / 1e6);
	assert_true(t_fb >= 2400000000ull);
	assert_int_equal(sh->srv_mode[1], SMCR_MODE_TCP);
	close(staller);
	sh->stage = 1;
	assert_int_equal(it_wait(s, 20000), 0);
	/* its fd and the handshake's hidden dup, no more, no less (if it was ours at mid:
	 * the kernel holds a silent client for 1 s when the listener defers accepts) */
	assert_true(sh->socks_mid == 1 || sh->socks_mid == 2);
	check_fd_balance();
	finish();
}

/* ---- a silent client queued before the server's first accept ---- */

/* Accepts once, only after the client connected: the listener's TCP_DEFER_ACCEPT (set at
 * the first accept, lsn.c) did not hold that connection, so its first-byte wait gets no
 * credit for the kernel's second. */
static int late_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	while (!sh->go)
		usleep(1000);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	sh->srv_accept_ns[0] = now_ns();
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	sh->srv_mode[0] = in.mode;
	char b[5];
	IT_CHECK(it_read_all(fd, b, 5));
	IT_CHECK(it_write_all(fd, b, 5));
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void test_silent_before_first_accept(void **state)
{
	(void)state;
	start("1500");
	pid_t s = it_fork(late_server, NULL);
	uint64_t t0 = now_ns();
	int staller = it_raw_connect(port);
	usleep(50 * 1000); /* established, in the kernel's queue */
	sh->go = 1;
	for (int i = 0; i < 10000 && !sh->srv_accept_ns[0]; i++)
		usleep(1000);
	tcp_echo(staller);
	uint64_t t_fb = sh->srv_accept_ns[0] - t0;
	fprintf(stderr, "silent client queued before the first accept served as TCP after "
		"%.1f ms (wait 1500 ms)\n", (double)t_fb / 1e6);
	/* the whole wait (was 1 s short: ~0.55 s) */
	assert_true(t_fb >= 1450000000ull);
	assert_int_equal(sh->srv_mode[0], SMCR_MODE_TCP);
	close(staller);
	assert_int_equal(it_wait(s, 20000), 0);
	finish();
}

/* ---- half a Proposal, then a stall ---- */

/* A loopback client's Proposal, encoded into b (CLC_MSG_MAX_LEN bytes); its first 20
 * bytes (eyecatcher, header, part of the peer ID) are what a staller sends. */
static void proposal_bytes(uint8_t *b)
{
	struct clc_msg m;
	memset(&m, 0, sizeof(m));
	m.type = CLC_PROPOSAL;
	clc_proposal_init(&m.proposal);
	m.proposal.ipv4_subnet = 0x7f000000;
	m.proposal.ipv4_prefix_len = 8;
	size_t n = 0;
	assert_int_equal(clc_encode(&m, b, CLC_MSG_MAX_LEN, &n), 0);
}

static void test_half_proposal_dropped_next_served(void **state)
{
	(void)state;
	/* A CLC wait of 3 s: the normal client's count of fds (the mid-point) must come
	 * while the stalled one is still pending; under TSan with the other core busy the
	 * normal client's process started more than 1 s late (CI-like load: failed 2 of 10
	 * with the 1.5 s wait). */
	start_clc("2000", "3000");
	pid_t s = it_fork(echo_server, (void *)(intptr_t)1);
	usleep(100 * 1000);
	uint8_t b[CLC_MSG_MAX_LEN];
	proposal_bytes(b);
	uint64_t t0 = now_ns();
	int staller = it_raw_connect(port);
	assert_int_equal(write(staller, b, 20), 20);
	usleep(50 * 1000);
	pid_t c = it_fork(normal_client, NULL);
	assert_int_equal(it_wait(c, 20000), 0);
	sh->cli_reaped = 1;
	assert_true(it_poll_until(mid_counted, NULL, 40000, 1000));
	assert_int_equal(sh->srv_n, 1);
	assert_int_equal(sh->srv_mode[0], SMCR_MODE_SMCR);
	uint64_t lag = sh->srv_accept_ns[0] - sh->cli_start_ns;
	fprintf(stderr, "normal client accepted %.1f ms after its connect began (the stalled "
		"one connected %.1f ms before)\n", (double)lag / 1e6,
		(double)(sh->cli_start_ns - t0) / 1e6);
	/* Accepted while the stalled one was still pending (the listener, it and the
	 * accepted connection): a serial accept would have returned the normal client only
	 * after the stalled one's drop. Judged only if the normal client began its connect
	 * before that drop was due (a loaded machine can start its process later). */
	if (sh->cli_start_ns - t0 < 2900000000ull)
		assert_int_equal(sh->socks_at_first, 3);
	else
		fprintf(stderr, "the normal client began after the stalled one's CLC wait: "
			"not judged\n");
	/* the stalled one is dropped at the CLC wait (3 s): its connection ends */
	struct pollfd p = { .fd = staller, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 10000), 1);
	char x[16];
	assert_true(read(staller, x, sizeof(x)) <= 0);
	uint64_t t_drop = now_ns() - t0;
	fprintf(stderr, "stalled client dropped after %.1f ms\n", (double)t_drop / 1e6);
	assert_true(t_drop >= 2900000000ull);
	/* causal, not a time bound: the normal client was accepted before the stalled
	 * handshake ended (it did not wait for the stall's timeout) */
	assert_true(sh->srv_accept_ns[0] < t0 + t_drop);
	close(staller);
	sh->stage = 1;
	assert_int_equal(it_wait(s, 20000), 0);
	assert_int_equal(sh->srv_n, 1); /* never accepted */
	/* its fd and the handshake's hidden dup if it was ours at mid (none if it was not
	 * taken yet or dropped already; failed once under TSan on a loaded machine) */
	assert_true(sh->socks_mid == 1 || sh->socks_mid == 2);
	check_fd_balance();
	finish();
}

/* ---- non-blocking accept + epoll, several clients at once ---- */

static int epoll_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	IT_CHECK(smcr_fcntl(lfd, F_SETFL, O_NONBLOCK) == 0);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.fd = lfd };
	IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) == 0);
	/* nothing complete yet: EAGAIN and no POLLIN */
	IT_CHECK(smcr_accept(lfd, NULL, NULL) < 0 && errno == EAGAIN);
	sh->stage = 1; /* clients may come */
	int fds[NCLI];
	int got = 0;
	uint64_t end = now_ns() + 20000000000ull;
	sh->modes_ok = 1;
	while (got < NCLI && now_ns() < end) {
		struct epoll_event out;
		int k = epoll_wait(ep, &out, 1, 1000);
		if (k <= 0)
			continue;
		sh->wakeups++;
		int this_wake = 0;
		for (;;) {
			int fd = smcr_accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
			if (fd < 0) {
				IT_CHECK(errno == EAGAIN);
				struct pollfd p = { .fd = lfd, .events = POLLIN };
				if (poll(&p, 1, 0) == 1)
					sh->pollin_after_eagain++;
				break;
			}
			struct smcr_info in;
			IT_CHECK(it_info(fd, &in));
			if (in.mode != SMCR_MODE_SMCR)
				sh->modes_ok = 0;
			fds[got++] = fd;
			this_wake++;
		}
		if (this_wake == 0)
			sh->eagain_with_pollin++;
	}
	sh->accepted = got;
	for (int i = 0; i < got; i++) {
		char b[5];
		IT_CHECK(smcr_fcntl(fds[i], F_SETFL, 0) == 0);
		IT_CHECK(it_read_all(fds[i], b, 5));
		IT_CHECK(it_write_all(fds[i], b, 5));
		smcr_close(fds[i]);
	}
	close(ep);
	return 0;
}

/* One client process (one peer: no concurrent first contacts, whose link set-up is the
 * provider's business): a blocking connect brings the link group up, then NCLI - 1
 * non-blocking connects at once, so the server runs their handshakes concurrently. */
static int many_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	while (sh->stage < 1)
		usleep(1000);
	int fds[NCLI];
	fds[0] = it_connect(false, port);
	IT_CHECK(fds[0] >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	for (int i = 1; i < NCLI; i++) {
		fds[i] = smcr_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		IT_CHECK(fds[i] >= 0);
		IT_CHECK(smcr_connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
			 errno == EINPROGRESS);
	}
	for (int i = 0; i < NCLI; i++) {
		struct pollfd p = { .fd = fds[i], .events = POLLOUT };
		IT_CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLOUT));
		IT_CHECK(smcr_fcntl(fds[i], F_SETFL, 0) == 0);
		struct smcr_info in;
		IT_CHECK(it_info(fds[i], &in));
		if (in.mode != SMCR_MODE_SMCR)
			fprintf(stderr, "client %d: mode %u, reasons local %#x peer %#x\n", i,
				in.mode, in.local_reason, in.peer_reason);
		IT_CHECK(in.mode == SMCR_MODE_SMCR);
		IT_CHECK(it_write_all(fds[i], "many!", 5));
	}
	for (int i = 0; i < NCLI; i++) {
		char b[5];
		IT_CHECK(it_read_all(fds[i], b, 5) && memcmp(b, "many!", 5) == 0);
		smcr_close(fds[i]);
	}
	return 0;
}

static void test_nonblocking_epoll_many_clients(void **state)
{
	(void)state;
	start("2000");
	pid_t s = it_fork(epoll_server, NULL);
	pid_t c = it_fork(many_client, NULL);
	assert_int_equal(it_wait(c, 30000), 0);
	assert_int_equal(it_wait(s, 30000), 0);
	fprintf(stderr, "%d connections in %d wake-ups\n", sh->accepted, sh->wakeups);
	assert_int_equal(sh->accepted, NCLI);
	assert_int_equal(sh->modes_ok, 1);
	assert_int_equal(sh->eagain_with_pollin, 0); /* every wake-up had a connection */
	assert_int_equal(sh->pollin_after_eagain, 0); /* EAGAIN: POLLIN is off */
	finish();
}

/* ---- accept4 flags ---- */

static int flags_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	static const int fl[4] = { 0, SOCK_NONBLOCK | SOCK_CLOEXEC, 0, SOCK_NONBLOCK | SOCK_CLOEXEC };
	for (int i = 0; i < 4; i++) {
		struct sockaddr_in peer;
		socklen_t pl = sizeof(peer);
		int fd = smcr_accept4(lfd, (struct sockaddr *)&peer, &pl, fl[i]);
		IT_CHECK(fd >= 0);
		IT_CHECK(pl == sizeof(peer) && peer.sin_family == AF_INET &&
			 peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
		struct smcr_info in;
		IT_CHECK(it_info(fd, &in));
		sh->srv_mode[i] = in.mode;
		/* the kernel's view of the fd the program holds (libc, not smcr_) */
		int fdfl = fcntl(fd, F_GETFD), stfl = fcntl(fd, F_GETFL);
		bool ce = (fdfl & FD_CLOEXEC) != 0, nb = (stfl & O_NONBLOCK) != 0;
		bool want_ce = (fl[i] & SOCK_CLOEXEC) != 0, want_nb = (fl[i] & SOCK_NONBLOCK) != 0;
		bool smc_nb = (smcr_fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;
		sh->flags_ok[i] = ce == want_ce && nb == want_nb && smc_nb == want_nb;
		IT_CHECK(smcr_fcntl(fd, F_SETFL, 0) == 0);
		char b[5];
		IT_CHECK(it_read_all(fd, b, 5));
		IT_CHECK(it_write_all(fd, b, 5));
		smcr_close(fd);
	}
	return 0;
}

static void test_accept4_flags(void **state)
{
	(void)state;
	start("2000");
	pid_t s = it_fork(flags_server, NULL);
	for (int i = 0; i < 2; i++) {
		pid_t c = it_fork(normal_client, NULL);
		assert_int_equal(it_wait(c, 20000), 0);
	}
	for (int i = 0; i < 2; i++) {
		/* a plain TCP client that talks first: TCP at once */
		int fd = it_raw_connect(port);
		assert_int_equal(write(fd, "tcp!!", 5), 5);
		char b[5];
		assert_int_equal(read(fd, b, 5), 5);
		close(fd);
	}
	assert_int_equal(it_wait(s, 20000), 0);
	assert_int_equal(sh->srv_mode[0], SMCR_MODE_SMCR);
	assert_int_equal(sh->srv_mode[1], SMCR_MODE_SMCR);
	assert_int_equal(sh->srv_mode[2], SMCR_MODE_TCP);
	assert_int_equal(sh->srv_mode[3], SMCR_MODE_TCP);
	for (int i = 0; i < 4; i++)
		assert_int_equal(sh->flags_ok[i], 1);
	finish();
}

/* ---- a signal ends a blocking accept, as TCP's (EINTR) ---- */

static void on_alarm(int sig)
{
	(void)sig;
}

static int eintr_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART */
	IT_CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	/* Repeated every 200 ms: a signal that lands while the accept is between its checks
	 * and its poll() (not inside the system call) runs its handler and the poll then
	 * sleeps on; only a signal inside the poll makes EINTR (a userspace accept's window,
	 * which TCP's kernel wait does not have). Once, under TSan on a loaded machine, the only
	 * signal landed there and the accept slept until the test's 10 s limit. */
	struct itimerval it = { .it_value = { 0, 200000 }, .it_interval = { 0, 200000 } };
	IT_CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
	uint64_t t0 = now_ns();
	int fd = smcr_accept(lfd, NULL, NULL);
	int err = errno;
	struct itimerval off = { 0 };
	IT_CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
	IT_CHECK(fd < 0 && err == EINTR);
	IT_CHECK(now_ns() - t0 >= 150000000ull);
	return 0;
}

static void test_blocking_accept_eintr(void **state)
{
	(void)state;
	start("2000");
	pid_t s = it_fork(eintr_server, NULL);
	assert_int_equal(it_wait(s, 10000), 0);
	finish();
}

/* ---- blocking accepts, several clients, and handshakes between two accepts ---- */

/* A client that records how long its connect took, then echoes 5 bytes over SMC-R. */
static int timed_client(void *arg)
{
	int i = (int)(intptr_t)arg;
	it_child_env(1);
	smcr_close(lfd);
	(void)sock_engine(); /* the process's start-up is not the server's doing */
	uint64_t t0 = now_ns();
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	sh->conn_end_ns[i] = now_ns();
	sh->conn_ns[i] = sh->conn_end_ns[i] - t0;
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	char m[5] = { 'c', 'l', 'i', (char)('0' + i), '!' }, b[5];
	IT_CHECK(it_write_all(fd, m, 5));
	IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, m, 5) == 0);
	sh->echo_ok[i] = 1;
	smcr_close(fd);
	return 0;
}

/* Blocking accepts of 3 clients that connect at once (one taken per poll of the
 * listener, the rest handed on), then outside accept until the 4th client's connect
 * returned (20 s at most), then that one. */
static int gap_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	IT_CHECK(accept_again()); /* the queue is on before the clients come */
	for (int i = 0; i < 4; i++) {
		if (i == 3) {
			sh->gap_start_ns = now_ns();
			sh->stage = 1; /* the 4th client connects now */
			/* outside accept until the 4th client's connect returned (20 s at
			 * most: a connect that needed our accept would return only after) */
			for (int k = 0; k < 20000 && !sh->conn_end_ns[3]; k++)
				usleep(1000);
			sh->gap_saw_conn = sh->conn_end_ns[3] != 0;
			sh->gap_end_ns = now_ns();
		}
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		struct smcr_info in;
		IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
		char b[5];
		IT_CHECK(it_read_all(fd, b, 5));
		IT_CHECK(it_write_all(fd, b, 5));
		IT_CHECK(smcr_close(fd) == 0);
		sh->srv_n = i + 1;
	}
	return 0;
}

/* lsn.c: a blocking accept polls the listener itself (the progress thread's watch is
 * disarmed meanwhile) and takes one connection per poll; when it returns, the watch is
 * re-armed (at most 1 ms later: the deferred re-arm), so connections queued then, and
 * those that come while the program is not in accept, still complete their handshake in
 * the background, as TCP's complete in the kernel: a client's connect never waits for the
 * server's next accept. */
static void test_blocking_accepts_and_gap(void **state)
{
	(void)state;
	start("2000");
	pid_t s = it_fork(gap_server, NULL);
	usleep(100 * 1000); /* the server is in accept */
	pid_t c[4];
	for (int i = 0; i < 3; i++)
		c[i] = it_fork(timed_client, (void *)(intptr_t)i);
	for (int i = 0; i < 3; i++)
		assert_int_equal(it_wait(c[i], 20000), 0);
	for (int i = 0; i < 5000 && sh->stage < 1; i++)
		usleep(1000);
	assert_int_equal(sh->stage, 1);
	c[3] = it_fork(timed_client, (void *)(intptr_t)3);
	assert_int_equal(it_wait(c[3], 20000), 0);
	assert_int_equal(it_wait(s, 20000), 0);
	assert_int_equal(sh->srv_n, 4);
	for (int i = 0; i < 4; i++) {
		fprintf(stderr, "client %d: connect took %.1f ms\n", i, (double)sh->conn_ns[i] / 1e6);
		assert_int_equal(sh->echo_ok[i], 1); /* and SMC-R: no handshake timed out */
	}
	/* the 4th completed while the server slept outside accept: its connect returned
	 * before the server's next accept call, which waited for it (an order, not a time
	 * bound: fixed bounds failed on loaded machines and under TSan) */
	fprintf(stderr, "gap: %.1f ms; the 4th client's connect %.1f ms, returned %.1f ms "
		"before the server's next accept\n",
		(double)(sh->gap_end_ns - sh->gap_start_ns) / 1e6, (double)sh->conn_ns[3] / 1e6,
		((double)sh->gap_end_ns - (double)sh->conn_end_ns[3]) / 1e6);
	assert_true(sh->gap_saw_conn);
	assert_true(sh->conn_end_ns[3] != 0 && sh->conn_end_ns[3] < sh->gap_end_ns);
	finish();
}

/* ---- an accept loop leaves the listener's watch alone ---- */

#define NLOOP 40

/* accept, echo, close, accept again, NLOOP times */
static int loop_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	IT_CHECK(accept_again()); /* the queue is on before the client comes */
	sh->stage = 1;
	for (int i = 0; i < NLOOP; i++) {
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		char b[5];
		IT_CHECK(it_read_all(fd, b, 5));
		IT_CHECK(it_write_all(fd, b, 5));
		IT_CHECK(smcr_close(fd) == 0);
	}
	sh->srv_n = NLOOP;
	return 0;
}

static int loop_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	it_wait_at_least(&sh->stage, 1);
	for (int i = 0; i < NLOOP; i++) {
		int fd = it_connect(false, port);
		IT_CHECK(fd >= 0);
		char b[5];
		IT_CHECK(it_write_all(fd, "loop!", 5));
		IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "loop!", 5) == 0);
		IT_CHECK(smcr_close(fd) == 0);
	}
	return 0;
}

/* A program that accepts in a loop (accept, serve, close, accept): the listener's watch
 * goes off while a blocking accept polls the listener itself and on again as it leaves,
 * so every connection is served whether it comes while the server is in accept or while
 * it serves the one before. The gap test above checks that a connection that comes while
 * nobody is in accept completes without the next accept. */
static void test_accept_loop(void **state)
{
	(void)state;
	start("2000");
	pid_t s = it_fork(loop_server, NULL);
	pid_t c = it_fork(loop_client, NULL);
	assert_int_equal(it_wait(c, 30000), 0);
	assert_int_equal(it_wait(s, 30000), 0);
	assert_int_equal(sh->srv_n, NLOOP);
	finish();
}


/* ---- stalled handshakes beyond the backlog ----
 *
 * Handshakes in flight do not count against the listen() backlog (only connections ready
 * for accept do): with a backlog of 2, four clients that send half a Proposal and stall
 * hold four handshakes, and a fifth, normal client is still taken from the kernel and
 * served over SMC-R while all four wait. A kernel TCP server is not stalled by clients
 * that send nothing either. The CLC wait is 20 s so that no load lets a staller's drop
 * come before the normal client: the order, not a time, is judged. */

static int one_accept_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	sh->srv_mode[0] = in.mode;
	char b[5];
	IT_CHECK(it_read_all(fd, b, 5));
	IT_CHECK(it_write_all(fd, b, 5));
	IT_CHECK(smcr_close(fd) == 0);
	sh->srv_n = 1;
	for (int i = 0; i < 40000 && !sh->stage; i++)
		usleep(1000);
	return 0;
}

static void test_stallers_beyond_backlog(void **state)
{
	(void)state;
	start_clc("2000", "20000");
	assert_int_equal(smcr_listen(lfd, 2), 0);
	pid_t s = it_fork(one_accept_server, NULL);
	uint8_t b[CLC_MSG_MAX_LEN];
	proposal_bytes(b);
	enum { NSTALL = 4 };
	int st[NSTALL];
	for (int i = 0; i < NSTALL; i++) {
		st[i] = it_raw_connect(port);
		assert_true(st[i] >= 0);
		assert_int_equal(write(st[i], b, 20), 20);
	}
	pid_t c = it_fork(normal_client, NULL);
	assert_int_equal(it_wait(c, 60000), 0);
	assert_int_equal(sh->srv_mode[0], SMCR_MODE_SMCR);
	/* every staller is still waiting: none was dropped (nor answered) to make room */
	for (int i = 0; i < NSTALL; i++) {
		struct pollfd p = { .fd = st[i], .events = POLLIN };
		assert_int_equal(poll(&p, 1, 0), 0);
	}
	for (int i = 0; i < NSTALL; i++)
		close(st[i]);
	sh->stage = 1;
	assert_int_equal(it_wait(s, 60000), 0);
	finish();
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_silent_client_does_not_delay_next),
		cmocka_unit_test(test_silent_before_first_accept),
		cmocka_unit_test(test_half_proposal_dropped_next_served),
		cmocka_unit_test(test_stallers_beyond_backlog),
		cmocka_unit_test(test_nonblocking_epoll_many_clients),
		cmocka_unit_test(test_accept4_flags),
		cmocka_unit_test(test_blocking_accept_eintr),
		cmocka_unit_test(test_blocking_accepts_and_gap),
		cmocka_unit_test(test_accept_loop),
	};
	return IT_MAIN(tests);
}
