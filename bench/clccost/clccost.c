/* clccost.c: the cost of the CLC exchange alone, on loopback TCP, next to TCP's own
 * connect-rate loop (smcr-perf -t connect: connect, one 64-byte exchange, close).
 *
 *   tcp:  connect, 64 B request, 64 B answer, close                        (what TCP does)
 *   clc:  connect, 44 B "Proposal" ->, <- 68 B "Accept", 68 B "Confirm" ->, then the same
 *         64 B exchange and close over TCP (the CLC messages' sizes, no SMC-R at all)
 *
 * The ratio tcp/clc is the best connect-rate ratio an SMC-R stack can reach when its
 * handshake rides on TCP and everything else were free. A server thread, blocking calls,
 * one connection at a time, as smcr-perf.
 *
 * Then the same loop over smcr (a forked server process, SMCR_RULES "use smc both * *"),
 * and over plain TCP through the same process layout, each timed by phase on the client:
 * connect (socket + connect), exchange (send + recv), close. Usage: smcr-clccost [seconds [tcp|smc]] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <smcr/smcr.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int lfd;
static volatile int clc_mode;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int rd(int fd, char *b, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = read(fd, b + got, n - got);
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

static void *server(void *arg)
{
	(void)arg;
	char b[128];
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (clc_mode) {
			if (rd(fd, b, 44) || write(fd, b, 68) != 68 || rd(fd, b, 68)) {
				close(fd);
				continue;
			}
		}
		if (rd(fd, b, 64) == 0)
			(void)!write(fd, b, 64);
		(void)!read(fd, b, 1); /* the client's close */
		close(fd);
	}
}

static double run(struct sockaddr_in *sa, int clc, double secs)
{
	clc_mode = clc;
	char b[128];
	memset(b, 0xa5, sizeof(b));
	long n = 0;
	double t0 = now(), t;
	do {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)sa, sizeof(*sa)) < 0) {
			perror("connect");
			exit(1);
		}
		if (clc && (write(fd, b, 44) != 44 || rd(fd, b, 68) || write(fd, b, 68) != 68))
			exit(1);
		if (write(fd, b, 64) != 64 || rd(fd, b, 64))
			exit(1);
		close(fd);
		n++;
		t = now();
	} while (t - t0 < secs);
	return (double)n / (t - t0);
}

/* ---- phases over smcr (or TCP through the smcr API with rule tcp) ---- */

static void smcr_server_proc(int l)
{
	char b[128];
	for (;;) {
		int fd = smcr_accept(l, NULL, NULL);
		if (fd < 0)
			_exit(0);
		size_t got = 0;
		while (got < 64) {
			ssize_t k = smcr_recv(fd, b + got, 64 - got, 0);
			if (k <= 0)
				break;
			got += (size_t)k;
		}
		if (got == 64)
			(void)smcr_send(fd, b, 64, MSG_NOSIGNAL);
		(void)smcr_recv(fd, b, 1, 0);
		smcr_close(fd);
	}
}

static void phases(const char *rules, double secs)
{
	setenv("SMCR_RULES", rules, 1);
	setenv("SMCR_CONFIG", "/nonexistent", 1);
	int l = smcr_socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	if (smcr_bind(l, (struct sockaddr *)&sa, sl) < 0 || smcr_listen(l, 128) < 0)
		exit(1);
	smcr_getsockname(l, (struct sockaddr *)&sa, &sl);
	pid_t pid = fork();
	if (pid == 0)
		smcr_server_proc(l);
	smcr_close(l);
	char b[128];
	memset(b, 0x5a, sizeof(b));
	/* a first connection brings the link group up (not measured) */
	double tc = 0, tx = 0, tk = 0;
	long n = -1;
	double t0 = now(), t = t0;
	while (n < 0 || t - t0 < secs) {
		double a = now();
		int fd = smcr_socket(AF_INET, SOCK_STREAM, 0);
		if (smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			perror("smcr_connect");
			exit(1);
		}
		double bt = now();
		size_t got = 0;
		if (smcr_send(fd, b, 64, MSG_NOSIGNAL) != 64)
			exit(1);
		while (got < 64) {
			ssize_t k = smcr_recv(fd, b + got, 64 - got, 0);
			if (k <= 0)
				exit(1);
			got += (size_t)k;
		}
		double c = now();
		smcr_close(fd);
		t = now();
		if (n < 0) {
			n = 0;
			t0 = t;
			continue;
		}
		tc += bt - a;
		tx += c - bt;
		tk += t - c;
		n++;
	}
	struct smcr_info in;
	socklen_t il = sizeof(in);
	int fd = smcr_socket(AF_INET, SOCK_STREAM, 0);
	const char *mode = "?";
	if (smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    smcr_getsockopt(fd, SOL_SMCR, SMCR_INFO, &in, &il) == 0)
		mode = smcr_mode_name(in.mode);
	smcr_close(fd);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("[%s] ", mode);
	printf("%-22s %6.0f conn/s: connect %5.1f us, exchange %5.1f us, close %5.1f us\n", rules,
	       (double)n / (t - t0), tc / (double)n * 1e6, tx / (double)n * 1e6, tk / (double)n * 1e6);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	if (argc > 2) { /* "tcp" or "smc": that phase run only (profiling) */
		phases(strcmp(argv[2], "smc") == 0 ? "use smc both * *" : "use tcp both * *", secs);
		return 0;
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(lfd, (struct sockaddr *)&sa, sl) < 0 || listen(lfd, 128) < 0)
		return 1;
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	pthread_t th;
	pthread_create(&th, NULL, server, NULL);
	double r[2][3];
	for (int round = 0; round < 3; round++)
		for (int m = 0; m < 2; m++)
			r[m][round] = run(&sa, m, secs);
	for (int m = 0; m < 2; m++)
		printf("%s: %.0f %.0f %.0f conn/s\n", m ? "tcp+clc" : "tcp    ", r[m][0], r[m][1],
		       r[m][2]);
	double a = (r[0][0] + r[0][1] + r[0][2]) / 3, c = (r[1][0] + r[1][1] + r[1][2]) / 3;
	printf("ratio tcp+clc / tcp: %.2fx\n", c / a);
	/* each in a process of its own: the rules are read once per process */
	for (int round = 0; round < 2; round++) {
		for (int m = 0; m < 2; m++) {
			fflush(NULL);
			pid_t p = fork();
			if (p == 0) {
				phases(m ? "use smc both * *" : "use tcp both * *", secs);
				fflush(NULL);
				_exit(0);
			}
			waitpid(p, NULL, 0);
		}
	}
	return 0;
}
