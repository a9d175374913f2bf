/* curs.c: ring-cursor arithmetic (docs/protocol/wire-formats.md 7.1, 7.2, 8.3;
 * docs/protocol/procedures.md 4.2-4.5). See curs.h for the contract and the TCP equivalent of each
 * helper. */
#include "wire/curs.h"

/* Bytes from old to new in a ring of size bytes (Linux smc_curs_diff), exact while they are
 * at most one lap apart; 0 if new is behind. */
static uint64_t curs_diff(struct curs old, struct curs new_, uint32_t size)
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

/* size - diff(peer_cons, prod), clamped to 0..size. */
static uint32_t curs_free_space(struct curs peer_cons, struct curs prod, uint32_t size)
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
