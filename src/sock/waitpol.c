/* waitpol.c: the wait policy (waitpol.h has the rules; docs/design/readiness.md
 * section 6 the reasons). Pure functions of the state, the configuration and the times
 * passed in. */
#include "sock/waitpol.h"

#define OFF_FIRST 2u /* the first run of waits without a spin */

static uint64_t clamp(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void waitpol_init(struct waitpol *w, const struct waitpol_cfg *cfg)
{
	*w = (struct waitpol){ .budget_ns = cfg->spin_min_ns, .off_len = OFF_FIRST };
}

uint64_t waitpol_spin_ns(const struct waitpol *w, const struct waitpol_cfg *cfg)
{
	uint64_t b = w->off_waits ? 0 : w->budget_ns;
	return b > cfg->busy_poll_ns ? b : cfg->busy_poll_ns;
}

/* Stops spinning for a run of waits; the next run is twice as long. */
static void stop(struct waitpol *w, const struct waitpol_cfg *cfg)
{
	unsigned max = cfg->off_max_waits ? cfg->off_max_waits : 1;
	w->budget_ns = 0;
	w->off_waits = w->off_len ? w->off_len : 1;
	if (w->off_waits > max)
		w->off_waits = max;
	w->off_len = w->off_waits >= max / 2 ? max : w->off_waits * 2;
}

void waitpol_note(struct waitpol *w, const struct waitpol_cfg *cfg, const struct waitpol_obs *o)
{
	if (w->off_waits) {
		/* a sleeping wait tells nothing about a spin: count the run down, then probe
		 * with the longest spin: a peer that answers within it (both ends asleep make
		 * every round trip longer than any spin; one end spinning again breaks that)
		 * brings the spin back */
		if (--w->off_waits == 0) {
			w->budget_ns = cfg->spin_max_ns;
			w->probing = true;
		}
		return;
	}
	bool probe = w->probing;
	w->probing = false;
	if (o->lost_cpu) {
		stop(w, cfg);
		return;
	}
	if (o->caught || o->waited_ns <= cfg->spin_max_ns) {
		uint64_t twice = o->waited_ns > UINT64_MAX / 2 ? UINT64_MAX : 2 * o->waited_ns;
		w->budget_ns = clamp(twice, cfg->spin_min_ns, cfg->spin_max_ns);
		if (o->caught && !probe && w->off_len > OFF_FIRST)
			w->off_len--;
		return;
	}
	/* far longer than any spin: spinning does not pay here (a probe that missed: not
	 * now either) */
	w->budget_ns /= 2;
	if (probe || w->budget_ns < cfg->spin_min_ns)
		stop(w, cfg);
}

void waitpol_sleep_note(uint64_t *avg, uint64_t slept_ns)
{
	if (slept_ns > 16 * WAITPOL_DIRECT_MISS_NS)
		slept_ns = 16 * WAITPOL_DIRECT_MISS_NS;
	uint64_t a = *avg ? *avg - *avg / 4 + slept_ns / 4 : slept_ns;
	*avg = a ? a : 1;
}

bool waitpol_direct_ok(uint64_t avg)
{
	return avg && avg < WAITPOL_DIRECT_SHORT_NS;
}

bool waitpol_clc_low(unsigned rate)
{
	return rate < WAITPOL_CLC_SCALE * WAITPOL_CLC_MIN_RATE_PCT / 100;
}

bool waitpol_clc_spin(unsigned rate, unsigned waits_before, bool preempted)
{
	if (preempted)
		return false;
	return !waitpol_clc_low(rate) || waits_before % WAITPOL_CLC_PROBE == 0;
}

unsigned waitpol_clc_rate(unsigned rate, bool hit)
{
	return rate - rate / 16 + (hit ? WAITPOL_CLC_SCALE / 16 : 0);
}
