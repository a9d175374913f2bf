/* conn.c: connection objects: creation, references, release, readiness (the level mask
 * sock maps to poll bits) and the query struct (docs/protocol/procedures.md 4.2 cursors, 5.2
 * states). */
#include "core/core_int.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

void conn_hold(struct core_conn *c)
{
	atomic_fetch_add_explicit(&c->refcnt, 1, memory_order_relaxed);
}

/* The last put frees the object. Never takes eng->lock: by then the conn is unlinked from
 * every engine list (see conn_unlink_locked) and detached from its LG. */
void conn_put(struct core_conn *c)
{
	if (atomic_fetch_sub_explicit(&c->refcnt, 1, memory_order_acq_rel) != 1)
		return;
	struct core_engine *e = c->eng;
	if (c->rmem)
		dev_mem_put(c->rmem);
	ring_put(c->sb, c->sb_size);	/* the send ring (tx.c), if it holds one */
	free(c->shadow);		/* failover's copy (failover.c) */
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->cb_lock);
	free(c);
	core_engine_put(e);
}

/* Removes c from eng->conns once it is released and detached (eng->lock held). */
static void conn_unlink_locked(struct core_conn *c)
{
	struct core_engine *e = c->eng;
	if (!c->released || c->lg)
		return;
	if (!c->all_prev && e->conns != c)
		return;	/* already unlinked */
	if (c->all_prev)
		c->all_prev->all_next = c->all_next;
	else
		e->conns = c->all_next;
	if (c->all_next)
		c->all_next->all_prev = c->all_prev;
	c->all_next = c->all_prev = NULL;
	core_timers_cancel(&e->timers, &c->tmr);	/* armed only while listed */
	core_timers_unreserve(&e->timers);
	e->conns_freed++;
	conn_put(c);	/* the list's reference, taken in core_conn_new */
}

void conn_maybe_unlink(struct core_conn *c) { conn_unlink_locked(c); }

static bool conn_listed(const struct core_conn *c)
{
	return c->all_prev || c->eng->conns == c;
}

void conn_timer_at(struct core_conn *c, uint64_t when)
{
	if (when != CORE_NEVER && conn_listed(c))
		core_timers_arm_min(&c->eng->timers, &c->tmr, when);
}

/* The connection's deadline came (or one that has moved since: each part checks its own
 * and says when it is next due). eng->lock held, from core_timers_expire. */
static void conn_timer_fn(struct core_timer *t, uint64_t now)
{
	struct core_conn *c = (struct core_conn *)((char *)t - offsetof(struct core_conn, tmr));
	conn_hold(c);	/* acting may unlink it */
	uint64_t a = hs_conn_timer(c, now);
	uint64_t b = tx_conn_timer(c, now);
	conn_timer_at(c, a < b ? a : b);
	conn_put(c);
}

