/* vm_xfer.c: the interoperability data check between smcr and the Linux kernel's SMC-R
 * (tests/vm, docs/parts/verbs.md "The guests", docs/PROTOCOL.md "Interoperability with
 * Linux"). One source, two programs:
 *
 *   vm_xfer   (smcr's API: smcr_socket, ...; discovery through smcr-bpf or rules)
 *   vm_kxfer  (-DVM_KERNEL: the kernel's SMC, socket(AF_SMC, SOCK_STREAM, SMCPROTO_SMC),
 *              and the kernel's netlink for UEIDs, smc_diag and counters: vm_ksmc.c)
 *
 *   vm_[k]xfer server PORT N          accepts N connections, one after another
 *   vm_[k]xfer client HOST PORT CASE... one connection per CASE, in order
 *
 * CASE is NAME:UP:DOWN (bytes client to server, server to client). The client's first 16
 * bytes tell the server the case and sizes, so the server needs no list. Data is a seeded
 * pseudo-random stream per connection and direction; each receiver hashes what it got
 * (SHA-256) and compares it with the hash of the stream it expected, so both directions
 * are checked end to end. The cases differ in how the connection ends:
 *   half    client writes, shutdown(SHUT_WR); server reads to EOF, writes, closes; the
 *           client reads to EOF (the half-closed connection still carries data)
 *   cfirst  client writes, reads exactly DOWN, closes first; the server then reads EOF
 *   sfirst  client writes, reads exactly DOWN; the server closes first; the client reads EOF
 *   abort   as cfirst, but the client closes with SO_LINGER {1, 0}; the server's read then
 *           ends: ECONNRESET (TCP, smcr) or EOF (Linux's SMC-R, which reads a peer's abort
 *           as an end of data and sends none for SO_LINGER 0: docs/PROTOCOL.md)
 *   urg     as half, and the client sends one byte of urgent data (MSG_OOB) before its
 *           stream; the server reads it with MSG_OOB first, then the stream without it
 *   idle    as half, but the client waits VM_XFER_IDLE_S seconds (default 8) after the
 *           header: the link is idle, so TEST LINK runs (the scenario makes the kernel's
 *           interval short and counts the messages in its capture)
 *   pp      ping-pong for figures: UP round trips of DOWN bytes (the server echoes each
 *           message; the client compares), then as half with no data
 * and one pseudo-case that makes no connection (nor counts as one):
 *   wait:MAX  the client waits until the file $VM_XFER_GO exists, at most MAX seconds
 *           (the scenario's hook: it creates the file when what it waits for happened)
 * The client prints each connection's time from connect() to the end (elapsed_us), for
 * figures (docs/PERFORMANCE.md). Before closing, each side prints one line per connection
 * with the transport really used (smcr: the SOL_SMCR query; kernel: smc_diag of the
 * socket), which the scenario checks. VM_XFER_LINGER_S=N: the client waits N seconds after
 * its last connection before it exits. Exit 0 when every connection's data and ending were
 * right, 1 when one was wrong, 2 on a setup error. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/iofull.h"

#ifdef VM_KERNEL
#include "vm_ksmc.h"
/* VM_XFER_TCP=1: a plain TCP socket instead (a kernel peer that sends no SMC option) */
#define X_socket() socket(getenv("VM_XFER_TCP") ? AF_INET : AF_SMC, SOCK_STREAM, 0)
#define X_bind bind
#define X_listen listen
#define X_accept accept
#define X_connect connect
#define X_read read
#define X_write write
#define X_send send
#define X_recv recv
#define X_shutdown shutdown
#define X_close close
#define X_setsockopt setsockopt
#define WHO "kernel"
#else
#include <smcr/smcr.h>
#define X_socket() smcr_socket(AF_INET, SOCK_STREAM, 0)
#define X_bind smcr_bind
#define X_listen smcr_listen
#define X_accept smcr_accept
#define X_connect smcr_connect
#define X_read smcr_read
#define X_write smcr_write
#define X_send smcr_send
#define X_recv smcr_recv
#define X_shutdown smcr_shutdown
#define X_close smcr_close
#define X_setsockopt smcr_setsockopt
#define WHO "smcr"
#endif

