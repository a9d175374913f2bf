/* test_core_life.c: connection and link-group lifecycle between two engines in one process:
 * half-close and EOF, close with C, abort with A (unread data, SO_LINGER 0), reuse of the LG
 * with and without CONFIRM RKEY (RMB pool), 255 connections per LG, the idle-LG timer, urgent
 * data as TCP presents it, TEST LINK, a vanished peer, engine teardown
 * (docs/protocol/procedures.md 2.5, 2.7, 3.3, 3.5, 3.8, 4.6, 5). Time is passed in: timers run
 * instantly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "lib/core_pair.h"
#include "lib/loopdev.h"

#define S(x) (x##ull * 1000000000ull)

static long send_str(struct core_conn *c, const char *s, unsigned flags)
{
	struct iovec v = { (void *)s, strlen(s) };
	return core_conn_send(c, &v, 1, flags);
}

static long recv_buf(struct core_conn *c, char *buf, size_t len, unsigned flags)
{
	memset(buf, 0, len);
	struct iovec v = { buf, len - 1 };
	return core_conn_recv(c, &v, 1, flags);
}

static void engines_on(const char *spec, struct core_engine **ce, struct core_engine **se,
		       const struct core_engine_params *p)
{
	*ce = cp_engine(spec, p);
	*se = cp_engine(spec, p);
	assert_non_null(*ce);
	assert_non_null(*se);
}

/* On $SMCR_TEST_DEV (loop by default, shm when set). */
static void engines(struct core_engine **ce, struct core_engine **se,
		    const struct core_engine_params *p)
{
	engines_on(NULL, ce, se, p);
}

static void connect_smc(struct cp_pair *pp, struct core_engine *ce, struct core_engine *se)
{
	assert_int_equal(cp_connect(pp, ce, se, NULL, NULL, 50), 0);
	assert_int_equal(pp->rc.status, CORE_CLC_SMC);
	assert_int_equal(pp->rs.status, CORE_CLC_SMC);
}

static void test_half_close(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	struct cp_pair pp = { 0 };
	connect_smc(&pp, ce, se);
	char b[64];
	assert_int_equal(send_str(pp.cli, "abc", 0), 3);
	assert_int_equal(core_conn_shutdown(pp.cli, SHUT_WR, pp.now), 0);
	assert_int_equal(send_str(pp.cli, "x", 0), -SMCR_E_CORE_PIPE);
	cp_progress(&pp, 2);
	unsigned ev = core_conn_events(pp.srv);
	assert_true(ev & CORE_EV_IN);
	assert_true(ev & CORE_EV_RDHUP);
	assert_false(ev & CORE_EV_HUP);
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), 3);
	assert_string_equal(b, "abc");
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), 0);	/* EOF */
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), 0);
	struct core_conn_info ci, si;
	core_conn_info(pp.cli, &ci);
	core_conn_info(pp.srv, &si);
	assert_string_equal(ci.state, "PEERCLOSEWAIT1");
	assert_string_equal(si.state, "APPCLOSEWAIT1");
	/* The other direction still works. */
	assert_int_equal(send_str(pp.srv, "xyz", 0), 3);
	cp_progress(&pp, 2);
	assert_int_equal(recv_buf(pp.cli, b, sizeof(b), 0), 3);
	assert_string_equal(b, "xyz");
	/* Server closes (C), then client. */
	core_conn_close(pp.srv, false, pp.now);
	core_conn_info(pp.srv, &si);
	assert_int_equal(si.tcp_action, CORE_TCP_SHUTDOWN);
	cp_progress(&pp, 2);
	assert_int_equal(recv_buf(pp.cli, b, sizeof(b), 0), 0);
	ev = core_conn_events(pp.cli);
	assert_true(ev & CORE_EV_HUP);
	core_conn_info(pp.cli, &ci);
	assert_string_equal(ci.state, "APPFINCLOSEWAIT");
	core_conn_close(pp.cli, false, pp.now);
	cp_progress(&pp, 2);
	core_conn_info(pp.cli, &ci);
	core_conn_info(pp.srv, &si);
	assert_string_equal(ci.state, "CLOSED");
	assert_string_equal(si.state, "CLOSED");
	/* Both connections left their LG; the LGs stay for reuse. */
	struct core_engine_stats cs, ss;
	core_engine_stats(ce, &cs);
	core_engine_stats(se, &ss);
	assert_int_equal(cs.lgs, 1);
	assert_int_equal(cs.lgs_idle, 1);
	assert_int_equal(ss.lgs_idle, 1);
	cp_release(&pp);
	core_engine_stats(ce, &cs);
	assert_int_equal(cs.conns, 0);
	core_engine_free(ce);
	core_engine_free(se);
}

