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

#include <stdbool.h>
#include <stdint.h>

#include "dev/dev.h"

int loopdev_register(void);

/* Simulates the death of the device's owner: every QP of dev goes to ERR (flushing its
 * work requests) and every QP connected to one of them gets DEV_EVENT_QP_FATAL and goes to
 * ERR too, as an RC peer would after its transport timeout. */
void loopdev_kill(struct dev_device *dev);

/* Per-path controls in simulated time, for link failure tests (issue 22). A path is one
 * direction of one link (a QP's sends); loopdev_link_set sets both directions. While a
 * path has no control set and nothing queued, its WRs complete inside post_send as above;
 * otherwise they are queued in order and run when loopdev_clock passes their time:
 *   cut      the wire is gone: what is in flight and every WR posted meanwhile ends with
 *            RETRY_EXC_ERR timeout_ns after the cut (or its post) and the QP goes to ERR,
 *            with a QP_FATAL event, as RC after its retries; the peer sees nothing until it
 *            sends itself (the reason for TEST LINK, docs/protocol/procedures.md 3.5).
 *   delay_ns every WR executes (WRITE in the target's memory, SEND delivered, completion)
 *            delay_ns after its post.
 *   drop     the next drop WRs are lost once on the wire: RC resends each after
 *            retrans_ns; order is kept (RC never reorders a QP's WRs), so later WRs wait.
 *   hold     nothing executes until hold is cleared (then what is due runs at the next
 *            loopdev_clock): another link's traffic can be delivered first, the reorder
 *            between links a failover sees. (Reordering within one QP is not offered: RC
 *            forbids it and the engine relies on that, docs/protocol/procedures.md 4.7.)
 *   noack    the ACKs are lost: every WR executes at its post (the responder has the
 *            bytes and the SEND) but its completion waits; a later cut ends it with
 *            RETRY_EXC_ERR timeout_ns after the cut (RC: the requester never heard the
 *            ACK), clearing noack completes it (a late ACK).
 * Default times from the QP attributes the engine sets (link.c: timeout 15, retry 7):
 * 4.096 us * 2^15 = 134 ms per retransmission, 8 tries = 1.07 s to the error. */
#define LOOPDEV_RETRANS_NS 134217728ull
#define LOOPDEV_TIMEOUT_NS (8 * LOOPDEV_RETRANS_NS)
struct loopdev_path {
	bool cut;
	bool hold;
	bool noack;
	unsigned drop;
	uint64_t delay_ns;
	uint64_t timeout_ns;	/* 0: LOOPDEV_TIMEOUT_NS */
	uint64_t retrans_ns;	/* 0: LOOPDEV_RETRANS_NS */
};
void loopdev_path_set(struct dev_qp *qp, const struct loopdev_path *p);
void loopdev_link_set(struct dev_qp *qp, const struct loopdev_path *p);
/* Simulated time (never goes back): runs every queued WR due by now. */
void loopdev_clock(uint64_t now);
/* WRs of qp queued on its path. */
unsigned loopdev_queued(struct dev_qp *qp);

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
