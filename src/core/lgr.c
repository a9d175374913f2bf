/* lgr.c: link groups (docs/protocol/procedures.md 2.5, 3.3, 3.8, 6): creation, matching for reuse
 * (both roles, as Linux smcr_lgr_match), connection slots and alert tokens, the per-LG RMB pool,
 * the peer's RTokens, termination and the idle timer. Every function here runs with
 * eng->lock held. */
#include "core/core_int.h"

#include <stdlib.h>
#include <string.h>

#include "wire/codes.h"

int lgr_create(struct core_engine *e, enum core_role role, struct core_dev *cdev,
	       const struct wire_peer_id *peer_id, struct core_lgr **out)
{
	struct core_lgr *lg = calloc(1, sizeof(*lg));
	if (!lg)
		return -SMCR_E_NOMEM;
	lg->eng = e;
	lg->id = e->next_lg_id++;
	if (e->next_lg_id == 0)
		e->next_lg_id = 1;
	lg->role = role;
	lg->state = CORE_LG_SETUP;
	lg->peer_id = *peer_id;
	lg->cdev = cdev;
	lg->idle_deadline = CORE_NEVER;
	lg->token_gen = core_rand32(e) & 0xFFFF;
	/* One PD per LG: an RMB registered here is reachable only through this LG's QPs
	 * (dev.h semantics 3), never by another peer's. */
	int rc = dev_alloc_pd(cdev->dev, &lg->pd);
	if (rc) {
		free(lg);
		return -SMCR_E_CORE_RDYLNK;
	}
	rc = link_create(lg, &lg->link);
	if (rc) {
		if (dev_dealloc_pd(lg->pd))
			LOG_WARN(CORE_UNIT, "PD of a failed LG still busy");
		free(lg);
		return rc;
	}
	lg->next = e->lgs;
	e->lgs = lg;
	e->lgs_created++;
	LOG_INFO(CORE_UNIT, "LG %u created (%s) with peer %016llx", lg->id,
		 role == CORE_SERVER ? "server" : "client",
		 (unsigned long long)wire_peer_id_u64(peer_id));
	*out = lg;
	return 0;
}

static bool peer_id_eq(const struct wire_peer_id *a, const struct wire_peer_id *b)
{
	return a->instance == b->instance && !memcmp(a->mac.b, b->mac.b, WIRE_MAC_LEN);
}

/* Server (docs/protocol/procedures.md 2.5): same peer ID, a link whose peer GID and MAC equal the
 * Proposal's, room for a connection, not marked out of sync. */
struct core_lgr *lgr_find_server(struct core_engine *e, const struct clc_proposal *p)
{
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next) {
		struct core_link *l = lg->link;
		if (lg->role != CORE_SERVER || lg->state != CORE_LG_ACTIVE || lg->sync_err || !l ||
		    l->state != CORE_LINK_ACTIVE)
			continue;
		if (!peer_id_eq(&lg->peer_id, &p->peer_id) ||
		    memcmp(&l->peer_gid, &p->gid, sizeof(p->gid)) ||
		    memcmp(&l->peer_mac, &p->mac, sizeof(p->mac)))
			continue;
		if (lg->nconns >= e->p.conns_per_lg)
			continue;
		return lg;
	}
	return NULL;
}

/* Client: the Accept decides; same peer ID and a link whose peer QPN, GID and MAC equal
 * the Accept's (the QPN tells parallel LGs apart). */
struct core_lgr *lgr_find_client(struct core_engine *e, const struct clc_accept *a)
{
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next) {
		struct core_link *l = lg->link;
		if (lg->role != CORE_CLIENT || lg->state != CORE_LG_ACTIVE || lg->sync_err || !l ||
		    l->state != CORE_LINK_ACTIVE)
			continue;
		if (peer_id_eq(&lg->peer_id, &a->peer_id) && l->peer_qpn == a->qpn &&
		    !memcmp(&l->peer_gid, &a->gid, sizeof(a->gid)) &&
		    !memcmp(&l->peer_mac, &a->mac, sizeof(a->mac)))
			return lg;
	}
	return NULL;
}

