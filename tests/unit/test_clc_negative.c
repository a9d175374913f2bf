/* test_clc_negative.c: every malformed CLC form gets its own error, asserted exactly
 * (docs/protocol/wire-formats.md 2.4, 3.5, 4, 5.1, 8.1, 8.2), plus what must still decode (SMCD
 * eyecatchers, reserved bits, typev1 none / SMC-D only flagged, > 8 IPv6 prefixes), and the
 * encoders' refusals. Every decode runs on an exact-size heap copy, so a read past the end
 * is caught by ASan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/clc_vectors.h"
#include "wire/clc.h"

static struct clc_msg M;	/* last decode result */

/* clc_decode on an exact-size heap copy of b[0..n). */
static int dec(const uint8_t *b, size_t n)
{
	uint8_t *h = malloc(n ? n : 1);
	assert_non_null(h);
	memcpy(h, b, n);
	int rc = clc_decode(h, n, &M);
	free(h);
	return rc;
}

/* Copy of v with byte off set to val, decoded. */
static int dec_set(const uint8_t *v, size_t n, size_t off, uint8_t val)
{
	uint8_t b[CLC_MSG_MAX_LEN + 8];
	memcpy(b, v, n);
	b[off] = val;
	return dec(b, n);
}

/* Copy of v resized to newlen (body kept/cut/zero-extended, trailer moved to the new end,
 * length field updated) into out. */
static size_t resize(const uint8_t *v, size_t n, size_t newlen, uint8_t *out)
{
	size_t body = (n < newlen ? n : newlen) - 4;
	memset(out, 0, newlen);
	memcpy(out, v, body);
	memcpy(out + newlen - 4, v + n - 4, 4);
	out[5] = (uint8_t)(newlen >> 8);
	out[6] = (uint8_t)newlen;
	return newlen;
}

