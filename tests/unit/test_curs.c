/* test_curs.c: the ring-cursor module (docs/protocol/procedures.md 4.2-4.5,
 * docs/protocol/wire-formats.md 7.1, 7.2, 8.3): exact cases from the spec, and properties: add then
 * diff gives the amount; a cursor never moves backwards; wrap at the ring size and at 65536; the
 * two-chunk split covers exactly the range; 16-bit sequence compare. */
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

static void assert_curs(struct curs c, uint16_t wrap, uint32_t count)
{
	if (c.wrap != wrap || c.count != count)
		fail_msg("cursor (%u, %u), want (%u, %u)", c.wrap, c.count, wrap, count);
}

static void test_pack_shared(void **state)
{
	(void)state;
	struct curs c = C(0xABCD, 0x12345678);
	assert_true(curs_pack(c) == 0x0000ABCD12345678ull);
	/* Bits 48..63 are unused. */
	assert_curs(curs_unpack(0x9999ABCD12345678ull), 0xABCD, 0x12345678);
	assert_curs(curs_unpack(curs_pack(C(0xFFFF, 0xFFFFFFFF))), 0xFFFF, 0xFFFFFFFF);
	struct curs_shared s;
	atomic_init(&s.v, 0);
	assert_curs(curs_load(&s), 0, 0);
	curs_store(&s, c);
	assert_curs(curs_load(&s), 0xABCD, 0x12345678);
	assert_true(atomic_load(&s.v) == 0x0000ABCD12345678ull);
	assert_true(atomic_is_lock_free(&s.v));		/* one 64-bit copy, no lock */
}

static void test_add(void **state)
{
	(void)state;
	const uint32_t S = 16384;
	assert_curs(curs_add(C(0, 0), 0x1000, S), 0, 0x1000);
	assert_curs(curs_add(C(0, 0x3ff0), 0x10, S), 1, 0);	/* count reaches S: wraps */
	assert_curs(curs_add(C(0, 0x3ff0), 0x20, S), 1, 0x10);
	assert_curs(curs_add(C(0, 0x3fff), 1, S), 1, 0);
	assert_curs(curs_add(C(0, 0), S, S), 1, 0);		/* a full ring */
	assert_curs(curs_add(C(3, 5), 3 * (uint64_t)S, S), 6, 5);	/* several laps */
	assert_curs(curs_add(C(0xFFFF, 0x3ff0), 0x20, S), 0, 0x10);	/* wrap mod 65536 */
	assert_curs(curs_add(C(0xFFFF, 0), 0x10000ull * S, S), 0xFFFF, 0);
	assert_curs(curs_add(C(2, 7), 0, S), 2, 7);
	assert_curs(curs_add(C(2, 7), 100, 0), 2, 7);		/* size 0: unchanged */
	assert_curs(curs_add(C(0, S + 3), 0, S), 1, 3);		/* normalises count */
	/* The largest RMBE (code 15, 512 MiB). */
	uint32_t big = (uint32_t)wire_rmbe_size(15);
	assert_curs(curs_add(C(0, big - 1), big, big), 1, big - 1);
}

static void test_diff(void **state)
{
	(void)state;
	const uint32_t S = 65536;
	assert_int_equal(curs_diff(C(0, 0), C(0, 0x1000), S), 0x1000);
	assert_int_equal(curs_diff(C(0, 0x1000), C(0, 0x1000), S), 0);
	assert_int_equal(curs_diff(C(0, 0x2000), C(0, 0x1000), S), 0);	/* behind: 0 */
	assert_int_equal(curs_diff(C(0, 0xfff0), C(1, 0x10), S), 0x20);	/* 9 example */
	assert_int_equal(curs_diff(C(0, 0x100), C(1, 0x100), S), S);	/* one full lap */
	assert_int_equal(curs_diff(C(0xFFFF, 0xfff0), C(0, 0x10), S), 0x20);	/* 65535 -> 0 */
	/* Counts the peer could send out of range do not underflow. */
	assert_int_equal(curs_diff(C(0, 0xFFFFFFFF), C(1, 0), S), 0);
	assert_true(curs_diff(C(0, 0), C(1, 0xFFFFFFFF), S) == (uint64_t)S + 0xFFFFFFFFull);
}

/* Property: from any cursor, add(n) then diff gives n (n <= size), the new cursor is
 * valid, never older than the old one and after it in serial order. */
static void test_add_diff_property(void **state)
{
	(void)state;
	uint64_t s = 0xc0de;
	for (int n = 0; n < 200000; n++) {
		uint64_t r = llccdc_rand(&s);
		uint32_t size = (uint32_t)wire_rmbe_size((unsigned)(r % 16));
		if (n % 3 == 0)
			size = (uint32_t)(1 + (r >> 8) % 100);	/* small rings reach every edge */
		struct curs a = C((uint16_t)(r >> 16), (uint32_t)((r >> 32) % size));
		if (n % 7 == 0)
			a.wrap = 0xFFFF;
		uint32_t amt = (uint32_t)(llccdc_rand(&s) % ((uint64_t)size + 1));
		struct curs b = curs_add(a, amt, size);
		assert_true(curs_valid(b, size));
		assert_true(curs_diff(a, b, size) == amt);
		assert_false(curs_is_older(b, a));		/* never backwards (7.1 rule) */
		assert_true(curs_cmp(b, a) >= 0);
		if (amt > 0)
			assert_true(curs_cmp(b, a) > 0);
		/* The wrap moves by exactly the laps completed. */
		uint16_t laps = (uint16_t)(b.wrap - a.wrap);
		assert_int_equal(laps, ((uint64_t)a.count + amt) / size);
		/* Free space of a writer at b whose peer consumed up to a. */
		assert_int_equal(curs_free_space(a, b, size), size - amt);
	}
}

