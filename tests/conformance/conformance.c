/* conformance.c: the device-provider conformance suite (dev/dev.h semantics, RC rules 1-8),
 * one suite run against every provider of providers.def: `conformance <provider>`.
 * What SMC-R relies on (docs/protocol/procedures.md 4.3, 4.7; docs/protocol/linux-interop.md 6):
 * RDMA WRITE then SEND ordering on one QP, 44-byte inline solicited SENDs, up to two SGEs per
 * WRITE, remote access errors, flushes, and a peer that vanishes being noticed.
 *
 * `conformance <provider> --peer <rfd> <wfd>` is the peer process of the "peer killed"
 * test (exec'd, so it is a clean process under every sanitizer).
 *
 * `conformance <provider> --serve PORT` / `--remote HOST PORT`: the two-host mode, each
 * test's two ends on two hosts (conf_twohost.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>
#include <cmocka.h>

#include "conf_lib.h"
#include "conf_twohost.h"
#include "dev/dev.h"
#include "util/clock.h"

/* ---- the provider table ------------------------------------------------------------------ */

#define CONF_PROVIDER(name, reg, spec) int reg(void);
#include "providers.def"
#undef CONF_PROVIDER

int loopdev_register(void);	/* tests/lib/loopdev.h: the test provider, not in providers.def
				 * (the tools that read that list do not link the test library) */

static const struct conf_provider conf_providers[] = {
#define CONF_PROVIDER(name, reg, spec) { #name, reg, spec },
#include "providers.def"
#undef CONF_PROVIDER
	{ "loop", loopdev_register, NULL },
};
static const char *self_path;

/* What the loop provider (tests/lib/loopdev.h: in-process, synchronous, for the engine's
 * deterministic tests) does not model: the suite says so and moves on, for that provider
 * only. Every other test holds for it as for shm and emu. */
static bool not_modelled(const char *what)
{
	if (strcmp(prov->name, "loop") != 0)
		return false;
	print_message("[  SKIP    ] loop does not model %s\n", what);
	return true;
}

/* ---- fixture: two devices, one connected QP pair ------------------------------------------- */

struct fx {
	struct side a, b;
	struct dev_qp *qa, *qb;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	assert_int_equal(side_open(&f->a, 256), 0);
	assert_int_equal(side_open(&f->b, 256), 0);
	f->qa = qp_new(&f->a, 64, 64, 0);
	f->qb = qp_new(&f->b, 64, 64, 0);
	connect_pair(&f->a, f->qa, &f->b, f->qb, 7);
	ping_pair(&f->a, f->qa, &f->b, f->qb);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	if (f->qa)
		assert_int_equal(dev_destroy_qp(f->qa), 0);
	if (f->qb)
		assert_int_equal(dev_destroy_qp(f->qb), 0);
	side_close(&f->a);
	side_close(&f->b);
	free(f);
	return 0;
}

/* ---- tests ------------------------------------------------------------------------------- */

/* Device, port and GID queries; open by GID finds the same device. */
static void t_query(void **state)
{
	struct fx *f = *state;
	struct dev_device_attr da;
	struct dev_port_attr pa;
	struct dev_gid_entry ge;
	assert_int_equal(dev_query_device(f->a.dev, &da), 0);
	assert_string_equal(da.provider, prov->name);
	assert_true(da.phys_port_cnt >= 1);
	assert_true(da.max_sge >= 2);
	assert_true(da.max_inline_data >= 44);
	assert_int_equal(dev_query_port(f->a.dev, 1, &pa), 0);
	assert_int_equal(pa.state, DEV_PORT_ACTIVE);
	assert_true(dev_mtu_bytes(pa.active_mtu) >= 256);
	assert_true(pa.max_send_sz >= 44);
	assert_int_equal(dev_query_port(f->a.dev, 0, &pa), -SMCR_E_INVAL);
	assert_int_equal(dev_query_gid(f->a.dev, 1, 0, &ge), 0);
	assert_memory_equal(ge.gid.raw, f->a.gid.raw, DEV_GID_LEN);
	/* two opens are two devices (shm, emu) or, for a hardware port opened twice, the
	 * same device held twice (verbs): then the GID is the same too */
	if (f->a.dev != f->b.dev)
		assert_memory_not_equal(f->a.gid.raw, f->b.gid.raw, DEV_GID_LEN);
	else
		assert_memory_equal(f->a.gid.raw, f->b.gid.raw, DEV_GID_LEN);
	struct dev_device *d2;
	assert_int_equal(dev_open_by_gid(&f->a.gid, &d2), 0);
	assert_ptr_equal(d2, f->a.dev);
	dev_close(d2);
	struct dev_gid other = f->a.gid;
	other.raw[3] ^= 0x5a;	/* another host's (or nobody's) GID */
	assert_int_equal(dev_open_by_gid(&other, &d2), -SMCR_E_DEV_NO_DEVICE);
}

/* The QP state machine refuses what verbs refuses. */
static void t_qp_states(void **state)
{
	struct fx *f = *state;
	if (not_modelled("the PD/CQ busy checks and a RESET QP's refusals"))
		return;
	struct dev_qp *q = qp_new(&f->a, 4, 4, 0);
	struct dev_qp_attr a = { .qp_state = DEV_QPS_RTR, .path_mtu = DEV_MTU_1024,
				 .dest_qp_num = 5 };
	assert_int_equal(dev_modify_qp(q, &a, DEV_QP_MASK_RTR), -SMCR_E_DEV_BAD_STATE);
	struct dev_sge sg = lsge(&f->a, 0, 8);
	assert_int_equal(post_send(q, DEV_WR_SEND, 0, &sg, 1, 0, 0, 0, 1), -SMCR_E_DEV_BAD_STATE);
	struct dev_recv_wr rw = { .wr_id = 1, .sg_list = &sg, .num_sge = 1 };
	assert_int_equal(dev_post_recv(q, &rw, NULL), -SMCR_E_DEV_BAD_STATE);
	qp_init(q);
	assert_int_equal(dev_modify_qp(q, &a, DEV_QP_STATE | DEV_QP_AV), -SMCR_E_DEV_BAD_ATTR);
	assert_int_equal(dev_post_recv(q, &rw, NULL), 0);	/* allowed from INIT */
	struct dev_qp_attr r = { .qp_state = DEV_QPS_RTS };
	assert_int_equal(dev_modify_qp(q, &r, DEV_QP_MASK_RTS), -SMCR_E_DEV_BAD_STATE);
	r.qp_state = DEV_QPS_RESET;
	assert_int_equal(dev_modify_qp(q, &r, DEV_QP_STATE), 0);
	assert_int_equal(atomic_load(&q->state), DEV_QPS_RESET);
	expect_no_wc(f->a.rcq, 0);	/* RESET drops WRs without completions */
	assert_int_equal(dev_dealloc_pd(f->a.pd), -SMCR_E_DEV_BUSY);
	assert_int_equal(dev_destroy_cq(f->a.rcq), -SMCR_E_DEV_BUSY);
	assert_int_equal(dev_destroy_qp(q), 0);
}

