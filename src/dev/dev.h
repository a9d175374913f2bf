/* dev.h: the RDMA device interface of smcr, the subset of libibverbs that SMC-R uses
 * (RFC 7609 2.1, 4; docs/protocol/procedures.md 2.6 and 4.3, docs/protocol/linux-interop.md 6),
 * with verbs semantics, implemented by providers (STYLE.md 14-17).
 *
 * What SMC-R needs from RDMA: reliable-connected (RC) queue pairs, RDMA WRITEs into the peer's
 * registered memory (RMBEs) and 44-byte SENDs (LLC, CDC) that the peer receives after every
 * WRITE posted before them on the same QP (docs/protocol/procedures.md 4.7). Everything here keeps
 * the meaning of the libibverbs call of the same name (ibv_open_device, ibv_reg_mr,
 * ibv_create_cq, ibv_req_notify_cq, ibv_get_cq_event, ibv_poll_cq, ibv_create_qp,
 * ibv_modify_qp, ibv_post_send, ibv_post_recv, ibv_get_async_event), so a libibverbs
 * provider maps each call 1:1. Deviations from verbs are marked "DIFFERS".
 *
 * Layering: dev depends on util only. The protocol core uses this header and never a
 * provider's. Providers (dev/shm, dev/emu, dev/verbs) implement struct dev_ops, embed the
 * generic objects below in their own (container_of back, DEV_CONTAINER_OF) and register
 * themselves by name (dev_provider_register); the socket layer calls each provider's
 * register function once at start.
 *
 * Errors: every function returns 0 (or a count) on success and -SMCR_E_<NAME> on failure
 * (util/err.h; this unit's rows are in util/errors/dev.def). Unsupported operations return
 * -SMCR_E_NOTSUP (errno EOPNOTSUPP) from the defaults table: the core never checks for NULL.
 *
 * Threads: every call may be made from any thread; objects are thread-safe as in verbs
 * (two threads may post to one QP, or poll one CQ, at once). A device is not usable in a
 * child after fork(): open a new one there (as verbs without ibv_fork_init).
 *
 * Lifetime (who owns what; docs/parts/dev-shm.md "Lifetime"):
 *   - dev_open*() returns a device with one reference, owned by the caller; dev_close()
 *     (== dev_put) drops it. Every PD, CQ, MR and QP holds its device (taken by the core
 *     wrappers here, released when the child is destroyed), so the device is freed
 *     (ops->close_device) only after its last child is gone.
 *   - Children are destroyed explicitly, as in verbs: dev_dealloc_pd fails with
 *     -SMCR_E_DEV_BUSY while MRs or QPs use the PD, dev_destroy_cq while a QP uses the CQ.
 *     The core keeps these counts (users); providers need not.
 *   - dev_mem buffers are reference counted (dev_mem_hold/put); a provider that keeps
 *     using a buffer (shm: an MR shared with a peer) holds it.
 *
 * Semantics every provider keeps, as RC does (checked by tests/conformance/):
 *   1. In-order delivery per QP: SENDs are received, and WRITEs land, in posting order.
 *   2. An RDMA WRITE is visible in the peer's memory before any SEND (or WRITE_WITH_IMM)
 *      posted after it on the same QP is received there.
 *   3. A WRITE outside a registered region, with a wrong or deregistered rkey, or into an
 *      MR without REMOTE_WRITE or of another PD fails with DEV_WC_REM_ACCESS_ERR at the
 *      sender; both QPs go to ERR (the target raises DEV_EVENT_QP_ACCESS_ERR or
 *      QP_FATAL and flushes).
 *   4. A QP in ERR completes every posted and every later-posted WR with
 *      DEV_WC_WR_FLUSH_ERR (in order; send WRs complete even when unsignaled).
 *   5. A vanished peer (process died, QP destroyed, port down) is detected in bounded time:
 *      the QP goes to ERR, the WR in progress completes with DEV_WC_RETRY_EXC_ERR, the rest
 *      flush, DEV_EVENT_QP_FATAL is queued. (shm: within 100 ms of the peer's death.)
 *   6. Receive queue empty when a SEND or WRITE_WITH_IMM arrives: RNR retry as RC does:
 *      with rnr_retry 7 (infinite, what SMC-R uses) the message waits until a receive WR
 *      is posted; with rnr_retry < 7 the sender's WR fails with DEV_WC_RNR_RETRY_EXC_ERR
 *      after about (rnr_retry + 1) RNR timer periods and both QPs go to ERR.
 *   7. A SEND longer than the receive WR's buffers: DEV_WC_LOC_LEN_ERR at the receiver and
 *      DEV_WC_REM_INV_REQ_ERR at the sender; both QPs go to ERR.
 *   8. A send WR's completion (signaled, success) means the peer QP has received it (SEND,
 *      WRITE_WITH_IMM) or it is in the peer's memory (WRITE).
 * Hardware RC (dev/verbs) keeps 1-4 and 8 and RC's own form of 5-7, which the core relies on
 * no more than that: only the requester of an RNR or too-long SEND goes to ERR (the error
 * kind of the NAK is the device's), a vanished peer is found by the side that sends (retry
 * exceeded, or never, on rxe loopback) and raises no async event (the core's TESTLINK and
 * error completions take the link down), src_qp is not set for RC, and a send queue may take
 * more than max_send_wr (docs/parts/verbs.md 4).
 */
