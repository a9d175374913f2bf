/* test_perf_run.c: short runs of the smcr-perf binary (issue 6's smoke test): `compare`
 * prints valid JSON of the shape, the ratio is smcr median / tcp median, and the
 * mode is what the engine reports: "smcr" when the binary has the smcr transport (the CI
 * smoke test: asserts the mode, never the speed), else the TCP-vs-TCP form says "tcp".
 * Also `server --once` + `client` over the smcr transport, and exit codes on bad input.
 * Runs are 0.1-0.2 s each: seconds in all. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "json_mini.h"

static char perf_bin[4096];
static int have_smcr;

/* No run of the tool may hang the suite: each gets this long, then SIGKILL and a failure
 * that says so (a bound on a hang, not a speed assertion: a normal run takes ~2 s). */
#define RUN_LIMIT_S 45

/* Runs the binary with args; returns its exit status and its stdout in *out (malloc). */
static int run(char **out, ...)
{
	char *argv[40];
	int argc = 0, p[2];
	va_list ap;
	argv[argc++] = perf_bin;
	va_start(ap, out);
	for (char *a = va_arg(ap, char *); a && argc < 39; a = va_arg(ap, char *))
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execv(perf_bin, argv);
		_exit(127);
	}
	close(p[1]);
	/* the watchdog: a child that kills the run after RUN_LIMIT_S */
	pid_t dog = fork();
	assert_true(dog >= 0);
	if (dog == 0) {
		struct timespec ts = {RUN_LIMIT_S, 0};
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		if (kill(pid, SIGKILL) == 0)
			fprintf(stderr,
			        "test_perf_run: smcr-perf %s did not end within %d s: killed\n",
			        argv[1], RUN_LIMIT_S);
		_exit(0);
	}
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	assert_non_null(buf);
	for (;;) {
		if (len + 1 == cap) {
			buf = realloc(buf, cap *= 2);
			assert_non_null(buf);
		}
		ssize_t n = read(p[0], buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = 0;
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		assert_int_equal(errno, EINTR);
	kill(dog, SIGKILL);
	while (waitpid(dog, NULL, 0) < 0 && errno == EINTR)
		;
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *smcr_side(void)
{
	return have_smcr ? "smcr" : "tcp";
}

/* The shape: test, size, tcp{median,unit,runs}, smcr{median,unit,runs,mode}, ratio;
 * ratio == smcr.median / tcp.median; rounds runs per side, each a positive number; warm
 * uncounted warm-up runs per side in "warmup" (no such key when 0). */
static void check_cmp(const struct jv *j, const char *test, double size, const char *unit,
                      size_t rounds, size_t warm)
{
	assert_non_null(j);
	assert_int_equal(j->type, JV_OBJ);
	assert_string_equal(jv_get(j, "test")->str, test);
	assert_true(jv_get(j, "size")->num == size);
	const char *names[2] = {"tcp", "smcr"};
	double med[2];
	for (int s = 0; s < 2; s++) {
		const struct jv *side = jv_get(j, names[s]);
		assert_non_null(side);
		const struct jv *m = jv_get(side, "median"), *u = jv_get(side, "unit"),
		                *runs = jv_get(side, "runs");
		assert_non_null(m);
		assert_int_equal(m->type, JV_NUM);
		assert_true(m->num > 0);
		med[s] = m->num;
		assert_string_equal(u->str, unit);
		assert_int_equal(runs->type, JV_ARR);
		assert_int_equal(runs->n, rounds);
		for (size_t i = 0; i < runs->n; i++) {
			assert_int_equal(runs->items[i].type, JV_NUM);
			assert_true(runs->items[i].num > 0);
		}
	}
	const struct jv *smcr = jv_get(j, "smcr");
	/* the mode the engine reported for every measured connection */
	if (have_smcr) {
		const struct jv *lr = jv_get(smcr, "local_reason"),
		                *pr = jv_get(smcr, "peer_reason");
		if (strcmp(jv_get(smcr, "mode")->str, "smcr") != 0)
			fprintf(stderr, "smcr side: mode %s, local reason %s, peer reason %s\n",
			        jv_get(smcr, "mode")->str, lr ? lr->str : "-", pr ? pr->str : "-");
		assert_string_equal(jv_get(smcr, "mode")->str, "smcr");
	} else
		assert_string_equal(jv_get(smcr, "mode")->str, "tcp");
	assert_string_equal(jv_get(smcr, "transport")->str, smcr_side());
	const struct jv *w = jv_get(j, "warmup");
	if (!warm)
		assert_null(w);
	for (int s = 0; warm && s < 2; s++) {
		const struct jv *runs = jv_get(w, names[s]);
		assert_non_null(runs);
		assert_int_equal(runs->type, JV_ARR);
		assert_int_equal(runs->n, warm);
		for (size_t i = 0; i < runs->n; i++)
			assert_true(runs->items[i].num > 0);
	}
	const struct jv *ratio = jv_get(j, "ratio");
	assert_non_null(ratio);
	/* printed with 6 significant digits */
	assert_true(fabs(ratio->num - med[1] / med[0]) <= 1e-5 * (med[1] / med[0]));
}

static void test_compare_pingpong(void **st)
{
	(void)st;
	char *out;
	int rc = have_smcr ? run(&out, "compare", "-t", "pingpong", "-s", "64", "-d", "0.15",
	                         "--json", "--cpu", NULL)
	                   : run(&out, "compare", "-t", "pingpong", "-s", "64", "-d", "0.15",
	                         "--json", "--cpu", "--smcr-transport", "tcp", NULL);
	assert_int_equal(rc, 0);
	struct jv *j = jv_parse(out);
	if (!j)
		fprintf(stderr, "not JSON: %s\n", out);
	check_cmp(j, "pingpong", 64, "us", 3, 1);
	const struct jv *tcp = jv_get(j, "tcp");
	assert_true(jv_get(tcp, "p99")->num >= jv_get(tcp, "median")->num);
	assert_true(jv_get(tcp, "p999")->num >= jv_get(tcp, "p99")->num);
	assert_false(jv_get(j, "higher_is_better")->b);
	const struct jv *cpu = jv_get(jv_get(j, "smcr"), "cpu");
	assert_non_null(cpu);
	assert_string_equal(jv_get(cpu, "unit")->str, "cpu_us/op");
	assert_true(jv_get(cpu, "median")->num > 0);
	jv_free(j);
	free(out);
}

/* -r 1 runs one round per transport; on a terminal (a pty from script(1)) a line per round
 * shows as it ends, and never in a pipe (the JSON above parses whole). */
static void test_compare_one_round(void **st)
{
	(void)st;
	char *out;
	const char *tr = have_smcr ? "smcr" : "tcp";
	int rc = run(&out, "compare", "-t", "pingpong", "-s", "64", "-d", "0.1", "-r", "1",
	             "--json", "--smcr-transport", tr, NULL);
	assert_int_equal(rc, 0);
	struct jv *j = jv_parse(out);
	check_cmp(j, "pingpong", 64, "us", 1, 1);
	jv_free(j);
	free(out);
	if (access("/usr/bin/script", X_OK) != 0) {
		fprintf(stderr, "no script(1) (bsdutils): the terminal half is skipped\n");
		return;
	}
	char cmd[8192];
	snprintf(cmd, sizeof(cmd),
	         "/usr/bin/script -qec '%s compare -t stream -s 1K -d 0.1 -r 2 --smcr-transport %s'"
	         " /dev/null",
	         perf_bin, tr);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char line[1024];
	int warm = 0, rounds = 0;
	while (fgets(line, sizeof(line), p)) {
		if (strstr(line, "warm-up 1: tcp ") && strstr(line, "smcr "))
			warm++;
		if ((strstr(line, "round 1/2: tcp ") || strstr(line, "round 2/2: tcp ")) &&
		    strstr(line, "Gbit/s"))
			rounds++;
	}
	assert_int_equal(pclose(p), 0);
	assert_int_equal(warm, 1);
	assert_int_equal(rounds, 2);
}

static void test_compare_stream_sweep(void **st)
{
	(void)st;
	char *out;
	int rc = have_smcr ? run(&out, "compare", "-t", "stream", "-s", "1K,64K", "-d", "0.1",
	                         "--json", NULL)
	                   : run(&out, "compare", "-t", "stream", "-s", "1K,64K", "-d", "0.1",
	                         "--json", "--smcr-transport", "tcp", NULL);
	assert_int_equal(rc, 0);
	struct jv *j = jv_parse(out);
	assert_non_null(j);
	assert_int_equal(j->type, JV_ARR); /* a size list gives an array */
	assert_int_equal(j->n, 2);
	check_cmp(&j->items[0], "stream", 1024, "Gbit/s", 3, 1); /* once, first */
	check_cmp(&j->items[1], "stream", 65536, "Gbit/s", 3, 0);
	jv_free(j);
	free(out);
}

static void test_compare_conns_connect(void **st)
{
	(void)st;
	char *out;
	const char *extra = have_smcr ? NULL : "--smcr-transport";
	int rc = run(&out, "compare", "-t", "conns", "-n", "16", "-s", "16K", "-d", "0.2",
	             "--warmup", "2", "--json", extra, "tcp", NULL);
	assert_int_equal(rc, 0);
	struct jv *j = jv_parse(out);
	check_cmp(j, "conns", 16384, "Gbit/s", 3, 2);
	assert_true(jv_get(j, "conns")->num == 16);
	assert_non_null(jv_get(jv_get(j, "smcr"), "mem_per_conn_kib"));
	assert_non_null(jv_get(jv_get(j, "tcp"), "idle_mem_per_conn_kib"));
	jv_free(j);
	free(out);

	rc = run(&out, "compare", "-t", "connect", "-d", "0.1", "--warmup", "0", "--json", extra,
	         "tcp", NULL);
	assert_int_equal(rc, 0);
	j = jv_parse(out);
	check_cmp(j, "connect", 64, "conn/s", 3, 0);
	/* issue 6: connect measures new connections over an EXISTING link group (the control
	 * connection holds it): the engine must report no measured connection as first contact */
	const struct jv *sm = jv_get(j, "smcr");
	assert_true(jv_get(sm, "conns")->num > 0);
	assert_true(jv_get(sm, "first_contacts")->num == 0);
	jv_free(j);
	free(out);
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* server --once and client, both on the smcr transport when built in: the client reads
 * the mode from its engine; a plain TCP client against the smcr server falls back. */
static void test_server_client(void **st)
{
	(void)st;
	char port[16];
	snprintf(port, sizeof(port), "%d", free_port());
	for (int round = 0; round < (have_smcr ? 2 : 1); round++) {
		/* round 0: client and server on the same transport; 1: tcp client, smcr server */
		const char *srv_tr = smcr_side(), *cli_tr = round == 0 ? smcr_side() : "tcp";
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			/* never outlive the test, even when an assertion ends it early */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			int devnull = open("/dev/null", O_WRONLY);
			dup2(devnull, 2);
			execl(perf_bin, perf_bin, "server", "-B", "127.0.0.1", "-p", port,
			      "--transport", srv_tr, "--once", (char *)NULL);
			_exit(127);
		}
		char *out = NULL;
		int rc = 1;
		/* the server needs a moment to listen: retry a refused connect, bounded */
		for (int tries = 0; tries < 50; tries++) {
			free(out);
			rc = run(&out, "client", "127.0.0.1", "-p", port, "-t", "pingpong", "-s",
			         "100", "-d", "0.1", "--json", "--transport", cli_tr, NULL);
			if (rc != 1)
				break; /* 0: done; anything else is not "not listening yet" */
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
		assert_int_equal(rc, 0);
		struct jv *j = jv_parse(out);
		assert_non_null(j);
		assert_string_equal(jv_get(j, "test")->str, "pingpong");
		assert_true(jv_get(j, "size")->num == 100);
		assert_string_equal(jv_get(j, "transport")->str, cli_tr);
		const char *want = round == 0 ? smcr_side() : "tcp";
		if (strcmp(jv_get(j, "mode")->str, want) != 0)
			fprintf(stderr, "client said: %s", out); /* with the fallback reasons */
		assert_string_equal(jv_get(j, "mode")->str, want);
		assert_true(jv_get(j, "median")->num > 0);
		assert_true(jv_get(j, "ops")->num > 0);
		jv_free(j);
		free(out);
		int stt;
		assert_int_equal(waitpid(pid, &stt, 0), pid);
		assert_true(WIFEXITED(stt));
		assert_int_equal(WEXITSTATUS(stt), 0); /* --once: exits when the session ends */
	}
}

/* Connects to 127.0.0.1:port with plain TCP, retrying while the server starts. */
static int raw_connect(int port)
{
	for (int tries = 0; tries < 100; tries++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET,
		                        .sin_port = htons((uint16_t)port),
		                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		assert_true(fd >= 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			/* a server that failed to drop us must fail the test, not hang it */
			struct timeval tv = {10, 0};
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			return fd;
		}
		close(fd);
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	fail_msg("the server did not start listening");
	return -1;
}

/* A hostile or confused peer: bad headers are dropped (the connection closed), and the
 * server still serves the next, real client. */
static void test_server_hostile(void **st)
{
	(void)st;
	int port = free_port();
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", port);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 2);
		execl(perf_bin, perf_bin, "server", "-B", "127.0.0.1", "-p", ps, "--transport",
		      "tcp", "--once", (char *)NULL);
		_exit(127);
	}
	static const uint8_t bad[][32] = {
	    {'X', 'P', 'R', 'F', 1, 2},                      /* magic */
	    {'S', 'P', 'R', 'F', 9, 2, 0, 0, 0, 0, 0, 1},    /* version */
	    {'S', 'P', 'R', 'F', 1, 7, 0, 0, 0, 0, 0, 1},    /* kind */
	    {'S', 'P', 'R', 'F', 1, 3, 0, 0, 0, 0, 0, 0},    /* size 0 */
	    {'S', 'P', 'R', 'F', 1, 3, 0, 0, 0x7f, 0, 0, 0}, /* size 2 GiB */
	    {0xe2, 0xd4, 0xc3, 0xd9, 1, 0, 0x34},            /* a CLC message */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fd = raw_connect(port);
		assert_int_equal(write(fd, bad[i], sizeof(bad[i])), sizeof(bad[i]));
		char b[16];
		ssize_t n = read(fd, b, sizeof(b)); /* the server closes: EOF or reset */
		assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
		close(fd);
	}
	/* a short header and a hang-up: dropped too */
	int fd = raw_connect(port);
	assert_int_equal(write(fd, "SPRF", 4), 4);
	close(fd);
	char *out;
	assert_int_equal(run(&out, "client", "127.0.0.1", "-p", ps, "-t", "connect", "-d", "0.1",
	                     "--transport", "tcp", "--json", NULL),
	                 0);
	struct jv *j = jv_parse(out);
	assert_non_null(j);
	assert_true(jv_get(j, "ops")->num > 0);
	jv_free(j);
	free(out);
	int stt;
	assert_int_equal(waitpid(pid, &stt, 0), pid);
	assert_true(WIFEXITED(stt) && WEXITSTATUS(stt) == 0);
}

static void test_bad_usage(void **st)
{
	(void)st;
	char *out;
	assert_int_equal(run(&out, "compare", "-r", "0", NULL), 2);
	free(out);
	assert_int_equal(run(&out, "client", NULL), 2);
	free(out);
	assert_int_equal(run(&out, "client", "127.0.0.1", "-s", "0", NULL), 2);
	free(out);
	assert_int_equal(run(&out, "--help", NULL), 0);
	assert_non_null(strstr(out, "compare"));
	free(out);
	/* nothing listens on a fresh port: a clear failure, exit 1 */
	char port[16];
	snprintf(port, sizeof(port), "%d", free_port());
	assert_int_equal(
	    run(&out, "client", "127.0.0.1", "-p", port, "--transport", "tcp", "-d", "0.1", NULL),
	    1);
	free(out);
}

int main(void)
{
	const char *bdir = getenv("SMCR_BINARY_DIR");
	if (!bdir) {
		fprintf(stderr, "SMCR_BINARY_DIR is not set\n");
		return 1;
	}
	snprintf(perf_bin, sizeof(perf_bin), "%s/tools/smcr-perf/smcr-perf", bdir);
	char *ver;
	if (run(&ver, "--version", NULL) != 0) {
		fprintf(stderr, "cannot run %s\n", perf_bin);
		return 1;
	}
	have_smcr = strstr(ver, "smcr)") != NULL;
	fprintf(stderr, "%s", ver);
	free(ver);
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_compare_pingpong),
	    cmocka_unit_test(test_compare_one_round),
	    cmocka_unit_test(test_compare_stream_sweep),
	    cmocka_unit_test(test_compare_conns_connect),
	    cmocka_unit_test(test_server_client),
	    cmocka_unit_test(test_server_hostile),
	    cmocka_unit_test(test_bad_usage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