/* ---- RMB pool (docs/protocol/procedures.md 3.3; docs/design/engine-decisions.md "RMBs") ------ */

static struct core_rmb *rmb_alloc(struct core_lgr *lg, unsigned code)
{
	struct core_rmb *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->code = (uint8_t)code;
	r->size = (uint32_t)wire_rmbe_size(code);
	if (dev_mem_alloc(r->size, "smcr-rmb", &r->mem)) {
		free(r);
		return NULL;
	}
	if (dev_reg_mr(lg->pd, r->mem->addr, r->size,
		       DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE, &r->mr)) {
		dev_mem_put(r->mem);
		free(r);
		return NULL;
	}
	r->next = lg->rmbs;
	lg->rmbs = r;
	lg->nrmbs++;
	return r;
}

static void rmb_free(struct core_rmb *r)
{
	if (dev_dereg_mr(r->mr))
		LOG_WARN(CORE_UNIT, "RMB deregistration failed");
	dev_mem_put(r->mem);
	free(r);
}

/* A free RMB of this size the peer already knows (no CONFIRM RKEY needed), else any free
 * one of this size, else a new one (at most 255 per LG: the peer's RToken table), else a
 * free bigger one, else (the table full of other sizes, e.g. after auto-sized RMBEs of
 * several sizes) the biggest free smaller one: the RMBE size is a wish, not a promise. */
static struct core_rmb *rmb_get(struct core_lgr *lg, unsigned code)
{
	struct core_rmb *fit = NULL, *bigger = NULL, *smaller = NULL;
	for (struct core_rmb *r = lg->rmbs; r; r = r->next) {
		if (r->in_use)
			continue;
		if (r->code == code) {
			if (r->announced)
				return r;
			fit = r;
		} else if (r->code > code && (!bigger || r->code < bigger->code)) {
			bigger = r;
		} else if (r->code < code && (!smaller || r->code > smaller->code)) {
			smaller = r;
		}
	}
	if (fit)
		return fit;
	if (lg->nrmbs < CORE_RTOKENS_MAX) {
		struct core_rmb *r = rmb_alloc(lg, code);
		if (r)
			return r;
	}
	return bigger ? bigger : smaller;
}

int lgr_attach(struct core_lgr *lg, struct core_conn *c, bool *need_rkey, uint64_t now)
{
	(void)now;
	unsigned idx = 0;
	for (unsigned i = 1; i < CORE_LG_SLOTS; i++) {
		if (!lg->slots[i]) {
			idx = i;
			break;
		}
	}
	if (!idx)
		return -SMCR_E_NOMEM;
	unsigned code = wire_rmbe_code(c->want_rmbe, WIRE_RMBE_CODE_SEND_MAX);
	struct core_rmb *r = rmb_get(lg, code);
	if (!r)
		return -SMCR_E_CORE_REGBUF;
	if (r->dirty_len)	/* docs/design/engine-decisions.md: zeroed before reuse */
		memset(r->mem->addr, 0, r->dirty_len < r->size ? r->dirty_len : r->size);
	r->in_use = true;
	r->dirty_len = r->size;	/* until detach says how much was used */
	lg->token_gen = (lg->token_gen + 1) & 0xFFFFFF;
	dev_mem_hold(r->mem);	/* the conn's reference, put at detach */

	pthread_mutex_lock(&c->lock);
	c->token = lg->token_gen << 8 | idx;	/* non-zero: idx >= 1 */
	c->slot = (uint8_t)idx;
	c->lg = lg;
	c->link = lg->link;
	c->rmb = r;
	c->rmem = r->mem;
	c->rmbe = r->mem->addr;
	c->rmbe_size = r->size;
	c->lg_id = lg->id;
	c->link_num = lg->link ? lg->link->link_num : 0;
	pthread_mutex_unlock(&c->lock);

	lg->slots[idx] = c;
	conn_hold(c);	/* the slot's reference, put in lgr_detach */
	lg->nconns++;
	lg->idle_deadline = CORE_NEVER;
	if (need_rkey)
		*need_rkey = !r->announced;
	return 0;
}

