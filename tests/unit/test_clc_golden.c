/* test_clc_golden.c: every CLC hex example of the spec (docs/protocol/wire-formats.md 3.6, 4, 9;
 * docs/protocol/wireshark.md 6.1) and the hand-built IPv6 / version-2 vectors decode to the
 * documented field values and re-encode to the same bytes; encoders built from fields produce them
 * too. Also the decline-code table (5.2) and the peek of a header for stream readers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/clc_vectors.h"
#include "wire/clc.h"

static const uint8_t gid_hw[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
				    0x9a, 0x03, 0x9b, 0xff, 0xfe, 0xab, 0xcd, 0xef };
static const uint8_t mac_hw[6] = { 0x98, 0x03, 0x9b, 0xab, 0xcd, 0xef };
static const uint8_t gid_c1[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
				    0x9a, 0x03, 0x9b, 0xff, 0xfe, 0x00, 0x00, 0x01 };
static const uint8_t mac_c1[6] = { 0x98, 0x03, 0x9b, 0x00, 0x00, 0x01 };
static const uint8_t gid_s2[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
				    0x9a, 0x03, 0x9b, 0xff, 0xfe, 0x00, 0x00, 0x02 };
static const uint8_t mac_s2[6] = { 0x98, 0x03, 0x9b, 0x00, 0x00, 0x02 };

/* Decodes v through clc_decode, re-encodes and checks the bytes are identical. */
static void roundtrip(const uint8_t *v, size_t len, struct clc_msg *m)
{
	uint8_t out[CLC_MSG_MAX_LEN];
	size_t n = 0;

	assert_int_equal(clc_decode(v, len, m), 0);
	assert_int_equal(clc_encode(m, out, sizeof(out), &n), 0);
	assert_int_equal(n, len);
	assert_memory_equal(out, v, len);
	/* exactly enough room works, one byte less does not */
	assert_int_equal(clc_encode(m, out, len, &n), 0);
	assert_int_equal(clc_encode(m, out, len - 1, &n), -SMCR_E_NOSPACE);
}

static void test_prop_hw52(void **state)
{
	(void)state;
	struct clc_msg m;
	roundtrip(vec_prop_hw52, sizeof(vec_prop_hw52), &m);
	const struct clc_proposal *p = &m.proposal;
	assert_int_equal(m.type, CLC_PROPOSAL);
	assert_int_equal(p->f.version, 1);
	assert_int_equal(p->f.eye, CLC_EYE_SMCR);
	assert_int_equal(p->f.trail, CLC_EYE_SMCR);
	assert_int_equal(p->typev1, CLC_PATH_R);
	assert_int_equal(p->typev2, 0);
	assert_int_equal(p->length, 52);
	assert_int_equal(p->peer_id.instance, 0xb1a0);
	assert_memory_equal(p->peer_id.mac.b, mac_hw, 6);
	assert_memory_equal(p->gid.b, gid_hw, 16);
	assert_memory_equal(p->mac.b, mac_hw, 6);
	assert_int_equal(p->iparea_offset, 0);
	assert_true(p->has_iparea);
	assert_int_equal(p->ipv4_subnet, 0x7f000000);
	assert_int_equal(p->ipv4_prefix_len, 8);
	assert_int_equal(p->ipv6_count, 0);
	assert_false(p->has_v2ext);
	assert_true(p->offers_smcr_v1);
	assert_int_equal(p->ism_gid, 0);
	assert_int_equal(clc_proposal_len(p), 52);
}

static void check_prop92(const struct clc_proposal *p, uint8_t version)
{
	assert_int_equal(p->f.version, version);
	assert_int_equal(p->typev1, CLC_PATH_R);
	assert_int_equal(p->typev2, version == 2 ? CLC_PATH_NONE : 0);
	assert_int_equal(p->length, 92);
	assert_int_equal(p->peer_id.instance, 0x1234);
	assert_memory_equal(p->peer_id.mac.b, mac_c1, 6);
	assert_memory_equal(p->gid.b, gid_c1, 16);
	assert_memory_equal(p->mac.b, mac_c1, 6);
	assert_int_equal(p->iparea_offset, 40);
	assert_int_equal(p->ism_gid, 0);
	assert_int_equal(p->ism_chid, 0);
	assert_int_equal(p->v2ext_offset, 0);
	assert_true(p->has_iparea);
	assert_int_equal(p->ipv4_subnet, 0x0a000000);
	assert_int_equal(p->ipv4_prefix_len, 24);
	assert_int_equal(p->ipv6_count, 0);
	assert_false(p->has_v2ext);
	assert_true(p->offers_smcr_v1);
}

