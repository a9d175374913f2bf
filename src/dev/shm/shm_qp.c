/* shm_qp.c: RC queue pairs of the shm provider: the state machine (RESET, INIT, RTR, RTS,
 * ERR), the connection handshake steps, post_send (SEND, RDMA WRITE, WRITE_WITH_IMM) and
 * post_recv, send/receive progress, errors and flushes. Semantics: dev.h (RC rules 1-8);
 * how SMC-R uses them: docs/protocol/procedures.md 2.6, 4.3, 4.7; docs/protocol/linux-interop.md
 * 6. */
#define _GNU_SOURCE
#include "dev/shm/shm_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/copy.h"
#include "util/log.h"

/* IB min RNR NAK timer encoding (IB spec 9.7.5.2.8), in microseconds; code 0 = 655.36 ms. */
static const uint32_t rnr_timer_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
};

/* Transport timeout for a peer that never answers: 4.096 us * 2^timeout * (retry_cnt + 1)
 * (IB spec 9.7.6.1.3), bounded to [50 ms, 60 s]; timeout 0 means "infinite": 60 s. */
static uint64_t transport_timeout_ns(const struct dev_qp_attr *a)
{
	if (a->timeout == 0)
		return 60 * SMCR_NS_PER_S;
	uint64_t t = 4096ull << (a->timeout > 24 ? 24 : a->timeout);
	t *= (uint64_t)a->retry_cnt + 1;
	if (t < 50 * SMCR_NS_PER_MS)
		t = 50 * SMCR_NS_PER_MS;
	if (t > 60 * SMCR_NS_PER_S)
		t = 60 * SMCR_NS_PER_S;
	return t;
}

/* RNR give-up time: (rnr_retry + 1) periods of the receiver's min RNR timer, at least
 * 10 ms so the device thread's tick can see it. */
static uint64_t rnr_timeout_ns(const struct shm_qp *q)
{
	uint64_t t = (uint64_t)rnr_timer_us[q->peer_rnr_timer & 31] * 1000u *
		     ((uint64_t)q->attr.rnr_retry + 1);
	return t < 10 * SMCR_NS_PER_MS ? 10 * SMCR_NS_PER_MS : t;
}

static enum dev_qp_state qp_state(const struct shm_qp *q)
{
	return (enum dev_qp_state)atomic_load_explicit(&q->qp.state, memory_order_acquire);
}

static void set_state(struct shm_qp *q, enum dev_qp_state s)
{
	/* release: pairs with qp_state()'s acquire in lock-free readers (dev_qp.state). */
	atomic_store_explicit(&q->qp.state, (int)s, memory_order_release);
}

static enum dev_wc_opcode send_wc_opcode(enum dev_wr_opcode op)
{
	switch (op) {
	case DEV_WR_RDMA_WRITE:
	case DEV_WR_RDMA_WRITE_WITH_IMM:
		return DEV_WC_RDMA_WRITE;
	case DEV_WR_SEND:
		return DEV_WC_SEND;
	}
	return DEV_WC_SEND;
}

/* ---- errors ----------------------------------------------------------------------------- */

int shm_qp_mark_err(struct shm_qp *q, enum dev_wc_status head_status, int ev, int notify,
		    uint32_t reason)
{
	int cur = atomic_load_explicit(&q->qp.state, memory_order_acquire);
	do {
		if (cur == DEV_QPS_RESET || cur == DEV_QPS_ERR)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&q->qp.state, &cur, DEV_QPS_ERR,
							 memory_order_acq_rel,
							 memory_order_acquire));
	/* Only the CAS winner writes these; the device thread reads them after its acquire of
	 * err_work below. */
	q->err_status = head_status;
	q->err_event = ev < 0 ? 0 : ev + 1;
	q->err_notify = notify;
	q->err_reason = reason;
	atomic_store_explicit(&q->err_work, 1, memory_order_release);
	shm_dev_kick(q->sd);
	return 1;
}

/* A send WR leaves the SQ (executed, flushed or dropped): its big-inline copy goes back
 * to the QP's cache (shm_qp.heap_cache), or is freed when the cache is full. sq_lock held. */
static void swqe_release(struct shm_qp *q, struct shm_swqe *w)
{
	if (w->inline_heap && q->n_heap < SHM_HEAP_CACHE &&
	    q->heap_bytes + w->heap_len <= SHM_HEAP_CACHE_BYTES) {
		q->heap_cache[q->n_heap] = w->inline_heap;
		q->heap_len[q->n_heap++] = w->heap_len;
		q->heap_bytes += w->heap_len;
	} else {
		free(w->inline_heap);
	}
	w->inline_heap = NULL;
	w->heap_len = 0;
	w->inline_oom = false;
}

/* A buffer of at least len bytes for a big-inline copy: a cached one if one is big enough,
 * else a new one (NULL if out of memory). sq_lock held. */
static uint8_t *heap_get(struct shm_qp *q, uint32_t len, uint32_t *got)
{
	for (uint32_t i = q->n_heap; i-- > 0;) {
		if (q->heap_len[i] < len)
			continue;
		uint8_t *b = q->heap_cache[i];
		*got = q->heap_len[i];
		q->heap_bytes -= q->heap_len[i];
		q->n_heap--;
		q->heap_cache[i] = q->heap_cache[q->n_heap];
		q->heap_len[i] = q->heap_len[q->n_heap];
		return b;
	}
	*got = len;
	return malloc(len);
}

/* Frees the cached big-inline buffers (QP destroy). */
static void heap_cache_free(struct shm_qp *q)
{
	while (q->n_heap)
		free(q->heap_cache[--q->n_heap]);
	q->heap_bytes = 0;
}

/* Drops every queued send WR without completions (RESET, destroy). sq_lock held or the QP
 * unreachable. */
static void sq_drop_locked(struct shm_qp *q)
{
	for (uint32_t i = q->sq_head; i != q->sq_tail; i++)
		swqe_release(q, &q->sq[i % q->sq_size]);
	q->sq_head = q->sq_tail;
}

/* Completes every pending send WR: the first with head_status, the rest WR_FLUSH_ERR.
 * sq_lock held. */
static void sq_flush_locked(struct shm_qp *q, enum dev_wc_status head_status)
{
	struct shm_cq *cq = shm_cq_of(q->qp.send_cq);
	int first = 1;

	while (q->sq_head != q->sq_tail) {
		struct shm_swqe *w = &q->sq[q->sq_head % q->sq_size];
		struct shm_cqe e;
		memset(&e, 0, sizeof e);
		e.wc.wr_id = w->wr_id;
		e.wc.status = first ? head_status : DEV_WC_WR_FLUSH_ERR;
		e.wc.opcode = send_wc_opcode(w->opcode);
		e.wc.qp_num = q->qp.qp_num;
		e.qp = q;
		e.sq_slots = 1 + (first ? q->unsig_done : 0);
		if (first)
			q->unsig_done = 0;
		first = 0;
		swqe_release(q, w);
		q->sq_head++;
		atomic_fetch_sub_explicit(&q->sq_pending, 1, memory_order_relaxed);
		shm_cq_push(cq, &e);
	}
	q->block_since_ns = 0;
	q->deadline_ns = 0;
}

