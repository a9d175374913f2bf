/* lgr.c: link groups (docs/protocol/procedures.md 2.5, 3.3, 3.8, 6): creation, matching for reuse
 * (both roles, as Linux smcr_lgr_match), connection slots and alert tokens, the per-LG RMB pool,
 * the peer's RTokens, termination and the idle timer. Every function here runs with
 * eng->lock held. */
#include "core/core_int.h"

#include <stdlib.h>
#include <string.h>

#include "wire/codes.h"

static void lgr_timer_fn(struct core_timer *t, uint64_t now);

int lgr_create(struct core_engine *e, enum core_role role, struct core_dev *cdev,
	       const struct wire_peer_id *peer_id, bool v2, struct core_lgr **out)
{
	struct core_lgr *lg = calloc(1, sizeof(*lg));
	if (!lg)
		return -SMCR_E_NOMEM;
	if (core_timers_reserve(&e->timers)) {
		free(lg);
		return -SMCR_E_NOMEM;
	}
	core_timer_init(&lg->tmr, lgr_timer_fn);
	lg->eng = e;
	lg->id = e->next_lg_id++;
	if (e->next_lg_id == 0)
		e->next_lg_id = 1;
	lg->role = role;
	lg->state = CORE_LG_SETUP;
	lg->peer_id = *peer_id;
	lg->cdev = cdev;
	lg->v2 = v2;	/* before the first link: a v2 link posts its receives with the tail */
	lg->idle_deadline = CORE_NEVER;
	lg->token_gen = core_rand32(e) & 0xFFFF;
	lg->next_link_num = 2;	/* 1 is the first contact's (link.c) */
	/* One PD per LG: an RMB registered here is reachable only through this LG's QPs
	 * (dev.h semantics 3), never by another peer's. */
	int rc = dev_alloc_pd(cdev->dev, &lg->pd);
	if (rc) {
		core_timers_unreserve(&e->timers);
		free(lg);
		return -SMCR_E_CORE_RDYLNK;
	}
	lg->pds[cdev - e->devs] = lg->pd;
	rc = link_create(lg, cdev, 0, &lg->links[0]);
	if (rc) {
		if (dev_dealloc_pd(lg->pd))
			LOG_WARN(CORE_UNIT, "PD of a failed LG still busy");
		core_timers_unreserve(&e->timers);
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
		if (lg->role != CORE_SERVER || lg->state != CORE_LG_ACTIVE || lg->sync_err ||
		    !peer_id_eq(&lg->peer_id, &p->peer_id) || lg->nconns >= e->p.conns_per_lg || lg->v2)
			continue;
		for (int i = 0; i < CORE_LG_LINKS; i++) {
			struct core_link *l = lg->links[i];
			if (l && l->state == CORE_LINK_ACTIVE &&
			    !memcmp(&l->peer_gid, &p->gid, sizeof(p->gid)) &&
			    !memcmp(&l->peer_mac, &p->mac, sizeof(p->mac)))
				return lg;
		}
	}
	return NULL;
}

/* Server, SMC-R v2: a v2 LG whose link goes to the client's RoCE v2 GID (a v2-only
 * Proposal carries no peer ID, GID or MAC in its v1 part: Linux matches on the GID). */
struct core_lgr *lgr_find_server_v2(struct core_engine *e, const struct wire_gid *gid)
{
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next) {
		if (lg->role != CORE_SERVER || lg->state != CORE_LG_ACTIVE || lg->sync_err ||
		    !lg->v2 || lg->nconns >= e->p.conns_per_lg ||
		    (lg->max_conns && lg->nconns >= lg->max_conns))
			continue;
		for (int i = 0; i < CORE_LG_LINKS; i++) {
			struct core_link *l = lg->links[i];
			if (l && l->state == CORE_LINK_ACTIVE &&
			    !memcmp(&l->peer_gid, gid, sizeof(*gid)))
				return lg;
		}
	}
	return NULL;
}

