/* shm_ring.h: the shared-memory SPSC message ring of the shm provider: how a SEND or a
 * WRITE_WITH_IMM notice travels from the sending QP into the receiving QP's memory
 * (docs/parts/dev-shm.md "Rings"; RC ordering rules of dev.h).
 *
 * Each connected QP owns one inbound ring: a sealed memfd it creates at connection time and
 * passes to the peer, which maps it read-write. The ring holds:
 *   - a header with two cache lines: one the producer (the peer) writes, one the consumer
 *     (the owner) writes, and the caps[] array the consumer writes;
 *   - ncells cells of 64 bytes. A message is one header cell (16-byte header + first 48
 *     data bytes) followed by continuation cells; it may wrap at the ring end (a copy is
 *     at most two chunks, STYLE.md 21).
 * Counters (prod, cons in cells; credits in receive WRs) are free-running u32 values; all
 * differences are taken modulo 2^32.
 *
 * Trust: the peer may write anything, at any time, into the whole mapping. The consumer keeps
 * its own cons and the producer its own prod; every value read from the ring (prod, cons,
 * credits, caps, the message header) is validated before use and read exactly once
 * (atomic loads, so the compiler cannot fetch it twice). A violation is reported as a
 * distinct -SMCR_E_SHM_RING_* code and the caller moves the QP to ERR. */
#ifndef SMCR_DEV_SHM_RING_H
#define SMCR_DEV_SHM_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define SHM_CELL 64u			/* bytes per cell: one cache line */
#define SHM_MSG_HDR 16u			/* message header at the start of its first cell */
#define SHM_FIRST_DATA (SHM_CELL - SHM_MSG_HDR)	/* data bytes in the first cell: 48 */
#define SHM_MAX_SEND 4096u		/* largest SEND (dev_port_attr.max_send_sz) */
#define SHM_RING_CELLS 512u		/* cells per ring (32 KiB): >= 7 largest SENDs */
#define SHM_RING_MAX_CELLS 65536u	/* largest ring a peer may announce */
#define SHM_CAPS_MAX 4096u		/* largest caps[] (= receive queue depth bound) */
#define SHM_CAPS_MAX_WR SHM_CAPS_MAX	/* largest receive queue a peer may announce */

/* Message operations (header byte 4). */
enum shm_ring_op {
	SHM_OP_SEND = 1,
	SHM_OP_WRITE_IMM = 2,	/* notice of a WRITE_WITH_IMM: len = bytes written, no data */
};
#define SHM_MSGF_SOLICITED 0x01u

/* need_wake values (the consumer's CQ arming mode). */
#define SHM_WAKE_NONE 0u
#define SHM_WAKE_ANY 1u
#define SHM_WAKE_SOLICITED 2u

/* The ring header in shared memory. Two cache lines so the two writers never share one.
 * Who writes each field is stated; "consumer" is the ring's owner (receiver), "producer" the
 * peer that sends into it. Both sides treat every field the other writes as hostile. */
struct shm_ring_hdr {
	/* --- line 0: written by the producer, read by the consumer --- */
	_Atomic uint32_t prod;		/* cells published (release by producer: covers the
					 * message bytes and every WRITE before it; acquire by
					 * the consumer before it reads them) */
	_Atomic uint32_t busy_rkey;	/* rkey of the producer's WRITE in progress, 0 if none:
					 * seq_cst store before checking the owner's rkey table,
					 * so dereg on the owner side can wait for it (shm_mr.c) */
	_Atomic uint32_t tx_wait;	/* producer blocked on credits/space: the consumer
					 * exchanges it to 0 and kicks the producer's device */
	uint32_t pad0[13];
	/* --- line 1: written by the consumer, read by the producer --- */
	_Atomic uint32_t cons;		/* cells consumed (release by consumer after reading
					 * the message: the producer may then overwrite them) */
	_Atomic uint32_t credits;	/* receive WRs posted since the connection started
					 * (release after caps[] is written) */
	_Atomic uint32_t need_wake;	/* SHM_WAKE_*: set (seq_cst) by the consumer when it
					 * arms its CQ; the producer exchanges it to 0 and
					 * writes the consumer's CQ eventfd */
	uint32_t pad1[13];
	/* --- then caps[caps_size]: byte capacity of receive WR #i at caps[i % caps_size],
	 * written by the consumer before the credits store that announces WR #i. */
};

