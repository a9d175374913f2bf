/* emu_int.h: internals of the emulated RDMA provider shared by its files (not for the
 * core). The design in one paragraph (details: docs/parts/emu.md):
 *
 * A device is bound to one IP address of one interface. It listens on TCP <ip>:<port>; each
 * RC QP, once in RTR with a remote (GID, QPN), is carried by one TCP connection to the
 * peer device: the side whose (GID, QPN) is smaller connects and sends a HELLO naming both
 * QPs, the other side pairs it with its QP and answers HELLO_ACK. One stream per QP keeps
 * the RC order (dev.h 1, 2). Sends are copied into frames at post time and complete when the
 * peer's ACK covers them (dev.h 8); a transport timer turns a silent peer into
 * DEV_WC_RETRY_EXC_ERR in bounded time (dev.h 5).
 *
 * Threads. Application threads call the verbs; each device has one I/O thread (emu_io.c)
 * that blocks in epoll_wait on: the listening socket, the QP connections, pending
 * (not yet paired) connections, closing connections, a netlink socket (link state), a
 * timerfd (all timers) and an eventfd (kick from application threads). It receives and
 * applies frames, accepts and connects, and is the ONLY thread that creates or closes a
 * connection fd or frees a connection object; other threads ask it to by setting want bits
 * on the QP and queuing the QP on the device's work list (emu_qp_work_locked). Application
 * threads may send on a QP's connected socket (post_send) and, polling a CQ, read and apply
 * what the sockets of its QPs hold (emu_cq.c pump), always under the QP lock.
 *
 * Locks, in the order they are taken (a thread holding one may take only later ones):
 *   emu_devs_lock (emu_dev.c: the list of open devices)
 *   dev->lock     QP table, QPN allocation, port state
 *   cq->qps_lock  a CQ's pump list (create_qp adds under dev->lock)
 *   qp->lock      everything in struct emu_qp marked [qp] (under a qps_lock only by
 *                 trylock: the pump never waits for a QP)
 *   dev->mr_lock  (rwlock) MR table; writers: reg/dereg; readers copy into/out of MRs
 *   cq->lock      the CQ ring and its arm state
 *   dev->ev_lock  async event queue
 *   dev->work_lock the work list and every qp->in_work/wnext/io_released
 * Leaves (nothing taken under them): emu_fd_lock (emu_fd.c), emu_turn_lock (emu_dev.c).
 * Fields marked [io] are touched only by the device's I/O thread; [ro] are set before the
 * object is visible to other threads and read-only afterwards.
 */
#ifndef SMCR_DEV_EMU_EMU_INT_H
#define SMCR_DEV_EMU_EMU_INT_H

#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dev/dev.h"
#include "dev/emu/emu.h"
#include "dev/emu/emu_frame.h"

/* Limits reported by query_device and enforced. */
#define EMU_MAX_QP 4096u
#define EMU_MAX_QP_WR 4096u
#define EMU_MAX_SGE 4u
#define EMU_MAX_INLINE 1024u
#define EMU_MAX_CQ 1024u
#define EMU_MAX_CQE (1u << 20)
#define EMU_MAX_MR (1u << 20)
#define EMU_MAX_MR_SIZE (1ull << 40)
/* Per connection receive buffer: one recv() fills at most this much. */
#define EMU_RXBUF (64u * 1024)
/* Accepted connections that have not been paired yet (hostile peers cannot pile up more). */
#define EMU_MAX_PEND 256u
/* A connection must send its HELLO within this time after accept. */
#define EMU_HELLO_DEADLINE_NS (2ull * 1000 * 1000 * 1000)
/* A closing connection waits this long for the peer's FIN before it is reset. */
#define EMU_LINGER_NS (1000ull * 1000 * 1000)
/* TCP keepalive on QP connections: a silent peer machine is noticed within
 * IDLE + INTVL * CNT seconds even when no WR is outstanding. */
#define EMU_KEEPIDLE_S 1
#define EMU_KEEPINTVL_S 1
#define EMU_KEEPCNT 3
#define EMU_QP_HASH 256u

/* Every object whose fd is in the I/O thread's epoll set starts with one of these; the
 * epoll data pointer points at it. */
