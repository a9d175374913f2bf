/* rx.c: the receiving side of the data path (docs/protocol/procedures.md 4.2, 4.4, 4.6;
 * docs/protocol/wire-formats.md 7.1, 7.3): CDC messages are decoded, matched to a connection by
 * alert token, checked (sequence number, cursors inside the window the protocol allows) and only
 * then applied; reads copy from our RMBE at the consumer cursor (two pieces at the ring end),
 * honour the urgent mark as TCP does, and send window updates by the rule of 4.5. */
#include "core/core_int.h"

#include <string.h>

#include "util/copy.h"

static void bad_peer(struct core_conn *c, int err, const struct cdc_msg *m)
{
	SMCR_LOG_RL(SMCR_LOG_WARN, CORE_UNIT,
		    "conn %#x: %s (seq %u prod %u:%u cons %u:%u): connection aborted", c->token,
		    smcr_err_msg(err), m->seqno, m->prod.wrap, m->prod.count, m->cons.wrap,
		    m->cons.count);
	atomic_fetch_add(&c->eng->cdc_rx_dropped, 1);
	close_abort_locked(c, err, true);
}

void rx_cdc(struct core_link *l, const uint8_t *buf, size_t len, uint64_t now)
{
	struct core_lgr *lg = l->lg;
	struct core_engine *e = lg->eng;
	struct cdc_msg m;
	int rc = cdc_decode(buf, len, &m);
	if (rc) {
		SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "LG %u: CDC dropped: %s", lg->id, smcr_err_msg(rc));
		atomic_fetch_add(&e->cdc_rx_dropped, 1);
		return;
	}
	if (lg->state == CORE_LG_DEAD)
		return;
	/* Our alert tokens are gen << 8 | slot: one lookup, then the whole token must match. */
	struct core_conn *c = lg->slots[m.token & 0xFF];
	if (!c || c->token != m.token) {
		SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "LG %u: CDC for unknown token %#x dropped",
			    lg->id, m.token);
		atomic_fetch_add(&e->cdc_rx_dropped, 1);
		return;
	}
	conn_hold(c);
	unsigned raise = 0;
	bool close_change = false;
	bool smc;
	pthread_mutex_lock(&c->lock);
	if (!c->rmbe)
		goto out;
	c->cdc_received++;
	CORE_CTR_INC(c->eng, ctr_cdc_rx);
	if (m.pf.failover) {
		/* the peer writes again what came after that CDC: its producer cursor may now
		 * name bytes we already have (docs/protocol/procedures.md 3.7) */
		c->rx_fo = true;
		/* 7.3: a validation message newer than what we accepted means a CDC the sender
		 * saw completed never reached us: data may be lost, abort. But that CDC may be
		 * in the failed link's CQ, not polled yet (this one came on another link): the
		 * verdict waits for the end of this progress round (rx_fo_checks). */
		if (c->rx_seq_valid && seq16_older(c->rx_seq, m.seqno)) {
			if (!c->fo_check) {
				conn_hold(c);	/* the check list's */
				c->fo_check_next = e->fo_check_head;
				e->fo_check_head = c;
			}
			c->fo_check = true;
			c->fo_check_seq = m.seqno;
		}
		goto out;
	}
	if (c->rx_seq_valid && seq16_older(m.seqno, c->rx_seq)) {
		atomic_fetch_add(&e->cdc_rx_dropped, 1);	/* 7.1: older: dropped */
		goto out;
	}
	if (c->reset_err) {
		/* The connection is dead (a bad cursor, our abort, the peer's A): no cursor or
		 * data of a later CDC is taken (the program gets the reset, never bytes after
		 * it: sock-wishes.md 1). Only the close flags count, so the close exchange can
		 * finish (docs/protocol/procedures.md 5.2). */
		if (m.cf.abort && !(c->cl & CL_RCVD_A)) {
			c->cl |= CL_RCVD_A;
			close_change = true;
		} else if (m.cf.closed && !(c->cl & CL_RCVD_C)) {
			c->cl |= CL_RCVD_C;
			close_change = true;
		} else {
			atomic_fetch_add(&e->cdc_rx_dropped, 1);
		}
		goto out;
	}
	/* Cursor checks (4.2): the producer may not go backwards nor past the space we gave
	 * (what we last reported consumed + the ring); the consumer may not go backwards nor
	 * past what we wrote. Nothing is applied unless both pass. */
	uint64_t prod, cons = 0;
	bool ok = curs_to_abs(m.prod, c->rx_peer_prod, c->rx_cons_sent + c->rmbe_size,
			      c->rmbe_size, &prod);
	if (!ok && c->rx_fo) {
		/* After the peer's failover its cursor may be behind ours while it writes again
		 * bytes we have (the same bytes at the same offsets): no news, not an error. */
		uint64_t lo = c->rx_peer_prod > c->rmbe_size ? c->rx_peer_prod - c->rmbe_size : 0;
		ok = curs_to_abs(m.prod, lo, c->rx_peer_prod, c->rmbe_size, &prod);
		if (ok)
			prod = c->rx_peer_prod;
	}
	/* After our own failover the peer may have consumed bytes we are about to write
	 * again (their CDC reached it, its completion did not reach us). */
	uint64_t hi = c->tx_prod > c->tx_replay_end ? c->tx_prod : c->tx_replay_end;
	if (ok && c->peer_size)
		ok = curs_to_abs(m.cons, c->tx_peer_cons, hi, c->peer_size, &cons);
	else if (ok)
		ok = m.cons.wrap == 0 && m.cons.count == 0;	/* we have sent nothing yet */
	if (ok && prod > c->rx_peer_prod && (c->cl & (CL_RCVD_D | CL_RCVD_C | CL_RCVD_A)))
		ok = false;	/* data after "sending done" (5.1) */
	if (!ok) {
		bad_peer(c, -SMCR_E_CORE_BAD_CURSOR, &m);
		close_change = true;
		goto out;
	}
	c->rx_seq = m.seqno;
	c->rx_seq_valid = true;
	if (prod > c->rx_peer_prod) {
		c->rx_peer_prod = prod;
		raise |= CORE_EV_IN | CORE_EV_IN_NEW;
	}
	bool cons_moved = c->peer_size && cons > c->tx_peer_cons;
	if (cons_moved)
		c->tx_peer_cons = cons;
	if (cons_moved && cons > c->tx_prod)
		c->tx_prod = cons;	/* docs/protocol/procedures.md 3.7: forward to the peer's consumer cursor */
	c->peer_blocked = m.pf.write_blocked;
	if (m.pf.cons_upd_req)
		c->peer_req = true;	/* honoured by the next update (4.5) */
	/* Urgent data (4.6): U names the byte just before this producer cursor. */
	if (m.pf.urg_present && prod > c->rx_cons) {
		c->urg_abs = prod;
		c->urg_byte = c->rmbe[(prod - 1) % c->rmbe_size];
		c->urg = URG_VALID;
		raise |= CORE_EV_PRI;
	} else if (m.pf.urg_pending && c->urg != URG_VALID) {
		c->urg = URG_PENDING;
		raise |= CORE_EV_PRI;
	}
	/* Close flags (5.2). */
	if (m.cf.abort && !(c->cl & CL_RCVD_A)) {
		c->cl |= CL_RCVD_A;
		close_abort_locked(c, -SMCR_E_CORE_RESET, false);	/* our A waits for close() */
		close_change = true;
	}
	if (m.cf.closed && !(c->cl & CL_RCVD_C)) {
		c->cl |= CL_RCVD_C;
		raise |= CORE_EV_IN | CORE_EV_IN_NEW | CORE_EV_RDHUP;
		close_change = true;
	}
	if (m.cf.done_writing && !(c->cl & CL_RCVD_D)) {
		c->cl |= CL_RCVD_D;
		raise |= CORE_EV_IN | CORE_EV_IN_NEW | CORE_EV_RDHUP;
		close_change = true;
	}
	if (c->mode == CORE_MODE_SMC && (cons_moved || (c->cl & CL_RCVD_C)) &&
	    (c->sb_tail < c->sb_head || c->cl_pend || c->tx_wait || c->tx_prod < c->tx_replay_end)) {
		/* The peer made room (or closed): write what the send ring holds
		 * (docs/parts/sndbuf.md "Flush triggers"), then D/C if they wait for it. */
		unsigned bits = tx_flush_locked(c, false);
		if (bits & TX_FLUSH_OUT)
			raise |= CORE_EV_OUT;
		if (bits & TX_FLUSH_CLOSE)
			close_change = true;
	}
	if (c->mode == CORE_MODE_SMC)
		tx_cons_update_locked(c, false);	/* R or B may make one due now */
