/* failover.c: a link of a two-link group fails (docs/protocol/procedures.md 3.6-3.8; RFC
 * 7609 4.6 "failover" and 4.6.1 "validating data integrity").
 *
 * The connections of the failed link move to the surviving one. As the sender, each one
 * goes back to its last CDC whose send completed (RC: that CDC and every WRITE before it
 * reached the peer; what came after may or may not have), or forward to the peer's consumer
 * cursor if that is further, sends the failover validation CDC (F, the sequence number of
 * that last completed CDC) on the new link, and writes the bytes after that point again,
 * from a copy of what it wrote (conn->shadow, kept while the LG has two links), to the same
 * RMBE offsets, followed by CDCs whose sequence numbers continue after the highest used. As
 * the receiver, rx.c aborts on a validation message newer than what it accepted (a completed
 * CDC was lost) and drops older CDCs by their sequence number; a producer cursor that repeats
 * bytes it already has is taken as no news.
 *
 * Then the failed link is deleted (docs/protocol/procedures.md 3.7 step 4): a client that detects the
 * failure asks the server (DELETE LINK request on the surviving link) and frees the link at
 * once; the server sends its own DELETE LINK request (also when the client asked) and waits
 * for the answer, which is "no such link" when the client already freed it. With no
 * surviving link the LG ends (lgr_terminate).
 *
 * Every function runs with eng->lock held. */
#include "core/core_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/copy.h"

static const char *const down_names[CORE_DOWN_NREASONS] = {
	[CORE_DOWN_WC] = "error completion",
	[CORE_DOWN_EVENT] = "device event",
	[CORE_DOWN_TESTLINK] = "TEST LINK unanswered",
	[CORE_DOWN_PEER] = "deleted by the peer",
	[CORE_DOWN_NOSLOT] = "no send slot",
	[CORE_DOWN_ASYM] = "replaced: no asymmetric link needed",
};

void link_cdc_completed(struct core_link *l, uint32_t token, uint16_t seq, uint64_t prod)
{
	struct core_lgr *lg = l->lg;
	if (l->state == CORE_LINK_DOWN || lg->state == CORE_LG_DEAD)
		return;
	struct core_conn *c = lg->slots[token & 0xFF];
	if (!c || c->token != token || c->link != l)
		return;
	/* Completions come in order per QP; the compare keeps a late one of an older link
	 * from moving the point back. */
	if (c->tx_fin_seq && seq16_older(seq, c->tx_fin_seq))
		return;
	c->tx_fin_seq = seq;
	c->tx_fin_prod = prod;
}

int fo_send_validation_locked(struct core_conn *c)
{
	if (!c->fo_pending)
		return 0;
	struct core_link *l = c->link;
	if (!l || !atomic_load_explicit(&l->usable, memory_order_acquire) || !c->peer_token)
		return -SMCR_E_CORE_NOTCONN;
	int slot = link_slot_get(l, 1, false, c->slot);
	if (slot < 0)
		return slot;
	/* docs/protocol/wire-formats.md 7.3: token, F and the last completed CDC's sequence
	 * number, everything else zero; it takes no new sequence number. */
	struct cdc_msg m;
	memset(&m, 0, sizeof(m));
	m.seqno = c->fo_seq;
	m.token = c->peer_token;
	m.pf.failover = true;
	uint8_t *buf = link_slot_buf(l, slot);
	if (cdc_encode(&m, buf))
		memset(buf, 0, CDC_MSG_LEN);
	struct dev_send_wr wr;
	struct dev_sge sge;
	link_slot_send_wr(l, slot, &wr, &sge);
	int rc = link_post(l, &wr);
	if (rc) {
		link_slot_abandon(l, slot);
		return rc;
	}
	c->fo_pending = false;
	c->cdc_sent++;
	CORE_CTR_INC(c->eng, ctr_cdc_tx);
	return 0;
}

void fo_shadow_put_locked(struct core_conn *c, const struct iovec *iov, int iovcnt, uint32_t n)
{
	struct core_lgr *lg = c->lg;
	if (!lg || !atomic_load_explicit(&lg->multi, memory_order_relaxed)) {
		if (c->shadow)
			c->shadow_from = UINT64_MAX;	/* a gap: not valid until written anew */
		return;
	}
	if (!c->shadow) {
		c->shadow = malloc(c->peer_size);
		if (!c->shadow)
			return;	/* a failover then cannot write again: that connection aborts */
		c->shadow_from = c->tx_prod;
	} else if (c->shadow_from == UINT64_MAX) {
		c->shadow_from = c->tx_prod;
	}
	uint32_t off = (uint32_t)(c->tx_prod % c->peer_size);
	for (int i = 0; i < iovcnt && n; i++) {
		const uint8_t *src = iov[i].iov_base;
		size_t len = iov[i].iov_len < n ? iov[i].iov_len : n;
		if (src >= c->shadow && src < c->shadow + c->peer_size)
			return;	/* writing again from the copy itself */
		n -= (uint32_t)len;
		while (len) {
			size_t k = c->peer_size - off < len ? c->peer_size - off : len;
			smcr_copy(c->shadow + off, src, k);
			src += k;
			len -= k;
			off = (uint32_t)((off + k) % c->peer_size);
		}
	}
}