/* Completes every posted receive WR with WR_FLUSH_ERR. rq_lock held. */
static void rq_flush_locked(struct shm_qp *q)
{
	struct shm_cq *cq = shm_cq_of(q->qp.recv_cq);

	while (q->rq_head != q->rq_tail) {
		struct shm_rwqe *w = &q->rq[q->rq_head % q->rq_size];
		struct shm_cqe e;
		memset(&e, 0, sizeof e);
		e.wc.wr_id = w->wr_id;
		e.wc.status = DEV_WC_WR_FLUSH_ERR;
		e.wc.opcode = DEV_WC_RECV;
		e.wc.qp_num = q->qp.qp_num;
		e.qp = q;
		q->rq_head++;
		shm_cq_push(cq, &e);
	}
}

/* ---- receive side ------------------------------------------------------------------------ */

/* After freeing ring space or announcing credits: wake a producer that waits for them.
 * rq_lock held. */
static void wake_producer_locked(struct shm_qp *q)
{
	/* seq_cst fence: Dekker with the producer's "store tx_wait; fence; reload cons and
	 * credits" (tx_room): either it sees our new cons/credits, or we see tx_wait here. */
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&q->rx.hdr->tx_wait, memory_order_relaxed))
		return;
	if (!atomic_exchange_explicit(&q->rx.hdr->tx_wait, 0, memory_order_relaxed))
		return;
	if (q->peer) {
		int fd = atomic_load_explicit(&q->peer->kick_fd, memory_order_acquire);
		if (fd >= 0)
			shm_efd_signal(fd);
	}
}

/* Moves published messages into posted receive WRs, in order (RC rule 1). rq_lock held and
 * the rx ring mapped. A hostile ring or a message without a receive WR moves the QP to ERR. */
static void rx_consume_locked(struct shm_qp *q, int polled)
{
	struct shm_cq *cq = shm_cq_of(q->qp.recv_cq);
	int consumed = 0;

	for (;;) {
		struct shm_ring_msg m;
		int rc = shm_ring_peek(&q->rx, q->rx_cons, &m);
		if (rc == -SMCR_E_AGAIN)
			break;
		if (rc == 0 && q->rq_head == q->rq_tail)
			rc = -SMCR_E_SHM_RING_NO_WQE;
		if (rc) {
			SMCR_LOG_RL(SMCR_LOG_WARN, "shm", "QP %u: peer ring violation: %s",
				    q->qp.qp_num, smcr_err_msg(rc));
			shm_qp_mark_err(q, DEV_WC_WR_FLUSH_ERR, DEV_EVENT_QP_FATAL, 1,
					SHM_GONE_DISCONNECT);
			break;
		}
		struct shm_rwqe *w = &q->rq[q->rq_head % q->rq_size];
		struct shm_cqe e;
		int fatal = 0;
		memset(&e, 0, sizeof e);
		e.wc.wr_id = w->wr_id;
		e.wc.qp_num = q->qp.qp_num;
		e.wc.src_qp = q->peer_qpn;	/* never the producer's claim */
		e.wc.byte_len = m.len;
		e.qp = q;
		e.solicited = (m.flags & SHM_MSGF_SOLICITED) != 0;
		if (m.op == SHM_OP_SEND) {
			e.wc.opcode = DEV_WC_RECV;
			if (m.len > w->cap) {
				e.wc.status = DEV_WC_LOC_LEN_ERR;	/* dev.h rule 7 */
				fatal = 1;
			} else {
				uint32_t off = 0;
				for (uint32_t i = 0; i < w->num_sge && off < m.len; i++) {
					uint32_t n = w->sge[i].length;
					if (n > m.len - off)
						n = m.len - off;
					if (!n)
						continue;
					void *p = shm_lkey_ptr(q->sd, q->qp.pd, w->sge[i].lkey,
							       w->sge[i].addr, n,
							       DEV_ACCESS_LOCAL_WRITE);
					if (!p) {
						e.wc.status = DEV_WC_LOC_PROT_ERR;
						fatal = 1;
						break;
					}
					shm_ring_get_data(&q->rx, q->rx_cons, off, p, n);
					off += n;
				}
			}
		} else {
			e.wc.opcode = DEV_WC_RECV_RDMA_WITH_IMM;
			e.wc.imm_data = m.imm;
			e.wc.wc_flags = DEV_WC_WITH_IMM;
		}
		q->rq_head++;
		q->rx_cons += m.cells;
		shm_ring_consume(&q->rx, q->rx_cons);
		atomic_store_explicit(&q->rx_cons_hint, q->rx_cons, memory_order_relaxed);
		consumed = 1;
		if (polled)
			shm_cq_push_polled(cq, &e);
		else
			shm_cq_push(cq, &e);
		if (fatal) {
			shm_qp_mark_err(q, DEV_WC_WR_FLUSH_ERR, -1, 1, SHM_GONE_DISCONNECT);
			break;
		}
	}
	if (consumed)
		wake_producer_locked(q);
}

/* In ERR: what the peer published before the error was received (its sends completed
 * successfully), so deliver it first, in order; then flush the rest (dev.h rule 4).
 * rq_lock held. */
static void rq_err_flush_locked(struct shm_qp *q)
{
	if (q->rx.map)
		rx_consume_locked(q, 0);
	rq_flush_locked(q);
}

void shm_qp_rx_progress(struct shm_qp *q)
{
	pthread_mutex_lock(&q->rq_lock);
	enum dev_qp_state s = qp_state(q);
	if (q->rx.map && (s == DEV_QPS_RTR || s == DEV_QPS_RTS))
		rx_consume_locked(q, 1);
	pthread_mutex_unlock(&q->rq_lock);
}

/* Announces receive WR #rx_posted's capacity and the new credit count. rq_lock held,
 * rx ring mapped. */
static void announce_wqe_locked(struct shm_qp *q, uint32_t cap)
{
	atomic_store_explicit(&q->rx.caps[q->rx_posted & (q->rx.caps_size - 1)], cap,
			      memory_order_relaxed);
	q->rx_posted++;
	/* release: the producer's acquire load of credits (tx_room) sees caps[] above. */
	atomic_store_explicit(&q->rx.hdr->credits, q->rx_posted, memory_order_release);
}

int shm_post_recv(struct dev_qp *dq, const struct dev_recv_wr *wr,
		  const struct dev_recv_wr **bad)
{
	struct shm_qp *q = shm_qp_of(dq);
	int rc = 0, announced = 0;

	pthread_mutex_lock(&q->rq_lock);
	for (; wr; wr = wr->next) {
		enum dev_qp_state s = qp_state(q);
		if (s == DEV_QPS_RESET) {
			rc = -SMCR_E_DEV_BAD_STATE;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->qp.cap.max_recv_sge ||
		    (wr->num_sge && !wr->sg_list)) {
			rc = -SMCR_E_DEV_BAD_WR;
			break;
		}
		if (q->rq_tail - q->rq_head >= q->rq_size) {
			rc = -SMCR_E_DEV_QUEUE_FULL;
			break;
		}
		uint64_t cap = 0;
		for (int i = 0; i < wr->num_sge; i++)
			cap += wr->sg_list[i].length;
		if (cap > UINT32_MAX) {
			rc = -SMCR_E_DEV_BAD_WR;
			break;
		}
		struct shm_rwqe *w = &q->rq[q->rq_tail % q->rq_size];
		w->wr_id = wr->wr_id;
		w->num_sge = (uint32_t)wr->num_sge;
		w->cap = (uint32_t)cap;
		if (wr->num_sge)
			memcpy(w->sge, wr->sg_list, sizeof(struct dev_sge) * (size_t)wr->num_sge);
		q->rq_tail++;
		if (s == DEV_QPS_ERR) {
			rq_err_flush_locked(q);	/* dev.h rule 4: flushed at once */
			continue;
		}
		if (q->rx.map) {
			announce_wqe_locked(q, w->cap);
			announced = 1;
		}
	}
	if (announced)
		wake_producer_locked(q);
	pthread_mutex_unlock(&q->rq_lock);
	if (rc && bad)
		*bad = wr;
	return rc;
}

