/* test_core_hostile.c: the engine against a hand-driven peer (tests/lib/fake_peer) that
 * sends what a broken or hostile SMC-R stack might: bad and backward cursors, unknown tokens,
 * stale sequence numbers, data after "sending done", out-of-order and malformed LLC
 * messages, CONFIRM LINK without the no-eyecatcher flags. Every CDC/LLC must be validated
 * before it changes state (docs/design/engine-decisions.md "A hostile peer"); the engine survives,
 * aborts only what it must, and never writes outside the RMBE it was given (checked with guard
 * areas). */
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
#include "lib/fake_peer.h"
#include "wire/cdc.h"
#include "wire/clc.h"
#include "wire/llc.h"

#define T0 1000000000ull

struct fx {
	struct core_engine *e;
	struct fake_peer fp;
	struct core_conn *c;
	uint64_t now;
};

static struct core_clc_result step(struct core_conn *c, const void *in, size_t len, uint64_t now)
{
	struct core_clc_result r;
	assert_int_equal(core_conn_clc_step(c, in, len, false, now, &r), 0);
	return r;
}

/* Engine client <-> fake server handshake up to the CONFIRM LINK. */
static struct core_clc_result handshake(struct fx *x, size_t mem, size_t off, uint8_t code,
					uint8_t cl_flags)
{
	x->now = T0;
	/* The fake peer and these steps assume a synchronous provider: loop. */
	x->e = cp_engine("loop", NULL);
	assert_non_null(x->e);
	assert_int_equal(fp_open(&x->fp, "loop", mem, off, code), 0);
	struct core_conn_params p;
	cp_conn_params(&p, CORE_CLIENT, 0);
	assert_int_equal(core_conn_new(x->e, &p, &x->c), 0);
	struct core_clc_result r = step(x->c, NULL, 0, x->now);
	assert_int_equal(r.out_len, CLC_PROPOSAL_LINUX_LEN);
	uint8_t acc[68];
	assert_int_equal(fp_accept(&x->fp, acc), 0);
	r = step(x->c, acc, sizeof(acc), x->now);
	assert_int_equal(r.status, CORE_CLC_WAIT_LINK);
	assert_int_equal(fp_confirm(&x->fp, r.out, r.out_len, cl_flags), 0);
	core_engine_progress(x->e, x->now, NULL);
	return step(x->c, NULL, 0, x->now);
}

static void setup_smc(struct fx *x)
{
	struct core_clc_result r = handshake(x, 65536, 0, 2, 0x03);
	assert_int_equal(r.status, CORE_CLC_SMC);
	uint8_t m[8][44];
	int n = fp_recv(&x->fp, m, 8);
	assert_int_equal(n, 1);
	assert_int_equal(m[0][0], LLC_CONFIRM_LINK);
	assert_int_equal(m[0][3], 0x83);	/* response + no eyecatchers */
	assert_int_equal(m[0][29], 1);		/* the link number we assigned, adopted */
}

static void done(struct fx *x)
{
	core_conn_release(x->c, x->now);
	core_engine_progress(x->e, x->now + 10 * T0, NULL);
	core_engine_free(x->e);
	fp_close(&x->fp);
}

static void progress(struct fx *x) { core_engine_progress(x->e, x->now, NULL); }

/* The engine's A after an abort: a CDC with flag A, to the fake's token. */
static void expect_abort_cdc(struct fx *x)
{
	uint8_t m[8][44];
	int n = fp_recv(&x->fp, m, 8);
	bool seen = false;
	for (int i = 0; i < n; i++) {
		struct cdc_msg c;
		if (m[i][0] == CDC_TYPE && cdc_decode(m[i], 44, &c) == 0 && c.cf.abort) {
			assert_int_equal(c.token, x->fp.token);
			seen = true;
		}
	}
	assert_true(seen);
}

static long rd(struct core_conn *c, char *b, size_t n)
{
	struct iovec v = { b, n };
	return core_conn_recv(c, &v, 1, 0);
}