static void test_framing(void **state)
{
	(void)state;
	uint8_t b[CLC_MSG_MAX_LEN + 8];

	for (size_t i = 0; i < clc_vectors_count; i++) {
		const uint8_t *v = clc_vectors[i].bytes;
		size_t n = clc_vectors[i].len;
		/* short: fewer than 8 bytes */
		for (size_t k = 0; k < CLC_HDR_LEN; k++)
			assert_int_equal(dec(v, k), -SMCR_E_CLC_SHORT_HEADER);
		/* truncated: header complete, message not */
		for (size_t k = CLC_HDR_LEN; k < n; k++)
			assert_int_equal(dec(v, k), -SMCR_E_CLC_TRUNCATED);
		/* long: one byte more than the length field */
		memcpy(b, v, n);
		b[n] = 0;
		assert_int_equal(dec(b, n + 1), -SMCR_E_CLC_TRAILING);
		/* bad eyecatcher, each byte */
		for (size_t k = 0; k < 4; k++)
			assert_int_equal(dec_set(v, n, k, (uint8_t)(v[k] ^ 0x20)),
					 -SMCR_E_CLC_BAD_EYECATCHER);
		/* bad trailer, each byte */
		for (size_t k = n - 4; k < n; k++)
			assert_int_equal(dec_set(v, n, k, (uint8_t)(v[k] ^ 0x20)),
					 -SMCR_E_CLC_BAD_TRAILER);
		/* SMCD at either end is accepted (2.1, 2.4 item 4) and re-encodes */
		assert_int_equal(dec_set(v, n, 3, 0xC4), 0);
		assert_int_equal(M.proposal.f.eye, CLC_EYE_SMCD);	/* f is first in all */
		assert_int_equal(dec_set(v, n, n - 1, 0xC4), 0);
		assert_int_equal(M.accept.f.trail, CLC_EYE_SMCD);
		/* unknown types */
		static const uint8_t types[] = { 0, 5, 6, 0x80, 0xff };
		for (size_t k = 0; k < sizeof(types); k++)
			assert_int_equal(dec_set(v, n, 4, types[k]), -SMCR_E_CLC_BAD_TYPE);
		/* version 0, whatever the flags */
		assert_int_equal(dec_set(v, n, 7, (uint8_t)(v[7] & 0x0f)), -SMCR_E_CLC_BAD_VERSION);
		/* length field too small for the type / too big */
		assert_int_equal(dec_set(v, n, 6, 20), -SMCR_E_CLC_LEN_TOO_SMALL);
		memcpy(b, v, n);
		b[5] = 0xff;
		assert_int_equal(dec(b, n), -SMCR_E_CLC_LEN_TOO_BIG);
		/* a length field that does not match the buffer: truncated or trailing
		 * (Declines: 27/29 and 43/45 are outside or inside the 28..44 bounds) */
		memcpy(b, v, n);
		if (v[4] == CLC_DECLINE) {
			b[6] = (uint8_t)(b[6] + 1);
			assert_int_equal(dec(b, n), n == 28 ? -SMCR_E_CLC_TRUNCATED
							    : -SMCR_E_CLC_LEN_TOO_BIG);
			b[6] = (uint8_t)(b[6] - 2);
			assert_int_equal(dec(b, n), n == 28 ? -SMCR_E_CLC_LEN_TOO_SMALL
							    : -SMCR_E_CLC_TRAILING);
			continue;
		}
		b[6] = (uint8_t)(b[6] + 1);
		assert_int_equal(dec(b, n), -SMCR_E_CLC_TRUNCATED);
		b[6] = (uint8_t)(b[6] - 2);
		assert_int_equal(dec(b, n), n == CLC_PROPOSAL_MIN_LEN ? -SMCR_E_CLC_LEN_TOO_SMALL
								     : -SMCR_E_CLC_TRAILING);
	}
	/* Bounds per type: Proposal max 1024, Decline max 44, Accept min 48. */
	assert_int_equal(clc_peek_header("\xe2\xd4\xc3\xd9\x01\x04\x01\x10", 8, NULL, NULL, NULL),
			 -SMCR_E_CLC_LEN_TOO_BIG);
	assert_int_equal(clc_peek_header("\xe2\xd4\xc3\xd9\x01\x04\x00\x10", 8, NULL, NULL, NULL),
			 0);
	assert_int_equal(clc_peek_header("\xe2\xd4\xc3\xd9\x04\x00\x2d\x10", 8, NULL, NULL, NULL),
			 -SMCR_E_CLC_LEN_TOO_BIG);
	assert_int_equal(clc_peek_header("\xe2\xd4\xc3\xd9\x02\x00\x2f\x10", 8, NULL, NULL, NULL),
			 -SMCR_E_CLC_LEN_TOO_SMALL);
	assert_int_equal(clc_peek_header("\xe2\xd4\xc3\xd9\x01\x00\x33\x10", 8, NULL, NULL, NULL),
			 -SMCR_E_CLC_LEN_TOO_SMALL);
	/* Framing errors carry no decline (abort), field errors do. */
	assert_int_equal(smcr_err_decline(-SMCR_E_CLC_BAD_EYECATCHER), 0);
	assert_int_equal(smcr_err_decline(-SMCR_E_CLC_TRUNCATED), 0);
	assert_int_equal(smcr_err_decline(-SMCR_E_CLC_ACC_V2), 0x030c0000);
	assert_int_equal(smcr_err_decline(-SMCR_E_CLC_ACC_SMCD), 0x03040000);
	assert_int_equal(smcr_err_decline(-SMCR_E_CLC_PROP_PREFIX_COUNT), 0x09990000);
	assert_int_equal(smcr_err_errno(-SMCR_E_CLC_BAD_TRAILER), EPROTO);
	assert_int_equal(smcr_err_errno(-SMCR_E_CLC_ENC_FIELD), EINVAL);
}

/* A server tells an SMC client from a plain one by a prefix of the eyecatcher. */
static void test_eye_prefix(void **state)
{
	(void)state;
	const uint8_t smcr[] = { 0xE2, 0xD4, 0xC3, 0xD9, 0x01 }, smcd[] = { 0xE2, 0xD4, 0xC3, 0xC4 };
	const uint8_t get[] = { 'G', 'E', 'T', ' ' }, late[] = { 0xE2, 0xD4, 0xC3, 0x00 };
	const uint8_t half[] = { 0xE2, 0x00 };
	for (size_t n = 0; n <= sizeof(smcr); n++)
		assert_true(clc_eye_prefix(smcr, n));
	assert_true(clc_eye_prefix(smcd, sizeof(smcd)));
	assert_false(clc_eye_prefix(get, 1));
	assert_false(clc_eye_prefix(late, sizeof(late)));
	assert_true(clc_eye_prefix(late, 3));
	assert_false(clc_eye_prefix(half, sizeof(half)));
	assert_true(clc_eye_prefix(half, 1));
}

