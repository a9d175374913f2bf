/* handshake.c: the CLC client and server state machines (docs/protocol/procedures.md 2.2-2.7; RFC
 * 7609 3.5 and App. A.2) over byte buffers: sock feeds the TCP bytes and writes what we produce;
 * every received message is framed and decoded by wire/clc before it changes anything.
 * Decline with the diagnosis code of docs/protocol/wire-formats.md 5.2 in every failure the spec
 * lists, fallback on the same TCP connection, and the local and peer reasons recorded.
 * Everything here runs with eng->lock held. */
#define _GNU_SOURCE /* gethostname, strnlen */
#include "core/core_int.h"

#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "wire/clc_v2.h"
#include "wire/codes.h"

#define DECL_PEERDECL 0x05000000u	/* local reason when the peer declined (5.2) */

static bool hs_waiting(enum core_hs hs)
{
	return hs != HS_DONE_SMC && hs != HS_DONE_FALLBACK && hs != HS_DONE_FAILED &&
	       hs != HS_C_START;
}

static uint32_t decline_code(int err, uint32_t dflt)
{
	uint32_t d = smcr_err_decline(err);
	return d ? d : dflt;
}

/* ---- output -------------------------------------------------------------------------------- */

static void send_decline(struct core_conn *c, uint32_t code, bool oos)
{
	struct clc_decline d;
	memset(&d, 0, sizeof(d));
	/* 28 bytes (docs/protocol/wire-formats.md 5.1), or 44 in answer to a version-2 Proposal and
	 * after a v2 Accept, as Linux sends them (wire-v2.md 3) */
	d.f.version = c->decl_v2 ? CLC_VERSION_2 : CLC_VERSION_1;
	if (c->decl_v2)
		d.os_type = CLC_OS_LINUX;
	d.out_of_sync = oos;
	d.path = CLC_PATH_R;
	d.peer_id = c->eng->peer_id;
	d.diag = code;
	size_t n = 0;
	if (clc_decline_encode(&d, c->out + c->out_len, sizeof(c->out) - c->out_len, &n))
		LOG_ERR(CORE_UNIT, "Decline encode failed");
	else
		c->out_len += n;
}

/* The host name of the first-contact extension (wire-v2.md 4.2): blank padded, as Linux
 * puts its utsname nodename (cut at 32). */
static void fce_hostname(uint8_t out[CLC_HOSTNAME_LEN])
{
	char h[256] = "";
	memset(out, ' ', CLC_HOSTNAME_LEN);
	if (gethostname(h, sizeof(h) - 1) == 0) {
		size_t n = strnlen(h, CLC_HOSTNAME_LEN);
		memcpy(out, h, n);
	}
}

/* The SMC-R v2 form of an Accept/Confirm (wire-v2.md 4) from the v1 fields in v1: the
 * chosen EID, on first contact the first-contact extension (c->v2_fce's release and
 * limits, our OS type and host name) and, in a Confirm, our RoCE v2 GID as the list of
 * GIDs the server may use for more links. */
static int send_accept_v2(struct core_conn *c, const struct clc_accept *v1, enum clc_type type,
			  size_t *n)
{
	struct clc_accept_v2 a;
	memset(&a, 0, sizeof(a));
	a.f.version = CLC_VERSION_2;
	a.first_contact = v1->first_contact;
	a.peer_id = v1->peer_id;
	a.gid = v1->gid;
	a.mac = v1->mac;
	a.qpn = v1->qpn;
	a.rkey = v1->rkey;
	a.rmbe_idx = v1->rmbe_idx;
	a.token = v1->token;
	a.rmbe_size_code = v1->rmbe_size_code;
	a.mtu_code = v1->mtu_code;
	a.rmb_vaddr = v1->rmb_vaddr;
	a.psn = v1->psn;
	a.eid = c->v2_eid;
	if (a.first_contact) {
		a.fce = c->v2_fce;
		a.fce.os_type = CLC_OS_LINUX;
		a.fce.v2_direct = true;	/* no gateway: routed peers are not supported yet */
		a.fce.vendor_exp = 0;
		fce_hostname(a.fce.hostname);
		if (type == CLC_CONFIRM) {
			a.has_gids = true;
			a.gid_count = 1;
			a.gids[0] = v1->gid;
		}
	}
	return clc_accept_v2_encode(&a, type, c->out + c->out_len, sizeof(c->out) - c->out_len, n);
}

/* Accept (server) or Confirm (client), 68 bytes (docs/protocol/wire-formats.md 4). */
static int send_accept(struct core_conn *c, enum clc_type type, bool first, uint8_t mtu)
{
	struct core_link *l = c->link;
	struct core_dev *cd = c->lg->cdev;
	struct clc_accept a;
	memset(&a, 0, sizeof(a));
	a.f.version = CLC_VERSION_1;
	a.first_contact = first;
	a.peer_id = c->eng->peer_id;
	(void)cd;
	/* the link the connection goes on (docs/protocol/wire-formats.md 4: a reuse Accept names
	 * it), on its own device */
	memcpy(a.gid.b, link_gid(l)->gid.raw, WIRE_GID_LEN);
	memcpy(a.mac.b, link_gid(l)->mac, WIRE_MAC_LEN);
	a.qpn = l->qp->qp_num;
	a.rkey = lgr_rmb_mr(c->rmb, l)->rkey;
	a.rmbe_idx = 1;		/* one RMBE per RMB, as Linux */
	a.token = c->token;
	a.rmbe_size_code = c->rmb->code;
	a.mtu_code = mtu;
	a.rmb_vaddr = (uint64_t)(uintptr_t)c->rmb->mr->addr;
	a.psn = l->psn;
	size_t n = 0;
	int rc;
	if (c->v2)
		rc = send_accept_v2(c, &a, type, &n);
	else
		rc = clc_accept_encode(&a, type, c->out + c->out_len, sizeof(c->out) - c->out_len, &n);
	if (rc) {
		LOG_ERR(CORE_UNIT, "%s encode failed: %s", clc_type_name(type), smcr_err_msg(rc));
		return -SMCR_E_INTERNAL;
	}
	c->out_len += n;
	c->clc_sent = true;
	return 0;
}

