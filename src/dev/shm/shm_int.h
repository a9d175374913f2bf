/* shm_int.h: internal objects of the same-host shared-memory provider (design, trust
 * boundary and lifetime rules: docs/parts/dev-shm.md). Not for use outside src/dev/shm/.
 *
 * Lock order (outermost first; never take an earlier one while holding a later one):
 *   shm_devs_lock  >  sd->lock  >  cq->list_lock  >  qp->sq_lock  >  qp->rq_lock  >  cq->lock
 *   leaves (taken last, nothing inside): sd->mr_lock, peer->rmr_lock, peer->tx_lock,
 *   sd->ev_lock.
 * (shm_devs_lock > sd->lock only in the fork handler, which takes every device's lock.)
 * The device thread follows the same order. The data path (post_send, post_recv,
 * poll_cq) takes only qp/cq locks and leaves. */
#ifndef SMCR_DEV_SHM_INT_H
#define SMCR_DEV_SHM_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dev/dev.h"
#include "dev/shm/shm.h"
#include "dev/shm/shm_msg.h"
#include "dev/shm/shm_ring.h"

#define SHM_MAX_QP 65535u		/* QPN = generation << 16 | (slot + 1) */
#define SHM_MAX_MR 65535u		/* rkey = generation << 16 | (slot + 1) */
#define SHM_RKEY_TAB_ENTRIES 65536u
#define SHM_MAX_WR 4096u
#define SHM_MAX_SGE 4u
#define SHM_MAX_INLINE 128u		/* inline bytes kept in the WQE itself */
/* Largest inline WR (device attr max_inline_data). Inline data beyond SHM_MAX_INLINE is read
 * from the caller's buffer while post_send runs (the WR executes at once when it reaches the
 * head of an idle SQ: one copy, straight into the peer's memory) and copied to the heap only
 * if the WR has to wait behind a blocked one. Either way the caller's buffer is free again
 * when post_send returns (verbs inline semantics). This is what lets the engine write from
 * the caller's iovec into the peer's RMBE with no staging copy (docs/parts/tune.md). */
#define SHM_MAX_INLINE_BIG (4u << 20)
#define SHM_MAX_CQE (1u << 22)
#define SHM_HEAP_CACHE 64u			/* big-inline copies kept per QP, */
#define SHM_HEAP_CACHE_BYTES (2u << 20)		/* and their bytes together at most */
#define SHM_MAX_PEER_RMR 65536u		/* imported MRs per peer (hostile bound) */
#define SHM_MAX_PARKED 4096u		/* QP_REQs waiting for their QP, per device */
#define SHM_PARK_NS (30ull * 1000000000ull)
/* A responder's sends wait this long at most for the initiator's QP_RTU (shm_qp.c). */
#define SHM_RTU_WAIT_NS SHM_PARK_NS
#define SHM_CQ_FAST_SKIPS 64		/* get_cq_event answers without read() between reads */
#define SHM_TICK_MS 10			/* device thread timer period while timers run */
#define SHM_SNDTIMEO_MS 100		/* a peer not reading its socket this long is gone */
#define SHM_DEREG_WAIT_NS (10ull * 1000000ull)	/* wait for a peer's WRITE in flight */
#define SHM_MR_ACK_WAIT_MS 1000		/* reg_mr waits this long for peers' MR_ACK */

struct shm_qp;
struct shm_peer;

/* An MR imported from a peer (its REMOTE_WRITE MR mapped here). Guarded by the peer's
 * rmr_lock: readers (WRITE path) hold it shared while they copy into map. */
struct shm_rmr {
	uint32_t rkey;		/* 0: free slot */
	uint32_t pd_id;
	uint64_t iova;		/* peer's address of the first byte */
	uint64_t length;
	uint8_t *base;		/* our mapping of byte iova */
	void *map;
	size_t map_len;
	/* Bytes of map, from its start, that WRITEs have populated (page multiple; shm_qp.c
	 * rmr_touch). Advanced by the QP threads under rmr_lock's read side; copied with the
	 * entry under its write side. */
	_Atomic uint64_t touched;
};

