/* test_core_sndbuf.c: the send ring, corking and close ordering of the engine
 * (docs/parts/sndbuf.md; docs/protocol/procedures.md 4.1, 4.3, 4.6, 5.1) between two engines in one
 * process with a fake clock, so every rule is checked deterministically:
 *   - the size rule (power of two, 16 KiB floor, 1 MiB cap, 64 KiB default);
 *   - a writer fills the peer's RMBE, then the ring, then gets AGAIN; the ring is written as
 *     the reader makes room; later sends never overtake it; everything arrives in order;
 *   - CORE_MSG_MORE holds bytes (nothing reaches the peer) until a send without it, a
 *     zero-length send / core_conn_flush, the push threshold (half of min(ring, peer RMBE)),
 *     or the 200 ms ceiling (progress at +199 ms: still held; at +200 ms: pushed);
 *   - D and C go only after every queued byte (the reader sees all data, then EOF); sends
 *     after shutdown fail with EPIPE while the D waits; an abort drops the ring; a peer that
 *     never makes room gets an A close_wait_ns after close;
 *   - an urgent byte queued behind the ring is announced when the ring reaches it.
 * Runs on the loop provider (staged and big-inline transmit paths) and on shm. */
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
#include "util/err.h"

struct fix {
	struct core_engine *ce, *se;
	struct cp_pair pp;
};

static int setup_spec(void **state, const char *spec)
{
	struct fix *f = calloc(1, sizeof(*f));
	if (cp_engines(spec, &f->ce, &f->se))
		return -1;
	/* 64 KiB RMBEs and 64 KiB rings on both sides (the defaults, spelled out) */
	struct core_conn_params cp, sp;
	cp_conn_params(&cp, CORE_CLIENT, 65536);
	cp_conn_params(&sp, CORE_SERVER, 65536);
	cp.sndbuf = sp.sndbuf = 65536;
	if (!cp_connect_smc_with(&f->pp, f->ce, f->se, &cp, &sp))
		return -1;
	*state = f;
	return 0;
}

static int setup_staged(void **state) { return setup_spec(state, "loop"); }
static int setup_inline(void **state) { return setup_spec(state, "loop:inline=1048576"); }
static int setup_shm(void **state) { return setup_spec(state, "shm"); }

static int teardown(void **state)
{
	struct fix *f = *state;
	cp_release(&f->pp);
	cp_engines_free(f->ce, f->se);
	free(f);
	return 0;
}

static struct core_conn_info info(struct core_conn *c)
{
	struct core_conn_info i;
	core_conn_info(c, &i);
	return i;
}

static long send1(struct core_conn *c, const void *p, size_t n, unsigned flags)
{
	struct iovec v = { (void *)(uintptr_t)p, n };
	return core_conn_send(c, &v, 1, flags);
}

/* Sends stream bytes [off, off+n) of seed 41; returns what was accepted. */
static long send_stream(struct core_conn *c, uint64_t off, size_t n, unsigned flags)
{
	static uint8_t b[1 << 20];
	assert_true(n <= sizeof(b));
	cp_stream_fill(b, off, n, 41);
	return send1(c, b, n, flags);
}

/* Reads everything the reader can get (progressing both engines) until it has `until`
 * bytes in all or nothing moves for a while; checks them against the stream. */
static uint64_t read_stream(struct fix *f, struct core_conn *rx, uint64_t got, uint64_t until)
{
	static uint8_t b[65536];
	int idle = 0;
	while (got < until && idle < 50) {
		cp_progress(&f->pp, 1);
		struct iovec r = { b, sizeof(b) };
		long m = core_conn_recv(rx, &r, 1, 0);
		if (m > 0) {
			assert_int_equal(cp_stream_check(b, got, (size_t)m, 41), -1);
			got += (uint64_t)m;
			idle = 0;
		} else {
			assert_int_equal(m, -SMCR_E_AGAIN);
			idle++;
		}
	}
	cp_progress(&f->pp, 2);	/* the last window update reaches the writer */
	return got;
}

/* Fills the peer's RMBE and the ring with stream bytes; returns how many were accepted. */
static uint64_t fill_at(struct fix *f, uint64_t off)
{
	uint64_t total = 0;
	for (;;) {
		long n = send_stream(f->pp.cli, off + total, 40000, 0);
		if (n == -SMCR_E_AGAIN)
			break;
		assert_true(n > 0);
		total += (uint64_t)n;
		cp_progress(&f->pp, 1);
	}
	return total;
}

static uint64_t fill(struct fix *f) { return fill_at(f, 0); }

/* ---- size rule (no connection needed beyond creation) ---- */