/* ---- ends ---------------------------------------------------------------------------------- */

static void rkey_unqueue(struct core_conn *c)
{
	struct core_lgr *lg = c->lg;
	if (!lg)
		return;
	struct core_conn **pp = &lg->rkey_wait_head, *prev = NULL;
	while (*pp) {
		if (*pp == c) {
			*pp = c->rkey_next;
			if (lg->rkey_wait_tail == c)
				lg->rkey_wait_tail = prev;
			c->rkey_next = NULL;
			conn_put(c);
			break;
		}
		prev = *pp;
		pp = &(*pp)->rkey_next;
	}
	if (lg->flow_conn == c) {
		lg->flow_conn = NULL;
		lg->flow = CORE_FLOW_NONE;
		conn_put(c);
	}
}

/* Undoes what the handshake set up (docs/protocol/procedures.md 2.4): a new LG is freed with it, a
 * reused one only loses this connection. */
static void hs_undo(struct core_conn *c, int err, uint64_t now)
{
	struct core_lgr *lg = c->lg;
	if (!lg)
		return;
	rkey_unqueue(c);
	if (lg->state == CORE_LG_DEAD)
		return;	/* lgr_terminate is running and detaches every conn */
	if (c->first_contact) {
		lgr_terminate(lg, LLC_DEL_PROG_INIT_TERM, false, false, err, now);
		return;
	}
	/* An RMB the peer was told about in our CLC message may still be written: quarantine
	 * it; one it never saw goes back to the pool. */
	lgr_detach(c, !c->clc_sent, now);
	if (lg->state == CORE_LG_ACTIVE)
		llc_flow_kick(lg, now);
}

static void set_mode(struct core_conn *c, enum core_mode m)
{
	pthread_mutex_lock(&c->lock);
	c->mode = m;
	pthread_mutex_unlock(&c->lock);
}

void hs_fallback(struct core_conn *c, uint32_t local_code, uint32_t peer_code, bool send,
		 bool oos, uint64_t now, bool async)
{
	if (c->hs == HS_DONE_SMC || c->hs == HS_DONE_FALLBACK || c->hs == HS_DONE_FAILED)
		return;
	if (send)
		send_decline(c, local_code, oos);
	c->fb_local = local_code;
	c->fb_peer = peer_code;
	c->hs = HS_DONE_FALLBACK;
	LOG_INFO(CORE_UNIT, "fallback to TCP: local %#x (%s), peer %#x (%s)", local_code,
		 clc_decline_name(local_code), peer_code, clc_decline_name(peer_code));
	hs_undo(c, -SMCR_E_CORE_PEER_DECLINED, now);
	set_mode(c, CORE_MODE_FALLBACK);
	if (async)
		core_ev_raise(c, CORE_EV_CLC);
}

void hs_fail(struct core_conn *c, int err, uint64_t now, bool async)
{
	if (c->hs == HS_DONE_SMC || c->hs == HS_DONE_FALLBACK || c->hs == HS_DONE_FAILED)
		return;
	c->hs = HS_DONE_FAILED;
	c->hs_err = err;
	SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "CLC handshake failed: %s", smcr_err_msg(err));
	hs_undo(c, err, now);
	set_mode(c, CORE_MODE_FAILED);
	if (async)
		core_ev_raise(c, CORE_EV_CLC);
}

void hs_lg_failed(struct core_conn *c, int err, uint64_t now)
{
	if (c->hs == HS_C_START) {
		/* Nothing sent yet: fall back without a Decline. */
		hs_fallback(c, decline_code(err, 0x030a0000u), 0, false, false, now, true);
		return;
	}
	/* Decline NOACTLINK (or err's own code) and continue as TCP. */
	hs_fallback(c, decline_code(err, 0x030a0000u), 0, true, false, now, true);
}

static void go_smc(struct core_conn *c, uint64_t now, bool async)
{
	c->hs = HS_DONE_SMC;
	c->rmb->announced = true;
	pthread_mutex_lock(&c->lock);
	c->mode = CORE_MODE_SMC;
	c->link_num = c->link->link_num;
	/* CDCs may have arrived during the handshake (docs/protocol/procedures.md 2.7: the peer can
	 * be ACTIVE first); answer what is due now that we know the peer's token. */
	tx_cons_update_locked(c, false);
	bool readable = conn_readable_locked(c) > 0;
	pthread_mutex_unlock(&c->lock);
	(void)now;
	if (async)
		core_ev_raise(c, CORE_EV_CLC | (readable ? CORE_EV_IN | CORE_EV_IN_NEW : 0) |
				     CORE_EV_OUT);
}

static void set_peer(struct core_conn *c, const struct clc_accept *a)
{
	uint32_t size = (uint32_t)wire_rmbe_size(a->rmbe_size_code);
	pthread_mutex_lock(&c->lock);
	c->peer_token = a->token;
	c->peer_rkey = a->rkey;
	c->peer_size = size;
	/* docs/protocol/wire-formats.md 4: the element starts at vaddr + (index - 1) * size. */
	c->peer_vaddr = a->rmb_vaddr + (uint64_t)(a->rmbe_idx - 1) * size;
	pthread_mutex_unlock(&c->lock);
	c->peer_id = a->peer_id;
	if (lgr_rtoken_add(c->lg, c->link ? c->link->slot : 0, a->rkey, a->rmb_vaddr) < 0)
		LOG_DBG(CORE_UNIT, "LG %u: RToken table full", c->lg->id);
}

static void queue_rkey(struct core_conn *c, uint64_t now)
{
	struct core_lgr *lg = c->lg;
	conn_hold(c);	/* the queue's (then the flow's) reference */
	c->rkey_next = NULL;
	if (lg->rkey_wait_tail)
		lg->rkey_wait_tail->rkey_next = c;
	else
		lg->rkey_wait_head = c;
	lg->rkey_wait_tail = c;
	/* docs/protocol/procedures.md 1: starting a flow waits up to 20 s for the running one. */
	c->hs_deadline = now + 10 * c->eng->p.llc_wait_ns;
	conn_timer_at(c, c->hs_deadline);
	llc_flow_kick(lg, now);
}