void lgr_detach(struct core_conn *c, bool pool_rmb, uint64_t now)
{
	struct core_lgr *lg = c->lg;
	if (!lg)
		return;
	struct core_engine *e = lg->eng;
	struct dev_mem *m;
	pthread_mutex_lock(&c->lock);
	/* What the peer wrote: [0, rx_peer_prod) until the ring wraps (docs/protocol/procedures.md
	 * 4.2). */
	uint64_t used = c->reset_err ? UINT64_MAX : c->rx_peer_prod;
	if (c->rmb)
		c->rmb->dirty_len = used < c->rmb->size ? (uint32_t)used : c->rmb->size;
	m = c->rmem;
	c->rmem = NULL;
	c->rmbe = NULL;
	c->link = NULL;
	c->lg = NULL;
	pthread_mutex_unlock(&c->lock);
	if (m)
		dev_mem_put(m);
	lg->slots[c->slot] = NULL;
	lg->nconns--;
	struct core_rmb *r = c->rmb;
	c->rmb = NULL;
	/* Pooled only when the peer is known to have stopped writing (C or A received);
	 * otherwise the RMB stays in use, quarantined until the LG is freed, so a late WRITE
	 * can never land in another connection's buffer. */
	if (r && pool_rmb && lg->state != CORE_LG_DEAD)
		r->in_use = false;
	if (lg->state == CORE_LG_ACTIVE && lg->nconns == 0) {
		/* docs/protocol/procedures.md 3.8: keep an idle LG for reuse, free it later. */
		lg->idle_deadline = now + (lg->role == CORE_SERVER ? e->p.lg_free_srv_ns
								   : e->p.lg_free_clnt_ns);
		core_timer_at(e, lg->idle_deadline);
	}
	conn_maybe_unlink(c);
	conn_put(c);	/* the slot's reference (lgr_attach) */
}

/* ---- the peer's RTokens (docs/protocol/procedures.md 3.3) ------------------------------------ */

int lgr_rtoken_add(struct core_lgr *lg, uint32_t rkey, uint64_t vaddr)
{
	int free_i = -1;
	for (int i = 0; i < CORE_RTOKENS_MAX; i++) {
		if (lg->rtok[i].used && lg->rtok[i].rkey == rkey && lg->rtok[i].vaddr == vaddr)
			return 0;
		if (!lg->rtok[i].used && free_i < 0)
			free_i = i;
	}
	if (free_i < 0)
		return -SMCR_E_NOSPACE;
	lg->rtok[free_i].used = true;
	lg->rtok[free_i].rkey = rkey;
	lg->rtok[free_i].vaddr = vaddr;
	return 0;
}

bool lgr_rtoken_del(struct core_lgr *lg, uint32_t rkey)
{
	bool found = false;
	for (int i = 0; i < CORE_RTOKENS_MAX; i++) {
		if (lg->rtok[i].used && lg->rtok[i].rkey == rkey) {
			lg->rtok[i].used = false;
			found = true;
		}
	}
	return found;
}

/* ---- termination (docs/protocol/procedures.md 3.8, 5.4) -------------------------------------- */

