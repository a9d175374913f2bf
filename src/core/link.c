/* link.c: one link = one RC QP pair (docs/protocol/procedures.md 2.6,
 * docs/protocol/linux-interop.md 6): QP creation and the RESET->INIT->RTR->RTS transitions with
 * Linux's attributes, receive buffers (48, re-posted at once), send slots for the 44-byte LLC/CDC
 * messages (signaled, solicited), and the dispatch of work completions to the CDC and LLC
 * receivers. */
#include "core/core_int.h"

#include <stdlib.h>
#include <string.h>

static uint64_t wr_id(const struct core_link *l, uint32_t kind, uint32_t idx)
{
	return (uint64_t)l->id << 32 | kind | idx;
}

static uint8_t *recv_buf(struct core_link *l, unsigned i)
{
	return (uint8_t *)l->msgmem->addr + (CORE_SEND_SLOTS + i) * CORE_MSG_BUF;
}

uint8_t *link_slot_buf(struct core_link *l, int slot)
{
	return (uint8_t *)l->msgmem->addr + (unsigned)slot * CORE_MSG_BUF;
}

bool link_has_stage(struct core_link *l) { return l->stagemem != NULL; }

uint8_t *link_stage_buf(struct core_link *l, int slot)
{
	return (uint8_t *)l->stagemem->addr + (size_t)slot * CORE_STAGE;
}

uint32_t link_stage_lkey(struct core_link *l) { return l->stagemr->lkey; }

/* A v2 link's two tails (CORE_V2_TAIL each) after the receive buffers. */
static uint8_t *rx_tail(struct core_link *l)
{
	return (uint8_t *)l->msgmem->addr + (CORE_SEND_SLOTS + CORE_RECV_BUFS) * CORE_MSG_BUF;
}

static uint8_t *tx_tail(struct core_link *l)
{
	return rx_tail(l) + CORE_V2_TAIL;
}

static int post_recv_one(struct core_link *l, unsigned i)
{
	struct dev_sge sge[2] = {
		{
			.addr = (uint64_t)(uintptr_t)recv_buf(l, i),
			.length = CORE_MSG_BUF,
			.lkey = l->msgmr->lkey,
		},
		{
			/* v2: what a long LLC message has past its first 64 bytes */
			.addr = l->v2_tails ? (uint64_t)(uintptr_t)rx_tail(l) : 0,
			.length = CORE_V2_TAIL,
			.lkey = l->msgmr->lkey,
		},
	};
	struct dev_recv_wr wr = { .wr_id = wr_id(l, CORE_WR_RECV, i), .sg_list = sge,
				  .num_sge = l->v2_tails ? 2 : 1 };
	return dev_post_recv(l->qp, &wr, NULL);
}

const struct dev_gid_entry *link_gid(const struct core_link *l)
{
	return l->lg->v2 ? &l->cdev->gid_v2 : &l->cdev->gid;
}

static uint8_t link_gid_index(const struct core_link *l)
{
	return l->lg->v2 ? l->cdev->gid_v2_index : l->cdev->gid_index;
}

