/* test_waitpol.c: the wait policy (src/sock/waitpol.h) on a fake clock. A busy
 * connection on a quiet host keeps a spin sized to its waits; an idle connection stops
 * spinning and burns a bounded, tiny share of its waits; a spinner that loses its CPU
 * stops at once and backs off longer each time; the user's busy-poll floor holds; the
 * lease is only made when every wait is ours, and never outlives its bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sock/waitpol.h"

#define US 1000ull
#define MS 1000000ull
#define T0 (7000 * MS) /* any start: the clock is monotonic, not 0 */

static struct waitpol_cfg cfg_default(void)
{
	return (struct waitpol_cfg){
		.spin_min_ns = WAITPOL_SPIN_MIN_NS,
		.spin_max_ns = WAITPOL_SPIN_MAX_NS,
		.lost_gap_ns = WAITPOL_LOST_GAP_NS,
		.off_max_waits = WAITPOL_OFF_MAX_WAITS,
	};
}

/* One simulated wait: the event comes answer_ns after the wait starts; the thread spins
 * for the policy's budget, then sleeps, and a sleeper runs wake_ns after the event.
 * lost: the spin loses its CPU (reported as such if it spun at all). Returns the time
 * the wait took; *spun gets the CPU time it spent spinning. */
static uint64_t sim_wait(struct waitpol *w, const struct waitpol_cfg *c, uint64_t answer_ns,
			 uint64_t wake_ns, bool lost, uint64_t *spun)
{
	uint64_t b = waitpol_spin_ns(w, c);
	struct waitpol_obs o = { 0 };
	if (answer_ns <= b && !lost) {
		o.caught = true;
		o.waited_ns = answer_ns;
		*spun = answer_ns;
	} else {
		o.waited_ns = answer_ns + wake_ns;
		o.lost_cpu = lost && b > 0;
		*spun = b < answer_ns ? b : answer_ns;
	}
	waitpol_note(w, c, &o);
	return o.waited_ns;
}

static void test_first_wait_spins_the_minimum(void **state)
{
	(void)state;
	struct waitpol_cfg c = cfg_default();
	struct waitpol w;
	waitpol_init(&w, &c);
	assert_int_equal(waitpol_spin_ns(&w, &c), WAITPOL_SPIN_MIN_NS);
}

static void test_quiet_pingpong_keeps_a_spin_sized_to_its_waits(void **state)
{
	(void)state;
	struct waitpol_cfg c = cfg_default();
	struct waitpol w;
	waitpol_init(&w, &c);
	uint64_t spun;
	/* answers after 4 µs: the first wait (2 µs spin) misses, wakes 6 µs later (10 µs:
	 * within spin_max, so a longer spin would have caught it) */
	sim_wait(&w, &c, 4 * US, 6 * US, false, &spun);
	assert_int_equal(waitpol_spin_ns(&w, &c), 20 * US);
	unsigned caught = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t b = waitpol_spin_ns(&w, &c);
		if (sim_wait(&w, &c, 4 * US, 6 * US, false, &spun) == 4 * US)
			caught++;
		assert_true(b >= 8 * US); /* twice the waits, never shrinking below */
		assert_true(b <= WAITPOL_SPIN_MAX_NS);
	}
	assert_int_equal(caught, 1000);
	/* settles at twice the wait */
	assert_int_equal(waitpol_spin_ns(&w, &c), 8 * US);
}

static void test_short_miss_grows_the_spin_up_to_the_cap(void **state)
{
	(void)state;
	struct waitpol_cfg c = cfg_default();
	struct waitpol w;
	waitpol_init(&w, &c);
	struct waitpol_obs o = { .waited_ns = 20 * US };
	waitpol_note(&w, &c, &o);
	assert_int_equal(waitpol_spin_ns(&w, &c), 40 * US);
	o.waited_ns = 45 * US;
	waitpol_note(&w, &c, &o);
	assert_int_equal(waitpol_spin_ns(&w, &c), WAITPOL_SPIN_MAX_NS);
}

/* Both ends asleep: every round trip (two wake-ups, 60 µs) is longer than any spin; the
 * policy stops spinning, and its probe (the longest spin) catches the answer as soon as
 * the peer spins again: the spin is back. */
