/* test_bpf_tfo_cookie.c: the hard cases of src/bpf/smcr_opt.bpf.c, over 1000 connections
 * each, both ends always agreeing (docs/protocol/procedures.md 2.1):
 *  - syncookies forced (net.ipv4.tcp_syncookies=2): never echo in cookie mode (R3);
 *  - every first SYN-ACK dropped (nft, in the test's namespace): retransmits repeat the
 *    echo from the request's saved SYN (R2);
 *  - TCP Fast Open with cookies, every first SYN-ACK dropped: the TFO child decides after
 *    its SYN-ACK exists, retransmits repeat the decision from the echo record (R5);
 *  - a second program taking all SYN-ACK option space: the server never believes it
 *    echoed (R4).
 * Needs root, nftables; exits 77 (skipped) otherwise. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <bpf/libbpf.h>

#include "bpf/abi.h"
#include "bpf/optin.h"
#include "lib/bpfenv.h"
#include "lib/bpfpeers.h"

#define N 1000

static struct bpfenv env;

/* Drops the first SYN-ACK of every connection leaving this namespace. */
static const char nft_drop_first_synack[] =
    "table inet smcrt {\n"
    "  set seen4 { type ipv4_addr . inet_service; size 65535; flags dynamic; }\n"
    "  chain out {\n"
    "    type filter hook output priority 0; policy accept;\n"
    "    tcp flags & (syn|ack) == (syn|ack) ip daddr . tcp dport @seen4 accept\n"
    "    tcp flags & (syn|ack) == (syn|ack) add @seen4 { ip daddr . tcp dport } "
    "counter drop\n"
    "  }\n"
    "}\n";

static void netns_with(const char *tag, char *ns, size_t n, const char *sysctls)
{
	assert_int_equal(bpfenv_netns(&env, tag, ns, n), 0);
	/* No syncookies from a full queue: 1000 half-open connections at once are expected. */
	assert_int_equal(bpfenv_sh("ip netns exec %s sysctl -qw net.ipv4.tcp_max_syn_backlog=8192 "
	                           "net.core.somaxconn=8192 %s",
	                           ns, sysctls),
	                 0);
}

static void nft_drop(const char *ns)
{
	char path[] = "/tmp/smcr-nft-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, nft_drop_first_synack, sizeof(nft_drop_first_synack) - 1),
	                 (ssize_t)(sizeof(nft_drop_first_synack) - 1));
	close(fd);
	int rc = bpfenv_sh("ip netns exec %s nft -f %s", ns, path);
	unlink(path);
	assert_int_equal(rc, 0);
}

static long nft_dropped(const char *ns)
{
	char out[4096];
	const char *p;

	assert_int_equal(bpfenv_sh_out(out, sizeof(out),
	                               "ip netns exec %s nft list chain inet "
	                               "smcrt out",
	                               ns),
	                 0);
	p = strstr(out, "counter packets ");
	assert_non_null(p);
	return strtol(p + 16, NULL, 10);
}

static void test_syncookies_forced(void **state)
{
	(void)state;
	char ns[64];
	struct srv_cfg s = {
	    .family = AF_INET, .addr = "127.0.0.1", .port = 7101, .nlisteners = 1, .optin = 1};
	struct cli_cfg c = {.family = AF_INET, .addr = "127.0.0.1", .port = 7101, .optin = 1};
	struct outcome o;

	netns_with("c", ns, sizeof(ns), "net.ipv4.tcp_syncookies=2");
	peers_run(&env, &s, (struct side){1, ns}, &c, (struct side){1, ns}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_PEER_NO, SMCR_OPTIN_SYNCOOKIE);
}

static void test_first_synack_dropped(void **state)
{
	(void)state;
	char ns[64];
	struct srv_cfg s = {
	    .family = AF_INET, .addr = "127.0.0.1", .port = 7102, .nlisteners = 1, .optin = 1};
	struct cli_cfg c = {
	    .family = AF_INET, .addr = "127.0.0.1", .port = 7102, .optin = 1, .parallel = 1};
	struct outcome o;

	netns_with("d", ns, sizeof(ns), "net.ipv4.tcp_syncookies=0");
	nft_drop(ns);
	peers_run(&env, &s, (struct side){1, ns}, &c, (struct side){1, ns}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_SMC, SMCR_OPTIN_SMC);
	assert_true(nft_dropped(ns) >= N);
}

