/* twolink.h: helpers for the two-link core tests (tests/core/test_core_addlink.c,
 * test_core_failover.c): two engines in one process on loop devices (one or two each), a
 * fake clock, a log of every message each engine posts (which type, on which of its QPs,
 * its 44 bytes; WRITEs with rkey and address), and "hold rules" that stop a chosen message
 * on its path (loopdev.h hold) the moment it is posted, so a test can put a failure or a
 * timeout at an exact step of a flow. Single-threaded. */
#ifndef SMCR_TESTS_TWOLINK_H
#define SMCR_TESTS_TWOLINK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core_int.h"
#include "lib/core_pair.h"
#include "lib/emu_netns.h"
#include "lib/loopdev.h"

#define TL_MS 1000000ull
#define TL_SEC 1000000000ull
#define TL_MAX_EV 8192
#define TL_NPP 32

struct tl_ev {
	enum core_trace_kind kind;
	uint8_t msg[44];		/* SEND: the message */
	uint32_t qpn;			/* the posting QP */
	struct core_link *link;		/* its link (QP numbers are per device) */
	uint32_t rkey;			/* WRITE */
	uint64_t addr;
	uint32_t len;
	uint64_t now;
	int big;			/* SEND longer than 44 bytes: index in tl_log.big, else -1 */
};

#define TL_MAX_BIG 16
#define TL_BIG_LEN 8192

struct tl_log {
	struct core_engine *e;
	unsigned n;
	struct tl_ev ev[TL_MAX_EV];
	/* hold rule: the nth (1-based) SEND of this type byte (and response flag for LLC)
	 * puts its QP's path on hold, so that message and everything after it wait */
	int hold_type;			/* -1: none */
	bool hold_resp;
	unsigned hold_nth, seen;
	struct dev_qp *held;		/* the QP put on hold */
	/* the first TL_MAX_BIG SENDs longer than 44 bytes (v2 LLC), whole */
	unsigned nbig;
	uint8_t big[TL_MAX_BIG][TL_BIG_LEN];
};

struct tl_fix {
	struct core_engine *ce, *se;
	struct tl_log *lc, *ls;		/* client's and server's logs */
	struct cp_pair pp[TL_NPP];	/* connection pairs tl_connect makes */
	unsigned npp;
	uint64_t now;
};

/* Engines with ncli / nsrv loop devices; fx->now set. 0 or -1. */
int tl_setup(struct tl_fix *fx, int ncli, int nsrv);
/* The same on another provider (e.g. "shm"): no hold rules (they are loop's). */
int tl_setup_spec(struct tl_fix *fx, const char *spec, int ncli, int nsrv);
/* Each device its own spec (cli[0..ncli-1], srv[0..nsrv-1]). */
int tl_setup_specs(struct tl_fix *fx, const char *const *cli, int ncli, const char *const *srv,
		   int nsrv);
/* SMC-R v2: ncli / nsrv "loop:gid=v2" devices each, the user EID ueid on both. */
int tl_setup_v2(struct tl_fix *fx, int ncli, int nsrv, const char *ueid);
void tl_teardown(struct tl_fix *fx);
/* Connects pair i (0..TL_NPP-1) on the fake clock; true if SMC-R on both ends. */
bool tl_connect(struct tl_fix *fx, unsigned i);
/* Progress both engines at time t (the loop paths' clock too), n rounds. */
void tl_at(struct tl_fix *fx, uint64_t t);
/* Log index of the next SEND from index *from with type byte type (and, for LLC types,
 * response flag resp; resp ignored for CDCs): -1 if none. Advances *from past it. */
int tl_next(struct tl_log *lg, unsigned *from, uint8_t type, int resp);
/* The QP of link slot i of the engine's only LG (NULL if none). */
struct core_lgr *tl_lg(struct core_engine *e);
unsigned tl_links(struct core_engine *e);
void tl_hold(struct tl_log *lg, uint8_t type, bool resp, unsigned nth);
/* Clears every path control of qp (both directions). */
void tl_release(struct dev_qp *qp);
/* Sends all of len bytes of stream seed from tx, receiving on rx, checking the bytes
 * (cp_stream_check); returns bytes moved, or -1. */
long tl_move(struct tl_fix *fx, struct core_conn *tx, struct core_conn *rx, uint64_t off,
	     size_t len, uint64_t seed);

/* Two paths in real time (emu over the two veth pairs of emu_netns_setup2, the engines in
 * this process, each device's TCP in its namespace): ndev (1 or 2) emu devices per engine,
 * device i on path i, on the given emu port; waits until every device's port is active
 * (a veth just made or brought up reports its carrier a moment later, and a group started
 * before would put both links on one path). 0, or -1 (fixture not made, or ports not up
 * within 10 s). */
int tl_setup_netns(struct tl_fix *fx, const struct emu_netns *nn, int ndev, unsigned port);
/* Every device of both engines (the first ndev) with its port active within max_ns: 0/-1. */
int tl_wait_ports(struct tl_fix *fx, int ndev, uint64_t max_ns);
/* One progress round at the real time (smcr_now_ns). */
void tl_tick(struct tl_fix *fx);
/* Progresses until both engines' group has want active links: 0, or -1 after max_ns. */
int tl_wait_links(struct tl_fix *fx, unsigned want, uint64_t max_ns);
#endif
