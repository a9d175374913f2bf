/* pl_closed: a peer that closes at once, many times over. First a server that accepts and
 * closes at once (CPython's test_socket NetworkConnectionAttributesTest does this with
 * create_connection(timeout=)).
 * Under TCP the client sees a connection that ends cleanly: POLLOUT, SO_ERROR 0, a read of
 * EOF, SO_ERROR still 0. Under the interposer the client is undecided when the server
 * closes and its Proposal races the close (docs/parts/connect.md "Undecided connections"):
 * a Proposal that reaches the server's socket after the close must not turn that close
 * into a reset. Each round is one connection; PL_ROUNDS rounds per case (500 by default:
 * the race was seen in about 1 of 100 connections). Cases:
 *   - non-blocking connect (POLLOUT, SO_ERROR), the server closes without a word;
 *   - blocking connect, the server closes without a word;
 *   - blocking connect, the server writes 64 bytes and closes: the client reads exactly
 *     those bytes, then EOF, SO_ERROR 0.
 * A server thread accepts and closes; the client is the main thread, as in CPython's
 * ThreadableTest. Then the other way round (test_socket's testCreateConnectionClose): the
 * client connects and closes at once, the server reads EOF and sends the nothing it read:
 * send of 0 bytes returns 0, as TCP's to a peer that closed. */
#include "pl_util.h"

#include <fcntl.h>
#include <stdbool.h>

#define REPLY 64

struct server {
	pthread_t t;
	int lfd;
	int rounds;
	bool write_first;
};

static void *server_main(void *arg)
{
	struct server *sv = arg;
	unsigned char b[REPLY];
	pl_fill(b, sizeof(b), 5);
	for (int i = 0; i < sv->rounds; i++) {
		int s = accept(sv->lfd, NULL, NULL);
		CHECK(s >= 0);
		if (sv->write_first)
			pl_write_all(s, b, sizeof(b));
		CHECK(close(s) == 0);
	}
	return NULL;
}

/* create_connection(timeout=...): a non-blocking connect, POLLOUT, SO_ERROR */
static int connect_nb(uint16_t port)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0);
	CHECK(fcntl(c, F_SETFL, O_NONBLOCK) == 0);
	struct sockaddr_in a = pl_addr(port);
	int rc = connect(c, (struct sockaddr *)&a, sizeof(a));
	CHECK(rc == 0 || errno == EINPROGRESS);
	struct pollfd p = { .fd = c, .events = POLLOUT };
	CHECK(poll(&p, 1, 20000) == 1 && (p.revents & POLLOUT));
	int err = pl_so_error(c);
	if (err)
		fprintf(stderr, "pl_closed: SO_ERROR %d (%s) after POLLOUT\n", err, strerror(err));
	CHECK(err == 0);
	CHECK(fcntl(c, F_SETFL, 0) == 0);
	return c;
}

/* What the client reads: want bytes (the server's, or none), then EOF, and no error. */
static void read_to_eof(int c, size_t want)
{
	unsigned char b[REPLY + 1];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(c, b + got, sizeof(b) - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fprintf(stderr, "pl_closed: read after %zu bytes: %s\n", got,
				strerror(errno));
		CHECK(r >= 0);
		if (r == 0)
			break;
		got += (size_t)r;
		CHECK(got <= want);
	}
	CHECK(got == want);
	if (want) {
		unsigned char w[REPLY];
		pl_fill(w, sizeof(w), 5);
		CHECK(memcmp(b, w, want) == 0);
	}
	CHECK(pl_so_error(c) == 0);
}

static void run(int l, uint16_t port, int rounds, bool nonblocking, bool write_first)
{
	struct server sv = { .lfd = l, .rounds = rounds, .write_first = write_first };
	CHECK(pthread_create(&sv.t, NULL, server_main, &sv) == 0);
	for (int i = 0; i < rounds; i++) {
		int c = nonblocking ? connect_nb(port) : pl_connect(port);
		read_to_eof(c, write_first ? REPLY : 0);
		CHECK(close(c) == 0);
	}
	CHECK(pthread_join(sv.t, NULL) == 0);
}

struct echo0 {
	pthread_t t;
	int lfd;
	int rounds;
};

static void *echo0_main(void *arg)
{
	struct echo0 *e = arg;
	for (int i = 0; i < e->rounds; i++) {
		int s = accept(e->lfd, NULL, NULL);
		CHECK(s >= 0);
		char b[16];
		CHECK(recv(s, b, sizeof(b), 0) == 0);
		ssize_t n = send(s, b, 0, MSG_NOSIGNAL);
		if (n != 0)
			fprintf(stderr, "pl_closed: send of 0 bytes after EOF: %zd (%s)\n", n,
				strerror(errno));
		CHECK(n == 0);
		CHECK(close(s) == 0);
	}
	return NULL;
}

static void client_closes(int l, uint16_t port, int rounds)
{
	struct echo0 e = { .lfd = l, .rounds = rounds };
	CHECK(pthread_create(&e.t, NULL, echo0_main, &e) == 0);
	for (int i = 0; i < rounds; i++)
		CHECK(close(pl_connect(port)) == 0);
	CHECK(pthread_join(e.t, NULL) == 0);
}

int main(void)
{
	pl_need_preload();
	const char *e = getenv("PL_ROUNDS");
	int rounds = e ? atoi(e) : 500;
	CHECK(rounds > 0);
	uint16_t port;
	int l = pl_listen(&port);
	run(l, port, rounds, true, false);
	run(l, port, rounds, false, false);
	run(l, port, rounds, false, true);
	client_closes(l, port, rounds / 10 + 1);
	close(l);
	printf("pl_closed: ok (%d rounds per case)\n", rounds);
	return 0;
}