enum emu_ep_kind {
	EMU_EP_LISTEN = 1,
	EMU_EP_KICK,
	EMU_EP_TIMER,
	EMU_EP_NETLINK,
	EMU_EP_PEND,	/* struct emu_pend */
	EMU_EP_QP,	/* struct emu_qp (its ep member) */
	EMU_EP_LINGER,	/* struct emu_linger */
};
struct emu_ep {
	enum emu_ep_kind kind;
};

struct emu_dev;

struct emu_pd {
	struct dev_pd pd;
};

struct emu_mr {
	struct dev_mr mr;
	uint32_t slot;		/* [ro] index in dev->mrs */
};

/* MR table slot: key = slot << 8 | gen; gen changes on every reuse, so a stale key misses. */
struct emu_mr_slot {
	struct emu_mr *mr;	/* NULL when free */
	uint8_t gen;
	uint32_t next_free;
};

/* A QP whose completions go to a CQ; pollers of that CQ pump its socket when it waits for
 * something the CQ will report (emu_cq.c). */
#define EMU_CQ_SEND 1u	/* the CQ is the QP's send CQ */
#define EMU_CQ_RECV 2u	/* the CQ is the QP's receive CQ */
struct emu_cq_member {
	struct emu_qp *qp;
	unsigned role;		/* EMU_CQ_SEND | EMU_CQ_RECV */
};

/* What a completion retires from its QP's send queue when it is polled (verbs: a send
 * queue slot is free once the completion of its WR, or of a later WR, is polled). */
struct emu_cqx {
	struct emu_qp *qp;	/* NULL: nothing to retire (receive, or the QP is gone) */
	uint64_t retire;	/* the QP's sq_retired becomes at least this */
};

struct emu_cq {
	struct dev_cq cq;
	struct emu_dev *dev;	/* [ro] */
	pthread_mutex_t lock;	/* protects ring, x, cap, head, n, armed */
	/* The QPs completing into this CQ, pumped by pollers (emu_poll_cq). qps_lock
	 * protects qps/nqps/qps_cap; lock order: qps_lock, then a QP lock, then lock. */
	pthread_mutex_t qps_lock;
	struct emu_cq_member *qps;
	uint32_t nqps, qps_cap;
	uint32_t pump_next;	/* qps_lock: round-robin start of the next pump */
	struct dev_wc *ring;
	struct emu_cqx *x;	/* parallel to ring */
	uint32_t cap, head, n;
	int armed;		/* 0, EMU_ARM_ANY or EMU_ARM_SOLICITED */
};
#define EMU_ARM_ANY 1
#define EMU_ARM_SOLICITED 2

/* A posted send WR that has not completed yet (sent or not). */
struct emu_swr {
	uint64_t wr_id;
	uint64_t idx;		/* its number among the QP's posted send WRs (sq_posted) */
	uint32_t seq;		/* its data frame's sequence number */
	uint32_t len;
	enum dev_wc_opcode opcode;
	uint8_t signaled;
};

struct emu_rwr {
	uint64_t wr_id;
	int num_sge;
	struct dev_sge sge[EMU_MAX_SGE];
	uint64_t len;		/* sum of the SGE lengths */
};

/* A frame waiting in a QP's transmit queue. */
struct emu_txf {
	struct emu_txf *next;
	uint64_t not_before;	/* injected delay: not sent before this time (0: at once) */
	uint32_t len, off;	/* bytes in data[], bytes already sent */
	uint8_t ctrl;		/* ACK/NAK/RNR: kept (and sent) when the QP goes to ERR */
	uint8_t data[];
};

/* Connection state of a QP. */
enum emu_cs {
	EMU_CS_NONE = 0,	/* no connection: RESET/INIT, or the listening side waiting */
	EMU_CS_CONNECTING,	/* connector: TCP connect in progress */
	EMU_CS_HELLO,		/* connector: HELLO sent, waiting for HELLO_ACK */
	EMU_CS_UP,		/* paired: frames flow */
	EMU_CS_DOWN,		/* ended (QP in ERR); the fd is closed by the I/O thread */
};

/* Work for the I/O thread (qp->want bits). */
#define EMU_W_CONNECT 0x01u	/* connector reached RTR: connect */
#define EMU_W_PAIR 0x02u	/* listening side reached RTR: look for a parked HELLO */
#define EMU_W_CLOSE 0x04u	/* the connection must end (ERR, RESET, cut) */
#define EMU_W_RX 0x08u		/* resume receiving (receive WR posted, stall lifted) */
#define EMU_W_TX 0x10u		/* flush the transmit queue (delay/stall changed) */
#define EMU_W_DESTROY 0x20u	/* destroy_qp waits for the I/O thread to let go */

