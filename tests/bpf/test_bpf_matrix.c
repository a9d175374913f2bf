/* test_bpf_matrix.c: both ends of every connection agree on "SMC or plain TCP"
 * (docs/protocol/procedures.md 2.1; rules R1-R7 of src/bpf/smcr_opt.bpf.c), over 1000 connections
 * per case: both ends opted in, one end only, one end outside the covered cgroup, IPv4, IPv6,
 * v4-mapped, SO_REUSEPORT with all and with some listeners opted in, two network
 * namespaces over a veth pair, and opt-ins that come too late. Each result is also
 * checked against the outcome the case must have, with its reason.
 * Needs root; exits 77 (skipped) otherwise. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "bpf/abi.h"
#include "bpf/optin.h"
#include "lib/bpfenv.h"
#include "lib/bpfpeers.h"

#define N 1000

static struct bpfenv env;
static char ns_a[64], ns_b[64];

static struct srv_cfg srv4(uint16_t port, unsigned optin)
{
	struct srv_cfg s = {
	    .family = AF_INET, .addr = "127.0.0.1", .port = port, .nlisteners = 1, .optin = optin};
	return s;
}

static struct cli_cfg cli4(uint16_t port, int optin)
{
	struct cli_cfg c = {.family = AF_INET, .addr = "127.0.0.1", .port = port, .optin = optin};
	return c;
}

static void test_both_opted_in_v4(void **state)
{
	(void)state;
	struct srv_cfg s = srv4(7001, 1);
	struct cli_cfg c = cli4(7001, 1);
	struct outcome o;

	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_SMC, SMCR_OPTIN_SMC);
}

static void test_listener_only(void **state)
{
	(void)state;
	struct srv_cfg s = srv4(7002, 1);
	struct cli_cfg c = cli4(7002, 0);
	struct outcome o;

	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_NOT_REQUESTED, SMCR_OPTIN_PEER_NO);
}

static void test_client_only(void **state)
{
	(void)state;
	struct srv_cfg s = srv4(7003, 0);
	struct cli_cfg c = cli4(7003, 1);
	struct outcome o;

	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_PEER_NO, SMCR_OPTIN_NOT_REQUESTED);
}

static void test_client_outside_cgroup(void **state)
{
	(void)state;
	struct srv_cfg s = srv4(7004, 1);
	struct cli_cfg c = cli4(7004, 1);
	struct outcome o;
	struct peer_results *r;

	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){0, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_NOT_INSTALLED, SMCR_OPTIN_PEER_NO);
	(void)r;
}

static void test_server_outside_cgroup(void **state)
{
	(void)state;
	struct srv_cfg s = srv4(7005, 1);
	struct cli_cfg c = cli4(7005, 1);
	struct outcome o;

	peers_run(&env, &s, (struct side){0, ns_a}, &c, (struct side){1, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_PEER_NO, SMCR_OPTIN_NOT_INSTALLED);
}

static void test_both_outside_cgroup(void **state)
{
	(void)state;
	struct srv_cfg s = srv4(7006, 1);
	struct cli_cfg c = cli4(7006, 1);
	struct outcome o;

	peers_run(&env, &s, (struct side){0, ns_a}, &c, (struct side){0, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_NOT_INSTALLED, SMCR_OPTIN_NOT_INSTALLED);
}

static void test_ipv6(void **state)
{
	(void)state;
	struct srv_cfg s = {.family = AF_INET6,
	                    .v6only = 1,
	                    .addr = "::1",
	                    .port = 7007,
	                    .nlisteners = 1,
	                    .optin = 1};
	struct cli_cfg c = {.family = AF_INET6, .addr = "::1", .port = 7007, .optin = 1};
	struct outcome o;

	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_SMC, SMCR_OPTIN_SMC);
}

static void test_ipv6_client_only(void **state)
{
	(void)state;
	struct srv_cfg s = {.family = AF_INET6,
	                    .v6only = 1,
	                    .addr = "::1",
	                    .port = 7008,
	                    .nlisteners = 1,
	                    .optin = 0};
	struct cli_cfg c = {.family = AF_INET6, .addr = "::1", .port = 7008, .optin = 1};
	struct outcome o;

	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_PEER_NO, SMCR_OPTIN_NOT_REQUESTED);
}

/* A dual-stack IPv6 listener accepting IPv4 clients (v4-mapped addresses). */
static void test_v4_mapped(void **state)
{
	(void)state;
	struct srv_cfg s = {.family = AF_INET6,
	                    .v6only = 0,
	                    .addr = "::",
	                    .port = 7009,
	                    .nlisteners = 1,
	                    .optin = 1};
	struct cli_cfg c = cli4(7009, 1);
	struct outcome o;

	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_SMC, SMCR_OPTIN_SMC);
}

static void test_v4_mapped_listener_only(void **state)
{
	(void)state;
	struct srv_cfg s = {.family = AF_INET6,
	                    .v6only = 0,
	                    .addr = "::",
	                    .port = 7010,
	                    .nlisteners = 1,
	                    .optin = 1};
	struct cli_cfg c = cli4(7010, 0);
	struct outcome o;

	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_NOT_REQUESTED, SMCR_OPTIN_PEER_NO);
}

static void test_reuseport_all(void **state)
{
	(void)state;
	struct srv_cfg s = srv4(7011, 0xf);
	struct cli_cfg c = cli4(7011, 1);
	struct outcome o;

	s.nlisteners = 4;
	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_a}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_SMC, SMCR_OPTIN_SMC);
	for (int i = 0; i < 4; i++)
		assert_true(o.per_listener_smc[i] > 0); /* every listener got connections */
}

