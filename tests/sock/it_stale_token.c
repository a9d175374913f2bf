/* it_stale_token.c: the program's fd never says POLLIN with nothing to read
 * (docs/design/readiness.md section 3: a token says nothing the level mask does not).
 *
 * The engine's callback for an arrival (sock_core_event) runs on whatever thread polled the
 * completion, after the arrival's bytes became readable, with a level mask computed before
 * it ran. The program's own non-blocking read can take those bytes and drain the tokens in
 * between; a token the late callback writes then shows POLLIN (and wakes a level-triggered
 * epoll) for an empty ring, and the read that follows gets EAGAIN, which wrk counts as a
 * read error (tests/apps/test_nginx.sh). Here that interleaving is made deterministic: the
 * server reads everything, then delivers the callback the engine would have delivered for
 * those bytes (the same level mask and raised bits), and checks the kernel's view of its
 * fd: no POLLIN, and a read gives EAGAIN. Then the next arrival still shows POLLIN (no
 * wake-up lost). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "itlib.h"
#include "sock/sock.h"

#define ROUNDS 4
#define CHUNK 1000

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int stage; /* server -> client: send chunk n */
	_Atomic int done;
};
static struct shared *sh;

static short pollin(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, ms);
	IT_CHECK(n >= 0);
	return n ? p.revents : 0;
}

/* Reads CHUNK bytes with non-blocking reads, as an event loop does, until EAGAIN. */
static void read_chunk(int fd, int round)
{
	uint8_t buf[CHUNK * 2];
	size_t got = 0;
	for (;;) {
		ssize_t n = smcr_recv(fd, buf + got, sizeof(buf) - got, MSG_DONTWAIT);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		IT_CHECK(n < 0 && errno == EAGAIN);
		if (got == CHUNK)
			break;
		IT_CHECK(pollin(fd, 10000) & POLLIN);
	}
	for (size_t i = 0; i < got; i++)
		IT_CHECK(buf[i] == (uint8_t)(round * 31 + i));
}

static int server(void *arg)
{
	(void)arg;
	int fd = it_accept_smc(lfd);
	for (int r = 1; r <= ROUNDS; r++) {
		sh->stage = r;
		IT_CHECK(pollin(fd, 10000) & POLLIN);
		read_chunk(fd, r);
		IT_CHECK(!(pollin(fd, 0) & POLLIN)); /* drained */
		/* the arrival's callback, late: its mask from before the read */
		struct sock *s = sock_get(fd);
		IT_CHECK(s != NULL);
		sock_core_event(s, s->conn, CORE_EV_IN | CORE_EV_OUT, CORE_EV_IN | CORE_EV_IN_NEW);
		sock_put(s);
		IT_CHECK(!(pollin(fd, 0) & POLLIN));
		char c;
		IT_CHECK(smcr_recv(fd, &c, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
	}
	/* and the next arrival is shown */
	sh->stage = ROUNDS + 1;
	IT_CHECK(pollin(fd, 10000) & POLLIN);
	char c;
	IT_CHECK(smcr_recv(fd, &c, 1, 0) == 1 && c == 'z');
	sh->done = 1;
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static int client(void *arg)
{
	(void)arg;
	int fd = it_client_smc(lfd, port);
	uint8_t buf[CHUNK];
	for (int r = 1; r <= ROUNDS; r++) {
		it_wait_at_least(&sh->stage, r);
		for (size_t i = 0; i < CHUNK; i++)
			buf[i] = (uint8_t)(r * 31 + i);
		IT_CHECK(it_write_all(fd, buf, CHUNK));
	}
	it_wait_at_least(&sh->stage, ROUNDS + 1);
	IT_CHECK(smcr_send(fd, "z", 1, 0) == 1);
	it_wait_at_least(&sh->done, 1);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void test_late_callback_no_token(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, server, NULL, client, NULL, 60000), 0);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_late_callback_no_token),
	};
	return IT_MAIN(tests);
}
