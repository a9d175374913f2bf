/* test_shm_quiet.c: the shm provider's device thread stays asleep when nothing concerns it
 * (docs/parts/robust.md "shm log storm"; dev.h rule 5 for the peer-exit case).
 *
 *  - other processes opening and closing shm devices in the same rendezvous directory never
 *    connect to a live device (the stale-socket clean-up used to connect to every socket it
 *    found: each live device accepted, saw the hang-up and logged "peer connection down",
 *    once per device opened anywhere on the host);
 *  - dead devices' files are still cleaned up by the next open;
 *  - a peer process that exits (cleanly or killed) is seen as one peer connection down, the
 *    QP goes to ERR, and afterwards the device thread sleeps (no wake-ups, no CPU);
 *  - out of fds, a pending connection does not make the device thread spin on its readable
 *    listener, and is accepted once fds are available again.
 *
 * Child processes are this executable re-run with a role argument (no fork of a process
 * whose device thread runs). The parent's log (SMCR_LOG=debug) goes to a file it counts. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "conf_lib.h"
#include "dev/shm/shm.h"
#include "util/clock.h"
#include "util/log.h"

extern char **environ;

static char g_dir[64];
static char g_log[96];
static int g_saved_stderr = -1;

/* ---- children ---------------------------------------------------------------------------- */

/* "open": opens a device and closes it. "crash": opens one and _exit()s (a killed process:
 * its socket and lock files stay behind). */
static int child_open(int close_it)
{
	struct dev_device *d;
	if (dev_open("shm", &d))
		return 2;
	if (close_it)
		dev_close(d);
	_exit(0);
}

/* "peer <gid hex> <qpn> <mode>": connects a QP to the parent's, answers its ping, then
 * leaves: mode "exit" closes everything, "kill" _exit()s at once. Prints its own GID and
 * QPN on stdout first (the parent reads them). */
static int child_peer(const char *gidhex, const char *qpn_s, const char *mode)
{
	struct dev_gid g;
	for (int i = 0; i < DEV_GID_LEN; i++) {
		unsigned v;
		if (sscanf(gidhex + 2 * i, "%2x", &v) != 1)
			return 3;
		g.raw[i] = (uint8_t)v;
	}
	uint32_t dqpn = (uint32_t)strtoul(qpn_s, NULL, 0);
	struct side s;
	if (side_open(&s, 64))
		return 4;
	struct dev_qp *q = qp_new(&s, 16, 16, 0);
	for (int i = 0; i < DEV_GID_LEN; i++)
		printf("%02x", s.gid.raw[i]);
	printf(" %u\n", q->qp_num);
	fflush(stdout);
	qp_init(q);
	qp_rtr(q, &g, dqpn);
	qp_rts(q, 7);
	post_recv(&s, q, 0, 64, 2);
	uint8_t m[8] = "ping";
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
	struct dev_send_wr wr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = DEV_WR_SEND,
				  .send_flags = DEV_SEND_INLINE | DEV_SEND_SIGNALED };
	if (dev_post_send(q, &wr, NULL))
		return 5;
	expect_wc(s.scq, 1, DEV_WC_SUCCESS, DEV_WC_SEND);
	expect_wc(s.rcq, 2, DEV_WC_SUCCESS, DEV_WC_RECV);	/* the parent's answer */
	if (strcmp(mode, "kill") == 0)
		_exit(0);
	assert_int_equal(dev_destroy_qp(q), 0);
	side_close(&s);
	_exit(0);
}

/* ---- parent helpers ------------------------------------------------------------------------ */