/* SEND with a solicited inline 44-byte message, as SMC-R's LLC/CDC (docs/protocol/linux-interop.md
 * 6). */
static void t_send_inline(void **state)
{
	struct fx *f = *state;
	uint8_t msg[44];
	for (int i = 0; i < 44; i++)
		msg[i] = (uint8_t)(0xA0 + i);
	post_recv(&f->b, f->qb, 0, 48, 77);
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)msg, .length = 44, .lkey = 0 };
	assert_int_equal(post_send(f->qa, DEV_WR_SEND,
				   DEV_SEND_INLINE | DEV_SEND_SIGNALED | DEV_SEND_SOLICITED, &sg, 1,
				   0, 0, 0, 5), 0);
	memset(msg, 0, sizeof msg);	/* inline: the caller's buffer is free at once */
	expect_wc(f->a.scq, 5, DEV_WC_SUCCESS, DEV_WC_SEND);
	struct dev_wc wc;
	assert_int_equal(wait_wc(f->b.rcq, &wc, WAIT_MS), 1);
	assert_int_equal(wc.status, DEV_WC_SUCCESS);
	assert_int_equal(wc.opcode, DEV_WC_RECV);
	assert_int_equal(wc.wr_id, 77);
	assert_int_equal(wc.byte_len, 44);
	assert_int_equal(wc.qp_num, f->qb->qp_num);
	if (!rc_hw())
		assert_int_equal(wc.src_qp, f->qa->qp_num);
	for (int i = 0; i < 44; i++)
		assert_int_equal(f->b.lbuf[i], 0xA0 + i);
	/* Too long for inline. */
	uint8_t big[512] = { 0 };
	struct dev_sge bs = { .addr = (uint64_t)(uintptr_t)big, .length = sizeof big };
	const struct dev_send_wr *bad = NULL;
	struct dev_send_wr wr = { .wr_id = 9, .sg_list = &bs, .num_sge = 1,
				  .opcode = DEV_WR_SEND, .send_flags = DEV_SEND_INLINE };
	assert_int_equal(dev_post_send(f->qa, &wr, &bad), -SMCR_E_DEV_BAD_WR);
	assert_ptr_equal(bad, &wr);
}

/* RC rule 2: every WRITE is in the peer's memory when the SEND posted after it arrives,
 * and SENDs arrive in order (rule 1). 2000 rounds, 4 KiB writes at changing offsets. */
static void t_write_then_send(void **state)
{
	struct fx *f = *state;
	const int rounds = 2000, win = 32;
	int posted = 0, done = 0, sent = 0;
	for (int i = 0; i < win; i++)
		post_recv(&f->b, f->qb, 64 * (uint64_t)i, 64, (uint64_t)i);
	posted = win;
	while (done < rounds) {
		while (sent < rounds && sent - done < win / 2) {
			uint32_t off = (uint32_t)(sent % 200) * 4096;
			memset(f->a.lbuf + off, sent & 0xff, 4096);
			struct dev_sge sg = lsge(&f->a, off, 4096);
			assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, 0, &sg, 1,
						   raddr(&f->b, off), f->b.rmr->rkey, 0, 0), 0);
			uint32_t seq[2] = { (uint32_t)sent, off };
			struct dev_sge ss = { .addr = (uint64_t)(uintptr_t)seq, .length = 8 };
			assert_int_equal(post_send(f->qa, DEV_WR_SEND,
						   DEV_SEND_INLINE | DEV_SEND_SIGNALED |
							   DEV_SEND_SOLICITED,
						   &ss, 1, 0, 0, 0, 1000 + (uint64_t)sent), 0);
			sent++;
		}
		struct dev_wc wc;
		int n;
		while ((n = dev_poll_cq(f->a.scq, 1, &wc)) == 1)
			assert_int_equal(wc.status, DEV_WC_SUCCESS);
		assert_int_equal(wait_wc(f->b.rcq, &wc, WAIT_MS), 1);
		assert_int_equal(wc.status, DEV_WC_SUCCESS);
		assert_int_equal(wc.byte_len, 8);
		uint32_t seq[2];
		memcpy(seq, f->b.lbuf + 64 * (wc.wr_id % (uint64_t)win), 8);
		assert_int_equal(seq[0], (uint32_t)done);	/* in order */
		const uint8_t *p = f->b.rbuf + seq[1];
		for (int k = 0; k < 4096; k += 511)
			assert_int_equal(p[k], done & 0xff);	/* the WRITE landed first */
		assert_int_equal(p[4095], done & 0xff);
		done++;
		post_recv(&f->b, f->qb, 64 * (wc.wr_id % (uint64_t)win), 64, wc.wr_id);
		posted++;
	}
	struct dev_wc wc;
	while (wait_wc(f->a.scq, &wc, 50) == 1)
		assert_int_equal(wc.status, DEV_WC_SUCCESS);
}

/* WRITE gathering two SGEs (as SMC-R does at the send-buffer wrap), SEND with two SGEs into a
 * receive WR with two SGEs. */
