/* it_hostile.c: a hostile SMC-R peer on an established link group (docs/design/engine-decisions.md
 * test list: "a fake peer sending bad cursors and unknown tokens: the smcr side survives, serves
 * the next client, and writes nothing out of bounds under ASan").
 *
 * The attacker is an smcr client that reaches into its own engine (core_int.h: tests may
 * include anything) and sends hand-made 44-byte CDC messages on the link's QP with
 * link_send_msg, next to the real traffic of its connection:
 *   - a CDC whose alert token names no connection, claiming a huge producer cursor: the
 *     server drops it (engine stats count it) and the real connection is untouched;
 *   - CDCs of the real connection with a producer cursor beyond the RMBE, one moving
 *     backwards, one claiming more than the RMBE holds, and a consumer cursor beyond what
 *     the server ever sent: the server never reads or writes outside its buffers, resets
 *     at most that connection (the program sees ECONNRESET, never bytes that were not
 *     sent), and the server process goes on to serve a well-behaved client over SMC-R. */
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
#include "wire/cdc.h"

static int lfd;
static uint16_t port;

enum attack {
	ATK_UNKNOWN_TOKEN,
	ATK_PROD_BEYOND_RING,
	ATK_PROD_BACKWARDS,
	ATK_PROD_TOO_FAR,
	ATK_CONS_BEYOND_SENT,
	ATK__COUNT,
};

struct shared {
	_Atomic int stage;
	int srv_result[ATK__COUNT]; /* 1: data intact, 2: reset (ECONNRESET) */
	uint64_t dropped_before, dropped_after;
	int good_served;
};
static struct shared *sh;

static void wait_stage(int s)
{
	for (int i = 0; i < 20000 && sh->stage < s; i++)
		usleep(500);
	IT_CHECK(sh->stage >= s);
}

/* Sends one CDC on c's link with the given cursors/token (attacker side). */
static void send_cdc(struct core_conn *c, uint32_t token, struct curs prod, struct curs cons)
{
	struct cdc_msg m;
	memset(&m, 0, sizeof(m));
	pthread_mutex_lock(&c->lock);
	m.seqno = (uint16_t)(c->tx_seq + 1);
	struct core_link *l = c->link;
	pthread_mutex_unlock(&c->lock);
	m.token = token;
	m.prod = prod;
	m.cons = cons;
	uint8_t buf[CDC_MSG_LEN];
	IT_CHECK(cdc_encode(&m, buf) == 0);
	IT_CHECK(link_send_msg(l, buf) == 0);
}

static int attacker(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	for (int k = 0; k < ATK__COUNT; k++) {
		int fd = it_connect(false, port);
		IT_CHECK(fd >= 0);
		struct smcr_info in;
		IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
		struct sock *s = sock_get(fd);
		IT_CHECK(s && s->conn);
		struct core_conn *c = s->conn;
		IT_CHECK(it_write_all(fd, "before", 6));
		char b[6];
		IT_CHECK(it_read_all(fd, b, 6)); /* the server echoed: cursors are known now */
		pthread_mutex_lock(&c->lock);
		uint32_t size = c->peer_size, token = c->peer_token;
		uint64_t prod = c->tx_prod, cons = c->rx_cons;
		pthread_mutex_unlock(&c->lock);
		struct curs p = abs_to_curs(prod, size), q = abs_to_curs(cons, c->rmbe_size);
		switch ((enum attack)k) {
		case ATK_UNKNOWN_TOKEN: {
			struct curs far = { (uint16_t)(p.wrap + 3), size - 1 };
			send_cdc(c, token ^ 0x5a5a5a5au, far, q);
			send_cdc(c, 0x7fffffffu, p, q);
			break;
		}
		case ATK_PROD_BEYOND_RING: {
			struct curs bad = { p.wrap, size + 100 }; /* count outside the ring */
			send_cdc(c, token, bad, q);
			break;
		}
		case ATK_PROD_BACKWARDS: {
			struct curs back = abs_to_curs(prod - 3, size);
			send_cdc(c, token, back, q);
			break;
		}
		case ATK_PROD_TOO_FAR: {
			/* claims a whole RMBE and more of unread data */
			struct curs far = abs_to_curs(prod + size + size / 2, size);
			send_cdc(c, token, far, q);
			break;
		}
		case ATK_CONS_BEYOND_SENT: {
			/* the server's send side: we "consumed" bytes it never sent */
			uint64_t srv_sent_abs = cons;
			struct curs bogus = abs_to_curs(srv_sent_abs + 5000, c->rmbe_size);
			send_cdc(c, token, p, bogus);
			break;
		}
		case ATK__COUNT:
			break;
		}
		sock_put(s);
		/* then real data on the same connection */
		(void)!smcr_send(fd, "after", 5, MSG_NOSIGNAL);
		sh->stage = 2 * k + 1;
		wait_stage(2 * k + 2);
		smcr_close(fd);
	}
	return 0;
}

