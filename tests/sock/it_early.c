/* it_early.c: undecided connections on the smcr API (docs/parts/connect.md "Undecided
 * connections"), as the interposer has them (sock_early_connect): a connect returns once
 * TCP is up, the handshake decides in the background, writes of that time wait in the
 * pre-decision buffer and go out, in order, over the mode that won.
 *   - one thread connects, writes, and only then accepts (the process is client and server,
 *     as CPython's test suites): connect returns with the connection undecided, the accept
 *     returns it over SMC-R, the server reads the bytes, both ends end in SMC-R;
 *   - a server that declines after the client's connect returned (a fake CLC peer on a
 *     plain socket): the client's bytes arrive over TCP right after its Proposal, nothing
 *     lost or doubled, and the reply comes back; the client ends in TCP with the peer's
 *     reason;
 *   - a server that resets the TCP connection during the handshake: the client's read
 *     fails with ECONNRESET, as TCP's after an RST;
 *   - fds: after each case and the close of every connection, the process holds as many
 *     fds as before (the failure path after connect returned included). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "itlib.h"
#include "sock/closeq.h"
#include "sock/sock.h"
#include "wire/clc.h"

#define N 20000

static void pattern(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)((i + seed) * 2654435761u >> 11);
}

static int mode_of(int fd)
{
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	return (int)in.mode;
}

/* fds once the socket objects are gone, no hidden fd waits to be closed (closeq.h) and
 * the count stopped moving (a closed socket's last reference may be a watch the progress
 * thread releases a moment later). */
static int settled_fds(void)
{
	for (int i = 0; i < 5000 && (sock_count() > 0 || closeq_pending() != 0); i++)
		usleep(1000);
	int last = -1, same = 0;
	for (int i = 0; i < 200 && same < 3; i++) {
		int n = it_count_fds();
		same = n == last ? same + 1 : 0;
		last = n;
		usleep(10000);
	}
	return last;
}

/* One thread: listen, connect, write, accept, read (a new listener each round: a
 * listener's queue, once an accept set it up, answers the next clients in the
 * background, and the client's connect would see the answer within its spin). */
static int self_connect(void *arg)
{
	(void)arg;
	it_child_env(0);
	it_rules("use smc both * *");
	atomic_store(&sock_early_connect, true);
	int fds0 = -1;
	for (int round = 0; round < 4; round++) {
		uint16_t port;
		int l = it_listen(false, &port);
		IT_CHECK(l >= 0);
		int c = it_connect(false, port); /* nobody accepts yet */
		IT_CHECK(c >= 0);
		IT_CHECK(mode_of(c) == SMCR_MODE_HANDSHAKE);
		struct pollfd p = { .fd = c, .events = POLLOUT | POLLIN };
		IT_CHECK(poll(&p, 1, 0) == 1 && p.revents == POLLOUT);
		static uint8_t b[N], r[N];
		pattern(b, N, (unsigned)round);
		IT_CHECK(smcr_send(c, b, N, 0) == N);
		int s = smcr_accept(l, NULL, NULL);
		IT_CHECK(s >= 0);
		IT_CHECK(it_read_all(s, r, N));
		IT_CHECK(memcmp(b, r, N) == 0);
		IT_CHECK(it_write_all(s, "ok", 2));
		char k[2];
		IT_CHECK(it_read_all(c, k, 2) && !memcmp(k, "ok", 2));
		IT_CHECK(mode_of(c) == SMCR_MODE_SMCR && mode_of(s) == SMCR_MODE_SMCR);
		IT_CHECK(smcr_close(c) == 0 && smcr_close(s) == 0 && smcr_close(l) == 0);
		IT_CHECK(it_engine_conns_gone());
		/* the first round made the engine and the link group: the others add nothing */
		int n = settled_fds();
		if (round == 0)
			fds0 = n;
		IT_CHECK(n == fds0);
	}
	return 0;
}

static void test_self_connect(void **state)
{
	(void)state;
	assert_int_equal(it_wait(it_fork(self_connect, NULL), 60000), 0);
}

