/* test_tshark.c: tshark conformance test (docs/protocol/wireshark.md 4-6). Every SMC-R v1 message
 * type -- the TCP option in SYN and SYN-ACK, Proposal (v1 N=40 IPv4, v1 with IPv6 prefixes, the
 * version-2 form of modern Linux, the classic N=0 form), Accept, Confirm, Decline v1 and v2,
 * the 8 LLC messages as requests and responses, CDC with each flag -- is encoded by OUR
 * encoders with distinct non-zero values (gen.c), written into a pcap (CLC in TCP/IPv4
 * exchanges, LLC/CDC in RoCE v1 and v2 frames, tests/lib/pcapw.h) and decoded by tshark,
 * Wireshark's independent dissector, as docs/protocol/wireshark.md 6.4 says: `tshark -r f.pcap -T
 * fields`. Every field tshark shows must equal what was encoded; where tshark 4.0.17 is known to be
 * wrong (docs/protocol/wireshark.md 5) the test asserts the wrong value it shows, citing the quirk,
 * so a fixed dissector shows up as a failure to look at. The same pcap is also decoded by
 * smcr-decode, which must find every message in the right frame.
 *
 * Exits 77 (CTest skip) when tshark is not installed. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "gen.h"
#include "lib/jsonmatch.h"
#include "lib/runcmd.h"
#include "wire/codes.h"

#define SKIP 77

/* The columns asked of tshark, in order. */
static const char *const fields[] = {
	"frame.number", "_ws.malformed", "ip.checksum.status", "tcp.checksum.status",
	"tcp.flags.syn", "tcp.flags.ack", "tcp.options.experimental.exid",
	"tcp.options.experimental.data", "udp.dstport",
	"infiniband.grh.nxthdr", "infiniband.grh.hoplmt", "infiniband.grh.sgid",
	"infiniband.grh.dgid", "infiniband.bth.opcode", "infiniband.bth.se",
	"infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.invariant.crc",
	"smc.clc_msg", "smc.llc_msg", "smc.length", "smc.reserved",
	/* Proposal */
	"smc.proposal.flags", "smc.proposal.smc.version", "smc.proposal.smc.type",
	"smc.proposal.smcv2.type", "smc.proposal.sender.client.peer.id",
	"smc.proposal.client.preferred.gid", "smc.proposal.client.preferred.mac",
	"smc.proposal.smcv1_subnet_ext_offset", "smc.proposal.smcv2_ext_offset",
	"smc.proposal.ism.gid", "smc.proposal.smc.chid", "smc.outgoing.interface.subnet.mask",
	"smc.outgoing.interface.subnet.mask.number.of.significant.bits",
	"smc.proposal.ipv6.prefix.count", "smc.proposal.ipv6.prefix.value",
	"smc.proposal.ipv6.prefix.length",
	/* Accept */
	"smc.accept.flags", "smc.proposal.first.contact", "smc.accept.sender.server.peer.id",
	"smc.accept.server.preferred.gid", "smc.accept.server.preferred.mac",
	"smc.accept.server.qp.number", "smc.accept.server.rmb.rkey",
	"smc.accept.server.tcp.conn.index", "smc.accept.server.rmb.element.alert.token",
	"smc.accept.rmb.buffer.size", "smc.accept.qp.mtu.value",
	"smc.accept.server.rmb.virtual.address", "smc.accept.initial.psn",
	/* Confirm */
	"smc.confirm.flags", "smc.confirm.first.contact", "smc.confirm.sender.client.peer.id",
	"smc.client.gid", "smc.confirm.client.mac", "smc.confirm.client.qp.number",
	"smc.confirm.client.rmb.rkey", "smc.confirm.client.tcp.conn.index",
	"smc.client.rmb.element.alert.token", "smc.confirm.rmb.buffer.size",
	"smc.confirm.qp.mtu.value", "smc.client.rmb.virtual.address", "smc.initial.psn",
	/* Decline */
	"smc.decline.smc.version", "smc.decline.osync", "smc.sender.peer.id",
	"smc.peer.diag.info", "smc.decline.os.type",
	/* CONFIRM LINK */
	"smc.confirm.link.flags", "smc.confirm.link.response", "smc.confirm.link.sender.mac",
	"smc.sender.gid", "smc.confirm.link.sender.qp.number", "smc.confirm.link.number",
	"smc.confirm.link.sender.link.userid", "smc.confirm.link.max.links",
	/* ADD LINK */
	"smc.add.link.flags", "smc.add.link.response", "smc.add.link.response.rejected",
	"smc.add.link.response.reject_reason", "smc.add.link.sender.mac",
	"smc.add.link.sender.gid", "smc.add.link.sender.qp.number", "smc.add.link.link.number",
	"smc.add.link.qp.mtu.value", "smc.add.link.initial.psn",
	/* ADD LINK CONT */
	"smc.add.link.cont.response", "smc.add.link.cont.link.number",
	"smc.add.link.cont.rkey.number", "smc.add.link.cont.rmb.RTok1.Rkey1",
	"smc.add.link.cont.rmb.RTok1.Rkey2", "smc.add.link.cont.rmb.RTok1.virt",
	"smc.add.link.cont.rmb.RTok2.Rkey1", "smc.add.link.cont.rmb.RTok2.Rkey2",
	/* DELETE LINK */
	"smc.delete.link.response", "smc.delete.link.all", "smc.delete.link.orderly",
	"smc.delete.link.number", "smc.delete.link.reason.code",
	/* CONFIRM RKEY (+ CONT) */
	"smc.confirm.rkey.response", "smc.confirm.rkey.negative.response",
	"smc.confirm.rkey.retry.rkey.set", "smc.confirm.rkey.number.qp",
	"smc.confirm.rkey.new.rkey", "smc.confirm.rkey.new.virt", "smc.confirm.rkey.link.number",
	/* DELETE RKEY */
	"smc.delete.rkey.response", "smc.delete.rkey.negative.response", "smc.delete.rkey.count",
	"smc.delete.rkey.error.mask", "smc.delete.rkey.deleted",
	/* TEST LINK */
	"smc.test.link.flags", "smc.test.link.response",
	/* CDC */
	"smc.rmbe.ctrl.seqno", "smc.rmbe.ctrl.alert.token", "smc.rmbe.ctrl.prod.wrap.seq",
	"smc.rmbe.ctrl.peer.prod.curs", "smc.rmbe.ctrl.conn.rw.status.flags",
	"smc.rmbe.ctrl.write.blocked", "smc.rmbe.ctrl.urgent.pending",
	"smc.rmbe.ctrl.urgent.present", "smc.rmbe.ctrl.cons.update.requested",
	"smc.rmbe.ctrl.failover.validation", "smc.rmbe.ctrl.peer.conn.state.flags",
	"smc.rmbe.ctrl.peer.sending.done", "smc.rmbe.ctrl.peer.closed.conn",
	"smc.rmbe.ctrl.peer.abnormal.close",
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static struct gen_frame frames[GEN_MAX_FRAMES];
static int nframes;
static char pcap_path[256];
static char tmpdir[64];
/* rows[frame][column]: tshark's value text (heap), frame numbers 1..nframes */
static char *rows[GEN_MAX_FRAMES + 1][NFIELDS];
static unsigned checks;		/* field comparisons made */
static char failures[16384];	/* all mismatches, reported together */

static int col(const char *field)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (!strcmp(fields[i], field))
			return (int)i;
	return -1;
}

