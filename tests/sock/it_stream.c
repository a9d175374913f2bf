/* it_stream.c: blocking data calls as one engine spin (docs/parts/stream.md).
 *
 * A blocking send/recv on an SMC-R socket brackets its whole call with
 * core_engine_spin_begin/end (data.c call_spin_begin): while it copies, the CQs stay
 * disarmed and the peer's CDCs wake no progress thread. The bracket must be closed on
 * every way out of the call and released while the thread sleeps (a sleeper needs the
 * CQs armed, or an arrival would wait for the spin grace). These tests check the engine's
 * spinner count (0 = the CQs may be armed) after each kind of return and while a thread
 * sleeps in recv and in send, and that a long stream of mixed sizes arrives intact. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "core/core_int.h"
#include "itlib.h"
#include "sock/sock.h"
#include "util/clock.h"

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int stage; /* client -> server: step n wanted */
	_Atomic int ack;   /* server -> client: step n done */
	uint8_t sha_sent[32], sha_recv[32];
	_Atomic long long recv_total;
};
static struct shared *sh;

/* ---- every way out of a blocking call closes its bracket ---- */

enum {
	ST_SEND_SMALL = 1, /* server: read 1000 bytes, send 3 bytes back */
	ST_SLEEP_RECV,     /* server: wait 200 ms, send 1 byte */
	ST_PEEK,           /* server: send 4 bytes, 200 ms later 6 more */
	ST_SLEEP_SEND,     /* server: wait 200 ms, then read 4 MiB */
	ST_SHUT,           /* server: shutdown(SHUT_WR) */
	ST_CLOSE,          /* server: close */
};

#define BIG (4u << 20)

static int exits_server(void *arg)
{
	(void)arg;
	int fd = it_accept_smc(lfd);
	char buf[1000];
	uint8_t *big = malloc(BIG);
	IT_CHECK(big != NULL);
	it_wait_at_least(&sh->stage, ST_SEND_SMALL);
	IT_CHECK(it_read_all(fd, buf, sizeof(buf)));
	IT_CHECK(smcr_send(fd, "abc", 3, 0) == 3);
	sh->ack = ST_SEND_SMALL;
	it_wait_at_least(&sh->stage, ST_SLEEP_RECV);
	usleep(200000);
	IT_CHECK(smcr_send(fd, "x", 1, 0) == 1);
	sh->ack = ST_SLEEP_RECV;
	it_wait_at_least(&sh->stage, ST_PEEK);
	IT_CHECK(smcr_send(fd, "0123", 4, 0) == 4);
	usleep(200000);
	IT_CHECK(smcr_send(fd, "456789", 6, 0) == 6);
	sh->ack = ST_PEEK;
	it_wait_at_least(&sh->stage, ST_SLEEP_SEND);
	usleep(200000);
	IT_CHECK(it_read_all(fd, big, BIG));
	for (size_t i = 0; i < BIG; i++)
		IT_CHECK(big[i] == (uint8_t)(i * 7u));
	sh->ack = ST_SLEEP_SEND;
	it_wait_at_least(&sh->stage, ST_SHUT);
	IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
	sh->ack = ST_SHUT;
	it_wait_at_least(&sh->stage, ST_CLOSE);
	IT_CHECK(smcr_close(fd) == 0);
	sh->ack = ST_CLOSE;
	free(big);
	return 0;
}

struct blocked {
	int fd;
	bool send;
	const uint8_t *buf;
	size_t len;
	ssize_t rc;
	char got;
};

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;
	if (b->send)
		b->rc = smcr_send(b->fd, b->buf, b->len, 0);
	else
		b->rc = smcr_recv(b->fd, &b->got, 1, 0);
	return NULL;
}