static void test_rmbe_eyecatcher(void **state)
{
	(void)state;
	struct fx x;
	struct core_clc_result r = handshake(&x, 65536, 0, 2, 0x00);
	/* docs/protocol/wire-formats.md 6.2: no 0x03 flags -> Decline RMBE_EC, fallback. */
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	struct clc_msg m;
	assert_int_equal(clc_decode(r.out, r.out_len, &m), 0);
	assert_int_equal(m.decline.diag, 0x03050000);
	done(&x);
}

static void test_good_cdc_then_backwards(void **state)
{
	(void)state;
	struct fx x;
	setup_smc(&x);
	assert_int_equal(fp_write(&x.fp, 0, "hello", 5), 0);
	assert_int_equal(fp_cdc(&x.fp, 1, 0, (struct curs){ 0, 5 }, (struct curs){ 0, 0 }, 0, 0), 0);
	progress(&x);
	char b[16] = { 0 };
	assert_int_equal(rd(x.c, b, sizeof(b)), 5);
	assert_string_equal(b, "hello");
	/* producer cursor going backwards with a newer sequence number */
	assert_int_equal(fp_cdc(&x.fp, 2, 0, (struct curs){ 0, 3 }, (struct curs){ 0, 0 }, 0, 0), 0);
	progress(&x);
	assert_true(core_conn_events(x.c) & CORE_EV_ERR);
	assert_int_equal(rd(x.c, b, sizeof(b)), -SMCR_E_CORE_BAD_CURSOR);
	assert_int_equal(smcr_err_errno(-SMCR_E_CORE_BAD_CURSOR), ECONNRESET);
	expect_abort_cdc(&x);
	struct core_engine_stats st;
	core_engine_stats(x.e, &st);
	assert_int_equal(st.cdc_rx_dropped, 1);
	done(&x);
}

static void one_bad_cdc(struct curs prod, struct curs cons, uint8_t cf_first)
{
	struct fx x;
	setup_smc(&x);
	if (cf_first) {
		assert_int_equal(fp_cdc(&x.fp, 1, 0, (struct curs){ 0, 0 }, (struct curs){ 0, 0 }, 0,
					cf_first), 0);
		progress(&x);
		assert_false(core_conn_events(x.c) & CORE_EV_ERR);
	}
	assert_int_equal(fp_cdc(&x.fp, 2, 0, prod, cons, 0, 0), 0);
	progress(&x);
	assert_true(core_conn_events(x.c) & CORE_EV_ERR);
	expect_abort_cdc(&x);
	done(&x);
}

static void test_bad_cursors(void **state)
{
	(void)state;
	/* count beyond the ring */
	one_bad_cdc((struct curs){ 0, 65536 }, (struct curs){ 0, 0 }, 0);
	/* more than the ring ahead of what we consumed (we read nothing) */
	one_bad_cdc((struct curs){ 1, 1 }, (struct curs){ 0, 0 }, 0);
	/* several laps ahead */
	one_bad_cdc((struct curs){ 7, 0 }, (struct curs){ 0, 0 }, 0);
	/* consumer cursor beyond what we wrote (nothing) */
	one_bad_cdc((struct curs){ 0, 0 }, (struct curs){ 0, 100 }, 0);
	/* data after "sending done" */
	one_bad_cdc((struct curs){ 0, 10 }, (struct curs){ 0, 0 }, CDC_CF_DONE_WRITING);
}

