/* test_llc.c: the LLC common header and dispatch (docs/protocol/wire-formats.md 6.1) and properties
 * of the whole codec: every vector of 9 round-trips; length, length byte and type errors;
 * v1/v2/CDC/unknown classification; reserved bytes ignored on receive and zero on send;
 * random valid messages round-trip; random buffers never crash and never decode to
 * something that does not re-encode; the fuzz seed corpus equals the vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/llccdc_vectors.h"
#include "wire/llc.h"

static const uint8_t v1_types[] = { 1, 2, 3, 4, 6, 7, 8, 9 };

static void test_vectors_roundtrip(void **state)
{
	(void)state;
	assert_true(llc_vector_count >= 12);
	for (size_t i = 0; i < llc_vector_count; i++) {
		uint8_t b[LLC_MSG_LEN], out[LLC_MSG_LEN];
		struct llc_msg m;
		assert_int_equal(llccdc_vector_bytes(&llc_vectors[i], b), LLC_MSG_LEN);
		int rc = llc_decode(b, sizeof(b), &m);
		if (rc)
			fail_msg("%s: %s", llc_vectors[i].name, smcr_err_name(rc));
		assert_int_equal(m.type, b[0]);
		assert_int_equal(m.resp, (b[3] & 0x80) != 0);
		assert_int_equal(llc_encode(&m, out), 0);
		assert_memory_equal(out, b, LLC_MSG_LEN);
	}
}

static void test_length_errors(void **state)
{
	(void)state;
	uint8_t b[LLC_MSG_LEN + 8];
	struct llc_msg m;
	assert_int_equal(llccdc_vector_bytes(llccdc_vector_find("test_link_req"), b), 44);
	assert_int_equal(llc_decode(b, 0, &m), -SMCR_E_LLC_SHORT);
	assert_int_equal(llc_decode(b, 1, &m), -SMCR_E_LLC_SHORT);
	assert_int_equal(llc_decode(b, 43, &m), -SMCR_E_LLC_SHORT);
	memset(b + 44, 0, 8);
	assert_int_equal(llc_decode(b, 45, &m), -SMCR_E_LLC_LONG);
	assert_int_equal(llc_decode(b, 48, &m), -SMCR_E_LLC_LONG);	/* Linux's buffer size */
	assert_int_equal(llc_decode(b, 44, &m), 0);
	for (unsigned len = 0; len < 256; len++) {
		if (len == 44)
			continue;
		b[1] = (uint8_t)len;
		assert_int_equal(llc_decode(b, 44, &m), -SMCR_E_LLC_BAD_LENGTH);
	}
}

static void test_type_errors(void **state)
{
	(void)state;
	uint8_t b[LLC_MSG_LEN];
	struct llc_msg m;
	assert_int_equal(llccdc_vector_bytes(llccdc_vector_find("test_link_req"), b), 44);
	for (unsigned t = 0; t < 256; t++) {
		b[0] = (uint8_t)t;
		int rc = llc_decode(b, sizeof(b), &m);
		enum llc_kind k = llc_kind_of((uint8_t)t);
		switch (t) {
		case 1: case 2: case 3: case 4: case 6: case 7: case 8: case 9:
			assert_int_equal(k, LLC_KIND_V1);
			/* The body of a TEST LINK is not valid for every type; the type passed. */
			assert_true(rc != -SMCR_E_LLC_UNKNOWN_TYPE);
			assert_true(rc != -SMCR_E_LLC_V2_UNSUPPORTED);
			assert_true(rc != -SMCR_E_LLC_IS_CDC && rc != -SMCR_E_LLC_SHORT);
			assert_true(rc != -SMCR_E_LLC_BAD_LENGTH);
			break;
		case 0xFE:
			assert_int_equal(k, LLC_KIND_CDC);
			assert_int_equal(rc, -SMCR_E_LLC_IS_CDC);
			break;
		case 0x21: case 0x22: case 0x24: case 0x25: case 0x26: case 0x27: case 0x29:
			assert_int_equal(k, LLC_KIND_V2);
			assert_int_equal(rc, -SMCR_E_LLC_V2_UNSUPPORTED);
			/* v2 messages have their own length: not a length error. */
			assert_int_equal(llc_decode(b, 100, &m), -SMCR_E_LLC_V2_UNSUPPORTED);
			break;
		default:
			assert_int_equal(k, LLC_KIND_UNKNOWN);
			assert_int_equal(rc, -SMCR_E_LLC_UNKNOWN_TYPE);
			assert_int_equal(llc_decode(b, 3, &m), -SMCR_E_LLC_UNKNOWN_TYPE);
			assert_string_equal(llc_type_name((uint8_t)t), "unknown");
			break;
		}
	}
	assert_string_equal(llc_type_name(0x05), "unknown");	/* 6.1: not a v1 message */
	assert_string_equal(llc_type_name(0x03), "ADD LINK CONTINUATION");
	assert_string_equal(llc_type_name(0x25), "v2 REQUEST ADD LINK");
	assert_string_equal(llc_type_name(0xFE), "CDC");

	/* The encoder refuses the same types. */
	uint8_t out[LLC_MSG_LEN];
	memset(&m, 0, sizeof(m));
	m.type = (enum llc_type)0x05;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_UNKNOWN_TYPE);
	m.type = (enum llc_type)0x21;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_V2_UNSUPPORTED);
	m.type = (enum llc_type)0xFE;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_IS_CDC);
	m.type = (enum llc_type)0x107;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_UNKNOWN_TYPE);
}

