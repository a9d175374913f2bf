/* addlink.c: adding a second link to a link group (docs/protocol/procedures.md 3.2, 3.3;
 * RFC 7609 4.4 "adding links to a link group"). The server drives it, right after the
 * first CONFIRM LINK (or when the client hints that it gained a device): ADD LINK request on
 * the existing link naming a new QP, the client's ADD LINK response naming its own, then
 * ADD LINK CONTINUATIONs in turns (each side gives, for every RMB of its own, the rkey and
 * address on the new link keyed by the rkey on the old one), then CONFIRM LINK on the new
 * link. The new link goes on a second device when both ends have one (symmetric), else on
 * the same device (asymmetric); a client with one device rejects an offer that names the
 * GID and MAC of the existing link (there is no second path to build).
 *
 * Each wait has the LLC timer (2 s; 5 s for the CONFIRM LINK on the new link); when one
 * expires, or a link fails meanwhile, the new link is dropped and the group goes on with
 * the link it had. One flow at a time per LG (lg->flow, docs/protocol/procedures.md 3.1).
 * Every function runs with eng->lock held. */
#include "core/core_int.h"

#include <string.h>

/* v2: a device qualifies for a further link when its RoCE v2 GID's address lies in the
 * subnet of the LG's first contact (Linux looks for a net device with an address there;
 * with the second NICs on another subnet it finds none and offers the same device). */
static bool v2_dev_ok(const struct core_lgr *lg, const struct core_dev *cd)
{
	if (!cd->has_v2)
		return false;
	if (!lg->v2_plen)
		return true;
	uint32_t ip;
	if (!dev_gid_ipv4(&cd->gid_v2.gid, &ip))
		return false;
	uint32_t m = ~0u << (32 - lg->v2_plen);
	return (ip & m) == lg->v2_net;
}

/* A usable device of the engine other than the one the existing link is on, with the
 * same GID type (SMC-R v1: RoCE GIDs on the same network, docs/protocol/procedures.md 3.2;
 * v2: v2_dev_ok). */
static struct core_dev *alt_dev(struct core_lgr *lg, const struct core_link *old)
{
	struct core_engine *e = lg->eng;
	for (int i = 0; i < e->ndevs; i++) {
		struct core_dev *cd = &e->devs[i];
		if (cd == old->cdev || !cd->cq || (lg->v2 && !v2_dev_ok(lg, cd)))
			continue;
		struct dev_port_attr pa;
		if (dev_query_port(cd->dev, cd->port_num, &pa) || pa.state != DEV_PORT_ACTIVE)
			continue;
		return cd;
	}
	return NULL;
}

static int free_slot(const struct core_lgr *lg)
{
	for (int i = 0; i < CORE_LG_LINKS; i++)
		if (!lg->links[i])
			return i;
	return -1;
}

/* The next link number no link of the LG has (the server assigns them), counting up from
 * the last one given and skipping 0. */
static uint8_t new_link_num(struct core_lgr *lg)
{
	for (unsigned k = 0; k < 255; k++) {
		uint8_t n = lg->next_link_num;
		lg->next_link_num = (uint8_t)(n == 255 ? 1 : n + 1);
		if (n && lgr_link_slot_by_num(lg, n) < 0)
			return n;
	}
	return 0;
}

static void relink_one(struct core_lgr *lg, uint64_t now);

/* Server: both active links end on one device of the client (the same GID): built while
 * the client's other device was down. */
static bool peer_asym(const struct core_lgr *lg)
{
	const struct core_link *a = NULL, *b = NULL;
	for (int i = 0; i < CORE_LG_LINKS; i++) {
		const struct core_link *k = lg->links[i];
		if (k && k->state == CORE_LINK_ACTIVE) {
			if (!a)
				a = k;
			else
				b = k;
		}
	}
	return a && b && !memcmp(&a->peer_gid, &b->peer_gid, sizeof(a->peer_gid));
}

static void flow_done(struct core_lgr *lg, uint64_t now)
{
	lg->flow = CORE_FLOW_NONE;
	lg->al_step = AL_NONE;
	lg->al_link = NULL;
	lg->al_next = NULL;
	lg->al_left = lg->al_peer_left = 0;
	if (lg->state != CORE_LG_ACTIVE)
		return;
	if (lg->relink_pending) {
		lg->relink_pending = false;
		relink_one(lg, now);
	}
	if (lg->hint_pending) {
		lg->hint_pending = false;
		if (lg->flow == CORE_FLOW_NONE && lgr_links_active(lg) >= 2 && peer_asym(lg))
			al_replace_asym(lg, now);
		if (lgr_links_active(lg) < 2)
			lg->want_add_link = true;
	}
	if (lg->flow == CORE_FLOW_NONE)
		llc_flow_kick(lg, now);
}