static void t_sge_pairs(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 3000; i++)
		f->a.lbuf[i] = (uint8_t)(i * 7);
	struct dev_sge sg[2] = { lsge(&f->a, 1000, 2000), lsge(&f->a, 0, 1000) };
	assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, sg, 2,
				   raddr(&f->b, 500), f->b.rmr->rkey, 0, 1), 0);
	expect_wc(f->a.scq, 1, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
	for (int i = 0; i < 2000; i++)
		assert_int_equal(f->b.rbuf[500 + i], (uint8_t)((1000 + i) * 7));
	for (int i = 0; i < 1000; i++)
		assert_int_equal(f->b.rbuf[2500 + i], (uint8_t)(i * 7));

	struct dev_sge rs[2] = { lsge(&f->b, 10000, 30), lsge(&f->b, 20000, 100) };
	struct dev_recv_wr rw = { .wr_id = 2, .sg_list = rs, .num_sge = 2 };
	assert_int_equal(dev_post_recv(f->qb, &rw, NULL), 0);
	struct dev_sge ss[2] = { lsge(&f->a, 0, 20), lsge(&f->a, 100, 40) };
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_SIGNALED, ss, 2, 0, 0, 0, 3), 0);
	expect_wc(f->a.scq, 3, DEV_WC_SUCCESS, DEV_WC_SEND);
	struct dev_wc wc;
	assert_int_equal(wait_wc(f->b.rcq, &wc, WAIT_MS), 1);
	assert_int_equal(wc.status, DEV_WC_SUCCESS);
	assert_int_equal(wc.byte_len, 60);
	uint8_t want[60];
	memcpy(want, f->a.lbuf, 20);
	memcpy(want + 20, f->a.lbuf + 100, 40);
	assert_memory_equal(f->b.lbuf + 10000, want, 30);
	assert_memory_equal(f->b.lbuf + 20000, want + 30, 30);
	/* A third SGE is more than the QP was created for. */
	struct dev_sge s3[3] = { lsge(&f->a, 0, 1), lsge(&f->a, 1, 1), lsge(&f->a, 2, 1) };
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, 0, s3, 3, 0, 0, 0, 4), -SMCR_E_DEV_BAD_WR);
}

/* WRITE_WITH_IMM: data in place, the immediate in a receive completion that consumed a WR. */
static void t_write_imm(void **state)
{
	struct fx *f = *state;
	if (not_modelled("WRITE_WITH_IMM (SMC-R v1 does not use it)"))
		return;
	memset(f->a.lbuf, 0x3c, 777);
	post_recv(&f->b, f->qb, 0, 16, 41);
	struct dev_sge sg = lsge(&f->a, 0, 777);
	assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE_WITH_IMM,
				   DEV_SEND_SIGNALED | DEV_SEND_SOLICITED, &sg, 1,
				   raddr(&f->b, 4096), f->b.rmr->rkey, 0xdeadbeef, 6), 0);
	expect_wc(f->a.scq, 6, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
	struct dev_wc wc;
	assert_int_equal(wait_wc(f->b.rcq, &wc, WAIT_MS), 1);
	assert_int_equal(wc.status, DEV_WC_SUCCESS);
	assert_int_equal(wc.opcode, DEV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.wr_id, 41);
	assert_true(wc.wc_flags & DEV_WC_WITH_IMM);
	assert_int_equal(wc.imm_data, 0xdeadbeef);
	assert_int_equal(wc.byte_len, 777);
	for (int i = 0; i < 777; i++)
		assert_int_equal(f->b.rbuf[4096 + i], 0x3c);
}

/* Completions: unsignaled WRs produce none; a send queue holds max_send_wr WRs until their
 * completions are polled (unsignaled ones retire with the next signaled one). */
static void t_completion_counts(void **state)
{
	struct fx *f = *state;
	if (not_modelled("send queue depth (the engine keeps its own, link.c sq_used)"))
		return;
	struct dev_sge sg = lsge(&f->a, 0, 64);
	/* the depth granted (verbs may round 64 up; the software providers grant 64) */
	const int depth = (int)f->qa->cap.max_send_wr, nsig = depth / 4;
	assert_true(depth >= 64 && depth <= 256);
	for (int i = 0; i < depth; i++)
		assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE,
					   (i % 4 == 3) ? DEV_SEND_SIGNALED : 0, &sg, 1,
					   raddr(&f->b, 0), f->b.rmr->rkey, 0, (uint64_t)i), 0);
	/* The queue is full until completions are polled (a hardware device may retire WRs
	 * as they are acknowledged and take more: verbs only promises the depth granted;
	 * rxe does so, so the core keeps its own count of WRs in flight). */
	if (!rc_hw())
		assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1,
					   raddr(&f->b, 0), f->b.rmr->rkey, 0, 99),
				 -SMCR_E_DEV_QUEUE_FULL);
	struct dev_wc wc[64];
	int got = 0;
	uint64_t end = smcr_now_ns() + WAIT_MS * SMCR_NS_PER_MS;
	while (got < nsig && smcr_now_ns() < end) {
		int n = dev_poll_cq(f->a.scq, 64 - got, wc + got);
		assert_true(n >= 0);
		got += n;
	}
	assert_int_equal(got, nsig);
	for (int i = 0; i < nsig; i++) {
		assert_int_equal(wc[i].status, DEV_WC_SUCCESS);
		assert_int_equal(wc[i].wr_id, (uint64_t)(i * 4 + 3));	/* in order */
	}
	expect_no_wc(f->a.scq, 20);
	/* All slots are free again. */
	for (int i = 0; i < depth; i++)
		assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1,
					   raddr(&f->b, 0), f->b.rmr->rkey, 0, (uint64_t)i), 0);
	for (int i = 0; i < depth; i++)
		expect_wc(f->a.scq, (uint64_t)i, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
	/* sq_sig_all. */
	struct dev_qp *qa = qp_new(&f->a, 4, 4, 1), *qb = qp_new(&f->b, 4, 4, 0);
	connect_pair(&f->a, qa, &f->b, qb, 7);
	assert_int_equal(post_send(qa, DEV_WR_RDMA_WRITE, 0, &sg, 1, raddr(&f->b, 0),
				   f->b.rmr->rkey, 0, 55), 0);
	expect_wc(f->a.scq, 55, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
	assert_int_equal(dev_destroy_qp(qa), 0);
	assert_int_equal(dev_destroy_qp(qb), 0);
	/* The peer saw its QP go away: only its async event, nothing to poll. */
	struct dev_async_event ev;
	while (dev_get_async_event(f->b.dev, &ev) == 0)
		;
}

/* Receive queue exhaustion, as RC: rnr_retry 7 (SMC-R) waits for a receive WR; rnr_retry 1
 * fails with RNR retry exceeded and both QPs go to ERR. */
static void t_rnr(void **state)
{
	struct fx *f = *state;
	if (not_modelled("a finite RNR retry (SMC-R sets 7: infinite, which it models)"))
		return;
	uint8_t m[44] = { 1, 2, 3 };
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)m, .length = 44 };
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &sg, 1,
				   0, 0, 0, 1), 0);
	expect_no_wc(f->a.scq, 100);	/* no receive WR: it waits (infinite RNR retry) */
	expect_no_wc(f->b.rcq, 0);
	post_recv(&f->b, f->qb, 0, 64, 2);
	expect_wc(f->b.rcq, 2, DEV_WC_SUCCESS, DEV_WC_RECV);
	expect_wc(f->a.scq, 1, DEV_WC_SUCCESS, DEV_WC_SEND);
	assert_int_equal(f->b.lbuf[2], 3);

	struct dev_qp *qa = qp_new(&f->a, 4, 4, 0), *qb = qp_new(&f->b, 4, 4, 0);
	connect_pair(&f->a, qa, &f->b, qb, 1);
	post_recv(&f->b, qb, 0, 64, 3);
	assert_int_equal(post_send(qa, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &sg, 1, 0,
				   0, 0, 10), 0);
	assert_int_equal(post_send(qa, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &sg, 1, 0,
				   0, 0, 11), 0);
	assert_int_equal(post_send(qa, DEV_WR_SEND, DEV_SEND_INLINE, &sg, 1, 0, 0, 0, 12), 0);
	expect_wc(f->a.scq, 10, DEV_WC_SUCCESS, DEV_WC_SEND);
	expect_wc(f->b.rcq, 3, DEV_WC_SUCCESS, DEV_WC_RECV);
	/* within expect_wc's wait: no tighter bound (a loaded machine stretches any) */
	expect_wc(f->a.scq, 11, DEV_WC_RNR_RETRY_EXC_ERR, DEV_WC_SEND);
	expect_wc(f->a.scq, 12, DEV_WC_WR_FLUSH_ERR, DEV_WC_SEND);	/* unsignaled, flushed */
	assert_int_equal(wait_state(qa, DEV_QPS_ERR, WAIT_MS), 0);
	if (!rc_hw())	/* RC: the responder only sent RNR NAKs and stays as it was */
		assert_int_equal(wait_state(qb, DEV_QPS_ERR, WAIT_MS), 0);
	assert_int_equal(dev_destroy_qp(qa), 0);
	assert_int_equal(dev_destroy_qp(qb), 0);

	/* A short transport timeout does not turn an RNR wait into retry exceeded: the peer
	 * is there, it just has no receive WR yet (posted right after RTS, before any
	 * handshake a provider may run). A property of the software providers' pairing: on
	 * hardware an 8 us transport timeout is the device's own business. */
	if (rc_hw())
		return;
	qa = qp_new(&f->a, 4, 4, 0);
	qb = qp_new(&f->b, 4, 4, 0);
	qp_init(qa);
	qp_init(qb);
	qp_rtr(qa, &f->b.gid, qb->qp_num);
	qp_rtr(qb, &f->a.gid, qa->qp_num);
	struct dev_qp_attr rts = { .qp_state = DEV_QPS_RTS, .timeout = 1, .retry_cnt = 0,
				   .rnr_retry = 7, .max_rd_atomic = 1 };
	assert_int_equal(dev_modify_qp(qa, &rts, DEV_QP_MASK_RTS), 0);
	qp_rts(qb, 7);
	assert_int_equal(post_send(qa, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &sg, 1, 0,
				   0, 0, 20), 0);
	expect_no_wc(f->a.scq, 300);
	post_recv(&f->b, qb, 0, 64, 21);
	expect_wc(f->b.rcq, 21, DEV_WC_SUCCESS, DEV_WC_RECV);
	expect_wc(f->a.scq, 20, DEV_WC_SUCCESS, DEV_WC_SEND);
	assert_int_equal(dev_destroy_qp(qa), 0);
	assert_int_equal(dev_destroy_qp(qb), 0);
}

