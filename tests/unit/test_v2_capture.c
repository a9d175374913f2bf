/* test_v2_capture.c: every CLC and LLC message of the real Linux 6.12 SMC-R v2 capture
 * (tests/vectors/linux-6.12-smcr-v2-rxe.pcap; docs/parts/wire-v2.md 8) decodes with each
 * field as the capture holds it, re-encodes to the same bytes, and is rebuilt from fields;
 * every CDC of it decodes with the unchanged v1 codec. The v2 negotiation rules, fed the
 * capture's Proposal, give the values the kernel put in its Accept and Confirm. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/v2cap.h"
#include "wire/cdc.h"
#include "wire/clc.h"
#include "wire/clc_v2.h"
#include "wire/llc_v2.h"

static struct v2cap *cap;

static const uint8_t mac1[6] = { 0x52, 0x54, 0, 0, 0, 1 };
static const uint8_t mac2[6] = { 0x52, 0x54, 0, 0, 0, 2 };

static const struct v2cap_frame *frame(size_t n, enum v2cap_kind k)
{
	return v2cap_frame(cap, n, k);
}

static void eid_is(const struct clc_eid *e, const char *s)
{
	char out[CLC_EID_LEN + 1];
	struct clc_eid want;
	clc_eid_to_str(e, out);
	assert_string_equal(out, s);
	assert_int_equal(clc_eid_from_str(s, &want), 0);
	assert_memory_equal(e->b, want.b, CLC_EID_LEN);
}

static int setup(void **state)
{
	(void)state;
	cap = malloc(sizeof(*cap));
	if (!cap || v2cap_load(cap))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(cap);
	return 0;
}

/* Frame 4: the first connection's client declines (v1, 28 bytes, NOSMCDEV). */
static void test_decline_v1(void **state)
{
	(void)state;
	const struct v2cap_frame *f = frame(4, V2CAP_TCP);
	uint8_t out[64];
	size_t n;
	struct clc_msg m;

	assert_int_equal(f->len, 28);
	assert_int_equal(clc_decode(f->data, f->len, &m), 0);
	assert_int_equal(m.type, CLC_DECLINE);
	assert_int_equal(m.decline.f.version, 1);
	assert_int_equal(m.decline.peer_id.instance, 0x9cb2);
	assert_memory_equal(m.decline.peer_id.mac.b, mac1, 6);
	assert_int_equal(m.decline.diag, 0x03030000);
	assert_string_equal(clc_decline_name(m.decline.diag), "NOSMCDEV");
	assert_false(m.decline.out_of_sync);
	assert_int_equal(clc_encode(&m, out, sizeof(out), &n), 0);
	assert_int_equal(n, f->len);
	assert_memory_equal(out, f->data, n);
}

/* Frame 62: the SMC-R v2 Proposal, 156 bytes: v2 only (typev1 NONE), no IP area, one
 * user EID, release 1, 255 connections, 2 links. */