static void test_size_rule(void **state)
{
	struct fix *f = *state;
	static const struct { uint32_t set, ring; } cases[] = {
		{ 0, 65536 },	      { 1, 16384 },	  { 16384, 16384 },  { 16385, 32768 },
		{ 100000, 131072 },   { 262144, 262144 }, { 5u << 20, 1u << 20 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct core_conn_params p;
		cp_conn_params(&p, CORE_CLIENT, 0);
		p.sndbuf = cases[i].set;
		struct core_conn *c = NULL;
		assert_int_equal(core_conn_new(f->ce, &p, &c), 0);
		assert_int_equal(info(c).sndbuf_size, cases[i].ring);
		core_conn_release(c, f->pp.now);
	}
}

/* ---- ring fill, drain, order ---- */

static void test_fill_and_drain(void **state)
{
	struct fix *f = *state;
	uint64_t total = fill(f);
	struct core_conn_info ci = info(f->pp.cli);
	assert_int_equal(total, 65536 + 65536);	/* peer RMBE + ring */
	assert_int_equal(ci.sndbuf_queued, 65536);
	assert_int_equal(ci.unacked, 65536);
	assert_true(ci.sndbuf_held);
	uint64_t pooled = core_ring_pool_bytes();
	assert_false(core_conn_events(f->pp.cli) & CORE_EV_OUT);
	assert_int_equal(send_stream(f->pp.cli, total, 1, 0), -SMCR_E_AGAIN);
	/* the reader takes all: the ring is written as room appears, in order */
	uint64_t got = read_stream(f, f->pp.srv, 0, total);
	assert_int_equal(got, total);
	ci = info(f->pp.cli);
	assert_int_equal(ci.sndbuf_queued, 0);
	/* empty: the ring went back to the process's list (ringpool.c) */
	assert_false(ci.sndbuf_held);
	assert_int_equal(core_ring_pool_bytes(), pooled + 65536);
	assert_true(core_conn_events(f->pp.cli) & CORE_EV_OUT);
	/* with the ring empty a send that fits goes straight to the peer (no staging) */
	assert_int_equal(send_stream(f->pp.cli, total, 1000, 0), 1000);
	assert_int_equal(info(f->pp.cli).sndbuf_queued, 0);
	assert_false(info(f->pp.cli).sndbuf_held);
	assert_int_equal(read_stream(f, f->pp.srv, got, total + 1000), total + 1000);
	got = total += 1000;
	/* the next fill takes a ring from the list again, and every byte still arrives */
	uint64_t more = fill_at(f, total);
	/* (the last 1000 bytes read made no window update: below the 10 % rule) */
	assert_true(more > 65536 && more <= 65536 + 65536);
	assert_true(info(f->pp.cli).sndbuf_held);
	assert_int_equal(core_ring_pool_bytes(), pooled);
	assert_int_equal(read_stream(f, f->pp.srv, got, total + more), total + more);
	assert_false(info(f->pp.cli).sndbuf_held);
}

/* CORE_EV_OUT (POLLOUT) follows the ring as TCP's follows its send buffer: on while the
 * ring is at most 2/3 full (free >= queued / 2), raised when it gets there again. */
static void test_out_threshold(void **state)
{
	struct fix *f = *state;
	uint64_t total = fill(f);
	assert_false(core_conn_events(f->pp.cli) & CORE_EV_OUT);
	static uint8_t b[65536];
	uint64_t got = 0;
	/* read in 8000-byte steps: each one makes a window update due (> 10 %), the ring moves
	 * 8000 more into the peer; OUT comes when queued <= 43690 (64 KiB * 2/3) */
	bool seen = false;
	while (got < total && !seen) {
		struct iovec r = { b, 8000 };
		long m = core_conn_recv(f->pp.srv, &r, 1, 0);
		assert_true(m > 0);
		assert_int_equal(cp_stream_check(b, got, (size_t)m, 41), -1);
		got += (uint64_t)m;
		cp_progress(&f->pp, 2);
		struct core_conn_info ci = info(f->pp.cli);
		bool out = core_conn_events(f->pp.cli) & CORE_EV_OUT;
		assert_int_equal(out, 2ull * (65536 - ci.sndbuf_queued) >= ci.sndbuf_queued);
		seen = out;
	}
	assert_true(seen);
	assert_true(info(f->pp.cli).sndbuf_queued <= 43690);
	assert_true(info(f->pp.cli).sndbuf_queued > 43690 - 8000 - 6554);
	assert_int_equal(read_stream(f, f->pp.srv, got, total), total);
}

/* Sends interleaved with partial reads: a send made while the ring holds bytes goes
 * behind them even when the peer has room at that moment. */
static void test_no_overtaking(void **state)
{
	struct fix *f = *state;
	uint64_t total = fill(f);
	uint64_t got = 0;
	static uint8_t b[20000];
	for (int round = 0; round < 20; round++) {
		/* read a little: room opens in the peer while the ring still holds bytes */
		struct iovec r = { b, 7000 + (size_t)round * 100 };
		long m = core_conn_recv(f->pp.srv, &r, 1, 0);
		if (m > 0) {
			assert_int_equal(cp_stream_check(b, got, (size_t)m, 41), -1);
			got += (uint64_t)m;
		}
		long n = send_stream(f->pp.cli, total, 3000, 0);
		if (n > 0)
			total += (uint64_t)n;
		cp_progress(&f->pp, 1);
	}
	assert_int_equal(read_stream(f, f->pp.srv, got, total), total);
}

/* ---- corking ---- */

static void test_more_holds_until_plain_send(void **state)
{
	struct fix *f = *state;
	for (int i = 0; i < 10; i++)
		assert_int_equal(send_stream(f->pp.cli, (uint64_t)i * 100, 100, CORE_MSG_MORE), 100);
	cp_progress(&f->pp, 3);
	struct core_conn_info ci = info(f->pp.cli);
	assert_true(ci.corked);
	assert_int_equal(ci.sndbuf_queued, 1000);
	assert_int_equal(ci.bytes_sent, 0);
	assert_int_equal(info(f->pp.srv).readable, 0);
	assert_true(core_conn_events(f->pp.cli) & CORE_EV_OUT);
	/* a send without MORE pushes everything, in order */
	assert_int_equal(send_stream(f->pp.cli, 1000, 50, 0), 50);
	cp_progress(&f->pp, 2);
	assert_false(info(f->pp.cli).corked);
	assert_int_equal(info(f->pp.srv).readable, 1050);
	assert_int_equal(read_stream(f, f->pp.srv, 0, 1050), 1050);
}

static void test_zero_send_and_flush_push(void **state)
{
	struct fix *f = *state;
	assert_int_equal(send_stream(f->pp.cli, 0, 300, CORE_MSG_MORE), 300);
	/* a zero-length send WITH more keeps holding */
	assert_int_equal(core_conn_send(f->pp.cli, NULL, 0, CORE_MSG_MORE), 0);
	cp_progress(&f->pp, 2);
	assert_int_equal(info(f->pp.srv).readable, 0);
	/* without: pushes (sock's uncork before core_conn_flush existed) */
	assert_int_equal(core_conn_send(f->pp.cli, NULL, 0, 0), 0);
	cp_progress(&f->pp, 2);
	assert_int_equal(info(f->pp.srv).readable, 300);
	assert_int_equal(send_stream(f->pp.cli, 300, 200, CORE_MSG_MORE), 200);
	cp_progress(&f->pp, 2);
	assert_int_equal(info(f->pp.srv).readable, 300);
	assert_int_equal(core_conn_flush(f->pp.cli), 0);
	cp_progress(&f->pp, 2);
	assert_int_equal(info(f->pp.srv).readable, 500);
	assert_int_equal(read_stream(f, f->pp.srv, 0, 500), 500);
}

static void test_cork_threshold(void **state)
{
	struct fix *f = *state;
	/* threshold = min(ring 64 KiB, peer RMBE 64 KiB) / 2 = 32768 */
	uint64_t off = 0;
	for (int i = 0; i < 32; i++) {
		assert_int_equal(send_stream(f->pp.cli, off, 1000, CORE_MSG_MORE), 1000);
		off += 1000;
	}
	cp_progress(&f->pp, 2);
	assert_int_equal(info(f->pp.srv).readable, 0);	/* 32000 < 32768: held */
	assert_int_equal(send_stream(f->pp.cli, off, 1000, CORE_MSG_MORE), 1000);
	off += 1000;
	cp_progress(&f->pp, 2);
	assert_int_equal(info(f->pp.srv).readable, 33000);	/* crossed: pushed */
	assert_false(info(f->pp.cli).corked);
	/* a corked send as big as the threshold goes out at once (the direct path) */
	assert_int_equal(read_stream(f, f->pp.srv, 0, off), off);
	assert_int_equal(send_stream(f->pp.cli, off, 40000, CORE_MSG_MORE), 40000);
	assert_int_equal(info(f->pp.cli).sndbuf_queued, 0);
	cp_progress(&f->pp, 2);
	assert_int_equal(info(f->pp.srv).readable, 40000);
}

static void test_cork_ceiling(void **state)
{
	struct fix *f = *state;
	uint64_t t0 = f->pp.now;
	uint64_t timer = 0;
	static const char msg[] = "held for at most 200 ms";
	struct iovec v = { (void *)(uintptr_t)msg, sizeof(msg) };
	assert_int_equal(core_conn_send_at(f->pp.cli, &v, 1, CORE_MSG_MORE, t0, &timer),
			 (long)sizeof(msg));
	assert_int_equal(timer, t0 + CORE_CORK_NS);
	/* more held bytes do not move the deadline */
	uint64_t timer2 = 0;
	assert_int_equal(core_conn_send_at(f->pp.cli, &v, 1, CORE_MSG_MORE, t0 + 1000, &timer2),
			 (long)sizeof(msg));
	assert_int_equal(timer2, UINT64_MAX);
	uint64_t next = 0;
	core_engine_progress(f->ce, t0, &next);
	assert_true(next <= t0 + CORE_CORK_NS);
	f->pp.now = t0 + CORE_CORK_NS - 1000000;	/* +199 ms */
	cp_progress(&f->pp, 3);
	assert_int_equal(info(f->pp.srv).readable, 0);
	f->pp.now = t0 + CORE_CORK_NS;			/* +200 ms: the ceiling */
	cp_progress(&f->pp, 3);
	assert_int_equal(info(f->pp.srv).readable, 2 * sizeof(msg));
	char b[2 * sizeof(msg)];
	struct iovec r = { b, sizeof(b) };
	assert_int_equal(core_conn_recv(f->pp.srv, &r, 1, 0), (long)sizeof(b));
	assert_memory_equal(b, msg, sizeof(msg));
	assert_memory_equal(b + sizeof(msg), msg, sizeof(msg));
}

/* MSG_MORE behind bytes that wait only for room: they are not held back (nor the new ones:
 * they go with them), so no time passes and everything arrives. */
static void test_more_behind_pushed_bytes(void **state)
{
	struct fix *f = *state;
	uint64_t total = 0;
	while (total < 65536 + 5000) {
		long n = send_stream(f->pp.cli, total, 65536 + 5000 - (size_t)total, 0);
		assert_true(n > 0);
		total += (uint64_t)n;
	}
	assert_int_equal(info(f->pp.cli).sndbuf_queued, 5000);
	assert_int_equal(send_stream(f->pp.cli, total, 100, CORE_MSG_MORE), 100);
	total += 100;
	assert_false(info(f->pp.cli).corked);
	assert_int_equal(read_stream(f, f->pp.srv, 0, total), total);	/* same fake time */
}

/* ---- close ordering ---- */

static void test_shutdown_after_queued(void **state)
{
	struct fix *f = *state;
	uint64_t total = fill(f);
	assert_int_equal(core_conn_shutdown(f->pp.cli, SHUT_WR, f->pp.now), 0);
	struct core_conn_info ci = info(f->pp.cli);
	assert_true(ci.close_pending);
	assert_int_equal(ci.sndbuf_queued, 65536);
	/* the write side is done for the program at once (EPIPE, as after TCP's SHUT_WR) */
	assert_int_equal(send1(f->pp.cli, "x", 1, 0), -SMCR_E_CORE_PIPE);
	cp_progress(&f->pp, 3);
	/* the D has not gone out: the reader sees data, no end yet */
	assert_false(core_conn_events(f->pp.srv) & CORE_EV_RDHUP);
	uint64_t got = read_stream(f, f->pp.srv, 0, total);
	assert_int_equal(got, total);
	cp_progress(&f->pp, 3);
	assert_true(core_conn_events(f->pp.srv) & CORE_EV_RDHUP);
	char b[4];
	struct iovec r = { b, sizeof(b) };
	assert_int_equal(core_conn_recv(f->pp.srv, &r, 1, 0), 0);	/* EOF after all bytes */
	assert_false(info(f->pp.cli).close_pending);
	/* the other direction still works */
	assert_int_equal(send1(f->pp.srv, "back", 4, 0), 4);
	cp_progress(&f->pp, 2);
	assert_int_equal(core_conn_recv(f->pp.cli, &r, 1, 0), 4);
}

static void test_close_after_queued(void **state)
{
	struct fix *f = *state;
	uint64_t total = fill(f);
	core_conn_close(f->pp.cli, false, f->pp.now);
	struct core_conn_info ci = info(f->pp.cli);
	assert_true(ci.close_pending);
	assert_int_equal(ci.tcp_action, CORE_TCP_SHUTDOWN);
	assert_int_equal(read_stream(f, f->pp.srv, 0, total), total);
	cp_progress(&f->pp, 3);
	char b[4];
	struct iovec r = { b, sizeof(b) };
	assert_int_equal(core_conn_recv(f->pp.srv, &r, 1, 0), 0);
	assert_string_equal(info(f->pp.cli).state, "PEERCLOSEWAIT1");
	core_conn_close(f->pp.srv, false, f->pp.now);
	cp_progress(&f->pp, 3);
	assert_string_equal(info(f->pp.cli).state, "CLOSED");
	assert_string_equal(info(f->pp.srv).state, "CLOSED");
}

static void test_abort_drops_ring(void **state)
{
	struct fix *f = *state;
	(void)fill(f);
	core_conn_close(f->pp.cli, true, f->pp.now);	/* SO_LINGER 0 */
	struct core_conn_info ci = info(f->pp.cli);
	assert_int_equal(ci.sndbuf_queued, 0);
	assert_false(ci.close_pending);
	assert_int_equal(ci.tcp_action, CORE_TCP_RESET);
	cp_progress(&f->pp, 3);
	/* the reader gets what reached its RMBE before the A, then the reset */
	static uint8_t b[65536];
	struct iovec r = { b, sizeof(b) };
	long got = 0, m;
	while ((m = core_conn_recv(f->pp.srv, &r, 1, 0)) > 0)
		got += m;
	assert_int_equal(got, 65536);
	assert_int_equal(m, -SMCR_E_CORE_RESET);
}

static void test_close_gives_up(void **state)
{
	struct fix *f = *state;
	(void)fill(f);
	core_conn_close(f->pp.cli, false, f->pp.now);
	uint64_t t0 = f->pp.now;
	f->pp.now = t0 + CORE_CLOSE_WAIT_NS - 1000000;
	cp_progress(&f->pp, 2);
	assert_true(info(f->pp.cli).close_pending);
	f->pp.now = t0 + CORE_CLOSE_WAIT_NS;
	cp_progress(&f->pp, 3);
	struct core_conn_info ci = info(f->pp.cli);
	assert_false(ci.close_pending);
	assert_int_equal(ci.sndbuf_queued, 0);
	assert_int_equal(ci.tcp_action, CORE_TCP_RESET);
	/* the peer, which never read, sees the A */
	assert_true(core_conn_events(f->pp.srv) & CORE_EV_ERR);
}

/* ---- urgent byte behind the ring ---- */

static void test_urgent_behind_ring(void **state)
{
	struct fix *f = *state;
	/* fill the peer's RMBE and part of the ring */
	uint64_t total = 0;
	while (total < 65536 + 1000) {
		long n = send_stream(f->pp.cli, total, 65536 + 1000 - (size_t)total, 0);
		assert_true(n > 0);
		total += (uint64_t)n;
	}
	assert_int_equal(info(f->pp.cli).sndbuf_queued, 1000);
	assert_int_equal(send1(f->pp.cli, "!", 1, CORE_MSG_OOB), 1);
	assert_int_equal(info(f->pp.cli).sndbuf_queued, 1001);
	cp_progress(&f->pp, 2);
	char u;
	struct iovec ru = { &u, 1 };
	/* not announced yet: the urgent byte is still in our ring */
	assert_int_not_equal(core_conn_recv(f->pp.srv, &ru, 1, CORE_MSG_OOB), 1);
	assert_int_equal(read_stream(f, f->pp.srv, 0, total), total);
	cp_progress(&f->pp, 2);
	assert_true(core_conn_events(f->pp.srv) & CORE_EV_PRI);
	assert_int_equal(core_conn_recv(f->pp.srv, &ru, 1, CORE_MSG_OOB), 1);
	assert_int_equal(u, '!');
}

#define T(fn)                                                          \
	cmocka_unit_test_setup_teardown(fn, setup_staged, teardown),   \
	cmocka_unit_test_setup_teardown(fn, setup_inline, teardown),   \
	cmocka_unit_test_setup_teardown(fn, setup_shm, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_size_rule, setup_staged, teardown),
		T(test_fill_and_drain),
		T(test_no_overtaking),
		T(test_out_threshold),
		T(test_more_holds_until_plain_send),
		T(test_zero_send_and_flush_push),
		T(test_cork_threshold),
		T(test_cork_ceiling),
		T(test_more_behind_pushed_bytes),
		T(test_shutdown_after_queued),
		T(test_close_after_queued),
		T(test_abort_drops_ring),
		T(test_close_gives_up),
		T(test_urgent_behind_ring),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
