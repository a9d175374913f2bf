/* llc_proc.c: the LLC side of a link group (docs/protocol/procedures.md 3.1-3.8,
 * docs/protocol/linux-interop.md 7): received messages are decoded and validated (wire/llc.h)
 * before anything changes, then dispatched through a handler table by type (STYLE.md 10). Local
 * flows are serialized, one at a time per LG (docs/protocol/procedures.md 3.1): CONFIRM RKEY for
 * new RMBs of reuse connections and the ADD LINK flow (addlink.c). Peer
 * requests are answered at once. Runs with eng->lock held (progress or a handshake step). */
#include "core/core_int.h"

#include <string.h>

#include "wire/llc_v2.h"

/* In a v2 LG every message goes out in its 44-byte v2 form (docs/parts/wire-v2.md 7): the
 * version in the type byte, bytes 1-2 the length; CONFIRM LINK adds the v2.1 max
 * connections, DELETE RKEY its v2 layout (a count of keys not deleted in the response).
 * The continuation types have no v2 form and are never sent there. */
static int llc_send_v2(struct core_link *l, const struct llc_msg *m)
{
	struct llc2_msg m2;
	memset(&m2, 0, sizeof(m2));
	m2.type = (uint8_t)(LLC2_VERSION << 4 | ((uint8_t)m->type & 0x0F));
	m2.resp = m->resp;
	if (!llc2_is_v2_type(m2.type))
		return -SMCR_E_INTERNAL;
	m2.base = *m;
	if (m->type == LLC_CONFIRM_LINK)
		m2.max_conns = l->lg->max_conns;
	if (m->type == LLC_ADD_LINK)
		m2.base.add_link.rej_reason = 0;	/* byte 2 is the length's in v2 */
	if (m->type == LLC_DELETE_RKEY) {
		m2.delete_rkey.count = m->delete_rkey.count;
		m2.delete_rkey.negative = m->delete_rkey.negative;
		for (unsigned i = 0; i < m->delete_rkey.count && i < LLC_DR_MAX; i++) {
			m2.delete_rkey.rkey[i] = m->delete_rkey.rkey[i];
			if (m->delete_rkey.err_mask & (0x80u >> i))
				m2.delete_rkey.num_invalid++;
		}
		if (m->resp)
			memset(m2.delete_rkey.rkey, 0, sizeof(m2.delete_rkey.rkey));
	}
	uint8_t buf[LLC_MSG_LEN];
	size_t n = 0;
	int rc = llc2_encode(&m2, buf, sizeof(buf), &n);
	if (rc || n != LLC_MSG_LEN) {
		LOG_ERR(CORE_UNIT, "LLC v2 encode (%#x): %s", m2.type, smcr_err_msg(rc));
		return rc ? rc : -SMCR_E_INTERNAL;
	}
	return link_send_msg(l, buf);
}

int llc_send_add_link_v2(struct core_link *l, const struct llc_msg *m,
			 const struct llc2_add_link_ext *ext)
{
	static _Thread_local struct llc2_msg m2;	/* 4 KiB of RKeys: not on the stack */
	static _Thread_local uint8_t buf[LLC2_MAX_LEN];
	memset(&m2, 0, sizeof(m2));
	m2.type = LLC2_ADD_LINK;
	m2.resp = m->resp;
	m2.base = *m;
	m2.base.add_link.rej_reason = 0;	/* byte 2 is the length's in v2 */
	m2.has_ext = true;
	m2.ext = *ext;
	size_t n = 0;
	int rc = llc2_encode(&m2, buf, sizeof(buf), &n);
	if (rc) {
		LOG_ERR(CORE_UNIT, "LLC v2 ADD LINK encode: %s", smcr_err_msg(rc));
		return rc;
	}
	CORE_CTR_INC(l->lg->eng, ctr_llc_tx);
	return link_send_long(l, buf, n);
}