#define CHUNK 65536
#define MAGIC 0x564d5831u /* "VMX1" */

enum xcase { C_HALF = 1, C_CFIRST, C_SFIRST, C_ABORT, C_URG, C_IDLE, C_PP, C_LAST = C_PP };
static const char *const case_names[] = { "?",	   "half", "cfirst", "sfirst",
					  "abort", "urg",  "idle", "pp" };

struct gen {
	uint64_t x;
};

static void gen_init(struct gen *g, uint32_t conn, int dir, uint32_t len)
{
	g->x = 0x9E3779B97F4A7C15ull ^ ((uint64_t)conn << 40) ^ ((uint64_t)dir << 32) ^ len;
	if (!g->x)
		g->x = 1;
}

static void gen_fill(struct gen *g, unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		g->x ^= g->x << 13;
		g->x ^= g->x >> 7;
		g->x ^= g->x << 17;
		b[i] = (unsigned char)g->x;
	}
}

static void hex8(const unsigned char *d, char out[17])
{
	for (int i = 0; i < 8; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The SHA-256 of the stream (conn, dir, len) as the sender produces it. */
static void expected_sha(uint32_t conn, int dir, uint32_t len, unsigned char d[32])
{
	static unsigned char buf[CHUNK];
	struct gen g;
	gen_init(&g, conn, dir, len);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	for (uint32_t left = len; left;) {
		size_t n = left < CHUNK ? left : CHUNK;
		gen_fill(&g, buf, n);
		EVP_DigestUpdate(md, buf, n);
		left -= (uint32_t)n;
	}
	unsigned dl = 0;
	EVP_DigestFinal_ex(md, d, &dl);
	EVP_MD_CTX_free(md);
}

static int send_stream(int fd, uint32_t conn, int dir, uint32_t len)
{
	static unsigned char buf[CHUNK];
	struct gen g;
	gen_init(&g, conn, dir, len);
	/* odd sizes, so writes do not line up with the ring */
	const size_t step = CHUNK - 77;
	for (uint32_t left = len; left;) {
		size_t n = left < step ? left : step;
		gen_fill(&g, buf, n);
		if (io_write_full(X_write, fd, buf, n))
			return -1;
		left -= (uint32_t)n;
	}
	return 0;
}

/* Reads `want` bytes (to_eof: until EOF, which must come after exactly `want`), hashes them
 * and compares with the expected stream. Returns 0 when equal, 1 when not, -1 on error. */
static int recv_stream(int fd, uint32_t conn, int dir, uint32_t want, int to_eof,
		       unsigned long long *got_out)
{
	static unsigned char buf[CHUNK];
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	unsigned long long got = 0;
	int rc = 0;
	for (;;) {
		size_t ask = sizeof buf;
		if (!to_eof) {
			if (got == want)
				break;
			if (want - got < ask)
				ask = (size_t)(want - got);
		}
		ssize_t r = X_read(fd, buf, ask);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "read: %s after %llu bytes\n", strerror(errno), got);
			rc = -1;
			break;
		}
		if (r == 0) {
			if (!to_eof) {
				fprintf(stderr, "early EOF after %llu of %u bytes\n", got, want);
				rc = -1;
			}
			break;
		}
		EVP_DigestUpdate(md, buf, (size_t)r);
		got += (unsigned long long)r;
	}
	unsigned char d[32], e[32];
	unsigned dl = 0;
	EVP_DigestFinal_ex(md, d, &dl);
	EVP_MD_CTX_free(md);
	*got_out = got;
	if (rc)
		return rc;
	expected_sha(conn, dir, want, e);
	char hd[17], he[17];
	hex8(d, hd);
	hex8(e, he);
	int same = got == want && memcmp(d, e, 32) == 0;
	printf("  data dir=%s bytes=%llu/%u sha256=%s.. expected=%s.. %s\n",
	       dir ? "down" : "up", got, want, hd, he, same ? "equal" : "DIFFERS");
	return same ? 0 : 1;
}

