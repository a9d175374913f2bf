/* it_epoll_wait.c: smcr_epoll_wait (include/smcr/smcr.h; docs/parts/conns.md) between two
 * processes over SMC-R: an event loop over several non-blocking connections and a pipe in
 * one epoll set moves exact bytes both ways' worth of checks (SHA-256 per connection), only
 * the program's own registrations are ever returned (never an engine fd), level-triggered
 * registrations keep reporting unread data and edge-triggered ones get one edge per
 * arrival, timeouts and EINTR behave as epoll_wait's. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/time.h>

#include "itlib.h"
#include "util/clock.h"

#define NCONN 8
#define PER_CONN (3u * 1024 * 1024 + 777) /* bytes per connection, not a multiple of 64K */
#define TAG 0x5a5a000000000000ull	  /* data.u64 of connection i: TAG | i */
#define PIPE_TAG 0x77aa55ee12345678ull

static int lfd;
static uint16_t port;

struct shared {
	volatile int cstage, sstage;
	uint8_t sha[NCONN][32]; /* the client's hashes of what it sent */
};
static struct shared *sh;

static void wait_stage(volatile int *v, int s)
{
	for (int i = 0; i < 20000 && *v < s; i++)
		usleep(500);
	IT_CHECK(*v >= s);
}

static uint64_t seed_of(unsigned i)
{
	return 0x9e3779b97f4a7c15ull * (i + 1);
}

/* ---- 1. an event loop over NCONN connections and a pipe ---- */

static int loop_server(void *arg)
{
	(void)arg;
	int fds[NCONN];
	struct it_sha *sha[NCONN];
	long long got[NCONN];
	bool eof[NCONN];
	it_child_env(0);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	IT_CHECK(ep >= 0);
	int pp[2];
	IT_CHECK(pipe2(pp, O_NONBLOCK | O_CLOEXEC) == 0);
	struct epoll_event pev = { .events = EPOLLIN, .data.u64 = PIPE_TAG };
	IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &pev) == 0); /* a plain fd */
	for (unsigned i = 0; i < NCONN; i++) {
		fds[i] = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fds[i] >= 0);
		struct smcr_info in;
		IT_CHECK(it_info(fds[i], &in) && in.mode == SMCR_MODE_SMCR);
		int fl = smcr_fcntl(fds[i], F_GETFL);
		IT_CHECK(smcr_fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) == 0);
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = TAG | i };
		IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) == 0);
		sha[i] = it_sha_new();
		got[i] = 0;
		eof[i] = false;
	}
	smcr_close(lfd);
	static char buf[200000];
	unsigned left = NCONN, pipe_events = 0;
	bool piped = false;
	uint64_t end = smcr_now_ns() + 20 * SMCR_NS_PER_S;
	while (left > 0) {
		IT_CHECK(smcr_now_ns() < end);
		struct epoll_event evs[4]; /* fewer than the ready fds: they take turns */
		int n = smcr_epoll_wait(ep, evs, 4, 1000);
		IT_CHECK(n >= 0 || errno == EINTR);
		for (int k = 0; k < n; k++) {
			uint64_t d = evs[k].data.u64;
			if (d == PIPE_TAG) {
				IT_CHECK(evs[k].events & EPOLLIN);
				char c;
				IT_CHECK(read(pp[0], &c, 1) == 1 && c == 'p');
				pipe_events++;
				continue;
			}
			/* only the program's own registrations: never an engine fd */
			IT_CHECK((d & ~0xffull) == TAG && (d & 0xff) < NCONN);
			unsigned i = (unsigned)(d & 0xff);
			IT_CHECK(!eof[i]);
			for (;;) {
				ssize_t r = smcr_recv(fds[i], buf, sizeof(buf), 0);
				if (r > 0) {
					it_sha_update(sha[i], buf, (size_t)r);
					got[i] += r;
					continue;
				}
				if (r == 0) {
					eof[i] = true;
					left--;
					IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL) == 0);
					break;
				}
				IT_CHECK(errno == EAGAIN);
				break;
			}
		}
		/* half way: a plain fd in the same set must wake the same call */
		if (!piped && got[0] > PER_CONN / 2) {
			IT_CHECK(write(pp[1], "p", 1) == 1);
			piped = true;
		}
	}
	IT_CHECK(piped && pipe_events == 1);
	wait_stage(&sh->cstage, 1); /* the client's hashes are written */
	for (unsigned i = 0; i < NCONN; i++) {
		uint8_t h[32];
		it_sha_final(sha[i], h);
		IT_CHECK(got[i] == (long long)PER_CONN);
		IT_CHECK(memcmp(h, sh->sha[i], 32) == 0);
		smcr_close(fds[i]);
	}
	close(pp[0]);
	close(pp[1]);
	close(ep);
	return 0;
}

