/* test_core_quietc.c: the quiet final C (core close.c "Quiet final C"; docs/parts/connect.md
 * "Close"), two engines in one process, no threads, time passed in:
 *  - the server closes first (its C is solicited: a sleeping client is woken), the client
 *    then closes: its C, the final one, is sent unsolicited on a software device, so the
 *    server's CQ, armed for solicited completions as a sleeping progress thread leaves it,
 *    gets no event; the server's connection waits (core_engine_close_waits 1) until a poll
 *    takes the C, then it is released;
 *  - with close_solicited (the switch, $SMCR_CLOSE_SOLICITED) the same C wakes it;
 *  - the first C of a close (the peer has not closed) is always solicited: the client's CQ
 *    gets its event.
 * On $SMCR_TEST_DEV (loop by default, shm when set): both are software devices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <stdbool.h>
#include <string.h>

#include "lib/core_pair.h"

/* Whether e's CQ fds show an event (a sleeper on them would wake). */
static bool cq_event(struct core_engine *e)
{
	int fds[8];
	int n = core_engine_cq_fds(e, fds, 8);
	assert_true(n > 0);
	struct pollfd p[8];
	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	return poll(p, (nfds_t)n, 0) > 0;
}

/* Leaves e as a sleeping progress thread does: all work done, CQs armed (solicited only,
 * nobody waits for a send completion), no event pending. */
static void arm(struct cp_pair *pp, struct core_engine *e)
{
	for (int i = 0; i < 20; i++) {
		cp_progress(pp, 1);
		if (core_engine_prepare_sleep(e) == 0 && !cq_event(e))
			return;
	}
	fail_msg("the engine never became ready to sleep");
}

static unsigned conn_count(struct core_engine *e)
{
	struct core_engine_stats st;
	core_engine_stats(e, &st);
	return st.conns;
}

static void run(bool solicited)
{
	struct core_engine_params p;
	memset(&p, 0, sizeof(p));
	p.close_solicited = solicited;
	struct core_engine *ce = cp_engine(NULL, &p), *se = cp_engine(NULL, &p);
	assert_non_null(ce);
	assert_non_null(se);
	struct cp_pair pp = { 0 };
	assert_true(cp_connect_smc(&pp, ce, se));

	/* the server closes first: a C the sleeping client is woken for */
	arm(&pp, ce);
	core_conn_close(pp.srv, false, pp.now);
	assert_true(cq_event(ce));
	assert_int_equal(core_engine_close_waits(se), 1);
	cp_progress(&pp, 2);
	assert_true(core_conn_events(pp.cli) & CORE_EV_RDHUP);
	assert_int_equal(core_engine_close_waits(ce), 0); /* the client's program has not closed */

	/* the client closes: the final C */
	arm(&pp, se);
	core_conn_close(pp.cli, false, pp.now);
	assert_int_equal(core_engine_close_waits(ce), 0); /* its exchange is complete */
	struct core_conn_info ci;
	core_conn_info(pp.cli, &ci);
	assert_false(ci.close_wait);
	assert_string_equal(ci.state, "CLOSED");
	assert_int_equal(cq_event(se), solicited); /* quiet: no wake-up at the server */
	core_conn_info(pp.srv, &ci);
	assert_true(ci.close_wait); /* not taken yet */
	assert_int_equal(core_engine_close_waits(se), 1);

	/* the server's next poll takes it (a spin, a progress turn, the reaper) */
	assert_true(core_engine_progress(se, pp.now, NULL) > 0);
	assert_int_equal(core_engine_close_waits(se), 0);
	core_conn_info(pp.srv, &ci);
	assert_false(ci.close_wait);
	assert_string_equal(ci.state, "CLOSED");
	cp_release(&pp);
	cp_progress(&pp, 2);
	assert_int_equal(conn_count(se), 0);
	assert_int_equal(conn_count(ce), 0);
	core_engine_free(ce);
	core_engine_free(se);
}

static void test_quiet_final_c(void **state)
{
	(void)state;
	run(false);
}

static void test_solicited_final_c(void **state)
{
	(void)state;
	run(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quiet_final_c),
		cmocka_unit_test(test_solicited_final_c),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
