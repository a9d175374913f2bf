/* it_quietc.c: the quiet final C, the close reaper and the EOF without a token (docs/parts/connect.md "Close";
 * core close.c "Quiet final C", sock/api.c "The close reaper").
 *
 * The server answers and closes first (its C is solicited: the client's program is
 * blocked in recv and gets EOF); the client then closes, and its C, the final one, is sent
 * unsolicited on a software device: it wakes nobody in the server, whose program closed.
 * Checked in the server process, which does nothing else meanwhile:
 *  - test_quiet_final_c: the server's connection, whose final C came unsolicited, is
 *    released although the server does nothing (waited for as a state, up to 5 s; it
 *    must come within 1 s): the
 *    close reaper ($SMCR_CLOSE_REAP_MS, 300 ms here) polls the CQs (without it nothing would
 *    take the C: no thread of the server has a reason to run); the client's own close
 *    completed at once (it had the server's C);
 *  - test_solicited_final_c: with $SMCR_CLOSE_SOLICITED=1 in the client (the C solicited as
 *    every other CDC) the server's progress thread takes it at once: released well before
 *    the reaper's first turn.
 *  - test_quiet_final_c_peer_exits: the same, the client's process ending right after its
 *    close (its shm peer gone): released within the same 1 s, not after the close wait;
 *  - test_eof_no_token: the peer's C writes no POLLIN token (sock.c sock_apply_events:
 *    the signal end's shutdown shows POLLIN|POLLRDHUP and wakes); an edge-triggered epoll
 *    waiter still gets the EOF's edge after it read the data.
 * The first two tests' connections reuse a link group (a first connection made it) and are older than the
 * deferred TCP watch's 100 ms (hs.c) before closing, so no progress timer of the set-up
 * fires in between (each of those turns polls the CQs and would take the C). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "itlib.h"
#include "sock/progress.h"
#include "sock/sock.h"

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int stage;
	_Atomic int solicited; /* the client sets $SMCR_CLOSE_SOLICITED=1 */
	_Atomic int exits;	/* the client exits right after its close */
};
static struct shared *sh;

#define REAP_MS 300

static unsigned close_waits(void)
{
	struct core_engine *e = sock_engine_if_up();
	IT_CHECK(e != NULL);
	return core_engine_close_waits(e);
}

static bool no_close_waits(void *unused)
{
	(void)unused;
	return close_waits() == 0;
}

static int server(void *a)
{
	(void)a;
	setenv("SMCR_CLOSE_REAP_MS", "300", 1); /* REAP_MS; read at the first close */
	/* the first contact: the link group the tested connection reuses */
	it_child_env(0);
	int fd0 = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd0 >= 0);
	char b[4];
	IT_CHECK(it_read_all(fd0, b, 4) && memcmp(b, "ping", 4) == 0);
	IT_CHECK(it_write_all(fd0, "pong", 4));
	IT_CHECK(it_read_to_eof(fd0, NULL, 64) == 0);
	smcr_close(fd0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	smcr_close(lfd);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR && !in.first_contact);
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "ping", 4) == 0);
	usleep(250000); /* past the deferred watch's timer (100 ms after the set-up) */
	/* the reaper of fd0's close (at most REAP_MS ago, re-armed while it waited) ends
	 * before the tested close: nothing is waiting now */
	IT_CHECK(it_poll_until(no_close_waits, NULL, 5000, 10000));
	IT_CHECK(it_write_all(fd, "pong", 4));
	long long closed = it_now_ms();
	smcr_close(fd); /* C, solicited: the client's recv sees EOF */
	uint64_t turns0 = progress_turns();
	it_wait_at_least(&sh->stage, 1); /* the client closed: its final C went out */
	/* Whether the C is still waiting here is not checked: the reaper's arm at our close
	 * kicked the progress thread, and that turn polls the CQs, perhaps after the C came
	 * (test_core_quietc checks the quiet C itself, without threads). */
	bool gone = it_poll_until(no_close_waits, NULL, 5000, 1000);
	long long released = it_now_ms() - closed;
	if (getenv("IT_VERBOSE"))
		fprintf(stderr, "released after %lld ms, progress turns %llu\n", released,
			(unsigned long long)(progress_turns() - turns0));
	IT_CHECK(gone);
	if (sh->solicited) {
		if (released >= REAP_MS - 50)
			fprintf(stderr, "solicited C: released after %lld ms\n", released);
		IT_CHECK(released < REAP_MS - 50); /* the progress thread, not the reaper */
	} else {
		/* the reaper's first turn (REAP_MS after our close; without it the next engine
		 * deadline, 1.7 s here, took it: checked) */
		if (released >= 1000)
			fprintf(stderr, "quiet C: released after %lld ms\n", released);
		IT_CHECK(released < 1000);
	}
	sh->stage = 2;
	return 0;
}

