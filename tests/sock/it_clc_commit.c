/* it_clc_commit.c: a server that has sent its Accept is committed to SMC-R (RFC 7609 3.5;
 * docs/PROTOCOL.md §2.3–2.4 "commitment"): fallback to TCP is possible only before that point, while
 * the TCP stream still holds nothing but the client's first bytes. What the client sends in
 * place of its Confirm is CLC or nothing: anything else (random bytes, zeros, text) drops
 * the connection with a TCP reset, and the program never sees it nor those bytes.
 *
 * A Proposal that starts with the SMC-D eyecatcher but asks for SMC-R is not a plain TCP
 * client either (it spoke CLC): it is served or declined by the CLC rules, never taken for
 * stream data.
 *
 * The test process is the fake client (libc sockets and the wire codecs); an smcr server
 * child accepts in a loop and records what it got. A real smcr client comes last: it must
 * be the first and only connection the program accepted. */
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
#include <string.h>

#include "itlib.h"
#include "wire/clc.h"

static int lfd;
static uint16_t port;

struct shared {
	struct it_echo_rec srv; /* the connections the server program accepted */
};
static struct shared *sh;

/* The server ended the connection with a reset within timeout_ms (a fallback would keep it
 * open and echo; an orderly close would give EOF). */
static void raw_expect_reset(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint8_t b[256];
	for (;;) {
		assert_int_equal(poll(&p, 1, timeout_ms), 1);
		ssize_t n = read(fd, b, sizeof(b));
		if (n < 0) {
			assert_int_equal(errno, ECONNRESET);
			return;
		}
		assert_true(n > 0); /* EOF: not the reset the server owes */
	}
}

static int server(void *arg)
{
	return it_echo_server(lfd, &sh->srv, (int)(intptr_t)arg);
}

static int real_client(void *arg)
{
	(void)arg;
	return it_real_client(lfd, port);
}

/* A valid Proposal, the server's Accept read, then junk where the Confirm belongs. */
static void after_accept(const uint8_t *junk, size_t n)
{
	uint8_t b[CLC_MSG_MAX_LEN];
	size_t pn = it_clc_proposal(b, sizeof(b), 0x4343, 97, 0x7f000000, 8, CLC_PATH_R);
	int fd = it_raw_connect(port);
	it_raw_write(fd, b, pn);
	uint8_t ans[CLC_MSG_MAX_LEN];
	size_t an = it_raw_read_clc(fd, ans, sizeof(ans), 5000);
	struct clc_msg got;
	assert_int_equal(clc_decode(ans, an, &got), 0);
	assert_int_equal(got.type, CLC_ACCEPT);
	it_raw_write(fd, junk, n);
	raw_expect_reset(fd, 5000);
	close(fd);
}

static void test_junk_after_accept(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	setenv("SMCR_CLC_WAIT_MS", "300", 1);
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	pid_t s = it_fork(server, (void *)(intptr_t)1);

	uint8_t junk[68];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	it_fill_random(junk, sizeof(junk), &seed);
	junk[0] = 0x47; /* not 0xE2: a byte no CLC message starts with */
	after_accept(junk, sizeof(junk));
	memset(junk, 0, sizeof(junk));
	after_accept(junk, sizeof(junk));
	static const char text[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
	after_accept((const uint8_t *)text, sizeof(text) - 1);

	pid_t c = it_fork(real_client, NULL);
	assert_int_equal(it_wait(c, 20000), 0);
	assert_int_equal(it_wait(s, 20000), 0);
	smcr_close(lfd);
	unsetenv("SMCR_CLC_WAIT_MS");
	assert_int_equal(sh->srv.n, 1);
	assert_int_equal(sh->srv.mode[0], SMCR_MODE_SMCR);
	assert_memory_equal(sh->srv.data[0], "real!", 5);
}

/* The SMC-D eyecatcher at both ends of a Proposal that offers SMC-R: CLC, not stream
 * data. The server answers it with CLC (an Accept: SMC-R is offered), and junk after
 * that Accept resets as above; the program never sees the Proposal's bytes. */
static void test_smcd_eye_proposal(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	setenv("SMCR_CLC_WAIT_MS", "300", 1);
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	pid_t s = it_fork(server, (void *)(intptr_t)1);

	struct clc_msg m;
	memset(&m, 0, sizeof(m));
	m.type = CLC_PROPOSAL;
	clc_proposal_init(&m.proposal);
	m.proposal.f.eye = CLC_EYE_SMCD;
	m.proposal.f.trail = CLC_EYE_SMCD;
	m.proposal.peer_id.instance = 0x4444;
	m.proposal.gid.b[10] = 0xff;
	m.proposal.gid.b[11] = 0xff;
	m.proposal.gid.b[12] = 127;
	m.proposal.gid.b[15] = 96;
	m.proposal.ipv4_subnet = 0x7f000000;
	m.proposal.ipv4_prefix_len = 8;
	m.proposal.typev1 = CLC_PATH_R;
	uint8_t b[CLC_MSG_MAX_LEN];
	size_t n = it_clc_enc(&m, b, sizeof(b));
	assert_int_equal(b[3], 0xC4);
	int fd = it_raw_connect(port);
	it_raw_write(fd, b, n);
	uint8_t ans[CLC_MSG_MAX_LEN];
	size_t an = it_raw_read_clc(fd, ans, sizeof(ans), 5000);
	struct clc_msg got;
	assert_int_equal(clc_decode(ans, an, &got), 0);
	assert_true(got.type == CLC_ACCEPT || got.type == CLC_DECLINE);
	if (got.type == CLC_ACCEPT) {
		uint8_t z[68];
		memset(z, 0, sizeof(z));
		it_raw_write(fd, z, sizeof(z));
		raw_expect_reset(fd, 5000);
	}
	close(fd);

	pid_t c = it_fork(real_client, NULL);
	assert_int_equal(it_wait(c, 20000), 0);
	assert_int_equal(it_wait(s, 20000), 0);
	smcr_close(lfd);
	unsetenv("SMCR_CLC_WAIT_MS");
	assert_int_equal(sh->srv.n, 1);
	assert_int_equal(sh->srv.mode[0], SMCR_MODE_SMCR);
	assert_memory_equal(sh->srv.data[0], "real!", 5);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_junk_after_accept),
		cmocka_unit_test(test_smcd_eye_proposal),
	};
	return IT_MAIN(tests);
}
