/* it_clcspin.c: the CLC answer's bounded spin (src/sock/hs.c hs_spin_poll; docs/parts/
 * connect.md "Spinning for the CLC answer"). A thread that sent a CLC message polls for the answer without
 * blocking for at most HS_SPIN_NS (client) / HS_SPIN_SERVER_NS (server) before it sleeps,
 * and stops spinning while most spins miss. The test process is a fake peer (plain libc
 * sockets and the wire codecs) that answers late:
 *
 *   - client: a fake server reads each Proposal and declines it only LATE_MS later, for
 *     NLATE connections in a row: every connect still completes (TCP fallback with the
 *     server's reason, then the data), the connecting thread's CPU time per connect stays
 *     far below the wait (the spin is bounded: a spin through the wait would cost LATE_MS
 *     of CPU), no spin caught anything, and after the first misses the spin is off (only
 *     the probe every WAITPOL_CLC_PROBE-th wait runs): at most HS_SPIN_OFF_AFTER +
 *     ceil((NLATE - HS_SPIN_OFF_AFTER) / WAITPOL_CLC_PROBE) spins for NLATE waits (fewer
 *     when the thread was preempted between waits: then it does not spin at all), and at
 *     least one (the first wait of a thread always may);
 *   - server: a fake client sends a Proposal, reads the Accept, and declines only LATE_MS
 *     later: the blocking accept returns the connection (TCP, the client's reason and the
 *     data after the Decline), its thread's CPU time stays far below the wait, and the
 *     spin ran (once) without catching anything. The server sets its queue up with a
 *     first accept that times out before the client comes (a connection queued before
 *     that goes to the progress thread, which does not spin);
 *   - idle accept: plain TCP clients that come LATE_MS apart against a blocking accept:
 *     its spin for the next connection (HS_SPIN_IDLE_NS) never catches one, stays bounded
 *     in CPU and turns itself off after the first misses (the probe only). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "itlib.h"
#include "sock/sock.h"
#include "wire/clc.h"

#define LATE_MS 400
#define NLATE 12
/* misses from a hit rate of 100 % (1024, 1/16 per spin) to below 75 %: 5 */
#define HS_SPIN_OFF_AFTER 5
/* The bound is on the calling thread's own CPU time, which other processes' load does not
 * add to: a connect or accept that sleeps through the wait costs a few ms of CPU (tens
 * under TSan), one that spun through LATE_MS would cost LATE_MS times its share of a core
 * (a third of one at six runnable threads on two cores: 133 ms). A quarter of the wait
 * (100 ms) lies between the two with room on both sides. */
#define CPU_MAX_NS (LATE_MS * 1000000ull / 4)
#define DECLINE_DIAG 0x03070000u

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int served;		  /* client: connects that fell back and moved data */
	_Atomic uint64_t cpu_max_ns;	  /* the connecting/accepting thread, per call */
	_Atomic uint64_t wall_min_ns;	  /* the call's duration, the shortest */
	_Atomic uint64_t runs, hits;	  /* hs_spin_runs / hs_spin_hits of the site */
	_Atomic int mode;
	_Atomic int stage; /* server: the queue is set up, the client may come */
	_Atomic uint32_t peer_reason, local_reason;
	char data[8]; /* written before the process ends; read after it_wait */
};
static struct shared *sh;

static uint64_t clock_ns(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* One call's CPU (the calling thread's) and wall time, from c0 / w0: the longest CPU
 * and the shortest wall time so far go to the shared record. */
static void note_call(uint64_t c0, uint64_t w0)
{
	uint64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	uint64_t wall = clock_ns(CLOCK_MONOTONIC) - w0;
	if (cpu > sh->cpu_max_ns)
		sh->cpu_max_ns = cpu;
	if (wall < sh->wall_min_ns)
		sh->wall_min_ns = wall;
}

static size_t make_decline(uint8_t *out, size_t cap)
{
	struct clc_msg m;
	memset(&m, 0, sizeof(m));
	m.type = CLC_DECLINE;
	m.decline.f.version = 1;
	m.decline.diag = DECLINE_DIAG;
	return it_clc_enc(&m, out, cap);
}

/* The fake peer's late answer: after LATE_MS a Decline, then 5 bytes of TCP data (marker);
 * the smcr side, fallen back to TCP, answers "ok"; then the connection is closed. */
static void decline_late(int fd, const char marker[5])
{
	uint8_t b[CLC_MSG_MAX_LEN];
	usleep(LATE_MS * 1000);
	size_t n = make_decline(b, sizeof(b));
	it_raw_write(fd, b, n);
	it_raw_write(fd, marker, 5);
	char ok[2];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 10000), 1);
	assert_int_equal(read(fd, ok, 2), 2);
	assert_memory_equal(ok, "ok", 2);
	close(fd);
}

/* ---- a late server against the smcr client ---- */