static void flow_wait(struct core_lgr *lg, enum core_al_step step, uint64_t wait, uint64_t now)
{
	lg->al_step = step;
	lg->flow_deadline = now + wait;
	lgr_timer_at(lg, lg->flow_deadline);
}

void al_abort(struct core_lgr *lg, bool tell_peer, uint64_t now)
{
	struct core_link *nl = lg->al_link;
	if (nl) {
		struct core_link *via = lgr_link_any(lg);
		if (tell_peer && via && via != nl) {
			/* docs/protocol/procedures.md 3.2: the server deletes the half-built link
			 * (DELETE LINK, lost path, on the old link) */
			lgr_send_delete_link(via, nl->link_num, true, LLC_DEL_LOST_PATH);
		}
		LOG_INFO(CORE_UNIT, "LG %u: link %u not added (step %d)", lg->id, nl->link_num,
			 (int)lg->al_step);
		lg->al_gone_num = nl->link_num;
		lgr_link_retire(lg, nl, now);
	}
	flow_done(lg, now);
}

void al_timeout(struct core_lgr *lg, uint64_t now)
{
	al_abort(lg, lg->role == CORE_SERVER && lg->al_step != AL_WAIT_RESP, now);
}

void al_replace_asym(struct core_lgr *lg, uint64_t now)
{
	struct core_link *v = lg->last_added;
	if (!v || lg->links[v->slot] != v || v->state != CORE_LINK_ACTIVE)
		return;
	LOG_INFO(CORE_UNIT, "LG %u: replacing link %u (asymmetric)", lg->id, v->link_num);
	/* its connections move to the other link; DELETE LINK reason "no asymmetric link
	 * needed" (docs/protocol/wire-formats.md 6.5) */
	link_down(v, -SMCR_E_CORE_LINK_DOWN, CORE_DOWN_ASYM, now);
}

/* The ADD LINK v2 extension (docs/parts/wire-v2.md 7.3): the new link's GID and, for every
 * RMB of ours, its rkey on the link the message travels on (via), its rkey and address on
 * the new link (nl). In v2 these replace the continuations: both the request and the
 * accepting response carry them. */
static void v2_ext_fill(struct core_lgr *lg, struct core_link *via, struct core_link *nl,
			struct llc2_add_link_ext *x)
{
	memset(x, 0, sizeof(*x));
	x->v2_direct = true;	/* smcr claims direct reach (wire-v2.md "Not done") */
	memcpy(x->target_gid.b, link_gid(nl)->gid.raw, WIRE_GID_LEN);
	for (struct core_rmb *r = lg->rmbs; r && x->num_rkeys < LLC2_AL_MAX_RKEYS; r = r->next) {
		struct dev_mr *on_via = lgr_rmb_mr(r, via), *on_new = lgr_rmb_mr(r, nl);
		if (!on_via || !on_new)
			continue;
		struct llc_alc_pair *p = &x->rt[x->num_rkeys++];
		p->rkey = on_via->rkey;
		p->rkey_new = on_new->rkey;
		p->vaddr_new = (uint64_t)(uintptr_t)on_new->addr;
	}
}

/* The peer's RMBs on the new link nl, from an ADD LINK v2 extension received on l: each
 * found by its rkey on l; a pair for an RMB we never heard of is ignored (as the
 * continuations, al_on_add_link_cont). */
static void v2_ext_save(struct core_lgr *lg, struct core_link *l, struct core_link *nl,
			const struct llc2_add_link_ext *x)
{
	for (unsigned i = 0; i < x->num_rkeys && i < LLC2_AL_MAX_RKEYS; i++) {
		int t = lgr_rtoken_find(lg, l->slot, x->rt[i].rkey);
		if (t < 0)
			continue;
		lg->rtok[t].rkey[nl->slot] = x->rt[i].rkey_new;
		lg->rtok[t].vaddr[nl->slot] = x->rt[i].vaddr_new;
		lg->rtok[t].links |= (uint8_t)(1u << nl->slot);
	}
}

