/* tx.c: the sending side of the data path (docs/protocol/procedures.md 4.3, 4.5, 4.6): RDMA WRITEs
 * into the peer's RMBE (the ring split in at most two pieces at its end), then one CDC on the same
 * QP carrying the producer cursor, our consumer cursor (window update piggybacked) and flags;
 * the send ring (SO_SNDBUF), corking (MSG_MORE / TCP_CORK) and the ordering of D/C after
 * queued bytes (docs/protocol/procedures.md 4.1, 5.1; docs/parts/sndbuf.md).
 *
 * Copies: where the provider takes inline WRITEs of the size needed, the WRITE reads the
 * caller's iovec directly (one copy in all: into the peer's RMBE). Otherwise the data is
 * copied once into the send slot's staging area and written from there, as Linux does from
 * its send buffer. Bytes the peer's RMBE cannot take now are copied into the connection's
 * send ring and written from it later by the same two paths (the ring is one more copy, only
 * for bytes that had to wait). No allocation per send (the ring is allocated once, at the
 * first byte that needs it); at most CORE_MAX_WRITES WRITEs + one CDC per post. */
#include "core/core_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/copy.h"

/* Fills the slot with a CDC for c's current state (docs/protocol/wire-formats.md 7). conn->lock
 * held. */
static void cdc_fill(struct core_conn *c, uint8_t *buf, bool urg)
{
	struct cdc_msg m;
	memset(&m, 0, sizeof(m));
	m.seqno = ++c->tx_seq;	/* 7.2: +1 per CDC, first = 1 */
	m.token = c->peer_token;
	m.prod = abs_to_curs(c->tx_prod, c->peer_size);
	m.cons = abs_to_curs(c->rx_cons, c->rmbe_size);
	m.pf.write_blocked = c->tx_blocked;
	m.pf.urg_pending = urg;
	m.pf.urg_present = urg;
	m.cf.done_writing = c->cl & CL_SENT_D;
	m.cf.closed = c->cl & CL_SENT_C;
	m.cf.abort = c->cl & CL_SENT_A;
	if (cdc_encode(&m, buf))	/* only fails for token 0, excluded by the callers */
		memset(buf, 0, CDC_MSG_LEN);
	c->rx_cons_sent = c->rx_cons;
	c->cdc_sent++;
	CORE_CTR_INC(c->eng, ctr_cdc_tx);
	c->upd_pending = false;
}

/* The slot carries c's CDC just filled: its completion makes it the last completed one
 * (failover.c link_cdc_completed). */
static void slot_note_cdc(struct core_link *l, int slot, const struct core_conn *c)
{
	struct core_slot *sl = &l->slots[slot];
	atomic_store_explicit(&sl->cdc_seq, c->tx_seq, memory_order_relaxed);
	atomic_store_explicit(&sl->cdc_prod, c->tx_prod, memory_order_relaxed);
	atomic_store_explicit(&sl->cdc_token, c->token, memory_order_release);
}

static bool can_cdc(struct core_conn *c)
{
	return c->link && atomic_load_explicit(&c->link->usable, memory_order_acquire) &&
	       c->peer_token && c->peer_size;
}

int tx_cdc_locked(struct core_conn *c, bool urg)
{
	if (!can_cdc(c))
		return -SMCR_E_CORE_NOTCONN;
	struct core_link *l = c->link;
	int vrc = fo_send_validation_locked(c);	/* after a failover: the F message first */
	if (vrc) {
		c->upd_pending = true;
		return vrc;
	}
	int slot = link_slot_get(l, 1, false, c->slot);
	if (slot < 0) {
		c->upd_pending = true;	/* sent by tx_wake_waiters when a slot frees */
		return slot;
	}
	cdc_fill(c, link_slot_buf(l, slot), urg);
	slot_note_cdc(l, slot, c);
	struct dev_send_wr wr;
	struct dev_sge sge;
	link_slot_send_wr(l, slot, &wr, &sge);
	if (close_cdc_quiet_locked(c))
		wr.send_flags &= ~(unsigned)DEV_SEND_SOLICITED; /* close.c "Quiet final C" */
	int rc = link_post(l, &wr);
	if (rc) {
		link_slot_abandon(l, slot);
		c->upd_pending = true;
	}
	return rc;
}

