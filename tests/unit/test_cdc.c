/* test_cdc.c: the CDC codec (docs/protocol/wire-formats.md 7): the CDC hex examples of 9 decode to
 * the documented fields and re-encode to the same bytes, each flag bit maps to its own field,
 * the receive checks of 7.1 (length, length byte, type) and the token rule each give their
 * own error, reserved bytes are ignored, random messages and buffers round-trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/llccdc_vectors.h"
#include "wire/cdc.h"
#include "wire/llc.h"

/* A cursor from 64 random bits: wrap from bits 32..47, count from bits 0..31. */
static struct curs rand_curs(uint64_t v)
{
	struct curs c = { (uint16_t)(v >> 32), (uint32_t)v };
	return c;
}

static struct cdc_msg golden(const char *name)
{
	const struct llccdc_vector *v = llccdc_vector_find(name);
	uint8_t b[CDC_MSG_LEN], out[CDC_MSG_LEN];
	struct cdc_msg m;
	assert_non_null(v);
	assert_int_equal(llccdc_vector_bytes(v, b), CDC_MSG_LEN);
	int rc = cdc_decode(b, sizeof(b), &m);
	if (rc)
		fail_msg("%s: %s", name, smcr_err_name(rc));
	assert_int_equal(cdc_encode(&m, out), 0);
	assert_memory_equal(out, b, CDC_MSG_LEN);
	return m;
}

static void assert_curs(struct curs c, uint16_t wrap, uint32_t count)
{
	assert_int_equal(c.wrap, wrap);
	assert_int_equal(c.count, count);
}

static void test_vectors(void **state)
{
	(void)state;
	struct cdc_msg m = golden("cdc_first");
	assert_int_equal(m.seqno, 1);
	assert_int_equal(m.token, 5);
	assert_curs(m.prod, 0, 0x1000);
	assert_curs(m.cons, 0, 0);
	assert_int_equal(cdc_prod_flags_byte(&m.pf), 0);
	assert_int_equal(cdc_conn_flags_byte(&m.cf), 0);

	m = golden("cdc_wrapped");
	assert_int_equal(m.seqno, 7);
	assert_int_equal(m.token, 9);
	assert_curs(m.prod, 1, 0x10);
	assert_curs(m.cons, 0, 0xfff0);
	assert_true(m.pf.write_blocked);
	assert_false(m.pf.urg_pending || m.pf.urg_present || m.pf.cons_upd_req || m.pf.failover);
	assert_int_equal(cdc_conn_flags_byte(&m.cf), 0);

	m = golden("cdc_urgent");
	assert_int_equal(m.seqno, 2);
	assert_curs(m.prod, 0, 0x1005);	/* urgent byte = RMBE byte 0x1004 */
	assert_true(m.pf.urg_pending && m.pf.urg_present);
	assert_false(m.pf.write_blocked || m.pf.cons_upd_req || m.pf.failover);

	m = golden("cdc_close");
	assert_int_equal(m.seqno, 3);
	assert_curs(m.prod, 0, 0x1005);
	assert_curs(m.cons, 0, 0x200);
	assert_true(m.cf.closed);
	assert_false(m.cf.done_writing || m.cf.abort);
	assert_int_equal(cdc_prod_flags_byte(&m.pf), 0);

	m = golden("cdc_failover");
	assert_int_equal(m.seqno, 2);
	assert_int_equal(m.token, 5);
	assert_true(m.pf.failover);
	assert_curs(m.prod, 0, 0);
	assert_curs(m.cons, 0, 0);
	assert_int_equal(cdc_prod_flags_byte(&m.pf), CDC_PF_FAILOVER);

	/* The CDC type is classified for the shared receive queue. */
	assert_int_equal(llc_kind_of(CDC_TYPE), LLC_KIND_CDC);
}