/* The peer closed (C): reads see EOF; the first write is taken (its bytes go nowhere),
 * then EPIPE is pending and the next write gets it, as TCP's write to a closed peer. */
static void test_peer_closed(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	struct cp_pair pp = { 0 };
	connect_smc(&pp, ce, se);
	char b[8];
	core_conn_close(pp.srv, false, pp.now);
	cp_progress(&pp, 2);
	unsigned ev = core_conn_events(pp.cli);
	assert_true(ev & CORE_EV_RDHUP);
	assert_true(ev & CORE_EV_IN);
	assert_false(ev & (CORE_EV_ERR | CORE_EV_HUP));
	assert_int_equal(recv_buf(pp.cli, b, sizeof(b), 0), 0);
	assert_int_equal(send_str(pp.cli, "", 0), 0);	/* no bytes: nothing changes */
	assert_int_equal(core_conn_events(pp.cli) & (CORE_EV_ERR | CORE_EV_HUP), 0);
	struct core_conn_info ci;
	core_conn_info(pp.cli, &ci);
	uint64_t sent = ci.bytes_sent, cdcs = ci.cdc_sent;
	assert_int_equal(send_str(pp.cli, "late", 0), 4);
	cp_progress(&pp, 2);
	core_conn_info(pp.cli, &ci);	/* nothing went to the peer */
	assert_int_equal(ci.bytes_sent, sent);
	assert_int_equal(ci.cdc_sent, cdcs);
	assert_int_equal(ci.sndbuf_queued, 0);
	ev = core_conn_events(pp.cli);
	assert_int_equal(ev & (CORE_EV_ERR | CORE_EV_HUP | CORE_EV_IN | CORE_EV_RDHUP),
			 CORE_EV_ERR | CORE_EV_HUP | CORE_EV_IN | CORE_EV_RDHUP);
	assert_int_equal(recv_buf(pp.cli, b, sizeof(b), 0), 0);	/* EOF still, error kept */
	assert_int_equal(send_str(pp.cli, "again", 0), -SMCR_E_CORE_PIPE);
	assert_int_equal(core_conn_error(pp.cli), 0);	/* the send reported it */
	ev = core_conn_events(pp.cli);
	assert_int_equal(ev & (CORE_EV_ERR | CORE_EV_HUP), CORE_EV_HUP);
	assert_int_equal(send_str(pp.cli, "more", 0), -SMCR_E_CORE_PIPE);
	assert_int_equal(recv_buf(pp.cli, b, sizeof(b), 0), 0);
	core_conn_close(pp.cli, false, pp.now);
	cp_progress(&pp, 2);
	core_conn_info(pp.cli, &ci);
	assert_string_equal(ci.state, "CLOSED");
	assert_int_equal(ci.tcp_action, CORE_TCP_SHUTDOWN);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

static void test_abort_unread(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	struct cp_pair pp = { 0 };
	connect_smc(&pp, ce, se);
	char b[64];
	assert_int_equal(send_str(pp.cli, "unread", 0), 6);
	cp_progress(&pp, 2);
	/* docs/protocol/procedures.md 5.1: close with unread data sends A. */
	core_conn_close(pp.srv, false, pp.now);
	struct core_conn_info si, ci;
	core_conn_info(pp.srv, &si);
	assert_int_equal(si.tcp_action, CORE_TCP_RESET);
	cp_progress(&pp, 2);
	unsigned ev = core_conn_events(pp.cli);
	assert_true(ev & CORE_EV_ERR);
	assert_true(ev & CORE_EV_HUP);
	assert_int_equal(recv_buf(pp.cli, b, sizeof(b), 0), -SMCR_E_CORE_RESET);
	assert_int_equal(smcr_err_errno(-SMCR_E_CORE_RESET), ECONNRESET);
	assert_int_equal(recv_buf(pp.cli, b, sizeof(b), 0), 0);
	assert_int_equal(send_str(pp.cli, "x", 0), -SMCR_E_CORE_PIPE);
	core_conn_info(pp.cli, &ci);
	assert_string_equal(ci.state, "PROCESSABORT");
	/* The client's close answers with its own A; both finish. */
	core_conn_close(pp.cli, false, pp.now);
	cp_progress(&pp, 2);
	core_conn_info(pp.cli, &ci);
	core_conn_info(pp.srv, &si);
	assert_string_equal(ci.state, "CLOSED");
	assert_string_equal(si.state, "CLOSED");
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

static void test_linger0(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	struct cp_pair pp = { 0 };
	connect_smc(&pp, ce, se);
	char b[64];
	assert_int_equal(send_str(pp.cli, "before", 0), 6);
	core_conn_close(pp.cli, true, pp.now);	/* SO_LINGER 0 */
	cp_progress(&pp, 2);
	/* The data before the A is still delivered, then the reset. */
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), 6);
	assert_string_equal(b, "before");
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), -SMCR_E_CORE_RESET);
	assert_int_equal(send_str(pp.srv, "x", 0), -SMCR_E_CORE_PIPE);
	assert_int_equal(core_conn_error(pp.srv), 0);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

