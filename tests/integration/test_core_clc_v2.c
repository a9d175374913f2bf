/* test_core_clc_v2.c: SMC-R v2 between two engines (docs/parts/wire-v2.md 6), over the
 * in-process "loop" provider with RoCE v2 GIDs ("loop:gid=v2") and user EIDs, and the
 * version rule against engines without a v2 path.
 *
 * Without a RoCE v2 GID or without a user EID the server can only pick v1: the real Linux
 * 6.12 Proposal (v2 only, from tests/vectors/linux-6.12-smcr-v2-rxe.pcap) is declined with
 * NOSMCDEV in the 44-byte v2 form, as a Linux server without a RoCE v2 device declines it;
 * a Proposal that offers v1 and v2 gets a v1 Accept; one that offers no path gets
 * PEERNOSMC. With both: smcr offers v1 and v2 (byte 7 0x20), the server chooses v2, the v2
 * Accept/Confirm with the first-contact extension run, the link comes up and data moves
 * both ways byte-exact; a second connection reuses the v2 LG with 108-byte messages. The
 * fallbacks (EID mismatch, one side without v2, a v1-only client) end in v1, or for a
 * v2-only Proposal in the Decline Linux gives. The capture's Proposal gets an Accept whose
 * fields match the kernel's where they are not instance-specific. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/core_int.h"
#include "lib/core_pair.h"
#include "lib/loopdev.h"
#include "lib/v2cap.h"
#include "wire/clc.h"
#include "wire/clc_v2.h"
#include "wire/llc_v2.h"

#define T0 (100ull * 1000000000ull)

static struct core_engine *v2_engine(const char *spec, const char *ueids)
{
	struct core_engine_params p;
	memset(&p, 0, sizeof(p));
	if (ueids)
		assert_int_equal(core_ueid_parse(ueids, &p.ueids), 0);
	return cp_engine(spec, &p);
}

static struct core_clc_result step(struct core_conn *c, const void *in, size_t len, uint64_t now)
{
	struct core_clc_result r;
	assert_int_equal(core_conn_clc_step(c, in, len, false, now, &r), 0);
	return r;
}

static struct core_conn *new_conn(struct core_engine *e, enum core_role role)
{
	struct core_conn_params p;
	cp_conn_params(&p, role, 0);
	struct core_conn *c;
	assert_int_equal(core_conn_new(e, &p, &c), 0);
	return c;
}

/* Feeds a Proposal to a new server connection and expects a Decline with code. */
static void expect_decline(struct cp_two *t, const uint8_t *prop, size_t len, uint32_t code)
{
	struct core_conn *s = new_conn(t->se, CORE_SERVER);
	struct core_clc_result r = step(s, prop, len, T0);
	struct core_conn_info in;
	struct clc_msg d;

	assert_int_equal(r.consumed, len);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	assert_int_equal(clc_decode(r.out, r.out_len, &d), 0);
	assert_int_equal(d.type, CLC_DECLINE);
	assert_int_equal(d.decline.diag, code);
	/* Linux answers a version-2 Proposal with a version-2 (44-byte) Decline */
	assert_int_equal(r.out_len, (prop[7] >> 4) >= 2 ? 44 : 28);
	core_conn_info(s, &in);
	assert_int_equal(in.mode, CORE_MODE_FALLBACK);
	assert_int_equal(in.fallback_local, code);
	core_conn_release(s, T0);
}

static void test_linux_v2_only_proposal(void **state)
{
	struct cp_two *t = *state;
	struct v2cap *cap = malloc(sizeof(*cap));
	assert_non_null(cap);
	assert_int_equal(v2cap_load(cap), 0);
	const struct v2cap_frame *f = &cap->f[62 - 1];
	assert_int_equal(f->len, 156);
	expect_decline(t, f->data, f->len, CLC2_DECL_NOSMCDEV);
	free(cap);
}

static void test_no_path_offered(void **state)
{
	struct cp_two *t = *state;
	struct core_conn *c = new_conn(t->ce, CORE_CLIENT);
	struct core_clc_result r = step(c, NULL, 0, T0);
	struct clc_msg m;
	uint8_t buf[CLC_MSG_MAX_LEN];
	size_t n;

	assert_int_equal(clc_decode(r.out, r.out_len, &m), 0);
	m.proposal.typev1 = CLC_PATH_NONE;
	assert_int_equal(clc_encode(&m, buf, sizeof(buf), &n), 0);
	expect_decline(t, buf, n, CLC2_DECL_PEERNOSMC);
	core_conn_release(c, T0);
}