/* One line: which transport this connection really runs. */
static void report(const char *side, uint32_t conn, int fd)
{
#ifdef VM_KERNEL
	char line[512];
	if (getenv("VM_XFER_TCP")) {
		printf("%s %s conn=%u mode=tcp (an AF_INET socket)\n", WHO, side, conn);
		return;
	}
	ksmc_diag_line(fd, line, sizeof line);
	printf("%s %s conn=%u %s\n", WHO, side, conn, line);
	fflush(stdout);
	ksmc_lgr();
#else
	struct smcr_info in;
	socklen_t len = sizeof in;
	memset(&in, 0, sizeof in);
	if (smcr_getsockopt(fd, SOL_SMCR, SMCR_INFO, &in, &len) != 0)
		perror("getsockopt SMCR_INFO");
	printf("%s %s conn=%u mode=%s ver=%u first_contact=%u lgr=%u lgr_conns=%u link=%u "
	       "local_reason=0x%08x(%s) peer_reason=0x%08x(%s)\n",
	       WHO, side, conn, smcr_mode_name(in.mode), in.smc_version, in.first_contact,
	       in.lgr_id, in.lgr_conns, in.link_id, in.local_reason,
	       smcr_reason_name(in.local_reason), in.peer_reason,
	       smcr_reason_name(in.peer_reason));
#endif
	fflush(stdout);
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The end of a connection that expects the peer's EOF (0) or its abort (ECONNRESET). */
static int expect_end(int fd, int want_reset)
{
	char c;
	ssize_t r;
	do
		r = X_read(fd, &c, 1);
	while (r < 0 && errno == EINTR);
	int e = errno;
	if (want_reset) {
		if ((r < 0 && e == ECONNRESET) || r == 0) {
			printf("  end: %s after the peer's abort\n", r ? "ECONNRESET" : "EOF");
			return 0;
		}
		printf("  end: expected ECONNRESET or EOF, got %zd (%s)\n", r,
		       r < 0 ? strerror(e) : "data");
		return 1;
	}
	if (r == 0) {
		printf("  end: EOF as expected\n");
		return 0;
	}
	printf("  end: expected EOF, got %zd (%s)\n", r, r < 0 ? strerror(e) : "data");
	return 1;
}

static int serve_one(int c, uint32_t conn)
{
	unsigned char h[16];
	size_t got = 0;
	while (got < sizeof h) {
		ssize_t r = X_read(c, h + got, sizeof h - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "server: no header (%s)\n", r < 0 ? strerror(errno) : "EOF");
			return 1;
		}
		got += (size_t)r;
	}
	if (get32(h) != MAGIC) {
		fprintf(stderr, "server: bad header\n");
		return 1;
	}
	uint32_t cs = get32(h + 4), up = get32(h + 8), down = get32(h + 12);
	if (cs < C_HALF || cs > C_LAST) {
		fprintf(stderr, "server: unknown case %u\n", cs);
		return 1;
	}
	printf("server conn=%u case=%s up=%u down=%u\n", conn, case_names[cs], up, down);
	int bad = 0;
	unsigned long long n = 0;
	int half = cs == C_HALF || cs == C_URG || cs == C_IDLE;
	if (cs == C_PP) {
		static unsigned char m[CHUNK];
		if (down > sizeof m) {
			X_close(c);
			return 1;
		}
		for (uint32_t i = 0; i < up && !bad; i++) {
			size_t g = 0;
			while (g < down) {
				ssize_t r = X_read(c, m + g, down - g);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0) {
					bad = 1;
					break;
				}
				g += (size_t)r;
			}
			if (!bad && io_write_full(X_write, c, m, down))
				bad = 1;
		}
		report("server", conn, c);
		if (!bad)
			bad |= expect_end(c, 0);
		X_close(c);
		printf("server conn=%u %s\n", conn, bad ? "FAILED" : "ok");
		return bad;
	}
	if (cs == C_URG) {
		/* as a TCP program reads it: the urgent byte first (it is there once the peer's
		 * cursor update with the urgent flags arrived; until then EINVAL or EAGAIN), then
		 * the stream, from which it was taken out */
		char oob = 0;
		ssize_t o = -1;
		for (int i = 0; i < 400 && o != 1; i++) {
			o = X_recv(c, &oob, 1, MSG_OOB);
			if (o != 1 && errno != EINVAL && errno != EAGAIN)
				break;
			if (o != 1) {
				struct timespec ts = { 0, 50000000 };
				nanosleep(&ts, NULL);
			}
		}
		if (o == 1 && oob == '!')
			printf("  urgent byte '!' received\n");
		else {
			printf("  urgent byte: got %zd (%s) 0x%02x\n", o, o < 0 ? strerror(errno) : "-",
			       (unsigned char)oob);
			bad = 1;
		}
	}
	int r = recv_stream(c, conn, 0, up, half, &n);
	if (r)
		bad = 1;
	report("server", conn, c);
	if (r >= 0 && send_stream(c, conn, 1, down)) {
		fprintf(stderr, "server: write: %s\n", strerror(errno));
		bad = 1;
	}
	if (!bad && (cs == C_CFIRST || cs == C_ABORT))
		bad |= expect_end(c, cs == C_ABORT);
	X_close(c);
	printf("server conn=%u %s\n", conn, bad ? "FAILED" : "ok");
	return bad;
}