static void test_proposal_v1(void **state)
{
	(void)state;
	uint8_t b[CLC_MSG_MAX_LEN];
	const uint8_t *p52 = vec_prop_hw52;
	size_t n;

	/* IP-area offset beyond the message: N = 5 leaves 3 bytes, N = 200 is outside */
	assert_int_equal(dec_set(p52, 52, 39, 5), -SMCR_E_CLC_PROP_IPAREA_OFFSET);
	assert_int_equal(dec_set(p52, 52, 39, 200), -SMCR_E_CLC_PROP_IPAREA_OFFSET);
	memcpy(b, p52, 52);
	b[38] = 0xff;
	assert_int_equal(dec(b, 52), -SMCR_E_CLC_PROP_IPAREA_OFFSET);
	/* N = 40 in a 52-byte message (what 4.11 servers would see reversed) */
	assert_int_equal(dec_set(vec_prop_smcr92, 92, 39, 80), -SMCR_E_CLC_PROP_IPAREA_OFFSET);
	/* prefix count beyond the bytes */
	assert_int_equal(dec_set(p52, 52, 47, 1), -SMCR_E_CLC_PROP_PREFIX_COUNT);
	assert_int_equal(dec_set(p52, 52, 47, 255), -SMCR_E_CLC_PROP_PREFIX_COUNT);
	assert_int_equal(dec_set(vec_prop_ipv6_109, 109, 87, 2), -SMCR_E_CLC_PROP_PREFIX_COUNT);
	/* length not 40 + N + 8 + 17n + 4: extra bytes after the prefixes */
	n = resize(p52, 52, 55, b);
	assert_int_equal(dec(b, n), -SMCR_E_CLC_PROP_BAD_LENGTH);
	n = resize(vec_prop_ipv6_109, 109, 109 + 16, b);
	assert_int_equal(dec(b, n), -SMCR_E_CLC_PROP_BAD_LENGTH);
	/* N that moves the IP area so it no longer ends at the trailer */
	assert_int_equal(dec_set(vec_prop_smcr92, 92, 39, 39), -SMCR_E_CLC_PROP_BAD_LENGTH);
	/* prefix lengths */
	assert_int_equal(dec_set(p52, 52, 44, 33), -SMCR_E_CLC_PROP_IPV4_PREFIX);
	assert_int_equal(dec_set(p52, 52, 44, 32), 0);
	assert_int_equal(dec_set(vec_prop_ipv6_109, 109, 104, 129), -SMCR_E_CLC_PROP_IPV6_PREFIX);
	assert_int_equal(dec_set(vec_prop_ipv6_109, 109, 104, 128), 0);

	/* Any N the length allows (RFC layout): N = 17, 52 + 17 bytes */
	memset(b, 0, sizeof(b));
	memcpy(b, p52, 38);
	b[6] = 69;
	b[39] = 17;
	memcpy(b + 57, p52 + 40, 8);
	memcpy(b + 65, p52 + 48, 4);
	assert_int_equal(dec(b, 69), 0);
	assert_int_equal(M.proposal.iparea_offset, 17);
	assert_int_equal(M.proposal.ipv4_subnet, 0x7f000000);
	assert_int_equal(M.proposal.ism_gid, 0);	/* N < 40: no SMC-D area */
	/* A v1 N = 40 area carrying an SMC-D GID (Linux 4.19+ SMC-D v1) is read. */
	memcpy(b, vec_prop_smcr92, 92);
	b[7] = 0x13;	/* both paths */
	b[47] = 0x42;
	assert_int_equal(dec(b, 92), 0);
	assert_int_equal(M.proposal.ism_gid, 0x42);
	assert_int_equal(M.proposal.typev1, CLC_PATH_BOTH);
	assert_true(M.proposal.offers_smcr_v1);

	/* typev1 none or SMC-D only: decodes, flagged for a decline */
	assert_int_equal(dec_set(p52, 52, 7, 0x12), 0);
	assert_false(M.proposal.offers_smcr_v1);
	assert_int_equal(dec_set(p52, 52, 7, 0x11), 0);
	assert_false(M.proposal.offers_smcr_v1);
	/* reserved bits of a v1 byte 7 are kept (so they re-encode) but change nothing */
	assert_int_equal(dec_set(p52, 52, 7, 0x1c), 0);
	assert_int_equal(M.proposal.typev2, 3);
	assert_false(M.proposal.has_v2ext);
	assert_true(M.proposal.offers_smcr_v1);
	/* reserved bytes 45-46 ignored */
	assert_int_equal(dec_set(p52, 52, 45, 0xff), 0);
}

