/* it_wait.c: the interposer's waits (src/sock/wait.h: sock_wait_poll, sock_wait_epoll)
 * between two processes over SMC-R, against what poll/ppoll/epoll_pwait give:
 *   - a set of an SMC-R socket and a pipe: a timeout returns 0 with no revents, a byte in
 *     the pipe returns 1 with the pipe's POLLIN only, the peer's byte returns 1 with the
 *     socket's POLLIN only (its readiness the same moment for the kernel's poll);
 *   - the caller's signal mask is the sleep's: a signal blocked in the thread but not in
 *     the mask interrupts the wait with EINTR; one blocked in the mask does not;
 *   - errno is left alone by a wait that succeeds or times out; a bad timespec gives
 *     EINVAL as ppoll does;
 *   - sock_wait_epoll on an epoll set holding the socket: the event's data, a timeout, and
 *     EINTR under its mask. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "itlib.h"
#include "sock/sock.h"
#include "sock/wait.h"
#include "util/clock.h"

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int stage; /* client -> server: send byte number stage */
};
static struct shared *sh;

static int wait_server(void *arg)
{
	(void)arg;
	int fd = it_accept_smc(lfd);
	for (int n = 1; n <= 2; n++) {
		it_wait_at_least(&sh->stage, n);
		char c = (char)('0' + n);
		IT_CHECK(smcr_send(fd, &c, 1, 0) == 1);
	}
	it_wait_at_least(&sh->stage, 3);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void on_usr1(int sig)
{
	(void)sig;
}

struct killer {
	pthread_t target;
	int ms;
};

static void *killer_main(void *arg)
{
	struct killer *k = arg;
	usleep((useconds_t)k->ms * 1000);
	pthread_kill(k->target, SIGUSR1);
	return NULL;
}

static int wait_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	int pp[2];
	IT_CHECK(pipe(pp) == 0);
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = pp[0], .events = POLLIN } };

	/* a timeout: 0, no revents, errno untouched */
	struct timespec t50 = { 0, 50 * 1000000 };
	errno = 1234;
	IT_CHECK(sock_wait_poll(p, 2, &t50, NULL) == 0);
	IT_CHECK(errno == 1234);
	IT_CHECK(p[0].revents == 0 && p[1].revents == 0);
	/* the pipe's byte */
	IT_CHECK(write(pp[1], "p", 1) == 1);
	IT_CHECK(sock_wait_poll(p, 2, NULL, NULL) == 1);
	IT_CHECK(errno == 1234);
	IT_CHECK(p[0].revents == 0 && p[1].revents == POLLIN);
	char c;
	IT_CHECK(read(pp[0], &c, 1) == 1 && c == 'p');
	/* the peer's byte, through the engine; the kernel's poll sees it at the same time */
	sh->stage = 1;
	IT_CHECK(sock_wait_poll(p, 2, NULL, NULL) == 1);
	IT_CHECK(p[0].revents == POLLIN && p[1].revents == 0);
	struct pollfd k = { .fd = fd, .events = POLLIN };
	IT_CHECK(poll(&k, 1, 0) == 1 && (k.revents & POLLIN));
	IT_CHECK(smcr_recv(fd, &c, 1, 0) == 1 && c == '1');
	/* a bad timespec: EINVAL */
	struct timespec bad = { 0, 1000000000 };
	IT_CHECK(sock_wait_poll(p, 2, &bad, NULL) == -1 && errno == EINVAL);

	/* the mask: SIGUSR1 blocked in the thread, open in the wait's mask: EINTR */
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigemptyset(&sa.sa_mask);
	IT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	sigset_t blk, open_mask;
	sigemptyset(&blk);
	sigaddset(&blk, SIGUSR1);
	IT_CHECK(pthread_sigmask(SIG_BLOCK, &blk, &open_mask) == 0);
	sigdelset(&open_mask, SIGUSR1);
	struct killer kl = { .target = pthread_self(), .ms = 50 };
	pthread_t th;
	IT_CHECK(pthread_create(&th, NULL, killer_main, &kl) == 0);
	struct timespec t5s = { 5, 0 };
	IT_CHECK(sock_wait_poll(p, 2, &t5s, &open_mask) == -1 && errno == EINTR);
	IT_CHECK(pthread_join(th, NULL) == 0);
	/* blocked in the wait's mask too: the signal stays pending, the wait times out */
	IT_CHECK(pthread_create(&th, NULL, killer_main, &kl) == 0);
	struct timespec t200 = { 0, 200 * 1000000 };
	IT_CHECK(sock_wait_poll(p, 2, &t200, &blk) == 0);
	IT_CHECK(pthread_join(th, NULL) == 0);
	sigset_t pend;
	IT_CHECK(sigpending(&pend) == 0 && sigismember(&pend, SIGUSR1));
	IT_CHECK(pthread_sigmask(SIG_UNBLOCK, &blk, NULL) == 0); /* the handler runs */
	IT_CHECK(pthread_sigmask(SIG_BLOCK, &blk, NULL) == 0);

	/* sock_wait_epoll: the set holds the socket (registered through smcr_epoll_ctl) */
	int ep = epoll_create1(0);
	IT_CHECK(ep >= 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0x1234567890ull };
	IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	struct epoll_event got[4];
	IT_CHECK(sock_wait_epoll(ep, got, 4, 50 * 1000000ll, NULL) == 0);
	IT_CHECK(pthread_create(&th, NULL, killer_main, &kl) == 0);
	IT_CHECK(sock_wait_epoll(ep, got, 4, 5000 * 1000000ll, &open_mask) == -1 &&
		 errno == EINTR);
	IT_CHECK(pthread_join(th, NULL) == 0);
	sh->stage = 2;
	errno = 4321;
	IT_CHECK(sock_wait_epoll(ep, got, 4, -1, NULL) == 1);
	IT_CHECK(errno == 4321);
	IT_CHECK(got[0].data.u64 == 0x1234567890ull && (got[0].events & EPOLLIN));
	IT_CHECK(smcr_recv(fd, &c, 1, 0) == 1 && c == '2');
	IT_CHECK(sock_wait_epoll(ep, got, 0, 0, NULL) == -1 && errno == EINVAL);

	sh->stage = 3;
	close(ep);
	close(pp[0]);
	close(pp[1]);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void test_waits(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, wait_server, NULL, wait_client, NULL, 60000), 0);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_waits),
	};
	return IT_MAIN(tests);
}