int core_conn_new(struct core_engine *e, const struct core_conn_params *p,
		  struct core_conn **out)
{
	if (!p || (p->role != CORE_CLIENT && p->role != CORE_SERVER) ||
	    p->nprefixes < 0 || (p->nprefixes && !p->prefixes))
		return -SMCR_E_INVAL;
	struct core_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return -SMCR_E_NOMEM;
	c->eng = e;
	atomic_init(&c->refcnt, 2);	/* the caller's + the engine list's */
	c->role = p->role;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->cb_lock, NULL);
	c->cb = p->cb;
	c->cb_ctx = p->cb_ctx;
	c->local = p->local;
	c->peer = p->peer;
	c->nprefixes = p->nprefixes > CORE_MAX_PREFIXES ? CORE_MAX_PREFIXES : p->nprefixes;
	if (c->nprefixes)
		memcpy(c->prefixes, p->prefixes, sizeof(c->prefixes[0]) * (size_t)c->nprefixes);
	c->want_rmbe = p->rcvbuf;	/* 0: sized below, by the connection count */
	c->want_sndbuf = p->sndbuf ? p->sndbuf : CORE_SNDBUF_DEFAULT;
	c->sb_size = tx_sndbuf_size(p->sndbuf);
	c->cork_deadline = CORE_NEVER;
	c->giveup_deadline = CORE_NEVER;
	atomic_init(&c->tx_deadline, CORE_NEVER);
	c->oobinline = p->oobinline;
	c->hs = p->role == CORE_CLIENT ? HS_C_START : HS_S_WAIT_PROPOSAL;
	c->hs_deadline = 0;	/* set by the first core_conn_clc_step */
	c->mode = CORE_MODE_HANDSHAKE;
	c->close_deadline = CORE_NEVER;

	core_timer_init(&c->tmr, conn_timer_fn);
	pthread_mutex_lock(&e->lock);
	if (core_timers_reserve(&e->timers)) {
		pthread_mutex_unlock(&e->lock);
		pthread_mutex_destroy(&c->lock);
		pthread_mutex_destroy(&c->cb_lock);
		free(c);
		return -SMCR_E_NOMEM;
	}
	atomic_fetch_add(&e->refcnt, 1);	/* put in conn_put */
	c->all_next = e->conns;
	if (e->conns)
		e->conns->all_prev = c;
	e->conns = c;
	e->conns_created++;
	if (!c->want_rmbe && !e->p.rmbe_auto_max) {
		c->want_rmbe = CORE_RMBE_DEFAULT;
	} else if (!c->want_rmbe) {
		/* core.h CORE_RMBE_AUTO_*: the budget shared by the live connections. */
		uint64_t live = e->conns_created - e->conns_freed;
		uint64_t share = e->p.rmbe_auto_budget / (live ? live : 1);
		uint32_t sz = e->p.rmbe_auto_max;
		while (sz > CORE_RMBE_DEFAULT && sz > share)
			sz /= 2;
		c->want_rmbe = sz < CORE_RMBE_DEFAULT ? CORE_RMBE_DEFAULT : sz;
	}
	pthread_mutex_unlock(&e->lock);
	*out = c;
	return 0;
}

void core_conn_release(struct core_conn *c, uint64_t now_ns)
{
	struct core_engine *e = c->eng;
	/* No callback after we return: a running one holds cb_lock. */
	pthread_mutex_lock(&c->cb_lock);
	c->cb = NULL;
	c->cb_ctx = NULL;
	pthread_mutex_unlock(&c->cb_lock);

	pthread_mutex_lock(&c->lock);
	bool smc = c->mode == CORE_MODE_SMC;
	pthread_mutex_unlock(&c->lock);
	if (smc)
		core_conn_close(c, false, now_ns);

	pthread_mutex_lock(&e->lock);
	pthread_mutex_lock(&c->lock);
	c->released = true;
	pthread_mutex_unlock(&c->lock);
	if (c->mode == CORE_MODE_HANDSHAKE)
		hs_fail(c, -SMCR_E_CORE_RESET, now_ns, false);	/* undoes what the handshake set up */
	close_maybe_finish_elocked(c, now_ns);
	conn_unlink_locked(c);
	pthread_mutex_unlock(&e->lock);
	core_ev_fire(e);
	conn_put(c);
}

/* ---- readiness (docs/parts/core.md "Readiness": TCP's tcp_poll rules) ------------------ */

uint64_t conn_readable_locked(struct core_conn *c)
{
	if (!c->rmbe)
		return 0;
	uint64_t avail = c->rx_peer_prod - c->rx_cons;
	/* Without SO_OOBINLINE the urgent byte is not in the stream (tcp_poll's target++). */
	if (!c->oobinline && (c->urg == URG_VALID || c->urg == URG_READ) &&
	    c->urg_abs > c->rx_cons && c->urg_abs <= c->rx_peer_prod && avail > 0)
		avail--;
	return avail;
}

uint32_t conn_writable_locked(struct core_conn *c)
{
	if (!c->link || !c->peer_size)
		return 0;
	uint64_t used = c->tx_prod - c->tx_peer_cons;
	return used >= c->peer_size ? 0 : (uint32_t)(c->peer_size - used);
}

