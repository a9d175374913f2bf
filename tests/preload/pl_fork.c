/* pl_fork: fork under the interposer.
 *   - A child that closes the parent's SMC-R connections and exits (redis BGSAVE's child
 *     does less) does not disturb them: afterwards the parent moves data both ways on them,
 *     checksummed, still in SMC-R mode.
 *   - A child's data call on a connection that was already in SMC-R mode in the parent
 *     fails with an error (never the parent's bytes), and the parent's bytes stay the
 *     parent's.
 *   - A listener inherited by a child keeps working there: the child accepts a connection
 *     the parent makes and gets SMC-R (its own engine), data checksummed; the parent's
 *     listener also still accepts over SMC-R afterwards. */
#include "pl_util.h"

#include <sys/wait.h>


static void exchange(int a, int b, size_t n)
{
	static unsigned char buf[1 << 16];
	uint64_t ha = PL_FNV0, hb = PL_FNV0;
	for (size_t off = 0; off < n; off += sizeof(buf)) {
		size_t k = n - off < sizeof(buf) ? n - off : sizeof(buf);
		pl_fill(buf, k, off);
		ha = pl_fnv(ha, buf, k);
		pl_write_all(a, buf, k);
		pl_read_all(b, buf, k);
		hb = pl_fnv(hb, buf, k);
	}
	CHECK(ha == hb);
}

int main(void)
{
	pl_need_preload();
	uint16_t port;
	int lfd = pl_listen(&port);
	int c, s;
	pl_pair(lfd, port, &c, &s);
	CHECK(pl_mode(c) == pl_expect() && pl_mode(s) == pl_expect());
	exchange(c, s, 1 << 20);

	/* 1. child closes the parent's connections and exits */
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		close(c);
		close(s);
		_exit(0);
	}
	int st;
	CHECK(waitpid(p, &st, 0) == p);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "child status %#x\n", st);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	exchange(c, s, 1 << 20);
	exchange(s, c, 1 << 20);
	CHECK(pl_mode(c) == pl_expect() && pl_mode(s) == pl_expect());

	/* 2. a child's data call on an SMC-R connection of the parent */
	if (pl_expect() == SMCR_MODE_SMCR) {
		CHECK(write(s, "abcd", 4) == 4);
		p = fork();
		CHECK(p >= 0);
		if (p == 0) {
			char b[4];
			errno = 0;
			ssize_t r = recv(c, b, sizeof(b), MSG_DONTWAIT);
			_exit(r < 0 && errno != EAGAIN ? 0 : 1);
		}
		CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st));
		CHECK(WEXITSTATUS(st) == 0);
		char b[4];
		pl_read_all(c, b, 4);
		CHECK(!memcmp(b, "abcd", 4));
	}

	/* 3. the listener in a child: it accepts the parent's next connection and, using it
	 * first, runs the handshake with its own engine (accept at first use) */
	p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		int a = accept(lfd, NULL, NULL);
		if (a < 0)
			_exit(2);
		char b[1 << 16];
		uint64_t h = PL_FNV0;
		size_t got = 0;
		ssize_t r;
		while ((r = read(a, b, sizeof(b))) > 0) {
			h = pl_fnv(h, b, (size_t)r);
			got += (size_t)r;
		}
		if (pl_mode(a) != pl_expect())
			_exit(4); /* the child's own handshake, run at its first read */
		pl_write_all(a, &h, sizeof(h));
		close(a);
		_exit(got == (1u << 20) ? 0 : 3);
	}
	int k = pl_connect(port);
	CHECK(pl_mode(k) == pl_expect());
	static unsigned char buf[1 << 20];
	pl_fill(buf, sizeof(buf), 0);
	pl_write_all(k, buf, sizeof(buf));
	CHECK(shutdown(k, SHUT_WR) == 0);
	uint64_t h;
	pl_read_all(k, &h, sizeof(h));
	CHECK(h == pl_fnv(PL_FNV0, buf, sizeof(buf)));
	CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st));
	CHECK(WEXITSTATUS(st) == 0);
	close(k);

	/* the parent's listener still gives SMC-R */
	int c2, s2;
	pl_pair(lfd, port, &c2, &s2);
	CHECK(pl_mode(s2) == pl_expect() && pl_mode(c2) == pl_expect());
	exchange(c2, s2, 1 << 18);
	close(c2);
	close(s2);
	exchange(c, s, 1 << 18);
	close(c);
	close(s);
	close(lfd);
	printf("pl_fork: ok\n");
	return 0;
}