static int exits_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	signal(SIGPIPE, SIG_IGN);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	char buf[1000];
	memset(buf, 'a', sizeof(buf));

	/* a send that fits, a recv that finds data */
	sh->stage = ST_SEND_SMALL;
	IT_CHECK(smcr_send(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf));
	IT_CHECK(it_engine_spinners() == 0);
	it_wait_at_least(&sh->ack, ST_SEND_SMALL);
	IT_CHECK(smcr_recv(fd, buf, 3, MSG_WAITALL) == 3 && memcmp(buf, "abc", 3) == 0);
	IT_CHECK(it_engine_spinners() == 0);

	/* SO_RCVTIMEO ran out: EAGAIN after spinning and sleeping */
	struct timeval tv = { .tv_sec = 0, .tv_usec = 50000 };
	IT_CHECK(smcr_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	IT_CHECK(smcr_recv(fd, buf, 1, 0) == -1 && errno == EAGAIN);
	IT_CHECK(it_engine_spinners() == 0);
	tv.tv_usec = 0;
	IT_CHECK(smcr_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);

	/* a thread asleep in recv holds no spin; the byte then wakes it */
	struct blocked b = { .fd = fd };
	pthread_t t;
	IT_CHECK(pthread_create(&t, NULL, blocked_main, &b) == 0);
	usleep(100000); /* far beyond any spin (at most WAITPOL_SPIN_MAX_NS) */
	IT_CHECK(it_engine_spinners() == 0);
	sh->stage = ST_SLEEP_RECV;
	IT_CHECK(pthread_join(t, NULL) == 0);
	IT_CHECK(b.rc == 1 && b.got == 'x');
	IT_CHECK(it_engine_spinners() == 0);
	it_wait_at_least(&sh->ack, ST_SLEEP_RECV);

	/* MSG_PEEK|MSG_WAITALL: waits (spin, sleep) with 4 of 10 bytes there */
	sh->stage = ST_PEEK;
	IT_CHECK(smcr_recv(fd, buf, 10, MSG_PEEK | MSG_WAITALL) == 10);
	IT_CHECK(memcmp(buf, "0123456789", 10) == 0);
	IT_CHECK(it_engine_spinners() == 0);
	IT_CHECK(smcr_recv(fd, buf, 10, MSG_WAITALL) == 10);
	IT_CHECK(it_engine_spinners() == 0);
	it_wait_at_least(&sh->ack, ST_PEEK);

	/* a thread asleep in send (the peer's RMBE and our ring full) holds no spin */
	uint8_t *big = malloc(BIG);
	IT_CHECK(big != NULL);
	for (size_t i = 0; i < BIG; i++)
		big[i] = (uint8_t)(i * 7u);
	struct blocked s = { .fd = fd, .send = true, .buf = big, .len = BIG };
	IT_CHECK(pthread_create(&t, NULL, blocked_main, &s) == 0);
	usleep(100000);
	IT_CHECK(it_engine_spinners() == 0);
	sh->stage = ST_SLEEP_SEND;
	IT_CHECK(pthread_join(t, NULL) == 0);
	IT_CHECK(s.rc == (ssize_t)BIG);
	IT_CHECK(it_engine_spinners() == 0);
	it_wait_at_least(&sh->ack, ST_SLEEP_SEND);
	free(big);

	/* end of stream */
	sh->stage = ST_SHUT;
	IT_CHECK(smcr_recv(fd, buf, 1, 0) == 0);
	IT_CHECK(it_engine_spinners() == 0);
	it_wait_at_least(&sh->ack, ST_SHUT);

	/* the peer closed: send fails (EPIPE or ECONNRESET, as TCP after the peer's close) */
	sh->stage = ST_CLOSE;
	it_wait_at_least(&sh->ack, ST_CLOSE);
	ssize_t r = 0;
	for (int i = 0; i < 200 && r >= 0; i++) {
		r = smcr_send(fd, "y", 1, MSG_NOSIGNAL);
		if (r >= 0)
			usleep(5000);
	}
	IT_CHECK(r == -1 && (errno == EPIPE || errno == ECONNRESET));
	IT_CHECK(it_engine_spinners() == 0);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void test_bracket_closed_on_every_exit(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, exits_server, NULL, exits_client, NULL, 60000), 0);
}

/* ---- a long stream of mixed sizes, both ends blocking ---- */

#define STREAM_BYTES (48ll << 20)

static int stream_server(void *arg)
{
	(void)arg;
	int fd = it_accept_smc(lfd);
	struct it_sha *sha = it_sha_new();
	uint8_t *buf = malloc(256 * 1024);
	IT_CHECK(buf != NULL);
	uint64_t seed = 99;
	long long total = 0;
	for (;;) {
		size_t want = 1 + (size_t)((seed = seed * 6364136223846793005ull + 1) >> 46);
		ssize_t n = smcr_recv(fd, buf, want, 0); /* 1 B .. 256 KiB */
		IT_CHECK(n >= 0);
		if (n == 0)
			break;
		it_sha_update(sha, buf, (size_t)n);
		total += n;
	}
	IT_CHECK(it_engine_spinners() == 0);
	it_sha_final(sha, sh->sha_recv);
	sh->recv_total = total;
	free(buf);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static int stream_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	uint8_t *buf = malloc(512 * 1024);
	IT_CHECK(buf != NULL);
	struct it_sha *sha = it_sha_new();
	uint64_t seed = 7, fill = 3;
	long long sent = 0;
	while (sent < STREAM_BYTES) {
		size_t n = 1 + (size_t)((seed = seed * 6364136223846793005ull + 1) >> 45);
		if (n > (size_t)(STREAM_BYTES - sent))
			n = (size_t)(STREAM_BYTES - sent);
		it_fill_random(buf, n, &fill); /* 1 B .. 512 KiB */
		IT_CHECK(it_write_all(fd, buf, n));
		it_sha_update(sha, buf, n);
		sent += (long long)n;
	}
	IT_CHECK(it_engine_spinners() == 0);
	it_sha_final(sha, sh->sha_sent);
	free(buf);
	IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void test_stream_mixed_sizes(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, stream_server, NULL, stream_client, NULL, 90000), 0);
	assert_int_equal(sh->recv_total, STREAM_BYTES);
	assert_memory_equal(sh->sha_sent, sh->sha_recv, 32);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bracket_closed_on_every_exit),
		cmocka_unit_test(test_stream_mixed_sizes),
	};
	return IT_MAIN(tests);
}