void tx_cons_update_locked(struct core_conn *c, bool force)
{
	if (!can_cdc(c) || (c->cl & (CL_SENT_C | CL_SENT_A)))
		return;
	if (c->upd_pending) {
		(void)tx_cdc_locked(c, false);
		return;
	}
	/* docs/protocol/procedures.md 4.5 (Linux smc_tx_consumer_update). */
	struct curs_wnd w = {
		.size = c->rmbe_size,
		.cons_sent = abs_to_curs(c->rx_cons_sent, c->rmbe_size),
		.cons = abs_to_curs(c->rx_cons, c->rmbe_size),
		.peer_prod = abs_to_curs(c->rx_peer_prod, c->rmbe_size),
		.peer_req = c->peer_req,
		.peer_blocked = c->peer_blocked,
		.force = force,
	};
	if (c->rx_cons == c->rx_cons_sent && !c->peer_req)
		return;	/* nothing new to report */
	if (curs_cons_update_due(&w) && tx_cdc_locked(c, false) == 0)
		c->peer_req = false;
}

/* Visits the connection in LG slot i (eng->lock held). */
static void wake_one(struct core_lgr *lg, unsigned i)
{
	struct core_conn *c = lg->slots[i];
	if (!c)
		return;
	bool wake = false, close_sent = false;
	unsigned bits = 0;
	pthread_mutex_lock(&c->lock);
	/* A CDC that found no slot: cursors and close flags are taken afresh. If it carries
	 * the C or A of a closed connection, the exchange may be complete now (close.c
	 * close_finished_locked waits for it). */
	if (c->upd_pending && c->mode == CORE_MODE_SMC)
		close_sent = tx_cdc_locked(c, false) == 0 && close_sent_locked(c);
	/* Ring bytes that found no slot (docs/parts/sndbuf.md "Flush triggers"). */
	if (c->sb_tail < c->sb_head || c->cl_pend || c->tx_prod < c->tx_replay_end)
		bits = tx_flush_locked(c, false);
	if (c->tx_wait && tx_sndbuf_writable_locked(c)) {
		c->tx_wait = false;
		wake = true;
	}
	pthread_mutex_unlock(&c->lock);
	if (wake || (bits & TX_FLUSH_OUT))
		core_ev_raise(c, CORE_EV_OUT);
	if ((bits & TX_FLUSH_CLOSE) || close_sent) {
		conn_hold(c);
		close_maybe_finish_elocked(c, lg->eng->last_now);
		conn_put(c);
	}
}

/* Only the connections that found no send slot (link.c starved bits): a
 * sender waiting for the peer's RMBE or its own ring is woken by the CDC that frees it
 * (rx.c flush), and every path that waits for a slot goes through link_slot_get, which
 * sets the bit. Was: every connection of the LG, locked in turn, at every wake. */
void tx_wake_waiters(struct core_lgr *lg, const uint64_t *starved, bool all)
{
	for (unsigned w = 0; w < CORE_LG_SLOTS / 64; w++) {
		uint64_t m = all ? ~0ull : starved[w];
		while (m) {
			unsigned b = (unsigned)__builtin_ctzll(m);
			m &= m - 1;
			unsigned i = w * 64 + b;
			if (i >= 1)
				wake_one(lg, i);
		}
	}
}

/* ---- send -------------------------------------------------------------------------------- */

#define TX_MAX_SGE 4

struct tx_plan {
	struct dev_send_wr wr[CORE_MAX_WRITES + 1];
	struct dev_sge sge[CORE_MAX_WRITES][TX_MAX_SGE];
	struct dev_sge cdc_sge;
	int nwr;
	uint32_t sent;
};

/* Walks an iovec. */
struct iov_pos {
	const struct iovec *iov;
	int cnt;
	int i;
	size_t off;
};

static size_t iov_take(struct iov_pos *p, size_t max, const uint8_t **ptr)
{
	while (p->i < p->cnt && p->off == p->iov[p->i].iov_len) {
		p->i++;
		p->off = 0;
	}
	if (p->i == p->cnt)
		return 0;
	size_t left = p->iov[p->i].iov_len - p->off;
	size_t take = left < max ? left : max;
	*ptr = (const uint8_t *)p->iov[p->i].iov_base + p->off;
	p->off += take;
	return take;
}