/* ---- send side ---------------------------------------------------------------------------- */

enum tx_res { TX_DONE, TX_BLOCKED_CREDIT, TX_BLOCKED_SPACE, TX_FAILED };
/* block_reason of a responder waiting for QP_RTU (distinct from every enum tx_res). */
#define SHM_BLOCK_RTU_WAIT (-1)

/* Room for a message of `cells` cells (and, if need_credit, a receive WR at the peer).
 * sq_lock held. 0: go (*cap = the receive WR's capacity); TX_BLOCKED_*; or a negative
 * code when the peer's ring counters are impossible (hostile). */
static int tx_room(struct shm_qp *q, uint32_t cells, int need_credit, uint32_t *cap)
{
	for (int pass = 0; pass < 2; pass++) {
		/* acquire: pairs with announce_wqe_locked's release (caps[] visible). */
		uint32_t credits = atomic_load_explicit(&q->tx.hdr->credits, memory_order_acquire);
		uint32_t avail = credits - q->tx_msgs;
		uint32_t free_cells;
		int rc = shm_ring_free(&q->tx, q->tx_prod, &free_cells);
		if (rc)
			return rc;
		if (avail > q->peer_max_recv)
			return -SMCR_E_SHM_RING_BAD_CONS;	/* more credits than WRs it has */
		if (need_credit && avail == 0) {
			if (pass)
				return TX_BLOCKED_CREDIT;
		} else if (free_cells < cells) {
			if (pass)
				return TX_BLOCKED_SPACE;
		} else {
			if (need_credit)
				*cap = atomic_load_explicit(
					&q->tx.caps[q->tx_msgs & (q->tx.caps_size - 1)],
					memory_order_relaxed);
			return 0;
		}
		atomic_store_explicit(&q->tx.hdr->tx_wait, 1, memory_order_relaxed);
		/* seq_cst fence: Dekker with wake_producer_locked on the consumer side. */
		atomic_thread_fence(memory_order_seq_cst);
	}
	return TX_BLOCKED_SPACE;
}

/* Wakes the consumer's CQ if it armed it for this message. */
static void tx_publish(struct shm_qp *q, uint32_t cells, int solicited)
{
	q->tx_prod += cells;
	q->tx_msgs++;
	uint32_t want = shm_ring_publish(&q->tx, q->tx_prod);
	if (want == SHM_WAKE_ANY || (want == SHM_WAKE_SOLICITED && solicited)) {
		if (shm_ring_take_wake(&q->tx) && q->peer_cq_fd >= 0)
			shm_efd_signal(q->peer_cq_fd);
	}
}

static uint32_t swqe_len(const struct shm_swqe *w)
{
	if (w->flags & DEV_SEND_INLINE)
		return w->inline_len;
	uint64_t n = 0;
	for (uint32_t i = 0; i < w->num_sge; i++)
		n += w->sge[i].length;
	return (uint32_t)n;	/* bounded at post time */
}

/* The source pieces of an inline WR: the WQE's own bytes, the big-inline heap copy, or
 * (only while the posting post_send runs) the caller's SGEs. Returns the piece count. */
static uint32_t inline_src(const struct shm_swqe *w, const void *src[SHM_MAX_SGE],
			   uint32_t n[SHM_MAX_SGE])
{
	if (!w->inline_len)
		return 0;
	if (w->inline_len <= SHM_MAX_INLINE || w->inline_heap) {
		src[0] = w->inline_len <= SHM_MAX_INLINE ? w->inline_data : w->inline_heap;
		n[0] = w->inline_len;
		return 1;
	}
	uint32_t k = 0;
	for (uint32_t i = 0; i < w->num_sge; i++) {
		if (!w->sge[i].length)
			continue;
		src[k] = (const void *)(uintptr_t)w->sge[i].addr;
		n[k++] = w->sge[i].length;
	}
	return k;
}

/* The first WRITEs into the part of a peer MR our mapping has not touched yet populate
 * its pages in one call (MADV_POPULATE_WRITE) instead of taking a fault on each (a 64 KiB
 * RMBE is 16; on a VM with shadow page tables a fault costs about 10 us, docs/parts/conns.md
 * "Memory"). Only what is written is populated, so memory stays what use makes resident,
 * and only a write that continues the populated prefix (rings are written from their
 * start): a write beyond a gap takes its faults as before, so a peer cannot make us
 * populate memory we never write. Best effort: before Linux 5.14 madvise says EINVAL. */
static void rmr_touch(struct shm_rmr *r, const uint8_t *dst, uint64_t len)
{
#ifdef MADV_POPULATE_WRITE
	uint64_t end = (uint64_t)(dst - (const uint8_t *)r->map) + len;
	uint64_t hw = atomic_load_explicit(&r->touched, memory_order_relaxed);
	if (end <= hw)
		return;
	long psz = sysconf(_SC_PAGESIZE);
	uint64_t pg = psz > 0 ? (uint64_t)psz : 4096u;
	uint64_t start = (uint64_t)(dst - (const uint8_t *)r->map) & ~(pg - 1);
	if (start > hw)
		return;
	uint64_t to = (end + pg - 1) & ~(pg - 1);
	if (to > r->map_len)
		to = r->map_len;
	(void)madvise((uint8_t *)r->map + hw, (size_t)(to - hw), MADV_POPULATE_WRITE);
	while (hw < to && !atomic_compare_exchange_weak_explicit(&r->touched, &hw, to,
								  memory_order_relaxed,
								  memory_order_relaxed))
		;
#else
	(void)r;
	(void)dst;
	(void)len;
#endif
}

/* RDMA WRITE: bounds and rkey checks against the peer's exported MR, then one memcpy per
 * SGE straight into the peer's memory. sq_lock held, connection up. */
static enum dev_wc_status tx_write(struct shm_qp *q, const struct shm_swqe *w, uint32_t len)
{
	const void *src[SHM_MAX_SGE];
	uint32_t n[SHM_MAX_SGE], k = 0;

	if (w->flags & DEV_SEND_INLINE) {
		if (w->inline_oom)
			return DEV_WC_LOC_PROT_ERR;
		k = inline_src(w, src, n);
	} else {
		for (uint32_t i = 0; i < w->num_sge; i++) {
			if (!w->sge[i].length)
				continue;
			src[k] = shm_lkey_ptr(q->sd, q->qp.pd, w->sge[i].lkey, w->sge[i].addr,
					      w->sge[i].length, 0);
			if (!src[k])
				return DEV_WC_LOC_PROT_ERR;
			n[k++] = w->sge[i].length;
		}
	}
	if (!len)
		return DEV_WC_SUCCESS;
	struct shm_peer *p = q->peer;
	enum dev_wc_status st = DEV_WC_REM_ACCESS_ERR;
	uint32_t idx = (w->rkey & 0xffffu) - 1u;
	pthread_rwlock_rdlock(&p->rmr_lock);
	struct shm_rmr *r = shm_peer_rmr_find(p, w->rkey);
	if (r && r->pd_id == q->peer_pd_id && idx < p->rkey_tab_entries &&
	    w->remote_addr >= r->iova && len <= r->length &&
	    w->remote_addr - r->iova <= r->length - len) {
		/* seq_cst store then seq_cst load: Dekker with the owner's dereg (shm_mr.c:
		 * store tab[idx] = 0; then load busy_rkey): either we see the rkey invalid
		 * here, or the owner sees busy_rkey and waits until our copy is done. */
		atomic_store_explicit(&q->tx.hdr->busy_rkey, w->rkey, memory_order_seq_cst);
		if (atomic_load_explicit(&p->rkey_tab[idx], memory_order_seq_cst) == w->rkey) {
			uint8_t *dst = r->base + (w->remote_addr - r->iova);
			rmr_touch(r, dst, len);
			for (uint32_t i = 0; i < k; i++) {
				smcr_copy(dst, src[i], n[i]);
				dst += n[i];
			}
			st = DEV_WC_SUCCESS;
		}
		/* release: the copy is done before the owner sees busy_rkey cleared. */
		atomic_store_explicit(&q->tx.hdr->busy_rkey, 0, memory_order_release);
	}
	pthread_rwlock_unlock(&p->rmr_lock);
	return st;
}

