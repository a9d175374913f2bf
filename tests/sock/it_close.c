/* it_close.c: ending SMC-R connections with TCP's semantics (docs/protocol/procedures.md 5;
 * docs/design/engine-decisions.md test list): half-close and EOF (shutdown(SHUT_WR) = "sending
 * done", the other way still works), EPIPE and SIGPIPE after one's own SHUT_WR and after the peer
 * closed, SO_LINGER 0 and close with unread data ("abnormal close" -> ECONNRESET at the peer,
 * POLLERR), and a peer process killed mid-transfer (ECONNRESET or EPIPE within 1 s, never a hang),
 * both for a blocked writer and a blocked reader. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "itlib.h"

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int stage;	       /* hand-offs between the two children */
	_Atomic long long t_fail_ns;  /* when the survivor saw the error */
	_Atomic int fail_errno;
	_Atomic long long got;
};
static struct shared *sh;

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static volatile sig_atomic_t sigpipes;
static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

/* The readiness of fd once all of want is there, or after ms (polling: POLLOUT is
 * always set here, so a poll(2) with a timeout would return at once). */
static short poll_until(int fd, short want, int ms)
{
	short r = 0;
	for (int waited = 0;; waited += 2) {
		struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP };
		r = poll(&p, 1, 0) > 0 ? p.revents : 0;
		if ((r & want) == want || waited >= ms)
			return r;
		usleep(2000);
	}
}

static void setup(int (*srv)(void *), int (*cli)(void *), int timeout_ms)
{
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, srv, NULL, cli, NULL, timeout_ms), 0);
}

static int connect_smc(void)
{
	return it_client_smc(lfd, port);
}

/* ---- half-close ---- */

static char big[100000];

