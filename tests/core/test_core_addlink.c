/* test_core_addlink.c: the second link of a link group (docs/protocol/procedures.md 3.2-3.4,
 * docs/FAILOVER.md). Two engines in one process on loop devices, fake clock; every message
 * each engine posts is logged (tests/lib/twolink.h), and each test asserts the exchange
 * exactly: which message, on which QP, with which fields.
 *   symmetric         two devices each: ADD LINK, ADD LINK CONT both ways with the rkeys of
 *                     every RMB on the new device, CONFIRM LINK on the new link; the second
 *                     connection goes on the second link and both carry data
 *   asym_*            one device on one side: the new link shares it
 *   one_dev_each      nothing redundant to build: the client rejects, the LG stays single
 *   timeout_*         each wait of the flow expires (hold rules): the new link is dropped
 *                     on both sides, the LG goes on with one link, late messages are harmless
 *   relink_hint       a device coming up makes the client ask ("please add a link") and
 *                     the server then adds the link
 *   confirm_rkey_all  a new RMB after the second link: CONFIRM RKEY names it on both links */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/twolink.h"
#include "core/addlink_check.h"
#include "util/err.h"
#include "wire/llc.h"

static struct llc_msg dec(const struct tl_log *lg, int i)
{
	struct llc_msg m;
	assert_true(i >= 0);
	assert_int_equal(llc_decode(lg->ev[i].msg, 44, &m), 0);
	return m;
}

/* The exchange of a successful ADD LINK flow in both logs, from the given log positions. */
static void assert_add_link_flow(struct tl_fix *f, unsigned sfrom, unsigned cfrom, uint8_t num)
{
	struct core_link *s0 = lk(f->se, 0), *s1 = lk(f->se, 1);
	struct core_link *c0 = lk(f->ce, 0), *c1 = lk(f->ce, 1);
	assert_non_null(s1);
	assert_non_null(c1);
	struct core_lgr *slg = tl_lg(f->se), *clg = tl_lg(f->ce);
	/* server: ADD LINK request on link 1 naming its new QP */
	int i = tl_next(f->ls, &sfrom, LLC_ADD_LINK, 0);
	struct llc_msg m = dec(f->ls, i);
	assert_ptr_equal(f->ls->ev[i].link, s0);
	assert_int_equal(m.add_link.qpn, s1->qp->qp_num);
	assert_int_equal(m.add_link.link_num, num);
	assert_int_equal(m.add_link.psn, s1->psn);
	assert_memory_equal(m.add_link.gid.b, s1->cdev->gid.gid.raw, 16);
	assert_int_equal(m.add_link.mtu, s1->cdev->port.active_mtu);
	/* client: its response on link 1 naming its new QP */
	i = tl_next(f->lc, &cfrom, LLC_ADD_LINK, 1);
	m = dec(f->lc, i);
	assert_false(m.add_link.rejected);
	assert_ptr_equal(f->lc->ev[i].link, c0);
	assert_int_equal(m.add_link.qpn, c1->qp->qp_num);
	assert_int_equal(m.add_link.link_num, num);
	assert_memory_equal(m.add_link.gid.b, c1->cdev->gid.gid.raw, 16);
	/* server's ADD LINK CONT on link 1: its one RMB, old rkey -> rkey on the new device */
	i = tl_next(f->ls, &sfrom, LLC_ADD_LINK_CONT, 0);
	m = dec(f->ls, i);
	assert_ptr_equal(f->ls->ev[i].link, s0);
	assert_int_equal(m.add_link_cont.link_num, num);
	assert_int_equal(m.add_link_cont.num_rkeys, slg->nrmbs);
	assert_int_equal(m.add_link_cont.rt[0].rkey, lgr_rmb_mr(slg->rmbs, s0)->rkey);
	assert_int_equal(m.add_link_cont.rt[0].rkey_new, lgr_rmb_mr(slg->rmbs, s1)->rkey);
	assert_int_equal(m.add_link_cont.rt[0].vaddr_new,
			 (uint64_t)(uintptr_t)slg->rmbs->mem->addr);
	/* client's answer, a CONT response with its RMB */
	i = tl_next(f->lc, &cfrom, LLC_ADD_LINK_CONT, 1);
	m = dec(f->lc, i);
	assert_ptr_equal(f->lc->ev[i].link, c0);
	assert_int_equal(m.add_link_cont.num_rkeys, clg->nrmbs);
	assert_int_equal(m.add_link_cont.rt[0].rkey, lgr_rmb_mr(clg->rmbs, c0)->rkey);
	assert_int_equal(m.add_link_cont.rt[0].rkey_new, lgr_rmb_mr(clg->rmbs, c1)->rkey);
	/* CONFIRM LINK on the new link, both ways */
	i = tl_next(f->ls, &sfrom, LLC_CONFIRM_LINK, 0);
	m = dec(f->ls, i);
	assert_ptr_equal(f->ls->ev[i].link, s1);
	assert_int_equal(m.confirm_link.link_num, num);
	assert_int_equal(m.confirm_link.qpn, s1->qp->qp_num);
	i = tl_next(f->lc, &cfrom, LLC_CONFIRM_LINK, 1);
	m = dec(f->lc, i);
	assert_ptr_equal(f->lc->ev[i].link, c1);
	assert_int_equal(m.confirm_link.link_num, num);
	/* nothing else of the flow after it */
	assert_int_equal(tl_next(f->ls, &sfrom, LLC_ADD_LINK_CONT, -1), -1);
	assert_int_equal(tl_next(f->lc, &cfrom, LLC_ADD_LINK_CONT, -1), -1);
	/* both links up, and each side knows the other's RMB on both (its RToken for slot 1) */
	assert_links_joined(slg, clg, s0, s1, c0, c1);
}

