/* test_tcpopt.c: the SMC TCP option codec (docs/protocol/wire-formats.md 1): golden bytes, each
 * malformed form with its own error, options-block scanning with Linux's acceptance rule, and a
 * property test over random blocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/clc_vectors.h"
#include "wire/tcpopt.h"

static void test_encode_golden(void **state)
{
	(void)state;
	uint8_t b[16];
	size_t n = 0;

	memset(b, 0xAA, sizeof(b));
	assert_int_equal(tcpopt_encode(b, sizeof(b), &n), 0);
	assert_int_equal(n, 6);
	assert_memory_equal(b, vec_tcpopt, 6);
	assert_int_equal(b[6], 0xAA);	/* nothing written past the option */
	assert_int_equal(tcpopt_encode_aligned(b, sizeof(b), &n), 0);
	assert_int_equal(n, 8);
	assert_memory_equal(b, vec_tcpopt_aligned, 8);

	/* Too little room: NOSPACE, cursor unmoved, nothing written. */
	struct wcur w = wcur_make(b, 5);
	memset(b, 0, sizeof(b));
	assert_int_equal(tcpopt_put(&w), -SMCR_E_NOSPACE);
	assert_int_equal(w.off, 0);
	w = wcur_make(b, 7);
	assert_int_equal(tcpopt_put_aligned(&w), -SMCR_E_NOSPACE);
	assert_int_equal(w.off, 0);
	assert_int_equal(b[0], 0);
	assert_int_equal(tcpopt_encode(b, 5, &n), -SMCR_E_NOSPACE);
	assert_int_equal(tcpopt_encode_aligned(b, 7, &n), -SMCR_E_NOSPACE);
}

static void test_decode_golden(void **state)
{
	(void)state;
	assert_int_equal(tcpopt_decode(vec_tcpopt, sizeof(vec_tcpopt)), 0);
	struct rcur c = rcur_make(vec_tcpopt_aligned, sizeof(vec_tcpopt_aligned));
	assert_int_equal(rcur_skip(&c, 2), 0);
	assert_int_equal(tcpopt_get(&c), 0);
	assert_int_equal(c.off, 8);
	assert_int_equal(TCPOPT_SMC_EXID, 0xE2D4C3D9u);
}

static void test_decode_errors(void **state)
{
	(void)state;
	uint8_t b[8];

	/* short: every truncation of the option */
	for (size_t n = 0; n < 6; n++)
		assert_int_equal(tcpopt_decode(vec_tcpopt, n), -SMCR_E_TCPOPT_SHORT);
	/* wrong kind (checked before anything else) */
	memcpy(b, vec_tcpopt, 6);
	b[0] = 253;
	assert_int_equal(tcpopt_decode(b, 6), -SMCR_E_TCPOPT_WRONG_KIND);
	assert_int_equal(tcpopt_decode(b, 1), -SMCR_E_TCPOPT_WRONG_KIND);
	/* wrong length byte: 5, 8, 0 */
	static const uint8_t lens[] = { 0, 1, 2, 5, 7, 8, 10, 255 };
	for (size_t i = 0; i < sizeof(lens); i++) {
		memcpy(b, vec_tcpopt, 6);
		b[1] = lens[i];
		assert_int_equal(tcpopt_decode(b, 6), -SMCR_E_TCPOPT_WRONG_LEN);
	}
	/* wrong ExID, each of its 4 bytes */
	for (int i = 2; i < 6; i++) {
		memcpy(b, vec_tcpopt, 6);
		b[i] ^= 0x01;
		assert_int_equal(tcpopt_decode(b, 6), -SMCR_E_TCPOPT_WRONG_EXID);
	}
	/* SMCD eyecatcher is not the option's ExID */
	memcpy(b, vec_tcpopt, 6);
	b[5] = 0xC4;
	assert_int_equal(tcpopt_decode(b, 6), -SMCR_E_TCPOPT_WRONG_EXID);
	/* trailing bytes */
	memcpy(b, vec_tcpopt, 6);
	b[6] = 0;
	assert_int_equal(tcpopt_decode(b, 7), -SMCR_E_TCPOPT_TRAILING);
	/* a failed get leaves the cursor where it was */
	b[0] = 254; b[1] = 6; b[2] = 0;
	struct rcur c = rcur_make(b, 6);
	assert_int_equal(tcpopt_get(&c), -SMCR_E_TCPOPT_WRONG_EXID);
	assert_int_equal(c.off, 0);
	/* errno and (absent) decline code of the rows */
	assert_int_equal(smcr_err_errno(-SMCR_E_TCPOPT_WRONG_EXID), EPROTO);
	assert_int_equal(smcr_err_decline(-SMCR_E_TCPOPT_SHORT), 0);
	assert_string_equal(smcr_err_name(-SMCR_E_TCPOPT_BLOCK_OVERRUN), "TCPOPT_BLOCK_OVERRUN");
}

