/* engine.c: the engine object (one SMC-R instance per process, docs/protocol/linux-interop.md 5):
 * its devices and CQs, its peer ID, the progress loop (CQ polling, async events, timers) and the
 * event queue that reports connection readiness to the socket layer. */
#define _GNU_SOURCE
#include "core/core_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"

/* ---- randomness: PSNs and the instance number (not security relevant) ---------------- */

uint32_t core_rand32(struct core_engine *e)
{
	/* xorshift64*, advanced with a CAS so concurrent callers never share a value. */
	uint64_t old = atomic_load(&e->rand_state), x;
	do {
		x = old;
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
	} while (!atomic_compare_exchange_weak(&e->rand_state, &old, x));
	return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

static uint64_t seed64(void)
{
	uint64_t s = 0;
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
	}
	return s ? s : 0x9E3779B97F4A7C15ull;
}

/* ---- devices ----------------------------------------------------------------------------- */

/* Picks port 1 and its best GID: RoCE v1 first (what SMC-R v1 uses, docs/protocol/linux-interop.md
 * 6), else a software provider's GID or a RoCE v2 GID of an IPv4 address (::ffff:a.b.c.d,
 * routable, what Linux's SMC-R v2 uses; Soft-RoCE has only v2 GIDs, docs/parts/verbs.md),
 * else index 0 (e.g. an fe80:: link-local v2 GID); and, apart, the RoCE v2 GID SMC-R v2
 * uses (docs/parts/wire-v2.md 6): the first IPv4-mapped one, else the first v2 one. */
static int dev_setup(struct core_engine *e, struct core_dev *cd, const char *spec)
{
	int rc = dev_open(spec, &cd->dev);
	if (rc)
		return rc;
	cd->eng = e;
	cd->port_num = 1;
	rc = dev_query_device(cd->dev, &cd->attr);
	if (!rc)
		rc = dev_query_port(cd->dev, cd->port_num, &cd->port);
	if (rc)
		goto fail;
	int best = -1, best_rank = 0;
	for (uint32_t i = 0; i < cd->port.gid_tbl_len && i < 256; i++) {
		struct dev_gid_entry ge;
		if (dev_query_gid(cd->dev, cd->port_num, (int)i, &ge))
			continue;
		static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
		bool v2_ipv4 = ge.type == DEV_GID_TYPE_ROCE_V2 &&
			       memcmp(ge.gid.raw, v4mapped, sizeof v4mapped) == 0;
		if (ge.type == DEV_GID_TYPE_ROCE_V2 &&
		    (!cd->has_v2 || (v2_ipv4 && memcmp(cd->gid_v2.gid.raw, v4mapped, sizeof v4mapped)))) {
			cd->has_v2 = true;
			cd->gid_v2_index = (uint8_t)i;
			cd->gid_v2 = ge;
		}
		int rank = ge.type == DEV_GID_TYPE_ROCE_V1		? 3
			   : ge.type == DEV_GID_TYPE_SOFT || v2_ipv4 ? 2
								     : 1;
		if (rank > best_rank) {
			best = (int)i;
			best_rank = rank;
			cd->gid = ge;
		}
	}
	if (best < 0) {
		rc = -SMCR_E_CORE_NOSMCRDEV;
		goto fail;
	}
	cd->gid_index = (uint8_t)best;
	rc = dev_create_cq(cd->dev, CORE_CQE_PER_DEV, cd, &cd->cq);
	if (rc)
		goto fail;
	return 0;
fail:
	dev_close(cd->dev);
	cd->dev = NULL;
	return rc;
}

static void dev_teardown(struct core_dev *cd)
{
	if (!cd->dev)
		return;
	if (cd->cq && dev_destroy_cq(cd->cq))
		LOG_WARN(CORE_UNIT, "CQ of %s still busy at engine free", cd->attr.name);
	dev_close(cd->dev);
	cd->dev = NULL;
}

/* ---- engine lifetime ------------------------------------------------------------------- */

