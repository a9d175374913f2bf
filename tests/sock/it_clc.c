/* it_clc.c: fake CLC peers against the smcr socket layer (docs/protocol/procedures.md 2.2-2.4,
 * docs/protocol/wire-formats.md 2-5; docs/design/engine-decisions.md test list "each decline path"
 * and "a fake peer sending malformed CLC"). The test process itself is the fake: plain libc sockets
 * and the wire codecs, writing exactly the bytes each case needs.
 *
 * Fake clients against an smcr server (a child with a blocking accept loop):
 *   malformed header, a message of the wrong type, a truncated Proposal, a Proposal then
 *   silence: each is dropped (never accepted), and the server goes on to serve the next;
 *   a Proposal with a foreign IP prefix (Decline DIFFPREFIX), one offering only SMC-D
 *   (Decline), a Decline as first message: each falls back to TCP with the reason recorded
 *   and the bytes after the CLC exchange delivered as data.
 * Fake servers against an smcr client (a child per case):
 *   a Decline (fallback, peer reason), a malformed answer (connect fails EPROTO), silence
 *   (connect fails ETIMEDOUT), a reuse Accept naming no link group (the client declines
 *   SYNCERR with the out-of-sync flag and falls back), a first-contact Accept whose QP
 *   nobody serves (the client declines and falls back). */
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
	struct it_echo_rec srv; /* the connections the server accepted */
	_Atomic int cli_errno, cli_mode;
	_Atomic uint32_t cli_local, cli_peer;
};
static struct shared *sh;

/* ---- raw helpers (parent = the fake) ---- */

/* The peer ended the connection (EOF or reset) within timeout_ms. */
static void raw_expect_closed(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint8_t b[2048];
	for (;;) {
		assert_int_equal(poll(&p, 1, timeout_ms), 1);
		ssize_t n = read(fd, b, sizeof(b));
		if (n <= 0)
			return;
	}
}

static int server(void *arg)
{
	return it_echo_server(lfd, &sh->srv, (int)(intptr_t)arg);
}

/* A real smcr client: must be served over SMC-R after the fakes. */
static int real_client(void *arg)
{
	(void)arg;
	return it_real_client(lfd, port);
}

/* A fake client whose CLC fails in a way the server must drop. */
static void fake_dropped(const uint8_t *bytes, size_t n, bool close_after)
{
	int fd = it_raw_connect(port);
	it_raw_write(fd, bytes, n);
	if (close_after) {
		shutdown(fd, SHUT_WR);
	}
	raw_expect_closed(fd, 5000);
	close(fd);
}

