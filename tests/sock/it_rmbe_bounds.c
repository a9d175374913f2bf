/* it_rmbe_bounds.c: a peer can never make smcr's memory take a write outside the RMBE that
 * belongs to that peer's connection, nor reach another peer's RMB (docs/parts/robust.md
 * "RMBE bounds"). Each link group has its own protection domain, and an RMB is registered
 * for remote write on its LG's PD only, with exactly the RMBE's length (lgr.c); the device
 * enforces rkey, PD and bounds per RDMA WRITE (verbs semantics, docs/parts/dev-shm.md,
 * emu.md).
 *
 * A victim client V writes 16 KiB into its connection's RMBE at the server and waits (the
 * bytes sit there unread). Then attacker processes, each its own SMC-R peer (its own LG),
 * connect to the same server, send "hello" and post a raw RDMA WRITE of 16 bytes 0xEE on
 * their own link's QP, aimed at:
 *   0  V's RMBE at the server (V's rkey and address, passed to it through shared memory):
 *      a second peer process aiming at the first's buffer;
 *   1  its own RMBE's end (offset = the RMBE size: past the end);
 *   2  straddling its own RMBE's end (8 bytes inside, 8 outside);
 *   3  a made-up rkey at its own RMBE's address;
 *   4  its own RMBE through the rkey of an RMB of a link group that ended (stale: the LG
 *      freed it, deregistering the MR, as a DELETE RKEY does).
 * Each WRITE must fail at the attacker (its link goes down: a remote access error ends its
 * QP); the server reads exactly "hello" from each attacker and then the end; then V sends
 * 16 KiB more and the server reads V's 32 KiB intact (byte for byte its stream) and EOF.
 * Run over shm (it_rmbe_bounds) and emu (it_rmbe_bounds_emu: IT_DEVICE=emu). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "core/core_int.h"
#include "itlib.h"
#include "sock/sock.h"

static int lfd;
static uint16_t port;

#define PART 16384
#define NATK 5

struct shared {
	_Atomic uint32_t v_rkey, v_size;
	_Atomic uint64_t v_vaddr;
	_Atomic uint32_t stale_rkey; /* an rkey of the server's first LG with attacker 4 */
	_Atomic int v_stage;	      /* 1: part 1 written; V waits for 2 */
	_Atomic int atk_done[NATK + 1];
	_Atomic int atk_link_down[NATK + 1];
	_Atomic long long atk_got[NATK + 1]; /* bytes the server read from each attacker */
	_Atomic int atk_bad_byte[NATK + 1];
	_Atomic int srv_v_ok;
	_Atomic int hello_seen[NATK + 1]; /* the server read attacker k's "hello" */
};
static struct shared *sh;

static bool links_gone(void *arg)
{
	(void)arg;
	struct core_engine_stats st;
	it_engine_stats(&st);
	return st.links == 0;
}

/* A raw RDMA WRITE of 16 bytes 0xEE on c's link (inline: no local MR needed). */
static int raw_write(struct core_conn *c, uint64_t addr, uint32_t rkey)
{
	static uint8_t junk[16];
	memset(junk, 0xEE, sizeof(junk));
	pthread_mutex_lock(&c->lock);
	struct core_link *l = c->link;
	pthread_mutex_unlock(&c->lock);
	if (!l)
		return -1;
	struct dev_sge sg = { (uint64_t)(uintptr_t)junk, sizeof(junk), 0 };
	struct dev_send_wr wr = { .wr_id = (uint64_t)l->id << 32 | 0xFFFF0000u,
				  .sg_list = &sg,
				  .num_sge = 1,
				  .opcode = DEV_WR_RDMA_WRITE,
				  .send_flags = DEV_SEND_SIGNALED | DEV_SEND_INLINE };
	wr.rdma.remote_addr = addr;
	wr.rdma.rkey = rkey;
	pthread_mutex_lock(&l->tx_lock);
	int rc = dev_post_send(l->qp, &wr, NULL);
	pthread_mutex_unlock(&l->tx_lock);
	return rc;
}

static struct core_conn *conn_of(int fd)
{
	struct sock *s = sock_get(fd);
	IT_CHECK(s && s->conn);
	struct core_conn *c = s->conn;
	sock_put(s);
	return c;
}

static int victim(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	struct core_conn *c = conn_of(fd);
	pthread_mutex_lock(&c->lock);
	sh->v_rkey = c->peer_rkey;
	sh->v_vaddr = c->peer_vaddr;
	sh->v_size = c->peer_size;
	pthread_mutex_unlock(&c->lock);
	IT_CHECK(sh->v_size >= PART);
	uint8_t b[2 * PART];
	uint64_t seed = 0xabcdef;
	it_fill_random(b, sizeof(b), &seed);
	IT_CHECK(it_write_all(fd, b, PART));
	sh->v_stage = 1;
	it_wait_at_least(&sh->v_stage, 2);
	IT_CHECK(it_write_all(fd, b + PART, PART));
	smcr_close(fd);
	return 0;
}

