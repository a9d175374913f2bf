/* clccost.c: the cost of the CLC exchange alone, on loopback TCP, next to TCP's own
 * connect-rate loop (smcr-perf -t connect: connect, one 64-byte exchange, close).
 *
 *   tcp:  connect, 64 B request, 64 B answer, close                        (what TCP does)
 *   clc:  connect, 44 B "Proposal" ->, <- 68 B "Accept", 68 B "Confirm" ->, then the same
 *         64 B exchange and close over TCP (the CLC messages' sizes, no SMC-R at all)
 *
 * The ratio tcp/clc is the best connect-rate ratio an SMC-R stack can reach when its
 * handshake rides on TCP and everything else were free. A server thread, blocking calls,
 * one connection at a time, as smcr-perf. Usage: smcr-clccost [seconds] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
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

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
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
	return 0;
}
