/* it_closeq.c: the close-later list of hidden fds and the RST of a closed peer's TCP
 * connection (sock/closeq.h; docs/parts/connect.md "Close").
 *
 * Two processes over SMC-R (itlib.h). Checked:
 *  - test_fork_after_close: right after a close the connection's hidden fds (TCP socket,
 *    signal end) are queued (the timer is set 10 s away); a fork() then leaves none of
 *    them in the child (pthread_atfork prepare closes them in the parent first), and the
 *    parent has none left either;
 *  - test_stop_drains: the same two queued fds (timer 10 s away) are closed by
 *    progress_stop, which disarms that timer (closeq_pending() 0 and the sockets gone
 *    right after it returns, before any exit handler);
 *  - test_idle_drain_by_timer: after 20 connections the process does nothing: the timer
 *    closes the queued fds (waited for as a state; within 1 s, the bound being 5 ms) and
 *    the fd count comes back to the starting set (/proc/self/fd; RMB memfds of the pool
 *    counted apart, as it_conns does);
 *  - test_full_list: 40 connections closed back to back with no wait in between: exactly
 *    CLOSEQ_MAX fds are queued, the others closed at once (the fd count says so); the next
 *    wait (a recv's wait for data that comes 50 ms late) closes CLOSEQ_WAIT_MAX of them,
 *    no more;
 *  - test_eof_not_reset: the peer of a connection that closes first (its TCP watch live:
 *    the connection is older than the watch's 100 ms) sees EOF (recv 0), no ECONNRESET,
 *    no POLLERR, SO_ERROR 0, also after the closer's TCP socket was really closed; the
 *    same for a peer that only shut its write side (its D is not a C: no RST for it);
 *    and a closer whose peer closed first sees EOF too;
 *  - test_rst_no_time_wait / test_fin_time_wait_when_off: 10 connections the server closes
 *    first: the client's close (after the server's C) ends the TCP connection with an RST,
 *    so no TIME_WAIT is left for any of its ports (/proc/net/tcp); with $SMCR_CLOSE_RST=0
 *    every connection leaves one (the FIN exchange: shows the check can see them; two
 *    when both sides' FIN crossed);
 *  - test_accept_drains_when_idle: a blocking accept closes the queued fds of an earlier
 *    connection in its idle wait (before its Accept goes out), and none between its
 *    Accept and the Confirm (the calls seen through the sys.h table);
 *  - test_connect_drains_in_data_wait: a connect closes none of them between its Proposal
 *    and its Confirm; the wait for the first data does. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "itlib.h"
#include "sock/closeq.h"
#include "sock/progress.h"
#include "sock/sock.h"
#include "sock/sys.h"

static int lfd;
static uint16_t port;

#define NFULL 40
#define NSEQ 20
#define NTW 10

struct shared {
	_Atomic int stage;
	_Atomic int rst_off;		/* test_fin_time_wait_when_off */
	_Atomic int tw;		/* TIME_WAIT entries the client counted */
	uint16_t ports[NTW];		/* the client's ports (test_rst_no_time_wait) */
};
static struct shared *sh;

static bool pending_is(void *want)
{
	return closeq_pending() == *(unsigned *)want;
}

/* Waits (up to 5 s) until closeq_pending() == want; true if it got there. */
static bool pending_becomes(unsigned want)
{
	if (it_poll_until(pending_is, &want, 5000, 500))
		return true;
	fprintf(stderr, "closeq_pending() %u after 5 s, wanted %u\n", closeq_pending(), want);
	return false;
}

static unsigned rmbs_now(void)
{
	struct core_engine_stats st;
	it_engine_stats(&st);
	return st.rmbs;
}

/* The child's environment: the device (itlib), then ours, read again by closeq (the
 * parent process may have read its own before the fork). */
static void env(int role, const char *closeq_ms, const char *reap_ms)
{
	it_child_env(role);
	if (closeq_ms)
		setenv("SMCR_CLOSEQ_MS", closeq_ms, 1);
	else
		unsetenv("SMCR_CLOSEQ_MS");
	if (reap_ms)
		setenv("SMCR_CLOSE_REAP_MS", reap_ms, 1); /* read at the first close */
	if (sh->rst_off)
		setenv("SMCR_CLOSE_RST", "0", 1);
	else
		unsetenv("SMCR_CLOSE_RST");
	closeq_reread_env();
}

static void ping(int fd)
{
	IT_CHECK(it_write_all(fd, "ping", 4));
	char b[4];
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "pong", 4) == 0);
}