static int late_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	it_rules("use smc client * *");
	(void)sock_engine(); /* the engine's start-up is not a connect's cost */
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint64_t r0 = hs_spin_runs[HS_SPIN_CLIENT], h0 = hs_spin_hits[HS_SPIN_CLIENT];
	sh->wall_min_ns = UINT64_MAX;
	for (int i = 0; i < NLATE; i++) {
		int fd = smcr_socket(AF_INET, SOCK_STREAM, 0);
		IT_CHECK(fd >= 0);
		uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), w0 = clock_ns(CLOCK_MONOTONIC);
		IT_CHECK(smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
		note_call(c0, w0);
		struct smcr_info in;
		IT_CHECK(it_info(fd, &in));
		IT_CHECK(in.mode == SMCR_MODE_TCP && in.peer_reason == DECLINE_DIAG);
		char b[5];
		IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "tcp!!", 5) == 0);
		IT_CHECK(it_write_all(fd, "ok", 2));
		smcr_close(fd);
		sh->served = i + 1;
	}
	sh->runs = hs_spin_runs[HS_SPIN_CLIENT] - r0;
	sh->hits = hs_spin_hits[HS_SPIN_CLIENT] - h0;
	return 0;
}

static void test_late_server(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sl), 0);
	assert_int_equal(listen(l, 4), 0);
	getsockname(l, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	pid_t c = it_fork(late_client, NULL);
	for (int i = 0; i < NLATE; i++) {
		int fd = accept(l, NULL, NULL);
		assert_true(fd >= 0);
		uint8_t b[CLC_MSG_MAX_LEN];
		size_t n = it_raw_read_clc(fd, b, sizeof(b), 10000);
		struct clc_msg got;
		assert_int_equal(clc_decode(b, n, &got), 0);
		assert_int_equal(got.type, CLC_PROPOSAL);
		decline_late(fd, "tcp!!");
	}
	close(l);
	assert_int_equal(it_wait(c, 30000), 0);
	fprintf(stderr, "late server: %d served, connect CPU max %.2f ms, wall min %.1f ms, "
		"spins %llu (hits %llu) for %d waits\n", sh->served, (double)sh->cpu_max_ns / 1e6,
		(double)sh->wall_min_ns / 1e6, (unsigned long long)sh->runs,
		(unsigned long long)sh->hits, NLATE);
	assert_int_equal(sh->served, NLATE);
	assert_true(sh->wall_min_ns >= LATE_MS * 1000000ull); /* it did wait for the answer */
	assert_true(sh->cpu_max_ns < CPU_MAX_NS);		 /* ... mostly asleep */
	assert_int_equal(sh->hits, 0);
	assert_true(sh->runs >= 1);
	assert_true(sh->runs <= HS_SPIN_OFF_AFTER +
				 (NLATE - HS_SPIN_OFF_AFTER + WAITPOL_CLC_PROBE - 1) / WAITPOL_CLC_PROBE);
}

/* ---- a late client against the smcr server ---- */

/* The server child's start: only a connection that arrives while a blocking accept is
 * inside accept is driven (and spun for) by the accepting thread; one queued before the
 * process's first accept goes to the progress thread when the queue is set up. So: a
 * first accept that times out sets the queue up, then the client may come. */