bool al_server_start(struct core_lgr *lg, uint64_t now)
{
	struct core_engine *e = lg->eng;
	struct core_link *old = lgr_link_any(lg);
	int slot = free_slot(lg);
	if ((lg->v2 && lg->max_links < 2) || lg->role != CORE_SERVER || !old || slot < 0 ||
	    lgr_links_active(lg) >= 2)
		return false;
	struct core_dev *cd = alt_dev(lg, old);
	if (!cd)
		cd = old->cdev;	/* asymmetric: the client may have a second device */
	uint8_t num = new_link_num(lg);
	struct core_link *nl;
	if (!num || link_create(lg, cd, (unsigned)slot, &nl))
		return false;
	nl->link_num = num;
	struct llc_msg m = { .type = LLC_ADD_LINK };
	llc_fill_gid_mac(nl, &m.add_link.gid, &m.add_link.mac);
	m.add_link.qpn = nl->qp->qp_num;
	m.add_link.link_num = num;
	m.add_link.mtu = (uint8_t)cd->port.active_mtu;
	m.add_link.psn = nl->psn;
	int rc;
	if (lg->v2) {
		static _Thread_local struct llc2_add_link_ext x;
		v2_ext_fill(lg, old, nl, &x);
		rc = llc_send_add_link_v2(old, &m, &x);
	} else {
		rc = llc_send(old, &m);
	}
	if (rc) {
		lgr_link_retire(lg, nl, now);
		return false;
	}
	LOG_INFO(CORE_UNIT, "LG %u: ADD LINK %u offered (%s device)", lg->id, num,
		 cd == old->cdev ? "same" : "second");
	lg->flow = CORE_FLOW_ADD_LINK;
	lg->al_link = nl;
	flow_wait(lg, AL_WAIT_RESP, e->p.llc_wait_ns, now);
	return true;
}

/* Our next ADD LINK CONTINUATION on link via (the old link): up to two of our RMBs, each
 * with its rkey on via and its rkey and address on the new link; num_rkeys counts this
 * message's pairs and the ones after it (docs/protocol/wire-formats.md 6.4). */
static int send_cont(struct core_lgr *lg, struct core_link *via, bool resp)
{
	struct llc_msg m = { .type = LLC_ADD_LINK_CONT, .resp = resp };
	m.add_link_cont.link_num = lg->al_link->link_num;
	m.add_link_cont.num_rkeys = (uint8_t)(lg->al_left > 255 ? 255 : lg->al_left);
	unsigned n = 0;
	while (n < LLC_ALC_MAX_PAIRS && lg->al_left && lg->al_next) {
		struct core_rmb *r = lg->al_next;
		struct dev_mr *on_via = lgr_rmb_mr(r, via), *on_new = lgr_rmb_mr(r, lg->al_link);
		if (on_via && on_new) {
			m.add_link_cont.rt[n].rkey = on_via->rkey;
			m.add_link_cont.rt[n].rkey_new = on_new->rkey;
			m.add_link_cont.rt[n].vaddr_new = (uint64_t)(uintptr_t)on_new->addr;
			n++;
		}
		lg->al_next = r->next;
		lg->al_left--;
	}
	if (n < LLC_ALC_MAX_PAIRS && m.add_link_cont.num_rkeys > n && !lg->al_left)
		m.add_link_cont.num_rkeys = (uint8_t)n;	/* RMBs skipped (not registered) */
	return llc_send(via, &m);
}