static void test_prop_smcr92(void **state)
{
	(void)state;
	struct clc_msg m;
	roundtrip(vec_prop_smcr92, sizeof(vec_prop_smcr92), &m);
	check_prop92(&m.proposal, 1);

	/* The default Proposal of clc_proposal_init + the four caller fields = the vector. */
	struct clc_proposal p;
	uint8_t out[128];
	size_t n = 0;
	clc_proposal_init(&p);
	p.peer_id.instance = 0x1234;
	memcpy(p.peer_id.mac.b, mac_c1, 6);
	memcpy(p.gid.b, gid_c1, 16);
	memcpy(p.mac.b, mac_c1, 6);
	p.ipv4_subnet = 0x0a000000;
	p.ipv4_prefix_len = 24;
	assert_int_equal(clc_proposal_len(&p), CLC_PROPOSAL_LINUX_LEN);
	assert_int_equal(clc_proposal_encode(&p, out, sizeof(out), &n), 0);
	assert_int_equal(n, 92);
	assert_memory_equal(out, vec_prop_smcr92, 92);

	/* The same with N = 0 gives the classic 52-byte layout (IPv4 subnet at 40). */
	p.iparea_offset = 0;
	assert_int_equal(clc_proposal_encode(&p, out, sizeof(out), &n), 0);
	assert_int_equal(n, 52);
	assert_int_equal(out[6], 52);
	assert_int_equal(out[40], 0x0a);
	assert_int_equal(out[44], 24);
	assert_memory_equal(out + 48, "\xe2\xd4\xc3\xd9", 4);
}

static void test_prop_linux92(void **state)
{
	(void)state;
	struct clc_msg m;
	roundtrip(vec_prop_linux92, sizeof(vec_prop_linux92), &m);
	check_prop92(&m.proposal, 2);
	assert_int_equal(vec_prop_linux92[7], 0x28);

	/* Built from fields: version 2, typev2 none, typev1 R. */
	struct clc_proposal p = m.proposal;
	uint8_t out[128];
	size_t n = 0;
	clc_proposal_init(&p);
	p.f.version = 2;
	p.typev2 = CLC_PATH_NONE;
	p.peer_id = m.proposal.peer_id;
	p.gid = m.proposal.gid;
	p.mac = m.proposal.mac;
	p.ipv4_subnet = 0x0a000000;
	p.ipv4_prefix_len = 24;
	assert_int_equal(clc_proposal_encode(&p, out, sizeof(out), &n), 0);
	assert_int_equal(n, 92);
	assert_memory_equal(out, vec_prop_linux92, 92);
}

static void test_prop_ipv6(void **state)
{
	(void)state;
	static const uint8_t pfx[16] = { 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01 };
	struct clc_msg m;
	roundtrip(vec_prop_ipv6_109, sizeof(vec_prop_ipv6_109), &m);
	const struct clc_proposal *p = &m.proposal;
	assert_int_equal(p->length, 109);
	assert_int_equal(p->iparea_offset, 40);
	assert_int_equal(p->ipv4_subnet, 0);
	assert_int_equal(p->ipv4_prefix_len, 0);
	assert_int_equal(p->ipv6_count, 1);
	assert_memory_equal(p->ipv6[0].addr, pfx, 16);
	assert_int_equal(p->ipv6[0].len, 64);
	assert_true(p->offers_smcr_v1);
}

static void test_prop_v2ext(void **state)
{
	(void)state;
	struct clc_msg m;
	roundtrip(vec_prop_v2ext, sizeof(vec_prop_v2ext), &m);
	const struct clc_proposal *p = &m.proposal;
	assert_int_equal(p->f.version, 2);
	assert_int_equal(p->typev2, CLC_PATH_R);
	assert_int_equal(p->typev1, CLC_PATH_R);
	assert_int_equal(p->length, 164);
	assert_int_equal(p->iparea_offset, 40);
	assert_int_equal(p->v2ext_offset, 36);	/* 52 + 36 = 88, right after the IP area */
	assert_int_equal(p->ipv4_subnet, 0x0a000000);
	assert_true(p->has_v2ext);
	assert_int_equal(p->v2ext.len, 72);
	assert_int_equal(p->v2ext.eid_count, 1);
	assert_int_equal(p->v2ext.ism_gid_count, 0);
	assert_int_equal(p->v2ext.release, 1);
	assert_false(p->v2ext.seid);
	assert_memory_equal(p->v2ext.raw + 40, "SMCR-TEST-EID   ", 16);
	assert_true(p->offers_smcr_v1);

	/* The encoder computes the v2 extension offset itself. */
	struct clc_proposal q = *p;
	uint8_t out[256];
	size_t n = 0;
	q.v2ext_offset = 0;
	assert_int_equal(clc_proposal_encode(&q, out, sizeof(out), &n), 0);
	assert_int_equal(n, 164);
	assert_memory_equal(out, vec_prop_v2ext, 164);
}