static uint64_t dflt(uint64_t v, uint64_t d) { return v ? v : d; }

int core_engine_new(const struct core_engine_params *p, struct core_engine **out)
{
	struct core_engine *e = calloc(1, sizeof(*e));
	if (!e)
		return -SMCR_E_NOMEM;
	e->p = *p;
	e->p.devices = NULL;	/* the caller's strings are not kept */
	e->p.ndevices = 0;
	e->p.clc_wait_ns = dflt(p->clc_wait_ns, CORE_CLC_WAIT_NS);
	e->p.clc_wait_short_ns = dflt(p->clc_wait_short_ns, CORE_CLC_WAIT_SHORT_NS);
	e->p.llc_wait_ns = dflt(p->llc_wait_ns, CORE_LLC_WAIT_NS);
	e->p.llc_wait_first_ns = dflt(p->llc_wait_first_ns, CORE_LLC_WAIT_FIRST_NS);
	e->p.testlink_ns = dflt(p->testlink_ns, CORE_TESTLINK_NS);
	e->p.lg_free_srv_ns = dflt(p->lg_free_srv_ns, CORE_LG_FREE_SRV_NS);
	e->p.lg_free_clnt_ns = dflt(p->lg_free_clnt_ns, CORE_LG_FREE_CLNT_NS);
	e->p.close_wait_ns = dflt(p->close_wait_ns, CORE_CLOSE_WAIT_NS);
	if (!p->conns_per_lg || p->conns_per_lg > CORE_CONNS_PER_LG_MAX)
		e->p.conns_per_lg = CORE_CONNS_PER_LG_MAX;
	e->p.rmbe_auto_budget = dflt(p->rmbe_auto_budget, CORE_RMBE_AUTO_BUDGET);
	pthread_mutex_init(&e->poll_lock, NULL);
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->ev_lock, NULL);
	atomic_init(&e->refcnt, 1);
	atomic_init(&e->rand_state, seed64());
	core_timers_init(&e->timers);
	e->next_lg_id = 1;
	e->next_link_id = 1;

	for (int i = 0; i < p->ndevices && e->ndevs < CORE_MAX_DEVS; i++) {
		int rc = dev_setup(e, &e->devs[e->ndevs], p->devices[i]);
		if (rc) {
			LOG_WARN(CORE_UNIT, "device %s not usable: %s", p->devices[i], smcr_err_msg(rc));
			continue;
		}
		e->ndevs++;
	}
	if (e->ndevs == 0) {
		pthread_mutex_destroy(&e->poll_lock);
		pthread_mutex_destroy(&e->lock);
		pthread_mutex_destroy(&e->ev_lock);
		free(e);
		return -SMCR_E_DEV_NO_DEVICE;
	}
	/* Peer ID: 2-byte instance number + the MAC of our first port
	 * (docs/protocol/wire-formats.md 2.3). */
	e->peer_id.instance = p->instance;
	while (e->peer_id.instance == 0)
		e->peer_id.instance = (uint16_t)core_rand32(e);
	memcpy(e->peer_id.mac.b, e->devs[0].gid.mac, WIRE_MAC_LEN);
	LOG_INFO(CORE_UNIT, "engine up: peer ID %016llx, %d device(s)",
		 (unsigned long long)wire_peer_id_u64(&e->peer_id), e->ndevs);
	*out = e;
	return 0;
}

void core_engine_put(struct core_engine *e)
{
	if (atomic_fetch_sub(&e->refcnt, 1) != 1)
		return;
	pthread_mutex_destroy(&e->poll_lock);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->ev_lock);
	core_timers_free(&e->timers);
	free(e);
}

/* Processes completions of one CQ until it is empty (eng->lock held). */
static int poll_dev(struct core_engine *e, struct core_dev *cd, uint64_t now)
{
	struct dev_wc wc[32];
	int total = 0;
	for (;;) {
		int n = dev_poll_cq(cd->cq, 32, wc);
		if (n < 0) {
			SMCR_LOG_RL(SMCR_LOG_ERROR, CORE_UNIT, "poll_cq: %s", smcr_err_msg(n));
			break;
		}
		for (int i = 0; i < n; i++)
			link_handle_wc(e, &wc[i], now);
		total += n;
		if (n < 32)
			break;
	}
	link_run_wakes(e);
	return total;
}