/* Executes one send WR. sq_lock held, RTS, connection up. */
static enum tx_res tx_exec(struct shm_qp *q, const struct shm_swqe *w, enum dev_wc_status *st)
{
	uint32_t len = swqe_len(w), cap = 0;
	int solicited = (w->flags & DEV_SEND_SOLICITED) != 0;
	int rc;

	*st = DEV_WC_SUCCESS;
	switch (w->opcode) {
	case DEV_WR_SEND: {
		uint32_t cells = shm_msg_cells(len);
		rc = tx_room(q, cells, 1, &cap);
		if (rc > 0)
			return (enum tx_res)rc;
		if (rc < 0)
			goto hostile;
		struct shm_ring_msg m = { .op = SHM_OP_SEND,
					  .flags = solicited ? SHM_MSGF_SOLICITED : 0,
					  .cells = (uint16_t)cells, .len = len,
					  .src_qpn = q->qp.qp_num };
		if (w->flags & DEV_SEND_INLINE) {
			const void *src[SHM_MAX_SGE];
			uint32_t n[SHM_MAX_SGE], off = 0;
			if (w->inline_oom) {
				*st = DEV_WC_LOC_PROT_ERR;
				return TX_FAILED;
			}
			uint32_t k = inline_src(w, src, n);
			for (uint32_t i = 0; i < k; i++) {
				shm_ring_put_data(&q->tx, q->tx_prod, off, src[i], n[i]);
				off += n[i];
			}
		} else {
			uint32_t off = 0;
			for (uint32_t i = 0; i < w->num_sge; i++) {
				if (!w->sge[i].length)
					continue;
				const void *p = shm_lkey_ptr(q->sd, q->qp.pd, w->sge[i].lkey,
							     w->sge[i].addr, w->sge[i].length, 0);
				if (!p) {
					*st = DEV_WC_LOC_PROT_ERR;
					return TX_FAILED;
				}
				shm_ring_put_data(&q->tx, q->tx_prod, off, p, w->sge[i].length);
				off += w->sge[i].length;
			}
		}
		shm_ring_put_hdr(&q->tx, q->tx_prod, &m);
		tx_publish(q, cells, solicited);
		if (len > cap) {
			/* Published anyway: the receiver reports LOC_LEN_ERR (dev.h rule 7). */
			*st = DEV_WC_REM_INV_REQ_ERR;
			return TX_FAILED;
		}
		return TX_DONE;
	}
	case DEV_WR_RDMA_WRITE_WITH_IMM:
		rc = tx_room(q, 1, 1, &cap);
		if (rc > 0)
			return (enum tx_res)rc;
		if (rc < 0)
			goto hostile;
		/* fall through */
	case DEV_WR_RDMA_WRITE:
		*st = tx_write(q, w, len);
		if (*st != DEV_WC_SUCCESS)
			return TX_FAILED;
		if (w->opcode == DEV_WR_RDMA_WRITE_WITH_IMM) {
			struct shm_ring_msg m = { .op = SHM_OP_WRITE_IMM,
						  .flags = solicited ? SHM_MSGF_SOLICITED : 0,
						  .cells = 1, .len = len, .imm = w->imm,
						  .src_qpn = q->qp.qp_num };
			shm_ring_put_hdr(&q->tx, q->tx_prod, &m);
			tx_publish(q, 1, solicited);
		}
		return TX_DONE;
	}
	*st = DEV_WC_LOC_QP_OP_ERR;
	return TX_FAILED;
hostile:
	SMCR_LOG_RL(SMCR_LOG_WARN, "shm", "QP %u: peer ring violation: %s", q->qp.qp_num,
		    smcr_err_msg(rc));
	*st = DEV_WC_RETRY_EXC_ERR;
	return TX_FAILED;
}

/* Completes the head WR with st and moves the QP to ERR. sq_lock held. */
static void fail_head_locked(struct shm_qp *q, enum dev_wc_status st)
{
	int ev = (st == DEV_WC_RETRY_EXC_ERR || st == DEV_WC_RNR_RETRY_EXC_ERR)
			 ? DEV_EVENT_QP_FATAL : -1;
	uint32_t reason = st == DEV_WC_REM_ACCESS_ERR ? SHM_GONE_ACCESS : SHM_GONE_DISCONNECT;
	shm_qp_mark_err(q, DEV_WC_WR_FLUSH_ERR, ev, 1, reason);
	sq_flush_locked(q, st);
}

/* Executes pending send WRs in order until one blocks. sq_lock held. */
static void tx_progress_locked(struct shm_qp *q)
{
	struct shm_cq *cq = shm_cq_of(q->qp.send_cq);

	while (q->sq_head != q->sq_tail) {
		enum dev_qp_state s = qp_state(q);
		if (s == DEV_QPS_ERR) {
			sq_flush_locked(q, DEV_WC_WR_FLUSH_ERR);
			return;
		}
		enum tx_res r;
		enum dev_wc_status st = DEV_WC_SUCCESS;
		const struct shm_swqe *w = &q->sq[q->sq_head % q->sq_size];
		if (s != DEV_QPS_RTS || q->conn != SHM_CONN_UP)
			r = TX_BLOCKED_SPACE;	/* not connected yet: transport retries */
		else
			r = tx_exec(q, w, &st);
		if (r == TX_BLOCKED_CREDIT || r == TX_BLOCKED_SPACE) {
			uint64_t now = smcr_now_ns();
			/* The deadline belongs to the reason: not connected and the peer QP
			 * not known ready (transport timeout), not connected but the peer QP
			 * known ready (the RTU wait, below), no receive WR (RNR), no ring
			 * space (none). */
			int reason = q->conn == SHM_CONN_UP ? (int)r
				     : q->conn == SHM_CONN_ACK_SENT ? SHM_BLOCK_RTU_WAIT : 0;
			if (q->block_since_ns && reason != q->block_reason)
				q->block_since_ns = 0;
			q->block_reason = reason;
			if (!q->block_since_ns) {
				q->block_since_ns = now;
				q->deadline_ns = 0;
				if (q->conn == SHM_CONN_ACK_SENT) {
					/* Responder that matched the initiator's QP_REQ: the
					 * initiator sent it from RTR, so in verbs terms both QPs
					 * are ready and a real responder would answer at once.
					 * What is left (the initiator's device thread exports its
					 * MRs and sends QP_RTU) is this provider's bookkeeping,
					 * and its time is the peer process's scheduling, not an
					 * unanswered transport: it must not spend the transport
					 * timeout (docs/parts/robust.md "Concurrent first
					 * contacts"). A vanished peer still ends it within
					 * milliseconds (hang-up, QP_GONE); this bound is only a
					 * backstop for a live peer that never answers. */
					q->deadline_ns = now + SHM_RTU_WAIT_NS;
					q->block_status = DEV_WC_RETRY_EXC_ERR;
				} else if (q->conn != SHM_CONN_UP) {
					q->deadline_ns = now + transport_timeout_ns(&q->attr);
					q->block_status = DEV_WC_RETRY_EXC_ERR;
				} else if (r == TX_BLOCKED_CREDIT && q->attr.rnr_retry < 7) {
					q->deadline_ns = now + rnr_timeout_ns(q);
					q->block_status = DEV_WC_RNR_RETRY_EXC_ERR;
				}
				if (q->deadline_ns)
					shm_dev_kick(q->sd);	/* make the thread tick */
			} else if (q->deadline_ns && now >= q->deadline_ns) {
				fail_head_locked(q, q->block_status);
			}
			return;
		}
		q->block_since_ns = 0;
		q->deadline_ns = 0;
		if (r == TX_FAILED) {
			fail_head_locked(q, st);
			return;
		}
		uint64_t wr_id = w->wr_id;
		enum dev_wr_opcode op = w->opcode;
		int signaled = q->sig_all || (w->flags & DEV_SEND_SIGNALED);
		swqe_release(q, &q->sq[q->sq_head % q->sq_size]);
		q->sq_head++;
		atomic_fetch_sub_explicit(&q->sq_pending, 1, memory_order_relaxed);
		if (!signaled) {
			q->unsig_done++;
			continue;
		}
		struct shm_cqe e;
		memset(&e, 0, sizeof e);
		e.wc.wr_id = wr_id;
		e.wc.status = DEV_WC_SUCCESS;
		e.wc.opcode = send_wc_opcode(op);
		e.wc.qp_num = q->qp.qp_num;
		e.qp = q;
		e.sq_slots = 1 + q->unsig_done;
		q->unsig_done = 0;
		shm_cq_push(cq, &e);
	}
	q->block_since_ns = 0;
	q->deadline_ns = 0;
}

