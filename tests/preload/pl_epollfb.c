/* pl_epollfb: epoll registrations of a connection whose handshake falls back while a set
 * holds it (docs/INTERPOSER.md "Undecided connections", docs/design/readiness.md section
 * 2). The client's undecided connection is the placeholder; at the fallback its TCP socket
 * takes the number back and each registration is moved to it (src/sock/epoll.c). The
 * server declines: it dups the accepted connection before using it (docs/INTERPOSER.md
 * "Accept at first use"), so the client's handshake gets a Decline and falls back. Counted
 * per case, with epoll_wait(0) after the client's mode says TCP:
 *   - edge-triggered, the placeholder's EPOLLOUT not collected before the fallback: exactly
 *     one event, EPOLLOUT, then none (the edge is never lost);
 *   - edge-triggered, that EPOLLOUT collected before: at most one more EPOLLOUT, and a read
 *     then gives EAGAIN (the one spurious wake the move may give, written down in both
 *     docs); then none;
 *   - edge-triggered, the server's bytes behind its Decline: EPOLLIN, the bytes exact;
 *   - level-triggered: EPOLLOUT at each wait, as TCP's;
 *   - EPOLLONESHOT fired before the fallback: no event until the program's EPOLL_CTL_MOD
 *     re-arms it, then one.
 * Each case then checks the connection carries bytes both ways. */
#include "pl_util.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/epoll.h>

struct decliner {
	pthread_t t;
	int lfd;
	int fd;	  /* the accepted connection, kept open */
	int copy; /* its dup: the first use declines */
	bool write_first;
};

static void *decliner_main(void *arg)
{
	struct decliner *d = arg;
	d->fd = accept(d->lfd, NULL, NULL);
	CHECK(d->fd >= 0);
	d->copy = dup(d->fd); /* never used before: declined, TCP at both ends */
	CHECK(d->copy >= 0);
	if (d->write_first)
		pl_write_all(d->copy, "0123456789", 10);
	return NULL;
}

static int connect_nb(uint16_t port)
{
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(c >= 0);
	struct sockaddr_in a = pl_addr(port);
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) == 0 || errno == EINPROGRESS);
	return c;
}

static int wait_events(int ep, struct epoll_event *evs, int ms)
{
	int n;
	do
		n = epoll_wait(ep, evs, 4, ms);
	while (n < 0 && errno == EINTR);
	CHECK(n >= 0);
	return n;
}

/* POLLOUT on the client (TCP up), without touching the epoll set */
static void wait_up(int c)
{
	struct pollfd p = { .fd = c, .events = POLLOUT };
	CHECK(poll(&p, 1, 20000) == 1 && (p.revents & POLLOUT));
}

/* the bytes both ways, after everything else */
static void check_bytes(int c, int s)
{
	char b[3];
	pl_write_all(s, "abc", 3);
	struct pollfd p = { .fd = c, .events = POLLIN };
	CHECK(poll(&p, 1, 20000) == 1);
	CHECK(read(c, b, 3) == 3 && memcmp(b, "abc", 3) == 0);
	pl_write_all(c, "xyz", 3);
	int fl = fcntl(s, F_GETFL);
	CHECK(fl >= 0 && fcntl(s, F_SETFL, fl & ~O_NONBLOCK) == 0);
	pl_read_all(s, b, 3);
	CHECK(memcmp(b, "xyz", 3) == 0);
}

enum kind { ET_FRESH, ET_SEEN, ET_DATA, LT, ONESHOT };

static void one(int l, uint16_t port, enum kind k)
{
	int c = connect_nb(port);
	int ep = epoll_create1(0);
	CHECK(ep >= 0);
	uint32_t mask = EPOLLIN | EPOLLOUT | (k == LT ? 0 : k == ONESHOT ? EPOLLONESHOT : EPOLLET);
	struct epoll_event ev = { .events = mask, .data.u64 = 7 }, evs[4];
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) == 0);
	wait_up(c);
	if (k == ET_SEEN || k == ONESHOT) {
		/* the placeholder's edge, collected before the fallback */
		CHECK(wait_events(ep, evs, 20000) == 1 && evs[0].data.u64 == 7 &&
		      (evs[0].events & EPOLLOUT) && !(evs[0].events & EPOLLIN));
	}
	struct decliner d = { .lfd = l, .fd = -1, .copy = -1, .write_first = k == ET_DATA };
	CHECK(pthread_create(&d.t, NULL, decliner_main, &d) == 0);
	CHECK(pthread_join(d.t, NULL) == 0);
	CHECK(pl_mode(c) == SMCR_MODE_TCP);
	char b[16];
	int n;
	switch (k) {
	case ET_FRESH:
		n = wait_events(ep, evs, 0);
		CHECK(n == 1 && evs[0].data.u64 == 7 && evs[0].events == EPOLLOUT);
		CHECK(wait_events(ep, evs, 0) == 0);
		break;
	case ET_SEEN:
		n = wait_events(ep, evs, 0);
		CHECK(n <= 1);
		printf("pl_epollfb: et_seen: %d event(s) at the move (TCP: 0)\n", n);
		if (n == 1) {
			CHECK(evs[0].events == EPOLLOUT);
			CHECK(read(c, b, sizeof(b)) < 0 && errno == EAGAIN);
		}
		CHECK(wait_events(ep, evs, 0) == 0);
		break;
	case ET_DATA: {
		/* the edge for the server's bytes: at the move, or at their arrival after it */
		size_t got = 0;
		while (got < 10) {
			n = wait_events(ep, evs, 20000);
			CHECK(n == 1 && evs[0].data.u64 == 7);
			if (!(evs[0].events & EPOLLIN))
				continue; /* the TCP socket's EPOLLOUT at the move */
			ssize_t r;
			while ((r = read(c, b + got, sizeof(b) - got)) > 0)
				got += (size_t)r;
			CHECK(r < 0 && errno == EAGAIN);
		}
		CHECK(got == 10 && memcmp(b, "0123456789", 10) == 0);
		CHECK(wait_events(ep, evs, 0) == 0);
		break;
	}
	case LT:
		for (int i = 0; i < 3; i++)
			CHECK(wait_events(ep, evs, 0) == 1 && evs[0].events == EPOLLOUT);
		break;
	case ONESHOT:
		CHECK(wait_events(ep, evs, 0) == 0); /* fired once: nothing until re-armed */
		ev.events = EPOLLOUT | EPOLLONESHOT;
		CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev) == 0);
		CHECK(wait_events(ep, evs, 0) == 1 && evs[0].events == EPOLLOUT);
		CHECK(wait_events(ep, evs, 0) == 0);
		break;
	}
	check_bytes(c, d.fd);
	close(ep);
	close(c);
	close(d.copy);
	close(d.fd);
}

int main(void)
{
	pl_need_preload();
	uint16_t port;
	int l = pl_listen(&port);
	const char *name[] = { "et_fresh", "et_seen", "et_data", "lt", "oneshot" };
	for (int k = ET_FRESH; k <= ONESHOT; k++) {
		one(l, port, (enum kind)k);
		printf("pl_epollfb: %s ok\n", name[k]);
	}
	close(l);
	printf("pl_epollfb: ok\n");
	return 0;
}
