/* shm_ring.c: the shm provider's shared SPSC message ring (layout and trust rules in
 * shm_ring.h). Implements the transport half of RC SEND delivery (dev.h semantics 1, 2). */
#define _GNU_SOURCE
#include "dev/shm/shm_ring.h"
#include "util/hfd.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

uint32_t shm_pow2(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

size_t shm_ring_size(uint32_t ncells, uint32_t caps_size, size_t *cells_off)
{
	size_t off = sizeof(struct shm_ring_hdr) + (size_t)caps_size * sizeof(uint32_t);
	off = (off + SHM_CELL - 1) & ~(size_t)(SHM_CELL - 1);
	if (cells_off)
		*cells_off = off;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	return (off + (size_t)ncells * SHM_CELL + pg - 1) & ~(pg - 1);
}

static int ring_sizes_ok(uint32_t ncells, uint32_t caps_size)
{
	return ncells >= 2 && ncells <= SHM_RING_MAX_CELLS && (ncells & (ncells - 1)) == 0 &&
	       caps_size >= 1 && caps_size <= SHM_CAPS_MAX && (caps_size & (caps_size - 1)) == 0;
}

static int ring_map(int fd, uint32_t ncells, uint32_t caps_size, struct shm_ring *r)
{
	size_t cells_off;
	size_t len = shm_ring_size(ncells, caps_size, &cells_off);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -SMCR_E_NOMEM;
	madvise(p, len, MADV_DONTFORK);	/* not inherited by a forked child (shm_dev.c) */
	r->map = p;
	r->map_len = len;
	r->hdr = p;
	r->caps = (_Atomic uint32_t *)(void *)((uint8_t *)p + sizeof(struct shm_ring_hdr));
	r->cells = (uint8_t *)p + cells_off;
	r->ncells = ncells;
	r->caps_size = caps_size;
	return 0;
}

int shm_ring_create(uint32_t ncells, uint32_t caps_size, struct shm_ring *r, int *fd_out)
{
	if (!ring_sizes_ok(ncells, caps_size))
		return -SMCR_E_INVAL;
	int fd = hfd_keep(memfd_create("smcr-shm-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING));
	if (fd < 0)
		return -SMCR_E_SHM_SYSCALL;
	size_t len = shm_ring_size(ncells, caps_size, NULL);
	/* Sealed before the peer sees it: it can never shrink the file under our mapping. */
	if (ftruncate(fd, (off_t)len) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		close(fd);
		return -SMCR_E_SHM_SYSCALL;
	}
	int rc = ring_map(fd, ncells, caps_size, r);
	if (rc) {
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

int shm_ring_attach(int fd, uint32_t ncells, uint32_t caps_size, struct shm_ring *r)
{
	if (!ring_sizes_ok(ncells, caps_size))
		return -SMCR_E_SHM_MSG_BAD_FIELD;
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || seals < 0 || !(seals & F_SEAL_SHRINK) ||
	    (uint64_t)st.st_size < shm_ring_size(ncells, caps_size, NULL))
		return -SMCR_E_SHM_BAD_FD;
	return ring_map(fd, ncells, caps_size, r);
}

void shm_ring_unmap(struct shm_ring *r)
{
	if (r->map)
		munmap(r->map, r->map_len);
	memset(r, 0, sizeof *r);
}

/* ---- byte access with wrap: a message's bytes start at its first cell + 16 ---- */

static void ring_copy_in(struct shm_ring *r, size_t pos, const void *src, size_t n)
{
	size_t size = (size_t)r->ncells * SHM_CELL;
	pos &= size - 1;
	size_t first = n < size - pos ? n : size - pos;
	memcpy(r->cells + pos, src, first);
	if (n > first)
		memcpy(r->cells, (const uint8_t *)src + first, n - first);
}

static void ring_copy_out(const struct shm_ring *r, size_t pos, void *dst, size_t n)
{
	size_t size = (size_t)r->ncells * SHM_CELL;
	pos &= size - 1;
	size_t first = n < size - pos ? n : size - pos;
	memcpy(dst, r->cells + pos, first);
	if (n > first)
		memcpy((uint8_t *)dst + first, r->cells, n - first);
}

static _Atomic uint32_t *cell_words(const struct shm_ring *r, uint32_t idx)
{
	return (_Atomic uint32_t *)(void *)(r->cells + (size_t)(idx & (r->ncells - 1)) * SHM_CELL);
}

/* ---- producer ---- */

int shm_ring_free(const struct shm_ring *r, uint32_t prod, uint32_t *free_cells)
{
	/* acquire: pairs with the consumer's release in shm_ring_consume, so the cells it
	 * freed are no longer being read when we overwrite them. */
	uint32_t cons = atomic_load_explicit(&r->hdr->cons, memory_order_acquire);
	uint32_t used = prod - cons;
	if (used > r->ncells)
		return -SMCR_E_SHM_RING_BAD_CONS;
	*free_cells = r->ncells - used;
	return 0;
}

void shm_ring_put_hdr(struct shm_ring *r, uint32_t prod, const struct shm_ring_msg *m)
{
	_Atomic uint32_t *w = cell_words(r, prod);
	/* relaxed: made visible by the release store of prod in shm_ring_publish. */
	atomic_store_explicit(&w[0], m->len, memory_order_relaxed);
	atomic_store_explicit(&w[1], (uint32_t)m->op | (uint32_t)m->flags << 8 |
					     (uint32_t)m->cells << 16, memory_order_relaxed);
	atomic_store_explicit(&w[2], m->imm, memory_order_relaxed);
	atomic_store_explicit(&w[3], m->src_qpn, memory_order_relaxed);
}

void shm_ring_put_data(struct shm_ring *r, uint32_t prod, uint32_t off, const void *src, size_t n)
{
	size_t pos = (size_t)(prod & (r->ncells - 1)) * SHM_CELL + SHM_MSG_HDR + off;
	ring_copy_in(r, pos, src, n);
}

uint32_t shm_ring_publish(struct shm_ring *r, uint32_t new_prod)
{
	/* release: the consumer's acquire load of prod (shm_ring_peek) then sees the message
	 * bytes AND every RDMA WRITE memcpy this QP did before (WRITE-then-SEND order, dev.h
	 * semantics 2): all were program-ordered before this store. */
	atomic_store_explicit(&r->hdr->prod, new_prod, memory_order_release);
	/* seq_cst fence: Dekker pairing with the consumer's arm (store need_wake; fence; load
	 * prod in shm_cq.c): either we see need_wake set, or it sees our prod. No lost wakeup. */
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&r->hdr->need_wake, memory_order_relaxed);
}

int shm_ring_take_wake(struct shm_ring *r)
{
	/* exchange: exactly one producer-side caller writes the eventfd per arming. */
	return atomic_exchange_explicit(&r->hdr->need_wake, SHM_WAKE_NONE, memory_order_relaxed) !=
	       SHM_WAKE_NONE;
}

/* ---- consumer ---- */

int shm_ring_peek(const struct shm_ring *r, uint32_t cons, struct shm_ring_msg *m)
{
	/* acquire: pairs with the producer's release in shm_ring_publish (message bytes and
	 * the WRITEs before it are visible once we see prod). */
	uint32_t prod = atomic_load_explicit(&r->hdr->prod, memory_order_acquire);
	uint32_t avail = prod - cons;
	if (avail == 0)
		return -SMCR_E_AGAIN;
	if (avail > r->ncells)
		return -SMCR_E_SHM_RING_BAD_PROD;
	_Atomic uint32_t *w = cell_words(r, cons);
	/* Each word read once into a local; only the locals are used below. */
	uint32_t len = atomic_load_explicit(&w[0], memory_order_relaxed);
	uint32_t w1 = atomic_load_explicit(&w[1], memory_order_relaxed);
	m->imm = atomic_load_explicit(&w[2], memory_order_relaxed);
	m->src_qpn = atomic_load_explicit(&w[3], memory_order_relaxed);
	m->op = (uint8_t)(w1 & 0xff);
	m->flags = (uint8_t)((w1 >> 8) & 0xff);
	m->cells = (uint16_t)(w1 >> 16);
	m->len = len;
	switch (m->op) {
	case SHM_OP_SEND:
		if (len > SHM_MAX_SEND)
			return -SMCR_E_SHM_RING_BAD_LEN;
		if (m->cells != shm_msg_cells(len))
			return -SMCR_E_SHM_RING_BAD_CELLS;
		break;
	case SHM_OP_WRITE_IMM:
		if (m->cells != 1)
			return -SMCR_E_SHM_RING_BAD_CELLS;
		break;
	default:
		return -SMCR_E_SHM_RING_BAD_OP;
	}
	if (m->cells > avail)
		return -SMCR_E_SHM_RING_BAD_CELLS;
	return 0;
}

void shm_ring_get_data(const struct shm_ring *r, uint32_t cons, uint32_t off, void *dst, size_t n)
{
	size_t pos = (size_t)(cons & (r->ncells - 1)) * SHM_CELL + SHM_MSG_HDR + off;
	ring_copy_out(r, pos, dst, n);
}

void shm_ring_consume(struct shm_ring *r, uint32_t new_cons)
{
	/* release: our reads of the consumed cells happen before the producer (acquire in
	 * shm_ring_free) may overwrite them. */
	atomic_store_explicit(&r->hdr->cons, new_cons, memory_order_release);
}