/* A SEND longer than the receive WR: LOC_LEN_ERR there, REM_INV_REQ_ERR here (rule 7). */
static void t_recv_too_short(void **state)
{
	struct fx *f = *state;
	post_recv(&f->b, f->qb, 0, 16, 1);
	post_recv(&f->b, f->qb, 64, 64, 2);
	struct dev_sge sg = lsge(&f->a, 0, 40);
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_SIGNALED, &sg, 1, 0, 0, 0, 7), 0);
	if (rc_hw()) {
		/* the NAK's kind is the device's: rxe answers "remote operation error" */
		struct dev_wc wc;
		assert_int_equal(wait_wc(f->a.scq, &wc, WAIT_MS), 1);
		assert_int_equal(wc.wr_id, 7);
		print_message("[   INFO   ] too long SEND: sender %s\n", dev_wc_status_str(wc.status));
		assert_true(wc.status == DEV_WC_REM_INV_REQ_ERR || wc.status == DEV_WC_REM_OP_ERR);
		assert_int_equal(wait_wc(f->b.rcq, &wc, WAIT_MS), 1);
		assert_int_equal(wc.wr_id, 1);
		print_message("[   INFO   ] too long SEND: receiver %s\n", dev_wc_status_str(wc.status));
		assert_true(wc.status == DEV_WC_LOC_LEN_ERR || wc.status == DEV_WC_LOC_QP_OP_ERR);
	} else {
		expect_wc(f->a.scq, 7, DEV_WC_REM_INV_REQ_ERR, DEV_WC_SEND);
		expect_wc(f->b.rcq, 1, DEV_WC_LOC_LEN_ERR, DEV_WC_RECV);
	}
	expect_wc(f->b.rcq, 2, DEV_WC_WR_FLUSH_ERR, DEV_WC_RECV);
	assert_int_equal(wait_state(f->qa, DEV_QPS_ERR, WAIT_MS), 0);
	assert_int_equal(wait_state(f->qb, DEV_QPS_ERR, WAIT_MS), 0);
}

/* A bad rkey: remote access error at the sender, both QPs to ERR, the target's receive WRs
 * flushed and its QP_ACCESS_ERR event queued (rule 3). */