static void test_v1_and_v2_offered_gets_v1(void **state)
{
	struct cp_two *t = *state;
	struct core_conn *c = new_conn(t->ce, CORE_CLIENT);
	struct core_conn *s = new_conn(t->se, CORE_SERVER);
	struct core_clc_result r = step(c, NULL, 0, T0), rs, rc;
	struct clc_msg m, a;
	struct clc_v2ext_info x;
	uint8_t buf[CLC_MSG_MAX_LEN];
	size_t n;

	/* smcr's own Proposal, turned into Linux's "both" form: version 2, typev2 SMC-R, the
	 * SMC-D area and a v2 extension with one user EID. */
	assert_int_equal(clc_decode(r.out, r.out_len, &m), 0);
	m.proposal.f.version = CLC_VERSION_2;
	m.proposal.typev2 = CLC_PATH_R;
	memset(&x, 0, sizeof(x));
	x.release = 1;
	x.eid_count = 1;
	assert_int_equal(clc_eid_from_str("SPIKE-UEID", &x.eids[0]), 0);
	x.max_conns = 255;
	x.max_links = 2;
	assert_int_equal(clc_v2ext_put(&x, CLC_PATH_R, &m.proposal.v2ext), 0);
	assert_int_equal(clc_encode(&m, buf, sizeof(buf), &n), 0);
	assert_int_equal(buf[7], 0x20);		/* v2, typev2 R, typev1 R */

	rs = step(s, buf, n, T0);
	assert_int_equal(rs.consumed, n);
	assert_int_equal(rs.status, CORE_CLC_NEED_INPUT);	/* waiting for the Confirm */
	assert_int_equal(rs.out_len, CLC_ACCEPT_LEN);
	assert_int_equal(clc_decode(rs.out, rs.out_len, &a), 0);
	assert_int_equal(a.type, CLC_ACCEPT);
	assert_int_equal(a.accept.f.version, 1);
	/* the client takes the v1 Accept and confirms */
	rc = step(c, rs.out, rs.out_len, T0);
	assert_int_equal(rc.consumed, CLC_ACCEPT_LEN);
	assert_int_equal(rc.out_len, CLC_ACCEPT_LEN);
	assert_int_equal(clc_decode(rc.out, rc.out_len, &a), 0);
	assert_int_equal(a.type, CLC_CONFIRM);
	core_conn_release(s, T0);
	core_conn_release(c, T0);
}

/* ---- SMC-R v2 between two engines ------------------------------------------------------- */

struct v2run {
	uint8_t prop[CLC_MSG_MAX_LEN], acc[CLC_MSG_MAX_LEN], conf[CLC_MSG_MAX_LEN];
	size_t prop_len, acc_len, conf_len;
};

/* Runs one handshake over a cp_pair, keeping the first CLC message of each kind (the
 * client's Proposal and Confirm, the server's Accept or Decline), until both ends are done.
 * The conns stay held in pp. */
static void keep(uint8_t *dst, size_t *dlen, const struct core_clc_result *r)
{
	if (*dlen == 0 && r->out_len) {
		assert_true(r->out_len <= CLC_MSG_MAX_LEN);
		memcpy(dst, r->out, r->out_len);
		*dlen = r->out_len;
	}
}

static void run_hs(struct core_engine *ce, struct core_engine *se, struct cp_pair *pp,
		   struct v2run *v)
{
	memset(v, 0, sizeof(*v));
	uint64_t now = pp->now ? pp->now : T0;
	memset(pp, 0, sizeof(*pp));
	pp->now = now;
	pp->ce = ce;
	pp->se = se;
	pp->cli = new_conn(ce, CORE_CLIENT);
	pp->srv = new_conn(se, CORE_SERVER);
	for (int i = 0; i < 200 && !(pp->cli_done && pp->srv_done); i++) {
		cp_round(pp);
		if (v->prop_len)
			keep(v->conf, &v->conf_len, &pp->rc);
		keep(v->prop, &v->prop_len, &pp->rc);
		keep(v->acc, &v->acc_len, &pp->rs);
	}
	assert_true(pp->cli_done && pp->srv_done);
}

