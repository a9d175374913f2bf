/* pl_signal: a signal during a blocking call on an SMC-R connection does what it does on a
 * TCP socket (signal(7)). Every scenario runs on an SMC-R pair (127.0.0.1, the rules' SMC-R)
 * and on a TCP pair (::1, no rule: TCP), and the SMC-R result must equal TCP's, which is
 * also checked against signal(7):
 *   - recv blocked, a handler with SA_RESTART: the call restarts and returns the data that
 *     comes later; without SA_RESTART: EINTR; with SA_RESTART and SO_RCVTIMEO: EINTR;
 *   - SO_RCVTIMEO expiring without a signal: EAGAIN;
 *   - send blocked on a full connection with nothing sent yet, the same three cases (the
 *     restart returns once the peer reads);
 *   - a send of more than the connection holds, interrupted after some bytes: the count so
 *     far, with SA_RESTART too;
 *   - poll, epoll_wait and select blocked: EINTR with SA_RESTART too (never restarted);
 *   - signal() installs with SA_RESTART (glibc's BSD semantics) and sigaction reads back the
 *     program's own handler and flags;
 *   - a process-directed signal that the program's threads block is taken by its sigwait,
 *     never by a thread of the library (whose handler run would be on the wrong thread).
 * The signal comes from a second thread's pthread_kill once the blocked thread sleeps in
 * the kernel (its /proc state is S), so it always lands inside the call. */
#include "pl_util.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>

static volatile sig_atomic_t hits;
static void on_sig(int sig)
{
	(void)sig;
	hits++;
}

static volatile sig_atomic_t usr2_hits;
static void on_usr2(int sig)
{
	(void)sig;
	usr2_hits++;
}

static pid_t main_tid;

/* The thread's state letter in /proc (R running, S sleeping, ...). */
static char tstate(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Waits until the thread has slept in the kernel for a moment (a blocked call, not a spin). */
static void wait_asleep(pid_t tid)
{
	int seen = 0;
	for (int i = 0; i < 20000 && seen < 5; i++) {
		seen = tstate(tid) == 'S' ? seen + 1 : 0;
		usleep(1000);
	}
	CHECK(seen >= 5);
}

struct helper {
	pthread_t main;
	int peer;          /* after the signal: write (restart cases) or read (send cases) */
	enum { H_NONE, H_WRITE, H_READ } then;
	size_t drain;      /* H_READ: bytes to read */
	_Atomic int done; /* the blocked call returned */
	_Atomic int signalled; /* the signal went (the call was still in progress then) */
};

static void *helper_main(void *arg)
{
	struct helper *h = arg;
	wait_asleep(main_tid);
	if (h->done)
		return NULL; /* the call did not block: the scenario is run again */
	atomic_store(&h->signalled, 1);
	CHECK(pthread_kill(h->main, SIGUSR1) == 0);
	/* the restart cases: the call must still be blocked; then the event it waits for */
	usleep(100000);
	if (h->then == H_WRITE && !h->done) {
		wait_asleep(main_tid);
		pl_write_all(h->peer, "abcd", 4);
	} else if (h->then == H_READ && !h->done) {
		wait_asleep(main_tid);
		char *b = malloc(h->drain);
		CHECK(b);
		pl_read_all(h->peer, b, h->drain);
		free(b);
	}
	return NULL;
}

static void handler(int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sa.sa_flags = flags;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	struct sigaction back;
	CHECK(sigaction(SIGUSR1, NULL, &back) == 0);
	CHECK(back.sa_handler == on_sig && (back.sa_flags & SA_RESTART) == (flags & SA_RESTART) &&
	      !(back.sa_flags & SA_SIGINFO));
}

static void set_timeo(int fd, int opt, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	CHECK(setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv)) == 0);
}

struct result {
	long ret;
	int err;
	int hits;
	bool early; /* the call returned before the signal went: not this scenario */
};

static void start(struct helper *h, pthread_t *t, int peer, int then, size_t drain)
{
	memset(h, 0, sizeof(*h));
	h->main = pthread_self();
	h->peer = peer;
	h->then = then;
	h->drain = drain;
	hits = 0;
	CHECK(pthread_create(t, NULL, helper_main, h) == 0);
}

static struct result finish(struct helper *h, pthread_t t, long ret)
{
	struct result r = { ret, ret < 0 ? errno : 0, 0, !atomic_load(&h->signalled) };
	h->done = 1;
	CHECK(pthread_join(t, NULL) == 0);
	r.hits = hits;
	return r;
}

/* Reads what is left for fd (a helper's late write) without blocking. */
static void drain_nb(int fd)
{
	char b[65536];
	for (int quiet = 0; quiet < 3;) {
		usleep(20000);
		bool got = false;
		while (recv(fd, b, sizeof(b), MSG_DONTWAIT) > 0)
			got = true;
		quiet = got ? 0 : quiet + 1;
	}
}

/* fill a's way to b until a write would block, and stays blocked for 60 ms (the transport
 * may still move what it holds into the peer's buffer); returns the bytes written */
