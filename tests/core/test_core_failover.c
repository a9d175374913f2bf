/* test_core_failover.c: a link of a two-link group fails (docs/protocol/procedures.md 3.5-3.8,
 * docs/FAILOVER.md). Two engines with two loop devices each, fake clock, one connection on
 * each link (pp[0] on link 1, pp[1] on link 2); the loop paths' cut/hold controls fail a link
 * at an exact time, the logs (tests/lib/twolink.h) show what each side sends where:
 *   basic          the client's sends on link 2 fail (cut): its connection moves to link 1,
 *                  rewinds to its last completed CDC, sends the validation CDC (F, that CDC's
 *                  sequence number), writes the unconfirmed bytes again to the same offsets;
 *                  DELETE LINK: the client asks, the server requests, the client answers "no
 *                  such link"; the server's connection moves too; every byte once, in order
 *   urgent         an urgent byte among the unconfirmed bytes is urgent again after failover
 *   full_ring      peer RMBE and send ring full when the link fails: all of it arrives
 *   close          data and the D of a shutdown unconfirmed: data then EOF
 *   testlink       a silent link (held, no transport error): TEST LINK after 30 s without
 *                  receipt, link down 2 s later without answer, failover
 *   noslot         senders find no free send slot for 10 s: link down, failover
 *   in_add_link    the new link fails in the middle of ADD LINK: the flow ends, the group
 *                  stays single and works; the old link failing then ends the group
 *   both_down      no surviving link: every connection ends with ECONNRESET
 *   second_failure the surviving link fails while the failover's bytes are in flight
 *   rkey_on_failed_link a new connection's CONFIRM RKEY is held on link 2, which then
 *                  fails: the request goes again on link 1 and the connection is SMC-R
 *   forward_to_cons the ACKs of link 2 are lost (noack) while the peer reads everything
 *                  and says so on its own path: the sender's last completed CDC is behind
 *                  the peer's consumer cursor, so the failover goes forward to that cursor
 *                  and writes again only the bytes after it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "lib/twolink.h"
#include "util/err.h"
#include "wire/cdc.h"
#include "wire/llc.h"

/* Two engines with two loop devices each, no connection yet; *state owns it (teardown). */
static struct tl_fix *engines(void **state)
{
	struct tl_fix *f = calloc(1, sizeof(*f));
	*state = f;
	if (f && tl_setup(f, 2, 2)) {
		free(f);
		*state = f = NULL;
	}
	return f;
}

/* engines, two connections, the group with its two links (one connection on each) */
static int setup(void **state)
{
	struct tl_fix *f = engines(state);
	if (!f || !tl_connect(f, 0) || !tl_connect(f, 1))
		return -1;
	if (tl_links(f->ce) != 2 || tl_links(f->se) != 2)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	struct tl_fix *f = *state;
	if (!f)
		return 0;
	tl_teardown(f);
	free(f);
	return 0;
}

static struct core_link *lk(struct core_engine *e, int slot)
{
	struct core_lgr *lg = tl_lg(e);
	return lg ? lg->links[slot] : NULL;
}

static long snd(struct core_conn *c, const void *b, size_t n, unsigned flags)
{
	struct iovec v = { (void *)(uintptr_t)b, n };
	return core_conn_send(c, &v, 1, flags);
}

static long rcv(struct core_conn *c, void *b, size_t n, unsigned flags)
{
	struct iovec v = { b, n };
	return core_conn_recv(c, &v, 1, flags);
}

static void cut_qp(struct dev_qp *qp)
{
	struct loopdev_path p = { .cut = true };
	loopdev_link_set(qp, &p);
}

static void cut(struct core_link *l)
{
	cut_qp(l->qp);
}

/* Reads everything readable of c into buf at *got (up to max). */
static void drain(struct tl_fix *f, struct core_conn *c, uint8_t *buf, size_t *got, size_t max)
{
	unsigned idle = 0;
	while (*got < max && idle < 50) {
		long n = rcv(c, buf + *got, max - *got, 0);
		if (n > 0) {
			*got += (size_t)n;
			idle = 0;
			continue;
		}
		idle++;
		tl_at(f, f->now);
	}
}

static struct cdc_msg cdc_at(const struct tl_log *lg, int i)
{
	struct cdc_msg m;
	assert_true(i >= 0);
	assert_int_equal(cdc_decode(lg->ev[i].msg, 44, &m), 0);
	return m;
}