static int connect_ping(void)
{
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	ping(fd);
	return fd;
}

/* One accepted connection served: ping, then the pong (late_ms later), then the client
 * closes first (read to EOF, close). */
static void serve(int fd, int late_ms)
{
	IT_CHECK(fd >= 0);
	char b[4];
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "ping", 4) == 0);
	if (late_ms)
		usleep((useconds_t)late_ms * 1000);
	IT_CHECK(it_write_all(fd, "pong", 4));
	IT_CHECK(it_read_to_eof(fd, NULL, 64) == 0);
	smcr_close(fd);
}

/* Server of n connections, one after the other (serve). */
static int echo_server(void *a)
{
	int n = (int)(intptr_t)a;
	env(0, NULL, NULL);
	for (int i = 0; i < n; i++)
		serve(smcr_accept(lfd, NULL, NULL), 0);
	smcr_close(lfd);
	it_wait_at_least(&sh->stage, 100); /* the client is done */
	return 0;
}

/* ---- fork right after a close ---- */

/* "socket:[N]" inodes of the fds at or above the hidden range's start. */
static int hidden_socket_inodes(unsigned long *out, int cap)
{
	int n = 0, lo = sock_hidden_min();
	DIR *d = opendir("/proc/self/fd");
	IT_CHECK(d != NULL);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || atoi(e->d_name) < lo)
			continue;
		char p[300], l[64];
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(p, l, sizeof(l) - 1);
		if (k <= 0)
			continue;
		l[k] = 0;
		unsigned long ino;
		if (sscanf(l, "socket:[%lu]", &ino) == 1 && n < cap)
			out[n++] = ino;
	}
	closedir(d);
	return n;
}

static bool has_inode(const unsigned long *v, int n, unsigned long ino)
{
	for (int i = 0; i < n; i++)
		if (v[i] == ino)
			return true;
	return false;
}

/* A client child (its env: no timer turn during the test, only waits drain) of two
 * connections to echo_server, each closed: the second one's two hidden sockets (the
 * TCP socket and the signal end) left queued, their "socket:[N]" inodes in mine. Each
 * connection is waited for until it is over on both sides (the engine released it; the
 * signal end is queued when the socket's last reference goes, on the progress thread
 * when the peer's close comes after ours) and its two fds are queued: a late first
 * connection's signal end would otherwise be queued after the second one's. */
static void close_one_queued(unsigned long mine[2])
{
	env(1, "10000", "10000");
	smcr_close(lfd);
	int fd = connect_ping(); /* the link group */
	smcr_close(fd);
	IT_CHECK(it_engine_conns_gone());
	IT_CHECK(pending_becomes(2));
	closeq_drain_all(); /* this one's are not looked at */
	unsigned long before[256], with[256];
	int nb = hidden_socket_inodes(before, 256);
	fd = connect_ping();
	int nw = hidden_socket_inodes(with, 256), nm = 0;
	for (int i = 0; i < nw; i++)
		if (!has_inode(before, nb, with[i])) {
			IT_CHECK(nm < 2); /* the hidden TCP socket and the signal end, no more */
			mine[nm++] = with[i];
		}
	IT_CHECK(nm == 2);
	smcr_close(fd);
	IT_CHECK(it_engine_conns_gone());
	IT_CHECK(pending_becomes(2));
}

/* Nothing queued, and none of the sockets of mine open in this process any more. */
static void check_closed(const unsigned long mine[2])
{
	IT_CHECK(closeq_pending() == 0);
	unsigned long now[256];
	int n = hidden_socket_inodes(now, 256);
	for (int i = 0; i < 2; i++)
		IT_CHECK(!has_inode(now, n, mine[i]));
}

/* A test of echo_server's n connections and the client cli. */
static void run_echo(int n, int (*cli)(void *))
{
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, echo_server, (void *)(intptr_t)n, cli, NULL,
					 30000),
			 0);
}

static int fork_client(void *a)
{
	(void)a;
	unsigned long mine[2];
	close_one_queued(mine);
	pid_t p = fork();
	IT_CHECK(p >= 0);
	if (p == 0) {
		check_closed(mine); /* the child never had them: the parent closed them first */
		_exit(0);
	}
	int st;
	IT_CHECK(waitpid(p, &st, 0) == p);
	IT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	check_closed(mine); /* the parent closed them before the fork */
	sh->stage = 100;
	return 0;
}

static void test_fork_after_close(void **state)
{
	(void)state;
	run_echo(2, fork_client);
}