static void test_flag_bits(void **state)
{
	(void)state;
	struct cdc_msg m;
	memset(&m, 0, sizeof(m));
	m.token = 1;
	uint8_t out[CDC_MSG_LEN];
	struct { bool *f; unsigned off; uint8_t mask; } bits[] = {
		{ &m.pf.write_blocked, 24, 0x80 }, { &m.pf.urg_pending, 24, 0x40 },
		{ &m.pf.urg_present, 24, 0x20 }, { &m.pf.cons_upd_req, 24, 0x10 },
		{ &m.pf.failover, 24, 0x08 }, { &m.cf.done_writing, 25, 0x80 },
		{ &m.cf.closed, 25, 0x40 }, { &m.cf.abort, 25, 0x20 },
	};
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
		*bits[i].f = true;
		assert_int_equal(cdc_encode(&m, out), 0);
		assert_int_equal(out[bits[i].off], bits[i].mask);
		assert_int_equal(out[bits[i].off == 24 ? 25 : 24], 0);
		struct cdc_msg d;
		assert_int_equal(cdc_decode(out, sizeof(out), &d), 0);
		assert_true(*(bool *)((char *)&d + ((char *)bits[i].f - (char *)&m)));
		assert_true(cdc_msg_equal(&m, &d));
		*bits[i].f = false;
	}
	/* Both cursors at full width, big-endian. */
	m.seqno = 0xBEEF;
	m.token = 0xCAFEF00D;
	m.prod.wrap = 0x1234;
	m.prod.count = 0x89ABCDEF;
	m.cons.wrap = 0xFFFF;
	m.cons.count = 0xFFFFFFFF;
	assert_int_equal(cdc_encode(&m, out), 0);
	static const uint8_t want[24] = {
		0xfe, 0x2c, 0xbe, 0xef, 0xca, 0xfe, 0xf0, 0x0d, 0, 0, 0x12, 0x34,
		0x89, 0xab, 0xcd, 0xef, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	};
	assert_memory_equal(out, want, sizeof(want));
}

static void test_receive_checks(void **state)
{
	(void)state;
	uint8_t b[CDC_MSG_LEN + 4];
	struct cdc_msg m;
	assert_int_equal(llccdc_vector_bytes(llccdc_vector_find("cdc_close"), b), 44);
	memset(b + 44, 0, 4);
	assert_int_equal(cdc_decode(b, 0, &m), -SMCR_E_CDC_SHORT);
	assert_int_equal(cdc_decode(b, 1, &m), -SMCR_E_CDC_SHORT);
	assert_int_equal(cdc_decode(b, 25, &m), -SMCR_E_CDC_SHORT);
	/* 7.1: Linux takes anything from 26 bytes (through the flags). */
	assert_int_equal(cdc_decode(b, 26, &m), 0);
	assert_int_equal(m.seqno, 3);
	assert_curs(m.cons, 0, 0x200);
	assert_true(m.cf.closed);
	assert_int_equal(cdc_decode(b, 43, &m), 0);
	assert_int_equal(cdc_decode(b, 45, &m), -SMCR_E_CDC_LONG);
	assert_int_equal(cdc_decode(b, 48, &m), -SMCR_E_CDC_LONG);
	static const struct cdc_msg zero;
	assert_memory_equal(&m, &zero, sizeof(m));	/* zeroed on error */

	for (unsigned t = 0; t < 256; t++) {
		if (t == CDC_TYPE)
			continue;
		b[0] = (uint8_t)t;
		assert_int_equal(cdc_decode(b, 44, &m), -SMCR_E_CDC_BAD_TYPE);
		assert_int_equal(cdc_decode(b, 1, &m), -SMCR_E_CDC_BAD_TYPE);
	}
	b[0] = CDC_TYPE;
	for (unsigned l = 0; l < 256; l++) {
		if (l == 44)
			continue;
		b[1] = (uint8_t)l;
		assert_int_equal(cdc_decode(b, 44, &m), -SMCR_E_CDC_BAD_LENGTH);
	}
	b[1] = 44;
	memset(b + 4, 0, 4);
	assert_int_equal(cdc_decode(b, 44, &m), -SMCR_E_CDC_TOKEN_ZERO);

	struct cdc_msg e;
	memset(&e, 0, sizeof(e));
	uint8_t out[CDC_MSG_LEN];
	memset(out, 0xee, sizeof(out));
	assert_int_equal(cdc_encode(&e, out), -SMCR_E_CDC_TOKEN_ZERO);
	assert_int_equal(out[0], 0xee);
	assert_int_equal(smcr_err_errno(-SMCR_E_CDC_SHORT), EPROTO);
	assert_string_not_equal(smcr_err_name(-SMCR_E_CDC_SHORT), smcr_err_name(-SMCR_E_CDC_LONG));
}