/* Records a mismatch of frame f's field if tshark's text is not exactly want. */
static void want(const struct gen_frame *f, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void want(const struct gen_frame *f, const char *field, const char *fmt, ...)
{
	char w[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w, sizeof(w), fmt, ap);
	va_end(ap);
	int c = col(field);
	size_t used = strlen(failures);
	if (c < 0) {
		snprintf(failures + used, sizeof(failures) - used, "test bug: field %s not asked\n",
			 field);
		return;
	}
	const char *got = rows[f->number][c] ? rows[f->number][c] : "";
	checks++;
	if (strcmp(got, w))
		snprintf(failures + used, sizeof(failures) - used,
			 "frame %u (%s): %s = '%s', want '%s'\n", f->number, f->what, field, got,
			 w);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void note(const char *fmt, ...)
{
	size_t used = strlen(failures);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(failures + used, sizeof(failures) - used, fmt, ap);
	va_end(ap);
	used = strlen(failures);
	snprintf(failures + used, sizeof(failures) - used, "\n");
}

static const char *gid_text(const uint8_t g[16])
{
	static char slots[4][INET6_ADDRSTRLEN];
	static unsigned n;
	char *s = slots[n++ % 4];
	inet_ntop(AF_INET6, g, s, INET6_ADDRSTRLEN);
	return s;
}

static const char *mac_text(const uint8_t m[6])
{
	static char slots[4][18];
	static unsigned n;
	char *s = slots[n++ % 4];
	snprintf(s, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
	return s;
}

static unsigned long long peer_u64(const struct wire_peer_id *p)
{
	return (unsigned long long)wire_peer_id_u64(p);
}

/* ---- expectations per message ---------------------------------------------------------- */

static void check_syn(const struct gen_frame *f)
{
	want(f, "tcp.flags.syn", "1");
	want(f, "tcp.flags.ack", "%d", f->synack ? 1 : 0);
	/* docs/protocol/wire-formats.md 1 / docs/protocol/wireshark.md quirk 12: the 32-bit ExID
	 * 0xE2D4C3D9 shows as a 16-bit "Experiment Identifier" 0xe2d4 followed by data c3d9. */
	want(f, "tcp.options.experimental.exid", "0xe2d4");
	want(f, "tcp.options.experimental.data", "c3d9");
	want(f, "tcp.checksum.status", "1");	/* Good: our builder's checksums */
	want(f, "ip.checksum.status", "1");
}

static void check_proposal(const struct gen_frame *f, const struct clc_proposal *p)
{
	want(f, "smc.clc_msg", "1");
	want(f, "smc.length", "%zu", f->len);
	want(f, "smc.proposal.smc.version", "%u", p->f.version);
	want(f, "smc.proposal.smc.type", "%u", p->typev1);
	want(f, "smc.proposal.flags", "0x%02x", f->bytes[7]);
	want(f, "smc.proposal.sender.client.peer.id", "0x%016llx", peer_u64(&p->peer_id));
	want(f, "smc.proposal.client.preferred.gid", "%s", gid_text(p->gid.b));
	want(f, "smc.proposal.client.preferred.mac", "%s", mac_text(p->mac.b));
	want(f, "smc.proposal.smcv1_subnet_ext_offset", "0x%04x", p->iparea_offset);
	if (p->iparea_offset == 0) {
		/* docs/protocol/wireshark.md quirk 1: 4.0.17 assumes N = 40 and reads the trailer
		 * as two reserved fields, then runs out of bytes: [Malformed Packet]. */
		want(f, "_ws.malformed", "[Malformed Packet: SMC],_ws.malformed");
		want(f, "smc.reserved", "e2d4,c3d9");
		want(f, "smc.outgoing.interface.subnet.mask", "%s", "");
		return;
	}
	want(f, "_ws.malformed", "%s", "");
	if (p->f.version >= CLC_VERSION_2) {
		want(f, "smc.proposal.smcv2.type", "%u", p->typev2);
		want(f, "smc.proposal.smcv2_ext_offset", "0x%04x", p->v2ext_offset);
		/* CHID (as "Reserved"), then the 28 reserved bytes, then the IP area's. */
		want(f, "smc.reserved", "%04x,%056x,0000", p->ism_chid, 0);
	} else {
		/* Quirk seen here (docs/protocol/wireshark.md 5, quirk 1 family): for a version-1
		 * SMC-R Proposal 4.0.17 skips the 8-byte ISM GID without showing it and shows the
		 * CHID and the v2 extension offset as "Reserved". */
		want(f, "smc.proposal.ism.gid", "%s", "");
		want(f, "smc.proposal.smc.chid", "%s", "");
		want(f, "smc.reserved", "%04x,%04x,%056x,0000", p->ism_chid, p->v2ext_offset, 0);
	}
	char ip[INET_ADDRSTRLEN];
	uint32_t s = htonl(p->ipv4_subnet);
	inet_ntop(AF_INET, &s, ip, sizeof(ip));
	want(f, "smc.outgoing.interface.subnet.mask", "%s", ip);
	want(f, "smc.outgoing.interface.subnet.mask.number.of.significant.bits", "%u",
	     p->ipv4_prefix_len);
	want(f, "smc.proposal.ipv6.prefix.count", "%u", p->ipv6_count);
	char vals[512] = "", lens[128] = "";
	for (unsigned i = 0; i < p->ipv6_count; i++) {
		size_t vl = strlen(vals), ll = strlen(lens);
		snprintf(vals + vl, sizeof(vals) - vl, "%s%s", i ? "," : "",
			 gid_text(p->ipv6[i].addr));
		snprintf(lens + ll, sizeof(lens) - ll, "%s%u", i ? "," : "", p->ipv6[i].len);
	}
	want(f, "smc.proposal.ipv6.prefix.value", "%s", vals);
	want(f, "smc.proposal.ipv6.prefix.length", "%s", lens);
}

static void check_accept(const struct gen_frame *f, const struct clc_accept *a, bool confirm)
{
	want(f, "_ws.malformed", "%s", "");
	want(f, "smc.clc_msg", "%d", confirm ? 3 : 2);
	want(f, "smc.length", "68");
	if (!confirm) {
		want(f, "smc.accept.flags", "0x%02x", f->bytes[7]);
		/* docs/protocol/wireshark.md 4: the Accept's first-contact bit is
		 * smc.proposal.first.contact */
		want(f, "smc.proposal.first.contact", "%d", a->first_contact);
		want(f, "smc.accept.sender.server.peer.id", "0x%016llx", peer_u64(&a->peer_id));
		want(f, "smc.accept.server.preferred.gid", "%s", gid_text(a->gid.b));
		want(f, "smc.accept.server.preferred.mac", "%s", mac_text(a->mac.b));
		want(f, "smc.accept.server.qp.number", "0x%06x", a->qpn);
		want(f, "smc.accept.server.rmb.rkey", "0x%08x", a->rkey);
		want(f, "smc.accept.server.tcp.conn.index", "%u", a->rmbe_idx);
		want(f, "smc.accept.server.rmb.element.alert.token", "0x%08x", a->token);
		want(f, "smc.accept.rmb.buffer.size", "%u", a->rmbe_size_code);
		want(f, "smc.accept.qp.mtu.value", "%u", a->mtu_code);
		want(f, "smc.accept.server.rmb.virtual.address", "0x%016llx",
		     (unsigned long long)a->rmb_vaddr);
		want(f, "smc.accept.initial.psn", "0x%06x", a->psn);
		return;
	}
	want(f, "smc.confirm.flags", "0x%02x", f->bytes[7]);
	want(f, "smc.confirm.first.contact", "%d", a->first_contact);
	want(f, "smc.confirm.sender.client.peer.id", "0x%016llx", peer_u64(&a->peer_id));
	want(f, "smc.client.gid", "%s", gid_text(a->gid.b));
	want(f, "smc.confirm.client.mac", "%s", mac_text(a->mac.b));
	want(f, "smc.confirm.client.qp.number", "0x%06x", a->qpn);
	want(f, "smc.confirm.client.rmb.rkey", "0x%08x", a->rkey);
	want(f, "smc.confirm.client.tcp.conn.index", "%u", a->rmbe_idx);
	want(f, "smc.client.rmb.element.alert.token", "0x%08x", a->token);
	want(f, "smc.confirm.rmb.buffer.size", "%u", a->rmbe_size_code);
	want(f, "smc.confirm.qp.mtu.value", "%u", a->mtu_code);
	want(f, "smc.client.rmb.virtual.address", "0x%016llx", (unsigned long long)a->rmb_vaddr);
	want(f, "smc.initial.psn", "0x%06x", a->psn);
}

static void check_decline(const struct gen_frame *f, const struct clc_decline *d)
{
	want(f, "_ws.malformed", "%s", "");
	want(f, "smc.clc_msg", "4");
	want(f, "smc.length", "%zu", f->len);
	want(f, "smc.decline.smc.version", "%u", d->f.version);
	want(f, "smc.decline.osync", "%d", d->out_of_sync);
	want(f, "smc.sender.peer.id", "0x%016llx", peer_u64(&d->peer_id));
	if (d->f.version >= CLC_VERSION_2) {
		want(f, "smc.peer.diag.info", "0x%08x,0x%08x,0x%08x,0x%08x,0x%08x", d->diag,
		     d->diag_v2[0], d->diag_v2[1], d->diag_v2[2], d->diag_v2[3]);
		want(f, "smc.decline.os.type", "%u", d->os_type);
	} else {
		/* docs/protocol/wireshark.md quirk 9: the diagnosis is a raw number. */
		want(f, "smc.peer.diag.info", "0x%08x", d->diag);
		want(f, "smc.decline.os.type", "%s", "");
	}
}

static void check_roce(const struct gen_frame *f, bool from_server)
{
	want(f, "infiniband.bth.opcode", "4");	/* RC SEND Only (docs/protocol/wire-formats.md 10) */
	want(f, "infiniband.bth.se", "1");
	want(f, "infiniband.bth.destqp", "0x%06x", f->dest_qp);
	want(f, "infiniband.bth.psn", "%u", f->bth_psn);
	/* tshark shows the ICRC we computed (it does not check it: docs/protocol/wireshark.md
	 * 6.2). */
	want(f, "infiniband.invariant.crc", "0x%08x", f->icrc_wire);
	want(f, "_ws.malformed", "%s", "");
	want(f, "smc.length", "44");
	if (f->roce == 1) {
		want(f, "infiniband.grh.nxthdr", "27");
		want(f, "infiniband.grh.hoplmt", "1");
		want(f, "infiniband.grh.sgid", "%s",
		     gid_text(from_server ? gen_server_gid : gen_client_gid));
		want(f, "infiniband.grh.dgid", "%s",
		     gid_text(from_server ? gen_client_gid : gen_server_gid));
	} else {
		want(f, "udp.dstport", "4791");
		want(f, "infiniband.grh.sgid", "%s", "");
	}
}

static const char *b01(bool b) { return b ? "1" : "0"; }

static void check_llc(const struct gen_frame *f, const struct llc_msg *m)
{
	want(f, "smc.llc_msg", "0x%02x", (unsigned)m->type);
	switch (m->type) {
	case LLC_CONFIRM_LINK: {
		const struct llc_confirm_link *c = &m->confirm_link;
		want(f, "smc.confirm.link.response", "%s", b01(m->resp));
		/* docs/protocol/wireshark.md quirk 4: only 0x80 is decoded; the 0x03 bits are in
		 * the byte. */
		want(f, "smc.confirm.link.flags", "0x%02x", (m->resp ? 0x80 : 0) | c->no_eyec);
		want(f, "smc.confirm.link.sender.mac", "%s", mac_text(c->mac.b));
		want(f, "smc.sender.gid", "%s", gid_text(c->gid.b));
		want(f, "smc.confirm.link.sender.qp.number", "0x%06x", c->qpn);
		want(f, "smc.confirm.link.number", "0x%02x", c->link_num);
		want(f, "smc.confirm.link.sender.link.userid", "0x%08x", c->link_uid);
		want(f, "smc.confirm.link.max.links", "0x%02x", c->max_links);
		break;
	}
	case LLC_ADD_LINK: {
		const struct llc_add_link *a = &m->add_link;
		want(f, "smc.add.link.response", "%s", b01(m->resp));
		want(f, "smc.add.link.response.rejected", "%s", b01(a->rejected));
		want(f, "smc.add.link.flags", "0x%02x",
		     (m->resp ? 0x80 : 0) | (a->rejected ? 0x40 : 0));
		/* docs/protocol/wireshark.md quirk 3: the v1 reject reason (byte 2) is not
		 * shown. */
		want(f, "smc.add.link.response.reject_reason", "%s", "");
		want(f, "smc.add.link.sender.mac", "%s", mac_text(a->mac.b));
		want(f, "smc.add.link.sender.gid", "%s", gid_text(a->gid.b));
		want(f, "smc.add.link.sender.qp.number", "0x%06x", a->qpn);
		want(f, "smc.add.link.link.number", "0x%02x", a->link_num);
		want(f, "smc.add.link.qp.mtu.value", "%u", a->mtu);
		want(f, "smc.add.link.initial.psn", "0x%06x", a->psn);
		want(f, "smc.reserved", "0000");	/* bytes 10-11 (docs/protocol/wire-formats.md 6.3) */
		break;
	}
	case LLC_ADD_LINK_CONT: {
		const struct llc_add_link_cont *c = &m->add_link_cont;
		want(f, "smc.add.link.cont.response", "%s", b01(m->resp));
		want(f, "smc.add.link.cont.link.number", "0x%02x", c->link_num);
		want(f, "smc.add.link.cont.rkey.number", "%u", c->num_rkeys);
		/* docs/protocol/wireshark.md quirk 2: tshark reads the pairs from offset 6 instead
		 * of 8, so each value it shows is the 2 bytes before ours plus ours cut by 2 bytes.
		 * Our pairs are at 8 and 24 (Linux); bytes 6-7 are reserved zero. */
		const struct llc_alc_pair *p = c->rt;
		uint32_t r1 = p[0].rkey >> 16;
		uint32_t r2 = (p[0].rkey & 0xffff) << 16 | p[0].rkey_new >> 16;
		uint64_t v = (uint64_t)(p[0].rkey_new & 0xffff) << 48 | p[0].vaddr_new >> 16;
		uint32_t r1b = (uint32_t)(p[0].vaddr_new & 0xffff) << 16 | p[1].rkey >> 16;
		uint32_t r2b = (p[1].rkey & 0xffff) << 16 | p[1].rkey_new >> 16;
		uint64_t vb = (uint64_t)(p[1].rkey_new & 0xffff) << 48 | p[1].vaddr_new >> 16;
		want(f, "smc.add.link.cont.rmb.RTok1.Rkey1", "0x%08x", r1);
		want(f, "smc.add.link.cont.rmb.RTok1.Rkey2", "0x%08x", r2);
		if (c->num_rkeys >= 2) {
			/* Pair 2's address is shown under the pair-1 field name (a second
			 * occurrence of RTok1.virt). */
			want(f, "smc.add.link.cont.rmb.RTok1.virt", "0x%016llx,0x%016llx",
			     (unsigned long long)v, (unsigned long long)vb);
			want(f, "smc.add.link.cont.rmb.RTok2.Rkey1", "0x%08x", r1b);
			want(f, "smc.add.link.cont.rmb.RTok2.Rkey2", "0x%08x", r2b);
		} else {
			want(f, "smc.add.link.cont.rmb.RTok1.virt", "0x%016llx",
			     (unsigned long long)v);
			want(f, "smc.add.link.cont.rmb.RTok2.Rkey1", "%s", "");
		}
		/* And our bytes are at Linux's offsets (docs/protocol/wire-formats.md 6.4): pair 1
		 * at 8. */
		uint32_t at8 = (uint32_t)f->bytes[8] << 24 | (uint32_t)f->bytes[9] << 16 |
			       (uint32_t)f->bytes[10] << 8 | f->bytes[11];
		if (at8 != p[0].rkey || f->bytes[6] || f->bytes[7])
			note("frame %u: ADD LINK CONT pair 1 is not at offset 8", f->number);
		break;
	}
	case LLC_DELETE_LINK: {
		const struct llc_delete_link *d = &m->delete_link;
		want(f, "smc.delete.link.response", "%s", b01(m->resp));
		want(f, "smc.delete.link.all", "%s", b01(d->all));
		want(f, "smc.delete.link.orderly", "%s", b01(d->orderly));
		want(f, "smc.delete.link.number", "0x%02x", d->link_num);
		want(f, "smc.delete.link.reason.code", "0x%08x", d->reason);
		break;
	}
	case LLC_CONFIRM_RKEY: {
		const struct llc_confirm_rkey *c = &m->confirm_rkey;
		want(f, "smc.confirm.rkey.response", "%s", b01(m->resp));
		want(f, "smc.confirm.rkey.negative.response", "%s", b01(c->negative));
		want(f, "smc.confirm.rkey.retry.rkey.set", "%s", b01(c->retry));
		want(f, "smc.confirm.rkey.number.qp", "%u", c->num_other);
		char rk[256], va[256], ln[64];
		int a = snprintf(rk, sizeof(rk), "0x%08x", c->rkey);
		int b = snprintf(va, sizeof(va), "0x%016llx", (unsigned long long)c->vaddr);
		int l = 0;
		ln[0] = 0;
		for (unsigned i = 0; i < c->num_other; i++) {
			a += snprintf(rk + a, sizeof(rk) - (size_t)a, ",0x%08x", c->other[i].rkey);
			b += snprintf(va + b, sizeof(va) - (size_t)b, ",0x%016llx",
				      (unsigned long long)c->other[i].vaddr);
			l += snprintf(ln + l, sizeof(ln) - (size_t)l, "%s0x%02x", i ? "," : "",
				      c->other[i].link_num);
		}
		want(f, "smc.confirm.rkey.new.rkey", "%s", rk);
		want(f, "smc.confirm.rkey.new.virt", "%s", va);
		want(f, "smc.confirm.rkey.link.number", "%s", ln);
		break;
	}
	case LLC_CONFIRM_RKEY_CONT: {
		const struct llc_confirm_rkey_cont *c = &m->confirm_rkey_cont;
		/* Same field names as CONFIRM RKEY; the count shows as "number of other QP". */
		want(f, "smc.confirm.rkey.response", "%s", b01(m->resp));
		want(f, "smc.confirm.rkey.negative.response", "%s", b01(c->negative));
		want(f, "smc.confirm.rkey.number.qp", "%u", c->num_remaining);
		char rk[256] = "", va[256] = "", ln[64] = "";
		int a = 0, b = 0, l = 0;
		unsigned n = c->num_remaining < 3 ? c->num_remaining : 3;
		for (unsigned i = 0; i < n; i++) {
			const char *sep = i ? "," : "";
			a += snprintf(rk + a, sizeof(rk) - (size_t)a, "%s0x%08x", sep,
				      c->entry[i].rkey);
			b += snprintf(va + b, sizeof(va) - (size_t)b, "%s0x%016llx", sep,
				      (unsigned long long)c->entry[i].vaddr);
			l += snprintf(ln + l, sizeof(ln) - (size_t)l, "%s0x%02x", sep,
				      c->entry[i].link_num);
		}
		want(f, "smc.confirm.rkey.new.rkey", "%s", rk);
		want(f, "smc.confirm.rkey.new.virt", "%s", va);
		want(f, "smc.confirm.rkey.link.number", "%s", ln);
		break;
	}
	case LLC_DELETE_RKEY: {
		const struct llc_delete_rkey *d = &m->delete_rkey;
		want(f, "smc.delete.rkey.response", "%s", b01(m->resp));
		want(f, "smc.delete.rkey.negative.response", "%s", b01(d->negative));
		want(f, "smc.delete.rkey.count", "%u", d->count);
		want(f, "smc.delete.rkey.error.mask", "0x%02x", d->err_mask);
		char rk[128] = "";
		int a = 0;
		for (unsigned i = 0; i < d->count; i++)
			a += snprintf(rk + a, sizeof(rk) - (size_t)a, "%s0x%08x", i ? "," : "",
				      d->rkey[i]);
		want(f, "smc.delete.rkey.deleted", "%s", rk);
		break;
	}
	case LLC_TEST_LINK:
		/* docs/protocol/wireshark.md 4: only the flags; the 16 bytes of user data are not
		 * shown. */
		want(f, "smc.test.link.response", "%s", b01(m->resp));
		want(f, "smc.test.link.flags", "0x%02x", m->resp ? 0x80 : 0);
		break;
	}
}

static void check_cdc(const struct gen_frame *f, const struct cdc_msg *m)
{
	want(f, "smc.llc_msg", "0xfe");
	want(f, "smc.rmbe.ctrl.seqno", "0x%04x", m->seqno);
	want(f, "smc.rmbe.ctrl.alert.token", "0x%08x", m->token);
	/* docs/protocol/wireshark.md quirk 5: the consumer fields share the producer fields' names
	 * in 4.0.x, so each of these holds "producer,consumer". */
	want(f, "smc.rmbe.ctrl.prod.wrap.seq", "0x%04x,0x%04x", m->prod.wrap, m->cons.wrap);
	want(f, "smc.rmbe.ctrl.peer.prod.curs", "0x%08x,0x%08x", m->prod.count, m->cons.count);
	want(f, "smc.rmbe.ctrl.conn.rw.status.flags", "0x%02x", cdc_prod_flags_byte(&m->pf));
	want(f, "smc.rmbe.ctrl.write.blocked", "%s", b01(m->pf.write_blocked));
	want(f, "smc.rmbe.ctrl.urgent.pending", "%s", b01(m->pf.urg_pending));
	want(f, "smc.rmbe.ctrl.urgent.present", "%s", b01(m->pf.urg_present));
	want(f, "smc.rmbe.ctrl.cons.update.requested", "%s", b01(m->pf.cons_upd_req));
	want(f, "smc.rmbe.ctrl.failover.validation", "%s", b01(m->pf.failover));
	want(f, "smc.rmbe.ctrl.peer.conn.state.flags", "0x%02x", cdc_conn_flags_byte(&m->cf));
	want(f, "smc.rmbe.ctrl.peer.sending.done", "%s", b01(m->cf.done_writing));
	want(f, "smc.rmbe.ctrl.peer.closed.conn", "%s", b01(m->cf.closed));
	want(f, "smc.rmbe.ctrl.peer.abnormal.close", "%s", b01(m->cf.abort));
}

/* ---- running tshark -------------------------------------------------------------------- */

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/smcr-tshark-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(pcap_path, sizeof(pcap_path), "%s/smc.pcap", tmpdir);
	nframes = gen_write(pcap_path, frames, GEN_MAX_FRAMES);
	if (nframes <= 0)
		return -1;

	/* One run, one line per frame, one column per field; repeated fields joined by ','.
	 * -n: no name resolution (MACs and addresses as numbers); checksum validation on, so
	 * tshark vouches for our IPv4/TCP checksums too. */
	char cmd[8192];
	int n = snprintf(cmd, sizeof(cmd),
			 "tshark -n -r %s -o ip.check_checksum:TRUE -o tcp.check_checksum:TRUE "
			 "-T fields -E separator=/t -E occurrence=a -E aggregator=, -E header=n",
			 shq(pcap_path));
	for (size_t i = 0; i < NFIELDS; i++)
		n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " -e %s", fields[i]);
	struct runcmd r;
	if (runcmd(&r, "%s", cmd) || r.status != 0) {
		fprintf(stderr, "tshark failed (%d): %s\n", r.status, r.err);
		runcmd_free(&r);
		return -1;
	}
	unsigned lines = line_count(r.out);
	for (unsigned li = 0; li < lines; li++) {
		char line[16384];
		if (!line_at(r.out, li, line, sizeof(line)))
			break;
		char *p = line;
		size_t c = 0;
		char *vals[NFIELDS] = { 0 };
		/* strtok would merge empty columns: split by hand. */
		for (c = 0; c < NFIELDS && p; c++) {
			char *tab = strchr(p, '\t');
			if (tab)
				*tab = 0;
			vals[c] = p;
			p = tab ? tab + 1 : NULL;
		}
		int fn = atoi(vals[0] ? vals[0] : "0");
		if (fn < 1 || fn > nframes)
			continue;
		for (size_t k = 0; k < NFIELDS; k++)
			rows[fn][k] = strdup(vals[k] ? vals[k] : "");
	}
	runcmd_free(&r);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i <= GEN_MAX_FRAMES; i++)
		for (size_t k = 0; k < NFIELDS; k++)
			free(rows[i][k]);
	if (!getenv("SMCR_TSHARK_KEEP")) {
		struct runcmd r;
		if (runcmd(&r, "rm -rf %s", shq(tmpdir)) == 0)
			runcmd_free(&r);
	} else {
		fprintf(stderr, "capture kept: %s\n", pcap_path);
	}
	return 0;
}

