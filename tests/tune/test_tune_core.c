/* test_tune_core.c: the engine's data-path mechanisms of docs/parts/tune.md, each
 * asserted on its outcome, two engines in one process (tests/lib/core_pair):
 *   - a reused RMB is all zero when the next connection starts, whether the last one used a
 *     little of it, wrapped it, or ended in a reset (only the used part is cleared now);
 *   - RMBE auto-sizing (core_engine_params.rmbe_auto_max) by the live connection count,
 *     SO_RCVBUF still winning; without it the 64 KiB default;
 *   - an LG whose 255 RMBs are all of another size serves a new connection from a smaller
 *     free one instead of declining (ERR_REGBUF);
 *   - a sender is never refused for want of send slots that are only waiting for their
 *     completions to be polled (shm completes sends at post time);
 *   - the CQ is armed for solicited completions only: our own send completions do not make
 *     the completion fd readable, the peer's CDC does;
 *   - core_engine_spin_begin/end: while a thread spins, the peer's CDCs make no completion fd
 *     readable (no eventfd write, no progress-thread wake-up), the data arrives through
 *     progress, prepare_sleep does not arm, the reported deadline is the spin's grace end;
 *     spin_end arms again and delivers what came meanwhile;
 *   - the lease (core_engine_lease), and the progress thread's stand-back check
 *     core_engine_spin_live. */
#define _GNU_SOURCE
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "core/core_int.h"
#include "lib/core_pair.h"

#define S(x) (x##ull * 1000000000ull)

static long send_n(struct core_conn *c, const void *p, size_t n)
{
	struct iovec v = { (void *)(uintptr_t)p, n };
	return core_conn_send(c, &v, 1, 0);
}

static void pump(struct cp_pair *pp, struct core_conn *tx, struct core_conn *rx, size_t n,
		 uint64_t seed)
{
	uint8_t *s = malloc(n), *r = malloc(n);
	cp_stream_fill(s, 0, n, seed);
	assert_int_equal(cp_pump(pp, tx, rx, s, n, r, 8192), (long)n);
	assert_memory_equal(r, s, n);
	free(s);
	free(r);
}