static void iov_copy(struct iov_pos *p, uint8_t *dst, size_t n)
{
	while (n) {
		const uint8_t *src = NULL;
		size_t k = iov_take(p, n, &src);
		if (!k)
			return;
		smcr_copy(dst, src, k);
		dst += k;
		n -= k;
	}
}

/* Inline WRITEs straight from the caller's iovec into the peer's RMBE pieces. Covers as
 * much of n as CORE_MAX_WRITES WRs allow (plan->sent). */
static void plan_inline(struct core_conn *c, const struct iovec *iov, int iovcnt, uint32_t n,
			struct tx_plan *pl)
{
	struct core_link *l = c->link;
	struct curs_chunk ch[2];
	int nch = curs_split((uint32_t)(c->tx_prod % c->peer_size), n, c->peer_size, ch);
	struct iov_pos pos = { iov, iovcnt, 0, 0 };
	unsigned maxsge = l->max_sge < TX_MAX_SGE ? l->max_sge : TX_MAX_SGE;
	pl->nwr = 0;
	pl->sent = 0;
	for (int k = 0; k < nch; k++) {
		uint32_t left = ch[k].len, dst = ch[k].off;
		while (left) {
			if (pl->nwr == CORE_MAX_WRITES)
				return;
			struct dev_send_wr *wr = &pl->wr[pl->nwr];
			struct dev_sge *sg = pl->sge[pl->nwr];
			uint32_t wlen = 0;
			int ns = 0;
			while (left > wlen && (unsigned)ns < maxsge && wlen < l->max_inline) {
				uint32_t room = l->max_inline - wlen;
				uint32_t want = left - wlen < room ? left - wlen : room;
				const uint8_t *src = NULL;
				size_t got = iov_take(&pos, want, &src);
				if (!got)
					break;
				sg[ns].addr = (uint64_t)(uintptr_t)src;
				sg[ns].length = (uint32_t)got;
				sg[ns].lkey = 0;	/* inline: not checked (dev.h) */
				ns++;
				wlen += (uint32_t)got;
			}
			if (!wlen)
				return;
			memset(wr, 0, sizeof(*wr));
			wr->wr_id = (uint64_t)l->id << 32 | CORE_WR_WRITE;
			wr->sg_list = sg;
			wr->num_sge = ns;
			wr->opcode = DEV_WR_RDMA_WRITE;
			wr->send_flags = DEV_SEND_INLINE;	/* unsignaled, as Linux */
			wr->rdma.remote_addr = c->peer_vaddr + dst;
			wr->rdma.rkey = c->peer_rkey;
			pl->nwr++;
			pl->sent += wlen;
			dst += wlen;
			left -= wlen;
		}
	}
}

/* Copy into the slot's staging area, then one WRITE per ring piece from it. */
static void plan_staged(struct core_conn *c, const struct iovec *iov, int iovcnt, uint32_t n,
			int slot, struct tx_plan *pl)
{
	struct core_link *l = c->link;
	uint8_t *stage = link_stage_buf(l, slot);
	struct iov_pos pos = { iov, iovcnt, 0, 0 };
	iov_copy(&pos, stage, n);
	struct curs_chunk ch[2];
	int nch = curs_split((uint32_t)(c->tx_prod % c->peer_size), n, c->peer_size, ch);
	uint32_t soff = 0;
	pl->nwr = 0;
	for (int k = 0; k < nch; k++) {
		struct dev_send_wr *wr = &pl->wr[k];
		pl->sge[k][0].addr = (uint64_t)(uintptr_t)(stage + soff);
		pl->sge[k][0].length = ch[k].len;
		pl->sge[k][0].lkey = link_stage_lkey(l);
		memset(wr, 0, sizeof(*wr));
		wr->wr_id = (uint64_t)l->id << 32 | CORE_WR_WRITE;
		wr->sg_list = pl->sge[k];
		wr->num_sge = 1;
		wr->opcode = DEV_WR_RDMA_WRITE;
		wr->rdma.remote_addr = c->peer_vaddr + ch[k].off;
		wr->rdma.rkey = c->peer_rkey;
		soff += ch[k].len;
		pl->nwr++;
	}
	pl->sent = n;
}

/* ---- the send ring --------------------------------------------------------------------- */

uint32_t tx_sndbuf_size(uint32_t sndbuf)
{
	if (!sndbuf)
		sndbuf = CORE_SNDBUF_DEFAULT;
	uint32_t sz = CORE_SNDBUF_MIN;
	while (sz < sndbuf && sz < CORE_SNDBUF_MAX)
		sz <<= 1;
	return sz;
}