static int setup22(void **state)
{
	struct tl_fix *f = calloc(1, sizeof(*f));
	if (!f || tl_setup(f, 2, 2))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct tl_fix *f = *state;
	tl_teardown(f);
	free(f);
	return 0;
}

static void test_symmetric(void **state)
{
	struct tl_fix *f = *state;
	assert_true(tl_connect(f, 0));
	assert_int_equal(tl_links(f->se), 2);
	assert_int_equal(tl_links(f->ce), 2);
	assert_add_link_flow(f, 0, 0, 2);
	/* symmetric: each side's links on different devices */
	assert_ptr_not_equal(lk(f->se, 0)->cdev, lk(f->se, 1)->cdev);
	assert_ptr_not_equal(lk(f->ce, 0)->cdev, lk(f->ce, 1)->cdev);
	/* the second connection: the server alternates (docs/protocol/procedures.md 3.4) */
	assert_true(tl_connect(f, 1));
	assert_ptr_equal(f->pp[0].srv->link, lk(f->se, 0));
	assert_ptr_equal(f->pp[1].srv->link, lk(f->se, 1));
	assert_ptr_equal(f->pp[1].cli->link, lk(f->ce, 1));
	struct core_conn_info in;
	core_conn_info(f->pp[1].cli, &in);
	assert_int_equal(in.link_num, 2);
	assert_int_equal(in.lg_links, 2);
	assert_int_equal(in.qpn_local, lk(f->ce, 1)->qp->qp_num);
	/* both links carry data: the WRITEs of each connection go on its own link, into the
	 * peer's RMB by its rkey on that link's device */
	unsigned from = f->lc->n;
	assert_int_equal(tl_move(f, f->pp[0].cli, f->pp[0].srv, 0, 300000, 1), 300000);
	assert_int_equal(tl_move(f, f->pp[1].cli, f->pp[1].srv, 0, 300000, 2), 300000);
	assert_int_equal(tl_move(f, f->pp[1].srv, f->pp[1].cli, 0, 100000, 3), 100000);
	unsigned w0 = 0, w1 = 0;
	for (unsigned i = from; i < f->lc->n; i++) {
		const struct tl_ev *x = &f->lc->ev[i];
		if (x->kind != CORE_TRACE_WRITE)
			continue;
		if (x->link == lk(f->ce, 0)) {
			assert_int_equal(x->rkey, f->pp[0].cli->peer_rkey);
			w0 += x->len;
		} else {
			assert_ptr_equal(x->link, lk(f->ce, 1));
			assert_int_equal(x->rkey, f->pp[1].cli->peer_rkey);
			w1 += x->len;
		}
	}
	assert_int_equal(w0, 300000);
	assert_int_equal(w1, 300000);
	struct core_lgr *slg = tl_lg(f->se);
	assert_int_equal(f->pp[1].cli->peer_rkey, lgr_rmb_mr(f->pp[1].srv->rmb, lk(f->se, 1))->rkey);
	assert_ptr_equal(f->pp[1].srv->lg, slg);
	struct core_engine_stats st;
	core_engine_stats(f->se, &st);
	assert_int_equal(st.links_added, 1);
	assert_int_equal(st.links, 2);
	assert_int_equal(st.failovers, 0);
}