static int attacker(void *arg)
{
	int k = (int)(intptr_t)arg;
	it_child_env(2 + k);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR && in.first_contact);
	IT_CHECK(it_write_all(fd, "hello", 5));
	/* the server has it (a send may leave from the send ring later than this call) */
	it_wait_at_least(&sh->hello_seen[k], 1);
	struct core_conn *c = conn_of(fd);
	pthread_mutex_lock(&c->lock);
	uint32_t rkey = c->peer_rkey, size = c->peer_size;
	uint64_t vaddr = c->peer_vaddr;
	pthread_mutex_unlock(&c->lock);
	if (k == NATK) {
		/* the set-up of case 4: keep this LG's rkey, then end the LG (exit) */
		sh->stale_rkey = rkey;
		smcr_close(fd);
		sh->atk_done[k] = 1;
		return 0;
	}
	uint64_t addr = vaddr;
	switch (k) {
	case 0:
		addr = sh->v_vaddr;
		rkey = sh->v_rkey;
		break;
	case 1:
		addr = vaddr + size;
		break;
	case 2:
		addr = vaddr + size - 8;
		break;
	case 3:
		rkey ^= 0x5a5a0000u;
		break;
	default:
		rkey = sh->stale_rkey;
		break;
	}
	IT_CHECK(raw_write(c, addr, rkey) == 0);
	/* the remote access error takes the link down */
	sh->atk_link_down[k] = it_poll_until(links_gone, NULL, 10000, 1000);
	sh->atk_done[k] = 1;
	smcr_close(fd);
	return 0;
}

static int server(void *arg)
{
	(void)arg;
	it_child_env(0);
	int fv = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fv >= 0);
	/* the stale-rkey set-up connection first, then the attackers, in order */
	int order[NATK + 1] = { NATK, 0, 1, 2, 3, 4 };
	for (int i = 0; i < NATK + 1; i++) {
		int k = order[i];
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		uint8_t b[256];
		IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "hello", 5) == 0);
		sh->hello_seen[k] = 1;
		long long got = 5;
		for (;;) {
			ssize_t n = smcr_recv(fd, b, sizeof(b), 0);
			if (n <= 0)
				break; /* EOF or the reset of a peer whose link failed */
			for (ssize_t j = 0; j < n; j++)
				if (got + j >= 5 || b[j] != (uint8_t)"hello"[got + j])
					sh->atk_bad_byte[k] = 1;
			got += n;
		}
		sh->atk_got[k] = got;
		smcr_close(fd);
	}
	uint8_t want[2 * PART], b[2 * PART];
	uint64_t seed = 0xabcdef;
	it_fill_random(want, sizeof(want), &seed);
	IT_CHECK(it_read_all(fv, b, sizeof(b)));
	sh->srv_v_ok = memcmp(b, want, sizeof(b)) == 0;
	char x;
	IT_CHECK(smcr_recv(fv, &x, 1, 0) == 0);
	smcr_close(fv);
	smcr_close(lfd);
	return 0;
}

static void test_rmbe_bounds(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	pid_t s = it_fork(server, NULL);
	pid_t v = it_fork(victim, NULL);
	it_wait_at_least(&sh->v_stage, 1);
	int order[NATK + 1] = { NATK, 0, 1, 2, 3, 4 };
	for (int i = 0; i < NATK + 1; i++) {
		int k = order[i];
		pid_t a = it_fork(attacker, (void *)(intptr_t)k);
		assert_int_equal(it_wait(a, 20000), 0);
		assert_true(sh->atk_done[k]);
	}
	sh->v_stage = 2;
	smcr_close(lfd);
	assert_int_equal(it_wait(v, 20000), 0);
	assert_int_equal(it_wait(s, 20000), 0);
	for (int k = 0; k < NATK; k++) {
		if (!sh->atk_link_down[k] || sh->atk_got[k] != 5 || sh->atk_bad_byte[k])
			fail_msg("attack %d: link down %d, server read %lld bytes, bad %d", k,
				 sh->atk_link_down[k], sh->atk_got[k], sh->atk_bad_byte[k]);
	}
	assert_int_equal(sh->atk_got[NATK], 5);
	assert_true(sh->srv_v_ok);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rmbe_bounds),
	};
	return IT_MAIN(tests);
}