#ifndef SMCR_DEV_DEV_H
#define SMCR_DEV_DEV_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define DEV_CONTAINER_OF(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ------------------------------------------------------------------------------------ */
/* Identity: GIDs and ports                                                             */

#define DEV_GID_LEN 16
#define DEV_MAC_LEN 6
#define DEV_NAME_MAX 32

/* A port GID as in the GID table (16 bytes, IPv6 format, network order). Same bytes as the
 * CLC/LLC GID fields (docs/protocol/wire-formats.md 2.3); the core converts with a memcpy. */
struct dev_gid {
	uint8_t raw[DEV_GID_LEN];
};

enum dev_gid_type {
	DEV_GID_TYPE_IB = 0,		/* InfiniBand */
	DEV_GID_TYPE_ROCE_V1 = 1,	/* what SMC-R v1 uses (docs/protocol/linux-interop.md 6) */
	DEV_GID_TYPE_ROCE_V2 = 2,	/* routable (UDP 4791): the GID is the port's IP address,
					 * ::ffff:a.b.c.d for IPv4 (dev_gid_ipv4); what SMC-R
					 * v2 needs (docs/parts/wire-v2.md 6) */
	DEV_GID_TYPE_SOFT = 3,		/* software provider (shm, emu): no wire format */
};

struct dev_gid_entry {
	struct dev_gid gid;
	enum dev_gid_type type;
	uint16_t vlan_id;		/* DEV_VLAN_NONE when untagged */
	uint8_t mac[DEV_MAC_LEN];	/* MAC of the port's netdev (CLC "MAC" field) */
};
#define DEV_VLAN_NONE 0xffffu

/* IB MTU codes, same values as the 4-bit QP MTU code on the wire
 * (docs/protocol/wire-formats.md). */
enum dev_mtu {
	DEV_MTU_256 = 1,
	DEV_MTU_512 = 2,
	DEV_MTU_1024 = 3,
	DEV_MTU_2048 = 4,
	DEV_MTU_4096 = 5,
};

enum dev_port_state {
	DEV_PORT_DOWN = 1,
	DEV_PORT_INIT = 2,
	DEV_PORT_ACTIVE = 4,	/* value as IBV_PORT_ACTIVE */
};

struct dev_port_attr {
	enum dev_port_state state;
	enum dev_mtu max_mtu;
	enum dev_mtu active_mtu;
	uint32_t gid_tbl_len;		/* valid indexes for dev_query_gid: 0..gid_tbl_len-1 */
	uint32_t max_msg_sz;		/* largest RDMA WRITE of one work request */
	uint32_t max_send_sz;		/* largest SEND (<= max_msg_sz; shm: 4096) */
};

struct dev_device_attr {
	char provider[DEV_NAME_MAX];	/* "shm", "emu", "verbs" */
	char name[DEV_NAME_MAX];	/* device instance, e.g. "shm0" */
	uint8_t phys_port_cnt;		/* ports are numbered 1..phys_port_cnt, as in verbs */
	uint32_t max_qp;
	uint32_t max_qp_wr;		/* per queue */
	uint32_t max_sge;		/* send SGEs per WR (SMC-R needs 2) */
	uint32_t max_inline_data;	/* bytes of DEV_SEND_INLINE data per WR */
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint64_t max_mr_size;
	uint64_t node_guid;
};

/* ------------------------------------------------------------------------------------ */
/* Objects. Providers embed these (first or not) and go back with DEV_CONTAINER_OF.     */
/* Fields are set by dev_*_init() helpers / the core wrappers and are read-only for    */
/* everyone else afterwards, except where a comment says otherwise.                    */

struct dev_ops;

struct dev_device {
	const struct dev_ops *ops;	/* the provider's table merged over the defaults */
	char provider[DEV_NAME_MAX];
	char name[DEV_NAME_MAX];
	int async_fd;			/* readable while async events are queued (see below) */
	uint8_t phys_port_cnt;
	_Atomic uint32_t refcnt;	/* dev_hold/dev_put; any thread */
};