void shm_qp_tx_progress(struct shm_qp *q)
{
	pthread_mutex_lock(&q->sq_lock);
	tx_progress_locked(q);
	pthread_mutex_unlock(&q->sq_lock);
}

static int check_send_wr(const struct shm_qp *q, const struct dev_send_wr *wr, uint32_t *len)
{
	if (wr->opcode != DEV_WR_SEND && wr->opcode != DEV_WR_RDMA_WRITE &&
	    wr->opcode != DEV_WR_RDMA_WRITE_WITH_IMM)
		return -SMCR_E_DEV_BAD_WR;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->qp.cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return -SMCR_E_DEV_BAD_WR;
	uint64_t n = 0;
	for (int i = 0; i < wr->num_sge; i++)
		n += wr->sg_list[i].length;
	if ((wr->send_flags & DEV_SEND_INLINE) && n > q->qp.cap.max_inline_data)
		return -SMCR_E_DEV_BAD_WR;
	if (wr->opcode == DEV_WR_SEND ? n > SHM_MAX_SEND : n > (1u << 30))
		return -SMCR_E_DEV_BAD_WR;
	*len = (uint32_t)n;
	return 0;
}

int shm_post_send(struct dev_qp *dq, const struct dev_send_wr *wr,
		  const struct dev_send_wr **bad)
{
	struct shm_qp *q = shm_qp_of(dq);
	int rc = 0;

	pthread_mutex_lock(&q->sq_lock);
	uint32_t first = q->sq_tail, nbig = 0;
	for (; wr; wr = wr->next) {
		uint32_t len;
		enum dev_qp_state s = qp_state(q);
		if (s != DEV_QPS_RTS && s != DEV_QPS_ERR) {
			rc = -SMCR_E_DEV_BAD_STATE;
			break;
		}
		rc = check_send_wr(q, wr, &len);
		if (rc)
			break;
		if (atomic_load_explicit(&q->sq_used, memory_order_relaxed) >= q->sq_size) {
			rc = -SMCR_E_DEV_QUEUE_FULL;
			break;
		}
		struct shm_swqe *w = &q->sq[q->sq_tail % q->sq_size];
		w->wr_id = wr->wr_id;
		w->opcode = wr->opcode;
		w->flags = wr->send_flags;
		w->imm = wr->imm_data;
		w->remote_addr = wr->rdma.remote_addr;
		w->rkey = wr->rdma.rkey;
		w->num_sge = (uint32_t)wr->num_sge;
		w->inline_len = 0;
		if ((wr->send_flags & DEV_SEND_INLINE) && len > SHM_MAX_INLINE) {
			/* Big inline: read from the caller's SGEs when it executes below. */
			memcpy(w->sge, wr->sg_list, sizeof(struct dev_sge) * (size_t)wr->num_sge);
			w->inline_len = len;
			nbig++;
		} else if (wr->send_flags & DEV_SEND_INLINE) {
			/* Copied now: the caller may reuse its buffer when we return (verbs). */
			uint32_t off = 0;
			for (int i = 0; i < wr->num_sge; i++) {
				if (wr->sg_list[i].length)
					memcpy(w->inline_data + off,
					       (const void *)(uintptr_t)wr->sg_list[i].addr,
					       wr->sg_list[i].length);
				off += wr->sg_list[i].length;
			}
			w->inline_len = len;
			w->num_sge = 0;
		} else if (wr->num_sge) {
			memcpy(w->sge, wr->sg_list, sizeof(struct dev_sge) * (size_t)wr->num_sge);
		}
		q->sq_tail++;
		atomic_fetch_add_explicit(&q->sq_pending, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&q->sq_used, 1, memory_order_relaxed);
	}
	tx_progress_locked(q);
	/* Big-inline WRs that could not execute yet (behind a blocked WR, or not connected):
	 * the caller's buffer is only ours until we return, so copy them now. */
	if (nbig) {
		uint32_t i = q->sq_tail - first > q->sq_tail - q->sq_head ? q->sq_head : first;
		for (; i != q->sq_tail; i++) {
			struct shm_swqe *w = &q->sq[i % q->sq_size];
			if (!(w->flags & DEV_SEND_INLINE) || w->inline_len <= SHM_MAX_INLINE ||
			    w->inline_heap || w->inline_oom)
				continue;
			const void *src[SHM_MAX_SGE];
			uint32_t n[SHM_MAX_SGE], off = 0;
			uint32_t k = inline_src(w, src, n);
			w->inline_heap = heap_get(q, w->inline_len, &w->heap_len);
			if (!w->inline_heap) {
				w->inline_oom = true;
			} else {
				for (uint32_t j = 0; j < k; j++) {
					smcr_copy(w->inline_heap + off, src[j], n[j]);
					off += n[j];
				}
			}
			w->num_sge = 0;
		}
	}
	pthread_mutex_unlock(&q->sq_lock);
	if (rc && bad)
		*bad = wr;
	return rc;
}

/* ---- connection (device thread and modify_qp; sd->lock held) ------------------------------ */

static uint32_t qp_caps_size(const struct shm_qp *q)
{
	return shm_pow2(q->rq_size);
}

/* Creates our inbound ring and announces the receive WRs already posted. sd->lock held,
 * no QP lock. *fd: the ring's memfd for the peer. */