static struct llc_msg llc_at(const struct tl_log *lg, int i)
{
	struct llc_msg m;
	assert_true(i >= 0);
	assert_int_equal(llc_decode(lg->ev[i].msg, 44, &m), 0);
	return m;
}

static void test_basic(void **state)
{
	struct tl_fix *f = *state;
	struct core_conn *c = f->pp[1].cli, *s = f->pp[1].srv;
	struct core_link *c1 = lk(f->ce, 0), *c2 = lk(f->ce, 1), *s1 = lk(f->se, 0);
	assert_ptr_equal(c->link, c2);
	uint8_t buf[30000], got[30000];
	cp_stream_fill(buf, 0, sizeof(buf), 77);
	/* 10000 bytes go through and complete */
	assert_int_equal(snd(c, buf, 10000, 0), 10000);
	tl_at(f, f->now + 1);
	uint16_t fin_seq = c->tx_fin_seq;
	assert_int_equal(c->tx_fin_prod, 10000);
	assert_int_equal(fin_seq, c->tx_seq);
	/* the link is cut: 20000 more in two sends, accepted, never completed */
	uint64_t t = f->now + 1;
	tl_at(f, t);
	cut(c2);
	assert_int_equal(snd(c, buf + 10000, 10000, 0), 10000);
	assert_int_equal(snd(c, buf + 20000, 10000, 0), 10000);
	uint16_t last_seq = c->tx_seq;
	assert_int_equal((uint16_t)(last_seq - fin_seq), 2);
	unsigned cf = f->lc->n, sf = f->ls->n;
	tl_at(f, t + LOOPDEV_TIMEOUT_NS - 1);
	assert_int_equal(tl_links(f->ce), 2);
	tl_at(f, t + LOOPDEV_TIMEOUT_NS);	/* RETRY_EXC: link 2 down on the client */
	assert_int_equal(tl_links(f->ce), 1);
	assert_ptr_equal(c->link, c1);
	/* client, on link 1: validation CDC, the 20000 bytes again from offset 10000, a CDC */
	int i = tl_next(f->lc, &cf, CDC_TYPE, -1);
	struct cdc_msg m = cdc_at(f->lc, i);
	assert_ptr_equal(f->lc->ev[i].link, c1);
	assert_true(m.pf.failover);
	assert_int_equal(m.seqno, fin_seq);
	assert_int_equal(m.token, c->peer_token);
	assert_int_equal(m.prod.count, 0);
	assert_int_equal(m.cons.count, 0);
	uint32_t wrote = 0;
	uint64_t first_addr = 0;
	for (unsigned k = (unsigned)i + 1; k < f->lc->n; k++) {
		const struct tl_ev *x = &f->lc->ev[k];
		if (x->kind == CORE_TRACE_WRITE && x->rkey == c->peer_rkey) {
			assert_ptr_equal(x->link, c1);
			if (!wrote)
				first_addr = x->addr;
			wrote += x->len;
		}
	}
	assert_int_equal(wrote, 20000);
	assert_int_equal(first_addr, c->peer_vaddr + 10000);
	/* the peer's RMB by its rkey on link 1's device */
	assert_int_equal(c->peer_rkey, lgr_rmb_mr(s->rmb, s1)->rkey);
	i = tl_next(f->lc, &cf, CDC_TYPE, -1);
	m = cdc_at(f->lc, i);
	assert_false(m.pf.failover);
	assert_int_equal(m.prod.count, 30000 % c->peer_size);
	assert_int_equal(m.seqno, (uint16_t)(last_seq + 1));	/* after the highest used */
	/* DELETE LINK: the client asks (orderly, lost path) on link 1 */
	int d = tl_next(f->lc, &cf, LLC_DELETE_LINK, 0);
	struct llc_msg dl = llc_at(f->lc, d);
	assert_ptr_equal(f->lc->ev[d].link, c1);
	assert_int_equal(dl.delete_link.link_num, 2);
	assert_true(dl.delete_link.orderly);
	assert_int_equal(dl.delete_link.reason, LLC_DEL_LOST_PATH);
	/* the server: its connection moves (validation CDC on link 1), then its own request */
	i = tl_next(f->ls, &sf, CDC_TYPE, -1);
	m = cdc_at(f->ls, i);
	assert_true(m.pf.failover);
	assert_ptr_equal(f->ls->ev[i].link, s1);
	d = tl_next(f->ls, &sf, LLC_DELETE_LINK, 0);
	dl = llc_at(f->ls, d);
	assert_int_equal(dl.delete_link.link_num, 2);
	assert_false(dl.delete_link.orderly);
	/* the client already freed it: "no such link" */
	d = tl_next(f->lc, &cf, LLC_DELETE_LINK, 1);
	dl = llc_at(f->lc, d);
	assert_int_equal(dl.delete_link.reason, LLC_DEL_NOLNK);
	assert_int_equal(tl_lg(f->se)->del_link_num, 0);
	assert_int_equal(tl_links(f->se), 1);
	assert_ptr_equal(s->link, s1);
	/* every byte once, in order */
	size_t n = 0;
	drain(f, s, got, &n, sizeof(got));
	assert_int_equal(n, 30000);
	assert_int_equal(cp_stream_check(got, 0, n, 77), -1);
	assert_int_equal(rcv(s, got, 1, 0), -SMCR_E_AGAIN);
	struct core_conn_info in;
	core_conn_info(c, &in);
	assert_int_equal(in.bytes_sent, 30000);
	assert_int_equal(in.link_num, 1);
	assert_int_equal(in.lg_links, 1);
	/* both directions still work on both connections */
	assert_int_equal(tl_move(f, s, c, 0, 100000, 78), 100000);
	assert_int_equal(tl_move(f, c, s, 30000, 100000, 77), 100000);
	assert_int_equal(tl_move(f, f->pp[0].cli, f->pp[0].srv, 0, 100000, 79), 100000);
	struct core_engine_stats st;
	core_engine_stats(f->ce, &st);
	assert_int_equal(st.failovers, 1);
	assert_int_equal(st.failover_reason[CORE_DOWN_WC], 1);
	core_engine_stats(f->se, &st);
	assert_int_equal(st.failovers, 1);
	assert_int_equal(st.failover_reason[CORE_DOWN_PEER], 1);
	/* the operator's counters (SMCR_STATS "failover"): the second link added at setup,
	 * one link failed, one failover moving one connection; the client sent its request
	 * and its answer and got the server's request, the server the other way round */
	struct core_engine_counters ct;
	core_engine_counters(f->ce, &ct);
	assert_int_equal(ct.links_added, 1);
	assert_int_equal(ct.links_failed, 1);
	assert_int_equal(ct.failovers, 1);
	assert_int_equal(ct.conns_moved, 1);
	assert_int_equal(ct.delete_link_sent, 2);
	assert_int_equal(ct.delete_link_received, 1);
	core_engine_counters(f->se, &ct);
	assert_int_equal(ct.links_added, 1);
	assert_int_equal(ct.links_failed, 1);
	assert_int_equal(ct.failovers, 1);
	assert_int_equal(ct.conns_moved, 1);
	assert_int_equal(ct.delete_link_sent, 1);
	assert_int_equal(ct.delete_link_received, 2);
	struct core_lgr_info lgi[2];
	assert_int_equal(core_lgr_list(f->ce, lgi, 2), 1);
	assert_int_equal(lgi[0].failovers, 1);
	assert_int_equal(lgi[0].nlinks, 1);
	assert_string_equal(lgi[0].links[0].state, "ACTIVE");
	assert_int_equal(lgi[0].links[0].link_num, 1);
	assert_int_equal(lgi[0].links[0].conns, 2);
	/* the failed link's QPs go once drained */
	tl_at(f, f->now + 3 * TL_SEC);
	assert_null(tl_lg(f->ce)->retired);
	assert_null(tl_lg(f->se)->retired);
}