struct dev_pd {
	struct dev_device *dev;		/* held until dev_dealloc_pd */
	_Atomic uint32_t users;		/* MRs + QPs using this PD; kept by the core wrappers */
};

/* Access flags of an MR (and of a QP: which remote operations it accepts). Values as verbs. */
enum dev_access {
	DEV_ACCESS_LOCAL_WRITE = 1u << 0,
	DEV_ACCESS_REMOTE_WRITE = 1u << 1,	/* needs LOCAL_WRITE too, as in verbs */
	DEV_ACCESS_REMOTE_READ = 1u << 2,	/* accepted, unused by SMC-R */
};

struct dev_mr {
	struct dev_pd *pd;
	void *addr;		/* first registered byte; the iova a peer uses in rdma.remote_addr */
	size_t length;
	uint32_t lkey;		/* for local SGEs */
	uint32_t rkey;		/* for a peer's RDMA WRITE; invalid as soon as dereg returns */
	unsigned access;	/* enum dev_access bits */
};

struct dev_cq {
	struct dev_device *dev;		/* held until dev_destroy_cq */
	void *cq_context;		/* the caller's, from dev_create_cq */
	int comp_fd;			/* completion fd: readable when an armed CQ got an event */
	int cqe;			/* capacity asked for (providers may grow, never shrink) */
	_Atomic uint32_t users;		/* QPs using this CQ (send or receive); core wrappers */
};

/* RC queue pair states and the transitions of ibv_modify_qp (IB spec 10.3.1):
 * RESET->INIT->RTR->RTS; any->ERR; any->RESET. A QP enters ERR by itself on a fatal error
 * (remote access error, retry exceeded, peer gone); it then flushes every posted WR with
 * DEV_WC_WR_FLUSH_ERR and raises DEV_EVENT_QP_FATAL (except on an explicit modify to ERR). */
enum dev_qp_state {
	DEV_QPS_RESET = 0,
	DEV_QPS_INIT = 1,
	DEV_QPS_RTR = 2,
	DEV_QPS_RTS = 3,
	DEV_QPS_ERR = 6,	/* values as enum ibv_qp_state */
};

struct dev_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

struct dev_qp_init_attr {
	struct dev_cq *send_cq;
	struct dev_cq *recv_cq;
	void *qp_context;	/* returned in async events */
	struct dev_qp_cap cap;	/* in: wanted; the provider writes the granted values to qp->cap */
	int sq_sig_all;		/* nonzero: every send WR completes, as if DEV_SEND_SIGNALED */
};

struct dev_qp {
	struct dev_device *dev;		/* held until dev_destroy_qp */
	struct dev_pd *pd;
	struct dev_cq *send_cq;
	struct dev_cq *recv_cq;
	void *qp_context;
	uint32_t qp_num;		/* 24-bit QPN, unique per device, never 0 */
	struct dev_qp_cap cap;		/* granted */
	/* Current state. Written by the provider only (under its QP lock), read by anyone
	 * without a lock as a hint (the authoritative answer is dev_query_qp). */
	_Atomic int state;		/* enum dev_qp_state */
};

/* dev_modify_qp attribute mask, values as enum ibv_qp_attr_mask. */
enum dev_qp_attr_mask {
	DEV_QP_STATE = 1u << 0,
	DEV_QP_ACCESS_FLAGS = 1u << 3,
	DEV_QP_PKEY_INDEX = 1u << 4,
	DEV_QP_PORT = 1u << 5,
	DEV_QP_AV = 1u << 7,
	DEV_QP_PATH_MTU = 1u << 8,
	DEV_QP_TIMEOUT = 1u << 9,
	DEV_QP_RETRY_CNT = 1u << 10,
	DEV_QP_RNR_RETRY = 1u << 11,
	DEV_QP_RQ_PSN = 1u << 12,
	DEV_QP_MAX_QP_RD_ATOMIC = 1u << 13,
	DEV_QP_MIN_RNR_TIMER = 1u << 15,
	DEV_QP_SQ_PSN = 1u << 16,
	DEV_QP_MAX_DEST_RD_ATOMIC = 1u << 17,
	DEV_QP_DEST_QPN = 1u << 20,
};

/* Required masks per transition (ibv_modify_qp, docs/protocol/procedures.md 2.6 lists SMC-R's
 * values). */
#define DEV_QP_MASK_INIT (DEV_QP_STATE | DEV_QP_PORT | DEV_QP_ACCESS_FLAGS)
#define DEV_QP_MASK_RTR                                                                  \
	(DEV_QP_STATE | DEV_QP_AV | DEV_QP_PATH_MTU | DEV_QP_DEST_QPN | DEV_QP_RQ_PSN |  \
	 DEV_QP_MAX_DEST_RD_ATOMIC | DEV_QP_MIN_RNR_TIMER)
