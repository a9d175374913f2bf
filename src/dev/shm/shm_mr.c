/* shm_mr.c: protection domains and memory regions of the shm provider: lkey/rkey table, the
 * rkey validity table peers read, MR export to peers (only REMOTE_WRITE MRs, only of a PD
 * with a connected QP to that peer), and immediate rkey invalidation on deregistration
 * (dev.h dev_dereg_mr; trust boundary in docs/parts/dev-shm.md). */
#define _GNU_SOURCE
#include "dev/shm/shm_int.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"

int shm_alloc_pd(struct dev_device *dev, struct dev_pd **out)
{
	struct shm_dev *sd = shm_dev_of(dev);
	struct shm_pd *pd = calloc(1, sizeof *pd);
	if (!pd)
		return -SMCR_E_NOMEM;
	dev_pd_init(&pd->pd, dev);
	pthread_mutex_lock(&sd->lock);
	pd->id = ++sd->next_pd_id;
	pd->next = sd->pds;
	sd->pds = pd;
	pthread_mutex_unlock(&sd->lock);
	*out = &pd->pd;
	return 0;
}

int shm_dealloc_pd(struct dev_pd *dpd)
{
	struct shm_dev *sd = shm_dev_of(dpd->dev);
	struct shm_pd *pd = DEV_CONTAINER_OF(dpd, struct shm_pd, pd);
	pthread_mutex_lock(&sd->lock);
	for (struct shm_pd **pp = &sd->pds; *pp; pp = &(*pp)->next) {
		if (*pp == pd) {
			*pp = pd->next;
			break;
		}
	}
	pthread_mutex_unlock(&sd->lock);
	free(pd);
	return 0;
}

struct shm_pd *shm_pd_find_locked(struct shm_dev *sd, uint32_t pd_id)
{
	for (struct shm_pd *pd = sd->pds; pd; pd = pd->next)
		if (pd->id == pd_id)
			return pd;
	return NULL;
}

static int peer_has_pd(const struct shm_peer *p, uint32_t pd_id)
{
	for (uint32_t i = 0; i < p->n_exported; i++)
		if (p->exported_pds[i] == pd_id)
			return 1;
	return 0;
}

static int send_mr_add(struct shm_dev *sd, struct shm_peer *p, const struct shm_mr *mr,
		       uint32_t *seq)
{
	struct shm_msg m = { .type = SHM_MSG_MR_ADD };
	m.u.mr_add.seq = *seq = ++sd->mr_seq;
	m.u.mr_add.rkey = mr->mr.rkey;
	m.u.mr_add.pd_id = DEV_CONTAINER_OF(mr->mr.pd, struct shm_pd, pd)->id;
	m.u.mr_add.access = mr->mr.access;
	m.u.mr_add.iova = (uint64_t)(uintptr_t)mr->mr.addr;
	m.u.mr_add.length = mr->mr.length;
	m.u.mr_add.mem_off = mr->mem_off;
	return shm_peer_send(p, &m, &mr->mem->fd, 1);
}

void shm_export_pd_locked(struct shm_dev *sd, struct shm_peer *p, uint32_t pd_id)
{
	if (peer_has_pd(p, pd_id))
		return;
	if (p->n_exported == p->cap_exported) {
		uint32_t nc = p->cap_exported ? p->cap_exported * 2 : 4;
		uint32_t *a = realloc(p->exported_pds, nc * sizeof *a);
		if (!a)
			return;	/* writes of the peer will fail with access errors */
		p->exported_pds = a;
		p->cap_exported = nc;
	}
	p->exported_pds[p->n_exported++] = pd_id;
	struct shm_pd *pd = shm_pd_find_locked(sd, pd_id);
	for (struct shm_mr *mr = pd ? pd->rw_mrs : NULL; mr; mr = mr->pd_next) {
		uint32_t seq;
		if (send_mr_add(sd, p, mr, &seq))
			break;
	}
}

/* Waits (sd->lock held, released while waiting) until every peer in want[] acknowledged
 * its MR_ADD or is gone, at most SHM_MR_ACK_WAIT_MS. */
static void wait_mr_acks_locked(struct shm_dev *sd, struct shm_peer **want, uint32_t *seq,
				uint32_t n)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += SHM_MR_ACK_WAIT_MS / 1000;
	for (;;) {
		int pending = 0;
		for (uint32_t i = 0; i < n; i++)
			if (want[i]->state == SHM_PEER_UP && (int32_t)(want[i]->mr_acked - seq[i]) < 0)
				pending = 1;
		if (!pending)
			return;
		if (pthread_cond_timedwait(&sd->ack_cond, &sd->lock, &dl) == ETIMEDOUT) {
			LOG_WARN("shm", "a peer did not acknowledge an MR export in time");
			return;
		}
	}
}

int shm_reg_mr(struct dev_pd *dpd, void *addr, size_t length, unsigned access,
	       struct dev_mr **out)
{
	struct shm_dev *sd = shm_dev_of(dpd->dev);
	struct shm_pd *pd = DEV_CONTAINER_OF(dpd, struct shm_pd, pd);
	struct dev_mem *mem = NULL;
	size_t off = 0;
	int rc;

	if (length > ((size_t)1 << 40))
		return -SMCR_E_DEV_BAD_ATTR;
	if (access & DEV_ACCESS_REMOTE_WRITE) {
		/* Only a whole dev_mem buffer can be given to a peer (docs: trust boundary). */
		rc = dev_mem_find(addr, length, &mem, &off);
		if (rc)
			return rc;
	}
	struct shm_mr *mr = calloc(1, sizeof *mr);
	if (!mr) {
		dev_mem_put(mem);
		return -SMCR_E_NOMEM;
	}
	mr->mem = mem;	/* the reference dev_mem_find took; put in shm_dereg_mr */
	mr->mem_off = off;

