/* close.c: closing a connection (docs/protocol/procedures.md 5; RFC 7609 4.8): shutdown(SHUT_WR)
 * sends D, close() sends C, or A when unread data is left, on SO_LINGER 0, or after the peer
 * aborted; errors abort with A. A connection whose close exchange is complete (we sent C/A and the
 * peer sent C/A) leaves its LG and its RMB returns to the pool; one whose peer never closes
 * is given up after close_wait_ns (RMB quarantined, see lgr_detach). */
#include "core/core_int.h"

#include <sys/socket.h>

void close_abort_locked(struct core_conn *c, int err, bool send_a)
{
	tx_discard_locked(c);	/* an abort drops what the send ring holds (5.4) */
	if (send_a && !(c->cl & CL_SENT_A)) {
		c->cl |= CL_SENT_A;
		(void)tx_cdc_locked(c, false);
	}
	if (!c->reset_err) {
		c->reset_err = err;
		c->err = err;
	}
	c->tcp_action = CORE_TCP_RESET;
	if (c->mode == CORE_MODE_SMC)
		core_ev_raise(c, CORE_EV_IN | CORE_EV_IN_NEW | CORE_EV_OUT | CORE_EV_ERR | CORE_EV_HUP |
					 CORE_EV_RDHUP);
}

/* A peer process that dies takes its link with it (its QP's error, a socket hang-up) and
 * sends no C or A; its kernel ends its TCP connection: FIN when its socket held nothing
 * unread, else RST. The survivor over TCP reads every byte that reached it, then EOF or
 * ECONNRESET accordingly. Here: every byte written into our RMBE and announced by a CDC
 * is data (the RMBE stays mapped until the connection is freed: keep_rmem); the end is
 * a reset at once when the peer had not read all we sent (what its socket would have held
 * unread) or our bytes can no longer reach it, EOF when its C or D came or its TCP FIN
 * did, and otherwise waits for the TCP connection's FIN or RST (core_conn_tcp_event). */
void close_peer_lost_locked(struct core_conn *c, int err)
{
	if (c->mode != CORE_MODE_SMC)
		return;
	if (c->reset_err || (c->cl & CL_RCVD_A)) {
		close_abort_locked(c, err, false);
		return;
	}
	c->keep_rmem = true;
	/* bytes a failover was writing again are not delivered either (failover.c) */
	bool unsent = c->sb_tail != c->sb_head || c->cl_pend || c->tx_replay_end > c->tx_prod;
	if (c->tx_prod > c->tx_peer_cons || unsent) {
		close_abort_locked(c, -SMCR_E_CORE_RESET, false);
		return;
	}
	tx_discard_locked(c);
	c->reset_err = err;	/* dead: nothing more is sent or taken */
	c->err = 0;
	c->tcp_action = CORE_TCP_SHUTDOWN;
	unsigned raise = conn_events_locked(c) | CORE_EV_IN_NEW;
	if (!(c->cl & (CL_RCVD_C | CL_RCVD_D)) && !c->tcp_fin) {
		c->lost_wait = true;
		/* Raised, not in the level: tells the socket layer to watch for the FIN. */
		raise |= CORE_EV_RDHUP;
	}
	core_ev_raise(c, raise);
}

/* Sent means posted: CL_SENT_C / CL_SENT_A is set before the CDC finds a send slot, and a
 * CDC that found none (upd_pending) goes out when one frees, through the LG slot list
 * (tx.c wake_one). A connection detached before that never sent its C: the peer then held
 * it, and its RMB, for close_wait_ns (seen: 1000 closes back to back on 16 slots left
 * about 890 of the peer's connections waiting). */
bool close_sent_locked(const struct core_conn *c)
{
	return c->app_closed && (c->cl & (CL_SENT_C | CL_SENT_A));
}

bool close_finished_locked(const struct core_conn *c)
{
	return close_sent_locked(c) && !c->upd_pending && (c->cl & (CL_RCVD_C | CL_RCVD_A));
}

/* Quiet final C (docs/protocol/procedures.md 5.1, RFC 7609 4.8.1 close procedures).
 * The passive closer's C, sent after the peer's C, completes the exchange, and nobody at
 * the peer waits for it: the peer's C says its program closed the socket (smcr sends C
 * only from core_conn_close; linger waits only for our own C to go out, api.c), so the
 * CDC only lets the peer's engine release the connection's RMB. Sent solicited (every
 * other CDC is, link_slot_send_wr) it wakes the peer's progress thread once per
 * connection: on the connect test that was the server's most frequent wake-up (0.9 per
 * connection). Sent unsolicited it wakes nobody while the
 * peer's CQs are armed for solicited events (the usual arm, engine.c
 * arm_solicited_locked); it is taken by the peer's next CQ poll: any spin, a progress
 * turn for anything else, or the socket layer's close reaper, which polls within a bound
 * while core_engine_close_waits() > 0 (sock/api.c). Only on a software device (shm, emu):
 * their peers are smcr; a Linux peer over verbs arms for solicited events
 * (docs/protocol/linux-interop.md 6) and has no such reaper, so it gets the C solicited as before.
 * DEVIATION from Linux (which sends every CDC solicited): the peer's release of the
 * connection may come up to the reaper's bound later. $SMCR_CLOSE_SOLICITED=1 turns it
 * off (e->p.close_solicited). */
