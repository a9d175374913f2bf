/* soak.c: smcr-soak, the soak benchmark (docs/parts/robust.md "Soak"): many connections
 * opened, used and closed, and many at once, with the fd, memory and QP counts sampled in
 * both processes, which must stay flat; then resource exhaustion (fds, RMB memory), which
 * must end in a TCP fallback with a reason or TCP's own error, never a crash.
 *
 *   smcr-soak [--seq N] [--conc C] [--rounds R] [--short]
 *
 * --short (the CI variant, CTest soak_short): 3000 sequential, 3 rounds of 200 at once.
 * Defaults: 10^6 sequential, 5 rounds of 1000 at once. Each connection: the client sends
 * 64 bytes, the server echoes them, both close. Prints one line per sample (every 1/10 of the
 * sequential run, and after each round): connections done, the client's and the server's
 * fds, RSS (KiB), engine connections, link groups, links (= QPs), RMBs. Exit status 0 when
 * every exchange was intact, the counts at the end equal those after the warm-up (fds
 * exactly; RSS within 8 MiB) and the exhaustion phases ended as they must. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "sock/itlib.h"

static int lfd;
static uint16_t port;
static long seq_n = 1000000, conc = 1000, rounds = 5;

struct counts {
	int fds;
	long rss_kb;
	unsigned conns, lgs, links, rmbs;
};

struct shared {
	_Atomic int srv_ready;
	_Atomic int stop;
	struct counts srv_now; /* the server's, written by it on request */
	_Atomic int srv_req, srv_ack;
	_Atomic long bad;	/* client: an echo that differed or failed */
	_Atomic long srv_short; /* server: a connection that ended before its 64 bytes */
};
static struct shared *sh;

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void sample(struct counts *c)
{
	struct core_engine_stats st;
	it_engine_stats(&st);
	c->fds = it_count_fds();
	c->rss_kb = rss_kb();
	c->conns = st.conns;
	c->lgs = st.lgs;
	c->links = st.links;
	c->rmbs = st.rmbs;
}

/* The server echoes 64 bytes per connection; between batches it answers sample requests. */
static int server(void *arg)
{
	(void)arg;
	it_child_env(0);
	sh->srv_ready = 1;
	for (;;) {
		if (sh->srv_req != sh->srv_ack) {
			(void)it_engine_conns_gone();
			sample(&sh->srv_now);
			sh->srv_ack = sh->srv_req;
		}
		if (sh->stop)
			break;
		struct pollfd pf = { .fd = lfd, .events = POLLIN };
		if (poll(&pf, 1, 2) <= 0)
			continue; /* no connection waiting: look at the requests again */
		int fd = smcr_accept(lfd, NULL, NULL);
		if (fd < 0) {
			IT_CHECK(errno == EAGAIN || errno == EINTR || errno == ECONNABORTED);
			continue;
		}
		struct timeval tv = { 10, 0 };
		(void)smcr_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		char b[64];
		if (!it_read_all(fd, b, sizeof(b)) || !it_write_all(fd, b, sizeof(b)))
			sh->srv_short++; /* e.g. the client's connect that ran out of fds */
		smcr_close(fd);
	}
	smcr_close(lfd);
	return 0;
}

static bool one_exchange(int fd, uint64_t *seed)
{
	uint8_t b[64], r[64];
	it_fill_random(b, sizeof(b), seed);
	return it_write_all(fd, b, sizeof(b)) && it_read_all(fd, r, sizeof(r)) &&
	       memcmp(b, r, sizeof(b)) == 0;
}

static void srv_sample(struct counts *c)
{
	int want = sh->srv_req + 1;
	sh->srv_req = want;
	for (int i = 0; i < 200000 && sh->srv_ack != want; i++)
		usleep(100);
	IT_CHECK(sh->srv_ack == want);
	*c = sh->srv_now;
}

static void print_line(const char *tag, long done)
{
	struct counts me, srv;
	(void)it_engine_conns_gone();
	sample(&me);
	srv_sample(&srv);
	printf("%-6s %9ld  client fds %4d rss %7ld conns %4u lgs %u links %u rmbs %4u | "
	       "server fds %4d rss %7ld conns %4u lgs %u links %u rmbs %4u\n",
	       tag, done, me.fds, me.rss_kb, me.conns, me.lgs, me.links, me.rmbs, srv.fds,
	       srv.rss_kb, srv.conns, srv.lgs, srv.links, srv.rmbs);
	fflush(stdout);
}

