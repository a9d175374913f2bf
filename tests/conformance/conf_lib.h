/* conf_lib.h: helpers of the device conformance tests (conf_lib.c). */
#ifndef SMCR_TESTS_CONF_LIB_H
#define SMCR_TESTS_CONF_LIB_H

#include <stdbool.h>
#include <stdint.h>

#include "dev/dev.h"

#define BUF_LEN (1u << 20)
#define SPIN_NS 20000u
#define WAIT_MS 2000

struct conf_provider {
	const char *name;
	int (*reg)(void);
	const char *spec;
};
/* The provider under test (set by main). */
extern const struct conf_provider *prov;
/* The shm-only tests' main: makes shm the provider under test and registers it. 0, or -1
 * if it could not be registered. */
int conf_use_shm(void);

/* One end: device, PD, send/receive CQs, a 1 MiB remote-writable buffer (the "RMB") and a
 * 1 MiB local one (send sources, receive buffers). */
struct side {
	struct dev_device *dev;
	struct dev_pd *pd;
	struct dev_cq *scq, *rcq;
	struct dev_mem *rmem, *lmem;
	struct dev_mr *rmr;
	struct dev_mr *lmr;
	struct dev_gid gid;
	uint8_t *rbuf, *lbuf;
};

int side_open(struct side *s, int cqe);
void side_close(struct side *s);
/* Opens both sides, a 16/16 QP on each, connects them (RNR retry 7) and pings once each
 * way, so the pair is paired and WRITEs run in post_send's thread. */
void pair_open(struct side *a, struct dev_qp **qa, struct side *b, struct dev_qp **qb);
/* Destroys both QPs of a pair, then closes both sides (the tests' teardown). */
void pair_close(struct side *a, struct dev_qp *qa, struct side *b, struct dev_qp *qb);
struct dev_qp *qp_new(struct side *s, uint32_t sq, uint32_t rq, int sig_all);
void qp_init(struct dev_qp *q);
void qp_rtr(struct dev_qp *q, const struct dev_gid *dgid, uint32_t dqpn);
void qp_rts(struct dev_qp *q, uint8_t rnr_retry);
void connect_pair(struct side *a, struct dev_qp *qa, struct side *b, struct dev_qp *qb,
		  uint8_t rnr_retry);
int wait_wc(struct dev_cq *cq, struct dev_wc *wc, int timeout_ms);
void expect_wc(struct dev_cq *cq, uint64_t wr_id, enum dev_wc_status st, enum dev_wc_opcode op);
void expect_no_wc(struct dev_cq *cq, int ms);
void ping_pair(struct side *a, struct dev_qp *qa, struct side *b, struct dev_qp *qb);
void post_recv(struct side *s, struct dev_qp *q, uint64_t off, uint32_t len, uint64_t id);
int post_send(struct dev_qp *q, enum dev_wr_opcode op, unsigned flags, struct dev_sge *sg,
	      int nsge, uint64_t raddr, uint32_t rkey, uint32_t imm, uint64_t id);
struct dev_sge lsge(struct side *s, uint64_t off, uint32_t len);
uint64_t raddr(struct side *s, uint64_t off);
int wait_state(struct dev_qp *q, enum dev_qp_state st, int ms);
int wait_event(struct dev_device *d, enum dev_event_type t, uint32_t qpn, int ms);
int count_fds(void);

/* A hardware RC provider (verbs): where dev.h's rules 5-7 are stricter than RC itself
 * (they hold for the software providers), the suite checks RC's own behaviour instead:
 * the responder of an RNR or a too-long SEND is not told the requester gave up, a QP
 * moved to ERR sends nothing to its peer, a dead peer is noticed by the side that sends
 * (retry exceeded, no async event), and src_qp is defined only for UD (dev.h). */
bool rc_hw(void);
/* Hardware RC, a peer that no longer answers: the signaled SEND wr_id just posted on q
 * fails with retry exceeded, or stays outstanding for wait_ms (then q is taken down as the
 * engine would, and it flushes); never a success. Ends with q in ERR. */
void hw_silent_peer(struct dev_qp *q, struct dev_cq *scq, uint64_t wr_id, int wait_ms,
		    const char *what);
/* The "peer killed" test's check, the same in both of the suite's modes: the process that
 * owned q's peer QP was SIGKILLed at t0 (smcr_now_ns) while sending to us. A software
 * provider notices by itself (QP_FATAL, rule 5); on hardware RC our next SEND finds out
 * (hw_silent_peer, waiting up to hw_wait_ms). Then q is in ERR and each of its nrecv
 * receive WRs comes back once (arrived before the kill, or flushed). */
void peer_gone_check(struct side *s, struct dev_qp *q, int nrecv, uint64_t t0, int hw_wait_ms);

/* What the peer process of the "peer killed" test (`conformance <provider> --peer`) and
 * its parent exchange over their pipes, in both directions: this end's QP and RMB. */
struct conf_peer_ends {
	struct dev_gid gid;
	uint32_t qpn, rkey;
	uint64_t addr;
};

#endif