static int llc_send_v1(struct core_link *l, const struct llc_msg *m)
{
	uint8_t buf[LLC_MSG_LEN];
	int rc = llc_encode(m, buf);
	if (rc) {
		LOG_ERR(CORE_UNIT, "LLC encode (%s): %s", llc_type_name((uint8_t)m->type),
			smcr_err_msg(rc));
		return rc;
	}
	CORE_CTR_INC(l->lg->eng, ctr_llc_tx);
	return link_send_msg(l, buf);
}

int llc_send(struct core_link *l, const struct llc_msg *m)
{
	int rc = l->lg->v2 ? llc_send_v2(l, m) : llc_send_v1(l, m);
	if (!rc && m->type == LLC_DELETE_LINK)
		CORE_CTR_INC(l->lg->eng, ctr_dl_tx);
	return rc;
}

void llc_fill_gid_mac(struct core_link *l, struct wire_gid *gid, struct wire_mac *mac)
{
	memcpy(gid->b, link_gid(l)->gid.raw, WIRE_GID_LEN);
	memcpy(mac->b, link_gid(l)->mac, WIRE_MAC_LEN);
}

/* CONFIRM LINK request (server) or response (client), flags 0x03: no RMBE eyecatchers
 * (docs/protocol/wire-formats.md 6.2), max links 2. */
int llc_send_confirm_link(struct core_link *l, bool resp)
{
	struct llc_msg m = { .type = LLC_CONFIRM_LINK, .resp = resp };
	m.confirm_link.no_eyec = LLC_CL_FLAG_NO_RMBE_EYEC;
	llc_fill_gid_mac(l, &m.confirm_link.gid, &m.confirm_link.mac);
	m.confirm_link.qpn = l->qp->qp_num;
	m.confirm_link.link_num = l->link_num;
	m.confirm_link.link_uid = l->link_uid;
	/* a v2.1 LG says what was negotiated in the CLC (wire-v2.md 7.2) */
	m.confirm_link.max_links = l->lg->v2 && l->lg->max_links ? l->lg->max_links
								   : LLC_CL_MAX_LINKS;
	return llc_send(l, &m);
}

static void violation(struct core_link *l, const char *what, uint64_t now)
{
	SMCR_LOG_RL(SMCR_LOG_WARN, CORE_UNIT, "LG %u: LLC protocol violation: %s", l->lg->id, what);
	atomic_fetch_add(&l->lg->eng->llc_rx_dropped, 1);
	/* docs/protocol/procedures.md 3.8: terminate, DELETE LINK all with reason "protocol
	 * violation". */
	lgr_terminate(l->lg, LLC_DEL_PROT_VIOL, false, true, -SMCR_E_CORE_LLC_VIOLATION, now);
}

static void dropped(struct core_link *l, const char *what)
{
	SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "LG %u: LLC %s dropped", l->lg->id, what);
	atomic_fetch_add(&l->lg->eng->llc_rx_dropped, 1);
}

/* ---- handlers ----------------------------------------------------------------------------- */

typedef void (*llc_handler)(struct core_link *l, struct llc_msg *m, const uint8_t *raw,
			    uint64_t now);