static struct core_dev *pick_dev(struct core_engine *e, int *idx)
{
	for (int i = 0; i < e->ndevs; i++) {
		struct dev_port_attr pa;
		if (dev_query_port(e->devs[i].dev, e->devs[i].port_num, &pa) == 0 &&
		    pa.state == DEV_PORT_ACTIVE) {
			if (idx)
				*idx = i;
			return &e->devs[i];
		}
	}
	return NULL;
}

/* ---- IP prefixes (docs/protocol/wire-formats.md 3.3) ----------------------------------------- */

/* IPv4 address of a sockaddr (IPv4-mapped IPv6 counts), host order; false if IPv6. */
static bool sa_ipv4(const struct sockaddr_storage *ss, uint32_t *out)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)ss;
		*out = ntohl(s4->sin_addr.s_addr);
		return true;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)ss;
		static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
		if (!memcmp(s6->sin6_addr.s6_addr, mapped, 12)) {
			*out = be32_load(s6->sin6_addr.s6_addr + 12);
			return true;
		}
	}
	return false;
}

static uint32_t mask4(unsigned len) { return len == 0 ? 0 : len >= 32 ? 0xFFFFFFFFu : ~0u << (32 - len); }

static void mask6(uint8_t out[16], const uint8_t in[16], unsigned len)
{
	for (unsigned i = 0; i < 16; i++) {
		unsigned bits = len > i * 8 ? len - i * 8 : 0;
		uint8_t m = bits >= 8 ? 0xFF : (uint8_t)(0xFF << (8 - bits));
		out[i] = in[i] & m;
	}
}

/* A v2 LG's subnet (core_lgr.v2_net): the prefix of the first contact's interface that
 * holds its local IPv4 address. */
static void v2_subnet(const struct core_conn *c, struct core_lgr *lg)
{
	uint32_t a4;
	if (!c->v2 || !sa_ipv4(&c->local, &a4))
		return;
	for (int i = 0; i < c->nprefixes; i++) {
		const struct core_ip_prefix *p = &c->prefixes[i];
		if (p->family != AF_INET || p->len == 0 || p->len > 32)
			continue;
		uint32_t m = ~0u << (32 - p->len);
		if ((be32_load(p->addr) & m) == (a4 & m)) {
			lg->v2_net = a4 & m;
			lg->v2_plen = p->len;
			return;
		}
	}
}

/* The local prefixes to use: the configured ones of the family, else the address itself
 * with a full-length prefix. Returns the count written to out. */
static int local_prefixes(const struct core_conn *c, bool v4, struct core_ip_prefix *out)
{
	int n = 0;
	for (int i = 0; i < c->nprefixes; i++) {
		const struct core_ip_prefix *p = &c->prefixes[i];
		if ((v4 && p->family == AF_INET) || (!v4 && p->family == AF_INET6))
			out[n++] = *p;
	}
	if (n)
		return n;
	memset(out, 0, sizeof(*out));
	uint32_t a4;
	if (v4 && sa_ipv4(&c->local, &a4)) {
		out->family = AF_INET;
		be32_store(out->addr, a4);
		out->len = 32;
		return 1;
	}
	if (!v4 && c->local.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)&c->local;
		out->family = AF_INET6;
		memcpy(out->addr, s6->sin6_addr.s6_addr, 16);
		out->len = 128;
		return 1;
	}
	return 0;
}

/* The v2.1 limits smcr offers and accepts (wire-v2.md 6): its connections per LG (at least
 * Linux's minimum), max links by its devices (below), no supplemental features (Linux's one
 * is SMC-D's emulated ISM). */
#define HS_V2_FEATURES 0

/* Max links smcr offers (client) or allows (server) in v2: 2 when the engine has two
 * active devices with a RoCE v2 GID (two paths: ADD LINK v2 can build a second link,
 * addlink.c), else 1 (Linux then sends no ADD LINK at first contact). */
static uint8_t v2_max_links(const struct core_engine *e)
{
	unsigned n = 0;
	for (int i = 0; i < e->ndevs; i++) {
		struct dev_port_attr pa;
		if (e->devs[i].has_v2 && e->devs[i].cq &&
		    dev_query_port(e->devs[i].dev, e->devs[i].port_num, &pa) == 0 &&
		    pa.state == DEV_PORT_ACTIVE)
			n++;
	}
	return n >= 2 ? 2 : 1;
}

static uint8_t v2_max_conns(const struct core_engine *e)
{
	unsigned n = e->p.conns_per_lg;
	return (uint8_t)(n < CLC_CONNS_MIN ? CLC_CONNS_MIN : n > CLC_CONNS_MAX ? CLC_CONNS_MAX : n);
}

/* An active device with a RoCE v2 GID (SMC-R v2's path), or NULL. */
static struct core_dev *pick_dev_v2(struct core_engine *e, int *idx)
{
	for (int i = 0; i < e->ndevs; i++) {
		struct dev_port_attr pa;
		if (e->devs[i].has_v2 &&
		    dev_query_port(e->devs[i].dev, e->devs[i].port_num, &pa) == 0 &&
		    pa.state == DEV_PORT_ACTIVE) {
			if (idx)
				*idx = i;
			return &e->devs[i];
		}
	}
	return NULL;
}

static void ueid_table(const struct core_engine *e, struct clc_eid t[CORE_MAX_UEIDS])
{
	for (unsigned i = 0; i < e->p.ueids.n; i++)
		memcpy(t[i].b, e->p.ueids.eid[i], CLC_EID_LEN);
}

