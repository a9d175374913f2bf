/* test_core_linkpath.c: the loop provider's per-path controls in simulated time
 * (tests/lib/loopdev.h: delay, hold/release, drop with RC's retransmission, cut) under
 * two engines (fake clock): each asserts when, to the nanosecond, the bytes of one send
 * arrive (or the link is declared down), so failover tests built on them are exact.
 * The cut is silent for the side that does not send: it finds out only through its TEST
 * LINK after 30 s without receipt (docs/protocol/procedures.md 3.5), which fails after the
 * transport timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/core_int.h"
#include "lib/core_pair.h"
#include "lib/loopdev.h"
#include "util/err.h"

#define MS 1000000ull
#define SEC 1000000000ull

struct fix {
	struct core_engine *ce, *se;
	struct cp_pair pp;
	struct dev_qp *qp;	/* the client's end of the one link */
};

static uint64_t clock_base = 1 * SEC;

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (cp_engines("loop", &f->ce, &f->se))
		return -1;
	f->pp.now = clock_base;	/* the loop paths' clock is one per process, never back */
	if (!cp_connect_smc(&f->pp, f->ce, f->se))
		return -1;
	f->qp = f->pp.cli->link->qp;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	struct loopdev_path none = { 0 };
	if (f->qp)	/* the controls die with the QP (test_cut's went with its link) */
		loopdev_link_set(f->qp, &none);
	clock_base = f->pp.now + 1 * SEC;
	cp_release(&f->pp);
	cp_engines_free(f->ce, f->se);
	free(f);
	return 0;
}

static void at(struct fix *f, uint64_t t)
{
	f->pp.now = t;
	cp_progress(&f->pp, 3);
}

static long rd(struct core_conn *c, uint8_t *b, size_t n)
{
	struct iovec v = { b, n };
	return core_conn_recv(c, &v, 1, 0);
}

static void send100(struct fix *f, uint8_t *s)
{
	cp_fill(s, 100, f->pp.now);
	struct iovec v = { s, 100 };
	assert_int_equal(core_conn_send(f->pp.cli, &v, 1, 0), 100);
}

static unsigned lgs(struct core_engine *e)
{
	struct core_engine_stats st;
	core_engine_stats(e, &st);
	return st.lgs;
}

static void test_delay(void **state)
{
	struct fix *f = *state;
	struct loopdev_path p = { .delay_ns = 5 * MS };
	loopdev_link_set(f->qp, &p);
	uint64_t t = f->pp.now + 1 * MS;
	at(f, t);
	uint8_t s[100], r[100];
	send100(f, s);
	assert_int_equal(loopdev_queued(f->qp), 2);	/* the WRITE and its CDC */
	at(f, t + 5 * MS - 1);
	assert_int_equal(rd(f->pp.srv, r, sizeof(r)), -SMCR_E_AGAIN);
	at(f, t + 5 * MS);
	assert_int_equal(rd(f->pp.srv, r, sizeof(r)), 100);
	assert_memory_equal(s, r, 100);
	assert_int_equal(loopdev_queued(f->qp), 0);
}

static void test_hold_release(void **state)
{
	struct fix *f = *state;
	struct loopdev_path p = { .hold = true };
	loopdev_link_set(f->qp, &p);
	uint8_t s[100], r[100];
	send100(f, s);
	at(f, f->pp.now + 10 * SEC);	/* held: nothing, however long (no transport timer) */
	assert_int_equal(rd(f->pp.srv, r, sizeof(r)), -SMCR_E_AGAIN);
	p.hold = false;
	loopdev_link_set(f->qp, &p);
	at(f, f->pp.now);
	assert_int_equal(rd(f->pp.srv, r, sizeof(r)), 100);
	assert_memory_equal(s, r, 100);
}

static void test_drop_retransmits(void **state)
{
	struct fix *f = *state;
	struct loopdev_path p = { .drop = 1 };
	loopdev_path_set(f->qp, &p);	/* client -> server only */
	uint64_t t = f->pp.now;
	uint8_t s[100], r[100];
	send100(f, s);
	at(f, t + LOOPDEV_RETRANS_NS - 1);
	assert_int_equal(rd(f->pp.srv, r, sizeof(r)), -SMCR_E_AGAIN);
	at(f, t + LOOPDEV_RETRANS_NS);
	assert_int_equal(rd(f->pp.srv, r, sizeof(r)), 100);
	assert_memory_equal(s, r, 100);
	/* the loss was one WR's: the next send is on time again (the path is quiet) */
	send100(f, s);
	at(f, f->pp.now);
	assert_int_equal(rd(f->pp.srv, r, sizeof(r)), 100);
	assert_int_equal(lgs(f->ce), 1);
}

static void test_cut(void **state)
{
	struct fix *f = *state;
	struct loopdev_path p = { .cut = true };
	uint64_t t = f->pp.now + 1 * MS;
	at(f, t);
	loopdev_link_set(f->qp, &p);
	uint8_t s[100], r[100];
	send100(f, s);	/* accepted: the sender cannot know yet */
	at(f, t + LOOPDEV_TIMEOUT_NS - 1);
	assert_int_equal(lgs(f->ce), 1);
	at(f, t + LOOPDEV_TIMEOUT_NS);	/* RETRY_EXC_ERR: the client's link is down */
	assert_int_equal(lgs(f->ce), 0);
	f->qp = NULL;	/* destroyed with its LG */
	struct iovec v = { s, 100 };
	/* its 100 bytes never arrived: reset at once (close.c close_peer_lost_locked),
	 * reported once, then EOF, as TCP's ECONNRESET */
	assert_int_equal(core_conn_send(f->pp.cli, &v, 1, 0), -SMCR_E_CORE_RESET);
	assert_int_equal(rd(f->pp.cli, r, sizeof(r)), 0);
	/* the server has sent nothing: it sees nothing until its TEST LINK, 30 s after its
	 * last receipt (the connect), fails after the transport timeout */
	assert_int_equal(lgs(f->se), 1);
	assert_int_equal(rd(f->pp.srv, r, sizeof(r)), -SMCR_E_AGAIN);
	uint64_t last_rx = f->pp.srv->lg ? f->pp.srv->link->last_rx_ns : 0;
	assert_true(last_rx > 0 && last_rx <= t);
	uint64_t probe = last_rx + CORE_TESTLINK_NS;
	at(f, probe - 1);
	assert_int_equal(lgs(f->se), 1);
	at(f, probe);	/* TEST LINK posted, onto the cut path */
	assert_int_equal(lgs(f->se), 1);
	at(f, probe + LOOPDEV_TIMEOUT_NS - 1);
	assert_int_equal(lgs(f->se), 1);
	at(f, probe + LOOPDEV_TIMEOUT_NS);
	assert_int_equal(lgs(f->se), 0);
	/* nothing of the server's was lost: the end is its TCP connection's (as a peer lost
	 * with its link), here the reset the socket layer would pass on */
	struct core_conn_info ci;
	core_conn_info(f->pp.srv, &ci);
	assert_true(ci.lost_wait);
	assert_int_equal(rd(f->pp.srv, r, sizeof(r)), -SMCR_E_AGAIN);
	core_conn_tcp_event(f->pp.srv, true, f->pp.now);
	assert_int_equal(rd(f->pp.srv, r, sizeof(r)), -SMCR_E_CORE_RESET);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_delay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hold_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drop_retransmits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cut, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