int link_create(struct core_lgr *lg, struct core_dev *cd, unsigned slot, struct core_link **out)
{
	struct core_engine *e = lg->eng;
	struct dev_pd *pd = NULL;
	int rc = lgr_pd_for(lg, cd, &pd);
	if (rc)
		return rc;
	struct core_link *l = calloc(1, sizeof(*l));
	if (!l)
		return -SMCR_E_NOMEM;
	l->lg = lg;
	l->slot = (uint8_t)slot;
	l->id = e->next_link_id++;
	if (e->next_link_id == 0)
		e->next_link_id = 1;
	l->cdev = cd;
	l->state = CORE_LINK_INIT;
	l->link_num = lg->role == CORE_SERVER ? 1 : 0;	/* client adopts it from CONFIRM LINK */
	l->link_uid = lg->id << 8 | (slot + 1);
	l->psn = core_rand32(e) & 0xFFFFFF;
	l->mtu = (uint8_t)cd->port.active_mtu;
	l->testlink_deadline = CORE_NEVER;
	l->drain_deadline = CORE_NEVER;
	l->slots_free = CORE_SEND_SLOTS;
	l->long_slot = -1;
	l->v2_tails = lg->v2;
	pthread_mutex_init(&l->tx_lock, NULL);

	if (l->v2_tails) {
		l->v2_rx = malloc(LLC2_MAX_LEN);
		if (!l->v2_rx) {
			rc = -SMCR_E_NOMEM;
			goto fail;
		}
	}
	rc = dev_mem_alloc((CORE_SEND_SLOTS + CORE_RECV_BUFS) * CORE_MSG_BUF +
				   (l->v2_tails ? 2 * CORE_V2_TAIL : 0),
			   "smcr-msg", &l->msgmem);
	if (rc)
		goto fail;
	rc = dev_reg_mr(pd, l->msgmem->addr, l->msgmem->len, DEV_ACCESS_LOCAL_WRITE, &l->msgmr);
	if (rc)
		goto fail_mem;

	struct dev_qp_init_attr qa = {
		.send_cq = cd->cq,
		.recv_cq = cd->cq,
		.qp_context = l,
		.cap = {
			.max_send_wr = CORE_SQ_DEPTH,
			.max_recv_wr = CORE_RECV_BUFS,
			.max_send_sge = 2,
			.max_recv_sge = l->v2_tails ? 2 : 1,
			.max_inline_data = cd->attr.max_inline_data,
		},
	};
	rc = dev_create_qp(pd, &qa, &l->qp);
	if (rc)
		goto fail_mr;
	l->max_inline = l->qp->cap.max_inline_data;
	l->max_sge = l->qp->cap.max_send_sge ? l->qp->cap.max_send_sge : 1;
	l->inline_msgs = l->max_inline >= LLC_MSG_LEN;
	if (l->max_inline < CORE_STAGE) {
		/* A provider without big inline WRITEs: data is staged per slot and written
		 * from there (Linux copies into its send buffer the same way). */
		rc = dev_mem_alloc((size_t)CORE_SEND_SLOTS * CORE_STAGE, "smcr-stage", &l->stagemem);
		if (rc)
			goto fail_qp;
		rc = dev_reg_mr(pd, l->stagemem->addr, l->stagemem->len, DEV_ACCESS_LOCAL_WRITE,
				&l->stagemr);
		if (rc)
			goto fail_stage;
	}

	struct dev_qp_attr at = {
		.qp_state = DEV_QPS_INIT,
		.pkey_index = 0,
		.port_num = cd->port_num,
		.qp_access_flags = DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE,
	};
	rc = dev_modify_qp(l->qp, &at, DEV_QP_MASK_INIT | DEV_QP_PKEY_INDEX);
	if (rc)
		goto fail_stage_mr;
	for (unsigned i = 0; i < CORE_RECV_BUFS; i++) {
		rc = post_recv_one(l, i);
		if (rc)
			goto fail_stage_mr;
	}
	l->next = e->links;
	e->links = l;
	lg->links[slot] = l;
	*out = l;
	return 0;

fail_stage_mr:
	if (l->stagemr && dev_dereg_mr(l->stagemr))
		LOG_WARN(CORE_UNIT, "stage MR dereg failed");
fail_stage:
	if (l->stagemem)
		dev_mem_put(l->stagemem);
fail_qp:
	if (dev_destroy_qp(l->qp))
		LOG_WARN(CORE_UNIT, "QP destroy failed");
fail_mr:
	if (dev_dereg_mr(l->msgmr))
		LOG_WARN(CORE_UNIT, "msg MR dereg failed");
fail_mem:
	dev_mem_put(l->msgmem);
fail:
	pthread_mutex_destroy(&l->tx_lock);
	free(l->v2_rx);
	free(l);
	LOG_WARN(CORE_UNIT, "link setup failed: %s", smcr_err_msg(rc));
	return -SMCR_E_CORE_RDYLNK;
}

/* INIT -> RTR (docs/protocol/procedures.md 2.6): path MTU, peer QPN and PSN, GRH to the peer's
 * GID. */