static void xfer_check(struct cp_pair *pp, struct core_conn *a, struct core_conn *b, size_t len)
{
	uint8_t *s = malloc(len), *r = malloc(len);
	cp_fill(s, len, len);
	assert_int_equal(cp_pump(pp, a, b, s, len, r, 65536), (long)len);
	assert_memory_equal(s, r, len);
	free(s);
	free(r);
}

static void test_reuse(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines_on("loop", &ce, &se, NULL);	/* counts the provider's SENDs */
	struct cp_pair p1 = { 0 }, p2 = { 0 }, p3 = { 0 };
	connect_smc(&p1, ce, se);
	struct core_conn_info c1, c2, c3, s2;
	core_conn_info(p1.cli, &c1);
	assert_true(c1.first_contact);

	/* A second connection while the first is open: same LG, a new RMB announced with
	 * CONFIRM RKEY before the CLC message (docs/protocol/procedures.md 2.7). */
	struct loopdev_stats before, after;
	loopdev_stats(&before);
	connect_smc(&p2, ce, se);
	loopdev_stats(&after);
	core_conn_info(p2.cli, &c2);
	core_conn_info(p2.srv, &s2);
	assert_false(c2.first_contact);
	assert_false(s2.first_contact);
	assert_int_equal(c2.lg_id, c1.lg_id);
	assert_true(c2.token_local != c1.token_local);
	/* two CONFIRM RKEY exchanges (server's RMB, client's RMB) = 4 SENDs */
	assert_int_equal(after.sends - before.sends, 4);
	xfer_check(&p2, p2.cli, p2.srv, 300000);
	xfer_check(&p1, p1.srv, p1.cli, 300000);

	/* Close the second; a third reuses its pooled RMB: no LLC message at all. */
	cp_close_both(&p2);
	cp_release(&p2);
	struct core_engine_stats st;
	core_engine_stats(ce, &st);
	assert_int_equal(st.rmbs, 2);
	loopdev_stats(&before);
	p3.now = p1.now;
	connect_smc(&p3, ce, se);
	loopdev_stats(&after);
	assert_int_equal(after.sends - before.sends, 0);
	core_conn_info(p3.cli, &c3);
	assert_int_equal(c3.lg_id, c1.lg_id);
	core_engine_stats(ce, &st);
	assert_int_equal(st.rmbs, 2);
	assert_int_equal(st.lgs, 1);
	/* The reused RMB was zeroed: reading shows only new data. */
	xfer_check(&p3, p3.cli, p3.srv, 70000);
	xfer_check(&p3, p3.srv, p3.cli, 70000);
	cp_close_both(&p3);
	cp_release(&p3);
	cp_close_both(&p1);
	cp_release(&p1);
	core_engine_free(ce);
	core_engine_free(se);
}