static void test_reserved_ignored(void **state)
{
	(void)state;
	uint8_t clean[CDC_MSG_LEN], dirty[CDC_MSG_LEN], out[CDC_MSG_LEN];
	struct cdc_msg a, b;
	for (size_t i = 0; i < cdc_vector_count; i++) {
		assert_int_equal(llccdc_vector_bytes(&cdc_vectors[i], clean), 44);
		memcpy(dirty, clean, sizeof(dirty));
		dirty[8] = dirty[9] = dirty[16] = dirty[17] = 0x5a;
		dirty[24] |= 0x07;
		dirty[25] |= 0x1f;
		memset(dirty + 26, 0xa5, 18);
		assert_int_equal(cdc_decode(clean, 44, &a), 0);
		assert_int_equal(cdc_decode(dirty, 44, &b), 0);
		assert_true(cdc_msg_equal(&a, &b));
		assert_int_equal(cdc_encode(&b, out), 0);
		assert_memory_equal(out, clean, CDC_MSG_LEN);
	}
}

static void test_random(void **state)
{
	(void)state;
	uint64_t s = 0xcdc0cdc0;
	for (int n = 0; n < 20000; n++) {
		struct cdc_msg m, d;
		uint8_t out[CDC_MSG_LEN], again[CDC_MSG_LEN];
		uint64_t r = llccdc_rand(&s);
		memset(&m, 0, sizeof(m));
		m.seqno = (uint16_t)r;
		m.token = (uint32_t)(r >> 16) | 1;
		m.prod = rand_curs(llccdc_rand(&s));
		m.cons = rand_curs(llccdc_rand(&s));
		uint8_t f = (uint8_t)(r >> 48), g = (uint8_t)(r >> 56);
		m.pf.write_blocked = f & 0x80;
		m.pf.urg_pending = f & 0x40;
		m.pf.urg_present = f & 0x20;
		m.pf.cons_upd_req = f & 0x10;
		m.pf.failover = f & 0x08;
		m.cf.done_writing = g & 0x80;
		m.cf.closed = g & 0x40;
		m.cf.abort = g & 0x20;
		assert_int_equal(cdc_encode(&m, out), 0);
		assert_int_equal(out[24], f & 0xf8);
		assert_int_equal(out[25], g & 0xe0);
		assert_int_equal(cdc_decode(out, sizeof(out), &d), 0);
		assert_true(cdc_msg_equal(&m, &d));
		assert_int_equal(cdc_encode(&d, again), 0);
		assert_memory_equal(out, again, CDC_MSG_LEN);
	}
	unsigned ok = 0;
	for (int n = 0; n < 50000; n++) {
		uint8_t b[CDC_MSG_LEN + 4], out[CDC_MSG_LEN];
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (uint8_t)llccdc_rand(&s);
		if (n % 4) {
			b[0] = CDC_TYPE;
			b[1] = 44;
		}
		size_t len = (n % 8) ? CDC_MSG_LEN : (size_t)(llccdc_rand(&s) % sizeof(b));
		struct cdc_msg m, d;
		int rc = cdc_decode(b, len, &m);
		if (rc) {
			assert_int_equal(strncmp(smcr_err_name(rc), "CDC_", 4), 0);
			continue;
		}
		ok++;
		assert_int_equal(cdc_encode(&m, out), 0);
		assert_int_equal(cdc_decode(out, sizeof(out), &d), 0);
		assert_true(cdc_msg_equal(&m, &d));
	}
	assert_true(ok > 30000);
}

static void test_seed_corpus(void **state)
{
	(void)state;
	const char *src = getenv("SMCR_SOURCE_DIR");
	if (!src)
		skip();
	for (size_t i = 0; i < cdc_vector_count; i++) {
		char path[1024];
		uint8_t want[CDC_MSG_LEN], got[CDC_MSG_LEN + 1];
		snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/fuzz_cdc/%s", src,
			 cdc_vectors[i].name);
		FILE *f = fopen(path, "rb");
		if (!f)
			fail_msg("missing seed %s", path);
		size_t n = fread(got, 1, sizeof(got), f);
		fclose(f);
		assert_int_equal(n, CDC_MSG_LEN);
		assert_int_equal(llccdc_vector_bytes(&cdc_vectors[i], want), CDC_MSG_LEN);
		assert_memory_equal(got, want, CDC_MSG_LEN);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_flag_bits),
		cmocka_unit_test(test_receive_checks),
		cmocka_unit_test(test_reserved_ignored),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_seed_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
