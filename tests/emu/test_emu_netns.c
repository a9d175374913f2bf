/* test_emu_netns.c: the emu provider across two network namespaces joined by a veth pair
 * that the test makes itself (tests/lib/emu_netns.h; needs root, else it is skipped with
 * exit code 77 and a message). Devices are opened from this one process with netns=, so
 * every frame crosses the veth. Covers: addressing by interface (GID = the veth address),
 * traffic both ways, the port following the interface's link state (down: PORT_ERR and QPs
 * to ERR on both devices; up: PORT_ACTIVE and new QPs work), and a stall across the link. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dev/emu/emu.h"
#include "emu_harness.h"
#include "lib/emu_netns.h"

#define ACC (DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE)

static struct emu_netns ns;

static struct dev_device *open_side(int side, const char *extra)
{
	char spec[200];
	snprintf(spec, sizeof spec, "emu:netns=%s,if=%s%s", ns.ns[side], ns.ifname[side], extra);
	return eh_open(spec);
}

static void ping(struct eh_side *x, struct eh_side *y, uint8_t tag)
{
	struct dev_wc wc;
	memset(x->mem->addr, tag, 512);
	eh_post_recv(y, 1, 2048, 64);
	eh_post_send(x, DEV_WR_RDMA_WRITE, 2, 0, 512, y, 1024, 0);
	eh_post_send(x, DEV_WR_SEND, 3, 0, 44, NULL, 0, DEV_SEND_SIGNALED);
	assert_int_equal(eh_poll(y->rcq, &wc, 5000), 1);
	assert_int_equal(wc.status, DEV_WC_SUCCESS);
	assert_int_equal(wc.byte_len, 44);
	for (int i = 0; i < 512; i++)
		assert_int_equal(((uint8_t *)y->mem->addr)[1024 + i], tag);
	assert_int_equal(eh_poll(x->scq, &wc, 5000), 1);
	assert_int_equal(wc.status, DEV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 3);
}

static void test_addressing_and_traffic(void **state)
{
	(void)state;
	struct dev_device *a = open_side(0, ""), *b = open_side(1, "");
	struct dev_gid_entry g;
	assert_int_equal(dev_query_gid(a, 1, 0, &g), 0);
	/* if= without ip=: the interface's first IPv4 address, IPv4-mapped. */
	const uint8_t want[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 88, 0, 1 };
	assert_memory_equal(g.gid.raw, want, 16);
	static const uint8_t zero[6];
	assert_memory_not_equal(g.mac, zero, 6);	/* the veth's MAC */
	struct dev_port_attr pa;
	assert_int_equal(dev_query_port(a, 1, &pa), 0);
	assert_int_equal(pa.state, DEV_PORT_ACTIVE);
	assert_int_equal(pa.active_mtu, DEV_MTU_1024);	/* veth MTU 1500 */
	/* The same spec again in the same namespace: the same device. */
	struct dev_device *a2 = open_side(0, "");
	assert_ptr_equal(a2, a);
	dev_close(a2);

	for (int order = 0; order < 2; order++) {
		struct eh_side x, y;
		eh_side_init(&x, a, 64 * 1024, ACC);
		eh_side_init(&y, b, 64 * 1024, ACC);
		if (order)
			eh_connect(&y, &x);
		else
			eh_connect(&x, &y);
		ping(&x, &y, 0x41);
		ping(&y, &x, 0x42);
		eh_side_fini(&x);
		eh_side_fini(&y);
	}
	dev_close(a);
	dev_close(b);
}

