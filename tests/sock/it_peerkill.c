/* it_peerkill.c: a peer process killed (SIGKILL) while it sends. Over TCP the survivor reads
 * every byte that reached it, then EOF: the dying process's kernel closes its socket with a
 * FIN, unless that socket held data its program had not read (then a reset: ECONNRESET).
 * smcr must give the same (docs/parts/robust.md "Finding 3"): what the dead peer wrote into
 * our RMBE and announced by CDC is good data; the end is EOF when its TCP connection ends
 * with FIN, ECONNRESET where TCP gives it.
 *
 * Each case runs twice, over SMC-R (the shm device) and over plain TCP (rules "tcp"), and
 * both runs must agree with the expected outcome: the TCP run shows that the test asks for
 * TCP's own semantics. The parent forks the server and the client, waits until the client
 * has sent enough, and kills it. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include "core/core.h"
#include "itlib.h"

static int lfd;
static uint16_t port;

#define CHUNK 4096
#define SENT_MIN (1u << 20) /* the writer is killed after this much (and half read) */
#define UNREAD 8192	    /* case "unread": bytes the server sends that the client never reads */

struct shared {
	_Atomic int written; /* the client sent SENT_MIN */
	_Atomic int srv_ready;
	_Atomic long long got;	/* bytes the survivor read */
	_Atomic int end_errno; /* 0: EOF; else the errno of the final recv */
	_Atomic int mode;
};
static struct shared *sh;
static bool use_smc;
static bool with_unread;

/* ---- case "stopped": every byte announced before the kill, all read after it ---- */

#define FIXED 24576 /* fits the smallest RMBE (and TCP's buffers) */

static bool link_gone(void *arg)
{
	(void)arg;
	struct core_engine_stats st;
	it_engine_stats(&st);
	return st.links == 0;
}

static int stopped_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	smcr_close(lfd);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	sh->mode = in.mode;
	int inq = 0;
	for (int i = 0; i < 10000 && inq < FIXED; i++) {
		IT_CHECK(smcr_ioctl(fd, FIONREAD, &inq) == 0);
		if (inq < FIXED)
			usleep(1000);
	}
	IT_CHECK(inq == FIXED); /* all of it here and announced */
	sh->srv_ready = 1;
	it_wait_at_least(&sh->written, 2); /* the parent reaped the killed client */
	if (in.mode == SMCR_MODE_SMCR)
		IT_CHECK(it_poll_until(link_gone, NULL, 10000, 1000)); /* its link is down */
	uint8_t want[FIXED], b[FIXED + 1];
	uint64_t seed = 0x7654321;
	it_fill_random(want, sizeof(want), &seed);
	IT_CHECK(it_read_all(fd, b, FIXED) && memcmp(b, want, FIXED) == 0);
	sh->got = FIXED;
	ssize_t n = smcr_recv(fd, b, sizeof(b), 0);
	IT_CHECK(n <= 0);
	sh->end_errno = n == 0 ? 0 : errno;
	smcr_close(fd);
	return 0;
}

static int stopped_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	uint8_t b[FIXED];
	uint64_t seed = 0x7654321;
	it_fill_random(b, sizeof(b), &seed);
	IT_CHECK(it_write_all(fd, b, sizeof(b)));
	sh->written = 1;
	for (;;)
		pause();
}