/* Receive state of a connection (emu_qp.rx, under the QP lock). */
struct emu_rx {
	uint8_t *buf;		/* EMU_RXBUF bytes while connected */
	uint32_t start, end;	/* unprocessed bytes are buf[start, end) */
	int in_frame;		/* header + fixed part consumed, payload streaming */
	struct emu_frame f;
	uint32_t done;		/* payload bytes of f applied so far */
};

struct emu_qp {
	struct dev_qp qp;
	struct emu_ep ep;		/* [ro] kind EMU_EP_QP: epoll tag of the connection */
	struct emu_dev *dev;		/* [ro] */
	struct emu_qp *hnext;		/* dev->lock: QP table chain */
	struct emu_qp *wnext;		/* dev->work_lock */
	int in_work;			/* dev->work_lock: queued on dev's work list */
	int io_released;		/* dev->work_lock: I/O thread let go (destroy) */
	int sq_sig_all;			/* [ro] */

	pthread_mutex_t lock;		/* protects every field below marked [qp] */
	enum dev_qp_state state;	/* [qp] authoritative; qp.state mirrors it */
	/* Attributes from modify_qp [qp]. */
	unsigned access;
	uint8_t port_num;
	uint16_t pkey_index;
	struct dev_ah_attr ah;
	enum dev_mtu path_mtu;
	uint32_t dest_qpn, rq_psn, sq_psn;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic;
	uint64_t ack_timeout_ns;	/* transport timer period (0 before RTS) */
	int connector;			/* this side connects (its (GID, QPN) is smaller) */

	/* Send side [qp]. */
	struct emu_swr *sq;		/* ring of qp.cap.max_send_wr: WRs not yet completed */
	uint32_t sq_head, sq_n;
	uint64_t sq_posted;		/* send WRs ever posted */
	/* Send WRs whose slots are free again: advanced by whoever polls their completion
	 * (emu_poll_cq, without the QP lock: atomic max); posting needs
	 * sq_posted - sq_retired < max_send_wr. */
	_Atomic uint64_t sq_retired;
	/* sq_n > 0 (sends wait for ACKs): pollers of the send CQ pump this QP's socket
	 * (emu_cq.c). Written under lock, read without it as a hint. */
	_Atomic int awaiting_ack;
	/* rq_n > 0: pollers of the receive CQ pump the socket too (same rules). */
	_Atomic int recv_posted;
	uint32_t tx_seq;		/* seq of the last data frame queued */
	uint32_t acked_seq;		/* every data frame up to this one is acknowledged */
	uint64_t progress_ns;		/* transport timer base: last progress (post/ACK) */
	int rnr_wait;			/* the peer reported RNR: the timer waits for it */
	struct emu_txf *txq, *txq_tail;
	int tx_blocked;			/* last send hit EAGAIN: wait for EPOLLOUT */
	uint8_t hs[EMU_MAX_FIXED];	/* HELLO or HELLO_ACK being sent, before txq */
	uint32_t hs_len, hs_off;

	/* Receive side [qp]. */
	struct emu_rwr *rq;		/* ring of qp.cap.max_recv_wr */
	uint32_t rq_head, rq_n;
	uint32_t rx_seq;		/* seq of the last data frame applied */
	int ack_due;			/* frames applied since the last ACK queued */
	int rx_parked;			/* a SEND/WRITE_IMM waits for a receive WR (RNR) */
	int rnr_sent;			/* the RNR frame for the parked frame was queued */
	uint32_t rnr_seq;		/* seq of the parked frame */
	uint64_t rnr_deadline;		/* UINT64_MAX: wait forever (rnr_retry 7) */

	/* Connection [qp]; fd and cs change only in the I/O thread (fd < 0: none). */
	int fd;
	enum emu_cs cs;
	uint32_t ep_events;		/* events registered in epoll for fd */
	int close_rst;			/* close with a TCP reset (cut) */
	unsigned want;			/* EMU_W_* bits for the I/O thread */

	/* Fault injection [qp]. */
	uint64_t delay_ns;
	int stalled;