static void test_errors_distinct(void **state)
{
	(void)state;
	/* Every LLC row has its own name and message (the table is the X-macro). */
	static const int codes[] = {
		SMCR_E_LLC_SHORT, SMCR_E_LLC_LONG, SMCR_E_LLC_BAD_LENGTH,
		SMCR_E_LLC_UNKNOWN_TYPE, SMCR_E_LLC_V2_UNSUPPORTED, SMCR_E_LLC_IS_CDC,
		SMCR_E_LLC_CL_LINK_ZERO, SMCR_E_LLC_RMBE_EYECATCHERS, SMCR_E_LLC_AL_LINK_ZERO,
		SMCR_E_LLC_AL_BAD_MTU, SMCR_E_LLC_AL_MTU_ZERO, SMCR_E_LLC_AL_ALL_ZERO,
		SMCR_E_LLC_ALC_LINK_ZERO, SMCR_E_LLC_DL_LINK_ZERO, SMCR_E_LLC_CR_COUNT,
		SMCR_E_LLC_CR_LINK_ZERO, SMCR_E_LLC_CRC_COUNT_ZERO, SMCR_E_LLC_CRC_LINK_ZERO,
		SMCR_E_LLC_DR_COUNT_ZERO, SMCR_E_LLC_DR_COUNT_RANGE, SMCR_E_LLC_DR_MASK_RANGE,
		SMCR_E_LLC_QPN_RANGE, SMCR_E_LLC_PSN_RANGE, SMCR_E_LLC_REJ_REASON_RANGE,
		SMCR_E_LLC_EYEC_RANGE,
	};
	size_t n = sizeof(codes) / sizeof(codes[0]);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(strncmp(smcr_err_name(codes[i]), "LLC_", 4), 0);
		for (size_t j = i + 1; j < n; j++) {
			assert_int_not_equal(codes[i], codes[j]);
			assert_string_not_equal(smcr_err_msg(codes[i]), smcr_err_msg(codes[j]));
		}
	}
	assert_int_equal(smcr_err_errno(-SMCR_E_LLC_SHORT), EPROTO);
	assert_int_equal(smcr_err_errno(-SMCR_E_LLC_QPN_RANGE), EINVAL);
}

/* 5 (README): reserved = send zeros, ignore on receive. Each vector with every reserved
 * byte and bit set still decodes to the same message, which encodes to the clean bytes. */
static void test_reserved_ignored(void **state)
{
	(void)state;
	struct { const char *name; uint8_t b2; uint8_t flags_rsvd; unsigned from, to; } r[] = {
		{ "confirm_link_req", 0xff, 0x7c, 35, 44 },
		{ "add_link_req", 0xf0, 0x3f, 36, 44 },	/* + 10..11, 32 hi nibble below */
		{ "add_link_cont", 0xff, 0x7f, 24, 44 },	/* pair 2 unused; + 6..7 */
		{ "delete_link_req", 0xff, 0x1f, 9, 44 },
		{ "confirm_rkey_req", 0xff, 0x4f, 30, 44 },	/* entry 2 unused */
		{ "test_link_req", 0xff, 0x7f, 20, 44 },
		{ "delete_rkey_req", 0xff, 0x5f, 12, 44 },	/* rkeys 1..7 unused; + 6..7 */
	};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		uint8_t clean[LLC_MSG_LEN], dirty[LLC_MSG_LEN], out[LLC_MSG_LEN];
		struct llc_msg a, b;
		assert_int_equal(llccdc_vector_bytes(llccdc_vector_find(r[i].name), clean), 44);
		memcpy(dirty, clean, sizeof(dirty));
		dirty[2] |= r[i].b2;
		dirty[3] |= r[i].flags_rsvd;
		for (unsigned k = r[i].from; k < r[i].to; k++)
			dirty[k] = 0xa5;
		if (clean[0] == LLC_ADD_LINK) {
			dirty[10] = dirty[11] = 0x5a;
			dirty[32] |= 0xf0;
		}
		if (clean[0] == LLC_ADD_LINK_CONT || clean[0] == LLC_DELETE_RKEY)
			dirty[6] = dirty[7] = 0x5a;
		assert_int_equal(llc_decode(clean, 44, &a), 0);
		int rc = llc_decode(dirty, 44, &b);
		if (rc)
			fail_msg("%s: %s", r[i].name, smcr_err_name(rc));
		assert_true(llc_msg_equal(&a, &b));
		assert_int_equal(llc_encode(&b, out), 0);
		assert_memory_equal(out, clean, LLC_MSG_LEN);
	}
}