static int build_proposal(struct core_conn *c, struct core_dev *cd)
{
	struct clc_proposal p;
	clc_proposal_init(&p);	/* version 1, SMC-R, N = 40 (docs/protocol/wire-formats.md 3.1) */
	p.peer_id = c->eng->peer_id;
	memcpy(p.gid.b, cd->gid.gid.raw, WIRE_GID_LEN);
	memcpy(p.mac.b, cd->gid.mac, WIRE_MAC_LEN);
	struct core_ip_prefix pf[CORE_MAX_PREFIXES];
	uint32_t a4;
	if (sa_ipv4(&c->local, &a4)) {
		int n = local_prefixes(c, true, pf);
		unsigned len = 32;
		for (int i = 0; i < n; i++) {
			uint32_t m = mask4(pf[i].len);
			if ((be32_load(pf[i].addr) & m) == (a4 & m)) {
				len = pf[i].len;
				break;
			}
		}
		p.ipv4_subnet = a4 & mask4(len);
		p.ipv4_prefix_len = (uint8_t)len;
	} else {
		int n = local_prefixes(c, false, pf);
		int k = 0;
		for (int i = 0; i < n && k < CLC_MAX_V6_PREFIX; i++) {
			if (pf[i].addr[0] == 0xfe && (pf[i].addr[1] & 0xc0) == 0x80)
				continue;	/* link-local prefixes are not sent (3.3) */
			mask6(p.ipv6[k].addr, pf[i].addr, pf[i].len);
			p.ipv6[k].len = pf[i].len;
			k++;
		}
		p.ipv6_count = (uint8_t)k;
	}
	/* SMC-R v2 besides v1 (wire-v2.md 6), as Linux offers it: an IPv4 connection, a user
	 * EID configured and a RoCE v2 GID on the device. v1 stays offered as before. */
	struct core_engine *e = c->eng;
	if (cd->has_v2 && e->p.ueids.n && sa_ipv4(&c->local, &a4)) {
		struct clc_v2ext_info x;
		memset(&x, 0, sizeof(x));
		x.release = CLC_RELEASE_SMCR;
		x.eid_count = e->p.ueids.n;
		ueid_table(e, x.eids);
		memcpy(x.roce_gid.b, cd->gid_v2.gid.raw, WIRE_GID_LEN);
		x.max_conns = v2_max_conns(e);
		x.max_links = v2_max_links(e);
		x.feature_mask = HS_V2_FEATURES;
		if (clc_proposal_offer(&p, true, true, &x)) {
			LOG_ERR(CORE_UNIT, "v2 Proposal layout failed");
			return -SMCR_E_INTERNAL;
		}
		c->v2_offered = true;
	}
	size_t n = 0;
	int rc = clc_proposal_encode(&p, c->out + c->out_len, sizeof(c->out) - c->out_len, &n);
	if (rc) {
		LOG_ERR(CORE_UNIT, "Proposal encode failed: %s", smcr_err_msg(rc));
		return -SMCR_E_INTERNAL;
	}
	c->out_len += n;
	return 0;
}

/* Server check of docs/protocol/wire-formats.md 3.3 (Linux smc_clc_prfx_match). */
static bool prefix_match(const struct core_conn *c, const struct clc_proposal *p)
{
	struct core_ip_prefix pf[CORE_MAX_PREFIXES];
	uint32_t a4;
	if (sa_ipv4(&c->local, &a4)) {
		int n = local_prefixes(c, true, pf);
		for (int i = 0; i < n; i++) {
			uint32_t m = mask4(pf[i].len);
			if (pf[i].len == p->ipv4_prefix_len && (be32_load(pf[i].addr) & m) == (p->ipv4_subnet & m))
				return true;
		}
		return false;
	}
	int n = local_prefixes(c, false, pf);
	int cnt = p->ipv6_count < CLC_MAX_V6_PREFIX ? p->ipv6_count : CLC_MAX_V6_PREFIX;
	for (int j = 0; j < cnt; j++) {
		for (int i = 0; i < n; i++) {
			uint8_t a[16], b[16];
			if (pf[i].len != p->ipv6[j].len)
				continue;
			mask6(a, pf[i].addr, pf[i].len);
			mask6(b, p->ipv6[j].addr, pf[i].len);
			if (!memcmp(a, b, 16))
				return true;
		}
	}
	return false;
}

/* ---- one first contact per peer at a time (server) ---------------------------------------- */

/* Re-check period of a Proposal held back behind a first contact (below). */
#define HS_LG_RECHECK_NS (5ull * 1000000ull)

static bool same_peer(const struct wire_peer_id *a, const struct wire_peer_id *b)
{
	return a->instance == b->instance && !memcmp(a->mac.b, b->mac.b, WIRE_MAC_LEN);
}

/* A server LG with this peer still in first contact (SETUP)? Caller holds eng->lock. */
static bool lg_setup_with(const struct core_engine *e, const struct wire_peer_id *peer)
{
	for (const struct core_lgr *lg = e->lgs; lg; lg = lg->next)
		if (lg->role == CORE_SERVER && lg->state == CORE_LG_SETUP &&
		    same_peer(&lg->peer_id, peer))
			return true;
	return false;
}

/* The LG of this peer left SETUP (active or dead): the Proposals held back behind it go
 * on (sock steps them again on CORE_EV_CLC). Caller holds eng->lock. */
static void lg_wait_wake(struct core_engine *e, const struct wire_peer_id *peer)
{
	for (struct core_conn *x = e->conns; x; x = x->all_next)
		if (x->hs_lg_wait && same_peer(&x->peer_id, peer))
			core_ev_raise(x, CORE_EV_CLC);
}

/* ---- received messages ---------------------------------------------------------------- */

static void on_decline(struct core_conn *c, const struct clc_decline *d, uint64_t now)
{
	/* docs/protocol/wire-formats.md 5.3: out of sync -> the LG this connection was to reuse is
	 * broken. */
	if (d->out_of_sync && c->lg && !c->first_contact && c->lg->state == CORE_LG_ACTIVE) {
		struct core_lgr *lg = c->lg;
		LOG_WARN(CORE_UNIT, "LG %u: peer declined out of sync: terminating it", lg->id);
		lg->sync_err = true;
		lgr_terminate(lg, LLC_DEL_PROG_INIT_TERM, false, true, -SMCR_E_CORE_SYNCERR, now);
	}
	hs_fallback(c, DECL_PEERDECL, d->diag, false, false, now, false);
}

/* Server: can this Proposal have SMC-R v2 (wire-v2.md 6)? Its extension read, a user EID in
 * common (the first of the client's in our table), an IPv4 connection and client GID, and
 * a device with a RoCE v2 GID. Fills *x and c->v2_eid. */
