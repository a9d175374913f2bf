/* test_llc_v2.c: the SMC-R v2 LLC codec off the golden path (docs/parts/wire-v2.md 7):
 * the types the capture does not hold (DELETE LINK, TEST LINK, CONFIRM RKEY, REQUEST ADD
 * LINK, long DELETE RKEY, ADD LINK with several RKeys) built, encoded and decoded back with
 * their exact bytes, and every decoder error on mutated messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "wire/llc_v2.h"

static uint8_t buf[LLC2_MAX_LEN + 16];

static size_t enc_dec(const struct llc2_msg *m, struct llc2_msg *back)
{
	size_t n = 0;
	assert_int_equal(llc2_encode(m, buf, sizeof(buf), &n), 0);
	assert_int_equal(n, llc2_len(m));
	assert_int_equal(buf[0], m->type);
	assert_int_equal(buf[1] | buf[2] << 8, n);	/* little-endian length */
	assert_int_equal(llc2_decode(buf, n, back), 0);
	assert_int_equal(back->length, n);
	assert_true(llc2_msg_equal(m, back));
	return n;
}

static void test_delete_link_test_link_rkey(void **state)
{
	(void)state;
	struct llc2_msg m, b;

	memset(&m, 0, sizeof(m));
	m.type = LLC2_DELETE_LINK;
	m.base.type = LLC_DELETE_LINK;
	m.base.delete_link.all = true;
	m.base.delete_link.orderly = true;
	m.base.delete_link.reason = LLC_DEL_OP_INIT_TERM;
	assert_int_equal(enc_dec(&m, &b), 44);
	assert_int_equal(buf[3], 0x60);
	assert_int_equal(buf[5] << 24 | buf[6] << 16 | buf[7] << 8 | buf[8], LLC_DEL_OP_INIT_TERM);

	memset(&m, 0, sizeof(m));
	m.type = LLC2_TEST_LINK;
	m.base.type = LLC_TEST_LINK;
	m.resp = m.base.resp = true;
	memset(m.base.test_link.data, 0xa5, LLC_TL_DATA_LEN);
	assert_int_equal(enc_dec(&m, &b), 44);
	assert_int_equal(buf[3], 0x80);
	assert_int_equal(buf[4], 0xa5);

	memset(&m, 0, sizeof(m));
	m.type = LLC2_CONFIRM_RKEY;
	m.base.type = LLC_CONFIRM_RKEY;
	m.base.confirm_rkey.rkey = 0x1234;
	m.base.confirm_rkey.vaddr = 0xffff888000000000ull;
	assert_int_equal(enc_dec(&m, &b), 44);
	/* the v1 rules apply to the base: a link number 0 in an entry */
	m.base.confirm_rkey.num_other = 1;
	assert_int_equal(llc2_encode(&m, buf, sizeof(buf), &(size_t){ 0 }), -SMCR_E_LLC_CR_LINK_ZERO);
	/* base type and message type must agree */
	m.base.type = LLC_TEST_LINK;
	assert_int_equal(llc2_encode(&m, buf, sizeof(buf), &(size_t){ 0 }), -SMCR_E_LLC2_ENC_FIELD);
}

static void test_add_link_rkeys(void **state)
{
	(void)state;
	struct llc2_msg m, b;

	memset(&m, 0, sizeof(m));
	m.type = LLC2_ADD_LINK;
	m.base.type = LLC_ADD_LINK;
	m.base.add_link.mac.b[0] = 2;
	m.base.add_link.qpn = 0x123456;
	m.base.add_link.link_num = 2;
	m.base.add_link.mtu = 5;
	m.base.add_link.psn = 1;
	m.has_ext = true;
	m.ext.v2_direct = false;
	m.ext.num_rkeys = 3;
	for (unsigned i = 0; i < 3; i++) {
		m.ext.rt[i].rkey = 0x100 + i;
		m.ext.rt[i].rkey_new = 0x200 + i;
		m.ext.rt[i].vaddr_new = 0x1000ull * (i + 1);
	}
	assert_int_equal(enc_dec(&m, &b), 44 + 28 + 48);
	assert_int_equal(buf[70], 3);		/* count, little-endian like the length */
	assert_int_equal(buf[71], 0);
	/* the most Linux sends: 255 keys, 4152 bytes */
	m.ext.num_rkeys = 255;
	assert_int_equal(enc_dec(&m, &b), 44 + 28 + 255 * 16);
	m.ext.num_rkeys = 256;
	assert_int_equal(llc2_len(&m), 0);
	assert_int_equal(llc2_encode(&m, buf, sizeof(buf), &(size_t){ 0 }), -SMCR_E_LLC2_ENC_FIELD);
	/* a v2 ADD LINK cannot carry a reject reason */
	m.ext.num_rkeys = 0;
	m.base.add_link.rej_reason = 1;
	assert_int_equal(llc2_encode(&m, buf, sizeof(buf), &(size_t){ 0 }), -SMCR_E_LLC2_ENC_FIELD);
	m.base.add_link.rej_reason = 0;
	size_t n = enc_dec(&m, &b);
	assert_int_equal(n, 72);
	/* errors: count beyond the length, extension cut short */
	buf[70] = 1;
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC2_AL_RKEY_COUNT);
	buf[70] = 0;
	buf[1] = 60;
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC2_AL_EXT_SHORT);
	/* the v1 rules of the base: MTU 6 */
	buf[1] = 72;
	buf[32] = 6;
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC_AL_BAD_MTU);
}