static int client(void *a)
{
	(void)a;
	it_child_env(1);
	if (sh->solicited)
		setenv("SMCR_CLOSE_SOLICITED", "1", 1); /* before the engine starts */
	smcr_close(lfd);
	int fd0 = it_connect(false, port);
	IT_CHECK(fd0 >= 0);
	IT_CHECK(it_write_all(fd0, "ping", 4));
	char b[4];
	IT_CHECK(it_read_all(fd0, b, 4) && memcmp(b, "pong", 4) == 0);
	smcr_close(fd0); /* the client closes first here: its peer's C is the final one */
	usleep(50000);	 /* fd0's RMB back in the pool, known to the server: no CONFIRM RKEY */
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR && !in.first_contact);
	IT_CHECK(it_write_all(fd, "ping", 4));
	IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "pong", 4) == 0);
	IT_CHECK(smcr_recv(fd, b, 1, 0) == 0); /* the server's C */
	smcr_close(fd);
	IT_CHECK(close_waits() == 0); /* our side completed at our close */
	sh->stage = 1;
	if (!sh->exits)
		it_wait_at_least(&sh->stage, 2);
	return 0; /* with exits: the process ends, its engine and shm peer go */
}

/* ---- EOF without a token (sock.c sock_apply_events) ----
 * The server writes "bye" and closes; the client, asleep in an edge-triggered epoll_wait
 * (the kernel's, on the program fd) is woken, reads "bye", and is woken again for the EOF
 * although no token byte was written for it (the shutdown of the signal end makes the
 * edge): POLLIN|POLLRDHUP stay on, recv says 0. */

static int eof_server(void *a)
{
	(void)a;
	int fd = it_accept_smc(lfd);
	it_wait_at_least(&sh->stage, 1); /* the client waits in epoll_wait */
	IT_CHECK(it_write_all(fd, "bye", 3));
	it_wait_at_least(&sh->stage, 2); /* the client read it */
	smcr_close(fd);
	it_wait_at_least(&sh->stage, 3);
	return 0;
}

static int eof_client(void *a)
{
	(void)a;
	int fd = it_client_smc(lfd, port);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	IT_CHECK(ep >= 0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd };
	IT_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	sh->stage = 1;
	IT_CHECK(epoll_wait(ep, &ev, 1, 5000) == 1 && (ev.events & EPOLLIN));
	char b[8];
	IT_CHECK(smcr_recv(fd, b, sizeof(b), MSG_DONTWAIT) == 3 && memcmp(b, "bye", 3) == 0);
	sh->stage = 2;
	/* the EOF: a new edge although its arrival wrote no token */
	int n = epoll_wait(ep, &ev, 1, 5000);
	IT_CHECK(n == 1);
	IT_CHECK((ev.events & (EPOLLIN | EPOLLRDHUP)) == (EPOLLIN | EPOLLRDHUP));
	struct sock *so = sock_get(fd);
	IT_CHECK(so != NULL);
	pthread_mutex_lock(&so->sig.lock);
	unsigned tokens = so->sig.tokens;
	bool rdhup = so->sig.rdhup;
	pthread_mutex_unlock(&so->sig.lock);
	sock_put(so);
	if (tokens != 0)
		fprintf(stderr, "tokens %u after the EOF\n", tokens);
	IT_CHECK(tokens == 0 && rdhup);
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	IT_CHECK(poll(&p, 1, 0) == 1 && p.revents == (POLLIN | POLLRDHUP));
	IT_CHECK(smcr_recv(fd, b, sizeof(b), 0) == 0);
	IT_CHECK(epoll_wait(ep, &ev, 1, 0) == 0); /* edge-triggered: reported once */
	close(ep);
	smcr_close(fd);
	sh->stage = 3;
	return 0;
}

static void test_eof_no_token(void **state)
{
	(void)state;
	sh->stage = 0;
	assert_int_equal(it_run_smc_pair(&lfd, &port, eof_server, NULL, eof_client, NULL, 20000),
			 0);
}

static void run(bool solicited, bool exits)
{
	sh->stage = 0;
	sh->solicited = solicited;
	sh->exits = exits;
	assert_int_equal(it_run_smc_pair(&lfd, &port, server, NULL, client, NULL, 20000), 0);
}

static void test_quiet_final_c(void **state)
{
	(void)state;
	run(false, false);
}

/* The client's process ends right after its quiet C: the server still releases the
 * connection at once-ish (the C, or the link's failure when the peer is gone), not after
 * the engine's close wait (30 s). */
static void test_quiet_final_c_peer_exits(void **state)
{
	(void)state;
	run(false, true);
}

static void test_solicited_final_c(void **state)
{
	(void)state;
	run(true, false);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quiet_final_c),
		cmocka_unit_test(test_solicited_final_c),
		cmocka_unit_test(test_quiet_final_c_peer_exits),
		cmocka_unit_test(test_eof_no_token),
	};
	return IT_MAIN(tests);
}
