/* it_direct.c: the direct wake (src/sock/engine.c "Direct wake", data.c wait_for;
 * docs/parts/stream.md "Direct wake"): a program thread asleep in a blocking call waits on the
 * engine's CQ fds itself and takes the completion, and the progress thread is not woken.
 *
 * In the client process of a real two-process SMC-R pair ($SMCR_DIRECT_WAKE=2: every
 * bracketed sleeper may sleep directly, not only threads whose sleeps were short):
 *   - the program fd's registration costs one epoll_ctl per sleep: a new socket at a
 *     closed and reused number is ADDed (no MOD that fails first), the same socket again
 *     is MODified, the same file for another socket object falls back from ADD to MOD;
 *   - a thread asleep in recv is woken by the peer's CDC through a CQ fd, and the progress
 *     thread does not turn meanwhile (its loop counter);
 *   - while it sleeps directly, another thread asleep in recv on another connection (the
 *     direct slot is taken: it sleeps on its program fd) still gets its byte, delivered by
 *     the direct sleeper, again without a progress-thread turn; the direct sleeper sleeps
 *     on and gets its own byte later;
 *   - engine timers still fire while a thread sleeps directly: an idle link group's free
 *     timer (SMCR_LG_FREE_MS) frees it, on the progress thread's timeout;
 *   - no lease outlives a blocking call of an smcr_* program (docs/design/readiness.md
 *     section 6): after a recv returned data the CQs are armed, and an arrival for
 *     another socket whose reader waits in the kernel's poll() is delivered (the old
 *     hold kept it back until the progress thread's next timer). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core_int.h"
#include "itlib.h"
#include "sock/progress.h"
#include "sock/sock.h"
#include "util/clock.h"

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int stage; /* client -> server: step n wanted */
	_Atomic int ack;   /* server -> client: step n done */
};
static struct shared *sh;

struct blocked {
	int fd;
	ssize_t rc;
	char got;
	_Atomic int done;
};

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;
	b->rc = smcr_recv(b->fd, &b->got, 1, 0);
	__atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static uint64_t ld(_Atomic uint64_t *v) { return atomic_load(v); }

#define ROUNDS 3
/* stages: 1..ROUNDS: byte 'a'+k on fd1 (round k+1); then: */
enum {
	ST_OTHER = 10, /* byte 'o' on fd2 */
	ST_OWN,	       /* byte 'w' on fd1 */
	ST_CLOSE2,     /* close fd2 (its LG becomes idle) */
	ST_END,	       /* byte 'e' on fd1, then close */
};

static int direct_server(void *arg)
{
	(void)arg;
	setenv("SMCR_CONNS_PER_LG", "1", 1);
	it_child_env(0);
	int fd1 = smcr_accept(lfd, NULL, NULL);
	int fd2 = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd1 >= 0 && fd2 >= 0);
	smcr_close(lfd);
	struct smcr_info in;
	IT_CHECK(it_info(fd1, &in) && in.mode == SMCR_MODE_SMCR);
	IT_CHECK(it_info(fd2, &in) && in.mode == SMCR_MODE_SMCR);
	for (int k = 0; k < ROUNDS; k++) {
		it_wait_at_least(&sh->stage, k + 1);
		char c = (char)('a' + k);
		IT_CHECK(smcr_send(fd1, &c, 1, 0) == 1);
	}
	it_wait_at_least(&sh->stage, ST_OTHER);
	IT_CHECK(smcr_send(fd2, "o", 1, 0) == 1);
	it_wait_at_least(&sh->stage, ST_OWN);
	IT_CHECK(smcr_send(fd1, "w", 1, 0) == 1);
	it_wait_at_least(&sh->stage, ST_CLOSE2);
	IT_CHECK(smcr_close(fd2) == 0);
	sh->ack = ST_CLOSE2;
	it_wait_at_least(&sh->stage, ST_END);
	IT_CHECK(smcr_send(fd1, "e", 1, 0) == 1);
	char c;
	IT_CHECK(smcr_recv(fd1, &c, 1, 0) == 0); /* the client's close */
	IT_CHECK(smcr_close(fd1) == 0);
	return 0;
}