static int loop_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fds[NCONN];
	size_t sent[NCONN];
	uint64_t seed[NCONN];
	struct it_sha *sha[NCONN];
	static char data[NCONN][PER_CONN];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	IT_CHECK(ep >= 0);
	for (unsigned i = 0; i < NCONN; i++) {
		fds[i] = it_connect(false, port);
		IT_CHECK(fds[i] >= 0);
		int fl = smcr_fcntl(fds[i], F_GETFL);
		IT_CHECK(smcr_fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) == 0);
		struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = TAG | i };
		IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) == 0);
		seed[i] = seed_of(i);
		it_fill_random(data[i], PER_CONN, &seed[i]);
		sha[i] = it_sha_new();
		it_sha_update(sha[i], data[i], PER_CONN);
		it_sha_final(sha[i], sh->sha[i]);
		sent[i] = 0;
	}
	sh->cstage = 1;
	unsigned left = NCONN;
	uint64_t end = smcr_now_ns() + 20 * SMCR_NS_PER_S;
	while (left > 0) {
		IT_CHECK(smcr_now_ns() < end);
		struct epoll_event evs[3];
		int n = smcr_epoll_wait(ep, evs, 3, 1000);
		IT_CHECK(n >= 0 || errno == EINTR);
		for (int k = 0; k < n; k++) {
			uint64_t d = evs[k].data.u64;
			IT_CHECK((d & ~0xffull) == TAG && (d & 0xff) < NCONN);
			unsigned i = (unsigned)(d & 0xff);
			IT_CHECK(sent[i] < PER_CONN);
			/* odd sizes, so the writes and the RMBE's wrap never line up */
			size_t want = PER_CONN - sent[i] < 50001 ? PER_CONN - sent[i] : 50001;
			ssize_t w = smcr_send(fds[i], data[i] + sent[i], want, MSG_NOSIGNAL);
			if (w < 0) {
				IT_CHECK(errno == EAGAIN);
				continue;
			}
			sent[i] += (size_t)w;
			if (sent[i] == PER_CONN) {
				IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL) == 0);
				IT_CHECK(smcr_shutdown(fds[i], SHUT_WR) == 0);
				left--;
			}
		}
	}
	/* wait for the server's EOF reads, then close */
	for (unsigned i = 0; i < NCONN; i++) {
		char c;
		int fl = smcr_fcntl(fds[i], F_GETFL);
		IT_CHECK(smcr_fcntl(fds[i], F_SETFL, fl & ~O_NONBLOCK) == 0);
		IT_CHECK(smcr_recv(fds[i], &c, 1, 0) == 0);
		smcr_close(fds[i]);
	}
	close(ep);
	return 0;
}

static void test_event_loop_bytes(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	assert_int_equal(it_run_pair(lfd, loop_server, NULL, loop_client, NULL, 60000), 0);
}

/* ---- 2. level- and edge-triggered registrations of one fd ---- */

/* Events of fd's registration in ep within ms (0: none). */
static uint32_t ev_of(int ep, int ms)
{
	struct epoll_event evs[4];
	int n = smcr_epoll_wait(ep, evs, 4, ms);
	IT_CHECK(n >= 0);
	IT_CHECK(n <= 1);
	if (n == 0)
		return 0;
	IT_CHECK(evs[0].data.u64 == (TAG | 1));
	return evs[0].events;
}

static int ltet_server(void *arg)
{
	(void)arg;
	int fd = it_accept_smc(lfd);
	int fl = smcr_fcntl(fd, F_GETFL);
	IT_CHECK(smcr_fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0);
	int lt = epoll_create1(0), et = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG | 1 };
	IT_CHECK(smcr_epoll_ctl(lt, EPOLL_CTL_ADD, fd, &ev) == 0);
	ev.events = EPOLLIN | EPOLLET;
	IT_CHECK(smcr_epoll_ctl(et, EPOLL_CTL_ADD, fd, &ev) == 0);
	IT_CHECK(ev_of(lt, 0) == 0 && ev_of(et, 0) == 0);
	sh->sstage = 1;
	for (int round = 0; round < 3; round++) {
		/* an arrival: both see it */
		IT_CHECK(ev_of(lt, 5000) & EPOLLIN);
		IT_CHECK(ev_of(et, 5000) & EPOLLIN);
		/* unread: level-triggered keeps reporting, edge-triggered does not */
		IT_CHECK(ev_of(lt, 0) & EPOLLIN);
		IT_CHECK(ev_of(lt, 10) & EPOLLIN);
		IT_CHECK(ev_of(et, 50) == 0);
		/* the next arrival, still unread: one more edge, exactly one */
		sh->sstage = 2 + 2 * round;
		wait_stage(&sh->cstage, 2 + 2 * round);
		IT_CHECK(ev_of(et, 5000) & EPOLLIN);
		IT_CHECK(ev_of(et, 50) == 0);
		IT_CHECK(ev_of(lt, 0) & EPOLLIN);
		/* read both: level-triggered goes quiet */
		char b[64];
		ssize_t r = smcr_recv(fd, b, sizeof(b), 0);
		IT_CHECK(r == 6 && memcmp(b, "aaabbb", 6) == 0);
		IT_CHECK(smcr_recv(fd, b, sizeof(b), 0) == -1 && errno == EAGAIN);
		IT_CHECK(ev_of(lt, 20) == 0);
		IT_CHECK(ev_of(et, 0) == 0);
		sh->sstage = 3 + 2 * round;
	}
	close(lt);
	close(et);
	smcr_close(fd);
	return 0;
}

