/* test_emu_frame.c: the emu provider's frame codec (dev/emu/emu_frame.h): golden bytes of
 * every frame type, one test per decoder violation (each with its own error code), failed
 * decodes leave the cursor unmoved, truncations at every length, encode/decode round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dev/emu/emu_frame.h"

static struct dev_gid gid_of(uint8_t base)
{
	struct dev_gid g;
	for (int i = 0; i < DEV_GID_LEN; i++)
		g.raw[i] = (uint8_t)(base + i);
	return g;
}

static size_t encode(const struct emu_frame *f, const void *payload, uint8_t *buf, size_t cap)
{
	struct wcur w = wcur_make(buf, cap);
	assert_int_equal(emu_frame_encode(&w, f, payload), 0);
	assert_int_equal(w.off, emu_frame_len(f));
	return w.off;
}

static void test_golden_hello(void **state)
{
	(void)state;
	struct emu_frame f = { .type = EMU_F_HELLO };
	f.u.hello.version = EMU_VERSION;
	f.u.hello.src_gid = gid_of(0x10);
	f.u.hello.dst_gid = gid_of(0x80);
	f.u.hello.src_qpn = 0x123456;
	f.u.hello.dst_qpn = 0x000abc;
	uint8_t b[64];
	size_t n = encode(&f, NULL, b, sizeof b);
	const uint8_t want[] = {
		0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x30,	/* HELLO, body 48 */
		'S', 'M', 'E', 'U', 0x01, 0x00, 0x00, 0x00,	/* magic, version, rsvd */
		0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
		0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,	/* src GID */
		0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
		0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f,	/* dst GID */
		0x00, 0x12, 0x34, 0x56, 0x00, 0x00, 0x0a, 0xbc,	/* src QPN, dst QPN */
	};
	assert_int_equal(n, sizeof want);
	assert_memory_equal(b, want, sizeof want);

	struct rcur c = rcur_make(b, n);
	struct emu_frame g;
	assert_int_equal(emu_frame_decode(&c, &g, NULL), 0);
	assert_int_equal(c.off, n);
	assert_int_equal(g.type, EMU_F_HELLO);
	assert_int_equal(g.body_len, 48);
	assert_memory_equal(g.u.hello.src_gid.raw, f.u.hello.src_gid.raw, 16);
	assert_memory_equal(g.u.hello.dst_gid.raw, f.u.hello.dst_gid.raw, 16);
	assert_int_equal(g.u.hello.src_qpn, 0x123456);
	assert_int_equal(g.u.hello.dst_qpn, 0xabc);
}

static void test_golden_small_frames(void **state)
{
	(void)state;
	uint8_t b[64];
	struct emu_frame f;

	memset(&f, 0, sizeof f);
	f.type = EMU_F_HELLO_ACK;
	f.u.hello_ack.status = EMU_HS_BUSY;
	f.u.hello_ack.qpn = 0xfedcba;
	const uint8_t ack_hs[] = { 0x02, 0, 0, 0, 0, 0, 0, 8, 0x03, 0, 0, 0, 0x00, 0xfe, 0xdc, 0xba };
	assert_int_equal(encode(&f, NULL, b, sizeof b), sizeof ack_hs);
	assert_memory_equal(b, ack_hs, sizeof ack_hs);

	memset(&f, 0, sizeof f);
	f.type = EMU_F_ACK;
	f.u.ack.seq = 0x01020304;
	const uint8_t ack[] = { 0x06, 0, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4 };
	assert_int_equal(encode(&f, NULL, b, sizeof b), sizeof ack);
	assert_memory_equal(b, ack, sizeof ack);

	memset(&f, 0, sizeof f);
	f.type = EMU_F_RNR;
	f.u.ack.seq = 0xffffffff;
	const uint8_t rnr[] = { 0x08, 0, 0, 0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff };
	assert_int_equal(encode(&f, NULL, b, sizeof b), sizeof rnr);
	assert_memory_equal(b, rnr, sizeof rnr);

	memset(&f, 0, sizeof f);
	f.type = EMU_F_NAK;
	f.u.nak.seq = 7;
	f.u.nak.code = EMU_NAK_REM_ACCESS;
	const uint8_t nak[] = { 0x07, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 7, 1, 0, 0, 0 };
	assert_int_equal(encode(&f, NULL, b, sizeof b), sizeof nak);
	assert_memory_equal(b, nak, sizeof nak);
}

