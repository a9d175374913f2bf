/* waitpol.h: the wait policy (docs/design/readiness.md section 6): how long a waiting
 * thread polls the engine before it sleeps, and until when the completion queues stay
 * unarmed after a call (the lease handed to core_engine_lease). The one home of every
 * timing decision of the socket layer's waits.
 *
 * Pure: no clock, no environment, no globals. The caller passes the times it measured
 * and the configuration it read once (sock: SMCR_BUSY_POLL_US, SO_BUSY_POLL); the state
 * lives where the caller keeps it (one struct waitpol per socket and direction, written
 * only by the thread inside a call on that socket and direction: a second thread waiting
 * on the same direction at once may lose one observation, which only delays the
 * adaptation by one wait). tests/unit/test_waitpol.c drives it on a fake clock.
 *
 * The spin adapts to what it observes:
 *   - a wait the spin caught sizes the next budget at twice that wait (bounded by
 *     spin_min_ns and spin_max_ns): a spin as long as the waits need, no longer;
 *   - a wait the spin missed but that ended soon after (within spin_max_ns) grows the
 *     budget the same way: a longer spin would have caught it;
 *   - a wait much longer than any spin (an idle connection, a peer that thinks) halves
 *     the budget, and below spin_min_ns stops spinning for a run of waits ("off"), whose
 *     length doubles at each such stop up to off_max_waits and halves at each caught
 *     wait; each run ends with one probe of spin_max_ns (a peer that answers within it
 *     brings the spin back): an idle connection spins spin_max_ns once per
 *     off_max_waits waits at most;
 *   - a spin during which the thread lost its CPU (two successive looks at the clock
 *     more than lost_gap_ns apart: the host has no spare core, the spin was taking the
 *     CPU the peer or another program needed) stops spinning the same way at once.
 * A user's busy-poll request (busy_poll_ns) is a floor under every budget, "off" too. */
#ifndef SMCR_SOCK_WAITPOL_H
#define SMCR_SOCK_WAITPOL_H

#include <stdbool.h>
#include <stdint.h>

struct waitpol_cfg {
	uint64_t spin_min_ns;	/* the shortest spin worth making */
	uint64_t spin_max_ns;	/* the longest spin ever made (unless busy_poll_ns asks more) */
	uint64_t busy_poll_ns;	/* the user's floor (SMCR_BUSY_POLL_US, SO_BUSY_POLL); 0: none */
	uint64_t lost_gap_ns;	/* a gap between two looks at the clock in a spin longer than
				   this: the spinner lost its CPU */
	unsigned off_max_waits;	/* the longest run of waits without a spin */
	uint64_t lease_max_ns;	/* the longest lease after a call (0: never lease) */
	bool waits_ours;	/* every wait of the process goes through smcr (the interposer
				   is on): only then may a lease outlive the call that made it */
};

/* The defaults (sock fills busy_poll_ns and waits_ours). */
#define WAITPOL_SPIN_MIN_NS 2000ull
#define WAITPOL_SPIN_MAX_NS 50000ull
#define WAITPOL_LOST_GAP_NS 200000ull
#define WAITPOL_OFF_MAX_WAITS 64u
#define WAITPOL_LEASE_MAX_NS 1000000ull

struct waitpol {
	uint64_t budget_ns;	/* the next spin (before busy_poll_ns's floor) */
	unsigned off_waits;	/* waits left without a spin */
	unsigned off_len;	/* the next run of "off" waits */
	bool probing;		/* the next wait is the probe that ends an "off" run */
	uint64_t gap_avg_ns;	/* moving average (1/8) of the gaps between calls, 0: none */
	uint64_t last_end_ns;	/* when the previous call ended, 0: none */
};

/* What one wait observed. */
struct waitpol_obs {
	uint64_t waited_ns;	/* from the start of the wait to readiness (or the timeout) */
	bool caught;		/* readiness came within the spin (no sleep) */
	bool lost_cpu;		/* the spin saw a gap longer than lost_gap_ns */
};

/* A fresh state: the first wait spins spin_min_ns. */
void waitpol_init(struct waitpol *w, const struct waitpol_cfg *cfg);
/* How long the next wait polls before it sleeps (0: sleep at once). */
uint64_t waitpol_spin_ns(const struct waitpol *w, const struct waitpol_cfg *cfg);
/* Feeds one wait's observation. */
void waitpol_note(struct waitpol *w, const struct waitpol_cfg *cfg, const struct waitpol_obs *o);

/* Calls: now_ns at the start of each call (measures the gap since the previous call's
 * end) and at its end. */
void waitpol_call_start(struct waitpol *w, uint64_t now_ns);
void waitpol_call_end(struct waitpol *w, uint64_t now_ns);
/* Until when the CQs may stay unarmed after the call that ends at now_ns (0: arm now).
 * Non-zero only when cfg->waits_ours, the recent gaps between calls were short (below
 * half of lease_max_ns) and due_by_ns (when the thread that sleeps on the CQ fds will
 * look again without being woken: the progress thread's next deadline) covers it: the
 * lease ends at the earlier of now + 4 x the gap average, now + lease_max_ns and
 * due_by_ns, and is 0 if that leaves less than spin_min_ns. */
uint64_t waitpol_lease_until(const struct waitpol *w, const struct waitpol_cfg *cfg,
			     uint64_t now_ns, uint64_t due_by_ns);

#endif
