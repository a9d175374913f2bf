/* test_dev_core.c: the device interface's core (dev/dev.c, dev/dev_mem.c): provider
 * registry, the "not supported" defaults, wrapper checks and bookkeeping, the QP transition
 * rules (IB spec 10.3.1 as dev.h states them), dev_mem buffers. Uses a fake provider. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "dev/dev.h"

/* A provider that implements only open, close and alloc_pd/dealloc_pd. */
struct fake_dev {
	struct dev_device dev;
	char args[64];
	int closed;
};
static struct fake_dev fake_last;
static struct dev_pd fake_pd;

static void fake_close(struct dev_device *d)
{
	DEV_CONTAINER_OF(d, struct fake_dev, dev)->closed = 1;
}
static int fake_alloc_pd(struct dev_device *d, struct dev_pd **out)
{
	dev_pd_init(&fake_pd, d);
	*out = &fake_pd;
	return 0;
}
static int fake_dealloc_pd(struct dev_pd *pd)
{
	(void)pd;
	return 0;
}
static const struct dev_ops fake_ops = {
	.alloc_pd = fake_alloc_pd,
	.close_device = fake_close,
	.dealloc_pd = fake_dealloc_pd,
};
static int fake_open(const struct dev_ops *ops, const char *args, struct dev_device **out)
{
	memset(&fake_last, 0, sizeof fake_last);
	snprintf(fake_last.args, sizeof fake_last.args, "%s", args);
	dev_device_init(&fake_last.dev, ops, "fake", "fake0", 1, -1);
	*out = &fake_last.dev;
	return 0;
}
static const struct dev_provider fake_provider = { .name = "fake", .ops = &fake_ops,
						   .open = fake_open };
static const struct dev_provider fake_dup = { .name = "fake", .ops = &fake_ops,
					      .open = fake_open };

static void test_registry(void **state)
{
	(void)state;
	assert_int_equal(dev_provider_register(&fake_provider), 0);
	assert_int_equal(dev_provider_register(&fake_provider), 0);	/* idempotent */
	assert_int_equal(dev_provider_register(&fake_dup), -SMCR_E_DEV_EXISTS);
	struct dev_provider bad = { .name = "a:b", .open = fake_open };
	assert_int_equal(dev_provider_register(&bad), -SMCR_E_INVAL);
	struct dev_provider noopen = { .name = "noopen" };
	assert_int_equal(dev_provider_register(&noopen), -SMCR_E_INVAL);
	assert_true(dev_provider_registered("fake"));
	assert_false(dev_provider_registered("fak"));
	int found = 0;
	for (int i = 0; i < dev_provider_count(); i++)
		found |= strcmp(dev_provider_name(i), "fake") == 0;
	assert_true(found);
	assert_null(dev_provider_name(-1));

	struct dev_device *d;
	assert_int_equal(dev_open("nosuch", &d), -SMCR_E_DEV_NO_PROVIDER);
	assert_int_equal(dev_open("fake:x=1,y", &d), 0);
	assert_string_equal(fake_last.args, "x=1,y");
	assert_string_equal(d->name, "fake0");
	dev_close(d);
	assert_int_equal(fake_last.closed, 1);
	assert_int_equal(dev_open("fake", &d), 0);
	assert_string_equal(fake_last.args, "");
	/* No open_by_gid: never matches. */
	struct dev_gid g = { { 0 } };
	struct dev_device *d2;
	assert_int_equal(dev_open_by_gid(&g, &d2), -SMCR_E_DEV_NO_DEVICE);

	/* Defaults: NOTSUP, never a NULL call; bad_wr points at the first WR. */
	struct dev_device_attr da;
	assert_int_equal(dev_query_device(d, &da), -SMCR_E_NOTSUP);
	struct dev_cq *cq;
	assert_int_equal(dev_create_cq(d, 4, NULL, &cq), -SMCR_E_NOTSUP);
	assert_int_equal(dev_create_cq(d, 0, NULL, &cq), -SMCR_E_DEV_BAD_ATTR);
	struct dev_async_event ev;
	assert_int_equal(dev_get_async_event(d, &ev), -SMCR_E_NOTSUP);
	assert_int_equal(dev_set_port_state(d, 1, 0), -SMCR_E_NOTSUP);
	assert_int_equal(dev_set_port_state(d, 2, 0), -SMCR_E_INVAL);

	/* Holds: the PD holds the device; dealloc refuses while an MR uses it. */
	struct dev_pd *pd;
	assert_int_equal(dev_alloc_pd(d, &pd), 0);
	dev_close(d);
	assert_int_equal(fake_last.closed, 0);	/* still held by the PD */
	char buf[64];
	struct dev_mr *mr;
	assert_int_equal(dev_reg_mr(pd, buf, sizeof buf, DEV_ACCESS_REMOTE_WRITE, &mr),
			 -SMCR_E_DEV_BAD_ATTR);	/* remote write needs local write */
	assert_int_equal(dev_reg_mr(pd, buf, 0, DEV_ACCESS_LOCAL_WRITE, &mr), -SMCR_E_DEV_BAD_ATTR);
	assert_int_equal(dev_reg_mr(pd, buf, sizeof buf, 0x80, &mr), -SMCR_E_DEV_BAD_ATTR);
	assert_int_equal(dev_reg_mr(pd, buf, sizeof buf, DEV_ACCESS_LOCAL_WRITE, &mr),
			 -SMCR_E_NOTSUP);
	assert_int_equal(atomic_load(&pd->users), 0);	/* a failed reg leaves no count */
	atomic_store(&pd->users, 1);
	assert_int_equal(dev_dealloc_pd(pd), -SMCR_E_DEV_BUSY);
	atomic_store(&pd->users, 0);
	assert_int_equal(dev_dealloc_pd(pd), 0);
	assert_int_equal(fake_last.closed, 1);
}

