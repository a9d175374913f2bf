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
};

/* The defaults (sock fills busy_poll_ns). */
#define WAITPOL_SPIN_MIN_NS 2000ull
#define WAITPOL_SPIN_MAX_NS 50000ull
#define WAITPOL_LOST_GAP_NS 200000ull
#define WAITPOL_OFF_MAX_WAITS 64u

struct waitpol {
	uint64_t budget_ns;	/* the next spin (before busy_poll_ns's floor) */
	unsigned off_waits;	/* waits left without a spin */
	unsigned off_len;	/* the next run of "off" waits */
	bool probing;		/* the next wait is the probe that ends an "off" run */
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

/* The direct sleeper's gate (sock/engine.c "Direct wake"): one thread at a time sleeps on
 * the CQ fds, and only a thread whose recent sleeps were short, so an idle thread blocked
 * for long (a control connection) does not take the slot from the thread of a busy
 * stream. *avg is that thread's moving average of its sleeps (ns, 1/4 weight, 0: none
 * yet, so a thread's first sleep is never direct); a direct wake-up that brought nothing
 * for the thread is noted as WAITPOL_DIRECT_MISS_NS, so a thread woken for others'
 * traffic soon sleeps the usual way again. */
#define WAITPOL_DIRECT_SHORT_NS 1000000ull /* recent sleeps averaging below: direct */
#define WAITPOL_DIRECT_MISS_NS 10000000ull /* what a wake-up for others' traffic counts */
void waitpol_sleep_note(uint64_t *avg, uint64_t slept_ns);
bool waitpol_direct_ok(uint64_t avg);

/* The CLC answer's spin (sock.h hs_spin_poll): whether a thread that just sent a CLC
 * message (or a blocking accept waiting for its next connection) polls before it sleeps.
 * One state per site and process (the caller keeps it in atomics: a lost update between
 * threads only delays the average by one sample):
 *   - rate: the recent spins' hit rate, a moving average with weight 1/16, scaled to
 *     WAITPOL_CLC_SCALE; a fresh state says every spin hit;
 *   - waits: a count of the waits made while the rate is low.
 * A miss costs the whole budget in CPU and a hit saves a sleep and a wake-up, so the spin
 * is worth it only while most spins hit (the peer finds a CPU at once). Below
 * WAITPOL_CLC_MIN_RATE_PCT only every WAITPOL_CLC_PROBE-th wait spins (to see the host
 * become quiet again), and a thread preempted since its last wait at the site (its
 * involuntary context switches changed: the host has no spare CPU) never spins. */
#define WAITPOL_CLC_SCALE 1024u
#define WAITPOL_CLC_MIN_RATE_PCT 75u
#define WAITPOL_CLC_PROBE 8u
/* Spin now? waits_before: the low-rate wait count before this wait (the caller adds one
 * for this wait when the rate is low, whatever the answer). */
bool waitpol_clc_spin(unsigned rate, unsigned waits_before, bool preempted);
/* Is the rate low (this wait counts in waits)? */
bool waitpol_clc_low(unsigned rate);
/* The rate after a spin that hit or missed. */
unsigned waitpol_clc_rate(unsigned rate, bool hit);

#endif