void fo_move_conn(struct core_conn *c, struct core_link *to)
{
	struct core_lgr *lg = to->lg;
	struct core_link *from = c->link;
	unsigned bits = 0;
	bool close_change = false, out = false;
	conn_hold(c);
	pthread_mutex_lock(&c->lock);
	if (c->peer_size && from) {
		/* the peer's RMB on the new link (ADD LINK CONTINUATION or CONFIRM RKEY gave it) */
		int t = lgr_rtoken_find(lg, from->slot, c->peer_rkey);
		if (t >= 0 && (lg->rtok[t].links & (1u << to->slot))) {
			uint64_t off = c->peer_vaddr - lg->rtok[t].vaddr[from->slot];
			c->peer_rkey = lg->rtok[t].rkey[to->slot];
			c->peer_vaddr = lg->rtok[t].vaddr[to->slot] + off;
		} else if (c->mode == CORE_MODE_SMC && !c->reset_err) {
			c->link = to;
			c->link_num = to->link_num;
			LOG_WARN(CORE_UNIT, "conn %#x: peer RMB unknown on link %u: aborted", c->token,
				 to->link_num);
			close_abort_locked(c, -SMCR_E_CORE_RESET, true);
			close_change = true;
			goto out;
		}
	}
	c->link = to;
	c->link_num = to->link_num;
	if (c->mode != CORE_MODE_SMC || c->reset_err || !c->peer_token ||
	    (c->cl & (CL_SENT_A | CL_RCVD_A)))
		goto out;
	/* The sender's rewind (docs/protocol/procedures.md 3.7 step 2). */
	uint64_t r = c->tx_fin_prod > c->tx_peer_cons ? c->tx_fin_prod : c->tx_peer_cons;
	if (r < c->tx_prod) {
		if (!c->shadow || c->shadow_from == UINT64_MAX || r < c->shadow_from) {
			LOG_WARN(CORE_UNIT, "conn %#x: %llu unconfirmed bytes not kept: aborted",
				 c->token, (unsigned long long)(c->tx_prod - r));
			close_abort_locked(c, -SMCR_E_CORE_RESET, true);
			close_change = true;
			goto out;
		}
		if (c->tx_prod > c->tx_replay_end)
			c->tx_replay_end = c->tx_prod;
		c->tx_prod = r;
	}
	bool unconfirmed = c->tx_seq != c->tx_fin_seq;
	LOG_INFO(CORE_UNIT, "conn %#x: to link %u, from %llu again (%llu bytes), last completed CDC %u",
		 c->token, to->link_num, (unsigned long long)c->tx_prod,
		 (unsigned long long)(c->tx_replay_end > c->tx_prod ? c->tx_replay_end - c->tx_prod
								    : 0),
		 c->tx_fin_seq);
	c->fo_pending = true;
	c->fo_seq = c->tx_fin_seq;
	if (unconfirmed)
		c->upd_pending = true;	/* cursors and close flags again, in a new CDC */
	(void)fo_send_validation_locked(c);
	bits = tx_flush_locked(c, false);
	if (c->upd_pending)
		(void)tx_cdc_locked(c, false);
	out = bits & TX_FLUSH_OUT;
	if (bits & TX_FLUSH_CLOSE)
		close_change = true;
out:
	pthread_mutex_unlock(&c->lock);
	if (out)
		core_ev_raise(c, CORE_EV_OUT);
	if (close_change)
		close_maybe_finish_elocked(c, lg->eng->last_now);
	conn_put(c);
}