bool close_cdc_quiet_locked(const struct core_conn *c)
{
	return !c->eng->p.close_solicited && (c->cl & CL_SENT_C) && (c->cl & CL_RCVD_C) &&
	       !(c->cl & (CL_SENT_A | CL_RCVD_A)) && c->link && c->link->cdev &&
	       c->link->cdev->gid.type == DEV_GID_TYPE_SOFT;
}

bool close_wait_locked(const struct core_conn *c)
{
	return c->app_closed && c->lg && c->mode == CORE_MODE_SMC && !close_finished_locked(c);
}

unsigned core_engine_close_waits(struct core_engine *e)
{
	unsigned n = 0;
	pthread_mutex_lock(&e->lock);
	for (struct core_conn *c = e->conns; c; c = c->all_next) {
		pthread_mutex_lock(&c->lock);
		n += close_wait_locked(c);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}

void close_maybe_finish_elocked(struct core_conn *c, uint64_t now)
{
	struct core_engine *e = c->eng;
	if (!c->lg) {
		conn_maybe_unlink(c);
		return;
	}
	pthread_mutex_lock(&c->lock);
	bool fin = close_finished_locked(c);
	bool wait = !fin && close_sent_locked(c);
	if (c->app_closed && c->cl_pend && c->giveup_deadline == CORE_NEVER) {
		/* Closed with queued bytes: the engine writes them in the background; a peer
		 * that never makes room gets an A after close_wait_ns (docs/parts/sndbuf.md). */
		c->giveup_deadline = now + e->p.close_wait_ns;
		uint64_t d = atomic_load_explicit(&c->tx_deadline, memory_order_relaxed);
		if (c->giveup_deadline < d)
			atomic_store_explicit(&c->tx_deadline, c->giveup_deadline,
					      memory_order_relaxed);
		conn_timer_at(c, c->giveup_deadline);
	}
	pthread_mutex_unlock(&c->lock);
	if (fin) {
		/* Both sides closed: the peer writes no more, the RMB can serve another conn. */
		lgr_detach(c, true, now);
		return;
	}
	if (wait && c->close_deadline == CORE_NEVER) {
		c->close_deadline = now + e->p.close_wait_ns;
		conn_timer_at(c, c->close_deadline);
	}
}

void close_maybe_finish(struct core_conn *c, uint64_t now)
{
	struct core_engine *e = c->eng;
	conn_hold(c);
	pthread_mutex_lock(&e->lock);
	close_maybe_finish_elocked(c, now);
	pthread_mutex_unlock(&e->lock);
	core_ev_fire(e);
	conn_put(c);
}

int core_conn_shutdown(struct core_conn *c, int how, uint64_t now_ns)
{
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -SMCR_E_INVAL;
	pthread_mutex_lock(&c->lock);
	if (c->mode != CORE_MODE_SMC) {
		pthread_mutex_unlock(&c->lock);
		return -SMCR_E_CORE_NOTCONN;
	}
	if (how == SHUT_RD || how == SHUT_RDWR)
		c->shut_rd = true;
	unsigned bits = 0;
	if ((how == SHUT_WR || how == SHUT_RDWR) &&
	    !(c->cl & (CL_SENT_D | CL_SENT_C | CL_SENT_A)) && !c->cl_pend && !c->reset_err) {
		/* 5.1: D after all pending data, at most once: held bytes are pushed and the D
		 * goes with the flush that empties the send ring (at once if it is empty). */
		c->cl_pend = CL_SENT_D;
		bits = tx_flush_locked(c, true);
	}
	pthread_mutex_unlock(&c->lock);
	if (bits & TX_FLUSH_CLOSE)
		close_maybe_finish(c, now_ns);
	return 0;
}

void core_conn_close(struct core_conn *c, bool abort, uint64_t now_ns)
{
	pthread_mutex_lock(&c->lock);
	if (c->app_closed) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->app_closed = true;
	if (c->mode == CORE_MODE_SMC && !(c->cl & (CL_SENT_C | CL_SENT_A))) {
		/* 5.1: A if unread data is left (Linux smc_close_final), on SO_LINGER 0, or in
		 * PROCESSABORT (the peer aborted: our A goes now); C otherwise. */
		if (abort || conn_readable_locked(c) > 0 || (c->cl & CL_RCVD_A) || c->reset_err) {
			tx_discard_locked(c);	/* the ring's bytes are dropped (5.4) */
			c->cl |= CL_SENT_A;
			c->tcp_action = CORE_TCP_RESET;
			(void)tx_cdc_locked(c, false);
		} else {
			/* C after every queued byte (5.1): with the ring empty at once, else
			 * when the flush that empties it runs (rx, slot completions, timers).
			 * The TCP side is shut now anyway: the FIN may come before the C
			 * (docs/protocol/linux-interop.md 8), and a peer takes neither as end of
			 * data. */
			c->cl_pend |= CL_SENT_C;
			c->tcp_action = CORE_TCP_SHUTDOWN;
			(void)tx_flush_locked(c, true);
			if (c->cl_pend && c->reset_err)
				c->cl_pend = 0;	/* the flush failed the connection */
		}
		c->shut_rd = true;
	} else if (c->mode == CORE_MODE_SMC && c->tcp_action == CORE_TCP_KEEP) {
		c->tcp_action = CORE_TCP_SHUTDOWN;
	}
	pthread_mutex_unlock(&c->lock);
	close_maybe_finish(c, now_ns);
}