/* The client side of a server's ADD LINK request (docs/protocol/procedures.md 3.2). */
static void cli_add_link(struct core_link *l, struct llc_msg *m, const uint8_t *raw,
			 const struct llc2_msg *v2, uint64_t now)
{
	struct core_lgr *lg = l->lg;
	struct core_engine *e = lg->eng;
	const struct llc_add_link *al = &m->add_link;
	int slot = free_slot(lg);
	struct core_dev *cd = alt_dev(lg, l);
	/* v2 compares the GID only (a routed peer's MAC is a gateway's), as Linux */
	bool same_path = !memcmp(&al->gid, &l->peer_gid, sizeof(al->gid)) &&
			 (lg->v2 || !memcmp(&al->mac, &l->peer_mac, sizeof(al->mac)));
	struct core_link *nl = NULL;
	const char *why = NULL;
	if (lg->v2 && lg->max_links < 2)
		why = "v2 link group of one link";
	else if (lg->v2 && (!v2 || !v2->has_ext))
		why = "ADD LINK v2 without its extension";
	else if (lg->flow != CORE_FLOW_NONE)
		why = "another LLC flow runs";
	else if (lgr_links_active(lg) >= 2 || slot < 0)
		why = "link group has two links";
	else if (al->mtu == 0 || al->link_num == 0 || lgr_link_slot_by_num(lg, al->link_num) >= 0)
		why = "offer unusable";
	else if (!cd && same_path)
		why = "no second path";	/* one device each: nothing redundant to build */
	if (!why) {
		if (!cd)
			cd = l->cdev;	/* asymmetric: the server offers another device */
		uint8_t mtu = (uint8_t)cd->port.active_mtu;
		if (al->mtu < mtu)
			mtu = al->mtu;
		if (link_create(lg, cd, (unsigned)slot, &nl)) {
			why = "link setup failed";
			nl = NULL;
		} else {
			nl->link_num = al->link_num;
			if (link_rtr(nl, al->qpn, al->psn, mtu, &al->gid, &al->mac))
				why = "QP to RTR failed";
			else {
				struct llc_msg r = { .type = LLC_ADD_LINK, .resp = true };
				llc_fill_gid_mac(nl, &r.add_link.gid, &r.add_link.mac);
				r.add_link.qpn = nl->qp->qp_num;
				r.add_link.link_num = al->link_num;
				r.add_link.mtu = mtu;
				r.add_link.psn = nl->psn;
				int rc;
				if (lg->v2) {
					/* our RMBs in the response; the server's from its request */
					static _Thread_local struct llc2_add_link_ext x;
					v2_ext_fill(lg, l, nl, &x);
					rc = llc_send_add_link_v2(l, &r, &x);
					if (!rc)
						v2_ext_save(lg, l, nl, &v2->ext);
				} else {
					rc = llc_send(l, &r);
				}
				if (rc)
					why = "response not sent";
			}
		}
	}
	if (why) {
		if (nl)
			lgr_link_retire(lg, nl, now);
		LOG_INFO(CORE_UNIT, "LG %u: ADD LINK rejected: %s", lg->id, why);
		/* As Linux smc_llc_cli_add_link_reject: the request echoed, 0xC0, reason 1. */
		uint8_t out[LLC_MSG_LEN];
		llc_add_link_reject_raw(raw, LLC_AL_REJ_NO_ALT_PATH, out);
		CORE_CTR_INC(e, ctr_llc_tx);
		if (lg->v2) {
			/* v2: the request's first 44 bytes, its length field 44 (the reason had
			 * no room: Linux's reject carries 0 there too, wire-v2.md 7.1) */
			out[1] = LLC_MSG_LEN;
			out[2] = 0;
		}
		if (link_send_msg(l, out))
			LOG_WARN(CORE_UNIT, "LG %u: ADD LINK reject not sent", lg->id);
		return;
	}
	LOG_INFO(CORE_UNIT, "LG %u: ADD LINK %u accepted (%s device)", lg->id, nl->link_num,
		 cd == l->cdev ? "same" : "second");
	lg->flow = CORE_FLOW_ADD_LINK_CLI;
	lg->al_link = nl;
	if (lg->v2) {
		/* no continuations in v2: the CONFIRM LINK on the new link comes next */
		flow_wait(lg, AL_WAIT_CONFIRM, CORE_AL_CONFIRM_WAIT_NS, now);
		return;
	}
	lg->al_next = lg->rmbs;
	lg->al_left = lg->nrmbs;
	lg->al_peer_left = 0;
	flow_wait(lg, AL_WAIT_CONT, e->p.llc_wait_ns, now);
}