	pthread_rwlock_wrlock(&sd->mr_lock);
	rc = -SMCR_E_DEV_LIMIT;
	for (uint32_t i = 0; i < SHM_MAX_MR; i++) {
		if (sd->mrs[i])
			continue;
		if (++sd->mr_gen[i] == 0)
			sd->mr_gen[i] = 1;	/* rkey 0 is never valid */
		uint32_t key = (uint32_t)sd->mr_gen[i] << 16 | (i + 1);
		mr->slot = i;
		dev_mr_init(&mr->mr, dpd, addr, length, access, key, key);
		sd->mrs[i] = mr;
		sd->n_mr++;
		rc = 0;
		break;
	}
	pthread_rwlock_unlock(&sd->mr_lock);
	if (rc) {
		dev_mem_put(mem);
		free(mr);
		return rc;
	}
	if (access & DEV_ACCESS_REMOTE_WRITE) {
		/* Valid before any peer can learn of it. seq_cst: pairs with the peers' seq_cst
		 * load in tx_write. */
		atomic_store_explicit(&sd->rkey_tab[mr->slot], mr->mr.rkey, memory_order_seq_cst);
		struct shm_peer *want[64];
		uint32_t seq[64], n = 0;
		pthread_mutex_lock(&sd->lock);
		mr->pd_next = pd->rw_mrs;
		pd->rw_mrs = mr;
		/* Peers already connected through this PD get it now, and reg_mr returns only
		 * when they have mapped it: the rkey may travel to them in a SEND right after. */
		for (struct shm_peer *p = sd->peers; p; p = p->next) {
			if (p->state != SHM_PEER_UP || !peer_has_pd(p, pd->id))
				continue;
			uint32_t s;
			if (send_mr_add(sd, p, mr, &s) == 0 && n < 64) {
				shm_peer_hold(p);	/* put below */
				seq[n] = s;
				want[n++] = p;
			}
		}
		wait_mr_acks_locked(sd, want, seq, n);
		pthread_mutex_unlock(&sd->lock);
		for (uint32_t i = 0; i < n; i++)
			shm_peer_put(want[i]);
	}
	*out = &mr->mr;
	return 0;
}

int shm_dereg_mr(struct dev_mr *dmr)
{
	struct shm_mr *mr = DEV_CONTAINER_OF(dmr, struct shm_mr, mr);
	struct shm_dev *sd = shm_dev_of(dmr->pd->dev);
	struct shm_pd *pd = DEV_CONTAINER_OF(dmr->pd, struct shm_pd, pd);

	if (dmr->access & DEV_ACCESS_REMOTE_WRITE) {
		pthread_mutex_lock(&sd->lock);
		/* seq_cst: Dekker with tx_write at the peer (store busy_rkey; load tab). After
		 * this store no new WRITE with the rkey starts; one already past its check
		 * shows busy_rkey in one of our inbound rings, and we wait for it to end. */
		atomic_store_explicit(&sd->rkey_tab[mr->slot], 0, memory_order_seq_cst);
		uint64_t until = smcr_now_ns() + SHM_DEREG_WAIT_NS;
		for (uint32_t i = 0; i < sd->qp_hi; i++) {
			struct shm_qp *q = sd->qps[i];
			if (!q || q->pd_id != pd->id)
				continue;
			/* The ring stays mapped: mappings change only under sd->lock. */
			struct shm_ring_hdr *h = atomic_load_explicit(&q->rx_hdr, memory_order_acquire);
			while (h && atomic_load_explicit(&h->busy_rkey, memory_order_seq_cst) ==
					    dmr->rkey) {
				if (smcr_now_ns() > until) {
					SMCR_LOG_RL(SMCR_LOG_WARN, "shm",
						    "peer WRITE with rkey %#x still busy after dereg",
						    dmr->rkey);
					break;
				}
				sched_yield();
			}
		}
		for (struct shm_mr **pp = &pd->rw_mrs; *pp; pp = &(*pp)->pd_next) {
			if (*pp == mr) {
				*pp = mr->pd_next;
				break;
			}
		}
		struct shm_msg m = { .type = SHM_MSG_MR_DEL };
		m.u.mr_del.rkey = dmr->rkey;
		for (struct shm_peer *p = sd->peers; p; p = p->next)
			if (p->state == SHM_PEER_UP && peer_has_pd(p, pd->id))
				(void)shm_peer_send(p, &m, NULL, 0);
		pthread_mutex_unlock(&sd->lock);
	}
	pthread_rwlock_wrlock(&sd->mr_lock);
	sd->mrs[mr->slot] = NULL;
	sd->n_mr--;
	pthread_rwlock_unlock(&sd->mr_lock);
	dev_mem_put(mr->mem);	/* from dev_mem_find in shm_reg_mr */
	free(mr);
	return 0;
}

void *shm_lkey_ptr(struct shm_dev *sd, const struct dev_pd *pd, uint32_t lkey, uint64_t addr,
		   uint32_t len, unsigned need_access)
{
	uint32_t slot = (lkey & 0xffffu) - 1u;
	void *p = NULL;

	if (slot >= SHM_MAX_MR)
		return NULL;
	pthread_rwlock_rdlock(&sd->mr_lock);
	const struct shm_mr *mr = sd->mrs[slot];
	if (mr && mr->mr.lkey == lkey && mr->mr.pd == pd &&
	    (mr->mr.access & need_access) == need_access) {
		uint64_t base = (uint64_t)(uintptr_t)mr->mr.addr;
		if (addr >= base && len <= mr->mr.length && addr - base <= mr->mr.length - len)
			p = (void *)(uintptr_t)addr;
	}
	pthread_rwlock_unlock(&sd->mr_lock);
	return p;
}
