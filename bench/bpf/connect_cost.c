/* connect_cost.c: time of connect()+accept()+close() on loopback, both ends in this
 * process, with or without the SMC-R opt-in on both sockets (docs/parts/bpf.md,
 * "Measured costs"). Run by connect-cost.sh, which places it in a covered or uncovered
 * cgroup and a fresh network namespace. Prints the median and the minimum, over rounds,
 * of the mean time per connection in microseconds, and how many connections ended SMC.
 *
 *   smcr-bench-connect [--optin] [--count N] [--rounds R] [--port P]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bpf/optin.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"optin", no_argument, NULL, 'o'},
	    {"count", required_argument, NULL, 'n'},
	    {"rounds", required_argument, NULL, 'r'},
	    {"port", required_argument, NULL, 'p'},
	    {NULL, 0, NULL, 0},
	};
	int optin = 0, count = 5000, rounds = 5, port = 7400, c, one = 1, smc = 0;

	while ((c = getopt_long(argc, argv, "on:r:p:", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			optin = 1;
			break;
		case 'n':
			count = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'p':
			port = atoi(optarg);
			break;
		default:
			return 2;
		}
	}
	if (count <= 0 || rounds <= 0 || rounds > 100)
		return 2;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (optin && smcr_optin_enable(l, NULL) != 0) {
		fprintf(stderr, "opt-in refused: programs not installed for this cgroup?\n");
		return 1;
	}
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1024)) {
		perror("listen");
		return 1;
	}
	double per[100];
	for (int r = 0; r < rounds; r++) {
		double t0 = now_us();
		for (int i = 0; i < count; i++) {
			int s = socket(AF_INET, SOCK_STREAM, 0);
			if (optin && smcr_optin_enable(s, NULL) != 0)
				return 1;
			if (connect(s, (struct sockaddr *)&a, sizeof(a))) {
				perror("connect");
				return 1;
			}
			int x = accept(l, NULL, NULL);
			if (x < 0) {
				perror("accept");
				return 1;
			}
			if (optin) /* what the engine would do before choosing CLC or TCP */
				smc += smcr_optin_result(s, NULL) == SMCR_OPTIN_SMC &&
				       smcr_optin_result(x, NULL) == SMCR_OPTIN_SMC;
			close(x); /* server first: its TIME_WAIT does not hold client ports */
			close(s);
		}
		per[r] = (now_us() - t0) / count;
	}
	qsort(per, (size_t)rounds, sizeof(per[0]), cmp_d);
	printf("%.1f %.1f %d\n", per[rounds / 2], per[0], smc);
	return 0;
}