static void on_confirm_link(struct core_link *l, struct llc_msg *m, const uint8_t *raw,
			    uint64_t now)
{
	(void)raw;
	struct core_lgr *lg = l->lg;
	struct core_conn *fc = lg->fc_conn;
	if (al_on_confirm_link(l, m, now))
		return;	/* the CONFIRM LINK of an added link (addlink.c) */
	if (!m->resp) {
		/* Request: only the client, on its first link, during the first contact. */
		if (lg->role != CORE_CLIENT) {
			violation(l, "CONFIRM LINK request sent to the server", now);
			return;
		}
		if (l->state != CORE_LINK_INIT || !fc || fc->hs != HS_C_WAIT_CL) {
			if (l->state == CORE_LINK_ACTIVE)
				violation(l, "CONFIRM LINK request on an active link", now);
			else
				dropped(l, "late CONFIRM LINK request");
			return;
		}
		int rc = llc_confirm_link_check_eyec(&m->confirm_link);
		if (rc) {
			hs_link_confirmed(fc, -SMCR_E_CORE_RMBE_EC, now);
			return;
		}
		l->link_num = m->confirm_link.link_num;
		rc = link_rts(l);
		if (!rc)
			rc = llc_send_confirm_link(l, true);
		if (rc) {
			hs_link_confirmed(fc, -SMCR_E_CORE_RDYLNK, now);
			return;
		}
		l->state = CORE_LINK_ACTIVE;
		atomic_store(&l->usable, true);
		hs_link_confirmed(fc, 0, now);
		return;
	}
	/* Response: only the server, waiting for it. */
	if (lg->role != CORE_SERVER || l->state != CORE_LINK_INIT || !fc ||
	    (fc->hs != HS_S_WAIT_CL && fc->hs != HS_DECL_WAIT)) {
		dropped(l, "unexpected CONFIRM LINK response");
		return;
	}
	if (llc_confirm_link_check_eyec(&m->confirm_link)) {
		hs_link_confirmed(fc, -SMCR_E_CORE_RMBE_EC, now);
		return;
	}
	l->state = CORE_LINK_ACTIVE;
	atomic_store(&l->usable, true);
	hs_link_confirmed(fc, 0, now);
}

static void on_add_link(struct core_link *l, struct llc_msg *m, const uint8_t *raw, uint64_t now)
{
	al_on_add_link(l, m, raw, NULL, now);
}

static void on_add_link_cont(struct core_link *l, struct llc_msg *m, const uint8_t *raw,
			     uint64_t now)
{
	(void)raw;
	struct core_lgr *lg = l->lg;
	if (lg->flow != CORE_FLOW_ADD_LINK && lg->flow != CORE_FLOW_ADD_LINK_CLI &&
	    (!lg->al_gone_num || m->add_link_cont.link_num != lg->al_gone_num)) {
		/* no ADD LINK flow it could belong to (docs/protocol/procedures.md 3.1) */
		violation(l, "ADD LINK CONTINUATION outside an ADD LINK flow", now);
		return;
	}
	al_on_add_link_cont(l, m, now);
}

static void on_delete_link(struct core_link *l, struct llc_msg *m, const uint8_t *raw,
			   uint64_t now)
{
	(void)raw;
	struct core_lgr *lg = l->lg;
	CORE_CTR_INC(lg->eng, ctr_dl_rx);
	if (m->delete_link.all) {
		if (m->resp)
			return;	/* never answered; a peer's odd echo changes nothing */
		/* No response; terminate (docs/protocol/wire-formats.md 6.5). */
		LOG_INFO(CORE_UNIT, "LG %u: peer deleted the link group (%s)", lg->id,
			 llc_del_reason_name(m->delete_link.reason) ?
				 llc_del_reason_name(m->delete_link.reason) : "?");
		lgr_terminate(lg, m->delete_link.reason, false, false, -SMCR_E_CORE_RESET, now);
		return;
	}
	fo_on_delete_link(l, m, now);
}