/* 1000 connections in sequence on one LG: no growth of LGs, RMBs or conn objects. */
static void test_sequential_1000(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	uint64_t now = S(1);
	for (int i = 0; i < 1000; i++) {
		struct cp_pair pp = { 0 };
		pp.now = now;
		connect_smc(&pp, ce, se);
		char b[16];
		assert_int_equal(send_str(pp.cli, "ping", 0), 4);
		cp_progress(&pp, 1);
		assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), 4);
		cp_close_both(&pp);
		cp_release(&pp);
		now = pp.now + 1000;
	}
	struct core_engine_stats cs, ss;
	core_engine_stats(ce, &cs);
	core_engine_stats(se, &ss);
	assert_int_equal(cs.lgs, 1);
	assert_int_equal(ss.lgs, 1);
	assert_int_equal(cs.rmbs, 1);
	assert_int_equal(ss.rmbs, 1);
	assert_int_equal(cs.conns, 0);
	assert_int_equal(ss.conns, 0);
	assert_int_equal(cs.conns_created, 1000);
	assert_int_equal(cs.conns_freed, 1000);
	assert_int_equal(cs.lgs_created, 1);
	core_engine_free(ce);
	core_engine_free(se);
}

/* docs/protocol/procedures.md 6: 255 connections per LG, the 256th makes a new LG (first
 * contact). */
static void test_255_per_lg(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	enum { N = 256 };
	struct cp_pair *pp = calloc(N, sizeof(*pp));
	struct core_conn_params cp, sp;
	cp_conn_params(&cp, CORE_CLIENT, 16384);
	cp_conn_params(&sp, CORE_SERVER, 16384);
	uint64_t now = S(1);
	uint32_t lg1 = 0;
	for (int i = 0; i < N; i++) {
		pp[i].now = now;
		assert_int_equal(cp_connect(&pp[i], ce, se, &cp, &sp, 50), 0);
		assert_int_equal(pp[i].rc.status, CORE_CLC_SMC);
		assert_int_equal(pp[i].rs.status, CORE_CLC_SMC);
		now = pp[i].now;
		struct core_conn_info ci;
		core_conn_info(pp[i].cli, &ci);
		assert_int_equal(ci.rmbe_size, 16384);
		if (i == 0)
			lg1 = ci.lg_id;
		if (i < 255) {
			assert_int_equal(ci.lg_id, lg1);
			assert_int_equal(ci.first_contact, i == 0);
		} else {
			assert_true(ci.lg_id != lg1);
			assert_true(ci.first_contact);
		}
	}
	struct core_engine_stats st;
	core_engine_stats(se, &st);
	assert_int_equal(st.lgs, 2);
	/* every connection still moves data */
	for (int i = 0; i < N; i += 17)
		xfer_check(&pp[i], pp[i].cli, pp[i].srv, 40000);
	for (int i = 0; i < N; i++) {
		pp[i].now = now;
		cp_close_both(&pp[i]);
		cp_release(&pp[i]);
	}
	free(pp);
	core_engine_free(ce);
	core_engine_free(se);
}

/* docs/protocol/procedures.md 3.8: an LG without connections is freed 600 s (server) / 610 s
 * (client) after its last connection ended, with DELETE LINK all + orderly. */