	/* Receive state [qp]: filled from the socket by the I/O thread, or by a thread polling
	 * the QP's send CQ (emu_rx_pump_locked), always under the QP lock. */
	struct emu_rx rx;
};

/* A connection accepted by the listener that is not paired with a QP yet. [io] */
struct emu_pend {
	struct emu_ep ep;		/* kind EMU_EP_PEND */
	struct emu_pend *next;
	int fd;
	struct sockaddr_storage peer;
	uint8_t buf[EMU_HDR_LEN + EMU_HELLO_LEN];
	uint32_t have;
	int parked;			/* hello valid, waiting for its QP to reach RTR */
	struct emu_hello hello;
	uint64_t deadline;		/* UINT64_MAX while parked */
};

/* A connection being closed gracefully: FIN sent, waiting for the peer's. [io] */
struct emu_linger {
	struct emu_ep ep;		/* kind EMU_EP_LINGER */
	struct emu_linger *next;
	int fd;
	uint64_t deadline;
};

struct emu_dev {
	struct dev_device dev;
	struct emu_dev *next;		/* emu_devs_lock: list of open devices */

	/* Identity [ro]. */
	char ifname[IF_NAMESIZE];
	unsigned ifindex;
	int family;			/* AF_INET or AF_INET6 */
	struct sockaddr_storage addr;	/* our IP, port = the listening port */
	socklen_t addrlen;
	uint16_t port;
	int explicit_port;		/* opened with a nonzero port: may be shared */
	uint64_t netns_id;		/* inode of the network namespace it lives in */
	struct dev_gid gid;
	enum dev_gid_type gid_type;	/* what query_gid reports: SOFT, or ROCE_V2 (gid=v2) */
	uint8_t mac[DEV_MAC_LEN];
	enum dev_mtu active_mtu;
	uint64_t node_guid;

	/* File descriptors [ro] (closed by close_device after the I/O thread ended). */
	int lfd, epfd, kickfd, timerfd, nlfd, evfd;
	int ctlfd;			/* datagram socket in the device's network namespace,
					 * for interface ioctls from any thread */
	struct emu_ep ep_listen, ep_kick, ep_timer, ep_nl;
	pthread_t io;
	_Atomic int stop;		/* close_device -> I/O thread */
	/* Deadline the timerfd is armed for (UINT64_MAX: none). Written by the I/O thread,
	 * read by posting threads to decide whether to kick (emu_io.c "timer protocol"). */
	_Atomic uint64_t timer_at;

	pthread_mutex_t lock;		/* protects the fields below up to mr_lock */
	struct emu_qp *qpt[EMU_QP_HASH];
	uint32_t nqp;
	uint32_t qpn_next;
	int link_up;			/* interface is up and running (netlink/ioctl) */
	int forced_down;		/* dev_set_port_state(0) */
	_Atomic int port_active;	/* the state last reported (events); written under
					 * lock, read without it as a hint */

	pthread_rwlock_t mr_lock;	/* protects mrs, mr_cap, mr_free, nmr */
	struct emu_mr_slot *mrs;
	uint32_t mr_cap, mr_free, nmr;

	pthread_mutex_t ev_lock;	/* protects the event ring below */
	struct dev_async_event *evq;
	uint32_t ev_cap, ev_head, ev_n;

	pthread_mutex_t work_lock;	/* protects work_head and the qp fields named above */
	pthread_cond_t work_cv;		/* io_released became 1 for some QP */
	struct emu_qp *work_head;

	/* I/O thread state [io]. */
	struct emu_pend *pend;
	uint32_t npend;
	int listen_paused;		/* npend reached EMU_MAX_PEND: not accepting for now */
	uint64_t listen_retry_at;	/* paused for lack of fds: accept again at this time */
	struct emu_linger *linger;
	_Atomic int port_dirty;		/* port went down: the I/O thread drops pending conns */
};

#define EMU_DEV(d) DEV_CONTAINER_OF(d, struct emu_dev, dev)
#define EMU_QP(q) DEV_CONTAINER_OF(q, struct emu_qp, qp)
#define EMU_CQ(c) DEV_CONTAINER_OF(c, struct emu_cq, cq)
#define EMU_MR(m) DEV_CONTAINER_OF(m, struct emu_mr, mr)
#define EMU_PD(p) DEV_CONTAINER_OF(p, struct emu_pd, pd)