static int server(int port, int nconn)
{
	int l = X_socket();
	int one = 1;
	X_setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (l < 0 || X_bind(l, (struct sockaddr *)&a, sizeof a) || X_listen(l, 8)) {
		perror("server: listen");
		return 2;
	}
	printf("server: %s listening on %d for %d connections\n", WHO, port, nconn);
	fflush(stdout);
	int bad = 0;
	for (int i = 0; i < nconn; i++) {
		int c = X_accept(l, NULL, NULL);
		if (c < 0) {
			perror("server: accept");
			return 2;
		}
		bad |= serve_one(c, (uint32_t)i);
		fflush(stdout);
	}
	X_close(l);
	return bad;
}

static int connect_retry(const struct sockaddr_in *a)
{
	for (int i = 0; i < 360; i++) {
		int fd = X_socket();
		if (fd < 0) {
			perror("socket");
			return -1;
		}
		if (X_connect(fd, (const struct sockaddr *)a, sizeof *a) == 0)
			return fd;
		int e = errno;
		X_close(fd);
		if (e != ECONNREFUSED && e != ENETUNREACH && e != EHOSTUNREACH && e != ETIMEDOUT) {
			fprintf(stderr, "client: connect: %s\n", strerror(e));
			return -1;
		}
		struct timespec ts = { 0, 500000000 };
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "client: no server\n");
	return -1;
}