static int async_events(struct core_engine *e, struct core_dev *cd, uint64_t now)
{
	struct dev_async_event ev;
	int n = 0;
	while (dev_get_async_event(cd->dev, &ev) == 0) {
		n++;
		switch (ev.type) {
		case DEV_EVENT_QP_FATAL:
		case DEV_EVENT_QP_REQ_ERR:
		case DEV_EVENT_QP_ACCESS_ERR:
			/* Completions that came before the error are the peer's last messages (a
			 * CDC announcing data it wrote): apply them before the link goes down. */
			(void)poll_dev(e, cd, now);
			for (struct core_link *l = e->links; l; l = l->next) {
				if (l->cdev == cd && l->qp && l->qp->qp_num == ev.qp_num) {
					if (l->state != CORE_LINK_DOWN)
						LOG_WARN(CORE_UNIT, "link %u: %s", l->id,
							 dev_event_type_str(ev.type));
					link_down(l, -SMCR_E_CORE_LINK_DOWN, CORE_DOWN_EVENT, now);
					break;
				}
			}
			break;
		case DEV_EVENT_PORT_ERR:
		case DEV_EVENT_DEVICE_FATAL:
		case DEV_EVENT_CQ_ERR:
			/* Every link on the device is lost (docs/protocol/procedures.md 3.6). */
			LOG_WARN(CORE_UNIT, "device %s: %s", cd->attr.name, dev_event_type_str(ev.type));
			for (struct core_link *l = e->links; l; l = l->next)
				if (l->cdev == cd)
					link_down(l, -SMCR_E_CORE_LINK_DOWN, CORE_DOWN_EVENT, now);
			break;
		case DEV_EVENT_PORT_ACTIVE:
			/* a path is back: single link groups try for a second link (addlink.c) */
			al_relink(e, now);
			break;
		case DEV_EVENT_COMM_EST:
			break;
		}
	}
	return n;
}

