/* test_clc_v2.c: the SMC-R v2 CLC codecs off the golden path (docs/parts/wire-v2.md 2-6):
 * every decoder error of the v2 Accept/Confirm and of the v2 extension on a mutated copy
 * of the capture's messages, encoder range checks, the GID list sizes, the release-0
 * first-contact extension, SMC-D v2 parts, EID rules and every branch of the negotiation
 * rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "wire/clc.h"
#include "wire/clc_v2.h"

/* The captured Confirm (frame 66), 180 bytes. */
static const char confirm_hex[] =
	"e2d4c3d90300b4289cb252540000000100000000000000000000ffff0a00000152540000000100001200"
	"0004f701000000012300ffff888007e4000000d4d7ae5350494b452d5545494420202020202020202020"
	"202020202020202020202020000000000000000080210000636c69202020202020202020202020202020"
	"2020202020202020202020202020ff020001000000000000000000000000010000000000000000000000"
	"0000ffff0a000001e2d4c3d9";

static size_t unhex(const char *s, uint8_t *out)
{
	size_t n = 0;
	for (; s[0] && s[1]; s += 2) {
		unsigned v;
		sscanf(s, "%2x", &v);
		out[n++] = (uint8_t)v;
	}
	return n;
}

static void set_len(uint8_t *b, size_t len)
{
	b[5] = (uint8_t)(len >> 8);
	b[6] = (uint8_t)len;
}

/* Rewrites a message to len bytes (trailer moved to the end). */
static size_t resize(uint8_t *b, size_t old, size_t len)
{
	static const uint8_t trl[4] = { 0xe2, 0xd4, 0xc3, 0xd9 };
	if (len > old)
		memset(b + old - 4, 0, len - old + 4);
	memcpy(b + len - 4, trl, 4);
	set_len(b, len);
	return len;
}