/* ---- the progress thread stops ---- */

static int stop_client(void *a)
{
	(void)a;
	unsigned long mine[2];
	close_one_queued(mine); /* both connections over: nothing left for the thread */
	IT_CHECK(closeq_pending() == 2); /* no wait and no timer turn since */
	progress_stop();
	check_closed(mine); /* the stop closed them, not the exit */
	sh->stage = 100;
	return 0;
}

static void test_stop_drains(void **state)
{
	(void)state;
	run_echo(2, stop_client);
}

/* ---- an idle process: the timer ---- */

static int idle_client(void *a)
{
	(void)a;
	env(1, NULL, NULL); /* the default bound */
	smcr_close(lfd);
	int fd = connect_ping(); /* the link group */
	smcr_close(fd);
	IT_CHECK(pending_becomes(0));
	int c0 = it_count_fds();
	unsigned r0 = rmbs_now();
	for (int i = 0; i < NSEQ; i++)
		smcr_close(connect_ping());
	long long t0 = it_now_ms();
	IT_CHECK(pending_becomes(0));
	long long took = it_now_ms() - t0;
	if (took > 1000 || getenv("IT_VERBOSE"))
		fprintf(stderr, "idle: queued fds closed after %lld ms\n", took);
	/* closed by the reaper's timer (5 ms), not left until exit: pending_becomes fails
	 * after 5 s; the time is printed, not bounded (a loaded machine may take longer) */
	/* back to the starting set (the RMB pool may have grown: one memfd each) */
	int c = 0;
	unsigned r = 0;
	for (long long t1 = it_now_ms(); it_now_ms() - t1 < 5000; usleep(1000)) {
		c = it_count_fds();
		r = rmbs_now();
		if (c - c0 == (int)r - (int)r0)
			break;
	}
	if (c - c0 != (int)r - (int)r0) {
		fprintf(stderr, "idle: fds %d -> %d, rmbs %u -> %u\n", c0, c, r0, r);
		it_list_fds("idle");
	}
	IT_CHECK(c - c0 == (int)r - (int)r0);
	sh->stage = 100;
	return 0;
}

static void test_idle_drain_by_timer(void **state)
{
	(void)state;
	run_echo(NSEQ + 1, idle_client);
}

/* ---- a full list ---- */

static int full_server(void *a)
{
	(void)a;
	env(0, NULL, NULL);
	int fds[NFULL + 2];
	for (int i = 0; i < NFULL + 2; i++) {
		fds[i] = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fds[i] >= 0);
		char b[4];
		IT_CHECK(it_read_all(fds[i], b, 4) && memcmp(b, "ping", 4) == 0);
		if (i == NFULL + 1)
			usleep(50 * 1000); /* the client's pong wait (full_client) */
		IT_CHECK(it_write_all(fds[i], "pong", 4));
	}
	smcr_close(lfd);
	it_wait_at_least(&sh->stage, 100);
	for (int i = 0; i < NFULL + 2; i++)
		smcr_close(fds[i]);
	return 0;
}

static int full_client(void *a)
{
	(void)a;
	env(1, "10000", "10000"); /* only waits and fork drain during the test */
	smcr_close(lfd);
	int fd = connect_ping(); /* the link group */
	smcr_close(fd);
	int fds[NFULL];
	for (int i = 0; i < NFULL; i++)
		fds[i] = connect_ping();
	closeq_drain_all(); /* fd's (if no wait drained them): none queued from here */
	IT_CHECK(closeq_pending() == 0);
	int c0 = it_count_fds();
	unsigned r0 = rmbs_now();
	for (int i = 0; i < NFULL; i++)
		smcr_close(fds[i]);
	/* 3 fds each: the program's (closed at once), the hidden TCP socket and the signal
	 * end (queued until the list is full, then closed at once) */
	IT_CHECK(pending_becomes(CLOSEQ_MAX));
	int c = it_count_fds();
	unsigned r = rmbs_now();
	if (c != c0 - 3 * NFULL + CLOSEQ_MAX + ((int)r - (int)r0))
		fprintf(stderr, "full: fds %d -> %d, rmbs %u -> %u\n", c0, c, r0, r);
	IT_CHECK(c == c0 - 3 * NFULL + CLOSEQ_MAX + ((int)r - (int)r0));
	/* each wait closes CLOSEQ_WAIT_MAX of them, no more: the pong's wait (the server
	 * answers this last ping 50 ms late, so there is one) */
	fd = connect_ping();
	unsigned left = closeq_pending();
	if (left > CLOSEQ_MAX - CLOSEQ_WAIT_MAX || (CLOSEQ_MAX - left) % CLOSEQ_WAIT_MAX != 0)
		fprintf(stderr, "full: %u left after a connection\n", left);
	IT_CHECK(left <= CLOSEQ_MAX - CLOSEQ_WAIT_MAX && (CLOSEQ_MAX - left) % CLOSEQ_WAIT_MAX == 0);
	smcr_close(fd);
	sh->stage = 100;
	return 0;
}

