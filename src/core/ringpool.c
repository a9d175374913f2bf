/* ringpool.c: the send rings' free list (tx.c's sb_append and tx_flush_locked).
 *
 * A connection's send ring holds only the bytes the peer's RMBE had no room for, and is
 * empty again as soon as a flush has written them. It is given back here when it empties
 * and taken again at the next byte that needs it. The list is last in, first out, so the
 * next taker gets the ring a flush has just read: its lines are in the cache and its pages
 * are resident. With one ring per connection kept for the connection's life, 1000
 * streaming connections wrote into 64 MiB of rings last touched a whole loop cycle before
 * (out of the cache), and a new set of connections took page faults on fresh ones
 * (docs/parts/conns.md "Memory").
 *
 * One list per size (the ring sizes are powers of two, tx_sndbuf_size), all under one
 * mutex; the bytes kept are bounded (RING_POOL_BYTES, $SMCR_RING_POOL_KB; 0: no list, a
 * ring is kept for its connection's life as before). Rings are plain malloc memory: a
 * forked child's copy of the list is valid (the atfork handlers keep the mutex sane). */
#include "core/core_int.h"

#include <pthread.h>
#include <stdlib.h>

#include "util/env.h"

#define RING_POOL_BYTES (16u << 20)
#define RING_SHIFT_MIN 14 /* CORE_SNDBUF_MIN */
#define RING_SHIFT_MAX 20 /* CORE_SNDBUF_MAX */
#define RING_CLASSES (RING_SHIFT_MAX - RING_SHIFT_MIN + 1)
#define RING_SLOTS 1024   /* per class: 16 MiB of 16 KiB rings */

_Static_assert(CORE_SNDBUF_MIN == 1u << RING_SHIFT_MIN, "ring classes start at the minimum");
_Static_assert(CORE_SNDBUF_MAX == 1u << RING_SHIFT_MAX, "ring classes end at the maximum");

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static uint64_t pool_cap;                /* [once] bytes the lists may keep */
static uint64_t pool_bytes;              /* [pool_lock] bytes kept now */
static unsigned pool_n[RING_CLASSES];    /* [pool_lock] */
static void *pool_v[RING_CLASSES][RING_SLOTS]; /* [pool_lock] most recent last */

static void pool_prepare(void) { pthread_mutex_lock(&pool_lock); }
static void pool_parent(void) { pthread_mutex_unlock(&pool_lock); }
static void pool_child(void) { pthread_mutex_init(&pool_lock, NULL); }

static void pool_init(void)
{
	pool_cap = smcr_env_num_or("SMCR_RING_POOL_KB", 0, 1u << 22, RING_POOL_BYTES >> 10) << 10;
	pthread_atfork(pool_prepare, pool_parent, pool_child);
}

/* The class of a ring size, or -1 if it is not one of the powers of two. */
static int ring_class(uint32_t size)
{
	if (size < CORE_SNDBUF_MIN || size > CORE_SNDBUF_MAX || (size & (size - 1)))
		return -1;
	return __builtin_ctz(size) - RING_SHIFT_MIN;
}

void *ring_get(uint32_t size)
{
	pthread_once(&pool_once, pool_init);
	int k = ring_class(size);
	void *p = NULL;
	if (k >= 0 && pool_cap) {
		pthread_mutex_lock(&pool_lock);
		if (pool_n[k]) {
			p = pool_v[k][--pool_n[k]];
			pool_bytes -= size;
		}
		pthread_mutex_unlock(&pool_lock);
	}
	return p ? p : malloc(size);
}

void ring_put(void *p, uint32_t size)
{
	if (!p)
		return;
	pthread_once(&pool_once, pool_init);
	int k = ring_class(size);
	if (k >= 0 && pool_cap) {
		pthread_mutex_lock(&pool_lock);
		if (pool_n[k] < RING_SLOTS && pool_bytes + size <= pool_cap) {
			pool_v[k][pool_n[k]++] = p;
			pool_bytes += size;
			p = NULL;
		}
		pthread_mutex_unlock(&pool_lock);
	}
	free(p);
}

uint64_t core_ring_pool_bytes(void)
{
	pthread_mutex_lock(&pool_lock);
	uint64_t b = pool_bytes;
	pthread_mutex_unlock(&pool_lock);
	return b;
}

bool ring_pool_on(void)
{
	pthread_once(&pool_once, pool_init);
	return pool_cap != 0;
}
