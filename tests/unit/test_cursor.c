/* test_cursor.c: the byte cursors of util/cursor.h: values, bounds, and the rule that a
 * failed read or write leaves the cursor unmoved (property-tested over random inputs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/cursor.h"

static void test_get_values(void **state)
{
	(void)state;
	const uint8_t b[] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
			      0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12 };
	struct rcur c = rcur_make(b, sizeof(b));
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	assert_int_equal(rcur_get_u8(&c, &u8), 0);
	assert_int_equal(u8, 0x01);
	assert_int_equal(rcur_get_u16(&c, &u16), 0);
	assert_int_equal(u16, 0x0203);
	assert_int_equal(rcur_get_u24(&c, &u32), 0);
	assert_int_equal(u32, 0x040506);
	assert_int_equal(rcur_get_u32(&c, &u32), 0);
	assert_int_equal(u32, 0x0708090a);
	assert_int_equal(rcur_get_u64(&c, &u64), 0);
	assert_true(u64 == 0x0b0c0d0e0f101112ull);
	assert_int_equal(rcur_left(&c), 0);
	assert_int_equal(rcur_get_u8(&c, &u8), -SMCR_E_SHORT);
}

static void test_put_values(void **state)
{
	(void)state;
	uint8_t b[18];
	struct wcur w = wcur_make(b, sizeof(b));
	assert_int_equal(wcur_put_u8(&w, 0x01), 0);
	assert_int_equal(wcur_put_u16(&w, 0x0203), 0);
	assert_int_equal(wcur_put_u24(&w, 0x040506), 0);
	assert_int_equal(wcur_put_u24(&w, 0x1000000), -SMCR_E_INVAL);
	assert_int_equal(wcur_put_u32(&w, 0x0708090a), 0);
	assert_int_equal(wcur_put_u64(&w, 0x0b0c0d0e0f101112ull), 0);
	for (unsigned i = 0; i < sizeof(b); i++)
		assert_int_equal(b[i], i + 1);
	assert_int_equal(wcur_put_u8(&w, 0), -SMCR_E_NOSPACE);
	assert_int_equal(w.off, sizeof(b));
	assert_int_equal(wcur_patch_u16(&w, 1, 0xbeef), 0);
	assert_int_equal(b[1], 0xbe);
	assert_int_equal(b[2], 0xef);
	assert_int_equal(wcur_patch_u16(&w, 17, 0), -SMCR_E_INVAL);
}

static void test_expect_and_sub(void **state)
{
	(void)state;
	const uint8_t b[] = { 0xe2, 0xd4, 0xc3, 0xd9, 0x01 };
	const uint8_t eye[] = { 0xe2, 0xd4, 0xc3, 0xd9 };
	const uint8_t bad[] = { 0xe2, 0xd4, 0xc3, 0xc4 };
	struct rcur c = rcur_make(b, sizeof(b));
	assert_int_equal(rcur_expect(&c, bad, 4), -SMCR_E_EXPECT);
	assert_int_equal(c.off, 0);
	assert_int_equal(rcur_expect(&c, eye, 4), 0);
	assert_int_equal(c.off, 4);
	struct rcur s;
	assert_int_equal(rcur_sub(&c, 2, &s), -SMCR_E_SHORT);
	assert_int_equal(rcur_sub(&c, 1, &s), 0);
	assert_int_equal(s.len, 1);
	assert_int_equal(s.buf[0], 0x01);
}

/* Property: over random buffers and random operation sequences, every operation either
 * succeeds and advances by exactly its width, or fails and leaves off unchanged; a value
 * written by put is read back by get. */
static void test_property_random(void **state)
{
	(void)state;
	srand(12345);
	for (int iter = 0; iter < 20000; iter++) {
		uint8_t buf[32];
		size_t len = (size_t)(rand() % 33);
		uint64_t vals[16];
		int ops[16];
		struct wcur w = wcur_make(buf, len);
		int nops = 0;
		for (int i = 0; i < 16; i++) {
			int op = rand() % 5;
			uint64_t v = ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 2) ^ (uint64_t)rand();
			size_t before = w.off;
			static const size_t width[] = { 1, 2, 3, 4, 8 };
			int rc;
			switch (op) {
			case 0: v &= 0xff; rc = wcur_put_u8(&w, (uint8_t)v); break;
			case 1: v &= 0xffff; rc = wcur_put_u16(&w, (uint16_t)v); break;
			case 2: v &= 0xffffff; rc = wcur_put_u24(&w, (uint32_t)v); break;
			case 3: v &= 0xffffffff; rc = wcur_put_u32(&w, (uint32_t)v); break;
			default: rc = wcur_put_u64(&w, v); break;
			}
			if (rc == 0) {
				assert_int_equal(w.off, before + width[op]);
				ops[nops] = op;
				vals[nops++] = v;
			} else {
				assert_int_equal(rc, -SMCR_E_NOSPACE);
				assert_int_equal(w.off, before);
				assert_true(len - before < width[op]);
			}
		}
		struct rcur r = rcur_make(buf, w.off);
		for (int i = 0; i < nops; i++) {
			uint8_t a; uint16_t b; uint32_t c; uint64_t d = 0;
			switch (ops[i]) {
			case 0: assert_int_equal(rcur_get_u8(&r, &a), 0); d = a; break;
			case 1: assert_int_equal(rcur_get_u16(&r, &b), 0); d = b; break;
			case 2: assert_int_equal(rcur_get_u24(&r, &c), 0); d = c; break;
			case 3: assert_int_equal(rcur_get_u32(&r, &c), 0); d = c; break;
			default: assert_int_equal(rcur_get_u64(&r, &d), 0); break;
			}
			assert_true(d == vals[i]);
		}
		/* Reading past the end fails and does not move. */
		size_t at = r.off;
		uint64_t d;
		assert_int_equal(rcur_get_u64(&r, &d), -SMCR_E_SHORT);
		assert_int_equal(r.off, at);
		assert_int_equal(rcur_skip(&r, 1), -SMCR_E_SHORT);
		assert_int_equal(r.off, at);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_values),
		cmocka_unit_test(test_put_values),
		cmocka_unit_test(test_expect_and_sub),
		cmocka_unit_test(test_property_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
