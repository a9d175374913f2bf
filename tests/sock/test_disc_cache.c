/* test_disc_cache.c: discovery remembers "not installed" (src/sock/discovery.c
 * disc_optin): without the smcr BPF programs the opt-in setsockopt fails the same way on
 * every socket, so after one failure the next sockets of the process are not asked again
 * for 1 s, and get the same decision; a forked child asks again; after the second it is
 * asked again. Skipped where the programs are installed for this cgroup (the opt-in then
 * succeeds and nothing is remembered). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <smcr/smcr.h>

#include "sock/discovery.h"

/* The rule (main) covers 127.0.0.1 only: 127.0.0.2 gets the default. */
static struct disc_choice decide_for(uint32_t addr)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(9),
				   .sin_addr.s_addr = htonl(addr) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct disc_choice c = disc_client(fd, (struct sockaddr *)&dst);
	close(fd);
	return c;
}

static struct disc_choice decide(void)
{
	return decide_for(INADDR_LOOPBACK);
}

static void test_not_installed_remembered(void **state)
{
	(void)state;
	uint64_t p0 = disc_optin_probes();
	struct disc_choice first = decide();
	assert_int_equal(disc_optin_probes(), p0 + 1);
	if (first.mode == DISC_BPF)
		skip(); /* the programs are installed here: nothing to remember */
	/* the rule asks for SMC-R: rules-only discovery, as without the memory */
	assert_int_equal(first.mode, DISC_RULES);
	for (int i = 0; i < 50; i++) {
		struct disc_choice c = decide();
		assert_int_equal(c.mode, first.mode);
		assert_int_equal(c.action, first.action);
	}
	assert_int_equal(disc_optin_probes(), p0 + 1); /* not asked again */

	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint64_t c0 = disc_optin_probes();
		struct disc_choice c = decide();
		_exit(disc_optin_probes() == c0 + 1 && c.mode == DISC_RULES ? 0 : 1);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* the child asked again */
	assert_int_equal(disc_optin_probes(), p0 + 1);

	usleep(1100 * 1000); /* the memory lasts 1 s */
	struct disc_choice c = decide();
	assert_int_equal(c.mode, DISC_RULES);
	assert_int_equal(disc_optin_probes(), p0 + 2);
}

/* The default (no rule matches) without the programs: TCP, reason BPF_NOT_INSTALLED,
 * whether the answer was asked for or remembered. */
static void test_default_reason_kept(void **state)
{
	(void)state;
	(void)decide_for(INADDR_LOOPBACK + 1);
	struct disc_choice c = decide_for(INADDR_LOOPBACK + 1);
	if (c.mode == DISC_BPF)
		skip();
	assert_int_equal(c.action, RULE_TCP);
	assert_int_equal(c.reason, SMCR_REASON_BPF_NOT_INSTALLED);
}

int main(void)
{
	setenv("SMCR_CONFIG", "/nonexistent", 1);
	setenv("SMCR_RULES", "use smc client * 127.0.0.1", 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_not_installed_remembered),
		cmocka_unit_test(test_default_reason_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