/* A plain TCP listener on 127.0.0.1 (the fake server). */
static int raw_listen(uint16_t *port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	IT_CHECK(l >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	IT_CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 8) == 0);
	socklen_t al = sizeof(a);
	IT_CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0);
	*port = ntohs(a.sin_port);
	return l;
}

enum fake { FAKE_DECLINE, FAKE_RESET };

/* The client writes before the fake server answers; then the answer decides. */
static void fake_round(enum fake kind, int l, uint16_t port)
{
	int c = it_connect(false, port);
	IT_CHECK(c >= 0);
	static uint8_t b[N], r[N];
	pattern(b, N, 7);
	IT_CHECK(smcr_send(c, b, N, 0) == N);
	int s = accept(l, NULL, NULL);
	IT_CHECK(s >= 0);
	uint8_t m[CLC_MSG_MAX_LEN];
	size_t n = it_raw_read_clc(s, m, sizeof(m), 10000);
	struct clc_msg got;
	IT_CHECK(clc_decode(m, n, &got) == 0 && got.type == CLC_PROPOSAL);
	if (kind == FAKE_DECLINE) {
		struct clc_msg d;
		memset(&d, 0, sizeof(d));
		d.type = CLC_DECLINE;
		d.decline.f.version = 1;
		d.decline.diag = 0x03070000;
		n = it_clc_enc(&d, m, sizeof(m));
		it_raw_write(s, m, n);
		/* the client's bytes follow its Proposal on TCP, exactly */
		size_t have = 0;
		while (have < N) {
			ssize_t k = recv(s, r + have, N - have, 0);
			IT_CHECK(k > 0);
			have += (size_t)k;
		}
		IT_CHECK(memcmp(b, r, N) == 0);
		it_raw_write(s, "back", 4);
		char k[4];
		IT_CHECK(it_read_all(c, k, 4) && !memcmp(k, "back", 4));
		struct smcr_info in;
		IT_CHECK(it_info(c, &in) && in.mode == SMCR_MODE_TCP &&
			 in.peer_reason == 0x03070000);
		/* nothing more in either direction */
		IT_CHECK(smcr_shutdown(c, SHUT_WR) == 0);
		IT_CHECK(recv(s, r, 1, 0) == 0);
	} else {
		struct linger lg = { 1, 0 };
		IT_CHECK(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
		close(s);
		s = -1;
		char k;
		errno = 0;
		IT_CHECK(smcr_recv(c, &k, 1, 0) == -1 && errno == ECONNRESET);
	}
	IT_CHECK(smcr_close(c) == 0);
	if (s >= 0)
		close(s);
	IT_CHECK(it_engine_conns_gone());
}

static int fake_server(void *arg)
{
	enum fake kind = (enum fake)(intptr_t)arg;
	it_child_env(1);
	it_rules("use smc both * *");
	atomic_store(&sock_early_connect, true);
	uint16_t port;
	int l = raw_listen(&port);
	int fds0 = -1;
	/* the first round makes the engine: the others add nothing */
	for (int round = 0; round < 3; round++) {
		fake_round(kind, l, port);
		int n = settled_fds();
		if (round == 0)
			fds0 = n;
		IT_CHECK(n == fds0);
	}
	close(l);
	return 0;
}

static void test_decline_keeps_bytes(void **state)
{
	(void)state;
	assert_int_equal(it_wait(it_fork(fake_server, (void *)(intptr_t)FAKE_DECLINE), 60000),
			 0);
}

static void test_reset(void **state)
{
	(void)state;
	assert_int_equal(it_wait(it_fork(fake_server, (void *)(intptr_t)FAKE_RESET), 60000), 0);
}

int main(void)
{
	it_emu_port_env();
	if (getenv("IT_FILTER"))
		cmocka_set_test_filter(getenv("IT_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self_connect),
		cmocka_unit_test(test_decline_keeps_bytes),
		cmocka_unit_test(test_reset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