static void test_proposal(void **state)
{
	(void)state;
	const struct v2cap_frame *f = frame(62, V2CAP_TCP);
	struct clc_v2ext_info x;
	struct wire_gid g1;
	struct clc_msg m, built;
	uint8_t out[CLC_MSG_MAX_LEN];
	size_t n;
	uint32_t ip;

	assert_int_equal(f->len, 156);
	assert_int_equal(clc_decode(f->data, f->len, &m), 0);
	const struct clc_proposal *p = &m.proposal;
	assert_int_equal(m.type, CLC_PROPOSAL);
	assert_int_equal(p->f.version, 2);
	assert_int_equal(p->typev1, CLC_PATH_NONE);
	assert_int_equal(p->typev2, CLC_PATH_R);
	assert_false(p->offers_smcr_v1);
	assert_false(p->has_iparea);
	assert_true(p->has_v2ext);
	assert_int_equal(p->iparea_offset, 0);
	assert_int_equal(p->v2ext_offset, 28);	/* extension at 52 + 28 = 80 */
	assert_int_equal(p->peer_id.instance, 0);	/* no v1 offered: peer ID, GID, MAC zero */
	assert_int_equal(p->v2ext.len, 72);
	assert_int_equal(clc_v2ext_get(&p->v2ext, p->typev2, &x), 0);
	assert_int_equal(x.release, 1);
	assert_false(x.seid);
	assert_int_equal(x.eid_count, 1);
	eid_is(&x.eids[0], "SPIKE-UEID");
	v2cap_gid_v4(1, &g1);
	assert_memory_equal(x.roce_gid.b, g1.b, 16);
	assert_true(clc_gid_ipv4(&x.roce_gid, &ip));
	assert_int_equal(ip, 0x0a000001);
	assert_int_equal(x.max_conns, 255);
	assert_int_equal(x.max_links, 2);
	assert_int_equal(x.feature_mask, 1);
	assert_false(x.has_smcd);
	/* decoded -> encoded: the same bytes */
	assert_int_equal(clc_encode(&m, out, sizeof(out), &n), 0);
	assert_int_equal(n, f->len);
	assert_memory_equal(out, f->data, n);
	/* built from fields as an smcr client would (v2 only): the same bytes */
	memset(&built, 0, sizeof(built));
	built.type = CLC_PROPOSAL;
	clc_proposal_init(&built.proposal);
	built.proposal.peer_id.instance = 0x9cb2;	/* zeroed: v1 is not offered */
	built.proposal.gid = g1;
	assert_int_equal(clc_proposal_offer(&built.proposal, false, true, &x), 0);
	assert_int_equal(clc_encode(&built, out, sizeof(out), &n), 0);
	assert_int_equal(n, f->len);
	assert_memory_equal(out, f->data, n);
	/* offering both: byte 7 0x20, the IP area before the extension; v1 only: as before */
	clc_proposal_init(&built.proposal);
	built.proposal.ipv4_subnet = 0x0a000000;
	built.proposal.ipv4_prefix_len = 24;
	assert_int_equal(clc_proposal_offer(&built.proposal, true, true, &x), 0);
	assert_int_equal(clc_encode(&built, out, sizeof(out), &n), 0);
	assert_int_equal(n, 80 + 8 + 72 + 4);
	assert_int_equal(out[7], 0x20);
	struct clc_msg both;
	uint32_t decl;
	assert_int_equal(clc_decode(out, n, &both), 0);
	assert_true(both.proposal.offers_smcr_v1 && both.proposal.has_v2ext);
	assert_int_equal(clc_choose_version(&both.proposal, true, true, &decl), 2);
	assert_int_equal(clc_choose_version(&both.proposal, false, true, &decl), 1);
	assert_int_equal(clc_proposal_offer(&built.proposal, true, false, NULL), 0);
	assert_int_equal(clc_encode(&built, out, sizeof(out), &n), 0);
	assert_int_equal(n, CLC_PROPOSAL_LINUX_LEN);
	assert_int_equal(out[7], 0x10);
	assert_int_equal(clc_proposal_offer(&built.proposal, false, false, NULL), -SMCR_E_CLC2_ENC_FIELD);
	assert_int_equal(clc_proposal_offer(&built.proposal, false, true, NULL), -SMCR_E_CLC2_ENC_FIELD);
}

static void check_acc_common(const struct clc_accept_v2 *a, uint8_t me)
{
	struct wire_gid g;
	v2cap_gid_v4(me, &g);
	assert_int_equal(a->f.version, 2);
	assert_true(a->first_contact);
	assert_memory_equal(a->peer_id.mac.b, me == 1 ? mac1 : mac2, 6);
	assert_memory_equal(a->gid.b, g.b, 16);
	assert_memory_equal(a->mac.b, me == 1 ? mac1 : mac2, 6);
	assert_int_equal(a->qpn, 0x12);
	assert_int_equal(a->rmbe_idx, 1);
	assert_int_equal(a->token, 1);
	assert_int_equal(a->rmbe_size_code, 2);
	assert_int_equal(a->mtu_code, 3);
	assert_int_equal(a->rmb_vaddr >> 32, 0xffff8880);
	eid_is(&a->eid, "SPIKE-UEID");
	assert_true(a->fce.v2_direct);
	assert_int_equal(a->fce.os_type, CLC_OS_LINUX);
	assert_int_equal(a->fce.release, 1);
	assert_int_equal(a->fce.max_conns, 255);
	assert_int_equal(a->fce.max_links, 2);
	assert_int_equal(a->fce.feature_mask, 1);
	assert_int_equal(a->fce.vendor_exp, 0);
}

