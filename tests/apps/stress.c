/* stress.c: the many-connection program of tests/apps/test_stress.sh, run under smcr-run like
 * any other program (it knows nothing of smcr).
 *
 *   smcr-apps-stress server PORT THREADS
 *       an echo server on 127.0.0.1:PORT: one thread accepts (blocking), THREADS threads each
 *       own an epoll set (edge-triggered) and echo what their connections send, closing a
 *       connection after its peer's EOF once everything is echoed. Runs until SIGTERM/SIGINT,
 *       then exits normally (so the SMCR_STATS line is written).
 *   smcr-apps-stress client PORT THREADS CONNS MAXBYTES
 *       CONNS connections spread over THREADS threads, all open at once; each sends a random
 *       number of bytes (1..MAXBYTES) in random-sized writes from its epoll (edge-triggered)
 *       loop, reads the echo, and compares the SHA-256 of what it sent with that of what came
 *       back. Exit 0 only if every stream matched.
 *   smcr-apps-stress short PORT COUNT
 *       COUNT connections one after another: connect, 64 random bytes, the same 64 back, close.
 * Both clients count their open fds after one first connection and again at the end (after
 * the closes settled, up to 10 s): `short` fails if there are more at the end; `client` shows
 * what they are.
 * Prints one summary line. No smcr header: what it checks is the program's view of TCP.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 65536

static int port;
static volatile sig_atomic_t stopping;
static int stop_pipe[2]; /* the signal handler writes here to wake the accepting thread */

static uint64_t rnd(uint64_t *s) /* xorshift64*: cheap, per thread, reproducible */
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

static void fill(uint64_t *s, unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(rnd(s) >> 56);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* The fd count the process returns to: a close whose SMC-R close protocol is still running
 * holds its kernel socket a moment longer, so wait (up to 10 s) for the count to come back. */
static int fds_settle(int want)
{
	int n = count_fds();
	for (int i = 0; i < 100 && n > want; i++) {
		usleep(100000);
		n = count_fds();
	}
	return n;
}

/* On a mismatch: what the open fds are, by kind (socket, anon_inode:[eventfd], /dev/shm/...). */
static void fds_show(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char kinds[16][64];
	int counts[16] = {0}, nk = 0;
	while (d && (e = readdir(d))) {
		char p[300], t[256];
		snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(p, t, sizeof t - 1);
		if (n <= 0)
			continue;
		t[n] = 0;
		char *c = strchr(t, ':');
		if (c && !strncmp(t, "socket", 6))
			*c = 0; /* socket:[inode] -> socket */
		int k;
		for (k = 0; k < nk && strcmp(kinds[k], t); k++)
			;
		if (k == nk && nk < 16)
			snprintf(kinds[nk++], sizeof kinds[0], "%.63s", t);
		if (k < 16)
			counts[k]++;
	}
	if (d)
		closedir(d);
	for (int k = 0; k < nk; k++)
		fprintf(stderr, "  open fds: %d x %s\n", counts[k], kinds[k]);
}

static struct sockaddr_in addr(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static void nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		perror("fcntl");
		exit(2);
	}
}

/* ---- server ---- */

struct sconn { /* one echoed connection; only its worker thread touches it */
	int fd;
	int eof;
	size_t head, tail; /* buf[head..tail) received and not yet echoed */
	unsigned char buf[BUF];
};

struct worker {
	pthread_t t;
	int ep;
};

static atomic_long served, echoed;

/* Echo as far as the socket lets us; edge-triggered, so run to EAGAIN. 1: closed. */
static int sconn_step(struct sconn *c)
{
	for (;;) {
		while (c->head < c->tail) {
			ssize_t w = send(c->fd, c->buf + c->head, c->tail - c->head, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && errno == EAGAIN)
				return 0; /* EPOLLOUT will come */
			if (w < 0)
				goto gone;
			c->head += (size_t)w;
			atomic_fetch_add(&echoed, w);
		}
		c->head = c->tail = 0;
		if (c->eof)
			goto done;
		ssize_t r = recv(c->fd, c->buf, BUF, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		if (r < 0)
			goto gone;
		if (r == 0)
			c->eof = 1;
		c->tail = (size_t)r;
	}
done:
	atomic_fetch_add(&served, 1);
gone:
	close(c->fd);
	free(c);
	return 1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event ev[64];
	while (!stopping) {
		int n = epoll_wait(w->ep, ev, 64, 200);
		for (int i = 0; i < n; i++)
			sconn_step(ev[i].data.ptr);
	}
	return NULL;
}

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
	ssize_t r = write(stop_pipe[1], "x", 1);
	(void)r;
}