/* Client: the Accept decides; same peer ID and a link whose peer QPN, GID and MAC equal
 * the Accept's (the QPN tells parallel LGs apart), of the Accept's SMC-R version. */
struct core_lgr *lgr_find_client(struct core_engine *e, const struct clc_accept *a, bool v2)
{
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next) {
		if (lg->role != CORE_CLIENT || lg->state != CORE_LG_ACTIVE || lg->sync_err ||
		    !peer_id_eq(&lg->peer_id, &a->peer_id) || lg->v2 != v2)
			continue;
		for (int i = 0; i < CORE_LG_LINKS; i++) {
			struct core_link *l = lg->links[i];
			if (l && l->state == CORE_LINK_ACTIVE && l->peer_qpn == a->qpn &&
			    !memcmp(&l->peer_gid, &a->gid, sizeof(a->gid)) &&
			    !memcmp(&l->peer_mac, &a->mac, sizeof(a->mac)))
				return lg;
		}
	}
	return NULL;
}

unsigned lgr_links_active(const struct core_lgr *lg)
{
	unsigned n = 0;
	for (int i = 0; i < CORE_LG_LINKS; i++)
		n += lg->links[i] && lg->links[i]->state == CORE_LINK_ACTIVE;
	return n;
}

struct core_link *lgr_link_any(struct core_lgr *lg)
{
	for (int i = 0; i < CORE_LG_LINKS; i++)
		if (lg->links[i] && lg->links[i]->state == CORE_LINK_ACTIVE)
			return lg->links[i];
	return NULL;
}

struct core_link *lgr_link_assign(struct core_lgr *lg, const struct clc_accept *a)
{
	if (lg->state == CORE_LG_SETUP)
		return lg->links[0];	/* first contact: the link being confirmed */
	if (lg->role == CORE_CLIENT) {
		/* QP numbers are per device: the Accept's GID and MAC name the device */
		for (int i = 0; i < CORE_LG_LINKS; i++) {
			struct core_link *l = lg->links[i];
			if (l && l->state == CORE_LINK_ACTIVE && l->peer_qpn == a->qpn &&
			    !memcmp(&l->peer_gid, &a->gid, sizeof(a->gid)) &&
			    !memcmp(&l->peer_mac, &a->mac, sizeof(a->mac)))
				return l;
		}
		return NULL;
	}
	/* Linux smcr_lgr_conn_assign_link: the k-th of the active links, k the parity of
	 * the count of the LG's connections before this one. */
	unsigned n = lgr_links_active(lg);
	if (!n)
		return NULL;
	unsigned k = (lg->nconns % 2) % n;
	for (int i = 0; i < CORE_LG_LINKS; i++) {
		struct core_link *l = lg->links[i];
		if (l && l->state == CORE_LINK_ACTIVE && k-- == 0)
			return l;
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
	/* on every device the LG has a link on (docs/protocol/procedures.md 3.3) */
	for (int i = 0; i < CORE_MAX_DEVS; i++) {
		if (!lg->pds[i])
			continue;
		if (dev_reg_mr(lg->pds[i], r->mem->addr, r->size,
			       DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE, &r->mrs[i])) {
			for (int k = 0; k < i; k++)
				if (r->mrs[k] && dev_dereg_mr(r->mrs[k]))
					LOG_WARN(CORE_UNIT, "RMB deregistration failed");
			dev_mem_put(r->mem);
			free(r);
			return NULL;
		}
	}
	r->mr = r->mrs[lg->cdev - lg->eng->devs];
	r->next = lg->rmbs;
	lg->rmbs = r;
	lg->nrmbs++;
	return r;
}

static void rmb_free(struct core_rmb *r)
{
	for (int i = 0; i < CORE_MAX_DEVS; i++)
		if (r->mrs[i] && dev_dereg_mr(r->mrs[i]))
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
	struct core_link *link = lgr_link_assign(lg, &c->peer_clc);
	if (!link)
		return -SMCR_E_CORE_RDYLNK;
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
	c->link = link;
	c->rmb = r;
	c->rmem = r->mem;
	c->rmbe = r->mem->addr;
	c->rmbe_size = r->size;
	c->lg_id = lg->id;
	c->link_num = link->link_num;
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
	if (c->keep_rmem) {
		m = NULL;	/* the unread bytes stay readable; freed with the connection */
	} else {
		c->rmem = NULL;
		c->rmbe = NULL;
	}
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
		lgr_timer_at(lg, lg->idle_deadline);
	}
	conn_maybe_unlink(c);
	conn_put(c);	/* the slot's reference (lgr_attach) */
}