static void test_fake_clients(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	setenv("SMCR_CLC_WAIT_MS", "300", 1);
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	/* 3 fallbacks + 1 real client are accepted; the 4 dropped ones never are */
	pid_t s = it_fork(server, (void *)(intptr_t)4);
	uint8_t b[CLC_MSG_MAX_LEN];

	/* 1. malformed: eyecatcher, type 1, length 8 (below a Proposal's minimum) */
	static const uint8_t bad_len[] = { 0xE2, 0xD4, 0xC3, 0xD9, 0x01, 0x00, 0x08, 0x10 };
	fake_dropped(bad_len, sizeof(bad_len), false);
	/* 2. a Confirm where a Proposal must come (well-formed bytes of the wrong type) */
	struct clc_msg m;
	memset(&m, 0, sizeof(m));
	m.type = CLC_CONFIRM;
	m.accept.f.version = 1;
	m.accept.qpn = 1;
	m.accept.token = 1;
	m.accept.rmbe_idx = 1;
	m.accept.mtu_code = 5;
	size_t n = it_clc_enc(&m, b, sizeof(b));
	fake_dropped(b, n, false);
	/* 3. a truncated Proposal, then EOF */
	n = it_clc_proposal(b, sizeof(b), 0x4242, 99, 0x7f000000, 8, CLC_PATH_R);
	fake_dropped(b, n - 10, true);
	/* 4. a valid Proposal, then nothing: the server times out waiting for the Confirm */
	int fd = it_raw_connect(port);
	it_raw_write(fd, b, n);
	uint8_t ans[CLC_MSG_MAX_LEN];
	size_t an = it_raw_read_clc(fd, ans, sizeof(ans), 5000);
	struct clc_msg got;
	assert_int_equal(clc_decode(ans, an, &got), 0);
	assert_int_equal(got.type, CLC_ACCEPT);
	raw_expect_closed(fd, 5000);
	close(fd);

	/* 5. foreign IP prefix: Decline DIFFPREFIX, then TCP with the data after it */
	fd = it_raw_connect(port);
	n = it_clc_proposal(b, sizeof(b), 0x4242, 99, 0x0a0a0000, 16, CLC_PATH_R);
	it_raw_write(fd, b, n);
	an = it_raw_read_clc(fd, ans, sizeof(ans), 5000);
	assert_int_equal(clc_decode(ans, an, &got), 0);
	assert_int_equal(got.type, CLC_DECLINE);
	assert_int_equal(got.decline.diag, 0x03070000);
	it_raw_write(fd, "fb-01", 5);
	char echo[5];
	assert_int_equal(read(fd, echo, 5), 5);
	assert_memory_equal(echo, "fb-01", 5);
	close(fd);
	/* 6. a Proposal offering only SMC-D: Decline, then TCP */
	fd = it_raw_connect(port);
	n = it_clc_proposal(b, sizeof(b), 0x4242, 99, 0x7f000000, 8, CLC_PATH_D);
	it_raw_write(fd, b, n);
	an = it_raw_read_clc(fd, ans, sizeof(ans), 5000);
	assert_int_equal(clc_decode(ans, an, &got), 0);
	assert_int_equal(got.type, CLC_DECLINE);
	assert_true(got.decline.diag != 0);
	uint32_t smcd_diag = got.decline.diag;
	it_raw_write(fd, "fb-02", 5);
	assert_int_equal(read(fd, echo, 5), 5);
	close(fd);
	/* 7. a Decline as the first message (a client without a device) */
	fd = it_raw_connect(port);
	memset(&m, 0, sizeof(m));
	m.type = CLC_DECLINE;
	m.decline.f.version = 1;
	m.decline.diag = 0x03030002;
	n = it_clc_enc(&m, b, sizeof(b));
	it_raw_write(fd, b, n);
	it_raw_write(fd, "fb-03", 5);
	assert_int_equal(read(fd, echo, 5), 5);
	assert_memory_equal(echo, "fb-03", 5);
	close(fd);

	/* 8. the server still serves a real client over SMC-R */
	pid_t c = it_fork(real_client, NULL);
	assert_int_equal(it_wait(c, 20000), 0);
	assert_int_equal(it_wait(s, 20000), 0);
	smcr_close(lfd);
	unsetenv("SMCR_CLC_WAIT_MS");

	assert_int_equal(sh->srv.n, 4);
	assert_int_equal(sh->srv.mode[0], SMCR_MODE_TCP);
	assert_int_equal(sh->srv.local[0], 0x03070000);
	assert_memory_equal(sh->srv.data[0], "fb-01", 5);
	assert_int_equal(sh->srv.mode[1], SMCR_MODE_TCP);
	assert_int_equal(sh->srv.local[1], smcd_diag);
	assert_int_equal(sh->srv.mode[2], SMCR_MODE_TCP);
	assert_int_equal(sh->srv.local[2], SMCR_REASON_PEERDECL);
	assert_int_equal(sh->srv.peer[2], 0x03030002);
	assert_memory_equal(sh->srv.data[2], "fb-03", 5);
	assert_int_equal(sh->srv.mode[3], SMCR_MODE_SMCR);
	assert_memory_equal(sh->srv.data[3], "real!", 5);
}

/* ---- fake servers ---- */

enum fake_srv {
	FS_DECLINE,
	FS_MALFORMED,
	FS_SILENT,
	FS_REUSE_UNKNOWN,
	FS_DEAD_QP,
};

static int fs_client(void *arg)
{
	enum fake_srv kind = (enum fake_srv)(intptr_t)arg;
	it_child_env(1);
	it_rules("use smc client * *");
	int fd = smcr_socket(AF_INET, SOCK_STREAM, 0);
	IT_CHECK(fd >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int rc = smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	sh->cli_errno = rc < 0 ? errno : 0;
	if (rc < 0) {
		smcr_close(fd);
		return 0;
	}
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	sh->cli_mode = in.mode;
	sh->cli_local = in.local_reason;
	sh->cli_peer = in.peer_reason;
	if (in.mode == SMCR_MODE_TCP) {
		char b[5];
		IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "tcp!!", 5) == 0);
		IT_CHECK(it_write_all(fd, "ok", 2));
	}
	smcr_close(fd);
	(void)kind;
	return 0;
}

static struct clc_msg fake_accept(bool first)
{
	struct clc_msg m;
	memset(&m, 0, sizeof(m));
	m.type = CLC_ACCEPT;
	m.accept.f.version = 1;
	m.accept.first_contact = first;
	m.accept.peer_id.instance = 0x5151;
	m.accept.gid.b[10] = 0xff;
	m.accept.gid.b[11] = 0xff;
	m.accept.gid.b[12] = 127;
	m.accept.gid.b[15] = 98; /* an address where no device listens */
	m.accept.qpn = 0x123;
	m.accept.rkey = 0x77;
	m.accept.rmbe_idx = 1;
	m.accept.token = 0x1234;
	m.accept.rmbe_size_code = 2;
	m.accept.mtu_code = 5;
	m.accept.rmb_vaddr = 0x10000;
	m.accept.psn = 0x42;
	return m;
}