static void on_confirm_rkey(struct core_link *l, struct llc_msg *m, const uint8_t *raw,
			    uint64_t now)
{
	(void)raw;
	struct core_lgr *lg = l->lg;
	if (!m->resp) {
		/* Remember the peer's RMB for this link; answer with the request echoed
		 * (0x20|0x10 when it cannot be stored), docs/protocol/linux-interop.md 7. */
		struct llc_msg r = *m;
		r.resp = true;
		int t = lgr_rtoken_add(lg, l->slot, m->confirm_rkey.rkey, m->confirm_rkey.vaddr);
		if (t < 0) {
			r.confirm_rkey.negative = true;
			r.confirm_rkey.retry = true;
		} else {
			/* the same RMB on the LG's other links (docs/protocol/wire-formats.md 6.6) */
			for (unsigned i = 0; i < m->confirm_rkey.num_other && i < LLC_CR_MAX_OTHER; i++) {
				const struct llc_rtoken *o = &m->confirm_rkey.other[i];
				int ls = lgr_link_slot_by_num(lg, o->link_num);
				if (ls < 0 || ls == l->slot)
					continue;
				lg->rtok[t].rkey[ls] = o->rkey;
				lg->rtok[t].vaddr[ls] = o->vaddr;
				lg->rtok[t].links |= (uint8_t)(1u << ls);
			}
		}
		(void)llc_send(l, &r);
		return;
	}
	struct core_conn *c = lg->flow_conn;
	if (lg->flow != CORE_FLOW_CONFIRM_RKEY || !c || !c->rmb || !lgr_rmb_mr(c->rmb, l) ||
	    lgr_rmb_mr(c->rmb, l)->rkey != m->confirm_rkey.rkey) {
		dropped(l, "unexpected CONFIRM RKEY response");
		return;
	}
	lg->flow = CORE_FLOW_NONE;
	lg->flow_conn = NULL;
	hs_rkey_confirmed(c, m->confirm_rkey.negative ? -SMCR_E_CORE_REGBUF : 0, now);
	conn_put(c);	/* the flow's reference */
	llc_flow_kick(lg, now);
}

static void on_confirm_rkey_cont(struct core_link *l, struct llc_msg *m, const uint8_t *raw,
				 uint64_t now)
{
	(void)m;
	(void)raw;
	(void)now;
	dropped(l, "CONFIRM RKEY CONTINUATION (ignored, as Linux)");
}

static void on_delete_rkey(struct core_link *l, struct llc_msg *m, const uint8_t *raw,
			   uint64_t now)
{
	(void)raw;
	(void)now;
	if (m->resp)
		return;	/* we never send DELETE RKEY: ignore */
	struct llc_msg r = *m;
	r.resp = true;
	r.delete_rkey.err_mask = 0;
	for (unsigned i = 0; i < m->delete_rkey.count && i < LLC_DR_MAX; i++)
		if (!lgr_rtoken_del(l->lg, l->slot, m->delete_rkey.rkey[i]))
			r.delete_rkey.err_mask |= (uint8_t)(0x80u >> i);
	r.delete_rkey.negative = r.delete_rkey.err_mask != 0;
	(void)llc_send(l, &r);
}

static void on_test_link(struct core_link *l, struct llc_msg *m, const uint8_t *raw, uint64_t now)
{
	(void)raw;
	(void)now;
	if (m->resp) {
		l->testlink_deadline = CORE_NEVER;
		return;
	}
	struct llc_msg r = *m;	/* echo, user data included (docs/protocol/procedures.md 3.5) */
	r.resp = true;
	(void)llc_send(l, &r);
}

static const llc_handler llc_handlers[256] = {
	[LLC_CONFIRM_LINK] = on_confirm_link,
	[LLC_ADD_LINK] = on_add_link,
	[LLC_ADD_LINK_CONT] = on_add_link_cont,
	[LLC_DELETE_LINK] = on_delete_link,
	[LLC_CONFIRM_RKEY] = on_confirm_rkey,
	[LLC_TEST_LINK] = on_test_link,
	[LLC_CONFIRM_RKEY_CONT] = on_confirm_rkey_cont,
	[LLC_DELETE_RKEY] = on_delete_rkey,
};

/* A v2 LLC message (wire-v2.md 7). Only a v2 LG takes them (Linux never sends v2 types in
 * a v1 LG, and drops unknown types silently). The 44-byte base of the types that keep v1's
 * layout goes to the v1 handlers; what is v2 only is answered here. */