unsigned conn_events_locked(struct core_conn *c)
{
	if (c->mode != CORE_MODE_SMC)
		return 0;
	unsigned ev = 0;
	bool dead = c->reset_err != 0 && !c->lost_wait; /* lost: no end shown yet */
	bool wr_done = (c->cl & (CL_SENT_D | CL_SENT_C | CL_SENT_A)) || c->cl_pend;
	bool rd_done = (c->cl & (CL_RCVD_D | CL_RCVD_C)) || c->shut_rd;
	if (conn_readable_locked(c) || rd_done || dead)
		ev |= CORE_EV_IN;
	/* TCP's POLLOUT follows its send buffer: ours is the send ring (sndbuf.md). */
	if (wr_done || dead || tx_sndbuf_writable_locked(c))
		ev |= CORE_EV_OUT;
	if (c->urg == URG_PENDING || c->urg == URG_VALID)
		ev |= CORE_EV_PRI;
	if ((c->cl & (CL_RCVD_D | CL_RCVD_C | CL_RCVD_A)) || dead)
		ev |= CORE_EV_RDHUP;
	if (dead || (wr_done && rd_done) || c->wrote_after_c)
		ev |= CORE_EV_HUP;
	if (c->err)
		ev |= CORE_EV_ERR;
	return ev;
}

unsigned core_conn_events(struct core_conn *c)
{
	pthread_mutex_lock(&c->lock);
	unsigned ev = conn_events_locked(c);
	pthread_mutex_unlock(&c->lock);
	return ev;
}

int core_conn_error(struct core_conn *c)
{
	pthread_mutex_lock(&c->lock);
	int err = c->err;
	c->err = 0;
	pthread_mutex_unlock(&c->lock);
	return err;
}

void core_conn_set_oobinline(struct core_conn *c, bool on)
{
	pthread_mutex_lock(&c->lock);
	c->oobinline = on;
	pthread_mutex_unlock(&c->lock);
}

/* Linux state names (docs/protocol/procedures.md 5.2), derived from what was sent and received. */
const char *conn_state_name_locked(struct core_conn *c)
{
	switch (c->mode) {
	case CORE_MODE_HANDSHAKE:
		return "INIT";
	case CORE_MODE_FALLBACK:
		return "FALLBACK";
	case CORE_MODE_FAILED:
		return "FAILED";
	case CORE_MODE_SMC:
		break;
	}
	unsigned cl = c->cl;
	bool sent_fin = cl & (CL_SENT_C | CL_SENT_A);
	bool rcvd_fin = cl & (CL_RCVD_C | CL_RCVD_A);
	if (sent_fin && rcvd_fin)
		return "CLOSED";
	if (!c->lg)
		return c->reset_err ? "CLOSED" : "ACTIVE";
	if (cl & CL_RCVD_A)
		return "PROCESSABORT";
	if (cl & CL_SENT_A)
		return "PEERABORTWAIT";
	if (cl & (CL_SENT_C | CL_SENT_D)) {
		if (cl & CL_RCVD_C)
			return "APPFINCLOSEWAIT";
		if (cl & CL_RCVD_D)
			return (cl & CL_SENT_C) ? "PEERCLOSEWAIT2" : "APPCLOSEWAIT2";
		return "PEERCLOSEWAIT1";
	}
	if (cl & (CL_RCVD_C | CL_RCVD_D))
		return "APPCLOSEWAIT1";
	return "ACTIVE";
}

