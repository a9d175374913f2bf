/* test_stats.c: the counters of src/sock/stats.h: per-thread byte counters sum exactly
 * across threads that exit and threads that take their blocks over (while a reader
 * snapshots concurrently: the TSan run checks the hand-over); peeks and errors are not
 * counted; reasons and handshake errors are counted by code with their names in the line;
 * the line is one JSON object; a forked child counts from zero. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/jsonmatch.h"
#include "smcr/smcr.h"
#include "sock/errmap.h"
#include "sock/stats.h"

#define THREADS 8
#define ROUNDS 4
#define ADDS 20000

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < ADDS; i++) {
		stats_io(true, true, 0, 3);
		stats_io(true, false, 0, 5);
		stats_io(false, false, MSG_PEEK, 7); /* a peek: not counted */
		stats_io(false, true, 0, -1);	     /* an error: not counted */
		stats_io(false, false, 0, 1);
	}
	return NULL;
}

static _Atomic bool stop_reader;

static void *reader(void *arg)
{
	(void)arg;
	struct stats_snap s;
	uint64_t last = 0;
	while (!atomic_load(&stop_reader)) {
		stats_snapshot(&s);
		assert_true(s.v[STATS_SMCR_SENT] >= last); /* counts never go back */
		last = s.v[STATS_SMCR_SENT];
	}
	return NULL;
}

static void test_threads_sum(void **state)
{
	(void)state;
	struct stats_snap before, after;
	stats_snapshot(&before);
	pthread_t r;
	atomic_store(&stop_reader, false);
	assert_int_equal(pthread_create(&r, NULL, reader, NULL), 0);
	/* threads come and go: later rounds take over the blocks of earlier ones */
	for (int k = 0; k < ROUNDS; k++) {
		pthread_t t[THREADS];
		for (int i = 0; i < THREADS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, adder, NULL), 0);
		for (int i = 0; i < THREADS; i++)
			assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	atomic_store(&stop_reader, true);
	assert_int_equal(pthread_join(r, NULL), 0);
	stats_snapshot(&after);
	uint64_t n = (uint64_t)THREADS * ROUNDS * ADDS;
	assert_true(after.v[STATS_SMCR_SENT] - before.v[STATS_SMCR_SENT] == 3 * n);
	assert_true(after.v[STATS_SMCR_RECV] - before.v[STATS_SMCR_RECV] == 5 * n);
	assert_true(after.v[STATS_TCP_RECV] - before.v[STATS_TCP_RECV] == n);
	assert_true(after.v[STATS_TCP_SENT] == before.v[STATS_TCP_SENT]);
}

static void test_reasons_and_line(void **state)
{
	(void)state;
	stats_conn(STATS_MODE_SMCR, 0, 0);
	stats_conn(STATS_MODE_TCP, SMCR_REASON_RULE_TCP, 0);
	stats_conn(STATS_MODE_TCP, SMCR_REASON_RULE_TCP, 0);
	stats_conn(STATS_MODE_TCP, SMCR_REASON_PEERDECL, 0x03030002u);
	stats_conn(STATS_MODE_TCP, 0x0303abcdu, 0); /* a code without a name */
	stats_hs_failed(sock_err_sys(ETIMEDOUT));
	stats_hs_failed(-SMCR_E_SOCK_SMC_ONLY);
	errno = EINPROGRESS;
	stats_tcp_connect(-1, SMCR_REASON_BPF_NOT_INSTALLED);
	errno = ECONNREFUSED;
	stats_tcp_connect(-1, SMCR_REASON_BPF_NOT_INSTALLED); /* no connection */
	assert_int_equal(errno, ECONNREFUSED);
	char line[8192], v[2048];
	size_t n = stats_format(line, sizeof(line), "test");
	assert_true(n > 0 && n == strlen(line) && line[n - 1] == '\n');
	line[n - 1] = 0;
	assert_true(jsonmatch_get(line, "event", v, sizeof(v)));
	assert_string_equal(v, "\"test\"");
	assert_true(jsonmatch_get(line, "conns", v, sizeof(v)));
	assert_string_equal(v, "{\"smcr\":1,\"tcp\":5,\"failed\":2}");
	assert_true(jsonmatch_get(line, "fallback_local", v, sizeof(v)));
	assert_string_equal(v, "{\"RULE_TCP\":2,\"PEERDECL\":1,\"0x0303abcd\":1,"
			       "\"BPF_NOT_INSTALLED\":1}");
	assert_true(jsonmatch_get(line, "fallback_peer", v, sizeof(v)));
	assert_string_equal(v, "{\"NOSMCRDEV\":1}");
	assert_true(jsonmatch_get(line, "handshake_errors", v, sizeof(v)));
	assert_string_equal(v, "{\"ETIMEDOUT\":1,\"SOCK_SMC_ONLY\":1}");
	/* too small a buffer: nothing, never a cut line */
	assert_int_equal(stats_format(line, 40, "test"), 0);

	/* a forked child starts from zero */
	pid_t p = fork();
	if (p == 0) {
		char l[8192], w[256];
		size_t k = stats_format(l, sizeof(l), "child");
		l[k ? k - 1 : 0] = 0;
		bool ok = k > 0 && jsonmatch_get(l, "conns", w, sizeof(w)) &&
			  !strcmp(w, "{\"smcr\":0,\"tcp\":0,\"failed\":0}") &&
			  jsonmatch_get(l, "fallback_local", w, sizeof(w)) && !strcmp(w, "{}") &&
			  jsonmatch_get(l, "bytes_smcr", w, sizeof(w)) &&
			  !strcmp(w, "{\"sent\":0,\"received\":0}");
		_exit(ok ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_sum),
		cmocka_unit_test(test_reasons_and_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
