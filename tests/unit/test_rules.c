/* test_rules.c: the SMC-R selection rules (src/sock/rules.h, docs/CONFIG.md): every field's
 * syntax, each error, first match wins, defaults, IPv4-mapped addresses, the two sources
 * ($SMCR_RULES before $SMCR_CONFIG). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sock/rules.h"

static struct sockaddr_storage v4(const char *a, int port)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	in->sin_family = AF_INET;
	in->sin_port = htons((uint16_t)port);
	assert_int_equal(inet_pton(AF_INET, a, &in->sin_addr), 1);
	return ss;
}

static struct sockaddr_storage v6(const char *a, int port)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons((uint16_t)port);
	assert_int_equal(inet_pton(AF_INET6, a, &in6->sin6_addr), 1);
	return ss;
}

#define SA(ss) ((const struct sockaddr *)&(ss))

static void test_parse_fields(void **state)
{
	(void)state;
	struct rule r;
	assert_int_equal(rules_parse_line("use smc server * 127.0.0.1/8:7000-7100", &r), 0);
	assert_int_equal(r.action, RULE_SMC);
	assert_int_equal(r.roles, RULE_ROLE_SERVER);
	assert_string_equal(r.prog, "*");
	assert_int_equal(r.family, AF_INET);
	assert_int_equal(r.prefix, 8);
	assert_int_equal(r.addr[0], 127);
	assert_int_equal(r.port_lo, 7000);
	assert_int_equal(r.port_hi, 7100);

	assert_int_equal(rules_parse_line("  use tcp client curl *:*  # comment", &r), 0);
	assert_int_equal(r.action, RULE_TCP);
	assert_int_equal(r.roles, RULE_ROLE_CLIENT);
	assert_string_equal(r.prog, "curl");
	assert_int_equal(r.family, 0);
	assert_int_equal(r.port_lo, 0);
	assert_int_equal(r.port_hi, 65535);

	assert_int_equal(rules_parse_line("use smc-only both srv* [fe80::1]/64:443", &r), 0);
	assert_int_equal(r.action, RULE_SMC_ONLY);
	assert_int_equal(r.roles, RULE_ROLE_CLIENT | RULE_ROLE_SERVER);
	assert_int_equal(r.family, AF_INET6);
	assert_int_equal(r.prefix, 64);
	assert_int_equal(r.addr[0], 0xfe);
	assert_int_equal(r.port_lo, 443);
	assert_int_equal(r.port_hi, 443);

	assert_int_equal(rules_parse_line("use smc both * *", &r), 0);
	assert_int_equal(r.family, 0);
	assert_int_equal(rules_parse_line("use smc both * 10.1.2.3", &r), 0);
	assert_int_equal(r.prefix, 32);
	assert_int_equal(r.port_hi, 65535);
	assert_int_equal(rules_parse_line("use smc both * [::1]", &r), 0);
	assert_int_equal(r.prefix, 128);
	assert_int_equal(rules_parse_line("use smc both * [*]:80", &r), 0);
	assert_int_equal(r.family, AF_INET6);
	assert_int_equal(r.prefix, 0);
	assert_int_equal(rules_parse_line("use smc both * *:9000", &r), 0);
	assert_int_equal(r.port_lo, 9000);
	assert_int_equal(rules_parse_line("use smc both * 0.0.0.0/0:1-2", &r), 0);
	assert_int_equal(r.prefix, 0);
}

static void test_parse_blank_and_errors(void **state)
{
	(void)state;
	struct rule r;
	assert_int_equal(rules_parse_line("", &r), 1);
	assert_int_equal(rules_parse_line("   \t ", &r), 1);
	assert_int_equal(rules_parse_line("# only a comment", &r), 1);
	static const struct {
		const char *line;
		int err;
	} bad[] = {
		{ "uses smc both * *", SMCR_E_SOCK_RULE_SYNTAX },
		{ "use rdma both * *", SMCR_E_SOCK_RULE_SYNTAX },
		{ "use smc everyone * *", SMCR_E_SOCK_RULE_SYNTAX },
		{ "use smc both *", SMCR_E_SOCK_RULE_SYNTAX },
		{ "use smc both", SMCR_E_SOCK_RULE_SYNTAX },
		{ "use smc both * * extra", SMCR_E_SOCK_RULE_SYNTAX },
		{ "use smc both * 1.2.3", SMCR_E_SOCK_RULE_ADDR },
		{ "use smc both * 1.2.3.4/33", SMCR_E_SOCK_RULE_ADDR },
		{ "use smc both * 1.2.3.4/", SMCR_E_SOCK_RULE_ADDR },
		{ "use smc both * */8", SMCR_E_SOCK_RULE_ADDR },
		{ "use smc both * [::1", SMCR_E_SOCK_RULE_ADDR },
		{ "use smc both * [::1]/129", SMCR_E_SOCK_RULE_ADDR },
		{ "use smc both * [zz::]", SMCR_E_SOCK_RULE_ADDR },
		{ "use smc both * 1.2.3.4x", SMCR_E_SOCK_RULE_ADDR },
		{ "use smc both * 1.2.3.4:", SMCR_E_SOCK_RULE_PORT },
		{ "use smc both * 1.2.3.4:70000", SMCR_E_SOCK_RULE_PORT },
		{ "use smc both * 1.2.3.4:10-5", SMCR_E_SOCK_RULE_PORT },
		{ "use smc both * 1.2.3.4:a", SMCR_E_SOCK_RULE_PORT },
		{ "use smc both * *:1-", SMCR_E_SOCK_RULE_PORT },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = rules_parse_line(bad[i].line, &r);
		if (rc != -bad[i].err)
			fail_msg("\"%s\": got %d want %d", bad[i].line, rc, -bad[i].err);
	}
	/* a program glob longer than the field */
	char longl[200];
	snprintf(longl, sizeof(longl), "use smc both %0100d *", 0);
	assert_int_equal(rules_parse_line(longl, &r), -SMCR_E_SOCK_RULE_SYNTAX);
}

