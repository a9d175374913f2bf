/* gen.c: encodes every SMC-R v1 message type with our encoders and writes the capture of the
 * tshark conformance test (gen.h). Values are distinct and non-zero so a field read from the
 * wrong offset shows. */
#include "gen.h"

#include <stdio.h>
#include <string.h>

#include "lib/pcapw.h"
#include "util/err.h"
#include "wire/tcpopt.h"

const uint8_t gen_client_mac[6] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 };
const uint8_t gen_server_mac[6] = { 0x02, 0x66, 0x77, 0x88, 0x99, 0xaa };
/* RoCE v1 GIDs: fe80:: + the MAC's EUI-64. */
const uint8_t gen_client_gid[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
				     0x00, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55 };
const uint8_t gen_server_gid[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
				     0x00, 0x66, 0x77, 0xff, 0xfe, 0x88, 0x99, 0xaa };
static const uint8_t server2_mac[6] = { 0x02, 0x66, 0x77, 0x88, 0x99, 0xbb };
static const uint8_t server2_gid[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
					 0x00, 0x66, 0x77, 0xff, 0xfe, 0x88, 0x99, 0xbb };
static const uint8_t client2_gid[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
					 0x00, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x66 };
static const uint8_t client2_mac[6] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x66 };

struct gen {
	struct pcapw w;
	struct gen_frame *f;
	size_t n, max;
	int failed;
};

static struct gen_frame *next(struct gen *g, enum gen_kind kind, const char *what)
{
	if (g->n >= g->max) {
		g->failed = 1;
		return NULL;
	}
	struct gen_frame *f = &g->f[g->n];
	memset(f, 0, sizeof(*f));
	f->number = g->w.nframes + 1;
	f->kind = kind;
	f->what = what;
	g->n++;
	return f;
}

static void enc_fail(struct gen *g, const char *what, int rc)
{
	fprintf(stderr, "encoder refused %s: %s (%s)\n", what, smcr_err_name(rc),
		smcr_err_msg(rc));
	g->failed = 1;
}

static void peer(struct wire_peer_id *p, uint16_t inst, const uint8_t mac[6])
{
	p->instance = inst;
	memcpy(p->mac.b, mac, 6);
}

/* ---- TCP / CLC ------------------------------------------------------------------------ */

static void handshake(struct gen *g, struct pcapw_flow *fl)
{
	uint8_t opt[TCPOPT_SMC_ALIGNED_LEN + 4];
	size_t ol = 0;
	/* MSS then the SMC option as Linux aligns it (docs/protocol/wire-formats.md 1). */
	opt[0] = 0x02;
	opt[1] = 0x04;
	opt[2] = 0x05;
	opt[3] = 0xb4;
	int rc = tcpopt_encode_aligned(opt + 4, sizeof(opt) - 4, &ol);
	if (rc) {
		enc_fail(g, "TCP option", rc);
		return;
	}
	struct gen_frame *f = next(g, GEN_TCP_SYN, "SYN with the SMC option");
	struct gen_frame *f2 = next(g, GEN_TCP_SYN, "SYN-ACK with the SMC option");
	struct gen_frame *f3 = next(g, GEN_TCP_OTHER, "ACK");
	if (!f || !f2 || !f3)
		return;
	f2->number = f->number + 1;
	f2->synack = true;
	f3->number = f->number + 2;
	if (pcapw_flow_handshake(&g->w, fl, opt, 4 + ol, opt, 4 + ol))
		g->failed = 1;
}

static void clc(struct gen *g, struct pcapw_flow *fl, bool from_server, struct clc_msg *m,
		const char *what)
{
	struct gen_frame *f = next(g, GEN_CLC, what);
	if (!f)
		return;
	f->clc = *m;
	int rc = clc_encode(m, f->bytes, sizeof(f->bytes), &f->len);
	if (rc) {
		enc_fail(g, what, rc);
		return;
	}
	if (pcapw_flow_send(&g->w, fl, from_server, f->bytes, f->len))
		g->failed = 1;
}

static void proposal_base(struct clc_msg *m, uint8_t gid_last)
{
	memset(m, 0, sizeof(*m));
	m->type = CLC_PROPOSAL;
	clc_proposal_init(&m->proposal);
	struct clc_proposal *p = &m->proposal;
	peer(&p->peer_id, 0x1357, gen_client_mac);
	memcpy(p->gid.b, gen_client_gid, 16);
	p->gid.b[15] = gid_last;
	memcpy(p->mac.b, gen_client_mac, 6);
}