static void test_unknown_token_and_stale_seq(void **state)
{
	(void)state;
	struct fx x;
	setup_smc(&x);
	/* a token that names no connection: dropped, the connection is untouched */
	assert_int_equal(fp_cdc(&x.fp, 1, 0xDEAD00 | 1, (struct curs){ 0, 10 }, (struct curs){ 0, 0 }, 0, 0), 0);
	assert_int_equal(fp_cdc(&x.fp, 1, 0x7, (struct curs){ 0, 10 }, (struct curs){ 0, 0 }, 0, 0), 0);
	progress(&x);
	struct core_conn_info in;
	core_conn_info(x.c, &in);
	assert_int_equal(in.readable, 0);
	assert_int_equal(in.error, 0);
	struct core_engine_stats st;
	core_engine_stats(x.e, &st);
	assert_int_equal(st.cdc_rx_dropped, 2);
	/* sequence numbers: 5 taken, then an older 4 dropped, an equal 5 processed again */
	assert_int_equal(fp_write(&x.fp, 0, "0123456789", 10), 0);
	assert_int_equal(fp_cdc(&x.fp, 5, 0, (struct curs){ 0, 5 }, (struct curs){ 0, 0 }, 0, 0), 0);
	assert_int_equal(fp_cdc(&x.fp, 4, 0, (struct curs){ 0, 10 }, (struct curs){ 0, 0 }, 0, 0), 0);
	progress(&x);
	core_conn_info(x.c, &in);
	assert_int_equal(in.readable, 5);
	assert_int_equal(fp_cdc(&x.fp, 5, 0, (struct curs){ 0, 8 }, (struct curs){ 0, 0 }, 0, 0), 0);
	progress(&x);
	core_conn_info(x.c, &in);
	assert_int_equal(in.readable, 8);
	/* a malformed CDC (length byte) is dropped */
	uint8_t bad[44] = { CDC_TYPE, 43 };
	assert_int_equal(fp_send(&x.fp, bad), 0);
	progress(&x);
	core_conn_info(x.c, &in);
	assert_int_equal(in.error, 0);
	char b[16] = { 0 };
	assert_int_equal(rd(x.c, b, sizeof(b)), 8);
	assert_string_equal(b, "01234567");
	done(&x);
}

static int recv_llc(struct fx *x, uint8_t out[44], uint8_t type)
{
	uint8_t m[8][44];
	int n = fp_recv(&x->fp, m, 8);
	for (int i = 0; i < n; i++) {
		if (m[i][0] == type) {
			memcpy(out, m[i], 44);
			return 1;
		}
	}
	return 0;
}