/* ---- the peer's RTokens (docs/protocol/procedures.md 3.3) ------------------------------------ */

int lgr_rtoken_find(const struct core_lgr *lg, unsigned ls, uint32_t rkey)
{
	for (int i = 0; i < CORE_RTOKENS_MAX; i++)
		if (lg->rtok[i].used && (lg->rtok[i].links & (1u << ls)) && lg->rtok[i].rkey[ls] == rkey)
			return i;
	return -1;
}

int lgr_rtoken_add(struct core_lgr *lg, unsigned ls, uint32_t rkey, uint64_t vaddr)
{
	int free_i = -1;
	for (int i = 0; i < CORE_RTOKENS_MAX; i++) {
		const struct core_rtoken *t = &lg->rtok[i];
		if (t->used && (t->links & (1u << ls)) && t->rkey[ls] == rkey && t->vaddr[ls] == vaddr)
			return i;
		if (!t->used && free_i < 0)
			free_i = i;
	}
	if (free_i < 0)
		return -SMCR_E_NOSPACE;
	struct core_rtoken *t = &lg->rtok[free_i];
	memset(t, 0, sizeof(*t));
	t->used = true;
	t->links = (uint8_t)(1u << ls);
	t->rkey[ls] = rkey;
	t->vaddr[ls] = vaddr;
	return free_i;
}

bool lgr_rtoken_del(struct core_lgr *lg, unsigned ls, uint32_t rkey)
{
	bool found = false;
	for (int i = 0; i < CORE_RTOKENS_MAX; i++) {
		struct core_rtoken *t = &lg->rtok[i];
		if (t->used && (t->links & (1u << ls)) && t->rkey[ls] == rkey) {
			t->used = false;
			t->links = 0;
			found = true;
		}
	}
	return found;
}

/* ---- links of the LG beyond the first (addlink.c, failover.c) ------------------------------ */

int lgr_pd_for(struct core_lgr *lg, struct core_dev *cd, struct dev_pd **out)
{
	int di = (int)(cd - lg->eng->devs);
	if (lg->pds[di]) {
		*out = lg->pds[di];
		return 0;
	}
	struct dev_pd *pd;
	if (dev_alloc_pd(cd->dev, &pd))
		return -SMCR_E_CORE_RDYLNK;
	for (struct core_rmb *r = lg->rmbs; r; r = r->next) {
		if (dev_reg_mr(pd, r->mem->addr, r->size,
			       DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE, &r->mrs[di])) {
			for (struct core_rmb *k = lg->rmbs; k != r; k = k->next) {
				if (dev_dereg_mr(k->mrs[di]))
					LOG_WARN(CORE_UNIT, "RMB deregistration failed");
				k->mrs[di] = NULL;
			}
			if (dev_dealloc_pd(pd))
				LOG_WARN(CORE_UNIT, "LG %u: PD still busy", lg->id);
			return -SMCR_E_CORE_REGBUF;
		}
	}
	lg->pds[di] = pd;
	*out = pd;
	return 0;
}

struct dev_mr *lgr_rmb_mr(const struct core_rmb *r, const struct core_link *l)
{
	return r->mrs[l->cdev - l->lg->eng->devs];
}

int lgr_link_slot_by_num(const struct core_lgr *lg, uint8_t num)
{
	for (int i = 0; i < CORE_LG_LINKS; i++)
		if (lg->links[i] && lg->links[i]->link_num == num)
			return i;
	return -1;
}

