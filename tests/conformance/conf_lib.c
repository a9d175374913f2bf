/* conf_lib.c: helpers shared by the conformance suite and the shm tests (hostile peer,
 * quiet, slow peer, populate, tune): open a "side" (device, PD, CQs, a remote-writable and a
 * local buffer), create and connect RC QPs with SMC-R's attribute values
 * (docs/protocol/procedures.md 2.6), a connected pair and its teardown, post and wait; shm as the
 * provider under test. */
#define _GNU_SOURCE
#include "conf_lib.h"

#include <dirent.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "dev/shm/shm.h"
#include "util/clock.h"

const struct conf_provider *prov;

int conf_use_shm(void)
{
	static const struct conf_provider shm = { "shm", dev_shm_register, NULL };
	prov = &shm;
	return dev_shm_register() ? -1 : 0;
}
/* ---- helpers ----------------------------------------------------------------------------- */



int side_open(struct side *s, int cqe)
{
	memset(s, 0, sizeof *s);
	const char *spec = prov->spec ? prov->spec : prov->name;
	int rc = dev_open(spec, &s->dev);
	if (rc)
		return rc;
	struct dev_gid_entry ge;
	if (dev_query_gid(s->dev, 1, 0, &ge) || dev_alloc_pd(s->dev, &s->pd) ||
	    dev_create_cq(s->dev, cqe, NULL, &s->scq) || dev_create_cq(s->dev, cqe, NULL, &s->rcq) ||
	    dev_mem_alloc(BUF_LEN, "conf-rmb", &s->rmem) ||
	    dev_mem_alloc(BUF_LEN, "conf-local", &s->lmem))
		return -1;
	s->gid = ge.gid;
	s->rbuf = s->rmem->addr;
	s->lbuf = s->lmem->addr;
	if (dev_reg_mr(s->pd, s->rbuf, BUF_LEN, DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE,
		       &s->rmr) ||
	    dev_reg_mr(s->pd, s->lbuf, BUF_LEN, DEV_ACCESS_LOCAL_WRITE, &s->lmr))
		return -1;
	return 0;
}

void side_close(struct side *s)
{
	if (s->rmr)
		assert_int_equal(dev_dereg_mr(s->rmr), 0);
	if (s->lmr)
		assert_int_equal(dev_dereg_mr(s->lmr), 0);
	dev_mem_free(s->rmem);
	dev_mem_free(s->lmem);
	if (s->scq)
		assert_int_equal(dev_destroy_cq(s->scq), 0);
	if (s->rcq)
		assert_int_equal(dev_destroy_cq(s->rcq), 0);
	if (s->pd)
		assert_int_equal(dev_dealloc_pd(s->pd), 0);
	dev_close(s->dev);
	memset(s, 0, sizeof *s);
}

void pair_open(struct side *a, struct dev_qp **qa, struct side *b, struct dev_qp **qb)
{
	assert_int_equal(side_open(a, 256), 0);
	assert_int_equal(side_open(b, 256), 0);
	*qa = qp_new(a, 16, 16, 0);
	*qb = qp_new(b, 16, 16, 0);
	connect_pair(a, *qa, b, *qb, 7);
	ping_pair(a, *qa, b, *qb);
}

void pair_close(struct side *a, struct dev_qp *qa, struct side *b, struct dev_qp *qb)
{
	assert_int_equal(dev_destroy_qp(qa), 0);
	assert_int_equal(dev_destroy_qp(qb), 0);
	side_close(a);
	side_close(b);
}

struct dev_qp *qp_new(struct side *s, uint32_t sq, uint32_t rq, int sig_all)
{
	struct dev_qp_init_attr ia = { .send_cq = s->scq, .recv_cq = s->rcq,
				       .cap = { .max_send_wr = sq, .max_recv_wr = rq,
						.max_send_sge = 2, .max_recv_sge = 2,
						.max_inline_data = 64 },
				       .sq_sig_all = sig_all };
	struct dev_qp *qp = NULL;
	assert_int_equal(dev_create_qp(s->pd, &ia, &qp), 0);
	assert_int_equal(atomic_load(&qp->state), DEV_QPS_RESET);
	return qp;
}

void qp_init(struct dev_qp *q)
{
	struct dev_qp_attr a = { .qp_state = DEV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE };
	assert_int_equal(dev_modify_qp(q, &a, DEV_QP_MASK_INIT | DEV_QP_PKEY_INDEX), 0);
}

