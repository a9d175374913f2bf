/* fdtab.h: the map from a program-visible fd number to its smcr socket object.
 *
 * Every smcr_ call starts with a lookup, so the read path takes no lock: a two-level table
 * of atomic pointers (a directory of FDTAB_CHUNK-entry chunks, allocated on first use and
 * kept until fdtab_fini), and a reference count in the object taken with
 * increment-if-non-zero, then checked again against the table (the object may have been
 * removed and reused in between; the re-check makes the caller's reference one to the
 * object the fd names at that moment, as the kernel's fget does).
 *
 * The objects must be type-stable (SLAB_TYPESAFE_BY_RCU in the kernel's words): memory that
 * was ever in the table is never returned to malloc while lookups may run, only recycled as
 * an object of the same type, so a lookup that loses the race reads a count of 0 or of a
 * newer incarnation, never freed memory. The socket layer's pool (sock.c) does that.
 *
 * Writers (set, clear) are atomic compare-and-swap; the caller serializes set/clear of one
 * fd number (the kernel gives a number to one open file at a time, and the socket layer
 * clears before it closes). */
#ifndef SMCR_SOCK_FDTAB_H
#define SMCR_SOCK_FDTAB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

#define FDTAB_CHUNK 1024
#define FDTAB_DIR 1024
#define FDTAB_MAX (FDTAB_CHUNK * FDTAB_DIR) /* fds at or above this are never smcr sockets */

/* Embedded in every object the table holds. ref == 0: free (in the pool). release is set
 * once, before the object is first published, and never changes (type-stable memory); it
 * is called by whichever put drops the last reference (possibly a lookup that lost a race). */
struct fdobj {
	_Atomic uint32_t ref;
	void (*release)(struct fdobj *o);
};

/* Looks fd up; on success returns the object with one reference taken (fdobj_put releases
 * it), else NULL. Lock-free; any thread. */
struct fdobj *fdtab_get(int fd);
/* Whether fd has an object installed now, without a reference: a hint that may be stale
 * by the time the caller acts (the waits of src/preload choosing their path). */
bool fdtab_has(int fd);
/* Installs o (which holds a reference of its own for the table) at fd. -SMCR_E_SOCK_FDTAB_BUSY
 * if the slot is taken, -SMCR_E_SOCK_FD_RANGE if fd is out of range, -SMCR_E_NOMEM. */
SMCR_MUST_CHECK int fdtab_set(int fd, struct fdobj *o);
/* Removes o from fd if it is there (returns true; the table's reference passes to the
 * caller), else false. */
bool fdtab_clear(int fd, struct fdobj *o);
/* The lowest fd >= from with an object installed now, or -1 (walking the table: the
 * exit handler). */
int fdtab_next(int from);
/* Number of installed fds (tests: no growth). */
unsigned fdtab_count(void);
/* Frees the chunks. Only when no thread can look up any more (tests, process end). */
void fdtab_fini(void);

/* References. hold: the caller already has one. put: the last one calls o->release. */
void fdobj_hold(struct fdobj *o);
void fdobj_put(struct fdobj *o);

#endif