/* The body of progress: eng->poll_lock held by the caller. */
static int progress_locked(struct core_engine *e, uint64_t now)
{
	int n = 0;
	pthread_mutex_lock(&e->lock);
	if (now > e->last_now)
		e->last_now = now;
	if (!e->freed) {
		for (int i = 0; i < e->ndevs; i++) {
			struct core_dev *cd = &e->devs[i];
			/* CQ events are consumed by prepare_sleep only: a thread that merely
			 * polls must not eat the wakeup of the thread sleeping on comp_fd. */
			n += poll_dev(e, cd, now);
			n += async_events(e, cd, now);
		}
		rx_fo_checks(e, now);	/* every CQ polled: judge deferred validations */
		/* only the timers due (timer.h): an idle engine looks at the heap's top */
		n += (int)core_timers_expire(&e->timers, now);
		lgr_free_dead(e, now, false);
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}

/* Until when the spinners keep the CQs unarmed (a spin that lost its CPU, or whose
 * holder left, stops counting then). eng->lock held. */
static uint64_t spin_end_locked(const struct core_engine *e)
{
	return e->spin_since + CORE_SPIN_GRACE_NS;
}

int core_engine_progress(struct core_engine *e, uint64_t now_ns, uint64_t *next_deadline_ns)
{
	int n = 0;
	if (pthread_mutex_trylock(&e->poll_lock) == 0) {
		n = progress_locked(e, now_ns);
		pthread_mutex_unlock(&e->poll_lock);
	}
	core_ev_fire(e);
	if (next_deadline_ns) {
		pthread_mutex_lock(&e->lock);
		uint64_t next = core_timers_next(&e->timers);
		/* A spinner keeps the CQs unarmed: look again when its grace is over, in case
		 * it lost its CPU (prepare_sleep arms then). */
		/* Only while the grace is ahead: once it passed, prepare_sleep arms anyway,
		 * and a deadline in the past made the progress thread poll with a zero
		 * timeout for as long as the spinner stayed descheduled (epoll_wait(.., 0)
		 * in a loop, fighting the spinner for the locks). */
		uint64_t g = spin_end_locked(e);
		if (e->spinners && g > now_ns && g < next)
			next = g;
		/* A lease holds the arms off until its bound: look (and arm) then. */
		if (e->lease_until > now_ns && e->lease_until < next)
			next = e->lease_until;
		*next_deadline_ns = next;
		pthread_mutex_unlock(&e->lock);
	}
	return n;
}

/* The arm for a sleeper: solicited receives only (every LLC and CDC is sent solicited,
 * docs/protocol/linux-interop.md 6; error completions fire either way), unless a send completion
 * has somebody waiting for it: a sender short of send slots, or a dead LG draining before its
 * QP goes. So a send completion (shm: at every post) wakes no one. eng->lock held. */
static int arm_solicited_locked(struct core_engine *e, const struct core_dev *cd)
{
	for (struct core_link *l = e->links; l; l = l->next) {
		if (l->cdev != cd)
			continue;
		pthread_mutex_lock(&l->tx_lock);
		bool any = l->slot_waiters ||
			   (l->lg->state == CORE_LG_DEAD && l->slots_free != CORE_SEND_SLOTS);
		pthread_mutex_unlock(&l->tx_lock);
		if (any)
			return 0;
	}
	return 1;
}

/* Whether CQs are to be armed now: not while a thread spins (it polls), unless that spin
 * has lasted beyond its grace; not within a lease (core_engine_lease). Against last_now:
 * the engine reads no clock; the thread that sleeps on the CQ fds runs progress (which
 * advances last_now) before it arms. eng->lock held. */
static bool arm_allowed_locked(const struct core_engine *e)
{
	if (e->spinners && e->last_now <= spin_end_locked(e))
		return false;
	return e->lease_until <= e->last_now;
}

/* Arms every CQ for a sleeper. eng->lock held. */
static void arm_all_locked(struct core_engine *e)
{
	for (int i = 0; i < e->ndevs; i++)
		if (dev_req_notify_cq(e->devs[i].cq, arm_solicited_locked(e, &e->devs[i])))
			SMCR_LOG_RL(SMCR_LOG_WARN, CORE_UNIT, "CQ arm failed");
}

static int recheck(struct core_engine *e);

int core_engine_lease(struct core_engine *e, uint64_t now_ns, uint64_t until_ns)
{
	bool armed = false;
	pthread_mutex_lock(&e->lock);
	if (!e->freed) {
		if (now_ns > e->last_now)
			e->last_now = now_ns;
		if (until_ns > now_ns) {
			bool leased = e->lease_until > now_ns;
			e->lease_until = until_ns;
			/* a lease that begins: the holder polls, completions need not write the
			 * comp fds (no eventfd write by the peer, no wake-up of the sleeper) */
			for (int i = 0; !leased && i < e->ndevs; i++) {
				int rc = dev_disarm_cq(e->devs[i].cq);
				(void)rc; /* NOTSUP: the arm stays (a wake-up nobody needs) */
			}
		} else {
			e->lease_until = 0;
			if (arm_allowed_locked(e)) {
				arm_all_locked(e);
				armed = true;
			}
		}
	}
	pthread_mutex_unlock(&e->lock);
	int more = armed ? recheck(e) : 0;
	core_ev_fire(e);
	return more;
}

/* After an arm: whatever completed before it does not wake the fd, so poll once more.
 * Returns 1 if completions were handled. Waits for a concurrent poller (it finishes a
 * bounded CQ drain) rather than assuming it saw everything. No core lock held. */
static int recheck(struct core_engine *e)
{
	int more = 0;
	pthread_mutex_lock(&e->poll_lock);
	pthread_mutex_lock(&e->lock);
	if (!e->freed) {
		struct dev_wc wc[32];
		for (int i = 0; i < e->ndevs; i++) {
			int k;
			while ((k = dev_poll_cq(e->devs[i].cq, 32, wc)) > 0) {
				for (int j = 0; j < k; j++)
					link_handle_wc(e, &wc[j], e->last_now);
				more = 1;
			}
		}
		link_run_wakes(e);
	}
	pthread_mutex_unlock(&e->lock);
	pthread_mutex_unlock(&e->poll_lock);
	return more;
}

int core_engine_prepare_sleep(struct core_engine *e)
{
	int more = 0;
	pthread_mutex_lock(&e->lock);
	if (!e->freed) {
		bool arm = arm_allowed_locked(e);
		for (int i = 0; i < e->ndevs; i++) {
			/* The event that woke us (if any). One call: a completion fd is an
			 * eventfd whose read takes every notification at once (shm, emu), and
			 * one arm yields at most one event; a second call was a read() answered
			 * EAGAIN on every wake-up. */
			int ev_rc = dev_get_cq_event(e->devs[i].cq);
			(void)ev_rc; /* -AGAIN: nothing was queued */
			if (arm && dev_req_notify_cq(e->devs[i].cq,
						     arm_solicited_locked(e, &e->devs[i])))
				more = 1;
		}
	}
	pthread_mutex_unlock(&e->lock);
	if (recheck(e))
		more = 1;
	core_ev_fire(e);
	return more;
}

void core_engine_spin_begin(struct core_engine *e, uint64_t now_ns)
{
	pthread_mutex_lock(&e->lock);
	if (e->spinners++ == 0 && !e->freed) {
		e->spin_since = now_ns;
		/* The spinner polls: completions need not write the comp fds (no eventfd write
		 * by the peer, no wake-up of the progress thread) until spin_end arms again. */
		for (int i = 0; i < e->ndevs; i++) {
			int rc = dev_disarm_cq(e->devs[i].cq);
			(void)rc;	/* NOTSUP: the arm stays (a wake-up nobody needs, no more) */
		}
	}
	pthread_mutex_unlock(&e->lock);
}

void core_engine_spin_end(struct core_engine *e)
{
	bool armed = false;
	pthread_mutex_lock(&e->lock);
	if (e->spinners && --e->spinners == 0 && !e->freed) {
		for (int i = 0; i < e->ndevs; i++)
			if (dev_req_notify_cq(e->devs[i].cq, arm_solicited_locked(e, &e->devs[i])))
				SMCR_LOG_RL(SMCR_LOG_WARN, CORE_UNIT, "CQ arm failed");
		armed = true;
	}
	pthread_mutex_unlock(&e->lock);
	if (armed)
		(void)recheck(e);
	core_ev_fire(e);
}

bool core_engine_spin_live(struct core_engine *e, uint64_t now_ns, uint64_t *until_ns)
{
	pthread_mutex_lock(&e->lock);
	uint64_t end = spin_end_locked(e);
	/* an engine timer due already: a round of our own (the holder runs timers only at
	 * its calls; returning a deadline in the past would make the caller spin) */
	if (!e->spinners || e->lease_until > end)
		end = e->lease_until; /* a lease: its holder polls until then */
	bool live = !e->freed && (e->spinners || e->lease_until) && now_ns < end &&
		    core_timers_next(&e->timers) > now_ns;
	if (live) {
		/* The wake-up that brought us here, if it was a CQ event (armed before the
		 * spin began): taken, or a level-triggered epoll_wait returns at once again.
		 * The spinner polls the CQ itself. */
		for (int i = 0; i < e->ndevs; i++) {
			int ev_rc = dev_get_cq_event(e->devs[i].cq);
			(void)ev_rc; /* -AGAIN: the wake-up was a timer */
		}
		uint64_t next = core_timers_next(&e->timers);
		*until_ns = next < end ? next : end;
	}
	pthread_mutex_unlock(&e->lock);
	return live;
}

bool core_engine_spinning(struct core_engine *e)
{
	pthread_mutex_lock(&e->lock);
	bool sp = !e->freed && !arm_allowed_locked(e);
	pthread_mutex_unlock(&e->lock);
	return sp;
}

void core_reap(struct core_engine *e)
{
	pthread_mutex_lock(&e->lock);
	/* The starved links' "no free slot" clocks start (llc_proc.c noslot_timer): only here,
	 * where a sender found no slot, so an idle engine scans nothing. */
	for (struct core_link *l = e->links; l && !e->freed; l = l->next) {
		if (l->noslot_since || l->state != CORE_LINK_ACTIVE)
			continue;
		pthread_mutex_lock(&l->tx_lock);
		bool starved = l->slot_waiters;
		pthread_mutex_unlock(&l->tx_lock);
		if (starved) {
			l->noslot_since = e->last_now ? e->last_now : 1;
			lgr_timer_at(l->lg, l->noslot_since + CORE_NOSLOT_NS);
		}
	}
	if (!e->freed && arm_allowed_locked(e))
		for (int i = 0; i < e->ndevs; i++)
			if (dev_req_notify_cq(e->devs[i].cq, 0))
				SMCR_LOG_RL(SMCR_LOG_WARN, CORE_UNIT, "CQ arm failed");
	pthread_mutex_unlock(&e->lock);
	if (pthread_mutex_trylock(&e->poll_lock) == 0) {
		(void)progress_locked(e, e->last_now);
		pthread_mutex_unlock(&e->poll_lock);
	}
	core_ev_fire(e);
}

int core_engine_fds(const struct core_engine *e, int *fds, int max)
{
	int n = 0;
	for (int i = 0; i < e->ndevs; i++) {
		int two[2] = { e->devs[i].cq->comp_fd, e->devs[i].dev->async_fd };
		for (int k = 0; k < 2; k++) {
			if (two[k] < 0)
				continue;
			if (fds && n < max)
				fds[n] = two[k];
			n++;
		}
	}
	return fds && n > max ? max : n;
}

int core_engine_cq_fds(const struct core_engine *e, int *fds, int max)
{
	int n = 0;
	for (int i = 0; i < e->ndevs; i++) {
		int fd = e->devs[i].cq->comp_fd;
		if (fd < 0)
			continue;
		if (fds && n < max)
			fds[n] = fd;
		n++;
	}
	return fds && n > max ? max : n;
}

struct wire_peer_id core_engine_peer_id(const struct core_engine *e) { return e->peer_id; }

void core_engine_stats(struct core_engine *e, struct core_engine_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&e->lock);
	st->peer_id = e->peer_id;
	st->ndevices = (unsigned)e->ndevs;
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next) {
		st->lgs++;
		if (lg->nconns == 0)
			st->lgs_idle++;
		for (int i = 0; i < CORE_LG_LINKS; i++)
			st->links += lg->links[i] != NULL;
		for (struct core_rmb *r = lg->rmbs; r; r = r->next) {
			st->rmbs++;
			st->rmb_bytes += r->size;
		}
	}
	for (struct core_conn *c = e->conns; c; c = c->all_next)
		st->conns++;
	st->lgs_created = e->lgs_created;
	st->lgs_freed = e->lgs_freed;
	st->conns_created = e->conns_created;
	st->conns_freed = e->conns_freed;
	st->cdc_rx_dropped = atomic_load(&e->cdc_rx_dropped);
	st->llc_rx_dropped = atomic_load(&e->llc_rx_dropped);
	st->links_added = e->links_added;
	st->failovers = e->failovers;
	for (int i = 0; i < CORE_DOWN_NREASONS && i < 6; i++)
		st->failover_reason[i] = e->failover_reason[i];
	pthread_mutex_unlock(&e->lock);
}