static void check_accept_hw(const struct clc_accept *a)
{
	assert_int_equal(a->f.version, 1);
	assert_int_equal(a->peer_id.instance, 0xb1a0);
	assert_memory_equal(a->peer_id.mac.b, mac_hw, 6);
	assert_memory_equal(a->gid.b, gid_hw, 16);
	assert_memory_equal(a->mac.b, mac_hw, 6);
	assert_int_equal(a->rmbe_idx, 1);
	assert_int_equal(a->rmbe_size_code, 2);		/* 64 KiB */
	assert_int_equal(a->mtu_code, 3);		/* 1024 */
}

static void test_accept_hw(void **state)
{
	(void)state;
	struct clc_msg m;
	roundtrip(vec_accept_hw, sizeof(vec_accept_hw), &m);
	assert_int_equal(m.type, CLC_ACCEPT);
	const struct clc_accept *a = &m.accept;
	check_accept_hw(a);
	assert_true(a->first_contact);
	assert_int_equal(a->qpn, 228);
	assert_int_equal(a->rkey, 5501);
	assert_int_equal(a->token, 5);
	assert_true(a->rmb_vaddr == 0xf0a60000ull);
	assert_int_equal(a->psn, 7534078);
}

static void test_confirm_hw(void **state)
{
	(void)state;
	struct clc_msg m;
	roundtrip(vec_confirm_hw, sizeof(vec_confirm_hw), &m);
	assert_int_equal(m.type, CLC_CONFIRM);
	const struct clc_accept *a = &m.accept;
	check_accept_hw(a);
	assert_false(a->first_contact);
	assert_int_equal(a->qpn, 229);
	assert_int_equal(a->rkey, 6271);
	assert_int_equal(a->token, 6);
	assert_true(a->rmb_vaddr == 0xf0a40000ull);
	assert_int_equal(a->psn, 887204);

	/* Built from fields: the Confirm is the Accept with its own values. */
	struct clc_msg acc;
	assert_int_equal(clc_decode(vec_accept_hw, sizeof(vec_accept_hw), &acc), 0);
	struct clc_accept c = acc.accept;
	c.first_contact = false;
	c.qpn = 229;
	c.rkey = 6271;
	c.token = 6;
	c.rmb_vaddr = 0xf0a40000;
	c.psn = 887204;
	uint8_t out[68];
	size_t n = 0;
	assert_int_equal(clc_accept_encode(&c, CLC_CONFIRM, out, sizeof(out), &n), 0);
	assert_int_equal(n, 68);
	assert_memory_equal(out, vec_confirm_hw, 68);
	/* Decoding an Accept as a Confirm (and back) is refused. */
	assert_int_equal(clc_accept_decode(vec_accept_hw, 68, CLC_CONFIRM, &c),
			 -SMCR_E_CLC_WRONG_TYPE);
	assert_int_equal(clc_accept_decode(vec_confirm_hw, 68, CLC_ACCEPT, &c),
			 -SMCR_E_CLC_WRONG_TYPE);
	assert_int_equal(clc_accept_decode(vec_confirm_hw, 68, CLC_DECLINE, &c), -SMCR_E_INVAL);
}

static void test_accept_ws(void **state)
{
	(void)state;
	struct clc_msg m;
	roundtrip(vec_accept_ws, sizeof(vec_accept_ws), &m);
	const struct clc_accept *a = &m.accept;
	assert_true(a->first_contact);
	assert_int_equal(a->peer_id.instance, 0xabcd);
	assert_memory_equal(a->gid.b, gid_s2, 16);
	assert_memory_equal(a->mac.b, mac_s2, 6);
	assert_int_equal(a->qpn, 0x107);
	assert_int_equal(a->rkey, 0x1a2b);
	assert_int_equal(a->rmbe_idx, 1);
	assert_int_equal(a->token, 5);
	assert_int_equal(a->rmbe_size_code, 2);
	assert_int_equal(a->mtu_code, 3);
	assert_true(a->rmb_vaddr == 0x7f0012340000ull);
	assert_int_equal(a->psn, 0x123456);
}