static void test_sleeping_mode_is_left(void **state)
{
	(void)state;
	struct waitpol_cfg c = cfg_default();
	struct waitpol w;
	waitpol_init(&w, &c);
	uint64_t spun;
	for (int i = 0; i < 300; i++)
		sim_wait(&w, &c, 60 * US, 0, false, &spun);
	/* the peer spins now: answers in 4 µs; within one off run the spin is back */
	unsigned k = 0;
	while (sim_wait(&w, &c, 4 * US, 30 * US, false, &spun) != 4 * US) {
		k++;
		assert_true(k <= WAITPOL_OFF_MAX_WAITS + 1);
	}
	for (int i = 0; i < 10; i++)
		assert_int_equal(sim_wait(&w, &c, 4 * US, 30 * US, false, &spun), 4 * US);
}

static void test_idle_connection_burns_next_to_nothing(void **state)
{
	(void)state;
	struct waitpol_cfg c = cfg_default();
	struct waitpol w;
	waitpol_init(&w, &c);
	/* a connection whose peer answers every 100 ms (an idle control connection) */
	uint64_t spun_total = 0, waited_total = 0;
	unsigned spins = 0;
	for (int i = 0; i < 10000; i++) {
		uint64_t spun;
		if (waitpol_spin_ns(&w, &c))
			spins++;
		waited_total += sim_wait(&w, &c, 100 * MS, 10 * US, false, &spun);
		spun_total += spun;
	}
	/* once settled, one probe of spin_max per run of off_max waits */
	assert_true(spins <= 10000 / WAITPOL_OFF_MAX_WAITS + 12);
	assert_true(spun_total <= (10000 / WAITPOL_OFF_MAX_WAITS + 12) * WAITPOL_SPIN_MAX_NS);
	assert_true(spun_total * 100000 < waited_total); /* below a hundred-thousandth */
}

static void test_lost_cpu_stops_at_once_and_backs_off_longer(void **state)
{
	(void)state;
	struct waitpol_cfg c = cfg_default();
	struct waitpol w;
	waitpol_init(&w, &c);
	uint64_t spun;
	for (int i = 0; i < 20; i++)
		sim_wait(&w, &c, 5 * US, 10 * US, false, &spun);
	assert_int_equal(waitpol_spin_ns(&w, &c), 10 * US);
	/* the spin lost its CPU: no spin for 2 waits, then a probe of the longest */
	sim_wait(&w, &c, 5 * US, 10 * US, true, &spun);
	assert_int_equal(waitpol_spin_ns(&w, &c), 0);
	sim_wait(&w, &c, 5 * US, 10 * US, false, &spun);
	assert_int_equal(waitpol_spin_ns(&w, &c), 0);
	sim_wait(&w, &c, 5 * US, 10 * US, false, &spun);
	assert_int_equal(waitpol_spin_ns(&w, &c), WAITPOL_SPIN_MAX_NS);
	/* the probe catches the 5 µs answers: the spin is back, sized to them */
	sim_wait(&w, &c, 5 * US, 10 * US, false, &spun);
	assert_int_equal(waitpol_spin_ns(&w, &c), 10 * US);
	/* each loss in a row doubles the run: 4, 8, ... up to off_max_waits */
	unsigned expect = 4;
	for (int round = 0; round < 8; round++) {
		sim_wait(&w, &c, 1 * US, 10 * US, true, &spun);
		unsigned off = 0;
		while (waitpol_spin_ns(&w, &c) == 0) {
			sim_wait(&w, &c, 1 * US, 10 * US, false, &spun);
			off++;
			assert_true(off <= WAITPOL_OFF_MAX_WAITS);
		}
		assert_int_equal(off, expect);
		expect = expect * 2 > WAITPOL_OFF_MAX_WAITS ? WAITPOL_OFF_MAX_WAITS : expect * 2;
	}
	/* a loaded host where every spin loses its CPU: spins are one in off_max waits */
	unsigned spins = 0;
	for (int i = 0; i < 6400; i++) {
		if (waitpol_spin_ns(&w, &c))
			spins++;
		sim_wait(&w, &c, 30 * US, 10 * US, true, &spun);
	}
	assert_true(spins <= 6400 / WAITPOL_OFF_MAX_WAITS + 1);
	/* caught waits shorten the runs again, one wait per caught spin */
	for (int i = 0; i < 200; i++)
		sim_wait(&w, &c, 1 * US, 10 * US, false, &spun);
	sim_wait(&w, &c, 1 * US, 10 * US, true, &spun);
	unsigned off = 0;
	while (waitpol_spin_ns(&w, &c) == 0) {
		sim_wait(&w, &c, 1 * US, 10 * US, false, &spun);
		off++;
	}
	assert_int_equal(off, 2);
}