static void expect_mode(struct cp_pair *pp, enum core_clc_status st, uint8_t version)
{
	struct core_conn_info ci, si;
	assert_int_equal(pp->rc.status, st);
	assert_int_equal(pp->rs.status, st);
	core_conn_info(pp->cli, &ci);
	core_conn_info(pp->srv, &si);
	if (st == CORE_CLC_SMC) {
		assert_int_equal(ci.mode, CORE_MODE_SMC);
		assert_int_equal(si.mode, CORE_MODE_SMC);
		assert_int_equal(ci.smc_version, version);
		assert_int_equal(si.smc_version, version);
	}
}

/* Data both ways, every byte compared. */
static void data_both_ways(struct cp_pair *pp, size_t len, uint64_t seed)
{
	uint8_t *a = malloc(len), *b = malloc(len);
	assert_non_null(a);
	assert_non_null(b);
	cp_fill(a, len, seed);
	assert_int_equal(cp_pump(pp, pp->cli, pp->srv, a, len, b, 65536), (long)len);
	assert_memory_equal(a, b, len);
	cp_fill(a, len, seed + 1);
	assert_int_equal(cp_pump(pp, pp->srv, pp->cli, a, len, b, 65536), (long)len);
	assert_memory_equal(a, b, len);
	free(a);
	free(b);
}

static void test_v2_smcr_to_smcr(void **state)
{
	(void)state;
	struct core_engine *ce = v2_engine("loop:gid=v2", "spike-ueid");
	struct core_engine *se = v2_engine("loop:gid=v2", "OTHER SPIKE-UEID");
	assert_non_null(ce);
	assert_non_null(se);
	struct cp_pair pp = { 0 };
	struct v2run v;
	struct loopdev_stats st0, st1;
	loopdev_stats(&st0);
	run_hs(ce, se, &pp, &v);
	/* the link came up with CONFIRM LINK v2 (request and response), no v1 LLC message */
	loopdev_stats(&st1);
	assert_int_equal(st1.send_type[LLC2_CONFIRM_LINK] - st0.send_type[LLC2_CONFIRM_LINK], 2);
	for (int ty = 1; ty <= 9; ty++)
		assert_int_equal(st1.send_type[ty], st0.send_type[ty]);
	/* the client offered v1 and v2 (the v1 part as before, then the v2 extension) */
	assert_int_equal(v.prop[7], 0x20);
	struct clc_msg m;
	assert_int_equal(clc_decode(v.prop, v.prop_len, &m), 0);
	assert_true(m.proposal.has_v2ext && m.proposal.has_iparea);
	struct clc_v2ext_info x;
	assert_int_equal(clc_v2ext_get(&m.proposal.v2ext, m.proposal.typev2, &x), 0);
	assert_int_equal(x.eid_count, 1);
	char es[CLC_EID_LEN + 1];
	clc_eid_to_str(&x.eids[0], es);
	assert_string_equal(es, "SPIKE-UEID");
	assert_int_equal(x.release, 1);
	assert_int_equal(x.max_conns, 255);
	assert_int_equal(x.max_links, 1);
	uint32_t ip;
	assert_true(clc_gid_ipv4(&x.roce_gid, &ip));
	assert_int_equal(ip >> 24, 10);
	/* a v2 Accept with the 52-byte first-contact extension (160), the Confirm adds one GID */
	struct clc_accept_v2 a, c;
	assert_int_equal(v.acc_len, 160);
	assert_int_equal(clc_accept_v2_decode(v.acc, v.acc_len, CLC_ACCEPT, &a), 0);
	assert_true(a.first_contact);
	clc_eid_to_str(&a.eid, es);
	assert_string_equal(es, "SPIKE-UEID");
	assert_int_equal(a.fce.release, 1);
	assert_int_equal(a.fce.os_type, CLC_OS_LINUX);
	assert_int_equal(a.fce.max_conns, 255);
	assert_int_equal(a.fce.max_links, 1);
	assert_int_equal(v.conf_len, 180);
	assert_int_equal(clc_accept_v2_decode(v.conf, v.conf_len, CLC_CONFIRM, &c), 0);
	assert_memory_equal(c.eid.b, a.eid.b, CLC_EID_LEN);
	assert_int_equal(c.gid_count, 1);
	assert_memory_equal(c.gids[0].b, x.roce_gid.b, WIRE_GID_LEN);
	assert_memory_equal(c.gid.b, x.roce_gid.b, WIRE_GID_LEN);
	expect_mode(&pp, CORE_CLC_SMC, 2);
	data_both_ways(&pp, 300000, 7);
	struct core_conn_info ci;
	core_conn_info(pp.cli, &ci);
	uint32_t lg = ci.lg_id;

	/* a second connection reuses the v2 LG: 108-byte Accept and Confirm */
	struct cp_pair p2 = { .now = pp.now };
	run_hs(ce, se, &p2, &v);
	assert_int_equal(v.acc_len, 108);
	assert_int_equal(v.conf_len, 108);
	expect_mode(&p2, CORE_CLC_SMC, 2);
	core_conn_info(p2.cli, &ci);
	assert_false(ci.first_contact);
	assert_int_equal(ci.lg_id, lg);
	data_both_ways(&p2, 70000, 9);
	cp_release(&p2);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
	/* ... and ended with DELETE LINK v2; still no v1 LLC message in the v2 LG */
	loopdev_stats(&st1);
	assert_true(st1.send_type[LLC2_DELETE_LINK] > st0.send_type[LLC2_DELETE_LINK]);
	for (int ty = 1; ty <= 9; ty++)
		assert_int_equal(st1.send_type[ty], st0.send_type[ty]);
}