/* A connection to one peer device (one SOCK_SEQPACKET socket), shared by all QP pairs
 * between the two devices. Lifetime: one reference for the device's peer list (dropped
 * when the connection goes down) and one per bound QP (shm_qp_unbind). */
struct shm_peer {
	struct shm_dev *sd;
	_Atomic uint32_t refcnt;
	int fd;				/* the socket; -1 once down */
	int initiator;			/* we connected (peer_gid known from the start) */
	/* State, under sd->lock: */
	enum { SHM_PEER_HELLO_WAIT, SHM_PEER_UP, SHM_PEER_DOWN } state;
	struct dev_gid gid;		/* the peer device (after its HELLO, or dialled) */
	uint32_t *exported_pds;		/* our PDs whose MRs this peer has */
	uint32_t n_exported, cap_exported;
	uint32_t mr_acked;		/* highest MR_ADD seq the peer acknowledged */
	uint64_t next_connect_ns;	/* initiator: when to retry a failed connect */
	struct shm_peer *next;		/* sd->peers */
	/* Set once by the device thread when HELLO arrives (before any QP binds), then
	 * read-only: */
	const _Atomic uint32_t *rkey_tab;	/* the peer's rkey validity table, read-only */
	size_t rkey_tab_len;
	uint32_t rkey_tab_entries;
	_Atomic int kick_fd;		/* the peer device's kick eventfd, -1 before HELLO (set
					 * once by the device thread; read by rx paths) */
	_Atomic int broken;		/* a send failed: the device thread takes it down */
	/* Imported MRs: open-addressed by rkey. rmr_lock protects rmrs/n_rmr/cap_rmr and the
	 * mappings (a writer holds it shared during its memcpy). */
	pthread_rwlock_t rmr_lock;
	struct shm_rmr *rmrs;
	uint32_t n_rmr, cap_rmr;	/* cap is a power of two */
	pthread_mutex_t tx_lock;	/* serializes sendmsg on fd */
};

/* A QP_REQ waiting for its target QP to reach RTR (or expiring). Under sd->lock. */
struct shm_parked {
	struct shm_peer *peer;		/* held */
	struct shm_msg_qp req;
	int ring_fd, cq_fd;		/* owned */
	uint64_t expires_ns;
	struct shm_parked *next;
};

struct shm_dev {
	struct dev_device dev;
	struct dev_gid gid;
	uint8_t mac[DEV_MAC_LEN];
	uint64_t node_guid;
	char sock_path[108];
	int listen_fd;
	/* "<gid>.lock" beside the socket, flock()ed for the device's lifetime: others see a
	 * live device without connecting to it (clean_stale in shm_dev.c). */
	char lock_path[108];
	int lock_fd;
	/* Device thread only: out of fds, the listener left epoll (it stays readable, a
	 * level-triggered wait would spin) until this time; 0 when listening. */
	uint64_t listen_paused_until_ns;
	int epfd;
	int kick_fd;		/* eventfd: wakes the device thread (commands, peers' kicks) */
	int async_efd;		/* dev.async_fd */
	pthread_t thread;
	_Atomic int stop;

	/* sd->lock protects: qps[], qp_gen[], peers list, parked list, pds list, port state,
	 * connection state of every QP (qp->conn, qp->peer binding), next_pd_id, mr_seq. */
	pthread_mutex_t lock;
	pthread_cond_t ack_cond;	/* MR_ACK arrived (with lock) */
	struct shm_qp **qps;		/* by slot */
	uint8_t *qp_gen;
	uint32_t n_qp;
	uint32_t qp_hi;			/* slots >= qp_hi are all free (scans stop there) */
	struct shm_peer *peers;
	struct shm_parked *parked;
	uint32_t n_parked;
	struct shm_pd *pds;
	int port_up;
	uint32_t next_pd_id;
	uint32_t mr_seq;

	/* mr_lock (rwlock, leaf) protects mrs[] and mr_gen[] (lkey/rkey lookups). */
	pthread_rwlock_t mr_lock;
	struct shm_mr **mrs;
	uint16_t *mr_gen;
	uint32_t n_mr;
	/* The rkey validity table: entry (rkey & 0xffff) - 1 holds the rkey while it is valid,
	 * 0 otherwise. Shared read-only with peers (sealed memfd). Written only by us: store
	 * seq_cst in reg/dereg; peers load it seq_cst after announcing busy_rkey (shm_mr.c). */
	_Atomic uint32_t *rkey_tab;
	size_t rkey_tab_len;
	int rkey_tab_fd;