static int qp_make_rx(struct shm_qp *q, int *fd)
{
	struct shm_ring r;
	int rc = shm_ring_create(SHM_RING_CELLS, qp_caps_size(q), &r, fd);
	if (rc)
		return rc;
	struct shm_cq *rcq = shm_cq_of(q->qp.recv_cq);
	pthread_mutex_lock(&rcq->list_lock);
	pthread_mutex_lock(&q->sq_lock);
	pthread_mutex_lock(&q->rq_lock);
	q->rx = r;
	q->rx_cons = 0;
	q->rx_posted = 0;
	atomic_store_explicit(&q->rx_cons_hint, 0, memory_order_relaxed);
	for (uint32_t i = q->rq_head; i != q->rq_tail; i++)
		announce_wqe_locked(q, q->rq[i % q->rq_size].cap);
	/* The CQ may have been armed before this ring existed (shm_req_notify_cq marks only
	 * rings published in rx_hdr): copy its arming. Holding list_lock orders us against
	 * the arm's walk over the rings: either it sees rx_hdr below, or we see its mode. */
	pthread_mutex_lock(&rcq->lock);
	atomic_store_explicit(&r.hdr->need_wake, (uint32_t)rcq->armed, memory_order_relaxed);
	pthread_mutex_unlock(&rcq->lock);
	/* release: pollers (shm_poll_cq, under list_lock) see the initialized ring. */
	atomic_store_explicit(&q->rx_hdr, r.hdr, memory_order_release);
	pthread_mutex_unlock(&q->rq_lock);
	pthread_mutex_unlock(&q->sq_lock);
	pthread_mutex_unlock(&rcq->list_lock);
	return 0;
}

/* Tears down the connection state (rings, peer binding). sd->lock held, no QP lock. */
static void qp_unbind_locked(struct shm_qp *q)
{
	struct shm_cq *rcq = shm_cq_of(q->qp.recv_cq);
	pthread_mutex_lock(&rcq->list_lock);
	atomic_store_explicit(&q->rx_hdr, NULL, memory_order_release);
	pthread_mutex_unlock(&rcq->list_lock);

	pthread_mutex_lock(&q->sq_lock);
	pthread_mutex_lock(&q->rq_lock);
	shm_ring_unmap(&q->rx);
	shm_ring_unmap(&q->tx);
	if (q->peer_cq_fd >= 0)
		close(q->peer_cq_fd);
	q->peer_cq_fd = -1;
	struct shm_peer *p = q->peer;
	q->peer = NULL;
	q->conn = SHM_CONN_NONE;
	q->gone_sent = 0;
	q->tx_prod = q->tx_msgs = 0;
	q->rx_cons = q->rx_posted = 0;
	q->peer_qpn = q->peer_pd_id = q->peer_max_recv = 0;
	pthread_mutex_unlock(&q->rq_lock);
	pthread_mutex_unlock(&q->sq_lock);
	if (p)
		shm_peer_put(p);	/* hold in qp_bind */
}

static void qp_send_gone_locked(struct shm_qp *q, uint32_t reason)
{
	if (!q->peer || q->gone_sent || q->conn == SHM_CONN_NONE || q->conn == SHM_CONN_WANT)
		return;
	struct shm_msg m = { .type = SHM_MSG_QP_GONE };
	m.u.gone.src_qpn = q->qp.qp_num;
	m.u.gone.dst_qpn = q->attr.dest_qp_num;
	m.u.gone.reason = reason;
	q->gone_sent = 1;
	(void)shm_peer_send(q->peer, &m, NULL, 0);
}

static void fill_qp_msg(const struct shm_qp *q, struct shm_msg_qp *m)
{
	m->src_qpn = q->qp.qp_num;
	m->dst_qpn = q->attr.dest_qp_num;
	m->pd_id = q->pd_id;
	m->ncells = SHM_RING_CELLS;
	m->caps_size = qp_caps_size(q);
	m->max_recv_wr = q->rq_size;
	m->min_rnr_timer = q->attr.min_rnr_timer;
	m->mtu = (uint8_t)q->attr.path_mtu;
}

int shm_qp_start_conn_locked(struct shm_qp *q, uint64_t now)
{
	struct shm_dev *sd = q->sd;

	if (q->conn != SHM_CONN_WANT || !q->initiator)
		return 0;
	if (now < q->next_connect_ns)
		return 1;
	q->next_connect_ns = now + SHM_TICK_MS * SMCR_NS_PER_MS;
	if (!sd->port_up)
		return 1;
	struct shm_peer *p = shm_dev_dial_locked(sd, &q->attr.ah_attr.dgid);
	if (!p)
		return 1;	/* not reachable yet: dial again next tick */
	int fd;
	if (qp_make_rx(q, &fd))
		return 1;
	pthread_mutex_lock(&q->sq_lock);
	pthread_mutex_lock(&q->rq_lock);
	shm_peer_hold(p);	/* put in qp_unbind_locked */
	q->peer = p;
	q->conn = SHM_CONN_REQ_SENT;
	pthread_mutex_unlock(&q->rq_lock);
	pthread_mutex_unlock(&q->sq_lock);
	struct shm_msg m = { .type = SHM_MSG_QP_REQ };
	fill_qp_msg(q, &m.u.qp);
	int fds[2] = { fd, shm_cq_of(q->qp.recv_cq)->efd };
	(void)shm_peer_send(p, &m, fds, 2);
	close(fd);
	return 0;
}

/* Binds the tx side to a ring/CQ fd the peer sent. Takes neither fd. */
static int qp_attach_tx(struct shm_qp *q, const struct shm_msg_qp *pm, int ring_fd, int cq_fd,
			struct shm_ring *tx, int *cq_dup)
{
	int rc = shm_ring_attach(ring_fd, pm->ncells, pm->caps_size, tx);
	if (rc)
		return rc;
	if (shm_check_eventfd(cq_fd)) {
		shm_ring_unmap(tx);
		return -SMCR_E_SHM_BAD_FD;
	}
	*cq_dup = cq_fd;
	(void)q;
	return 0;
}

int shm_qp_on_req_locked(struct shm_qp *q, struct shm_peer *p, const struct shm_msg_qp *req,
			 int ring_fd, int cq_fd)
{
	enum dev_qp_state s = q ? qp_state(q) : DEV_QPS_RESET;
	if (!q || q->conn != SHM_CONN_WANT || q->initiator ||
	    (s != DEV_QPS_RTR && s != DEV_QPS_RTS) ||
	    memcmp(q->attr.ah_attr.dgid.raw, p->gid.raw, DEV_GID_LEN) != 0 ||
	    q->attr.dest_qp_num != req->src_qpn)
		return 0;
	struct shm_ring tx;
	int cqfd, myfd;
	int rc = qp_attach_tx(q, req, ring_fd, cq_fd, &tx, &cqfd);
	if (rc) {
		SMCR_LOG_RL(SMCR_LOG_WARN, "shm", "QP_REQ for QP %u: %s", q->qp.qp_num,
			    smcr_err_msg(rc));
		close(ring_fd);
		close(cq_fd);
		return 1;
	}
	close(ring_fd);
	rc = qp_make_rx(q, &myfd);
	if (rc) {
		shm_ring_unmap(&tx);
		close(cqfd);
		return 1;
	}
	pthread_mutex_lock(&q->sq_lock);
	pthread_mutex_lock(&q->rq_lock);
	q->tx = tx;
	q->tx_prod = q->tx_msgs = 0;
	q->peer_cq_fd = cqfd;
	q->peer_qpn = req->src_qpn;
	q->peer_pd_id = req->pd_id;
	q->peer_max_recv = req->max_recv_wr;
	q->peer_rnr_timer = req->min_rnr_timer;
	shm_peer_hold(p);	/* put in qp_unbind_locked */
	q->peer = p;
	q->conn = SHM_CONN_ACK_SENT;
	pthread_mutex_unlock(&q->rq_lock);
	tx_progress_locked(q);	/* a head blocked since RTS: its deadline is now the RTU wait */
	pthread_mutex_unlock(&q->sq_lock);
	/* Our MRs first, then the ACK: the peer has them before it may write (in order). */
	shm_export_pd_locked(q->sd, p, q->pd_id);
	struct shm_msg m = { .type = SHM_MSG_QP_ACK };
	fill_qp_msg(q, &m.u.qp);
	int fds[2] = { myfd, shm_cq_of(q->qp.recv_cq)->efd };
	(void)shm_peer_send(p, &m, fds, 2);
	close(myfd);
	return 1;
}