uint32_t tx_sndbuf_queued(const struct core_conn *c)
{
	return (uint32_t)(c->sb_head - c->sb_tail);
}

uint32_t tx_sndbuf_free_locked(struct core_conn *c)
{
	return c->sb_size - tx_sndbuf_queued(c);
}

bool tx_sndbuf_writable_locked(struct core_conn *c)
{
	return 2ull * tx_sndbuf_free_locked(c) >= tx_sndbuf_queued(c);
}

/* Held bytes are pushed once they reach this: half of the smaller of the ring and the
 * peer's RMBE (Linux SMC corks while less than half of its send buffer is prepared). */
static uint32_t cork_threshold(const struct core_conn *c)
{
	uint32_t m = c->sb_size < c->peer_size ? c->sb_size : c->peer_size;
	return m / 2 ? m / 2 : 1;
}

static void sb_update_deadline(struct core_conn *c)
{
	uint64_t d = c->cork_deadline < c->giveup_deadline ? c->cork_deadline : c->giveup_deadline;
	atomic_store_explicit(&c->tx_deadline, d, memory_order_relaxed);
}

/* Appends up to n bytes of the iovec (from pos) to the ring; returns how many. */
static uint32_t sb_append(struct core_conn *c, struct iov_pos *pos, uint32_t n)
{
	uint32_t room = tx_sndbuf_free_locked(c);
	if (n > room)
		n = room;
	if (!n)
		return 0;
	if (!c->sb) {
		c->sb = ring_get(c->sb_size);
		if (!c->sb)
			return 0;
	}
	struct curs_chunk ch[2];
	int nch = curs_split((uint32_t)(c->sb_head % c->sb_size), n, c->sb_size, ch);
	uint32_t done = 0;
	for (int k = 0; k < nch; k++) {
		uint8_t *dst = c->sb + ch[k].off;
		uint32_t left = ch[k].len;
		while (left) {
			const uint8_t *src = NULL;
			size_t got = iov_take(pos, left, &src);
			if (!got)
				break;
			smcr_copy(dst, src, got);
			dst += got;
			left -= (uint32_t)got;
			done += (uint32_t)got;
		}
	}
	c->sb_head += done;
	return done;
}

void tx_discard_locked(struct core_conn *c)
{
	c->sb_tail = c->sb_head;
	c->sb_urg = 0;
	c->sb_hold = false;
	c->cl_pend = 0;
	c->cork_deadline = CORE_NEVER;
	c->giveup_deadline = CORE_NEVER;
	sb_update_deadline(c);
}

/* ---- posting ------------------------------------------------------------------------------ */

/* send_state_err's answer for the first send after the peer's C (not an error yet). */
enum { SEND_AFTER_C = 1 };

/* Errors for send in the connection's state (conn->lock held), 0 if sending is allowed,
 * SEND_AFTER_C for the first send after the peer's C. */
static int send_state_err(struct core_conn *c)
{
	if (c->mode != CORE_MODE_SMC)
		return -SMCR_E_CORE_NOTCONN;
	if (c->reset_err) {
		/* TCP: the first call after a reset reports it, later ones EPIPE. */
		if (c->err) {
			int e = c->err;
			c->err = 0;
			return e;
		}
		return -SMCR_E_CORE_PIPE;
	}
	if ((c->cl & (CL_SENT_D | CL_SENT_C | CL_SENT_A)) || c->cl_pend)
		return -SMCR_E_CORE_PIPE;
	/* The peer closed (C): it reads no more, so no byte goes out again. The first send
	 * is taken whole (send_after_c_locked) as TCP's is; the ones after it fail. */
	if (c->cl & CL_RCVD_C) {
		if (!c->wrote_after_c)
			return SEND_AFTER_C;
		if (c->err == -SMCR_E_CORE_PIPE)
			c->err = 0;	/* reported by this call, as TCP's sock_error */
		return -SMCR_E_CORE_PIPE;
	}
	if (!c->link || !c->peer_size)
		return -SMCR_E_CORE_RESET;
	return 0;
}