	/* ev_lock (leaf) protects the async event queue. */
	pthread_mutex_t ev_lock;
	struct dev_async_event *evq;
	uint32_t ev_head, ev_n, ev_cap;
	/* true from queueing an event (async_efd signalled) until the queue is empty and the
	 * eventfd read back: written under ev_lock, read without it by shm_get_async_event's
	 * fast path, so a progress loop that asks every turn makes no read() syscall when no
	 * event exists (release on set / acquire on the check: the queued event is visible). */
	_Atomic bool ev_maybe;

	struct shm_dev *next;	/* shm_devs list (open_by_gid), under shm_devs_lock */
};

struct shm_pd {
	struct dev_pd pd;
	uint32_t id;
	struct shm_mr *rw_mrs;	/* REMOTE_WRITE MRs of this PD (exports), under sd->lock */
	struct shm_pd *next;	/* sd->pds, under sd->lock */
};

struct shm_mr {
	struct dev_mr mr;
	struct dev_mem *mem;	/* held (dev_mem_put in dereg) when remote-writable */
	size_t mem_off;		/* mr.addr's offset in mem */
	uint32_t slot;
	struct shm_mr *pd_next;	/* shm_pd.rw_mrs, under sd->lock */
};

/* Internal completion: the verbs one plus what the CQ needs to account for it. */
struct shm_cqe {
	struct dev_wc wc;
	struct shm_qp *qp;	/* NULL once the QP is destroyed */
	uint32_t sq_slots;	/* send WRs this completion retires (signaled + unsignaled) */
	uint8_t solicited;	/* a receive completion of a solicited message */
};

struct shm_cq {
	struct dev_cq cq;
	struct shm_dev *sd;
	int efd;		/* cq.comp_fd (eventfd); peers hold a dup to wake us */
	/* list_lock protects rx_qps (QPs receiving into this CQ) and tx_qps. A QP's rx ring
	 * mapping is only replaced or unmapped with this lock held (shm_qp.c), so pollers may
	 * read qp->rx_hdr under it without the QP's locks. */
	pthread_mutex_t list_lock;
	struct shm_qp **rx_qps, **tx_qps;
	uint32_t n_rx, cap_rx, n_tx, cap_tx;
	/* lock protects q (a ring of CQEs, grown on demand), armed, arm_mode, fast_skips. */
	pthread_mutex_t lock;
	struct shm_cqe *q;
	uint32_t q_head, q_n, q_cap;
	int armed;		/* SHM_WAKE_*: the arm local completions fire (cleared when fired) */
	int arm_mode;		/* SHM_WAKE_* of the last req_notify not yet consumed by a read */
	/* Maybe an event is on efd that the arm state cannot show (an arm replaced after it
	 * fired, a QP left the CQ after its producer fired): shm_get_cq_event must read().
	 * Set under lock (or list_lock for list_del), cleared by a read. */
	_Atomic bool ev_maybe;
	unsigned fast_skips;	/* get_cq_event answers without read() since the last read */
};

/* A posted send WR, copied. */
struct shm_swqe {
	uint64_t wr_id;
	enum dev_wr_opcode opcode;
	unsigned flags;
	uint32_t imm;
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t num_sge;
	struct dev_sge sge[SHM_MAX_SGE];
	uint32_t inline_len;	/* DEV_SEND_INLINE: total bytes */
	uint8_t inline_data[SHM_MAX_INLINE];	/* inline_len <= SHM_MAX_INLINE: copied here */
	/* inline_len > SHM_MAX_INLINE ("big inline"): while the posting post_send runs, sge[]
	 * (num_sge) names the caller's bytes (lkeys ignored, as for inline); if the WR is still
	 * queued when post_send ends, the bytes are copied to inline_heap (num_sge = 0), freed
	 * when the WR leaves the SQ (swqe_release). inline_oom: that copy failed; the WR fails
	 * with LOC_PROT_ERR when it reaches the head. All under sq_lock. */
	uint8_t *inline_heap;
	uint32_t heap_len;	/* inline_heap's size (>= inline_len) */
	bool inline_oom;
};