/* A v1, N = 0 Proposal with count IPv6 prefixes (prefix i = i, length 64 + i). */
static size_t prop_with_prefixes(unsigned count, uint8_t *b)
{
	size_t n = 52 + 17 * (size_t)count;
	memset(b, 0, n);
	memcpy(b, vec_prop_hw52, 48);
	b[5] = (uint8_t)(n >> 8);
	b[6] = (uint8_t)n;
	b[40] = b[44] = 0;
	b[47] = (uint8_t)count;
	for (unsigned i = 0; i < count; i++) {
		b[48 + 17 * i] = 0x20;
		b[48 + 17 * i + 15] = (uint8_t)i;
		b[48 + 17 * i + 16] = (uint8_t)(64 + i);
	}
	memcpy(b + n - 4, "\xe2\xd4\xc3\xd9", 4);
	return n;
}

static void test_proposal_prefixes(void **state)
{
	(void)state;
	uint8_t b[CLC_MSG_MAX_LEN], out[CLC_MSG_MAX_LEN];
	size_t n, o;

	/* 8 prefixes: all kept, re-encodes exactly */
	n = prop_with_prefixes(8, b);
	assert_int_equal(dec(b, n), 0);
	assert_int_equal(M.proposal.ipv6_count, 8);
	assert_int_equal(M.proposal.ipv6[7].addr[15], 7);
	assert_int_equal(M.proposal.ipv6[7].len, 71);
	assert_int_equal(clc_encode(&M, out, sizeof(out), &o), 0);
	assert_int_equal(o, n);
	assert_memory_equal(out, b, n);
	/* 12 prefixes: the full count is validated against the length, 8 are kept */
	n = prop_with_prefixes(12, b);
	assert_int_equal(dec(b, n), 0);
	assert_int_equal(M.proposal.ipv6_count, 12);
	assert_int_equal(M.proposal.ipv6[7].addr[15], 7);
	/* ... a bad length in an entry past the 8th is still caught */
	b[48 + 17 * 11 + 16] = 200;
	assert_int_equal(dec(b, n), -SMCR_E_CLC_PROP_IPV6_PREFIX);
	/* ... and such a Proposal cannot be re-encoded from the struct */
	n = prop_with_prefixes(12, b);
	assert_int_equal(dec(b, n), 0);
	assert_int_equal(clc_encode(&M, out, sizeof(out), &o), -SMCR_E_CLC_ENC_PREFIX_COUNT);
	/* count one above what the bytes hold */
	b[47] = 13;
	assert_int_equal(dec(b, n), -SMCR_E_CLC_PROP_PREFIX_COUNT);
	b[47] = 11;
	assert_int_equal(dec(b, n), -SMCR_E_CLC_PROP_BAD_LENGTH);
}

