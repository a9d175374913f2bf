/* dev_mem.c: memory for RDMA buffers (RMBs, send buffers): one memfd per buffer, mapped
 * shared, so every provider can register it and the shm provider can hand exactly this
 * buffer to a peer (docs/parts/dev-shm.md "Memory sharing and trust"). */
#define _GNU_SOURCE
#include "dev/dev.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/log.h"
#include "util/hfd.h"

/* Live buffers, for dev_mem_find. dev_mem_lock protects the list (next/prev of every
 * node) and is a leaf lock. */
struct dev_mem_node {
	struct dev_mem m;		/* first: dev_mem_put casts back */
	struct dev_mem_node *next, *prev;
};
static pthread_mutex_t dev_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dev_mem_node *dev_mem_head;

/* fork(): the child has none of the buffers (MADV_DONTFORK); it closes its copies of the
 * memfds and forgets the list. */
static void dev_mem_prepare(void) { pthread_mutex_lock(&dev_mem_lock); }
static void dev_mem_parent(void) { pthread_mutex_unlock(&dev_mem_lock); }
static void dev_mem_child(void)
{
	for (struct dev_mem_node *n = dev_mem_head, *nx; n; n = nx) {
		nx = n->next;
		close(n->m.fd);
		free(n);
	}
	dev_mem_head = NULL;
	/* the forking thread took it in prepare; it is the child's only thread: unlocked,
	 * not re-initialised (a lock left held in the child's record of it would make every
	 * later lock order in the child look inverted to TSan) */
	pthread_mutex_unlock(&dev_mem_lock);
}
/* At load, before any buffer exists (not at the first allocation): the handlers' order
 * across modules is then the constructors', fixed, not the order of first use. */
__attribute__((constructor)) static void dev_mem_atfork_init(void)
{
	pthread_atfork(dev_mem_prepare, dev_mem_parent, dev_mem_child);
}

int dev_mem_alloc(size_t len, const char *name, struct dev_mem **out)
{
	long pg = sysconf(_SC_PAGESIZE);
	if (!len || len > (size_t)1 << 40 || pg <= 0)
		return -SMCR_E_INVAL;
	size_t plen = (len + (size_t)pg - 1) & ~((size_t)pg - 1);
	struct dev_mem_node *n = calloc(1, sizeof *n);
	if (!n)
		return -SMCR_E_NOMEM;
	int fd = hfd_keep(memfd_create(name ? name : "smcr-mem", MFD_CLOEXEC | MFD_ALLOW_SEALING));
	if (fd < 0)
		goto err_free;
	if (ftruncate(fd, (off_t)plen) < 0)
		goto err_close;
	/* A peer given this fd must not be able to shrink it under our mapping (SIGBUS on our
	 * next access) nor grow it: seal the size before anyone else can see the fd. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto err_close;
	void *p = mmap(NULL, plen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto err_close;
	/* A forked child does not get the mapping (as ibv_fork_init does): a shared mapping
	 * would let the child scribble on the parent's RDMA buffers unnoticed. */
	madvise(p, plen, MADV_DONTFORK);
	n->m.addr = p;
	n->m.len = plen;
	n->m.fd = fd;
	atomic_init(&n->m.refcnt, 1);
	pthread_mutex_lock(&dev_mem_lock);
	n->next = dev_mem_head;
	if (dev_mem_head)
		dev_mem_head->prev = n;
	dev_mem_head = n;
	pthread_mutex_unlock(&dev_mem_lock);
	*out = &n->m;
	return 0;
err_close:
	close(fd);
err_free:
	free(n);
	LOG_WARN("dev", "dev_mem_alloc(%zu) failed", len);
	return -SMCR_E_NOMEM;
}

void dev_mem_hold(struct dev_mem *m)
{
	/* relaxed: the caller holds a reference already. */
	atomic_fetch_add_explicit(&m->refcnt, 1, memory_order_relaxed);
}

void dev_mem_put(struct dev_mem *m)
{
	if (!m)
		return;
	struct dev_mem_node *n = (struct dev_mem_node *)(void *)m;
	/* The list lock is taken around the last put so dev_mem_find (which takes its hold
	 * under the same lock) never revives a buffer whose count reached 0. */
	pthread_mutex_lock(&dev_mem_lock);
	if (atomic_fetch_sub_explicit(&m->refcnt, 1, memory_order_acq_rel) != 1) {
		pthread_mutex_unlock(&dev_mem_lock);
		return;
	}
	if (n->prev)
		n->prev->next = n->next;
	else
		dev_mem_head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	pthread_mutex_unlock(&dev_mem_lock);
	munmap(m->addr, m->len);
	close(m->fd);
	free(n);
}

void dev_mem_free(struct dev_mem *m)
{
	dev_mem_put(m);
}

int dev_mem_find(const void *addr, size_t len, struct dev_mem **out, size_t *off)
{
	uintptr_t a = (uintptr_t)addr;
	int rc = -SMCR_E_DEV_NOT_DEV_MEM;

	pthread_mutex_lock(&dev_mem_lock);
	for (struct dev_mem_node *n = dev_mem_head; n; n = n->next) {
		uintptr_t b = (uintptr_t)n->m.addr;
		if (a >= b && a - b <= n->m.len && len <= n->m.len - (a - b)) {
			atomic_fetch_add_explicit(&n->m.refcnt, 1, memory_order_relaxed);
			*out = &n->m;
			*off = a - b;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&dev_mem_lock);
	return rc;
}