void shm_qp_on_ack_locked(struct shm_qp *q, struct shm_peer *p, const struct shm_msg_qp *ack,
			  int ring_fd, int cq_fd)
{
	if (!q || q->conn != SHM_CONN_REQ_SENT || q->peer != p ||
	    q->attr.dest_qp_num != ack->src_qpn) {
		SMCR_LOG_RL(SMCR_LOG_WARN, "shm", "unexpected QP_ACK for QP %u", ack->dst_qpn);
		close(ring_fd);
		close(cq_fd);
		return;
	}
	struct shm_ring tx;
	int cqfd;
	int rc = qp_attach_tx(q, ack, ring_fd, cq_fd, &tx, &cqfd);
	close(ring_fd);
	if (rc) {
		close(cq_fd);
		SMCR_LOG_RL(SMCR_LOG_WARN, "shm", "QP_ACK for QP %u: %s", q->qp.qp_num,
			    smcr_err_msg(rc));
		shm_qp_peer_lost_locked(q, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL, 1,
					SHM_GONE_DISCONNECT);
		return;
	}
	/* MRs before RTU: the responder may write as soon as RTU arrives. */
	shm_export_pd_locked(q->sd, p, q->pd_id);
	struct shm_msg m = { .type = SHM_MSG_QP_RTU };
	fill_qp_msg(q, &m.u.qp);
	(void)shm_peer_send(p, &m, NULL, 0);
	pthread_mutex_lock(&q->sq_lock);
	pthread_mutex_lock(&q->rq_lock);
	q->tx = tx;
	q->tx_prod = q->tx_msgs = 0;
	q->peer_cq_fd = cqfd;
	q->peer_qpn = ack->src_qpn;
	q->peer_pd_id = ack->pd_id;
	q->peer_max_recv = ack->max_recv_wr;
	q->peer_rnr_timer = ack->min_rnr_timer;
	q->conn = SHM_CONN_UP;
	pthread_mutex_unlock(&q->rq_lock);
	tx_progress_locked(q);
	pthread_mutex_unlock(&q->sq_lock);
}

void shm_qp_on_rtu_locked(struct shm_qp *q)
{
	if (q->conn != SHM_CONN_ACK_SENT)
		return;
	pthread_mutex_lock(&q->sq_lock);
	pthread_mutex_lock(&q->rq_lock);
	q->conn = SHM_CONN_UP;
	pthread_mutex_unlock(&q->rq_lock);
	tx_progress_locked(q);
	pthread_mutex_unlock(&q->sq_lock);
}

void shm_qp_finish_err_locked(struct shm_qp *q)
{
	/* acquire: pairs with the release in shm_qp_mark_err (err_* fields visible). */
	if (!atomic_exchange_explicit(&q->err_work, 0, memory_order_acquire))
		return;
	if (qp_state(q) != DEV_QPS_ERR)
		return;	/* reset meanwhile */
	pthread_mutex_lock(&q->sq_lock);
	sq_flush_locked(q, q->err_status);
	pthread_mutex_lock(&q->rq_lock);
	rq_err_flush_locked(q);
	if (q->conn != SHM_CONN_NONE)
		q->conn = SHM_CONN_DOWN;
	pthread_mutex_unlock(&q->rq_lock);
	pthread_mutex_unlock(&q->sq_lock);
	if (q->err_notify)
		qp_send_gone_locked(q, q->err_reason);
	if (q->err_event)
		shm_dev_event(q->sd, (enum dev_event_type)(q->err_event - 1), 0, q);
}

void shm_qp_peer_lost_locked(struct shm_qp *q, enum dev_wc_status head_status, int ev,
			     int notify, uint32_t reason)
{
	pthread_mutex_lock(&q->sq_lock);
	if (shm_qp_mark_err(q, head_status, ev, notify, reason))
		sq_flush_locked(q, head_status);
	pthread_mutex_unlock(&q->sq_lock);
	shm_qp_finish_err_locked(q);
}

int shm_qp_scan_locked(struct shm_qp *q, uint64_t now)
{
	int need = 0;

	if (atomic_load_explicit(&q->err_work, memory_order_relaxed))
		shm_qp_finish_err_locked(q);
	if (q->conn == SHM_CONN_WANT)
		need |= shm_qp_start_conn_locked(q, now);
	if (atomic_load_explicit(&q->sq_pending, memory_order_relaxed)) {
		pthread_mutex_lock(&q->sq_lock);
		tx_progress_locked(q);
		need |= q->deadline_ns != 0;
		pthread_mutex_unlock(&q->sq_lock);
	}
	return need;
}

/* ---- verbs: create, modify, query, destroy ----------------------------------------------- */

struct shm_qp *shm_qp_find_locked(struct shm_dev *sd, uint32_t qpn)
{
	uint32_t slot = (qpn & 0xffffu) - 1u;
	if (slot >= SHM_MAX_QP || !sd->qps[slot] || sd->qps[slot]->qp.qp_num != qpn)
		return NULL;
	return sd->qps[slot];
}

int shm_create_qp(struct dev_pd *dpd, const struct dev_qp_init_attr *attr, struct dev_qp **out)
{
	struct shm_dev *sd = shm_dev_of(dpd->dev);
	struct shm_pd *pd = DEV_CONTAINER_OF(dpd, struct shm_pd, pd);
	const struct dev_qp_cap *c = &attr->cap;

	if (c->max_send_wr < 1 || c->max_send_wr > SHM_MAX_WR || c->max_recv_wr < 1 ||
	    c->max_recv_wr > SHM_MAX_WR || c->max_send_sge > SHM_MAX_SGE ||
	    c->max_recv_sge > SHM_MAX_SGE || c->max_inline_data > SHM_MAX_INLINE_BIG)
		return -SMCR_E_DEV_BAD_ATTR;
	struct shm_qp *q = calloc(1, sizeof *q);
	if (!q)
		return -SMCR_E_NOMEM;
	q->sq_size = c->max_send_wr;
	q->rq_size = c->max_recv_wr;
	q->sq = calloc(q->sq_size, sizeof *q->sq);
	q->rq = calloc(q->rq_size, sizeof *q->rq);
	if (!q->sq || !q->rq) {
		free(q->sq);
		free(q->rq);
		free(q);
		return -SMCR_E_NOMEM;
	}
	q->sd = sd;
	q->pd_id = pd->id;
	q->sig_all = attr->sq_sig_all != 0;
	q->peer_cq_fd = -1;
	pthread_mutex_init(&q->sq_lock, NULL);
	pthread_mutex_init(&q->rq_lock, NULL);
	struct dev_qp_cap granted = *c;
	granted.max_send_sge = c->max_send_sge ? c->max_send_sge : 1;
	granted.max_recv_sge = c->max_recv_sge ? c->max_recv_sge : 1;
	granted.max_inline_data = c->max_inline_data > SHM_MAX_INLINE ? c->max_inline_data
								     : SHM_MAX_INLINE;

	int rc = -SMCR_E_DEV_LIMIT;
	pthread_mutex_lock(&sd->lock);
	for (uint32_t i = 0; i < SHM_MAX_QP; i++) {
		if (sd->qps[i])
			continue;
		sd->qp_gen[i]++;
		q->slot = i;
		dev_qp_init(&q->qp, dpd, attr, (uint32_t)sd->qp_gen[i] << 16 | (i + 1), &granted);
		rc = shm_cq_list_add(shm_cq_of(attr->send_cq), q, 0);
		if (!rc) {
			rc = shm_cq_list_add(shm_cq_of(attr->recv_cq), q, 1);
			if (rc)
				shm_cq_list_del(shm_cq_of(attr->send_cq), q, 0);
		}
		if (!rc) {
			sd->qps[i] = q;
			sd->n_qp++;
			if (i + 1 > sd->qp_hi)
				sd->qp_hi = i + 1;
		}
		break;
	}
	pthread_mutex_unlock(&sd->lock);
	if (rc) {
		pthread_mutex_destroy(&q->sq_lock);
		pthread_mutex_destroy(&q->rq_lock);
		free(q->sq);
		free(q->rq);
		free(q);
		return rc;
	}
	*out = &q->qp;
	return 0;
}