int link_rtr(struct core_link *l, uint32_t peer_qpn, uint32_t peer_psn, uint8_t mtu,
	     const struct wire_gid *gid, const struct wire_mac *mac)
{
	struct dev_qp_attr at = {
		.qp_state = DEV_QPS_RTR,
		.path_mtu = (enum dev_mtu)mtu,
		.dest_qp_num = peer_qpn,
		.rq_psn = peer_psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 5,
	};
	memcpy(at.ah_attr.dgid.raw, gid->b, DEV_GID_LEN);
	memcpy(at.ah_attr.dmac, mac->b, DEV_MAC_LEN);
	at.ah_attr.sgid_index = link_gid_index(l);
	at.ah_attr.hop_limit = 1;
	at.ah_attr.port_num = l->cdev->port_num;
	int rc = dev_modify_qp(l->qp, &at, DEV_QP_MASK_RTR);
	if (rc) {
		LOG_WARN(CORE_UNIT, "link %u: QP to RTR failed: %s", l->id, smcr_err_msg(rc));
		return -SMCR_E_CORE_RDYLNK;
	}
	l->peer_qpn = peer_qpn;
	l->peer_psn = peer_psn;
	l->mtu = mtu;
	l->peer_gid = *gid;
	l->peer_mac = *mac;
	return 0;
}

/* RTR -> RTS: timeout 15, retry 7, RNR retry 7 (infinite), as Linux. */
int link_rts(struct core_link *l)
{
	struct dev_qp_attr at = {
		.qp_state = DEV_QPS_RTS,
		.sq_psn = l->psn,
		.timeout = 15,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 1,
	};
	int rc = dev_modify_qp(l->qp, &at, DEV_QP_MASK_RTS);
	if (rc) {
		LOG_WARN(CORE_UNIT, "link %u: QP to RTS failed: %s", l->id, smcr_err_msg(rc));
		return -SMCR_E_CORE_RDYLNK;
	}
	return 0;
}

