/* pl_hidden: the library's own fds are invisible to the program (docs/INTERPOSER.md "The
 * library's own fds").
 *
 * The program re-executes itself with the soft RLIMIT_NOFILE at 1024 (argument "high":
 * the hard limit stays, so the library has room above 1024) or with both limits at 1024
 * ("low": no room above, the library's fds go at 512 and up). Then, with SMC-R connections
 * open:
 *   - getrlimit/prlimit/sysconf show the program its own limit (1024);
 *   - every open number below the library's lowest is one the program opened (read from
 *     /proc/self/fd), and with "high" no number below 1024 is the library's;
 *   - each number of the library's is a closed number to the program: EBADF from
 *     epoll_ctl, fcntl, close, read, write, fstat, getsockopt, ioctl, dup, select; poll
 *     gives POLLNVAL; dup2 onto it: EBADF past the program's limit (as Linux), and inside
 *     its range ("low") EBADF too (the library's fd cannot be moved: documented);
 *     F_DUPFD from past the limit: EINVAL;
 *   - close_range(3, ~0U) and closefrom(3) by the program close none of them: the
 *     connections made after it still work (SMC-R, SHA-256 of 4 MiB both ways);
 *   - the connections open across the checks carry 4 MiB each way, SHA-256 equal.
 */
#include "pl_util.h"

#include <dirent.h>
#include <stdbool.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>

#define NCONN 6
#define XFER (4u << 20)

static bool mine[65536]; /* numbers this program opened */

static void own(int fd)
{
	CHECK(fd >= 0 && fd < 65536);
	mine[fd] = true;
}

static void disown(int fd)
{
	mine[fd] = false;
}

/* The open numbers of the process (without the directory's own). */
static int list_fds(int *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	CHECK(d);
	int n = 0, self = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		int fd = atoi(e->d_name);
		if (fd != self && n < max)
			out[n++] = fd;
	}
	closedir(d);
	return n;
}

static void sha(const void *p, size_t n, unsigned char out[32])
{
	unsigned len = 32;
	CHECK(EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) == 1);
}

struct xfer {
	int fd;
	const unsigned char *src;
	unsigned char *dst;
};

static void *writer(void *arg)
{
	struct xfer *x = arg;
	pl_write_all(x->fd, x->src, XFER);
	return NULL;
}

/* 4 MiB from a to b and from b to a at once; the bytes arrive whole (SHA-256). */
static void exchange(int a, int b)
{
	unsigned char *s1 = malloc(XFER), *s2 = malloc(XFER), *d1 = malloc(XFER),
		      *d2 = malloc(XFER);
	CHECK(s1 && s2 && d1 && d2);
	pl_fill(s1, XFER, (uint64_t)a * 7919);
	pl_fill(s2, XFER, (uint64_t)b * 104729 + 1);
	struct xfer x1 = { a, s1, NULL }, x2 = { b, s2, NULL };
	pthread_t t1, t2;
	CHECK(pthread_create(&t1, NULL, writer, &x1) == 0);
	CHECK(pthread_create(&t2, NULL, writer, &x2) == 0);
	pl_read_all(b, d1, XFER);
	pl_read_all(a, d2, XFER);
	CHECK(pthread_join(t1, NULL) == 0 && pthread_join(t2, NULL) == 0);
	unsigned char h1[32], h2[32];
	sha(s1, XFER, h1);
	sha(d1, XFER, h2);
	CHECK(memcmp(h1, h2, 32) == 0);
	sha(s2, XFER, h1);
	sha(d2, XFER, h2);
	CHECK(memcmp(h1, h2, 32) == 0);
	free(s1), free(s2), free(d1), free(d2);
}

/* Every call on number h behaves as on a closed number (EBADF: what the kernel gives for
 * the closed number `gone`, checked in run()). */