static int server(int nthreads)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = addr();
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 1024) < 0) {
		perror("bind/listen");
		return 2;
	}
	if (pipe(stop_pipe) < 0)
		return 2;
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	struct worker *ws = calloc((size_t)nthreads, sizeof *ws);
	for (int i = 0; i < nthreads; i++) {
		ws[i].ep = epoll_create1(EPOLL_CLOEXEC);
		pthread_create(&ws[i].t, NULL, worker_main, &ws[i]);
	}
	printf("listening %d\n", port);
	fflush(stdout);
	long next = 0;
	while (!stopping) {
		fd_set rs; /* a listener below 1024 with a select() wait: the classic accept loop */
		FD_ZERO(&rs);
		FD_SET(lfd, &rs);
		FD_SET(stop_pipe[0], &rs);
		int mx = lfd > stop_pipe[0] ? lfd : stop_pipe[0];
		if (select(mx + 1, &rs, NULL, NULL, NULL) < 0) {
			if (errno == EINTR)
				continue;
			perror("select");
			break;
		}
		if (!FD_ISSET(lfd, &rs))
			continue;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
				perror("accept4");
			continue;
		}
		struct sconn *c = calloc(1, sizeof *c);
		c->fd = fd;
		struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
		if (epoll_ctl(ws[next++ % nthreads].ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			perror("epoll_ctl");
			close(fd);
			free(c);
		}
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_join(ws[i].t, NULL);
		close(ws[i].ep);
	}
	printf("server: %ld connections served, %ld bytes echoed\n", (long)served, (long)echoed);
	close(lfd);
	free(ws);
	return 0;
}

/* ---- client ---- */

struct cconn { /* one stream; only its client thread touches it */
	int fd;
	size_t total, sent, got;
	uint64_t seed;
	EVP_MD_CTX *tx, *rx;
	unsigned char out[BUF];
	size_t out_len, out_off;
	int done;
};

static int nconns, nthreads_c;
static size_t maxbytes;
static atomic_long ok_streams, bad_streams, bytes_total;

static int cconn_finish(struct cconn *c)
{
	unsigned char a[32], b[32];
	unsigned int la = 0, lb = 0;
	EVP_DigestFinal_ex(c->tx, a, &la);
	EVP_DigestFinal_ex(c->rx, b, &lb);
	int good = c->got == c->total && la == lb && memcmp(a, b, la) == 0;
	if (!good)
		fprintf(stderr, "stream fd %d: sent %zu, got %zu back, sha256 %s\n", c->fd, c->total,
		        c->got, memcmp(a, b, la) ? "differs" : "same");
	atomic_fetch_add(good ? &ok_streams : &bad_streams, 1);
	atomic_fetch_add(&bytes_total, (long)c->got);
	close(c->fd);
	EVP_MD_CTX_free(c->tx);
	EVP_MD_CTX_free(c->rx);
	c->done = 1;
	return 1;
}

static int cconn_step(struct cconn *c)
{
	unsigned char in[BUF];
	int progress = 1;
	while (progress && !c->done) {
		progress = 0;
		while (c->sent < c->total) {
			if (c->out_off == c->out_len) { /* the next random-sized write */
				size_t n = 1 + (size_t)(rnd(&c->seed) % BUF);
				if (n > c->total - c->sent)
					n = c->total - c->sent;
				fill(&c->seed, c->out, n);
				EVP_DigestUpdate(c->tx, c->out, n);
				c->out_len = n;
				c->out_off = 0;
			}
			ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && errno == EAGAIN)
				break;
			if (w < 0) {
				perror("send");
				return cconn_finish(c);
			}
			c->out_off += (size_t)w;
			c->sent += (size_t)w;
			progress = 1;
			if (c->sent == c->total)
				shutdown(c->fd, SHUT_WR);
		}
		for (;;) {
			ssize_t r = recv(c->fd, in, sizeof in, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno == EAGAIN)
				break;
			if (r <= 0) {
				if (r < 0)
					perror("recv");
				return cconn_finish(c);
			}
			EVP_DigestUpdate(c->rx, in, (size_t)r);
			c->got += (size_t)r;
			progress = 1;
		}
	}
	return c->done;
}

