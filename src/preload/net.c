/* net.c: the wrappers of the calls that create, connect, name and end sockets: socket,
 * socketpair, bind, listen, accept, accept4, connect, shutdown, get/setsockopt,
 * getsockname, getpeername. Each is the smcr_ call of the same name (include/smcr/smcr.h),
 * which is exactly the libc call on an fd that is not an smcr socket. */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <smcr/smcr.h>

int socket(int domain, int type, int proto)
{
	PL_ENTER(socket);
	int r = smcr_socket(domain, type, proto);
	PL_LEAVE(r >= 0);
	return r;
}

int socketpair(int domain, int type, int proto, int sv[2])
{
	return PL_REAL(socketpair)(domain, type, proto, sv);
}

int bind(int fd, const struct sockaddr *a, socklen_t l)
{
	PL_ENTER(bind);
	int r = smcr_bind(fd, a, l);
	PL_LEAVE(r == 0);
	return r;
}

int listen(int fd, int backlog)
{
	PL_ENTER(listen);
	int r = smcr_listen(fd, backlog);
	PL_LEAVE(r == 0);
	return r;
}

int accept4(int fd, struct sockaddr *a, socklen_t *l, int fl)
{
	PL_ENTER(accept4);
	int r = smcr_accept4(fd, a, l, fl);
	PL_LEAVE(r >= 0);
	return r;
}

int accept(int fd, struct sockaddr *a, socklen_t *l)
{
	PL_ENTER(accept);
	int r = smcr_accept4(fd, a, l, 0);
	PL_LEAVE(r >= 0);
	return r;
}

static int pl_connect(int fd, const struct sockaddr *a, socklen_t l)
{
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
	PL_FOREIGN(fd);
	PL_ENTER(shutdown);
	int r = smcr_shutdown(fd, how);
	PL_LEAVE(r == 0);
	return r;
}

int getsockopt(int fd, int lv, int nm, void *v, socklen_t *l)
{
	PL_ENTER(getsockopt);
	int r = smcr_getsockopt(fd, lv, nm, v, l);
	PL_LEAVE(r == 0);
	return r;
}

int setsockopt(int fd, int lv, int nm, const void *v, socklen_t l)
{
	PL_ENTER(setsockopt);
	int r = smcr_setsockopt(fd, lv, nm, v, l);
	PL_LEAVE(r == 0);
	return r;
}

int getsockname(int fd, struct sockaddr *a, socklen_t *l)
{
	PL_ENTER(getsockname);
	int r = smcr_getsockname(fd, a, l);
	PL_LEAVE(r == 0);
	return r;
}

int getpeername(int fd, struct sockaddr *a, socklen_t *l)
{
	PL_ENTER(getpeername);
	int r = smcr_getpeername(fd, a, l);
	PL_LEAVE(r == 0);
	return r;
}
