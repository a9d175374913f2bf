/* curs.h: the RMBE cursor as the wire carries it ({wrap, count}), the window-update rule,
 * the two-chunk split of a ring copy, and the 16-bit CDC sequence-number compare. The
 * cursor arithmetic the engine uses (absolute 64-bit positions, the newer-cursor check of a
 * received cursor) is core's own (src/core: curs_to_abs, abs_to_curs): one model.
 *
 * Spec: docs/protocol/wire-formats.md 8.3 (encoding), 7.1 (newer-cursor rule), 7.2 (sequence
 * numbers); docs/protocol/procedures.md 4.2 (advance, diff, newer-than), 4.3 (free space, two
 * pieces), 4.5 (window update rule). Every helper is pure arithmetic; each names its TCP
 * equivalent.
 * */
#ifndef SMCR_WIRE_CURS_H
#define SMCR_WIRE_CURS_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

/* A position in one RMBE ring (docs/protocol/wire-formats.md 8.3). count is a byte offset, 0 <=
 * count < ring size; wrap counts the times count went from size back to 0, modulo 65536. */
struct curs {
	uint16_t wrap;
	uint32_t count;
};

static inline bool curs_eq(struct curs a, struct curs b)
{
	return a.wrap == b.wrap && a.count == b.count;
}

/* Window update rule (docs/protocol/procedures.md 4.5, Linux smc_tx_consumer_update). */
#define CURS_WND_MIN 2304u	/* SOCK_MIN_SNDBUF / 2 on x86_64 Linux (about 2.3 KB) */

/* limit = max(size / 10, CURS_WND_MIN): the least increase worth a consumer-only CDC
 * (RFC 7609's 10 % rule as quoted by Linux smc_rmb_wnd_update_limit).
 * TCP: receiver SWS avoidance, min(RCV.BUFF / 2, MSS) (RFC 1122 4.2.3.3). */
uint32_t curs_wnd_limit(uint32_t size);

/* Inputs of the rule, receiver side (all cursors in my RMBE of size bytes). */
struct curs_wnd {
	uint32_t size;		/* my RMBE size */
	struct curs cons_sent;	/* last consumer cursor I reported to the peer */
	struct curs cons;	/* how far I have read */
	struct curs peer_prod;	/* last producer cursor the peer reported */
	bool peer_req;		/* the peer set R (cons_curs_upd_req) in its last CDC */
	bool peer_blocked;	/* the peer set B (write_blocked) in its last CDC */
	bool force;		/* e.g. the reader reached or passed the urgent byte */
};

/* true if a CDC carrying the new consumer cursor is due now: peer_req, or force, or
 * (to_confirm = diff(cons_sent, cons)) > curs_wnd_limit(size) and either the peer's view of
 * its free space (size - diff(cons_sent, peer_prod)) is at most size / 2 or peer_blocked.
 * TCP: "send a window update now" (tcp_cleanup_rbuf / __tcp_select_window). */
bool curs_cons_update_due(const struct curs_wnd *w);

/* One contiguous piece of a ring copy. */
struct curs_chunk {
	uint32_t off;	/* byte offset in the ring */
	uint32_t len;	/* bytes, > 0 */
};

/* Splits len bytes starting at ring offset off of a ring of size bytes into at most two
 * contiguous pieces: [off, min(off+len, size)) then [0, rest) (docs/protocol/procedures.md 4.3 step
 * 2, 4.4). Returns the number of pieces (0 when len is 0, 1 or 2), or -SMCR_E_INVAL if size
 * is 0, off >= size or len > size. The pieces cover exactly len bytes, in ring order.
 * TCP: copying across the end of a circular receive buffer. */
SMCR_MUST_CHECK int curs_split(uint32_t off, uint32_t len, uint32_t size,
			       struct curs_chunk out[2]);

/* CDC sequence numbers (docs/protocol/wire-formats.md 7.2): 16-bit, compared by signed difference.
 * seq16_diff(a, b) is a - b as a signed 16-bit value (-32768..32767);
 * seq16_older(a, b) is true when a is strictly older than b (equal is not older, and is
 * processed again per 7.1). TCP: SEQ_LT on a 16-bit sequence space (RFC 1982). */
int seq16_diff(uint16_t a, uint16_t b);
static inline bool seq16_older(uint16_t a, uint16_t b) { return seq16_diff(a, b) < 0; }

#endif