static void test_confirm_errors(void **state)
{
	(void)state;
	uint8_t b[512], o[512];
	struct clc_accept_v2 a;
	size_t n = unhex(confirm_hex, o);

	assert_int_equal(n, 180);
	assert_int_equal(clc_accept_v2_decode(o, n, CLC_CONFIRM, &a), 0);
	/* version 1 */
	memcpy(b, o, n); b[7] = 0x18;
	assert_int_equal(clc_accept_v2_decode(b, n, CLC_CONFIRM, &a), -SMCR_E_CLC2_ACC_V1);
	/* path D, path 2 */
	memcpy(b, o, n); b[7] = 0x29;
	assert_int_equal(clc_accept_v2_decode(b, n, CLC_CONFIRM, &a), -SMCR_E_CLC_ACC_SMCD);
	memcpy(b, o, n); b[7] = 0x2a;
	assert_int_equal(clc_accept_v2_decode(b, n, CLC_CONFIRM, &a), -SMCR_E_CLC_BAD_PATH);
	/* bad MTU, RMBE index 0, token 0 */
	memcpy(b, o, n); b[50] = 0x26;
	assert_int_equal(clc_accept_v2_decode(b, n, CLC_CONFIRM, &a), -SMCR_E_CLC_ACC_BAD_MTU);
	memcpy(b, o, n); b[45] = 0;
	assert_int_equal(clc_accept_v2_decode(b, n, CLC_CONFIRM, &a), -SMCR_E_CLC_ACC_BAD_RMBE_IDX);
	memcpy(b, o, n); memset(b + 46, 0, 4);
	assert_int_equal(clc_accept_v2_decode(b, n, CLC_CONFIRM, &a), -SMCR_E_CLC_ACC_ZERO_TOKEN);
	/* shorter than 108 */
	memcpy(b, o, n);
	assert_int_equal(clc_accept_v2_decode(b, resize(b, n, 104), CLC_CONFIRM, &a),
			 -SMCR_E_CLC2_ACC_SHORT);
	/* no first contact: exactly 108 */
	memcpy(b, o, n); b[7] = 0x20;
	assert_int_equal(clc_accept_v2_decode(b, n, CLC_CONFIRM, &a), -SMCR_E_CLC2_ACC_LENGTH);
	assert_int_equal(clc_accept_v2_decode(b, resize(b, n, 108), CLC_CONFIRM, &a), 0);
	assert_false(a.first_contact);
	/* first contact but the extension cut short (release 1 needs 52) */
	memcpy(b, o, n);
	assert_int_equal(clc_accept_v2_decode(b, resize(b, n, 140), CLC_CONFIRM, &a),
			 -SMCR_E_CLC2_ACC_SHORT);
	memcpy(b, o, n);
	assert_int_equal(clc_accept_v2_decode(b, resize(b, n, 150), CLC_CONFIRM, &a),
			 -SMCR_E_CLC2_ACC_SHORT);
	/* release 0: a 36-byte extension, then the GID list would start at 140 */
	memcpy(b, o, n); b[105] = 0x20;
	assert_int_equal(clc_accept_v2_decode(b, resize(b, n, 144), CLC_CONFIRM, &a), 0);
	assert_int_equal(a.fce.release, 0);
	assert_false(a.has_gids);
	/* GID list: count beyond the length, above 8, stray bytes */
	memcpy(b, o, n); b[156] = 2;
	assert_int_equal(clc_accept_v2_decode(b, n, CLC_CONFIRM, &a), -SMCR_E_CLC2_ACC_GLE_COUNT);
	memcpy(b, o, n); b[156] = 9;
	assert_int_equal(clc_accept_v2_decode(b, resize(b, n, 160 + 9 * 16 + 4), CLC_CONFIRM, &a),
			 -SMCR_E_CLC2_ACC_GLE_COUNT);
	memcpy(b, o, n);
	assert_int_equal(clc_accept_v2_decode(b, resize(b, n, 162), CLC_CONFIRM, &a),
			 -SMCR_E_CLC2_ACC_GLE_COUNT);
	/* the same GID list in an Accept is a length error */
	memcpy(b, o, n); b[4] = CLC_ACCEPT;
	assert_int_equal(clc_accept_v2_decode(b, n, CLC_ACCEPT, &a), -SMCR_E_CLC2_ACC_LENGTH);
	/* a Confirm without the list is fine (160 bytes), and with 8 GIDs */
	memcpy(b, o, n);
	assert_int_equal(clc_accept_v2_decode(b, resize(b, n, 160), CLC_CONFIRM, &a), 0);
	assert_false(a.has_gids);
	memcpy(b, o, n); b[156] = 8;
	assert_int_equal(clc_accept_v2_decode(b, resize(b, n, 160 + 4 + 8 * 16), CLC_CONFIRM, &a), 0);
	assert_int_equal(a.gid_count, 8);
	/* framing errors come from the shared frame reader */
	memcpy(b, o, n); b[0] = 0;
	assert_int_equal(clc_accept_v2_decode(b, n, CLC_CONFIRM, &a), -SMCR_E_CLC_BAD_EYECATCHER);
	assert_int_equal(clc_accept_v2_decode(o, n - 1, CLC_CONFIRM, &a), -SMCR_E_CLC_TRUNCATED);
	assert_int_equal(clc_accept_v2_decode(o, n, CLC_DECLINE, &a), -SMCR_E_INVAL);
}

