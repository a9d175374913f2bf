/* cdc.c: the CDC message codec (docs/protocol/wire-formats.md 7) and its state-free receive checks
 * (7.1). Offsets in the comments are from the type byte. */
#include "wire/cdc.h"

#include <string.h>

#include "util/cursor.h"

#define CDC_RSVD_CURS 2		/* before each cursor: 8..9 and 16..17 */
#define CDC_RSVD_TAIL 18	/* 26..43 */

#define CDC_TRY(expr)                \
	do {                         \
		int rc_ = (expr);    \
		if (rc_)             \
			return rc_;  \
	} while (0)

static int get_curs(struct rcur *c, struct curs *k)
{
	CDC_TRY(rcur_skip(c, CDC_RSVD_CURS));
	CDC_TRY(rcur_get_u16(c, &k->wrap));
	return rcur_get_u32(c, &k->count);
}

static int put_curs(struct wcur *w, struct curs k)
{
	CDC_TRY(wcur_put_zeros(w, CDC_RSVD_CURS));
	CDC_TRY(wcur_put_u16(w, k.wrap));
	return wcur_put_u32(w, k.count);
}

uint8_t cdc_prod_flags_byte(const struct cdc_prod_flags *pf)
{
	return (uint8_t)((pf->write_blocked ? CDC_PF_WRITE_BLOCKED : 0) |
			 (pf->urg_pending ? CDC_PF_URG_PENDING : 0) |
			 (pf->urg_present ? CDC_PF_URG_PRESENT : 0) |
			 (pf->cons_upd_req ? CDC_PF_CONS_UPD_REQ : 0) |
			 (pf->failover ? CDC_PF_FAILOVER : 0));
}

uint8_t cdc_conn_flags_byte(const struct cdc_conn_flags *cf)
{
	return (uint8_t)((cf->done_writing ? CDC_CF_DONE_WRITING : 0) |
			 (cf->closed ? CDC_CF_CLOSED : 0) | (cf->abort ? CDC_CF_ABORT : 0));
}

static int cdc_decode_checked(const uint8_t *buf, size_t len, struct cdc_msg *m)
{
	if (len < 1)
		return -SMCR_E_CDC_SHORT;
	if (buf[0] != CDC_TYPE)
		return -SMCR_E_CDC_BAD_TYPE;
	/* 7.1: Linux processes anything from 26 bytes (the end of the flags); we send 44. */
	if (len < CDC_MIN_RX_LEN)
		return -SMCR_E_CDC_SHORT;
	if (len > CDC_MSG_LEN)
		return -SMCR_E_CDC_LONG;

	struct rcur c = rcur_make(buf, len);
	uint8_t length, pf, cf;
	CDC_TRY(rcur_skip(&c, 1));			/* 0: type, checked */
	CDC_TRY(rcur_get_u8(&c, &length));		/* 1 */
	if (length != CDC_MSG_LEN)
		return -SMCR_E_CDC_BAD_LENGTH;
	CDC_TRY(rcur_get_u16(&c, &m->seqno));		/* 2 */
	CDC_TRY(rcur_get_u32(&c, &m->token));		/* 4 */
	CDC_TRY(get_curs(&c, &m->prod));		/* 8 rsvd, 10 wrap, 12 count */
	CDC_TRY(get_curs(&c, &m->cons));		/* 16 rsvd, 18 wrap, 20 count */
	CDC_TRY(rcur_get_u8(&c, &pf));			/* 24 */
	CDC_TRY(rcur_get_u8(&c, &cf));			/* 25; 26..43 rsvd, may be absent */
	m->pf.write_blocked = (pf & CDC_PF_WRITE_BLOCKED) != 0;
	m->pf.urg_pending = (pf & CDC_PF_URG_PENDING) != 0;
	m->pf.urg_present = (pf & CDC_PF_URG_PRESENT) != 0;
	m->pf.cons_upd_req = (pf & CDC_PF_CONS_UPD_REQ) != 0;
	m->pf.failover = (pf & CDC_PF_FAILOVER) != 0;
	m->cf.done_writing = (cf & CDC_CF_DONE_WRITING) != 0;
	m->cf.closed = (cf & CDC_CF_CLOSED) != 0;
	m->cf.abort = (cf & CDC_CF_ABORT) != 0;
	/* 8.4: alert tokens are non-zero; no connection can own 0. */
	if (m->token == 0)
		return -SMCR_E_CDC_TOKEN_ZERO;
	return 0;
}

int cdc_decode(const uint8_t *buf, size_t len, struct cdc_msg *out)
{
	memset(out, 0, sizeof(*out));
	int rc = cdc_decode_checked(buf, len, out);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

int cdc_encode(const struct cdc_msg *m, uint8_t out[CDC_MSG_LEN])
{
	if (m->token == 0)
		return -SMCR_E_CDC_TOKEN_ZERO;
	uint8_t tmp[CDC_MSG_LEN];
	struct wcur w = wcur_make(tmp, sizeof(tmp));
	CDC_TRY(wcur_put_u8(&w, CDC_TYPE));
	CDC_TRY(wcur_put_u8(&w, CDC_MSG_LEN));
	CDC_TRY(wcur_put_u16(&w, m->seqno));
	CDC_TRY(wcur_put_u32(&w, m->token));
	CDC_TRY(put_curs(&w, m->prod));
	CDC_TRY(put_curs(&w, m->cons));
	CDC_TRY(wcur_put_u8(&w, cdc_prod_flags_byte(&m->pf)));
	CDC_TRY(wcur_put_u8(&w, cdc_conn_flags_byte(&m->cf)));
	CDC_TRY(wcur_put_zeros(&w, CDC_RSVD_TAIL));
	if (wcur_left(&w) != 0)
		return -SMCR_E_INTERNAL;
	memcpy(out, tmp, sizeof(tmp));
	return 0;
}

bool cdc_msg_equal(const struct cdc_msg *a, const struct cdc_msg *b)
{
	return a->seqno == b->seqno && a->token == b->token && curs_eq(a->prod, b->prod) &&
	       curs_eq(a->cons, b->cons) &&
	       cdc_prod_flags_byte(&a->pf) == cdc_prod_flags_byte(&b->pf) &&
	       cdc_conn_flags_byte(&a->cf) == cdc_conn_flags_byte(&b->cf);
}