static void connect_with(struct cp_pair *pp, struct core_engine *ce, struct core_engine *se,
			 uint32_t rcvbuf)
{
	struct core_conn_params cp, sp;
	cp_conn_params(&cp, CORE_CLIENT, rcvbuf);
	cp_conn_params(&sp, CORE_SERVER, rcvbuf);
	assert_int_equal(cp_connect(pp, ce, se, &cp, &sp, 50), 0);
	assert_int_equal(pp->rc.status, CORE_CLC_SMC);
	assert_int_equal(pp->rs.status, CORE_CLC_SMC);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* ---- RMB reuse zeroing ------------------------------------------------------------------ */

static void test_reuse_zeroed(void **state)
{
	(void)state;
	struct core_engine *ce = cp_engine("loop", NULL), *se = cp_engine("loop", NULL);
	assert_non_null(ce);
	assert_non_null(se);
	uint64_t now = S(1);
	const uint8_t *rmbe = NULL;
	/* 1: a little data; 2: the ring wrapped three times; 3: aborted with unread data */
	static const size_t amounts[] = { 1000, 3 * 16384 + 5000, 7000, 0 };
	for (int round = 0; round < 4; round++) {
		struct cp_pair pp = { 0 };
		pp.now = now;
		connect_with(&pp, ce, se, 16384);
		now = pp.now;
		if (round == 0) {
			rmbe = pp.srv->rmbe;
		} else {
			assert_ptr_equal(pp.srv->rmbe, rmbe);	/* the pooled RMB again */
			assert_true(all_zero(pp.srv->rmbe, pp.srv->rmbe_size));
		}
		if (round == 3) {
			cp_close_both(&pp);
			cp_release(&pp);
			break;
		}
		if (round < 2) {
			pump(&pp, pp.cli, pp.srv, amounts[round], 11 + (uint64_t)round);
			cp_close_both(&pp);
		} else {
			/* unread data left: the server closes with A (reset): all of it is dirty */
			uint8_t *b = malloc(amounts[round]);
			memset(b, 0x5a, amounts[round]);
			assert_int_equal(send_n(pp.cli, b, amounts[round]), (long)amounts[round]);
			cp_progress(&pp, 2);
			core_conn_close(pp.srv, false, pp.now);
			cp_progress(&pp, 3);
			core_conn_close(pp.cli, false, pp.now);
			cp_progress(&pp, 3);
			free(b);
		}
		cp_release(&pp);
	}
	core_engine_free(ce);
	core_engine_free(se);
}

/* ---- RMBE auto-sizing ---------------------------------------------------------------------- */

static void test_rmbe_auto(void **state)
{
	(void)state;
	struct core_engine_params ep = { .rmbe_auto_max = CORE_RMBE_AUTO_MAX,
					 .rmbe_auto_budget = 1u << 20 };
	struct core_engine *ce = cp_engine("loop", &ep), *se = cp_engine("loop", &ep);
	assert_non_null(ce);
	assert_non_null(se);
	/* live connections n (the new one included): share = 1 MiB / n, rounded down to a
	 * power of two, within 64 KiB .. 512 KiB */
	static const uint32_t want[] = { 512u << 10, 512u << 10, 256u << 10, 256u << 10,
					 128u << 10, 128u << 10, 128u << 10, 128u << 10 };
	enum { N = 8 };
	struct cp_pair pp[N + 1];
	memset(pp, 0, sizeof(pp));
	uint64_t now = S(1);
	for (int i = 0; i < N; i++) {
		pp[i].now = now;
		connect_with(&pp[i], ce, se, 0);
		now = pp[i].now;
		struct core_conn_info ci;
		core_conn_info(pp[i].cli, &ci);
		assert_int_equal(ci.rmbe_size, want[i]);
		assert_int_equal(ci.peer_rmbe_size, want[i]);
	}
	/* SO_RCVBUF wins */
	pp[N].now = now;
	connect_with(&pp[N], ce, se, 16384);
	struct core_conn_info ci;
	core_conn_info(pp[N].cli, &ci);
	assert_int_equal(ci.rmbe_size, 16384);
	pump(&pp[0], pp[0].cli, pp[0].srv, 3u << 20, 5);	/* a big ring moves data too */
	for (int i = 0; i <= N; i++) {
		pp[i].now = pp[N].now;
		cp_close_both(&pp[i]);
		cp_release(&pp[i]);
	}
	core_engine_free(ce);
	core_engine_free(se);
	/* off: the fixed default */
	ce = cp_engine("loop", NULL);
	se = cp_engine("loop", NULL);
	struct cp_pair p = { 0 };
	connect_with(&p, ce, se, 0);
	core_conn_info(p.cli, &ci);
	assert_int_equal(ci.rmbe_size, CORE_RMBE_DEFAULT);
	cp_close_both(&p);
	cp_release(&p);
	core_engine_free(ce);
	core_engine_free(se);
}

/* ---- RMB pool full of another size --------------------------------------------------------- */

static void test_pool_full_smaller(void **state)
{
	(void)state;
	struct core_engine *ce = cp_engine("loop", NULL), *se = cp_engine("loop", NULL);
	enum { N = CORE_RTOKENS_MAX };
	struct cp_pair *pp = calloc(N, sizeof(*pp));
	uint64_t now = S(1);
	for (int i = 0; i < N; i++) {
		pp[i].now = now;
		connect_with(&pp[i], ce, se, 16384);
		now = pp[i].now;
	}
	struct core_engine_stats st;
	core_engine_stats(se, &st);
	assert_int_equal(st.rmbs, N);
	for (int i = 0; i < N; i++) {
		pp[i].now = now;
		cp_close_both(&pp[i]);
		cp_release(&pp[i]);
	}
	/* 255 free 16 KiB RMBs, none of 64 KiB and no room for one: a 16 KiB one serves */
	struct cp_pair p = { 0 };
	p.now = now;
	connect_with(&p, ce, se, 65536);
	struct core_conn_info ci;
	core_conn_info(p.cli, &ci);
	assert_int_equal(ci.mode, CORE_MODE_SMC);
	assert_int_equal(ci.rmbe_size, 16384);
	assert_false(ci.first_contact);
	pump(&p, p.cli, p.srv, 100000, 3);
	cp_close_both(&p);
	cp_release(&p);
	free(pp);
	core_engine_free(ce);
	core_engine_free(se);
}

/* ---- shm: slots, arming, spinning -------------------------------------------------------- */

struct shm_fx {
	struct core_engine *ce, *se;
	struct cp_pair pp;
	int cfd, sfd;	/* completion fds of the two engines */
};

static int shm_setup(void **state)
{
	struct shm_fx *f = calloc(1, sizeof(*f));
	if (cp_engines("shm", &f->ce, &f->se) || !cp_connect_smc(&f->pp, f->ce, f->se))
		return -1;
	int fds[4];
	assert_true(core_engine_fds(f->ce, fds, 4) >= 1);
	f->cfd = fds[0];	/* the CQ's completion fd comes first */
	assert_true(core_engine_fds(f->se, fds, 4) >= 1);
	f->sfd = fds[0];
	*state = f;
	return 0;
}

static int shm_teardown(void **state)
{
	struct shm_fx *f = *state;
	cp_release(&f->pp);
	cp_engines_free(f->ce, f->se);
	free(f);
	return 0;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1;
}

/* Drains what is queued and leaves the engine armed, as the progress thread before it
 * sleeps. */
static void settle(struct shm_fx *f, struct core_engine *e)
{
	for (int i = 0; i < 100; i++) {
		core_engine_progress(e, f->pp.now, NULL);
		if (core_engine_prepare_sleep(e) == 0)
			return;
	}
	fail_msg("engine does not settle");
}

static long recv_all(struct shm_fx *f, struct core_engine *e, struct core_conn *c, char *b,
		     size_t n)
{
	size_t got = 0;
	for (int i = 0; i < 20000 && got < n; i++) {
		struct iovec v = { b + got, n - got };
		long m = core_conn_recv(c, &v, 1, 0);
		if (m > 0)
			got += (size_t)m;
		else
			core_engine_progress(e, f->pp.now, NULL);
	}
	return (long)got;
}

static void test_no_slot_starvation(void **state)
{
	struct shm_fx *f = *state;
	/* 40 sends (> the 14 data slots, < the peer's 48 receive buffers) with nobody
	 * calling progress on the sender: each is accepted */
	for (int i = 0; i < 40; i++)
		assert_int_equal(send_n(f->pp.cli, "0123456789", 10), 10);
	char b[400];
	assert_int_equal(recv_all(f, f->se, f->pp.srv, b, 400), 400);
	for (int i = 0; i < 40; i++)
		assert_memory_equal(b + 10 * i, "0123456789", 10);
}

static void test_solicited_arm(void **state)
{
	struct shm_fx *f = *state;
	settle(f, f->ce);
	/* our own sends complete at once (shm): no wake-up for them */
	for (int i = 0; i < 5; i++)
		assert_int_equal(send_n(f->pp.cli, "abc", 3), 3);
	assert_false(readable(f->cfd, 30));
	char b[16];
	assert_int_equal(recv_all(f, f->se, f->pp.srv, b, 15), 15);
	/* the peer's CDC wakes us */
	settle(f, f->ce);
	assert_int_equal(send_n(f->pp.srv, "xyz", 3), 3);
	assert_true(readable(f->cfd, 2000));
	assert_int_equal(recv_all(f, f->ce, f->pp.cli, b, 3), 3);
	assert_memory_equal(b, "xyz", 3);
}

static void test_spin(void **state)
{
	struct shm_fx *f = *state;
	char b[16];
	settle(f, f->ce);
	uint64_t t0 = f->pp.now;
	core_engine_spin_begin(f->ce, t0);
	assert_int_equal(send_n(f->pp.srv, "one", 3), 3);
	assert_false(readable(f->cfd, 30));	/* no eventfd write while we spin */
	assert_int_equal(recv_all(f, f->ce, f->pp.cli, b, 3), 3);
	assert_memory_equal(b, "one", 3);
	/* prepare_sleep does not arm while a thread spins; the deadline is the grace end */
	assert_int_equal(core_engine_prepare_sleep(f->ce), 0);
	uint64_t next = 0;
	core_engine_progress(f->ce, t0, &next);
	assert_true(next <= t0 + CORE_SPIN_GRACE_NS);
	assert_int_equal(send_n(f->pp.srv, "two", 3), 3);
	assert_false(readable(f->cfd, 30));
	/* nested spinners: the arms come back with the last end only */
	core_engine_spin_begin(f->ce, t0);
	core_engine_spin_end(f->ce);
	assert_int_equal(send_n(f->pp.srv, "333", 3), 3);
	assert_false(readable(f->cfd, 30));
	core_engine_spin_end(f->ce);
	/* spin_end polled what came meanwhile and armed the CQ again */
	struct core_conn_info ci;
	core_conn_info(f->pp.cli, &ci);
	assert_int_equal(ci.readable, 6);
	assert_int_equal(recv_all(f, f->ce, f->pp.cli, b, 6), 6);
	assert_memory_equal(b, "two333", 6);
	settle(f, f->ce);
	assert_int_equal(send_n(f->pp.srv, "end", 3), 3);
	assert_true(readable(f->cfd, 2000));
	assert_int_equal(recv_all(f, f->ce, f->pp.cli, b, 3), 3);
	/* a spin older than its grace no longer holds the arm off */
	core_engine_spin_begin(f->ce, t0);
	core_engine_progress(f->ce, t0 + 2 * CORE_SPIN_GRACE_NS, NULL);
	settle(f, f->ce);
	assert_int_equal(send_n(f->pp.srv, "old", 3), 3);
	assert_true(readable(f->cfd, 2000));
	core_engine_spin_end(f->ce);
	assert_int_equal(recv_all(f, f->ce, f->pp.cli, b, 3), 3);
	assert_memory_equal(b, "old", 3);
}

/* The lease (core_engine_lease, docs/design/readiness.md): keeps the CQ unarmed until its
 * end and reports that end as the deadline; the progress thread's check
 * (core_engine_spin_live) stands back and takes a CQ event pending from before the
 * lease; past the end the CQ is armed as before; a lease ended at once (until <= now)
 * arms the CQ and polls once more, so what came within the lease is not left behind. */
static void probe_fn(struct core_timer *t, uint64_t now)
{
	(void)t;
	(void)now;
}

static void test_lease(void **state)
{
	struct shm_fx *f = *state;
	char b[16];
	settle(f, f->ce);
	uint64_t t0 = f->pp.now, until = t0 + 10 * CORE_SPIN_GRACE_NS;
	/* an event from before the lease (settle armed the CQ) */
	assert_int_equal(send_n(f->pp.srv, "pre", 3), 3);
	assert_true(readable(f->cfd, 2000));
	assert_int_equal(core_engine_lease(f->ce, t0, until), 0);
	uint64_t u = 0, t5 = t0 + 5 * CORE_SPIN_GRACE_NS;
	assert_true(core_engine_spin_live(f->ce, t5, &u));
	assert_true(u > t5 && u <= until);
	assert_false(readable(f->cfd, 0)); /* taken: no busy wake-up loop */
	/* an engine timer due: not live (the caller's own round runs it) */
	struct core_timer probe;
	core_timer_init(&probe, probe_fn);
	pthread_mutex_lock(&f->ce->lock);
	assert_int_equal(core_timers_reserve(&f->ce->timers), 0);
	core_timers_arm(&f->ce->timers, &probe, t5);
	pthread_mutex_unlock(&f->ce->lock);
	assert_false(core_engine_spin_live(f->ce, t5, &u));
	pthread_mutex_lock(&f->ce->lock);
	core_timers_cancel(&f->ce->timers, &probe);
	core_timers_unreserve(&f->ce->timers);
	pthread_mutex_unlock(&f->ce->lock);
	/* within the lease: the deadline is its end, no arm */
	uint64_t next = 0;
	core_engine_progress(f->ce, t5, &next);
	assert_true(next > t5 && next <= until);
	assert_int_equal(core_engine_prepare_sleep(f->ce), 0);
	assert_int_equal(send_n(f->pp.srv, "two", 3), 3);
	assert_false(readable(f->cfd, 30));
	assert_int_equal(recv_all(f, f->ce, f->pp.cli, b, 6), 6);
	assert_memory_equal(b, "pretwo", 6);
	/* past the end: not live, the CQ is armed again by the next sleeper */
	uint64_t t11 = until + 1;
	core_engine_progress(f->ce, t11, NULL);
	assert_false(core_engine_spin_live(f->ce, t11, &u));
	settle(f, f->ce);
	assert_int_equal(send_n(f->pp.srv, "old", 3), 3);
	assert_true(readable(f->cfd, 2000));
	assert_int_equal(recv_all(f, f->ce, f->pp.cli, b, 3), 3);
	assert_memory_equal(b, "old", 3);
	settle(f, f->ce);
	/* a new lease disarms again; ending it at once arms and polls what came meanwhile */
	assert_int_equal(core_engine_lease(f->ce, t11, t11 + 10 * CORE_SPIN_GRACE_NS), 0);
	assert_int_equal(send_n(f->pp.srv, "new", 3), 3);
	assert_false(readable(f->cfd, 30));
	assert_int_equal(core_engine_lease(f->ce, t11 + 1, 0), 1);
	struct core_conn_info ci;
	core_conn_info(f->pp.cli, &ci);
	assert_int_equal(ci.readable, 3);
	assert_int_equal(recv_all(f, f->ce, f->pp.cli, b, 3), 3);
	assert_memory_equal(b, "new", 3);
	settle(f, f->ce);
	assert_int_equal(send_n(f->pp.srv, "arm", 3), 3);
	assert_true(readable(f->cfd, 2000));
	assert_int_equal(recv_all(f, f->ce, f->pp.cli, b, 3), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reuse_zeroed),
		cmocka_unit_test(test_rmbe_auto),
		cmocka_unit_test(test_pool_full_smaller),
		cmocka_unit_test_setup_teardown(test_no_slot_starvation, shm_setup, shm_teardown),
		cmocka_unit_test_setup_teardown(test_solicited_arm, shm_setup, shm_teardown),
		cmocka_unit_test_setup_teardown(test_spin, shm_setup, shm_teardown),
		cmocka_unit_test_setup_teardown(test_lease, shm_setup, shm_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
