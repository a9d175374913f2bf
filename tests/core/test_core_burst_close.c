/* test_core_burst_close.c: many connections of one link group closed back to back
 * (docs/protocol/procedures.md 5.1; close.c close_finished_locked). A link has CORE_SEND_SLOTS send
 * slots; a close whose C finds none is marked sent (CL_SENT_C) but goes out only when a
 * slot frees (tx.c wake_one walks the LG's slots). The connection must stay in its LG
 * until then: once detached it is out of that walk and its C is never sent, and the peer
 * holds the connection and its RMB for close_wait_ns (found with smcr-perf's conns test:
 * 1000 closes left ~890 of the server's connections waiting, and the next round made
 * new link groups).
 *
 * Two engines in one process, fake clock that never advances (so no close_wait_ns timer
 * can end a connection): the server closes all N connections (its Cs exceed the slots as
 * well), the client reads the Cs, then closes all N without progress in between. After
 * progress on both, every connection on both sides must be CLOSED and out of its LG, with
 * no abort. Runs on the loop provider and on shm. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/core_pair.h"
#include "util/err.h"

/* Well above the send slots (16) and the LLC reserve, below one LG's 255 connections. */
#define N_CONNS 60

struct fix {
	struct core_engine *ce, *se;
	struct cp_pair pp[N_CONNS];
};

static struct core_conn_info info(struct core_conn *c)
{
	struct core_conn_info i;
	core_conn_info(c, &i);
	return i;
}

static int setup_spec(void **state, const char *spec)
{
	struct fix *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (cp_engines(spec, &f->ce, &f->se))
		return -1;
	for (int i = 0; i < N_CONNS; i++)
		if (!cp_connect_smc(&f->pp[i], f->ce, f->se))
			return -1;
	*state = f;
	return 0;
}

static int setup_loop(void **state) { return setup_spec(state, "loop"); }
static int setup_shm(void **state) { return setup_spec(state, "shm"); }

static int teardown(void **state)
{
	struct fix *f = *state;
	for (int i = 0; i < N_CONNS; i++)
		cp_release(&f->pp[i]);
	cp_engines_free(f->ce, f->se);
	free(f);
	return 0;
}

static void progress(struct fix *f, int n)
{
	cp_progress(&f->pp[0], n);	/* progresses both engines */
}

static void test_burst_close(void **state)
{
	struct fix *f = *state;
	uint32_t lg = info(f->pp[0].cli).lg_id;
	assert_int_not_equal(lg, 0);
	for (int i = 0; i < N_CONNS; i++) {
		assert_int_equal(info(f->pp[i].cli).lg_id, lg);	/* one LG, one link */
		assert_int_equal(info(f->pp[i].cli).mode, CORE_MODE_SMC);
	}

	/* the server closes first, back to back: its Cs wait for slots too */
	for (int i = 0; i < N_CONNS; i++)
		core_conn_close(f->pp[i].srv, false, f->pp[i].now);
	progress(f, 20);
	for (int i = 0; i < N_CONNS; i++) {
		char b[4];
		struct iovec r = { b, sizeof(b) };
		assert_int_equal(core_conn_recv(f->pp[i].cli, &r, 1, 0), 0);	/* EOF: C seen */
	}

	/* the client closes all without progress in between: most Cs find no slot */
	for (int i = 0; i < N_CONNS; i++)
		core_conn_close(f->pp[i].cli, false, f->pp[i].now);
	progress(f, 20);

	for (int i = 0; i < N_CONNS; i++) {
		struct core_conn_info c = info(f->pp[i].cli), s = info(f->pp[i].srv);
		if (s.close_wait || c.close_wait)
			fprintf(stderr, "conn %d: server %s close_wait %d; client %s close_wait %d\n",
				i, s.state, s.close_wait, c.state, c.close_wait);
		assert_string_equal(c.state, "CLOSED");
		assert_string_equal(s.state, "CLOSED");
		assert_false(c.close_wait);
		assert_false(s.close_wait);
		assert_int_equal(c.tcp_action, CORE_TCP_SHUTDOWN);	/* closed, not aborted */
		assert_int_equal(s.tcp_action, CORE_TCP_SHUTDOWN);
	}
	/* both engines see the exchange complete: nothing left for the close reaper */
	assert_int_equal(core_engine_close_waits(f->ce), 0);
	assert_int_equal(core_engine_close_waits(f->se), 0);
	/* every connection left the LG on both sides (RMBs back in the pool) */
	struct core_engine_stats st0, st1, ss;
	core_engine_stats(f->ce, &st0);
	core_engine_stats(f->se, &ss);
	assert_int_equal(st0.lgs, 1);
	assert_int_equal(st0.lgs_idle, 1);
	assert_int_equal(ss.lgs, 1);
	assert_int_equal(ss.lgs_idle, 1);
	/* and the LG is reused by the next connection (no first contact) */
	struct cp_pair extra;
	memset(&extra, 0, sizeof(extra));
	assert_true(cp_connect_smc(&extra, f->ce, f->se));
	core_engine_stats(f->ce, &st1);
	assert_int_equal(st1.lgs_created, st0.lgs_created);
	assert_int_equal(info(extra.cli).lg_id, lg);
	cp_release(&extra);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_burst_close, setup_loop, teardown),
		cmocka_unit_test_setup_teardown(test_burst_close, setup_shm, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