void lgr_terminate(struct core_lgr *lg, uint32_t reason, bool orderly, bool send_delete,
		   int err, uint64_t now)
{
	if (lg->state == CORE_LG_DEAD)
		return;
	struct core_engine *e = lg->eng;
	struct core_link *l = lg->link;
	bool usable = l && l->state == CORE_LINK_ACTIVE;
	LOG_INFO(CORE_UNIT, "LG %u terminated: %s (reason %#x, %u conns)", lg->id,
		 smcr_err_msg(err), reason, lg->nconns);
	lg->state = CORE_LG_DEAD;
	lg->term_reason = reason;

	/* Queued and running LLC flows end. */
	for (struct core_conn *c = lg->rkey_wait_head, *nx; c; c = nx) {
		nx = c->rkey_next;
		c->rkey_next = NULL;
		conn_put(c);
	}
	lg->rkey_wait_head = lg->rkey_wait_tail = NULL;
	if (lg->flow_conn) {
		conn_put(lg->flow_conn);
		lg->flow_conn = NULL;
	}
	lg->flow = CORE_FLOW_NONE;

	for (unsigned i = 1; i < CORE_LG_SLOTS; i++) {
		struct core_conn *c = lg->slots[i];
		if (!c)
			continue;
		if (c->mode == CORE_MODE_HANDSHAKE) {
			hs_lg_failed(c, err, now);
			continue;
		}
		/* Linux smc_lgr_cleanup: an A for each connection while a link works. */
		pthread_mutex_lock(&c->lock);
		if (c->mode == CORE_MODE_SMC) {
			if (usable && c->peer_token && !(c->cl & CL_SENT_A) && !(c->cl & CL_RCVD_A)) {
				c->cl |= CL_SENT_A;
				(void)tx_cdc_locked(c, false);
			}
			close_abort_locked(c, err, false);
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (usable && send_delete) {
		struct llc_msg m = { .type = LLC_DELETE_LINK };
		m.delete_link.all = true;
		m.delete_link.orderly = orderly;
		m.delete_link.reason = reason;
		if (llc_send(l, &m))
			LOG_DBG(CORE_UNIT, "LG %u: DELETE LINK not sent", lg->id);
	}
	if (l) {
		l->state = CORE_LINK_DOWN;
		atomic_store(&l->usable, false);
		/* Let what was just posted leave before the QP goes (lgr_free_dead). */
		l->drain_deadline = usable ? now + e->p.llc_wait_ns : now;
		core_timer_at(e, l->drain_deadline);
	}
	for (unsigned i = 1; i < CORE_LG_SLOTS; i++)
		if (lg->slots[i])
			lgr_detach(lg->slots[i], false, now);
	if (lg->fc_conn) {
		conn_put(lg->fc_conn);
		lg->fc_conn = NULL;
	}
}

void lgr_free_dead(struct core_engine *e, uint64_t now, bool force)
{
	struct core_lgr **pp = &e->lgs;
	while (*pp) {
		struct core_lgr *lg = *pp;
		if (lg->state != CORE_LG_DEAD) {
			pp = &lg->next;
			continue;
		}
		struct core_link *l = lg->link;
		if (l) {
			pthread_mutex_lock(&l->tx_lock);
			bool busy = l->slots_free != CORE_SEND_SLOTS;
			pthread_mutex_unlock(&l->tx_lock);
			if (busy && !force && now < l->drain_deadline) {
				core_timer_at(e, l->drain_deadline);
				pp = &lg->next;
				continue;
			}
			link_destroy(l);
			lg->link = NULL;
		}
		for (struct core_rmb *r = lg->rmbs, *nx; r; r = nx) {
			nx = r->next;
			rmb_free(r);
		}
		if (dev_dealloc_pd(lg->pd))
			LOG_WARN(CORE_UNIT, "LG %u: PD still busy", lg->id);
		*pp = lg->next;
		e->lgs_freed++;
		LOG_DBG(CORE_UNIT, "LG %u freed", lg->id);
		free(lg);
	}
}

void lgr_timers(struct core_engine *e, uint64_t now)
{
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next) {
		if (lg->state == CORE_LG_DEAD) {
			if (lg->link)
				core_timer_at(e, lg->link->drain_deadline);
			continue;
		}
		if (lg->state == CORE_LG_ACTIVE && lg->nconns == 0 && lg->idle_deadline != CORE_NEVER) {
			if (now >= lg->idle_deadline) {
				/* Linux smc_lgr_free_work: DELETE LINK all + orderly, program initiated. */
				lgr_terminate(lg, LLC_DEL_PROG_INIT_TERM, true, true, -SMCR_E_CORE_RESET, now);
				continue;
			}
			core_timer_at(e, lg->idle_deadline);
		}
		llc_timers(lg, now);
	}
}
