/* it_stats.c: the SMCR_STATS line (src/sock/stats.h, docs/CONFIG.md "SMCR_STATS"), as a
 * user meets it: the programs of examples/ run with SMCR_STATS=FILE, and each process's
 * line must say what really happened: the SMC-R client moved exactly its 100 x 100000
 * bytes over SMC-R with CDC and LLC messages, the TCP client its 10 bytes over TCP with
 * the local reason RULE_TCP, the server both, with the peer-not-SMC reason for the TCP
 * one; an smc-only client against a TCP-only echo server counts a failed connection and
 * its handshake error. SIGUSR2 writes a line at once, but never when the program already
 * disposed of the signal (here: ignored, inherited across exec). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itlib.h"
#include "lib/jsonmatch.h"

static char stats_file[128];

static pid_t spawn(const char *prog, char *const argv[], const char *rules, const char *out,
		   bool ignore_usr2)
{
	pid_t p = fork();
	if (p == 0) {
		setenv("SMCR_RULES", rules, 1);
		setenv("SMCR_CONFIG", "/nonexistent", 1);
		setenv("SMCR_STATS", stats_file, 1);
		it_child_env(0);
		if (ignore_usr2)
			signal(SIGUSR2, SIG_IGN);
		if (out && !freopen(out, "w", stdout))
			_exit(127);
		execv(prog, argv);
		_exit(127);
	}
	return p;
}

static int server_port(const char *out)
{
	int pn = 0;
	for (int i = 0; i < 1000 && !pn; i++) {
		usleep(10000);
		FILE *f = fopen(out, "r");
		if (f) {
			if (fscanf(f, "listening on port %d", &pn) != 1)
				pn = 0;
			fclose(f);
		}
	}
	return pn;
}

/* The line of pid whose event is ev, copied into line (false if there is none). Every
 * line of the file must be one JSON object of the schema's members. */
