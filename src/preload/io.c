/* io.c: the wrappers of the data calls: read, readv, recv, recvfrom, recvmsg, recvmmsg,
 * write, writev, send, sendto, sendmsg, sendmmsg, preadv2/pwritev2 (offset -1), their
 * fortified (__*_chk) and internal-alias (__read, __write, __send) forms, sendfile and splice.
 * On an smcr socket each is the smcr_ call; anything else is the libc call after one table
 * lookup (inside smcr_*). */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <smcr/smcr.h>

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

/* glibc's fortify failure ("buffer overflow detected"), as the real __*_chk would call. */
extern void __chk_fail(void) __attribute__((noreturn));

#define PL_DATA(name, call)               \
	PL_HIDDEN(fd, -1);                \
	PL_FOREIGN(fd);                   \
	PL_FIRST_USE(fd);                 \
	PL_ENTER(name);                   \
	ssize_t r = call;                 \
	PL_LEAVE(r >= 0);                 \
	return r

static ssize_t pl_read(int fd, void *b, size_t n) { PL_DATA(read, smcr_read(fd, b, n)); }
ssize_t read(int fd, void *b, size_t n) { return pl_read(fd, b, n); }
ssize_t __read(int fd, void *b, size_t n) { return pl_read(fd, b, n); }
ssize_t __read_chk(int fd, void *b, size_t n, size_t bl)
{
	if (n > bl)
		__chk_fail();
	return pl_read(fd, b, n);
}

ssize_t readv(int fd, const struct iovec *v, int c) { PL_DATA(readv, smcr_readv(fd, v, c)); }

static ssize_t pl_recvfrom(int fd, void *b, size_t n, int fl, struct sockaddr *a, socklen_t *l)
{
	PL_DATA(recvfrom, smcr_recvfrom(fd, b, n, fl, a, l));
}
ssize_t recv(int fd, void *b, size_t n, int fl) { return pl_recvfrom(fd, b, n, fl, NULL, NULL); }
ssize_t __recv_chk(int fd, void *b, size_t n, size_t bl, int fl)
{
	if (n > bl)
		__chk_fail();
	return pl_recvfrom(fd, b, n, fl, NULL, NULL);
}
ssize_t recvfrom(int fd, void *b, size_t n, int fl, struct sockaddr *a, socklen_t *l)
{
	return pl_recvfrom(fd, b, n, fl, a, l);
}
ssize_t __recvfrom_chk(int fd, void *b, size_t n, size_t bl, int fl, struct sockaddr *a,
		       socklen_t *l)
{
	if (n > bl)
		__chk_fail();
	return pl_recvfrom(fd, b, n, fl, a, l);
}

ssize_t recvmsg(int fd, struct msghdr *m, int fl) { PL_DATA(recvmsg, smcr_recvmsg(fd, m, fl)); }

static ssize_t pl_write(int fd, const void *b, size_t n) { PL_DATA(write, smcr_write(fd, b, n)); }
ssize_t write(int fd, const void *b, size_t n) { return pl_write(fd, b, n); }
ssize_t __write(int fd, const void *b, size_t n) { return pl_write(fd, b, n); }

ssize_t writev(int fd, const struct iovec *v, int c) { PL_DATA(writev, smcr_writev(fd, v, c)); }

static ssize_t pl_sendto(int fd, const void *b, size_t n, int fl, const struct sockaddr *a,
			 socklen_t l)
{
	PL_DATA(sendto, smcr_sendto(fd, b, n, fl, a, l));
}
ssize_t send(int fd, const void *b, size_t n, int fl) { return pl_sendto(fd, b, n, fl, NULL, 0); }
ssize_t __send(int fd, const void *b, size_t n, int fl) { return pl_sendto(fd, b, n, fl, NULL, 0); }
ssize_t sendto(int fd, const void *b, size_t n, int fl, const struct sockaddr *a, socklen_t l)
{
	return pl_sendto(fd, b, n, fl, a, l);
}

/* SCM_RIGHTS: passing an SMC-R connection to another process cannot work (the receiver
 * would get the signalling pair's end, and the connection's state stays here), so such a
 * send fails with EOPNOTSUPP and a log line; a connection accepted and never used is
 * declined first and passes as the TCP socket it then is. One look at the control data,
 * only when there is some. */
static bool pl_rights_ok(const struct msghdr *m, int *err)
{
	*err = EOPNOTSUPP;
	if (!m || !m->msg_control || m->msg_controllen < sizeof(struct cmsghdr))
		return true;
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)m); c;
	     c = CMSG_NXTHDR((struct msghdr *)m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int pfd;
			memcpy(&pfd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (hfd_is(pfd)) {
				*err = EBADF; /* not the program's number */
				return false;
			}
			if (!smcr_is_socket(pfd))
				continue;
			sock_lazy_decline(pfd);
			struct smcr_info in;
			socklen_t l = sizeof(in);
			if (smcr_getsockopt(pfd, SOL_SMCR, SMCR_INFO, &in, &l) == 0 &&
			    (in.mode == SMCR_MODE_SMCR || in.mode == SMCR_MODE_HANDSHAKE)) {
				SMCR_LOG_RL(SMCR_LOG_WARN, "preload",
					    "fd %d: an SMC-R connection cannot be passed with "
					    "SCM_RIGHTS: EOPNOTSUPP", pfd);
				return false;
			}
		}
	}
	return true;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int fl)
{
	int err;
	if (__builtin_expect(m && m->msg_controllen, 0) && !pl_rights_ok(m, &err)) {
		errno = err;
		return -1;
	}
	PL_DATA(sendmsg, smcr_sendmsg(fd, m, fl));
}

