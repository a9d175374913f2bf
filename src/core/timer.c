/* timer.c: the engine's deadline heap (timer.h): a binary min-heap of pointers to the
 * timers embedded in the timed objects, each timer knowing its position so it can be moved
 * or cancelled in O(log n). */
#include "core/timer.h"

#include <stdlib.h>

#include "util/err.h"

void core_timer_init(struct core_timer *t, core_timer_fn fn)
{
	t->when = UINT64_MAX;
	t->pos = 0;
	t->fn = fn;
}

void core_timers_init(struct core_timers *ts)
{
	ts->h = NULL;
	ts->n = ts->cap = ts->objs = 0;
}

void core_timers_free(struct core_timers *ts)
{
	for (size_t i = 0; i < ts->n; i++)
		ts->h[i]->pos = 0;
	free(ts->h);
	core_timers_init(ts);
}

int core_timers_reserve(struct core_timers *ts)
{
	if (ts->objs == ts->cap) {
		size_t cap = ts->cap ? ts->cap * 2 : 16;
		struct core_timer **h = realloc(ts->h, cap * sizeof(*h));
		if (!h)
			return -SMCR_E_NOMEM;
		ts->h = h;
		ts->cap = cap;
	}
	ts->objs++;
	return 0;
}

void core_timers_unreserve(struct core_timers *ts)
{
	if (ts->objs)
		ts->objs--;
}

static void place(struct core_timers *ts, size_t i, struct core_timer *t)
{
	ts->h[i] = t;
	t->pos = i + 1;
}

static void sift_up(struct core_timers *ts, size_t i)
{
	struct core_timer *t = ts->h[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (ts->h[p]->when <= t->when)
			break;
		place(ts, i, ts->h[p]);
		i = p;
	}
	place(ts, i, t);
}

static void sift_down(struct core_timers *ts, size_t i)
{
	struct core_timer *t = ts->h[i];
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		uint64_t w = t->when;
		if (l < ts->n && ts->h[l]->when < w) {
			m = l;
			w = ts->h[l]->when;
		}
		if (l + 1 < ts->n && ts->h[l + 1]->when < w)
			m = l + 1;
		if (m == i)
			break;
		place(ts, i, ts->h[m]);
		i = m;
	}
	place(ts, i, t);
}

void core_timers_cancel(struct core_timers *ts, struct core_timer *t)
{
	if (!t->pos)
		return;
	size_t i = t->pos - 1;
	t->pos = 0;
	ts->n--;
	if (i == ts->n)
		return;
	/* the last timer takes the hole, then goes up or down to where it belongs */
	place(ts, i, ts->h[ts->n]);
	if (i > 0 && ts->h[(i - 1) / 2]->when > ts->h[i]->when)
		sift_up(ts, i);
	else
		sift_down(ts, i);
}

void core_timers_arm(struct core_timers *ts, struct core_timer *t, uint64_t when)
{
	if (t->pos) {
		size_t i = t->pos - 1;
		uint64_t old = t->when;
		t->when = when;
		if (when < old)
			sift_up(ts, i);
		else
			sift_down(ts, i);
		return;
	}
	/* Only reserved objects arm, so there is room (a bug otherwise: drop it loudly). */
	if (ts->n == ts->cap)
		abort();
	t->when = when;
	place(ts, ts->n, t);
	ts->n++;
	sift_up(ts, ts->n - 1);
}

void core_timers_arm_min(struct core_timers *ts, struct core_timer *t, uint64_t when)
{
	if (t->pos && t->when <= when)
		return;
	core_timers_arm(ts, t, when);
}

uint64_t core_timers_next(const struct core_timers *ts)
{
	return ts->n ? ts->h[0]->when : UINT64_MAX;
}

unsigned core_timers_expire(struct core_timers *ts, uint64_t now)
{
	/* A function that arms a timer at or before now (its own, say) would keep the loop
	 * going: at most as many runs as timers were armed when the call began; the rest
	 * stay due, and core_timers_next says so to the caller. */
	size_t budget = ts->n;
	unsigned ran = 0;
	while (budget && ts->n && ts->h[0]->when <= now) {
		struct core_timer *t = ts->h[0];
		core_timers_cancel(ts, t);
		budget--;
		ran++;
		t->fn(t, now);
	}
	return ran;
}