/* A long walk: many small steps around a small ring, through the 65536-wrap. */
static void test_walk_never_backwards(void **state)
{
	(void)state;
	const uint32_t S = 16;
	struct curs c = C(0xFFF0, 3), known = c;
	uint64_t s = 7, total = 0;
	for (int n = 0; n < 100000; n++) {
		uint32_t step = (uint32_t)(llccdc_rand(&s) % (S + 1));
		struct curs next = curs_add(c, step, S);
		assert_false(curs_is_older(next, c));
		assert_true(curs_cmp(next, c) >= 0);
		if (step)
			assert_true(curs_take_newer(&known, next));
		else
			assert_false(curs_take_newer(&known, next));
		assert_true(curs_eq(known, next));
		c = next;
		total += step;
	}
	/* The position is the sum of all steps, modulo S * 65536 bytes. */
	uint64_t pos = (0xFFF0ull * S + 3 + total) % (65536ull * S);
	assert_curs(c, (uint16_t)(pos / S), (uint32_t)(pos % S));
}

static void test_is_older(void **state)
{
	(void)state;
	/* docs/protocol/wire-formats.md 7.1: smaller non-zero wrap, or same wrap and smaller
	 * count. */
	assert_true(curs_is_older(C(1, 0x100), C(2, 0)));
	assert_true(curs_is_older(C(2, 0xff), C(2, 0x100)));
	assert_false(curs_is_older(C(2, 0x100), C(2, 0x100)));	/* equal: taken again */
	assert_false(curs_is_older(C(2, 0x101), C(2, 0x100)));
	assert_false(curs_is_older(C(3, 0), C(2, 0x100)));
	assert_false(curs_is_older(C(0, 0x10), C(0xFFFF, 0xfff0)));	/* 65535 -> 0 */
	assert_false(curs_is_older(C(0, 0x10), C(5, 0x10)));	/* wrap 0: never "smaller" */
	assert_true(curs_is_older(C(0, 0x0f), C(0, 0x10)));
	/* Linux's rule is not symmetric at the wrap-around: the old cursor (0xFFFF, x) is
	 * not "older" than (1, y) by it. curs_cmp is the serial order. */
	assert_false(curs_is_older(C(0xFFFF, 0), C(1, 0)));
	assert_true(curs_cmp(C(0xFFFF, 0), C(1, 0)) < 0);

	struct curs k = C(2, 0x100);
	assert_false(curs_take_newer(&k, C(2, 0x80)));
	assert_curs(k, 2, 0x100);
	assert_false(curs_take_newer(&k, C(1, 0x200)));
	assert_true(curs_take_newer(&k, C(2, 0x180)));
	assert_curs(k, 2, 0x180);
	assert_true(curs_take_newer(&k, C(0, 0x10)));		/* wrap 0 taken */
	assert_curs(k, 0, 0x10);
}

static void test_cmp(void **state)
{
	(void)state;
	assert_int_equal(curs_cmp(C(1, 5), C(1, 5)), 0);
	assert_int_equal(curs_cmp(C(1, 4), C(1, 5)), -1);
	assert_int_equal(curs_cmp(C(2, 0), C(1, 5)), 1);
	assert_int_equal(curs_cmp(C(0, 0), C(0xFFFF, 0xFFFF)), 1);	/* across the wrap */
	assert_int_equal(curs_cmp(C(0x7FFF, 0), C(0, 0)), 1);
	assert_int_equal(curs_cmp(C(0x8000, 0), C(0, 0)), -1);	/* half-way: earlier */
}

static void test_free_space_and_window(void **state)
{
	(void)state;
	const uint32_t S = 65536;
	assert_int_equal(curs_free_space(C(0, 0), C(0, 0), S), S);	/* S at start */
	assert_int_equal(curs_free_space(C(0, 0x1000), C(1, 0x1000), S), 0);	/* full */
	assert_int_equal(curs_free_space(C(0, 0xfff0), C(1, 0x10), S), S - 0x20);
	assert_int_equal(curs_free_space(C(0, 0), C(1, 0x10), S), 0);	/* > S: clamped */

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
		cmocka_unit_test(test_pack_shared),
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_diff),
		cmocka_unit_test(test_add_diff_property),
		cmocka_unit_test(test_walk_never_backwards),
		cmocka_unit_test(test_is_older),
		cmocka_unit_test(test_cmp),
		cmocka_unit_test(test_free_space_and_window),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_seq16),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