static void server_setup(void)
{
	it_child_env(0);
	(void)sock_engine();
	struct timeval tv = { .tv_sec = 0, .tv_usec = 20000 };
	IT_CHECK(smcr_setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	IT_CHECK(smcr_accept(lfd, NULL, NULL) < 0 && errno == EAGAIN);
	tv.tv_usec = 0;
	IT_CHECK(smcr_setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
}

/* Forks the smcr server fn on a fresh listener and waits until it set its queue up
 * (stage 1). */
static pid_t server_start(int (*fn)(void *))
{
	memset(sh, 0, sizeof(*sh));
	it_rules("use smc server * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	pid_t s = it_fork(fn, NULL);
	smcr_close(lfd);
	for (int i = 0; i < 10000 && !sh->stage; i++)
		usleep(1000);
	assert_int_equal(sh->stage, 1);
	return s;
}

static int accept_server(void *arg)
{
	(void)arg;
	server_setup();
	sh->stage = 1;
	uint64_t r0 = hs_spin_runs[HS_SPIN_SERVER], h0 = hs_spin_hits[HS_SPIN_SERVER];
	uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), w0 = clock_ns(CLOCK_MONOTONIC);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	sh->cpu_max_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	sh->wall_min_ns = clock_ns(CLOCK_MONOTONIC) - w0;
	sh->runs = hs_spin_runs[HS_SPIN_SERVER] - r0;
	sh->hits = hs_spin_hits[HS_SPIN_SERVER] - h0;
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	sh->mode = in.mode;
	sh->peer_reason = in.peer_reason;
	sh->local_reason = in.local_reason;
	char b[5];
	IT_CHECK(it_read_all(fd, b, 5));
	memcpy(sh->data, b, 5);
	IT_CHECK(it_write_all(fd, "ok", 2));
	smcr_close(fd);
	smcr_close(lfd);
	return 0;
}

static void test_late_client(void **state)
{
	(void)state;
	pid_t s = server_start(accept_server);
	usleep(100 * 1000); /* the server is back in accept (polling) */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	/* a Proposal from 127.0.0.0/8 (the server's own prefix: it accepts) */
	uint8_t b[CLC_MSG_MAX_LEN];
	size_t n = it_clc_proposal(b, sizeof(b), 0x4243, 97, 0x7f000000, 8, CLC_PATH_R);
	it_raw_write(fd, b, n);
	n = it_raw_read_clc(fd, b, sizeof(b), 10000);
	struct clc_msg got;
	assert_int_equal(clc_decode(b, n, &got), 0);
	assert_int_equal(got.type, CLC_ACCEPT);
	decline_late(fd, "fb-01");
	assert_int_equal(it_wait(s, 30000), 0);
	fprintf(stderr, "late client: accept CPU %.2f ms, wall %.1f ms, spins %llu (hits "
		"%llu)\n", (double)sh->cpu_max_ns / 1e6, (double)sh->wall_min_ns / 1e6,
		(unsigned long long)sh->runs, (unsigned long long)sh->hits);
	assert_int_equal(sh->mode, SMCR_MODE_TCP);
	assert_int_equal(sh->local_reason, SMCR_REASON_PEERDECL);
	assert_int_equal(sh->peer_reason, DECLINE_DIAG);
	assert_memory_equal(sh->data, "fb-01", 5);
	assert_true(sh->wall_min_ns >= LATE_MS * 1000000ull);
	assert_true(sh->cpu_max_ns < CPU_MAX_NS);
	assert_int_equal(sh->runs, 1);
	assert_int_equal(sh->hits, 0);
}

/* ---- late clients against an idle smcr server ---- */

static int idle_server(void *arg)
{
	(void)arg;
	server_setup();
	uint64_t r0 = hs_spin_runs[HS_SPIN_IDLE], h0 = hs_spin_hits[HS_SPIN_IDLE];
	sh->wall_min_ns = UINT64_MAX;
	sh->stage = 1;
	for (int i = 0; i < NLATE; i++) {
		uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), w0 = clock_ns(CLOCK_MONOTONIC);
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		note_call(c0, w0);
		char b[5];
		IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "late!", 5) == 0);
		smcr_close(fd);
		sh->served = i + 1;
	}
	sh->runs = hs_spin_runs[HS_SPIN_IDLE] - r0;
	sh->hits = hs_spin_hits[HS_SPIN_IDLE] - h0;
	smcr_close(lfd);
	return 0;
}

/* A blocking accept with no handshake in flight spins HS_SPIN_IDLE_NS for the next
 * connection (lsn.c). Clients that come LATE_MS apart (plain TCP: their first bytes are
 * not CLC) are never caught: the accepting thread's CPU per accept stays far below the
 * wait (bounded), and after the first misses only the probe spins (an accept may wait
 * twice, so at most twice NLATE waits). At least one spin ran: the spin is there. */
static void test_idle_accept(void **state)
{
	(void)state;
	pid_t s = server_start(idle_server);
	for (int i = 0; i < NLATE; i++) {
		usleep(LATE_MS * 1000);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		it_raw_write(fd, "late!", 5);
		for (int j = 0; j < 10000 && sh->served <= i; j++)
			usleep(1000);
		close(fd);
	}
	assert_int_equal(it_wait(s, 30000), 0);
	fprintf(stderr, "idle server: %d served, accept CPU max %.2f ms, wall min %.1f ms, "
		"idle spins %llu (hits %llu) for %d accepts\n", sh->served,
		(double)sh->cpu_max_ns / 1e6, (double)sh->wall_min_ns / 1e6,
		(unsigned long long)sh->runs, (unsigned long long)sh->hits, NLATE);
	assert_int_equal(sh->served, NLATE);
	assert_true(sh->wall_min_ns >= LATE_MS * 1000000ull / 2); /* it did wait */
	assert_true(sh->cpu_max_ns < CPU_MAX_NS);
	assert_int_equal(sh->hits, 0);
	assert_true(sh->runs >= 1);
	assert_true(sh->runs <= HS_SPIN_OFF_AFTER +
				 (2 * NLATE - HS_SPIN_OFF_AFTER + WAITPOL_CLC_PROBE - 1) / WAITPOL_CLC_PROBE);
}

int main(void)
{
	unsetenv("SMCR_CLC_SPIN_US");
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_late_server),
		cmocka_unit_test(test_late_client),
		cmocka_unit_test(test_idle_accept),
	};
	return IT_MAIN(tests);
}