/* Fails the current test with every mismatch recorded since the last report. */
static void report(void)
{
	static char msg[sizeof(failures)];
	if (!failures[0])
		return;
	memcpy(msg, failures, sizeof(msg));
	failures[0] = 0;
	fail_msg("tshark disagrees with our encoders:\n%s", msg);
}

static void test_every_frame_decoded(void **state)
{
	(void)state;
	for (int i = 0; i < nframes; i++)
		if (!rows[frames[i].number][0])
			fail_msg("tshark printed no line for frame %u (%s)", frames[i].number,
				 frames[i].what);
}

static void test_tcp_option(void **state)
{
	(void)state;
	unsigned n = 0;
	for (int i = 0; i < nframes; i++)
		if (frames[i].kind == GEN_TCP_SYN) {
			check_syn(&frames[i]);
			n++;
		}
	assert_int_equal(n, 8);	/* 4 handshakes, SYN and SYN-ACK */
	report();
}

static void test_clc(void **state)
{
	(void)state;
	unsigned seen[5] = { 0 }, v2decl = 0, n0 = 0;
	for (int i = 0; i < nframes; i++) {
		const struct gen_frame *f = &frames[i];
		if (f->kind != GEN_CLC)
			continue;
		seen[f->clc.type]++;
		switch (f->clc.type) {
		case CLC_PROPOSAL:
			check_proposal(f, &f->clc.proposal);
			n0 += f->clc.proposal.iparea_offset == 0;
			break;
		case CLC_ACCEPT:
			check_accept(f, &f->clc.accept, false);
			break;
		case CLC_CONFIRM:
			check_accept(f, &f->clc.accept, true);
			break;
		case CLC_DECLINE:
			check_decline(f, &f->clc.decline);
			v2decl += f->clc.decline.f.version >= 2;
			break;
		}
	}
	assert_int_equal(seen[CLC_PROPOSAL], 4);
	assert_int_equal(seen[CLC_ACCEPT], 1);
	assert_int_equal(seen[CLC_CONFIRM], 1);
	assert_int_equal(seen[CLC_DECLINE], 2);
	assert_int_equal(v2decl, 1);
	assert_int_equal(n0, 1);
	report();
}

