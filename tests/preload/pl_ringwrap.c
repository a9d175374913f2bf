/* pl_ringwrap: bytes keep their order across the ring's wrap, and readiness never says
 * more than a read finds, under the interposer (docs/INTERPOSER.md "Data calls").
 *
 * 128 KiB writes into a peer ring of 64 KiB (every write wraps the ring, most of them
 * several times), 8 MiB per case (2 MiB with SMCR_TEST_QUICK), the receiver reading
 * 128 KiB at a time and checking every
 * byte against the pattern of its stream offset (a block out of order shows at its first
 * byte, not only as a different digest):
 *   - blocking write(): each returns the whole 128 KiB (a blocking TCP send returns when
 *     all was queued), blocking read();
 *   - non-blocking write() with poll(POLLOUT), resending the rest after a short count
 *     (what iperf3's sender does, with the rest handled right), non-blocking read() after
 *     poll(POLLIN): a read after POLLIN never gets EAGAIN and never 0 before the end (the
 *     single-reader rule TCP keeps: ncat's listener closes the connection on either);
 *   - sendfile() from a file, blocking, with an offset pointer (the file position stays);
 *   - sendfile() from a file, non-blocking, without one (the file position advances by what
 *     was sent, a short count resent from there).
 * Both ends run in this program (a client and a server thread), each case on a connection
 * of its own, both checked to run SMC-R. */
#include "pl_util.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/sendfile.h>

/* Bytes per case: 8 MiB, 2 MiB with SMCR_TEST_QUICK (the sanitizer stages: ~10 s of CPU
 * for the four cases under ASan, over a minute on a loaded two-core host; 2 MiB still
 * wraps the ring 32 times per case). */
static size_t TOTAL = 8u << 20;
#define BLOCK (128u << 10)

enum mode { M_BLOCKING, M_NONBLOCKING, M_SENDFILE_OFF, M_SENDFILE_POS };
static const char *const mode_name[] = { "blocking write", "non-blocking write",
					 "blocking sendfile with offset",
					 "non-blocking sendfile from the file position" };

static int lfd;
static uint16_t port;
static int file_fd = -1;

struct rx {
	pthread_t t;
	int fd;
	bool nonblock;
	size_t got;
	unsigned again_after_pollin;
};

/* b holds n bytes from stream offset off; want is scratch room for n */
static void check_block(const unsigned char *b, unsigned char *want, size_t n, uint64_t off)
{
	pl_fill(want, n, off);
	if (memcmp(b, want, n) != 0) {
		size_t i = 0;
		while (b[i] == want[i])
			i++;
		fprintf(stderr, "byte %llu of the stream is not the pattern's\n",
			(unsigned long long)(off + i));
		CHECK(0);
	}
}

static void *rx_main(void *arg)
{
	struct rx *r = arg;
	unsigned char *buf = malloc(BLOCK), *want = malloc(BLOCK);
	CHECK(buf != NULL && want != NULL);
	for (;;) {
		if (r->nonblock) {
			struct pollfd p = { .fd = r->fd, .events = POLLIN };
			CHECK(poll(&p, 1, 20000) == 1);
		}
		ssize_t n = read(r->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && r->nonblock && errno == EAGAIN) {
			r->again_after_pollin++;
			continue;
		}
		CHECK(n >= 0);
		if (n == 0)
			break;
		check_block(buf, want, (size_t)n, r->got);
		r->got += (size_t)n;
	}
	free(buf);
	free(want);
	return NULL;
}

static void wait_out(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	CHECK(poll(&p, 1, 20000) == 1 && (p.revents & POLLOUT));
}