static void test_idle_lg(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	struct cp_pair pp = { 0 };
	connect_smc(&pp, ce, se);
	cp_close_both(&pp);
	cp_release(&pp);
	struct core_engine_stats cs, ss;
	uint64_t t0 = pp.now;
	pp.now = t0 + S(599);
	cp_progress(&pp, 2);
	core_engine_stats(se, &ss);
	assert_int_equal(ss.lgs, 1);
	uint64_t next = 0;
	core_engine_progress(se, pp.now, &next);
	assert_true(next <= t0 + S(600));
	pp.now = t0 + S(600);
	cp_progress(&pp, 2);
	/* The server's DELETE LINK all ends the client's LG too, before its own timer. */
	pp.now += S(3);	/* drain */
	cp_progress(&pp, 2);
	core_engine_stats(se, &ss);
	core_engine_stats(ce, &cs);
	assert_int_equal(ss.lgs, 0);
	assert_int_equal(cs.lgs, 0);
	assert_int_equal(ss.lgs_freed, 1);
	assert_int_equal(cs.lgs_freed, 1);
	/* A new connection makes a new LG. */
	struct cp_pair p2 = { 0 };
	p2.now = pp.now;
	connect_smc(&p2, ce, se);
	struct core_conn_info ci;
	core_conn_info(p2.cli, &ci);
	assert_true(ci.first_contact);
	cp_release(&p2);
	core_engine_free(ce);
	core_engine_free(se);
}

/* docs/protocol/procedures.md 4.6: urgent data as TCP presents it. */
static void test_urgent(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	struct cp_pair pp = { 0 };
	connect_smc(&pp, ce, se);
	char b[64];
	struct core_conn_info si;
	assert_int_equal(send_str(pp.cli, "ab", 0), 2);
	assert_int_equal(send_str(pp.cli, "cd", CORE_MSG_OOB), 2);	/* 'd' is urgent */
	cp_progress(&pp, 2);
	assert_true(core_conn_events(pp.srv) & CORE_EV_PRI);
	core_conn_info(pp.srv, &si);
	assert_int_equal(si.readable, 3);	/* the urgent byte is not in the stream */
	assert_false(si.at_mark);
	/* A read stops at the mark. */
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), 3);
	assert_string_equal(b, "abc");
	core_conn_info(pp.srv, &si);
	assert_true(si.at_mark);
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), CORE_MSG_OOB), 1);
	assert_int_equal(b[0], 'd');
	assert_false(core_conn_events(pp.srv) & CORE_EV_PRI);
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), CORE_MSG_OOB), -SMCR_E_CORE_OOB_INVAL);
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), -SMCR_E_AGAIN);
	assert_int_equal(send_str(pp.cli, "ef", 0), 2);
	cp_progress(&pp, 2);
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), 2);
	assert_string_equal(b, "ef");

	/* SO_OOBINLINE: the byte stays in the stream, reads still stop at the mark. */
	core_conn_set_oobinline(pp.srv, true);
	assert_int_equal(send_str(pp.cli, "gh", 0), 2);
	assert_int_equal(send_str(pp.cli, "i", CORE_MSG_OOB), 1);
	assert_int_equal(send_str(pp.cli, "jk", 0), 2);
	cp_progress(&pp, 2);
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), CORE_MSG_OOB), -SMCR_E_CORE_OOB_INVAL);
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), 2);
	assert_string_equal(b, "gh");
	core_conn_info(pp.srv, &si);
	assert_true(si.at_mark);
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), 3);
	assert_string_equal(b, "ijk");
	core_conn_info(pp.srv, &si);
	assert_false(si.at_mark);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