static void t_bad_rkey(void **state)
{
	struct fx *f = *state;
	post_recv(&f->b, f->qb, 0, 64, 1);
	post_recv(&f->b, f->qb, 64, 64, 2);
	struct dev_sge sg = lsge(&f->a, 0, 128);
	assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1,
				   raddr(&f->b, 0), f->b.rmr->rkey ^ 0x00ff0000u, 0, 5), 0);
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, 0, &sg, 1, 0, 0, 0, 6), 0);
	expect_wc(f->a.scq, 5, DEV_WC_REM_ACCESS_ERR, DEV_WC_RDMA_WRITE);
	expect_wc(f->a.scq, 6, DEV_WC_WR_FLUSH_ERR, DEV_WC_SEND);
	assert_int_equal(wait_state(f->qa, DEV_QPS_ERR, WAIT_MS), 0);
	expect_wc(f->b.rcq, 1, DEV_WC_WR_FLUSH_ERR, DEV_WC_RECV);
	expect_wc(f->b.rcq, 2, DEV_WC_WR_FLUSH_ERR, DEV_WC_RECV);
	if (rc_hw()) {
		struct dev_qp_attr qa;
		assert_int_equal(dev_query_qp(f->qb, &qa), 0);
		print_message("[   INFO   ] bad rkey: target QP %s\n", dev_qp_state_str(qa.qp_state));
	} else {
		assert_int_equal(wait_state(f->qb, DEV_QPS_ERR, WAIT_MS), 0);
		assert_int_equal(wait_event(f->b.dev, DEV_EVENT_QP_ACCESS_ERR, f->qb->qp_num,
					    WAIT_MS), 0);
	}
	/* Later WRs flush at once (rule 4). */
	print_message("[   INFO   ] bad rkey: send after ERR\n");
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_SIGNALED, &sg, 1, 0, 0, 0, 8), 0);
	expect_wc(f->a.scq, 8, DEV_WC_WR_FLUSH_ERR, DEV_WC_SEND);
	print_message("[   INFO   ] bad rkey: receive after ERR\n");
	post_recv(&f->b, f->qb, 0, 64, 9);
	expect_wc(f->b.rcq, 9, DEV_WC_WR_FLUSH_ERR, DEV_WC_RECV);
}

/* Out of bounds (one byte past the MR), a local-only MR's rkey, and another PD's MR are all
 * remote access errors. Each case on a fresh QP pair. */
static void t_out_of_bounds(void **state)
{
	struct fx *f = *state;
	struct dev_pd *pd2;
	struct dev_mr *mr2;
	assert_int_equal(dev_alloc_pd(f->b.dev, &pd2), 0);
	assert_int_equal(dev_reg_mr(pd2, f->b.rbuf, 4096,
				    DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE, &mr2), 0);
	struct { uint64_t addr; uint32_t len, rkey; } bad[] = {
		{ raddr(&f->b, BUF_LEN - 100), 101, f->b.rmr->rkey },
		{ raddr(&f->b, 0) - 1, 10, f->b.rmr->rkey },
		{ (uint64_t)(uintptr_t)f->b.lbuf, 10, f->b.lmr->rkey },	/* no REMOTE_WRITE */
		{ raddr(&f->b, 0), 10, mr2->rkey },			/* another PD */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct dev_qp *qa = qp_new(&f->a, 4, 4, 0), *qb = qp_new(&f->b, 4, 4, 0);
		connect_pair(&f->a, qa, &f->b, qb, 7);
		struct dev_sge sg = lsge(&f->a, 0, bad[i].len);
		/* In bounds first: it works (and proves the pair is connected). */
		assert_int_equal(post_send(qa, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1,
					   raddr(&f->b, BUF_LEN - bad[i].len), f->b.rmr->rkey, 0,
					   1), 0);
		expect_wc(f->a.scq, 1, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
		assert_int_equal(post_send(qa, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1,
					   bad[i].addr, bad[i].rkey, 0, 2), 0);
		expect_wc(f->a.scq, 2, DEV_WC_REM_ACCESS_ERR, DEV_WC_RDMA_WRITE);
		assert_int_equal(wait_state(qa, DEV_QPS_ERR, WAIT_MS), 0);
		assert_int_equal(wait_state(qb, DEV_QPS_ERR, WAIT_MS), 0);
		assert_int_equal(dev_destroy_qp(qa), 0);
		assert_int_equal(dev_destroy_qp(qb), 0);
	}
	assert_int_equal(dev_dereg_mr(mr2), 0);
	assert_int_equal(dev_dealloc_pd(pd2), 0);
}

/* Deregistration invalidates the rkey at once: the next WRITE fails. */
static void t_dereg_invalidates(void **state)
{
	struct fx *f = *state;
	struct dev_mem *m;
	struct dev_mr *mr;
	assert_int_equal(dev_mem_alloc(65536, "conf-dereg", &m), 0);
	assert_int_equal(dev_reg_mr(f->b.pd, m->addr, 65536,
				    DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE, &mr), 0);
	struct dev_sge sg = lsge(&f->a, 0, 1000);
	memset(f->a.lbuf, 0x77, 1000);
	/* Registered after the QPs connected: usable as soon as reg_mr returned. */
	assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1,
				   (uint64_t)(uintptr_t)m->addr + 100, mr->rkey, 0, 1), 0);
	expect_wc(f->a.scq, 1, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
	assert_int_equal(((uint8_t *)m->addr)[100], 0x77);
	uint32_t rkey = mr->rkey;
	uint64_t addr = (uint64_t)(uintptr_t)m->addr;
	assert_int_equal(dev_dereg_mr(mr), 0);
	assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1, addr,
				   rkey, 0, 2), 0);
	expect_wc(f->a.scq, 2, DEV_WC_REM_ACCESS_ERR, DEV_WC_RDMA_WRITE);
	dev_mem_free(m);
	assert_int_equal(wait_state(f->qb, DEV_QPS_ERR, WAIT_MS), 0);
}

/* Flush on ERR (rule 4): modify to ERR flushes every posted WR, later ones flush at once,
 * and the peer QP goes to ERR with QP_FATAL (its peer is gone, rule 5). */