static int find(const uint8_t *b, size_t n, bool *found)
{
	*found = true;	/* must be overwritten */
	return tcpopt_find(b, n, found);
}

static void test_find(void **state)
{
	(void)state;
	bool f;

	/* Linux SYN: MSS, NOP, NOP, SMC */
	assert_int_equal(find(vec_tcpopt_syn, sizeof(vec_tcpopt_syn), &f), 0);
	assert_true(f);
	/* empty block, only NOPs, only EOL */
	assert_int_equal(find(NULL, 0, &f), 0);
	assert_false(f);
	static const uint8_t nops[] = { 1, 1, 1, 0 };
	assert_int_equal(find(nops, sizeof(nops), &f), 0);
	assert_false(f);
	/* Full Linux SYN options: MSS, SACK-perm, TS, NOP, WS, then SMC (at the end) */
	static const uint8_t full[] = { 2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0,
					1, 3, 3, 7, 1, 1, 254, 6, 0xe2, 0xd4, 0xc3, 0xd9 };
	assert_int_equal(find(full, sizeof(full), &f), 0);
	assert_true(f);
	/* SMC first, without padding, followed by other options */
	static const uint8_t first[] = { 254, 6, 0xe2, 0xd4, 0xc3, 0xd9, 2, 4, 5, 0xb4 };
	assert_int_equal(find(first, sizeof(first), &f), 0);
	assert_true(f);
	/* Linux accepts an even length >= 6: length 8 with two extra bytes */
	static const uint8_t len8[] = { 254, 8, 0xe2, 0xd4, 0xc3, 0xd9, 0, 0 };
	assert_int_equal(find(len8, sizeof(len8), &f), 0);
	assert_true(f);
	/* ... but not an odd length (7) nor a length below 6 carrying a prefix of the ExID */
	static const uint8_t len7[] = { 254, 7, 0xe2, 0xd4, 0xc3, 0xd9, 0 };
	assert_int_equal(find(len7, sizeof(len7), &f), 0);
	assert_false(f);
	static const uint8_t len4[] = { 254, 4, 0xe2, 0xd4, 1, 1 };
	assert_int_equal(find(len4, sizeof(len4), &f), 0);
	assert_false(f);
	/* another RFC 6994 experiment in option 254 (e.g. TCP Fast Open's 0xF989) */
	static const uint8_t other[] = { 254, 4, 0xf9, 0x89, 1, 1 };
	assert_int_equal(find(other, sizeof(other), &f), 0);
	assert_false(f);
	/* kind 253 with the SMC ExID is not SMC */
	static const uint8_t k253[] = { 253, 6, 0xe2, 0xd4, 0xc3, 0xd9 };
	assert_int_equal(find(k253, sizeof(k253), &f), 0);
	assert_false(f);
	/* after EOL nothing counts, even a valid SMC option */
	static const uint8_t eol[] = { 1, 0, 254, 6, 0xe2, 0xd4, 0xc3, 0xd9 };
	assert_int_equal(find(eol, sizeof(eol), &f), 0);
	assert_false(f);
	/* the ExID bytes inside another option's data are not an option */
	static const uint8_t inside[] = { 8, 10, 254, 6, 0xe2, 0xd4, 0xc3, 0xd9, 0, 0 };
	assert_int_equal(find(inside, sizeof(inside), &f), 0);
	assert_false(f);
}

