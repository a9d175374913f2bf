/* test_core_data.c: the data path between two engines in one process (docs/protocol/procedures.md
 * 4): every write size 1..4096, large transfers with random write and read sizes in both
 * directions at once, the window (RMBE full -> AGAIN -> window update), iovecs, MSG_PEEK,
 * over both transmit paths: staged (provider inline 128 bytes, shm-like) and direct inline
 * WRITEs from the caller's buffer (provider inline 1 MiB), on the in-process loop provider
 * and on the shm provider. Single-threaded, time passed in. */
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

struct fix {
	const char *spec;
	struct core_engine *ce, *se;
	struct cp_pair pp;
};

static int setup_spec(void **state, const char *spec)
{
	struct fix *f = calloc(1, sizeof(*f));
	f->spec = spec;
	if (cp_engines(spec, &f->ce, &f->se) || !cp_connect_smc(&f->pp, f->ce, f->se))
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

/* Sends exactly len bytes of stream seed at off from tx, reads them at rx, checks them. */
static void xfer_exact(struct fix *f, struct core_conn *tx, struct core_conn *rx, uint64_t off,
		       size_t len, uint64_t seed)
{
	static uint8_t sbuf[8192], rbuf[8192];
	assert_true(len <= sizeof(sbuf));
	cp_stream_fill(sbuf, off, len, seed);
	size_t sent = 0, got = 0;
	int spins = 0;
	while (got < len) {
		if (sent < len) {
			struct iovec v = { sbuf + sent, len - sent };
			long n = core_conn_send(tx, &v, 1, 0);
			if (n > 0)
				sent += (size_t)n;
			else
				assert_int_equal(n, -SMCR_E_AGAIN);
		}
		cp_progress(&f->pp, 1);
		struct iovec r = { rbuf + got, sizeof(rbuf) - got };
		long m = core_conn_recv(rx, &r, 1, 0);
		if (m > 0)
			got += (size_t)m;
		else
			assert_int_equal(m, -SMCR_E_AGAIN);
		assert_true(++spins < 100000);
	}
	assert_int_equal(got, len);
	assert_int_equal(cp_stream_check(rbuf, off, len, seed), -1);
}

static void test_every_size(void **state)
{
	struct fix *f = *state;
	uint64_t off_cs = 0, off_sc = 0;
	for (size_t s = 1; s <= 4096; s++) {
		xfer_exact(f, f->pp.cli, f->pp.srv, off_cs, s, 11);
		off_cs += s;
		xfer_exact(f, f->pp.srv, f->pp.cli, off_sc, s, 12);
		off_sc += s;
	}
	struct core_conn_info ci;
	core_conn_info(f->pp.cli, &ci);
	assert_int_equal(ci.bytes_sent, off_cs);
	assert_int_equal(ci.bytes_received, off_sc);
	/* The rings wrapped many times: 8 MiB through 64 KiB. */
	assert_true(ci.tx_prod.wrap > 100);
}

/* One direction of a bidirectional random transfer. */
struct dir {
	struct core_conn *tx, *rx;
	uint64_t total, sent, got, seed;
	uint64_t base;
	size_t blen;
	uint8_t *sbuf, *rbuf;
};

#define BUF (1u << 20)

static void dir_step(struct dir *d, uint64_t *rng)
{
	if (d->sent < d->total) {
		/* write sizes 1 B .. 1 MiB, skewed towards small ones */
		size_t size = 1 + (size_t)(cp_rand(rng) % (1u << (cp_rand(rng) % 21)));
		if (size > d->total - d->sent)
			size = (size_t)(d->total - d->sent);
		if (!(d->base <= d->sent && d->sent + size <= d->base + d->blen)) {
			d->base = d->sent;
			d->blen = d->total - d->sent < BUF ? (size_t)(d->total - d->sent) : BUF;
			cp_stream_fill(d->sbuf, d->base, d->blen, d->seed);
			if (size > d->blen)
				size = d->blen;
		}
		/* sometimes as a 3-piece iovec */
		long n;
		uint8_t *p = d->sbuf + (d->sent - d->base);
		if (size >= 3 && (cp_rand(rng) & 3) == 0) {
			size_t a = size / 3, b = size / 3;
			struct iovec v[3] = { { p, a }, { p + a, b }, { p + a + b, size - a - b } };
			n = core_conn_send(d->tx, v, 3, 0);
		} else {
			struct iovec v = { p, size };
			n = core_conn_send(d->tx, &v, 1, 0);
		}
		if (n > 0)
			d->sent += (uint64_t)n;
		else
			assert_int_equal(n, -SMCR_E_AGAIN);
	}
	size_t want = 1 + (size_t)(cp_rand(rng) % (1u << (cp_rand(rng) % 21)));
	if (want > BUF)
		want = BUF;
	struct iovec r = { d->rbuf, want };
	long m = core_conn_recv(d->rx, &r, 1, 0);
	if (m > 0) {
		long bad = cp_stream_check(d->rbuf, d->got, (size_t)m, d->seed);
		if (bad >= 0)
			fail_msg("mismatch at stream offset %llu", (unsigned long long)(d->got + (uint64_t)bad));
		d->got += (uint64_t)m;
	} else {
		assert_int_equal(m, -SMCR_E_AGAIN);
	}
}

static void test_random_both_ways(void **state)
{
	struct fix *f = *state;
	uint64_t total = cp_quick() ? (16u << 20) : (128u << 20);
	struct dir d[2] = {
		{ .tx = f->pp.cli, .rx = f->pp.srv, .total = total, .seed = 21 },
		{ .tx = f->pp.srv, .rx = f->pp.cli, .total = total, .seed = 22 },
	};
	for (int i = 0; i < 2; i++) {
		d[i].sbuf = malloc(BUF);
		d[i].rbuf = malloc(BUF);
		d[i].base = UINT64_MAX;
	}
	uint64_t rng = 0x1234567;
	unsigned long rounds = 0;
	while (d[0].got < total || d[1].got < total) {
		dir_step(&d[0], &rng);
		dir_step(&d[1], &rng);
		cp_progress(&f->pp, 1);
		assert_true(++rounds < 50000000ul);
	}
	for (int i = 0; i < 2; i++) {
		free(d[i].sbuf);
		free(d[i].rbuf);
	}
	struct core_conn_info ci, si;
	core_conn_info(f->pp.cli, &ci);
	core_conn_info(f->pp.srv, &si);
	assert_int_equal(ci.bytes_sent, total);
	assert_int_equal(si.bytes_received, total);
	assert_int_equal(si.bytes_sent, total);
	assert_int_equal(ci.bytes_received, total);
	/* Both sides idle again: nothing unread, nothing unacknowledged after a last update. */
	assert_int_equal(ci.readable, 0);
	assert_int_equal(si.readable, 0);
}

/* docs/protocol/procedures.md 4.3/4.5 with the send ring (docs/parts/sndbuf.md): the writer fills
 * the peer's RMBE exactly and then its own ring (64 KiB by default), gets AGAIN (B on the wire),
 * and the reader's window update (after reading more than 10 %) lets the engine write the
 * freed space from the ring, which makes room for the writer again. */
static void test_window(void **state)
{
	struct fix *f = *state;
	static uint8_t big[256 * 1024];
	cp_stream_fill(big, 0, sizeof(big), 31);
	struct iovec v = { big, sizeof(big) };
	long n = core_conn_send(f->pp.cli, &v, 1, 0);
	/* staged providers cut a send at 64 KiB: keep sending until AGAIN */
	long total = 0;
	while (n > 0) {
		total += n;
		cp_progress(&f->pp, 1);
		v.iov_base = big + total;
		v.iov_len = sizeof(big) - (size_t)total;
		n = core_conn_send(f->pp.cli, &v, 1, 0);
	}
	assert_int_equal(n, -SMCR_E_AGAIN);
	struct core_conn_info ci;
	core_conn_info(f->pp.cli, &ci);
	assert_int_equal(ci.sndbuf_size, CORE_SNDBUF_DEFAULT);
	assert_int_equal(total, 65536 + CORE_SNDBUF_DEFAULT);
	assert_int_equal(ci.sndbuf_queued, CORE_SNDBUF_DEFAULT);
	assert_int_equal(ci.unacked, 65536);
	assert_false(core_conn_events(f->pp.cli) & CORE_EV_OUT);
	cp_progress(&f->pp, 2);
	struct core_conn_info si;
	core_conn_info(f->pp.srv, &si);
	assert_int_equal(si.readable, 65536);
	assert_int_equal(si.rx_peer_prod.wrap, 1);
	assert_int_equal(si.rx_peer_prod.count, 0);

	/* Read 1000 bytes: below the 10 % limit, no update goes out. */
	static uint8_t rb[65536];
	struct iovec r = { rb, 1000 };
	assert_int_equal(core_conn_recv(f->pp.srv, &r, 1, 0), 1000);
	cp_progress(&f->pp, 2);
	assert_false(core_conn_events(f->pp.cli) & CORE_EV_OUT);
	core_conn_info(f->pp.cli, &ci);
	assert_int_equal(ci.sndbuf_queued, CORE_SNDBUF_DEFAULT);
	/* Read up to 10000 (> 6553): the update is due; the ring fills the freed space. The
	 * ring is still more than 2/3 full: no POLLOUT yet (TCP's rule, sndbuf.md). */
	r.iov_base = rb + 1000;
	r.iov_len = 9000;
	assert_int_equal(core_conn_recv(f->pp.srv, &r, 1, 0), 9000);
	cp_progress(&f->pp, 2);
	assert_false(core_conn_events(f->pp.cli) & CORE_EV_OUT);
	core_conn_info(f->pp.cli, &ci);
	assert_int_equal(ci.writable, 0);
	assert_int_equal(ci.unacked, 65536);
	assert_int_equal(ci.sndbuf_queued, CORE_SNDBUF_DEFAULT - 10000);
	assert_int_equal(cp_stream_check(rb, 0, 10000, 31), -1);

	/* MSG_PEEK copies without consuming. */
	uint8_t pk[16];
	r.iov_base = pk;
	r.iov_len = sizeof(pk);
	assert_int_equal(core_conn_recv(f->pp.srv, &r, 1, CORE_MSG_PEEK), 16);
	assert_int_equal(cp_stream_check(pk, 10000, 16, 31), -1);
	core_conn_info(f->pp.srv, &si);
	assert_int_equal(si.readable, 65536 - 10000 + 10000);

	/* Everything arrives, in order: the rest of the RMBE, then what the ring held. */
	uint64_t got = 10000;
	int spins = 0;
	while (got < (uint64_t)total) {
		r.iov_base = rb;
		r.iov_len = sizeof(rb);
		long m = core_conn_recv(f->pp.srv, &r, 1, 0);
		if (m > 0) {
			assert_int_equal(cp_stream_check(rb, got, (size_t)m, 31), -1);
			got += (uint64_t)m;
		} else {
			assert_int_equal(m, -SMCR_E_AGAIN);
		}
		cp_progress(&f->pp, 1);
		assert_true(++spins < 10000);
	}
	core_conn_info(f->pp.cli, &ci);
	assert_int_equal(ci.sndbuf_queued, 0);
	assert_int_equal(got, (uint64_t)total);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_every_size, setup_staged, teardown),
		cmocka_unit_test_setup_teardown(test_every_size, setup_inline, teardown),
		cmocka_unit_test_setup_teardown(test_random_both_ways, setup_staged, teardown),
		cmocka_unit_test_setup_teardown(test_random_both_ways, setup_inline, teardown),
		cmocka_unit_test_setup_teardown(test_window, setup_staged, teardown),
		cmocka_unit_test_setup_teardown(test_window, setup_inline, teardown),
		/* the same over the same-host shared-memory provider */
		cmocka_unit_test_setup_teardown(test_every_size, setup_shm, teardown),
		cmocka_unit_test_setup_teardown(test_random_both_ways, setup_shm, teardown),
		cmocka_unit_test_setup_teardown(test_window, setup_shm, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