static void *client_main(void *arg)
{
	long id = (long)arg;
	int mine = nconns / nthreads_c + (id < nconns % nthreads_c);
	uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1) ^ (uint64_t)getpid();
	struct cconn *cs = calloc((size_t)mine, sizeof *cs);
	int ep = epoll_create1(EPOLL_CLOEXEC), left = mine;
	for (int i = 0; i < mine; i++) {
		struct cconn *c = &cs[i];
		struct sockaddr_in a = addr();
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) {
			perror("connect");
			atomic_fetch_add(&bad_streams, 1);
			close(c->fd);
			c->done = 1;
			left--;
			continue;
		}
		nonblock(c->fd);
		c->seed = rnd(&seed) | 1;
		c->total = 1 + (size_t)(rnd(&seed) % maxbytes);
		c->tx = EVP_MD_CTX_new();
		c->rx = EVP_MD_CTX_new();
		EVP_DigestInit_ex(c->tx, EVP_sha256(), NULL);
		EVP_DigestInit_ex(c->rx, EVP_sha256(), NULL);
		struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
		epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	}
	struct epoll_event ev[64];
	while (left > 0) {
		int n = epoll_wait(ep, ev, 64, 30000);
		if (n == 0) {
			fprintf(stderr, "client thread %ld: 30 s without an event, %d streams open\n", id, left);
			for (int i = 0; i < mine; i++)
				if (!cs[i].done) {
					cconn_finish(&cs[i]);
					left--;
				}
			break;
		}
		for (int i = 0; i < n; i++) {
			struct cconn *c = ev[i].data.ptr;
			if (!c->done && cconn_step(c))
				left--;
		}
	}
	close(ep);
	free(cs);
	return NULL;
}

static long shorts_run(long count, uint64_t *seed);

static int client(void)
{
	/* one connection first: the library's own fds (engine, device) opened at the first
	 * connection are not growth */
	uint64_t ws = (uint64_t)getpid() | 1;
	shorts_run(1, &ws);
	int fds0 = count_fds();
	pthread_t *ts = calloc((size_t)nthreads_c, sizeof *ts);
	for (long i = 0; i < nthreads_c; i++)
		pthread_create(&ts[i], NULL, client_main, (void *)i);
	for (int i = 0; i < nthreads_c; i++)
		pthread_join(ts[i], NULL);
	free(ts);
	int fds1 = fds_settle(fds0);
	printf("client: %d threads, %ld of %d streams matched (sha256 both ways), %ld bad, %ld bytes echoed, fds %d -> %d\n",
	       nthreads_c, (long)ok_streams, nconns, (long)bad_streams, (long)bytes_total, fds0, fds1);
	/* Not a failure here: with 1000 connections open at once the library may keep the
	 * buffers of closed ones for its next connections (shown, see docs/INTERPOSER.md);
	 * growth is what the short connections check. */
	if (fds1 > fds0)
		fds_show();
	return ok_streams == nconns && bad_streams == 0 ? 0 : 1;
}

static long shorts_run(long count, uint64_t *seed)
{
	long ok = 0;
	for (long i = 0; i < count; i++) {
		unsigned char out[64], in[64];
		struct sockaddr_in a = addr();
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
			perror("connect");
			close(fd);
			continue;
		}
		fill(seed, out, sizeof out);
		size_t got = 0;
		if (send(fd, out, sizeof out, MSG_NOSIGNAL) == (ssize_t)sizeof out) {
			shutdown(fd, SHUT_WR);
			ssize_t r;
			while (got < sizeof in && (r = recv(fd, in + got, sizeof in - got, 0)) > 0)
				got += (size_t)r;
		}
		if (got == sizeof in && memcmp(in, out, sizeof in) == 0)
			ok++;
		else
			fprintf(stderr, "short connection %ld: %zu bytes back\n", i, got);
		close(fd);
	}
	return ok;
}

static int shorts(long count)
{
	uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL | 1;
	shorts_run(1, &seed); /* as in client(): the library's first-connection fds */
	int fds0 = count_fds();
	long ok = shorts_run(count, &seed);
	int fds1 = fds_settle(fds0);
	printf("short: %ld of %ld connections echoed their 64 bytes, fds %d -> %d\n", ok, count, fds0, fds1);
	if (fds1 > fds0)
		fds_show();
	return ok == count && fds1 <= fds0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "server")) {
		port = atoi(argv[2]);
		return server(atoi(argv[3]) > 0 ? atoi(argv[3]) : 1);
	}
	if (argc >= 6 && !strcmp(argv[1], "client")) {
		port = atoi(argv[2]);
		nthreads_c = atoi(argv[3]);
		nconns = atoi(argv[4]);
		maxbytes = (size_t)strtoull(argv[5], NULL, 10);
		if (nthreads_c < 1 || nconns < 1 || maxbytes < 1)
			return 2;
		return client();
	}
	if (argc >= 4 && !strcmp(argv[1], "short")) {
		port = atoi(argv[2]);
		return shorts(atol(argv[3]));
	}
	fprintf(stderr, "usage: %s server PORT THREADS | client PORT THREADS CONNS MAXBYTES | short PORT COUNT\n", argv[0]);
	return 2;
}
