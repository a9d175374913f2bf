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
 * connect (socket + connect), exchange (send + recv), close; and the timeline of a
 * connection across both processes (both stamp it into shared memory): when the server's
 * accept returns, when it has the request, when the client has the answer.
 *
 *   floor: the SMC-R message sequence with the least work per message (the "protocol
 *          floor"): TCP connect, Proposal (92 B, what smcr sends) ->, <- Accept (68 B),
 *          Confirm (68 B) -> on the TCP connection; then the 64 B request and answer and
 *          the close's C go through memory, as a CDC does: the data and a 44-byte "CDC"
 *          copied into a buffer the other side reads, and one eventfd write to wake it
 *          (the shm doorbell; each side sleeps in read() on its eventfd, as a thread
 *          blocked in recv). The client sends its C and closes its TCP socket; the server
 *          waits for the C, closes. No engine, no signal pair, no locks, no progress
 *          thread, no link group: what a connection costs when SMC-R's messages cost only
 *          the kernel's TCP for CLC and one wake-up per CDC.
 *
 * Usage: smcr-clccost [seconds [tcp|smc|floor]]; floor alone prints tcp, tcp+clc and floor
 * rates in turns (3 rounds) and the ratios, with CPU per connection (both threads). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <smcr/smcr.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int lfd;
static _Atomic int clc_mode; /* 0 tcp, 1 tcp+clc, 2 floor */

/* floor: the "memory" path. One connection at a time (as smcr-perf connect), so one
 * buffer per direction; an eventfd per direction is the doorbell (made once, as a link's
 * are). The CDC is 44 bytes (docs/protocol/wire-formats.md: CDC message), copied with the data. */
struct fl_dir {
	int efd;
	unsigned char data[64];
	unsigned char cdc[44];
	_Atomic int closed; /* the C: a CDC with the close flag */
};
static struct fl_dir to_srv, to_cli;

static void fl_send(struct fl_dir *d, const unsigned char *b, int close_flag, int wake)
{
	unsigned char cdc[44] = { 0xfe, 44 };
	if (b)
		memcpy(d->data, b, 64);
	memcpy(d->cdc, cdc, sizeof(cdc));
	if (close_flag)
		d->closed = 1;
	uint64_t one = 1;
	if (wake)
		(void)!write(d->efd, &one, sizeof(one));
}

static void fl_wait(struct fl_dir *d, unsigned char *b)
{
	uint64_t v;
	if (read(d->efd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		exit(1);
	if (b)
		memcpy(b, d->data, 64);
}

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
		if (clc_mode == 2) {
			unsigned char d[64];
			if (rd(fd, b, 92) || write(fd, b, 68) != 68 || rd(fd, b, 68)) {
				close(fd);
				continue;
			}
			fl_wait(&to_srv, d);  /* request */
			fl_send(&to_cli, d, 0, 1); /* answer */
			fl_wait(&to_srv, NULL); /* the client's C */
			/* our C: written, no doorbell (the client is not asleep on it; shm
			 * rings the doorbell only for an armed sleeper) */
			fl_send(&to_cli, NULL, 1, 0);
			close(fd);
			continue;
		}
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
		if (clc == 2) {
			unsigned char d[64];
			memset(d, 0x5a, sizeof(d));
			if (write(fd, b, 92) != 92 || rd(fd, b, 68) || write(fd, b, 68) != 68)
				exit(1);
			fl_send(&to_srv, d, 0, 1); /* request */
			fl_wait(&to_cli, d);       /* answer */
			fl_send(&to_srv, NULL, 1, 1); /* C */
			close(fd);
			n++;
			t = now();
			continue;
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

/* ---- phases over smcr (or TCP through the smcr API with rule tcp) ----
 *
 * Both ends stamp each connection (CLOCK_MONOTONIC, one clock for both processes) into a
 * shared mapping, so the output is the connection's timeline across the two processes:
 * where the client waits for the server and for how long. Connection i of the client is
 * the server's accept i (one connection at a time). */

#define TL_MAX 65536 /* connections stamped; later ones are counted, not stamped */
enum { TL_C_START, TL_C_CONNECTED, TL_C_SENT, TL_C_ANSWERED, TL_C_CLOSED, TL_C_N };
enum { TL_S_ACCEPTED, TL_S_REQUEST, TL_S_SENT, TL_S_EOF, TL_S_CLOSED, TL_S_N };
struct tl_rec {
	double c[TL_C_N]; /* written by the client process */
	double s[TL_S_N]; /* written by the server process */
};
static struct tl_rec *tl; /* MAP_SHARED, TL_MAX + 1 records */

static void smcr_server_proc(int l)
{
	char b[128];
	for (long i = 0;; i++) {
		int fd = smcr_accept(l, NULL, NULL);
		if (fd < 0)
			_exit(0);
		double *st = i < TL_MAX ? tl[i].s : NULL;
		if (st)
			st[TL_S_ACCEPTED] = now();
		size_t got = 0;
		while (got < 64) {
			ssize_t k = smcr_recv(fd, b + got, 64 - got, 0);
			if (k <= 0)
				break;
			got += (size_t)k;
		}
		if (st)
			st[TL_S_REQUEST] = now();
		if (got == 64)
			(void)smcr_send(fd, b, 64, MSG_NOSIGNAL);
		if (st)
			st[TL_S_SENT] = now();
		(void)smcr_recv(fd, b, 1, 0);
		if (st)
			st[TL_S_EOF] = now();
		smcr_close(fd);
		if (st)
			st[TL_S_CLOSED] = now();
	}
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One line: median, 10th and 90th percentile of v[0..n) in microseconds (sorts v). */
static void tl_line(const char *what, double *v, long n)
{
	if (n <= 0)
		return;
	qsort(v, (size_t)n, sizeof(*v), cmp_dbl);
	printf("    %-58s %7.1f %7.1f %7.1f\n", what, v[n / 2] * 1e6, v[n / 10] * 1e6,
	       v[n * 9 / 10] * 1e6);
}

/* The timeline of connections 1..m-1 (0 brought the link group up; each needs the next
 * one's start). Segments between the two ends' stamps may be negative: the later event
 * of one end happened first. */
static void tl_report(long m)
{
	static const struct {
		const char *what;
		int a_srv, a, b_srv, b; /* segment = (b) - (a); *_srv: a server stamp */
	} seg[] = {
		{ "client: connect (socket + connect)", 0, TL_C_START, 0, TL_C_CONNECTED },
		{ "server: accept returned, after the client's connect did", 0, TL_C_CONNECTED, 1,
		  TL_S_ACCEPTED },
		{ "client: send of the 64 B request", 0, TL_C_CONNECTED, 0, TL_C_SENT },
		{ "server: has the request, after the client's send returned", 0, TL_C_SENT, 1,
		  TL_S_REQUEST },
		{ "server: send of the 64 B answer", 1, TL_S_REQUEST, 1, TL_S_SENT },
		{ "client: has the answer, after the server's send returned", 1, TL_S_SENT, 0,
		  TL_C_ANSWERED },
		{ "client: close", 0, TL_C_ANSWERED, 0, TL_C_CLOSED },
		{ "server: recv saw the end, after the client's close returned", 0, TL_C_CLOSED,
		  1, TL_S_EOF },
		{ "server: close", 1, TL_S_EOF, 1, TL_S_CLOSED },
	};
	if (m > TL_MAX)
		m = TL_MAX;
	if (m < 3)
		return;
	double *v = malloc(sizeof(double) * (size_t)m);
	if (!v)
		return;
	printf("  timeline, us (median, 10th, 90th percentile of %ld connections):\n", m - 2);
	for (size_t k = 0; k < sizeof(seg) / sizeof(seg[0]); k++) {
		long n = 0;
		for (long i = 1; i < m - 1; i++) {
			double a = seg[k].a_srv ? tl[i].s[seg[k].a] : tl[i].c[seg[k].a];
			double b = seg[k].b_srv ? tl[i].s[seg[k].b] : tl[i].c[seg[k].b];
			v[n++] = b - a;
		}
		tl_line(seg[k].what, v, n);
	}
	long n = 0;
	for (long i = 1; i < m - 1; i++)
		v[n++] = tl[i + 1].c[TL_C_START] - tl[i].c[TL_C_START];
	tl_line("whole connection (client's start to its next start)", v, n);
	free(v);
}

static void phases(const char *rules, double secs)
{
	setenv("SMCR_RULES", rules, 1);
	setenv("SMCR_CONFIG", "/nonexistent", 1);
	tl = mmap(NULL, sizeof(*tl) * (TL_MAX + 1), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (tl == MAP_FAILED)
		exit(1);
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
	long n = -1, i = 0;
	double t0 = now(), t = t0;
	for (; n < 0 || t - t0 < secs; i++) {
		double *ct = i < TL_MAX ? tl[i].c : NULL;
		double a = now();
		if (ct)
			ct[TL_C_START] = a;
		int fd = smcr_socket(AF_INET, SOCK_STREAM, 0);
		if (smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			perror("smcr_connect");
			exit(1);
		}
		double bt = now();
		if (ct)
			ct[TL_C_CONNECTED] = bt;
		size_t got = 0;
		if (smcr_send(fd, b, 64, MSG_NOSIGNAL) != 64)
			exit(1);
		if (ct)
			ct[TL_C_SENT] = now();
		while (got < 64) {
			ssize_t k = smcr_recv(fd, b + got, 64 - got, 0);
			if (k <= 0)
				exit(1);
			got += (size_t)k;
		}
		double c = now();
		if (ct)
			ct[TL_C_ANSWERED] = c;
		smcr_close(fd);
		t = now();
		if (ct)
			ct[TL_C_CLOSED] = t;
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
	if (i < TL_MAX)
		tl[i].c[TL_C_START] = now(); /* the last measured connection's "next start" */
	int fd = smcr_socket(AF_INET, SOCK_STREAM, 0);
	const char *mode = "?";
	if (smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    smcr_getsockopt(fd, SOL_SMCR, SMCR_INFO, &in, &il) == 0)
		mode = smcr_mode_name(in.mode);
	smcr_close(fd);
	usleep(20000); /* the server's stamps of the last connection */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("[%s] ", mode);
	printf("%-22s %6.0f conn/s: connect %5.1f us, exchange %5.1f us, close %5.1f us\n", rules,
	       (double)n / (t - t0), tc / (double)n * 1e6, tx / (double)n * 1e6, tk / (double)n * 1e6);
	tl_report(i + 1);
	munmap(tl, sizeof(*tl) * (TL_MAX + 1));
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	if (argc > 2 && strcmp(argv[2], "floor") != 0) { /* "tcp"/"smc": that phase only */
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
	to_srv.efd = eventfd(0, EFD_CLOEXEC);
	to_cli.efd = eventfd(0, EFD_CLOEXEC);
	bool floor_only = argc > 2; /* "floor" */
	static const char *const names[3] = { "tcp    ", "tcp+clc", "floor  " };
	double r[3][3], cpu[3][3];
	for (int round = 0; round < 3; round++)
		for (int m = 0; m < 3; m++) {
			struct rusage u0, u1;
			getrusage(RUSAGE_SELF, &u0);
			double t0 = now();
			r[m][round] = run(&sa, m, secs);
			double el = now() - t0;
			getrusage(RUSAGE_SELF, &u1);
			double us = (double)(u1.ru_utime.tv_sec - u0.ru_utime.tv_sec) * 1e6 +
				    (double)(u1.ru_utime.tv_usec - u0.ru_utime.tv_usec) +
				    (double)(u1.ru_stime.tv_sec - u0.ru_stime.tv_sec) * 1e6 +
				    (double)(u1.ru_stime.tv_usec - u0.ru_stime.tv_usec);
			cpu[m][round] = us / (r[m][round] * el); /* both threads, per connection */
		}
	for (int m = 0; m < 3; m++)
		printf("%s: %.0f %.0f %.0f conn/s, CPU %.0f %.0f %.0f us/conn (both ends)\n",
		       names[m], r[m][0], r[m][1], r[m][2], cpu[m][0], cpu[m][1], cpu[m][2]);
	double a = (r[0][0] + r[0][1] + r[0][2]) / 3, c = (r[1][0] + r[1][1] + r[1][2]) / 3,
	       f = (r[2][0] + r[2][1] + r[2][2]) / 3;
	printf("ratio tcp+clc / tcp: %.2fx\n", c / a);
	printf("ratio floor / tcp:   %.2fx (the SMC-R message sequence at its least work)\n", f / a);
	if (floor_only)
		return 0;
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