static void test_encode_ranges(void **state)
{
	(void)state;
	uint8_t o[256], out[CLC_ACC2_MAX_LEN];
	struct clc_accept_v2 a, b;
	size_t n = unhex(confirm_hex, o), m;

	assert_int_equal(clc_accept_v2_decode(o, n, CLC_CONFIRM, &a), 0);
	b = a; b.f.version = 1;
	assert_int_equal(clc_accept_v2_encode(&b, CLC_CONFIRM, out, sizeof(out), &m), -SMCR_E_CLC2_ENC_FIELD);
	b = a; b.qpn = 1u << 24;
	assert_int_equal(clc_accept_v2_encode(&b, CLC_CONFIRM, out, sizeof(out), &m), -SMCR_E_CLC2_ENC_FIELD);
	b = a; b.mtu_code = 6;
	assert_int_equal(clc_accept_v2_encode(&b, CLC_CONFIRM, out, sizeof(out), &m), -SMCR_E_CLC2_ENC_FIELD);
	b = a; b.token = 0;
	assert_int_equal(clc_accept_v2_encode(&b, CLC_CONFIRM, out, sizeof(out), &m), -SMCR_E_CLC2_ENC_FIELD);
	b = a; b.gid_count = 9;
	assert_int_equal(clc_accept_v2_encode(&b, CLC_CONFIRM, out, sizeof(out), &m), -SMCR_E_CLC2_ENC_FIELD);
	b = a;		/* GIDs only in a Confirm, and only on first contact */
	assert_int_equal(clc_accept_v2_encode(&b, CLC_ACCEPT, out, sizeof(out), &m), -SMCR_E_CLC2_ENC_FIELD);
	b.first_contact = false;
	assert_int_equal(clc_accept_v2_encode(&b, CLC_CONFIRM, out, sizeof(out), &m), -SMCR_E_CLC2_ENC_FIELD);
	b.has_gids = false;
	assert_int_equal(clc_accept_v2_encode(&b, CLC_CONFIRM, out, sizeof(out), &m), 0);
	assert_int_equal(m, 108);
	b = a; b.fce.release = 16;
	assert_int_equal(clc_accept_v2_encode(&b, CLC_CONFIRM, out, sizeof(out), &m), -SMCR_E_CLC2_ENC_FIELD);
	/* release 0 writes the short extension; decode gives the same struct back */
	b = a; b.fce.release = 0; b.fce.max_conns = b.fce.max_links = 0; b.fce.feature_mask = 0;
	assert_int_equal(clc_accept_v2_encode(&b, CLC_CONFIRM, out, sizeof(out), &m), 0);
	assert_int_equal(m, 104 + 36 + 4 + 16 + 4);
	assert_int_equal(clc_accept_v2_decode(out, m, CLC_CONFIRM, &a), 0);
	assert_true(clc_accept_v2_equal(&a, &b));
}

/* A Proposal offering SMC-R v1 and v2 and SMC-D v2 with two EIDs: built from fields,
 * decoded back by the v1 codec, its extension read by clc_v2ext_get. */
static void test_v2ext_both(void **state)
{
	(void)state;
	struct clc_msg m, d;
	struct clc_v2ext_info x, y;
	uint8_t out[CLC_MSG_MAX_LEN];
	size_t n;

	memset(&x, 0, sizeof(x));
	x.release = 1;
	x.seid = true;
	x.eid_count = 2;
	assert_int_equal(clc_eid_from_str("A.B-1", &x.eids[0]), 0);
	assert_int_equal(clc_eid_from_str("ZZ", &x.eids[1]), 0);
	x.roce_gid.b[10] = x.roce_gid.b[11] = 0xff;
	x.max_conns = 200;
	x.max_links = 1;
	x.feature_mask = 0x0003;
	x.has_smcd = true;
	assert_int_equal(clc_eid_from_str("SEID", &x.system_eid), 0);
	x.ism_gid_count = 2;
	x.ism[0].gid = 0x1122334455667788ull;
	x.ism[0].chid = 0xffff;
	x.ism[1].gid = 7;
	memset(&m, 0, sizeof(m));
	m.type = CLC_PROPOSAL;
	clc_proposal_init(&m.proposal);
	m.proposal.f.version = 2;
	m.proposal.typev1 = CLC_PATH_R;
	m.proposal.typev2 = CLC_PATH_BOTH;
	m.proposal.ipv4_subnet = 0x0a000000;
	m.proposal.ipv4_prefix_len = 24;
	assert_int_equal(clc_v2ext_put(&x, CLC_PATH_BOTH, &m.proposal.v2ext), 0);
	assert_int_equal(m.proposal.v2ext.len, 40 + 64 + 48 + 20);
	assert_int_equal(clc_encode(&m, out, sizeof(out), &n), 0);
	assert_int_equal(n, 80 + 8 + 172 + 4);
	assert_int_equal(clc_decode(out, n, &d), 0);
	assert_true(d.proposal.offers_smcr_v1 && d.proposal.has_v2ext && d.proposal.has_iparea);
	assert_int_equal(clc_v2ext_get(&d.proposal.v2ext, d.proposal.typev2, &y), 0);
	assert_memory_equal(&x, &y, sizeof(x));
	/* read as SMC-R only, the SMC-D part is stray bytes */
	assert_int_equal(clc_v2ext_get(&d.proposal.v2ext, CLC_PATH_R, &y), -SMCR_E_CLC2_EXT_EID_COUNT);
	/* mutations of the raw extension */
	struct clc_v2ext r = d.proposal.v2ext;
	r.raw[0] = 9;
	assert_int_equal(clc_v2ext_get(&r, CLC_PATH_BOTH, &y), -SMCR_E_CLC2_EXT_EID_COUNT);
	r = d.proposal.v2ext; r.raw[7] += 1;
	assert_int_equal(clc_v2ext_get(&r, CLC_PATH_BOTH, &y), -SMCR_E_CLC2_EXT_SMCD_OFFSET);
	r = d.proposal.v2ext; r.raw[1] = 3;
	assert_int_equal(clc_v2ext_get(&r, CLC_PATH_BOTH, &y), -SMCR_E_CLC2_EXT_GID_COUNT);
	r = d.proposal.v2ext; r.len = 39;
	assert_int_equal(clc_v2ext_get(&r, CLC_PATH_BOTH, &y), -SMCR_E_CLC2_EXT_SHORT);
	x.eid_count = 9;
	assert_int_equal(clc_v2ext_put(&x, CLC_PATH_R, &r), -SMCR_E_CLC2_ENC_FIELD);
}

