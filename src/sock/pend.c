/* pend.c: the pre-decision buffer (pend.h). */
#include "sock/pend.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"

uint32_t pend_cap_for(uint32_t sndbuf)
{
	/* the send ring's rounding (core.h): a power of two >= sndbuf, within its bounds */
	uint32_t want = sndbuf ? sndbuf : CORE_SNDBUF_DEFAULT;
	if (want > CORE_SNDBUF_MAX)
		want = CORE_SNDBUF_MAX;
	uint32_t c = CORE_SNDBUF_MIN;
	while (c < want)
		c <<= 1;
	return c;
}

size_t pend_room(const struct pend *p, uint32_t cap)
{
	uint32_t c = p->buf ? p->cap : cap;
	return p->len < c ? c - p->len : 0;
}

int pend_put(struct pend *p, uint32_t cap, const struct iovec *iov, int cnt, size_t *taken)
{
	*taken = 0;
	if (!p->buf) {
		if (!cap)
			return 0;
		p->buf = malloc(cap);
		if (!p->buf)
			return -SMCR_E_NOMEM;
		p->cap = cap;
		p->head = p->len = 0;
	}
	if (p->head) {
		/* what is queued goes to the front: the room is one piece after it */
		memmove(p->buf, p->buf + p->head, p->len);
		p->head = 0;
	}
	for (int i = 0; i < cnt && p->len < p->cap; i++) {
		size_t room = p->cap - p->len;
		size_t k = iov[i].iov_len < room ? iov[i].iov_len : room;
		if (!k)
			continue;
		memcpy(p->buf + p->len, iov[i].iov_base, k);
		p->len += (uint32_t)k;
		*taken += k;
	}
	return 0;
}

const uint8_t *pend_peek(const struct pend *p, size_t *len)
{
	*len = p->len;
	return p->len ? p->buf + p->head : NULL;
}

void pend_consume(struct pend *p, size_t n)
{
	if (n > p->len)
		n = p->len;
	p->len -= (uint32_t)n;
	p->head = p->len ? p->head + (uint32_t)n : 0;
}

void pend_free(struct pend *p)
{
	free(p->buf);
	p->buf = NULL;
	p->cap = p->head = p->len = 0;
}
