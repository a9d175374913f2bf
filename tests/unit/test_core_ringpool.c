/* test_core_ringpool.c: the send rings' free list (src/core/ringpool.c): last in, first out
 * per size; bounded by $SMCR_RING_POOL_KB (128 here, set before the first use); sizes that
 * are not a ring size bypass it; two threads taking and giving back never share a ring.
 * The engine's side (a ring given back when it empties, taken at the next byte that needs
 * it) is in tests/core/test_core_sndbuf.c. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <cmocka.h>

#include "core/core_int.h"

static void test_lifo(void **state)
{
	(void)state;
	assert_int_equal(core_ring_pool_bytes(), 0);
	void *a = ring_get(65536), *b = ring_get(65536);
	assert_non_null(a);
	assert_non_null(b);
	ring_put(a, 65536);
	ring_put(b, 65536);
	assert_int_equal(core_ring_pool_bytes(), 131072);
	/* the last given back is the first taken: its lines are the warm ones */
	assert_ptr_equal(ring_get(65536), b);
	assert_ptr_equal(ring_get(65536), a);
	assert_int_equal(core_ring_pool_bytes(), 0);
	/* another size has its own list */
	void *c = ring_get(16384);
	ring_put(c, 16384);
	void *d = ring_get(65536); /* fresh: the 64 KiB list is empty */
	assert_non_null(d);
	assert_ptr_not_equal(d, c);
	assert_ptr_equal(ring_get(16384), c);
	memset(a, 1, 65536); /* whole rings, usable */
	memset(b, 2, 65536);
	memset(c, 3, 16384);
	memset(d, 4, 65536);
	ring_put(a, 65536);
	ring_put(b, 65536);
	ring_put(c, 16384); /* over the 128 KiB bound: freed (ASan would see a leak) */
	ring_put(d, 65536); /* the same */
	assert_int_equal(core_ring_pool_bytes(), 131072);
	assert_ptr_equal(ring_get(65536), b);
	assert_ptr_equal(ring_get(65536), a);
	free(a);
	free(b);
	assert_int_equal(core_ring_pool_bytes(), 0);
}

static void test_other_sizes_bypass(void **state)
{
	(void)state;
	void *p = ring_get(100000); /* not a power of two */
	assert_non_null(p);
	ring_put(p, 100000);
	assert_int_equal(core_ring_pool_bytes(), 0);
	p = ring_get(8192); /* below the smallest ring */
	ring_put(p, 8192);
	p = ring_get(2u << 20); /* above the largest */
	ring_put(p, 2u << 20);
	assert_int_equal(core_ring_pool_bytes(), 0);
	ring_put(NULL, 65536);
	assert_int_equal(core_ring_pool_bytes(), 0);
	assert_true(ring_pool_on());
}

/* Each thread stamps a ring it holds and checks the stamp before giving it back: a ring
 * handed to both at once would show the other's stamp. */
static void *hammer(void *arg)
{
	uint8_t tag = (uint8_t)(uintptr_t)arg;
	for (int i = 0; i < 20000; i++) {
		uint32_t size = (i & 1) ? 16384 : 32768;
		uint8_t *r = ring_get(size);
		if (!r)
			return (void *)1;
		memset(r, tag, 64);
		memset(r + size - 64, tag, 64);
		for (int k = 0; k < 64; k++)
			if (r[k] != tag || r[size - 64 + k] != tag)
				return (void *)1;
		ring_put(r, size);
	}
	return NULL;
}

static void test_two_threads(void **state)
{
	(void)state;
	pthread_t t[2];
	void *rv[2];
	for (uintptr_t i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer, (void *)(i + 1)), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], &rv[i]), 0);
		assert_null(rv[i]);
	}
	assert_true(core_ring_pool_bytes() <= 131072);
	/* empty the lists, so the process ends with nothing kept */
	while (core_ring_pool_bytes()) {
		void *a = ring_get(16384), *b = ring_get(32768);
		free(a);
		free(b);
	}
}

int main(void)
{
	setenv("SMCR_RING_POOL_KB", "128", 1); /* read at the first use */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lifo),
	    cmocka_unit_test(test_other_sizes_bypass),
	    cmocka_unit_test(test_two_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
