/* it_examples.c: the programs in examples/ work: smcr-echo-server (non-blocking, edge-
 * triggered epoll through smcr_epoll_ctl) serves smcr-echo-client over SMC-R (100 echoes
 * of 100 KB, checked by the client) and a client whose rules choose TCP. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "itlib.h"

static pid_t spawn(const char *prog, char *const argv[], const char *rules, const char *out)
{
	pid_t p = fork();
	if (p == 0) {
		setenv("SMCR_RULES", rules, 1);
		setenv("SMCR_CONFIG", "/nonexistent", 1);
		it_child_env(0);
		if (out && !freopen(out, "w", stdout))
			_exit(127);
		execv(prog, argv);
		_exit(127);
	}
	return p;
}

static void test_echo_examples(void **state)
{
	(void)state;
	const char *bin = getenv("SMCR_BINARY_DIR");
	if (!bin)
		skip();
	char srv[512], cli[512], port[16], out[64];
	snprintf(srv, sizeof(srv), "%s/examples/smcr-echo-server", bin);
	snprintf(cli, sizeof(cli), "%s/examples/smcr-echo-client", bin);
	snprintf(out, sizeof(out), "/tmp/smcr-echo-%d.out", (int)getpid());
	char *sargv[] = { srv, "-p", "0", "-n", "2", NULL };
	pid_t s = spawn(srv, sargv, "use smc server * *", out);
	/* the server prints the port the kernel gave it */
	int pn = 0;
	for (int i = 0; i < 500 && !pn; i++) {
		usleep(10000);
		FILE *f = fopen(out, "r");
		if (f) {
			if (fscanf(f, "listening on port %d", &pn) != 1)
				pn = 0;
			fclose(f);
		}
	}
	assert_true(pn > 0);
	snprintf(port, sizeof(port), "%d", pn);
	char *c1[] = { cli, "-p", port, "-c", "100", "-s", "100000", NULL };
	pid_t c = spawn(cli, c1, "use smc client * *", NULL);
	assert_int_equal(it_wait(c, 30000), 0);
	char *c2[] = { cli, "-p", port, "tcp please", NULL };
	c = spawn(cli, c2, "use tcp client * *", NULL);
	assert_int_equal(it_wait(c, 30000), 0);
	assert_int_equal(it_wait(s, 30000), 0);
	/* the server saw one SMC-R and one TCP (plain client: PEERNOSMC) connection */
	FILE *f = fopen(out, "r");
	assert_non_null(f);
	char line[512];
	int smc = 0, tcp = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "closing: mode smcr"))
			smc++;
		if (strstr(line, "closing: mode tcp") && strstr(line, "PEERNOSMC"))
			tcp++;
	}
	fclose(f);
	unlink(out);
	assert_int_equal(smc, 1);
	assert_int_equal(tcp, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_echo_examples),
	};
	return IT_MAIN(tests);
}
