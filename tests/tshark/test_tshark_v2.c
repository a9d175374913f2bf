/* test_tshark_v2.c: tshark conformance on the real Linux 6.12 SMC-R v2 capture
 * (docs/parts/wire-v2.md 8). Wireshark's SMC dissector (4.0 here) knows the v2 CLC messages:
 * every field it shows of the Proposal, Accept and Confirm must equal what smcr's v2 codecs
 * decode. Where 4.0 does not know v2, the test pins what it does, so a newer dissector that
 * changes its mind shows up: the v2.1 fields (max connections / links, feature mask) are
 * "reserved" to it; CONFIRM LINK v2 and ADD LINK v2 are "Malformed" (it reads the 16-bit
 * length, little-endian from Linux, in network order: 0x2c00 = 11264 bytes); DELETE RKEY v2
 * (0x29) is not recognised as SMC at all. Exits 77 (skipped) when tshark is not installed. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/runcmd.h"
#include "lib/v2cap.h"
#include "wire/clc.h"
#include "wire/clc_v2.h"
#include "wire/llc_v2.h"

static struct v2cap *cap;

/* Every field the tests ask for: tshark runs once over the whole capture. */
static const char *const names[] = {
	"frame.number", "_ws.malformed", "smc.clc_msg", "smc.llc_msg", "smc.length", "data.len",
	"smc.proposal.smc.version", "smc.proposal.smcv2.type", "smc.proposal.smc.type",
	"smc.proposal.smcv2_ext_offset", "smc.proposal.eid.count",
	"smc.proposal.smc.version.relnum", "smc.proposal.smc.seid",
	"smc.proposal.rocev2.gid.ipv4", "smc.proposal.eid", "smc.proposal.first.contact",
	"smc.confirm.first.contact", "smc.accept.sender.server.peer.id",
	"smc.confirm.sender.client.peer.id", "smc.accept.server.qp.number",
	"smc.confirm.client.qp.number", "smc.accept.server.rmb.rkey", "smc.confirm.client.rmb.rkey",
	"smc.accept.server.tcp.conn.index", "smc.confirm.client.tcp.conn.index",
	"smc.accept.rmb.buffer.size", "smc.confirm.rmb.buffer.size", "smc.accept.qp.mtu.value",
	"smc.confirm.qp.mtu.value", "smc.accept.initial.psn", "smc.initial.psn",
	"smc.accept.v2_lg.type", "smc.accept.eid", "smc.confirm.eid", "smc.accept.os.type",
	"smc.confirm.os.type", "smc.accept.smc.version.relnum", "smc.confirm.smc.version.relnum",
	"smc.accept.peer.host.name", "smc.confirm.peer.host.name",
	"smc.confirm.gid.list.entry_count", "smc.confirm.gid.list.entry",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))
static char *rows[V2CAP_MAX_FRAMES + 1][NNAMES];

static int run_tshark(void)
{
	char cmd[4096];
	size_t off = (size_t)snprintf(cmd, sizeof(cmd), "tshark -r %s -T fields -E occurrence=f "
				      "-E separator=/t", shq(v2cap_path()));
	for (size_t k = 0; k < NNAMES && off < sizeof(cmd); k++)
		off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, " -e %s", names[k]);
	struct runcmd r;
	if (runcmd(&r, "%s 2>/dev/null", cmd) != 0 || r.status != 0)
		return -1;
	for (char *line = r.out, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *col[NNAMES];
		size_t n = 0;
		for (char *q = line; n < NNAMES; n++) {
			col[n] = q;
			q = strchr(q, '\t');
			if (!q) {
				n++;
				break;
			}
			*q++ = 0;
		}
		unsigned fr = (unsigned)atoi(col[0]);
		if (fr == 0 || fr > V2CAP_MAX_FRAMES)
			continue;
		for (size_t k = 0; k < NNAMES; k++)
			rows[fr][k] = strdup(k < n ? col[k] : "");
	}
	runcmd_free(&r);
	return 0;
}

/* One tshark field of one frame ("" when absent), a copy the caller frees. */
static char *field(unsigned frame, const char *name)
{
	for (size_t k = 0; k < NNAMES; k++)
		if (!strcmp(names[k], name))
			return strdup(frame <= V2CAP_MAX_FRAMES && rows[frame][k] ? rows[frame][k] : "");
	fail_msg("field %s not in the list asked of tshark", name);
	return NULL;
}