static void test_eids(void **state)
{
	(void)state;
	struct clc_eid e;
	char s[CLC_EID_LEN + 1];

	assert_int_equal(clc_eid_from_str("my-ueid.01", &e), 0);
	clc_eid_to_str(&e, s);
	assert_string_equal(s, "MY-UEID.01");
	assert_int_equal(e.b[10], ' ');
	assert_int_equal(e.b[31], ' ');
	assert_int_equal(clc_eid_from_str("12345678901234567890123456789012", &e), 0);
	assert_int_equal(clc_eid_from_str("123456789012345678901234567890123", &e), -SMCR_E_CLC2_EID_INVALID);
	assert_int_equal(clc_eid_from_str("", &e), -SMCR_E_CLC2_EID_INVALID);
	assert_int_equal(clc_eid_from_str(NULL, &e), -SMCR_E_CLC2_EID_INVALID);
	assert_int_equal(clc_eid_from_str("-X", &e), -SMCR_E_CLC2_EID_INVALID);
	assert_int_equal(clc_eid_from_str(".X", &e), -SMCR_E_CLC2_EID_INVALID);
	assert_int_equal(clc_eid_from_str("A B", &e), -SMCR_E_CLC2_EID_INVALID);
	assert_int_equal(clc_eid_from_str("A_B", &e), -SMCR_E_CLC2_EID_INVALID);
}

static void test_choose_version(void **state)
{
	(void)state;
	struct clc_proposal p;
	uint32_t d;

	clc_proposal_init(&p);			/* v1, SMC-R */
	p.offers_smcr_v1 = true;
	assert_int_equal(clc_choose_version(&p, true, true, &d), 1);
	assert_int_equal(clc_choose_version(&p, true, false, &d), 0);
	assert_int_equal(d, CLC2_DECL_NOSMCDEV);
	p.f.version = 2; p.typev2 = CLC_PATH_R; p.has_v2ext = true;	/* both offered */
	assert_int_equal(clc_choose_version(&p, true, true, &d), 2);
	assert_int_equal(clc_choose_version(&p, false, true, &d), 1);
	assert_int_equal(clc_choose_version(&p, false, false, &d), 0);
	assert_int_equal(d, CLC2_DECL_NOSMCDEV);
	p.typev2 = CLC_PATH_D;			/* v2 for SMC-D only */
	assert_int_equal(clc_choose_version(&p, true, true, &d), 1);
	p.typev1 = CLC_PATH_NONE;		/* SMC-D v2 only */
	assert_int_equal(clc_choose_version(&p, true, true, &d), 0);
	assert_int_equal(d, CLC2_DECL_NOSMCDEV);
	p.typev2 = CLC_PATH_NONE;		/* nothing at all */
	assert_int_equal(clc_choose_version(&p, true, true, &d), 0);
	assert_int_equal(d, CLC2_DECL_PEERNOSMC);
	p.f.version = 1; p.typev2 = CLC_PATH_R;	/* v1: typev2 bits are reserved */
	assert_int_equal(clc_choose_version(&p, true, true, &d), 0);
	assert_int_equal(d, CLC2_DECL_PEERNOSMC);
	p.f.version = 2;
	p.typev2 = CLC_PATH_R; p.has_v2ext = false;
	assert_int_equal(clc_choose_version(&p, true, true, &d), 0);
	assert_int_equal(d, CLC2_DECL_NOV2EXT);
}

