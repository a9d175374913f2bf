/* pl_swapwait: a thread that sleeps on an undecided connection while its handshake falls
 * back wakes for the data that comes after the fallback (docs/design/readiness.md
 * section 2, "Waits across the swap"). The connection's number holds the placeholder while
 * undecided; at the fallback the TCP socket takes the number back. The kernel's poll and
 * select stay on the wait queue of the file the number had when they started, so without
 * the placeholder's hidden reference (src/sock/sock.h struct sock.keep) such a waiter
 * would sleep through the TCP socket's data until its timeout.
 *
 * Per case, on a fresh connection: a waiter thread sleeps on the client's undecided
 * connection (a blocking recv, poll, ppoll, select or pselect, each with a 20 s bound);
 * the server then declines (it dups the accepted connection before its first use,
 * docs/INTERPOSER.md "Accept at first use"); once the client says TCP, a pause lets the
 * waiter look again at the swapped number and find nothing; only then does the server
 * write. The waiter must report the bytes readable (and read them) before its bound; a
 * select leaves the time it did not sleep in its timeval, as Linux's does. */
#include "pl_util.h"

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>

enum kind { RECV, POLL, PPOLL, SELECT, PSELECT, NKIND };
static const char *const names[NKIND] = { "recv", "poll", "ppoll", "select", "pselect" };

struct waiter {
	pthread_t t;
	int fd;
	enum kind k;
	int ready; /* the wait's return value (recv: bytes) */
	short revents;
	char got[3];
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct pollfd p = { .fd = w->fd, .events = POLLIN };
	struct timespec ts = { 20, 0 };
	struct timeval tv = { 20, 0 };
	fd_set r;
	FD_ZERO(&r);
	FD_SET(w->fd, &r);
	switch (w->k) {
	case RECV:
		CHECK(setsockopt(w->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
		w->ready = (int)recv(w->fd, w->got, 3, MSG_WAITALL);
		return NULL;
	case POLL:
		w->ready = poll(&p, 1, 20000);
		w->revents = p.revents;
		break;
	case PPOLL:
		w->ready = ppoll(&p, 1, &ts, NULL);
		w->revents = p.revents;
		break;
	case SELECT: {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		w->ready = select(w->fd + 1, &r, NULL, NULL, &tv);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		w->revents = FD_ISSET(w->fd, &r) ? POLLIN : 0;
		/* Linux's select leaves the time not slept in tv: less than given, and not
		 * less than what is left after the time this thread saw pass (1 ms for the
		 * rounding to microseconds) */
		long long left = (long long)tv.tv_sec * 1000000 + tv.tv_usec;
		long long seen = ((long long)(t1.tv_sec - t0.tv_sec) * 1000000000 +
				  (t1.tv_nsec - t0.tv_nsec)) / 1000;
		CHECK(tv.tv_usec >= 0 && tv.tv_usec < 1000000);
		CHECK(left < 20000000 && left >= 20000000 - seen - 1000);
		break;
	}
	case PSELECT:
		w->ready = pselect(w->fd + 1, &r, NULL, NULL, &ts, NULL);
		w->revents = FD_ISSET(w->fd, &r) ? POLLIN : 0;
		break;
	case NKIND:
		break;
	}
	if (w->ready == 1)
		CHECK(recv(w->fd, w->got, 3, MSG_DONTWAIT) == 3);
	return NULL;
}

static void one(int l, uint16_t port, enum kind k)
{
	int c = pl_connect(port); /* returns once TCP is up: the server has not answered */
	CHECK(pl_mode_now(c) == SMCR_MODE_HANDSHAKE);
	struct waiter w = { .fd = c, .k = k };
	CHECK(pthread_create(&w.t, NULL, waiter_main, &w) == 0);
	usleep(300 * 1000); /* the waiter is asleep on the placeholder by now */
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	int copy = dup(s); /* the first use is a dup: declined, TCP at both ends */
	CHECK(copy >= 0);
	CHECK(pl_mode(c) == SMCR_MODE_TCP);
	usleep(300 * 1000); /* the waiter has looked at the TCP socket: nothing yet */
	pl_write_all(s, "abc", 3);
	CHECK(pthread_join(w.t, NULL) == 0);
	if (k == RECV) {
		CHECK(w.ready == 3);
	} else {
		CHECK(w.ready == 1);
		CHECK(w.revents & POLLIN);
	}
	CHECK(memcmp(w.got, "abc", 3) == 0);
	/* and the connection goes on as TCP, both ways */
	char b[3];
	pl_write_all(c, "xyz", 3);
	pl_read_all(s, b, 3);
	CHECK(memcmp(b, "xyz", 3) == 0);
	close(c);
	close(copy);
	close(s);
}

int main(void)
{
	pl_need_preload();
	uint16_t port;
	int l = pl_listen(&port);
	for (int k = RECV; k < NKIND; k++) {
		one(l, port, (enum kind)k);
		printf("pl_swapwait: %s ok\n", names[k]);
	}
	close(l);
	printf("pl_swapwait: ok\n");
	return 0;
}
