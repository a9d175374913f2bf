/* emu_fd.c: the file descriptors the emu provider owns (sockets, epoll, eventfds,
 * timerfd), and what becomes of them in a child after fork().
 *
 * A child forked without exec inherits every descriptor; if it kept a QP's TCP socket open,
 * the parent's death would not end the connection and the peer would not notice it (dev.h
 * 5: a vanished peer is detected in bounded time; the conformance suite kills a peer whose
 * child lives on). A device is not usable in a child anyway (dev.h "Threads"), so the child
 * closes all of them at once, in a pthread_atfork child handler.
 *
 * To make that exact, creating or closing one of these descriptors and fork() exclude each
 * other: emu_fd_lock is held from before the creating call until the descriptor is recorded
 * (emu_fd_begin/emu_fd_end), and across remove + close (emu_fd_close); the prepare handler
 * takes it too. So the child never misses one, and never closes a number that was already
 * reused for something else. The lock is a leaf: nothing else is taken under it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "dev/emu/emu_int.h"
#include "util/hfd.h"

static pthread_mutex_t emu_fd_lock = PTHREAD_MUTEX_INITIALIZER;
static int *emu_fds;		/* emu_fd_lock */
static size_t emu_nfds, emu_fds_cap;
static pthread_once_t emu_fd_once = PTHREAD_ONCE_INIT;

static void emu_fd_prepare(void)
{
	pthread_mutex_lock(&emu_fd_lock);
}

static void emu_fd_parent(void)
{
	pthread_mutex_unlock(&emu_fd_lock);
}

static void emu_fd_child(void)
{
	/* Only the forking thread exists here; it took the lock in prepare. */
	for (size_t i = 0; i < emu_nfds; i++)
		close(emu_fds[i]);
	emu_nfds = 0;
	pthread_mutex_unlock(&emu_fd_lock);
}

static void emu_fd_init(void)
{
	(void)pthread_atfork(emu_fd_prepare, emu_fd_parent, emu_fd_child);
}

void emu_fd_begin(void)
{
	pthread_once(&emu_fd_once, emu_fd_init);
	pthread_mutex_lock(&emu_fd_lock);
}

int emu_fd_end(int fd)
{
	int err = errno;
	fd = hfd_keep(fd); /* the provider's own fds are hidden from the program (util/hfd.h) */
	if (fd >= 0) {
		if (emu_nfds == emu_fds_cap) {
			size_t ncap = emu_fds_cap ? emu_fds_cap * 2 : 64;
			int *n = realloc(emu_fds, ncap * sizeof *n);
			if (!n) {
				/* Not recorded: still correct in this process; a forked child would
				 * keep this one descriptor. */
				pthread_mutex_unlock(&emu_fd_lock);
				errno = err;
				return fd;
			}
			emu_fds = n;
			emu_fds_cap = ncap;
		}
		emu_fds[emu_nfds++] = fd;
	}
	pthread_mutex_unlock(&emu_fd_lock);
	errno = err;
	return fd;
}

void emu_fd_close(int fd)
{
	if (fd < 0)
		return;
	pthread_mutex_lock(&emu_fd_lock);
	for (size_t i = 0; i < emu_nfds; i++) {
		if (emu_fds[i] == fd) {
			emu_fds[i] = emu_fds[--emu_nfds];
			break;
		}
	}
	close(fd);
	pthread_mutex_unlock(&emu_fd_lock);
}
