/* test_v2_interop.c: golden vectors of a real exchange between smcr and the Linux 6.12
 * kernel's SMC-R v2 (tests/vectors/linux-6.12-smcr-interop.pcap: 30 frames of guest b's
 * capture in the vm_kernel test, docs/parts/wire-v2.md 10). Guest a (10.0.0.1) runs the
 * kernel, guest b (10.0.0.2) smcr over verbs on rxe; UEID SMCR-VM-KERNEL on both.
 *   frames 1-16   smcr client, kernel server: first contact (Proposal, Accept, Confirm,
 *                 CONFIRM LINK), DELETE RKEY, a reuse with CONFIRM RKEY, TEST LINK from the
 *                 kernel, smcr's delete-all at its exit and the kernel's echo of it
 *   frames 17-28  kernel client, smcr server: first contact, DELETE RKEY, a reuse
 *   frames 29-30  smcr's TEST LINK (SMCR_TESTLINK_MS) and the kernel's answer
 * Every message decodes with the fields each side put in it, re-encodes to the same bytes,
 * and the v2 checks each side applies pass on what the other sent: what Linux accepted from
 * smcr and what smcr accepted from Linux, kept as bytes. */
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
#include "wire/clc.h"
#include "wire/clc_v2.h"
#include "wire/llc_v2.h"

static struct v2cap *cap;

static const uint8_t mac_a[6] = { 0x52, 0x54, 0, 0x5c, 0, 1 };
static const uint8_t mac_b[6] = { 0x52, 0x54, 0, 0x5c, 0, 2 };

static const struct v2cap_frame *frame(size_t n, enum v2cap_kind k)
{
	return v2cap_frame(cap, n, k);
}

static void eid_is(const struct clc_eid *e)
{
	char out[CLC_EID_LEN + 1];
	clc_eid_to_str(e, out);
	assert_string_equal(out, "SMCR-VM-KERNEL");
}

static int setup(void **state)
{
	(void)state;
	cap = malloc(sizeof(*cap));
	if (!cap || v2cap_load_file(cap, "linux-6.12-smcr-interop.pcap"))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(cap);
	return 0;
}

static void proposal(size_t fr, struct clc_msg *m, struct clc_v2ext_info *x)
{
	const struct v2cap_frame *f = frame(fr, V2CAP_TCP);
	uint8_t out[CLC_MSG_MAX_LEN];
	size_t n;

	assert_int_equal(clc_decode(f->data, f->len, m), 0);
	assert_int_equal(m->type, CLC_PROPOSAL);
	assert_true(m->proposal.has_v2ext);
	assert_int_equal(clc_v2ext_get(&m->proposal.v2ext, m->proposal.typev2, x), 0);
	assert_int_equal(x->eid_count, 1);
	eid_is(&x->eids[0]);
	assert_int_equal(x->release, 1);
	assert_int_equal(clc_encode(m, out, sizeof(out), &n), 0);
	assert_int_equal(n, f->len);
	assert_memory_equal(out, f->data, n);
}

static void accept_v2(size_t fr, enum clc_type t, struct clc_accept_v2 *a)
{
	const struct v2cap_frame *f = frame(fr, V2CAP_TCP);
	uint8_t out[CLC_ACC2_MAX_LEN];
	size_t n;

	assert_int_equal(clc_accept_v2_decode(f->data, f->len, t, a), 0);
	assert_int_equal(a->f.version, 2);
	eid_is(&a->eid);
	assert_int_equal(clc_accept_v2_encode(a, t, out, sizeof(out), &n), 0);
	assert_int_equal(n, f->len);
	assert_memory_equal(out, f->data, n);
}

static void llc(size_t fr, enum llc2_type type, bool resp, struct llc2_msg *m)
{
	const struct v2cap_frame *f = frame(fr, V2CAP_ROCE);
	uint8_t out[LLC2_MAX_LEN];
	size_t n;

	assert_int_equal(f->opcode, 0x04); /* RC SEND Only */
	assert_int_equal(f->len, 44);
	assert_int_equal(llc2_decode(f->data, f->len, m), 0);
	assert_int_equal(m->type, type);
	assert_int_equal(m->resp, resp);
	assert_int_equal(m->length, 44);
	assert_int_equal(llc2_encode(m, out, sizeof(out), &n), 0);
	assert_int_equal(n, 44);
	assert_memory_equal(out, f->data, n);
}

/* smcr client → kernel server, first contact: smcr offers v1 and v2 (max links 1, no
 * feature); Linux answers v2 with max links 1 and its feature bit 0x0001 all the same;
 * smcr's Confirm repeats the Accept's limits (as Linux's own client does) with its GID. */