_Static_assert(CORE_LGR_INFO_LINKS >= CORE_LG_LINKS, "every link of a group fits");

static const char *lgr_state_name(enum core_lgr_state s)
{
	return s == CORE_LG_SETUP ? "SETUP" : s == CORE_LG_ACTIVE ? "ACTIVE" : "DEAD";
}

static const char *link_state_name(enum core_link_state s)
{
	return s == CORE_LINK_ACTIVE ? "ACTIVE" : s == CORE_LINK_DOWN ? "DOWN" : "SETUP";
}

int core_lgr_list(struct core_engine *e, struct core_lgr_info *out, int max)
{
	int n = 0;
	pthread_mutex_lock(&e->lock);
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next, n++) {
		if (n >= max)
			continue;
		struct core_lgr_info *o = &out[n];
		memset(o, 0, sizeof(*o));
		o->id = lg->id;
		o->role = lg->role;
		o->state = lgr_state_name(lg->state);
		o->smc_version = lg->v2 ? 2 : 1;
		o->conns = (uint16_t)lg->nconns;
		o->failovers = lg->failovers;
		for (int i = 0; i < CORE_LG_LINKS; i++) {
			const struct core_link *l = lg->links[i];
			if (!l)
				continue;
			struct core_link_info *li = &o->links[o->nlinks++];
			li->link_num = l->link_num;
			li->state = link_state_name(l->state);
			li->qpn_local = l->qp ? l->qp->qp_num : 0;
			li->qpn_peer = l->peer_qpn;
			memcpy(li->gid_local, link_gid(l)->gid.raw, sizeof(li->gid_local));
			memcpy(li->gid_peer, l->peer_gid.b, sizeof(li->gid_peer));
			snprintf(li->dev, sizeof(li->dev), "%s", l->cdev->attr.name);
			for (unsigned s = 1; s < CORE_LG_SLOTS; s++)
				li->conns += lg->slots[s] && lg->slots[s]->link == l;
		}
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}

