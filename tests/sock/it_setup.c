/* it_setup.c: the per-connection set-up work the connect rate (issue 6, docs/parts/connect.md
 * "What a connection's set-up does not do") cut, checked for what it must still do:
 *  - options set after connect/accept on an SMC-R connection (SO_RCVTIMEO, SO_SNDTIMEO,
 *    TCP_NODELAY) do not reach the hidden TCP socket at once (no system call), still act
 *    (a receive times out), and read back as TCP answers them (flushed on the first read);
 *    an invalid timeout still gets the kernel's EDOM;
 *  - a blocking accept without SOCK_CLOEXEC returns an SMC-R fd without FD_CLOEXEC and
 *    makes no F_SETFD for it; one with SOCK_CLOEXEC returns it close-on-exec; neither
 *    leaves the engine's poll bracket of its Confirm spin held;
 *  - the hidden TCP socket of an established SMC-R connection is watched for RST only, and
 *    only from 100 ms after the connection came up (deferred: no epoll_ctl for short
 *    connections): the peer's FIN does not wake the progress thread (its turn count
 *    stays), the connection keeps working; the peer's RST still aborts it (ECONNRESET),
 *    also one that came before the watch started (noticed when it starts). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "itlib.h"
#include "sock/progress.h"
#include "sock/sock.h"
#include "util/clock.h"
#include "sock/sys.h"

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int stage;
};
static struct shared *sh;

/* ---- counting the socket layer's system calls (sys.h table) ---- */

static struct sock_sys real;
static _Atomic int n_set_rcvtimeo, n_set_nodelay, n_setfd;

static int count_setsockopt(int fd, int level, int name, const void *v, socklen_t l)
{
	if (level == SOL_SOCKET && name == SO_RCVTIMEO)
		n_set_rcvtimeo++;
	if (level == IPPROTO_TCP && name == TCP_NODELAY)
		n_set_nodelay++;
	return real.setsockopt(fd, level, name, v, l);
}

static int count_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	long arg = va_arg(ap, long); /* every command the layer uses takes an int or none */
	va_end(ap);
	if (cmd == F_SETFD)
		n_setfd++;
	return real.fcntl(fd, cmd, arg);
}

static void count_install(void)
{
	real = sock_sys;
	struct sock_sys t;
	memset(&t, 0, sizeof(t));
	t.setsockopt = count_setsockopt;
	t.fcntl = count_fcntl;
	sock_sys_set(&t);
}

/* ---- options and close-on-exec ---- */