static void test_match_first_wins(void **state)
{
	(void)state;
	struct rules rs = { 0 };
	assert_int_equal(rules_parse(&rs,
				     "use tcp client curl *:*\n"
				     "use smc server * 127.0.0.1/8:7000-7100\n"
				     "bogus line\n"
				     "use smc-only client srv* 10.0.0.0/8:*\n"
				     "use smc both * [::1]:80\n"
				     "use tcp both * 10.9.0.0/16\n"
				     "use smc both * 10.0.0.0/8\n",
				     "test", false),
			 0);
	assert_int_equal(rs.n, 6);
	assert_int_equal(rs.bad_lines, 1);
	const struct rule *w;
	struct sockaddr_storage a = v4("127.1.2.3", 7050);
	assert_int_equal(rules_match(&rs, RULE_ROLE_SERVER, "anything", SA(a), &w), RULE_SMC);
	assert_int_equal(w->line, 2);
	/* same address, client role: no rule for clients on it */
	assert_int_equal(rules_match(&rs, RULE_ROLE_CLIENT, "anything", SA(a), &w), RULE_TCP);
	assert_null(w);
	/* port outside the range */
	a = v4("127.1.2.3", 7101);
	assert_int_equal(rules_match(&rs, RULE_ROLE_SERVER, "x", SA(a), NULL), RULE_TCP);
	/* curl is always tcp as a client (first rule), even to 10/8 */
	a = v4("10.1.1.1", 5);
	assert_int_equal(rules_match(&rs, RULE_ROLE_CLIENT, "curl", SA(a), &w), RULE_TCP);
	assert_int_equal(w->line, 1);
	assert_int_equal(rules_match(&rs, RULE_ROLE_CLIENT, "srvd", SA(a), NULL), RULE_SMC_ONLY);
	assert_int_equal(rules_match(&rs, RULE_ROLE_CLIENT, "other", SA(a), &w), RULE_SMC);
	assert_int_equal(w->line, 7);
	/* 10.9/16 is excluded before 10/8 */
	a = v4("10.9.200.1", 5);
	assert_int_equal(rules_match(&rs, RULE_ROLE_SERVER, "other", SA(a), &w), RULE_TCP);
	assert_int_equal(w->line, 6);
	/* IPv4-mapped IPv6 matches the IPv4 rules */
	a = v6("::ffff:127.0.0.1", 7000);
	assert_int_equal(rules_match(&rs, RULE_ROLE_SERVER, "x", SA(a), NULL), RULE_SMC);
	/* IPv6 */
	a = v6("::1", 80);
	assert_int_equal(rules_match(&rs, RULE_ROLE_CLIENT, "x", SA(a), &w), RULE_SMC);
	assert_int_equal(w->line, 5);
	a = v6("::2", 80);
	assert_int_equal(rules_match(&rs, RULE_ROLE_CLIENT, "x", SA(a), NULL), RULE_TCP);
	/* no address: only an any-address rule matches */
	assert_int_equal(rules_match(&rs, RULE_ROLE_CLIENT, "curl", NULL, NULL), RULE_TCP);
	rules_free(&rs);
	/* no rules: tcp */
	a = v4("1.1.1.1", 1);
	assert_int_equal(rules_match(&rs, RULE_ROLE_CLIENT, "x", SA(a), NULL), RULE_TCP);
}