/* A new RMB of a reuse connection in a two-link LG: its CONFIRM RKEY (on the connection's
 * link) names the RMB on the other link too (docs/protocol/wire-formats.md 6.6). */
static void test_confirm_rkey_all(void **state)
{
	struct tl_fix *f = *state;
	assert_true(tl_connect(f, 0));
	assert_int_equal(tl_links(f->ce), 2);
	unsigned cfrom = f->lc->n, sfrom = f->ls->n;
	assert_true(tl_connect(f, 1));	/* needs a new RMB on each side */
	int i = tl_next(f->ls, &sfrom, LLC_CONFIRM_RKEY, 0);
	struct llc_msg m = dec(f->ls, i);
	struct core_conn *s = f->pp[1].srv;
	assert_ptr_equal(f->ls->ev[i].link, s->link);
	assert_int_equal(m.confirm_rkey.rkey, lgr_rmb_mr(s->rmb, s->link)->rkey);
	assert_int_equal(m.confirm_rkey.num_other, 1);
	assert_int_equal(m.confirm_rkey.other[0].link_num, 1);
	assert_int_equal(m.confirm_rkey.other[0].rkey, lgr_rmb_mr(s->rmb, lk(f->se, 0))->rkey);
	i = tl_next(f->lc, &cfrom, LLC_CONFIRM_RKEY, 0);
	m = dec(f->lc, i);
	assert_int_equal(m.confirm_rkey.num_other, 1);
	/* the server learnt the client's new RMB on both links */
	struct core_lgr *slg = tl_lg(f->se);
	int t = lgr_rtoken_find(slg, s->link->slot, s->peer_rkey);
	assert_true(t >= 0);
	assert_int_equal(slg->rtok[t].links, 3);
	assert_int_equal(tl_move(f, f->pp[1].srv, f->pp[1].cli, 0, 50000, 9), 50000);
}

static void asym(struct tl_fix *f, int ncli, int nsrv)
{
	assert_int_equal(tl_setup(f, ncli, nsrv), 0);
	assert_true(tl_connect(f, 0));
	assert_int_equal(tl_links(f->se), 2);
	assert_int_equal(tl_links(f->ce), 2);
	assert_add_link_flow(f, 0, 0, 2);
	struct core_engine *one = ncli == 1 ? f->ce : f->se;
	struct core_engine *two = ncli == 1 ? f->se : f->ce;
	assert_ptr_equal(lk(one, 0)->cdev, lk(one, 1)->cdev);
	assert_ptr_not_equal(lk(two, 0)->cdev, lk(two, 1)->cdev);
	assert_true(tl_connect(f, 1));
	assert_ptr_equal(f->pp[1].cli->link, lk(f->ce, 1));
	assert_int_equal(tl_move(f, f->pp[1].cli, f->pp[1].srv, 0, 200000, 4), 200000);
	assert_int_equal(tl_move(f, f->pp[0].srv, f->pp[0].cli, 0, 200000, 5), 200000);
}

static void test_asym_server_one_dev(void **state)
{
	struct tl_fix *f = calloc(1, sizeof(*f));
	*state = f;
	asym(f, 2, 1);
}

static void test_asym_client_one_dev(void **state)
{
	struct tl_fix *f = calloc(1, sizeof(*f));
	*state = f;
	asym(f, 1, 2);
}

