/* test_core_clc.c: the CLC state machines (docs/protocol/procedures.md 2.2-2.5): every decline path
 * with its diagnosis code (docs/protocol/wire-formats.md 5.2), fallback with both reasons recorded,
 * timeouts (6 s CLC, 2 s + 1 s CONFIRM LINK) with time passed in, malformed and unexpected
 * messages, partial input, IPv4/IPv6 prefix matching, out-of-sync handling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "lib/core_pair.h"
#include "lib/loopdev.h"
#include "wire/clc.h"

#define S(x) (x##ull * 1000000000ull)
#define T0 S(100)

static void v4(struct core_conn_params *p, const char *local, const char *pfx, int len)
{
	struct sockaddr_in *l = (struct sockaddr_in *)(void *)&p->local;
	inet_pton(AF_INET, local, &l->sin_addr);
	static struct core_ip_prefix pf[2][1];
	struct core_ip_prefix *x = pf[p->role == CORE_CLIENT ? 0 : 1];
	memset(x, 0, sizeof(*x));
	x->family = AF_INET;
	inet_pton(AF_INET, pfx, x->addr);
	x->len = (uint8_t)len;
	p->prefixes = x;
	p->nprefixes = 1;
}

static void v6(struct core_conn_params *p, const char *local, const char *pfx, int len)
{
	struct sockaddr_in6 *l = (struct sockaddr_in6 *)(void *)&p->local;
	memset(l, 0, sizeof(*l));
	l->sin6_family = AF_INET6;
	inet_pton(AF_INET6, local, &l->sin6_addr);
	static struct core_ip_prefix pf[2][2];
	struct core_ip_prefix *x = pf[p->role == CORE_CLIENT ? 0 : 1];
	memset(x, 0, 2 * sizeof(*x));
	x[0].family = AF_INET6;	/* a link-local one, never sent */
	inet_pton(AF_INET6, "fe80::1", x[0].addr);
	x[0].len = 64;
	x[1].family = AF_INET6;
	inet_pton(AF_INET6, pfx, x[1].addr);
	x[1].len = (uint8_t)len;
	p->prefixes = x;
	p->nprefixes = 2;
}

static void check_prefix(struct cp_two *t, bool ipv6, const char *cl, const char *cp_, int clen,
			 const char *sl, const char *sp_, int slen, bool expect_smc)
{
	struct core_conn_params cp, sp;
	cp_conn_params(&cp, CORE_CLIENT, 0);
	cp_conn_params(&sp, CORE_SERVER, 0);
	if (ipv6) {
		v6(&cp, cl, cp_, clen);
		v6(&sp, sl, sp_, slen);
	} else {
		v4(&cp, cl, cp_, clen);
		v4(&sp, sl, sp_, slen);
	}
	struct cp_pair pp = { 0 };
	assert_int_equal(cp_connect(&pp, t->ce, t->se, &cp, &sp, 50), 0);
	struct core_conn_info ci, si;
	core_conn_info(pp.cli, &ci);
	core_conn_info(pp.srv, &si);
	if (expect_smc) {
		assert_int_equal(pp.rc.status, CORE_CLC_SMC);
		assert_int_equal(pp.rs.status, CORE_CLC_SMC);
	} else {
		assert_int_equal(pp.rc.status, CORE_CLC_FALLBACK);
		assert_int_equal(pp.rs.status, CORE_CLC_FALLBACK);
		assert_int_equal(si.mode, CORE_MODE_FALLBACK);
		assert_int_equal(si.fallback_local, 0x03070000);	/* DIFFPREFIX */
		assert_int_equal(si.fallback_peer, 0);
		assert_int_equal(ci.fallback_peer, 0x03070000);
		assert_int_equal(ci.fallback_local, 0x05000000);	/* PEERDECL */
		assert_int_equal(pp.c2s.len, 0);
		assert_int_equal(pp.s2c.len, 0);
	}
	cp_release(&pp);
}