void lgr_link_retire(struct core_lgr *lg, struct core_link *l, uint64_t now)
{
	struct core_engine *e = lg->eng;
	l->state = CORE_LINK_DOWN;
	atomic_store(&l->usable, false);
	if (lg->links[l->slot] == l)
		lg->links[l->slot] = NULL;
	for (int i = 0; i < CORE_RTOKENS_MAX; i++)
		lg->rtok[i].links &= (uint8_t)~(1u << l->slot);
	/* Nothing of this link may land in an RMB any more: its connections were rewound
	 * onto another link, and a late WRITE of this one (a cut path that comes back
	 * delivers what was queued on it) would overwrite the bytes written there since.
	 * ERR stops the QP both ways and flushes every posted WR, whose completions free
	 * the send slots (so the drain below ends at once). */
	struct dev_qp_attr err = { .qp_state = DEV_QPS_ERR };
	if (atomic_load(&l->qp->state) != DEV_QPS_ERR && dev_modify_qp(l->qp, &err, DEV_QP_STATE))
		LOG_WARN(CORE_UNIT, "link %u: QP to ERR failed", l->id);
	/* Let what was just posted flush before the QP goes: at once when nothing is in
	 * flight (lgr_free_retired), else by the LLC wait at the latest. */
	l->drain_deadline = now + e->p.llc_wait_ns;
	l->retired_next = lg->retired;
	lg->retired = l;
	lgr_timer_at(lg, l->drain_deadline);
}

void lgr_free_retired(struct core_lgr *lg, uint64_t now, bool force)
{
	for (struct core_link **pp = &lg->retired; *pp;) {
		struct core_link *l = *pp;
		pthread_mutex_lock(&l->tx_lock);
		bool busy = l->slots_free != CORE_SEND_SLOTS;
		pthread_mutex_unlock(&l->tx_lock);
		if (!force && busy && now < l->drain_deadline) {
			lgr_timer_at(lg, l->drain_deadline);
			pp = &l->retired_next;
			continue;
		}
		*pp = l->retired_next;
		link_destroy(l);
	}
}

/* ---- termination (docs/protocol/procedures.md 3.8, 5.4) -------------------------------------- */

void lgr_send_delete_link(struct core_link *via, uint8_t num, bool orderly, uint32_t reason)
{
	struct llc_msg m = { .type = LLC_DELETE_LINK };
	m.delete_link.link_num = num;
	m.delete_link.orderly = orderly;
	m.delete_link.reason = reason;
	if (llc_send(via, &m))
		LOG_DBG(CORE_UNIT, "LG %u: DELETE LINK not sent", via->lg->id);
}

void lgr_terminate(struct core_lgr *lg, uint32_t reason, bool orderly, bool send_delete,
		   int err, uint64_t now)
{
	if (lg->state == CORE_LG_DEAD)
		return;
	struct core_engine *e = lg->eng;
	struct core_link *l = lgr_link_any(lg);	/* for the DELETE LINK */
	bool usable = l != NULL;
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
	lg->al_step = AL_NONE;
	lg->al_link = NULL;
	lg->del_link_num = 0;
	atomic_store(&lg->multi, false);

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
			/* on the connection's own link (its CDCs go nowhere else) */
			bool cusable = c->link && c->link->state == CORE_LINK_ACTIVE;
			if (cusable && c->peer_token && !(c->cl & CL_SENT_A) && !(c->cl & CL_RCVD_A)) {
				c->cl |= CL_SENT_A;
				(void)tx_cdc_locked(c, false);
			}
			if (err == -SMCR_E_CORE_LINK_DOWN && !cusable)
				close_peer_lost_locked(c, err);	/* TCP's end, not an abort */
			else
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
	for (int i = 0; i < CORE_LG_LINKS; i++) {
		struct core_link *k = lg->links[i];
		if (!k)
			continue;
		bool was = k->state == CORE_LINK_ACTIVE;
		k->state = CORE_LINK_DOWN;
		atomic_store(&k->usable, false);
		/* Let what was just posted leave before the QP goes (lgr_free_dead). */
		k->drain_deadline = was ? now + e->p.llc_wait_ns : now;
		lgr_timer_at(lg, k->drain_deadline);
	}
	for (unsigned i = 1; i < CORE_LG_SLOTS; i++)
		if (lg->slots[i])
			lgr_detach(lg->slots[i], false, now);
	if (lg->fc_conn) {
		conn_put(lg->fc_conn);
		lg->fc_conn = NULL;
	}
}

