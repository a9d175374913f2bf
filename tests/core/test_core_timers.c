/* test_core_timers.c: the engine's timers live on one deadline heap per engine (timer.h),
 * so idle connections cost nothing: with 200 connections open and quiet, each engine holds
 * exactly one armed timer (the LG's: TEST LINK, docs/protocol/procedures.md 3.5) and progress does
 * no work at all between deadlines; the TEST LINK then goes out at 30 s of silence and is
 * answered (the link stays up, data still flows); a released connection whose peer never
 * closes waits close_wait_ns (docs/protocol/procedures.md 5.2) and then leaves its LG, on its own
 * timer. Two engines in one process on the loop provider, fake clock. */
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
#include "util/err.h"

#define N_CONNS 200
#define SEC 1000000000ull

struct fix {
	struct core_engine *ce, *se;
	struct cp_pair pp[N_CONNS];
	uint64_t now;
};

static size_t armed(struct core_engine *e)
{
	pthread_mutex_lock(&e->lock);
	size_t n = e->timers.n;
	pthread_mutex_unlock(&e->lock);
	return n;
}

static int progress_both(struct fix *f, uint64_t now)
{
	return core_engine_progress(f->ce, now, NULL) + core_engine_progress(f->se, now, NULL);
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (cp_engines("loop", &f->ce, &f->se))
		return -1;
	f->now = 1 * SEC;
	for (int i = 0; i < N_CONNS; i++) {
		f->pp[i].now = f->now;
		if (!cp_connect_smc(&f->pp[i], f->ce, f->se))
			return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	for (int i = 0; i < N_CONNS; i++)
		cp_release(&f->pp[i]);
	cp_engines_free(f->ce, f->se);
	free(f);
	return 0;
}

static void xfer(struct fix *f, int i, uint64_t now)
{
	uint8_t s[512], r[512];
	cp_fill(s, sizeof(s), (uint64_t)i + now);
	f->pp[i].now = now;
	assert_int_equal(cp_pump(&f->pp[i], f->pp[i].cli, f->pp[i].srv, s, sizeof(s), r, sizeof(r)),
			 (long)sizeof(s));
	assert_memory_equal(s, r, sizeof(s));
}

static void test_idle_costs_nothing(void **state)
{
	struct fix *f = *state;
	uint32_t lg = 0;
	for (int i = 0; i < N_CONNS; i++) {
		struct core_conn_info ci;
		core_conn_info(f->pp[i].cli, &ci);
		assert_int_equal(ci.mode, CORE_MODE_SMC);
		if (!lg)
			lg = ci.lg_id;
		assert_int_equal(ci.lg_id, lg);	/* one LG, one link */
	}
	/* past every handshake wait (CLC 6 s): the timers armed for them ran once and are
	 * gone; what is left is the LG's TEST LINK timer on each side */
	uint64_t t = f->now + 7 * SEC;
	progress_both(f, t);
	assert_int_equal(armed(f->ce), 1);
	assert_int_equal(armed(f->se), 1);
	/* quiet until the link has been silent for 30 s: no timer runs, nothing is done */
	for (uint64_t s = 8; s < 30; s++)
		assert_int_equal(progress_both(f, f->now + s * SEC), 0);
	uint64_t next = 0;
	core_engine_progress(f->ce, f->now + 29 * SEC, &next);
	assert_true(next > f->now + 29 * SEC && next <= f->now + 31 * SEC);
	/* TEST LINK sent and answered: work on both sides, the link stays up */
	uint64_t t31 = f->now + 31 * SEC;
	int work = 0;
	for (int k = 0; k < 5; k++)
		work += progress_both(f, t31);
	assert_true(work >= 2);	/* the TEST LINK timer ran, the request and answer came */
	struct core_engine_stats st;
	core_engine_stats(f->ce, &st);
	assert_int_equal(st.lgs, 1);
	assert_int_equal(armed(f->ce), 1);
	/* the 2 s answer wait passed without a link down: every connection still works */
	uint64_t t34 = f->now + 34 * SEC;
	progress_both(f, t34);
	for (int i = 0; i < N_CONNS; i += 37)
		xfer(f, i, t34);
	core_engine_stats(f->ce, &st);
	assert_int_equal(st.lgs, 1);
}

/* A connection released after its C with a peer that never closes: it waits close_wait_ns
 * (30 s) on its own timer, then leaves the LG; the other connections are untouched. */
static void test_close_wait_on_its_timer(void **state)
{
	struct fix *f = *state;
	uint64_t t = f->now + 1 * SEC;
	struct cp_pair *p = &f->pp[5];
	p->now = t;
	core_conn_close(p->cli, false, t);
	core_conn_release(p->cli, t);
	p->cli = NULL;
	progress_both(f, t);
	assert_int_equal(core_engine_close_waits(f->ce), 1);
	progress_both(f, t + 29 * SEC);
	assert_int_equal(core_engine_close_waits(f->ce), 1);
	progress_both(f, t + 30 * SEC + 1);
	assert_int_equal(core_engine_close_waits(f->ce), 0);
	/* the peer's side still reads the EOF the C brought */
	char b[4];
	struct iovec r = { b, sizeof(b) };
	assert_int_equal(core_conn_recv(p->srv, &r, 1, 0), 0);
	xfer(f, 6, t + 30 * SEC + 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_idle_costs_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_wait_on_its_timer, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