static void test_busy_poll_is_a_floor(void **state)
{
	(void)state;
	struct waitpol_cfg c = cfg_default();
	c.busy_poll_ns = 300 * US; /* above spin_max: the user asked for it */
	struct waitpol w;
	waitpol_init(&w, &c);
	uint64_t spun;
	assert_int_equal(waitpol_spin_ns(&w, &c), 300 * US);
	for (int i = 0; i < 100; i++) {
		sim_wait(&w, &c, 100 * MS, 10 * US, i % 3 == 0, &spun);
		assert_int_equal(waitpol_spin_ns(&w, &c), 300 * US);
	}
	for (int i = 0; i < 100; i++)
		sim_wait(&w, &c, 3 * US, 10 * US, false, &spun);
	assert_int_equal(waitpol_spin_ns(&w, &c), 300 * US);
}

/* The direct sleeper's gate: never a thread's first sleep; short sleeps open it; a long
 * idle sleep or a few wake-ups for others' traffic close it. */
static void test_direct_gate(void **state)
{
	(void)state;
	uint64_t avg = 0;
	assert_false(waitpol_direct_ok(avg));
	waitpol_sleep_note(&avg, 30 * US);
	assert_true(waitpol_direct_ok(avg));
	for (int i = 0; i < 100; i++)
		waitpol_sleep_note(&avg, 30 * US);
	assert_true(waitpol_direct_ok(avg));
	/* woken for others' traffic, twice: closed */
	waitpol_sleep_note(&avg, WAITPOL_DIRECT_MISS_NS);
	waitpol_sleep_note(&avg, WAITPOL_DIRECT_MISS_NS);
	assert_false(waitpol_direct_ok(avg));
	/* short sleeps again: open within a few */
	int k = 0;
	while (!waitpol_direct_ok(avg)) {
		waitpol_sleep_note(&avg, 30 * US);
		assert_true(++k < 20);
	}
	/* one sleep of an hour is capped: it does not keep the gate shut for ever */
	waitpol_sleep_note(&avg, 3600ull * 1000 * MS);
	assert_false(waitpol_direct_ok(avg));
	k = 0;
	while (!waitpol_direct_ok(avg)) {
		waitpol_sleep_note(&avg, 30 * US);
		assert_true(++k < 40);
	}
}

/* The CLC answer's spin: a fresh site spins; misses bring the rate under the minimum
 * within a few waits, then only every WAITPOL_CLC_PROBE-th wait spins; hits bring it back;
 * a preempted thread never spins. */
static void test_clc_spin(void **state)
{
	(void)state;
	unsigned rate = WAITPOL_CLC_SCALE, waits = 0;
	assert_false(waitpol_clc_low(rate));
	assert_true(waitpol_clc_spin(rate, 0, false));
	assert_false(waitpol_clc_spin(rate, 0, true));
	int misses = 0;
	while (!waitpol_clc_low(rate)) {
		rate = waitpol_clc_rate(rate, false);
		assert_true(++misses < 10);
	}
	assert_true(misses >= 3); /* one late answer does not turn it off */
	/* low: 1 wait in WAITPOL_CLC_PROBE spins */
	unsigned spins = 0;
	for (unsigned i = 0; i < 10 * WAITPOL_CLC_PROBE; i++)
		spins += waitpol_clc_spin(rate, waits++, false);
	assert_int_equal(spins, 10);
	assert_false(waitpol_clc_spin(rate, 0, true)); /* the probe too: not when preempted */
	/* the probes hit: the rate comes back above the minimum */
	int hits = 0;
	while (waitpol_clc_low(rate)) {
		rate = waitpol_clc_rate(rate, true);
		assert_true(++hits < 20);
	}
	assert_true(waitpol_clc_spin(rate, 5, false));
	/* the average stays within its scale */
	for (int i = 0; i < 1000; i++)
		rate = waitpol_clc_rate(rate, true);
	assert_true(rate <= WAITPOL_CLC_SCALE);
	for (int i = 0; i < 1000; i++)
		rate = waitpol_clc_rate(rate, false);
	assert_true(waitpol_clc_low(rate));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_wait_spins_the_minimum),
		cmocka_unit_test(test_quiet_pingpong_keeps_a_spin_sized_to_its_waits),
		cmocka_unit_test(test_short_miss_grows_the_spin_up_to_the_cap),
		cmocka_unit_test(test_sleeping_mode_is_left),
		cmocka_unit_test(test_idle_connection_burns_next_to_nothing),
		cmocka_unit_test(test_lost_cpu_stops_at_once_and_backs_off_longer),
		cmocka_unit_test(test_busy_poll_is_a_floor),
		cmocka_unit_test(test_direct_gate),
		cmocka_unit_test(test_clc_spin),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
