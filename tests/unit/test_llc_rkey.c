/* test_llc_rkey.c: CONFIRM RKEY, CONFIRM RKEY CONTINUATION and DELETE RKEY
 * (docs/protocol/wire-formats.md 6.6-6.8): golden vectors of 9, negative and retry flags, entry
 * counts, the DELETE RKEY error-mask bit order, and one error per malformed form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/llc_golden.h"
#include "wire/llc.h"

static void expect_rc(const uint8_t b[LLC_MSG_LEN], int rc)
{
	struct llc_msg m;
	int got = llc_decode(b, LLC_MSG_LEN, &m);
	if (got != rc)
		fail_msg("got %s, want %s", smcr_err_name(got), smcr_err_name(rc));
}

static void test_confirm_rkey(void **state)
{
	(void)state;
	struct llc_msg m = llc_golden("confirm_rkey_req");
	assert_int_equal(m.type, LLC_CONFIRM_RKEY);
	assert_false(m.resp);
	assert_false(m.confirm_rkey.negative);
	assert_false(m.confirm_rkey.retry);
	assert_int_equal(m.confirm_rkey.num_other, 1);
	assert_int_equal(m.confirm_rkey.rkey, 0x2000);
	assert_true(m.confirm_rkey.vaddr == 0x7f00aaaa0000ull);
	assert_int_equal(m.confirm_rkey.other[0].link_num, 2);
	assert_int_equal(m.confirm_rkey.other[0].rkey, 0x2001);
	assert_true(m.confirm_rkey.other[0].vaddr == 0x7f00aaaa0000ull);

	struct llc_msg r = llc_golden("confirm_rkey_resp");
	assert_true(r.resp);
	m.resp = true;		/* Linux's response is the request echoed with 0x80 */
	assert_true(llc_msg_equal(&m, &r));

	/* Negative response as Linux sends it on failure: 0x80|0x20|0x10. */
	r.confirm_rkey.negative = true;
	r.confirm_rkey.retry = true;
	uint8_t out[LLC_MSG_LEN];
	assert_int_equal(llc_encode(&r, out), 0);
	assert_int_equal(out[3], 0xb0);
	struct llc_msg d;
	out[3] = 0xf0;		/* 0x40 is reserved: ignored */
	assert_int_equal(llc_decode(out, sizeof(out), &d), 0);
	assert_true(d.confirm_rkey.negative && d.confirm_rkey.retry && d.resp);

	/* Two other links: entry 2 at offset 30. */
	m.confirm_rkey.num_other = 2;
	m.confirm_rkey.other[1].link_num = 3;
	m.confirm_rkey.other[1].rkey = 0xdeadbeef;
	m.confirm_rkey.other[1].vaddr = 0x1122334455667788ull;
	assert_int_equal(llc_encode(&m, out), 0);
	static const uint8_t e2[13] = { 3, 0xde, 0xad, 0xbe, 0xef,
					0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88 };
	assert_memory_equal(out + 30, e2, 13);
	assert_int_equal(out[43], 0);
	assert_int_equal(llc_decode(out, sizeof(out), &d), 0);
	assert_true(llc_msg_equal(&m, &d));
	/* No other link: both entry slots are zero on the wire. */
	m.confirm_rkey.num_other = 0;
	assert_int_equal(llc_encode(&m, out), 0);
	static const uint8_t zero26[26];
	assert_memory_equal(out + 17, zero26, 26);
}

static void test_confirm_rkey_errors(void **state)
{
	(void)state;
	uint8_t b[LLC_MSG_LEN];
	llc_golden_load("confirm_rkey_req", b);
	b[4] = 3;
	expect_rc(b, -SMCR_E_LLC_CR_COUNT);
	b[4] = 255;
	expect_rc(b, -SMCR_E_LLC_CR_COUNT);
	b[4] = 1;
	b[17] = 0;				/* entry 1 link number */
	expect_rc(b, -SMCR_E_LLC_CR_LINK_ZERO);
	b[4] = 0;				/* ...unless the entry is not in use */
	expect_rc(b, 0);
	llc_golden_load("confirm_rkey_req", b);
	b[4] = 2;				/* entry 2 in use with link 0 */
	expect_rc(b, -SMCR_E_LLC_CR_LINK_ZERO);
	b[30] = 1;
	expect_rc(b, 0);
}