static void run_stopped(bool smc)
{
	memset(sh, 0, sizeof(*sh));
	it_rules(smc ? "use smc both * *" : "use tcp both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	pid_t s = it_fork(stopped_server, NULL);
	pid_t c = it_fork(stopped_client, NULL);
	smcr_close(lfd);
	for (int i = 0; i < 20000 && !sh->srv_ready; i++)
		usleep(1000);
	assert_true(sh->srv_ready);
	assert_int_equal(kill(c, SIGKILL), 0);
	assert_int_equal(it_wait(c, 10000), 128 + SIGKILL);
	sh->written = 2;
	assert_int_equal(it_wait(s, 20000), 0);
	assert_int_equal(sh->mode, smc ? SMCR_MODE_SMCR : SMCR_MODE_TCP);
	assert_int_equal(sh->got, FIXED);
	assert_int_equal(sh->end_errno, 0);
}

static void test_killed_stopped_tcp(void **state)
{
	(void)state;
	run_stopped(false);
}

static void test_killed_stopped_smc(void **state)
{
	(void)state;
	run_stopped(true);
}

static int server(void *arg)
{
	(void)arg;
	it_child_env(0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	smcr_close(lfd);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	sh->mode = in.mode;
	if (with_unread) {
		uint8_t z[UNREAD];
		memset(z, 0x5a, sizeof(z));
		IT_CHECK(it_write_all(fd, z, sizeof(z)));
	}
	sh->srv_ready = 1;
	/* Read the stream to its end; every byte must be the client's generator's next. */
	uint64_t seed = 0x1234567;
	uint8_t want[CHUNK], b[CHUNK];
	size_t have = 0, at = 0;
	long long got = 0;
	for (;;) {
		ssize_t n = smcr_recv(fd, b, sizeof(b), 0);
		if (n == 0) {
			sh->end_errno = 0;
			break;
		}
		if (n < 0) {
			IT_CHECK(errno != EAGAIN && errno != EINTR);
			sh->end_errno = errno;
			break;
		}
		for (ssize_t i = 0; i < n; i++) {
			if (at == have) {
				it_fill_random(want, sizeof(want), &seed);
				have = sizeof(want);
				at = 0;
			}
			IT_CHECK(b[i] == want[at]);
			at++;
		}
		got += n;
		sh->got = got;
	}
	sh->got = got;
	smcr_close(fd);
	return 0;
}

static int client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	IT_CHECK(in.mode == (use_smc ? SMCR_MODE_SMCR : SMCR_MODE_TCP));
	it_wait_at_least(&sh->srv_ready, 1);
	if (with_unread) {
		/* The server's bytes are here (unread) before we write: poll until they are. */
		char c;
		for (int i = 0; i < 10000 && smcr_recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 1;
		     i++)
			usleep(1000);
	}
	uint64_t seed = 0x1234567;
	uint8_t b[CHUNK];
	long long sent = 0;
	for (;;) {
		it_fill_random(b, sizeof(b), &seed);
		IT_CHECK(it_write_all(fd, b, sizeof(b)));
		sent += CHUNK;
		if (sent >= (long long)SENT_MIN)
			sh->written = 1; /* and go on writing until killed */
	}
}

static void run(bool smc, bool unread)
{
	memset(sh, 0, sizeof(*sh));
	use_smc = smc;
	with_unread = unread;
	it_rules(smc ? "use smc both * *" : "use tcp both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	pid_t s = it_fork(server, NULL);
	pid_t c = it_fork(client, NULL);
	smcr_close(lfd);
	/* Killed while the stream flows: the client has sent SENT_MIN, the server read half. */
	for (int i = 0; i < 20000 && (!sh->written || sh->got < (long long)SENT_MIN / 2); i++)
		usleep(1000);
	assert_true(sh->written);
	long long at_kill = sh->got;
	assert_true(at_kill >= (long long)SENT_MIN / 2);
	assert_int_equal(kill(c, SIGKILL), 0);
	assert_int_equal(it_wait(c, 10000), 128 + SIGKILL);
	assert_int_equal(it_wait(s, 20000), 0);
	assert_int_equal(sh->mode, smc ? SMCR_MODE_SMCR : SMCR_MODE_TCP);
	assert_true(sh->got >= at_kill);
	if (unread)
		assert_int_equal(sh->end_errno, ECONNRESET);
	else
		assert_int_equal(sh->end_errno, 0);
}

static void test_killed_writer_tcp(void **state)
{
	(void)state;
	run(false, false);
}

static void test_killed_writer_smc(void **state)
{
	(void)state;
	run(true, false);
}

static void test_killed_writer_unread_tcp(void **state)
{
	(void)state;
	run(false, true);
}

static void test_killed_writer_unread_smc(void **state)
{
	(void)state;
	run(true, true);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_killed_writer_tcp),
		cmocka_unit_test(test_killed_writer_smc),
		cmocka_unit_test(test_killed_writer_unread_tcp),
		cmocka_unit_test(test_killed_writer_unread_smc),
		cmocka_unit_test(test_killed_stopped_tcp),
		cmocka_unit_test(test_killed_stopped_smc),
	};
	return IT_MAIN(tests);
}