static void test_golden_data_frames(void **state)
{
	(void)state;
	uint8_t b[64];
	struct emu_frame f;
	const uint8_t pl[3] = { 0xaa, 0xbb, 0xcc };

	memset(&f, 0, sizeof f);
	f.type = EMU_F_WRITE;
	f.payload_len = 3;
	f.u.data.seq = 1;
	f.u.data.raddr = 0x1122334455667788ull;
	f.u.data.rkey = 0x9abcdef0;
	const uint8_t wr[] = { 0x03, 0, 0, 0, 0, 0, 0, 19, 0, 0, 0, 1,
			       0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
			       0x9a, 0xbc, 0xde, 0xf0, 0xaa, 0xbb, 0xcc };
	assert_int_equal(encode(&f, pl, b, sizeof b), sizeof wr);
	assert_memory_equal(b, wr, sizeof wr);

	memset(&f, 0, sizeof f);
	f.type = EMU_F_WRITE_IMM;
	f.flags = EMU_FL_SOLICITED | (7u << EMU_FL_RNR_SHIFT);
	f.payload_len = 0;
	f.u.data.seq = 2;
	f.u.data.raddr = 0x10;
	f.u.data.rkey = 0x20;
	f.u.data.imm = 0xcafef00d;
	const uint8_t wi[] = { 0x04, 0x0f, 0, 0, 0, 0, 0, 20, 0, 0, 0, 2,
			       0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0x20,
			       0xca, 0xfe, 0xf0, 0x0d };
	assert_int_equal(encode(&f, NULL, b, sizeof b), sizeof wi);
	assert_memory_equal(b, wi, sizeof wi);

	memset(&f, 0, sizeof f);
	f.type = EMU_F_SEND;
	f.flags = 3u << EMU_FL_RNR_SHIFT;
	f.payload_len = 3;
	f.u.data.seq = 0x80000000u;
	const uint8_t sd[] = { 0x05, 0x06, 0, 0, 0, 0, 0, 7, 0x80, 0, 0, 0, 0xaa, 0xbb, 0xcc };
	assert_int_equal(encode(&f, pl, b, sizeof b), sizeof sd);
	assert_memory_equal(b, sd, sizeof sd);

	struct rcur c = rcur_make(sd, sizeof sd);
	struct emu_frame g;
	const uint8_t *p = NULL;
	assert_int_equal(emu_frame_decode(&c, &g, &p), 0);
	assert_int_equal(g.type, EMU_F_SEND);
	assert_int_equal(g.flags, 0x06);
	assert_int_equal(g.payload_len, 3);
	assert_int_equal(g.u.data.seq, 0x80000000u);
	assert_ptr_equal(p, sd + 12);
}

/* Decoding returns want; a failure leaves the cursor where it was, success consumes all. */
static void expect_decode(const uint8_t *b, size_t n, int want)
{
	struct rcur c = rcur_make(b, n);
	struct emu_frame f;
	const uint8_t *p = NULL;
	assert_int_equal(emu_frame_decode(&c, &f, &p), want);
	assert_int_equal(c.off, want ? 0 : n);
}

