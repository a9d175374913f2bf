/* pl_dualstack: IPv4 clients of a dual-stack listener ([::] with IPV6_V6ONLY off, the
 * default of nginx's `listen [::]:80 ipv6only=off`, of Java and of CPython's
 * create_server(dualstack_ipv6=True)) get SMC-R. The accepted connection is an AF_INET6
 * socket whose addresses are IPv4-mapped (::ffff:127.0.0.1); its prefix is the IPv4 one
 * the client's Proposal carries (src/sock/prefix.c), so the server does not decline with
 * DIFFPREFIX. Two clients: an AF_INET one to 127.0.0.1, and an AF_INET6 one to
 * ::ffff:127.0.0.1. Each: SMC-R at both ends, the peer address the kernel gives, and
 * 1 MiB each way with the bytes checked. */
#include "pl_util.h"

#include <netinet/in.h>

#define LEN (1 << 20)

struct srv {
	pthread_t t;
	int lfd;
	int fd;
	struct sockaddr_in6 peer;
};

static void *srv_main(void *arg)
{
	struct srv *v = arg;
	socklen_t l = sizeof(v->peer);
	v->fd = accept(v->lfd, (struct sockaddr *)&v->peer, &l);
	CHECK(v->fd >= 0 && l == sizeof(v->peer));
	/* echo LEN bytes */
	unsigned char *b = malloc(LEN);
	CHECK(b);
	pl_read_all(v->fd, b, LEN);
	pl_write_all(v->fd, b, LEN);
	free(b);
	return NULL;
}

static void one(int lfd, int c, const char *what)
{
	struct srv v = { .lfd = lfd, .fd = -1 };
	CHECK(pthread_create(&v.t, NULL, srv_main, &v) == 0);
	unsigned char *out = malloc(LEN), *in = malloc(LEN);
	CHECK(out && in);
	pl_fill(out, LEN, 0);
	pl_write_all(c, out, LEN);
	pl_read_all(c, in, LEN);
	CHECK(memcmp(in, out, LEN) == 0);
	CHECK(pthread_join(v.t, NULL) == 0);
	CHECK(v.peer.sin6_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&v.peer.sin6_addr));
	CHECK(memcmp(&v.peer.sin6_addr.s6_addr[12], "\x7f\0\0\x01", 4) == 0);
	int want = pl_expect();
	CHECK(pl_mode(c) == want);
	CHECK(pl_mode(v.fd) == want);
	printf("pl_dualstack: %s: mode %d at both ends, 1 MiB each way\n", what, want);
	free(out);
	free(in);
	close(c);
	close(v.fd);
}

int main(void)
{
	pl_need_preload();
	int l = socket(AF_INET6, SOCK_STREAM, 0);
	CHECK(l >= 0);
	int off = 0, on = 1;
	CHECK(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) == 0);
	CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) == 0);
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
	CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(l, 16) == 0);
	socklen_t al = sizeof(a);
	CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0);
	uint16_t port = ntohs(a.sin6_port);

	one(l, pl_connect(port), "AF_INET client to 127.0.0.1");

	int c6 = socket(AF_INET6, SOCK_STREAM, 0);
	CHECK(c6 >= 0);
	struct sockaddr_in6 m = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	CHECK(inet_pton(AF_INET6, "::ffff:127.0.0.1", &m.sin6_addr) == 1);
	CHECK(connect(c6, (struct sockaddr *)&m, sizeof(m)) == 0);
	one(l, c6, "AF_INET6 client to ::ffff:127.0.0.1");
	close(l);
	printf("pl_dualstack: ok\n");
	return 0;
}
