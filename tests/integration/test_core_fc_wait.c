/* test_core_fc_wait.c: a server holds a Proposal back while the same peer's first contact
 * is in progress (src/core/handshake.c on_proposal; docs/protocol/procedures.md 2.5), so concurrent
 * handshakes of one client (the accept queue runs them at once, docs/parts/connect.md)
 * share one link group instead of making a second.
 *
 * Two connections between the same two engines: the first goes as far as its CONFIRM LINK
 * exchange (server LG in SETUP); the second's Proposal is then neither consumed nor
 * answered; when the first contact completes the second is woken (CORE_EV_CLC), reuses
 * the LG (an Accept without first contact) and both engines hold one LG. Time is passed in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/core_pair.h"
#include "wire/clc.h"

static unsigned clc_raised;

static void evcb(void *ctx, struct core_conn *c, unsigned level, unsigned raised)
{
	(void)ctx;
	(void)c;
	(void)level;
	if (raised & CORE_EV_CLC)
		clc_raised++;
}

struct msg {
	uint8_t b[CLC_MSG_MAX_LEN];
	size_t n;
};

static void step(struct core_conn *c, const struct msg *in, uint64_t now,
		 struct core_clc_result *r, struct msg *out)
{
	assert_int_equal(core_conn_clc_step(c, in ? in->b : NULL, in ? in->n : 0, false, now, r),
			 0);
	if (out) {
		assert_true(r->out_len <= sizeof(out->b));
		memcpy(out->b, r->out, r->out_len);
		out->n = r->out_len;
	}
}

static void progress(struct core_engine *a, struct core_engine *b, uint64_t now, int n)
{
	for (int i = 0; i < n; i++) {
		(void)core_engine_progress(a, now, NULL);
		(void)core_engine_progress(b, now, NULL);
	}
}

static void test_second_proposal_waits_for_first_contact(void **state)
{
	(void)state;
	struct core_engine *ce = cp_engine(NULL, NULL), *se = cp_engine(NULL, NULL);
	assert_non_null(ce);
	assert_non_null(se);
	struct core_conn_params cp, sp;
	cp_conn_params(&cp, CORE_CLIENT, 0);
	cp_conn_params(&sp, CORE_SERVER, 0);
	struct core_conn *c1, *s1, *c2, *s2;
	assert_int_equal(core_conn_new(ce, &cp, &c1), 0);
	assert_int_equal(core_conn_new(se, &sp, &s1), 0);
	uint64_t now = 1000000;
	struct core_clc_result r;
	struct msg p1, a1, f1, p2, a2, f2;

	/* the first connection up to its CONFIRM LINK exchange */
	step(c1, NULL, now, &r, &p1);
	step(s1, &p1, now, &r, &a1);
	assert_int_equal(r.consumed, p1.n);
	struct clc_msg m;
	assert_int_equal(clc_decode(a1.b, a1.n, &m), 0);
	assert_true(m.accept.first_contact);
	step(c1, &a1, now, &r, &f1);
	step(s1, &f1, now, &r, NULL);
	assert_int_equal(r.status, CORE_CLC_WAIT_LINK);

	/* the second, from the same client engine: its Proposal is held back */
	sp.cb = evcb;
	assert_int_equal(core_conn_new(ce, &cp, &c2), 0);
	assert_int_equal(core_conn_new(se, &sp, &s2), 0);
	step(c2, NULL, now, &r, &p2);
	assert_true(p2.n > 0);
	step(s2, &p2, now, &r, &a2);
	assert_int_equal(r.status, CORE_CLC_NEED_INPUT);
	assert_int_equal(r.consumed, 0);
	assert_int_equal(a2.n, 0);
	struct core_engine_stats st;
	core_engine_stats(se, &st);
	assert_int_equal(st.lgs, 1); /* no second LG */

	/* the first contact completes: the held Proposal is woken */
	clc_raised = 0;
	struct core_clc_result rc = { .status = CORE_CLC_WAIT_LINK };
	for (int i = 0; i < 50 && r.status != CORE_CLC_SMC; i++) {
		now += 1000;
		progress(ce, se, now, 2);
		if (rc.status != CORE_CLC_SMC)
			step(c1, NULL, now, &rc, NULL);
		step(s1, NULL, now, &r, NULL);
	}
	assert_int_equal(r.status, CORE_CLC_SMC);
	progress(ce, se, now, 2);
	assert_true(clc_raised >= 1);

	/* the second now reuses the LG (a new RMB: CONFIRM RKEY first, then the Accept) */
	step(s2, &p2, now, &r, &a2);
	assert_int_equal(r.consumed, p2.n);
	for (int i = 0; i < 50 && a2.n == 0; i++) {
		now += 1000;
		progress(ce, se, now, 2);
		step(s2, NULL, now, &r, &a2);
	}
	assert_int_equal(clc_decode(a2.b, a2.n, &m), 0);
	assert_int_equal(m.type, CLC_ACCEPT);
	assert_false(m.accept.first_contact);
	step(c2, &a2, now, &r, &f2);
	for (int i = 0; i < 50 && f2.n == 0; i++) { /* the client's CONFIRM RKEY, then Confirm */
		now += 1000;
		progress(ce, se, now, 2);
		step(c2, NULL, now, &r, &f2);
	}
	assert_int_equal(r.status, CORE_CLC_SMC);
	step(s2, &f2, now, &r, NULL);
	assert_int_equal(r.status, CORE_CLC_SMC);
	core_engine_stats(se, &st);
	assert_int_equal(st.lgs, 1);
	core_engine_stats(ce, &st);
	assert_int_equal(st.lgs, 1);

	core_conn_release(c1, now);
	core_conn_release(s1, now);
	core_conn_release(c2, now);
	core_conn_release(s2, now);
	core_engine_free(ce);
	core_engine_free(se);
}