/* Writes up to n (<= the peer's free space, > 0) bytes of the iovec into the peer's RMBE
 * and sends one CDC (with P/U if urg and all n went). want: bytes the sender would like to
 * write in all (for B, 4.3 step 1). Returns bytes posted (> 0), -SMCR_E_AGAIN when no send
 * slot is free (*starved set), -SMCR_E_CORE_RESET when the post failed (aborted). */
static long post_locked(struct core_conn *c, const struct iovec *iov, int iovcnt, uint32_t n,
			bool urg, uint64_t want, bool *starved)
{
	struct core_link *l = c->link;
	if (c->fo_pending && fo_send_validation_locked(c)) {
		*starved = true;	/* the F message needs a slot first */
		return -SMCR_E_AGAIN;
	}
	/* bytes a failover writes again (failover.c) are not counted twice */
	bool again = c->tx_prod < c->tx_replay_end;
	uint32_t space = conn_writable_locked(c);
	struct tx_plan pl;
	int slot;
	bool staged = false;
	if (!link_has_stage(l) || n <= l->max_inline) {
		plan_inline(c, iov, iovcnt, n, &pl);
		if (link_has_stage(l) && pl.sent < n)
			staged = true;	/* too many pieces for inline: stage instead */
	} else {
		staged = true;
	}
	if (staged) {
		if (n > CORE_STAGE)
			n = CORE_STAGE;
		struct curs_chunk ch[2];
		int nch = curs_split((uint32_t)(c->tx_prod % c->peer_size), n, c->peer_size, ch);
		slot = link_slot_get(l, (unsigned)nch + 1, false, c->slot);
		if (slot >= 0)
			plan_staged(c, iov, iovcnt, n, slot, &pl);
	} else {
		if (pl.sent == 0) {
			*starved = true;
			return -SMCR_E_AGAIN;
		}
		slot = link_slot_get(l, (unsigned)pl.nwr + 1, false, c->slot);
	}
	if (slot < 0) {
		*starved = true;
		return -SMCR_E_AGAIN;
	}
	if (urg && pl.sent < n)
		urg = false;	/* the urgent byte is not in this piece */
	/* docs/protocol/procedures.md 4.3 step 1: B when the data did not fit the peer's free
	 * space. */
	bool blocked = want > pl.sent && pl.sent == space;
	if (blocked && !c->tx_blocked)
		CORE_CTR_INC(c->eng, ctr_rmbe_full);
	c->tx_blocked = blocked;
	if (!again)
		fo_shadow_put_locked(c, iov, iovcnt, pl.sent);
	c->tx_prod += pl.sent;
	if (!again)
		c->bytes_sent += pl.sent;
	if (urg)
		c->tx_urg_abs = c->tx_prod;
	cdc_fill(c, link_slot_buf(l, slot), urg);
	slot_note_cdc(l, slot, c);
	for (int i = 0; i < pl.nwr; i++)
		pl.wr[i].next = &pl.wr[i + 1];
	link_slot_send_wr(l, slot, &pl.wr[pl.nwr], &pl.cdc_sge);
	int rc = link_post(l, &pl.wr[0]);
	if (rc) {
		link_slot_abandon(l, slot);
		close_abort_locked(c, -SMCR_E_CORE_RESET, false);
		return -SMCR_E_CORE_RESET;
	}
	return (long)pl.sent;
}

/* Posts up to n bytes of a ring (base, size) from stream position pos, as its (at most)
 * two pieces; a post that reaches the urgent byte at stream position urg_abs (0: none) ends
 * there, so the CDC after it carries the urgent flag (*urg says so). left: what the ring
 * still holds, for post_locked. Returns what post_locked returns. */
static long post_ring_locked(struct core_conn *c, uint8_t *base, uint32_t size, uint64_t pos,
			     uint32_t n, uint64_t urg_abs, uint64_t left, bool *urg, bool *starved)
{
	*urg = false;
	if (urg_abs > pos && urg_abs - pos <= n) {
		n = (uint32_t)(urg_abs - pos);
		*urg = true;
	}
	struct curs_chunk ch[2];
	int nch = curs_split((uint32_t)(pos % size), n, size, ch);
	struct iovec v[2];
	for (int k = 0; k < nch; k++) {
		v[k].iov_base = base + ch[k].off;
		v[k].iov_len = ch[k].len;
	}
	return post_locked(c, v, nch, n, *urg, left, starved);
}