static void test_proposal_v2(void **state)
{
	(void)state;
	uint8_t b[CLC_MSG_MAX_LEN];
	const uint8_t *l92 = vec_prop_linux92, *x = vec_prop_v2ext;
	size_t n;

	/* a version-2 Proposal without the 40-byte SMC-D area */
	assert_int_equal(dec_set(vec_prop_hw52, 52, 7, 0x28), -SMCR_E_CLC_PROP_V2_SHORT);
	/* N above 40, or not 40 while a v1 path is offered */
	assert_int_equal(dec_set(l92, 92, 39, 41), -SMCR_E_CLC_PROP_V2_IPAREA_OFFSET);
	assert_int_equal(dec_set(l92, 92, 39, 0), -SMCR_E_CLC_PROP_V2_IPAREA_OFFSET);
	assert_int_equal(dec_set(l92, 92, 39, 32), -SMCR_E_CLC_PROP_V2_IPAREA_OFFSET);
	/* prefix count beyond the message */
	assert_int_equal(dec_set(l92, 92, 87, 1), -SMCR_E_CLC_PROP_PREFIX_COUNT);
	/* no v1 path: no IP area, so a 92-byte message has 8 bytes too many */
	assert_int_equal(dec_set(l92, 92, 7, 0x2a), -SMCR_E_CLC_PROP_V2_LENGTH);
	/* ... and 84 bytes with N = 0 is complete; flagged (nothing for SMC-R v1) */
	n = resize(l92, 92, 84, b);
	b[7] = 0x2a;
	b[39] = 0;
	assert_int_equal(dec(b, n), 0);
	assert_false(M.proposal.has_iparea);
	assert_false(M.proposal.offers_smcr_v1);
	/* ... with N up to 40 (Linux's limit), above it not */
	b[39] = 40;
	assert_int_equal(dec(b, n), 0);
	b[39] = 41;
	assert_int_equal(dec(b, n), -SMCR_E_CLC_PROP_V2_IPAREA_OFFSET);
	/* version 3 is read with the version-2 rules */
	assert_int_equal(dec_set(l92, 92, 7, 0x38), 0);
	assert_int_equal(M.proposal.f.version, 3);

	/* v2 extension: typev2 says present but the offset is 0 */
	assert_int_equal(dec_set(l92, 92, 7, 0x20), -SMCR_E_CLC_PROP_V2EXT_MISSING);
	assert_int_equal(dec_set(x, 164, 51, 0), -SMCR_E_CLC_PROP_V2EXT_MISSING);
	/* offset outside the message, or not right after the IP area */
	assert_int_equal(dec_set(x, 164, 51, 200), -SMCR_E_CLC_PROP_V2EXT_OFFSET);
	assert_int_equal(dec_set(x, 164, 51, 0x25), -SMCR_E_CLC_PROP_V2EXT_OFFSET);
	assert_int_equal(dec_set(x, 164, 51, 0x23), -SMCR_E_CLC_PROP_V2EXT_OFFSET);
	assert_int_equal(dec_set(x, 164, 51, 0x24 + 73), -SMCR_E_CLC_PROP_V2EXT_OFFSET);
	memcpy(b, x, 164);
	b[50] = 0xff;
	assert_int_equal(dec(b, 164), -SMCR_E_CLC_PROP_V2EXT_OFFSET);
	/* EID count above 8; count 2 (64 bytes) does not fit 164 bytes */
	assert_int_equal(dec_set(x, 164, 88, 9), -SMCR_E_CLC_PROP_V2EXT_EID_COUNT);
	assert_int_equal(dec_set(x, 164, 88, 2), -SMCR_E_CLC_PROP_V2_LENGTH);
	assert_int_equal(dec_set(x, 164, 88, 0), -SMCR_E_CLC_PROP_V2_LENGTH);
	/* SMC-R v2 only: GID count ignored (no SMC-D v2 extension) */
	assert_int_equal(dec_set(x, 164, 89, 200), 0);
	/* SMC-D v2 offered (typev2 D): GID count above 8, offset of the SMC-D extension */
	assert_int_equal(dec_set(x, 164, 7, 0x24), -SMCR_E_CLC_PROP_SMCD_V2EXT_OFFSET);
	memcpy(b, x, 164);
	b[7] = 0x24;
	b[89] = 9;
	assert_int_equal(dec(b, 164), -SMCR_E_CLC_PROP_V2EXT_GID_COUNT);
	/* a complete one: SMC-D v2 extension of 48 + 10 bytes after the EID */
	n = resize(x, 164, 164 + 58, b);
	b[7] = 0x24;
	b[89] = 1;
	b[95] = 32 + 32;	/* from rel. 8: 32 header bytes + one EID */
	assert_int_equal(dec(b, n), 0);
	assert_int_equal(M.proposal.v2ext.len, 72 + 58);
	assert_int_equal(M.proposal.v2ext.ism_gid_count, 1);
	b[95] = 32;
	assert_int_equal(dec(b, n), -SMCR_E_CLC_PROP_SMCD_V2EXT_OFFSET);
	/* a v2 extension in a version-1 Proposal is not one: the bytes are extra */
	assert_int_equal(dec_set(x, 164, 7, 0x10), -SMCR_E_CLC_PROP_BAD_LENGTH);
}