static void accept_msg(struct clc_msg *m, enum clc_type type)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	struct clc_accept *a = &m->accept;
	a->f.version = CLC_VERSION_1;
	a->first_contact = true;
	if (type == CLC_ACCEPT) {
		peer(&a->peer_id, 0x2468, gen_server_mac);
		memcpy(a->gid.b, gen_server_gid, 16);
		memcpy(a->mac.b, gen_server_mac, 6);
		a->qpn = 0x0a0b0c;
		a->rkey = 0x11223344;
		a->rmbe_idx = 3;
		a->token = 0x55667788;
		a->rmbe_size_code = 3;	/* 128 KiB */
		a->mtu_code = 4;	/* 2048 */
		a->rmb_vaddr = 0x8877665544332211ull;
		a->psn = 0x0d0e0f;
	} else {
		peer(&a->peer_id, 0x1357, gen_client_mac);
		memcpy(a->gid.b, gen_client_gid, 16);
		memcpy(a->mac.b, gen_client_mac, 6);
		a->qpn = 0x1a1b1c;
		a->rkey = 0x21222324;
		a->rmbe_idx = 2;
		a->token = 0x31323334;
		a->rmbe_size_code = 1;	/* 32 KiB */
		a->mtu_code = 3;	/* 1024 */
		a->rmb_vaddr = 0x4142434445464748ull;
		a->psn = 0x515253;
	}
}

static void clc_flows(struct gen *g)
{
	struct pcapw_ep c = { .ip4 = 0x0a141e01, .port = 41001 };	/* 10.20.30.1 */
	struct pcapw_ep s = { .ip4 = 0x0a141e02, .port = 51001 };	/* 10.20.30.2 */
	memcpy(c.mac, gen_client_mac, 6);
	memcpy(s.mac, gen_server_mac, 6);
	struct pcapw_flow fl;
	struct clc_msg m;

	/* Flow 1: Proposal (N = 40, IPv4, SMC-D area values set) / Accept / Confirm. */
	pcapw_flow_init(&fl, &c, &s, 0x10000000, 0x20000000);
	handshake(g, &fl);
	proposal_base(&m, 0x55);
	m.proposal.ism_gid = 0x1122334455667788ull;
	m.proposal.ism_chid = 0x99aa;
	m.proposal.ipv4_subnet = 0x0a141e00;	/* 10.20.30.0 */
	m.proposal.ipv4_prefix_len = 24;
	clc(g, &fl, false, &m, "Proposal v1 N=40 IPv4");
	accept_msg(&m, CLC_ACCEPT);
	clc(g, &fl, true, &m, "Accept (first contact)");
	accept_msg(&m, CLC_CONFIRM);
	clc(g, &fl, false, &m, "Confirm (first contact)");

	/* Flow 2: Proposal with two IPv6 prefixes / Decline v1 with out-of-sync. */
	c.port++;
	s.port++;
	pcapw_flow_init(&fl, &c, &s, 0x30000000, 0x40000000);
	handshake(g, &fl);
	proposal_base(&m, 0x56);
	m.proposal.ipv6_count = 2;
	uint8_t p1[16] = { 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01 };
	uint8_t p2[16] = { 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x02, 0x00, 0x03 };
	memcpy(m.proposal.ipv6[0].addr, p1, 16);
	m.proposal.ipv6[0].len = 48;
	memcpy(m.proposal.ipv6[1].addr, p2, 16);
	m.proposal.ipv6[1].len = 64;
	clc(g, &fl, false, &m, "Proposal v1 N=40 two IPv6 prefixes");
	memset(&m, 0, sizeof(m));
	m.type = CLC_DECLINE;
	m.decline.f.version = CLC_VERSION_1;
	m.decline.out_of_sync = true;
	peer(&m.decline.peer_id, 0x2468, gen_server_mac);
	m.decline.diag = 0x0303000b;
	clc(g, &fl, true, &m, "Decline v1 out-of-sync");

	/* Flow 3: modern-Linux Proposal (byte 7 = 0x28) / Decline v2. */
	c.port++;
	s.port++;
	pcapw_flow_init(&fl, &c, &s, 0x50000000, 0x60000000);
	handshake(g, &fl);
	proposal_base(&m, 0x57);
	m.proposal.f.version = CLC_VERSION_2;
	m.proposal.typev2 = CLC_PATH_NONE;
	m.proposal.typev1 = CLC_PATH_R;
	m.proposal.ipv4_subnet = 0xc0a80000;	/* 192.168.0.0 */
	m.proposal.ipv4_prefix_len = 16;
	clc(g, &fl, false, &m, "Proposal version 2 (0x28)");
	memset(&m, 0, sizeof(m));
	m.type = CLC_DECLINE;
	m.decline.f.version = CLC_VERSION_2;
	peer(&m.decline.peer_id, 0x2468, gen_server_mac);
	m.decline.diag = 0x03030008;
	m.decline.os_type = 2;
	m.decline.diag_v2[0] = 0x01010000;
	m.decline.diag_v2[1] = 0x02020000;
	m.decline.diag_v2[2] = 0x030a0000;
	m.decline.diag_v2[3] = 0x09990003;
	clc(g, &fl, true, &m, "Decline v2");

	/* Flow 4: the classic 52-byte Proposal (N = 0): docs/protocol/wireshark.md quirk 1. */
	c.port++;
	s.port++;
	pcapw_flow_init(&fl, &c, &s, 0x70000000, 0x7fff0000);
	handshake(g, &fl);
	proposal_base(&m, 0x58);
	m.proposal.iparea_offset = 0;
	m.proposal.ipv4_subnet = 0x7f000000;
	m.proposal.ipv4_prefix_len = 8;
	clc(g, &fl, false, &m, "Proposal v1 N=0 (52 bytes)");
}