static bool v2_possible_server(struct core_conn *c, const struct clc_proposal *p,
			       struct clc_v2ext_info *x)
{
	struct core_engine *e = c->eng;
	uint32_t ip;
	if (!p->has_v2ext || e->p.ueids.n == 0 || clc_v2ext_get(&p->v2ext, p->typev2, x))
		return false;
	struct clc_eid t[CORE_MAX_UEIDS];
	ueid_table(e, t);
	int k = clc_eid_match(x, t, e->p.ueids.n);
	if (k < 0 || !sa_ipv4(&c->local, &ip) || !clc_gid_ipv4(&x->roce_gid, &ip) ||
	    !pick_dev_v2(e, NULL))
		return false;
	c->v2_eid = x->eids[k];
	return true;
}

static void on_proposal(struct core_conn *c, const struct clc_proposal *p, uint64_t now)
{
	struct core_engine *e = c->eng;
	c->peer_id = p->peer_id;
	c->hs_lg_wait = false;
	/* Linux answers a version-2 Proposal with a version-2 Decline (wire-v2.md 3). */
	c->decl_v2 = p->f.version >= CLC_VERSION_2;
	/* Version choice as Linux makes it (parts/wire-v2.md 6): SMC-R v2 first when it is
	 * possible, else v1 (every smcr device can do v1), else a Decline. */
	struct clc_v2ext_info x;
	memset(&x, 0, sizeof(x));
	bool can_v2 = v2_possible_server(c, p, &x);
	uint32_t decl;
	uint8_t ver = clc_choose_version(p, can_v2, true, &decl);
	if (!ver) {
		hs_fallback(c, decl, 0, true, false, now, false);
		return;
	}
	struct core_dev *cd;
	struct core_lgr *lg;
	if (ver == CLC_VERSION_2) {
		decl = clc_v2x_server_pick(&x, v2_max_conns(e), v2_max_links(e), HS_V2_FEATURES,
					   &c->v2_fce);
		if (decl) {
			hs_fallback(c, decl, 0, true, false, now, false);
			return;
		}
		c->v2 = true;
		c->v2_peer_gid = x.roce_gid;
		/* no IP prefix check: SMC-R v2 peers need not share a subnet */
		cd = pick_dev_v2(e, NULL);
		lg = lgr_find_server_v2(e, &x.roce_gid);
	} else {
		if (!prefix_match(c, p)) {
			hs_fallback(c, 0x03070000u, 0, true, false, now, false);	/* DIFFPREFIX */
			return;
		}
		cd = pick_dev(e, NULL);
		if (!cd) {
			hs_fallback(c, 0x03030002u, 0, true, false, now, false);	/* NOSMCRDEV */
			return;
		}
		lg = lgr_find_server(e, p);
	}
	bool need_rkey = false;
	int rc;
	if (!lg && lg_setup_with(e, &p->peer_id)) {
		/* This peer's first contact is in progress (its CONFIRM LINK exchange): a second
		 * one would make a second LG (the client then holds two). As Linux serializes
		 * server LG creation, hold this Proposal back (not consumed) until that LG is
		 * active or dead, then find or create (docs/protocol/procedures.md 2.5). Bounded by
		 * the CLC wait that runs meanwhile. */
		c->hs_lg_wait = true;
		conn_timer_at(c, now + HS_LG_RECHECK_NS);
		return;
	}
	if (lg) {
		rc = lgr_attach(lg, c, &need_rkey, now);
		if (rc) {
			hs_fallback(c, decline_code(rc, 0x01010000u), 0, true, false, now, false);
			return;
		}
		if (need_rkey) {
			/* docs/protocol/procedures.md 2.7: the new RMB is announced before the
			 * Accept. */
			c->hs = HS_S_WAIT_RKEY;
			queue_rkey(c, now);
			return;
		}
		if (send_accept(c, CLC_ACCEPT, false, c->link->mtu)) {
			hs_fail(c, -SMCR_E_INTERNAL, now, false);
			return;
		}
	} else {
		rc = lgr_create(e, CORE_SERVER, cd, &p->peer_id, c->v2, &lg);
		if (rc) {
			hs_fallback(c, decline_code(rc, 0x09990002u), 0, true, false, now, false);
			return;
		}
		lg->v2 = c->v2;
		lg->max_conns = c->v2_fce.max_conns;
		lg->max_links = c->v2_fce.max_links;
		v2_subnet(c, lg);
		/* The client's port, for matching later connections (docs/protocol/procedures.md
		 * 2.5). */
		lg->links[0]->peer_gid = c->v2 ? x.roce_gid : p->gid;
		lg->links[0]->peer_mac = p->mac;
		c->first_contact = true;
		lg->fc_conn = c;
		conn_hold(c);	/* put when the LG leaves SETUP or dies */
		rc = lgr_attach(lg, c, NULL, now);
		if (rc) {
			hs_fallback(c, decline_code(rc, 0x01010000u), 0, true, false, now, false);
			return;
		}
		if (send_accept(c, CLC_ACCEPT, true, (uint8_t)cd->port.active_mtu)) {
			hs_fail(c, -SMCR_E_INTERNAL, now, false);
			return;
		}
	}
	c->hs = HS_S_WAIT_CONFIRM;
	c->hs_deadline = now + e->p.clc_wait_ns;
}

