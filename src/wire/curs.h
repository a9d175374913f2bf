/* curs.h: THE ring-cursor module (STYLE.md 21, 29): RMBE cursors {wrap, count} and their
 * arithmetic, the window-update rule, the two-chunk split of a ring copy, and the 16-bit
 * CDC sequence-number compare.
 *
 * Spec: docs/protocol/wire-formats.md 8.3 (encoding), 7.1 (newer-cursor rule), 7.2 (sequence
 * numbers); docs/protocol/procedures.md 4.2 (advance, diff, newer-than), 4.3 (free space, two
 * pieces), 4.5 (window update rule). Every helper is pure arithmetic; each names its TCP
 * equivalent.
 *
 * A cursor is shared between threads only through struct curs_shared, which holds the
 * packed 64-bit value so wrap and count always travel together (a reader never sees the
 * new wrap with the old count). Who writes and who reads a given curs_shared is the owner's
 * business (core documents it per field); this module only guarantees the single copy. */
#ifndef SMCR_WIRE_CURS_H
#define SMCR_WIRE_CURS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

/* A position in one RMBE ring (docs/protocol/wire-formats.md 8.3). count is a byte offset, 0 <=
 * count < ring size; wrap counts the times count went from size back to 0, modulo 65536. */
struct curs {
	uint16_t wrap;
	uint32_t count;
};

/* One 64-bit value: wrap in bits 32..47, count in bits 0..31. */
static inline uint64_t curs_pack(struct curs c) { return (uint64_t)c.wrap << 32 | c.count; }
static inline struct curs curs_unpack(uint64_t v)
{
	struct curs c = { (uint16_t)(v >> 32), (uint32_t)v };
	return c;
}

/* A cursor cell read and written by different threads: always copied as one 64-bit atomic.
 * Store is a release, load an acquire: a reader that sees a producer cursor also sees the
 * ring bytes written before it was published (the writer stores after the data). */
struct curs_shared {
	_Atomic uint64_t v;
};

static inline struct curs curs_load(const struct curs_shared *s)
{
	return curs_unpack(atomic_load_explicit(&s->v, memory_order_acquire));
}
static inline void curs_store(struct curs_shared *s, struct curs c)
{
	atomic_store_explicit(&s->v, curs_pack(c), memory_order_release);
}

static inline bool curs_eq(struct curs a, struct curs b)
{
	return a.wrap == b.wrap && a.count == b.count;
}

/* count lies inside a ring of size bytes. A cursor received from the peer must pass this
 * before it is used (the codec cannot: it does not know the ring size). */
static inline bool curs_valid(struct curs c, uint32_t size) { return c.count < size; }

/* advance(c, n) of docs/protocol/procedures.md 4.2: c moved n bytes forward in a ring of size
 * bytes, wrap counted modulo 65536. Works for any n (several laps add several wraps) and
 * normalises a count >= size. size 0 returns c unchanged.
 * TCP: SND.NXT += n (sequence space modulo 2^32). */
struct curs curs_add(struct curs c, uint64_t n, uint32_t size);

/* diff(old, new) of docs/protocol/procedures.md 4.2 (Linux smc_curs_diff): bytes from old to new in
 * a ring of size bytes. Same wrap: new.count - old.count, or 0 if new is behind; different
 * wrap: size - old.count + new.count (0 if that is negative). Exact while the two cursors
 * are at most one lap apart, which the protocol keeps for producer vs consumer.
 * TCP: SND.NXT - SND.UNA (bytes in flight) or RCV.NXT - (bytes read). */
uint64_t curs_diff(struct curs old, struct curs new_, uint32_t size);

/* The receive rule of docs/protocol/wire-formats.md 7.1 / docs/protocol/procedures.md 4.2 (Linux
 * smc_cdc_cursor_to_host): a received cursor is OLDER than the known one, and is ignored,
 * if (rcvd.wrap < known.wrap and rcvd.wrap != 0) or (same wrap and rcvd.count <
 * known.count). A wrap of 0 below a larger known wrap counts as the 65535 -> 0 wrap-around.
 * Equal cursors are not older (taken again, harmlessly).
 * TCP: SEQ_LT(SEG.ACK, SND.UNA), "an old ACK is ignored" (RFC 9293 3.10.7.4). */
bool curs_is_older(struct curs rcvd, struct curs known);

/* Applies the receive rule: *known = rcvd unless rcvd is older. Returns true if *known
 * changed. TCP: SND.UNA = SEG.ACK for an acceptable ACK. */
bool curs_take_newer(struct curs *known, struct curs rcvd);

/* Serial-number order of two cursors of one ring that are less than 32768 laps apart:
 * wraps compared by signed 16-bit difference, then counts. < 0 if a is before b, 0 if
 * equal, > 0 if after. For local invariants (a cursor of ours never moves backwards);
 * received cursors go through curs_is_older, which is what Linux does.
 * TCP: SEQ_LT / SEQ_GT (RFC 1982 serial arithmetic). */
int curs_cmp(struct curs a, struct curs b);

/* Free space the writer may still use in the peer's RMBE: size - diff(peer_cons, prod),
 * clamped to 0..size (docs/protocol/procedures.md 4.2 sender state).
 * TCP: SND.UNA + SND.WND - SND.NXT (usable window). */
uint32_t curs_free_space(struct curs peer_cons, struct curs prod, uint32_t size);

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