#define DEV_QP_MASK_RTS                                                                  \
	(DEV_QP_STATE | DEV_QP_SQ_PSN | DEV_QP_TIMEOUT | DEV_QP_RETRY_CNT |              \
	 DEV_QP_RNR_RETRY | DEV_QP_MAX_QP_RD_ATOMIC)

/* Address vector of an RC QP (RoCE: always global). */
struct dev_ah_attr {
	struct dev_gid dgid;		/* the peer port's GID */
	uint8_t sgid_index;		/* our GID's index on port_num */
	uint8_t hop_limit;		/* 1 for RoCE v1 */
	uint8_t port_num;
	uint8_t dmac[DEV_MAC_LEN];	/* the peer's MAC (verbs resolves it itself; kept for emu) */
};

struct dev_qp_attr {
	enum dev_qp_state qp_state;	/* DEV_QP_STATE */
	unsigned qp_access_flags;	/* DEV_QP_ACCESS_FLAGS: DEV_ACCESS_REMOTE_WRITE etc. */
	uint16_t pkey_index;		/* DEV_QP_PKEY_INDEX */
	uint8_t port_num;		/* DEV_QP_PORT */
	struct dev_ah_attr ah_attr;	/* DEV_QP_AV */
	enum dev_mtu path_mtu;		/* DEV_QP_PATH_MTU */
	uint32_t dest_qp_num;		/* DEV_QP_DEST_QPN: the peer's 24-bit QPN */
	uint32_t rq_psn;		/* DEV_QP_RQ_PSN: the peer's initial PSN (24 bits) */
	uint32_t sq_psn;		/* DEV_QP_SQ_PSN: our initial PSN (24 bits) */
	uint8_t timeout;		/* DEV_QP_TIMEOUT: 4.096 us * 2^timeout (SMC-R: 15) */
	uint8_t retry_cnt;		/* DEV_QP_RETRY_CNT (SMC-R: 7) */
	uint8_t rnr_retry;		/* DEV_QP_RNR_RETRY: 7 = infinite (SMC-R: 7) */
	uint8_t min_rnr_timer;		/* DEV_QP_MIN_RNR_TIMER (SMC-R: 5) */
	uint8_t max_rd_atomic;		/* DEV_QP_MAX_QP_RD_ATOMIC */
	uint8_t max_dest_rd_atomic;	/* DEV_QP_MAX_DEST_RD_ATOMIC */
};

/* ------------------------------------------------------------------------------------ */
/* Work requests and completions                                                        */

struct dev_sge {
	uint64_t addr;		/* local address inside the MR of lkey */
	uint32_t length;
	uint32_t lkey;
};

enum dev_wr_opcode {
	DEV_WR_RDMA_WRITE = 0,
	DEV_WR_RDMA_WRITE_WITH_IMM = 1,
	DEV_WR_SEND = 2,
};

enum dev_send_flags {
	DEV_SEND_FENCE = 1u << 0,	/* accepted; RC here is strictly ordered anyway */
	DEV_SEND_SIGNALED = 1u << 1,	/* produce a completion on success */
	DEV_SEND_SOLICITED = 1u << 2,	/* wake a CQ armed with solicited_only at the peer */
	DEV_SEND_INLINE = 1u << 3,	/* copy the data at post time; lkeys are not checked */
};

struct dev_send_wr {
	uint64_t wr_id;
	struct dev_send_wr *next;	/* verbs-style list; NULL ends it */
	struct dev_sge *sg_list;
	int num_sge;			/* 0..qp->cap.max_send_sge (SMC-R WRITEs use up to 2) */
	enum dev_wr_opcode opcode;
	unsigned send_flags;		/* enum dev_send_flags */
	uint32_t imm_data;		/* WRITE_WITH_IMM; host order (DIFFERS: verbs is BE) */
	struct {
		uint64_t remote_addr;	/* peer MR's addr + offset */
		uint32_t rkey;
	} rdma;				/* RDMA_WRITE(_WITH_IMM) */
};

struct dev_recv_wr {
	uint64_t wr_id;
	struct dev_recv_wr *next;
	struct dev_sge *sg_list;
	int num_sge;			/* 0..qp->cap.max_recv_sge */
};

