/* fuzz_emu_rx.c: libFuzzer target for the emu provider's receive side (emu_rx.c), the code
 * that applies a hostile peer's frames to this process's memory and queues. Each input is
 * the byte stream a connected QP receives: a fresh QP is created per input and put in RTS
 * with a connection of its own (no socket: fd -1, so nothing is sent), four receive WRs of
 * 64 bytes are posted, the bytes are applied, then the QP is destroyed and its completions
 * and events drained. Memory a WRITE may reach: a 64 KiB MR with REMOTE_WRITE mapped at the
 * fixed address 0x5a000000 (its rkey is the first key of the device: 0x0000005b) and a local
 * MR; everything else must be refused. ASan/UBSan catch any access outside them; the harness
 * checks that nothing was written outside the remote-writable MR and the receive buffers.
 * Seed corpus: tests/fuzz/corpus/fuzz_emu_rx/. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dev/emu/emu_int.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RMR_ADDR ((void *)0x5a000000ul)
#define RMR_LEN 65536u
#define LMR_LEN 4096u

static struct dev_device *dev;
static struct dev_pd *pd;
static struct dev_cq *cq;
static struct dev_mr *rmr, *lmr;
static uint8_t *rbuf, *lbuf, *guard;

static void setup(void)
{
	smcr_log_set_level(SMCR_LOG_ERROR);
	if (dev_emu_register() || dev_open("emu:ip=127.0.0.1,port=0", &dev) ||
	    dev_alloc_pd(dev, &pd) || dev_create_cq(dev, 64, NULL, &cq))
		abort();
	/* [guard | remote MR | guard] so a stray write would be seen. */
	uint8_t *m = mmap((uint8_t *)RMR_ADDR - 4096, RMR_LEN + 8192, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (m == MAP_FAILED)
		abort();
	guard = m;
	rbuf = m + 4096;
	lbuf = malloc(LMR_LEN);
	if (!lbuf || dev_reg_mr(pd, rbuf, RMR_LEN, DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE,
				&rmr) ||
	    dev_reg_mr(pd, lbuf, LMR_LEN, DEV_ACCESS_LOCAL_WRITE, &lmr))
		abort();
	if (rmr->rkey != 0x5b)
		abort();	/* the seed corpus writes with this rkey */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dev)
		setup();
	if (size > EMU_RXBUF)
		size = EMU_RXBUF;
	struct dev_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq,
				       .cap = { 8, 8, 2, 2, 64 } };
	struct dev_qp *qp;
	if (dev_create_qp(pd, &ia, &qp))
		abort();
	struct dev_qp_attr a = { .qp_state = DEV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE };
	if (dev_modify_qp(qp, &a, DEV_QP_MASK_INIT))
		abort();
	for (uint64_t i = 0; i < 4; i++) {
		struct dev_sge sg = { (uint64_t)(uintptr_t)lbuf + 64 * i, 64, lmr->lkey };
		struct dev_recv_wr rw = { .wr_id = i, .sg_list = &sg, .num_sge = 1 };
		if (dev_post_recv(qp, &rw, NULL))
			abort();
	}
	memset(guard, 0xee, 4096);
	memset(rbuf + RMR_LEN, 0xee, 4096);

	struct emu_qp *q = EMU_QP(qp);
	pthread_mutex_lock(&q->lock);
	/* Connected in RTS with two frames outstanding (so ACK/NAK/RNR 1..2 are valid). */
	q->state = DEV_QPS_RTS;
	atomic_store(&q->qp.state, DEV_QPS_RTS);
	q->dest_qpn = 0x42;
	q->ack_timeout_ns = EMU_ACK_TIMEOUT_MAX_NS;
	q->min_rnr_timer = 1;
	q->tx_seq = 2;
	q->cs = EMU_CS_UP;
	q->rx.buf = malloc(EMU_RXBUF);
	if (!q->rx.buf)
		abort();
	memcpy(q->rx.buf, data, size);
	q->rx.start = 0;
	q->rx.end = (uint32_t)size;
	emu_rx_process_locked(q);
	if (q->rx.start > q->rx.end || q->rx.end > EMU_RXBUF)
		abort();
	if (q->rx_parked && q->rnr_deadline != UINT64_MAX)
		emu_rx_rnr_expired_locked(q);	/* the RNR timer path as well */
	pthread_mutex_unlock(&q->lock);

	if (dev_destroy_qp(qp))
		abort();
	struct dev_wc wc[16];
	while (dev_poll_cq(cq, 16, wc) > 0)
		;
	struct dev_async_event ev;
	while (dev_get_async_event(dev, &ev) == 0)
		;
	for (int i = 0; i < 4096; i++)
		if (guard[i] != 0xee || rbuf[RMR_LEN + i] != 0xee)
			abort();	/* a WRITE went past the MR */
	return 0;
}