static void test_one_dev_each(void **state)
{
	struct tl_fix *f = calloc(1, sizeof(*f));
	*state = f;
	assert_int_equal(tl_setup(f, 1, 1), 0);
	assert_true(tl_connect(f, 0));
	unsigned s = 0, c = 0;
	int i = tl_next(f->ls, &s, LLC_ADD_LINK, 0);
	struct llc_msg req = dec(f->ls, i);
	/* the server's only device: its offer names link 1's GID and MAC */
	assert_memory_equal(req.add_link.gid.b, lk(f->se, 0)->cdev->gid.gid.raw, 16);
	i = tl_next(f->lc, &c, LLC_ADD_LINK, 1);
	/* the reject: the request echoed, reason 1, 0xC0 (as Linux) */
	uint8_t want[44];
	llc_add_link_reject_raw(f->ls->ev[s - 1].msg, LLC_AL_REJ_NO_ALT_PATH, want);
	assert_memory_equal(f->lc->ev[i].msg, want, 44);
	assert_int_equal(tl_links(f->se), 1);
	assert_int_equal(tl_links(f->ce), 1);
	assert_null(lk(f->se, 1));
	assert_null(lk(f->ce, 1));
	assert_int_equal(tl_lg(f->se)->flow, CORE_FLOW_NONE);
	assert_int_equal(tl_next(f->ls, &s, LLC_ADD_LINK_CONT, -1), -1);
	/* the half-built QP goes once drained */
	tl_at(f, f->now + 3 * TL_SEC);
	assert_null(tl_lg(f->se)->retired);
	assert_true(tl_connect(f, 1));
	assert_int_equal(tl_move(f, f->pp[1].cli, f->pp[1].srv, 0, 100000, 6), 100000);
}

/* The server's wait for the ADD LINK response (2 s) expires: both sides drop the new link;
 * the late response is dropped. */
static void test_timeout_add_link_resp(void **state)
{
	struct tl_fix *f = *state;
	tl_hold(f->lc, LLC_ADD_LINK, true, 1);
	assert_true(tl_connect(f, 0));
	assert_non_null(f->lc->held);
	uint64_t t0 = f->now;
	struct core_lgr *slg = tl_lg(f->se), *clg = tl_lg(f->ce);
	assert_int_equal(slg->al_step, AL_WAIT_RESP);
	assert_int_equal(clg->al_step, AL_WAIT_CONT);
	tl_at(f, t0 + f->se->p.llc_wait_ns - 1);
	assert_int_equal(slg->flow, CORE_FLOW_ADD_LINK);
	tl_at(f, t0 + f->se->p.llc_wait_ns);
	assert_int_equal(slg->flow, CORE_FLOW_NONE);
	assert_int_equal(clg->flow, CORE_FLOW_NONE);
	assert_null(slg->links[1]);
	assert_null(clg->links[1]);
	struct core_engine_stats st0, st1;
	core_engine_stats(f->se, &st0);
	tl_release(f->lc->held);
	tl_at(f, f->now + 1);
	core_engine_stats(f->se, &st1);
	assert_int_equal(st1.llc_rx_dropped, st0.llc_rx_dropped + 1);	/* the late response */
	assert_int_equal(tl_links(f->se), 1);
	assert_int_equal(tl_links(f->ce), 1);
	assert_int_equal(tl_move(f, f->pp[0].cli, f->pp[0].srv, 0, 100000, 7), 100000);
}

/* The waits for the ADD LINK CONT expire (2 s each side): the server tells the client
 * (DELETE LINK for the new link), the late messages change nothing. */
static void test_timeout_cont(void **state)
{
	struct tl_fix *f = *state;
	tl_hold(f->ls, LLC_ADD_LINK_CONT, false, 1);
	assert_true(tl_connect(f, 0));
	assert_non_null(f->ls->held);
	uint64_t t0 = f->now;
	struct core_lgr *slg = tl_lg(f->se), *clg = tl_lg(f->ce);
	assert_int_equal(slg->al_step, AL_WAIT_CONT);
	assert_int_equal(clg->al_step, AL_WAIT_CONT);
	unsigned s = f->ls->n;
	tl_at(f, t0 + f->se->p.llc_wait_ns);
	assert_int_equal(slg->flow, CORE_FLOW_NONE);
	assert_int_equal(clg->flow, CORE_FLOW_NONE);
	int i = tl_next(f->ls, &s, LLC_DELETE_LINK, 0);
	struct llc_msg m = dec(f->ls, i);
	assert_int_equal(m.delete_link.link_num, 2);
	assert_int_equal(m.delete_link.reason, LLC_DEL_LOST_PATH);
	unsigned c = f->lc->n;
	tl_release(f->ls->held);
	tl_at(f, f->now + 1);
	/* the client knows no link 2 any more: "no such link" */
	i = tl_next(f->lc, &c, LLC_DELETE_LINK, 1);
	m = dec(f->lc, i);
	assert_int_equal(m.delete_link.reason, LLC_DEL_NOLNK);
	assert_int_equal(tl_links(f->se), 1);
	assert_int_equal(tl_links(f->ce), 1);
	assert_int_equal(clg->state, CORE_LG_ACTIVE);
	assert_int_equal(tl_move(f, f->pp[0].srv, f->pp[0].cli, 0, 100000, 8), 100000);
}