/* Whether link l still has sends in flight that its drain deadline lets finish; if so the
 * group's timer is set to that deadline. */
static bool link_drain_wait(struct core_lgr *lg, struct core_link *l, uint64_t now)
{
	pthread_mutex_lock(&l->tx_lock);
	bool busy = l->slots_free != CORE_SEND_SLOTS;
	pthread_mutex_unlock(&l->tx_lock);
	if (!busy || now >= l->drain_deadline)
		return false;
	lgr_timer_at(lg, l->drain_deadline);
	return true;
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
		bool wait = false;
		for (struct core_link *l = lg->retired; l && !force; l = l->retired_next)
			wait |= link_drain_wait(lg, l, now);
		for (int i = 0; i < CORE_LG_LINKS && !force; i++)
			if (lg->links[i])
				wait |= link_drain_wait(lg, lg->links[i], now);
		if (wait) {
			pp = &lg->next;
			continue;
		}
		for (int i = 0; i < CORE_LG_LINKS; i++) {
			if (lg->links[i]) {
				link_destroy(lg->links[i]);
				lg->links[i] = NULL;
			}
		}
		lgr_free_retired(lg, now, true);
		for (struct core_rmb *r = lg->rmbs, *nx; r; r = nx) {
			nx = r->next;
			rmb_free(r);
		}
		for (int i = 0; i < CORE_MAX_DEVS; i++)
			if (lg->pds[i] && dev_dealloc_pd(lg->pds[i]))
				LOG_WARN(CORE_UNIT, "LG %u: PD still busy", lg->id);
		*pp = lg->next;
		core_timers_cancel(&e->timers, &lg->tmr);
		core_timers_unreserve(&e->timers);
		e->lgs_freed++;
		LOG_DBG(CORE_UNIT, "LG %u freed", lg->id);
		free(lg);
	}
}

void lgr_timer_at(struct core_lgr *lg, uint64_t when)
{
	if (when != CORE_NEVER)
		core_timers_arm_min(&lg->eng->timers, &lg->tmr, when);
}

/* The LG's deadline came (or one that has moved since: each part checks its own and arms
 * the timer again for what is next). eng->lock held, from core_timers_expire. */
static void lgr_timer_fn(struct core_timer *t, uint64_t now)
{
	struct core_lgr *lg = (struct core_lgr *)((char *)t - offsetof(struct core_lgr, tmr));
	if (lg->state == CORE_LG_DEAD) {
		/* lgr_free_dead (after the timers, in the same progress round) frees it once
		 * drained; until then, wake at the drain bound */
		for (int i = 0; i < CORE_LG_LINKS; i++)
			if (lg->links[i] && lg->links[i]->drain_deadline > now)
				lgr_timer_at(lg, lg->links[i]->drain_deadline);
		return;
	}
	if (lg->state == CORE_LG_ACTIVE && lg->nconns == 0 && lg->idle_deadline != CORE_NEVER) {
		if (now >= lg->idle_deadline) {
			/* Linux smc_lgr_free_work: DELETE LINK all + orderly, program initiated. */
			lgr_terminate(lg, LLC_DEL_PROG_INIT_TERM, true, true, -SMCR_E_CORE_RESET, now);
			return;
		}
		lgr_timer_at(lg, lg->idle_deadline);
	}
	lgr_free_retired(lg, now, false);
	llc_timers(lg, now);
	if (lg->state != CORE_LG_DEAD)
		fo_timers(lg, now);
}