static void test_qp_transitions(void **state)
{
	(void)state;
	struct dev_qp_attr a = { 0 };
	a.qp_state = DEV_QPS_INIT;
	assert_int_equal(dev_qp_check_modify(DEV_QPS_RESET, &a, DEV_QP_MASK_INIT), 0);
	assert_int_equal(dev_qp_check_modify(DEV_QPS_RESET, &a, DEV_QP_STATE),
			 -SMCR_E_DEV_BAD_ATTR);
	assert_int_equal(dev_qp_check_modify(DEV_QPS_RTS, &a, DEV_QP_MASK_INIT),
			 -SMCR_E_DEV_BAD_STATE);
	assert_int_equal(dev_qp_check_modify(DEV_QPS_RESET, &a, 0), -SMCR_E_DEV_BAD_ATTR);
	a.qp_state = DEV_QPS_RTR;
	a.path_mtu = DEV_MTU_1024;
	a.dest_qp_num = 0x123456;
	a.rq_psn = 0xffffff;
	assert_int_equal(dev_qp_check_modify(DEV_QPS_INIT, &a, DEV_QP_MASK_RTR), 0);
	assert_int_equal(dev_qp_check_modify(DEV_QPS_RESET, &a, DEV_QP_MASK_RTR),
			 -SMCR_E_DEV_BAD_STATE);
	assert_int_equal(dev_qp_check_modify(DEV_QPS_INIT, &a, DEV_QP_MASK_RTR & ~DEV_QP_AV),
			 -SMCR_E_DEV_BAD_ATTR);
	a.dest_qp_num = 0x1000000;	/* 25 bits */
	assert_int_equal(dev_qp_check_modify(DEV_QPS_INIT, &a, DEV_QP_MASK_RTR),
			 -SMCR_E_DEV_BAD_ATTR);
	a.dest_qp_num = 0;
	assert_int_equal(dev_qp_check_modify(DEV_QPS_INIT, &a, DEV_QP_MASK_RTR),
			 -SMCR_E_DEV_BAD_ATTR);
	a.dest_qp_num = 7;
	a.path_mtu = (enum dev_mtu)6;
	assert_int_equal(dev_qp_check_modify(DEV_QPS_INIT, &a, DEV_QP_MASK_RTR),
			 -SMCR_E_DEV_BAD_ATTR);
	a.qp_state = DEV_QPS_RTS;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.timeout = 15;
	assert_int_equal(dev_qp_check_modify(DEV_QPS_RTR, &a, DEV_QP_MASK_RTS), 0);
	assert_int_equal(dev_qp_check_modify(DEV_QPS_RTS, &a, DEV_QP_STATE), 0);
	assert_int_equal(dev_qp_check_modify(DEV_QPS_INIT, &a, DEV_QP_MASK_RTS),
			 -SMCR_E_DEV_BAD_STATE);
	a.rnr_retry = 8;
	assert_int_equal(dev_qp_check_modify(DEV_QPS_RTR, &a, DEV_QP_MASK_RTS),
			 -SMCR_E_DEV_BAD_ATTR);
	a.qp_state = DEV_QPS_ERR;
	for (int s = 0; s <= 6; s++)
		assert_int_equal(dev_qp_check_modify((enum dev_qp_state)s, &a, DEV_QP_STATE), 0);
	a.qp_state = DEV_QPS_RESET;
	assert_int_equal(dev_qp_check_modify(DEV_QPS_ERR, &a, DEV_QP_STATE), 0);
	a.qp_state = (enum dev_qp_state)4;	/* SQD: not supported */
	assert_int_equal(dev_qp_check_modify(DEV_QPS_RTS, &a, DEV_QP_STATE), -SMCR_E_DEV_BAD_ATTR);
}