/* Listeners 0 and 1 opted in, 2 and 3 not: connections steered to the latter are plain
 * TCP on both ends, the others SMC. */
static void test_reuseport_some(void **state)
{
	(void)state;
	struct srv_cfg s = srv4(7012, 0x3);
	struct cli_cfg c = cli4(7012, 1);
	struct outcome o;

	s.nlisteners = 4;
	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_a}, &o);
	for (int i = 0; i < 2; i++) {
		assert_true(o.per_listener_smc[i] > 0);
		assert_int_equal(o.per_listener_plain[i], 0);
	}
	for (int i = 2; i < 4; i++) {
		assert_true(o.per_listener_plain[i] > 0);
		assert_int_equal(o.per_listener_smc[i], 0);
	}
	assert_int_equal(o.smc + o.plain, N);
	assert_int_equal(o.cli_counts[SMCR_OPTIN_SMC], o.smc);
	assert_int_equal(o.cli_counts[SMCR_OPTIN_PEER_NO], o.plain);
	assert_int_equal(o.srv_counts[SMCR_OPTIN_NOT_REQUESTED], o.plain);
}

static void test_veth_v4(void **state)
{
	(void)state;
	struct srv_cfg s = {
	    .family = AF_INET, .addr = "10.77.0.1", .port = 7013, .nlisteners = 1, .optin = 1};
	struct cli_cfg c = {.family = AF_INET, .addr = "10.77.0.1", .port = 7013, .optin = 1};
	struct outcome o;

	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_b}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_SMC, SMCR_OPTIN_SMC);
}

static void test_veth_v6_client_outside(void **state)
{
	(void)state;
	struct srv_cfg s = {.family = AF_INET6,
	                    .v6only = 1,
	                    .addr = "fd77::1",
	                    .port = 7014,
	                    .nlisteners = 1,
	                    .optin = 1};
	struct cli_cfg c = {.family = AF_INET6, .addr = "fd77::1", .port = 7014, .optin = 1};
	struct outcome o;

	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){1, ns_b}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_SMC, SMCR_OPTIN_SMC);
	peers_run(&env, &s, (struct side){1, ns_a}, &c, (struct side){0, ns_b}, &o);
	peers_expect_all(&o, N, SMCR_OPTIN_NOT_INSTALLED, SMCR_OPTIN_PEER_NO);
}

/* Opt-ins after listen() and after connect(): visible as TOO_LATE, plain TCP. */
struct late_res {
	int listener_result, child_result, client_result, client_flags;
	int err;
};

static int late_peer(void *arg)
{
	struct late_res *lr = arg;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(7015)};
	socklen_t len = sizeof(a);
	int one = 1, l, c, s;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, len) || listen(l, 16))
		return 1;
	if (smcr_optin_enable(l, NULL) != 0) /* after listen(): accepted, but too late */
		return 2;
	lr->listener_result = smcr_optin_result(l, NULL);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, len))
		return 3;
	if (smcr_optin_enable(c, NULL) != 0)
		return 4;
	s = accept(l, NULL, NULL);
	if (s < 0)
		return 5;
	struct smcr_optin_info info;
	lr->client_result = smcr_optin_result(c, &info);
	lr->client_flags = (int)info.flags;
	lr->child_result = smcr_optin_result(s, NULL);
	close(s);
	close(c);
	close(l);
	return 0;
}

static void test_too_late(void **state)
{
	(void)state;
	struct late_res *lr = bpfenv_shared(sizeof(*lr));

	assert_non_null(lr);
	pid_t p = bpfenv_spawn(&env, 1, ns_a, late_peer, lr);
	assert_int_equal(bpfenv_wait(p, 10000), 0);
	assert_string_equal(smcr_optin_name(lr->listener_result), "TOO_LATE");
	assert_string_equal(smcr_optin_name(lr->client_result), "TOO_LATE");
	assert_string_equal(smcr_optin_name(lr->child_result), "TOO_LATE");
	assert_true(lr->client_flags & SMCR_F_LATE);
	assert_false(lr->client_flags & SMCR_F_ARMED);
	bpfenv_unshared(lr, sizeof(*lr));
}

static int group_setup(void **state)
{
	(void)state;
	if (bpfenv_setup(&env, 1) != 0)
		return -1;
	return bpfenv_veth_pair(&env, ns_a, ns_b, sizeof(ns_a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_both_opted_in_v4),
	    cmocka_unit_test(test_listener_only),
	    cmocka_unit_test(test_client_only),
	    cmocka_unit_test(test_client_outside_cgroup),
	    cmocka_unit_test(test_server_outside_cgroup),
	    cmocka_unit_test(test_both_outside_cgroup),
	    cmocka_unit_test(test_ipv6),
	    cmocka_unit_test(test_ipv6_client_only),
	    cmocka_unit_test(test_v4_mapped),
	    cmocka_unit_test(test_v4_mapped_listener_only),
	    cmocka_unit_test(test_reuseport_all),
	    cmocka_unit_test(test_reuseport_some),
	    cmocka_unit_test(test_veth_v4),
	    cmocka_unit_test(test_veth_v6_client_outside),
	    cmocka_unit_test(test_too_late),
	};
	return BPFENV_MAIN(tests, NULL, NULL, group_setup, bpfenv_group_teardown);
}
