/* fdtab.c: lock-free fd -> socket object map (see fdtab.h for the rules). */
#include "sock/fdtab.h"

#include <stdlib.h>

typedef _Atomic(struct fdobj *) fdslot;

/* Directory: written once per chunk (compare-and-swap from NULL), read by anyone. */
static _Atomic(fdslot *) fdtab_dir[FDTAB_DIR];
/* Installed count: for tests and stats only. */
static _Atomic unsigned fdtab_n;

static fdslot *fdtab_slot(int fd, bool create)
{
	if (fd < 0 || fd >= FDTAB_MAX)
		return NULL;
	unsigned d = (unsigned)fd / FDTAB_CHUNK;
	/* acquire: pairs with the release of the CAS below, so the chunk's zeroed slots are
	 * seen initialised. */
	fdslot *chunk = atomic_load_explicit(&fdtab_dir[d], memory_order_acquire);
	if (!chunk && create) {
		fdslot *fresh = calloc(FDTAB_CHUNK, sizeof(*fresh));
		if (!fresh)
			return NULL;
		for (unsigned i = 0; i < FDTAB_CHUNK; i++)
			atomic_init(&fresh[i], NULL);
		fdslot *expect = NULL;
		if (atomic_compare_exchange_strong_explicit(&fdtab_dir[d], &expect, fresh,
							    memory_order_acq_rel,
							    memory_order_acquire)) {
			chunk = fresh;
		} else {
			free(fresh); /* another thread installed one first */
			chunk = expect;
		}
	}
	return chunk ? &chunk[(unsigned)fd % FDTAB_CHUNK] : NULL;
}

/* Takes a reference unless the count is 0 (object free or being recycled). */
static bool fdobj_tryhold(struct fdobj *o)
{
	uint32_t r = atomic_load_explicit(&o->ref, memory_order_relaxed);
	while (r != 0) {
		/* acquire on success: pairs with the release in fdtab_set's installer (the
		 * object's fields were initialised before its count became non-zero). */
		if (atomic_compare_exchange_weak_explicit(&o->ref, &r, r + 1,
							  memory_order_acquire,
							  memory_order_relaxed))
			return true;
	}
	return false;
}

struct fdobj *fdtab_get(int fd)
{
	fdslot *s = fdtab_slot(fd, false);
	if (!s)
		return NULL;
	for (;;) {
		struct fdobj *o = atomic_load_explicit(s, memory_order_acquire);
		if (!o)
			return NULL;
		if (!fdobj_tryhold(o))
			continue; /* being recycled: the slot has changed or will be NULL */
		/* Still what the fd names? (It may have been cleared and reused meanwhile.) */
		if (atomic_load_explicit(s, memory_order_acquire) == o)
			return o;
		/* Removed meanwhile; if its remover already put the table's reference, this
		 * put is the last one and recycles it. */
		fdobj_put(o);
	}
}

int fdtab_set(int fd, struct fdobj *o)
{
	if (fd < 0 || fd >= FDTAB_MAX)
		return -SMCR_E_SOCK_FD_RANGE;
	fdslot *s = fdtab_slot(fd, true);
	if (!s)
		return -SMCR_E_NOMEM;
	struct fdobj *expect = NULL;
	/* release: the object's fields are initialised before a reader can find it. */
	if (!atomic_compare_exchange_strong_explicit(s, &expect, o, memory_order_release,
						     memory_order_relaxed))
		return -SMCR_E_SOCK_FDTAB_BUSY;
	atomic_fetch_add_explicit(&fdtab_n, 1, memory_order_relaxed);
	return 0;
}

bool fdtab_clear(int fd, struct fdobj *o)
{
	fdslot *s = fdtab_slot(fd, false);
	if (!s)
		return false;
	struct fdobj *expect = o;
	if (!atomic_compare_exchange_strong_explicit(s, &expect, NULL, memory_order_acq_rel,
						     memory_order_relaxed))
		return false;
	atomic_fetch_sub_explicit(&fdtab_n, 1, memory_order_relaxed);
	return true;
}

int fdtab_next(int from)
{
	if (from < 0)
		from = 0;
	for (unsigned d = (unsigned)from / FDTAB_CHUNK; d < FDTAB_DIR; d++) {
		fdslot *chunk = atomic_load_explicit(&fdtab_dir[d], memory_order_acquire);
		if (!chunk)
			continue;
		unsigned i = d == (unsigned)from / FDTAB_CHUNK ? (unsigned)from % FDTAB_CHUNK : 0;
		for (; i < FDTAB_CHUNK; i++)
			if (atomic_load_explicit(&chunk[i], memory_order_acquire))
				return (int)(d * FDTAB_CHUNK + i);
	}
	return -1;
}

bool fdtab_has(int fd)
{
	fdslot *s = fdtab_slot(fd, false);
	return s && atomic_load_explicit(s, memory_order_relaxed);
}

unsigned fdtab_count(void)
{
	return atomic_load_explicit(&fdtab_n, memory_order_relaxed);
}

void fdtab_fini(void)
{
	for (unsigned d = 0; d < FDTAB_DIR; d++) {
		fdslot *c = atomic_exchange(&fdtab_dir[d], NULL);
		free(c);
	}
	atomic_store(&fdtab_n, 0);
}

void fdobj_hold(struct fdobj *o)
{
	atomic_fetch_add_explicit(&o->ref, 1, memory_order_relaxed);
}

void fdobj_put(struct fdobj *o)
{
	/* acq_rel: the last putter sees every write the other holders made before their put. */
	uint32_t r = atomic_fetch_sub_explicit(&o->ref, 1, memory_order_acq_rel);
	if (r == 0)
		abort(); /* put without hold: a bug, never silently wrap */
	if (r == 1)
		o->release(o);
}