static void t_flush_on_err(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 5; i++)
		post_recv(&f->a, f->qa, 64 * (uint64_t)i, 64, 100 + (uint64_t)i);
	struct dev_qp_attr a = { .qp_state = DEV_QPS_ERR };
	assert_int_equal(dev_modify_qp(f->qa, &a, DEV_QP_STATE), 0);
	for (int i = 0; i < 5; i++)
		expect_wc(f->a.rcq, 100 + (uint64_t)i, DEV_WC_WR_FLUSH_ERR, DEV_WC_RECV);
	struct dev_sge sg = lsge(&f->a, 0, 8);
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, 0, &sg, 1, 0, 0, 0, 200), 0);
	expect_wc(f->a.scq, 200, DEV_WC_WR_FLUSH_ERR, DEV_WC_SEND);	/* unsignaled: still */
	if (rc_hw()) {
		/* RC: the peer learns it when it sends (transport retries exhausted) */
		struct dev_sge sb = lsge(&f->b, 0, 8);
		assert_int_equal(post_send(f->qb, DEV_WR_SEND, DEV_SEND_SIGNALED, &sb, 1, 0, 0, 0,
					   201), 0);
		hw_silent_peer(f->qb, f->b.scq, 201, 5000, "peer in ERR");
	} else {
		assert_int_equal(wait_state(f->qb, DEV_QPS_ERR, WAIT_MS), 0);
		assert_int_equal(wait_event(f->b.dev, DEV_EVENT_QP_FATAL, f->qb->qp_num, WAIT_MS), 0);
	}
	/* ERR -> RESET -> INIT ... RTS again works with a new peer QP. */
	a.qp_state = DEV_QPS_RESET;
	assert_int_equal(dev_modify_qp(f->qa, &a, DEV_QP_STATE), 0);
	struct dev_qp *qb2 = qp_new(&f->b, 8, 8, 0);
	connect_pair(&f->a, f->qa, &f->b, qb2, 7);
	post_recv(&f->b, qb2, 0, 64, 1);
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_SIGNALED, &sg, 1, 0, 0, 0, 2), 0);
	expect_wc(f->a.scq, 2, DEV_WC_SUCCESS, DEV_WC_SEND);
	expect_wc(f->b.rcq, 1, DEV_WC_SUCCESS, DEV_WC_RECV);
	assert_int_equal(dev_destroy_qp(qb2), 0);
}

/* Completion fd in epoll: arm, sleep, wake on the peer's SEND; solicited-only arming ignores
 * an unsolicited SEND and wakes on the solicited one. */
static void t_cq_epoll(void **state)
{
	struct fx *f = *state;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	assert_true(ep >= 0);
	struct epoll_event ev = { .events = EPOLLIN };
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, f->b.rcq->comp_fd, &ev), 0);
	for (int i = 0; i < 4; i++)
		post_recv(&f->b, f->qb, 64 * (uint64_t)i, 64, (uint64_t)i);
	struct dev_wc wc;
	while (dev_get_cq_event(f->b.rcq) == 0)
		;	/* events of earlier arms (the fixture's waits) */
	assert_int_equal(dev_poll_cq(f->b.rcq, 1, &wc), 0);
	assert_int_equal(epoll_wait(ep, &ev, 1, 0), 0);
	assert_int_equal(dev_req_notify_cq(f->b.rcq, 0), 0);
	assert_int_equal(dev_poll_cq(f->b.rcq, 1, &wc), 0);
	assert_int_equal(epoll_wait(ep, &ev, 1, 20), 0);
	struct dev_sge sg = lsge(&f->a, 0, 44);
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, 0, &sg, 1, 0, 0, 0, 1), 0);
	assert_int_equal(epoll_wait(ep, &ev, 1, WAIT_MS), 1);
	assert_int_equal(dev_get_cq_event(f->b.rcq), 0);
	assert_int_equal(dev_get_cq_event(f->b.rcq), -SMCR_E_AGAIN);
	assert_int_equal(dev_poll_cq(f->b.rcq, 1, &wc), 1);
	assert_int_equal(wc.wr_id, 0);

	assert_int_equal(dev_req_notify_cq(f->b.rcq, 1), 0);
	assert_int_equal(dev_poll_cq(f->b.rcq, 1, &wc), 0);
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, 0, &sg, 1, 0, 0, 0, 2), 0);
	assert_int_equal(epoll_wait(ep, &ev, 1, 50), 0);	/* unsolicited: no wake-up */
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_SOLICITED, &sg, 1, 0, 0, 0, 3), 0);
	assert_int_equal(epoll_wait(ep, &ev, 1, WAIT_MS), 1);
	assert_int_equal(dev_get_cq_event(f->b.rcq), 0);
	assert_int_equal(wait_wc(f->b.rcq, &wc, WAIT_MS), 1);
	assert_int_equal(wc.wr_id, 1);
	assert_int_equal(wait_wc(f->b.rcq, &wc, WAIT_MS), 1);
	assert_int_equal(wc.wr_id, 2);
	close(ep);
}

/* Async events: port down raises PORT_ERR and takes the QPs (both sides) to ERR with
 * QP_FATAL; port up raises PORT_ACTIVE. Providers without the test hook skip this. */
static void t_async_events(void **state)
{
	struct fx *f = *state;
	int rc = dev_set_port_state(f->a.dev, 1, 0);
	if (rc == -SMCR_E_NOTSUP) {
		print_message("[  SKIP    ] %s has no port test hook\n", prov->name);
		return;
	}
	assert_int_equal(rc, 0);
	struct pollfd pfd = { .fd = f->a.dev->async_fd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
	assert_int_equal(wait_event(f->a.dev, DEV_EVENT_PORT_ERR, 0, WAIT_MS), 0);
	struct dev_port_attr pa;
	assert_int_equal(dev_query_port(f->a.dev, 1, &pa), 0);
	assert_int_equal(pa.state, DEV_PORT_DOWN);
	assert_int_equal(wait_state(f->qa, DEV_QPS_ERR, WAIT_MS), 0);
	assert_int_equal(wait_state(f->qb, DEV_QPS_ERR, WAIT_MS), 0);
	assert_int_equal(wait_event(f->b.dev, DEV_EVENT_QP_FATAL, f->qb->qp_num, WAIT_MS), 0);
	assert_int_equal(dev_set_port_state(f->a.dev, 1, 1), 0);
	assert_int_equal(wait_event(f->a.dev, DEV_EVENT_PORT_ACTIVE, 0, WAIT_MS), 0);
	assert_int_equal(dev_query_port(f->a.dev, 1, &pa), 0);
	assert_int_equal(pa.state, DEV_PORT_ACTIVE);
}

/* 1000 QP pairs between two devices: all connect, each carries a SEND, all go away. */
static void t_many_qps(void **state)
{
	(void)state;
	enum { N = 1000 };
	struct side a, b;
	assert_int_equal(side_open(&a, 4 * N), 0);
	assert_int_equal(side_open(&b, 4 * N), 0);
	struct dev_qp **qa = calloc(N, sizeof *qa), **qb = calloc(N, sizeof *qb);
	assert_non_null(qa);
	assert_non_null(qb);
	for (int i = 0; i < N; i++) {
		qa[i] = qp_new(&a, 2, 2, 0);
		qb[i] = qp_new(&b, 2, 2, 0);
		connect_pair(&a, qa[i], &b, qb[i], 7);
		post_recv(&b, qb[i], 64 * (uint64_t)i, 64, (uint64_t)i);
	}
	for (int i = 0; i < N; i++) {
		uint32_t v = (uint32_t)i * 2654435761u;
		struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)&v, .length = 4 };
		assert_int_equal(post_send(qa[i], DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED,
					   &sg, 1, 0, 0, 0, (uint64_t)i), 0);
	}
	int seen = 0, sent = 0;
	uint64_t end = smcr_now_ns() + 20 * SMCR_NS_PER_S;
	while ((seen < N || sent < N) && smcr_now_ns() < end) {
		struct dev_wc wc[64];
		int n = dev_poll_cq(b.rcq, 64, wc);
		assert_true(n >= 0);
		for (int k = 0; k < n; k++) {
			assert_int_equal(wc[k].status, DEV_WC_SUCCESS);
			uint32_t v;
			memcpy(&v, b.lbuf + 64 * wc[k].wr_id, 4);
			assert_int_equal(v, (uint32_t)wc[k].wr_id * 2654435761u);
			assert_int_equal(wc[k].qp_num, qb[wc[k].wr_id]->qp_num);
		}
		seen += n;
		n = dev_poll_cq(a.scq, 64, wc);
		assert_true(n >= 0);
		for (int k = 0; k < n; k++)
			assert_int_equal(wc[k].status, DEV_WC_SUCCESS);
		sent += n;
		if (!n)
			usleep(100);
	}
	assert_int_equal(seen, N);
	assert_int_equal(sent, N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(dev_destroy_qp(qa[i]), 0);
		assert_int_equal(dev_destroy_qp(qb[i]), 0);
	}
	free(qa);
	free(qb);
	side_close(&a);
	side_close(&b);
}