/* docs/protocol/procedures.md 3.5: TEST LINK after 30 s idle, answered; unanswered -> link down. */
static void test_testlink(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines_on("loop", &ce, &se, NULL);	/* counts the provider's SENDs */
	struct cp_pair pp = { 0 };
	connect_smc(&pp, ce, se);
	struct loopdev_stats a, b;
	loopdev_stats(&a);
	pp.now += S(31);
	cp_progress(&pp, 3);
	loopdev_stats(&b);
	assert_true(b.sends - a.sends >= 2);	/* request(s) and answer(s) */
	pp.now += S(3);
	cp_progress(&pp, 3);
	char buf[16];
	assert_int_equal(send_str(pp.cli, "still", 0), 5);
	cp_progress(&pp, 1);
	assert_int_equal(recv_buf(pp.srv, buf, sizeof(buf), 0), 5);

	/* Now the server stops answering (its engine is not progressed). */
	pp.now += S(31);
	core_engine_progress(ce, pp.now, NULL);	/* client sends TEST LINK */
	pp.now += S(2);
	core_engine_progress(ce, pp.now, NULL);	/* no answer within 2 s: link down */
	assert_true(core_conn_events(pp.cli) & CORE_EV_ERR);
	assert_int_equal(recv_buf(pp.cli, buf, sizeof(buf), 0), -SMCR_E_CORE_TIMEDOUT);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

/* A vanished peer (its device dies with it, as a killed process's): what it wrote and
 * announced is read, then the end its TCP connection gives (docs/parts/robust.md "Finding
 * 3"): FIN -> EOF, RST -> ECONNRESET; until then no end is shown (as TCP); never a hang
 * once the TCP side ended. Our own unread-by-the-peer bytes make it a reset at once. */
static void peer_death(bool rst, bool peer_unread)
{
	struct core_engine *ce = cp_engine("loop", NULL);
	struct core_engine *se = cp_engine("loop", NULL);
	struct dev_device *sdev = loopdev_last_opened();
	assert_non_null(sdev);
	struct cp_pair pp = { 0 };
	connect_smc(&pp, ce, se);
	assert_int_equal(send_str(pp.srv, "last!", 0), 5);
	cp_progress(&pp, 2);
	if (peer_unread) {
		assert_int_equal(send_str(pp.cli, "unread", 0), 6);
		cp_progress(&pp, 2);
	}
	loopdev_kill(sdev);
	core_engine_progress(ce, pp.now, NULL);
	char buf[8];
	assert_int_equal(recv_buf(pp.cli, buf, sizeof(buf), 0), 5);
	assert_memory_equal(buf, "last!", 5);
	if (peer_unread) {
		assert_true(core_conn_events(pp.cli) & CORE_EV_ERR);
		assert_int_equal(recv_buf(pp.cli, buf, sizeof(buf), 0), -SMCR_E_CORE_RESET);
	} else {
		unsigned ev = core_conn_events(pp.cli);
		assert_false(ev & (CORE_EV_IN | CORE_EV_ERR | CORE_EV_HUP));
		assert_int_equal(recv_buf(pp.cli, buf, sizeof(buf), 0), -SMCR_E_AGAIN);
		core_conn_tcp_event(pp.cli, rst, pp.now);
		ev = core_conn_events(pp.cli);
		assert_true(ev & CORE_EV_IN);
		assert_true(ev & CORE_EV_HUP);
		if (rst) {
			assert_true(ev & CORE_EV_ERR);
			assert_int_equal(recv_buf(pp.cli, buf, sizeof(buf), 0), -SMCR_E_CORE_RESET);
			assert_int_equal(smcr_err_errno(-SMCR_E_CORE_RESET), ECONNRESET);
		} else {
			assert_int_equal(recv_buf(pp.cli, buf, sizeof(buf), 0), 0);
		}
	}
	assert_int_equal(recv_buf(pp.cli, buf, sizeof(buf), 0), 0);
	assert_int_equal(send_str(pp.cli, "x", 0), -SMCR_E_CORE_PIPE);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

static void test_peer_death(void **state)
{
	(void)state;
	peer_death(false, false);
	peer_death(true, false);
	peer_death(false, true);
}

/* The peer's engine goes away: its DELETE LINK all resets our connections. */
static void test_engine_free(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	struct cp_pair pp = { 0 };
	connect_smc(&pp, ce, se);
	core_conn_release(pp.srv, pp.now);
	pp.srv = NULL;
	core_engine_free(se);
	pp.se = ce;
	core_engine_progress(ce, pp.now, NULL);
	char buf[8];
	long rc = recv_buf(pp.cli, buf, sizeof(buf), 0);
	assert_int_equal(smcr_err_errno((int)rc), ECONNRESET);
	cp_release(&pp);
	core_engine_free(ce);
}

/* sock saw a TCP RST on the hidden TCP socket: the connection aborts (A to the peer). */
static void test_tcp_rst(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	struct cp_pair pp = { 0 };
	connect_smc(&pp, ce, se);
	core_conn_tcp_event(pp.cli, false, pp.now);	/* FIN: only noted */
	assert_int_equal(core_conn_events(pp.cli) & CORE_EV_ERR, 0);
	core_conn_tcp_event(pp.cli, true, pp.now);
	unsigned ev = core_conn_events(pp.cli);
	assert_true(ev & CORE_EV_ERR);
	struct core_conn_info ci;
	core_conn_info(pp.cli, &ci);
	assert_int_equal(ci.tcp_action, CORE_TCP_RESET);
	assert_int_equal(core_conn_error(pp.cli), -SMCR_E_CORE_RESET);
	assert_int_equal(core_conn_error(pp.cli), 0);	/* SO_ERROR: once */
	cp_progress(&pp, 2);
	char b[8];
	assert_int_equal(recv_buf(pp.srv, b, sizeof(b), 0), -SMCR_E_CORE_RESET);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

/* Events are reported through the callback for peer-caused changes. */
struct evlog {
	unsigned raised, level, calls;
};

static void evcb(void *ctx, struct core_conn *c, unsigned level, unsigned raised)
{
	(void)c;
	struct evlog *l = ctx;
	l->raised |= raised;
	l->level = level;
	l->calls++;
}

static void test_callbacks(void **state)
{
	(void)state;
	struct core_engine *ce, *se;
	engines(&ce, &se, NULL);
	struct evlog lc = { 0 }, ls = { 0 };
	struct core_conn_params cp, sp;
	cp_conn_params(&cp, CORE_CLIENT, 0);
	cp_conn_params(&sp, CORE_SERVER, 0);
	cp.cb = evcb;
	cp.cb_ctx = &lc;
	sp.cb = evcb;
	sp.cb_ctx = &ls;
	struct cp_pair pp = { 0 };
	assert_int_equal(cp_connect(&pp, ce, se, &cp, &sp, 50), 0);
	/* The client's handshake finished in the background (CONFIRM LINK): CLC raised. */
	assert_true(lc.raised & CORE_EV_CLC);
	assert_true(ls.raised & CORE_EV_CLC);
	memset(&ls, 0, sizeof(ls));
	assert_int_equal(send_str(pp.cli, "x", 0), 1);
	cp_progress(&pp, 1);
	assert_true(ls.raised & CORE_EV_IN_NEW);
	assert_true(ls.level & CORE_EV_IN);
	unsigned calls = ls.calls;
	assert_int_equal(send_str(pp.cli, "y", 0), 1);
	cp_progress(&pp, 1);
	assert_int_equal(ls.calls, calls + 1);	/* a new edge per arrival */
	memset(&ls, 0, sizeof(ls));
	assert_int_equal(core_conn_shutdown(pp.cli, SHUT_WR, pp.now), 0);
	cp_progress(&pp, 1);
	assert_true(ls.raised & CORE_EV_RDHUP);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_half_close),
		cmocka_unit_test(test_peer_closed),
		cmocka_unit_test(test_abort_unread),
		cmocka_unit_test(test_linger0),
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_sequential_1000),
		cmocka_unit_test(test_255_per_lg),
		cmocka_unit_test(test_idle_lg),
		cmocka_unit_test(test_urgent),
		cmocka_unit_test(test_testlink),
		cmocka_unit_test(test_peer_death),
		cmocka_unit_test(test_engine_free),
		cmocka_unit_test(test_callbacks),
		cmocka_unit_test(test_tcp_rst),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
