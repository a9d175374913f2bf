/* it_oob.c: urgent data as TCP presents it (docs/protocol/procedures.md 4.6;
 * docs/design/engine-decisions.md test list): the last byte of a MSG_OOB send is urgent; without
 * SO_OOBINLINE a read stops at the mark, SIOCATMARK says so, recv(MSG_OOB) returns the byte once
 * and the stream goes on without it; with SO_OOBINLINE the byte stays in the stream and
 * recv(MSG_OOB) is EINVAL. Also FIONREAD and SIOCOUTQ on an SMC-R connection. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>

#include "itlib.h"

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int stage;
};
static struct shared *sh;

static void wait_stage(int s)
{
	for (int i = 0; i < 20000 && sh->stage < s; i++)
		usleep(500);
	IT_CHECK(sh->stage >= s);
}

static int readable(int fd)
{
	int n = -1;
	IT_CHECK(smcr_ioctl(fd, FIONREAD, &n) == 0);
	return n;
}

static int atmark(int fd)
{
	int m = -1;
	IT_CHECK(smcr_ioctl(fd, SIOCATMARK, &m) == 0);
	return m;
}

static int server(void *arg)
{
	bool inl = arg != NULL;
	it_child_env(0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	if (inl) {
		int one = 1;
		IT_CHECK(smcr_setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one)) == 0);
	}
	wait_stage(1); /* "ab" + urgent "c" + "de" sent */
	for (int i = 0; i < 2000 && readable(fd) < (inl ? 5 : 2); i++)
		usleep(1000);
	usleep(20000);
	/* inline: all 5; out of band: the bytes before the mark, as TCP's tcp_inq
	 * (tests/sock/it_ready.c compares every step with a TCP connection) */
	IT_CHECK(readable(fd) == (inl ? 5 : 2));
	IT_CHECK(atmark(fd) == 0);
	char buf[16];
	/* a read stops at the mark */
	IT_CHECK(smcr_recv(fd, buf, sizeof(buf), 0) == 2);
	IT_CHECK(memcmp(buf, "ab", 2) == 0);
	IT_CHECK(atmark(fd) == 1);
	if (!inl) {
		char c = 0;
		IT_CHECK(smcr_recv(fd, &c, 1, MSG_OOB | MSG_PEEK) == 1 && c == 'c');
		IT_CHECK(smcr_recv(fd, &c, 1, MSG_OOB) == 1 && c == 'c');
		errno = 0;
		IT_CHECK(smcr_recv(fd, &c, 1, MSG_OOB) == -1 && errno == EINVAL); /* once */
		IT_CHECK(smcr_recv(fd, buf, sizeof(buf), 0) == 2);
		IT_CHECK(memcmp(buf, "de", 2) == 0);
	} else {
		char c;
		errno = 0;
		IT_CHECK(smcr_recv(fd, &c, 1, MSG_OOB) == -1 && errno == EINVAL);
		IT_CHECK(it_read_all(fd, buf, 3));
		IT_CHECK(memcmp(buf, "cde", 3) == 0);
	}
	IT_CHECK(atmark(fd) == 0);
	IT_CHECK(readable(fd) == 0);
	IT_CHECK(it_write_all(fd, "k", 1));
	IT_CHECK(smcr_recv(fd, buf, 1, 0) == 0);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static int client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	IT_CHECK(smcr_send(fd, "abc", 3, MSG_OOB) == 3);
	IT_CHECK(smcr_send(fd, "de", 2, 0) == 2);
	int q = -1;
	IT_CHECK(smcr_ioctl(fd, SIOCOUTQ, &q) == 0);
	IT_CHECK(q >= 0 && q <= 5); /* not yet consumed by the peer */
	sh->stage = 1;
	char c;
	IT_CHECK(it_read_all(fd, &c, 1) && c == 'k');
	IT_CHECK(smcr_ioctl(fd, SIOCOUTQ, &q) == 0);
	IT_CHECK(q == 0); /* everything consumed now */
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void run(bool inl)
{
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, server, inl ? (void *)1 : NULL, client, NULL, 20000), 0);
}

static void test_urgent_out_of_band(void **state)
{
	(void)state;
	run(false);
}

static void test_urgent_inline(void **state)
{
	(void)state;
	run(true);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_urgent_out_of_band),
		cmocka_unit_test(test_urgent_inline),
	};
	return IT_MAIN(tests);
}
