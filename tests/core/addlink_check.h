/* addlink_check.h: the checks both ADD LINK flows' tests (v1: test_core_addlink.c, v2:
 * test_core_addlink_v2.c) end with. Include after cmocka.h and lib/twolink.h. */
#ifndef SMCR_TESTS_CORE_ADDLINK_CHECK_H
#define SMCR_TESTS_CORE_ADDLINK_CHECK_H

/* The link in slot `slot` of engine e's one link group. */
static inline struct core_link *lk(struct core_engine *e, int slot)
{
	struct core_lgr *lg = tl_lg(e);
	assert_non_null(lg);
	return lg->links[slot];
}

/* The flow is over and the second links (s1 at the server, c1 at the client) joined: both
 * active with crossed QPNs, no flow running, and each side holds the other's first RMB
 * (s0's, c0's) on both links, with the second link's RKey. */
static inline void assert_links_joined(struct core_lgr *slg, struct core_lgr *clg,
				       struct core_link *s0, struct core_link *s1,
				       struct core_link *c0, struct core_link *c1)
{
	assert_int_equal(s1->state, CORE_LINK_ACTIVE);
	assert_int_equal(c1->state, CORE_LINK_ACTIVE);
	assert_int_equal(s1->peer_qpn, c1->qp->qp_num);
	assert_int_equal(c1->peer_qpn, s1->qp->qp_num);
	assert_int_equal(slg->flow, CORE_FLOW_NONE);
	assert_int_equal(clg->flow, CORE_FLOW_NONE);
	int t = lgr_rtoken_find(clg, 0, lgr_rmb_mr(slg->rmbs, s0)->rkey);
	assert_true(t >= 0);
	assert_int_equal(clg->rtok[t].links, 3);
	assert_int_equal(clg->rtok[t].rkey[1], lgr_rmb_mr(slg->rmbs, s1)->rkey);
	t = lgr_rtoken_find(slg, 0, lgr_rmb_mr(clg->rmbs, c0)->rkey);
	assert_true(t >= 0);
	assert_int_equal(slg->rtok[t].links, 3);
	assert_int_equal(slg->rtok[t].rkey[1], lgr_rmb_mr(clg->rmbs, c1)->rkey);
}

#endif