/* Cases that end in v1: each with both engines as given; the handshake is v1 (Accept 68). */
static void expect_v1(const char *cspec, const char *cueid, const char *sspec,
		      const char *sueid, uint8_t byte7)
{
	struct core_engine *ce = v2_engine(cspec, cueid);
	struct core_engine *se = v2_engine(sspec, sueid);
	assert_non_null(ce);
	assert_non_null(se);
	struct cp_pair pp = { 0 };
	struct v2run v;
	struct loopdev_stats st0, st1;
	loopdev_stats(&st0);
	run_hs(ce, se, &pp, &v);
	loopdev_stats(&st1);
	/* a v1 LG: CONFIRM LINK v1, no v2 LLC message */
	assert_int_equal(st1.send_type[LLC_CONFIRM_LINK] - st0.send_type[LLC_CONFIRM_LINK], 2);
	for (int ty = 0x21; ty <= 0x29; ty++)
		assert_int_equal(st1.send_type[ty], st0.send_type[ty]);
	assert_int_equal(v.prop[7], byte7);
	assert_int_equal(v.acc_len, CLC_ACCEPT_LEN);
	assert_int_equal(v.conf_len, CLC_ACCEPT_LEN);
	expect_mode(&pp, CORE_CLC_SMC, 1);
	data_both_ways(&pp, 50000, 3);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

static void test_v2_fallbacks_to_v1(void **state)
{
	(void)state;
	/* no user EID in common: v2 not possible, v1 was offered too */
	expect_v1("loop:gid=v2", "AAA", "loop:gid=v2", "BBB", 0x20);
	/* the server has no RoCE v2 GID */
	expect_v1("loop:gid=v2", "AAA", "loop", "AAA", 0x20);
	/* the server has no user EID */
	expect_v1("loop:gid=v2", "AAA", "loop:gid=v2", NULL, 0x20);
	/* the client has no user EID: a v1 Proposal exactly as before (0x10) */
	expect_v1("loop:gid=v2", NULL, "loop:gid=v2", "AAA", 0x10);
	/* the client has no RoCE v2 GID */
	expect_v1("loop", "AAA", "loop:gid=v2", "AAA", 0x10);
}

/* The capture's Proposal (Linux client, v2 only, UEID SPIKE-UEID, release 1, 255 / 2) to a
 * server with a RoCE v2 GID: with SPIKE-UEID an Accept like the kernel's; without, the
 * Decline a Linux server gives. */
static void test_linux_proposal_to_v2_server(void **state)
{
	(void)state;
	struct v2cap *cap = malloc(sizeof(*cap));
	assert_non_null(cap);
	assert_int_equal(v2cap_load(cap), 0);
	const struct v2cap_frame *f = &cap->f[62 - 1], *fa = &cap->f[64 - 1];
	struct clc_accept_v2 want, got;
	assert_int_equal(clc_accept_v2_decode(fa->data, fa->len, CLC_ACCEPT, &want), 0);

	struct cp_two t;
	t.ce = v2_engine("loop:gid=v2", "X");
	t.se = v2_engine("loop:gid=v2", "other");
	assert_non_null(t.se);
	expect_decline(&t, f->data, f->len, CLC2_DECL_NOSMCDEV);	/* EID mismatch */
	core_engine_free(t.se);
	t.se = v2_engine("loop", "SPIKE-UEID");
	expect_decline(&t, f->data, f->len, CLC2_DECL_NOSMCDEV);	/* no RoCE v2 GID */
	core_engine_free(t.se);

	t.se = v2_engine("loop:gid=v2", "SPIKE-UEID");
	struct core_conn *s = new_conn(t.se, CORE_SERVER);
	struct core_clc_result r = step(s, f->data, f->len, T0);
	assert_int_equal(r.consumed, f->len);
	assert_int_equal(r.status, CORE_CLC_NEED_INPUT);
	assert_int_equal(r.out_len, fa->len);	/* 160 */
	assert_int_equal(clc_accept_v2_decode(r.out, r.out_len, CLC_ACCEPT, &got), 0);
	/* the same header bytes, first contact, EID, release, OS type and max connections;
	 * smcr runs single-link LGs: max links 1 where the kernel says 2 */
	assert_memory_equal(r.out, fa->data, 8);
	assert_true(got.first_contact);
	assert_memory_equal(got.eid.b, want.eid.b, CLC_EID_LEN);
	assert_int_equal(got.fce.release, want.fce.release);
	assert_int_equal(got.fce.os_type, want.fce.os_type);
	assert_int_equal(got.fce.v2_direct, want.fce.v2_direct);
	assert_int_equal(got.fce.max_conns, want.fce.max_conns);
	assert_int_equal(got.fce.feature_mask, 0);
	assert_int_equal(want.fce.max_links, 2);
	assert_int_equal(got.fce.max_links, 1);
	assert_int_equal(got.rmbe_idx, want.rmbe_idx);
	assert_int_equal(got.mtu_code, 3);	/* loop's active MTU, 1024 */
	/* our RoCE v2 GID, IPv4-mapped like the kernel's */
	uint32_t ip;
	assert_true(clc_gid_ipv4(&got.gid, &ip));
	assert_true(clc_gid_ipv4(&want.gid, &ip));
	core_conn_release(s, T0);
	core_engine_free(t.se);
	core_engine_free(t.ce);
	free(cap);
}

/* ---- LLC v2 in a v2 LG -------------------------------------------------------------------- */

/* Sends a 44-byte message on from's link, lets both engines run, returns the last SEND (the
 * answer, if any) in st. */
static void llc_inject(struct cp_pair *pp, struct core_conn *from, const uint8_t msg[44],
		       struct loopdev_stats *st)
{
	struct core_engine *e = from == pp->cli ? pp->ce : pp->se;
	pthread_mutex_lock(&e->lock);
	assert_int_equal(link_send_msg(from->lg->links[0], msg), 0);
	pthread_mutex_unlock(&e->lock);
	cp_progress(pp, 3);
	loopdev_stats(st);
}

static void v2_hdr(uint8_t m[44], uint8_t type, uint8_t flags)
{
	memset(m, 0, 44);
	m[0] = type;
	m[1] = 44;	/* length, little-endian as Linux on x86-64 sends it */
	m[2] = 0;
	m[3] = flags;
}

static void test_llc_v2_answers(void **state)
{
	(void)state;
	struct core_engine *ce = v2_engine("loop:gid=v2", "E");
	struct core_engine *se = v2_engine("loop:gid=v2", "E");
	struct cp_pair pp = { 0 };
	struct v2run v;
	struct loopdev_stats st;
	uint8_t m[44];
	run_hs(ce, se, &pp, &v);
	expect_mode(&pp, CORE_CLC_SMC, 2);

	/* TEST LINK v2 (request) from the client: echoed with the response flag */
	v2_hdr(m, LLC2_TEST_LINK, 0);
	memcpy(m + 4, "user-data-1234", 14);	/* 16 bytes of user data at 4 */
	llc_inject(&pp, pp.cli, m, &st);
	assert_int_equal(st.last_send_len, 44);
	assert_int_equal(st.last_send[0], 0x27);
	assert_int_equal(st.last_send[1], 44);
	assert_int_equal(st.last_send[2], 0);
	assert_int_equal(st.last_send[3], 0x80);
	assert_memory_equal(st.last_send + 4, "user-data-1234", 14);

	/* DELETE RKEY v2 of two keys the server does not know: the v2 response counts them */
	v2_hdr(m, LLC2_DELETE_RKEY, 0);
	m[4] = 2;
	m[8] = 0x11;
	m[12] = 0x22;
	llc_inject(&pp, pp.cli, m, &st);
	assert_int_equal(st.last_send[0], 0x29);
	assert_int_equal(st.last_send[3], 0x80 | 0x20);	/* response, negative */
	assert_int_equal(st.last_send[4], 2);
	assert_int_equal(st.last_send[5], 2);		/* the number not deleted */

	/* REQUEST ADD LINK v2 from the client: the server answers, adds nothing */
	struct llc2_msg r;
	memset(&r, 0, sizeof(r));
	r.type = LLC2_REQ_ADD_LINK;
	r.req_add_link.gid_count = 1;
	memset(r.req_add_link.gids[0].b, 0xab, 16);
	size_t n = 0;
	assert_int_equal(llc2_encode(&r, m, sizeof(m), &n), 0);
	assert_int_equal(n, 44);
	llc_inject(&pp, pp.cli, m, &st);
	assert_int_equal(st.last_send[0], 0x25);
	assert_int_equal(st.last_send[3], 0x80);
	uint8_t zero[40] = { 0 };
	assert_memory_equal(st.last_send + 4, zero, 40);

	/* ADD LINK v2 from the server (the capture's request, without its RKey extension):
	 * the single-link client rejects it with the request's 44 bytes, length 44 */
	struct v2cap *cap = malloc(sizeof(*cap));
	assert_non_null(cap);
	assert_int_equal(v2cap_load(cap), 0);
	const struct v2cap_frame *f = &cap->f[71 - 1];
	assert_int_equal(f->data[0], 0x22);
	memcpy(m, f->data, 44);
	m[1] = 44;
	m[2] = 0;
	llc_inject(&pp, pp.srv, m, &st);
	assert_int_equal(st.last_send_len, 44);
	assert_int_equal(st.last_send[0], 0x22);
	assert_int_equal(st.last_send[1], 44);
	assert_int_equal(st.last_send[2], 0);
	assert_int_equal(st.last_send[3] & 0xC0, 0xC0);	/* response, rejected */
	assert_memory_equal(st.last_send + 4, m + 4, 40);
	free(cap);

	/* the connection still carries data */
	data_both_ways(&pp, 20000, 11);
	struct core_engine_stats es;
	core_engine_stats(se, &es);
	/* the one the server dropped: the client's reject of an ADD LINK the server's engine
	 * never sent (the test put it on its link) */
	assert_int_equal(es.llc_rx_dropped, 1);
	/* and the client's: the REQUEST ADD LINK response to a request its engine never sent */
	core_engine_stats(ce, &es);
	assert_int_equal(es.llc_rx_dropped, 1);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

/* A v2 LLC message in a v1 LG is dropped without an answer, as Linux drops types it has no
 * handler for. */
static void test_llc_v2_in_v1_lg_dropped(void **state)
{
	(void)state;
	struct core_engine *ce = v2_engine("loop", NULL);
	struct core_engine *se = v2_engine("loop", NULL);
	struct cp_pair pp = { 0 };
	struct v2run v;
	struct loopdev_stats st0, st;
	uint8_t m[44];
	run_hs(ce, se, &pp, &v);
	expect_mode(&pp, CORE_CLC_SMC, 1);
	v2_hdr(m, LLC2_TEST_LINK, 0);
	loopdev_stats(&st0);
	llc_inject(&pp, pp.cli, m, &st);
	assert_int_equal(st.sends, st0.sends + 1);	/* ours only: no answer */
	struct core_engine_stats es;
	core_engine_stats(se, &es);
	assert_int_equal(es.llc_rx_dropped, 1);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_linux_v2_only_proposal, cp_two_setup, cp_two_teardown),
		cmocka_unit_test_setup_teardown(test_no_path_offered, cp_two_setup, cp_two_teardown),
		cmocka_unit_test_setup_teardown(test_v1_and_v2_offered_gets_v1, cp_two_setup, cp_two_teardown),
		cmocka_unit_test(test_v2_smcr_to_smcr),
		cmocka_unit_test(test_v2_fallbacks_to_v1),
		cmocka_unit_test(test_linux_proposal_to_v2_server),
		cmocka_unit_test(test_llc_v2_answers),
		cmocka_unit_test(test_llc_v2_in_v1_lg_dropped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
