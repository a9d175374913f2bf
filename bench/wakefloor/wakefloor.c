/* wakefloor.c: what a 64-byte ping-pong between two processes costs when the bytes go
 * through shared memory and the only kernel work is the wake-up, next to TCP loopback, in
 * the same run (docs/design/readiness.md "The floor"). No smcr code: each mode is the
 * least a same-host SMC-R message can cost with that way of waking the receiver.
 *
 *   tcp     blocking send/recv on a loopback TCP connection (TCP_NODELAY): the reference.
 *   evfd    the shm doorbell with one wake-up: the receiver polls the shared sequence
 *           once, marks itself armed, looks again, and sleeps in read() on its eventfd;
 *           the sender copies the message, publishes the sequence and writes the eventfd
 *           only when the receiver is armed. Two system calls per message and side when
 *           both sleep (the sender's write, the receiver's read), as TCP's send and recv.
 *   epoll   the same, the receiver sleeping in epoll_wait on the eventfd and then reading
 *           it: the shape of a thread that waits on a completion fd and its own fd at once.
 *   epollx  epoll with smcr's process layout (the direct sleeper, docs/design/readiness.md
 *           section 4): the eventfd is registered EPOLLEXCLUSIVE in the receiver's epoll
 *           set first and in a second thread's set second (the progress thread's place),
 *           so a doorbell rung while the receiver is not inside epoll_wait wakes that
 *           thread instead (it only goes back to sleep: its registration is
 *           edge-triggered, and the receiver's level-triggered one still shows the
 *           eventfd readable when it gets there).
 *   futex   the same through a futex on the sequence word (no fd at all).
 *   relay   today's base path: the eventfd wakes a second thread of the receiving process
 *           (the "progress thread"), which reads it and writes one byte into an AF_UNIX
 *           pair that the receiving thread sleeps on (poll, then reads the byte): two
 *           wake-ups per message and side.
 *
 * Each round runs every mode for the given seconds, in turns, so the drift of a shared
 * machine hits all alike; it prints per mode the median round trip of each round, the
 * ratio to TCP's in the same round, the context switches (voluntary + involuntary) and
 * the CPU time (user + system) per round trip, both processes together (getrusage). --hog N starts N busy loops
 * (`while (1);`) for the whole run, as `sh -c 'while :; do :; done' &` does.
 *
 * Usage: smcr-wakefloor [-d SECONDS] [-r ROUNDS] [--hog N] [--spin US] [MODE...]
 * --spin US: the receiver polls the sequence for US microseconds before it arms (0). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 64
#define MAX_SAMPLES (1u << 22)

enum mode { M_TCP, M_EVFD, M_EPOLL, M_EPOLLX, M_FUTEX, M_RELAY, M_COUNT };
static const char *mode_name[M_COUNT] = { "tcp", "evfd", "epoll", "epollx", "futex", "relay" };

/* One direction in shared memory. Written by the sender (seq, buf) and by the receiver
 * (armed: set before it sleeps; cleared by the sender that writes the doorbell). */
struct chan {
	_Alignas(64) _Atomic uint32_t seq;
	_Atomic uint32_t armed;
	char buf[MSG];
};

struct shared {
	struct chan ch[2];	/* 0: client -> server, 1: server -> client */
	_Atomic int stop;
	_Atomic long srv_csw;	/* the server's context switches, written at its end */
	_Atomic long srv_cpu;	/* the server's CPU time (ns), written at its end */
};

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static long csw_self(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return u.ru_nvcsw + u.ru_nivcsw;
}