static void test_declines(void **state)
{
	(void)state;
	struct clc_msg m;

	roundtrip(vec_decline_diffprefix, sizeof(vec_decline_diffprefix), &m);
	assert_int_equal(m.type, CLC_DECLINE);
	assert_int_equal(m.decline.f.version, 1);
	assert_false(m.decline.out_of_sync);
	assert_int_equal(m.decline.path, CLC_PATH_R);
	assert_int_equal(m.decline.peer_id.instance, 0xabcd);
	assert_memory_equal(m.decline.peer_id.mac.b, mac_s2, 6);
	assert_int_equal(m.decline.diag, 0x03070000);
	assert_string_equal(clc_decline_name(m.decline.diag), "DIFFPREFIX");

	roundtrip(vec_decline_syncerr, sizeof(vec_decline_syncerr), &m);
	assert_true(m.decline.out_of_sync);
	assert_int_equal(m.decline.peer_id.instance, 0x1234);
	assert_memory_equal(m.decline.peer_id.mac.b, mac_c1, 6);
	assert_int_equal(m.decline.diag, 0x04000000);
	assert_string_equal(clc_decline_name(m.decline.diag), "SYNCERR");

	roundtrip(vec_decline_v2, sizeof(vec_decline_v2), &m);
	assert_int_equal(m.decline.f.version, 2);
	assert_false(m.decline.out_of_sync);
	assert_int_equal(m.decline.diag, 0x03030002);
	assert_int_equal(m.decline.os_type, 2);
	assert_int_equal(m.decline.diag_v2[0], 0x03030004);
	assert_int_equal(m.decline.diag_v2[1], 0x030c0000);
	assert_int_equal(m.decline.diag_v2[2], 0);
	assert_int_equal(m.decline.diag_v2[3], 0);

	/* Built from fields: the DIFFPREFIX Decline a server sends. */
	struct clc_decline d;
	memset(&d, 0, sizeof(d));
	d.f.version = 1;
	d.peer_id.instance = 0xabcd;
	memcpy(d.peer_id.mac.b, mac_s2, 6);
	d.diag = 0x03070000;
	uint8_t out[44];
	size_t n = 0;
	assert_int_equal(clc_decline_encode(&d, out, sizeof(out), &n), 0);
	assert_int_equal(n, 28);
	assert_memory_equal(out, vec_decline_diffprefix, 28);
}

static void test_peek(void **state)
{
	(void)state;
	enum clc_type t;
	uint16_t l;
	uint8_t v;
	for (size_t i = 0; i < clc_vectors_count; i++) {
		const struct test_vector *tv = &clc_vectors[i];
		/* 8 bytes are enough */
		assert_int_equal(clc_peek_header(tv->bytes, CLC_HDR_LEN, &t, &l, &v), 0);
		assert_int_equal(l, tv->len);
		assert_int_equal(t, tv->bytes[4]);
		assert_int_equal(v, tv->bytes[7] >> 4);
		assert_int_equal(clc_peek_header(tv->bytes, tv->len, NULL, NULL, NULL), 0);
		assert_int_equal(clc_peek_header(tv->bytes, 7, &t, &l, &v),
				 -SMCR_E_CLC_SHORT_HEADER);
	}
	/* A stream with two messages back to back: peek, take, decode, repeat. */
	uint8_t stream[200];
	memcpy(stream, vec_accept_hw, 68);
	memcpy(stream + 68, vec_decline_syncerr, 28);
	size_t off = 0;
	int count = 0;
	while (off < 96) {
		struct clc_msg m;
		assert_int_equal(clc_peek_header(stream + off, 96 - off, &t, &l, NULL), 0);
		assert_int_equal(clc_decode(stream + off, l, &m), 0);
		assert_int_equal(m.type, t);
		off += l;
		count++;
	}
	assert_int_equal(count, 2);
	/* clc_decode of both together: trailing bytes */
	struct clc_msg m;
	assert_int_equal(clc_decode(stream, 96, &m), -SMCR_E_CLC_TRAILING);
}