static void test_llc(void **state)
{
	(void)state;
	unsigned req[10] = { 0 }, resp[10] = { 0 };
	for (int i = 0; i < nframes; i++) {
		const struct gen_frame *f = &frames[i];
		if (f->kind != GEN_LLC)
			continue;
		/* Requests go server -> client in gen.c, responses client -> server, except
		 * the RoCE v2 TEST LINK request. */
		check_roce(f, f->roce == 1 && !f->llc.resp);
		check_llc(f, &f->llc);
		(f->llc.resp ? resp : req)[f->llc.type]++;
	}
	static const enum llc_type all[] = { LLC_CONFIRM_LINK, LLC_ADD_LINK, LLC_ADD_LINK_CONT,
					     LLC_DELETE_LINK, LLC_CONFIRM_RKEY, LLC_TEST_LINK,
					     LLC_CONFIRM_RKEY_CONT, LLC_DELETE_RKEY };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (!req[all[i]] || !resp[all[i]])
			fail_msg("LLC type 0x%02x: %u requests, %u responses", all[i], req[all[i]],
				 resp[all[i]]);
	}
	report();
}

static void test_cdc(void **state)
{
	(void)state;
	unsigned flags = 0, cflags = 0, n = 0;
	for (int i = 0; i < nframes; i++) {
		const struct gen_frame *f = &frames[i];
		if (f->kind != GEN_CDC)
			continue;
		check_roce(f, f->roce == 1 && (n % 2 == 0));
		check_cdc(f, &f->cdc);
		flags |= cdc_prod_flags_byte(&f->cdc.pf);
		cflags |= cdc_conn_flags_byte(&f->cdc.cf);
		n++;
	}
	assert_int_equal(flags, 0xf8);	/* B P U R F each seen */
	assert_int_equal(cflags, 0xe0);	/* D C A each seen */
	report();
}