static void test_header_violations(void **state)
{
	(void)state;
	uint8_t b[16] = { 0x06, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1 };
	expect_decode(b, 12, 0);

	b[0] = 0;
	expect_decode(b, 12, -SMCR_E_EMU_F_TYPE);
	b[0] = 9;
	expect_decode(b, 12, -SMCR_E_EMU_F_TYPE);
	b[0] = 0xff;
	expect_decode(b, 12, -SMCR_E_EMU_F_TYPE);
	b[0] = EMU_F_ACK;

	b[1] = EMU_FL_SOLICITED;	/* only SEND and WRITE_IMM carry flags */
	expect_decode(b, 12, -SMCR_E_EMU_F_FLAGS);
	b[1] = 0;

	b[2] = 1;
	expect_decode(b, 12, -SMCR_E_EMU_F_RESERVED);
	b[2] = 0;
	b[3] = 0x80;
	expect_decode(b, 12, -SMCR_E_EMU_F_RESERVED);
	b[3] = 0;

	b[7] = 5;			/* ACK body is exactly 4 */
	expect_decode(b, 13, -SMCR_E_EMU_F_LEN);
	b[7] = 3;
	expect_decode(b, 12, -SMCR_E_EMU_F_LEN);
	b[7] = 4;

	/* SEND: flags beyond the defined bits, and a body shorter than its fixed part. */
	uint8_t s[12] = { 0x05, 0x10, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1 };
	expect_decode(s, 12, -SMCR_E_EMU_F_FLAGS);
	s[1] = 0x0f;
	expect_decode(s, 12, 0);
	s[7] = 3;
	expect_decode(s, 12, -SMCR_E_EMU_F_LEN);
	/* WRITE: no flags at all. */
	uint8_t w[24] = { 0x03, 0x01, 0, 0, 0, 0, 0, 16 };
	expect_decode(w, 24, -SMCR_E_EMU_F_FLAGS);
	w[1] = 0;
	expect_decode(w, 24, 0);
	w[7] = 15;
	expect_decode(w, 24, -SMCR_E_EMU_F_LEN);
}

static void test_too_long(void **state)
{
	(void)state;
	/* A payload of EMU_MAX_MSG is accepted by the header decoder, one more byte is not. */
	uint8_t b[8] = { 0x05, 0, 0, 0 };
	uint32_t ok = EMU_SEND_FIXED + EMU_MAX_MSG;
	b[4] = (uint8_t)(ok >> 24); b[5] = (uint8_t)(ok >> 16); b[6] = (uint8_t)(ok >> 8); b[7] = (uint8_t)ok;
	struct rcur c = rcur_make(b, sizeof b);
	struct emu_frame f;
	assert_int_equal(emu_frame_hdr_decode(&c, &f), 0);
	assert_int_equal(f.payload_len, EMU_MAX_MSG);
	ok++;
	b[4] = (uint8_t)(ok >> 24); b[5] = (uint8_t)(ok >> 16); b[6] = (uint8_t)(ok >> 8); b[7] = (uint8_t)ok;
	c = rcur_make(b, sizeof b);
	assert_int_equal(emu_frame_hdr_decode(&c, &f), -SMCR_E_EMU_F_TOO_LONG);
	assert_int_equal(c.off, 0);
	b[4] = b[5] = b[6] = b[7] = 0xff;
	c = rcur_make(b, sizeof b);
	assert_int_equal(emu_frame_hdr_decode(&c, &f), -SMCR_E_EMU_F_TOO_LONG);

	struct emu_frame e = { .type = EMU_F_WRITE, .payload_len = EMU_MAX_MSG + 1 };
	uint8_t out[64];
	struct wcur w = wcur_make(out, sizeof out);
	assert_int_equal(emu_frame_encode(&w, &e, NULL), -SMCR_E_EMU_F_TOO_LONG);
	assert_int_equal(w.off, 0);
}

static void hello_bytes(uint8_t *b)
{
	struct emu_frame f = { .type = EMU_F_HELLO };
	f.u.hello.version = EMU_VERSION;
	f.u.hello.src_gid = gid_of(1);
	f.u.hello.dst_gid = gid_of(2);
	f.u.hello.src_qpn = 5;
	f.u.hello.dst_qpn = 6;
	encode(&f, NULL, b, 56);
}

static void test_hello_violations(void **state)
{
	(void)state;
	uint8_t b[56];
	hello_bytes(b);
	expect_decode(b, 56, 0);

	b[8] = 'X';
	expect_decode(b, 56, -SMCR_E_EMU_HELLO_MAGIC);
	hello_bytes(b);
	b[12] = 2;
	expect_decode(b, 56, -SMCR_E_EMU_HELLO_VERSION);
	hello_bytes(b);
	b[14] = 1;
	expect_decode(b, 56, -SMCR_E_EMU_F_RESERVED);
	hello_bytes(b);
	memset(b + 48, 0, 4);			/* src QPN 0 */
	expect_decode(b, 56, -SMCR_E_EMU_HELLO_QPN);
	hello_bytes(b);
	b[52] = 1;				/* dst QPN wider than 24 bits */
	expect_decode(b, 56, -SMCR_E_EMU_HELLO_QPN);
}

