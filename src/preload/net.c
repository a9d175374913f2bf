/* net.c: the wrappers of the calls that create, connect, name and end sockets: socket,
 * socketpair, bind, listen, accept, accept4, connect, shutdown, get/setsockopt,
 * getsockname, getpeername. Each is the smcr_ call of the same name (include/smcr/smcr.h),
 * which is exactly the libc call on an fd that is not an smcr socket. */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <smcr/smcr.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "sock/sock.h"

/* A TCP listener this process did not make (inherited across exec, passed over a Unix
 * socket) is adopted at its first accept, as Onload probes fds it does not know: it
 * becomes an smcr listener (the rules decide as for one made here), so a server image
 * exec'd with its listening socket (inetd style, socat, nginx's binary upgrade) gets
 * SMC-R. One getsockopt per accept on an fd that is not an smcr socket; the kernel's
 * backlog is set again to SOMAXCONN (it cannot be read back). */
static void pl_adopt_listener(int fd)
{
	int v = 0, dom = 0;
	socklen_t l = sizeof(v);
	if (PL_REAL(getsockopt)(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || !v)
		return;
	l = sizeof(dom);
	if (PL_REAL(getsockopt)(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 ||
	    (dom != AF_INET && dom != AF_INET6))
		return;
	l = sizeof(v);
	if (PL_REAL(getsockopt)(fd, SOL_SOCKET, SO_PROTOCOL, &v, &l) < 0 || v != IPPROTO_TCP)
		return;
	int fl = PL_REAL(fcntl)(fd, F_GETFL), fdf = PL_REAL(fcntl)(fd, F_GETFD);
	if (fl < 0 || fdf < 0)
		return;
	struct sock *s;
	if (sock_create(fd, dom, (fl & O_NONBLOCK) != 0, (fdf & FD_CLOEXEC) != 0, &s) < 0)
		return; /* stays a plain TCP listener */
	sock_put(s);
	(void)smcr_listen(fd, SOMAXCONN);
}

int socket(int domain, int type, int proto)
{
	PL_ENTER(socket);
	int r = smcr_socket(domain, type, proto);
	if (r >= 0 && (uint64_t)r >= pl_lim_soft()) {
		/* past the program's own limit (the process has room for the library's fds
		 * above it, lim.c): Linux with that limit had no number left */
		(void)smcr_close(r);
		errno = EMFILE;
		r = -1;
	}
	PL_LEAVE(r >= 0);
	return r;
}

int socketpair(int domain, int type, int proto, int sv[2])
{
	return PL_REAL(socketpair)(domain, type, proto, sv);
}

int bind(int fd, const struct sockaddr *a, socklen_t l)
{
	PL_HIDDEN(fd, -1);
	PL_ENTER(bind);
	int r = smcr_bind(fd, a, l);
	PL_LEAVE(r == 0);
	return r;
}

int listen(int fd, int backlog)
{
	PL_HIDDEN(fd, -1);
	PL_ENTER(listen);
	int r = smcr_listen(fd, backlog);
	PL_LEAVE(r == 0);
	return r;
}

int accept4(int fd, struct sockaddr *a, socklen_t *l, int fl)
{
	PL_HIDDEN(fd, -1);
	PL_ENTER(accept4);
	if (!smcr_is_socket(fd))
		pl_adopt_listener(fd);
	int r = smcr_accept4(fd, a, l, fl);
	PL_LEAVE(r >= 0);
	return r;
}

int accept(int fd, struct sockaddr *a, socklen_t *l)
{
	PL_HIDDEN(fd, -1);
	PL_ENTER(accept);
	if (!smcr_is_socket(fd))
		pl_adopt_listener(fd);
	int r = smcr_accept4(fd, a, l, 0);
	PL_LEAVE(r >= 0);
	return r;
}

static int pl_connect(int fd, const struct sockaddr *a, socklen_t l)
{
	PL_HIDDEN(fd, -1);
	PL_ENTER(connect);
	int r = smcr_connect(fd, a, l);
	PL_LEAVE(r == 0);
	return r;
}

int connect(int fd, const struct sockaddr *a, socklen_t l)
{
	return pl_connect(fd, a, l);
}

int __connect(int fd, const struct sockaddr *a, socklen_t l)
{
	return pl_connect(fd, a, l);
}

int shutdown(int fd, int how)
{
	PL_HIDDEN(fd, -1);
	PL_FOREIGN(fd);
	PL_FIRST_USE(fd);
	PL_ENTER(shutdown);
	int r = smcr_shutdown(fd, how);
	PL_LEAVE(r == 0);
	return r;
}

int getsockopt(int fd, int lv, int nm, void *v, socklen_t *l)
{
	PL_HIDDEN(fd, -1);
	PL_ENTER(getsockopt);
	int r = smcr_getsockopt(fd, lv, nm, v, l);
	PL_LEAVE(r == 0);
	return r;
}

int setsockopt(int fd, int lv, int nm, const void *v, socklen_t l)
{
	PL_HIDDEN(fd, -1);
	PL_ENTER(setsockopt);
	int r = smcr_setsockopt(fd, lv, nm, v, l);
	PL_LEAVE(r == 0);
	return r;
}

int getsockname(int fd, struct sockaddr *a, socklen_t *l)
{
	PL_HIDDEN(fd, -1);
	PL_ENTER(getsockname);
	int r = smcr_getsockname(fd, a, l);
	PL_LEAVE(r == 0);
	return r;
}

int getpeername(int fd, struct sockaddr *a, socklen_t *l)
{
	PL_HIDDEN(fd, -1);
	PL_ENTER(getpeername);
	int r = smcr_getpeername(fd, a, l);
	PL_LEAVE(r == 0);
	return r;
}