static void test_urgent(void **state)
{
	struct tl_fix *f = *state;
	struct core_conn *c = f->pp[1].cli, *s = f->pp[1].srv;
	uint64_t t = f->now + 1;
	tl_at(f, t);
	cut(c->link);
	assert_int_equal(snd(c, "abcdefgh", 8, 0), 8);
	assert_int_equal(snd(c, "X", 1, CORE_MSG_OOB), 1);
	assert_int_equal(snd(c, "ij", 2, 0), 2);
	tl_at(f, t + LOOPDEV_TIMEOUT_NS);
	assert_int_equal(tl_links(f->ce), 1);
	tl_at(f, f->now + 1);
	char b[16] = { 0 };
	assert_int_equal(rcv(s, b, 1, CORE_MSG_OOB), 1);
	assert_int_equal(b[0], 'X');
	assert_int_equal(rcv(s, b, sizeof(b), 0), 8);	/* a read stops at the mark */
	assert_memory_equal(b, "abcdefgh", 8);
	assert_int_equal(rcv(s, b, sizeof(b), 0), 2);	/* the urgent byte not in the stream */
	assert_memory_equal(b, "ij", 2);
	assert_int_equal(rcv(s, b, sizeof(b), 0), -SMCR_E_AGAIN);
}

static void test_full_ring(void **state)
{
	struct tl_fix *f = *state;
	struct core_conn *c = f->pp[1].cli, *s = f->pp[1].srv;
	size_t cap = 4u << 20;
	uint8_t *buf = malloc(cap), *got = malloc(cap);
	assert_non_null(buf);
	assert_non_null(got);
	cp_stream_fill(buf, 0, cap, 91);
	/* the reader reads nothing: the peer's RMBE fills, then the send ring */
	size_t sent = 0;
	for (;;) {
		long k = snd(c, buf + sent, 7000, 0);
		if (k == -SMCR_E_AGAIN)
			break;
		assert_true(k > 0);
		sent += (size_t)k;
		tl_at(f, f->now);
	}
	struct core_conn_info in;
	core_conn_info(c, &in);
	assert_true(in.sndbuf_queued > 0);
	assert_int_equal(in.writable, 0);
	uint64_t t = f->now + 1;
	tl_at(f, t);
	cut(c->link);
	/* the reader takes what its RMBE holds: its window update fails on the cut path, the
	 * server fails over and deletes link 2, so the client fails over too, with what it
	 * wrote into the room meanwhile (over link 2, unconfirmed) */
	size_t n = 0;
	drain(f, s, got, &n, cap);
	assert_true(n > 0);
	tl_at(f, t + LOOPDEV_TIMEOUT_NS);
	assert_int_equal(tl_links(f->se), 1);
	assert_int_equal(tl_links(f->ce), 1);
	for (int i = 0; i < 200 && n < sent; i++)
		drain(f, s, got, &n, cap);
	assert_int_equal(n, sent);
	assert_int_equal(cp_stream_check(got, 0, n, 91), -1);
	core_conn_info(c, &in);
	assert_int_equal(in.bytes_sent, sent);
	/* the client failed over on the server's DELETE LINK and wrote bytes again: more was
	 * written into the peer's RMB than the stream holds */
	struct core_engine_stats st;
	core_engine_stats(f->ce, &st);
	assert_int_equal(st.failovers, 1);
	assert_int_equal(st.failover_reason[CORE_DOWN_PEER], 1);
	uint64_t written = 0;	/* (only this connection sent data in this test) */
	for (unsigned i = 0; i < f->lc->n; i++)
		if (f->lc->ev[i].kind == CORE_TRACE_WRITE)
			written += f->lc->ev[i].len;
	assert_true(written > sent);
	free(buf);
	free(got);
}