static void test_tfo(void **state)
{
	(void)state;
	char ns[64];
	struct srv_cfg s = {.family = AF_INET,
	                    .addr = "127.0.0.1",
	                    .port = 7103,
	                    .nlisteners = 1,
	                    .optin = 1,
	                    .fastopen = 4096};
	struct cli_cfg c = {.family = AF_INET,
	                    .addr = "127.0.0.1",
	                    .port = 7103,
	                    .optin = 1,
	                    .fastopen = 1,
	                    .count = 1};
	struct outcome o;
	struct peer_results *r;

	netns_with("t", ns, sizeof(ns), "net.ipv4.tcp_syncookies=0 net.ipv4.tcp_fastopen=3");
	/* One connection first: the client gets its Fast Open cookie (the SYN-ACK carries
	 * the cookie and our option: 40 bytes of options exactly). */
	s.count = 1;
	peers_run(&env, &s, (struct side){1, ns}, &c, (struct side){1, ns}, &o);
	peers_expect_all(&o, 1, SMCR_OPTIN_SMC, SMCR_OPTIN_SMC);

	/* Then 1000 at once with data in the SYN, nothing dropped. */
	s.count = 0;
	c.count = N;
	c.parallel = 1;
	peers_run(&env, &s, (struct side){1, ns}, &c, (struct side){1, ns}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_SMC, SMCR_OPTIN_SMC);

	/* And 1000 at once with every first SYN-ACK dropped: TFO SYN-ACK retransmits. To see
	 * that they were Fast Open children, read the server flags from a run of our own. */
	nft_drop(ns);
	r = bpfenv_shared(sizeof(*r));
	assert_non_null(r);
	s.count = 0;
	c.count = N;
	{
		int pfd[2];
		assert_int_equal(pipe(pfd), 0);
		s.res = c.res = r;
		s.ready_fd = pfd[1];
		c.ready_fd = pfd[0];
		s.count = N;
		s.timeout_ms = c.timeout_ms = 20000;
		pid_t sp = bpfenv_spawn(&env, 1, ns, peer_server, &s);
		pid_t cp = bpfenv_spawn(&env, 1, ns, peer_client, &c);
		close(pfd[0]);
		close(pfd[1]);
		int crc = bpfenv_wait(cp, 30000), src = bpfenv_wait(sp, 30000);
		if (crc || src)
			fprintf(stderr, "peers: %d %d %s\n", crc, src, r->err);
		assert_int_equal(crc, 0);
		assert_int_equal(src, 0);
	}
	int tfo = 0, smc_srv = 0, smc_cli = 0;
	for (int i = 0; i < r->nsrv; i++) {
		tfo += !!(r->srv[i].flags & SMCR_F_TFO);
		smc_srv += r->srv[i].result == SMCR_OPTIN_SMC;
	}
	for (int i = 0; i < r->ncli; i++)
		smc_cli += r->cli[i].result == SMCR_OPTIN_SMC;
	fprintf(stderr, "tfo children %d/%d, smc server %d client %d, SYN-ACKs dropped %ld\n", tfo,
	        r->nsrv, smc_srv, smc_cli, nft_dropped(ns));
	assert_true(tfo >= N * 9 / 10); /* the case really is Fast Open */
	assert_int_equal(smc_srv, N);
	assert_int_equal(smc_cli, N);
	assert_true(nft_dropped(ns) >= N);
	bpfenv_unshared(r, sizeof(*r));
	/* The same through peers_run, which pairs every connection's two ends. */
	s.res = c.res = NULL;
	s.count = 0;
	s.port = c.port = 7104;
	peers_run(&env, &s, (struct side){1, ns}, &c, (struct side){1, ns}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_SMC, SMCR_OPTIN_SMC);
}

/* A second sock_ops program in a child cgroup takes all SYN-ACK option space before
 * ours runs: our reserve fails, the server must not believe it echoed. */
static void test_synack_no_space(void **state)
{
	(void)state;
	char ns[64], sub[700], obj[512];
	struct bpf_object *bo;
	struct bpf_program *prog;
	struct bpf_link *link;
	int cgfd;
	struct srv_cfg s = {
	    .family = AF_INET, .addr = "127.0.0.1", .port = 7105, .nlisteners = 1, .optin = 1};
	struct cli_cfg c = {.family = AF_INET, .addr = "127.0.0.1", .port = 7105, .optin = 1};
	struct outcome o;

	netns_with("h", ns, sizeof(ns), "net.ipv4.tcp_syncookies=0");
	snprintf(sub, sizeof(sub), "%s/sub", env.cg_in);
	assert_int_equal(mkdir(sub, 0755), 0);
	snprintf(obj, sizeof(obj), "%s/tests/bpf/hog.bpf.o", getenv("SMCR_BINARY_DIR"));
	bo = bpf_object__open_file(obj, NULL);
	assert_non_null(bo);
	assert_int_equal(bpf_object__load(bo), 0);
	prog = bpf_object__find_program_by_name(bo, "smcr_test_hog");
	assert_non_null(prog);
	cgfd = open(sub, O_RDONLY | O_DIRECTORY);
	assert_true(cgfd >= 0);
	link = bpf_program__attach_cgroup(prog, cgfd);
	assert_non_null(link);

	peers_run(&env, &s, (struct side){2, ns}, &c, (struct side){1, ns}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_PEER_NO, SMCR_OPTIN_NO_SPACE);

	bpf_link__destroy(link); /* unpinned: detached now */
	bpf_object__close(bo);
	close(cgfd);
}

static int group_setup(void **state)
{
	(void)state;
	return bpfenv_setup(&env, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_syncookies_forced),
	    cmocka_unit_test(test_first_synack_dropped),
	    cmocka_unit_test(test_tfo),
	    cmocka_unit_test(test_synack_no_space),
	};
	return BPFENV_MAIN(tests, "nft --version", "nftables (nft)", group_setup, bpfenv_group_teardown);
}
