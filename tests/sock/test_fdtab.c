/* test_fdtab.c: the lock-free fd -> object table (src/sock/fdtab.h): set/get/clear rules,
 * range, reference counting, and readers racing writers that remove and recycle objects
 * (run under TSan: label threads). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "sock/fdtab.h"

struct obj {
	struct fdobj h;
	_Atomic int fd;		 /* which fd this incarnation is installed at */
	_Atomic int released;	 /* times the last reference was dropped */
};

static void obj_release(struct fdobj *o)
{
	struct obj *x = (struct obj *)(void *)o;
	atomic_fetch_add(&x->released, 1);
}

static void obj_init(struct obj *o, int fd)
{
	o->h.release = obj_release;
	atomic_store(&o->fd, fd);
	atomic_store(&o->h.ref, 1); /* the table's reference */
}

static void test_basic(void **state)
{
	(void)state;
	static struct obj a, b;
	obj_init(&a, 5);
	assert_null(fdtab_get(5));
	assert_int_equal(fdtab_set(5, &a.h), 0);
	assert_int_equal(fdtab_count(), 1);
	obj_init(&b, 5);
	assert_int_equal(fdtab_set(5, &b.h), -SMCR_E_SOCK_FDTAB_BUSY);
	struct fdobj *g = fdtab_get(5);
	assert_ptr_equal(g, &a.h);
	assert_int_equal(atomic_load(&a.h.ref), 2);
	fdobj_put(g);
	assert_false(fdtab_clear(5, &b.h)); /* not the one installed */
	assert_true(fdtab_clear(5, &a.h));
	assert_null(fdtab_get(5));
	assert_int_equal(fdtab_count(), 0);
	fdobj_put(&a.h);
	assert_int_equal(atomic_load(&a.released), 1);
	/* range */
	assert_int_equal(fdtab_set(-1, &b.h), -SMCR_E_SOCK_FD_RANGE);
	assert_int_equal(fdtab_set(FDTAB_MAX, &b.h), -SMCR_E_SOCK_FD_RANGE);
	assert_null(fdtab_get(-3));
	assert_null(fdtab_get(FDTAB_MAX + 7));
	/* a high fd in another chunk */
	assert_int_equal(fdtab_set(FDTAB_MAX - 1, &b.h), 0);
	g = fdtab_get(FDTAB_MAX - 1);
	assert_ptr_equal(g, &b.h);
	fdobj_put(g);
	assert_true(fdtab_clear(FDTAB_MAX - 1, &b.h));
	fdobj_put(&b.h);
	fdtab_fini();
}

/* Writers install, remove and recycle a small pool of objects on a few fds while readers
 * look up; every successful lookup must return a live object installed at that fd. */
#define NFD 4
#define NOBJ 8
#define ROUNDS 20000
static struct obj pool[NOBJ];
static _Atomic int stop;
static _Atomic long lookups, hits;

static _Atomic int readers_started;

static void *reader(void *arg)
{
	(void)arg;
	atomic_fetch_add(&readers_started, 1);
	while (!atomic_load(&stop)) {
		for (int fd = 0; fd < NFD; fd++) {
			struct fdobj *g = fdtab_get(fd);
			atomic_fetch_add(&lookups, 1);
			if (!g)
				continue;
			struct obj *o = (struct obj *)(void *)g;
			/* While held, the object cannot be recycled: its count is >= 1 */
			assert_true(atomic_load(&o->h.ref) >= 1);
			int f = atomic_load(&o->fd);
			assert_true(f == fd);
			atomic_fetch_add(&hits, 1);
			fdobj_put(g);
		}
	}
	return NULL;
}

static void test_race(void **state)
{
	(void)state;
	pthread_t r[2];
	for (int i = 0; i < NOBJ; i++)
		pool[i].h.release = obj_release;
	for (int i = 0; i < 2; i++)
		pthread_create(&r[i], NULL, reader, NULL);
	int installed[NFD];
	for (int fd = 0; fd < NFD; fd++)
		installed[fd] = -1;
	int next = 0;
	/* Both readers running before the writer starts, and the writer goes on until they
	 * have looked up a good number of times (a loaded 2-core machine schedules late). */
	while (atomic_load(&readers_started) < 2)
		sched_yield();
	for (int round = 0; round < ROUNDS || (atomic_load(&lookups) < 20000 && round < 50 * ROUNDS);
	     round++) {
		int fd = round % NFD;
		if (installed[fd] >= 0) {
			struct obj *o = &pool[installed[fd]];
			assert_true(fdtab_clear(fd, &o->h));
			fdobj_put(&o->h); /* may recycle now or when the last reader puts */
			installed[fd] = -1;
		}
		/* find a free object (count 0: every reference dropped) */
		for (int k = 0; k < NOBJ; k++) {
			int i = (next + k) % NOBJ;
			if (atomic_load(&pool[i].h.ref) == 0) {
				atomic_store(&pool[i].fd, fd);
				atomic_store_explicit(&pool[i].h.ref, 1, memory_order_release);
				assert_int_equal(fdtab_set(fd, &pool[i].h), 0);
				installed[fd] = i;
				next = i + 1;
				break;
			}
		}
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	for (int fd = 0; fd < NFD; fd++) {
		if (installed[fd] >= 0) {
			assert_true(fdtab_clear(fd, &pool[installed[fd]].h));
			fdobj_put(&pool[installed[fd]].h);
		}
	}
	int released = 0;
	for (int i = 0; i < NOBJ; i++) {
		assert_int_equal(atomic_load(&pool[i].h.ref), 0);
		released += atomic_load(&pool[i].released);
	}
	assert_true(released > 0);
	assert_true(atomic_load(&lookups) > 0);
	assert_int_equal(fdtab_count(), 0);
	fdtab_fini();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_race),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