/* fds: the client may not exceed its limit; every connect succeeds (SMC-R, or TCP with a
 * local reason when the socket layer has no fd to spare) or fails as TCP would (EMFILE). */
static int exhaust_fds(void)
{
	struct rlimit old, rl;
	getrlimit(RLIMIT_NOFILE, &old);
	rl = old;
	rl.rlim_cur = (rlim_t)it_count_fds() + 24;
	IT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	int fds[512], n = 0, smc = 0, tcp = 0, emfile = 0;
	uint64_t seed = 7;
	for (; n < 512; n++) {
		fds[n] = it_connect(false, port);
		if (fds[n] < 0) {
			IT_CHECK(errno == EMFILE || errno == ENFILE);
			emfile++;
			break;
		}
		struct smcr_info in;
		IT_CHECK(it_info(fds[n], &in));
		if (in.mode == SMCR_MODE_SMCR)
			smc++;
		else {
			IT_CHECK(in.mode == SMCR_MODE_TCP && in.local_reason != 0);
			tcp++;
		}
		IT_CHECK(one_exchange(fds[n], &seed));
	}
	for (int i = 0; i < n; i++)
		smcr_close(fds[i]);
	IT_CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
	printf("fds    limit %llu: %d SMC-R, %d TCP fallback (with a reason), %d EMFILE\n",
	       (unsigned long long)rl.rlim_cur, smc, tcp, emfile);
	return emfile == 1 ? 0 : 1;
}

/* Memory: a fresh client process (a new peer: its first contact needs an RMB) whose memfds
 * cannot grow (RLIMIT_FSIZE) falls back to TCP with a reason, and the data is intact. (The
 * limit stops the device's own memfds first: the reason is then "no SMC-R device".) */
static int rmb_client(void *arg)
{
	(void)arg;
	it_child_env(3);
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = { 4096, 4096 };
	IT_CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	uint64_t seed = 9;
	IT_CHECK(one_exchange(fd, &seed));
	printf("rmb    RLIMIT_FSIZE 4096: mode %s, local reason %#x\n",
	       in.mode == SMCR_MODE_SMCR ? "SMC-R" : "TCP", in.local_reason);
	fflush(stdout);
	smcr_close(fd);
	return in.mode == SMCR_MODE_TCP && in.local_reason != 0 ? 0 : 1;
}