static void reencode_acc(const struct clc_accept_v2 *a, enum clc_type t,
			 const struct v2cap_frame *f)
{
	uint8_t out[CLC_ACC2_MAX_LEN];
	struct clc_accept_v2 again;
	size_t n;

	assert_int_equal(clc_accept_v2_len(a, t), f->len);
	assert_int_equal(clc_accept_v2_encode(a, t, out, sizeof(out), &n), 0);
	assert_int_equal(n, f->len);
	assert_memory_equal(out, f->data, n);
	assert_int_equal(clc_accept_v2_encode(a, t, out, n - 1, &n), -SMCR_E_NOSPACE);
	assert_int_equal(clc_accept_v2_decode(f->data, f->len, t, &again), 0);
	assert_true(clc_accept_v2_equal(a, &again));
}

/* Frame 64: the server's v2 Accept, 160 bytes: first contact, 52-byte extension. */
static void test_accept(void **state)
{
	(void)state;
	const struct v2cap_frame *f = frame(64, V2CAP_TCP);
	struct clc_accept_v2 a;
	struct clc_msg m;

	assert_int_equal(f->len, 160);
	/* the v1 codec recognises it and says so */
	assert_int_equal(clc_decode(f->data, f->len, &m), -SMCR_E_CLC_ACC_V2);
	assert_int_equal(clc_accept_v2_decode(f->data, f->len, CLC_CONFIRM, &a),
			 -SMCR_E_CLC_WRONG_TYPE);
	assert_int_equal(clc_accept_v2_decode(f->data, f->len, CLC_ACCEPT, &a), 0);
	check_acc_common(&a, 2);
	assert_int_equal(a.peer_id.instance, 0x3f74);
	assert_int_equal(a.rkey, 0x42f);
	assert_int_equal(a.rmb_vaddr, 0xffff888008440000ull);
	assert_int_equal(a.psn, 0x7e4298);
	v2cap_hostname_is(a.fce.hostname, "srv");
	assert_false(a.has_gids);
	assert_int_equal(a.length, 160);
	reencode_acc(&a, CLC_ACCEPT, f);
}

/* Frame 66: the client's v2 Confirm, 180 bytes: the Accept's layout plus one GID. */
static void test_confirm(void **state)
{
	(void)state;
	const struct v2cap_frame *f = frame(66, V2CAP_TCP);
	struct clc_accept_v2 a;
	struct wire_gid g1;

	assert_int_equal(f->len, 180);
	assert_int_equal(clc_accept_v2_decode(f->data, f->len, CLC_CONFIRM, &a), 0);
	check_acc_common(&a, 1);
	assert_int_equal(a.peer_id.instance, 0x9cb2);
	assert_int_equal(a.rkey, 0x4f7);
	assert_int_equal(a.rmb_vaddr, 0xffff888007e40000ull);
	assert_int_equal(a.psn, 0xd4d7ae);
	v2cap_hostname_is(a.fce.hostname, "cli");
	assert_true(a.has_gids);
	assert_int_equal(a.gid_count, 1);
	v2cap_gid_v4(1, &g1);
	assert_memory_equal(a.gids[0].b, g1.b, 16);
	reencode_acc(&a, CLC_CONFIRM, f);
	/* the same bytes typed as an Accept: an Accept has no GID list */
	assert_int_equal(clc_accept_v2_decode(f->data, f->len, CLC_ACCEPT, &a),
			 -SMCR_E_CLC_WRONG_TYPE);
}

/* The server's choices for the captured Proposal are what the kernel's Accept holds, and
 * the client's and server's checks pass on the captured Accept and Confirm. */