static void test_close(void **state)
{
	struct tl_fix *f = *state;
	struct core_conn *c = f->pp[1].cli, *s = f->pp[1].srv;
	uint8_t buf[5000], got[5000];
	cp_stream_fill(buf, 0, sizeof(buf), 5);
	uint64_t t = f->now + 1;
	tl_at(f, t);
	cut(c->link);
	assert_int_equal(snd(c, buf, sizeof(buf), 0), 5000);
	assert_int_equal(core_conn_shutdown(c, SHUT_WR, f->now), 0);	/* D, unconfirmed */
	tl_at(f, t + LOOPDEV_TIMEOUT_NS);
	assert_int_equal(tl_links(f->ce), 1);
	size_t n = 0;
	drain(f, s, got, &n, sizeof(got));
	assert_int_equal(n, 5000);
	assert_int_equal(cp_stream_check(got, 0, n, 5), -1);
	assert_int_equal(rcv(s, got, 1, 0), 0);	/* EOF: the D arrived */
	/* the other direction still works until the server closes */
	assert_int_equal(tl_move(f, s, c, 0, 20000, 6), 20000);
}

static void test_testlink(void **state)
{
	struct tl_fix *f = *state;
	struct core_link *c2 = lk(f->ce, 1), *s2 = lk(f->se, 1);
	/* the path goes silent: no error, no answer (hold keeps everything queued) */
	struct loopdev_path p = { .hold = true };
	loopdev_link_set(c2->qp, &p);
	uint64_t pc = c2->last_rx_ns + CORE_TESTLINK_NS, ps = s2->last_rx_ns + CORE_TESTLINK_NS;
	assert_int_equal(pc, ps);	/* both saw their last message at the same fake time */
	unsigned cf = f->lc->n;
	tl_at(f, pc - 1);
	assert_int_equal(tl_next(f->lc, &cf, LLC_TEST_LINK, 0), -1);
	tl_at(f, pc);
	/* on both links (link 1 carried nothing either; its TEST LINK is answered) */
	int i = tl_next(f->lc, &cf, LLC_TEST_LINK, 0), k = tl_next(f->lc, &cf, LLC_TEST_LINK, 0);
	assert_true(i >= 0 && k >= 0);
	assert_true(f->lc->ev[i].link == c2 || f->lc->ev[k].link == c2);
	assert_true(f->lc->ev[i].link == lk(f->ce, 0) || f->lc->ev[k].link == lk(f->ce, 0));
	assert_int_equal(tl_links(f->ce), 2);
	tl_at(f, pc + f->ce->p.llc_wait_ns - 1);
	assert_int_equal(tl_links(f->ce), 2);
	tl_at(f, pc + f->ce->p.llc_wait_ns);
	assert_int_equal(tl_links(f->ce), 1);
	assert_int_equal(tl_links(f->se), 1);
	assert_ptr_equal(f->pp[1].cli->link, lk(f->ce, 0));
	assert_ptr_equal(f->pp[1].srv->link, lk(f->se, 0));
	struct core_engine_stats st;
	core_engine_stats(f->ce, &st);
	assert_int_equal(st.failover_reason[CORE_DOWN_TESTLINK], 1);
	tl_release(c2->qp);
	assert_int_equal(tl_move(f, f->pp[1].cli, f->pp[1].srv, 0, 50000, 12), 50000);
	assert_int_equal(tl_move(f, f->pp[1].srv, f->pp[1].cli, 0, 50000, 13), 50000);
}