unsigned tx_flush_locked(struct core_conn *c, bool push)
{
	unsigned out = 0;
	if (c->mode != CORE_MODE_SMC || c->reset_err)
		return 0;
	if (push && c->sb_hold) {
		c->sb_hold = false;
		c->cork_deadline = CORE_NEVER;
		sb_update_deadline(c);
	}
	bool was_writable = tx_sndbuf_writable_locked(c);
	if (c->cl & CL_RCVD_C) {
		c->sb_tail = c->sb_head;	/* the peer closed: it reads nothing more (4.5) */
		if (c->tx_replay_end > c->tx_prod)
			c->tx_replay_end = c->tx_prod;
	}
	/* After a failover (failover.c): the bytes after the last completed CDC again, from
	 * the copy, before anything new; an urgent byte among them gets its P/U again. */
	while (c->tx_prod < c->tx_replay_end && c->shadow && can_cdc(c)) {
		uint32_t space = conn_writable_locked(c);
		uint64_t left = c->tx_replay_end - c->tx_prod;
		if (space == 0)
			break;	/* cannot be (the rewind made the room); wait for an update */
		uint32_t n = left < space ? (uint32_t)left : space;
		bool urg, starved = false;
		long k = post_ring_locked(c, c->shadow, c->peer_size, c->tx_prod, n, c->tx_urg_abs,
					  left, &urg, &starved);
		if (k < 0) {
			if (starved)
				out |= TX_FLUSH_STARVED;
			break;
		}
	}
	bool replayed = c->tx_prod >= c->tx_replay_end;
	while (replayed && c->sb_tail < c->sb_head && !c->sb_hold && can_cdc(c)) {
		uint32_t q = tx_sndbuf_queued(c);
		uint32_t space = conn_writable_locked(c);
		if (space == 0) {
			if (!c->tx_blocked) {
				/* docs/protocol/procedures.md 4.5: B makes a Linux reader send its
				 * update. */
				c->tx_blocked = true;
				CORE_CTR_INC(c->eng, ctr_rmbe_full);
				(void)tx_cdc_locked(c, false);
			}
			break;
		}
		uint32_t n = q < space ? q : space;
		bool urg, starved = false;
		long k = post_ring_locked(c, c->sb, c->sb_size, c->sb_tail, n, c->sb_urg, q, &urg,
					  &starved);
		if (k < 0) {
			if (starved)
				out |= TX_FLUSH_STARVED;	/* link_slot_get noted us as a waiter */
			break;
		}
		c->sb_tail += (uint64_t)k;
		if (urg && c->sb_tail >= c->sb_urg)
			c->sb_urg = 0;
	}
	if (c->sb_tail == c->sb_head && c->sb && ring_pool_on()) {
		/* empty: its bytes were posted (inline or staged), so the ring is free for the
		 * next connection that needs one (ringpool.c) */
		ring_put(c->sb, c->sb_size);
		c->sb = NULL;
	}
	if (replayed && c->sb_tail == c->sb_head && c->cl_pend && !c->reset_err) {
		/* docs/protocol/procedures.md 5.1: D / C after all pending data. */
		c->cl |= c->cl_pend;
		c->cl_pend = 0;
		c->giveup_deadline = CORE_NEVER;
		sb_update_deadline(c);
		(void)tx_cdc_locked(c, false);	/* no slot: sent when one frees (upd_pending) */
		out |= TX_FLUSH_CLOSE;
	}
	if ((!was_writable || c->tx_wait) && tx_sndbuf_writable_locked(c)) {
		c->tx_wait = false;
		out |= TX_FLUSH_OUT;
	}
	return out;
}

/* After a flush outside progress (no core lock held): what its bits ask for. */
static void flush_after(struct core_conn *c, unsigned bits)
{
	if (bits & TX_FLUSH_OUT)
		core_ev_raise(c, CORE_EV_OUT);
	if (bits & TX_FLUSH_CLOSE) {
		struct core_engine *e = c->eng;
		pthread_mutex_lock(&e->lock);
		uint64_t now = e->last_now;
		pthread_mutex_unlock(&e->lock);
		close_maybe_finish(c, now);
	}
}

/* The first send after the peer's C (conn->lock held). TCP takes such a write whole and
 * the peer's stack answers the bytes with a reset: EPIPE becomes pending (POLLERR and
 * POLLHUP show) and the next write fails with it. The bytes are dropped here, as the
 * peer's TCP drops them: the peer reads no more. A send of no bytes moves nothing and
 * changes nothing (CPython's test_socket sends back the b'' its recv got at EOF). */
