/* pl_exec_smc: an SMC-R connection that crosses an exec ends with a clear error at both
 * ends, never a hang or wrong bytes (docs/INTERPOSER.md "fork, exec").
 *   - owned: a child makes its own SMC-R connection to the parent's server and execs
 *     "pl_exec_smc probe FD": in the new image the number is a dead socket (read: -1
 *     ENOTCONN, no byte of the connection's signalling); the parent's end reads ECONNRESET
 *     (the child's image ended it abortively before the exec);
 *   - inherited: the parent's own SMC-R connection, inherited by a fork child that execs
 *     the probe: the probe gets ENOTCONN, and the parent's connection still carries bytes
 *     both ways.
 *   pl_exec_smc probe FD: exit 0 if read(FD) fails with ENOTCONN, else 1. */
#include "pl_util.h"

#include <sys/wait.h>

static int probe(int fd)
{
	char b[16];
	errno = 0;
	ssize_t r = read(fd, b, sizeof(b));
	if (r < 0 && errno == ENOTCONN)
		return 0;
	fprintf(stderr, "probe: read gave %zd (errno %d)\n", r, errno);
	return 1;
}

static void exec_probe(const char *self, int fd)
{
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", fd);
	char *av[] = { (char *)self, "probe", fdarg, NULL };
	execv("/proc/self/exe", av);
	_exit(127);
}

static int wait_ok(pid_t p)
{
	int st;
	CHECK(waitpid(p, &st, 0) == p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "probe"))
		return probe(atoi(argv[2]));
	pl_need_preload();
	uint16_t port;
	int lfd = pl_listen(&port);

	/* owned by the exec'ing image */
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		close(lfd);
		int c = pl_connect(port);
		if (pl_mode(c) != pl_expect())
			_exit(3);
		char k;
		if (write(c, "hi", 2) != 2 || read(c, &k, 1) != 1)
			_exit(4);
		exec_probe(argv[0], c);
	}
	int s = pl_accept_used(lfd);
	char b[2];
	pl_read_all(s, b, 2);
	CHECK(!memcmp(b, "hi", 2) && pl_mode(s) == pl_expect());
	pl_write_all(s, "k", 1);
	int rc = wait_ok(p);
	CHECK(rc == 0);
	errno = 0;
	ssize_t r = read(s, b, sizeof(b));
	if (pl_expect() == SMCR_MODE_SMCR)
		CHECK(r == -1 && errno == ECONNRESET);
	close(s);

	/* inherited from this process */
	int c, s2;
	pl_pair(lfd, port, &c, &s2);
	CHECK(pl_mode(c) == pl_expect());
	p = fork();
	CHECK(p >= 0);
	if (p == 0)
		exec_probe(argv[0], c);
	CHECK(wait_ok(p) == (pl_expect() == SMCR_MODE_SMCR ? 0 : 1));
	pl_write_all(c, "ab", 2);
	pl_read_all(s2, b, 2);
	CHECK(!memcmp(b, "ab", 2));
	pl_write_all(s2, "cd", 2);
	pl_read_all(c, b, 2);
	CHECK(!memcmp(b, "cd", 2));
	close(c);
	close(s2);
	close(lfd);
	printf("pl_exec_smc: ok\n");
	return 0;
}