static bool line_of(pid_t pid, const char *ev, char *line, size_t len)
{
	FILE *f = fopen(stats_file, "r");
	if (!f)
		return false;
	char buf[8192], v[256], want[64];
	bool found = false;
	snprintf(want, sizeof(want), "\"%s\"", ev);
	while (fgets(buf, sizeof(buf), f)) {
		assert_true(strlen(buf) > 2 && buf[strlen(buf) - 1] == '\n');
		buf[strlen(buf) - 1] = 0;
		static const char *keys[] = { "pid", "program", "event", "time", "conns",
					      "fallback_local", "fallback_peer", "handshake_errors",
					      "bytes_smcr", "bytes_tcp", "cdc", "llc", "rmbe_full",
					      "window_stall", "failover" };
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			assert_true(jsonmatch_get(buf, keys[i], v, sizeof(v)));
		assert_true(jsonmatch_get(buf, "pid", v, sizeof(v)));
		if (atoi(v) != (int)pid)
			continue;
		assert_true(jsonmatch_get(buf, "event", v, sizeof(v)));
		if (strcmp(v, want) == 0 && strlen(buf) < len) {
			strcpy(line, buf);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* Member key of line (nested: "bytes_smcr.sent" style, one level) equals want. */
static void expect(const char *line, const char *key, const char *want)
{
	char k[64], v[1024], sub[1024];
	snprintf(k, sizeof(k), "%s", key);
	char *dot = strchr(k, '.');
	if (dot)
		*dot = 0;
	assert_true(jsonmatch_get(line, k, v, sizeof(v)));
	if (dot) {
		assert_true(jsonmatch_get(v, dot + 1, sub, sizeof(sub)));
		strcpy(v, sub);
	}
	if (strcmp(v, want) != 0)
		fail_msg("%s: expected %s, got %s (line %s)", key, want, v, line);
}

static uint64_t num(const char *line, const char *key)
{
	char k[64], v[1024], sub[64];
	snprintf(k, sizeof(k), "%s", key);
	char *dot = strchr(k, '.');
	*dot = 0;
	assert_true(jsonmatch_get(line, k, v, sizeof(v)));
	assert_true(jsonmatch_get(v, dot + 1, sub, sizeof(sub)));
	return strtoull(sub, NULL, 10);
}

static void paths(char *srv, char *cli, size_t n)
{
	const char *bin = getenv("SMCR_BINARY_DIR");
	if (!bin)
		skip();
	snprintf(srv, n, "%s/examples/smcr-echo-server", bin);
	snprintf(cli, n, "%s/examples/smcr-echo-client", bin);
	snprintf(stats_file, sizeof(stats_file), "/tmp/smcr-stats-%d.json", (int)getpid());
	unlink(stats_file);
}

static void test_stats_lines(void **state)
{
	(void)state;
	char srv[512], cli[512], port[16], out[64], line[8192];
	paths(srv, cli, sizeof(srv));
	snprintf(out, sizeof(out), "/tmp/smcr-stats-srv-%d.out", (int)getpid());
	char *sargv[] = { srv, "-p", "0", "-n", "2", NULL };
	pid_t s = spawn(srv, sargv, "use smc server * *", out, false);
	int pn = server_port(out);
	assert_true(pn > 0);
	snprintf(port, sizeof(port), "%d", pn);
	char *c1[] = { cli, "-p", port, "-c", "100", "-s", "100000", NULL };
	pid_t c = spawn(cli, c1, "use smc client * *", "/dev/null", false);
	assert_int_equal(it_wait(c, 30000), 0);
	char *c2[] = { cli, "-p", port, "tcp please", NULL };
	pid_t t = spawn(cli, c2, "use tcp client * *", "/dev/null", false);
	assert_int_equal(it_wait(t, 30000), 0);
	assert_int_equal(it_wait(s, 30000), 0);
	unlink(out);

	assert_true(line_of(c, "exit", line, sizeof(line)));
	expect(line, "program", "\"smcr-echo-client\"");
	expect(line, "conns", "{\"smcr\":1,\"tcp\":0,\"failed\":0}");
	expect(line, "bytes_smcr", "{\"sent\":10000000,\"received\":10000000}");
	expect(line, "bytes_tcp", "{\"sent\":0,\"received\":0}");
	expect(line, "fallback_local", "{}");
	expect(line, "handshake_errors", "{}");
	/* at least one CDC per echo each way, an LLC exchange for the link (CONFIRM LINK) */
	assert_true(num(line, "cdc.sent") >= 100);
	assert_true(num(line, "cdc.received") >= 100);
	assert_true(num(line, "llc.sent") >= 1);
	assert_true(num(line, "llc.received") >= 1);
	expect(line, "cdc.dropped", "0");

	assert_true(line_of(t, "exit", line, sizeof(line)));
	expect(line, "conns", "{\"smcr\":0,\"tcp\":1,\"failed\":0}");
	expect(line, "fallback_local", "{\"RULE_TCP\":1}");
	expect(line, "fallback_peer", "{}");
	expect(line, "bytes_tcp", "{\"sent\":10,\"received\":10}");
	expect(line, "bytes_smcr", "{\"sent\":0,\"received\":0}");
	expect(line, "cdc", "{\"sent\":0,\"received\":0,\"dropped\":0}");

	assert_true(line_of(s, "exit", line, sizeof(line)));
	expect(line, "program", "\"smcr-echo-server\"");
	expect(line, "conns", "{\"smcr\":1,\"tcp\":1,\"failed\":0}");
	expect(line, "fallback_local", "{\"PEERNOSMC\":1}");
	expect(line, "bytes_smcr", "{\"sent\":10000000,\"received\":10000000}");
	expect(line, "bytes_tcp", "{\"sent\":10,\"received\":10}");
	assert_true(num(line, "cdc.sent") >= 100);
	unlink(stats_file);
}

static void test_stats_failed(void **state)
{
	(void)state;
	char srv[512], cli[512], port[16], out[64], line[8192];
	paths(srv, cli, sizeof(srv));
	snprintf(out, sizeof(out), "/tmp/smcr-stats-srv-%d.out", (int)getpid());
	char *sargv[] = { srv, "-p", "0", "-n", "1", NULL };
	pid_t s = spawn(srv, sargv, "use tcp server * *", out, false);
	int pn = server_port(out);
	assert_true(pn > 0);
	snprintf(port, sizeof(port), "%d", pn);
	char *c1[] = { cli, "-p", port, NULL };
	/* The TCP-only echo server sends the client's Proposal back: a CLC message the
	 * client does not expect (its own kind), so the smc-only handshake fails (EPROTO). */
	pid_t c = spawn(cli, c1, "use smc-only client * *", "/dev/null", false);
	assert_int_not_equal(it_wait(c, 30000), 0);
	kill(s, SIGTERM);
	(void)it_wait(s, 30000);
	unlink(out);
	assert_true(line_of(c, "exit", line, sizeof(line)));
	expect(line, "conns", "{\"smcr\":0,\"tcp\":0,\"failed\":1}");
	expect(line, "handshake_errors", "{\"CORE_CLC_UNEXPECTED\":1}");
	expect(line, "fallback_local", "{}");
	unlink(stats_file);
}

static void test_stats_sigusr2(void **state)
{
	(void)state;
	char srv[512], cli[512], port[16], out[64], line[8192];
	paths(srv, cli, sizeof(srv));
	snprintf(out, sizeof(out), "/tmp/smcr-stats-srv-%d.out", (int)getpid());
	/* a: SIGUSR2 at its default: the library writes a line and the server lives on */
	char *sargv[] = { srv, "-p", "0", "-n", "1", NULL };
	unlink(out); /* the port read must be this server's (part b) */
	pid_t s = spawn(srv, sargv, "use smc server * *", out, false);
	int pn = server_port(out);
	assert_true(pn > 0);
	kill(s, SIGUSR2);
	bool got = false;
	for (int i = 0; i < 500 && !got; i++) {
		usleep(10000);
		got = line_of(s, "signal", line, sizeof(line));
	}
	assert_true(got);
	expect(line, "conns", "{\"smcr\":0,\"tcp\":0,\"failed\":0}");
	snprintf(port, sizeof(port), "%d", pn);
	char *c1[] = { cli, "-p", port, "-c", "3", "-s", "1000", NULL };
	pid_t c = spawn(cli, c1, "use smc client * *", "/dev/null", false);
	assert_int_equal(it_wait(c, 30000), 0);
	assert_int_equal(it_wait(s, 30000), 0); /* still alive after the signal: served */
	assert_true(line_of(s, "exit", line, sizeof(line)));
	expect(line, "bytes_smcr", "{\"sent\":3000,\"received\":3000}");

	/* b: the program ignores SIGUSR2 (inherited): no handler of ours, no line. The
	 * output file goes first: it still says part a's port, and read before this server
	 * rewrote it, it sent the signal to a child that had not yet set SIG_IGN (then the
	 * default action ended it). */
	unlink(out);
	s = spawn(srv, sargv, "use smc server * *", out, true);
	pn = server_port(out);
	assert_true(pn > 0);
	kill(s, SIGUSR2);
	usleep(200000);
	assert_false(line_of(s, "signal", line, sizeof(line)));
	assert_int_equal(waitpid(s, NULL, WNOHANG), 0); /* and it still runs */
	kill(s, SIGTERM);
	(void)it_wait(s, 30000);
	unlink(out);
	unlink(stats_file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stats_lines),
		cmocka_unit_test(test_stats_failed),
		cmocka_unit_test(test_stats_sigusr2),
	};
	return IT_MAIN(tests);
}
