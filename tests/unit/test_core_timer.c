/* test_core_timer.c: the engine's deadline heap (src/core/timer.c) on a fake clock: timers
 * run in deadline order, exactly once, only when due; moving and cancelling (also from a
 * running timer's function) keep the heap right, checked against a plain array model over
 * random operations; one expire call ends even when a function arms itself in the past;
 * arming never allocates (the room is reserved per object). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/timer.h"

#define N 300

struct obj {
	struct core_timer t;
	int id;
	uint64_t model;		/* the deadline the model expects; UINT64_MAX: not armed */
	unsigned fired;
	uint64_t fired_at;
};

static struct obj objs[N];
static struct core_timers ts;
static uint64_t last_fire_when;
static int order_ok;

static struct obj *of(struct core_timer *t)
{
	return (struct obj *)((char *)t - offsetof(struct obj, t));
}

static void fire(struct core_timer *t, uint64_t now)
{
	struct obj *o = of(t);
	assert_false(core_timer_armed(t));
	assert_true(o->model <= now);	/* never early */
	if (o->model < last_fire_when)	/* earliest first */
		order_ok = 0;
	last_fire_when = o->model;
	o->model = UINT64_MAX;
	o->fired++;
	o->fired_at = now;
}

static void setup_objs(void)
{
	core_timers_init(&ts);
	for (int i = 0; i < N; i++) {
		core_timer_init(&objs[i].t, fire);
		objs[i].id = i;
		objs[i].model = UINT64_MAX;
		objs[i].fired = 0;
		assert_int_equal(core_timers_reserve(&ts), 0);
	}
}

static uint64_t model_next(void)
{
	uint64_t m = UINT64_MAX;
	for (int i = 0; i < N; i++)
		if (objs[i].model < m)
			m = objs[i].model;
	return m;
}

/* Heap shape: every parent no later than its children, every position right. */
static void check_heap(void)
{
	for (size_t i = 0; i < ts.n; i++) {
		assert_int_equal(ts.h[i]->pos, i + 1);
		if (i)
			assert_true(ts.h[(i - 1) / 2]->when <= ts.h[i]->when);
	}
	size_t armed = 0;
	for (int i = 0; i < N; i++) {
		assert_int_equal(core_timer_armed(&objs[i].t), objs[i].model != UINT64_MAX);
		if (objs[i].model != UINT64_MAX) {
			assert_int_equal(objs[i].t.when, objs[i].model);
			armed++;
		}
	}
	assert_int_equal(ts.n, armed);
	assert_int_equal(core_timers_next(&ts), model_next());
}

static void test_order_and_once(void **state)
{
	(void)state;
	setup_objs();
	assert_int_equal(core_timers_next(&ts), UINT64_MAX);
	assert_int_equal(core_timers_expire(&ts, 1000), 0);
	/* deadlines 10, 20, ... in a scrambled order */
	for (int k = 0; k < N; k++) {
		int i = (k * 7) % N;
		objs[i].model = 10 * (uint64_t)(i + 1);
		core_timers_arm(&ts, &objs[i].t, objs[i].model);
	}
	check_heap();
	assert_int_equal(core_timers_next(&ts), 10);
	last_fire_when = 0;
	order_ok = 1;
	assert_int_equal(core_timers_expire(&ts, 9), 0);	/* nothing due yet */
	assert_int_equal(core_timers_expire(&ts, 55), 5);	/* 10..50 */
	assert_int_equal(objs[4].fired, 1);
	assert_int_equal(objs[5].fired, 0);
	assert_int_equal(core_timers_next(&ts), 60);
	assert_int_equal(core_timers_expire(&ts, 55), 0);	/* once only */
	assert_int_equal(core_timers_expire(&ts, UINT64_MAX - 1), N - 5);
	assert_true(order_ok);
	for (int i = 0; i < N; i++)
		assert_int_equal(objs[i].fired, 1);
	check_heap();
	core_timers_free(&ts);
}

