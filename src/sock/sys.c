/* sys.c: the default table of libc calls (see sys.h for why the layer calls through it). */
#define _GNU_SOURCE
#include "sock/sys.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* ioctl's prototype takes "unsigned long" in glibc; the table's member matches it. */
struct sock_sys sock_sys = {
	.socket = socket,
	.socketpair = socketpair,
	.bind = bind,
	.listen = listen,
	.accept4 = accept4,
	.connect = connect,
	.send = send,
	.recv = recv,
	.sendto = sendto,
	.recvfrom = recvfrom,
	.sendmsg = sendmsg,
	.recvmsg = recvmsg,
	.read = read,
	.write = write,
	.readv = readv,
	.writev = writev,
	.close = close,
	.shutdown = shutdown,
	.getsockname = getsockname,
	.getpeername = getpeername,
	.setsockopt = setsockopt,
	.getsockopt = getsockopt,
	.fcntl = fcntl,
	.ioctl = ioctl,
	.poll = poll,
	.epoll_ctl = epoll_ctl,
	.dup3 = dup3,
	.epoll_wait = epoll_wait,
	.ppoll = ppoll,
	.epoll_pwait = epoll_pwait,
};

#define SYS_KEEP(m)                          \
	do {                                 \
		if (table->m)                \
			sock_sys.m = table->m; \
	} while (0)

void sock_sys_set(const struct sock_sys *table)
{
	SYS_KEEP(socket); SYS_KEEP(socketpair); SYS_KEEP(bind); SYS_KEEP(listen);
	SYS_KEEP(accept4); SYS_KEEP(connect); SYS_KEEP(send); SYS_KEEP(recv);
	SYS_KEEP(sendto); SYS_KEEP(recvfrom); SYS_KEEP(sendmsg); SYS_KEEP(recvmsg);
	SYS_KEEP(read); SYS_KEEP(write); SYS_KEEP(readv); SYS_KEEP(writev);
	SYS_KEEP(close); SYS_KEEP(shutdown); SYS_KEEP(getsockname); SYS_KEEP(getpeername);
	SYS_KEEP(setsockopt); SYS_KEEP(getsockopt); SYS_KEEP(fcntl); SYS_KEEP(ioctl);
	SYS_KEEP(poll); SYS_KEEP(epoll_ctl); SYS_KEEP(dup3);
	SYS_KEEP(epoll_wait); SYS_KEEP(ppoll); SYS_KEEP(epoll_pwait);
}