static int ltet_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	wait_stage(&sh->sstage, 1);
	for (int round = 0; round < 3; round++) {
		IT_CHECK(smcr_send(fd, "aaa", 3, 0) == 3);
		wait_stage(&sh->sstage, 2 + 2 * round);
		IT_CHECK(smcr_send(fd, "bbb", 3, 0) == 3);
		sh->cstage = 2 + 2 * round;
		wait_stage(&sh->sstage, 3 + 2 * round);
	}
	smcr_close(fd);
	return 0;
}

static void test_lt_and_et(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	assert_int_equal(it_run_pair(lfd, ltet_server, NULL, ltet_client, NULL, 30000), 0);
}

/* ---- 3. timeouts, EINTR, errors ---- */

static void on_alarm(int sig)
{
	(void)sig;
}

static int tmo_server(void *arg)
{
	(void)arg;
	int fd = it_accept_smc(lfd);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG | 1 };
	IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	struct epoll_event out[2];
	/* nothing arrives: 0 after the timeout, not before, not much after */
	uint64_t t0 = smcr_now_ns();
	IT_CHECK(smcr_epoll_wait(ep, out, 2, 200) == 0);
	uint64_t dt = smcr_now_ns() - t0;
	IT_CHECK(dt >= 190 * SMCR_NS_PER_MS && dt < 2000 * SMCR_NS_PER_MS);
	t0 = smcr_now_ns();
	IT_CHECK(smcr_epoll_wait(ep, out, 2, 0) == 0);
	IT_CHECK(smcr_now_ns() - t0 < 100 * SMCR_NS_PER_MS);
	/* a signal interrupts an endless wait: -1 EINTR, as epoll_wait (no SA_RESTART) */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	IT_CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	struct itimerval it = { .it_value = { 0, 100000 } };
	IT_CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
	errno = 0;
	IT_CHECK(smcr_epoll_wait(ep, out, 2, -1) == -1 && errno == EINTR);
	/* the errors of epoll_wait */
	IT_CHECK(smcr_epoll_wait(ep, out, 0, 0) == -1 && errno == EINVAL);
	IT_CHECK(smcr_epoll_wait(fd, out, 2, 0) == -1 && errno == EINVAL); /* not an epoll fd */
	IT_CHECK(smcr_epoll_wait(-1, out, 2, 0) == -1 && errno == EBADF);
	/* then data: reported and read, bytes checked; the blocking recv after a wait
	 * (the thread held the engine spin) still works */
	sh->sstage = 1;
	IT_CHECK(smcr_epoll_wait(ep, out, 2, 5000) == 1 && out[0].data.u64 == (TAG | 1));
	char b[8];
	IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "hello", 5) == 0);
	sh->sstage = 2;
	IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "world", 5) == 0);
	/* an epoll fd closed with smcr registrations still counted: epoll_wait's EBADF,
	 * errno intact after the engine round */
	IT_CHECK(smcr_epoll_wait(ep, out, 2, 0) == 0);
	close(ep);
	errno = 0;
	IT_CHECK(smcr_epoll_wait(ep, out, 2, 0) == -1 && errno == EBADF);
	smcr_close(fd);
	return 0;
}

static int tmo_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	wait_stage(&sh->sstage, 1);
	IT_CHECK(it_write_all(fd, "hello", 5));
	wait_stage(&sh->sstage, 2);
	usleep(20000); /* the server sleeps in its blocking recv by now */
	IT_CHECK(it_write_all(fd, "world", 5));
	char c;
	IT_CHECK(smcr_recv(fd, &c, 1, 0) == 0);
	smcr_close(fd);
	return 0;
}

static void test_timeout_eintr_errors(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	assert_int_equal(it_run_pair(lfd, tmo_server, NULL, tmo_client, NULL, 30000), 0);
}

int main(void)
{
	char port_s[16];
	snprintf(port_s, sizeof(port_s), "%d", 20000 + (int)(getpid() % 20000));
	setenv("IT_EMU_PORT", port_s, 1);
	sh = it_shared(sizeof(*sh));
	if (getenv("IT_FILTER"))
		cmocka_set_test_filter(getenv("IT_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_event_loop_bytes),
		cmocka_unit_test(test_lt_and_et),
		cmocka_unit_test(test_timeout_eintr_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