struct shm_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t cap;		/* total bytes */
	struct dev_sge sge[SHM_MAX_SGE];
};

enum shm_conn {
	SHM_CONN_NONE = 0,	/* RESET/INIT, or before the thread picked it up */
	SHM_CONN_WANT,		/* RTR: the device thread must start/await the handshake */
	SHM_CONN_REQ_SENT,	/* initiator: QP_REQ sent, waiting for QP_ACK */
	SHM_CONN_ACK_SENT,	/* responder: QP_ACK sent, waiting for QP_RTU */
	SHM_CONN_UP,
	SHM_CONN_DOWN,		/* was connected or tried; QP in ERR */
};

struct shm_qp {
	struct dev_qp qp;
	struct shm_dev *sd;
	uint32_t pd_id;
	uint32_t slot;
	int initiator;		/* fixed at RTR: we have the smaller (gid, qpn) */
	int sig_all;		/* sq_sig_all of create_qp */

	/* sq_lock: the send queue, the tx side of the connection (tx ring, peer's CQ eventfd,
	 * tx counters, peer_* values), deadline. rq_lock: the receive queue and the rx ring
	 * consume state. A state change holds both (so either lock is enough to read it). */
	pthread_mutex_t sq_lock;
	pthread_mutex_t rq_lock;
	/* (sq_lock) Big-inline copies (shm_swqe.inline_heap) kept for the next ones, at most
	 * SHM_HEAP_CACHE of them and SHM_HEAP_CACHE_BYTES together (heap_bytes), each
	 * heap_len[i] bytes. A SQ blocked on the peer's receive credits copies every big
	 * WRITE queued behind (up to ~64 at once on an SMC-R link), and a malloc and free of
	 * 64 KiB each time had glibc trim and regrow its heap: a TLB shootdown and fresh page
	 * faults per WRITE (docs/parts/conns.md "Memory"). Freed with the QP. */
	uint8_t *heap_cache[SHM_HEAP_CACHE];
	uint32_t heap_len[SHM_HEAP_CACHE];
	uint32_t n_heap;
	uint64_t heap_bytes;
	/* The state is qp.state (atomic, in the generic object): RESET/INIT/RTR/RTS change
	 * with sd->lock and both QP locks held; the move to ERR is a CAS that any holder of
	 * either QP lock (or sd->lock) may do (shm_qp_mark_err). */
	struct dev_qp_attr attr;	/* as modified (port, dest, timers, ...) */

	/* Connection (written with sd->lock + both QP locks; readable under any of them). */
	enum shm_conn conn;
	int gone_sent;			/* QP_GONE already sent for this connection */
	struct shm_peer *peer;		/* held while bound */
	uint32_t peer_qpn, peer_pd_id, peer_max_recv;
	uint8_t peer_rnr_timer;

	/* tx: the peer's inbound ring (sq_lock). */
	struct shm_ring tx;
	uint32_t tx_prod;		/* cells we published */
	uint32_t tx_msgs;		/* credit-consuming messages we published */
	int peer_cq_fd;			/* the peer's receive CQ eventfd, -1 if none */

	/* rx: our inbound ring. The struct is guarded by rq_lock; rx_hdr is the pollers'
	 * lock-free view (set/cleared under recv_cq->list_lock, see shm_cq). */
	struct shm_ring rx;
	_Atomic(struct shm_ring_hdr *) rx_hdr;
	_Atomic uint32_t rx_cons_hint;	/* = rx_cons, for a lock-free "anything new?" check */
	uint32_t rx_cons;		/* cells consumed */
	uint32_t rx_posted;		/* receive WRs announced on the ring (credits) */