static void run_fake_server(enum fake_srv kind)
{
	memset(sh, 0, sizeof(*sh));
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sl), 0);
	assert_int_equal(listen(l, 4), 0);
	getsockname(l, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	pid_t c = it_fork(fs_client, (void *)(intptr_t)kind);
	int fd = accept(l, NULL, NULL);
	assert_true(fd >= 0);
	close(l);
	uint8_t b[CLC_MSG_MAX_LEN];
	size_t n = it_raw_read_clc(fd, b, sizeof(b), 5000);
	struct clc_msg got;
	assert_int_equal(clc_decode(b, n, &got), 0);
	assert_int_equal(got.type, CLC_PROPOSAL);
	assert_true(got.proposal.offers_smcr_v1);
	struct clc_msg m;
	switch (kind) {
	case FS_DECLINE:
		memset(&m, 0, sizeof(m));
		m.type = CLC_DECLINE;
		m.decline.f.version = 1;
		m.decline.diag = 0x03070000;
		n = it_clc_enc(&m, b, sizeof(b));
		it_raw_write(fd, b, n);
		break;
	case FS_MALFORMED: {
		/* an Accept with a length of 60: framing the client cannot parse */
		m = fake_accept(true);
		n = it_clc_enc(&m, b, sizeof(b));
		b[5] = 0;
		b[6] = 60;
		it_raw_write(fd, b, 60);
		break;
	}
	case FS_SILENT:
		break;
	case FS_REUSE_UNKNOWN:
	case FS_DEAD_QP:
		m = fake_accept(kind == FS_DEAD_QP);
		n = it_clc_enc(&m, b, sizeof(b));
		it_raw_write(fd, b, n);
		/* first contact: the client answers with its Confirm, then waits for CONFIRM
		 * LINK on a QP nobody serves, and declines */
		n = it_raw_read_clc(fd, b, sizeof(b), 10000);
		if (kind == FS_DEAD_QP) {
			assert_int_equal(clc_decode(b, n, &got), 0);
			assert_int_equal(got.type, CLC_CONFIRM);
			n = it_raw_read_clc(fd, b, sizeof(b), 10000);
		}
		assert_int_equal(clc_decode(b, n, &got), 0);
		assert_int_equal(got.type, CLC_DECLINE);
		if (kind == FS_REUSE_UNKNOWN) {
			assert_int_equal(got.decline.diag, 0x04000000); /* SYNCERR */
			assert_true(got.decline.out_of_sync);
		} else {
			assert_true(got.decline.diag != 0);
		}
		break;
	}
	if (kind == FS_DECLINE || kind == FS_REUSE_UNKNOWN || kind == FS_DEAD_QP) {
		it_raw_write(fd, "tcp!!", 5);
		char ok[2];
		struct pollfd p = { .fd = fd, .events = POLLIN };
		assert_int_equal(poll(&p, 1, 5000), 1);
		assert_int_equal(read(fd, ok, 2), 2);
		assert_memory_equal(ok, "ok", 2);
	}
	assert_int_equal(it_wait(c, 20000), 0);
	close(fd);
}

static void test_fake_server_declines(void **state)
{
	(void)state;
	run_fake_server(FS_DECLINE);
	assert_int_equal(sh->cli_errno, 0);
	assert_int_equal(sh->cli_mode, SMCR_MODE_TCP);
	assert_int_equal(sh->cli_local, SMCR_REASON_PEERDECL);
	assert_int_equal(sh->cli_peer, 0x03070000);
}

static void test_fake_server_malformed_accept(void **state)
{
	(void)state;
	run_fake_server(FS_MALFORMED);
	assert_int_equal(sh->cli_errno, EPROTO);
}

static void test_fake_server_silent(void **state)
{
	(void)state;
	setenv("SMCR_CLC_WAIT_MS", "300", 1);
	run_fake_server(FS_SILENT);
	unsetenv("SMCR_CLC_WAIT_MS");
	assert_int_equal(sh->cli_errno, ETIMEDOUT);
}

static void test_fake_server_reuse_unknown_lg(void **state)
{
	(void)state;
	run_fake_server(FS_REUSE_UNKNOWN);
	assert_int_equal(sh->cli_errno, 0);
	assert_int_equal(sh->cli_mode, SMCR_MODE_TCP);
	assert_int_equal(sh->cli_local, 0x04000000);
}

static void test_fake_server_dead_qp(void **state)
{
	(void)state;
	setenv("SMCR_LLC_WAIT_FIRST_MS", "300", 1);
	setenv("SMCR_CLC_WAIT_SHORT_MS", "100", 1);
	run_fake_server(FS_DEAD_QP);
	unsetenv("SMCR_LLC_WAIT_FIRST_MS");
	unsetenv("SMCR_CLC_WAIT_SHORT_MS");
	assert_int_equal(sh->cli_errno, 0);
	assert_int_equal(sh->cli_mode, SMCR_MODE_TCP);
	assert_true(sh->cli_local != 0);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fake_clients),
		cmocka_unit_test(test_fake_server_declines),
		cmocka_unit_test(test_fake_server_malformed_accept),
		cmocka_unit_test(test_fake_server_silent),
		cmocka_unit_test(test_fake_server_reuse_unknown_lg),
		cmocka_unit_test(test_fake_server_dead_qp),
	};
	return IT_MAIN(tests);
}
