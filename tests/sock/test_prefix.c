/* test_prefix.c: the cache of interface prefixes (src/sock/prefix.c, sock.h
 * sock_prefixes): the right prefix for an address, the cache expiring after
 * SOCK_PFX_TTL_NS, and a changed interface set picked up (in a network namespace the test
 * makes, with a veth pair: a new interface on a miss, a changed prefix length once the cache expired). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sock/sock.h"

static struct sockaddr_in v4(const char *a)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	inet_pton(AF_INET, a, &sa.sin_addr);
	return sa;
}

/* The prefix length found for address a with the given masked prefix, or -1 if none. */
static int plen_of(const char *a, const char *want_net)
{
	struct sockaddr_in sa = v4(a);
	struct core_ip_prefix p[CORE_MAX_PREFIXES];
	int n = sock_prefixes((struct sockaddr *)&sa, p, CORE_MAX_PREFIXES);
	struct sockaddr_in net = v4(want_net);
	for (int i = 0; i < n; i++)
		if (p[i].family == AF_INET && memcmp(p[i].addr, &net.sin_addr, 4) == 0)
			return p[i].len;
	return -1;
}

static void test_loopback_and_expiry(void **state)
{
	(void)state;
	assert_int_equal(plen_of("127.0.0.1", "127.0.0.0"), 8);
	uint64_t r = sock_prefix_refreshes();
	for (int i = 0; i < 100; i++)
		assert_int_equal(plen_of("127.0.0.1", "127.0.0.0"), 8);
	assert_int_equal(sock_prefix_refreshes(), r); /* served from the cache */
	usleep((useconds_t)(SOCK_PFX_TTL_NS / 1000 + 50000));
	assert_int_equal(plen_of("127.0.0.1", "127.0.0.0"), 8);
	assert_int_equal(sock_prefix_refreshes(), r + 1); /* expired: one new dump */
	/* an address on no interface: no prefix, and at most one dump per SOCK_PFX_MISS_NS */
	r = sock_prefix_refreshes();
	for (int i = 0; i < 50; i++)
		assert_int_equal(plen_of("192.0.2.77", "192.0.2.0"), -1);
	assert_true(sock_prefix_refreshes() <= r + 1);
}

/* An IPv4 peer of a dual-stack socket: its local address ::ffff:127.0.0.1 is looked up as
 * 127.0.0.1, and the prefix is an IPv4 one (the one an IPv4 client's Proposal carries). */
static void test_v4_mapped(void **state)
{
	(void)state;
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };
	assert_int_equal(inet_pton(AF_INET6, "::ffff:127.0.0.1", &sa.sin6_addr), 1);
	struct core_ip_prefix p[CORE_MAX_PREFIXES];
	int n = sock_prefixes((struct sockaddr *)&sa, p, CORE_MAX_PREFIXES);
	struct sockaddr_in net = v4("127.0.0.0");
	int found = 0;
	for (int i = 0; i < n; i++) {
		assert_int_equal(p[i].family, AF_INET);
		if (memcmp(p[i].addr, &net.sin_addr, 4) == 0 && p[i].len == 8)
			found++;
	}
	assert_int_equal(found, 1);
	/* a plain IPv6 address stays IPv6 */
	assert_int_equal(inet_pton(AF_INET6, "::1", &sa.sin6_addr), 1);
	n = sock_prefixes((struct sockaddr *)&sa, p, CORE_MAX_PREFIXES);
	for (int i = 0; i < n; i++)
		assert_int_equal(p[i].family, AF_INET6);
}

static int sh(const char *cmd)
{
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : 255;
}

/* In a child, in a new network namespace: 0 ok, 77 skipped, else the failed step. */
static int netns_child(void)
{
	if (unshare(CLONE_NEWNET) < 0)
		return 77;
	if (sh("ip link set lo up >/dev/null 2>&1") != 0 ||
	    sh("ip link add smcrpfx0 type veth peer name smcrpfx1 >/dev/null 2>&1") != 0)
		return 77;
	if (plen_of("10.77.1.5", "10.77.1.0") != -1)
		return 2; /* not there yet (this miss fills the cache) */
	if (sh("ip addr add 10.77.1.5/24 dev smcrpfx0 && ip link set smcrpfx0 up") != 0)
		return 3;
	/* a new address is a miss: picked up once the cache is older than the miss bound */
	usleep((useconds_t)(SOCK_PFX_MISS_NS / 1000 + 20000));
	if (plen_of("10.77.1.5", "10.77.1.0") != 24)
		return 4;
	/* the same address with another prefix: a hit, so the old one until the TTL */
	if (sh("ip addr del 10.77.1.5/24 dev smcrpfx0 && ip addr add 10.77.1.5/16 dev smcrpfx0") != 0)
		return 5;
	if (plen_of("10.77.1.5", "10.77.1.0") != 24)
		return 6;
	usleep((useconds_t)(SOCK_PFX_TTL_NS / 1000 + 50000));
	if (plen_of("10.77.1.5", "10.77.0.0") != 16)
		return 7;
	return 0;
}

static void test_changed_interfaces_netns(void **state)
{
	(void)state;
	fflush(NULL);
	pid_t p = fork();
	assert_true(p >= 0);
	if (p == 0)
		_exit(netns_child());
	int st;
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77) {
		fprintf(stderr, "skipped: needs root, `ip` and veth links\n");
		skip();
	}
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loopback_and_expiry),
		cmocka_unit_test(test_v4_mapped),
		cmocka_unit_test(test_changed_interfaces_netns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