void core_engine_counters(const struct core_engine *e, struct core_engine_counters *ct)
{
#define CTR_LOAD(f) atomic_load_explicit(&e->f, memory_order_relaxed)
	ct->cdc_sent = CTR_LOAD(ctr_cdc_tx);
	ct->cdc_received = CTR_LOAD(ctr_cdc_rx);
	ct->cdc_dropped = CTR_LOAD(cdc_rx_dropped);
	ct->llc_sent = CTR_LOAD(ctr_llc_tx);
	ct->llc_received = CTR_LOAD(ctr_llc_rx);
	ct->llc_dropped = CTR_LOAD(llc_rx_dropped);
	ct->rmbe_full = CTR_LOAD(ctr_rmbe_full);
	ct->window_stall = CTR_LOAD(ctr_window_stall);
	ct->links_added = CTR_LOAD(ctr_links_added);
	ct->links_failed = CTR_LOAD(ctr_links_failed);
	ct->failovers = CTR_LOAD(ctr_failovers);
	ct->conns_moved = CTR_LOAD(ctr_conns_moved);
	ct->delete_link_sent = CTR_LOAD(ctr_dl_tx);
	ct->delete_link_received = CTR_LOAD(ctr_dl_rx);
#undef CTR_LOAD
}

/* Ends every link group in order (DELETE LINK all, orderly, reason "program initiated
 * termination": what Linux sends when it frees a link group) and gives those messages up
 * to 100 ms to leave. Caller holds poll_lock and lock. */
