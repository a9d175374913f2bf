/* fuzz_shm_rx.c: libFuzzer target for the shm provider's receive path (shm_qp.c
 * rx_consume_locked over shm_ring_peek/get_data, reached through dev_poll_cq): what a hostile
 * peer process can do to a receiving QP by writing anything into the inbound ring it was
 * given (docs/parts/dev-shm.md "trust boundary"; fuzz_shm_ring covers the ring reader alone).
 *
 * Two shm devices in this process, A the victim and B the peer. Per input a fresh QP pair is
 * connected through the real control protocol, the victim posts receive WRs, then the input
 * is written into the victim's ring through B's mapping of it (exactly the memory the peer
 * process can write) and published, and the victim polls. Input layout:
 *   byte 0      number of receive WRs (0..8)
 *   byte 1      their capacity: 16 << (b % 9) bytes (16..4096), over two SGEs
 *   bytes 2..5  u32 (little endian): top bit clear, publish (value % (2 * ring cells + 1))
 *               cells; top bit set, publish that many (an absurd producer index)
 *   bytes 6..   raw ring cells from the current producer position on (wrapping)
 * Checks (abort on violation): successful receive completions come in posting order, a
 * SEND's byte_len <= the WR's capacity; nothing outside the receive buffers changes; the victim
 * never polls more completions than WRs it posted. ASan/UBSan catch any stray access.
 * Seed corpus: tests/fuzz/corpus/fuzz_shm_rx/. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev/shm/shm.h"
#include "dev/shm/shm_int.h"
#include "util/clock.h"
#include "util/log.h"
#include "lib/shmdir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NWR 8u
#define BUF_LEN (NWR * 4096u)
#define GUARD 4096u

struct side {
	struct dev_device *dev;
	struct dev_pd *pd;
	struct dev_cq *cq;
	struct dev_mr *mr;
	struct dev_gid gid;
};

static struct side A, B;
static uint8_t *mem;	/* [guard | BUF_LEN receive buffers | guard], registered whole */

static void side_open(struct side *s)
{
	struct dev_gid_entry ge;
	if (dev_open("shm", &s->dev) || dev_alloc_pd(s->dev, &s->pd) ||
	    dev_create_cq(s->dev, 64, NULL, &s->cq) || dev_query_gid(s->dev, 1, 0, &ge))
		abort();
	s->gid = ge.gid;
}

static void setup(void)
{
	smcr_log_set_level(SMCR_LOG_ERROR);
	/* the devices live until the process ends: their rendezvous files go then */
	if (shmdir_make("smcr-fuzz-shm") || dev_shm_register())
		abort();
	side_open(&A);
	side_open(&B);
	mem = calloc(1, BUF_LEN + 2 * GUARD);
	if (!mem || dev_reg_mr(A.pd, mem, BUF_LEN + 2 * GUARD, DEV_ACCESS_LOCAL_WRITE, &A.mr))
		abort();
}

static struct dev_qp *qp_new(struct side *s)
{
	struct dev_qp_init_attr ia = { .send_cq = s->cq, .recv_cq = s->cq,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 16,
						.max_send_sge = 2, .max_recv_sge = 2,
						.max_inline_data = 64 } };
	struct dev_qp *q;
	if (dev_create_qp(s->pd, &ia, &q))
		abort();
	struct dev_qp_attr a = { .qp_state = DEV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = DEV_ACCESS_LOCAL_WRITE };
	if (dev_modify_qp(q, &a, DEV_QP_MASK_INIT | DEV_QP_PKEY_INDEX))
		abort();
	return q;
}

static void qp_up(struct dev_qp *q, const struct dev_gid *dgid, uint32_t dqpn)
{
	struct dev_qp_attr r = { .qp_state = DEV_QPS_RTR, .path_mtu = DEV_MTU_1024,
				 .dest_qp_num = dqpn, .rq_psn = 1, .min_rnr_timer = 5,
				 .max_dest_rd_atomic = 1 };
	r.ah_attr.dgid = *dgid;
	r.ah_attr.hop_limit = 1;
	r.ah_attr.port_num = 1;
	if (dev_modify_qp(q, &r, DEV_QP_MASK_RTR))
		abort();
	struct dev_qp_attr t = { .qp_state = DEV_QPS_RTS, .sq_psn = 1, .timeout = 15,
				 .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1 };
	if (dev_modify_qp(q, &t, DEV_QP_MASK_RTS))
		abort();
}