/* CPU time of the calling process so far (user + system), ns. */
static long cpu_self(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000000l +
	       (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1000l;
}

static long spin_ns;

/* The receiving end of one mode's doorbell. */
struct rx {
	enum mode m;
	struct chan *c;
	int efd;	/* evfd, epoll, relay (the relay thread's) */
	int ep;		/* epoll */
	int tok;	/* relay: the receiving thread's end of the AF_UNIX pair */
};

static void futex_wait(_Atomic uint32_t *w, uint32_t v)
{
	(void)syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
	(void)syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Waits until c->seq reaches want (no lost wake-up: arm, look again, then sleep; the
 * sender publishes seq before it reads armed, both sequentially consistent). */
static void rx_wait(struct rx *r, uint32_t want)
{
	struct chan *c = r->c;
	if (spin_ns) {
		uint64_t t0 = now_ns();
		while ((int32_t)(atomic_load(&c->seq) - want) < 0 && now_ns() - t0 < (uint64_t)spin_ns)
			;
	}
	while ((int32_t)(atomic_load(&c->seq) - want) < 0) {
		if (r->m == M_RELAY) {
			/* the relay thread is the one armed; this thread sleeps on its token */
			struct pollfd p = { .fd = r->tok, .events = POLLIN };
			char b[8];
			if (recv(r->tok, b, sizeof(b), MSG_DONTWAIT) > 0)
				continue;
			if ((int32_t)(atomic_load(&c->seq) - want) >= 0)
				break;
			(void)poll(&p, 1, -1);
			(void)!recv(r->tok, b, sizeof(b), MSG_DONTWAIT);
			continue;
		}
		uint32_t cur = atomic_load(&c->seq);
		atomic_store(&c->armed, 1);
		if ((int32_t)(atomic_load(&c->seq) - want) >= 0)
			break;
		uint64_t v;
		struct epoll_event ev;
		if (r->m == M_EVFD) {
			(void)!read(r->efd, &v, sizeof(v));
		} else if (r->m == M_EPOLL || r->m == M_EPOLLX) {
			if (epoll_wait(r->ep, &ev, 1, -1) == 1)
				(void)!read(r->efd, &v, sizeof(v));
		} else {
			futex_wait(&c->seq, cur);
		}
	}
}

static void tx_post(enum mode m, struct chan *c, int efd, const char *msg)
{
	memcpy(c->buf, msg, MSG);
	atomic_fetch_add(&c->seq, 1);
	if (atomic_load(&c->armed) && atomic_exchange(&c->armed, 0)) {
		uint64_t one = 1;
		if (m == M_FUTEX)
			futex_wake(&c->seq);
		else
			(void)!write(efd, &one, sizeof(one));
	}
}

/* relay: the "progress thread" of a process: sleeps in epoll_wait on the eventfd (armed
 * whenever it sleeps), reads it, writes one token byte. */
struct relay {
	struct chan *c;
	int efd, tok_end;
	_Atomic int *stop;
};

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN }, out;
	epoll_ctl(ep, EPOLL_CTL_ADD, r->efd, &ev);
	uint32_t seen = 0; /* the channel starts at 0; a message may come before this thread runs */
	while (!atomic_load(r->stop)) {
		atomic_store(&r->c->armed, 1);
		if (atomic_load(&r->c->seq) == seen && epoll_wait(ep, &out, 1, 100) == 1) {
			uint64_t v;
			(void)!read(r->efd, &v, sizeof(v));
		}
		uint32_t s = atomic_load(&r->c->seq);
		if (s != seen) {
			seen = s;
			(void)!send(r->tok_end, "t", 1, MSG_DONTWAIT);
		}
	}
	(void)!send(r->tok_end, "t", 1, MSG_DONTWAIT); /* the receiver may sleep on it */
	close(ep);
	return NULL;
}

/* epollx: the second thread of a process, asleep on the doorbell behind the receiver. */
struct standby {
	int ep;
	_Atomic int *stop;
};

static void *standby_main(void *arg)
{
	struct standby *sb = arg;
	struct epoll_event ev;
	while (!atomic_load(sb->stop))
		(void)epoll_wait(sb->ep, &ev, 1, 100);
	return NULL;
}

/* The receiver's epoll set (epoll, epollx) and, for epollx, the standby's, registered
 * after it (EPOLLEXCLUSIVE wakes in registration order) and its thread. */
static void epoll_setup(enum mode m, struct rx *r, int efd, struct standby *sb, pthread_t *t,
			_Atomic int *stop)
{
	if (m != M_EPOLL && m != M_EPOLLX)
		return;
	r->ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN | (m == M_EPOLLX ? EPOLLEXCLUSIVE : 0) };
	epoll_ctl(r->ep, EPOLL_CTL_ADD, efd, &ev);
	if (m != M_EPOLLX)
		return;
	sb->ep = epoll_create1(0);
	sb->stop = stop;
	ev.events = EPOLLIN | EPOLLEXCLUSIVE | EPOLLET;
	epoll_ctl(sb->ep, EPOLL_CTL_ADD, efd, &ev);
	pthread_create(t, NULL, standby_main, sb);
}