static void llc_rx_v2(struct core_link *l, const uint8_t *buf, size_t len, uint64_t now)
{
	struct core_lgr *lg = l->lg;
	static _Thread_local struct llc2_msg m2;	/* 5 KiB: not on the stack */
	if (!lg->v2) {
		dropped(l, "of version 2 in a v1 link group");
		return;
	}
	int rc = llc2_decode(buf, len, &m2);
	if (rc) {
		SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "LG %u: LLC v2 message dropped: %s", lg->id,
			    smcr_err_msg(rc));
		atomic_fetch_add(&lg->eng->llc_rx_dropped, 1);
		return;
	}
	if (lg->state == CORE_LG_DEAD)
		return;
	switch (m2.type) {
	case LLC2_REQ_ADD_LINK: {
		/* The client asks for a second link: a single-link server answers the request
		 * (header, response flag, zeros) and adds none; a client never gets one. */
		if (lg->role != CORE_SERVER || m2.resp) {
			dropped(l, "REQUEST ADD LINK to a client, or its response");
			return;
		}
		struct llc2_msg r;
		memset(&r, 0, sizeof(r));
		r.type = LLC2_REQ_ADD_LINK;
		r.resp = true;
		uint8_t out[LLC_MSG_LEN];
		size_t n = 0;
		if (llc2_encode(&r, out, sizeof(out), &n) || n != LLC_MSG_LEN ||
		    link_send_msg(l, out))
			LOG_WARN(CORE_UNIT, "LG %u: REQUEST ADD LINK response not sent", lg->id);
		return;
	}
	case LLC2_DELETE_RKEY: {
		if (m2.resp)
			return;	/* we never send DELETE RKEY */
		struct llc_msg r = { .type = LLC_DELETE_RKEY, .resp = true };
		unsigned n = m2.delete_rkey.count, bad = 0;
		for (unsigned i = 0; i < n && i < LLC2_DR_MAX; i++)
			if (!lgr_rtoken_del(lg, l->slot, m2.delete_rkey.rkey[i]))
				bad++;
		/* the v2 response: the count echoed, the number not deleted (llc_send_v2
		 * counts the mask's bits; more than 8 saturate there) */
		r.delete_rkey.count = (uint8_t)(n > LLC_DR_MAX ? LLC_DR_MAX : n);
		for (unsigned i = 0; i < bad && i < 8; i++)
			r.delete_rkey.err_mask |= (uint8_t)(0x80u >> i);
		r.delete_rkey.negative = bad != 0;
		(void)llc_send(l, &r);
		return;
	}
	case LLC2_ADD_LINK:
		/* with its extension: the RKey list replaces v1's continuations */
		al_on_add_link(l, &m2.base, buf, &m2, now);
		return;
	default:
		break;
	}
	llc_handler h = llc_handlers[m2.base.type & 0xFF];
	if (!h) {
		dropped(l, "of unknown v2 type");
		return;
	}
	h(l, &m2.base, buf, now);
}

void llc_rx(struct core_link *l, const uint8_t *buf, size_t len, uint64_t now)
{
	CORE_CTR_INC(l->lg->eng, ctr_llc_rx);
	if (len >= 1 && (buf[0] >> 4) == LLC2_VERSION) {
		llc_rx_v2(l, buf, len, now);
		return;
	}
	struct llc_msg m;
	int rc = llc_decode(buf, len, &m);
	if (rc) {
		/* Unknown and v2 types are dropped silently by Linux (docs/protocol/wire-formats.md
		 * 6.1); malformed v1 messages are dropped too, with a log line. */
		SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "LG %u: LLC message dropped: %s", l->lg->id,
			    smcr_err_msg(rc));
		atomic_fetch_add(&l->lg->eng->llc_rx_dropped, 1);
		return;
	}
	if (l->lg->state == CORE_LG_DEAD)
		return;
	llc_handler h = llc_handlers[m.type & 0xFF];
	if (!h) {
		dropped(l, "of unknown type");
		return;
	}
	h(l, &m, buf, now);
}

/* ---- local flows ------------------------------------------------------------------------- */

