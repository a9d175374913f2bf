/* sys.h: the libc calls the socket layer makes, through one table of function pointers.
 *
 * Why a table: the transparent interposer (src/preload, a later part) defines connect,
 * send, close, ... itself and links this layer in; a direct call to connect() from here
 * would then call the interposer again. As rsocket's preload does, the interposer fills
 * this table with the next definitions (dlsym(RTLD_NEXT)) before the first socket call
 * (sock_sys_set); without it the table holds libc's own functions.
 *
 * Threads: sock_sys is written once before any other thread uses the layer and only read
 * afterwards. */
#ifndef SMCR_SOCK_SYS_H
#define SMCR_SOCK_SYS_H

#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

struct sock_sys {
	int (*socket)(int, int, int);
	int (*socketpair)(int, int, int, int[2]);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	int (*close)(int);
	int (*shutdown)(int, int);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*dup3)(int, int, int);
	int (*epoll_wait)(int, struct epoll_event *, int, int); /* smcr_epoll_wait's sleep */
	/* sock_wait_poll / sock_wait_epoll's sleeps (wait.h): the caller's signal mask */
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
};

extern struct sock_sys sock_sys;

/* Replaces the table (the interposer, before any socket call). NULL members keep libc's. */
void sock_sys_set(const struct sock_sys *table);

#endif
