/* pl_waits: poll, ppoll, select and pselect on decided SMC-R connections, which go through
 * the socket layer's wait (the engine's progress in the waiting thread) and must answer
 * exactly as the kernel's calls do for TCP:
 * - a set mixing an SMC-R fd with a pipe reports only what is ready, in every call;
 * - timeouts: 0 returned, select's timeval left at the time not slept (0 at the end);
 * - a blocking wait is woken by the peer's bytes (sent while it sleeps);
 * - POLLOUT / writefds at once on an idle connection;
 * - urgent data: POLLPRI and exceptfds;
 * - the peer's shutdown: POLLIN (read gives 0), the read bit in select;
 * - a closed fd: POLLNVAL, select EBADF; a bad timespec: EINVAL;
 * - 4 MiB each way at once through non-blocking fds driven by select on one side and
 *   ppoll on the other, checksummed. */
#include "pl_util.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/select.h>

#define TOTAL (4u << 20)

struct late {
	int fd;
	int delay_ms;
	int flags;
};

/* Sends one byte after delay_ms (the waiter is asleep by then). */
static void *late_send(void *arg)
{
	struct late *l = arg;
	poll(NULL, 0, l->delay_ms);
	char x = 'u';
	CHECK(send(l->fd, &x, 1, l->flags) == 1);
	return NULL;
}

static void start_late(pthread_t *t, struct late *l, int fd, int flags)
{
	*l = (struct late){ .fd = fd, .delay_ms = 100, .flags = flags };
	CHECK(pthread_create(t, NULL, late_send, l) == 0);
}

static void eat(int fd, char want)
{
	char x = 0;
	CHECK(recv(fd, &x, 1, 0) == 1 && x == want);
}

static void mixed_and_timeouts(int c)
{
	int pp[2];
	CHECK(pipe(pp) == 0);
	CHECK(write(pp[1], "p", 1) == 1);
	struct pollfd p[2] = { { .fd = c, .events = POLLIN }, { .fd = pp[0], .events = POLLIN } };
	CHECK(poll(p, 2, 1000) == 1 && p[0].revents == 0 && p[1].revents == POLLIN);
	p[1].revents = 0;
	struct timespec ts = { 1, 0 };
	CHECK(ppoll(p, 2, &ts, NULL) == 1 && p[0].revents == 0 && p[1].revents == POLLIN);
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(c, &rs);
	FD_SET(pp[0], &rs);
	int nfds = (c > pp[0] ? c : pp[0]) + 1;
	struct timeval tv = { 1, 0 };
	CHECK(select(nfds, &rs, NULL, NULL, &tv) == 1 && !FD_ISSET(c, &rs) && FD_ISSET(pp[0], &rs));
	FD_ZERO(&rs);
	FD_SET(c, &rs);
	FD_SET(pp[0], &rs);
	CHECK(pselect(nfds, &rs, NULL, NULL, &ts, NULL) == 1 && !FD_ISSET(c, &rs) &&
	      FD_ISSET(pp[0], &rs));
	char x;
	CHECK(read(pp[0], &x, 1) == 1);

	/* nothing ready: each times out with 0 */
	p[0].revents = p[1].revents = 9;
	CHECK(poll(p, 2, 30) == 0 && p[0].revents == 0 && p[1].revents == 0);
	ts = (struct timespec){ 0, 30000000 };
	CHECK(ppoll(p, 2, &ts, NULL) == 0);
	FD_ZERO(&rs);
	FD_SET(c, &rs);
	tv = (struct timeval){ 0, 30000 };
	CHECK(select(c + 1, &rs, NULL, NULL, &tv) == 0 && !FD_ISSET(c, &rs));
	CHECK(tv.tv_sec == 0 && tv.tv_usec == 0);
	FD_SET(c, &rs);
	CHECK(pselect(c + 1, &rs, NULL, NULL, &ts, NULL) == 0 && !FD_ISSET(c, &rs));

	/* a bad timespec, as the kernel: EINVAL */
	ts = (struct timespec){ 0, 1000000000 };
	errno = 0;
	CHECK(ppoll(p, 2, &ts, NULL) == -1 && errno == EINVAL);
	FD_SET(c, &rs);
	errno = 0;
	CHECK(pselect(c + 1, &rs, NULL, NULL, &ts, NULL) == -1 && errno == EINVAL);
	tv = (struct timeval){ -1, 0 };
	errno = 0;
	CHECK(select(c + 1, &rs, NULL, NULL, &tv) == -1 && errno == EINVAL);

	/* a closed fd beside the connection: POLLNVAL; select EBADF */
	close(pp[1]);
	close(pp[0]);
	p[1].fd = pp[0];
	CHECK(poll(p, 2, 1000) == 1 && p[0].revents == 0 && p[1].revents == POLLNVAL);
	FD_ZERO(&rs);
	FD_SET(c, &rs);
	FD_SET(pp[0], &rs);
	errno = 0;
	tv = (struct timeval){ 1, 0 };
	CHECK(select(nfds, &rs, NULL, NULL, &tv) == -1 && errno == EBADF);
}