void llc_start_add_link_offer(struct core_lgr *lg, uint64_t now)
{
	/* A v2 LG that negotiated one link (smcr offers max links 1 without a second v2
	 * device): Linux offers no ADD LINK then, nor does smcr. */
	if (lg->v2 && lg->max_links < 2)
		return;
	/* Queued as a flag: llc_flow_kick starts it when no other flow runs. */
	lg->want_add_link = true;
	llc_flow_kick(lg, now);
}

void llc_rkey_others(struct core_lgr *lg, struct core_link *on, struct core_rmb *r,
		     struct llc_confirm_rkey *cr)
{
	cr->num_other = 0;
	for (int i = 0; i < CORE_LG_LINKS && cr->num_other < LLC_CR_MAX_OTHER; i++) {
		struct core_link *k = lg->links[i];
		struct dev_mr *mr;
		if (!k || k == on || k->state != CORE_LINK_ACTIVE || !(mr = lgr_rmb_mr(r, k)))
			continue;
		struct llc_rtoken *o = &cr->other[cr->num_other++];
		o->link_num = k->link_num;
		o->rkey = mr->rkey;
		o->vaddr = (uint64_t)(uintptr_t)mr->addr;
	}
}

/* CONFIRM RKEY (docs/protocol/wire-formats.md 6.6) for c's new RMB on link on: the RMB on
 * that link, and on each other active link of the LG. 0 or the send's error. */
static int confirm_rkey_send(struct core_lgr *lg, struct core_conn *c, struct core_link *on)
{
	struct llc_msg m = { .type = LLC_CONFIRM_RKEY };
	if (!lgr_rmb_mr(c->rmb, on))
		return -SMCR_E_CORE_REGBUF;
	m.confirm_rkey.rkey = lgr_rmb_mr(c->rmb, on)->rkey;
	m.confirm_rkey.vaddr = (uint64_t)(uintptr_t)c->rmb->mr->addr;
	llc_rkey_others(lg, on, c->rmb, &m.confirm_rkey);
	return llc_send(on, &m);
}

void llc_flow_kick(struct core_lgr *lg, uint64_t now)
{
	struct core_engine *e = lg->eng;
	while (lg->flow == CORE_FLOW_NONE && lg->state == CORE_LG_ACTIVE && lgr_link_any(lg)) {
		if (lg->want_add_link) {
			lg->want_add_link = false;
			(void)al_server_start(lg, now);	/* sets lg->flow when it starts */
			continue;
		}
		struct core_conn *c = lg->rkey_wait_head;
		if (!c)
			return;
		lg->rkey_wait_head = c->rkey_next;
		if (!lg->rkey_wait_head)
			lg->rkey_wait_tail = NULL;
		c->rkey_next = NULL;
		if (!c->rmb || c->lg != lg) {	/* the conn left meanwhile */
			conn_put(c);
			continue;
		}
		struct core_link *on = c->link ? c->link : lgr_link_any(lg);
		if (confirm_rkey_send(lg, c, on)) {
			hs_rkey_confirmed(c, -SMCR_E_CORE_REGBUF, now);
			conn_put(c);
			continue;
		}
		lg->flow = CORE_FLOW_CONFIRM_RKEY;
		lg->flow_conn = c;	/* keeps the queue's reference */
		lg->flow_link = on;
		lg->flow_deadline = now + e->p.llc_wait_ns;
		lgr_timer_at(lg, lg->flow_deadline);
	}
}

void llc_flow_link_down(struct core_lgr *lg, struct core_link *l, struct core_link *to,
			uint64_t now)
{
	if (lg->flow != CORE_FLOW_CONFIRM_RKEY || !lg->flow_conn || lg->flow_link != l ||
	    !lg->flow_conn->rmb)
		return;
	/* The request (or its answer) may be lost with the link: ask again on the surviving
	 * one, where the answer will come; a peer that had it already finds the same RMB and
	 * answers again. Without this the handshake would wait out the flow's timer and fall
	 * back to TCP. */
	if (confirm_rkey_send(lg, lg->flow_conn, to))
		return;	/* the flow's timer ends it */
	lg->flow_link = to;
	lg->flow_deadline = now + lg->eng->p.llc_wait_ns;
	lgr_timer_at(lg, lg->flow_deadline);
}