/* The same capture through smcr-decode: every message found in its frame. */
static void test_smcr_decode_same_capture(void **state)
{
	(void)state;
	const char *b = getenv("SMCR_BINARY_DIR");
	if (!b)
		skip();
	char dec[1024];
	snprintf(dec, sizeof(dec), "%s/tools/smcr-decode/smcr-decode", b);
	struct runcmd r;
	assert_int_equal(runcmd(&r, "%s --json -r %s", shq(dec), shq(pcap_path)), 0);
	if (r.status != 0)
		fail_msg("smcr-decode exit %d: %s", r.status, r.err);
	unsigned line = 0;
	for (int i = 0; i < nframes; i++) {
		const struct gen_frame *f = &frames[i];
		const char *kind;
		switch (f->kind) {
		case GEN_TCP_SYN: kind = "tcp.option"; break;
		case GEN_CLC:
			kind = f->clc.type == CLC_PROPOSAL ? "clc.proposal"
			       : f->clc.type == CLC_ACCEPT ? "clc.accept"
			       : f->clc.type == CLC_CONFIRM ? "clc.confirm" : "clc.decline";
			break;
		case GEN_LLC: {
			static const char *k[] = {
				[LLC_CONFIRM_LINK] = "llc.confirm_link",
				[LLC_ADD_LINK] = "llc.add_link",
				[LLC_ADD_LINK_CONT] = "llc.add_link_cont",
				[LLC_DELETE_LINK] = "llc.delete_link",
				[LLC_CONFIRM_RKEY] = "llc.confirm_rkey",
				[LLC_TEST_LINK] = "llc.test_link",
				[LLC_CONFIRM_RKEY_CONT] = "llc.confirm_rkey_cont",
				[LLC_DELETE_RKEY] = "llc.delete_rkey",
			};
			kind = k[f->llc.type];
			break;
		}
		case GEN_CDC: kind = "cdc"; break;
		case GEN_TCP_OTHER:
		default: continue;
		}
		char l[4096], exp[256];
		if (!line_at(r.out, line++, l, sizeof(l)))
			fail_msg("smcr-decode: no record for frame %u (%s)", f->number, f->what);
		snprintf(exp, sizeof(exp), "{\"kind\":\"%s\",\"frame\":%u}", kind, f->number);
		char why[256];
		if (!jsonmatch_subset(l, exp, why, sizeof(why)))
			fail_msg("smcr-decode frame %u (%s): %s\n%s", f->number, f->what, why, l);
		if (f->kind == GEN_CDC) {
			snprintf(exp, sizeof(exp), "{\"seqno\":%u,\"token\":%u,\"cons_count\":%u}",
				 f->cdc.seqno, f->cdc.token, f->cdc.cons.count);
			if (!jsonmatch_subset(l, exp, why, sizeof(why)))
				fail_msg("smcr-decode frame %u: %s", f->number, why);
		}
	}
	assert_int_equal(line_count(r.out), line);
	runcmd_free(&r);
}