static int client(void *arg)
{
	(void)arg;
	it_child_env(1);
	it_wait_at_least(&sh->srv_ready, 1);
	uint64_t seed = 1;
	long step = seq_n / 10 ? seq_n / 10 : 1;
	struct counts base, end, r1 = { 0 }; /* r1: after round 2 (or 1), see below */
	int seq_min = 1 << 30, seq_max = 0;
	int rc = 0;
	/* warm-up: the link group, the pools */
	for (int i = 0; i < 100; i++) {
		int fd = it_connect(false, port);
		IT_CHECK(fd >= 0 && one_exchange(fd, &seed));
		smcr_close(fd);
	}
	(void)it_engine_conns_gone();
	sample(&base);
	print_line("warm", 100);
	long long t0 = it_now_ms();
	for (long i = 1; i <= seq_n; i++) {
		int fd = it_connect(false, port);
		IT_CHECK(fd >= 0);
		if (!one_exchange(fd, &seed))
			sh->bad++;
		smcr_close(fd);
		if (i % step == 0) {
			print_line("seq", i);
			int f = it_count_fds();
			seq_min = f < seq_min ? f : seq_min;
			seq_max = f > seq_max ? f : seq_max;
		}
	}
	long long t1 = it_now_ms();
	printf("seq    %ld connections in %lld ms (%.0f/s)\n", seq_n, t1 - t0,
	       seq_n * 1000.0 / (double)(t1 - t0 > 0 ? t1 - t0 : 1));
	int *fds = calloc((size_t)conc, sizeof(int));
	IT_CHECK(fds != NULL);
	for (long r = 1; r <= rounds; r++) {
		for (long i = 0; i < conc; i++) {
			fds[i] = it_connect(false, port);
			IT_CHECK(fds[i] >= 0);
		}
		for (long i = 0; i < conc; i++)
			if (!one_exchange(fds[i], &seed))
				sh->bad++;
		struct counts at;
		sample(&at);
		printf("conc   round %ld: %ld open: client fds %d conns %u links %u rmbs %u\n", r,
		       conc, at.fds, at.conns, at.links, at.rmbs);
		for (long i = 0; i < conc; i++)
			smcr_close(fds[i]);
		print_line("conc", r);
		if (r == (rounds >= 2 ? 2 : 1)) {
			(void)it_engine_conns_gone();
			sample(&r1); /* the reference: the pools have settled after two rounds */
		}
	}
	free(fds);
	(void)it_engine_conns_gone();
	sample(&end);
	/* Closes of a round's last connections finish in the background (the close-later list,
	 * closeq.h, and the engine's reaper); on a loaded host that can lag the sample, so give
	 * them time to land before judging. A leak stays whatever the wait. */
	for (int i = 0; i < 50 && rounds > 1 && end.fds > r1.fds + 8; i++) {
		usleep(100 * 1000);
		sample(&end);
	}
	/* Flat: the sequential run's fds within the close-later list's slack (a few fds the
	 * next wait closes, closeq.h); after two concurrent rounds the RMB pool holds one memfd
	 * per RMB it keeps and the link groups the concurrency needs (255 connections each),
	 * and later rounds must not add to that, nor to RSS, QPs. */
	if (seq_max - seq_min > 8 || seq_max > base.fds + 8) {
		printf("NOT FLAT (seq): fds %d..%d, warm-up %d\n", seq_min, seq_max, base.fds);
		rc = 1;
	}
	if (rounds > 1 && (end.fds > r1.fds + 8 || end.rss_kb > r1.rss_kb + 8192 ||
			   end.rmbs > r1.rmbs || end.links > r1.links || end.conns != 0)) {
		printf("NOT FLAT (conc): fds %d -> %d, rss %ld -> %ld KiB, rmbs %u -> %u, links "
		       "%u -> %u, conns %u\n", r1.fds, end.fds, r1.rss_kb, end.rss_kb, r1.rmbs,
		       end.rmbs, r1.links, end.links, end.conns);
		rc = 1;
	}
	printf("flat   seq fds %d..%d (warm-up %d); reference round fds %d rss %ld rmbs %u links "
	       "%u, at the end fds %d rss %ld rmbs %u links %u\n", seq_min, seq_max, base.fds,
	       r1.fds, r1.rss_kb, r1.rmbs, r1.links, end.fds, end.rss_kb, end.rmbs, end.links);
	rc |= exhaust_fds();
	if (sh->bad) {
		printf("%ld exchanges were not intact\n", sh->bad);
		rc = 1;
	}
	printf("server: %ld connection(s) ended before their 64 bytes (the fd phase's refused "
	       "connect)\n", sh->srv_short);
	return rc;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--short")) {
			seq_n = 3000;
			conc = 200;
			rounds = 3;
		} else if (!strcmp(argv[i], "--seq") && i + 1 < argc) {
			seq_n = atol(argv[++i]);
		} else if (!strcmp(argv[i], "--conc") && i + 1 < argc) {
			conc = atol(argv[++i]);
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atol(argv[++i]);
		} else {
			fprintf(stderr, "usage: smcr-soak [--seq N] [--conc C] [--rounds R] [--short]\n");
			return 2;
		}
	}
	char port_s[16];
	snprintf(port_s, sizeof(port_s), "%d", 20000 + (int)(getpid() % 20000));
	setenv("IT_EMU_PORT", port_s, 1);
	sh = it_shared(sizeof(*sh));
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	if (lfd < 0)
		return 2;
	IT_CHECK(smcr_listen(lfd, 4096) == 0);
	pid_t s = it_fork(server, NULL);
	pid_t c = it_fork(client, NULL);
	smcr_close(lfd);
	int cs = it_wait(c, 0);
	/* forked from here (no engine), not from the client (a child of a process with an
	 * engine inherits its state) */
	pid_t p = it_fork(rmb_client, NULL);
	if (it_wait(p, 60000) != 0) {
		printf("rmb exhaustion: the client failed\n");
		cs = 1;
	}
	sh->stop = 1;
	int ss = it_wait(s, 60000);
	printf("client exit %d, server exit %d\n", cs, ss);
	return cs == 0 && ss == 0 ? 0 : 1;
}
