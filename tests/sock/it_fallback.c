/* it_fallback.c: TCP fallback on the same connection (docs/protocol/procedures.md 2.4;
 * docs/design/engine-decisions.md test list): a plain TCP peer on either side, the rules choosing
 * TCP, and the Decline paths of a process without a usable device, each with correct data both ways
 * and the reasons recorded (SOL_SMCR query); smc-only refusing the fallback. The fd of a
 * fallen-back connection is the TCP socket itself (SO_DOMAIN AF_INET, SO_PROTOCOL TCP). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>

#include "itlib.h"

static int lfd;
static uint16_t port;

struct side {
	int mode;
	uint32_t local, peer;
	int domain;
};
struct shared {
	struct side srv, cli;
	_Atomic int cli_errno;
	_Atomic int cli_done; /* the dropped client saw its reset */
};
static struct shared *sh;

/* Per-test configuration of the two children. */
struct cfg {
	const char *srv_rules, *cli_rules;
	const char *srv_devices, *cli_devices; /* NULL: the default device */
	bool srv_plain, cli_plain;	       /* plain libc sockets, no smcr at all */
	bool cli_silent;		       /* plain client that waits for the server first */
	bool expect_refused;		       /* client connect must fail */
	bool expect_dropped;		       /* server drops the client */
};
static struct cfg cfg;

static void record(int fd, struct side *s)
{
	struct smcr_info in;
	if (it_info(fd, &in)) {
		s->mode = in.mode;
		s->local = in.local_reason;
		s->peer = in.peer_reason;
	} else {
		s->mode = -1;
	}
	int dom = 0;
	socklen_t l = sizeof(dom);
	smcr_getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l);
	s->domain = dom;
}

/* The same exchange on any fd: the client speaks first unless silent. */
static void exchange(int fd, bool is_client)
{
	char buf[32];
	if (is_client) {
		if (!cfg.cli_silent)
			IT_CHECK(it_write_all(fd, "ping from client", 16));
		IT_CHECK(it_read_all(fd, buf, 16));
		IT_CHECK(memcmp(buf, "pong from server", 16) == 0);
		if (cfg.cli_silent)
			IT_CHECK(it_write_all(fd, "ping from client", 16));
		IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
		IT_CHECK(smcr_recv(fd, buf, 1, 0) == 0);
	} else {
		if (cfg.cli_silent) {
			IT_CHECK(it_write_all(fd, "pong from server", 16));
			IT_CHECK(it_read_all(fd, buf, 16));
		} else {
			IT_CHECK(it_read_all(fd, buf, 16));
			IT_CHECK(it_write_all(fd, "pong from server", 16));
		}
		IT_CHECK(memcmp(buf, "ping from client", 16) == 0);
		IT_CHECK(smcr_recv(fd, buf, 1, 0) == 0);
		IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
	}
}

static int server(void *a)
{
	(void)a;
	it_child_env(0);
	if (cfg.srv_devices)
		setenv("SMCR_DEVICES", cfg.srv_devices, 1);
	it_rules(cfg.srv_rules);
	int fd;
	if (cfg.srv_plain) {
		fd = accept(lfd, NULL, NULL); /* libc: the listener is a plain socket here */
	} else {
		if (cfg.expect_dropped) {
			/* A dropped client is never handed to the program
			 * (docs/protocol/procedures.md 2.3; the accept queue,
			 * docs/parts/connect.md): a non-blocking accept keeps saying EAGAIN and the
			 * listener never shows POLLIN, while the client's bytes arrive (not CLC:
			 * fallback, which smc-only turns into a reset). */
			int fl = smcr_fcntl(lfd, F_GETFL);
			smcr_fcntl(lfd, F_SETFL, fl | O_NONBLOCK);
			struct pollfd p = { .fd = lfd, .events = POLLIN };
			IT_CHECK(poll(&p, 1, 5000) == 1); /* the kernel's listener: connected */
			fd = smcr_accept(lfd, NULL, NULL);
			IT_CHECK(fd < 0 && errno == EAGAIN);
			IT_CHECK(poll(&p, 1, 1500) == 0); /* the queue's placeholder: nothing */
			fd = smcr_accept(lfd, NULL, NULL);
			IT_CHECK(fd < 0 && errno == EAGAIN);
			sh->srv.mode = SMCR_MODE_FAILED; /* what the dropped client was */
			while (!sh->cli_done)
				usleep(1000);
			smcr_close(fd);
			return 0;
		}
		fd = smcr_accept(lfd, NULL, NULL);
	}
	IT_CHECK(fd >= 0);
	smcr_close(lfd);
	record(fd, &sh->srv);
	if (cfg.expect_refused) {
		/* the client gives up on the connection: EOF or reset, nothing else */
		char c;
		IT_CHECK(smcr_recv(fd, &c, 1, 0) <= 0);
		smcr_close(fd);
		return 0;
	}
	exchange(fd, false);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static int client(void *a)
{
	(void)a;
	it_child_env(1);
	if (cfg.cli_devices)
		setenv("SMCR_DEVICES", cfg.cli_devices, 1);
	it_rules(cfg.cli_rules);
	smcr_close(lfd);
	int fd;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (cfg.cli_plain) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		IT_CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	} else {
		fd = smcr_socket(AF_INET, SOCK_STREAM, 0);
		IT_CHECK(fd >= 0);
		if (smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			sh->cli_errno = errno;
			IT_CHECK(cfg.expect_refused);
			smcr_close(fd);
			return 0;
		}
		IT_CHECK(!cfg.expect_refused);
	}
	record(fd, &sh->cli);
	if (cfg.expect_dropped) {
		char c;
		IT_CHECK(it_write_all(fd, "ping from client", 16));
		ssize_t n = smcr_recv(fd, &c, 1, 0); /* the server resets the connection */
		IT_CHECK(n <= 0);
		sh->cli_done = 1;
		smcr_close(fd);
		return 0;
	}
	exchange(fd, true);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void run(void)
{
	memset(sh, 0, sizeof(*sh));
	it_rules(cfg.srv_rules);
	if (cfg.srv_plain) {
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t sl = sizeof(sa);
		assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sl), 0);
		assert_int_equal(listen(lfd, 8), 0);
		getsockname(lfd, (struct sockaddr *)&sa, &sl);
		port = ntohs(sa.sin_port);
	} else {
		lfd = it_listen(false, &port);
	}
	assert_true(lfd >= 0);
	assert_int_equal(it_run_pair(lfd, server, NULL, client, NULL, 20000), 0);
}