/* Starts a reader of fd and waits until it sleeps (far beyond any spin). */
static void start_sleeper(pthread_t *t, struct blocked *b, int fd)
{
	memset(b, 0, sizeof(*b));
	b->fd = fd;
	IT_CHECK(pthread_create(t, NULL, blocked_main, b) == 0);
	usleep(100000);
	IT_CHECK(!__atomic_load_n(&b->done, __ATOMIC_ACQUIRE));
}

static int direct_client(void *arg)
{
	(void)arg;
	setenv("SMCR_CONNS_PER_LG", "1", 1); /* fd2 on its own link group (the timer test) */
	setenv("SMCR_LG_FREE_MS", "300", 1);
	it_child_env(1);
	smcr_close(lfd);
	int fd1 = it_connect(false, port);
	IT_CHECK(fd1 >= 0);
	int fd2 = it_connect(false, port);
	IT_CHECK(fd2 >= 0);
	struct core_engine *e = sock_engine();
	IT_CHECK(e != NULL);
	struct core_engine_stats st;
	core_engine_stats(e, &st);
	IT_CHECK(st.lgs == 2);
	pthread_t t, t2;
	struct blocked a, b;

	/* 0. the registration's epoll_ctl calls (sock_direct_begin; a pipe stands for a
	 * program fd, made-up serials): one for a new socket at a number that was closed
	 * and reused (an ADD, not a MOD that fails first), one for the same socket again
	 * (MOD); the same file begun for another socket: ADD fails (EEXIST), then MOD */
	{
		int p1[2], p2[2];
		const uint64_t o1 = UINT64_MAX - 1, o2 = UINT64_MAX - 2, o3 = UINT64_MAX - 3;
		IT_CHECK(pipe(p1) == 0);
		uint64_t c0 = ld(&sock_direct_ctl_total);
		IT_CHECK(sock_direct_begin(p1[0], o1, false));
		sock_direct_end();
		IT_CHECK(ld(&sock_direct_ctl_total) == c0 + 1);
		/* another file at the same number: dup2 closes the old one in the same step
		 * (no other thread can take the number in between) */
		int num = p1[0];
		IT_CHECK(pipe(p2) == 0);
		IT_CHECK(dup2(p2[0], num) == num);
		close(p2[0]);
		close(p1[1]);
		p2[0] = num;
		c0 = ld(&sock_direct_ctl_total);
		IT_CHECK(sock_direct_begin(p2[0], o2, false));
		sock_direct_end();
		IT_CHECK(ld(&sock_direct_ctl_total) == c0 + 1);
		IT_CHECK(sock_direct_begin(p2[0], o2, false));
		sock_direct_end();
		IT_CHECK(ld(&sock_direct_ctl_total) == c0 + 2);
		IT_CHECK(sock_direct_begin(p2[0], o3, false));
		sock_direct_end();
		IT_CHECK(ld(&sock_direct_ctl_total) == c0 + 4);
		close(p2[0]);
		close(p2[1]);
		/* the real sockets' serials: a socket object is pooled and reused, and a
		 * socket made on a reused number is a new socket all the same */
		uint64_t prev = 0;
		for (int k = 0; k < 3; k++) {
			int x = smcr_socket(AF_INET, SOCK_STREAM, 0);
			IT_CHECK(x >= 0);
			struct sock *so = sock_get(x);
			IT_CHECK(so != NULL);
			IT_CHECK(so->serial != 0 && so->serial != prev);
			prev = so->serial;
			sock_put(so);
			IT_CHECK(smcr_close(x) == 0);
		}
	}

	/* 1. asleep in recv, woken through a CQ fd; the progress thread does not turn.
	 * Its loop may turn for an engine timer of its own now and then: every round must
	 * be woken directly, and at least ROUNDS - 1 of them with no turn at all. */
	int quiet = 0;
	for (int k = 0; k < ROUNDS; k++) {
		uint64_t s0 = ld(&sock_direct_sleeps_total), c0 = ld(&sock_direct_ctl_total);
		start_sleeper(&t, &a, fd1);
		IT_CHECK(ld(&sock_direct_sleeps_total) > s0); /* it sleeps directly */
		/* one epoll_ctl for the sleep: a MOD after the first. The first is an ADD,
		 * or, when this socket already slept directly before section 0's pipes took
		 * the sleeper (the set-up's ping, on a loaded machine), an ADD that finds it
		 * registered and a MOD: section 0 checks that rule exactly. */
		uint64_t c1 = ld(&sock_direct_ctl_total);
		IT_CHECK(c1 == c0 + 1 || (k == 0 && c1 == c0 + 2));
		uint64_t w0 = ld(&sock_direct_cq_wakes_total);
		uint64_t p0 = progress_turns();
		sh->stage = k + 1;
		IT_CHECK(pthread_join(t, NULL) == 0);
		uint64_t p1 = progress_turns();
		IT_CHECK(a.rc == 1 && a.got == 'a' + k);
		IT_CHECK(ld(&sock_direct_cq_wakes_total) > w0);
		fprintf(stderr, "[client] round %d: progress turns %llu\n", k,
			(unsigned long long)(p1 - p0));
		quiet += p1 == p0;
		IT_CHECK(it_engine_spinners() == 0);
	}
	IT_CHECK(quiet >= ROUNDS - 1);

	/* 2. another connection's byte while a thread sleeps directly: its reader (asleep
	 * on its program fd: the direct slot is taken) is woken by the direct sleeper,
	 * which then sleeps on until its own byte comes */
	start_sleeper(&t, &a, fd1);
	uint64_t s0 = ld(&sock_direct_sleeps_total);
	start_sleeper(&t2, &b, fd2);
	IT_CHECK(ld(&sock_direct_sleeps_total) == s0); /* the second sleeps the usual way */
	uint64_t w0 = ld(&sock_direct_cq_wakes_total);
	uint64_t p0 = progress_turns();
	sh->stage = ST_OTHER;
	IT_CHECK(pthread_join(t2, NULL) == 0);
	uint64_t p1 = progress_turns();
	IT_CHECK(b.rc == 1 && b.got == 'o');
	IT_CHECK(ld(&sock_direct_cq_wakes_total) > w0); /* delivered by the direct sleeper */
	fprintf(stderr, "[client] other socket: progress turns %llu\n",
		(unsigned long long)(p1 - p0));
	usleep(50000);
	IT_CHECK(!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE)); /* still asleep */
	IT_CHECK(ld(&sock_direct_sleeps_total) > s0);	     /* directly, again */
	sh->stage = ST_OWN;
	IT_CHECK(pthread_join(t, NULL) == 0);
	IT_CHECK(a.rc == 1 && a.got == 'w');

	/* 3. engine timers fire while a thread sleeps directly: fd2's link group, idle
	 * once both ends closed fd2, is freed by its 300 ms timer */
	start_sleeper(&t, &a, fd1);
	core_engine_stats(e, &st);
	uint64_t freed0 = st.lgs_freed;
	IT_CHECK(smcr_close(fd2) == 0);
	sh->stage = ST_CLOSE2;
	it_wait_at_least(&sh->ack, ST_CLOSE2);
	uint64_t t0 = smcr_now_ns();
	for (;;) {
		core_engine_stats(e, &st);
		if (st.lgs_freed > freed0)
			break;
		IT_CHECK(smcr_now_ns() - t0 < 10000 * SMCR_NS_PER_MS); /* ~3.3 s seen */
		usleep(10000);
	}
	fprintf(stderr, "[client] idle LG freed after %llu ms (timer 300 ms)\n",
		(unsigned long long)((smcr_now_ns() - t0) / SMCR_NS_PER_MS));
	IT_CHECK(st.lgs == 1);
	IT_CHECK(!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE)); /* the sleeper slept on */
	sh->stage = ST_END;
	IT_CHECK(pthread_join(t, NULL) == 0);
	IT_CHECK(a.rc == 1 && a.got == 'e');
	IT_CHECK(it_engine_spinners() == 0);
	IT_CHECK(smcr_close(fd1) == 0);
	return 0;
}