/* The peer stops taking anything on link 2 (held: no completion, no error): the sender runs
 * out of send slots, and 10 s after it first found none the link is down and the connection
 * fails over; every byte arrives. */
static void test_noslot(void **state)
{
	struct tl_fix *f = *state;
	struct core_conn *c = f->pp[1].cli, *s = f->pp[1].srv;
	struct core_link *c2 = c->link;
	struct loopdev_path p = { .hold = true };
	loopdev_link_set(c2->qp, &p);
	uint64_t t0 = f->now + 1;
	tl_at(f, t0);
	uint8_t buf[3000], got[3000];
	cp_stream_fill(buf, 0, sizeof(buf), 21);
	for (int i = 0; i < 30; i++)	/* one slot per send until none is left */
		assert_int_equal(snd(c, buf + i * 100, 100, 0), 100);
	assert_true(c2->slot_waiters);
	assert_int_equal(c2->noslot_since, t0);
	tl_at(f, t0 + CORE_NOSLOT_NS - 1);
	assert_int_equal(tl_links(f->ce), 2);
	tl_at(f, t0 + CORE_NOSLOT_NS);
	assert_int_equal(tl_links(f->ce), 1);
	assert_ptr_equal(c->link, lk(f->ce, 0));
	struct core_engine_stats st;
	core_engine_stats(f->ce, &st);
	assert_int_equal(st.failover_reason[CORE_DOWN_NOSLOT], 1);
	tl_release(c2->qp);	/* before its QP goes (drained by the LLC wait) */
	size_t n = 0;
	drain(f, s, got, &n, sizeof(got));
	assert_int_equal(n, sizeof(got));
	assert_int_equal(cp_stream_check(got, 0, n, 21), -1);
}

/* The new link fails in the middle of ADD LINK (its CONFIRM LINK never arrives): the flow
 * ends on both sides and the group goes on with link 1. */