static void epoll_teardown(enum mode m, struct rx *r, struct standby *sb, pthread_t t)
{
	if (m == M_EPOLLX) {
		pthread_join(t, NULL);
		close(sb->ep);
	}
	if (m == M_EPOLL || m == M_EPOLLX)
		close(r->ep);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct result {
	double median_us, csw_per_rt, cpu_us_per_rt;
	uint64_t rts;
};

static int tcp_pair(int *cfd, int *sfd)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		return -1;
	*cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(*cfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -1;
	*sfd = accept(l, NULL, NULL);
	close(l);
	setsockopt(*cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return *sfd < 0 ? -1 : 0;
}

static bool io_all(int fd, char *b, bool rd)
{
	size_t d = 0;
	while (d < MSG) {
		ssize_t n = rd ? recv(fd, b + d, MSG - d, 0) : send(fd, b + d, MSG - d, 0);
		if (n <= 0)
			return false;
		d += (size_t)n;
	}
	return true;
}

static struct result run(enum mode m, double secs, uint64_t *samp)
{
	struct result res = { 0 };
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return res;
	memset(sh, 0, sizeof(*sh));
	int efd[2] = { eventfd(0, 0), eventfd(0, 0) }; /* the doorbell of ch[i]'s receiver */
	int cfd = -1, sfd = -1;
	if (m == M_TCP && tcp_pair(&cfd, &sfd) < 0) {
		perror("tcp");
		exit(1);
	}
	pid_t pid = fork();
	if (pid == 0) {
		/* server: echo ch[0] into ch[1] */
		char b[MSG];
		struct rx r = { .m = m, .c = &sh->ch[0], .efd = efd[0] };
		pthread_t rt;
		struct relay rl;
		int tp[2] = { -1, -1 };
		struct standby sb;
		pthread_t st;
		epoll_setup(m, &r, efd[0], &sb, &st, &sh->stop);
		if (m == M_RELAY) {
			socketpair(AF_UNIX, SOCK_STREAM, 0, tp);
			r.tok = tp[0];
			rl = (struct relay){ .c = &sh->ch[0], .efd = efd[0], .tok_end = tp[1],
					     .stop = &sh->stop };
			pthread_create(&rt, NULL, relay_main, &rl);
		}
		long c0 = csw_self(), u0 = cpu_self();
		if (m == M_TCP) {
			close(cfd);
			while (io_all(sfd, b, true) && io_all(sfd, b, false))
				;
		} else {
			for (uint32_t i = 1; !atomic_load(&sh->stop); i++) {
				rx_wait(&r, i);
				if (atomic_load(&sh->stop))
					break;
				memcpy(b, sh->ch[0].buf, MSG);
				tx_post(m, &sh->ch[1], efd[1], b);
			}
		}
		atomic_store(&sh->srv_csw, csw_self() - c0);
		atomic_store(&sh->srv_cpu, cpu_self() - u0);
		if (m == M_RELAY)
			pthread_join(rt, NULL);
		epoll_teardown(m, &r, &sb, st);
		_exit(0);
	}
	char out[MSG], in[MSG];
	memset(out, 0x5a, sizeof(out));
	struct rx r = { .m = m, .c = &sh->ch[1], .efd = efd[1] };
	pthread_t rt;
	struct relay rl;
	int tp[2] = { -1, -1 };
	struct standby sb;
	pthread_t st;
	epoll_setup(m, &r, efd[1], &sb, &st, &sh->stop);
	if (m == M_RELAY) {
		socketpair(AF_UNIX, SOCK_STREAM, 0, tp);
		r.tok = tp[0];
		rl = (struct relay){ .c = &sh->ch[1], .efd = efd[1], .tok_end = tp[1],
				     .stop = &sh->stop };
		pthread_create(&rt, NULL, relay_main, &rl);
	}
	if (m == M_TCP)
		close(sfd);
	long c0 = csw_self(), u0 = cpu_self();
	uint64_t t_end = now_ns() + (uint64_t)(secs * 1e9), n = 0;
	for (uint32_t i = 1;; i++) {
		uint64_t a = now_ns();
		if (a >= t_end || n >= MAX_SAMPLES)
			break;
		memcpy(out, &i, sizeof(i));
		if (m == M_TCP) {
			if (!io_all(cfd, out, false) || !io_all(cfd, in, true))
				break;
		} else {
			tx_post(m, &sh->ch[0], efd[0], out);
			rx_wait(&r, i);
			memcpy(in, sh->ch[1].buf, MSG);
		}
		if (memcmp(in, &i, sizeof(i)) != 0) {
			fprintf(stderr, "%s: wrong echo at %u\n", mode_name[m], i);
			exit(1);
		}
		samp[n++] = now_ns() - a;
	}
	long csw = csw_self() - c0, cpu = cpu_self() - u0;
	atomic_store(&sh->stop, 1);
	if (m == M_TCP) {
		close(cfd);
	} else {
		/* wake the server wherever it sleeps */
		uint64_t one = 1;
		atomic_fetch_add(&sh->ch[0].seq, 1);
		(void)!write(efd[0], &one, sizeof(one));
		futex_wake(&sh->ch[0].seq);
	}
	if (m == M_RELAY) {
		pthread_join(rt, NULL);
		close(tp[0]);
		close(tp[1]);
	}
	waitpid(pid, NULL, 0);
	csw += atomic_load(&sh->srv_csw);
	cpu += atomic_load(&sh->srv_cpu);
	close(efd[0]);
	close(efd[1]);
	epoll_teardown(m, &r, &sb, st);
	munmap(sh, sizeof(*sh));
	if (n) {
		qsort(samp, n, sizeof(*samp), cmp_u64);
		res.median_us = samp[n / 2] / 1e3;
		res.csw_per_rt = (double)csw / (double)n;
		res.cpu_us_per_rt = (double)cpu / 1e3 / (double)n;
		res.rts = n;
	}
	return res;
}

int main(int argc, char **argv)
{
	double secs = 1;
	int rounds = 3, hogs = 0;
	bool want[M_COUNT] = { false };
	int nwant = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-d") && i + 1 < argc) {
			secs = atof(argv[++i]);
		} else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--hog") && i + 1 < argc) {
			hogs = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--spin") && i + 1 < argc) {
			spin_ns = atol(argv[++i]) * 1000;
		} else {
			int k;
			for (k = 0; k < M_COUNT && strcmp(argv[i], mode_name[k]); k++)
				;
			if (k == M_COUNT) {
				fprintf(stderr, "usage: smcr-wakefloor [-d SECONDS] [-r ROUNDS] [--hog N] "
						"[--spin US] [tcp|evfd|epoll|epollx|futex|relay...]\n");
				return 2;
			}
			want[k] = true;
			nwant++;
		}
	}
	if (!nwant)
		for (int k = 0; k < M_COUNT; k++)
			want[k] = true;
	want[M_TCP] = true; /* the reference of every ratio */
	pid_t hog[16];
	for (int h = 0; h < hogs && h < 16; h++) {
		hog[h] = fork();
		if (hog[h] == 0) {
			for (volatile unsigned long x = 0;; x++)
				;
		}
	}
	uint64_t *samp = malloc(MAX_SAMPLES * sizeof(*samp));
	if (!samp)
		return 1;
	printf("ping-pong 64 B between two processes, %d round(s) of %.1f s per mode, %d hog(s), "
	       "spin %ld us\n", rounds, secs, hogs, spin_ns / 1000);
	printf("%-6s %s\n", "mode",
	       "per round: median round trip us (ratio to tcp, switches, CPU us per round trip)");
	double med[M_COUNT][16] = { { 0 } }, sw[M_COUNT][16] = { { 0 } }, cu[M_COUNT][16] = { { 0 } };
	for (int r = 0; r < rounds && r < 16; r++)
		for (int k = 0; k < M_COUNT; k++)
			if (want[k]) {
				struct result x = run((enum mode)k, secs, samp);
				med[k][r] = x.median_us;
				sw[k][r] = x.csw_per_rt;
				cu[k][r] = x.cpu_us_per_rt;
			}
	for (int k = 0; k < M_COUNT; k++) {
		if (!want[k])
			continue;
		printf("%-6s", mode_name[k]);
		for (int r = 0; r < rounds && r < 16; r++)
			printf("  %6.2f (%.2fx, %.2f, %.1f)", med[k][r],
			       med[M_TCP][r] > 0 ? med[k][r] / med[M_TCP][r] : 0, sw[k][r], cu[k][r]);
		printf("\n");
	}
	for (int h = 0; h < hogs && h < 16; h++) {
		kill(hog[h], SIGKILL);
		waitpid(hog[h], NULL, 0);
	}
	free(samp);
	return 0;
}
