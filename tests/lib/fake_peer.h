/* fake_peer.h: a hand-driven SMC-R server for hostile-peer tests. It owns a raw QP, CQ and
 * RMB on an in-process device, answers the engine's Proposal with an Accept of its own,
 * brings its QP up and then sends whatever LLC / CDC / WRITE a test wants, well-formed or
 * not; it shows the test what the engine sent back. No protocol logic of its own. */
#ifndef SMCR_TESTS_FAKE_PEER_H
#define SMCR_TESTS_FAKE_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dev/dev.h"
#include "wire/curs.h"

#define FP_MSGS 32

struct fake_peer {
	struct dev_device *dev;
	struct dev_pd *pd;
	struct dev_cq *cq;
	struct dev_qp *qp;
	struct dev_mem *mem;		/* the fake's RMB memory (mem_len bytes, all registered) */
	struct dev_mr *mr;
	size_t rmb_off;			/* the advertised RMB starts here in mem */
	uint8_t size_code;		/* advertised RMBE size code */
	uint32_t rmbe_size;
	struct dev_mem *msg;		/* FP_MSGS receive buffers + 1 send buffer, 64 bytes each */
	struct dev_mr *msgmr;
	uint32_t token, psn;
	/* learned from the engine's Confirm */
	uint32_t peer_token, peer_rkey, peer_qpn, peer_psn, peer_size;
	uint64_t peer_vaddr;
	uint16_t seq;
	uint64_t rx_cons;		/* how far the fake has "read" its RMBE (absolute) */
};

/* Opens a device (spec) and sets up the QP and an RMB: mem_len bytes registered, the RMB
 * advertised at rmb_off with the given size code. */
int fp_open(struct fake_peer *f, const char *spec, size_t mem_len, size_t rmb_off,
	    uint8_t size_code);
void fp_close(struct fake_peer *f);
/* Server side of the handshake: Accept (first contact) for the given Proposal. */
int fp_accept(struct fake_peer *f, uint8_t acc[68]);
/* Takes the engine's Confirm, brings the QP to RTS and sends CONFIRM LINK (flags byte 3). */
int fp_confirm(struct fake_peer *f, const uint8_t *conf, size_t len, uint8_t cl_flags);
/* Sends 44 raw bytes. */
int fp_send(struct fake_peer *f, const uint8_t msg[44]);
/* Sends a CDC (cursors as given, token = the engine's unless token != 0). */
int fp_cdc(struct fake_peer *f, uint16_t seq, uint32_t token, struct curs prod, struct curs cons,
	   uint8_t pflags, uint8_t cflags);
/* RDMA WRITE of len bytes at offset off of the engine's RMBE. */
int fp_write(struct fake_peer *f, uint64_t off, const void *data, size_t len);
/* Collects messages the engine sent (up to max, 44 bytes each); returns the count. */
int fp_recv(struct fake_peer *f, uint8_t (*out)[44], int max);
/* Pointer to the advertised RMBE (what the engine writes into). */
uint8_t *fp_rmbe(struct fake_peer *f);

#endif