/* A random message of type t that satisfies every rule. */
static void random_msg(uint64_t *s, enum llc_type t, struct llc_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = t;
	m->resp = llccdc_rand(s) & 1;
	uint64_t r = llccdc_rand(s);
	switch (t) {
	case LLC_CONFIRM_LINK: {
		struct llc_confirm_link *cl = &m->confirm_link;
		cl->no_eyec = r & 3;
		for (int i = 0; i < 6; i++) cl->mac.b[i] = (uint8_t)llccdc_rand(s);
		for (int i = 0; i < 16; i++) cl->gid.b[i] = (uint8_t)llccdc_rand(s);
		cl->qpn = (uint32_t)(r >> 8) & 0xFFFFFF;
		cl->link_num = (uint8_t)(1 + (r >> 32) % 255);
		cl->link_uid = (uint32_t)llccdc_rand(s);
		cl->max_links = (uint8_t)(r >> 48);
		break;
	}
	case LLC_ADD_LINK: {
		struct llc_add_link *al = &m->add_link;
		al->rejected = m->resp && (r & 2);
		al->rej_reason = (r >> 4) & 0xF;
		for (int i = 0; i < 6; i++) al->mac.b[i] = (uint8_t)llccdc_rand(s);
		al->mac.b[0] |= 1;	/* never the all-zero body */
		for (int i = 0; i < 16; i++) al->gid.b[i] = (uint8_t)llccdc_rand(s);
		al->qpn = (uint32_t)(r >> 8) & 0xFFFFFF;
		al->link_num = (uint8_t)(1 + (r >> 32) % 255);
		al->mtu = (uint8_t)(1 + (r >> 40) % 5);
		al->psn = (uint32_t)llccdc_rand(s) & 0xFFFFFF;
		break;
	}
	case LLC_ADD_LINK_CONT: {
		struct llc_add_link_cont *c = &m->add_link_cont;
		c->link_num = (uint8_t)(1 + r % 255);
		c->num_rkeys = (uint8_t)(r >> 8) % 4;
		for (unsigned i = 0; i < c->num_rkeys && i < 2; i++) {
			c->rt[i].rkey = (uint32_t)llccdc_rand(s);
			c->rt[i].rkey_new = (uint32_t)llccdc_rand(s);
			c->rt[i].vaddr_new = llccdc_rand(s);
		}
		break;
	}
	case LLC_DELETE_LINK: {
		struct llc_delete_link *d = &m->delete_link;
		d->all = r & 2;
		d->orderly = r & 4;
		d->link_num = d->all ? 0 : (uint8_t)(1 + (r >> 8) % 255);
		d->reason = (uint32_t)(r >> 16);
		break;
	}
	case LLC_CONFIRM_RKEY: {
		struct llc_confirm_rkey *c = &m->confirm_rkey;
		c->negative = r & 2;
		c->retry = r & 4;
		c->num_other = (uint8_t)((r >> 8) % 3);
		c->rkey = (uint32_t)llccdc_rand(s);
		c->vaddr = llccdc_rand(s);
		for (unsigned i = 0; i < c->num_other; i++) {
			c->other[i].link_num = (uint8_t)(1 + llccdc_rand(s) % 255);
			c->other[i].rkey = (uint32_t)llccdc_rand(s);
			c->other[i].vaddr = llccdc_rand(s);
		}
		break;
	}
	case LLC_TEST_LINK:
		for (int i = 0; i < 16; i++) m->test_link.data[i] = (uint8_t)llccdc_rand(s);
		break;
	case LLC_CONFIRM_RKEY_CONT: {
		struct llc_confirm_rkey_cont *c = &m->confirm_rkey_cont;
		c->negative = r & 2;
		c->num_remaining = (uint8_t)(1 + (r >> 8) % 5);
		for (unsigned i = 0; i < c->num_remaining && i < 3; i++) {
			c->entry[i].link_num = (uint8_t)(1 + llccdc_rand(s) % 255);
			c->entry[i].rkey = (uint32_t)llccdc_rand(s);
			c->entry[i].vaddr = llccdc_rand(s);
		}
		break;
	}
	case LLC_DELETE_RKEY: {
		struct llc_delete_rkey *d = &m->delete_rkey;
		d->negative = r & 2;
		d->count = (uint8_t)(1 + (r >> 8) % 8);
		d->err_mask = (uint8_t)((r >> 16) & (0xFF00u >> d->count));
		for (unsigned i = 0; i < d->count; i++)
			d->rkey[i] = (uint32_t)llccdc_rand(s);
		break;
	}
	}
}