enum dev_wc_status {
	DEV_WC_SUCCESS = 0,
	DEV_WC_LOC_LEN_ERR = 1,		/* received message longer than the receive buffers */
	DEV_WC_LOC_QP_OP_ERR = 2,
	DEV_WC_LOC_PROT_ERR = 4,	/* local SGE outside its MR / wrong lkey */
	DEV_WC_WR_FLUSH_ERR = 5,	/* QP in ERR: posted WR flushed */
	DEV_WC_REM_INV_REQ_ERR = 9,	/* peer rejected the request (e.g. too long) */
	DEV_WC_REM_ACCESS_ERR = 10,	/* bad rkey, out of bounds, no remote write access */
	DEV_WC_REM_OP_ERR = 11,
	DEV_WC_RETRY_EXC_ERR = 12,	/* peer gone / unreachable in the transport timeout */
	DEV_WC_RNR_RETRY_EXC_ERR = 13,	/* peer had no receive WR for the RNR retries */
	DEV_WC_FATAL_ERR = 15,
	DEV_WC_GENERAL_ERR = 21,	/* values as enum ibv_wc_status */
};

enum dev_wc_opcode {
	DEV_WC_SEND = 0,
	DEV_WC_RDMA_WRITE = 1,
	DEV_WC_RECV = 128,
	DEV_WC_RECV_RDMA_WITH_IMM = 129,
};

enum dev_wc_flags {
	DEV_WC_WITH_IMM = 1u << 1,
};

/* One completion. As in verbs, only wr_id, status and qp_num are valid when status is not
 * DEV_WC_SUCCESS (opcode is then set by our providers on a best-effort basis). */
struct dev_wc {
	uint64_t wr_id;
	enum dev_wc_status status;
	enum dev_wc_opcode opcode;
	uint32_t byte_len;		/* receive: bytes received (WRITE_WITH_IMM: bytes written) */
	uint32_t imm_data;		/* host order, valid with DEV_WC_WITH_IMM */
	uint32_t qp_num;		/* local QP */
	uint32_t src_qp;		/* receive: the sending QP */
	unsigned wc_flags;		/* enum dev_wc_flags */
};

/* ------------------------------------------------------------------------------------ */
/* Asynchronous events (ibv_get_async_event). dev->async_fd is readable while events    */
/* are queued; dev_get_async_event takes one (DIFFERS: no ack needed, events carry no   */
/* pointers that could dangle; a destroyed QP's queued events are dropped).            */

enum dev_event_type {
	DEV_EVENT_CQ_ERR = 0,
	DEV_EVENT_QP_FATAL = 1,		/* QP went to ERR by itself (peer gone, access error) */
	DEV_EVENT_QP_REQ_ERR = 2,
	DEV_EVENT_QP_ACCESS_ERR = 3,	/* a peer's WRITE into our MRs was refused */
	DEV_EVENT_COMM_EST = 4,
	DEV_EVENT_PORT_ACTIVE = 9,
	DEV_EVENT_PORT_ERR = 10,	/* port down */
	DEV_EVENT_DEVICE_FATAL = 8,	/* values as enum ibv_event_type */
};

struct dev_async_event {
	enum dev_event_type type;
	uint8_t port_num;	/* PORT_* events */
	uint32_t qp_num;	/* QP_* events */
	void *qp_context;	/* QP_* events: the QP's qp_context */
};

/* ------------------------------------------------------------------------------------ */
/* The provider ops table (STYLE.md 14). Sorted by name. A provider fills what it       */
/* supports in a const table with designated initializers; dev_provider_register lays */
/* it over the defaults (each returns -SMCR_E_NOTSUP) so no entry is ever NULL.        */
/* The core wrappers below do the bookkeeping (holds, users) and call these; a provider */
/* never calls dev_hold/dev_put for its children itself.                               */