out:
	smc = c->mode == CORE_MODE_SMC;
	pthread_mutex_unlock(&c->lock);
	if (raise && smc)
		core_ev_raise(c, raise);
	if (close_change)
		close_maybe_finish_elocked(c, now);
	conn_put(c);
}

void rx_fo_checks(struct core_engine *e, uint64_t now)
{
	while (e->fo_check_head) {
		struct core_conn *c = e->fo_check_head;
		e->fo_check_head = c->fo_check_next;
		c->fo_check_next = NULL;
		bool close_change = false;
		pthread_mutex_lock(&c->lock);
		if (c->fo_check && c->rmbe && !c->reset_err && c->rx_seq_valid &&
		    seq16_older(c->rx_seq, c->fo_check_seq)) {
			struct cdc_msg m;
			memset(&m, 0, sizeof(m));
			m.seqno = c->fo_check_seq;
			m.pf.failover = true;
			bad_peer(c, -SMCR_E_CORE_FAILOVER_LOST, &m);
			close_change = true;
		}
		c->fo_check = false;
		pthread_mutex_unlock(&c->lock);
		if (close_change)
			close_maybe_finish_elocked(c, now);
		conn_put(c);
	}
}

/* Copies n bytes of the ring from absolute position pos into the iovec. */
static void ring_copy_out(const struct core_conn *c, uint64_t pos, uint32_t n,
			  const struct iovec *iov, int iovcnt)
{
	struct curs_chunk ch[2];
	int nch = curs_split((uint32_t)(pos % c->rmbe_size), n, c->rmbe_size, ch);
	int vi = 0;
	size_t voff = 0;
	for (int k = 0; k < nch; k++) {
		const uint8_t *src = c->rmbe + ch[k].off;
		uint32_t left = ch[k].len;
		while (left && vi < iovcnt) {
			size_t room = iov[vi].iov_len - voff;
			if (!room) {
				vi++;
				voff = 0;
				continue;
			}
			size_t take = room < left ? room : left;
			smcr_copy((uint8_t *)iov[vi].iov_base + voff, src, take);
			src += take;
			left -= (uint32_t)take;
			voff += take;
		}
	}
}

