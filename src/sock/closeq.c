/* closeq.c: "close later" for the hidden fds of closed SMC-R sockets (rules, sites and
 * locking in closeq.h; docs/parts/connect.md "Close"). */
#define _GNU_SOURCE
#include "sock/closeq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "sock/sig.h"
#include "sock/sys.h"
#include "util/env.h"

/* A ring of queued fds, oldest first (closed first: its peer has had the longest to
 * finish with it). All (closeq_lock) but cq_len and cq_total, atomics read without it. */
static pthread_mutex_t closeq_lock = PTHREAD_MUTEX_INITIALIZER;
static int cq_fd[CLOSEQ_MAX];
static uint8_t cq_how[CLOSEQ_MAX];
static unsigned cq_head, cq_n;
static _Atomic unsigned cq_len;	      /* cq_n, for the lock-free empty check */
static _Atomic uint64_t cq_total;      /* fds ever queued */
/* fds a drain took off the list and is closing without the lock; only grows under it */
static _Atomic unsigned cq_closing;
static pthread_once_t cq_once = PTHREAD_ONCE_INIT;
static bool cq_on = true, cq_rst = true; /* set once in cq_setup */
static unsigned cq_timer_ms = CLOSEQ_TIMER_MS;

static void close_now(int fd, enum closeq_how how)
{
	if (how == CLOSEQ_RST) {
		struct linger lg = { 1, 0 };
		(void)sock_sys.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	(void)sock_sys.close(fd);
}

/* Caller holds closeq_lock. */
static void drain_all_locked(void)
{
	while (cq_n) {
		close_now(cq_fd[cq_head], (enum closeq_how)cq_how[cq_head]);
		cq_head = (cq_head + 1) % CLOSEQ_MAX;
		cq_n--;
	}
	atomic_store_explicit(&cq_len, 0, memory_order_relaxed);
}

/* fork(): the parent closes everything queued before the child is made (a child must not
 * keep the parent's closed TCP connections open: the peer would see no FIN until the
 * child exits) and holds the lock across the fork so nothing is queued meanwhile. */
static void cq_prepare(void)
{
	pthread_mutex_lock(&closeq_lock);
	drain_all_locked();
	/* and what other threads' drains took off the list before: their closes are system
	 * calls of microseconds, nothing they wait for; no new take while we hold the lock */
	while (atomic_load_explicit(&cq_closing, memory_order_acquire)) {
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
}

static void cq_parent(void)
{
	pthread_mutex_unlock(&closeq_lock);
}

static void cq_child(void)
{
	pthread_mutex_unlock(&closeq_lock); /* the forking thread locked it: it is ours */
}

static void cq_exit(void)
{
	closeq_drain_all();
}

static void cq_read_env(void)
{
	cq_on = smcr_env_num_or("SMCR_CLOSEQ", 0, 1, 1) == 1;
	cq_timer_ms = (unsigned)smcr_env_num_or("SMCR_CLOSEQ_MS", 1, 60000, CLOSEQ_TIMER_MS);
	cq_rst = smcr_env_num_or("SMCR_CLOSE_RST", 0, 1, 1) == 1;
}

static void cq_setup(void)
{
	cq_read_env();
	pthread_atfork(cq_prepare, cq_parent, cq_child);
	atexit(cq_exit);
}

void closeq_reread_env(void)
{
	pthread_once(&cq_once, cq_setup);
	cq_read_env();
}

unsigned closeq_timer_ms(void)
{
	pthread_once(&cq_once, cq_setup);
	return cq_timer_ms;
}

bool closeq_rst_enabled(void)
{
	pthread_once(&cq_once, cq_setup);
	return cq_rst;
}

bool closeq_close(int fd, enum closeq_how how)
{
	if (fd < 0)
		return false;
	pthread_once(&cq_once, cq_setup);
	int lo = sock_hidden_min();
	/* a number the program could be given next is closed now: the numbers it sees (the
	 * lowest free one at each socket/accept/dup) stay what they were without smcr */
	if (!cq_on || lo <= 0 || fd < lo) {
		close_now(fd, how);
		return false;
	}
	pthread_mutex_lock(&closeq_lock);
	if (cq_n == CLOSEQ_MAX) {
		pthread_mutex_unlock(&closeq_lock);
		close_now(fd, how); /* full: the bound on fds held for later */
		return false;
	}
	unsigned i = (cq_head + cq_n) % CLOSEQ_MAX;
	cq_fd[i] = fd;
	cq_how[i] = (uint8_t)how;
	cq_n++;
	atomic_store_explicit(&cq_len, cq_n, memory_order_relaxed);
	atomic_fetch_add_explicit(&cq_total, 1, memory_order_relaxed);
	pthread_mutex_unlock(&closeq_lock);
	return true;
}

void closeq_drain(unsigned max)
{
	if (atomic_load_explicit(&cq_len, memory_order_relaxed) == 0)
		return; /* the usual case of a wait: one load */
	int fd[CLOSEQ_WAIT_MAX];
	uint8_t how[CLOSEQ_WAIT_MAX];
	if (max > CLOSEQ_WAIT_MAX)
		max = CLOSEQ_WAIT_MAX;
	unsigned k = 0;
	pthread_mutex_lock(&closeq_lock);
	while (cq_n && k < max) {
		fd[k] = cq_fd[cq_head];
		how[k++] = cq_how[cq_head];
		cq_head = (cq_head + 1) % CLOSEQ_MAX;
		cq_n--;
	}
	/* closing counted before the list's length drops (closeq_pending reads them in the
	 * opposite order) */
	atomic_fetch_add_explicit(&cq_closing, k, memory_order_relaxed);
	atomic_store_explicit(&cq_len, cq_n, memory_order_release);
	pthread_mutex_unlock(&closeq_lock);
	/* taken off the list: ours to close, without the lock (other threads may queue) */
	for (unsigned i = 0; i < k; i++)
		close_now(fd[i], (enum closeq_how)how[i]);
	atomic_fetch_sub_explicit(&cq_closing, k, memory_order_release);
}

void closeq_drain_all(void)
{
	if (atomic_load_explicit(&cq_len, memory_order_relaxed) == 0)
		return;
	pthread_mutex_lock(&closeq_lock);
	drain_all_locked();
	pthread_mutex_unlock(&closeq_lock);
}

unsigned closeq_pending(void)
{
	/* the length first: a drain counts an fd as closing before the length drops (a
	 * release), so read in this order an fd still open is counted at least once */
	unsigned n = atomic_load_explicit(&cq_len, memory_order_acquire);
	return n + atomic_load_explicit(&cq_closing, memory_order_acquire);
}

uint64_t closeq_queued_total(void)
{
	return atomic_load_explicit(&cq_total, memory_order_relaxed);
}