static size_t fill(int a)
{
	static char junk[65536];
	size_t n = 0;
	/* big writes first, then ever smaller ones: TCP refuses a big one while a small one
	 * still fits in the last segment, and the blocking call of the test writes 1 byte */
	static const size_t chunk[] = { 65536, 4096, 1 };
	for (int c = 0; c < 3; c++)
		for (int quiet = 0; quiet < 3;) {
			ssize_t w = send(a, junk, chunk[c], MSG_DONTWAIT);
			if (w < 0) {
				CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
				usleep(20000);
				quiet++;
				continue;
			}
			n += (size_t)w;
			quiet = 0;
		}
	return n;
}

enum scen { S_RECV, S_SEND0, S_SENDPART, S_POLL, S_EPOLL, S_SELECT };

static struct result run(enum scen sc, int flags, long timeo_ms, int a, int b)
{
	struct helper h;
	pthread_t t;
	char buf[8];
	long ret;
	handler(flags);
	switch (sc) {
	case S_RECV:
		if (timeo_ms)
			set_timeo(a, SO_RCVTIMEO, timeo_ms);
		start(&h, &t, b, H_WRITE, 0);
		ret = recv(a, buf, sizeof(buf), 0);
		{
			struct result r = finish(&h, t, ret);
			if (timeo_ms)
				set_timeo(a, SO_RCVTIMEO, 0);
			drain_nb(a);
			return r;
		}
	case S_SEND0: {
		if (timeo_ms)
			set_timeo(a, SO_SNDTIMEO, timeo_ms);
		size_t filled = fill(a);
		start(&h, &t, b, H_READ, filled);
		ret = send(a, "x", 1, 0);
		struct result r = finish(&h, t, ret);
		if (timeo_ms)
			set_timeo(a, SO_SNDTIMEO, 0);
		drain_nb(b);
		return r;
	}
	case S_SENDPART: {
		size_t big = 32u << 20;
		char *p = calloc(1, big);
		CHECK(p);
		start(&h, &t, b, H_NONE, 0);
		ret = send(a, p, big, 0);
		struct result r = finish(&h, t, ret);
		free(p);
		/* the receiver takes what was sent */
		size_t got = 0;
		char tmp[65536];
		while (r.ret > 0 && got < (size_t)r.ret) {
			ssize_t n = recv(b, tmp, sizeof(tmp), 0);
			CHECK(n > 0);
			got += (size_t)n;
		}
		CHECK(r.ret <= 0 || got == (size_t)r.ret);
		return r;
	}
	case S_POLL: {
		struct pollfd p = { .fd = a, .events = POLLIN };
		start(&h, &t, b, H_WRITE, 0);
		ret = poll(&p, 1, -1);
		struct result r = finish(&h, t, ret);
		drain_nb(a);
		return r;
	}
	case S_EPOLL: {
		int ep = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLIN };
		CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev) == 0);
		start(&h, &t, b, H_WRITE, 0);
		ret = epoll_wait(ep, &ev, 1, -1);
		struct result r = finish(&h, t, ret);
		close(ep);
		drain_nb(a);
		return r;
	}
	case S_SELECT: {
		fd_set r;
		FD_ZERO(&r);
		FD_SET(a, &r);
		start(&h, &t, b, H_WRITE, 0);
		ret = select(a + 1, &r, NULL, NULL, NULL);
		struct result res = finish(&h, t, ret);
		drain_nb(a);
		return res;
	}
	}
	abort();
}

static int pair6(int *cl, int *sv)
{
	int l = socket(AF_INET6, SOCK_STREAM, 0);
	if (l < 0)
		return -1;
	/* fixed buffers (no autotuning): a full connection stays full while nobody reads */
	int sz = 65536;
	CHECK(setsockopt(l, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)) == 0);
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	socklen_t al = sizeof(a);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0) {
		close(l);
		return -1;
	}
	*cl = socket(AF_INET6, SOCK_STREAM, 0);
	CHECK(*cl >= 0 && setsockopt(*cl, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)) == 0);
	CHECK(setsockopt(*cl, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)) == 0);
	CHECK(connect(*cl, (struct sockaddr *)&a, sizeof(a)) == 0);
	*sv = accept(l, NULL, NULL);
	CHECK(*sv >= 0);
	close(l);
	return 0;
}

static const char *name[] = { "recv", "send (nothing sent)", "send (part sent)", "poll",
			      "epoll_wait", "select" };