static void test_negotiation(void **state)
{
	(void)state;
	struct clc_msg m;
	struct clc_v2ext_info x;
	struct clc_accept_v2 acc, conf;
	struct clc_eid table[2];
	struct clc_fce pick;
	uint32_t decl;

	assert_int_equal(clc_decode(frame(62, V2CAP_TCP)->data, 156, &m), 0);
	assert_int_equal(clc_v2ext_get(&m.proposal.v2ext, m.proposal.typev2, &x), 0);
	assert_int_equal(clc_accept_v2_decode(frame(64, V2CAP_TCP)->data, 160, CLC_ACCEPT, &acc), 0);
	assert_int_equal(clc_accept_v2_decode(frame(66, V2CAP_TCP)->data, 180, CLC_CONFIRM, &conf), 0);
	/* EID: the server's table holds it (any case in, upper case kept) */
	assert_int_equal(clc_eid_from_str("other", &table[0]), 0);
	assert_int_equal(clc_eid_from_str("spike-ueid", &table[1]), 0);
	assert_int_equal(clc_eid_match(&x, table, 2), 0);
	assert_memory_equal(x.eids[0].b, acc.eid.b, CLC_EID_LEN);
	assert_int_equal(clc_eid_match(&x, table, 1), -1);
	/* version: v2 only was offered */
	assert_int_equal(clc_choose_version(&m.proposal, true, true, &decl), 2);
	assert_int_equal(decl, 0);
	assert_int_equal(clc_choose_version(&m.proposal, false, true, &decl), 0);
	assert_int_equal(decl, CLC2_DECL_NOSMCDEV);
	/* v2.1 limits: Linux's defaults (255 connections, 2 links) */
	assert_int_equal(clc_v2x_server_pick(&x, 255, 2, 1, &pick), 0);
	assert_int_equal(pick.release, acc.fce.release);
	assert_int_equal(pick.max_conns, acc.fce.max_conns);
	assert_int_equal(pick.max_links, acc.fce.max_links);
	assert_int_equal(pick.feature_mask, acc.fce.feature_mask);
	assert_int_equal(clc_v2x_client_check(&acc.fce, x.release), 0);
	assert_int_equal(clc_v2x_confirm_check(&acc.fce, &conf.fce), 0);
}

static void llc_roundtrip(const struct llc2_msg *m, const struct v2cap_frame *f)
{
	uint8_t out[LLC2_MAX_LEN];
	struct llc2_msg again;
	size_t n;

	assert_int_equal(llc2_len(m), m->length);
	assert_int_equal(llc2_encode(m, out, sizeof(out), &n), 0);
	assert_int_equal(n, m->length);
	assert_memory_equal(out, f->data, n);
	assert_int_equal(llc2_encode(m, out, n - 1, &n), -SMCR_E_NOSPACE);
	assert_int_equal(llc2_decode(out, m->length, &again), 0);
	assert_true(llc2_msg_equal(m, &again));
}

/* Frames 67 and 69: CONFIRM LINK v2 request (server) and response (client). */
static void test_llc_confirm_link(void **state)
{
	(void)state;
	static const size_t fr[2] = { 67, 69 };
	for (int i = 0; i < 2; i++) {
		const struct v2cap_frame *f = frame(fr[i], V2CAP_ROCE);
		struct llc2_msg m;
		struct wire_gid g;
		uint8_t me = i == 0 ? 2 : 1;

		assert_int_equal(f->opcode, 0x04);	/* RC SEND Only */
		assert_int_equal(f->len, 44);
		assert_int_equal(llc2_decode(f->data, f->len, &m), 0);
		assert_int_equal(m.type, LLC2_CONFIRM_LINK);
		assert_int_equal(m.length, 44);
		assert_int_equal(m.resp, i == 1);
		const struct llc_confirm_link *cl = &m.base.confirm_link;
		v2cap_gid_v4(me, &g);
		assert_int_equal(cl->no_eyec, 0x03);
		assert_memory_equal(cl->mac.b, me == 1 ? mac1 : mac2, 6);
		assert_memory_equal(cl->gid.b, g.b, 16);
		assert_int_equal(cl->qpn, 0x12);
		assert_int_equal(cl->link_num, 1);
		assert_int_equal(cl->link_uid, 0x00000101);
		assert_int_equal(cl->max_links, 2);
		assert_int_equal(m.max_conns, 255);
		llc_roundtrip(&m, f);
	}
}

/* Frame 71: the server's ADD LINK v2 request, 88 bytes, with the RKey of the one RMB on the
 * new link; frame 74: the client's reject (no second path), 44 bytes. */