static void test_full_list(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, full_server, NULL, full_client, NULL, 30000),
			 0);
}

/* ---- EOF, not a reset ---- */

/* The fd sees the end of the stream only: recv 0 (twice), SO_ERROR 0, no POLLERR. */
static void check_eof_only(int fd)
{
	char b[4];
	IT_CHECK(smcr_recv(fd, b, sizeof(b), 0) == 0);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	IT_CHECK(poll(&p, 1, 0) == 1);
	IT_CHECK((p.revents & (POLLERR | POLLNVAL)) == 0);
	int err = -1;
	socklen_t l = sizeof(err);
	IT_CHECK(smcr_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err == 0);
	errno = 0;
	IT_CHECK(smcr_recv(fd, b, sizeof(b), MSG_DONTWAIT) == 0 && errno == 0);
}

static int eof_server(void *a)
{
	(void)a;
	env(0, NULL, NULL);
	/* 1: the client closes first, after the watches started */
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	char b[4];
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "ping", 4) == 0);
	IT_CHECK(it_write_all(fd, "pong", 4));
	check_eof_only(fd);		   /* the client's C */
	it_wait_at_least(&sh->stage, 1); /* the client's hidden TCP socket is closed */
	usleep(20000);			   /* its FIN (or an RST) arrived; our watch ran */
	check_eof_only(fd);
	smcr_close(fd);
	/* 2: we close first */
	fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "ping", 4) == 0);
	IT_CHECK(it_write_all(fd, "pong", 4));
	usleep(150000); /* past the deferred watch (100 ms) */
	smcr_close(fd);
	/* 3: the client shuts its write side down and still reads */
	fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "ping", 4) == 0);
	IT_CHECK(it_write_all(fd, "pong", 4));
	IT_CHECK(smcr_recv(fd, b, sizeof(b), 0) == 0); /* its D */
	IT_CHECK(it_write_all(fd, "late", 4));
	smcr_close(fd); /* its D is not a C: our TCP side ends with a FIN */
	smcr_close(lfd);
	it_wait_at_least(&sh->stage, 100);
	return 0;
}

static int eof_client(void *a)
{
	(void)a;
	env(1, NULL, NULL);
	smcr_close(lfd);
	/* 1 */
	int fd = connect_ping();
	usleep(150000); /* both deferred watches started (100 ms) */
	smcr_close(fd);
	IT_CHECK(pending_becomes(0)); /* the timer: our TCP socket is closed */
	sh->stage = 1;
	/* 2 */
	fd = connect_ping();
	check_eof_only(fd); /* the server's C; our close below ends TCP with an RST */
	smcr_close(fd);
	/* 3 */
	fd = connect_ping();
	usleep(150000);
	IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
	char b[4];
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "late", 4) == 0);
	check_eof_only(fd);
	usleep(20000); /* the server's queued TCP close had time (its timer: 5 ms) */
	check_eof_only(fd);
	smcr_close(fd);
	IT_CHECK(pending_becomes(0));
	sh->stage = 100;
	return 0;
}

static void test_eof_not_reset(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, eof_server, NULL, eof_client, NULL, 30000),
			 0);
}

/* ---- RST: no TIME_WAIT ---- */

static int tw_server(void *a)
{
	(void)a;
	env(0, NULL, NULL);
	for (int i = 0; i < NTW + 1; i++) {
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		char b[4];
		IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "ping", 4) == 0);
		IT_CHECK(it_write_all(fd, "pong", 4));
		smcr_close(fd); /* first: the client's close comes after our C */
	}
	smcr_close(lfd);
	it_wait_at_least(&sh->stage, 100);
	return 0;
}

/* TIME_WAIT entries of our connections: 127.0.0.1:ports[i] <-> 127.0.0.1:port, either side
 * (other processes on the machine leave theirs, on the same ports too). */