void link_down(struct core_link *l, int err, unsigned why, uint64_t now)
{
	if (l->state == CORE_LINK_DOWN)
		return;
	struct core_lgr *lg = l->lg;
	struct core_engine *e = lg->eng;
	LOG_WARN(CORE_UNIT, "link %u (number %u) of LG %u down: %s (%s)", l->id, l->link_num, lg->id,
		 why < CORE_DOWN_NREASONS ? down_names[why] : "?", smcr_err_msg(err));
	l->state = CORE_LINK_DOWN;
	atomic_store(&l->usable, false);
	CORE_CTR_INC(e, ctr_links_failed);
	if (lg->state == CORE_LG_DEAD)
		return;
	if (lg->al_link == l) {
		/* the link being added: the flow ends, the LG goes on as it was */
		al_abort(lg, lg->role == CORE_SERVER && why != CORE_DOWN_PEER, now);
		return;
	}
	/* The surviving link: another active one, on another device if there is one. */
	struct core_link *to = NULL;
	for (int i = 0; i < CORE_LG_LINKS; i++) {
		struct core_link *k = lg->links[i];
		if (!k || k == l || k->state != CORE_LINK_ACTIVE)
			continue;
		if (!to || (to->cdev == l->cdev && k->cdev != l->cdev))
			to = k;
	}
	if (!to || lg->state != CORE_LG_ACTIVE) {
		/* No other link (docs/protocol/procedures.md 3.7): the LG ends. */
		if (lg->al_link)
			al_abort(lg, false, now);
		lgr_terminate(lg, LLC_DEL_LOST_PATH, false, false, err, now);
		return;
	}
	e->failovers++;
	CORE_CTR_INC(e, ctr_failovers);
	e->failover_reason[why < CORE_DOWN_NREASONS ? why : CORE_DOWN_WC]++;
	lg->failovers++;
	atomic_store(&lg->multi, false);
	unsigned moved = 0;
	for (unsigned i = 1; i < CORE_LG_SLOTS; i++) {
		struct core_conn *c = lg->slots[i];
		if (c && c->link == l) {
			fo_move_conn(c, to);
			moved++;
		}
		if (lg->state == CORE_LG_DEAD)
			return;
	}
	atomic_fetch_add_explicit(&e->ctr_conns_moved, moved, memory_order_relaxed);
	LOG_INFO(CORE_UNIT, "LG %u: failover from link %u to link %u: %u connections moved", lg->id,
		 l->link_num, to->link_num, moved);
	llc_flow_link_down(lg, l, to, now);
	uint8_t num = l->link_num;
	lgr_link_retire(lg, l, now);
	if (lg->role == CORE_CLIENT) {
		/* The client asks and frees the link at once; when the server asked (PEER), the
		 * answer goes out from fo_on_delete_link. */
		if (why != CORE_DOWN_PEER)
			lgr_send_delete_link(to, num, true, LLC_DEL_LOST_PATH);
		return;
	}
	/* The server's request, also when the client asked (Linux sends that request back). */
	if (why == CORE_DOWN_ASYM)
		lgr_send_delete_link(to, num, true, LLC_DEL_NO_ASYM_NEEDED);
	else
		lgr_send_delete_link(to, num, false, LLC_DEL_LOST_PATH);
	lg->del_link_num = num;
	lg->del_deadline = now + e->p.llc_wait_ns;
	lgr_timer_at(lg, lg->del_deadline);
}

void fo_on_delete_link(struct core_link *l, struct llc_msg *m, uint64_t now)
{
	struct core_lgr *lg = l->lg;
	const struct llc_delete_link *dl = &m->delete_link;
	if (m->resp) {
		if (lg->role == CORE_SERVER && lg->del_link_num && dl->link_num == lg->del_link_num)
			lg->del_link_num = 0;	/* the client's answer: done */
		return;
	}
	int ls = lgr_link_slot_by_num(lg, dl->link_num);
	struct core_link *victim = ls >= 0 ? lg->links[ls] : NULL;
	if (lg->role == CORE_SERVER) {
		/* The client lost the link: run the delete (our request goes back to it). */
		if (victim)
			link_down(victim, -SMCR_E_CORE_LINK_DOWN, CORE_DOWN_PEER, now);
		return;
	}
	/* The server's request: answer with it echoed, reason 0, or "no such link" if we
	 * freed it already (the normal answer after our own request). */
	struct llc_msg r = *m;
	r.resp = true;
	r.delete_link.reason = victim ? 0 : LLC_DEL_NOLNK;
	(void)llc_send(l, &r);	/* on the link the request came in on (docs/protocol/procedures.md 3.1) */
	if (victim)
		link_down(victim, -SMCR_E_CORE_LINK_DOWN, CORE_DOWN_PEER, now);
}

void fo_timers(struct core_lgr *lg, uint64_t now)
{
	if (!lg->del_link_num)
		return;
	if (now >= lg->del_deadline) {
		/* no answer: the link is gone on our side anyway */
		LOG_INFO(CORE_UNIT, "LG %u: no answer to DELETE LINK %u", lg->id, lg->del_link_num);
		lg->del_link_num = 0;
		return;
	}
	lgr_timer_at(lg, lg->del_deadline);
}