static void expect_same(enum scen sc, int flags, long timeo, int sa, int sb, int ta, int tb,
			long want_ret, int want_err)
{
	/* a call that did not block (the transport took the byte after all) is run again */
	struct result s, t;
	int tries = 0;
	do
		s = run(sc, flags, timeo, sa, sb);
	while (s.early && ++tries < 5);
	tries = 0;
	do
		t = run(sc, flags, timeo, ta, tb);
	while (t.early && ++tries < 5);
	if (s.early || t.early)
		printf("pl_signal: %s: the call did not block 5 times: smcr %d (%ld), tcp %d (%ld)\n",
		       name[sc], s.early, s.ret, t.early, t.ret);
	CHECK(!s.early && !t.early);
	printf("pl_signal: %-20s %-11s timeo %4ld: smcr %ld/%s (%d signals), tcp %ld/%s (%d)\n",
	       name[sc], flags & SA_RESTART ? "SA_RESTART" : "no restart", timeo, s.ret,
	       s.ret < 0 ? strerror(s.err) : "-", s.hits, t.ret, t.ret < 0 ? strerror(t.err) : "-",
	       t.hits);
	CHECK(s.hits >= 1 && t.hits >= 1);
	if (want_ret == -2) {
		/* a partial count: more than 0, less than asked, at both */
		CHECK(t.ret > 0 && t.ret < (32l << 20));
		CHECK(s.ret > 0 && s.ret < (32l << 20));
		return;
	}
	CHECK(t.ret == want_ret && (want_ret >= 0 || t.err == want_err)); /* signal(7) */
	CHECK(s.ret == t.ret && (s.ret >= 0 || s.err == t.err));
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	pl_need_preload();
	main_tid = (pid_t)syscall(SYS_gettid);
	uint16_t port;
	int lfd = pl_listen(&port);
	int sa, sb, ta, tb;
	pl_pair(lfd, port, &sa, &sb);
	CHECK(pl_mode(sa) == pl_expect() && pl_mode(sb) == pl_expect());
	if (pair6(&ta, &tb) < 0) {
		printf("pl_signal: no IPv6 loopback for the TCP pair\n");
		return 77;
	}
	CHECK(pl_mode(ta) == SMCR_MODE_TCP);

	/* signal(): SA_RESTART, read back as set */
	CHECK(signal(SIGUSR1, on_sig) != SIG_ERR);
	struct sigaction back;
	CHECK(sigaction(SIGUSR1, NULL, &back) == 0);
	CHECK(back.sa_handler == on_sig && (back.sa_flags & SA_RESTART));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	CHECK(siginterrupt(SIGUSR1, 1) == 0); /* old programs still call it */
#pragma GCC diagnostic pop
	CHECK(sigaction(SIGUSR1, NULL, &back) == 0 && !(back.sa_flags & SA_RESTART));

	expect_same(S_RECV, SA_RESTART, 0, sa, sb, ta, tb, 4, 0);
	expect_same(S_RECV, 0, 0, sa, sb, ta, tb, -1, EINTR);
	expect_same(S_RECV, SA_RESTART, 30000, sa, sb, ta, tb, -1, EINTR);

	/* SO_RCVTIMEO expiring: EAGAIN at both */
	char c;
	set_timeo(sa, SO_RCVTIMEO, 100);
	set_timeo(ta, SO_RCVTIMEO, 100);
	errno = 0;
	CHECK(recv(ta, &c, 1, 0) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
	errno = 0;
	CHECK(recv(sa, &c, 1, 0) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
	set_timeo(sa, SO_RCVTIMEO, 0);
	set_timeo(ta, SO_RCVTIMEO, 0);

	expect_same(S_SEND0, SA_RESTART, 0, sa, sb, ta, tb, 1, 0);
	expect_same(S_SEND0, 0, 0, sa, sb, ta, tb, -1, EINTR);
	expect_same(S_SEND0, SA_RESTART, 30000, sa, sb, ta, tb, -1, EINTR);
	expect_same(S_SENDPART, SA_RESTART, 0, sa, sb, ta, tb, -2, 0);
	expect_same(S_SENDPART, 0, 0, sa, sb, ta, tb, -2, 0);

	expect_same(S_POLL, SA_RESTART, 0, sa, sb, ta, tb, -1, EINTR);
	expect_same(S_EPOLL, SA_RESTART, 0, sa, sb, ta, tb, -1, EINTR);
	expect_same(S_SELECT, SA_RESTART, 0, sa, sb, ta, tb, -1, EINTR);

	/* A process-directed signal that every thread of the program blocks waits for the
	 * program's sigwait: the library's threads (progress, provider) block all signals, so
	 * none of them takes it and runs the handler there. */
	struct sigaction u;
	memset(&u, 0, sizeof(u));
	u.sa_handler = on_usr2;
	CHECK(sigaction(SIGUSR2, &u, NULL) == 0);
	sigset_t s2, olds;
	sigemptyset(&s2);
	sigaddset(&s2, SIGUSR2);
	CHECK(pthread_sigmask(SIG_BLOCK, &s2, &olds) == 0);
	for (int i = 0; i < 20; i++) {
		CHECK(kill(getpid(), SIGUSR2) == 0);
		usleep(20000); /* not in sigtimedwait: a thread that does not block it takes it */
		struct timespec ts = { 5, 0 };
		CHECK(sigtimedwait(&s2, NULL, &ts) == SIGUSR2);
	}
	CHECK(usr2_hits == 0);
	CHECK(pthread_sigmask(SIG_SETMASK, &olds, NULL) == 0);

	/* the connections still carry bytes in order */
	pl_write_all(sa, "done", 4);
	char b4[4];
	pl_read_all(sb, b4, 4);
	CHECK(!memcmp(b4, "done", 4));
	close(sa), close(sb), close(ta), close(tb), close(lfd);
	printf("pl_signal: ok\n");
	return 0;
}