static int opt_server(void *a)
{
	(void)a;
	it_child_env(0);
	count_install();
	/* The first accept activates the listener (its watch, and a progress-thread call for
	 * connections queued before): one the progress thread took is installed
	 * close-on-exec and fixed at accept (F_SETFD), as it must be. So activate it first
	 * (a non-blocking accept: EAGAIN), then let the client connect while the blocking
	 * accept sleeps, the case under test (under TSan the client used to win). */
	int fl = smcr_fcntl(lfd, F_GETFL);
	IT_CHECK(fl >= 0 && smcr_fcntl(lfd, F_SETFL, fl | O_NONBLOCK) == 0);
	errno = 0;
	IT_CHECK(smcr_accept(lfd, NULL, NULL) == -1 && errno == EAGAIN);
	IT_CHECK(smcr_fcntl(lfd, F_SETFL, fl) == 0);
	sh->stage = 1;
	int fd = smcr_accept(lfd, NULL, NULL); /* no SOCK_CLOEXEC */
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	IT_CHECK(n_setfd == 0);
	IT_CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) == 0);
	/* the accept's poll bracket around its Confirm spin ended with it (lsn.c) */
	IT_CHECK(it_engine_spinners() == 0);

	struct timeval tv = { 0, 300000 };
	int one = 1;
	IT_CHECK(smcr_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	IT_CHECK(smcr_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
	IT_CHECK(n_set_rcvtimeo == 0 && n_set_nodelay == 0); /* not in the kernel yet */
	/* still acts: nothing comes for 300 ms -> EAGAIN after about that */
	char b[16];
	long long t0 = it_now_ms();
	errno = 0;
	IT_CHECK(smcr_recv(fd, b, sizeof(b), 0) == -1 && errno == EAGAIN);
	long long waited = it_now_ms() - t0;
	IT_CHECK(waited >= 250); /* ignored, it would never return: nothing comes */
	/* reads back as TCP answers it: the first read flushes both */
	struct timeval back;
	socklen_t l = sizeof(back);
	IT_CHECK(smcr_getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &back, &l) == 0);
	IT_CHECK(l == sizeof(back) && back.tv_sec == 0 && back.tv_usec == 300000);
	IT_CHECK(n_set_rcvtimeo == 1 && n_set_nodelay == 1);
	int nd = 0;
	l = sizeof(nd);
	IT_CHECK(smcr_getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nd, &l) == 0 && nd == 1);
	/* an invalid one goes to the kernel, which answers it */
	struct timeval bad = { 0, 1000000 };
	errno = 0;
	IT_CHECK(smcr_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bad, sizeof(bad)) == -1);
	IT_CHECK(errno == EDOM);
	errno = 0;
	IT_CHECK(smcr_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, 1) == -1 && errno == EINVAL);
	sh->stage = 2;
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "ping", 4) == 0);
	IT_CHECK(it_write_all(fd, "pong", 4));
	IT_CHECK(smcr_close(fd) == 0);

	/* the second connection: accept4 with SOCK_CLOEXEC */
	fd = smcr_accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	IT_CHECK(fd >= 0);
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	IT_CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
	IT_CHECK(it_engine_spinners() == 0);
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "ping", 4) == 0);
	IT_CHECK(smcr_close(fd) == 0);
	smcr_close(lfd);
	return 0;
}

/* The socket has its RST watch (it_poll_until's condition). */
static bool sock_watched(void *arg)
{
	struct sock *so = arg;
	pthread_mutex_lock(&so->lock);
	bool w = so->watch != NULL;
	pthread_mutex_unlock(&so->lock);
	return w;
}

/* The progress thread made no turn in the last 300 ms (it_poll_until's condition): longer
 * than the close reaper's longest interval (160 ms), so a reaper still at work is seen. */
static bool progress_idle(void *arg)
{
	(void)arg;
	uint64_t t = progress_turns();
	usleep(300000);
	return progress_turns() == t;
}

static int opt_client(void *a)
{
	(void)a;
	it_child_env(1);
	smcr_close(lfd);
	it_wait_at_least(&sh->stage, 1);
	usleep(100000); /* the server is asleep in its blocking accept by now */
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	it_wait_at_least(&sh->stage, 2);
	IT_CHECK(it_write_all(fd, "ping", 4));
	char b[4];
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "pong", 4) == 0);
	IT_CHECK(smcr_close(fd) == 0);
	usleep(100000); /* the server sleeps in accept4: it drives this one (and spins) */
	fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	IT_CHECK(it_write_all(fd, "ping", 4));
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void test_options_deferred_and_cloexec(void **state)
{
	(void)state;
	sh->stage = 0;
	assert_int_equal(it_run_smc_pair(&lfd, &port, opt_server, NULL, opt_client, NULL, 20000),
			 0);
}

/* ---- a loop of short connections (as smcr-perf connect): the accepting thread's spins
 * for the Confirm hit there, and the poll bracket it takes for them never outlives the
 * accept ---- */

#define LOOP_CONNS 300

static int loop_server(void *a)
{
	(void)a;
	it_child_env(0);
	for (int i = 0; i < LOOP_CONNS; i++) {
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		IT_CHECK(it_engine_spinners() == 0);
		char b[64];
		IT_CHECK(it_read_all(fd, b, sizeof(b)));
		IT_CHECK(it_write_all(fd, b, sizeof(b)));
		IT_CHECK(smcr_close(fd) == 0);
	}
	smcr_close(lfd);
	return 0;
}