/* recvmmsg/sendmmsg on a stream socket are one recvmsg/sendmsg per entry, as the kernel
 * does them (net/socket.c's loop): MSG_WAITFORONE makes the entries after the first
 * non-blocking; an error after at least one entry ends the loop with the count. The
 * timeout of recvmmsg is checked only between entries, as the kernel's. */
int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int fl, struct timespec *t)
{
	PL_HIDDEN(fd, -1);
	PL_FIRST_USE(fd);
	PL_FOREIGN(fd);
	if (!smcr_is_socket(fd))
		return PL_REAL(recvmmsg)(fd, v, n, fl, t);
	PL_ENTER(recvmmsg);
	unsigned i = 0;
	int f = fl & ~MSG_WAITFORONE;
	ssize_t r = 0;
	for (; i < n; i++) {
		r = smcr_recvmsg(fd, &v[i].msg_hdr, f);
		if (r < 0)
			break;
		v[i].msg_len = (unsigned)r;
		if (fl & MSG_WAITFORONE)
			f |= MSG_DONTWAIT;
		if (r == 0)
			{ i++; break; }
	}
	int ret = i > 0 ? (int)i : -1;
	PL_LEAVE(ret >= 0);
	return ret;
}

int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int fl)
{
	PL_HIDDEN(fd, -1);
	PL_FIRST_USE(fd);
	PL_FOREIGN(fd);
	if (!smcr_is_socket(fd))
		return PL_REAL(sendmmsg)(fd, v, n, fl);
	int err;
	for (unsigned k = 0; k < n; k++)
		if (!pl_rights_ok(&v[k].msg_hdr, &err)) {
			errno = err;
			return -1;
		}
	PL_ENTER(sendmmsg);
	unsigned i = 0;
	for (; i < n; i++) {
		ssize_t r = smcr_sendmsg(fd, &v[i].msg_hdr, fl);
		if (r < 0)
			break;
		v[i].msg_len = (unsigned)r;
	}
	int ret = i > 0 ? (int)i : -1;
	PL_LEAVE(ret >= 0);
	return ret;
}

/* preadv2/pwritev2 on a socket: offset -1 means "the current position", which a socket
 * has none of: readv/writev. Another offset gives ESPIPE and flags EOPNOTSUPP, as the
 * kernel gives for a socket. */
static ssize_t pl_prwv2(int fd, const struct iovec *v, int c, int64_t o, int fl, bool wr)
{
	PL_FIRST_USE(fd);
	PL_FOREIGN(fd);
	PL_ENTER(preadv2);
	ssize_t r;
	if (o != -1) {
		errno = ESPIPE;
		r = -1;
	} else if (fl) {
		errno = EOPNOTSUPP;
		r = -1;
	} else {
		r = wr ? smcr_writev(fd, v, c) : smcr_readv(fd, v, c);
	}
	PL_LEAVE(r >= 0);
	return r;
}
ssize_t preadv2(int fd, const struct iovec *v, int c, off_t o, int fl)
{
	PL_HIDDEN(fd, -1);
	if (!smcr_is_socket(fd))
		return PL_REAL(preadv2)(fd, v, c, o, fl);
	return pl_prwv2(fd, v, c, o, fl, false);
}
ssize_t preadv64v2(int fd, const struct iovec *v, int c, off64_t o, int fl)
{
	PL_HIDDEN(fd, -1);
	if (!smcr_is_socket(fd))
		return PL_REAL(preadv64v2)(fd, v, c, o, fl);
	return pl_prwv2(fd, v, c, o, fl, false);
}
ssize_t pwritev2(int fd, const struct iovec *v, int c, off_t o, int fl)
{
	PL_HIDDEN(fd, -1);
	if (!smcr_is_socket(fd))
		return PL_REAL(pwritev2)(fd, v, c, o, fl);
	return pl_prwv2(fd, v, c, o, fl, true);
}
ssize_t pwritev64v2(int fd, const struct iovec *v, int c, off64_t o, int fl)
{
	PL_HIDDEN(fd, -1);
	if (!smcr_is_socket(fd))
		return PL_REAL(pwritev64v2)(fd, v, c, o, fl);
	return pl_prwv2(fd, v, c, o, fl, true);
}