static void test_accept(void **state)
{
	(void)state;
	uint8_t b[CLC_MSG_MAX_LEN];
	const uint8_t *a = vec_accept_hw, *c = vec_confirm_hw;
	size_t n;

	/* v2 (version 2, >= 108 bytes) recognised and rejected */
	n = resize(a, 68, 108, b);
	b[7] = 0x28;
	assert_int_equal(dec(b, n), -SMCR_E_CLC_ACC_V2);
	b[4] = 3;
	assert_int_equal(dec(b, n), -SMCR_E_CLC_ACC_V2);
	assert_int_equal(dec_set(a, 68, 7, 0x20), -SMCR_E_CLC_ACC_V2);
	/* SMC-D (path 1), 48 or 68 bytes */
	assert_int_equal(dec_set(a, 68, 7, 0x19), -SMCR_E_CLC_ACC_SMCD);
	n = resize(a, 68, 48, b);
	b[7] = 0x11;
	assert_int_equal(dec(b, n), -SMCR_E_CLC_ACC_SMCD);
	/* path bits 2 and 3 (2.2), also in the Confirm */
	assert_int_equal(dec_set(a, 68, 7, 0x1a), -SMCR_E_CLC_BAD_PATH);
	assert_int_equal(dec_set(a, 68, 7, 0x1b), -SMCR_E_CLC_BAD_PATH);
	assert_int_equal(dec_set(c, 68, 7, 0x12), -SMCR_E_CLC_BAD_PATH);
	/* wrong length field: 69 and 67 bytes, 48 bytes of SMC-R */
	n = resize(a, 68, 69, b);
	assert_int_equal(dec(b, n), -SMCR_E_CLC_ACC_BAD_LENGTH);
	n = resize(a, 68, 67, b);
	assert_int_equal(dec(b, n), -SMCR_E_CLC_ACC_BAD_LENGTH);
	n = resize(c, 68, 48, b);
	assert_int_equal(dec(b, n), -SMCR_E_CLC_ACC_BAD_LENGTH);
	/* MTU code 1..5 */
	static const uint8_t bad_mtu[] = { 0x20, 0x26, 0x2f, 0x00 };
	for (size_t i = 0; i < sizeof(bad_mtu); i++)
		assert_int_equal(dec_set(a, 68, 50, bad_mtu[i]), -SMCR_E_CLC_ACC_BAD_MTU);
	assert_int_equal(dec_set(a, 68, 50, 0x21), 0);
	assert_int_equal(dec_set(a, 68, 50, 0x25), 0);
	/* size codes 0..15 are all accepted on receive (8.1) */
	for (unsigned s = 0; s < 16; s++) {
		assert_int_equal(dec_set(a, 68, 50, (uint8_t)(s << 4 | 3)), 0);
		assert_int_equal(M.accept.rmbe_size_code, s);
	}
	/* RMBE index 0, alert token 0 */
	assert_int_equal(dec_set(a, 68, 45, 0), -SMCR_E_CLC_ACC_BAD_RMBE_IDX);
	assert_int_equal(dec_set(a, 68, 49, 0), -SMCR_E_CLC_ACC_ZERO_TOKEN);
	assert_int_equal(dec_set(a, 68, 45, 2), 0);
	assert_int_equal(M.accept.rmbe_idx, 2);
	/* 24-bit fields take all 24 bits */
	memcpy(b, a, 68);
	b[38] = b[39] = b[40] = 0xff;
	b[61] = b[62] = b[63] = 0xff;
	assert_int_equal(dec(b, 68), 0);
	assert_int_equal(M.accept.qpn, 0xffffff);
	assert_int_equal(M.accept.psn, 0xffffff);
	/* reserved bits/bytes ignored: byte 7 mask 0x04, bytes 51 and 60 */
	memcpy(b, a, 68);
	b[7] |= 0x04;
	b[51] = 0xff;
	b[60] = 0xff;
	assert_int_equal(dec(b, 68), 0);
	assert_int_equal(M.accept.psn, 7534078);
	assert_true(M.accept.first_contact);
	/* a Confirm with first contact (Linux 6.x) is fine */
	assert_int_equal(dec_set(c, 68, 7, 0x18), 0);
	assert_true(M.accept.first_contact);
}