struct dev_ops {
	int (*alloc_pd)(struct dev_device *dev, struct dev_pd **out);
	/* Last reference dropped: free the device (its children are all gone by then). */
	void (*close_device)(struct dev_device *dev);
	int (*create_cq)(struct dev_device *dev, int cqe, void *cq_context, struct dev_cq **out);
	int (*create_qp)(struct dev_pd *pd, const struct dev_qp_init_attr *attr,
			 struct dev_qp **out);
	int (*dealloc_pd)(struct dev_pd *pd);
	int (*dereg_mr)(struct dev_mr *mr);
	int (*destroy_cq)(struct dev_cq *cq);
	int (*destroy_qp)(struct dev_qp *qp);
	/* Not verbs (added for the engine's spinning, docs/parts/tune.md): withdraw an arm that
	 * has not fired yet. Optional: the default returns NOTSUP and the arm stays. */
	int (*disarm_cq)(struct dev_cq *cq);
	int (*get_async_event)(struct dev_device *dev, struct dev_async_event *ev);
	int (*get_cq_event)(struct dev_cq *cq);
	int (*modify_qp)(struct dev_qp *qp, const struct dev_qp_attr *attr, unsigned mask);
	int (*poll_cq)(struct dev_cq *cq, int n, struct dev_wc *wc);
	int (*post_recv)(struct dev_qp *qp, const struct dev_recv_wr *wr,
			 const struct dev_recv_wr **bad_wr);
	int (*post_send)(struct dev_qp *qp, const struct dev_send_wr *wr,
			 const struct dev_send_wr **bad_wr);
	int (*query_device)(struct dev_device *dev, struct dev_device_attr *attr);
	int (*query_gid)(struct dev_device *dev, uint8_t port, int index,
			 struct dev_gid_entry *out);
	int (*query_port)(struct dev_device *dev, uint8_t port, struct dev_port_attr *attr);
	int (*query_qp)(struct dev_qp *qp, struct dev_qp_attr *attr);
	int (*reg_mr)(struct dev_pd *pd, void *addr, size_t length, unsigned access,
		      struct dev_mr **out);
	int (*req_notify_cq)(struct dev_cq *cq, int solicited_only);
	/* Test hook (not verbs): take a port down (up=0) or up. Software providers implement
	 * it so port events and link loss can be tested; hardware returns NOTSUP. */
	int (*set_port_state)(struct dev_device *dev, uint8_t port, int up);
};

/* ------------------------------------------------------------------------------------ */
/* Registry (dev.c). Providers register once (the socket layer calls their register     */
/* functions at start); the registry lives as long as the process.                      */

struct dev_provider {
	const char *name;		/* "shm", "emu", "verbs": unique */
	const struct dev_ops *ops;	/* partial table; merged over the defaults */
	/* Opens a device. args is what followed "name:" in dev_open's spec ("" if nothing).
	 * ops is the merged table the new device must use (dev_device_init). Required. */
	int (*open)(const struct dev_ops *ops, const char *args, struct dev_device **out);
	/* Opens (or holds again) the local device whose port has this GID; NULL means this
	 * provider never matches (-SMCR_E_DEV_NO_DEVICE). shm/emu match devices this process
	 * has open; verbs matches the host's GID tables. */
	int (*open_by_gid)(const struct dev_ops *ops, const struct dev_gid *gid,
			   struct dev_device **out);
};

/* Registers a provider (the struct must outlive the process, e.g. static const).
 * -SMCR_E_DEV_EXISTS if the name is taken (registering the same struct again returns 0),
 * -SMCR_E_DEV_TOO_MANY past DEV_MAX_PROVIDERS. Thread-safe. */
#define DEV_MAX_PROVIDERS 8
SMCR_MUST_CHECK int dev_provider_register(const struct dev_provider *p);
/* Number of registered providers and the name of the i-th (registration order), or NULL. */
int dev_provider_count(void);
const char *dev_provider_name(int i);
/* Nonzero if a provider of this name is registered. */
int dev_provider_registered(const char *name);

/* Opens a device. spec = "<provider>" or "<provider>:<args>" (args are the provider's,
 * documented by it). The caller owns one reference: dev_close() it. */
SMCR_MUST_CHECK int dev_open(const char *spec, struct dev_device **out);
/* Opens the device whose port has gid, asking each provider in registration order. */
SMCR_MUST_CHECK int dev_open_by_gid(const struct dev_gid *gid, struct dev_device **out);
/* References. dev_hold's put is dev_put; dev_close == dev_put of dev_open's reference. */
void dev_hold(struct dev_device *dev);
void dev_put(struct dev_device *dev);
void dev_close(struct dev_device *dev);

/* ------------------------------------------------------------------------------------ */
/* Verbs (dev.c: thin wrappers doing the bookkeeping, then dev->ops).                   */

SMCR_MUST_CHECK int dev_query_device(struct dev_device *dev, struct dev_device_attr *attr);
SMCR_MUST_CHECK int dev_query_port(struct dev_device *dev, uint8_t port,
				   struct dev_port_attr *attr);
SMCR_MUST_CHECK int dev_query_gid(struct dev_device *dev, uint8_t port, int index,
				  struct dev_gid_entry *out);

SMCR_MUST_CHECK int dev_alloc_pd(struct dev_device *dev, struct dev_pd **out);
/* -SMCR_E_DEV_BUSY while MRs or QPs use it. */
SMCR_MUST_CHECK int dev_dealloc_pd(struct dev_pd *pd);

/* Registers [addr, addr+length). access: enum dev_access; REMOTE_WRITE needs LOCAL_WRITE.
 * Memory a peer may write (REMOTE_WRITE) must come from dev_mem_alloc (shm shares it by
 * its memfd; verbs and emu accept any memory but the core always uses dev_mem). */
