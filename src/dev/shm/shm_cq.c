/* shm_cq.c: completion queues of the shm provider: a growable ring of completions, an
 * eventfd as the completion fd, arming (ibv_req_notify_cq semantics, solicited-only
 * included, docs/protocol/linux-interop.md 6), and poll_cq, which also runs the receive progress of
 * the QPs receiving into the CQ (the data path: no syscall unless a wake-up is due). */
#define _GNU_SOURCE
#include "dev/shm/shm_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/log.h"
#include "util/hfd.h"

void shm_efd_signal(int fd)
{
	uint64_t one = 1;
	/* Nonblocking eventfd: fails only if the counter is saturated, i.e. a wake-up is
	 * pending anyway. */
	ssize_t r = write(fd, &one, sizeof one);
	(void)r;
}

int shm_create_cq(struct dev_device *dev, int cqe, void *ctx, struct dev_cq **out)
{
	struct shm_dev *sd = shm_dev_of(dev);
	if ((uint32_t)cqe > SHM_MAX_CQE)
		return -SMCR_E_DEV_BAD_ATTR;
	struct shm_cq *cq = calloc(1, sizeof *cq);
	if (!cq)
		return -SMCR_E_NOMEM;
	cq->q_cap = shm_pow2((uint32_t)cqe < 16 ? 16 : (uint32_t)cqe);
	cq->q = calloc(cq->q_cap, sizeof *cq->q);
	cq->efd = hfd_keep(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (!cq->q || cq->efd < 0) {
		int rc = cq->efd < 0 ? -SMCR_E_SHM_SYSCALL : -SMCR_E_NOMEM;
		if (cq->efd >= 0)
			close(cq->efd);
		free(cq->q);
		free(cq);
		return rc;
	}
	cq->sd = sd;
	pthread_mutex_init(&cq->list_lock, NULL);
	pthread_mutex_init(&cq->lock, NULL);
	dev_cq_init(&cq->cq, dev, cqe, ctx, cq->efd);
	*out = &cq->cq;
	return 0;
}

int shm_destroy_cq(struct dev_cq *dcq)
{
	struct shm_cq *cq = shm_cq_of(dcq);
	close(cq->efd);
	pthread_mutex_destroy(&cq->list_lock);
	pthread_mutex_destroy(&cq->lock);
	free(cq->rx_qps);
	free(cq->tx_qps);
	free(cq->q);
	free(cq);
	return 0;
}

int shm_cq_list_add(struct shm_cq *cq, struct shm_qp *qp, int rx)
{
	struct shm_qp ***arr = rx ? &cq->rx_qps : &cq->tx_qps;
	uint32_t *n = rx ? &cq->n_rx : &cq->n_tx, *cap = rx ? &cq->cap_rx : &cq->cap_tx;
	int rc = 0;

	pthread_mutex_lock(&cq->list_lock);
	if (*n == *cap) {
		uint32_t nc = *cap ? *cap * 2 : 8;
		struct shm_qp **a = realloc(*arr, nc * sizeof *a);
		if (!a) {
			rc = -SMCR_E_NOMEM;
			goto out;
		}
		*arr = a;
		*cap = nc;
	}
	(*arr)[(*n)++] = qp;
out:
	pthread_mutex_unlock(&cq->list_lock);
	return rc;
}

void shm_cq_list_del(struct shm_cq *cq, struct shm_qp *qp, int rx)
{
	struct shm_qp **arr = rx ? cq->rx_qps : cq->tx_qps;
	uint32_t *n = rx ? &cq->n_rx : &cq->n_tx;

	pthread_mutex_lock(&cq->list_lock);
	for (uint32_t i = 0; i < *n; i++) {
		if (arr[i] == qp) {
			arr[i] = arr[--*n];
			break;
		}
	}
	/* Its producer may have fired our eventfd: the arm state no longer shows that. */
	if (rx)
		atomic_store_explicit(&cq->ev_maybe, true, memory_order_relaxed);
	pthread_mutex_unlock(&cq->list_lock);
}

void shm_cq_forget_qp(struct shm_cq *cq, struct shm_qp *qp)
{
	pthread_mutex_lock(&cq->lock);
	for (uint32_t i = 0; i < cq->q_n; i++) {
		struct shm_cqe *e = &cq->q[(cq->q_head + i) & (cq->q_cap - 1)];
		if (e->qp == qp)
			e->qp = NULL;
	}
	pthread_mutex_unlock(&cq->lock);
}

static void cq_push(struct shm_cq *cq, const struct shm_cqe *e, int polled)
{
	int fire = 0;

	pthread_mutex_lock(&cq->lock);
	if (cq->q_n == cq->q_cap) {
		/* Grow (never lose a completion). The bound is the queues feeding the CQ. */
		uint32_t nc = cq->q_cap * 2;
		struct shm_cqe *nq = malloc(nc * sizeof *nq);
		if (!nq) {
			pthread_mutex_unlock(&cq->lock);
			LOG_ERR("shm", "CQ overflow: completion lost (out of memory)");
			shm_dev_event(cq->sd, DEV_EVENT_CQ_ERR, 0, NULL);
			return;
		}
		for (uint32_t i = 0; i < cq->q_n; i++)
			nq[i] = cq->q[(cq->q_head + i) & (cq->q_cap - 1)];
		free(cq->q);
		cq->q = nq;
		cq->q_cap = nc;
		cq->q_head = 0;
	}
	cq->q[(cq->q_head + cq->q_n) & (cq->q_cap - 1)] = *e;
	cq->q_n++;
	/* IB: a solicited-only arm fires on a solicited receive or any error completion. A
	 * successful one the poller itself returns needs no wake-up (shm_cq_push_polled). */
	if (polled && e->wc.status == DEV_WC_SUCCESS)
		;
	else if (cq->armed == SHM_WAKE_ANY ||
		 (cq->armed == SHM_WAKE_SOLICITED &&
		  (e->solicited || e->wc.status != DEV_WC_SUCCESS))) {
		cq->armed = SHM_WAKE_NONE;
		fire = 1;
	}
	pthread_mutex_unlock(&cq->lock);
	if (fire)
		shm_efd_signal(cq->efd);
}

void shm_cq_push(struct shm_cq *cq, const struct shm_cqe *e) { cq_push(cq, e, 0); }

void shm_cq_push_polled(struct shm_cq *cq, const struct shm_cqe *e) { cq_push(cq, e, 1); }

/* True if an arm of cq fired (locally or through a producer) or may have: the eventfd may
 * hold an event. cq->lock and list_lock held. */
static int arm_used_locked(struct shm_cq *cq)
{
	if (cq->arm_mode == SHM_WAKE_NONE)
		return 0;
	if (cq->armed != cq->arm_mode)
		return 1;
	for (uint32_t i = 0; i < cq->n_rx; i++) {
		struct shm_ring_hdr *h =
			atomic_load_explicit(&cq->rx_qps[i]->rx_hdr, memory_order_acquire);
		if (h && atomic_load_explicit(&h->need_wake, memory_order_relaxed) == SHM_WAKE_NONE)
			return 1;
	}
	return 0;
}

int shm_req_notify_cq(struct dev_cq *dcq, int solicited_only)
{
	struct shm_cq *cq = shm_cq_of(dcq);
	uint32_t mode = solicited_only ? SHM_WAKE_SOLICITED : SHM_WAKE_ANY;

	/* Each arm replaces the previous one: an earlier arm may already have fired through
	 * a peer's wake-up, which does not touch cq->armed; then remember that the eventfd may
	 * hold its event (ev_maybe), so get_cq_event reads it. A ring already armed in this
	 * mode is not written again: need_wake shares the consumer's cache line the producer
	 * reads after every publish (a spinning caller re-arms in a loop). */
	pthread_mutex_lock(&cq->list_lock);
	pthread_mutex_lock(&cq->lock);
	if (arm_used_locked(cq))
		atomic_store_explicit(&cq->ev_maybe, true, memory_order_relaxed);
	cq->armed = (int)mode;
	cq->arm_mode = (int)mode;
	pthread_mutex_unlock(&cq->lock);
	for (uint32_t i = 0; i < cq->n_rx; i++) {
		struct shm_ring_hdr *h =
			atomic_load_explicit(&cq->rx_qps[i]->rx_hdr, memory_order_acquire);
		if (h && atomic_load_explicit(&h->need_wake, memory_order_relaxed) != mode)
			atomic_store_explicit(&h->need_wake, mode, memory_order_relaxed);
	}
	pthread_mutex_unlock(&cq->list_lock);
	/* seq_cst fence: Dekker with shm_ring_publish (producer: store prod; fence; load
	 * need_wake). The caller's next poll loads prod after this fence, so either it finds
	 * the message or the producer finds need_wake set and writes our eventfd. */
	atomic_thread_fence(memory_order_seq_cst);
	return 0;
}

int shm_disarm_cq(struct dev_cq *dcq)
{
	struct shm_cq *cq = shm_cq_of(dcq);
	/* A producer that loaded need_wake before our store still takes it and writes efd: a
	 * spurious wake-up, nothing lost (the caller polls, then re-arms before sleeping). */
	pthread_mutex_lock(&cq->list_lock);
	pthread_mutex_lock(&cq->lock);
	if (arm_used_locked(cq))
		atomic_store_explicit(&cq->ev_maybe, true, memory_order_relaxed);
	cq->armed = SHM_WAKE_NONE;
	cq->arm_mode = SHM_WAKE_NONE;
	pthread_mutex_unlock(&cq->lock);
	for (uint32_t i = 0; i < cq->n_rx; i++) {
		struct shm_ring_hdr *h =
			atomic_load_explicit(&cq->rx_qps[i]->rx_hdr, memory_order_acquire);
		if (h && atomic_load_explicit(&h->need_wake, memory_order_relaxed) != SHM_WAKE_NONE)
			atomic_store_explicit(&h->need_wake, SHM_WAKE_NONE, memory_order_relaxed);
	}
	pthread_mutex_unlock(&cq->list_lock);
	return 0;
}

int shm_get_cq_event(struct dev_cq *dcq)
{
	struct shm_cq *cq = shm_cq_of(dcq);
	/* Fast path: armed, no arm fired (not locally, no producer took need_wake), nothing
	 * else may have written efd: no event can be queued, so no read() syscall. A hostile
	 * peer can write our eventfd without taking need_wake; every SHM_CQ_FAST_SKIPS-th call
	 * reads anyway, so such a write costs a sleeper at most that many extra turns. */
	pthread_mutex_lock(&cq->list_lock);
	pthread_mutex_lock(&cq->lock);
	int skip = !atomic_load_explicit(&cq->ev_maybe, memory_order_relaxed) &&
		   cq->arm_mode != SHM_WAKE_NONE && !arm_used_locked(cq) &&
		   cq->fast_skips < SHM_CQ_FAST_SKIPS;
	if (skip)
		cq->fast_skips++;
	pthread_mutex_unlock(&cq->lock);
	pthread_mutex_unlock(&cq->list_lock);
	if (skip)
		return -SMCR_E_AGAIN;
	atomic_store_explicit(&cq->ev_maybe, false, memory_order_relaxed);
	uint64_t v;
	ssize_t r = read(cq->efd, &v, sizeof v);
	pthread_mutex_lock(&cq->lock);
	cq->fast_skips = 0;
	if (r == (ssize_t)sizeof v) {
		/* The arm is used up, also when a peer's wake-up fired it (which cannot clear
		 * cq->armed): later completions must not signal until the next arm. */
		cq->armed = SHM_WAKE_NONE;
		cq->arm_mode = SHM_WAKE_NONE;
	}
	pthread_mutex_unlock(&cq->lock);
	return r == (ssize_t)sizeof v ? 0 : -SMCR_E_AGAIN;
}

int shm_poll_cq(struct dev_cq *dcq, int n, struct dev_wc *wc)
{
	struct shm_cq *cq = shm_cq_of(dcq);

	if (n <= 0)
		return n == 0 ? 0 : -SMCR_E_INVAL;
	pthread_mutex_lock(&cq->list_lock);
	for (uint32_t i = 0; i < cq->n_rx; i++) {
		struct shm_qp *q = cq->rx_qps[i];
		/* Lock-free "anything new?" check: the ring stays mapped while we hold
		 * list_lock (it is only replaced/unmapped under it). */
		struct shm_ring_hdr *h = atomic_load_explicit(&q->rx_hdr, memory_order_acquire);
		if (h && atomic_load_explicit(&h->prod, memory_order_relaxed) !=
				 atomic_load_explicit(&q->rx_cons_hint, memory_order_relaxed))
			shm_qp_rx_progress(q);
	}
	for (uint32_t i = 0; i < cq->n_tx; i++) {
		struct shm_qp *q = cq->tx_qps[i];
		if (atomic_load_explicit(&q->sq_pending, memory_order_relaxed))
			shm_qp_tx_progress(q);
	}
	pthread_mutex_unlock(&cq->list_lock);

	int got = 0;
	pthread_mutex_lock(&cq->lock);
	while (got < n && cq->q_n) {
		struct shm_cqe *e = &cq->q[cq->q_head];
		wc[got++] = e->wc;
		/* The QP cannot be freed meanwhile: destroy_qp clears e->qp under cq->lock. */
		if (e->qp && e->sq_slots)
			atomic_fetch_sub_explicit(&e->qp->sq_used, e->sq_slots,
						  memory_order_relaxed);
		cq->q_head = (cq->q_head + 1) & (cq->q_cap - 1);
		cq->q_n--;
	}
	pthread_mutex_unlock(&cq->lock);
	return got;
}
