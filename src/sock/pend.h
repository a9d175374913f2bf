/* pend.h: the pre-decision buffer of an undecided connection (docs/parts/connect.md
 * "Undecided connections").
 *
 * Under the interposer a connect returns once TCP is up, and an accepted connection is
 * usable at once, while the CLC handshake that decides between SMC-R and TCP goes on in
 * the background. The program's writes of that time are copied here, in order, at most
 * cap bytes (the size of the send ring the connection gets in SMC-R mode, so that the
 * whole buffer fits into the empty ring at the decision); when the handshake ends they
 * are written, before any later byte, over whichever mode won. The buffer shows as the
 * connection's POLLOUT while it has room.
 *
 * A plain byte queue: no locking of its own (the socket's lock protects it, sock.h), no
 * clock, no system call. Memory is taken at the first put and given back by pend_free. */
#ifndef SMCR_SOCK_PEND_H
#define SMCR_SOCK_PEND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "util/err.h"

struct pend {
	uint8_t *buf; /* cap bytes once the first put allocated them, else NULL */
	uint32_t cap; /* fixed at the first put */
	uint32_t head; /* first unsent byte */
	uint32_t len;  /* bytes queued from head */
};

/* The capacity for a connection that asks for sndbuf bytes of send buffer (0: the
 * default): the send ring's size (core.h CORE_SNDBUF_*), so a full buffer fits the empty
 * ring of an SMC-R connection. */
uint32_t pend_cap_for(uint32_t sndbuf);
/* Bytes that a put would take now (cap: the capacity to use if nothing was put yet). */
size_t pend_room(const struct pend *p, uint32_t cap);
/* Appends up to pend_room bytes from iov[0..cnt); *taken says how many. 0, or
 * -SMCR_E_NOMEM (nothing taken). */
SMCR_MUST_CHECK int pend_put(struct pend *p, uint32_t cap, const struct iovec *iov, int cnt,
			     size_t *taken);
/* The queued bytes: *len of them at the returned address (NULL, 0 when empty). */
const uint8_t *pend_peek(const struct pend *p, size_t *len);
/* The first n queued bytes were sent (n <= len). */
void pend_consume(struct pend *p, size_t n);
/* Drops what is queued and gives the memory back. */
void pend_free(struct pend *p);

#endif