static void on_accept(struct core_conn *c, const struct clc_accept *a, uint64_t now)
{
	struct core_engine *e = c->eng;
	struct core_dev *cd = &e->devs[c->cdev_idx];
	int rc;
	c->peer_clc = *a;
	c->peer_id = a->peer_id;
	if (a->first_contact) {
		struct core_lgr *lg;
		rc = lgr_create(e, CORE_CLIENT, cd, &a->peer_id, c->v2, &lg);
		if (rc) {
			hs_fallback(c, decline_code(rc, 0x09990002u), 0, true, false, now, false);
			return;
		}
		lg->v2 = c->v2;
		lg->max_conns = c->v2_fce.max_conns;
		lg->max_links = c->v2_fce.max_links;
		v2_subnet(c, lg);
		c->first_contact = true;
		lg->fc_conn = c;
		conn_hold(c);
		rc = lgr_attach(lg, c, NULL, now);
		if (rc) {
			hs_fallback(c, decline_code(rc, 0x01010000u), 0, true, false, now, false);
			return;
		}
		uint8_t mtu = (uint8_t)cd->port.active_mtu;
		if (a->mtu_code < mtu)
			mtu = a->mtu_code;
		/* docs/protocol/procedures.md 2.6: client QP INIT -> RTR at the Accept; RTS at
		 * CONFIRM LINK. */
		rc = link_rtr(c->link, a->qpn, a->psn, mtu, &a->gid, &a->mac);
		if (rc) {
			hs_fallback(c, 0x09990002u, 0, true, false, now, false);	/* ERR_RDYLNK */
			return;
		}
		set_peer(c, a);
		if (send_accept(c, CLC_CONFIRM, true, mtu)) {
			hs_fail(c, -SMCR_E_INTERNAL, now, false);
			return;
		}
		c->hs = HS_C_WAIT_CL;
		c->hs_deadline = now + e->p.llc_wait_first_ns;
		return;
	}
	struct core_lgr *lg = lgr_find_client(e, a, c->v2);
	if (!lg) {
		/* docs/protocol/procedures.md 2.5: reuse of an LG we do not have -> SYNCERR, out of
		 * sync. */
		hs_fallback(c, 0x04000000u, 0, true, true, now, false);
		return;
	}
	bool need_rkey = false;
	rc = lgr_attach(lg, c, &need_rkey, now);
	if (rc) {
		hs_fallback(c, decline_code(rc, 0x01010000u), 0, true, false, now, false);
		return;
	}
	set_peer(c, a);
	if (need_rkey) {
		c->hs = HS_C_WAIT_RKEY;
		queue_rkey(c, now);
		return;
	}
	if (send_accept(c, CLC_CONFIRM, false, c->link->mtu)) {
		hs_fail(c, -SMCR_E_INTERNAL, now, false);
		return;
	}
	go_smc(c, now, false);
}

static void on_confirm(struct core_conn *c, const struct clc_accept *a, uint64_t now)
{
	struct core_engine *e = c->eng;
	c->peer_clc = *a;
	set_peer(c, a);
	if (!c->first_contact) {
		go_smc(c, now, false);
		return;
	}
	struct core_link *l = c->link;
	uint8_t mtu = l->mtu < a->mtu_code ? l->mtu : a->mtu_code;
	/* docs/protocol/procedures.md 2.3: server QP INIT -> RTR -> RTS, then CONFIRM LINK
	 * request. */
	int rc = link_rtr(l, a->qpn, a->psn, mtu, &a->gid, &a->mac);
	if (!rc)
		rc = link_rts(l);
	if (!rc)
		rc = llc_send_confirm_link(l, false);
	if (rc) {
		hs_fallback(c, 0x09990002u, 0, true, false, now, false);	/* ERR_RDYLNK */
		return;
	}
	c->hs = HS_S_WAIT_CL;
	c->hs_deadline = now + e->p.llc_wait_ns;
}

/* The v1 fields of an SMC-R v2 Accept/Confirm: the v1 procedures take them unchanged. */
static void accept_v1_fields(const struct clc_accept_v2 *a2, struct clc_accept *a)
{
	memset(a, 0, sizeof(*a));
	a->f = a2->f;
	a->first_contact = a2->first_contact;
	a->peer_id = a2->peer_id;
	a->gid = a2->gid;
	a->mac = a2->mac;
	a->qpn = a2->qpn;
	a->rkey = a2->rkey;
	a->rmbe_idx = a2->rmbe_idx;
	a->token = a2->token;
	a->rmbe_size_code = a2->rmbe_size_code;
	a->mtu_code = a2->mtu_code;
	a->rmb_vaddr = a2->rmb_vaddr;
	a->psn = a2->psn;
}

static bool eid_ours(const struct core_engine *e, const struct clc_eid *eid)
{
	for (unsigned i = 0; i < e->p.ueids.n; i++)
		if (!memcmp(e->p.ueids.eid[i], eid->b, CLC_EID_LEN))
			return true;
	return false;
}

/* An SMC-R v2 Accept (client) or Confirm (server), wire-v2.md 4 and 6. */
static void on_message_v2(struct core_conn *c, const uint8_t *buf, size_t len,
			  enum clc_type type, uint64_t now)
{
	struct clc_accept_v2 a2;
	struct clc_accept a;
	int rc = clc_accept_v2_decode(buf, len, type, &a2);
	if (rc) {
		uint32_t d = smcr_err_decline(rc);
		SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "CLC v2 %s rejected: %s", clc_type_name(type),
			    smcr_err_msg(rc));
		if (!d)
			hs_fail(c, rc, now, false);
		else
			hs_fallback(c, d, 0, true, false, now, false);
		return;
	}
	accept_v1_fields(&a2, &a);
	if (type == CLC_ACCEPT && c->hs == HS_C_WAIT_ACCEPT && c->v2_offered) {
		/* From here on our Declines are version 2, as the Accept's (Linux). */
		c->v2 = true;
		c->decl_v2 = true;
		uint32_t d = 0;
		if (!eid_ours(c->eng, &a2.eid))
			d = CLC2_DECL_NOUEID;	/* an EID we never offered */
		else if (a2.first_contact)
			d = clc_v2x_client_check(&a2.fce, CLC_RELEASE_SMCR);
		if (d) {
			hs_fallback(c, d, 0, true, false, now, false);
			return;
		}
		c->v2_eid = a2.eid;
		if (a2.first_contact)
			c->v2_fce = a2.fce;
		on_accept(c, &a, now);
		return;
	}
	if (type == CLC_CONFIRM && c->hs == HS_S_WAIT_CONFIRM && c->v2) {
		uint32_t d = 0;
		if (memcmp(a2.eid.b, c->v2_eid.b, CLC_EID_LEN))
			d = CLC2_DECL_NOUEID;	/* not the EID of our Accept */
		else if (c->first_contact)
			d = clc_v2x_confirm_check(&c->v2_fce, &a2.fce);
		if (d) {
			hs_fallback(c, d, 0, true, false, now, false);
			return;
		}
		on_confirm(c, &a, now);
		return;
	}
	/* A v2 message where v1 runs (or v2 was never offered): docs/protocol/wire-formats.md 2.4
	 * item 3. */
	SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "unexpected CLC v2 %s", clc_type_name(type));
	hs_fail(c, -SMCR_E_CORE_CLC_UNEXPECTED, now, false);
}