/* One case: fresh shared state, then the pair (60 s at most). */
static void run_pair(int (*srv)(void *), int (*cli)(void *))
{
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, srv, NULL, cli, NULL, 60000), 0);
}

static void test_direct_wake(void **state)
{
	(void)state;
	run_pair(direct_server, direct_client);
}

/* ---- no lease after a call (the hold it replaced kept arrivals back) ---- */

enum {
	HS_FIRST = 1, /* 'f' on fd1 */
	HS_OTHER,     /* 'o' on fd2 */
	HS_DONE,
};

static int hold_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	int fd1 = smcr_accept(lfd, NULL, NULL);
	int fd2 = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd1 >= 0 && fd2 >= 0);
	smcr_close(lfd);
	it_wait_at_least(&sh->stage, HS_FIRST);
	IT_CHECK(smcr_send(fd1, "f", 1, 0) == 1);
	it_wait_at_least(&sh->stage, HS_OTHER);
	IT_CHECK(smcr_send(fd2, "o", 1, 0) == 1);
	it_wait_at_least(&sh->stage, HS_DONE);
	IT_CHECK(smcr_close(fd1) == 0);
	IT_CHECK(smcr_close(fd2) == 0);
	return 0;
}

static int hold_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd1 = it_connect(false, port);
	int fd2 = it_connect(false, port);
	IT_CHECK(fd1 >= 0 && fd2 >= 0);
	struct core_engine *e = sock_engine();
	IT_CHECK(e != NULL);
	pthread_t t;
	struct blocked a;
	start_sleeper(&t, &a, fd1);
	usleep(20000);
	sh->stage = HS_FIRST;
	IT_CHECK(pthread_join(t, NULL) == 0);
	IT_CHECK(a.rc == 1 && a.got == 'f');
	/* the recv that returned left no lease: the CQs are armed for whoever sleeps next */
	pthread_mutex_lock(&e->lock);
	uint64_t lease = e->lease_until;
	pthread_mutex_unlock(&e->lock);
	IT_CHECK(lease == 0);
	/* a byte for fd2, whose reader sleeps in the kernel's poll() (no smcr call) */
	uint64_t t0 = smcr_now_ns();
	sh->stage = HS_OTHER;
	struct pollfd p = { .fd = fd2, .events = POLLIN };
	IT_CHECK(poll(&p, 1, 10000) == 1);
	fprintf(stderr, "[client] arrival seen by the kernel's poll after %llu us\n",
		(unsigned long long)((smcr_now_ns() - t0) / 1000));
	char c;
	IT_CHECK(smcr_recv(fd2, &c, 1, 0) == 1 && c == 'o');
	sh->stage = HS_DONE;
	IT_CHECK(smcr_close(fd1) == 0);
	IT_CHECK(smcr_close(fd2) == 0);
	return 0;
}

static void test_no_lease_after_call(void **state)
{
	(void)state;
	run_pair(hold_server, hold_client);
}

int main(void)
{
	/* before anything reads it (the mode is read once per process) */
	setenv("SMCR_DIRECT_WAKE", "2", 0); /* (0: the mutation check, fails) */
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_direct_wake),
		cmocka_unit_test(test_no_lease_after_call),
	};
	return IT_MAIN(tests);
}