static void test_prefixes(void **state)
{
	struct cp_two *t = *state;
	check_prefix(t, false, "10.0.0.1", "10.0.0.0", 24, "10.0.0.2", "10.0.0.0", 24, true);
	check_prefix(t, false, "10.0.0.1", "10.0.0.0", 24, "10.0.1.1", "10.0.1.0", 24, false);
	/* same subnet, different prefix length: no match (Linux smc_clc_prfx_match) */
	check_prefix(t, false, "10.0.0.1", "10.0.0.0", 24, "10.0.0.2", "10.0.0.0", 16, false);
	check_prefix(t, true, "fd00::1", "fd00::", 64, "fd00::2", "fd00::", 64, true);
	check_prefix(t, true, "fd00::1", "fd00::", 64, "fd01::2", "fd01::", 64, false);
}

/* Step a conn with raw input; returns the result. */
static struct core_clc_result step(struct core_conn *c, const void *in, size_t len, bool eof,
				   uint64_t now)
{
	struct core_clc_result r;
	assert_int_equal(core_conn_clc_step(c, in, len, eof, now, &r), 0);
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

static void test_timeouts(void **state)
{
	struct cp_two *t = *state;
	struct core_conn *s = new_conn(t->se, CORE_SERVER);
	struct core_clc_result r = step(s, NULL, 0, false, T0);
	assert_int_equal(r.status, CORE_CLC_NEED_INPUT);
	assert_int_equal(r.deadline_ns, T0 + S(6));
	r = step(s, NULL, 0, false, T0 + S(6) - 1);
	assert_int_equal(r.status, CORE_CLC_NEED_INPUT);
	r = step(s, NULL, 0, false, T0 + S(6));
	assert_int_equal(r.status, CORE_CLC_FAILED);
	assert_int_equal(r.err, -SMCR_E_CORE_CLC_TIMEOUT);
	assert_int_equal(smcr_err_errno(r.err), ETIMEDOUT);
	core_conn_release(s, T0);

	/* Client: the Proposal, then 6 s without an Accept fails the connect. */
	struct core_conn *c = new_conn(t->ce, CORE_CLIENT);
	r = step(c, NULL, 0, false, T0);
	assert_int_equal(r.status, CORE_CLC_NEED_INPUT);
	assert_int_equal(r.out_len, CLC_PROPOSAL_LINUX_LEN);	/* 92: N = 40 */
	static const uint8_t eye[4] = { 0xE2, 0xD4, 0xC3, 0xD9 };
	assert_memory_equal(r.out, eye, 4);
	assert_int_equal(r.out[4], 1);
	assert_int_equal(r.out[7], 0x10);
	assert_memory_equal(r.out + 88, eye, 4);
	struct clc_msg m;
	assert_int_equal(clc_decode(r.out, r.out_len, &m), 0);
	assert_int_equal(m.proposal.ipv4_subnet, 0x7f000001);
	assert_int_equal(m.proposal.ipv4_prefix_len, 32);
	struct wire_peer_id pid = core_engine_peer_id(t->ce);
	assert_memory_equal(&m.proposal.peer_id, &pid, sizeof(pid));
	/* The timer is also run by progress: the callback-less conn just fails. */
	core_engine_progress(t->ce, T0 + S(6), NULL);
	r = step(c, NULL, 0, false, T0 + S(6));
	assert_int_equal(r.status, CORE_CLC_FAILED);
	assert_int_equal(r.err, -SMCR_E_CORE_CLC_TIMEOUT);
	core_conn_release(c, T0);
}

/* docs/protocol/procedures.md 2.2/2.3: the client never answers CONFIRM LINK: the server waits 2 s,
 * then 1 s for a Decline, then declines TIMEOUT_CL; both fall back; the new LGs go. */
static void test_confirm_link_timeout(void **state)
{
	struct cp_two *t = *state;
	struct core_conn *c = new_conn(t->ce, CORE_CLIENT), *s = new_conn(t->se, CORE_SERVER);
	uint64_t now = T0;
	struct core_clc_result rc = step(c, NULL, 0, false, now);
	struct core_clc_result rs = step(s, rc.out, rc.out_len, false, now);
	assert_int_equal(rs.consumed, CLC_PROPOSAL_LINUX_LEN);
	assert_int_equal(rs.out_len, CLC_ACCEPT_LEN);
	uint8_t acc[CLC_ACCEPT_LEN];
	memcpy(acc, rs.out, sizeof(acc));
	rc = step(c, acc, sizeof(acc), false, now);
	assert_int_equal(rc.status, CORE_CLC_WAIT_LINK);
	assert_int_equal(rc.out_len, CLC_ACCEPT_LEN);	/* the Confirm */
	uint8_t conf[CLC_ACCEPT_LEN];
	memcpy(conf, rc.out, sizeof(conf));
	rs = step(s, conf, sizeof(conf), false, now);
	assert_int_equal(rs.status, CORE_CLC_WAIT_LINK);
	assert_int_equal(rs.deadline_ns, now + S(2));
	/* only the server engine runs */
	core_engine_progress(t->se, now + S(2), NULL);
	rs = step(s, NULL, 0, false, now + S(2));
	assert_int_equal(rs.status, CORE_CLC_WAIT_LINK);	/* waiting 1 s for a Decline */
	assert_int_equal(rs.deadline_ns, now + S(3));
	core_engine_progress(t->se, now + S(3), NULL);
	rs = step(s, NULL, 0, false, now + S(3));
	assert_int_equal(rs.status, CORE_CLC_FALLBACK);
	assert_int_equal(rs.out_len, CLC_DECLINE_LEN);
	struct clc_msg m;
	assert_int_equal(clc_decode(rs.out, rs.out_len, &m), 0);
	assert_int_equal(m.type, CLC_DECLINE);
	assert_int_equal(m.decline.diag, 0x02010000);	/* TIMEOUT_CL */
	assert_false(m.decline.out_of_sync);
	uint8_t decl[CLC_DECLINE_LEN + 5];
	memcpy(decl, rs.out, CLC_DECLINE_LEN);
	memcpy(decl + CLC_DECLINE_LEN, "after", 5);
	rc = step(c, decl, sizeof(decl), false, now + S(3));
	assert_int_equal(rc.status, CORE_CLC_FALLBACK);
	assert_int_equal(rc.consumed, CLC_DECLINE_LEN);	/* "after" is application data */
	struct core_conn_info ci, si;
	core_conn_info(c, &ci);
	core_conn_info(s, &si);
	assert_int_equal(ci.fallback_peer, 0x02010000);
	assert_int_equal(si.fallback_local, 0x02010000);
	/* The client engine now processes the stale CONFIRM LINK of a freed link: harmless. */
	core_engine_progress(t->ce, now + S(10), NULL);
	core_engine_progress(t->se, now + S(10), NULL);
	struct core_engine_stats cs, ss;
	core_engine_stats(t->ce, &cs);
	core_engine_stats(t->se, &ss);
	assert_int_equal(cs.lgs, 0);
	assert_int_equal(ss.lgs, 0);
	core_conn_release(c, now);
	core_conn_release(s, now);
}

static void test_malformed(void **state)
{
	struct cp_two *t = *state;
	struct core_conn *s = new_conn(t->se, CORE_SERVER);
	const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct core_clc_result r = step(s, http, strlen(http), false, T0);
	assert_int_equal(r.status, CORE_CLC_FAILED);
	assert_int_equal(r.err, -SMCR_E_CLC_BAD_EYECATCHER);
	assert_int_equal(r.out_len, 0);
	core_conn_release(s, T0);

	/* A Proposal with a broken trailer: framing error, no fallback
	 * (docs/protocol/wire-formats.md 2.4). */
	struct core_conn *c = new_conn(t->ce, CORE_CLIENT);
	r = step(c, NULL, 0, false, T0);
	uint8_t prop[CLC_PROPOSAL_LINUX_LEN];
	memcpy(prop, r.out, sizeof(prop));
	prop[sizeof(prop) - 1] ^= 0xFF;
	s = new_conn(t->se, CORE_SERVER);
	r = step(s, prop, sizeof(prop), false, T0);
	assert_int_equal(r.status, CORE_CLC_FAILED);
	assert_int_equal(r.err, -SMCR_E_CLC_BAD_TRAILER);
	core_conn_release(s, T0);

	/* Fed byte by byte, a good Proposal is consumed only when complete. */
	prop[sizeof(prop) - 1] ^= 0xFF;
	s = new_conn(t->se, CORE_SERVER);
	for (size_t i = 1; i < sizeof(prop); i++) {
		r = step(s, prop, i, false, T0);
		assert_int_equal(r.status, CORE_CLC_NEED_INPUT);
		assert_int_equal(r.consumed, 0);
	}
	r = step(s, prop, sizeof(prop), false, T0);
	assert_int_equal(r.consumed, sizeof(prop));
	assert_int_equal(r.status, CORE_CLC_NEED_INPUT);	/* waiting for the Confirm */
	assert_int_equal(r.out_len, CLC_ACCEPT_LEN);
	/* A Proposal where the Confirm is due: unexpected type, the connection fails. */
	r = step(s, prop, sizeof(prop), false, T0);
	assert_int_equal(r.status, CORE_CLC_FAILED);
	assert_int_equal(r.err, -SMCR_E_CORE_CLC_UNEXPECTED);
	core_conn_release(s, T0);
	core_conn_release(c, T0);

	/* TCP ends during the handshake. */
	s = new_conn(t->se, CORE_SERVER);
	r = step(s, prop, 10, true, T0);
	assert_int_equal(r.status, CORE_CLC_FAILED);
	assert_int_equal(r.err, -SMCR_E_CORE_TCP_EOF);
	core_conn_release(s, T0);
	struct core_engine_stats st;
	core_engine_progress(t->se, T0, NULL);
	core_engine_stats(t->se, &st);
	assert_int_equal(st.lgs, 0);	/* the first-contact LG of the failed handshake is gone */
}

static size_t decline_bytes(uint8_t *out, uint32_t code, bool oos)
{
	struct clc_decline d;
	memset(&d, 0, sizeof(d));
	d.f.version = 1;
	d.out_of_sync = oos;
	d.diag = code;
	d.peer_id.instance = 0x4242;
	size_t n = 0;
	assert_int_equal(clc_decline_encode(&d, out, 64, &n), 0);
	return n;
}

static void test_declines(void **state)
{
	struct cp_two *t = *state;
	uint8_t buf[128];
	/* Server: a Decline instead of a Proposal (a client without a device). */
	struct core_conn *s = new_conn(t->se, CORE_SERVER);
	size_t n = decline_bytes(buf, 0x03030002, false);
	struct core_clc_result r = step(s, buf, n, false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	assert_int_equal(r.out_len, 0);	/* a Decline is never answered */
	struct core_conn_info in;
	core_conn_info(s, &in);
	assert_int_equal(in.fallback_peer, 0x03030002);
	core_conn_release(s, T0);

	/* Server: a Proposal offering only SMC-D -> Decline 0x03030000, fallback. */
	struct core_conn *c = new_conn(t->ce, CORE_CLIENT);
	r = step(c, NULL, 0, false, T0);
	struct clc_msg m;
	assert_int_equal(clc_decode(r.out, r.out_len, &m), 0);
	m.proposal.typev1 = CLC_PATH_D;
	size_t plen = 0;
	assert_int_equal(clc_encode(&m, buf, sizeof(buf), &plen), 0);
	s = new_conn(t->se, CORE_SERVER);
	r = step(s, buf, plen, false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	assert_int_equal(r.out_len, CLC_DECLINE_LEN);
	struct clc_msg d;
	assert_int_equal(clc_decode(r.out, r.out_len, &d), 0);
	assert_int_equal(d.decline.diag, 0x03030000);
	core_conn_release(s, T0);

	/* Client: an Accept for SMC-D -> Decline MODEUNSUPP. */
	struct core_clc_result rp = step(c, NULL, 0, false, T0);	/* nothing new */
	assert_int_equal(rp.out_len, 0);
	core_conn_release(c, T0);
	c = new_conn(t->ce, CORE_CLIENT);
	s = new_conn(t->se, CORE_SERVER);
	r = step(c, NULL, 0, false, T0);
	struct core_clc_result ra = step(s, r.out, r.out_len, false, T0);
	uint8_t acc[CLC_ACCEPT_LEN];
	memcpy(acc, ra.out, sizeof(acc));
	acc[7] |= 0x01;
	r = step(c, acc, sizeof(acc), false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	assert_int_equal(clc_decode(r.out, r.out_len, &d), 0);
	assert_int_equal(d.decline.diag, 0x03040000);
	core_conn_info(c, &in);
	assert_int_equal(in.fallback_local, 0x03040000);
	/* the server gets the Decline and frees its first-contact LG */
	uint8_t dbytes[CLC_DECLINE_LEN];
	memcpy(dbytes, r.out, sizeof(dbytes));
	r = step(s, dbytes, sizeof(dbytes), false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	core_conn_release(s, T0);
	core_conn_release(c, T0);

	/* Client: a reuse Accept naming an LG we do not have -> SYNCERR with out-of-sync. */
	c = new_conn(t->ce, CORE_CLIENT);
	s = new_conn(t->se, CORE_SERVER);
	r = step(c, NULL, 0, false, T0);
	ra = step(s, r.out, r.out_len, false, T0);
	memcpy(acc, ra.out, sizeof(acc));
	acc[7] &= (uint8_t)~0x08;	/* not first contact */
	r = step(c, acc, sizeof(acc), false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	assert_int_equal(r.out_len, CLC_DECLINE_LEN);
	assert_int_equal(r.out[7], 0x18);	/* version 1 + out of sync */
	static const uint8_t syncerr[4] = { 0x04, 0, 0, 0 };
	assert_memory_equal(r.out + 16, syncerr, 4);
	core_conn_release(s, T0);
	core_conn_release(c, T0);

	/* Client: the server declines instead of accepting; bytes after it are data. */
	c = new_conn(t->ce, CORE_CLIENT);
	r = step(c, NULL, 0, false, T0);
	n = decline_bytes(buf, 0x03070000, false);
	memcpy(buf + n, "DATA", 4);
	r = step(c, buf, n + 4, false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	assert_int_equal(r.consumed, n);
	core_conn_info(c, &in);
	assert_int_equal(in.fallback_peer, 0x03070000);
	assert_int_equal(in.fallback_local, 0x05000000);
	/* later calls: same status, nothing more */
	r = step(c, buf + n, 4, false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	assert_int_equal(r.consumed, 0);
	core_conn_release(c, T0);

	/* The program decided on TCP before any CLC byte. */
	c = new_conn(t->ce, CORE_CLIENT);
	core_conn_set_fallback(c, 0x03010000);
	r = step(c, NULL, 0, false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	assert_int_equal(r.out_len, 0);
	core_conn_info(c, &in);
	assert_int_equal(in.fallback_local, 0x03010000);
	assert_int_equal(in.mode, CORE_MODE_FALLBACK);
	core_conn_release(c, T0);
	struct core_engine_stats st;
	core_engine_progress(t->se, T0 + S(5), NULL);
	core_engine_progress(t->ce, T0 + S(5), NULL);
	core_engine_stats(t->se, &st);
	assert_int_equal(st.lgs, 0);
	assert_int_equal(st.conns, 0);
	core_engine_stats(t->ce, &st);
	assert_int_equal(st.lgs, 0);
}

/* docs/protocol/wire-formats.md 5.3: a Decline with the out-of-sync flag for a reuse connection
 * terminates the LG it was to reuse (its other connections are reset). */
static void test_out_of_sync_received(void **state)
{
	struct cp_two *t = *state;
	struct cp_pair p1 = { 0 };
	assert_int_equal(cp_connect(&p1, t->ce, t->se, NULL, NULL, 50), 0);
	assert_int_equal(p1.rs.status, CORE_CLC_SMC);
	struct core_conn *c = new_conn(t->ce, CORE_CLIENT), *s = new_conn(t->se, CORE_SERVER);
	struct core_clc_result r = step(c, NULL, 0, false, p1.now);
	r = step(s, r.out, r.out_len, false, p1.now);
	/* a new RMB: CONFIRM RKEY first (docs/protocol/procedures.md 2.7), then the reuse Accept */
	assert_int_equal(r.status, CORE_CLC_WAIT_LINK);
	assert_int_equal(r.out_len, 0);
	cp_progress(&p1, 2);
	r = step(s, NULL, 0, false, p1.now);
	assert_int_equal(r.status, CORE_CLC_NEED_INPUT);
	assert_int_equal(r.out_len, CLC_ACCEPT_LEN);
	assert_int_equal(r.out[7] & 0x08, 0);
	uint8_t buf[64];
	size_t n = decline_bytes(buf, 0x04000000, true);
	r = step(s, buf, n, false, p1.now);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	cp_progress(&p1, 3);
	/* the established connection of that LG is reset on both sides */
	assert_true(core_conn_events(p1.srv) & CORE_EV_ERR);
	assert_true(core_conn_events(p1.cli) & CORE_EV_ERR);
	core_conn_release(c, p1.now);
	core_conn_release(s, p1.now);
	cp_release(&p1);
}

/* No usable device (port down): a client sends a Decline instead of a Proposal, a server
 * declines the Proposal; both NOSMCRDEV 0x03030002 (docs/protocol/wire-formats.md 5.2). */
static void test_no_device(void **state)
{
	(void)state;
	struct core_engine *ce = cp_engine("loop", NULL);
	struct dev_device *cdev = loopdev_last_opened();
	struct core_engine *se = cp_engine("loop", NULL);
	struct dev_device *sdev = loopdev_last_opened();
	assert_int_equal(dev_set_port_state(cdev, 1, 0), 0);
	struct core_conn *c = new_conn(ce, CORE_CLIENT);
	struct core_clc_result r = step(c, NULL, 0, false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	struct clc_msg m;
	assert_int_equal(clc_decode(r.out, r.out_len, &m), 0);
	assert_int_equal(m.type, CLC_DECLINE);
	assert_int_equal(m.decline.diag, 0x03030002);
	core_conn_release(c, T0);
	assert_int_equal(dev_set_port_state(cdev, 1, 1), 0);
	assert_int_equal(dev_set_port_state(sdev, 1, 0), 0);
	c = new_conn(ce, CORE_CLIENT);
	struct core_conn *s = new_conn(se, CORE_SERVER);
	r = step(c, NULL, 0, false, T0);
	r = step(s, r.out, r.out_len, false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	assert_int_equal(clc_decode(r.out, r.out_len, &m), 0);
	assert_int_equal(m.decline.diag, 0x03030002);
	core_conn_release(c, T0);
	core_conn_release(s, T0);
	core_engine_free(ce);
	core_engine_free(se);
}

/* A Confirm with a bad field (MTU code 0): the server declines (INTERR) and frees the
 * first-contact LG; the client falls back on the Decline. */
static void test_bad_confirm(void **state)
{
	struct cp_two *t = *state;
	struct core_conn *c = new_conn(t->ce, CORE_CLIENT), *s = new_conn(t->se, CORE_SERVER);
	struct core_clc_result r = step(c, NULL, 0, false, T0);
	r = step(s, r.out, r.out_len, false, T0);
	uint8_t acc[CLC_ACCEPT_LEN];
	memcpy(acc, r.out, sizeof(acc));
	r = step(c, acc, sizeof(acc), false, T0);
	uint8_t conf[CLC_ACCEPT_LEN];
	memcpy(conf, r.out, sizeof(conf));
	conf[50] &= 0xF0;	/* MTU code 0 */
	r = step(s, conf, sizeof(conf), false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	struct clc_msg m;
	assert_int_equal(clc_decode(r.out, r.out_len, &m), 0);
	assert_int_equal(m.decline.diag, 0x09990000);
	uint8_t d[CLC_DECLINE_LEN];
	memcpy(d, r.out, sizeof(d));
	r = step(c, d, sizeof(d), false, T0);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	core_engine_progress(t->se, T0 + S(5), NULL);
	core_engine_progress(t->ce, T0 + S(5), NULL);
	struct core_engine_stats st;
	core_engine_stats(t->se, &st);
	assert_int_equal(st.lgs, 0);
	core_engine_stats(t->ce, &st);
	assert_int_equal(st.lgs, 0);
	core_conn_release(c, T0);
	core_conn_release(s, T0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_prefixes, cp_two_setup, cp_two_teardown),
		cmocka_unit_test_setup_teardown(test_timeouts, cp_two_setup, cp_two_teardown),
		cmocka_unit_test_setup_teardown(test_confirm_link_timeout, cp_two_setup, cp_two_teardown),
		cmocka_unit_test_setup_teardown(test_malformed, cp_two_setup, cp_two_teardown),
		cmocka_unit_test_setup_teardown(test_declines, cp_two_setup, cp_two_teardown),
		cmocka_unit_test_setup_teardown(test_out_of_sync_received, cp_two_setup, cp_two_teardown),
		cmocka_unit_test(test_no_device),
		cmocka_unit_test_setup_teardown(test_bad_confirm, cp_two_setup, cp_two_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