static void test_random_roundtrip(void **state)
{
	(void)state;
	uint64_t s = 0x5eed11c;
	for (int n = 0; n < 20000; n++) {
		struct llc_msg m, d;
		uint8_t out[LLC_MSG_LEN], again[LLC_MSG_LEN];
		random_msg(&s, (enum llc_type)v1_types[n % 8], &m);
		int rc = llc_encode(&m, out);
		if (rc)
			fail_msg("iter %d type %d: %s", n, m.type, smcr_err_name(rc));
		assert_int_equal(out[0], m.type);
		assert_int_equal(out[1], 44);
		assert_int_equal((out[3] & 0x80) != 0, m.resp);
		assert_int_equal(llc_decode(out, sizeof(out), &d), 0);
		assert_true(llc_msg_equal(&m, &d));
		assert_int_equal(llc_encode(&d, again), 0);
		assert_memory_equal(out, again, LLC_MSG_LEN);
	}
}

/* Random 44-byte buffers with a v1 type and the right length byte (so the body rules
 * are reached): decode either fails with an LLC_ code or gives a message that encodes,
 * decodes to the same message and encodes to the same bytes. Under ASan this is also the
 * "never reads outside" check. */
static void test_random_buffers(void **state)
{
	(void)state;
	uint64_t s = 0xb0ff3125;
	unsigned ok = 0;
	for (int n = 0; n < 50000; n++) {
		uint8_t b[LLC_MSG_LEN], out[LLC_MSG_LEN], again[LLC_MSG_LEN];
		for (int i = 0; i < LLC_MSG_LEN; i++)
			b[i] = (uint8_t)llccdc_rand(&s);
		if (n % 4) {	/* mostly well-formed headers, some fully random */
			b[0] = v1_types[llccdc_rand(&s) % 8];
			b[1] = 44;
		}
		size_t len = (n % 16) ? LLC_MSG_LEN : (size_t)(llccdc_rand(&s) % 45);
		struct llc_msg m, d;
		int rc = llc_decode(b, len, &m);
		if (rc) {
			assert_int_equal(strncmp(smcr_err_name(rc), "LLC_", 4), 0);
			continue;
		}
		ok++;
		assert_int_equal(llc_encode(&m, out), 0);
		assert_int_equal(llc_decode(out, sizeof(out), &d), 0);
		assert_true(llc_msg_equal(&m, &d));
		assert_int_equal(llc_encode(&d, again), 0);
		assert_memory_equal(out, again, LLC_MSG_LEN);
		/* The re-encoded bytes differ from the input at most in reserved places. */
		assert_int_equal(out[0], b[0]);
		assert_int_equal(out[3] & 0x80, b[3] & 0x80);
	}
	assert_true(ok > 10000);	/* the property was exercised, not just the errors */
}

/* The fuzz seed corpus holds exactly the vectors (tests/fuzz/corpus/fuzz_llc/<name>). */
static void test_seed_corpus(void **state)
{
	(void)state;
	const char *src = getenv("SMCR_SOURCE_DIR");
	if (!src)
		skip();
	for (size_t i = 0; i < llc_vector_count; i++) {
		char path[1024];
		uint8_t want[LLC_MSG_LEN], got[LLC_MSG_LEN + 1];
		snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/fuzz_llc/%s", src,
			 llc_vectors[i].name);
		FILE *f = fopen(path, "rb");
		if (!f)
			fail_msg("missing seed %s", path);
		size_t n = fread(got, 1, sizeof(got), f);
		fclose(f);
		assert_int_equal(n, LLC_MSG_LEN);
		assert_int_equal(llccdc_vector_bytes(&llc_vectors[i], want), LLC_MSG_LEN);
		assert_memory_equal(got, want, LLC_MSG_LEN);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors_roundtrip),
		cmocka_unit_test(test_length_errors),
		cmocka_unit_test(test_type_errors),
		cmocka_unit_test(test_errors_distinct),
		cmocka_unit_test(test_reserved_ignored),
		cmocka_unit_test(test_random_roundtrip),
		cmocka_unit_test(test_random_buffers),
		cmocka_unit_test(test_seed_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