static void test_ack_nak_violations(void **state)
{
	(void)state;
	uint8_t h[16] = { 0x02, 0, 0, 0, 0, 0, 0, 8, EMU_HS_MAX + 1, 0, 0, 0, 0, 0, 0, 1 };
	expect_decode(h, 16, -SMCR_E_EMU_HELLO_STATUS);
	h[8] = EMU_HS_OK;
	h[9] = 1;
	expect_decode(h, 16, -SMCR_E_EMU_F_RESERVED);
	h[9] = 0;
	h[15] = 0;
	expect_decode(h, 16, -SMCR_E_EMU_HELLO_QPN);
	h[15] = 1;
	expect_decode(h, 16, 0);

	uint8_t n[16] = { 0x07, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0 };
	expect_decode(n, 16, -SMCR_E_EMU_NAK_CODE);
	n[12] = EMU_NAK_MAX + 1;
	expect_decode(n, 16, -SMCR_E_EMU_NAK_CODE);
	n[12] = EMU_NAK_MAX;
	n[15] = 1;
	expect_decode(n, 16, -SMCR_E_EMU_F_RESERVED);
	n[15] = 0;
	expect_decode(n, 16, 0);
}

/* Every prefix of a valid frame is SHORT (never an error code, never a read past it). */
static void test_truncation(void **state)
{
	(void)state;
	uint8_t b[56];
	hello_bytes(b);
	for (size_t n = 0; n < sizeof b; n++) {
		uint8_t *copy = malloc(n ? n : 1);
		memcpy(copy, b, n);
		expect_decode(copy, n, -SMCR_E_SHORT);
		free(copy);
	}
	uint8_t w[27] = { 0x03, 0, 0, 0, 0, 0, 0, 19 };
	for (size_t n = 0; n < sizeof w; n++)
		expect_decode(w, n, -SMCR_E_SHORT);
	expect_decode(w, sizeof w, 0);
	/* Split decoding: header, then the fixed part once it is there. */
	struct rcur c = rcur_make(w, 10);
	struct emu_frame f;
	assert_int_equal(emu_frame_hdr_decode(&c, &f), 0);
	assert_int_equal(c.off, 8);
	assert_int_equal(emu_frame_fixed_decode(&c, &f), -SMCR_E_SHORT);
	assert_int_equal(c.off, 8);
	c.len = 24;
	assert_int_equal(emu_frame_fixed_decode(&c, &f), 0);
	assert_int_equal(c.off, 24);
	assert_int_equal(f.payload_len, 3);
}