static void test_in_add_link(void **state)
{
	struct tl_fix *f = engines(state);
	assert_non_null(f);
	tl_hold(f->ls, LLC_CONFIRM_LINK, false, 2);	/* the one on the new link */
	assert_true(tl_connect(f, 0));
	struct dev_qp *held = f->ls->held;
	assert_non_null(held);
	struct core_lgr *slg = tl_lg(f->se), *clg = tl_lg(f->ce);
	assert_int_equal(slg->al_step, AL_WAIT_CONFIRM);
	uint64_t t = f->now;
	cut_qp(held);	/* the new path breaks */
	tl_at(f, t + LOOPDEV_TIMEOUT_NS);
	assert_int_equal(slg->flow, CORE_FLOW_NONE);
	assert_int_equal(clg->flow, CORE_FLOW_NONE);
	assert_null(slg->links[1]);
	assert_null(clg->links[1]);
	assert_int_equal(tl_links(f->se), 1);
	assert_int_equal(tl_links(f->ce), 1);
	assert_int_equal(tl_move(f, f->pp[0].cli, f->pp[0].srv, 0, 50000, 14), 50000);
	struct core_engine_stats st;
	core_engine_stats(f->se, &st);
	assert_int_equal(st.links_added, 0);
	assert_int_equal(st.failovers, 0);
}

/* The old link fails in the middle of ADD LINK (the server's CONT held, then cut): no active
 * link is left, the group ends and its connections are reset. */
static void test_old_link_in_add_link(void **state)
{
	struct tl_fix *f = engines(state);
	assert_non_null(f);
	tl_hold(f->ls, LLC_ADD_LINK_CONT, false, 1);
	assert_true(tl_connect(f, 0));
	struct dev_qp *held = f->ls->held;
	assert_non_null(held);
	assert_ptr_equal(held, lk(f->se, 0)->qp);
	uint64_t t = f->now;
	cut_qp(held);
	tl_at(f, t + LOOPDEV_TIMEOUT_NS);
	assert_null(tl_lg(f->se));
	char b[4];
	core_conn_tcp_event(f->pp[0].srv, true, f->now);
	assert_int_equal(smcr_err_errno((int)rcv(f->pp[0].srv, b, sizeof(b), 0)), ECONNRESET);
}

static void test_both_down(void **state)
{
	struct tl_fix *f = *state;
	uint64_t t = f->now + 1;
	tl_at(f, t);
	cut(lk(f->ce, 0));
	cut(lk(f->ce, 1));
	assert_int_equal(snd(f->pp[0].cli, "a", 1, 0), 1);
	assert_int_equal(snd(f->pp[1].cli, "b", 1, 0), 1);
	tl_at(f, t + LOOPDEV_TIMEOUT_NS);
	assert_null(tl_lg(f->ce));	/* no link left: the group ended */
	for (int i = 0; i < 2; i++) {
		/* their bytes never arrived: reset at once (close.c), as TCP's ECONNRESET */
		assert_int_equal(smcr_err_errno((int)snd(f->pp[i].cli, "c", 1, 0)), ECONNRESET);
	}
	/* the server finds out by TEST LINK (30 s without receipt, then the transport error on
	 * one link, then on the other, where the failover had gone) */
	uint64_t bound = t + CORE_TESTLINK_NS + 2 * LOOPDEV_TIMEOUT_NS;
	while (f->now < bound && tl_lg(f->se))
		tl_at(f, f->now + 100 * TL_MS);
	assert_null(tl_lg(f->se));
	char b[4];
	for (int i = 0; i < 2; i++) {
		core_conn_tcp_event(f->pp[i].srv, true, f->now);
		assert_int_equal(smcr_err_errno((int)rcv(f->pp[i].srv, b, sizeof(b), 0)), ECONNRESET);
	}
}

/* The surviving link fails too while the failover's bytes are still in flight on it: no
 * link is left, the group ends, the connections are reset (none hangs). */
