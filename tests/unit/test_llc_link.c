/* test_llc_link.c: CONFIRM LINK, ADD LINK, ADD LINK CONTINUATION, DELETE LINK and TEST
 * LINK (docs/protocol/wire-formats.md 6.2-6.5, 6.9): the hex examples of 9 decode to the documented
 * fields and re-encode to the same bytes; every malformed form gets its own error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/llc_golden.h"
#include "wire/codes.h"
#include "wire/llc.h"

static const uint8_t mac_srv[6] = { 0x98, 0x03, 0x9b, 0x00, 0x00, 0x02 };
static const uint8_t mac_cli[6] = { 0x98, 0x03, 0x9b, 0x00, 0x00, 0x01 };
static const uint8_t gid_srv[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
				     0x9a, 0x03, 0x9b, 0xff, 0xfe, 0x00, 0x00, 0x02 };
static const uint8_t gid_cli[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
				     0x9a, 0x03, 0x9b, 0xff, 0xfe, 0x00, 0x00, 0x01 };

/* Decodes b after one change at byte off and expects error rc. */
static void expect_err(const uint8_t base[LLC_MSG_LEN], size_t off, uint8_t val, int rc)
{
	uint8_t b[LLC_MSG_LEN];
	struct llc_msg m;
	memcpy(b, base, LLC_MSG_LEN);
	b[off] = val;
	int got = llc_decode(b, sizeof(b), &m);
	if (got != rc)
		fail_msg("byte %zu = 0x%02x: got %s, want %s", off, val, smcr_err_name(got),
			 smcr_err_name(rc));
	/* On error the output is zeroed: nothing half-decoded leaks to the caller. */
	static const struct llc_msg zero;
	if (rc)
		assert_memory_equal(&m, &zero, sizeof(m));
}

static void test_confirm_link(void **state)
{
	(void)state;
	struct llc_msg m = llc_golden("confirm_link_req");
	assert_int_equal(m.type, LLC_CONFIRM_LINK);
	assert_false(m.resp);
	assert_int_equal(m.confirm_link.no_eyec, 0x03);
	assert_memory_equal(m.confirm_link.mac.b, mac_srv, 6);
	assert_memory_equal(m.confirm_link.gid.b, gid_srv, 16);
	assert_int_equal(m.confirm_link.qpn, 0x000107);
	assert_int_equal(m.confirm_link.link_num, 1);
	assert_int_equal(m.confirm_link.link_uid, 0x101);
	assert_int_equal(m.confirm_link.max_links, 2);
	assert_int_equal(llc_confirm_link_check_eyec(&m.confirm_link), 0);

	m = llc_golden("confirm_link_resp");
	assert_true(m.resp);
	assert_int_equal(m.confirm_link.no_eyec, 0x03);
	assert_memory_equal(m.confirm_link.mac.b, mac_cli, 6);
	assert_memory_equal(m.confirm_link.gid.b, gid_cli, 16);
	assert_int_equal(m.confirm_link.qpn, 0x000208);
	assert_int_equal(m.confirm_link.link_num, 1);
	assert_int_equal(m.confirm_link.link_uid, 0x201);
}