static void test_prefix_bits(void **state)
{
	(void)state;
	struct rules rs = { 0 };
	assert_int_equal(rules_parse(&rs, "use smc both * 192.168.1.128/25", "t", false), 0);
	struct sockaddr_storage a = v4("192.168.1.200", 1);
	assert_int_equal(rules_match(&rs, RULE_ROLE_CLIENT, "x", SA(a), NULL), RULE_SMC);
	a = v4("192.168.1.127", 1);
	assert_int_equal(rules_match(&rs, RULE_ROLE_CLIENT, "x", SA(a), NULL), RULE_TCP);
	rules_free(&rs);
}

static void test_env_separator_and_sources(void **state)
{
	(void)state;
	char path[] = "/tmp/smcr-rules-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *file = "# file rules\nuse tcp both * 10.0.0.1\nuse smc both * 10.0.0.0/8\n";
	assert_int_equal(write(fd, file, strlen(file)), (ssize_t)strlen(file));
	close(fd);
	setenv("SMCR_CONFIG", path, 1);
	setenv("SMCR_RULES", "use smc-only client * 10.0.0.1; use tcp server * *", 1);
	rules_reload();
	const struct rules *rs = rules_get();
	assert_int_equal(rs->n, 4);
	struct sockaddr_storage a = v4("10.0.0.1", 1);
	/* the environment comes first */
	assert_int_equal(rules_match(rs, RULE_ROLE_CLIENT, "x", SA(a), NULL), RULE_SMC_ONLY);
	assert_int_equal(rules_match(rs, RULE_ROLE_SERVER, "x", SA(a), NULL), RULE_TCP);
	a = v4("10.0.0.2", 1);
	assert_int_equal(rules_match(rs, RULE_ROLE_CLIENT, "x", SA(a), NULL), RULE_SMC);
	/* the program name is this test's */
	assert_string_equal(rules_prog_name(), "test_rules");
	/* missing file, no env: no rules, default tcp */
	unlink(path);
	unsetenv("SMCR_RULES");
	rules_reload();
	assert_int_equal(rules_get()->n, 0);
	unsetenv("SMCR_CONFIG");
	rules_fini();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_fields),
		cmocka_unit_test(test_parse_blank_and_errors),
		cmocka_unit_test(test_match_first_wins),
		cmocka_unit_test(test_prefix_bits),
		cmocka_unit_test(test_env_separator_and_sources),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