void al_on_add_link(struct core_link *l, struct llc_msg *m, const uint8_t *raw,
		    const struct llc2_msg *v2, uint64_t now)
{
	struct core_lgr *lg = l->lg;
	struct core_engine *e = lg->eng;
	if (!m->resp) {
		if (lg->role == CORE_SERVER) {
			/* The client's "please add a link" hint (docs/protocol/procedures.md 3.2):
			 * no response; the flow starts if the LG is single. */
			LOG_INFO(CORE_UNIT, "LG %u: client asks for a second link", lg->id);
			if (lg->v2)
				return;
			/* Two links already: one of them is asymmetric at the client (its other
			 * device came back): replace the newer one by a symmetric link. */
			if (lgr_links_active(lg) >= 2 && lg->flow == CORE_FLOW_NONE)
				al_replace_asym(lg, now);
			else if (lg->flow != CORE_FLOW_NONE)
				lg->hint_pending = true;	/* flow_done judges it */
			if (lgr_links_active(lg) < 2) {
				lg->want_add_link = true;
				llc_flow_kick(lg, now);
			}
			return;
		}
		cli_add_link(l, m, raw, v2, now);
		return;
	}
	struct core_link *nl = lg->al_link;
	if (lg->role != CORE_SERVER || lg->flow != CORE_FLOW_ADD_LINK || lg->al_step != AL_WAIT_RESP ||
	    !nl || m->add_link.link_num != nl->link_num) {
		SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "LG %u: unexpected ADD LINK response dropped",
			    lg->id);
		atomic_fetch_add(&e->llc_rx_dropped, 1);
		return;
	}
	if (m->add_link.rejected) {
		LOG_INFO(CORE_UNIT, "LG %u: client rejected ADD LINK %u (reason %u)", lg->id,
			 nl->link_num, m->add_link.rej_reason);
		al_abort(lg, false, now);
		return;
	}
	uint8_t mtu = (uint8_t)nl->cdev->port.active_mtu;
	if (m->add_link.mtu < mtu)
		mtu = m->add_link.mtu;
	if (link_rtr(nl, m->add_link.qpn, m->add_link.psn, mtu, &m->add_link.gid,
		     &m->add_link.mac) ||
	    link_rts(nl)) {
		al_abort(lg, true, now);
		return;
	}
	if (lg->v2) {
		/* the client's RMBs came in its response; CONFIRM LINK on the new link */
		if (!v2 || !v2->has_ext) {
			al_abort(lg, true, now);
			return;
		}
		v2_ext_save(lg, l, nl, &v2->ext);
		if (llc_send_confirm_link(nl, false)) {
			al_abort(lg, true, now);
			return;
		}
		flow_wait(lg, AL_WAIT_CONFIRM, CORE_AL_CONFIRM_WAIT_NS, now);
		return;
	}
	lg->al_next = lg->rmbs;
	lg->al_left = lg->nrmbs;
	lg->al_peer_left = 0;
	if (send_cont(lg, l, false)) {
		al_abort(lg, true, now);
		return;
	}
	flow_wait(lg, AL_WAIT_CONT, e->p.llc_wait_ns, now);
}

void al_on_add_link_cont(struct core_link *l, struct llc_msg *m, uint64_t now)
{
	struct core_lgr *lg = l->lg;
	struct core_engine *e = lg->eng;
	struct core_link *nl = lg->al_link;
	const struct llc_add_link_cont *ac = &m->add_link_cont;
	if ((lg->flow != CORE_FLOW_ADD_LINK && lg->flow != CORE_FLOW_ADD_LINK_CLI) ||
	    lg->al_step != AL_WAIT_CONT || !nl || ac->link_num != nl->link_num || l == nl) {
		SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT,
			    "LG %u: ADD LINK CONTINUATION outside an ADD LINK flow dropped", lg->id);
		atomic_fetch_add(&e->llc_rx_dropped, 1);
		return;
	}
	/* The peer's RMBs on the new link, found by their rkey on this one. A pair for an RMB
	 * we never heard of is ignored (as Linux smc_rtoken_set). */
	unsigned n = ac->num_rkeys < LLC_ALC_MAX_PAIRS ? ac->num_rkeys : LLC_ALC_MAX_PAIRS;
	for (unsigned i = 0; i < n; i++) {
		int t = lgr_rtoken_find(lg, l->slot, ac->rt[i].rkey);
		if (t < 0)
			continue;
		lg->rtok[t].rkey[nl->slot] = ac->rt[i].rkey_new;
		lg->rtok[t].vaddr[nl->slot] = ac->rt[i].vaddr_new;
		lg->rtok[t].links |= (uint8_t)(1u << nl->slot);
	}
	lg->al_peer_left = ac->num_rkeys - n;
	if (lg->role == CORE_CLIENT) {
		/* our answer, with our next pairs */
		if (send_cont(lg, l, true)) {
			al_abort(lg, false, now);
			return;
		}
		if (lg->al_left || lg->al_peer_left)
			flow_wait(lg, AL_WAIT_CONT, e->p.llc_wait_ns, now);
		else
			flow_wait(lg, AL_WAIT_CONFIRM, CORE_AL_CONFIRM_WAIT_NS, now);
		return;
	}
	if (lg->al_left || lg->al_peer_left) {
		if (send_cont(lg, l, false)) {
			al_abort(lg, true, now);
			return;
		}
		flow_wait(lg, AL_WAIT_CONT, e->p.llc_wait_ns, now);
		return;
	}
	/* Both sides are done: CONFIRM LINK on the new link (docs/protocol/procedures.md 3.2). */
	if (llc_send_confirm_link(nl, false)) {
		al_abort(lg, true, now);
		return;
	}
	flow_wait(lg, AL_WAIT_CONFIRM, CORE_AL_CONFIRM_WAIT_NS, now);
}

