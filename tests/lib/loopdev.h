/* loopdev.h: "loop", an in-process RDMA provider for tests (tests only, never linked into
 * the library). Every operation completes synchronously inside the call under one global
 * lock: a WRITE is in the target's memory and a SEND in the target's receive buffer (or
 * queued for it: RNR retry is infinite) before post_send returns. Deterministic, so engine
 * tests over it are exact; it keeps the RC rules of dev.h that the engine relies on
 * (ordering, access checks per PD/rkey/bounds, flush on error, peer loss).
 *
 * dev_open("loop") or dev_open("loop:inline=N") (N = max inline bytes, default 128;
 * a large N exercises the engine's zero-staging path); "gid=v2" (also "loop:gid=v2,inline=N")
 * gives the device an IPv4-mapped GID of type RoCE v2 (::ffff:10.x.y.z), SMC-R v2's path. */
#ifndef SMCR_TESTS_LOOPDEV_H
#define SMCR_TESTS_LOOPDEV_H

#include "dev/dev.h"

int loopdev_register(void);

/* Simulates the death of the device's owner: every QP of dev goes to ERR (flushing its
 * work requests) and every QP connected to one of them gets DEV_EVENT_QP_FATAL and goes to
 * ERR too, as an RC peer would after its transport timeout. */
void loopdev_kill(struct dev_device *dev);

/* The device opened last (e.g. right after creating an engine on "loop"). */
struct dev_device *loopdev_last_opened(void);

/* Counters for tests: WRITE and SEND work requests executed, bytes written. */
struct loopdev_stats {
	unsigned long writes, sends, write_bytes, access_errors;
	unsigned long send_type[256];	/* SENDs by their first byte (LLC/CDC type) */
	uint8_t last_send[64];		/* the last SEND's first bytes */
	size_t last_send_len;
};
void loopdev_stats(struct loopdev_stats *st);

#endif