/* SMC-R's values (docs/protocol/procedures.md 2.6). */
void qp_rtr(struct dev_qp *q, const struct dev_gid *dgid, uint32_t dqpn)
{
	struct dev_qp_attr a = { .qp_state = DEV_QPS_RTR, .path_mtu = DEV_MTU_1024,
				 .dest_qp_num = dqpn, .rq_psn = 0x123, .min_rnr_timer = 5,
				 .max_dest_rd_atomic = 1 };
	a.ah_attr.dgid = *dgid;
	a.ah_attr.hop_limit = 1;
	a.ah_attr.port_num = 1;
	assert_int_equal(dev_modify_qp(q, &a, DEV_QP_MASK_RTR), 0);
}

void qp_rts(struct dev_qp *q, uint8_t rnr_retry)
{
	struct dev_qp_attr a = { .qp_state = DEV_QPS_RTS, .sq_psn = 0x123, .timeout = 15,
				 .retry_cnt = 7, .rnr_retry = rnr_retry, .max_rd_atomic = 1 };
	assert_int_equal(dev_modify_qp(q, &a, DEV_QP_MASK_RTS), 0);
}

void connect_pair(struct side *a, struct dev_qp *qa, struct side *b, struct dev_qp *qb,
			 uint8_t rnr_retry)
{
	qp_init(qa);
	qp_init(qb);
	qp_rtr(qa, &b->gid, qb->qp_num);
	qp_rtr(qb, &a->gid, qa->qp_num);
	qp_rts(qa, rnr_retry);
	qp_rts(qb, rnr_retry);
}

int wait_wc(struct dev_cq *cq, struct dev_wc *wc, int timeout_ms)
{
	return dev_poll_cq_wait(cq, 1, wc, SPIN_NS, timeout_ms);
}


/* One SEND each way, so both QPs are known connected (the handshake of a provider may run
 * after modify_qp returned, as a real RC QP's first packets do). */
void ping_pair(struct side *a, struct dev_qp *qa, struct side *b, struct dev_qp *qb)
{
	struct side *s[2] = { a, b };
	struct dev_qp *q[2] = { qa, qb };
	for (int i = 0; i < 2; i++) {
		post_recv(s[1 - i], q[1 - i], BUF_LEN - 64, 64, 0xf00d);
		uint8_t m[8] = { 'p', 'i', 'n', 'g' };
		struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
		struct dev_send_wr wr = { .wr_id = 0xf00d, .sg_list = &sg, .num_sge = 1,
					  .opcode = DEV_WR_SEND,
					  .send_flags = DEV_SEND_INLINE | DEV_SEND_SIGNALED };
		assert_int_equal(dev_post_send(q[i], &wr, NULL), 0);
		expect_wc(s[i]->scq, 0xf00d, DEV_WC_SUCCESS, DEV_WC_SEND);
		expect_wc(s[1 - i]->rcq, 0xf00d, DEV_WC_SUCCESS, DEV_WC_RECV);
	}
}

void expect_wc(struct dev_cq *cq, uint64_t wr_id, enum dev_wc_status st,
		      enum dev_wc_opcode op)
{
	struct dev_wc wc;
	int n = wait_wc(cq, &wc, WAIT_MS);
	assert_int_equal(n, 1);
	if (wc.status != st)
		fail_msg("wr %llu: status %s, expected %s", (unsigned long long)wc.wr_id,
			 dev_wc_status_str(wc.status), dev_wc_status_str(st));
	assert_int_equal(wc.wr_id, wr_id);
	if (st == DEV_WC_SUCCESS)
		assert_int_equal(wc.opcode, op);
}

void expect_no_wc(struct dev_cq *cq, int ms)
{
	struct dev_wc wc;
	assert_int_equal(wait_wc(cq, &wc, ms), 0);
}

void post_recv(struct side *s, struct dev_qp *q, uint64_t off, uint32_t len, uint64_t id)
{
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)(s->lbuf + off), .length = len,
			      .lkey = s->lmr->lkey };
	struct dev_recv_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1 };
	assert_int_equal(dev_post_recv(q, &wr, NULL), 0);
}

int post_send(struct dev_qp *q, enum dev_wr_opcode op, unsigned flags, struct dev_sge *sg,
		     int nsge, uint64_t raddr, uint32_t rkey, uint32_t imm, uint64_t id)
{
	struct dev_send_wr wr = { .wr_id = id, .sg_list = sg, .num_sge = nsge, .opcode = op,
				  .send_flags = flags, .imm_data = imm };
	wr.rdma.remote_addr = raddr;
	wr.rdma.rkey = rkey;
	return dev_post_send(q, &wr, NULL);
}

struct dev_sge lsge(struct side *s, uint64_t off, uint32_t len)
{
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)(s->lbuf + off), .length = len,
			      .lkey = s->lmr->lkey };
	return sg;
}

uint64_t raddr(struct side *s, uint64_t off)
{
	return (uint64_t)(uintptr_t)s->rbuf + off;
}

