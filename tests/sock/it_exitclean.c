/* it_exitclean.c: a client process that exits normally ends its link groups in order
 * (DELETE LINK all, orderly, from its exit handler: src/sock/engine.c engine_exit and
 * core_engine_end_lgs), and the server takes that as the peer's orderly end, not as a link
 * failure: its stderr at SMCR_LOG=warn holds no "completion error" and no "link ... down"
 * line, and its link group ends at once (not after the 10-minute idle timer).
 *
 * Three client processes in turn: one closes its socket and exits, one exits with its
 * socket open (the exit handler closes it), one returns from main with nothing closed. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "itlib.h"

static int lfd;
static uint16_t port;
static char logpath[64];

#define NCLI 3

struct shared {
	_Atomic int served;
	_Atomic int lg_ended; /* the server saw no LG left after each client */
};
static struct shared *sh;

static bool no_lg(void *arg)
{
	(void)arg;
	struct core_engine_stats st;
	it_engine_stats(&st);
	return st.lgs == 0;
}

static int server(void *arg)
{
	(void)arg;
	int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	IT_CHECK(logfd >= 0);
	IT_CHECK(dup2(logfd, 2) == 2);
	close(logfd);
	setenv("SMCR_LOG", "warn", 1);
	it_child_env(0);
	for (int i = 0; i < NCLI; i++) {
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		struct smcr_info in;
		IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
		char b[5];
		IT_CHECK(it_read_all(fd, b, 5));
		IT_CHECK(it_write_all(fd, b, 5));
		char c;
		IT_CHECK(smcr_recv(fd, &c, 1, 0) == 0); /* the client's close at its exit */
		smcr_close(fd);
		/* Its link group ends with the client's exit (idle LGs live 600 s otherwise). */
		IT_CHECK(it_poll_until(no_lg, NULL, 10000, 1000));
		sh->lg_ended++;
		sh->served = i + 1;
	}
	smcr_close(lfd);
	return 0;
}

static int client(void *arg)
{
	int how = (int)(intptr_t)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	IT_CHECK(it_write_all(fd, "hello", 5));
	char b[5];
	IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "hello", 5) == 0);
	if (how == 0)
		smcr_close(fd);
	if (how == 2)
		exit(0); /* returning from main: the same exit handlers */
	return 0;	 /* it_fork: exit(), so the handlers run */
}

static void test_client_exit_is_orderly(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	snprintf(logpath, sizeof(logpath), "/tmp/it_exitclean.%d.log", (int)getpid());
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	pid_t s = it_fork(server, NULL);
	for (int i = 0; i < NCLI; i++) {
		pid_t c = it_fork(client, (void *)(intptr_t)i);
		assert_int_equal(it_wait(c, 20000), 0);
		it_wait_at_least(&sh->served, i + 1);
	}
	smcr_close(lfd);
	assert_int_equal(it_wait(s, 20000), 0);
	assert_int_equal(sh->lg_ended, NCLI);
	FILE *f = fopen(logpath, "r");
	assert_non_null(f);
	char line[512];
	int bad = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "completion error") || strstr(line, " down: ")) {
			fprintf(stderr, "server log: %s", line);
			bad++;
		}
	}
	fclose(f);
	unlink(logpath);
	assert_int_equal(bad, 0);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_client_exit_is_orderly),
	};
	return IT_MAIN(tests);
}