/* ---- emu_dev.c ---- */
int emu_is_emu_dev(const struct dev_device *d);
/* Wakes the I/O thread (no-op when called from it). */
void emu_dev_kick(struct emu_dev *d);
int emu_on_io_thread(const struct emu_dev *d);
/* Out of file descriptors (EMFILE): raises the soft open-files limit to the hard one, once
 * (each QP end is a socket). 1 if the caller may retry. */
int emu_more_fds(void);
void emu_io_thread_enter(const struct emu_dev *d);
/* Re-reads the link state (ioctl) and applies the effective port state: on a change, queues
 * PORT_ACTIVE / PORT_ERR, and on down moves every connected QP to ERR. Takes dev->lock. */
void emu_port_update(struct emu_dev *d);
int emu_port_is_active(struct emu_dev *d);
/* GID <-> socket address of a device on the port. */
int emu_gid_to_sockaddr(const struct emu_dev *d, const struct dev_gid *gid,
			struct sockaddr_storage *ss, socklen_t *len);
int emu_sockaddr_matches_gid(const struct sockaddr_storage *ss, const struct dev_gid *gid);

/* ---- emu_fd.c: descriptors closed in a forked child ---- */
/* emu_fd_begin(); fd = emu_fd_end(socket(...)); records fd (if >= 0) atomically with its
 * creation; errno is kept. emu_fd_close forgets and closes it. */
void emu_fd_begin(void);
int emu_fd_end(int fd);
void emu_fd_close(int fd);

/* ---- emu_cq.c: PD, MR, CQ, async events ---- */
int emu_alloc_pd(struct dev_device *dev, struct dev_pd **out);
int emu_dealloc_pd(struct dev_pd *pd);
int emu_reg_mr(struct dev_pd *pd, void *addr, size_t length, unsigned access,
	       struct dev_mr **out);
int emu_dereg_mr(struct dev_mr *mr);
int emu_create_cq(struct dev_device *dev, int cqe, void *ctx, struct dev_cq **out);
int emu_destroy_cq(struct dev_cq *cq);
int emu_req_notify_cq(struct dev_cq *cq, int solicited_only);
int emu_get_cq_event(struct dev_cq *cq);
int emu_poll_cq(struct dev_cq *cq, int n, struct dev_wc *wc);
int emu_get_async_event(struct dev_device *dev, struct dev_async_event *ev);
/* Adds a completion; wakes the CQ if armed for it. qp/retire: the send queue slots its
 * polling frees (qp NULL for receives). Caller may hold a qp lock. */
void emu_cq_push(struct emu_cq *cq, const struct dev_wc *wc, int solicited, struct emu_qp *qp,
		 uint64_t retire);
/* Forgets q in the CQ's pending completions and pump list (destroy_qp). */
void emu_cq_forget_qp(struct emu_cq *cq, struct emu_qp *q);
/* Adds q to the CQ's pump list in role EMU_CQ_SEND/RECV (create_qp). 0 or -SMCR_E_NOMEM. */
int emu_cq_attach_qp(struct emu_cq *cq, struct emu_qp *q, unsigned role);
/* Queues an async event (any thread; takes ev_lock). */
void emu_event_push(struct emu_dev *d, enum dev_event_type type, uint32_t qpn, void *ctx);
/* Drops the queued events of a QP (destroy). */
void emu_event_drop_qp(struct emu_dev *d, uint32_t qpn);
/* MR lookup by key; caller holds mr_lock (read or write). NULL if no such key. */
struct emu_mr *emu_mr_lookup_locked(struct emu_dev *d, uint32_t key);
void emu_mr_table_fini(struct emu_dev *d);

/* ---- emu_qp.c ---- */
int emu_create_qp(struct dev_pd *pd, const struct dev_qp_init_attr *attr, struct dev_qp **out);
int emu_modify_qp(struct dev_qp *qp, const struct dev_qp_attr *attr, unsigned mask);
int emu_query_qp(struct dev_qp *qp, struct dev_qp_attr *attr);
int emu_destroy_qp(struct dev_qp *qp);
int emu_post_send(struct dev_qp *qp, const struct dev_send_wr *wr,
		  const struct dev_send_wr **bad_wr);
int emu_post_recv(struct dev_qp *qp, const struct dev_recv_wr *wr,
		  const struct dev_recv_wr **bad_wr);
