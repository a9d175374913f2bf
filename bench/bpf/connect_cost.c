/* connect_cost.c: time of connect()+accept()+close() on loopback, both ends in this
 * process, with or without the SMC-R opt-in on both sockets (docs/parts/bpf.md,
 * "Measured costs"). Run by connect-cost.sh, which places it in a covered or uncovered
 * cgroup and a fresh network namespace. Prints the median and the minimum, over rounds,
 * of the mean time per connection in microseconds, and how many connections ended SMC.
 *
 *   smcr-bench-connect [--optin | --api] [--count N] [--rounds R] [--port P]
 *
 * --api: the same loop on the smcr API (include/smcr/smcr.h) with no rules, the accepting
 * side in a second thread (an SMC-R connect waits for the server's CLC answers). What it
 * measures depends on the cgroup: covered (option installed), every connection is SMC-R
 * (option exchange, CLC, link group reuse); not covered, it is plain TCP after a failed
 * opt-in (reason BPF_NOT_INSTALLED): the API's own overhead. The last figure printed is
 * then the number of connections that ended in SMC-R mode (SOL_SMCR query).
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

#include <pthread.h>
#include <smcr/smcr.h>

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

/* --api: the accepting thread. Reads one byte (the client's close shows as EOF) so an
 * SMC-R connection is closed by the client first, like the plain loop. */
static int api_lfd;
static void *api_server(void *arg)
{
	long n = (long)arg;
	for (long i = 0; i < n; i++) {
		int x = smcr_accept(api_lfd, NULL, NULL);
		if (x < 0) {
			perror("smcr_accept");
			exit(1);
		}
		char b;
		(void)smcr_recv(x, &b, 1, 0);
		smcr_close(x);
	}
	return NULL;
}

static int api_main(struct sockaddr_in *a, int count, int rounds)
{
	int one = 1, smc = 0;
	double per[100];
	api_lfd = smcr_socket(AF_INET, SOCK_STREAM, 0);
	smcr_setsockopt(api_lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (smcr_bind(api_lfd, (struct sockaddr *)a, sizeof(*a)) || smcr_listen(api_lfd, 1024)) {
		perror("listen");
		return 1;
	}
	pthread_t th;
	if (pthread_create(&th, NULL, api_server, (void *)((long)count * rounds)) != 0)
		return 1;
	for (int r = 0; r < rounds; r++) {
		double t0 = now_us();
		for (int i = 0; i < count; i++) {
			int s = smcr_socket(AF_INET, SOCK_STREAM, 0);
			if (smcr_connect(s, (struct sockaddr *)a, sizeof(*a))) {
				perror("smcr_connect");
				return 1;
			}
			struct smcr_info in;
			socklen_t l = sizeof(in);
			if (smcr_getsockopt(s, SOL_SMCR, SMCR_INFO, &in, &l) == 0 &&
			    in.mode == SMCR_MODE_SMCR)
				smc++;
			smcr_close(s);
		}
		per[r] = (now_us() - t0) / count;
	}
	pthread_join(th, NULL);
	qsort(per, (size_t)rounds, sizeof(per[0]), cmp_d);
	printf("%.1f %.1f %d\n", per[rounds / 2], per[0], smc);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"optin", no_argument, NULL, 'o'},
	    {"api", no_argument, NULL, 'a'},
	    {"count", required_argument, NULL, 'n'},
	    {"rounds", required_argument, NULL, 'r'},
	    {"port", required_argument, NULL, 'p'},
	    {NULL, 0, NULL, 0},
	};
	int api = 0, optin = 0, count = 5000, rounds = 5, port = 7400, c, one = 1, smc = 0;

	while ((c = getopt_long(argc, argv, "aon:r:p:", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			api = 1;
			break;
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
	if (api)
		return api_main(&a, count, rounds);
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
