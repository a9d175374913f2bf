/* timer.h: the engine's timers (docs/protocol/procedures.md 1 lists them: CLC waits, LLC waits,
 * TEST LINK, idle LG, close waits): one binary min-heap of deadlines per engine, keyed by a time
 * the caller passes in (the engine reads no clock). Each timed object embeds one struct
 * core_timer; arming, moving and cancelling cost O(log n) and an idle engine costs nothing:
 * progress looks at the heap's top only, so thousands of connections and several links add
 * no work until one of their deadlines comes.
 *
 * The heap never allocates while arming: a timed object reserves its place when it is
 * created (core_timers_reserve), so arming cannot fail. Not thread-safe: the engine calls it
 * with eng->lock held (core_int.h). */
#ifndef SMCR_CORE_TIMER_H
#define SMCR_CORE_TIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct core_timer;
/* Runs when the timer's deadline has come (the timer is no longer armed). */
typedef void (*core_timer_fn)(struct core_timer *t, uint64_t now);

struct core_timer {
	uint64_t when;		/* deadline while armed */
	size_t pos;		/* index + 1 in the heap; 0: not armed */
	core_timer_fn fn;	/* set once (core_timer_init) */
};

struct core_timers {
	struct core_timer **h;	/* h[0] is the earliest */
	size_t n;		/* armed */
	size_t cap;		/* places reserved */
	size_t objs;		/* timers that may be armed (core_timers_reserve) */
};

void core_timer_init(struct core_timer *t, core_timer_fn fn);
static inline bool core_timer_armed(const struct core_timer *t) { return t->pos != 0; }

void core_timers_init(struct core_timers *ts);
void core_timers_free(struct core_timers *ts);
/* One more timer object may be armed from now on: grows the heap's room (-SMCR_E_NOMEM). */
int core_timers_reserve(struct core_timers *ts);
/* That object is gone (its timer cancelled). */
void core_timers_unreserve(struct core_timers *ts);

/* Arms t at when (moves it if armed). */
void core_timers_arm(struct core_timers *ts, struct core_timer *t, uint64_t when);
/* Arms t at when unless it is armed earlier already (a deadline that may have moved later
 * is checked by the timer's function when it runs, which arms it again). */
void core_timers_arm_min(struct core_timers *ts, struct core_timer *t, uint64_t when);
void core_timers_cancel(struct core_timers *ts, struct core_timer *t);
/* The earliest deadline; UINT64_MAX if none is armed. */
uint64_t core_timers_next(const struct core_timers *ts);
/* Runs every timer due at now, earliest first (each one disarmed before its function runs;
 * a function may arm or cancel any timer, itself included). A timer a function arms again
 * at or before now runs in the next call, so one call ends. Returns how many ran. */
unsigned core_timers_expire(struct core_timers *ts, uint64_t now);

#endif