/* ---- a real TCP exchange on loopback, captured by dumpcap (optional in the brief) ------ */

extern char **environ;

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Starts dumpcap on lo for tcp port `port`, writing path; returns its pid once it says
 * "Capturing on" (its stderr goes to a file: a pipe we stop reading would kill it with
 * SIGPIPE when it prints its statistics on exit), or -1 when it cannot capture here (not
 * root, no lo, ...) with the reason in why. */
static pid_t dumpcap_start(const char *path, const char *log, unsigned port, char *why,
			   size_t whylen)
{
	char filter[64];
	snprintf(filter, sizeof(filter), "tcp port %u", port);
	char *argv[] = { "dumpcap", "-i", "lo", "-f", filter, "-w", (char *)path, "-q", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	pid_t pid;
	int rc = posix_spawnp(&pid, "dumpcap", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		snprintf(why, whylen, "cannot run dumpcap: %s", strerror(rc));
		return -1;
	}
	/* Up to 10 s for the line it prints once the capture is active. */
	char buf[1024] = "";
	for (int waited = 0; waited < 10000; waited += 50) {
		FILE *f = fopen(log, "r");
		if (f) {
			size_t n = fread(buf, 1, sizeof(buf) - 1, f);
			buf[n] = 0;
			fclose(f);
		}
		if (strstr(buf, "Capturing on")) {
			msleep(200);
			return pid;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			snprintf(why, whylen, "dumpcap exited: %.200s", buf);
			return -1;
		}
		msleep(50);
	}
	snprintf(why, whylen, "dumpcap did not start capturing: %.200s", buf);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return -1;
}

static void send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = send(fd, b, n, 0);
		assert_true(w > 0);
		b += w;
		n -= (size_t)w;
	}
}

