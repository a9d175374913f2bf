/* lapse.h: the score of the hold's watchdog (data.c "Hold watchdog"): how often holds
 * lapsed with an arrival kept back, lately. Each lapse adds one; the score halves every
 * LAPSE_HALF_NS; a score of trip lapses says "pause the holds" and starts again from 0.
 * A pure function of the times it is given (tests/unit/test_lapse.c); the caller
 * serializes. */
#ifndef SMCR_SOCK_LAPSE_H
#define SMCR_SOCK_LAPSE_H

#include <stdbool.h>
#include <stdint.h>

#define LAPSE_ONE 16u			  /* one lapse, fixed point */
#define LAPSE_HALF_NS 100000000ull	  /* the score halves every 100 ms */

struct lapse_score {
	uint64_t score; /* in LAPSE_ONE units */
	uint64_t at;	/* when the last halving was applied (0: never) */
};

/* Adds a lapse at now_ns; true when the score reached trip lapses (then it restarts). */
static inline bool lapse_score_add(struct lapse_score *ls, uint64_t now_ns, unsigned trip)
{
	if (ls->at == 0 || now_ns < ls->at) {
		ls->at = now_ns; /* first lapse, or a clock seen going back: no decay */
	} else {
		uint64_t halvings = (now_ns - ls->at) / LAPSE_HALF_NS;
		ls->score = halvings >= 63 ? 0 : ls->score >> halvings;
		ls->at += halvings * LAPSE_HALF_NS; /* keeps the remainder for the next call */
	}
	ls->score += LAPSE_ONE;
	if (ls->score < (uint64_t)trip * LAPSE_ONE)
		return false;
	ls->score = 0;
	return true;
}

#endif