static void test_v2x_limits(void **state)
{
	(void)state;
	struct clc_v2ext_info x;
	struct clc_fce f, c;

	memset(&x, 0, sizeof(x));
	x.release = 3; x.max_conns = 255; x.max_links = 2; x.feature_mask = 0xff;
	assert_int_equal(clc_v2x_server_pick(&x, 100, 1, 0x01, &f), 0);
	assert_int_equal(f.release, CLC_RELEASE_SMCR);
	assert_int_equal(f.max_conns, 100);
	assert_int_equal(f.max_links, 1);
	assert_int_equal(f.feature_mask, 1);
	x.max_conns = 15;
	assert_int_equal(clc_v2x_server_pick(&x, 255, 2, 0, &f), CLC2_DECL_MAXCONNERR);
	x.max_conns = 16; x.max_links = 0;
	assert_int_equal(clc_v2x_server_pick(&x, 255, 2, 0, &f), CLC2_DECL_MAXLINKERR);
	x.release = 0;				/* v2.0: no limits negotiated */
	assert_int_equal(clc_v2x_server_pick(&x, 255, 2, 0, &f), 0);
	assert_int_equal(f.release, 0);
	assert_int_equal(f.max_conns, 0);

	memset(&f, 0, sizeof(f));
	f.release = 1; f.max_conns = 16; f.max_links = 2;
	assert_int_equal(clc_v2x_client_check(&f, 1), 0);
	assert_int_equal(clc_v2x_client_check(&f, 0), CLC2_DECL_RELEASEERR);
	f.max_conns = 15;
	assert_int_equal(clc_v2x_client_check(&f, 1), CLC2_DECL_MAXCONNERR);
	f.max_conns = 16; f.max_links = 3;
	assert_int_equal(clc_v2x_client_check(&f, 1), CLC2_DECL_MAXLINKERR);
	f.max_links = 0;
	assert_int_equal(clc_v2x_client_check(&f, 1), CLC2_DECL_MAXLINKERR);
	f.release = 0;
	assert_int_equal(clc_v2x_client_check(&f, 1), 0);

	memset(&f, 0, sizeof(f));
	f.release = 1; f.max_conns = 32; f.max_links = 2;
	c = f;
	assert_int_equal(clc_v2x_confirm_check(&f, &c), 0);
	c.release = 0;
	assert_int_equal(clc_v2x_confirm_check(&f, &c), CLC2_DECL_RELEASEERR);
	c = f; c.max_conns = 31;
	assert_int_equal(clc_v2x_confirm_check(&f, &c), CLC2_DECL_MAXCONNERR);
	c = f; c.max_links = 1;
	assert_int_equal(clc_v2x_confirm_check(&f, &c), CLC2_DECL_MAXLINKERR);
}

static void test_gid_ipv4(void **state)
{
	(void)state;
	struct wire_gid g;
	uint32_t ip = 0;

	memset(&g, 0, sizeof(g));
	assert_false(clc_gid_ipv4(&g, &ip));
	g.b[10] = g.b[11] = 0xff; g.b[12] = 192; g.b[13] = 168; g.b[14] = 1; g.b[15] = 9;
	assert_true(clc_gid_ipv4(&g, &ip));
	assert_int_equal(ip, 0xc0a80109);
	g.b[0] = 0xfe;
	assert_false(clc_gid_ipv4(&g, &ip));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_confirm_errors),
		cmocka_unit_test(test_encode_ranges),
		cmocka_unit_test(test_v2ext_both),
		cmocka_unit_test(test_eids),
		cmocka_unit_test(test_choose_version),
		cmocka_unit_test(test_v2x_limits),
		cmocka_unit_test(test_gid_ipv4),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