	/* Send queue (sq_lock): ring of sq_size; [sq_head, sq_tail) posted, not executed. */
	struct shm_swqe *sq;
	uint32_t sq_size, sq_head, sq_tail;
	_Atomic uint32_t sq_pending;	/* sq_tail - sq_head, readable without the lock */
	_Atomic uint32_t sq_used;	/* slots in use: pending + executed but not yet polled */
	uint32_t unsig_done;		/* executed unsignaled WRs not yet retired by a CQE */
	uint64_t block_since_ns;	/* head blocked since (0: not blocked) */
	enum dev_wc_status block_status; /* what the head fails with at the deadline */
	int block_reason;		/* 0 not connected, SHM_BLOCK_RTU_WAIT, or TX_BLOCKED_* */
	uint64_t deadline_ns;		/* head fails at this time (0: none) */
	uint64_t next_connect_ns;	/* initiator in SHM_CONN_WANT: next dial attempt */

	/* Error hand-off: whoever moves the QP to ERR (CAS on qp.state) fills err_* and then
	 * sets err_work (release); the device thread (acquire) finishes the job it could not
	 * do under its own locks: flush both queues, tell the peer, queue the event. */
	enum dev_wc_status err_status;	/* for the send WR at the head */
	int err_event;			/* enum dev_event_type + 1, 0 for none */
	int err_notify;			/* send QP_GONE (reason err_reason) */
	uint32_t err_reason;
	_Atomic int err_work;

	/* Receive queue (rq_lock): ring of rq_size; [rq_head, rq_tail) posted. */
	struct shm_rwqe *rq;
	uint32_t rq_size, rq_head, rq_tail;
};

/* ---- shm_dev.c ---- */
/* Finds (or dials) the connection to the peer device with this GID, as initiator
 * (sd->lock held). NULL if it cannot be reached now. Not held: the list holds it. */
struct shm_peer *shm_dev_dial_locked(struct shm_dev *sd, const struct dev_gid *gid);
/* Validates an eventfd a peer passed and makes it nonblocking. */
int shm_check_eventfd(int fd);
void shm_efd_signal(int fd);
void shm_dev_kick(struct shm_dev *sd);
void shm_dev_event(struct shm_dev *sd, enum dev_event_type type, uint8_t port, struct shm_qp *qp);
void shm_dev_drop_qp_events(struct shm_dev *sd, uint32_t qpn);
/* Sends a control message to a peer (tx_lock). On failure the peer is marked for the
 * device thread to take down. */
int shm_peer_send(struct shm_peer *p, const struct shm_msg *m, const int *fds, int nfds);
void shm_peer_hold(struct shm_peer *p);
void shm_peer_put(struct shm_peer *p);
/* Looks up an imported MR: call with p->rmr_lock held (shared). */
struct shm_rmr *shm_peer_rmr_find(struct shm_peer *p, uint32_t rkey);

/* ---- shm_mr.c ---- */
extern const struct dev_ops shm_ops;
int shm_alloc_pd(struct dev_device *dev, struct dev_pd **out);
int shm_dealloc_pd(struct dev_pd *pd);
int shm_reg_mr(struct dev_pd *pd, void *addr, size_t length, unsigned access, struct dev_mr **out);
int shm_dereg_mr(struct dev_mr *mr);
/* lkey check of a local SGE (sd->mr_lock taken inside): the MR's bytes, or NULL. */
void *shm_lkey_ptr(struct shm_dev *sd, const struct dev_pd *pd, uint32_t lkey, uint64_t addr,
		   uint32_t len, unsigned need_access);
/* Sends MR_ADD for every REMOTE_WRITE MR of the PD to peer unless already exported
 * (sd->lock held). */
void shm_export_pd_locked(struct shm_dev *sd, struct shm_peer *peer, uint32_t pd_id);
struct shm_pd *shm_pd_find_locked(struct shm_dev *sd, uint32_t pd_id);

/* ---- shm_cq.c ---- */
int shm_create_cq(struct dev_device *dev, int cqe, void *ctx, struct dev_cq **out);
int shm_destroy_cq(struct dev_cq *cq);
int shm_req_notify_cq(struct dev_cq *cq, int solicited_only);
int shm_get_cq_event(struct dev_cq *cq);
int shm_disarm_cq(struct dev_cq *cq);
int shm_poll_cq(struct dev_cq *cq, int n, struct dev_wc *wc);
/* Adds a completion (cq->lock inside; writes the eventfd if it fires the armed CQ). */
void shm_cq_push(struct shm_cq *cq, const struct shm_cqe *e);
/* As shm_cq_push, for a completion the caller's own poll_cq is about to return (receive
 * progress inside poll_cq): the poller is awake, so a successful one fires no event (the
 * arm stays for the next completion; the producer's wake-up, if armed, already fired). */