static void test_link_down_up(void **state)
{
	(void)state;
	struct dev_device *a = open_side(0, ",ip=10.88.0.2"), *b = open_side(1, ",ip=10.88.0.102");
	struct eh_side x, y;
	eh_side_init(&x, a, 4096, ACC);
	eh_side_init(&y, b, 4096, ACC);
	eh_connect(&x, &y);
	ping(&x, &y, 1);
	eh_post_recv(&x, 9, 0, 16);

	/* b's end goes down: b loses its link, and a its carrier. */
	assert_int_equal(emu_netns_link(&ns, 1, 0), 0);
	assert_true(eh_event(b, DEV_EVENT_PORT_ERR, 0, 3000));
	assert_true(eh_event(a, DEV_EVENT_PORT_ERR, 0, 3000));
	assert_true(eh_event(a, DEV_EVENT_QP_FATAL, x.qp->qp_num, 3000));
	assert_true(eh_event(b, DEV_EVENT_QP_FATAL, y.qp->qp_num, 3000));
	assert_int_equal(eh_state(x.qp), DEV_QPS_ERR);
	assert_int_equal(eh_state(y.qp), DEV_QPS_ERR);
	struct dev_port_attr pa;
	assert_int_equal(dev_query_port(a, 1, &pa), 0);
	assert_int_equal(pa.state, DEV_PORT_DOWN);
	struct dev_wc wc;
	assert_int_equal(eh_poll(x.rcq, &wc, 1000), 1);
	assert_int_equal(wc.wr_id, 9);
	assert_int_equal(wc.status, DEV_WC_WR_FLUSH_ERR);
	eh_side_fini(&x);
	eh_side_fini(&y);

	/* Up again: PORT_ACTIVE on both, and new QPs work. */
	assert_int_equal(emu_netns_link(&ns, 1, 1), 0);
	assert_true(eh_event(a, DEV_EVENT_PORT_ACTIVE, 0, 3000));
	assert_true(eh_event(b, DEV_EVENT_PORT_ACTIVE, 0, 3000));
	eh_side_init(&x, a, 4096, ACC);
	eh_side_init(&y, b, 4096, ACC);
	eh_connect(&y, &x);
	ping(&y, &x, 2);
	eh_side_fini(&x);
	eh_side_fini(&y);
	dev_close(a);
	dev_close(b);
}

static void test_stall_across(void **state)
{
	(void)state;
	struct dev_device *a = open_side(0, ",ip=10.88.0.3"), *b = open_side(1, ",ip=10.88.0.103");
	struct eh_side x, y;
	eh_side_init(&x, a, 4096, ACC);
	eh_side_init(&y, b, 4096, ACC);
	eh_qp_init(&x, ACC);
	eh_qp_init(&y, ACC);
	eh_qp_rtr(&x, &y);
	eh_qp_rtr(&y, &x);
	eh_qp_rts(&x, 13, 3, 7);	/* 33.5 ms x 4: 134 ms */
	eh_qp_rts(&y, 13, 3, 7);
	ping(&x, &y, 5);
	assert_int_equal(dev_emu_qp_stall(y.qp, 1), 0);
	uint64_t t0 = eh_now_ms();
	eh_post_send(&x, DEV_WR_RDMA_WRITE, 7, 0, 16, &y, 0, DEV_SEND_SIGNALED);
	struct dev_wc wc;
	assert_int_equal(eh_poll(x.scq, &wc, 3000), 1);
	assert_int_equal(wc.status, DEV_WC_RETRY_EXC_ERR);
	uint64_t dt = eh_now_ms() - t0;
	assert_true(dt >= 120); /* not before the retries (the poll above bounds it: 3 s) */
	assert_true(eh_wait_state(y.qp, DEV_QPS_ERR, 2000));
	eh_side_fini(&x);
	eh_side_fini(&y);
	dev_close(a);
	dev_close(b);
}

int main(void)
{
	char why[200];
	/* Before any thread exists: setup forks the cleanup watchdog. */
	if (emu_netns_setup(&ns, why, sizeof why) != 0) {
		printf("SKIP: test_emu_netns: %s\n", why);
		return 77;
	}
	assert_int_equal(dev_emu_register(), 0);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_addressing_and_traffic),
		cmocka_unit_test(test_link_down_up),
		cmocka_unit_test(test_stall_across),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	emu_netns_teardown(&ns);
	return rc;
}