static void test_confirm_link_errors(void **state)
{
	(void)state;
	uint8_t b[LLC_MSG_LEN];
	struct llc_msg m;
	llc_golden_load("confirm_link_req", b);
	expect_err(b, 29, 0, -SMCR_E_LLC_CL_LINK_ZERO);

	/* Flags without 0x03 decode (so the engine can decline with RMBE_EC); the check
	 * helper says so, with Linux's decline code. Either bit alone is accepted, as Linux. */
	b[3] = 0x00;
	assert_int_equal(llc_decode(b, sizeof(b), &m), 0);
	assert_int_equal(m.confirm_link.no_eyec, 0);
	int rc = llc_confirm_link_check_eyec(&m.confirm_link);
	assert_int_equal(rc, -SMCR_E_LLC_RMBE_EYECATCHERS);
	assert_int_equal(smcr_err_decline(rc), 0x03050000);
	b[3] = 0x01;
	assert_int_equal(llc_decode(b, sizeof(b), &m), 0);
	assert_int_equal(llc_confirm_link_check_eyec(&m.confirm_link), 0);
	b[3] = 0x82;
	assert_int_equal(llc_decode(b, sizeof(b), &m), 0);
	assert_true(m.resp);
	assert_int_equal(m.confirm_link.no_eyec, 0x02);

	/* Encoder ranges the wire cannot carry. */
	llc_golden_load("confirm_link_req", b);
	assert_int_equal(llc_decode(b, sizeof(b), &m), 0);
	uint8_t out[LLC_MSG_LEN];
	memset(out, 0xee, sizeof(out));
	m.confirm_link.qpn = 0x1000000;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_QPN_RANGE);
	assert_int_equal(out[0], 0xee);		/* untouched on failure */
	m.confirm_link.qpn = 0xFFFFFF;
	m.confirm_link.no_eyec = 0x07;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_EYEC_RANGE);
	m.confirm_link.no_eyec = 0x03;
	m.confirm_link.link_num = 0;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_CL_LINK_ZERO);
	m.confirm_link.link_num = 255;
	assert_int_equal(llc_encode(&m, out), 0);
	assert_int_equal(out[26], 0xff);
	assert_int_equal(out[28], 0xff);
	assert_int_equal(out[29], 255);
}

static void test_add_link(void **state)
{
	(void)state;
	struct llc_msg m = llc_golden("add_link_req");
	assert_int_equal(m.type, LLC_ADD_LINK);
	assert_false(m.resp);
	assert_false(m.add_link.rejected);
	assert_int_equal(m.add_link.rej_reason, 0);
	assert_memory_equal(m.add_link.mac.b, mac_srv, 6);
	assert_memory_equal(m.add_link.gid.b, gid_srv, 16);
	assert_int_equal(m.add_link.qpn, 0x000109);
	assert_int_equal(m.add_link.link_num, 2);
	assert_int_equal(m.add_link.mtu, 3);
	assert_int_equal(wire_mtu_bytes(m.add_link.mtu), 1024);
	assert_int_equal(m.add_link.psn, 0x0abcde);

	m = llc_golden("add_link_reject");
	assert_true(m.resp);
	assert_true(m.add_link.rejected);
	assert_int_equal(m.add_link.rej_reason, LLC_AL_REJ_NO_ALT_PATH);
	assert_string_equal(llc_add_link_rej_name(m.add_link.rej_reason), "NO_ALT_PATH");
	assert_int_equal(m.add_link.qpn, 0x000109);	/* the request, echoed */

	/* The raw reject helper builds exactly that vector from the request, in place too. */
	uint8_t req[LLC_MSG_LEN], rej[LLC_MSG_LEN], want[LLC_MSG_LEN];
	llc_golden_load("add_link_req", req);
	llc_golden_load("add_link_reject", want);
	llc_add_link_reject_raw(req, LLC_AL_REJ_NO_ALT_PATH, rej);
	assert_memory_equal(rej, want, LLC_MSG_LEN);
	llc_add_link_reject_raw(req, 0x12, req);
	assert_int_equal(req[2], 0x02);
	assert_int_equal(req[3], 0xc0);

	/* An accepting response from the client: its values, min MTU. */
	m.add_link.rejected = false;
	m.add_link.rej_reason = 0;
	m.add_link.mtu = 5;
	uint8_t out[LLC_MSG_LEN];
	assert_int_equal(llc_encode(&m, out), 0);
	assert_int_equal(out[2], 0);
	assert_int_equal(out[3], 0x80);
	assert_int_equal(out[32], 5);
}