/* Two threads post on one QP and a third polls the send CQ while the main thread checks
 * every message (thread safety; runs under TSan). */
struct thr_arg {
	struct fx *f;
	int base, count;
};

static void *thr_post(void *p)
{
	struct thr_arg *t = p;
	for (int i = 0; i < t->count; i++) {
		uint32_t v[2] = { (uint32_t)t->base, (uint32_t)i };
		struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)v, .length = 8 };
		int rc;
		while ((rc = post_send(t->f->qa, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED,
				       &sg, 1, 0, 0, 0, (uint64_t)i)) == -SMCR_E_DEV_QUEUE_FULL)
			usleep(50);
		if (rc)
			return (void *)1;
	}
	return NULL;
}

static _Atomic int thr_stop;
static void *thr_poll(void *p)
{
	struct fx *f = p;
	while (!atomic_load(&thr_stop)) {
		struct dev_wc wc[16];
		int n = dev_poll_cq(f->a.scq, 16, wc);
		for (int i = 0; i < n; i++)
			if (wc[i].status != DEV_WC_SUCCESS)
				return (void *)1;
		if (!n)
			usleep(20);
	}
	return NULL;
}

static void t_threads(void **state)
{
	struct fx *f = *state;
	if (not_modelled("send queue depth, which bounds the posters here"))
		return;
	enum { PER = 3000, WIN = 64 };
	for (int i = 0; i < WIN; i++)
		post_recv(&f->b, f->qb, 16 * (uint64_t)i, 16, (uint64_t)i);
	atomic_store(&thr_stop, 0);
	pthread_t t1, t2, tp;
	struct thr_arg a1 = { f, 1, PER }, a2 = { f, 2, PER };
	assert_int_equal(pthread_create(&tp, NULL, thr_poll, f), 0);
	assert_int_equal(pthread_create(&t1, NULL, thr_post, &a1), 0);
	assert_int_equal(pthread_create(&t2, NULL, thr_post, &a2), 0);
	uint32_t next[3] = { 0, 0, 0 };
	for (int got = 0; got < 2 * PER; got++) {
		struct dev_wc wc;
		assert_int_equal(wait_wc(f->b.rcq, &wc, WAIT_MS), 1);
		assert_int_equal(wc.status, DEV_WC_SUCCESS);
		uint32_t v[2];
		memcpy(v, f->b.lbuf + 16 * wc.wr_id, 8);
		assert_true(v[0] == 1 || v[0] == 2);
		assert_int_equal(v[1], next[v[0]]);	/* per-poster order kept */
		next[v[0]]++;
		post_recv(&f->b, f->qb, 16 * wc.wr_id, 16, wc.wr_id);
	}
	void *r1, *r2, *rp;
	pthread_join(t1, &r1);
	pthread_join(t2, &r2);
	atomic_store(&thr_stop, 1);
	pthread_join(tp, &rp);
	assert_null(r1);
	assert_null(r2);
	assert_null(rp);
}

/* A peer process killed in the middle of a transfer: our QP is in ERR within 100 ms
 * (shm; other providers: within their transport timeout, at most 2 s), even though the peer
 * had forked a child (no exec) that is still alive and inherited its descriptors. */
static int peer_main(int rfd, int wfd)
{
	struct side s;
	if (side_open(&s, 256))
		return 2;
	struct dev_qp_init_attr ia = { .send_cq = s.scq, .recv_cq = s.rcq,
				       .cap = { 16, 16, 2, 2, 64 } };
	struct dev_qp *q;
	if (dev_create_qp(s.pd, &ia, &q))
		return 3;
	struct conf_peer_ends me, them;
	me.gid = s.gid;
	me.qpn = q->qp_num;
	me.rkey = s.rmr->rkey;
	me.addr = (uint64_t)(uintptr_t)s.rbuf;
	if (write(wfd, &me, sizeof me) != (ssize_t)sizeof me ||
	    read(rfd, &them, sizeof them) != (ssize_t)sizeof them)
		return 4;
	qp_init(q);
	qp_rtr(q, &them.gid, them.qpn);
	qp_rts(q, 7);
	/* Transfer forever: 64 KiB WRITEs followed by a SEND, paced by completions. */
	for (uint64_t i = 0;; i++) {
		if (i == 1) {
			/* Connected now. A child forked without exec must not keep the
			 * connection alive after we die. */
			pid_t child = fork();
			if (child == 0) {
				sleep(10);
				_exit(0);
			}
			if (child < 0 ||
			    write(wfd, &child, sizeof child) != (ssize_t)sizeof child)
				return 8;
		}
		struct dev_sge sg = lsge(&s, 0, 65536);
		if (post_send(q, DEV_WR_RDMA_WRITE, 0, &sg, 1, them.addr, them.rkey, 0, i))
			return 5;
		struct dev_sge ss = lsge(&s, 0, 44);
		if (post_send(q, DEV_WR_SEND, DEV_SEND_SIGNALED, &ss, 1, 0, 0, 0, i))
			return 6;
		struct dev_wc wc;
		if (wait_wc(s.scq, &wc, 5000) != 1 || wc.status != DEV_WC_SUCCESS)
			return 7;
	}
}