static void test_second_failure(void **state)
{
	struct tl_fix *f = *state;
	struct core_conn *c = f->pp[1].cli;
	uint64_t t = f->now + 1;
	tl_at(f, t);
	cut(lk(f->ce, 1));
	uint8_t buf[20000];
	cp_stream_fill(buf, 0, sizeof(buf), 3);
	assert_int_equal(snd(c, buf, sizeof(buf), 0), 20000);
	struct loopdev_path p = { .hold = true };
	loopdev_link_set(lk(f->ce, 0)->qp, &p);	/* link 1 goes quiet first */
	tl_at(f, t + LOOPDEV_TIMEOUT_NS);
	assert_int_equal(tl_links(f->ce), 1);	/* failed over, bytes queued on link 1 */
	assert_true(loopdev_queued(lk(f->ce, 0)->qp) > 0);
	uint64_t t2 = f->now + 1;
	tl_at(f, t2);
	cut(lk(f->ce, 0));
	tl_at(f, t2 + LOOPDEV_TIMEOUT_NS);
	assert_null(tl_lg(f->ce));
	assert_int_equal(smcr_err_errno((int)snd(c, "x", 1, 0)), ECONNRESET);
	/* pp[0] had nothing unconfirmed: its end is its TCP connection's (close.c, as a peer
	 * lost with its link): the reset the socket layer passes on */
	struct core_conn_info in;
	core_conn_info(f->pp[0].cli, &in);
	assert_true(in.lost_wait);
	core_conn_tcp_event(f->pp[0].cli, true, f->now);
	char b[4];
	assert_int_equal(smcr_err_errno((int)rcv(f->pp[0].cli, b, sizeof(b), 0)), ECONNRESET);
}

static void test_rkey_on_failed_link(void **state)
{
	struct tl_fix *f = *state;
	struct core_link *s1 = lk(f->se, 0), *s2 = lk(f->se, 1);
	assert_true(tl_connect(f, 2));	/* link 1 (the server alternates) */
	/* the next connection goes on link 2; the server's CONFIRM RKEY for its new RMB (sent
	 * before its Accept) waits on that path, which is then cut */
	tl_hold(f->ls, LLC_CONFIRM_RKEY, false, 1);
	unsigned sf = f->ls->n;
	struct cp_pair *p = &f->pp[3];
	memset(p, 0, sizeof(*p));
	p->now = f->now;
	p->ce = f->ce;
	p->se = f->se;
	struct core_conn_params cpar, spar;
	cp_conn_params(&cpar, CORE_CLIENT, 0);
	cp_conn_params(&spar, CORE_SERVER, 0);
	assert_int_equal(core_conn_new(f->ce, &cpar, &p->cli), 0);
	assert_int_equal(core_conn_new(f->se, &spar, &p->srv), 0);
	f->npp = 4;
	for (int i = 0; i < 20; i++)
		cp_round(p);
	assert_ptr_equal(p->srv->link, s2);
	assert_int_equal(p->rs.status, CORE_CLC_WAIT_LINK);
	int i = tl_next(f->ls, &sf, LLC_CONFIRM_RKEY, 0);
	assert_ptr_equal(f->ls->ev[i].link, s2);
	assert_non_null(f->ls->held);
	cut(s2);
	p->now = f->now + LOOPDEV_TIMEOUT_NS;
	for (int k = 0; k < 20 && !(p->cli_done && p->srv_done); k++)
		cp_round(p);
	f->now = p->now;
	assert_int_equal(tl_links(f->se), 1);
	/* asked again on link 1, answered: the handshake ends in SMC-R on both ends */
	i = tl_next(f->ls, &sf, LLC_CONFIRM_RKEY, 0);
	assert_true(i >= 0);
	assert_ptr_equal(f->ls->ev[i].link, s1);
	assert_int_equal(p->rs.status, CORE_CLC_SMC);
	assert_int_equal(p->rc.status, CORE_CLC_SMC);
	assert_ptr_equal(p->srv->link, s1);
	assert_int_equal(tl_move(f, p->cli, p->srv, 0, 100000, 93), 100000);
	assert_int_equal(tl_move(f, p->srv, p->cli, 0, 100000, 94), 100000);
}