static void test_add_link_hint_and_mtu(void **state)
{
	(void)state;
	uint8_t b[LLC_MSG_LEN];
	struct llc_msg m;
	/* The client's "please add a link" hint: MAC and GID, link number, QPN, MTU and PSN
	 * zero (docs/protocol/procedures.md 3.2). Decodes as a request. */
	llc_golden_load("add_link_req", b);
	memset(b + 28, 0, 8);	/* QPN, link, MTU, PSN */
	assert_int_equal(llc_decode(b, sizeof(b), &m), 0);
	assert_int_equal(m.add_link.link_num, 0);
	assert_int_equal(m.add_link.mtu, 0);
	/* The same as a response is not valid: a response names its link. */
	expect_err(b, 3, 0x80, -SMCR_E_LLC_AL_LINK_ZERO);

	llc_golden_load("add_link_req", b);
	expect_err(b, 32, 0x00, 0);		/* request, MTU 0: decodes, to be rejected */
	expect_err(b, 32, 0x06, -SMCR_E_LLC_AL_BAD_MTU);
	expect_err(b, 32, 0x0f, -SMCR_E_LLC_AL_BAD_MTU);
	expect_err(b, 32, 0xf3, 0);			/* high nibble reserved */
	b[3] = 0x80;
	expect_err(b, 32, 0x00, -SMCR_E_LLC_AL_MTU_ZERO);
	expect_err(b, 31, 0x00, -SMCR_E_LLC_AL_LINK_ZERO);
	b[3] = 0xc0;
	expect_err(b, 32, 0x00, 0);			/* a reject echoes MTU 0 */
	expect_err(b, 32, 0x07, -SMCR_E_LLC_AL_BAD_MTU);

	/* Bytes 4..43 all zero: Linux's internal trigger, never valid (6.3). */
	memset(b + 4, 0, 40);
	b[3] = 0x00;
	expect_err(b, 2, 0x00, -SMCR_E_LLC_AL_ALL_ZERO);
	expect_err(b, 3, 0x80, -SMCR_E_LLC_AL_ALL_ZERO);
	expect_err(b, 11, 0x01, -SMCR_E_LLC_AL_ALL_ZERO);	/* reserved byte: still "zero" */

	/* Encoder ranges. */
	llc_golden_load("add_link_req", b);
	assert_int_equal(llc_decode(b, sizeof(b), &m), 0);
	uint8_t out[LLC_MSG_LEN];
	m.add_link.psn = 0x1000000;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_PSN_RANGE);
	m.add_link.psn = 1;
	m.add_link.qpn = 0x1000000;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_QPN_RANGE);
	m.add_link.qpn = 1;
	m.add_link.rej_reason = 16;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_REJ_REASON_RANGE);
	m.add_link.rej_reason = 15;
	m.add_link.mtu = 6;
	assert_int_equal(llc_encode(&m, out), -SMCR_E_LLC_AL_BAD_MTU);
}

static void test_add_link_cont(void **state)
{
	(void)state;
	struct llc_msg m = llc_golden("add_link_cont");
	assert_int_equal(m.type, LLC_ADD_LINK_CONT);
	assert_false(m.resp);
	assert_int_equal(m.add_link_cont.link_num, 2);
	assert_int_equal(m.add_link_cont.num_rkeys, 1);
	/* Pairs at offsets 8 and 24 (Linux), not 6 (Wireshark quirk 2). */
	assert_int_equal(m.add_link_cont.rt[0].rkey, 0x1a2b);
	assert_int_equal(m.add_link_cont.rt[0].rkey_new, 0x1a2c);
	assert_true(m.add_link_cont.rt[0].vaddr_new == 0x7f0012340000ull);
	assert_int_equal(m.add_link_cont.rt[1].rkey, 0);

	uint8_t b[LLC_MSG_LEN];
	llc_golden_load("add_link_cont", b);
	expect_err(b, 4, 0, -SMCR_E_LLC_ALC_LINK_ZERO);
	expect_err(b, 5, 0, 0);		/* "nothing left": still sent, valid */
	expect_err(b, 5, 255, 0);

	/* Two pairs, client response; a pair beyond the count is not decoded. */
	m.resp = true;
	m.add_link_cont.num_rkeys = 7;
	m.add_link_cont.rt[1].rkey = 0x11223344;
	m.add_link_cont.rt[1].rkey_new = 0x55667788;
	m.add_link_cont.rt[1].vaddr_new = 0x0102030405060708ull;
	uint8_t out[LLC_MSG_LEN];
	assert_int_equal(llc_encode(&m, out), 0);
	assert_int_equal(out[3], 0x80);
	static const uint8_t pair2[16] = { 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
					   1, 2, 3, 4, 5, 6, 7, 8 };
	assert_memory_equal(out + 24, pair2, 16);
	out[5] = 1;
	struct llc_msg d;
	assert_int_equal(llc_decode(out, sizeof(out), &d), 0);
	assert_int_equal(d.add_link_cont.rt[1].rkey, 0);
	/* Encoding a count of 1 writes zeros for pair 2 whatever the struct holds. */
	m.add_link_cont.num_rkeys = 1;
	assert_int_equal(llc_encode(&m, out), 0);
	static const uint8_t zero16[16];
	assert_memory_equal(out + 24, zero16, 16);
	assert_int_equal(llc_decode(out, sizeof(out), &d), 0);
	assert_true(llc_msg_equal(&m, &d));	/* equality looks at used pairs only */
}