static int client_one(const struct sockaddr_in *a, uint32_t conn, const char *spec)
{
	char name[16];
	unsigned up = 0, down = 0;
	if (sscanf(spec, "%15[a-z]:%u:%u", name, &up, &down) != 3) {
		fprintf(stderr, "bad case %s (NAME:UP:DOWN)\n", spec);
		return 2;
	}
	uint32_t cs = 0;
	for (uint32_t i = C_HALF; i <= C_LAST; i++)
		if (!strcmp(name, case_names[i]))
			cs = i;
	if (!cs) {
		fprintf(stderr, "unknown case %s\n", name);
		return 2;
	}
	int fd = connect_retry(a);
	if (fd < 0)
		return 2;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	printf("client conn=%u case=%s up=%u down=%u\n", conn, name, up, down);
	fflush(stdout);	/* a scenario may act on this line while the data moves */
	unsigned char h[16];
	put32(h, MAGIC);
	put32(h + 4, cs);
	put32(h + 8, up);
	put32(h + 12, down);
	int bad = 0;
	if (io_write_full(X_write, fd, h, sizeof h))
		bad = 1;
	if (!bad && cs == C_URG && X_send(fd, "!", 1, MSG_OOB) != 1) {
		fprintf(stderr, "client: send MSG_OOB: %s\n", strerror(errno));
		bad = 1;
	}
	if (!bad && cs == C_PP) {
		static unsigned char m[CHUNK], e[CHUNK];
		struct gen g;
		gen_init(&g, conn, 0, down);
		if (down > sizeof m)
			bad = 1;
		for (uint32_t i = 0; i < up && !bad; i++) {
			gen_fill(&g, m, down);
			if (io_write_full(X_write, fd, m, down)) {
				bad = 1;
				break;
			}
			size_t got = 0;
			while (got < down) {
				ssize_t r = X_read(fd, e + got, down - got);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0) {
					bad = 1;
					break;
				}
				got += (size_t)r;
			}
			if (!bad && memcmp(m, e, down)) {
				printf("  ping-pong %u: echo differs\n", i);
				bad = 1;
			}
		}
		report("client", conn, fd);
		X_shutdown(fd, SHUT_WR);
		if (!bad)
			bad |= expect_end(fd, 0);
		X_close(fd);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long long us = (t1.tv_sec - t0.tv_sec) * 1000000ll + (t1.tv_nsec - t0.tv_nsec) / 1000;
		printf("client conn=%u %s elapsed_us=%lld rtt_us=%lld\n", conn, bad ? "FAILED" : "ok",
		       us, up ? us / up : 0);
		return bad;
	}
	if (!bad && cs == C_IDLE) {
		const char *e = getenv("VM_XFER_IDLE_S");
		struct timespec ts = { e ? atoi(e) : 8, 0 };
		nanosleep(&ts, NULL);
	}
	if (!bad && send_stream(fd, conn, 0, up)) {
		fprintf(stderr, "client: write: %s\n", strerror(errno));
		bad = 1;
	}
	report("client", conn, fd);
	int half = cs == C_HALF || cs == C_URG || cs == C_IDLE;
	if (!bad && half && X_shutdown(fd, SHUT_WR)) {
		fprintf(stderr, "client: shutdown: %s\n", strerror(errno));
		bad = 1;
	}
	unsigned long long n = 0;
	if (!bad && recv_stream(fd, conn, 1, down, half, &n))
		bad = 1;
	if (!bad && cs == C_SFIRST)
		bad |= expect_end(fd, 0);
	if (cs == C_ABORT) {
		struct linger lg = { 1, 0 };
		X_setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	}
	X_close(fd);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long long us = (t1.tv_sec - t0.tv_sec) * 1000000ll + (t1.tv_nsec - t0.tv_nsec) / 1000;
	printf("client conn=%u %s elapsed_us=%lld\n", conn, bad ? "FAILED" : "ok", us);
	fflush(stdout);
	return bad;
}

/* The pseudo-case wait:MAX: no connection; wait until the file $VM_XFER_GO exists (the
 * scenario creates it once what it waits for happened, e.g. the peer ended the link group),
 * at most MAX seconds. 0 when it came, -1 when not. */
static int wait_go(unsigned max)
{
	const char *go = getenv("VM_XFER_GO");
	if (!go) {
		fprintf(stderr, "client: wait:%u needs VM_XFER_GO\n", max);
		return -1;
	}
	struct stat st;
	for (unsigned i = 0; i < max * 4; i++) {
		if (stat(go, &st) == 0) {
			printf("client: %s is there, going on\n", go);
			return 0;
		}
		struct timespec ts = { 0, 250000000 };
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "client: no %s after %u s\n", go, max);
	return -1;
}

static int client(const char *host, int port, int ncase, char **cases)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "client: bad address %s\n", host);
		return 2;
	}
	int bad = 0;
	uint32_t conn = 0;
	for (int i = 0; i < ncase; i++) {
		unsigned wmax = 0;
		if (sscanf(cases[i], "wait:%u", &wmax) == 1) {
			if (wait_go(wmax))
				return 2;
			continue;
		}
		int r = client_one(&a, conn++, cases[i]);
		if (r == 2)
			return 2;
		bad |= r;
	}
	/* VM_XFER_LINGER_S: stay that long before exit (the process's link groups live on
	 * until their idle timer ends them, not the process's exit) */
	const char *lg = getenv("VM_XFER_LINGER_S");
	if (lg) {
		struct timespec ts = { atoi(lg), 0 };
		nanosleep(&ts, NULL);
	}
	return bad;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && strcmp(argv[1], "server") == 0)
		return server(atoi(argv[2]), atoi(argv[3]));
	if (argc >= 5 && strcmp(argv[1], "client") == 0)
		return client(argv[2], atoi(argv[3]), argc - 4, argv + 4);
#ifdef VM_KERNEL
	if (argc >= 2)
		return ksmc_main(argc, argv);
#endif
	fprintf(stderr, "usage: %s server PORT N | client HOST PORT NAME:UP:DOWN...\n", argv[0]);
	return 2;
}
