/* it_smoke.c: the smallest end-to-end check: two processes, one connection over SMC-R,
 * a few bytes each way, both sides report mode smcr (tests/sock/itlib.h); over IPv4 and
 * IPv6 (::1). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "itlib.h"

static int lfd;
static uint16_t port;
static bool v6;

static int server(void *arg)
{
	(void)arg;
	it_child_env(0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	IT_CHECK(in.mode == SMCR_MODE_SMCR);
	IT_CHECK(in.role == SMCR_ROLE_SERVER);
	/* SO_RCVBUF set on the listener is inherited, as TCP's accepted sockets do: the RMBE
	 * is the smallest power of two >= 200000 */
	IT_CHECK(in.rmbe_size == 262144);
	char buf[6];
	IT_CHECK(it_read_all(fd, buf, 5));
	IT_CHECK(memcmp(buf, "hello", 5) == 0);
	IT_CHECK(it_write_all(fd, "world", 5));
	IT_CHECK(smcr_recv(fd, buf, 1, 0) == 0); /* EOF after the client's close */
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static int client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(v6, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	if (in.mode != SMCR_MODE_SMCR)
		fprintf(stderr, "client mode %s local %s peer %s\n", smcr_mode_name(in.mode),
			smcr_reason_name(in.local_reason), smcr_reason_name(in.peer_reason));
	IT_CHECK(in.mode == SMCR_MODE_SMCR);
	IT_CHECK(in.first_contact == 1);
	IT_CHECK(in.peer_rmbe_size == 262144);
	IT_CHECK(it_write_all(fd, "hello", 5));
	char buf[5];
	IT_CHECK(it_read_all(fd, buf, 5));
	IT_CHECK(memcmp(buf, "world", 5) == 0);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void run(void)
{
	it_rules("use smc both * *");
	lfd = it_listen(v6, &port);
	assert_true(lfd >= 0);
	int rb = 200000;
	assert_int_equal(smcr_setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb)), 0);
	assert_int_equal(it_run_pair(lfd, server, NULL, client, NULL, 20000), 0);
}

static void test_smoke(void **state)
{
	(void)state;
	v6 = false;
	run();
}

static void test_smoke_ipv6(void **state)
{
	(void)state;
	v6 = true;
	run();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smoke),
		cmocka_unit_test(test_smoke_ipv6),
	};
	return IT_MAIN(tests);
}
