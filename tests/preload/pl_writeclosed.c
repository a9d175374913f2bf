/* pl_writeclosed: writes after the peer closed, over SMC-R and over TCP in the same run,
 * side by side. TCP takes the first write after the peer's close (the peer's stack answers
 * it with a reset), then shows POLLERR|POLLHUP with EPIPE pending, and the next write fails
 * with EPIPE (and SIGPIPE); reads end at EOF throughout. CPython's test_socket
 * (testOutsideTimeout) writes into a closed peer that way. Two orders: the pending error
 * read by the next write, or by SO_ERROR first. Each step's outcome (return value, errno,
 * poll bits, SIGPIPEs) is compared with the TCP pair's and with what Linux TCP gives.
 * writeclosed.rules: 127.0.0.1 tries SMC-R, 127.0.0.2 is plain TCP. */
#include "pl_util.h"

#include <signal.h>
#include <stdbool.h>

#define EV (POLLIN | POLLOUT | POLLPRI | POLLRDHUP)
#define SHOWN (POLLIN | POLLOUT | POLLPRI | POLLERR | POLLHUP | POLLRDHUP)

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

struct trace {
	short before, after_w1, after_consume;
	ssize_t rd0, w1, rd1, w2, w3, rd2;
	int e_w2, e_w3, so_err, so_err_after, sig_w2, sig_w3;
};

/* The poll bits once want shows (10 s at most), without waiting if want is 0. */
static short revents_once(int fd, short want)
{
	struct pollfd p = { .fd = fd, .events = EV };
	for (int i = 0; i < 1000; i++) {
		CHECK(poll(&p, 1, 0) >= 0);
		if ((p.revents & want) == want)
			break;
		usleep(10000);	/* POLLOUT is there at once: poll's timeout would not wait */
	}
	return p.revents & SHOWN;
}

static void pair_on(const char *ip, int *cl, int *sv)
{
	uint16_t port;
	int l = pl_listen_on(ip, &port);
	*cl = pl_connect_on(ip, port);
	*sv = pl_accept_used(l);
	CHECK(close(l) == 0);
}

/* One pair: the server side closes, the client writes twice. so_first: SO_ERROR is read
 * between the writes. */
static struct trace run(const char *ip, int want_mode, bool so_first)
{
	int cl, sv;
	pair_on(ip, &cl, &sv);
	/* a round trip first, so the handshake has decided and the connection carries data */
	pl_write_all(cl, "ping", 4);
	char b[8];
	pl_read_all(sv, b, 4);
	pl_write_all(sv, "pong", 4);
	pl_read_all(cl, b, 4);
	CHECK(pl_mode(cl) == want_mode && pl_mode(sv) == want_mode);

	struct trace t;
	memset(&t, 0, sizeof(t));
	CHECK(close(sv) == 0);
	t.before = revents_once(cl, POLLRDHUP);
	t.rd0 = read(cl, b, sizeof(b));
	sigpipes = 0;
	t.w1 = write(cl, "late", 4);
	t.after_w1 = revents_once(cl, POLLERR);
	t.rd1 = read(cl, b, sizeof(b));
	if (so_first)
		t.so_err = pl_so_error(cl);
	errno = 0;
	t.w2 = write(cl, "again", 5);
	t.e_w2 = errno;
	t.sig_w2 = sigpipes;
	t.after_consume = revents_once(cl, 0);
	t.so_err_after = pl_so_error(cl);
	errno = 0;
	t.w3 = send(cl, "more", 4, MSG_NOSIGNAL);
	t.e_w3 = errno;
	t.sig_w3 = sigpipes - t.sig_w2;
	t.rd2 = read(cl, b, sizeof(b));
	CHECK(close(cl) == 0);
	return t;
}

static void show(const char *what, const struct trace *t)
{
	fprintf(stderr,
		"pl_writeclosed: %s: poll %#x, read %zd, write %zd, poll %#x, read %zd, "
		"SO_ERROR %d, write %zd (%s, %d SIGPIPE), poll %#x, SO_ERROR %d, "
		"write %zd (%s, %d SIGPIPE), read %zd\n",
		what, (unsigned)t->before, t->rd0, t->w1, (unsigned)t->after_w1, t->rd1, t->so_err,
		t->w2, strerror(t->e_w2), t->sig_w2, (unsigned)t->after_consume, t->so_err_after,
		t->w3, strerror(t->e_w3), t->sig_w3, t->rd2);
}

/* What Linux TCP gives on loopback. */
static void check_tcp_values(const struct trace *t, bool so_first)
{
	CHECK(t->before == (POLLIN | POLLOUT | POLLRDHUP));
	CHECK(t->rd0 == 0);
	CHECK(t->w1 == 4);
	CHECK(t->after_w1 == (POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP));
	CHECK(t->rd1 == 0);
	CHECK(t->so_err == (so_first ? EPIPE : 0));
	CHECK(t->w2 == -1 && t->e_w2 == EPIPE && t->sig_w2 == 1);
	CHECK(t->after_consume == (POLLIN | POLLOUT | POLLHUP | POLLRDHUP));
	CHECK(t->so_err_after == 0);
	CHECK(t->w3 == -1 && t->e_w3 == EPIPE && t->sig_w3 == 0);
	CHECK(t->rd2 == 0);
}

int main(void)
{
	pl_need_preload();
	CHECK(signal(SIGPIPE, on_sigpipe) != SIG_ERR);
	for (int so_first = 0; so_first <= 1; so_first++) {
		struct trace tcp = run("127.0.0.2", SMCR_MODE_TCP, so_first);
		struct trace smc = run("127.0.0.1", SMCR_MODE_SMCR, so_first);
		show("tcp", &tcp);
		show("smc", &smc);
		check_tcp_values(&tcp, so_first);
		check_tcp_values(&smc, so_first);
	}
	printf("pl_writeclosed: ok (SMC-R as TCP)\n");
	return 0;
}