static void test_names(void **state)
{
	(void)state;
	assert_int_equal(dev_mtu_bytes(DEV_MTU_256), 256);
	assert_int_equal(dev_mtu_bytes(DEV_MTU_4096), 4096);
	assert_int_equal(dev_mtu_bytes((enum dev_mtu)0), 0);
	assert_string_equal(dev_qp_state_str(DEV_QPS_RTS), "RTS");
	assert_string_equal(dev_wc_status_str(DEV_WC_REM_ACCESS_ERR), "remote access error");
	assert_string_equal(dev_event_type_str(DEV_EVENT_PORT_ERR), "port error");
	struct dev_gid g;
	for (int i = 0; i < 16; i++)
		g.raw[i] = (uint8_t)(0xf0 + i);
	char s[DEV_GID_STR_LEN];
	dev_gid_str(&g, s);
	assert_string_equal(s, "f0f1:f2f3:f4f5:f6f7:f8f9:fafb:fcfd:feff");
	/* A RoCE v2 GID of an IPv4 interface maps to its address; an IPv6 one does not. */
	uint32_t ip = 0;
	assert_int_equal(dev_gid_ipv4(&g, &ip), 0);
	const uint8_t m[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2 };
	memcpy(g.raw, m, 16);
	assert_int_equal(dev_gid_ipv4(&g, &ip), 1);
	assert_int_equal(ip, 0x0a000002u);
	g.raw[10] = 0xfe;
	assert_int_equal(dev_gid_ipv4(&g, &ip), 0);
	assert_string_equal(smcr_err_name(-SMCR_E_DEV_BUSY), "DEV_BUSY");
	assert_int_equal(smcr_err_errno(-SMCR_E_DEV_QUEUE_FULL), ENOMEM);
}

static void test_mem(void **state)
{
	(void)state;
	struct dev_mem *m, *f;
	size_t off;
	assert_int_equal(dev_mem_alloc(0, "x", &m), -SMCR_E_INVAL);
	assert_int_equal(dev_mem_alloc(5000, "unit-mem", &m), 0);
	assert_true(m->len >= 5000 && m->len % 4096 == 0);
	assert_int_equal((uintptr_t)m->addr % 4096, 0);
	uint8_t *p = m->addr;
	assert_int_equal(p[4999], 0);	/* zero-filled */
	p[100] = 9;
	/* Sealed: a peer cannot shrink it under our mapping. */
	assert_int_not_equal(ftruncate(m->fd, 0), 0);
	assert_true(fcntl(m->fd, F_GET_SEALS) & F_SEAL_SHRINK);
	assert_int_equal(dev_mem_find(p + 100, 10, &f, &off), 0);
	assert_ptr_equal(f, m);
	assert_int_equal(off, 100);
	dev_mem_put(f);
	assert_int_equal(dev_mem_find(p + m->len - 1, 2, &f, &off), -SMCR_E_DEV_NOT_DEV_MEM);
	assert_int_equal(dev_mem_find(p - 1, 1, &f, &off), -SMCR_E_DEV_NOT_DEV_MEM);
	int fd = m->fd;
	dev_mem_hold(m);
	dev_mem_free(m);
	assert_int_equal(fcntl(fd, F_GETFD), fcntl(fd, F_GETFD));	/* still open */
	assert_true(fcntl(fd, F_GETFD) >= 0);
	dev_mem_put(m);
	assert_int_equal(fcntl(fd, F_GETFD), -1);	/* the last put closed it */
	assert_int_equal(dev_mem_find(p + 100, 1, &f, &off), -SMCR_E_DEV_NOT_DEV_MEM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry),
		cmocka_unit_test(test_qp_transitions),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_mem),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