static void test_llc_add_link(void **state)
{
	(void)state;
	const struct v2cap_frame *f = frame(71, V2CAP_ROCE);
	struct llc2_msg m;
	struct wire_gid g2;

	v2cap_gid_v4(2, &g2);
	assert_int_equal(f->len, 88);
	assert_int_equal(llc2_decode(f->data, f->len, &m), 0);
	assert_int_equal(m.type, LLC2_ADD_LINK);
	assert_int_equal(m.length, 88);
	assert_false(m.resp);
	const struct llc_add_link *al = &m.base.add_link;
	assert_false(al->rejected);
	assert_memory_equal(al->mac.b, mac2, 6);
	assert_memory_equal(al->gid.b, g2.b, 16);
	assert_int_equal(al->qpn, 0x13);
	assert_int_equal(al->link_num, 2);
	assert_int_equal(al->mtu, 3);
	assert_int_equal(al->psn, 0x141846);
	assert_true(m.has_ext);
	assert_true(m.ext.v2_direct);
	assert_memory_equal(m.ext.target_gid.b, g2.b, 16);
	assert_int_equal(m.ext.num_rkeys, 1);
	assert_int_equal(m.ext.rt[0].rkey, 0x42f);	/* the Accept's rkey */
	assert_int_equal(m.ext.rt[0].rkey_new, 0x677);
	assert_int_equal(m.ext.rt[0].vaddr_new, 0xffff888008440000ull);
	llc_roundtrip(&m, f);

	f = frame(74, V2CAP_ROCE);
	assert_int_equal(f->len, 44);
	assert_int_equal(llc2_decode(f->data, f->len, &m), 0);
	assert_int_equal(m.type, LLC2_ADD_LINK);
	assert_true(m.resp);
	assert_true(m.base.add_link.rejected);
	assert_int_equal(m.base.add_link.rej_reason, 0);	/* lost under the length */
	assert_false(m.has_ext);
	assert_int_equal(m.base.add_link.qpn, 0x13);	/* the request echoed */
	llc_roundtrip(&m, f);
}

/* Frames 164/165: DELETE RKEY v2 requests from both sides at close; 168/169: responses. */
static void test_llc_delete_rkey(void **state)
{
	(void)state;
	static const struct { size_t fr; bool resp; uint32_t rkey; } v[4] = {
		{ 164, false, 0x42f }, { 165, false, 0x4f7 }, { 168, true, 0 }, { 169, true, 0 },
	};
	for (int i = 0; i < 4; i++) {
		const struct v2cap_frame *f = frame(v[i].fr, V2CAP_ROCE);
		struct llc2_msg m;

		assert_int_equal(f->len, 44);
		assert_int_equal(llc2_decode(f->data, f->len, &m), 0);
		assert_int_equal(m.type, LLC2_DELETE_RKEY);
		assert_int_equal(m.resp, v[i].resp);
		assert_int_equal(m.delete_rkey.count, 1);
		assert_int_equal(m.delete_rkey.num_invalid, 0);
		assert_false(m.delete_rkey.negative);
		assert_int_equal(m.delete_rkey.rkey[0], v[i].rkey);
		llc_roundtrip(&m, f);
	}
}

/* Every RoCE SEND of the capture is a v2 LLC message or a v1-format CDC message: CDC is
 * unchanged in v2. */
static void test_every_roce_send(void **state)
{
	(void)state;
	size_t llc = 0, cdc = 0;
	for (size_t i = 0; i < cap->count; i++) {
		const struct v2cap_frame *f = &cap->f[i];
		if (f->kind != V2CAP_ROCE || f->opcode != 0x04)
			continue;
		if (f->data[0] == LLC_TYPE_CDC) {
			struct cdc_msg c;
			uint8_t out[CDC_MSG_LEN];
			assert_int_equal(f->len, CDC_MSG_LEN);
			assert_int_equal(cdc_decode(f->data, f->len, &c), 0);
			assert_int_equal(cdc_encode(&c, out), 0);
			assert_memory_equal(out, f->data, CDC_MSG_LEN);
			cdc++;
		} else {
			struct llc2_msg m;
			assert_int_equal(llc2_decode(f->data, f->len, &m), 0);
			llc++;
		}
	}
	assert_int_equal(llc, 8);	/* 67, 69, 71, 74, 164, 165, 168, 169 */
	assert_int_equal(cdc, 35);	/* what tshark counts as CDC Message */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decline_v1),
		cmocka_unit_test(test_proposal),
		cmocka_unit_test(test_accept),
		cmocka_unit_test(test_confirm),
		cmocka_unit_test(test_negotiation),
		cmocka_unit_test(test_llc_confirm_link),
		cmocka_unit_test(test_llc_add_link),
		cmocka_unit_test(test_llc_delete_rkey),
		cmocka_unit_test(test_every_roce_send),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
