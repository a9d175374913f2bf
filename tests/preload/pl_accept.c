/* pl_accept: accept at first use (docs/INTERPOSER.md "Accept at first use").
 *   - accept-then-fork (PostgreSQL, socat fork, Python's ForkingMixIn): the parent accepts,
 *     forks and closes its copy; the child uses the connection and runs its handshake: SMC-R
 *     in the child and at the client, 1 MiB echoed back, checksummed;
 *   - accept-then-exec (inetd, socat EXEC:): the child dup2()s the connection onto 0 and 1
 *     and execs an echo image: the connection goes on as TCP (the never-used connection was
 *     declined before the copy), the client falls back, every byte echoed is its own;
 *   - the same with the connection passed as a number across exec (no dup): declined at
 *     exec, TCP, echoed.
 *   pl_accept echo [FD]: the echo image (FD, or 0 and 1). */
#include "pl_util.h"

#include <sys/wait.h>

static void echo(int in, int out)
{
	char b[65536];
	ssize_t r;
	while ((r = read(in, b, sizeof(b))) > 0)
		pl_write_all(out, b, (size_t)r);
	CHECK(r == 0);
}

static void client_round(uint16_t port, int want_mode, size_t n)
{
	int c = pl_connect(port);
	if (pl_mode(c) != want_mode)
		fprintf(stderr, "client mode %d, expected %d\n", pl_mode(c), want_mode);
	CHECK(pl_mode(c) == want_mode);
	static unsigned char buf[1 << 20], back[1 << 20];
	CHECK(n <= sizeof(buf));
	pl_fill(buf, n, 7);
	/* write in pieces and read the echo as it comes (the pipe of a TCP echo is small) */
	size_t sent = 0, got = 0;
	while (got < n) {
		if (sent < n) {
			size_t k = n - sent < 16384 ? n - sent : 16384;
			pl_write_all(c, buf + sent, k);
			sent += k;
		}
		ssize_t r = read(c, back + got, n - got);
		CHECK(r > 0);
		got += (size_t)r;
	}
	CHECK(!memcmp(buf, back, n));
	CHECK(shutdown(c, SHUT_WR) == 0);
	char x;
	CHECK(read(c, &x, 1) == 0);
	CHECK(pl_mode(c) == want_mode);
	close(c);
}

static pid_t server_fork(int lfd, int how, const char *self)
{
	int a = accept(lfd, NULL, NULL);
	CHECK(a >= 0);
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		close(lfd);
		if (how == 0) { /* use it here */
			echo(a, a);
			/* _exit without close: the library first closes SMC-R connections as
			 * the kernel closes TCP ones at exit (the client reads EOF, not a reset) */
			_exit(pl_mode(a) == pl_expect() ? 0 : 4);
		}
		char fdarg[16];
		snprintf(fdarg, sizeof(fdarg), "%d", a);
		if (how == 1) {
			CHECK(dup2(a, 0) == 0 && dup2(a, 1) == 1);
			close(a);
			char *av[] = { (char *)self, "echo", NULL };
			execv("/proc/self/exe", av);
		} else {
			char *av[] = { (char *)self, "echo", fdarg, NULL };
			execv("/proc/self/exe", av);
		}
		_exit(127);
	}
	CHECK(close(a) == 0); /* the parent's copy: closing it ends nothing */
	return p;
}

/* The server runs in its own process, forked before the client's first connect: it has
 * no thread of its own (the library starts none at listen or accept here) when it forks
 * its children. GCC 12's ASan runtime does not hold its allocator's lock across fork(), so
 * a child forked while another thread of the same process allocates (the client's
 * handshake, had the server been a thread beside it) can hang in malloc. glibc's malloc is
 * fork-safe; programs are not limited so. */
static void server_main(int lfd, const char *self)
{
	for (int how = 0; how < 3; how++) {
		pid_t child = server_fork(lfd, how, self);
		int st;
		CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st));
		if (WEXITSTATUS(st))
			fprintf(stderr, "round %d: child exit %d\n", how, WEXITSTATUS(st));
		CHECK(WEXITSTATUS(st) == 0);
	}
	close(lfd);
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "echo")) {
		if (argc == 3) {
			int fd = atoi(argv[2]);
			echo(fd, fd);
		} else {
			echo(0, 1);
		}
		return 0;
	}
	pl_need_preload();
	uint16_t port;
	int lfd = pl_listen(&port);
	pid_t srv = fork();
	CHECK(srv >= 0);
	if (srv == 0)
		server_main(lfd, argv[0]);
	CHECK(close(lfd) == 0);
	/* the child's own use decides SMC-R; an exec'd image gets TCP */
	for (int how = 0; how < 3; how++)
		client_round(port, how == 0 ? pl_expect() : SMCR_MODE_TCP, how == 0 ? 1u << 20 : 1u << 18);
	int st;
	CHECK(waitpid(srv, &st, 0) == srv && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("pl_accept: ok\n");
	return 0;
}