/* ---- RoCE / LLC / CDC ------------------------------------------------------------------ */

static void roce(struct gen *g, enum gen_kind kind, int ver, bool from_server,
		 const void *msg_struct, const char *what)
{
	struct gen_frame *f = next(g, kind, what);
	if (!f)
		return;
	f->roce = ver;
	int rc;
	if (kind == GEN_LLC) {
		f->llc = *(const struct llc_msg *)msg_struct;
		rc = llc_encode(&f->llc, f->bytes);
	} else {
		f->cdc = *(const struct cdc_msg *)msg_struct;
		rc = cdc_encode(&f->cdc, f->bytes);
	}
	if (rc) {
		enc_fail(g, what, rc);
		return;
	}
	f->len = LLC_MSG_LEN;
	struct pcapw_ep c = { .ip4 = 0x0a141e01, .port = 0xc001 };
	struct pcapw_ep s = { .ip4 = 0x0a141e02, .port = 0xc002 };
	memcpy(c.mac, gen_client_mac, 6);
	memcpy(c.gid, gen_client_gid, 16);
	memcpy(s.mac, gen_server_mac, 6);
	memcpy(s.gid, gen_server_gid, 16);
	struct pcapw_roce p = {
		.src = from_server ? &s : &c, .dst = from_server ? &c : &s,
		.opcode = BTH_OP_RC_SEND_ONLY, .se = true,
		.dqpn = from_server ? 0x1a1b1c : 0x0a0b0c, .psn = 0x100 + (uint32_t)g->n,
		.payload = f->bytes, .len = f->len,
	};
	uint8_t frame[PCAPW_FRAME_MAX];
	size_t n = ver == 1 ? pcapw_build_roce_v1(frame, sizeof(frame), &p)
			    : pcapw_build_roce_v2(frame, sizeof(frame), &p);
	f->dest_qp = p.dqpn;
	f->bth_psn = p.psn;
	if (n < 4 || pcapw_frame(&g->w, frame, n)) {
		g->failed = 1;
		return;
	}
	const uint8_t *crc = frame + n - ROCE_ICRC_LEN;
	f->icrc_wire = (uint32_t)crc[0] << 24 | (uint32_t)crc[1] << 16 | (uint32_t)crc[2] << 8 |
		       crc[3];
}