static pid_t spawn_self(const char *const args[], int *out_fd)
{
	char *argv[8] = { "/proc/self/exe" };
	int n = 1;
	for (; args[n - 1] && n < 7; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	int p[2] = { -1, -1 };
	if (out_fd) {
		assert_int_equal(pipe(p), 0);
		posix_spawn_file_actions_adddup2(&fa, p[1], 1);
		posix_spawn_file_actions_addclose(&fa, p[0]);
	}
	/* the children log to the test's real stderr, not into the parent's counted log */
	posix_spawn_file_actions_adddup2(&fa, g_saved_stderr, 2);
	char exe[4096];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
	assert_true(k > 0);
	exe[k] = 0;
	pid_t pid;
	assert_int_equal(posix_spawn(&pid, exe, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	if (out_fd) {
		close(p[1]);
		*out_fd = p[0];
	}
	return pid;
}

static int wait_child(pid_t pid)
{
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int count_log(const char *needle)
{
	FILE *f = fopen(g_log, "r");
	assert_non_null(f);
	char line[512];
	int n = 0;
	while (fgets(line, sizeof line, f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

static int count_dir(const char *suffix)
{
	DIR *d = opendir(g_dir);
	assert_non_null(d);
	struct dirent *e;
	int n = 0;
	size_t sl = strlen(suffix);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l > sl && strcmp(e->d_name + l - sl, suffix) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* The threads this process had before any device was opened (main's first lines): the
 * caller and a sanitizer's own threads (TSan's background thread, started at the first
 * pthread_create, wakes every ~100 ms, so a 300 ms window counted 3 or 4 of its wake-ups
 * by phase alone, and 4 failed the test under TSan now and then). */
#define BASE_TIDS_MAX 16
static pid_t base_tids[BASE_TIDS_MAX];
static int base_ntids;

static void *noop_thread(void *arg)
{
	*(pid_t *)arg = gettid();
	return NULL;
}

static void note_base_threads(void)
{
	/* TSan starts its background thread at the first pthread_create: make it exist now */
	pthread_t t;
	pid_t gone = 0;
	if (pthread_create(&t, NULL, noop_thread, &gone) == 0)
		pthread_join(t, NULL);
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && base_ntids < BASE_TIDS_MAX) {
		pid_t id = (pid_t)atoi(e->d_name);
		/* not the joined thread, in case its entry lingers: its number may be reused */
		if (e->d_name[0] != '.' && id != gone)
			base_tids[base_ntids++] = id;
	}
	closedir(d);
}

static bool is_base_thread(pid_t t)
{
	for (int i = 0; i < base_ntids; i++)
		if (base_tids[i] == t)
			return true;
	return false;
}

/* Voluntary context switches of every thread started since main began but the caller's
 * (the device's threads): a thread that sleeps in epoll_wait without timeout adds none;
 * a 10 ms ticker adds ~100 a second. */
static long other_threads_switches(void)
{
	DIR *d = opendir("/proc/self/task");
	assert_non_null(d);
	struct dirent *e;
	long sum = 0;
	pid_t me = gettid();
	while ((e = readdir(d))) {
		pid_t t = (pid_t)atoi(e->d_name);
		if (e->d_name[0] == '.' || t == me || is_base_thread(t))
			continue;
		char path[300], line[256];
		snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof line, f))
			if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
				sum += atol(line + 24);
		fclose(f);
	}
	closedir(d);
	return sum;
}

static int setup(void **state)
{
	(void)state;
	snprintf(g_dir, sizeof g_dir, "/tmp/smcr-quiet-XXXXXX");
	assert_non_null(mkdtemp(g_dir));
	setenv("SMCR_SHM_DIR", g_dir, 1);
	snprintf(g_log, sizeof g_log, "%s.log", g_dir);
	g_saved_stderr = dup(2);
	int fd = open(g_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	dup2(fd, 2);
	close(fd);
	smcr_log_set_level(SMCR_LOG_DEBUG);
	return 0;
}

/* Back to the real stderr (cmocka's failure messages go there). */
static void stop_log(void)
{
	if (g_saved_stderr < 0)
		return;
	smcr_log_set_level(SMCR_LOG_WARN);
	dup2(g_saved_stderr, 2);
	close(g_saved_stderr);
	g_saved_stderr = -1;
}

static int teardown(void **state)
{
	(void)state;
	stop_log();
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s %s", g_dir, g_log);
	if (system(cmd) != 0)
		return -1;
	return 0;
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_opens_elsewhere_do_not_touch_live_device(void **state)
{
	(void)state;
	struct dev_device *d;
	assert_int_equal(dev_open("shm", &d), 0);
	int socks = count_dir(".sock");
	assert_int_equal(socks, 1);
	for (int i = 0; i < 12; i++) {
		const char *args[] = { "open", NULL };
		assert_int_equal(wait_child(spawn_self(args, NULL)), 0);
	}
	usleep(50 * 1000);	/* a connection would have been accepted and dropped by now */
	dev_close(d);
	stop_log();
	int downs = count_log("peer connection down");
	if (downs != 0)
		fail_msg("a live device was connected to by other devices' opens (%d times)", downs);
	assert_int_equal(count_dir(".sock"), 0);	/* every device cleaned up after itself */
}

static void test_dead_devices_files_are_cleaned(void **state)
{
	(void)state;
	for (int i = 0; i < 3; i++) {
		const char *args[] = { "crash", NULL };
		assert_int_equal(wait_child(spawn_self(args, NULL)), 0);
	}
	/* each open cleaned up the files of the device that died before it */
	assert_int_equal(count_dir(".sock"), 1);
	struct dev_device *d;
	assert_int_equal(dev_open("shm", &d), 0);
	assert_int_equal(count_dir(".sock"), 1);	/* only ours */
	dev_close(d);
	assert_int_equal(count_dir(".sock"), 0);
	DIR *dd = opendir(g_dir);
	struct dirent *e;
	int left = 0;
	while ((e = readdir(dd)))
		left += e->d_name[0] != '.';
	closedir(dd);
	assert_int_equal(left, 0);	/* no other file either */
}

static void peer_exit(const char *mode)
{
	struct side s;
	assert_int_equal(side_open(&s, 64), 0);
	struct dev_qp *q = qp_new(&s, 16, 16, 0);
	char hex[2 * DEV_GID_LEN + 1], qpn[16];
	for (int i = 0; i < DEV_GID_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", s.gid.raw[i]);
	snprintf(qpn, sizeof qpn, "%u", q->qp_num);
	const char *args[] = { "peer", hex, qpn, mode, NULL };
	int out;
	pid_t pid = spawn_self(args, &out);
	char line[128] = { 0 };
	ssize_t n = read(out, line, sizeof line - 1);
	assert_true(n > 0);
	close(out);
	char phex[64];
	unsigned pqpn;
	assert_int_equal(sscanf(line, "%63s %u", phex, &pqpn), 2);
	struct dev_gid pg;
	for (int i = 0; i < DEV_GID_LEN; i++) {
		unsigned v;
		assert_int_equal(sscanf(phex + 2 * i, "%2x", &v), 1);
		pg.raw[i] = (uint8_t)v;
	}
	qp_init(q);
	qp_rtr(q, &pg, pqpn);
	qp_rts(q, 7);
	post_recv(&s, q, 0, 64, 3);
	expect_wc(s.rcq, 3, DEV_WC_SUCCESS, DEV_WC_RECV);	/* the child's ping */
	uint8_t m[8] = "pong";
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
	struct dev_send_wr wr = { .wr_id = 4, .sg_list = &sg, .num_sge = 1, .opcode = DEV_WR_SEND,
				  .send_flags = DEV_SEND_INLINE | DEV_SEND_SIGNALED };
	assert_int_equal(dev_post_send(q, &wr, NULL), 0);
	expect_wc(s.scq, 4, DEV_WC_SUCCESS, DEV_WC_SEND);
	assert_int_equal(wait_child(pid), 0);
	/* the peer is gone: the QP is in ERR in bounded time (dev.h rule 5) */
	assert_int_equal(wait_state(q, DEV_QPS_ERR, WAIT_MS), 0);
	usleep(50 * 1000);
	/* ... and from then on the device thread sleeps: no ticks, no spin */
	long sw0 = other_threads_switches();
	struct timespec c0, c1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	usleep(300 * 1000);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	long sw = other_threads_switches() - sw0;
	long cpu_us = (c1.tv_sec - c0.tv_sec) * 1000000L + (c1.tv_nsec - c0.tv_nsec) / 1000;
	int downs = count_log("peer connection down");
	stop_log();
	assert_int_equal(dev_destroy_qp(q), 0);
	side_close(&s);
	if (sw > 3 || cpu_us > 20000)
		fail_msg("after the peer left (%s) the device thread woke %ld times, %ld us CPU in "
			 "300 ms", mode, sw, cpu_us);
	/* our dial to the peer, and its dial to us: at most two connections, each down once */
	if (downs < 1 || downs > 2)
		fail_msg("%d 'peer connection down' lines for one peer leaving (%s)", downs, mode);
}

static void test_peer_exit_then_quiet(void **state)
{
	(void)state;
	peer_exit("exit");
}

static void test_peer_killed_then_quiet(void **state)
{
	(void)state;
	peer_exit("kill");
}

static int highest_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	struct dirent *e;
	int hi = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) > hi)
			hi = atoi(e->d_name);
	closedir(d);
	return hi;
}

static void test_accept_out_of_fds_does_not_spin(void **state)
{
	(void)state;
	struct dev_device *d;
	assert_int_equal(dev_open("shm", &d), 0);
	struct dev_gid_entry ge;
	assert_int_equal(dev_query_gid(d, 1, 0, &ge), 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/", g_dir);
	for (int i = 0; i < DEV_GID_LEN; i++)
		n += snprintf(sa.sun_path + n, sizeof sa.sun_path - (size_t)n, "%02x", ge.gid.raw[i]);
	snprintf(sa.sun_path + n, sizeof sa.sun_path - (size_t)n, ".sock");
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);

	/* Use up every fd this process may have (a low soft limit keeps it quick). */
	struct rlimit old, lim;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)highest_fd() + 32;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
	int cap = (int)lim.rlim_cur, nfill = 0;
	int *fill = calloc((size_t)cap, sizeof *fill);
	assert_non_null(fill);
	errno = 0;
	while (nfill < cap) {
		int f = dup(s);
		if (f < 0)
			break;
		fill[nfill++] = f;
	}
	assert_int_equal(errno, EMFILE);

	/* A peer connects: the device's listener is readable, its accept fails with EMFILE. */
	assert_int_equal(connect(s, (struct sockaddr *)&sa, sizeof sa), 0);
	usleep(20 * 1000);
	/* CPU of the process while this thread sleeps: the device thread's (no fd is left
	 * to read /proc with) */
	struct timespec c0, c1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	usleep(300 * 1000);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	long cpu_us = (c1.tv_sec - c0.tv_sec) * 1000000L + (c1.tv_nsec - c0.tv_nsec) / 1000;

	/* fds back: the connection is accepted; closing it is then one peer down */
	for (int i = 0; i < nfill; i++)
		close(fill[i]);
	free(fill);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	usleep(300 * 1000);	/* > the accept pause */
	close(s);
	int downs = 0;
	for (int i = 0; i < 200 && !downs; i++) {
		usleep(10 * 1000);
		downs = count_log("peer connection down");
	}
	dev_close(d);
	stop_log();
	/* paused: 10 ms ticks (~30 in 300 ms, a few us each), no spin */
	if (cpu_us > 30000)
		fail_msg("out of fds, the device thread used %ld us CPU in 300 ms", cpu_us);
	assert_int_equal(downs, 1);
}

int main(int argc, char **argv)
{
	note_base_threads(); /* before any device thread exists */
	if (conf_use_shm())
		return 1;
	if (argc >= 2 && strcmp(argv[1], "open") == 0)
		return child_open(1);
	if (argc >= 2 && strcmp(argv[1], "crash") == 0)
		return child_open(0);
	if (argc >= 5 && strcmp(argv[1], "peer") == 0)
		return child_peer(argv[2], argv[3], argv[4]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_opens_elsewhere_do_not_touch_live_device,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_dead_devices_files_are_cleaned, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_peer_exit_then_quiet, setup, teardown),
		cmocka_unit_test_setup_teardown(test_peer_killed_then_quiet, setup, teardown),
		cmocka_unit_test_setup_teardown(test_accept_out_of_fds_does_not_spin, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