/* Each call asleep with no timeout, woken by the peer's byte sent meanwhile. */
static void woken(int c, int s)
{
	pthread_t t;
	struct late l;
	struct pollfd p = { .fd = c, .events = POLLIN };
	start_late(&t, &l, s, 0);
	CHECK(poll(&p, 1, -1) == 1 && p.revents == POLLIN);
	CHECK(pthread_join(t, NULL) == 0);
	eat(c, 'u');
	start_late(&t, &l, s, 0);
	CHECK(ppoll(&p, 1, NULL, NULL) == 1 && p.revents == POLLIN);
	CHECK(pthread_join(t, NULL) == 0);
	eat(c, 'u');
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(c, &rs);
	start_late(&t, &l, s, 0);
	CHECK(select(c + 1, &rs, NULL, NULL, NULL) == 1 && FD_ISSET(c, &rs));
	CHECK(pthread_join(t, NULL) == 0);
	eat(c, 'u');
	FD_SET(c, &rs);
	sigset_t m;
	sigemptyset(&m);
	start_late(&t, &l, s, 0);
	CHECK(pselect(c + 1, &rs, NULL, NULL, NULL, &m) == 1 && FD_ISSET(c, &rs));
	CHECK(pthread_join(t, NULL) == 0);
	eat(c, 'u');

	/* writable at once, in both */
	p.events = POLLOUT;
	CHECK(poll(&p, 1, 1000) == 1 && p.revents == POLLOUT);
	fd_set ws;
	FD_ZERO(&ws);
	FD_SET(c, &ws);
	struct timeval tv = { 1, 0 };
	CHECK(select(c + 1, NULL, &ws, NULL, &tv) == 1 && FD_ISSET(c, &ws));

	/* urgent data: POLLPRI, exceptfds (woken from the sleep, too) */
	fd_set es;
	FD_ZERO(&es);
	FD_SET(c, &es);
	start_late(&t, &l, s, MSG_OOB);
	CHECK(select(c + 1, NULL, NULL, &es, NULL) == 1 && FD_ISSET(c, &es));
	CHECK(pthread_join(t, NULL) == 0);
	p.events = POLLPRI;
	CHECK(poll(&p, 1, 1000) == 1 && (p.revents & POLLPRI));
	char x = 0;
	CHECK(recv(c, &x, 1, MSG_OOB) == 1 && x == 'u');
	p.events = POLLPRI;
	CHECK(poll(&p, 1, 0) == 0);
}

struct pump {
	int fd;
	bool use_select;
	uint64_t sent_hash, got_hash;
	size_t got;
};

/* Sends TOTAL bytes and reads the peer's TOTAL on a non-blocking fd, waiting in select or
 * ppoll for both directions at once. */