int wait_state(struct dev_qp *q, enum dev_qp_state st, int ms)
{
	uint64_t end = smcr_now_ns() + (uint64_t)ms * SMCR_NS_PER_MS;
	struct dev_qp_attr a;
	do {
		if (dev_query_qp(q, &a) == 0 && a.qp_state == st)
			return 0;
		usleep(200);
	} while (smcr_now_ns() < end);
	return -1;
}

/* Waits for an async event of this type (and QP number, if qpn != 0). */
int wait_event(struct dev_device *d, enum dev_event_type t, uint32_t qpn, int ms)
{
	uint64_t end = smcr_now_ns() + (uint64_t)ms * SMCR_NS_PER_MS;
	for (;;) {
		struct dev_async_event ev;
		while (dev_get_async_event(d, &ev) == 0)
			if (ev.type == t && (!qpn || ev.qp_num == qpn))
				return 0;
		uint64_t now = smcr_now_ns();
		if (now >= end)
			return -1;
		struct pollfd pfd = { .fd = d->async_fd, .events = POLLIN };
		poll(&pfd, 1, (int)((end - now) / SMCR_NS_PER_MS) + 1);
	}
}

int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	if (d)
		closedir(d);
	return n - 1;	/* the DIR's own fd */
}


bool rc_hw(void)
{
	return strcmp(prov->name, "verbs") == 0;
}

/* The wait for the peer's silence is the device's business (rxe's loopback on Linux 6.12
 * was seen to retry for 20 s and more, and rxe between two guests did the same); the
 * take-down is the engine's answer to an unanswered TESTLINK. */
void hw_silent_peer(struct dev_qp *q, struct dev_cq *scq, uint64_t wr_id, int wait_ms,
		    const char *what)
{
	struct dev_wc wc;
	uint64_t t0 = smcr_now_ns();
	int n = wait_wc(scq, &wc, wait_ms);
	print_message("[   INFO   ] %s: %s after %llu ms\n", what,
		      n == 1 ? dev_wc_status_str(wc.status) : "no completion",
		      (unsigned long long)((smcr_now_ns() - t0) / SMCR_NS_PER_MS));
	if (n == 1) {
		assert_int_equal(wc.wr_id, wr_id);
		assert_int_equal(wc.status, DEV_WC_RETRY_EXC_ERR);
	} else {
		assert_int_equal(n, 0);
		struct dev_qp_attr e = { .qp_state = DEV_QPS_ERR };
		assert_int_equal(dev_modify_qp(q, &e, DEV_QP_STATE), 0);
		expect_wc(scq, wr_id, DEV_WC_WR_FLUSH_ERR, DEV_WC_SEND);
	}
	assert_int_equal(wait_state(q, DEV_QPS_ERR, WAIT_MS), 0);
}

void peer_gone_check(struct side *s, struct dev_qp *q, int nrecv, uint64_t t0, int hw_wait_ms)
{
	if (!rc_hw())	/* the provider saw the hang-up itself */
		assert_int_equal(wait_event(s->dev, DEV_EVENT_QP_FATAL, q->qp_num, WAIT_MS), 0);
	/* RC: the side that sends notices (retry exceeded); no async event. On a software
	 * provider the QP is in ERR already: the SEND flushes (rule 4). */
	struct dev_sge sb = lsge(s, 0, 8);
	assert_int_equal(post_send(q, DEV_WR_SEND, DEV_SEND_SIGNALED, &sb, 1, 0, 0, 0, 999), 0);
	if (rc_hw())
		hw_silent_peer(q, s->scq, 999, hw_wait_ms, "dead peer");
	else
		expect_wc(s->scq, 999, DEV_WC_WR_FLUSH_ERR, DEV_WC_SEND);
	/* A figure, not an assert (the waits above bound it): shm notices the hang-up at once
	 * on an idle machine, a loaded one delays any process. */
	print_message("[   INFO   ] QP in ERR %llu ms after SIGKILL\n",
		      (unsigned long long)((smcr_now_ns() - t0) / SMCR_NS_PER_MS));
	assert_int_equal(atomic_load(&q->state), DEV_QPS_ERR);
	/* Not "some are flushed": a peer that ran ahead while this process was descheduled
	 * can have filled them all before the kill (seen under a parallel ctest). */
	struct dev_wc wc;
	int flushed = 0, arrived = 0;
	while (wait_wc(s->rcq, &wc, 100) == 1) {
		flushed += wc.status == DEV_WC_WR_FLUSH_ERR;
		arrived += wc.status == DEV_WC_SUCCESS;
	}
	print_message("[   INFO   ] receive WRs after the kill: %d arrived, %d flushed\n", arrived,
		      flushed);
	assert_int_equal(arrived + flushed, nrecv);
}
