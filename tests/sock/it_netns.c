/* it_netns.c: two processes in two network namespaces joined by a veth pair, over the
 * emulated RDMA provider (docs/design/engine-decisions.md test list: "across two network namespaces
 * made by the test, on the emulated provider"): random data both ways with SHA-256, 1 MiB, over
 * SMC-R (SOL_SMCR query), a second connection reusing the link group, and a half-close.
 * Needs root and iproute2 (`ip netns`); skipped with a message otherwise. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "itlib.h"

struct shared {
	_Atomic uint16_t port;
	uint8_t sent[2][32], recvd[2][32];
	int mode[2];
	uint32_t lgr[2][2];
	uint8_t first[2][2];
};
static struct shared *sh;
static char ns_a[32], ns_b[32], if_a[16], if_b[16];
static int subnet;

static int sh_run(const char *cmd)
{
	int rc = system(cmd);
	return rc == 0 ? 0 : -1;
}

static void netns_down(void)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null",
		 ns_a, ns_b);
	(void)!system(cmd);
}

static int netns_up(void)
{
	int id = (int)(getpid() % 100000);
	subnet = 1 + id % 250;
	snprintf(ns_a, sizeof(ns_a), "smcr-a-%d", id);
	snprintf(ns_b, sizeof(ns_b), "smcr-b-%d", id);
	snprintf(if_a, sizeof(if_a), "smva%d", id);
	snprintf(if_b, sizeof(if_b), "smvb%d", id);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "ip netns add %1$s && ip netns add %2$s && "
		 "ip link add %3$s type veth peer name %4$s && "
		 "ip link set %3$s netns %1$s && ip link set %4$s netns %2$s && "
		 "ip -n %1$s addr add 10.231.%5$d.1/24 dev %3$s && "
		 "ip -n %2$s addr add 10.231.%5$d.2/24 dev %4$s && "
		 "ip -n %1$s link set %3$s up && ip -n %2$s link set %4$s up && "
		 "ip -n %1$s link set lo up && ip -n %2$s link set lo up",
		 ns_a, ns_b, if_a, if_b, subnet);
	if (sh_run(cmd) < 0) {
		netns_down();
		return -1;
	}
	return 0;
}

static void enter_ns(const char *ns, const char *ifname)
{
	char path[128];
	snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	IT_CHECK(fd >= 0);
	IT_CHECK(setns(fd, CLONE_NEWNET) == 0);
	close(fd);
	char spec[96];
	/* both sides must use one port: the parent's */
	snprintf(spec, sizeof(spec), "emu:if=%s,port=%s", ifname, getenv("IT_EMU_PORT"));
	setenv("SMCR_DEVICES", spec, 1);
	if (!getenv("SMCR_LOG"))
		setenv("SMCR_LOG", "error", 1);
	it_rules("use smc both * 10.231.0.0/16");
}

struct xfer {
	int fd;
	int side;
};

static void *sender(void *arg)
{
	struct xfer *x = arg;
	uint64_t seed = 77 + (uint64_t)x->side;
	static char bufs[2][65536];
	char *buf = bufs[x->side];
	struct it_sha *sha = it_sha_new();
	for (int i = 0; i < 16; i++) {
		it_fill_random(buf, 65536, &seed);
		it_sha_update(sha, buf, 65536);
		IT_CHECK(it_write_all(x->fd, buf, 65536));
	}
	IT_CHECK(smcr_shutdown(x->fd, SHUT_WR) == 0);
	it_sha_final(sha, sh->sent[x->side]);
	return NULL;
}

static void both_ways(int fd, int side)
{
	struct xfer x = { fd, side };
	pthread_t t;
	IT_CHECK(pthread_create(&t, NULL, sender, &x) == 0);
	struct it_sha *sha = it_sha_new();
	IT_CHECK(it_read_to_eof(fd, sha, 65536) == 16 * 65536);
	it_sha_final(sha, sh->recvd[side]);
	pthread_join(t, NULL);
}