static void llc_msgs(struct gen *g)
{
	struct llc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = LLC_CONFIRM_LINK;
	m.confirm_link.no_eyec = LLC_CL_FLAG_NO_RMBE_EYEC;
	memcpy(m.confirm_link.mac.b, gen_server_mac, 6);
	memcpy(m.confirm_link.gid.b, gen_server_gid, 16);
	m.confirm_link.qpn = 0x0a0b0c;
	m.confirm_link.link_num = 7;
	m.confirm_link.link_uid = 0xdeadbeef;
	m.confirm_link.max_links = 2;
	roce(g, GEN_LLC, 1, true, &m, "CONFIRM LINK request");
	m.resp = true;
	memcpy(m.confirm_link.mac.b, gen_client_mac, 6);
	memcpy(m.confirm_link.gid.b, gen_client_gid, 16);
	m.confirm_link.qpn = 0x1a1b1c;
	m.confirm_link.link_uid = 0xcafef00d;
	roce(g, GEN_LLC, 1, false, &m, "CONFIRM LINK response");

	memset(&m, 0, sizeof(m));
	m.type = LLC_ADD_LINK;
	memcpy(m.add_link.mac.b, server2_mac, 6);
	memcpy(m.add_link.gid.b, server2_gid, 16);
	m.add_link.qpn = 0x0c0d0e;
	m.add_link.link_num = 8;
	m.add_link.mtu = 5;
	m.add_link.psn = 0x0f1011;
	roce(g, GEN_LLC, 1, true, &m, "ADD LINK request");
	m.resp = true;
	memcpy(m.add_link.mac.b, client2_mac, 6);
	memcpy(m.add_link.gid.b, client2_gid, 16);
	m.add_link.qpn = 0x1c1d1e;
	m.add_link.mtu = 4;
	m.add_link.psn = 0x1f2021;
	roce(g, GEN_LLC, 1, false, &m, "ADD LINK response");
	m.add_link.rejected = true;
	m.add_link.rej_reason = LLC_AL_REJ_INVALID_MTU;
	roce(g, GEN_LLC, 1, false, &m, "ADD LINK reject");

	memset(&m, 0, sizeof(m));
	m.type = LLC_ADD_LINK_CONT;
	m.add_link_cont.link_num = 8;
	m.add_link_cont.num_rkeys = 2;
	m.add_link_cont.rt[0].rkey = 0x11110001;
	m.add_link_cont.rt[0].rkey_new = 0x22220002;
	m.add_link_cont.rt[0].vaddr_new = 0x3333000000000003ull;
	m.add_link_cont.rt[1].rkey = 0x44440004;
	m.add_link_cont.rt[1].rkey_new = 0x55550005;
	m.add_link_cont.rt[1].vaddr_new = 0x6666000000000006ull;
	roce(g, GEN_LLC, 1, true, &m, "ADD LINK CONT request");
	m.resp = true;
	m.add_link_cont.num_rkeys = 1;
	m.add_link_cont.rt[1].rkey = 0;
	m.add_link_cont.rt[1].rkey_new = 0;
	m.add_link_cont.rt[1].vaddr_new = 0;
	m.add_link_cont.rt[0].rkey = 0x77770007;
	m.add_link_cont.rt[0].rkey_new = 0x88880008;
	m.add_link_cont.rt[0].vaddr_new = 0x9999000000000009ull;
	roce(g, GEN_LLC, 1, false, &m, "ADD LINK CONT response");

	memset(&m, 0, sizeof(m));
	m.type = LLC_DELETE_LINK;
	m.delete_link.orderly = true;
	m.delete_link.link_num = 8;
	m.delete_link.reason = LLC_DEL_LOST_PATH;
	roce(g, GEN_LLC, 1, true, &m, "DELETE LINK request");
	m.resp = true;
	m.delete_link.orderly = false;
	m.delete_link.reason = LLC_DEL_NOLNK;
	roce(g, GEN_LLC, 1, false, &m, "DELETE LINK response");
	memset(&m, 0, sizeof(m));
	m.type = LLC_DELETE_LINK;
	m.delete_link.all = true;
	m.delete_link.orderly = true;
	m.delete_link.reason = LLC_DEL_PROG_INIT_TERM;
	roce(g, GEN_LLC, 1, true, &m, "DELETE LINK all");

	memset(&m, 0, sizeof(m));
	m.type = LLC_CONFIRM_RKEY;
	m.confirm_rkey.num_other = 2;
	m.confirm_rkey.rkey = 0x61626364;
	m.confirm_rkey.vaddr = 0x7172737475767778ull;
	m.confirm_rkey.other[0] = (struct llc_rtoken){ 7, 0x81828384, 0x9192939495969798ull };
	m.confirm_rkey.other[1] = (struct llc_rtoken){ 8, 0xa1a2a3a4, 0xb1b2b3b4b5b6b7b8ull };
	roce(g, GEN_LLC, 1, true, &m, "CONFIRM RKEY request");
	m.resp = true;
	m.confirm_rkey.negative = true;
	m.confirm_rkey.retry = true;
	roce(g, GEN_LLC, 1, false, &m, "CONFIRM RKEY negative response");

	memset(&m, 0, sizeof(m));
	m.type = LLC_CONFIRM_RKEY_CONT;
	m.confirm_rkey_cont.num_remaining = 3;
	m.confirm_rkey_cont.entry[0] = (struct llc_rtoken){ 9, 0xc1c2c3c4, 0xd1d2d3d4d5d6d7d8ull };
	m.confirm_rkey_cont.entry[1] = (struct llc_rtoken){ 10, 0xe1e2e3e4, 0xf1f2f3f4f5f6f7f8ull };
	m.confirm_rkey_cont.entry[2] = (struct llc_rtoken){ 11, 0x12131415, 0x2223242526272829ull };
	roce(g, GEN_LLC, 1, true, &m, "CONFIRM RKEY CONT request");
	m.resp = true;
	m.confirm_rkey_cont.negative = true;
	roce(g, GEN_LLC, 1, false, &m, "CONFIRM RKEY CONT negative response");

	memset(&m, 0, sizeof(m));
	m.type = LLC_DELETE_RKEY;
	m.delete_rkey.count = 3;
	m.delete_rkey.rkey[0] = 0xc1c2c3c4;
	m.delete_rkey.rkey[1] = 0xd1d2d3d4;
	m.delete_rkey.rkey[2] = 0xe1e2e3e4;
	roce(g, GEN_LLC, 1, true, &m, "DELETE RKEY request");
	m.resp = true;
	m.delete_rkey.negative = true;
	m.delete_rkey.err_mask = 0x40;	/* the second rkey failed */
	roce(g, GEN_LLC, 1, false, &m, "DELETE RKEY negative response");

	memset(&m, 0, sizeof(m));
	m.type = LLC_TEST_LINK;
	for (int i = 0; i < LLC_TL_DATA_LEN; i++)
		m.test_link.data[i] = (uint8_t)(0xf0 + i);
	roce(g, GEN_LLC, 1, true, &m, "TEST LINK request");
	m.resp = true;
	roce(g, GEN_LLC, 1, false, &m, "TEST LINK response");
	/* The same over RoCE v2 (UDP 4791). */
	m.resp = false;
	roce(g, GEN_LLC, 2, false, &m, "TEST LINK request over RoCE v2");
}