static int good_client(void *arg)
{
	(void)arg;
	it_child_env(2);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	IT_CHECK(it_write_all(fd, "good!", 5));
	char b[5];
	IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "good!", 5) == 0);
	smcr_close(fd);
	return 0;
}

static int server(void *arg)
{
	(void)arg;
	it_child_env(0);
	struct core_engine_stats st;
	for (int k = 0; k < ATK__COUNT; k++) {
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		if (k == 0) {
			core_engine_stats(sock_engine(), &st);
			sh->dropped_before = st.cdc_rx_dropped;
		}
		char b[16];
		IT_CHECK(it_read_all(fd, b, 6) && memcmp(b, "before", 6) == 0);
		IT_CHECK(it_write_all(fd, "before", 6));
		wait_stage(2 * k + 1);
		/* what follows is either exactly "after" or a reset: never other bytes */
		ssize_t n = smcr_recv(fd, b, 5, MSG_WAITALL);
		if (n == 5) {
			IT_CHECK(memcmp(b, "after", 5) == 0);
			sh->srv_result[k] = 1;
		} else {
			IT_CHECK(n == -1 && errno == ECONNRESET);
			sh->srv_result[k] = 2;
		}
		smcr_close(fd);
		sh->stage = 2 * k + 2;
	}
	core_engine_stats(sock_engine(), &st);
	sh->dropped_after = st.cdc_rx_dropped;
	/* and the next, well-behaved client is served over SMC-R */
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	char b[5];
	IT_CHECK(it_read_all(fd, b, 5));
	IT_CHECK(it_write_all(fd, b, 5));
	sh->good_served = 1;
	smcr_close(fd);
	return 0;
}

static void test_hostile_cdc(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	pid_t s = it_fork(server, NULL);
	pid_t a = it_fork(attacker, NULL);
	assert_int_equal(it_wait(a, 30000), 0);
	pid_t g = it_fork(good_client, NULL);
	smcr_close(lfd);
	assert_int_equal(it_wait(g, 30000), 0);
	assert_int_equal(it_wait(s, 30000), 0);
	/* the unknown-token CDCs were dropped and the connection kept its data */
	assert_int_equal(sh->srv_result[ATK_UNKNOWN_TOKEN], 1);
	assert_true(sh->dropped_after >= sh->dropped_before + 2);
	assert_int_equal(sh->good_served, 1);
	/* a cursor outside the ring cannot be applied: the connection is reset and nothing
	 * sent after it is delivered (core drops every CDC of an aborted connection). */
	assert_int_equal(sh->srv_result[ATK_PROD_BEYOND_RING], 2);
	assert_int_equal(sh->srv_result[ATK_PROD_TOO_FAR], 2);
	/* backwards / bogus consumer: ignored or reset, never wrong bytes (checked in the
	 * server) */
	assert_true(sh->srv_result[ATK_PROD_BACKWARDS] >= 1);
	assert_true(sh->srv_result[ATK_CONS_BEYOND_SENT] >= 1);
	assert_int_equal(sh->good_served, 1);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_cdc),
	};
	return IT_MAIN(tests);
}
