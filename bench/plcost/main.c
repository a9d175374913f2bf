/* smcr-plcost: nanoseconds per call of write+read on a pipe, and of poll on it, for calls
 * on fds that are not smcr sockets. Run it plain and under smcr-run (run.sh does both in
 * turns); the difference is what the interposer costs such a call (issue 21 item 4: one
 * table lookup on top of libc). Prints one line: "<label> write+read NS poll NS". */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 1000000;
	int p[2];
	if (pipe(p) < 0)
		return 1;
	char b = 'x';
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		if (write(p[1], &b, 1) != 1 || read(p[0], &b, 1) != 1)
			return 1;
	}
	double t1 = now_ns();
	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	for (long i = 0; i < n; i++)
		if (poll(&pf, 1, 0) < 0)
			return 1;
	double t2 = now_ns();
	printf("%s write+read %.1f poll %.1f\n", argc > 1 ? argv[1] : "run", (t1 - t0) / (double)n,
	       (t2 - t1) / (double)n);
	return 0;
}