static void test_round_trip_random(void **state)
{
	(void)state;
	srand(1234);
	uint8_t buf[256], payload[64];
	for (int it = 0; it < 2000; it++) {
		struct emu_frame f;
		memset(&f, 0, sizeof f);
		f.type = (enum emu_ftype)(EMU_F_MIN + rand() % (EMU_F_MAX - EMU_F_MIN + 1));
		switch (f.type) {
		case EMU_F_HELLO:
			f.u.hello.version = EMU_VERSION;
			f.u.hello.src_gid = gid_of((uint8_t)rand());
			f.u.hello.dst_gid = gid_of((uint8_t)rand());
			f.u.hello.src_qpn = 1 + (uint32_t)rand() % 0xffffff;
			f.u.hello.dst_qpn = 1 + (uint32_t)rand() % 0xffffff;
			break;
		case EMU_F_HELLO_ACK:
			f.u.hello_ack.status = (uint8_t)(rand() % (EMU_HS_MAX + 1));
			f.u.hello_ack.qpn = 1 + (uint32_t)rand() % 0xffffff;
			break;
		case EMU_F_WRITE:
		case EMU_F_WRITE_IMM:
		case EMU_F_SEND:
			if (f.type != EMU_F_WRITE)
				f.flags = (uint8_t)(rand() & EMU_FL_DATA_MASK);
			f.payload_len = (uint32_t)rand() % sizeof payload;
			f.u.data.seq = (uint32_t)rand();
			if (f.type != EMU_F_SEND) {
				f.u.data.raddr = (uint64_t)rand() << 32 | (uint32_t)rand();
				f.u.data.rkey = (uint32_t)rand();
			}
			if (f.type == EMU_F_WRITE_IMM)
				f.u.data.imm = (uint32_t)rand();
			break;
		case EMU_F_ACK:
		case EMU_F_RNR:
			f.u.ack.seq = (uint32_t)rand();
			break;
		case EMU_F_NAK:
			f.u.nak.seq = (uint32_t)rand();
			f.u.nak.code = (uint8_t)(EMU_NAK_MIN + rand() % EMU_NAK_MAX);
			break;
		}
		for (size_t i = 0; i < sizeof payload; i++)
			payload[i] = (uint8_t)rand();
		size_t n = encode(&f, payload, buf, sizeof buf);
		struct rcur c = rcur_make(buf, n);
		struct emu_frame g;
		const uint8_t *p;
		assert_int_equal(emu_frame_decode(&c, &g, &p), 0);
		assert_int_equal(c.off, n);
		assert_int_equal(g.type, f.type);
		assert_int_equal(g.flags, f.flags);
		assert_int_equal(g.payload_len, emu_frame_is_data(f.type) ? f.payload_len : 0);
		if (g.payload_len)
			assert_memory_equal(p, payload, g.payload_len);
		uint8_t again[256];
		size_t m = encode(&g, p, again, sizeof again);
		assert_int_equal(m, n);
		assert_memory_equal(again, buf, n);
	}
}

static void test_encode_checks(void **state)
{
	(void)state;
	uint8_t b[64];
	struct wcur w = wcur_make(b, 11);
	struct emu_frame f = { .type = EMU_F_ACK };
	assert_int_equal(emu_frame_encode(&w, &f, NULL), -SMCR_E_NOSPACE);
	assert_int_equal(w.off, 0);
	w = wcur_make(b, sizeof b);
	f.type = (enum emu_ftype)0;
	assert_int_equal(emu_frame_encode(&w, &f, NULL), -SMCR_E_EMU_F_TYPE);
	f.type = EMU_F_WRITE;
	f.flags = EMU_FL_SOLICITED;
	assert_int_equal(emu_frame_encode(&w, &f, NULL), -SMCR_E_EMU_F_FLAGS);
	memset(&f, 0, sizeof f);
	f.type = EMU_F_HELLO;
	f.u.hello.version = 1;
	assert_int_equal(emu_frame_encode(&w, &f, NULL), -SMCR_E_EMU_HELLO_QPN);
	f.type = EMU_F_NAK;
	assert_int_equal(emu_frame_encode(&w, &f, NULL), -SMCR_E_EMU_NAK_CODE);
	assert_int_equal(w.off, 0);
	/* Distinct codes for distinct violations. */
	const int codes[] = { SMCR_E_EMU_F_TYPE, SMCR_E_EMU_F_FLAGS, SMCR_E_EMU_F_RESERVED,
			      SMCR_E_EMU_F_LEN, SMCR_E_EMU_F_TOO_LONG, SMCR_E_EMU_HELLO_MAGIC,
			      SMCR_E_EMU_HELLO_VERSION, SMCR_E_EMU_HELLO_QPN,
			      SMCR_E_EMU_HELLO_STATUS, SMCR_E_EMU_NAK_CODE };
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
		for (size_t j = i + 1; j < sizeof codes / sizeof codes[0]; j++)
			assert_int_not_equal(codes[i], codes[j]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_hello),
		cmocka_unit_test(test_golden_small_frames),
		cmocka_unit_test(test_golden_data_frames),
		cmocka_unit_test(test_header_violations),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_hello_violations),
		cmocka_unit_test(test_ack_nak_violations),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_round_trip_random),
		cmocka_unit_test(test_encode_checks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