/* Looks a QP up by number; caller holds dev->lock. */
struct emu_qp *emu_qp_lookup_locked(struct emu_dev *d, uint32_t qpn);
/* Sets want bits and queues the QP for the I/O thread (kicks it). Caller holds qp->lock. */
void emu_qp_work_locked(struct emu_qp *q, unsigned bits);
/* The QP goes to ERR by itself (or by explicit modify when event < 0): the send WR at
 * index err_idx of the send queue (-1: none) completes with status, every other posted WR
 * with DEV_WC_WR_FLUSH_ERR (in order, signaled or not); data frames not sent are dropped;
 * the connection is asked to close; event (>= 0) is queued. No-op if already ERR. */
void emu_qp_error_locked(struct emu_qp *q, int err_idx, enum dev_wc_status status, int event,
			 int why);
/* Completes every send WR with seq <= seq (success; CQE when signaled). Caller validated
 * seq. Resets the transport timer. */
void emu_qp_ack_locked(struct emu_qp *q, uint32_t seq);
/* Queues a control frame (ACK, NAK, RNR). 0 or -SMCR_E_NOMEM. */
int emu_qp_queue_ctrl_locked(struct emu_qp *q, const struct emu_frame *f);
/* Sends what may be sent now (handshake, then txq) without blocking; on a socket error the
 * QP goes to ERR. Updates the epoll registration. */
void emu_qp_tx_flush_locked(struct emu_qp *q);
/* Recomputes the epoll events for the QP's fd (EPOLLIN unless parked/stalled, EPOLLOUT when
 * blocked or connecting). */
void emu_qp_epoll_update_locked(struct emu_qp *q);
/* Drops every queued frame (or only data frames when keep_ctrl). */
void emu_qp_txq_clear_locked(struct emu_qp *q, int keep_ctrl);
/* Earliest deadline of the QP (transport timer, RNR, delayed frame); fires what is due. */
uint64_t emu_qp_timers_locked(struct emu_qp *q, uint64_t now);
/* RC sequence comparison: a is after b (mod 2^32). */
static inline int emu_seq_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/* ---- emu_rx.c ---- */
/* Applies the bytes in q->rx.buf (q->lock held). */
void emu_rx_process_locked(struct emu_qp *q);
/* Reads what the socket has (up to max_reads recv calls) and applies it; the end of the
 * connection puts the QP in ERR. Caller holds q->lock; q is connected (cs UP or HELLO). */
void emu_rx_pump_locked(struct emu_qp *q, int max_reads);
/* Keeps recv_posted equal to (rq_n > 0). */
static inline void emu_qp_rq_changed_locked(struct emu_qp *q)
{
	atomic_store_explicit(&q->recv_posted, q->rq_n > 0, memory_order_relaxed);
}
/* Keeps awaiting_ack equal to (sq_n > 0). */
static inline void emu_qp_sq_changed_locked(struct emu_qp *q)
{
	atomic_store_explicit(&q->awaiting_ack, q->sq_n > 0, memory_order_relaxed);
}
/* Receive side timers: RNR deadline. */
void emu_rx_rnr_expired_locked(struct emu_qp *q);
/* IB RNR timer code -> ns (IB spec table 45, min_rnr_timer). */
uint64_t emu_rnr_timer_ns(uint8_t code);

/* ---- emu_conn.c (I/O thread) ---- */
void emu_conn_accept(struct emu_dev *d);
void emu_conn_pend_event(struct emu_dev *d, struct emu_pend *p, uint32_t events);
void emu_conn_qp_event(struct emu_dev *d, struct emu_qp *q, uint32_t events);
void emu_conn_linger_event(struct emu_dev *d, struct emu_linger *l, uint32_t events);
/* Work for a QP popped from the work list; returns 1 if the QP was released (destroy). */
int emu_conn_work(struct emu_dev *d, struct emu_qp *q);
/* Deadlines of pending and lingering connections; returns the earliest remaining. */
uint64_t emu_conn_timers(struct emu_dev *d, uint64_t now);
/* Port went down: refuse every parked hello. */
void emu_conn_port_down(struct emu_dev *d);
/* Closes everything at device close (I/O thread ended). */
void emu_conn_fini(struct emu_dev *d);

/* ---- emu_io.c ---- */
void *emu_io_main(void *arg);

#endif