static void end_lgs_locked(struct core_engine *e, uint64_t now)
{
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next)
		lgr_terminate(lg, LLC_DEL_PROG_INIT_TERM, true, true, -SMCR_E_CORE_RESET, now);
	/* Handshakes without an LG fail too. */
	for (struct core_conn *c = e->conns; c; c = c->all_next)
		if (c->hs != HS_DONE_SMC && c->hs != HS_DONE_FALLBACK && c->hs != HS_DONE_FAILED)
			hs_lg_failed(c, -SMCR_E_CORE_RESET, now);
	/* Give the DELETE LINK messages a moment to leave (bounded: 100 ms). */
	uint64_t until = smcr_now_ns() + 100 * SMCR_NS_PER_MS;
	for (;;) {
		bool busy = false;
		for (int i = 0; i < e->ndevs; i++)
			poll_dev(e, &e->devs[i], now);
		for (struct core_link *l = e->links; l; l = l->next) {
			pthread_mutex_lock(&l->tx_lock);
			if (l->slots_free != CORE_SEND_SLOTS && l->qp &&
			    atomic_load(&l->qp->state) != DEV_QPS_ERR)
				busy = true;
			pthread_mutex_unlock(&l->tx_lock);
		}
		if (!busy || smcr_now_ns() > until)
			break;
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
}