static long recv_oob(struct core_conn *c, const struct iovec *iov, int iovcnt, unsigned flags)
{
	if (c->oobinline)
		return -SMCR_E_CORE_OOB_INVAL;
	if (c->urg == URG_PENDING)
		return -SMCR_E_AGAIN;
	if (c->urg != URG_VALID)
		return -SMCR_E_CORE_OOB_INVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len) {
			*(uint8_t *)iov[i].iov_base = c->urg_byte;
			if (!(flags & CORE_MSG_PEEK))
				c->urg = URG_READ;	/* still skipped in the stream */
			return 1;
		}
	}
	return 0;
}

long core_conn_recv(struct core_conn *c, const struct iovec *iov, int iovcnt, unsigned flags)
{
	size_t total = 0;
	if (iovcnt < 0 || (iovcnt && !iov))
		return -SMCR_E_INVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -SMCR_E_INVAL;
		total += iov[i].iov_len;
	}
	long rc;
	pthread_mutex_lock(&c->lock);
	if (c->mode != CORE_MODE_SMC) {
		rc = -SMCR_E_CORE_NOTCONN;
		goto out;
	}
	if (flags & CORE_MSG_OOB) {
		rc = recv_oob(c, iov, iovcnt, flags);
		goto out;
	}
	if (!c->rmbe) {
		/* Detached: the LG died (reset) or the connection is fully closed. */
		rc = c->err ? c->err : 0;
		c->err = 0;
		goto out;
	}
	uint64_t pos = c->rx_cons, limit = c->rx_peer_prod;
	bool skip = false;
	if ((c->urg == URG_VALID || c->urg == URG_READ) && c->urg_abs > pos && c->urg_abs <= limit) {
		uint64_t mark = c->urg_abs - 1;
		if (mark > pos) {
			limit = mark;	/* a read stops at the mark, as TCP's */
		} else if (!c->oobinline) {
			pos++;		/* the urgent byte is not in the stream */
			skip = true;
		}
	}
	uint64_t avail = limit - pos;
	if (avail == 0 || total == 0) {
		if (skip && !(flags & CORE_MSG_PEEK)) {
			c->rx_cons = pos;
			c->urg = URG_NONE;
			tx_cons_update_locked(c, true);
		}
		if (total == 0)
			rc = 0;
		else if (c->lost_wait)
			rc = -SMCR_E_AGAIN;	/* the end waits for the TCP verdict */
		else if (c->err && !c->wrote_after_c) {
			/* reset: reported once (then 0, as TCP). A write after the peer's C
			 * leaves the EOF first, as TCP's FIN does before its reset. */
			rc = c->err;
			c->err = 0;
		} else if (c->reset_err || c->shut_rd || (c->cl & (CL_RCVD_D | CL_RCVD_C)))
			rc = 0;		/* end of stream */
		else
			rc = -SMCR_E_AGAIN;
		goto out;
	}
	uint32_t n = avail < total ? (uint32_t)avail : (uint32_t)total;
	ring_copy_out(c, pos, n, iov, iovcnt);
	if (!(flags & CORE_MSG_PEEK)) {
		c->rx_cons = pos + n;
		c->bytes_received += n;
		bool force = false;
		if ((c->urg == URG_VALID || c->urg == URG_READ) && c->rx_cons >= c->urg_abs) {
			c->urg = URG_NONE;	/* passed the mark: update at once (4.6) */
			force = true;
		}
		tx_cons_update_locked(c, force);
	}
	rc = n;
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}
