/* foreign.c: connections a forked child inherited in SMC-R mode.
 *
 * Such a connection's state (its RMB cursors, its link, the shm device's mappings) belongs
 * to the parent: a child that sent a CDC, closed it with the protocol or read its ring
 * would corrupt the parent's connection (redis BGSAVE's child closes every fd it has). So
 * at fork, in the child, before the socket layer's own handlers run, every smcr socket
 * that is past its TCP phase (handshaking, SMC-R, failed) leaves the child's fd table
 * without any protocol and its number is remembered here as foreign. In the child:
 *   - close just closes the number (the parent's connection goes on);
 *   - data calls, shutdown and SMC-R-only options fail with ENOTCONN and one log line
 *     ("SMC-R connection owned by pid N");
 *   - poll/select/epoll see what the parent's connection shows (the kernel's answer).
 * Listeners, new sockets and TCP-mode connections are not foreign: they are the kernel's
 * sockets, and each process handles them on its own (a child's accept gets SMC-R through
 * its own engine, made when first needed).
 *
 * A foreign number the child closes behind the wrappers' back (stdio, closefrom inside
 * libc) and that the kernel hands out again is recognised by its inode (fstat, only on
 * this rare path), and forgotten.
 *
 * Threads: the table is written in the forked child's atfork handler (one thread) and by
 * close; read by every wrapper with relaxed atomics (a bit per fd). */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <smcr/smcr.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/foreign.h"
#include "sock/sock.h"
#include "util/log.h"

struct pl_foreign_ent {
	_Atomic uint64_t ino; /* 0: not foreign */
	pid_t owner;
};

static struct pl_foreign_ent *pl_fg;	/* FDTAB_MAX entries, allocated at the first fork */
static atomic_uint pl_fg_count;

bool pl_foreign_slow(int fd)
{
	struct pl_foreign_ent *e = &pl_fg[fd];
	uint64_t ino = atomic_load_explicit(&e->ino, memory_order_relaxed);
	if (!ino)
		return false;
	struct stat st;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_ino != ino) {
		atomic_store_explicit(&e->ino, 0, memory_order_relaxed); /* reused number */
		return false;
	}
	return true;
}

bool pl_foreign_any(void)
{
	return atomic_load_explicit(&pl_fg_count, memory_order_relaxed) != 0;
}

bool pl_foreign(int fd)
{
	if (!pl_foreign_any() || fd < 0 || fd >= FDTAB_MAX || !pl_fg)
		return false;
	return pl_foreign_slow(fd);
}

int pl_foreign_fail(int fd)
{
	SMCR_LOG_RL(SMCR_LOG_WARN, "preload",
		    "fd %d: SMC-R connection owned by pid %d (inherited at fork): ENOTCONN", fd,
		    (int)pl_fg[fd].owner);
	errno = ENOTCONN;
	return -1;
}

int pl_foreign_close(int fd)
{
	atomic_store_explicit(&pl_fg[fd].ino, 0, memory_order_relaxed);
	return PL_REAL(close)(fd);
}

static pid_t pl_fork_parent;
/* This process's pid as the fork handlers last saw it: an exec wrapper running where
 * getpid() differs is in a vfork child (or a _Fork/clone child), which shares or copies
 * memory without our handlers: it must change nothing (proc.c). */
pid_t pl_pid;

/* An unconnected TCP socket at fd (another file at the same number): a program's data
 * calls on it fail with ENOTCONN, close closes it. */
static void pl_dead_socket_at(int fd)
{
	int t = PL_REAL(socket)(AF_INET, SOCK_STREAM, 0);
	if (t < 0)
		return;
	if (t != fd) {
		(void)PL_REAL(dup3)(t, fd, 0);
		PL_REAL(close)(t);
	}
}

void pl_exec_prepare(void)
{
	if (getpid() != pl_pid)
		return; /* vfork child: the parent's memory */
	sock_lazy_decline_all();
	/* SMC-R connections this process owns cannot live on in the new image (the engine is
	 * the image's): abortive close (the peer: ECONNRESET), and the number becomes a dead
	 * socket (the new image: ENOTCONN), unless close-on-exec. */
	for (int fd = fdtab_next(0); fd >= 0; fd = fdtab_next(fd + 1)) {
		struct sock *s = sock_get(fd);
		if (!s)
			continue;
		int st = atomic_load(&s->state);
		sock_put(s);
		int fdf = PL_REAL(fcntl)(fd, F_GETFD);
		if ((st != SS_SMC && st != SS_HANDSHAKE && st != SS_FAILED) || fdf < 0 ||
		    (fdf & FD_CLOEXEC))
			continue;
		struct linger lg = { 1, 0 };
		(void)smcr_setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		(void)smcr_close(fd);
		pl_dead_socket_at(fd);
		LOG_INFO("preload", "fd %d: SMC-R connection ended at exec (the new image gets "
				    "an unconnected socket: ENOTCONN)", fd);
	}
	/* the parent's connections inherited by this child: the parent keeps them; the new
	 * image gets a dead socket instead of their signalling end */
	if (!pl_fg || !pl_foreign_any())
		return;
	for (int fd = 0; fd < FDTAB_MAX; fd++) {
		if (!atomic_load_explicit(&pl_fg[fd].ino, memory_order_relaxed) || !pl_foreign(fd))
			continue;
		int fdf = PL_REAL(fcntl)(fd, F_GETFD);
		atomic_store_explicit(&pl_fg[fd].ino, 0, memory_order_relaxed);
		if (fdf >= 0 && !(fdf & FD_CLOEXEC))
			pl_dead_socket_at(fd);
	}
}

static void pl_fg_prepare(void)
{
	pl_fork_parent = getpid();
	if (!pl_fg)
		pl_fg = calloc(FDTAB_MAX, sizeof(*pl_fg)); /* zero pages until touched */
}

static void pl_fg_child(void)
{
	pl_pid = getpid();
	if (!pl_fg)
		return;
	unsigned n = 0;
	for (int fd = fdtab_next(0); fd >= 0; fd = fdtab_next(fd + 1)) {
		struct sock *s = sock_get(fd);
		if (!s)
			continue;
		int st = atomic_load(&s->state);
		if (st == SS_HANDSHAKE || st == SS_SMC || st == SS_FAILED) {
			struct stat sb;
			/* out of the table with the table's reference kept: nothing of the
			 * parent's connection is ever released (or touched) in the child */
			if (fstat(fd, &sb) == 0 && fdtab_clear(fd, &s->h)) {
				pl_fg[fd].owner = pl_fork_parent;
				atomic_store_explicit(&pl_fg[fd].ino, (uint64_t)sb.st_ino,
						      memory_order_relaxed);
				n++;
			}
			/* the lookup's reference is leaked too: its put could recycle */
			continue;
		}
		sock_put(s);
	}
	atomic_store_explicit(&pl_fg_count, n, memory_order_relaxed);
}

__attribute__((constructor)) static void pl_fg_init(void)
{
	pl_pid = getpid();
	pthread_atfork(pl_fg_prepare, NULL, pl_fg_child);
}