static long send_after_c_locked(struct core_conn *c, size_t total)
{
	if (total == 0)
		return 0;
	c->wrote_after_c = true;
	c->err = -SMCR_E_CORE_PIPE;
	core_ev_raise(c, CORE_EV_ERR | CORE_EV_HUP);
	return total > LONG_MAX ? LONG_MAX : (long)total;
}

/* The body of core_conn_send: conn->lock held. *starved: a post found no send slot.
 * *armed: the cork deadline this call armed (CORE_NEVER if none). */
static long send_locked(struct core_conn *c, const struct iovec *iov, int iovcnt, size_t total,
			unsigned flags, uint64_t now, bool *starved, uint64_t *armed)
{
	int rc = send_state_err(c);
	bool hold = flags & CORE_MSG_MORE;
	if (rc == SEND_AFTER_C)
		return send_after_c_locked(c, total);
	if (rc)
		return rc;
	if (total == 0) {
		if (!hold)
			(void)tx_flush_locked(c, true);	/* sock-wishes item 4: uncork */
		return 0;
	}
	bool oob = flags & CORE_MSG_OOB;
	/* Earlier bytes first: a send never overtakes the ring (nor bytes a failover writes
	 * again). */
	if ((c->sb_tail < c->sb_head && !c->sb_hold) || c->tx_prod < c->tx_replay_end)
		(void)tx_flush_locked(c, false);
	struct iov_pos pos = { iov, iovcnt, 0, 0 };
	size_t accepted = 0;
	uint32_t space = conn_writable_locked(c);
	bool ring_empty = c->sb_tail == c->sb_head;
	/* Bytes already pushed and waiting for room are not held back by a later MSG_MORE
	 * (TCP corks partial segments, not data waiting for the window): the new bytes just go
	 * behind them. */
	if (hold && !ring_empty && !c->sb_hold)
		hold = false;
	/* The direct path (no staging in the ring): nothing queued, nothing to hold (a corked
	 * send at least as big as the push threshold would be pushed at once anyway). */
	bool direct = ring_empty && space > 0 && (!hold || total >= cork_threshold(c)) &&
		      (!oob || total <= space) && c->tx_prod >= c->tx_replay_end;
	if (direct) {
		uint32_t n = total < space ? (uint32_t)total : space;
		long k = post_locked(c, iov, iovcnt, n, oob, total, starved);
		if (k == -SMCR_E_CORE_RESET)
			return k;
		if (k > 0) {
			accepted = (size_t)k;
			/* skip what was posted */
			size_t skip = accepted;
			while (skip) {
				const uint8_t *p = NULL;
				size_t g = iov_take(&pos, skip, &p);
				if (!g)
					break;
				skip -= g;
			}
		}
	}
	if (accepted < total) {
		size_t rest = total - accepted;
		if (oob && rest > tx_sndbuf_free_locked(c)) {
			/* the urgent byte goes whole or not at all */
			if (!accepted) {
				if (!c->tx_wait)
					CORE_CTR_INC(c->eng, ctr_window_stall);
				c->tx_wait = true;
				return -SMCR_E_AGAIN;
			}
			goto done;
		}
		uint32_t want = rest > UINT32_MAX ? UINT32_MAX : (uint32_t)rest;
		uint32_t k = sb_append(c, &pos, want);
		accepted += k;
		if (oob && k == rest)
			c->sb_urg = c->sb_head;
	}
done:
	if (!hold) {
		c->sb_hold = false;
		c->cork_deadline = CORE_NEVER;
		sb_update_deadline(c);
	} else if (c->sb_tail < c->sb_head) {
		if (tx_sndbuf_queued(c) >= cork_threshold(c)) {
			c->sb_hold = false;	/* enough for a push */
			c->cork_deadline = CORE_NEVER;
		} else if (!c->sb_hold) {
			c->sb_hold = true;
			c->cork_deadline = now + CORE_CORK_NS;
			*armed = c->cork_deadline;
		}
		sb_update_deadline(c);
	}
	if (c->sb_tail < c->sb_head && !c->sb_hold) {
		unsigned bits = tx_flush_locked(c, false);
		if (bits & TX_FLUSH_STARVED)
			*starved = true;
	}
	if (accepted == 0) {
		if (!c->tx_wait)
			CORE_CTR_INC(c->eng, ctr_window_stall);
		c->tx_wait = true;
		return -SMCR_E_AGAIN;
	}
	if (accepted == total)
		c->tx_wait = false;
	return (long)accepted;
}