/* ---- sendfile and splice onto / off an smcr socket ----
 *
 * The kernel cannot move file pages into an RMBE, so the wrapper copies through a buffer:
 * read (or pread at *off) from the file, smcr_write to the socket. sendfile(2)'s offset
 * rules: with off, *off advances by what was sent and the file position is untouched;
 * without, the file position advances by what was sent (what was read but not sent is
 * given back with lseek). A short or would-block write ends the call with the count so
 * far (EAGAIN only if nothing moved), as a non-blocking TCP socket's sendfile. */
#define PL_COPY_CHUNK (64 * 1024)

static ssize_t pl_file_to_sock(int out, int in, int64_t *off, size_t n)
{
	static _Thread_local char *buf;
	if (!buf && !(buf = malloc(PL_COPY_CHUNK))) {
		errno = ENOMEM;
		return -1;
	}
	size_t done = 0;
	int64_t pos = off ? *off : 0;
	while (done < n) {
		size_t want = n - done < PL_COPY_CHUNK ? n - done : PL_COPY_CHUNK;
		ssize_t got = off ? pread(in, buf, want, (off_t)(pos + (int64_t)done))
				  : PL_REAL(read)(in, buf, want);
		if (got < 0) {
			if (done)
				break;
			return -1;
		}
		if (got == 0)
			break;
		size_t put = 0;
		int werr = 0;
		while (put < (size_t)got) {
			ssize_t w = smcr_write(out, buf + put, (size_t)got - put);
			if (w < 0) {
				werr = errno;
				break;
			}
			put += (size_t)w;
		}
		if (!off && put < (size_t)got)
			(void)lseek(in, -(off_t)((size_t)got - put), SEEK_CUR);
		done += put;
		if (werr) {
			if (done)
				break;
			errno = werr;
			return -1;
		}
		if ((size_t)got < want)
			break;
	}
	if (off)
		*off = pos + (int64_t)done;
	return (ssize_t)done;
}

static ssize_t pl_sendfile(int out, int in, int64_t *off, size_t n)
{
	PL_FIRST_USE(out);
	PL_FOREIGN(out);
	PL_ENTER(sendfile);
	ssize_t r = pl_file_to_sock(out, in, off, n);
	PL_LEAVE(r >= 0);
	return r;
}

ssize_t sendfile(int out, int in, off_t *o, size_t n)
{
	PL_HIDDEN(out, -1);
	PL_HIDDEN(in, -1);
	if (!smcr_is_socket(out))
		return PL_REAL(sendfile)(out, in, o, n);
	int64_t v = o ? *o : 0;
	ssize_t r = pl_sendfile(out, in, o ? &v : NULL, n);
	if (o)
		*o = (off_t)v;
	return r;
}

ssize_t sendfile64(int out, int in, off64_t *o, size_t n)
{
	PL_HIDDEN(out, -1);
	PL_HIDDEN(in, -1);
	if (!smcr_is_socket(out))
		return PL_REAL(sendfile64)(out, in, o, n);
	int64_t v = o ? *o : 0;
	ssize_t r = pl_sendfile(out, in, o ? &v : NULL, n);
	if (o)
		*o = (off64_t)v;
	return r;
}

/* splice from an smcr socket into a pipe: peek what is there, write it to the pipe, then
 * consume exactly what the pipe took, so no byte is lost when the pipe is full. */
static ssize_t pl_sock_to_pipe(int in, int out, size_t n, unsigned fl)
{
	static _Thread_local char *buf;
	if (!buf && !(buf = malloc(PL_COPY_CHUNK))) {
		errno = ENOMEM;
		return -1;
	}
	size_t want = n < PL_COPY_CHUNK ? n : PL_COPY_CHUNK;
	int rfl = MSG_PEEK | ((fl & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0);
	ssize_t got = smcr_recv(in, buf, want, rfl);
	if (got <= 0)
		return got;
	ssize_t w = PL_REAL(write)(out, buf, (size_t)got);
	if (w <= 0)
		return w;
	ssize_t c = smcr_recv(in, buf, (size_t)w, MSG_DONTWAIT);
	return c;
}

ssize_t splice(int in, off64_t *oi, int out, off64_t *oo, size_t n, unsigned fl)
{
	PL_HIDDEN(in, -1);
	PL_HIDDEN(out, -1);
	PL_FIRST_USE(in);
	PL_FIRST_USE(out);
	PL_FOREIGN(in);
	PL_FOREIGN(out);
	bool si = smcr_is_socket(in), so = smcr_is_socket(out);
	if (!si && !so)
		return PL_REAL(splice)(in, oi, out, oo, n, fl);
	PL_ENTER(splice);
	ssize_t r;
	if (si && so) {
		errno = EINVAL; /* splice needs a pipe at one end */
		r = -1;
	} else if (si) {
		if (oi) {
			errno = ESPIPE;
			r = -1;
		} else {
			r = pl_sock_to_pipe(in, out, n, fl);
		}
	} else if (oo) {
		errno = ESPIPE;
		r = -1;
	} else {
		int64_t v = oi ? *oi : 0;
		r = pl_file_to_sock(out, in, oi ? &v : NULL, n);
		if (oi)
			*oi = (off64_t)v;
	}
	PL_LEAVE(r >= 0);
	return r;
}