static void test_decline_table(void **state)
{
	(void)state;
	size_t n = 0;
	const struct clc_decline_reason *t = clc_decline_table(&n);
	assert_true(n >= 40);
	/* every 6.x code of 5.2 is named */
	static const struct { uint32_t code; const char *name; } want[] = {
		{ 0x01010000, "MEM" }, { 0x02010000, "TIMEOUT_CL" }, { 0x02020000, "TIMEOUT_AL" },
		{ 0x03000000, "CNFERR" }, { 0x03010000, "PEERNOSMC" }, { 0x03020000, "IPSEC" },
		{ 0x03030000, "NOSMCDEV" }, { 0x03030001, "NOSMCDDEV" },
		{ 0x03030002, "NOSMCRDEV" }, { 0x03030003, "NOISM2SUPP" },
		{ 0x03030004, "NOV2EXT" }, { 0x03030005, "NOV2DEXT" }, { 0x03030006, "NOSEID" },
		{ 0x03030007, "NOSMCD2DEV" }, { 0x03030008, "NOUEID" },
		{ 0x03030009, "RELEASEERR" }, { 0x0303000a, "MAXCONNERR" },
		{ 0x0303000b, "MAXLINKERR" }, { 0x03040000, "MODEUNSUPP" },
		{ 0x03050000, "RMBE_EC" }, { 0x03060000, "OPTUNSUPP" },
		{ 0x03070000, "DIFFPREFIX" }, { 0x03080000, "GETVLANERR" },
		{ 0x03090000, "ISMVLANERR" }, { 0x030a0000, "NOACTLINK" },
		{ 0x030b0000, "NOSRVLINK" }, { 0x030c0000, "VERSMISMAT" },
		{ 0x030d0000, "MAX_DMB" }, { 0x030e0000, "NOROUTE" },
		{ 0x030f0000, "NOINDIRECT" }, { 0x04000000, "SYNCERR" },
		{ 0x05000000, "PEERDECL" }, { 0x09990000, "INTERR" },
		{ 0x09990001, "ERR_RTOK" }, { 0x09990002, "ERR_RDYLNK" },
		{ 0x09990003, "ERR_REGBUF" },
		/* 4.11 codes, decoded leniently */
		{ 0x02000000, "TIMEOUT" }, { 0x02040000, "TCL" }, { 0x06000000, "REPLY" },
		{ 0x07000000, "SEND" }, { 0x99990000, "INTERR" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct clc_decline_reason *r = clc_decline_lookup(want[i].code);
		assert_non_null(r);
		assert_string_equal(r->name, want[i].name);
		assert_string_equal(clc_decline_name(want[i].code), want[i].name);
		assert_true(strlen(r->meaning) > 5);
	}
	assert_true(clc_decline_lookup(0x99990000)->old);
	assert_false(clc_decline_lookup(0x09990000)->old);
	/* codes unique in the table */
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			assert_true(t[i].code != t[j].code);
	/* unknown codes: no name, but a class from the top byte */
	assert_null(clc_decline_lookup(0x0303000c));
	assert_string_equal(clc_decline_name(0x0303000c), "UNKNOWN");
	assert_string_equal(clc_decline_class(0x0303000c), "configuration");
	assert_string_equal(clc_decline_class(0x02990000), "timeout");
	assert_string_equal(clc_decline_class(0x99990001), "internal");
	assert_string_equal(clc_decline_class(0x01000000), "resources");
	assert_string_equal(clc_decline_class(0x04000001), "sync");
	assert_string_equal(clc_decline_class(0x0a000000), "unknown");
	assert_string_equal(clc_decline_class(0), "unknown");
	assert_string_equal(clc_type_name(CLC_CONFIRM), "Confirm");
	assert_string_equal(clc_type_name((enum clc_type)9), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prop_hw52),
		cmocka_unit_test(test_prop_smcr92),
		cmocka_unit_test(test_prop_linux92),
		cmocka_unit_test(test_prop_ipv6),
		cmocka_unit_test(test_prop_v2ext),
		cmocka_unit_test(test_accept_hw),
		cmocka_unit_test(test_confirm_hw),
		cmocka_unit_test(test_accept_ws),
		cmocka_unit_test(test_declines),
		cmocka_unit_test(test_peek),
		cmocka_unit_test(test_decline_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