SMCR_MUST_CHECK int dev_reg_mr(struct dev_pd *pd, void *addr, size_t length, unsigned access,
			       struct dev_mr **out);
/* Deregisters: when it returns, the rkey and lkey are invalid; a peer's later WRITE with the
 * rkey fails with DEV_WC_REM_ACCESS_ERR. */
SMCR_MUST_CHECK int dev_dereg_mr(struct dev_mr *mr);

/* cqe: completions the CQ must hold (sum of the queues completing into it). */
SMCR_MUST_CHECK int dev_create_cq(struct dev_device *dev, int cqe, void *cq_context,
				  struct dev_cq **out);
/* -SMCR_E_DEV_BUSY while a QP uses it. */
SMCR_MUST_CHECK int dev_destroy_cq(struct dev_cq *cq);
/* Arms the CQ for one event (ibv_req_notify_cq): the next completion added after this call
 * (solicited_only: the next receive completion of a SOLICITED SEND or WRITE_WITH_IMM, or
 * any error completion) makes cq->comp_fd readable. Completions already queued do not
 * count: the usual loop is poll until empty, arm, poll once more, then sleep on comp_fd. */
SMCR_MUST_CHECK int dev_req_notify_cq(struct dev_cq *cq, int solicited_only);
/* Not verbs: withdraws an arm that has not fired yet, so completions stop writing comp_fd
 * (a hint: the caller polls the CQ itself for a while, e.g. a thread spinning briefly
 * before it sleeps, and arms again with dev_req_notify_cq before anyone sleeps on
 * comp_fd). An event already on comp_fd stays. 0, or -SMCR_E_NOTSUP if the provider cannot
 * (then the arm simply stays: the only cost is a wake-up nobody needed). Added for the
 * engine's spin (docs/parts/tune.md). */
SMCR_MUST_CHECK int dev_disarm_cq(struct dev_cq *cq);
/* Consumes the event that made comp_fd readable (ibv_get_cq_event + ibv_ack_cq_events;
 * nonblocking). 0 if one was pending, -SMCR_E_AGAIN if not. */
SMCR_MUST_CHECK int dev_get_cq_event(struct dev_cq *cq);
/* Takes up to n completions (ibv_poll_cq): returns how many (0..n) or a negative error.
 * Providers do their receive-side progress here: it is the data path, keep it cheap. */
SMCR_MUST_CHECK int dev_poll_cq(struct dev_cq *cq, int n, struct dev_wc *wc);
/* Helper over the calls above (STYLE.md 24): poll; if empty, keep polling for spin_ns;
 * then arm, poll again, and sleep on comp_fd up to timeout_ms (-1: forever). Returns the
 * count (>0), 0 on timeout, or a negative error. */
SMCR_MUST_CHECK int dev_poll_cq_wait(struct dev_cq *cq, int n, struct dev_wc *wc,
				     uint64_t spin_ns, int timeout_ms);

/* RC QPs only. attr->send_cq/recv_cq are required. The QP starts in RESET. */
SMCR_MUST_CHECK int dev_create_qp(struct dev_pd *pd, const struct dev_qp_init_attr *attr,
				  struct dev_qp **out);
/* ibv_modify_qp: mask says which attr fields are valid; the transition needs the masks
 * DEV_QP_MASK_INIT/RTR/RTS (extra bits are ignored). -SMCR_E_DEV_BAD_STATE for a
 * transition verbs refuses, -SMCR_E_DEV_BAD_ATTR for a missing/invalid attribute. */
SMCR_MUST_CHECK int dev_modify_qp(struct dev_qp *qp, const struct dev_qp_attr *attr,
				  unsigned mask);
SMCR_MUST_CHECK int dev_query_qp(struct dev_qp *qp, struct dev_qp_attr *attr);
/* Destroys the QP: posted WRs are dropped without completions (as verbs); the peer QP
 * sees retry exceeded on its next send (or at once, if the provider can tell). */
SMCR_MUST_CHECK int dev_destroy_qp(struct dev_qp *qp);

/* Posts a list of send WRs (ibv_post_send). On error *bad_wr (if not NULL) points at the
 * first WR not posted; earlier ones were posted. Errors: -SMCR_E_DEV_BAD_STATE (QP not in
 * RTS; in ERR the WR is accepted and flushed, as verbs), -SMCR_E_DEV_QUEUE_FULL,
 * -SMCR_E_DEV_BAD_WR (too many SGEs, inline too long, unknown opcode). Posting does not
 * block. Semantics every provider keeps (RC): in-order per QP; a SEND is received after
 * every WRITE posted before it on the QP is visible in the peer's memory. */
SMCR_MUST_CHECK int dev_post_send(struct dev_qp *qp, const struct dev_send_wr *wr,
				  const struct dev_send_wr **bad_wr);
