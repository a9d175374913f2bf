/* curs.c: ring-cursor arithmetic (docs/protocol/wire-formats.md 7.1, 7.2, 8.3;
 * docs/protocol/procedures.md 4.2-4.5). See curs.h for the contract and the TCP equivalent of each
 * helper. */
#include "wire/curs.h"

struct curs curs_add(struct curs c, uint64_t n, uint32_t size)
{
	if (size == 0)
		return c;
	/* 64-bit sum: count < 2^32 and n < 2^64 - 2^32 in any real use; laps beyond the
	 * first add one wrap each, and the wrap counter is taken modulo 65536 (8.3). */
	uint64_t total = (uint64_t)c.count + n;
	uint64_t laps = total / size;
	c.count = (uint32_t)(total % size);
	c.wrap = (uint16_t)(c.wrap + (uint16_t)(laps & 0xFFFF));
	return c;
}

uint64_t curs_diff(struct curs old, struct curs new_, uint32_t size)
{
	/* docs/protocol/procedures.md 4.2; negative results (new behind old) count as 0, as in
	 * Linux. */
	int64_t d;
	if (old.wrap == new_.wrap)
		d = (int64_t)new_.count - (int64_t)old.count;
	else
		d = (int64_t)size - (int64_t)old.count + (int64_t)new_.count;
	return d > 0 ? (uint64_t)d : 0;
}

bool curs_is_older(struct curs rcvd, struct curs known)
{
	/* docs/protocol/wire-formats.md 7.1: a smaller non-zero wrap, or the same wrap and a
	 * smaller count. */
	if (rcvd.wrap < known.wrap && rcvd.wrap != 0)
		return true;
	return rcvd.wrap == known.wrap && rcvd.count < known.count;
}

bool curs_take_newer(struct curs *known, struct curs rcvd)
{
	if (curs_is_older(rcvd, *known) || curs_eq(rcvd, *known))
		return false;
	*known = rcvd;
	return true;
}

int curs_cmp(struct curs a, struct curs b)
{
	int dw = seq16_diff(a.wrap, b.wrap);
	if (dw != 0)
		return dw < 0 ? -1 : 1;
	if (a.count != b.count)
		return a.count < b.count ? -1 : 1;
	return 0;
}

uint32_t curs_free_space(struct curs peer_cons, struct curs prod, uint32_t size)
{
	uint64_t used = curs_diff(peer_cons, prod, size);
	return used >= size ? 0 : (uint32_t)(size - used);
}

uint32_t curs_wnd_limit(uint32_t size)
{
	uint32_t tenth = size / 10;
	return tenth > CURS_WND_MIN ? tenth : CURS_WND_MIN;
}

bool curs_cons_update_due(const struct curs_wnd *w)
{
	if (w->peer_req || w->force)
		return true;
	uint64_t to_confirm = curs_diff(w->cons_sent, w->cons, w->size);
	if (to_confirm <= curs_wnd_limit(w->size))
		return false;
	/* The free space as the peer sees it: it only knows cons_sent (Linux: size minus
	 * smc_curs_diff_large(cons_sent, peer_prod), capped at size). */
	uint32_t peer_free = curs_free_space(w->cons_sent, w->peer_prod, w->size);
	return peer_free <= w->size / 2 || w->peer_blocked;
}

int curs_split(uint32_t off, uint32_t len, uint32_t size, struct curs_chunk out[2])
{
	if (size == 0 || off >= size || len > size)
		return -SMCR_E_INVAL;
	if (len == 0)
		return 0;
	uint32_t first = size - off;	/* bytes up to the end of the ring, >= 1 */
	if (len <= first) {
		out[0].off = off;
		out[0].len = len;
		return 1;
	}
	out[0].off = off;
	out[0].len = first;
	out[1].off = 0;
	out[1].len = len - first;
	return 2;
}

int seq16_diff(uint16_t a, uint16_t b)
{
	/* Portable signed 16-bit difference (no implementation-defined narrowing). */
	unsigned d = (unsigned)(uint16_t)(a - b);
	return d >= 0x8000u ? (int)d - 0x10000 : (int)d;
}