static void test_forward_to_cons(void **state)
{
	struct tl_fix *f = *state;
	struct core_conn *c = f->pp[1].cli, *s = f->pp[1].srv;
	struct core_link *c1 = lk(f->ce, 0), *c2 = lk(f->ce, 1);
	assert_ptr_equal(c->link, c2);
	const uint32_t size = c->peer_size;
	const size_t total = (size_t)size + 5000;
	uint8_t *buf = malloc(total), *got = malloc(total);
	assert_non_null(buf);
	assert_non_null(got);
	cp_stream_fill(buf, 0, total, 91);
	/* 10000 bytes go through and complete */
	assert_int_equal(snd(c, buf, 10000, 0), 10000);
	tl_at(f, f->now + 1);
	uint16_t fin_seq = c->tx_fin_seq;
	assert_int_equal(c->tx_fin_prod, 10000);
	size_t n = 0;
	drain(f, s, got, &n, 10000);
	assert_int_equal(n, 10000);
	/* the client's ACKs on link 2 are lost from now on (its QP's path only: the server's
	 * CDCs to it still arrive); it fills the peer's RMBE, which the server reads whole */
	struct loopdev_path na = { .noack = true };
	loopdev_path_set(c2->qp, &na);
	size_t sent = 10000;
	while (sent < (size_t)size) {
		long k = snd(c, buf + sent, size - sent, 0);
		if (k > 0)
			sent += (size_t)k;
		tl_at(f, f->now + 1);
		drain(f, s, got, &n, sent);
	}
	drain(f, s, got, &n, size);
	assert_int_equal(n, size);
	tl_at(f, f->now + 1);
	/* the server's consumer cursor came back; no completion did */
	assert_int_equal(c->tx_peer_cons, size);
	assert_int_equal(c->tx_fin_prod, 10000);
	assert_int_equal(c->tx_fin_seq, fin_seq);
	/* 5000 more, delivered too (still no ACK) */
	assert_int_equal(snd(c, buf + size, 5000, 0), 5000);
	tl_at(f, f->now + 1);
	drain(f, s, got, &n, total);
	assert_int_equal(n, total);
	assert_int_equal(c->tx_prod, total);
	/* link 2 goes: its unacknowledged WRs end with RETRY_EXC after the transport timeout */
	unsigned cf = f->lc->n;
	uint64_t t = f->now + 1;
	tl_at(f, t);
	cut(c2);
	tl_at(f, t + LOOPDEV_TIMEOUT_NS);
	assert_int_equal(tl_links(f->ce), 1);
	assert_ptr_equal(c->link, c1);
	/* the validation CDC names the last completed CDC, then only the 5000 bytes after the
	 * peer's consumer cursor are written again, at their offset (size mod size: 0) */
	int i = tl_next(f->lc, &cf, CDC_TYPE, -1);
	struct cdc_msg m = cdc_at(f->lc, i);
	assert_ptr_equal(f->lc->ev[i].link, c1);
	assert_true(m.pf.failover);
	assert_int_equal(m.seqno, fin_seq);
	uint32_t wrote = 0;
	uint64_t first_addr = 0;
	for (unsigned k = (unsigned)i + 1; k < f->lc->n; k++) {
		const struct tl_ev *x = &f->lc->ev[k];
		if (x->kind == CORE_TRACE_WRITE && x->rkey == c->peer_rkey) {
			assert_ptr_equal(x->link, c1);
			if (!wrote)
				first_addr = x->addr;
			wrote += x->len;
		}
	}
	assert_int_equal(wrote, 5000);
	assert_int_equal(first_addr, c->peer_vaddr);
	i = tl_next(f->lc, &cf, CDC_TYPE, -1);
	m = cdc_at(f->lc, i);
	assert_false(m.pf.failover);
	assert_int_equal(m.prod.count, total % size);
	assert_int_equal(m.prod.wrap, total / size);
	/* the server has every byte once: nothing new arrives from the bytes written again */
	tl_at(f, f->now + 1);
	assert_int_equal(rcv(s, got, 1, 0), -SMCR_E_AGAIN);
	assert_int_equal(cp_stream_check(got, 0, total, 91), -1);
	assert_int_equal(s->mode, CORE_MODE_SMC);
	assert_int_equal(tl_move(f, c, s, total, 100000, 91), 100000);
	assert_int_equal(tl_move(f, s, c, 0, 100000, 92), 100000);
	free(buf);
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_basic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_urgent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_testlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_noslot, setup, teardown),
		cmocka_unit_test_teardown(test_in_add_link, teardown),
		cmocka_unit_test_teardown(test_old_link_in_add_link, teardown),
		cmocka_unit_test_setup_teardown(test_both_down, setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forward_to_cons, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rkey_on_failed_link, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
