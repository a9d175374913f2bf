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

void waitpol_call_start(struct waitpol *w, uint64_t now_ns)
{
	if (!w->last_end_ns)
		return;
	uint64_t gap = now_ns > w->last_end_ns ? now_ns - w->last_end_ns : 0;
	/* one long pause must not hide the bursts around it for long */
	if (gap > 8 * WAITPOL_LEASE_MAX_NS)
		gap = 8 * WAITPOL_LEASE_MAX_NS;
	uint64_t a = w->gap_avg_ns;
	a = a ? a - a / 8 + gap / 8 : gap;
	w->gap_avg_ns = a ? a : 1;
}

void waitpol_call_end(struct waitpol *w, uint64_t now_ns)
{
	w->last_end_ns = now_ns ? now_ns : 1;
}

uint64_t waitpol_lease_until(const struct waitpol *w, const struct waitpol_cfg *cfg,
			     uint64_t now_ns, uint64_t due_by_ns)
{
	if (!cfg->waits_ours || !cfg->lease_max_ns || !w->gap_avg_ns ||
	    w->gap_avg_ns >= cfg->lease_max_ns / 2)
		return 0;
	uint64_t len = 4 * w->gap_avg_ns;
	if (len > cfg->lease_max_ns)
		len = cfg->lease_max_ns;
	uint64_t until = now_ns + len;
	if (due_by_ns < until)
		until = due_by_ns;
	if (until <= now_ns || until - now_ns < cfg->spin_min_ns)
		return 0;
	return until;
}