void core_conn_info(struct core_conn *c, struct core_conn_info *in)
{
	struct core_engine *e = c->eng;
	memset(in, 0, sizeof(*in));
	pthread_mutex_lock(&e->lock);
	pthread_mutex_lock(&c->lock);
	in->mode = c->mode;
	in->role = c->role;
	in->state = conn_state_name_locked(c);
	in->fallback_local = c->fb_local;
	in->fallback_peer = c->fb_peer;
	in->error = c->err ? c->err : c->reset_err;
	in->first_contact = c->first_contact;
	in->smc_version = c->v2 ? 2 : 1;
	in->lg_id = c->lg_id;
	in->link_num = c->link_num;
	in->peer_id = c->peer_id;
	in->token_local = c->token;
	in->token_peer = c->peer_token;
	in->rmbe_size = c->rmbe_size;
	in->peer_rmbe_size = c->peer_size;
	in->sndbuf_size = c->sb_size;
	if (c->peer_size) {
		in->tx_prod = abs_to_curs(c->tx_prod, c->peer_size);
		in->tx_peer_cons = abs_to_curs(c->tx_peer_cons, c->peer_size);
	}
	if (c->rmbe_size) {
		in->rx_peer_prod = abs_to_curs(c->rx_peer_prod, c->rmbe_size);
		in->rx_cons = abs_to_curs(c->rx_cons, c->rmbe_size);
		in->rx_cons_sent = abs_to_curs(c->rx_cons_sent, c->rmbe_size);
	}
	in->readable = (uint32_t)conn_readable_locked(c);
	in->close_wait = close_wait_locked(c);
	in->unacked = (uint32_t)(c->tx_prod - c->tx_peer_cons);
	in->writable = conn_writable_locked(c);
	in->at_mark = (c->urg == URG_VALID || c->urg == URG_READ) && c->urg_abs &&
		      c->urg_abs - 1 == c->rx_cons;
	in->tcp_action = c->tcp_action;
	in->bytes_sent = c->bytes_sent;
	in->bytes_received = c->bytes_received;
	in->cdc_sent = c->cdc_sent;
	in->cdc_received = c->cdc_received;
	in->sndbuf_queued = tx_sndbuf_queued(c);
	in->sndbuf_held = c->sb != NULL;
	in->corked = c->sb_hold;
	in->close_pending = c->cl_pend != 0;
	in->peer_closed = (c->cl & (CL_RCVD_C | CL_RCVD_A)) != 0;
	in->lost_wait = c->lost_wait;
	in->inq = (uint32_t)(c->rmbe ? c->rx_peer_prod - c->rx_cons : 0);
	if (c->rmbe && !c->oobinline && (c->urg == URG_VALID || c->urg == URG_READ) &&
	    c->urg_abs > c->rx_cons && c->urg_abs <= c->rx_peer_prod)
		in->inq = (uint32_t)(c->urg_abs - 1 - c->rx_cons); /* tcp_inq: urg_seq - copied_seq */
	/* lg and link are [EC]: stable under the engine lock held here. */
	/* the peer is smcr (a software device's peer always is) */
	in->soft_dev = c->link && c->link->cdev && c->link->cdev->gid.type == DEV_GID_TYPE_SOFT;
	if (c->link && c->link->qp) {
		in->qpn_local = c->link->qp->qp_num;
		in->qpn_peer = c->link->peer_qpn;
		memcpy(in->gid_local, link_gid(c->link)->gid.raw, sizeof(in->gid_local));
		memcpy(in->gid_peer, c->link->peer_gid.b, sizeof(in->gid_peer));
	}
	if (c->lg) {
		in->lg_conns = (uint16_t)c->lg->nconns;
		in->lg_links = lgr_links_active(c->lg);
	}
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&e->lock);
}

void core_conn_set_fallback(struct core_conn *c, uint32_t reason)
{
	struct core_engine *e = c->eng;
	pthread_mutex_lock(&e->lock);
	if (c->mode == CORE_MODE_HANDSHAKE)
		hs_fallback(c, reason, 0, false, false, e->last_now, false);
	pthread_mutex_unlock(&e->lock);
}

void core_conn_tcp_event(struct core_conn *c, bool rst, uint64_t now_ns)
{
	pthread_mutex_lock(&c->lock);
	if (c->lost_wait) {
		/* The peer died with its link (close_peer_lost_locked): its TCP end is ours. */
		c->lost_wait = false;
		if (rst) {
			c->err = -SMCR_E_CORE_RESET;
			c->tcp_action = CORE_TCP_RESET;
		}
		core_ev_raise(c, conn_events_locked(c) | CORE_EV_IN_NEW);
		pthread_mutex_unlock(&c->lock);
		close_maybe_finish(c, now_ns); /* fires the event */
		return;
	}
	if (!rst) {
		c->tcp_fin = true; /* a FIN alone is not the end of the SMC stream (docs/PROTOCOL.md §5) */
		pthread_mutex_unlock(&c->lock);
		return;
	}
	bool act = c->mode == CORE_MODE_SMC && !c->reset_err;
	if (act)
		close_abort_locked(c, -SMCR_E_CORE_RESET, true);
	pthread_mutex_unlock(&c->lock);
	if (act)
		close_maybe_finish(c, now_ns);
}