/* One whole message of len bytes in the expected state. */
static void on_message(struct core_conn *c, const uint8_t *buf, size_t len, uint64_t now)
{
	struct clc_msg m;
	/* header: eyecatcher (4), type (4), length (5-6), version nibble of byte 7 */
	if (len >= CLC_HDR_LEN && (buf[4] == CLC_ACCEPT || buf[4] == CLC_CONFIRM) &&
	    (buf[7] >> 4) >= CLC_VERSION_2) {
		on_message_v2(c, buf, len, (enum clc_type)buf[4], now);
		return;
	}
	int rc = clc_decode(buf, len, &m);
	if (rc) {
		uint32_t d = smcr_err_decline(rc);
		SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "CLC message rejected: %s", smcr_err_msg(rc));
		if (!d || m.type == CLC_DECLINE)	/* framing: the stream is lost (2.4) */
			hs_fail(c, rc, now, false);
		else
			hs_fallback(c, d, 0, true, false, now, false);
		return;
	}
	if (m.type == CLC_DECLINE) {
		on_decline(c, &m.decline, now);
		return;
	}
	switch (c->hs) {
	case HS_C_WAIT_ACCEPT:
		if (m.type == CLC_ACCEPT) {
			/* a v1 Accept to a Proposal that offered both: v1 runs */
			on_accept(c, &m.accept, now);
			return;
		}
		break;
	case HS_S_WAIT_PROPOSAL:
		if (m.type == CLC_PROPOSAL) {
			on_proposal(c, &m.proposal, now);
			return;
		}
		break;
	case HS_S_WAIT_CONFIRM:
		if (m.type == CLC_CONFIRM && !c->v2) {	/* a v2 Accept wants a v2 Confirm */
			on_confirm(c, &m.accept, now);
			return;
		}
		break;
	case HS_C_START:
	case HS_C_WAIT_RKEY:
	case HS_C_WAIT_CL:
	case HS_S_WAIT_RKEY:
	case HS_S_WAIT_CL:
	case HS_DECL_WAIT:
	case HS_DONE_SMC:
	case HS_DONE_FALLBACK:
	case HS_DONE_FAILED:
		break;
	}
	/* docs/protocol/wire-formats.md 2.4 item 3: anything but the expected type or a Decline
	 * fails. */
	SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "unexpected CLC %s", clc_type_name(m.type));
	hs_fail(c, -SMCR_E_CORE_CLC_UNEXPECTED, now, false);
}

/* ---- timers -------------------------------------------------------------------------------- */

static void hs_timeout(struct core_conn *c, uint64_t now, bool async)
{
	struct core_engine *e = c->eng;
	switch (c->hs) {
	case HS_C_WAIT_ACCEPT:
	case HS_S_WAIT_PROPOSAL:
	case HS_S_WAIT_CONFIRM:
		/* docs/protocol/procedures.md 2.4: a CLC timeout is not a fallback. */
		hs_fail(c, -SMCR_E_CORE_CLC_TIMEOUT, now, async);
		return;
	case HS_C_WAIT_CL:
	case HS_S_WAIT_CL:
		/* Wait 1 s for the peer's Decline, then send ours (docs/protocol/procedures.md
		 * 2.2/2.3). */
		c->hs = HS_DECL_WAIT;
		c->hs_decl_err = -SMCR_E_CORE_TIMEOUT_CL;
		c->hs_deadline = now + e->p.clc_wait_short_ns;
		conn_timer_at(c, c->hs_deadline);
		return;
	case HS_DECL_WAIT:
		hs_fallback(c, decline_code(c->hs_decl_err, 0x02010000u), 0, true, false, now, async);
		return;
	case HS_C_WAIT_RKEY:
	case HS_S_WAIT_RKEY:
		hs_fallback(c, 0x09990003u, 0, true, false, now, async);	/* ERR_REGBUF */
		return;
	case HS_C_START:
	case HS_DONE_SMC:
	case HS_DONE_FALLBACK:
	case HS_DONE_FAILED:
		return;
	}
}

uint64_t hs_conn_timer(struct core_conn *c, uint64_t now)
{
	struct core_engine *e = c->eng;
	uint64_t next = CORE_NEVER;
	if (c->hs_lg_wait && c->hs == HS_S_WAIT_PROPOSAL) {
		/* held back behind a first contact: go on once it is no longer SETUP (the
		 * fast path is lg_wait_wake; this covers an LG that died) */
		if (!lg_setup_with(e, &c->peer_id))
			core_ev_raise(c, CORE_EV_CLC);
		else
			next = now + HS_LG_RECHECK_NS;
	}
	if (hs_waiting(c->hs) && c->hs_deadline && now >= c->hs_deadline)
		hs_timeout(c, now, true);
	if (c->lg && now >= c->close_deadline) {
		/* The peer never sent its C/A: give up on it (RMB quarantined). */
		SMCR_LOG_RL(SMCR_LOG_INFO, CORE_UNIT, "LG %u: peer did not close in time",
			    c->lg->id);
		c->close_deadline = CORE_NEVER;
		lgr_detach(c, false, now);
	}
	if (hs_waiting(c->hs) && c->hs_deadline && c->hs_deadline < next)
		next = c->hs_deadline;
	if (c->lg && c->close_deadline < next)
		next = c->close_deadline;
	return next;
}

/* ---- from LLC ---------------------------------------------------------------------------- */