_Static_assert(sizeof(struct shm_ring_hdr) == 2 * SHM_CELL, "ring header is two cache lines");

/* One side's private view of a mapped ring. Not shared; guarded by its QP's lock. */
struct shm_ring {
	void *map;
	size_t map_len;
	struct shm_ring_hdr *hdr;
	_Atomic uint32_t *caps;
	uint8_t *cells;
	uint32_t ncells;	/* power of two */
	uint32_t caps_size;	/* power of two */
};

/* A message header, host form (validated). */
struct shm_ring_msg {
	uint8_t op;		/* enum shm_ring_op */
	uint8_t flags;		/* SHM_MSGF_* */
	uint16_t cells;		/* cells the message occupies, header cell included */
	uint32_t len;		/* data bytes (SEND) or bytes written (WRITE_IMM) */
	uint32_t imm;
	uint32_t src_qpn;	/* as the producer claims it; informational */
};

/* Cells a SEND of len bytes occupies. */
static inline uint32_t shm_msg_cells(uint32_t len)
{
	return len <= SHM_FIRST_DATA ? 1u : 1u + (len - SHM_FIRST_DATA + SHM_CELL - 1) / SHM_CELL;
}

/* Size of a ring's memfd (page-rounded) and the offset of its cells. */
size_t shm_ring_size(uint32_t ncells, uint32_t caps_size, size_t *cells_off);
/* Smallest power of two >= n (n >= 1, <= 2^31). */
uint32_t shm_pow2(uint32_t n);

/* Creates a ring in a new sealed memfd (zeroed) and maps it; *fd is the memfd to pass to
 * the peer (the caller closes it after sending). */
SMCR_MUST_CHECK int shm_ring_create(uint32_t ncells, uint32_t caps_size, struct shm_ring *r,
				    int *fd);
/* Maps a ring a peer announced (fd from it, sizes from its message): the sizes must be
 * powers of two within bounds and the fd a memfd sealed against shrinking, at least as
 * large as the layout needs. Does not take the fd (the caller closes it). */
SMCR_MUST_CHECK int shm_ring_attach(int fd, uint32_t ncells, uint32_t caps_size,
				    struct shm_ring *r);
void shm_ring_unmap(struct shm_ring *r);

/* ---- producer side ---- */

/* Free cells for a producer at prod (reads cons, acquire). -SMCR_E_SHM_RING_BAD_CONS if
 * the consumer's cons is not within one ring behind prod. */
SMCR_MUST_CHECK int shm_ring_free(const struct shm_ring *r, uint32_t prod, uint32_t *free_cells);
/* Writes a message's header into the cell at prod (not yet visible). */
void shm_ring_put_hdr(struct shm_ring *r, uint32_t prod, const struct shm_ring_msg *m);
/* Writes n data bytes at data offset off of the message starting at prod. */
void shm_ring_put_data(struct shm_ring *r, uint32_t prod, uint32_t off, const void *src,
		       size_t n);
/* Publishes everything up to new_prod (release), then (seq_cst fence) returns the
 * consumer's need_wake value, to decide whether to wake it (shm_ring_take_wake). */
uint32_t shm_ring_publish(struct shm_ring *r, uint32_t new_prod);
/* Clears need_wake; returns nonzero if this caller must write the consumer's eventfd. */
int shm_ring_take_wake(struct shm_ring *r);

/* ---- consumer side ---- */

/* Reads the message at cons: 0 with *m filled, -SMCR_E_AGAIN if none is published, or
 * -SMCR_E_SHM_RING_BAD_PROD / _BAD_OP / _BAD_LEN / _BAD_CELLS for a hostile ring. */
SMCR_MUST_CHECK int shm_ring_peek(const struct shm_ring *r, uint32_t cons,
				  struct shm_ring_msg *m);
/* Copies n data bytes at data offset off of the message at cons (bounds are the caller's:
 * off + n <= m.len, checked by shm_ring_peek against the cells). */
void shm_ring_get_data(const struct shm_ring *r, uint32_t cons, uint32_t off, void *dst,
		       size_t n);
/* Releases cells up to new_cons to the producer (release store). */
void shm_ring_consume(struct shm_ring *r, uint32_t new_cons);

#endif