/* Sends TOTAL bytes of the pattern on fd the way mode says; returns the short counts. */
static unsigned send_all(int fd, enum mode m)
{
	static unsigned char buf[BLOCK];
	unsigned shorts = 0;
	if (m == M_SENDFILE_POS || m == M_SENDFILE_OFF)
		CHECK(lseek(file_fd, 0, SEEK_SET) == 0);
	off_t off = 0;
	size_t sent = 0;
	while (sent < TOTAL) {
		size_t want = TOTAL - sent < BLOCK ? TOTAL - sent : BLOCK;
		ssize_t w;
		switch (m) {
		case M_BLOCKING:
		case M_NONBLOCKING:
			pl_fill(buf, want, sent);
			w = write(fd, buf, want);
			break;
		case M_SENDFILE_OFF:
			w = sendfile(fd, file_fd, &off, want);
			if (w >= 0)
				CHECK((size_t)off == sent + (size_t)w);
			break;
		case M_SENDFILE_POS:
		default:
			w = sendfile(fd, file_fd, NULL, want);
			if (w >= 0)
				CHECK(lseek(file_fd, 0, SEEK_CUR) == (off_t)(sent + (size_t)w));
			break;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN && (m == M_NONBLOCKING || m == M_SENDFILE_POS)) {
			wait_out(fd);
			continue;
		}
		CHECK(w > 0);
		if ((size_t)w < want) {
			/* a blocking socket's send returns when everything was queued */
			CHECK(m == M_NONBLOCKING || m == M_SENDFILE_POS);
			shorts++;
		}
		/* the non-blocking writer sends what is left of its block from its place */
		sent += (size_t)w;
	}
	if (m == M_SENDFILE_OFF)
		CHECK(lseek(file_fd, 0, SEEK_CUR) == 0); /* sendfile with an offset: untouched */
	return shorts;
}

static void one_case(enum mode m)
{
	int cl, sv;
	pl_pair(lfd, port, &cl, &sv);
	CHECK(pl_mode(cl) == pl_expect() && pl_mode(sv) == pl_expect());
	struct smcr_info in;
	socklen_t l = sizeof(in);
	CHECK(getsockopt(cl, SOL_SMCR, SMCR_INFO, &in, &l) == 0);
	const char *rb = getenv("SMCR_RCVBUF"); /* the rings the test asked for (CMakeLists) */
	if (rb && pl_expect() == SMCR_MODE_SMCR)
		CHECK(in.peer_rmbe_size == (uint32_t)atoi(rb) && in.peer_rmbe_size < BLOCK);
	bool nb = m == M_NONBLOCKING || m == M_SENDFILE_POS;
	struct rx r = { .fd = sv, .nonblock = nb };
	if (nb) {
		CHECK(fcntl(cl, F_SETFL, fcntl(cl, F_GETFL) | O_NONBLOCK) == 0);
		CHECK(fcntl(sv, F_SETFL, fcntl(sv, F_GETFL) | O_NONBLOCK) == 0);
	}
	CHECK(pthread_create(&r.t, NULL, rx_main, &r) == 0);
	unsigned shorts = send_all(cl, m);
	CHECK(shutdown(cl, SHUT_WR) == 0);
	CHECK(pthread_join(r.t, NULL) == 0);
	printf("%s: %u bytes in order (peer ring %u, send ring %u), %u short writes, "
	       "%u EAGAIN after POLLIN\n", mode_name[m], (unsigned)r.got, in.peer_rmbe_size,
	       in.sndbuf_size, shorts, r.again_after_pollin);
	CHECK(r.got == TOTAL);
	CHECK(r.again_after_pollin == 0);
	CHECK(close(cl) == 0);
	CHECK(close(sv) == 0);
}

int main(void)
{
	pl_need_preload();
	if (getenv("SMCR_TEST_QUICK"))
		TOTAL = 2u << 20;
	char path[] = "/tmp/pl_ringwrap.XXXXXX";
	file_fd = mkstemp(path);
	CHECK(file_fd >= 0);
	CHECK(unlink(path) == 0);
	static unsigned char buf[BLOCK];
	for (size_t off = 0; off < TOTAL; off += BLOCK) {
		pl_fill(buf, BLOCK, off);
		CHECK(write(file_fd, buf, BLOCK) == (ssize_t)BLOCK);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	lfd = pl_listen(&port);
	for (int m = M_BLOCKING; m <= M_SENDFILE_POS; m++)
		one_case((enum mode)m);
	close(lfd);
	close(file_fd);
	printf("pl_ringwrap: ok\n");
	return 0;
}
