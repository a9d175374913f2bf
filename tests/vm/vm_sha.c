/* vm_sha.c: the two-guest data check of the verbs tests (tests/vm, docs/parts/verbs.md):
 * a client streams BYTES of seeded pseudo-random data over an smcr socket, the server hashes
 * what it reads (SHA-256, libcrypto) and sends the digest back; both print the transport
 * the connection really used (SOL_SMCR query) and the client checks the digest against its
 * own. Exit 0 when the digests match; the scenario checks the mode it expects.
 *
 *   vm_sha server PORT
 *   vm_sha client HOST PORT BYTES      (retries the connect for up to 120 s) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <smcr/smcr.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/iofull.h"

#define CHUNK 65536

static void hex(const unsigned char *d, char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void report(const char *who, int fd, unsigned long long bytes, const char *sha)
{
	struct smcr_info in;
	socklen_t len = sizeof in;
	memset(&in, 0, sizeof in);
	if (smcr_getsockopt(fd, SOL_SMCR, SMCR_INFO, &in, &len) != 0)
		perror("getsockopt SMCR_INFO");
	printf("%s: mode=%s bytes=%llu sha256=%s local_reason=%s peer_reason=%s qpn=%u\n", who,
	       smcr_mode_name(in.mode), bytes, sha, smcr_reason_name(in.local_reason),
	       smcr_reason_name(in.peer_reason), in.local_qpn);
	fflush(stdout);
}

static int server(int port)
{
	int l = smcr_socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	smcr_setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (l < 0 || smcr_bind(l, (struct sockaddr *)&a, sizeof a) || smcr_listen(l, 4)) {
		perror("server: listen");
		return 2;
	}
	printf("server: listening on %d\n", port);
	fflush(stdout);
	int c = smcr_accept(l, NULL, NULL);
	if (c < 0) {
		perror("server: accept");
		return 2;
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	static unsigned char buf[CHUNK];
	unsigned long long total = 0;
	for (;;) {
		ssize_t r = smcr_read(c, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			perror("server: read");
			return 2;
		}
		if (r == 0)
			break;
		EVP_DigestUpdate(md, buf, (size_t)r);
		total += (unsigned long long)r;
	}
	unsigned char d[32];
	unsigned dl = 0;
	EVP_DigestFinal_ex(md, d, &dl);
	EVP_MD_CTX_free(md);
	char h[65];
	hex(d, h);
	report("server", c, total, h);
	if (io_write_full(smcr_write, c, d, sizeof d)) {
		perror("server: write digest");
		return 2;
	}
	smcr_close(c);
	smcr_close(l);
	return 0;
}

static int client(const char *host, int port, unsigned long long bytes)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "client: bad address %s\n", host);
		return 2;
	}
	int fd = -1;
	for (int i = 0; i < 240; i++) {
		fd = smcr_socket(AF_INET, SOCK_STREAM, 0);
		if (smcr_connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
			break;
		int e = errno;
		smcr_close(fd);
		fd = -1;
		if (e != ECONNREFUSED && e != ENETUNREACH && e != EHOSTUNREACH && e != ETIMEDOUT) {
			fprintf(stderr, "client: connect: %s\n", strerror(e));
			return 2;
		}
		struct timespec ts = { 0, 500000000 };
		nanosleep(&ts, NULL);
	}
	if (fd < 0) {
		fprintf(stderr, "client: no server at %s:%d\n", host, port);
		return 2;
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	static unsigned char buf[CHUNK];
	uint64_t x = 0x9E3779B97F4A7C15ull ^ bytes;
	unsigned long long left = bytes;
	/* odd sizes, so writes do not line up with the ring */
	size_t step = 65536 - 77;
	while (left) {
		size_t n = left < step ? (size_t)left : step;
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = (unsigned char)x;
		}
		EVP_DigestUpdate(md, buf, n);
		if (io_write_full(smcr_write, fd, buf, n)) {
			perror("client: write");
			return 2;
		}
		left -= n;
	}
	unsigned char d[32], peer[32];
	unsigned dl = 0;
	EVP_DigestFinal_ex(md, d, &dl);
	EVP_MD_CTX_free(md);
	char h[65];
	hex(d, h);
	report("client", fd, bytes, h);
	smcr_shutdown(fd, SHUT_WR);
	size_t got = 0;
	while (got < sizeof peer) {
		ssize_t r = smcr_read(fd, peer + got, sizeof peer - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "client: no digest from the server\n");
			return 2;
		}
		got += (size_t)r;
	}
	smcr_close(fd);
	int ok = memcmp(d, peer, sizeof d) == 0;
	printf("client: digest %s\n", ok ? "matches" : "DIFFERS");
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "server") == 0)
		return server(atoi(argv[2]));
	if (argc == 5 && strcmp(argv[1], "client") == 0)
		return client(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 0));
	fprintf(stderr, "usage: vm_sha server PORT | vm_sha client HOST PORT BYTES\n");
	return 2;
}
