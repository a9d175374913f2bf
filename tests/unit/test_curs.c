/* test_curs.c: wire/curs (procedures.md 4.3-4.5, wire-formats.md 7.2): the window-update
 * rule, the two-chunk split covers exactly the range, 16-bit sequence compare. Core's own
 * cursor arithmetic is tested in tests/unit/test_core_curs.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/llccdc_vectors.h"
#include "wire/codes.h"
#include "wire/curs.h"

static struct curs C(uint16_t wrap, uint32_t count)
{
	struct curs c = { wrap, count };
	return c;
}

static void test_window(void **state)
{
	(void)state;
	const uint32_t S = 65536;
	/* limit = max(S / 10, about 2.3 KB). */
	assert_int_equal(curs_wnd_limit(16384), CURS_WND_MIN);
	assert_int_equal(curs_wnd_limit(65536), 6553);
	assert_int_equal(curs_wnd_limit(1u << 20), 104857);

	struct curs_wnd w = { .size = S, .cons_sent = C(0, 0), .cons = C(0, 6553),
			      .peer_prod = C(0, 40000) };
	assert_false(curs_cons_update_due(&w));		/* to_confirm == limit: not above */
	w.cons = C(0, 6554);
	assert_true(curs_cons_update_due(&w));		/* peer sees 25536 free <= S/2 */
	w.peer_prod = C(0, 32767);
	assert_false(curs_cons_update_due(&w));		/* peer sees 32769 free > S/2 */
	w.peer_prod = C(0, 32768);
	assert_true(curs_cons_update_due(&w));		/* exactly S/2 */
	w.peer_prod = C(0, 10000);
	assert_false(curs_cons_update_due(&w));
	w.peer_blocked = true;				/* B makes it due */
	assert_true(curs_cons_update_due(&w));
	w.cons = C(0, 100);				/* ...but only above the limit */
	assert_false(curs_cons_update_due(&w));
	w.peer_req = true;				/* R: always */
	assert_true(curs_cons_update_due(&w));
	w.peer_req = false;
	w.force = true;					/* urgent byte consumed: always */
	assert_true(curs_cons_update_due(&w));
	/* Across a wrap. */
	struct curs_wnd x = { .size = S, .cons_sent = C(4, 0xf000), .cons = C(5, 0x1000),
			      .peer_prod = C(5, 0xe000) };
	assert_true(curs_cons_update_due(&x));	/* 0x2000 to confirm, peer sees 4 KiB free */
}

static void test_split(void **state)
{
	(void)state;
	struct curs_chunk ch[2];
	assert_int_equal(curs_split(0, 0, 16, ch), 0);
	assert_int_equal(curs_split(0, 16, 16, ch), 1);
	assert_int_equal(ch[0].off, 0);
	assert_int_equal(ch[0].len, 16);
	assert_int_equal(curs_split(10, 6, 16, ch), 1);
	assert_int_equal(curs_split(10, 7, 16, ch), 2);
	assert_int_equal(ch[0].off, 10);
	assert_int_equal(ch[0].len, 6);
	assert_int_equal(ch[1].off, 0);
	assert_int_equal(ch[1].len, 1);
	assert_int_equal(curs_split(15, 16, 16, ch), 2);
	assert_int_equal(ch[0].len, 1);
	assert_int_equal(ch[1].len, 15);
	assert_int_equal(curs_split(16, 1, 16, ch), -SMCR_E_INVAL);
	assert_int_equal(curs_split(0, 17, 16, ch), -SMCR_E_INVAL);
	assert_int_equal(curs_split(0, 0, 0, ch), -SMCR_E_INVAL);

	/* Property: the chunks cover exactly [off, off+len) of the ring, in order, each
	 * inside the ring, each non-empty. Checked byte by byte on small rings. */
	uint64_t s = 99;
	for (int n = 0; n < 100000; n++) {
		uint32_t size = (uint32_t)(1 + llccdc_rand(&s) % 64);
		uint32_t off = (uint32_t)(llccdc_rand(&s) % size);
		uint32_t len = (uint32_t)(llccdc_rand(&s) % (size + 1));
		int k = curs_split(off, len, size, ch);
		assert_true(k >= 0 && k <= 2);
		uint8_t seen[64];
		memset(seen, 0, sizeof(seen));
		uint32_t pos = off, covered = 0;
		for (int i = 0; i < k; i++) {
			assert_true(ch[i].len > 0);
			assert_int_equal(ch[i].off, pos);	/* goes on where it left */
			assert_true(ch[i].off + ch[i].len <= size);
			for (uint32_t j = 0; j < ch[i].len; j++)
				seen[ch[i].off + j]++;
			covered += ch[i].len;
			pos = (ch[i].off + ch[i].len) % size;
		}
		assert_int_equal(covered, len);
		assert_int_equal(k, len == 0 ? 0 : (off + len > size ? 2 : 1));
		for (uint32_t j = 0; j < size; j++) {
			uint32_t rel = (j + size - off) % size;	/* distance from off */
			assert_int_equal(seen[j], rel < len ? 1 : 0);
		}
	}
}

static void test_seq16(void **state)
{
	(void)state;
	assert_int_equal(seq16_diff(1, 0), 1);
	assert_int_equal(seq16_diff(0, 1), -1);
	assert_int_equal(seq16_diff(0, 0xFFFF), 1);		/* 65535 -> 0 is newer */
	assert_int_equal(seq16_diff(0xFFFF, 0), -1);
	assert_int_equal(seq16_diff(0x8000, 0), -32768);
	assert_int_equal(seq16_diff(0x7FFF, 0), 32767);
	assert_false(seq16_older(5, 5));			/* equal: processed again (7.1) */
	assert_true(seq16_older(4, 5));
	assert_false(seq16_older(6, 5));
	assert_true(seq16_older(0xFFFE, 1));
	assert_false(seq16_older(1, 0xFFFE));
	/* Property: for any a and 1 <= k < 32768, a + k is newer and a - k older. */
	uint64_t s = 3;
	for (int n = 0; n < 100000; n++) {
		uint16_t a = (uint16_t)llccdc_rand(&s);
		uint16_t k = (uint16_t)(1 + llccdc_rand(&s) % 32767);
		assert_int_equal(seq16_diff((uint16_t)(a + k), a), k);
		assert_false(seq16_older((uint16_t)(a + k), a));
		assert_true(seq16_older((uint16_t)(a - k), a));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_seq16),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