static void t_peer_killed(void **state)
{
	(void)state;
	if (not_modelled("a peer in another process (its devices live in one process; "
			 "loopdev_kill is the in-process death, used by the engine tests)"))
		return;
	struct side a;
	assert_int_equal(side_open(&a, 256), 0);
	struct dev_qp *q = qp_new(&a, 16, 64, 0);
	int p2c[2], c2p[2];
	assert_int_equal(pipe2(p2c, O_CLOEXEC), 0);
	assert_int_equal(pipe2(c2p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char r[16], w[16];
		snprintf(r, sizeof r, "%d", p2c[0]);
		snprintf(w, sizeof w, "%d", c2p[1]);
		fcntl(p2c[0], F_SETFD, 0);
		fcntl(c2p[1], F_SETFD, 0);
		execl(self_path, self_path, prov->name, "--peer", r, w, (char *)NULL);
		_exit(127);
	}
	close(p2c[0]);
	close(c2p[1]);
	struct conf_peer_ends me, them;
	me.gid = a.gid;
	me.qpn = q->qp_num;
	me.rkey = a.rmr->rkey;
	me.addr = (uint64_t)(uintptr_t)a.rbuf;
	assert_int_equal(read(c2p[0], &them, sizeof them), (ssize_t)sizeof them);
	assert_int_equal(write(p2c[1], &me, sizeof me), (ssize_t)sizeof me);
	qp_init(q);
	for (int i = 0; i < 64; i++)
		post_recv(&a, q, 64 * (uint64_t)i, 64, (uint64_t)i);
	qp_rtr(q, &them.gid, them.qpn);
	qp_rts(q, 7);
	pid_t grandchild;
	assert_int_equal(read(c2p[0], &grandchild, sizeof grandchild), (ssize_t)sizeof grandchild);
	/* Let the transfer run: a few messages in, repost as they come. */
	for (int got = 0; got < 20; got++) {
		struct dev_wc wc;
		assert_int_equal(wait_wc(a.rcq, &wc, 5000), 1);
		assert_int_equal(wc.status, DEV_WC_SUCCESS);
		post_recv(&a, q, 64 * wc.wr_id, 64, wc.wr_id);
	}
	kill(pid, SIGKILL);
	uint64_t t0 = smcr_now_ns();
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	peer_gone_check(&a, q, 64, t0, 5000);
	close(p2c[1]);
	close(c2p[0]);
	kill(grandchild, SIGKILL);	/* it was alive all along: our QP died anyway */
	assert_int_equal(dev_destroy_qp(q), 0);
	side_close(&a);
}

/* Nothing leaks: the fd count is back where it was after everything is closed (memory is
 * ASan's leak checker's job). */
static void t_no_leak(void **state)
{
	(void)state;
	int before = count_fds();
	struct side a, b;
	assert_int_equal(side_open(&a, 64), 0);
	assert_int_equal(side_open(&b, 64), 0);
	struct dev_qp *qa = qp_new(&a, 8, 8, 0), *qb = qp_new(&b, 8, 8, 0);
	connect_pair(&a, qa, &b, qb, 7);
	post_recv(&b, qb, 0, 64, 1);
	struct dev_sge sg = lsge(&a, 0, 4096);
	assert_int_equal(post_send(qa, DEV_WR_RDMA_WRITE, 0, &sg, 1, raddr(&b, 0), b.rmr->rkey, 0,
				   1), 0);
	sg.length = 32;
	assert_int_equal(post_send(qa, DEV_WR_SEND, DEV_SEND_SIGNALED, &sg, 1, 0, 0, 0, 2), 0);
	expect_wc(b.rcq, 1, DEV_WC_SUCCESS, DEV_WC_RECV);
	expect_wc(a.scq, 2, DEV_WC_SUCCESS, DEV_WC_SEND);
	assert_true(count_fds() > before);
	assert_int_equal(dev_destroy_qp(qa), 0);
	assert_int_equal(dev_destroy_qp(qb), 0);
	side_close(&a);
	side_close(&b);
	assert_int_equal(count_fds(), before);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s <provider> [--peer rfd wfd | --serve PORT | --remote HOST PORT]\n",
			argv[0]);
		return 2;
	}
	self_path = argv[0];
	for (size_t i = 0; i < sizeof conf_providers / sizeof conf_providers[0]; i++)
		if (strcmp(conf_providers[i].name, argv[1]) == 0)
			prov = &conf_providers[i];
	if (!prov) {
		fprintf(stderr, "unknown provider %s (see providers.def)\n", argv[1]);
		return 2;
	}
	if (prov->reg() != 0) {
		fprintf(stderr, "provider %s failed to register\n", prov->name);
		return 1;
	}
	if (argc == 5 && strcmp(argv[2], "--peer") == 0)
		return peer_main(atoi(argv[3]), atoi(argv[4]));
	if (argc >= 3 && (strcmp(argv[2], "--serve") == 0 || strcmp(argv[2], "--remote") == 0))
		return conf_twohost_main(self_path, argc - 2, argv + 2);
	struct dev_device *probe;
	int rc = dev_open(prov->spec ? prov->spec : prov->name, &probe);
	if (rc == -SMCR_E_DEV_NO_DEVICE) {
		printf("SKIP: provider %s has no device on this machine\n", prov->name);
		return 77;
	}
	if (rc) {
		fprintf(stderr, "dev_open(%s): %s\n", prov->name, smcr_err_msg(rc));
		return 1;
	}
	dev_close(probe);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_query, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_qp_states, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_send_inline, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_write_then_send, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_sge_pairs, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_write_imm, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_completion_counts, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_rnr, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_recv_too_short, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_bad_rkey, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_out_of_bounds, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_dereg_invalidates, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_flush_on_err, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_cq_epoll, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_async_events, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(t_threads, fx_setup, fx_teardown),
		cmocka_unit_test(t_many_qps),
		cmocka_unit_test(t_peer_killed),
		cmocka_unit_test(t_no_leak),
	};
	char name[64];
	snprintf(name, sizeof name, "conformance_%s", prov->name);
	return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