static int time_waits(const uint16_t *ports, int n)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	IT_CHECK(f != NULL);
	char line[512];
	int tw = 0;
	IT_CHECK(fgets(line, sizeof(line), f) != NULL); /* the header */
	while (fgets(line, sizeof(line), f)) {
		unsigned la, lp, ra, rp, st;
		if (sscanf(line, " %*d: %x:%x %x:%x %x", &la, &lp, &ra, &rp, &st) != 5)
			continue;
		if (st != 6) /* TCP_TIME_WAIT */
			continue;
		if (la != 0x0100007fu || ra != 0x0100007fu) /* 127.0.0.1 both, as printed */
			continue;
		for (int i = 0; i < n; i++)
			if ((lp == ports[i] && rp == port) || (lp == port && rp == ports[i])) {
				tw++;
				if (getenv("IT_VERBOSE"))
					fprintf(stderr, "TIME_WAIT %u -> %u (connection %d)\n", lp,
						rp, i);
			}
	}
	fclose(f);
	return tw;
}

static int tw_client(void *a)
{
	(void)a;
	env(1, NULL, NULL);
	smcr_close(lfd);
	int fd = connect_ping(); /* the link group (a first contact: not counted) */
	char b[4];
	IT_CHECK(smcr_recv(fd, b, sizeof(b), 0) == 0);
	smcr_close(fd);
	for (int i = 0; i < NTW; i++) {
		fd = connect_ping();
		struct sockaddr_in sa;
		socklen_t l = sizeof(sa);
		IT_CHECK(smcr_getsockname(fd, (struct sockaddr *)&sa, &l) == 0);
		sh->ports[i] = ntohs(sa.sin_port);
		IT_CHECK(smcr_recv(fd, b, sizeof(b), 0) == 0); /* the server's C came */
		smcr_close(fd);
	}
	IT_CHECK(pending_becomes(0));
	/* the server's side: its queued FIN (or nothing: our RST came first) within its
	 * timer's bound; then the TIME_WAIT count only grows (60 s) */
	int tw = 0;
	for (long long t0 = it_now_ms(); it_now_ms() - t0 < (sh->rst_off ? 5000 : 300); usleep(5000)) {
		tw = time_waits(sh->ports, NTW);
		if (sh->rst_off && tw >= NTW)
			break;
	}
	sh->tw = tw;
	sh->stage = 100;
	return 0;
}

static void test_rst_no_time_wait(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, tw_server, NULL, tw_client, NULL, 30000),
			 0);
	assert_int_equal(sh->tw, 0);
}

static void test_fin_time_wait_when_off(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	sh->rst_off = 1;
	assert_int_equal(it_run_smc_pair(&lfd, &port, tw_server, NULL, tw_client, NULL, 30000),
			 0);
	assert_true(sh->tw >= NTW); /* both ends of one may be in it: a simultaneous close */
}

/* ---- a blocking accept closes queued fds while idle, not in a handshake's wait ---- */

/* A process's socket-layer calls as a string (sys.h table): a CLC message sent as its
 * type's letter ('P'roposal, 'A'ccept, 'C'onfirm, 'D'ecline), one read (not peeked) in
 * lower case, 'x' a close of a hidden fd. */
static struct sock_sys real_sys;
static char trail[256];
static _Atomic int ntrail; /* the accepting thread writes; read after accept returns */

static void trail_add(char c)
{
	if (ntrail < (int)sizeof(trail) - 1)
		trail[ntrail++] = c;
}

static int clc_type(const void *b, ssize_t n)
{
	static const unsigned char eye[4] = {0xe2, 0xd4, 0xc3, 0xd9};
	return n >= 8 && memcmp(b, eye, 4) == 0 ? ((const unsigned char *)b)[4] : -1;
}

static ssize_t trail_send(int fd, const void *b, size_t n, int fl)
{
	ssize_t r = real_sys.send(fd, b, n, fl);
	int t = clc_type(b, r);
	if (t >= 1 && t <= 4)
		trail_add("PACD"[t - 1]);
	return r;
}

static ssize_t trail_recv(int fd, void *b, size_t n, int fl)
{
	ssize_t r = real_sys.recv(fd, b, n, fl);
	int t = clc_type(b, r);
	if (!(fl & MSG_PEEK) && t >= 1 && t <= 4)
		trail_add("pacd"[t - 1]);
	return r;
}

static int trail_close(int fd)
{
	if (fd >= sock_hidden_min())
		trail_add('x');
	return real_sys.close(fd);
}

