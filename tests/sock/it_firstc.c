/* it_firstc.c: concurrent first contacts of several client PROCESSES to one server
 * (docs/parts/robust.md "Concurrent first contacts"). Each client process opens its own
 * device (a new peer), so every connection of a round is a first contact, and the server
 * runs them concurrently behind its accept queue (docs/parts/connect.md). Every client must
 * get SMC-R; a fallback prints its mode and reasons (SOL_SMCR info).
 *
 * FIRSTC_ROUNDS (default 2) rounds of FIRSTC_CLIENTS (default 4) processes; FIRSTC_HOG=1
 * adds a process spinning on CPU 0 meanwhile (the load that showed the failure). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "itlib.h"
#include "sock/sock.h"

#define MAXCLI 32

struct shared {
	_Atomic int go;		/* round number the clients of that round wait for */
	_Atomic int cli_mode[MAXCLI];
	_Atomic uint32_t cli_local[MAXCLI], cli_peer[MAXCLI];
	_Atomic int srv_smcr, srv_tcp, srv_done;
};
static struct shared *sh;
static int lfd;
static uint16_t port;
static int nrounds = 2, ncli = 4;

static int env_int(const char *n, int d)
{
	const char *v = getenv(n);
	return v && *v ? atoi(v) : d;
}

static int server(void *arg)
{
	(void)arg;
	it_child_env(0);
	for (int i = 0; i < nrounds * ncli; i++) {
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		struct smcr_info in;
		IT_CHECK(it_info(fd, &in));
		if (in.mode == SMCR_MODE_SMCR)
			sh->srv_smcr++;
		else
			sh->srv_tcp++;
		char b[5];
		IT_CHECK(it_read_all(fd, b, 5));
		IT_CHECK(it_write_all(fd, b, 5));
		smcr_close(fd);
	}
	sh->srv_done = 1;
	return 0;
}

static int client(void *arg)
{
	int idx = (int)(intptr_t)arg;
	int round = sh->go + 1;
	it_child_env(1 + idx);
	smcr_close(lfd);
	if (!env_int("FIRSTC_COLD", 0))
		(void)sock_engine(); /* device open before the start line: all connect at once */
	while (sh->go < round)
		usleep(200);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	sh->cli_mode[idx] = in.mode;
	sh->cli_local[idx] = in.local_reason;
	sh->cli_peer[idx] = in.peer_reason;
	IT_CHECK(it_write_all(fd, "first", 5));
	char b[5];
	IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "first", 5) == 0);
	smcr_close(fd);
	return 0;
}

static void test_concurrent_first_contacts(void **state)
{
	(void)state;
	nrounds = env_int("FIRSTC_ROUNDS", 2);
	ncli = env_int("FIRSTC_CLIENTS", 4);
	if (ncli > MAXCLI)
		ncli = MAXCLI;
	memset(sh, 0, sizeof(*sh));
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	pid_t hogs[2] = { -1, -1 };
	for (int h = 0; h < env_int("FIRSTC_HOG", 0) && h < 2; h++) {
		pid_t hog = hogs[h] = fork();
		if (hog == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			cpu_set_t cs;
			CPU_ZERO(&cs);
			CPU_SET(h, &cs);
			sched_setaffinity(0, sizeof cs, &cs);
			for (volatile unsigned long x = 0;; x++)
				;
		}
	}
	pid_t s = it_fork(server, NULL);
	int fallbacks = 0;
	for (int r = 0; r < nrounds; r++) {
		pid_t c[MAXCLI];
		for (int i = 0; i < ncli; i++) {
			sh->cli_mode[i] = 0;
			c[i] = it_fork(client, (void *)(intptr_t)i);
		}
		usleep(100 * 1000);
		sh->go = r + 1;
		for (int i = 0; i < ncli; i++) {
			int st = it_wait(c[i], 30000);
			if (st != 0) {
				fprintf(stderr, "round %d client %d: exit %d\n", r, i, st);
				fallbacks++;
			}
			if (sh->cli_mode[i] != SMCR_MODE_SMCR) {
				fallbacks++;
				fprintf(stderr, "round %d client %d: mode %s, local %s (%#x), peer %s "
					"(%#x)\n", r, i, smcr_mode_name(sh->cli_mode[i]),
					smcr_reason_name(sh->cli_local[i]), sh->cli_local[i],
					smcr_reason_name(sh->cli_peer[i]), sh->cli_peer[i]);
			}
		}
	}
	int srv_st = it_wait(s, 30000);
	for (int h = 0; h < 2; h++)
		if (hogs[h] > 0) {
			kill(hogs[h], SIGKILL);
			waitpid(hogs[h], NULL, 0);
		}
	fprintf(stderr, "%d rounds x %d clients: %d fallbacks (server: %d smcr, %d tcp)\n",
		nrounds, ncli, fallbacks, sh->srv_smcr, sh->srv_tcp);
	smcr_close(lfd);
	assert_int_equal(srv_st, 0);
	assert_int_equal(fallbacks, 0);
	assert_int_equal(sh->srv_smcr, nrounds * ncli);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_first_contacts),
	};
	return IT_MAIN(tests);
}