/* The server's wait for the CONFIRM LINK response on the new link (5 s) expires: it deletes
 * the link, the client (which had it active) answers and drops it too. */
static void test_timeout_confirm(void **state)
{
	struct tl_fix *f = *state;
	tl_hold(f->lc, LLC_CONFIRM_LINK, true, 2);	/* the first is link 1's */
	assert_true(tl_connect(f, 0));
	assert_non_null(f->lc->held);
	uint64_t t0 = f->now;
	struct core_lgr *slg = tl_lg(f->se), *clg = tl_lg(f->ce);
	assert_int_equal(slg->al_step, AL_WAIT_CONFIRM);
	assert_int_equal(tl_links(f->ce), 2);
	tl_at(f, t0 + CORE_AL_CONFIRM_WAIT_NS - 1);
	assert_int_equal(slg->flow, CORE_FLOW_ADD_LINK);
	unsigned s = f->ls->n, c = f->lc->n;
	tl_at(f, t0 + CORE_AL_CONFIRM_WAIT_NS);
	assert_int_equal(slg->flow, CORE_FLOW_NONE);
	int i = tl_next(f->ls, &s, LLC_DELETE_LINK, 0);
	assert_ptr_equal(f->ls->ev[i].link, lk(f->se, 0));
	i = tl_next(f->lc, &c, LLC_DELETE_LINK, 1);
	struct llc_msg m = dec(f->lc, i);
	assert_int_equal(m.delete_link.link_num, 2);
	assert_int_equal(m.delete_link.reason, 0);
	assert_int_equal(tl_links(f->se), 1);
	assert_int_equal(tl_links(f->ce), 1);
	assert_int_equal(clg->state, CORE_LG_ACTIVE);
	/* the held path went with the deleted link's QP (destroyed once drained) */
	tl_at(f, f->now + 3 * TL_SEC);
	assert_null(clg->retired);
	assert_int_equal(tl_move(f, f->pp[0].cli, f->pp[0].srv, 0, 100000, 10), 100000);
}

/* A device comes up again (a port event): the single client asks for a second link with the
 * hint (ADD LINK request, zero QPN/MTU/PSN), the server runs the flow. */
static void test_relink_hint(void **state)
{
	struct tl_fix *f = *state;
	tl_hold(f->lc, LLC_ADD_LINK, true, 1);
	assert_true(tl_connect(f, 0));
	tl_at(f, f->now + f->se->p.llc_wait_ns);
	tl_release(f->lc->held);
	tl_at(f, f->now + 1);
	assert_int_equal(tl_links(f->ce), 1);
	unsigned s = f->ls->n, c = f->lc->n;
	assert_int_equal(dev_set_port_state(f->ce->devs[1].dev, 1, 1), 0);
	tl_at(f, f->now + 1);
	int i = tl_next(f->lc, &c, LLC_ADD_LINK, 0);
	struct llc_msg m = dec(f->lc, i);
	assert_int_equal(m.add_link.qpn, 0);
	assert_int_equal(m.add_link.mtu, 0);
	assert_int_equal(m.add_link.link_num, 0);
	assert_int_equal(tl_links(f->ce), 2);
	assert_int_equal(tl_links(f->se), 2);
	/* link numbers count up (a number just dropped is not reused at once) */
	assert_add_link_flow(f, s, c, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_symmetric, setup22, teardown),
		cmocka_unit_test_setup_teardown(test_confirm_rkey_all, setup22, teardown),
		cmocka_unit_test_teardown(test_asym_server_one_dev, teardown),
		cmocka_unit_test_teardown(test_asym_client_one_dev, teardown),
		cmocka_unit_test_teardown(test_one_dev_each, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_add_link_resp, setup22, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_cont, setup22, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_confirm, setup22, teardown),
		cmocka_unit_test_setup_teardown(test_relink_hint, setup22, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
