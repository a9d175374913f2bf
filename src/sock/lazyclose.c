/* lazyclose.c: the close of a connection accepted and never used: FIN now, the client's
 * Proposal read when it comes (rules and threads in lazyclose.h). */
#define _GNU_SOURCE
#include "sock/lazyclose.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "sock/progress.h"
#include "sock/sig.h"
#include "sock/sock.h"
#include "sock/sys.h"
#include "util/clock.h"
#include "wire/clc.h"

/* One waiting close. Owned by the progress thread from lzc_start on (created by the
 * closing thread, handed over by progress_call); freed by the watch's release. */
struct lzc {
	int fd; /* the hidden number */
	bool done;
	struct prog_watch *w;
	struct prog_timer t;
};

/* closes waiting; any thread, relaxed: a bound and a test's count, not a synchronisation */
static atomic_uint lzc_n;

enum lzc_in {
	LZC_WAIT,  /* nothing yet, or part of a Proposal */
	LZC_READ,  /* a whole CLC message was there and is read */
	LZC_CLOSE, /* EOF, an error, or bytes that are not CLC: close unread */
};

/* What the client has sent: at most one whole CLC message is read ("SMCR", or "SMCD" from
 * a Linux client; an smcr client sends nothing else before the server's answer). */
static enum lzc_in lzc_take(int fd)
{
	uint8_t b[CLC_MSG_MAX_LEN];
	ssize_t n = sock_sys.recv(fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? LZC_WAIT
										  : LZC_CLOSE;
	if (n == 0)
		return LZC_CLOSE;
	if (!clc_eye_prefix(b, (size_t)n))
		return LZC_CLOSE;
	if (n < CLC_HDR_LEN)
		return LZC_WAIT;
	uint16_t len = 0;
	if (b[3] == 0xC4)
		len = (uint16_t)(b[5] << 8 | b[6]); /* SMC-D: only its length is of use here */
	else if (clc_peek_header(b, CLC_HDR_LEN, NULL, &len, NULL) < 0)
		return LZC_CLOSE;
	if (len < CLC_HDR_LEN || len > sizeof(b))
		return LZC_CLOSE;
	if (n < (ssize_t)len)
		return LZC_WAIT;
	(void)sock_sys.recv(fd, b, len, MSG_DONTWAIT);
	return LZC_READ;
}

static void lzc_finish(struct lzc *z)
{
	if (z->done)
		return;
	z->done = true;
	(void)progress_timer_cancel(&z->t); /* on the progress thread: it cannot be running */
	progress_unwatch(z->w);		    /* release (the free) after this turn */
	(void)sock_sys.close(z->fd);
	atomic_fetch_sub_explicit(&lzc_n, 1, memory_order_relaxed);
}

static void lzc_event(void *arg, uint32_t events)
{
	struct lzc *z = arg;
	if (z->done)
		return;
	enum lzc_in in = lzc_take(z->fd);
	/* part of a Proposal and then the client's EOF: a peek keeps returning the part */
	if (in != LZC_WAIT || (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		lzc_finish(z);
}

static void lzc_timeout(void *arg, uint32_t events)
{
	(void)events;
	lzc_finish(arg);
}

static void lzc_release(void *arg)
{
	free(arg);
}

/* On the progress thread: the watch and the bound. Edge-triggered (a part of a Proposal
 * left unread must not wake the thread again until more comes); epoll_ctl's ADD reports a
 * Proposal that came before it once. */
static void lzc_start(void *arg, uint32_t events)
{
	(void)events;
	struct lzc *z = arg;
	progress_timer_init(&z->t, lzc_timeout, z);
	if (progress_watch(z->fd, EPOLLIN | EPOLLRDHUP | EPOLLET, lzc_event, z, lzc_release, &z->w) < 0) {
		(void)sock_sys.close(z->fd);
		atomic_fetch_sub_explicit(&lzc_n, 1, memory_order_relaxed);
		free(z);
		return;
	}
	if (progress_timer_arm(&z->t, smcr_now_ns() + sock_server_first_wait_ns()) < 0)
		lzc_finish(z);
}

void lazyclose_prepare(int fd)
{
	switch (lzc_take(fd)) {
	case LZC_READ:	/* the usual case: the Proposal came before the close */
	case LZC_CLOSE: /* the close is TCP's: a FIN, or a reset for unread bytes */
		return;
	case LZC_WAIT:
		break;
	}
	if (atomic_fetch_add_explicit(&lzc_n, 1, memory_order_relaxed) >= LAZYCLOSE_MAX)
		goto plain;
	struct lzc *z = calloc(1, sizeof(*z));
	if (!z)
		goto plain;
	z->fd = sock_fd_dup_hidden(fd);
	if (z->fd < 0) {
		free(z);
		goto plain;
	}
	/* the FIN of TCP's close, now; the file stays open for the Proposal */
	(void)sock_sys.shutdown(z->fd, SHUT_WR);
	if (progress_call(lzc_start, z) < 0) {
		(void)sock_sys.close(z->fd);
		free(z);
		goto plain;
	}
	return;
plain:
	atomic_fetch_sub_explicit(&lzc_n, 1, memory_order_relaxed);
}

unsigned lazyclose_pending(void)
{
	return atomic_load_explicit(&lzc_n, memory_order_relaxed);
}