void hs_link_confirmed(struct core_conn *c, int err, uint64_t now)
{
	struct core_engine *e = c->eng;
	if (err) {
		hs_fallback(c, decline_code(err, 0x09990002u), 0, true, false, now, true);
		return;
	}
	struct core_lgr *lg = c->lg;
	lg->state = CORE_LG_ACTIVE;
	lg->fc_conn = NULL;
	c->link->last_rx_ns = now;
	if (e->p.testlink_ns != UINT64_MAX)
		lgr_timer_at(lg, now + e->p.testlink_ns);
	go_smc(c, now, true);
	if (lg->role == CORE_SERVER) {
		llc_start_add_link_offer(lg, now);
		lg_wait_wake(e, &lg->peer_id);
	}
	conn_put(c);	/* lg->fc_conn's reference */
}

void hs_rkey_confirmed(struct core_conn *c, int err, uint64_t now)
{
	struct core_engine *e = c->eng;
	if (c->hs != HS_C_WAIT_RKEY && c->hs != HS_S_WAIT_RKEY)
		return;
	if (err) {
		hs_fallback(c, decline_code(err, 0x09990003u), 0, true, false, now, true);
		return;
	}
	c->rmb->announced = true;
	if (c->hs == HS_S_WAIT_RKEY) {
		if (send_accept(c, CLC_ACCEPT, false, c->link->mtu)) {
			hs_fail(c, -SMCR_E_INTERNAL, now, true);
			return;
		}
		c->hs = HS_S_WAIT_CONFIRM;
		c->hs_deadline = now + e->p.clc_wait_ns;
		conn_timer_at(c, c->hs_deadline);
		core_ev_raise(c, CORE_EV_CLC);
		return;
	}
	if (send_accept(c, CLC_CONFIRM, false, c->link->mtu)) {
		hs_fail(c, -SMCR_E_INTERNAL, now, true);
		return;
	}
	go_smc(c, now, true);
}

/* ---- the step ------------------------------------------------------------------------------ */

static enum core_clc_status status_of(const struct core_conn *c)
{
	switch (c->hs) {
	case HS_C_START:
	case HS_C_WAIT_ACCEPT:
	case HS_S_WAIT_PROPOSAL:
	case HS_S_WAIT_CONFIRM:
		return CORE_CLC_NEED_INPUT;
	case HS_C_WAIT_RKEY:
	case HS_C_WAIT_CL:
	case HS_S_WAIT_RKEY:
	case HS_S_WAIT_CL:
	case HS_DECL_WAIT:
		return CORE_CLC_WAIT_LINK;
	case HS_DONE_SMC:
		return CORE_CLC_SMC;
	case HS_DONE_FALLBACK:
		return CORE_CLC_FALLBACK;
	case HS_DONE_FAILED:
		return CORE_CLC_FAILED;
	}
	return CORE_CLC_FAILED;
}

int core_conn_clc_step(struct core_conn *c, const void *in, size_t len, bool tcp_eof,
		       uint64_t now_ns, struct core_clc_result *r)
{
	struct core_engine *e = c->eng;
	const uint8_t *p = in;
	memset(r, 0, sizeof(*r));
	if (len && !in)
		return -SMCR_E_INVAL;
	pthread_mutex_lock(&e->lock);
	if (c->released) {
		pthread_mutex_unlock(&e->lock);
		return -SMCR_E_INVAL;
	}
	if (e->freed)
		hs_fail(c, -SMCR_E_CORE_RESET, now_ns, false);
	if (c->hs == HS_C_START) {
		struct core_dev *cd = pick_dev(e, &c->cdev_idx);
		if (!cd) {
			/* docs/protocol/linux-interop.md 4.1: a client may send a Decline instead
			 * of a Proposal. */
			hs_fallback(c, 0x03030002u, 0, true, false, now_ns, false);
		} else if (build_proposal(c, cd)) {
			hs_fail(c, -SMCR_E_INTERNAL, now_ns, false);
		} else {
			c->hs = HS_C_WAIT_ACCEPT;
			c->hs_deadline = now_ns + e->p.clc_wait_ns;
		}
	}
	if (c->hs == HS_S_WAIT_PROPOSAL && c->hs_deadline == 0)
		c->hs_deadline = now_ns + e->p.clc_wait_ns;
	while (hs_waiting(c->hs)) {
		size_t avail = len - r->consumed;
		enum clc_type type;
		uint16_t msglen = 0;
		if (avail < CLC_HDR_LEN)
			break;
		int rc = clc_peek_header(p + r->consumed, avail, &type, &msglen, NULL);
		if (rc) {
			hs_fail(c, rc, now_ns, false);
			break;
		}
		if (avail < msglen)
			break;
		on_message(c, p + r->consumed, msglen, now_ns);
		if (c->hs_lg_wait)
			break; /* the Proposal waits for this peer's first contact (on_proposal) */
		r->consumed += msglen;
	}
	if (hs_waiting(c->hs)) {
		/* A server waiting for the CONFIRM LINK response has all the client's CLC
		 * messages; the client is done once it sent that response and may at once
		 * shut down (TCP FIN: not the end of the SMC stream, docs/protocol/linux-interop.md
		 * 8) or abort (RST, e.g. close with SO_LINGER 0: its A follows on the link). Its
		 * FIN or RST can overtake the response, which comes over the link: keep
		 * waiting for the response (bounded by the LLC wait, and a dead peer takes
		 * the link down), as TCP's accept still returns a connection reset early. */
		if (tcp_eof && c->hs != HS_S_WAIT_CL)
			hs_fail(c, -SMCR_E_CORE_TCP_EOF, now_ns, false);
		else if (c->hs_deadline && now_ns >= c->hs_deadline)
			hs_timeout(c, now_ns, false);
	}
	if (hs_waiting(c->hs) && c->hs_deadline)
		conn_timer_at(c, c->hs_deadline);
	r->status = status_of(c);
	r->err = c->hs == HS_DONE_FAILED ? c->hs_err : 0;
	r->deadline_ns = hs_waiting(c->hs) && c->hs_deadline ? c->hs_deadline : CORE_NEVER;
	/* Hand the pending bytes over in a buffer progress never writes (c->out may grow in
	 * the background, e.g. a Decline after an LLC timeout). */
	memcpy(c->out_user, c->out, c->out_len);
	r->out = c->out_user;
	r->out_len = c->out_len;
	c->out_len = 0;
	pthread_mutex_unlock(&e->lock);
	core_ev_fire(e);
	return 0;
}