static int hc_server(void *a)
{
	(void)a;
	int fd = it_accept_smc(lfd);
	static char buf[100000];
	IT_CHECK(it_read_all(fd, buf, sizeof(buf)));
	IT_CHECK(memcmp(buf, big, sizeof(buf)) == 0);
	/* EOF now: readable with RDHUP, and read returns 0 (twice: EOF is sticky) */
	short r = poll_until(fd, POLLIN | POLLRDHUP, 3000);
	IT_CHECK((r & (POLLIN | POLLRDHUP)) == (POLLIN | POLLRDHUP));
	IT_CHECK(!(r & POLLHUP));
	IT_CHECK(smcr_recv(fd, buf, 10, 0) == 0);
	IT_CHECK(smcr_read(fd, buf, 10) == 0);
	/* our direction still works after the peer's SHUT_WR */
	IT_CHECK(it_write_all(fd, "after-eof", 9));
	IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
	/* both directions done: POLLHUP as TCP */
	r = poll_until(fd, POLLHUP, 3000);
	IT_CHECK(r & POLLHUP);
	/* writes after our SHUT_WR: EPIPE, and SIGPIPE unless MSG_NOSIGNAL */
	signal(SIGPIPE, on_sigpipe);
	errno = 0;
	IT_CHECK(smcr_send(fd, "x", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE);
	IT_CHECK(sigpipes == 0);
	IT_CHECK(smcr_write(fd, "x", 1) == -1 && errno == EPIPE);
	IT_CHECK(sigpipes == 1);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static int hc_client(void *a)
{
	(void)a;
	int fd = connect_smc();
	IT_CHECK(it_write_all(fd, big, sizeof(big)));
	IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
	char buf[16];
	IT_CHECK(it_read_all(fd, buf, 9));
	IT_CHECK(memcmp(buf, "after-eof", 9) == 0);
	IT_CHECK(smcr_recv(fd, buf, sizeof(buf), 0) == 0);
	/* after the peer closed too: the write fails, EPIPE (with SIGPIPE) or ECONNRESET
	 * (Linux SMC's answer once the peer's "closed" arrived; TCP gives either) */
	signal(SIGPIPE, on_sigpipe);
	errno = 0;
	IT_CHECK(smcr_send(fd, "x", 1, 0) == -1 && (errno == EPIPE || errno == ECONNRESET));
	IT_CHECK(sigpipes == (errno == EPIPE ? 1 : 0));
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void test_half_close_eof_epipe(void **state)
{
	(void)state;
	uint64_t seed = 7;
	it_fill_random(big, sizeof(big), &seed);
	setup(hc_server, hc_client, 20000);
}

/* ---- SO_LINGER 0 ---- */

static int lg_server(void *a)
{
	(void)a;
	int fd = it_accept_smc(lfd);
	it_wait_at_least(&sh->stage, 1);
	/* the reset arrives: POLLERR (and HUP), then ECONNRESET; bytes that arrived before
	 * it may be read first */
	short r = poll_until(fd, POLLERR, 3000);
	if (!(r & POLLERR))
		it_debug_state(fd, "linger0 server");
	IT_CHECK(r & POLLERR);
	IT_CHECK(r & POLLHUP);
	char buf[64];
	ssize_t n;
	long long got = 0;
	while ((n = smcr_recv(fd, buf, sizeof(buf), 0)) > 0)
		got += n;
	IT_CHECK(n == -1 && errno == ECONNRESET);
	sh->got = got;
	int err = -1;
	socklen_t l = sizeof(err);
	IT_CHECK(smcr_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0);
	IT_CHECK(err == 0); /* reported once, by the recv */
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static int lg_client(void *a)
{
	(void)a;
	int fd = connect_smc();
	IT_CHECK(it_write_all(fd, "0123456789", 10));
	struct linger lg = { 1, 0 };
	IT_CHECK(smcr_setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	struct linger back;
	socklen_t l = sizeof(back);
	IT_CHECK(smcr_getsockopt(fd, SOL_SOCKET, SO_LINGER, &back, &l) == 0);
	IT_CHECK(back.l_onoff == 1 && back.l_linger == 0);
	IT_CHECK(smcr_close(fd) == 0);
	sh->stage = 1;
	return 0;
}

static void test_so_linger_zero_resets(void **state)
{
	(void)state;
	setup(lg_server, lg_client, 20000);
	assert_true(sh->got <= 10);
}

/* ---- close with unread data: abnormal close ---- */

static int ur_server(void *a)
{
	(void)a;
	int fd = it_accept_smc(lfd);
	it_wait_at_least(&sh->stage, 1); /* the client's bytes are in our RMBE, unread */
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static int ur_client(void *a)
{
	(void)a;
	int fd = connect_smc();
	IT_CHECK(it_write_all(fd, "unread", 6));
	usleep(50000);
	sh->stage = 1;
	char c;
	errno = 0;
	IT_CHECK(smcr_recv(fd, &c, 1, 0) == -1);
	IT_CHECK(errno == ECONNRESET);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void test_close_with_unread_data_resets_peer(void **state)
{
	(void)state;
	setup(ur_server, ur_client, 20000);
}

/* ---- peer killed ---- */

static pid_t victim;

static int kill_server(void *a)
{
	(void)a;
	int fd = it_accept_smc(lfd);
	/* read a little, then stop reading and wait to be killed */
	static char buf[65536];
	IT_CHECK(it_read_all(fd, buf, sizeof(buf)));
	sh->stage = 1;
	for (;;)
		pause();
	return 0;
}

static int kill_client_writer(void *a)
{
	(void)a;
	int fd = connect_smc();
	static char buf[65536];
	for (;;) {
		ssize_t n = smcr_send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
		if (n < 0) {
			sh->fail_errno = errno;
			sh->t_fail_ns = now_ns();
			break;
		}
	}
	IT_CHECK(sh->fail_errno == ECONNRESET || sh->fail_errno == EPIPE);
	smcr_close(fd);
	return 0;
}

static int kill_client_reader(void *a)
{
	(void)a;
	int fd = connect_smc();
	static char buf[65536];
	IT_CHECK(it_write_all(fd, buf, sizeof(buf)));
	char c;
	ssize_t n = smcr_recv(fd, &c, 1, 0); /* blocks until the peer dies */
	sh->fail_errno = n < 0 ? errno : 0;
	sh->t_fail_ns = now_ns();
	IT_CHECK(n == -1 && errno == ECONNRESET);
	smcr_close(fd);
	return 0;
}

static void run_kill(int (*cli)(void *))
{
	memset(sh, 0, sizeof(*sh));
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	victim = it_fork(kill_server, NULL);
	pid_t c = it_fork(cli, NULL);
	smcr_close(lfd);
	for (int i = 0; i < 20000 && sh->stage < 1; i++)
		usleep(500);
	assert_int_equal(sh->stage, 1);
	usleep(100000); /* the survivor is blocked now (writer: RMBE full; reader: empty) */
	long long t_kill = now_ns();
	kill(victim, SIGKILL);
	assert_int_equal(it_wait(c, 10000), 0);
	it_wait(victim, 0);
	long long dt = sh->t_fail_ns - t_kill;
	if (dt > 1000000000ll)
		fail_msg("error came %lld ms after the kill", dt / 1000000);
	assert_true(dt >= 0);
}

static void test_peer_killed_writer_gets_reset(void **state)
{
	(void)state;
	run_kill(kill_client_writer);
}

static void test_peer_killed_reader_gets_reset(void **state)
{
	(void)state;
	run_kill(kill_client_reader);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_half_close_eof_epipe),
		cmocka_unit_test(test_so_linger_zero_resets),
		cmocka_unit_test(test_close_with_unread_data_resets_peer),
		cmocka_unit_test(test_peer_killed_writer_gets_reset),
		cmocka_unit_test(test_peer_killed_reader_gets_reset),
	};
	return IT_MAIN(tests);
}