static void check_closed(int h, int ep, int probe, bool in_range)
{
	char b[8];
	struct stat st;
	int v;
	socklen_t l = sizeof(v);
	struct epoll_event ev = { .events = EPOLLIN };
	errno = 0;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, h, &ev) == -1 && errno == EBADF);
	errno = 0;
	CHECK(fcntl(h, F_GETFD) == -1 && errno == EBADF);
	errno = 0;
	CHECK(fcntl(h, F_GETFL) == -1 && errno == EBADF);
	errno = 0;
	CHECK(read(h, b, 1) == -1 && errno == EBADF);
	errno = 0;
	CHECK(write(h, b, 0) == -1 && errno == EBADF);
	errno = 0;
	CHECK(fstat(h, &st) == -1 && errno == EBADF);
	errno = 0;
	CHECK(getsockopt(h, SOL_SOCKET, SO_TYPE, &v, &l) == -1 && errno == EBADF);
	errno = 0;
	CHECK(ioctl(h, FIONREAD, &v) == -1 && errno == EBADF);
	errno = 0;
	CHECK(dup(h) == -1 && errno == EBADF);
	errno = 0;
	CHECK(recv(h, b, 1, MSG_DONTWAIT) == -1 && errno == EBADF);
	errno = 0;
	CHECK(shutdown(h, SHUT_RDWR) == -1 && errno == EBADF);
	errno = 0;
	CHECK(epoll_wait(h, &ev, 1, 0) == -1 && errno == EBADF);
	struct pollfd p[2] = { { .fd = probe, .events = POLLOUT }, { .fd = h, .events = POLLIN } };
	CHECK(poll(p, 2, 5000) == 2);
	CHECK(p[1].revents == POLLNVAL && p[1].fd == h && (p[0].revents & POLLOUT));
	if (h < FD_SETSIZE) {
		fd_set r;
		FD_ZERO(&r);
		FD_SET(h, &r);
		struct timeval tv = { 0, 0 };
		errno = 0;
		CHECK(select(h + 1, &r, NULL, NULL, &tv) == -1 && errno == EBADF);
	}
	/* dup2 onto it: past the program's limit EBADF as Linux; inside (no room above the
	 * limit) EBADF too: the library's fd is not moved (docs/INTERPOSER.md) */
	errno = 0;
	CHECK(dup2(probe, h) == -1 && errno == EBADF);
	(void)in_range;
	/* close last: a close that reached the kernel would end the library's fd */
	errno = 0;
	CHECK(close(h) == -1 && errno == EBADF);
}

