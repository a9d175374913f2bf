/* it_v2.c: SMC-R v2 between two smcr processes over the emulated RDMA provider presenting
 * RoCE v2 GIDs (emu:...,gid=v2; docs/parts/emu.md) with user EIDs (SMCR_UEID,
 * docs/CONFIG.md): the connection is SMC-R v2 on both ends, 1 MiB each way SHA-256 checked,
 * then a second connection reuses the link group. The fallbacks to v1 (no user EID in
 * common, the client's device without RoCE v2, the server without a user EID) still end
 * in SMC-R, version 1 (docs/parts/wire-v2.md 6). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itlib.h"

#define IT_V2_BYTES (1u << 20)

struct v2case {
	const char *cli_ueid, *srv_ueid;	/* NULL: unset */
	bool cli_v2, srv_v2;			/* device with gid=v2 */
	int want_version;			/* both ends */
	int conns;				/* connections, one after the other */
};

static int lfd;
static uint16_t port;
static const struct v2case *cur;

static void child_env(int role, const char *ueid, bool v2)
{
	it_child_env(role);
	char spec[128];
	const char *p = getenv("IT_EMU_PORT");
	snprintf(spec, sizeof(spec), "emu:ip=127.0.0.%d,port=%s%s", 30 + role, p ? p : "0",
		 v2 ? ",gid=v2" : "");
	setenv("SMCR_DEVICES", spec, 1);
	if (ueid)
		setenv("SMCR_UEID", ueid, 1);
	else
		unsetenv("SMCR_UEID");
}

/* One SMC-R connection: check its version and first contact, send and receive 1 MiB with
 * SHA-256 on both ends (the sender's digest goes after the data); one side sends first, so
 * neither waits on a full ring while the other does too. */
static int exchange(int fd, bool first, uint64_t seed, bool send_first)
{
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	if (in.mode != SMCR_MODE_SMCR || in.smc_version != cur->want_version)
		fprintf(stderr, "mode %s v%u local %s peer %s\n", smcr_mode_name(in.mode),
			in.smc_version, smcr_reason_name(in.local_reason),
			smcr_reason_name(in.peer_reason));
	IT_CHECK(in.mode == SMCR_MODE_SMCR);
	IT_CHECK(in.smc_version == cur->want_version);
	IT_CHECK(in.first_contact == (first ? 1 : 0));
	uint8_t *buf = malloc(IT_V2_BYTES), *rbuf = malloc(IT_V2_BYTES);
	IT_CHECK(buf && rbuf);
	it_fill_random(buf, IT_V2_BYTES, &seed);
	uint8_t d_out[32], d_in[32], d_peer[32];
	struct it_sha *sh = it_sha_new();
	it_sha_update(sh, buf, IT_V2_BYTES);
	it_sha_final(sh, d_out);
	for (int k = 0; k < 2; k++) {
		if ((k == 0) == send_first) {
			IT_CHECK(it_write_all(fd, buf, IT_V2_BYTES));
			IT_CHECK(it_write_all(fd, d_out, 32));
		} else {
			IT_CHECK(it_read_all(fd, rbuf, IT_V2_BYTES));
			IT_CHECK(it_read_all(fd, d_peer, 32));
		}
	}
	sh = it_sha_new();
	it_sha_update(sh, rbuf, IT_V2_BYTES);
	it_sha_final(sh, d_in);
	IT_CHECK(memcmp(d_in, d_peer, 32) == 0);
	free(buf);
	free(rbuf);
	return 0;
}

static int server(void *arg)
{
	(void)arg;
	child_env(0, cur->srv_ueid, cur->srv_v2);
	for (int i = 0; i < cur->conns; i++) {
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		IT_CHECK(exchange(fd, i == 0, 100 + (uint64_t)i, false) == 0);
		char c;
		IT_CHECK(smcr_recv(fd, &c, 1, 0) == 0);	/* the client's close */
		IT_CHECK(smcr_close(fd) == 0);
	}
	return 0;
}

static int client(void *arg)
{
	(void)arg;
	child_env(1, cur->cli_ueid, cur->cli_v2);
	smcr_close(lfd);
	for (int i = 0; i < cur->conns; i++) {
		int fd = it_connect(false, port);
		IT_CHECK(fd >= 0);
		IT_CHECK(exchange(fd, i == 0, 200 + (uint64_t)i, true) == 0);
		IT_CHECK(smcr_close(fd) == 0);
	}
	return 0;
}

static void run(const struct v2case *c)
{
	cur = c;
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	assert_int_equal(it_run_pair(lfd, server, NULL, client, NULL, 30000), 0);
}

static void test_v2(void **state)
{
	(void)state;
	const struct v2case c = { "spike-ueid", "OTHER,SPIKE-UEID", true, true, 2, 2 };
	run(&c);
}

static void test_v2_ueid_mismatch(void **state)
{
	(void)state;
	const struct v2case c = { "AAA", "BBB", true, true, 1, 1 };
	run(&c);
}

static void test_v2_client_without_v2(void **state)
{
	(void)state;
	const struct v2case c = { "AAA", "AAA", false, true, 1, 1 };
	run(&c);
}

static void test_v2_server_without_ueid(void **state)
{
	(void)state;
	const struct v2case c = { "AAA", NULL, true, true, 1, 1 };
	run(&c);
}

int main(void)
{
	setenv("IT_DEVICE", "emu", 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v2),
		cmocka_unit_test(test_v2_ueid_mismatch),
		cmocka_unit_test(test_v2_client_without_v2),
		cmocka_unit_test(test_v2_server_without_ueid),
	};
	return IT_MAIN(tests);
}