static void recv_all(int fd, void *p, size_t n)
{
	uint8_t *b = p;
	while (n) {
		ssize_t r = recv(fd, b, n, 0);
		assert_true(r > 0);
		b += r;
		n -= (size_t)r;
	}
}

/* The CLC messages of gen.c's first flow sent through the kernel's TCP on 127.0.0.1 (no
 * SMC option: the kernel writes the SYNs), captured live, decoded by tshark and smcr-decode. */
static void test_loopback_capture(void **state)
{
	(void)state;
	const struct gen_frame *prop = NULL, *acc = NULL, *conf = NULL;
	for (int i = 0; i < nframes; i++) {
		const struct gen_frame *f = &frames[i];
		if (f->kind != GEN_CLC)
			continue;
		if (f->clc.type == CLC_PROPOSAL && !prop)
			prop = f;
		else if (f->clc.type == CLC_ACCEPT)
			acc = f;
		else if (f->clc.type == CLC_CONFIRM)
			conf = f;
	}
	assert_non_null(prop);
	assert_non_null(acc);
	assert_non_null(conf);

	int ls = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(ls >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	socklen_t sl = sizeof(sa);
	assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(ls, 1), 0);
	assert_int_equal(getsockname(ls, (struct sockaddr *)&sa, &sl), 0);
	unsigned port = ntohs(sa.sin_port);

	char path[320], log[320], why[256];
	snprintf(path, sizeof(path), "%s/lo.pcapng", tmpdir);
	snprintf(log, sizeof(log), "%s/dumpcap.log", tmpdir);
	pid_t dc = dumpcap_start(path, log, port, why, sizeof(why));
	if (dc < 0) {
		close(ls);
		printf("SKIP loopback capture: %s\n", why);
		skip();
	}
	int c = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(c >= 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	int s = accept(ls, NULL, NULL);
	assert_true(s >= 0);
	uint8_t buf[256];
	send_all(c, prop->bytes, prop->len);
	recv_all(s, buf, prop->len);
	assert_memory_equal(buf, prop->bytes, prop->len);
	send_all(s, acc->bytes, acc->len);
	recv_all(c, buf, acc->len);
	send_all(c, conf->bytes, conf->len);
	recv_all(s, buf, conf->len);
	send_all(c, "application data after CLC", 26);
	recv_all(s, buf, 26);
	close(c);
	close(s);
	close(ls);
	msleep(300);
	kill(dc, SIGINT);	/* dumpcap writes what it has and exits */
	int st;
	assert_int_equal(waitpid(dc, &st, 0), dc);

	struct runcmd r;
	assert_int_equal(runcmd(&r, "tshark -n -r %s -Y smc -T fields -E separator=/t "
				    "-e smc.clc_msg -e smc.length -e smc.accept.server.qp.number "
				    "-e smc.confirm.client.rmb.rkey -e _ws.malformed",
				shq(path)), 0);
	assert_int_equal(r.status, 0);
	char want[512];
	snprintf(want, sizeof(want), "1\t%zu\t\t\t\n2\t68\t0x%06x\t\t\n3\t68\t\t0x%08x\t\n",
		 prop->len, acc->clc.accept.qpn, conf->clc.accept.rkey);
	if (strcmp(r.out, want)) {
		struct runcmd all;
		if (runcmd(&all, "tshark -n -r %s", shq(path)))
			all.out = NULL;
		fail_msg("tshark on the live capture:\n%s\nwant:\n%s\nthe capture:\n%s", r.out,
			 want, all.out ? all.out : "?");
	}
	runcmd_free(&r);

	const char *b = getenv("SMCR_BINARY_DIR");
	if (b) {
		char dec[1024];
		snprintf(dec, sizeof(dec), "%s/tools/smcr-decode/smcr-decode", b);
		assert_int_equal(runcmd(&r, "%s --json -r %s", shq(dec), shq(path)), 0);
		assert_int_equal(r.status, 0);
		assert_int_equal(line_count(r.out), 3);
		char l[4096], exp[256];
		assert_true(line_at(r.out, 1, l, sizeof(l)));
		snprintf(exp, sizeof(exp),
			 "{\"kind\":\"clc.accept\",\"stream_offset\":0,\"qpn\":%u}",
			 acc->clc.accept.qpn);
		assert_true(jsonmatch_subset(l, exp, why, sizeof(why)));
		assert_true(line_at(r.out, 2, l, sizeof(l)));
		snprintf(exp, sizeof(exp), "{\"kind\":\"clc.confirm\",\"stream_offset\":%zu}",
			 prop->len);
		assert_true(jsonmatch_subset(l, exp, why, sizeof(why)));
		runcmd_free(&r);
	}
	unlink(path);
	unlink(log);
}

static void test_checks_made(void **state)
{
	(void)state;
	/* Guard against a test that silently compares nothing. */
	assert_true(checks > 400);
}

int main(void)
{
	struct runcmd r;
	if (runcmd(&r, "tshark --version") || r.status != 0) {
		printf("SKIP: tshark is not installed (scripts/deps.sh test installs it)\n");
		runcmd_free(&r);
		return SKIP;
	}
	runcmd_free(&r);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_frame_decoded),
		cmocka_unit_test(test_tcp_option),
		cmocka_unit_test(test_clc),
		cmocka_unit_test(test_llc),
		cmocka_unit_test(test_cdc),
		cmocka_unit_test(test_smcr_decode_same_capture),
		cmocka_unit_test(test_loopback_capture),
		cmocka_unit_test(test_checks_made),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
