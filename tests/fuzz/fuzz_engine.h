/* fuzz_engine.h: the engines of the applier fuzz targets (fuzz_clc_sm, fuzz_lgr_msgs) live
 * for the whole process (libFuzzer calls the target once per input in one process), so
 * each input must find them as a fresh engine would be: fuzz_engine_reset, called between
 * inputs, checks that the previous input left nothing behind and puts back the little state
 * an idle engine still carries. Then the same input always takes the same paths (the same
 * PSNs, tokens, link group and link IDs, times), whatever ran before it, which libFuzzer's
 * coverage feedback and the reproduction of a crash from its one input both need. */
#ifndef SMCR_TESTS_FUZZ_ENGINE_H
#define SMCR_TESTS_FUZZ_ENGINE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"
#include "lib/core_pair.h"

/* The fake clock every input starts at (ns). */
#define FUZZ_T0 1000000000ull

/* An engine on spec whose peer ID does not depend on the process (instance given, not
 * random); ueid: a user EID for the SMC-R v2 paths, or NULL. */
static inline struct core_engine *fuzz_engine(const char *spec, const char *ueid,
					      uint16_t instance)
{
	struct core_engine_params p;
	memset(&p, 0, sizeof(p));
	p.instance = instance;
	if (ueid && core_ueid_parse(ueid, &p.ueids))
		abort();
	struct core_engine *e = cp_engine(spec, &p);
	if (!e)
		abort();
	return e;
}

/* Between inputs: e must be idle (no connection, link group, link or armed timer: abort
 * otherwise); then the random state (PSNs, LG token bases, link-add choices), the ID
 * counters and the latest time the engine saw start again as after core_engine_new, so
 * the next input may start its clock at FUZZ_T0 again. */
static inline void fuzz_engine_reset(struct core_engine *e, uint64_t seed)
{
	pthread_mutex_lock(&e->lock);
	bool idle = !e->conns && !e->lgs && !e->links && e->timers.n == 0 && !e->spinners &&
		    !e->ev_head;
	if (idle) {
		atomic_store(&e->rand_state, seed);
		e->next_lg_id = 1;
		e->next_link_id = 1;
		e->link_last = NULL;
		e->last_now = 0;
		e->lease_until = 0;
		e->spin_since = 0;
	}
	pthread_mutex_unlock(&e->lock);
	if (!idle) {
		fprintf(stderr, "fuzz_engine_reset: the engine is not idle\n");
		abort();
	}
}

#endif
