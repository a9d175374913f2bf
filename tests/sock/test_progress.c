/* test_progress.c: the progress thread (src/sock/progress.h): watches fire on readiness and
 * stop after unwatch, release runs once no call can run (at once, without a wake-up, when
 * the thread sleeps), timers fire in deadline order and
 * can be cancelled, calls run on the thread, the hook is called, and an idle thread sleeps
 * (no spinning on 2 cores), and progress_due_by wakes it by the posted time with a kick only
 * when it would sleep past it. Label threads. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sock/progress.h"
#include "util/clock.h"

static _Atomic int fired, released, on_thread_ok;

static void wait_for(_Atomic int *v, int want)
{
	for (int i = 0; i < 2000 && atomic_load(v) < want; i++)
		usleep(1000);
	assert_true(atomic_load(v) >= want);
}

static void on_ready(void *arg, uint32_t ev)
{
	int fd = *(int *)arg;
	uint64_t x;
	if (ev & 0x001 /* EPOLLIN */)
		(void)!read(fd, &x, sizeof(x));
	if (progress_on_thread())
		atomic_fetch_add(&on_thread_ok, 1);
	atomic_fetch_add(&fired, 1);
}

static void on_release(void *arg)
{
	(void)arg;
	atomic_fetch_add(&released, 1);
}

static void test_watch(void **state)
{
	(void)state;
	static int efd;
	efd = eventfd(0, EFD_NONBLOCK);
	struct prog_watch *w;
	atomic_store(&fired, 0);
	atomic_store(&released, 0);
	assert_int_equal(progress_watch(efd, 0x001, on_ready, &efd, on_release, &w), 0);
	assert_false(progress_on_thread());
	uint64_t one = 1;
	assert_int_equal(write(efd, &one, 8), 8);
	wait_for(&fired, 1);
	assert_int_equal(write(efd, &one, 8), 8);
	wait_for(&fired, 2);
	assert_int_equal(atomic_load(&on_thread_ok), atomic_load(&fired));
	progress_unwatch(w);
	wait_for(&released, 1);
	int before = atomic_load(&fired);
	assert_int_equal(write(efd, &one, 8), 8);
	usleep(20000);
	assert_int_equal(atomic_load(&fired), before);
	assert_int_equal(atomic_load(&released), 1);
	close(efd);
}

/* An unwatch while the thread sleeps releases at once, on the caller's thread (no
 * wake-up of the progress thread per close: docs/parts/connect.md), and the thread's
 * turn counter shows it was not woken for it; the watch never fires again. */
static void test_unwatch_asleep_releases_now(void **state)
{
	(void)state;
	static int efd;
	efd = eventfd(0, EFD_NONBLOCK);
	struct prog_watch *w;
	atomic_store(&fired, 0);
	atomic_store(&released, 0);
	assert_int_equal(progress_watch(efd, 0x001 | (1u << 31) /* EPOLLET */, on_ready, &efd,
				      on_release, &w), 0);
	uint64_t one = 1;
	assert_int_equal(write(efd, &one, 8), 8);
	wait_for(&fired, 1);
	/* let it go to sleep: no timers or calls pending here */
	uint64_t t = progress_turns();
	for (int i = 0; i < 50; i++) {
		usleep(2000);
		if (progress_turns() == t)
			break;
		t = progress_turns();
	}
	usleep(20000);
	t = progress_turns();
	progress_unwatch(w);
	assert_int_equal(atomic_load(&released), 1); /* before progress_unwatch returned */
	usleep(20000);
	assert_int_equal(progress_turns(), t);	     /* no wake-up for it */
	assert_int_equal(write(efd, &one, 8), 8);
	usleep(20000);
	assert_int_equal(atomic_load(&fired), 1);
	assert_int_equal(atomic_load(&released), 1);
	close(efd);
}

static _Atomic int order[4], order_n;
static void on_timer(void *arg, uint32_t ev)
{
	(void)ev;
	int i = atomic_fetch_add(&order_n, 1);
	if (i < 4)
		atomic_store(&order[i], (int)(intptr_t)arg);
}

