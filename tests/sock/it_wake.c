/* it_wake.c: sleepers in blocking calls are woken by what they wait for
 * (docs/design/readiness.md section 4), in the client process of a real two-process
 * SMC-R connection pair, with sleepers on their program fds (the direct sleeper has its
 * own test, it_direct.c):
 *   - a thread asleep in recv gets its byte, two threads asleep in recv on the same
 *     socket each get one of two bytes, a thread asleep in send (our ring and the peer's
 *     RMBE full) is woken by the room and its 4 MiB arrive intact;
 *   - after each, no spin and no lease is left (the CQs are armed for the next sleeper). */
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
#include <sys/socket.h>

#include "core/core_int.h"
#include "itlib.h"
#include "sock/sock.h"
#include "util/clock.h"

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int stage; /* client -> server: step n wanted */
	_Atomic int ack;   /* server -> client: step n done */
};
static struct shared *sh;

/* Waits until the engine has no spinner and no lease: every thread is asleep or gone. */
static bool quiet_engine(void)
{
	struct core_engine *e = sock_engine();
	IT_CHECK(e != NULL);
	pthread_mutex_lock(&e->lock);
	bool q = e->spinners == 0 && e->lease_until == 0;
	pthread_mutex_unlock(&e->lock);
	return q;
}

struct blocked {
	int fd;
	bool send;
	const uint8_t *buf;
	size_t len;
	ssize_t rc;
	char got;
	uint64_t woke_ns; /* when the call returned */
};

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;
	if (b->send)
		b->rc = smcr_send(b->fd, b->buf, b->len, 0);
	else
		b->rc = smcr_recv(b->fd, &b->got, 1, 0);
	b->woke_ns = smcr_now_ns();
	return NULL;
}

/* ---- sleepers woken ---- */

enum {
	ST_RECV = 1, /* server: send 'r' */
	ST_TWO,	     /* server: send "st" */
	ST_SEND,     /* server: read BIG */
	ST_DONE,
};

#define BIG (4u << 20)

static int woken_server(void *arg)
{
	(void)arg;
	int fd = it_accept_smc(lfd);
	uint8_t *big = malloc(BIG);
	IT_CHECK(big != NULL);
	it_wait_at_least(&sh->stage, ST_RECV);
	IT_CHECK(smcr_send(fd, "r", 1, 0) == 1);
	it_wait_at_least(&sh->stage, ST_TWO);
	IT_CHECK(smcr_send(fd, "st", 2, 0) == 2);
	it_wait_at_least(&sh->stage, ST_SEND);
	IT_CHECK(it_read_all(fd, big, BIG));
	for (size_t i = 0; i < BIG; i++)
		IT_CHECK(big[i] == (uint8_t)(i * 13u));
	sh->ack = ST_SEND;
	it_wait_at_least(&sh->stage, ST_DONE);
	IT_CHECK(smcr_close(fd) == 0);
	free(big);
	return 0;
}

static int woken_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	pthread_t t, t2;

	/* one thread asleep in recv: woken by the byte */
	struct blocked b = { .fd = fd };
	IT_CHECK(pthread_create(&t, NULL, blocked_main, &b) == 0);
	usleep(100000); /* beyond its spin: asleep (or about to be: either must work) */
	sh->stage = ST_RECV;
	IT_CHECK(pthread_join(t, NULL) == 0);
	IT_CHECK(b.rc == 1 && b.got == 'r');
	IT_CHECK(quiet_engine());

	/* two threads asleep in recv on the socket: each gets one byte */
	struct blocked b1 = { .fd = fd }, b2 = { .fd = fd };
	IT_CHECK(pthread_create(&t, NULL, blocked_main, &b1) == 0);
	IT_CHECK(pthread_create(&t2, NULL, blocked_main, &b2) == 0);
	usleep(100000);
	sh->stage = ST_TWO;
	IT_CHECK(pthread_join(t, NULL) == 0);
	IT_CHECK(pthread_join(t2, NULL) == 0);
	IT_CHECK(b1.rc == 1 && b2.rc == 1);
	IT_CHECK((b1.got == 's' && b2.got == 't') || (b1.got == 't' && b2.got == 's'));
	IT_CHECK(quiet_engine());

	/* a thread asleep in send (peer's RMBE and our ring full): woken by the room */
	uint8_t *big = malloc(BIG);
	IT_CHECK(big != NULL);
	for (size_t i = 0; i < BIG; i++)
		big[i] = (uint8_t)(i * 13u);
	struct blocked s = { .fd = fd, .send = true, .buf = big, .len = BIG };
	IT_CHECK(pthread_create(&t, NULL, blocked_main, &s) == 0);
	usleep(100000);
	sh->stage = ST_SEND;
	IT_CHECK(pthread_join(t, NULL) == 0);
	IT_CHECK(s.rc == (ssize_t)BIG);
	IT_CHECK(quiet_engine());
	it_wait_at_least(&sh->ack, ST_SEND);
	free(big);
	sh->stage = ST_DONE;
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void test_sleepers_woken(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, woken_server, NULL, woken_client, NULL, 60000), 0);
}

int main(void)
{
	/* sleepers on their program fds: the direct sleeper has its own test (it_direct.c) */
	setenv("SMCR_DIRECT_WAKE", "0", 0);
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sleepers_woken),
	};
	return IT_MAIN(tests);
}