static void test_req_add_link(void **state)
{
	(void)state;
	struct llc2_msg m, b;

	memset(&m, 0, sizeof(m));
	m.type = LLC2_REQ_ADD_LINK;
	m.req_add_link.gid_count = 2;
	m.req_add_link.gids[0].b[15] = 1;
	m.req_add_link.gids[1].b[15] = 2;
	assert_int_equal(enc_dec(&m, &b), 60);
	assert_int_equal(buf[24], 2);
	/* the server's response: 44 bytes, no GIDs */
	memset(&m, 0, sizeof(m));
	m.type = LLC2_REQ_ADD_LINK;
	m.resp = true;
	size_t n = enc_dec(&m, &b);
	assert_int_equal(n, 44);
	buf[24] = 2;				/* two GIDs do not fit in 44 bytes */
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC2_RAL_GID_COUNT);
	buf[24] = 1;				/* one does */
	assert_int_equal(llc2_decode(buf, n, &b), 0);
	m.req_add_link.gid_count = 9;
	assert_int_equal(llc2_len(&m), 0);
}

static void test_delete_rkey_long(void **state)
{
	(void)state;
	struct llc2_msg m, b;

	memset(&m, 0, sizeof(m));
	m.type = LLC2_DELETE_RKEY;
	m.delete_rkey.count = 20;
	for (unsigned i = 0; i < 20; i++)
		m.delete_rkey.rkey[i] = 0xa000 + i;
	assert_int_equal(enc_dec(&m, &b), 8 + 80);
	m.delete_rkey.count = 0;
	assert_int_equal(llc2_encode(&m, buf, sizeof(buf), &(size_t){ 0 }), -SMCR_E_LLC2_ENC_FIELD);
	/* a response with the negative flag and the number of failed keys */
	m.resp = true;
	m.delete_rkey.count = 20;
	m.delete_rkey.negative = true;
	m.delete_rkey.num_invalid = 3;
	size_t n = enc_dec(&m, &b);
	assert_int_equal(n, 44);
	assert_int_equal(buf[3], 0xa0);
	assert_int_equal(b.delete_rkey.num_invalid, 3);
	/* a longer response is not what Linux sends */
	buf[1] = 48;
	assert_int_equal(llc2_decode(buf, 48, &b), -SMCR_E_LLC2_TYPE_LENGTH);
	/* requests: count 0, count beyond a 44-byte message, long one not exactly its keys */
	m.resp = false;
	m.delete_rkey.count = 1;
	n = enc_dec(&m, &b);
	buf[4] = 0;
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC2_DR_COUNT);
	buf[4] = 10;
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC2_DR_COUNT);
	buf[4] = 9;
	assert_int_equal(llc2_decode(buf, n, &b), 0);
	buf[1] = 52;
	assert_int_equal(llc2_decode(buf, 52, &b), -SMCR_E_LLC2_DR_COUNT);
}

static void test_header_errors(void **state)
{
	(void)state;
	struct llc2_msg m, b;
	size_t n;

	memset(&m, 0, sizeof(m));
	m.type = LLC2_CONFIRM_LINK;
	m.base.type = LLC_CONFIRM_LINK;
	m.base.confirm_link.no_eyec = 3;
	m.base.confirm_link.link_num = 1;
	m.base.confirm_link.max_links = 2;
	m.max_conns = 16;
	n = enc_dec(&m, &b);
	assert_int_equal(buf[35], 16);
	assert_int_equal(llc2_decode(buf, 43, &b), -SMCR_E_LLC2_SHORT);
	/* a receive longer than the message is fine (8 KiB buffers) */
	assert_int_equal(llc2_decode(buf, 100, &b), 0);
	buf[0] = 0x01;
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC2_NOT_V2);
	buf[0] = 0x23;				/* no v2 ADD LINK CONTINUATION */
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC2_NOT_V2);
	buf[0] = 0x21;
	buf[1] = 43;
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC2_BAD_LENGTH);
	buf[1] = 45;
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC2_BAD_LENGTH);
	assert_int_equal(llc2_decode(buf, 45, &b), -SMCR_E_LLC2_TYPE_LENGTH);
	buf[1] = 0x01; buf[2] = 0x20;		/* 8193 */
	assert_int_equal(llc2_decode(buf, sizeof(buf), &b), -SMCR_E_LLC2_BAD_LENGTH);
	/* big-endian 44 (what a reader in network order expects) is 11264 here */
	buf[1] = 0; buf[2] = 44;
	assert_int_equal(llc2_decode(buf, sizeof(buf), &b), -SMCR_E_LLC2_BAD_LENGTH);
	/* v1 rules: link number 0, no eyecatcher flags */
	buf[1] = 44; buf[2] = 0;
	buf[29] = 0;
	assert_int_equal(llc2_decode(buf, n, &b), -SMCR_E_LLC_CL_LINK_ZERO);
	assert_true(llc2_is_v2_type(0x29));
	assert_false(llc2_is_v2_type(0xfe));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delete_link_test_link_rkey),
		cmocka_unit_test(test_add_link_rkeys),
		cmocka_unit_test(test_req_add_link),
		cmocka_unit_test(test_delete_rkey_long),
		cmocka_unit_test(test_header_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