/* Initiator of the handshake: the side with the smaller (GID, QPN). */
static int qp_is_initiator(const struct shm_qp *q)
{
	int c = memcmp(q->sd->gid.raw, q->attr.ah_attr.dgid.raw, DEV_GID_LEN);
	if (c)
		return c < 0;
	return q->qp.qp_num < q->attr.dest_qp_num;
}

int shm_modify_qp(struct dev_qp *dq, const struct dev_qp_attr *attr, unsigned mask)
{
	struct shm_qp *q = shm_qp_of(dq);
	struct shm_dev *sd = q->sd;
	int rc;

	pthread_mutex_lock(&sd->lock);
	pthread_mutex_lock(&q->sq_lock);
	pthread_mutex_lock(&q->rq_lock);
	enum dev_qp_state cur = qp_state(q);
	rc = dev_qp_check_modify(cur, attr, mask);
	if (rc)
		goto out;
	switch (attr->qp_state) {
	case DEV_QPS_INIT:
		if ((mask & DEV_QP_PORT) && attr->port_num != 1) {
			rc = -SMCR_E_DEV_BAD_ATTR;
			goto out;
		}
		if (mask & DEV_QP_PORT)
			q->attr.port_num = attr->port_num;
		if (mask & DEV_QP_ACCESS_FLAGS)
			q->attr.qp_access_flags = attr->qp_access_flags;
		if (mask & DEV_QP_PKEY_INDEX)
			q->attr.pkey_index = attr->pkey_index;
		set_state(q, DEV_QPS_INIT);
		break;
	case DEV_QPS_RTR:
		if (attr->ah_attr.sgid_index != 0) {
			rc = -SMCR_E_DEV_BAD_ATTR;	/* one GID per port */
			goto out;
		}
		q->attr.ah_attr = attr->ah_attr;
		q->attr.path_mtu = attr->path_mtu;
		q->attr.dest_qp_num = attr->dest_qp_num;
		q->attr.rq_psn = attr->rq_psn;
		q->attr.min_rnr_timer = attr->min_rnr_timer;
		q->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
		q->initiator = qp_is_initiator(q);
		q->conn = SHM_CONN_WANT;
		q->next_connect_ns = 0;
		set_state(q, DEV_QPS_RTR);
		shm_dev_kick(sd);	/* the thread dials or matches parked requests */
		break;
	case DEV_QPS_RTS:
		if (cur == DEV_QPS_RTR) {
			q->attr.sq_psn = attr->sq_psn;
			q->attr.timeout = attr->timeout;
			q->attr.retry_cnt = attr->retry_cnt;
			q->attr.rnr_retry = attr->rnr_retry;
			q->attr.max_rd_atomic = attr->max_rd_atomic;
			set_state(q, DEV_QPS_RTS);
		}
		break;
	case DEV_QPS_ERR:
		pthread_mutex_unlock(&q->rq_lock);
		pthread_mutex_unlock(&q->sq_lock);
		/* An explicit move: no event (dev.h), the peer is told. */
		shm_qp_mark_err(q, DEV_WC_WR_FLUSH_ERR, -1, 1, SHM_GONE_DISCONNECT);
		shm_qp_finish_err_locked(q);
		pthread_mutex_unlock(&sd->lock);
		return 0;
	case DEV_QPS_RESET:
		/* Posted WRs are dropped without completions (verbs); CQEs already queued stay. */
		set_state(q, DEV_QPS_RESET);
		atomic_store_explicit(&q->err_work, 0, memory_order_relaxed);
		sq_drop_locked(q);
		atomic_store_explicit(&q->sq_pending, 0, memory_order_relaxed);
		atomic_store_explicit(&q->sq_used, 0, memory_order_relaxed);
		q->unsig_done = 0;
		q->block_since_ns = q->deadline_ns = 0;
		q->rq_head = q->rq_tail;
		memset(&q->attr, 0, sizeof q->attr);
		pthread_mutex_unlock(&q->rq_lock);
		pthread_mutex_unlock(&q->sq_lock);
		qp_send_gone_locked(q, SHM_GONE_DISCONNECT);
		qp_unbind_locked(q);
		pthread_mutex_unlock(&sd->lock);
		return 0;
	}
out:
	pthread_mutex_unlock(&q->rq_lock);
	pthread_mutex_unlock(&q->sq_lock);
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

int shm_query_qp(struct dev_qp *dq, struct dev_qp_attr *attr)
{
	struct shm_qp *q = shm_qp_of(dq);
	pthread_mutex_lock(&q->sq_lock);
	*attr = q->attr;
	attr->qp_state = qp_state(q);
	pthread_mutex_unlock(&q->sq_lock);
	return 0;
}

int shm_destroy_qp(struct dev_qp *dq)
{
	struct shm_qp *q = shm_qp_of(dq);
	struct shm_dev *sd = q->sd;
	struct shm_cq *scq = shm_cq_of(q->qp.send_cq), *rcq = shm_cq_of(q->qp.recv_cq);

	pthread_mutex_lock(&sd->lock);
	qp_send_gone_locked(q, SHM_GONE_DISCONNECT);
	set_state(q, DEV_QPS_RESET);
	atomic_store_explicit(&q->err_work, 0, memory_order_relaxed);
	qp_unbind_locked(q);
	shm_cq_list_del(scq, q, 0);
	shm_cq_list_del(rcq, q, 1);
	shm_cq_forget_qp(scq, q);
	if (rcq != scq)
		shm_cq_forget_qp(rcq, q);
	shm_dev_drop_qp_events(sd, q->qp.qp_num);
	sd->qps[q->slot] = NULL;
	sd->n_qp--;
	while (sd->qp_hi && !sd->qps[sd->qp_hi - 1])
		sd->qp_hi--;
	pthread_mutex_unlock(&sd->lock);
	sq_drop_locked(q);
	heap_cache_free(q);
	pthread_mutex_destroy(&q->sq_lock);
	pthread_mutex_destroy(&q->rq_lock);
	free(q->sq);
	free(q->rq);
	free(q);
	return 0;
}