static void test_random_against_model(void **state)
{
	(void)state;
	setup_objs();
	uint64_t now = 0;
	srand(22);
	for (int step = 0; step < 20000; step++) {
		struct obj *o = &objs[rand() % N];
		int op = rand() % 10;
		if (op < 4) {
			uint64_t w = now + (uint64_t)(rand() % 5000);
			core_timers_arm(&ts, &o->t, w);
			o->model = w;
		} else if (op < 6) {
			uint64_t w = now + (uint64_t)(rand() % 5000);
			core_timers_arm_min(&ts, &o->t, w);
			if (w < o->model)
				o->model = w;
		} else if (op < 8) {
			core_timers_cancel(&ts, &o->t);
			o->model = UINT64_MAX;
		} else {
			now += (uint64_t)(rand() % 300);
			unsigned due = 0;
			for (int i = 0; i < N; i++)
				due += objs[i].model <= now;
			last_fire_when = 0;
			order_ok = 1;
			assert_int_equal(core_timers_expire(&ts, now), due);
			assert_true(order_ok);
			for (int i = 0; i < N; i++)
				assert_true(objs[i].model > now);
		}
		check_heap();
	}
	core_timers_free(&ts);
}

/* A function that cancels another due timer and moves a third keeps the heap right. */
static struct obj *victim, *mover;
static void fire_meddle(struct core_timer *t, uint64_t now)
{
	fire(t, now);
	core_timers_cancel(&ts, &victim->t);
	victim->model = UINT64_MAX;
	core_timers_arm(&ts, &mover->t, now + 100);
	mover->model = now + 100;
}

static void test_meddling_function(void **state)
{
	(void)state;
	setup_objs();
	objs[0].t.fn = fire_meddle;
	victim = &objs[1];
	mover = &objs[2];
	for (int i = 0; i < 4; i++) {
		objs[i].model = 10 + (uint64_t)i;
		core_timers_arm(&ts, &objs[i].t, objs[i].model);
	}
	last_fire_when = 0;
	order_ok = 1;
	/* 0 runs (cancels 1, moves 2 to now + 100 = 120), then 3 (13) */
	assert_int_equal(core_timers_expire(&ts, 20), 2);
	assert_int_equal(objs[1].fired, 0);
	assert_int_equal(objs[2].fired, 0);
	assert_int_equal(objs[3].fired, 1);
	check_heap();
	assert_int_equal(core_timers_next(&ts), 120);
	core_timers_free(&ts);
}

/* A function arming itself in the past: the call still ends, the timer stays due. */
static unsigned again_runs;
static void fire_again(struct core_timer *t, uint64_t now)
{
	again_runs++;
	core_timers_arm(&ts, t, now - 1);
}

static void test_rearm_in_past_ends(void **state)
{
	(void)state;
	setup_objs();
	objs[0].t.fn = fire_again;
	core_timers_arm(&ts, &objs[0].t, 5);
	again_runs = 0;
	assert_int_equal(core_timers_expire(&ts, 10), 1);
	assert_int_equal(again_runs, 1);
	assert_int_equal(core_timers_next(&ts), 9);	/* still due: the caller comes back */
	assert_int_equal(core_timers_expire(&ts, 10), 1);
	core_timers_cancel(&ts, &objs[0].t);
	assert_int_equal(core_timers_next(&ts), UINT64_MAX);
	core_timers_free(&ts);
}

/* Room: every reserved object can be armed at once; unreserve gives a place back. */
static void test_reserve(void **state)
{
	(void)state;
	core_timers_init(&ts);
	for (int i = 0; i < N; i++) {
		assert_int_equal(core_timers_reserve(&ts), 0);
		core_timer_init(&objs[i].t, fire);
		objs[i].model = (uint64_t)(N - i);
		core_timers_arm(&ts, &objs[i].t, objs[i].model);
	}
	assert_true(ts.cap >= N);
	assert_int_equal(ts.n, N);
	assert_int_equal(core_timers_next(&ts), 1);
	for (int i = 0; i < N; i++) {
		core_timers_cancel(&ts, &objs[i].t);
		core_timers_unreserve(&ts);
	}
	assert_int_equal(ts.n, 0);
	assert_int_equal(ts.objs, 0);
	core_timers_free(&ts);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_once),
		cmocka_unit_test(test_random_against_model),
		cmocka_unit_test(test_meddling_function),
		cmocka_unit_test(test_rearm_in_past_ends),
		cmocka_unit_test(test_reserve),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
