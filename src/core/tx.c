/* tx.c: the sending side of the data path (procedures.md 4.3, 4.5, 4.6): RDMA WRITEs into the
 * peer's RMBE (the ring split in at most two pieces at its end), then one CDC on the same QP
 * carrying the producer cursor, our consumer cursor (window update piggybacked) and flags.
 *
 * Copies: where the provider takes inline WRITEs of the size needed, the WRITE reads the
 * caller's iovec directly (one copy in all: into the peer's RMBE). Otherwise the data is
 * copied once into the send slot's staging area and written from there, as Linux does from
 * its send buffer. No allocation per send; at most CORE_MAX_WRITES WRITEs + one CDC. */
#include "core/core_int.h"

#include <string.h>

/* Fills the slot with a CDC for c's current state (wire-formats.md 7). conn->lock held. */
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
	c->upd_pending = false;
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
	int slot = link_slot_get(l, 1, false, true);
	if (slot < 0) {
		c->upd_pending = true;	/* sent by tx_wake_waiters when a slot frees */
		return slot;
	}
	cdc_fill(c, link_slot_buf(l, slot), urg);
	struct dev_send_wr wr;
	struct dev_sge sge;
	link_slot_send_wr(l, slot, &wr, &sge);
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
	/* procedures.md 4.5 (Linux smc_tx_consumer_update). */
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

void tx_wake_waiters(struct core_lgr *lg)
{
	for (unsigned i = 1; i < CORE_LG_SLOTS; i++) {
		struct core_conn *c = lg->slots[i];
		if (!c)
			continue;
		bool wake = false;
		pthread_mutex_lock(&c->lock);
		/* A CDC that found no slot: cursors and close flags are taken afresh. */
		if (c->upd_pending && c->mode == CORE_MODE_SMC)
			(void)tx_cdc_locked(c, false);
		if (c->tx_wait) {
			c->tx_wait = false;
			wake = true;
		}
		pthread_mutex_unlock(&c->lock);
		if (wake)
			core_ev_raise(c, CORE_EV_OUT);
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
		memcpy(dst, src, k);
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

/* Errors for send in the connection's state (conn->lock held), 0 if sending is allowed. */
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
	if (c->cl & (CL_SENT_D | CL_SENT_C | CL_SENT_A))
		return -SMCR_E_CORE_PIPE;
	/* The peer closed (C): it reads no more; data now would be a protocol violation on
	 * its side. ECONNRESET, as Linux smc_tx_sendmsg after any received close. */
	if (c->cl & CL_RCVD_C)
		return -SMCR_E_CORE_RESET;
	if (!c->link || !c->peer_size)
		return -SMCR_E_CORE_RESET;
	return 0;
}

long core_conn_send(struct core_conn *c, const struct iovec *iov, int iovcnt, unsigned flags)
{
	size_t total = 0;
	if (iovcnt < 0 || (iovcnt && !iov))
		return -SMCR_E_INVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -SMCR_E_INVAL;
		total += iov[i].iov_len;
	}
	pthread_mutex_lock(&c->lock);
	int rc = send_state_err(c);
	if (rc || total == 0) {
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	struct core_link *l = c->link;
	bool oob = flags & CORE_MSG_OOB;
	uint32_t space = conn_writable_locked(c);
	if (space == 0 || (oob && total > space)) {
		c->tx_wait = true;
		if (!c->tx_blocked) {
			/* procedures.md 4.5: B makes a Linux reader send its window update. */
			c->tx_blocked = true;
			(void)tx_cdc_locked(c, false);
		}
		pthread_mutex_unlock(&c->lock);
		return -SMCR_E_AGAIN;
	}
	uint32_t n = total < space ? (uint32_t)total : space;
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
		slot = link_slot_get(l, (unsigned)nch + 1, false, true);
		if (slot >= 0)
			plan_staged(c, iov, iovcnt, n, slot, &pl);
	} else {
		if (pl.sent == 0) {
			pthread_mutex_unlock(&c->lock);
			return -SMCR_E_AGAIN;
		}
		slot = link_slot_get(l, (unsigned)pl.nwr + 1, false, true);
	}
	if (slot < 0) {
		c->tx_wait = true;	/* woken by tx_wake_waiters */
		pthread_mutex_unlock(&c->lock);
		return -SMCR_E_AGAIN;
	}
	if (oob && pl.sent < total)
		oob = false;	/* the urgent byte is not in this piece: the caller sends again */
	/* procedures.md 4.3 step 1: B when the data did not fit the peer's free space. */
	c->tx_blocked = total > pl.sent && pl.sent == space;
	c->tx_prod += pl.sent;
	c->bytes_sent += pl.sent;
	cdc_fill(c, link_slot_buf(l, slot), oob);
	for (int i = 0; i < pl.nwr; i++)
		pl.wr[i].next = &pl.wr[i + 1];
	link_slot_send_wr(l, slot, &pl.wr[pl.nwr], &pl.cdc_sge);
	rc = link_post(l, &pl.wr[0]);
	if (rc) {
		link_slot_abandon(l, slot);
		close_abort_locked(c, -SMCR_E_CORE_RESET, false);
		pthread_mutex_unlock(&c->lock);
		return -SMCR_E_CORE_RESET;
	}
	if (pl.sent == total)
		c->tx_wait = false;
	pthread_mutex_unlock(&c->lock);
	return (long)pl.sent;
}