static void test_find_hostile(void **state)
{
	(void)state;
	bool f;

	/* kind byte without its length byte */
	static const uint8_t t1[] = { 1, 1, 2 };
	assert_int_equal(find(t1, sizeof(t1), &f), -SMCR_E_TCPOPT_BLOCK_TRUNCATED);
	assert_false(f);
	/* length 0 and 1 */
	static const uint8_t l0[] = { 2, 0, 5, 0xb4 };
	assert_int_equal(find(l0, sizeof(l0), &f), -SMCR_E_TCPOPT_BLOCK_BAD_LEN);
	assert_false(f);
	static const uint8_t l1[] = { 254, 1, 0xe2, 0xd4, 0xc3, 0xd9 };
	assert_int_equal(find(l1, sizeof(l1), &f), -SMCR_E_TCPOPT_BLOCK_BAD_LEN);
	/* length past the end, including an SMC option cut short */
	static const uint8_t over[] = { 2, 5, 5, 0xb4 };
	assert_int_equal(find(over, sizeof(over), &f), -SMCR_E_TCPOPT_BLOCK_OVERRUN);
	assert_int_equal(find(vec_tcpopt, 5, &f), -SMCR_E_TCPOPT_BLOCK_OVERRUN);
	assert_false(f);
	/* a valid SMC option followed by garbage: error, and *found false (fall back) */
	static const uint8_t then_bad[] = { 254, 6, 0xe2, 0xd4, 0xc3, 0xd9, 3, 9 };
	assert_int_equal(find(then_bad, sizeof(then_bad), &f), -SMCR_E_TCPOPT_BLOCK_OVERRUN);
	assert_false(f);
	/* every truncation of the Linux SYN block: never reads past, fails or says "no" */
	for (size_t n = 0; n < sizeof(vec_tcpopt_syn); n++) {
		uint8_t *b = malloc(n ? n : 1);	/* exact-size heap copy: ASan sees overreads */
		assert_non_null(b);
		memcpy(b, vec_tcpopt_syn, n);
		int rc = find(b, n, &f);
		assert_true(rc == 0 || rc == -SMCR_E_TCPOPT_BLOCK_OVERRUN ||
			    rc == -SMCR_E_TCPOPT_BLOCK_TRUNCATED);
		assert_false(f);
		free(b);
	}
}

/* Reference: Linux's scan written the obvious way, used to check tcpopt_find on random
 * blocks (the oracle only runs on well-formed blocks it builds itself). */
static void test_find_random(void **state)
{
	(void)state;
	srand(7609);
	for (int iter = 0; iter < 20000; iter++) {
		uint8_t b[40];
		size_t n = 0;
		bool want = false, ended = false;
		while (n < sizeof(b)) {
			int what = rand() % 6;
			if (what == 0 && n + 1 <= sizeof(b)) {
				b[n++] = 1;
			} else if (what == 1 && n + 6 <= sizeof(b)) {
				memcpy(b + n, vec_tcpopt, 6);
				if (rand() % 4 == 0)
					b[n + 2 + rand() % 4] ^= 0x10;	/* another ExID */
				else if (!ended)
					want = true;
				n += 6;
			} else if (what == 2 && n + 1 <= sizeof(b)) {
				b[n++] = 0;
				ended = true;
			} else {
				size_t l = 2 + (size_t)(rand() % 8);
				if (n + l > sizeof(b))
					break;
				b[n] = (uint8_t)(2 + rand() % 250);
				if (b[n] == 254)
					b[n] = 253;
				b[n + 1] = (uint8_t)l;
				for (size_t k = 2; k < l; k++)
					b[n + k] = (uint8_t)rand();
				n += l;
			}
			/* after EOL the bytes are ignored, whatever they are */
			if (ended && n < sizeof(b) && rand() % 3 == 0)
				b[n++] = (uint8_t)rand();
		}
		bool f;
		int rc = tcpopt_find(b, n, &f);
		/* well-formed up to the first EOL, which ends the scan */
		assert_int_equal(rc, 0);
		assert_int_equal(f, want);
		/* random garbage: no crash; an error always means "not found" */
		for (size_t k = 0; k < n; k++)
			b[k] = (uint8_t)rand();
		rc = tcpopt_find(b, n, &f);
		if (rc)
			assert_false(f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_golden),
		cmocka_unit_test(test_decode_golden),
		cmocka_unit_test(test_decode_errors),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_find_hostile),
		cmocka_unit_test(test_find_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