static int loop_client(void *a)
{
	(void)a;
	it_child_env(1);
	smcr_close(lfd);
	char b[64], r[64];
	for (int i = 0; i < LOOP_CONNS; i++) {
		int fd = it_connect(false, port);
		IT_CHECK(fd >= 0);
		memset(b, i & 0xff, sizeof(b));
		IT_CHECK(it_write_all(fd, b, sizeof(b)));
		IT_CHECK(it_read_all(fd, r, sizeof(r)) && memcmp(b, r, sizeof(b)) == 0);
		IT_CHECK(smcr_close(fd) == 0);
	}
	return 0;
}

static void test_connect_loop_bracket(void **state)
{
	(void)state;
	assert_int_equal(it_run_smc_pair(&lfd, &port, loop_server, NULL, loop_client, NULL,
					 60000),
			 0);
}

/* ---- the TCP watch of an SMC-R connection: FIN ignored, RST aborts ---- */

/* The server's hidden TCP socket of fd (this process's socket object). */
static int hidden_tcp(int fd)
{
	struct sock *s = sock_get(fd);
	IT_CHECK(s != NULL);
	int t = s->tcp;
	sock_put(s);
	IT_CHECK(t >= 0 && t != fd);
	return t;
}

/* Resets the TCP connection under an SMC-R fd: the close of its file with linger 0 sends
 * the RST (also in FIN_WAIT2 after our FIN); a fresh socket dup2()ed over the number keeps
 * the socket object's number valid. */
static void reset_hidden(int fd)
{
	int t = hidden_tcp(fd);
	struct linger lg = { 1, 0 };
	IT_CHECK(setsockopt(t, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	int spare = socket(AF_INET, SOCK_STREAM, 0);
	IT_CHECK(spare >= 0 && dup2(spare, t) == t);
	close(spare);
}

static int fin_server(void *a)
{
	(void)a;
	it_child_env(0);
	int fd0 = smcr_accept(lfd, NULL, NULL); /* the first contact (its watch is older) */
	IT_CHECK(fd0 >= 0);
	IT_CHECK(it_read_to_eof(fd0, NULL, 64) == 0);
	smcr_close(fd0);
	int fd = it_accept_smc(lfd);
	it_wait_at_least(&sh->stage, 1); /* the client is idle and counted its turns */
	IT_CHECK(shutdown(hidden_tcp(fd), SHUT_WR) == 0); /* a FIN on the TCP connection only */
	sh->stage = 2;
	it_wait_at_least(&sh->stage, 3);
	char b[4];
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "ping", 4) == 0);
	IT_CHECK(it_write_all(fd, "pong", 4));
	it_wait_at_least(&sh->stage, 4);
	/* now a reset of the TCP connection: the client's connection must end with it */
	reset_hidden(fd);
	it_wait_at_least(&sh->stage, 5);
	smcr_close(fd);
	return 0;
}