static int conn_up(struct shm_qp *q)
{
	pthread_mutex_lock(&q->sq_lock);
	int up = q->conn == SHM_CONN_UP;
	pthread_mutex_unlock(&q->sq_lock);
	return up;
}

static void drain(void)
{
	struct dev_wc wc[16];
	struct dev_async_event ev;
	while (dev_poll_cq(A.cq, 16, wc) > 0 || dev_poll_cq(B.cq, 16, wc) > 0)
		;
	while (dev_get_async_event(A.dev, &ev) == 0 || dev_get_async_event(B.dev, &ev) == 0)
		;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!mem)
		setup();
	if (size < 6)
		return 0;
	uint32_t nwr = data[0] % (NWR + 1);
	uint32_t cap = 16u << (data[1] % 9);
	uint32_t extra;
	memcpy(&extra, data + 2, 4);
	data += 6;
	size -= 6;

	struct dev_qp *qa = qp_new(&A), *qb = qp_new(&B);
	qp_up(qa, &B.gid, qb->qp_num);
	qp_up(qb, &A.gid, qa->qp_num);
	struct shm_qp *va = shm_qp_of(qa), *eb = shm_qp_of(qb);
	uint64_t end = smcr_now_ns() + 5000 * SMCR_NS_PER_MS;
	while (!(conn_up(va) && conn_up(eb))) {
		if (smcr_now_ns() > end)
			abort();	/* the pair never connected: not the input's doing */
		usleep(20);
	}

	memset(mem, 0xee, BUF_LEN + 2 * GUARD);
	for (uint32_t i = 0; i < nwr; i++) {
		uint8_t *b = mem + GUARD + i * 4096u;
		struct dev_sge sg[2] = { { (uint64_t)(uintptr_t)b, cap / 2, A.mr->lkey },
					 { (uint64_t)(uintptr_t)(b + cap / 2), cap - cap / 2,
					   A.mr->lkey } };
		struct dev_recv_wr w = { .wr_id = i, .sg_list = sg, .num_sge = 2 };
		if (dev_post_recv(qa, &w, NULL))
			abort();
	}

	/* B's view of A's inbound ring: write the cells, publish. */
	pthread_mutex_lock(&eb->sq_lock);
	struct shm_ring *r = &eb->tx;
	uint32_t base = eb->tx_prod;
	size_t ring_bytes = (size_t)r->ncells * SHM_CELL;
	size_t n = size < ring_bytes ? size : ring_bytes;
	size_t pos = (size_t)(base & (r->ncells - 1)) * SHM_CELL;
	size_t first = n < ring_bytes - pos ? n : ring_bytes - pos;
	memcpy(r->cells + pos, data, first);
	memcpy(r->cells, data + first, n - first);
	/* top bit clear: 0..2*ncells cells (fewer or more than written); set: anything */
	uint32_t prod = extra & 0x80000000u ? base + extra : base + extra % (2 * r->ncells + 1);
	(void)shm_ring_publish(r, prod);
	pthread_mutex_unlock(&eb->sq_lock);

	/* The victim polls: completions in order, within capacity. */
	uint32_t polled = 0, next_ok = 0;
	int idle = 0;
	while (idle < 3) {
		struct dev_wc wc[8];
		int k = dev_poll_cq(A.cq, 8, wc);
		if (k < 0)
			abort();
		if (k == 0) {
			idle++;
			continue;
		}
		idle = 0;
		for (int i = 0; i < k; i++) {
			if (wc[i].qp_num != qa->qp_num)
				continue;
			polled++;
			if (wc[i].status != DEV_WC_SUCCESS)
				continue;
			/* a WRITE_WITH_IMM's byte_len counts bytes written elsewhere (the MR
			 * the peer wrote): only a SEND's is bounded by the WR */
			if (wc[i].wr_id != next_ok || wc[i].wr_id >= nwr ||
			    (wc[i].opcode == DEV_WC_RECV && wc[i].byte_len > cap))
				abort();
			next_ok++;
		}
		if (polled > nwr)
			abort();	/* more receive completions than receive WRs */
	}
	for (uint32_t i = 0; i < GUARD; i++)
		if (mem[i] != 0xee || mem[GUARD + BUF_LEN + i] != 0xee)
			abort();	/* written outside the receive buffers */
	for (uint32_t i = 0; i < nwr; i++)
		for (uint32_t j = cap; j < 4096u; j++)
			if (mem[GUARD + i * 4096u + j] != 0xee)
				abort();	/* written past a WR's capacity */

	if (dev_destroy_qp(qa) || dev_destroy_qp(qb))
		abort();
	drain();
	return 0;
}