/* TEST LINK (docs/protocol/procedures.md 3.5), per link: after testlink_ns without receiving
 * anything on it, ask; no answer within the LLC wait: the link is down. */
static void testlink_timer(struct core_lgr *lg, struct core_link *l, uint64_t now)
{
	struct core_engine *e = lg->eng;
	if (l->state != CORE_LINK_ACTIVE || e->p.testlink_ns == UINT64_MAX)
		return;
	if (l->testlink_deadline != CORE_NEVER) {
		if (now >= l->testlink_deadline) {
			link_down(l, -SMCR_E_CORE_TIMEDOUT, CORE_DOWN_TESTLINK, now);
			return;
		}
		lgr_timer_at(lg, l->testlink_deadline);
		return;
	}
	if (l->last_rx_ns == 0)
		l->last_rx_ns = now;
	uint64_t due = l->last_rx_ns + e->p.testlink_ns;
	if (now >= due) {
		struct llc_msg m = { .type = LLC_TEST_LINK };
		uint32_t r = core_rand32(e);
		memcpy(m.test_link.data, &r, sizeof(r));
		if (llc_send(l, &m) == 0) {
			l->testlink_deadline = now + e->p.llc_wait_ns;
			lgr_timer_at(lg, l->testlink_deadline);
		}
		return;
	}
	lgr_timer_at(lg, due);
}

/* Senders have waited for a send slot CORE_NOSLOT_NS with no send completing meanwhile:
 * the link is down (docs/protocol/procedures.md 3.6). true if it went down. */
static bool noslot_timer(struct core_lgr *lg, struct core_link *l, uint64_t now)
{
	if (!l->noslot_since || l->state != CORE_LINK_ACTIVE)
		return false;
	pthread_mutex_lock(&l->tx_lock);
	bool starved = l->slot_waiters;
	pthread_mutex_unlock(&l->tx_lock);
	if (!starved) {
		l->noslot_since = 0;	/* a slot freed and nobody waits: the clock stops */
		return false;
	}
	uint64_t since = l->noslot_since > l->tx_done_ns ? l->noslot_since : l->tx_done_ns;
	if (now >= since + CORE_NOSLOT_NS) {
		link_down(l, -SMCR_E_CORE_TIMEDOUT, CORE_DOWN_NOSLOT, now);
		return true;
	}
	lgr_timer_at(lg, since + CORE_NOSLOT_NS);
	return false;
}

void llc_timers(struct core_lgr *lg, uint64_t now)
{
	if (lg->flow != CORE_FLOW_NONE) {
		if (now >= lg->flow_deadline) {
			enum core_flow f = lg->flow;
			lg->flow = CORE_FLOW_NONE;
			if (f == CORE_FLOW_CONFIRM_RKEY && lg->flow_conn) {
				struct core_conn *c = lg->flow_conn;
				lg->flow_conn = NULL;
				hs_rkey_confirmed(c, -SMCR_E_CORE_TIMEOUT_CR, now);
				conn_put(c);
			} else if (f == CORE_FLOW_ADD_LINK || f == CORE_FLOW_ADD_LINK_CLI) {
				lg->flow = f;
				LOG_INFO(CORE_UNIT, "LG %u: ADD LINK flow timed out", lg->id);
				al_timeout(lg, now);	/* ends the flow, kicks the next */
			}
			if (lg->state == CORE_LG_DEAD)
				return;
			llc_flow_kick(lg, now);
		} else {
			lgr_timer_at(lg, lg->flow_deadline);
		}
	}
	for (int i = 0; i < CORE_LG_LINKS && lg->state != CORE_LG_DEAD; i++)
		if (lg->links[i] && !noslot_timer(lg, lg->links[i], now) && lg->links[i])
			testlink_timer(lg, lg->links[i], now);
}