void core_engine_end_lgs(struct core_engine *e, uint64_t now)
{
	pthread_mutex_lock(&e->poll_lock);
	pthread_mutex_lock(&e->lock);
	if (now < e->last_now)
		now = e->last_now;
	end_lgs_locked(e, now);
	lgr_free_dead(e, now, false);
	pthread_mutex_unlock(&e->lock);
	pthread_mutex_unlock(&e->poll_lock);
	core_ev_fire(e);
}

void core_engine_free(struct core_engine *e)
{
	pthread_mutex_lock(&e->poll_lock);
	pthread_mutex_lock(&e->lock);
	uint64_t now = e->last_now;
	rx_fo_checks(e, now);	/* their references */
	end_lgs_locked(e, now);
	lgr_free_dead(e, now, true);
	e->freed = true;
	for (int i = 0; i < e->ndevs; i++)
		dev_teardown(&e->devs[i]);
	/* Conns that are released and detached leave the list now. */
	struct core_conn *c = e->conns, *nx;
	for (; c; c = nx) {
		nx = c->all_next;
		if (c->released && !c->lg) {
			if (c->all_prev)
				c->all_prev->all_next = c->all_next;
			else
				e->conns = c->all_next;
			if (c->all_next)
				c->all_next->all_prev = c->all_prev;
			c->all_next = c->all_prev = NULL;
			core_timers_cancel(&e->timers, &c->tmr);
			core_timers_unreserve(&e->timers);
			conn_put(c);
		}
	}
	pthread_mutex_unlock(&e->lock);
	pthread_mutex_unlock(&e->poll_lock);
	core_ev_fire(e);
	core_engine_put(e);
}

/* ---- events ------------------------------------------------------------------------------ */

void core_ev_raise(struct core_conn *c, unsigned bits)
{
	struct core_engine *e = c->eng;
	pthread_mutex_lock(&e->ev_lock);
	c->ev_raised |= bits;
	if (!c->ev_queued) {
		c->ev_queued = true;
		conn_hold(c);	/* put by core_ev_fire */
		c->ev_next = e->ev_head;
		e->ev_head = c;
		atomic_store_explicit(&e->ev_any, true, memory_order_release);
	}
	pthread_mutex_unlock(&e->ev_lock);
}

void core_ev_fire(struct core_engine *e)
{
	if (!atomic_load_explicit(&e->ev_any, memory_order_acquire))
		return;
	pthread_mutex_lock(&e->ev_lock);
	struct core_conn *list = e->ev_head;
	e->ev_head = NULL;
	atomic_store_explicit(&e->ev_any, false, memory_order_relaxed);
	pthread_mutex_unlock(&e->ev_lock);
	while (list) {
		struct core_conn *c = list;
		list = c->ev_next;
		pthread_mutex_lock(&c->cb_lock);
		pthread_mutex_lock(&e->ev_lock);
		unsigned raised = c->ev_raised;
		c->ev_raised = 0;
		c->ev_queued = false;
		c->ev_next = NULL;
		pthread_mutex_unlock(&e->ev_lock);
		if (c->cb) {
			pthread_mutex_lock(&c->lock);
			unsigned level = conn_events_locked(c);
			pthread_mutex_unlock(&c->lock);
			c->cb(c->cb_ctx, c, level, raised);
		}
		pthread_mutex_unlock(&c->cb_lock);
		conn_put(c);
	}
}