static void test_confirm_rkey_cont(void **state)
{
	(void)state;
	/* No example in 9 (Linux never sends it): built from the 6.7 table. */
	static const uint8_t want[LLC_MSG_LEN] = {
		0x08, 0x2c, 0x00, 0xa0, 0x04,
		0x03, 0x00, 0x00, 0x30, 0x01, 0, 0, 0, 0, 0xa0, 0, 0, 0,
		0x04, 0x00, 0x00, 0x30, 0x02, 0, 0, 0, 0, 0xb0, 0, 0, 0,
		0x05, 0x00, 0x00, 0x30, 0x03, 0, 0, 0, 0, 0xc0, 0, 0, 0,
	};
	struct llc_msg m;
	memset(&m, 0, sizeof(m));
	m.type = LLC_CONFIRM_RKEY_CONT;
	m.resp = true;
	m.confirm_rkey_cont.negative = true;
	m.confirm_rkey_cont.num_remaining = 4;
	for (unsigned i = 0; i < 3; i++) {
		m.confirm_rkey_cont.entry[i].link_num = (uint8_t)(3 + i);
		m.confirm_rkey_cont.entry[i].rkey = 0x3001 + i;
		m.confirm_rkey_cont.entry[i].vaddr = (uint64_t)(0xa0 + 0x10 * i) << 24;
	}
	uint8_t out[LLC_MSG_LEN];
	assert_int_equal(llc_encode(&m, out), 0);
	assert_memory_equal(out, want, LLC_MSG_LEN);
	struct llc_msg d;
	assert_int_equal(llc_decode(out, sizeof(out), &d), 0);
	assert_true(llc_msg_equal(&m, &d));
	assert_true(d.confirm_rkey_cont.negative);

	uint8_t b[LLC_MSG_LEN];
	memcpy(b, want, sizeof(b));
	b[4] = 0;
	expect_rc(b, -SMCR_E_LLC_CRC_COUNT_ZERO);
	b[4] = 1;
	b[5] = 0;				/* entry 1 link 0 */
	expect_rc(b, -SMCR_E_LLC_CRC_LINK_ZERO);
	b[5] = 3;
	b[31] = 0;				/* entry 3 link 0, count 1: not in use */
	expect_rc(b, 0);
	b[4] = 3;
	expect_rc(b, -SMCR_E_LLC_CRC_LINK_ZERO);
	b[4] = 2;
	assert_int_equal(llc_decode(b, sizeof(b), &d), 0);
	assert_int_equal(d.confirm_rkey_cont.entry[2].rkey, 0);	/* not decoded */
}

static void test_delete_rkey(void **state)
{
	(void)state;
	struct llc_msg m = llc_golden("delete_rkey_req");
	assert_int_equal(m.type, LLC_DELETE_RKEY);
	assert_false(m.resp);
	assert_false(m.delete_rkey.negative);
	assert_int_equal(m.delete_rkey.count, 1);
	assert_int_equal(m.delete_rkey.err_mask, 0);
	assert_int_equal(m.delete_rkey.rkey[0], 0x2000);

	/* A negative response for 8 rkeys where rkeys 0 and 6 failed: mask 0x80 >> i. */
	m.resp = true;
	m.delete_rkey.negative = true;
	m.delete_rkey.count = 8;
	for (unsigned i = 0; i < 8; i++)
		m.delete_rkey.rkey[i] = 0x01010101u * (i + 1);
	m.delete_rkey.err_mask = (0x80 >> 0) | (0x80 >> 6);
	uint8_t out[LLC_MSG_LEN];
	assert_int_equal(llc_encode(&m, out), 0);
	assert_int_equal(out[3], 0xa0);
	assert_int_equal(out[4], 8);
	assert_int_equal(out[5], 0x82);
	assert_int_equal(out[6], 0);
	assert_int_equal(out[7], 0);
	for (unsigned i = 0; i < 8; i++)
		for (unsigned k = 0; k < 4; k++)
			assert_int_equal(out[8 + 4 * i + k], i + 1);
	assert_int_equal(out[40] | out[41] | out[42] | out[43], 0);
	struct llc_msg d;
	assert_int_equal(llc_decode(out, sizeof(out), &d), 0);
	assert_true(llc_msg_equal(&m, &d));

	uint8_t b[LLC_MSG_LEN];
	llc_golden_load("delete_rkey_req", b);
	b[4] = 0;
	expect_rc(b, -SMCR_E_LLC_DR_COUNT_ZERO);
	b[4] = 9;
	expect_rc(b, -SMCR_E_LLC_DR_COUNT_RANGE);
	b[4] = 1;
	b[5] = 0x80;				/* rkey 0 failed */
	expect_rc(b, 0);
	b[5] = 0x40;				/* rkey 1 failed, but there is only one */
	expect_rc(b, -SMCR_E_LLC_DR_MASK_RANGE);
	b[4] = 2;
	expect_rc(b, 0);
	b[5] = 0xc1;
	b[4] = 7;
	expect_rc(b, -SMCR_E_LLC_DR_MASK_RANGE);
	b[4] = 8;
	expect_rc(b, 0);
	/* rkeys beyond the count are not decoded. */
	llc_golden_load("delete_rkey_req", b);
	b[12] = 0x99;
	assert_int_equal(llc_decode(b, sizeof(b), &d), 0);
	assert_int_equal(d.delete_rkey.rkey[1], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_confirm_rkey),
		cmocka_unit_test(test_confirm_rkey_errors),
		cmocka_unit_test(test_confirm_rkey_cont),
		cmocka_unit_test(test_delete_rkey),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