static int run(bool low)
{
	struct rlimit r;
	CHECK(getrlimit(RLIMIT_NOFILE, &r) == 0);
	CHECK(r.rlim_cur == 1024);
	CHECK(sysconf(_SC_OPEN_MAX) == 1024 && getdtablesize() == 1024);
	struct rlimit pr;
	CHECK(prlimit(0, RLIMIT_NOFILE, NULL, &pr) == 0 && pr.rlim_cur == 1024 &&
	      pr.rlim_max == r.rlim_max);
	if (low)
		CHECK(r.rlim_max == 1024);

	int fds[4096];
	int n = list_fds(fds, 4096);
	for (int i = 0; i < n; i++)
		own(fds[i]); /* what the process had before any socket: stdio, ctest's */

	int ep = epoll_create1(EPOLL_CLOEXEC);
	own(ep);
	uint16_t port;
	int lfd = pl_listen(&port);
	own(lfd);
	int cl[NCONN], sv[NCONN];
	for (int i = 0; i < NCONN; i++) {
		pl_pair(lfd, port, &cl[i], &sv[i]);
		own(cl[i]);
		own(sv[i]);
		CHECK(pl_mode(cl[i]) == pl_expect() && pl_mode(sv[i]) == pl_expect());
	}
	/* a closed number at TCP's: the oracle for the errno of each call */
	int gone = dup(lfd);
	CHECK(gone >= 0 && close(gone) == 0);
	errno = 0;
	CHECK(fcntl(gone, F_GETFD) == -1 && errno == EBADF);

	n = list_fds(fds, 4096);
	int hidden = 0, lo = INT32_MAX;
	for (int i = 0; i < n; i++) {
		if (mine[fds[i]])
			continue;
		hidden++;
		if (fds[i] < lo)
			lo = fds[i];
		if (!low)
			CHECK(fds[i] >= 1024); /* nothing of the library's below FD_SETSIZE */
		else
			CHECK(fds[i] >= 512);
	}
	/* SMC-R: each connection has at least its signalling end and its TCP socket there */
	if (pl_expect() == SMCR_MODE_SMCR)
		CHECK(hidden >= 2 * NCONN);
	printf("pl_hidden %s: %d numbers of the library's, lowest %d\n", low ? "low" : "high",
	       hidden, lo);

	for (int i = 0; i < n; i++)
		if (!mine[fds[i]])
			check_closed(fds[i], ep, cl[0], low);
	if (!low) {
		/* F_DUPFD from past the limit: EINVAL, as Linux with 1024 */
		errno = 0;
		CHECK(fcntl(cl[0], F_DUPFD, 1024) == -1 && errno == EINVAL);
		errno = 0;
		CHECK(dup2(cl[0], 1024) == -1 && errno == EBADF);
	}
	/* the connections still work */
	for (int i = 0; i < NCONN; i++)
		exchange(cl[i], sv[i]);

	/* dup2 of a connection onto a number of the program's: the connection keeps working
	 * through the new number */
	int t = dup2(cl[0], 300);
	CHECK(t >= 0);
	own(t);
	close(cl[0]);
	disown(cl[0]);
	cl[0] = t;
	exchange(cl[0], sv[0]);

	/* close_range and closefrom by the program: every number of its own goes, none of the
	 * library's (its engine's fds among them: a new connection still works) */
	int before = 0;
	n = list_fds(fds, 4096);
	for (int i = 0; i < n; i++)
		before += !mine[fds[i]];
	CHECK(close_range(lfd, lfd, 0) == 0);
	disown(lfd);
	CHECK(close_range((unsigned)ep, ~0u, 0) == 0);
	for (int i = 3; i < 65536; i++)
		if (i >= ep)
			mine[i] = false;
	n = list_fds(fds, 4096);
	for (int i = 0; i < n; i++)
		CHECK(fds[i] < ep || !mine[fds[i]]);
	int after = 0;
	for (int i = 0; i < n; i++)
		after += fds[i] >= ep;
	printf("pl_hidden: close_range(%d, ~0): %d numbers of the library's before, %d after\n",
	       ep, before, after);
	CHECK(after > 0 || pl_expect() != SMCR_MODE_SMCR);
	lfd = pl_listen(&port);
	int c, s;
	pl_pair(lfd, port, &c, &s);
	CHECK(pl_mode(c) == pl_expect());
	exchange(c, s);
	closefrom(lfd);
	lfd = pl_listen(&port);
	pl_pair(lfd, port, &c, &s);
	CHECK(pl_mode(c) == pl_expect());
	exchange(c, s);
	close(c);
	close(s);
	close(lfd);
	printf("pl_hidden %s: ok\n", low ? "low" : "high");
	return 0;
}

int main(int argc, char **argv)
{
	pl_need_preload();
	if (argc > 2 && !strcmp(argv[2], "again"))
		return run(!strcmp(argv[1], "low"));
	bool low = argc > 1 && !strcmp(argv[1], "low");
	struct rlimit r;
	CHECK(getrlimit(RLIMIT_NOFILE, &r) == 0);
	if (!low && r.rlim_max < 4096) {
		printf("pl_hidden: hard RLIMIT_NOFILE %lu: no room above 1024 here\n",
		       (unsigned long)r.rlim_max);
		return 77;
	}
	if (r.rlim_max < 1024)
		return 77;
	r.rlim_cur = 1024;
	if (low)
		r.rlim_max = 1024;
	CHECK(setrlimit(RLIMIT_NOFILE, &r) == 0);
	char *args[] = { argv[0], low ? "low" : "high", "again", NULL };
	execv("/proc/self/exe", args);
	CHECK(!"exec");
	return 1;
}