/* The first contact dies instead: the held Proposal goes on and makes its own LG. */
static void test_held_proposal_after_first_contact_dies(void **state)
{
	(void)state;
	struct core_engine *ce = cp_engine(NULL, NULL), *se = cp_engine(NULL, NULL);
	assert_non_null(ce);
	assert_non_null(se);
	struct core_conn_params cp, sp;
	cp_conn_params(&cp, CORE_CLIENT, 0);
	cp_conn_params(&sp, CORE_SERVER, 0);
	struct core_conn *c1, *s1, *c2, *s2;
	assert_int_equal(core_conn_new(ce, &cp, &c1), 0);
	assert_int_equal(core_conn_new(se, &sp, &s1), 0);
	uint64_t now = 1000000;
	struct core_clc_result r;
	struct msg p1, a1, p2, a2;
	step(c1, NULL, now, &r, &p1);
	step(s1, &p1, now, &r, &a1);	/* server LG in SETUP, waiting for the Confirm */
	sp.cb = evcb;
	now += 1000000000ull; /* a second later: its own CLC wait ends after the first's */
	assert_int_equal(core_conn_new(ce, &cp, &c2), 0);
	assert_int_equal(core_conn_new(se, &sp, &s2), 0);
	step(c2, NULL, now, &r, &p2);
	step(s2, &p2, now, &r, &a2);
	assert_int_equal(r.consumed, 0);
	/* the first client never sends its Confirm: the server's CLC wait (6 s) ends it */
	clc_raised = 0;
	now += CORE_CLC_WAIT_NS - 1000000000ull + 1;
	step(s1, NULL, now, &r, NULL);
	assert_int_equal(r.status, CORE_CLC_FAILED);
	progress(ce, se, now, 2);
	now += 10 * 1000000ull; /* the held Proposal's re-check */
	progress(ce, se, now, 2);
	assert_true(clc_raised >= 1);
	step(s2, &p2, now, &r, &a2);
	assert_int_equal(r.consumed, p2.n);
	struct clc_msg m;
	assert_int_equal(clc_decode(a2.b, a2.n, &m), 0);
	assert_int_equal(m.type, CLC_ACCEPT);
	assert_true(m.accept.first_contact);
	core_conn_release(c1, now);
	core_conn_release(s1, now);
	core_conn_release(c2, now);
	core_conn_release(s2, now);
	core_engine_free(ce);
	core_engine_free(se);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_second_proposal_waits_for_first_contact),
		cmocka_unit_test(test_held_proposal_after_first_contact_dies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
