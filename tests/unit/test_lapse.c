/* test_lapse.c: the hold watchdog's score (src/sock/lapse.h). A program that waits in the
 * kernel after each blocking call lapses about once per hold bound (1 ms): the score must
 * trip within a few lapses. A stream whose holder loses its CPU now and then lapses a few
 * times a second: the score must never trip. Plus the decay, a clock seen going back, a
 * long silence, and the restart after a trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sock/lapse.h"

#define MS 1000000ull
#define T0 (5000 * MS) /* any start: the clock is monotonic, not 0 */

static void test_trips_after_trip_lapses_close_together(void **state)
{
	(void)state;
	struct lapse_score ls = { 0 };
	/* one lapse per millisecond: the 4th trips, not the 3rd */
	assert_false(lapse_score_add(&ls, T0, 4));
	assert_false(lapse_score_add(&ls, T0 + 1 * MS, 4));
	assert_false(lapse_score_add(&ls, T0 + 2 * MS, 4));
	assert_true(lapse_score_add(&ls, T0 + 3 * MS, 4));
	/* it starts again from nothing */
	assert_false(lapse_score_add(&ls, T0 + 4 * MS, 4));
	assert_false(lapse_score_add(&ls, T0 + 5 * MS, 4));
	assert_false(lapse_score_add(&ls, T0 + 6 * MS, 4));
	assert_true(lapse_score_add(&ls, T0 + 7 * MS, 4));
}

static void test_trip_one(void **state)
{
	(void)state;
	struct lapse_score ls = { 0 };
	assert_true(lapse_score_add(&ls, T0, 1));
	assert_true(lapse_score_add(&ls, T0 + 500 * MS, 1));
}

static void test_few_a_second_never_trip(void **state)
{
	(void)state;
	struct lapse_score ls = { 0 };
	/* 3 lapses a second for 60 s, evenly: the score stays below 2 lapses */
	for (int i = 0; i < 180; i++)
		assert_false(lapse_score_add(&ls, T0 + (uint64_t)i * 333 * MS, 4));
	assert_true(ls.score < 2 * LAPSE_ONE);
	/* in pairs 5 ms apart, 2 pairs a second: still never */
	struct lapse_score p = { 0 };
	for (int i = 0; i < 120; i++) {
		uint64_t t = T0 + (uint64_t)i * 500 * MS;
		assert_false(lapse_score_add(&p, t, 4));
		assert_false(lapse_score_add(&p, t + 5 * MS, 4));
	}
}

static void test_decay(void **state)
{
	(void)state;
	struct lapse_score ls = { 0 };
	assert_false(lapse_score_add(&ls, T0, 8));
	assert_false(lapse_score_add(&ls, T0 + 1 * MS, 8));
	assert_false(lapse_score_add(&ls, T0 + 2 * MS, 8));
	assert_int_equal(ls.score, 3 * LAPSE_ONE);
	/* 100 ms later: halved, then one more */
	assert_false(lapse_score_add(&ls, T0 + 102 * MS, 8));
	assert_int_equal(ls.score, 3 * LAPSE_ONE / 2 + LAPSE_ONE);
	/* the 99 ms left over count towards the next halving */
	assert_false(lapse_score_add(&ls, T0 + 201 * MS, 8));
	assert_int_equal(ls.score, (3 * LAPSE_ONE / 2 + LAPSE_ONE) / 2 + LAPSE_ONE);
	/* an hour of silence: from nothing */
	assert_false(lapse_score_add(&ls, T0 + 3600000 * MS, 8));
	assert_int_equal(ls.score, LAPSE_ONE);
}

static void test_clock_back(void **state)
{
	(void)state;
	struct lapse_score ls = { 0 };
	assert_false(lapse_score_add(&ls, T0 + 50 * MS, 4));
	assert_false(lapse_score_add(&ls, T0 + 40 * MS, 4)); /* another thread's older clock */
	assert_false(lapse_score_add(&ls, T0 + 60 * MS, 4));
	assert_true(lapse_score_add(&ls, T0 + 61 * MS, 4));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trips_after_trip_lapses_close_together),
		cmocka_unit_test(test_trip_one),
		cmocka_unit_test(test_few_a_second_never_trip),
		cmocka_unit_test(test_decay),
		cmocka_unit_test(test_clock_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