static void test_smcr_client_first_contact(void **state)
{
	(void)state;
	struct clc_msg m;
	struct clc_v2ext_info x;
	struct clc_accept_v2 acc, conf;
	struct wire_gid ga, gb;
	uint32_t decl = 0;

	v2cap_gid_v4(1, &ga);
	v2cap_gid_v4(2, &gb);
	proposal(1, &m, &x);
	assert_int_equal(frame(1, V2CAP_TCP)->len, 164);
	assert_int_equal(frame(1, V2CAP_TCP)->data[7], 0x20); /* v2 + v1, both SMC-R */
	assert_true(m.proposal.offers_smcr_v1);
	assert_memory_equal(m.proposal.gid.b, gb.b, 16);
	assert_memory_equal(m.proposal.mac.b, mac_b, 6);
	assert_int_equal(m.proposal.ipv4_subnet, 0x0a000000);
	assert_int_equal(m.proposal.ipv4_prefix_len, 24);
	assert_memory_equal(x.roce_gid.b, gb.b, 16);
	assert_int_equal(x.max_conns, 255);
	assert_int_equal(x.max_links, 1);
	assert_int_equal(x.feature_mask, 0);
	/* what a v2 server makes of it: version 2 */
	assert_int_equal(clc_choose_version(&m.proposal, true, true, &decl), 2);

	accept_v2(2, CLC_ACCEPT, &acc);
	assert_int_equal(frame(2, V2CAP_TCP)->len, 160);
	assert_true(acc.first_contact);
	assert_memory_equal(acc.gid.b, ga.b, 16);
	assert_memory_equal(acc.mac.b, mac_a, 6);
	assert_int_equal(acc.qpn, 0x11);
	assert_int_equal(acc.rmbe_size_code, 2); /* 64 KiB: the kernel's default */
	assert_int_equal(acc.mtu_code, 3);	  /* 1024 */
	assert_true(acc.fce.v2_direct);
	assert_int_equal(acc.fce.os_type, CLC_OS_LINUX);
	assert_int_equal(acc.fce.release, 1);
	v2cap_hostname_is(acc.fce.hostname, "smcr-vm-a");
	assert_int_equal(acc.fce.max_conns, 255);
	assert_int_equal(acc.fce.max_links, 1);		/* min(smcr's 1, Linux's 2) */
	assert_int_equal(acc.fce.feature_mask, 0x0001); /* not the common bits (0) */
	assert_false(acc.has_gids);
	assert_int_equal(clc_v2x_client_check(&acc.fce, x.release), 0);

	accept_v2(3, CLC_CONFIRM, &conf);
	assert_int_equal(frame(3, V2CAP_TCP)->len, 180);
	assert_true(conf.first_contact);
	assert_memory_equal(conf.gid.b, gb.b, 16);
	assert_int_equal(conf.qpn, 0x12);
	assert_int_equal(conf.rmbe_size_code, 5); /* smcr's 512 KiB ring */
	v2cap_hostname_is(conf.fce.hostname, "smcr-vm-b");
	assert_int_equal(conf.fce.os_type, CLC_OS_LINUX);
	assert_int_equal(conf.fce.max_links, 1);
	assert_int_equal(conf.fce.feature_mask, 0x0001);
	assert_true(conf.has_gids);
	assert_int_equal(conf.gid_count, 1);
	assert_memory_equal(conf.gids[0].b, gb.b, 16);
	assert_int_equal(clc_v2x_confirm_check(&acc.fce, &conf.fce), 0);
}

/* kernel client → smcr server, first contact: Linux offers v2 only (max links 2, feature
 * 0x0001); smcr accepts v2 with max links 1 and the common feature bits (none); Linux's
 * Confirm repeats them. */
static void test_kernel_client_first_contact(void **state)
{
	(void)state;
	struct clc_msg m;
	struct clc_v2ext_info x;
	struct clc_accept_v2 acc, conf;
	struct wire_gid ga, gb;
	uint32_t decl = 0;

	v2cap_gid_v4(1, &ga);
	v2cap_gid_v4(2, &gb);
	proposal(17, &m, &x);
	assert_int_equal(frame(17, V2CAP_TCP)->len, 156);
	assert_int_equal(frame(17, V2CAP_TCP)->data[7], 0x22); /* v2 only: rxe has no v1 GID */
	assert_false(m.proposal.offers_smcr_v1);
	assert_memory_equal(x.roce_gid.b, ga.b, 16);
	assert_int_equal(x.max_links, 2);
	assert_int_equal(x.feature_mask, 0x0001);
	assert_int_equal(clc_choose_version(&m.proposal, true, true, &decl), 2);

	accept_v2(18, CLC_ACCEPT, &acc);
	assert_true(acc.first_contact);
	assert_memory_equal(acc.gid.b, gb.b, 16);
	assert_memory_equal(acc.mac.b, mac_b, 6);
	assert_int_equal(acc.fce.release, 1);
	v2cap_hostname_is(acc.fce.hostname, "smcr-vm-b");
	assert_int_equal(acc.fce.max_conns, 255);
	assert_int_equal(acc.fce.max_links, 1);
	assert_int_equal(acc.fce.feature_mask, 0);
	assert_int_equal(clc_v2x_client_check(&acc.fce, x.release), 0);

	accept_v2(19, CLC_CONFIRM, &conf);
	assert_memory_equal(conf.gid.b, ga.b, 16);
	assert_memory_equal(conf.mac.b, mac_a, 6);
	v2cap_hostname_is(conf.fce.hostname, "smcr-vm-a");
	assert_int_equal(conf.fce.max_links, 1);
	assert_int_equal(conf.fce.feature_mask, 0);
	assert_true(conf.has_gids);
	assert_int_equal(conf.gid_count, 1);
	assert_memory_equal(conf.gids[0].b, ga.b, 16);
	assert_int_equal(clc_v2x_confirm_check(&acc.fce, &conf.fce), 0);
}