void link_destroy(struct core_link *l)
{
	struct core_engine *e = l->lg->eng;
	if (dev_destroy_qp(l->qp))
		LOG_WARN(CORE_UNIT, "link %u: QP destroy failed", l->id);
	if (l->stagemr && dev_dereg_mr(l->stagemr))
		LOG_WARN(CORE_UNIT, "link %u: stage MR dereg failed", l->id);
	if (l->stagemem)
		dev_mem_put(l->stagemem);
	if (dev_dereg_mr(l->msgmr))
		LOG_WARN(CORE_UNIT, "link %u: msg MR dereg failed", l->id);
	dev_mem_put(l->msgmem);
	if (e->link_last == l)
		e->link_last = NULL;
	for (struct core_link **pp = &e->links; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	pthread_mutex_destroy(&l->tx_lock);
	free(l->v2_rx);
	free(l);
}

struct core_link *link_by_id(struct core_engine *e, uint32_t id)
{
	if (e->link_last && e->link_last->id == id)
		return e->link_last;	/* completions come in runs of one link */
	for (struct core_link *l = e->links; l; l = l->next) {
		if (l->id == id) {
			e->link_last = l;
			return l;
		}
	}
	return NULL;
}

/* ---- send slots --------------------------------------------------------------------------- */

int link_slot_get(struct core_link *l, unsigned nwr, bool llc, unsigned waiter)
{
	int slot = -SMCR_E_AGAIN;
	pthread_mutex_lock(&l->tx_lock);
	unsigned need = llc ? 1 : 1 + CORE_LLC_RESERVE;
	if (l->slots_free >= need && l->sq_used + nwr <= l->qp->cap.max_send_wr) {
		for (int i = 0; i < CORE_SEND_SLOTS; i++) {
			if (!l->slots[i].busy) {
				l->slots[i].busy = true;
				l->slots[i].covers = (uint8_t)nwr;
				l->slots_free--;
				l->sq_used += nwr;
				slot = i;
				break;
			}
		}
	}
	if (slot < 0 && waiter) {
		l->slot_waiters = true;
		if (waiter < CORE_LG_SLOTS)
			l->starved[waiter / 64] |= 1ull << (waiter % 64);
		else
			l->starved_all = true;
	}
	pthread_mutex_unlock(&l->tx_lock);
	return slot;
}

void link_slot_abandon(struct core_link *l, int slot)
{
	pthread_mutex_lock(&l->tx_lock);
	if (l->slots[slot].busy) {
		l->slots[slot].busy = false;
		l->sq_used -= l->slots[slot].covers;
		l->slots_free++;
	}
	pthread_mutex_unlock(&l->tx_lock);
}

/* The slot's SEND: 44 bytes, signaled (its completion frees the slot and every unsignaled
 * WRITE before it) and solicited (docs/protocol/linux-interop.md 6: Linux arms for solicited
 * events). */
void link_slot_send_wr(struct core_link *l, int slot, struct dev_send_wr *wr, struct dev_sge *sge)
{
	sge->addr = (uint64_t)(uintptr_t)link_slot_buf(l, slot);
	sge->length = LLC_MSG_LEN;
	sge->lkey = l->msgmr->lkey;
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = wr_id(l, CORE_WR_SLOT, (uint32_t)slot);
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = DEV_WR_SEND;
	wr->send_flags = DEV_SEND_SIGNALED | DEV_SEND_SOLICITED |
			 (l->inline_msgs ? DEV_SEND_INLINE : 0);
}

static void trace_fill(const struct core_link *l, struct core_trace_ev *ev)
{
	memcpy(ev->local_gid, l->cdev->gid.gid.raw, sizeof(ev->local_gid));
	memcpy(ev->peer_gid, l->peer_gid.b, sizeof(ev->peer_gid));
	memcpy(ev->local_mac, l->cdev->gid.mac, sizeof(ev->local_mac));
	memcpy(ev->peer_mac, l->peer_mac.b, sizeof(ev->peer_mac));
	ev->local_qpn = l->qp->qp_num;
	ev->peer_qpn = l->peer_qpn;
}

/* SMCR_TRACE: each WR of the chain as it is posted (core_engine_params.trace). */
static void trace_post(const struct core_link *l, const struct dev_send_wr *wr)
{
	const struct core_engine_params *p = &l->lg->eng->p;
	for (; wr; wr = wr->next) {
		struct core_trace_ev ev;
		memset(&ev, 0, sizeof(ev));
		trace_fill(l, &ev);
		for (int i = 0; i < wr->num_sge; i++)
			ev.len += wr->sg_list[i].length;
		ev.solicited = wr->send_flags & DEV_SEND_SOLICITED;
		if (wr->opcode == DEV_WR_SEND) {
			static _Thread_local uint8_t whole[LLC2_MAX_LEN];
			ev.kind = CORE_TRACE_SEND;
			if (wr->num_sge == 1) {
				ev.msg = (const uint8_t *)(uintptr_t)wr->sg_list[0].addr;
			} else if (wr->num_sge == 2 && ev.len <= sizeof(whole)) {
				/* a long v2 LLC message (link_send_long): slot and tail as one */
				size_t a = wr->sg_list[0].length;
				memcpy(whole, (const void *)(uintptr_t)wr->sg_list[0].addr, a);
				memcpy(whole + a, (const void *)(uintptr_t)wr->sg_list[1].addr,
				       wr->sg_list[1].length);
				ev.msg = whole;
			} else {
				continue; /* LLC and CDC messages are one piece, or slot and tail */
			}
		} else {
			ev.kind = CORE_TRACE_WRITE;
			ev.remote_addr = wr->rdma.remote_addr;
			ev.rkey = wr->rdma.rkey;
		}
		p->trace(p->trace_ctx, &ev);
	}
}

int link_post(struct core_link *l, struct dev_send_wr *wr)
{
	if (l->lg->eng->p.trace)
		trace_post(l, wr);
	int rc = dev_post_send(l->qp, wr, NULL);
	if (rc)
		SMCR_LOG_RL(SMCR_LOG_WARN, CORE_UNIT, "link %u: post_send: %s", l->id,
			    smcr_err_msg(rc));
	return rc;
}

int link_send_msg(struct core_link *l, const uint8_t msg[44])
{
	if (l->state == CORE_LINK_DOWN)
		return -SMCR_E_CORE_LINK_DOWN;
	int slot = link_slot_get(l, 1, true, 0);
	if (slot < 0) {
		SMCR_LOG_RL(SMCR_LOG_WARN, CORE_UNIT, "link %u: no send slot for an LLC message", l->id);
		return slot;
	}
	memcpy(link_slot_buf(l, slot), msg, LLC_MSG_LEN);
	struct dev_send_wr wr;
	struct dev_sge sge;
	link_slot_send_wr(l, slot, &wr, &sge);
	int rc = link_post(l, &wr);
	if (rc)
		link_slot_abandon(l, slot);
	return rc;
}

int link_send_long(struct core_link *l, const uint8_t *msg, size_t len)
{
	if (len <= LLC_MSG_LEN)
		return link_send_msg(l, msg);
	if (!l->v2_tails || len > CORE_MSG_BUF + CORE_V2_TAIL)
		return -SMCR_E_INTERNAL;
	if (l->state == CORE_LINK_DOWN)
		return -SMCR_E_CORE_LINK_DOWN;
	pthread_mutex_lock(&l->tx_lock);
	bool busy = l->long_slot >= 0;
	pthread_mutex_unlock(&l->tx_lock);
	if (busy) {
		SMCR_LOG_RL(SMCR_LOG_WARN, CORE_UNIT, "link %u: a long LLC message still in flight",
			    l->id);
		return -SMCR_E_AGAIN;
	}
	int slot = link_slot_get(l, 1, true, 0);
	if (slot < 0) {
		SMCR_LOG_RL(SMCR_LOG_WARN, CORE_UNIT, "link %u: no send slot for an LLC message", l->id);
		return slot;
	}
	/* up to 64 bytes fit the slot alone; past that the rest goes in the tail */
	size_t head = len < CORE_MSG_BUF ? len : CORE_MSG_BUF;
	memcpy(link_slot_buf(l, slot), msg, head);
	if (len > head)
		memcpy(tx_tail(l), msg + head, len - head);
	struct dev_send_wr wr;
	struct dev_sge sge[2];
	link_slot_send_wr(l, slot, &wr, &sge[0]);
	sge[0].length = (uint32_t)head;
	sge[1].addr = (uint64_t)(uintptr_t)tx_tail(l);
	sge[1].length = (uint32_t)(len - head);
	sge[1].lkey = l->msgmr->lkey;
	wr.sg_list = sge;
	wr.num_sge = len > head ? 2 : 1;
	wr.send_flags &= ~(unsigned)DEV_SEND_INLINE;	/* from registered memory */
	pthread_mutex_lock(&l->tx_lock);
	if (wr.num_sge == 2)
		l->long_slot = slot;
	pthread_mutex_unlock(&l->tx_lock);
	int rc = link_post(l, &wr);
	if (rc) {
		pthread_mutex_lock(&l->tx_lock);
		l->long_slot = -1;
		pthread_mutex_unlock(&l->tx_lock);
		link_slot_abandon(l, slot);
	}
	return rc;
}

/* ---- completions ------------------------------------------------------------------------- */

static void slot_complete(struct core_link *l, unsigned idx, bool ok)
{
	bool waiters;
	pthread_mutex_lock(&l->tx_lock);
	if (idx >= CORE_SEND_SLOTS || !l->slots[idx].busy) {
		pthread_mutex_unlock(&l->tx_lock);
		return;
	}
	struct core_slot *sl = &l->slots[idx];
	uint32_t token = atomic_exchange_explicit(&sl->cdc_token, 0, memory_order_acquire);
	uint16_t seq = atomic_load_explicit(&sl->cdc_seq, memory_order_relaxed);
	uint64_t prod = atomic_load_explicit(&sl->cdc_prod, memory_order_relaxed);
	l->slots[idx].busy = false;
	l->sq_used -= l->slots[idx].covers;
	l->slots_free++;
	if (l->long_slot == (int)idx)
		l->long_slot = -1;	/* the send tail is free again */
	waiters = l->slot_waiters;
	l->slot_waiters = false;
	pthread_mutex_unlock(&l->tx_lock);
	if (ok && token)
		link_cdc_completed(l, token, seq, prod);
	/* Not at once: a batch of completions frees several slots, and each wake scans
	 * every connection of the LG under its lock (255 lock pairs: 11 % of the CPU of
	 * conns 1000, docs/parts/conns.md). link_run_wakes does it once per batch. */
	if (waiters)
		l->wake_due = true;
}

void link_run_wakes(struct core_engine *e)
{
	for (struct core_link *l = e->links; l; l = l->next) {
		if (!l->wake_due)
			continue;
		l->wake_due = false;
		/* the starved connections, taken under tx_lock: one that starves again while
		 * we visit sets its bit (and slot_waiters) anew, for the next completion */
		uint64_t bits[CORE_LG_SLOTS / 64];
		pthread_mutex_lock(&l->tx_lock);
		memcpy(bits, l->starved, sizeof(bits));
		memset(l->starved, 0, sizeof(l->starved));
		bool all = l->starved_all;
		l->starved_all = false;
		pthread_mutex_unlock(&l->tx_lock);
		if (l->state == CORE_LINK_ACTIVE && l->lg->state != CORE_LG_DEAD)
			tx_wake_waiters(l->lg, bits, all);
	}
}

void link_handle_wc(struct core_engine *e, const struct dev_wc *wc, uint64_t now)
{
	struct core_link *l = link_by_id(e, (uint32_t)(wc->wr_id >> 32));
	if (!l)
		return;	/* a completion of a link already destroyed */
	uint32_t kind = (uint32_t)wc->wr_id & 0xFFFF0000u;
	uint32_t idx = (uint32_t)wc->wr_id & 0xFFFFu;
	if (kind == CORE_WR_SLOT) {
		slot_complete(l, idx, wc->status == DEV_WC_SUCCESS);
		if (wc->status == DEV_WC_SUCCESS)
			l->tx_done_ns = now;
	}
	if (wc->status != DEV_WC_SUCCESS) {
		if (l->state != CORE_LINK_DOWN)
			LOG_WARN(CORE_UNIT, "link %u: completion error %s", l->id,
				 dev_wc_status_str(wc->status));
		link_down(l, -SMCR_E_CORE_LINK_DOWN, CORE_DOWN_WC, now);
		return;
	}
	if (kind != CORE_WR_RECV || idx >= CORE_RECV_BUFS)
		return;
	l->last_rx_ns = now;
	const uint8_t *buf = recv_buf(l, idx);
	bool cdc = wc->byte_len >= 1 && buf[0] == CDC_TYPE;
	/* A CDC that arrived before its link failed is valid data (RC delivered it): taken
	 * even when the link is down already, while its LG lives (failover.c: the sender may
	 * count it as completed). LLC messages of a failed link are not. */
	if (l->state != CORE_LINK_DOWN || (cdc && l->lg->state != CORE_LG_DEAD)) {
		size_t len = wc->byte_len > CORE_MSG_BUF ? CORE_MSG_BUF : wc->byte_len;
		if (!cdc && l->v2_tails && wc->byte_len > CORE_MSG_BUF) {
			/* a long v2 LLC message: its first bytes here, the rest in the tail */
			len = wc->byte_len > LLC2_MAX_LEN ? LLC2_MAX_LEN : wc->byte_len;
			memcpy(l->v2_rx, buf, CORE_MSG_BUF);
			memcpy(l->v2_rx + CORE_MSG_BUF, rx_tail(l), len - CORE_MSG_BUF);
			buf = l->v2_rx;
		}
		if (l->lg->eng->p.trace) {
			struct core_trace_ev ev = { .kind = CORE_TRACE_RECV, .msg = buf, .len = len };
			trace_fill(l, &ev);
			l->lg->eng->p.trace(l->lg->eng->p.trace_ctx, &ev);
		}
		if (cdc)
			rx_cdc(l, buf, len, now);
		else
			llc_rx(l, buf, len, now);
	}
	/* The handlers never free the link (destruction waits for lgr_free_dead). */
	if (l->state != CORE_LINK_DOWN && post_recv_one(l, idx))
		link_down(l, -SMCR_E_CORE_LINK_DOWN, CORE_DOWN_WC, now);
}