static void record(int fd, int side, int conn)
{
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	if (conn == 0)
		sh->mode[side] = in.mode;
	IT_CHECK(in.mode == SMCR_MODE_SMCR);
	sh->lgr[side][conn] = in.lgr_id;
	sh->first[side][conn] = in.first_contact;
}

static int server(void *arg)
{
	(void)arg;
	enter_ns(ns_a, if_a);
	int l = smcr_socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char ip[32];
	snprintf(ip, sizeof(ip), "10.231.%d.1", subnet);
	inet_pton(AF_INET, ip, &sa.sin_addr);
	socklen_t sl = sizeof(sa);
	IT_CHECK(smcr_bind(l, (struct sockaddr *)&sa, sl) == 0);
	IT_CHECK(smcr_listen(l, 4) == 0);
	IT_CHECK(smcr_getsockname(l, (struct sockaddr *)&sa, &sl) == 0);
	sh->port = ntohs(sa.sin_port);
	for (int conn = 0; conn < 2; conn++) {
		int fd = smcr_accept(l, NULL, NULL);
		IT_CHECK(fd >= 0);
		record(fd, 0, conn);
		if (conn == 0) {
			both_ways(fd, 0);
		} else {
			char b[4];
			IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "ping", 4) == 0);
			IT_CHECK(it_write_all(fd, "pong", 4));
			IT_CHECK(smcr_recv(fd, b, 1, 0) == 0);
		}
		IT_CHECK(smcr_close(fd) == 0);
	}
	smcr_close(l);
	return 0;
}

static int client(void *arg)
{
	(void)arg;
	enter_ns(ns_b, if_b);
	for (int i = 0; i < 5000 && !sh->port; i++)
		usleep(1000);
	IT_CHECK(sh->port);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(sh->port) };
	char ip[32];
	snprintf(ip, sizeof(ip), "10.231.%d.1", subnet);
	inet_pton(AF_INET, ip, &sa.sin_addr);
	for (int conn = 0; conn < 2; conn++) {
		int fd = smcr_socket(AF_INET, SOCK_STREAM, 0);
		IT_CHECK(smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
		record(fd, 1, conn);
		if (conn == 0) {
			both_ways(fd, 1);
		} else {
			char b[4];
			IT_CHECK(it_write_all(fd, "ping", 4));
			IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
			IT_CHECK(it_read_all(fd, b, 4) && memcmp(b, "pong", 4) == 0);
			IT_CHECK(smcr_recv(fd, b, 1, 0) == 0);
		}
		IT_CHECK(smcr_close(fd) == 0);
	}
	return 0;
}

static void test_two_netns_emu(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "it_netns skipped: needs root for network namespaces\n");
		skip();
	}
	if (system("ip netns list >/dev/null 2>&1") != 0) {
		fprintf(stderr, "it_netns skipped: iproute2 (ip netns) not available\n");
		skip();
	}
	if (netns_up() < 0) {
		fprintf(stderr, "it_netns skipped: cannot create network namespaces / veth\n");
		skip();
	}
	memset(sh, 0, sizeof(*sh));
	pid_t s = it_fork(server, NULL);
	pid_t c = it_fork(client, NULL);
	int rc_c = it_wait(c, 60000), rc_s = it_wait(s, 60000);
	netns_down();
	assert_int_equal(rc_c, 0);
	assert_int_equal(rc_s, 0);
	assert_int_equal(sh->mode[0], SMCR_MODE_SMCR);
	assert_int_equal(sh->mode[1], SMCR_MODE_SMCR);
	assert_memory_equal(sh->sent[0], sh->recvd[1], 32);
	assert_memory_equal(sh->sent[1], sh->recvd[0], 32);
	/* the second connection reused the link group */
	assert_int_equal(sh->first[1][0], 1);
	assert_int_equal(sh->first[1][1], 0);
	assert_int_equal(sh->lgr[1][0], sh->lgr[1][1]);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_netns_emu),
	};
	return IT_MAIN(tests);
}