/* Posts receive WRs (ibv_post_recv). Allowed from INIT on; in ERR flushed at once. */
SMCR_MUST_CHECK int dev_post_recv(struct dev_qp *qp, const struct dev_recv_wr *wr,
				  const struct dev_recv_wr **bad_wr);

/* 0 and one event, or -SMCR_E_AGAIN when none is queued (nonblocking). */
SMCR_MUST_CHECK int dev_get_async_event(struct dev_device *dev, struct dev_async_event *ev);
/* Test hook, see dev_ops.set_port_state. */
SMCR_MUST_CHECK int dev_set_port_state(struct dev_device *dev, uint8_t port, int up);

/* ------------------------------------------------------------------------------------ */
/* Memory for RDMA (dev_mem.c). Each buffer is its own memfd, mapped MAP_SHARED, so any  */
/* provider can register it and shm can give exactly this buffer (and nothing else) to  */
/* a peer. Page-aligned, zero-filled, length rounded up to pages. Not inherited by a    */
/* forked child (MADV_DONTFORK, as ibv_fork_init); the child forgets them.              */

struct dev_mem {
	void *addr;
	size_t len;		/* rounded up to the page size */
	int fd;			/* the memfd (close-on-exec); owned by the buffer */
	_Atomic uint32_t refcnt;
};

/* Allocates a buffer with one reference (the caller's). name shows in /proc/<pid>/maps. */
SMCR_MUST_CHECK int dev_mem_alloc(size_t len, const char *name, struct dev_mem **out);
/* Another reference; its put is dev_mem_put. */
void dev_mem_hold(struct dev_mem *m);
/* Drops a reference; the last one unmaps and closes the memfd. dev_mem_free == dev_mem_put
 * of dev_mem_alloc's reference. */
void dev_mem_put(struct dev_mem *m);
void dev_mem_free(struct dev_mem *m);
/* Finds the live buffer containing [addr, addr+len) and takes a reference on it (put with
 * dev_mem_put); *off is addr's offset in it. -SMCR_E_DEV_NOT_DEV_MEM if none. */
SMCR_MUST_CHECK int dev_mem_find(const void *addr, size_t len, struct dev_mem **out,
				 size_t *off);

/* ------------------------------------------------------------------------------------ */
/* Helpers for providers and printing.                                                  */

/* Initializes the generic part of a device a provider's open() made: ops (the merged
 * table open() got), names, ports, async_fd; refcnt = 1. */
void dev_device_init(struct dev_device *dev, const struct dev_ops *ops, const char *provider,
		     const char *name, uint8_t phys_port_cnt, int async_fd);
/* Initialize the generic part of the other objects; providers call these in their
 * alloc_pd/create_cq/create_qp/reg_mr before the object can be seen by another thread
 * (the core wrappers then only add holds and user counts, never write these fields). */
void dev_pd_init(struct dev_pd *pd, struct dev_device *dev);
void dev_cq_init(struct dev_cq *cq, struct dev_device *dev, int cqe, void *cq_context,
		 int comp_fd);
void dev_qp_init(struct dev_qp *qp, struct dev_pd *pd, const struct dev_qp_init_attr *attr,
		 uint32_t qp_num, const struct dev_qp_cap *granted);
void dev_mr_init(struct dev_mr *mr, struct dev_pd *pd, void *addr, size_t length,
		 unsigned access, uint32_t lkey, uint32_t rkey);
/* Checks a modify_qp request against the current state (IB spec 10.3.1 transitions and the
 * required masks): 0, -SMCR_E_DEV_BAD_STATE or -SMCR_E_DEV_BAD_ATTR. Providers call it
 * under their QP lock, with the state they hold there. */
SMCR_MUST_CHECK int dev_qp_check_modify(enum dev_qp_state cur, const struct dev_qp_attr *attr,
					unsigned mask);
/* MTU code -> bytes (0 for an invalid code). */
uint32_t dev_mtu_bytes(enum dev_mtu mtu);
const char *dev_qp_state_str(enum dev_qp_state s);
const char *dev_wc_status_str(enum dev_wc_status s);
const char *dev_event_type_str(enum dev_event_type t);
/* "fd00:...": 39 characters + NUL. */
#define DEV_GID_STR_LEN 40
void dev_gid_str(const struct dev_gid *gid, char out[DEV_GID_STR_LEN]);
/* The IPv4 address (host order) a RoCE v2 GID maps to, when it is IPv4-mapped
 * (::ffff:a.b.c.d); 0 when it is not (an IPv6 GID). */
SMCR_MUST_CHECK int dev_gid_ipv4(const struct dev_gid *gid, uint32_t *ip);

#endif