static void activate(struct core_lgr *lg, struct core_link *nl, uint64_t now)
{
	struct core_engine *e = lg->eng;
	nl->state = CORE_LINK_ACTIVE;
	atomic_store(&nl->usable, true);
	nl->last_rx_ns = now;
	lg->links_added++;
	e->links_added++;
	CORE_CTR_INC(e, ctr_links_added);
	lg->last_added = nl;
	atomic_store(&lg->multi, lgr_links_active(lg) >= 2);
	LOG_INFO(CORE_UNIT, "LG %u: link %u added, %u links", lg->id, nl->link_num,
		 lgr_links_active(lg));
	if (e->p.testlink_ns != UINT64_MAX)
		lgr_timer_at(lg, now + e->p.testlink_ns);
	flow_done(lg, now);
}

bool al_on_confirm_link(struct core_link *l, struct llc_msg *m, uint64_t now)
{
	struct core_lgr *lg = l->lg;
	if (!lg->al_link || l != lg->al_link)
		return false;
	if (lg->al_step != AL_WAIT_CONFIRM) {
		SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "LG %u: early CONFIRM LINK on a new link",
			    lg->id);
		atomic_fetch_add(&lg->eng->llc_rx_dropped, 1);
		return true;
	}
	if (llc_confirm_link_check_eyec(&m->confirm_link)) {
		al_abort(lg, lg->role == CORE_SERVER, now);
		return true;
	}
	if (lg->role == CORE_CLIENT && !m->resp) {
		if (link_rts(l) || llc_send_confirm_link(l, true)) {
			al_abort(lg, false, now);
			return true;
		}
		activate(lg, l, now);
		return true;
	}
	if (lg->role == CORE_SERVER && m->resp) {
		activate(lg, l, now);
		return true;
	}
	SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "LG %u: CONFIRM LINK of the wrong kind dropped",
		    lg->id);
	atomic_fetch_add(&lg->eng->llc_rx_dropped, 1);
	return true;
}

/* A device came (back) up: every single-link LG tries for a second link again
 * (docs/protocol/procedures.md 3.2: "whenever an LG is single and a usable device appears").
 * The server starts the flow; the client sends the "please add a link" hint, an ADD LINK
 * request with its MAC and GID and zero QPN, MTU and PSN (Linux smc_llc_cli_add_link_invite). */
/* Both our active links on one device while another device is usable: the second link was
 * built asymmetric (our other device was down then). */
static bool asym_here(struct core_lgr *lg)
{
	struct core_link *a = NULL, *b = NULL;
	for (int i = 0; i < CORE_LG_LINKS; i++) {
		struct core_link *k = lg->links[i];
		if (k && k->state == CORE_LINK_ACTIVE) {
			if (!a)
				a = k;
			else
				b = k;
		}
	}
	return a && b && a->cdev == b->cdev && alt_dev(lg, a);
}

static void relink_one(struct core_lgr *lg, uint64_t now)
{
	struct core_link *l = lgr_link_any(lg);
	if (lg->state != CORE_LG_ACTIVE || lg->v2 || !l ||
	    (lgr_links_active(lg) >= 2 && !asym_here(lg)))
		return;
	if (lg->flow == CORE_FLOW_ADD_LINK || lg->flow == CORE_FLOW_ADD_LINK_CLI) {
		lg->relink_pending = true;	/* this flow may fail: try again after it */
		return;
	}
	if (lg->role == CORE_SERVER) {
		if (lgr_links_active(lg) >= 2)
			al_replace_asym(lg, now);
		lg->want_add_link = true;
		llc_flow_kick(lg, now);
		return;
	}
	struct core_dev *cd = alt_dev(lg, l);
	struct llc_msg m = { .type = LLC_ADD_LINK };
	memcpy(m.add_link.gid.b, (cd ? &cd->gid : link_gid(l))->gid.raw, WIRE_GID_LEN);
	memcpy(m.add_link.mac.b, (cd ? &cd->gid : link_gid(l))->mac, WIRE_MAC_LEN);
	LOG_INFO(CORE_UNIT, "LG %u: asking the server for a second link", lg->id);
	if (llc_send(l, &m))
		LOG_DBG(CORE_UNIT, "LG %u: ADD LINK hint not sent", lg->id);
}

void al_relink(struct core_engine *e, uint64_t now)
{
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next)
		relink_one(lg, now);
}