void shm_cq_push_polled(struct shm_cq *cq, const struct shm_cqe *e);
int shm_cq_list_add(struct shm_cq *cq, struct shm_qp *qp, int rx);
void shm_cq_list_del(struct shm_cq *cq, struct shm_qp *qp, int rx);
void shm_cq_forget_qp(struct shm_cq *cq, struct shm_qp *qp);
static inline struct shm_cq *shm_cq_of(struct dev_cq *cq)
{
	return DEV_CONTAINER_OF(cq, struct shm_cq, cq);
}

/* ---- shm_qp.c ---- */
int shm_create_qp(struct dev_pd *pd, const struct dev_qp_init_attr *attr, struct dev_qp **out);
int shm_modify_qp(struct dev_qp *qp, const struct dev_qp_attr *attr, unsigned mask);
int shm_query_qp(struct dev_qp *qp, struct dev_qp_attr *attr);
int shm_destroy_qp(struct dev_qp *qp);
int shm_post_send(struct dev_qp *qp, const struct dev_send_wr *wr, const struct dev_send_wr **bad);
int shm_post_recv(struct dev_qp *qp, const struct dev_recv_wr *wr, const struct dev_recv_wr **bad);
/* Receive progress: moves published messages into receive WRs (rq_lock inside). */
void shm_qp_rx_progress(struct shm_qp *q);
/* Send progress: executes pending send WRs that can go now (sq_lock inside). */
void shm_qp_tx_progress(struct shm_qp *q);
/* The device thread's scan of one QP (sd->lock held): error hand-off, handshake start,
 * pending sends and deadlines. Returns nonzero if the QP needs the timer to tick. */
int shm_qp_scan_locked(struct shm_qp *q, uint64_t now);
/* Moves the QP to ERR (CAS; no-op if it is in RESET or ERR already) and hands the rest
 * to the device thread (err_work). head_status: what the send WR at the head completes
 * with (the others flush); ev: async event to queue (-1 for none); notify: tell the peer
 * with QP_GONE(reason). Callable with any lock held. Returns 1 if it made the change. */
int shm_qp_mark_err(struct shm_qp *q, enum dev_wc_status head_status, int ev, int notify,
		    uint32_t reason);
/* Device thread (sd->lock held): finishes a marked QP: flush, notify, event. */
void shm_qp_finish_err_locked(struct shm_qp *q);
/* The peer went away (socket closed / port down): mark and finish (sd->lock held). */
void shm_qp_peer_lost_locked(struct shm_qp *q, enum dev_wc_status head_status, int ev,
			     int notify, uint32_t reason);
/* Handshake steps, device thread, sd->lock held. start: returns nonzero while the QP
 * still needs the timer (initiator waiting to dial). on_req returns 0 if the request does
 * not match the QP (the caller parks it), 1 if it was consumed (fds taken). */
int shm_qp_start_conn_locked(struct shm_qp *q, uint64_t now);
int shm_qp_on_req_locked(struct shm_qp *q, struct shm_peer *p, const struct shm_msg_qp *req,
			 int ring_fd, int cq_fd);
void shm_qp_on_ack_locked(struct shm_qp *q, struct shm_peer *p, const struct shm_msg_qp *ack,
			  int ring_fd, int cq_fd);
void shm_qp_on_rtu_locked(struct shm_qp *q);
/* QPN lookup (sd->lock held). */
struct shm_qp *shm_qp_find_locked(struct shm_dev *sd, uint32_t qpn);

static inline struct shm_dev *shm_dev_of(struct dev_device *d)
{
	return DEV_CONTAINER_OF(d, struct shm_dev, dev);
}
static inline struct shm_qp *shm_qp_of(struct dev_qp *q)
{
	return DEV_CONTAINER_OF(q, struct shm_qp, qp);
}

#endif