static void want(unsigned frame, const char *name, const char *fmt, ...)
{
	char exp[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(exp, sizeof(exp), fmt, ap);
	va_end(ap);
	char *got = field(frame, name);
	if (strcmp(got, exp))
		fail_msg("frame %u %s: tshark says '%s', smcr '%s'", frame, name, got, exp);
	free(got);
}

static void eid_str(const struct clc_eid *e, char out[CLC_EID_LEN + 1])
{
	memcpy(out, e->b, CLC_EID_LEN);	/* tshark shows the padding too */
	out[CLC_EID_LEN] = 0;
}

static int setup(void **state)
{
	(void)state;
	cap = malloc(sizeof(*cap));
	return cap && v2cap_load(cap) == 0 && run_tshark() == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	free(cap);
	for (size_t i = 0; i <= V2CAP_MAX_FRAMES; i++)
		for (size_t k = 0; k < NNAMES; k++)
			free(rows[i][k]);
	return 0;
}

static void test_proposal(void **state)
{
	(void)state;
	const struct v2cap_frame *f = &cap->f[62 - 1];
	struct clc_msg m;
	struct clc_v2ext_info x;
	char e[CLC_EID_LEN + 1];
	uint32_t ip;

	assert_int_equal(clc_decode(f->data, f->len, &m), 0);
	assert_int_equal(clc_v2ext_get(&m.proposal.v2ext, m.proposal.typev2, &x), 0);
	want(62, "smc.clc_msg", "%d", CLC_PROPOSAL);
	want(62, "smc.length", "%u", m.proposal.length);
	want(62, "smc.proposal.smc.version", "%u", m.proposal.f.version);
	want(62, "smc.proposal.smcv2.type", "%u", m.proposal.typev2);
	want(62, "smc.proposal.smc.type", "%u", m.proposal.typev1);
	want(62, "smc.proposal.smcv2_ext_offset", "0x%04x", m.proposal.v2ext_offset);
	want(62, "smc.proposal.eid.count", "%u", x.eid_count);
	want(62, "smc.proposal.smc.version.relnum", "%u", x.release);
	want(62, "smc.proposal.smc.seid", "%u", x.seid);
	assert_true(clc_gid_ipv4(&x.roce_gid, &ip));
	want(62, "smc.proposal.rocev2.gid.ipv4", "%u.%u.%u.%u", ip >> 24, ip >> 16 & 0xff,
	     ip >> 8 & 0xff, ip & 0xff);
	eid_str(&x.eids[0], e);
	want(62, "smc.proposal.eid", "%s", e);
	want(62, "_ws.malformed", "%s", "");
}

static void test_accept_confirm(void **state)
{
	(void)state;
	static const struct { unsigned fr; enum clc_type t; const char *side; } v[2] = {
		{ 64, CLC_ACCEPT, "accept.server" }, { 66, CLC_CONFIRM, "confirm.client" },
	};
	for (int i = 0; i < 2; i++) {
		const struct v2cap_frame *f = &cap->f[v[i].fr - 1];
		struct clc_accept_v2 a;
		char k[96], e[CLC_EID_LEN + 1], h[CLC_HOSTNAME_LEN + 1];
		const char *t = v[i].t == CLC_ACCEPT ? "accept" : "confirm";

		assert_int_equal(clc_accept_v2_decode(f->data, f->len, v[i].t, &a), 0);
		want(v[i].fr, "smc.clc_msg", "%d", v[i].t);
		want(v[i].fr, "smc.length", "%u", a.length);
		want(v[i].fr, "smc.proposal.smc.version", "%u", a.f.version);
		snprintf(k, sizeof(k), "smc.%s.first.contact", v[i].t == CLC_ACCEPT ? "proposal" : "confirm");
		want(v[i].fr, k, "%u", a.first_contact);
		snprintf(k, sizeof(k), "smc.%s.sender.%s.peer.id", t,
			 v[i].t == CLC_ACCEPT ? "server" : "client");
		want(v[i].fr, k, "0x%016llx", (unsigned long long)wire_peer_id_u64(&a.peer_id));
		snprintf(k, sizeof(k), "smc.%s.qp.number", v[i].side);
		want(v[i].fr, k, "0x%06x", a.qpn);
		snprintf(k, sizeof(k), "smc.%s.rmb.rkey", v[i].side);
		want(v[i].fr, k, "0x%08x", a.rkey);
		snprintf(k, sizeof(k), "smc.%s.tcp.conn.index", v[i].side);
		want(v[i].fr, k, "%u", a.rmbe_idx);
		snprintf(k, sizeof(k), "smc.%s.rmb.buffer.size", t);
		want(v[i].fr, k, "%u", a.rmbe_size_code);
		snprintf(k, sizeof(k), "smc.%s.qp.mtu.value", t);
		want(v[i].fr, k, "%u", a.mtu_code);
		/* 4.0 names the Confirm's PSN without its message prefix */
		want(v[i].fr, v[i].t == CLC_ACCEPT ? "smc.accept.initial.psn" : "smc.initial.psn",
		     "0x%06x", a.psn);
		/* byte 0 of the first-contact extension: Linux's v2_direct, 4.0's "v2 LG type" */
		want(v[i].fr, "smc.accept.v2_lg.type", "%u", a.fce.v2_direct);
		eid_str(&a.eid, e);
		snprintf(k, sizeof(k), "smc.%s.eid", t);
		want(v[i].fr, k, "%s", e);
		snprintf(k, sizeof(k), "smc.%s.os.type", t);
		want(v[i].fr, k, "%u", a.fce.os_type);
		snprintf(k, sizeof(k), "smc.%s.smc.version.relnum", t);
		want(v[i].fr, k, "%u", a.fce.release);
		memcpy(h, a.fce.hostname, CLC_HOSTNAME_LEN);
		h[CLC_HOSTNAME_LEN] = 0;
		snprintf(k, sizeof(k), "smc.%s.peer.host.name", t);
		want(v[i].fr, k, "%s", h);
		if (v[i].t == CLC_CONFIRM) {
			want(v[i].fr, "smc.confirm.gid.list.entry_count", "%u", a.gid_count);
			want(v[i].fr, "smc.confirm.gid.list.entry", "::ffff:10.0.0.%u", a.gids[0].b[15]);
		}
		want(v[i].fr, "_ws.malformed", "%s", "");
	}
}

/* Where tshark 4.0 stops knowing v2: pinned, with smcr's reading beside it. */
static void test_dissector_limits(void **state)
{
	(void)state;
	static const unsigned malformed[4] = { 67, 69, 71, 74 };
	for (int i = 0; i < 4; i++) {
		const struct v2cap_frame *f = &cap->f[malformed[i] - 1];
		struct llc2_msg m;
		char *s = field(malformed[i], "_ws.malformed");
		assert_int_equal(llc2_decode(f->data, f->len, &m), 0);	/* smcr: fine */
		assert_int_equal(f->data[1] << 8 | f->data[2], m.length << 8);	/* BE reading */
		assert_true(s[0] != 0);		/* tshark: Malformed */
		free(s);
	}
	for (unsigned fr = 164; fr <= 169; fr++) {
		const struct v2cap_frame *f = &cap->f[fr - 1];
		if (f->kind != V2CAP_ROCE || f->opcode != 0x04)
			continue;
		struct llc2_msg m;
		assert_int_equal(llc2_decode(f->data, f->len, &m), 0);
		assert_int_equal(m.type, LLC2_DELETE_RKEY);
		want(fr, "smc.llc_msg", "%s", "");	/* not SMC to tshark 4.0 */
		want(fr, "data.len", "%zu", f->len);
	}
	/* The Accept's v2.1 bytes are "reserved" to 4.0; smcr reads 255 / 2 / 0x0001 there. */
	struct runcmd r;
	assert_int_equal(runcmd(&r, "tshark -r %s -Y 'frame.number==64' -T fields -E occurrence=l "
				    "-e smc.reserved 2>/dev/null", shq(v2cap_path())), 0);
	assert_non_null(strstr(r.out, "ff020001"));	/* 255, 2, 0x0001 */
	runcmd_free(&r);
}

int main(void)
{
	struct runcmd r;
	if (runcmd(&r, "tshark -v >/dev/null 2>&1") != 0 || r.status != 0) {
		printf("SKIP: tshark is not installed (scripts/deps.sh test installs it)\n");
		return 77;
	}
	runcmd_free(&r);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_proposal),
		cmocka_unit_test(test_accept_confirm),
		cmocka_unit_test(test_dissector_limits),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