/* Reuse: 108-byte Accept and Confirm (no first-contact extension), the EID repeated. */
static void test_reuse(void **state)
{
	(void)state;
	static const struct {
		size_t fr;
		enum clc_type t;
	} v[] = { { 11, CLC_ACCEPT }, { 12, CLC_CONFIRM }, { 25, CLC_ACCEPT }, { 28, CLC_CONFIRM } };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct clc_accept_v2 a;
		assert_int_equal(frame(v[i].fr, V2CAP_TCP)->len, 108);
		accept_v2(v[i].fr, v[i].t, &a);
		assert_false(a.first_contact);
		assert_false(a.has_gids);
	}
	struct clc_msg m;
	struct clc_v2ext_info x;
	proposal(8, &m, &x);  /* smcr's Proposal again, on the reuse */
	proposal(24, &m, &x); /* Linux's */
}

/* CONFIRM LINK v2 in both roles: max links 1 and the v2.1 max connections 255. */
static void test_confirm_link(void **state)
{
	(void)state;
	static const struct {
		size_t fr;
		bool resp;
		uint8_t sender;
		uint32_t qpn, uid; /* each side's own link user ID (Linux's: its LG number's) */
	} v[] = { { 4, false, 1, 0x11, 0x101 }, { 5, true, 2, 0x12, 0x101 },
		  { 20, false, 2, 0x14, 0x101 }, { 21, true, 1, 0x12, 0x201 } };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct llc2_msg m;
		struct wire_gid g;
		llc(v[i].fr, LLC2_CONFIRM_LINK, v[i].resp, &m);
		v2cap_gid_v4(v[i].sender, &g);
		const struct llc_confirm_link *cl = &m.base.confirm_link;
		assert_int_equal(cl->no_eyec, 0x03);
		assert_memory_equal(cl->gid.b, g.b, 16);
		assert_memory_equal(cl->mac.b, v[i].sender == 1 ? mac_a : mac_b, 6);
		assert_int_equal(cl->qpn, v[i].qpn);
		assert_int_equal(cl->link_num, 1);
		assert_int_equal(cl->link_uid, v[i].uid);
		assert_int_equal(cl->max_links, 1);
		assert_int_equal(m.max_conns, 255);
	}
}

/* The other LLC messages of the two link groups: one key per DELETE RKEY, CONFIRM RKEY at
 * each reuse, TEST LINK both ways, and the delete-all at the end (orderly, program
 * initiated) with Linux's echo of it as a request. */
static void test_llc_rest(void **state)
{
	(void)state;
	struct llc2_msg m;
	static const size_t dr_req[] = { 6, 22 }, dr_resp[] = { 7, 23 };
	for (size_t i = 0; i < 2; i++) {
		llc(dr_req[i], LLC2_DELETE_RKEY, false, &m);
		assert_int_equal(m.delete_rkey.count, 1);
		assert_int_not_equal(m.delete_rkey.rkey[0], 0);
		llc(dr_resp[i], LLC2_DELETE_RKEY, true, &m);
		assert_int_equal(m.delete_rkey.count, 1);
		assert_int_equal(m.delete_rkey.num_invalid, 0);
		assert_false(m.delete_rkey.negative);
	}
	static const size_t cr[][2] = { { 9, 10 }, { 26, 27 } };
	for (size_t i = 0; i < 2; i++) {
		struct llc2_msg r;
		llc(cr[i][0], LLC2_CONFIRM_RKEY, false, &m);
		llc(cr[i][1], LLC2_CONFIRM_RKEY, true, &r);
		assert_false(r.base.confirm_rkey.negative);
		assert_int_equal(r.base.confirm_rkey.rkey, m.base.confirm_rkey.rkey);
	}
	static const size_t tl[][2] = { { 13, 14 }, { 29, 30 } };
	for (size_t i = 0; i < 2; i++) {
		struct llc2_msg r;
		llc(tl[i][0], LLC2_TEST_LINK, false, &m);
		llc(tl[i][1], LLC2_TEST_LINK, true, &r);
		assert_memory_equal(r.base.test_link.data, m.base.test_link.data,
				    sizeof(m.base.test_link.data));
	}
	for (size_t fr = 15; fr <= 16; fr++) {
		llc(fr, LLC2_DELETE_LINK, false, &m);
		assert_true(m.base.delete_link.all);
		assert_true(m.base.delete_link.orderly);
		assert_int_equal(m.base.delete_link.reason, LLC_DEL_PROG_INIT_TERM);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smcr_client_first_contact),
		cmocka_unit_test(test_kernel_client_first_contact),
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_confirm_link),
		cmocka_unit_test(test_llc_rest),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
