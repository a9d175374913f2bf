/* smcr-echo-client: sends a message to an echo server over the smcr socket API and checks
 * what comes back (include/smcr/smcr.h).
 *
 *   smcr-echo-client [-h HOST] [-p PORT] [-c COUNT] [-s SIZE] [MESSAGE]
 *
 * Blocking calls, the simplest use: smcr_connect returns once the connection is set up
 * (SMC-R, or TCP when the rules or the peer say so), then send/recv as on TCP. Prints the
 * connection's mode from SOL_SMCR. Exit status 0 when every echo matched. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <smcr/smcr.h>

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1", *port = "7000";
	int count = 1, opt;
	size_t size = 0;
	while ((opt = getopt(argc, argv, "h:p:c:s:")) != -1) {
		switch (opt) {
		case 'h': host = optarg; break;
		case 'p': port = optarg; break;
		case 'c': count = atoi(optarg); break;
		case 's': size = (size_t)atol(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-h HOST] [-p PORT] [-c COUNT] [-s SIZE] [MESSAGE]\n",
				argv[0]);
			return 2;
		}
	}
	const char *msg = optind < argc ? argv[optind] : "hello over smcr";
	size_t len = size ? size : strlen(msg);
	char *out = malloc(len), *in = malloc(len);
	for (size_t i = 0; i < len; i++)
		out[i] = size ? (char)('a' + i % 26) : msg[i];

	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	int rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "%s: %s\n", host, gai_strerror(rc));
		return 1;
	}
	int fd = smcr_socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || smcr_connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		perror("connect");
		return 1;
	}
	freeaddrinfo(ai);
	struct smcr_info info;
	socklen_t il = sizeof(info);
	smcr_getsockopt(fd, SOL_SMCR, SMCR_INFO, &info, &il);
	printf("connected: mode %s", smcr_mode_name(info.mode));
	if (info.local_reason || info.peer_reason)
		printf(" (local %s, peer %s)", smcr_reason_name(info.local_reason),
		       smcr_reason_name(info.peer_reason));
	printf("\n");
	int bad = 0;
	for (int i = 0; i < count; i++) {
		size_t off = 0;
		while (off < len) {
			ssize_t w = smcr_send(fd, out + off, len - off, 0);
			if (w <= 0) {
				perror("send");
				return 1;
			}
			off += (size_t)w;
		}
		/* MSG_WAITALL: the whole echo, however the stream splits it */
		ssize_t r = smcr_recv(fd, in, len, MSG_WAITALL);
		if (r != (ssize_t)len || memcmp(in, out, len) != 0) {
			fprintf(stderr, "echo %d: mismatch (%zd bytes)\n", i, r);
			bad = 1;
			break;
		}
	}
	if (!bad)
		printf("%d echo(s) of %zu bytes ok\n", count, len);
	smcr_shutdown(fd, SHUT_WR);
	char c;
	if (smcr_recv(fd, &c, 1, 0) != 0)
		bad = 1; /* the server closes after our SHUT_WR */
	smcr_close(fd);
	free(out);
	free(in);
	return bad;
}