static void expect_tcp(const struct side *s, uint32_t local, uint32_t peer)
{
	assert_int_equal(s->mode, SMCR_MODE_TCP);
	assert_int_equal(s->domain, AF_INET); /* the program's fd is the TCP socket again */
	if (s->local != local || s->peer != peer)
		fail_msg("reasons local %s (0x%08x) peer %s (0x%08x), want local 0x%08x peer 0x%08x",
			 smcr_reason_name(s->local), s->local, smcr_reason_name(s->peer), s->peer,
			 local, peer);
}

static void test_plain_tcp_client_to_smcr_server(void **state)
{
	(void)state;
	cfg = (struct cfg){ .srv_rules = "use smc server * *", .cli_rules = "", .cli_plain = true };
	run();
	expect_tcp(&sh->srv, SMCR_REASON_PEERNOSMC, 0);
}

static void test_silent_plain_client_to_smcr_server(void **state)
{
	(void)state;
	/* a client that waits for the server to talk first: the first-byte wait ends, TCP */
	setenv("SMCR_SERVER_WAIT_MS", "200", 1);
	cfg = (struct cfg){ .srv_rules = "use smc server * *", .cli_rules = "", .cli_plain = true,
			    .cli_silent = true };
	run();
	unsetenv("SMCR_SERVER_WAIT_MS");
	expect_tcp(&sh->srv, SMCR_REASON_PEERNOSMC, 0);
}

static void test_smcr_client_to_plain_tcp_server(void **state)
{
	(void)state;
	/* no rule matches this destination: the default is TCP because the TCP-option
	 * discovery is not installed for this test's cgroup (discovery.h) */
	cfg = (struct cfg){ .srv_rules = "", .cli_rules = "use smc client * 10.0.0.0/8",
			    .srv_plain = true };
	run();
	expect_tcp(&sh->cli, SMCR_REASON_BPF_NOT_INSTALLED, 0);
}

static void test_rules_tcp_on_both_smcr_sides(void **state)
{
	(void)state;
	cfg = (struct cfg){ .srv_rules = "use tcp server * *", .cli_rules = "use tcp client * *" };
	run();
	expect_tcp(&sh->srv, SMCR_REASON_RULE_TCP, 0);
	expect_tcp(&sh->cli, SMCR_REASON_RULE_TCP, 0);
}

static void test_decline_server_without_device(void **state)
{
	(void)state;
	cfg = (struct cfg){ .srv_rules = "use smc both * *", .cli_rules = "use smc both * *",
			    .srv_devices = "no-such-provider" };
	run();
	/* the server declines the Proposal: NOSMCRDEV, both on TCP; the decliner's reason is
	 * its code, the other side's local reason PEERDECL as Linux records it */
	expect_tcp(&sh->srv, SMCR_REASON_NODEV, 0);
	expect_tcp(&sh->cli, SMCR_REASON_PEERDECL, SMCR_REASON_NODEV);
}

static void test_decline_client_without_device(void **state)
{
	(void)state;
	cfg = (struct cfg){ .srv_rules = "use smc both * *", .cli_rules = "use smc both * *",
			    .cli_devices = "no-such-provider" };
	run();
	/* the client's first CLC message is a Decline (docs/protocol/procedures.md 2.2) */
	expect_tcp(&sh->cli, SMCR_REASON_NODEV, 0);
	expect_tcp(&sh->srv, SMCR_REASON_PEERDECL, SMCR_REASON_NODEV);
}

static void test_smc_only_client_refuses_fallback(void **state)
{
	(void)state;
	cfg = (struct cfg){ .srv_rules = "use smc both * *", .cli_rules = "use smc-only client * *",
			    .srv_devices = "no-such-provider", .expect_refused = true };
	run();
	assert_int_equal(sh->cli_errno, ECONNREFUSED);
}

static void test_smc_only_server_drops_plain_client(void **state)
{
	(void)state;
	cfg = (struct cfg){ .srv_rules = "use smc-only server * *", .cli_rules = "",
			    .cli_plain = true, .expect_dropped = true };
	run();
	assert_int_equal(sh->srv.mode, SMCR_MODE_FAILED);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_tcp_client_to_smcr_server),
		cmocka_unit_test(test_silent_plain_client_to_smcr_server),
		cmocka_unit_test(test_smcr_client_to_plain_tcp_server),
		cmocka_unit_test(test_rules_tcp_on_both_smcr_sides),
		cmocka_unit_test(test_decline_server_without_device),
		cmocka_unit_test(test_decline_client_without_device),
		cmocka_unit_test(test_smc_only_client_refuses_fallback),
		cmocka_unit_test(test_smc_only_server_drops_plain_client),
	};
	return IT_MAIN(tests);
}