static void *pump_main(void *arg)
{
	struct pump *pm = arg;
	int fd = pm->fd;
	CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
	static _Thread_local unsigned char out[65536], in[65536];
	size_t sent = 0, have = 0, off = 0;
	uint64_t hs = PL_FNV0, hr = PL_FNV0;
	while (sent < TOTAL || pm->got < TOTAL) {
		bool rd = false, wr = false;
		if (pm->use_select) {
			fd_set rs, ws;
			FD_ZERO(&rs);
			FD_ZERO(&ws);
			if (pm->got < TOTAL)
				FD_SET(fd, &rs);
			if (sent < TOTAL)
				FD_SET(fd, &ws);
			struct timeval tv = { 10, 0 };
			int r = select(fd + 1, &rs, sent < TOTAL ? &ws : NULL, NULL, &tv);
			CHECK(r > 0);
			rd = FD_ISSET(fd, &rs);
			wr = sent < TOTAL && FD_ISSET(fd, &ws);
		} else {
			struct pollfd p = { .fd = fd,
					    .events = (short)((pm->got < TOTAL ? POLLIN : 0) |
							      (sent < TOTAL ? POLLOUT : 0)) };
			struct timespec ts = { 10, 0 };
			CHECK(ppoll(&p, 1, &ts, NULL) == 1);
			CHECK(!(p.revents & (POLLERR | POLLNVAL)));
			rd = p.revents & POLLIN;
			wr = p.revents & POLLOUT;
		}
		if (wr) {
			if (have == 0) {
				have = TOTAL - sent < sizeof(out) ? TOTAL - sent : 1 + sent % sizeof(out);
				pl_fill(out, have, sent + (pm->use_select ? 0 : 7));
				off = 0;
			}
			ssize_t w = send(fd, out + off, have - off, MSG_NOSIGNAL);
			CHECK(w > 0 || (w < 0 && errno == EAGAIN));
			if (w > 0) {
				hs = pl_fnv(hs, out + off, (size_t)w);
				off += (size_t)w;
				sent += (size_t)w;
				if (off == have)
					have = 0;
			}
		}
		if (rd) {
			ssize_t r = recv(fd, in, sizeof(in), 0);
			CHECK(r > 0 || (r < 0 && errno == EAGAIN));
			if (r > 0) {
				hr = pl_fnv(hr, in, (size_t)r);
				pm->got += (size_t)r;
			}
		}
	}
	pm->sent_hash = hs;
	pm->got_hash = hr;
	return NULL;
}

int main(void)
{
	pl_need_preload();
	uint16_t port;
	int lfd = pl_listen(&port);
	int c, s;
	pl_pair(lfd, port, &c, &s);
	CHECK(pl_mode(c) == pl_expect() && pl_mode(s) == pl_expect());
	/* the server's side decided: one byte each way */
	CHECK(send(s, "a", 1, 0) == 1);
	eat(c, 'a');
	CHECK(send(c, "b", 1, 0) == 1);
	eat(s, 'b');
	CHECK(pl_mode(s) == pl_expect());

	mixed_and_timeouts(c);
	woken(c, s);

	struct pump a = { .fd = c, .use_select = true }, b = { .fd = s, .use_select = false };
	pthread_t ta, tb;
	CHECK(pthread_create(&ta, NULL, pump_main, &a) == 0);
	CHECK(pthread_create(&tb, NULL, pump_main, &b) == 0);
	CHECK(pthread_join(ta, NULL) == 0);
	CHECK(pthread_join(tb, NULL) == 0);
	CHECK(a.got == TOTAL && b.got == TOTAL);
	CHECK(a.sent_hash == b.got_hash && b.sent_hash == a.got_hash);
	CHECK(a.sent_hash != b.sent_hash);

	/* the peer's shutdown: readable, read gives 0 */
	CHECK(fcntl(c, F_SETFL, fcntl(c, F_GETFL) & ~O_NONBLOCK) == 0);
	CHECK(shutdown(s, SHUT_WR) == 0);
	struct pollfd p = { .fd = c, .events = POLLIN };
	CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLIN));
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(c, &rs);
	struct timeval tv = { 10, 0 };
	CHECK(select(c + 1, &rs, NULL, NULL, &tv) == 1 && FD_ISSET(c, &rs));
	char x;
	CHECK(read(c, &x, 1) == 0);
	CHECK(pl_mode(c) == pl_expect());
	CHECK(close(c) == 0 && close(s) == 0 && close(lfd) == 0);
	printf("pl_waits: %u bytes each way, mode %s\n", TOTAL,
	       pl_expect() == SMCR_MODE_SMCR ? "smcr" : "tcp");
	return 0;
}