static void trail_install(void)
{
	ntrail = 0;
	real_sys = sock_sys;
	struct sock_sys t;
	memset(&t, 0, sizeof(t));
	t.send = trail_send;
	t.recv = trail_recv;
	t.close = trail_close;
	sock_sys_set(&t);
}

/* Connection 1 (also activates the listener), closed after the client's EOF: its two
 * hidden fds queued (no timer turn: 10 s). Then accept 2 sleeps idle (the client waits
 * 100 ms before it connects): those fds must be closed there, before the Accept goes out,
 * and none between the Accept and the Confirm: the client answers the Accept within
 * microseconds, and a close of a TCP socket (~12 µs, its RST or FIN through the loopback
 * stack) there delayed the Confirm's step, the answer and so the connection
 * (docs/parts/connect.md "Close"). */
static int idle_drain_server(void *a)
{
	(void)a;
	env(0, "10000", "10000");
	serve(smcr_accept(lfd, NULL, NULL), 0);
	IT_CHECK(pending_becomes(2));
	trail_install();
	sh->stage = 1; /* the client connects 100 ms from now */
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	sock_sys_set(&real_sys);
	trail[ntrail] = 0;
	if (getenv("IT_VERBOSE"))
		fprintf(stderr, "idle drain: server calls %s, %u queued\n", trail, closeq_pending());
	const char *acc = strchr(trail, 'A'), *conf = acc ? strchr(acc, 'c') : NULL;
	IT_CHECK(acc && conf);
	IT_CHECK(strncmp(trail, "xxpA", 4) == 0); /* both, while idle */
	IT_CHECK(memchr(acc, 'x', (size_t)(conf - acc)) == NULL);   /* none in the wait */
	serve(fd, 0);
	smcr_close(lfd);
	it_wait_at_least(&sh->stage, 100);
	return 0;
}

static int idle_drain_client(void *a)
{
	(void)a;
	env(1, NULL, NULL);
	smcr_close(lfd);
	smcr_close(connect_ping());
	it_wait_at_least(&sh->stage, 1);
	usleep(100 * 1000); /* the server's accept is asleep by then */
	smcr_close(connect_ping());
	sh->stage = 100;
	return 0;
}

static void test_accept_drains_when_idle(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, idle_drain_server, NULL, idle_drain_client,
	                                 NULL, 30000),
	                 0);
}

/* The client's side: its queued fds are not closed in its wait for the Accept (that wait
 * is filled already: the signal pair opens there, and a close past the Accept's arrival
 * delays the Confirm), but by the wait for the pong's data. */
static int connect_drain_client(void *a)
{
	(void)a;
	env(1, "10000", "10000");
	smcr_close(lfd);
	smcr_close(connect_ping()); /* the link group; its two hidden fds queued */
	IT_CHECK(it_engine_conns_gone());
	IT_CHECK(pending_becomes(2));
	trail_install();
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	IT_CHECK(closeq_pending() == 2); /* none closed in the handshake */
	ping(fd);			 /* the server answers 50 ms late: a wait */
	sock_sys_set(&real_sys);
	trail[ntrail] = 0;
	if (getenv("IT_VERBOSE"))
		fprintf(stderr, "connect drain: client calls %s, %u queued\n", trail,
			closeq_pending());
	IT_CHECK(strncmp(trail, "PaC", 3) == 0); /* no close between Proposal and Confirm */
	IT_CHECK(closeq_pending() == 0);	 /* the pong's wait closed them */
	smcr_close(fd);
	sh->stage = 100;
	return 0;
}

static int late_pong_server(void *a)
{
	(void)a;
	env(0, NULL, NULL);
	serve(smcr_accept(lfd, NULL, NULL), 0);
	serve(smcr_accept(lfd, NULL, NULL), 50); /* the client's pong wait */
	smcr_close(lfd);
	it_wait_at_least(&sh->stage, 100);
	return 0;
}

static void test_connect_drains_in_data_wait(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, late_pong_server, NULL,
	                                 connect_drain_client, NULL, 30000),
	                 0);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_after_close),
		cmocka_unit_test(test_stop_drains),
		cmocka_unit_test(test_idle_drain_by_timer),
		cmocka_unit_test(test_full_list),
		cmocka_unit_test(test_eof_not_reset),
		cmocka_unit_test(test_rst_no_time_wait),
		cmocka_unit_test(test_fin_time_wait_when_off),
		cmocka_unit_test(test_accept_drains_when_idle),
		cmocka_unit_test(test_connect_drains_in_data_wait),
	};
	return IT_MAIN(tests);
}