static void cdc_msgs(struct gen *g)
{
	static const char *names[] = {
		"CDC B write blocked", "CDC P urgent pending", "CDC U urgent present",
		"CDC R consumer update requested", "CDC F failover validation",
		"CDC D sending done", "CDC C closed", "CDC A abnormal close",
		"CDC all flags", "CDC all flags over RoCE v2",
	};
	for (unsigned i = 0; i < 10; i++) {
		struct cdc_msg m;
		memset(&m, 0, sizeof(m));
		m.seqno = (uint16_t)(0x1001 + i);
		m.token = 0x0badf00du + i;
		m.prod.wrap = (uint16_t)(0x0102 + i);
		m.prod.count = 0x03040506u + i;
		m.cons.wrap = (uint16_t)(0x0708 + i);
		m.cons.count = 0x090a0b0cu + i;
		bool all = i >= 8;
		m.pf.write_blocked = i == 0 || all;
		m.pf.urg_pending = i == 1 || all;
		m.pf.urg_present = i == 2 || all;
		m.pf.cons_upd_req = i == 3 || all;
		m.pf.failover = i == 4 || all;
		m.cf.done_writing = i == 5 || all;
		m.cf.closed = i == 6 || all;
		m.cf.abort = i == 7 || all;
		roce(g, GEN_CDC, i == 9 ? 2 : 1, i % 2 == 0, &m, names[i]);
	}
}

int gen_write(const char *path, struct gen_frame *frames, size_t max)
{
	struct gen g = { .f = frames, .max = max };
	if (pcapw_open(&g.w, path)) {
		perror(path);
		return -1;
	}
	clc_flows(&g);
	llc_msgs(&g);
	cdc_msgs(&g);
	if (pcapw_close(&g.w))
		g.failed = 1;
	return g.failed ? -1 : (int)g.n;
}