static void test_llc_requests(void **state)
{
	(void)state;
	struct fx x;
	setup_smc(&x);
	uint8_t r[44];
	/* TEST LINK: echoed with the response flag (docs/protocol/procedures.md 3.5) */
	uint8_t tl[44] = { LLC_TEST_LINK, 44, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
	assert_int_equal(fp_send(&x.fp, tl), 0);
	progress(&x);
	assert_int_equal(recv_llc(&x, r, LLC_TEST_LINK), 1);
	tl[3] = 0x80;
	assert_memory_equal(r, tl, 44);
	/* ADD LINK naming the existing link's own port (GID and MAC) to a client with one
	 * device: no second path to build, so rejected as Linux does (request echoed, byte 2 =
	 * 1, byte 3 = 0xC0; docs/protocol/procedures.md 3.2) */
	struct llc_msg al = { .type = LLC_ADD_LINK };
	struct dev_gid_entry ge;
	assert_int_equal(dev_query_gid(x.fp.dev, 1, 0, &ge), 0);
	memcpy(al.add_link.mac.b, ge.mac, 6);
	memcpy(al.add_link.gid.b, ge.gid.raw, 16);
	al.add_link.qpn = 0x99;
	al.add_link.link_num = 2;
	al.add_link.mtu = 3;
	al.add_link.psn = 0x4444;
	uint8_t alb[44], want[44];
	assert_int_equal(llc_encode(&al, alb), 0);
	assert_int_equal(fp_send(&x.fp, alb), 0);
	progress(&x);
	assert_int_equal(recv_llc(&x, r, LLC_ADD_LINK), 1);
	llc_add_link_reject_raw(alb, 1, want);
	assert_memory_equal(r, want, 44);
	assert_int_equal(r[2], 1);
	assert_int_equal(r[3], 0xC0);
	/* CONFIRM RKEY: accepted, echoed */
	struct llc_msg cr = { .type = LLC_CONFIRM_RKEY };
	cr.confirm_rkey.rkey = 0x1234;
	cr.confirm_rkey.vaddr = 0x7f0000001000ull;
	uint8_t crb[44];
	assert_int_equal(llc_encode(&cr, crb), 0);
	assert_int_equal(fp_send(&x.fp, crb), 0);
	progress(&x);
	assert_int_equal(recv_llc(&x, r, LLC_CONFIRM_RKEY), 1);
	crb[3] = 0x80;
	assert_memory_equal(r, crb, 44);
	/* DELETE RKEY: the one just confirmed is known, 0xBAD is not -> error mask 0x40 */
	struct llc_msg dr = { .type = LLC_DELETE_RKEY };
	dr.delete_rkey.count = 2;
	dr.delete_rkey.rkey[0] = 0x1234;
	dr.delete_rkey.rkey[1] = 0xBAD;
	uint8_t drb[44];
	assert_int_equal(llc_encode(&dr, drb), 0);
	assert_int_equal(fp_send(&x.fp, drb), 0);
	progress(&x);
	assert_int_equal(recv_llc(&x, r, LLC_DELETE_RKEY), 1);
	struct llc_msg d;
	assert_int_equal(llc_decode(r, 44, &d), 0);
	assert_true(d.resp);
	assert_true(d.delete_rkey.negative);
	assert_int_equal(d.delete_rkey.err_mask, 0x40);
	/* unknown type 0x05, a v2 type, a bad length byte: dropped silently */
	uint8_t u[44] = { 0x05, 44 };
	assert_int_equal(fp_send(&x.fp, u), 0);
	u[0] = 0x21;
	assert_int_equal(fp_send(&x.fp, u), 0);
	uint8_t badlen[44] = { LLC_TEST_LINK, 40 };
	assert_int_equal(fp_send(&x.fp, badlen), 0);
	progress(&x);
	assert_int_equal(fp_recv(&x.fp, (uint8_t (*)[44])r, 1), 0);
	struct core_engine_stats st;
	core_engine_stats(x.e, &st);
	assert_int_equal(st.llc_rx_dropped, 3);
	assert_int_equal(core_conn_events(x.c) & CORE_EV_ERR, 0);
	/* the connection still works */
	assert_int_equal(fp_write(&x.fp, 0, "ok", 2), 0);
	assert_int_equal(fp_cdc(&x.fp, 1, 0, (struct curs){ 0, 2 }, (struct curs){ 0, 0 }, 0, 0), 0);
	progress(&x);
	char b[8] = { 0 };
	assert_int_equal(rd(x.c, b, sizeof(b)), 2);
	done(&x);
}

/* Out-of-order LLC (docs/protocol/procedures.md 3.1): the LG is terminated with DELETE LINK all,
 * reason "protocol violation", and its connections are reset. */
static void violation(const uint8_t msg[44])
{
	struct fx x;
	setup_smc(&x);
	assert_int_equal(fp_send(&x.fp, msg), 0);
	progress(&x);
	assert_true(core_conn_events(x.c) & CORE_EV_ERR);
	uint8_t m[8][44];
	int n = fp_recv(&x.fp, m, 8);
	bool del = false, abrt = false;
	for (int i = 0; i < n; i++) {
		if (m[i][0] == LLC_DELETE_LINK) {
			struct llc_msg d;
			assert_int_equal(llc_decode(m[i], 44, &d), 0);
			assert_true(d.delete_link.all);
			assert_int_equal(d.delete_link.reason, LLC_DEL_PROT_VIOL);
			del = true;
		}
		if (m[i][0] == CDC_TYPE && (m[i][25] & CDC_CF_ABORT))
			abrt = true;
	}
	assert_true(del);
	assert_true(abrt);
	char b[4];
	assert_int_equal(rd(x.c, b, sizeof(b)), -SMCR_E_CORE_LLC_VIOLATION);
	done(&x);
}

static void test_llc_out_of_order(void **state)
{
	(void)state;
	struct llc_msg m = { .type = LLC_ADD_LINK_CONT };
	m.add_link_cont.link_num = 2;
	m.add_link_cont.num_rkeys = 1;
	uint8_t b[44];
	assert_int_equal(llc_encode(&m, b), 0);
	violation(b);	/* ADD LINK CONTINUATION without an ADD LINK */
	struct llc_msg cl = { .type = LLC_CONFIRM_LINK };
	cl.confirm_link.no_eyec = 3;
	cl.confirm_link.link_num = 1;
	cl.confirm_link.max_links = 2;
	assert_int_equal(llc_encode(&cl, b), 0);
	violation(b);	/* CONFIRM LINK request on an active link */
}

static void test_delete_link_all(void **state)
{
	(void)state;
	struct fx x;
	setup_smc(&x);
	struct llc_msg m = { .type = LLC_DELETE_LINK };
	m.delete_link.all = true;
	m.delete_link.orderly = true;
	m.delete_link.reason = LLC_DEL_PROG_INIT_TERM;
	uint8_t b[44];
	assert_int_equal(llc_encode(&m, b), 0);
	assert_int_equal(fp_send(&x.fp, b), 0);
	progress(&x);
	assert_true(core_conn_events(x.c) & CORE_EV_HUP);
	char c[4];
	assert_int_equal(smcr_err_errno((int)rd(x.c, c, sizeof(c))), ECONNRESET);
	/* no response to a delete-all */
	uint8_t r[44];
	assert_int_equal(recv_llc(&x, r, LLC_DELETE_LINK), 0);
	progress(&x);
	struct core_engine_stats st;
	core_engine_progress(x.e, x.now + 5 * T0, NULL);
	core_engine_stats(x.e, &st);
	assert_int_equal(st.lgs, 0);
	done(&x);
}

/* The engine writes only inside the RMBE it was told about: the fake advertises a 16 KiB
 * element in the middle of a 64 KiB registered region; the rest must stay untouched while a
 * stream of data wraps the ring many times. */
static void test_writes_stay_inside(void **state)
{
	(void)state;
	struct fx x;
	struct core_clc_result r = handshake(&x, 65536, 16384, 0, 0x03);
	assert_int_equal(r.status, CORE_CLC_SMC);
	uint8_t dummy[8][44];
	(void)fp_recv(&x.fp, dummy, 8);
	uint8_t *mem = x.fp.mem->addr;
	memset(mem, 0xA5, 16384);
	memset(mem + 32768, 0x5A, 32768);
	struct core_conn_info in;
	core_conn_info(x.c, &in);
	assert_int_equal(in.peer_rmbe_size, 16384);
	uint64_t total = 1 << 20, sent = 0, seq = 1;
	uint8_t buf[7000], chk[7000];
	while (x.fp.rx_cons < total) {
		if (sent < total) {
			size_t n = total - sent < sizeof(buf) ? (size_t)(total - sent) : sizeof(buf);
			cp_stream_fill(buf, sent, n, 5);
			struct iovec v = { buf, n };
			long k = core_conn_send(x.c, &v, 1, 0);
			if (k > 0)
				sent += (uint64_t)k;
		}
		progress(&x);
		/* the fake reads what the last CDC announced */
		uint8_t m[8][44];
		int n = fp_recv(&x.fp, m, 8);
		for (int i = 0; i < n; i++) {
			struct cdc_msg c;
			if (m[i][0] != CDC_TYPE || cdc_decode(m[i], 44, &c))
				continue;
			uint64_t lo = x.fp.rx_cons, hi = lo + 16384, prod = UINT64_MAX;
			for (uint64_t lap = lo / 16384; lap <= hi / 16384; lap++) {
				uint64_t y = lap * 16384 + c.prod.count;
				if ((uint16_t)lap == c.prod.wrap && y >= lo && y <= hi) {
					prod = y;
					break;
				}
			}
			assert_true(prod != UINT64_MAX);
			uint64_t len = prod - x.fp.rx_cons;
			for (uint64_t k = 0; k < len; k += sizeof(chk)) {
				size_t piece = len - k < sizeof(chk) ? (size_t)(len - k) : sizeof(chk);
				for (size_t j = 0; j < piece; j++)
					chk[j] = fp_rmbe(&x.fp)[(x.fp.rx_cons + k + j) % 16384];
				assert_int_equal(cp_stream_check(chk, x.fp.rx_cons + k, piece, 5), -1);
			}
			x.fp.rx_cons += len;
			struct curs cons = { (uint16_t)(x.fp.rx_cons / 16384), (uint32_t)(x.fp.rx_cons % 16384) };
			assert_int_equal(fp_cdc(&x.fp, (uint16_t)seq++, 0, (struct curs){ 0, 0 }, cons, 0, 0), 0);
		}
	}
	for (size_t i = 0; i < 16384; i++)
		assert_int_equal(mem[i], 0xA5);
	for (size_t i = 32768; i < 65536; i++)
		assert_int_equal(mem[i], 0x5A);
	done(&x);
}

/* The peer's QP vanishes (process killed): our next send fails, the connection resets. */
static void test_peer_vanishes(void **state)
{
	(void)state;
	struct fx x;
	setup_smc(&x);
	assert_int_equal(dev_destroy_qp(x.fp.qp), 0);
	x.fp.qp = NULL;
	struct iovec v = { "data", 4 };
	assert_int_equal(core_conn_send(x.c, &v, 1, 0), 4);
	progress(&x);
	assert_true(core_conn_events(x.c) & CORE_EV_ERR);
	char b[4];
	assert_int_equal(smcr_err_errno((int)rd(x.c, b, sizeof(b))), ECONNRESET);
	done(&x);
}

/* docs/protocol/procedures.md 4.3/4.5: B on the wire when our data does not fit the peer's free
 * space; R from the peer gets a consumer-cursor CDC even below the 10 % threshold. */
static void test_b_and_r_flags(void **state)
{
	(void)state;
	struct fx x;
	struct core_clc_result r = handshake(&x, 65536, 0, 0, 0x03);	/* 16 KiB RMBE */
	assert_int_equal(r.status, CORE_CLC_SMC);
	uint8_t m[8][44];
	(void)fp_recv(&x.fp, m, 8);
	static uint8_t big[20000];
	struct iovec v = { big, sizeof(big) };
	/* 16384 written into the peer's RMBE, the rest into our send ring (sndbuf.md) */
	assert_int_equal(core_conn_send(x.c, &v, 1, 0), 20000);
	struct core_conn_info ci;
	core_conn_info(x.c, &ci);
	assert_int_equal(ci.sndbuf_queued, 20000 - 16384);
	int n = fp_recv(&x.fp, m, 8);
	assert_int_equal(n, 1);
	struct cdc_msg c;
	assert_int_equal(cdc_decode(m[0], 44, &c), 0);
	assert_true(c.pf.write_blocked);
	assert_int_equal(c.prod.wrap, 1);
	assert_int_equal(c.prod.count, 0);
	/* The peer's R: our next CDC carries our consumer cursor, though we read only 5 bytes. */
	assert_int_equal(fp_write(&x.fp, 0, "hello", 5), 0);
	assert_int_equal(fp_cdc(&x.fp, 1, 0, (struct curs){ 0, 5 }, (struct curs){ 0, 0 }, 0, 0), 0);
	progress(&x);
	char b[8];
	assert_int_equal(rd(x.c, b, sizeof(b)), 5);
	assert_int_equal(fp_recv(&x.fp, m, 8), 0);	/* below the threshold: no update */
	assert_int_equal(fp_cdc(&x.fp, 2, 0, (struct curs){ 0, 5 }, (struct curs){ 0, 0 },
				CDC_PF_CONS_UPD_REQ, 0), 0);
	progress(&x);
	n = fp_recv(&x.fp, m, 8);
	assert_int_equal(n, 1);
	assert_int_equal(cdc_decode(m[0], 44, &c), 0);
	assert_int_equal(c.cons.count, 5);
	done(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rmbe_eyecatcher),
		cmocka_unit_test(test_good_cdc_then_backwards),
		cmocka_unit_test(test_bad_cursors),
		cmocka_unit_test(test_unknown_token_and_stale_seq),
		cmocka_unit_test(test_llc_requests),
		cmocka_unit_test(test_llc_out_of_order),
		cmocka_unit_test(test_delete_link_all),
		cmocka_unit_test(test_writes_stay_inside),
		cmocka_unit_test(test_peer_vanishes),
		cmocka_unit_test(test_b_and_r_flags),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
