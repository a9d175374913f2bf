/* smcr-plcost: nanoseconds per call on fds that are not smcr sockets: write+read of one byte
 * on a pipe, a zero-timeout poll of it, and write+read of one byte on a loopback TCP pair
 * (under smcr-run with rules that keep it TCP, a socket of the interposer in TCP mode, whose
 * calls go through the socket layer's lookup to the kernel). Run it plain and under smcr-run
 * (run.sh does both in turns); the difference is what the interposer costs such a call
 * (issue 21: one table lookup on top of libc).
 *
 * Each figure is given twice: the mean over all calls, and the best batch (the lowest mean
 * of 1000 batches of 1000 calls), which a shared machine moves much less: a batch in which
 * the process lost its core shows in the mean, not in the best. Prints one line:
 * "<label> pipe MEAN BEST poll MEAN BEST tcp MEAN BEST". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 1000

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

enum op { OP_WR, OP_POLL };

static int once(enum op op, int w, int r)
{
	char b = 'x';
	if (op == OP_WR)
		return write(w, &b, 1) == 1 && read(r, &b, 1) == 1 ? 0 : -1;
	struct pollfd pf = { .fd = r, .events = POLLIN };
	return poll(&pf, 1, 0) < 0 ? -1 : 0;
}

static int measure(enum op op, int w, int r, long batches, double *mean, double *best)
{
	*best = 1e18;
	double t0 = now_ns();
	for (long k = 0; k < batches; k++) {
		double b0 = now_ns();
		for (int i = 0; i < BATCH; i++)
			if (once(op, w, r) < 0)
				return -1;
		double d = (now_ns() - b0) / BATCH;
		if (d < *best)
			*best = d;
	}
	*mean = (now_ns() - t0) / ((double)batches * BATCH);
	return 0;
}

static int tcp_pair(int *a, int *b)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&sa, &sl) < 0)
		return -1;
	*a = socket(AF_INET, SOCK_STREAM, 0);
	if (*a < 0 || connect(*a, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	*b = accept(l, NULL, NULL);
	close(l);
	return *b < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	long batches = argc > 2 ? atol(argv[2]) : 1000;
	int p[2], ta, tb;
	if (pipe(p) < 0 || tcp_pair(&ta, &tb) < 0)
		return 1;
	double m[3], b[3];
	if (measure(OP_WR, p[1], p[0], batches, &m[0], &b[0]) ||
	    measure(OP_POLL, p[1], p[0], batches, &m[1], &b[1]) ||
	    measure(OP_WR, ta, tb, batches, &m[2], &b[2]))
		return 1;
	printf("%s pipe %.1f %.1f poll %.1f %.1f tcp %.1f %.1f\n", argc > 1 ? argv[1] : "run",
	       m[0], b[0], m[1], b[1], m[2], b[2]);
	return 0;
}
