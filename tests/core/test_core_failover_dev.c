/* test_core_failover_dev.c: failover on the real providers (docs/FAILOVER.md): two engines
 * in one process with two shm devices each (as SMCR_DEVICES="shm shm"), or two emu devices
 * each on loopback addresses (emulated RDMA over TCP), one connection on each
 * link, both streaming; mid-transfer the device of the client's second link is taken down
 * (dev_set_port_state: its QPs and their peers go to ERR, a port event follows). The
 * connection on it fails over to the other link and every byte of both streams arrives once,
 * in order (checked byte by byte against the generated stream). When the device comes up
 * again the client asks for a link and the group has two links again. shm completes in its
 * own device thread: real time passes, the engines' clock stands (no timer fires). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "dev/emu/emu.h"
#include "lib/twolink.h"
#include "util/clock.h"
#include "util/err.h"

struct stream {
	struct core_conn *tx, *rx;
	uint64_t seed, sent, got, total;
	uint8_t *sbuf, *rbuf;
};

static bool step(struct stream *s)
{
	bool moved = false;
	if (s->sent < s->total) {
		size_t w = s->total - s->sent < 65536 ? (size_t)(s->total - s->sent) : 65536;
		cp_stream_fill(s->sbuf, s->sent, w, s->seed);
		struct iovec v = { s->sbuf, w };
		long n = core_conn_send(s->tx, &v, 1, 0);
		if (n > 0) {
			s->sent += (uint64_t)n;
			moved = true;
		} else {
			assert_int_equal(n, -SMCR_E_AGAIN);
		}
	}
	int r = cp_stream_recv(s->rx, s->rbuf, 65536, &s->got, s->seed);
	assert_true(r >= 0);
	return moved || r > 0;
}

/* Runs the streams until all arrived or (if stop) the first has stop bytes received. */
static void run(struct tl_fix *f, struct stream *st, int n, uint64_t stop)
{
	uint64_t deadline = smcr_now_ns() + 60 * TL_SEC;
	for (;;) {
		bool moved = false, done = true;
		for (int i = 0; i < n; i++) {
			moved |= step(&st[i]);
			done &= st[i].got == st[i].total;
		}
		if (done || (stop && st[0].got >= stop))
			return;
		tl_at(f, f->now);
		if (!moved)
			usleep(50);
		assert_true(smcr_now_ns() < deadline);
	}
}

static void wait_links(struct tl_fix *f, unsigned want)
{
	uint64_t deadline = smcr_now_ns() + 10 * TL_SEC;
	while (tl_links(f->ce) != want || tl_links(f->se) != want) {
		tl_at(f, f->now);
		usleep(100);
		assert_true(smcr_now_ns() < deadline);
	}
}

static void device_down(const char *spec)
{
	struct tl_fix *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(tl_setup_spec(f, spec, 2, 2), 0);
	assert_true(tl_connect(f, 0));
	wait_links(f, 2);
	assert_true(tl_connect(f, 1));
	struct core_link *c2 = tl_lg(f->ce)->links[1];
	assert_ptr_equal(f->pp[1].cli->link, c2);
	assert_ptr_equal(f->pp[0].cli->link, tl_lg(f->ce)->links[0]);
	assert_ptr_not_equal(c2->cdev, tl_lg(f->ce)->links[0]->cdev);
	uint64_t total = cp_quick() ? (8u << 20) : (64u << 20);
	struct stream st[3] = {
		{ f->pp[1].cli, f->pp[1].srv, 1, 0, 0, total, NULL, NULL },
		{ f->pp[0].cli, f->pp[0].srv, 2, 0, 0, total, NULL, NULL },
		{ f->pp[1].srv, f->pp[1].cli, 3, 0, 0, total / 4, NULL, NULL },
	};
	for (int i = 0; i < 3; i++) {
		st[i].sbuf = malloc(65536);
		st[i].rbuf = malloc(65536);
		assert_non_null(st[i].sbuf);
		assert_non_null(st[i].rbuf);
	}
	run(f, st, 3, total / 4);	/* a quarter through: the device goes */
	struct dev_device *dev = c2->cdev->dev;
	assert_int_equal(dev_set_port_state(dev, 1, 0), 0);
	run(f, st, 3, 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(st[i].got, st[i].total);
		struct core_conn_info in;
		core_conn_info(st[i].tx, &in);
		assert_int_equal(in.bytes_sent, st[i].total);	/* nothing counted twice */
		assert_int_equal(in.lg_links, 1);
	}
	assert_ptr_equal(f->pp[1].cli->link, tl_lg(f->ce)->links[0]);
	struct core_engine_stats sc, ss;
	core_engine_stats(f->ce, &sc);
	core_engine_stats(f->se, &ss);
	assert_int_equal(sc.failovers, 1);
	assert_int_equal(ss.failovers, 1);
	/* the flush completion or the port event, whichever the client saw first */
	assert_int_equal(sc.failover_reason[CORE_DOWN_EVENT] + sc.failover_reason[CORE_DOWN_WC], 1);
	/* the device is back: the client asks, the server adds the link again */
	assert_int_equal(dev_set_port_state(dev, 1, 1), 0);
	wait_links(f, 2);
	core_engine_stats(f->se, &ss);
	assert_int_equal(ss.links_added, 2);
	/* a new connection goes on the new link and works */
	assert_true(tl_connect(f, 2));
	struct stream s3 = { f->pp[2].cli, f->pp[2].srv, 4, 0, 0, 1u << 20, st[0].sbuf, st[0].rbuf };
	run(f, &s3, 1, 0);
	for (int i = 0; i < 3; i++) {
		free(st[i].sbuf);
		free(st[i].rbuf);
	}
	tl_teardown(f);
	free(f);
}

static void test_shm_device_down(void **state)
{
	(void)state;
	device_down("shm");
}

/* emu: each open of a prefix spec is a new device on a free loopback address (emu.h), all on
 * one random high port */
static void test_emu_device_down(void **state)
{
	(void)state;
	assert_int_equal(dev_emu_register(), 0);	/* again: 0 */
	char spec[64];
	snprintf(spec, sizeof(spec), "emu:ip=127.0.0.0/8,port=%u",
		 20000u + (unsigned)(smcr_now_ns() / 1000 + (uint64_t)getpid()) % 40000u);
	device_down(spec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shm_device_down),
		cmocka_unit_test(test_emu_device_down),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