static void test_decline(void **state)
{
	(void)state;
	uint8_t b[64];
	size_t n;
	const uint8_t *d = vec_decline_diffprefix;

	assert_int_equal(dec_set(d, 28, 7, 0x12), -SMCR_E_CLC_BAD_PATH);
	assert_int_equal(dec_set(d, 28, 7, 0x1b), -SMCR_E_CLC_BAD_PATH);
	assert_int_equal(dec_set(d, 28, 7, 0x11), 0);	/* SMC-D path: still a Decline */
	assert_int_equal(M.decline.path, CLC_PATH_D);
	/* v1 must be 28, v2 44 */
	n = resize(d, 28, 32, b);
	assert_int_equal(dec(b, n), -SMCR_E_CLC_DECL_BAD_LENGTH);
	n = resize(d, 28, 44, b);
	assert_int_equal(dec(b, n), -SMCR_E_CLC_DECL_BAD_LENGTH);
	assert_int_equal(dec_set(d, 28, 7, 0x20), -SMCR_E_CLC_DECL_BAD_LENGTH);
	n = resize(vec_decline_v2, 44, 28, b);
	assert_int_equal(dec(b, n), -SMCR_E_CLC_DECL_BAD_LENGTH);
	n = resize(vec_decline_v2, 44, 40, b);
	assert_int_equal(dec(b, n), -SMCR_E_CLC_DECL_BAD_LENGTH);
	/* any diagnosis code decodes (5.2: lenient), reserved bytes ignored */
	memcpy(b, d, 28);
	memcpy(b + 16, "\x12\x34\x56\x78\xff\xff\xff\xff", 8);
	assert_int_equal(dec(b, 28), 0);
	assert_int_equal(M.decline.diag, 0x12345678);
	assert_int_equal(M.decline.os_type, 0);
}