long core_conn_send_at(struct core_conn *c, const struct iovec *iov, int iovcnt, unsigned flags,
		       uint64_t now_ns, uint64_t *timer_ns)
{
	size_t total = 0;
	if (timer_ns)
		*timer_ns = UINT64_MAX;
	if (iovcnt < 0 || (iovcnt && !iov))
		return -SMCR_E_INVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -SMCR_E_INVAL;
		total += iov[i].iov_len;
	}
	bool starved = false;
	uint64_t armed = CORE_NEVER;
	pthread_mutex_lock(&c->lock);
	long rc = send_locked(c, iov, iovcnt, total, flags, now_ns, &starved, &armed);
	pthread_mutex_unlock(&c->lock);
	if (starved) {
		/* Every send slot waits for its completion to be polled: poll now rather than
		 * leave the bytes (or the caller) waiting until somebody else does (and arm for
		 * any completion, so a provider that completes later wakes the progress thread). */
		core_reap(c->eng);
		pthread_mutex_lock(&c->lock);
		unsigned bits = 0;
		if (rc == -SMCR_E_AGAIN) {
			starved = false;
			rc = send_locked(c, iov, iovcnt, total, flags, now_ns, &starved, &armed);
		} else if (c->sb_tail < c->sb_head && !c->sb_hold) {
			bits = tx_flush_locked(c, false);
		}
		pthread_mutex_unlock(&c->lock);
		flush_after(c, bits & ~TX_FLUSH_OUT);
	}
	if (armed != CORE_NEVER) {
		struct core_engine *e = c->eng;
		pthread_mutex_lock(&e->lock);
		conn_timer_at(c, armed);
		pthread_mutex_unlock(&e->lock);
		if (timer_ns)
			*timer_ns = armed;
	}
	return rc;
}

long core_conn_send(struct core_conn *c, const struct iovec *iov, int iovcnt, unsigned flags)
{
	struct core_engine *e = c->eng;
	uint64_t now = 0;
	if (flags & CORE_MSG_MORE) {
		pthread_mutex_lock(&e->lock);
		now = e->last_now;
		pthread_mutex_unlock(&e->lock);
	}
	return core_conn_send_at(c, iov, iovcnt, flags, now, NULL);
}

int core_conn_flush(struct core_conn *c)
{
	return (int)core_conn_send_at(c, NULL, 0, 0, 0, NULL);
}

/* ---- timers ------------------------------------------------------------------------------- */

uint64_t tx_conn_timer(struct core_conn *c, uint64_t now)
{
	uint64_t d = atomic_load_explicit(&c->tx_deadline, memory_order_relaxed);
	if (d == CORE_NEVER || d == 0)
		return CORE_NEVER;
	if (now < d)
		return d;
	unsigned bits = 0;
	bool close_change = false;
	pthread_mutex_lock(&c->lock);
	if (c->giveup_deadline <= now) {
		/* Closed with bytes the peer never took within close_wait_ns: abort. */
		c->giveup_deadline = CORE_NEVER;
		if (c->cl_pend && c->mode == CORE_MODE_SMC && !c->reset_err) {
			SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT,
				    "conn %#x: %u queued bytes not taken by the peer in time: abort",
				    c->token, tx_sndbuf_queued(c));
			tx_discard_locked(c);
			close_abort_locked(c, -SMCR_E_CORE_TIMEDOUT, true);
			close_change = true;
		}
	}
	if (c->cork_deadline <= now) {
		c->cork_deadline = CORE_NEVER;
		bits = tx_flush_locked(c, true);	/* TCP's cork ceiling */
	}
	sb_update_deadline(c);
	d = atomic_load_explicit(&c->tx_deadline, memory_order_relaxed);
	pthread_mutex_unlock(&c->lock);
	if (bits & TX_FLUSH_OUT)
		core_ev_raise(c, CORE_EV_OUT);
	if (close_change || (bits & TX_FLUSH_CLOSE))
		close_maybe_finish_elocked(c, now);
	return d;
}