static void test_timers(void **state)
{
	(void)state;
	static struct prog_timer t1, t2, t3;
	progress_timer_init(&t1, on_timer, (void *)1);
	progress_timer_init(&t2, on_timer, (void *)2);
	progress_timer_init(&t3, on_timer, (void *)3);
	uint64_t now = smcr_now_ns();
	assert_int_equal(progress_timer_arm(&t2, now + 40 * SMCR_NS_PER_MS), 0);
	assert_int_equal(progress_timer_arm(&t1, now + 20 * SMCR_NS_PER_MS), 0);
	assert_int_equal(progress_timer_arm(&t3, now + 30 * SMCR_NS_PER_MS), 0);
	assert_true(progress_timer_cancel(&t3));
	assert_false(progress_timer_cancel(&t3));
	wait_for(&order_n, 2);
	assert_int_equal(atomic_load(&order[0]), 1);
	assert_int_equal(atomic_load(&order[1]), 2);
	assert_true(smcr_now_ns() - now >= 40 * SMCR_NS_PER_MS);
	usleep(20000);
	assert_int_equal(atomic_load(&order_n), 2); /* t3 never ran */
	/* re-arming moves a timer */
	atomic_store(&order_n, 0);
	assert_int_equal(progress_timer_arm(&t1, smcr_now_ns() + 500 * SMCR_NS_PER_MS), 0);
	assert_int_equal(progress_timer_arm(&t1, smcr_now_ns() + 5 * SMCR_NS_PER_MS), 0);
	wait_for(&order_n, 1);
	usleep(10000);
	assert_int_equal(atomic_load(&order_n), 1);
}

static _Atomic int called;
static void on_call(void *arg, uint32_t ev)
{
	(void)ev;
	assert_true(progress_on_thread());
	atomic_fetch_add(&called, (int)(intptr_t)arg);
}

static _Atomic int hooked;
static uint64_t hook(uint64_t now)
{
	atomic_fetch_add(&hooked, 1);
	(void)now;
	return 0;
}

static void test_calls_hook_idle(void **state)
{
	(void)state;
	assert_int_equal(progress_call(on_call, (void *)5), 0);
	assert_int_equal(progress_call(on_call, (void *)7), 0);
	wait_for(&called, 12);
	progress_set_hook(hook);
	wait_for(&hooked, 1);
	/* idle: the thread sleeps; a 100 ms window sees (almost) no turns */
	usleep(20000);
	uint64_t t0 = progress_turns();
	usleep(100000);
	assert_true(progress_turns() - t0 <= 2);
	progress_set_hook(NULL);
	progress_stop();
	/* restart after a stop */
	assert_int_equal(progress_call(on_call, (void *)1), 0);
	wait_for(&called, 13);
	progress_stop();
}

/* progress_due_by (progress.h): a thread asleep with no timeout
 * is kicked and then runs a turn at the posted time (taken into its next sleep); a post
 * that the thread's own deadline covers wakes nothing, and is taken into the sleep after
 * that deadline's turn. */
static _Atomic int dturns;
static _Atomic uint64_t dlast, dnext;
static uint64_t due_hook(uint64_t now)
{
	(void)now;
	atomic_store(&dlast, smcr_now_ns());
	atomic_fetch_add(&dturns, 1);
	return atomic_load(&dnext);
}

/* Waits (3 s at most) for a turn that ran at or after at. */
static void wait_turn_after(uint64_t at)
{
	for (int i = 0; i < 3000 && atomic_load(&dlast) < at; i++)
		usleep(1000);
	assert_true(atomic_load(&dlast) >= at);
}

static void test_due_by(void **state)
{
	(void)state;
	assert_int_equal(progress_start(), 0);
	atomic_store(&dnext, 0);
	progress_set_hook(due_hook);
	wait_for(&dturns, 1);
	usleep(20000); /* asleep with no timeout (or, if slow, about to be: then it takes
			* the post into that sleep; either way the turn below comes) */
	uint64_t at = smcr_now_ns() + 50 * SMCR_NS_PER_MS;
	progress_due_by(at);
	wait_turn_after(at); /* without the kick or the fold: never */
	/* covered: asleep until its own deadline (300 ms), a post after it wakes nothing */
	uint64_t t2 = smcr_now_ns();
	int k = atomic_load(&dturns);
	atomic_store(&dnext, t2 + 300 * SMCR_NS_PER_MS);
	progress_kick();
	wait_for(&dturns, k + 1);
	usleep(10000);
	int k2 = atomic_load(&dturns);
	atomic_store(&dnext, 0);
	uint64_t at2 = smcr_now_ns() + 400 * SMCR_NS_PER_MS;
	progress_due_by(at2);
	usleep(100000);
	if (smcr_now_ns() < t2 + 290 * SMCR_NS_PER_MS) /* (a descheduled test proves nothing) */
		assert_int_equal(atomic_load(&dturns), k2);
	/* the deadline's turn takes the post into its sleep: a turn at the posted time */
	wait_turn_after(at2);
	progress_set_hook(NULL);
	progress_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_unwatch_asleep_releases_now),
		cmocka_unit_test(test_timers),
		cmocka_unit_test(test_calls_hook_idle),
		cmocka_unit_test(test_due_by),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