static void test_encoders(void **state)
{
	(void)state;
	uint8_t out[CLC_MSG_MAX_LEN * 2];
	size_t o;
	struct clc_msg m;

	/* Accept/Confirm */
	assert_int_equal(clc_decode(vec_accept_hw, 68, &m), 0);
	struct clc_accept a0 = m.accept, a;
#define ACC_BAD(field, val)                                                                 \
	do {                                                                                \
		a = a0;                                                                     \
		a.field = val;                                                              \
		assert_int_equal(clc_accept_encode(&a, CLC_ACCEPT, out, sizeof(out), &o),   \
				 -SMCR_E_CLC_ENC_FIELD);                                    \
	} while (0)
	ACC_BAD(qpn, 0x1000000);
	ACC_BAD(psn, 0x1000000);
	ACC_BAD(rmbe_size_code, 16);
	ACC_BAD(mtu_code, 0);
	ACC_BAD(mtu_code, 6);
	ACC_BAD(rmbe_idx, 0);
	ACC_BAD(token, 0);
	ACC_BAD(f.version, 2);
	ACC_BAD(f.version, 0);
	ACC_BAD(f.eye, (enum clc_eye)7);
	ACC_BAD(f.trail, (enum clc_eye)7);
	assert_int_equal(clc_accept_encode(&a0, CLC_DECLINE, out, sizeof(out), &o), -SMCR_E_INVAL);
	a = a0;
	a.rmbe_size_code = 15;
	assert_int_equal(clc_accept_encode(&a, CLC_ACCEPT, out, sizeof(out), &o), 0);
	assert_int_equal(out[50], 0xf3);
	assert_int_equal(clc_accept_encode(&a0, CLC_ACCEPT, out, 67, &o), -SMCR_E_NOSPACE);
	assert_int_equal(clc_accept_encode(&a0, CLC_ACCEPT, out, 7, &o), -SMCR_E_NOSPACE);

	/* Proposal */
	assert_int_equal(clc_decode(vec_prop_smcr92, 92, &m), 0);
	struct clc_proposal p0 = m.proposal, p;
#define PROP_BAD(field, val, err)                                                           \
	do {                                                                                \
		p = p0;                                                                     \
		p.field = val;                                                              \
		assert_int_equal(clc_proposal_encode(&p, out, sizeof(out), &o), err);       \
		assert_int_equal(clc_proposal_len(&p), 0);                                  \
	} while (0)
	PROP_BAD(ipv6_count, 9, -SMCR_E_CLC_ENC_PREFIX_COUNT);
	PROP_BAD(typev1, 4, -SMCR_E_CLC_ENC_FIELD);
	PROP_BAD(typev2, 4, -SMCR_E_CLC_ENC_FIELD);
	PROP_BAD(ipv4_prefix_len, 33, -SMCR_E_CLC_ENC_FIELD);
	PROP_BAD(f.version, 0, -SMCR_E_CLC_ENC_FIELD);
	PROP_BAD(f.version, 16, -SMCR_E_CLC_ENC_FIELD);
	PROP_BAD(iparea_offset, 1000, -SMCR_E_CLC_ENC_FIELD);	/* > 1024 bytes */
	p = p0;
	p.ipv6_count = 1;
	p.ipv6[0].len = 129;
	assert_int_equal(clc_proposal_encode(&p, out, sizeof(out), &o), -SMCR_E_CLC_ENC_FIELD);
	/* SMC-D fields without an SMC-D area to hold them (v1, N < 40) */
	p = p0;
	p.iparea_offset = 0;
	p.ism_gid = 1;
	assert_int_equal(clc_proposal_encode(&p, out, sizeof(out), &o), -SMCR_E_CLC_ENC_FIELD);
	/* version 2 with a v1 path needs N = 40 */
	p = p0;
	p.f.version = 2;
	p.typev2 = CLC_PATH_NONE;
	p.iparea_offset = 0;
	assert_int_equal(clc_proposal_encode(&p, out, sizeof(out), &o), -SMCR_E_CLC_ENC_FIELD);
	/* version 2 with a v2 extension whose raw bytes do not match its length */
	assert_int_equal(clc_decode(vec_prop_v2ext, 164, &m), 0);
	p = m.proposal;
	p.v2ext.len = 71;
	assert_int_equal(clc_proposal_encode(&p, out, sizeof(out), &o), -SMCR_E_CLC_ENC_FIELD);
	p = m.proposal;
	p.v2ext.raw[0] = 9;
	assert_int_equal(clc_proposal_encode(&p, out, sizeof(out), &o), -SMCR_E_CLC_ENC_FIELD);
	p = m.proposal;
	p.v2ext.len = 10;
	assert_int_equal(clc_proposal_encode(&p, out, sizeof(out), &o), -SMCR_E_CLC_ENC_FIELD);
	assert_int_equal(clc_proposal_encode(&p0, out, 91, &o), -SMCR_E_NOSPACE);

	/* Decline */
	struct clc_decline d;
	memset(&d, 0, sizeof(d));
	d.f.version = 1;
	d.path = 2;
	assert_int_equal(clc_decline_encode(&d, out, sizeof(out), &o), -SMCR_E_CLC_ENC_FIELD);
	d.path = 0;
	d.os_type = 2;
	assert_int_equal(clc_decline_encode(&d, out, sizeof(out), &o), -SMCR_E_CLC_ENC_FIELD);
	d.os_type = 0;
	d.diag_v2[3] = 1;
	assert_int_equal(clc_decline_encode(&d, out, sizeof(out), &o), -SMCR_E_CLC_ENC_FIELD);
	d.f.version = 2;
	d.os_type = 16;
	assert_int_equal(clc_decline_encode(&d, out, sizeof(out), &o), -SMCR_E_CLC_ENC_FIELD);
	d.os_type = 15;
	assert_int_equal(clc_decline_encode(&d, out, sizeof(out), &o), 0);
	assert_int_equal(o, 44);
	assert_int_equal(clc_decline_encode(&d, out, 43, &o), -SMCR_E_NOSPACE);

	/* generic */
	m.type = (enum clc_type)9;
	assert_int_equal(clc_encode(&m, out, sizeof(out), &o), -SMCR_E_INVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_framing),
		cmocka_unit_test(test_eye_prefix),
		cmocka_unit_test(test_proposal_v1),
		cmocka_unit_test(test_proposal_prefixes),
		cmocka_unit_test(test_proposal_v2),
		cmocka_unit_test(test_accept),
		cmocka_unit_test(test_decline),
		cmocka_unit_test(test_encoders),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
