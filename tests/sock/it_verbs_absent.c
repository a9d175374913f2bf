/* it_verbs_absent.c: the verbs provider where it cannot run (docs/parts/verbs.md "Absent"):
 * without libibverbs (SMCR_VERBS_LIB naming a file that does not exist) and, on a machine
 * with rdma-core but no RDMA device, with the real library. The provider registers, says
 * why it is absent, opens nothing (DEV_NO_DEVICE), and a process whose SMCR_DEVICES is
 * "verbs" still talks: its connections fall back to TCP on the same connection with the
 * no-device reason on its side and the peer's Decline reason on the other, the data whole
 * (SHA-256 both ways). Each case runs in fresh children (the library is loaded once per
 * process). On a host that has an ACTIVE RDMA port the "real library" cases are skipped. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/wait.h>

#include "dev/verbs/verbs.h"
#include "itlib.h"

#define NOLIB "/nonexistent/libibverbs.so.1"
#define DATA_LEN (1u << 20)

static int lfd;
static uint16_t port;
struct shared {
	int mode[2];
	uint32_t local[2], peer[2];
	uint8_t sha_sent[2][32], sha_got[2][32];
};
static struct shared *sh;
static const char *verbs_side_lib; /* NULL: the real libibverbs */
static int verbs_role;		   /* 0 server, 1 client: who has SMCR_DEVICES=verbs */

/* Checks the provider in this (fresh) process: registered, absent with a reason, no open. */
static int provider_absent(const char *lib, const char *want)
{
	if (lib)
		setenv("SMCR_VERBS_LIB", lib, 1);
	IT_CHECK(dev_verbs_register() == 0);
	const char *why = dev_verbs_absent();
	if (!why)
		return 77; /* this host has RDMA devices: nothing to check here */
	fprintf(stderr, "[child] verbs absent: %s\n", why);
	IT_CHECK(!want || strstr(why, want));
	struct dev_device *d = NULL;
	IT_CHECK(dev_open("verbs", &d) == -SMCR_E_DEV_NO_DEVICE);
	IT_CHECK(dev_open("verbs:rxe0/1", &d) == -SMCR_E_DEV_NO_DEVICE);
	struct dev_gid g = { { 0xfe, 0x80 } };
	IT_CHECK(dev_open_by_gid(&g, &d) == -SMCR_E_DEV_NO_DEVICE);
	char specs[4][VERBS_SPEC_MAX];
	IT_CHECK(dev_verbs_active_ports(specs, 4) == 0);
	return 0;
}

static int child_nolib(void *a)
{
	(void)a;
	return provider_absent(NOLIB, "cannot load libibverbs");
}

static int child_reallib(void *a)
{
	(void)a;
	return provider_absent(NULL, NULL);
}

static void test_provider_without_libibverbs(void **state)
{
	(void)state;
	assert_int_equal(it_wait(it_fork(child_nolib, NULL), 20000), 0);
}

static void test_provider_without_device(void **state)
{
	(void)state;
	int rc = it_wait(it_fork(child_reallib, NULL), 20000);
	if (rc == 77) {
		print_message("[  SKIP    ] this host has an RDMA device\n");
		return;
	}
	assert_int_equal(rc, 0);
}

/* ---- a connection from or to a process whose only device spec is "verbs" ---------------- */

static void env_for(int role)
{
	it_child_env(role);
	if (role == verbs_role) {
		setenv("SMCR_DEVICES", "verbs", 1);
		if (verbs_side_lib)
			setenv("SMCR_VERBS_LIB", verbs_side_lib, 1);
	}
	it_rules("use smc both * *");
}

static void record(int fd, int role)
{
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	sh->mode[role] = in.mode;
	sh->local[role] = in.local_reason;
	sh->peer[role] = in.peer_reason;
}

/* Sends DATA_LEN random bytes and reads the other side's to EOF, both hashed. */
static void exchange(int fd, int role)
{
	uint8_t *buf = malloc(DATA_LEN);
	IT_CHECK(buf);
	uint64_t seed = 0x5eed0000u + (unsigned)role;
	it_fill_random(buf, DATA_LEN, &seed);
	struct it_sha *s = it_sha_new();
	it_sha_update(s, buf, DATA_LEN);
	it_sha_final(s, sh->sha_sent[role]);
	if (role == 1) { /* the client writes first, then reads */
		IT_CHECK(it_write_all(fd, buf, DATA_LEN));
		IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
	}
	struct it_sha *r = it_sha_new();
	IT_CHECK(it_read_to_eof(fd, r, 65536) == (long long)DATA_LEN);
	it_sha_final(r, sh->sha_got[role]);
	if (role == 0) {
		IT_CHECK(it_write_all(fd, buf, DATA_LEN));
		IT_CHECK(smcr_shutdown(fd, SHUT_WR) == 0);
	}
	free(buf);
}

static int server(void *a)
{
	(void)a;
	env_for(0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	smcr_close(lfd);
	record(fd, 0);
	exchange(fd, 0);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static int client(void *a)
{
	(void)a;
	env_for(1);
	smcr_close(lfd);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = smcr_socket(AF_INET, SOCK_STREAM, 0);
	IT_CHECK(fd >= 0);
	IT_CHECK(smcr_connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	record(fd, 1);
	exchange(fd, 1);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void run_fallback(int role, const char *lib)
{
	verbs_role = role;
	verbs_side_lib = lib;
	memset(sh, 0, sizeof(*sh));
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	assert_int_equal(it_run_pair(lfd, server, NULL, client, NULL, 30000), 0);
	for (int r = 0; r < 2; r++)
		assert_int_equal(sh->mode[r], SMCR_MODE_TCP);
	/* the verbs side has no device; the other learns it from the Decline */
	assert_int_equal(sh->local[role], SMCR_REASON_NODEV);
	assert_int_equal(sh->local[1 - role], SMCR_REASON_PEERDECL);
	assert_int_equal(sh->peer[1 - role], SMCR_REASON_NODEV);
	assert_memory_equal(sh->sha_sent[0], sh->sha_got[1], 32);
	assert_memory_equal(sh->sha_sent[1], sh->sha_got[0], 32);
}

static bool real_lib_absent(void)
{
	/* asked in a child, so this process never loads libibverbs */
	return it_wait(it_fork(child_reallib, NULL), 20000) == 0;
}

static void test_server_without_libibverbs(void **state)
{
	(void)state;
	run_fallback(0, NOLIB);
}

static void test_client_without_libibverbs(void **state)
{
	(void)state;
	run_fallback(1, NOLIB);
}

static void test_server_without_device(void **state)
{
	(void)state;
	if (!real_lib_absent()) {
		print_message("[  SKIP    ] this host has an RDMA device\n");
		return;
	}
	run_fallback(0, NULL);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_provider_without_libibverbs),
		cmocka_unit_test(test_provider_without_device),
		cmocka_unit_test(test_server_without_libibverbs),
		cmocka_unit_test(test_client_without_libibverbs),
		cmocka_unit_test(test_server_without_device),
	};
	return IT_MAIN(tests);
}