static int fin_client(void *a)
{
	(void)a;
	it_child_env(1);
	smcr_close(lfd);
	/* a first contact waits for its link in the background, with the watch: the
	 * connection under test reuses the link group */
	int fd0 = it_connect(false, port);
	IT_CHECK(fd0 >= 0);
	smcr_close(fd0);
	usleep(50000); /* both closed: its RMB is back in the pool, known to the peer, so
			* the next connection needs no CONFIRM RKEY (no background wait) */
	int fd = it_connect(false, port);
	uint64_t t_up = smcr_now_ns(); /* the connection was up by now */
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR && !in.first_contact);
	/* the RST watch starts 100 ms after the connection is up (deferred), not at once:
	 * asserted when this look came within 50 ms of the connect's return (on a loaded
	 * machine or under a sanitizer it may come later, when the watch may be there) */
	struct sock *so = sock_get(fd);
	IT_CHECK(so != NULL);
	pthread_mutex_lock(&so->lock);
	bool early = so->watch != NULL;
	pthread_mutex_unlock(&so->lock);
	uint64_t looked = smcr_now_ns() - t_up;
	if (looked < 50 * SMCR_NS_PER_MS)
		IT_CHECK(!early);
	else
		fprintf(stderr, "deferred watch: looked %.1f ms after the connect (watch %s), "
			"not asserted\n", (double)looked / 1e6, early ? "there" : "not yet");
	/* then it comes (waited for, 10 s at most: the deferral is 100 ms) */
	IT_CHECK(it_poll_until(sock_watched, so, 10000, 1000));
	sock_put(so);
	/* and the set-up's last events are handled (the first connection's close reaped):
	 * the progress thread made no turn for 300 ms (waited for, 10 s at most) */
	IT_CHECK(it_poll_until(progress_idle, NULL, 10000, 0));
	uint64_t t0 = progress_turns();
	sh->stage = 1;
	it_wait_at_least(&sh->stage, 2);
	usleep(200000);
	uint64_t t1 = progress_turns();
	if (t1 != t0)
		fprintf(stderr, "progress turns %llu -> %llu\n", (unsigned long long)t0,
			(unsigned long long)t1);
	IT_CHECK(t1 == t0); /* the FIN woke nobody */
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR && in.error == 0);
	sh->stage = 3;
	IT_CHECK(it_write_all(fd, "ping", 4));
	char b[4];
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "pong", 4) == 0);
	struct timeval tv = { 30, 0 }; /* far beyond what the test waits for */
	IT_CHECK(smcr_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	sh->stage = 4;
	long long s0 = it_now_ms();
	errno = 0;
	IT_CHECK(smcr_recv(fd, b, 1, 0) == -1);
	IT_CHECK(errno == ECONNRESET);
	IT_CHECK(it_now_ms() - s0 < 15000); /* the RST, not the 30 s timeout */
	sh->stage = 5;
	smcr_close(fd);
	return 0;
}

static void test_fin_ignored_rst_aborts(void **state)
{
	(void)state;
	sh->stage = 0;
	assert_int_equal(it_run_smc_pair(&lfd, &port, fin_server, NULL, fin_client, NULL, 20000),
			 0);
}

/* ---- an RST before the deferred watch started: noticed when it starts ---- */

static int early_server(void *a)
{
	(void)a;
	int fd = it_accept_smc(lfd);
	reset_hidden(fd); /* the RST, right after the set-up */
	it_wait_at_least(&sh->stage, 1);
	smcr_close(fd);
	return 0;
}

static int early_client(void *a)
{
	(void)a;
	it_child_env(1);
	smcr_close(lfd);
	long long t0 = it_now_ms();
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	struct timeval tv = { 30, 0 }; /* far beyond what the test waits for */
	IT_CHECK(smcr_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	char b;
	errno = 0;
	IT_CHECK(smcr_recv(fd, &b, 1, 0) == -1);
	IT_CHECK(errno == ECONNRESET);
	long long took = it_now_ms() - t0;
	IT_CHECK(took < 15000); /* the deferral (100 ms), not the 30 s timeout */
	sh->stage = 1;
	smcr_close(fd);
	return 0;
}

static void test_early_rst_noticed(void **state)
{
	(void)state;
	sh->stage = 0;
	assert_int_equal(it_run_smc_pair(&lfd, &port, early_server, NULL, early_client, NULL,
					 20000),
			 0);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options_deferred_and_cloexec),
		cmocka_unit_test(test_connect_loop_bracket),
		cmocka_unit_test(test_fin_ignored_rst_aborts),
		cmocka_unit_test(test_early_rst_noticed),
	};
	return IT_MAIN(tests);
}
