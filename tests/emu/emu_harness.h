/* emu_harness.h: helpers shared by the emu provider's tests (tests/emu/): one side of a QP
 * connection (device, PD, CQs, QP, a registered buffer), bringing two sides up in a chosen
 * order, waiting for completions and async events with a timeout. cmocka asserts inside. */
#ifndef SMCR_TESTS_EMU_HARNESS_H
#define SMCR_TESTS_EMU_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "dev/dev.h"

struct eh_side {
	struct dev_device *dev;
	struct dev_pd *pd;
	struct dev_cq *scq, *rcq;
	struct dev_qp *qp;
	struct dev_mem *mem;	/* memlen bytes, registered as mr */
	struct dev_mr *mr;
};

/* Opens dev with the spec; asserts success. */
struct dev_device *eh_open(const char *spec);
/* Registers the provider (idempotent). */
void eh_register(void);
/* PD, CQs (64 entries each), a QP (sq 64, rq 64, 2 SGEs, 64 inline) and a buffer of memlen
 * bytes registered with mr_access. The QP is in RESET. */
void eh_side_init(struct eh_side *s, struct dev_device *dev, size_t memlen, unsigned mr_access);
/* Destroys what eh_side_init made (not the device). */
void eh_side_fini(struct eh_side *s);
void eh_qp_init(struct eh_side *s, unsigned qp_access);
void eh_qp_rtr(struct eh_side *s, const struct eh_side *peer);
void eh_qp_rts(struct eh_side *s, uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry);
/* INIT both (LOCAL|REMOTE_WRITE), RTR first then second, RTS both with SMC-R's values
 * (timeout 15, retry 7, rnr_retry 7). */
void eh_connect(struct eh_side *first, struct eh_side *second);
/* One completion within timeout_ms: 1, or 0 on timeout. */
int eh_poll(struct dev_cq *cq, struct dev_wc *wc, int timeout_ms);
/* Waits for an async event of type (for qpn when a QP event; other events are skipped):
 * 1 when seen, 0 on timeout. */
int eh_event(struct dev_device *d, enum dev_event_type type, uint32_t qpn, int timeout_ms);
/* Posts one WR with one SGE over [addr, addr+len) of s->mr. */
void eh_post_send(struct eh_side *s, enum dev_wr_opcode op, uint64_t wr_id, size_t off,
		  uint32_t len, const struct eh_side *peer, size_t roff, unsigned flags);
void eh_post_recv(struct eh_side *s, uint64_t wr_id, size_t off, uint32_t len);
/* QP state via dev_query_qp. */
enum dev_qp_state eh_state(struct dev_qp *qp);
/* Polls until qp reaches state or timeout_ms passes: 1 / 0. */
int eh_wait_state(struct dev_qp *qp, enum dev_qp_state st, int timeout_ms);
uint64_t eh_now_ms(void);

#endif
