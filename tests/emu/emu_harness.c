/* emu_harness.c: helpers for the emu provider's tests (emu_harness.h). */
#define _GNU_SOURCE
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "emu_harness.h"
#include "dev/emu/emu.h"
#include "util/clock.h"

uint64_t eh_now_ms(void)
{
	return smcr_now_ns() / SMCR_NS_PER_MS;
}

void eh_register(void)
{
	assert_int_equal(dev_emu_register(), 0);
}

struct dev_device *eh_open(const char *spec)
{
	struct dev_device *d = NULL;
	int rc = dev_open(spec, &d);
	if (rc)
		fail_msg("dev_open(%s): %s", spec, smcr_err_name(rc));
	return d;
}

void eh_side_init(struct eh_side *s, struct dev_device *dev, size_t memlen, unsigned mr_access)
{
	memset(s, 0, sizeof *s);
	s->dev = dev;
	assert_int_equal(dev_alloc_pd(dev, &s->pd), 0);
	assert_int_equal(dev_create_cq(dev, 64, s, &s->scq), 0);
	assert_int_equal(dev_create_cq(dev, 64, s, &s->rcq), 0);
	struct dev_qp_init_attr a = {
		.send_cq = s->scq,
		.recv_cq = s->rcq,
		.qp_context = s,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
	};
	assert_int_equal(dev_create_qp(s->pd, &a, &s->qp), 0);
	assert_int_equal(dev_mem_alloc(memlen, "emu-test", &s->mem), 0);
	assert_int_equal(dev_reg_mr(s->pd, s->mem->addr, memlen, mr_access, &s->mr), 0);
}

void eh_side_fini(struct eh_side *s)
{
	if (s->qp)
		assert_int_equal(dev_destroy_qp(s->qp), 0);
	if (s->mr)
		assert_int_equal(dev_dereg_mr(s->mr), 0);
	if (s->mem)
		dev_mem_free(s->mem);
	assert_int_equal(dev_destroy_cq(s->scq), 0);
	assert_int_equal(dev_destroy_cq(s->rcq), 0);
	assert_int_equal(dev_dealloc_pd(s->pd), 0);
	memset(s, 0, sizeof *s);
}

void eh_qp_init(struct eh_side *s, unsigned qp_access)
{
	struct dev_qp_attr a = { .qp_state = DEV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = qp_access };
	assert_int_equal(dev_modify_qp(s->qp, &a, DEV_QP_MASK_INIT | DEV_QP_PKEY_INDEX), 0);
}

void eh_qp_rtr(struct eh_side *s, const struct eh_side *peer)
{
	struct dev_gid_entry g;
	assert_int_equal(dev_query_gid(peer->dev, 1, 0, &g), 0);
	struct dev_qp_attr a = {
		.qp_state = DEV_QPS_RTR,
		.path_mtu = DEV_MTU_1024,
		.dest_qp_num = peer->qp->qp_num,
		.rq_psn = 100,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 5,
	};
	a.ah_attr.dgid = g.gid;
	a.ah_attr.port_num = 1;
	a.ah_attr.hop_limit = 1;
	assert_int_equal(dev_modify_qp(s->qp, &a, DEV_QP_MASK_RTR), 0);
}

void eh_qp_rts(struct eh_side *s, uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry)
{
	struct dev_qp_attr a = {
		.qp_state = DEV_QPS_RTS,
		.sq_psn = 100,
		.timeout = timeout,
		.retry_cnt = retry_cnt,
		.rnr_retry = rnr_retry,
		.max_rd_atomic = 1,
	};
	assert_int_equal(dev_modify_qp(s->qp, &a, DEV_QP_MASK_RTS), 0);
}

void eh_connect(struct eh_side *first, struct eh_side *second)
{
	unsigned acc = DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE;
	eh_qp_init(first, acc);
	eh_qp_init(second, acc);
	eh_qp_rtr(first, second);
	eh_qp_rtr(second, first);
	eh_qp_rts(first, 15, 7, 7);
	eh_qp_rts(second, 15, 7, 7);
}

int eh_poll(struct dev_cq *cq, struct dev_wc *wc, int timeout_ms)
{
	int rc = dev_poll_cq_wait(cq, 1, wc, 0, timeout_ms);
	assert_true(rc >= 0);
	return rc;
}

int eh_event(struct dev_device *d, enum dev_event_type type, uint32_t qpn, int timeout_ms)
{
	uint64_t end = eh_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		struct dev_async_event ev;
		int rc = dev_get_async_event(d, &ev);
		if (rc == 0) {
			if (ev.type == type &&
			    (type == DEV_EVENT_PORT_ERR || type == DEV_EVENT_PORT_ACTIVE ||
			     ev.qp_num == qpn))
				return 1;
			continue;
		}
		assert_int_equal(rc, -SMCR_E_AGAIN);
		uint64_t now = eh_now_ms();
		if (now >= end)
			return 0;
		struct pollfd p = { .fd = d->async_fd, .events = POLLIN };
		(void)poll(&p, 1, (int)(end - now));
	}
}

void eh_post_send(struct eh_side *s, enum dev_wr_opcode op, uint64_t wr_id, size_t off,
		  uint32_t len, const struct eh_side *peer, size_t roff, unsigned flags)
{
	struct dev_sge sge = { .addr = (uint64_t)(uintptr_t)s->mem->addr + off, .length = len,
			       .lkey = s->mr->lkey };
	struct dev_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = flags,
		.imm_data = (uint32_t)wr_id,
	};
	if (peer) {
		wr.rdma.remote_addr = (uint64_t)(uintptr_t)peer->mem->addr + roff;
		wr.rdma.rkey = peer->mr->rkey;
	}
	const struct dev_send_wr *bad = NULL;
	assert_int_equal(dev_post_send(s->qp, &wr, &bad), 0);
}

void eh_post_recv(struct eh_side *s, uint64_t wr_id, size_t off, uint32_t len)
{
	struct dev_sge sge = { .addr = (uint64_t)(uintptr_t)s->mem->addr + off, .length = len,
			       .lkey = s->mr->lkey };
	struct dev_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };
	const struct dev_recv_wr *bad = NULL;
	assert_int_equal(dev_post_recv(s->qp, &wr, &bad), 0);
}

enum dev_qp_state eh_state(struct dev_qp *qp)
{
	struct dev_qp_attr a;
	assert_int_equal(dev_query_qp(qp, &a), 0);
	return a.qp_state;
}

int eh_wait_state(struct dev_qp *qp, enum dev_qp_state st, int timeout_ms)
{
	uint64_t end = eh_now_ms() + (uint64_t)timeout_ms;
	while (eh_state(qp) != st) {
		if (eh_now_ms() >= end)
			return 0;
		struct timespec ts = { 0, 2 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return 1;
}
