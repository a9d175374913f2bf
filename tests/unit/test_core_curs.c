/* test_core_curs.c: the engine's absolute-cursor conversions (core_int.h abs_to_curs,
 * curs_to_abs; docs/protocol/procedures.md 4.2, docs/protocol/wire-formats.md 8.3): round trips
 * across the 16-bit wrap counter's 65535 -> 0 step, and every cursor outside the window the
 * protocol allows (behind the last one, beyond the ring, whole laps ahead) rejected. Property
 * checks over many random positions and ring sizes (STYLE.md 29). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/core_int.h"

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_wrap_counter(void **state)
{
	(void)state;
	const uint32_t size = 16384;
	/* Just before and after lap 65536: wire wrap goes 65535 -> 0. */
	uint64_t a = 65535ull * size + 100;
	struct curs c = abs_to_curs(a, size);
	assert_int_equal(c.wrap, 65535);
	assert_int_equal(c.count, 100);
	uint64_t b = a + size;	/* one full lap later */
	c = abs_to_curs(b, size);
	assert_int_equal(c.wrap, 0);
	assert_int_equal(c.count, 100);
	uint64_t out = 0;
	assert_true(curs_to_abs(c, a, a + size, size, &out));
	assert_int_equal(out, b);
	/* the same wire value one lap back is outside the window */
	assert_false(curs_to_abs(abs_to_curs(a - 1, size), a, a + size, size, &out));
}

static void test_window_property(void **state)
{
	(void)state;
	uint64_t s = 0x9E3779B97F4A7C15ull;
	for (int i = 0; i < 200000; i++) {
		uint32_t size = 16384u << (rng(&s) % 6);
		uint64_t lo = rng(&s) % (1ull << 40);
		uint64_t hi = lo + rng(&s) % ((uint64_t)size + 1);
		uint64_t x = lo + (hi > lo ? rng(&s) % (hi - lo + 1) : 0);
		uint64_t out = 0;
		/* everything inside [lo, hi] converts back exactly */
		assert_true(curs_to_abs(abs_to_curs(x, size), lo, hi, size, &out));
		assert_int_equal(out, x);
		/* within less than a lap outside [lo, hi]: no lap of it lands inside, so it fails
		 * (behind: a cursor moving backwards; ahead: beyond the space given) */
		uint64_t gap = size - (hi - lo);
		if (gap >= 2 && lo >= gap) {
			uint64_t back = lo - 1 - rng(&s) % (gap - 1);
			assert_false(curs_to_abs(abs_to_curs(back, size), lo, hi, size, &out));
			uint64_t fwd = hi + 1 + rng(&s) % (gap - 1);
			assert_false(curs_to_abs(abs_to_curs(fwd, size), lo, hi, size, &out));
		}
		/* whole laps ahead or behind, and counts beyond the ring, always fail */
		struct curs far = abs_to_curs(x, size);
		far.wrap = (uint16_t)(far.wrap + 2 + rng(&s) % 60000);
		assert_false(curs_to_abs(far, lo, hi, size, &out));
		struct curs big = { (uint16_t)rng(&s), size + (uint32_t)(rng(&s) % 1000) };
		assert_false(curs_to_abs(big, lo, hi, size, &out));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrap_counter),
		cmocka_unit_test(test_window_property),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