static void test_delete_link(void **state)
{
	(void)state;
	struct llc_msg m = llc_golden("delete_link_req");
	assert_int_equal(m.type, LLC_DELETE_LINK);
	assert_false(m.resp);
	assert_false(m.delete_link.all);
	assert_true(m.delete_link.orderly);
	assert_int_equal(m.delete_link.link_num, 2);
	assert_int_equal(m.delete_link.reason, LLC_DEL_LOST_PATH);
	assert_string_equal(llc_del_reason_name(m.delete_link.reason), "LOST_PATH");

	m = llc_golden("delete_link_all");
	assert_true(m.delete_link.all);
	assert_true(m.delete_link.orderly);
	assert_int_equal(m.delete_link.link_num, 0);
	assert_int_equal(m.delete_link.reason, LLC_DEL_PROG_INIT_TERM);

	/* The reason sits at offset 5, unaligned, big-endian. */
	m.delete_link.reason = 0xA1B2C3D4;
	m.delete_link.all = false;
	m.delete_link.orderly = false;
	m.delete_link.link_num = 9;
	m.resp = true;
	uint8_t out[LLC_MSG_LEN];
	assert_int_equal(llc_encode(&m, out), 0);
	static const uint8_t want[9] = { 0x04, 0x2c, 0x00, 0x80, 0x09, 0xa1, 0xb2, 0xc3, 0xd4 };
	assert_memory_equal(out, want, 9);

	uint8_t b[LLC_MSG_LEN];
	llc_golden_load("delete_link_req", b);
	expect_err(b, 4, 0, -SMCR_E_LLC_DL_LINK_ZERO);
	llc_golden_load("delete_link_all", b);
	expect_err(b, 4, 3, 0);		/* "all" with a link number: accepted, LG ends anyway */
	expect_err(b, 3, 0x40, 0);	/* not orderly (termination path) */
	expect_err(b, 3, 0x20, -SMCR_E_LLC_DL_LINK_ZERO);	/* orderly single link 0 */
	expect_err(b, 6, 0x77, 0);	/* unnamed reason codes decode */

	static const struct { uint32_t code; const char *name; } names[] = {
		{ 0x00010000, "LOST_PATH" }, { 0x00020000, "OP_INIT_TERM" },
		{ 0x00030000, "PROG_INIT_TERM" }, { 0x00040000, "PROT_VIOL" },
		{ 0x00050000, "NO_ASYM_NEEDED" }, { 0x00100000, "NOLNK" },
		{ 0x00200000, "NOLGR" }, { 0, "NONE" },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_string_equal(llc_del_reason_name(names[i].code), names[i].name);
	assert_null(llc_del_reason_name(0x00060000));
}

static void test_test_link(void **state)
{
	(void)state;
	struct llc_msg req = llc_golden("test_link_req");
	struct llc_msg resp = llc_golden("test_link_resp");
	assert_int_equal(req.type, LLC_TEST_LINK);
	assert_false(req.resp);
	assert_true(resp.resp);
	for (unsigned i = 0; i < LLC_TL_DATA_LEN; i++)
		assert_int_equal(req.test_link.data[i], i);
	assert_memory_equal(resp.test_link.data, req.test_link.data, LLC_TL_DATA_LEN);
	/* The echo rule: response = request with resp set. */
	req.resp = true;
	assert_true(llc_msg_equal(&req, &resp));
	resp.test_link.data[15] ^= 1;
	assert_false(llc_msg_equal(&req, &resp));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_confirm_link),
		cmocka_unit_test(test_confirm_link_errors),
		cmocka_unit_test(test_add_link),
		cmocka_unit_test(test_add_link_hint_and_mtu),
		cmocka_unit_test(test_add_link_cont),
		cmocka_unit_test(test_delete_link),
		cmocka_unit_test(test_test_link),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
